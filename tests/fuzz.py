"""Crash-only fuzzer: mutated BIR programs, module lists and work directories must run or
raise a clear birsim error.

Seeds are the examples (examples/*.json), programs the test suite builds
(tests/data/fuzz_seeds/, recorded from the suite's ``birsim.load`` calls) and the issue-12
reproducers (tests/data/repros/). Cases come in three kinds, chosen by case number
(``case_kind``):

- program: one seed with 1-4 random mutations (values replaced by boundary numbers, huge or
  non-finite floats, other opcodes/dtypes/kinds, lone surrogates, deep nesting, deleted or
  duplicated entries), then ``birsim.load`` -> ``Simulator(...)`` -> ``run()`` ->
  ``read()``/``register()``;
- list: a module list of 2-8 programs in both spellings (seeds, the example work
  directories' dumps and compiler-shaped core programs built here with birsim.dumps, some
  with addr-placed Internal DRAM tensors), unmutated or mutated, loaded as one JSON array
  and run with ``Simulator(modules)`` (outputs read on every core);
- workdir: a compiler work directory (one or several cores, ncNN/sg00 or sg00, standard or
  baremetal names, generated or copied from examples/*_workdir) made hostile: FIFOs,
  symlinks in and out of the directory (dangling, looping, to /dev/zero), directories where
  files should be, .npz under .npy names, truncated/oversized/huge-header .npy files, wrong
  dtypes and shapes, tensor names with ``..`` or ``/``, gaps and duplicates in ncNN, extra
  sgMM, results already present as symlinks/directories/FIFOs; then
  ``birsim.workdir.check`` in the worker. Each case is a *spec* (path -> file kind) built in
  its own directory ``<sandbox>/c/case`` next to ``<sandbox>/c/outside`` (the files its
  symlinks point at), removed after the case; nothing of it lies outside the sandbox (names
  go up at most three levels; absolute names point into the sandbox).

A *finding* is any of:
- crash: the worker process died (signal, abort, sanitizer report -- run the sanitizer
  build with the ASan runtime preloaded, as .ci/run does);
- hang: one case took longer than --case-timeout seconds;
- foreign: an exception that is not a BirsimError, or a BirsimError with an empty message;
- outside: a work-directory case changed anything outside its case directory;
- cleanup: a work-directory case could not be removed.

Cases are numbered and generated deterministically from (--seed, number), so a finding is
reproduced by number. Findings are written to --out (a program as .json; a module list or
a work-directory spec as JSON in a .fuzzcase file, which ``replay_saved`` runs as found)
and make the exit status 1.

    python tests/fuzz.py --minutes 2                 # CI (bounded pass)
    nice python tests/fuzz.py --minutes 30 --seed 7  # by hand, longer
    python tests/fuzz.py --replay N --seed S         # rerun case N in this process
    python tests/fuzz.py --kinds workdir --minutes 5 # one kind only
"""

import argparse
import copy
import json
import math
import os
import pathlib
import random
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
SEED_DIRS = [ROOT / "examples", HERE / "data" / "fuzz_seeds", HERE / "data" / "repros"]

INTS = [0, 1, -1, 2, 3, 4, 7, 8, 127, 128, 129, 255, 256, 4096, 65535, 65536, 2**31 - 1,
        2**31, -2**31, 2**32, 2**32 + 1, 2**40, 2**53 + 1, 2**55, 2**62, 2**62 + 1, 2**63 - 1,
        -2**63, 2**63, 2**64, -2**64, 10**30, -10**30]
FLOATS = [0.5, -0.0, 1e300, -1e300, 1e-300, float("inf"), float("-inf"), float("nan"),
          3.4e38, 2.0**63, -2.0**63, 2.0**64, 1.5]
STRINGS = ["", "zz", "\ud800", "a\x00b", "main", "b0", "SB", "DRAM", "PSUM", "float32",
           "int8", "uint64", "int32", "bfloat16", "float8_e4m3", "DVE", "Pool", "SP",
           "Activation", "PE", "add", "divide", "mod", "ExternalInput", "ExternalOutput",
           "Internal", "x" * 300]
OPCODES = ["TensorCopy", "TensorTensor", "TensorScalarPtr", "Activation", "Memset",
           "RegisterAlu", "RegisterMove", "TensorLoad", "TensorSave", "Loop",
           "DynamicForLoop", "DoWhile", "Branch", "Select", "MatMult", "TensorReduce",
           "Transpose", "Iota", "DMATrigger", "CustomOp", "Call", "Break", "Return",
           "EventSemaphore", "DevicePrint", "GetGlobalRankId", "TensorScalar", "Exit"]
OTHER = [None, True, False, [], {}, [[1, 1]], [[0, 1 << 30]], [[1, 128], [0, 4]],
         {"kind": "AffIVKind", "axis": "i"}, {"kind": "MultKind", "var": 3, "scale": 2**62},
         {"kind": "IntRuntimeValueKind", "regref": "r0"}]


def load_seeds():
    seeds = []
    for d in SEED_DIRS:
        for p in sorted(d.glob("*.json")):
            seeds.append((str(p.relative_to(ROOT)), p.read_text()))
    return seeds


def _slots(obj):
    out = []

    def walk(o, depth):
        if depth > 60:
            return
        if isinstance(o, dict):
            for k, v in o.items():
                out.append((o, k))
                walk(v, depth + 1)
        elif isinstance(o, list):
            for i, v in enumerate(o):
                out.append((o, i))
                walk(v, depth + 1)
    walk(obj, 0)
    return out


