"""The VM side of the compiler-dump contract (issue 8, points 2-4; docs/spec/BIR-JSON.md and
docs/spec/compiler-dumps.md): instruction names are labels (identified by function, block and
position), several terminators per block (one per engine), per-engine register files.

Programs are built in the compiler's shape as far as control flow goes (lowered loops: no
Loop instruction, a body block ending with one CompareAndBranch per engine whose on_true
is the body itself; loop-counter increments named like the compiler's
``scf.for-Inc_inst__I-10-0-<Engine>0``; names repeated across blocks). Each test states
its exact expected output and shows what the wrong reading would give.
"""

import re

import numpy as np
import pytest

import birsim
from birsim import DeadlockError, MemoryAccessError, ProgramError, SimulationError
from bir import (affine, ap, block, dma_block, dma_queue, dyn_loop, function, imm, insn,
                 loop, module, reg, reg_ap, register, rv, sync_info, tensor, update, wait)
from _sync_programs import blocked_entries

ENGINES3 = ("Pool", "Activation", "DVE")


def elem(loc, k, dtype="int32"):
    """The single element k of a [1, n] tensor."""
    return ap(loc, [[1, 1], [1, 1]], dtype, offset=k)


def at_reg(loc, n, r, dtype="int32"):
    """The single element r (a register's value) of a [1, n] tensor."""
    return reg_ap(loc, [[n, 1], [1, 1]], r, 0, dtype)


def out_i32(name, n):
    return tensor(name, "ExternalOutput", "int32", [1, n], "DRAM")


def run(prog, inputs=None, **kw):
    sim = birsim.Simulator(prog, **kw)
    return sim.run(inputs or {}), sim


# ==== a lowered loop: three engines, three copies of the counter ====================

def lowered_loop(n, step=(1, 1, 1)):
    """sg0000: entry -> body (n trips) -> exit, as the compiler lowers a loop. Each of
    Pool, Activation and DVE initialises, increments (by ``step[e]``) and tests its own
    copy of ``cnt``; per trip Pool writes o[cnt] := cnt and DVE writes d[cnt] := cnt * 10,
    both addressed by register_ap through the writing engine's copy of the counter."""
    inc = [insn("scf.for-Inc_inst__I-10-0-%s0" % e, "RegisterAlu", e,
                ins=[reg("cnt"), imm(s, "int32")], outs=[reg("cnt")], op="add")
           for e, s in zip(ENGINES3, step)]
    cond = [insn("scf.for-Cond-%s0" % e, "CompareAndBranch", e,
                 ins=[reg("cnt"), imm(n, "int32")], comp_op="IS_LTIMM",
                 on_true="body", on_false="exit") for e in ENGINES3]
    body = block("body",
                 insn("save", "TensorSave", "Pool", ins=[reg("cnt")], outs=[at_reg("o", n, "cnt")]),
                 insn("ten", "RegisterAlu", "DVE", ins=[reg("cnt"), imm(10, "int32")],
                      outs=[reg("t")], op="mult"),
                 insn("save", "TensorSave", "DVE", ins=[reg("t")], outs=[at_reg("d", n, "cnt")]),
                 *inc,
                 insn("barrier", "AllEngineBarrier", "ALL"),
                 *cond)
    entry = block("entry", *[insn("scf.for-Init-%s0" % e, "RegisterMove", e,
                                  ins=[imm(0, "int32")], outs=[reg("cnt")]) for e in ENGINES3])
    exit_ = block("exit", *[insn("final", "TensorSave", e, ins=[reg("cnt")],
                                 outs=[elem("f", k)]) for k, e in enumerate(ENGINES3)])
    return module([function("sg0000", [out_i32("o", n), out_i32("d", n), out_i32("f", 3),
                                       register("cnt"), register("t")],
                            [entry, body, exit_])])


