"""Compiler work directories: the files of the compiler's BIRSim hook, without the compiler.

A work directory holds one directory per core, ``ncNN/sg00/`` (one core: ``sg00/``), with
that core's program and the hook's tensor files, in one of two flows (docs/cli.md, "check"):

============  ===================================  =============================
              standard (``ncc_driver``, nki-lib)    baremetal (``baremetal_driver``)
============  ===================================  =============================
program       ``bir_debug.*after-lower_sync*.json``, else ``bir.json``
inputs        ``value_<name>.npy``                  ``<name>.npy``
results       ``value_<name>-birsim.npy``           ``<name>-birsim.npy``
goldens       ``value_<name>.npy``                  ``<name>.npy``
============  ===================================  =============================

A tensor's file stem is any name the program gives it (its memory location's, its set's);
two different files for one tensor are refused, listing both. The directory's flow is the
one its inputs are found in (no inputs: standard). :func:`check` runs everything, writes the
results under core 0's directory and compares them with the goldens by BIRSim's rules.
The directory is untrusted input: only regular files are read, each checked against the
size its tensor needs, ``.npy`` files never unpickled (their header checked against their
size first), and results are written as new files (a symlink in their place is replaced,
not followed) inside the directory only: a core 0 directory that a symlink puts elsewhere
needs ``out``.
"""

import glob
import os
import re
import stat
import tempfile
import tokenize

import numpy as np

from . import _warn
from ._birsim import limits as _limits
from ._load.dumpdir import DUMP_GLOB, KERNEL_BIR, _regular, core_dirs, find_dumps
from .errors import WorkdirError

__all__ = ["DUMP_GLOB", "KERNEL_BIR", "FLOWS", "find_dumps", "core_dirs", "Workdir",
           "compare", "check", "Comparison", "CheckReport", "DEFAULT_TOLERANCE"]

#: ``--tolerance`` default: (REL in percent, ABS), as ``--birsim-output-tolerance``;
#: :func:`check` takes that pair or its ``"REL,ABS"`` text.
DEFAULT_TOLERANCE = (1.0, 1e-5)
#: File names per flow: (input or golden, result).
FLOWS = {"standard": ("value_%s.npy", "value_%s-birsim.npy"),
         "baremetal": ("%s.npy", "%s-birsim.npy")}
#: BIRSim's memory starts as 0xFF bytes: what a never-written output element holds.
FILL = 0xFF

_NPY_HEADER_MAX = 1 << 16          # .npy headers are padded to 64 bytes; allow plenty


# {=== Files: regular files only, read within bounds, written as new files ===}

_NPY_ERRORS = (OSError, ValueError, EOFError, SyntaxError, TypeError, OverflowError,
               tokenize.TokenError)


