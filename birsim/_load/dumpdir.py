"""Where a program is in a compiler work directory: the per-core directories and each
core's dump (docs/cli.md, "check"). A leaf of the loader's room: ``birsim.load`` of a
directory and :mod:`birsim.workdir` both read it; it imports no other birsim module but
the errors and the extension's limits.
"""

import glob
import os
import re
import stat

from .._birsim import limits as _limits
from ..errors import WorkdirError

__all__ = ["DUMP_GLOB", "KERNEL_BIR", "find_dumps", "core_dirs"]

#: The dump the compiler writes with ``--internal-print-after=lower_sync``.
DUMP_GLOB = "bir_debug.*after-lower_sync*.json"
#: The kernel BIR NKI's baremetal driver hands neuronx-cc (``sg00/bir.json``).
KERNEL_BIR = "bir.json"
_NC = re.compile(r"^nc(\d+)$")
_SG = re.compile(r"^sg(\d+)$")
_FLAG = "neuronx-cc --internal-print-after=lower_sync (kept with " \
        "--internal-compiler-debug-mode=all)"
_DUMP_MAX = 1 << 34                 # a dump larger than 16 GiB is not a dump


def _regular(path):
    """True when ``path`` is (or links to) a regular file; False when nothing is there.
    A FIFO, device, socket or directory by that name is refused by name, before any
    open (a FIFO would block, a device never end)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise WorkdirError("cannot inspect %s: %s" % (path, e.strerror or e)) from None
    if stat.S_ISREG(st.st_mode):
        return True
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
    raise WorkdirError("%s is %s: birsim reads only regular files" % (path, kind))


#: What reading an untrusted .npy can raise besides OSError: NumPy's header parser lets
#: tokenize's TokenError out of some malformed headers; a header may declare anything.


# {=== The directory's layout ===}

def core_dirs(workdir):
    """The per-core directories of a work directory, core 0 first: ``ncNN/sg00`` for
    NN = 0, 1, ... (contiguous, at most 64), else ``[sg00]``. A dump file given instead of
    a directory is one core whose directory is the file's. A subgraph directory other
    than ``sg00`` holding files is refused: running part of a modular compile would give
    a partial verdict."""
    workdir = os.fspath(workdir)
    if os.path.isfile(workdir):
        return [os.path.dirname(os.path.abspath(workdir))]
    if not os.path.isdir(workdir):
        raise WorkdirError("no such work directory or dump file: %r" % workdir)
    cores = {}
    for entry in os.listdir(workdir):
        m = _NC.match(entry)
        if m and os.path.isdir(os.path.join(workdir, entry)):
            k = int(m.group(1))
            if k in cores:
                raise WorkdirError("%s: two directories name core %d (%s and %s)"
                                   % (workdir, k, os.path.basename(os.path.dirname(cores[k])),
                                      entry))
            cores[k] = os.path.join(workdir, entry, "sg00")
    if cores:
        ks = sorted(cores)
        gap = next((i for i, k in enumerate(ks) if k != i), None)
        if gap is not None:
            raise WorkdirError("%s: core directories must be nc00, nc01, ... without gaps; "
                               "missing nc%02d" % (workdir, gap))
        if len(ks) > _limits["max_cores"]:
            raise WorkdirError("%s: %d core directories; birsim runs at most %d cores"
                               % (workdir, len(ks), _limits["max_cores"]))
        dirs = [cores[k] for k in ks]
        parents = [os.path.dirname(d) for d in dirs]
    elif os.path.isdir(os.path.join(workdir, "sg00")):
        dirs, parents = [os.path.join(workdir, "sg00")], [workdir]
    else:
        raise WorkdirError("%s is not a compiler work directory: it has neither ncNN/sg00/ "
                           "(one per core) nor sg00/" % workdir)
    _refuse_other_subgraphs(parents)
    return dirs


def _refuse_other_subgraphs(parents):
    others = []
    for p in parents:
        for entry in sorted(os.listdir(p)):
            full = os.path.join(p, entry)
            if _SG.match(entry) and entry != "sg00" and os.path.isdir(full) and os.listdir(full):
                others.append(full)
    if others:
        raise WorkdirError("a modular compile: subgraph directories besides sg00 hold files "
                           "(%s); birsim runs sg00 only, and running part of the program "
                           "would give a partial verdict" % ", ".join(others))


def find_dumps(workdir, pattern=None):
    """The program of each core (module k from ``ncNN`` with NN = k): the ``lower_sync``
    dump (``pattern``, a glob, default :data:`DUMP_GLOB`), else the kernel BIR
    ``bir.json`` of NKI's baremetal flow. A dump file given as ``workdir`` is the one
    core's program. A ``.colz`` kernel (NKI's compressed format) is refused with the way to
    get JSON."""
    workdir = os.fspath(workdir)
    if os.path.isfile(workdir):
        return [workdir]
    dumps = []
    for d in core_dirs(workdir):
        found = sorted(glob.glob(os.path.join(glob.escape(d), pattern or DUMP_GLOB)))
        if len(found) > 1:
            raise WorkdirError("%s: %d files match %r (%s); choose one with --dump GLOB"
                               % (d, len(found), pattern or DUMP_GLOB,
                                  ", ".join(os.path.basename(f) for f in found)))
        if not found and pattern is None and _regular(os.path.join(d, KERNEL_BIR)):
            found = [os.path.join(d, KERNEL_BIR)]
        if found:
            if not _regular(found[0]):
                raise WorkdirError("%s: nothing is there (a symlink to nothing)" % found[0])
            if os.path.getsize(found[0]) > _DUMP_MAX:
                raise WorkdirError("%s: %d bytes is too large for a BIR-JSON program"
                                   % (found[0], os.path.getsize(found[0])))
            dumps.append(found[0])
            continue
        colz = sorted(glob.glob(os.path.join(glob.escape(d), "*.colz")))
        if colz:
            raise WorkdirError("%s holds %s: NKI's compressed kernel format, which is not "
                               "publicly described; run NKI with NKI_USE_COLZ=0 to have it "
                               "write JSON (bir.json), or dump the backend's program with %s"
                               % (d, os.path.basename(colz[0]), _FLAG))
        raise WorkdirError("%s: no file matches %r%s; birsim reads the JSON dump that %s "
                           "writes, or NKI's %s"
                           % (d, pattern or DUMP_GLOB,
                              "" if pattern else " and there is no " + KERNEL_BIR,
                              _FLAG, KERNEL_BIR))
    return dumps
