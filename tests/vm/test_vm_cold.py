"""The first run of a big program (issue 24): a whole-location host write (an input) into
a buffer whose shadow is still zero leaves the shadow untouched -- logically all ones
(vm.h BS_SH_LAZY) -- so the first run faults no shadow page for its inputs. These tests pin
that every reader still sees such an input as written, and that after a reset it reads as
never written again: to host reads and ``written()``, to partial host writes, to the
program (via its own name and via a must-alias output), on every run, in every
``uninitialized`` mode and memory kind an input may have, on one core and on two, through
``run`` and through ``start``/``step``. References are computed with NumPy.
"""

import os
import warnings

import numpy as np
import pytest

import birsim
from birsim.kernels import make_host
from bir import ap, block, function, insn, module, tensor, whole

# Where an input may live: its own DRAM buffer (small, and of the size from which a reset
# clears lazily), the per-core DRAM arena (addr), a Shared buffer (one for all cores).
KINDS = {
    "DRAM": dict(),
    "DRAM_arena": dict(addr=64),
    "DRAM_shared": dict(addr_space="Shared"),
}
SHAPE = (8, 64)
BIG = (128, 65536)            # 32 MiB of float32: sim.c BS_LAZY_BYTES


def _unwritten(mode, shape):
    return np.zeros(shape, np.float32) if mode == "zero" else np.full(shape, np.nan, np.float32)


def _copy_prog(shape, dbl=True, **where):
    """y := x + 1, then x[0:2] := 2 x[0:2] (the program writes part of its input; not with
    dbl=False: on two cores both would), z := x."""
    top = [[shape[1], 2], [1, shape[1]]]
    body = [insn("inc", "TensorScalar", "DVE", ins=[whole("x", shape)], outs=[whole("y", shape)],
                 op0="add", const0=1.0)]
    if dbl:
        body.append(insn("dbl", "TensorScalar", "DVE", ins=[ap("x", top)], outs=[ap("x", top)],
                         op0="mult", const0=2.0))
    body.append(insn("cp", "TensorCopy", "DVE", ins=[whole("x", shape)],
                     outs=[whole("z", shape)]))
    return module([function("main", [
        tensor("x", "ExternalInput", "float32", shape, "DRAM", **where),
        tensor("y", "ExternalOutput", "float32", shape, "DRAM"),
        tensor("z", "ExternalOutput", "float32", shape, "DRAM")], [block("b0", *body)])])


def _want(x, dbl=True):
    z = x.copy()
    if dbl:
        z[:2] *= np.float32(2)
    return x + np.float32(1), z


def _loc(sim, name):
    t = next(t for t in sim.module.inputs + sim.module.outputs if t.name == name)
    return t.location_index, t.shape[0], int(np.prod(t.shape[1:])) * 4


def _read(sim, name, core=-1):
    loc, rows, rowbytes = _loc(sim, name)
    data, ok = sim._sim.read(loc, core, rows, rowbytes)
    return np.frombuffer(bytes(data), np.float32).reshape(rows, -1), ok


def _written(sim, name, core=-1):
    loc, rows, rowbytes = _loc(sim, name)
    return np.frombuffer(bytes(sim._sim.written(loc, core, rows, rowbytes)),
                         np.uint8).reshape(rows, rowbytes)


def _finish(sim):
    host = make_host(sim)
    while not sim._sim.advance(host)[0]:
        pass


@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_whole_input_is_written_to_every_reader_on_every_run(kind, mode, cores):
    """The program reads the input, writes part of it (on one core) and reads it again, on
    each core; no never-written report, in strict mode and under the memory checkers."""
    rng = np.random.default_rng(1)
    dbl = cores == 1
    runs = [dict(strict=True)]
    if cores == 1:      # two cores write the same outputs: a race to the checker
        runs.append(dict(checks=["uninitialized", "races", "dead_writes"]))
    for opts in runs:
        sim = birsim.Simulator(_copy_prog(SHAPE, dbl, **KINDS[kind]), uninitialized=mode,
                               cores=cores, **opts)
        for k in range(3):
            x = rng.standard_normal(SHAPE, dtype=np.float32)
            with warnings.catch_warnings():
                warnings.simplefilter("error", birsim.BirsimWarning)
                out = sim.run({"x": x})
            y, z = _want(x, dbl)
            np.testing.assert_array_equal(out["y"], y, err_msg=f"run {k}")
            np.testing.assert_array_equal(out["z"], z, err_msg=f"run {k}")
            assert sim.warnings == [] and sim.findings == []
            for core in range(cores):
                np.testing.assert_array_equal(sim.read("x", core=core), z)
                assert sim.written("x", core=core).all()
                assert sim.written("z", core=core).all()


