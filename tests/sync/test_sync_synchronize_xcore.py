"""birsim.synchronize across cores (shared DRAM tensors of a module list, ordered with
``target_core`` semaphore updates) and with overlapped DMA queues (a trigger's blocks
are waited for only by what needs their bytes)."""

import warnings

import numpy as np
import pytest

import birsim
from birsim import build as B

SEEDS = range(100)


def _findings(prog, inputs, **kw):
    sim = birsim.Simulator(prog, checks="all", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        out = sim.run(inputs)
    return out, sim.findings


def _races(prog, inputs, **kw):
    return [f for f in _findings(prog, inputs, **kw)[1] if f.kind == "races"]


def _schedules():
    return [dict(schedule="in_order"), dict(schedule="round_robin")] + \
        [dict(schedule="random", seed=s) for s in SEEDS]


def _assert_schedule_independent(prog, inputs, want, **kw):
    """Race-free under checks="all" and bit-identical to ``want`` under in_order,
    round_robin and 100 random seeds."""
    out, findings = _findings(prog, inputs, **kw)
    assert findings == []
    for name, ref in want.items():
        np.testing.assert_array_equal(out[name], ref)
    for sk in _schedules():
        got = birsim.Simulator(prog, **kw, **sk).run(inputs)
        for name, ref in want.items():
            np.testing.assert_array_equal(got[name], ref, err_msg=str(sk))


# {=== DMA queues: overlapped, not drained ===}

def _pipeline(T=4, P=16, F=64):
    """load (SP fires block in_k of queue qin: x tile k -> xs_k), compute (DVE: ys_k =
    2 xs_k, Activation: zs_k = relu(ys_k)), store (Activation fires block out_k of qout:
    zs_k -> out tile k), T tiles unrolled, each tile its own buffers: nothing orders the
    load of tile k + 1 after the compute of tile k but the sync a pass inserts. No sync."""
    x = B.tensor("x", "ExternalInput", "float32", [P, T * F], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [P, T * F], "DRAM")
    xs = [B.tensor("xs%d" % k, "Internal", "float32", [P, F], "SB") for k in range(T)]
    ys = [B.tensor("ys%d" % k, "Internal", "float32", [P, F], "SB") for k in range(T)]
    zs = [B.tensor("zs%d" % k, "Internal", "float32", [P, F], "SB") for k in range(T)]

    def tile(t, k):
        return B.ap(t, [[T * F, P], [1, F]], offset=k * F)
    qin = B.dma_queue("qin", [B.dma_block("in%d" % k, B.dma_descriptor(
        tile(x, k), B.whole(xs[k]), name="d_in%d" % k))
                              for k in range(T)])
    qout = B.dma_queue("qout", [B.dma_block("out%d" % k, B.dma_descriptor(
        B.whole(zs[k]), tile(out, k), name="d_out%d" % k))
                                for k in range(T)])
    code = []
    for k in range(T):
        code += [B.dma_trigger("qin", ["in%d" % k], engine="SP", name="load%d" % k),
                 B.tensor_scalar(B.whole(xs[k]), B.whole(ys[k]), "mult", 2.0, name="scale%d" % k),
                 B.activation(B.whole(ys[k]), B.whole(zs[k]), "Relu", name="relu%d" % k),
                 B.dma_trigger("qout", ["out%d" % k], engine="Activation",
                               name="store%d" % k)]
    return B.module([B.function("main", [x, out] + xs + ys + zs, code)], dma_queues=[qin, qout])


def _names_waited_for(prog, name):
    for b in prog["functions"][0]["blocks"]:
        for i in b["instructions"]:
            if i.get("name") == name:
                return [w.get("from") for w in i.get("sync_info", {}).get("on_wait", [])]
    raise KeyError(name)


def _makespan(prog, inputs):
    sim = birsim.Simulator(prog, timing="only")
    sim.run(inputs)
    return sim.profile.total_ns


def test_dma_pipeline_overlaps_loads_with_compute_and_stays_race_free():
    prog = _pipeline()
    x = np.random.default_rng(3).standard_normal((16, 256)).astype(np.float32)
    assert _races(prog, {"x": x}), "the test program must race without synchronize"
    synced = birsim.synchronize(prog)
    drained = birsim.synchronize(prog, overlap_dma=False)
    want = {"out": np.maximum(x * np.float32(2.0), 0)}
    _assert_schedule_independent(synced, {"x": x}, want)
    _assert_schedule_independent(synced, {"x": x}, want, dma_mode="deferred")
    _assert_schedule_independent(drained, {"x": x}, want)
    # nothing orders load k + 1 after the compute of tile k: no trigger waits at all
    # (its blocks write fresh tiles), and no drain follows a trigger
    for k in range(4):
        assert _names_waited_for(synced, "load%d" % k) == []
    names = [i["name"] for i in synced["functions"][0]["blocks"][0]["instructions"]]
    assert not [n for n in names if n.startswith("sync_drain")]
    assert [n for n in _names_waited_for(drained, "sync_drain_load1")] == ["load1"]
    # the compute waits for its own tile's block, the store for the compute
    assert _names_waited_for(synced, "scale2") == ["load2"]
    assert _names_waited_for(synced, "store2") == []          # relu2 precedes it on Activation
    # modelled time: the queues overlap compute (a drained store stalls Activation's next
    # relu), so the overlapped program is faster
    assert _makespan(synced, {"x": x}) < _makespan(drained, {"x": x})


def test_every_wait_of_the_overlapped_pipeline_is_needed():
    synced = birsim.synchronize(_pipeline(T=3))
    recs = birsim.audit(synced, schedules=("in_order", "round_robin", 0, 1))
    assert recs and all(r["label"] == "needed" for r in recs
                        if not r["instruction"].startswith("sync_reset")), \
        [(r["instruction"], r["label"]) for r in recs]
