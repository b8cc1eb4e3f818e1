"""The written-byte shadow of a big DRAM tensor is summarised per 4 KiB chunk (mem/mem.h
bs_chunks, vm/chunks.c): a whole chunk written is one state byte, not 4096 shadow bytes.
These tests pin that every verdict stays byte for byte what the per-byte shadow gives:
never-written reads (warnings, strict errors), ``written()``, "not fully written" outputs
and what never-written bytes read as -- for partial chunks, strided writes, rows that
straddle chunks, second and third runs (the reset clears only what the summary says was
written) in both ``uninitialized`` modes, and a run that stops halfway. The reference is
a NumPy model of which elements each instruction wrote; the same programs run with a
checker on (which keeps the per-byte shadow alone) must agree too.
"""

import warnings

import numpy as np
import pytest

import birsim
from bir import ap, block, function, insn, module, reg, reg_ap, register, tensor

P, F = 8, 1500            # 6000-byte rows: row and chunk (4096) boundaries do not meet
NINSN = 14


def _pattern(rng):
    """A random [rows, cols] region with a column step: (p0, np, f0, nf, step)."""
    if rng.random() < 0.2:
        return 0, P, 0, F, 1                      # whole tensor: whole chunks
    p0 = int(rng.integers(0, P))
    npart = int(rng.integers(1, P - p0 + 1))
    step = int(rng.choice([1, 1, 2, 3]))
    if rng.random() < 0.3:
        return p0, npart, 0, F, 1                 # whole rows: whole chunks inside
    nf = int(rng.integers(1, F // step + 1))
    f0 = int(rng.integers(0, F - (nf - 1) * step))
    return p0, npart, f0, nf, step


def _ap(name, region, nf):
    p0, npart, f0, _, step = region
    return ap(name, [[F, npart], [step, nf]], offset=p0 * F + f0)


def _random_program(seed):
    """NINSN TensorCopys x -> t, t -> t, t -> out, x -> out over random regions of the same
    extents; returns the module and the instruction list (src, src region, dst, dst region)."""
    rng = np.random.default_rng(seed)
    steps = []
    for i in range(NINSN):
        src = str(rng.choice(["x", "t", "t"]))
        dst = str(rng.choice(["t", "t", "out"]))
        a, b = _pattern(rng), _pattern(rng)
        npart, nf = min(a[1], b[1]), min(a[3], b[3])
        a = (a[0], npart, a[2], nf, a[4])
        b = (b[0], npart, b[2], nf, b[4])
        steps.append((f"cp{i}", src, a, dst, b))
    insns = [insn(n, "TensorCopy", "DVE", ins=[_ap(s, a, a[3])], outs=[_ap(d, b, b[3])])
             for n, s, a, d, b in steps]
    mod = module([function("main", [
        tensor("x", "ExternalInput", "float32", [P, F], "DRAM"),
        tensor("t", "Internal", "float32", [P, F], "DRAM"),
        tensor("out", "ExternalOutput", "float32", [P, F], "DRAM")],
        [block("b0", *insns)])])
    return mod, steps


def _idx(region):
    p0, npart, f0, nf, step = region
    return slice(p0, p0 + npart), slice(f0, f0 + (nf - 1) * step + 1, step)


def _model(steps, x, mode):
    """What the run must give: values and written masks of t and out, and the names of
    the instructions that read a never-written element."""
    fill = np.float32(0) if mode == "zero" else np.float32(np.nan)
    val = {"x": x, "t": np.full((P, F), fill, np.float32), "out": np.full((P, F), fill, np.float32)}
    wr = {"x": np.ones((P, F), bool), "t": np.zeros((P, F), bool), "out": np.zeros((P, F), bool)}
    warned = []
    for name, s, a, d, b in steps:
        if not wr[s][_idx(a)].all():
            warned.append(name)
        v = val[s][_idx(a)].copy()
        val[d][_idx(b)] = v
        wr[d][_idx(b)] = True
    return val, wr, warned


def _run(sim, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sim.run(x if isinstance(x, dict) else {"x": x})


@pytest.mark.parametrize("mode", ["zero", "nan"])
@pytest.mark.parametrize("seed", range(12))
def test_random_copies_match_the_numpy_model(seed, mode):
    mod, steps = _random_program(seed)
    sim = birsim.Simulator(mod, uninitialized=mode)
    rng = np.random.default_rng(100 + seed)
    for r in range(3):                       # the resets in between clear what was written
        x = rng.standard_normal((P, F), dtype=np.float32)
        val, wr, warned = _model(steps, x, mode)
        out = _run(sim, x)["out"]
        np.testing.assert_array_equal(out, val["out"], err_msg=f"run {r}")
        if r == 2:       # written() turns the summary off: the resets before went through it
            np.testing.assert_array_equal(sim.written("t"), wr["t"], err_msg=f"run {r}")
            np.testing.assert_array_equal(sim.written("out"), wr["out"], err_msg=f"run {r}")
        np.testing.assert_array_equal(sim.read("t"), val["t"], err_msg=f"run {r}")
        assert any("output 'out' was not fully written" in w for w in sim.warnings) \
            == (not wr["out"].all()), f"run {r}"
        assert len([w for w in sim.warnings if "reads never-written bytes" in w]) \
            == len(warned), (f"run {r}", sim.warnings, warned)
        for name in warned:
            assert any(f"instruction '{name}'" in w and "reads never-written bytes" in w
                       for w in sim.warnings), \
                (f"run {r}", name, sim.warnings)


@pytest.mark.parametrize("seed", range(6))
def test_a_checker_run_agrees(seed):
    """With a checker on, the shadow is per byte alone: same outputs, masks and reads."""
    mod, steps = _random_program(seed)
    plain = birsim.Simulator(mod, zero_copy=False)      # read() of every tensor below
    checked = birsim.Simulator(mod, checks="uninitialized", zero_copy=False)
    x = np.random.default_rng(seed).standard_normal((P, F), dtype=np.float32)
    for _ in range(2):
        a, b = _run(plain, x)["out"], _run(checked, x)["out"]
        np.testing.assert_array_equal(a, b)
        for name in ("t", "out"):
            np.testing.assert_array_equal(plain.written(name), checked.written(name))
            np.testing.assert_array_equal(plain.read(name), checked.read(name))


def _halfway_program():
    """cp0 writes rows 1..P of t whole (whole chunks), cp1 copies t's first 3000 elements
    (row 0: never written) to out under strict=True: an error after cp0 wrote."""
    return module([function("main", [
        tensor("x", "ExternalInput", "float32", [P, F], "DRAM"),
        tensor("t", "Internal", "float32", [P, F], "DRAM"),
        tensor("out", "ExternalOutput", "float32", [P, F], "DRAM")], [block("b0",
            insn("rd", "TensorCopy", "DVE", ins=[ap("t", [[F, 2], [1, 10]], offset=3 * F)],
                 outs=[ap("out", [[F, 2], [1, 10]])]),
            insn("cp0", "TensorCopy", "DVE", ins=[ap("x", [[F, P - 1], [1, F]], offset=F)],
                 outs=[ap("t", [[F, P - 1], [1, F]], offset=F)]),
            insn("cp1", "TensorCopy", "DVE", ins=[ap("t", [[F, 2], [1, F]])],
                 outs=[ap("out", [[F, 2], [1, F]])]))])])


def test_a_run_stopped_halfway_leaves_the_truth_and_the_next_run_starts_clean():
    sim = birsim.Simulator(_halfway_program(), strict=True)
    x = np.ones((P, F), np.float32)
    want = np.zeros((P, F), bool)
    want[1:] = True
    for r in range(3):
        with pytest.raises(birsim.SimulationError, match="rd|never-written"):
            sim.run({"x": x})                # rd reads t before anything wrote it
        # stopped at rd: nothing of t written yet, in every run (the reset cleared cp0's)
        assert not sim.written("t").any(), f"run {r}"
    lax = birsim.Simulator(_halfway_program())
    for r in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = lax.run({"x": x})["out"]
        np.testing.assert_array_equal(lax.written("t"), want, err_msg=f"run {r}")
        ref = np.zeros((P, F), np.float32)
        ref[1, :] = 1                        # row 0 of t never written: 0
        np.testing.assert_array_equal(out[:2], ref[:2])
        warned = [w for w in lax.warnings if "reads never-written bytes" in w]
        assert len(warned) == 2 and "instruction 'rd'" in warned[0] \
            and "instruction 'cp1'" in warned[1], lax.warnings


def test_host_write_and_written_mid_use_turn_the_summary_off_correctly():
    """written() (which turns the summary off: the shadow bytes become the truth) between
    runs sees what the summary said, and the next reset clears the bytes path right."""
    mod, steps = _random_program(3)
    sim = birsim.Simulator(mod)
    x = np.arange(P * F, dtype=np.float32).reshape(P, F)
    val, wr, _ = _model(steps, x, "zero")
    _run(sim, x)
    np.testing.assert_array_equal(sim.written("t"), wr["t"])        # turns it off: bytes
    np.testing.assert_array_equal(sim.written("t"), wr["t"])        # same bytes again
    out, ok = sim.read("out"), wr["out"].all()
    np.testing.assert_array_equal(out, val["out"])
    val2, wr2, _ = _model(steps, x + 1, "zero")
    np.testing.assert_array_equal(_run(sim, x + 1)["out"], val2["out"])
    np.testing.assert_array_equal(sim.written("t"), wr2["t"])
    assert ok == wr2["out"].all()


def _moving_program():
    """Writes that move between runs (register offsets from the input k): w1 copies W
    columns of every row of x to t at column k[0]; w2 copies 4 whole rows at element
    k[1]; rd copies all of t to out. A chunk written partly by w1 and then whole by w2 is
    FULL_DIRTY: the next reset must clear its bytes and data although a later run writes
    it only in part."""
    W = 1200
    return W, module([function("main", [
        tensor("k", "ExternalInput", "int32", [1, 2], "DRAM"),
        tensor("x", "ExternalInput", "float32", [P, F], "DRAM"),
        tensor("t", "Internal", "float32", [P, F], "DRAM"),
        tensor("out", "ExternalOutput", "float32", [P, F], "DRAM"),
        register("r1"), register("r2")], [block("b0",
            insn("ld1", "TensorLoad", "Pool", ins=[ap("k", [[2, 1], [1, 1]], "int32")],
                 outs=[reg("r1")]),
            insn("ld2", "TensorLoad", "Pool", ins=[ap("k", [[2, 1], [1, 1]], "int32", offset=1)],
                 outs=[reg("r2")]),
            insn("w1", "TensorCopy", "Pool", ins=[ap("x", [[F, P], [1, W]])],
                 outs=[reg_ap("t", [[F, P], [1, W]], "r1")]),
            insn("w2", "TensorCopy", "Pool", ins=[ap("x", [[F, 4], [1, F]])],
                 outs=[reg_ap("t", [[F, 4], [1, F]], "r2")]),
            insn("rd", "TensorCopy", "Pool", ins=[ap("t", [[F, P], [1, F]])],
                 outs=[ap("out", [[F, P], [1, F]])]))])])


@pytest.mark.parametrize("mode", ["zero", "nan"])
def test_writes_that_move_between_runs(mode):
    W, mod = _moving_program()
    sim = birsim.Simulator(mod, uninitialized=mode)
    fill = 0.0 if mode == "zero" else np.nan
    x = np.arange(P * F, dtype=np.float32).reshape(P, F) + 1
    for r, (c1, row2) in enumerate([(0, 0), (300, 4), (F - W, 0), (7, 2), (0, 4), (150, 1)]):
        t = np.full((P, F), fill, np.float32)
        wr = np.zeros((P, F), bool)
        t[:, c1:c1 + W] = x[:, :W]
        wr[:, c1:c1 + W] = True
        t[row2:row2 + 4] = x[:4]
        wr[row2:row2 + 4] = True
        out = _run(sim, {"k": np.array([[c1, row2 * F]], np.int32), "x": x})["out"]
        np.testing.assert_array_equal(out, t, err_msg=f"run {r}")
        if r % 2:        # written() turns the summary off: every other reset goes through it
            np.testing.assert_array_equal(sim.written("t"), wr, err_msg=f"run {r}")
        warned = any("instruction 'rd'" in w and "never-written" in w for w in sim.warnings)
        assert warned == (not wr.all()), f"run {r}"
