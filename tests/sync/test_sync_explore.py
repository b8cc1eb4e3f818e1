"""Schedule exploration (issue 22 item 4): recorded schedules replay exactly, PCT finds a
race that needs a rare order, shrink keeps only the decisions that matter. Outputs are
checked against NumPy references computed from what each order means."""

import warnings

import numpy as np
import pytest

import birsim
from birsim import build as B

W = B.whole
A = np.arange(32, dtype=np.float32).reshape(4, 8)


def _racy(L=12, fixed=False, act=0):
    """Pool writes x := a, then x := a + 100; DVE starts after the first write, runs a
    chain of L instructions (t := a, t += 1 L-1 times) and then y := t + x, unordered with
    the second write (the race; ``fixed``: DVE's last waits for it). Only if DVE wins
    L + 1 choices in a row against Pool does it read x = a. ``act`` adds an independent
    Activation chain (decisions that do not matter)."""
    a = B.tensor("a", "ExternalInput", "float32", [4, 8], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 8], "DRAM")
    tiles = [B.tensor(n, "Internal", "float32", [4, 8], "SB") for n in ("sa", "x", "t", "y", "z")]
    sa, x, t, y, z = tiles
    ins = [B.load_(W(a), W(sa), sync=B.sync_info([], [B.sem_inc(0)])),
           B.tensor_scalar(W(sa), W(x), "mult", 1.0, engine="Pool",
                           sync=B.sync_info([B.sem_wait(0)], [B.sem_inc(1)])),
           B.tensor_scalar(W(sa), W(x), "add", 100.0, engine="Pool",
                           sync=B.sync_info([], [B.sem_inc(3)]) if fixed else None),
           B.tensor_scalar(W(sa), W(t), "mult", 1.0, sync=B.sync_info([B.sem_wait(1)], []))]
    ins += [B.tensor_scalar(W(t), W(t), "add", 1.0) for _ in range(L - 1)]
    ins += [B.tensor_tensor(W(t), W(x), W(y), "add",
                            sync=B.sync_info([B.sem_wait(3)] if fixed else [], [B.sem_inc(2)])),
            B.save(W(y), W(out), sync=B.sync_info([B.sem_wait(2)], []))]
    if act:
        ins += [B.tensor_scalar(W(sa), W(z), "mult", 2.0, engine="Activation",
                                sync=B.sync_info([B.sem_wait(0)], []))]
        ins += [B.tensor_scalar(W(z), W(z), "add", 1.0, engine="Activation")
                for _ in range(act - 1)]
    return birsim.load(B.module([B.function("main", [a, out] + tiles, [B.block("b0", *ins)])]))


def _good(L=12):
    return A + np.float32(L - 1) + (A + np.float32(100))


def _bad(L=12):
    return A + np.float32(L - 1) + A


def _trace(sim):
    return [(r.core, r.instruction) for r in sim.trace]


def test_in_order_and_race_free_results_match_numpy():
    assert np.array_equal(birsim.Simulator(_racy()).run({"a": A})["out"], _good())
    assert np.array_equal(birsim.Simulator(_racy(fixed=True), schedule="random", seed=3)
                          .run({"a": A})["out"], _good())


@pytest.mark.parametrize("schedule", ["random", "round_robin", "in_order", birsim.PCT(2, 20)])
def test_recorded_schedule_replays_exactly(schedule):
    m = _racy(L=4, act=3)
    for seed in range(8):
        rec = birsim.Simulator(m, schedule=schedule, seed=seed, record=True, trace=True)
        out = rec.run({"a": A})
        sched = rec.recorded
        assert isinstance(sched, birsim.Schedule) and len(sched) > 0
        rep = birsim.Simulator(m, schedule=sched, trace=True)
        out2 = rep.run({"a": A})
        assert _trace(rep) == _trace(rec)
        assert rep.stats["steps"] == rec.stats["steps"]
        assert np.array_equal(out["out"], out2["out"])
        # a list of decisions is a schedule too; a second run replays it again
        rep2 = birsim.Simulator(m, schedule=list(sched.decisions), trace=True)
        rep2.run({"a": A})
        rep2.run({"a": A})
        assert _trace(rep2) == _trace(rec)


def test_recording_does_not_change_the_run():
    m = _racy(L=4, act=3)
    for seed in range(5):
        plain = birsim.Simulator(m, schedule="random", seed=seed, trace=True)
        plain.run({"a": A})
        rec = birsim.Simulator(m, schedule="random", seed=seed, trace=True, record=True)
        rec.run({"a": A})
        assert _trace(plain) == _trace(rec)
    plain = birsim.Simulator(m, schedule="round_robin", trace=True)
    plain.run({"a": A})
    rec = birsim.Simulator(m, schedule="round_robin", trace=True, record=True)
    rec.run({"a": A})
    assert _trace(plain) == _trace(rec)
    assert birsim.Simulator(m).recorded is None


