"""Verdicts on control flow, sync values, DMA out-of-bounds skipping, Activation's bypass
reduce op and GpSimd's reach (brief c2).

References are computed independently (NumPy reinterpretation, plain Python loops);
programs are built with tests/bir.py and are race-free under ``checks="all"``.
"""

import os
import sys

import numpy as np
import pytest

import birsim
from birsim import ProgramError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bir import block, function, imm, insn, module, reg, register, tensor  # noqa: E402

CMP = {"LT": np.less, "EQ": np.equal, "GT": np.greater, "NE": np.not_equal}


def _run(prog, inputs=None, **opts):
    opts.setdefault("strict", True)
    return birsim.Simulator(prog, **opts).run(inputs or {})


def _i32_out(name, n):
    return tensor(name, "ExternalOutput", "int32", [1, n], "DRAM")


def _put(name, loc, value):
    return insn(name, "Memset", "Pool", outs=[{"kind": "physical_ap", "memref": loc,
                                               "ap": [[1, 1], [1, 1]], "dtype": "int32"}],
                constant=value)


def _setr(name, r, value):
    return insn(name, "RegisterMove", "Pool", ins=[imm(value, "int32")], outs=[reg(r)])


def _branch_prog(comp_op, left, right, sets, regs):
    """o := 1 when the branch is taken, else 2; ``sets`` = [(register, int32 value)]."""
    return module([function("main", [_i32_out("o", 1)] + regs, [
        block("b0", *[_setr("s%d" % k, r, v) for k, (r, v) in enumerate(sets)],
              insn("c", "CompareAndBranch", "Pool", ins=[left, right], comp_op=comp_op,
                   on_true="yes", on_false="no")),
        block("yes", _put("p1", "o", 1),
              insn("j", "UnconditionalBranch", "Pool", target="end")),
        block("no", _put("p2", "o", 2)),
        block("end")])])


# ======================================================================================
# 1. CompareAndBranch compares in its left operand's dtype
# ======================================================================================

F25 = int(np.float32(2.5).view(np.int32))          # the bits of 2.5f in an int32 register


@pytest.mark.parametrize("bits", [2, F25, -1, 0, int(np.float32(-3.0).view(np.int32))])
@pytest.mark.parametrize("rel", list(CMP))
def test_cab_float32_operand_reads_register_bits_as_float(bits, rel):
    """An int32 register read as ``float32`` is its bits as a float (seed §2.2), compared
    in float with the immediate: 2 is a denormal, not 2 == trunc(2.5)."""
    prog = _branch_prog("IS_%sIMM" % rel, reg("a", "float32"), imm(2.5, "float32"),
                        [("a", bits)], [register("a")])
    want = CMP[rel](np.array([bits], np.int32).view(np.float32)[0], np.float32(2.5))
    assert _run(prog)["o"][0, 0] == (1 if want else 2)


@pytest.mark.parametrize("a,b", [(F25, 2), (2, F25), (F25, F25),
                                 (int(np.float32(-1.0).view(np.int32)), 1),
                                 (int(np.float32(-1.0).view(np.int32)),
                                  int(np.float32(-2.0).view(np.int32)))])
def test_cab_float32_register_compare_reads_both_registers_as_float(a, b):
    """...REG: both registers are read at the left side's dtype (float32 bits)."""
    prog = _branch_prog("IS_LTREG", reg("a", "float32"), reg("b"), [("a", a), ("b", b)],
                        [register("a"), register("b")])
    fa, fb = np.array([a, b], np.int32).view(np.float32)
    assert _run(prog)["o"][0, 0] == (1 if fa < fb else 2)


@pytest.mark.parametrize("reg_dtype,opnd_dtype", [("int64", None), ("int32", "int64"),
                                                  ("uint64", None), ("int32", "float16"),
                                                  ("int32", "bfloat16")])
def test_cab_left_dtype_beyond_32_bit_scalars_is_a_program_error(reg_dtype, opnd_dtype):
    """Only u8/s8/u16/s16/u32/s32/f32 are compared (seed §2.2, FATAL otherwise): a load
    error naming the instruction and the operand."""
    prog = _branch_prog("IS_EQIMM", reg("a", opnd_dtype), imm(1, "int32"), [("a", 1)],
                        [register("a", reg_dtype)])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    e = ei.value
    assert e.instruction == "c" and e.function == "main"
    assert e.path.startswith("functions[0].blocks[0].instructions[1].ins[0]")
    assert (opnd_dtype or reg_dtype) in str(e)


def test_cab_narrow_operand_dtype_truncates_register_bits():
    """A uint8 operand on an int32 register compares its low byte."""
    prog = _branch_prog("IS_EQIMM", reg("a", "uint8"), imm(255, "int32"), [("a", 0x7FF)],
                        [register("a")])
    assert _run(prog)["o"][0, 0] == (1 if np.uint8(0x7FF & 0xFF) == 255 else 2)
