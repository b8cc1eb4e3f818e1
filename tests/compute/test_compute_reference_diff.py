"""Differential tests of the compute kernels: every kernel runs through the simulator and
through birsim.reference (the NumPy executable spec), across dtypes and operand layouts,
and the two are compared with the tolerance table of birsim.testing.

Layouts of an operand with logical shape [P, free...] (see ``Opnd``):
  contig   the tensor itself, read whole
  strided  every other element of a row twice as long (innermost step 2, odd elements)
  bcast    one value per partition broadcast along the free dims (free steps 0; inputs)
  pbcast   one row broadcast to every partition (partition step 0; inputs)
  poff     starts at partition 3 of a taller tensor (element offset)
  alias    an Internal location placed (base/addr) over the placed input or output
           location that holds the data: the kernel reads/writes through the alias
Strided, poff and alias outputs are pre-filled with a Memset so every byte of the output
tensor is written; the bytes outside the AP must keep the fill.

Runs are strict (a never-written read or an output left unwritten is an error), so a
layout bug in the harness cannot hide behind a warning.
"""

import math
import zlib

import ml_dtypes
import numpy as np
import pytest

import birsim
from birsim import reference as ref
from birsim.testing import TOLERANCES, assert_sim_close, fp32_sum_bound

from bir import ap, function, imm, insn, loop, module, reg, register, tensor, whole

FLOATS = ["float32", "bfloat16", "float16", "float8e4", "float8_e4m3fn", "float8e5"]
ALL_DTYPES = FLOATS + ["int32", "uint8"]
NARROW = {"float8e4", "float8_e4m3fn", "float8e5"}


def rng_for(*key):
    """A generator seeded from the test's parameters (stable across runs)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


# ---- operands in layouts -------------------------------------------------------------

class Opnd:
    """One memory operand of logical shape ``shape`` = [P, free...] in ``layout``."""

    LAYOUTS_IN = ("contig", "strided", "bcast", "pbcast", "poff", "alias")
    LAYOUTS_OUT = ("contig", "strided", "poff", "alias")
    POFF = 3

    def __init__(self, name, dtype, shape, layout="contig", io="in", mem="SB"):
        assert io in ("in", "out", "internal")
        assert layout in (self.LAYOUTS_IN if io != "out" else self.LAYOUTS_OUT), layout
        assert layout != "alias" or mem in ("SB", "PSUM")
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.layout, self.io, self.mem = layout, io, mem
        self.P = self.shape[0]
        self.F = int(np.prod(self.shape[1:])) if len(self.shape) > 1 else 1
        self.isz = ref.np_dtype(dtype).itemsize
        L = layout
        self.rows = self.P + self.POFF if L == "poff" else (1 if L == "pbcast" else self.P)
        self.R = {"strided": 2 * self.F, "bcast": 1}.get(L, self.F)
        self.store = name + "_mem" if L == "alias" else name
        self.storage = None
        self.addr = 0            # SBUF/PSUM byte address of a placed (alias) location

    # the access pattern -------------------------------------------------------------
    def ap(self, dtype=None):
        free = list(self.shape[1:]) or [1]
        steps, s = [], 1
        for n in reversed(free):
            steps.append(s)
            s *= n
        steps.reverse()
        m = {"strided": 2, "bcast": 0}.get(self.layout, 1)
        pstep = 0 if self.layout == "pbcast" else self.R
        pattern = [[pstep, self.P]] + [[m * st, n] for st, n in zip(steps, free)]
        start = (self.POFF * self.R if self.layout == "poff" else 0) + \
            (1 if self.layout == "strided" else 0)
        return ap(self.name, pattern, dtype or self.dtype, offset=start or None)

    # allocations and pre-fill ---------------------------------------------------------
    def allocs(self):
        shape = [self.rows, self.R]
        kind = {"in": "ExternalInput", "out": "ExternalOutput", "internal": "Internal"}[self.io]
        if self.layout != "alias":
            return [tensor(self.name, kind, self.dtype, shape, self.mem)]
        addr = self.addr
        return [tensor(self.store, kind, self.dtype, shape, self.mem, base=0, addr=addr),
                tensor(self.name, "Internal", self.dtype, shape, self.mem, base=0, addr=addr)]

    def prefill(self):
        """Memset over the whole output tensor (layouts that leave bytes outside the AP)."""
        if self.io != "out" or self.layout == "contig":
            return []
        pattern = [[self.R, self.rows], [1, self.R]]
        return [insn("fill_" + self.name, "Memset", "Pool",
                     outs=[ap(self.store, pattern, self.dtype)], mode="Const", constant=0)]

    # data -----------------------------------------------------------------------------
    def fill(self, data, rng=None):
        """Lay out logical ``data`` (shape ``shape``) in storage; return the logical data
        the kernel will see (broadcast layouts keep only what is stored)."""
        rng = rng or np.random.default_rng(7)
        data = np.asarray(data).reshape(self.P, self.F)
        junk = ref.cast(rng.uniform(-9, 9, (self.rows, max(self.R, 1))).astype(np.float32),
                        self.dtype)
        st = junk.copy()
        L = self.layout
        if L == "strided":
            st[:, 1::2] = data
        elif L == "bcast":
            st[:, :] = data[:, :1]
            data = np.repeat(data[:, :1], self.F, axis=1)
        elif L == "pbcast":
            st[:, :] = data[:1]
            data = np.repeat(data[:1], self.P, axis=0)
        elif L == "poff":
            st[self.POFF:] = data
        else:
            st[:, :] = data
        self.storage = st
        return data.reshape(self.shape)

    def inputs(self):
        return {self.store: self.storage}

    def extract(self, outputs):
        """The logical result from the run's outputs; checks the bytes outside the AP
        kept the pre-fill."""
        st = outputs[self.store]
        L = self.layout
        if L == "strided":
            rest, got = st[:, 0::2], st[:, 1::2]
        elif L == "poff":
            rest, got = st[:self.POFF], st[self.POFF:]
        else:
            rest, got = st[:0], st
        assert np.all(np.ascontiguousarray(rest).view(np.uint8) == 0), \
            "bytes outside the output AP lost the Memset fill"
        return np.ascontiguousarray(got).reshape(self.shape)


def simulate(opnds, instructions, *, strict=True, extra_allocs=(), extra_inputs=None, **kw):
    """Build and run a program over ``opnds`` + ``instructions`` (its engines ordered by
    :func:`birsim.synchronize`: race-free under any schedule); returns (outputs, sim)."""
    allocs, pre, inputs = list(extra_allocs), [], dict(extra_inputs or {})
    placed = [o for o in opnds if o.layout == "alias"]
    for k, o in enumerate(placed):
        o.addr = 16384 * k
        assert o.R * o.isz <= 16384
    for o in opnds:
        allocs += o.allocs()
        pre += o.prefill()
        if o.io == "in":
            inputs.update(o.inputs())
    prog = birsim.synchronize(module([function("main", allocs, pre + list(instructions))]))
    sim = birsim.Simulator(prog, strict=strict, **kw)
    return sim.run(inputs), sim


def gen(dtype, shape, rng, lo=-4.0, hi=4.0, *, ints=False):
    """Random data representable in ``dtype``: uniform floats in [lo, hi] (small integers
    when ``ints``), cast to the dtype; integer dtypes get integers in [lo, hi]."""
    if dtype in ref.INT_DTYPES or ints:
        info = np.iinfo(ref.np_dtype(dtype)) if dtype in ref.INT_DTYPES else None
        lo_i = int(math.ceil(lo)) if info is None else max(int(math.ceil(lo)), int(info.min))
        hi_i = int(math.floor(hi)) if info is None else min(int(math.floor(hi)), int(info.max))
        v = rng.integers(lo_i, hi_i + 1, size=shape)
        return ref.cast(v.astype(np.float32), dtype) if dtype not in ref.INT_DTYPES \
            else v.astype(ref.np_dtype(dtype))
    return ref.cast(rng.uniform(lo, hi, size=shape).astype(np.float32), dtype)


def random_sign(v, rng):
    """``v`` with the sign of a random half of its elements flipped (unsigned: as is)."""
    if v.dtype.kind == "u":
        return v
    out = v.copy()
    flip = rng.integers(0, 2, v.shape).astype(bool)
    out[flip] = -v[flip]
    return out


def kind_for(out_dtype, kind):
    return "exact" if out_dtype in ref.INT_DTYPES else kind


# ==== copies and casts ===============================================================

COPY_OPS = [  # opcode, engine, input memory, output memory
    ("TensorCopy", "DVE", "SB", "SB"),
    ("GenericCopy", "Pool", "SB", "SB"),
    ("AbstractCopy", "Activation", "SB", "SB"),
    ("Load", "DMA", "DRAM", "SB"),
    ("Save", "DMA", "SB", "DRAM"),
    ("DMACopy", "DMA", "DRAM", "DRAM"),
]


def special_values(dtype):
    """Data for bit-exact copies: ordinary values plus NaN, ±inf, -0 and extremes."""
    if dtype in ref.INT_DTYPES:
        info = np.iinfo(ref.np_dtype(dtype))
        v = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 2**24 + 1 if info.bits > 24
             else 3, info.max - 1]
        return np.array(v, dtype=ref.np_dtype(dtype))
    fi = ml_dtypes.finfo(ref.np_dtype(dtype))
    v = [0.0, -0.0, 1.0, -1.5, float(fi.max), -float(fi.max), float(fi.smallest_subnormal),
         float(fi.tiny), np.nan]
    if dtype not in ("float8_e4m3fn",):
        v += [np.inf, -np.inf]
    return np.array(v, dtype=np.float32).astype(ref.np_dtype(dtype))


@pytest.mark.parametrize("op,engine,min_,mout", COPY_OPS, ids=[c[0] for c in COPY_OPS])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_copy_same_dtype_bit_exact(op, engine, min_, mout, dtype):
    rng = rng_for(op, dtype)
    P, F = 16, 24
    data = gen(dtype, (P, F), rng, -100, 100)
    sp = special_values(dtype)
    data.reshape(-1)[:sp.size] = sp
    A = Opnd("a", dtype, (P, F), mem=min_)
    O = Opnd("o", dtype, (P, F), io="out", mem=mout)
    x = A.fill(data)
    out, _ = simulate([A, O], [insn("cp", op, engine, ins=[A.ap()], outs=[O.ap()])])
    got = O.extract(out)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8))


# Placed (aliased) locations exist only in SBUF/PSUM, so DRAM sides take no "alias".
COPY_LAYOUTS = [(c, lin, lout) for c in COPY_OPS for lin in Opnd.LAYOUTS_IN
                for lout in Opnd.LAYOUTS_OUT
                if not (lin == "alias" and c[2] == "DRAM") and
                not (lout == "alias" and c[3] == "DRAM")]


@pytest.mark.parametrize("c,lin,lout", COPY_LAYOUTS,
                         ids=["%s-%s-%s" % (c[0], i, o) for c, i, o in COPY_LAYOUTS])
def test_copy_layouts(c, lin, lout):
    op, engine, min_, mout = c
    rng = rng_for(op, lin, lout)
    shape = (8, 3, 5)
    for sdt, ddt in (("float32", "bfloat16"), ("bfloat16", "bfloat16")):
        A = Opnd("a", sdt, shape, lin, mem=min_)
        O = Opnd("o", ddt, shape, lout, io="out", mem=mout)
        x = A.fill(gen(sdt, shape, rng, -3, 3), rng)
        out, _ = simulate([A, O], [insn("cp", op, engine, ins=[A.ap()], outs=[O.ap()])])
        assert_sim_close(O.extract(out), ref.cast(x, ddt), kind="exact",
                         err_msg="%s %s->%s" % (op, sdt, ddt))


@pytest.mark.parametrize("src", ALL_DTYPES + ["int16", "int8"])
@pytest.mark.parametrize("dst", ALL_DTYPES + ["int16", "int8"])
def test_copy_cast_pairs(src, dst):
    rng = rng_for("cast", src, dst)
    P, F = 8, 32
    if src in ref.INT_DTYPES:
        data = gen(src, (P, F), rng, -300, 300)
    else:
        data = gen(src, (P, F), rng, -300, 300)
        data.reshape(-1)[:5] = np.array([np.nan, 0.5, 1.5, -2.5, -0.0], np.float32).astype(
            ref.np_dtype(src))
    A = Opnd("a", src, (P, F))
    O = Opnd("o", dst, (P, F), io="out")
    x = A.fill(data)
    out, _ = simulate([A, O], [insn("cp", "TensorCopy", "DVE", ins=[A.ap()], outs=[O.ap()])])
    assert_sim_close(O.extract(out), ref.cast(x, dst), kind="exact")


# ---- casts at RNE ties and saturation edges, against ml_dtypes -----------------------

def _float_edges(dtype):
    """fp32 values at the edges of ``dtype``: the exact midpoints (RNE ties) between
    neighbouring codes (all of them for fp8, a sample plus the neighbourhoods of 1, of the
    max and of the subnormals for 16-bit types), values one fp32 ulp off each tie,
    saturation edges, ±inf and NaN. Returns (values, ties)."""
    nd = ref.np_dtype(dtype)
    fi = ml_dtypes.finfo(nd)
    if nd.itemsize == 1:
        codes = np.arange(0, 0x7f)
    else:
        one = 0x3f80 if dtype == "bfloat16" else 0x3c00
        top = 0x7f7f if dtype == "bfloat16" else 0x7bff
        codes = np.concatenate([np.arange(0, top, 97), np.arange(one - 16, one + 16),
                                np.arange(0, 8), np.arange(top - 8, top)])
    ut = np.uint8 if nd.itemsize == 1 else np.uint16
    lo = codes.astype(ut).view(nd).astype(np.float64)
    hi = (codes + 1).astype(ut).view(nd).astype(np.float64)
    ok = np.isfinite(lo) & np.isfinite(hi)
    mids = (lo[ok] + hi[ok]) / 2
    mids = np.concatenate([mids, -mids])
    mx, sub = float(fi.max), float(fi.smallest_subnormal)
    ulp_top = mx - float(np.nextafter(np.array(mx, nd), np.array(0, nd)).astype(np.float64))
    edges = [mx, mx + ulp_top / 4, mx + ulp_top / 2, mx + ulp_top, 2 * mx, 1e30, sub / 2,
             sub * 1.5, sub * 2.5, sub / 4, 3.4028235e38]
    edges += [-e for e in edges]
    m32 = mids.astype(np.float32)
    assert np.all(m32 == mids), "midpoints must be exact fp32 values"
    with np.errstate(over="ignore"):
        out = np.concatenate([m32, np.nextafter(m32, np.float32(np.inf)),
                              np.nextafter(m32, np.float32(-np.inf)),
                              np.array(edges).astype(np.float32),
                              np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)])
    return out, m32


def _ml_dtypes_cast(f, dtype):
    """The cast as ml_dtypes does it, with fp8 saturation (clip to ±max first)."""
    nd = ref.np_dtype(dtype)
    if dtype in NARROW or dtype == "float8e3":
        m = float(ml_dtypes.finfo(nd).max)
        f = np.clip(f, -m, m)
    with np.errstate(over="ignore"):
        return f.astype(nd)


def _roundtrip(dtype, f32):
    P = 1
    F = f32.size
    A = Opnd("a", "float32", (P, F))
    M = Opnd("m", dtype, (P, F), io="out")
    O = Opnd("o", "float32", (P, F), io="out")
    A.fill(f32.reshape(P, F))
    out, _ = simulate([A, M, O], [
        insn("down", "TensorCopy", "DVE", ins=[A.ap()], outs=[M.ap()]),
        insn("up", "TensorCopy", "DVE", ins=[M.ap()], outs=[O.ap()])])
    return M.extract(out).reshape(-1), O.extract(out).reshape(-1)


@pytest.mark.parametrize("dtype", FLOATS[1:] + ["float8e3"])
def test_cast_rne_ties_and_saturation(dtype):
    f, mids = _float_edges(dtype)
    mid, back = _roundtrip(dtype, f)
    expect = _ml_dtypes_cast(f, dtype)
    assert_sim_close(mid, expect, kind="exact", dtype=dtype)
    assert_sim_close(back, expect.astype(np.float32), kind="exact", dtype="float32")
    # Independent of ml_dtypes: an exact tie lands on a neighbour whose code is even.
    codes = mid[: mids.size].view(np.uint8 if mid.itemsize == 1 else np.uint16)
    finite = np.isfinite(mid[: mids.size].astype(np.float32))
    assert np.all(codes[finite] % 2 == 0), "a tie did not round to even"
    # Saturation: fp8 never produces inf from a finite or infinite input; fp16/bf16 do.
    nd = ref.np_dtype(dtype)
    big = np.isinf(f) | (np.abs(f.astype(np.float64)) > float(ml_dtypes.finfo(nd).max) * 2)
    if dtype in NARROW or dtype == "float8e3":
        assert np.all(np.abs(mid[big].astype(np.float32)) == float(ml_dtypes.finfo(nd).max))
    else:
        assert np.all(np.isinf(mid[big].astype(np.float32)))
    assert np.isnan(mid[np.isnan(f)].astype(np.float32)).all(), "NaN must stay NaN"


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8", "int16", "uint16"])
def test_cast_float_to_int_ties_and_saturation(dtype):
    info = np.iinfo(ref.np_dtype(dtype))
    vals = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -3.51, 0.49999997, 254.5, 255.5, 256.0,
            -1.0, 127.5, -128.5, 32767.5, 65535.5, 1e10, -1e10, 2147483520.0, 2147483648.0,
            -2147483648.0, -2147483904.0, np.inf, -np.inf, 1e-30, -0.0]
    f = np.array(vals, dtype=np.float32)
    mid, _ = _roundtrip(dtype, f)
    r = np.rint(f.astype(np.float64))
    expect = np.clip(r, info.min, info.max)
    np.testing.assert_array_equal(mid.astype(np.float64), expect)
    # NaN: unsigned -> max; signed -> min or max by the sign bit
    nan = np.array([np.nan, -np.nan], dtype=np.float32)
    nan[1] = -np.abs(nan[1])
    mid, _ = _roundtrip(dtype, nan)
    if info.min < 0:
        assert list(mid) == [info.max, info.min]
    else:
        assert list(mid) == [info.max, info.max]


def test_cast_int32_above_2_24_through_float():
    """int32 -> fp32 -> int32 loses low bits above 2^24 (RNE)."""
    v = np.array([[2**24 + 1, 2**24 + 3, -(2**25) - 3, 2**31 - 1, -2**31]], dtype=np.int32)
    A = Opnd("a", "int32", v.shape)
    M = Opnd("m", "float32", v.shape, io="out")
    O = Opnd("o", "int32", v.shape, io="out")
    A.fill(v)
    out, _ = simulate([A, M, O], [
        insn("up", "TensorCopy", "DVE", ins=[A.ap()], outs=[M.ap()]),
        insn("down", "TensorCopy", "DVE", ins=[M.ap()], outs=[O.ap()])])
    np.testing.assert_array_equal(M.extract(out), v.astype(np.float32))
    np.testing.assert_array_equal(O.extract(out), ref.cast(v.astype(np.float32), "int32"))


def test_cast_fp32_min_downcast():
    """nki-isa-semantics §4 vector 7: FP32_MIN becomes -inf in bf16/fp16 (overflow) and
    stays -3.4028235e38 in fp32; fp8 saturates to -max (docs/spec/BIR-JSON.md)."""
    f = np.array([[-3.4028235e38, 3.4028235e38]], dtype=np.float32)
    for dt, want in (("bfloat16", -np.inf), ("float16", -np.inf), ("float32", f[0, 0]),
                     ("float8e4", -240.0), ("float8_e4m3fn", -448.0), ("float8e5", -57344.0)):
        mid, back = _roundtrip(dt, f.reshape(-1))
        assert back[0] == np.float32(want), dt
        assert back[1] == -np.float32(want), dt


# ==== TensorTensor ====================================================================

FLOAT_ALU = ["bypass", "add", "subtract", "mult", "divide", "max", "min", "logical_and",
             "logical_or", "logical_xor", "is_equal", "not_equal", "is_gt", "is_ge", "is_lt",
             "is_le", "pow", "rsqrt", "abs", "abs_max", "abs_min", "mod"]
NO_ROUNDING = {"bypass", "max", "min", "logical_and", "logical_or", "logical_xor",
               "is_equal", "not_equal", "is_gt", "is_ge", "is_lt", "is_le", "abs", "abs_max",
               "abs_min", "mod"}


def alu_kind(op):
    if op in NO_ROUNDING:
        return "exact"
    return "transcendental" if op in ref.TRANSCENDENTAL_ALU_OPS else "arith"


def alu_data(op, dtype, shape, rng, side):
    """Operand data inside the op's domain; small integers so ties and equalities occur."""
    if op in ("logical_and", "logical_or", "logical_xor"):
        return gen(dtype, shape, rng, 0, 1, ints=True)
    if op in ("is_equal", "not_equal", "is_gt", "is_ge", "is_lt", "is_le", "max", "min",
              "abs_max", "abs_min"):
        lo = 0 if dtype == "uint8" else -3
        return gen(dtype, shape, rng, lo, 3, ints=True)
    if op == "pow":
        return gen(dtype, shape, rng, 0.5, 2.5) if side == 0 else \
            gen(dtype, shape, rng, -2, 2, ints=dtype in ref.INT_DTYPES)
    if op == "rsqrt" and side == 0:
        return gen(dtype, shape, rng, 0.25, 9)
    if op in ("divide", "mod") and side == 1:
        return random_sign(gen(dtype, shape, rng, 1, 4), rng)
    if dtype == "uint8":
        return gen(dtype, shape, rng, 0, 120)
    return gen(dtype, shape, rng, -6, 6)