def _npy_header(fh, size):
    """Validate the header of the .npy file open as ``fh`` (``size`` bytes) before NumPy
    allocates anything: the data it declares (shape x itemsize) must be in the file."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version not in ((1, 0), (2, 0)):
        raise ValueError("unsupported .npy format version %d.%d" % version)
    read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, _, dtype = read(fh)
    if dtype.hasobject:
        raise ValueError("it holds Python objects (birsim never unpickles)")
    count = 1
    for d in shape:
        if d < 0:
            raise ValueError("negative dimension in shape %s" % (shape,))
        count *= d
    if count * dtype.itemsize > size - fh.tell():
        raise ValueError("its header declares %s %s (%d bytes of data) but the file holds "
                         "%d" % (dtype, list(shape), count * dtype.itemsize, size - fh.tell()))


def _load_npy(path, nbytes=None):
    """The array in ``path`` (a regular file), never unpickled; with ``nbytes`` (the data
    its tensor needs), a file much larger than that is refused before it is read, and a
    header declaring more data than the file holds before NumPy allocates it."""
    if not _regular(path):
        raise WorkdirError("%s: nothing is there (a symlink to nothing)" % path)
    size = os.path.getsize(path)
    if nbytes is not None and size > nbytes + _NPY_HEADER_MAX:
        raise WorkdirError("%s holds %d bytes; its tensor needs %d (plus a .npy header)"
                           % (path, size, nbytes))
    try:
        with open(path, "rb") as fh:
            if fh.read(4) == b"PK\x03\x04":         # an .npz archive under this name
                raise WorkdirError("%s is an .npz archive, not a .npy array" % path)
            fh.seek(0)
            _npy_header(fh, size)
            fh.seek(0)
            return np.load(fh, allow_pickle=False)
    except _NPY_ERRORS as e:
        raise WorkdirError("cannot read %s as a .npy file: %s" % (path, e)) from None


def _save_npy(path, arr):
    """Write ``arr`` to ``path`` as a new file: written beside it, then renamed over it,
    so an existing symlink is replaced (its target untouched) and a crash leaves no half
    file."""
    d = os.path.dirname(path) or "."
    if os.path.isdir(path) and not os.path.islink(path):
        raise WorkdirError("cannot write %s: a directory has that name" % path)
    fd, tmp = tempfile.mkstemp(prefix=".birsim-", suffix=".npy", dir=d)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WorkdirError("cannot write %s: %s" % (path, e.strerror or e)) from None


def _safe_stem(name, what):
    """A tensor name usable as a file stem inside the directory."""
    if not name or "/" in name or "\0" in name or name in (".", "..") or \
            (os.sep != "/" and os.sep in name):
        raise WorkdirError("%s '%s' cannot name a file in the work directory (it would "
                           "leave the directory)" % (what, name))
    return name


# {=== Tensors and their files ===}

def _stems(t):
    """Every name the program gives tensor ``t``: its memory location's, its set's, its
    ``debug.tensor_name``."""
    return list(dict.fromkeys(n for n in (t.location, t.name, t.debug_name) if n))


def _find(dirs, stems, flows, role):
    """(flow, stem, path) of the file of a tensor whose names are ``stems``, looked for in
    ``dirs`` in order and, in each, in ``flows`` in order; None when there is none. Files
    under two different names of one tensor are ambiguous."""
    for d in dirs:
        for flow in flows:
            hits = [(s, os.path.join(d, FLOWS[flow][0] % s)) for s in stems]
            hits = [(s, p) for s, p in hits if _regular(p)]
            if len(hits) > 1:
                raise WorkdirError("%s: ambiguous: %d files could hold it (%s); remove all "
                                   "but one" % (role, len(hits), ", ".join(p for _, p in hits)))
            if hits:
                return flow, hits[0][0], hits[0][1]
    return None


class Workdir:
    """A work directory read: ``dirs`` (one per core), ``dumps``, ``modules``, ``flow``
    (``"standard"`` or ``"baremetal"``), ``inputs`` (name -> array) and, per output name,
    the stem its files use (``stems``)."""

    def __init__(self, workdir, dump=None, flow=None, memory_limit=None):
        from ._load.passes import load
        if flow is not None and flow not in FLOWS:
            raise WorkdirError("flow must be one of %s, got %r" % (", ".join(FLOWS), flow))
        self.path = os.fspath(workdir)
        self.dumps = find_dumps(workdir, dump)
        self.dirs = [os.path.dirname(os.path.abspath(d)) for d in self.dumps]
        self.modules = load(self.dumps)
        self.file_bytes = self._file_bytes(memory_limit)
        self.inputs, self.input_files = {}, {}
        self.flow = self._read_inputs(flow)
        self.stems = {}

    def _file_bytes(self, memory_limit):
        """Bytes the arrays of ``check`` hold besides the simulator: every input (read
        whole), every result and the largest golden (read one at a time). Above
        ``memory_limit`` the directory is refused before any file is read."""
        def nbytes(t):
            return int(np.prod(t.shape, dtype=np.int64)) * t.numpy_dtype.itemsize
        ins = {t.name: nbytes(t) for m in self.modules for t in m.inputs}
        outs = {t.name: nbytes(t) for m in self.modules for t in m.outputs}
        total = sum(ins.values()) + sum(outs.values()) + max(outs.values(), default=0)
        if memory_limit is not None and total > memory_limit:
            from .errors import OutOfMemoryError
            raise OutOfMemoryError(
                "%s: its inputs, results and largest golden take %d bytes as arrays, above "
                "memory_limit=%d" % (self.path, total, memory_limit))
        return total

    def _order(self, k):
        """Core k's directory first, then the others (an input of several modules is one
        tensor, whichever core's directory holds its file)."""
        return [self.dirs[k]] + [d for i, d in enumerate(self.dirs) if i != k]

    def _read_inputs(self, flow):
        flows = [flow] if flow else list(FLOWS)
        found = {}
        for k, m in enumerate(self.modules):
            for t in m.inputs:
                if t.name in self.inputs:
                    continue
                stems = [_safe_stem(s, "input") for s in _stems(t)]
                hit = _find(self._order(k), stems, flows, "input '%s'" % t.name)
                if hit is None:
                    looked = [os.path.join(d, FLOWS[f][0] % s) for d in self._order(k)
                              for f in flows for s in stems]
                    raise WorkdirError("missing input '%s' (%s %s) of core %d: looked for %s"
                                       % (t.name, t.dtype, list(t.shape), k,
                                          ", ".join(looked)))
                f, _, path = hit
                found.setdefault(f, path)
                arr = _load_npy(path, int(np.prod(t.shape)) * t.numpy_dtype.itemsize)
                self.inputs[t.name] = _as_declared(arr, t)
                self.input_files[t.name] = path
        if len(found) > 1:
            raise WorkdirError("the inputs mix the two flows' file names (%s); a work "
                               "directory is either standard (value_<name>.npy) or "
                               "baremetal (<name>.npy): pass --flow to choose"
                               % ", ".join("%s: %s" % kv for kv in sorted(found.items())))
        return flow or next(iter(found), "standard")

    def golden(self, t):
        """(stem, path) of output ``t``'s golden in this flow, core 0's directory first;
        (location stem, None) when there is none."""
        stems = [_safe_stem(s, "output") for s in _stems(t)]
        hit = _find(self._order(t.core), stems, [self.flow], "golden of output '%s'" % t.name)
        return (hit[1], hit[2]) if hit else (stems[0], None)

    def result_path(self, stem, out_dir=None):
        return os.path.join(out_dir or self.dirs[0], FLOWS[self.flow][1] % stem)

    def unmatched(self):
        """Golden-looking files of this flow (``.npy``, not a result) whose stem is no
        name of an input or output of any core's program."""
        pat = FLOWS[self.flow][0]
        prefix, suffix = pat.split("%s")
        names = {s for m in self.modules for t in m.inputs + m.outputs for s in _stems(t)}
        stray = []
        for d in self.dirs:
            for f in sorted(os.listdir(d)):
                if f.startswith(prefix) and f.endswith(suffix) and \
                        not f.endswith("-birsim.npy") and \
                        f[len(prefix):len(f) - len(suffix)] not in names:
                    stray.append(os.path.join(d, f))
        return stray


