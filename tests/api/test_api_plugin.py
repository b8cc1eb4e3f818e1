"""birsim.testing's tolerance forms and reports; the pytest plugin (fixtures, report
section) in a real pytest subprocess, under pytest-xdist with two workers."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from birsim.testing import assert_sim_close, parse_tolerance


def test_compiler_tolerance_text_is_percent_relative():
    assert parse_tolerance("1.0,1e-5") == (0.01, 1e-5)
    assert parse_tolerance(" 2 , 0 ") == (0.02, 0.0)
    assert parse_tolerance((0.5, 1e-6)) == (0.005, 1e-6)            # a pair: percent too
    for bad in ("1.0", "a,b", "1,2,3", (1,), (-1, 0)):
        with pytest.raises(ValueError, match="tolerance"):
            parse_tolerance(bad)


def test_tolerance_form_accepts_inside_and_rejects_outside():
    e = np.linspace(1, 2, 12, dtype=np.float32).reshape(3, 4)
    assert_sim_close(e * np.float32(1.009), e, tolerance="1.0,0")      # 0.9% < 1%
    assert_sim_close(e + np.float32(1e-5), e, tolerance=(0.0, 2e-5))
    a = e.copy()
    a[1, 2] *= 1.02
    a[2, 0] = np.nan
    with pytest.raises(AssertionError) as info:
        assert_sim_close(a, e, tolerance="1.0,1e-5")
    msg = str(info.value)
    assert "2 of 12 elements differ" in msg and "rtol=0.01 atol=1e-05" in msg
    assert "at (1, 2)" in msg and "at (2, 0)" in msg
    d = float(a[1, 2]) - float(e[1, 2])
    assert "max abs difference %.6g" % d in msg
    assert "max rel difference %.6g" % (d / float(e[1, 2])) in msg
    with pytest.raises(AssertionError, match="1 of 1 elements"):
        assert_sim_close(np.float32([np.inf]), np.float32([1e30]), tolerance=(1, 1))


def test_kind_reports_also_give_the_largest_differences():
    e = np.ones((2, 3), np.float32)
    a = e.copy()
    a[0, 1] = 1.5
    with pytest.raises(AssertionError, match=r"max abs difference 0\.5, max rel "
                                             r"difference 0\.5[\s\S]*at \(0, 1\)"):
        assert_sim_close(a, e, kind="arith")


SWEEP = '''
import numpy as np, pytest
from birsim import build as B

def program(P, F):
    x = B.tensor("x", "ExternalInput", "float32", [P, F], "DRAM")
    y = B.tensor("y", "ExternalOutput", "float32", [P, F], "DRAM")
    t = B.tensor("t", "Internal", "float32", [P, F], "SB")
    return B.module([B.function("main", [x, y, t], [
        B.load_(B.whole(x), B.whole(t), sync=B.sync_info([], [B.sem_inc(1)])),
        B.tensor_scalar(B.whole(t), B.whole(t), "mult", 2.0, "add", 1.0,
                        sync=B.sync_info([B.sem_wait(1)], [B.sem_dec(1), B.sem_inc(2)])),
        B.save(B.whole(t), B.whole(y), sync=B.sync_info([B.sem_wait(2)], [B.sem_dec(2)])),
    ])])

@pytest.mark.parametrize("shape", [(4, 8), (16, 3)])
@pytest.mark.parametrize("schedule", ["in_order", "round_robin", "random"])
@pytest.mark.parametrize("seed", [0, 1])
def test_sweep(birsim_sim, birsim_assert_close, shape, schedule, seed):
    x = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    sim = birsim_sim(program(*shape), schedule=schedule, seed=seed)
    out = sim.run({"x": x})
    birsim_assert_close(out["y"], x * np.float32(2) + np.float32(1), rtol=1e-6)

def test_defaults_from_the_command_line(birsim_sim):
    sim = birsim_sim(program(4, 8))
    assert (sim.schedule, sim.seed, sim.strict) == ("random", 7, True)

def test_failure_shows_the_simulator(birsim_sim):
    sim = birsim_sim(program(4, 8))
    sim.run({"x": np.zeros((4, 8), np.float32)})
    assert False, "deliberate"
'''


def test_plugin_runs_a_sweep_on_two_xdist_workers(tmp_path):
    (tmp_path / "test_sweep.py").write_text(textwrap.dedent(SWEEP))
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
                        "-rA", "-v", "--birsim-schedule", "random", "--birsim-seed", "7",
                        "--birsim-strict", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = r.stdout
    assert "1 failed, 13 passed" in out, out[-3000:]
    assert "created: 2/2 workers" in out or "2 workers [14 items]" in out, out[:2000]
    assert "[gw0] [" in out and "[gw1] [" in out, out[-3000:]   # both workers ran tests
    # the failure report carries the simulator's section
    assert "birsim" in out and "schedule=random seed=7 cores=1" in out, out[-3000:]
    assert "'instructions': 3" in out
