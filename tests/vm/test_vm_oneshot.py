"""One-shot runs and memory reuse (issue 24): what never-written memory reads as on the
first run of a Simulator (lazily zeroed pages) and on every later run of the same one
(memory the previous run wrote), for each ``uninitialized`` mode and every memory kind.

``uninitialized="zero"`` (the default): never-written bytes read as 0;
``uninitialized="nan"``: floats read as NaN, integers as their maximum
(``Simulator`` docstring, docs/python-api.md). A reset marks memory never written again,
so a second run must see the same values as the first, not the previous run's data.
"""

import numpy as np
import pytest

import birsim
from bir import affine, ap, block, dyn_loop, function, insn, module, register, reg, rv, tensor, whole

# SBUF/PSUM placed (at an address) or not; DRAM private (small and above the size from
# which a reset clears lazily), in the per-core arena (Internal with addr), Shared.
KINDS = {
    "SB": dict(mem="SB"),
    "SB_placed": dict(mem="SB", base=0, addr=4096),
    "PSUM": dict(mem="PSUM"),
    "PSUM_placed": dict(mem="PSUM", base=0, addr=0),
    "DRAM": dict(mem="DRAM"),
    "DRAM_arena": dict(mem="DRAM", addr=64),
    "DRAM_shared": dict(mem="DRAM", addr_space="Shared"),
}
SHAPE = (128, 64)
BIG = (128, 65536)            # 32 MiB of float32: the lazily cleared size (sim.c BS_LAZY_BYTES)


def _program(shape, dtype, **where):
    """out := t (never written this run), then t := x (+1 for floats), out2 := t: every run
    reads t before writing it, and leaves it written."""
    x_dt = dtype
    wr = (insn("wr", "TensorScalar", "DVE", ins=[whole("x", shape, x_dt)],
               outs=[whole("t", shape, dtype)], op0="add", const0=1.0)
          if dtype == "float32" else
          insn("wr", "TensorCopy", "DVE", ins=[whole("x", shape, x_dt)],
               outs=[whole("t", shape, dtype)]))
    return module([function("main", [
        tensor("t", "Internal", dtype, shape, **where),
        tensor("x", "ExternalInput", x_dt, shape, "DRAM"),
        tensor("out", "ExternalOutput", dtype, shape, "DRAM"),
        tensor("out2", "ExternalOutput", dtype, shape, "DRAM")], [block("b0",
            insn("rd", "TensorCopy", "DVE", ins=[whole("t", shape, dtype)],
                 outs=[whole("out", shape, dtype)]),
            wr,
            insn("rd2", "TensorCopy", "DVE", ins=[whole("t", shape, dtype)],
                 outs=[whole("out2", shape, dtype)]))])])


def _unwritten(mode, dtype, shape):
    """What a never-written element reads as, computed with NumPy."""
    if mode == "zero":
        return np.zeros(shape, dtype)
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype)
    return np.full(shape, np.iinfo(dtype).max, dtype)


def _inputs(rng, dtype, shape):
    if dtype == "float32":
        return rng.standard_normal(shape, dtype=np.float32) + np.float32(5)
    return rng.integers(1, 1000, shape, dtype=dtype)


def _written(x):
    return x + np.float32(1) if x.dtype == np.float32 else x


def _check_runs(sim, mode, dtype, shape, runs=3):
    rng = np.random.default_rng(7)
    for k in range(runs):
        x = _inputs(rng, dtype, shape)
        with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
            out = sim.run({"x": x})
        np.testing.assert_array_equal(out["out"], _unwritten(mode, dtype, shape),
                                      err_msg=f"run {k}")
        np.testing.assert_array_equal(out["out2"], _written(x), err_msg=f"run {k}")


@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_never_written_memory_reads_per_mode_on_every_run(mode, kind):
    """First run (fresh, lazily zeroed pages) and later runs (pages the previous run wrote)
    read never-written bytes as the mode says."""
    sim = birsim.Simulator(_program(SHAPE, "float32", **KINDS[kind]), uninitialized=mode)
    _check_runs(sim, mode, "float32", SHAPE)


