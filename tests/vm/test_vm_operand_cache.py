"""The operand-view cache (exec.c): a linear view is reused only while the operand's
store and evaluated start offset are the same, so the same instruction executed with
offsets from loop variables or registers, inside callees bound to different tensors, and
across runs with new inputs always reads and writes the right bytes."""

import numpy as np

import birsim
from bir import (affine, ap, block, function, insn, iv, loop, module, reg, reg_ap, register,
                 tensor, whole)


def test_offsets_from_loop_variables_move_every_trip():
    """y[i, :] = x[i, :] * 2 for i in 0..7 through one TensorScalar whose offsets are
    affine in the induction variable; an inner loop leaves the offset unchanged for 3
    trips (cache hits), then the outer variable moves it."""
    P, F = 8, 16
    body = insn("ts", "TensorScalar", "DVE",
                ins=[ap("x", [[F, 1], [1, F]], offset=affine([(iv("i"), F)]))],
                outs=[ap("y", [[F, 1], [1, F]], offset=affine([(iv("i"), F)]))],
                op0="mult", const0=2.0)
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", [1, P * F], "SB"),
        tensor("y", "ExternalOutput", "float32", [1, P * F], "SB")], [
        loop("Li", "i", 0, P, 1, [loop("Lj", "j", 0, 3, 1, [body])])])])
    sim = birsim.Simulator(prog)
    for seed in (1, 2):                       # a second run with new data after a reset
        x = np.random.default_rng(seed).standard_normal((1, P * F), dtype=np.float32)
        out = sim.run({"x": x})
        np.testing.assert_array_equal(out["y"], x * np.float32(2))


def test_offsets_from_a_register_follow_the_register():
    """A register_ap read whose register steps by 4 elements each trip: out[k] collects
    x[4k .. 4k+4) + 1, so a stale view would repeat one block. (Registers are per engine:
    everything runs on DVE.)"""
    n = 6
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", [1, 4 * n], "SB"),
        tensor("y", "ExternalOutput", "float32", [1, 4 * n], "SB"), register("r")], [
        insn("r0", "RegisterMove", "DVE", ins=[{"kind": "imm_value", "dtype": "int32",
                                                  "value": 0}], outs=[reg("r")]),
        loop("L", "k", 0, n, 1, [
            insn("ts", "TensorScalar", "DVE", ins=[reg_ap("x", [[4 * n, 1], [1, 4]], "r")],
                 outs=[reg_ap("y", [[4 * n, 1], [1, 4]], "r")], op0="add", const0=1.0),
            insn("inc", "RegisterAlu", "DVE",
                 ins=[reg("r"), {"kind": "imm_value", "dtype": "int32", "value": 4}],
                 outs=[reg("r")], op="add")])])])
    x = np.arange(4 * n, dtype=np.float32).reshape(1, -1)
    out = birsim.Simulator(prog).run({"x": x})
    np.testing.assert_array_equal(out["y"], x + 1)


def _double(name="dbl"):
    return function(name, [tensor("p", "Internal", "float32", [4, 8], "DRAM"),
                           tensor("q", "Internal", "float32", [4, 8], "DRAM")],
                    [insn("ts", "TensorScalar", "DVE", ins=[whole("p", [4, 8])],
                          outs=[whole("q", [4, 8])], op0="mult", const0=2.0)])


def test_callee_operands_follow_each_calls_arguments():
    """One callee instruction, three calls with different argument tensors (the same
    operand resolves to three stores), the first repeated at the end."""
    prog = module([
        function("main", [tensor(n, k, "float32", [4, 8], "DRAM") for n, k in
                          (("a", "ExternalInput"), ("b", "ExternalInput"),
                           ("oa", "ExternalOutput"), ("ob", "ExternalOutput"),
                           ("oc", "ExternalOutput"))],
                 [block("b0",
                        insn("c1", "Call", "Unassigned", target="dbl",
                             arguments={"p": "a", "q": "oa"}),
                        insn("c2", "Call", "Unassigned", target="dbl",
                             arguments={"p": "b", "q": "ob"}),
                        insn("c3", "Call", "Unassigned", target="dbl",
                             arguments={"p": "ob", "q": "oc"}),
                        insn("c4", "Call", "Unassigned", target="dbl",
                             arguments={"p": "a", "q": "oa"}))]),
        _double()])
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 4, 8), dtype=np.float32)
    out = birsim.Simulator(prog).run({"a": a, "b": b})
    two = np.float32(2)
    np.testing.assert_array_equal(out["oa"], a * two)
    np.testing.assert_array_equal(out["ob"], b * two)
    np.testing.assert_array_equal(out["oc"], b * two * two)


def test_out_of_bounds_offset_is_reported_each_time_not_cached():
    """A loop whose offset walks past the tensor: the trips inside run, the first one
    outside fails with the bounds error (a failed resolution is never cached)."""
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", [1, 8], "SB"),
        tensor("y", "ExternalOutput", "float32", [1, 8], "SB")], [
        loop("L", "i", 0, 3, 1, [
            insn("cp", "TensorCopy", "DVE",
                 ins=[ap("x", [[8, 1], [1, 4]], offset=affine([(iv("i"), 4)]))],
                 outs=[ap("y", [[8, 1], [1, 4]], offset=affine([(iv("i"), 4)]))])])])])
    sim = birsim.Simulator(prog)
    for _ in range(2):
        try:
            sim.run({"x": np.ones((1, 8), np.float32)})
        except birsim.SimulationError as e:
            assert "cp" in str(e)
        else:
            raise AssertionError("the third trip reads past x")