def _nest(depth):
    e = {"kind": "AffIVKind", "axis": "i"}
    for _ in range(depth):
        e = {"kind": "AffExprKind", "c": 1, "terms": [{"idx": e, "coeff": 1}]}
    return e


def mutate(obj, rng):
    slots = _slots(obj)
    if not slots:
        return
    parent, key = rng.choice(slots)
    cur = parent[key]
    r = rng.random()
    if r < 0.08 and isinstance(parent, dict):
        del parent[key]
    elif r < 0.14 and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(cur))              # duplicate an entry
    elif r < 0.18 and isinstance(parent, list) and len(parent) > 1:
        j = rng.randrange(len(parent))
        parent[key], parent[j] = parent[j], parent[key]
    elif r < 0.45 and isinstance(cur, int) and not isinstance(cur, bool):
        parent[key] = rng.choice([cur + rng.choice([-1, 1, 2, -2, 64, 1 << 20]), -cur,
                                  cur * rng.choice([2, 4, 1 << 31]), rng.choice(INTS)])
    elif r < 0.55 and isinstance(cur, float):
        parent[key] = rng.choice(FLOATS + [cur * 1e10, -cur])
    elif r < 0.7 and isinstance(cur, str):
        if key == "opcode":
            parent[key] = rng.choice(OPCODES)
        else:
            parent[key] = rng.choice(STRINGS + [cur + "\ud800", cur * 2])
    elif r < 0.72:
        parent[key] = _nest(rng.choice([40, 300, 2500]))
        return True                                       # last mutation of the case
    elif r < 0.8:
        parent[key] = rng.choice(INTS + FLOATS)
    elif r < 0.88:
        parent[key] = rng.choice(STRINGS)
    else:
        parent[key] = copy.deepcopy(rng.choice(OTHER))


def make_case(seeds, base_seed, n):
    rng = random.Random(base_seed * 1_000_003 + n)
    name, text = seeds[rng.randrange(len(seeds))]
    prog = json.loads(text)
    for _ in range(rng.randint(1, 4)):
        if mutate(prog, rng):
            break
    return name, prog, rng


def _kernel(name, inputs, config):
    return [inputs[0]] if inputs else []


def run_case(prog, rng):
    """Returns None when the case ended cleanly, else a short description of a finding."""
    import numpy as np
    import warnings
    import birsim
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = birsim.load(prog)
            sim = birsim.Simulator(module, max_steps=3000, kernel_sim=_kernel,
                                   cores=rng.choice([1, 1, 1, 2]),
                                   memory_limit=1 << 30,
                                   schedule=rng.choice(["in_order", "round_robin", "random"]))
            inputs = {}
            for t in module.inputs:
                if math.prod(t.shape) > 1 << 22:
                    return None                  # the fuzzer would spend its time in NumPy
                inputs[t.name] = np.full(t.shape, rng.choice([1, 2, 3]), t.numpy_dtype)
            sim.run(inputs)
            for t in module.outputs[:2]:
                sim.read(t.name)
            for f in prog.get("functions", [])[:1] if isinstance(prog, dict) else []:
                for a in (f.get("allocations") or [])[:8] if isinstance(f, dict) else []:
                    if isinstance(a, dict) and a.get("Skind") == "register" and \
                            isinstance(a.get("name"), str):
                        sim.register(a["name"])
    except birsim.BirsimError as e:
        if not str(e):
            return f"empty message: {type(e).__name__}"
    except Exception as e:                        # noqa: BLE001 -- that is the finding
        import traceback
        tb = [f for f in traceback.extract_tb(e.__traceback__) if "birsim" in f.filename]
        site = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
        return f"foreign at {site}: {type(e).__name__}: {str(e)[:200]}"
    return None


def _foreign(e):
    """A finding for exception ``e`` (None when it is a birsim error with a message)."""
    import birsim
    if isinstance(e, birsim.BirsimError):
        return None if str(e) else f"empty message: {type(e).__name__}"
    import traceback
    tb = [f for f in traceback.extract_tb(e.__traceback__) if "birsim" in f.filename]
    site = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
    return f"foreign at {site}: {type(e).__name__}: {str(e)[:200]}"


# {=== Kinds of case ===}

#: Case n's kind is _KINDS[n % 10]: p(rogram), l(ist), w(orkdir). The program cases keep
#: the numbers they always had (the replayed findings of tests/hostile/test_hostile_repros.py: 3, 5, 6, 9).
_KINDS = "pplpwpplwp"
KIND_NAMES = {"p": "program", "l": "list", "w": "workdir"}


def case_kind(n):
    return KIND_NAMES[_KINDS[n % len(_KINDS)]]


def make_any(seeds, base_seed, n):
    """(kind, seed name, case, rng) of case n: a program dict, a list case or a workdir
    spec."""
    kind = case_kind(n)
    if kind == "program":
        name, case, rng = make_case(seeds, base_seed, n)
    elif kind == "list":
        name, case, rng = make_list_case(seeds, base_seed, n)
    else:
        name, case, rng = make_workdir_case(seeds, base_seed, n)
    return kind, name, case, rng


def run_any(kind, case, rng, sandbox=None):
    if kind == "program":
        return run_case(case, rng)
    if kind == "list":
        return run_list_case(case, rng)
    return run_workdir_case(case, rng, sandbox)


# {=== Compiler-shaped core programs (birsim.dumps) ===}

#: addrs of Internal DRAM tensors placed in a core's arena (the per-core placement crash:
#: one module placed, the other not, or both at different addrs)
ADDRS = [0, 64, 128, 4096, 8192, 65536, 1 << 20]


