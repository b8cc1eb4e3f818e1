"""Benchmark: birsim's core compute kernels against NumPy doing the same math, same run.

    python bench/bench_kernels_core.py [--repeat R] [--copies N]

Rows:
  TensorTensor add   [128, 2048] fp32 SBUF tiles            vs np.add(a, b, out=c)
  ... in place       out0 is in0                            vs np.add(a, b, out=a)
  Activation Exp     [128, 2048] fp32                       vs np.exp(a, out=c)
  Matmult            [128,128]^T x [128,512] fp32 -> PSUM   vs np.matmul(w.T, x, out=r)
  tiny instruction   10,000 TensorTensor adds on [1, 1]     vs 10,000 np.add calls on
                                                               1-element arrays

What is measured is the kernel, not Python: each program holds N copies of the
instruction in one block (N = --copies, 10,000 for the tiny row), the simulator is built
once; a round is one run of it minus one run of the *same program with no instructions*
(same tensors, same input writes), divided by N, then N NumPy calls divided by N. R
rounds (--repeat) alternate which side goes first; both sides are timed on the thread's
CPU time (time.thread_time), which a busy machine disturbs far less than wall time.
Printed: the median of each side, the median of the per-round ratios birsim / NumPy
(below 1 means birsim is faster) and their spread (min-max). Targets: data kernels
within 2x of NumPy, matmul within 3x, per-instruction overhead below NumPy's per-call
cost. NumPy's BLAS runs on one thread unless OPENBLAS_NUM_THREADS says otherwise
(bench/bench_matmul.py compares with 1 and 2 BLAS threads and Simulator(threads=2)).

The BLAS behind np.matmul (and OPENBLAS_CORETYPE, which this machine may set) is printed
with the table; the benchmark does not change either.
"""

import argparse
import os
import sys
import time

# birsim's default is one thread and CPU time is measured on this thread: NumPy's BLAS
# gets one thread too unless OPENBLAS_NUM_THREADS is set. Must happen before NumPy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import birsim  # noqa: E402
from _common import paired  # noqa: E402


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


def paired_rounds(tensors, make_insn, inputs, n, np_fn, n_np, repeat):
    """Pair of per-call times (birsim per instruction, NumPy per call) over `repeat`
    alternating rounds, on this thread's CPU time."""
    clock = time.thread_time
    full = birsim.Simulator(_program(tensors, make_insn, n))
    empty = birsim.Simulator(_program(tensors, make_insn, 0))

    def sim_round():
        t0 = clock()
        full.run(inputs)
        t1 = clock()
        empty.run(inputs)
        return max((t1 - t0) - (clock() - t1), 0.0) / n

    def np_round():
        t0 = clock()
        for _ in range(n_np):
            np_fn()
        return (clock() - t0) / n_np
    p = paired(sim_round, np_round, repeat, warm=1)
    assert full.stats["instructions"] == n
    return p


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
    return "numpy %s BLAS: %s %s%s; OPENBLAS_CORETYPE=%s, OPENBLAS_NUM_THREADS=%s" % (
        np.__version__, name, version, extra, os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        os.environ.get("OPENBLAS_NUM_THREADS"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="paired rounds")
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
    rows.append(("TensorTensor add [128,2048] f32", paired_rounds(
        tens, tt, {"a": a, "b": b}, N, lambda: np.add(a, b, out=c), N, R), 2.0))

    # --- TensorTensor add in place (out0 is in0), same tile ------------------------------
    ta = [_tensor("a", "ExternalInput", S), _tensor("b", "ExternalInput", S)]
    tti = lambda nm: {"name": nm, "opcode": "TensorTensor", "engine": "DVE", "op": "add",
                      "ins": [_whole("a", S), _whole("b", S)], "outs": [_whole("a", S)]}
    a2 = a.copy()
    rows.append(("TensorTensor add in place f32", paired_rounds(
        ta, tti, {"a": a, "b": b}, N, lambda: np.add(a2, b, out=a2), N, R), 2.0))

    # --- Activation Exp, same tile -------------------------------------------------------
    act = lambda nm: {"name": nm, "opcode": "Activation", "engine": "Activation",
                      "func": "Exp", "ins": [_whole("a", S)], "outs": [_whole("c", S)]}
    rows.append(("Activation Exp [128,2048] f32", paired_rounds(
        tens, act, {"a": a, "b": b}, N, lambda: np.exp(a, out=c), N, R), 2.0))

    # --- Matmult [128,128] x [128,512] fp32 -> PSUM ---------------------------------------
    K, M, Nn = 128, 128, 512
    x = rng.standard_normal((K, Nn), dtype=np.float32)
    w = rng.standard_normal((K, M), dtype=np.float32)
    r = np.empty((M, Nn), np.float32)
    mt = [_tensor("x", "ExternalInput", (K, Nn)), _tensor("w", "ExternalInput", (K, M)),
          _tensor("ps", "Internal", (M, Nn), "PSUM")]
    mm = lambda nm: {"name": nm, "opcode": "Matmult", "engine": "PE",
                     "accumulation_flag": 2, "ins": [_whole("x", (K, Nn)), _whole("w", (K, M))],
                     "outs": [_whole("ps", (M, Nn))]}
    rows.append(("Matmult [128,128]x[128,512] f32", paired_rounds(
        mt, mm, {"x": x, "w": w}, N, lambda: np.matmul(w.T, x, out=r), N, R), 3.0))

    # --- 10,000 tiny instructions -------------------------------------------------------
    T = (1, 1)
    ta = np.ones(T, np.float32)
    tb = np.ones(T, np.float32)
    tc = np.empty(T, np.float32)
    tiny_t = [_tensor("a", "ExternalInput", T), _tensor("b", "ExternalInput", T),
              _tensor("c", "Internal", T)]
    tiny = lambda nm: {"name": nm, "opcode": "TensorTensor", "engine": "DVE", "op": "add",
                       "ins": [_whole("a", T), _whole("b", T)], "outs": [_whole("c", T)]}
    rows.append(("tiny TensorTensor [1,1] (per insn)", paired_rounds(
        tiny_t, tiny, {"a": ta, "b": tb}, args.tiny, lambda: np.add(ta, tb, out=tc),
        args.tiny, R), 1.0))

    print(blas_info())
    print("%d paired rounds (CPU time); %d copies per data program, %d tiny instructions; "
          "empty-program run subtracted" % (R, N, args.tiny))
    w0 = max(len(r[0]) for r in rows)
    print("%-*s  %12s  %12s  %7s  %11s  %7s  %s" % (w0, "kernel", "birsim", "numpy", "ratio",
                                                    "spread", "target", ""))
    ok_all = True
    for name, p, target in rows:
        ok = p.ratio <= target if target > 1 else p.ratio < target
        ok_all &= ok
        print("%-*s  %9.2f us  %9.2f us  %6.2fx  %11s  %s%5.1fx  %s" % (
            w0, name, p.t_sim * 1e6, p.t_ref * 1e6, p.ratio, p.spread(),
            "<=" if target > 1 else "< ", target, "ok" if ok else "MISSED"))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
