"""Code paths added for speed (issue 24) give the results the plain paths give.

Each fast path has a test here that drives the cases it must not get wrong: the count of
set events that lets a block end skip scanning the 256 events, memory from the OS as zero
pages (read before written, in a new Simulator after another gave its memory back), and
the reset that does nothing when nothing ran or was written since the last one. No
timings: the benches in bench/ measure speed.
"""

import numpy as np
import pytest

import birsim
from birsim import SimulationError

from bir import block, function, insn, loop, module, register, tensor, update, whole
from _sync_programs import evt_set, evt_wait, nop


def _events_warned(sim):
    return sorted(int(w.split("event ")[1].split()[0]) for w in sim.warnings
                  if "still set" in w)


# ==== the count of set events (block ends) ========================================

def test_event_set_after_one_was_consumed_still_dangles():
    """Set, consumed, set again (another id): the second is still set at the block end."""
    mod = module([function("main", [], [block("b0",
        nop("s1", "DVE", [], [evt_set(3)]), nop("w1", "Pool", [evt_wait(3)]),
        nop("s2", "Activation", [], [evt_set(200)]))])])
    with pytest.warns(birsim.BirsimWarning, match="event 200"):
        sim = birsim.Simulator(mod)
        sim.run()
    assert _events_warned(sim) == [200]
    with pytest.raises(SimulationError, match="event 200 still set"):
        birsim.Simulator(mod, strict=True).run()


def test_each_block_end_sees_the_events_still_set():
    """Two events set in b0, one consumed in b1: b0 warns of both, b1 of the other; in a
    loop every trip's block end warns until the count returns to zero."""
    mod = module([function("main", [], [
        block("b0", nop("s1", "DVE", [], [evt_set(0)]), nop("s2", "Pool", [], [evt_set(255)])),
        block("b1", nop("w", "SP", [evt_wait(0)])),
        block("b2", nop("w2", "SP", [evt_wait(255)])),
        block("b3", nop("quiet", "SP"))])])
    with pytest.warns(birsim.BirsimWarning):
        sim = birsim.Simulator(mod)
        sim.run()
    assert _events_warned(sim) == [0, 255]        # b0: the first set one; b1: 255
    assert sum("'b0'" in w for w in sim.warnings) == 1
    assert sum("'b1'" in w and "event 255" in w for w in sim.warnings) == 1
    assert not any("'b2'" in w or "'b3'" in w for w in sim.warnings)


def test_event_set_on_another_core_dangles_there():
    """Core 0 sets event 9 of core 1 (target_core) and ends clean; core 1, which never
    sets it, finds it set at its block end. The count is the target core's."""
    rk = {"kind": "register_access", "regref": "rk"}
    mod = module([function("main", [register("rk")], [
        block("b0", insn("rank", "GetGlobalRankId", "SP", ins=[], outs=[rk]),
              insn("br", "CompareAndBranch", "SP",
                   ins=[rk, {"kind": "imm_value", "dtype": "int32", "value": 0}],
                   comp_op="IS_EQIMM", on_true="r0", on_false="r1")),
        block("r0", nop("s", "DVE", [], [update(9, "evt-set", None, type="event",
                                               target_core=1)]),
              insn("x0", "Exit", "SP")),
        block("r1", nop("quiet", "DVE"))])])
    with pytest.warns(birsim.BirsimWarning):
        sim = birsim.Simulator(mod, cores=2)
        sim.run()
    dangling = [w for w in sim.warnings if "still set" in w]
    assert [w.split(":")[1].split(" ended")[0] for w in dangling] == [" block 'b0'",
                                                                        " block 'r1'"]
    assert all(w.startswith("core 1,") and "event 9 still set" in w for w in dangling)


