"""Timeline traces: records, the timing model's times, and the Chrome/Perfetto export read back."""

import json
import os

import numpy as np
import pytest

import birsim
from birsim import build as B
from birsim.trace import Trace, TraceRecord

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "examples")
PIPELINE_IN = {"x": np.ones((96, 8), np.float32), "w": np.ones((16, 4), np.float32)}


@pytest.fixture(scope="module")
def pipeline():
    sim = birsim.Simulator(os.path.join(EXAMPLES, "sync_pipeline.json"), trace=True)
    sim.run(PIPELINE_IN)
    return sim


def test_records_name_where_and_when(pipeline):
    tr = pipeline.trace
    assert isinstance(tr, Trace) and isinstance(tr[0], TraceRecord)
    assert [r.step for r in tr] == list(range(len(tr)))
    assert len(tr) == pipeline.stats["instructions"] == 2 + 6 * 5
    # the block lists the stages as pe, act, load, dve, store
    pos = {r.instruction: r.position for r in tr if r.block == "tile"}
    assert pos == {"pe": 0, "act": 1, "load": 2, "dve": 3, "store": 4}
    assert {(r.function, r.core) for r in tr} == {("main", 0)}
    assert tr[0][:4] == (0, "DMA", "load_w", "Load")
    # timing model (docs/timing.md): the example targets trn2, whose VectorE runs at
    # 0.96 GHz; an 8-element instruction costs the minimum initiation interval, 64 cycles
    dve = next(r for r in tr if r.instruction == "dve")
    assert dve.duration == pytest.approx(64 / 0.96)
    # a Load's transfer starts 1.3 us after its issue (600 ns on trn2's DGE)
    load = next(r for r in tr if r.instruction == "load")
    assert load.duration > 600 + 1300


def test_waits_start_after_the_update_that_released_them(pipeline):
    tr = pipeline.trace
    released = 0
    for r in tr:
        for s in r.waits_on:
            assert s < r.step and r.start >= tr[s].end
            released += 1
    # every stage but the loads waits on the stage before it, in each of the 6 trips
    assert released == 4 * 6
    for r in tr:
        if r.instruction == "dve":
            assert tr[r.waits_on[0]].instruction == "load"
    # one compute engine runs one instruction at a time (DMA transfers overlap in flight)
    by_engine = {}
    for r in tr:
        if r.engine != "DMA":
            by_engine.setdefault(r.engine, []).append(r)
    for rs in by_engine.values():
        for a, b in zip(rs, rs[1:]):
            assert b.start >= a.end
    assert tr.total_time == max(r.end for r in tr)


def test_export_reads_back_as_chrome_trace_events(pipeline, tmp_path):
    path = tmp_path / "run.json"
    pipeline.trace.export(path)
    with open(path) as f:
        doc = json.load(f)
    ev = doc["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    assert len(slices) == len(pipeline.trace)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(set(threads.values())) == ["Activation", "DMA", "DVE", "PE", "Unassigned"]
    # overlapping transfers go on extra DMA tracks: no slice overlaps its track's previous
    last = {}
    for e in slices:
        key = (e["pid"], e["tid"])
        assert round(e["ts"] * 1000) >= last.get(key, 0)
        last[key] = round((e["ts"] + e["dur"]) * 1000)
    assert {e["args"]["name"] for e in ev if e["name"] == "process_name"} == {"core 0"}
    for e, r in zip(slices, pipeline.trace):
        assert threads[(e["pid"], e["tid"])] == r.engine
        assert (e["name"], e["cat"], e["args"]["block"], e["args"]["step"]) == \
            (r.instruction, r.opcode, r.block, r.step)
        # whole nanoseconds: start and end each rounded once (tests/timing/test_timing_trace_cli.py)
        assert e["ts"] == pytest.approx(r.start / 1000, abs=5e-4) and e["dur"] == \
            pytest.approx(r.duration / 1000, abs=1e-3)
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) == 24
    for k, f in ends.items():
        assert f["bp"] == "e" and starts[k]["ts"] <= f["ts"]