def core_program(rng, k, ncores, names=None, shape=(4, 8)):
    """Core k of ncores (compiler spelling): y[k] := x[k] through an SB tile and, maybe, an
    Internal DRAM tensor ``scr`` placed at an addr; one engine, program order (race-free).
    ``names`` renames x, y, scr."""
    from birsim import dumps as D
    names = names or {}
    x, y, scr = names.get("x", "x"), names.get("y", "y"), names.get("scr", "scr")
    R, F = shape
    allocs = [D.dram(x, "ExternalInput", [ncores * R, F]),
              D.dram(y, "ExternalOutput", [ncores * R, F]), D.tile("t", R, F * 4)]
    src = D.full(x, 1, R * F, offset=k * R * F)
    body = []
    if rng.random() < 0.6:
        n = R * F * rng.choice([1, 1, 2, 16])
        allocs.append(D.dram(scr, "Internal", [n], addr=rng.choice(ADDRS)))
        body.append(D.insn("ld0", "DMACopy", "SP", ins=[src], outs=[D.full(scr, 1, R * F)]))
        src = D.full(scr, 1, R * F)
    body.append(D.insn("ld", "DMACopy", "SP", ins=[src], outs=[D.full("t", R, F)]))
    body.append(D.insn("st", "DMACopy", "SP", ins=[D.full("t", R, F)],
                       outs=[D.full(y, 1, R * F, offset=k * R * F)]))
    return D.module(allocs, [("entry", body)])


def _example_dumps():
    """(name, text) of the example work directories' programs (compiler spelling)."""
    out = []
    for p in sorted(ROOT.glob("examples/*_workdir/**/*.json")):
        out.append((str(p.relative_to(ROOT)), p.read_text()))
    return out


_EXAMPLE_DUMPS = None


def example_dumps():
    global _EXAMPLE_DUMPS
    if _EXAMPLE_DUMPS is None:
        _EXAMPLE_DUMPS = _example_dumps()
    return _EXAMPLE_DUMPS


# {=== Module lists ===}

def make_list_case(seeds, base_seed, n):
    """A list of 2-8 programs (rarely 0, 1 or 65) of mixed spellings, unmutated (30 %) or
    with 1-4 mutations, and the form it is loaded in: JSON bytes, JSON str or a list."""
    rng = random.Random(base_seed * 1_000_003 + n)
    r = rng.random()
    count = 65 if r < 0.005 else rng.choice([0, 1]) if r < 0.02 else rng.randint(2, 8)
    shape = rng.choice([(4, 8), (2, 16), (8, 4)])
    mods, names = [], []
    for k in range(count):
        r = rng.random()
        if r < 0.45 or count > 8:
            mods.append(core_program(rng, k, count, shape=shape))
            names.append("core_program")
        elif r < 0.7:
            name, text = rng.choice(example_dumps())
            mods.append(json.loads(text))
            names.append(name)
        else:
            name, text = seeds[rng.randrange(len(seeds))]
            mods.append(json.loads(text))
            names.append(name)
    if mods and rng.random() < 0.7:
        for _ in range(rng.randint(1, 4)):
            r = rng.random()
            k = rng.randrange(len(mods))
            if r < 0.05:
                mods[k] = copy.deepcopy(rng.choice(OTHER + INTS[:4] + STRINGS[:3]))
            elif r < 0.1:
                mods[k] = {"module": mods[k]}
            elif r < 0.15:
                mods.insert(k, copy.deepcopy(mods[k]))
            elif mutate(mods[k], rng):
                break
    r = rng.random()
    form = "bytes" if r < 0.6 else "str" if r < 0.8 else "list"
    return "+".join(sorted(set(names))) or "empty", {"modules": mods, "form": form}, rng


def run_list_case(case, rng):
    """Load the list as one JSON array, run it with Simulator(modules), read the outputs on
    every core. None when the case ended cleanly, else a short description of a finding."""
    import numpy as np
    import warnings
    import birsim
    mods = src = case["modules"]
    try:
        if case["form"] == "list":
            src = mods
        else:
            try:
                text = json.dumps(mods)
            except (RecursionError, ValueError):            # deep nesting: as a list
                text = None
            src = mods if text is None else text.encode() if case["form"] == "bytes" else text
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            modules = birsim.load(src)
            if not isinstance(modules, list):
                return "a JSON array loaded as %s" % type(modules).__name__
            sim = birsim.Simulator(modules, max_steps=3000, kernel_sim=_kernel,
                                   memory_limit=1 << 30,
                                   schedule=rng.choice(["in_order", "round_robin", "random"]),
                                   checks=rng.choice([None, None, None, "all"]),
                                   uninitialized=rng.choice(["zero", "zero", "nan"]))
            inputs = {}
            for m in modules:
                for t in m.inputs:
                    if math.prod(t.shape) > 1 << 22:
                        return None              # the fuzzer would spend its time in NumPy
                    inputs.setdefault(t.name, np.full(t.shape, rng.choice([1, 2, 3]),
                                                      t.numpy_dtype))
            sim.run(inputs)
            for k, m in enumerate(modules):
                for t in m.outputs[:2]:
                    sim.read(t.name, core=k)
    except TypeError as e:
        if src is mods and str(e).startswith("birsim.load() takes"):
            return None                          # a Python list holding a non-module: the API's
        return _foreign(e)                       # documented TypeError (JSON text: ProgramError)
    except Exception as e:                        # noqa: BLE001 -- classified
        return _foreign(e)
    return None


