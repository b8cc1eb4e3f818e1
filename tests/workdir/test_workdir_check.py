"""The compiler workflow end to end: ``python -m birsim check WORKDIR`` as a subprocess
on copies of examples/compiler_workdir (two cores) and on small work directories built
here, and ``birsim.load(WORKDIR)``."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import birsim
from birsim.workdir import DUMP_GLOB, compare, find_dumps

from dumps import dram, full, insn, module

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "compiler_workdir"
DUMP = "bir_debug.sg0000.after-lower_sync.before-lower_act.json"


def check(*args):
    r = subprocess.run([sys.executable, "-m", "birsim", "check", *map(str, args)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture
def work(tmp_path):
    d = tmp_path / "work"
    shutil.copytree(EXAMPLE, d)
    for f in d.rglob("*-birsim.npy"):
        f.unlink()
    return d


def _reference():
    """The example's expected output, computed from its input files with NumPy."""
    sg = EXAMPLE / "nc00" / "sg00"
    xT = np.load(sg / "value_xT.npy")
    w = np.load(sg / "value_w.npy").view(ml_dtypes.bfloat16).astype(np.float64)
    prod = xT.T.astype(np.float64) @ w
    # core 1 halves its columns in a lowered loop of 3 trips: the per-engine counters must
    # each count to 3 (one shared counter would end the loop after one trip: 0.5, not 0.125)
    return np.concatenate([np.maximum(prod[:, :32], 0), prod[:, 32:] * 0.125], axis=1)


def test_example_workdir_checks_and_writes_birsim_outputs(work):
    code, out, err = check(work)
    assert code == 0, out + err
    lines = out.splitlines()
    header = next(i for i, l in enumerate(lines) if l.startswith("output"))
    assert lines[header].split()[:3] == ["output", "shape", "max"]
    row = lines[header + 1].split()
    assert row[0] == "out" and row[-1] == "PASS" and "0 / 1024" in lines[header + 1]
    assert "2 core(s)" in out
    result = np.load(work / "nc00" / "sg00" / "value_out-birsim.npy")
    np.testing.assert_allclose(result, _reference(), rtol=1e-5, atol=1e-5)
    assert not (work / "nc01" / "sg00" / "value_out-birsim.npy").exists()


def test_the_example_cores_run_different_programs():
    mods = birsim.load(EXAMPLE)
    assert [m.core for m in mods] == [0, 1]
    ops = [{int(o) for o in m.tables["insns"]["op"][
        [int(m.tables["funcs"]["prog"][int(f)]) == m.core for f in m.tables["insns"]["func"]]]}
        for m in mods]
    assert int(birsim.ops.Op.CompareAndBranch) in ops[1] - ops[0]
    assert int(birsim.ops.Op.TensorScalar) in ops[1] - ops[0]


def test_golden_mismatch_exits_1_with_the_table(work):
    g = work / "nc00" / "sg00" / "value_out.npy"
    golden = np.load(g)
    golden[3, 40] += 1.0
    golden[5, 2] = np.nan
    np.save(g, golden)
    code, out, err = check(work)
    assert code == 1, out + err
    row = next(l for l in out.splitlines() if l.startswith("out "))
    assert "2 / 1024" in row and row.split()[-1] == "FAIL"
    assert "MISMATCH: out" in out
    # a tolerance wide enough for the +1 (100% of it) still fails on the NaN
    code, out, _ = check(work, "--tolerance", "0,2")
    assert code == 1 and "1 / 1024" in out


def test_tolerance_follows_the_compiler_convention(work):
    g = work / "nc00" / "sg00" / "value_out.npy"
    golden = np.load(g).astype(np.float64)
    i = np.unravel_index(np.argmax(np.abs(golden)), golden.shape)
    golden[i] *= 1.02                        # 2% off: |a - g| ~ 0.0196 |g|
    np.save(g, golden.astype(np.float32))
    assert check(work, "--tolerance", "1,0")[0] == 1          # REL is in percent
    assert check(work, "--tolerance", "3,0")[0] == 0
    code, _, err = check(work, "--tolerance", "bad")
    assert code == 2 and "REL,ABS" in err


def test_compare_counts_and_errors():
    a = np.array([1.0, 2.0, np.nan, np.inf, 0.0], np.float32)
    g = np.array([1.0, 2.1, np.nan, np.inf, 1e-6], np.float32)
    r = compare("o", a, g, 0, 0.01)
    assert r.mismatches == 1 and abs(r.max_abs - 0.1) < 1e-6
    assert abs(r.max_rel - 1.0) < 1e-6                 # the 1e-6 golden vs 0
    r = compare("o", a, g, 5, 0)                      # 5% of 2.1 covers 0.1
    assert r.mismatches == 1                          # 0 vs 1e-6 still off


