"""TopK (NKI topk, docs/spec/nki-isa-semantics.md §3.37): birsim's reading, checked against a NumPy
oracle written here. Per group of 16 partitions the `n` active elements are read in the
snake layout (element e at partition e % 16, column e // 16); the K = outs[0] free size best
(value, then lower index) are written in ascending order, result j at partition j % 16,
column j // 16 of both outputs; every other output slot keeps its old contents."""

import warnings

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from _compute import In, Out, program, run1


def topk_oracle(x, n, K, vdtype="bfloat16", idx_init=None, val_init=None):
    x = np.asarray(x, np.float32)
    P = x.shape[0]
    vals = np.zeros((P, K), np.float32) if val_init is None else val_init.astype(np.float32)
    idxs = np.zeros((P, K), np.int64) if idx_init is None else idx_init.astype(np.int64)
    for g in range(P // 16):
        snake = x[16 * g:16 * g + 16].T.reshape(-1)[:n]      # snake[e] = x[16g + e%16, e//16]
        e = np.arange(n)
        order = np.lexsort((e, -snake, ~np.isnan(snake)))    # NaN first, larger, lower index
        best = order[:K][::-1]                               # ascending: K-th best first
        for j, s in enumerate(best):
            vals[16 * g + j % 16, j // 16] = snake[s]
            idxs[16 * g + j % 16, j // 16] = s
    return ref.cast(vals, vdtype), idxs


def run_topk(x, K, n=None, dtype="bfloat16", idx_dtype="uint32", layout="contig", P=None):
    keys = {} if n is None else {"n": n}
    xi = In("x", x, dtype, layout)
    v, i = run1("TopK", [xi], [Out("v", (x.shape[0], K), dtype), Out("i", (x.shape[0], K),
                                                                    idx_dtype)],
                engine="Pool", **keys)
    return xi.data, v, i


@pytest.mark.parametrize("P,F,n,K", [(16, 8, 128, 16), (32, 8, 100, 20), (128, 4, 64, 64),
                                     (16, 70, 1100, 1), (48, 16, 200, 37)])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("layout", ["contig", "strided"])
def test_topk_matches_oracle(P, F, n, K, ties, layout):
    rng = np.random.default_rng(P * 1000 + F + n + K)
    x = rng.integers(0, 9, (P, F)) if ties else rng.uniform(-100, 100, (P, F))
    xd, v, i = run_topk(x.astype(np.float32), K, n, layout=layout)
    ev, ei = topk_oracle(xd, n, K)
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(i, ei)


def test_topk_float32_source_and_int32_indices():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 10)).astype(np.float32)
    xd, v, i = run_topk(x, 24, 150, dtype="float32", idx_dtype="int32")
    ev, ei = topk_oracle(xd, 150, 24, "float32")
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(i, ei)


@pytest.mark.parametrize("srt", [True, False])
def test_topk_sorted_key_changes_nothing(srt):
    rng = np.random.default_rng(8)
    x = rng.uniform(-9, 9, (16, 6)).astype(np.float32)
    xi = In("x", x, "bfloat16")
    v, i = run1("TopK", [xi], [Out("v", (16, 20), "bfloat16"), Out("i", (16, 20), "uint32")],
                engine="Pool", n=90, sorted=srt)
    ev, ei = topk_oracle(xi.data, 90, 20)
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(i, ei)


def test_topk_n_absent_means_the_whole_snake():
    x = np.arange(16 * 5, dtype=np.float32).reshape(5, 16).T.copy()   # snake value = index
    _, v, i = run_topk(x, 16)
    np.testing.assert_array_equal(v[:, 0], np.arange(64, 80))         # ascending, snake slots
    np.testing.assert_array_equal(i[:, 0], np.arange(64, 80))
    assert (v[:, 1:] == 0).all() and (i[:, 1:] == 0).all()             # untouched slots


def test_topk_reading_is_not_the_obvious_wrong_ones():
    """Per-partition top-K, descending order or a row-major (not snake) read all differ."""
    x = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)            # row-major ramp
    _, v, i = run_topk(x, 4, 64)
    # snake: element e = x[e % 16, e // 16] = 4 (e % 16) + e // 16; the 4 best are 60..63
    # at e = 15, 31, 47, 63 (a row-major read would give indices 60..63)
    np.testing.assert_array_equal(v[:4, 0], [60, 61, 62, 63])
    np.testing.assert_array_equal(i[:4, 0], [15, 31, 47, 63])
    assert (v[4:] == 0).all()                                          # one result per slot
    per_row_desc = -np.sort(-x, axis=1)[:, :4]
    assert not np.array_equal(v, per_row_desc)
    assert not np.array_equal(v[:4, 0], [63, 62, 61, 60])              # not descending


def test_topk_ties_nan_and_inf():
    x = np.zeros((16, 2), np.float32)
    x[3, 0], x[5, 0], x[9, 1] = np.inf, np.nan, -np.inf
    x[1, 1] = x[2, 1] = 7.0                                            # snake 17, 18: a tie
    xd, v, i = run_topk(x, 4, 32)
    ev, ei = topk_oracle(xd, 32, 4)
    np.testing.assert_array_equal(i, ei)
    np.testing.assert_array_equal(i[:4, 0], [18, 17, 3, 5])            # 7 (idx 18), 7, inf, nan
    assert np.isnan(v[3, 0]) and v[2, 0] == np.inf


def test_topk_warns_naming_the_instruction():
    prog = program("TopK", [In("x", np.ones((16, 8), np.float32), "bfloat16")],
                   [Out("v", (16, 8), "bfloat16"), Out("i", (16, 8), "uint32")], engine="Pool")
    with pytest.warns(birsim.BirsimWarning, match="TopK.*birsim's reading|birsim's reading.*TopK"):
        birsim.load(prog)


@pytest.mark.parametrize("P,F,K,n,idt,match", [
    (8, 8, 4, 64, "uint32", "multiple of 16"),
    (16, 8, 4, 200, "uint32", "n = 200"),
    (16, 1, 12, 10, "uint32", "K = 12"),
    (16, 8, 4, 64, "float32", "index output dtype"),
])
def test_topk_bad_operands_are_simulation_errors(P, F, K, n, idt, match):
    with pytest.raises(birsim.BirsimError, match=match):
        run_topk(np.ones((P, F), np.float32), K, n, idx_dtype=idt)


@pytest.mark.parametrize("n", [7, 65536, "x", True])
def test_topk_bad_n_is_a_program_error(n):
    with pytest.raises(birsim.ProgramError, match="n"):
        run_topk(np.ones((16, 8), np.float32), 4, n)


def test_topk_needs_both_outputs():
    prog = program("TopK", [In("x", np.ones((16, 8), np.float32), "bfloat16")],
                   [Out("v", (16, 8), "bfloat16")], engine="Pool")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        with pytest.raises(birsim.BirsimError, match="outs\\[1\\]"):
            birsim.Simulator(prog).run({"x": np.ones((16, 8), np.float32)})