def _two_engines(sync):
    a = B.tensor("a", "ExternalInput", "float32", [8, 64], "DRAM")
    o1 = B.tensor("o1", "ExternalOutput", "float32", [8, 64], "SB")
    o2 = B.tensor("o2", "ExternalOutput", "float32", [8, 64], "SB")
    s1 = B.sync_info([], [B.sem_inc(3)]) if sync else None
    s2 = B.sync_info([B.sem_wait(3)], [B.sem_dec(3)]) if sync else None
    return B.module([B.function("main", [a, o1, o2], [
        B.tensor_copy(B.whole(a), B.whole(o1), engine="DVE", sync=s1),
        B.tensor_copy(B.whole(a), B.whole(o2), engine="Pool", sync=s2)])])


def test_independent_engines_overlap_and_sync_serialises():
    x = {"a": np.ones((8, 64), np.float32)}
    free = birsim.Simulator(_two_engines(False), trace=True)
    free.run(x)
    assert free.trace[0].start == free.trace[1].start == 0
    tied = birsim.Simulator(_two_engines(True), trace=True)
    tied.run(x)
    # the Pool copy starts when the DVE copy's update has landed: its end plus the
    # semaphore latency (100 ns, docs/timing.md)
    assert tied.trace[1].waits_on == (0,)
    assert tied.trace[1].start == pytest.approx(tied.trace[0].end + 100)


def test_cores_get_their_own_processes(tmp_path):
    sim = birsim.Simulator(_two_engines(False), cores=2, trace=True)
    sim.run({"a": np.ones((8, 64), np.float32)})
    assert {r.core for r in sim.trace} == {0, 1}
    sim.trace.export(tmp_path / "t.json")
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["args"]["name"] for e in ev if e["name"] == "process_name"} == \
        {"core 0", "core 1"}
    assert {(e["pid"], e["tid"]) for e in ev if e["ph"] == "X"} == \
        {(c, birsim.ops.Engine[n].value) for c in (0, 1) for n in ("DVE", "Pool")}


def test_trace_off_records_nothing(tmp_path):
    sim = birsim.Simulator(_two_engines(False))
    sim.run({"a": np.ones((8, 64), np.float32)})
    assert sim.trace == [] and isinstance(sim.trace, Trace)
    with pytest.raises(birsim.SimulationError, match="trace=True"):   # not an empty file
        sim.trace.export(tmp_path / "e.json")
    assert not (tmp_path / "e.json").exists()


def _data_address(trace):
    return trace._pairs.__array_interface__["data"][0], trace._times.__array_interface__["data"][0]


def test_a_kept_trace_survives_later_runs_and_its_simulator():
    """The core hands its trace buffers over without a copy and records the next runs
    into other ones: a trace a caller keeps stays what its run recorded, also once the
    Simulator is gone; the records are read-only."""
    sim = birsim.Simulator(os.path.join(EXAMPLES, "sync_pipeline.json"), trace=True)
    sim.run(PIPELINE_IN)
    kept = sim.trace
    first = list(kept)
    assert len(first) == 32 and any(r.waits_on for r in first)
    for _ in range(3):                  # the spares cycle: never the kept trace's buffers
        sim.run(PIPELINE_IN)
        assert _data_address(sim.trace)[0] != _data_address(kept)[0]
        assert list(sim.trace) == first
    del sim
    import gc
    gc.collect()
    assert list(kept) == first and kept == first
    with pytest.raises(ValueError):
        kept._pairs[0, 0] = 1
    with pytest.raises(ValueError):
        kept._times["start"][0] = 1.0


def test_traced_runs_in_a_loop_record_into_two_buffers_in_turn():
    """Once the last run's trace is replaced, its buffers go back to the Simulator: a loop
    of traced runs alternates between two sets of buffers (no new memory, no copy)."""
    sim = birsim.Simulator(os.path.join(EXAMPLES, "sync_pipeline.json"), trace=True)
    seen = []
    for _ in range(6):
        sim.run(PIPELINE_IN)
        seen.append(_data_address(sim.trace))
        assert len(sim.trace) == 32
        # the core's own memory, read in place (not a copy in a bytes object)
        assert type(sim.trace._times.base).__name__ == "_Pages"
    assert seen[2] == seen[4] and seen[3] == seen[5] and seen[2] != seen[3]