def _as_declared(arr, t):
    """Raw bits (``|V2``, ``uint16``, ``uint8``) of a bf16/fp8 tensor viewed as its dtype."""
    dt = t.numpy_dtype
    if arr.dtype != dt and arr.dtype.itemsize == dt.itemsize and \
            (arr.dtype.kind == "V" or (arr.dtype.kind == "u" and dt.kind == "V")):
        return np.ascontiguousarray(arr).view(dt)
    return arr


# {=== Golden rules ===}

class Comparison:
    """One output against its golden: ``max_abs``, ``max_rel`` (over elements whose
    golden is nonzero), ``mismatches`` of ``size`` elements, ``unwritten`` (elements no
    instruction wrote: they hold BIRSim's fill), ``note`` (why the golden could not be
    compared), ``golden`` the file compared with (None: no golden)."""

    def __init__(self, name, shape, golden=None, max_abs=0.0, max_rel=0.0, mismatches=0,
                 size=0, note="", unwritten=0, exact=False):
        self.name, self.shape, self.golden = name, shape, golden
        self.max_abs, self.max_rel = max_abs, max_rel
        self.mismatches, self.size, self.note = mismatches, size, note
        self.unwritten, self.exact = unwritten, exact

    @property
    def compared(self):
        return self.golden is not None

    @property
    def ok(self):
        return not self.compared or (self.mismatches == 0 and not self.note)

    @property
    def verdict(self):
        if not self.compared:
            return "no golden"
        return "PASS" if self.ok else "FAIL"


