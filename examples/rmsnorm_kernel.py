"""The kernel of examples/rmsnorm_customop.json: a fused RMSNorm registered with birsim.

    y = x / sqrt(mean(x**2, axis=-1) + eps) * gamma

Importing this module registers it as the kernel_sim for CustomOp ``rmsnorm``. The same
module serves the external protocol too:

    BIRSIM_KERNEL_MODULE=examples/rmsnorm_kernel.py   (then Simulator(kernel_sim="kernel_sim"))
    kernel_sim --module examples/rmsnorm_kernel.py config.json
"""

import numpy as np

import birsim

EPS = 1e-6


@birsim.kernel("rmsnorm")
def rmsnorm(x, gamma, eps=EPS):
    """x: [rows, d]; gamma: [d]. Computed in fp32."""
    x = x.astype(np.float32)
    mean_sq = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return x / np.sqrt(mean_sq + np.float32(eps)) * gamma.astype(np.float32)
