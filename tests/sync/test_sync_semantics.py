"""Synchronisation, engines, cores and DMA queues (issue 4).

Every rule of docs/spec/BIR-JSON.md "Engines and order inside a block", "Synchronization",
"DMA queues", "Execution rules" (Cores, Diagnostics) and docs/spec/control-flow-sync.md §3/§5 gets a test here.
References are independent: NumPy for data, uint32 arithmetic in NumPy for semaphores,
and a small Python model of the engine queues (tests/_sync_programs.py) for schedules.
Semaphore values are observed through a "probe" instruction that waits for values no
semaphore holds; the DeadlockError it causes reports the current value of each.
"""

import collections
import copy
import json
import pathlib
import random
import re
import warnings

import numpy as np
import pytest

import birsim
from birsim import DeadlockError, ProgramError, SimulationError, SyncError

from bir import (affine, ap, block, dma_block, dma_queue, function, imm, insn, iv, loop,
                 module, reg, register, shard, sync_info, tensor, update, wait, whole)
from _sync_programs import (ROTATION, U32, RefCore, blocked_entries, blocked_per_core,
                            decode_trace, evt_set, evt_wait, nop, probe, sem_reference,
                            sem_values_from_deadlock, sem_wait, trace_program)

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "examples"
SCHEDULES = [("in_order", 0), ("round_robin", 0)] + [("random", s) for s in range(12)]
ZERO = np.zeros((1, 1), np.float32)


def sem_inc(i):
    return update(i, "sem-inc", 1)


def main(*instructions, allocs=(), blocks=None, **kw):
    if blocks is None:
        blocks = [block("b0", *instructions)]
    return module([function("main", list(allocs), blocks)], **kw)


def run(mod, inputs=None, **opts):
    sim = birsim.Simulator(mod, **opts)
    return sim, sim.run(inputs or {})


def deadlock_message(mod, inputs=None, **opts):
    with pytest.raises(DeadlockError) as info:
        run(mod, inputs, **opts)
    return str(info.value)


def probed(mod_instructions, ids, allocs=(), inputs=None, **opts):
    """Semaphore values ``ids`` after ``mod_instructions`` (which must not wait)."""
    msg = deadlock_message(main(*mod_instructions, probe("probe", ids), allocs=allocs),
                           inputs, **opts)
    assert "instruction 'probe'" in msg
    return sem_values_from_deadlock(msg, ids)


# ==== semaphores ==================================================================

def test_semaphores_start_at_zero_and_ids_run_to_255():
    ids = [0, 1, 17, 128, 254, 255]
    assert probed([], ids) == {i: 0 for i in ids}
    with pytest.raises(ProgramError, match="255"):
        birsim.load(main(nop("bad", "SP", [sem_wait(256, 1)])))
    with pytest.raises(ProgramError, match="255"):
        birsim.load(main(nop("bad", "SP", [], [update(256, "sem-inc", 1)])))


@pytest.mark.parametrize("seed", range(6))
def test_semaphore_updates_are_modular_uint32(seed):
    """Random chains of sem-wr-imm/add/sub/inc/dec on a few ids, applied in queue and
    list order, against NumPy uint32 arithmetic (wrap-around both ways)."""
    rng = random.Random(seed)
    ids = [3, 4, 200]
    ops = {i: [] for i in ids}
    chain = []
    for k in range(8):
        ups = []
        for _ in range(rng.randint(1, 3)):
            i = rng.choice(ids)
            mode = rng.choice(["sem-wr-imm", "sem-add-imm", "sem-sub-imm", "sem-inc",
                               "sem-dec"])
            if mode in ("sem-inc", "sem-dec"):
                v = 1
            elif mode == "sem-wr-imm":
                v = rng.choice([0, 1, 7, 2 ** 31, U32 - 2, U32 - 1])
            else:
                v = rng.choice([1, 5, 2 ** 31 + 3, U32 - 1])
            ups.append(update(i, mode, v))
            ops[i].append((mode, v))
        chain.append(nop("u%d" % k, "SP", [], ups))
    got = probed(chain, ids)
    assert got == {i: sem_reference(ops[i]) for i in ids}


def test_sem_ge_imm_is_a_pure_unsigned_poll():
    """Waiting never changes the semaphore; two waiters pass on one value; the
    comparison is unsigned (0xFFFFFFFF >= 2**31)."""
    body = [nop("w1", "DVE", [sem_wait(5, 2)]), nop("w2", "Pool", [sem_wait(5, 2)]),
            nop("w3", "Activation", [sem_wait(6, 2 ** 31)]),
            nop("set", "PE", [], [update(5, "sem-add-imm", 2), update(6, "sem-wr-imm", U32 - 1)])]
    assert probed(body, [5, 6]) == {5: 2, 6: U32 - 1}
    msg = deadlock_message(main(nop("set", "PE", [], [update(6, "sem-wr-imm", 2 ** 31 - 1)]),
                                nop("w", "DVE", [sem_wait(6, 2 ** 31)])))
    assert "instruction 'w'" in msg and "semaphore 6 >= %d (now %d)" % (2 ** 31, 2 ** 31 - 1) in msg


@pytest.mark.parametrize("r,sem,holds", [(3, 3, True), (4, 3, False), (0, 0, True),
                                         (-1, U32 - 2, False), (-1, U32 - 1, True)])
def test_sem_ge_reg_compares_with_a_register_value(r, sem, holds):
    """sem-ge-reg compares the semaphore with the register's value in the waiting
    instruction's engine's file (written there first, by the same engine), polled until
    the semaphore is set later by another engine."""
    body = [insn("mv", "RegisterMove", "DVE", ins=[imm(r, "int32")], outs=[reg("r")]),
            nop("waiter", "DVE", [wait(9, "sem-ge-reg", regref="r"), sem_wait(10, 1)]),
            nop("set", "SP", [], [update(9, "sem-wr-imm", sem), update(10, "sem-inc", 1)])]
    mod = main(*body, probe("probe", [9]), allocs=[register("r", "int32")])
    if sem == U32 - 1 and holds:        # the probe is satisfied too: no deadlock at all
        run(mod)
        return
    blocked = blocked_per_core(deadlock_message(mod))
    assert sem_values_from_deadlock("\n".join(blocked[0, "probe"]), [9]) == {9: sem}
    if holds:
        assert (0, "waiter") not in blocked         # it ran, and left semaphore 9 alone
    else:
        assert blocked[0, "waiter"] == ["waits for semaphore 9 >= register 'r' = %d in the file "
                                        "of DVE (now %d)"
                                        % (r % U32, sem)]