def run_tt(op, dts, shapes, layouts=("contig", "contig", "contig"), rng=None, data=None):
    """TensorTensor with operands a, b -> o; returns (got, expected inputs a, b)."""
    A = Opnd("a", dts[0], shapes, layouts[0])
    B = Opnd("b", dts[1], shapes, layouts[1])
    O = Opnd("o", dts[2], shapes, layouts[2], io="out")
    if data is None:
        data = (alu_data(op, dts[0], shapes, rng, 0), alu_data(op, dts[1], shapes, rng, 1))
    a = A.fill(data[0], rng)
    b = B.fill(data[1], rng)
    out, _ = simulate([A, B, O], [insn("tt", "TensorTensor", "DVE", ins=[A.ap(), B.ap()],
                                       outs=[O.ap()], op=op)])
    return O.extract(out), a, b


@pytest.mark.parametrize("op", FLOAT_ALU)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tensor_tensor_ops(op, dtype):
    rng = rng_for("tt", op, dtype)
    got, a, b = run_tt(op, (dtype,) * 3, (16, 40), rng=rng)
    assert_sim_close(got, ref.tensor_tensor(op, a, b, dtype), kind=kind_for(dtype, alu_kind(op)),
                     err_msg=op)


@pytest.mark.parametrize("dts", [("bfloat16", "float32", "float16"),
                                 ("float8e4", "bfloat16", "float32"),
                                 ("int32", "float32", "bfloat16"),
                                 ("float32", "float32", "float8_e4m3fn"),
                                 ("uint8", "float16", "int32"),
                                 ("float8e5", "float8e4", "bfloat16")])
@pytest.mark.parametrize("op", ["add", "subtract", "mult", "divide", "max", "is_lt"])
def test_tensor_tensor_mixed_dtypes(op, dts):
    rng = rng_for("ttmix", op, dts)
    got, a, b = run_tt(op, dts, (8, 33), rng=rng)
    assert_sim_close(got, ref.tensor_tensor(op, a, b, dts[2]),
                     kind=kind_for(dts[2], alu_kind(op)))


LAYOUT_COMBOS = [("contig", "contig", "contig"), ("strided", "contig", "contig"),
                 ("contig", "bcast", "contig"), ("poff", "strided", "contig"),
                 ("contig", "contig", "strided"), ("alias", "contig", "poff"),
                 ("bcast", "alias", "alias"), ("strided", "poff", "alias"),
                 ("pbcast", "contig", "poff")]


