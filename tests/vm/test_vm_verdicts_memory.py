"""Memory placement across cores, External tensors of an SPMD run, must-alias pairs and
a two-core collective under the race checker (brief c1). References are NumPy."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import birsim
import dumps as D
import test_vm_collectives as TC
from bir import affine, ap, function, insn, module, shard, sync_info, tensor, update, wait

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R, F = 4, 8                     # rows per core, row length


# ---- 1. per-core placement of addr-placed Internal DRAM tensors ---------------------------

def _core_module(k, scratch=None):
    """Module of core k (compiler spelling): y[k] := x[k], through an Internal DRAM tensor
    ``scr`` placed at ``scratch = (addr, floats)`` when given, then an SB tile."""
    row = R * F * 4
    allocs = [D.dram("x", "ExternalInput", [2 * R, F]), D.dram("y", "ExternalOutput", [2 * R, F]),
              D.tile("t", R, F * 4)]
    src = D.full("x", 1, R * F, offset=k * R * F)
    if scratch is not None:
        addr, n = scratch
        allocs.append(D.dram("scr", "Internal", [n], addr=addr))
        body = [D.insn("ld0", "DMACopy", "SP", ins=[src], outs=[D.full("scr", 1, R * F)]),
                D.insn("ld", "DMACopy", "SP", ins=[D.full("scr", 1, R * F)],
                       outs=[D.full("t", R, F)])]
    else:
        body = [D.insn("ld", "DMACopy", "SP", ins=[src], outs=[D.full("t", R, F)])]
    body.append(D.insn("st", "DMACopy", "SP", ins=[D.full("t", R, F)],
                       outs=[D.full("y", 1, R * F, offset=k * R * F)]))
    assert row == R * F * 4
    return D.module(allocs, [("entry", body)])


SHAPES = {"one_placed": (_core_module(0, (4096, R * F)), _core_module(1)),
          "other_placed": (_core_module(0), _core_module(1, (64, R * F))),
          "both_placed": (_core_module(0, (8192, 2 * R * F)), _core_module(1, (128, R * F)))}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_per_core_arena_placement_in_a_subprocess(shape, tmp_path):
    """Used to write core 0's placed tensor into core 1's arena (NULL or too small):
    SIGSEGV or heap corruption. Run apart so a crash fails the test, not the suite."""
    path = tmp_path / "mods.json"
    path.write_text(json.dumps(list(SHAPES[shape])))
    code = ("import json, sys, numpy as np, birsim\n"
            "x = np.arange(%d, dtype=np.float32).reshape(%d, %d)\n"
            "sim = birsim.Simulator(birsim.load(sys.argv[1]), checks='all')\n"
            "out = sim.run({'x': x})\n"
            "assert np.array_equal(out['y'], x), out['y']\n"
            "assert sim.findings == [] and sim.warnings == [], (sim.findings, sim.warnings)\n"
            "print('ok')\n" % (2 * R * F, 2 * R, F))
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, (res.returncode, res.stderr[-2000:])
    assert res.stdout.strip() == "ok"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_per_core_arena_placement_outputs(shape):
    x = np.random.default_rng(1).standard_normal((2 * R, F)).astype(np.float32)
    sim = birsim.Simulator(list(SHAPES[shape]))
    out = sim.run({"x": x})
    np.testing.assert_array_equal(out["y"], x)
    if shape != "other_placed":                    # core 0's scratch holds x[0]
        np.testing.assert_array_equal(sim.read("scr", core=0)[:R * F], x[:R].ravel())


# ---- 2. one SPMD program on N cores: External tensors are one tensor -----------------------

def _spmd(n):
    """Core k (ShardID) doubles rows k*R..(k+1)*R of x into the same rows of y."""
    rows = lambda name: ap(name, [[F, R], [1, F]], offset=affine([(shard(), R * F)]))
    tile = [[F, R], [1, F]]
    return module([function("main", [
        tensor("x", "ExternalInput", "float32", (n * R, F), "DRAM"),
        tensor("t", "Internal", "float32", (R, F), "SB"),
        tensor("y", "ExternalOutput", "float32", (n * R, F), "DRAM")], [
        insn("ld", "Load", "DMA", ins=[rows("x")], outs=[ap("t", tile)],
             sync=sync_info([], [update(1, "sem-inc", 1)])),
        insn("dbl", "TensorScalar", "DVE", ins=[ap("t", tile)], outs=[ap("t", tile)],
             op0="mult", const0=2.0,
             sync=sync_info([wait(1, "sem-ge-imm", 1)],
                            [update(1, "sem-sub-imm", 1), update(2, "sem-inc", 1)])),
        insn("st", "Save", "DMA", ins=[ap("t", tile)], outs=[rows("y")],
             sync=sync_info([wait(2, "sem-ge-imm", 1)], [update(2, "sem-sub-imm", 1)]))])])


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("form", ["cores", "list"])
def test_spmd_outputs_are_one_tensor_in_both_forms(n, form):
    x = np.random.default_rng(n).standard_normal((n * R, F)).astype(np.float32)
    prog = _spmd(n)
    sim = birsim.Simulator(prog, cores=n, checks="all") if form == "cores" else \
        birsim.Simulator([prog] * n, checks="all")
    out = sim.run({"x": x})
    np.testing.assert_array_equal(out["y"], x * np.float32(2))
    assert sim.warnings == [] and sim.findings == []
    for k in range(n):                             # every core sees the one tensor
        np.testing.assert_array_equal(sim.read("y", core=k), out["y"])


def test_spmd_internal_tensors_stay_per_core():
    n = 2
    x = np.random.default_rng(5).standard_normal((n * R, F)).astype(np.float32)
    sim = birsim.Simulator(_spmd(n), cores=n)
    sim.run({"x": x})
    for k in range(n):
        np.testing.assert_array_equal(sim.read("t", core=k), 2 * x[k * R:(k + 1) * R])


# ---- 3. must-alias pairs ---------------------------------------------------------------------

KV_ROWS, NEW_ROWS, AT = 8, 2, 3            # rows of the cache, rows written, first row written


def _kv_birsim(in_name="kv.must_alias_input", out_name="kv", dtype="float32",
               shape=(KV_ROWS, F), sets_named=True):
    """new -> tile -> rows AT.. of the output; other rows are never written."""
    tile = [[F, NEW_ROWS], [1, F]]
    loc = {} if sets_named else None
    t_in = tensor(in_name, "ExternalInput", dtype, shape, "DRAM")
    t_out = tensor(out_name, "ExternalOutput", "float32", (KV_ROWS, F), "DRAM")
    if loc is None:                              # pair by location names only
        t_in["name"], t_out["name"] = "cache_in", "cache_out"
    return module([function("main", [
        t_in, tensor("new", "ExternalInput", "float32", (NEW_ROWS, F), "DRAM"),
        tensor("t", "Internal", "float32", (NEW_ROWS, F), "SB"), t_out], [
        insn("ld", "Load", "DMA", ins=[ap("new", tile)], outs=[ap("t", tile)],
             sync=sync_info([], [update(1, "sem-inc", 1)])),
        insn("st", "Save", "DMA", ins=[ap("t", tile)],
             outs=[ap(out_name, tile, offset=AT * F)],
             sync=sync_info([wait(1, "sem-ge-imm", 1)], [update(1, "sem-sub-imm", 1)]))])])


def _kv_dump(out_shape=(KV_ROWS, F)):
    """The compiler's spelling: sets named by their location, shape in debug."""
    return D.module(
        [D.dram("kv.must_alias_input", "ExternalInput", [KV_ROWS, F]),
         D.dram("new", "ExternalInput", [NEW_ROWS, F]),
         D.dram("kv", "ExternalOutput", list(out_shape)),
         D.tile("t", NEW_ROWS, F * 4)],
        [("entry", [
            D.insn("ld", "DMACopy", "SP", ins=[D.full("new", 1, NEW_ROWS * F)],
                   outs=[D.full("t", NEW_ROWS, F)]),
            D.insn("st", "DMACopy", "SP", ins=[D.full("t", NEW_ROWS, F)],
                   outs=[D.full("kv", 1, NEW_ROWS * F, offset=AT * F)])])])


