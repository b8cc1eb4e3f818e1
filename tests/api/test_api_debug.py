"""Step debugging (breakpoints, step, resume, on_instruction, inspection mid-run),
interrupted runs keep their stats, and the progress line."""

import os
import signal

import numpy as np
import pytest

import birsim
from birsim import build as B

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "examples")


def example(name):
    return birsim.load(os.path.join(EXAMPLES, name))


PIPE_IN = {"x": np.arange(96 * 8, dtype=np.float32).reshape(96, 8) / 100,
           "w": np.linspace(-1, 1, 64, dtype=np.float32).reshape(16, 4)}


def test_breakpoint_register_resume_gives_the_same_result():
    mod = example("halving_do_while.json")
    n = np.array([[37]], np.int32)
    plain = birsim.Simulator(mod).run({"n": n})
    sim = birsim.Simulator(mod)
    bp = sim.breakpoint(name="halve")
    assert sim.debug({"n": n}) is None and sim.paused
    assert sim.stopped[:7] == (0, "Pool", "halve", "RegisterAlu", "main", "halve_body", 0)
    assert sim.registers()["v"] == 37 >> 1 and sim.register("k") == 0
    assert sim.registers(engine="Pool")["v"] == 37 >> 1
    seen = [sim.registers()["v"]]
    while sim.resume() is None:                       # every trip stops at "halve"
        assert sim.stopped.instruction == "halve"
        seen.append(sim.registers()["v"])
    assert seen == [18, 9, 4, 2, 1, 0]
    assert not sim.paused and sim.outputs is not None
    for k in plain:
        assert np.array_equal(sim.outputs[k], plain[k])
    sim.clear_breakpoints(bp)
    assert sim.breakpoints == []
    assert np.array_equal(sim.run({"n": n})["values"], plain["values"])


def test_inspection_mid_run_semaphores_queues_tensors():
    mod = example("sync_pipeline.json")
    plain = birsim.Simulator(mod).run(PIPE_IN)
    sim = birsim.Simulator(mod)
    sim.breakpoint(name="load", block="tile")
    assert sim.debug(PIPE_IN) is None
    first = sim.stopped.step
    sems = sim.semaphores()
    assert sems.dtype == np.uint32 and sems.shape == (256,)
    assert sems[0] == 1 and not sems[1:].any()        # load's sem-inc is applied
    assert not sim.events().any()
    heads = sim.queue_heads()
    assert {e: h["instruction"] for e, h in heads.items()} == \
        {"PE": "pe", "Activation": "act", "DVE": "dve", "DMA": "store"}
    assert heads["DMA"]["position"] == 4 and heads["PE"]["block"] == "tile"
    assert np.array_equal(sim.read("xs"), PIPE_IN["x"][:16])   # the tile just loaded
    assert sim.resume() is None and sim.stopped.step > first   # the next trip's load
    assert np.array_equal(sim.read("xs"), PIPE_IN["x"][16:32])
    sim.clear_breakpoints()
    out = sim.resume()
    assert np.array_equal(out["out"], plain["out"])


def test_step_walks_the_trace_order():
    mod = example("sync_pipeline.json")
    traced = birsim.Simulator(mod, trace=True, schedule="round_robin")
    traced.run(PIPE_IN)
    sim = birsim.Simulator(mod, schedule="round_robin")
    sim.start(PIPE_IN)
    walked = []
    while True:
        s = sim.step()
        if s is None:
            break
        walked.append((s.engine, s.instruction, s.block, s.position))
    assert walked == [(r.engine, r.instruction, r.block, r.position) for r in traced.trace]
    assert np.array_equal(sim.outputs["out"], traced.run(PIPE_IN)["out"])
    with pytest.raises(birsim.SimulationError, match="no paused run"):
        sim.step()


def test_on_instruction_sees_every_instruction_and_can_pause():
    mod = example("tiled_matmul.json")
    rng = np.random.default_rng(0)
    inputs = {"x": rng.normal(size=(512, 128)).astype(np.float32),
              "w": rng.normal(size=(512, 512)).astype(np.float32),
              "bias": rng.normal(size=(128, 1)).astype(np.float32)}
    calls = []
    sim = birsim.Simulator(mod, on_instruction=lambda s, stop: calls.append(stop.opcode))
    out = sim.run(inputs)
    assert len(calls) == sim.stats["instructions"] and calls.count("Matmult") == 4
    sim.on_instruction = lambda s, stop: stop.instruction == "mm"
    assert sim.debug(inputs) is None and sim.stopped.opcode == "Matmult"
    ps = sim.read("ps")                      # first K tile only: x[:128].T @ w[:128]
    np.testing.assert_allclose(ps, inputs["x"][:128].T @ inputs["w"][:128], rtol=1e-4,
                               atol=1e-3)
    sim.on_instruction = None
    assert np.array_equal(sim.resume()["out"], out["out"])


def test_breakpoints_filter_and_refuse_nothing_matching():
    sim = birsim.Simulator(example("sync_pipeline.json"))
    assert len(sim.breakpoint(opcode="Load").instructions) == 2
    assert len(sim.breakpoint(engine="DMA", block="tile").instructions) == 2
    with pytest.raises(ValueError, match="no instruction matches {'name': 'nope'}"):
        sim.breakpoint(name="nope")
    with pytest.raises(birsim.SimulationError, match="no paused run"):
        sim.resume()


def _long_loop(trips):
    r = B.register("r")
    return B.module([B.function("main", [r], [
        B.register_move(B.reg(r), B.imm(0, "int32")),
        B.loop("i", trips, [B.register_alu(B.reg(r), B.reg(r), B.imm(1, "int32"), "add")],
               name="spin")])])


def test_interrupted_run_keeps_its_stats():
    sim = birsim.Simulator(_long_loop(10 ** 9), max_steps=10 ** 10, progress=False)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    prev = signal.signal(signal.SIGALRM, lambda *a: os.kill(os.getpid(), signal.SIGINT))
    try:
        with pytest.raises(KeyboardInterrupt):
            sim.run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, prev)
        signal.signal(signal.SIGINT, old)
    assert 0 < sim.stats["steps"] < 2 * 10 ** 9
    assert sim.stats["opcodes"]["RegisterAlu"] > 1000
    assert not sim.paused
    # a callback raising stops the run with the stats of what ran
    def boom(s, stop):
        if stop.step >= 50:
            raise RuntimeError("enough")
    sim.on_instruction = boom
    with pytest.raises(RuntimeError, match="enough"):
        sim.run()
    assert sim.stats["steps"] == 50


def test_progress_line_without_tqdm(monkeypatch, capsys):
    import sys
    import birsim._debug as dbg
    monkeypatch.setattr(dbg, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(dbg, "_PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(dbg, "_RATE_MIN", 0.0)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    birsim.Simulator(_long_loop(300000)).run()
    err = capsys.readouterr().err
    assert "\rbirsim: " in err and "/ 600,002 steps (" in err and "block spin_body" in err
    assert "steps/s" in err            # rates and totals: tests/api/test_api_user_plugin.py
    birsim.Simulator(_long_loop(300000), progress=False).run()
    assert capsys.readouterr().err == ""
