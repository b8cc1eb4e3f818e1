"""The selections of issue 9 against NumPy: CopyPredicated, TensorScalarAffineSelect and
RangeSelect (docs/spec/nki-isa-semantics.md §3.16, §3.21, §3.22 and §4 item 19), StreamTranspose of
every shape the machine model allows (docs/spec/machine-model.md §6.4), and
Simulator(fp8_overflow=...) on every fp8 dtype (§4.2 "saturate off", docs/spec/nki-isa-semantics.md
§1.5 and §4 item 7). Results are compared bit for bit with birsim.reference and, where a
test says so, with NumPy written out in the test itself."""

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from bir import function, imm, insn, module, tensor, whole
from test_compute_reference_diff import Opnd, gen, rng_for, simulate

FP8 = ["float8e3", "float8e4", "float8_e4m3fn", "float8e5"]
SEL_DTYPES = ["float32", "bfloat16", "float16", "float8e4", "float8_e4m3fn", "float8e5",
              "int32", "uint8"]
MODES = ["saturate", "inf"]


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def data(dtype, shape, rng):
    x = gen(dtype, shape, rng, -50, 50)
    if dtype in ("bfloat16", "float32"):          # a NaN with a payload, a signed zero
        x.reshape(-1)[:2] = np.array([0x7fa1 if dtype == "bfloat16" else 0x7fc01234, 0x8000
                                      if dtype == "bfloat16" else 0x80000000],
                                     np.uint16 if dtype == "bfloat16" else np.uint32
                                     ).view(x.dtype)
    return x


def run_into(dst, body, opnds, **kw):
    """Run ``body`` writing into the input ``dst`` (an Opnd holding the old contents),
    then copy dst out to a fresh output; returns that output's logical array."""
    O = Opnd("res", dst.dtype, dst.shape, io="out")
    cp = insn("cp", "TensorCopy", "DVE", ins=[dst.ap()], outs=[O.ap()])
    out, _ = simulate(opnds + [O], body + [cp], **kw)
    return O.extract(out)


# ==== CopyPredicated ===================================================================

@pytest.mark.parametrize("dtype", SEL_DTYPES)
@pytest.mark.parametrize("pdt", ["uint8", "uint16", "uint32", "float32"])
@pytest.mark.parametrize("rev", [False, True])
def test_copy_predicated(dtype, pdt, rev):
    rng = rng_for("cp", dtype, pdt, rev)
    shape = (8, 24)
    S, M, D = Opnd("s", dtype, shape), Opnd("m", pdt, shape), Opnd("d", dtype, shape)
    src, old = S.fill(data(dtype, shape, rng), rng), D.fill(data(dtype, shape, rng), rng)
    pred = rng.integers(0, 2, shape) * rng.integers(1, 200, shape)
    if pdt == "float32":
        pred = np.where(pred > 0, pred, 0.0).astype(np.float32)
        pred[0, :3] = [-0.0, np.nan, 1e-30]                # bits set: all count as true
    pred = M.fill(pred.astype(ref.np_dtype(pdt)), rng)
    got = run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), M.ap()], outs=[D.ap()],
                            reverse_pred=rev)], [S, M, D])
    same_bits(got, ref.copy_predicated(src, pred, old, dtype, rev))
    # the rule written out: where (any bit set) != reverse_pred take src, else keep old
    bits = np.ascontiguousarray(pred).view(np.uint8).reshape(shape + (-1,)).any(-1)
    same_bits(got, np.where(bits != rev, src, old))


@pytest.mark.parametrize("ls,lm,ld", [("strided", "poff", "contig"), ("poff", "contig", "strided"),
                                      ("bcast", "strided", "poff"), ("contig", "alias", "alias"),
                                      ("pbcast", "contig", "contig")])
def test_copy_predicated_layouts(ls, lm, ld):
    rng = rng_for("cpl", ls, lm, ld)
    shape = (6, 4, 5)
    S, M = Opnd("s", "bfloat16", shape, ls), Opnd("m", "uint8", shape, lm)
    D = Opnd("d", "bfloat16", shape, ld)
    src = S.fill(data("bfloat16", shape, rng), rng)
    pred = M.fill(rng.integers(0, 2, shape).astype(np.uint8), rng)
    old = D.fill(data("bfloat16", shape, rng), rng)
    got = run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), M.ap()],
                            outs=[D.ap()])], [S, M, D])
    same_bits(got, np.where(pred != 0, src, old))


