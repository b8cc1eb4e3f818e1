"""The checkers (Simulator(checks=...)): each fires on a small wrong program and stays
silent on its corrected twin.

The expected findings come from reading the programs against docs/spec/BIR-JSON.md (which
instruction touches which bytes, which waits order what), not from birsim's output.
"""

import copy
import json
import os
import warnings

import numpy as np
import pytest

import birsim
from bir import (affine, ap, dma_block, dma_queue, function, imm, insn, iv, loop, module,
                 shard, sync_info, tensor, update, wait, whole)

pytestmark = pytest.mark.filterwarnings("ignore::birsim.BirsimWarning")

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE = os.path.join(HERE, "..", "examples", "sync_pipeline.json")
SCHEDULES = [("in_order", 0), ("round_robin", 0), ("random", 1), ("random", 7)]


def run(mod, inputs, cores=1, **kw):
    sim = birsim.Simulator(mod, cores=cores, **kw)
    sim.run(inputs)
    return sim


def kinds(sim, kind=None):
    return [f for f in sim.findings if kind is None or f.kind == kind]


def races(sim):
    return [(f.details["access"], f.details["first"]["instruction"],
             f.details["second"]["instruction"], f.details["tensor"]) for f in kinds(sim, "races")]


def sem_inc(i):
    return update(i, "sem-inc", 1)


def sem_dec(i):
    return update(i, "sem-dec", 1)


def ge(i, v=1):
    return wait(i, "sem-ge-imm", v)


def prog(body, allocs, **kw):
    return module([function("main", allocs, body)], **kw)


X = np.arange(32, dtype=np.float32).reshape(4, 8)
T48 = [[8, 4], [1, 8]]


def small_allocs(*extra):
    return [tensor("a", "ExternalInput", "float32", (4, 8), "DRAM"),
            tensor("o", "ExternalOutput", "float32", (4, 8), "DRAM"),
            tensor("t", "Internal", "float32", (4, 8), "SB"), *extra]


def cp(name, engine, src, dst, sync=None):
    return insn(name, "TensorCopy", engine, ins=[ap(src, T48)], outs=[ap(dst, T48)], sync=sync)


def load(name, engine, src, dst, sync=None):
    return insn(name, "Load", engine, ins=[ap(src, T48)], outs=[ap(dst, T48)], sync=sync)


# ---- the semaphore pipeline ----------------------------------------------------------

def pipeline(drop_wait_of=None):
    with open(PIPELINE) as fh:
        d = json.load(fh)
    body = d["functions"][0]["blocks"][0]["instructions"][1]["blocks"][0]["instructions"]
    for i in body:
        if i["name"] == drop_wait_of:
            i["sync_info"]["on_wait"] = []
    return d


PIPE_IN = {"x": 4 * np.random.default_rng(0).standard_normal((96, 8), dtype=np.float32),
           "w": np.random.default_rng(1).standard_normal((16, 4), dtype=np.float32)}


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_correct_pipeline_reports_nothing(schedule, seed):
    sim = run(pipeline(), PIPE_IN, checks="all", schedule=schedule, seed=seed)
    assert sim.findings == []


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_pipeline_missing_wait_is_a_race_under_every_schedule(schedule, seed):
    sim = run(pipeline("dve"), PIPE_IN, checks=["races"], schedule=schedule, seed=seed)
    found = {r for r in races(sim) if r[3] == "xs"}
    # dve reads xs that load wrote (RAW) -- or, when dve ran first, load's write of xs
    # follows dve's read unordered (WAR across trips, or within the trip).
    assert ("RAW", "load", "dve", "xs") in found or ("WAR", "dve", "load", "xs") in found


def test_pipeline_missing_wait_report_names_both_instructions():
    sim = run(pipeline("dve"), PIPE_IN, checks="races")       # in_order: right numbers
    (f,) = [f for f in kinds(sim, "races") if f.details["tensor"] == "xs"
            and f.details["access"] == "RAW"]
    first, second = f.details["first"], f.details["second"]
    assert (first["instruction"], first["engine"], first["position"]) == ("load", "DMA", 2)
    assert (second["instruction"], second["engine"], second["position"]) == ("dve", "DVE", 3)
    assert first["function"] == second["function"] == "main"
    assert first["block"] == second["block"] == "tile"
    assert f.details["partitions"] == (0, 16) and f.details["bytes"] == (0, 32)
    for word in ("RAW", "'xs'", "'load'", "'dve'", "position 2", "position 3", "block 'tile'"):
        assert word in f.message
    assert "\n" not in f.message


def test_findings_are_warnings_and_strict_raises_check_error():
    with pytest.warns(birsim.BirsimWarning, match="race"):
        birsim.Simulator(pipeline("dve"), checks="races").run(PIPE_IN)
    sim = birsim.Simulator(pipeline("dve"), checks="races", strict=True)
    with pytest.raises(birsim.CheckError) as info:
        sim.run(PIPE_IN)
    assert isinstance(info.value, birsim.BirsimError)
    assert info.value.finding.kind == "races" and len(sim.findings) == 1
    assert info.value.instruction in ("dve", "load")


