"""Regenerate the BIR-JSON examples in this folder (they are checked in; this script is
how they were written). Run: python examples/build_examples.py"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def tensor(name, kind, dtype, shape, mem, dims, base=None, addr=None, **extra):
    loc = {"name": name, "type": mem, "dims": dims}
    if base is not None:
        loc.update(base=base, addr=addr)
    return dict({"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": dtype,
                 "tensor_shape": shape, "memorylocations": [loc]}, **extra)


def ap(loc, pattern, dtype="float32", offset=None):
    o = {"kind": "physical_ap", "memref": loc, "dtype": dtype, "ap": pattern}
    if offset is not None:
        o["offset"] = offset
    return o


def imm(value, dtype="float32"):
    return {"kind": "imm_value", "dtype": dtype, "value": value}


def iv(axis, coeff, c=0):
    return {"kind": "AffExprKind", "terms": [{"idx": {"kind": "AffIVKind", "axis": axis},
                                              "coeff": coeff}], "c": c}


def insn(name, opcode, engine, ins, outs, **keys):
    return dict({"name": name, "opcode": opcode, "engine": engine, "ins": ins, "outs": outs}, **keys)


def tiled_matmul(K=512, M=128, N=512, T=128):
    """out = relu(x.T @ w + bias): K tiles of T rows accumulate into one PSUM tile."""
    allocs = [
        tensor("x", "ExternalInput", "float32", [K, M], "DRAM", [K, M * 4]),
        tensor("w", "ExternalInput", "float32", [K, N], "DRAM", [K, N * 4]),
        tensor("bias", "ExternalInput", "float32", [M, 1], "DRAM", [M, 4]),
        tensor("out", "ExternalOutput", "float32", [M, N], "DRAM", [M, N * 4]),
        tensor("xs", "Internal", "float32", [T, M], "SB", [T, M * 4], 0, 0),
        tensor("ws", "Internal", "float32", [T, N], "SB", [T, N * 4], 0, 4096),
        tensor("bs", "Internal", "float32", [M, 1], "SB", [M, 4], 0, 8192),
        tensor("ys", "Internal", "float32", [M, N], "SB", [M, N * 4], 0, 12288),
        tensor("ps", "Internal", "float32", [M, N], "PSUM", [M, N * 4], 0, 0),
    ]
    body = [
        insn("load_x", "Load", "DMA", [ap("x", [[M, T], [1, M]], offset=iv("k", T * M * 4))],
             [ap("xs", [[M, T], [1, M]])]),
        insn("load_w", "Load", "DMA", [ap("w", [[N, T], [1, N]], offset=iv("k", T * N * 4))],
             [ap("ws", [[N, T], [1, N]])]),
        insn("mm", "Matmult", "PE", [ap("ws", [[N, T], [1, N]]), ap("xs", [[M, T], [1, M]])],
             [ap("ps", [[N, M], [1, N]])], accumulation_flag=1),
    ]
    main = [
        insn("load_bias", "Load", "DMA", [ap("bias", [[1, M], [1, 1]])], [ap("bs", [[1, M], [1, 1]])]),
        {"name": "kloop", "opcode": "Loop", "engine": "Unassigned",
         "LoopAxis": {"name": "k", "lb": 0, "ub": K // T, "stride": 1},
         "blocks": [{"name": "kbody", "instructions": body}]},
        insn("epilogue", "Activation", "Activation",
             [ap("ps", [[N, M], [1, N]]), imm(1.0), ap("bs", [[1, M], [1, 1]])],
             [ap("ys", [[N, M], [1, N]])], func="Relu"),
        insn("store", "Save", "DMA", [ap("ys", [[N, M], [1, N]])], [ap("out", [[N, M], [1, N]])]),
    ]
    return {"version": 2, "arch": "gen3",
            "functions": [{"name": "main", "allocations": allocs,
                           "blocks": [{"name": "entry", "instructions": main}]}]}


EXAMPLES = {"tiled_matmul.json": tiled_matmul}

if __name__ == "__main__":
    for fname, make in EXAMPLES.items():
        with open(os.path.join(HERE, fname), "w") as f:
            json.dump(make(), f, indent=1)
            f.write("\n")
        print("wrote", fname)