@pytest.mark.parametrize("sdt,ddt", [("float32", "bfloat16"), ("float32", "float8e4"),
                                     ("bfloat16", "float32"), ("float32", "int32")])
def test_copy_predicated_casts_through_fp32(sdt, ddt):
    rng = rng_for("cpc", sdt, ddt)
    shape = (4, 16)
    S, M, D = Opnd("s", sdt, shape), Opnd("m", "uint8", shape), Opnd("d", ddt, shape)
    src = S.fill(gen(sdt, shape, rng, -300, 300), rng)
    pred = M.fill(rng.integers(0, 2, shape).astype(np.uint8), rng)
    old = D.fill(gen(ddt, shape, rng), rng)
    got = run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), M.ap()],
                            outs=[D.ap()])], [S, M, D])
    same_bits(got, ref.copy_predicated(src, pred, old, ddt))


def test_copy_predicated_immediate_source():
    rng = rng_for("cpi")
    shape = (4, 8)
    M, D = Opnd("m", "uint32", shape), Opnd("d", "bfloat16", shape)
    pred = M.fill(rng.integers(0, 2, shape).astype(np.uint32), rng)
    old = D.fill(gen("bfloat16", shape, rng), rng)
    got = run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[imm(2.5), M.ap()],
                            outs=[D.ap()], reverse_pred=True)], [M, D])
    same_bits(got, np.where(pred == 0, ref.cast(np.float32(2.5), "bfloat16"), old))


def test_copy_predicated_errors():
    shape = (4, 8)
    S, M, D = Opnd("s", "float32", shape), Opnd("m", "uint8", (4, 4)), Opnd("d", "float32", shape)
    rng = rng_for("cpe")
    S.fill(gen("float32", shape, rng))
    M.fill(np.ones((4, 4), np.uint8))
    D.fill(gen("float32", shape, rng))
    with pytest.raises(birsim.SimulationError, match="CopyPredicated.*must match"):
        run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), M.ap()], outs=[D.ap()])],
                 [S, M, D])
    with pytest.raises(birsim.ProgramError, match="CopyPredicated needs"):
        run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), imm(1, "uint8")],
                          outs=[D.ap()])], [S, D])
    with pytest.raises(birsim.ProgramError, match="'reduce_op' = 'bypass' cannot feed"):
        run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), S.ap()], outs=[D.ap()],
                          accumulator_cmd="Accumulate", reduce_op="bypass")], [S, D])
    with pytest.raises(birsim.ProgramError, match="CopyPredicated key 'reduce_op'.*not modelled"):
        run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), S.ap()], outs=[D.ap()],
                          accumulator_cmd="Accumulate", reduce_op="bitwise_or")], [S, D])
    with pytest.raises(birsim.ProgramError, match="LoadAccumulate needs its start value"):
        run_into(D, [insn("c", "CopyPredicated", "DVE", ins=[S.ap(), S.ap()], outs=[D.ap()],
                          accumulator_cmd="LoadAccumulate")], [S, D])


# ==== TensorScalarAffineSelect =========================================================

def test_affine_select_causal_mask():
    """NKI's causal mask: keep on_true where p - j >= 0 (channel_multiplier 1, step -1)."""
    P, F = 16, 16
    X, O = Opnd("x", "float32", (P, F)), Opnd("o", "float32", (P, F), io="out")
    x = X.fill(np.arange(P * F, dtype=np.float32).reshape(P, F) + 1)
    out, _ = simulate([X, O], [insn("a", "TensorScalarAffineSelect", "Pool", ins=[X.ap()],
                                    outs=[O.ap()], pattern=[[-1, F]], channel_multiplier=1,
                                    compare_op="is_ge", fill_value=-9984.0)])
    np.testing.assert_array_equal(O.extract(out), np.where(np.tri(P, F, dtype=bool), x, -9984.0))


@pytest.mark.parametrize("cmp", ["is_equal", "not_equal", "is_gt", "is_ge", "is_lt", "is_le",
                                 "greater_equal", "NotEq"])
