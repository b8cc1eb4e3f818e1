"""The count of K-class opcodes that run (issue 9, goal 88 of 88): one small program per
opcode. Every opcode whose bs_ops.def handler is a kernel or the VM must run its program;
every `todo` opcode must stop with a clear "not implemented" error. The count is printed
(`pytest -s`) and checked against the handler table, so it stays honest as kernels land.

Opcodes whose smallest meaningful program needs a whole scaffold (DMA queues, called
functions, kernel_sim) are run by the test files named in SCAFFOLDED instead."""

import os
import warnings

import numpy as np
import pytest

import birsim
from birsim import _birsim

from bir import (ap, block, function, imm, insn, loop, module, reg, register, tensor,
                 whole)

P, F = 4, 16
K_OPS = sorted(n for n, (_, sim, _f) in _birsim.opcodes.items() if sim == "K")

# opcode -> test file that runs it inside the scaffold it needs
SCAFFOLDED = {
    "Call": "vm/test_vm_control_flow.py", "NKIKernel": "vm/test_vm_custom_ops.py",
    "DMATrigger": "sync/test_sync_semantics.py", "DMABlock": "sync/test_sync_semantics.py",
    "SwitchQueueInstance": "sync/test_sync_semantics.py", "ResetQueueInstance": "sync/test_sync_semantics.py",
    "CustomOp": "vm/test_vm_custom_ops.py", "BIRKernel": "vm/test_vm_custom_ops.py",
}


def T(name="t", dtype="float32", shape=(P, F), kind="Internal"):
    return tensor(name, kind, dtype, shape, "SB")


def W(name="t", shape=(P, F), dtype="float32"):
    return whole(name, shape, dtype)


def elem(name="t", k=0, dtype="int32"):
    return ap(name, [[1, 1], [1, 1]], dtype, offset=k)