@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("kind, shape", [(k, SHAPE) for k in sorted(KINDS)] + [("DRAM", BIG)],
                         ids=sorted(KINDS) + ["DRAM_big"])
def test_after_a_reset_a_whole_input_reads_as_never_written(kind, mode, shape):
    """Run 1 writes x whole; after a reset only rows 0-1 are written again (a partial host
    write): the other rows read as the mode says, count as never written to read() and
    written(), and the program reading x reports it; a whole write makes it all written."""
    rng = np.random.default_rng(2)
    sim = birsim.Simulator(_copy_prog(shape, **KINDS[kind]), uninitialized=mode)
    x = rng.standard_normal(shape, dtype=np.float32)
    sim.run({"x": x})
    loc, rows, rowbytes = _loc(sim, "x")
    for again in range(2):
        sim._sim.reset()
        got, ok = _read(sim, "x")
        assert ok is False
        np.testing.assert_array_equal(got, _unwritten(mode, shape))
        assert not _written(sim, "x").any()
        sim._sim.reset()
        part = rng.standard_normal((2, shape[1]), dtype=np.float32)
        sim._sim.write(loc, -1, part.tobytes(), 2, rowbytes)
        want = _unwritten(mode, shape)
        want[:2] = part
        got, ok = _read(sim, "x")
        assert ok is False
        np.testing.assert_array_equal(got, want)
        mask = _written(sim, "x")
        assert mask[:2].all() and not mask[2:].any()
        assert _read(sim, "x")[1] is False
        _finish(sim)
        assert any("never-written bytes of 'x'" in m for m in sim._sim.diagnostics()[0])
        x = rng.standard_normal(shape, dtype=np.float32)
        out = sim.run({"x": x})                      # whole again
        np.testing.assert_array_equal(out["z"], _want(x)[1], err_msg=f"round {again}")
        assert sim.written("x").all()


@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_partial_host_writes_into_a_whole_input(kind, mode):
    """x written whole, then rows 2-3 again, then rows 0-1 of a fresh reset (a partial
    write first, then a whole one): every byte written either way, the data the last
    write's."""
    rng = np.random.default_rng(3)
    sim = birsim.Simulator(_copy_prog(SHAPE, **KINDS[kind]), uninitialized=mode, strict=True,
                           zero_copy=False)     # read() of the output below
    sim.run({"x": rng.standard_normal(SHAPE, dtype=np.float32)})
    loc, rows, rowbytes = _loc(sim, "x")
    sim._sim.reset()
    x = rng.standard_normal(SHAPE, dtype=np.float32)
    sim._sim.write(loc, -1, x.tobytes(), rows, rowbytes)
    x[:2] = rng.standard_normal((2, SHAPE[1]), dtype=np.float32)
    sim._sim.write(loc, -1, x[:2].tobytes(), 2, rowbytes)          # into the whole write
    got, ok = _read(sim, "x")
    assert ok is True and _written(sim, "x").all()
    np.testing.assert_array_equal(got, x)
    _finish(sim)
    np.testing.assert_array_equal(sim.read("z"), _want(x)[1])
    sim._sim.reset()
    sim._sim.write(loc, -1, x[:2].tobytes(), 2, rowbytes)          # partial, then whole
    x2 = rng.standard_normal(SHAPE, dtype=np.float32)
    sim._sim.write(loc, -1, x2.tobytes(), rows, rowbytes)
    got, ok = _read(sim, "x")
    assert ok is True and _written(sim, "x").all()
    np.testing.assert_array_equal(got, x2)
    _finish(sim)
    np.testing.assert_array_equal(sim.read("z"), _want(x2)[1])


@pytest.mark.parametrize("mode", ["zero", "nan"])
def test_one_core_writes_a_shared_input_the_other_reads_it(mode):
    """A Shared input written through core 1 alone is one buffer: core 0 reads it written."""
    rng = np.random.default_rng(4)
    sim = birsim.Simulator(_copy_prog(SHAPE, False, **KINDS["DRAM_shared"]),
                           uninitialized=mode, cores=2, strict=True)
    sim.run({"x": rng.standard_normal(SHAPE, dtype=np.float32)})
    loc, rows, rowbytes = _loc(sim, "x")
    for k in range(2):
        sim._sim.reset()
        x = rng.standard_normal(SHAPE, dtype=np.float32)
        sim._sim.write(loc, 1, x.tobytes(), rows, rowbytes)
        for core in (0, 1):
            got, ok = _read(sim, "x", core)
            assert ok is True
            np.testing.assert_array_equal(got, x)
        _finish(sim)
        for core in (0, 1):
            np.testing.assert_array_equal(sim.read("z", core=core), x)