@pytest.mark.parametrize("dtype", SEL_DTYPES)
def test_affine_select(cmp, dtype):
    rng = rng_for("as", cmp, dtype)
    shape = (8, 6, 4)
    pattern, base, cm = [[3, 6], [-2, 4]], int(rng.integers(-12, 12)), int(rng.integers(-3, 4))
    X, O = Opnd("x", dtype, shape), Opnd("o", dtype, shape, io="out")
    x = X.fill(data(dtype, shape, rng), rng)
    out, _ = simulate([X, O], [insn("a", "TensorScalarAffineSelect", "Pool", ins=[X.ap()],
                                    outs=[O.ap()], pattern=pattern, base=base,
                                    channel_multiplier=cm, compare_op=cmp, fill_value=-7.5)])
    name = {"greater_equal": "is_ge", "NotEq": "not_equal"}.get(cmp, cmp)
    got = O.extract(out)
    same_bits(got.reshape(8, -1), ref.affine_select(x, -7.5, name, dtype, base, cm, pattern))
    # written out: a = base + cm*p + 3*i + (-2)*k over coordinates (p, i, k)
    p, i, k = np.indices(shape)
    a = base + cm * p + 3 * i - 2 * k
    keep = {"is_equal": a == 0, "not_equal": a != 0, "is_gt": a > 0, "is_ge": a >= 0,
            "is_lt": a < 0, "is_le": a <= 0}[name]
    same_bits(got, np.where(keep, x, ref.cast(np.float32(-7.5), dtype)))


@pytest.mark.parametrize("lin,lout", [("strided", "poff"), ("poff", "strided"),
                                      ("alias", "alias"), ("pbcast", "contig")])
def test_affine_select_layouts_and_cast(lin, lout):
    rng = rng_for("asl", lin, lout)
    shape = (5, 12)
    X, O = Opnd("x", "float32", shape, lin), Opnd("o", "bfloat16", shape, lout, io="out")
    x = X.fill(gen("float32", shape, rng, -9, 9), rng)
    out, _ = simulate([X, O], [insn("a", "TensorScalarAffineSelect", "Pool", ins=[X.ap()],
                                    outs=[O.ap()], pattern=[[1, 12]], base=-5,
                                    channel_multiplier=2, compare_op="is_lt", fill_value=1e30)])
    same_bits(O.extract(out), ref.affine_select(x, 1e30, "is_lt", "bfloat16", -5, 2))


def test_affine_select_errors():
    X, O = Opnd("x", "float32", (4, 8)), Opnd("o", "float32", (4, 8), io="out")
    X.fill(np.zeros((4, 8), np.float32))
    with pytest.raises(birsim.SimulationError, match="pattern has 6 elements.*8 per partition"):
        simulate([X, O], [insn("a", "TensorScalarAffineSelect", "Pool", ins=[X.ap()],
                               outs=[O.ap()], pattern=[[1, 6]], compare_op="is_ge")])
    with pytest.raises(birsim.ProgramError, match="compare_op"):
        simulate([X, O], [insn("a", "TensorScalarAffineSelect", "Pool", ins=[X.ap()],
                               outs=[O.ap()], pattern=[[1, 8]], compare_op="add")])


# ==== RangeSelect ======================================================================

def read_dve_acc(P):
    """Instructions + allocation reading the Vector accumulator into [P, 1] 'accout':
    TensorScalarCache Reduce with op1 max continuing the accumulator over one FP32_MIN."""
    A = Opnd("accin", "float32", (P, 1))
    A.fill(np.full((P, 1), ref.FP32_MIN, np.float32))
    R = Opnd("accout", "float32", (P, 1), io="out")
    return [A, R], [insn("rd", "TensorScalarCache", "DVE", ins=[A.ap()], outs=[R.ap()],
                         mode="Reduce", op0="add", op1="max", const0=0.0, acc="Accumulate")]


def test_range_select_nki_vector():
    """docs/spec/nki-isa-semantics.md §4 item 19: bound0 0, bound1 64, range_start 32, (>=, <):
    columns 0..31 keep their values, the rest become FP32_MIN; reduce = max(cols 0..31)."""
    P, F = 8, 64
    rng = rng_for("rsn")
    X, O = Opnd("x", "float32", (P, F)), Opnd("o", "float32", (P, F), io="out")
    B0, B1 = Opnd("b0", "float32", (P, 1)), Opnd("b1", "float32", (P, 1))
    x = X.fill(gen("float32", (P, F), rng, -100, 100))
    B0.fill(np.zeros((P, 1), np.float32)), B1.fill(np.full((P, 1), 64, np.float32))
    extra, rd = read_dve_acc(P)
    out, _ = simulate([X, O, B0, B1] + extra, [
        insn("r", "RangeSelect", "DVE", ins=[X.ap(), B0.ap(), B1.ap()], outs=[O.ap()],
             range_start=32, comp_op0="greater_equal", comp_op1="less",
             reduce_cmd="reset_reduce", reduce_op="maximum")] + rd)
    want = x.copy()
    want[:, 32:] = np.float32(-3.4028235e38)
    np.testing.assert_array_equal(O.extract(out), want)
    np.testing.assert_array_equal(extra[1].extract(out)[:, 0], x[:, :32].max(axis=1))


