"""BNGradients, BNBackprop and BNBackprop2 (docs/spec/machine-model.md §6.6) against the NumPy
reference (birsim.reference.bn_gradients / bn_backprop, same fp32 step order) over input
dtypes, layouts and partition counts, and against an independent float64 batch-norm
backward pass (the textbook dbeta / dgamma / dx), plus the operand and key errors.

Operands (README "Choices"): x = ins[0], dy = ins[1]; BNGradients m = ins[2], vf = ins[3]
(one value per partition: a [P, 1] view, an immediate or a register); BNBackprop m, A, Bc,
scale = ins[2..5]; BNBackprop2 the same four packed in one [P, 4] tile ins[2]; N = the key
``total_elements``."""

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from _compute import LAYOUTS, Imm, In, Out, run1

DTYPES = ["float32", "bfloat16", "float16"]


def data(shape, seed, lo=-3.0, hi=5.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def col(name, v, dtype="float32", layout="contig"):
    return In(name, np.asarray(v, np.float32).reshape(-1, 1), dtype, layout)


@pytest.mark.parametrize("P", [1, 37, 128])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bn_gradients_matches_reference(dtype, layout, P):
    x = In("x", data((P, 24), P), dtype, layout)
    dy = In("dy", data((P, 24), P + 1, -1, 1), dtype, layout)
    m = col("m", data((P,), 3, -1, 1), dtype, "strided" if layout == "strided" else "contig")
    vf = col("vf", data((P,), 4, 0.2, 2), dtype)
    (y,) = run1("BNGradients", [x, dy, m, vf], [Out("g", (P, 3))])
    want = ref.bn_gradients(x.data, dy.data, m.data, vf.data)
    np.testing.assert_array_equal(y, want)
    # independent float64 computation of the same sums
    x64, g64 = x.data.astype(np.float64).reshape(P, -1), dy.data.astype(np.float64).reshape(P, -1)
    m64, v64 = m.data.astype(np.float64), vf.data.astype(np.float64)
    d = (x64 - m64) * g64
    np.testing.assert_allclose(y[:, 0], g64.sum(1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(y[:, 1], (d * v64 ** 2).sum(1), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(y[:, 2], (d * v64).sum(1), rtol=1e-5, atol=1e-3)


def test_bn_gradients_immediate_scalars_and_bf16_output():
    x, dy = In("x", data((8, 10), 1)), In("dy", data((8, 10), 2, -1, 1))
    (y,) = run1("BNGradients", [x, dy, Imm(0.5), Imm(1.25)], [Out("g", (8, 3), "bfloat16")])
    want = ref.cast(ref.bn_gradients(x.data, dy.data, 0.5, 1.25), "bfloat16")
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("P", [1, 64, 128])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bn_backprop_matches_reference(dtype, layout, P):
    rng = np.random.default_rng(P)
    x = In("x", data((P, 16), P), dtype, layout)
    dy = In("dy", data((P, 16), P + 1, -1, 1), dtype, layout)
    par = [col(n, rng.uniform(-2, 2, P), dtype) for n in ("m", "a", "bc", "sc")]
    (y,) = run1("BNBackprop", [x, dy] + par, [Out("dx", (P, 16), dtype, layout)],
                total_elements=16.0)
    want = ref.bn_backprop(x.data, dy.data, *[p.data for p in par], 16.0, dtype)
    np.testing.assert_array_equal(y, want)
    # BNBackprop2: the same four values packed in one [P, 4] tile
    tile = In("t", np.concatenate([p.data.reshape(P, 1) for p in par], axis=1), dtype)
    (y2,) = run1("BNBackprop2", [x, dy, tile], [Out("dx", (P, 16), dtype, layout)],
                 total_elements=16.0)
    np.testing.assert_array_equal(y2, want)


def test_bn_backward_chain_equals_float64_batch_norm_backward():
    """BNStats -> BNStatsAggregate give mean / variance; with vf = 1/sqrt(var + eps),
    BNGradients gives dbeta = A and dgamma = C; BNBackprop with Bc from BNGradients,
    scale = gamma * vf / N gives dx of y = gamma * (x - mean) * vf + beta."""
    P, N, eps = 32, 96, 1e-5
    x = data((P, N), 7, -2, 3)
    dy = data((P, N), 8, -1, 1)
    gamma = data((P,), 9, 0.5, 1.5)
    (st,) = run1("BNStats", [In("x", x)], [Out("s", (P, 6))])
    (mv,) = run1("BNStatsAggregate", [In("s", st)], [Out("mv", (P, 2))])
    mean, var = mv[:, 0], mv[:, 1]
    vf = (1.0 / np.sqrt(var.astype(np.float64) + eps)).astype(np.float32)
    (g,) = run1("BNGradients", [In("x", x), In("dy", dy), col("m", mean), col("vf", vf)],
                [Out("g", (P, 3))])
    scale = (gamma * vf / np.float32(N)).astype(np.float32)
    (dx,) = run1("BNBackprop", [In("x", x), In("dy", dy), col("m", mean), col("a", g[:, 0]),
                                col("bc", g[:, 1]), col("sc", scale)],
                 [Out("dx", (P, N))], total_elements=float(N))
    x64, g64 = x.astype(np.float64), dy.astype(np.float64)
    mu = x64.mean(1, keepdims=True)
    inv = 1.0 / np.sqrt(x64.var(1, keepdims=True) + eps)
    xhat = (x64 - mu) * inv
    np.testing.assert_allclose(g[:, 0], g64.sum(1), rtol=1e-5, atol=1e-4)          # dbeta
    np.testing.assert_allclose(g[:, 2], (g64 * xhat).sum(1), rtol=1e-4, atol=1e-4)  # dgamma
    want = (gamma[:, None] * inv / N) * (N * g64 - g64.sum(1, keepdims=True)
                                         - xhat * (g64 * xhat).sum(1, keepdims=True))
    np.testing.assert_allclose(dx, want, rtol=1e-3, atol=1e-5)


def _bp(ins, out=None, **keys):
    keys.setdefault("total_elements", 4.0)
    return run1("BNBackprop", ins, [out or Out("dx", (4, 4))], **keys)


X4, DY4 = In("x", data((4, 4), 1)), In("dy", data((4, 4), 2))


def test_errors_name_the_operand():
    s = [col(n, np.ones(4)) for n in "mabs"]
    with pytest.raises(birsim.SimulationError, match=r"BNGradients: ins\[1\] \(dy\) has 4 "
                       r"partitions x 5"):
        run1("BNGradients", [X4, In("dy", data((4, 5), 2)), s[0], s[1]], [Out("g", (4, 3))])
    with pytest.raises(birsim.BirsimError, match=r"BNGradients needs ins\[3\] \(vf"):
        run1("BNGradients", [X4, DY4, s[0]], [Out("g", (4, 3))])
    with pytest.raises(birsim.SimulationError, match=r"ins\[2\] \(mean\) must be .* 4 "
                       r"elements .* it has 3"):
        run1("BNGradients", [X4, DY4, col("m", np.ones(3)), s[1]], [Out("g", (4, 3))])
    with pytest.raises(birsim.SimulationError, match=r"BNGradients: outs\[0\] must hold 4 "
                       r"partitions x 3"):
        run1("BNGradients", [X4, DY4, s[0], s[1]], [Out("g", (4, 2))])
    with pytest.raises(birsim.BirsimError, match=r"BNBackprop needs ins\[5\] \(scale"):
        _bp([X4, DY4] + s[:3])
    with pytest.raises(birsim.SimulationError, match=r"BNBackprop: outs\[0\] must hold 4 "
                       r"partitions x 4"):
        _bp([X4, DY4] + s, Out("dx", (4, 3)))
    with pytest.raises(birsim.SimulationError, match=r"BNBackprop2: ins\[2\] must hold 4 "
                       r"partitions x 4 elements"):
        run1("BNBackprop2", [X4, DY4, In("t", data((4, 3), 1))], [Out("dx", (4, 4))],
             total_elements=4.0)


def test_total_elements_is_required_and_checked():
    s = [col(n, np.ones(4)) for n in "mabs"]
    with pytest.raises(birsim.ProgramError, match="total_elements"):
        run1("BNBackprop", [X4, DY4] + s, [Out("dx", (4, 4))])
    for bad in (0.0, -3.0):
        with pytest.raises(birsim.ProgramError, match="total_elements must be a finite count"):
            _bp([X4, DY4] + s, total_elements=bad)


@pytest.mark.parametrize("shape", [(4, 8), (32, 32), (64, 96), (1, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bn_stats_apply_transpose(dtype, shape):
    x = In("x", data(shape, shape[0]), dtype)
    t = ref.reduce_transpose(x.data)
    (y,) = run1("BNStats", [x], [Out("s", (t.shape[0], 6))], apply_transpose=True)
    np.testing.assert_array_equal(y, ref.bn_stats(t))
    # independently: the lanes of transposed row r are the even / odd columns of T
    t64 = ref.decode(t).astype(np.float64)
    np.testing.assert_allclose(y[:, 1], t64[:, 0::2].mean(1), rtol=1e-5, atol=1e-5)


def test_bn_stats_apply_transpose_shape_error():
    with pytest.raises(birsim.SimulationError, match=r"BNStats apply_transpose: ins\[0\] is 40 "
                       r"partitions x 8"):
        run1("BNStats", [In("x", data((40, 8), 1))], [Out("s", (40, 6))], apply_transpose=True)
