"""A CustomOp whose kernel is a Python function: fused RMSNorm, checked against NumPy.

    python examples/rmsnorm.py            # in-process kernel (the @birsim.kernel registry)
    python examples/rmsnorm.py --external # the same kernel served by the kernel_sim command

Loads examples/rmsnorm_customop.json (DMA loads into SBUF, a CustomOp "rmsnorm" on the
Pool engine, a DMA store); the kernel lives in examples/rmsnorm_kernel.py. With
--external, birsim writes the operands as .npy files and runs the shipped ``kernel_sim``
executable with BIRSIM_KERNEL_MODULE pointing at that module. Exits 1 on a mismatch.
"""

import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import birsim  # noqa: E402


def main(argv=None):
    external = "--external" in (sys.argv[1:] if argv is None else argv)
    module = birsim.load(os.path.join(HERE, "rmsnorm_customop.json"))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((128, 512), dtype=np.float32) * 3
    gamma = rng.uniform(0.5, 1.5, (1, 512)).astype(np.float32)

    if external:
        exe = shutil.which("kernel_sim") or os.path.join(os.path.dirname(sys.executable),
                                                         "kernel_sim")
        os.environ["BIRSIM_KERNEL_MODULE"] = os.path.join(HERE, "rmsnorm_kernel.py")
        sim = birsim.Simulator(module, kernel_sim=exe, kernel_timeout=120)
    else:
        import rmsnorm_kernel  # noqa: F401 -- registers "rmsnorm"
        sim = birsim.Simulator(module)
    y = sim.run({"x": x, "gamma": gamma})["y"]

    x64 = x.astype(np.float64)
    eps = 1e-6
    ref = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + eps) * gamma
    err = float(np.max(np.abs(y - ref)))
    ok = np.allclose(y, ref, rtol=1e-5, atol=1e-5)
    print(f"rmsnorm via {'external kernel_sim' if external else 'registered Python kernel'}: "
          f"y[{y.shape[0]}x{y.shape[1]}], max |birsim - numpy| = {err:.3g}; "
          f"{sim.stats['instructions']} instructions, {sim.stats['opcodes']}")
    print("MATCH" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
