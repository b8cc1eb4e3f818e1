"""The dispatch fast path (issue 24) gives exactly what the general step machine gives.

A run nothing hooks (no checker, register checker, timing model or trace, breakpoint,
deferred DMA, exploration) on one core steps with the plain machine: the same C source as
the general one with every "is X on?" test folded away, a run loop without per-step
rounds, and an integer-only RegisterAlu. Each test here runs a program on that path and
again on the general one and compares everything a run leaves behind: outputs, every
engine's register files, step and opcode counts, warnings, errors (step limit, deadlock,
arithmetic) and the step count at every budget boundary; references are computed in
Python/NumPy. A breakpoint table with no breakpoint set selects the general machine
without changing what a run does. No timings: bench/bench_control_flow.py measures speed.
"""

import json
import os
import warnings

import numpy as np
import pytest

import birsim
from birsim import DeadlockError, SimulationError, StepLimitError

from bir import (affine, ap, block, do_while, dyn_loop, function, imm, insn, iv, loop,
                 module, reg, register, rv, tensor)
from _sync_programs import evt_set, evt_wait, nop, sem_wait

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
ENGINES = ("Pool", "Activation", "PE", "DMA", "DVE", "SP")


# ---- the two machines ------------------------------------------------------------------

def general(sim):
    """Make `sim` step with the general machine from now on: an empty breakpoint table
    (bs_sim_plain is false while one exists) stops nothing and changes no result."""
    sim._arm()
    sim._sim.set_breaks(bytes(len(sim.module.tables["insns"])), False)
    return sim