def compare(name, actual, golden, rel, abs_, golden_path="golden", unwritten=0):
    """BIRSim's golden rules (``--birsim-output-tolerance REL,ABS``): the golden must have
    the output's dtype and shape (otherwise FAIL, naming both); the output then passes
    when it equals the golden exactly, else element by element when
    ``|a - g| <= ABS + REL/100 * |g|`` (NaN matches NaN, an infinity the same infinity),
    in float64 after decoding the declared dtype (bf16/fp8 included): REL is in percent,
    read by :func:`birsim.testing.parse_tolerance`, and the element-wise test is
    :func:`birsim.testing.isclose`, the one :func:`birsim.testing.assert_sim_close`
    uses."""
    from .testing import parse_tolerance
    rtol, atol = parse_tolerance((rel, abs_))
    return _compare(name, actual, golden, rtol, atol, golden_path, unwritten)


def _compare(name, actual, golden, rtol, atol, golden_path, unwritten):
    from .testing import isclose
    if golden.dtype != actual.dtype or tuple(golden.shape) != tuple(actual.shape):
        return Comparison(name, actual.shape, golden_path, float("nan"), float("nan"),
                          actual.size, actual.size, unwritten=unwritten,
                          note="golden is %s %s, output %s %s"
                          % (golden.dtype, list(golden.shape), actual.dtype,
                             list(actual.shape)))
    if actual.dtype.kind in "iub":
        same = actual == golden                     # integers exactly, whatever their width
        a = actual.astype(np.float64)
        g = golden.astype(np.float64)
    else:
        a = actual.astype(np.float64)
        g = golden.astype(np.float64)
        same = (a == g) | (np.isnan(a) & np.isnan(g))
    if same.all():
        return Comparison(name, actual.shape, golden_path, 0.0, 0.0, 0, int(actual.size),
                          unwritten=unwritten, exact=True)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - g)
        close = same | isclose(a, g, rtol, atol)
        finite = np.isfinite(diff)
        max_abs = float(diff[finite].max()) if finite.any() else 0.0
        nz = finite & (g != 0)
        max_rel = float((diff[nz] / np.abs(g[nz])).max()) if nz.any() else 0.0
    if (~same & ~finite).any():
        max_abs = max_rel = float("inf")
    return Comparison(name, actual.shape, golden_path, max_abs, max_rel,
                      int(np.count_nonzero(~close)), int(actual.size), unwritten=unwritten)


class CheckReport:
    """What :func:`check` found: ``comparisons`` (one per output), ``results`` (output name
    -> result file written), ``workdir`` (the :class:`Workdir`), ``sim`` (the Simulator
    after the run), ``stray`` (golden-looking files no tensor claims). ``status`` is the
    exit status of ``birsim check``: 0 every output with a golden matches and at least
    one was compared, 1 a mismatch, 3 nothing compared."""

    def __init__(self, comparisons, results, workdir, sim, stray):
        self.comparisons, self.results = comparisons, results
        self.workdir, self.sim, self.stray = workdir, sim, stray

    @property
    def compared(self):
        return [c for c in self.comparisons if c.compared]

    @property
    def status(self):
        if any(not c.ok for c in self.comparisons):
            return 1
        return 0 if self.compared else 3


