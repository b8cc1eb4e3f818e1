"""What a run's fixed cost was cut to (issue 24, session 11) against the general path it
replaced: ``Sim.summary`` (diagnostics, the stats dict and "anything printed" in one C
call) against ``Sim.stats``/``Sim.diagnostics``/``Sim.prints`` read the old way, and the
per-Simulator input/output plan (``Simulator._make_plans``) against ``_read_tensor``
and the tensors' own records."""

import itertools
import warnings

import ml_dtypes
import numpy as np
import pytest

import birsim
from birsim import _birsim
from birsim import simulator as simmod
from bir import block, function, insn, module, tensor, whole

_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
_ENGINE_NAMES = {v: k for k, v in _birsim.enums["ENGINE"].items()}


def _old_stats(sim):
    """Simulator.stats as _collect built it before Sim.summary (session 10)."""
    ops, engines, steps = sim._sim.stats()
    return {"steps": steps,
            "opcodes": {_OP_NAMES[i]: ops[i] for i in itertools.compress(range(len(ops)), ops)},
            "engines": {_ENGINE_NAMES.get(i, str(i)): n for i, n in enumerate(engines) if n},
            "instructions": sum(ops)}


def _mixed_prog(shape=(16, 8)):
    """Several opcodes on several engines, a DevicePrint-free program with one output
    never fully written (a diagnostic)."""
    return module([function("main", [
        tensor("x", "ExternalInput", "float32", shape, "DRAM"),
        tensor("t", "Internal", "float32", shape, "SB"),
        tensor("y", "ExternalOutput", "float32", shape, "DRAM"),
        tensor("z", "ExternalOutput", "float32", shape, "DRAM")],
        [block("b0",
               insn("ld", "DMACopy", "DMA", ins=[whole("x", shape)], outs=[whole("t", shape)]),
               insn("act", "TensorScalar", "DVE", ins=[whole("t", shape)], outs=[whole("t", shape)],
                    op0="add", const0=1.0),
               insn("cp", "TensorCopy", "Pool", ins=[whole("t", shape)], outs=[whole("t", shape)]),
               insn("st", "DMACopy", "DMA", ins=[whole("t", shape)], outs=[whole("y", shape)]))])])


def test_summary_matches_stats_diagnostics_and_prints():
    sim = birsim.Simulator(_mixed_prog())
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out = sim.run({"x": x})
    assert np.array_equal(out["y"], x + 1)
    msgs, dropped, notes, exited, stats, printed = sim._sim.summary(simmod._STAT_OPS,
                                                                    simmod._STAT_ENGINES)
    assert (msgs, dropped, notes, exited) == sim._sim.diagnostics()
    assert stats == _old_stats(sim) and sim.stats == stats
    assert list(stats) == ["steps", "opcodes", "engines", "instructions"]
    assert list(stats["opcodes"]) == list(_old_stats(sim)["opcodes"])      # index order
    assert stats["opcodes"] == {"DMACopy": 2, "TensorScalar": 1, "TensorCopy": 1}
    assert stats["engines"] == {"Pool": 1, "DMA": 2, "DVE": 1}
    assert stats["instructions"] == 4 and stats["steps"] == 4
    raw, pdropped = sim._sim.prints()
    assert printed == bool(raw or pdropped) and printed is False
    assert sim.warnings == ["output 'z' was not fully written"]
    assert sim.exited is False and sim.notes == []


def test_summary_printed_flag_and_name_counts():
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", (4, 4), "DRAM"),
        tensor("y", "ExternalOutput", "float32", (4, 4), "DRAM")],
        [block("b0", insn("p", "DevicePrint", "DVE", ins=[whole("x", (4, 4))], outs=[],
                          prefix="x="),
               insn("cp", "TensorCopy", "DVE", ins=[whole("x", (4, 4))],
                    outs=[whole("y", (4, 4))]))])])
    sim = birsim.Simulator(prog, print=False)
    sim.run({"x": np.ones((4, 4), np.float32)})
    assert sim._sim.summary(simmod._STAT_OPS, simmod._STAT_ENGINES)[5] is True
    assert len(sim.prints) == 1
    assert sim.stats == _old_stats(sim)
    with pytest.raises(ValueError, match="names expected"):
        sim._sim.summary(simmod._STAT_OPS[:-1], simmod._STAT_ENGINES)
    with pytest.raises(TypeError):
        sim._sim.summary(list(simmod._STAT_OPS), simmod._STAT_ENGINES)


