"""Deadlock reports with the wait-for graph (issue 22 item 5): the cycle, or the waits no
pending update can satisfy, as DOT on the DeadlockError and in the trace, with the last
instruction each core and engine completed."""

import json
import re

import numpy as np
import pytest

import birsim
from birsim import build as B

W = B.whole
X = np.ones((4, 8), np.float32)


def _cycle_program():
    """ld (DMA) and pre (Pool) complete; then Pool's p1 waits for DVE's d1 and d1 for p1
    (a cycle), and SP's sv waits for semaphore 5, which nothing updates."""
    a = B.tensor("a", "ExternalInput", "float32", [4, 8], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 8], "DRAM")
    s = B.tensor("s", "Internal", "float32", [4, 8], "SB")
    t = B.tensor("t", "Internal", "float32", [4, 8], "SB")
    ins = [B.load_(W(a), W(s), name="ld", sync=B.sync_info([], [B.sem_inc(0)])),
           B.tensor_scalar(W(s), W(t), "mult", 3.0, engine="Pool", name="pre",
                           sync=B.sync_info([B.sem_wait(0)], [])),
           B.tensor_scalar(W(s), W(s), "mult", 2.0, engine="Pool", name="p1",
                           sync=B.sync_info([B.sem_wait(1)], [B.sem_inc(2)])),
           B.tensor_scalar(W(t), W(t), "add", 1.0, engine="DVE", name="d1",
                           sync=B.sync_info([B.sem_wait(2)], [B.sem_inc(1)])),
           B.save(W(s), W(out), engine="SP", name="sv", sync=B.sync_info([B.sem_wait(5)], []))]
    return B.module([B.function("main", [a, out, s, t], [B.block("b0", *ins)])])


def _edges(dot):
    return {(a, b): attrs for a, b, attrs in
            re.findall(r'"([^"]+)" -> "([^"]+)" \[([^\]]*)\]', dot)}


def test_cycle_and_unsatisfiable_wait_as_dot_and_message(tmp_path):
    sim = birsim.Simulator(_cycle_program())
    with pytest.raises(birsim.DeadlockError) as ei:
        sim.run({"a": X})
    e = ei.value
    assert set(e.cycle) == {"core0.Pool", "core0.DVE"} and len(e.cycle) == 2
    assert e.graph.unsatisfiable == [("core0.SP", "semaphore 5 >= 1 (now 0)")]
    edges = _edges(e.dot)
    assert 'label="semaphore 1 >= 1 (now 0)", color=red' in edges[("core0.Pool", "core0.DVE")]
    assert 'label="semaphore 2 >= 1 (now 0)", color=red' in edges[("core0.DVE", "core0.Pool")]
    (sp_edge,) = [k for k in edges if k[0] == "core0.SP"]
    assert sp_edge[1].startswith("unsat.") and "color=red" not in edges[sp_edge]
    assert e.dot.startswith("digraph deadlock {") and e.dot.rstrip().endswith("}")
    # the last instruction each engine and the core completed
    assert e.last_completed == {0: {"core": "pre", "DMA": "ld", "Pool": "pre"}}
    msg = str(e)
    assert "wait-for cycle: core0." in msg
    assert "no pending instruction can satisfy core0.SP's wait: semaphore 5 >= 1" in msg
    assert "last completed on core 0: 'pre' (per engine: Pool 'pre', DMA 'ld')" in msg
    # the blocked list still follows, one entry per blocked head
    blocked = msg.split("Blocked:\n", 1)[1]
    assert re.findall(r"instruction '(\w+)'", blocked) == ["p1", "d1", "sv"]
    path = tmp_path / "dead.dot"
    e.write_dot(path)
    assert path.read_text() == e.dot


