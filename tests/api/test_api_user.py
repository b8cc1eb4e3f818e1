"""The user-facing API: one tolerance convention (rtol/atol fractions, the compiler's
percent form under ``tolerance=`` only, one parser, one element-wise comparison shared
with ``birsim check``), nki-library's validation modes, and the typed API (stubtest of the
C extension, ``mypy --strict`` on user code, ``run()`` never None)."""

import argparse
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import birsim
from birsim import build as B
from birsim import testing, workdir
from birsim.testing import assert_sim_close, parse_tolerance

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _values(seed=0, n=200):
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(n).astype(np.float32) * np.float32(10)
    return e


# {=== item 4: one tolerance convention ===}

def test_rtol_is_a_fraction_and_tolerance_is_the_compilers_percent():
    e = _values()
    a = (e.astype(np.float64) * 1.009).astype(np.float32)      # 0.9 % off everywhere
    rel = np.abs(a.astype(np.float64) - e) / np.abs(e.astype(np.float64))
    assert rel.max() < 0.0095 and rel.max() > 0.0085            # the data, checked by NumPy
    assert_sim_close(a, e, rtol=0.0095)
    assert_sim_close(a, e, 0.0095)                               # positional, as NumPy's
    assert_sim_close(a, e, tolerance="0.95,0")
    assert_sim_close(a, e, tolerance=(0.95, 0.0))                # a pair is percent too
    for kw in (dict(rtol=0.0085), dict(tolerance="0.85,0"), dict(tolerance=(0.85, 0))):
        with pytest.raises(AssertionError, match="elements differ"):
            assert_sim_close(a, e, **kw)
    # a pair that read as fractions would have passed: (0.85, 0) is 0.85 %, not 85 %
    with pytest.raises(AssertionError):
        assert_sim_close(a, e, tolerance=(0.5, 0))


def test_parse_tolerance_is_the_one_reading_of_rel_abs():
    assert parse_tolerance("1,1e-5") == (0.01, 1e-5)
    assert parse_tolerance((2, 0)) == (0.02, 0.0)
    for bad in ("nan,0", "1,inf", "-1,0", (0.1, -1), "1", (1, 2, 3)):
        with pytest.raises(ValueError, match="tolerance"):
            parse_tolerance(bad)


def test_one_tolerance_source_at_a_time():
    e = _values()
    for kw in (dict(rtol=0.1, tolerance="1,0"), dict(rtol=0.1, kind="exact"),
               dict(tolerance="1,0", kind="arith")):
        with pytest.raises(ValueError, match="give one of"):
            assert_sim_close(e, e, **kw)
    for kw in (dict(rtol=0.1, mode="range"), dict(rtol=0.1, min_pass_rate=1.5),
               dict(rtol=-0.1)):
        with pytest.raises(ValueError):
            assert_sim_close(e, e, **kw)


def test_the_cli_reads_tolerance_with_the_same_parser(monkeypatch):
    from birsim import __main__ as cli
    seen = []
    real = testing.parse_tolerance
    monkeypatch.setattr(testing, "parse_tolerance", lambda t: seen.append(t) or real(t))
    assert cli._tolerance("2,1e-3") == "2,1e-3"
    assert seen == ["2,1e-3"]
    with pytest.raises(argparse.ArgumentTypeError, match="finite"):
        cli._tolerance("nan,0")                      # was accepted by a second parser


def _reference_close(a, g, rtol, atol):
    """Independent: the rule written out (NaN matches NaN, inf only the same inf)."""
    a = a.astype(np.float64)
    g = g.astype(np.float64)
    out = np.zeros(a.shape, bool)
    for i in range(a.size):
        x, y = a.flat[i], g.flat[i]
        if np.isnan(x) or np.isnan(y):
            out.flat[i] = np.isnan(x) and np.isnan(y)
        elif np.isinf(x) or np.isinf(y):
            out.flat[i] = x == y
        else:
            out.flat[i] = abs(x - y) <= atol + rtol * abs(y)
    return out