def test_empty_and_foreign_decisions_take_the_in_order_default():
    m = _racy(L=4, act=3)
    ref = birsim.Simulator(m, trace=True)
    ref.run({"a": A})
    for dec in ([], [-1, -1, -1], [99, 42, 7, 6, 5]):   # 99, 42: no such queue
        sim = birsim.Simulator(m, schedule=birsim.Schedule(dec), trace=True)
        if dec and dec[0] == 99:
            sim.run({"a": A})     # 7, 6, 5 may name a ready queue: a legal other order
            continue
        sim.run({"a": A})
        assert _trace(sim) == _trace(ref)


def test_schedule_argument_errors():
    m = _racy(L=2)
    with pytest.raises(ValueError, match="decision"):
        birsim.Schedule([-2])
    with pytest.raises(TypeError, match="schedule must be"):
        birsim.Simulator(m, schedule=3.5)
    with pytest.raises(ValueError, match="schedule must be one of"):
        birsim.Simulator(m, schedule="fastest")
    with pytest.raises(ValueError, match="depth"):
        birsim.PCT(depth=-1)
    with pytest.raises(ValueError, match="strategy"):
        birsim.explore(m, {"a": A}, runs=1, strategy="bfs")
    with pytest.raises(TypeError, match="schedule"):
        birsim.explore(m, {"a": A}, runs=1, schedule="random")


def test_pct_finds_a_rare_order_that_random_misses():
    """The bad order needs DVE to win 13 choices in a row against Pool: about 1 in 8192
    for the random schedule, a fixed fraction of PCT runs (DVE's priority above Pool's)."""
    m = _racy(L=12)
    found = {}
    for strategy in ("pct", "random"):
        res = birsim.explore(m, {"a": A}, runs=60, strategy=strategy)
        assert res.runs == 61
        assert np.array_equal(res.reference.outputs["out"], _good())
        for o in res.outcomes[1:]:
            assert np.array_equal(o.outputs["out"], _bad())
        found[strategy] = len(res.failing)
        if strategy == "pct":
            pct = res
    assert found["pct"] >= 5, found
    assert found["random"] == 0, found
    # every failing schedule replays to the failing outputs
    for s in pct.failing:
        assert np.array_equal(birsim.Simulator(m, schedule=s).run({"a": A})["out"], _bad())


def test_shrink_keeps_only_the_decisions_that_matter():
    m = _racy(L=6, act=8)
    res = birsim.explore(m, {"a": A}, runs=40, strategy="pct", depth=1)
    assert res.failing
    big = max(res.failing, key=lambda s: s.n_decisions)
    small = res.shrink(big)
    assert small.n_decisions < big.n_decisions
    assert np.array_equal(birsim.Simulator(m, schedule=small).run({"a": A})["out"], _bad(6))
    # minimal: DVE must beat Pool at each of its 7 instructions after the first write,
    # and the Activation chain's decisions are all gone
    assert small.n_decisions == 7
    dve = dict(birsim._birsim.enums["ENGINE"])["DVE"]              # its EngineType value
    assert set(d for d in small.decisions if d >= 0) == {dve}
    with pytest.raises(ValueError, match="does not fail"):
        res.shrink(res.reference.schedules[0])
    assert birsim.shrink(m, {"a": A}, big).n_decisions == 7


def test_race_free_program_gives_exactly_one_outcome():
    res = birsim.explore(_racy(fixed=True), {"a": A}, runs=40, strategy="all")
    assert len(res.outcomes) == 1 and res.failing == []
    assert np.array_equal(res.outcomes[0].outputs["out"], _good())


def _sem_write_race():
    """Pool sets semaphore 0 := 1 and DVE adds 1; a consumer waits for 2: fine when
    Pool's write comes first, a deadlock when DVE's add does."""
    a = B.tensor("a", "ExternalInput", "float32", [4, 8], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 8], "DRAM")
    s = B.tensor("s", "Internal", "float32", [4, 8], "SB")
    ins = [B.load_(W(a), W(s), sync=B.sync_info([], [B.sem_inc(1)])),
           B.tensor_scalar(W(s), W(s), "mult", 2.0, engine="Pool",
                           sync=B.sync_info([B.sem_wait(1)],
                                            [B.update(0, "sem-wr-imm", 1, type="semaphore")])),
           B.insn("EventSemaphore", "DVE", sync=B.sync_info([B.sem_wait(1)], [B.sem_inc(0)])),
           B.save(W(s), W(out), engine="SP", sync=B.sync_info([B.sem_wait(0, 2)], []))]
    return birsim.load(B.module([B.function("main", [a, out, s], [B.block("b0", *ins)])]))