F = 16
KV_ROWS, NEW_ROWS, AT = 8, 2, 3


def _kv_prog():
    """A must-alias pair kv (in) / kv_out: rows AT.. of kv_out := new, then copy := kv_out
    whole (rows the program never wrote are the input's)."""
    tile = [[F, NEW_ROWS], [1, F]]
    full = [[F, KV_ROWS], [1, F]]
    return module([function("main", [
        tensor("kv.must_alias_input", "ExternalInput", "float32", (KV_ROWS, F), "DRAM"),
        tensor("new", "ExternalInput", "float32", (NEW_ROWS, F), "DRAM"),
        tensor("t", "Internal", "float32", (NEW_ROWS, F), "SB"),
        tensor("kv", "ExternalOutput", "float32", (KV_ROWS, F), "DRAM"),
        tensor("copy", "ExternalOutput", "float32", (KV_ROWS, F), "DRAM")], [block("b0",
            insn("ld", "TensorCopy", "DVE", ins=[ap("new", tile)], outs=[ap("t", tile)]),
            insn("st", "TensorCopy", "DVE", ins=[ap("t", tile)],
                 outs=[ap("kv", tile, offset=AT * F)]),
            insn("cp", "TensorCopy", "DVE", ins=[ap("kv", full)], outs=[ap("copy", full)]))])])


@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("mode", ["zero", "nan"])
def test_a_must_alias_output_of_a_whole_input_is_written(mode, cores):
    """The output of a must-alias pair shares its input's buffer: read through the output's
    name it is written too (no report, no "not fully written"), on every run."""
    rng = np.random.default_rng(5)
    sim = birsim.Simulator(_kv_prog(), uninitialized=mode, cores=cores, strict=True)
    for k in range(3):
        inputs = {"kv.must_alias_input": rng.standard_normal((KV_ROWS, F), dtype=np.float32),
                  "new": rng.standard_normal((NEW_ROWS, F), dtype=np.float32)}
        want = inputs["kv.must_alias_input"].copy()
        want[AT:AT + NEW_ROWS] = inputs["new"]
        with warnings.catch_warnings():
            warnings.simplefilter("error", birsim.BirsimWarning)
            out = sim.run(inputs)
        np.testing.assert_array_equal(out["kv"], want, err_msg=f"run {k}")
        np.testing.assert_array_equal(out["copy"], want, err_msg=f"run {k}")
        for core in range(cores):
            assert sim.written("kv", core=core).all()


@pytest.mark.parametrize("mode", ["zero", "nan"])
def test_start_and_step_see_a_whole_input_written(mode):
    """start() writes the inputs, step() runs one instruction at a time; then run()."""
    rng = np.random.default_rng(6)
    sim = birsim.Simulator(_copy_prog(SHAPE), uninitialized=mode, strict=True)
    for k in range(2):
        x = rng.standard_normal(SHAPE, dtype=np.float32)
        sim.start({"x": x})
        while sim.step() is not None:
            pass
        y, z = _want(x)
        np.testing.assert_array_equal(sim.read("y"), y, err_msg=f"round {k}")
        np.testing.assert_array_equal(sim.read("z"), z, err_msg=f"round {k}")
        x = rng.standard_normal(SHAPE, dtype=np.float32)
        np.testing.assert_array_equal(sim.run({"x": x})["z"], _want(x)[1], err_msg=f"round {k}")


def _rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    return 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_a_whole_input_write_leaves_its_shadow_untouched():
    """Writing a fresh 64 MiB input costs its data's pages, not a second 64 MiB for its
    shadow (resident memory, not time)."""
    shape = (128, 131072)
    sim = birsim.Simulator(_copy_prog(shape))
    loc, rows, rowbytes = _loc(sim, "x")
    x = np.ones(shape, np.float32)
    r0 = _rss()
    sim._sim.write(loc, -1, x.reshape(-1).view(np.uint8), rows, rowbytes)
    grown = _rss() - r0
    assert grown < 1.25 * x.nbytes, grown
    got, ok = _read(sim, "x")
    assert ok is True and np.array_equal(got, x)