# {=== Work directories ===}
#
# A spec: {"tree": {relpath: entry}, "call": {...}}. Paths are relative to the case root
# (<sandbox>/c); the work directory is "case", the files symlinks may point at are under
# "outside". Entries: {"kind": "file", "data": bytes}, {"kind": "sparse", "size": n,
# "data": bytes} (data, then a hole up to size), {"kind": "dir"}, {"kind": "fifo"},
# {"kind": "symlink", "to": target, "base": "root" | "raw"} ("root": target is relative to
# the case root and made absolute; "raw": written as is, relative to the link's directory,
# or absolute). "@ROOT@" in a file's data is replaced by the case root's absolute path.

STANDARD_DUMP = "bir_debug.sg0000.after-lower_sync.before-lower_act.json"
#: Tensor names that would leave the directory, or are odd file stems. At most three ".."
#: go up (from case/ncNN/sg00 that is the case root, inside the sandbox); absolute names
#: point into the case root.
HOSTILE_NAMES = ["..", ".", "../y", "../../outside/victim", "../../../outside/victim",
                 "a/b", "@ROOT@/outside/victim", "@ROOT@/outside/new", "x\x00y", "",
                 " ", "value_x", "x-birsim", "nc01", "sg00", "x.npy", "x" * 300, "-", "*",
                 "[x]", "?", "~", "\ud800", "x\ny"]


def _npy(arr, version=None):
    import io
    import numpy as np
    buf = io.BytesIO()
    if version is None:
        np.save(buf, arr, allow_pickle=True)
    else:
        np.lib.format.write_array(buf, arr, version=version, allow_pickle=True)
    return buf.getvalue()


def _file(data):
    return {"kind": "file", "data": data if isinstance(data, bytes) else data.encode()}


