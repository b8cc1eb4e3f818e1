"""Benchmark: Matmult [128,128]^T x [128,512] into PSUM against NumPy's BLAS doing the same
product (``np.matmul(w.T, x, out=r)``) with the same number of threads, in the same run.

    python bench/bench_matmul.py [--threads 1,2] [--rounds R] [--copies C]

Each thread count T runs in a child process whose OPENBLAS_NUM_THREADS, OMP_NUM_THREADS
and MKL_NUM_THREADS are T (NumPy's BLAS reads them when it loads; no threadpoolctl
needed), with ``Simulator(threads=T)``. A round times one run of a program holding C
copies of the instruction minus one run of the same program without them (same tensors,
same input writes), divided by C, then C NumPy calls; rounds alternate which side goes
first. With one thread both sides are timed on the thread's CPU time (time.thread_time:
robust when other processes share the cores); with more, on wall time. Rows: fp32
inputs, and bf16 / fp8 (float8e4) inputs that birsim decodes inside the instruction
while NumPy multiplies the same values already widened to fp32 (its fastest form).
Printed per row: medians, GFLOP/s, the median of the per-round ratios birsim / NumPy
(below 1: birsim faster) and their spread. Before timing, every row checks birsim's
product against NumPy's (fp32 tolerance: the BLAS sums in another order).
"""

import argparse
import sys
import time

import numpy as np

from _common import blas_info, paired, program, table, tensor, thread_children, whole

K, M, N = 128, 128, 512
DTYPES = ("float32", "bfloat16", "float8e4")


def _round_trip(dt, x):
    from birsim import reference as ref
    return ref.decode(ref.cast(x, dt)) if dt != "float32" else x


def programs(dt, copies):
    """(the checked program: a Matmult into PSUM, then DVE copies it out -- synchronised,
    the copy waits for the matmult --; the timed one: ``copies`` Matmults; the same with
    none, whose run is subtracted)."""
    import birsim
    tens = [tensor("x", "ExternalInput", (K, N), dt), tensor("w", "ExternalInput", (K, M), dt),
            tensor("ps", "Internal", (M, N), mem="PSUM"),
            tensor("out", "ExternalOutput", (M, N))]

    def mm(nm):
        return {"name": nm, "opcode": "Matmult", "engine": "PE", "accumulation_flag": 2,
                "ins": [whole("x", (K, N), dt), whole("w", (K, M), dt)],
                "outs": [whole("ps", (M, N))]}
    cp = {"name": "cp", "opcode": "TensorCopy", "engine": "DVE",
          "ins": [whole("ps", (M, N))], "outs": [whole("out", (M, N))]}
    return (birsim.synchronize(program(tens, [mm("k"), cp])),
            program(tens[:3], [mm("k%d" % i) for i in range(copies)]), program(tens[:3], []))


def child(threads, rounds, copies):
    import birsim
    clock = time.thread_time if threads == 1 else time.perf_counter
    kw = {"threads": threads} if threads > 1 else {}     # (older builds had no threads=)
    rng = np.random.default_rng(0)
    rows = []
    for dt in DTYPES:
        from birsim import reference as ref
        x = rng.standard_normal((K, N), dtype=np.float32)
        w = rng.standard_normal((K, M), dtype=np.float32)
        xi, wi = (ref.cast(a, dt) if dt != "float32" else a for a in (x, w))
        xf, wf = ref.decode(xi).astype(np.float32), ref.decode(wi).astype(np.float32)
        r = np.empty((M, N), np.float32)
        checked, timed, bare = programs(dt, copies)
        check = birsim.Simulator(checked, **kw)
        got = check.run({"x": xi, "w": wi})["out"]
        want = wf.T.astype(np.float64) @ xf.astype(np.float64)
        if not np.allclose(got, want, rtol=1e-4, atol=1e-3 * np.abs(want).max()):
            raise SystemExit("birsim's %s product differs from NumPy's" % dt)
        full = birsim.Simulator(timed, **kw)
        empty = birsim.Simulator(bare, **kw)
        data = {"x": xi, "w": wi}

        def sim_round():
            t0 = clock()
            full.run(data)
            t1 = clock()
            empty.run(data)
            return max((t1 - t0) - (clock() - t1), 1e-9) / copies

        def np_round():
            t0 = clock()
            for _ in range(copies):
                np.matmul(wf.T, xf, out=r)
            return (clock() - t0) / copies
        p = paired(sim_round, np_round, rounds, warm=2)
        rows.append((dt, p.sim, p.ref))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--copies", type=int, default=30)
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        for dt, s, r in child(args.child, args.rounds, args.copies):
            print("ROW", dt, " ".join("%.9g" % v for v in s), "|",
                  " ".join("%.9g" % v for v in r))
        print("BLAS", blas_info())
        return 0
    rows, blas = thread_children(__file__, [int(v) for v in args.threads.split(",")],
                                 ["--rounds", args.rounds, "--copies", args.copies], 1)
    if rows is None:
        return 1
    out = [(t, dt, p) for t, (dt,), p in rows]
    print(blas)
    print("Matmult [%d,%d]^T x [%d,%d] -> PSUM fp32; %d rounds of %d instructions; "
          "1 thread: CPU time, more: wall time" % (K, M, K, N, args.rounds, args.copies))
    fl = 2.0 * K * M * N
    rows = [[str(t), dt, "%.1f us" % (p.t_sim * 1e6), "%.0f" % (fl / p.t_sim / 1e9),
             "%.1f us" % (p.t_ref * 1e6), "%.0f" % (fl / p.t_ref / 1e9),
             "%.2fx" % p.ratio, p.spread(), "%.0f%%" % (100 / p.ratio)]
            for t, dt, p in out]
    table(["threads", "inputs", "birsim", "GFLOP/s", "numpy", "GFLOP/s", "ratio", "spread",
           "of BLAS"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
