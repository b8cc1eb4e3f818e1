"""MatmultSparse: birsim's reading of docs/spec/machine-model.md §6.2 ("128 active rows only; 32
sub-tiles; an int16 tag tensor in in2 selects the active positions"; README choices),
checked against NumPy oracles written here.

in[1] [128, M] compressed stationary rows; in[2] int16 [32, M] tags, nibble q of word [g, m]
= position d of active row r = 32 q + g inside sub-tile g; in[0] the dense moving operand
[128, 4, N] whose dense row k = 128 c + p is (partition p, chunk c); row r meets dense row
k = g + 32 (d // 4) + 128 (d % 4); out[m, n] = sum_r in1[r, m] * in0[k, n] (fp32, in r order)."""

import warnings

import numpy as np
import pytest

import birsim

from _compute import In, Out, program, run1
from bir import ap, function, insn, module, tensor, whole


def dense_moving(x):
    """[128, 4N] moving operand -> the [512, N] dense contraction rows (k = 128 c + p)."""
    N = x.shape[1] // 4
    return x.reshape(128, 4, N).transpose(1, 0, 2).reshape(512, N)


def dense_row(tags):
    """[128, M] dense contraction row of each active row r and column m."""
    t = tags.astype(np.int64) & 0xFFFF
    r = np.arange(128)[:, None]
    g, q = r % 32, r // 32
    d = (t[g[:, 0]] >> (4 * q)) & 0xF
    return g + 32 * (d // 4) + 128 * (d % 4)


def oracle(x, w, tags):
    """Products rounded to fp32 and summed in ascending r, as the kernel does."""
    xd, k = dense_moving(np.asarray(x, np.float32)), dense_row(tags)
    M = w.shape[1]
    res = np.zeros((M, xd.shape[1]), np.float32)
    for r in range(128):
        res = res + (np.float32(1) * w[r][:, None].astype(np.float32)) * xd[k[r]]
    return res


def oracle_dense_weights(x, w, tags):
    """The same product as a dense [512, M] weight matrix (exact for small integers)."""
    k = dense_row(tags)
    wd = np.zeros((512, w.shape[1]), np.float64)
    for r in range(128):
        np.add.at(wd, (k[r], np.arange(w.shape[1])), w[r])
    return (wd.T @ dense_moving(np.asarray(x, np.float64))).astype(np.float32)


def random_tags(rng, M):
    return rng.integers(-32768, 32768, (32, M)).astype(np.int16)


def run_sparse(x, w, tags, xdt="float32", wdt="float32", tdt="int16", layout="contig", **keys):
    M, N = w.shape[1], x.shape[1] // 4
    return run1("MatmultSparse", [In("x", x, xdt, layout), In("w", w, wdt, layout),
                                  In("t", tags, tdt)], [Out("y", (M, N))], engine="PE",
                **keys)[0]


@pytest.mark.parametrize("M,N", [(1, 1), (8, 16), (128, 32), (33, 7)])
@pytest.mark.parametrize("layout", ["contig", "strided"])
def test_matmult_sparse_matches_oracle(M, N, layout):
    rng = np.random.default_rng(M * 100 + N)
    x = rng.standard_normal((128, 4 * N)).astype(np.float32)
    w = rng.standard_normal((128, M)).astype(np.float32)
    tags = random_tags(rng, M)
    np.testing.assert_array_equal(run_sparse(x, w, tags, layout=layout), oracle(x, w, tags))


@pytest.mark.parametrize("xdt,wdt,tdt", [("bfloat16", "bfloat16", "int16"),
                                         ("float8e4", "float16", "int16"),
                                         ("uint8", "float32", "uint16")])
def test_matmult_sparse_dtypes_small_integers(xdt, wdt, tdt):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 5, (128, 4 * 8)).astype(np.float32)
    w = rng.integers(-3, 4, (128, 16)).astype(np.float32)
    tags = random_tags(rng, 16)
    if tdt == "uint16":
        tags = tags.view(np.uint16)                              # the same 16 bits
    y = run_sparse(x, w, tags, xdt, wdt, tdt=tdt)
    np.testing.assert_array_equal(y, oracle_dense_weights(x, w, tags))


