"""A two-core MoE-style dispatch, one expert per core, checked against NumPy.

    router (NumPy): top-1 expert per token, its gate probability; expert e's slots hold
    its tokens' indices (padded with -1, the unused-slot marker)
    on core e:  Xe   := IndirectLoad   rows of X by idx[e]          (gather of token rows)
                XeT  := DMACopy        Xe transposed (strided read)
                ps   := Matmult        Xe @ W[e]                     (PE, into PSUM)
                Ye   := TensorTensor   ps * gate[e] (per slot)       (DVE)
                part := IndirectSaveAccumulate  part[idx[e]] += Ye   (scatter-add)
                Y    := CollectiveCompute AllReduce(part)            (both cores)
                y[rows of core e] := Y[rows of core e]               (each core its half)

Every step waits on the previous one's semaphore, so any schedule gives the same result.
``python examples/moe_dispatch.py`` writes moe_dispatch.json (the BIR-JSON program),
runs it on 2 cores and compares with NumPy; tests/vm/test_vm_collectives.py does the same.
"""

import json
import os
import sys

import numpy as np

from birsim import build as B

HERE = os.path.dirname(os.path.abspath(__file__))
T, D, H, E = 128, 64, 128, 2          # tokens, model dim, expert hidden dim, experts (= cores)
C = T                                 # slots per expert (capacity)


def _rowmajor(name, kind, dtype, shape, mem, **kw):
    size = {"float32": 4, "int32": 4}[dtype]
    free = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return B.tensor(name, kind, dtype, shape, mem, dims=[shape[0], free * size], **kw)


