"""Benchmark: the cost of synchronisation bookkeeping in birsim's scheduler.

    python bench/bench_sync.py [--trips N] [--repeat R]

Issue 24's 5-engine pipeline (DMA load -> DVE -> Activation -> SP copy -> Pool store)
and the original 4-engine one (without the SP copy) over 1x1 tiles inside a Loop, every
stage handing over to the next through a counting semaphore (wait sem-ge-imm 1, then
sem-dec / sem-inc). The default 25,000 trips execute 125,000 (100,000) synchronised
instructions. The same instruction stream is run again with every sync_info removed; both
are timed in the same process on the thread's CPU time, in R alternating rounds (medians;
the ratio synced / plain is the median of the per-round ratios, with their spread), and
the table reports instructions per second. Tiles are tiny so the scheduler, not the
kernels, dominates. Also times the 4-engine synced stream under the round_robin and random
schedules, and a 2-core variant (one pipeline per core). Target (issue 24): the 5-engine
synced / plain ratio <= 1.15.
"""

import argparse
import statistics
import sys
import time
import warnings

import numpy as np

import birsim
from _common import paired


def _ap(loc, dtype="float32", offset=None):
    o = {"kind": "physical_ap", "memref": loc, "dtype": dtype, "ap": [[1, 1], [1, 1]]}
    if offset is not None:
        o["offset"] = offset
    return o


def _t(name, kind, mem, shape=(1, 1)):
    return {"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": "float32",
            "tensor_shape": list(shape),
            "memorylocations": [{"name": name, "type": mem,
                                 "dims": [shape[0], shape[1] * 4]}]}


def _sync(waits, updates):
    return {"on_wait": [{"type": "semaphore", "id": i, "mode": "sem-ge-imm", "value": 1}
                        for i in waits],
            "on_update": [{"type": "semaphore", "id": i, "mode": m, "value": 1}
                          for i, m in updates]}


#: The stages of the pipelines, in order: (engine, opcode, keys). The 5-engine pipeline
#: (issue 24's) adds an SP copy between the Activation and the Pool store.
STAGES = {
    4: ["load", "dve", "act", "store"],
    5: ["load", "dve", "act", "sp", "store"],
}
_STAGE = {
    "load": ("DMA", "Load", {}),
    "dve": ("DVE", "TensorScalar", {"op0": "mult", "const0": 2.0, "op1": "add", "const1": 1.0}),
    "act": ("Activation", "Activation", {"func": "Relu"}),
    "sp": ("SP", "TensorCopy", {}),
    "store": ("Pool", "TensorCopy", {}),
}


def pipeline(trips, synced=True, kernels=True, engines=4):
    """The benchmark program: ``out[i] = relu(x[i] * 2 + 1)`` for every tile i, one
    synchronised instruction per stage and trip (``engines`` stages: STAGES). With n
    stages, semaphores 0..n-2 say a buffer is full, n-1..2n-3 that it is free again
    (credits: the next trip's producer waits for the previous trip's consumer, so buffers
    are reused without a race); the credits start at 1 and are reset after the loop.
    With ``kernels=False`` every instruction is an EventSemaphore with the same engine
    and sync_info: the scheduler's work alone."""
    iv = {"kind": "AffExprKind", "terms": [{"idx": {"kind": "AffIVKind", "axis": "i"},
                                            "coeff": 1}], "c": 0}
    names = STAGES[engines]
    n = len(names)
    bufs = ["abcd"[k] for k in range(n - 1)]
    full, credit = list(range(n - 1)), list(range(n - 1, 2 * n - 2))
    body = []
    for s, name in enumerate(names):
        engine, opcode, keys = _STAGE[name]
        waits, updates = [], []
        if s > 0:
            waits.append(full[s - 1])
            updates += [(full[s - 1], "sem-dec"), (credit[s - 1], "sem-inc")]
        if s < n - 1:
            waits.append(credit[s])
            updates += [(credit[s], "sem-dec"), (full[s], "sem-inc")]
        ins = [_ap(bufs[s - 1])] if s > 0 else [_ap("x", offset=iv)]
        outs = [_ap(bufs[s])] if s < n - 1 else [_ap("out", offset=iv)]
        body.append(dict({"name": name, "opcode": opcode, "engine": engine, "ins": ins,
                          "outs": outs, "sync_info": _sync(waits, updates)}, **keys))
    pre = {"name": "credit", "opcode": "EventSemaphore", "engine": "SP",
           "sync_info": {"on_wait": [], "on_update": [
               {"type": "semaphore", "id": i, "mode": "sem-wr-imm", "value": 1}
               for i in credit]}}
    post = {"name": "reset", "opcode": "GroupResetSemaphores", "engine": "ALL",
            "sema_group": credit}
    if not kernels:
        for ins in body:
            ins.update(opcode="EventSemaphore", ins=[], outs=[])
            for k in ("op0", "const0", "op1", "const1", "func"):
                ins.pop(k, None)
    if not synced:
        for ins in body:
            del ins["sync_info"]
        pre = dict(pre, sync_info=None)
        del pre["sync_info"]
        post = dict(post, sema_group=[])
    allocs = [_t("x", "ExternalInput", "DRAM", (trips, 1))]
    allocs += [_t(b, "Internal", "SB") for b in bufs]
    allocs.append(_t("out", "ExternalOutput", "SB", (1, trips)))
    main = [pre, {"name": "loop", "opcode": "Loop", "engine": "Unassigned",
                  "LoopAxis": {"name": "i", "lb": 0, "ub": trips, "stride": 1},
                  "blocks": [{"name": "body", "instructions": body}]}, post]
    return {"version": 2, "arch": "gen3",
            "functions": [{"name": "main", "allocations": allocs,
                           "blocks": [{"name": "entry", "instructions": main}]}]}


