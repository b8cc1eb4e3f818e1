"""Inputs and outputs of a run (simulator._write_tensor/_read_tensor and the binding's
buffer-protocol write/read): any array layout goes in unchanged, dtypes are cast, the
returned arrays are the caller's own, and rows of placed locations land in their rows."""

import ml_dtypes
import numpy as np
import pytest

import birsim
from bir import block, function, insn, module, tensor, whole


def copy_prog(shape, dtype="float32", mem_in="DRAM", **placed):
    return module([function("main", [
        tensor("x", "ExternalInput", dtype, shape, mem_in, **placed),
        tensor("y", "ExternalOutput", dtype, shape, "DRAM")],
        [block("b0", insn("cp", "DMACopy", "DMA", ins=[whole("x", shape, dtype)],
                          outs=[whole("y", shape, dtype)]))])])


def layouts(base):
    """The same values as C order, Fortran order, a strided slice, a transposed copy and
    reversed strides."""
    yield "C", np.ascontiguousarray(base)
    yield "F", np.asfortranarray(base)
    wide = np.zeros((base.shape[0], base.shape[1] * 3), base.dtype)
    wide[:, 1::3] = base
    yield "strided", wide[:, 1::3]
    yield "transposed", np.ascontiguousarray(base.T).T
    yield "reversed", np.ascontiguousarray(base[::-1, ::-1])[::-1, ::-1]


@pytest.mark.parametrize("dtype,np_dt", [("float32", np.float32), ("bfloat16", ml_dtypes.bfloat16),
                                         ("int8", np.int8), ("float16", np.float16)])
def test_inputs_in_any_layout_arrive_unchanged(dtype, np_dt):
    shape = (24, 40)
    base = (np.arange(np.prod(shape)).reshape(shape) % 97 - 40).astype(np_dt)
    sim = birsim.Simulator(copy_prog(shape, dtype))
    for name, arr in layouts(base):
        assert np.array_equal(arr, base)
        out = sim.run({"x": arr})["y"]
        assert out.dtype == np.dtype(np_dt) and out.shape == shape, name
        assert np.array_equal(out.view(np.uint8), base.view(np.uint8)), name


def test_inputs_are_cast_and_never_aliased():
    shape = (16, 8)
    x64 = (np.arange(128) / 8 - 3).reshape(shape)          # float64, exact in float32
    sim = birsim.Simulator(copy_prog(shape), zero_copy=False)   # the copying mode's promise
    out = sim.run({"x": x64})["y"]
    assert np.array_equal(out, x64.astype(np.float32))
    x = np.ones(shape, np.float32)
    first = sim.run({"x": x})["y"]
    x[:] = 5                                   # the caller's array is not simulator memory
    assert np.all(sim.read("x") == 1)
    first[:] = 7                               # nor is the returned array
    assert np.all(sim.read("y") == 1)
    second = sim.run({"x": x})["y"]
    assert np.all(second == 5) and np.all(first == 7)
    assert first.flags.writeable and first.flags.owndata and first.flags.c_contiguous


def test_list_and_3d_inputs():
    shape = (4, 3, 5)
    vals = np.arange(60, dtype=np.float32).reshape(shape)
    sim = birsim.Simulator(copy_prog(shape))
    assert np.array_equal(sim.run({"x": vals.tolist()})["y"], vals)
    assert np.array_equal(sim.run({"x": np.asfortranarray(vals)})["y"], vals)
    assert np.array_equal(sim.run({"x": vals.transpose(2, 1, 0).copy().transpose(2, 1, 0)})["y"],
                          vals)


def test_placed_sbuf_input_rows_land_in_their_partitions():
    """A placed SBUF location's rows are a partition pitch apart, so the write and the
    read-out go row by row; neighbouring bytes of the partition stay unwritten."""
    shape = (8, 6)
    x = np.arange(48, dtype=np.float32).reshape(shape) - 20
    sim = birsim.Simulator(copy_prog(shape, mem_in="SB", base=0, addr=64))
    assert np.array_equal(sim.run({"x": np.asfortranarray(x)})["y"], x)
    assert np.array_equal(sim.read("x"), x)