def test_matmult_sparse_reading_is_not_the_obvious_wrong_ones():
    """A dense matmul ignoring the tags, or sub-tiles of 4 consecutive rows picking from 16
    consecutive dense rows, give other numbers."""
    rng = np.random.default_rng(11)
    x = rng.integers(-4, 5, (128, 4 * 4)).astype(np.float32)
    w = rng.integers(-4, 5, (128, 8)).astype(np.float32)
    tags = random_tags(rng, 8)
    y = run_sparse(x, w, tags)
    np.testing.assert_array_equal(y, oracle_dense_weights(x, w, tags))
    ignore_tags = w.T @ x[:, :4]
    t = tags.astype(np.int64) & 0xFFFF
    consecutive = np.zeros_like(y)
    xd4 = x.reshape(128, 4, 4).reshape(512, 4)               # k = 4 p + c
    for r in range(128):
        d = (t[r // 4] >> (4 * (r % 4))) & 0xF
        consecutive += w[r][:, None] * xd4[16 * (r // 4) + d]
    assert not np.array_equal(y, ignore_tags)
    assert not np.array_equal(y, consecutive)


def test_matmult_sparse_one_tag_picks_one_row():
    """Tag nibble d of sub-tile 5 for row 32*2+5 = 69 selects dense row 5 + 32*(d//4) + 128*(d%4)."""
    x = np.zeros((128, 4), np.float32)                          # N = 1: x[p, c] = dense 128c+p
    for k in range(512):
        x[k % 128, k // 128] = k
    w = np.zeros((128, 1), np.float32)
    w[69, 0] = 1.0
    tags = np.zeros((32, 1), np.int16)
    tags[5, 0] = np.int16(0x0E00)                               # nibble 2 = 14 -> b 3, c 2
    y = run_sparse(x, w, tags)
    assert y[0, 0] == 5 + 32 * 3 + 128 * 2


def psum_prog(start_then_acc):
    P = 128
    allocs = [tensor("x", "ExternalInput", "float32", (P, 8), "DRAM"),
              tensor("w", "ExternalInput", "float32", (P, 4), "DRAM"),
              tensor("t", "ExternalInput", "int16", (32, 4), "DRAM"),
              tensor("p", "Internal", "float32", (4, 2), "PSUM"),
              tensor("y", "ExternalOutput", "float32", (4, 2), "DRAM")]
    mm = lambda name, flag: insn(name, "MatmultSparse", "PE",                # noqa: E731
                                 ins=[whole("x", (P, 8)), whole("w", (P, 4)),
                                      whole("t", (32, 4), "int16")],
                                 outs=[whole("p", (4, 2))], accumulation_flag=flag)
    body = [mm("a", 2)] + ([mm("b", 1)] if start_then_acc else [])
    body.append(insn("c", "TensorCopy", "DVE", ins=[whole("p", (4, 2))], outs=[whole("y", (4, 2))]))
    return module([function("main", allocs, body)])


def test_matmult_sparse_psum_start_then_accumulate():
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, (128, 8)).astype(np.float32)
    w = rng.integers(-3, 4, (128, 4)).astype(np.float32)
    t = random_tags(rng, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        one = birsim.Simulator(psum_prog(False)).run({"x": x, "w": w, "t": t})["y"]
        two = birsim.Simulator(psum_prog(True)).run({"x": x, "w": w, "t": t})["y"]
    np.testing.assert_array_equal(one, oracle_dense_weights(x, w, t))
    np.testing.assert_array_equal(two, 2 * oracle_dense_weights(x, w, t))


def test_matmult_sparse_warns_naming_the_instruction():
    prog = program("MatmultSparse", [In("x", np.ones((128, 4))), In("w", np.ones((128, 1))),
                                     In("t", np.zeros((32, 1)), "int16")], [Out("y", (1, 1))],
                   engine="PE")
    with pytest.warns(birsim.BirsimWarning, match="MatmultSparse.*birsim's reading|birsim's reading.*MatmultSparse"):
        birsim.load(prog)


@pytest.mark.parametrize("xs,ws,ts,tdt,match", [
    ((64, 4), (64, 1), (32, 1), "int16", "128-active-rows"),
    ((128, 6), (128, 1), (32, 1), "int16", "in\\[0\\] \\(moving\\)"),
    ((128, 4), (128, 2), (16, 2), "int16", "in\\[2\\] \\(tags\\)"),
    ((128, 4), (128, 2), (32, 3), "int16", "in\\[2\\] \\(tags\\)"),
    ((128, 4), (128, 1), (32, 1), "int32", "int16 or uint16"),
    ((128, 4), (128, 1), (32, 1), "float32", "int16 or uint16"),
])
def test_matmult_sparse_bad_operands(xs, ws, ts, tdt, match):
    with pytest.raises(birsim.BirsimError, match=match):
        run1("MatmultSparse", [In("x", np.ones(xs)), In("w", np.ones(ws)),
                               In("t", np.zeros(ts), tdt)], [Out("y", (ws[1], xs[1] // 4 or 1))],
             engine="PE")


def test_matmult_sparse_bad_output_shape():
    with pytest.raises(birsim.SimulationError, match="out\\[0\\]"):
        run1("MatmultSparse", [In("x", np.ones((128, 8))), In("w", np.ones((128, 3))),
                               In("t", np.zeros((32, 3)), "int16")], [Out("y", (3, 4))],
             engine="PE")


def test_matmult_sparse_needs_three_inputs():
    with pytest.raises(birsim.BirsimError, match="in\\[2\\]"):
        run1("MatmultSparse", [In("x", np.ones((128, 4))), In("w", np.ones((128, 1)))],
             [Out("y", (1, 1))], engine="PE")


@pytest.mark.parametrize("key,value", [("compress_ratio", 2), ("is_transpose", True),
                                       ("replication_num_rows", 4)])
def test_matmult_sparse_unmodelled_keys_are_program_errors(key, value):
    with pytest.raises(birsim.ProgramError, match="MatmultSparse key '%s'" % key):
        run_sparse(np.ones((128, 4), np.float32), np.ones((128, 1), np.float32),
                   np.zeros((32, 1), np.int16), **{key: value})


def test_matmult_sparse_compress_ratio_4_is_accepted():
    rng = np.random.default_rng(2)
    x, w, t = (rng.standard_normal((128, 8)).astype(np.float32),
               rng.standard_normal((128, 3)).astype(np.float32), random_tags(rng, 3))
    np.testing.assert_array_equal(run_sparse(x, w, t, compress_ratio=4), oracle(x, w, t))