def test_a_wait_nothing_updates_without_a_cycle():
    a = B.tensor("a", "ExternalInput", "float32", [4, 8], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 8], "DRAM")
    mod = B.module([B.function("main", [a, out], [B.block(
        "b0", B.dma_copy(W(a), W(out), name="cp", sync=B.sync_info([B.sem_wait(9, 3)], [])),
        B.insn("EventSemaphore", "DVE", name="bump",
               sync=B.sync_info([], [B.sem_inc(9)])))])])
    with pytest.raises(birsim.DeadlockError) as ei:
        birsim.Simulator(mod).run({"a": X})
    e = ei.value
    assert e.cycle == []
    assert e.graph.unsatisfiable == [("core0.DMA", "semaphore 9 >= 3 (now 1)")]
    assert e.last_completed == {0: {"core": "bump", "DVE": "bump"}}
    assert "wait-for cycle" not in str(e)


def _cross_core_cycle():
    """Core 0's Activation waits for semaphore 8, which core 1's DVE raises after it gets
    semaphore 7, which core 0's Activation raises after its wait: a cycle across cores."""
    S = [2, 8]
    x = B.tensor("x", "ExternalInput", "float32", S, "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", S, "DRAM")
    r = B.register("r", "int32")
    blocks = [
        B.block("entry", B.insn("GetGlobalRankId", "Pool", outs=[B.reg("r")], name="rank"),
                B.compare_and_branch(B.reg("r"), B.imm(1, "int32"), "IS_EQIMM", "one", "zero")),
        B.block("one", B.insn("EventSemaphore", "DVE", name="one_w", sync=B.sync_info(
            [B.sem_wait(7)], [B.update(8, "sem-inc", 1, type="semaphore", target_core=0)])),
                B.branch("done")),
        B.block("zero", B.insn("EventSemaphore", "Activation", name="zero_w", sync=B.sync_info(
            [B.sem_wait(8)], [B.update(7, "sem-inc", 1, type="semaphore", target_core=1)])),
                B.tensor_copy(W(x), W(out), engine="Pool", name="cp")),
        B.block("done"),
    ]
    return B.module([B.function("main", [x, out, r], blocks)])


def test_a_cycle_across_cores():
    with pytest.raises(birsim.DeadlockError) as ei:
        birsim.Simulator(_cross_core_cycle(), cores=2).run({"x": np.ones((2, 8), np.float32)})
    e = ei.value
    assert set(e.cycle) == {"core0.Activation", "core1.DVE"}
    edges = _edges(e.dot)
    assert "semaphore 8 >= 1 (now 0)" in edges[("core0.Activation", "core1.DVE")]
    assert "semaphore 7 >= 1 (now 0)" in edges[("core1.DVE", "core0.Activation")]
    # core 0's Pool went on past its blocked Activation; core 1 took its branch
    assert e.last_completed == {0: {"core": "cp", "Pool": "cp"},
                                1: {"core": "UnconditionalBranch_0",
                                    "Pool": "UnconditionalBranch_0"}}


def test_the_trace_marks_each_blocked_engine(tmp_path):
    sim = birsim.Simulator(_cycle_program(), trace=True)
    with pytest.raises(birsim.DeadlockError):
        sim.run({"a": X})
    path = tmp_path / "t.json"
    sim.trace.export(path)
    ev = json.loads(path.read_text())["traceEvents"]
    marks = [x for x in ev if x["ph"] == "i"]
    assert sorted(m["name"] for m in marks) == ["deadlock: blocked at d1",
                                                 "deadlock: blocked at p1",
                                                 "deadlock: blocked at sv"]
    end = max(x["ts"] + x["dur"] for x in ev if x["ph"] == "X")
    assert all(m["ts"] == pytest.approx(end) and m["cat"] == "deadlock" for m in marks)
    by = {m["args"]["instruction"]: m for m in marks}
    assert by["p1"]["args"]["last_completed"] == "pre"
    assert by["d1"]["args"]["last_completed"] is None
    names = {(x["pid"], x["tid"]): x["args"]["name"] for x in ev
             if x["ph"] == "M" and x["name"] == "thread_name"}
    assert {names[(m["pid"], m["tid"])] for m in marks} == {"Pool", "DVE", "SP"}


def test_write_dot_without_a_graph_is_an_error():
    with pytest.raises(birsim.SimulationError, match="no wait-for graph"):
        birsim.DeadlockError("made by hand").write_dot("x.dot")