@pytest.mark.parametrize("layouts", LAYOUT_COMBOS, ids="-".join)
@pytest.mark.parametrize("op", ["subtract", "divide", "abs_max"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tensor_tensor_layouts(op, layouts, dtype):
    rng = rng_for("ttl", op, layouts, dtype)
    got, a, b = run_tt(op, (dtype,) * 3, (8, 4, 6), layouts, rng=rng)
    assert_sim_close(got, ref.tensor_tensor(op, a, b, dtype), kind=alu_kind(op))


BITVEC = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "arith_shift_left",
          "arith_shift_right", "logical_shift_left", "logical_shift_right", "mod_int"]


# uint8 only where every result stays in 0..255 (the spec gives bit-vector results outside
# the dtype's range no reading).
BITVEC_CASES = [(op, "int32") for op in BITVEC] + [
    (op, "uint8") for op in ("bitwise_and", "bitwise_or", "bitwise_xor",
                             "logical_shift_right", "arith_shift_right")]


@pytest.mark.parametrize("op,dtype", BITVEC_CASES)
def test_tensor_tensor_bitvec(op, dtype):
    rng = rng_for("bv", op, dtype)
    shape = (16, 32)
    info = np.iinfo(ref.np_dtype(dtype))
    a = rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(
        ref.np_dtype(dtype))
    if "shift" in op:
        b = rng.integers(0, 8 if dtype == "uint8" else 32, size=shape).astype(ref.np_dtype(dtype))
    elif op == "mod_int":
        b = rng.integers(1, 1000, size=shape) * rng.choice([-1, 1], size=shape)
        b = b.astype(ref.np_dtype(dtype))
    else:
        b = rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(
            ref.np_dtype(dtype))
    got, a, b = run_tt(op, (dtype,) * 3, shape, data=(a, b), rng=rng)
    assert_sim_close(got, ref.tensor_tensor(op, a, b, dtype), kind="exact")


def test_alu_spec_vectors():
    """nki-isa-semantics §4 vectors 5 and 23: abs_max/abs_min (tie returns y), and the
    nl-level identities for pow, max, min."""
    a = np.array([[-5, 1, 5, 1, 3, 3, 3]], np.float32)
    b = np.array([[3, -1, -3, -1, 2, 5, 5]], np.float32)
    want = {"abs_max": [-5, -1, 5, -1, 3, 5, 5], "abs_min": [3, -1, -3, -1, 2, 3, 3],
            "pow": [-125, 1, 1 / 125, 1, 9, 243, 243], "max": [3, 1, 5, 1, 3, 5, 5],
            "min": [-5, -1, -3, -1, 2, 3, 3]}
    for op, w in want.items():
        got, _, _ = run_tt(op, ("float32",) * 3, a.shape, data=(a, b))
        assert_sim_close(got[0], np.array(w, np.float32),
                         kind="transcendental" if op == "pow" else "exact", err_msg=op)
    # abs_max(-5, 3) = -5, abs_max(1, -1) = -1; abs_min(5, -3) = -3, abs_min(1, -1) = -1
    got, _, _ = run_tt("abs_min", ("float32",) * 3, (1, 2),
                       data=(np.array([[5, 1]], np.float32), np.array([[-3, -1]], np.float32)))
    assert list(got[0]) == [-3, -1]


def test_tensor_tensor_in_place_and_shifted_overlap():
    """Read everything, then write: out == in0 exactly, and out overlapping in0 shifted by
    one element, both compute from the original values."""
    rng = rng_for("overlap")
    F = 64
    x = gen("float32", (1, F + 1), rng, -3, 3)
    y = gen("float32", (1, F), rng, -3, 3)
    prog_allocs = [tensor("x", "ExternalInput", "float32", [1, F + 1], "SB"),
                   tensor("y", "ExternalInput", "float32", [1, F], "SB"),
                   tensor("o", "ExternalOutput", "float32", [1, F + 1], "SB")]
    lo = ap("x", [[F + 1, 1], [1, F]])
    hi = ap("x", [[F + 1, 1], [1, F]], offset=1)
    yy = ap("y", [[F, 1], [1, F]])
    for outs, expect_slice in ((lo, slice(0, F)), (hi, slice(1, F + 1))):
        prog = module([function("main", prog_allocs, [
            insn("tt", "TensorTensor", "DVE", ins=[lo, yy], outs=[outs], op="subtract"),
            insn("cp", "TensorCopy", "DVE", ins=[ap("x", [[F + 1, 1], [1, F + 1]])],
                 outs=[ap("o", [[F + 1, 1], [1, F + 1]])])])])
        out = birsim.Simulator(prog, strict=True).run({"x": x, "y": y})["o"]
        want = x.copy()
        want[0, expect_slice] = x[0, :F] - y[0]
        assert_sim_close(out, want, kind="exact")


# ==== TensorScalar / TensorScalarPtr =================================================

TS_PAIRS = [("mult", "add"), ("subtract", "bypass"), ("divide", "subtract"), ("max", "min"),
            ("add", "mult"), ("pow", "bypass"), ("is_ge", "mult"), ("abs_max", "add"),
            ("rsqrt", "mult"), ("bypass", "bypass"), ("abs", "subtract"), ("mult", "divide")]
REVS = [(False, False), (True, False), (False, True), (True, True)]


def ts_setup(op0, op1, rev0, dtype, shape, rng):
    """Data and constants keeping every stage inside its domain."""
    positive = (op0 in ("pow", "rsqrt") and not rev0)
    if dtype == "uint8":
        x = gen(dtype, shape, rng, 1, 60)
    else:
        x = gen(dtype, shape, rng, 0.5, 3)
        if not positive:
            x = random_sign(x, rng)
    c0 = 1.5 if op0 in ("pow", "rsqrt") else -1.75
    c1 = 0.625 if op1 != "divide" else -2.5
    return x, c0, c1


def ts_kind(op0, op1):
    if "pow" in (op0, op1):
        return "transcendental"
    return "arith"


@pytest.mark.parametrize("op0,op1", TS_PAIRS, ids=["-".join(p) for p in TS_PAIRS])
@pytest.mark.parametrize("rev0,rev1", REVS, ids=["r%d%d" % r for r in REVS])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8e4", "float8e5",
                                   "float8_e4m3fn", "int32", "uint8"])
def test_tensor_scalar(op0, op1, rev0, rev1, dtype):
    rng = rng_for("ts", op0, op1, rev0, rev1, dtype)
    shape = (16, 24)
    x, c0, c1 = ts_setup(op0, op1, rev0, dtype, shape, rng)
    A = Opnd("a", dtype, shape)
    O = Opnd("o", dtype, shape, io="out")
    a = A.fill(x)
    out, _ = simulate([A, O], [insn("ts", "TensorScalar", "DVE", ins=[A.ap()], outs=[O.ap()],
                                    op0=op0, const0=c0, reverse0=rev0, op1=op1, const1=c1,
                                    reverse1=rev1)])
    want = ref.tensor_scalar(a, op0, c0, op1, c1, dtype, rev0, rev1)
    assert_sim_close(O.extract(out), want, kind=kind_for(dtype, ts_kind(op0, op1)))


@pytest.mark.parametrize("layout_in,layout_out", [("strided", "contig"), ("poff", "strided"),
                                                  ("alias", "alias"), ("bcast", "poff"),
                                                  ("pbcast", "contig")])
def test_tensor_scalar_layouts(layout_in, layout_out):
    rng = rng_for("tsl", layout_in, layout_out)
    shape = (8, 5, 7)
    A = Opnd("a", "bfloat16", shape, layout_in)
    O = Opnd("o", "float32", shape, layout_out, io="out")
    a = A.fill(gen("bfloat16", shape, rng), rng)
    out, _ = simulate([A, O], [insn("ts", "TensorScalar", "DVE", ins=[A.ap()], outs=[O.ap()],
                                    op0="mult", const0=0.3, op1="subtract", const1=1.1,
                                    reverse1=True)])
    assert_sim_close(O.extract(out), ref.tensor_scalar(a, "mult", 0.3, "subtract", 1.1,
                                                       "float32", False, True))


def test_tensor_scalar_stages_round_separately():
    """fp32(fp32(x*c0) - c1) differs from the fused x*c0 - c1 by far more than an ulp
    when the subtraction cancels: the stages must not fuse."""
    x = np.array([[1.0 + 2.0 ** -23, 1.0 + 3 * 2.0 ** -23, 3.0 + 2.0 ** -22]], np.float32)
    c0 = 1.0 + 2.0 ** -22                       # x*c0 is inexact in fp32
    c1 = [float(np.float64(v) * c0) for v in x[0]]
    for i in range(x.shape[1]):
        A = Opnd("a", "float32", (1, 1))
        O = Opnd("o", "float32", (1, 1), io="out")
        A.fill(x[:, i:i + 1])
        out, _ = simulate([A, O], [insn("ts", "TensorScalar", "DVE", ins=[A.ap()],
                                        outs=[O.ap()], op0="mult", const0=c0, op1="subtract",
                                        const1=c1[i])])
        staged = np.float32(np.float32(x[0, i] * np.float32(c0)) - np.float32(c1[i]))
        got = O.extract(out)[0, 0]
        assert got == staged, (i, got, staged)


def test_tensor_scalar_spec_vectors():
    """nki-isa-semantics §4 vector 13: (a - 1), reversed (1 - a), and e*f[P,1] + 2.5."""
    rng = rng_for("tsvec")
    a = gen("float32", (8, 16), rng)
    for rev, want in ((False, a - 1), (True, 1 - a)):
        A = Opnd("a", "float32", a.shape)
        O = Opnd("o", "float32", a.shape, io="out")
        A.fill(a)
        out, _ = simulate([A, O], [insn("ts", "TensorScalar", "DVE", ins=[A.ap()],
                                        outs=[O.ap()], op0="subtract", const0=1.0,
                                        reverse0=rev)])
        assert_sim_close(O.extract(out), want.astype(np.float32))
    f = gen("float32", (8, 1), rng)
    A, S, O = Opnd("a", "float32", a.shape), Opnd("s", "float32", (8, 1)), \
        Opnd("o", "float32", a.shape, io="out")
    A.fill(a)
    S.fill(f)
    out, _ = simulate([A, S, O], [insn("tsp", "TensorScalarPtr", "DVE",
                                       ins=[A.ap(), S.ap(), imm(2.5)], outs=[O.ap()],
                                       op0="mult", op1="add")])
    assert_sim_close(O.extract(out), (a * f + np.float32(2.5)).astype(np.float32))


TSP_PAIRS = [("mult", "add"), ("subtract", "divide"), ("max", "subtract"), ("add", "is_lt")]
SCALAR_KINDS = [("tensor", "tensor"), ("imm", "tensor"), ("tensor", "imm"), ("poff", "tensor"),
                ("strided", "imm")]


@pytest.mark.parametrize("op0,op1", TSP_PAIRS, ids=["-".join(p) for p in TSP_PAIRS])
@pytest.mark.parametrize("rev0,rev1", REVS, ids=["r%d%d" % r for r in REVS])
@pytest.mark.parametrize("sk", SCALAR_KINDS, ids=["-".join(s) for s in SCALAR_KINDS])
@pytest.mark.parametrize("dtype,sdtype", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                          ("float16", "float32")])
def test_tensor_scalar_ptr(op0, op1, rev0, rev1, sk, dtype, sdtype):
    rng = rng_for("tsp", op0, op1, rev0, rev1, sk, dtype)
    P, shape = 12, (12, 4, 5)
    x = gen(dtype, shape, rng, 0.5, 3)
    opnds, ins, scal = [], [], []
    A = Opnd("a", dtype, shape)
    A.fill(x)
    opnds.append(A)
    for j, k in enumerate(sk):
        v = gen(sdtype, (P, 1), rng, 0.5, 2.5) * (1 if j else -1)
        v = v.astype(ref.np_dtype(sdtype))
        if k == "imm":
            ins.append(imm(float(v[0, 0])))
            scal.append(np.float32(v[0, 0]))
        else:
            S = Opnd("s%d" % j, sdtype, (P, 1), k if k in ("poff", "strided") else "contig")
            S.fill(v)
            opnds.append(S)
            ins.append(S.ap())
            scal.append(v.reshape(P, 1, 1))
    O = Opnd("o", dtype, shape, io="out")
    opnds.append(O)
    out, _ = simulate(opnds, [insn("tsp", "TensorScalarPtr", "DVE", ins=[A.ap()] + ins,
                                   outs=[O.ap()], op0=op0, op1=op1, reverse0=rev0,
                                   reverse1=rev1)])
    want = ref.tensor_scalar(x, op0, scal[0], op1, scal[1], dtype, rev0, rev1)
    assert_sim_close(O.extract(out), want, kind="exact" if op1 == "is_lt" else "arith")


