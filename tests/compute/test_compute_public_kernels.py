"""The public NKI kernels of examples/public_kernels.py (SD attention, layernorm, rmsnorm,
softmax, mamba; issue 24): each against an independent float64 NumPy reference, race-free
under checks="all", bit-identical under in_order, round_robin and 20 random seeds, and
racy without its synchronisation (so the sweep can fail). The NumPy tilings the bench
times are checked against the same references (the bench compares like with like)."""

import os
import sys
import warnings

import numpy as np
import pytest

import birsim

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.join(ROOT, "examples") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "examples"))

import public_kernels as pk  # noqa: E402

NAMES = sorted(pk.KERNELS)
SEEDS = range(20)
#: Shapes of the schedule sweep: two tiles (or key blocks) each, so engines hand over.
SWEEP = {"sd_attention": dict(S=512, d=32), "layernorm": dict(N=256, D=1024),
         "rmsnorm": dict(N=256, D=128), "softmax": dict(N=256, D=256),
         "mamba": dict(batch=1, channels=256, state=3, seq=32)}


def _run(module, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim = birsim.Simulator(module, **kw)
        return sim, sim.run(data)


@pytest.mark.parametrize("name", NAMES)
def test_matches_float64_reference(name):
    build, make, ref, _, out, _, small, tol = pk.KERNELS[name]
    data = make(**small, seed=3)
    _, got = _run(build(**small), data)
    want = ref(**data)
    assert got[out].shape == want.shape
    assert np.all(np.isfinite(got[out]))
    assert pk.rel_error(got[out], want) <= tol


@pytest.mark.parametrize("name", NAMES)
def test_numpy_tiling_matches_reference(name):
    _, make, ref, tiled, _, _, small, tol = pk.KERNELS[name]
    data = make(**small, seed=4)
    np_data = {k: v for k, v in data.items() if k != "ident"}
    plain = tiled(**np_data)
    assert pk.rel_error(plain, ref(**data)) <= tol
    # with the Loads' and Saves' copies: the same numbers
    assert np.array_equal(tiled(**np_data, dma=True), plain)


def test_sd_attention_bf16_is_not_fp32():
    """The probabilities really go through bf16: fp32 accuracy is out of reach."""
    data = pk.inputs_sd_attention(512, 64, seed=5)
    _, got = _run(pk.sd_attention(512, 64), data)
    want = pk.ref_sd_attention(**data)
    assert 1e-4 < pk.rel_error(got["out"], want) <= 2e-2


def test_layernorm_normalises_each_row():
    data = pk.inputs_layernorm(128, 512, seed=6)
    data["gamma"][:] = 1
    data["beta"][:] = 0
    _, got = _run(pk.layernorm(128, 512), data)
    np.testing.assert_allclose(got["out"].astype(np.float64).mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(got["out"].astype(np.float64).var(axis=1), 1, rtol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_race_free_and_schedule_independent(name):
    build, make, _, _, _, _, _, _ = pk.KERNELS[name]
    shape = SWEEP[name]
    module = birsim.load(build(**shape))
    data = make(**shape, seed=7)
    sim, ref = _run(module, data, checks="all")
    assert [f.message for f in sim.findings] == []
    schedules = [dict(schedule="in_order"), dict(schedule="round_robin")]
    schedules += [dict(schedule="random", seed=s) for s in SEEDS]
    for kw in schedules:
        _, out = _run(module, data, **kw)
        assert out.keys() == ref.keys()
        for k in ref:
            assert np.array_equal(out[k].view(np.uint8), ref[k].view(np.uint8)), (kw, k)


@pytest.mark.parametrize("name", NAMES)
def test_unsynchronised_kernel_races(name):
    build, make, _, _, _, _, _, _ = pk.KERNELS[name]
    shape = SWEEP[name]
    sim, _ = _run(build(**shape, synchronize=False), make(**shape), checks="races")
    assert any(f.kind == "races" for f in sim.findings)


def test_only_bir_instructions():
    """Real kernels: DMA loads/stores and compute opcodes, no CustomOp."""
    for name in NAMES:
        build, _, _, _, _, _, small, _ = pk.KERNELS[name]
        ops = {i["opcode"] for i in build(**small)["functions"][0]["blocks"][0]["instructions"]}
        assert {"Load", "Save"} <= ops
        assert not ops & {"CustomOp", "BIRKernel", "NKIKernel"}


# ---- BNStats' AVX-512 path (csrc/kernels/k_bn.c; the layernorm's hot spot) -----------

def _bn_stats(x, layout_stride, pad=0):
    from birsim import build as B
    P, F = x.shape
    W = F * layout_stride + pad                 # pad: rows wider than the view (in place)
    allocs = [B.tensor("x", "ExternalInput", "float32", [P, W], "SB"),
              B.tensor("y", "ExternalOutput", "float32", [P, 6], "SB")]
    code = [B.insn("BNStats", "DVE", [B.ap("x", [[W, P], [layout_stride, F]])],
                   [B.whole("y", [P, 6])])]
    xin = np.zeros((P, W), np.float32)
    xin[:, :F * layout_stride:layout_stride] = x
    return birsim.Simulator(B.module([B.function("main", allocs, code)])).run({"x": xin})["y"]


@pytest.mark.parametrize("P,F", [(128, 512), (100, 300), (64, 16), (17, 15), (33, 47), (1, 1)])
@pytest.mark.parametrize("stride,pad", [(1, 0), (1, 5), (2, 0)])
def test_bn_stats_paths_give_the_reference_bits(monkeypatch, P, F, stride, pad):
    """The wide path (blocks of 64 partitions, 16 x 16 transposes in registers with
    AVX-512, 8 x 8 with AVX2 (the one this host takes), scalar edges; unit-stride fp32
    rows read in place, others gathered) and the portable loop
    (BIRSIM_BN_ISA=0) both give birsim.reference.bn_stats's bits, on full and partial
    blocks, groups and column tails."""
    from birsim import reference as ref
    x = np.random.default_rng(P * 1000 + F).standard_normal((P, F), dtype=np.float32) * 3 + 1
    want = ref.bn_stats(x)
    wide = _bn_stats(x, stride, pad)
    monkeypatch.setenv("BIRSIM_BN_ISA", "0")
    portable = _bn_stats(x, stride, pad)
    assert np.array_equal(wide.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(portable.view(np.uint32), want.view(np.uint32))


# ---- the PE transpose with a bf16 identity (csrc/kernels/k_matmul.c; SD attention) ----

def _transpose(ident, b, dt_i, dt_b):
    from birsim import build as B
    K, M = b.shape
    N = ident.shape[1]
    allocs = [B.tensor("i", "ExternalInput", dt_i, [K, N], "SB"),
              B.tensor("b", "ExternalInput", dt_b, [K, M], "SB"),
              B.tensor("o", "ExternalOutput", "float32", [M, N], "PSUM")]
    code = [B.matmult(B.whole("i", [K, N], dt_i), B.whole("b", [K, M], dt_b),
                      B.whole("o", [M, N]), accumulation_flag=3)]
    return birsim.Simulator(B.module([B.function("main", allocs, code)])).run(
        {"i": ident, "b": b})["o"]


@pytest.mark.parametrize("K,M", [(128, 128), (64, 96), (2, 3), (33, 8)])
@pytest.mark.parametrize("dt_b", ["bfloat16", "float32"])
@pytest.mark.parametrize("special", ["", "negzero", "inf", "nan"])
def test_bf16_identity_transpose_gives_the_product_bits(K, M, dt_b, special):
    """A bf16 identity moving operand (the fast transpose, read as 32-bit pairs) gives the
    bits of the plain product (birsim.reference.matmult): -0 as +0, and the non-finite
    cases (0 * inf = NaN) left to the product; an even and an odd K."""
    from birsim import reference as ref
    rng = np.random.default_rng(K * 100 + M)
    b = rng.standard_normal((K, M), dtype=np.float32)
    b[0, 0] = {"": b[0, 0], "negzero": -0.0, "inf": np.inf, "nan": np.nan}[special]
    bq = ref.cast(b, dt_b) if dt_b != "float32" else b
    ident = ref.cast(np.eye(K, dtype=np.float32), "bfloat16")
    got = _transpose(ident, bq, "bfloat16", dt_b)
    with np.errstate(invalid="ignore"):                  # 0 * inf in the reference
        want = ref.matmult(ident, bq)
    nan = np.isnan(want)                                 # (NaN payloads aside)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("where", ["diag_negzero", "off_negzero", "off_half", "off_last",
                                   "diag_two"])
def test_almost_identity_bf16_is_a_product(where):
    """bf16 moving operands that are not exactly the identity (a -0 or a 0.5 off the
    diagonal, a 2 or -0 on it) take the product: the reference's bits."""
    from birsim import reference as ref
    K = 16
    e = np.eye(K, dtype=np.float32)
    b = np.random.default_rng(9).standard_normal((K, K), dtype=np.float32)
    b[3, :] = -0.0                                       # -0 terms make the sign matter
    if where == "diag_negzero":
        e[5, 5] = -0.0
    elif where == "off_negzero":
        e[3, 4] = -0.0
    elif where == "off_half":
        e[3, 4] = 0.5
    elif where == "off_last":                            # the last 32-bit pair of a row
        e[2, K - 1] = 0.5
    else:
        e[7, 7] = 2.0
    ident = ref.cast(e, "bfloat16")
    bq = ref.cast(b, "bfloat16")
    got = _transpose(ident, bq, "bfloat16", "bfloat16")
    assert np.array_equal(got.view(np.uint32), ref.matmult(ident, bq).view(np.uint32))
