"""TensorCopy casts through fp32 (kernels/k_copy.c cast_stream) on edge values.

cast_stream decodes a source row straight into a dense fp32 destination row and encodes a
dense fp32 source row straight into the destination; strided views take the staging
buffer. Every combination must give the same bits as NumPy / ml_dtypes casting the same
values: NaN (quiet, sign kept), +-inf, denormals, rounding ties, negative zero, overflow.
"""

import numpy as np
import pytest

import birsim
from bir import ap, block, function, insn, module, tensor

ml_dtypes = pytest.importorskip("ml_dtypes")

P, F = 4, 64


def _edge_f32():
    bits = np.array([
        0x00000000, 0x80000000,                  # +-0
        0x7f800000, 0xff800000,                  # +-inf
        0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345, 0x7fbfffff,   # NaNs (quiet, signalling)
        0x00000001, 0x80000001, 0x007fffff, 0x00018000, 0x00008000,   # fp32 denormals
        0x3f808000, 0x3f818000, 0xbf808000, 0xbf818000,               # bf16 ties (even, odd)
        0x3f808001, 0x3f807fff, 0x7f7fffff, 0xff7fffff, 0x7f7f8000,   # near ties, overflow
        0x00800000, 0x3f800000, 0x38000000, 0x33800000, 0x477fe000,   # normals, fp16 edges
        0x477ff000, 0x33000000, 0x33000001, 0x387fe000,
    ], dtype=np.uint32)
    rng = np.random.default_rng(24)
    rest = rng.integers(0, 2**32, P * F - bits.size, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits, rest]).view(np.float32).reshape(P, F)


