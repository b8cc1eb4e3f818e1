"""Leak soak: N load + Simulator + run cycles of a small program, half of them ending in
a run-time BirsimError (an out-of-bounds access), N more runs of one Simulator on the
error path, and N/4 Simulators dropped while paused at a breakpoint (with the cyclic GC
off: each must be freed when its last reference goes); resident memory must not grow by
more than --max-growth-mib.

    python tests/leak_soak.py                 # CI: 10,000 cycles, fails above 1 MiB
    python tests/leak_soak.py --cycles 50000

Prints the growth in bytes per cycle for the success and error paths (README figures).
"""

import argparse
import copy
import gc
import sys
import weakref

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


def paused_cycle(prog, a):
    """A Simulator paused at a breakpoint, then dropped: freed at once (no cycle)."""
    sim = birsim.Simulator(prog)
    sim.breakpoint("alu")
    assert sim.debug(a=a) is None and sim.paused
    ref = weakref.ref(sim)
    del sim
    if ref() is not None:
        raise SystemExit("FAIL: a Simulator dropped while paused is still alive "
                         "(a reference cycle keeps it until the cyclic GC)")
    return 0


def soak(fn, n, collect=True):
    for _ in range(1500):                       # warm-up: caches, allocator arenas
        fn()
    if collect:
        gc.collect()
    before = rss_bytes()
    for _ in range(n):
        fn()
    if collect:
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
    module = birsim.load(GOOD)
    gc.disable()                  # a cycle would keep every paused Simulator alive
    try:
        paused = soak(lambda: paused_cycle(module, x), n // 4, collect=False)
    finally:
        gc.enable()
    worst = max(ok, bad, same, paused)
    print(f"leak soak: {n // 2} load+run cycles: {ok / (n // 2):+.1f} bytes/cycle; "
          f"{n // 2} cycles ending in MemoryAccessError: {bad / (n // 2):+.1f} bytes/cycle; "
          f"{n} error runs of one Simulator: {same / n:+.1f} bytes/run; "
          f"{n // 4} Simulators dropped while paused (no cyclic GC): "
          f"{paused / (n // 4):+.1f} bytes/cycle "
          f"(RSS growth {ok}, {bad}, {same}, {paused} bytes)")
    if worst > a.max_growth_mib * (1 << 20):
        print(f"FAIL: RSS grew by {worst} bytes (> {a.max_growth_mib} MiB)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
