"""birsim's pytest plugin (entry point ``pytest11`` name ``birsim``; on as soon as birsim
is installed, off with ``-p no:birsim``).

Fixtures:

- ``birsim_sim``: a factory ``birsim_sim(program, **options) -> birsim.Simulator``. Options
  left out take the command line's defaults (``--birsim-schedule``, ``--birsim-seed``,
  ``--birsim-strict``), so one sweep can be re-run under another schedule without editing
  it. When a test fails, the report gains a "birsim" section with each simulator's
  stats, warnings and notes.
- ``birsim_assert_close``: :func:`birsim.testing.assert_sim_close`.

Sweeps (kernels x shapes x schedules x seeds) parallelise with pytest-xdist: ``pytest -n 8``
on one machine, or its remote workers across several. The fixtures keep no state across
tests, so every worker is independent.
"""

import pytest

from .testing import assert_sim_close

__all__ = ["birsim_sim", "birsim_assert_close"]


def pytest_addoption(parser):
    group = parser.getgroup("birsim", "birsim simulator")
    group.addoption("--birsim-schedule", default=None,
                    choices=("in_order", "round_robin", "random"),
                    help="default schedule of simulators made by the birsim_sim fixture")
    group.addoption("--birsim-seed", type=int, default=None,
                    help="default seed of simulators made by the birsim_sim fixture")
    group.addoption("--birsim-strict", action="store_true", default=False,
                    help="make birsim_sim simulators strict (diagnostics raise)")


def pytest_configure(config):
    config.addinivalue_line("markers", "birsim: a test that runs the birsim simulator")


@pytest.fixture
def birsim_sim(request):
    """A factory of :class:`birsim.Simulator` objects with the command line's defaults."""
    from .simulator import Simulator
    opts = request.config.option
    made = []

    def make(program, **options):
        if opts.birsim_schedule is not None:
            options.setdefault("schedule", opts.birsim_schedule)
        if opts.birsim_seed is not None:
            options.setdefault("seed", opts.birsim_seed)
        if opts.birsim_strict:
            options.setdefault("strict", True)
        sim = Simulator(program, **options)
        made.append(sim)
        return sim

    request.node._birsim_sims = made
    return make


@pytest.fixture
def birsim_assert_close():
    """:func:`birsim.testing.assert_sim_close`."""
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
