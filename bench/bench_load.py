"""Loading at the size of real dumps: birsim.load vs json.loads of the same file.

    python bench/bench_load.py                  # 10k and 100k instructions
    python bench/bench_load.py --sizes 10000,100000,1000000 --rounds 3
    python bench/bench_load.py --mixes dma      # DMACopy / Matmult / Memset / Activation

For each size and spelling (birsim's own, and the compiler's: no Skind/name/tensor_shape,
debug/dependencies keys, {id, wait_value} sync entries, repeated instruction names), a
program is written to a temporary file; ``paired`` rounds (bench/_common.py) time
``json.loads`` of the file's bytes (with the cyclic GC paused, its fastest) and
``birsim.load(path)`` (which reads and parses the file itself, and frees the JSON tree
before it returns) alternately in the same process, and the table reports load /
json.loads as the median of the per-round ratios with their spread (min-max).

Resident memory is measured in a fresh process (``/proc/self/statm``, gc collected at
each step): ``import birsim``, then ``birsim.load`` of a 4-instruction program of the
same mix and spelling from a file (``once MB``: what the first load of a process costs
whatever the program's size -- the loader's lazily imported modules, the C walker's
tables, msgspec's decoder, the catalog), then ``birsim.load`` of the program: ``KB/insn
RSS`` is the RSS it added (its tables, plus whatever the load leaves behind: freed heap
the C library keeps, Python arenas pinned by a few survivors) over its instruction
count, i.e. what a process that already loaded a program holds per instruction of one
more. The first load of a process pays both (``once MB`` is ~0.6 MB: 0.06 KB per
instruction at 10k). ``tables/insn`` is the size of the loaded tables alone. Targets
(issue 8): ratio <= 2, <= 1 KB/instruction.

Mixes (``--mixes``): ``eltwise`` cycles TensorCopy / TensorTensor / Activation /
TensorScalar; ``dma`` is shaped like a compiler dump's matmul loop: DMACopy (SBUF to SBUF,
``queue`` in the compiler spelling), Matmult into a PSUM tile (accumulation_flag /
start_tensor_calc), Memset (integer and float constants) and the Activation that
evacuates PSUM; ``control`` is a lowered loop (compiler-dumps.md): DMACopy of a row
addressed by a register (``register_ap``: ``memsetref`` ``<location>_set`` and
``regref`` in the compiler spelling, ``memref`` and ``reg_ap_offset`` in birsim's),
Matmult, Activation and RegisterAlu (``off := cnt * F``, register and immediate
operands), and at the end of each 500-instruction body a DMATrigger firing a DMA block
of two DMADescriptorCopy descriptors (``queues`` / ``dma_queues``), one counter
increment per engine, EventSemaphore, AllEngineBarrier, GroupResetSemaphores,
AllEngineBarrier and one CompareAndBranch per engine; ``acc`` is Activation only, each
carrying the engine accumulator's ``acc`` and ``reduce_op`` keys (issue 24); ``all`` is
every opcode's example of docs/instructions.md in turn (in the compiler's spelling with
its debug/dependencies keys and {id, wait_value} sync entries).
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

from _common import fmt_time, paired, table

P, F = 128, 512
BLOCK = 500                      # instructions per block (a tiled kernel's loop body)
MIXES = {"eltwise": ("TensorCopy", "TensorTensor", "Activation", "TensorScalar"),
         "dma": ("DMACopy", "Matmult", "Memset", "Activation"),
         "control": ("DMACopy", "Matmult", "Activation", "RegisterAlu"),
         "acc": ("Activation",) * 4}
ENGINES = {"eltwise": ("SP", "DVE", "Activation", "Pool"),
           "dma": ("SP", "PE", "Pool", "Activation"),
           "control": ("SP", "PE", "Activation", "Pool"),
           "acc": ("Activation",) * 4}
LOOP_ENGINES = ("SP", "PE", "Activation", "Pool")   # each increments its own counter copy


def _ap(loc, spelling, offset=0, cols=F):
    return {"kind": "physical_ap", "memref": loc, "dtype": "float32",
            "ap": [[F, P], [1, cols]], "offset": offset}


def _insn(k, spelling, mix="eltwise"):
    ops = MIXES[mix]
    op = ops[k % 4]
    src, dst = "t%d" % (k % 8), "t%d" % ((k + 1) % 8)
    ins = [_ap(src, spelling)]
    outs = [_ap(dst, spelling)]
    if op == "TensorTensor":
        ins.append(_ap("t%d" % ((k + 2) % 8), spelling))
    elif op == "Matmult":            # [128, 128] stationary x [128, 512] moving -> PSUM
        ins = [_ap(src, spelling, cols=P), _ap("t%d" % ((k + 2) % 8), spelling)]
        outs = [_ap("ps%d" % (k % 2), spelling)]
    elif op == "DMACopy" and mix == "control":   # a row addressed by a register
        ins = [dict(_ap(src, spelling), kind="register_ap", ap=[[F, 1], [1, F]])]
        outs = [_ap(dst, spelling, cols=F)]
        ins[0]["ap"] = [[F, 1], [1, F]]
        outs[0]["ap"] = [[F, 1], [1, F]]
        if spelling == "compiler":
            del ins[0]["memref"]
            ins[0].update(memsetref=src + "_set", regref="off")
        else:
            ins[0]["reg_ap_offset"] = "off"
    elif op == "RegisterAlu":        # an address: off := cnt * F
        ins = [{"kind": "register_access", "regref": "cnt"},
               {"kind": "imm_value", "dtype": "int32", "value": F}]
        outs = [{"kind": "register_access", "regref": "off"}]
    elif op == "Activation" and mix in ("dma", "control"):
        ins = [_ap("ps%d" % ((k + 1) % 2), spelling)]
    obj = {"name": "%s_%d" % (op, k % BLOCK if spelling == "compiler" else k),
           "opcode": op, "engine": ENGINES[mix][k % 4], "ins": ins, "outs": outs}
    if op == "TensorTensor":
        obj["op"] = "add"
    elif op == "Activation":
        obj["func"] = "Relu"
        obj["scale"] = 1.0
        if mix == "acc":             # the engine accumulator (NKI activation_reduce)
            obj["acc"] = ("ZeroAccumulate", "Accumulate", "Idle", "Zero")[k % 4]
            obj["reduce_op"] = "add" if k % 2 else "max"
    elif op == "TensorScalar":
        obj.update(op0="mult", const0=0.5)
    elif op == "DMACopy" and spelling == "compiler":
        obj["queue"] = "qSyncIO"
    elif op == "RegisterAlu":
        obj["op"] = "mult"
    elif op == "Matmult":
        if spelling == "compiler":
            obj["start_tensor_calc"] = k % 8 == 1
        else:
            obj["accumulation_flag"] = 3 if k % 8 == 1 else 1
    elif op == "Memset":
        obj["constant"] = 0 if k % 8 == 2 else -1.5
    sid = k % 4
    if spelling == "compiler":
        obj["sync_info"] = {"on_wait": [{"from": "prev", "id": sid, "wait_value": 1}],
                            "on_update": [{"id": (sid + 1) % 4, "update_value": 1}]}
        obj["debug"] = {"lineno": k % 300, "op_name": op, "filename": "kernel.py"}
        obj["dependencies"] = ["%s_%d" % (ops[(k - 1) % 4], (k - 1) % BLOCK)]
        obj["loop_carried_dependencies"] = []
    else:
        obj["sync_info"] = {
            "on_wait": [{"type": "semaphore", "id": sid, "mode": "sem-ge-imm", "value": 1}],
            "on_update": [{"type": "semaphore", "id": (sid + 1) % 4, "mode": "sem-add-imm",
                           "value": 1}]}
    return obj


def _alloc(name, mem, kind, spelling, addr=None):
    nbytes = F * 4              # one PSUM bank per partition: 2 KiB
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


def _plain(name, opcode, engine, spelling, k, **keys):
    obj = {"name": name, "opcode": opcode, "engine": engine, "ins": [], "outs": []}
    obj.update(keys)
    if spelling == "compiler":
        obj["debug"] = {"lineno": k % 300, "op_name": opcode, "filename": "kernel.py"}
        obj["dependencies"] = []
        obj["loop_carried_dependencies"] = []
    return obj


def _loop_tail(b, nblocks, spelling):
    """The end of a lowered loop body (compiler-dumps.md): a DMATrigger firing one queue
    block, each engine's counter increment, the Pool wait, barrier, semaphore reset,
    barrier, and one CompareAndBranch per engine back to the body or on."""
    reg = {"kind": "register_access", "regref": "cnt"}

    def imm(v):
        return {"kind": "imm_value", "dtype": "int32", "value": v}
    nxt = "b%d" % (b + 1) if b + 1 < nblocks else "exit"
    out = [_plain("load_%d" % b, "DMATrigger", "Pool", spelling, 0, queue="qPoolIO",
                  dma_blocks=["ld_%d" % b])]
    out += [_plain("scf.for-Inc_inst__I-10-0-%s0" % e, "RegisterAlu", e, spelling, 1,
                   ins=[reg, imm(1)], outs=[reg], op="add") for e in LOOP_ENGINES]
    wait = ({"from": "load", "id": 9, "wait_value": 16} if spelling == "compiler" else
            {"type": "semaphore", "id": 9, "mode": "sem-ge-imm", "value": 16})
    out += [_plain("ev", "EventSemaphore", "Pool", spelling, 2,
                   sync_info={"on_wait": [wait], "on_update": []}),
            _plain("bar", "AllEngineBarrier", "ALL", spelling, 3),
            _plain("rst", "GroupResetSemaphores", "ALL", spelling, 4, sema_group=[9]),
            _plain("bar", "AllEngineBarrier", "ALL", spelling, 5)]
    out += [_plain("scf.for-Cond-%s0" % e, "CompareAndBranch", e, spelling, 6,
                   ins=[reg, imm(1000)], comp_op="IS_LTIMM", on_true="b%d" % b,
                   on_false=nxt) for e in LOOP_ENGINES]
    return out


def _queue(nblocks, spelling):
    """qPoolIO's DMA blocks, one per loop body: two descriptors (SBUF to SBUF) each."""
    blocks = []
    for b in range(nblocks):
        desc = [_plain("d%d_%d" % (b, j), "DMADescriptorCopy", "DMA", spelling, j,
                       ins=[_ap("t%d" % j, spelling)], outs=[_ap("t%d" % (j + 2), spelling)])
                for j in range(2)]
        upd = ({"id": 9, "update_value": 16} if spelling == "compiler" else
               {"type": "semaphore", "id": 9, "mode": "sem-add-imm", "value": 16})
        blk = {"name": "ld_%d" % b, "opcode": "DMABlock", "engine": "DMA",
               "dma_trigger": "load_%d" % b, "sync_info": {"on_wait": [], "on_update": [upd]}}
        if spelling == "compiler":
            blk["blocks"] = [{"name": "ld_%d_Block0" % b, "instructions": desc}]
        else:
            blk["instructions"] = desc
        blocks.append(blk)
    if spelling == "compiler":
        return {"queues": [{"name": "qPoolIO", "blocks": [{"instructions": blocks}]}]}
    return {"dma_queues": [{"name": "qPoolIO", "dma_blocks": blocks}]}


