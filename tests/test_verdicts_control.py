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

#: The checks a register/DRAM test program must pass (Pool touching DRAM is a capacity
#: finding of its own, beside the point of these tests).
RACE_CHECKS = ("races", "uninitialized", "leftover_sync", "dead_writes", "nan")
CMP = {"LT": np.less, "EQ": np.equal, "GT": np.greater, "NE": np.not_equal}


def _run(prog, inputs=None, **opts):
    opts.setdefault("strict", True)
    return birsim.Simulator(prog, **opts).run(inputs or {})


def _i32_out(name, n):
    return tensor(name, "ExternalOutput", "int32", [1, n], "DRAM")


def _put(name, loc, value, k=0):
    """loc[0, k] := value."""
    return insn(name, "Memset", "Pool", outs=[{"kind": "physical_ap", "memref": loc,
                                               "ap": [[1, 1], [1, 1]], "dtype": "int32",
                                               "offset": k}],
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


# ======================================================================================
# 2. Loop trips per the seed (§1.1)
# ======================================================================================

def _seed_loop(lb, ub, stride):
    """The induction values of seed §1.1's visitLoop: an axis with lb = ub = stride = 0 is
    one body pass (birsim binds i = lb = 0); else the zero-trip guard, then do/while."""
    if not (ub or lb or stride):
        return [0]
    i, out = lb, []
    if i >= ub:
        return out
    while True:
        out.append(i)
        i += stride
        if not ub > i:
            return out


@pytest.mark.parametrize("lb,ub,stride", [(0, 0, 0), (5, 5, 0), (7, 3, -1), (0, 0, -2),
                                          (0, -1, 0), (3, 3, 0), (0, 3, 1), (0, 0, 1)])
def test_loop_degenerate_axis_and_zero_trip_guard_first(lb, ub, stride):
    """lb = ub = stride = 0 runs the body once; lb >= ub runs no trip whatever the stride.
    Each trip stores i + 100 at vals[trip] and counts itself in register r."""
    from test_control_flow import affine, alu, i32_out as out, iv, loop, main, save, setr, zero
    n = 4
    prog = main(
        [out("vals", n), out("cnt", 1), register("r"), register("k")],
        [zero("z", "vals", n), setr("r0", "r", 0),
         loop("L", "i", lb, ub, stride, [
             insn("io", "Iota", "Pool", outs=[{"kind": "physical_ap", "memref": "vals",
                                               "ap": [[1, 1], [1, 1]], "dtype": "int32",
                                               "offset": {"kind": "IntRuntimeValueKind",
                                                          "regref": "r"}}],
                  base=affine([(iv("i"), 1)], 100)),
             alu("inc", "add", "r", "r", 1)]),
         save("s", "r", "cnt")])
    want = _seed_loop(lb, ub, stride)
    res = _run(prog, checks=RACE_CHECKS)
    assert res["cnt"][0, 0] == len(want)
    ref = np.zeros(n, np.int32)
    ref[:len(want)] = np.array(want, np.int64) + 100
    np.testing.assert_array_equal(res["vals"][0], ref)


@pytest.mark.parametrize("lb,ub,stride", [(0, 10, 0), (0, 10, -1), (-5, 0, 0)])
def test_loop_that_never_ends_is_still_refused(lb, ub, stride):
    from test_control_flow import i32_out as out, loop, main, put
    prog = main([out("o", 1)], [loop("L", "i", lb, ub, stride, [put("p", "o", 0, 1)])])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    assert "stride" in str(ei.value) and ei.value.instruction == "L"


# ======================================================================================
# 3. A Call without a callee is a no-op (seed §2.4)
# ======================================================================================

def _sem(sid, value, wait):
    key = "wait_value" if wait else "update_value"
    return {"on_wait": [{"from": "x", "id": sid, key: value}]} if wait \
        else {"on_update": [{"id": sid, key: value}]}


@pytest.mark.parametrize("target", ["absent", None])
def test_call_without_callee_is_a_no_op_whose_sync_still_acts(target):
    """o[0] := 1, the no-op Call adds 1 to semaphore 3, then o[1] := 2 waits for it (a
    missing update would deadlock); the callee-less Call runs nothing."""
    keys = {} if target == "absent" else {"target": None}
    prog = module([function("main", [_i32_out("o", 2)], [block(
        "b0", _put("p1", "o", 1),
        insn("c", "Call", "Unassigned", sync_info=_sem(3, 1, False), **keys),
        dict(_put("p2", "o", 2, 1), sync_info=dict(
            _sem(3, 1, True), on_update=[{"type": "semaphore", "id": 3, "mode": "sem-sub-imm",
                                          "value": 1}])))])])
    sim = birsim.Simulator(prog, strict=True, checks=RACE_CHECKS)
    np.testing.assert_array_equal(sim.run({})["o"], [[1, 2]])
    assert "no callee" in birsim.load(prog).listing()


def test_call_without_callee_but_with_arguments_is_a_program_error():
    prog = module([function("main", [_i32_out("o", 1)], [block(
        "b0", insn("c", "Call", "Unassigned", arguments={"x": "o"}))])])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    assert ei.value.path.endswith("instructions[0].arguments") and ei.value.instruction == "c"