def test_missing_input_names_the_file_it_looked_for(work):
    for core in ("nc00", "nc01"):
        (work / core / "sg00" / "value_w.npy").unlink()
    code, out, err = check(work)
    assert code == 2                                  # could not run
    assert "missing input 'w'" in err
    assert str(work / "nc00" / "sg00" / "value_w.npy") in err
    assert "WorkdirError" in err


def test_an_input_of_one_core_only_is_found_in_another_cores_directory(work):
    (work / "nc01" / "sg00" / "value_xT.npy").unlink()
    assert check(work)[0] == 0


def test_dump_selection_out_dir_and_a_dump_file(work, tmp_path):
    sg = work / "nc00" / "sg00"
    shutil.copy(sg / DUMP, sg / "bir_debug.other.after-lower_sync.json")
    code, _, err = check(work)
    assert code == 2 and "2 files match" in err and "--dump" in err
    (work / "nc01" / "sg00" / DUMP).rename(work / "nc01" / "sg00" / "mine.json")
    (sg / DUMP).rename(sg / "mine.json")
    out_dir = tmp_path / "results"
    code, out, err = check(work, "--dump", "mine.json", "--out", out_dir)
    assert code == 0, out + err
    np.testing.assert_allclose(np.load(out_dir / "value_out-birsim.npy"), _reference(),
                               rtol=1e-5, atol=1e-5)


def _one_core(tmp_path, p=4, f=8):
    """sg00/ holding a one-core dump: acc := acc + x, where acc is an output that
    aliases an input (acc.must_alias_input holds its initial value)."""
    sg = tmp_path / "one" / "sg00"
    sg.mkdir(parents=True)
    mod = module([dram("x", "ExternalInput", [p, f]),
                  dram("acc.must_alias_input", "ExternalInput", [p, f]),
                  dram("acc", "ExternalOutput", [p, f])],
                 [("b0", [insn("add", "TensorTensor", "DVE",
                               ins=[full("acc.must_alias_input", p, f), full("x", p, f)],
                               outs=[full("acc", p, f)], op="add")])])
    (sg / DUMP).write_text(json.dumps(mod))
    x = np.arange(p * f, dtype=np.float32).reshape(p, f)
    init = np.full((p, f), 100, np.float32)
    np.save(sg / "value_x.npy", x)
    np.save(sg / "value_acc.must_alias_input.npy", init)
    np.save(sg / "value_acc.npy", init + x)
    return sg.parent, x, init


def test_one_core_work_directory_and_must_alias_input(tmp_path):
    work, x, init = _one_core(tmp_path)
    code, out, err = check(work)
    assert code == 0, out + err
    np.testing.assert_array_equal(np.load(work / "sg00" / "value_acc-birsim.npy"), init + x)
    mods = birsim.load(work)
    assert isinstance(mods, list) and len(mods) == 1
    # the dump file itself is a work directory of one core (inputs beside it)
    code, out, err = check(work / "sg00" / DUMP)
    assert code == 0, out + err
    # without the aliased input's file the run cannot start
    (work / "sg00" / "value_acc.must_alias_input.npy").unlink()
    assert check(work)[0] == 2


def test_raw_bit_inputs_uint16_read_as_bf16(work):
    for core in ("nc00", "nc01"):
        p = work / core / "sg00" / "value_w.npy"
        np.save(p, np.load(p).view(np.uint16))
    assert check(work)[0] == 0


def test_colz_or_non_json_dump_says_what_birsim_reads(tmp_path):
    sg = tmp_path / "w" / "sg00"
    sg.mkdir(parents=True)
    (sg / "kernel.colz").write_bytes(b"\x28\xb5\x2f\xfd binary")
    code, _, err = check(tmp_path / "w")
    assert code == 2
    assert "NKI_USE_COLZ=0" in err and "--internal-print-after=lower_sync" in err and ".colz" in err
    with pytest.raises(birsim.ProgramError, match="--internal-print-after=lower_sync"):
        birsim.load(str(sg / "kernel.colz"))
    bad = sg / "bir_debug.x.after-lower_sync.json"
    bad.write_bytes(b"\x00\x01binary")
    code, _, err = check(tmp_path / "w")
    assert code == 2 and "not a BIR-JSON file" in err and "JSON dump" in err


def test_not_a_work_directory(tmp_path):
    code, _, err = check(tmp_path)
    assert code == 2 and "neither ncNN/sg00/" in err
    (tmp_path / "nc00" / "sg00").mkdir(parents=True)
    (tmp_path / "nc02" / "sg00").mkdir(parents=True)
    with pytest.raises(birsim.WorkdirError, match="missing nc01"):
        find_dumps(tmp_path)
    assert DUMP_GLOB == "bir_debug.*after-lower_sync*.json"
