"""Issue 26: the pytest plugin loads nothing heavy until a fixture is used, its
--birsim-checks / --birsim-uninitialized / --birsim-dma-mode options and report header;
``import birsim`` leaves ml_dtypes for the first bf16/fp8 dtype; the progress line's rate
and total (fake clock, no timing); the packaging metadata."""

import importlib.metadata
import inspect
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import _birsim_pytestplugin as plugin
import birsim
from birsim import _debug, build as B
from birsim import simulator as simmod

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
HEAVY = ("birsim", "ml_dtypes", "numpy")

CONFTEST = '''
import os, sys

def _record(when):
    mods = sorted(m for m in sys.modules if m.startswith(%r))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), when + ".txt"), "w") as f:
        f.write("\\n".join(mods))

_record("conftest")

def pytest_collection_finish(session):
    _record("collected")
''' % (HEAVY,)

TRIVIAL = '''
def test_trivial():
    assert True
'''

USES_FIXTURE = '''
import sys
import numpy as np

def test_fixture_loads_birsim_and_runs(birsim_sim, birsim_assert_close):
    assert "birsim._birsim" in sys.modules
    from birsim import build as B
    x = B.tensor("x", "ExternalInput", "float32", [4, 8], "DRAM")
    y = B.tensor("y", "ExternalOutput", "float32", [4, 8], "DRAM")
    t = B.tensor("t", "Internal", "float32", [4, 8], "SB")
    prog = B.module([B.function("main", [x, y, t], [
        B.load_(B.whole(x), B.whole(t), sync=B.sync_info([], [B.sem_inc(1)])),
        B.tensor_scalar(B.whole(t), B.whole(t), "mult", 3.0, "add", 0.5,
                        sync=B.sync_info([B.sem_wait(1)], [B.sem_dec(1), B.sem_inc(2)])),
        B.save(B.whole(t), B.whole(y), sync=B.sync_info([B.sem_wait(2)], [B.sem_dec(2)])),
    ])])
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = birsim_sim(prog, checks="all").run({"x": a})
    birsim_assert_close(out["y"], a * np.float32(3) + np.float32(0.5), kind="exact")
'''


def _pytest(project, *args):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                           str(project)], capture_output=True, text=True, timeout=300,
                          cwd=project)


def _read(path):
    return set(path.read_text().split())


def test_registering_the_plugin_imports_no_birsim_extension_nor_ml_dtypes(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "conftest.py").write_text(CONFTEST)
    (base / "test_trivial.py").write_text(TRIVIAL)
    r = _pytest(base, "-p", "no:birsim")
    assert r.returncode == 0, r.stdout[-2000:]
    without = _read(base / "collected.txt")

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "conftest.py").write_text(CONFTEST)
    (proj / "test_trivial.py").write_text(TRIVIAL)
    r = _pytest(proj, "-q")
    assert r.returncode == 0, r.stdout[-2000:]
    for when in ("conftest", "collected"):
        mods = _read(proj / f"{when}.txt")
        assert "birsim._birsim" not in mods and "ml_dtypes" not in mods, (when, mods)
        assert not {m for m in mods if m.startswith("birsim")}, (when, mods)
        assert mods <= without, (when, mods - without)       # numpy only if pytest has it

    # the fixtures load birsim when used, and work
    (proj / "test_uses_fixture.py").write_text(USES_FIXTURE)
    r = _pytest(proj, "-q")
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:]
    assert "birsim._birsim" not in _read(proj / "collected.txt")


OPTIONS = '''
import pytest
from birsim import build as B

def program():
    r = B.register("r")
    return B.module([B.function("main", [r], [B.register_move(B.reg(r), B.imm(1, "int32"))])])

def test_options(birsim_sim):
    sim = birsim_sim(program())
    assert (sim.checks, sim.uninitialized, sim.dma_mode) == (%s, "nan", "deferred")
    assert (sim.schedule, sim.seed) == ("round_robin", 5)

def test_explicit_options_win(birsim_sim):
    sim = birsim_sim(program(), checks=None, uninitialized="zero", dma_mode="eager",
                     schedule="in_order", seed=1)
    assert (sim.checks, sim.uninitialized, sim.dma_mode) == ((), "zero", "eager")
    assert (sim.schedule, sim.seed) == ("in_order", 1)
'''


