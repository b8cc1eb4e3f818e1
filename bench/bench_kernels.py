"""Per-call overhead of CustomOp kernels: birsim's in-process kernel_sim and the external
.npy protocol against calling the same Python function directly.

    python bench/bench_kernels.py [--calls N] [--external-calls M]

The program is a Loop of N trips around one CustomOp on a [128, 512] fp32 tensor (plus
a [512] gamma for RMSNorm), so one run makes N kernel calls. Per-call time is
(t(N trips) - t(1 trip)) / (N - 1), which removes the run's fixed costs (writing inputs,
reading outputs). Each figure is the median of several alternating rounds (direct calls,
then the two runs), the ratio the median of the per-round ratios with their spread;
in-process figures are CPU time of the running thread, external ones wall time. Kernels:

  rmsnorm   the RMSNorm of examples/rmsnorm_kernel.py (a realistic fused op)
  add_one   x + 1 (almost no work: shows the bare overhead)

The external protocol runs the shipped ``kernel_sim`` executable (one process per call,
inputs and outputs through .npy files) on the same kernels.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))

import birsim  # noqa: E402
import rmsnorm_kernel  # noqa: E402,F401 -- registers "rmsnorm"

P, D = 128, 512
ADD_ONE_MODULE = """import birsim

@birsim.kernel("add_one")
def add_one(x, gamma):
    return x + 1
"""


@birsim.kernel("add_one")
def add_one(x, gamma):
    return x + 1


def program(kernel, trips):
    def t(name, kind, shape):
        return {"Skind": "memory_location_set", "name": name, "kind": kind,
                "dtype": "float32", "tensor_shape": shape,
                "memorylocations": [{"name": name, "type": "DRAM"}]}

    def ap(loc, shape):
        return {"kind": "physical_ap", "memref": loc, "dtype": "float32",
                "ap": [[shape[1], shape[0]], [1, shape[1]]]}
    op = {"name": "k", "opcode": "CustomOp", "engine": "Pool",
          "ins": [ap("x", [P, D]), ap("gamma", [1, D])], "outs": [ap("y", [P, D])],
          "opFunctionName": kernel, "srcsShape": [[P, D], [D]], "dstsShape": [[P, D]]}
    body = {"name": "L", "opcode": "Loop", "engine": "Unassigned",
            "LoopAxis": {"name": "i", "lb": 0, "ub": trips, "stride": 1},
            "blocks": [{"name": "body", "instructions": [op]}]}
    return {"functions": [{"name": "main",
                           "allocations": [t("x", "ExternalInput", [P, D]),
                                           t("gamma", "ExternalInput", [1, D]),
                                           t("y", "ExternalOutput", [P, D])],
                           "blocks": [{"name": "b0", "instructions": [body]}]}]}


def inputs():
    return {"x": np.random.default_rng(0).standard_normal((P, D), dtype=np.float32),
            "gamma": np.ones((1, D), np.float32)}


def measure(kernel, fn, n, repeats, clock=time.thread_time, **sim_opts):
    """(direct, simulated, ratios): medians of seconds per call over `repeats` rounds and
    the per-round ratios simulated / direct (None without fn); the two are measured
    alternately so that load on the machine affects both alike. In-process figures use
    this thread's CPU time (robust when other processes compete for the cores); the
    external protocol uses wall time (the work happens in child processes)."""
    data = inputs()
    x, g = data["x"], data["gamma"].reshape(D)
    sims = {trips: birsim.Simulator(program(kernel, trips), **sim_opts) for trips in (1, n)}
    sims[1].run(data)                                                # warm up
    direct, per = [], []
    for _ in range(repeats):
        if fn is not None:
            t0 = clock()
            for _ in range(n):
                fn(x, g)
            direct.append((clock() - t0) / n)
        t = {}
        for trips in (1, n):
            t0 = clock()
            sims[trips].run(data)
            t[trips] = clock() - t0
        per.append((t[n] - t[1]) / (n - 1))
    ratios = [s / d for s, d in zip(per, direct)] if direct else None
    return (statistics.median(direct) if direct else None), statistics.median(per), ratios


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300, help="kernel calls per in-process run")
    ap.add_argument("--external-calls", type=int, default=10,
                    help="kernel calls per external-protocol run (0 to skip)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)

    exe = os.path.join(os.path.dirname(sys.executable), "kernel_sim")
    tmp = tempfile.mkdtemp(prefix="bench-kernels-")
    mod_path = os.path.join(tmp, "add_one_kernel.py")
    with open(mod_path, "w") as f:
        f.write(ADD_ONE_MODULE)
    os.environ["BIRSIM_KERNEL_MODULE"] = ",".join(
        [os.path.join(ROOT, "examples", "rmsnorm_kernel.py"), mod_path])
    rows = []
    try:
        for name, fn in (("rmsnorm", rmsnorm_kernel.rmsnorm), ("add_one", add_one)):
            direct, inproc, ratios = measure(name, fn, args.calls, args.repeats)
            ext = None
            if args.external_calls > 1:
                ext = measure(name, None, args.external_calls, 2, clock=time.perf_counter,
                              kernel_sim=exe, kernel_timeout=300)[1]
            rows.append([name, direct, inproc, ext, ratios])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"CustomOp on a [{P}, {D}] fp32 tensor: per-call time "
          f"({args.calls} calls in-process, {args.external_calls} external; medians of "
          f"{args.repeats} rounds)")
    print(f"{'kernel':<9} {'direct call':>12} {'in-process':>12} {'overhead':>11} {'ratio':>7} "
          f"{'spread':>11} {'external':>11} {'ratio':>8}")
    for name, direct, inproc, ext, ratios in rows:
        ext_s = f"{ext * 1e3:8.1f} ms" if ext is not None else f"{'-':>11}"
        ext_r = f"{ext / direct:7.0f}x" if ext is not None else f"{'-':>8}"
        print(f"{name:<9} {direct * 1e6:9.1f} us {inproc * 1e6:9.1f} us "
              f"{(inproc - direct) * 1e6:+8.1f} us {statistics.median(ratios):6.2f}x "
              f"{min(ratios):5.2f}-{max(ratios):4.2f} {ext_s} {ext_r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
