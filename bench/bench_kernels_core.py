"""Benchmark: birsim's core compute kernels against NumPy doing the same math, same run.

    python bench/bench_kernels_core.py [--repeat R] [--copies N]

Rows:
  TensorTensor add   [128, 2048] fp32 SBUF tiles            vs np.add(a, b, out=c)
  Activation Exp     [128, 2048] fp32                       vs np.exp(a, out=c)
  Matmult            [128,128]^T x [128,512] fp32 -> PSUM   vs np.matmul(w.T, x, out=r)
  tiny instruction   10,000 TensorTensor adds on [1, 1]     vs 10,000 np.add calls on
                                                               1-element arrays

What is measured is the kernel, not Python: each program holds N copies of the
instruction in one block (N = --copies, 10,000 for the tiny row), the simulator is built
once and run R times (best run kept), and the best run of the *same program with no
instructions* (same tensors, same input writes) is subtracted before dividing by N. NumPy
is timed the same way: the best of R timings of N calls, divided by N. The ratio is
birsim / NumPy (below 1 means birsim is faster). Targets: data kernels within 2x of
NumPy, matmul within 3x, per-instruction overhead below NumPy's per-call cost.

The BLAS behind np.matmul (and OPENBLAS_CORETYPE, which this machine may set) is printed
with the table; the benchmark does not change either.
"""

import argparse
import os
import sys
import time

import numpy as np

import birsim


def _tensor(name, kind, shape, mem="SB"):
    return {"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": "float32",
            "tensor_shape": list(shape), "memorylocations": [{"name": name, "type": mem}]}


def _whole(name, shape):
    return {"kind": "physical_ap", "memref": name, "dtype": "float32",
            "ap": [[shape[1], shape[0]], [1, shape[1]]]}


def _program(tensors, make_insn, n):
    insns = [make_insn("k%d" % i) for i in range(n)]
    return {"version": 2, "arch": "gen3", "functions": [{
        "name": "main", "allocations": tensors,
        "blocks": [{"name": "b0", "instructions": insns}]}]}


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def time_birsim(tensors, make_insn, inputs, n, repeat):
    """Seconds per instruction: (best run of n copies - best run of 0 copies) / n."""
    full = birsim.Simulator(_program(tensors, make_insn, n))
    empty = birsim.Simulator(_program(tensors, make_insn, 0))
    full.run(inputs)                         # warm up (scratch buffers, caches)
    empty.run(inputs)
    t_full = _best(lambda: full.run(inputs), repeat)
    t_empty = _best(lambda: empty.run(inputs), repeat)
    assert full.stats["instructions"] == n
    return max(t_full - t_empty, 0.0) / n, t_empty


def time_numpy(fn, n, repeat):
    def many():
        for _ in range(n):
            fn()
    fn()
    return _best(many, repeat) / n


