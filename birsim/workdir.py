"""Compiler work directories: the files of the compiler's BIRSim hook, without the compiler.

A work directory holds, per core, the backend's JSON dump after ``lower_sync``
(``ncXX/sg00/bir_debug.*after-lower_sync*.json``; with one core ``sg00/...``) and the
hook's files: inputs ``value_<name>.npy`` (an input that aliases an output:
``<name>.must_alias_input``), goldens ``value_<name>.npy`` of outputs, and birsim's
results ``value_<name>-birsim.npy`` (compiler-dumps.md, "The BIRSim file protocol").

:func:`find_dumps` lists the per-core dumps, :func:`read_inputs` reads the inputs,
:func:`check` runs everything and compares with the goldens (``python -m birsim check``).
"""

import glob
import os
import re
import warnings

import numpy as np

from .errors import WorkdirError

__all__ = ["DUMP_GLOB", "find_dumps", "core_dirs", "read_inputs", "write_outputs",
           "compare", "check", "Comparison", "DEFAULT_TOLERANCE"]

#: The dump the compiler writes with ``--internal-print-after=lower_sync``.
DUMP_GLOB = "bir_debug.*after-lower_sync*.json"
#: ``--tolerance`` default: (rel in percent, abs), as ``--birsim-output-tolerance``.
DEFAULT_TOLERANCE = (1.0, 1e-5)

_NC = re.compile(r"^nc(\d+)$")
_FLAG = "neuronx-cc --internal-print-after=lower_sync (kept with " \
        "--internal-compiler-debug-mode=all)"


def core_dirs(workdir):
    """The per-core directories of a work directory, core 0 first: ``ncXX/sg00`` for
    XX = 0, 1, ... (they must be contiguous), else ``[sg00]``. A dump file given
    instead of a directory is one core whose directory is the file's."""
    workdir = os.fspath(workdir)
    if os.path.isfile(workdir):
        return [os.path.dirname(os.path.abspath(workdir))]
    if not os.path.isdir(workdir):
        raise WorkdirError("no such work directory or dump file: %r" % workdir)
    cores = {}
    for entry in os.listdir(workdir):
        m = _NC.match(entry)
        if m and os.path.isdir(os.path.join(workdir, entry)):
            cores[int(m.group(1))] = os.path.join(workdir, entry, "sg00")
    if cores:
        missing = [k for k in range(max(cores) + 1) if k not in cores]
        if missing:
            raise WorkdirError("%s: core directories must be nc00, nc01, ... without gaps; "
                               "missing %s" % (workdir, ", ".join("nc%02d" % k for k in missing)))
        return [cores[k] for k in sorted(cores)]
    if os.path.isdir(os.path.join(workdir, "sg00")):
        return [os.path.join(workdir, "sg00")]
    raise WorkdirError("%s is not a compiler work directory: it has neither ncXX/sg00/ "
                       "(one per core) nor sg00/" % workdir)


def find_dumps(workdir, pattern=None):
    """The dump of each core (module k from ``ncXX`` with XX = k). ``pattern`` (a glob,
    default :data:`DUMP_GLOB`) is matched in each core's directory; a dump file given as
    ``workdir`` is the one core's dump."""
    workdir = os.fspath(workdir)
    if os.path.isfile(workdir):
        return [workdir]
    pattern = pattern or DUMP_GLOB
    dumps = []
    for d in core_dirs(workdir):
        found = sorted(glob.glob(os.path.join(glob.escape(d), pattern)))
        if len(found) == 1:
            dumps.append(found[0])
            continue
        if found:
            raise WorkdirError("%s: %d files match %r (%s); choose one with --dump GLOB"
                               % (d, len(found), pattern,
                                  ", ".join(os.path.basename(f) for f in found)))
        colz = glob.glob(os.path.join(glob.escape(d), "*.colz"))
        hint = (" (it holds %s: birsim reads the JSON dump, not the compressed .colz format)"
                % os.path.basename(colz[0])) if colz else ""
        raise WorkdirError("%s: no file matches %r%s; birsim reads the JSON dump that %s "
                           "writes" % (os.path.join(d, pattern), pattern, hint, _FLAG))
    return dumps


def _input_file(dirs, k, name):
    """The file holding input ``name`` of core ``k``: its own ``value_<name>.npy`` or
    ``<name>.must_alias_input``, else another core's (an input of several modules is one
    tensor). Returns (path, looked-for list)."""
    looked = []
    for d in [dirs[k]] + [x for i, x in enumerate(dirs) if i != k]:
        for fname in ("value_%s.npy" % name, "%s.must_alias_input" % name):
            p = os.path.join(d, fname)
            looked.append(p)
            if os.path.isfile(p):
                return p, looked
    return None, looked


def _load_npy(path):
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise WorkdirError("cannot read %s as a .npy file: %s" % (path, e)) from None


def read_inputs(modules, dirs):
    """``{name: array}`` for every input of ``modules`` (module k's from ``dirs[k]``),
    and ``{name: array}`` of outputs that alias an input (``<name>.must_alias_input``
    beside an output: its initial contents). bf16/fp8 files saved as raw bits are viewed
    as the declared dtype."""
    inputs, preset = {}, {}
    for k, m in enumerate(modules):
        for t in m.inputs:
            if t.name in inputs:
                continue
            path, looked = _input_file(dirs, k, t.name)
            if path is None:
                raise WorkdirError("missing input '%s' (%s %s) of core %d: looked for %s"
                                   % (t.name, t.dtype, list(t.shape), k, ", ".join(looked)))
            inputs[t.name] = _as_declared(_load_npy(path), t)
        for t in m.outputs:
            p = os.path.join(dirs[k], "%s.must_alias_input" % t.name)
            if t.name not in preset and os.path.isfile(p):
                preset[t.name] = _as_declared(_load_npy(p), t)
    return inputs, preset


