"""The engine accumulators' state beyond the lanes and the reduce ops added for issue 9:

- the "consumed" flag (docs/spec/machine-model.md §6.1: ReadActivationAccumulator "marks it
  consumed"): a read drains the accumulator, so the next Accumulate / AddAccumulate on
  that engine starts from the reset value; reads do not change the lanes;
- NKI tensor_scalar_reduce's ``reduce_res_negate`` (docs/spec/nki-isa-semantics.md §3.9) on
  TensorScalar / TensorScalarPtr: the value read out is -acc, the register keeps acc;
- reduce ops subtract (the lane minus the results' sum) and logical_and / or / xor;
- CopyPredicated with an accumulator command (docs/spec/machine-model.md §6.3) and RangeSelect with
  any accumulator reduce op.

Every expected value is computed here with NumPy, independently of birsim: folds are
written as explicit sequential fp32 loops."""

import warnings

import ml_dtypes
import numpy as np
import pytest

import birsim

from bir import function, imm, insn, module, tensor, whole

P, F = 8, 12
F32 = np.float32


def seq(op, rows, start):
    """Per row: start folded with every element in order, in fp32 (op on two fp32)."""
    rows = np.asarray(rows, F32).reshape(len(start), -1)
    out = np.asarray(start, F32).copy()
    for j in range(rows.shape[1]):
        out = np.asarray(op(out, rows[:, j]), F32)
    return out


ADD = lambda a, b: F32(a) + F32(b)                     # noqa: E731
MAX = np.maximum
MIN = np.minimum


