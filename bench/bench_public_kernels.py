"""Benchmark: every public NKI kernel as a BIR program against the same tiling in NumPy,
in the same run, with one BLAS thread.

    python bench/bench_public_kernels.py [--rounds R] [--only name,name] [--copying]

Rows (issue 24: each <= 1.0x its NumPy reference):

* sd_attention, layernorm, rmsnorm, softmax, mamba -- the builders of
  examples/public_kernels.py at the samples' shapes; a round is one ``sim.run`` (input
  writes and the output read included) and one call of the kernel's ``tiled_*`` NumPy
  function (the same per-tile operations in fp32) on the same data. Two NumPy peers:
  ``numpy`` computes on the input arrays in place and into the output (the fastest
  NumPy); ``numpy+dma`` also does the kernel's Loads and Saves (each tile copied into a
  buffer, the result copied out: ``tiled_*(..., dma=True)``), i.e. every per-tile
  operation of the kernel. Both are printed; the rows without DMA have one peer.
* The kernel rows run the default ``Simulator`` (zero-copy: inputs read in place, the
  output buffer handed over: docs/python-api.md, "Zero-copy runs"). ``--copying`` adds a
  row ``<kernel>_copying`` per kernel row: the same kernel run by a
  ``Simulator(..., zero_copy=False)`` (every input and output copied) against the same
  ``numpy`` peer, in the same child.
* flash fp32, flash bf16 -- examples/flash_attention.py at 4096 x 128, as
  bench/bench_flash.py times it.
* matmul bf16 -- bench/bench_matmul.py's bf16 row (Matmult [128,128]^T x [128,512] with
  bf16 inputs against ``np.matmul`` on the values widened to fp32), per instruction.

Everything runs in one child process with OPENBLAS_NUM_THREADS=1 (``Simulator()`` is
single-threaded by default), timed on the thread's CPU time; rounds alternate which side
goes first. Before timing, every row checks birsim's output against the float64
reference (the tolerance of examples/public_kernels.py). Printed: medians, the median of
the per-round ratios birsim / NumPy and their min-max spread.
"""

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

from _common import Pair, blas_info, fmt_time, paired_calls, table, thread_children  # noqa: E402

ROWS = ("sd_attention", "layernorm", "rmsnorm", "softmax", "mamba", "flash_fp32",
        "flash_bf16", "matmul_bf16")


def _kernel_row(name, rounds, clock, dma, zero_copy=True):
    import birsim
    import public_kernels as pk
    build, make, ref, tiled, out, shape, _, tol = pk.KERNELS[name]
    data = make(**shape)
    sim = birsim.Simulator(build(**shape), zero_copy=zero_copy)
    err = pk.rel_error(sim.run(data)[out], ref(**data))
    if not err <= tol:
        raise SystemExit("%s: birsim's output is off by %.3g" % (name, err))
    np_data = {k: v for k, v in data.items() if k != "ident"}

    return sim.stats["instructions"], err, paired_calls(
        lambda: sim.run(data), lambda: tiled(**np_data, dma=dma), rounds, clock)


def _flash_row(dt, rounds, clock):
    import birsim
    from birsim import reference as ref
    import flash_attention as fa
    S, d = 4096, 128
    q, k, v = fa.inputs(S, d)
    sim = birsim.Simulator(fa.build(S, d, dt))
    data = fa.to_inputs(q, k, v, dt)
    qw, kw, vw = (ref.decode(ref.cast(a, dt)).astype(np.float32) for a in (q, k, v))
    want = fa.attention(qw, kw, vw)
    err = float(np.max(np.abs(fa.from_output(sim.run(data)["o"], S, d) - want))
                / np.max(np.abs(want)))
    if not err <= fa.TOLERANCE[dt]:
        raise SystemExit("flash %s: birsim's output is off by %.3g" % (dt, err))

    return sim.stats["instructions"], err, paired_calls(
        lambda: sim.run(data), lambda: fa.numpy_tiled(qw, kw, vw), rounds, clock)


def _matmul_row(rounds):
    import bench_matmul
    for dt, s, r in bench_matmul.child(1, max(rounds, 5), 30):
        if dt == "bfloat16":          # (the child checked every product first)
            return 1, 0.0, Pair(s, r)
    raise SystemExit("bench_matmul gave no bf16 row")


def child(rounds, only, copying=False):
    clock = time.thread_time
    rows = []
    for name in only:
        if name.startswith("flash_"):
            n, err, p = _flash_row({"flash_fp32": "float32", "flash_bf16": "bfloat16"}[name],
                                   rounds, clock)
        elif name == "matmul_bf16":
            n, err, p = _matmul_row(rounds)
        else:
            n, err, p = _kernel_row(name, rounds, clock, False)
            rows.append((name + "+dma", n, err, _kernel_row(name, rounds, clock, True)[2]))
            if copying:
                cn, cerr, cp = _kernel_row(name, rounds, clock, False, False)
                rows.append((name + "_copying", cn, cerr, cp))
        rows.append((name, n, err, p))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(ROWS), help="comma-separated rows: " + ", ".join(ROWS))
    ap.add_argument("--copying", action="store_true",
                    help="also each kernel row with Simulator(zero_copy=False)")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    only = args.only.split(",")
    bad = [n for n in only if n not in ROWS]
    if bad:
        ap.error("unknown rows %s (known: %s)" % (bad, ", ".join(ROWS)))
    if args.child:
        for name, n, err, p in child(args.rounds, only, args.copying):
            print("ROW", name, n, err, " ".join("%.9g" % x for x in p.sim), "|",
                  " ".join("%.9g" % x for x in p.ref))
        print("BLAS", blas_info())
        return 0
    extra = ["--copying"] if args.copying else []
    rows, blas = thread_children(__file__, [1], ["--rounds", args.rounds, "--only", args.only]
                                 + extra, 3)
    if rows is None:
        return 1
    print(blas)
    print("public kernels, %d rounds, 1 thread, CPU time; ratio = birsim / NumPy tiled "
          "(median, min-max)" % args.rounds)
    dma = {name[:-4]: p for _, (name, _, _), p in rows if name.endswith("+dma")}
    out = []
    for _, (name, n, err), p in rows:
        if name.endswith("+dma"):
            continue
        d = dma.get(name)
        if name.endswith("_copying"):
            name = name[:-len("_copying")] + " copying"
        out.append([name, n, fmt_time(p.t_sim), fmt_time(p.t_ref), "%.2fx" % p.ratio,
                    p.spread(), "ok" if p.ratio <= 1.0 else "MISS",
                    fmt_time(d.t_ref) if d else "-", "%.2fx" % d.ratio if d else "-",
                    d.spread() if d else "-", ("ok" if d.ratio <= 1.0 else "MISS") if d else "-",
                    "%.1e" % float(err)])
    table(["kernel", "insns", "birsim", "numpy", "ratio", "spread", "<= 1.0x",
           "numpy+dma", "ratio", "spread", "<= 1.0x", "err"], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