@pytest.mark.parametrize("checks, expect", [
    ("races,nan", ("races", "nan")),
    ("uninitialized", ("uninitialized",)),
    ("all", tuple(birsim.checks.CHECKS)),
])
def test_command_line_options_reach_the_fixtures_simulators(tmp_path, checks, expect):
    (tmp_path / "test_options.py").write_text(OPTIONS % (expect,))
    r = _pytest(tmp_path, "-q", "--birsim-checks", checks, "--birsim-uninitialized", "nan",
                "--birsim-dma-mode", "deferred", "--birsim-schedule", "round_robin",
                "--birsim-seed", "5")
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout[-3000:]


def test_bad_option_values_are_usage_errors(tmp_path):
    (tmp_path / "test_options.py").write_text(OPTIONS % ((),))
    r = _pytest(tmp_path, "-q", "--birsim-checks", "races,bogus")
    assert r.returncode != 0
    assert "--birsim-checks 'races,bogus': unknown check 'bogus'" in r.stdout, r.stdout[-3000:]
    for opt in ("--birsim-dma-mode", "--birsim-uninitialized"):
        r = _pytest(tmp_path, "-q", opt, "bogus")
        assert r.returncode == 4 and "invalid choice: 'bogus'" in r.stderr, (opt, r.stderr)


def test_report_header_names_version_schedule_and_seed(tmp_path):
    (tmp_path / "test_trivial.py").write_text(TRIVIAL)
    version = importlib.metadata.version("birsim")
    r = _pytest(tmp_path)
    assert f"birsim {version}: birsim_sim defaults schedule=in_order seed=0\n" in r.stdout
    r = _pytest(tmp_path, "--birsim-schedule", "random", "--birsim-seed", "9")
    assert f"birsim {version}: birsim_sim defaults schedule=random seed=9\n" in r.stdout


def test_plugin_defaults_and_choices_match_the_simulator():
    sig = inspect.signature(birsim.Simulator.__init__).parameters
    assert plugin.DEFAULT_SCHEDULE == sig["schedule"].default
    assert plugin.DEFAULT_SEED == sig["seed"].default
    assert set(plugin.SCHEDULES) == set(simmod._SCHEDULES)
    assert set(plugin.UNINITIALIZED) == set(simmod._UNINIT)
    assert set(plugin.DMA_MODES) == set(simmod._DMA_MODES)


def test_import_birsim_leaves_ml_dtypes_until_a_bf16_dtype():
    code = textwrap.dedent('''
        import sys
        import numpy as np
        import birsim
        from birsim import build as B
        assert "ml_dtypes" not in sys.modules
        x = B.tensor("x", "ExternalInput", "float32", [2, 4], "DRAM")
        y = B.tensor("y", "ExternalOutput", "float32", [2, 4], "DRAM")
        prog = B.module([B.function("main", [x, y], [B.load_(B.whole(x), B.whole(y))])])
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        assert (birsim.run(prog, {"x": a})["y"] == a).all()
        assert "ml_dtypes" not in sys.modules
        from birsim.dtypes import numpy_dtype, unpack_x4
        assert numpy_dtype("bfloat16").name == "bfloat16" and "ml_dtypes" in sys.modules
        assert unpack_x4(np.uint16([0x4321]), "float4_e2m1fn_x4").tolist() == [0.5, 1, 1.5, 2]
        print("ok")
    ''')
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


# -- the progress line ---------------------------------------------------------------

class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


