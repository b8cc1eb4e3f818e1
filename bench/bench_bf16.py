"""Benchmark: bf16 casts in TensorCopy against NumPy doing the same cast, same run.

    python bench/bench_bf16.py [--repeat R] [--copies N]

Rows ([128, 2048] SBUF tiles):
  TensorCopy fp32 -> bf16   vs x.astype(ml_dtypes.bfloat16)
  TensorCopy bf16 -> fp32   vs y.astype(np.float32)
  TensorCopy fp32 -> fp32   vs np.copyto (the memcpy floor)

Protocol as bench/bench_kernels_core.py: N copies of the instruction in one block, minus
a run of the same program with no instructions, divided by N; thread CPU time; R paired
rounds; printed: medians, the median ratio birsim / NumPy and its spread (min-max).
"""

import argparse
import sys

import numpy as np

import ml_dtypes  # noqa: F401 -- NumPy's bfloat16

from _common import table, tensor, whole  # noqa: E402
from bench_kernels_core import paired_rounds  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="paired rounds")
    ap.add_argument("--copies", type=int, default=20, help="instructions per program")
    args = ap.parse_args(argv)
    R, N = args.repeat, args.copies
    S = (128, 2048)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(S, dtype=np.float32)
    y = x.astype(ml_dtypes.bfloat16)
    xo = np.empty(S, np.float32)
    yo = np.empty(S, ml_dtypes.bfloat16)
    rows = []
    for label, src, dst, data, np_fn in (
            ("fp32 -> bf16", "float32", "bfloat16", x, lambda: np.copyto(yo, x, casting="unsafe")),
            ("bf16 -> fp32", "bfloat16", "float32", y, lambda: np.copyto(xo, y, casting="unsafe")),
            ("fp32 -> fp32", "float32", "float32", x, lambda: np.copyto(xo, x))):
        tens = [tensor("a", "ExternalInput", S, src), tensor("c", "Internal", S, dst)]
        cp = lambda nm, src=src, dst=dst: {
            "name": nm, "opcode": "TensorCopy", "engine": "DVE",
            "ins": [whole("a", S, src)], "outs": [whole("c", S, dst)]}
        p = paired_rounds(tens, cp, {"a": data}, N, np_fn, N, R)
        rows.append(["TensorCopy %s [128,2048]" % label, "%.1f us" % (p.t_sim * 1e6),
                     "%.1f us" % (p.t_ref * 1e6), "%.2fx" % p.ratio, p.spread()])
    table(["kernel", "birsim", "numpy", "ratio", "spread"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