@pytest.mark.parametrize("mode,value", [("sem-inc", 2), ("sem-dec", 2), ("sem-inc", 0),
                                        ("sem-dec", U32 - 1)])
def test_sem_inc_dec_with_a_value_other_than_one_is_sync_error(mode, value):
    ok = [nop("fine", "DVE", [], [update(1, "sem-inc", 1), update(1, "sem-dec", 1)])]
    with pytest.raises(SyncError, match=mode) as info:
        run(main(*ok, nop("bad", "Pool", [sem_wait(1, 0)], [update(1, mode, value)])))
    assert info.value.instruction == "bad"


# ==== events ======================================================================

def test_event_wait_clears_so_it_can_be_set_again():
    """evt-set / evt-set-then-clear pairs reuse one event id: a second evt-set would be a
    SyncError if the wait had not cleared it. No dangling event is left."""
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    body = [
        insn("c2", "TensorScalar", "Activation", ins=[whole("t", (1, 8))], outs=[whole("y", (1, 8))],
             op0="mult", const0=3.0, sync=sync_info([evt_wait(7)], [sem_inc(2)])),
        insn("p1", "TensorScalar", "DVE", ins=[whole("x", (1, 8))], outs=[whole("t", (1, 8))],
             op0="add", const0=1.0, sync=sync_info([], [evt_set(7)])),
        insn("p2", "TensorScalar", "DVE", ins=[whole("y", (1, 8))], outs=[whole("t", (1, 8))],
             op0="subtract", const0=4.0, sync=sync_info([sem_wait(2, 1)], [evt_set(7), sem_inc(3)])),
        insn("c3", "TensorCopy", "Pool", ins=[whole("t", (1, 8))], outs=[whole("y2", (1, 8))],
             sync=sync_info([evt_wait(7), sem_wait(3, 1)])),
    ]
    allocs = [tensor("x", "ExternalInput", shape=(1, 8), mem="DRAM"),
              tensor("t", shape=(1, 8)), tensor("y", shape=(1, 8)),
              tensor("y2", "ExternalOutput", shape=(1, 8), mem="DRAM")]
    for sched, seed in SCHEDULES:
        sim, out = run(main(*body, allocs=allocs), {"x": x}, schedule=sched, seed=seed)
        assert np.array_equal(out["y2"], (x + 1) * 3 - 4)
        assert sim.warnings == []


def test_setting_a_set_event_is_a_sync_error_naming_instruction_and_event():
    with pytest.raises(SyncError) as info:
        run(main(nop("first", "DVE", [], [evt_set(42)]), nop("again", "Pool", [sem_wait(0, 0)],
                                                              [evt_set(42)])))
    assert info.value.instruction == "again"
    assert "'again'" in str(info.value) and "event 42" in str(info.value)


def test_second_wait_on_a_consumed_event_deadlocks():
    msg = deadlock_message(main(nop("set", "DVE", [], [evt_set(3)]),
                                nop("w1", "Pool", [evt_wait(3)]),
                                nop("w2", "Activation", [evt_wait(3)])))
    assert "instruction 'w2'" in msg and "event 3" in msg
    assert "instruction 'w1'" not in msg


def test_events_are_per_id():
    """Setting event 4 does not satisfy a wait on event 5."""
    msg = deadlock_message(main(nop("set", "DVE", [], [evt_set(4)]),
                                nop("w", "Pool", [evt_wait(5)])))
    assert "instruction 'w'" in msg and "event 5" in msg


# ==== the per-instruction engine and schedules ====================================

def _two_producer_program():
    """out = (a + 1) * (b * 2): the consumer (listed first) needs both producers, one
    signalling by semaphore, the other by event."""
    S = (4, 8)
    allocs = [tensor("a", "ExternalInput", shape=S, mem="DRAM"),
              tensor("b", "ExternalInput", shape=S, mem="DRAM"),
              tensor("ta", shape=S), tensor("tb", shape=S),
              tensor("out", "ExternalOutput", shape=S, mem="DRAM")]
    body = [
        insn("cons", "TensorTensor", "Pool", ins=[whole("ta", S), whole("tb", S)],
             outs=[whole("out", S)], op="mult",
             sync=sync_info([sem_wait(11, 1), evt_wait(12)])),
        insn("pa", "TensorScalar", "DVE", ins=[whole("a", S)], outs=[whole("ta", S)],
             op0="add", const0=1.0, sync=sync_info([], [sem_inc(11)])),
        insn("pb", "TensorScalar", "Activation", ins=[whole("b", S)], outs=[whole("tb", S)],
             op0="mult", const0=2.0, sync=sync_info([], [evt_set(12)])),
    ]
    return main(*body, allocs=allocs), S


def test_instruction_runs_only_when_all_its_waits_hold():
    mod, S = _two_producer_program()
    rng = np.random.default_rng(0)
    a = rng.standard_normal(S, dtype=np.float32)
    b = rng.standard_normal(S, dtype=np.float32)
    ref = (a + np.float32(1)) * (b * np.float32(2))
    for sched, seed in SCHEDULES:
        sim, out = run(mod, {"a": a, "b": b}, schedule=sched, seed=seed, strict=True)
        assert np.array_equal(out["out"], ref), (sched, seed)
    # Each wait matters: drop one and some schedule reads a never-written tile.
    for drop in (0, 1):
        m2 = copy.deepcopy(mod)
        del m2["functions"][0]["blocks"][0]["instructions"][0]["sync_info"]["on_wait"][drop]
        bad = 0
        for sched, seed in SCHEDULES:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", birsim.BirsimWarning)
                sim, out = run(m2, {"a": a, "b": b}, schedule=sched, seed=seed)
            bad += any("never-written" in w for w in sim.warnings)
        assert bad > 0


