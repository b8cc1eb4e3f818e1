"""Matmult is bit-exact: every output element is the fp32 sum of rounded products in k
order from +0 (birsim.reference.matmult), whichever tile the CPU runs (BIRSIM_MM_ISA caps
it: 0 = 4-lane, 1 = AVX2, 2 = AVX-512) and however the product is laid out (tails of the
register tiles, strided and aliased operands, accumulate onto PSUM)."""

import numpy as np
import pytest

from birsim import reference as ref
from test_kernels_diff import gen, rng_for, run_matmul

SHAPES = [(128, 128, 512), (3, 9, 33), (1, 1, 1), (17, 8, 32), (128, 7, 100), (5, 127, 31),
          (64, 33, 65)]
DTYPES = [("float32", "float32"), ("bfloat16", "bfloat16"), ("float8e4", "float32")]


@pytest.fixture(params=["0", "1", "2"], ids=["v4", "avx2", "avx512"])
def isa(request, monkeypatch):
    """Cap the tile width (the CPU may not have the wider ones: then the cap is moot)."""
    monkeypatch.setenv("BIRSIM_MM_ISA", request.param)
    return request.param


def same_bits(got, want):
    got = np.ascontiguousarray(got, np.float32)
    want = np.ascontiguousarray(want, np.float32)
    assert got.shape == want.shape
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, "%d of %d elements differ, first at %s: %r != %r" % (
        bad.size, got.size, np.unravel_index(bad[0], got.shape), got.flat[bad[0]],
        want.flat[bad[0]])


@pytest.mark.parametrize("dts", DTYPES, ids="-".join)
@pytest.mark.parametrize("K,M,N", SHAPES)
def test_matmult_bits(isa, dts, K, M, N):
    rng = rng_for("mmx", dts, K, M, N)
    mv = gen(dts[0], (K, N), rng, -3, 3)
    st = gen(dts[1], (K, M), rng, -3, 3)
    got, = run_matmul([mv], [st], [2])
    same_bits(got, ref.matmult(mv, st))


@pytest.mark.parametrize("layouts", [("strided", "contig"), ("poff", "strided"),
                                     ("alias", "poff"), ("contig", "alias")], ids="-".join)
def test_matmult_bits_layouts(isa, layouts):
    rng = rng_for("mmxl", layouts)
    K, M, N = 32, 19, 70
    mv, st = gen("bfloat16", (K, N), rng), gen("float32", (K, M), rng)
    got, = run_matmul([mv], [st], [2], layouts=layouts)
    same_bits(got, ref.matmult(mv, st))


def test_matmult_bits_accumulate(isa):
    """start, then accumulate twice: the scratch result added onto PSUM (not direct)."""
    rng = rng_for("mmxa")
    K, M, N = 40, 12, 50
    pairs = [(gen("float32", (K, N), rng), gen("float32", (K, M), rng)) for _ in range(3)]
    got = run_matmul([p[0] for p in pairs], [p[1] for p in pairs], [2, 1, 1])
    state = None
    for i, f in enumerate([2, 1, 1]):
        state = ref.psum_write(state, np.ones((M, N), bool), ref.matmult(*pairs[i]), f)
        same_bits(got[i], state)


def test_matmult_bits_specials(isa):
    """Inf, NaN, signed zeros and subnormals go through the tiles like the reference."""
    rng = rng_for("mmxs")
    K, M, N = 9, 10, 40
    mv = gen("float32", (K, N), rng)
    st = gen("float32", (K, M), rng)
    mv[0, :4] = [np.inf, -np.inf, np.nan, -0.0]
    mv[1, 4:8] = [1e-40, -1e-40, 3e38, -3e38]
    st[2, :3] = [-0.0, 1e-42, np.inf]
    st[:, 5] = -0.0
    got, = run_matmul([mv], [st], [2])
    with np.errstate(invalid="ignore", over="ignore"):
        want = ref.matmult(mv, st)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    got, want = got.copy(), want.copy()
    got[nan] = want[nan] = 0
    same_bits(got, want)
