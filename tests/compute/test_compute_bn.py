"""BNStats and BNStatsAggregate against the NumPy reference (birsim.reference.bn_stats /
bn_aggr, written from docs/spec/machine-model.md §6.6 and docs/spec/nki-isa-semantics.md §3.25), over input
dtypes and layouts, plus the NKI test vector (§4 item 17: bn_stats + bn_aggr equal
np.mean / np.var, also over [128, 1024] in two 512-column chunks)."""

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from _compute import LAYOUTS, In, Out, run1
from bir import ap, function, insn, module, tensor, whole


def data(shape, seed, lo=-3.0, hi=5.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8e4", "int16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bn_stats_matches_reference(dtype, layout):
    x = In("x", data((16, 40), 1) * (7 if dtype == "int16" else 1), dtype, layout)
    (y,) = run1("BNStats", [x], [Out("y", (16, 6))])
    np.testing.assert_array_equal(y, ref.bn_stats(x.data))


@pytest.mark.parametrize("F", [1, 2, 3, 511, 512])
def test_bn_stats_lane_counts(F):
    x = In("x", data((4, F), F))
    (y,) = run1("BNStats", [x], [Out("y", (4, 6))])
    np.testing.assert_array_equal(y[:, 0], (F + 1) // 2)
    np.testing.assert_array_equal(y[:, 3], F // 2)
    np.testing.assert_array_equal(y, ref.bn_stats(x.data))
    even = x.data[:, 0::2].astype(np.float64)
    np.testing.assert_allclose(y[:, 1], even.mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y[:, 2], ((even - even.mean(1, keepdims=True)) ** 2).sum(1),
                               rtol=1e-4, atol=1e-4)


def test_bn_stats_rejects_more_than_512_per_partition():
    with pytest.raises(birsim.SimulationError, match="BNStats: 513 elements per partition"):
        run1("BNStats", [In("x", data((2, 513), 3))], [Out("y", (2, 6))])


def test_bn_stats_output_shape_checked():
    with pytest.raises(birsim.SimulationError, match="outs\\[0\\] must hold 2 partitions x 6"):
        run1("BNStats", [In("x", data((2, 8), 3))], [Out("y", (2, 4))])


@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("layout", ["contig", "strided"])
def test_bn_aggr_matches_reference(k, layout):
    rng = np.random.default_rng(k)
    t = np.stack([rng.integers(0, 9, (8, k)).astype(np.float32),
                  rng.uniform(-2, 2, (8, k)).astype(np.float32),
                  rng.uniform(0, 30, (8, k)).astype(np.float32)], axis=2).reshape(8, 3 * k)
    t[0, :] = 0                                          # an all-empty partition
    x = In("t", t, "float32", layout)
    (y,) = run1("BNStatsAggregate", [x], [Out("y", (8, 2))])
    np.testing.assert_array_equal(y, ref.bn_aggr(t))
    assert np.isnan(y[0]).all()


def test_bn_aggr_rejects_partial_triples():
    with pytest.raises(birsim.SimulationError, match="triples"):
        run1("BNStatsAggregate", [In("t", data((2, 4), 1))], [Out("y", (2, 2))])


def _stats_then_aggr(x, chunk):
    P, F = x.shape
    nch = F // chunk
    allocs = [tensor("x", "ExternalInput", "float32", (P, F), "DRAM"),
              tensor("s", "Internal", "float32", (P, 6 * nch), "SB"),
              tensor("y", "ExternalOutput", "float32", (P, 2), "DRAM")]
    body = [insn("st%d" % c, "BNStats", "DVE", ins=[ap("x", [[F, P], [1, chunk]], offset=c * chunk)],
                 outs=[ap("s", [[6 * nch, P], [1, 6]], offset=6 * c)]) for c in range(nch)]
    body.append(insn("ag", "BNStatsAggregate", "DVE", ins=[whole("s", (P, 6 * nch))],
                     outs=[whole("y", (P, 2))]))
    return birsim.Simulator(module([function("main", allocs, body)])).run({"x": x})["y"]


@pytest.mark.parametrize("F,chunk", [(128, 128), (1024, 512)])
def test_nki_bn_stats_aggr_vector(F, chunk):
    """docs/spec/nki-isa-semantics.md §4 item 17: mean and population variance per partition."""
    x = data((128, F), F)
    y = _stats_then_aggr(x, chunk)
    np.testing.assert_allclose(y[:, 0], x.astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y[:, 1], x.astype(np.float64).var(axis=1), rtol=1e-4, atol=1e-5)
    stats = np.concatenate([ref.bn_stats(x[:, c:c + chunk]) for c in range(0, F, chunk)], axis=1)
    np.testing.assert_array_equal(y, ref.bn_aggr(stats))