@pytest.mark.parametrize("op0,c0,op1,c1", [("bitwise_and", 0xFF00FF, "logical_shift_left", 3),
                                           ("arith_shift_right", 4, "bitwise_xor", 0x5A5A),
                                           ("logical_shift_right", 28, "bitwise_or", 0x100),
                                           ("bitwise_not", 0, "bitwise_and", 0xFFFF)])
def test_tensor_scalar_bitvec_int32(op0, c0, op1, c1):
    rng = rng_for("tsbv", op0, op1)
    shape = (8, 32)
    x = rng.integers(-2**31, 2**31, size=shape, dtype=np.int64).astype(np.int32)
    A = Opnd("a", "int32", shape)
    O = Opnd("o", "int32", shape, io="out")
    A.fill(x)
    out, _ = simulate([A, O], [insn("ts", "TensorScalar", "DVE", ins=[A.ap()], outs=[O.ap()],
                                    op0=op0, const0=c0, op1=op1, const1=c1)])
    want = ref.tensor_scalar(x, op0, c0, op1, c1, "int32")
    assert_sim_close(O.extract(out), want, kind="exact")


# ==== Reciprocal / Exponential =======================================================

@pytest.mark.parametrize("din,dout", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                      ("float16", "float32"), ("float32", "float8e4"),
                                      ("float8e5", "bfloat16"), ("int32", "float32")])
@pytest.mark.parametrize("lin,lout", [("contig", "contig"), ("strided", "poff"),
                                      ("alias", "strided"), ("bcast", "alias")])
def test_reciprocal(din, dout, lin, lout):
    rng = rng_for("recip", din, dout, lin, lout)
    shape = (16, 3, 11)
    x = random_sign(gen(din, shape, rng, 1 if din == "int32" else 0.1, 9), rng)
    A, O = Opnd("a", din, shape, lin), Opnd("o", dout, shape, lout, io="out")
    a = A.fill(x, rng)
    out, _ = simulate([A, O], [insn("r", "Reciprocal", "DVE", ins=[A.ap()], outs=[O.ap()])])
    assert_sim_close(O.extract(out), ref.reciprocal(a, dout), kind="arith")


@pytest.mark.parametrize("din,dout", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                      ("float16", "float16"), ("float32", "float8_e4m3fn")])
@pytest.mark.parametrize("mx", ["none", "imm", "tensor"])
@pytest.mark.parametrize("lin", ["contig", "strided", "poff"])
def test_exponential(din, dout, mx, lin):
    rng = rng_for("exp", din, dout, mx, lin)
    P, shape = 16, (16, 40)
    x = gen(din, shape, rng, -4, 4)
    A, O = Opnd("a", din, shape, lin), Opnd("o", dout, shape, io="out")
    a = A.fill(x, rng)
    opnds, ins, m = [A, O], [A.ap()], 0.0
    if mx == "imm":
        ins.append(imm(1.25))
        m = 1.25
    elif mx == "tensor":
        mv = gen("float32", (P, 1), rng, -2, 2)
        M = Opnd("m", "float32", (P, 1))
        M.fill(mv)
        opnds.append(M)
        ins.append(M.ap())
        m = mv
    out, _ = simulate(opnds, [insn("e", "Exponential", "DVE", ins=ins, outs=[O.ap()])])
    assert_sim_close(O.extract(out), ref.exponential(a, dout, m), kind="transcendental")


# ==== Activation ====================================================================

ACT_FUNCS = list(ref.ACTIVATIONS)
POSITIVE_DOMAIN = {"Ln", "Sqrt", "Rsqrt", "Reciprocal", "Abs_reciprocal_sqrt"}


def act_inputs(func, shape, dtype, rng):
    if func in POSITIVE_DOMAIN:
        return gen(dtype, shape, rng, 0.25, 4), (1.5, 0.25, 0.2)
    if func == "Sin" or func == "Arctan":
        return gen(dtype, shape, rng, -1.5, 1.5), (1.25, 0.5, 0.2)
    v = gen(dtype, shape, rng, -3, 3)
    if func == "Is_finite" and dtype not in ("float8_e4m3fn",):
        v.reshape(-1)[:3] = np.array([np.inf, -np.inf, np.nan], np.float32).astype(v.dtype)
    return v, (1.25, -0.375, 0.2)


def act_kind(func):
    return "arith" if ref.ACTIVATIONS[func][1] else "transcendental"


@pytest.mark.parametrize("func", ACT_FUNCS)
@pytest.mark.parametrize("params", ["imm", "tensor", "keys"])
@pytest.mark.parametrize("din,dout", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                      ("float16", "float8e4"), ("float8e5", "float8_e4m3fn")])
def test_activation(func, params, din, dout):
    rng = rng_for("act", func, params, din, dout)
    P, shape = 16, (16, 3, 8)
    x, (sc, bi, al) = act_inputs(func, shape, din, rng)
    A, O = Opnd("a", din, shape), Opnd("o", dout, shape, io="out")
    a = A.fill(x)
    opnds, ins, keys = [A, O], [A.ap()], {}
    if params == "imm":
        ins += [imm(sc), imm(bi), imm(al)]
        s, b, al_ = sc, bi, al
    elif params == "tensor":
        bias_lo = 0.0 if func in POSITIVE_DOMAIN else -1.0     # keep t in the domain
        vals = [gen("float32", (P, 1), rng, 0.5, 1.5),           # scale
                gen("float32", (P, 1), rng, bias_lo, 1.0),       # bias
                gen("float32", (P, 1), rng, 0.0, 0.5)]           # alpha
        for j, v in enumerate(vals):
            S = Opnd("s%d" % j, "float32", (P, 1))
            S.fill(v)
            opnds.append(S)
            ins.append(S.ap())
        s, b, al_ = (v.reshape(P, 1, 1) for v in vals)
    else:  # keys: scale and alpha as instruction keys, bias 0
        keys = dict(scale=sc, alpha=al)
        s, b, al_ = sc, 0.0, al
    out, _ = simulate(opnds, [insn("act", "Activation", "Activation", ins=ins, outs=[O.ap()],
                                   func=func, **keys)])
    want = ref.activation(func, a, dout, s, b, al_)
    assert_sim_close(O.extract(out), want, kind=act_kind(func), err_msg=func)


@pytest.mark.parametrize("lin,lout", [("strided", "contig"), ("poff", "alias"),
                                      ("alias", "strided"), ("bcast", "poff")])
@pytest.mark.parametrize("func", ["Exp", "Relu", "Gelu"])
def test_activation_layouts(func, lin, lout):
    rng = rng_for("actl", func, lin, lout)
    shape = (8, 12)
    A, O = Opnd("a", "float32", shape, lin), Opnd("o", "bfloat16", shape, lout, io="out")
    a = A.fill(gen("float32", shape, rng, -2, 2), rng)
    out, _ = simulate([A, O], [insn("act", "Activation", "Activation",
                                    ins=[A.ap(), imm(0.75), imm(0.5)], outs=[O.ap()],
                                    func=func)])
    assert_sim_close(O.extract(out), ref.activation(func, a, "bfloat16", 0.75, 0.5),
                     kind=act_kind(func))


def test_activation_spec_vectors():
    """nki-isa-semantics §4 vector 14 (square(b*2 + c[P,1])) and the vector-23 identities
    exp(0)=1, log(1)=0, sqrt(4)=2, rsqrt(4)=0.5, reciprocal(4)=0.25, square(3)=9, sin(0)=0,
    arctan(0)=0, sign(-5)=-1."""
    rng = rng_for("actvec")
    b = gen("float32", (8, 16), rng)
    c = gen("float32", (8, 1), rng)
    A, C, O = Opnd("a", "float32", b.shape), Opnd("c", "float32", (8, 1)), \
        Opnd("o", "float32", b.shape, io="out")
    A.fill(b)
    C.fill(c)
    out, _ = simulate([A, C, O], [insn("act", "Activation", "Activation",
                                       ins=[A.ap(), imm(2.0), C.ap()], outs=[O.ap()],
                                       func="Square")])
    t = (b * np.float32(2) + c).astype(np.float32)
    assert_sim_close(O.extract(out), t * t)
    for func, x, want in (("Exp", 0, 1), ("Ln", 1, 0), ("Sqrt", 4, 2), ("Rsqrt", 4, 0.5),
                          ("Reciprocal", 4, 0.25), ("Square", 3, 9), ("Sin", 0, 0),
                          ("Arctan", 0, 0), ("Sign", -5, -1), ("Sign", 0, 0), ("Sign", 7, 1)):
        A, O = Opnd("a", "float32", (1, 1)), Opnd("o", "float32", (1, 1), io="out")
        A.fill(np.array([[x]], np.float32))
        out, _ = simulate([A, O], [insn("act", "Activation", "Activation", ins=[A.ap()],
                                        outs=[O.ap()], func=func)])
        assert O.extract(out)[0, 0] == want, func


# ==== TensorReduce ==================================================================

RED_SHAPE = (4, 3, 5, 6)
NRED = {"X": 1, "XY": 2, "XYZ": 3, "XYZW": 4}


def red_out_shape(shape, axis):
    """The output: one element per position of the dims that remain (at least one)."""
    kept = shape[:max(len(shape) - NRED[axis], 0)]
    return (kept[0],) + tuple(kept[1:]) if kept else (1, 1)


def run_reduce(op, axis, negate, din, dout, x, layout="contig"):
    A = Opnd("a", din, x.shape, layout)
    O = Opnd("o", dout, red_out_shape(x.shape, axis), io="out")
    a = A.fill(x)
    out, _ = simulate([A, O], [insn("red", "TensorReduce", "DVE", ins=[A.ap()], outs=[O.ap()],
                                    op=op, axis=axis, negate=negate)])
    return O.extract(out), a


@pytest.mark.parametrize("axis", ["X", "XY", "XYZ", "XYZW"])
@pytest.mark.parametrize("op", ["add", "max", "min", "mult", "average"])
@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize("din,dout", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                      ("float16", "float32"), ("int32", "int32"),
                                      ("float8e5", "float32"), ("float8_e4m3fn", "bfloat16")])
def test_tensor_reduce(axis, op, negate, din, dout):
    rng = rng_for("red", axis, op, negate, din)
    if op == "mult":
        x = gen(din, RED_SHAPE, rng, 0.8, 1.25) if din != "int32" else \
            rng.choice(np.array([1, -1, 1, 1], np.int32), RED_SHAPE)
    else:
        x = gen(din, RED_SHAPE, rng, -50, 50)
    got, a = run_reduce(op, axis, negate, din, dout, x)
    want = ref.tensor_reduce(op, a, axis, dout, negate).reshape(got.shape)
    assert_sim_close(got, want, kind=kind_for(dout, "arith"), err_msg="%s %s" % (op, axis))


@pytest.mark.parametrize("axis", ["X", "XY", "XYZW"])
@pytest.mark.parametrize("op", ["bitwise_or", "bitwise_and", "bitwise_xor"])
@pytest.mark.parametrize("negate", [False, True])
def test_tensor_reduce_bitvec_int32(axis, op, negate):
    rng = rng_for("redbv", axis, op, negate)
    x = rng.integers(-2**31, 2**31, size=RED_SHAPE, dtype=np.int64).astype(np.int32)
    got, a = run_reduce(op, axis, negate, "int32", "int32", x)
    want = ref.tensor_reduce(op, a, axis, "int32", negate).reshape(got.shape)
    assert_sim_close(got, want, kind="exact")


@pytest.mark.parametrize("layout", ["strided", "poff", "alias", "bcast"])
def test_tensor_reduce_layouts(layout):
    rng = rng_for("redl", layout)
    x = gen("float32", RED_SHAPE, rng, -10, 10)
    got, a = run_reduce("add", "XY", False, "float32", "float32", x, layout)
    assert_sim_close(got, ref.tensor_reduce("add", a, "XY", "float32").reshape(got.shape))


def test_tensor_reduce_crosses_partitions_when_axes_include_ap0():
    """XYZ over a 3-dim AP includes ap[0]: one result over every partition (sequential)."""
    rng = rng_for("redxp")
    x = gen("float32", (16, 4, 8), rng, -1e4, 1e4)
    got, a = run_reduce("add", "XYZ", False, "float32", "float32", x)
    assert got.shape == (1, 1)
    assert_sim_close(got.reshape(1), ref.tensor_reduce("add", a, "XYZ", "float32"))