def _rename(obj, old, new):
    """Every string equal to ``old`` in obj (a JSON tree) replaced by ``new``."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if v == old:
                obj[k] = new
            else:
                _rename(v, old, new)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if v == old:
                obj[i] = new
            else:
                _rename(v, old, new)


def _generated_tree(rng, tree):
    """A work directory of core_program()s: (core dirs, flow, output names)."""
    import numpy as np
    ncores = rng.choice([1, 1, 2, 2, 3, 4])
    flow = rng.choice(["standard", "baremetal"])
    pre = "value_" if flow == "standard" else ""
    single = ncores == 1 and rng.random() < 0.6
    dirs = ["case/sg00"] if single else ["case/nc%02d/sg00" % k for k in range(ncores)]
    dump = "bir.json" if flow == "baremetal" or rng.random() < 0.2 else STANDARD_DUMP
    names = {"x": "x", "y": "y", "scr": "scr"}
    if rng.random() < 0.25:
        names[rng.choice(["x", "y", "scr"])] = rng.choice(HOSTILE_NAMES)
    shape = rng.choice([(4, 8), (2, 16)])
    x = np.arange(ncores * shape[0] * shape[1], dtype=np.float32).reshape(ncores * shape[0],
                                                                         shape[1])
    for k, d in enumerate(dirs):
        prog = core_program(rng, k, ncores, names, shape)
        if rng.random() < 0.15:
            for _ in range(rng.randint(1, 3)):
                if mutate(prog, rng):
                    break
        try:
            text = json.dumps(prog)
        except (RecursionError, ValueError):
            text = "{"
        tree[d + "/" + dump] = _file(text)
        for role, arr, p in ((names["x"], x, 0.8 if k else 1.0),
                             (names["y"], x, 0.5 if k == 0 else 0.1)):
            stem = role.replace("@ROOT@", "")
            if rng.random() < p and stem and "/" not in stem and "\x00" not in stem and \
                    stem not in (".", "..") and len(stem) < 200 and stem == role:
                try:
                    stem.encode()
                except UnicodeEncodeError:
                    continue
                tree[d + "/" + pre + stem + ".npy"] = _file(_npy(arr))
    return dirs, flow, [names["y"]]


def _example_tree(rng, tree):
    """A copy of one of examples/*_workdir (its tracked files: no results, no hidden
    files such as a concurrent check's temporaries)."""
    bases = sorted(p for p in ROOT.glob("examples/*_workdir") if p.is_dir())
    base = rng.choice(bases)
    dirs = set()
    for p in sorted(base.rglob("*")):
        rel = "case/" + str(p.relative_to(base))
        if p.name.endswith("-birsim.npy") or p.name.startswith("."):
            continue
        try:
            if p.is_file():
                tree[rel] = _file(p.read_bytes())
                dirs.add(os.path.dirname(rel))
        except OSError:
            continue
    flow = "baremetal" if any(k.endswith("/bir.json") for k in tree) else "standard"
    return sorted(dirs), flow, ["out", "kcache"]


def _files(tree, suffix=""):
    return sorted(k for k, v in tree.items() if k.startswith("case/") and
                  v["kind"] == "file" and k.endswith(suffix))


def _hostile_file(rng, data, npy=True):
    """An entry that replaces a regular file holding ``data`` (hostile kinds and bytes).
    A dump is read whole below birsim's 16 GiB bound, so a sparse one stays small."""
    import numpy as np
    r = rng.randrange(16)
    if r == 0:
        return {"kind": "fifo"}
    if r == 1:
        return {"kind": "dir"}
    if r == 2:
        return {"kind": "symlink", "base": "root",
                "to": rng.choice(["outside/victim.npy", "outside/victim.json", "outside/dir",
                                  "outside/fifo", "outside/missing"])}
    if r == 3:
        return {"kind": "symlink", "base": "raw",
                "to": rng.choice(["/dev/zero", "/dev/null", "/dev/urandom", ".", "..",
                                  "missing", "../../../outside/victim.npy"])}
    if r == 4:
        return {"kind": "sparse", "data": data[:rng.randrange(len(data) + 1)],
                "size": rng.choice([1 << 20, 1 << 28, 1 << 31, 1 << 34] if npy else
                                   [1 << 16, 1 << 22])}
    if r == 5:
        return _file(data[:rng.randrange(len(data) + 1)])           # truncated
    if r == 6:
        return _file(data + bytes(rng.randrange(1, 5000)))          # trailing junk
    if r == 7:                                                      # an .npz archive
        import io
        buf = io.BytesIO()
        np.savez(buf, x=np.zeros(4, np.float32))
        return _file(buf.getvalue())
    if r == 8 and rng.random() < 0.5:                               # header length field
        import struct
        return _file(b"\x93NUMPY\x02\x00" + struct.pack("<I", rng.choice(
            [0, 1, 70000, 1 << 20, 1 << 31, (1 << 32) - 1])) + b"{'descr': '<f4'}")
    if r == 8:                                  # a header declaring more than the file holds
        head = repr({"descr": rng.choice(["<f4", "|u1", "<c16", "V1000000"]),
                     "fortran_order": rng.random() < 0.2,
                     "shape": rng.choice([(1 << 40,), (1 << 62,), (10 ** 30,), (-1,),
                                          (4, -8), (1 << 31, 1 << 31), (1 << 28,)])}).encode()
        head += b" " * (63 - (10 + len(head)) % 64) + b"\n"
        return _file(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head +
                     data[rng.randrange(len(data) + 1):])
    if r == 9:                                                      # a valid huge header
        n = rng.choice([20000, 70000, 300000])
        head = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
        head += b" " * (n - len(head) - 1) + b"\n"
        return _file(b"\x93NUMPY\x02\x00" + len(head).to_bytes(4, "little") + head +
                     bytes(8))
    if r == 10:                                                     # other dtypes / shapes
        arrs = [np.zeros((4, 8), np.float64), np.zeros((4, 8), np.int8), np.zeros(0),
                np.zeros((4, 8), ">f4"), np.zeros((8, 4), np.float32), np.float32(1.0),
                np.zeros((4, 8), np.complex64), np.array(["abc"]), np.zeros((2,), "V3"),
                np.zeros((4, 8), [("a", "<f2"), ("b", "<f2")]), np.zeros((1, 4, 8)),
                np.asfortranarray(np.zeros((4, 8), np.float32)), np.zeros((4, 8), bool),
                np.zeros((4, 8), np.uint16), np.zeros((4, 16), np.uint16),
                np.array([None, 1], dtype=object)]
        return _file(_npy(rng.choice(arrs)))
    if r == 11:
        return _file(rng.choice([b"", b"\x93NUMPY", b"\x93NUMPY\x09\x00", b"{", b"[]",
                                 b"\xff\xfe\x00", b"null", b"\x93NUMPY\x01\x00\x10\x00"
                                 b"{'descr':<f4}   \n"]))
    if r == 12:
        return _file(_npy(np.zeros((4, 8), np.float32), version=rng.choice([(2, 0), (3, 0)])))
    if r == 13:
        return {"kind": "symlink", "base": "raw", "to": "self"}     # a loop
    if r == 14:
        return {"kind": "mode", "data": data}                       # unreadable (chmod 0)
    return {"kind": "symlink", "base": "root", "to": "outside/dir"}


def make_workdir_case(seeds, base_seed, n):
    """A work directory with 1-3 hostile changes, and how check() is called on it."""
    rng = random.Random(base_seed * 1_000_003 + n)
    import numpy as np
    victim = _npy(np.arange(32, dtype=np.float32).reshape(4, 8))
    tree = {"outside/victim.npy": _file(victim), "outside/victim.json": _file(b"{}"),
            "outside/dir": {"kind": "dir"}, "outside/dir/value_x.npy": _file(victim),
            "outside/fifo": {"kind": "fifo"}, "case": {"kind": "dir"}}
    if rng.random() < 0.75:
        dirs, flow, outs = _generated_tree(rng, tree)
        name = "generated"
    else:
        dirs, flow, outs = _example_tree(rng, tree)
        name = "example"
    pre, res = ("value_", "value_%s-birsim.npy") if flow == "standard" else ("", "%s-birsim.npy")
    call = {"workdir": "case", "out": None, "flow": None, "dump": None,
            "tolerance": "1,1e-5"}
    changes = []
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3])):
        files = _files(tree)
        r = rng.randrange(17)
        changes.append(r)
        if r <= 3 and files:                       # a hostile file kind or bytes
            k = rng.choice(files)
            tree[k] = _hostile_file(rng, tree[k]["data"], k.endswith(".npy"))
        elif r == 4:                               # a result already there, hostile
            stem = rng.choice(outs)
            tree[dirs[0] + "/" + res % stem] = rng.choice([
                {"kind": "symlink", "base": "root", "to": "outside/victim.npy"},
                {"kind": "symlink", "base": "root", "to": "outside/dir"},
                {"kind": "symlink", "base": "root", "to": "outside/fifo"},
                {"kind": "symlink", "base": "raw", "to": "/dev/null"},
                {"kind": "symlink", "base": "raw", "to": "self"},
                {"kind": "dir"}, {"kind": "fifo"}, _file(b"old")])
        elif r == 5 and len(dirs) > 1:             # a gap in ncNN
            gone = rng.randrange(len(dirs))
            old = "case/nc%02d" % gone
            new = "case/nc%02d" % rng.choice([len(dirs) + 1, 99, 99999999])
            for k in [k for k in tree if k == old or k.startswith(old + "/")]:
                tree[new + k[len(old):]] = tree.pop(k)
        elif r == 6:                               # core directories: many, odd, duplicate
            for k in rng.choice([[99999999], list(range(len(dirs), 66)), [1], [7]]):
                tree["case/nc%s/sg00" % rng.choice(["%02d" % k, "%d" % k, "%03d" % k])] = \
                    {"kind": "dir"}
        elif r == 7:                               # an extra subgraph, empty or not
            parent = os.path.dirname(rng.choice(dirs))
            sg = parent + "/sg%02d" % rng.choice([1, 2, 10])
            tree[sg] = {"kind": "dir"}
            if rng.random() < 0.6:
                tree[sg + "/" + STANDARD_DUMP] = _file(b"{}")
        elif r == 8:                               # a core directory symlinked out / in
            d = rng.choice(dirs)
            for k in [k for k in tree if k.startswith(d + "/")]:
                tree["outside/core/" + k[len(d) + 1:]] = tree.pop(k)
            tree[d] = {"kind": "symlink", "base": "root", "to": "outside/core"}
        elif r == 9 and files:                     # another name for a file: symlink in
            k = rng.choice(files)
            other = rng.choice(dirs) + "/" + pre + rng.choice(["x", "y", "out", "w", "xT"]) + ".npy"
            if other != k:
                tree[other] = {"kind": "symlink", "base": "raw",
                               "to": os.path.relpath(k, os.path.dirname(other))}
        elif r == 10:                              # two dumps, a .colz, no dump
            d = rng.choice(dirs)
            dumps = [k for k in files if k.startswith(d + "/") and k.endswith(".json")]
            c = rng.randrange(3)
            if c == 0:
                tree[d + "/bir_debug.sg0001.after-lower_sync.json"] = _file(b"{}")
            elif c == 1:
                tree[d + "/kernel.colz"] = _file(b"\x00colz")
            for k in dumps if c > 0 else []:
                del tree[k]
        elif r == 11:                              # both flows' names, stray goldens
            d = rng.choice(dirs)
            tree[d + "/" + rng.choice(["x.npy", "value_x.npy", "value_zz.npy", "zz.npy",
                                       "value_y.npy", "y.npy", "value_.npy", ".npy"])] = \
                _file(_npy(np.zeros((4, 8), np.float32)))
        elif r == 12:                              # the dump's JSON mutated
            dumps = [k for k in files if k.endswith(".json")]
            if dumps:
                k = rng.choice(dumps)
                try:
                    prog = json.loads(tree[k]["data"])
                    for _ in range(rng.randint(1, 3)):
                        if mutate(prog, rng):
                            break
                    tree[k] = _file(json.dumps(prog))
                except (ValueError, RecursionError):
                    pass
        elif r == 13:                              # where check() is pointed, and --out
            call["workdir"] = rng.choice(["case", "case/" + STANDARD_DUMP, dirs[0],
                                          "case/missing", "caselink", "outside/victim.json",
                                          "case/nc00", "outside/fifo"] +
                                         [k for k in files if k.endswith(".json")][:2])
            tree["caselink"] = {"kind": "symlink", "base": "root", "to": "case"}
            call["out"] = rng.choice([None, "case/out", "case/out/deeper", "case",
                                      "case/" + (pre or "value_") + "file.npy"])
        elif r == 14:                              # options
            call["flow"] = rng.choice([None, "standard", "baremetal", "other"])
            call["dump"] = rng.choice([None, "*.json", "bir.json", "nothing*", "../*",
                                       "**", "[", "/dev/*", "../../../outside/*.json",
                                       "../../*/*.json"])
            call["tolerance"] = rng.choice(["1,1e-5", (0, 0), "0,0", (100, 1e30), "1e-9,0"])
        elif r == 15:                              # the work directory itself is odd
            c = rng.randrange(3)
            if c == 0:
                tree = {k: v for k, v in tree.items() if not k.startswith("case/")}
            elif c == 1:
                for k in [k for k in tree if k.startswith("case/")]:
                    tree[k.replace("case/", "case/sub/", 1)] = tree.pop(k)
            else:
                tree["case/sg00"] = {"kind": "dir"}
        else:                                      # a file where a directory should be
            d = rng.choice(dirs)
            for k in [k for k in tree if k.startswith(d + "/")]:
                del tree[k]
            tree[d] = rng.choice([_file(b"{}"), {"kind": "fifo"},
                                  {"kind": "symlink", "base": "raw", "to": "/dev/null"}])
    for k, e in tree.items():   # a path given *through* a link out: written there, as asked
        if e["kind"] == "symlink" and e["base"] == "root" and e["to"].startswith("outside") \
                and (call["workdir"] + "/").startswith(k + "/"):
            call["workdir"] = "case"
    return "%s %s %s" % (name, flow, changes), {"tree": tree, "call": call}, rng


