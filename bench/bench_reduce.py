"""Benchmark: TensorReduce along the free axis against NumPy, same run.

    python bench/bench_reduce.py [--repeat R] [--copies N] [--cols 64,512,...]

For each shape [128, F], dtype (fp32, bf16) and op (add, max), a program holds N copies
of ``TensorReduce(op, axis=X)`` from an SBUF tile into a [128, 1] fp32 tile. birsim's time
per instruction is (run of the N-copy program - run of the same program with no
instructions) / N. The peer is ``np.sum(x, axis=1)`` / ``np.max(x, axis=1)`` into a
preallocated output, on fp32 data (for bf16 the peer is ``np.add.reduce`` on the
same data already widened to fp32: NumPy has no fast bf16 arithmetic, and birsim also
reduces in fp32). Each round times both once; the table shows medians over R rounds and
the min..max of the per-round ratios. Target (issue 13): ratio <= 1.5 at every shape.
"""

import argparse
import sys

import numpy as np

import birsim
from _common import Pair, blas_info, fmt_time, once, paired, per_call, program, table, \
    tensor, whole

TARGET = 1.5


def reduce_program(F, dtype, op, n):
    S = (128, F)
    tens = [tensor("x", "ExternalInput", S, dtype), tensor("o", "Internal", (128, 1))]
    insns = [{"name": "r%d" % i, "opcode": "TensorReduce", "engine": "DVE", "op": op,
              "axis": "X", "ins": [whole("x", S, dtype)], "outs": [whole("o", (128, 1))]}
             for i in range(n)]
    return program(tens, insns)


def bench_one(F, dtype, op, copies, repeat):
    rng = np.random.default_rng(0)
    x32 = rng.standard_normal((128, F), dtype=np.float32)
    if dtype == "bfloat16":
        import ml_dtypes
        x = x32.astype(ml_dtypes.bfloat16)
        x32 = x.astype(np.float32)
    else:
        x = x32
    full = birsim.Simulator(reduce_program(F, dtype, op, copies))
    empty = birsim.Simulator(reduce_program(F, dtype, op, 0))
    out = np.empty(128, np.float32)
    ufunc = np.add if op == "add" else np.maximum
    # the result must agree with NumPy's (max exactly; add to fp32 rounding of two orders)
    got = full.run({"x": x})
    got = full.read("o")[:, 0]
    want = ufunc.reduce(x32, axis=1)
    if op == "max":
        assert np.array_equal(got, want), "max differs from NumPy"
    else:
        assert np.allclose(got, want, rtol=1e-4, atol=1e-3 * np.sqrt(F)), "sum differs"

    def sim():
        return (once(lambda: full.run({"x": x})) - once(lambda: empty.run({"x": x}))) / copies

    def ref():
        return per_call(lambda: ufunc.reduce(x32, axis=1, out=out), copies)

    return paired(sim, ref, repeat)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9, help="timed rounds (median reported)")
    ap.add_argument("--copies", type=int, default=20, help="instructions per program")
    ap.add_argument("--cols", default="64,256,1024,4096,8192", help="free sizes F")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--ops", default="add,max")
    args = ap.parse_args(argv)
    rows, ok = [], True
    for dtype in args.dtypes.split(","):
        for op in args.ops.split(","):
            for F in (int(c) for c in args.cols.split(",")):
                p = bench_one(F, dtype, op, args.copies, args.repeat)
                good = p.ratio <= TARGET
                ok &= good
                rows.append(["%s [128,%d] %s" % (op, F, dtype), fmt_time(p.t_sim),
                             fmt_time(p.t_ref), "%.2fx" % p.ratio, p.spread(),
                             "ok" if good else "MISSED"])
    print(blas_info())
    print("median of %d rounds, %d instructions per program, empty-program run subtracted; "
          "target ratio <= %.1f" % (args.repeat, args.copies, TARGET))
    table(["TensorReduce X", "birsim", "numpy", "ratio", "spread", ""], rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
