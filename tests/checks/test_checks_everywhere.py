"""The checkers are reachable from every entry point (issue 22 item 7): ``birsim run
--checks``, ``birsim check --checks`` (work directories; findings listed after the
comparison table, exit status 1 -- docs/cli.md) and the pytest plugin's
``--birsim-checks``; here with the new ``uninit_regs`` check."""

import json
import subprocess
import sys
import warnings

import numpy as np

import birsim
from birsim import build as B

from test_timing_trace_cli import _workdir, cli

X = np.arange(8, dtype=np.float32).reshape(2, 4)


def _reg_program(dve_reads=True):
    """Pool sets register n; DVE (after Pool, by a semaphore) computes m := n + 0 from its
    own register file, which nothing on DVE wrote (dve_reads=False: Pool does it)."""
    a = B.tensor("a", "ExternalInput", "float32", [2, 4], "DRAM")
    o = B.tensor("o", "ExternalOutput", "float32", [2, 4], "DRAM")
    return B.module([B.function("main", [a, o, B.register("n", "int32"),
                                         B.register("m", "int32")], [B.block(
        "b0",
        B.register_move(B.reg("n"), B.imm(2, "int32"), engine="Pool", name="set_n",
                        sync=B.sync_info([], [B.sem_inc(1)])),
        B.register_alu(B.reg("m"), B.reg("n"), B.imm(0, "int32"), "add", name="read_n",
                       engine="DVE" if dve_reads else "Pool",
                       sync=B.sync_info([B.sem_wait(1)], [B.sem_dec(1)])),
        B.dma_copy(B.whole(a), B.whole(o), name="cp"))])])


def test_the_program_and_its_finding_in_python():
    sim = birsim.Simulator(_reg_program(), checks="all")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        out = sim.run({"a": X})
    np.testing.assert_array_equal(out["o"], X)
    assert [(f.kind, f.details["first"]["instruction"]) for f in sim.findings] == \
        [("uninit_regs", "read_n")]
    good = birsim.Simulator(_reg_program(dve_reads=False), checks="all")
    good.run({"a": X})
    assert good.findings == []


def test_run_checks_uninit_regs(tmp_path):
    np.savez(tmp_path / "in.npz", a=X)
    B.to_json(_reg_program(), tmp_path / "p.json")
    r = cli("run", tmp_path / "p.json", "--inputs", tmp_path / "in.npz", "--checks",
            "uninit_regs")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "finding: uninit_regs: uninitialized register read:" in r.stdout
    assert "instruction 'read_n'" in r.stdout and "checks (uninit_regs): 1 finding(s)" in r.stdout
    r = cli("run", tmp_path / "p.json", "--inputs", tmp_path / "in.npz")
    assert r.returncode == 0 and "finding" not in r.stdout, r.stdout + r.stderr


def test_check_workdir_checks_uninit_regs(tmp_path):
    bad = _workdir(tmp_path / "bad", _reg_program(), {"a": X}, {"o": X})
    r = cli("check", bad, "--checks", "all")
    assert r.returncode == 1, r.stdout + r.stderr
    table, _, after = r.stdout.partition("finding: ")
    assert "PASS (exact)" in table                       # the comparison table first
    assert after.startswith("uninit_regs: uninitialized register read")
    assert "uninit_regs): 1 finding(s)" in after
    assert "FINDINGS: --checks found 1 problem(s); exit status 1" in r.stdout
    r = cli("check", bad)
    assert r.returncode == 0, r.stdout + r.stderr                 # numbers match
    good = _workdir(tmp_path / "good", _reg_program(False), {"a": X}, {"o": X})
    r = cli("check", good, "--checks", "uninit_regs")
    assert r.returncode == 0 and "no finding(s)" in r.stdout, r.stdout + r.stderr


TEST = """
import json, numpy as np, birsim
from birsim import build as B

def test_uses_fixture(birsim_sim):
    sim = birsim_sim(B.load(json.loads(%r)))
    sim.run({"a": np.zeros((2, 4), np.float32)})
    assert [f.kind for f in sim.findings] == %r
"""


def test_pytest_option_birsim_checks_uninit_regs(tmp_path):
    text = json.dumps(_reg_program())
    (tmp_path / "test_a.py").write_text(TEST % (text, ["uninit_regs"]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        "-W", "ignore::birsim.BirsimWarning", "--birsim-checks",
                        "uninit_regs", str(tmp_path)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (tmp_path / "test_a.py").write_text(TEST % (text, []))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        str(tmp_path)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
