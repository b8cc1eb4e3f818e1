"""Bad input gets a clear error and loses nothing (house style G18.6, G18.7).

- Allocation fault injection: the n-th allocation of the C core fails, for every n up to
  the number a full load + run needs; each attempt must end in MemoryError (or succeed),
  never crash, and a later normal run must still work. Under the ASan CI pass this also
  checks the failure paths for leaks and invalid accesses.
- Crash-only fuzzing: randomly mutated example programs must either run or raise a
  birsim error (or the documented ValueError/TypeError for bad options) -- no other
  exception, no crash, no hang (a small max_steps bounds every run).
"""

import copy
import os
import json
import pathlib
import random
import warnings

import numpy as np
import pytest

import birsim
from birsim import _birsim

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "examples"


def example(name):
    return json.loads((EXAMPLES / name).read_text())


def tiled_inputs():
    rng = np.random.default_rng(7)
    return {"x": rng.standard_normal((512, 128), dtype=np.float32),
            "w": rng.standard_normal((512, 512), dtype=np.float32),
            "bias": rng.standard_normal((128, 1), dtype=np.float32)}


def load_and_run(prog, inputs, **opts):
    module = birsim.load(prog)
    return birsim.Simulator(module, **opts).run(inputs)


def test_every_allocation_failure_is_a_clean_memory_error():
    prog, inputs = example("tiled_matmul.json"), tiled_inputs()
    want = load_and_run(prog, inputs)["out"]
    failures = 0
    try:
        for n in range(0, 400):
            _birsim._fail_alloc_after(n)
            try:
                out = load_and_run(prog, inputs)["out"]
            except MemoryError:
                failures += 1
                continue
            finally:
                _birsim._fail_alloc_after(-1)
            np.testing.assert_array_equal(out, want)     # enough allocations: it ran
            break
        else:
            pytest.fail("the run never completed within 400 allowed allocations")
    finally:
        _birsim._fail_alloc_after(-1)
    assert failures > 10          # the loop really exercised the failure paths
    np.testing.assert_array_equal(load_and_run(prog, inputs)["out"], want)


_VALUES = [None, -1, 0, 1, 2**31, -2**40, 3.5, "", "zz", [], [[1, 2]], {}, True,
           [[1, 128], [0, 4]], {"kind": "AffIVKind", "axis": "k"}]


def _mutate(obj, rng):
    """Change one randomly chosen value somewhere in the JSON tree."""
    paths = []

    def walk(o, path):
        if isinstance(o, dict):
            for k, v in o.items():
                paths.append((o, k))
                walk(v, path + [k])
        elif isinstance(o, list):
            for i, v in enumerate(o):
                paths.append((o, i))
                walk(v, path + [i])
    walk(obj, [])
    parent, key = rng.choice(paths)
    r = rng.random()
    if r < 0.15 and isinstance(parent, dict):
        del parent[key]
    elif r < 0.3 and isinstance(parent[key], int) and not isinstance(parent[key], bool):
        parent[key] = parent[key] + rng.choice([-1, 1, 7, -1000, 1 << 20])
    else:
        parent[key] = copy.deepcopy(rng.choice(_VALUES))


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_mutated_programs_raise_birsim_errors_only(name):
    base = example(name)
    rng = random.Random(name)
    outcomes = {"ran": 0, "error": 0}
    for _ in range(int(os.environ.get("BIRSIM_FUZZ_ITERATIONS", "60"))):
        prog = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            _mutate(prog, rng)
        try:
            module = birsim.load(prog)
            sim = birsim.Simulator(module, max_steps=20_000, kernel_sim=lambda n, i, c: i[:1])
            inputs = {t.name: np.ones(t.shape, t.numpy_dtype) for t in module.inputs}
            with warnings.catch_warnings():        # mutated programs warn; that is fine
                warnings.simplefilter("ignore", birsim.BirsimWarning)
                sim.run(inputs)
            outcomes["ran"] += 1
        except (birsim.BirsimError, MemoryError):
            outcomes["error"] += 1
    assert outcomes["error"] > 0          # the mutations were real