def test_event_count_starts_at_zero_every_run():
    """A run that fails with an event set leaves no count behind for the next run."""
    body = [nop("s", "DVE", [], [evt_set(5)]), nop("w", "Pool", [evt_wait(5)])]
    mod = module([function("main", [], [
        loop("L", "i", 0, 3, 1, [block("lb", *body)])])])
    sim = birsim.Simulator(mod, strict=True)
    for _ in range(3):
        sim.run()
        assert sim.warnings == []


# ==== zero pages (SBUF, PSUM, DRAM buffers from the OS) ===========================

def _read_unwritten_program(shape, mem):
    """out := a tile of `mem` nothing wrote (an Internal tensor), then out2 := x + 1 through
    the same memory (so a run writes it too)."""
    return module([function("main", [
        tensor("t", "Internal", "float32", shape, mem),
        tensor("x", "ExternalInput", "float32", shape, "DRAM"),
        tensor("out", "ExternalOutput", "float32", shape, "DRAM"),
        tensor("out2", "ExternalOutput", "float32", shape, "DRAM")], [block("b0",
            insn("rd", "TensorCopy", "DVE", ins=[whole("t", shape)], outs=[whole("out", shape)]),
            insn("wr", "TensorScalar", "DVE", ins=[whole("x", shape)], outs=[whole("t", shape)],
                 op0="add", const0=1.0),
            insn("rd2", "TensorCopy", "DVE", ins=[whole("t", shape)],
                 outs=[whole("out2", shape)]))])])


@pytest.mark.parametrize("shape, mem", [((128, 512), "SB"), ((128, 512), "PSUM"),
                                        ((128, 4096), "DRAM"), ((2, 8), "DRAM")])
def test_memory_never_written_reads_as_zero_in_every_new_simulator(shape, mem):
    """Fresh pages read as zero (uninitialized='zero'), also when the memory of an earlier
    Simulator that wrote the same places was just given back; sizes above and below the
    size from which buffers come from the OS."""
    rng = np.random.default_rng(1)
    mod = _read_unwritten_program(shape, mem)
    for k in range(3):
        x = rng.standard_normal(shape, dtype=np.float32) + 5
        with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
            sim = birsim.Simulator(mod)
            out = sim.run({"x": x})
        assert not out["out"].any(), k
        np.testing.assert_array_equal(out["out2"], x + np.float32(1))
        del sim


@pytest.mark.parametrize("mem", ["SB", "DRAM"])
def test_every_run_of_one_simulator_starts_from_unwritten_memory(mem):
    """A reset with nothing run or written since the last one has nothing to do (the first
    run of a new Simulator); after a run, or after start() wrote inputs, it must clear."""
    shape = (128, 4096)
    mod = _read_unwritten_program(shape, mem)
    sim = birsim.Simulator(mod)
    x = np.full(shape, 3.0, np.float32)
    sim.start({"x": x - 7})                   # inputs written, nothing run
    for k in range(3):
        with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
            out = sim.run({"x": x + k})
        assert not out["out"].any()           # never written in this run: zeros, every run
        np.testing.assert_array_equal(out["out2"], x + k + np.float32(1))
    sim.start({"x": x})
    sim.step()                                # 'rd' ran: a reset must follow
    with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
        sim.run({"x": x})


def test_a_run_without_inputs_still_leaves_its_writes_to_clear():
    """No inputs: only the run itself marks the Simulator as touched since its reset."""
    shape = (128, 4096)
    mod = module([function("main", [
        tensor("t", "Internal", "float32", shape, "SB"),
        tensor("out", "ExternalOutput", "float32", shape, "DRAM")], [block("b0",
            insn("rd", "TensorCopy", "DVE", ins=[whole("t", shape)], outs=[whole("out", shape)]),
            insn("set", "Memset", "DVE", outs=[whole("t", shape)], constant=2.0))])])
    ran = []
    sim = birsim.Simulator(mod, on_instruction=lambda s, stop: ran.append(stop.instruction))
    for k in range(3):
        with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
            sim.run()
        assert ran == ["rd", "set"] * (k + 1)