def outcome(sim, inputs=None, regs=()):
    """Everything one run leaves behind (an error as its type and message)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = sim.run(inputs or {})
            err = None
        except birsim.BirsimError as e:
            out, err = {}, (type(e).__name__, str(e))
    return {"out": {k: v.tobytes() for k, v in out.items()}, "err": err,
            "stats": dict(sim.stats), "warnings": list(sim.warnings),
            "regs": {(r, e): sim.register(r, engine=e) for r in regs for e in (None,) + ENGINES}}


def both(prog, inputs=None, regs=(), **opts):
    """outcome() on the plain machine and on the general one (fresh Simulators; each
    run twice, so the second run after a reset is compared too)."""
    fast = birsim.Simulator(prog, **opts)
    slow = general(birsim.Simulator(prog, **opts))
    a = [outcome(fast, inputs, regs) for _ in range(2)]
    b = [outcome(slow, inputs, regs) for _ in range(2)]
    assert a == b
    return a[0]


# ---- programs --------------------------------------------------------------------------

def i32_out(name, n=1):
    return tensor(name, "ExternalOutput", "int32", [1, n], "DRAM")


def save(name, r, loc, k=0, engine="Pool"):
    return insn(name, "TensorSave", engine, ins=[reg(r)],
                outs=[ap(loc, [[1, 1], [1, 1]], "int32", offset=k or None)])


def setr(name, r, value, dtype="int32", engine="Pool"):
    return insn(name, "RegisterMove", engine, ins=[imm(value, dtype)], outs=[reg(r)])


def alu(name, op, out, a, b, engine="Pool", dtype="int32", **keys):
    def opnd(x):
        return imm(x, dtype) if isinstance(x, (int, float)) else reg(x)
    return insn(name, "RegisterAlu", engine, ins=[opnd(a), opnd(b)], outs=[reg(out)], op=op,
                **keys)


def counter_loop(trips, engine="Pool"):
    """r := 0; Loop trips { r := r + 1 }; o := r  (bench_control_flow's loop), every
    instruction on `engine` (registers are per engine)."""
    return module([function("main", [i32_out("o"), register("r")], [
        setr("r0", "r", 0, engine=engine),
        loop("L", "i", 0, trips, 1, [alu("inc", "add", "r", "r", 1, engine=engine)]),
        save("s", "r", "o", engine=engine)])])


# ---- register loops ----------------------------------------------------------------------

@pytest.mark.parametrize("trips", [0, 1, 2, 63, 64, 65, 1000])
@pytest.mark.parametrize("engine", ["Pool", "SP"])
def test_counter_loop_same_on_both_machines(trips, engine):
    """The bench's loop: the count, every engine's file, steps (one per instruction and
    per loop trip) and opcode counts agree, and match the arithmetic."""
    res = both(counter_loop(trips, engine), regs=("r",))
    assert res["err"] is None
    assert np.frombuffer(res["out"]["o"], np.int32)[0] == trips
    assert res["regs"][("r", engine)] == trips and res["regs"][("r", None)] == trips
    assert res["stats"]["opcodes"].get("RegisterAlu", 0) == trips
    assert res["stats"]["instructions"] == trips + 3
    assert res["stats"]["steps"] == 2 * trips + 3


@pytest.mark.parametrize("schedule", ["in_order", "round_robin", "random"])
def test_several_cores_same_on_both_machines(schedule):
    """Several cores step one instruction at a time on either machine (the plain one
    without its hook tests): the same interleaving, outputs and counts per schedule."""
    res = both(counter_loop(40), regs=("r",), cores=3, schedule=schedule, seed=5)
    assert res["err"] is None
    assert res["regs"][("r", None)] == 40
    assert res["stats"]["steps"] == 3 * (2 * 40 + 3)


def test_several_cores_synced_same_on_both_machines():
    """The synchronised pipeline example on two cores (each its own copy: waits, updates
    and kernels interleaved one instruction at a time): the same on both machines."""
    with open(os.path.join(EXAMPLES, "sync_pipeline.json")) as fh:
        prog = json.load(fh)
    mod = birsim.load(prog)
    inputs = {t.name: np.random.default_rng(3).random(t.shape).astype(
        birsim.dtypes.numpy_dtype(t.dtype)) for t in mod.inputs}
    res = both(mod, inputs, cores=2)
    assert res["err"] is None


def test_nested_loops_and_do_while_same_on_both_machines():
    """Loops in loops (each trip a step) and a DoWhile counting down: acc = sum of
    i * j plus the DoWhile's trips."""
    n, m, k = 5, 7, 4
    prog = module([function("main", [i32_out("o", 2), register("acc"), register("c"),
                                     register("i"), register("j"), register("t")], [
        setr("a0", "acc", 0), setr("i0", "i", 0), setr("c0", "c", k),
        loop("Li", "x", 0, n, 1, [
            setr("j0", "j", 0),
            loop("Lj", "y", 0, m, 1, [
                insn("acc_ij", "RegisterAlu", "Pool", ins=[reg("i"), reg("j")],
                     outs=[reg("t")], op="mult"),
                insn("acc_add", "RegisterAlu", "Pool", ins=[reg("acc"), reg("t")],
                     outs=[reg("acc")], op="add"),
                alu("jinc", "add", "j", "j", 1)]),
            alu("iinc", "add", "i", "i", 1)]),
        do_while("D", "c", [alu("dec", "subtract", "c", "c", 1),
                            alu("one", "add", "acc", "acc", 1)]),
        save("s", "acc", "o"), save("s2", "c", "o", 1)])])
    res = both(prog, regs=("acc", "c", "t"))
    assert res["err"] is None
    ref = sum(i * j for i in range(n) for j in range(m)) + k
    assert list(np.frombuffer(res["out"]["o"], np.int32)) == [ref, 0]


def save_at(name, r, loc, axis, engine="Pool"):
    """loc[0, axis] := register r (the loop index in the address)."""
    return insn(name, "TensorSave", engine, ins=[reg(r)],
                outs=[ap(loc, [[1, 1], [1, 1]], "int32", offset=affine([(iv(axis), 1)]))])


@pytest.mark.parametrize("kind", ["static", "dynamic"])
def test_loop_index_in_addresses_same_on_both_machines(kind):
    """A one-block body that writes o[i] := 3 * i + 1 each trip (the trip's loop index
    reaches the address through the axis slot), in a static Loop and a DynamicForLoop
    whose bound is a register."""
    n = 9
    body = [alu("a", "add", "r", "r", 3), save_at("s", "r", "o", "i")]
    lp = (loop("L", "i", 0, n, 1, body) if kind == "static"
          else dyn_loop("L", "i", 0, affine([(rv("n"), 1)]), 1, body))
    prog = module([function("main", [i32_out("o", n), register("r"), register("n")], [
        setr("r0", "r", -2), setr("n0", "n", n), lp])])
    res = both(prog, regs=("r", "n"))
    assert res["err"] is None
    assert list(np.frombuffer(res["out"]["o"], np.int32)) == [3 * i + 1 for i in range(n)]


def test_loop_bodies_that_leave_the_trip_shortcut_same_on_both_machines():
    """Bodies the one-block trip shortcut must not take: a plain body while an event
    set before the loop is still set (each trip's block end warns of it), a body that
    sets and consumes an event, a two-block body, and a Break on trip 5 (o[0] counts
    the trips run, o[1] the two-block trips)."""
    prog = module([function("main", [i32_out("o", 3), register("r"), register("q"),
                                     register("s")], [
        setr("r0", "r", 0), setr("q0", "q", 0), setr("s0", "s", 0),
        nop("early", "DVE", [], [evt_set(9)]),
        loop("L0", "h", 0, 3, 1, [alu("h", "add", "r", "r", 0)]),
        nop("late", "Pool", [evt_wait(9)]),
        loop("L1", "i", 0, 6, 1, [nop("set", "DVE", [], [evt_set(4)]),
                                  nop("get", "Pool", [evt_wait(4)]),
                                  alu("a", "add", "r", "r", 1)]),
        loop("L2", "j", 0, 5, 1, [block("c0", alu("b", "add", "q", "q", 2)),
                                  block("c1", alu("c", "add", "q", "q", 1))]),
        loop("L3", "k", 0, 50, 1, [
            block("t", insn("cmp", "CompareAndBranch", "Pool", ins=[reg("s"), imm(5, "int32")],
                            comp_op="IS_EQIMM", on_true="stop", on_false="go")),
            block("stop", insn("brk", "Break", "Pool")),
            block("go", alu("d", "add", "s", "s", 1))]),
        save("o0", "r", "o"), save("o1", "q", "o", 1), save("o2", "s", "o", 2)])])
    res = both(prog, regs=("r", "q", "s"))
    assert res["err"] is None
    assert list(np.frombuffer(res["out"]["o"], np.int32)) == [6, 15, 5]
    assert sum("event 9 still set" in w for w in res["warnings"]) >= 3


@pytest.mark.parametrize("example", ["branch_ladder.json", "call_twice.json",
                                     "dynamic_add.json", "halving_do_while.json",
                                     "tiled_matmul.json", "sync_pipeline.json",
                                     "moe_dispatch.json"])
def test_examples_same_on_both_machines(example):
    """The control-flow examples (branches, calls, dynamic loops, DoWhile, a synced
    pipeline, a multi-block dispatch) on random inputs of their declared dtypes."""
    with open(os.path.join(EXAMPLES, example)) as fh:
        prog = json.load(fh)
    mod = birsim.load(prog)
    rng = np.random.default_rng(7)
    inputs = {}
    for t in mod.inputs:
        dt = birsim.dtypes.numpy_dtype(t.dtype)
        if np.issubdtype(dt, np.integer):
            inputs[t.name] = rng.integers(0, 4, t.shape).astype(dt)
        else:
            inputs[t.name] = rng.random(t.shape).astype(dt)
    res = both(mod, inputs)
    assert res["stats"]["instructions"] > 0


# ---- RegisterAlu: the integer path and the mixed (float) one -----------------------------

def _wrap(v, bits, signed):
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def _ref_int(op, x, y, is64):
    """RegisterAlu's integer semantics (docs/spec/nki-isa-semantics.md), in Python."""
    if op == "add":
        r = x + y
    elif op == "subtract":
        r = x - y
    elif op == "mult":
        r = x * y
    elif op == "divide":
        r = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
    elif op == "mod":
        r = x - (abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)) * y
    elif op == "max":
        r = max(x, y)
    elif op == "min":
        r = min(x, y)
    elif op == "is_lt":
        r = int(x < y)
    elif op == "not_equal":
        r = int(x != y)
    elif op == "bitwise_xor":
        r = x ^ y
    elif op == "logical_shift_left":
        r = x << y if 0 <= y <= 63 else 0
    elif op == "arith_shift_right":
        r = x >> y if 0 <= y <= 63 else (-1 if x < 0 else 0)
    else:
        raise AssertionError(op)
    r = _wrap(r, 64, True)
    return r if is64 else _wrap(r, 32, True)


