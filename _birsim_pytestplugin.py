"""birsim's pytest plugin (entry point ``pytest11`` name ``birsim``; on as soon as birsim
is installed, off with ``-p no:birsim``).

A top-level module, not ``birsim.pytest_plugin``: importing anything inside the package
runs ``birsim/__init__.py``, which loads the C extension, NumPy and the loader. pytest
imports every installed plugin at start-up (in every xdist worker too), so this module
imports only pytest and the standard library; birsim itself loads on the first use of a
fixture (docs/DESIGN.md "The pytest plugin").

Fixtures:

- ``birsim_sim``: a factory ``birsim_sim(program, **options) -> birsim.Simulator``. Options
  left out take the command line's defaults (``--birsim-schedule``, ``--birsim-seed``,
  ``--birsim-strict``, ``--birsim-checks``, ``--birsim-uninitialized``,
  ``--birsim-dma-mode``), so one sweep can be re-run under another schedule or with the
  checkers on without editing it. When a test fails, the report gains a "birsim" section
  with each simulator's stats, warnings and notes.
- ``birsim_assert_close``: :func:`birsim.testing.assert_sim_close`.

Sweeps (kernels x shapes x schedules x seeds) parallelise with pytest-xdist: ``pytest -n 8``
on one machine, or its remote workers across several. The fixtures keep no state across
tests, so every worker is independent.
"""

import pytest

__all__ = ["birsim_sim", "birsim_assert_close"]

# Simulator()'s defaults and choices, repeated so that parsing the command line and the
# report header do not import birsim (tests/api/test_api_user_plugin.py checks they agree).
SCHEDULES = ("in_order", "round_robin", "random", "pct")
UNINITIALIZED = ("zero", "nan")
DMA_MODES = ("eager", "deferred")
DEFAULT_SCHEDULE = "in_order"
DEFAULT_SEED = 0


def pytest_addoption(parser):
    group = parser.getgroup("birsim", "birsim simulator")
    group.addoption("--birsim-schedule", default=None, choices=SCHEDULES,
                    help="default schedule of simulators made by the birsim_sim fixture")
    group.addoption("--birsim-seed", type=int, default=None,
                    help="default seed of simulators made by the birsim_sim fixture")
    group.addoption("--birsim-strict", action="store_true", default=False,
                    help="make birsim_sim simulators strict (diagnostics raise)")
    group.addoption("--birsim-checks", default=None, metavar="CHECKS",
                    help='default checks= of birsim_sim simulators: "all" or '
                         'comma-separated checker names (races,uninitialized,...)')
    group.addoption("--birsim-uninitialized", default=None, choices=UNINITIALIZED,
                    help="default uninitialized= of birsim_sim simulators")
    group.addoption("--birsim-dma-mode", default=None, choices=DMA_MODES,
                    help="default dma_mode= of birsim_sim simulators")


def pytest_configure(config):
    config.addinivalue_line("markers", "birsim: a test that runs the birsim simulator")


def pytest_report_header(config):
    from importlib.metadata import PackageNotFoundError, version
    try:
        v = version("birsim")
    except PackageNotFoundError:
        v = "0+unknown"
    opts = config.option
    schedule = opts.birsim_schedule or DEFAULT_SCHEDULE
    seed = DEFAULT_SEED if opts.birsim_seed is None else opts.birsim_seed
    return f"birsim {v}: birsim_sim defaults schedule={schedule} seed={seed}"


def _checks(text):
    """--birsim-checks as Simulator(checks=...) takes it: "all", one name or a list."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    return names[0] if len(names) == 1 else names


@pytest.fixture
def birsim_sim(request):
    """A factory of :class:`birsim.Simulator` objects with the command line's defaults."""
    from birsim import Simulator
    from birsim.checks import parse_checks
    opts = request.config.option
    defaults = {}
    if opts.birsim_schedule is not None:
        defaults["schedule"] = opts.birsim_schedule
    if opts.birsim_seed is not None:
        defaults["seed"] = opts.birsim_seed
    if opts.birsim_strict:
        defaults["strict"] = True
    if opts.birsim_checks is not None:
        defaults["checks"] = _checks(opts.birsim_checks)
        try:
            parse_checks(defaults["checks"])
        except ValueError as e:
            raise pytest.UsageError(f"--birsim-checks {opts.birsim_checks!r}: {e}") from None
    if opts.birsim_uninitialized is not None:
        defaults["uninitialized"] = opts.birsim_uninitialized
    if opts.birsim_dma_mode is not None:
        defaults["dma_mode"] = opts.birsim_dma_mode
    made = []

    def make(program, **options):
        sim = Simulator(program, **dict(defaults, **options))
        made.append(sim)
        return sim

    request.node._birsim_sims = made
    return make


@pytest.fixture
def birsim_assert_close():
    """:func:`birsim.testing.assert_sim_close`."""
    from birsim.testing import assert_sim_close
    return assert_sim_close


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    sims = getattr(item, "_birsim_sims", None)
    if not sims or report.when != "call" or not report.failed:
        return
    lines = []
    for k, sim in enumerate(sims):
        lines.append(f"simulator {k}: schedule={sim.schedule} seed={sim.seed} "
                     f"cores={sim.cores} stats={sim.stats}")
        lines += [f"  warning: {w}" for w in sim.warnings]
        if sim.notes:
            lines.append(f"  notes: {' '.join(sim.notes)}")
    report.sections.append(("birsim", "\n".join(lines)))
