"""Control flow (issue 3): Loop, DynamicForLoop, DoWhile, the CFG driver, terminators,
Call/Return, Exit, the step limit and interrupts, and the end-to-end examples.

Every test checks birsim against an independent reference written in plain Python or
NumPy (the loops below spell out what the BIR program means). Programs are built with
tests/bir.py; the small helpers here only shorten register and tensor plumbing.
"""

import json
import os
import signal
import sys

import numpy as np
import pytest

import birsim
from birsim import (DeadlockError, ProgramError, SimulationError,
                    StepLimitError)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bir import (affine, ap, block, do_while, dyn_loop, function, imm, insn,  # noqa: E402
                 iv, loop, module, reg, register, rv, sym_ap, sync_info, tensor, update,
                 wait, whole)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


# ---- helpers -------------------------------------------------------------------------

def run(prog, inputs=None, **opts):
    """Run strictly (any diagnostic is an error) and return (outputs, simulator)."""
    opts.setdefault("strict", True)
    sim = birsim.Simulator(prog, **opts)
    return sim.run(inputs or {}), sim


def i32_out(name, n):
    """An int32 [1, n] DRAM output."""
    return tensor(name, "ExternalOutput", "int32", [1, n], "DRAM")


def i32_in(name, n):
    return tensor(name, "ExternalInput", "int32", [1, n], "DRAM")


def elem(loc, k=0, dtype="int32", offset=None):
    """Element k of a [1, n] tensor (an AP covering one element)."""
    if offset is None:
        offset = k or None
    return ap(loc, [[1, 1], [1, 1]], dtype, offset=offset)


def setr(name, r, value):
    return insn(name, "RegisterMove", "Pool", ins=[imm(value, "int32")], outs=[reg(r)])


def alu(name, op, out, a, b):
    """out := a op b; a, b are register names or ints."""
    def opnd(x):
        return imm(x, "int32") if isinstance(x, int) else reg(x)
    return insn(name, "RegisterAlu", "Pool", ins=[opnd(a), opnd(b)], outs=[reg(out)], op=op)


def save(name, r, loc, k=0, offset=None):
    """loc[0, k] := register r (or at an element offset expression)."""
    return insn(name, "TensorSave", "Pool", ins=[reg(r)],
                outs=[elem(loc, k, offset=offset)])


def load(name, r, loc, k=0, dtype="int32"):
    return insn(name, "TensorLoad", "Pool", ins=[elem(loc, k, dtype)], outs=[reg(r)])


def zero(name, loc, n):
    return insn(name, "Memset", "Pool", outs=[ap(loc, [[n, 1], [1, n]], "int32")], constant=0)


def put(name, loc, k, value):
    """loc[0, k] := value (a non-negative int) via Memset."""
    return insn(name, "Memset", "Pool", outs=[elem(loc, k)], constant=value)


def iota_at(name, loc, offset, base):
    """One int32 element at element ``offset`` := ``base`` (both may be expressions)."""
    return insn(name, "Iota", "Pool", outs=[ap(loc, [[1, 1], [1, 1]], "int32", offset=offset)],
                base=base)


def cab(name, comp_op, left, right, on_true, on_false):
    return insn(name, "CompareAndBranch", "Pool", ins=[left, right], comp_op=comp_op,
                on_true=on_true, on_false=on_false)


def br(name, target):
    return insn(name, "UnconditionalBranch", "Pool", target=target)


def main(allocs, blocks, **kw):
    return module([function("main", allocs, blocks)], **kw)


# ======================================================================================
# Loop
# ======================================================================================

@pytest.mark.parametrize("lb,ub,stride", [(0, 10, 1), (0, 10, 3), (2, 11, 4), (-3, 5, 2),
                                          (0, 1, 7), (4, 5, 1), (5, 5, 1), (7, 3, 1),
                                          (-2, -8, 3)])
