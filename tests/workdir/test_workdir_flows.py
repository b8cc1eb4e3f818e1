"""``birsim check`` on work directories in both of the compiler's flows (standard:
``value_<name>.npy``; NKI's baremetal: ``<name>.npy``, ``sg00/bir.json``), with must-alias
pairs, BIRSim's golden rules and the exit statuses (0 pass, 1 mismatch, 2 could not run,
3 nothing compared). Every case runs the real command in a subprocess; the expected
results are computed here with NumPy."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import birsim

from birsim.workdir import DUMP_GLOB  # noqa: F401  (the module imports cleanly)

from dumps import dram, full, insn, module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMP = "bir_debug.sg0000.after-lower_sync.before-lower_act.json"
P, F = 4, 8                     # x, y: [P, F]; kv: [2P, F], rows P/2 .. P/2+P-1 written
ROW0 = P // 2


def check(*args):
    r = subprocess.run([sys.executable, "-m", "birsim", "check", *map(str, args)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    return r.returncode, r.stdout, r.stderr


def kernel(partial=False):
    """y := x + x; kv[ROW0:ROW0+P] := x, in place (kv's other rows keep the input's
    values); with ``partial``, z[0:2] := x[0:2] and z's other rows are never written. One
    engine, program order: race-free."""
    allocs = [dram("x", "ExternalInput", [P, F]),
              dram("kv.must_alias_input", "ExternalInput", [2 * P, F]),
              dram("y", "ExternalOutput", [P, F]),
              dram("kv", "ExternalOutput", [2 * P, F])]
    body = [insn("add", "TensorTensor", "DVE", ins=[full("x", P, F), full("x", P, F)],
                 outs=[full("y", P, F)], op="add"),
            insn("upd", "TensorCopy", "DVE", ins=[full("x", P, F)],
                 outs=[full("kv", P, F, offset=ROW0 * F)])]
    if partial:
        allocs.append(dram("z", "ExternalOutput", [P, F]))
        body.append(insn("half", "TensorCopy", "DVE", ins=[full("x", 2, F)],
                         outs=[full("z", 2, F)]))
    return module(allocs, [("b0", body)])


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((P, F)).astype(np.float32)
    kv0 = rng.standard_normal((2 * P, F)).astype(np.float32)
    kv = kv0.copy()
    kv[ROW0:ROW0 + P] = x
    return x, kv0, x + x, kv


def write_workdir(root, flow, cores=1, goldens=True, partial=False):
    """A work directory of ``cores`` cores (each running the same kernel) in ``flow``."""
    x, kv0, y, kv = data()
    pre = "value_" if flow == "standard" else ""
    prog = DUMP if flow == "standard" else "bir.json"
    dirs = [root / "sg00"] if cores == 1 else [root / ("nc%02d" % k) / "sg00"
                                               for k in range(cores)]
    for d in dirs:
        d.mkdir(parents=True)
        (d / prog).write_text(json.dumps(kernel(partial)))
        np.save(d / (pre + "x.npy"), x)
        np.save(d / (pre + "kv.must_alias_input.npy"), kv0)
        if goldens:
            np.save(d / (pre + "y.npy"), y)
            np.save(d / (pre + "kv.npy"), kv)
            if partial:
                z = np.zeros((P, F), np.float32)
                z[:2] = x[:2]
                np.save(d / (pre + "z.npy"), z)
    return dirs[0], (x, kv0, y, kv)


@pytest.mark.parametrize("flow", ["standard", "baremetal"])
@pytest.mark.parametrize("cores", [1, 2])
def test_both_flows_run_check_and_write_results_under_core_0(tmp_path, flow, cores):
    d0, (x, kv0, y, kv) = write_workdir(tmp_path, flow, cores)
    code, out, err = check(tmp_path)
    assert code == 0, out + err
    assert "%s flow" % flow in out and "%d core(s)" % cores in out
    pre = "value_" if flow == "standard" else ""
    np.testing.assert_array_equal(np.load(d0 / (pre + "y-birsim.npy")), y)
    # the in-place output: rows the kernel does not write keep the input's values
    np.testing.assert_array_equal(np.load(d0 / (pre + "kv-birsim.npy")), kv)
    assert "never written" not in out
    if cores == 2:
        assert not list((tmp_path / "nc01" / "sg00").glob("*-birsim.npy"))
    other = "" if flow == "standard" else "value_"
    assert not list(d0.glob(other + "y-birsim.npy")) or other == ""


def test_baremetal_names_its_results_without_the_prefix(tmp_path):
    d0, _ = write_workdir(tmp_path, "baremetal")
    assert check(tmp_path)[0] == 0
    assert sorted(p.name for p in d0.glob("*-birsim.npy")) == ["kv-birsim.npy", "y-birsim.npy"]


@pytest.mark.parametrize("flow", ["standard", "baremetal"])
def test_no_golden_exits_3_and_still_writes_results(tmp_path, flow):
    d0, (x, kv0, y, kv) = write_workdir(tmp_path, flow, goldens=False)
    code, out, err = check(tmp_path)
    assert code == 3, out + err
    assert "NOTHING COMPARED" in out and "OK" not in out.split("NOTHING")[1]
    pre = "value_" if flow == "standard" else ""
    np.testing.assert_array_equal(np.load(d0 / (pre + "y-birsim.npy")), y)


def test_mismatch_exits_1_and_a_dtype_or_shape_golden_fails_naming_both(tmp_path):
    d0, (x, kv0, y, kv) = write_workdir(tmp_path, "standard")
    bad = y.copy()
    bad[1, 3] += 1.0
    np.save(d0 / "value_y.npy", bad)
    code, out, _ = check(tmp_path)
    assert code == 1 and "MISMATCH: y" in out
    row = next(l for l in out.splitlines() if l.startswith("y "))
    assert "1 / 32" in row and "FAIL" in row
    # the same values in float64: BIRSim's golden loader refuses another dtype
    np.save(d0 / "value_y.npy", y.astype(np.float64))
    code, out, _ = check(tmp_path)
    row = next(l for l in out.splitlines() if l.startswith("y "))
    assert code == 1 and "FAIL" in row and "float64" in row and "float32" in row
    np.save(d0 / "value_y.npy", y.reshape(2, P * F // 2))
    code, out, _ = check(tmp_path)
    row = next(l for l in out.splitlines() if l.startswith("y "))
    assert code == 1 and "[2, 16]" in row and "[4, 8]" in row


def test_exact_then_allclose_with_rel_in_percent(tmp_path):
    d0, (x, kv0, y, kv) = write_workdir(tmp_path, "standard")
    code, out, _ = check(tmp_path)
    assert code == 0 and "PASS (exact)" in out
    g = y.copy()
    i = np.unravel_index(np.argmax(np.abs(g)), g.shape)
    g[i] *= 1.02                                    # 2 % off
    np.save(d0 / "value_y.npy", g)
    assert check(tmp_path, "--tolerance", "1,0")[0] == 1
    code, out, _ = check(tmp_path, "--tolerance", "3,0")
    assert code == 0 and "(exact)" not in next(l for l in out.splitlines() if l.startswith("y "))


def test_never_written_elements_hold_birsims_fill_and_count(tmp_path):
    d0, (x, kv0, y, kv) = write_workdir(tmp_path, "standard", partial=True)
    code, out, err = check(tmp_path)
    assert code == 1, out + err              # the zero golden no longer matches the fill
    row = next(l for l in out.splitlines() if l.startswith("z "))
    assert "16 / 32" in row and "16 never written" in row
    assert "was not fully written" in out
    z = np.load(d0 / "value_z-birsim.npy")
    np.testing.assert_array_equal(z[:2], x[:2])
    assert (z[2:].view(np.uint32) == 0xFFFFFFFF).all()      # 0xFF bytes: NaN


def test_must_alias_without_its_input_file_is_a_missing_input(tmp_path):
    d0, _ = write_workdir(tmp_path, "standard")
    (d0 / "value_kv.must_alias_input.npy").unlink()
    code, _, err = check(tmp_path)
    assert code == 2
    assert "missing input 'kv.must_alias_input'" in err
    assert "value_kv.must_alias_input.npy" in err
    # a file without .npy is no flow's name: it is not read
    with open(d0 / "kv.must_alias_input", "wb") as fh:
        np.save(fh, np.zeros((2 * P, F), np.float32))
    assert check(tmp_path)[0] == 2


def test_a_tensor_file_found_by_its_locations_name_or_its_sets(tmp_path):
    """Sets named otherwise than their locations: the file may use either name; files
    under both are ambiguous and listed."""
    d0, (x, kv0, y, kv) = write_workdir(tmp_path, "standard")
    mod = json.loads((d0 / DUMP).read_text())
    for a in mod["functions"][0]["allocations"]:
        a["name"] = a["memorylocations"][0]["name"] + "_set"
    (d0 / DUMP).write_text(json.dumps(mod))
    assert check(tmp_path)[0] == 0                        # files under location names
    os.rename(d0 / "value_x.npy", d0 / "value_x_set.npy")
    os.rename(d0 / "value_y.npy", d0 / "value_y_set.npy")
    code, out, err = check(tmp_path)
    assert code == 0, out + err                           # ... or under set names
    assert (d0 / "value_y_set-birsim.npy").exists()       # results keep the golden's stem
    np.save(d0 / "value_x.npy", x)
    code, _, err = check(tmp_path)
    assert code == 2 and "ambiguous" in err
    assert "value_x.npy" in err and "value_x_set.npy" in err


def test_pickled_arguments_are_ignored_and_stray_goldens_named(tmp_path):
    d0, _ = write_workdir(tmp_path, "standard")
    (d0 / "value_scale").write_bytes(pickle.dumps(3))    # nki-library's non-array argument
    np.save(d0 / "value_out0.npy", np.zeros(3, np.float32))
    code, out, err = check(tmp_path)
    assert code == 0, out + err
    assert "value_out0.npy looks like a golden" in out
    assert "value_scale" not in out


def test_flows_mixed_or_chosen(tmp_path):
    d0, _ = write_workdir(tmp_path, "standard")
    os.rename(d0 / "value_x.npy", d0 / "x.npy")
    code, _, err = check(tmp_path)
    assert code == 2 and "mix the two flows" in err and "--flow" in err
    code, _, err = check(tmp_path, "--flow", "standard")
    assert code == 2 and "missing input 'x'" in err


def test_other_subgraphs_and_colz_are_refused_with_the_way_out(tmp_path):
    d0, _ = write_workdir(tmp_path / "a", "standard")
    (tmp_path / "a" / "sg01").mkdir()
    (tmp_path / "a" / "sg01" / "bir.json").write_text("{}")
    code, _, err = check(tmp_path / "a")
    assert code == 2 and "sg01" in err and "sg00 only" in err
    sg = tmp_path / "b" / "sg00"
    sg.mkdir(parents=True)
    (sg / "bir.colz").write_bytes(b"\x28\xb5\x2f\xfd")
    code, _, err = check(tmp_path / "b")
    assert code == 2 and "NKI_USE_COLZ=0" in err


def test_results_replace_a_symlink_and_never_write_through_it(tmp_path):
    d0, (x, kv0, y, kv) = write_workdir(tmp_path / "w", "standard")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, d0 / "value_y-birsim.npy")
    assert check(tmp_path / "w")[0] == 0
    assert victim.read_text() == "keep me"
    assert not os.path.islink(d0 / "value_y-birsim.npy")
    np.testing.assert_array_equal(np.load(d0 / "value_y-birsim.npy"), y)


def test_a_fifo_input_is_refused_by_name_not_opened(tmp_path):
    d0, _ = write_workdir(tmp_path, "standard")
    (d0 / "value_x.npy").unlink()
    os.mkfifo(d0 / "value_x.npy")
    code, _, err = check(tmp_path)                        # would block if opened
    assert code == 2 and "not a regular file" in err


def test_version():
    r = subprocess.run([sys.executable, "-m", "birsim", "--version"], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    import birsim
    assert r.returncode == 0 and r.stdout.strip() == "birsim " + birsim.__version__


def test_a_tensor_file_found_by_its_debug_tensor_name(tmp_path):
    """A set with a `name`, a location of another name and `debug.tensor_name` a third:
    the file may use the debug name (what NKI names its files after)."""
    d0, (x, kv0, y, kv) = write_workdir(tmp_path, "standard")
    mod = json.loads((d0 / DUMP).read_text())
    for a in mod["functions"][0]["allocations"]:
        if a["debug"]["tensor_name"] == "x":
            a["name"] = "x_set"
            a["memorylocations"][0]["name"] = "x_loc"
            a["debug"]["tensor_name"] = "xin"
            for blk in mod["functions"][0]["blocks"]:
                for i in blk["instructions"]:
                    for o in i["ins"]:
                        if o.get("memref") == "x":
                            o["memref"] = "x_loc"
    (d0 / DUMP).write_text(json.dumps(mod))
    os.rename(d0 / "value_x.npy", d0 / "value_xin.npy")
    code, out, err = check(tmp_path)
    assert code == 0, out + err


@pytest.mark.parametrize("example", ["compiler_workdir", "kv_cache_workdir"])
def test_example_workdirs_are_race_free_and_schedule_independent(example):
    """The shipped work directories (written by examples/build_workdir.py) run without a
    finding under checks="all" and give bit-identical outputs under every schedule."""
    import birsim
    from birsim.workdir import Workdir
    wd = Workdir(os.path.join(ROOT, "examples", example))
    runs = [("in_order", 0), ("round_robin", 0)] + [("random", s) for s in range(20)]
    first = None
    for schedule, seed in runs:
        sim = birsim.Simulator(wd.modules, checks="all", schedule=schedule, seed=seed)
        out = sim.run(wd.inputs)
        assert sim.findings == [], (schedule, seed, sim.findings)
        if first is None:
            first = out
        for k in first:
            assert first[k].tobytes() == out[k].tobytes(), (schedule, seed, k)


@pytest.mark.parametrize("example", ["compiler_workdir", "kv_cache_workdir"])
def test_the_readmes_check_commands_pass_on_the_examples(tmp_path, example):
    """`birsim check examples/<example>` (README) passes: exit status 0, one output compared."""
    import shutil
    shutil.copytree(os.path.join(ROOT, "examples", example), tmp_path / example)
    code, out, err = check(tmp_path / example)
    assert code == 0, out + err
    assert "OK: 1 of 1 output(s) compared" in out


def test_memory_limit_counts_the_npy_arrays_check_holds(tmp_path):
    """check(memory_limit=) counts the arrays it holds besides the simulator (inputs,
    results, the largest golden): the files are refused before one is read, and the run
    gets only what they leave."""
    from birsim import simulator as S
    from birsim.workdir import check as check_api
    write_workdir(tmp_path, "standard")
    mods = birsim.load(str(tmp_path))
    committed = sum(S._declared_bytes(m, 1, None) for m in mods) + S._tables_bytes(mods)
    tensor = P * F * 4
    files = 2 * tensor + 2 * 2 * tensor + 2 * tensor  # x, kv in; y, kv out; kv golden
    assert check_api(tmp_path, memory_limit=committed + files).status == 0
    with pytest.raises(birsim.OutOfMemoryError, match="declares"):
        check_api(tmp_path, memory_limit=committed + files - 1)
    (tmp_path / "sg00" / "value_x.npy").write_bytes(b"not an array")
    with pytest.raises(birsim.OutOfMemoryError, match="largest golden take %d bytes" % files):
        check_api(tmp_path, memory_limit=files - 1)


def test_memory_limit_on_the_command_line(tmp_path):
    write_workdir(tmp_path, "baremetal")
    code, out, err = check(tmp_path, "--memory-limit", "1K")
    assert code == 2 and "OutOfMemoryError" in err and "above memory_limit=" in err, out + err
    code, out, err = check(tmp_path, "--memory-limit", "1G")
    assert code == 0, out + err
    code, out, err = check(tmp_path, "--memory-limit", "lots")
    assert code == 2 and "expected bytes such as 512M" in err