@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("kind", ["SB", "DRAM"])
def test_never_written_integers_per_mode_on_every_run(mode, kind):
    sim = birsim.Simulator(_program(SHAPE, "int32", **KINDS[kind]), uninitialized=mode)
    _check_runs(sim, mode, "int32", SHAPE)


@pytest.mark.parametrize("mode", ["zero", "nan"])
def test_never_written_big_dram_buffer_per_mode_on_every_run(mode):
    """A buffer of 32 MiB or more, whose shadow a reset clears only where it was set."""
    sim = birsim.Simulator(_program(BIG, "float32", mem="DRAM"), uninitialized=mode)
    _check_runs(sim, mode, "float32", BIG, runs=2)


@pytest.mark.parametrize("mode", ["zero", "nan"])
def test_two_cores_each_read_their_never_written_memory_on_every_run(mode):
    """Each core's own SBUF tile and DRAM results (Internal: one per core, so the cores
    do not race), read back per core."""
    def copy(name, src, dst):
        return insn(name, "TensorCopy", "DVE", ins=[whole(src, SHAPE)], outs=[whole(dst, SHAPE)])
    mod = module([function("main", [
        tensor("t", "Internal", "float32", SHAPE, "SB"),
        tensor("x", "ExternalInput", "float32", SHAPE, "DRAM"),
        tensor("u", "Internal", "float32", SHAPE, "DRAM"),
        tensor("u2", "Internal", "float32", SHAPE, "DRAM")], [block("b0",
            copy("rd", "t", "u"),
            insn("wr", "TensorScalar", "DVE", ins=[whole("x", SHAPE)], outs=[whole("t", SHAPE)],
                 op0="add", const0=1.0),
            copy("rd2", "t", "u2"))])])
    sim = birsim.Simulator(mod, cores=2, uninitialized=mode)
    rng = np.random.default_rng(3)
    for k in range(3):
        x = _inputs(rng, "float32", SHAPE)
        with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
            sim.run({"x": x})
        for core in range(2):
            np.testing.assert_array_equal(sim.read("u", core=core),
                                          _unwritten(mode, "float32", SHAPE),
                                          err_msg=f"run {k} core {core}")
            np.testing.assert_array_equal(sim.read("u2", core=core), _written(x))


def _steered_program(mem, **where):
    """A DynamicForLoop writes n column blocks of 16 of t (n an input, read by TensorLoad),
    then out := t: a run with a smaller n than the last leaves columns that run never
    wrote but the previous one did."""
    blk = {"kind": "AffExprKind", "terms": [{"idx": {"kind": "AffIVKind", "axis": "i"},
                                             "coeff": 16}], "c": 0}
    body = [insn("w", "TensorCopy", "DVE", ins=[ap("x", [[64, 128], [1, 16]], offset=blk)],
                 outs=[ap("t", [[64, 128], [1, 16]], offset=blk)])]
    return module([function("main", [
        register("n"),
        tensor("nx", "ExternalInput", "int32", (1, 1), "DRAM"),
        tensor("x", "ExternalInput", "float32", SHAPE, "DRAM"),
        tensor("t", "Internal", "float32", SHAPE, mem=mem, **where),
        tensor("out", "ExternalOutput", "float32", SHAPE, "DRAM")], [block("b0",
            insn("ld", "TensorLoad", "DVE", ins=[ap("nx", [[1, 1], [1, 1]], "int32")],
                 outs=[reg("n")]),
            dyn_loop("L", "i", 0, affine([(rv("n"), 1)]), 1, [block("lb", *body)],
                     engine="DVE"),
            insn("r", "TensorCopy", "DVE", ins=[whole("t", SHAPE)],
                 outs=[whole("out", SHAPE)]))])])


