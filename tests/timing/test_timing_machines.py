"""The timed step machine (vm/interp.c, bs_sim_plain() == 2) against the general one.

A run whose only hook is the timing model (``timing=True`` or ``timing="only"``, or
``trace=True``, which records what the timing model computes; no checker, breakpoint or
deferred DMA) steps with a copy of the step machine that tests nothing but the timing
model's hooks; with a checker on, the same run goes through the general machine. Both must
model the same time: the whole profile (every engine's busy time, the DMA bytes and
histogram, the MACs, the total), the trace (every record, its times and the updates that
released it) and the outputs are the same, on every shipped example and multi-engine bench
program, on every schedule the sync tests use.
"""

import numpy as np
import pytest

from test_sync_examples import CASES, _run, prepared

SCHEDULES = [dict(schedule="in_order"), dict(schedule="round_robin"),
             dict(schedule="random", seed=3)]


def _profile(sim):
    d = sim.profile.as_dict()
    d.pop("critical_path")                  # only with trace=True: empty on both
    return d


@pytest.mark.parametrize("timing", [True, "only"])
@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_timed_machine_models_what_the_general_one_does(kind, name, timing):
    module, inputs, cores = prepared(kind, name)
    for kw in SCHEDULES:
        timed, out = _run(module, inputs, cores, timing=timing, **kw)
        general, ref = _run(module, inputs, cores, timing=timing, checks="uninitialized", **kw)
        assert _profile(timed) == _profile(general), kw
        assert timed.profile.total_ns > 0
        assert timed.stats["instructions"] == general.stats["instructions"]
        assert out.keys() == ref.keys()
        for k in ref:
            assert np.array_equal(out[k].view(np.uint8), ref[k].view(np.uint8)), (kw, k)


@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_traced_timed_machine_records_what_the_general_one_does(kind, name):
    module, inputs, cores = prepared(kind, name)
    for kw in SCHEDULES:
        timed, out = _run(module, inputs, cores, trace=True, **kw)
        general, ref = _run(module, inputs, cores, trace=True, checks="uninitialized", **kw)
        assert len(timed.trace) == timed.stats["instructions"] > 0
        assert list(timed.trace) == list(general.trace), kw
        assert timed.trace.dropped == general.trace.dropped == 0
        for k in ref:
            assert np.array_equal(out[k].view(np.uint8), ref[k].view(np.uint8)), (kw, k)