def _all_opcodes(n, spelling="birsim"):
    """Every opcode's printed example (docs/instructions.md, tests/_examples.py) in turn,
    n instructions in blocks of BLOCK; the terminators (they end a block) left out. The
    compiler's spelling: no Skind, debug/dependencies keys, a {from, id,
    wait_value} wait and an {id, update_value} update per instruction, names repeated
    per block."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "tests"))
    import _examples
    term = ("CompareAndBranch", "UnconditionalBranch", "Return", "Exit", "Break")
    ex = [src for op, src in _examples.printed_examples() if op not in term]
    objs = [_examples.instruction(ex[k % len(ex)], "i%d" % k) for k in range(n)]
    for k, obj in enumerate(objs):      # loop bodies: a block name each
        if obj.get("opcode") in ("Loop", "DynamicForLoop", "DoWhile"):
            obj["blocks"] = [dict(b, name="%s_%d" % (b["name"], k)) for b in obj["blocks"]]
    if spelling == "compiler":
        for k, obj in enumerate(objs):
            obj["name"] = "i%d" % (k % BLOCK)
            if obj.get("opcode") == "DMATrigger":   # a queue's blocks name their trigger
                obj["name"] = "trig%d" % k
            obj["debug"] = {"lineno": k % 300, "op_name": obj.get("opcode"),
                            "filename": "kernel.py"}
            obj["dependencies"] = ["i%d" % ((k - 1) % BLOCK)]
            obj["loop_carried_dependencies"] = []
            obj["sync_info"] = {"on_wait": [{"from": "prev", "id": k % 4, "wait_value": 1}],
                                "on_update": [{"id": (k + 1) % 4, "update_value": 1}]}
    prog = _examples.program(objs)
    if spelling == "compiler":
        for f in prog["functions"]:
            for a in f.get("allocations", ()):
                if a.get("Skind") == "memory_location_set":
                    del a["Skind"]
    body = prog["functions"][0]["blocks"][0]["instructions"]
    prog["functions"][0]["blocks"][:1] = [{"name": "body" if b == 0 else "b%d" % b,
                                           "instructions": body[b:b + BLOCK]}
                                          for b in range(0, len(body), BLOCK)]
    return prog


def make_program(n, spelling, mix="eltwise"):
    if mix == "all":
        return _all_opcodes(n, spelling)
    allocs = [_alloc("t%d" % i, "SB", "Internal", spelling, addr=i * F * 4) for i in range(8)]
    if mix == "control":
        allocs += [{"Skind": "register", "name": r, "dtype": "int32"} if spelling == "birsim"
                   else {"name": r, "dtype": "int32"} for r in ("cnt", "off")]
    if mix in ("dma", "control"):
        allocs += [_alloc("ps%d" % i, "PSUM", "Internal", spelling, addr=i * F * 4)
                   for i in range(2)]
    blocks = []
    nblocks = -(-n // BLOCK)
    tail = len(_loop_tail(0, 1, spelling)) if mix == "control" else 0
    for b0 in range(0, n, BLOCK):
        b = b0 // BLOCK
        insns = [_insn(k, spelling, mix) for k in range(b0, max(b0, min(n, b0 + BLOCK) - tail))]
        if mix == "control":
            insns += _loop_tail(b, nblocks, spelling)[:min(n, b0 + BLOCK) - b0]
        blocks.append({"name": "b%d" % b, "instructions": insns})
    if mix == "control":
        blocks.append({"name": "exit", "instructions": []})
    func = {"name": "sg0000" if spelling == "compiler" else "main", "allocations": allocs,
            "blocks": blocks}
    queues = _queue(nblocks, spelling) if mix == "control" else {}
    if spelling == "compiler":
        return dict({"functions": [func], "queues": []}, **queues)
    return dict({"version": 2, "arch": "gen3", "functions": [func]}, **queues)


_RSS = """
import gc, sys
def rss():
    with open('/proc/self/statm') as fh:
        return int(fh.read().split()[1]) * 4096