INT_OPS = ["add", "subtract", "mult", "divide", "mod", "max", "min", "is_lt", "not_equal",
           "bitwise_xor", "logical_shift_left", "arith_shift_right"]


@pytest.mark.parametrize("op", INT_OPS)
@pytest.mark.parametrize("x,y", [(7, 3), (-7, 3), (2**31 - 1, 5), (-(2**31), 3), (-7, -3),
                                 (100, -3)])
@pytest.mark.parametrize("rdtype,is64", [("int32", None), ("int64", True), ("uint32", None)])
def test_integer_alu_same_on_both_machines(op, x, y, rdtype, is64):
    """Registers of each integer dtype, an immediate and a register operand: the raw
    register bits agree and the int32 ones match the Python reference."""
    if rdtype == "uint32":
        x, y = x & 0xFFFFFFFF, y & 0xFFFFFFFF
    prog = module([function("main", [i32_out("o"), register("a", rdtype),
                                     register("b", rdtype), register("r", rdtype)], [
        insn("ma", "RegisterMove", "Pool", ins=[imm(x, rdtype)], outs=[reg("a")]),
        insn("mb", "RegisterMove", "Pool", ins=[imm(y, rdtype)], outs=[reg("b")]),
        insn("op", "RegisterAlu", "Pool", ins=[reg("a"), reg("b")], outs=[reg("r")], op=op,
             **({"is_64bit": is64} if is64 else {})),
        insn("op2", "RegisterAlu", "Pool", ins=[reg("r"), imm(y, rdtype)], outs=[reg("r")],
             op=op, **({"is_64bit": is64} if is64 else {}))])])
    res = both(prog, regs=("a", "b", "r"))
    assert res["err"] is None
    if rdtype == "int32":
        want = _ref_int(op, _ref_int(op, x, y, False), y, False)
        assert _wrap(res["regs"][("r", None)], 32, True) == want
    if rdtype == "int64":
        want = _ref_int(op, _ref_int(op, x, y, True), y, True)
        assert _wrap(res["regs"][("r", None)], 64, True) == want


