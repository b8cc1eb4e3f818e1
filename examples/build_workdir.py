"""Write two compiler work directories from the hand-written dumps below:

- examples/compiler_workdir/: the standard flow (value_<name>.npy), two cores each running
  its own lower_sync dump;
- examples/kv_cache_workdir/: NKI's baremetal flow (ncNN/sg00/bir.json, <name>.npy), two
  cores updating a KV cache in place through a must-alias pair (kcache.must_alias_input in,
  kcache out: rows the kernel does not write keep the input's values).

    python examples/build_workdir.py          # (re)writes both directories
    python -m birsim check examples/compiler_workdir
    python -m birsim check examples/kv_cache_workdir

The kernel: out[16, 64] = f(xT^T @ w) with xT [32, 16] fp32 and w [32, 64] bf16 (saved
as raw bits, as the hook does). Core 0 computes columns 0..31 and applies ReLU on the
Activation engine; core 1 computes columns 32..63 and halves them three times on DVE in a
lowered loop (one counter increment and one CompareAndBranch per engine, names repeating
across blocks), so the two programs differ. Each dump is written as the compiler writes it: no Skind, set names or
tensor_shape (debug.tensor_name/shape instead), memory types as strings, DRAM dims
[1, nbytes], SBUF tiles in quadrants, a PSUM tile addressed by bank, inputs loaded by a
queues-held DMA block fired by a DMATrigger, sync entries {from, id, wait_value} /
{id, update_value}, a DMACopy on a hardware queue, and the end-of-body sequence.
The dumps are written from that page, not copied from any real dump."""

import json
import os

import ml_dtypes
import numpy as np

from birsim import dumps as D
from birsim.dumps import ap, imm

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "compiler_workdir")
KV_OUT = os.path.join(HERE, "kv_cache_workdir")
DUMP = "bir_debug.sg0000.after-lower_sync.before-lower_act.json"
K, M, N = 32, 16, 64
H = N // 2                      # columns per core
TRIPS = 3                       # core 1's loop: rs *= 0.5 three times


def insn(name, opcode, engine, ins=(), outs=(), wait=(), update=(), **keys):
    return D.insn(name, opcode, engine, ins, outs, wait, update, lineno=7, **keys)


def reg():
    return D.reg_access("iter_reg")


def end_of_body():
    """The sequence that ends a body in the dumps (same names wherever it appears)."""
    return [insn("wait_store", "EventSemaphore", "Pool", wait=[("store", 4, 16)]),
            insn("barrier0", "AllEngineBarrier", "ALL"),
            insn("reset", "GroupResetSemaphores", "ALL", sema_group=[1, 2, 3, 4]),
            insn("barrier1", "AllEngineBarrier", "ALL"),
            insn("drain", "Drain", "SP"),
            insn("core_barrier", "CoreBarrier", "ALL")]


def core_dump(core):
    c0 = core * H
    allocs = [
        D.dram("xT", "ExternalInput", [K, M], "float32", tensor_id=1),
        D.dram("w", "ExternalInput", [K, N], "bfloat16", tensor_id=1),
        D.dram("out", "ExternalOutput", [M, N], "float32", tensor_id=1),
        D.tile("xs", K, M * 4, base=0, addr=0),                     # quadrant 0
        D.tile("ws", K, H * 2, base=32, addr=0, dtype="bfloat16"),  # quadrant 32, same addr
        D.tile("ps", M, H * 4, "PSUM", base=0, addr=0, bank=1 + core),
        D.tile("rs", M, H * 4, base=64, addr=0),
        D.register("iter_reg"),
    ]
    load = D.dma_block("load_inputs", "trig_load", [
        [insn("desc_x", "DMADescriptorCopy", "DMA",
              ins=[ap("xT", [[M, K], [1, M]])], outs=[ap("xs", [[M, K], [1, M]])])],
        [insn("desc_w", "DMADescriptorCopy", "DMA",
              ins=[ap("w", [[N, K], [1, H]], "bfloat16", offset=c0)],
              outs=[ap("ws", [[H, K], [1, H]], "bfloat16")])]], update=[(1, 16)])
    if core == 0:
        finish = insn("relu", "Activation", "Activation", ins=[ap("ps", [[H, M], [1, H]])],
                      outs=[ap("rs", [[H, M], [1, H]])], func="Relu",
                      wait=[("mm", 2, 1)], update=[(3, 1)])
    else:
        finish = insn("copy_ps", "Activation", "Activation", ins=[ap("ps", [[H, M], [1, H]])],
                      outs=[ap("rs", [[H, M], [1, H]])], func="Identity",
                      wait=[("mm", 2, 1)], update=[(3, 1)])
    body = [
        insn("trig_load", "DMATrigger", "Pool", queue="qPoolIO", dma_blocks=["load_inputs"]),
        insn("mm", "Matmult", "PE", ins=[ap("ws", [[H, K], [1, H]], "bfloat16"),
                                         ap("xs", [[M, K], [1, M]])],
             outs=[ap("ps", [[H, M], [1, H]])], accumulation_flag=2,
             wait=[("load_inputs", 1, 16)], update=[(2, 1)]),
        finish,
    ]
    store = insn("store", "DMACopy", "SP", ins=[ap("rs", [[H, M], [1, H]])],
                 outs=[ap("out", [[N, M], [1, H]], offset=c0)], queue="qSPDynamicHW",
                 update=[(4, 16)])
    blocks = [("entry", body)]
    if core == 0:
        store["sync_info"]["on_wait"] = [{"from": "relu", "id": 3, "wait_value": 1}]
        body.append(store)
        body.extend(end_of_body())
    else:
        # a lowered loop of TRIPS trips halving rs on DVE; each engine that branches keeps
        # its own copy of the counter, as the compiler lowers scf.for
        body.append(insn("iter_init", "RegisterMove", "ALL", ins=[imm(0)], outs=[reg()]))
        loop = [insn("half", "TensorScalar", "DVE", ins=[ap("rs", [[H, M], [1, H]])],
                     outs=[ap("rs", [[H, M], [1, H]])], op0="mult", const0=0.5)]
        engines = ("Pool", "DVE", "SP")
        loop += [insn("scf.for-Inc_inst__I-10-0-%s0" % e, "RegisterAlu", e,
                      ins=[reg(), imm(1)], outs=[reg()], op="add") for e in engines]
        loop += end_of_body()[1:]      # barriers, reset, drain (names repeat below)
        loop += [insn("scf.for-Br_inst-%s0" % e, "CompareAndBranch", e, ins=[reg(), imm(TRIPS)],
                      comp_op="IS_LTIMM", on_true="loop_body", on_false="store_block")
                 for e in engines]
        blocks += [("loop_body", loop), ("store_block", [store] + end_of_body())]
    return D.module(allocs, blocks, [D.queue("qPoolIO", [load])])


