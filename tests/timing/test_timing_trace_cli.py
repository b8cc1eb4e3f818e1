"""Issue 26 items 2 and 3: traces Perfetto shows whole, and the command line's --trace,
--checks, --kernel-module and modules-per-core summary.

Perfetto's rule, applied to the exported file independently of birsim's code: it converts
each event's ``ts`` and ``dur`` (microseconds) to whole nanoseconds separately
(``llround(x * 1000)``; older versions truncate), and on a track (pid, tid) drops a slice
that starts inside the open slice but ends after it (slices must nest or follow each
other). A slice lost that way leaves a fake idle gap in the timeline.
"""

import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import birsim
from birsim import build as B

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"
PIPELINE = EXAMPLES / "sync_pipeline.json"
PIPELINE_IN = {"x": np.ones((96, 8), np.float32), "w": np.ones((16, 4), np.float32)}

sys.path.insert(0, str(EXAMPLES))
import flash_attention as fa  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::birsim.BirsimWarning")


def _llround(x):
    return math.floor(x + 0.5)


def perfetto_slices(doc, to_ns=_llround):
    """{(pid, tid): [(start_ns, end_ns, name), ...]} of the X events Perfetto keeps, and
    the list of those it drops."""
    tracks = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            ts = to_ns(e["ts"] * 1000.0)
            tracks.setdefault((e["pid"], e["tid"]), []).append(
                (ts, ts + to_ns(e["dur"] * 1000.0), e["name"]))
    kept, dropped = {}, []
    for track, slices in tracks.items():
        stack = []                                   # ends of the open slices
        for s, t, name in sorted(slices, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and t > stack[-1]:              # overlaps the open slice's end
                dropped.append((track, s, t, name))
                continue
            stack.append(t)
            kept.setdefault(track, []).append((s, t, name))
    return kept, dropped


def exported(sim, tmp_path, name="t.json"):
    sim.trace.export(tmp_path / name)
    return json.loads((tmp_path / name).read_text())


def _flash(S=512, d=32):
    q, k, v = fa.inputs(S, d, seed=3)
    sim = birsim.Simulator(fa.build(S, d), trace=True)
    sim.run(fa.to_inputs(q, k, v))
    return sim


def _pipeline():
    sim = birsim.Simulator(PIPELINE, trace=True)
    sim.run(PIPELINE_IN)
    return sim


# -- item 2: the export ---------------------------------------------------------------


@pytest.mark.parametrize("make", [_pipeline, _flash], ids=["sync_pipeline", "flash_attention"])
def test_perfetto_keeps_every_slice(make, tmp_path):
    sim = make()
    doc = exported(sim, tmp_path)
    n = sum(e["ph"] == "X" for e in doc["traceEvents"])
    assert n == len(sim.trace) == sim.stats["instructions"]
    for to_ns in (_llround, int):                    # today's Perfetto, and older ones
        kept, dropped = perfetto_slices(doc, to_ns)
        assert dropped == [] and sum(map(len, kept.values())) == n


def test_slices_sit_on_whole_nanoseconds_and_abut_as_in_the_cost_model(tmp_path):
    sim = _flash()
    doc = exported(sim, tmp_path)
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    ends = {}
    for e, r in zip(slices, sim.trace):
        for us in (e["ts"], e["dur"]):
            # x * 1000 rounds and truncates to the same whole number of nanoseconds
            assert int(us * 1000.0) == _llround(us * 1000.0)
        s = _llround(e["ts"] * 1000.0)
        t = s + _llround(e["dur"] * 1000.0)
        assert abs(s - r.start) <= 0.5 and abs(t - r.end) <= 0.5 and t > s
        ends[(r.core, r.engine, r.end)] = t
        # a slice starting where the one before it on its engine ended starts on the
        # very nanosecond that one ends on (no gap, no overlap)
        if (r.core, r.engine, r.start) in ends:
            assert s == ends[(r.core, r.engine, r.start)]
    assert any(r.start in {k[2] for k in ends} for r in sim.trace[1:])


def test_processes_sorted_by_core_and_engine_tracks_named(tmp_path):
    a = B.tensor("a", "ExternalInput", "float32", [8, 64], "DRAM")
    t = B.tensor("t", "Internal", "float32", [8, 64], "SB")
    # each core's result in its own Internal DRAM tensor (an output is one tensor for all
    # cores: three cores writing it whole would race)
    o = B.tensor("o", "Internal", "float32", [8, 64], "DRAM")
    prog = B.module([B.function("main", [a, t, o], [
        B.load_(B.whole(a), B.whole(t), sync=B.sync_info([], [B.sem_inc(1)])),
        B.tensor_scalar(B.whole(t), B.whole(t), "mult", 2.0,
                        sync=B.sync_info([B.sem_wait(1)], [B.sem_dec(1), B.sem_inc(2)])),
        B.save(B.whole(t), B.whole(o), sync=B.sync_info([B.sem_wait(2)], [B.sem_dec(2)]))])])
    sim = birsim.Simulator(prog, cores=3, trace=True,     # "o" is read back by the host:
                           checks=["races", "uninitialized", "leftover_sync"])  # no dead_writes
    x = np.arange(512, dtype=np.float32).reshape(8, 64)
    sim.run({"a": x})
    for k in range(3):
        np.testing.assert_array_equal(sim.read("o", core=k), 2 * x)
    assert sim.findings == []
    ev = exported(sim, tmp_path)["traceEvents"]
    meta = [e for e in ev if e["ph"] == "M"]
    names = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    order = {e["pid"]: e["args"]["sort_index"] for e in meta
             if e["name"] == "process_sort_index"}
    assert names == {0: "core 0", 1: "core 1", 2: "core 2"}
    assert sorted(order, key=order.get) == [0, 1, 2]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
               if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in ev if e["ph"] == "X"} <= threads.keys()
    assert sorted(threads.values()) == sorted(["DMA", "DVE"] * 3)
    assert perfetto_slices({"traceEvents": ev})[1] == []


