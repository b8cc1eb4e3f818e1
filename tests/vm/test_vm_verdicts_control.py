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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    """An int32 register read as ``float32`` is its bits as a float (docs/spec/control-flow-sync.md §2.2), compared
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
    """Only u8/s8/u16/s16/u32/s32/f32 are compared (docs/spec/control-flow-sync.md §2.2, FATAL otherwise): a load
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
# 2. Loop trips per the docs/spec/control-flow-sync.md (§1.1)
# ======================================================================================

def _seed_loop(lb, ub, stride):
    """The induction values of docs/spec/control-flow-sync.md §1.1's visitLoop: an axis with lb = ub = stride = 0 is
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
    from test_vm_control_flow import affine, alu, i32_out as out, iv, loop, main, save, setr, zero
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
    from test_vm_control_flow import i32_out as out, loop, main, put
    prog = main([out("o", 1)], [loop("L", "i", lb, ub, stride, [put("p", "o", 0, 1)])])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    assert "stride" in str(ei.value) and ei.value.instruction == "L"


# ======================================================================================
# 3. A Call without a callee is a no-op (docs/spec/control-flow-sync.md §2.4)
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


# ======================================================================================
# 4. Semaphore values are uint32 (docs/spec/control-flow-sync.md §3.1): others are refused at load, on both paths
# ======================================================================================

_SPELLINGS = {
    "compiler-wait": lambda v: {"on_wait": [{"from": "x", "id": 3, "wait_value": v}]},
    "compiler-update": lambda v: {"on_update": [{"id": 3, "update_value": v}]},
    "compiler-value": lambda v: {"on_wait": [{"from": "x", "id": 3, "wait_value": 1,
                                              "value": v}]},
    "birsim-wait": lambda v: {"on_wait": [{"type": "semaphore", "id": 3,
                                           "mode": "sem-ge-imm", "value": v}]},
    "birsim-update": lambda v: {"on_update": [{"type": 1, "id": 3, "mode": "sem-wr-imm",
                                               "value": v}]},
    "birsim-sub": lambda v: {"on_update": [{"id": 3, "mode": "sem-sub-imm", "value": v}]},
}


def _sem_prog(sync):
    return module([function("main", [_i32_out("o", 1)], [block(
        "b0", _put("p0", "o", 1), dict(_put("p1", "o", 2), sync_info=sync))])])


def _load_both(prog, monkeypatch):
    """The load's outcome with the C walker on and off (they must agree)."""
    import birsim._load.passes as L
    out = []
    for fast in (True, False):
        monkeypatch.setattr(L, "FAST_PATH", fast)
        try:
            birsim.load(prog)
            out.append(None)
        except ProgramError as e:
            out.append((str(e), e.path, e.instruction, e.function))
    assert out[0] == out[1]
    return out[0]


@pytest.mark.parametrize("spelling", list(_SPELLINGS))
@pytest.mark.parametrize("value", [1 << 32, (1 << 32) + 1, -1, 1 << 40, -(1 << 63)])
def test_semaphore_value_beyond_uint32_is_a_program_error(spelling, value, monkeypatch):
    """A wait for 2**32 + 1 would pass at once on a wrapped bank: refused with the path."""
    err = _load_both(_sem_prog(_SPELLINGS[spelling](value)), monkeypatch)
    assert err is not None
    text, path, insn_name, func = err
    key = "value" if "birsim" in spelling or spelling == "compiler-value" else \
        spelling.split("-")[1] + "_value"
    assert path.startswith("functions[0].blocks[0].instructions[1].sync_info.on_")
    assert path.endswith("[0].%s" % key)
    assert (insn_name, func) == ("p1", "main")
    assert str(value) in text and "32 bits" in text


@pytest.mark.parametrize("spelling", list(_SPELLINGS))
@pytest.mark.parametrize("value", [0, (1 << 32) - 1])
def test_semaphore_value_within_uint32_loads_on_both_paths(spelling, value, monkeypatch):
    assert _load_both(_sem_prog(_SPELLINGS[spelling](value)), monkeypatch) is None