# ---- issue 12: threads, external kernel_sim, every exception a birsim one ---------------

import signal
import subprocess
import sys
import textwrap
import threading
import time

_CUSTOM = {"functions": [{"name": "main", "allocations": [
    {"Skind": "memory_location_set", "name": "a", "kind": "ExternalInput", "dtype": "float32",
     "tensor_shape": [4, 8], "memorylocations": [{"name": "a", "type": "DRAM"}]},
    {"Skind": "memory_location_set", "name": "o", "kind": "ExternalOutput", "dtype": "float32",
     "tensor_shape": [4, 8], "memorylocations": [{"name": "o", "type": "DRAM"}]}],
    "blocks": [{"name": "b", "instructions": [
        {"name": "k", "opcode": "CustomOp", "engine": "Pool", "opFunctionName": "k",
         "srcsShape": [[4, 8]], "dstsShape": [[4, 8]],
         "ins": [{"kind": "physical_ap", "memref": "a", "ap": [[8, 4], [1, 8]]}],
         "outs": [{"kind": "physical_ap", "memref": "o", "ap": [[8, 4], [1, 8]]}]}]}]}]}


def test_second_concurrent_run_of_one_simulator_is_busy_and_first_is_right():
    started, release = threading.Event(), threading.Event()

    def slow(name, inputs, config):          # holds the first run inside the simulation
        started.set()
        release.wait(30)
        return [inputs[0] * 2]
    sim = birsim.Simulator(_CUSTOM, kernel_sim=slow)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    result = {}
    t = threading.Thread(target=lambda: result.update(out=sim.run(a=a)["o"]))
    t.start()
    assert started.wait(30)
    for call in (lambda: sim.run(a=a), lambda: sim.read("o"), lambda: sim.register("x")):
        with pytest.raises(birsim.SimulationError, match="simulator busy"):
            call()
    release.set()
    t.join(30)
    np.testing.assert_array_equal(result["out"], a * 2)
    np.testing.assert_array_equal(sim.run(a=a)["o"], a * 2)    # usable again


def test_threads_hammering_one_simulator_never_crash_or_mix_results():
    prog, inputs = example("tiled_matmul.json"), tiled_inputs()
    want = load_and_run(prog, inputs)["out"]
    sim = birsim.Simulator(prog)
    outs, busy = [], []

    def go():
        for _ in range(4):
            try:
                outs.append(sim.run(inputs)["out"])
            except birsim.SimulationError as e:
                assert "simulator busy" in str(e)
                busy.append(e)
    ts = [threading.Thread(target=go) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert outs and all(np.array_equal(o, want) for o in outs)
    assert len(outs) + len(busy) == 12


def _exe(tmp_path, body, name="ks"):
    p = tmp_path / name
    p.write_text("#!" + sys.executable + "\n" + textwrap.dedent(body))
    p.chmod(0o755)
    return str(p)


def _sh(tmp_path, body, name="ks.sh"):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return str(p)


def test_kernel_timeout_has_a_documented_default():
    from birsim.kernels import DEFAULT_TIMEOUT
    sim = birsim.Simulator(_CUSTOM)
    assert sim.kernel_timeout == DEFAULT_TIMEOUT and 0 < DEFAULT_TIMEOUT < float("inf")
    assert birsim.Simulator(_CUSTOM, kernel_timeout=None).kernel_timeout is None


def test_kernel_sim_timeout_kills_child_and_grandchild(tmp_path):
    pidfile = tmp_path / "pids"
    exe = _sh(tmp_path, f"sleep 60 &\necho $$ $! > {pidfile}\nsleep 60\n")
    t = time.monotonic()
    with pytest.raises(birsim.KernelSimError, match="timed out after 3"):
        birsim.Simulator(_CUSTOM, kernel_sim=exe, kernel_timeout=3).run(a=np.ones((4, 8), np.float32))
    assert time.monotonic() - t < 30
    for pid in map(int, pidfile.read_text().split()):
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"process {pid} survived the timeout")


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_kernel_sim_output_must_be_a_regular_file(tmp_path, kind):
    make = {"fifo": "os.mkfifo(out)",
            "symlink": f"os.symlink({str(tmp_path / 'elsewhere.npy')!r}, out)",
            "directory": "os.mkdir(out)"}[kind]
    np.save(tmp_path / "elsewhere.npy", np.zeros((4, 8), np.float32))
    exe = _exe(tmp_path, f"""
        import json, os, sys
        cfg = json.load(open(sys.argv[1]))
        out = cfg["outputs"][0]["path"]
        {make}
    """)
    t = time.monotonic()
    with pytest.raises(birsim.KernelSimError, match="output .* (FIFO|not a regular|outside|malformed)"):
        birsim.Simulator(_CUSTOM, kernel_sim=exe, kernel_timeout=20).run(
            a=np.ones((4, 8), np.float32))
    assert time.monotonic() - t < 15        # a FIFO used to block forever