def build_tree(spec, root):
    """Create the spec's files under ``root`` (an empty directory); an entry the file
    system cannot hold (a name too long, a NUL, a surrogate) is left out."""
    root = os.path.abspath(root)
    later = []
    for rel in sorted(spec["tree"]):
        try:
            _build_entry(spec["tree"][rel], root, os.path.join(root, rel), later)
        except (OSError, UnicodeEncodeError, ValueError):
            pass
    for path in later:
        os.chmod(path, 0)


def _build_entry(e, root, path, later):
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        if os.path.lexists(parent):
            return                                 # a file where its directory would be
        os.makedirs(parent)
    if os.path.lexists(path):
        return
    kind = e["kind"]
    if kind == "dir":
        os.mkdir(path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        to = e["to"]
        if to == "self":
            to = os.path.basename(path)
        elif e["base"] == "root":
            to = os.path.join(root, to)
        os.symlink(to, path)
    elif kind in ("file", "sparse", "mode"):
        data = e["data"].replace(b"@ROOT@", root.encode())
        with open(path, "wb") as fh:
            fh.write(data)
            if kind == "sparse":
                fh.truncate(max(e["size"], len(data)))
        if kind == "mode":
            later.append(path)


def snapshot(root, skip):
    """{relpath: (type, mode, size, mtime, data or link target)} of everything under
    ``root`` except ``skip`` (a relative path), symlinks not followed."""
    import stat
    out = {}
    for d, subdirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root)
        if rel_d == skip:
            subdirs[:] = []
            continue
        subdirs[:] = [s for s in subdirs if os.path.normpath(os.path.join(rel_d, s)) != skip]
        for name in subdirs + files:
            p = os.path.join(d, name)
            rel = os.path.normpath(os.path.join(rel_d, name))
            if rel == skip:
                continue
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                extra = os.readlink(p)
            elif stat.S_ISREG(st.st_mode) and st.st_size < (1 << 20):
                with open(p, "rb") as fh:
                    extra = fh.read()
            else:
                extra = None
            out[rel] = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_size if not
                        stat.S_ISDIR(st.st_mode) else 0, st.st_mtime_ns if not
                        stat.S_ISDIR(st.st_mode) else 0, extra)
    return out


