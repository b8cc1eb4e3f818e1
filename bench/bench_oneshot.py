"""One-shot runs (issue 24): the fixed cost of a tiny program and the first run of a big one.

    python bench/bench_oneshot.py [--repeat R] [--rows N] [--cols M] [--tiny | --cold]
    python bench/bench_oneshot.py --instructions [--against TREE] [--calls N]

1. Tiny program (one DMACopy of a [128, 64] fp32 DRAM tensor to another on a DMA queue, as
   hardware moves DRAM; until session 16 a DVE TensorCopy, which ``checks="all"`` reports
   on DRAM as a capacity finding): ``load`` alone, ``Simulator()`` alone, ``Simulator()``
   + ``run``, ``load`` + ``Simulator()`` (the first Simulator of a fresh module) and
   ``load`` + ``Simulator()`` + ``run`` (from JSON text to outputs) of one text, and the
   same with a different program (tensor names) at every call -- the target's case, as a
   test suite loads a new program per test -- in microseconds (median and min..max over R
   rounds of 200 calls), next to NumPy's copy of the same array in the same rounds.
   ``--tiny`` runs this section alone.
2. Cold against warm on a big streaming program: a Loop over the 128-row tiles of an N x M
   fp32 input (default 4096 x 8192: 128 MiB in, 128 MiB out), each trip a Load to SBUF, an
   Activation (x * 0.5 + 1, then Identity -- memory-bound, as a layernorm is -- or with
   --func Exp) and a Save, synchronised by ``birsim.synchronize`` (until session 16 it was
   not: a race under ``checks="all"``). Each round is a fresh process (fresh allocator
   state), which times the first ``Simulator()`` + first ``run`` (cold) and then R warm
   runs of the same Simulator; the ratio is cold / median warm, reported as the median and
   min..max over R processes, with the cold run's minor page faults and the process's peak
   resident memory. NumPy's same formula on the same data is timed in the same processes
   for scale. Both ways, alternating processes: the default Simulator (zero-copy: the
   input read in place, the output's buffer handed over: docs/python-api.md, "Zero-copy
   runs"), and ``zero_copy=False`` (both copied). ``--cold`` runs this section alone.

3. Resident memory per instruction (--rss N, default 100,000 DMACopy instructions of
   [128, 8] fp32): VmRSS growth over ``load``, the first ``Simulator()`` and the first run,
   divided by N, on 1 and 8 cores, each in a fresh process (target: <= 1 KB in total).

4. Instructions (``--instructions``, not in the default run; needs valgrind): machine
   instructions per "load + Simulator() + run, a new program each call", counted by
   callgrind -- a figure that does not move with this VM's speed, as wall time does
   (session 13's code took 84 us in session 13 and 209-310 us in session 16). Two
   processes per tree, one making N calls and one 4N (the same programs built in both,
   then frozen out of the collector's passes), their difference divided by 3N; ASLR off
   (setarch -R), PYTHONHASHSEED=0 and one BLAS thread make the count repeatable. Shown
   with and without memset/memcpy (callgrind counts a ``rep stos`` byte by byte, so a
   zeroed buffer weighs far more in the count than in time). ``--against TREE`` measures
   the birsim of another checkout (a worktree built in place) in the same run,
   alternating, and gives the ratio.

Timings are wall time on a possibly shared machine: read the ratios and spreads.
"""

import argparse
import gc
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import birsim
from _common import program, tensor, whole


# {=== 1. tiny ===}

def tiny_text(a="a", b="b"):
    return json.dumps(program(
        [tensor(a, "ExternalInput", (128, 64), mem="DRAM"),
         tensor(b, "ExternalOutput", (128, 64), mem="DRAM")],
        [{"name": "cp", "opcode": "DMACopy", "engine": "DMA",
          "ins": [whole(a, (128, 64))], "outs": [whole(b, (128, 64))]}]))


class _Fresh:
    """Every call loads a different program (its tensors named a<k>, b<k>), as each
    op-validation test of a suite does: nothing keyed on the program's text can serve it."""

    def __init__(self, x, count):
        self.items = [(tiny_text("a%d" % k, "b%d" % k), {"a%d" % k: x}) for k in range(count)]
        self.k = 0

    def __call__(self):
        text, inputs = self.items[self.k % len(self.items)]
        self.k += 1
        return birsim.Simulator(birsim.load(text)).run(inputs)


