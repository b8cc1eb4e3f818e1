"""Benchmark: a flash-attention forward at 4096 x 128 (fp32 and bf16) as a BIR program,
against NumPy running the same tiling (examples/flash_attention.py), in the same run.

    python bench/bench_flash.py [--seq 4096] [--dim 128] [--threads 1,2] [--rounds R]

The program (built with birsim.build: 128-query x 512-key tiles, online softmax, P
transposed on the PE, 5,024 instructions at 4096 x 128) is loaded once; a round is one
``sim.run`` (input writes and the output read included) and one ``numpy_tiled`` call on
the same data, alternating which goes first. Each thread count T runs in a child process
with OPENBLAS_NUM_THREADS = T and ``Simulator(threads=T)``; 1 thread is timed on CPU
time, more on wall time. bf16: birsim's matmul inputs are bf16 (decoded inside each
Matmult); NumPy runs the fp32 tiling on the bf16 values widened to fp32. Every row first
checks birsim's output against a float64 softmax attention (max error relative to the
largest output: 1e-4 fp32, 3e-2 bf16). Printed: medians, the median of the per-round
ratios birsim / NumPy and their spread.
"""

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

from _common import blas_info, fmt_time, paired_calls, table, thread_children  # noqa: E402
import flash_attention as fa  # noqa: E402


def child(threads, S, d, rounds):
    import birsim
    from birsim import reference as ref
    clock = time.thread_time if threads == 1 else time.perf_counter
    q, k, v = fa.inputs(S, d)
    rows = []
    for dt in ("float32", "bfloat16"):
        sim = birsim.Simulator(fa.build(S, d, dt), threads=threads)
        data = fa.to_inputs(q, k, v, dt)
        qw, kw, vw = (ref.decode(ref.cast(a, dt)).astype(np.float32) for a in (q, k, v))
        o = fa.from_output(sim.run(data)["o"], S, d)
        want = fa.attention(qw, kw, vw)
        err = float(np.max(np.abs(o - want)) / np.max(np.abs(want)))
        if not err <= fa.TOLERANCE[dt]:
            raise SystemExit("flash attention %s: birsim's output is off by %.3g" % (dt, err))
        err_np = float(np.max(np.abs(fa.numpy_tiled(qw, kw, vw) - want)) / np.max(np.abs(want)))

        p = paired_calls(lambda: sim.run(data), lambda: fa.numpy_tiled(qw, kw, vw), rounds,
                         clock)
        rows.append((dt, p, sim.stats["instructions"], err, err_np))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        for dt, p, n, err, err_np in child(args.child, args.seq, args.dim, args.rounds):
            print("ROW", dt, n, err, err_np, " ".join("%.9g" % x for x in p.sim), "|",
                  " ".join("%.9g" % x for x in p.ref))
        print("BLAS", blas_info())
        return 0
    rows, blas = thread_children(__file__, [int(x) for x in args.threads.split(",")],
                                 ["--seq", args.seq, "--dim", args.dim, "--rounds", args.rounds], 4)
    if rows is None:
        return 1
    out = [(t, dt, int(n), float(err), float(err_np), p)
           for t, (dt, n, err, err_np), p in rows]
    print(blas)
    print("flash attention forward %d x %d, %d rounds; 1 thread: CPU time, more: wall time"
          % (args.seq, args.dim, args.rounds))
    table(["threads", "dtype", "insns", "birsim", "numpy tiled", "ratio", "spread",
           "err birsim", "err numpy"],
          [[str(t), dt, str(n), fmt_time(p.t_sim), fmt_time(p.t_ref), "%.2fx" % p.ratio,
            p.spread(), "%.1e" % e, "%.1e" % en] for t, dt, n, e, en, p in out])
    return 0


if __name__ == "__main__":
    sys.exit(main())
