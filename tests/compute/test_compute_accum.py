"""The per-engine accumulators (issue 9): `acc` / `reduce_cmd` / `accumulator_cmd` with
`reduce_op` on Activation, TensorTensor, TensorScalar, TensorScalarPtr (plain and fused),
TensorReduce and Exponential (TensorScalarCache shares them), drained by
ReadActivationAccumulator, ActivationReadAccumulator and DveReadAccumulator.

Every expected value is computed by the NumPy oracle (birsim.reference: the instruction's
own reference for its fp32 results, `accumulate` for the accumulator), replaying the same
sequence of instructions with one accumulator per engine per core."""

import warnings

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from bir import function, imm, insn, module, tensor, whole

P, F = 8, 12
LANES = 128
CMDS = ("Idle", "Zero", "Accumulate", "ZeroAccumulate", "AddAccumulate", "LoadAccumulate")
NKI_CMDS = ("idle", "reset", "reduce", "reset_reduce", "load_reduce")
REDUCE_OPS = ("add", "mult", "max", "min", "abs_max", "abs_min")
READER = {"DVE": "DveReadAccumulator", "Activation": "ReadActivationAccumulator",
          "Pool": "ReadActivationAccumulator"}


class Prog:
    """A program under construction plus the oracle's view of it: the accumulator of each
    engine, and the expected value of every output."""

    def __init__(self, name="main", prefix=""):
        self.allocs, self.body, self.inputs, self.expect = [], [], {}, {}
        self.acc = {e: np.zeros(LANES, np.float32) for e in ("DVE", "Activation", "Pool")}
        # per engine: read since the last command (docs/spec/machine-model.md's "consumed" flag)
        self.consumed = dict.fromkeys(self.acc, False)
        # per engine: the accumulator holds libm (exp) results, compared with a tolerance
        self.libm = dict.fromkeys(self.acc, False)
        self.close = set()
        self.n, self.name, self.prefix = 0, name, prefix

    def _name(self, kind):
        self.n += 1
        return "%s%s%d" % (self.prefix, kind, self.n)

    def inp(self, data, dtype="float32"):
        name = self._name("i")
        data = ref.cast(np.asarray(data, np.float32), dtype)
        self.allocs.append(tensor(name, "ExternalInput", dtype, data.shape, "DRAM"))
        self.inputs[name] = data
        return whole(name, data.shape, dtype), data

    def out(self, shape, dtype="float32", expect=None, close=False):
        name = self._name("o")
        self.allocs.append(tensor(name, "ExternalOutput", dtype, shape, "DRAM"))
        self.expect[name] = expect
        if close:
            self.close.add(name)
        self.last = name
        return whole(name, shape, dtype)

    def add(self, opcode, engine, ins, outs, **keys):
        self.body.append(insn("s%d" % len(self.body), opcode, engine, ins=ins, outs=outs,
                              **keys))

    def read(self, engine, opcode=None, dtype="float32"):
        """Drain `engine`'s accumulator (lanes 0..P-1) into a new [P, 1] output."""
        opcode = opcode or READER[engine]
        want = ref.cast(self.acc[engine][:P].reshape(P, 1), dtype)
        self.add(opcode, engine, [], [self.out((P, 1), dtype, want, self.libm[engine])])
        self.consumed[engine] = True
        return self.last

    def module(self):
        return module([function(self.name, self.allocs, self.body)])

    def check(self, outs):
        for name, want in self.expect.items():
            if name in self.close:      # exp is libm's (a few ulps from NumPy's)
                np.testing.assert_allclose(ref.decode(outs[name]), ref.decode(want),
                                           rtol=2e-5, atol=1e-6, err_msg=name)
            else:
                np.testing.assert_array_equal(outs[name], want, err_msg=name)

    def fold(self, engine, cmd, res, op="add", start=None, libm=False):
        """The oracle's accumulator after one instruction."""
        cmd = ref.ACC_COMMANDS.get(cmd, cmd)
        fresh = cmd in ("Zero", "ZeroAccumulate", "LoadAccumulate") or (
            cmd != "Idle" and self.consumed[engine])
        self.acc[engine] = ref.accumulate(self.acc[engine], cmd, res, op, start,
                                          self.consumed[engine])
        if cmd != "Idle":
            self.consumed[engine] = False
        if fresh:
            self.libm[engine] = False
        if cmd != "Zero" and cmd != "Idle":
            self.libm[engine] |= libm


