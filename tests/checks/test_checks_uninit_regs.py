"""checks="uninit_regs" (issue 22 item 6): a register read from an engine's file that no
instruction of that engine wrote is a finding; a DoWhile counted down on another engine
than the one that set its counter is the classic case, and when it runs into max_steps
the error says why."""

import numpy as np
import pytest

import birsim
from birsim import build as B

A = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)


def _countdown(set_engine="Pool", dec_engine="Pool", trips=3):
    """s := a; n := trips (on set_engine); do { s += 1 (Pool); n -= 1 (dec_engine) } while n."""
    a = B.tensor("a", "ExternalInput", "float32", [1, 4], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [1, 4], "DRAM")
    s = B.tensor("s", "Internal", "float32", [1, 4], "SB")
    n = B.register("n", "int32")
    body = [B.block("body",
                    B.tensor_scalar(B.whole(s), B.whole(s), "add", 1.0, engine="Pool"),
                    B.register_alu(B.reg("n"), B.reg("n"), B.imm(1, "int32"), "subtract",
                                   engine=dec_engine, name="dec"))]
    return B.module([B.function("main", [a, out, s, n], [B.block(
        "b0",
        B.load_(B.whole(a), B.whole(s)),
        B.register_move(B.reg("n"), B.imm(trips, "int32"), engine=set_engine, name="set"),
        B.do_while("n", body, name="loop"),
        B.save(B.whole(s), B.whole(out)))])])


def test_counter_on_one_engine_gives_no_finding_and_the_numpy_result():
    for eng in ("Pool", "Unassigned"):       # Unassigned writes every engine's file
        sim = birsim.Simulator(_countdown(set_engine=eng), checks="all")
        out = sim.run({"a": A})
        ref = A.copy()
        for _ in range(3):                  # three trips, rounding to float32 each
            ref = ref + np.float32(1)
        assert np.array_equal(out["out"], ref)
        assert [f for f in sim.findings if f.kind == "uninit_regs"] == []


def test_counter_decremented_on_another_engine_is_a_finding_once():
    sim = birsim.Simulator(_countdown(dec_engine="DVE"), checks="uninit_regs", max_steps=3000)
    with pytest.warns(birsim.BirsimWarning, match="uninitialized register read"):
        with pytest.raises(birsim.StepLimitError):
            sim.run({"a": A})
    (f,) = sim.findings                 # once, though the loop ran hundreds of trips
    assert f.kind == "uninit_regs" and f.sub == "uninit_reg"
    assert f.details["register"] == "n" and f.details["file"] == "DVE"
    assert f.details["first"]["instruction"] == "dec"
    assert f.details["first"]["engine"] == "DVE"
    assert "function 'main', block 'body', position 1, instruction 'dec'" in f.message
    assert "0xFFFFFFFF" in f.message


def test_uninit_regs_is_part_of_all_and_strict_raises():
    assert "uninit_regs" in birsim.checks.CHECKS
    assert "uninit_regs" in birsim.Simulator(_countdown(), checks="all").checks
    sim = birsim.Simulator(_countdown(dec_engine="DVE"), checks="all", strict=True,
                           max_steps=3000)
    with pytest.raises(birsim.CheckError, match="register 'n' from the DVE register file"):
        sim.run({"a": A})


def test_the_step_limit_message_says_why_the_do_while_never_ends():
    """Without any check: DVE's file starts at 0xFFFFFFFF (-1), so n goes -2, -3, ...
    while Pool's file keeps 3; the message names the loop and both files' values."""
    sim = birsim.Simulator(_countdown(dec_engine="DVE"), max_steps=2000)
    with pytest.raises(birsim.StepLimitError) as ei:
        sim.run({"a": A})
    msg = str(ei.value)
    assert "step limit of 2000 reached" in msg
    assert "still looping in DoWhile 'loop'" in msg
    assert "condition register 'n'" in msg
    dve = int(np.array(sim.register("n", engine="DVE"), np.uint32).view(np.int32))
    assert dve < -100
    assert f"Pool 3, DVE {dve} " in msg
    assert 'checks="uninit_regs"' in msg


def test_a_step_limit_outside_any_do_while_keeps_its_message():
    mod = B.module([B.function("main", [B.register("i", "int32")], [B.block(
        "b0", B.loop("i_ax", 1000, [B.block("lb", B.register_move(B.reg("i"),
                                                                    B.imm(1, "int32")))]))])])
    with pytest.raises(birsim.StepLimitError) as ei:
        birsim.Simulator(mod, max_steps=50).run({})
    assert "DoWhile" not in str(ei.value)