def test_semaphore_wait_for_uint32_max_holds_only_at_uint32_max():
    """sem-wr-imm 2**32-1 then a sem-ge-imm wait for it: runs (uint32 compare, no wrap);
    the semaphore is then reset so the run ends clean."""
    top = (1 << 32) - 1
    prog = module([function("main", [_i32_out("o", 2)], [block(
        "b0", dict(_put("p0", "o", 1), sync_info=_SPELLINGS["birsim-update"](top)),
        dict(_put("p1", "o", 2, 1), sync_info={
            "on_wait": [{"from": "p0", "id": 3, "wait_value": top}],
            "on_update": [{"id": 3, "mode": "sem-wr-imm", "value": 0}]}))])])
    np.testing.assert_array_equal(_run(prog, checks=RACE_CHECKS)["o"], [[1, 2]])


# ======================================================================================
# 5. Activation: reduce_op "bypass" with an Idle accumulator loads (the op is unused)
# ======================================================================================

def _act_prog(**keys):
    P, F = 4, 8
    whole_ap = [[F, P], [1, F]]
    return module([function("main", [
        tensor("x", "ExternalInput", "float32", [P, F], "DRAM"),
        tensor("y", "ExternalOutput", "float32", [P, F], "DRAM")], [block(
            "b0", insn("a", "Activation", "Activation",
                       ins=[{"kind": "physical_ap", "memref": "x", "ap": whole_ap}],
                       outs=[{"kind": "physical_ap", "memref": "y", "ap": whole_ap}],
                       func="Relu", scale=2.0, bias=-1.0, **keys))])])


@pytest.mark.parametrize("acc_key", ["acc", "reduce_cmd", "accumulator_cmd"])
def test_activation_idle_accumulator_with_bypass_reduce_op_loads_and_runs(acc_key):
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    prog = _act_prog(**{acc_key: "Idle", "reduce_op": "bypass"})
    y = _run(prog, {"x": x}, checks=RACE_CHECKS)["y"]
    t = (x * np.float32(2.0)).astype(np.float32) + np.float32(-1.0)
    np.testing.assert_array_equal(y, np.maximum(t, np.float32(0)))


@pytest.mark.parametrize("acc", ["Accumulate", "ZeroAccumulate"])
def test_activation_used_accumulator_still_refuses_unmodelled_reduce_op(acc):
    with pytest.raises(ProgramError) as ei:
        birsim.load(_act_prog(acc=acc, reduce_op="bypass"))
    assert ei.value.path.endswith("instructions[0].reduce_op")
    assert "bypass" in str(ei.value) and ei.value.instruction == "a"


# ======================================================================================
# 6. DMA with a dynamic (register) offset out of bounds and oob_is_err false: skipped
# ======================================================================================

#: Checks for the DMA programs: the prefill of y is overwritten when the copy runs (a dead
#: write by design: it shows what a skipped transfer leaves).
DMA_CHECKS = ("races", "uninitialized", "leftover_sync", "capacity", "nan")
_X = np.arange(16, dtype=np.int32).reshape(1, 16) * 3 + 7
_INIT = np.full((1, 4), -1, np.int32)


def _dma_io():
    from bir import ap
    return (ap, [tensor("x", "ExternalInput", "int32", [1, 16], "DRAM"),
                 tensor("init", "ExternalInput", "int32", [1, 4], "DRAM"),
                 tensor("y", "ExternalOutput", "int32", [1, 4], "DRAM"),
                 tensor("z", "ExternalOutput", "int32", [1, 1], "DRAM"), register("r")])


