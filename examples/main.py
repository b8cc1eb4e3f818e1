"""birsim's main job: run a real BIR program end to end and check it against NumPy.

    python examples/main.py

Loads examples/tiled_matmul.json -- out = relu(x.T @ w + bias), with x and w split into
four 128-row K tiles loaded by DMA inside a Loop, multiplied on the PE into one PSUM tile
(start/accumulate), then a bias + ReLU epilogue on the Activation engine and a DMA store
-- runs it on deterministic inputs, and compares with NumPy. Exits 1 on a mismatch.
The time it prints is the median of RUNS runs of each side, taken alternately with the
ratios' spread; bench/ has the benchmarks proper.
"""

import os
import statistics
import sys
import time

import numpy as np

import birsim

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = 9


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    module = birsim.load(os.path.join(HERE, "tiled_matmul.json"))
    rng = np.random.default_rng(2026)
    x = rng.standard_normal((512, 128), dtype=np.float32)
    w = rng.standard_normal((512, 512), dtype=np.float32)
    bias = rng.standard_normal((128, 1), dtype=np.float32)

    sim = birsim.Simulator(module)
    t_first = _timed(lambda: sim.run({"x": x, "w": w, "bias": bias}))  # allocates SBUF/PSUM
    out = sim.run({"x": x, "w": w, "bias": bias})["out"]
    ref = np.maximum(x.T @ w + bias, np.float32(0))
    t_sims, t_nps = [], []
    for _ in range(RUNS):       # alternate, so a busy machine slows both sides alike
        t_sims.append(_timed(lambda: sim.run({"x": x, "w": w, "bias": bias})))
        t_nps.append(_timed(lambda: np.maximum(x.T @ w + bias, np.float32(0))))
    ratios = [s / max(n, 1e-9) for s, n in zip(t_sims, t_nps)]
    t_sim, t_np = statistics.median(t_sims), statistics.median(t_nps)

    err = float(np.max(np.abs(out - ref)))
    ok = np.allclose(out, ref, rtol=1e-5, atol=1e-4)
    print(f"program: {module.entry} of tiled_matmul.json, {sim.stats['instructions']} "
          f"instructions executed, {sim.stats['opcodes']}")
    print(f"out[{out.shape[0]}x{out.shape[1]}] = relu(x.T @ w + bias); max |birsim - numpy| = {err:.3g}")
    print(f"time (median of {RUNS}): birsim {t_sim * 1e3:.2f} ms per run (first run "
          f"{t_first * 1e3:.2f} ms), numpy {t_np * 1e3:.2f} ms; ratio "
          f"{statistics.median(ratios):.2f}x (spread {min(ratios):.2f}-{max(ratios):.2f}x)")
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