def lowered_loop_model(n, shared):
    """What the lowered loop computes when registers are per engine (shared=False) or
    one cell shared by the engines (shared=True): (trips, o, d, f). Unwritten = None."""
    files = {e: 0 for e in ENGINES3}
    o, d, trips = [None] * n, [None] * n, 0
    while True:
        trips += 1
        pool = files["Pool"]
        o[pool] = pool
        dve = files["DVE"]
        d[dve] = dve * 10
        for e in ENGINES3:
            if shared:
                for k in files:
                    files[k] += 1
            else:
                files[e] += 1
        if not files["Pool"] < n:
            break
    return trips, o, d, [files[e] for e in ENGINES3]


@pytest.mark.parametrize("schedule", ["in_order", "round_robin", "random"])
def test_lowered_loop_runs_n_trips_with_one_counter_per_engine(schedule):
    n = 6
    out, sim = run(lowered_loop(n), schedule=schedule, seed=3, trace=True)
    np.testing.assert_array_equal(out["o"], [list(range(n))])
    np.testing.assert_array_equal(out["d"], [[10 * k for k in range(n)]])
    np.testing.assert_array_equal(out["f"], [[n, n, n]])
    incs = [e for e in sim.trace if e.instruction.startswith("scf.for-Inc")]
    assert len(incs) == 3 * n                               # exactly n trips
    assert {(e.block, e.position, e.engine) for e in incs} == {
        ("body", 3, "Pool"), ("body", 4, "Activation"), ("body", 5, "DVE")}
    for e in ENGINES3:
        assert sim.register("cnt", engine=e) == n
    assert sim.register("cnt") == n                        # most recent
    # The same program read with one shared cell would run 2 trips, writing o[0], o[3]:
    trips, o, d, f = lowered_loop_model(n, shared=True)
    assert trips == 2 and o[1] is None and f == [6, 6, 6]
    assert lowered_loop_model(n, shared=False) == (n, list(range(n)),
                                                   [10 * k for k in range(n)], [n, n, n])
    assert sim.stats["opcodes"]["CompareAndBranch"] == 3 * n


def test_lowered_loop_with_counters_that_diverge_is_a_disagreement():
    """DVE counts by 2: after trip 3 its copy is 6 (exit) while Pool's is 3 (body): the
    block's terminators disagree, a SimulationError naming both and both targets."""
    with pytest.raises(SimulationError) as ei:
        run(lowered_loop(6, step=(1, 1, 2)))
    e, msg = ei.value, str(ei.value)
    assert (e.function, e.block) == ("sg0000", "body")
    assert (e.instruction, e.position) in (("scf.for-Cond-DVE0", 9), ("scf.for-Cond-Pool0", 7),
                                           ("scf.for-Cond-Activation0", 8))
    assert "terminators of one block disagree" in msg
    assert "block 'exit'" in msg and "block 'body'" in msg
    names = re.findall(r"position (\d+), instruction '([^']*)'", msg)
    assert ("9", "scf.for-Cond-DVE0") in names
    assert len(names) == 2 and names[0] != names[1]
    assert msg.count("function 'sg0000', block 'body'") == 2     # both instructions


# ==== names are labels ==============================================================

def repeated_name_prog(bad_block, bad_pos):
    """Three blocks holding the same instruction names ("tile_copy" twice per block);
    the copy at (bad_block, bad_pos) reads past the end of its tensor."""
    blocks = []
    for b in ("t0", "t1", "t2"):
        ins = []
        for pos in range(2):
            off = 7 if (b, pos) == (bad_block, bad_pos) else pos
            ins.append(insn("tile_copy", "TensorCopy", "DVE",
                            ins=[ap("x", [[4, 1], [1, 2]], "int32", offset=off)],
                            outs=[ap("o", [[4, 1], [1, 2]], "int32", offset=2 * pos)]))
        blocks.append(block(b, *ins))
    return module([function("sg0000", [tensor("x", "ExternalInput", "int32", [1, 4], "DRAM"),
                                       out_i32("o", 4)], blocks)])


