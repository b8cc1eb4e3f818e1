"""Benchmark: QuantizeMx and MatmultMx on realistic tiles against NumPy doing the same
math, same run.

    python bench/bench_mx.py [--repeat R] [--copies N] [--clock wall|cpu]

Run after ``pip install .``: it imports the installed birsim. A program holds N copies of
the measured instruction; birsim's time per instruction is (run of the N-copy program -
run of the same program with no copies) / N, so loading and host transfers cancel out.
(MatmultMx: N + 1 copies against one, so that the copy of PSUM out reads a written tile
in both programs.)

- quantize: QuantizeMx of a [128, 2048] bfloat16 tile (the opcode reads bf16/fp16) into
  float8_e4m3fn_x4 [128, 512] containers and [16, 512] E8M0 scales. NumPy peer: per
  8-partition x 4-element group the absolute max, its exponent (``np.frexp``), the scale
  byte, the values times 2^(127 - E) cast to ml_dtypes' float8_e4m3fn, the four lanes
  viewed as one uint32 container.
- matmult: MatmultMx of [128, 128] stationary by [128, 512] moving containers (the
  contraction runs over 128 partitions x 4 lanes = 512) with E8M0 scales, into a fp32
  PSUM tile [128, 512], in float8_e4m3fn_x4 and float4_e2m1fn_x4. NumPy peer: decode the
  lanes through a table built with ml_dtypes (256 fp8 codes indexed by the bytes; 16 fp4
  codes indexed by the nibbles), scale each 8-partition group by its 2^(s-127) (a
  256-entry table), de-interleave to [512, M] / [512, N] and one fp32 ``st.T @ mv``. Both
  sides run on one thread: birsim's default, and the script sets OPENBLAS_NUM_THREADS /
  OMP_NUM_THREADS / MKL_NUM_THREADS to 1 before NumPy loads unless the caller set them.
Each round times both once; the table shows medians over R rounds and the min..max of the
per-round ratios (birsim / NumPy). Both results are checked against each other first.
"""

import argparse
import os
import sys
import time
import warnings

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import ml_dtypes  # noqa: E402  (after the thread count is set)
import numpy as np  # noqa: E402

import birsim  # noqa: E402
from birsim import reference  # noqa: E402
from _common import blas_info, copy_round, once, paired, program, target_table, tensor, whole

TARGET = 2.0
P, FQ = 128, 2048            # QuantizeMx input tile
M, N = 128, 512              # MatmultMx: stationary [P, M], moving [P, N] containers
X4 = "float8_e4m3fn_x4"
EMAX = 8                     # float8_e4m3fn (machine-model.md §6.2)
LUT = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
LUT4 = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
NIBBLE = np.array([0, 4, 8, 12], np.uint16)
SCALE = np.append(np.ldexp(np.float32(1), np.arange(-127, 128)), np.nan).astype(np.float32)