def test_a_consumer_listed_before_its_producer_reads_the_produced_data():
    S = (2, 4)
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
    allocs = [tensor("x", "ExternalInput", shape=S, mem="DRAM"), tensor("t", shape=S),
              tensor("y", "ExternalOutput", shape=S, mem="DRAM")]
    body = [insn("cons", "TensorScalar", "DVE", ins=[whole("t", S)], outs=[whole("y", S)],
                 op0="mult", const0=10.0, sync=sync_info([sem_wait(0, 1)])),
            insn("prod", "TensorScalar", "Activation",
                 ins=[whole("x", S)], outs=[whole("t", S)], op0="add", const0=0.5,
                 sync=sync_info([], [sem_inc(0)]))]
    for sched, seed in SCHEDULES:
        _, out = run(main(*body, allocs=allocs), {"x": x}, schedule=sched, seed=seed,
                     strict=True)
        assert np.array_equal(out["y"], (x + np.float32(0.5)) * np.float32(10))


def test_event_waits_are_consumed_before_execution_and_updates_applied_after():
    """(a) An instruction waiting on event 5 may set event 5 itself (consumed first).
    (b) GroupResetSemaphores with an update on a semaphore of its group: the reset
    executes, then the update applies (3, not 0)."""
    body = [nop("set", "DVE", [], [evt_set(5)]),
            nop("again", "Pool", [evt_wait(5)], [evt_set(5)]),
            nop("last", "Activation", [evt_wait(5)], [update(4, "sem-wr-imm", 9),
                                                     update(8, "sem-wr-imm", 9)]),
            insn("grs", "GroupResetSemaphores", "SP", sema_group=[4, 8],
                 sync=sync_info([sem_wait(4, 9)], [update(4, "sem-add-imm", 3)]))]
    assert probed(body, [4, 8]) == {4: 3, 8: 0}


def _random_sync_program(rng, n):
    """n trace steps on random engines with random semaphore/event waits and updates."""
    steps = []
    for _ in range(n):
        eng = rng.choice(ROTATION)
        waits, ups = [], []
        for _ in range(rng.choice([0, 0, 0, 1, 1, 2])):
            if rng.random() < 0.2:
                waits.append(evt_wait(rng.choice([1, 2])))
            else:
                waits.append(sem_wait(rng.choice([0, 1, 2]), rng.choice([1, 1, 2])))
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            r = rng.random()
            if r < 0.15:
                ups.append(evt_set(rng.choice([1, 2])))
            elif r < 0.85:
                ups.append(sem_inc(rng.choice([0, 1, 2])))
            elif r < 0.93:
                ups.append(update(rng.choice([0, 1, 2]), "sem-add-imm", 2))
            else:
                ups.append(update(rng.choice([0, 1, 2]), "sem-sub-imm", 1))
        steps.append((eng, waits, ups))
    return steps


def _ref_outcome(steps, schedule):
    ref = RefCore(steps)
    try:
        order = ref.order(schedule)
    except AssertionError:
        return "sync", None
    if order is None:
        return "deadlock", sorted("s%d" % (k + 1) for k, _ in
                                  [(q[0], e) for e, q in ref.queues.items() if q])
    return "ok", order


def _birsim_outcome(steps, schedule, seed=0):
    mod = trace_program(steps)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", birsim.BirsimWarning)
            _, out = run(mod, {"x0": ZERO}, schedule=schedule, seed=seed)
    except SyncError:
        return "sync", None
    except DeadlockError as e:
        return "deadlock", sorted(re.findall(r"instruction '(s\d+)'", str(e)))
    return "ok", decode_trace(out["x"][0, 0], len(steps))


@pytest.mark.parametrize("schedule", ["in_order", "round_robin"])
def test_deterministic_schedules_match_the_reference_model(schedule):
    """Random programs of 7 synchronised instructions on random engines: the executed
    order (recorded in the data), the deadlock set, or the SyncError, exactly as the
    reference model of the engine queues predicts."""
    rng = random.Random(1234)
    kinds = collections.Counter()
    for _ in range(150):
        steps = _random_sync_program(rng, 7)
        want = _ref_outcome(steps, schedule)
        got = _birsim_outcome(steps, schedule)
        kinds[want[0]] += 1
        if want[0] == "deadlock":
            # heads of blocked queues are listed (an idle engine whose waits hold is not)
            assert got == want, (steps, got, want)
        else:
            assert got == want, (steps, got, want)
    assert kinds["ok"] >= 20 and kinds["deadlock"] >= 5


def test_round_robin_rotation_without_waits():
    """Pool, Activation, PE, DMA, DVE, SP, starting after the engine that ran last."""
    steps = [("DVE", [], []), ("Activation", [], []), ("DVE", [], []), ("Pool", [], []),
             ("SP", [], []), ("Activation", [], []), ("PE", [], [])]
    _, out = run(trace_program(steps), {"x0": ZERO}, schedule="round_robin")
    assert decode_trace(out["x"][0, 0], 7) == [4, 2, 7, 1, 5, 6, 3]
    _, out = run(trace_program(steps), {"x0": ZERO})
    assert decode_trace(out["x"][0, 0], 7) == [1, 2, 3, 4, 5, 6, 7]


def test_random_schedule_is_seeded_and_only_runs_ready_instructions():
    rng = random.Random(7)
    steps = [(e, [], []) for e in ["DVE", "Pool", "DVE", "Activation", "PE", "Pool", "SP"]]
    orders = set()
    for seed in range(40):
        _, out = run(trace_program(steps), {"x0": ZERO}, schedule="random", seed=seed)
        order = decode_trace(out["x"][0, 0], 7)
        assert RefCore(steps).valid(order)
        _, again = run(trace_program(steps), {"x0": ZERO}, schedule="random", seed=seed)
        assert again["x"][0, 0] == out["x"][0, 0]
        orders.add(tuple(order))
    assert len(orders) >= 20
    # with waits: every completed random run is an order the model allows
    for _ in range(25):
        steps = _random_sync_program(rng, 6)
        for seed in range(4):
            got = _birsim_outcome(steps, "random", seed)
            if got[0] == "ok":
                assert RefCore(steps).valid(got[1]), (steps, got)