def test_ctrl_c_during_external_kernel_is_a_keyboard_interrupt(tmp_path):
    pidfile = tmp_path / "pid"
    exe = _sh(tmp_path, f"echo $$ > {pidfile}\nsleep 1000\n")
    child = textwrap.dedent(f"""
        import json, signal, sys, time, numpy as np, birsim
        signal.signal(signal.SIGINT, signal.default_int_handler)   # even if started ignored
        P = json.loads({json.dumps(json.dumps(_CUSTOM))})
        print("running", flush=True)
        try:
            birsim.Simulator(P, kernel_sim={exe!r}).run(a=np.ones((4, 8), np.float32))
            print("returned", flush=True)
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
        except BaseException as e:
            print("other", type(e).__name__, flush=True)
        try:
            time.sleep(1.0)
            print("clean", flush=True)
        except KeyboardInterrupt:
            print("late KeyboardInterrupt", flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "running"
        for _ in range(600):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        time.sleep(0.5)                          # the run is now waiting for the kernel
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert out.split() == ["KeyboardInterrupt", "clean"], (out, err[-1500:])
    assert "Exception ignored" not in err
    kid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(kid, 0)
            time.sleep(0.05)


def test_every_exception_of_a_fuzzing_pass_is_a_birsim_one():
    """tests/fuzz.py in-process: 3,000 mutated programs through load, Simulator, run,
    read and register; anything else than a BirsimError with a message is a finding."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import fuzz
    seeds = fuzz.load_seeds()
    assert len(seeds) > 100
    findings = []
    for n in range(int(os.environ.get("BIRSIM_FUZZ_ITERATIONS", "3000"))):
        name, prog, rng = fuzz.make_case(seeds, 12, n)
        res = fuzz.run_case(prog, rng)
        if res is not None:
            findings.append((n, name, res))
    assert not findings, findings[:5]


def test_cli_reports_birsim_errors_without_traceback(tmp_path):
    src = pathlib.Path(__file__).resolve().parent.parent / "data" / "repros"
    for name in ("pyexc_unicode_surrogate_name.json", "memoryerror_1tib_dram.json",
                 "pyexc_overflow_shape_product.json"):
        p = subprocess.run([sys.executable, "-m", "birsim", "run", str(src / name),
                            "--random-inputs", "0"], capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and p.returncode < 128
        assert "Traceback" not in p.stderr and "birsim:" in p.stderr, p.stderr[-800:]


def test_loaded_modules_and_simulators_are_freed_without_the_cyclic_gc():
    """A Module (and its C program) must not sit in a reference cycle: programs are large,
    and a cycle keeps them until a full collection (the leak soak's error path grew by
    12 KB per load+run before the module group held its Modules weakly)."""
    import gc
    import weakref
    from bir import copy_program
    was = gc.isenabled()
    gc.disable()
    try:
        for n in (1, 2):
            src = copy_program() if n == 1 else [copy_program(), copy_program()]
            mods = birsim.load(src)
            refs = [weakref.ref(m) for m in (mods if n == 2 else [mods])]
            sim = birsim.Simulator(mods)
            sref = weakref.ref(sim)
            del mods, sim
            assert sref() is None and all(r() is None for r in refs), n
    finally:
        if was:
            gc.enable()