def quantize_group(k):
    return [{"name": "q%d" % k, "opcode": "QuantizeMx", "engine": "DVE",
             "ins": [whole("x", (P, FQ), "bfloat16")],
             "outs": [whole("q", (P, FQ // 4), X4), whole("s", (P // 8, FQ // 4), "uint8")]}]


def matmult_group(k, dt):
    return [{"name": "m%d" % k, "opcode": "MatmultMx", "engine": "PE",
             "ins": [whole("mv", (P, N), dt), whole("st", (P, M), dt),
                     whole("ms", (P // 8, N), "uint8"), whole("ss", (P // 8, M), "uint8")],
             "outs": [whole("ps", (M, N))], "accumulation_flag": 2}]


def make(kind, n, dt=X4):
    if kind == "quantize":
        tens = [tensor("x", "ExternalInput", (P, FQ), "bfloat16"),
                tensor("q", "ExternalOutput", (P, FQ // 4), X4),
                tensor("s", "ExternalOutput", (P // 8, FQ // 4), "uint8")]
        body = [i for k in range(n) for i in quantize_group(k)]
    else:
        tens = [tensor("mv", "ExternalInput", (P, N), dt),
                tensor("st", "ExternalInput", (P, M), dt),
                tensor("ms", "ExternalInput", (P // 8, N), "uint8"),
                tensor("ss", "ExternalInput", (P // 8, M), "uint8"),
                tensor("ps", "Internal", (M, N), mem="PSUM"),
                tensor("y", "ExternalOutput", (M, N))]
        body = [i for k in range(n) for i in matmult_group(k, dt)]
        body.append({"name": "cp", "opcode": "TensorCopy", "engine": "DVE",
                     "ins": [whole("ps", (M, N))], "outs": [whole("y", (M, N))]})
        return birsim.synchronize(program(tens, body))   # cp waits for the last matmult
    return program(tens, body)


# {=== The NumPy peers ===}

def np_quantize(x):
    """x [P, F] bfloat16 -> (uint32 containers [P, F/4], uint8 scales [P/8, F/4])."""
    f = x.astype(np.float32)
    F = f.shape[1]
    g = f.reshape(P // 8, 8, F // 4, 4)
    amax = np.abs(g).max(axis=(1, 3))
    _, ex = np.frexp(amax)                      # amax = m 2^ex, 0.5 <= m < 1 (0 -> ex 0)
    e = np.clip(ex + (126 - (EMAX - 1)), 0, 254)
    e = np.where(amax > 0, e, 0).astype(np.uint8)
    mult = np.ldexp(np.float32(1), 127 - e.astype(np.int32))   # 2^(127 - E)
    y = g * mult[:, None, :, None]
    codes = y.reshape(P, F).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    return codes.view(np.uint32), e


def np_dequant(c, s):
    """x4 containers [P, F] (uint32: e4m3fn lanes, uint16: e2m1fn nibbles) and group
    scales [P/8, F] -> fp32 [4P, F], row 4p + q."""
    if c.dtype == np.uint16:                                                # fp4 lanes
        v = np.take(LUT4, (c[:, :, None] >> NIBBLE) & np.uint16(15))        # [P, F, 4]
    else:
        v = np.take(LUT, c.view(np.uint8))                                  # [P, 4F]
    v = v.reshape(P // 8, 8, c.shape[1], 4)
    v *= SCALE[s][:, None, :, None]                        # exact powers of two
    return v.reshape(P, c.shape[1], 4).transpose(0, 2, 1).reshape(4 * P, c.shape[1])


def np_matmult(mv, st, ms, ss):
    return np_dequant(st, ss).T @ np_dequant(mv, ms)


def operands(rng):
    x = rng.standard_normal((P, FQ)).astype(np.float32)
    x *= np.exp2(rng.integers(-6, 6, (P, 1))).astype(np.float32)
    xq = x.astype(ml_dtypes.bfloat16)
    a = rng.standard_normal((P, 4 * N)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((P, 4 * M)).astype(ml_dtypes.bfloat16)
    return xq, a, b


def once_cpu(fn):
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def main(argv=None):
    ap_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap_.add_argument("--repeat", type=int, default=15)
    ap_.add_argument("--copies", type=int, default=8)
    ap_.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                     help="cpu: time both sides by this thread's CPU time (use only with "
                          "the default single BLAS thread)")
    a = ap_.parse_args(argv)
    timer = once if a.clock == "wall" else once_cpu
    warnings.simplefilter("ignore", birsim.BirsimWarning)   # the 0-copy quantize writes nothing
    print("birsim %s from %s" % (birsim.__version__, birsim.__file__))
    print(blas_info())
    rng = np.random.default_rng(0)
    xq, am, bm = operands(rng)
    rows = []

    # QuantizeMx: birsim's codes and scales equal the peer's
    inq = {"x": xq}
    full, empty = birsim.Simulator(make("quantize", a.copies)), birsim.Simulator(make("quantize", 0))
    out = full.run(inq)
    wq, ws = np_quantize(xq)
    assert np.array_equal(out["s"], ws), "QuantizeMx scales differ from the NumPy peer"
    assert np.array_equal(np.asarray(out["q"]).view(np.uint32), wq), \
        "QuantizeMx codes differ from the NumPy peer"
    pr = paired(copy_round(full, empty, inq, a.copies, timer),
                lambda: timer(lambda: np_quantize(xq)), a.repeat)
    rows.append(("QuantizeMx [128, 2048] bf16 -> e4m3fn_x4", pr))

    # MatmultMx: operands quantized (e4m3fn: by the peer; e2m1fn: by birsim.reference),
    # product equal to the peer's up to fp32 summation order
    for dt in (X4, "float4_e2m1fn_x4"):
        if dt == X4:
            (mv, ms), (st, ss) = np_quantize(am), np_quantize(bm)
        else:
            (mv, ms), (st, ss) = reference.quantize_mx(am, dt), reference.quantize_mx(bm, dt)
        inm = {"mv": mv, "st": st, "ms": ms, "ss": ss}
        # N + 1 copies against one: the copy out of PSUM reads a tile a MatmultMx wrote
        full = birsim.Simulator(make("matmult", a.copies + 1, dt))
        empty = birsim.Simulator(make("matmult", 1, dt))
        y = full.run(inm)["y"]
        want = np_matmult(mv, st, ms, ss)
        mag = (np.abs(np_dequant(st, ss)).T.astype(np.float64)
               @ np.abs(np_dequant(mv, ms)).astype(np.float64))
        assert (np.abs(y - want) <= mag * 4 * P * 2.0 ** -23 + 1e-30).all(), \
            "MatmultMx differs from the NumPy peer beyond fp32 summation order"
        pr = paired(copy_round(full, empty, inm, a.copies, timer),
                    lambda: timer(lambda: np_matmult(mv, st, ms, ss)), a.repeat)
        rows.append(("MatmultMx [128,128]x[128,512] %s (K 512)" % dt[:-3], pr))

    return 0 if target_table("instruction", rows, TARGET) else 1


if __name__ == "__main__":
    sys.exit(main())