def build():
    """The BIR-JSON module (a dict)."""
    rank_rows = lambda n: B.affine([(B.shard(), n)])          # this core's block of rows
    half = rank_rows(T // E * H)             # the rows of Y this core stores (a WAW otherwise)
    steps = [
        # Xe := 0, then gather the expert's token rows (unused slots stay 0)
        B.insn("Memset", "DVE", outs=[B.whole("xe", (C, D))], name="zero_xe", mode="Const",
               constant=0),
        B.insn("DMACopy", "SP", ins=[B.ap("idx", [[1, C], [1, 1]], "int32", offset=rank_rows(C))],
               outs=[B.whole("idx_sb", (C, 1), "int32")], name="load_idx"),
        B.insn("IndirectLoad", "SP", ins=[B.whole("x", (T, D)), B.whole("idx_sb", (C, 1), "int32")],
               outs=[B.whole("xe", (C, D))], name="gather_tokens"),
        # XeT[d, c] := Xe[c, d]: a strided read, d inside each partition, c across them
        B.insn("DMACopy", "SP", ins=[B.ap("xe", [[1, D], [D, C]])],
               outs=[B.whole("xet", (D, C))], name="transpose"),
        B.insn("DMACopy", "SP", ins=[B.ap("w", [[H, D], [1, H]], offset=rank_rows(D * H))],
               outs=[B.whole("we", (D, H))], name="load_w"),
        B.insn("DMACopy", "SP", ins=[B.ap("gate", [[1, C], [1, 1]], offset=rank_rows(C))],
               outs=[B.whole("g", (C, 1))], name="load_gate"),
        # ps[c, h] = sum_d XeT[d, c] * We[d, h]  (moving We, stationary XeT)
        B.insn("Matmult", "PE", ins=[B.whole("we", (D, H)), B.whole("xet", (D, C))],
               outs=[B.whole("ps", (C, H))], name="expert_matmul", accumulation_flag=2),
        B.insn("TensorTensor", "DVE", ins=[B.whole("ps", (C, H)), B.ap("g", [[1, C], [0, H]])],
               outs=[B.whole("ye", (C, H))], name="apply_gate", op="mult"),
        B.insn("Memset", "DVE", outs=[B.whole("part", (T, H))], name="zero_part", mode="Const",
               constant=0),
        B.insn("IndirectSaveAccumulate", "SP",
               ins=[B.whole("ye", (C, H)), B.whole("idx_sb", (C, 1), "int32")],
               outs=[B.whole("part", (T, H))], name="combine", op="add"),
        B.insn("CollectiveCompute", "SP", ins=[B.whole("part", (T, H))],
               outs=[B.whole("full", (T, H))], name="all_reduce", kind="AllReduce", op="add"),
        B.insn("DMACopy", "SP", ins=[B.ap("full", [[H, T // E], [1, H]], offset=half)],
               outs=[B.ap("y", [[H, T // E], [1, H]], offset=half)], name="store"),
    ]
    for k, s in enumerate(steps):          # a semaphore chain: step k waits for step k-1
        last = k == len(steps) - 1         # and takes its count back, so all end at 0
        s["sync_info"] = B.sync_info(
            waits=[B.wait(k - 1, type="semaphore")] if k else [],
            updates=([B.update(k - 1, "sem-sub-imm", type="semaphore")] if k else [])
            + ([] if last else [B.update(k, type="semaphore")]))
    allocs = [
        _rowmajor("x", "ExternalInput", "float32", (T, D), "DRAM"),
        _rowmajor("w", "ExternalInput", "float32", (E * D, H), "DRAM"),
        _rowmajor("idx", "ExternalInput", "int32", (E * C, 1), "DRAM"),
        _rowmajor("gate", "ExternalInput", "float32", (E * C, 1), "DRAM"),
        _rowmajor("idx_sb", "Internal", "int32", (C, 1), "SB"),
        _rowmajor("xe", "Internal", "float32", (C, D), "SB"),
        _rowmajor("xet", "Internal", "float32", (D, C), "SB"),
        _rowmajor("we", "Internal", "float32", (D, H), "SB"),
        _rowmajor("g", "Internal", "float32", (C, 1), "SB"),
        _rowmajor("ps", "Internal", "float32", (C, H), "PSUM"),
        _rowmajor("ye", "Internal", "float32", (C, H), "SB"),
        _rowmajor("part", "Internal", "float32", (T, H), "SB"),
        _rowmajor("full", "Internal", "float32", (T, H), "SB"),
        _rowmajor("y", "ExternalOutput", "float32", (T, H), "DRAM"),
    ]
    return B.module([B.function("main", allocs, [B.block("dispatch", *steps)])])


def make_inputs(seed=0):
    """Tokens, expert weights and the NumPy router's indices and gates."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, D)).astype(np.float32)
    w = (rng.standard_normal((E * D, H)) / np.sqrt(D)).astype(np.float32)
    wr = rng.standard_normal((D, E)).astype(np.float32)
    logits = x @ wr
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    top = probs.argmax(1)                                     # top-1 expert per token
    idx = np.full((E, C), -1, np.int32)
    gate = np.zeros((E, C), np.float32)
    for e in range(E):
        toks = np.nonzero(top == e)[0]
        idx[e, :len(toks)] = toks
        gate[e, :len(toks)] = probs[toks, e]
    return {"x": x, "w": w, "idx": idx.reshape(E * C, 1), "gate": gate.reshape(E * C, 1)}


def reference(inputs):
    """NumPy: y[t] = gate * (x[t] @ W[expert(t)]), summed over the experts."""
    x, w = inputs["x"], inputs["w"].reshape(E, D, H)
    idx, gate = inputs["idx"].reshape(E, C), inputs["gate"].reshape(E, C)
    y = np.zeros((T, H), np.float64)
    for e in range(E):
        ok = idx[e] >= 0
        y[idx[e][ok]] += gate[e][ok, None] * (x[idx[e][ok]].astype(np.float64) @ w[e])
    return y


def main():
    import birsim
    mod = build()
    path = os.path.join(HERE, "moe_dispatch.json")
    with open(path, "w") as f:
        json.dump(mod, f, indent=1)
        f.write("\n")
    inputs = make_inputs()
    out = birsim.Simulator(path, cores=E, schedule="random", seed=1).run(inputs)
    err = np.abs(out["y"] - reference(inputs)).max()
    print(f"moe_dispatch: {T} tokens, {E} experts on {E} cores; max |birsim - NumPy| = {err:.2e}")
    return 0 if err < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