def test_a_deadlocking_order_is_a_failing_outcome_and_replays():
    m = _sem_write_race()
    res = birsim.explore(m, {"a": A}, runs=20, strategy="random")
    assert np.array_equal(res.reference.outputs["out"], A * 2)
    dead = [o for o in res.outcomes if o.deadlock]
    assert len(res.outcomes) == 2 and len(dead) == 1 and dead[0].outputs is None
    for s in dead[0].schedules:
        assert s in res.failing
        with pytest.raises(birsim.DeadlockError):
            birsim.Simulator(m, schedule=s).run({"a": A})
    small = res.shrink(dead[0].schedules[0])
    assert small.n_decisions == 1


def _two_core_race():
    """Core 0 writes sh := 0 * x and reads it back into out; core 1 writes sh := 3x with
    no ordering against either (a cross-core race through shared DRAM)."""
    S = [2, 8]
    x = B.tensor("x", "ExternalInput", "float32", S, "DRAM")
    sh = B.tensor("sh", "Internal", "float32", S, "DRAM", addr_space="Shared")
    out = B.tensor("out", "ExternalOutput", "float32", S, "DRAM")
    r = B.register("r", "int32")
    blocks = [
        B.block("entry", B.insn("GetGlobalRankId", "Pool", outs=[B.reg("r")]),
                B.compare_and_branch(B.reg("r"), B.imm(1, "int32"), "IS_EQIMM",
                                     "producer", "consumer")),
        B.block("producer", B.tensor_scalar(W(x), W(sh), "mult", 3.0),
                B.branch("done")),
        B.block("consumer", B.tensor_scalar(W(x), W(sh), "mult", 0.0, engine="Pool"),
                B.tensor_scalar(W(sh), W(out), "add", 1.0, engine="Pool")),
        B.block("done"),
    ]
    return birsim.load(B.module([B.function("main", [x, sh, out, r], blocks)]))


def test_cores_are_explored_and_replayed():
    m = _two_core_race()
    xv = np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        res = birsim.explore(m, {"x": xv}, runs=30, strategy="all", cores=2)
        got = {o.outputs["out"].tobytes() for o in res.outcomes}
        assert got == {(xv * np.float32(0) + np.float32(1)).tobytes(),
                       (xv * np.float32(3) + np.float32(1)).tobytes()}
        for o in res.outcomes:
            for s in o.schedules[:5]:
                sim = birsim.Simulator(m, schedule=s, cores=2)
                assert np.array_equal(sim.run({"x": xv})["out"], o.outputs["out"])
        small = res.shrink(res.failing[0])
        # the default steps core 0 whenever it can: core 1 must be chosen for each of its
        # three steps (rank, branch, write) before core 0's read, and only then
        assert small.n_decisions == 3 and set(small.decisions) == {-1, 1}
        assert np.array_equal(birsim.Simulator(m, schedule=small, cores=2).run({"x": xv})["out"],
                              xv * np.float32(3) + np.float32(1))


def test_a_schedule_set_before_the_first_run_takes_effect():
    """Simulator() leaves memory pristine, so the first run's reset is skipped when no input
    was written; a schedule, seed or decision list set in between must still reseed the
    generator and restart the replay (explore reuses one Simulator this way)."""
    x = B.tensor("x", "Internal", "float32", [4, 8], "SB")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 8], "DRAM")
    body = []
    for k in range(6):          # two engines racing on x: the decisions depend on the seed
        last = k == 5
        body += [B.insn("Memset", "Pool", outs=[W(x)], value=float(k),
                        sync=B.sync_info([], [B.sem_inc(0)]) if last else None),
                 B.insn("Memset", "DVE", outs=[W(x)], value=float(-k),
                        sync=B.sync_info([], [B.sem_inc(1)]) if last else None)]
    body.append(B.save(W(x), W(out), sync=B.sync_info([B.sem_wait(0), B.sem_wait(1)], [])))
    m = birsim.load(B.module([B.function("main", [x, out], [B.block("b0", *body)])]))
    fresh = birsim.Simulator(m, schedule="random", seed=5, record=True)
    fresh.run()
    reused = birsim.Simulator(m, schedule="random", seed=1, record=True)
    reused._set_schedule("random", seed=5)
    reused.run()
    assert reused.recorded.decisions == fresh.recorded.decisions
    other = birsim.Simulator(m, schedule="random", seed=1, record=True)
    other.run()
    assert other.recorded.decisions != fresh.recorded.decisions
