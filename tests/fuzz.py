"""Crash-only fuzzer: mutated BIR programs must run or raise a clear birsim error.

Seeds are the examples (examples/*.json), programs the test suite builds
(tests/data/fuzz_seeds/, recorded from the suite's ``birsim.load`` calls) and the issue-12
reproducers (tests/data/repros/). Each case is one seed with 1-4 random mutations (values
replaced by boundary numbers, huge or non-finite floats, other opcodes/dtypes/kinds, lone
surrogates, deep nesting, deleted or duplicated entries), then ``birsim.load`` ->
``Simulator(...)`` -> ``run()`` -> ``read()``/``register()``.

A *finding* is any of:
- crash: the worker process died (signal, abort, sanitizer report -- run the sanitizer
  build with the ASan runtime preloaded, as .ci/run does);
- hang: one case took longer than --case-timeout seconds;
- foreign: an exception that is not a BirsimError, or a BirsimError with an empty message.

Cases are numbered and generated deterministically from (--seed, number), so a finding is
reproduced by number. Findings are written as JSON programs to --out and make the exit
status 1.

    python tests/fuzz.py --minutes 2                 # CI (bounded pass)
    nice python tests/fuzz.py --minutes 30 --seed 7  # by hand, longer
    python tests/fuzz.py --replay N --seed S         # rerun case N in this process
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


def worker(base_seed, start, stop):
    """Runs cases start..stop-1, writing 'n' before each and 'n result' for findings."""
    seeds = load_seeds()
    out = sys.stdout
    for n in range(start, stop):
        out.write(f"> {n}\n")
        out.flush()
        name, prog, rng = make_case(seeds, base_seed, n)
        res = run_case(prog, rng)
        if res is not None:
            out.write(f"! {n} {json.dumps(res)}\n")
            out.flush()
    out.write("done\n")
    out.flush()


def _save(outdir, base_seed, n, kind, detail, seeds):
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))   # deeply nested cases
    name, prog, _ = make_case(seeds, base_seed, n)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{kind}_{base_seed}_{n}.json"
    path.write_text(json.dumps(prog, default=str))
    print(f"FINDING {kind}: case {n} (seed {base_seed}, from {name}): {detail} -> {path}",
          flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--max-cases", type=int, default=0, help="stop after N cases (0: time)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--case-timeout", type=float, default=20.0)
    ap.add_argument("--batch", type=int, default=20000, help="cases per worker process")
    ap.add_argument("--out", default="fuzz-findings")
    ap.add_argument("--replay", type=int, default=None)
    ap.add_argument("--worker", nargs=3, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(*a.worker)
        return 0
    seeds = load_seeds()
    if a.replay is not None:
        name, prog, rng = make_case(seeds, a.seed, a.replay)
        print(f"case {a.replay} from {name}")
        print(run_case(prog, rng) or "clean")
        return 0
    outdir = pathlib.Path(a.out)
    deadline = time.monotonic() + a.minutes * 60
    t0 = time.monotonic()
    n, findings = a.start, 0
    end = a.start + a.max_cases if a.max_cases else None
    import selectors
    while time.monotonic() < deadline and (end is None or n < end):
        stop = n + a.batch if end is None else min(n + a.batch, end)
        p = subprocess.Popen([sys.executable, __file__, "--worker", str(a.seed), str(n),
                              str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, bufsize=1)
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        cur, last, reason = n, time.monotonic(), "crash"
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
                cur, last = int(line[2:]), time.monotonic()
            elif line.startswith("! "):
                k, detail = line[2:].split(" ", 1)
                findings += 1
                _save(outdir, a.seed, int(k), "foreign", json.loads(detail), seeds)
            elif line.startswith("done"):
                reason = "done"
        p.wait()
        stderr = p.stderr.read()
        sel.close()
        if reason == "done" and p.returncode == 0:
            n = stop
        elif reason == "deadline":
            n = cur
        else:
            findings += 1
            detail = (f"> {a.case_timeout} s" if reason == "hang" else
                      f"exit {p.returncode}: {stderr.strip()[-800:]}")
            _save(outdir, a.seed, cur, reason, detail, seeds)
            n = cur + 1
    dt = time.monotonic() - t0
    done_cases = n - a.start
    print(f"fuzz: {done_cases} cases in {dt:.0f} s ({done_cases / max(dt, 1e-9):.0f}/s), "
          f"seed {a.seed}, {len(seeds)} seeds, {findings} findings", flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