def test_checks_off_by_default_and_names_validated():
    sim = run(pipeline("dve"), PIPE_IN)
    assert sim.findings == [] and sim.checks == ()
    assert run(pipeline("dve"), PIPE_IN, checks=None).findings == []
    assert set(birsim.Simulator(pipeline(), checks="all").checks) == set(birsim.checks.CHECKS)
    with pytest.raises(ValueError, match="unknown check"):
        birsim.Simulator(pipeline(), checks=["race"])
    with pytest.raises(ValueError, match="uninitialized"):
        birsim.Simulator(pipeline(), uninitialized="garbage")
    with pytest.raises(ValueError, match="dma_mode"):
        birsim.Simulator(pipeline(), dma_mode="lazy")


# ---- RAW / WAR / WAW -------------------------------------------------------------------

def test_raw_and_its_twin():
    bad = prog([load("ld", "DMA", "a", "t"), cp("use", "Activation", "t", "o")], small_allocs())
    good = prog([load("ld", "DMA", "a", "t", sync_info([], [sem_inc(0)])),
                 cp("use", "Activation", "t", "o", sync_info([ge(0)], [sem_dec(0)]))],
                small_allocs())
    assert races(run(bad, {"a": X}, checks="races")) == [("RAW", "ld", "use", "t")]
    assert races(run(good, {"a": X}, checks="races")) == []


def test_war_and_its_twin():
    # 'use' (Activation) reads t; 'clobber' (DVE) then rewrites t from a.
    first = load("ld", None, "a", "t")                      # rendezvous: ordered before both
    bad = prog([first, cp("use", "Activation", "t", "o"), cp("clobber", "DVE", "a", "t")],
               small_allocs())
    good = prog([first, cp("use", "Activation", "t", "o", sync_info([], [sem_inc(1)])),
                 cp("clobber", "DVE", "a", "t", sync_info([ge(1)], [sem_dec(1)]))],
                small_allocs())
    assert races(run(bad, {"a": X}, checks="races")) == [("WAR", "use", "clobber", "t")]
    assert races(run(good, {"a": X}, checks="races")) == []


def test_waw_and_its_twin():
    bad = prog([cp("w1", "DVE", "a", "t"), cp("w2", "Pool", "a", "t"), cp("rd", None, "t", "o")],
               small_allocs())
    good = prog([cp("w1", "DVE", "a", "t", sync_info([], [sem_inc(2)])),
                 cp("w2", "Pool", "a", "t", sync_info([ge(2)], [sem_dec(2)])),
                 cp("rd", None, "t", "o")], small_allocs())
    assert races(run(bad, {"a": X}, checks="races")) == [("WAW", "w1", "w2", "t")]
    assert races(run(good, {"a": X}, checks="races")) == []


def test_disjoint_halves_and_interleaved_columns_do_not_race():
    # Two engines write disjoint halves of t (partitions), then even/odd columns.
    top = insn("top", "TensorCopy", "DVE", ins=[ap("a", [[8, 2], [1, 8]])], outs=[ap("t", [[8, 2], [1, 8]])])
    bot = insn("bot", "TensorCopy", "Pool", ins=[ap("a", [[8, 2], [1, 8]], offset=16)],
               outs=[ap("t", [[8, 2], [1, 8]], offset=16)])
    even = insn("even", "TensorCopy", "DVE", ins=[ap("a", [[8, 4], [2, 4]])], outs=[ap("o", [[8, 4], [2, 4]])])
    odd = insn("odd", "TensorCopy", "Pool", ins=[ap("a", [[8, 4], [2, 4]], offset=1)],
               outs=[ap("o", [[8, 4], [2, 4]], offset=1)])
    rd = cp("rd", None, "t", "t2")
    sim = run(prog([top, bot, even, odd, rd], small_allocs(tensor("t2", "Internal", "float32", (4, 8), "SB"))),
              {"a": X}, checks="races")
    assert races(sim) == []
    # the same columns on both engines do race
    odd_same = insn("odd", "TensorCopy", "Pool", ins=[ap("a", [[8, 4], [2, 4]])], outs=[ap("o", [[8, 4], [2, 4]])])
    sim = run(prog([even, odd_same], small_allocs()), {"a": X}, checks="races")
    assert races(sim) == [("WAW", "even", "odd", "o")]


def test_placed_tiles_alias_in_the_race_checker():
    # u and v are two names for the same SBUF bytes (same base/addr)
    allocs = small_allocs(tensor("u", "Internal", "float32", (4, 8), "SB", base=0, addr=4096),
                          tensor("v", "Internal", "float32", (4, 8), "SB", base=0, addr=4096))
    bad = prog([load("wu", "DMA", "a", "u"), cp("rv", "DVE", "v", "o")], allocs)
    (f,) = kinds(run(bad, {"a": X}, checks="races"), "races")
    assert f.details["access"] == "RAW" and f.details["first"]["instruction"] == "wu"