@pytest.mark.parametrize("as_dtype,want", [("uint32", 2**32 - 5 + 3), ("int32", -5 + 3)])
def test_operand_dtype_reads_the_register_as_that_dtype(as_dtype, want):
    """A register operand with its own dtype: an int32 register holding -5 read as
    uint32 (or int32), plus 3, in a 64-bit RegisterAlu into an int64 register."""
    prog = module([function("main", [i32_out("o"), register("a"), register("w", "int64")], [
        insn("ma", "RegisterMove", "Pool", ins=[imm(-5, "int32")], outs=[reg("a")]),
        insn("op", "RegisterAlu", "Pool", ins=[reg("a", as_dtype), imm(3, "int32")],
             outs=[reg("w")], op="add", is_64bit=True)])])
    res = both(prog, regs=("a", "w"))
    assert res["err"] is None
    assert _wrap(res["regs"][("w", None)], 64, True) == want


@pytest.mark.parametrize("a_dtype,b", [("float32", 1.5), ("int32", 2.25), ("float32", 3)])
def test_float_alu_same_on_both_machines(a_dtype, b):
    """A float32 register or a float immediate takes the mixed path: the same bits on
    both machines, and fp32 arithmetic (NumPy) in a float32 register."""
    prog = module([function("main", [i32_out("o"), register("a", a_dtype),
                                     register("f", "float32")], [
        insn("ma", "RegisterMove", "Pool", ins=[imm(5, a_dtype)], outs=[reg("a")]),
        insn("op", "RegisterAlu", "Pool",
             ins=[reg("a"), imm(b, "float32" if isinstance(b, float) else "int32")],
             outs=[reg("f")], op="add")])])
    res = both(prog, regs=("a", "f"))
    assert res["err"] is None
    got = np.array([res["regs"][("f", None)]], np.uint32).view(np.float32)[0]
    assert got == np.float32(5) + np.float32(b)


# ---- errors: where they happen, what they say -------------------------------------------

@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 99, 100, 101, 102, 203, 204])
def test_step_limit_same_on_both_machines(limit):
    """max_steps inside and around a 50-trip loop: the same StepLimitError (or none)
    at the same step, whatever the machine."""
    res = both(counter_loop(50), regs=("r",), max_steps=limit)
    total = 2 * 50 + 3
    if limit < total:
        assert res["err"][0] == StepLimitError.__name__
        assert f"step limit of {limit} reached" in res["err"][1]
        assert res["stats"]["steps"] == limit + 1
    else:
        assert res["err"] is None