@pytest.mark.parametrize("where", [("t0", 0), ("t1", 1), ("t2", 0)])
def test_repeated_names_load_and_errors_name_the_position(where):
    x = np.array([[1, 2, 3, 4]], np.int32)
    out, _ = run(repeated_name_prog(None, None), {"x": x})      # repeats load and run
    np.testing.assert_array_equal(out["o"], [[1, 2, 2, 3]])
    with pytest.raises(MemoryAccessError) as ei:
        run(repeated_name_prog(*where), {"x": x})
    e = ei.value
    assert (e.function, e.block, e.position, e.instruction) == ("sg0000", *where, "tile_copy")
    assert e.operand == "ins[0]"
    # the location is in the message exactly once, with the position
    msg = str(e)
    assert msg.count("instruction 'tile_copy'") == 1
    assert "function 'sg0000', block '%s', position %d, instruction 'tile_copy' (TensorCopy)" \
        % where in msg


def test_trace_identifies_repeated_names_by_block_and_position():
    _, sim = run(repeated_name_prog(None, None), {"x": np.zeros((1, 4), np.int32)}, trace=True)
    assert [(e.function, e.block, e.position, e.instruction) for e in sim.trace] == [
        ("sg0000", b, p, "tile_copy") for b in ("t0", "t1", "t2") for p in (0, 1)]
    assert [e[:4] for e in sim.trace][0] == (0, "DVE", "tile_copy", "TensorCopy")


def test_listing_prints_positions_and_names():
    text = birsim.load(repeated_name_prog(None, None)).listing()
    assert text.count("[0] tile_copy: DVE TensorCopy") == 3
    assert text.count("[1] tile_copy: DVE TensorCopy") == 3


def test_deadlock_report_names_positions_of_repeated_names():
    prog = module([function("sg0000", [], [block("b0",
        insn("wait-x", "NoOp", "Pool", sync=sync_info([wait(1)])),
        insn("wait-x", "NoOp", "DVE", sync=sync_info([wait(2)])))])])
    with pytest.raises(DeadlockError) as ei:
        run(prog)
    entries = blocked_entries(str(ei.value))
    assert [(x["engine"], x["block"], x["position"], x["instruction"]) for x in entries] == [
        ("Pool", "b0", 0, "wait-x"), ("DVE", "b0", 1, "wait-x")]
    assert ei.value.position == 0 and ei.value.block == "b0"


def test_dma_trigger_cursors_belong_to_the_instruction_not_its_name():
    """Two DMATriggers named alike (in two blocks) list the same blocks [A, B]. Each has
    its own cursor, so each fires A: o = x. Keyed by name, the second would fire B (o = y)."""
    cp = lambda n, src: insn(n, "DMACopy", "DMA", ins=[ap(src, [[4, 1], [1, 4]], "int32")],
                             outs=[ap("o", [[4, 1], [1, 4]], "int32")])
    q = dma_queue("q", [dma_block("A", cp("dA", "x")), dma_block("B", cp("dB", "y"))])
    trig = lambda: insn("trig", "DMATrigger", "Pool", queue="q", dma_blocks=["A", "B"])
    prog = module([function("sg0000", [tensor("x", "ExternalInput", "int32", [1, 4], "DRAM"),
                                       tensor("y", "ExternalInput", "int32", [1, 4], "DRAM"),
                                       out_i32("o", 4)],
                            [block("b0", trig()), block("b1", trig())])], dma_queues=[q])
    x, y = np.arange(4, dtype=np.int32)[None], np.arange(10, 14, dtype=np.int32)[None]
    out, sim = run(prog, {"x": x, "y": y}, trace=True)
    np.testing.assert_array_equal(out["o"], x)
    assert [(e.block, e.instruction) for e in sim.trace] == [
        ("b0", "trig"), ("A", "dA"), ("b1", "trig"), ("A", "dA")]