# The KV-cache update: kcache [T, HD] holds T cached tokens; each of the two cores takes NEW
# // 2 of the NEW new tokens knew [NEW, HD], scales them by SCALE on DVE, and writes them at
# rows POS + core * NEW // 2 of the cache, in place. With LNC 2 NKI's emitter writes one JSON
# per core; here they differ only in the rows each core reads and writes.
T, HD, NEW, POS, SCALE = 16, 32, 4, 9, 0.5


def kv_dump(core):
    half = NEW // 2
    allocs = [
        D.dram("knew", "ExternalInput", [NEW, HD]),
        D.dram("kcache.must_alias_input", "ExternalInput", [T, HD]),
        D.dram("kcache", "ExternalOutput", [T, HD]),
        D.tile("kt", half, HD * 4, base=0, addr=0),
        D.tile("ks", half, HD * 4, base=0, addr=HD * 4),
    ]
    r0 = POS + core * half              # the cache rows this core writes
    body = [
        insn("load", "DMACopy", "SP", ins=[ap("knew", [[HD, half], [1, HD]], offset=core * half * HD)],
             outs=[ap("kt", [[HD, half], [1, HD]])], queue="qSPDynamicHW", update=[(1, 16)]),
        insn("scale", "TensorScalar", "DVE", ins=[ap("kt", [[HD, half], [1, HD]])],
             outs=[ap("ks", [[HD, half], [1, HD]])], op0="mult", const0=SCALE,
             wait=[("load", 1, 16)], update=[(2, 1)]),
        insn("store", "DMACopy", "SP", ins=[ap("ks", [[HD, half], [1, HD]])],
             outs=[ap("kcache", [[HD, half], [1, HD]], offset=r0 * HD)], queue="qSPDynamicHW",
             wait=[("scale", 2, 1)], update=[(3, 16)]),
        insn("wait_store", "EventSemaphore", "Pool", wait=[("store", 3, 16)]),
        insn("barrier", "AllEngineBarrier", "ALL"),
        insn("reset", "GroupResetSemaphores", "ALL", sema_group=[1, 2, 3]),
    ]
    return D.module(allocs, [("entry", body)])


def kv_reference(knew, kcache):
    out = kcache.copy()
    out[POS:POS + NEW] = knew * np.float32(SCALE)
    return out


def write_kv_workdir():
    rng = np.random.default_rng(7)
    knew = rng.standard_normal((NEW, HD)).astype(np.float32)
    kcache = rng.standard_normal((T, HD)).astype(np.float32)
    for core in range(2):
        d = os.path.join(KV_OUT, "nc%02d" % core, "sg00")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "bir.json"), "w") as fh:
            json.dump(kv_dump(core), fh, indent=1)
            fh.write("\n")
        np.save(os.path.join(d, "knew.npy"), knew)
        np.save(os.path.join(d, "kcache.must_alias_input.npy"), kcache)
    # NKI's baremetal driver writes no goldens; this one is given so `check` compares
    np.save(os.path.join(KV_OUT, "nc00", "sg00", "kcache.npy"), kv_reference(knew, kcache))
    print("wrote", KV_OUT)


def main():
    rng = np.random.default_rng(2024)
    xT = rng.standard_normal((K, M)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    prod = xT.T.astype(np.float64) @ w.astype(np.float64)
    golden = np.concatenate([np.maximum(prod[:, :H], 0), prod[:, H:] * 0.5 ** TRIPS], axis=1)
    for core in range(2):
        d = os.path.join(OUT, "nc%02d" % core, "sg00")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, DUMP), "w") as fh:
            json.dump(core_dump(core), fh, indent=1)
            fh.write("\n")
        np.save(os.path.join(d, "value_xT.npy"), xT)
        np.save(os.path.join(d, "value_w.npy"), w.view(np.dtype("V2")))   # raw bits
    np.save(os.path.join(OUT, "nc00", "sg00", "value_out.npy"), golden.astype(np.float32))
    print("wrote", OUT)
    write_kv_workdir()


if __name__ == "__main__":
    main()