@pytest.mark.parametrize("din,dout", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                      ("float32", "bfloat16"), ("float16", "float32"),
                                      ("float8e4", "float32"), ("float32", "float8e5")])
@pytest.mark.parametrize("ops", [("is_ge", "is_lt"), ("is_gt", "is_le"), ("is_equal", "is_ge"),
                                 ("not_equal", "is_lt")])
def test_range_select(din, dout, ops):
    rng = rng_for("rs", din, dout, ops)
    P, F = 16, 40
    X, O = Opnd("x", din, (P, F)), Opnd("o", dout, (P, F), io="out")
    B0, B1 = Opnd("b0", "float32", (P, 1)), Opnd("b1", "float32", (P, 1))
    x = X.fill(gen(din, (P, F), rng, -20, 20), rng)
    b0 = B0.fill(rng.integers(-5, 30, (P, 1)).astype(np.float32))
    b1 = B1.fill((b0 + rng.integers(0, 30, (P, 1))).astype(np.float32))
    out, _ = simulate([X, O, B0, B1], [
        insn("r", "RangeSelect", "DVE", ins=[X.ap(), B0.ap(), B1.ap()], outs=[O.ap()],
             base=-3, compare_op0=ops[0], compare_op1=ops[1], fill_value=-1000.0,
             reduce_cmd="Idle")])
    want, _ = ref.range_select(x, b0, b1, ops[0], ops[1], dout, -3, -1000.0)
    same_bits(O.extract(out), want)


@pytest.mark.parametrize("lin,lout", [("strided", "poff"), ("poff", "strided"),
                                      ("alias", "alias")])
def test_range_select_layouts_and_immediate_bounds(lin, lout):
    rng = rng_for("rsl", lin, lout)
    P = 6
    shape = (P, 5, 4)
    X, O = Opnd("x", "bfloat16", shape, lin), Opnd("o", "bfloat16", shape, lout, io="out")
    x = X.fill(gen("bfloat16", shape, rng), rng)
    out, _ = simulate([X, O], [
        insn("r", "RangeSelect", "DVE", ins=[X.ap(), imm(3.0), imm(15.0)], outs=[O.ap()],
             compare_op0="is_ge", compare_op1="is_le", reduce_cmd="Idle")])
    want, _ = ref.range_select(x, np.full(P, 3.0), np.full(P, 15.0), "is_ge", "is_le",
                               "bfloat16")
    got = O.extract(out).reshape(P, -1)
    same_bits(got, want)
    assert np.all(np.isneginf(got[:, :3].astype(np.float32)))      # FP32_MIN -> bf16 -inf
    same_bits(got[:, 3:16], x.reshape(P, -1)[:, 3:16])


def test_range_select_accumulator_commands():
    """Idle leaves the Vector accumulator alone, ZeroAccumulate restarts it from -inf,
    Accumulate folds into it (max)."""
    rng = rng_for("rsa")
    P, F = 4, 16
    Xs = [Opnd("x%d" % j, "float32", (P, F)) for j in range(3)]
    Os = [Opnd("o%d" % j, "float32", (P, F), io="out") for j in range(3)]
    xs = [X.fill(gen("float32", (P, F), rng, -50, 50), rng) for X in Xs]
    extra, rd = read_dve_acc(P)
    body = []
    for j, cmd in enumerate(["ZeroAccumulate", "Idle", "Accumulate"]):
        body.append(insn("r%d" % j, "RangeSelect", "DVE", ins=[Xs[j].ap(), imm(0.0), imm(8.0)],
                         outs=[Os[j].ap()], compare_op0="is_ge", compare_op1="is_lt",
                         reduce_cmd=cmd))
    out, _ = simulate(Xs + Os + extra, body + rd)
    want = np.maximum(xs[0][:, :8].max(1), xs[2][:, :8].max(1))
    np.testing.assert_array_equal(extra[1].extract(out)[:, 0], want)


