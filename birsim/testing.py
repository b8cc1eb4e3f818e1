"""Comparing simulator outputs with a reference: the tolerance table, in one place.

    from birsim.testing import assert_sim_close
    assert_sim_close(out["o"], expected, kind="arith")

Kinds of comparison:

- ``"exact"``: copies, casts, Memset/Iota/Select, transposes, integer and bit-vector ops,
  and anything whose spec is a single correctly rounded fp32 operation per stage. Values
  must be equal (NaN where NaN, the sign of zero included); integers bit for bit.
- ``"arith"``: fp32 arithmetic that the spec pins stage by stage but where a last-place
  difference is tolerable (one unit in the last place of the *output* dtype).
- ``"transcendental"``: libm functions (Activation's exp, tanh, erf, ...; Exponential;
  ``pow``), where implementations legitimately differ by a few fp32 ulps, plus one ulp of
  a narrow output dtype.

Integer dtypes are always compared exactly. A caller may pass an extra ``atol`` (a scalar
or an array, e.g. a summation error bound from :func:`fp32_sum_bound`) that is added to
the table's.

Instead of a kind, ``tolerance=`` gives the pair directly: ``(rtol, atol)`` as NumPy
spells it, or the compiler's ``--birsim-output-tolerance`` text ``"REL,ABS"``, where REL
is a percentage (nki-library passes ``100*rtol``): ``tolerance="1.0,1e-5"`` (the
compiler's default) is ``rtol=0.01, atol=1e-5``. That comparison is NumPy's
``assert_allclose`` (``|actual - expected| <= atol + rtol * |expected|``, NaN equal to
NaN, infinities exact).

A mismatch reports how many elements differ, the largest absolute and relative
difference, and the first mismatching indices with both values.
"""

from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["TOLERANCES", "KINDS", "tolerance", "parse_tolerance", "fp32_sum_bound",
           "assert_sim_close"]

KINDS = ("exact", "arith", "transcendental")

# (rtol, atol) per float dtype for "arith": rtol = 2^-mantissa_bits (one ulp of the output
# dtype relative to the value), atol = the dtype's smallest subnormal (results near zero).
_ULP = {
    "float32": (2.0 ** -23, 2.0 ** -149),
    "float32r": (2.0 ** -10, 2.0 ** -149),
    "bfloat16": (2.0 ** -7, 2.0 ** -133),
    "float16": (2.0 ** -10, 2.0 ** -24),
    "float8e4": (2.0 ** -3, 2.0 ** -9),
    "float8_e4m3fn": (2.0 ** -3, 2.0 ** -9),
    "float8e5": (2.0 ** -2, 2.0 ** -16),
    "float8e3": (2.0 ** -4, 2.0 ** -6),
}
# libm-level agreement in fp32: a few ulps, absolute 1e-6 around zero crossings.
_TRANS_F32 = (1e-5, 1e-6)

#: The table: TOLERANCES[kind][dtype] = (rtol, atol).
TOLERANCES = {
    "exact": {dt: (0.0, 0.0) for dt in _ULP},
    "arith": dict(_ULP),
    "transcendental": {dt: (max(r, _TRANS_F32[0]), max(a, _TRANS_F32[1]))
                       for dt, (r, a) in _ULP.items()},
}

_NP_TO_BIR = {
    "float32": "float32", "bfloat16": "bfloat16", "float16": "float16",
    "float8_e4m3": "float8e4", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8e5",
    "float8_e3m4": "float8e3",
}


def _bir_dtype(arr):
    return _NP_TO_BIR.get(np.asarray(arr).dtype.name)


def _kind_tolerance(kind, dtype):
    return tolerance(kind, dtype)


def tolerance(kind: str, dtype: str) -> Tuple[float, float]:
    """``(rtol, atol)`` for comparing values of BIR dtype ``dtype`` (a float dtype) with
    comparison ``kind``."""
    if kind not in TOLERANCES:
        raise ValueError("kind must be one of %s, got %r" % (KINDS, kind))
    return TOLERANCES[kind][dtype]


def parse_tolerance(tol: Union[str, Sequence[float]]) -> Tuple[float, float]:
    """``(rtol, atol)`` from ``tolerance=``: a ``(rtol, atol)`` pair, or the compiler's
    ``"REL,ABS"`` text with REL in percent."""
    if isinstance(tol, str):
        parts = tol.replace(" ", "").split(",")
        try:
            rel, abs_ = (float(p) for p in parts)
        except ValueError:
            raise ValueError("tolerance must be 'REL,ABS' (REL in percent, as the compiler's "
                             "--birsim-output-tolerance), got %r" % tol) from None
        rtol, atol = rel / 100.0, abs_
    else:
        try:
            rtol, atol = (float(v) for v in tol)
        except (TypeError, ValueError):
            raise ValueError("tolerance must be an (rtol, atol) pair or 'REL,ABS' text, "
                             "got %r" % (tol,)) from None
    if not (rtol >= 0 and atol >= 0):
        raise ValueError("tolerance must be non-negative, got %r" % (tol,))
    return rtol, atol