# ---- DMA blocks, loops, cores ------------------------------------------------------------

def dma_prog(wait_for_block):
    q = dma_queue("q0", [dma_block("blk", insn("d", "DMACopy", "DMA", ins=[ap("a", T48)],
                                                 outs=[ap("t", T48)]),
                                   sync=sync_info([], [update(5, "sem-add-imm", 16)]))])
    trig = insn("trig", "DMATrigger", "SP", queue="q0", dma_blocks=["blk"])
    use = cp("use", "DVE", "t", "o",
             sync_info([ge(5, 16)], [update(5, "sem-sub-imm", 16)]) if wait_for_block else None)
    return prog([trig, use], small_allocs(), dma_queues=[q])


def test_race_through_a_dma_block_and_its_twin():
    sim = run(dma_prog(False), {"a": X}, checks="races")
    (f,) = kinds(sim, "races")
    assert (f.details["access"], f.details["first"]["instruction"], f.details["second"]["instruction"]) \
        == ("RAW", "d", "use")
    assert f.details["first"]["engine"] == "DMA queue q0"
    assert "DMA queue 'q0'" in f.message
    assert races(run(dma_prog(True), {"a": X}, checks="races")) == []


def test_trigger_engine_order_does_not_cover_the_transfer():
    # The trigger's own engine (SP) reads t right after the trigger: still a race.
    q = dma_queue("q0", [dma_block("blk", insn("d", "DMACopy", "DMA", ins=[ap("a", T48)],
                                                 outs=[ap("t", T48)]))])
    mod = prog([insn("trig", "DMATrigger", "SP", queue="q0", dma_blocks=["blk"]),
                cp("use", "SP", "t", "o")], small_allocs(), dma_queues=[q])
    assert races(run(mod, {"a": X}, checks="races")) == [("RAW", "d", "use", "t")]


def loop_prog(back_edge):
    # trip i: DVE fills t from a row block, Activation copies t out; back_edge orders
    # Activation's read of trip i before DVE's write of trip i+1.
    src = ap("a", [[8, 1], [1, 8]], offset=affine([(iv("i"), 8)]))
    dst = ap("o", [[8, 1], [1, 8]], offset=affine([(iv("i"), 8)]))
    t = ap("t", [[8, 1], [1, 8]])
    fill = insn("fill", "TensorCopy", "DVE", ins=[src], outs=[t],
                sync=sync_info([ge(1)] if back_edge else [], [sem_inc(0)] + ([sem_dec(1)] if back_edge else [])))
    drain = insn("drain", "TensorCopy", "Activation", ins=[t], outs=[dst],
                 sync=sync_info([ge(0)], [sem_dec(0)] + ([sem_inc(1)] if back_edge else [])))
    body = [loop("trips", "i", 0, 4, 1, [fill, drain])]
    if back_edge:
        body = [insn("prime", "EventSemaphore", "SP", sync=sync_info([], [sem_inc(1)]))] + body + \
               [insn("unprime", "EventSemaphore", "SP", sync=sync_info([ge(1)], [sem_dec(1)]))]
    return prog(body, small_allocs())


def test_loop_carried_race_across_trips_and_its_twin():
    bad = run(loop_prog(False), {"a": X}, checks="races")
    assert races(bad) == [("WAR", "drain", "fill", "t")]
    # (every check but capacity: DVE reading DRAM directly is a placement finding)
    good = run(loop_prog(True), {"a": X}, zero_copy=False,       # read("o") below
               checks=[c for c in birsim.checks.CHECKS if c != "capacity"])
    assert good.findings == []
    np.testing.assert_array_equal(good.read("o"), X)


def cores_prog(wait_value):
    # Each core writes its own row of the Shared tensor s, tells both cores, and then
    # reads both rows: it must wait for both writers (>= 2), not just one (>= 1). The
    # output is one tensor for both cores: core k writes its row k.
    allocs = [tensor("s", "Internal", "float32", (2, 8), "DRAM", addr_space="Shared"),
              tensor("o", "ExternalOutput", "float32", (2, 16), "DRAM"),
              tensor("a", "ExternalInput", "float32", (2, 8), "DRAM")]
    row = [[8, 1], [1, 8]]
    both = [[16, 1], [1, 16]]
    w = insn("w", "Load", "DMA", ins=[ap("a", row, offset=affine([(shard(), 8)]))],
             outs=[ap("s", row, offset=affine([(shard(), 8)]))],
             sync=sync_info([], [update(3, "sem-inc", 1, target_core=0), update(3, "sem-inc", 1, target_core=1)]))
    r = insn("r", "Save", "SP", ins=[ap("s", both)],
             outs=[ap("o", both, offset=affine([(shard(), 16)]))],
             sync=sync_info([ge(3, wait_value)], [update(3, "sem-sub-imm", 2)]))
    return prog([w, r], allocs)


