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

Instead of a kind, give the tolerance directly, in one of two conventions:

- ``rtol=`` (and ``atol=``) as NumPy spells them, fractions: ``rtol=1e-3`` is 0.1 %;
- ``tolerance=``, the compiler's *percent* form (``--birsim-output-tolerance``):
  ``"REL,ABS"`` text or a ``(REL, ABS)`` pair, REL in percent in both (nki-library
  passes ``100*rtol``): ``tolerance="1.0,1e-5"`` (the compiler's default) is
  ``rtol=0.01, atol=1e-5``.

Every comparison is :func:`isclose` (NumPy's ``isclose`` in float64:
``|actual - expected| <= atol + rtol * |expected|``, NaN equal to NaN, infinities
exact), also used by ``birsim check``. nki-library's validation modes: ``mode="max"``
(range-relative: ``|actual - expected| <= atol + rtol * max|expected|``) and
``min_pass_rate`` (the fraction of elements that must pass; default 1.0).

A mismatch reports how many elements differ, the largest absolute and relative
difference, a histogram of ``|error| / tolerance`` in decades, and the first
mismatching indices with both values.
"""

from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["TOLERANCES", "KINDS", "MODES", "tolerance", "parse_tolerance", "isclose",
           "fp32_sum_bound", "assert_sim_close"]

KINDS = ("exact", "arith", "transcendental")
#: ``mode=``: ``"elementwise"`` (rtol relative to each expected value, NumPy's) or
#: ``"max"`` (rtol relative to the largest finite ``|expected|``, nki-library's).
MODES = ("elementwise", "max")

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
    """``(rtol, atol)`` (NumPy's fractions) from the compiler's ``--birsim-output-tolerance``
    form: ``"REL,ABS"`` text or a ``(REL, ABS)`` pair, REL in percent in both. The one
    parser of that form (``assert_sim_close(tolerance=)``, ``birsim check --tolerance``,
    :func:`birsim.workdir.check`)."""
    if isinstance(tol, str):
        parts = tol.replace(" ", "").split(",")
        try:
            rel, abs_ = (float(p) for p in parts)
        except ValueError:
            raise ValueError("tolerance must be 'REL,ABS' (REL in percent, as the compiler's "
                             "--birsim-output-tolerance), got %r" % tol) from None
    else:
        try:
            rel, abs_ = (float(v) for v in tol)
        except (TypeError, ValueError):
            raise ValueError("tolerance must be 'REL,ABS' text or a (REL, ABS) pair, REL in "
                             "percent (for fractions use rtol=, atol=), got %r"
                             % (tol,)) from None
    if not (rel >= 0 and abs_ >= 0) or not (np.isfinite(rel) and np.isfinite(abs_)):
        raise ValueError("tolerance REL and ABS must be finite and >= 0, got %r" % (tol,))
    return rel / 100.0, abs_


def isclose(actual: Any, expected: Any, rtol: float = 0.0, atol: Any = 0.0,
            mode: str = "elementwise") -> np.ndarray:
    """The element-wise comparison behind :func:`assert_sim_close` and ``birsim check``:
    NumPy's ``isclose`` in float64 (``|actual - expected| <= atol + rtol * |expected|``;
    NaN matches NaN, an infinity only itself). ``mode="max"`` is nki-library's
    range-relative mode: ``rtol`` scales the largest finite ``|expected|`` instead of each
    element's (``|actual - expected| <= atol + rtol * max|expected|``). ``atol`` may be an
    array broadcastable to the values."""
    if mode not in MODES:
        raise ValueError("mode must be one of %s, got %r" % (MODES, mode))
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    atol = np.asarray(atol, dtype=np.float64)
    if mode == "max":
        fin = np.abs(e[np.isfinite(e)])
        atol = atol + rtol * (float(fin.max()) if fin.size else 0.0)
        rtol = 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True))


def fp32_sum_bound(abs_terms: Any, n: int) -> np.ndarray:
    """An order-independent bound on the rounding error of an fp32 sum of ``n`` terms
    whose absolute values sum to ``abs_terms`` (Higham's gamma_n, plus one product
    rounding per term)."""
    u = 2.0 ** -24
    g = (n + 1) * u / (1 - (n + 1) * u)
    return g * np.asarray(abs_terms, dtype=np.float64)


def assert_sim_close(actual: Any, expected: Any, rtol: Optional[float] = None,
                     atol: Any = 0.0, *, kind: Optional[str] = None,
                     dtype: Optional[str] = None,
                     tolerance: Union[str, Sequence[float], None] = None,
                     mode: str = "elementwise", min_pass_rate: float = 1.0,
                     err_msg: str = "") -> None:
    """Assert that simulator output ``actual`` matches reference ``expected``.

    The tolerance is one of: ``rtol`` (a fraction, as NumPy's; with ``atol``); the
    compiler's percent form ``tolerance="REL,ABS"`` or ``(REL, ABS)`` (REL in percent,
    :func:`parse_tolerance`); else the table's for ``kind`` (default ``"arith"``) and
    ``dtype`` (default: the dtype of ``actual``). ``atol`` (scalar or array) is added to
    the absolute tolerance in every case. NaNs must match NaNs and infinities match only
    themselves (:func:`isclose`); under ``kind`` integers must be equal and of one dtype.
    ``mode="max"`` makes ``rtol`` relative to the largest ``|expected|`` (nki-library's
    range-relative mode); ``min_pass_rate`` is the fraction of elements that must pass
    (default 1.0: all). A failure reports the count, the largest differences, a histogram
    of ``|error| / tolerance`` in decades and the first mismatching indices."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError("shape mismatch: actual %s, expected %s %s"
                             % (actual.shape, expected.shape, err_msg))
    if not 0.0 <= min_pass_rate <= 1.0:
        raise ValueError("min_pass_rate must be in [0, 1], got %r" % (min_pass_rate,))
    if mode not in MODES:
        raise ValueError("mode must be one of %s, got %r" % (MODES, mode))
    given = [n for n, v in (("rtol", rtol), ("tolerance", tolerance), ("kind", kind))
             if v is not None]
    if len(given) > 1:
        raise ValueError("give one of rtol=, tolerance= and kind=, got %s" % " and ".join(given))
    if tolerance is not None:
        rtol, tatol = parse_tolerance(tolerance)
        what = "tolerance %r (rtol=%g atol=%g)" % (tolerance, rtol, tatol)
    elif rtol is not None:
        rtol, tatol = float(rtol), 0.0
        if not rtol >= 0:
            raise ValueError("rtol must be >= 0, got %r" % (rtol,))
        what = "rtol=%g atol=%s" % (rtol, "%g" % atol if np.ndim(atol) == 0 else "(array)")
    else:
        kind = "arith" if kind is None else kind
        if actual.dtype.kind in "iub" or expected.dtype.kind in "iub":
            if actual.dtype != expected.dtype:
                raise AssertionError("dtype mismatch: actual %s, expected %s %s"
                                     % (actual.dtype, expected.dtype, err_msg))
            _report(actual != expected, None, actual, expected,
                    "integers must match exactly", err_msg, min_pass_rate)
            return
        if dtype is None:
            dtype = _bir_dtype(actual) or "float32"
        rtol, tatol = _kind_tolerance(kind, dtype)
        what = "%s comparison (%s)" % (kind, dtype)
    lim_atol = tatol + np.asarray(atol, dtype=np.float64)
    bad = ~isclose(actual, expected, rtol, lim_atol, mode)
    if kind == "exact":
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        bad |= (a == 0) & (e == 0) & (np.signbit(a) != np.signbit(e))
    if mode == "max":
        what += ", range-relative"
    _report(bad, (rtol, lim_atol, mode), actual, expected, what, err_msg, min_pass_rate)