def _pattern(strided, f):
    # every other element of each row, or the whole row
    return [[F, P], [2, f // 2]] if strided else [[F, P], [1, f]]


def _copy(x, src_dt, dst_dt, src_strided, dst_strided):
    n = F // 2 if (src_strided or dst_strided) else F
    # a partial copy leaves part of c alone: zero c first so every output byte is written
    zero = [insn("z", "Memset", "DVE", outs=[ap("c", [[F, P], [1, F]], dst_dt)], value=0.0)
            ] if n < F else []
    prog = module([function("main", [
        tensor("a", "ExternalInput", src_dt, [P, F]),
        tensor("c", "ExternalOutput", dst_dt, [P, F])],
        [block("b0", *zero,
               insn("cp", "TensorCopy", "DVE",
                    ins=[ap("a", _pattern(src_strided, 2 * n if src_strided else n), src_dt)],
                    outs=[ap("c", _pattern(dst_strided, 2 * n if dst_strided else n), dst_dt)]))])])
    return birsim.Simulator(prog, checks="all").run({"a": x})["c"], n


def _np_dtype(dt):
    return {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[dt]


def _want_bits(x, dst_dt):
    """x (fp32) cast to dst_dt by NumPy, NaN made the quiet NaN with its sign."""
    with np.errstate(invalid="ignore", over="ignore"):
        y = x.astype(_np_dtype(dst_dt))
    w = 32 if dst_dt == "float32" else 16
    u = np.uint32 if w == 32 else np.uint16
    bits = y.view(u).copy()
    sign = (x.view(np.uint32) >> (32 - w)).astype(u) & u(1 << (w - 1))
    qnan = {"float32": 0x7fc00000, "bfloat16": 0x7fc0, "float16": 0x7e00}[dst_dt]
    bits[np.isnan(x)] = (sign | u(qnan))[np.isnan(x)]
    return bits


def _view_bits(arr):
    return arr.view(np.uint32 if arr.dtype.itemsize == 4 else np.uint16)


@pytest.mark.parametrize("src_strided", [False, True], ids=["src_dense", "src_strided"])
@pytest.mark.parametrize("dst_strided", [False, True], ids=["dst_dense", "dst_strided"])
@pytest.mark.parametrize("dst_dt", ["bfloat16", "float16"])
def test_fp32_to_narrow(dst_dt, src_strided, dst_strided):
    x = _edge_f32()
    got, n = _copy(x, "float32", dst_dt, src_strided, dst_strided)
    xs = x[:, ::2][:, :n] if src_strided else x[:, :n]
    want = _want_bits(np.ascontiguousarray(xs), dst_dt)
    g = _view_bits(got)
    gs = g[:, ::2][:, :n] if dst_strided else g[:, :n]
    np.testing.assert_array_equal(gs, want)
    assert not (g[:, 1::2] if dst_strided else g[:, n:]).any()   # the rest untouched


@pytest.mark.parametrize("src_strided", [False, True], ids=["src_dense", "src_strided"])
@pytest.mark.parametrize("dst_strided", [False, True], ids=["dst_dense", "dst_strided"])
@pytest.mark.parametrize("src_dt", ["bfloat16", "float16"])
def test_narrow_to_fp32(src_dt, src_strided, dst_strided):
    b = np.random.default_rng(5).integers(0, 2**16, (P, F), dtype=np.uint64).astype(np.uint16)
    b[0, :12] = [0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x0001, 0x8001,
                 0x007f, 0x7c00, 0xfc01]
    x = b.view(_np_dtype(src_dt))
    got, n = _copy(x, src_dt, "float32", src_strided, dst_strided)
    xs = x[:, ::2][:, :n] if src_strided else x[:, :n]
    if src_dt == "bfloat16":                     # the top half of an fp32: NaN payloads kept
        want = np.ascontiguousarray(xs).view(np.uint16).astype(np.uint32) << np.uint32(16)
    else:
        want = _want_bits(np.ascontiguousarray(xs).astype(np.float32), "float32")
    g = _view_bits(got)
    gs = g[:, ::2][:, :n] if dst_strided else g[:, :n]
    np.testing.assert_array_equal(gs, want)
    assert not (g[:, 1::2] if dst_strided else g[:, n:]).any()


def test_bf16_to_fp16_through_fp32():
    """Neither side fp32: both rows go through the staging buffer."""
    with np.errstate(invalid="ignore"):
        x = _edge_f32().astype(ml_dtypes.bfloat16)
    got, n = _copy(x, "bfloat16", "float16", False, False)
    want = _want_bits(x.astype(np.float32), "float16")
    np.testing.assert_array_equal(_view_bits(got), want)


# {=== TensorTensor rows longer than BS_CHUNK (k_eltwise.c tt_f32, stream.c bs_chunk3_f32) ===}

R, C = 3, 2500          # rows of 2500 elements: longer than one 1024-element chunk


def _tt(op, out, dts):
    """out := op(a, b) over [R, C] tiles; `out` names a, b or c; dts = (a, b, c) dtypes."""
    t = [tensor(n, "ExternalInput" if n != "c" else "Internal", dt, [R, C])
         for n, dt in zip("abc", dts)]
    t.append(tensor("r", "ExternalOutput", "float32", [R, C]))
    pat = [[C, R], [1, C]]
    prog = module([function("main", t, [block("b0",
        insn("tt", "TensorTensor", "DVE", op=op, ins=[ap("a", pat, dts[0]), ap("b", pat, dts[1])],
             outs=[ap(out, pat, dict(zip("abc", dts))[out])]),
        insn("cp", "TensorCopy", "DVE", ins=[ap(out, pat, dict(zip("abc", dts))[out])],
             outs=[ap("r", pat)]))])])
    return prog


@pytest.mark.parametrize("out", ["a", "b", "c"], ids=["out_is_in0", "out_is_in1", "out_new"])
@pytest.mark.parametrize("op,fn", [("add", np.add), ("subtract", np.subtract),
                                   ("mult", np.multiply), ("max", np.maximum)])
def test_tensor_tensor_long_rows(op, fn, out):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((R, C), dtype=np.float32)
    b = rng.standard_normal((R, C), dtype=np.float32)
    a[0, :4] = [np.inf, -0.0, 1e-45, 3e38]
    b[0, :4] = [1.0, 0.0, 1e-45, 3e38]
    got = birsim.Simulator(_tt(op, out, ("float32",) * 3), checks="all").run(
        {"a": a, "b": b})["r"]
    with np.errstate(over="ignore"):
        want = fn(a, b)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("dts", [("bfloat16", "float32", "float32"),
                                 ("float32", "float32", "bfloat16")], ids=["bf16_in", "bf16_out"])
def test_tensor_tensor_long_rows_mixed(dts):
    """One operand not fp32: the chunks stay BS_CHUNK long (staging buffers)."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((R, C), dtype=np.float32)
    b = rng.standard_normal((R, C), dtype=np.float32)
    if dts[0] == "bfloat16":
        a = a.astype(ml_dtypes.bfloat16)
    got = birsim.Simulator(_tt("add", "c", dts), checks="all").run({"a": a, "b": b})["r"]
    want = a.astype(np.float32) + b
    if dts[2] == "bfloat16":
        want = want.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