def per_call_us(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def bench_tiny(repeat, n=200):
    text = tiny_text()
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    mod = birsim.load(text)
    checked = birsim.Simulator(mod, checks="all")
    assert np.array_equal(checked.run({"a": x})["b"], x) and checked.findings == []
    cases = {
        "load": lambda: birsim.load(text),
        "Simulator()": lambda: birsim.Simulator(mod),
        "Simulator() + run": lambda: birsim.Simulator(mod).run({"a": x}),
        "load + Simulator()": lambda: birsim.Simulator(birsim.load(text)),
        "load + Simulator() + run": lambda: birsim.Simulator(birsim.load(text)).run({"a": x}),
        "the same, a new program each": _Fresh(x, 4 * n * (repeat + 1)),
        "warm run": None,
        "np.copy (peer)": lambda: x.copy(),
    }
    warm = birsim.Simulator(mod)
    cases["warm run"] = lambda: warm.run({"a": x})
    times = {k: [] for k in cases}
    for _ in range(repeat):
        for k, fn in cases.items():
            fn()
            times[k].append(per_call_us(fn, n))
    return times


# {=== 2. cold / warm ===}

def stream_program(rows, cols, func="Identity"):
    T = rows // 128
    iv = {"kind": "AffExprKind", "terms": [{"idx": {"kind": "AffIVKind", "axis": "i"},
                                            "coeff": 128 * cols}], "c": 0}

    def tile(name, off=None):
        o = {"kind": "physical_ap", "memref": name, "dtype": "float32",
             "ap": [[cols, 128], [1, cols]]}
        if off is not None:
            o["offset"] = off
        return o
    body = [
        {"name": "ld", "opcode": "Load", "engine": "DMA", "ins": [tile("x", iv)],
         "outs": [tile("t")]},
        {"name": "act", "opcode": "Activation", "engine": "Activation", "ins": [tile("t")],
         "outs": [tile("u")], "func": func, "scale": 0.5, "bias": 1.0},
        {"name": "st", "opcode": "Save", "engine": "DMA", "ins": [tile("u")],
         "outs": [tile("y", iv)]},
    ]
    loop = {"name": "L", "opcode": "Loop", "engine": "Unassigned",
            "LoopAxis": {"name": "i", "lb": 0, "ub": T, "stride": 1},
            "blocks": [{"name": "body", "instructions": body}]}
    # synchronised: the Activation waits for each tile's Load, the Save for the Activation,
    # and the next trip's Load and Activation for the tiles' readers (birsim.synchronize)
    return birsim.synchronize(program(
        [tensor("x", "ExternalInput", (rows, cols), mem="DRAM"),
         tensor("y", "ExternalOutput", (rows, cols), mem="DRAM"),
         tensor("t", "Internal", (128, cols)), tensor("u", "Internal", (128, cols))], [loop]))


def cold_child(rows, cols, warm_runs, func, zero_copy=True):
    """Runs in a fresh process; prints one JSON line."""
    x = np.random.default_rng(0).standard_normal((rows, cols), dtype=np.float32) * 0.1
    mod = birsim.load(stream_program(rows, cols, func))
    flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    sim = birsim.Simulator(mod, zero_copy=zero_copy)
    out = sim.run({"x": x})
    cold = time.perf_counter() - t0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt0
    warm = []
    for _ in range(warm_runs):
        t0 = time.perf_counter()
        out = sim.run({"x": x})
        warm.append(time.perf_counter() - t0)
    nps = []
    for _ in range(warm_runs):
        t0 = time.perf_counter()
        ref = x * np.float32(0.5) + np.float32(1.0)
        if func == "Exp":
            ref = np.exp(ref)
        nps.append(time.perf_counter() - t0)
    assert np.allclose(out["y"], ref, rtol=1e-5, atol=1e-6)
    print(json.dumps({"cold": cold, "warm": statistics.median(warm), "np": statistics.median(nps),
                      "faults": faults,
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def bench_cold(rows, cols, repeat, warm_runs, func, modes=(True, False)):
    """{zero_copy: [child results]}: `repeat` fresh processes per mode, alternating."""
    res = {m: [] for m in modes}
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(repeat):
        for m in modes:
            out = subprocess.run([sys.executable, os.path.join(here, "bench_oneshot.py"),
                                  "--child", "--rows", str(rows), "--cols", str(cols),
                                  "--warm", str(warm_runs), "--func", func]
                                 + ([] if m else ["--copying"]),
                                 capture_output=True, text=True, check=True)
            res[m].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return res


# {=== 3. resident memory ===}

def _vm_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    return 0


def rss_child(n, cores):
    insns = [{"name": f"c{i}", "opcode": "DMACopy", "engine": "DMA",
              "ins": [whole("a", (128, 8))], "outs": [whole("b", (128, 8))]} for i in range(n)]
    text = json.dumps(program([tensor("a", "ExternalInput", (128, 8), mem="DRAM"),
                               tensor("b", "ExternalOutput", (128, 8), mem="DRAM")], insns))
    del insns
    r0 = _vm_rss()
    mod = birsim.load(text)
    del text
    r1 = _vm_rss()
    sim = birsim.Simulator(mod, cores=cores)
    r2 = _vm_rss()
    sim.run({"a": np.ones((128, 8), np.float32)})
    r3 = _vm_rss()
    print(json.dumps({"load": (r1 - r0) / n, "sim": (r2 - r1) / n, "run": (r3 - r2) / n,
                      "total": (r3 - r0) / n}))


def bench_rss(n, cores):
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, os.path.join(here, "bench_oneshot.py"), "--rss-child",
                          str(n), "--cores", str(cores)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# {=== 4. instructions ===}

CG_WARM = 20


def cg_child(calls, total):
    """Runs under callgrind: CG_WARM calls, then ``calls`` more, each a new program;
    ``total`` programs are built whatever ``calls`` is, so that two counts differ by the
    calls alone."""
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    fresh = _Fresh(x, total)
    gc.collect()
    gc.freeze()         # the programs built here are not scanned by the calls' collections
    assert np.array_equal(fresh()["b0"], x)
    for _ in range(CG_WARM - 1 + calls):
        fresh()
    print(os.path.dirname(os.path.abspath(birsim.__file__)))


def cg_count(tree, calls, total):
    """(all instructions, those in memset/memcpy/memmove, the birsim package measured) of
    one callgrind process."""
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "callgrind.out")
        cmd = (["setarch", "-R"] if shutil.which("setarch") else []) + [
            "valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, sys.executable,
            os.path.abspath(__file__), "--cg-child", str(calls), "--cg-total", str(total)]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        ann = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", out],
                             capture_output=True, text=True, check=True).stdout
    total_ir, mem_ir = None, 0
    for line in ann.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in m.group(2):
            total_ir = n
        elif re.search(r":__(memset|memcpy|memmove)\w* ", m.group(2) + " "):
            mem_ir += n
    if total_ir is None:
        raise RuntimeError("callgrind_annotate gave no total:\n" + ann[:2000])
    return total_ir, mem_ir, run.stdout.strip().splitlines()[-1]


def bench_instructions(trees, calls, rounds=2):
    """{tree: [(per call, per call without memset/memcpy)] per round}, trees alternating."""
    total = CG_WARM + 4 * calls
    res = {t: [] for t in trees}
    where = {}
    for _ in range(rounds):
        for t in trees:
            a_all, a_mem, _ = cg_count(t, calls, total)
            b_all, b_mem, where[t] = cg_count(t, 4 * calls, total)
            n = 3 * calls
            res[t].append(((b_all - a_all) / n, ((b_all - b_mem) - (a_all - a_mem)) / n))
    return res, where


def spread(vals, fmt="{:.2f}"):
    return (fmt + " ({}..{})").format(statistics.median(vals), fmt.format(min(vals)),
                                      fmt.format(max(vals)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--func", default="Identity", choices=["Identity", "Exp"])
    ap.add_argument("--rss", type=int, default=100_000)
    ap.add_argument("--tiny", action="store_true", help="section 1 only")
    ap.add_argument("--cold", action="store_true", help="section 2 only")
    ap.add_argument("--instructions", action="store_true",
                    help="section 4 alone: instructions per tiny load -> outputs (callgrind)")
    ap.add_argument("--against", metavar="TREE",
                    help="with --instructions: another checkout's birsim, measured alongside")
    ap.add_argument("--calls", type=int, default=100,
                    help="with --instructions: N (the processes make N and 4N calls)")
    ap.add_argument("--cg-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cg-total", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--copying", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cores", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        cold_child(args.rows, args.cols, args.warm, args.func, not args.copying)
        return
    if args.rss_child:
        rss_child(args.rss_child, args.cores)
        return
    if args.cg_child is not None:
        cg_child(args.cg_child, args.cg_total)
        return
    if args.instructions:
        section_instructions(args)
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if not args.cold:
        section_tiny(args)
    if not args.tiny:
        section_cold(args)
    if not args.tiny and not args.cold:
        section_rss(args)


def section_tiny(args):
    print("1. tiny program (DMACopy [128, 64] fp32), microseconds per call, "
          f"median (min..max) over {args.repeat} rounds of 200")
    times = bench_tiny(args.repeat)
    for k, v in times.items():
        print(f"   {k:28s} {spread(v, '{:.1f}')}")
    ratios = [s / c for s, c in zip(times["Simulator() + run"], times["np.copy (peer)"])]
    print(f"   Simulator() + run / np.copy  {spread(ratios, '{:.0f}')}")
    print(f"   load + Simulator() + run     {spread(times['load + Simulator() + run'], '{:.1f}')}"
          f" us; a new program each call "
          f"{spread(times['the same, a new program each'], '{:.1f}')} us   (target <= 100)")


def section_cold(args):
    print(f"2. cold vs warm: {args.rows} x {args.cols} fp32 stream (Load, Activation "
          f"{args.func}(0.5x + 1), Save "
          f"per 128-row tile), {args.repeat} fresh processes per mode, alternating")
    both = bench_cold(args.rows, args.cols, args.repeat, args.warm, args.func)
    for zc, res in both.items():
        print("   default (zero-copy)" if zc else "   zero_copy=False (inputs and outputs copied)")
        cw = [r["cold"] / r["warm"] for r in res]
        print(f"   cold (first Simulator() + run) s {spread([r['cold'] for r in res], '{:.3f}')}")
        print(f"   warm run s                      {spread([r['warm'] for r in res], '{:.3f}')}")
        print(f"   numpy (same formula) s          {spread([r['np'] for r in res], '{:.3f}')}")
        print(f"   cold / warm                     {spread(cw)}   (target <= 1.5)")
        print(f"   warm / numpy                    {spread([r['warm'] / r['np'] for r in res])}")
        print(f"   cold-run minor page faults      {spread([r['faults'] for r in res], '{:.0f}')}")
        rss = [r['maxrss_mb'] for r in res]
        print(f"   peak RSS MiB                    {spread(rss, '{:.0f}')}")


def section_rss(args):
    print(f"3. resident bytes per instruction ({args.rss:,} DMACopy), fresh process each")
    for cores in (1, 8):
        r = bench_rss(args.rss, cores)
        print(f"   {cores} core(s): load {r['load']:.0f} + Simulator() {r['sim']:.0f} + first run "
              f"{r['run']:.0f} = {r['total']:.0f} B   (target <= 1024)")


def _commit(package_dir):
    """The checkout a birsim package was imported from, as its short commit."""
    git = subprocess.run(["git", "-C", package_dir, "describe", "--always", "--dirty"],
                         capture_output=True, text=True)
    return "birsim at " + git.stdout.strip() if git.returncode == 0 else package_dir


def section_instructions(args):
    if not (shutil.which("valgrind") and shutil.which("callgrind_annotate")):
        sys.exit("--instructions needs valgrind (callgrind) on the PATH")
    trees = [None] + ([os.path.abspath(args.against)] if args.against else [])
    print(f"4. instructions per load + Simulator() + run, a new program each call "
          f"(callgrind, {args.calls} and {4 * args.calls} calls, 2 rounds, median (min..max))")
    res, where = bench_instructions(trees, args.calls)
    for t in trees:
        alls = [r[0] for r in res[t]]
        nomem = [r[1] for r in res[t]]
        print(f"   {_commit(where[t])}: {spread(alls, '{:,.0f}')}; without memset/memcpy "
              f"{spread(nomem, '{:,.0f}')}")
    if args.against:
        mine, other = res[None], res[trees[1]]
        ratio = [statistics.median(r[i] for r in mine) / statistics.median(r[i] for r in other)
                 for i in (0, 1)]
        print(f"   this tree / --against: {ratio[0]:.3f}; without memset/memcpy {ratio[1]:.3f}")


if __name__ == "__main__":
    main()