def test_unknown_schedule_is_rejected():
    with pytest.raises(ValueError, match="schedule"):
        birsim.Simulator(main(nop("n")), schedule="fifo")


# ==== deadlock ====================================================================

def test_deadlock_report_names_both_waiting_instructions():
    """Two instructions each waiting for the other's update, inside a loop body."""
    body = [nop("alpha", "DVE", [sem_wait(1, 1)], [sem_inc(2)]),
            nop("beta", "Activation", [sem_wait(2, 1), evt_wait(6)], [sem_inc(1)])]
    mod = main(loop("lp", "i", 0, 3, 1, [block("lbody", *body)]))
    with pytest.raises(DeadlockError) as info:
        run(mod)
    entries = {e["instruction"]: e for e in blocked_entries(str(info.value))}
    assert sorted(entries) == ["alpha", "beta"]
    for name, eng in (("alpha", "DVE"), ("beta", "Activation")):
        e = entries[name]
        assert (e["cores"], e["engine"], e["function"], e["block"]) == ([0], eng, "main", "lbody")
    assert entries["alpha"]["waits"] == ["waits for semaphore 1 >= 1 (now 0)"]
    assert entries["beta"]["waits"] == ["waits for semaphore 2 >= 1 (now 0)",
                                        "waits for event 6 to be set (it is clear)"]
    assert info.value.instruction in ("alpha", "beta") and info.value.core == 0


def test_deadlock_report_names_a_dma_trigger_blocked_on_its_next_block():
    q = dma_queue("q", [dma_block("b_first"), dma_block("b_second", sync=sync_info([sem_wait(4, 2)]))])
    mod = main(loop("l", "i", 0, 3, 1, [insn("trig", "DMATrigger", "DMA", queue="q",
                                             dma_blocks=["b_first", "b_second"])]),
               dma_queues=[q])
    (e,) = blocked_entries(deadlock_message(mod))
    assert e["instruction"] == "trig" and e["engine"] == "DMA"
    assert e["waits"] == ["its next DMA block 'b_second' waits for semaphore 4 >= 2 (now 0)"]


def test_deadlock_across_cores_is_detected_and_reports_every_core():
    """Per-core semaphores: each core bumps its own sem 1 once and waits for 2."""
    mod = main(nop("bump", "DVE", [], [sem_inc(1)]), nop("w", "Pool", [sem_wait(1, 2)]))
    for sched in ("in_order", "round_robin", "random"):
        blocked = blocked_per_core(deadlock_message(mod, cores=3, schedule=sched))
        assert blocked == {(k, "w"): ["waits for semaphore 1 >= 2 (now 1)"] for k in range(3)}


def test_big_deadlock_report_is_not_silently_cut():
    """40 cores x 6 engines, every entry different (the register holds the rank): every
    blocked instruction is listed, or the report says how many were left out."""
    N = 40
    waiters = [nop("w_%s" % e, e, [wait(0, "sem-ge-reg", regref="r"), sem_wait(i + 10, 1)])
               for i, e in enumerate(ROTATION)]
    mod = main(insn("rank", "GetGlobalRankId", "ALL", outs=[reg("r")]), *waiters,   # every file
               allocs=[register("r")])
    msg = deadlock_message(mod, cores=N)
    listed = blocked_per_core(msg)
    assert len(listed) == sum(len(e["cores"]) for e in blocked_entries(msg))
    m = re.search(r"\.\.\. and (\d+) more blocked instructions? not listed$", msg)
    assert m, msg[-300:]
    assert len(listed) + int(m.group(1)) == N * 6
    for (k, name), waits in listed.items():
        extra = ["waits for semaphore 0 >= register 'r' = %d in the file of %s (now 0)"
                 % (k, name[2:])] if k else []
        assert waits == extra + ["waits for semaphore %d >= 1 (now 0)" % (ROTATION.index(name[2:]) + 10)]


# ==== diagnostics =================================================================

def test_dangling_event_at_block_end_warns_and_strict_raises():
    mod = main(nop("set", "DVE", [], [evt_set(77)]))
    with pytest.warns(birsim.BirsimWarning, match="event 77"):
        sim, _ = run(mod)
    assert any("event 77" in w and "'b0'" in w for w in sim.warnings)
    with pytest.raises(SimulationError, match="event 77"):
        run(mod, strict=True)
    # consumed in the same block: no warning
    sim, _ = run(main(nop("set", "DVE", [], [evt_set(77)]), nop("w", "SP", [evt_wait(77)])),
                 strict=True)
    assert sim.warnings == []
    # a DMA block fired in between is not a basic block end
    q = dma_queue("q", [dma_block("blk", insn("d", "DMACopy", "DMA", ins=[whole("a", (1, 2))],
                                                  outs=[whole("b", (1, 2))]))])
    mod = main(nop("set", "DVE", [], [evt_set(77)]),
               insn("trig", "DMATrigger", "DMA", queue="q", dma_blocks=["blk"]),
               nop("w", "SP", [evt_wait(77)]), dma_queues=[q],
               allocs=[tensor("a", "ExternalInput", shape=(1, 2), mem="DRAM"),
                       tensor("b", "ExternalOutput", shape=(1, 2), mem="DRAM")])
    sim, out = run(mod, {"a": np.array([[1, 2]], np.float32)}, strict=True)
    assert sim.warnings == [] and out["b"].tolist() == [[1, 2]]


# ==== cores =======================================================================