def test_check_and_assert_sim_close_share_one_elementwise_comparison(monkeypatch):
    rng = np.random.default_rng(3)
    g = rng.standard_normal(64).astype(np.float32)
    a = g * (1 + rng.uniform(-0.03, 0.03, 64)).astype(np.float32)
    a[:4] = [np.nan, np.inf, -np.inf, np.inf]
    g[:4] = [np.nan, np.inf, np.inf, 1e30]
    ref = _reference_close(a, g, 0.02, 1e-3)
    assert 0 < ref.sum() < 64
    np.testing.assert_array_equal(testing.isclose(a, g, 0.02, 1e-3), ref)
    r = workdir.compare("o", a, g, 2.0, 1e-3)                     # REL in percent
    assert r.mismatches == int((~ref).sum()) and not r.exact
    with pytest.raises(AssertionError, match="%d of 64 elements differ" % (~ref).sum()):
        assert_sim_close(a, g, rtol=0.02, atol=1e-3)
    calls = []
    real = testing.isclose
    monkeypatch.setattr(testing, "isclose", lambda *a, **k: calls.append(1) or real(*a, **k))
    workdir.compare("o", a, g, 2.0, 1e-3)
    with pytest.raises(AssertionError):
        assert_sim_close(a, g, rtol=0.02, atol=1e-3)
    with pytest.raises(AssertionError):
        assert_sim_close(a, g, kind="arith")
    assert len(calls) == 3


def test_max_mode_is_relative_to_the_largest_golden():
    e = np.array([1000.0, 1.0, -0.001, 5.0], np.float32)
    a = e + np.array([0.5, 0.9, 0.9, -0.2], np.float32)
    # |a - e| <= atol + rtol * max|e| = 1e-3 * 1000 = 1.0 for each element
    bound = 1e-3 * np.abs(e.astype(np.float64)).max()
    assert (np.abs(a.astype(np.float64) - e) <= bound).all()
    assert_sim_close(a, e, rtol=1e-3, mode="max")
    assert_sim_close(a, e, tolerance="0.1,0", mode="max")
    with pytest.raises(AssertionError, match=r"3 of 4 elements differ in rtol=0\.001 "):
        assert_sim_close(a, e, rtol=1e-3)                         # elementwise: 3 fail
    with pytest.raises(AssertionError, match="2 of 4 .*range-relative"):
        assert_sim_close(a, e, rtol=0.85e-3, mode="max")          # 0.9 > 0.85, twice
    inf_e = e.copy()
    inf_e[0] = np.inf                                 # the max is over the finite values: 5
    inf_a = np.where(np.isinf(inf_e), inf_e, a)
    assert_sim_close(inf_a, inf_e, rtol=0.9 / 5, mode="max")
    with pytest.raises(AssertionError, match="2 of 4"):
        assert_sim_close(inf_a, inf_e, rtol=0.85 / 5, mode="max")


def test_min_pass_rate_is_the_fraction_that_must_pass():
    e = _values(n=100)
    a = e.copy()
    a[[5, 50, 77]] += np.float32(1)
    npass = int(np.isclose(a, e, rtol=1e-6, atol=0).sum())
    assert npass == 97
    assert_sim_close(a, e, rtol=1e-6, min_pass_rate=0.97)
    assert_sim_close(a, e, kind="arith", min_pass_rate=0.95)
    with pytest.raises(AssertionError, match=r"pass rate 0\.97 < min_pass_rate 0\.98"):
        assert_sim_close(a, e, rtol=1e-6, min_pass_rate=0.98)
    with pytest.raises(AssertionError, match="3 of 100"):
        assert_sim_close(a, e, rtol=1e-6)                         # default: every element
    i = np.zeros(10, np.int32)
    j = i.copy()
    j[0] = 1
    assert_sim_close(j, i, min_pass_rate=0.9)                     # integers exact, 9 of 10
    with pytest.raises(AssertionError):
        assert_sim_close(j, i, min_pass_rate=0.95)


