"""A tiny program's first ``Simulator()`` and first run (issue 24, session 12) against the
general paths they skip:

* ``Simulator()`` with every checked option its default (the same object) takes a fast
  path: no option checks, only the attributes that differ from the class-level defaults
  stored. It must hand the C core the same options and give the same attributes and
  runs as the general path (forced here with ``cores=1``, an equal but non-default
  spelling).
* A run makes a host (the CustomOp/BIRKernel callback) only when the program has such an
  instruction (``Sim.needs_host``, from bs_ops.def's ``host`` handler column).
* The progress line's state is made when a slice of a run ends unfinished.
* One input given once by one of its names is written without the general loops; every
  error keeps its type and message.
"""

import glob
import os

import numpy as np
import pytest

import birsim
from birsim import _birsim
from birsim import _debug
from birsim import simulator as simmod
from bir import block, function, insn, module, tensor, whole

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.json")))
SHAPE = (16, 8)


def _copy_prog(loc="a_loc"):
    """One input (its location named differently from its set), one output."""
    return module([function("main", [
        tensor("a", "ExternalInput", "float32", SHAPE, "DRAM", loc=loc),
        tensor("b", "ExternalOutput", "float32", SHAPE, "DRAM")],
        [block("b0", insn("cp", "TensorCopy", "DVE", ins=[whole(loc, SHAPE)],
                          outs=[whole("b", SHAPE)]))])])


