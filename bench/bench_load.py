"""Loading at the size of real dumps: birsim.load vs json.loads of the same file.

    python bench/bench_load.py                  # 10k and 100k instructions
    python bench/bench_load.py --sizes 10000,100000,1000000 --runs 3

For each size and spelling (birsim's own, and the compiler's: no Skind/name/tensor_shape,
debug/dependencies keys, {id, wait_value} sync entries, repeated instruction names), a
program is written to a temporary file; each run times ``json.loads`` of the file's text
(with the cyclic GC paused, its fastest) and ``birsim.load(path)`` (which reads and parses the file itself) back to back in the
same process, and the table reports load / json.loads as a ratio (median, min–max over
the runs). Resident memory per instruction is measured in a fresh process: RSS after
``birsim.load`` (the JSON tree dropped, gc collected) minus RSS after ``import birsim``,
divided by the instruction count. Targets (issue 8): ratio <= 2, <= 1 KB/instruction.
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

P, F = 128, 512
BLOCK = 500                      # instructions per block (a tiled kernel's loop body)
OPS = ("TensorCopy", "TensorTensor", "Activation", "TensorScalar")
ENGINES = ("SP", "DVE", "Activation", "Pool")


def _ap(loc, spelling, offset=0):
    return {"kind": "physical_ap", "memref": loc, "dtype": "float32",
            "ap": [[F, P], [1, F]], "offset": offset}


def _insn(k, spelling):
    op = OPS[k % 4]
    src, dst = "t%d" % (k % 8), "t%d" % ((k + 1) % 8)
    ins = [_ap(src, spelling)]
    if op == "TensorTensor":
        ins.append(_ap("t%d" % ((k + 2) % 8), spelling))
    obj = {"name": "%s_%d" % (op, k % BLOCK if spelling == "compiler" else k),
           "opcode": op, "engine": ENGINES[k % 4], "ins": ins, "outs": [_ap(dst, spelling)]}
    if op == "TensorTensor":
        obj["op"] = "add"
    elif op == "Activation":
        obj["func"] = "Relu"
        obj["scale"] = 1.0
    elif op == "TensorScalar":
        obj.update(op0="mult", const0=0.5)
    sid = k % 4
    if spelling == "compiler":
        obj["sync_info"] = {"on_wait": [{"from": "prev", "id": sid, "wait_value": 1}],
                            "on_update": [{"id": (sid + 1) % 4, "update_value": 1}]}
        obj["debug"] = {"lineno": k % 300, "op_name": op, "filename": "kernel.py"}
        obj["dependencies"] = ["%s_%d" % (OPS[(k - 1) % 4], (k - 1) % BLOCK)]
        obj["loop_carried_dependencies"] = []
    else:
        obj["sync_info"] = {
            "on_wait": [{"type": "semaphore", "id": sid, "mode": "sem-ge-imm", "value": 1}],
            "on_update": [{"type": "semaphore", "id": (sid + 1) % 4, "mode": "sem-add-imm",
                           "value": 1}]}
    return obj


def _alloc(name, mem, kind, spelling, addr=None):
    nbytes = F * 4
    if spelling == "compiler":
        loc = {"name": name, "type": mem, "dims": [P, nbytes]}
        if addr is not None:
            loc.update(base=0, addr=addr)
        return {"kind": kind, "dtype": "float32",
                "debug": {"tensor_name": name, "shape": [P, F]}, "memorylocations": [loc]}
    loc = {"name": name, "type": mem, "dims": [P, nbytes]}
    if addr is not None:
        loc.update(base=0, addr=addr)
    return {"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": "float32",
            "tensor_shape": [P, F], "memorylocations": [loc]}


def make_program(n, spelling):
    allocs = [_alloc("t%d" % i, "SB", "Internal", spelling, addr=i * F * 4) for i in range(8)]
    blocks = []
    for b0 in range(0, n, BLOCK):
        blocks.append({"name": "b%d" % (b0 // BLOCK),
                       "instructions": [_insn(k, spelling) for k in range(b0, min(n, b0 + BLOCK))]})
    func = {"name": "sg0000" if spelling == "compiler" else "main", "allocations": allocs,
            "blocks": blocks}
    if spelling == "compiler":
        return {"functions": [func], "queues": []}
    return {"version": 2, "arch": "gen3", "functions": [func]}


_RSS = """
import gc, sys
def rss():
    with open('/proc/self/statm') as fh:
        return int(fh.read().split()[1]) * 4096
import birsim
gc.collect()
r0 = rss()
m = birsim.load(sys.argv[1])
gc.collect()
r1 = rss()
n = len(m.tables['insns'])
tables = sum(v.nbytes for k, v in m.tables.items() if hasattr(v, 'nbytes'))
print(r1 - r0, n, tables)
"""


def measure(path, runs):
    import birsim
    ratios, loads, parses = [], [], []
    for _ in range(runs):
        gc.disable()                # json.loads at its fastest (birsim.load pauses the
        t0 = time.perf_counter()    # cyclic GC too; with it on json.loads is ~5x slower)
        with open(path, "rb") as fh:
            tree = json.loads(fh.read())
        t1 = time.perf_counter()
        gc.enable()
        del tree
        m = birsim.load(path)
        t2 = time.perf_counter()
        n = len(m.tables["insns"])
        del m
        parses.append(t1 - t0)
        loads.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    out = subprocess.run([sys.executable, "-c", _RSS, path], capture_output=True, text=True,
                         check=True).stdout.split()
    rss, n2, tables = (int(v) for v in out)
    return n, sorted(ratios), sorted(loads), sorted(parses), rss / n2, tables / n2


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--spellings", default="birsim,compiler")
    args = ap.parse_args(argv)
    print("%-9s %9s %8s %10s %10s %16s %12s %10s" % (
        "spelling", "insns", "MB", "load s", "json s", "load/json", "KB/insn RSS",
        "tables"))
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            for spelling in args.spellings.split(","):
                path = os.path.join(tmp, "p_%s_%d.json" % (spelling, n))
                with open(path, "w") as fh:
                    json.dump(make_program(n, spelling), fh, separators=(",", ":"))
                mb = os.path.getsize(path) / 1e6
                ninsn, ratios, loads, parses, rss, tables = measure(path, args.runs)
                mid = len(ratios) // 2
                print("%-9s %9d %8.1f %10.3f %10.3f %5.2fx (%.2f-%.2f) %12.2f %7.0f B" % (
                    spelling, ninsn, mb, loads[mid], parses[mid], ratios[mid], ratios[0],
                    ratios[-1], rss / 1024, tables))
                os.unlink(path)


if __name__ == "__main__":
    main()