def fp32_sum_bound(abs_terms: Any, n: int) -> np.ndarray:
    """An order-independent bound on the rounding error of an fp32 sum of ``n`` terms
    whose absolute values sum to ``abs_terms`` (Higham's gamma_n, plus one product
    rounding per term)."""
    u = 2.0 ** -24
    g = (n + 1) * u / (1 - (n + 1) * u)
    return g * np.asarray(abs_terms, dtype=np.float64)


def assert_sim_close(actual: Any, expected: Any, *, kind: str = "arith",
                     dtype: Optional[str] = None, atol: Any = 0.0, err_msg: str = "",
                     tolerance: Union[str, Sequence[float], None] = None) -> None:
    """Assert that simulator output ``actual`` matches reference ``expected`` with the
    tolerance of ``kind`` for ``dtype`` (default: the dtype of ``actual``), or with
    ``tolerance`` (``(rtol, atol)`` or the compiler's ``"REL,ABS"``, REL in percent) when
    given. NaNs must match NaNs; infinities must match exactly; ``atol`` (scalar or array)
    is added to the absolute tolerance."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError("shape mismatch: actual %s, expected %s %s"
                             % (actual.shape, expected.shape, err_msg))
    if tolerance is not None:
        rtol, tatol = parse_tolerance(tolerance)
        _allclose(actual, expected, rtol, tatol + np.asarray(atol, dtype=np.float64), err_msg,
                  "tolerance rtol=%g atol=%g" % (rtol, tatol))
        return
    if actual.dtype.kind in "iub" or expected.dtype.kind in "iub":
        if actual.dtype != expected.dtype:
            raise AssertionError("dtype mismatch: actual %s, expected %s %s"
                                 % (actual.dtype, expected.dtype, err_msg))
        bad = actual != expected
        _report(bad, actual, expected, "integers must match exactly", err_msg)
        return
    if dtype is None:
        dtype = _bir_dtype(actual) or "float32"
    rtol, tatol = _kind_tolerance(kind, dtype)
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    bad = nan_a != nan_e
    both = ~(nan_a | nan_e)
    inf = both & (np.isinf(a) | np.isinf(e))
    bad |= inf & (a != e)
    fin = both & ~inf
    with np.errstate(invalid="ignore", over="ignore"):
        lim = tatol + np.asarray(atol, dtype=np.float64) + rtol * np.abs(e)
        bad |= fin & (np.abs(a - e) > lim)
    if kind == "exact":
        bad |= fin & (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e))
    _report(bad, actual, expected, "%s comparison (%s)" % (kind, dtype), err_msg)


def _allclose(actual, expected, rtol, atol, err_msg, what):
    """NumPy's assert_allclose, with birsim's report (first indices) on a mismatch."""
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    try:
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=err_msg)
    except AssertionError:
        with np.errstate(invalid="ignore", over="ignore"):
            bad = ~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        _report(bad, actual, expected, what, err_msg)
        raise


def _differences(bad, actual, expected):
    """Largest absolute and relative difference over the finite mismatches."""
    try:
        a = np.asarray(actual, dtype=np.float64)[bad]
        e = np.asarray(expected, dtype=np.float64)[bad]
    except (TypeError, ValueError):
        return ""
    fin = np.isfinite(a) & np.isfinite(e)
    if not fin.any():
        return ""
    d = np.abs(a[fin] - e[fin])
    with np.errstate(divide="ignore", invalid="ignore"):
        r = d / np.abs(e[fin])
    return "; max abs difference %.6g, max rel difference %.6g" % (d.max(), np.nanmax(r))


def _report(bad, actual, expected, what, err_msg):
    bad = np.asarray(bad)
    if not bad.any():
        return
    idx = np.argwhere(bad) if bad.ndim else [()]
    lines = []
    for i in idx[:8]:
        i = tuple(int(v) for v in i)
        lines.append("  at %s: actual %r, expected %r" % (i, actual[i].item()
                     if hasattr(actual[i], "item") else actual[i], expected[i].item()
                     if hasattr(expected[i], "item") else expected[i]))
    raise AssertionError("%d of %d elements differ in %s%s %s\n%s"
                         % (int(bad.sum()), bad.size, what,
                            _differences(bad, actual, expected), err_msg, "\n".join(lines)))
