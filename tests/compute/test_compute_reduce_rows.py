"""TensorReduce's row path (k_reduce.c: 16 rows folded together, in-register transposes,
the reassociated max/min of long rows) against the sequential fold of the NumPy
reference, bit for bit: shapes with 16+ outputs and long rows, every layout, NaNs,
signed zeros and infinities placed where a changed order would show."""

import numpy as np
import pytest

from birsim import reference as ref
from test_compute_reference_diff import rng_for, run_reduce


def tricky_rows(shape, dtype, op, rng):
    """Random rows, then rows that are all signed zeros, rows with a NaN (first, middle,
    last), rows with infinities and rows whose max/min is a zero among non-zeros."""
    P, F = shape[0], int(np.prod(shape[1:]))
    lo, hi = (0.9, 1.1) if op == "mult" else (-50, 50)
    x = rng.uniform(lo, hi, (P, F)).astype(np.float32)
    for r in range(0, P, 7):
        kind = (r // 7) % 6
        if kind == 0:
            x[r] = rng.choice(np.array([0.0, -0.0], np.float32), F)
        elif kind == 1:
            x[r, rng.integers(0, F)] = np.nan
        elif kind == 2:
            x[r, 0] = np.nan
        elif kind == 3:
            x[r, F - 1] = np.nan
        elif kind == 4:
            x[r, rng.integers(0, F)] = np.inf
            x[r, rng.integers(0, F)] = -np.inf
        else:                                  # max/min of the row is a signed zero
            x[r] = -np.abs(x[r]) if op == "max" else np.abs(x[r])
            x[r, rng.integers(0, F, 3)] = np.float32(0.0)
            x[r, rng.integers(0, F, 3)] = np.float32(-0.0)
    return ref.cast(x, dtype).reshape(shape)


def same_bits(got, want):
    got = np.asarray(got, np.float32).ravel()
    want = np.asarray(want, np.float32).ravel()
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    g, w = got[~nan].view(np.uint32), want[~nan].view(np.uint32)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, "outputs %s differ: %s vs %s" % (bad[:5], got[~nan][bad[:5]],
                                                          want[~nan][bad[:5]])


@pytest.mark.parametrize("op", ["add", "max", "min", "mult", "average"])
@pytest.mark.parametrize("din", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("F", [1, 3, 32, 37, 300])
def test_row_path_bit_identical(op, din, F):
    x = tricky_rows((128, F), din, op, rng_for("rows", op, din, F))
    got, a = run_reduce(op, "X", False, din, "float32", x)
    same_bits(got, ref.tensor_reduce(op, a, "X", "float32"))


@pytest.mark.parametrize("layout", ["strided", "poff", "bcast", "pbcast"])
@pytest.mark.parametrize("op", ["add", "max"])
@pytest.mark.parametrize("din", ["float32", "bfloat16"])
def test_row_path_layouts(layout, op, din):
    x = tricky_rows((40, 70), din, op, rng_for("rows-layout", layout, op, din))
    got, a = run_reduce(op, "X", True, din, "float32", x, layout)
    same_bits(got, ref.tensor_reduce(op, a, "X", "float32", negate=True))


@pytest.mark.parametrize("axis,shape", [("X", (20, 3, 45)), ("XY", (33, 5, 9)),
                                        ("X", (17, 2, 2, 40)), ("XY", (128, 2, 150))])
@pytest.mark.parametrize("op", ["add", "min", "average"])
def test_row_path_kept_dims(axis, shape, op):
    x = tricky_rows(shape, "float32", op, rng_for("rows-kept", axis, shape, op))
    got, a = run_reduce(op, axis, False, "float32", "float32", x)
    same_bits(got, ref.tensor_reduce(op, a, axis, "float32").reshape(got.shape))
