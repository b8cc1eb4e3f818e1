"""The MX family and the packed x4 dtypes against the NumPy reference (birsim.reference:
x4_encode / x4_decode, quantize_mx, matmult_mx, written from docs/spec/machine-model.md §4.1-4.2,
§6.2 and docs/spec/nki-isa-semantics.md §3.2, §3.30), plus the NKI test vectors (§4 item 24:
an all-zero group gets scale byte 0; absmax 1.0 in e4m3fn gives byte 120 and code 128)
and nc_matmul_mx's golden formulation (einsum over partition and lane, scales
2^(s-127))."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import birsim
from birsim import dtypes as bdt
from birsim import reference as ref

from bir import ap, function, insn, module, tensor, whole

X4 = ["float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"]
LANE_MAX = {"float8_e4m3fn_x4": 448.0, "float8_e5m2_x4": 57344.0, "float4_e2m1fn_x4": 6.0}


def run(allocs, code, inputs, threads=1):
    prog = module([function("main", allocs, code)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", birsim.BirsimWarning)
        return birsim.Simulator(prog, strict=True, threads=threads).run(inputs)


def inp(name, dtype, shape):
    return tensor(name, "ExternalInput", dtype, list(shape), "DRAM")


def outp(name, dtype, shape):
    return tensor(name, "ExternalOutput", dtype, list(shape), "DRAM")


# ---- lanes: fp4 e2m1 and the fp8 lanes -------------------------------------------------

def quantize_raw(x, dtype, src="bfloat16"):
    """QuantizeMx of x ([P, F], P a multiple of 32) -> (codes, group-order scales)."""
    P, F = x.shape
    allocs = [inp("x", src, (P, F)), outp("q", dtype, (P, F // 4)),
              outp("s", "uint8", (P // 8, F // 4))]
    code = [insn("qz", "QuantizeMx", "DVE", ins=[whole("x", (P, F), src)],
                 outs=[whole("q", (P, F // 4), dtype), whole("s", (P // 8, F // 4), "uint8")])]
    out = run(allocs, code, {"x": ref.cast(x, src)})
    return out["q"], out["s"]


def test_fp4_e2m1_lanes_round_to_nearest_even():
    """Lanes of float4_e2m1fn_x4 through QuantizeMx with the group scale pinned to 2^0
    (amax 2.0: E = floor(log2 2) + 127 - (Emax - 1) = 127, values pass unscaled): ties
    go to the even code, signs are kept."""
    x = np.zeros((32, 8), np.float32)
    x[:8, :4] = 0.1
    x[0, :4] = [0.25, 0.75, 1.25, 1.75]
    x[1, :4] = [2.0, -0.3, 0.0, -0.0]
    q, s = quantize_raw(x, "float4_e2m1fn_x4")
    assert s[0, 0] == 127
    got = ref.x4_decode(q[:2, :1], "float4_e2m1fn_x4").reshape(-1)
    np.testing.assert_array_equal(got, [0.0, 1.0, 1.0, 2.0, 2.0, -0.5, 0.0, -0.0])
    assert np.signbit(got[7]) and not np.signbit(got[6])
    assert int(q[0, 0]) == 0x4220 and int(q[1, 0]) == 0x8094


@pytest.mark.parametrize("dtype", X4)
def test_x4_pack_unpack_round_trip(dtype):
    """birsim.dtypes.pack_x4 / unpack_x4 agree with the reference codec and with
    ml_dtypes' scalar formats, value 4c + q in lane q of container c."""
    lane, _, bits, _ = ref.X4_DTYPES[dtype]
    codes = np.arange(1 << bits, dtype=np.uint8)
    vals = codes.view(lane).astype(np.float32)
    vals = vals[np.isfinite(vals)]
    vals = np.resize(vals, (3, 4 * ((vals.size + 3) // 4)))
    packed = bdt.pack_x4(vals, dtype)
    assert packed.dtype == bdt.numpy_dtype(dtype) and packed.shape == (3, vals.shape[1] // 4)
    np.testing.assert_array_equal(packed, ref.x4_encode(vals, dtype))
    np.testing.assert_array_equal(bdt.unpack_x4(packed, dtype), vals)
    want = vals.astype(lane).view(np.uint8).astype(np.uint32) & ((1 << bits) - 1)
    for q in range(4):
        np.testing.assert_array_equal((packed.astype(np.uint32) >> (bits * q)) & ((1 << bits) - 1),
                                      want[:, q::4])


def test_pack_x4_rounds_saturates_and_maps_nan():
    """fp4 e2m1: RNE, saturation at 6, NaN -> signed zero; fp8 lanes saturate."""
    v = np.array([[7.0, -100.0, np.nan, -np.nan, 5.0, 0.3, np.inf, -2.75]], np.float32)
    v[0, 2], v[0, 3] = np.float32("nan"), -np.abs(np.float32("nan"))
    got = bdt.unpack_x4(bdt.pack_x4(v, "float4_e2m1fn_x4"), "float4_e2m1fn_x4")
    np.testing.assert_array_equal(got, [[6.0, -6.0, 0.0, -0.0, 4.0, 0.5, 6.0, -3.0]])
    assert np.signbit(got[0, 3]) and not np.signbit(got[0, 2])
    got = bdt.unpack_x4(bdt.pack_x4(np.array([[1e6, -1e6, 500.0, 0.0]]), "float8_e4m3fn_x4"),
                        "float8_e4m3fn_x4")
    np.testing.assert_array_equal(got, [[448.0, -448.0, 448.0, 0.0]])


def test_pack_x4_rejects_bad_shapes_and_dtypes():
    with pytest.raises(ValueError, match="multiple of 4"):
        bdt.pack_x4(np.zeros((2, 6), np.float32), "float8_e4m3fn_x4")
    with pytest.raises(ValueError, match="not a packed x4 dtype"):
        bdt.pack_x4(np.zeros((2, 8), np.float32), "float32")


# ---- QuantizeMx ------------------------------------------------------------------------

def test_quantize_mx_nki_vectors():
    """nki-isa-semantics §4 item 24: an all-zero group gets byte 0; absmax 1.0 (e4m3fn)
    gives X = 2^-7, byte 120, and 1.0 becomes 128."""
    x = np.zeros((32, 8), np.float32)
    x[8:16, 0:4] = 0.5
    x[8, 0] = 1.0
    q, s = quantize_raw(x, "float8_e4m3fn_x4")
    assert s[0, 0] == 0 and s[0, 1] == 0 and s[1, 0] == 120
    vals = ref.x4_decode(q, "float8_e4m3fn_x4")
    assert vals[8, 0] == 128.0 and vals[9, 1] == 64.0
    assert (vals[:8] == 0).all()


@pytest.mark.parametrize("dtype", X4)
@pytest.mark.parametrize("src", ["bfloat16", "float16"])
@pytest.mark.parametrize("P,F", [(32, 8), (64, 20), (128, 64)])
def test_quantize_mx_matches_reference(dtype, src, P, F):
    rng = np.random.default_rng(P * F + len(dtype))
    x = (rng.standard_normal((P, F)) * np.exp2(rng.integers(-12, 12, (P, 1)))).astype(np.float32)
    x[:8, :4] = 0.0                                        # an all-zero group
    x[8:16, 4:8] = -x[8:16, 4:8]
    x = ref.cast(x, src)
    q, s = quantize_raw(x, dtype, src)
    wq, ws = ref.quantize_mx(x, dtype)
    np.testing.assert_array_equal(s, ws)
    np.testing.assert_array_equal(q, wq)
    assert s[0, 0] == 0
    # dequantized values stay within the lane format's relative step of the input
    deq = ref.x4_decode(q, dtype) * np.repeat(np.exp2(s.astype(np.float64) - 127), 8, 0).repeat(4, 1)
    scale = np.repeat(np.exp2(s.astype(np.float64) - 127), 8, 0).repeat(4, 1)
    assert (np.abs(deq) <= LANE_MAX[dtype] * scale).all()
    rel = {"float8_e4m3fn_x4": 2 ** -3, "float8_e5m2_x4": 2 ** -2, "float4_e2m1fn_x4": 2 ** -1}[dtype]
    big = np.abs(x.astype(np.float64)) >= scale * 2 ** {"float4_e2m1fn_x4": 0}.get(dtype, -6)
    np.testing.assert_array_less(np.abs(deq - x.astype(np.float64))[big],
                                 rel * np.abs(x.astype(np.float64))[big] + 1e-300)


def test_quantize_mx_inf_nan_group_and_extremes():
    """Choice (README): a group with an inf or NaN gets byte 255 and NaN codes; a tiny
    group clamps to byte 0; the largest bf16 stays finite."""
    x = np.zeros((32, 12), np.float32)
    x[0, 0] = np.inf
    x[16, 5] = np.nan
    x[8:16, 4:8] = 2.0 ** -130                            # bf16 subnormal: E clamps to 0
    x[24, 8] = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    q, s = quantize_raw(x, "float8_e4m3fn_x4")
    wq, ws = ref.quantize_mx(ref.cast(x, "bfloat16"), "float8_e4m3fn_x4")
    np.testing.assert_array_equal(s, ws)
    np.testing.assert_array_equal(q, wq)
    assert s[0, 0] == 255 and s[2, 1] == 255 and s[1, 1] == 0 and s[3, 2] == 247 - 0
    assert np.isnan(ref.x4_decode(q[:8, :1], "float8_e4m3fn_x4")).all()


def test_quantize_mx_quadrant_scale_layout_keeps_other_partitions():
    """Scales over the data's 128 partitions: group g at partition 32 (g/4) + g%4; the
    other partitions keep what was there (NKI's quantize_mx layout)."""
    P, F = 128, 16
    x = np.random.default_rng(3).standard_normal((P, F)).astype(np.float32)
    allocs = [inp("x", "bfloat16", (P, F)), inp("s0", "uint8", (P, F // 4)),
              tensor("s", "Internal", "uint8", [P, F // 4], "SB"),
              outp("q", "float8_e5m2_x4", (P, F // 4)), outp("so", "uint8", (P, F // 4))]
    code = [insn("ld", "TensorCopy", "DVE", ins=[whole("s0", (P, F // 4), "uint8")],
                 outs=[whole("s", (P, F // 4), "uint8")]),
            insn("qz", "QuantizeMx", "DVE", ins=[whole("x", (P, F), "bfloat16")],
                 outs=[whole("q", (P, F // 4), "float8_e5m2_x4"),
                       whole("s", (P, F // 4), "uint8")]),
            insn("st", "TensorCopy", "DVE", ins=[whole("s", (P, F // 4), "uint8")],
                 outs=[whole("so", (P, F // 4), "uint8")])]
    fill = np.full((P, F // 4), 77, np.uint8)
    out = run(allocs, code, {"x": ref.cast(x, "bfloat16"), "s0": fill})
    wq, ws = ref.quantize_mx(ref.cast(x, "bfloat16"), "float8_e5m2_x4")
    np.testing.assert_array_equal(out["q"], wq)
    want = fill.copy()
    for g in range(P // 8):
        want[32 * (g // 4) + g % 4] = ws[g]
    np.testing.assert_array_equal(out["so"], want)


@pytest.mark.parametrize("what,shape,dtype,msg", [
    ("src", (16, 8), "bfloat16", "multiple of 32 partitions"),
    ("src", (32, 6), "bfloat16", "multiple of 4 elements"),
    ("src", (32, 8), "float32", "must be bfloat16 or float16"),
    ("dst", (32, 2), "float8_e4m3fn", "float8_e4m3fn_x4, float8_e5m2_x4"),
    ("scale", (4, 3), "uint8", "needs 8 scales in group order"),
])
def test_quantize_mx_rejects_bad_operands(what, shape, dtype, msg):
    P, F = (32, 8)
    xs, xd = (shape, dtype) if what == "src" else ((P, F), "bfloat16")
    qs, qd = (shape, dtype) if what == "dst" else ((xs[0], xs[1] // 4 or 1), "float8_e4m3fn_x4")
    ss, sd = (shape, dtype) if what == "scale" else ((4, 2), "uint8")
    allocs = [inp("x", xd, xs), outp("q", qd, qs), outp("s", sd, ss)]
    code = [insn("qz", "QuantizeMx", "DVE", ins=[whole("x", xs, xd)],
                 outs=[whole("q", qs, qd), whole("s", ss, sd)])]
    x = np.ones(xs, np.float32)
    with pytest.raises(birsim.SimulationError, match=msg):
        run(allocs, code, {"x": ref.cast(x, xd)})


# ---- MatmultMx ---------------------------------------------------------------------------

def mx_operands(rng, dtype, P, F):
    """Random quantized data [P, F] containers and group-order scales [P/8, F]."""
    x = rng.standard_normal((P, 4 * F)).astype(np.float32)
    q, s = ref.quantize_mx(ref.cast(x, "bfloat16"), dtype)
    s = (s.astype(np.int64) + rng.integers(-3, 4, s.shape)).astype(np.uint8)
    return q, s


def run_mx(mv, st, ms, ss, dts, flags=(2,), *, pdt="float32", scale_dtype="uint8",
           scale_shapes=None):
    """One MatmultMx per flag into one PSUM tile; the tile copied out after the last."""
    P, N = mv.shape
    M = st.shape[1]
    msh = scale_shapes[0] if scale_shapes else ms.shape
    ssh = scale_shapes[1] if scale_shapes else ss.shape
    allocs = [inp("mv", dts[0], (P, N)), inp("st", dts[1], (P, M)),
              inp("ms", scale_dtype, msh), inp("ss", scale_dtype, ssh),
              tensor("ps", "Internal", pdt, [M, N], "PSUM"), outp("y", pdt, (M, N))]
    code = [insn("mm%d" % i, "MatmultMx", "PE",
                 ins=[whole("mv", (P, N), dts[0]), whole("st", (P, M), dts[1]),
                      whole("ms", msh, scale_dtype), whole("ss", ssh, scale_dtype)],
                 outs=[whole("ps", (M, N), pdt)], accumulation_flag=f)
            for i, f in enumerate(flags)]
    code.append(insn("cp", "TensorCopy", "DVE", ins=[whole("ps", (M, N), pdt)],
                     outs=[whole("y", (M, N), pdt)]))
    sv = (lambda a: a.view(ml_dtypes.float8_e8m0fnu)) if scale_dtype != "uint8" else (lambda a: a)
    return run(allocs, code, {"mv": mv, "st": st, "ms": sv(ms), "ss": sv(ss)})["y"]


def golden_mx(mv, st, ms, ss, dts):
    """nc_matmul_mx's golden: unpack to fp32, scale each 8 x 4 block by 2^(s-127), then
    einsum('kiq,kjq->ij') in float64."""
    def deq(c, s, dt):
        v = ref.x4_decode(c, dt).astype(np.float64).reshape(c.shape[0], c.shape[1], 4)
        return v * np.exp2(np.repeat(s.astype(np.float64), 8, 0) - 127)[:, :, None]
    return np.einsum("kiq,kjq->ij", deq(st, ss, dts[1]), deq(mv, ms, dts[0]))


@pytest.mark.parametrize("dts", [(d, d) for d in X4] + [("float8_e4m3fn_x4", "float4_e2m1fn_x4"),
                                                        ("float4_e2m1fn_x4", "float8_e5m2_x4")])
@pytest.mark.parametrize("P,M,N", [(32, 8, 16), (64, 34, 40), (128, 128, 128)])
def test_matmult_mx_matches_reference_and_golden(dts, P, M, N):
    rng = np.random.default_rng(P + M + N + len(dts[0]) + 3 * len(dts[1]))
    mv, ms = mx_operands(rng, dts[0], P, N)
    st, ss = mx_operands(rng, dts[1], P, M)
    got = run_mx(mv, st, ms, ss, dts)
    np.testing.assert_array_equal(got, ref.matmult_mx(mv, st, ms, ss, *dts))
    gold = golden_mx(mv, st, ms, ss, dts)
    mag = np.einsum("kiq,kjq->ij", *[np.abs(ref.x4_decode(c, d).reshape(P, -1, 4)).astype(np.float64)
                                     * np.exp2(np.repeat(s.astype(np.float64), 8, 0) - 127)[:, :, None]
                                     for c, s, d in ((st, ss, dts[1]), (mv, ms, dts[0]))])
    np.testing.assert_array_less(np.abs(got - gold), mag * 4 * P * 2.0 ** -23 + 1e-30)


def test_matmult_mx_accumulate_bf16_psum_and_e8m0_scales():
    rng = np.random.default_rng(9)
    dts = ("float8_e4m3fn_x4", "float8_e4m3fn_x4")
    mv, ms = mx_operands(rng, dts[0], 32, 24)
    st, ss = mx_operands(rng, dts[1], 32, 16)
    got = run_mx(mv, st, ms, ss, dts, flags=(2, 1), pdt="bfloat16", scale_dtype="float8_e8m0fnu")
    r = ref.matmult_mx(mv, st, ms, ss, *dts)
    s0 = ref.psum_write(None, False, r, 2, "bfloat16")
    want = ref.psum_write(s0, np.ones(r.shape, bool), r, 1, "bfloat16")
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_matmult_mx_quadrant_scales_and_nan_scale():
    """Scales in NKI's quadrant layout (128 partitions, rows 32q..32q+3 used) give the
    same product as group order; a scale byte 255 makes its group NaN."""
    rng = np.random.default_rng(4)
    dts = ("float8_e5m2_x4", "float4_e2m1fn_x4")
    mv, ms = mx_operands(rng, dts[0], 128, 20)
    st, ss = mx_operands(rng, dts[1], 128, 8)
    want = ref.matmult_mx(mv, st, ms, ss, *dts)
    got = run_mx(mv, st, ref.mx_scale_quadrant(ms, 128), ref.mx_scale_quadrant(ss, 128), dts)
    np.testing.assert_array_equal(got, want)
    ss2 = ss.copy()
    ss2[5, 3] = 255
    got = run_mx(mv, st, ms, ss2, dts)
    np.testing.assert_array_equal(got, ref.matmult_mx(mv, st, ms, ss2, *dts))
    assert np.isnan(got[3]).all() and not np.isnan(np.delete(got, 3, axis=0)).any()


def test_quantize_then_matmult_mx_approximates_the_bf16_product():
    """QuantizeMx output feeds MatmultMx directly (the NKI pipeline); the product is close
    to the float64 product of the bf16 inputs."""
    P, M, N = 128, 32, 64
    rng = np.random.default_rng(11)
    a = ref.cast(rng.standard_normal((P, 4 * M)).astype(np.float32), "bfloat16")
    b = ref.cast(rng.standard_normal((P, 4 * N)).astype(np.float32), "bfloat16")
    allocs = [inp("a", "bfloat16", (P, 4 * M)), inp("b", "bfloat16", (P, 4 * N)),
              tensor("qa", "Internal", "float8_e4m3fn_x4", [P, M], "SB"),
              tensor("qb", "Internal", "float8_e4m3fn_x4", [P, N], "SB"),
              tensor("sa", "Internal", "uint8", [P // 8, M], "SB"),
              tensor("sb", "Internal", "uint8", [P // 8, N], "SB"),
              tensor("ps", "Internal", "float32", [M, N], "PSUM"), outp("y", "float32", (M, N))]
    x4 = "float8_e4m3fn_x4"
    code = [insn("qa", "QuantizeMx", "DVE", ins=[whole("a", (P, 4 * M), "bfloat16")],
                 outs=[whole("qa", (P, M), x4), whole("sa", (P // 8, M), "uint8")]),
            insn("qb", "QuantizeMx", "DVE", ins=[whole("b", (P, 4 * N), "bfloat16")],
                 outs=[whole("qb", (P, N), x4), whole("sb", (P // 8, N), "uint8")]),
            insn("mm", "MatmultMx", "PE", ins=[whole("qb", (P, N), x4), whole("qa", (P, M), x4),
                                               whole("sb", (P // 8, N), "uint8"),
                                               whole("sa", (P // 8, M), "uint8")],
                 outs=[whole("ps", (M, N), "float32")], accumulation_flag=2),
            insn("cp", "TensorCopy", "DVE", ins=[whole("ps", (M, N), "float32")],
                 outs=[whole("y", (M, N), "float32")])]
    y = run(allocs, code, {"a": a, "b": b})["y"]
    exact = np.einsum("kiq,kjq->ij", a.astype(np.float64).reshape(P, M, 4),
                      b.astype(np.float64).reshape(P, N, 4))
    mag = np.einsum("kiq,kjq->ij", np.abs(a.astype(np.float64)).reshape(P, M, 4),
                    np.abs(b.astype(np.float64)).reshape(P, N, 4))
    assert (np.abs(y - exact) <= 2 ** -3 * mag).all()
    qa, sa = ref.quantize_mx(a, x4)
    qb, sb = ref.quantize_mx(b, x4)
    np.testing.assert_array_equal(y, ref.matmult_mx(qb, qa, sb, sa, x4, x4))


@pytest.mark.parametrize("case,msg", [
    ("P48", "same 32, 64 or 128"),
    ("notx4", "data must be float8_e4m3fn_x4"),
    ("scale", "needs 16 scales in group order"),
    ("scaledt", "scales must be uint8 or float8_e8m0fnu"),
    ("out", "MatmultMx shapes do not match"),
])
def test_matmult_mx_rejects_bad_operands(case, msg):
    P, M, N = (48 if case == "P48" else 32), 4, 8
    dt = "float32" if case == "notx4" else "float8_e4m3fn_x4"
    sdt = "int16" if case == "scaledt" else "uint8"
    ssh = (3, M) if case == "scale" else (P // 8, M)
    osh = (M + 1, N) if case == "out" else (M, N)
    allocs = [inp("mv", dt, (P, N)), inp("st", dt, (P, M)), inp("ms", sdt, (P // 8, N)),
              inp("ss", sdt, ssh), tensor("ps", "Internal", "float32", list(osh), "PSUM")]
    code = [insn("mm", "MatmultMx", "PE", ins=[whole("mv", (P, N), dt), whole("st", (P, M), dt),
                                               whole("ms", (P // 8, N), sdt), whole("ss", ssh, sdt)],
                 outs=[whole("ps", osh, "float32")], accumulation_flag=2)]
    data = {"mv": np.ones((P, N), bdt.numpy_dtype(dt)), "st": np.ones((P, M), bdt.numpy_dtype(dt)),
            "ms": np.ones((P // 8, N), bdt.numpy_dtype(sdt)), "ss": np.ones(ssh, bdt.numpy_dtype(sdt))}
    with pytest.raises(birsim.SimulationError, match=msg):
        run(allocs, code, data)


# ---- Matmult fields: zero points, perf_mode, is_transpose ----------------------------------

def run_matmult(mv, st, mdt, sdt, *, pdt="float32", mv_shape=None, st_shape=None, flags=(2,),
                threads=1, **keys):
    """One Matmult per flag of moving mv / stationary st (given as stored) into PSUM;
    returns the PSUM tile [M, N] copied out after the last."""
    msh, ssh = mv_shape or mv.shape, st_shape or st.shape
    M = int(np.prod(ssh[1:])) // (2 if keys.get("perf_mode", "None") != "None" else 1)
    N = int(np.prod(msh[1:])) // (2 if keys.get("perf_mode", "None") != "None" else 1)
    allocs = [inp("mv", mdt, mv.shape), inp("st", sdt, st.shape),
              tensor("ps", "Internal", pdt, [M, N], "PSUM"), outp("y", pdt, (M, N))]

    def pat(shape):
        dims = [[int(np.prod(shape[1:])), shape[0]]]
        stride = int(np.prod(shape[1:]))
        for d in shape[1:]:
            stride //= d
            dims.append([stride, d])
        return dims
    code = [insn("mm%d" % i, "Matmult", "PE", ins=[ap("mv", pat(msh), mdt), ap("st", pat(ssh), sdt)],
                 outs=[whole("ps", (M, N), pdt)], accumulation_flag=f, **keys)
            for i, f in enumerate(flags)]
    code.append(insn("cp", "TensorCopy", "DVE", ins=[whole("ps", (M, N), pdt)],
                     outs=[whole("y", (M, N), pdt)]))
    return run(allocs, code, {"mv": ref.cast(mv, mdt), "st": ref.cast(st, sdt)},
               threads=threads)["y"]


@pytest.mark.parametrize("zpi,zpw", [(0, 7), (128, 0), (3, 250), (255, 255)])
@pytest.mark.parametrize("dts", [("uint8", "uint8"), ("bfloat16", "uint8"), ("float32", "float32")])
def test_matmult_zero_points(zpi, zpw, dts):
    """out = sum_k (ifmap - ifmap_quant_offset) (weights - weights_quant_offset)."""
    rng = np.random.default_rng(zpi + 3 * zpw + len(dts[0]))
    K, M, N = 64, 16, 24
    mv = rng.integers(0, 256, (K, N)).astype(np.float32)
    st = rng.integers(0, 256, (K, M)).astype(np.float32)
    got = run_matmult(mv, st, *dts, ifmap_quant_offset=zpi, weights_quant_offset=zpw)
    want = ref.matmult_ext(ref.cast(mv, dts[0]), ref.cast(st, dts[1]), ifmap_zp=zpi,
                           weights_zp=zpw)
    np.testing.assert_array_equal(got, want)
    exact = (st.astype(np.float64) - zpw).T @ (ref.decode(ref.cast(mv, dts[0])).astype(np.float64) - zpi)
    if dts[0] != "bfloat16":
        np.testing.assert_array_equal(got, exact)            # integers below 2^24: exact


def test_matmult_zero_point_range_checked():
    with pytest.raises(birsim.ProgramError, match="ifmap_quant_offset"):
        run_matmult(np.ones((4, 4)), np.ones((4, 4)), "uint8", "uint8", ifmap_quant_offset=256)


@pytest.mark.parametrize("mode", ["DoubleRow", "DoubleRowSwInterleave"])
@pytest.mark.parametrize("dts", [("float8e4", "float8e4"), ("float8e5", "float8e4"),
                                 ("bfloat16", "float32")])
@pytest.mark.parametrize("P,M,N", [(128, 4, 12), (32, 16, 40), (128, 1, 3)])
def test_matmult_double_row(mode, dts, P, M, N):
    """NKI double_row: stationary [P, 2, M], moving [P, 2, N]; the contraction runs over
    (partition, pair index), K = 2P (nki-isa-semantics §3.1: [1, 256] @ [256, 3] as
    [128, 2, 1] and [128, 2, 3]). The software-interleaved form puts the pair innermost."""
    rng = np.random.default_rng(P + M + N + len(mode))
    big_st = rng.uniform(-2, 2, (2 * P, M)).astype(np.float32)      # the logical [K, M]
    big_mv = rng.uniform(-2, 2, (2 * P, N)).astype(np.float32)
    big_st, big_mv = ref.decode(ref.cast(big_st, dts[1])), ref.decode(ref.cast(big_mv, dts[0]))
    if mode == "DoubleRow":                # row k = 2p + j at [p, j, :]
        st, mv = big_st.reshape(P, 2, M), big_mv.reshape(P, 2, N)
    else:                                  # [p, :, j]
        st = big_st.reshape(P, 2, M).transpose(0, 2, 1).copy()
        mv = big_mv.reshape(P, 2, N).transpose(0, 2, 1).copy()
    got = run_matmult(mv, st, *dts, perf_mode=mode)
    np.testing.assert_array_equal(got, ref.matmult(big_mv, big_st))
    np.testing.assert_array_equal(got, ref.matmult_ext(ref.cast(mv, dts[0]), ref.cast(st, dts[1]),
                                                       perf_mode=mode))
    np.testing.assert_allclose(got, big_st.T.astype(np.float64) @ big_mv, rtol=1e-5, atol=1e-4)


def test_matmult_double_row_with_flat_access_patterns_and_accumulate():
    """The pair dimension may be folded into a flat free dimension ([P, 2N]); accumulate
    adds onto the first result."""
    rng = np.random.default_rng(5)
    P, M, N = 16, 3, 5
    st = rng.uniform(-1, 1, (P, 2 * M)).astype(np.float32)
    mv = rng.uniform(-1, 1, (P, 2 * N)).astype(np.float32)
    got = run_matmult(mv, st, "float32", "float32", perf_mode="DoubleRow", flags=(2, 1))
    r = ref.matmult(mv.reshape(2 * P, N), st.reshape(2 * P, M))
    np.testing.assert_array_equal(got, r + r)


def test_matmult_double_row_odd_free_size_rejected():
    with pytest.raises(birsim.SimulationError, match="double-row"):
        run_matmult(np.ones((4, 3)), np.ones((4, 4)), "float32", "float32", perf_mode="DoubleRow")


@pytest.mark.parametrize("dtype,pdt", [("bfloat16", "bfloat16"), ("float32", "float32"),
                                       ("float16", "float16"), ("bfloat16", "float32"),
                                       ("float8e4", "bfloat16")])
def test_matmult_is_transpose_is_bit_exact(dtype, pdt):
    """nc_transpose on TensorE: stationary = data [K, M], moving = identity [K, K]; with
    is_transpose the result is data^T bit for bit, NaN and inf included (v3+). An fp8
    stationary into a 2-byte PSUM tile is zero-extended (the v3 rule)."""
    K, M = 32, 24
    rng = np.random.default_rng(len(dtype) + len(pdt))
    data = ref.cast(rng.uniform(-3, 3, (K, M)).astype(np.float32), dtype)
    raw = data.view(np.uint8 if data.itemsize == 1 else np.uint16 if data.itemsize == 2 else np.uint32)
    raw[0, 0] = {1: 0x7F, 2: 0x7FC1, 4: 0x7FC00123}[data.itemsize]          # NaN with a payload
    raw[1, 2] = {1: 0x78, 2: 0xFF80 if dtype == "bfloat16" else 0xFC00, 4: 0xFF800000}[data.itemsize]
    eye = np.eye(K, dtype=np.float32)
    got = run_matmult(eye, data, "bfloat16", dtype, pdt=pdt, is_transpose=True)
    if pdt == dtype:
        np.testing.assert_array_equal(got.view(raw.dtype), raw.T)
    elif data.itemsize == 1:
        np.testing.assert_array_equal(got.view(np.uint16), raw.T.astype(np.uint16))
    else:
        np.testing.assert_array_equal(got, ref.decode(data).T)
    # a permutation as moving selects rows: out[m, n] = data[perm[n], m]
    perm = rng.permutation(K)[:20]
    sel = np.zeros((K, 20), np.float32)
    sel[perm, np.arange(20)] = 1.0
    got = run_matmult(sel, data, "float32", dtype, pdt=pdt, is_transpose=True)
    if pdt == dtype:
        np.testing.assert_array_equal(got.view(raw.dtype), raw[perm].T)


def test_matmult_is_transpose_needs_an_identity_like_moving():
    eye = np.eye(8, dtype=np.float32)
    eye[3, 3] = 2.0
    with pytest.raises(birsim.SimulationError, match="column 3 of in\\[0\\] .moving. is not a column"):
        run_matmult(eye, np.ones((8, 4)), "float32", "float32", is_transpose=True)
    with pytest.raises(birsim.SimulationError, match="column 0 of in\\[0\\] .moving. has no 1.0"):
        run_matmult(np.zeros((8, 2)), np.ones((8, 4)), "float32", "float32", is_transpose=True)


@pytest.mark.parametrize("keys", [{"perf_mode": "DoubleRow"}, {"perf_mode": "DoubleRowSwInterleave"},
                                  {"ifmap_quant_offset": 9, "weights_quant_offset": 200}],
                         ids=["DoubleRow", "SwInterleave", "zero_points"])
def test_matmult_fields_on_a_threaded_product_are_bit_identical(keys):
    """A product large enough to be split over the thread pool (>= 2^21 multiply-adds)
    gives the same bits with 1 and 3 threads, and the reference's."""
    rng = np.random.default_rng(len(keys))
    P, M, N = 128, 96, 256
    two = "perf_mode" in keys
    mv = rng.integers(0, 256, (P, (2 if two else 1) * N)).astype(np.float32)
    st = rng.integers(0, 256, (P, (2 if two else 1) * M)).astype(np.float32)
    one = run_matmult(mv, st, "bfloat16", "float32", **keys)
    three = run_matmult(mv, st, "bfloat16", "float32", threads=3, **keys)
    np.testing.assert_array_equal(one.view(np.uint32), three.view(np.uint32))
    np.testing.assert_array_equal(one, ref.matmult_ext(ref.cast(mv, "bfloat16"), st,
                                                       ifmap_zp=keys.get("ifmap_quant_offset", 0),
                                                       weights_zp=keys.get("weights_quant_offset", 0),
                                                       perf_mode=keys.get("perf_mode", "None")))