def _limit(tol, expected):
    """The per-element tolerance of ``tol = (rtol, atol, mode)``."""
    rtol, atol, mode = tol
    e = np.abs(np.asarray(expected, dtype=np.float64))
    if mode == "max":
        fin = e[np.isfinite(e)]
        return np.broadcast_to(atol + rtol * (float(fin.max()) if fin.size else 0.0), e.shape)
    return atol + rtol * e


#: Upper edges of the histogram's decades of ``|error| / tolerance``.
_DECADES = (1.0, 10.0, 100.0, 1e3, 1e4)


def _histogram(tol, actual, expected):
    """Counts of ``|error| / tolerance`` in decades (one line), over every element; a
    zero tolerance makes any error fall in the last decade."""
    try:
        a = np.asarray(actual, dtype=np.float64)
        e = np.asarray(expected, dtype=np.float64)
    except (TypeError, ValueError):
        return ""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.abs(a - e)
        ratio = err / (_limit(tol, expected) if tol is not None else 0.0)
    same = (a == e) | (np.isnan(a) & np.isnan(e))
    nonfin = ~same & ~np.isfinite(err)
    ratio = np.where(same, 0.0, ratio)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)[~nonfin]
    counts = np.histogram(ratio, bins=(-1.0,) + _DECADES + (np.inf,))[0] \
        if ratio.size else np.zeros(len(_DECADES) + 1, int)
    labels = ["<=1"] + ["(%g, %g]" % (lo, hi) for lo, hi in zip(_DECADES, _DECADES[1:])] \
        + [">%g" % _DECADES[-1]]
    cells = ["%s: %d" % (lab, c) for lab, c in zip(labels, counts)]
    cells.append("NaN/inf mismatch: %d" % int(nonfin.sum()))
    return "\n|error| / tolerance: " + "  ".join(cells)


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


def _report(bad, tol, actual, expected, what, err_msg, min_pass_rate=1.0):
    bad = np.asarray(bad)
    nbad = int(bad.sum())
    if not nbad:
        return
    if bad.size and (bad.size - nbad) / bad.size >= min_pass_rate:
        return
    idx = np.argwhere(bad) if bad.ndim else [()]
    lines = []
    for i in idx[:8]:
        i = tuple(int(v) for v in i)
        lines.append("  at %s: actual %r, expected %r" % (i, actual[i].item()
                     if hasattr(actual[i], "item") else actual[i], expected[i].item()
                     if hasattr(expected[i], "item") else expected[i]))
    rate = "" if min_pass_rate == 1.0 else \
        " (pass rate %.6g < min_pass_rate %g)" % ((bad.size - nbad) / bad.size, min_pass_rate)
    raise AssertionError("%d of %d elements differ in %s%s%s %s%s\n%s"
                         % (nbad, bad.size, what, rate, _differences(bad, actual, expected),
                            err_msg, _histogram(tol, actual, expected), "\n".join(lines)))