def test_loop_trip_count_and_induction_values(lb, ub, stride):
    """i = lb; i < ub; i += stride: ceil((ub-lb)/stride) trips (0 when lb >= ub); each
    trip sees its own i in a physical_ap offset and as the Iota base."""
    n = max(ub - lb, 1)
    prog = main(
        [i32_out("vals", n), i32_out("cnt", 1), register("r")],
        [zero("z", "vals", n), setr("r0", "r", 0),
         loop("L", "i", lb, ub, stride, [
             iota_at("io", "vals", affine([(iv("i"), 1)], -lb), affine([(iv("i"), 1)], 1000)),
             alu("inc", "add", "r", "r", 1)]),
         save("sv", "r", "cnt")])
    out, _ = run(prog)
    ref = np.zeros((1, n), np.int32)
    trips = 0
    i = lb
    while i < ub:
        ref[0, i - lb] = 1000 + i
        trips += 1
        i += stride
    assert trips == max(0, -(-(ub - lb) // stride))
    assert out["cnt"][0, 0] == trips
    np.testing.assert_array_equal(out["vals"], ref)


def test_loop_induction_in_symbolic_ap_addrs():
    """symbolic_ap addrs move with the loop variable: reverse the column tiles."""
    P, T, K = 4, 8, 5
    prog = main(
        [tensor("x", "ExternalInput", "float32", [P, K * T], "DRAM"),
         tensor("y", "ExternalOutput", "float32", [P, K * T], "DRAM")],
        [loop("L", "k", 0, K, 1, [
            insn("cp", "TensorCopy", "DVE",
                 ins=[sym_ap("x", [[K * T, P], [1, T]], [None, affine([(iv("k"), T)])])],
                 outs=[sym_ap("y", [[K * T, P], [1, T]],
                              [None, affine([(iv("k"), -T)], (K - 1) * T)])])])])
    x = np.arange(P * K * T, dtype=np.float32).reshape(P, K * T)
    out, _ = run(prog, {"x": x})
    ref = np.concatenate([x[:, k * T:(k + 1) * T] for k in reversed(range(K))], axis=1)
    np.testing.assert_array_equal(out["y"], ref)


def test_nested_loops():
    """Inner loop runs fully on every outer trip and sees both induction values."""
    I, J = 3, 4
    W = J * 2
    prog = main(
        [i32_out("o", I * W)],
        [zero("z", "o", I * W),
         loop("Li", "i", 0, I, 1, [
             loop("Lj", "j", 1, 2 * J, 2, [
                 iota_at("io", "o", affine([(iv("i"), W), (iv("j"), 1)]),
                         affine([(iv("i"), 100), (iv("j"), 1)]))])])])
    out, _ = run(prog)
    ref = np.zeros((1, I * W), np.int32)
    for i in range(I):
        for j in range(1, 2 * J, 2):
            ref[0, i * W + j] = 100 * i + j
    np.testing.assert_array_equal(out["o"], ref)


def test_loop_body_of_several_blocks_runs_in_cfg_order_each_trip():
    n = 6
    body = [block("b_mul", alu("m", "mult", "r", "r", 3)),
            block("b_add", alu("a", "add", "r", "r", 1)),
            block("b_save", save("s", "r", "o", offset=affine([(iv("t"), 1)])))]
    prog = main([i32_out("o", n), register("r")],
                [setr("r0", "r", 1), loop("L", "t", 0, n, 1, body)])
    out, _ = run(prog)
    r, ref = 1, []
    for _ in range(n):
        r = r * 3
        r = r + 1
        ref.append(r)
    np.testing.assert_array_equal(out["o"][0], ref)


def test_loop_body_branches_are_followed_each_trip():
    """A CompareAndBranch inside a loop body picks a different block on alternate trips."""
    n = 7
    body = [block("chk", alu("par", "bitwise_and", "p", "c", 1),
                  cab("c1", "IS_EQIMM", reg("p"), imm(0, "int32"), "even", "odd")),
            block("even", alu("e", "add", "acc", "acc", 10), br("j1", "tail")),
            block("odd", alu("o", "mult", "acc", "acc", 2)),
            block("tail", alu("inc", "add", "c", "c", 1))]
    prog = main([i32_out("o", 1), register("c"), register("p"), register("acc")],
                [setr("c0", "c", 0), setr("a0", "acc", 1), loop("L", "t", 0, n, 1, body),
                 save("s", "acc", "o")])
    out, _ = run(prog)
    acc = 1
    for c in range(n):
        acc = acc + 10 if c % 2 == 0 else acc * 2
    assert out["o"][0, 0] == acc


def test_axis_out_of_scope_is_an_error_naming_it():
    """An axis read after its loop has ended is a SimulationError naming the axis."""
    prog = main([i32_out("o", 4)],
                [zero("z", "o", 4),
                 loop("L", "kk", 0, 2, 1, [iota_at("in_loop", "o", 0, iv("kk"))]),
                 iota_at("after", "o", affine([(iv("kk"), 1)]), 1)])
    with pytest.raises((ProgramError, SimulationError)) as ei:
        run(prog)
    assert "kk" in str(ei.value)


def test_unknown_axis_is_a_program_error_naming_it():
    prog = main([i32_out("o", 1)], [iota_at("io", "o", 0, iv("nosuchaxis"))])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    assert "nosuchaxis" in str(ei.value)


@pytest.mark.parametrize("stride", [0, -1, -4])
def test_loop_nonpositive_stride_rejected(stride):
    prog = main([i32_out("o", 1)], [loop("L", "i", 0, 10, stride, [put("p", "o", 0, 1)])])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    assert "stride" in str(ei.value)


@pytest.mark.parametrize("stride", [0, -2])
def test_dynamic_loop_constant_nonpositive_stride_rejected(stride):
    prog = main([i32_out("o", 1), register("n")],
                [dyn_loop("L", "i", 0, affine([(rv("n"), 1)]), stride, [put("p", "o", 0, 1)])])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    assert "stride" in str(ei.value)


@pytest.mark.parametrize("stride", [0, -3])
def test_dynamic_loop_runtime_nonpositive_stride_rejected(stride):
    """A stride only known at run time (from a register) fails clearly when <= 0."""
    prog = main([i32_in("s", 1), i32_out("o", 1), register("n"), register("st")],
                [setr("n0", "n", 10), load("ls", "st", "s"),
                 dyn_loop("L", "i", 0, affine([(rv("n"), 1)]), affine([(rv("st"), 1)]),
                          [put("p", "o", 0, 1)]),
                 put("p2", "o", 0, 2)])
    with pytest.raises(SimulationError) as ei:
        run(prog, {"s": np.array([[stride]], np.int32)})
    assert "stride" in str(ei.value)


def _parallel_prog(parallel):
    P, T, K = 8, 16, 6
    body = [insn("add", "TensorTensor", "DVE",
                 ins=[ap("x", [[K * T, P], [1, T]], offset=affine([(iv("k"), T)])),
                      ap("y", [[K * T, P], [1, T]], offset=affine([(iv("k"), T)]))],
                 outs=[ap("z", [[K * T, P], [1, T]], offset=affine([(iv("k"), T)]))],
                 op="add"),
            iota_at("io", "idx", affine([(iv("k"), 1)]), affine([(iv("k"), 3)], 1)),
            alu("acc", "mult", "r", "r", 2), alu("acc2", "add", "r", "r", 1)]
    return main(
        [tensor("x", "ExternalInput", "float32", [P, K * T], "DRAM"),
         tensor("y", "ExternalInput", "float32", [P, K * T], "DRAM"),
         tensor("z", "ExternalOutput", "float32", [P, K * T], "DRAM"),
         i32_out("idx", K), i32_out("cnt", 1), register("r")],
        [setr("r0", "r", 0), loop("L", "k", 0, K, 1, body, isParallel=parallel),
         save("sv", "r", "cnt")]), (P, K * T, K)


def test_parallel_loop_same_results_as_sequential():
    rng = np.random.default_rng(3)
    (seq, (P, F, K)), (par, _) = _parallel_prog(False), _parallel_prog(True)
    x = rng.standard_normal((P, F), dtype=np.float32)
    y = rng.standard_normal((P, F), dtype=np.float32)
    o_seq, _ = run(seq, {"x": x, "y": y})
    o_par, _ = run(par, {"x": x, "y": y})
    r = 0
    for _ in range(K):
        r = r * 2 + 1
    ref = {"z": x + y, "idx": (3 * np.arange(K) + 1)[None].astype(np.int32),
           "cnt": np.array([[r]], np.int32)}
    for name, want in ref.items():
        np.testing.assert_array_equal(o_seq[name], want)
        np.testing.assert_array_equal(o_par[name], want)


# ======================================================================================
# DynamicForLoop
# ======================================================================================

@pytest.mark.parametrize("c,coeff,lb,stride", [(0, 1, 0, 1), (3, 2, 1, 3), (-4, 3, 2, 2),
                                               (0, 1, 5, 1)])
def test_dynamic_for_loop_ub_from_register(c, coeff, lb, stride):
    """ub = c + coeff * register, read at loop entry; lb/stride are affine (here a register
    feeds lb too). Changing the register inside the body does not change the bound."""
    W = 64
    prog = main(
        [i32_in("n", 1), i32_out("o", W), i32_out("cnt", 1), register("rn"),
         register("rl"), register("k")],
        [zero("z", "o", W), load("ln", "rn", "n"), setr("rl0", "rl", lb), setr("k0", "k", 0),
         dyn_loop("L", "i", affine([(rv("rl"), 1)]), affine([(rv("rn"), coeff)], c), stride, [
             iota_at("io", "o", affine([(iv("i"), 1)]), affine([(iv("i"), 1)], 7)),
             alu("inc", "add", "k", "k", 1),
             alu("bump", "add", "rn", "rn", 100)]),
         save("sv", "k", "cnt")])
    sim = birsim.Simulator(prog, strict=True)
    for n in (0, 1, 2, 5, 9):
        out = sim.run({"n": np.array([[n]], np.int32)})
        ub = c + coeff * n
        ref = np.zeros((1, W), np.int32)
        trips = 0
        for i in range(lb, ub, stride):
            ref[0, i] = i + 7
            trips += 1
        assert out["cnt"][0, 0] == trips, n
        np.testing.assert_array_equal(out["o"], ref)


def test_dynamic_for_loop_outer_induction_feeds_inner_bounds():
    """Inner lb = i and stride = i + 1 come from the outer loop's induction value."""
    I, W = 5, 16
    prog = main(
        [i32_in("n", 1), i32_out("o", I * W), register("rn")],
        [zero("z", "o", I * W), load("ln", "rn", "n"),
         dyn_loop("Li", "i", 0, affine([(rv("rn"), 1)], -6), 1, [
             dyn_loop("Lj", "j", affine([(iv("i"), 1)]), affine([(rv("rn"), 1)]),
                      affine([(iv("i"), 1)], 1), [
                          iota_at("io", "o", affine([(iv("i"), W), (iv("j"), 1)]),
                                  affine([(iv("i"), 100), (iv("j"), 1)], 1))])])])
    n = 11
    out, _ = run(prog, {"n": np.array([[n]], np.int32)})
    ref = np.zeros((1, I * W), np.int32)
    for i in range(0, n - 6):
        for j in range(i, n, i + 1):
            ref[0, i * W + j] = 100 * i + j + 1
    np.testing.assert_array_equal(out["o"], ref)


def _bad_ubs():
    two = affine([(rv("n"), 1), (rv("m"), 1)])
    return {
        "int": 5,
        "constant affine": affine([], 5),
        "two registers": two,
        "axis term": affine([(iv("outer"), 1)]),
        "bare register": rv("n"),
        "sum": {"kind": "SumKind", "terms": [affine([(rv("n"), 1)])]},
        "mult": {"kind": "MultKind", "var": rv("n"), "scale": 2},
        "nested affine": affine([(affine([(rv("n"), 1)]), 1)]),
        "floordiv": affine([({"kind": "FloorDivKind", "numer": rv("n"), "denom": 2}, 1)]),
    }


@pytest.mark.parametrize("which", list(_bad_ubs()))
def test_dynamic_for_loop_bad_upper_bound_is_1910(which):
    ub = _bad_ubs()[which]
    prog = main([i32_out("o", 1), register("n"), register("m")],
                [loop("outer", "outer", 0, 1, 1, [
                    dyn_loop("L", "i", 0, ub, 1, [put("p", "o", 0, 1)])])])
    with pytest.raises(ProgramError) as ei:
        birsim.load(prog)
    assert ei.value.code == 1910
    assert "Only scalar values supported in Dynamic For Loop upper bound expressions" \
        in str(ei.value)


# ======================================================================================
# DoWhile
# ======================================================================================

def test_do_while_runs_body_at_least_once():
    prog = main([i32_out("o", 1), register("c"), register("k")],
                [setr("c0", "c", 0), setr("k0", "k", 0),
                 do_while("DW", "c", [alu("inc", "add", "k", "k", 1)]),
                 save("s", "k", "o")])
    out, _ = run(prog)
    assert out["o"][0, 0] == 1


@pytest.mark.parametrize("n", [1, 2, 7, 40])
def test_do_while_repeats_while_register_nonzero(n):
    """Count down from n: the body runs until the condition register reads 0."""
    prog = main([i32_in("n", 1), i32_out("o", 64), register("c"), register("k")],
                [zero("z", "o", 64), load("ln", "c", "n"), setr("k0", "k", 0),
                 do_while("DW", "c", [
                     alu("dec", "subtract", "c", "c", 1),
                     alu("inc", "add", "k", "k", 1),
                     insn("rec", "TensorSave", "Pool", ins=[reg("c")],
                          outs=[insn_reg_ap("o", "k")])]),
                 save("s", "k", "o", 0)])
    out, _ = run(prog, {"n": np.array([[n]], np.int32)})
    ref = np.zeros(64, np.int32)
    c, k = n, 0
    while True:
        c -= 1
        k += 1
        ref[k] = c
        if c == 0:
            break
    ref[0] = k
    np.testing.assert_array_equal(out["o"][0], ref)


def insn_reg_ap(loc, r):
    """One int32 element of ``loc`` at the index held by register ``r``."""
    return {"kind": "register_ap", "memref": loc, "dtype": "int32", "ap": [[1, 1], [1, 1]],
            "reg_ap_offset": r, "const_ap_offset": 0}


@pytest.mark.parametrize("start", [1.0, -1.0, 3.0])
def test_do_while_float_condition_register_by_value(start):
    """A float32 condition register is tested by value: halving reaches 0.0 (or -0.0,
    whose bits are not 0) and the loop stops."""
    prog = main([tensor("x", "ExternalInput", "float32", [1, 1], "DRAM"), i32_out("o", 1),
                 register("v", "float32"), register("k")],
                [load("lv", "v", "x", 0, "float32"), setr("k0", "k", 0),
                 do_while("DW", "v", [
                     insn("half", "RegisterAlu", "Pool", ins=[reg("v"), imm(0.5, "float32")],
                          outs=[reg("v")], op="mult"),
                     alu("inc", "add", "k", "k", 1)]),
                 save("s", "k", "o")])
    out, _ = run(prog, {"x": np.array([[start]], np.float32)}, max_steps=100_000)
    v, k = np.float32(start), 0
    while True:
        v = np.float32(v * np.float32(0.5))
        k += 1
        if v == 0:
            break
    assert out["o"][0, 0] == k


def test_do_while_nested_in_loop_with_loop_in_body():
    """A DoWhile inside a Loop, with a Loop inside the DoWhile."""
    prog = main([i32_out("o", 1), register("c"), register("acc")],
                [setr("a0", "acc", 0),
                 loop("L", "i", 0, 3, 1, [
                     setr("c0", "c", 4),
                     do_while("DW", "c", [
                         alu("dec", "subtract", "c", "c", 1),
                         loop("L2", "j", 0, 2, 1, [alu("inc", "add", "acc", "acc", 1)])])]),
                 save("s", "acc", "o")])
    out, _ = run(prog)
    assert out["o"][0, 0] == 3 * 4 * 2


# ======================================================================================
# The CFG driver and terminators
# ======================================================================================

def test_cfg_follows_next_block_slot_and_falls_through():
    """Top level of the entry function: a branch skips a block, a block without
    terminator falls through, and running off the last block ends the run."""
    prog = main([i32_out("o", 1), register("r")],
                [block("A", setr("r0", "r", 1), br("jA", "C")),
                 block("B", alu("bad", "mult", "r", "r", 100)),
                 block("C", alu("c", "mult", "r", "r", 3)),
                 block("D", alu("d", "add", "r", "r", 7), save("s", "r", "o"))])
    out, sim = run(prog)
    assert out["o"][0, 0] == (1 * 3) + 7
    assert sim.stats["opcodes"]["RegisterAlu"] == 2          # B's never ran


def test_branch_cycle_builds_a_loop_from_blocks():
    """A CompareAndBranch back edge: acc = 2*acc + r for r = 0..n-1."""
    prog = main([i32_in("n", 1), i32_out("o", 1), register("rn"), register("r"),
                 register("acc")],
                [block("entry", load("ln", "rn", "n"), setr("r0", "r", 0), setr("a0", "acc", 0)),
                 block("head", alu("dbl", "mult", "acc", "acc", 2),
                       alu("addr", "add", "acc", "acc", "r"), alu("inc", "add", "r", "r", 1),
                       cab("back", "IS_LTREG", reg("r"), reg("rn"), "head", "tail")),
                 block("tail", save("s", "acc", "o"))])
    sim = birsim.Simulator(prog, strict=True)
    for n in (1, 2, 5, 13):
        out = sim.run({"n": np.array([[n]], np.int32)})
        acc = 0
        for r in range(n):
            acc = 2 * acc + r
        assert out["o"][0, 0] == acc


def test_backward_unconditional_branch_and_forward_skip():
    """UnconditionalBranch in both directions: A -> C -> B -> D."""
    prog = main([i32_out("o", 1), register("r")],
                [block("A", setr("r0", "r", 2), br("j0", "C")),
                 block("B", alu("b", "subtract", "r", "r", 5), br("j1", "D")),
                 block("C", alu("c", "mult", "r", "r", 10), br("j2", "B")),
                 block("X", alu("x", "mult", "r", "r", 0)),
                 block("D", save("s", "r", "o"))])
    out, _ = run(prog)
    assert out["o"][0, 0] == 2 * 10 - 5


CMP_OPS = {"LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "EQ": lambda a, b: a == b,
           "NE": lambda a, b: a != b, "GE": lambda a, b: a >= b, "GT": lambda a, b: a > b}
PAIRS = [(-5, 3), (3, 3), (7, 3), (-1, -1), (0, -2147483648), (2147483647, -1), (0, 0)]


def _cab_prog(comp_op, right, left_dtype=None, x_dtype="int32", reg_dtype=None,
              left_ap=False):
    """o := 1 if the branch is taken else 2. The left side is register a loaded from x[0]
    (or x[0] itself when left_ap); for ...REG ops the right side is register b := x[1]."""
    left = ap("x", [[1, 1], [1, 1]], x_dtype) if left_ap else reg("a", left_dtype)
    return main(
        [tensor("x", "ExternalInput", x_dtype, [1, 2], "DRAM"), i32_out("o", 1),
         register("a", reg_dtype), register("b", reg_dtype)],
        [block("b0", load("la", "a", "x", 0, x_dtype), load("lb", "b", "x", 1, x_dtype),
               cab("c", comp_op, left, right, "yes", "no")),
         block("yes", put("p1", "o", 0, 1), br("j", "end")),
         block("no", put("p2", "o", 0, 2)),
         block("end")])


@pytest.mark.parametrize("rel", list(CMP_OPS))
@pytest.mark.parametrize("kind", ["IMM", "REG"])
def test_compare_and_branch_all_ops(rel, kind):
    comp_op = "IS_" + rel + kind
    fn = CMP_OPS[rel]
    sim_reg = birsim.Simulator(_cab_prog(comp_op, reg("b")), strict=True) if kind == "REG" \
        else None
    for a, b in PAIRS:
        if kind == "IMM":
            out, _ = run(_cab_prog(comp_op, imm(b, "int32")), {"x": np.array([[a, 0]], np.int32)})
        else:
            out = sim_reg.run({"x": np.array([[a, b]], np.int32)})
        assert out["o"][0, 0] == (1 if fn(a, b) else 2), (comp_op, a, b)


def test_compare_and_branch_register_dtype_decides_signedness():
    """0xFFFFFFFF is large as u32 and -1 as s32."""
    bits = np.array([[-1, 5]], np.int32)
    for reg_dtype, x_dtype, expect_gt in (("uint32", "uint32", True), ("int32", "int32", False)):
        x = bits.view(np.uint32) if x_dtype == "uint32" else bits
        for cmp, rhs, fn in (("IS_GTIMM", 0, lambda v: v > 0),
                             ("IS_GTIMM", 2147483647, lambda v: v > 2147483647),
                             ("IS_LTIMM", 0, lambda v: v < 0)):
            out, _ = run(_cab_prog(cmp, imm(rhs, "int32"), x_dtype=x_dtype, reg_dtype=reg_dtype),
                         {"x": x})
            v = int(x[0, 0])
            assert out["o"][0, 0] == (1 if fn(v) else 2), (reg_dtype, cmp, rhs)
        assert (int(x[0, 0]) > 0) == expect_gt
    # an operand dtype on the register access overrides the register's dtype
    out, _ = run(_cab_prog("IS_GTIMM", imm(0, "int32"), left_dtype="uint32"), {"x": bits})
    assert out["o"][0, 0] == 1
    out, _ = run(_cab_prog("IS_LTREG", reg("b"), left_dtype="uint32", reg_dtype="int32"),
                 {"x": bits})
    assert out["o"][0, 0] == (1 if 0xFFFFFFFF < 5 else 2)


INT_DTYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32"]


@pytest.mark.parametrize("dtype", INT_DTYPES + ["float32"])
def test_compare_and_branch_at_left_side_dtype(dtype):
    """The left side is a one-element AP of ``dtype``; compared at that dtype."""
    npdt = np.dtype(dtype)
    if npdt.kind == "f":
        values = [-1.5, 0.25, 0.0, 3.0, -0.0]
        rhs_list = [0.0, 0.2, -1.5, 3.0]
    else:
        info = np.iinfo(npdt)
        values = [info.min, info.max, -1 & info.max if info.min == 0 else -1, 0, 1, 100]
        rhs_list = [0, 1, 100, info.max // 2 + 1]
        if info.min < 0:
            rhs_list.append(-1)
    for rel in ("LT", "EQ", "GT"):
        for rhs in rhs_list:
            imm_dtype = "float32" if npdt.kind == "f" else "int32"
            prog = _cab_prog("IS_" + rel + "IMM", imm(rhs, imm_dtype), x_dtype=dtype,
                             left_ap=True)
            sim = birsim.Simulator(birsim.load(_strip_loads(prog)), strict=True)
            for v in values:
                x = np.array([[v, 0]], dtype=npdt)
                out = sim.run({"x": x})
                want = CMP_OPS[rel](x[0, 0], npdt.type(rhs))
                assert out["o"][0, 0] == (1 if want else 2), (dtype, rel, v, rhs)


def _strip_loads(prog):
    """Drop the TensorLoads of _cab_prog (for left_ap programs over narrow dtypes)."""
    b0 = prog["functions"][0]["blocks"][0]
    b0["instructions"] = [i for i in b0["instructions"] if i["opcode"] != "TensorLoad"]
    return prog


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64"])
def test_compare_and_branch_other_dtypes_error(dtype):
    if dtype == "int64":
        prog = _cab_prog("IS_GTIMM", imm(0, "int32"), reg_dtype="int64")
        prog["functions"][0]["blocks"][0]["instructions"][:2] = [
            setr("a0", "a", 1), setr("b0", "b", 1)]
    else:
        prog = _strip_loads(_cab_prog("IS_GTIMM", imm(0, "int32"), x_dtype=dtype, left_ap=True))
    with pytest.raises((ProgramError, SimulationError)) as ei:
        run(prog, {"x": np.ones((1, 2))})
    assert dtype in str(ei.value)


def test_break_ends_innermost_loop_only():
    """Break in an inner loop: no further inner trips; the outer loop continues."""
    I, J = 4, 10
    inner = [block("chk", cab("c", "IS_EQREG", reg("jr"), reg("lim"), "brk", "work")),
             block("brk", insn("stop", "Break", "Pool")),
             block("work", alu("t", "add", "tot", "tot", 1), alu("j", "add", "jr", "jr", 1))]
    prog = main(
        [i32_out("o", I), register("jr"), register("lim"), register("tot")],
        [setr("t0", "tot", 0), setr("l0", "lim", 0),
         loop("Li", "i", 0, I, 1, [
             setr("j0", "jr", 0), alu("lim+", "add", "lim", "lim", 1),
             loop("Lj", "j", 0, J, 1, inner),
             save("s", "tot", "o", offset=affine([(iv("i"), 1)]))])])
    out, _ = run(prog)
    ref, tot = [], 0
    for i in range(I):
        jr, lim = 0, i + 1
        for _ in range(J):
            if jr == lim:
                break
            tot += 1
            jr += 1
        ref.append(tot)
    np.testing.assert_array_equal(out["o"][0], ref)


def test_break_ends_do_while_and_dynamic_loop():
    prog = main(
        [i32_out("o", 2), register("r"), register("one"), register("q"), register("n")],
        [setr("r0", "r", 0), setr("one0", "one", 1), setr("q0", "q", 0), setr("n0", "n", 50),
         do_while("DW", "one", [
             block("d0", alu("inc", "add", "r", "r", 1),
                   cab("c", "IS_GEIMM", reg("r"), imm(5, "int32"), "d1", "d2")),
             block("d1", insn("stop", "Break", "Pool")),
             block("d2")]),
         dyn_loop("DL", "i", 0, affine([(rv("n"), 1)]), 1, [
             block("e0", alu("incq", "add", "q", "q", 1),
                   cab("c2", "IS_EQIMM", reg("q"), imm(7, "int32"), "e1", "e2")),
             block("e1", insn("stop2", "Break", "Pool")),
             block("e2")]),
         save("s", "r", "o", 0), save("s2", "q", "o", 1)])
    out, _ = run(prog, max_steps=100_000)
    np.testing.assert_array_equal(out["o"][0], [5, 7])


def test_break_outside_a_loop_is_a_program_error():
    prog = main([i32_out("o", 1)], [put("p", "o", 0, 1), insn("stop", "Break", "Pool")])
    with pytest.raises(ProgramError):
        birsim.load(prog)


def test_branch_hint_and_tensor_completion_do_nothing():
    def prog(extra):
        return main([i32_out("o", 2), register("r")],
                    [block("a", setr("r0", "r", 3), *extra[:1], alu("m", "mult", "r", "r", 5),
                           *extra[1:], save("s", "r", "o", 0), put("p", "o", 1, 9))])
    plain, _ = run(prog([]))
    hinted, sim = run(prog([insn("h", "BranchHint", "Pool", hint="LikelyTaken"),
                            insn("tc", "TensorCompletion", "Pool",
                                 ins=[elem("o", 0)])]))
    np.testing.assert_array_equal(hinted["o"], plain["o"])
    np.testing.assert_array_equal(hinted["o"][0], [15, 9])
    assert sim.warnings == [] and sim.notes == []


@pytest.mark.parametrize("case", ["loop_to_function", "function_to_loop", "cab_on_false",
                                  "other_function"])
def test_branch_outside_region_is_a_program_error(case):
    body = [block("lb0", put("p", "o", 0, 1))]
    top = [block("t0", put("q", "o", 0, 2))]
    if case == "loop_to_function":
        body[0]["instructions"].append(br("j", "t1"))
    elif case == "function_to_loop":
        top[0]["instructions"].append(br("j", "lb0"))
    elif case == "cab_on_false":
        body[0]["instructions"].append(cab("c", "IS_EQIMM", reg("r"), imm(0, "int32"),
                                           "lb0", "t1"))
    else:
        top[0]["instructions"].append(br("j", "g0"))
    prog = module([function("main", [i32_out("o", 1), register("r")],
                            top + [block("t1", loop("L", "i", 0, 2, 1, body))]),
                   function("g", [], [block("g0")])])
    with pytest.raises(ProgramError):
        birsim.load(prog)


# ======================================================================================
# Call / Return
# ======================================================================================

def _scale_fn(name="scale"):
    """y := 2*x + 1 over [4, 8] float32 (params x, y)."""
    return function(name, [tensor("x", "Internal", "float32", [4, 8], "DRAM"),
                           tensor("y", "Internal", "float32", [4, 8], "DRAM")],
                    [insn("ts", "TensorScalar", "DVE", ins=[whole("x", [4, 8])],
                          outs=[whole("y", [4, 8])], op0="mult", const0=2.0, op1="add",
                          const1=1.0)])


def test_call_binds_arguments_and_runs_callee():
    prog = module([
        function("main", [tensor("a", "ExternalInput", "float32", [4, 8], "DRAM"),
                          tensor("b", "ExternalInput", "float32", [4, 8], "DRAM"),
                          tensor("oa", "ExternalOutput", "float32", [4, 8], "DRAM"),
                          tensor("ob", "ExternalOutput", "float32", [4, 8], "DRAM")],
                 [insn("c1", "Call", "Unassigned", target="scale", arguments={"x": "a", "y": "oa"}),
                  insn("c2", "Call", "Unassigned", target="scale",
                       arguments={"x": "b", "y": "ob"})]),
        _scale_fn()])
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 4, 8), dtype=np.float32)
    out, _ = run(prog, {"a": a, "b": b})
    np.testing.assert_array_equal(out["oa"], a * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(out["ob"], b * np.float32(2) + np.float32(1))


def test_return_ends_callee_from_inside_its_loop():
    """Return inside a loop of the callee leaves the loop and the callee; the caller
    continues after the Call."""
    callee = function("f", [i32_out("ctr", 2), register("r")], [
        block("f0", setr("r0", "r", 0),
              loop("L", "i", 0, 10, 1, [
                  block("l0", alu("inc", "add", "r", "r", 1), save("s", "r", "ctr", 0),
                        cab("c", "IS_EQIMM", reg("r"), imm(3, "int32"), "ret", "go")),
                  block("ret", insn("rt", "Return", "Pool")),
                  block("go")])),
        block("f1", put("never", "ctr", 1, 99))])
    prog = module([
        function("main", [i32_out("o", 2)],
                 [put("p0", "o", 1, 5), insn("call", "Call", "Unassigned", target="f",
                                             arguments={"ctr": "o"}),
                  put("after", "o", 1, 42)]),
        callee])
    out, _ = run(prog)
    np.testing.assert_array_equal(out["o"][0], [3, 42])


def test_return_in_entry_function_ends_the_run():
    prog = main([i32_out("o", 2)],
                [block("a", put("p0", "o", 0, 1), put("p1", "o", 1, 2),
                       insn("rt", "Return", "Pool")),
                 block("b", put("p2", "o", 0, 7))])
    out, sim = run(prog)
    np.testing.assert_array_equal(out["o"][0], [1, 2])
    assert sim.exited is False
    assert "Memset" in sim.stats["opcodes"] and sim.stats["opcodes"]["Memset"] == 2


@pytest.mark.parametrize("with_return", [False, True])
def test_return_clears_semaphores(with_return):
    """A semaphore raised before a Call is 0 after the callee's Return: the later wait
    for it can never be satisfied (deadlock). Without a Return it still holds."""
    callee = function("f", [], [block("f0", *([insn("rt", "Return", "Pool")]
                                               if with_return else []))])
    prog = module([
        function("main", [i32_out("o", 1)],
                 [put("p0", "o", 0, 1) | {"sync_info": sync_info(
                     updates=[update(5, "sem-add-imm", 1)])},
                  insn("call", "Call", "Unassigned", target="f"),
                  put("p1", "o", 0, 2) | {"sync_info": sync_info(
                      waits=[wait(5, "sem-ge-imm", 1)])}]),
        callee])
    if with_return:
        with pytest.raises(DeadlockError):
            run(prog)
    else:
        out, _ = run(prog)
        assert out["o"][0, 0] == 2


def _recursive_prog():
    """f(ctr): ctr -= 1; calls += 1; if ctr > 0: f(ctr). Returns (prog)."""
    f = function("f", [tensor("ctr", "Internal", "int32", [1, 2], "DRAM"), register("r")], [
        block("f0", load("l", "r", "ctr", 0), alu("dec", "subtract", "r", "r", 1),
              save("s", "r", "ctr", 0), load("l2", "r", "ctr", 1),
              alu("inc", "add", "r", "r", 1), save("s2", "r", "ctr", 1),
              load("l3", "r", "ctr", 0),
              cab("c", "IS_GTIMM", reg("r"), imm(0, "int32"), "rec", "done")),
        block("rec", insn("again", "Call", "Unassigned", target="f", arguments={"ctr": "ctr"})),
        block("done")])
    return module([
        function("main", [i32_in("d", 2), i32_out("o", 2)],
                 [insn("cp", "TensorCopy", "Pool", ins=[ap("d", [[2, 1], [1, 2]], "int32")],
                       outs=[ap("o", [[2, 1], [1, 2]], "int32")]),
                  insn("call", "Call", "Unassigned", target="f", arguments={"ctr": "o"})]),
        f])


def test_call_nesting_up_to_64_works():
    out, _ = run(_recursive_prog(), {"d": np.array([[64, 0]], np.int32)})
    np.testing.assert_array_equal(out["o"][0], [0, 64])
    out, _ = run(_recursive_prog(), {"d": np.array([[10, 0]], np.int32)})
    np.testing.assert_array_equal(out["o"][0], [0, 10])


def test_call_nesting_deeper_than_64_is_a_simulation_error():
    with pytest.raises(SimulationError) as ei:
        run(_recursive_prog(), {"d": np.array([[65, 0]], np.int32)})
    assert "64" in str(ei.value)
    assert not isinstance(ei.value, StepLimitError)


def test_unbounded_recursion_is_a_simulation_error():
    prog = module([function("main", [], [insn("c", "Call", "Unassigned", target="f")]),
                   function("f", [], [insn("c", "Call", "Unassigned", target="f")])])
    with pytest.raises(SimulationError) as ei:
        run(prog)
    assert "64" in str(ei.value)


def test_call_inside_loop_and_loop_inside_callee():
    """The callee has its own loop; calling it from a loop does not disturb either
    induction value (each trip of main's loop sees its own i after the call)."""
    callee = function("g", [tensor("acc", "Internal", "int32", [1, 8], "DRAM"), register("r")], [
        loop("Lg", "j", 0, 3, 1, [load("l", "r", "acc", 0), alu("a", "add", "r", "r", 1),
                                  save("s", "r", "acc", 0)])])
    prog = module([
        function("main", [i32_out("o", 8)],
                 [zero("z", "o", 8),
                  loop("Lm", "i", 0, 5, 1, [
                      insn("call", "Call", "Unassigned", target="g", arguments={"acc": "o"}),
                      iota_at("io", "o", affine([(iv("i"), 1)], 1), affine([(iv("i"), 10)]))])]),
        callee])
    out, _ = run(prog)
    np.testing.assert_array_equal(out["o"][0], [15, 0, 10, 20, 30, 40, 0, 0])


def test_recursive_call_inside_loop_keeps_each_levels_induction_value():
    """f recurses from inside its own loop; after the inner activation returns, the outer
    activation's loop still sees its own induction value (and keeps going)."""
    J = 3
    o_j = ap("o", [[1, 1], [1, 1]], "int32", offset=affine([(iv("j"), 1)]))
    body = [
        block("c0", iota_at("ij", "tmp", 0, iv("j")), load("lt", "t", "tmp"),
              cab("first", "IS_EQIMM", reg("t"), imm(0, "int32"), "c1", "w")),
        block("c1", load("ld", "d", "ctr"),
              cab("more", "IS_GTIMM", reg("d"), imm(0, "int32"), "rec", "w")),
        block("rec", insn("again", "Call", "Unassigned", target="f",
                          arguments={"ctr": "ctr", "o": "o"})),
        block("w", insn("lo", "TensorLoad", "Pool", ins=[o_j], outs=[reg("v")]),
              alu("inc", "add", "v", "v", 1),
              insn("so", "TensorSave", "Pool", ins=[reg("v")], outs=[o_j]))]
    f = function("f", [tensor("ctr", "Internal", "int32", [1, 1], "DRAM"),
                       tensor("o", "Internal", "int32", [1, J], "DRAM"),
                       tensor("tmp", "Internal", "int32", [1, 1], "DRAM"),
                       register("d"), register("t"), register("v")], [
        block("f0", load("l", "d", "ctr"), alu("dec", "subtract", "d", "d", 1),
              save("s", "d", "ctr"), loop("L", "j", 0, J, 1, body))])
    prog = module([function("main", [i32_in("d", 1), i32_out("ctr", 1), i32_out("o", J)],
                            [zero("z", "o", J),
                             insn("cp", "TensorCopy", "Pool", ins=[elem("d")], outs=[elem("ctr")]),
                             insn("call", "Call", "Unassigned", target="f",
                                  arguments={"ctr": "ctr", "o": "o"})]), f])

    def ref_f(state):
        state["ctr"] -= 1
        for j in range(J):
            if j == 0 and state["ctr"] > 0:
                ref_f(state)
            state["o"][j] += 1

    for depth in (1, 2, 5):
        state = {"ctr": depth, "o": [0] * J}
        ref_f(state)
        out, _ = run(prog, {"d": np.array([[depth]], np.int32)})
        np.testing.assert_array_equal(out["o"][0], state["o"])
        assert out["ctr"][0, 0] == state["ctr"]


# ======================================================================================
# Exit
# ======================================================================================

def test_exit_stops_the_run():
    prog = main([i32_out("o", 2)],
                [block("a", put("p0", "o", 0, 1), put("p1", "o", 1, 2),
                       insn("ex", "Exit", "Pool")),
                 block("b", put("p2", "o", 0, 7))])
    out, sim = run(prog)
    np.testing.assert_array_equal(out["o"][0], [1, 2])
    assert sim.exited is True
    assert sim.stats["opcodes"].get("Memset") == 2


def test_exit_from_inside_a_call_inside_a_loop():
    f = function("f", [tensor("ctr", "Internal", "int32", [1, 2], "DRAM"), register("r")], [
        block("f0", load("l", "r", "ctr", 0), alu("inc", "add", "r", "r", 1),
              save("s", "r", "ctr", 0),
              cab("c", "IS_EQIMM", reg("r"), imm(3, "int32"), "ex", "ret")),
        block("ex", insn("stop", "Exit", "Pool")),
        block("ret", insn("rt", "Return", "Pool"))])
    prog = module([
        function("main", [i32_out("o", 2)],
                 [zero("z", "o", 2),
                  loop("L", "i", 0, 10, 1, [
                      insn("call", "Call", "Unassigned", target="f", arguments={"ctr": "o"})]),
                  put("after", "o", 1, 9)]),
        f])
    out, sim = run(prog)
    np.testing.assert_array_equal(out["o"][0], [3, 0])
    assert sim.exited


# ======================================================================================
# Step limit and interrupts
# ======================================================================================

def test_step_limit_counts_instructions_trips_and_taken_branches():
    """Steps = executed instructions + loop trips + taken branches (docs/spec/BIR-JSON.md)."""
    n = 5
    prog = main([i32_out("o", 1), register("r")],
                [block("a", setr("r0", "r", 0), loop("L", "i", 0, n, 1,
                                                     [alu("inc", "add", "r", "r", 1)]),
                       br("j", "b")),
                 block("b", save("s", "r", "o"))])
    steps = 1 + 1 + n + n + 1 + 1 + 1   # r0, Loop, trips, body, branch insn, taken, save
    out, sim = run(prog, max_steps=steps)
    assert out["o"][0, 0] == n
    assert sim.stats["steps"] == steps
    with pytest.raises(StepLimitError):
        run(prog, max_steps=steps - 1)


def test_step_limit_endless_do_while():
    prog = main([i32_out("o", 1), register("c"), register("k")],
                [setr("c0", "c", 1), setr("k0", "k", 0),
                 do_while("DW", "c", [alu("inc", "add", "k", "k", 1)]),
                 save("s", "k", "o")])
    with pytest.raises(StepLimitError) as ei:
        run(prog, max_steps=10_000)
    e = ei.value
    assert e.function == "main"
    assert e.block in ("b0", "DW_body")
    assert e.instruction in ("DW", "inc")
    assert e.instruction in str(e) and "main" in str(e)


def test_step_limit_empty_do_while_and_branch_cycle():
    empty = main([register("c")], [setr("c0", "c", 1), insn("DW", "DoWhile", "Pool",
                                                             cond=rv("c"), blocks=[])])
    with pytest.raises(StepLimitError) as ei:
        run(empty, max_steps=1000)
    assert (ei.value.function, ei.value.instruction) == ("main", "DW")
    cycle = main([], [block("spin", br("jmp", "spin"))])
    with pytest.raises(StepLimitError) as ei:
        run(cycle, max_steps=1000)
    assert (ei.value.function, ei.value.block, ei.value.instruction) == ("main", "spin", "jmp")
    empty_cycle = main([], [block("a", br("ja", "b")), block("b", br("jb", "a"))])
    with pytest.raises(StepLimitError) as ei:
        run(empty_cycle, max_steps=777)
    assert ei.value.block in ("a", "b") and ei.value.instruction in ("ja", "jb")


def test_default_step_limit_is_large():
    """Without max_steps a 2-million-step loop runs to completion."""
    prog = main([i32_out("o", 1), register("r")],
                [setr("r0", "r", 0), loop("L", "i", 0, 1_000_000, 1,
                                          [alu("inc", "add", "r", "r", 1)]),
                 save("s", "r", "o")])
    out, _ = run(prog)
    assert out["o"][0, 0] == 1_000_000


def test_keyboard_interrupt_stops_a_long_run():
    prog = main([i32_in("n", 1), i32_out("o", 1), register("c"), register("k")],
                [load("ln", "c", "n"), setr("k0", "k", 0),
                 do_while("DW", "c", [alu("dec", "subtract", "c", "c", 1),
                                      alu("inc", "add", "k", "k", 1)]),
                 save("s", "k", "o")])
    sim = birsim.Simulator(prog, max_steps=10**15)

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            # 2**31-1 trips of 3 steps each: far longer than the timer
            sim.run({"n": np.array([[2**31 - 1]], np.int32)})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # the simulator is still usable afterwards
    out = sim.run({"n": np.array([[12]], np.int32)})
    assert out["o"][0, 0] == 12


# ======================================================================================
# End-to-end examples (examples/build_examples.py -> examples/*.json)
# ======================================================================================

CF_EXAMPLES = ("tiled_matmul.json", "dynamic_add.json", "halving_do_while.json",
               "call_twice.json", "branch_ladder.json")


def _example(name):
    return birsim.load(os.path.join(EXAMPLES, name))


def test_examples_json_match_their_builders():
    sys.path.insert(0, EXAMPLES)
    try:
        import build_examples
    finally:
        sys.path.remove(EXAMPLES)
    for fname in CF_EXAMPLES:
        make = build_examples.EXAMPLES[fname]
        with open(os.path.join(EXAMPLES, fname)) as fh:
            assert json.load(fh) == json.loads(json.dumps(make())), fname


def test_example_tiled_matmul():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((512, 128), dtype=np.float32)
    w = rng.standard_normal((512, 512), dtype=np.float32)
    bias = rng.standard_normal((128, 1), dtype=np.float32)
    out, sim = run(_example("tiled_matmul.json"), {"x": x, "w": w, "bias": bias})
    ref = np.maximum(x.astype(np.float64).T @ w.astype(np.float64) + bias, 0)
    np.testing.assert_allclose(out["out"], ref, rtol=1e-4, atol=1e-3)
    assert sim.stats["opcodes"]["Matmult"] == 4


@pytest.mark.parametrize("ntiles", [0, 1, 3, 8])
def test_example_dynamic_add(ntiles):
    rng = np.random.default_rng(ntiles)
    a = rng.standard_normal((128, 1024), dtype=np.float32)
    b = rng.standard_normal((128, 1024), dtype=np.float32)
    n = np.array([[ntiles]], np.int32)
    out, sim = run(_example("dynamic_add.json"), {"a": a, "b": b, "ntiles": n})
    ref = np.zeros_like(a)
    ref[:, :ntiles * 128] = a[:, :ntiles * 128] + b[:, :ntiles * 128]
    np.testing.assert_array_equal(out["out"], ref)
    assert sim.stats["opcodes"].get("TensorTensor", 0) == ntiles


@pytest.mark.parametrize("n", [0, 1, 2, 3, 100, 1 << 20, 2**31 - 1])
def test_example_halving_do_while(n):
    out, _ = run(_example("halving_do_while.json"), {"n": np.array([[n]], np.int32)})
    trips, v, seq = 0, n, []
    while True:
        v //= 2
        trips += 1
        seq.append(v)
        if v == 0:
            break
    assert out["trips"][0, 0] == trips
    np.testing.assert_array_equal(out["values"][0, :trips], seq)


def test_example_call_twice():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((128, 256), dtype=np.float32)
    b = rng.standard_normal((128, 256), dtype=np.float32)
    out, sim = run(_example("call_twice.json"), {"a": a, "b": b})
    f = lambda x: np.maximum(x * np.float32(2) + np.float32(1), np.float32(0))  # noqa: E731
    np.testing.assert_allclose(out["oa"], f(a), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out["ob"], f(b), rtol=1e-6, atol=1e-6)
    assert sim.stats["opcodes"]["Call"] == 2


def test_example_branch_ladder():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 64), dtype=np.float32)
    y = rng.standard_normal((128, 64), dtype=np.float32)
    mod = _example("branch_ladder.json")
    sim = birsim.Simulator(mod, strict=True)
    refs = [x + y, x - y, x * y, np.maximum(x, y)]
    for sel in (-7, 0, 1, 2, 3, 4, 1000):
        out = sim.run({"x": x, "y": y, "sel": np.array([[sel]], np.int32)})
        want = refs[min(max(sel, 0), 3)]
        np.testing.assert_array_equal(out["out"], want, err_msg=f"sel={sel}")


