"""MatmultMx's product runs on Matmult's tiled driver (kernels/kmatmul.c bs_matmul_f32):
on a bench-sized tile ([128, 128] x [128, 512] containers, K = 512) every tile width
(BIRSIM_MM_ISA 0/1/2) and a threaded split give the bits of the NumPy oracle
(birsim.reference.matmult_mx: dequantize, then sums in k = 4p + q order from +0)."""

import warnings

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from bir import function, insn, module, tensor, whole

P, M, N = 128, 128, 512


def operands(rng, dtype, F):
    x = rng.standard_normal((P, 4 * F)).astype(np.float32)
    q, s = ref.quantize_mx(ref.cast(x, "bfloat16"), dtype)
    s = (s.astype(np.int64) + rng.integers(-3, 4, s.shape)).astype(np.uint8)
    return q, s


def run_mx(mv, st, ms, ss, dts, threads):
    allocs = [tensor("mv", "ExternalInput", dts[0], [P, N], "DRAM"),
              tensor("st", "ExternalInput", dts[1], [P, M], "DRAM"),
              tensor("ms", "ExternalInput", "uint8", list(ms.shape), "DRAM"),
              tensor("ss", "ExternalInput", "uint8", list(ss.shape), "DRAM"),
              tensor("ps", "Internal", "float32", [M, N], "PSUM"),
              tensor("y", "ExternalOutput", "float32", [M, N], "DRAM")]
    code = [insn("mm", "MatmultMx", "PE",
                 ins=[whole("mv", (P, N), dts[0]), whole("st", (P, M), dts[1]),
                      whole("ms", ms.shape, "uint8"), whole("ss", ss.shape, "uint8")],
                 outs=[whole("ps", (M, N), "float32")], accumulation_flag=2),
            insn("cp", "TensorCopy", "DVE", ins=[whole("ps", (M, N), "float32")],
                 outs=[whole("y", (M, N), "float32")])]
    with warnings.catch_warnings():
        warnings.simplefilter("error", birsim.BirsimWarning)
        sim = birsim.Simulator(module([function("main", allocs, code)]), strict=True,
                               threads=threads)
        return sim.run({"mv": mv, "st": st, "ms": ms, "ss": ss})["y"]


@pytest.mark.parametrize("dts", [("float8_e4m3fn_x4", "float8_e4m3fn_x4"),
                                 ("float8_e5m2_x4", "float4_e2m1fn_x4"),
                                 ("float4_e2m1fn_x4", "float4_e2m1fn_x4")])
@pytest.mark.parametrize("isa", ["0", "1", "2"])
def test_matmult_mx_bench_tile_every_tile_width_and_threads(dts, isa, monkeypatch):
    rng = np.random.default_rng(len(dts[0]) + 7 * len(dts[1]) + int(isa))
    mv, ms = operands(rng, dts[0], N)
    st, ss = operands(rng, dts[1], M)
    ms[1, 3] = 255                           # an E8M0 NaN scale: NaN over its 8 x 4 block
    monkeypatch.setenv("BIRSIM_MM_ISA", isa)  # capped at what the CPU runs
    want = ref.matmult_mx(mv, st, ms, ss, *dts)
    assert np.isnan(want[:, 3]).all() and not np.isnan(want[:, 4]).any()
    for threads in (1, 2):
        np.testing.assert_array_equal(run_mx(mv, st, ms, ss, dts, threads), want)