def _inside(d, workdir):
    """Refuse to write results in core directory ``d`` when a symlink puts it outside the
    work directory (a core directory linked elsewhere): results are written only inside
    the directory checked, or in ``out``."""
    top = workdir if os.path.isdir(workdir) else os.path.dirname(os.path.abspath(workdir))
    real, real_top = os.path.realpath(d), os.path.realpath(top)
    if os.path.commonpath([real, real_top]) != real_top:
        raise WorkdirError("%s leads to %s, outside the work directory %s (a symlink): birsim "
                           "writes results only inside the work directory; choose where "
                           "with --out DIR" % (d, real, top))


def check(workdir, dump=None, tolerance=DEFAULT_TOLERANCE, out=None, flow=None,
          **sim_options):
    """Run the work directory's programs on its inputs, write the results (never-written
    elements as BIRSim's ``0xFF`` fill) and compare them with the goldens (``tolerance``:
    the compiler's ``"REL,ABS"`` or ``(REL, ABS)``, REL in percent). Returns a
    :class:`CheckReport`; raises a :class:`birsim.BirsimError` when it cannot run."""
    from .kernels import _raw_dtype
    from .simulator import Simulator
    from .testing import parse_tolerance
    rtol, atol = parse_tolerance(tolerance)   # a bad tolerance fails before the run
    limit = sim_options.get("memory_limit")
    wd = Workdir(workdir, dump, flow, memory_limit=limit)
    if out is None:
        _inside(wd.dirs[0], wd.path)
    if limit is not None:                     # the run gets what the files leave
        sim_options["memory_limit"] = limit - wd.file_bytes
    sim = Simulator(wd.modules, **sim_options)
    outputs = sim.run(wd.inputs)
    if out is not None:
        os.makedirs(out, exist_ok=True)
    comparisons, results = [], {}
    by_name = {}
    for m in wd.modules:
        for t in m.outputs:
            by_name.setdefault(t.name, t)
    for name, arr in outputs.items():
        t = by_name[name]
        written = sim.written(name, t.core)
        unwritten = int(written.size - np.count_nonzero(written))
        if unwritten:
            raw = arr.view(np.uint8).reshape(arr.shape + (arr.dtype.itemsize,))
            raw[~written] = FILL
        stem, gpath = wd.golden(t)
        results[name] = path = wd.result_path(stem, out)
        _save_npy(path, np.ascontiguousarray(arr).view(_raw_dtype(arr.dtype)))
        if gpath is None:
            comparisons.append(Comparison(name, arr.shape, size=arr.size, unwritten=unwritten))
            continue
        golden = _as_declared(_load_npy(gpath, arr.nbytes), t)
        comparisons.append(_compare(name, arr, golden, rtol, atol, gpath, unwritten))
    stray = wd.unmatched()
    for p in stray:
        _warn.warn("%s looks like a golden (%s flow) but matches no output or input of the "
                   "program" % (p, wd.flow))
    return CheckReport(comparisons, results, wd, sim, stray)


def format_table(comparisons):
    """The per-output table ``birsim check`` prints."""
    head = ("output", "shape", "max abs err", "max rel err", "mismatching", "verdict")
    rows = [head]
    for r in comparisons:
        extra = []
        if r.note:
            extra.append(r.note)
        if r.unwritten:
            extra.append("%d never written" % r.unwritten)
        tail = " (%s)" % "; ".join(extra) if extra else ""
        if not r.compared:
            rows.append((r.name, str(list(r.shape)), "-", "-", "-", r.verdict + tail))
            continue
        rows.append((r.name, str(list(r.shape)), "%.3g" % r.max_abs, "%.3g" % r.max_rel,
                     "%d / %d" % (r.mismatches, r.size),
                     r.verdict + (" (exact)" if r.exact and not extra else "") + tail))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)