def _mixed_engine_prog():
    """Loops, a DoWhile, a call and branches whose instructions sit on several engine
    queues (Pool, SP, Activation) and the rendezvous queue, with no sync_info: each queue
    keeps its own order, and every control-flow instruction is a rendezvous or a
    terminator, so the result may not depend on the schedule. Registers are per engine:
    `r` is kept by Pool and SP each in its own file (the SP copy feeds SP's branch),
    `q` by Pool, `c` by Activation; the ALL moves write every file."""
    f = function("f", [tensor("t", "Internal", "int32", [1, 4], "DRAM"), register("x")], [
        block("f0", insn("lx", "TensorLoad", "SP", ins=[elem("t", 1)], outs=[reg("x")]),
              insn("mx", "RegisterAlu", "SP", ins=[reg("x"), imm(3, "int32")], outs=[reg("x")],
                   op="mult"),
              insn("sx", "TensorSave", "SP", ins=[reg("x")], outs=[elem("t", 1)]),
              insn("rt", "Return", "Activation"))])
    body = [block("l0", alu("a", "add", "r", "r", 1),
                  insn("a_sp", "RegisterAlu", "SP", ins=[reg("r"), imm(1, "int32")],
                       outs=[reg("r")], op="add"),
                  insn("c", "CompareAndBranch", "SP", ins=[reg("r"), imm(4, "int32")],
                       comp_op="IS_GTIMM", on_true="big", on_false="small")),
            block("big", insn("call", "Call", "Unassigned", target="f", arguments={"t": "o"}),
                  br("j", "end")),
            block("small", insn("q", "RegisterAlu", "Pool", ins=[reg("q"), reg("r")],
                                outs=[reg("q")], op="add")),
            block("end", iota_at("io", "o", 3, affine([(iv("i"), 1)])))]
    return module([function("main",
        [i32_out("o", 4), register("r"), register("q"), register("c")],
        [put("p0", "o", 1, 1), put("p1", "o", 2, 0),
         insn("r0", "RegisterMove", "ALL", ins=[imm(0, "int32")], outs=[reg("r")]),
         setr("q0", "q", 0),
         loop("L", "i", 0, 7, 1, body),
         insn("c0", "RegisterMove", "ALL", ins=[imm(3, "int32")], outs=[reg("c")]),
         do_while("DW", "c", [insn("dc", "RegisterAlu", "Activation",
                                   ins=[reg("c"), imm(1, "int32")], outs=[reg("c")],
                                   op="subtract"),
                              insn("sq", "TensorSave", "Pool", ins=[reg("q")], outs=[elem("o", 0)]),
                              insn("add2", "RegisterAlu", "Pool", ins=[reg("q"), imm(100, "int32")],
                                   outs=[reg("q")], op="add")]),
         insn("fin", "TensorSave", "Activation", ins=[reg("c")], outs=[elem("o", 2)])]), f])