def test_read_reports_unwritten_outputs():
    shape = (4, 4)
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", shape, "DRAM"),
        tensor("y", "ExternalOutput", "float32", shape, "DRAM")],
        [block("b0", insn("cp", "DMACopy", "DMA", ins=[whole("x", (2, 4))],
                          outs=[whole("y", (2, 4))]))])])
    sim = birsim.Simulator(prog)
    with pytest.warns(birsim.BirsimWarning, match="not fully written"):
        sim.run({"x": np.ones(shape, np.float32)})
    assert any("not fully written" in w for w in sim.warnings)
    sim2 = birsim.Simulator(copy_prog(shape))
    sim2.run({"x": np.ones(shape, np.float32)})
    assert not any("not fully written" in w for w in sim2.warnings)


def _loc_rows(sim, name):
    t = next(t for t in sim.module.inputs + sim.module.outputs if t.name == name)
    return t.location_index, t.shape[0], int(np.prod(t.shape[1:])) * 4


def test_reset_forgets_a_whole_input_write():
    """An input written whole keeps its shadow bytes across a reset (the next whole write
    copies the data alone: vm.h BS_SH_STALE), yet after the reset it reads as never
    written: to a read, to a partial write (only its rows count), and to a run."""
    shape = (8, 4)
    x = np.arange(32, dtype=np.float32).reshape(shape)
    sim = birsim.Simulator(copy_prog(shape), strict=True)
    assert np.array_equal(sim.run({"x": x})["y"], x)
    loc, rows, rowbytes = _loc_rows(sim, "x")
    sim._sim.reset()
    assert sim._sim.read(loc, -1, rows, rowbytes)[1] is False
    sim._sim.reset()
    sim._sim.write(loc, -1, x[:2].tobytes(), 2, rowbytes)          # rows 0-1 only
    assert sim._sim.read(loc, -1, 2, rowbytes)[1] is True
    assert sim._sim.read(loc, -1, rows, rowbytes)[1] is False
    sim.run({"x": x})
    sim._sim.reset()                                                # stale again, then run:
    from birsim.kernels import make_host
    with pytest.raises(birsim.MemoryAccessError, match="x"):        # the copy reads x
        while not sim._sim.advance(make_host(sim))[0]:
            pass
    assert np.array_equal(sim.run({"x": 2 * x})["y"], 2 * x)        # and a whole write again


def test_repeated_runs_of_a_two_core_shared_input():
    """A shared ExternalInput (one buffer for both cores) written whole on every run."""
    shape = (4, 8)
    sim = birsim.Simulator(copy_prog(shape), cores=2, strict=True)
    for k in range(3):
        x = np.full(shape, k + 0.5, np.float32)
        assert np.array_equal(sim.run({"x": x})["y"], x)
    loc, rows, rowbytes = _loc_rows(sim, "x")
    sim._sim.reset()
    assert sim._sim.read(loc, 0, rows, rowbytes)[1] is False
    assert sim._sim.read(loc, 1, rows, rowbytes)[1] is False


def test_read_into_a_callers_array():
    shape = (8, 4)
    x = np.arange(32, dtype=np.float32).reshape(shape) - 3
    sim = birsim.Simulator(copy_prog(shape), zero_copy=False)   # keeps the output to read
    sim.run({"x": x})
    out = np.full(shape, 99, np.float32)
    got = sim.read("y", out=out)
    assert got is out and np.array_equal(out, x)
    bf = birsim.Simulator(copy_prog(shape, "bfloat16"), zero_copy=False)
    bf.run({"x": x.astype(ml_dtypes.bfloat16)})
    dst = np.zeros(shape, ml_dtypes.bfloat16)
    assert bf.read("y", out=dst) is dst and np.array_equal(dst, x.astype(ml_dtypes.bfloat16))
    for bad in (np.zeros(shape, np.float64), np.zeros((4, 8), np.float32),
                np.zeros((4, 16), np.float32)[:, ::2], [[0.0] * 4] * 8):
        with pytest.raises(birsim.ProgramError, match="out must be a writeable C-contiguous"):
            sim.read("y", out=bad)
    ro = np.zeros(shape, np.float32)
    ro.flags.writeable = False
    with pytest.raises(birsim.ProgramError, match="out must be"):
        sim.read("y", out=ro)
    assert np.all(ro == 0)