def test_progress_rate_comes_from_a_real_interval(capsys):
    clock = Clock()
    p = _debug._Progress(True, clock=clock)
    p.plain = True                                   # no tqdm
    clock.t += 1.0
    p.update(1_000_000, "b")                         # before PROGRESS_AFTER: nothing
    assert capsys.readouterr().err == ""
    clock.t += 1.0
    p.update(4_000_000, "b")                         # 4M steps in the 2 s since the start
    assert capsys.readouterr().err == "\rbirsim: 4,000,000 steps, block b, 2.0 M steps/s   "
    clock.t += 0.25
    p.update(4_500_000, "b")                         # within _PROGRESS_EVERY: nothing
    assert capsys.readouterr().err == ""
    clock.t += 0.25
    p.update(4_600_000, "c")                         # 0.6M in the last 0.5 s
    assert capsys.readouterr().err.endswith("4,600,000 steps, block c, 1.2 M steps/s   ")
    p.close()
    assert capsys.readouterr().err == "\n"


def test_progress_near_zero_first_interval_shows_no_rate(monkeypatch, capsys):
    monkeypatch.setattr(_debug, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(_debug, "_PROGRESS_EVERY", 0.0)
    clock = Clock()
    p = _debug._Progress(True, clock=clock)
    p.plain = True
    clock.t += 1e-7
    p.update(500, "b")                               # not 5 G steps/s
    assert capsys.readouterr().err == "\rbirsim: 500 steps, block b   "
    clock.t += 0.05                                  # still below _RATE_MIN since the start
    p.update(2_000, "b")
    assert "steps/s" not in capsys.readouterr().err
    clock.t += 0.15                                  # 0.2 s since the start
    p.update(10_500, "b")
    assert capsys.readouterr().err.endswith("10,500 steps, block b, 52.5 k steps/s   ")


def test_progress_rate_leaves_out_paused_time(capsys):
    clock = Clock()
    p = _debug._Progress(True, clock=clock)
    p.plain = True
    clock.t += 60.0                                  # paused at a breakpoint for a minute
    p.restart(1000)
    clock.t += 2.0
    p.update(3_001_000, "b")
    assert capsys.readouterr().err.endswith("3,001,000 steps, block b, 1.5 M steps/s   ")


def test_progress_shows_a_known_total(capsys):
    clock = Clock()
    calls = []

    def total():
        calls.append(1)
        return 10_000_000

    p = _debug._Progress(True, total=total, clock=clock)
    p.plain = True
    clock.t += 2.0
    p.update(4_000_000, "b")
    clock.t += 0.5
    p.update(5_000_000, "b")
    err = capsys.readouterr().err
    assert "\rbirsim: 4,000,000 / 10,000,000 steps (40%), block b, 2.0 M steps/s" in err
    assert "\rbirsim: 5,000,000 / 10,000,000 steps (50%), block b, 2.0 M steps/s" in err
    assert calls == [1]                              # computed once, when first shown


def test_progress_tqdm_bar_starts_at_the_current_count(monkeypatch):
    made = []

    class FakeTqdm:
        def __init__(self, **kw):
            self.kw, self.updates = kw, []
            made.append(self)

        def update(self, n):
            self.updates.append(n)

        def set_postfix_str(self, s, refresh=True):
            self.postfix = s

        def close(self):
            pass

    fake = type(sys)("tqdm.auto")
    fake.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", type(sys)("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", fake)
    clock = Clock()
    p = _debug._Progress(True, total=lambda: 900, clock=clock)
    clock.t += 2.0
    p.update(600, "b")
    clock.t += 1.0
    p.update(750, "c")
    bar, = made
    # tqdm's rate counts from the bar's first reading: no count over a zero interval
    assert bar.kw["initial"] == 600 and bar.kw["total"] == 900
    assert bar.updates == [0, 150] and bar.postfix == "block c"


def test_progress_line_units():
    line = _debug._progress_line
    assert line(5, "b", 12.0, None) == "birsim: 5 steps, block b, 12.0 steps/s"
    assert line(5, "b", 1.5e3, None).endswith(", 1.5 k steps/s")
    assert line(5, "b", 2.5e9, None).endswith(", 2.5 G steps/s")
    assert line(1, "b", None, 3) == "birsim: 1 / 3 steps (33%), block b"


def _reg_program(body_of_main):
    r = B.register("r")
    return B.module([B.function("main", [r], body_of_main(r))])


def _inc(r):
    return B.register_alu(B.reg(r), B.reg(r), B.imm(1, "int32"), "add")


STATIC = {
    "straight": lambda r: [B.register_move(B.reg(r), B.imm(0, "int32")), _inc(r), _inc(r)],
    "loop": lambda r: [B.loop("i", 7, [_inc(r), _inc(r)])],
    "zero_trips": lambda r: [_inc(r), B.loop("i", 3, [_inc(r)], lb=3), _inc(r)],
    "stride": lambda r: [B.loop("i", 10, [_inc(r)], lb=1, stride=3)],
    "no_trip_any_stride": lambda r: [_inc(r), B.loop("i", 2, [_inc(r)], lb=5, stride=-1)],
    "degenerate_once": lambda r: [B.loop("i", 0, [_inc(r), _inc(r)], lb=0, stride=0)],
    "nested": lambda r: [B.loop("i", 4, [_inc(r), B.loop("j", 5, [_inc(r)]),
                                         B.loop("k", 2, [B.loop("l", 3, [_inc(r)])])]),
                         _inc(r)],
    "blocks": lambda r: [B.block("first", _inc(r)),
                         B.block("second", B.loop("i", 6, [B.block("x", _inc(r)),
                                                           B.block("y", _inc(r))]))],
}


@pytest.mark.parametrize("name", sorted(STATIC))
@pytest.mark.parametrize("cores", [1, 2])
def test_step_total_is_the_runs_step_count(name, cores):
    module = birsim.load(_reg_program(STATIC[name]))
    total = _debug._step_total(module, cores)
    sim = birsim.Simulator(module, cores=cores, progress=False)
    sim.run()
    assert total == sim.stats["steps"] and total > 0


@pytest.mark.parametrize("example", ["branch_ladder.json", "call_twice.json",
                                     "dynamic_add.json", "halving_do_while.json",
                                     "rmsnorm_customop.json"])
def test_no_step_total_when_control_flow_depends_on_the_run(example):
    assert _debug._step_total(birsim.load(ROOT / "examples" / example), 1) is None


def test_a_simulator_shows_its_step_total(monkeypatch, capsys):
    monkeypatch.setattr(_debug, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(_debug, "_PROGRESS_EVERY", 0.0)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    sim = birsim.Simulator(_reg_program(lambda r: [
        B.loop("i", 1000, [B.loop("j", 300, [_inc(r)]), _inc(r)])]))
    sim.run()
    assert f"/ {sim.stats['steps']:,} steps (" in capsys.readouterr().err
    group = birsim.Simulator([_reg_program(STATIC["loop"])] * 2)
    assert group._progress_total() is None                   # one program per core: none


# -- packaging metadata ----------------------------------------------------------------

def _pyproject():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_pyproject_metadata():
    proj = _pyproject()["project"]
    floor = tuple(int(v) for v in re.fullmatch(r">=(\d+)\.(\d+)", proj["requires-python"]).groups())
    cls = proj["classifiers"]
    versions = [c.rsplit(" ", 1)[1] for c in cls
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions == [f"3.{m}" for m in range(floor[1], 14)]
    for need in ("Programming Language :: C", "Operating System :: POSIX :: Linux",
                 "Topic :: Scientific/Engineering"):
        assert need in cls
    # the license is the SPDX expression; setuptools>=77 refuses License classifiers beside it
    assert proj["license"] == "Apache-2.0" and not any(c.startswith("License ::") for c in cls)
    assert proj["readme"] == "README.md" and (ROOT / "README.md").is_file()
    assert "urls" not in proj          # no public URL is known: none invented
    assert proj["entry-points"]["pytest11"] == {"birsim": "_birsim_pytestplugin"}
    assert "_birsim_pytestplugin" in _pyproject()["tool"]["setuptools"]["py-modules"]


def test_installed_metadata_carries_the_readme_and_classifiers():
    md = importlib.metadata.metadata("birsim")
    assert md["Description-Content-Type"] == "text/markdown"
    body = md.get_payload() or md["Description"]
    assert body.strip().splitlines()[0] == (ROOT / "README.md").read_text().splitlines()[0]
    assert md.get_all("Classifier") == _pyproject()["project"]["classifiers"]
