"""TensorScalarCache (Reduce, Cumulative, TensorScan) and the fused TensorScalarPtr forms
(is_tensor_tensor_scan, is_scalar_tensor_tensor, is_tensor_scalar_addr) against the NumPy
reference (birsim.reference, from docs/spec/nki-isa-semantics.md §3.8-3.10, §3.13), with the NKI
test vectors of §4 items 15 and 16."""

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from _compute import LAYOUTS, Imm, In, Out, run1
from bir import ap, function, imm, insn, module, tensor, whole

P, F = 16, 24


def data(shape, seed, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def tsc(x, mode, op0, op1, out_f, *, extra=(), **keys):
    return run1("TensorScalarCache", [x, *extra], [Out("y", (x.P, out_f))], mode=mode,
                op0=op0, op1=op1, **keys)[0]


# ---- NKI vectors (§4 item 16) --------------------------------------------------------

def test_nki_cumulative_vectors():
    ones = np.ones((128, 64), np.float32)
    y = tsc(In("x", ones), "Cumulative", "add", "add", 64, const0=0.0)
    np.testing.assert_array_equal(y, np.tile(np.arange(1, 65, dtype=np.float32), (128, 1)))
    y = tsc(In("x", ones), "Cumulative", "add", "mult", 64, const0=0.0)
    np.testing.assert_array_equal(y, ones)
    y = tsc(In("x", ones), "Cumulative", "add", "max", 64, const0=1.0)
    np.testing.assert_array_equal(y, 2 * ones)
    y = tsc(In("x", ones), "Cumulative", "add", "add", 64, const0=0.0, const1=10.0,
            acc="LoadAccumulate")
    np.testing.assert_array_equal(y, np.tile(np.arange(11, 75, dtype=np.float32), (128, 1)))


# ---- differential ------------------------------------------------------------------

@pytest.mark.parametrize("op0,op1", [("add", "add"), ("mult", "add"), ("subtract", "subtract"),
                                     ("bypass", "max"), ("mult", "min"), ("add", "mult")])
@pytest.mark.parametrize("rev", [(False, False), (True, False), (False, True)])
def test_cumulative_ops(op0, op1, rev):
    x = In("x", data((P, F), 3, 0.5, 1.5))
    y = tsc(x, "Cumulative", op0, op1, F, const0=0.75, reverse0=rev[0], reverse1=rev[1])
    want = ref.tensor_scalar_cumulative(x.data, op0, 0.75, op1, ref.SCAN_IDENTITY[op1], *rev)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8e5", "int8"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cumulative_dtypes_layouts(dtype, layout):
    x = In("x", data((P, F), 4) * (5 if dtype == "int8" else 1), dtype, layout)
    y = tsc(x, "Cumulative", "mult", "add", F, const0=1.5)
    np.testing.assert_array_equal(y, ref.tensor_scalar_cumulative(x.data, "mult", 1.5, "add", 0.0))


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16"])
def test_cumulative_output_cast(out_dtype):
    x = In("x", data((P, F), 5))
    (y,) = run1("TensorScalarCache", [x], [Out("y", (P, F), out_dtype)], mode="Cumulative",
                op0="add", op1="add")
    want = ref.cast(ref.tensor_scalar_cumulative(x.data, "add", 0.0, "add", 0.0), out_dtype)
    np.testing.assert_array_equal(y.view(np.uint16), want.view(np.uint16))


def test_reduce_writes_the_final_value_and_operand0_per_partition():
    x = In("x", data((P, F), 6))
    s = In("s", data((P, 1), 7))
    y = tsc(x, "Reduce", "mult", "add", 1, extra=[s])
    full = ref.tensor_scalar_cumulative(x.data, "mult", s.data[:, 0], "add", 0.0)
    np.testing.assert_array_equal(y[:, 0], full[:, -1])


def test_immediate_operand0():
    x = In("x", data((P, F), 8))
    y = tsc(x, "Cumulative", "subtract", "add", F, extra=[Imm(0.5)])
    np.testing.assert_array_equal(y, ref.tensor_scalar_cumulative(x.data, "subtract", 0.5,
                                                                   "add", 0.0))


@pytest.mark.parametrize("cmd", ["Accumulate", "AddAccumulate", "reduce"])
def test_accumulate_continues_from_the_vector_accumulator(cmd):
    """Two scans over the halves of a row, the second continuing the first's value
    (kept in the Vector engine accumulator), equal one scan over the row."""
    x = data((P, 2 * F), 9)
    allocs = [tensor("x", "ExternalInput", "float32", (P, 2 * F), "DRAM"),
              tensor("y", "ExternalOutput", "float32", (P, 2 * F), "DRAM")]
    half = lambda loc, c: ap(loc, [[2 * F, P], [1, F]], offset=c * F)   # noqa: E731
    body = [insn("a", "TensorScalarCache", "DVE", ins=[half("x", 0)], outs=[half("y", 0)],
                 mode="Cumulative", op0="add", op1="add", acc="ZeroAccumulate"),
            insn("b", "TensorScalarCache", "DVE", ins=[half("x", 1)], outs=[half("y", 1)],
                 mode="Cumulative", op0="add", op1="add", reduce_cmd=cmd)]
    y = birsim.Simulator(module([function("main", allocs, body)])).run({"x": x})["y"]
    np.testing.assert_array_equal(y, ref.tensor_scalar_cumulative(x, "add", 0.0, "add", 0.0))


def test_idle_leaves_the_accumulator_alone():
    x = data((P, F), 10)
    allocs = [tensor("x", "ExternalInput", "float32", (P, F), "DRAM"),
              tensor("y", "ExternalOutput", "float32", (P, 2 * F + 1), "DRAM")]
    part = lambda c: ap("y", [[2 * F + 1, P], [1, F]], offset=c * F)   # noqa: E731
    body = [insn("a", "TensorScalarCache", "DVE", ins=[whole("x", (P, F))], outs=[part(0)],
                 mode="Cumulative", op0="add", op1="add"),
            insn("b", "TensorScalarCache", "DVE", ins=[whole("x", (P, F))], outs=[part(1)],
                 mode="Cumulative", op0="mult", op1="mult", acc="Idle"),
            insn("c", "TensorScalarCache", "DVE", ins=[whole("x", (P, F))],
                 outs=[ap("y", [[2 * F + 1, P], [1, 1]], offset=2 * F)],
                 mode="Reduce", op0="bypass", op1="add", acc="Accumulate")]
    y = birsim.Simulator(module([function("main", allocs, body)])).run({"x": x})["y"]
    first = ref.tensor_scalar_cumulative(x, "add", 0.0, "add", 0.0)
    np.testing.assert_array_equal(y[:, :F], first)
    np.testing.assert_array_equal(y[:, F:2 * F], ref.tensor_scalar_cumulative(x, "mult", 0.0, "mult", 1.0))
    np.testing.assert_array_equal(y[:, 2 * F], ref.tensor_scalar_cumulative(x, "bypass", 0.0, "add", first[:, -1])[:, -1])


def test_tensor_scan_mode():
    a, b = In("a", data((P, F), 11)), In("b", data((P, F), 12))
    y = tsc(a, "TensorScan", "mult", "add", F, extra=[b], const1=0.5, acc="LoadAccumulate")
    np.testing.assert_array_equal(y, ref.tensor_tensor_scan(a.data, b.data, 0.5, "mult", "add"))


def test_bad_op1_and_mode_are_clear_errors():
    with pytest.raises(birsim.SimulationError, match="op1 divide cannot accumulate"):
        tsc(In("x", data((P, F), 1)), "Cumulative", "add", "divide", F)
    with pytest.raises(birsim.SimulationError, match="not an fp32 arithmetic op"):
        tsc(In("x", data((P, F), 1)), "Cumulative", "bitwise_and", "add", F)
    with pytest.raises(birsim.ProgramError, match="mode"):
        run1("TensorScalarCache", [In("x", data((P, F), 1))], [Out("y", (P, F))],
             op0="add", op1="add")


# ---- TensorScalarPtr fused forms -----------------------------------------------------

def tsp(ins, out_dtype="float32", **keys):
    return run1("TensorScalarPtr", ins, [Out("y", (ins[0].P, ins[0].F), out_dtype)], **keys)[0]


def test_nki_tensor_tensor_scan_vector():
    """§4 item 15: op0=mult, op1=add, initial 0: r_i = a_i * r_{i-1} + b_i, and split over
    two 512-column calls with the second's initial = r[:, 511]."""
    Pn, Fn = 128, 1024
    a, b = data((Pn, Fn), 13, 0.0, 1.0), data((Pn, Fn), 14)
    want = np.zeros((Pn, Fn), np.float32)
    r = np.zeros(Pn, np.float32)
    for i in range(Fn):
        r = a[:, i] * r + b[:, i]
        want[:, i] = r
    allocs = [tensor("a", "ExternalInput", "float32", (Pn, Fn), "DRAM"),
              tensor("b", "ExternalInput", "float32", (Pn, Fn), "DRAM"),
              tensor("y", "ExternalOutput", "float32", (Pn, Fn), "DRAM")]
    half = lambda loc, c: ap(loc, [[Fn, Pn], [1, 512]], offset=c * 512)   # noqa: E731
    body = [insn("s0", "TensorScalarPtr", "DVE", ins=[half("a", 0), imm(0.0), half("b", 0)],
                 outs=[half("y", 0)], op0="mult", op1="add", is_tensor_tensor_scan=True),
            insn("s1", "TensorScalarPtr", "DVE",
                 ins=[half("a", 1), ap("y", [[Fn, Pn], [1, 1]], offset=511), half("b", 1)],
                 outs=[half("y", 1)], op0="mult", op1="add", is_tensor_tensor_scan=True)]
    y = birsim.Simulator(module([function("main", allocs, body)])).run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("rev", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_tensor_tensor_scan_differential(rev, layout):
    a, b = In("a", data((P, F), 15), "float32", layout), In("b", data((P, F), 16), "bfloat16")
    init = In("i", data((P, 1), 17))
    y = tsp([a, init, b], op0="subtract", op1="max", reverse0=rev[0], reverse1=rev[1],
            is_tensor_tensor_scan=True)
    np.testing.assert_array_equal(y, ref.tensor_tensor_scan(a.data, b.data, init.data[:, 0],
                                                            "subtract", "max", *rev))


@pytest.mark.parametrize("rev", [(False, False), (True, True)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_scalar_tensor_tensor_differential(rev, dtype, layout):
    x, t = In("x", data((P, F), 18), dtype, layout), In("t", data((P, F), 19))
    s = In("s", data((P, 1), 20))
    y = tsp([x, s, t], op0="divide", op1="mult", reverse0=rev[0], reverse1=rev[1],
            is_scalar_tensor_tensor=True)
    np.testing.assert_array_equal(y, ref.scalar_tensor_tensor(x.data, "divide", s.data[:, 0],
                                                              "mult", t.data, *rev))


def test_scalar_tensor_tensor_changes_the_result():
    """The flag is honoured: without it the same operands give a different answer."""
    x, t, s = In("x", data((P, F), 21)), In("t", data((P, F), 22)), In("s", data((P, 1), 23))
    with pytest.raises(birsim.SimulationError):
        tsp([x, s, t], op0="add", op1="add")      # plain form: ins[2] must be per partition
    y = tsp([x, s, t], op0="add", op1="add", is_scalar_tensor_tensor=True)
    np.testing.assert_array_equal(y, (x.data + s.data) + t.data)


@pytest.mark.parametrize("ops", [("add", "arith_shift_left"), ("mult", "bitwise_and"),
                                 ("subtract", "logical_shift_right"), ("max", "min")])
def test_tensor_scalar_addr_int64_alu(ops):
    rng = np.random.default_rng(24)
    x = In("x", rng.integers(-2**20, 2**20, (P, F)).astype(np.int32), "int32")
    s0 = In("s0", rng.integers(-1000, 1000, (P, 1)).astype(np.int32), "int32")
    s1 = In("s1", rng.integers(0, 7, (P, 1)).astype(np.int32), "int32")
    y = tsp([x, s0, s1], "int32", op0=ops[0], op1=ops[1], is_tensor_scalar_addr=True)
    v = x.data.astype(np.int64)
    a, b = s0.data.astype(np.int64), s1.data.astype(np.int64)
    f = {"add": np.add, "subtract": np.subtract, "mult": np.multiply, "max": np.maximum,
         "min": np.minimum, "bitwise_and": np.bitwise_and,
         "arith_shift_left": np.left_shift,
         "logical_shift_right": lambda l, r: (l.astype(np.uint64) >> r.astype(np.uint64)).astype(np.int64)}
    want = f[ops[1]](f[ops[0]](v, a), b)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)      # int32 store keeps the low bits
    np.testing.assert_array_equal(y, want)


def test_at_most_one_fused_form():
    with pytest.raises(birsim.ProgramError, match="at most one of"):
        tsp([In("x", data((P, F), 1)), Imm(1.0), Imm(1.0)], op0="add",
            is_tensor_tensor_scan=True, is_scalar_tensor_tensor=True)
