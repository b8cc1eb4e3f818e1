"""Activation with is_activate2 (NKI activate2, docs/spec/nki-isa-semantics.md §3.5): the stages
t = (x op0 imm0) op1 imm1 (reverse0/1 put the constant on the left, bypass skips a stage),
then func(t; relu_param), against birsim.reference.activate2 and NumPy written out here,
over activate2's (op0, op1) pairs, constant sources (keys, immediates, [P, 1] tensors),
dtypes and layouts."""

import numpy as np
import pytest

import birsim
from birsim import reference as ref
from birsim.testing import assert_sim_close

from bir import imm, insn
from test_compute_reference_diff import Opnd, gen, rng_for, simulate

PAIRS = [("mult", "add"), ("mult", "subtract"), ("mult", "bypass"), ("add", "bypass"),
         ("subtract", "bypass"), ("bypass", "bypass")]


def act2(x_op, out_op, ins, opnds, **keys):
    out, sim = simulate(opnds, [insn("a", "Activation", "Activation", ins=[x_op.ap()] + ins,
                                     outs=[out_op.ap()], is_activate2=True, **keys)])
    return out_op.extract(out), out, sim


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("rev", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("func", ["Identity", "Relu", "Prelu", "Exp", "Tanh"])
def test_activate2_pairs(pair, rev, func):
    rng = rng_for("a2", pair, rev, func)
    shape = (8, 3, 10)
    c0, c1, alpha = 1.75, -0.625, 0.3
    A, O = Opnd("x", "float32", shape), Opnd("o", "float32", shape, io="out")
    x = A.fill(gen("float32", shape, rng, -2, 2))
    got, _, _ = act2(A, O, [], [A, O], func=func, op0=pair[0], op1=pair[1], const0=c0,
                     const1=c1, reverse0=rev[0], reverse1=rev[1], relu_param=alpha)
    want = ref.activate2(func, x, "float32", pair[0], c0, pair[1], c1, rev[0], rev[1], alpha)
    kind = "arith" if func in ("Identity", "Relu", "Prelu") else "transcendental"
    assert_sim_close(got, want, kind=kind)
    if func == "Identity":                 # written out in NumPy fp32, exact
        f32 = np.float32
        st = {"mult": np.multiply, "add": np.add, "subtract": np.subtract}
        t = x.astype(f32)
        for op, c, r in ((pair[0], f32(c0), rev[0]), (pair[1], f32(c1), rev[1])):
            if op != "bypass":
                t = st[op](c, t) if r else st[op](t, c)
        np.testing.assert_array_equal(got, t)


@pytest.mark.parametrize("src", ["imm", "tensor", "imm_keys"])
@pytest.mark.parametrize("din,dout", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                      ("float16", "float8e4"), ("float8e5", "float32"),
                                      ("float32", "float8_e4m3fn")])
def test_activate2_constant_sources_and_dtypes(src, din, dout):
    rng = rng_for("a2s", src, din, dout)
    P, shape = 16, (16, 12)
    A, O = Opnd("x", din, shape), Opnd("o", dout, shape, io="out")
    x = A.fill(gen(din, shape, rng, -3, 3))
    opnds, ins, keys = [A, O], [], {}
    if src == "imm":
        ins = [imm(0.75), imm(2.5)]
        c0, c1 = 0.75, 2.5
    elif src == "imm_keys":
        keys = {"imm0": 0.75, "imm1": 2.5}
        c0, c1 = 0.75, 2.5
    else:
        vals = [gen("float32", (P, 1), rng, 0.5, 1.5), gen("float32", (P, 1), rng, -1, 1)]
        for j, v in enumerate(vals):
            S = Opnd("c%d" % j, "float32", (P, 1))
            S.fill(v)
            opnds.append(S)
            ins.append(S.ap())
        c0, c1 = vals
    got, _, _ = act2(A, O, ins, opnds, func="Gelu", op0="mult", op1="subtract",
                     reverse1=True, **keys)
    want = ref.activate2("Gelu", x, dout, "mult", c0, "subtract", c1, False, True)
    assert_sim_close(got, want, kind="transcendental")