def timed(module, inputs, repeat, **opts):
    """Median CPU time of `repeat` runs, instructions, last outputs."""
    sim = birsim.Simulator(module, **opts)
    times, out = [], None
    for _ in range(repeat):
        t0 = time.thread_time()
        out = sim.run(inputs)
        times.append(time.thread_time() - t0)
    return statistics.median(times), sim.stats["instructions"], out


def paired_runs(mod_a, mod_b, inputs, repeat):
    """Alternating rounds of one run of each (CPU time): a _common.Pair (a / b)."""
    sa, sb = birsim.Simulator(mod_a), birsim.Simulator(mod_b)

    def run(sim):
        t0 = time.thread_time()
        sim.run(inputs)
        return time.thread_time() - t0
    return paired(lambda: run(sa), lambda: run(sb), repeat, warm=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trips", type=int, default=25000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    trips = args.trips
    x = np.linspace(-1, 1, trips, dtype=np.float32).reshape(trips, 1)
    ref = np.maximum(x * np.float32(2) + np.float32(1), np.float32(0)).reshape(1, trips)
    synced = birsim.load(pipeline(trips, True))
    plain = birsim.load(pipeline(trips, False))

    rows = []
    t_plain, n_plain, o = timed(plain, {"x": x}, args.repeat)
    assert np.array_equal(o["out"], ref)
    rows.append(("plain (no sync_info), in_order", n_plain, t_plain))
    t_sync, n_sync, o = timed(synced, {"x": x}, args.repeat)
    assert np.array_equal(o["out"], ref)
    rows.append(("synced, in_order", n_sync, t_sync))
    with warnings.catch_warnings():          # without its semaphores the stream races
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        t_plain_rr, _, o = timed(plain, {"x": x}, args.repeat, schedule="round_robin")
    rows.append(("plain, round_robin (racy)", n_plain, t_plain_rr))
    for sched in ("round_robin", "random"):
        t, n, o = timed(synced, {"x": x}, args.repeat, schedule=sched, seed=1)
        assert np.array_equal(o["out"], ref)
        rows.append(("synced, " + sched, n, t))
    t_sched, n_sched, _ = timed(birsim.load(pipeline(trips, True, kernels=False)),
                                {"x": x}, args.repeat)
    rows.append(("synced, in_order, no kernels", n_sched, t_sched))
    t, n, o = timed(synced, {"x": x}, args.repeat, cores=2)
    assert np.array_equal(o["out"], ref)
    rows.append(("synced, in_order, 2 cores", n, t))

    synced5 = birsim.load(pipeline(trips, True, engines=5))
    plain5 = birsim.load(pipeline(trips, False, engines=5))
    t, n, o = timed(plain5, {"x": x}, args.repeat)
    assert np.array_equal(o["out"], ref)
    rows.append(("5-engine plain, in_order", n, t))
    t, n, o = timed(synced5, {"x": x}, args.repeat)
    assert np.array_equal(o["out"], ref)
    rows.append(("5-engine synced, in_order", n, t))

    pair5 = paired_runs(synced5, plain5, {"x": x}, args.repeat)
    pair = paired_runs(synced, plain, {"x": x}, args.repeat)
    print("birsim sync benchmark: 5- and 4-engine semaphore pipelines, %d trips, 1x1 tiles, "
          "median of %d runs (CPU time)" % (trips, args.repeat))
    print("%-34s %12s %10s %14s" % ("variant", "instructions", "time (s)", "instr/s"))
    for name, n, t in rows:
        print("%-34s %12d %10.4f %14.0f" % (name, n, t, n / t))
    for name, pr in (("5-engine", pair5), ("4-engine", pair)):
        print("sync bookkeeping, %s: synced / plain time (in_order) = %.3f, spread %s over %d "
              "paired rounds  (sync adds %+.1f%%; target <= +15%%)"
              % (name, pr.ratio, pr.spread(), args.repeat, (pr.ratio - 1) * 100))
    print("round_robin: synced / plain time = %.3f" % (rows[3][2] / t_plain_rr))
    print("share of time in the scheduler (queues, waits, updates, dispatch; same stream "
          "with no kernels) = %.0f%%" % (100 * t_sched / t_sync))
    return 0


if __name__ == "__main__":
    sys.exit(main())