def _spmd_program(N, F=8):
    """Every core: rank r (GetGlobalRankId, also as ShardIDKind offsets),
    sh[r] := x[r] + 1 in Shared DRAM, then (after all cores wrote theirs, counted by a
    semaphore updated on every core) t := sh * (r-th row of x broadcast) in its SBUF,
    out := t (Internal DRAM: the core's own), ranks[r] := r (an output: one tensor of all
    cores), myrank := r (Internal DRAM)."""
    allocs = [tensor("x", "ExternalInput", shape=(N, F), mem="DRAM"),
              tensor("sh", shape=(N, F), mem="DRAM", addr_space="Shared"),
              tensor("t", shape=(N, F)),
              tensor("out", "Internal", shape=(N, F), mem="DRAM"),
              tensor("ranks", "ExternalOutput", "int32", (N, 1), "DRAM", addr_space="Shared"),
              tensor("myrank", "Internal", "int32", (1, 1), "DRAM"),
              register("r")]
    row = lambda loc: ap(loc, [[F, 1], [1, F]], offset=affine([(shard(), F)]))
    bcast = lambda loc: ap(loc, [[0, N], [1, F]], offset=affine([(shard(), F)]))
    body = [
        insn("st", "TensorCopy", "SP", ins=[whole("t", (N, F))], outs=[whole("out", (N, F))],
             sync=sync_info([sem_wait(10, 1)])),
        insn("cons", "TensorTensor", "Activation", ins=[whole("sh", (N, F)), bcast("x")],
             outs=[whole("t", (N, F))], op="mult",
             sync=sync_info([sem_wait(9, N)], [sem_inc(10)])),
        insn("rank", "GetGlobalRankId", "Pool", outs=[reg("r")]),
        insn("sv", "TensorSave", "Pool", ins=[reg("r")],
             outs=[ap("ranks", [[1, 1], [1, 1]], "int32", offset=affine([(shard(), 1)]))]),
        insn("sv2", "TensorSave", "Pool", ins=[reg("r")],
             outs=[ap("myrank", [[1, 1], [1, 1]], "int32")]),
        insn("prod", "TensorScalar", "DVE", ins=[row("x")], outs=[row("sh")], op0="add",
             const0=1.0, sync=sync_info([], [update(9, "sem-inc", 1, target_core=k)
                                             for k in range(N)])),
    ]
    return main(*body, allocs=allocs)


@pytest.mark.parametrize("N", [1, 2, 3])
def test_cores_have_private_state_ranks_and_shared_dram(N):
    F = 8
    x = (np.arange(N * F, dtype=np.float32).reshape(N, F) - 5) / 4
    mod = _spmd_program(N, F)
    sh_ref = x + np.float32(1)
    for sched, seed in SCHEDULES[:6]:
        sim, out = run(mod, {"x": x}, cores=N, schedule=sched, seed=seed, strict=True,
                       zero_copy=False)     # read() of the input and the output below
        assert np.array_equal(out["ranks"].ravel(), np.arange(N))
        assert set(out) == {"ranks"}
        for k in range(N):
            assert np.array_equal(sim.read("out", core=k), sh_ref * x[k])
            assert sim.read("myrank", core=k)[0, 0] == k
            assert np.array_equal(sim.read("sh", core=k), sh_ref)   # one Shared buffer
            assert np.array_equal(sim.read("ranks", core=k).ravel(), np.arange(N))
            assert np.array_equal(sim.read("x", core=k), x)         # Local input on all
            assert sim.register("r", core=k) == k


def _role_program(F=8):
    """Core 1 produces sh := x * 3 into Shared DRAM and bumps sem 7 on core 0; core 0
    (runs first under in_order) waits for it, then out := sh + 1."""
    S = (2, F)
    allocs = [tensor("x", "ExternalInput", shape=S, mem="DRAM"),
              tensor("sh", shape=S, mem="DRAM", addr_space="Shared"),
              tensor("out", "ExternalOutput", shape=S, mem="DRAM"), register("r")]
    blocks = [
        block("entry", insn("rank", "GetGlobalRankId", "Pool", outs=[reg("r")]),
              insn("br", "CompareAndBranch", "Pool", ins=[reg("r"), imm(1, "int32")],
                   comp_op="IS_EQIMM", on_true="producer", on_false="consumer")),
        block("producer",
              insn("prod", "TensorScalar", "DVE", ins=[whole("x", S)], outs=[whole("sh", S)],
                   op0="mult", const0=3.0,
                   sync=sync_info([], [update(7, "sem-inc", 1, target_core=0)])),
              insn("jp", "UnconditionalBranch", "Pool", target="done")),
        block("consumer",
              insn("cons", "TensorScalar", "Activation", ins=[whole("sh", S)],
                   outs=[whole("out", S)], op0="add", const0=1.0,
                   sync=sync_info([sem_wait(7, 1)]))),
        block("done"),
    ]
    return main(blocks=blocks, allocs=allocs)