def _copy(sync=None, src_mem="SB"):
    a = B.tensor("a", "ExternalInput", "float32", [8, 64], src_mem)
    o = B.tensor("o", "ExternalOutput", "float32", [8, 64], "SB")
    return B.module([B.function("main", [a, o], [
        B.tensor_copy(B.whole(a), B.whole(o), engine="DVE", sync=sync)])])


X = {"a": np.ones((8, 64), np.float32)}


def test_export_without_a_recorded_trace_is_an_error(tmp_path):
    sim = birsim.Simulator(_copy())                  # trace=False
    sim.run(X)
    with pytest.raises(birsim.SimulationError, match="trace=True"):
        sim.trace.export(tmp_path / "a.json")
    traced = birsim.Simulator(_copy(), trace=True)   # not run yet
    with pytest.raises(birsim.SimulationError, match="run it first"):
        traced.trace.export(tmp_path / "b.json")
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


def test_a_traced_run_of_nothing_gives_an_empty_trace(tmp_path):
    a = B.tensor("a", "ExternalInput", "float32", [8, 64], "SB")
    sim = birsim.Simulator(B.module([B.function("main", [a], [])]), trace=True)
    assert sim.run(X) == {}
    assert sim.trace == [] and sim.stats["instructions"] == 0
    assert exported(sim, tmp_path)["traceEvents"] == []


def test_a_first_instruction_that_deadlocks_raises_the_deadlock(tmp_path):
    sim = birsim.Simulator(_copy(B.sync_info([B.sem_wait(3)], [])), trace=True)
    with pytest.raises(birsim.DeadlockError, match="semaphore 3"):
        sim.run(X)
    assert sim.trace == []
    # nothing ran: the export holds only the blocked engine's deadlock marker (issue 22)
    ev = exported(sim, tmp_path)["traceEvents"]
    assert [e["name"] for e in ev if e["ph"] != "M"] == ["deadlock: blocked at TensorCopy_0"]


def test_a_first_instruction_that_fails_a_check_raises_the_check_error():
    # DVE reading DRAM is a capacity finding, an error with strict=True, before it runs
    sim = birsim.Simulator(_copy(src_mem="DRAM"), trace=True, checks="capacity",
                           strict=True)
    with pytest.raises(birsim.CheckError, match="DVE engine reads and writes only"):
        sim.run(X)
    assert sim.trace == []


# -- the command line -------------------------------------------------------------------