def test_failure_report_has_a_histogram_of_error_over_tolerance():
    e = np.ones(20, np.float64)
    a = e.copy()
    # errors in units of the tolerance (rtol 0.01 * 1 + atol 0): 0.5, 5, 50, 50, 5e3, 1e9
    units = {0: 0.5, 1: 5, 2: 50, 3: 50, 4: 5e3, 5: 1e9}
    for k, u in units.items():
        a[k] += 0.01 * u
    a[6] = np.nan
    ratio = np.abs(a - e) / 0.01
    edges = [-1, 1, 10, 100, 1e3, 1e4, np.inf]
    counts = np.histogram(ratio[np.isfinite(ratio)], bins=edges)[0]
    with pytest.raises(AssertionError) as info:
        assert_sim_close(a, e, rtol=0.01)
    line = [ln for ln in str(info.value).splitlines() if ln.startswith("|error| / tolerance")]
    assert len(line) == 1, str(info.value)
    want = ["<=1: %d" % counts[0], "(1, 10]: %d" % counts[1], "(10, 100]: %d" % counts[2],
            "(100, 1000]: %d" % counts[3], "(1000, 10000]: %d" % counts[4],
            ">10000: %d" % counts[5], "NaN/inf mismatch: 1"]
    for w in want:
        assert w in line[0], (w, line[0])


def test_testing_is_an_attribute_after_import_birsim():
    code = ("import sys, birsim; assert 'birsim.testing' in sys.modules; "
            "print(birsim.testing.assert_sim_close.__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=os.path.dirname(ROOT), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "assert_sim_close", r.stderr


# {=== item 5: a typed API ===}

def _mypy_env(tmp_path):
    cfg = tmp_path / "mypy.ini"
    cfg.write_text("[mypy]\ncache_dir = %s\n" % (tmp_path / "cache"))
    env = dict(os.environ, MYPYPATH=ROOT)
    return cfg, env


def test_stub_of_the_extension_agrees_with_it(tmp_path):
    """mypy's stubtest: every name, signature (positional-only, defaults), class flag of
    birsim._birsim as its stub states it; the birsim package must type-check for it to
    run at all."""
    cfg, env = _mypy_env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(cfg),
                        "birsim._birsim"], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=300)
    assert r.returncode == 0 and "Success" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]


USER_CODE = '''
from typing import Any

import numpy as np
import birsim
from birsim import build as B
from birsim.testing import assert_sim_close

rng = np.random.default_rng(0)
x = rng.standard_normal((512, 128)).astype(np.float32)
w = rng.standard_normal((512, 512)).astype(np.float32)
b = rng.standard_normal((128, 1)).astype(np.float32)

module = birsim.load("examples/tiled_matmul.json")   # path, JSON text, bytes or dict
print(module)                                        # readable listing
sim = birsim.Simulator(module, schedule="random", seed=1, checks="all")
out = sim.run({"x": x, "w": w, "bias": b})           # dict of output arrays
y: np.ndarray[Any, Any] = out["out"]   # every NumPy: bare ndarray needs 2.4\'s defaults
ps = sim.read("ps")                                  # any tensor after the run
print(sim.stats, sim.warnings, sim.notes, sim.exited, ps.shape)
expected = np.maximum(x.T @ w + b, 0)
assert_sim_close(y, expected, rtol=1e-4, atol=1e-3)
assert_sim_close(y, expected, tolerance="0.01,1e-3", mode="max", min_pass_rate=0.99)
print(birsim.run(module, {"x": x, "w": w, "bias": b})["out"].shape)
dbg = birsim.Simulator(module)
dbg.breakpoint(name="mm")
done = dbg.debug({"x": x, "w": w, "bias": b})
while done is None:
    assert dbg.stopped is not None
    print(dbg.stopped.instruction, dbg.registers(), dbg.semaphores()[:3])
    done = dbg.resume()
print(done["out"].dtype, birsim.testing.parse_tolerance("1,1e-5"))
t = B.tensor("t", "ExternalInput", "float32", [4, 8], "DRAM")
assert isinstance(module, birsim.Module)             # a path may hold one per core
print(module.entry, [i.name for i in module.inputs], module.tensor("ps").numpy_dtype)
for m in birsim.load(["examples/tiled_matmul.json"]):  # a list: one Module per core
    print(m.entry, len(m.listing()), t["name"])
'''


