"""The top-8 family -- Max, MaxIndex, MatchReplace, MaxIndexAndMatchReplace (and the newer
names Max8 / MaxIndex8 / MatchReplace8 where the loader knows them) -- against the NumPy
reference (birsim.reference.max8 / find_index8 / match_replace8, from
docs/spec/nki-isa-semantics.md §3.24) with NKI's tie-break rules and the §4 item 3 and 4 vectors."""

import numpy as np
import pytest

import birsim
from birsim import _birsim
from birsim import reference as ref

from _compute import LAYOUTS, In, Out, run1

P = 8


def data(shape, seed, n_distinct=None):
    rng = np.random.default_rng(seed)
    if n_distinct:                                     # many ties
        return rng.integers(0, n_distinct, shape).astype(np.float32)
    return rng.uniform(-50, 50, shape).astype(np.float32)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "uint8"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("ties", [None, 5])
def test_max8_matches_reference(dtype, layout, ties):
    raw = data((P, 64), 1, ties)
    if dtype == "uint8":
        raw = np.abs(raw)
    x = In("x", raw, dtype, layout)
    (y,) = run1("Max", [x], [Out("y", (P, 8))])
    np.testing.assert_array_equal(y, ref.max8(x.data))
    assert (np.diff(y, axis=1) <= 0).all()                # descending


def test_max8_nan_and_inf_order():
    x = np.zeros((2, 16), np.float32)
    x[0, 3], x[0, 5], x[0, 9] = np.inf, np.nan, -np.inf
    (y,) = run1("Max", [In("x", x)], [Out("y", (2, 8))])
    assert np.isnan(y[0, 0]) and y[0, 1] == np.inf and (y[0, 2:] == 0).all()
    np.testing.assert_array_equal(y[1], 0)


@pytest.mark.parametrize("F", [7, 16385])
def test_max8_element_limits(F):
    with pytest.raises(birsim.SimulationError, match="elements per partition"):
        run1("Max", [In("x", data((2, F), 2))], [Out("y", (2, 8))])


@pytest.mark.parametrize("out_dtype", ["uint32", "uint16", "int32"])
def test_find_index8_first_occurrence_and_duplicates(out_dtype):
    x = data((P, 40), 3, 6)
    vals = x[:, [5, 5, 5, 0, 39, 39, 2, 2]].copy()
    vals[:, 7] = 1000.0                                 # never found
    (y,) = run1("MaxIndex", [In("x", x), In("v", vals)], [Out("y", (P, 8), out_dtype)])
    want = ref.find_index8(x, vals, out_dtype)
    np.testing.assert_array_equal(y.astype(np.int64), want)
    none = ref.not_found_index(out_dtype)
    assert (y[:, 7].astype(np.int64) == none).all()      # §4 item 4: all ones


def test_find_index8_after_max8_gives_distinct_indices():
    """The router pattern: max8 then find_index8 over the same row; ties pair with
    successive positions in ascending order."""
    x = data((P, 128), 4, 9)
    (top,) = run1("Max", [In("x", x)], [Out("t", (P, 8))])
    (idx,) = run1("MaxIndex", [In("x", x), In("v", top)], [Out("y", (P, 8), "uint32")])
    for p in range(P):
        assert len(set(idx[p].tolist())) == 8
        np.testing.assert_array_equal(x[p, idx[p].astype(np.int64)], top[p])


def test_nki_match_replace8_duplicate_vector():
    """§4 item 3: data=[1,2,3,4,8,8,8,8,8,8,8], vals=[3,8,8,8,8,8,8,8] ->
    dst_idx=[2,10,9,8,7,6,5,4]."""
    d = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    v = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    out, idx = run1("MatchReplace", [In("x", d), In("v", v)],
                    [Out("y", (1, 11)), Out("i", (1, 8), "uint32")], imm_value=-1.0)
    np.testing.assert_array_equal(idx[0], [2, 10, 9, 8, 7, 6, 5, 4])
    np.testing.assert_array_equal(out[0], [1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1])


@pytest.mark.parametrize("op", ["MatchReplace", "MaxIndexAndMatchReplace"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_match_replace_matches_reference(op, dtype, layout):
    x = In("x", data((P, 48), 5, 7), dtype, layout)
    vals = ref.max8(x.data)
    out, idx = run1(op, [x, In("v", vals)], [Out("y", (P, 48), dtype), Out("i", (P, 8), "uint32")],
                    imm_value=-99.0)
    want, widx = ref.match_replace8(x.data, vals, -99.0)
    np.testing.assert_array_equal(out, ref.cast(want, dtype))
    np.testing.assert_array_equal(idx.astype(np.int64), widx)


def test_max_index_and_match_replace_needs_the_index_output():
    with pytest.raises(birsim.BirsimError, match="needs outs\\[1\\]"):
        run1("MaxIndexAndMatchReplace", [In("x", data((P, 16), 6)), In("v", data((P, 8), 7))],
             [Out("y", (P, 16))], imm_value=0.0)


def test_match_replace_needs_imm_value():
    with pytest.raises(birsim.ProgramError, match="imm_value"):
        run1("MatchReplace", [In("x", data((P, 16), 6)), In("v", data((P, 8), 7))],
             [Out("y", (P, 16))])


@pytest.mark.parametrize("alias,op", [("Max8", "Max"), ("MaxIndex8", "MaxIndex"),
                                      ("MatchReplace8", "MatchReplace")])
def test_newer_names_run_the_same_kernel(alias, op):
    if alias in _birsim.opcodes:
        pytest.fail("%s became its own opcode: give it a handler" % alias)
    try:
        birsim.load(_one(alias))
    except birsim.ProgramError as e:
        if "unknown opcode" in str(e):
            pytest.skip("the loader does not map %s to %s yet" % (alias, op))
    x = data((P, 16), 8, 4)
    ins = [In("x", x)] + ([In("v", ref.max8(x))] if op != "Max" else [])
    keys = {"imm_value": 0.0} if op == "MatchReplace" else {}
    outs = [Out("y", (P, 16) if op == "MatchReplace" else (P, 8), "float32" if op != "MaxIndex" else "uint32")]
    a = run1(alias, ins, outs, **keys)[0]
    b = run1(op, ins, outs, **keys)[0]
    np.testing.assert_array_equal(a, b)


def _one(op):
    from _compute import program
    return program(op, [In("x", data((P, 16), 9))], [Out("y", (P, 8))])