def blas_info():
    cfg = getattr(np, "__config__", None)
    name = version = "?"
    try:
        blas = cfg.CONFIG["Build Dependencies"]["blas"]
        name, version = blas.get("name", "?"), blas.get("version", "?")
    except Exception:  # noqa: BLE001 -- older NumPy: no CONFIG dict
        pass
    extra = ""
    try:
        import threadpoolctl
        for p in threadpoolctl.threadpool_info():
            if p.get("user_api") == "blas":
                extra = "; threadpoolctl: %s %s, core %s, %d threads" % (
                    p.get("internal_api"), p.get("version"), p.get("architecture"),
                    p.get("num_threads", 0))
                break
    except ImportError:
        extra = "; (threadpoolctl not installed: core type not queried)"
    return "numpy %s BLAS: %s %s%s; OPENBLAS_CORETYPE=%s" % (
        np.__version__, name, version, extra, os.environ.get("OPENBLAS_CORETYPE", "(unset)"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="timed runs; the best is kept")
    ap.add_argument("--copies", type=int, default=20, help="instructions per data program")
    ap.add_argument("--tiny", type=int, default=10000, help="tiny instructions")
    args = ap.parse_args(argv)
    R, N = args.repeat, args.copies
    rng = np.random.default_rng(0)
    rows = []

    # --- TensorTensor add, [128, 2048] fp32 -----------------------------------------
    S = (128, 2048)
    a = rng.standard_normal(S, dtype=np.float32)
    b = rng.standard_normal(S, dtype=np.float32)
    c = np.empty_like(a)
    tens = [_tensor("a", "ExternalInput", S), _tensor("b", "ExternalInput", S),
            _tensor("c", "Internal", S)]
    tt = lambda nm: {"name": nm, "opcode": "TensorTensor", "engine": "DVE", "op": "add",
                     "ins": [_whole("a", S), _whole("b", S)], "outs": [_whole("c", S)]}
    t_sim, _ = time_birsim(tens, tt, {"a": a, "b": b}, N, R)
    t_np = time_numpy(lambda: np.add(a, b, out=c), N, R)
    rows.append(("TensorTensor add [128,2048] f32", t_sim, t_np, 2.0))

    # --- Activation Exp, same tile -------------------------------------------------------
    act = lambda nm: {"name": nm, "opcode": "Activation", "engine": "Activation",
                      "func": "Exp", "ins": [_whole("a", S)], "outs": [_whole("c", S)]}
    t_sim, _ = time_birsim(tens, act, {"a": a, "b": b}, N, R)
    t_np = time_numpy(lambda: np.exp(a, out=c), N, R)
    rows.append(("Activation Exp [128,2048] f32", t_sim, t_np, 2.0))

    # --- Matmult [128,128] x [128,512] fp32 -> PSUM ---------------------------------------
    K, M, Nn = 128, 128, 512
    x = rng.standard_normal((K, Nn), dtype=np.float32)
    w = rng.standard_normal((K, M), dtype=np.float32)
    r = np.empty((M, Nn), np.float32)
    wt = np.ascontiguousarray(w.T)
    mt = [_tensor("x", "ExternalInput", (K, Nn)), _tensor("w", "ExternalInput", (K, M)),
          _tensor("ps", "Internal", (M, Nn), "PSUM")]
    mm = lambda nm: {"name": nm, "opcode": "Matmult", "engine": "PE",
                     "accumulation_flag": 2, "ins": [_whole("x", (K, Nn)), _whole("w", (K, M))],
                     "outs": [_whole("ps", (M, Nn))]}
    t_sim, _ = time_birsim(mt, mm, {"x": x, "w": w}, N, R)
    t_np = time_numpy(lambda: np.matmul(w.T, x, out=r), N, R)
    t_np_c = time_numpy(lambda: np.matmul(wt, x, out=r), N, R)
    rows.append(("Matmult [128,128]x[128,512] f32", t_sim, min(t_np, t_np_c), 3.0))

    # --- 10,000 tiny instructions -------------------------------------------------------
    T = (1, 1)
    ta = np.ones(T, np.float32)
    tb = np.ones(T, np.float32)
    tc = np.empty(T, np.float32)
    tiny_t = [_tensor("a", "ExternalInput", T), _tensor("b", "ExternalInput", T),
              _tensor("c", "Internal", T)]
    tiny = lambda nm: {"name": nm, "opcode": "TensorTensor", "engine": "DVE", "op": "add",
                       "ins": [_whole("a", T), _whole("b", T)], "outs": [_whole("c", T)]}
    t_sim, _ = time_birsim(tiny_t, tiny, {"a": ta, "b": tb}, args.tiny, R)
    t_np = time_numpy(lambda: np.add(ta, tb, out=tc), args.tiny, R)
    rows.append(("tiny TensorTensor [1,1] (per insn)", t_sim, t_np, 1.0))

    print(blas_info())
    print("best of %d runs; %d copies per data program, %d tiny instructions; empty-program "
          "run subtracted" % (R, N, args.tiny))
    w0 = max(len(r[0]) for r in rows)
    print("%-*s  %12s  %12s  %7s  %7s  %s" % (w0, "kernel", "birsim", "numpy", "ratio",
                                              "target", ""))
    ok_all = True
    for name, ts, tn, target in rows:
        ratio = ts / tn
        ok = ratio <= target if target > 1 else ratio < target
        ok_all &= ok
        print("%-*s  %10.2f us  %10.2f us  %6.2fx  %s%5.1fx  %s" % (
            w0, name, ts * 1e6, tn * 1e6, ratio, "<=" if target > 1 else "< ", target,
            "ok" if ok else "MISSED"))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