@pytest.mark.parametrize("lin,lout", [("strided", "poff"), ("poff", "strided"),
                                      ("alias", "alias"), ("bcast", "contig")])
def test_activate2_layouts(lin, lout):
    rng = rng_for("a2l", lin, lout)
    shape = (6, 4, 5)
    A, O = Opnd("x", "bfloat16", shape, lin), Opnd("o", "bfloat16", shape, lout, io="out")
    x = A.fill(gen("bfloat16", shape, rng), rng)
    got, _, _ = act2(A, O, [], [A, O], func="Relu", op0="subtract", const0=0.5,
                     reverse0=True)
    np.testing.assert_array_equal(got, ref.activate2("Relu", x, "bfloat16", "subtract", 0.5,
                                                     reverse0=True))


def test_activate2_mult_add_is_the_plain_activation():
    """(mult, add) with imm0/imm1 computes exactly Activation's x*scale + bias."""
    rng = rng_for("a2eq")
    shape = (8, 32)
    A = Opnd("x", "float32", shape)
    O1, O2 = Opnd("o1", "float32", shape, io="out"), Opnd("o2", "float32", shape, io="out")
    A.fill(gen("float32", shape, rng, -3, 3))
    out, _ = simulate([A, O1, O2], [
        insn("a", "Activation", "Activation", ins=[A.ap()], outs=[O1.ap()], func="Sigmoid",
             scale=1.3, bias=-0.2),
        insn("b", "Activation", "Activation", ins=[A.ap()], outs=[O2.ap()], func="Sigmoid",
             is_activate2=True, op0="mult", op1="add", const0=1.3, const1=-0.2)])
    np.testing.assert_array_equal(O1.extract(out), O2.extract(out))


def test_activate2_defaults_and_accumulator():
    """Constants default to the op's identity (mult 1, add/subtract 0); acc sums the
    function's outputs into the Activation accumulator as for the plain form."""
    rng = rng_for("a2d")
    P, F = 4, 16
    A, O = Opnd("x", "float32", (P, F)), Opnd("o", "float32", (P, F), io="out")
    R = Opnd("r", "float32", (P, 1), io="out")
    x = A.fill(gen("float32", (P, F), rng, -2, 2))
    out, _ = simulate([A, O, R], [
        insn("a", "Activation", "Activation", ins=[A.ap()], outs=[O.ap()], func="Square",
             is_activate2=True, op0="mult", op1="add", acc="ZeroAccumulate"),
        insn("r", "ReadActivationAccumulator", "Activation", outs=[R.ap()])])
    y = O.extract(out)
    np.testing.assert_array_equal(y, x * x)
    s = np.zeros(P, np.float32)
    for j in range(F):
        s = (s + y[:, j]).astype(np.float32)
    np.testing.assert_array_equal(R.extract(out)[:, 0], s)


def test_activate2_errors():
    A, O = Opnd("x", "float32", (4, 8)), Opnd("o", "float32", (4, 8), io="out")
    A.fill(np.zeros((4, 8), np.float32))
    with pytest.raises(birsim.ProgramError, match=r"\(op0, op1\) = \(add, add\) is not one"):
        act2(A, O, [], [A, O], func="Identity", op0="add", op1="add")
    with pytest.raises(birsim.ProgramError, match="not 'scale'"):
        act2(A, O, [], [A, O], func="Identity", op0="mult", scale=2.0)
    with pytest.raises(birsim.ProgramError, match="Activation key 'op0'.*needs is_activate2"):
        simulate([A, O], [insn("a", "Activation", "Activation", ins=[A.ap()], outs=[O.ap()],
                               func="Identity", op0="mult", const0=3.0)])
    with pytest.raises(birsim.ProgramError, match="Activation key 'const1'.*needs is_activate2"):
        simulate([A, O], [insn("a", "Activation", "Activation", ins=[A.ap()], outs=[O.ap()],
                               func="Identity", is_activate2=False, const1=3.0)])
