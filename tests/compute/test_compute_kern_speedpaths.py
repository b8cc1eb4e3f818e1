"""The kernels' speed paths (issue 24) give the bits of the plain arithmetic.

- Activation Exp runs its affine step fp32(fp32(x * scale) + bias) and exp in one pass, on
  an AVX-512F path (table lookup by permutes) where the CPU has it, else the portable one
  (``BIRSIM_EXP_ISA=0`` forces it). Every result equals the host C library's ``expf`` of
  the same fp32 argument (a glibc host; k_expf.c documents the 2 one-ulp exceptions of all
  2^32 inputs, none of them here), and both paths agree bit for bit, NaN payloads included.
- Matmult with an exact identity as the moving operand (the PE transpose) skips the
  product: its result must be the sums' bits (+0 for either zero; a non-finite stationary
  value falls back to the product, where 0 * inf is NaN).
- Matmult packs dense bf16 operands with an inline shift.
References are NumPy (fp32 arithmetic, birsim.reference.matmult's k-ordered sums) and libm.
"""

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import birsim

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")
from birsim import build as B
from birsim import reference as ref
from test_compute_reference_diff import run_matmul

P, F = 7, 1037                     # 1037 = 64 * 16 + 13: a tail after every vector width

EDGE_BITS = [
    0x7fc00000, 0xffc00000, 0x7fc12345, 0x7f800001, 0xff812345, 0x7fbfffff,   # NaNs
    0x7f800000, 0xff800000, 0x00000000, 0x80000000,                          # +-inf, +-0
    0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x80800000,  # denormals
    0x7f7fffff, 0xff7fffff,                                                  # largest
    0x42b17217, 0x42b17218, 0x42b17219, 0xc2cff1b4, 0xc2cff1b5, 0xc2cff1b3,  # over/underflow
    0x42b00000, 0xc2b00000, 0x42afffff, 0xc2afffff, 0x42b00001, 0xc2b00001,  # |x| = 88
    0x3f800000, 0xbf800000, 0x33800000, 0xb3800000, 0x3effffff, 0x40000000,
]


def _libm_expf():
    name = ctypes.util.find_library("m")
    if name is None or not sys.platform.startswith("linux"):
        return None
    f = ctypes.CDLL(name).expf
    f.restype = ctypes.c_float
    f.argtypes = [ctypes.c_float]
    return f


EXPF = _libm_expf()


def expf_ref(t):
    """libm expf of each fp32 element (ctypes passes the float through unchanged)."""
    t = np.asarray(t, np.float32)
    out = np.array([EXPF(float(v)) for v in t.ravel()], np.float32)
    return out.reshape(t.shape)


def inputs(seed, p=P, f=F):
    """Edge values (every vector lane position over the rows), values in [-110, 110]
    (exp's whole range and past it), and random bit patterns."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-110, 110, (p, f)).astype(np.float32)
    bits = x.view(np.uint32)
    bits[:, f // 2:f // 2 + 64] = rng.integers(0, 2**32, (p, 64), dtype=np.uint64).astype(np.uint32)
    edge = np.array(EDGE_BITS, np.uint32)
    for r in range(p):
        pos = (np.arange(edge.size) * 29 + 3 * r) % f
        bits[r, pos] = np.roll(edge, r)
    return x


def assert_bits(got, want, nan_payload=True):
    got = np.ascontiguousarray(got, np.float32)
    want = np.ascontiguousarray(want, np.float32)
    assert got.shape == want.shape
    g, w = got.view(np.uint32), want.view(np.uint32)
    if not nan_payload:                      # libm's NaN for a NaN input: any quiet NaN
        both = np.isnan(got) & np.isnan(want)
        g, w = np.where(both, 0, g), np.where(both, 0, w)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, "%d of %d differ, first at %s: %r (%#x) != %r (%#x)" % (
        bad.size, got.size, np.unravel_index(bad[0], got.shape), got.flat[bad[0]],
        g.flat[bad[0]], want.flat[bad[0]], w.flat[bad[0]])


def act_program(layout, scale, per_part_bias, func="Exp"):
    """x [P, F] (or [P, 2F], every other column) -> Activation func -> y (or x in place)."""
    wide = layout == "strided"
    allocs = [B.tensor("x", "ExternalInput", "float32", [P, 2 * F if wide else F]),
              B.tensor("bias", "ExternalInput", "float32", [P, 1]),
              B.tensor("y", "ExternalOutput", "float32", [P, F])]
    src = B.ap("x", [[2 * F, P], [2, F]]) if wide else B.whole("x", [P, F])
    dst = B.whole("x", [P, F]) if layout == "inplace" else B.whole("y", [P, F])
    code = [B.activation(src, dst, func, scale=scale,
                         bias=B.ap("bias", [[1, P], [1, 1]]) if per_part_bias else None)]
    if layout == "inplace":
        code.append(B.tensor_copy(B.whole("x", [P, F]), B.whole("y", [P, F])))
    return B.module([B.function("main", allocs, code)], synchronize=True)


def run_act(layout, scale, bias, x):
    per_part = bias is not None
    b = np.zeros((P, 1), np.float32) if bias is None else bias
    feed = np.repeat(x, 2, axis=1) if layout == "strided" else x
    sim = birsim.Simulator(act_program(layout, scale, per_part), checks="all")
    return sim.run({"x": feed, "bias": b})["y"]


def affine(x, scale, bias):
    t = x * np.float32(scale)                # fp32 product, then fp32 sum: no fma
    return t + (np.zeros((P, 1), np.float32) if bias is None else bias)


BIASES = {
    "none": None,
    "per_partition": np.array([[0.0], [-0.0], [-3.5], [1e-3], [1e30], [-60.0], [2.5]],
                              np.float32),
}


@pytest.mark.skipif(EXPF is None, reason="needs the host libm (glibc)")
@pytest.mark.parametrize("layout", ["contig", "strided", "inplace"])
@pytest.mark.parametrize("scale,bias", [(1.0, "none"), (0.0883883476, "per_partition"),
                                        (-2.0, "per_partition"), (1.0, "per_partition")])
def test_activation_exp_is_libm_expf(layout, scale, bias):
    x = inputs(len(layout) * 1000 + int(abs(scale) * 100) + len(bias))
    got = run_act(layout, scale, BIASES[bias], x)
    want = expf_ref(affine(x, scale, BIASES[bias]))
    assert_bits(got, want, nan_payload=False)


@pytest.mark.skipif(EXPF is None, reason="needs the host libm (glibc)")
def test_activation_exp_affine_ties():
    """Rounding ties in the affine step: 1.5 * (1 + m 2^-23) ties for m = 2 mod 4, and
    (1 + m 2^-23) + 2^-24 for every m; both round to even before the exp."""
    x = (np.uint32(0x3f800000) + np.arange(P * F, dtype=np.uint32) % 4096).view(np.float32)
    x = x.reshape(P, F)
    for scale, bval in ((1.5, 0.0), (1.0, 2.0 ** -24)):
        bias = np.full((P, 1), bval, np.float32)
        got = run_act("contig", scale, bias, x)
        assert_bits(got, expf_ref(affine(x, scale, bias)))


_CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_compute_kern_speedpaths as t
print(json.dumps(t.path_results()))
"""