def test_error_location_is_attached_once():
    """A strict-mode TensorLoad of never-written memory used to print its location twice;
    an error raised while nesting regions too deep printed none."""
    prog = module([function("main", [tensor("t", "Internal", "int32", [1, 4], "DRAM"),
                                     register("r")],
                            [block("b0", insn("n", "NoOp", "Pool"),
                                   insn("ld", "TensorLoad", "Pool", ins=[elem("t", 1)],
                                        outs=[reg("r")]))])])
    with pytest.raises(MemoryAccessError) as ei:
        run(prog, strict=True)
    msg = str(ei.value)
    assert msg.count("function 'main'") == 1 and msg.count("instruction 'ld'") == 1
    assert msg.startswith("function 'main', block 'b0', position 1, instruction 'ld' "
                          "(TensorLoad): ins[0] reads never-written bytes of 't'")
    assert (ei.value.block, ei.value.position, ei.value.instruction) == ("b0", 1, "ld")
    with pytest.warns(birsim.BirsimWarning):
        _, sim = run(prog)                  # as a warning: located once too
    assert sim.warnings == ["function 'main', block 'b0', position 1, instruction 'ld' "
                            "(TensorLoad): ins[0] reads never-written bytes of 't'"]


def test_nesting_too_deep_names_the_loop():
    depth = 256                              # the documented frame limit, plus the entry
    body = [insn("c", "NoOp", "DVE")]
    for d in range(depth):
        body = [loop("L%d" % d, "i%d" % d, 0, 1, 1, [block("lb%d" % d, *body)])]
    prog = module([function("main", [], [block("b0", *body)])])
    with pytest.raises(SimulationError) as ei:
        run(prog)
    e = ei.value
    assert (e.function, e.block, e.position, e.instruction) == ("main", "lb1", 0, "L0")
    assert str(e) == ("function 'main', block 'lb1', position 0, instruction 'L0' (Loop): "
                      "nesting deeper than 256 regions")


def test_two_cores_prefix_the_core_once():
    prog = repeated_name_prog("t1", 0)
    with pytest.raises(MemoryAccessError) as ei:
        run(prog, {"x": np.zeros((1, 4), np.int32)}, cores=2)
    assert str(ei.value).startswith("core 0, function 'sg0000', block 't1', position 0, ")
    assert ei.value.core == 0


# ==== several terminators ===========================================================

def test_terminators_run_in_their_engine_queue_and_the_successor_waits_for_all():
    """Pool's branch (to b2, skipping b1) runs before DVE's waiter -- it is at the head of
    Pool's queue, and its update is what the waiter needs; as a rendezvous (the old
    reading) it would wait for the waiter: deadlock. b2 starts only after the waiter ran."""
    prog = module([function("main", [out_i32("o", 2)], [
        block("b0", insn("w", "Memset", "DVE", outs=[elem("o", 0)], constant=5,
                         sync=sync_info([wait(1)])),
              insn("br", "UnconditionalBranch", "Pool", target="b2",
                   sync=sync_info([], [update(1)]))),
        block("b1", insn("bad", "Memset", "DVE", outs=[elem("o", 1)], constant=99)),
        block("b2", insn("good", "Memset", "Pool", outs=[elem("o", 1)], constant=7))])])
    for schedule in ("in_order", "round_robin", "random"):
        out, sim = run(prog, trace=True, schedule=schedule)
        np.testing.assert_array_equal(out["o"], [[5, 7]])
        assert [e.instruction for e in sim.trace] == ["br", "w", "good"]