def test_two_core_producer_consumer_through_shared_dram_and_cross_core_semaphore():
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8)
    mod = _role_program()
    for sched, seed in SCHEDULES:
        sim, out = run(mod, {"x": x}, cores=2, schedule=sched, seed=seed)
        assert np.array_equal(out["out"], x * np.float32(3) + np.float32(1))
    # the semaphore is what orders them: without the wait, core 0 reads too early
    m2 = copy.deepcopy(mod)
    del m2["functions"][0]["blocks"][2]["instructions"][0]["sync_info"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim, out = run(m2, {"x": x}, cores=2)
    assert any("never-written" in w for w in sim.warnings)


def test_update_with_target_core_applies_to_that_core_only():
    mod = main(nop("u", "DVE", [], [update(3, "sem-add-imm", 5, target_core=1),
                                    update(4, "sem-inc", 1)]),
               probe("probe", [3, 4]))
    msg = deadlock_message(mod, cores=3)
    blocked = blocked_per_core(msg)
    vals = {k: sem_values_from_deadlock("\n".join(blocked[k, "probe"]), [3, 4]) for k in range(3)}
    # every core sent +5 to core 1
    assert vals == {0: {3: 0, 4: 1}, 1: {3: 15, 4: 1}, 2: {3: 0, 4: 1}}


def test_random_schedule_interleaves_cores():
    """Three cores each do x := x * 8 + rank once on one Shared x (after a cross-core
    semaphore says every core initialised): the digits of x give the core order."""
    one = (1, 1)
    allocs = [tensor("x0", "ExternalInput", shape=one, mem="DRAM"),
              tensor("x", "ExternalOutput", shape=one, mem="DRAM", addr_space="Shared"),
              tensor("k", shape=one), tensor("eight", shape=one), register("r")]
    body = [
        insn("step", "TensorScalarPtr", "Pool",
             ins=[whole("x", one), whole("eight", one), whole("k", one)], outs=[whole("x", one)],
             op0="mult", op1="add", sync=sync_info([sem_wait(1, 3)])),
        insn("init", "TensorCopy", "DVE", ins=[whole("x0", one)], outs=[whole("x", one)],
             sync=sync_info([], [update(1, "sem-inc", 1, target_core=c) for c in range(3)])),
        insn("rank", "GetGlobalRankId", "Activation", outs=[reg("r")]),
        insn("sv", "TensorSave", "Activation", ins=[reg("r")], outs=[whole("k", one)]),
        insn("e8", "Memset", "Activation", outs=[whole("eight", one)], mode="Const",
             constant=int(np.float32(8).view(np.uint32))),
        nop("ready", "Activation", [], [sem_inc(1)]),
    ]
    body[0]["sync_info"]["on_wait"].append(sem_wait(1, 4))    # own k and eight are ready
    mod = main(*body, allocs=allocs)
    x0 = np.ones(one, np.float32)

    def order(out):
        v = int(out["x"][0, 0]) - 512
        return (v // 64, v // 8 % 8, v % 8)
    _, out = run(mod, {"x0": x0}, cores=3, strict=True)
    assert order(out) == (0, 1, 2)
    seen = collections.Counter()
    for seed in range(30):
        _, out = run(mod, {"x0": x0}, cores=3, schedule="random", seed=seed, strict=True)
        assert sorted(order(out)) == [0, 1, 2]
        seen[order(out)] += 1
    assert len(seen) == 6


def test_target_core_outside_the_run_is_sync_error():
    mod = main(nop("u", "DVE", [], [update(3, "sem-inc", 1, target_core=2)]))
    run(mod, cores=3)
    with pytest.raises(SyncError, match="core 2") as info:
        run(mod, cores=2)
    assert info.value.instruction == "u"


def test_events_are_per_core():
    """Each core sets its own event 5 (no double set across cores) and consumes it."""
    mod = main(nop("s", "DVE", [], [evt_set(5)]), nop("w", "Pool", [evt_wait(5)]))
    sim, _ = run(mod, cores=4, strict=True)
    # a remote event set onto a core whose event is already set is a double set
    mod = main(nop("s", "DVE", [], [update(5, "evt-set", type="event", target_core=0)]))
    with pytest.raises(SyncError, match="event 5"), warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)     # core 0's dangling event
        run(mod, cores=2)


# ==== sync opcodes ================================================================

def test_group_reset_semaphores_zeroes_each_id_of_its_group():
    body = [nop("set", "DVE", [], [update(i, "sem-wr-imm", 10 + i) for i in (1, 2, 3, 200)]),
            insn("grs", "GroupResetSemaphores", "Pool", sema_group=[1, 200, 3],
                 mode="SemaphoreZeroBitmask", sync=sync_info([sem_wait(3, 13)]))]
    assert probed(body, [1, 2, 3, 200]) == {1: 0, 2: 12, 3: 0, 200: 0}


@pytest.mark.parametrize("opcode,engine", [("EventSemaphore", "SP"), ("AllEngineBarrier", "ALL"),
                                           ("Drain", "PE"), ("Halt", "Pool"),
                                           ("CoreBarrier", "SP"), ("TensorCompletion", "PE")])
def test_sync_only_opcodes_act_only_through_sync_info(opcode, engine):
    """Producer -> X -> consumer where X (listed first) relays a semaphore into an event;
    X has no other effect on memory or semaphores."""
    S = (2, 4)
    x = np.arange(8, dtype=np.float32).reshape(S)
    allocs = [tensor("x", "ExternalInput", shape=S, mem="DRAM"), tensor("t", shape=S),
              tensor("y", "ExternalOutput", shape=S, mem="DRAM")]
    body = [
        insn("X", opcode, engine, sync=sync_info([sem_wait(1, 1)], [evt_set(2), sem_inc(3)])),
        insn("cons", "TensorScalar", "Activation", ins=[whole("t", S)], outs=[whole("y", S)],
             op0="mult", const0=-1.0, sync=sync_info([evt_wait(2)])),
        insn("prod", "TensorCopy", "DVE", ins=[whole("x", S)], outs=[whole("t", S)],
             sync=sync_info([], [sem_inc(1)])),
    ]
    if engine == "ALL":        # a rendezvous runs after everything listed before it
        body = [body[2], body[0], body[1]]
    for sched, seed in SCHEDULES[:6]:
        _, out = run(main(*body, allocs=allocs), {"x": x}, schedule=sched, seed=seed,
                     strict=True)
        assert np.array_equal(out["y"], -x)
    assert probed(body[:0] + [insn("X", opcode, engine)], [0, 1, 2, 3]) == {i: 0 for i in range(4)}


# ==== DMA queues ==================================================================

def _queue_program(R_outer, R_inner, reset, F=4, nblocks=3):
    """Loop j { Loop i { trig } ; reset } where trig cycles blocks blk0..blk2; block k
    copies src[k] to out[j*R_inner + i] and bumps sem 20. ``reset`` is an instruction
    (or None) run after each inner loop."""
    R = R_outer * R_inner
    names = ["blk%d" % k for k in range(nblocks)]

    def blk(k):
        return dma_block(names[k], insn("d%d" % k, "DMADescriptorCopy", "DMA",
                                        ins=[ap("src", [[F, 1], [1, F]], offset=k * F)],
                                        outs=[ap("out", [[F, 1], [1, F]], offset=affine(
                                            [(iv("j"), F * R_inner), (iv("i"), F)]))]),
                         sync=sync_info([], [sem_inc(20), update(21, "sem-add-imm", 2)]),
                         trigger="trig")
    q = dma_queue("q0", [blk(k) for k in range(nblocks)], semaphores=[20], special=[21])
    inner = loop("li", "i", 0, R_inner, 1,
                 [insn("trig", "DMATrigger", "DMA", queue="q0", dma_blocks=names)])
    outer_body = [inner] + ([reset] if reset else [])
    outer = loop("lj", "j", 0, R_outer, 1, [block("ob", *outer_body)])
    allocs = [tensor("src", "ExternalInput", shape=(nblocks, F), mem="DRAM"),
              tensor("out", "ExternalOutput", shape=(R, F), mem="DRAM")]
    return main(outer, probe("probe", [20, 21]), allocs=allocs, dma_queues=[q])


def _queue_run(mod, F=4, nblocks=3):
    src = (np.arange(nblocks * F, dtype=np.float32).reshape(nblocks, F) + 1) * 10
    sim = birsim.Simulator(mod)
    with pytest.raises(DeadlockError) as info:          # the probe at the end
        sim.run({"src": src})
    fired = [int(np.flatnonzero((src == row).all(1))[0]) for row in sim.read("out")]
    return fired, sem_values_from_deadlock(str(info.value), [20, 21])


def _cursor_model(R_outer, R_inner, rewind, nblocks=3):
    seq, cur = [], 0
    for _ in range(R_outer):
        for _ in range(R_inner):
            seq.append(cur)
            cur = (cur + 1) % nblocks
        if rewind:
            cur = 0
    return seq


def test_dma_trigger_cycles_three_blocks_with_a_reset_in_the_middle():
    reset = insn("rst", "ResetQueueInstance", "SP", queue="q0", instance=["blk1"])
    fired, sems = _queue_run(_queue_program(2, 4, reset))
    assert fired == _cursor_model(2, 4, True) == [0, 1, 2, 0, 0, 1, 2, 0]
    assert sems == {20: 8, 21: 16}          # ResetQueueInstance leaves semaphores alone
    fired, sems = _queue_run(_queue_program(2, 4, None))
    assert fired == _cursor_model(2, 4, False) == [0, 1, 2, 0, 1, 2, 0, 1]
    fired, _ = _queue_run(_queue_program(3, 5, reset))
    assert fired == _cursor_model(3, 5, True)


@pytest.mark.parametrize("no_rearm", [False, True])
def test_switch_queue_instance_zeroes_both_groups_and_rewinds_unless_no_rearm(no_rearm):
    """The switch's own update applies after the zeroing (docs/spec/control-flow-sync.md §3.3 actOnUpdate)."""
    sw = insn("sw", "SwitchQueueInstance", "SP", queue="q0", instance=["blk0", "blk2"],
              no_rearm=no_rearm, sync=sync_info([], [update(21, "sem-add-imm", 7)]))
    fired, sems = _queue_run(_queue_program(2, 4, sw))
    assert fired == _cursor_model(2, 4, not no_rearm)
    assert sems == {20: 0, 21: 7}           # zeroed after the last inner loop, then +7


def test_reset_queue_instance_rewinds_only_triggers_owning_the_named_blocks():
    """Two triggers on two queues; resetting a block of queue A leaves B's cursor."""
    F = 2
    def blk(q, k):
        return dma_block("%s%d" % (q, k), insn("%sd%d" % (q, k), "DMACopy", "DMA",
                                                ins=[ap("src", [[F, 1], [1, F]], offset=k * F)],
                                                outs=[ap("out_" + q, [[F, 1], [1, F]],
                                                         offset=affine([(iv("i"), F)]))]))
    qa = dma_queue("qa", [blk("a", 0), blk("a", 1)])
    qb = dma_queue("qb", [blk("b", 0), blk("b", 1)])
    body = [insn("ta", "DMATrigger", "DMA", queue="qa", dma_blocks=["a0", "a1"]),
            insn("tb", "DMATrigger", "SP", queue="qb", dma_blocks=["b0", "b1"]),
            insn("rst", "ResetQueueInstance", "Pool", queue="qa", instance=["a1"])]
    allocs = [tensor("src", "ExternalInput", shape=(2, F), mem="DRAM"),
              tensor("out_a", "ExternalOutput", shape=(5, F), mem="DRAM"),
              tensor("out_b", "ExternalOutput", shape=(5, F), mem="DRAM")]
    mod = main(loop("l", "i", 0, 5, 1, body), allocs=allocs, dma_queues=[qa, qb])
    src = np.array([[1, 1], [2, 2]], np.float32)
    _, out = run(mod, {"src": src}, strict=True)
    assert np.array_equal(out["out_a"][:, 0], [1, 1, 1, 1, 1])
    assert np.array_equal(out["out_b"][:, 0], [1, 2, 1, 2, 1])


def _dma_pipeline_program(T=5, F=4):
    """Loop i: the trigger (listed first) fires blk_even/blk_odd alternately; each block
    waits (event 1) for the DVE stage to fill `stage`, then its descriptors run in
    order: stage -> t (Copy), t (+) bias -> out[i] (CCE add), and its update (sem 2) lets
    the Pool stage double out[i] into out2[i]."""
    row = lambda loc: ap(loc, [[F, 1], [1, F]], offset=affine([(iv("i"), F)]))
    one = lambda loc: ap(loc, [[F, 1], [1, F]])

    def blk(name, k):
        return dma_block(name,
                         insn(name + "_cp", "DMADescriptorCopy", "DMA", ins=[one("stage")],
                              outs=[one("t")]),
                         insn(name + "_cce", "DMADescriptorCCE", "DMA",
                              ins=[one("t"), ap("bias", [[F, 1], [1, F]], offset=k * F)],
                              outs=[row("out")], op="add"),
                         sync=sync_info([evt_wait(1)], [sem_inc(2)]))
    q = dma_queue("q", [blk("blk_even", 0), blk("blk_odd", 1)])
    body = [
        insn("trig", "DMATrigger", "DMA", queue="q", dma_blocks=["blk_even", "blk_odd"]),
        insn("dbl", "TensorScalar", "Pool", ins=[row("out")], outs=[row("out2")],
             op0="mult", const0=2.0, sync=sync_info([sem_wait(2, 1)], [update(2, "sem-dec", 1)])),
        insn("fill", "TensorScalar", "DVE", ins=[row("x")], outs=[one("stage")],
             op0="add", const0=0.25, sync=sync_info([], [evt_set(1)])),
    ]
    allocs = [tensor("x", "ExternalInput", shape=(T, F), mem="DRAM"),
              tensor("bias", "ExternalInput", shape=(2, F), mem="DRAM"),
              tensor("stage", shape=(1, F)), tensor("t", shape=(1, F), mem="DRAM"),
              tensor("out", "ExternalOutput", shape=(T, F), mem="DRAM"),
              tensor("out2", "ExternalOutput", shape=(T, F), mem="DRAM")]
    return main(loop("l", "i", 0, T, 1, body), allocs=allocs, dma_queues=[q])


def test_dma_block_waits_descriptors_in_order_then_updates():
    T, F = 5, 4
    rng = np.random.default_rng(3)
    x = rng.standard_normal((T, F), dtype=np.float32)
    bias = rng.standard_normal((2, F), dtype=np.float32)
    ref = (x + np.float32(0.25)) + bias[np.arange(T) % 2]
    for sched, seed in SCHEDULES:
        _, out = run(_dma_pipeline_program(T, F), {"x": x, "bias": bias}, schedule=sched,
                     seed=seed, strict=True)
        assert np.array_equal(out["out"], ref)
        assert np.array_equal(out["out2"], ref * np.float32(2))


def test_dma_block_descriptor_kinds_run_in_order():
    """Transpose, Transpose back, Replicate, CCE and DMACopy in one block, each reading
    what the one before wrote."""
    S = (2, 3)
    q = dma_queue("q", [dma_block(
        "blk",
        insn("tr1", "DMADescriptorTranspose", "DMA", ins=[whole("a", S)], outs=[whole("t", (3, 2))],
             transpose_op="XYZW"),
        insn("tr2", "DMADescriptorTranspose", "DMA", ins=[whole("t", (3, 2))], outs=[whole("u", S)],
             transpose_op="XYZW"),
        insn("rep", "DMADescriptorReplicate", "DMA", ins=[ap("u", [[3, 1], [1, 3]], offset=3)],
             outs=[whole("r", (4, 3))]),
        insn("cce", "DMADescriptorCCE", "DMA", ins=[whole("r", (4, 3)), whole("r", (4, 3))],
             outs=[whole("s", (4, 3))], op="max"),
        insn("cp", "DMACopy", "DMA", ins=[whole("s", (4, 3))], outs=[whole("out", (4, 3))]),
        sync=sync_info([], [sem_inc(1)]))])
    allocs = [tensor("a", "ExternalInput", shape=S, mem="DRAM"),
              tensor("t", shape=(3, 2), mem="DRAM"), tensor("u", shape=S, mem="DRAM"),
              tensor("r", shape=(4, 3), mem="DRAM"), tensor("s", shape=(4, 3), mem="DRAM"),
              tensor("out", "ExternalOutput", shape=(4, 3), mem="DRAM")]
    mod = main(nop("after", "SP", [sem_wait(1, 1)]),
               insn("trig", "DMATrigger", "DMA", queue="q", dma_blocks=["blk"]),
               allocs=allocs, dma_queues=[q])
    a = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    sim, out = run(mod, {"a": a}, strict=True)
    assert np.array_equal(sim.read("t"), a.T)
    assert np.array_equal(out["out"], np.tile(a[1], (4, 1)))


# ==== metamorphic: the multi-engine pipeline example ==============================

def _pipeline_inputs(T=6, P=16, F=8, M=4):
    rng = np.random.default_rng(11)
    x = rng.integers(-4, 5, (T * P, F)).astype(np.float32)
    w = rng.integers(-3, 4, (P, M)).astype(np.float32)
    tiles = []
    for i in range(T):
        ys = x[i * P:(i + 1) * P] * np.float32(0.5) - np.float32(1)
        zs = np.maximum(ys * np.float32(2), np.float32(0))
        tiles.append(w.T @ zs)          # small integers: exact in any summation order
    return {"x": x, "w": w}, np.concatenate(tiles)


def _pipeline():
    return json.loads((EXAMPLES / "sync_pipeline.json").read_text())


ALL_SCHEDULES = [("in_order", 0), ("round_robin", 0)] + [("random", s) for s in range(50)]


def test_pipeline_example_is_bit_identical_under_every_schedule():
    inputs, ref = _pipeline_inputs()
    mod = birsim.load(_pipeline())
    first = None
    for sched, seed in ALL_SCHEDULES:
        sim, out = run(mod, inputs, schedule=sched, seed=seed, strict=True)
        if first is None:
            first = out["out"]
        assert out["out"].tobytes() == first.tobytes(), (sched, seed)
        engines = sim.stats["engines"]
        assert [engines[e] for e in ("DMA", "DVE", "Activation", "PE")] == [13, 6, 6, 6]
    assert np.array_equal(first, ref)


@pytest.mark.parametrize("stage", ["dve", "act", "pe", "store"])
def test_pipeline_with_one_wait_removed_goes_wrong_under_some_schedule(stage):
    inputs, ref = _pipeline_inputs()
    prog = _pipeline()
    body = prog["functions"][0]["blocks"][0]["instructions"][1]["blocks"][0]["instructions"]
    target = [i for i in body if i["name"] == stage][0]
    assert target["sync_info"]["on_wait"]
    target["sync_info"]["on_wait"] = []
    mod = birsim.load(prog)
    wrong = 0
    for sched, seed in ALL_SCHEDULES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", birsim.BirsimWarning)
                _, out = run(mod, inputs, schedule=sched, seed=seed)
            wrong += not np.array_equal(out["out"], ref)
        except (DeadlockError, SyncError):
            wrong += 1
    assert wrong > 0


def test_two_waits_on_one_event_in_one_instruction_is_a_sync_error():
    # docs/spec/control-flow-sync.md §3.2: the second clear finds the event already cleared (clear-before-set).
    mod = main(nop("set", "SP", updates=[evt_set(5)]),
               nop("use", "DVE", waits=[evt_wait(5), evt_wait(5)]))
    with pytest.raises(SyncError) as info:
        run(mod)
    assert "event 5" in str(info.value) and info.value.instruction == "use"


def test_sem_inc_without_value_counts_by_one():
    bare = {"type": "semaphore", "id": 9, "mode": "sem-inc"}
    mod = main(nop("a", "SP", updates=[bare]), nop("b", "DVE", updates=[dict(bare)]),
               probe("probe", [9]))
    values = sem_values_from_deadlock(deadlock_message(mod), [9])
    assert values[9] == 2
