"""Benchmark: the cost of synchronisation bookkeeping in birsim's scheduler.

    python bench/bench_sync.py [--trips N] [--repeat R]

A 4-engine pipeline (DMA load -> DVE -> Activation -> Pool store) over 1x1 tiles inside
a Loop, every stage handing over to the next through a counting semaphore
(wait sem-ge-imm 1, then sem-dec / sem-inc). The default 25,000 trips execute 100,000
synchronised instructions. The same instruction stream is run again with every
sync_info removed; both are timed in the same process on the thread's CPU time, in R
alternating rounds (medians; the ratio synced / plain is the median of the per-round
ratios, with their spread), and the table reports instructions per second. Tiles are tiny so
the scheduler, not the kernels, dominates. Also times the synced stream under the
round_robin and random schedules, and a 2-core variant (one pipeline per core).
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


def pipeline(trips, synced=True, kernels=True):
    """The benchmark program: ``out[i] = relu(x[i] * 2 + 1)`` for every tile i, 4
    synchronised instructions per trip. Semaphores 0-2 say a buffer is full (a, b, c),
    3-5 that it is free again (credits: the next trip's producer waits for the previous
    trip's consumer, so buffers are reused without a race); the credits start at 1 and
    are reset after the loop. With ``kernels=False`` every instruction is an
    EventSemaphore with the same engine and sync_info: the scheduler's work alone."""
    iv = {"kind": "AffExprKind", "terms": [{"idx": {"kind": "AffIVKind", "axis": "i"},
                                            "coeff": 1}], "c": 0}
    body = [
        {"name": "load", "opcode": "Load", "engine": "DMA",
         "ins": [_ap("x", offset=iv)], "outs": [_ap("a")],
         "sync_info": _sync([3], [(3, "sem-dec"), (0, "sem-inc")])},
        {"name": "dve", "opcode": "TensorScalar", "engine": "DVE",
         "ins": [_ap("a")], "outs": [_ap("b")], "op0": "mult", "const0": 2.0,
         "op1": "add", "const1": 1.0,
         "sync_info": _sync([0, 4], [(0, "sem-dec"), (3, "sem-inc"), (4, "sem-dec"),
                                     (1, "sem-inc")])},
        {"name": "act", "opcode": "Activation", "engine": "Activation",
         "ins": [_ap("b")], "outs": [_ap("c")], "func": "Relu",
         "sync_info": _sync([1, 5], [(1, "sem-dec"), (4, "sem-inc"), (5, "sem-dec"),
                                     (2, "sem-inc")])},
        {"name": "store", "opcode": "TensorCopy", "engine": "Pool",
         "ins": [_ap("c")], "outs": [_ap("out", offset=iv)],
         "sync_info": _sync([2], [(2, "sem-dec"), (5, "sem-inc")])},
    ]
    pre = {"name": "credit", "opcode": "EventSemaphore", "engine": "SP",
           "sync_info": {"on_wait": [], "on_update": [
               {"type": "semaphore", "id": i, "mode": "sem-wr-imm", "value": 1}
               for i in (3, 4, 5)]}}
    post = {"name": "reset", "opcode": "GroupResetSemaphores", "engine": "ALL",
            "sema_group": [3, 4, 5]}
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
    allocs = [_t("x", "ExternalInput", "DRAM", (trips, 1)), _t("a", "Internal", "SB"),
              _t("b", "Internal", "SB"), _t("c", "Internal", "SB"),
              _t("out", "ExternalOutput", "SB", (1, trips))]
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

    pair = paired_runs(synced, plain, {"x": x}, args.repeat)
    print("birsim sync benchmark: 4-engine semaphore pipeline, %d trips, 1x1 tiles, "
          "median of %d runs (CPU time)" % (trips, args.repeat))
    print("%-34s %12s %10s %14s" % ("variant", "instructions", "time (s)", "instr/s"))
    for name, n, t in rows:
        print("%-34s %12d %10.4f %14.0f" % (name, n, t, n / t))
    ratio = pair.ratio
    print("sync bookkeeping: synced / plain time (in_order) = %.3f, spread %s over %d paired "
          "rounds  (sync adds %+.1f%%; target < +50%%)" % (ratio, pair.spread(), args.repeat,
                                                           (ratio - 1) * 100))
    print("round_robin: synced / plain time = %.3f" % (rows[3][2] / t_plain_rr))
    print("share of time in the scheduler (queues, waits, updates, dispatch; same stream "
          "with no kernels) = %.0f%%" % (100 * t_sched / t_sync))
    return 0


if __name__ == "__main__":
    sys.exit(main())