def test_agreeing_terminators_on_engines_and_the_rendezvous():
    prog = module([function("main", [out_i32("o", 1)], [
        block("b0", insn("n", "NoOp", "SP"),
              insn("j", "UnconditionalBranch", "Pool", target="b2"),
              insn("j", "UnconditionalBranch", "Unassigned", target="b2"),
              insn("j", "UnconditionalBranch", "DVE", target="b2")),
        block("b1", insn("bad", "Memset", "DVE", outs=[elem("o", 0)], constant=1)),
        block("b2", insn("good", "Memset", "DVE", outs=[elem("o", 0)], constant=2))])])
    out, _ = run(prog)
    np.testing.assert_array_equal(out["o"], [[2]])


@pytest.mark.parametrize("other,text", [
    (insn("r", "Return", "DVE"), "Return"),
    (insn("x", "Exit", "DVE"), "Exit"),
    (insn("u", "UnconditionalBranch", "DVE", target="b1"), "block 'b1'")])
def test_disagreeing_terminators_name_both_instructions_and_choices(other, text):
    prog = module([function("main", [out_i32("o", 1)], [
        block("b0", insn("m", "Memset", "Pool", outs=[elem("o", 0)], constant=1),
              insn("j", "UnconditionalBranch", "Pool", target="b2"), other),
        block("b1", insn("n1", "NoOp", "DVE")),
        block("b2", insn("n2", "NoOp", "DVE"))])])
    with pytest.raises(SimulationError) as ei:
        run(prog)
    msg = str(ei.value)
    assert ei.value.position == 2 and ei.value.instruction == other["name"]
    assert msg == ("function 'main', block 'b0', position 2, instruction '%s' (%s): "
                   "terminators of one block disagree: this one chose %s, but function "
                   "'main', block 'b0', position 1, instruction 'j' (UnconditionalBranch) "
                   "chose block 'b2'" % (other["name"], other["opcode"], text))


def test_break_counts_as_a_choice():
    body = [block("lb", insn("m", "Memset", "Pool", outs=[elem("o", 0)], constant=3),
                  insn("brk", "Break", "Pool"), insn("brk", "Break", "DVE"))]
    prog = module([function("main", [out_i32("o", 1)],
                            [block("b0", loop("L", "i", 0, 5, 1, body))])])
    out, sim = run(prog, trace=True)
    np.testing.assert_array_equal(out["o"], [[3]])
    assert sum(e.instruction == "m" for e in sim.trace) == 1       # one trip
    body[0]["instructions"][2] = insn("u", "UnconditionalBranch", "DVE", target="lb")
    with pytest.raises(SimulationError, match=r"chose block 'lb', but .* chose Break"):
        run(prog)


@pytest.mark.parametrize("insns,path,match", [
    ([insn("a", "UnconditionalBranch", "Pool", target="b0"),
      insn("b", "UnconditionalBranch", "Pool", target="b0")],
     "functions[0].blocks[0].instructions[1].engine", "two terminators on one engine"),
    ([insn("a", "UnconditionalBranch", "ALL", target="b0"),
      insn("b", "UnconditionalBranch", "Unassigned", target="b0")],
     "functions[0].blocks[0].instructions[1].engine", "two terminators on one engine"),
    ([insn("a", "UnconditionalBranch", "Pool", target="b0"), insn("n", "NoOp", "DVE")],
     "functions[0].blocks[0].instructions[0]", "must come after the block's other"),
    ([insn("a", "Return", "GPSIMD"), insn("b", "Exit", "DVE"), insn("c", "Exit", "Pool")],
     "functions[0].blocks[0].instructions[2].engine", "two terminators on one engine"),
])
def test_terminator_placement_is_checked_at_load(insns, path, match):
    prog = module([function("main", [], [block("b0", *insns)])])
    with pytest.raises(ProgramError, match=match) as ei:
        birsim.load(prog)
    assert ei.value.path == path


# ==== per-engine registers ==========================================================

U32 = 0xFFFFFFFF