def test_range_select_errors():
    X, O = Opnd("x", "float32", (4, 8)), Opnd("o", "float32", (4, 8), io="out")
    X.fill(np.zeros((4, 8), np.float32))
    r = lambda **k: simulate([X, O], [insn("r", "RangeSelect", "DVE",  # noqa: E731
                                           ins=[X.ap(), imm(0.0), imm(4.0)], outs=[O.ap()],
                                           **k)])
    with pytest.raises(birsim.ProgramError, match="RangeSelect key 'reduce_op'.*not modelled"):
        r(reduce_op="bitwise_or")
    with pytest.raises(birsim.ProgramError, match="compare_op0"):
        r(compare_op0="mult")
    with pytest.raises(birsim.ProgramError, match="LoadAccumulate needs its start value"):
        r(reduce_cmd="load_reduce")
    with pytest.raises(birsim.ProgramError, match="RangeSelect needs"):
        simulate([X, O], [insn("r", "RangeSelect", "DVE", ins=[X.ap()], outs=[O.ap()])])


# ==== StreamTranspose of every allowed shape ===========================================

@pytest.mark.parametrize("shape", [(32, 2), (2, 32), (1, 32), (32, 1), (17, 5), (32, 32),
                                   (64, 32), (32, 96)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8e5", "int32", "uint8"])
def test_stream_transpose_shapes(shape, dtype):
    rng = rng_for("sts", shape, dtype)
    P, F = shape
    oshape = (F, P) if P <= 32 and F <= 32 else shape
    A, O = Opnd("a", dtype, shape), Opnd("o", dtype, oshape, io="out")
    x = A.fill(data(dtype, shape, rng), rng)
    out, _ = simulate([A, O], [insn("t", "StreamTranspose", "DVE", ins=[A.ap()],
                                    outs=[O.ap()])])
    got = O.extract(out)
    same_bits(got, ref.stream_transpose(x))
    if P <= 32 and F <= 32:
        same_bits(got, x.T)                         # written out: a plain transpose
    else:
        for bp in range(0, P, 32):
            for bf in range(0, F, 32):
                same_bits(got[bp:bp + 32, bf:bf + 32], x[bp:bp + 32, bf:bf + 32].T)


@pytest.mark.parametrize("lin,lout", [("strided", "poff"), ("poff", "strided"),
                                      ("alias", "alias")])
def test_stream_transpose_small_layouts(lin, lout):
    rng = rng_for("stsl", lin, lout)
    A, O = Opnd("a", "bfloat16", (32, 2), lin), Opnd("o", "bfloat16", (2, 32), lout, io="out")
    x = A.fill(gen("bfloat16", (32, 2), rng), rng)
    out, _ = simulate([A, O], [insn("t", "StreamTranspose", "DVE", ins=[A.ap()],
                                    outs=[O.ap()])])
    same_bits(O.extract(out), x.T)


@pytest.mark.parametrize("ishape,oshape", [((32, 2), (32, 2)), ((64, 2), (2, 64)),
                                           ((16, 64), (64, 16)), ((48, 32), (48, 32)),
                                           ((32, 33), (33, 32))])
def test_stream_transpose_disallowed_shapes(ishape, oshape):
    A, O = Opnd("a", "float32", ishape), Opnd("o", "float32", oshape, io="out")
    A.fill(np.zeros(ishape, np.float32))
    with pytest.raises(birsim.SimulationError, match="StreamTranspose: in\\[0\\] is "
                       "\\[%d, %d\\] and out\\[0\\] \\[%d, %d\\]" % (ishape + oshape)):
        simulate([A, O], [insn("t", "StreamTranspose", "DVE", ins=[A.ap()], outs=[O.ap()])])


# ==== Simulator(fp8_overflow=...) ======================================================

def edge_values(dtype):
    m = ref.FP8_MAX[dtype]
    return np.array([m, -m, m * 1.03, -m * 1.03, m * 1.07, m * 4, -m * 100, 1e30, -1e30,
                     np.inf, -np.inf, np.nan, 3.0, -0.0, ref.FP32_MIN, -ref.FP32_MIN],
                    np.float32)


def run_cast(x, dtype, mode):
    P = 1
    A, O = Opnd("a", "float32", (P, x.size)), Opnd("o", dtype, (P, x.size), io="out")
    A.fill(x.reshape(P, -1))
    out, _ = simulate([A, O], [insn("c", "TensorCopy", "DVE", ins=[A.ap()], outs=[O.ap()])],
                      fp8_overflow=mode)
    return O.extract(out).reshape(-1)


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("mode", MODES)
def test_fp8_overflow_casts(dtype, mode):
    x = edge_values(dtype)
    got = run_cast(x, dtype, mode)
    same_bits(got, ref.cast(x, dtype, fp8_overflow=mode))
    g = got.astype(np.float32)
    m = ref.FP8_MAX[dtype]
    big = np.abs(x) > m * 1.1                       # past every format's rounding midpoint
    if mode == "saturate":
        np.testing.assert_array_equal(g[big], np.sign(x[big]) * m)
    elif dtype == "float8_e4m3fn":                  # no inf: an overflow is NaN
        assert np.all(np.isnan(g[big]))
    else:
        np.testing.assert_array_equal(g[big], np.sign(x[big]) * np.inf)
        with np.errstate(over="ignore"):            # independent: ml_dtypes' own cast
            same_bits(got, x.astype(ref.np_dtype(dtype)))
    assert np.isnan(g[11]) and g[0] == m and g[1] == -m and g[12] == 3.0


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("mode", MODES)
def test_fp8_overflow_range_select_fill(dtype, mode):
    """NKI's range_select note: the FP32_MIN fill written to an fp8 destination is -inf
    (fp8_overflow="inf"; NaN for e4m3fn) or -max (the default)."""
    P, F = 4, 8
    X, O = Opnd("x", "float32", (P, F)), Opnd("o", dtype, (P, F), io="out")
    x = X.fill(np.arange(P * F, dtype=np.float32).reshape(P, F) / 4)
    out, _ = simulate([X, O], [insn("r", "RangeSelect", "DVE", ins=[X.ap(), imm(0.0), imm(4.0)],
                                    outs=[O.ap()], compare_op0="is_ge", compare_op1="is_lt",
                                    reduce_cmd="Idle")], fp8_overflow=mode)
    got = O.extract(out)
    want, _ = ref.range_select(x, np.zeros(P), np.full(P, 4.0), "is_ge", "is_lt", dtype,
                               fp8_overflow=mode)
    same_bits(got, want)
    fill = got[:, 4:].astype(np.float32)
    if mode == "saturate":
        assert np.all(fill == -ref.FP8_MAX[dtype])
    elif dtype == "float8_e4m3fn":
        assert np.all(np.isnan(fill))
    else:
        assert np.all(np.isneginf(fill))


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("mode", MODES)
def test_fp8_overflow_in_kernels(dtype, mode):
    """The option reaches the kernels' own writes: TensorScalar, Activation, Memset by
    value, TensorScalarAffineSelect's fill and CopyPredicated's immediate."""
    rng = rng_for("fp8k", dtype, mode)
    P, F = 4, 8
    m = ref.FP8_MAX[dtype]
    X = Opnd("x", "float32", (P, F))
    x = X.fill(rng.uniform(-2, 2, (P, F)).astype(np.float32) * m)
    outs = {n: Opnd(n, dtype, (P, F), io="out") for n in ("ts", "act", "ms", "as", "cp")}
    body = [insn("ts", "TensorScalar", "DVE", ins=[X.ap()], outs=[outs["ts"].ap()], op0="mult",
                 const0=3.0),
            insn("act", "Activation", "Activation", ins=[X.ap()], outs=[outs["act"].ap()],
                 func="Identity", scale=2.0),
            insn("ms", "Memset", "Pool", outs=[outs["ms"].ap()], constant=float(m * 8)),
            insn("as", "TensorScalarAffineSelect", "Pool", ins=[X.ap()], outs=[outs["as"].ap()],
                 pattern=[[1, F]], compare_op="is_lt", base=-4, fill_value=float(-m * 8)),
            insn("cp", "CopyPredicated", "DVE", ins=[imm(float(m * 8)), X.ap()],
                 outs=[outs["cp"].ap()])]
    out, _ = simulate([X] + list(outs.values()), body, fp8_overflow=mode)
    c = lambda v: ref.cast(np.asarray(v, np.float32), dtype, fp8_overflow=mode)  # noqa: E731
    same_bits(outs["ts"].extract(out), c(x * np.float32(3)))
    same_bits(outs["act"].extract(out), c(x * np.float32(2)))
    same_bits(outs["ms"].extract(out), c(np.full((P, F), m * 8)))
    same_bits(outs["as"].extract(out), ref.affine_select(x, -m * 8, "is_lt", dtype, -4,
                                                         fp8_overflow=mode))
    same_bits(outs["cp"].extract(out), c(np.where(x != 0, m * 8, 0)))


def test_fp8_overflow_option():
    prog = module([function("main", [tensor("y", "ExternalOutput", "float8e5", (1, 4), "DRAM")],
                            [insn("m", "Memset", "Pool", outs=[whole("y", (1, 4), "float8e5")],
                                  constant=1e9)])])
    sim = birsim.Simulator(prog)
    assert sim.fp8_overflow == "saturate"              # the default
    assert np.all(sim.run({})["y"].astype(np.float32) == 57344.0)
    assert np.all(np.isposinf(birsim.Simulator(prog, fp8_overflow="inf").run({})["y"]
                              .astype(np.float32)))
    with pytest.raises(ValueError, match="fp8_overflow must be one of"):
        birsim.Simulator(prog, fp8_overflow="wrap")
    # the option leaves bf16/fp16 overflow (always inf) and in-range fp8 values alone
    x = np.array([1.5, -0.25, 448.0, 1e-3], np.float32)
    same_bits(run_cast(x, "float8_e4m3fn", "inf"), run_cast(x, "float8_e4m3fn", "saturate"))
    m = np.array([ref.FP32_MIN], np.float32)
    for dt in ("bfloat16", "float16"):
        for mode in MODES:
            assert np.isneginf(run_cast(m, dt, mode).astype(np.float32)[0])


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("mode", MODES)
def test_fp8_overflow_tensor_save(dtype, mode):
    """A float32 register saved into an fp8 element follows the option too."""
    from bir import ap, reg, register
    big = float(ref.FP8_MAX[dtype] * 16)
    prog = module([function("main", [register("r", "float32"),
                                     tensor("o", "ExternalOutput", dtype, [1, 2], "SB")],
                            [insn("m", "RegisterMove", "SP", ins=[imm(-big, "float32")],
                                  outs=[reg("r")]),
                             insn("s0", "TensorSave", "SP", ins=[reg("r")],
                                  outs=[ap("o", [[2, 1], [1, 1]], dtype)]),
                             insn("s1", "TensorSave", "SP", ins=[reg("r")],
                                  outs=[ap("o", [[2, 1], [1, 1]], dtype, offset=1)])])])
    got = birsim.Simulator(prog, fp8_overflow=mode).run({})["o"].reshape(-1)
    same_bits(got, ref.cast(np.full(2, -big, np.float32), dtype, fp8_overflow=mode))


# ==== partition counts and a loop-dependent affine base =================================

@pytest.mark.parametrize("P", [1, 33, 128])
def test_selections_over_partition_counts(P):
    rng = rng_for("selp", P)
    F = 20
    X, M = Opnd("x", "float32", (P, F)), Opnd("m", "uint8", (P, F))
    B0, B1 = Opnd("b0", "float32", (P, 1)), Opnd("b1", "float32", (P, 1))
    D = Opnd("d", "bfloat16", (P, F))
    Oa, Or = Opnd("oa", "float32", (P, F), io="out"), Opnd("or", "bfloat16", (P, F), io="out")
    x = X.fill(gen("float32", (P, F), rng, -9, 9), rng)
    m = M.fill(rng.integers(0, 2, (P, F)).astype(np.uint8), rng)
    b0 = B0.fill(rng.integers(0, 10, (P, 1)).astype(np.float32))
    b1 = B1.fill(rng.integers(8, 20, (P, 1)).astype(np.float32))
    old = D.fill(gen("bfloat16", (P, F), rng), rng)
    Oc = Opnd("oc", "bfloat16", (P, F), io="out")
    out, _ = simulate([X, M, B0, B1, D, Oa, Or, Oc], [
        insn("a", "TensorScalarAffineSelect", "Pool", ins=[X.ap()], outs=[Oa.ap()],
             pattern=[[2, F]], base=-30, channel_multiplier=3, compare_op="is_gt",
             fill_value=0.5),
        insn("r", "RangeSelect", "DVE", ins=[X.ap(), B0.ap(), B1.ap()], outs=[Or.ap()],
             compare_op0="is_gt", compare_op1="is_le", reduce_cmd="Idle"),
        insn("c", "CopyPredicated", "DVE", ins=[X.ap(), M.ap()], outs=[D.ap()]),
        insn("cp", "TensorCopy", "DVE", ins=[D.ap()], outs=[Oc.ap()])])
    p, j = np.indices((P, F))
    same_bits(Oa.extract(out), np.where(-30 + 3 * p + 2 * j > 0, x, np.float32(0.5)))
    keep = (j > b0) & (j <= b1)
    same_bits(Or.extract(out), ref.cast(np.where(keep, x, np.float32(ref.FP32_MIN)), "bfloat16"))
    same_bits(Oc.extract(out), np.where(m != 0, ref.cast(x, "bfloat16"), old))


def test_affine_select_base_from_a_loop_axis():
    """base may be an affine expression (as Iota's): the last of three trips, i = 2,
    leaves base = 5*2 - 3 = 7."""
    from bir import loop
    from birsim import build as B
    P, F = 4, 12
    X, O = Opnd("x", "float32", (P, F)), Opnd("o", "float32", (P, F), io="out")
    x = X.fill(np.arange(P * F, dtype=np.float32).reshape(P, F))
    body = [insn("a", "TensorScalarAffineSelect", "Pool", ins=[X.ap()], outs=[O.ap()],
                 pattern=[[-1, F]], base=B.affine([(B.iv("i"), 5)], -3),
                 compare_op="is_ge", fill_value=-1.0)]
    out, _ = simulate([X, O], [loop("l", "i", 0, 3, 1, body)])
    same_bits(O.extract(out), ref.affine_select(x, -1.0, "is_ge", "float32", 7, 0, [[-1, F]]))
    assert np.sum(O.extract(out) != -1.0) == 4 * 8          # j <= 7 in every partition


@pytest.mark.parametrize("coeff,c,cm", [(5, -3, 0), (3, 100, 7), (1, (1 << 31) - 3, 1)])
def test_iota_base_from_a_loop_axis(coeff, c, cm):
    """Iota's base may be an expression, evaluated each time the instruction runs: the
    last of three trips (i = 2) leaves base = 2*coeff + c, plus p * channel_multiplier, in
    int32 with wraparound (the last case crosses 2^31 - 1)."""
    from bir import loop
    from birsim import build as B
    P, F = 4, 6
    O = Opnd("o", "int32", (P, F), io="out")
    body = [insn("io", "Iota", "Pool", outs=[O.ap()], base=B.affine([(B.iv("i"), coeff)], c),
                 channel_multiplier=cm, pattern=[[2, 3], [1, 2]])]
    out, _ = simulate([O], [loop("l", "i", 0, 3, 1, body)])
    want = ref.iota((P, F), "int32", 2 * coeff + c, cm, [[2, 3], [1, 2]])
    np.testing.assert_array_equal(O.extract(out), want)
    assert not np.array_equal(want, ref.iota((P, F), "int32", c, cm, [[2, 3], [1, 2]]))


@pytest.mark.parametrize("mode", MODES)
def test_fp8_overflow_kernel_sim_results(mode):
    """A kernel_sim's float results are cast into fp8 outputs under the option too."""
    vals = np.array([[1e10, -1e10, 3.0, np.inf, 57344.0 * 1.2, -0.5]], np.float32)
    outs = [(n, dt) for n, dt in (("o3", "float8e3"), ("o4", "float8e4"),
                                  ("ofn", "float8_e4m3fn"), ("o5", "float8e5"))]
    allocs = [tensor("r", "ExternalInput", "float32", vals.shape, "DRAM")] + \
        [tensor(n, "ExternalOutput", dt, vals.shape, "DRAM") for n, dt in outs]
    k = insn("k", "CustomOp", "Pool", ins=[whole("r", vals.shape)],
             outs=[whole(n, vals.shape, dt) for n, dt in outs], opFunctionName="casts",
             srcsShape=[list(vals.shape)], dstsShape=[list(vals.shape)] * len(outs))
    sim = birsim.Simulator(module([function("main", allocs, [k])]), fp8_overflow=mode,
                           kernel_sim=lambda n, i, c: [vals] * len(outs))
    res = sim.run({"r": vals})
    for n, dt in outs:
        same_bits(res[n], ref.cast(vals, dt, fp8_overflow=mode))


@pytest.mark.parametrize("mode", MODES)
def test_fp8_overflow_nonzero_padding(mode):
    """NonzeroWithCount writes its padding value (here -1e6) through the option."""
    x = np.array([[0, 1, 1, 0, 0, 1, 0, 0]], np.float32)
    prog = module([function("main", [tensor("x", "ExternalInput", "float32", (1, 8), "DRAM"),
                                     tensor("y", "ExternalOutput", "float8e5", (1, 9), "DRAM")],
                            [insn("n", "NonzeroWithCount", "Pool",
                                  ins=[whole("x", (1, 8))], outs=[whole("y", (1, 9), "float8e5")],
                                  index_offset=16, padding_val=-1e6)])])
    got = birsim.Simulator(prog, fp8_overflow=mode).run({"x": x})["y"]
    want = np.array([[17, 18, 21] + [-1e6] * 5 + [3]], np.float32)
    same_bits(got, ref.cast(want, "float8e5", fp8_overflow=mode))