def _kv_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"kv.must_alias_input": rng.standard_normal((KV_ROWS, F)).astype(np.float32),
            "new": rng.standard_normal((NEW_ROWS, F)).astype(np.float32)}


def _kv_reference(inputs):
    want = inputs["kv.must_alias_input"].copy()
    want[AT:AT + NEW_ROWS] = inputs["new"]
    return want


@pytest.mark.parametrize("prog", [_kv_birsim, lambda: _kv_birsim(sets_named=False), _kv_dump],
                         ids=["birsim", "birsim_locations", "compiler"])
def test_must_alias_pair_is_one_buffer(prog):
    inputs = _kv_inputs()
    sim = birsim.Simulator(prog(), checks="all")
    with warnings.catch_warnings():
        warnings.simplefilter("error", birsim.BirsimWarning)   # no "not fully written"
        out = sim.run(inputs)
    name = "kv" if "kv" in out else "cache_out"
    np.testing.assert_array_equal(out[name], _kv_reference(inputs))
    assert sim.findings == [] and sim.warnings == []
    out2 = sim.run(_kv_inputs(1))                 # a second run starts from its own input
    np.testing.assert_array_equal(out2[name], _kv_reference(_kv_inputs(1)))


def test_must_alias_strict_run_has_no_diagnostic():
    out = birsim.Simulator(_kv_birsim(), strict=True).run(_kv_inputs())
    np.testing.assert_array_equal(out["kv"], _kv_reference(_kv_inputs()))