def test_each_engine_has_its_own_register_file():
    """Pool writes 5, DVE writes 9, SP never writes: each engine reads its own copy (SP's
    still uninitialised); an ALL instruction reads the most recent (9); a shared cell
    would give 9 everywhere."""
    save = lambda n, e, k: insn(n, "TensorSave", e, ins=[reg("r")], outs=[elem("o", k)])
    prog = module([function("main", [out_i32("o", 4), register("r")], [block("b0",
        insn("p", "RegisterMove", "Pool", ins=[imm(5, "int32")], outs=[reg("r")]),
        insn("d", "RegisterMove", "DVE", ins=[imm(9, "int32")], outs=[reg("r")]),
        save("s", "Pool", 0), save("s", "DVE", 1), save("s", "SP", 2),
        save("s", "ALL", 3))])])
    out, sim = run(prog)
    np.testing.assert_array_equal(out["o"], [[5, 9, -1, 9]])
    assert sim.register("r", engine="Pool") == 5 and sim.register("r", engine="DVE") == 9
    assert sim.register("r", engine="SP") == U32 and sim.register("r") == 9
    with pytest.raises(ValueError, match="engine"):
        sim.register("r", engine="ALL")


def test_rendezvous_writes_every_file():
    prog = module([function("main", [out_i32("o", 6), register("r")], [block("b0",
        insn("m", "RegisterMove", "Unassigned", ins=[imm(4, "int32")], outs=[reg("r")]),
        *[insn("s", "TensorSave", e, ins=[reg("r")], outs=[elem("o", k)])
          for k, e in enumerate(("Pool", "Activation", "PE", "DMA", "DVE", "SP"))])])])
    out, _ = run(prog)
    np.testing.assert_array_equal(out["o"], [[4] * 6])


def test_structured_control_reads_the_most_recent_value():
    """DynamicForLoop's bound is read as the most recent value of n: SP wrote 3 after
    Pool wrote 1, so 3 trips (Pool's copy would give 1, SP's file is not the loop's)."""
    prog = module([function("main", [out_i32("o", 4), register("n"), register("k")], [
        block("b0",
              insn("init", "Memset", "DVE", outs=[ap("o", [[4, 1], [1, 4]], "int32")],
                   constant=0),
              insn("k0", "RegisterMove", "DVE", ins=[imm(-1, "int32")], outs=[reg("k")]),
              insn("p", "RegisterMove", "Pool", ins=[imm(1, "int32")], outs=[reg("n")]),
              insn("q", "RegisterMove", "SP", ins=[imm(3, "int32")], outs=[reg("n")]),
              dyn_loop("L", "i", 0, affine([(rv("n"), 1)]), 1, [block("lb",
                  insn("k", "RegisterAlu", "DVE", ins=[reg("k"), imm(1, "int32")],
                       outs=[reg("k")], op="add"),
                  insn("one", "Memset", "DVE", outs=[at_reg("o", 4, "k")], constant=1))]))])])
    out, sim = run(prog)
    np.testing.assert_array_equal(out["o"], [[1, 1, 1, 0]])
    assert sim.register("n", engine="Pool") == 1 and sim.register("n") == 3


def test_sem_ge_reg_reads_the_waiting_engines_file():
    """Pool sets r = 0; DVE's copy stays 0xFFFFFFFF, so DVE's sem-ge-reg wait on r never
    holds (a shared cell would let it run)."""
    prog = module([function("main", [register("r")], [block("b0",
        insn("m", "RegisterMove", "Pool", ins=[imm(0, "int32")], outs=[reg("r")]),
        insn("w", "NoOp", "DVE", sync=sync_info([wait(3, "sem-ge-reg", value=None,
                                                      regref="r")])))])])
    with pytest.raises(DeadlockError) as ei:
        run(prog)
    assert "waits for semaphore 3 >= register 'r' = 4294967295 in the file of DVE (now 0)" \
        in str(ei.value)
    prog["functions"][0]["blocks"][0]["instructions"][0]["engine"] = "DVE"
    run(prog)                                             # same engine: it holds


