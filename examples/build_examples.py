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
        insn("load_x", "Load", "DMA", [ap("x", [[M, T], [1, M]], offset=iv("k", T * M))],
             [ap("xs", [[M, T], [1, M]])]),
        insn("load_w", "Load", "DMA", [ap("w", [[N, T], [1, N]], offset=iv("k", T * N))],
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


def sync_pipeline(T=6, P=16, F=8, M=4):
    """A five-stage multi-engine pipeline over T tiles in a Loop, ordered only by
    semaphores (the block lists the stages out of order on purpose):

        load  (DMA)        xs := x[tile i]                      sem 0 += 1
        dve   (DVE)        ys := xs * 0.5 - 1     wait sem 0 >= 1; sem 0 -= 1, sem 1 += 1
        act   (Activation) zs := relu(ys * 2)     wait sem 1 >= 1; sem 1 -= 1, sem 2 += 1
        pe    (PE)         ps := w.T @ zs         wait sem 2 >= 1; sem 2 -= 1, sem 3 += 1
        store (DMA)        out[tile i] := ps      wait sem 3 >= 1; sem 3 -= 1

    x is [T*P, F], w is [P, M] (loaded once before the loop), out is [T*M, F]."""
    def sem(waits, updates):
        return {"on_wait": [{"type": "semaphore", "id": i, "mode": "sem-ge-imm", "value": 1}
                            for i in waits],
                "on_update": [{"type": "semaphore", "id": i, "mode": m, "value": 1}
                              for i, m in updates]}
    allocs = [
        tensor("x", "ExternalInput", "float32", [T * P, F], "DRAM", [T * P, F * 4]),
        tensor("w", "ExternalInput", "float32", [P, M], "DRAM", [P, M * 4]),
        tensor("out", "ExternalOutput", "float32", [T * M, F], "DRAM", [T * M, F * 4]),
        tensor("ws", "Internal", "float32", [P, M], "SB", [P, M * 4], 0, 0),
        tensor("xs", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 1024),
        tensor("ys", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 2048),
        tensor("zs", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 3072),
        tensor("ps", "Internal", "float32", [M, F], "PSUM", [M, F * 4], 0, 0),
    ]
    tile = [[F, P], [1, F]]
    stages = {
        "load": insn("load", "Load", "DMA", [ap("x", tile, offset=iv("i", P * F))],
                     [ap("xs", tile)], sync_info=sem([], [(0, "sem-inc")])),
        "dve": insn("dve", "TensorScalar", "DVE", [ap("xs", tile)], [ap("ys", tile)],
                    op0="mult", const0=0.5, op1="subtract", const1=1.0,
                    sync_info=sem([0], [(0, "sem-dec"), (1, "sem-inc")])),
        "act": insn("act", "Activation", "Activation", [ap("ys", tile)], [ap("zs", tile)],
                    func="Relu", scale=2.0,
                    sync_info=sem([1], [(1, "sem-dec"), (2, "sem-inc")])),
        "pe": insn("pe", "Matmult", "PE", [ap("zs", tile), ap("ws", [[M, P], [1, M]])],
                   [ap("ps", [[F, M], [1, F]])], accumulation_flag=2,
                   sync_info=sem([2], [(2, "sem-dec"), (3, "sem-inc")])),
        "store": insn("store", "Save", "DMA", [ap("ps", [[F, M], [1, F]])],
                      [ap("out", [[F, M], [1, F]], offset=iv("i", M * F))],
                      sync_info=sem([3], [(3, "sem-dec")])),
    }
    body = [stages[k] for k in ("pe", "act", "load", "dve", "store")]
    main = [
        insn("load_w", "Load", "DMA", [ap("w", [[M, P], [1, M]])], [ap("ws", [[M, P], [1, M]])]),
        {"name": "tiles", "opcode": "Loop", "engine": "Unassigned",
         "LoopAxis": {"name": "i", "lb": 0, "ub": T, "stride": 1},
         "blocks": [{"name": "tile", "instructions": body}]},
    ]
    return {"version": 2, "arch": "gen3",
            "functions": [{"name": "main", "allocations": allocs,
                           "blocks": [{"name": "entry", "instructions": main}]}]}


# ---- control-flow examples (issue 3) ------------------------------------------------

def register(name, dtype="int32"):
    return {"Skind": "register", "name": name, "dtype": dtype}


def reg(name):
    return {"kind": "register_access", "regref": name}


def rv_affine(register_name, coeff, c=0):
    """c + coeff * register (a DynamicForLoop upper bound)."""
    return {"kind": "AffExprKind", "c": c, "terms": [
        {"idx": {"kind": "IntRuntimeValueKind", "regref": register_name}, "coeff": coeff}]}


def sym_ap(loc, pattern, addrs, dtype="float32"):
    return {"kind": "symbolic_ap", "memref": loc, "dtype": dtype, "ap": pattern, "addrs": addrs}


def block(name, *instructions):
    return {"name": name, "instructions": list(instructions)}


def one_function_module(allocs, blocks):
    return {"version": 2, "arch": "gen3",
            "functions": [{"name": "main", "allocations": allocs, "blocks": blocks}]}


def dynamic_add(P=128, F=1024, T=128):
    """out[:, :ntiles*T] = a + b, tile by tile; the tile count comes from the input
    tensor `ntiles` through a register (TensorLoad) into a DynamicForLoop whose
    upper bound is T * register and whose induction value (a column offset, stride T)
    moves symbolic_ap addresses. Columns past the last tile stay 0."""
    allocs = [
        tensor("a", "ExternalInput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("b", "ExternalInput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("ntiles", "ExternalInput", "int32", [1, 1], "DRAM", [1, 4]),
        tensor("out", "ExternalOutput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("sa", "Internal", "float32", [P, T], "SB", [P, T * 4], 0, 0),
        tensor("sb", "Internal", "float32", [P, T], "SB", [P, T * 4], 0, T * 4),
        tensor("sc", "Internal", "float32", [P, T], "SB", [P, T * 4], 0, 2 * T * 4),
        register("n"),
    ]
    col = [None, {"kind": "AffIVKind", "axis": "c"}]
    tile = [[T, P], [1, T]]
    body = [
        insn("load_a", "Load", "DMA", [sym_ap("a", [[F, P], [1, T]], col)], [ap("sa", tile)]),
        insn("load_b", "Load", "DMA", [sym_ap("b", [[F, P], [1, T]], col)], [ap("sb", tile)]),
        insn("add", "TensorTensor", "DVE", [ap("sa", tile), ap("sb", tile)], [ap("sc", tile)],
             op="add"),
        insn("store", "Save", "DMA", [ap("sc", tile)], [sym_ap("out", [[F, P], [1, T]], col)]),
    ]
    main = [
        insn("clear", "Memset", "Pool", [], [ap("out", [[F, P], [1, F]])], mode="Const",
             constant=0),
        insn("read_n", "TensorLoad", "Pool", [ap("ntiles", [[1, 1], [1, 1]], "int32")],
             [reg("n")]),
        {"name": "tiles", "opcode": "DynamicForLoop", "engine": "Unassigned",
         "DynamicForLoopAxis": {"name": "c", "lb": 0, "ub": rv_affine("n", T), "stride": T},
         "blocks": [block("tile", *body)]},
    ]
    return one_function_module(allocs, [block("entry", *main)])


def halving_do_while(MAXV=32):
    """Halve a counter until it is zero: values[k] = the counter after trip k+1,
    trips = number of trips (the body runs at least once, so n = 0 gives 1)."""
    allocs = [
        tensor("n", "ExternalInput", "int32", [1, 1], "DRAM", [1, 4]),
        tensor("trips", "ExternalOutput", "int32", [1, 1], "DRAM", [1, 4]),
        tensor("values", "ExternalOutput", "int32", [1, MAXV], "DRAM", [1, MAXV * 4]),
        register("v"), register("k"),
    ]
    at_k = {"kind": "register_ap", "memref": "values", "dtype": "int32",
            "ap": [[1, 1], [1, 1]], "reg_ap_offset": "k", "const_ap_offset": 0}
    body = [
        insn("halve", "RegisterAlu", "Pool", [reg("v"), imm(1, "int32")], [reg("v")],
             op="arith_shift_right"),
        insn("record", "TensorSave", "Pool", [reg("v")], [at_k]),
        insn("count", "RegisterAlu", "Pool", [reg("k"), imm(1, "int32")], [reg("k")], op="add"),
    ]
    main = [
        insn("clear", "Memset", "Pool", [], [ap("values", [[MAXV, 1], [1, MAXV]], "int32")],
             mode="Const", constant=0),
        insn("read_n", "TensorLoad", "Pool", [ap("n", [[1, 1], [1, 1]], "int32")], [reg("v")]),
        insn("k0", "RegisterMove", "Pool", [imm(0, "int32")], [reg("k")]),
        {"name": "halving", "opcode": "DoWhile", "engine": "Unassigned",
         "cond": {"kind": "IntRuntimeValueKind", "regref": "v"},
         "blocks": [block("halve_body", *body)]},
        insn("write_trips", "TensorSave", "Pool", [reg("k")],
             [ap("trips", [[1, 1], [1, 1]], "int32")]),
    ]
    return one_function_module(allocs, [block("entry", *main)])


def call_twice(P=128, F=256):
    """oa = relu(2a + 1), ob = relu(2b + 1): one function called twice, its tensor
    parameters bound to different SBUF tiles each time."""
    tile = [[F, P], [1, F]]
    allocs = [
        tensor("a", "ExternalInput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("b", "ExternalInput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("oa", "ExternalOutput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("ob", "ExternalOutput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("sa", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 0),
        tensor("sb", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, F * 4),
        tensor("ya", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 2 * F * 4),
        tensor("yb", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 3 * F * 4),
    ]
    main = [
        insn("load_a", "Load", "DMA", [ap("a", tile)], [ap("sa", tile)]),
        insn("load_b", "Load", "DMA", [ap("b", tile)], [ap("sb", tile)]),
        insn("call_a", "Call", "Unassigned", [], [], target="affine_relu",
             arguments={"x": "sa", "y": "ya"}),
        insn("call_b", "Call", "Unassigned", [], [], target="affine_relu",
             arguments={"x": "sb", "y": "yb"}),
        insn("store_a", "Save", "DMA", [ap("ya", tile)], [ap("oa", tile)]),
        insn("store_b", "Save", "DMA", [ap("yb", tile)], [ap("ob", tile)]),
    ]
    callee_allocs = [
        tensor("x", "Internal", "float32", [P, F], "SB", [P, F * 4]),
        tensor("y", "Internal", "float32", [P, F], "SB", [P, F * 4]),
    ]
    callee = [
        insn("act", "Activation", "Activation", [ap("x", tile), imm(2.0), imm(1.0)],
             [ap("y", tile)], func="Relu"),
        insn("ret", "Return", "Activation", [], []),
    ]
    return {"version": 2, "arch": "gen3", "functions": [
        {"name": "main", "allocations": allocs, "blocks": [block("entry", *main)]},
        {"name": "affine_relu", "allocations": callee_allocs,
         "blocks": [block("body", *callee)]}]}


def branch_ladder(P=128, F=64):
    """out = (x + y, x - y, x * y, max(x, y))[clamp(sel, 0, 3)]: a ladder of
    CompareAndBranch instructions on a register picks one of four blocks."""
    tile = [[F, P], [1, F]]
    allocs = [
        tensor("x", "ExternalInput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("y", "ExternalInput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("sel", "ExternalInput", "int32", [1, 1], "DRAM", [1, 4]),
        tensor("out", "ExternalOutput", "float32", [P, F], "DRAM", [P, F * 4]),
        tensor("sx", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 0),
        tensor("sy", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, F * 4),
        tensor("so", "Internal", "float32", [P, F], "SB", [P, F * 4], 0, 2 * F * 4),
        register("s"),
    ]

    def rung(name, limit, yes, no):
        return insn(name, "CompareAndBranch", "Pool", [reg("s"), imm(limit, "int32")], [],
                    comp_op="IS_LTIMM", on_true=yes, on_false=no)

    def compute(name, op):
        return insn(name, "TensorTensor", "DVE", [ap("sx", tile), ap("sy", tile)],
                    [ap("so", tile)], op=op)

    def goto(name):
        return insn(name, "UnconditionalBranch", "Pool", [], [], target="done")

    blocks = [
        block("entry",
              insn("load_x", "Load", "DMA", [ap("x", tile)], [ap("sx", tile)]),
              insn("load_y", "Load", "DMA", [ap("y", tile)], [ap("sy", tile)]),
              insn("read_sel", "TensorLoad", "Pool", [ap("sel", [[1, 1], [1, 1]], "int32")],
                   [reg("s")]),
              rung("lt1", 1, "case_add", "test2")),
        block("test2", rung("lt2", 2, "case_sub", "test3")),
        block("test3", rung("lt3", 3, "case_mul", "case_max")),
        block("case_add", compute("add", "add"), goto("add_done")),
        block("case_sub", compute("sub", "subtract"), goto("sub_done")),
        block("case_mul", compute("mul", "mult"), goto("mul_done")),
        block("case_max", compute("max", "max")),           # falls through to done
        block("done", insn("store", "Save", "DMA", [ap("so", tile)], [ap("out", tile)])),
    ]
    return one_function_module(allocs, blocks)


EXAMPLES = {"tiled_matmul.json": tiled_matmul,
            "dynamic_add.json": dynamic_add,
            "halving_do_while.json": halving_do_while,
            "call_twice.json": call_twice,
            "branch_ladder.json": branch_ladder}
EXAMPLES["sync_pipeline.json"] = sync_pipeline


def rmsnorm_customop(P=128, D=512):
    """A fused RMSNorm as a CustomOp whose kernel is a Python function
    (examples/rmsnorm_kernel.py, registered as "rmsnorm"): x and gamma are loaded into
    SBUF by DMA, the CustomOp on the Pool engine computes
    ys = xs / sqrt(mean(xs**2, axis=-1) + eps) * gamma, and a DMA stores the result."""
    allocs = [
        tensor("x", "ExternalInput", "float32", [P, D], "DRAM", [P, D * 4]),
        tensor("gamma", "ExternalInput", "float32", [1, D], "DRAM", [1, D * 4]),
        tensor("y", "ExternalOutput", "float32", [P, D], "DRAM", [P, D * 4]),
        tensor("xs", "Internal", "float32", [P, D], "SB", [P, D * 4], 0, 0),
        tensor("gs", "Internal", "float32", [1, D], "SB", [1, D * 4], 0, D * 4),
        tensor("ys", "Internal", "float32", [P, D], "SB", [P, D * 4], 0, 2 * D * 4),
    ]
    main = [
        insn("load_x", "Load", "DMA", [ap("x", [[D, P], [1, D]])], [ap("xs", [[D, P], [1, D]])]),
        insn("load_gamma", "Load", "DMA", [ap("gamma", [[D, 1], [1, D]])],
             [ap("gs", [[D, 1], [1, D]])]),
        insn("rmsnorm", "CustomOp", "Pool", [ap("xs", [[D, P], [1, D]]), ap("gs", [[D, 1], [1, D]])],
             [ap("ys", [[D, P], [1, D]])], opFunctionName="rmsnorm",
             srcsShape=[[P, D], [D]], dstsShape=[[P, D]]),
        insn("store", "Save", "DMA", [ap("ys", [[D, P], [1, D]])], [ap("y", [[D, P], [1, D]])]),
    ]
    return {"version": 2, "arch": "gen3",
            "functions": [{"name": "main", "allocations": allocs,
                           "blocks": [{"name": "entry", "instructions": main}]}]}


EXAMPLES["rmsnorm_customop.json"] = rmsnorm_customop


if __name__ == "__main__":
    for fname, make in EXAMPLES.items():
        with open(os.path.join(HERE, fname), "w") as f:
            json.dump(make(), f, indent=1)
            f.write("\n")
        print("wrote", fname)