def test_tensor_reduce_sum_is_sequential_fp32():
    """A fold whose sequential fp32 result differs from the exact and pairwise sums."""
    x = np.array([[1.0, 2.0 ** -24, 2.0 ** -24, 2.0 ** -24, 2.0 ** -24, -1.0]], np.float32)
    got, a = run_reduce("add", "X", False, "float32", "float32", x.reshape(1, 1, 1, 6))
    assert got.reshape(-1)[0] == 0.0          # each 2^-24 is absorbed by 1.0 (ties to even)


# ==== Matmult =======================================================================

def run_matmul(mv, st, flags, *, pdt="float32", layouts=("contig", "contig"), prefill=None,
               written=None):
    """Matmuls into one PSUM tile; ``flags`` is a list of accumulation flags (one matmul
    per flag, on (mv[i], st[i]) pairs); ``prefill`` = raw bits Memset over the PSUM
    first (on the rows/cols marked by ``written``). Returns the PSUM copied out after
    each matmul."""
    K, N = mv[0].shape
    M = st[0].shape[1]
    opnds, ins_pairs = [], []
    for i, (a, b) in enumerate(zip(mv, st)):
        A = Opnd("mv%d" % i, str_dt(a), a.shape, layouts[0])
        B = Opnd("st%d" % i, str_dt(b), b.shape, layouts[1])
        A.fill(a)
        B.fill(b)
        opnds += [A, B]
        ins_pairs.append((A.ap(), B.ap()))
    outs = [Opnd("o%d" % i, pdt, (M, N), io="out") for i in range(len(flags))]
    opnds += outs
    extra = [tensor("ps", "Internal", pdt, [M, N], "PSUM")]
    psap = whole("ps", (M, N), pdt)
    code = []
    if prefill is not None:
        code.append(insn("pre", "Memset", "DVE", outs=[written], mode="Const", constant=prefill))
    for i, f in enumerate(flags):
        code.append(insn("mm%d" % i, "Matmult", "PE", ins=list(ins_pairs[i]), outs=[psap],
                         accumulation_flag=f))
        code.append(insn("cp%d" % i, "TensorCopy", "DVE", ins=[psap], outs=[outs[i].ap()]))
    out, _ = simulate(opnds, code, extra_allocs=extra)
    return [o.extract(out) for o in outs]


def str_dt(a):
    return {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16",
            "float8_e4m3": "float8e4", "float8_e5m2": "float8e5",
            "float8_e4m3fn": "float8_e4m3fn", "uint8": "uint8"}[a.dtype.name]


def mm_bound(mv, st):
    return fp32_sum_bound(np.abs(ref.decode(st)).T.astype(np.float64) @
                          np.abs(ref.decode(mv)).astype(np.float64), mv.shape[0])


@pytest.mark.parametrize("dts", [("float32", "float32"), ("bfloat16", "bfloat16"),
                                 ("float16", "float16"), ("float8e4", "float8e4"),
                                 ("float8e5", "float8e5"), ("float8_e4m3fn", "float8_e4m3fn"),
                                 ("uint8", "uint8"), ("bfloat16", "float8e4"),
                                 ("float32", "bfloat16")])
@pytest.mark.parametrize("K,M,N", [(128, 128, 512), (64, 32, 100), (1, 7, 3)])
def test_matmult(dts, K, M, N):
    rng = rng_for("mm", dts, K, M, N)
    hi = 15 if "uint8" in dts else 2
    mv = gen(dts[0], (K, N), rng, 0 if dts[0] == "uint8" else -hi, hi)
    st = gen(dts[1], (K, M), rng, 0 if dts[1] == "uint8" else -hi, hi)
    got, = run_matmul([mv], [st], [2])
    assert_sim_close(got, ref.matmult(mv, st), atol=mm_bound(mv, st))


def test_matmult_flags_start_accumulate_overwrite():
    """start (2) zeroes then writes; accumulate (1) adds; 0 overwrites; 3 acts as start."""
    rng = rng_for("mmflags")
    K, M, N = 32, 16, 24
    pairs = [(gen("float32", (K, N), rng), gen("float32", (K, M), rng)) for _ in range(5)]
    flags = [2, 1, 1, 0, 3]
    got = run_matmul([p[0] for p in pairs], [p[1] for p in pairs], flags)
    state = np.zeros((M, N), np.float32)
    written = np.zeros((M, N), bool)
    for i, f in enumerate(flags):
        res = ref.matmult(*pairs[i])
        state = ref.psum_write(state, written, res, f)
        written[:] = True
        assert_sim_close(got[i], state, atol=sum(mm_bound(*pairs[j]) for j in range(i + 1)),
                         err_msg="after matmul %d (flag %d)" % (i, f))


