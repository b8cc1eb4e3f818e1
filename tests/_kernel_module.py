"""Kernels served by the shipped ``kernel_sim`` command in tests/vm/test_vm_custom_ops.py.

Only the kernel_sim child processes import this module (by path, through --module or
BIRSIM_KERNEL_MODULE); the test process itself never registers these names."""

import numpy as np

import birsim


@birsim.kernel("ext_scale_add")
def scale_add(x, y, alpha=1.0, **attrs):
    """out0 = alpha * x + y, out1 = x - y; alpha comes from BIRKernel attributes."""
    return np.float32(alpha) * x + y, x - y


@birsim.kernel("ext_neg_bf16")
def neg_bf16(x):
    """-x in the input's own dtype (bf16 in, bf16 out: must travel as raw bits)."""
    return -x


@birsim.kernel("ext_bad_shape")
def bad_shape(x):
    return x.T


@birsim.kernel("ext_raises")
def raises(x):
    raise RuntimeError("ext_raises was asked to fail")