@pytest.mark.parametrize("schedule", ["in_order", "round_robin", "random"])
def test_control_flow_same_results_under_every_schedule(schedule):
    r = q = 0
    o = [0, 1, 0, 0]
    for i in range(7):
        r += 1
        if r > 4:
            o[1] *= 3
        else:
            q += r
        o[3] = i
    c = 3
    while True:
        c -= 1
        o[0] = q
        q += 100
        if c == 0:
            break
    o[2] = c
    for seed in range(4):
        out, _ = run(_mixed_engine_prog(), schedule=schedule, seed=seed)
        np.testing.assert_array_equal(out["o"][0], o, err_msg=f"seed {seed}")


@pytest.mark.parametrize("comp_op,right", [("IS_LTIMM", "reg"), ("IS_EQREG", "imm")])
def test_compare_and_branch_right_operand_kind_is_checked_at_load(comp_op, right):
    from bir import block, function, imm, insn, module, reg, register
    rhs = reg("b") if right == "reg" else imm(3, "int32")
    prog = module([function("main", [register("a"), register("b")], [
        block("b0", insn("cab", "CompareAndBranch", "SP", ins=[reg("a"), rhs],
                         comp_op=comp_op, on_true="b1", on_false="b1")),
        block("b1")])])
    with pytest.raises(birsim.ProgramError) as info:
        birsim.load(prog)
    assert "ins[1]" in str(info.value) and comp_op in str(info.value)