@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bytes_an_earlier_run_wrote_read_as_never_written(mode, kind):
    """Run 1 writes all of t; run 2 writes its first column block only and reads t whole:
    the other columns (data of run 1) read as the mode says, then run 3 writes it all."""
    where = dict(KINDS[kind])
    sim = birsim.Simulator(_steered_program(**where), uninitialized=mode)
    rng = np.random.default_rng(5)
    for k, n in enumerate([4, 1, 4, 2]):
        x = rng.standard_normal(SHAPE, dtype=np.float32)
        want = _unwritten(mode, "float32", SHAPE)
        want[:, :16 * n] = x[:, :16 * n]
        if n < 4:
            with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
                out = sim.run({"x": x, "nx": np.array([[n]], np.int32)})
        else:
            out = sim.run({"x": x, "nx": np.array([[n]], np.int32)})
        np.testing.assert_array_equal(out["out"], want, err_msg=f"run {k} (n={n})")
        written = sim.written("t")
        assert written[:, :16 * n].all() and not written[:, 16 * n:].any()


# ==== the C program points at the loader's tables (no copy) ==========================

def _copy_module():
    from bir import copy_program
    return birsim.load(copy_program((128, 64)))


def _run_copy(m):
    x = np.random.default_rng(2).standard_normal((128, 64), dtype=np.float32)
    np.testing.assert_array_equal(birsim.Simulator(m).run({"in": x})["out"], x)


def test_the_program_keeps_the_tables_it_points_at_alive():
    """A Program built from arrays nobody else holds still runs after they are dropped and
    their memory is handed out again (it holds their buffers)."""
    import gc
    from birsim import _birsim
    from birsim._load.tables import program_parts
    m = _copy_module()
    tables = {k: (v.copy() if isinstance(v, np.ndarray) else bytes(v))
              for k, v in m.tables.items()}
    sizes = [v.nbytes for v in tables.values() if isinstance(v, np.ndarray)]
    m._program = _birsim.Program(program_parts(tables))
    del tables
    gc.collect()
    junk = [np.full(n, 0xA5, np.uint8) for n in sizes for _ in range(50)]
    _run_copy(m)
    del junk


def test_misaligned_tables_are_copied_and_run():
    """A table whose records are not aligned for their type (a buffer at an odd address)
    is copied: the program runs, and later changes to that buffer do not reach it."""
    from birsim import _birsim
    from birsim._load.tables import program_parts
    m = _copy_module()
    tables = dict(m.tables)
    arr = tables["insns"]
    raw = bytearray(arr.nbytes + 1)
    mis = np.frombuffer(raw, dtype=arr.dtype, offset=1, count=len(arr))
    mis[...] = arr
    assert mis.ctypes.data % 8 != 0
    tables["insns"] = mis
    m._program = _birsim.Program(program_parts(tables))
    raw[1:] = b"\xff" * arr.nbytes
    _run_copy(m)


@pytest.mark.parametrize("kind", ["SB_placed", "PSUM_placed", "SB", "DRAM"])
def test_on_chip_mapping_only_for_placed_locations_in_a_group(kind):
    """SBUF/PSUM are mapped only for a program with a location placed there (vm/sim.c
    core_reset, on_chip_placed): a group whose first module is DRAM-only and whose second
    holds the placed location maps them for both cores, and every run of both reads and
    writes the right bytes (NumPy reference: out2 = x + 1, out = never written)."""
    plain = birsim.load(_program(SHAPE, "float32", mem="DRAM"))
    placed = birsim.load(_program(SHAPE, "float32", **KINDS[kind]))
    for mods in ([plain, placed], [placed, plain], [placed]):
        sim = birsim.Simulator(mods if len(mods) > 1 else mods[0])
        rng = np.random.default_rng(3)
        for k in range(2):
            x = _inputs(rng, "float32", SHAPE)
            with pytest.warns(birsim.BirsimWarning, match="never-written bytes of .t."):
                out = sim.run({"x": x})
            np.testing.assert_array_equal(out["out"], np.zeros(SHAPE, np.float32),
                                          err_msg=f"run {k}")
            np.testing.assert_array_equal(out["out2"], x + np.float32(1), err_msg=f"run {k}")