def path_results():
    """Activation Exp (plain, affine + per-partition bias, in place) and Exponential on
    the same inputs: every output's bits as hex, for comparing two processes."""
    x = inputs(5)
    res = {}
    for layout in ("contig", "inplace", "strided"):
        for scale, bias in ((1.0, "none"), (0.0883883476, "per_partition")):
            res["%s-%s-%s" % (layout, scale, bias)] = run_act(
                layout, scale, BIASES[bias], x).tobytes().hex()
    allocs = [B.tensor("x", "ExternalInput", "float32", [P, F]),
              B.tensor("y", "ExternalOutput", "float32", [P, F])]
    prog = B.module([B.function("main", allocs, [
        B.exponential(B.whole("x", [P, F]), B.whole("y", [P, F]))])])
    res["Exponential"] = birsim.Simulator(prog).run({"x": x})["y"].tobytes().hex()
    return res


def test_exp_paths_same_bits():
    """The portable path (BIRSIM_EXP_ISA=0, a fresh process: the path is chosen once)
    and this process's path (AVX-512F where the CPU has it) give the same bits."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, BIRSIM_EXP_ISA="0")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(here), here,
                                         env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", _CHILD, here], env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    portable = json.loads(out.strip().splitlines()[-1])
    mine = path_results()
    assert sorted(portable) == sorted(mine)
    for key in mine:
        assert portable[key] == mine[key], key


# ---- Matmult: the identity moving operand (PE transpose) ---------------------------------

def _stationary(K, M, seed, dtype="float32"):
    rng = np.random.default_rng(seed)
    b = rng.uniform(-3, 3, (K, M)).astype(np.float32)
    flat = b.view(np.uint32).ravel()
    special = np.array([0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff,
                        0x7f7fffff, 0xff7fffff, 0x3f800000], np.uint32)
    flat[::7][:special.size] = special[:flat[::7].size]
    return ref.cast(b, dtype)


def _same_or_both_nan(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    assert np.array_equal(got[keep].view(np.uint32), want[keep].view(np.uint32))


@pytest.mark.parametrize("K,M", [(128, 128), (5, 33), (17, 1), (1, 9), (33, 120), (16, 24)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("isa", ["0", "1"], ids=["scalar", "avx2"])
def test_identity_moving_bits(K, M, dtype, isa, monkeypatch):
    """The transpose in 16 x 16 blocks one element at a time (BIRSIM_MM_ISA=0) or in 8 x 8
    AVX2 register blocks with scalar edges (where the CPU has AVX2)."""
    monkeypatch.setenv("BIRSIM_MM_ISA", isa)
    ident = np.eye(K, dtype=np.float32)
    st = _stationary(K, M, K * 1000 + M, dtype)
    got, = run_matmul([ident], [st], [3])
    want = ref.matmult(ident, st)
    assert_bits(got, want)
    assert not np.signbit(got[got == 0]).any()          # -0 became +0, as the sums do


@pytest.mark.parametrize("layouts", [("strided", "contig"), ("contig", "strided"),
                                     ("poff", "alias"), ("alias", "poff")], ids="-".join)
def test_identity_moving_layouts(layouts):
    K, M = 24, 40
    ident = np.eye(K, dtype=np.float32)
    st = _stationary(K, M, 11)
    got, = run_matmul([ident], [st], [2], layouts=layouts)
    assert_bits(got, ref.matmult(ident, st))


@pytest.mark.parametrize("isa,layout", [("0", "contig"), ("1", "contig"), ("1", "strided")],
                         ids=["scalar", "avx2-dense", "avx2-strided"])
def test_identity_moving_nonfinite_falls_back(isa, layout, monkeypatch):
    """inf / NaN in the stationary: 0 * inf is NaN, so the sums are NaN where a
    non-finite value meets a 0 of the identity (the product path), not a transpose. On
    AVX2 a dense fp32 stationary is checked where it lies, a strided one once decoded."""
    monkeypatch.setenv("BIRSIM_MM_ISA", isa)
    K, M = 16, 20
    ident = np.eye(K, dtype=np.float32)
    st = _stationary(K, M, 3)
    st[2, 5] = np.inf
    st[7, 0] = -np.inf
    st[9, 9] = np.nan
    got, = run_matmul([ident], [st], [3], layouts=("contig", layout))
    want = ref.matmult(ident, st)
    off = np.arange(K) != 2
    assert np.isnan(got[5, off]).all() and got[5, 2] == np.inf    # R[m, n] = sum_k I[k, n] B[k, m]
    assert np.isnan(got[9]).all() and np.isnan(got[0, np.arange(K) != 7]).all()
    _same_or_both_nan(got, want)


@pytest.mark.parametrize("change", ["neg_zero_off_diagonal", "near_one", "permutation",
                                    "denormal_off_diagonal", "last_row_last_column",
                                    "first_row_second_column"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_near_identity_is_a_product(change, dtype):
    """Not the identity's exact bits: the product runs (and matches the k-ordered sums).
    bf16 identities are read two elements to a word: a change in either half counts."""
    K, M = 20, 24
    mv = np.eye(K, dtype=np.float32)
    if change == "neg_zero_off_diagonal":
        mv[3, 4] = -0.0
    elif change == "near_one":
        mv[6, 6] = 1 + 2.0 ** -7                           # one bf16 ulp above 1
    elif change == "permutation":
        mv = mv[::-1].copy()
    elif change == "denormal_off_diagonal":
        mv[0, 19] = 2.0 ** -130                            # subnormal in fp32 and bf16
    elif change == "last_row_last_column":
        mv[K - 1, K - 1] = 2.0
    else:
        mv[0, 1] = 0.5
    mv = ref.cast(mv, dtype)
    st = _stationary(K, M, 5)
    got, = run_matmul([mv], [st], [3])
    assert_bits(got, ref.matmult(mv, st))


def test_identity_moving_accumulates():
    """start with a product, then accumulate the transpose onto it (flag 1), then a plain
    write (flag 0): the PSUM write-back of each result."""
    K = M = 32
    rng = np.random.default_rng(9)
    a = rng.uniform(-2, 2, (K, K)).astype(np.float32)
    st0 = _stationary(K, M, 1)
    st1 = _stationary(K, M, 2)
    ident = np.eye(K, dtype=np.float32)
    r0, r1, r2 = run_matmul([a, ident, ident], [st0, st1, st0], [2, 1, 0])
    want0 = ref.matmult(a, st0)
    assert_bits(r0, want0)
    assert_bits(r1, (want0 + ref.matmult(ident, st1)).astype(np.float32))
    assert_bits(r2, ref.matmult(ident, st0))


@pytest.mark.parametrize("K,M,N", [(128, 128, 512), (3, 9, 33), (17, 5, 31)])
def test_bf16_packing_bits(K, M, N):
    """Dense bf16 operands (packed by a shift) with NaN, inf, denormal, -0 bf16 values."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(K + M + N)
    mv = rng.uniform(-3, 3, (K, N)).astype(ml_dtypes.bfloat16)
    st = rng.uniform(-3, 3, (K, M)).astype(ml_dtypes.bfloat16)
    edge = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x7f7f, 0xff7f, 0x3f80],
                    np.uint16)
    mv.view(np.uint16).ravel()[::5][:edge.size] = edge[:mv.view(np.uint16).ravel()[::5].size]
    got, = run_matmul([mv], [st], [3])
    assert_bits(got, ref.matmult(mv, st))
    mv.view(np.uint16)[0, 0] = 0x7fc1              # a NaN: the column's sums are NaN
    st.view(np.uint16)[K - 1, 0] = 0x7f80          # inf
    got, = run_matmul([mv], [st], [3])
    _same_or_both_nan(got, ref.matmult(mv, st))