def _two_io_prog(dtype="float32", shape=(8, 6)):
    return module([function("main", [
        tensor("a", "ExternalInput", dtype, shape, "DRAM"),
        tensor("b", "ExternalInput", dtype, shape, "SB"),
        tensor("p", "ExternalOutput", dtype, shape, "DRAM"),
        tensor("q", "ExternalOutput", dtype, shape, "SB")],
        [block("b0",
               insn("c1", "TensorCopy", "DVE", ins=[whole("a", shape, dtype)],
                    outs=[whole("q", shape, dtype)]),
               insn("c2", "TensorCopy", "Pool", ins=[whole("b", shape, dtype)],
                    outs=[whole("p", shape, dtype)]))])])


@pytest.mark.parametrize("dtype,np_dt", [("float32", np.float32), ("bfloat16", ml_dtypes.bfloat16),
                                         ("int8", np.int8)])
def test_plan_matches_the_tensors_and_the_general_read(dtype, np_dt):
    shape = (8, 6)
    sim = birsim.Simulator(_two_io_prog(dtype, shape), zero_copy=False)   # the copying read
    a = (np.arange(48).reshape(shape) % 13 - 5).astype(np_dt)
    b = (np.arange(48).reshape(shape) % 7 + 1).astype(np_dt)
    # an exact ndarray, a list (asarray), a Fortran-order array: each as the general path
    for bb in (b, b.tolist() if dtype != "bfloat16" else b.astype(np.float32), np.asfortranarray(b)):
        out = sim.run({"a": a, "b": bb})
        by_name, ins, outs = sim._plans
        for e in ins + outs:
            t, dt, shp, rows, rowbytes, core = e
            assert dt == t.numpy_dtype and shp == tuple(t.shape)
            assert (rows, rowbytes) == simmod._rows(t, dt.itemsize) and core == -1
        assert set(by_name) >= {"a", "b"} and by_name["a"][0].name == "a"
        for t in sim.module.outputs:
            ref, written = sim._read_tensor(t, t.core)          # the general path
            assert written is True
            assert out[t.name].dtype == ref.dtype and out[t.name].shape == ref.shape
            assert out[t.name].tobytes() == ref.tobytes()
        assert out["q"].tobytes() == a.tobytes() and out["p"].tobytes() == b.tobytes()
        assert out["p"].flags.owndata and out["p"].flags.writeable


def test_plan_input_errors_unchanged():
    shape = (8, 6)
    sim = birsim.Simulator(_two_io_prog("float32", shape))
    a = np.zeros(shape, np.float32)
    with pytest.raises(birsim.ProgramError, match=r"input 'b' has shape \[6, 8\], expected \[8, 6\]"):
        sim.run({"a": a, "b": np.zeros((6, 8), np.float32)})
    with pytest.raises(birsim.ProgramError, match="missing input 'b'"):
        sim.run({"a": a})
    with pytest.raises(birsim.ProgramError, match="unknown input 'c'"):
        sim.run({"a": a, "b": a, "c": a})
    with pytest.raises(birsim.ProgramError, match="cannot convert to an array"):
        sim.run({"a": a, "b": _Unconvertible()})
    with pytest.warns(birsim.BirsimWarning, match="casting float64 to float32 changes"):
        out = sim.run({"a": a, "b": np.full(shape, 0.1)})
    assert np.array_equal(out["p"], np.full(shape, 0.1, np.float32))


class _Unconvertible:
    def __array__(self, *a, **k):
        raise RuntimeError("no")


def test_trace_placeholder_is_made_on_first_read():
    sim = birsim.Simulator(_two_io_prog())
    t = sim.trace
    assert len(t) == 0 and t.recorded is False and sim.trace is t
    sim2 = birsim.Simulator(_two_io_prog(), trace=True)
    sim2.run({"a": np.zeros((8, 6), np.float32), "b": np.zeros((8, 6), np.float32)})
    assert sim2.trace.recorded is True and len(sim2.trace) == 2