def test_dma_blocks_read_the_triggers_register_file():
    """A descriptor's register_ap start comes from the file of the DMATrigger's engine
    (Pool: 2), not DVE's (1) nor the DMA engine's (never written)."""
    d = insn("d", "DMADescriptorCopy", "DMA", ins=[reg_ap("x", [[8, 1], [1, 2]], "r", 0, "int32")],
             outs=[ap("o", [[2, 1], [1, 2]], "int32")])
    q = dma_queue("q", [dma_block("blk", d)])
    prog = module([function("main", [tensor("x", "ExternalInput", "int32", [1, 8], "DRAM"),
                                     out_i32("o", 2), register("r")], [block("b0",
        insn("p", "RegisterMove", "Pool", ins=[imm(2, "int32")], outs=[reg("r")]),
        insn("v", "RegisterMove", "DVE", ins=[imm(1, "int32")], outs=[reg("r")]),
        insn("t", "DMATrigger", "Pool", queue="q", dma_blocks=["blk"]))])], dma_queues=[q])
    x = np.arange(10, 18, dtype=np.int32)[None]
    out, _ = run(prog, {"x": x})
    np.testing.assert_array_equal(out["o"], [[12, 13]])


# ==== the same, written entirely in the compiler's spelling ==========================

def compiler_lowered_loop(n, f=8):
    """A lowered loop as docs/spec/compiler-dumps.md describes it, in the dump's spelling (tests/
    dumps.py): per trip Pool fires a queues-held DMA block whose descriptor reads row
    `cnt` of x (a register_ap through Pool's -- the trigger's -- copy of `off`) into tile
    t; Activation copies t to row `cnt` of out through its own copy of `off`, then the
    end-of-body sequence (Pool EventSemaphore wait, AllEngineBarrier, GroupResetSemaphores,
    AllEngineBarrier) and one CompareAndBranch per engine, each on its own counter."""
    import dumps as D

    def imm32(v):
        return {"kind": "imm_value", "dtype": "int32", "value": v}

    def r(name):
        return {"kind": "register_access", "regref": name}

    def row(loc, reg_name):
        return {"kind": "register_ap", "memsetref": loc + "_set", "regref": reg_name,
                "dtype": "float32", "ap": [[f, 1], [1, f]], "offset": 0}

    engines = ("Pool", "Activation", "DVE")
    entry = [D.insn("scf.for-Init-%s0" % e, "RegisterMove", e, ins=[imm32(0)], outs=[r("cnt")])
             for e in engines]
    body = [D.insn("addr-Pool0", "RegisterAlu", "Pool", ins=[r("cnt"), imm32(f)],
                   outs=[r("off")], op="mult"),
            D.insn("load", "DMATrigger", "Pool", queue="qPoolIO", dma_blocks=["load_x"]),
            D.insn("addr-Activation0", "RegisterAlu", "Activation", ins=[r("cnt"), imm32(f)],
                   outs=[r("off")], op="mult"),
            D.copy("store", "Activation", row("out", "off"), D.full("t", 1, f),
                   wait=[("load_x", 9, 16)], update=[(10, 1)]),
            *[D.insn("scf.for-Inc_inst__I-10-0-%s0" % e, "RegisterAlu", e,
                     ins=[r("cnt"), imm32(1)], outs=[r("cnt")], op="add") for e in engines],
            D.insn("ev", "EventSemaphore", "Pool", wait=[("store", 10, 1)]),
            D.insn("bar", "AllEngineBarrier", "ALL"),
            D.insn("rst", "GroupResetSemaphores", "ALL", sema_group=[9, 10], mode=0),
            D.insn("bar", "AllEngineBarrier", "ALL"),
            *[D.insn("scf.for-Cond-%s0" % e, "CompareAndBranch", e, ins=[r("cnt"), imm32(n)],
                     comp_op="IS_LTIMM", on_true="body", on_false="exit") for e in engines]]
    desc = [[D.insn("d", "DMADescriptorCopy", "DMA", ins=[row("x", "off")],
                    outs=[D.full("t", 1, f)])]]
    return D.module(
        [D.dram("x", "ExternalInput", [n, f]), D.dram("out", "ExternalOutput", [n, f]),
         D.tile("t", 1, 4 * f), D.reg("cnt"), D.reg("off")],
        [("entry", entry), ("body", body), ("exit", [D.insn("done", "NoOp", "SP")])],
        [D.queue("qPoolIO", [D.dma_block("load_x", "load", desc, update=[(9, 16)])])])