def test_deadlock_same_on_both_machines():
    """One core whose loop body waits on a semaphore nothing raises: the same
    DeadlockError report (waits, last instructions) from both machines."""
    prog = module([function("main", [i32_out("o"), register("r")], [
        setr("r0", "r", 0),
        loop("L", "i", 0, 10, 1, [alu("inc", "add", "r", "r", 1),
                                  nop("w", "DVE", [sem_wait(3, 1)])]),
        save("s", "r", "o")])])
    res = both(prog, regs=("r",))
    assert res["err"][0] == DeadlockError.__name__
    assert res["regs"][("r", "Pool")] == 1


def test_arithmetic_error_same_on_both_machines():
    """A divide by a register that reaches zero on trip 3: the same error naming the
    instruction, at the same step."""
    prog = module([function("main", [i32_out("o"), register("d"), register("q")], [
        setr("d0", "d", 3), setr("q0", "q", 100),
        loop("L", "i", 0, 10, 1, [alu("div", "divide", "q", "q", "d"),
                                  alu("dec", "subtract", "d", "d", 1)]),
        save("s", "q", "o")])])
    res = both(prog, regs=("d", "q"))
    assert issubclass(getattr(birsim.errors, res["err"][0]), SimulationError)
    assert "by zero" in res["err"][1] and "'div'" in res["err"][1]
    assert res["regs"][("q", None)] == 100 // 3 // 2 // 1


# ---- slices: the same step count at every budget boundary --------------------------------

@pytest.mark.parametrize("budget", [1, 2, 3, 7, 64, 65])
def test_budget_boundaries_same_on_both_machines(budget):
    """bs_sim_run in slices of `budget` steps (the debugger's advance()): after every
    slice both machines have made the same number of steps and agree on finishing."""
    def slices(sim):
        sim.start()
        seen = []
        while True:
            finished, _, _ = sim._sim.advance(sim._host, budget)
            seen.append((bool(finished), sim._sim.stats()[2]))
            if finished:
                return seen, sim.register("r")
    prog = counter_loop(40)
    a = slices(birsim.Simulator(prog))
    b = slices(general(birsim.Simulator(prog)))
    assert a == b
    assert a[1] == 40 and a[0][-1][1] == 2 * 40 + 3


# ---- checkers and traces -----------------------------------------------------------------

def test_checkers_and_trace_see_the_same_run():
    """checks="all" and trace=True take the general machine: their outputs, registers and
    counts equal the plain run's, and the trace lists every executed instruction."""
    prog = counter_loop(30)
    plain = outcome(birsim.Simulator(prog), regs=("r",))
    checked = outcome(birsim.Simulator(prog, checks="all"), regs=("r",))
    traced_sim = birsim.Simulator(prog, trace=True)
    traced = outcome(traced_sim, regs=("r",))
    traced_checked_sim = birsim.Simulator(prog, trace=True, checks="all")
    outcome(traced_checked_sim, regs=("r",))
    for other in (checked, traced):
        assert other["out"] == plain["out"] and other["regs"] == plain["regs"]
        assert other["stats"] == plain["stats"] and other["err"] is None
    assert len(traced_sim.trace) == plain["stats"]["instructions"]
    a = [tuple(e) for e in traced_sim.trace]
    b = [tuple(e) for e in traced_checked_sim.trace]
    assert a == b


@pytest.mark.parametrize("trips", [1, 2, 5, 40])
def test_empty_loop_body_same_on_both_machines(trips):
    """A Loop whose one body block holds no instruction (found by the CI fuzz pass: the
    trip shortcut ran 'instruction 0' of the empty block, a read past the program)."""
    prog = module([function("main", [i32_out("o"), register("r")], [
        setr("r0", "r", 7),
        insn("L", "Loop", "Unassigned", LoopAxis={"name": "i", "lb": 0, "ub": trips,
                                                  "stride": 1},
             blocks=[{"name": "empty", "instructions": []}]),
        save("s", "r", "o")])])
    res = both(prog, regs=("r",))
    assert res["err"] is None
    assert list(np.frombuffer(res["out"]["o"], np.int32)) == [7]
    assert res["stats"]["instructions"] == 3