def test_user_code_type_checks_under_mypy_strict(tmp_path):
    """The README's use, typed: ``out["y"]`` needs run() never to be None."""
    snippet = tmp_path / "user.py"
    snippet.write_text(USER_CODE)
    cfg, env = _mypy_env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", str(cfg),
                        "--follow-imports=silent", str(snippet)],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    r = subprocess.run([sys.executable, str(snippet)], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]          # and it runs


def test_the_readmes_python_examples_type_check_under_mypy_strict(tmp_path):
    """Each ```python block of the README passes mypy --strict as written (it runs as
    written too: tests/house/test_house_docs.py)."""
    import re
    readme = open(os.path.join(ROOT, "README.md")).read()
    blocks = re.findall(r"^```python\n(.*?)^```$", readme, re.S | re.M)
    assert blocks
    cfg, env = _mypy_env(tmp_path)
    for k, code in enumerate(blocks):
        snippet = tmp_path / ("readme_%d.py" % k)
        snippet.write_text(code)
        r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file",
                            str(cfg), "--follow-imports=silent", str(snippet)],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        assert r.returncode == 0, code + r.stdout[-4000:] + r.stderr[-2000:]


def _halving():
    return birsim.load(os.path.join(ROOT, "examples", "halving_do_while.json"))


def test_run_returns_the_outputs_or_raises_and_debug_pauses():
    mod = _halving()
    n = np.array([[37]], np.int32)
    plain = birsim.Simulator(mod).run({"n": n})
    assert isinstance(plain, dict) and plain
    sim = birsim.Simulator(mod)
    sim.breakpoint(name="halve")
    with pytest.raises(birsim.SimulationError, match=r"run\(\) paused at Stop\(.*'halve'.*"
                                                     r"sim\.debug\(inputs\)"):
        sim.run({"n": n})
    assert sim.paused and sim.stopped.instruction == "halve"
    assert sim.registers()["v"] == 37 >> 1
    sim.clear_breakpoints()
    out = sim.resume()                               # the paused run goes on
    for k in plain:
        np.testing.assert_array_equal(out[k], plain[k])
    sim.breakpoint(name="halve")
    seen = 0
    out = sim.debug({"n": n})
    while out is None:
        seen += 1
        out = sim.resume()
    assert seen == 6                                 # 37 -> 18, 9, 4, 2, 1, 0
    for k in plain:
        np.testing.assert_array_equal(out[k], plain[k])
    sim.clear_breakpoints()
    assert birsim.Simulator(mod).debug({"n": n}).keys() == plain.keys()


def test_public_functions_and_methods_are_annotated():
    import inspect
    import typing
    import importlib
    dumps, kernels, loader, module = (importlib.import_module("birsim." + n) for n in
                                      ("dumps", "kernels", "loader", "module"))
    targets = [birsim.load, birsim.run, loader.program_group, testing.isclose,
               testing.assert_sim_close, testing.parse_tolerance]
    for mod in (dumps, kernels, B):
        targets += [getattr(mod, n) for n in mod.__all__ if inspect.isfunction(getattr(mod, n))]
    for cls in (birsim.Simulator, module.Module, module.Tensor, module.IOTensor):
        for n, m in vars(cls).items():
            if n.startswith("_") and n != "__init__":
                continue
            m = m.fget if isinstance(m, property) else m
            if inspect.isfunction(m):
                targets.append(m)
    for n in ("breakpoint", "start", "step", "resume", "registers", "read", "debug"):
        targets.append(getattr(birsim.Simulator, n))
    missing = []
    for fn in targets:
        sig = inspect.signature(fn)
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(fn.__qualname__ + " -> ?")
        missing += ["%s(%s)" % (fn.__qualname__, p.name) for p in sig.parameters.values()
                    if p.name not in ("self", "cls") and p.annotation is p.empty]
    assert not missing, missing
    hints = typing.get_type_hints(birsim.Simulator.run)
    assert hints["return"] == typing.Dict[str, np.ndarray]
    assert typing.get_type_hints(birsim.run)["return"] == typing.Dict[str, np.ndarray]