def test_matmult_accumulate_writes_never_written_psum():
    """Accumulate onto PSUM never written since the last start is a plain write; where a
    Memset wrote (1.0f), the result is added."""
    rng = rng_for("mmfresh")
    K, M, N = 16, 8, 12
    mv, st = gen("float32", (K, N), rng), gen("float32", (K, M), rng)
    half = ap("ps", [[N, M // 2], [1, N]])            # the first M/2 partitions
    got, = run_matmul([mv], [st], [1], prefill=0x3F800000, written=half)
    res = ref.matmult(mv, st)
    written = np.zeros((M, N), bool)
    written[: M // 2] = True
    want = ref.psum_write(np.ones((M, N), np.float32), written, res, 1)
    assert_sim_close(got, want, atol=mm_bound(mv, st))


def test_matmult_k_tiled_spec_vector():
    """nki-isa-semantics §4 vector 10: d[256,128], e[256,512] as two K=128 tiles
    accumulated into one PSUM tile equal d.T @ e."""
    rng = rng_for("mmk")
    d = gen("float32", (256, 128), rng, -1, 1)
    e = gen("float32", (256, 512), rng, -1, 1)
    got = run_matmul([e[:128], e[128:]], [d[:128], d[128:]], [2, 1])[-1]
    want = d.T.astype(np.float64) @ e.astype(np.float64)
    assert_sim_close(got, want.astype(np.float32), atol=mm_bound(e, d))
    seq = ref.psum_write(ref.matmult(e[:128], d[:128]), np.ones((128, 512), bool),
                         ref.matmult(e[128:], d[128:]), 1)
    assert_sim_close(got, seq, atol=mm_bound(e, d))


def test_matmult_bf16_psum_accumulate():
    """A bf16 PSUM destination: the old value is upcast, added in fp32, rounded to bf16."""
    rng = rng_for("mmbf")
    K, M, N = 64, 16, 32
    pairs = [(gen("bfloat16", (K, N), rng), gen("bfloat16", (K, M), rng)) for _ in range(2)]
    got = run_matmul([p[0] for p in pairs], [p[1] for p in pairs], [2, 1], pdt="bfloat16")
    s0 = ref.psum_write(None, False, ref.matmult(*pairs[0]), 2, "bfloat16")
    s1 = ref.psum_write(s0, np.ones((M, N), bool), ref.matmult(*pairs[1]), 1, "bfloat16")
    assert_sim_close(got[0], s0, atol=mm_bound(*pairs[0]))
    assert_sim_close(got[1], s1, atol=mm_bound(*pairs[0]) + mm_bound(*pairs[1]))


@pytest.mark.parametrize("layouts", [("strided", "contig"), ("poff", "strided"),
                                     ("alias", "poff"), ("contig", "alias")], ids="-".join)
def test_matmult_layouts(layouts):
    rng = rng_for("mml", layouts)
    K, M, N = 32, 16, 40
    mv, st = gen("bfloat16", (K, N), rng), gen("float32", (K, M), rng)
    got, = run_matmul([mv], [st], [2], layouts=layouts)
    assert_sim_close(got, ref.matmult(mv, st), atol=mm_bound(mv, st))


# ==== Memset / Iota / Select =========================================================

@pytest.mark.parametrize("dtype,constant", [("float32", 0x3FC00000), ("bfloat16", 0x3F80),
                                            ("float16", 0x3C00), ("float8e4", 0x38),
                                            ("float8e5", 0xFF), ("int32", 0xFFFFFFFF),
                                            ("uint8", 200), ("float32", 0x7FC00001),
                                            ("int16", 0x8000)])
@pytest.mark.parametrize("layout", Opnd.LAYOUTS_OUT)
def test_memset(dtype, constant, layout):
    shape = (8, 3, 7)
    O = Opnd("o", dtype, shape, layout, io="out")
    out, _ = simulate([O], [insn("ms", "Memset", "Pool", outs=[O.ap()], mode="Const",
                                 constant=constant)])
    got = O.extract(out)
    want = ref.memset_value(constant, dtype, shape)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


IOTA_CASES = [  # name, shape, base, channel_multiplier, pattern
    ("arange512", (1, 512), 0, 0, [[1, 512]]),            # §4 vector 12
    ("partition", (128, 1), 0, 1, [[1, 1]]),
    ("5+2p", (128, 1), 5, 2, [[0, 1]]),
    ("p+f", (128, 512), 0, 1, [[1, 512]]),
    ("3d-negative-steps", (16, 60), -40, -3, [[100, 3], [-7, 4], [1, 5]]),
    ("default-pattern", (4, 9), 11, 1000, None),
    ("int32-wrap", (2, 8), 2**31 - 4, 1, [[1, 8]]),
]


@pytest.mark.parametrize("case", IOTA_CASES, ids=[c[0] for c in IOTA_CASES])
@pytest.mark.parametrize("dtype", ["int32", "float32", "bfloat16", "int16", "float8e4"])
def test_iota(case, dtype):
    name, shape, base, cm, pattern = case
    O = Opnd("o", dtype, shape, io="out")
    keys = dict(base=base, channel_multiplier=cm)
    if pattern is not None:
        keys["pattern"] = pattern
    out, _ = simulate([O], [insn("io", "Iota", "Pool", outs=[O.ap()], **keys)])
    assert_sim_close(O.extract(out), ref.iota(shape, dtype, base, cm, pattern), kind="exact")


def test_iota_spec_vector_values():
    """§4 vector 12 spelled out: arange, the partition index, 5 + 2p."""
    for shape, base, cm, pat, want in (((1, 512), 0, 0, [[1, 512]], np.arange(512)[None]),
                                       ((128, 1), 0, 1, [[1, 1]], np.arange(128)[:, None]),
                                       ((128, 1), 5, 2, [[1, 1]], 5 + 2 * np.arange(128)[:, None])):
        O = Opnd("o", "int32", shape, io="out")
        out, _ = simulate([O], [insn("io", "Iota", "Pool", outs=[O.ap()], base=base,
                                     channel_multiplier=cm, pattern=pat)])
        np.testing.assert_array_equal(O.extract(out), want.astype(np.int32))


def test_iota_into_uint8_saturates():
    """The int32 iota value is cast to the output dtype with the cast rules (integers
    saturate): -2..253+ into uint8 gives 0 for negatives and 255 above 255."""
    shape = (2, 300)
    O = Opnd("o", "uint8", shape, io="out")
    out, _ = simulate([O], [insn("io", "Iota", "Pool", outs=[O.ap()], base=-2,
                                 channel_multiplier=1, pattern=[[1, 300]])])
    assert_sim_close(O.extract(out), ref.iota(shape, "uint8", -2, 1, [[1, 300]]), kind="exact")


SEL_CASES = [("tensor", "tensor"), ("tensor", "imm"), ("imm", "tensor"), ("imm", "imm")]


@pytest.mark.parametrize("tk,fk", SEL_CASES, ids=["-".join(c) for c in SEL_CASES])
@pytest.mark.parametrize("pdt", ["float32", "uint8", "bfloat16", "int32"])
@pytest.mark.parametrize("vdt,odt", [("float32", "float32"), ("bfloat16", "float32"),
                                     ("float32", "bfloat16"), ("int32", "int32"),
                                     ("float16", "float8e5")])
def test_select(tk, fk, pdt, vdt, odt):
    rng = rng_for("sel", tk, fk, pdt, vdt, odt)
    shape = (16, 2, 9)
    Pd = Opnd("p", pdt, shape)
    pred = Pd.fill(gen(pdt, shape, rng, 0, 1, ints=True))
    opnds, ins, vals = [Pd], [Pd.ap()], []
    for j, k in enumerate((tk, fk)):
        if k == "imm":
            v = float(ref.cast(np.float32([-7.25 if j else 3.5]), vdt)[0])
            ins.append(imm(v))
            vals.append(np.float32(v))
        else:
            T = Opnd("v%d" % j, vdt, shape, "strided" if j else "contig")
            vals.append(T.fill(gen(vdt, shape, rng, -100, 100), rng))
            opnds.append(T)
            ins.append(T.ap())
    O = Opnd("o", odt, shape, io="out")
    opnds.append(O)
    out, _ = simulate(opnds, [insn("sel", "Select", "DVE", ins=ins, outs=[O.ap()])])
    assert_sim_close(O.extract(out), ref.select(pred, vals[0], vals[1], odt), kind="exact")


def test_select_predicate_must_be_0_or_1():
    shape = (4, 8)
    Pd, T, O = Opnd("p", "float32", shape), Opnd("t", "float32", shape), \
        Opnd("o", "float32", shape, io="out")
    p = np.zeros(shape, np.float32)
    p[2, 5] = 2.0
    Pd.fill(p)
    T.fill(np.ones(shape, np.float32))
    with pytest.raises(birsim.SimulationError) as ei:
        simulate([Pd, T, O], [insn("sel", "Select", "DVE", ins=[Pd.ap(), T.ap(), imm(0.0)],
                                   outs=[O.ap()])])
    assert ei.value.instruction == "sel"


# ==== data movement: DMACopy modes, StreamTranspose ====================================

@pytest.mark.parametrize("top", ref.TRANSPOSE_OPS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_dma_transpose(top, dtype):
    rng = rng_for("dmat", top, dtype)
    shape = (2, 3, 4, 5)
    x = gen(dtype, shape, rng, -100, 100)
    want = ref.dma_transpose(x, top)
    A = Opnd("a", dtype, shape, mem="DRAM")
    O = Opnd("o", dtype, want.shape, io="out")
    A.fill(x)
    out, _ = simulate([A, O], [insn("t", "DMACopy", "DMA", ins=[A.ap()], outs=[O.ap()],
                                    mode="Transpose", transpose_op=top)])
    assert_sim_close(O.extract(out), want, kind="exact")


def test_dma_transpose_2d_spec_vector():
    """§4 vector 22: fp16 [16, 128] becomes [128, 16] (HBM -> SBUF and SBUF -> SBUF)."""
    rng = rng_for("dmat2")
    x = gen("float16", (16, 128), rng, -100, 100)
    for mem in ("DRAM", "SB"):
        A, O = Opnd("a", "float16", x.shape, mem=mem), Opnd("o", "float16", (128, 16), io="out")
        A.fill(x)
        out, _ = simulate([A, O], [insn("t", "DMACopy", "DMA", ins=[A.ap()], outs=[O.ap()],
                                        mode="Transpose", transpose_op="WZXY")])
        np.testing.assert_array_equal(O.extract(out), x.T)


@pytest.mark.parametrize("src_shape,out_shape", [((1, 64), (8, 64)), ((2, 16), (8, 16)),
                                                 ((1, 5), (4, 10))])
@pytest.mark.parametrize("sdt,ddt", [("float32", "float32"), ("float32", "bfloat16"),
                                     ("uint8", "uint8")])
def test_dma_replicate(src_shape, out_shape, sdt, ddt):
    rng = rng_for("rep", src_shape, sdt, ddt)
    x = gen(sdt, src_shape, rng, 0, 100)
    A, O = Opnd("a", sdt, src_shape, mem="DRAM"), Opnd("o", ddt, out_shape, io="out")
    A.fill(x)
    out, _ = simulate([A, O], [insn("r", "DMACopy", "DMA", ins=[A.ap()], outs=[O.ap()],
                                    mode="Replicate")])
    want = ref.cast(ref.dma_replicate(x, int(np.prod(out_shape))), ddt).reshape(out_shape)
    assert_sim_close(O.extract(out), want, kind="exact")


@pytest.mark.parametrize("op,constants", [("add", None), ("add", [0.5, -2.0, 3.0]),
                                          ("max", None), ("min", None)])
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dts,odt", [(("float32", "float32", "float32"), "float32"),
                                     (("bfloat16", "float32", "bfloat16"), "bfloat16"),
                                     (("float16", "bfloat16", "float32"), "float32")])
def test_dma_cce(op, constants, n, dts, odt):
    rng = rng_for("cce", op, constants, n, dts, odt)
    shape = (8, 24)
    opnds, xs = [], []
    for i in range(n):
        A = Opnd("a%d" % i, dts[i], shape, mem="DRAM")
        xs.append(A.fill(gen(dts[i], shape, rng, -10, 10)))
        opnds.append(A)
    O = Opnd("o", odt, shape, io="out")
    keys = dict(mode="CCE", op=op)
    if constants is not None:
        keys["constants"] = constants[:n]
    out, _ = simulate(opnds + [O], [insn("c", "DMACopy", "DMA", ins=[a.ap() for a in opnds],
                                         outs=[O.ap()], **keys)])
    want = ref.dma_cce(xs, op, constants, odt)
    assert_sim_close(O.extract(out), want, kind="exact" if op != "add" else "arith")


@pytest.mark.parametrize("shape", [(32, 32), (64, 96), (128, 128)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint8", "int32", "float8e5"])
def test_stream_transpose(shape, dtype):
    rng = rng_for("st", shape, dtype)
    x = gen(dtype, shape, rng, -100, 100)
    if dtype in FLOATS:
        x.reshape(-1)[:2] = np.array([np.nan, -0.0], np.float32).astype(x.dtype)
    A, O = Opnd("a", dtype, shape), Opnd("o", dtype, shape, io="out")
    A.fill(x)
    out, _ = simulate([A, O], [insn("t", "StreamTranspose", "DVE", ins=[A.ap()],
                                    outs=[O.ap()])])
    np.testing.assert_array_equal(O.extract(out).view(np.uint8),
                                  np.ascontiguousarray(ref.stream_transpose(x)).view(np.uint8))


# ==== registers =====================================================================

def reg_prog(allocs, code, inputs=None):
    prog = module([function("main", allocs, code)])
    sim = birsim.Simulator(prog, strict=True)
    return sim.run(inputs or {}), sim


@pytest.mark.parametrize("op,x,y", [("add", 0x7FFFFFFF, 1), ("subtract", -2**31, 1),
                                    ("mult", 0x10001, 0x10001), ("divide", -7, 2),
                                    ("max", -3, 2), ("min", -3, 2), ("is_lt", -3, 2),
                                    ("is_equal", 5, 5), ("bitwise_and", 0x0F0F, 0x00FF),
                                    ("bitwise_xor", -1, 0x1234), ("bitwise_not", 0x1234, 0),
                                    ("logical_shift_right", -16, 2),
                                    ("arith_shift_right", -16, 2), ("arith_shift_left", 3, 30),
                                    ("logical_or", 0, 7)])
@pytest.mark.parametrize("rdt", ["int32", "uint32"])
def test_register_alu(op, x, y, rdt):
    allocs = [register("r1", rdt), register("r2", rdt), register("r3", rdt),
              tensor("o", "ExternalOutput", rdt, [1, 1], "SB")]
    code = [insn("m1", "RegisterMove", "SP", ins=[imm(x & 0xFFFFFFFF if rdt == "uint32" else x,
                                                      rdt)], outs=[reg("r1")]),
            insn("m2", "RegisterMove", "SP", ins=[imm(y & 0xFFFFFFFF if rdt == "uint32" else y,
                                                      rdt)], outs=[reg("r2")]),
            insn("alu", "RegisterAlu", "SP", ins=[reg("r1"), reg("r2")], outs=[reg("r3")], op=op),
            insn("sv", "TensorSave", "SP", ins=[reg("r3")], outs=[ap("o", [[1, 1], [1, 1]], rdt)])]
    out, sim = reg_prog(allocs, code)
    want = ref.register_alu(op, x, y, rdt)
    assert sim.register("r3") & 0xFFFFFFFF == want
    assert int(out["o"].reshape(-1)[0]) & 0xFFFFFFFF == want


def test_register_alu_immediates_and_unsigned_compare():
    allocs = [register("a", "uint32"), register("b", "int32")]
    code = [insn("m", "RegisterMove", "SP", ins=[imm(0xFFFFFFFF, "uint32")], outs=[reg("a")]),
            insn("x", "RegisterAlu", "SP", ins=[reg("a"), imm(1, "uint32")], outs=[reg("a")],
                 op="max"),
            insn("y", "RegisterAlu", "SP", ins=[imm(-1, "int32"), imm(1, "int32")],
                 outs=[reg("b")], op="max")]
    _, sim = reg_prog(allocs, code)
    assert sim.register("a") & 0xFFFFFFFF == ref.register_alu("max", 0xFFFFFFFF, 1, "uint32")
    assert sim.register("b") & 0xFFFFFFFF == ref.register_alu("max", -1, 1, "int32")


@pytest.mark.parametrize("src,value", [("imm_int", -5), ("imm_float", 2.75), ("reg", 1234)])
def test_register_move(src, value):
    rdt = "float32" if src == "imm_float" else "int32"
    allocs = [register("r", rdt), register("s", rdt),
              tensor("o", "ExternalOutput", rdt, [1, 1], "SB")]
    code = [insn("m0", "RegisterMove", "SP", ins=[imm(value, rdt)], outs=[reg("s")]),
            insn("m1", "RegisterMove", "SP", ins=[reg("s") if src == "reg" else imm(value, rdt)],
                 outs=[reg("r")]),
            insn("sv", "TensorSave", "SP", ins=[reg("r")], outs=[ap("o", [[1, 1], [1, 1]], rdt)])]
    out, sim = reg_prog(allocs, code)
    bits = int(np.array([value], ref.np_dtype(rdt)).view(np.uint32)[0])
    assert sim.register("r") & 0xFFFFFFFF == bits
    assert out["o"].reshape(-1)[0] == np.array(value, ref.np_dtype(rdt))


TLOAD_CASES = [("float32", 3.5, "int32"), ("float32", 2.5, "int32"), ("float32", -2.7, "int32"),
               ("int32", -5, "uint32"), ("uint8", 200, "int32"), ("bfloat16", 1.5, "float32"),
               ("int32", 77, "float32"), ("float16", -0.5, "int32"), ("float32", 7e9, "int32")]


@pytest.mark.parametrize("mdt,value,rdt", TLOAD_CASES)
def test_tensor_load(mdt, value, rdt):
    allocs = [tensor("a", "ExternalInput", mdt, [2, 3], "SB"), register("r", rdt)]
    data = np.zeros((2, 3), ref.np_dtype(mdt))
    data[1, 2] = np.array(value, np.float64).astype(ref.np_dtype(mdt))
    code = [insn("ld", "TensorLoad", "SP", ins=[ap("a", [[3, 1], [1, 1]], mdt, offset=5)],
                 outs=[reg("r")])]
    _, sim = reg_prog(allocs, code, {"a": data})
    assert sim.register("r") & 0xFFFFFFFF == ref.to_register(data[1, 2], mdt, rdt)


TSAVE_CASES = [("int32", -5, "float32"), ("int32", 300, "int16"), ("int32", 77, "bfloat16"),
               ("float32", 2.5, "int32"), ("float32", -1.25, "float16"),
               ("int32", -5, "uint32"), ("int32", 300, "uint8"), ("int32", -1, "uint8"),
               ("int32", 70000, "int16")]


@pytest.mark.parametrize("rdt,value,mdt", TSAVE_CASES)
def test_tensor_save(rdt, value, mdt):
    allocs = [register("r", rdt), tensor("o", "ExternalOutput", mdt, [1, 1], "SB")]
    code = [insn("m", "RegisterMove", "SP", ins=[imm(value, rdt)], outs=[reg("r")]),
            insn("sv", "TensorSave", "SP", ins=[reg("r")], outs=[ap("o", [[1, 1], [1, 1]], mdt)])]
    out, _ = reg_prog(allocs, code)
    bits = int(np.array([value], ref.np_dtype(rdt)).view(np.uint32)[0])
    want = ref.from_register(bits, rdt, mdt)
    assert_sim_close(out["o"].reshape(-1), np.array([want]), kind="exact",
                     err_msg="%s %r -> %s" % (rdt, value, mdt))


# ==== memory errors and never-written reads ===========================================

def test_read_outside_location_names_instruction_and_operand():
    P, F = 4, 8
    allocs = [tensor("a", "ExternalInput", "float32", [P, F], "SB"),
              tensor("b", "ExternalInput", "float32", [P, F], "SB"),
              tensor("o", "ExternalOutput", "float32", [P, F], "SB")]
    data = {"a": np.ones((P, F), np.float32), "b": np.ones((P, F), np.float32)}
    cases = [
        ("ins[0]", [ap("a", [[F, P], [1, F]], offset=1), whole("b", (P, F))], whole("o", (P, F))),
        ("ins[1]", [whole("a", (P, F)), ap("b", [[F, P + 1], [1, F]])], whole("o", (P, F))),
        ("ins[1]", [whole("a", (P, F)), ap("b", [[F, P], [2, F]])], whole("o", (P, F))),
        ("outs[0]", [whole("a", (P, F)), whole("b", (P, F))], ap("o", [[F, P], [1, F]],
                                                                  offset=F)),
    ]
    for operand, ins, out in cases:
        prog = module([function("main", allocs, [
            insn("tt", "TensorTensor", "DVE", ins=ins, outs=[out], op="add")])])
        with pytest.raises(birsim.MemoryAccessError) as ei:
            birsim.Simulator(prog).run(data)
        assert ei.value.instruction == "tt"
        assert ei.value.operand == operand, str(ei.value)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8"])
@pytest.mark.parametrize("part", ["all", "one_element"])
def test_never_written_read_warns_and_strict_raises(dtype, part):
    P, F = 4, 8
    allocs = [tensor("a", "ExternalInput", dtype, [P, F], "SB"),
              tensor("t", "Internal", dtype, [P, F], "SB"),
              tensor("o", "ExternalOutput", dtype, [P, F], "SB")]
    code = []
    if part == "one_element":      # write every element of t but the last (flat AP)
        n = P * F - 1
        code.append(insn("w", "TensorCopy", "DVE", ins=[ap("a", [[1, 1], [1, n]], dtype)],
                         outs=[ap("t", [[1, 1], [1, n]], dtype)]))
    code.append(insn("rd", "TensorCopy", "DVE", ins=[whole("t", (P, F), dtype)],
                     outs=[whole("o", (P, F), dtype)]))
    prog = module([function("main", allocs, code)])
    data = {"a": np.zeros((P, F), ref.np_dtype(dtype))}
    sim = birsim.Simulator(prog)
    with pytest.warns(birsim.BirsimWarning):
        sim.run(data)
    assert any("rd" in w and "never-written" in w for w in sim.warnings), sim.warnings
    with pytest.raises(birsim.MemoryAccessError) as ei:
        birsim.Simulator(prog, strict=True).run(data)
    assert ei.value.instruction == "rd"
    assert ei.value.operand == "ins[0]"


def test_aliased_locations_see_each_others_writes():
    """Two placed SBUF locations at the same base/addr: a write through one is read
    through the other, bits and all (a float written, read back as int32)."""
    P, F = 8, 16
    rng = rng_for("alias")
    x = gen("float32", (P, F), rng)
    allocs = [tensor("a", "ExternalInput", "float32", [P, F], "SB"),
              tensor("f", "Internal", "float32", [P, F], "SB", base=4, addr=512),
              tensor("i", "Internal", "int32", [P, F], "SB", base=4, addr=512),
              tensor("o", "ExternalOutput", "int32", [P, F], "SB")]
    prog = module([function("main", allocs, [
        insn("w", "TensorCopy", "DVE", ins=[whole("a", (P, F))], outs=[whole("f", (P, F))]),
        insn("r", "TensorCopy", "DVE", ins=[whole("i", (P, F), "int32")],
             outs=[whole("o", (P, F), "int32")])])])
    out = birsim.Simulator(prog, strict=True).run({"a": x})
    np.testing.assert_array_equal(out["o"], x.view(np.int32))


# ==== the fp16 RNE tie, repeated (nki-isa-semantics §4 vector 8) ========================

def test_fp16_rne_tie_repeated_in_a_loop():
    """fp16(1024) + 0.5, 2048 times, each result written back as fp16: every add is a tie
    that rounds to even, so the value stays 1024."""
    allocs = [tensor("a", "ExternalInput", "float16", [1, 4], "SB"),
              tensor("o", "ExternalOutput", "float16", [1, 4], "SB")]
    t = ap("a", [[4, 1], [1, 4]], "float16")
    prog = module([function("main", allocs, [
        loop("l", "i", 0, 2048, 1, [insn("add", "TensorScalar", "DVE", ins=[t], outs=[t],
                                         op0="add", const0=0.5)]),
        insn("cp", "TensorCopy", "DVE", ins=[t], outs=[ap("o", [[4, 1], [1, 4]], "float16")])])])
    x = np.array([[1024, 1025, 2, -1024]], np.float16)
    out = birsim.Simulator(prog, strict=True).run({"a": x})["o"]
    v = x.copy()
    for _ in range(2048):
        v = ref.tensor_scalar(v, "add", 0.5, "bypass", 0.0, "float16")
    np.testing.assert_array_equal(out, v)
    assert out[0, 0] == 1024


def test_tolerance_table_shape():
    """The table covers every float dtype the tests use, for every kind."""
    for kind, table in TOLERANCES.items():
        for dt in FLOATS:
            assert dt in table, (kind, dt)


# ==== big tiles (rows longer than the kernels' 1024-element chunks) ====================

@pytest.mark.parametrize("dtype,layout", [("float32", "contig"), ("bfloat16", "contig"),
                                          ("float32", "strided"), ("float16", "poff")])
def test_big_tiles_cross_chunks(dtype, layout):
    rng = rng_for("big", dtype, layout)
    # poff starts 3 partitions down: 125 rows keep the tensor within SBUF's 128 partitions
    shape = {"contig": (128, 2048), "poff": (125, 1500)}.get(layout, (128, 1500))
    P = shape[0]
    A, B = Opnd("a", dtype, shape, layout), Opnd("b", dtype, shape)
    S = Opnd("s", "float32", (P, 1))
    outs = [Opnd("o%d" % i, dtype, shape, layout if i % 2 else "contig", io="out")
            for i in range(5)]
    a = A.fill(gen(dtype, shape, rng, -3, 3), rng)
    b = B.fill(gen(dtype, shape, rng, -3, 3), rng)
    s = S.fill(gen("float32", (P, 1), rng, -2, 2))
    code = [insn("tt", "TensorTensor", "DVE", ins=[A.ap(), B.ap()], outs=[outs[0].ap()], op="mult"),
            insn("act", "Activation", "Activation", ins=[A.ap(), S.ap(), imm(0.5)],
                 outs=[outs[1].ap()], func="Exp"),
            insn("tsp", "TensorScalarPtr", "DVE", ins=[A.ap(), S.ap(), imm(0.25)],
                 outs=[outs[2].ap()], op0="subtract", op1="mult"),
            insn("cp", "TensorCopy", "DVE", ins=[A.ap()], outs=[outs[3].ap()]),
            insn("rc", "Reciprocal", "DVE", ins=[B.ap()], outs=[outs[4].ap()])]
    out, _ = simulate([A, B, S] + outs, code)
    sc = s.reshape(P, 1)
    assert_sim_close(outs[0].extract(out), ref.tensor_tensor("mult", a, b, dtype))
    assert_sim_close(outs[1].extract(out), ref.activation("Exp", a, dtype, sc, 0.5),
                     kind="transcendental")
    assert_sim_close(outs[2].extract(out), ref.tensor_scalar(a, "subtract", sc, "mult", 0.25,
                                                             dtype))
    assert_sim_close(outs[3].extract(out), a, kind="exact")
    assert_sim_close(outs[4].extract(out), ref.reciprocal(b, dtype))


# ==== read everything, then write: overlapping operands ================================

OVERLAP_OPS = ["TensorCopy", "TensorScalar", "Activation", "Reciprocal", "Exponential",
               "Select", "TensorTensor", "DMACopy", "GenericCopy", "TensorReduce"]


@pytest.mark.parametrize("op", OVERLAP_OPS)
@pytest.mark.parametrize("how", ["same_location", "aliased_locations"])
@pytest.mark.parametrize("shift", [1, -1])
def test_overlapping_output_reads_original_input(op, how, shift):
    """out overlaps in[0] shifted by one element (through the same location, or through
    a second placed location aliasing the same SBUF bytes): every input element is read
    before any output element is written."""
    rng = rng_for("ovl", op, how, shift)
    F = 48
    x = gen("float32", (1, F + 1), rng, 0.5, 3)
    lo, hi = (0, 1) if shift == 1 else (1, 0)             # element offsets of in / out
    if how == "same_location":
        allocs = [tensor("x", "ExternalInput", "float32", [1, F + 1], "SB")]
        src, dst = "x", "x"
    else:
        allocs = [tensor("x", "ExternalInput", "float32", [1, F + 1], "SB", base=2, addr=64),
                  tensor("y", "Internal", "float32", [1, F], "SB", base=2, addr=64 + 4 * hi)]
        src, dst, hi = "x", "y", 0
    in_ap = ap(src, [[F + 1, 1], [1, F]], offset=lo or None)
    out_ap = ap(dst, [[F + 1, 1], [1, 1 if op == "TensorReduce" else F]],
                offset=hi or None)
    pred = tensor("p", "ExternalInput", "float32", [1, F], "SB")
    extra = {}
    kw = {}
    ins = [in_ap]
    if op == "TensorScalar":
        kw = dict(op0="mult", const0=1.5, op1="add", const1=-0.25)
    elif op == "Activation":
        ins += [imm(1.25), imm(0.5)]
        kw = dict(func="Square")
    elif op == "Select":
        allocs.append(pred)
        ins = [ap("p", [[F, 1], [1, F]]), in_ap, imm(-1.0)]
        extra = {"p": (rng.integers(0, 2, (1, F))).astype(np.float32)}
    elif op == "TensorTensor":
        ins = [in_ap, in_ap]
        kw = dict(op="subtract")
    elif op == "TensorReduce":
        kw = dict(op="add", axis="X")
    allocs.append(tensor("o", "ExternalOutput", "float32", [1, F + 1], "SB"))
    code = [insn("k", op, "DVE" if op not in ("DMACopy",) else "DMA", ins=ins, outs=[out_ap],
                 **kw),
            insn("cp", "TensorCopy", "DVE", ins=[ap("x", [[F + 1, 1], [1, F + 1]])],
                 outs=[ap("o", [[F + 1, 1], [1, F + 1]])])]
    out = birsim.Simulator(module([function("main", allocs, code)]), strict=True).run(
        dict({"x": x}, **extra))["o"]
    v = x[0, lo:lo + F]
    res = {"TensorCopy": v, "GenericCopy": v, "DMACopy": v,
           "TensorScalar": ref.tensor_scalar(v, "mult", 1.5, "add", -0.25, "float32"),
           "Activation": ref.activation("Square", v, "float32", 1.25, 0.5),
           "Reciprocal": ref.reciprocal(v, "float32"),
           "Exponential": ref.exponential(v, "float32"),
           "Select": ref.select(extra.get("p", np.zeros((1, F)))[0], v, np.float32(-1.0),
                                "float32"),
           "TensorTensor": ref.tensor_tensor("subtract", v, v, "float32"),
           "TensorReduce": ref.tensor_reduce("add", v[None], "X", "float32")}[op]
    want = x.copy()
    start = lo + shift
    want[0, start:start + res.size] = res
    kind = "transcendental" if op == "Exponential" else "arith"
    assert_sim_close(out, want, kind=kind)


def test_psum_accumulate_through_strided_destination():
    """start then accumulate into every other column of a wider PSUM tile: the other
    columns keep their Memset fill, the addressed ones hold the fp32 sum."""
    rng = rng_for("psumstride")
    K, M, N = 16, 8, 10
    pairs = [(gen("float32", (K, N), rng), gen("float32", (K, M), rng)) for _ in range(2)]
    opnds = []
    for i, (a, b) in enumerate(pairs):
        A, B = Opnd("mv%d" % i, "float32", a.shape), Opnd("st%d" % i, "float32", b.shape)
        A.fill(a)
        B.fill(b)
        opnds += [A, B]
    O = Opnd("o", "float32", (M, 2 * N), io="out")
    dst = ap("ps", [[2 * N, M], [2, N]], offset=1)
    code = [insn("fill", "Memset", "Pool", outs=[whole("ps", (M, 2 * N))], mode="Const",
                 constant=0x40000000),                                    # 2.0f
            insn("mm0", "Matmult", "PE", ins=[opnds[0].ap(), opnds[1].ap()], outs=[dst],
                 accumulation_flag=2),
            insn("mm1", "Matmult", "PE", ins=[opnds[2].ap(), opnds[3].ap()], outs=[dst],
                 accumulation_flag=1),
            insn("cp", "TensorCopy", "DVE", ins=[whole("ps", (M, 2 * N))], outs=[O.ap()])]
    out, _ = simulate(opnds + [O], code,
                      extra_allocs=[tensor("ps", "Internal", "float32", [M, 2 * N], "PSUM")])
    got = O.extract(out)
    assert np.all(got[:, 0::2] == 2.0)
    r0, r1 = ref.matmult(*pairs[0]), ref.matmult(*pairs[1])
    want = ref.psum_write(r0, np.ones((M, N), bool), r1, 1)
    assert_sim_close(got[:, 1::2], want, atol=mm_bound(*pairs[0]) + mm_bound(*pairs[1]))


@pytest.mark.parametrize("op", ["max", "min", "abs_max", "abs_min"])
def test_max_min_nan_and_ties_return_right_operand(op):
    """bs_alu.def's reading: a NaN (the compare is false) or a tie returns the right
    operand."""
    a = np.array([[np.nan, 1.0, 2.0, np.nan, -2.0, 0.0]], np.float32)
    b = np.array([[1.0, np.nan, 2.0, np.nan, 2.0, -0.0]], np.float32)
    got, _, _ = run_tt(op, ("float32",) * 3, a.shape, data=(a, b))
    assert_sim_close(got, ref.tensor_tensor(op, a, b, "float32"), kind="exact")


@pytest.mark.parametrize("op,x,y", [("add", 1.5, 2.25), ("mult", -3.0, 0.1),
                                    ("subtract", 1.0, 3.5), ("divide", 1.0, 3.0),
                                    ("max", -1.0, 2.0)])
def test_register_alu_float(op, x, y):
    allocs = [register("a", "float32"), register("b", "float32"), register("c", "float32")]
    code = [insn("m1", "RegisterMove", "SP", ins=[imm(x)], outs=[reg("a")]),
            insn("m2", "RegisterMove", "SP", ins=[imm(y)], outs=[reg("b")]),
            insn("alu", "RegisterAlu", "SP", ins=[reg("a"), reg("b")], outs=[reg("c")], op=op)]
    _, sim = reg_prog(allocs, code)
    want = ref.alu(op, np.float32(x), np.float32(y))
    assert sim.register("c") & 0xFFFFFFFF == int(np.asarray(want).view(np.uint32))


def test_dma_descriptors_in_a_queue():
    """DMADescriptorCopy / Transpose / Replicate / CCE fired by a DMATrigger behave as the
    DMACopy modes."""
    from bir import dma_block, dma_queue
    rng = rng_for("desc")
    x = gen("float32", (4, 6), rng)
    y = gen("float32", (4, 6), rng)
    row = gen("bfloat16", (1, 6), rng)
    allocs = [tensor("x", "ExternalInput", "float32", [4, 6], "DRAM"),
              tensor("y", "ExternalInput", "float32", [4, 6], "DRAM"),
              tensor("r", "ExternalInput", "bfloat16", [1, 6], "DRAM"),
              tensor("c", "ExternalOutput", "bfloat16", [4, 6], "SB"),
              tensor("t", "ExternalOutput", "float32", [6, 4], "SB"),
              tensor("p", "ExternalOutput", "bfloat16", [4, 6], "SB"),
              tensor("s", "ExternalOutput", "float32", [4, 6], "SB")]
    descs = [insn("dc", "DMADescriptorCopy", "DMA", ins=[whole("x", (4, 6))],
                  outs=[whole("c", (4, 6), "bfloat16")]),
             insn("dt", "DMADescriptorTranspose", "DMA", ins=[whole("x", (4, 6))],
                  outs=[whole("t", (6, 4))], transpose_op="WZXY"),
             insn("dr", "DMADescriptorReplicate", "DMA", ins=[whole("r", (1, 6), "bfloat16")],
                  outs=[whole("p", (4, 6), "bfloat16")]),
             insn("dx", "DMADescriptorCCE", "DMA", ins=[whole("x", (4, 6)), whole("y", (4, 6))],
                  outs=[whole("s", (4, 6))], cce_op="add", constants=[2.0, -1.0])]
    q = dma_queue("q", [dma_block("blk", *descs, trigger="trig")])
    prog = module([function("main", allocs, [
        insn("trig", "DMATrigger", "DMA", queue="q", dma_blocks=["blk"])])], dma_queues=[q])
    out = birsim.Simulator(prog, strict=True).run({"x": x, "y": y, "r": row})
    assert_sim_close(out["c"], ref.cast(x, "bfloat16"), kind="exact")
    assert_sim_close(out["t"], ref.dma_transpose(x, "WZXY").reshape(6, 4), kind="exact")
    assert_sim_close(out["p"], ref.dma_replicate(row, 24).reshape(4, 6), kind="exact")
    assert_sim_close(out["s"], ref.dma_cce([x, y], "add", [2.0, -1.0]))


@pytest.mark.parametrize("bias_dt", ["bfloat16", "float16", "float8e4"])
def test_activation_bias_tensor_dtypes(bias_dt):
    """The bias may be a per-partition tensor of any dtype (decoded to fp32)."""
    rng = rng_for("actbias", bias_dt)
    shape, P = (16, 20), 16
    A, Bt, O = Opnd("a", "float32", shape), Opnd("b", bias_dt, (P, 1)), \
        Opnd("o", "float32", shape, io="out")
    a = A.fill(gen("float32", shape, rng))
    b = Bt.fill(gen(bias_dt, (P, 1), rng))
    out, _ = simulate([A, Bt, O], [insn("act", "Activation", "Activation",
                                        ins=[A.ap(), imm(-0.5), Bt.ap()], outs=[O.ap()],
                                        func="Tanh")])
    assert_sim_close(O.extract(out), ref.activation("Tanh", a, "float32", -0.5, b),
                     kind="transcendental")


def test_cast_float32r_rne_to_10_mantissa_bits():
    """float32r keeps 10 explicit mantissa bits (TF32), RNE: ties at bit 12 go to even;
    reading float32r is a passthrough."""
    base = np.array([1.0, 1.5, -3.0, 1000.0, 2.0 ** -100], np.float32).view(np.uint32)
    bits = np.concatenate([base + 0x1000, base + 0x3000, base + 0x0FFF, base + 0x1001,
                           base + 0x2000, base]).astype(np.uint32)
    f = np.concatenate([bits.view(np.float32), np.array([np.inf, -np.inf, np.nan, 3.4e38],
                                                        np.float32)])
    mid, back = _roundtrip("float32r", f)
    want = ref.cast(f, "float32r")
    assert_sim_close(mid, want, kind="exact")
    assert_sim_close(back, want, kind="exact")
    # independent check: the ties (low 13 bits exactly 0x1000) round to an even bit 13
    tie = (bits & 0x1FFF) == 0x1000
    got_bits = mid[: bits.size].view(np.uint32)
    assert np.all((got_bits[tie] & 0x1FFF) == 0) and np.all((got_bits[tie] >> 13) % 2 == 0)


def test_tensor_scalar_ptr_bitvec_int32_scalars():
    rng = rng_for("tspbv")
    P, shape = 8, (8, 16)
    x = rng.integers(-2**31, 2**31, size=shape, dtype=np.int64).astype(np.int32)
    m = rng.integers(0, 2**20, size=(P, 1)).astype(np.int32)
    A, S, O = Opnd("a", "int32", shape), Opnd("s", "int32", (P, 1)), \
        Opnd("o", "int32", shape, io="out")
    A.fill(x)
    S.fill(m)
    out, _ = simulate([A, S, O], [insn("tsp", "TensorScalarPtr", "DVE",
                                       ins=[A.ap(), S.ap(), imm(5.0)], outs=[O.ap()],
                                       op0="bitwise_and", op1="logical_shift_right")])
    want = ref.tensor_scalar(x, "bitwise_and", m, "logical_shift_right", 5, "int32")
    assert_sim_close(O.extract(out), want, kind="exact")


@pytest.mark.parametrize("lin,lout", [("poff", "strided"), ("strided", "poff"),
                                      ("alias", "alias")])
def test_stream_transpose_layouts(lin, lout):
    rng = rng_for("stl", lin, lout)
    shape = (32, 64)
    A, O = Opnd("a", "bfloat16", shape, lin), Opnd("o", "bfloat16", shape, lout, io="out")
    x = A.fill(gen("bfloat16", shape, rng), rng)
    out, _ = simulate([A, O], [insn("t", "StreamTranspose", "DVE", ins=[A.ap()],
                                    outs=[O.ap()])])
    np.testing.assert_array_equal(O.extract(out), ref.stream_transpose(x))


@pytest.mark.parametrize("lin,lout", [("strided", "contig"), ("poff", "strided"),
                                      ("contig", "alias")])
def test_dma_transpose_layouts(lin, lout):
    rng = rng_for("dmatl", lin, lout)
    x = gen("float32", (6, 10), rng)
    A, O = Opnd("a", "float32", (6, 10), lin, mem="SB"), \
        Opnd("o", "bfloat16", (10, 6), lout, io="out")
    a = A.fill(x, rng)
    out, _ = simulate([A, O], [insn("t", "DMACopy", "DMA", ins=[A.ap()], outs=[O.ap()],
                                    mode="Transpose", transpose_op="WZXY")])
    assert_sim_close(O.extract(out), ref.cast(a.T, "bfloat16"), kind="exact")


@pytest.mark.parametrize("value", [2.75, -2.75, 2.5, -0.5, 3e10, -3e10])
def test_register_move_float_immediate_into_int_register(value):
    """An fp32 immediate moved into an int32 register converts by value with the cast
    rules (round to nearest even, saturate), as TensorLoad does."""
    prog = module([function("main", [register("r", "int32")], [
        insn("m", "RegisterMove", "SP", ins=[imm(value, "float32")], outs=[reg("r")])])])
    sim = birsim.Simulator(prog, strict=True)
    sim.run({})
    want = ref.to_register(np.float32(value), "float32", "int32")
    assert sim.register("r") & 0xFFFFFFFF == want, (value, sim.register("r"), want)


def test_activation_unknown_function_is_an_error():
    A, O = Opnd("a", "float32", (2, 4)), Opnd("o", "float32", (2, 4), io="out")
    A.fill(np.ones((2, 4), np.float32))
    with pytest.raises(birsim.BirsimError) as ei:
        simulate([A, O], [insn("act", "Activation", "Activation", ins=[A.ap()],
                               outs=[O.ap()], func="Unknown")])
    assert ei.value.instruction == "act" or ei.value.path is not None


def test_register_ap_start_comes_from_a_register():
    """A register_ap's start moves by value(register) + const_ap_offset elements (the
    register read from the instruction's engine's file: loaded on the same engine); past
    the location's end it is a MemoryAccessError naming the operand."""
    from bir import reg_ap
    P, F = 4, 16
    rng = rng_for("regap")
    x = gen("float32", (P, F), rng)
    idx = np.array([[5, 0, 9, 0]], np.int32)
    allocs = [tensor("a", "ExternalInput", "float32", [P, F], "SB"),
              tensor("i", "ExternalInput", "int32", [1, 4], "SB"),
              tensor("o", "ExternalOutput", "float32", [P, 4], "SB"), register("r")]
    for k, start in ((0, 5 + 2), (2, 9 + 2)):
        prog = module([function("main", allocs, [
            insn("ld", "TensorLoad", "DVE", ins=[ap("i", [[4, 1], [1, 1]], "int32",
                                                   offset=k or None)], outs=[reg("r")]),
            insn("cp", "TensorCopy", "DVE", ins=[reg_ap("a", [[F, P], [1, 4]], "r", 2)],
                 outs=[whole("o", (P, 4))])])])
        out = birsim.Simulator(prog, strict=True).run({"a": x, "i": idx})["o"]
        np.testing.assert_array_equal(out, x[:, start:start + 4])
    prog = module([function("main", allocs, [
        insn("ld", "TensorLoad", "DVE", ins=[ap("i", [[4, 1], [1, 1]], "int32", offset=2)],
             outs=[reg("r")]),
        insn("cp", "TensorCopy", "DVE", ins=[reg_ap("a", [[F, P], [1, 4]], "r", F * 3)],
             outs=[whole("o", (P, 4))])])])
    with pytest.raises(birsim.MemoryAccessError) as ei:
        birsim.Simulator(prog).run({"a": x, "i": idx})
    assert (ei.value.instruction, ei.value.operand) == ("cp", "ins[0]")
