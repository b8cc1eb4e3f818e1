"""The sync fast paths (issue 24, "sync overhead"): vm/sync.h's inline waits, consumption
and updates, in_order pick's lower bound of the heads and the in-place trip of a
synchronised loop body must leave every step order, result and error as the general
machine and the reference scheduler model (tests/_sync_programs.py RefCore) say.

Orders are read two ways: from the outputs of a plain run (each step appends its number
as an octal digit to its trip's cell, as in tests/sync), which takes the fast paths, and
from ``sim.trace`` of a traced run, which takes the general machine.
"""

import json
import pathlib
import random
import warnings

import numpy as np
import pytest

import birsim
from birsim import SyncError
from bir import ap, function, insn, iv, loop, module, sync_info, tensor, update, wait
from _sync_programs import ROTATION, RefCore, decode_trace

TRIPS = 5


def _cell(name, offset=True):
    o = ap(name, [[1, 1], [1, 1]])
    if offset:
        o["offset"] = iv("i")
    return o


def _step(k, eng, waits, ups):
    """Trip cell x[i] := x[i] * 8 + k."""
    return insn("s%d" % k, "TensorScalar", eng, ins=[_cell("x")], outs=[_cell("x")],
                op0="mult", const0=8.0, op1="add", const1=float(k),
                sync=sync_info(waits, ups) if (waits or ups) else None)


def _loop_program(steps, trips=TRIPS):
    """A Loop whose body is a rendezvous copy of x0[i] into x[i] (a barrier: it runs
    first) followed by the trace steps."""
    body = [insn("init", "TensorCopy", "ALL", ins=[_cell("x0")], outs=[_cell("x")])]
    body += [_step(k, e, w, u) for k, (e, w, u) in enumerate(steps, 1)]
    return module([function("main", [
        tensor("x0", "ExternalInput", "float32", [trips, 1], "DRAM"),
        tensor("x", "ExternalOutput", "float32", [trips, 1], "DRAM")],
        [loop("loop", "i", 0, trips, 1, body)])])


def _random_steps(rng, n):
    """n steps on random engines with semaphore/event waits and every update mode."""
    steps = []
    for _ in range(n):
        waits, ups = [], []
        for _ in range(rng.choice([0, 1, 1, 2])):
            if rng.random() < 0.15:
                waits.append(wait(rng.choice([1, 2]), "evt-set-then-clear", None, "event"))
            else:
                waits.append(wait(rng.choice([0, 1, 2]), "sem-ge-imm", rng.choice([1, 1, 2])))
        for _ in range(rng.choice([1, 2, 3])):
            r, sid = rng.random(), rng.choice([0, 1, 2])
            if r < 0.12:
                ups.append(update(rng.choice([1, 2]), "evt-set", None, "event"))
            elif r < 0.5:
                ups.append(update(sid, "sem-inc", 1))
            elif r < 0.65:
                ups.append(update(sid, "sem-dec", 1))
            elif r < 0.8:
                ups.append(update(sid, "sem-add-imm", rng.choice([1, 2, 3])))
            elif r < 0.9:
                ups.append(update(sid, "sem-sub-imm", 1))
            else:
                ups.append(update(sid, "sem-wr-imm", rng.choice([0, 1, 2])))
        steps.append((rng.choice(ROTATION), waits, ups))
    return steps


def _reference(steps, schedule, trips=TRIPS):
    """Per-trip orders from RefCore with the semaphores carried from trip to trip, or
    None if the program deadlocks, errs or leaves an event set at a trip's end."""
    sem, orders = [0] * 256, []
    for _ in range(trips):
        ref = RefCore(steps)
        ref.sem = list(sem)
        try:
            order = ref.order(schedule)
        except AssertionError:
            return None
        if order is None or any(ref.evt) or any(s < 0 or s > 1000 for s in ref.sem):
            return None
        sem = ref.sem
        orders.append(order)
    return orders


def _programs(schedule, count, seed):
    rng, out = random.Random(seed), []
    while len(out) < count:
        steps = _random_steps(rng, rng.randint(3, 7))
        ref = _reference(steps, schedule)
        if ref is not None:
            out.append((steps, ref))
    return out


def _run(prog, n, **opts):
    sim = birsim.Simulator(birsim.load(prog), **opts)
    out = sim.run({"x0": np.zeros((TRIPS, 1), np.float32)})["x"]
    return sim, [decode_trace(v, n) for v in out.reshape(-1)]