def _rmtree(path):
    import shutil
    import stat

    def onerror(func, p, exc):
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            os.chmod(p, stat.S_IRWXU)
        except OSError:
            pass
        func(p)
    shutil.rmtree(path, onerror=onerror)


def run_workdir_case(spec, rng, sandbox):
    """Build the spec under <sandbox>/c, run check() on it, compare everything but the case
    directory before and after, remove it. None when the case ended cleanly, else a short
    description of a finding."""
    import warnings
    root = os.path.join(sandbox, "c")
    os.mkdir(root)
    try:
        build_tree(spec, root)
        before = snapshot(root, "case")
        outside_sandbox = set(os.listdir(sandbox))
        call = spec["call"]
        try:
            import birsim.workdir
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                birsim.workdir.check(
                    os.path.join(root, call["workdir"]),
                    dump=call["dump"], flow=call["flow"], tolerance=call["tolerance"],
                    out=None if call["out"] is None else os.path.join(root, call["out"]),
                    max_steps=3000, kernel_sim=_kernel, memory_limit=1 << 30,
                    schedule=rng.choice(["in_order", "round_robin", "random"]),
                    checks=rng.choice([None, None, None, "all"]),
                    uninitialized=rng.choice(["zero", "zero", "nan"]))
            res = None
        except Exception as e:                    # noqa: BLE001 -- classified
            res = _foreign(e)
        after = snapshot(root, "case")
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        changed += sorted(set(os.listdir(sandbox)) - outside_sandbox)
        if changed and res is None:
            res = "outside: changed %s" % ", ".join(changed[:5])
    finally:
        try:
            _rmtree(root)
        except OSError:
            pass
    if os.path.lexists(root):
        return "cleanup: %s is left" % root
    return res


def worker(base_seed, start, stop, sandbox, kinds):
    """Runs cases start..stop-1 of the kinds ``kinds`` (a string of p/l/w), writing
    'n kind' before each and 'n result' for findings. Work-directory cases live in
    ``sandbox``, which is also the working directory (a relative write lands there)."""
    seeds = load_seeds()
    out = sys.stdout
    os.chdir(sandbox)
    for n in range(start, stop):
        if _KINDS[n % len(_KINDS)] not in kinds:
            continue
        out.write(f"> {n} {case_kind(n)}\n")
        out.flush()
        kind, name, case, rng = make_any(seeds, base_seed, n)
        res = run_any(kind, case, rng, sandbox)
        if res is not None:
            out.write(f"! {n} {json.dumps(res)}\n")
            out.flush()
    out.write("done\n")
    out.flush()


def _jsonable(obj):
    """A spec with its bytes as {"b64": ...} (json.dumps-able); _unjson reverses it."""
    import base64
    if isinstance(obj, bytes):
        return {"b64": base64.b64encode(obj).decode()}
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def _unjson(obj):
    import base64
    if isinstance(obj, dict):
        if set(obj) == {"b64"}:
            return base64.b64decode(obj["b64"])
        return {k: _unjson(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unjson(v) for v in obj]
    return obj


class _deep:
    """Context: a recursion limit that lets json encode and decode deeply nested cases,
    restored after (the worker runs cases under the default limit)."""

    def __enter__(self):
        self.old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(self.old, 20000))

    def __exit__(self, *exc):
        sys.setrecursionlimit(self.old)


def save_case(path, kind, case, rng, base_seed, n):
    """Write case n as JSON: its kind, seed and number, the case (the program, the list
    case or the workdir spec) and the state of its rng when run_any begins."""
    state = rng.getstate()
    with _deep():
        text = json.dumps({"kind": kind, "seed": base_seed, "case": n,
                           "rng": [state[0], list(state[1]), state[2]],
                           "case_json": _jsonable(case)}, default=str)
    path.write_text(text)


