"""Benchmark: data movement by index and collectives against NumPy, in the same run.

    python bench/bench_data.py [--repeat R]

1. Gather of 4,096 rows of 512 fp32 by random indices (IndirectLoad, DRAM table of 8,192
   rows -> DRAM) against NumPy fancy indexing ``table[idx]``. Target <= 2x.
2. A 2-core all-reduce of [128, 2048] fp32 SBUF tiles (CollectiveCompute AllReduce add)
   against ``np.add(a, b, out=c)``. Target <= 3x.

Each instruction runs K times in a Loop; its cost is (run with K trips - run with 1 trip)
/ (K - 1), so input marshalling and run setup are excluded. birsim and NumPy are timed
alternately (bench/_common.py ``paired``): medians, the median ratio and its spread.
"""

import argparse
import time
import warnings

import numpy as np

import birsim
from _common import fmt_time, paired, table

R, N, W = 8192, 4096, 512
P, F = 128, 2048


def _t(name, kind, shape, dtype="float32", mem="DRAM", **kw):
    size = 4
    return dict({"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": dtype,
                 "tensor_shape": list(shape),
                 "memorylocations": [{"name": name, "type": mem,
                                      "dims": [shape[0], shape[1] * size]}]}, **kw)


def _whole(name, shape, dtype="float32"):
    return {"kind": "physical_ap", "memref": name, "dtype": dtype,
            "ap": [[shape[1], shape[0]], [1, shape[1]]]}


def _looped(pre, body, trips, allocs):
    loop = {"name": "rep", "opcode": "Loop", "engine": "Unassigned",
            "LoopAxis": {"name": "k", "lb": 0, "ub": trips, "stride": 1},
            "blocks": [{"name": "rep_body", "instructions": body}]}
    return {"version": 2, "arch": "gen3", "functions": [{
        "name": "main", "allocations": allocs,
        "blocks": [{"name": "b0", "instructions": pre + [loop]}]}]}


def gather_program(trips):
    allocs = [_t("tab", "ExternalInput", (R, W)), _t("idx", "ExternalInput", (N, 1), "int32"),
              _t("out", "ExternalOutput", (N, W))]
    body = [{"name": "g", "opcode": "IndirectLoad", "engine": "SP",
             "ins": [_whole("tab", (R, W)), _whole("idx", (N, 1), "int32")],
             "outs": [_whole("out", (N, W))]}]
    return birsim.load(_looped([], body, trips, allocs))


def allreduce_program(trips):
    allocs = [_t("x", "ExternalInput", (2 * P, F)), _t("t", "Internal", (P, F), mem="SB"),
              _t("r", "Internal", (P, F), mem="SB"),
              _t("y", "ExternalOutput", (2 * P, F), addr_space="Shared")]
    off = {"kind": "AffExprKind", "terms": [{"idx": {"kind": "ShardIDKind"}, "coeff": P * F}],
           "c": 0}
    pre = [{"name": "ld", "opcode": "DMACopy", "engine": "SP",
            "ins": [dict(_whole("x", (P, F)), offset=off)], "outs": [_whole("t", (P, F))]}]
    body = [{"name": "ar", "opcode": "CollectiveCompute", "engine": "SP", "kind": "AllReduce",
             "op": "add", "ins": [_whole("t", (P, F))], "outs": [_whole("r", (P, F))]}]
    post = {"name": "st", "opcode": "DMACopy", "engine": "SP", "ins": [_whole("r", (P, F))],
            "outs": [dict(_whole("y", (P, F)), offset=off)]}
    prog = _looped(pre, body, trips, allocs)
    prog["functions"][0]["blocks"].append({"name": "b1", "instructions": [post]})
    return birsim.load(prog)


def per_instruction(make, inputs, trips, cores=1):
    """Seconds per looped instruction: (t(trips) - t(1)) / (trips - 1), fresh runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        one = birsim.Simulator(make(1), cores=cores, print=False)
        many = birsim.Simulator(make(trips), cores=cores, print=False)
        one.run(inputs)
        many.run(inputs)                     # warm: buffers allocated

        def fn():
            t0 = time.perf_counter()
            many.run(inputs)
            t1 = time.perf_counter()
            one.run(inputs)
            t2 = time.perf_counter()
            return max((t1 - t0) - (t2 - t1), 1e-9) / (trips - 1)
        return fn, many


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--trips", type=int, default=11)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []

    tab = rng.standard_normal((R, W)).astype(np.float32)
    idx = rng.integers(0, R, N).astype(np.int32).reshape(N, 1)
    sim_fn, sim = per_instruction(gather_program, {"tab": tab, "idx": idx}, args.trips)
    got = sim.run({"tab": tab, "idx": idx})["out"]
    assert np.array_equal(got, tab[idx[:, 0]])
    flat = idx[:, 0]

    def np_gather():
        t0 = time.perf_counter()
        tab[flat]
        return time.perf_counter() - t0
    pr = paired(sim_fn, np_gather, args.repeat)
    rows.append(["gather 4,096 rows x 512 fp32 (IndirectLoad)", fmt_time(pr.t_sim),
                 fmt_time(pr.t_ref) + " table[idx]", "%.2fx" % pr.ratio, pr.spread(), "<= 2x"])

    x = rng.standard_normal((2 * P, F)).astype(np.float32)
    sim_fn, sim = per_instruction(allreduce_program, {"x": x}, args.trips, cores=2)
    got = sim.run({"x": x})["y"]
    assert np.array_equal(got[:P], x[:P] + x[P:]) and np.array_equal(got[P:], got[:P])
    a, b, c = x[:P].copy(), x[P:].copy(), np.empty((P, F), np.float32)

    def np_add():
        t0 = time.perf_counter()
        np.add(a, b, out=c)
        return time.perf_counter() - t0
    pr = paired(sim_fn, np_add, args.repeat)
    rows.append(["2-core all-reduce [128, 2048] fp32", fmt_time(pr.t_sim),
                 fmt_time(pr.t_ref) + " np.add", "%.2fx" % pr.ratio, pr.spread(), "<= 3x"])

    table(["benchmark", "birsim", "NumPy", "ratio", "spread", "target"], rows)


if __name__ == "__main__":
    main()