def _run(prog, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        return birsim.Simulator(prog.module(), **kw).run(prog.inputs)


def _data(rng, shape=(P, F), lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


# ---- one accumulating instruction per opcode: operands, keys and its fp32 results ------

def _tt(p, rng, dt):
    a, da = p.inp(_data(rng), dt)
    b, db = p.inp(_data(rng), dt)
    op = str(rng.choice(["add", "mult", "subtract", "max"]))
    return "TensorTensor", [a, b], 2, {"op": op}, ref.tensor_tensor(op, da, db, "float32")


def _ts(p, rng, dt):
    x, dx = p.inp(_data(rng), dt)
    c0, c1 = float(rng.uniform(-1, 1)), float(rng.uniform(-1, 1))
    res = ref.tensor_scalar(dx, "mult", c0, "add", c1, "float32")
    return "TensorScalar", [x], 3, {"op0": "mult", "const0": c0, "op1": "add", "const1": c1}, res


def _tsp(p, rng, dt):
    x, dx = p.inp(_data(rng), dt)
    s0, d0 = p.inp(_data(rng, (P, 1)))
    s1, d1 = p.inp(_data(rng, (P, 1)))
    res = ref.tensor_scalar(dx, "subtract", d0, "mult", d1, "float32")
    return "TensorScalarPtr", [x, s0, s1], 3, {"op0": "subtract", "op1": "mult"}, res


def _stt(p, rng, dt):
    x, dx = p.inp(_data(rng), dt)
    s, ds = p.inp(_data(rng, (P, 1)))
    t, dtile = p.inp(_data(rng), dt)
    res = ref.scalar_tensor_tensor(dx, "mult", ds, "add", dtile)
    return ("TensorScalarPtr", [x, s, t], 3,
            {"op0": "mult", "op1": "add", "is_scalar_tensor_tensor": True}, res)


def _scan(p, rng, dt):
    x, dx = p.inp(_data(rng, lo=-0.9, hi=0.9), dt)
    s, ds = p.inp(_data(rng, (P, 1)))
    t, dtile = p.inp(_data(rng), dt)
    res = ref.tensor_tensor_scan(dx, dtile, ds, "mult", "add")
    return ("TensorScalarPtr", [x, s, t], 3,
            {"op0": "mult", "op1": "add", "is_tensor_tensor_scan": True}, res)


def _tr(p, rng, dt):
    x, dx = p.inp(_data(rng, (P, 3, 4)), dt)
    op = str(rng.choice(["add", "max", "min"]))
    neg = bool(rng.integers(2))
    res = ref.tensor_reduce(op, dx, "X", "float32", negate=neg).reshape(P, 3)
    return "TensorReduce", [x], 1, {"op": op, "axis": "X", "negate": neg}, res


def _exp(p, rng, dt):
    x, dx = p.inp(_data(rng), dt)
    m, dm = p.inp(_data(rng, (P, 1)))
    return "Exponential", [x, m], 2, {}, ref.exponential(dx, "float32", max_value=dm)


def _act(p, rng, dt):
    x, dx = p.inp(_data(rng), dt)
    func = str(rng.choice(["Relu", "Square", "Identity", "Exp"]))
    sc, bi = float(rng.uniform(0.5, 1.5)), float(rng.uniform(-0.5, 0.5))
    res = ref.activation(func, dx, "float32", scale=sc, bias=bi)
    ins = [x, imm(sc, "float32"), imm(bi, "float32"), imm(0.0, "float32")]
    return "Activation", ins, 4, {"func": func}, res


GEN = {"TensorTensor": _tt, "TensorScalar": _ts, "TensorScalarPtr": _tsp,
       "scalar_tensor_tensor": _stt, "tensor_tensor_scan": _scan, "TensorReduce": _tr,
       "Exponential": _exp, "Activation": _act}
#: what runs on each engine in these tests
ON = {"DVE": ("TensorTensor", "TensorScalar", "TensorScalarPtr", "scalar_tensor_tensor",
              "tensor_tensor_scan", "TensorReduce", "Exponential"),
      "Activation": ("Activation", "TensorScalar", "TensorTensor"),
      "Pool": ("TensorTensor", "TensorScalar", "TensorReduce")}


def step(p, rng, kind, engine, cmd, op="add", dt="float32", out_dt="float32", load="key",
         spelling="acc"):
    """Append one accumulating instruction of `kind` on `engine` and replay it on the
    oracle. `load` says where a LoadAccumulate start comes from: key (reduce_init), imm or
    tensor (the operand after the instruction's own inputs)."""
    opcode, ins, load_at, keys, res = GEN[kind](p, rng, dt)
    keys = dict(keys, **{spelling: cmd})
    if op != "add" or rng.integers(2):
        keys["reduce_op"] = op
    start = None
    if ref.ACC_COMMANDS.get(cmd, cmd) == "LoadAccumulate":
        if load == "key" or (opcode == "TensorScalar"):
            start = float(rng.uniform(-1, 1))
            keys["reduce_init"] = start
        else:
            assert len(ins) == load_at
            if load == "imm":
                start = float(rng.uniform(-1, 1))
                ins = ins + [imm(start, "float32")]
            else:
                o, start = p.inp(_data(rng, (P, 1)))
                ins = ins + [o]
    shape = np.shape(res) if opcode != "TensorReduce" else (P, 3)
    res = np.asarray(res, np.float32).reshape(shape)
    libm = opcode == "Exponential" or keys.get("func") == "Exp"
    p.add(opcode, engine, ins, [p.out(shape, out_dt, ref.cast(res, out_dt), libm)], **keys)
    p.fold(engine, cmd, res, op, start, libm)


# ---- every command on every opcode ------------------------------------------------------

@pytest.mark.parametrize("cmd", CMDS)
@pytest.mark.parametrize("kind", sorted(GEN))
def test_each_command_on_each_opcode(kind, cmd):
    """A LoadAccumulate sets a known state, then `cmd` on `kind`, then the read."""
    rng = np.random.default_rng(abs(hash((kind, cmd))) % 2**32)
    engine = "Activation" if kind == "Activation" else "DVE"
    p = Prog()
    step(p, rng, "TensorTensor" if engine == "DVE" else "Activation", engine,
         "LoadAccumulate", load="tensor")
    p.read(engine)
    step(p, rng, kind, engine, cmd, load="tensor")
    p.read(engine)
    p.check(_run(p))


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("kind", ["TensorTensor", "Activation", "TensorReduce",
                                  "scalar_tensor_tensor"])
def test_each_reduce_op(kind, op):
    rng = np.random.default_rng(REDUCE_OPS.index(op))
    engine = "Activation" if kind == "Activation" else "DVE"
    p = Prog()
    for cmd in ("ZeroAccumulate", "Accumulate", "LoadAccumulate", "AddAccumulate"):
        step(p, rng, kind, engine, cmd, op=op, load="imm")
        p.read(engine)
    p.check(_run(p))


@pytest.mark.parametrize("load", ["key", "imm", "tensor"])
@pytest.mark.parametrize("kind", ["TensorTensor", "TensorScalarPtr", "TensorReduce",
                                  "Exponential", "Activation"])
def test_load_accumulate_start_values(kind, load):
    rng = np.random.default_rng(7)
    engine = "Activation" if kind == "Activation" else "DVE"
    p = Prog()
    step(p, rng, kind, engine, "LoadAccumulate", load=load)
    p.read(engine)
    p.check(_run(p))


@pytest.mark.parametrize("spelling", ["acc", "reduce_cmd", "accumulator_cmd"])
def test_nki_spellings_and_key_aliases(spelling):
    rng = np.random.default_rng(3)
    p = Prog()
    for cmd in NKI_CMDS:
        step(p, rng, "Exponential", "DVE", cmd, spelling=spelling)
        p.read("DVE")
        step(p, rng, "Activation", "Activation", cmd, spelling=spelling, load="imm")
        p.read("Activation", "ActivationReadAccumulator")
    p.check(_run(p))


# ---- sequences, dtypes, engines, cores ----------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("engine", ["DVE", "Activation", "Pool"])
def test_random_sequences_across_instructions_and_dtypes(engine, seed):
    rng = np.random.default_rng(100 * seed + len(engine))
    p = Prog()
    for k in range(10):
        kind = str(rng.choice(ON[engine]))
        cmd = str(rng.choice(CMDS + NKI_CMDS))
        op = str(rng.choice(["add", "add", "max", "min", "mult", "abs_max"]))
        dt, out_dt = (str(rng.choice(["float32", "bfloat16", "float16"])) for _ in range(2))
        load = "key" if kind in ("TensorScalar",) else str(rng.choice(["key", "imm", "tensor"]))
        if op == "mult":
            op = "add" if kind == "Exponential" else op
        step(p, rng, kind, engine, cmd, op=op, dt=dt, out_dt=out_dt, load=load)
        if rng.integers(3) == 0 or k == 9:
            p.read(engine, dtype=str(rng.choice(["float32", "bfloat16"])))
    p.check(_run(p))


def test_engines_have_separate_accumulators():
    rng = np.random.default_rng(11)
    p = Prog()
    for k in range(12):
        engine = ("DVE", "Activation", "Pool")[k % 3]
        kind = ON[engine][k % len(ON[engine])]
        step(p, rng, kind, engine, ("ZeroAccumulate", "Accumulate")[k >= 3])
    for engine in ("DVE", "Activation", "Pool"):
        p.read(engine)
    assert len({tuple(a[:P]) for a in p.acc.values()}) == 3
    p.check(_run(p))


def test_unassigned_engine_uses_the_opcodes_own_accumulator():
    """Unassigned/ALL: Activation's accumulator for Activation and its readers, DVE's for
    the rest."""
    rng = np.random.default_rng(12)
    p = Prog()
    step(p, rng, "Activation", "Activation", "ZeroAccumulate")
    step(p, rng, "TensorTensor", "DVE", "ZeroAccumulate")
    for e in ("Activation", "DVE"):
        eng = "Unassigned"
        opcode, ins, _, keys, res = GEN["Activation" if e == "Activation" else "Exponential"](
            p, rng, "float32")
        libm = opcode == "Exponential" or keys.get("func") == "Exp"
        p.add(opcode, eng, ins, [p.out(np.shape(res), "float32", res, libm)],
              acc="Accumulate", **keys)
        p.fold(e, "Accumulate", res, libm=libm)
    p.read("Activation")
    p.body[-1]["engine"] = "Unassigned"
    p.read("DVE")
    p.body[-1]["engine"] = "ALL"
    p.check(_run(p))


def test_cores_have_separate_accumulators():
    """One program per core: each core's accumulators see only its own instructions."""
    progs = []
    for core in range(2):
        rng = np.random.default_rng(20 + core)
        p = Prog(prefix="c%d_" % core)
        for k in range(3 + 2 * core):
            step(p, rng, "TensorTensor", "DVE", ("ZeroAccumulate", "Accumulate")[k > 0])
            step(p, rng, "Activation", "Activation", ("ZeroAccumulate", "Accumulate")[k > 0])
        p.read("DVE")
        p.read("Activation")
        progs.append(p)
    inputs = {**progs[0].inputs, **progs[1].inputs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        outs = birsim.Simulator(birsim.load([p.module() for p in progs])).run(inputs)
    for p in progs:
        p.check(outs)
    assert not np.array_equal(progs[0].acc["DVE"], progs[1].acc["DVE"])


def test_tensor_scalar_cache_continues_the_dve_accumulator():
    """TensorScalarCache's running value and the elementwise instructions share the
    DVE accumulator."""
    rng = np.random.default_rng(5)
    p = Prog()
    step(p, rng, "TensorTensor", "DVE", "ZeroAccumulate")
    x, dx = p.inp(_data(rng))
    scan = ref.tensor_scalar_cumulative(dx, "add", 0.0, "add", p.acc["DVE"][:P])
    p.add("TensorScalarCache", "DVE", [x], [p.out((P, 1), "float32", scan[:, -1:])],
          mode="Reduce", op0="add", op1="add", acc="Accumulate")
    p.acc["DVE"][:P] = scan[:, -1]
    step(p, rng, "Exponential", "DVE", "Accumulate")
    p.read("DVE")
    p.check(_run(p))


def test_each_run_starts_from_zero_accumulators():
    rng = np.random.default_rng(6)
    p = Prog()
    step(p, rng, "TensorTensor", "DVE", "Accumulate")
    step(p, rng, "Activation", "Activation", "Accumulate")
    p.read("DVE")
    p.read("Activation")
    sim = birsim.Simulator(p.module())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        first, second = sim.run(p.inputs), sim.run(p.inputs)
    p.check(first)
    p.check(second)


def test_results_are_folded_before_the_output_cast():
    """A bf16 output rounds each result; the accumulator folds the fp32 results."""
    x = np.full((P, F), 1.0 + 2.0 ** -10, np.float32)
    p = Prog()
    a, _ = p.inp(x)
    b, _ = p.inp(np.zeros((P, F), np.float32))
    p.add("TensorTensor", "DVE", [a, b], [p.out((P, F), "bfloat16", ref.cast(x, "bfloat16"))],
          op="add", acc="ZeroAccumulate")
    p.acc["DVE"] = ref.accumulate(p.acc["DVE"], "ZeroAccumulate", x)
    p.read("DVE")
    assert p.acc["DVE"][0] != np.float32(F)          # the bf16 outputs would sum to F
    p.check(_run(p))


def test_zero_sets_the_reduce_identity_and_idle_leaves_it():
    rng = np.random.default_rng(8)
    p = Prog()
    step(p, rng, "TensorTensor", "DVE", "ZeroAccumulate")
    step(p, rng, "TensorTensor", "DVE", "Zero", op="max")
    r0 = p.read("DVE")
    step(p, rng, "TensorTensor", "DVE", "Idle", op="max")
    r1 = p.read("DVE")
    step(p, rng, "TensorTensor", "DVE", "Zero", op="mult")
    r2 = p.read("DVE")
    outs = _run(p)
    p.check(outs)
    assert np.all(outs[r0] == -np.inf) and np.all(outs[r1] == -np.inf)
    assert np.all(outs[r2] == 1.0)


# ---- NKI usage patterns (docs/spec/nki-isa-semantics.md §3.4, §3.9, §3.18) ---------------------------

def test_nki_activation_reduce_square_rows():
    """activation_reduce(np.square, b, bias=c, scale=2.0): reduce_res = row sums of
    square(b*2 + c) (docs/spec/nki-isa-semantics.md §3.4 with §4 item 14's operands)."""
    rng = np.random.default_rng(14)
    b = rng.standard_normal((P, F)).astype(np.float32)
    c = rng.standard_normal((P, 1)).astype(np.float32)
    p = Prog()
    bo, _ = p.inp(b)
    co, _ = p.inp(c)
    y = ref.activation("Square", b, "float32", scale=2.0, bias=c)
    p.add("Activation", "Activation", [bo, imm(2.0, "float32"), co],
          [p.out((P, F), "float32", y)], func="Square", reduce_cmd="reset_reduce",
          reduce_op="add")
    p.acc["Activation"] = ref.accumulate(p.acc["Activation"], "reset_reduce", y)
    r = p.read("Activation")
    outs = _run(p)
    p.check(outs)
    np.testing.assert_allclose(outs[r][:, 0], np.square(b * 2 + c).sum(1), rtol=1e-5)


def test_nki_tensor_scalar_reduce_max():
    """tensor_scalar_reduce(data, op0=multiply, operand0, reduce_op=max): per partition
    max of data * operand0 (docs/spec/nki-isa-semantics.md §3.9)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((P, F)).astype(np.float32)
    s = rng.uniform(0.5, 2, (P, 1)).astype(np.float32)
    p = Prog()
    xo, _ = p.inp(x)
    so, _ = p.inp(s)
    y = ref.tensor_scalar(x, "mult", s, "bypass", 0.0, "float32")
    p.add("TensorScalarPtr", "DVE", [xo, so, imm(0.0, "float32")],
          [p.out((P, F), "float32", y)], op0="mult", reduce_cmd="reset_reduce",
          reduce_op="max")
    p.acc["DVE"] = ref.accumulate(p.acc["DVE"], "reset_reduce", y, "max")
    r = p.read("DVE")
    outs = _run(p)
    p.check(outs)
    np.testing.assert_array_equal(outs[r][:, 0], (x * s).max(1))


def test_nki_exponential_softmax_denominators():
    """exponential(src, max_value=rowmax, reduce_cmd=reset_reduce): the running sum is the
    softmax denominator (docs/spec/nki-isa-semantics.md §3.18)."""
    rng = np.random.default_rng(10)
    x = (3 * rng.standard_normal((P, F))).astype(np.float32)
    m = x.max(1, keepdims=True)
    p = Prog()
    xo, _ = p.inp(x)
    mo, _ = p.inp(m)
    y = ref.exponential(x, "float32", max_value=m)
    p.add("Exponential", "DVE", [xo, mo], [p.out((P, F), "float32", y, close=True)],
          reduce_cmd="reset_reduce")
    ye = p.last
    p.fold("DVE", "reset_reduce", y, libm=True)
    r = p.read("DVE")
    outs = _run(p)
    p.check(outs)
    e = np.exp(x.astype(np.float64) - m)
    np.testing.assert_allclose(outs[ye] / outs[r],
                               e / e.sum(1, keepdims=True), rtol=1e-5)


# ---- what is refused ---------------------------------------------------------------------

def _one(opcode, engine="DVE", ins=None, **keys):
    p = Prog()
    if ins is None:
        ins = [p.inp(np.ones((P, F)))[0], p.inp(np.ones((P, F)))[0]]
    p.add(opcode, engine, ins, [p.out((P, F))], **keys)
    return p


@pytest.mark.parametrize("key", ["acc", "reduce_cmd", "accumulator_cmd"])
def test_load_accumulate_without_a_start_value_is_a_program_error(key):
    p = _one("TensorTensor", op="add", **{key: "LoadAccumulate"})
    with pytest.raises(birsim.ProgramError, match="'%s'.*LoadAccumulate needs its start" % key):
        birsim.load(p.module())


def test_unknown_accumulator_command_is_a_program_error():
    with pytest.raises(birsim.ProgramError, match="reduce_cmd"):
        birsim.load(_one("TensorTensor", op="add", reduce_cmd="sometimes").module())


def test_address_alu_cannot_accumulate():
    p = Prog()
    x, _ = p.inp(np.ones((P, F)))
    p.add("TensorScalarPtr", "DVE", [x, imm(1, "int32"), imm(2, "int32")],
          [p.out((P, F), "int32")], op0="add", op1="add", is_tensor_scalar_addr=True,
          acc="ZeroAccumulate")
    with pytest.raises(birsim.ProgramError, match="is_tensor_scalar_addr.*'acc' must be Idle"):
        birsim.load(p.module())


@pytest.mark.parametrize("opcode,keys", [("TensorTensor", {"op": "bitwise_and"}),
                                         ("TensorReduce", {"op": "bitwise_or"})])
def test_bit_vector_ops_cannot_accumulate(opcode, keys):
    p = Prog()
    x, _ = p.inp(np.ones((P, F)), "int32")
    ins = [x, x] if opcode == "TensorTensor" else [x]
    shape = (P, F) if opcode == "TensorTensor" else (P, 1)
    p.add(opcode, "DVE", ins, [p.out(shape, "int32")], acc="ZeroAccumulate", **keys)
    with pytest.raises(birsim.SimulationError, match="bit-vector op cannot feed the accumulator"):
        _run(p)


@pytest.mark.parametrize("engine", ["PE", "SP"])
def test_engines_without_an_accumulator(engine):
    with pytest.raises(birsim.SimulationError, match="engine %s has no accumulator" % engine):
        _run(_one("TensorTensor", engine, op="add", acc="ZeroAccumulate"))
    p = Prog()
    p.add("DveReadAccumulator", engine, [], [p.out((P, 1))])
    with pytest.raises(birsim.SimulationError, match="engine %s has no accumulator" % engine):
        _run(p)


def test_accumulating_over_more_partitions_than_lanes():
    p = Prog()
    a, _ = p.inp(np.ones((130, 2)))
    p.add("Exponential", "DVE", [a], [p.out((130, 2))], acc="ZeroAccumulate")
    with pytest.raises(birsim.SimulationError, match="accumulating over 130 partitions"):
        _run(p)
    p = Prog()
    a, _ = p.inp(np.ones((130, 2)))
    p.add("Exponential", "DVE", [a], [p.out((130, 2))], acc="Idle")
    _run(p)                                           # Idle never touches the lanes


@pytest.mark.parametrize("op", ["add", "max", "min", "abs_max", "abs_min"])
def test_activate2_reduce_ops(op):
    """NKI activate2's stage 3 (docs/spec/nki-isa-semantics.md §3.5): reduce_op over the function's
    results; reset_reduce starts from the op's identity."""
    rng = np.random.default_rng(30 + REDUCE_OPS.index(op))
    p = Prog()
    for cmd in ("reset_reduce", "reduce", "load_reduce"):
        x, dx = p.inp(_data(rng))
        y = ref.activate2("Identity", dx, "float32", op0="mult", imm0=1.5, op1="subtract",
                          imm1=0.25)
        start = float(rng.uniform(-3, 3))
        p.add("Activation", "Activation", [x, imm(1.5, "float32"), imm(0.25, "float32")],
              [p.out((P, F), "float32", y)], func="Identity", is_activate2=True,
              op0="mult", op1="subtract", reduce_cmd=cmd, reduce_op=op, reduce_init=start)
        p.fold("Activation", cmd, y, op, start)
        p.read("Activation")
    p.check(_run(p))