def _dma_copy_prog(off, oob_is_err):
    """y := init; y := x[0, r : r+4] (DMACopy, register offset) whose completion adds 1 to
    semaphore 2; z := x[0, 0] once semaphore 2 is 1 (the update must fire)."""
    from bir import reg_ap
    ap, allocs = _dma_io()
    keys = {} if oob_is_err is None else {"oob_is_err": oob_is_err}
    return module([function("main", allocs, [block(
        "b0", insn("s", "RegisterMove", "ALL", ins=[imm(off, "int32")], outs=[reg("r")]),
        insn("c0", "DMACopy", "DMA", ins=[ap("init", [[4, 1], [1, 4]])],
             outs=[ap("y", [[4, 1], [1, 4]])]),
        insn("c1", "DMACopy", "DMA", ins=[reg_ap("x", [[16, 1], [1, 4]], "r")],
             outs=[ap("y", [[4, 1], [1, 4]])],
             sync_info={"on_update": [{"id": 2, "update_value": 1}]}, **keys),
        insn("c2", "DMACopy", "SP", ins=[ap("x", [[16, 1], [1, 1]])],
             outs=[ap("z", [[1, 1], [1, 1]])],
             sync_info={"on_wait": [{"from": "c1", "id": 2, "wait_value": 1}],
                        "on_update": [{"id": 2, "mode": "sem-sub-imm", "value": 1}]}))])])


def _in_bounds(off):
    return 0 <= off and off + 4 <= 16


@pytest.mark.parametrize("dma_mode", ["eager", "deferred"])
@pytest.mark.parametrize("off", [0, 12, 13, 14, 16, -1, -4, 1 << 20])
def test_dma_copy_register_offset_out_of_bounds_skips_with_oob_is_err_false(off, dma_mode):
    """NKI dma_copy oob_mode=skip: the transfer is skipped, y keeps its prefill, and the
    completion update still fires (z is written after it)."""
    res = _run(_dma_copy_prog(off, False), {"x": _X, "init": _INIT}, checks=DMA_CHECKS,
               dma_mode=dma_mode)
    want = _X[:, off:off + 4] if _in_bounds(off) else _INIT
    np.testing.assert_array_equal(res["y"], want)
    np.testing.assert_array_equal(res["z"], _X[:, :1])


@pytest.mark.parametrize("oob_is_err", [None, True])
@pytest.mark.parametrize("off", [13, -1])
def test_dma_copy_register_offset_out_of_bounds_is_an_error_by_default(off, oob_is_err):
    with pytest.raises(birsim.MemoryAccessError) as ei:
        _run(_dma_copy_prog(off, oob_is_err), {"x": _X, "init": _INIT}, checks=DMA_CHECKS)
    assert ei.value.instruction == "c1"


def test_dma_copy_static_pattern_out_of_bounds_stays_an_error_with_oob_is_err_false():
    """Only a start known at run time is skipped; a fixed pattern past the end is a bug."""
    ap, allocs = _dma_io()
    prog = module([function("main", allocs, [block(
        "b0", insn("c1", "DMACopy", "DMA", ins=[ap("x", [[16, 1], [1, 4]], offset=14)],
                   outs=[ap("y", [[4, 1], [1, 4]])], oob_is_err=False))])])
    with pytest.raises(birsim.MemoryAccessError):
        _run(prog, {"x": _X, "init": _INIT}, strict=False)


def _descriptor_prog(off, oob_is_err):
    """The same transfer as a DMADescriptorCopy of a DMA block fired by a trigger on SP."""
    from bir import dma_block, dma_queue, reg_ap
    ap, allocs = _dma_io()
    keys = {} if oob_is_err is None else {"oob_is_err": oob_is_err}
    q = dma_queue("q0", [dma_block(
        "blk", insn("d", "DMADescriptorCopy", "DMA", ins=[reg_ap("x", [[16, 1], [1, 4]], "r")],
                    outs=[ap("y", [[4, 1], [1, 4]])], **keys),
        sync={"on_update": [{"id": 5, "update_value": 16}]})])
    return module([function("main", allocs, [block(
        "b0", insn("s", "RegisterMove", "ALL", ins=[imm(off, "int32")], outs=[reg("r")]),
        insn("c0", "DMACopy", "SP", ins=[ap("init", [[4, 1], [1, 4]])],
             outs=[ap("y", [[4, 1], [1, 4]])]),
        insn("trig", "DMATrigger", "SP", queue="q0", dma_blocks=["blk"]),
        insn("c2", "DMACopy", "Activation", ins=[ap("x", [[16, 1], [1, 1]])],
             outs=[ap("z", [[1, 1], [1, 1]])],
             sync_info={"on_wait": [{"from": "blk", "id": 5, "wait_value": 16}],
                        "on_update": [{"id": 5, "mode": "sem-sub-imm", "value": 16}]}))])],
                  dma_queues=[q])