def test_race_across_two_cores_through_shared_dram_and_its_twin():
    a = np.arange(16, dtype=np.float32).reshape(2, 8)
    bad = run(cores_prog(1), {"a": a}, cores=2, checks="races")
    found = races(bad)
    assert ("RAW", "w", "r", "s") in found
    assert all(r in (("RAW", "w", "r", "s"), ("WAR", "r", "w", "s")) for r in found)
    cores = {(f.details["first"]["core"], f.details["second"]["core"]) for f in kinds(bad, "races")}
    assert any(c1 != c2 for c1, c2 in cores)
    assert "core " in kinds(bad, "races")[0].message
    good = run(cores_prog(2), {"a": a}, cores=2, checks="all")
    assert good.findings == []
    np.testing.assert_array_equal(good.outputs["o"], np.tile(a.reshape(1, 16), (2, 1)))


def test_same_program_on_two_cores_writing_the_same_shared_bytes_races():
    allocs = [tensor("s", "Internal", "float32", (4, 8), "DRAM", addr_space="Shared"),
              *small_allocs()]
    mod = prog([load("w", "DMA", "a", "s"), load("r", "DMA", "s", "o")], allocs)
    found = races(run(mod, {"a": X}, cores=2, checks="races"))
    assert ("WAW", "w", "w", "s") in found


# ---- uninitialized ------------------------------------------------------------------------

def test_uninitialized_read_and_its_twin():
    bad = prog([cp("rd", "DVE", "t", "o")], small_allocs())
    (f,) = kinds(run(bad, {"a": X}, checks="uninitialized"))
    assert f.kind == "uninitialized" and f.details["sub"] == "uninit_read"
    assert f.details["index"] == 0 and f.details["tensor"] == "t" and f.details["operand"] == "ins[0]"
    # a partly written tile: the first never-written element is named
    part = prog([insn("half", "TensorCopy", "DVE", ins=[ap("a", [[8, 2], [1, 8]])],
                      outs=[ap("t", [[8, 2], [1, 8]])]), cp("rd", "DVE", "t", "o")], small_allocs())
    (f,) = kinds(run(part, {"a": X}, checks="uninitialized"))
    assert f.details["index"] == 16
    good = prog([cp("w", "DVE", "a", "t"), cp("rd", "DVE", "t", "o")], small_allocs())
    assert run(good, {"a": X}, checks="uninitialized").findings == []


def _piecewise(write_cols, reads):
    """t written in column pieces [lo, hi) from a, then each piece of `reads` saved to its
    own 8 columns of o (no write is dead)."""
    n = len(reads)
    piece = lambda loc, lo, hi, row=8: ap(loc, [[row, 4], [1, hi - lo]], offset=lo)
    code = [insn("w%d" % i, "Load", None, ins=[piece("a", lo, hi)], outs=[piece("t", lo, hi)])
            for i, (lo, hi) in enumerate(write_cols)]
    code += [insn("r%d" % i, "Save", None, ins=[piece("t", lo, hi)],
                  outs=[piece("o", 8 * i + lo, 8 * i + hi, 8 * n)])
             for i, (lo, hi) in enumerate(reads)]
    return prog(code, [tensor("a", "ExternalInput", "float32", (4, 8), "DRAM"),
                       tensor("o", "ExternalOutput", "float32", (4, 8 * n), "DRAM"),
                       tensor("t", "Internal", "float32", (4, 8), "SB")])