def test_must_alias_in_a_module_list():
    inputs = _kv_inputs(2)
    sim = birsim.Simulator([_kv_dump(), _kv_dump()], checks=["uninitialized", "dead_writes"])
    out = sim.run(inputs)
    np.testing.assert_array_equal(out["kv"], _kv_reference(inputs))
    assert sim.findings == [] and sim.warnings == []
    for k in range(2):
        np.testing.assert_array_equal(sim.read("kv", core=k), out["kv"])


@pytest.mark.parametrize("kw", [{"dtype": "int32"}, {"shape": (KV_ROWS, F // 2)}])
def test_must_alias_mismatch_is_a_program_error_naming_both(kw):
    with pytest.raises(birsim.ProgramError) as e:
        birsim.load(_kv_birsim(**kw))
    assert "'kv'" in str(e.value) and "'kv.must_alias_input'" in str(e.value)


def test_must_alias_mismatch_compiler_spelling():
    with pytest.raises(birsim.ProgramError) as e:
        birsim.load(_kv_dump(out_shape=(KV_ROWS - 1, F)))
    assert "'kv'" in str(e.value) and "'kv.must_alias_input'" in str(e.value)


# ---- 4. a two-core CollectiveCompute Permute under the race checker ------------------------

@pytest.mark.parametrize("schedule", ["in_order", "round_robin", "random"])
@pytest.mark.parametrize("pairs", [[[0, 1], [1, 0]], [[0, 1]], [[1, 0]]])
def test_two_core_permute_has_no_false_race(schedule, pairs):
    xs = np.random.default_rng(3).standard_normal((4 * TC.P, TC.F)).astype(np.float32)
    prog = TC._perm("Permute", 2, src_target_pairs=pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)   # r of a rank no pair targets
        sim = birsim.Simulator(prog, cores=2, checks="races", schedule=schedule, seed=4)
        out = sim.run({"xs": xs})
    assert sim.findings == []
    parts, ys = xs.reshape(4, TC.P, TC.F), out["ys"].reshape(4, TC.P, TC.F)
    for s, t in pairs:
        np.testing.assert_array_equal(ys[t], parts[s])


def test_two_core_permute_unsynchronised_reader_is_still_a_race():
    """The store of r moved to another engine with no wait on the collective: a real RAW
    race on r on both cores."""
    xs = np.random.default_rng(3).standard_normal((4 * TC.P, TC.F)).astype(np.float32)
    prog = TC._perm("Permute", 2, src_target_pairs=[[0, 1], [1, 0]])
    body = prog["functions"][0]["blocks"][0]["instructions"]
    assert body[-1]["name"] == "st"
    body[-1]["engine"] = "Activation"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim = birsim.Simulator(prog, cores=2, checks="races")
        sim.run({"xs": xs})
    found = {(f.details["access"], f.details["first"]["instruction"],
              f.details["second"]["instruction"], f.details["tensor"]) for f in sim.findings}
    assert ("RAW", "cc", "st", "r") in found