def _traced_orders(sim, steps):
    """Per-trip step numbers from sim.trace (the init barrier and the Loop left out)."""
    names = ["s%d" % k for k in range(1, len(steps) + 1)]
    seq = [int(r.instruction[1:]) for r in sim.trace if r.instruction in names]
    n = len(steps)
    return [seq[t * n:(t + 1) * n] for t in range(TRIPS)]


@pytest.mark.parametrize("schedule", ["in_order", "round_robin"])
def test_synchronised_loop_orders_match_the_reference(schedule):
    """Random synchronised loop bodies (blocked heads let later offsets run first, so
    in_order's lower bound of the heads falls behind; every trip restarts the queues in
    place): the plain run's per-trip orders and the traced run's are RefCore's."""
    for steps, ref in _programs(schedule, 40, seed=24 if schedule == "in_order" else 25):
        prog = _loop_program(steps)
        sim, got = _run(prog, len(steps), schedule=schedule)
        assert got == ref, (steps, got, ref)
        tsim, tgot = _run(prog, len(steps), schedule=schedule, trace=True)
        assert tgot == ref
        assert _traced_orders(tsim, steps) == ref
        assert tsim.stats["instructions"] == sim.stats["instructions"]


def test_in_order_takes_later_heads_when_the_first_is_blocked():
    """s1 (Pool) waits for s3 (DVE), s2 (Pool) is behind s1 in its queue, s3 waits for
    nothing: in_order runs s3, s1, s2 every trip, and s4 (DVE) after s1's update."""
    steps = [("Pool", [wait(0, "sem-ge-imm", 1)], [update(0, "sem-dec", 1),
                                                   update(1, "sem-inc", 1)]),
             ("Pool", [], [update(2, "sem-inc", 1)]),
             ("DVE", [], [update(0, "sem-inc", 1)]),
             ("DVE", [wait(1, "sem-ge-imm", 1)], [update(1, "sem-dec", 1)])]
    ref = _reference(steps, "in_order")
    assert ref == [[3, 1, 2, 4]] * TRIPS
    _, got = _run(_loop_program(steps), 4)
    assert got == ref


@pytest.mark.parametrize("trace", [False, True])
def test_bad_sem_inc_value_is_still_a_sync_error_at_the_instruction(trace):
    """A sem-inc of 2 (value must be 1) after valid updates: SyncError naming the
    instruction, the same message in the plain and the general machine, and the updates
    before it applied (the fast path hands it to vm/sync.c in order)."""
    steps = [("DVE", [], [update(3, "sem-inc", 1), update(4, "sem-inc", 2)])]
    with pytest.raises(SyncError) as ei:
        _run(_loop_program(steps), 1, trace=trace)
    msg = str(ei.value)
    assert "semaphore 4: sem-inc value must be 1, got 2" in msg
    assert "'s1'" in msg


def _sync_examples():
    root = pathlib.Path(__file__).resolve().parents[2] / "examples"
    return sorted(p for p in root.glob("*.json")       # custom ops need their kernels
                  if "sync_info" in p.read_text() and "CustomOp" not in p.read_text())


def _inputs(module):
    rng = np.random.default_rng(0)
    return {t.name: rng.random(t.shape).astype(birsim.dtypes.numpy_dtype(t.dtype))
            for t in module.inputs}


@pytest.mark.parametrize("path", _sync_examples(), ids=lambda p: p.stem)
def test_sync_examples_plain_and_traced_machines_agree(path):
    """Each example with sync_info under in_order, round_robin and random seeds: the
    plain run (fast paths) gives the traced run's (general machine's) outputs and step
    count, and the traced order is the same for the same seed whatever else is on."""
    mod = birsim.load(json.loads(path.read_text()))
    inputs = _inputs(mod)
    for opts in ({"schedule": "in_order"}, {"schedule": "round_robin"},
                 {"schedule": "random", "seed": 1}, {"schedule": "random", "seed": 7}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", birsim.BirsimWarning)
            plain = birsim.Simulator(mod, **opts)
            out = plain.run(inputs)
            traced = birsim.Simulator(mod, trace=True, **opts)
            tout = traced.run(inputs)
            checked = birsim.Simulator(mod, trace=True, checks="all", **opts)
            checked.run(inputs)
        assert plain.stats["instructions"] == traced.stats["instructions"]
        for k in out:
            assert np.array_equal(np.asarray(out[k]).view(np.uint8),
                                  np.asarray(tout[k]).view(np.uint8)), (path.stem, opts, k)
        order = [(r.core, r.instruction, r.step) for r in traced.trace]
        assert order == [(r.core, r.instruction, r.step) for r in checked.trace]
