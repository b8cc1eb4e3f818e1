"""Pool (both PoolFunctionType modes), TensorReduce ``apply_transpose`` and
TongaReduceMacroSymbolic against the NumPy reference (birsim.reference.pool /
reduce_transpose / tonga_reduce) and against independent NumPy computations
(np.max / np.mean over windows, np.sum over partitions), over dtypes, strided / offset
access patterns (overlapping pooling windows included) and partition counts, plus the
operand and key errors. Semantics: docs/spec/machine-model.md §6.1 and README "Choices"."""

import warnings

import numpy as np
import pytest

import birsim
from birsim import reference as ref

from _compute import In, Out, run1
from bir import affine, ap, function, insn, iv, loop, module, tensor, whole

DTYPES = ["float32", "bfloat16", "float16"]


def data(shape, seed, lo=-3.0, hi=5.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def run(allocs, body, inputs):
    sim = birsim.Simulator(module([function("main", allocs, body)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        return sim.run(inputs)


def windows(x, oh, ow, kh, kw, sh, sw):
    """x [P, H, W] -> [P, oh, ow, kh, kw] windows with strides sh, sw (NumPy indexing)."""
    P = x.shape[0]
    out = np.empty((P, oh, ow, kh, kw), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = x[:, i * sh:i * sh + kh, j * sw:j * sw + kw]
    return out


def pool_prog(x, dtype, func, oh, ow, kh, kw, sh, sw, out_dtype="float32", offset=0,
              pstride=1):
    P, H, W = x.shape
    src = ref.cast(x, dtype)
    pattern = [[H * W * pstride, P // pstride], [sh * W, oh], [sw, ow], [W, kh], [1, kw]]
    allocs = [tensor("x", "ExternalInput", dtype, (P, H * W), "DRAM"),
              tensor("y", "ExternalOutput", out_dtype, (P // pstride, oh * ow), "DRAM")]
    body = [insn("op", "Pool", "Pool", ins=[ap("x", pattern, dtype, offset=offset)],
                 outs=[whole("y", (P // pstride, oh * ow), out_dtype)], func=func)]
    return run(allocs, body, {"x": src.reshape(P, H * W)})["y"].reshape(P // pstride, oh, ow), src


@pytest.mark.parametrize("P", [1, 7, 128])
@pytest.mark.parametrize("dtype", DTYPES + ["int16"])
@pytest.mark.parametrize("func", ["Max", "Avg"])
def test_pool_overlapping_windows_match_numpy(func, dtype, P):
    x = data((P, 9, 10), P) * (5 if dtype == "int16" else 1)
    # 3x3 windows, stride 2 (they overlap), 4 x 4 outputs
    y, src = pool_prog(x, dtype, func, 4, 4, 3, 3, 2, 2)
    w = windows(ref.decode(src).reshape(P, 9, 10), 4, 4, 3, 3, 2, 2)
    np.testing.assert_array_equal(y, ref.pool(func, w, "float32"))
    want = w.max(axis=(3, 4)) if func == "Max" else w.astype(np.float64).mean(axis=(3, 4))
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("func", ["Max", "Avg", "max", "avg"])
def test_pool_offset_partition_stride_and_bf16_output(func):
    x = data((16, 6, 8), 3)
    # every other partition, a shifted origin (offset 9 = row 1, column 1), 2x2 windows
    y, src = pool_prog(x, "float32", func, 2, 3, 2, 2, 2, 2, out_dtype="bfloat16", offset=9,
                       pstride=2)
    w = windows(src[::2, 1:, 1:], 2, 3, 2, 2, 2, 2)
    np.testing.assert_array_equal(y, ref.pool(func.capitalize(), w, "bfloat16"))


def test_pool_max_skips_nan_and_all_nan_window_is_minus_flt_max():
    x = np.array([[1.0, np.nan, -2.0, 3.0], [np.nan] * 4], np.float32).reshape(2, 2, 2)
    allocs = [tensor("x", "ExternalInput", "float32", (2, 4), "DRAM"),
              tensor("y", "ExternalOutput", "float32", (2, 1), "DRAM")]
    body = [insn("op", "Pool", "Pool", ins=[ap("x", [[4, 2], [2, 2], [1, 2]])],
                 outs=[whole("y", (2, 1))], func="Max")]
    y = run(allocs, body, {"x": x.reshape(2, 4)})["y"]
    np.testing.assert_array_equal(y[:, 0], [3.0, -np.finfo(np.float32).max])


def test_pool_errors_name_the_operand_and_key():
    allocs = [tensor("x", "ExternalInput", "float32", (4, 8), "DRAM"),
              tensor("y", "ExternalOutput", "float32", (4, 8), "DRAM")]

    def go(ins_pattern, out_shape, **keys):
        keys.setdefault("func", "Max")
        body = [insn("op", "Pool", "Pool", ins=[ap("x", ins_pattern)],
                     outs=[ap("y", [[8, 4], [1, int(np.prod(out_shape))]])], **keys)]
        return run(allocs, body, {"x": np.ones((4, 8), np.float32)})

    with pytest.raises(birsim.SimulationError, match=r"Pool: ins\[0\] has 2 access-pattern dims"):
        go([[8, 4], [1, 8]], (1,))
    with pytest.raises(birsim.SimulationError, match=r"Pool: ins\[0\] has 8 windows of 2 x 2 "
                       r"elements, but outs\[0\] has 12"):
        go([[8, 4], [4, 2], [2, 2], [1, 2]], (3,))
    with pytest.raises(birsim.ProgramError, match="func"):
        go([[8, 4], [2, 4], [1, 2]], (4,), func="Min")
    with pytest.raises(birsim.ProgramError, match="missing required key 'func'"):
        go([[8, 4], [2, 4], [1, 2]], (4,), func=None)


def test_pool_ignores_axis_as_documented():
    x = data((4, 4, 4), 5)
    allocs = [tensor("x", "ExternalInput", "float32", (4, 16), "DRAM"),
              tensor("y", "ExternalOutput", "float32", (4, 4), "DRAM")]
    outs = []
    for axis in ("X", "XYZW"):
        body = [insn("op", "Pool", "Pool", ins=[ap("x", [[16, 4], [4, 4], [2, 2], [1, 2]])],
                     outs=[whole("y", (4, 4))], func="Avg", axis=axis)]
        outs.append(run(allocs, body, {"x": x.reshape(4, 16)})["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], x.reshape(4, 4, 2, 2).mean(axis=(2, 3)), rtol=1e-6)


# ---- TensorReduce apply_transpose ----------------------------------------------------

def treduce(x, op, axis, out_shape, dtype="float32", layout="contig", negate=False,
            out_dtype="float32"):
    (y,) = run1("TensorReduce", [In("x", x, dtype, layout)], [Out("y", out_shape, out_dtype)],
                op=op, axis=axis, negate=negate, apply_transpose=True)
    return y


@pytest.mark.parametrize("P", [1, 5, 32])
@pytest.mark.parametrize("layout", ["contig", "strided"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_transpose_small_tile_reduces_across_partitions(dtype, layout, P):
    x = data((P, 24), P)
    y = treduce(x, "add", "X", (24, 1), dtype, layout)
    xs = ref.cast(x, dtype)
    np.testing.assert_array_equal(y.reshape(-1), ref.tensor_reduce(
        "add", ref.reduce_transpose(xs), "X", "float32").reshape(-1))
    np.testing.assert_allclose(y[:, 0], ref.decode(xs).astype(np.float64).sum(axis=0),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["max", "min", "add", "average", "subtract"])
@pytest.mark.parametrize("P", [32, 64, 128])
def test_apply_transpose_blocks_of_32(op, P):
    x = data((P, 64), P + 3)
    y = treduce(x, op, "X", (P, 1), negate=(op == "add"))
    want = ref.tensor_reduce(op, ref.reduce_transpose(x), "X", "float32", negate=(op == "add"))
    np.testing.assert_array_equal(y.reshape(-1), want.reshape(-1))
    # independently: block-transposed row r of block (bp, bf) is column r of the block
    t = x.reshape(P // 32, 32, 2, 32).transpose(0, 3, 2, 1).reshape(P, 64)
    if op == "max":
        np.testing.assert_array_equal(y[:, 0], t.max(axis=1))
    if op == "add":
        np.testing.assert_allclose(y[:, 0], -t.astype(np.float64).sum(axis=1), rtol=1e-5,
                                   atol=1e-4)


def test_apply_transpose_free3d_axis_xy_and_integer_ops():
    x = data((32, 32), 9)
    (y,) = run1("TensorReduce", [In("x", x, "float32", "free3d")], [Out("y", (32, 1))],
                op="add", axis="XY", apply_transpose=True)
    want = ref.tensor_reduce("add", ref.reduce_transpose(x.reshape(32, 2, 16)), "XY",
                             "float32")
    np.testing.assert_array_equal(y.reshape(-1), want.reshape(-1))
    xi = np.random.default_rng(1).integers(0, 1 << 20, (8, 16)).astype(np.int32)
    (yi,) = run1("TensorReduce", [In("x", xi, "int32")], [Out("y", (16, 1), "int32")],
                 op="bitwise_xor", axis="X", apply_transpose=True)
    np.testing.assert_array_equal(yi[:, 0], np.bitwise_xor.reduce(xi, axis=0))


def test_apply_transpose_shape_errors():
    with pytest.raises(birsim.SimulationError, match=r"apply_transpose: ins\[0\] is 40 "
                       r"partitions x 8 elements"):
        treduce(data((40, 8), 1), "add", "X", (40, 1))
    with pytest.raises(birsim.SimulationError, match="transposed tile's 2 dims leaves 8 "
                       "elements, but out\\[0\\] has 4"):
        treduce(data((4, 8), 1), "add", "X", (4, 1))


def test_apply_transpose_false_is_the_plain_reduce():
    x = data((8, 16), 2)
    (y,) = run1("TensorReduce", [In("x", x)], [Out("y", (8, 1))], op="add", axis="X",
                apply_transpose=False)
    np.testing.assert_array_equal(y.reshape(-1), ref.tensor_reduce("add", x, "X", "float32"))


# ---- TongaReduceMacroSymbolic --------------------------------------------------------

@pytest.mark.parametrize("P", [1, 16, 128])
@pytest.mark.parametrize("layout", ["contig", "strided", "free3d"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_tonga_first_reduce_folds_groups(dtype, layout, P):
    x = data((P, 24), P)
    for groups in (1, 4, 24):
        (y,) = run1("TongaReduceMacroSymbolic", [In("x", x, dtype, layout)],
                    [Out("y", (P, groups))], op="add", is_first_reduce=True, reduce_axes=[])
        xs = ref.cast(x, dtype)
        np.testing.assert_array_equal(y, ref.tonga_reduce("add", xs, groups))
        np.testing.assert_allclose(y, ref.decode(xs).astype(np.float64).reshape(P, groups, -1)
                                   .sum(axis=2), rtol=1e-5, atol=1e-4)


def tonga_loop(x, op, first, n_trips, lb=0, groups=1, init=None, out_dtype="float32"):
    """A Loop over k = lb, lb+1, ... whose body folds column block k of x into y."""
    P, F = x.shape
    w = F // n_trips
    allocs = [tensor("x", "ExternalInput", "float32", (P, F), "DRAM"),
              tensor("y", "ExternalOutput", out_dtype, (P, groups), "DRAM")]
    body = insn("op", "TongaReduceMacroSymbolic", "DVE",
                ins=[ap("x", [[F, P], [1, w]], offset=affine([(iv("k"), w)], -lb * w))],
                outs=[whole("y", (P, groups), out_dtype)], op=op, is_first_reduce=first,
                reduce_axes=["k"])
    pre, inputs = [], {"x": x}
    if init is not None:            # y starts as a copy of input y0
        allocs.append(tensor("y0", "ExternalInput", out_dtype, (P, groups), "DRAM"))
        pre = [insn("cp", "TensorCopy", "DVE", ins=[whole("y0", (P, groups), out_dtype)],
                    outs=[whole("y", (P, groups), out_dtype)])]
        inputs["y0"] = init
    prog = module([function("main", allocs,
                            pre + [loop("l", "k", lb, lb + n_trips, 1, [body])])])
    sim = birsim.Simulator(prog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        return sim.run(inputs)["y"]


@pytest.mark.parametrize("op", ["add", "max", "min", "mult"])
def test_tonga_accumulates_over_its_reduce_axis(op):
    x = data((8, 32), 4, 0.5, 1.5)
    y = tonga_loop(x, op, True, 4, lb=3, groups=2)
    # reference: the first trip initialises, later trips combine
    acc = None
    for k in range(4):
        acc = ref.tonga_reduce(op, x[:, 8 * k:8 * k + 8], 2, old=acc)
    np.testing.assert_array_equal(y, acc)
    npop = {"add": np.sum, "max": np.max, "min": np.min, "mult": np.prod}[op]
    want = npop(x.reshape(8, 4, 2, 4).astype(np.float64), axis=(1, 3))
    np.testing.assert_allclose(y, want, rtol=1e-5)


def test_tonga_not_first_accumulates_into_existing_output():
    x = data((4, 16), 5)
    init = data((4, 1), 6)
    y = tonga_loop(x, "add", False, 2, init=init)
    want = ref.tonga_reduce("add", x[:, 8:], 1, old=ref.tonga_reduce("add", x[:, :8], 1,
                                                                        old=init))
    np.testing.assert_array_equal(y, want)


def test_tonga_integer_op():
    xi = np.random.default_rng(2).integers(0, 1 << 16, (4, 8)).astype(np.int32)
    (y,) = run1("TongaReduceMacroSymbolic", [In("x", xi, "int32")], [Out("y", (4, 2), "int32")],
                op="bitwise_or", is_first_reduce=True)
    np.testing.assert_array_equal(y, np.bitwise_or.reduce(xi.reshape(4, 2, 4), axis=2))


def test_tonga_errors():
    x = In("x", data((4, 12), 1))
    with pytest.raises(birsim.SimulationError, match=r"ins\[0\] is 4 partitions x 12 elements, "
                       r"outs\[0\] 4 x 5"):
        run1("TongaReduceMacroSymbolic", [x], [Out("y", (4, 5))], op="add", is_first_reduce=True)
    with pytest.raises(birsim.SimulationError, match="op average is not supported"):
        run1("TongaReduceMacroSymbolic", [x], [Out("y", (4, 1))], op="average",
             is_first_reduce=True)
    with pytest.raises(birsim.ProgramError, match="is_first_reduce"):
        run1("TongaReduceMacroSymbolic", [x], [Out("y", (4, 1))], op="add")
    with pytest.raises(birsim.ProgramError, match="reduce axis 'k' is not an enclosing loop"):
        run1("TongaReduceMacroSymbolic", [x], [Out("y", (4, 1))], op="add",
             is_first_reduce=True, reduce_axes=["k"])