@pytest.mark.parametrize("off", [2, 13, -2])
def test_dma_descriptor_register_offset_out_of_bounds_skips_with_oob_is_err_false(off):
    res = _run(_descriptor_prog(off, False), {"x": _X, "init": _INIT}, checks=DMA_CHECKS)
    want = _X[:, off:off + 4] if _in_bounds(off) else _INIT
    np.testing.assert_array_equal(res["y"], want)
    np.testing.assert_array_equal(res["z"], _X[:, :1])


def test_dma_descriptor_register_offset_out_of_bounds_is_an_error_by_default():
    with pytest.raises(birsim.MemoryAccessError) as ei:
        _run(_descriptor_prog(13, None), {"x": _X, "init": _INIT}, checks=DMA_CHECKS)
    assert ei.value.instruction == "d"


# ======================================================================================
# 7. GpSimd (Pool) touching PSUM is a capacity finding (it reaches SBUF only)
# ======================================================================================

def _pool_psum_prog(mid_mem, engine="Pool"):
    """x -> t (SB) -> p (mid_mem) -> u (SB) -> o, every step on ``engine`` (one queue, so
    the program is ordered without semaphores); the two copies touch p."""
    from bir import ap
    P, F = 4, 8
    full = [[F, P], [1, F]]
    allocs = [tensor("x", "ExternalInput", "float32", [P, F], "DRAM"),
              tensor("t", "Internal", "float32", [P, F], "SB"),
              tensor("p", "Internal", "float32", [P, F], mid_mem),
              tensor("u", "Internal", "float32", [P, F], "SB"),
              tensor("o", "ExternalOutput", "float32", [P, F], "DRAM")]
    return module([function("main", allocs, [block(
        "b0", insn("ld", "Load", engine, ins=[ap("x", full)], outs=[ap("t", full)]),
        insn("cp1", "TensorCopy", engine, ins=[ap("t", full)], outs=[ap("p", full)]),
        insn("cp2", "TensorCopy", engine, ins=[ap("p", full)], outs=[ap("u", full)]),
        insn("st", "Save", engine, ins=[ap("u", full)], outs=[ap("o", full)]))])])


def test_gpsimd_instruction_touching_psum_is_a_finding_under_checks_all():
    x = np.random.default_rng(7).standard_normal((4, 8)).astype(np.float32)
    sim = birsim.Simulator(_pool_psum_prog("PSUM"), checks="all")
    with pytest.warns(birsim.BirsimWarning):
        out = sim.run({"x": x})
    np.testing.assert_array_equal(out["o"], x)
    got = [(f.kind, f.details["sub"], f.details["first"]["instruction"],
            f.details["operand"], f.details["tensor"]) for f in sim.findings]
    assert got == [("capacity", "engine_psum", "cp1", "outs[0]", "p"),
                   ("capacity", "engine_psum", "cp2", "ins[0]", "p")]
    assert "cp2" in sim.findings[1].message and "SBUF" in sim.findings[1].message


@pytest.mark.parametrize("mid_mem,engine", [("SB", "Pool"), ("PSUM", "DVE"),
                                            ("PSUM", "Activation")])
def test_gpsimd_on_sbuf_and_other_engines_on_psum_have_no_finding(mid_mem, engine):
    x = np.random.default_rng(8).standard_normal((4, 8)).astype(np.float32)
    sim = birsim.Simulator(_pool_psum_prog(mid_mem, engine), checks="all", strict=True)
    np.testing.assert_array_equal(sim.run({"x": x})["o"], x)
    assert sim.findings == []