def cli(*args, cwd=None, script=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIRSIM_KERNEL")}
    exe = [str(pathlib.Path(sys.executable).with_name("birsim"))] if script else \
        [sys.executable, "-m", "birsim"]
    return subprocess.run(exe + [str(a) for a in args], capture_output=True, text=True,
                          timeout=120, cwd=cwd or ROOT, env=env)


def test_run_trace_writes_a_whole_trace(tmp_path):
    np.savez(tmp_path / "in.npz", **PIPELINE_IN)
    r = cli("run", PIPELINE, "--inputs", tmp_path / "in.npz", "--trace", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    kept, dropped = perfetto_slices(doc)
    assert dropped == [] and sum(map(len, kept.values())) == 32
    assert "executed 32 instructions" in r.stdout and "1 module on 1 core" in r.stdout
    assert f"wrote trace of 32 instructions to {tmp_path / 't.json'}" in r.stdout


def test_run_trace_is_written_up_to_an_error(tmp_path):
    prog = tmp_path / "dead.json"
    B.to_json(_copy(B.sync_info([B.sem_wait(3)], [])), prog)
    r = cli("run", prog, "--random-inputs", 0, "--trace", tmp_path / "t.json")
    assert r.returncode == 1 and "DeadlockError" in r.stderr and "Traceback" not in r.stderr
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [e["name"] for e in ev if e["ph"] != "M"] == ["deadlock: blocked at TensorCopy_0"]


def test_run_trace_unwritable_is_a_bad_argument(tmp_path):
    r = cli("run", PIPELINE, "--random-inputs", 0, "--trace", tmp_path / "no" / "t.json")
    assert r.returncode == 2 and "cannot write the trace" in r.stderr
    assert "Traceback" not in r.stderr


def _race(sync):
    """DVE writes t, Pool reads it: ordered by a semaphore when ``sync``, else a race."""
    a = B.tensor("a", "ExternalInput", "float32", [8, 64], "SB")
    t = B.tensor("t", "Internal", "float32", [8, 64], "SB")
    o = B.tensor("o", "ExternalOutput", "float32", [8, 64], "SB")
    s1 = B.sync_info([], [B.sem_inc(3)]) if sync else None
    s2 = B.sync_info([B.sem_wait(3)], [B.sem_dec(3)]) if sync else None
    return B.module([B.function("main", [a, t, o], [
        B.tensor_copy(B.whole(a), B.whole(t), engine="DVE", sync=s1),
        B.tensor_scalar(B.whole(t), B.whole(o), "mult", 2.0, engine="Pool", sync=s2)])])


def test_run_checks_findings_are_printed_and_exit_1(tmp_path):
    x = np.arange(512, dtype=np.float32).reshape(8, 64)
    np.savez(tmp_path / "in.npz", a=x)
    for sync in (True, False):
        B.to_json(_race(sync), tmp_path / "p.json")
        r = cli("run", tmp_path / "p.json", "--inputs", tmp_path / "in.npz", "--checks",
                "all" if sync else "races,uninitialized", "--out", tmp_path / "out.npz")
        with np.load(tmp_path / "out.npz") as z:       # the outputs are still saved
            np.testing.assert_array_equal(z["o"], 2 * x)
        assert "o: shape [8, 64] float32" in r.stdout
        if sync:
            assert r.returncode == 0, r.stdout + r.stderr
            assert "finding:" not in r.stdout and "no finding(s)" in r.stdout
        else:
            assert r.returncode == 1, r.stdout + r.stderr
            assert "finding: races: race (RAW) on 't'" in r.stdout
            assert "checks (races, uninitialized): 1 finding(s)" in r.stdout
            assert "--checks found 1 problem(s)" in r.stderr
    r = cli("run", tmp_path / "p.json", "--inputs", tmp_path / "in.npz", "--checks", "racs")
    assert r.returncode == 2 and "unknown check 'racs'" in r.stderr
    r = cli("run", tmp_path / "p.json", "--inputs", tmp_path / "in.npz", "--checks", "all",
            "--strict")                                  # a finding is an error
    assert r.returncode == 1 and "CheckError" in r.stderr


def _rmsnorm(x, gamma, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


def test_run_kernel_module_serves_custom_ops(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    gamma = rng.standard_normal((1, 512)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, gamma=gamma)
    prog = EXAMPLES / "rmsnorm_customop.json"
    r = cli("run", prog, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz",
            "--kernel-module", EXAMPLES / "rmsnorm_kernel.py")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "o.npz") as z:
        np.testing.assert_allclose(z["y"], _rmsnorm(x, gamma), rtol=1e-5, atol=1e-5)
    # a dotted name found in the working directory, with the installed `birsim` command
    (tmp_path / "my_kernels.py").write_text(
        "import numpy as np, birsim\n"
        "@birsim.kernel('rmsnorm')\n"
        "def rms(x, g, eps=1e-6):\n"
        "    return np.full(x.shape, 7.0, np.float32)\n")
    r = cli("run", prog, "--inputs", "in.npz", "--out", "o2.npz", "--kernel-module",
            "my_kernels", cwd=tmp_path, script=True)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "o2.npz") as z:
        assert (z["y"] == 7.0).all()
    r = cli("run", prog, "--inputs", tmp_path / "in.npz")     # no kernel for the op
    assert r.returncode == 1 and "KernelSimError" in r.stderr
    r = cli("run", prog, "--inputs", tmp_path / "in.npz", "--kernel-module", "no_such_mod")
    assert r.returncode == 2 and "cannot import kernel module 'no_such_mod'" in r.stderr
    assert "Traceback" not in r.stderr


def _two_modules(path):
    def mod(out, op, c):
        a = B.tensor("a", "ExternalInput", "float32", [8, 64], "SB")
        o = B.tensor(out, "ExternalOutput", "float32", [8, 64], "SB")
        return B.module([B.function("main", [a, o], [
            B.tensor_scalar(B.whole(a), B.whole(o), op, c)])])
    path.write_text(json.dumps([mod("o0", "mult", 2.0), mod("o1", "add", 1.0)]))


def test_run_a_json_array_runs_one_module_per_core(tmp_path):
    _two_modules(tmp_path / "two.json")
    x = np.arange(512, dtype=np.float32).reshape(8, 64)
    np.savez(tmp_path / "in.npz", a=x)
    r = cli("run", tmp_path / "two.json", "--inputs", tmp_path / "in.npz", "--out",
            tmp_path / "o.npz", "--trace", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    assert "executed 2 instructions in 2 steps (2 modules on 2 cores)" in r.stdout
    with np.load(tmp_path / "o.npz") as z:
        np.testing.assert_array_equal(z["o0"], 2 * x)
        np.testing.assert_array_equal(z["o1"], x + 1)
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert sorted(e["pid"] for e in ev if e["ph"] == "X") == [0, 1]
    r = cli("run", tmp_path / "two.json", "--inputs", tmp_path / "in.npz", "--cores", 3)
    assert r.returncode == 2 and "--cores must be 2, got 3" in r.stderr
    r = cli("run", PIPELINE, "--random-inputs", 0, "--cores", 2)
    assert r.returncode == 0 and "(1 module on 2 cores)" in r.stdout
    r = cli("run", PIPELINE, "--random-inputs", 0, "--cores", 0)
    assert r.returncode == 2 and "Traceback" not in r.stderr


DUMP = "bir_debug.sg0000.after-lower_sync.before-lower_act.json"


def _workdir(tmp_path, prog, inputs, goldens):
    sg = tmp_path / "work" / "sg00"
    sg.mkdir(parents=True)
    (sg / DUMP).write_text(json.dumps(prog))
    for name, a in {**inputs, **goldens}.items():
        np.save(sg / f"value_{name}.npy", a)
    return sg.parent


def test_check_checks_and_trace(tmp_path):
    x = np.arange(512, dtype=np.float32).reshape(8, 64)
    racy = _workdir(tmp_path / "racy", _race(False), {"a": x}, {"o": 2 * x})
    r = cli("check", racy)
    assert r.returncode == 0, r.stdout + r.stderr                 # as before
    r = cli("check", racy, "--checks", "all", "--trace", tmp_path / "t.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "finding: races: race (RAW) on 't'" in r.stdout and "FINDINGS" in r.stdout
    assert "warning: race" not in r.stdout                        # printed once
    doc = json.loads((tmp_path / "t.json").read_text())
    kept, dropped = perfetto_slices(doc)
    assert dropped == [] and sum(map(len, kept.values())) == 2
    synced = _workdir(tmp_path / "synced", _race(True), {"a": x}, {"o": 2 * x})
    r = cli("check", synced, "--checks", "all")
    assert r.returncode == 0 and "no finding(s)" in r.stdout, r.stdout + r.stderr
    r = cli("check", synced, "--checks", "bogus")
    assert r.returncode == 2 and "unknown check 'bogus'" in r.stderr


def test_check_kernel_module(tmp_path):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    gamma = rng.standard_normal((1, 512)).astype(np.float32)
    prog = json.loads((EXAMPLES / "rmsnorm_customop.json").read_text())
    work = _workdir(tmp_path, prog, {"x": x, "gamma": gamma},
                    {"y": _rmsnorm(x, gamma).astype(np.float32)})
    r = cli("check", work, "--kernel-module", EXAMPLES / "rmsnorm_kernel.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK: 1 of 1 output(s) compared" in r.stdout
    r = cli("check", work)
    assert r.returncode == 2 and "KernelSimError" in r.stderr
    r = cli("check", work, "--kernel-module", "no_such_mod")
    assert r.returncode == 2 and "cannot import kernel module" in r.stderr