class Prog:
    def __init__(self):
        self.allocs, self.body, self.inputs, self.outs = [], [], {}, []
        self.n = 0

    def inp(self, data, dtype="float32"):
        self.n += 1
        name = "i%d" % self.n
        data = np.asarray(data)
        self.allocs.append(tensor(name, "ExternalInput", dtype, list(data.shape), "DRAM"))
        self.inputs[name] = data
        return whole(name, data.shape, dtype)

    def out(self, shape, dtype="float32"):
        self.n += 1
        name = "o%d" % self.n
        self.allocs.append(tensor(name, "ExternalOutput", dtype, list(shape), "DRAM"))
        self.outs.append(name)
        return name, whole(name, shape, dtype)

    def add(self, opcode, engine, ins, outs, **keys):
        self.body.append(insn("s%d" % len(self.body), opcode, engine, ins=ins, outs=outs,
                              **keys))

    def read(self, engine="DVE", opcode=None, lanes=P):
        opcode = opcode or ("DveReadAccumulator" if engine == "DVE"
                            else "ReadActivationAccumulator")
        name, o = self.out((lanes, 1))
        self.add(opcode, engine, [], [o])
        return name

    def run(self, **kw):
        prog = module([function("main", self.allocs, self.body)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", birsim.BirsimWarning)
            return birsim.Simulator(prog, **kw).run(self.inputs)


def data(seed, shape=(P, F), lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(F32)


def tt_add(p, a, b, engine="DVE", **keys):
    """TensorTensor add of two new inputs; returns its fp32 results."""
    _, o = p.out((P, F))
    p.add("TensorTensor", engine, [p.inp(a), p.inp(b)], [o], op="add", **keys)
    return (a + b).astype(F32)


def act_identity(p, x, **keys):
    _, o = p.out((P, F))
    p.add("Activation", "Activation", [p.inp(x), imm(1.0, "float32"), imm(0.0, "float32"),
                                       imm(0.0, "float32")], [o], func="Identity", **keys)
    return x.astype(F32)


def col(v):
    return np.asarray(v, F32).reshape(P, 1)


# ---- the consumed flag -----------------------------------------------------------------

def test_a_read_drains_the_activation_accumulator():
    """ZeroAccumulate x, read, Accumulate y, read: the second read is the sum of y alone
    (with "no effect" it would be sum x + sum y); reading twice gives the same value."""
    x, y = data(1), data(2)
    p = Prog()
    rx = act_identity(p, x, acc="ZeroAccumulate")
    r1 = p.read("Activation")
    r1b = p.read("Activation")
    ry = act_identity(p, y, acc="Accumulate")
    r2 = p.read("Activation")
    out = p.run()
    sx = seq(ADD, rx, np.zeros(P, F32))
    np.testing.assert_array_equal(out[r1], col(sx))
    np.testing.assert_array_equal(out[r1b], col(sx))
    np.testing.assert_array_equal(out[r2], col(seq(ADD, ry, np.zeros(P, F32))))


def test_without_a_read_accumulate_continues():
    """The same sequence without the first read: the lanes carry on (sum x then y)."""
    x, y = data(3), data(4)
    p = Prog()
    rx = act_identity(p, x, acc="ZeroAccumulate")
    ry = act_identity(p, y, acc="AddAccumulate")
    r = p.read("Activation")
    out = p.run()
    sx = seq(ADD, rx, np.zeros(P, F32))
    np.testing.assert_array_equal(out[r], col(sx + seq(ADD, ry, np.zeros(P, F32))))


@pytest.mark.parametrize("op,ident,fn", [("max", -np.inf, MAX), ("min", np.inf, MIN),
                                         ("mult", 1.0, lambda a, b: F32(a) * F32(b))])
def test_after_a_read_accumulate_starts_from_the_reduce_ops_identity(op, ident, fn):
    x, y = data(5, lo=0.5, hi=1.5), data(6, lo=0.5, hi=1.5)
    p = Prog()
    tt_add(p, x, x, acc="ZeroAccumulate", reduce_op=op)
    p.read()
    ry = tt_add(p, y, y, acc="Accumulate", reduce_op=op)
    r = p.read()
    out = p.run()
    np.testing.assert_array_equal(out[r], col(seq(fn, ry, np.full(P, ident, F32))))


def test_idle_instructions_keep_the_consumed_mark_and_other_engines_are_separate():
    """read DVE, an Idle DVE instruction, Accumulate on DVE: fresh start. Activation's
    accumulator, never read, keeps accumulating."""
    x, y, z = data(7), data(8), data(9)
    p = Prog()
    tt_add(p, x, x, acc="ZeroAccumulate")
    ax = act_identity(p, x, acc="ZeroAccumulate")
    p.read("DVE")
    tt_add(p, z, z)                                     # Idle
    ry = tt_add(p, y, y, acc="Accumulate")
    ay = act_identity(p, y, acc="Accumulate")
    rd, ra = p.read("DVE"), p.read("Activation")
    out = p.run()
    z0 = np.zeros(P, F32)
    np.testing.assert_array_equal(out[rd], col(seq(ADD, ry, z0)))
    np.testing.assert_array_equal(out[ra], col(seq(ADD, ax, z0) + seq(ADD, ay, z0)))


def test_commands_that_set_a_start_are_unaffected_by_a_read():
    """LoadAccumulate after a read starts from its own value, as without the read."""
    x, y = data(10), data(11)
    s = data(12, (P, 1))
    p = Prog()
    tt_add(p, x, x, acc="ZeroAccumulate")
    p.read()
    _, o = p.out((P, F))
    p.add("TensorTensor", "DVE", [p.inp(y), p.inp(y), p.inp(s)], [o], op="add",
          acc="LoadAccumulate")
    r = p.read()
    out = p.run()
    np.testing.assert_array_equal(out[r], col(s[:, 0] + seq(ADD, y + y, np.zeros(P, F32))))


def test_tensor_scalar_cache_after_a_read_starts_from_the_reset_value():
    """The Vector scan continuing from the DVE accumulator (acc Accumulate) after a read
    starts from op1's identity (0 for add): a plain cumulative sum."""
    x, y = data(13), data(14)
    p = Prog()
    tt_add(p, x, x, acc="ZeroAccumulate")
    p.read()
    name, o = p.out((P, F))
    p.add("TensorScalarCache", "DVE", [p.inp(y)], [o], mode="Cumulative", op0="add",
          op1="add", const0=0.0, acc="Accumulate")
    r = p.read()
    out = p.run()
    want = np.zeros((P, F), F32)
    run = np.zeros(P, F32)
    for j in range(F):
        run = (y[:, j] + F32(0)) + run
        want[:, j] = run
    np.testing.assert_array_equal(out[name], want)
    np.testing.assert_array_equal(out[r], col(run))


# ---- reduce_res_negate -----------------------------------------------------------------

def ts_reduce(p, x, c0, opcode="TensorScalar", **keys):
    """tensor_scalar_reduce as BIR: TensorScalar(Ptr) op0 mult c0, op1 bypass."""
    _, o = p.out((P, F))
    if opcode == "TensorScalar":
        p.add(opcode, "DVE", [p.inp(x)], [o], op0="mult", const0=float(c0), **keys)
        return (x * F32(c0)).astype(F32)
    p.add(opcode, "DVE", [p.inp(x), p.inp(c0)], [o], op0="mult", **keys)
    return (x * c0).astype(F32)


@pytest.mark.parametrize("opcode", ["TensorScalar", "TensorScalarPtr"])
def test_reduce_res_negate_reads_minus_acc_and_keeps_the_register(opcode):
    x, y = data(20), data(21)
    c = 0.75 if opcode == "TensorScalar" else data(22, (P, 1))
    p = Prog()
    rx = ts_reduce(p, x, c, opcode, reduce_cmd="reset_reduce", reduce_op="add",
                   reduce_res_negate=True)
    ry = ts_reduce(p, y, c, opcode, reduce_cmd="reduce", reduce_op="add",
                   reduce_res_negate=True)
    r1 = p.read()
    r1b = p.read()
    out = p.run()
    z0 = np.zeros(P, F32)
    # the register is not negated in between: lane = fold(x) + fold(y), each from 0
    acc = seq(ADD, rx, z0) + seq(ADD, ry, z0)
    np.testing.assert_array_equal(out[r1], col(-acc))
    np.testing.assert_array_equal(out[r1b], col(-acc))


def test_reduce_res_negate_lasts_until_the_next_command():
    """negate set by one instruction; a later accumulating instruction without it reads
    +acc again; max as the reduce op."""
    x, y = data(23), data(24)
    p = Prog()
    rx = ts_reduce(p, x, 2.0, reduce_cmd="reset_reduce", reduce_op="max",
                   reduce_res_negate=True)
    r1 = p.read()
    ry = ts_reduce(p, y, 2.0, reduce_cmd="reset_reduce", reduce_op="max")
    r2 = p.read()
    out = p.run()
    ninf = np.full(P, -np.inf, F32)
    np.testing.assert_array_equal(out[r1], col(-seq(MAX, rx, ninf)))
    np.testing.assert_array_equal(out[r2], col(seq(MAX, ry, ninf)))


def test_reduce_res_negate_bad_input():
    p = Prog()
    ts_reduce(p, data(25), 1.0, reduce_res_negate=True)
    with pytest.raises(birsim.ProgramError, match="reduce_res_negate.*needs an accumulator"):
        p.run()
    p = Prog()
    ts_reduce(p, data(25), 1.0, reduce_cmd="reset_reduce", reduce_res_negate="yes")
    with pytest.raises(birsim.ProgramError, match="reduce_res_negate"):
        p.run()


# ---- subtract and the logical reduce ops ------------------------------------------------

def test_subtract_reduce_op_takes_the_results_sum_from_the_lane():
    x, y, z = data(30), data(31), data(32)
    s = data(33, (P, 1))
    p = Prog()
    rx = tt_add(p, x, x, acc="ZeroAccumulate", reduce_op="subtract")
    ry = tt_add(p, y, y, acc="Accumulate", reduce_op="subtract")
    r1 = p.read()
    _, o = p.out((P, F))
    p.add("TensorTensor", "DVE", [p.inp(z), p.inp(z), p.inp(s)], [o], op="add",
          acc="LoadAccumulate", reduce_op="subtract")
    r2 = p.read()
    out = p.run()
    z0 = np.zeros(P, F32)
    lane = (z0 - seq(ADD, rx, z0)).astype(F32)
    lane = (lane - seq(ADD, ry, z0)).astype(F32)
    np.testing.assert_array_equal(out[r1], col(lane))
    np.testing.assert_array_equal(out[r2], col(s[:, 0] - seq(ADD, z + z, z0)))


@pytest.mark.parametrize("op,ident,fn", [
    ("logical_and", 1.0, lambda a, b: ((a != 0) & (b != 0)).astype(F32)),
    ("logical_or", 0.0, lambda a, b: ((a != 0) | (b != 0)).astype(F32)),
    ("logical_xor", 0.0, lambda a, b: ((a != 0) ^ (b != 0)).astype(F32)),
])
def test_logical_reduce_ops(op, ident, fn):
    rng = np.random.default_rng(34)
    x = (rng.integers(0, 2, (P, F)) * rng.uniform(0.5, 2, (P, F))).astype(F32)
    x[0] = 0.0
    x[1] = 1.0
    y = (rng.integers(0, 2, (P, F))).astype(F32)
    zero = np.zeros((P, F), F32)
    p = Prog()
    rx = tt_add(p, x, zero, acc="ZeroAccumulate", reduce_op=op)
    ry = tt_add(p, y, zero, acc="Accumulate", reduce_op=op)
    r = p.read()
    out = p.run()
    lane = fn(np.full(P, ident, F32), seq(fn, rx, np.full(P, ident, F32)))
    lane = fn(lane, seq(fn, ry, np.full(P, ident, F32)))
    np.testing.assert_array_equal(out[r], col(lane))


def test_bitwise_reduce_ops_still_rejected():
    p = Prog()
    tt_add(p, data(35), data(36), acc="ZeroAccumulate", reduce_op="bitwise_xor")
    with pytest.raises(birsim.ProgramError, match="'reduce_op'.*not modelled.*accumulator"):
        p.run()


# ---- CopyPredicated with an accumulator command ---------------------------------------------

def copy_pred(p, src, pred, old, engine="DVE", out_dtype="float32", src_dtype="float32",
              extra=(), **keys):
    """CopyPredicated into a destination preset with `old` (a TensorCopy first); returns
    (output name, the destination's values afterwards as NumPy computes them)."""
    name, o = p.out((P, F), out_dtype)
    oldt = old.astype(ml_dtypes.bfloat16) if out_dtype == "bfloat16" else old
    p.add("TensorCopy", engine, [p.inp(oldt, out_dtype)], [o])
    if isinstance(src, float):
        sv = [imm(src, "float32")]
        s = np.full((P, F), src, F32)
    else:
        srct = src.astype(ml_dtypes.bfloat16) if src_dtype == "bfloat16" else src
        sv = [p.inp(srct, src_dtype)]
        s = srct.astype(F32)
    p.add("CopyPredicated", engine, sv + [p.inp(pred)] + list(extra), [o], **keys)
    sel = pred != 0
    want = np.where(sel, s, oldt.astype(F32)).astype(F32)
    if out_dtype == "bfloat16":
        want = want.astype(ml_dtypes.bfloat16).astype(F32)
    return name, want


def mask(seed):
    return np.random.default_rng(seed).integers(0, 2, (P, F)).astype(np.uint8)


@pytest.mark.parametrize("cmd", ["ZeroAccumulate", "Accumulate", "AddAccumulate", "Zero",
                                 "Idle", "LoadAccumulate"])
def test_copy_predicated_accumulator_commands_default_max(cmd):
    """reduce_op defaults to max (NKI select_reduce); the fold runs over outs[0] as
    written: copied elements and kept ones."""
    x, old, first = data(40), data(41), data(42)
    pr = mask(43)
    p = Prog()
    rf = tt_add(p, first, first, acc="ZeroAccumulate", reduce_op="max")
    keys = {"accumulator_cmd": cmd}
    if cmd == "LoadAccumulate":
        keys["reduce_init"] = 0.25
    name, want = copy_pred(p, x, pr, old, **keys)
    r = p.read()
    out = p.run()
    ninf = np.full(P, -np.inf, F32)
    lane = seq(MAX, rf, ninf)
    fold = seq(MAX, want, ninf)
    lane = {"ZeroAccumulate": fold, "Accumulate": np.maximum(lane, fold),
            "AddAccumulate": np.maximum(lane, fold), "Zero": ninf, "Idle": lane,
            "LoadAccumulate": np.maximum(F32(0.25), fold)}[cmd]
    np.testing.assert_array_equal(out[name], want)
    np.testing.assert_array_equal(out[r], col(lane))


def test_copy_predicated_accumulates_cast_values_on_pool_with_a_load_operand():
    """bf16 destination from an fp32 source: the fold sees the bf16-rounded values;
    reverse_pred; add; the LoadAccumulate start from ins[2] ([P, 1]); Pool's accumulator."""
    x, old = data(44), data(45)
    pr = mask(46)
    s = data(47, (P, 1))
    p = Prog()
    name, want = copy_pred(p, x, (pr == 0).astype(np.uint8), old, engine="Pool",
                           out_dtype="bfloat16", extra=[p.inp(s)], reduce_op="add",
                           acc="LoadAccumulate")
    # copy_pred computed `want` for pred != 0 on the inverted mask: with reverse_pred the
    # instruction below selects where the given predicate is zero, i.e. the same elements
    p.body[-1]["ins"][1] = p.inp(pr)
    p.body[-1]["reverse_pred"] = True
    r = p.read("Pool")
    out = p.run()
    np.testing.assert_array_equal(out[name].astype(F32), want)
    np.testing.assert_array_equal(out[r], col(s[:, 0] + seq(ADD, want, np.zeros(P, F32))))


def test_copy_predicated_immediate_source_with_min():
    old = data(48)
    pr = mask(49)
    p = Prog()
    name, want = copy_pred(p, -5.5, pr, old, reduce_cmd="reset_reduce", reduce_op="minimum")
    r = p.read()
    out = p.run()
    np.testing.assert_array_equal(out[name], want)
    np.testing.assert_array_equal(out[r], col(seq(MIN, want, np.full(P, np.inf, F32))))


def test_copy_predicated_accumulator_bad_input():
    p = Prog()
    copy_pred(p, data(50), mask(51), data(52), engine="PE", acc="ZeroAccumulate")
    with pytest.raises(birsim.BirsimError, match="CopyPredicated: engine PE has no accumulator"):
        p.run()


# ---- RangeSelect with any accumulator reduce op ---------------------------------------------

def range_sel(p, x, lo, hi, **keys):
    name, o = p.out((P, F))
    extra = keys.pop("extra", [])
    p.add("RangeSelect", "DVE", [p.inp(x), imm(lo), imm(hi)] + extra, [o],
          compare_op0="is_ge", compare_op1="is_lt", fill_value=-7.0, **keys)
    j = np.arange(F, dtype=F32)[None, :]
    return name, np.where((j >= lo) & (j < hi), x, F32(-7.0)).astype(F32)


@pytest.mark.parametrize("op,ident,fn", [
    ("max", -np.inf, MAX), ("maximum", -np.inf, MAX), ("add", 0.0, ADD), ("min", np.inf, MIN),
    ("abs_max", 0.0, lambda a, b: np.where(np.abs(b) >= np.abs(a), b, a).astype(F32)),
])
def test_range_select_reduce_ops(op, ident, fn):
    x, y = data(60), data(61)
    p = Prog()
    n1, w1 = range_sel(p, x, 2.0, 9.0, reduce_op=op)               # default reset_reduce
    n2, w2 = range_sel(p, y, 0.0, 5.0, reduce_op=op, reduce_cmd="reduce")
    r = p.read()
    out = p.run()
    e = np.full(P, ident, F32)
    lane = fn(seq(fn, w1, e), seq(fn, w2, e)).astype(F32)
    np.testing.assert_array_equal(out[n1], w1)
    np.testing.assert_array_equal(out[n2], w2)
    np.testing.assert_array_equal(out[r], col(lane))


def test_range_select_zero_and_load_accumulate():
    """Zero resets to the identity without folding; LoadAccumulate starts from
    reduce_init or ins[3]."""
    x = data(62)
    s = data(63, (P, 1))
    p = Prog()
    range_sel(p, x, 0.0, 12.0, reduce_cmd="reset")
    r0 = p.read()
    _, w1 = range_sel(p, x, 0.0, 6.0, reduce_cmd="load_reduce", reduce_init=1.5)
    r1 = p.read()
    _, w2 = range_sel(p, x, 3.0, 12.0, reduce_cmd="load_reduce", reduce_op="add",
                      extra=[p.inp(s)])
    r2 = p.read()
    out = p.run()
    np.testing.assert_array_equal(out[r0], col(np.full(P, -np.inf, F32)))
    np.testing.assert_array_equal(out[r1], col(np.maximum(F32(1.5),
                                                          seq(MAX, w1, np.full(P, -np.inf, F32)))))
    np.testing.assert_array_equal(out[r2], col(s[:, 0] + seq(ADD, w2, np.zeros(P, F32))))


# ---- TensorReduce apply_transpose with an accumulator command ---------------------------

def test_apply_transpose_small_tile_accumulates_per_output_partition():
    """[4, 8] becomes [8, 4]: X reduces over the original partitions; lane p = output
    partition p = column p of the input (add, sequential from the first element)."""
    x = data(70, (4, 8))
    p = Prog()
    name, o = p.out((8, 1))
    p.add("TensorReduce", "DVE", [p.inp(x)], [o], op="add", axis="X", apply_transpose=True,
          acc="ZeroAccumulate")
    r = p.read()
    out = p.run()
    red = x[0].copy()
    for i in range(1, 4):
        red = (red + x[i]).astype(F32)
    np.testing.assert_array_equal(out[name][:, 0], red)
    np.testing.assert_array_equal(out[r], col(F32(0) + red))


def test_apply_transpose_blocks_accumulate_max_of_negated_results():
    """[32, 64]: each 32 x 32 block transposed in place, X over 64, negate; two
    instructions fold max into the lanes (ZeroAccumulate, then Accumulate)."""
    x, y = data(71, (32, 64)), data(72, (32, 64))

    def blocks(a):        # block-transposed tile, written out independently of birsim
        t = np.empty_like(a)
        for b in range(2):
            t[:, 32 * b:32 * b + 32] = a[:, 32 * b:32 * b + 32].T
        return t
    p = Prog()
    for v, cmd in ((x, "ZeroAccumulate"), (y, "Accumulate")):
        _, o = p.out((32, 1))
        p.add("TensorReduce", "DVE", [p.inp(v)], [o], op="max", axis="X", negate=True,
              apply_transpose=True, acc=cmd, reduce_op="max")
    r = p.read(lanes=32)
    out = p.run()
    want = np.maximum(-blocks(x).max(axis=1), -blocks(y).max(axis=1))
    np.testing.assert_array_equal(out[r][:, 0], want)


def test_apply_transpose_integer_op_cannot_accumulate():
    p = Prog()
    _, o = p.out((8, 1), "int32")
    p.add("TensorReduce", "DVE", [p.inp(np.arange(32, dtype=np.int32).reshape(4, 8), "int32")],
          [o], op="bitwise_or", axis="X", apply_transpose=True, acc="ZeroAccumulate")
    with pytest.raises(birsim.BirsimError, match="bit-vector op cannot feed the accumulator"):
        p.run()