@pytest.mark.parametrize("schedule", ["in_order", "round_robin", "random"])
def test_compiler_spelled_lowered_loop_copies_every_row(schedule):
    import warnings
    n, f = 5, 8
    x = (np.arange(n * f, dtype=np.float32).reshape(n, f) + 1) * 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)   # the regref reading
        m = birsim.load(compiler_lowered_loop(n, f))
    out, sim = run(m, {"x": x}, schedule=schedule, seed=5, trace=True)
    np.testing.assert_array_equal(out["out"], x)
    assert sum(e.instruction == "d" for e in sim.trace) == n          # one DMA per trip
    conds = [(e.engine, e.position) for e in sim.trace if e.opcode == "CompareAndBranch"]
    assert sorted(set(conds)) == [("Activation", 12), ("DVE", 13), ("Pool", 11)]
    assert len(conds) == 3 * n
    for e in ("Pool", "Activation", "DVE"):
        assert sim.register("cnt", engine=e) == n
    assert sim.register("off", engine="Pool") == sim.register("off", engine="Activation") \
        == (n - 1) * f
    assert sim.register("off", engine="DVE") == 0xFFFFFFFF     # DVE never wrote it


@pytest.mark.parametrize("case", ["same engine", "not last"])
def test_core_verifier_rejects_misplaced_terminators(case):
    """The loader rejects these with a JSON path; the C verifier (G6) still refuses tables
    that bypass it, so the VM never meets two terminators on one queue."""
    from birsim import _birsim
    from birsim._load.tables import program_parts
    m = birsim.load(module([function("main", [], [block("b0",
        insn("n", "NoOp", "DVE"), insn("j", "UnconditionalBranch", "Pool", target="b0"),
        insn("k", "UnconditionalBranch", "DVE", target="b0"))])]))
    _birsim.Program(program_parts(dict(m.tables)))           # the original verifies
    tables = dict(m.tables)
    insns = tables["insns"].copy()
    if case == "same engine":
        insns[2] = insns[1]                     # a second Pool branch
        match = "two terminators on one engine"
    else:
        insns[0], insns[1] = insns[1].copy(), insns[0].copy()   # branch, then NoOp
        match = "terminator before a non-terminator"
    tables["insns"] = insns
    with pytest.raises(ProgramError, match=match):
        _birsim.Program(program_parts(tables))


def test_register_reads_the_copy_of_the_cores_own_program():
    """Two per-core programs with a register of the same name: sim.register(core=k)
    reads core k's program's register (in the engine's file asked for)."""
    def prog(v):
        return module([function("sg0000", [register("r")], [block("b0",
            insn("m", "RegisterMove", "Pool", ins=[imm(v, "int32")], outs=[reg("r")]))])])
    sim = birsim.Simulator([prog(11), prog(22)])
    sim.run({})
    assert [sim.register("r", core=k) for k in (0, 1)] == [11, 22]
    assert [sim.register("r", core=k, engine="Pool") for k in (0, 1)] == [11, 22]
    assert sim.register("r", core=1, engine="DVE") == 0xFFFFFFFF
    assert sim.register("r", core=1, function="sg0000") == 22
    with pytest.raises(KeyError):
        sim.register("r", function="nope")