def replay_saved(path, sandbox):
    """Run a case saved by save_case exactly as when it was found (same case, same rng);
    returns run_any's result."""
    with _deep():
        saved = json.loads(pathlib.Path(path).read_text())
        case = _unjson(saved["case_json"])
    rng = random.Random()
    v, internal, gauss = saved["rng"]
    rng.setstate((v, tuple(internal), gauss))
    return run_any(saved["kind"], case, rng, sandbox)


def _save(outdir, base_seed, n, kind, detail, seeds):
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))   # deeply nested cases
    ckind, name, case, rng = make_any(seeds, base_seed, n)
    outdir.mkdir(parents=True, exist_ok=True)
    if ckind == "program":
        path = outdir / f"{kind}_{base_seed}_{n}.json"
        path.write_text(json.dumps(case, default=str))
    else:
        path = outdir / f"{kind}_{ckind}_{base_seed}_{n}.fuzzcase"
        save_case(path, ckind, case, rng, base_seed, n)
    print(f"FINDING {kind}: {ckind} case {n} (seed {base_seed}, from {name}): {detail} -> {path}",
          flush=True)


def _sandbox():
    """A new temporary directory for one worker: under $BIRSIM_FUZZ_TMP, else /dev/shm
    (tmpfs: creating and removing a case's files there is ~100x faster than on a disk),
    else the system's temporary directory."""
    import tempfile
    base = os.environ.get("BIRSIM_FUZZ_TMP")
    if base is None and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        base = "/dev/shm"
    return tempfile.mkdtemp(prefix="birsim-fuzz-", dir=base)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--max-cases", type=int, default=0, help="stop after N cases (0: time)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--case-timeout", type=float, default=20.0)
    ap.add_argument("--batch", type=int, default=20000, help="cases per worker process")
    ap.add_argument("--kinds", default="program,list,workdir",
                    help="comma-separated kinds of case to run (program, list, workdir)")
    ap.add_argument("--out", default="fuzz-findings")
    ap.add_argument("--replay", type=int, default=None)
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(int(a.worker[0]), int(a.worker[1]), int(a.worker[2]), a.worker[3], a.worker[4])
        return 0
    letters = {v: k for k, v in KIND_NAMES.items()}
    try:
        kinds = "".join(letters[k.strip()] for k in a.kinds.split(",") if k.strip())
    except KeyError as e:
        ap.error("unknown kind %s" % e)
    seeds = load_seeds()
    if a.replay is not None:
        import shutil
        kind, name, case, rng = make_any(seeds, a.seed, a.replay)
        print(f"{kind} case {a.replay} from {name}")
        sandbox = _sandbox()
        try:
            print(run_any(kind, case, rng, sandbox) or "clean")
        finally:
            shutil.rmtree(sandbox, ignore_errors=True)
        return 0
    import shutil
    outdir = pathlib.Path(a.out).resolve()
    deadline = time.monotonic() + a.minutes * 60
    t0 = time.monotonic()
    n, findings = a.start, 0
    counts = dict.fromkeys(KIND_NAMES.values(), 0)
    end = a.start + a.max_cases if a.max_cases else None
    import selectors
    while time.monotonic() < deadline and (end is None or n < end):
        stop = n + a.batch if end is None else min(n + a.batch, end)
        sandbox = _sandbox()
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                              str(a.seed), str(n), str(stop), sandbox, kinds],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, bufsize=1)
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        cur, last, reason = None, time.monotonic(), "crash"
        while True:
            if time.monotonic() > deadline:
                p.kill()
                reason = "deadline"
                break
            if not sel.select(timeout=min(1.0, a.case_timeout)):
                if time.monotonic() - last > a.case_timeout:
                    p.kill()
                    reason = "hang"
                    break
                continue
            line = p.stdout.readline()
            if not line:
                break
            if line.startswith("> "):
                k, kind = line[2:].split()
                cur, last = int(k), time.monotonic()
                counts[kind] += 1
            elif line.startswith("! "):
                k, detail = line[2:].split(" ", 1)
                findings += 1
                _save(outdir, a.seed, int(k), "foreign", json.loads(detail), seeds)
            elif line.startswith("done"):
                reason = "done"
        p.wait()
        stderr = p.stderr.read()
        sel.close()
        shutil.rmtree(sandbox, ignore_errors=True)
        if reason == "done" and p.returncode == 0:
            n = stop
        elif reason == "deadline":
            if cur is not None:
                counts[case_kind(cur)] -= 1      # begun, not finished
            n = stop if cur is None else cur
            break
        elif cur is None:                        # died before its first case
            findings += 1
            print(f"FINDING worker: exit {p.returncode}: {stderr.strip()[-800:]}", flush=True)
            break
        else:
            findings += 1
            detail = (f"> {a.case_timeout} s" if reason == "hang" else
                      f"exit {p.returncode}: {stderr.strip()[-800:]}")
            _save(outdir, a.seed, cur, reason, detail, seeds)
            n = cur + 1
    dt = time.monotonic() - t0
    done_cases = sum(counts.values())
    print(f"fuzz: {done_cases} cases in {dt:.0f} s ({done_cases / max(dt, 1e-9):.0f}/s; "
          + ", ".join(f"{k} {v}" for k, v in counts.items())
          + f"), cases {a.start}..{n - 1}, seed {a.seed}, {len(seeds)} seeds, "
          f"{findings} findings", flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
