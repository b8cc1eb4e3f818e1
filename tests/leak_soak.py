"""Leak soak: N load + Simulator + run cycles of a small program, half of them ending in
a run-time BirsimError (an out-of-bounds access), and N more runs of one Simulator on the
error path; resident memory must not grow by more than --max-growth-mib.

    python tests/leak_soak.py                 # CI: 10,000 cycles, fails above 1 MiB
    python tests/leak_soak.py --cycles 50000

Prints the growth in bytes per cycle for the success and error paths (README figures).
"""

import argparse
import copy
import gc
import sys

import numpy as np

import birsim

AP = lambda m, ap, **kw: dict({"kind": "physical_ap", "memref": m, "ap": ap}, **kw)  # noqa: E731
T = lambda n, kind, mem="DRAM": {"Skind": "memory_location_set", "name": n, "kind": kind,  # noqa: E731
                                 "dtype": "float32", "tensor_shape": [4, 8],
                                 "memorylocations": [{"name": n, "type": mem}]}
GOOD = {"functions": [{"name": "main", "allocations": [
    T("a", "ExternalInput"), T("o", "ExternalOutput"), T("t", "Internal", "SB"),
    {"Skind": "register", "name": "r", "dtype": "int32"}],
    "blocks": [{"name": "b", "instructions": [
        {"name": "ld", "opcode": "TensorCopy", "engine": "DVE",
         "ins": [AP("a", [[8, 4], [1, 8]])], "outs": [AP("t", [[8, 4], [1, 8]])]},
        {"name": "alu", "opcode": "RegisterAlu", "engine": "SP", "op": "add",
         "ins": [{"kind": "imm_value", "value": 3}, {"kind": "imm_value", "value": 4}],
         "outs": [{"kind": "register_access", "regref": "r"}]},
        {"name": "st", "opcode": "TensorCopy", "engine": "DVE",
         "ins": [AP("t", [[8, 4], [1, 8]])], "outs": [AP("o", [[8, 4], [1, 8]])]}]}]}]}
BAD = copy.deepcopy(GOOD)
BAD["functions"][0]["blocks"][0]["instructions"][2]["ins"][0]["offset"] = 1000   # OOB


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cycle(prog, a):
    sim = birsim.Simulator(birsim.load(prog))
    try:
        out = sim.run(a=a)["o"]
        assert out[0, 0] == a[0, 0] and sim.register("r") == 7
        return 0
    except birsim.MemoryAccessError:
        return 1


def soak(fn, n):
    for _ in range(1500):                       # warm-up: caches, allocator arenas
        fn()
    gc.collect()
    before = rss_bytes()
    for _ in range(n):
        fn()
    gc.collect()
    return rss_bytes() - before


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=10_000)
    ap.add_argument("--max-growth-mib", type=float, default=1.0)
    a = ap.parse_args(argv)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    n = a.cycles
    ok = soak(lambda: cycle(GOOD, x), n // 2)
    bad = soak(lambda: cycle(BAD, x), n // 2)
    sim = birsim.Simulator(BAD)

    def err_run():
        try:
            sim.run(a=x)
        except birsim.MemoryAccessError:
            pass
    same = soak(err_run, n)
    worst = max(ok, bad, same)
    print(f"leak soak: {n // 2} load+run cycles: {ok / (n // 2):+.1f} bytes/cycle; "
          f"{n // 2} cycles ending in MemoryAccessError: {bad / (n // 2):+.1f} bytes/cycle; "
          f"{n} error runs of one Simulator: {same / n:+.1f} bytes/run "
          f"(RSS growth {ok}, {bad}, {same} bytes)")
    if worst > a.max_growth_mib * (1 << 20):
        print(f"FAIL: RSS grew by {worst} bytes (> {a.max_growth_mib} MiB)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