@pytest.mark.parametrize("checks", [None, "uninitialized"])
def test_uninitialized_read_after_many_reads_of_the_written_part(checks):
    """A tile written and read in pieces: once the pieces read add up to more than the
    tile, birsim scans the tile whole (and then stops checking it if every byte was
    written). Here columns 6..7 never are: their read, after ten reads of the written
    part, is still found -- a warning by default, a finding under the checker."""
    bad = _piecewise([(0, 3), (3, 6)], [(0, 3), (3, 6)] * 5 + [(6, 8)])
    sim = birsim.Simulator(bad, checks=checks) if checks else birsim.Simulator(bad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim.run({"a": X})
    if checks:
        (f,) = kinds(sim)
        assert f.details["sub"] == "uninit_read" and f.details["first"]["instruction"] == "r10"
    else:
        assert [str(w.message) for w in caught if "r10" in str(w.message)], \
            [str(w.message) for w in caught]
    reads = [(0, 8)] + [(0, 3), (3, 6)] * 5 + [(6, 8)]
    good = _piecewise([(0, 3), (3, 6), (6, 8)], reads)
    sim = birsim.Simulator(good, checks="all")
    o = sim.run({"a": X})["o"].reshape(4, len(reads), 8)
    for i, (lo, hi) in enumerate(reads):
        np.testing.assert_array_equal(o[:, i, lo:hi], X[:, lo:hi])
    assert sim.findings == []


def test_uninitialized_under_strict_raises_check_error():
    """With the checker on, strict=True raises CheckError carrying the finding; without
    it, strict keeps raising MemoryAccessError for a never-written read."""
    bad = prog([cp("rd", "DVE", "t", "o")], small_allocs())
    with pytest.raises(birsim.CheckError) as ei:
        birsim.Simulator(bad, checks="uninitialized", strict=True).run({"a": X})
    assert ei.value.finding.kind == "uninitialized"
    with pytest.raises(birsim.MemoryAccessError):
        birsim.Simulator(bad, strict=True).run({"a": X})


def mm_prog(flags):
    allocs = [tensor("m", "ExternalInput", "float32", (4, 8), "DRAM"),
              tensor("ms", "Internal", "float32", (4, 8), "SB"),
              tensor("ps", "Internal", "float32", (4, 8), "PSUM"),
              tensor("o", "ExternalOutput", "float32", (4, 8), "DRAM")]
    mv = ap("ms", [[8, 4], [1, 8]])        # moving [K=4, N=8]
    st = ap("ms", [[8, 4], [1, 4]])        # stationary [K=4, M=4]
    out = ap("ps", [[8, 4], [1, 8]])
    body = [load("ld", None, "m", "ms")]
    for k, fl in enumerate(flags):
        body.append(insn(f"mm{k}", "Matmult", None, ins=[mv, st], outs=[out], accumulation_flag=fl))
    body.append(insn("st", "Save", None, ins=[out], outs=[ap("o", [[8, 4], [1, 8]])]))
    return prog(body, allocs)


def test_matmul_accumulating_into_never_started_psum_and_its_twin():
    m = np.arange(32, dtype=np.float32).reshape(4, 8)
    (f,) = kinds(run(mm_prog([1]), {"m": m}, checks="uninitialized"))
    assert f.details["sub"] == "uninit_accumulate" and f.details["first"]["instruction"] == "mm0"
    assert run(mm_prog([2, 1]), {"m": m}, checks="uninitialized").findings == []


def test_uninitialized_nan_mode_poisons_floats_and_integers():
    bad = prog([cp("rd", "DVE", "t", "o")], small_allocs())
    np.testing.assert_array_equal(run(bad, {"a": X}).run({"a": X})["o"], np.zeros((4, 8), np.float32))
    out = birsim.Simulator(bad, uninitialized="nan").run({"a": X})["o"]
    assert np.isnan(out).all()
    ints = prog([insn("rd", "TensorCopy", "DVE", ins=[ap("ti", T48, "int32")], outs=[ap("oi", T48, "int32")])],
                [tensor("ti", "Internal", "int32", (4, 8), "SB"),
                 tensor("oi", "ExternalOutput", "int32", (4, 8), "DRAM")])
    got = birsim.Simulator(ints, uninitialized="nan").run({})["oi"]
    assert (got == np.iinfo(np.int32).max).all()
    # written bytes are unaffected
    good = prog([cp("w", "DVE", "a", "t"), cp("rd", "DVE", "t", "o")], small_allocs())
    np.testing.assert_array_equal(birsim.Simulator(good, uninitialized="nan").run({"a": X})["o"], X)


# ---- leftover sync --------------------------------------------------------------------------

def test_semaphore_and_event_left_over_and_their_twins():
    evt_set = {"type": "event", "id": 9, "mode": "evt-set"}
    evt_wait = {"type": "event", "id": 9, "mode": "evt-set-then-clear"}
    bad = prog([insn("inc", "EventSemaphore", "SP", sync=sync_info([], [sem_inc(7), evt_set]))],
               small_allocs())
    found = {(f.details["sub"], f.details["index"]) for f in run(bad, {"a": X}, checks="leftover_sync").findings}
    assert found == {("semaphore_left", 7), ("event_left", 9)}
    (sem,) = [f for f in kinds(run(bad, {"a": X}, checks="leftover_sync")) if f.details["sub"] == "semaphore_left"]
    assert sem.details["value"] == 1
    good = prog([insn("inc", "EventSemaphore", "SP", sync=sync_info([], [sem_inc(7), evt_set])),
                 insn("dec", "EventSemaphore", "DVE", sync=sync_info([ge(7), evt_wait], [sem_dec(7)]))],
                small_allocs())
    assert run(good, {"a": X}, checks="leftover_sync").findings == []


def test_unreachable_wait_is_reported_before_the_deadlock():
    bad = prog([insn("never", "EventSemaphore", "DVE", sync=sync_info([ge(12, 2)], []))], small_allocs())
    sim = birsim.Simulator(bad, checks="leftover_sync")
    with pytest.raises(birsim.DeadlockError):
        sim.run({"a": X})
    (f,) = sim.findings
    assert f.details["sub"] == "wait_unreachable" and f.details["first"]["instruction"] == "never"
    assert f.details["index"] == 12 and f.details["value"] == 2
    strict = birsim.Simulator(bad, checks="leftover_sync", strict=True)
    with pytest.raises(birsim.CheckError, match="semaphore 12"):
        strict.run({"a": X})
    twin = prog([insn("up", "EventSemaphore", "SP", sync=sync_info([], [update(12, "sem-add-imm", 2)])),
                 insn("never", "EventSemaphore", "DVE", sync=sync_info([ge(12, 2)], [update(12, "sem-sub-imm", 2)]))],
                small_allocs())
    assert run(twin, {"a": X}, checks="leftover_sync").findings == []


# ---- capacity and placement -------------------------------------------------------------------

def capacity(mod, inputs):
    return [f.details["sub"] for f in run(mod, inputs, checks="capacity").findings]


def test_start_partition_rule_and_its_twin():
    def mod(base):
        allocs = [tensor("a", "ExternalInput", "float32", (48, 8), "DRAM"),
                  tensor("t", "Internal", "float32", (48, 8), "SB", base=base, addr=0),
                  tensor("u", "Internal", "float32", (48, 8), "SB", base=0, addr=1024)]
        p = [[8, 48], [1, 8]]
        return prog([insn("ld", "Load", "DMA", ins=[ap("a", p)], outs=[ap("t", p)]),
                     insn("cp", "TensorCopy", "DVE", ins=[ap("t", p)], outs=[ap("u", p)])], allocs)
    a = np.zeros((48, 8), np.float32)
    assert capacity(mod(16), {"a": a}) == ["start_partition"]     # 48 partitions: 0 or 64
    assert capacity(mod(64), {"a": a}) == []


def test_matmul_into_sbuf_and_across_psum_banks_and_their_twins():
    def mod(out_mem, addr, flag=2):
        allocs = [tensor("m", "ExternalInput", "float32", (4, 512), "DRAM"),
                  tensor("ms", "Internal", "float32", (4, 512), "SB"),
                  tensor("ps", "Internal", "float32", (4, 512), out_mem, base=0, addr=addr),
                  tensor("o", "ExternalOutput", "float32", (4, 512), "DRAM")]
        full = [[512, 4], [1, 512]]
        return prog([insn("ld", "Load", "DMA", ins=[ap("m", full)], outs=[ap("ms", full)]),
                     insn("mm", "Matmult", "PE", ins=[ap("ms", full), ap("ms", [[512, 4], [1, 4]])],
                          outs=[ap("ps", full)], accumulation_flag=flag),
                     insn("st", "Save", "DMA", ins=[ap("ps", full)], outs=[ap("o", full)])], allocs)
    m = np.ones((4, 512), np.float32)
    assert capacity(mod("PSUM", 1024), {"m": m}) == ["psum_banks"]
    assert capacity(mod("PSUM", 2048), {"m": m}) == []
    assert "matmul_not_psum" in capacity(mod("SB", 0, flag=0), {"m": m})


def test_sbuf_overcommitted_by_unplaced_tiles_and_its_twin():
    def mod(n):
        allocs = small_allocs(*[tensor(f"big{k}", "Internal", "float32", (128, 30000), "SB")
                                for k in range(n)])
        return prog([load("ld", "DMA", "a", "t"), load("st", "DMA", "t", "o")], allocs)
    assert capacity(mod(2), {"a": X}) == ["sbuf_full"]         # 2 x 120000 B > 224 KiB
    assert capacity(mod(1), {"a": X}) == []


def test_compute_engine_on_dram_and_its_twin():
    bad = prog([cp("cp", "DVE", "a", "o")], small_allocs())
    assert capacity(bad, {"a": X}) == ["engine_dram", "engine_dram"]
    good = prog([load("cp", "DMA", "a", "o")], small_allocs())
    assert capacity(good, {"a": X}) == []


# ---- NaN / Inf ------------------------------------------------------------------------------

def recip_prog():
    return prog([load("ld", None, "a", "t"),
                 insn("inv", "Reciprocal", "DVE", ins=[ap("t", T48)], outs=[ap("t2", T48)]),
                 cp("cp", "DVE", "t2", "t3"), load("st", None, "t3", "o")],
                small_allocs(tensor("t2", "Internal", "float32", (4, 8), "SB"),
                             tensor("t3", "Internal", "float32", (4, 8), "SB")))


def test_first_instruction_making_inf_and_its_twin():
    a = np.ones((4, 8), np.float32)
    a[1, 3] = 0.0
    (f,) = run(recip_prog(), {"a": a}, checks="nan").findings        # cp only passes it on
    assert f.details["sub"] == "inf" and f.details["first"]["instruction"] == "inv"
    assert f.details["index"] == 11 and f.details["operand"] == "outs[0]"
    assert run(recip_prog(), {"a": np.ones((4, 8), np.float32)}, checks="nan").findings == []


def test_nan_born_in_a_subtraction_of_infinities():
    mod = prog([load("ld", None, "a", "t"),
                insn("sub", "TensorTensor", "DVE", ins=[ap("t", T48), ap("t", T48)], outs=[ap("t2", T48)],
                     op="subtract"), load("st", None, "t2", "o")],
               small_allocs(tensor("t2", "Internal", "float32", (4, 8), "SB")))
    a = np.ones((4, 8), np.float32)
    a[2, 5] = np.inf        # inf - inf: but the input already held an Inf -> not a birth
    assert run(mod, {"a": a}, checks="nan").findings == []
    a = np.full((4, 8), 3e38, np.float32)
    mul = prog([load("ld", None, "a", "t"),
                insn("mul", "TensorTensor", "DVE", ins=[ap("t", T48), ap("t", T48)], outs=[ap("t2", T48)],
                     op="mult"), load("st", None, "t2", "o")],
               small_allocs(tensor("t2", "Internal", "float32", (4, 8), "SB")))
    (f,) = run(mul, {"a": a}, checks="nan").findings
    assert f.details["sub"] == "inf" and f.details["index"] == 0


# ---- dead writes -------------------------------------------------------------------------------

def test_overwritten_before_read_and_its_twin():
    bad = prog([cp("w1", None, "a", "t"), cp("w2", None, "a", "t"), cp("rd", None, "t", "o")], small_allocs())
    (f,) = run(bad, {"a": X}, checks="dead_writes").findings
    assert f.details["sub"] == "overwritten"
    assert (f.details["first"]["instruction"], f.details["second"]["instruction"]) == ("w1", "w2")
    good = prog([cp("w1", None, "a", "t"), cp("rd1", None, "t", "o"), cp("w2", None, "a", "t"),
                 cp("rd", None, "t", "o2")],
                small_allocs(tensor("o2", "ExternalOutput", "float32", (4, 8), "DRAM")))
    assert run(good, {"a": X}, checks="dead_writes").findings == []


def test_write_never_read_and_its_twin():
    bad = prog([cp("w1", None, "a", "t"), cp("out", None, "a", "o")], small_allocs())
    (f,) = run(bad, {"a": X}, checks="dead_writes").findings
    assert f.details["sub"] == "unread" and f.details["first"]["instruction"] == "w1"
    assert f.details["tensor"] == "t"
    good = prog([cp("w1", None, "a", "t"), cp("out", None, "t", "o")], small_allocs())
    assert run(good, {"a": X}, checks="dead_writes").findings == []


def test_copy_predicated_reads_what_it_keeps():
    """CopyPredicated keeps the unselected bytes of its output: the write before it is not
    dead, and the checker orders it as a read of that output."""
    body = [cp("w1", None, "a", "t"),
            insn("cpd", "CopyPredicated", None, ins=[ap("a", T48), ap("m", T48, "uint8")],
                 outs=[ap("t", T48)]),
            cp("rd", None, "t", "o")]
    mod = prog(body, small_allocs(tensor("m", "ExternalInput", "uint8", (4, 8), "DRAM")))
    sim = run(mod, {"a": X, "m": (X.astype(np.int64) % 2).astype(np.uint8)}, checks="dead_writes")
    assert sim.findings == []
    # the same with a full TensorCopy in its place is the overwritten twin
    body[1] = cp("w2", None, "a", "t")
    (f,) = run(prog(body, small_allocs()), {"a": X}, checks="dead_writes").findings
    assert f.details["sub"] == "overwritten"


# ---- the examples ---------------------------------------------------------------------------

def example_inputs(mod):
    rng = np.random.default_rng(0)
    return {t.name: (rng.random(t.shape) * 4).astype(birsim.dtypes.numpy_dtype(t.dtype))
            for t in mod.inputs}


@pytest.mark.parametrize("name", ["sync_pipeline.json", "call_twice.json", "halving_do_while.json",
                                  "tiled_matmul.json"])
def test_synchronised_examples_report_no_race(name):
    mod = birsim.load(os.path.join(HERE, "..", "examples", name))
    assert races(run(mod, example_inputs(mod), checks="races")) == []


def test_main_example_is_clean_under_every_check_and_schedule():
    """The README's main job (tiled_matmul.json) is synchronised: no finding of any
    checker, and bit-identical outputs under random/round-robin schedules and deferred DMA."""
    mod = birsim.load(os.path.join(HERE, "..", "examples", "tiled_matmul.json"))
    inputs = example_inputs(mod)
    sim = birsim.Simulator(mod, checks="all")
    ref = sim.run(inputs)["out"]
    assert sim.findings == [] and sim.warnings == []
    for kw in [dict(schedule="round_robin"), dict(dma_mode="deferred")] + \
            [dict(schedule="random", seed=s) for s in range(6)]:
        np.testing.assert_array_equal(birsim.Simulator(mod, **kw).run(inputs)["out"], ref)


@pytest.mark.parametrize("name,pair", [("dynamic_add.json", ("load_a", "add")),
                                       ("branch_ladder.json", ("max", "store"))])
def test_unsynchronised_examples_are_reported(name, pair):
    # These examples are ordered by birsim.synchronize (examples/build_examples.py):
    # without the semaphores and fences it added, nothing orders their DMA loads and the
    # compute that uses them; only the simulator's in-order default (and, for
    # branch_ladder, its block-at-a-time execution) makes them come out right.
    with open(os.path.join(HERE, "..", "examples", name)) as f:
        prog = json.load(f)

    def strip(blocks):
        for b in blocks:
            b["instructions"] = [i for i in b["instructions"]
                                 if not i.get("name", "").startswith("sync_")]
            for i in b["instructions"]:
                i.pop("sync_info", None)
                strip(i.get("blocks", []))
    strip(prog["functions"][0]["blocks"])
    mod = birsim.load(prog)
    inputs = example_inputs(mod)
    found = races(run(mod, inputs, checks="races"))
    assert any(r[0] == "RAW" and r[1:3] == pair for r in found)
    if name != "branch_ladder.json":      # the race shows as wrong numbers under some schedule
        ref = birsim.Simulator(mod).run(inputs)
        outs = [birsim.Simulator(mod, schedule="random", seed=s).run(inputs) for s in range(8)]
        assert any(not np.array_equal(o[k], ref[k]) for o in outs for k in ref)


# ---- DMA execution modes ---------------------------------------------------------------------

@pytest.mark.parametrize("schedule,seed", SCHEDULES)
def test_deferred_dma_keeps_a_synchronised_pipeline_right(schedule, seed):
    ref = birsim.Simulator(pipeline()).run(PIPE_IN)["out"]
    sim = birsim.Simulator(pipeline(), dma_mode="deferred", schedule=schedule, seed=seed)
    np.testing.assert_array_equal(sim.run(PIPE_IN)["out"], ref)
    assert sim.warnings == [] and sim.dma_mode == "deferred"


def test_deferred_dma_shows_the_missing_wait_as_stale_data_under_in_order():
    ref = birsim.Simulator(pipeline()).run(PIPE_IN)["out"]
    eager = birsim.Simulator(pipeline("dve")).run(PIPE_IN)["out"]
    np.testing.assert_array_equal(eager, ref)             # the default hides the bug
    sim = birsim.Simulator(pipeline("dve"), dma_mode="deferred", uninitialized="nan")
    out = sim.run(PIPE_IN)["out"]
    assert np.isnan(out[:4]).all()                        # tile 0 read before its load landed
    assert not np.array_equal(out[4:], ref[4:])           # later tiles read the previous one
    assert any("never-written bytes of 'xs'" in w for w in sim.warnings)


def test_deferred_dma_block_lands_when_its_semaphore_is_waited_on():
    stale = birsim.Simulator(dma_prog(False), dma_mode="deferred").run({"a": X})["o"]
    np.testing.assert_array_equal(stale, np.zeros_like(X))   # read before the transfer
    np.testing.assert_array_equal(birsim.Simulator(dma_prog(False)).run({"a": X})["o"], X)
    waited = birsim.Simulator(dma_prog(True), dma_mode="deferred").run({"a": X})["o"]
    np.testing.assert_array_equal(waited, X)


def test_deferred_dma_lands_at_the_end_of_its_block():
    mod = module([function("main", small_allocs(), [
        {"name": "b0", "instructions": [load("ld", "DMA", "a", "t"), cp("early", "DVE", "t", "t2")]},
        {"name": "b1", "instructions": [cp("late", "DVE", "t", "o")]}])])
    mod["functions"][0]["allocations"].append(tensor("t2", "Internal", "float32", (4, 8), "SB"))
    sim = birsim.Simulator(mod, dma_mode="deferred")
    np.testing.assert_array_equal(sim.run({"a": X})["o"], X)
    np.testing.assert_array_equal(sim.read("t2"), np.zeros_like(X))     # read before landing
    np.testing.assert_array_equal(birsim.Simulator(mod).run({"a": X})["o"], X)


def tonga_prog(first, write_first=True):
    """TongaReduceMacroSymbolic folding a's rows into y: after its first trip it reads y
    (out := op(out, r)), so the write of y before it is not dead and must have happened."""
    allocs = [tensor("a", "ExternalInput", "float32", (4, 8), "DRAM"),
              tensor("y", "Internal", "float32", (4, 1), "SB"),
              tensor("o", "ExternalOutput", "float32", (4, 1), "DRAM")]
    col, y = [[8, 4], [1, 1]], [[1, 4], [1, 1]]
    body = []
    if write_first:
        body.append(insn("w", "TensorCopy", "DVE", ins=[ap("a", col)], outs=[ap("y", y)]))
    body += [insn("red", "TongaReduceMacroSymbolic", "DVE", ins=[ap("a", T48)],
                  outs=[ap("y", y)], op="add", is_first_reduce=first),
             insn("st", "Save", None, ins=[ap("y", y)], outs=[ap("o", y)])]
    return prog(body, allocs)


def test_tonga_reduce_reads_its_output_after_the_first_trip():
    assert run(tonga_prog(False), {"a": X}, checks="dead_writes").findings == []
    (f,) = run(tonga_prog(True), {"a": X}, checks="dead_writes").findings
    assert f.details["first"]["instruction"] == "w"
    (f,) = kinds(run(tonga_prog(False, write_first=False), {"a": X}, checks="uninitialized"))
    assert f.details["sub"] == "uninit_accumulate" and f.details["first"]["instruction"] == "red"
    assert run(tonga_prog(True, write_first=False), {"a": X}, checks="uninitialized").findings == []
