"""birsim's main job: run a real BIR program end to end and check it against NumPy.

    python examples/main.py

Loads examples/tiled_matmul.json -- out = relu(x.T @ w + bias), with x and w split into
four 128-row K tiles loaded by DMA inside a Loop, multiplied on the PE into one PSUM tile
(start/accumulate), then a bias + ReLU epilogue on the Activation engine and a DMA store
-- runs it on deterministic inputs, and compares with NumPy. Exits 1 on a mismatch.
"""

import os
import sys
import time

import numpy as np

import birsim

HERE = os.path.dirname(os.path.abspath(__file__))


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
    times = []
    for _ in range(3):                      # the first run also allocates SBUF/PSUM
        t0 = time.perf_counter()
        out = sim.run({"x": x, "w": w, "bias": bias})["out"]
        times.append(time.perf_counter() - t0)
    t_sim = min(times[1:])

    ref = np.maximum(x.T @ w + bias, np.float32(0))
    t_np = min(_timed(lambda: np.maximum(x.T @ w + bias, np.float32(0))) for _ in range(3))

    err = float(np.max(np.abs(out - ref)))
    ok = np.allclose(out, ref, rtol=1e-5, atol=1e-4)
    print(f"program: {module.entry} of tiled_matmul.json, {sim.stats['instructions']} "
          f"instructions executed, {sim.stats['opcodes']}")
    print(f"out[{out.shape[0]}x{out.shape[1]}] = relu(x.T @ w + bias); max |birsim - numpy| = {err:.3g}")
    print(f"time: birsim {t_sim * 1e3:.2f} ms per run (first run {times[0] * 1e3:.2f} ms), "
          f"numpy {t_np * 1e3:.2f} ms (ratio {t_sim / max(t_np, 1e-9):.1f}x)")
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