import birsim
gc.collect()
r0 = rss()
birsim.load(sys.argv[2])        # the same mix and spelling, 4 instructions: the one-offs
gc.collect()
r1 = rss()
m = birsim.load(sys.argv[1])
gc.collect()
r2 = rss()
n = len(m.tables['insns'])
tables = sum(v.nbytes for k, v in m.tables.items() if hasattr(v, 'nbytes'))
print(r2 - r1, r1 - r0, n, tables)
"""


def measure(path, small, rounds):
    import birsim
    count = []

    def parse():
        gc.disable()                # json.loads at its fastest (birsim.load pauses the
        try:                        # cyclic GC too; with it on json.loads is ~5x slower)
            t0 = time.perf_counter()
            with open(path, "rb") as fh:
                tree = json.loads(fh.read())
            return time.perf_counter() - t0
        finally:
            gc.enable()
            tree = None             # noqa: F841 -- freed outside the timing

    def load():
        t0 = time.perf_counter()
        m = birsim.load(path)
        t = time.perf_counter() - t0
        count.append(len(m.tables["insns"]))
        return t

    big = os.path.getsize(path) > 200e6
    pair = paired(load, parse, rounds, warm=0 if big else 1)
    out = subprocess.run([sys.executable, "-c", _RSS, path, small], capture_output=True,
                         text=True, check=True).stdout.split()
    rss, once, n2, tables = (int(v) for v in out)
    return count[-1], pair, rss / n2, once, tables / n2


def reader():
    from birsim._load import passes as loader
    if loader._fast_json is not None and loader.FAST_JSON:
        import msgspec
        return "msgspec %s (json.loads for what it rejects)" % msgspec.__version__
    return "json.loads"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--rounds", "--runs", type=int, default=3)
    ap.add_argument("--spellings", default="birsim,compiler")
    ap.add_argument("--mixes", default="eltwise,dma", help="instruction mixes: " + ", ".join(MIXES))
    args = ap.parse_args(argv)
    print("birsim's JSON reader: %s; C walker %s" % (
        reader(), "on" if __import__("birsim._load.passes")._load.passes.FAST_PATH else "off"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            for mix, spelling in ((m, s) for m in args.mixes.split(",")
                                  for s in args.spellings.split(",")):
                path = os.path.join(tmp, "p_%s_%s_%d.json" % (mix, spelling, n))
                small = path[:-5] + "_small.json"
                with open(path, "w") as fh:
                    json.dump(make_program(n, spelling, mix), fh, separators=(",", ":"))
                with open(small, "w") as fh:
                    json.dump(make_program(4, spelling, mix), fh, separators=(",", ":"))
                mb = os.path.getsize(path) / 1e6
                ninsn, pair, rss, once, tables = measure(path, small, args.rounds)
                rows.append([mix, spelling, str(ninsn), "%.1f" % mb, fmt_time(pair.t_sim),
                             fmt_time(pair.t_ref), "%.2fx" % pair.ratio, pair.spread(),
                             "%.2f" % (rss / 1024), "%.1f" % (once / 2 ** 20),
                             "%.0f B" % tables])
                print("  ".join(rows[-1]), flush=True)
                os.unlink(path)
                os.unlink(small)
    print()
    table(["mix", "spelling", "insns", "MB", "load", "json.loads", "load/json", "spread",
           "KB/insn RSS", "once MB", "tables/insn"], rows)


if __name__ == "__main__":
    main()