class _Recorder:
    """Stands in for ``_birsim.Sim``: records each call's arguments, returns the real Sim."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, *args, **kw):
        self.calls.append((args, kw))
        return self.real(*args, **kw)


# attributes that are per-Simulator objects (compared otherwise) or differ by design
_OWN = {"_sim", "_lock", "_names", "cores"}


OPTIONS = [{}, {"strict": True}, {"trace": True}, {"print": False}, {"record": True},
           {"zero_copy": True}, {"progress": False}, {"on_instruction": lambda s, stop: False},
           {"strict": True, "trace": True, "zero_copy": True, "progress": False}]


@pytest.mark.parametrize("options", OPTIONS)
def test_default_options_match_the_general_path(monkeypatch, options):
    rec = _Recorder(_birsim.Sim)
    monkeypatch.setattr(_birsim, "Sim", rec)
    m = birsim.load(_copy_prog())
    fast = birsim.Simulator(m, **options)
    general = birsim.Simulator(m, cores=1, **options)
    assert "cores" not in vars(fast) and "cores" in vars(general)     # the fast path ran
    assert rec.calls[0] == rec.calls[1]             # the C core got the same options
    for k in set(vars(general)) - _OWN:
        assert getattr(fast, k) == getattr(general, k), k
    assert fast.cores == general.cores == 1
    assert (fast._sim.needs_host, fast._trace_max, fast._print_max) == \
        (general._sim.needs_host, general._trace_max, general._print_max)
    x = np.arange(128, dtype=np.float32).reshape(SHAPE)
    a, b = fast.run({"a": x}), general.run({"a": x})
    assert a["b"].tobytes() == b["b"].tobytes() == x.tobytes()
    assert (fast.stats, fast.warnings, fast.notes, fast.findings, fast.prints, fast.exited) == \
        (general.stats, general.warnings, general.notes, general.findings, general.prints,
         general.exited)
    assert len(fast.trace) == len(general.trace)


@pytest.mark.filterwarnings("ignore::birsim.BirsimWarning")
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_every_example_runs_the_same_on_both_paths(path):
    m = birsim.load(path)
    fast, general = birsim.Simulator(m, progress=False), \
        birsim.Simulator(m, cores=1, progress=False)
    assert "cores" not in vars(fast)
    known = simmod._declared_bytes_known(m)         # the fast path's budget figures
    assert known == simmod._declared_bytes(m, 1, None) and \
        m._byte_counts[1] == simmod._tables_bytes([m])
    inputs = {t.name: np.linspace(-1, 1, int(np.prod(t.shape))).reshape(t.shape)
              .astype(t.numpy_dtype) for t in m.inputs}
    results = []
    for sim in (fast, general):
        try:
            out = sim.run(inputs)
            results.append(({k: v.tobytes() for k, v in out.items()}, sim.stats, sim.warnings))
        except birsim.BirsimError as e:
            results.append((type(e), str(e)))
    assert results[0] == results[1]


@pytest.mark.parametrize("bad", [{"cores": 0}, {"seed": 1.0}, {"schedule": "nope"},
                                 {"threads": 0}, {"checks": ["nope"]}, {"timing": "maybe"},
                                 {"pe_throttle": True}, {"zero_copy": 1},
                                 {"uninitialized": "junk"}, {"memory_limit": -1}])
def test_a_bad_option_still_raises(bad):
    with pytest.raises((ValueError, TypeError)):
        birsim.Simulator(birsim.load(_copy_prog()), **bad)


def test_state_reads_through_to_the_class_defaults():
    sim = birsim.Simulator(birsim.load(_copy_prog()))
    assert sim.breakpoints == [] and sim.checks == () and sim.timing == "off"
    bp = sim.breakpoint("cp")                       # the class-level () becomes a list
    assert sim.breakpoints == [bp] and type(sim._breaks) is list
    assert _debug.DebugMixin.__dict__["_breaks"] == ()       # untouched
    sim.clear_breakpoints()
    assert sim.breakpoints == []


# -- the host ----------------------------------------------------------------------------

_HOST_OPS = [_birsim.opcodes[n][0] for n in ("CustomOp", "BIRKernel")]


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_needs_host_is_the_program_having_a_delegated_kernel(path):
    m = birsim.load(path)
    sim = birsim.Simulator(m)
    assert sim._sim.needs_host == bool(np.isin(m.tables["insns"]["op"], _HOST_OPS).any())


def test_a_run_without_delegated_kernels_makes_no_host():
    sim = birsim.Simulator(birsim.load(_copy_prog()))
    sim.start({"a": np.zeros(SHAPE, np.float32)})
    assert sim._host is None
    sim.resume()
    custom = birsim.load(os.path.join(ROOT, "examples", "rmsnorm_customop.json"))
    assert any(n == "rmsnorm_customop.json" for n in map(os.path.basename, EXAMPLES))
    sim = birsim.Simulator(custom)
    assert sim._sim.needs_host
    sim.start({t.name: np.zeros(t.shape, t.numpy_dtype) for t in custom.inputs})
    assert sim._host is not None


# -- progress ----------------------------------------------------------------------------

def _long_loop(trips):
    r = birsim.build.register("r")
    B = birsim.build
    return B.module([B.function("main", [r], [
        B.register_move(B.reg(r), B.imm(0, "int32")),
        B.loop("i", trips, [B.register_alu(B.reg(r), B.reg(r), B.imm(1, "int32"), "add")],
               name="spin")])])


def test_progress_state_only_for_a_run_outlasting_a_slice(monkeypatch):
    sim = birsim.Simulator(birsim.load(_copy_prog()))
    sim.run({"a": np.zeros(SHAPE, np.float32)})
    assert sim._progress is None and sim._weak_total is None
    clock = iter(range(10 ** 6))
    monkeypatch.setattr(_debug.time, "monotonic", lambda: float(next(clock)))
    sim = birsim.Simulator(_long_loop(300000))       # ~600k steps: three slices
    sim.run()
    prog = sim._progress
    assert prog is not None and prog.enabled and prog.total == sim.stats["steps"]   # shown
    assert prog.t0 == sim._run_t0 and prog.rate is not None and prog.rate > 0
    sim = birsim.Simulator(_long_loop(300000), progress=False)
    sim.run()
    assert sim._progress is None and sim._run_t0 is None


def test_a_paused_run_keeps_one_progress_state():
    sim = birsim.Simulator(_long_loop(10))
    sim.breakpoint(opcode="RegisterAlu")
    assert sim.debug() is None
    prog = sim._progress
    assert prog is not None and prog.mark[1] == 0
    assert sim.resume() is None and sim._progress is prog
    assert prog.mark[1] == sim.stopped.step - 2       # restarted at the pause's steps
    sim.clear_breakpoints()
    assert sim.resume() == {} and sim._progress is prog


# -- one input ---------------------------------------------------------------------------

def test_one_input_by_either_name_or_keyword():
    m = birsim.load(_copy_prog())
    x = np.arange(128, dtype=np.float32).reshape(SHAPE)
    for given in ({"a": x}, {"a_loc": x}, {"a": x.tolist()}, {"a": x.astype(np.float64)}):
        assert birsim.Simulator(m).run(given)["b"].tobytes() == x.tobytes()
    assert birsim.Simulator(m).run(a=x)["b"].tobytes() == x.tobytes()
    assert birsim.Simulator(m).run(a_loc=x)["b"].tobytes() == x.tobytes()


def test_one_input_errors_unchanged():
    m = birsim.load(_copy_prog())
    sim = birsim.Simulator(m)
    x = np.zeros(SHAPE, np.float32)
    with pytest.raises(birsim.ProgramError, match=r"^unknown input 'zz'; inputs are \['a'\]$"):
        sim.run({"zz": x})
    with pytest.raises(birsim.ProgramError, match=r"^input 'a' given twice$"):
        sim.run({"a": x, "a_loc": x})
    with pytest.raises(birsim.ProgramError, match=r"^missing input 'a' \(shape \[16, 8\], float32\)$"):
        sim.run({})
    with pytest.raises(birsim.ProgramError,
                       match=r"^input 'a' has shape \[8, 16\], expected \[16, 8\]$"):
        sim.run({"a": np.zeros((8, 16), np.float32)})
    with pytest.raises(birsim.ProgramError, match=r"^input 'a': cannot cast <U1 to float32$"):
        sim.run({"a": np.full(SHAPE, "x")})