def _prog(op):
    """(allocations, instructions) of one small program running ``op``."""
    a, t8, i8 = [T("a"), T("b"), T("c"), T("y")], T("s", shape=(P, 8)), T("i", "int32", (P, 8))
    x, y = W("a"), W("y")
    one = lambda **k: (a, [insn("op", op, "DVE", ins=[x], outs=[y], **k)])   # noqa: E731
    if op in ("GenericCopy", "AbstractCopy", "Load", "Save", "TensorCopy", "DMACopy",
              "DMADescriptorCopy", "Reciprocal", "Exponential"):
        return one()
    if op in ("DMADescriptorTranspose",):
        return one(transpose_op="None")
    if op == "DMADescriptorReplicate":
        return a, [insn("op", op, "DMA", ins=[ap("a", [[F, 1], [1, F]])], outs=[y])]
    if op == "DMADescriptorCCE":
        return a, [insn("op", op, "DMA", ins=[x, W("b")], outs=[y])]
    if op == "StreamTranspose":
        s = (32, 32)
        return [T("a", shape=s), T("y", shape=s)], [insn("op", op, "DVE", ins=[W("a", s)],
                                                         outs=[W("y", s)])]
    if op == "Activation":
        return one(func="Relu")
    if op in ("ReadActivationAccumulator", "ActivationReadAccumulator"):
        return ([T("a"), T("y"), T("s", shape=(P, 1))],
                [insn("act", "Activation", "Activation", ins=[x], outs=[y], func="Relu",
                      acc="ZeroAccumulate"),
                 insn("op", op, "Activation", ins=[], outs=[W("s", (P, 1))])])
    if op == "DveReadAccumulator":
        return ([T("a"), T("y"), T("s", shape=(P, 1))],
                [insn("acc", "Exponential", "DVE", ins=[x], outs=[y], acc="ZeroAccumulate"),
                 insn("op", op, "DVE", ins=[], outs=[W("s", (P, 1))])])
    if op == "Matmult":
        return ([T("a"), T("b", shape=(P, P)), tensor("y", "Internal", "float32", (P, F), "PSUM")],
                [insn("op", op, "PE", ins=[x, W("b", (P, P))], outs=[y],
                      accumulation_flag=2)])
    if op == "QuantizeMx":
        x4 = "float8_e4m3fn_x4"
        return ([T("a", "bfloat16", (32, F)), T("q", x4, (32, F // 4)), T("s", "uint8", (4, F // 4))],
                [insn("op", op, "DVE", ins=[W("a", (32, F), "bfloat16")],
                      outs=[W("q", (32, F // 4), x4), W("s", (4, F // 4), "uint8")])])
    if op == "MatmultMx":
        x4 = "float4_e2m1fn_x4"
        return ([T("a", x4, (32, F)), T("b", x4, (32, P)), T("s", "uint8", (4, F)),
                 T("t", "uint8", (4, P)), tensor("y", "Internal", "float32", (P, F), "PSUM")],
                [insn("op", op, "PE", ins=[W("a", (32, F), x4), W("b", (32, P), x4),
                                           W("s", (4, F), "uint8"), W("t", (4, P), "uint8")],
                      outs=[y], accumulation_flag=2)])
    if op == "MatmultSparse":
        return ([T("a", shape=(128, 4 * F)), T("b", shape=(128, P)), T("g", "int16", (32, P)),
                 tensor("y", "Internal", "float32", (P, F), "PSUM")],
                [insn("op", op, "PE", ins=[W("a", (128, 4 * F)), W("b", (128, P)),
                                           W("g", (32, P), "int16")],
                      outs=[y], accumulation_flag=2)])
    if op == "TopK":
        return ([T("a", shape=(16, F)), T("v", shape=(16, 8)), T("i", "uint32", (16, 8))],
                [insn("op", op, "Pool", ins=[W("a", (16, F))],
                      outs=[W("v", (16, 8)), W("i", (16, 8), "uint32")], n=16 * F)])
    if op == "Memset":
        return [T("y")], [insn("op", op, "DVE", ins=[], outs=[y], constant=0)]
    if op == "Iota":
        return ([T("y", "int32")], [insn("op", op, "Pool", ins=[], outs=[W("y", dtype="int32")],
                                         pattern=[[1, F]])])
    if op == "Select":
        return a, [insn("op", op, "DVE", ins=[W("b"), x, W("c")], outs=[y])]
    if op == "CopyPredicated":
        return a, [insn("op", op, "DVE", ins=[x, W("b")], outs=[y], reverse_pred=True)]
    if op == "TensorScalarAffineSelect":
        return a, [insn("op", op, "Pool", ins=[x], outs=[y], pattern=[[-1, F]],
                        channel_multiplier=1, compare_op="is_ge", fill_value=-1.0)]
    if op == "RangeSelect":
        return (a + [T("u", shape=(P, 1)), T("v", shape=(P, 1))],
                [insn("op", op, "DVE", ins=[x, W("u", (P, 1)), W("v", (P, 1))], outs=[y],
                      compare_op0="is_ge", compare_op1="is_lt", reduce_cmd="reset_reduce")])
    if op == "TensorTensor":
        return a, [insn("op", op, "DVE", ins=[x, W("b")], outs=[y], op="add")]
    if op in ("TensorScalar", "TensorScalarPtr"):
        return one(op0="add", const0=1.0)
    if op == "TensorReduce":
        return a + [T("r", shape=(P, 1))], [insn("op", op, "DVE", ins=[x],
                                                  outs=[W("r", (P, 1))], op="add")]
    if op == "TensorScalarCache":
        return one(mode="Cumulative", op0="add", op1="add")
    if op == "BNStats":
        return a + [T("s", shape=(P, 6))], [insn("op", op, "DVE", ins=[x], outs=[W("s", (P, 6))])]
    if op == "BNStatsAggregate":
        return ([T("a", shape=(P, 6)), T("s", shape=(P, 2))],
                [insn("op", op, "DVE", ins=[W("a", (P, 6))], outs=[W("s", (P, 2))])])
    if op == "Pool":
        return (a + [T("r", shape=(P, 4))],
                [insn("op", op, "Pool", ins=[ap("a", [[F, P], [4, 4], [2, 2], [1, 2]])],
                      outs=[W("r", (P, 4))], func="Max")])
    if op == "TongaReduceMacroSymbolic":
        return a + [T("r", shape=(P, 1))], [insn("op", op, "DVE", ins=[x], outs=[W("r", (P, 1))],
                                                  op="add", is_first_reduce=True)]
    if op == "BNGradients":
        return (a + [T("s", shape=(P, 3))],
                [insn("op", op, "DVE", ins=[x, W("b"), imm(0.5), imm(2.0)],
                      outs=[W("s", (P, 3))])])
    if op == "BNBackprop":
        return a, [insn("op", op, "DVE", ins=[x, W("b")] + [imm(1.0)] * 4, outs=[y],
                        total_elements=float(F))]
    if op == "BNBackprop2":
        return (a + [T("s", shape=(P, 4))],
                [insn("op", op, "DVE", ins=[x, W("b"), W("s", (P, 4))], outs=[y],
                      total_elements=float(F))])
    if op == "Max":
        return a + [t8], [insn("op", op, "DVE", ins=[x], outs=[W("s", (P, 8))])]
    if op == "MaxIndex":
        return (a + [t8, i8], [insn("op", op, "DVE", ins=[x, W("s", (P, 8))],
                                    outs=[W("i", (P, 8), "int32")])])
    if op in ("MatchReplace", "MaxIndexAndMatchReplace"):
        return (a + [t8, i8], [insn("op", op, "DVE", ins=[x, W("s", (P, 8))],
                                    outs=[y, W("i", (P, 8), "int32")], imm_value=0.0)])
    # the VM's own opcodes
    r = [register("r"), register("q")]
    mv = insn("mv", "RegisterMove", "Pool", ins=[imm(3, "int32")], outs=[reg("r")])
    if op == "RegisterMove":
        return r, [mv]
    if op == "RegisterAlu":
        return r, [mv, insn("op", op, "Pool", ins=[reg("r"), imm(2, "int32")],
                            outs=[reg("q")], op="add")]
    if op == "TensorLoad":
        return [T("a", "int32")] + r, [insn("op", op, "Pool", ins=[elem("a")], outs=[reg("r")])]
    if op == "TensorSave":
        return [T("a", "int32")] + r, [mv, insn("op", op, "Pool", ins=[reg("r")],
                                               outs=[elem("a")])]
    if op in ("GetGlobalRankId",):
        return r, [insn("op", op, "Pool", ins=[], outs=[reg("r")])]
    if op == "GetCurProcessingRankID":
        return r, [insn("op", op, "Pool", ins=[], outs=[reg("r")], iter_id=0, channel_id=0)]
    if op == "ReadVarAddr":
        return ([tensor("v", "Internal", "float32", (P, F), "SB", base=0, addr=64)] + r,
                [insn("op", op, "Pool", ins=[W("v")], outs=[reg("r")])])
    if op == "GroupResetSemaphores":
        return [], [insn("op", op, "Pool", sema_group=[1, 2])]
    if op in ("LoadActFuncSet", "DevicePrint"):
        return a, [insn("op", op, "Activation", ins=[x] if op == "DevicePrint" else [], outs=[])]
    if op in ("Return", "Exit"):
        return [], [insn("op", op, "SP")]
    if op == "UnconditionalBranch":
        return None
    if op == "CompareAndBranch":
        return None
    if op == "Break":
        return [], [loop("l", "i", 0, 4, 1, [insn("op", "Break", "SP")])]
    if _birsim.handlers[op] != "todo":
        return "elsewhere"                     # implemented by another family's tests
    # todo opcodes: any operands; they must fail with "not implemented" before using them
    return a, [insn("op", op, "DVE", ins=[x], outs=[y])]


def _branch_prog(op):
    allocs = [register("r")]
    b0 = [insn("mv", "RegisterMove", "Pool", ins=[imm(1, "int32")], outs=[reg("r")])]
    if op == "UnconditionalBranch":
        b0.append(insn("op", op, "SP", target="b1"))
    else:
        b0.append(insn("op", op, "Pool", ins=[reg("r"), imm(1, "int32")], comp_op="IS_EQIMM",
                       on_true="b1", on_false="b1"))
    return module([function("main", allocs, [block("b0", *b0),
                                             block("b1", insn("x", "Exit", "SP"))])])


def _tested_elsewhere(op):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for d, _, files in sorted(os.walk(here)):
        for f in sorted(files):
            if f.startswith("test_") and f.endswith(".py") and f != os.path.basename(__file__):
                with open(os.path.join(d, f)) as fh:
                    if '"%s"' % op in fh.read():
                        return f
    return None


def run_one(op):
    p = _prog(op)
    if p == "elsewhere":
        assert _tested_elsewhere(op), "%s runs but no test file runs it" % op
        return
    prog = _branch_prog(op) if p is None else module([function("main", p[0], p[1])])
    sim = birsim.Simulator(prog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)   # uninitialised reads are fine here
        sim.run({})


@pytest.mark.parametrize("op", [o for o in K_OPS if o not in SCAFFOLDED])
def test_each_k_opcode_runs_or_says_not_implemented(op):
    if _birsim.handlers[op] == "todo":
        with pytest.raises(birsim.SimulationError, match="%s is not implemented" % op):
            run_one(op)
    else:
        run_one(op)


def test_scaffolded_opcodes_are_run_elsewhere():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for op, f in SCAFFOLDED.items():
        assert _birsim.handlers[op] != "todo"
        with open(os.path.join(here, f)) as fh:
            text = fh.read()
        # DMA blocks are built with bir.dma_block
        assert '"%s"' % op in text or (op == "DMABlock" and "dma_block(" in text), (op, f)


def test_count_of_k_opcodes_that_run(capsys):
    """The 88 K-class opcodes of docs/spec/machine-model.md §1 (codes below 110), then the newer
    compiler names appended after them."""
    listed = [o for o in K_OPS if _birsim.opcodes[o][0] < 110]
    assert len(listed) == 89          # + NonzeroWithCount (a stub in 2.24; NKI docs pin it)
    listed.remove("NonzeroWithCount")  # not one of the 88: counted as a newer name below
    runs = [o for o in listed if _birsim.handlers[o] != "todo"]
    todo = [o for o in K_OPS if _birsim.handlers[o] == "todo"]
    newer = [o for o in K_OPS if _birsim.opcodes[o][0] >= 110] + ["NonzeroWithCount"]
    with capsys.disabled():
        print("\nK-class opcodes of docs/spec/machine-model.md §1 that run: %d of 88; newer names: %d "
              "of %d; not implemented: %s" % (len(runs), len(newer) - len(set(newer) & set(todo)),
                                               len(newer), ", ".join(todo) or "none"))
    assert len(runs) == 88 and not todo, todo