def _as_declared(arr, t):
    """Raw bits (``|V2``, ``uint16``, ``uint8``) of a bf16/fp8 tensor viewed as its dtype."""
    dt = t.numpy_dtype
    if arr.dtype != dt and arr.dtype.itemsize == dt.itemsize and \
            (arr.dtype.kind == "V" or (arr.dtype.kind == "u" and dt.kind == "V")):
        return np.ascontiguousarray(arr).view(dt)
    return arr


def write_outputs(outputs, out_dir):
    """``value_<name>-birsim.npy`` for each output (bf16/fp8 as raw bits); returns the
    paths."""
    from .kernels import _raw_dtype
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name, a in outputs.items():
        p = os.path.join(out_dir, "value_%s-birsim.npy" % name)
        np.save(p, np.ascontiguousarray(a).view(_raw_dtype(a.dtype)))
        paths[name] = p
    return paths


class Comparison:
    """One output against its golden: ``max_abs``, ``max_rel`` (over elements whose
    golden is nonzero), ``mismatches`` of ``size`` elements, ``ok``; ``golden`` is the
    file compared with (None: no golden)."""

    def __init__(self, name, shape, golden=None, max_abs=0.0, max_rel=0.0, mismatches=0,
                 size=0, note=""):
        self.name, self.shape, self.golden = name, shape, golden
        self.max_abs, self.max_rel = max_abs, max_rel
        self.mismatches, self.size, self.note = mismatches, size, note

    @property
    def ok(self):
        return self.golden is None or (self.mismatches == 0 and not self.note)

    @property
    def verdict(self):
        if self.golden is None:
            return "no golden"
        return "PASS" if self.ok else "FAIL"


def compare(name, actual, golden, rel, abs_, golden_path="golden"):
    """Compare with the compiler's ``--birsim-output-tolerance REL,ABS`` convention:
    REL is a percentage. An element matches when ``|a - g| <= ABS + REL/100 * |g|``
    (NaN matches NaN, an infinity the same infinity); values are compared as float64
    after decoding the declared dtype (bf16/fp8 included)."""
    if tuple(golden.shape) != tuple(actual.shape):
        return Comparison(name, actual.shape, golden_path, float("nan"), float("nan"),
                          actual.size, actual.size,
                          note="golden shape %s, output %s" % (list(golden.shape),
                                                               list(actual.shape)))
    a = actual.astype(np.float64)
    g = golden.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - g)
        same = (a == g) | (np.isnan(a) & np.isnan(g))
        close = same | (diff <= abs_ + rel / 100.0 * np.abs(g))
        finite = np.isfinite(diff)
        max_abs = float(diff[finite].max()) if finite.any() else 0.0
        nz = finite & (g != 0)
        max_rel = float((diff[nz] / np.abs(g[nz])).max()) if nz.any() else 0.0
    if (~same & ~finite).any():
        max_abs = max_rel = float("inf")
    return Comparison(name, actual.shape, golden_path, max_abs, max_rel,
                      int(np.count_nonzero(~close)), int(actual.size))


def check(workdir, dump=None, tolerance=DEFAULT_TOLERANCE, out=None, **sim_options):
    """Run the work directory's dumps on its inputs, write the results and compare them
    with the goldens. Returns (list of :class:`Comparison`, output paths, simulator)."""
    from .loader import load
    from .simulator import Simulator
    dumps = find_dumps(workdir, dump)
    dirs = [os.path.dirname(os.path.abspath(d)) for d in dumps]
    modules = load(dumps)
    inputs, preset = read_inputs(modules, dirs)
    sim = Simulator(modules, **sim_options)
    for name, arr in preset.items():
        sim.preset(name, arr)
    outputs = sim.run(inputs)
    out_dir = out or dirs[0]
    paths = write_outputs(outputs, out_dir)
    results = []
    rel, abs_ = tolerance
    by_core = {t.name: t for m in modules for t in m.outputs}
    for name, a in outputs.items():
        gpath = None
        for d in dirs:
            p = os.path.join(d, "value_%s.npy" % name)
            if os.path.isfile(p):
                gpath = p
                break
        if gpath is None:
            results.append(Comparison(name, a.shape, size=a.size))
            continue
        golden = _as_declared(_load_npy(gpath), by_core[name])
        results.append(compare(name, a, golden, rel, abs_, gpath))
    return results, paths, sim


def format_table(results):
    """The per-output table ``python -m birsim check`` prints."""
    head = ("output", "shape", "max abs err", "max rel err", "mismatching", "verdict")
    rows = [head]
    for r in results:
        if r.golden is None:
            rows.append((r.name, str(list(r.shape)), "-", "-", "-", r.verdict))
            continue
        rows.append((r.name, str(list(r.shape)), "%.3g" % r.max_abs, "%.3g" % r.max_rel,
                     "%d / %d" % (r.mismatches, r.size),
                     r.verdict + (" (%s)" % r.note if r.note else "")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in rows)

