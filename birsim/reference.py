"""NumPy reference semantics of birsim's compute kernels -- the executable spec.

One function per op family, written from the specification alone
(docs/spec/BIR-JSON.md "Operand conventions", "Execution rules", "Dtypes on the NumPy
side"; docs/spec/machine-model.md §4 and §6.1-6.4; docs/spec/nki-isa-semantics.md §2-§4). Nothing here imports
or calls birsim: the differential tests run a program through the simulator and the same
math through these functions, and compare (tolerances in :mod:`birsim.testing`).

The numeric model:

- **Dtypes** are named by their BIR spelling; :data:`NUMPY_DTYPES` maps each to the NumPy or
  ``ml_dtypes`` type that holds one element.
- **Decode** every input to fp32 (integers by value, floats exactly).
- **Arithmetic** is fp32, and every stage rounds to fp32 (round to nearest even) before the
  next uses it: TensorScalar ``op0`` then ``op1``, Activation ``x*scale`` then ``+bias``
  then the function, every step of a reduce or a matmul sum. NumPy's float32 ufuncs round
  each operation separately, which is exactly that.
- **Encode** the fp32 result into the output dtype with :func:`cast`: round to nearest even
  (ties to even) everywhere; fp8 saturates (clip to the format's largest finite value,
  then the ``ml_dtypes`` cast); bf16/fp16 overflow to inf; integers round to nearest even
  and saturate, NaN becoming the type's max (unsigned) or min/max by the sign bit (signed).
  NaN stays NaN in every float format. A cast to the same dtype is a bit copy.
- **Bit-vector ALU ops** (``bitwise_*``, shifts, ``mod_int``) work on int32 two's
  complement values; results keep their low bits when stored into an integer dtype.

Array conventions: functions take and return NumPy arrays in *access-pattern order* (the
element order of the operand's AP, reshaped to its ``num`` list), never memory layouts.
"""

import math

import ml_dtypes
import numpy as np

__all__ = [
    "NUMPY_DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "FP8_MAX", "ALU_OPS", "BITVEC_OPS",
    "ACTIVATIONS", "TRANSPOSE_OPS",
    "np_dtype", "is_float", "decode", "cast", "memset_value",
    "alu", "alu_int", "tensor_tensor", "tensor_scalar", "activation", "tensor_reduce",
    "activate2", "matmult", "psum_write", "reciprocal", "exponential", "select", "iota",
    "dma_transpose", "dma_replicate", "dma_cce", "stream_transpose", "register_alu",
    "to_register", "from_register",
    "bn_stats", "bn_aggr", "bn_gradients", "bn_backprop", "pool", "reduce_transpose",
    "tonga_reduce", "SCAN_IDENTITY", "tensor_scalar_cumulative", "tensor_tensor_scan",
    "scalar_tensor_tensor", "max8", "not_found_index", "find_index8", "match_replace8",
    "stream_shuffle", "FP32_MIN", "COMPARISONS", "copy_predicated", "affine_select",
    "range_select", "X4_DTYPES", "x4_encode", "x4_decode", "quantize_mx", "matmult_mx",
    "mx_scale_quadrant", "matmult_ext", "ACC_IDENTITY", "ACC_COMMANDS", "accumulate",
]

F32 = np.float32

#: BIR dtype name -> NumPy dtype of one element (docs/spec/BIR-JSON.md "Dtypes on the NumPy side").
NUMPY_DTYPES = {
    "float32": np.dtype(np.float32),
    "float32r": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8e4": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8e5": np.dtype(ml_dtypes.float8_e5m2),
    "float8e3": np.dtype(ml_dtypes.float8_e3m4),
    "uint8": np.dtype(np.uint8),
    "int8": np.dtype(np.int8),
    "uint16": np.dtype(np.uint16),
    "int16": np.dtype(np.int16),
    "uint32": np.dtype(np.uint32),
    "int32": np.dtype(np.int32),
    "uint64": np.dtype(np.uint64),
    "int64": np.dtype(np.int64),
}
FLOAT_DTYPES = ("float32", "float32r", "bfloat16", "float16", "float8e4", "float8_e4m3fn",
                "float8e5", "float8e3")
INT_DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64")

#: Largest finite value of each fp8 format: casts into fp8 clip to it (saturation).
FP8_MAX = {"float8e4": 240.0, "float8_e4m3fn": 448.0, "float8e5": 57344.0, "float8e3": 15.5}


def np_dtype(name):
    """The NumPy dtype of BIR dtype ``name`` (``fp8_e4m3fn`` spelling accepted)."""
    if name == "fp8_e4m3fn":
        name = "float8_e4m3fn"
    return NUMPY_DTYPES[name]


def is_float(name):
    return name in FLOAT_DTYPES or name == "fp8_e4m3fn"


# ---- casts -------------------------------------------------------------------------

def decode(x):
    """Any numeric array -> float32 by value (ints round to nearest even above 2^24)."""
    return np.asarray(x).astype(np.float32)


def _round_f32r(f):
    """fp32 keeping 10 explicit mantissa bits, RNE (float32r / TF32)."""
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(f), np.float32(np.nan), r).astype(np.float32)


def _to_int(f, dtype):
    """fp32 -> integer dtype: RNE, saturate, NaN -> max (unsigned) / min or max by sign."""
    info = np.iinfo(dtype)
    f = np.asarray(f, dtype=np.float32)
    nan = np.isnan(f)
    r = np.rint(np.where(nan, 0, f).astype(np.float64))    # fp32 -> fp64 exact, RNE
    lo, hi = float(info.min), float(info.max)
    r = np.clip(r, lo, hi)
    out = np.empty(f.shape, dtype=dtype)
    # float64 cannot hold every int64/uint64 bound exactly: saturate explicitly.
    big = r >= hi
    small = r <= lo
    mid = ~(big | small)
    out[mid] = r[mid].astype(dtype)
    out[big] = info.max
    out[small] = info.min
    if info.min < 0:
        neg = np.signbit(f)
        out[nan & neg] = info.min
        out[nan & ~neg] = info.max
    else:
        out[nan] = info.max
    return out


def cast(x, dtype, src=None, fp8_overflow="saturate"):
    """Encode ``x`` into BIR dtype ``dtype`` (a cast on write, docs/spec/machine-model.md §4.2).

    Same dtype -> a bit-exact copy; otherwise decode to fp32 and encode with RNE: fp8
    saturates (clip to ±max, NaN stays NaN; with ``fp8_overflow="inf"`` an overflow is
    ±inf, NaN for e4m3fn, as ml_dtypes casts), bf16/fp16 overflow to ±inf, integers
    saturate. ``src`` names the BIR dtype of ``x`` where NumPy cannot tell (a float32
    array is ``float32`` unless ``src="float32r"``)."""
    x = np.asarray(x)
    dt = np_dtype(dtype)
    if x.dtype == dt and (dtype != "float32r" or src == "float32r"):
        return x.copy()
    f = decode(x)
    if (dtype in FP8_MAX or dtype == "fp8_e4m3fn") and fp8_overflow == "inf":
        with np.errstate(over="ignore", invalid="ignore"):
            return f.astype(dt)
    if dtype in FP8_MAX or dtype == "fp8_e4m3fn":
        m = FP8_MAX["float8_e4m3fn" if dtype == "fp8_e4m3fn" else dtype]
        return np.clip(f, -m, m).astype(dt)      # np.clip keeps NaN
    if dtype == "float32r":
        return _round_f32r(f)
    if dtype in INT_DTYPES:
        return _to_int(f, dt)
    with np.errstate(over="ignore"):             # overflow to ±inf is the rule here
        return f.astype(dt)                      # float32, bfloat16, float16 (RNE)


def memset_value(constant, dtype, shape):
    """An array of ``shape`` whose every element has the raw bits ``constant``."""
    dt = np_dtype(dtype)
    raw = np.dtype("<u%d" % dt.itemsize)
    return np.full(shape, constant, dtype=raw).view(dt)


# ---- the ALU (docs/spec/machine-model.md §4.5, docs/spec/nki-isa-semantics.md §2.1) ----------------------

def _b(c):
    return np.where(c, F32(1), F32(0))


def _f(x):
    return np.asarray(x, dtype=np.float32)


#: fp32 ALU ops (the ``ts_ops`` table): ``fn(l, r)`` on float32 arrays; order-sensitive ops
#: put ``l`` on the left; unary ops ignore ``r``; max/min/abs_max/abs_min return ``r`` on a
#: tie (and max/min when a NaN is involved: the compare is false).
ALU_OPS = {
    "bypass": lambda l, r: l,
    "add": lambda l, r: l + r,
    "subtract": lambda l, r: l - r,
    "mult": lambda l, r: l * r,
    "divide": lambda l, r: l / r,
    "max": lambda l, r: np.where(l > r, l, r),
    "min": lambda l, r: np.where(l < r, l, r),
    "logical_and": lambda l, r: _b((l != 0) & (r != 0)),
    "logical_or": lambda l, r: _b((l != 0) | (r != 0)),
    "logical_xor": lambda l, r: _b((l != 0) ^ (r != 0)),
    "is_equal": lambda l, r: _b(l == r),
    "not_equal": lambda l, r: _b(l != r),
    "is_gt": lambda l, r: _b(l > r),
    "is_ge": lambda l, r: _b(l >= r),
    "is_lt": lambda l, r: _b(l < r),
    "is_le": lambda l, r: _b(l <= r),
    "pow": lambda l, r: np.power(l, r),
    "mod": lambda l, r: np.fmod(l, r),
    "rsqrt": lambda l, r: F32(1) / np.sqrt(l),
    "abs": lambda l, r: np.abs(l),
    "abs_max": lambda l, r: np.where(np.abs(l) > np.abs(r), l, r),
    "abs_min": lambda l, r: np.where(np.abs(l) < np.abs(r), l, r),
}

#: Ops whose fp32 result is not exactly determined by IEEE basic operations (libm).
TRANSCENDENTAL_ALU_OPS = ("pow",)


def _wrap32(v):
    return (np.asarray(v, dtype=np.int64) + 2**31) % 2**32 - 2**31


def _shl(l, r):
    ok = (r >= 0) & (r <= 31)
    return np.where(ok, (l.astype(np.uint64) << np.where(ok, r, 0).astype(np.uint64))
                    .astype(np.uint64) & 0xFFFFFFFF, 0).astype(np.int64)


def _lshr(l, r):
    ok = (r >= 0) & (r <= 31)
    u = l.astype(np.int64) & 0xFFFFFFFF
    return np.where(ok, u >> np.where(ok, r, 0), 0)


def _ashr(l, r):
    ok = (r >= 0) & (r <= 31)
    return np.where(ok, l >> np.where(ok, r, 0), np.where(l < 0, -1, 0))


#: Bit-vector ops on int32 values (int64 arrays holding int32), results before wrapping.
BITVEC_OPS = {
    "bitwise_not": lambda l, r: ~l,
    "bitwise_and": lambda l, r: l & r,
    "bitwise_or": lambda l, r: l | r,
    "bitwise_xor": lambda l, r: l ^ r,
    "arith_shift_left": _shl,
    "logical_shift_left": _shl,
    "arith_shift_right": _ashr,
    "logical_shift_right": _lshr,
    "mod_int": lambda l, r: np.fmod(l, r),       # C remainder: sign of the dividend
}


def alu(op, l, r):
    """One fp32 ALU stage: ``op(l, r)`` rounded to fp32 (broadcasting NumPy style)."""
    l, r = _f(l), _f(r)
    with np.errstate(all="ignore"):
        return _f(ALU_OPS[op](l, r))


def _int_in(x):
    """An operand as int32 values for the bit-vector path: integer dtypes by value,
    floats via fp32 rounded to nearest even (saturating)."""
    x = np.asarray(x)
    if x.dtype.kind in "iu":
        return _wrap32(x.astype(np.int64))
    return _wrap32(_to_int(decode(x), np.int64))


def alu_int(op, l, r):
    """One bit-vector stage on int32 (two's complement); returns int64 holding int32."""
    l, r = _int_in(l), _int_in(r)
    return _wrap32(BITVEC_OPS[op](l, r))


def _scalar_int(s):
    """An integer-path scalar: a Python number rounds to nearest even (no fp32 detour);
    an array goes through :func:`_int_in`."""
    if np.isscalar(s) and not isinstance(s, np.generic):
        return _wrap32(np.int64(np.rint(float(s))))
    return _int_in(s)


def _store_int(v, dtype):
    """Integer results into ``dtype``: integer dtypes keep the low bits, floats by value."""
    if dtype in INT_DTYPES:
        bits = np.dtype("<u%d" % np_dtype(dtype).itemsize)
        return (np.asarray(v, dtype=np.int64).astype(np.uint64) & np.uint64(
            (1 << (8 * bits.itemsize)) - 1)).astype(bits).view(np_dtype(dtype))
    return cast(np.asarray(v, dtype=np.int64).astype(np.float32), dtype)


def tensor_tensor(op, a, b, out_dtype):
    """TensorTensor: ``out := op(a, b)`` elementwise (a on the left)."""
    if op in BITVEC_OPS:
        return _store_int(alu_int(op, a, b), out_dtype)
    return cast(alu(op, decode(a), decode(b)), out_dtype)


def tensor_scalar(x, op0, s0, op1, s1, out_dtype, reverse0=False, reverse1=False):
    """TensorScalar / TensorScalarPtr: ``t := op0(x, s0)``, ``out := op1(t, s1)``; a
    reverse flag swaps that stage's operands. ``s0``/``s1`` are scalars or arrays that
    broadcast against ``x`` (per partition: shape ``[P, 1, ...]``). With a bit-vector op in
    either stage, both stages run on int32."""
    if op0 in BITVEC_OPS or op1 in BITVEC_OPS:
        def st(op, v, s, rev):
            l, r = (s, v) if rev else (v, s)
            if op in BITVEC_OPS:
                return alu_int(op, l, r)
            return _wrap32(_to_int(alu(op, _int_in(l).astype(np.float32),
                                       _int_in(r).astype(np.float32)), np.int64))
        t = st(op0, _int_in(x), _scalar_int(s0), reverse0)
        t = st(op1, t, _scalar_int(s1), reverse1)
        return _store_int(np.broadcast_to(t, np.shape(x)), out_dtype)
    x = decode(x)
    s0, s1 = decode(s0), decode(s1)
    t = alu(op0, s0, x) if reverse0 else alu(op0, x, s0)
    t = alu(op1, s1, t) if reverse1 else alu(op1, t, s1)
    return cast(np.broadcast_to(t, x.shape), out_dtype)


def reciprocal(x, out_dtype):
    """Reciprocal: ``1 / x`` in fp32 (exact division, not a table)."""
    return cast(alu("divide", F32(1), decode(x)), out_dtype)


def exponential(x, out_dtype, max_value=0.0):
    """Exponential: ``exp(x - max_value)``; the subtraction rounds to fp32 first."""
    t = alu("subtract", decode(x), decode(max_value))
    return cast(_f(np.exp(t.astype(np.float64))), out_dtype)


# ---- Activation (docs/spec/machine-model.md §6.1, docs/spec/nki-isa-semantics.md §2.2, §3.4) -------------

_SQRT2 = math.sqrt(2.0)
_erf = np.frompyfunc(math.erf, 1, 1)


def _erf64(x):
    return _erf(x).astype(np.float64)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


def _phi(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _Phi(x):
    return 0.5 * (1.0 + _erf64(x / _SQRT2))


def _sign(x):
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, x))


#: ActivationFunctionType -> (function of (t, alpha) on float64 values, exact?)
#: ``exact`` functions are single correctly rounded fp32 operations (or compositions the
#: spec spells out operation by operation) and are computed in fp32; the others are the
#: standard mathematical definitions, evaluated in float64 and rounded once to fp32.
ACTIVATIONS = {
    "Identity": (lambda t, a: t, True),
    "Copy": (lambda t, a: t, True),
    "Square": (lambda t, a: t * t, True),
    "Relu": (lambda t, a: np.where(t < 0, F32(0), t), True),
    "Lrelu": (lambda t, a: np.where(t > 0, t, F32(0.01) * t), True),
    "Prelu": (lambda t, a: np.where(t <= 0, a * t, t), True),
    "Abs": (lambda t, a: np.abs(t), True),
    "Sign": (lambda t, a: _f(_sign(t)), True),
    "Is_finite": (lambda t, a: _b(np.isfinite(t)), True),
    "Reciprocal": (lambda t, a: F32(1) / t, True),
    "Sqrt": (lambda t, a: np.sqrt(t), True),
    "Rsqrt": (lambda t, a: F32(1) / np.sqrt(t), True),
    "Abs_reciprocal_sqrt": (lambda t, a: F32(1) / np.sqrt(np.abs(t)), True),
    "Sigmoid": (lambda t, a: _sigmoid(t), False),
    "Tanh": (lambda t, a: np.tanh(t), False),
    "Exp": (lambda t, a: np.exp(t), False),
    "Softplus": (lambda t, a: _softplus(t), False),
    "Ln": (lambda t, a: np.log(t), False),
    "Erf": (lambda t, a: _erf64(t), False),
    "Sin": (lambda t, a: np.sin(t), False),
    "Arctan": (lambda t, a: np.arctan(t), False),
    "Gelu": (lambda t, a: t * _Phi(t), False),
    "Derivative_Gelu": (lambda t, a: _Phi(t) + t * _phi(t), False),
    "Gelu_apprx_tanh": (lambda t, a: 0.5 * t * (1.0 + np.tanh(
        math.sqrt(2.0 / math.pi) * (t + 0.044715 * t ** 3))), False),
    "Gelu_apprx_sigmoid": (lambda t, a: t * _sigmoid(1.702 * t), False),
    "Derivative_Gelu_apprx_sigmoid": (lambda t, a: _sigmoid(1.702 * t) * (
        1.0 + 1.702 * t * (1.0 - _sigmoid(1.702 * t))), False),
    "Silu": (lambda t, a: t * _sigmoid(t), False),
    "Derivative_silu": (lambda t, a: _sigmoid(t) * (1.0 + t * (1.0 - _sigmoid(t))), False),
    "Mish": (lambda t, a: t * np.tanh(_softplus(t)), False),
    "Derivative_Erf": (lambda t, a: 2.0 / math.sqrt(math.pi) * np.exp(-t * t), False),
}


def activation(func, x, out_dtype, scale=1.0, bias=0.0, alpha=0.0):
    """Activation: ``out := func(fp32(fp32(x * scale) + bias); alpha)``. ``scale``,
    ``bias``, ``alpha`` are scalars or per-partition arrays broadcasting against ``x``."""
    fn, exact = ACTIVATIONS[func]
    t = alu("mult", decode(x), decode(scale))
    t = alu("add", t, decode(bias))
    with np.errstate(all="ignore"):
        if exact:
            y = _f(fn(t, decode(alpha)))
        else:
            y = _f(fn(t.astype(np.float64), decode(alpha).astype(np.float64)))
    return cast(y, out_dtype)


def activate2(func, x, out_dtype, op0="bypass", imm0=0.0, op1="bypass", imm1=0.0,
              reverse0=False, reverse1=False, alpha=0.0):
    """Activation with is_activate2 (NKI activate2, docs/spec/nki-isa-semantics.md §3.5):
    ``t = (x op0 imm0) op1 imm1`` (a reversed stage puts the constant on the left; bypass
    skips its stage), each stage rounded to fp32, then ``func(t; alpha)``."""
    t = decode(x)
    for op, c, rev in ((op0, imm0, reverse0), (op1, imm1, reverse1)):
        if op != "bypass":
            t = alu(op, decode(c), t) if rev else alu(op, t, decode(c))
    return activation(func, t, out_dtype, alpha=alpha)


# ---- TensorReduce (docs/spec/machine-model.md §6.1, docs/spec/BIR-JSON.md "Execution rules") -------------

_AXES = {"X": 1, "XY": 2, "XYZ": 3, "XYZW": 4}


def tensor_reduce(op, x, axis, out_dtype, negate=False):
    """TensorReduce over the innermost ``axis`` dims of ``x`` (``x`` in AP shape, partition
    dim first): a sequential left fold ``acc = x0; acc = op(acc, xj)`` rounded to fp32 at
    every step; ``average`` folds ``xj / N`` with add; ``negate`` negates the result.
    Bit-vector ops fold on int32. Returns the kept dims' shape (at least ``(1,)``)."""
    x = np.asarray(x)
    n = min(_AXES[axis], x.ndim)
    kept = x.shape[:x.ndim - n]
    inner = int(np.prod(x.shape[x.ndim - n:]))
    if op in BITVEC_OPS:
        v = _int_in(x).reshape(-1, inner)
        acc = v[:, 0]
        for j in range(1, inner):
            acc = _wrap32(BITVEC_OPS[op](acc, v[:, j]))
        if negate:
            acc = _wrap32(-acc)
        return _store_int(acc.reshape(kept or (1,)), out_dtype)
    v = decode(x).reshape(-1, inner)
    fop = op
    if op == "average":
        v = alu("divide", v, F32(inner))
        fop = "add"
    acc = v[:, 0]
    for j in range(1, inner):
        acc = alu(fop, acc, v[:, j])
    if negate:
        acc = -acc
    return cast(acc.reshape(kept or (1,)), out_dtype)


def reduce_transpose(x):
    """TensorReduce ``apply_transpose``: ``x`` ``[P, F...]`` read as ``[P, F]``; with P and F
    multiples of 32 every 32x32 block is transposed in place (the shape is kept), else
    (both <= 32) the tile becomes ``[F, P]``. Returns the transposed array."""
    x = np.asarray(x)
    P = x.shape[0]
    flat = x.reshape(P, -1)
    F = flat.shape[1]
    if P % 32 == 0 and F % 32 == 0:
        return stream_transpose(flat).reshape(x.shape)
    if P <= 32 and F <= 32:
        return flat.T.copy()
    raise ValueError("apply_transpose needs P, F <= 32 or multiples of 32")


def pool(func, x, out_dtype):
    """Pool of ``x`` (AP shape ``[P, ..., a, b]``) over its two innermost dims, each
    window folded in row-major order in fp32: ``Max`` from -FLT_MAX with fmax (NaN
    skipped), ``Avg`` the sum from 0 times ``1/(a*b)`` (rounded to fp32). Returns the
    outer dims' shape."""
    v = decode(x)
    win = v.shape[-1] * v.shape[-2]
    rows = v.reshape(-1, win)
    if func == "Max":
        acc = np.full(rows.shape[0], -np.finfo(np.float32).max, np.float32)
        for j in range(win):
            acc = np.fmax(acc, rows[:, j])
    else:
        acc = np.zeros(rows.shape[0], np.float32)
        for j in range(win):
            acc = acc + rows[:, j]
        acc = acc * F32(F32(1) / F32(win))
    return cast(acc.reshape(v.shape[:-2]), out_dtype)


def tonga_reduce(op, x, groups, old=None, out_dtype="float32"):
    """TongaReduceMacroSymbolic: ``x`` ``[P, F]`` folded per partition in ``groups``
    runs of F/groups consecutive elements (sequential left fold with ``op``, fp32; int32
    for bit-vector ops), then combined with ``old`` (``op(old, r)``) unless ``old`` is
    None (the first trip). Returns ``[P, groups]`` in ``out_dtype``."""
    x = np.asarray(x)
    P = x.shape[0]
    if op in BITVEC_OPS:
        v = _int_in(x).reshape(P * groups, -1)
        acc = v[:, 0]
        for j in range(1, v.shape[1]):
            acc = _wrap32(BITVEC_OPS[op](acc, v[:, j]))
        if old is not None:
            acc = _wrap32(BITVEC_OPS[op](_int_in(old).reshape(-1), acc))
        return _store_int(acc.reshape(P, groups), out_dtype)
    v = decode(x).reshape(P * groups, -1)
    acc = v[:, 0]
    for j in range(1, v.shape[1]):
        acc = alu(op, acc, v[:, j])
    if old is not None:
        acc = alu(op, decode(old).reshape(-1), acc)
    return cast(acc.reshape(P, groups), out_dtype)


# ---- Matmult and PSUM (docs/spec/machine-model.md §4.4, §6.2) ---------------------------------

def matmult(moving, stationary):
    """``res[m, n] = Σ_k moving[k, n] · stationary[k, m]`` in fp32: each product rounded
    to fp32, summed in k order from +0 with a rounding per step. ``moving`` is ``[K, N]``,
    ``stationary`` ``[K, M]`` (any numeric dtypes); returns fp32 ``[M, N]``."""
    a = decode(moving)
    b = decode(stationary)
    K, N = a.shape
    M = b.shape[1]
    acc = np.zeros((M, N), dtype=np.float32)
    for k in range(K):
        acc = acc + b[k][:, None] * a[k][None, :]
    return acc


def psum_write(old, written, res, flag, out_dtype="float32"):
    """The PSUM write-back of a matmul result ``res`` (fp32) with ``accumulation_flag``
    ``flag``: 2 or 3 (start) zeroes then writes, 1 (accumulate) adds ``res`` to ``old``
    where every byte was ``written`` since the last start (else writes), 0 overwrites.
    Returns the new contents in ``out_dtype``."""
    res = _f(res)
    if flag == 1:
        v = np.where(written, alu("add", decode(old), res), res)
    else:
        v = res
    return cast(v, out_dtype)


def matmult_ext(moving, stationary, *, ifmap_zp=0, weights_zp=0, perf_mode="None"):
    """Matmult with its extra fields (docs/spec/machine-model.md §6.2, docs/spec/nki-isa-semantics.md §3.1):
    zero points ``ifmap_zp`` / ``weights_zp`` are subtracted (in fp32) from moving /
    stationary before the product; ``perf_mode`` ``DoubleRow`` reads ``moving`` as
    ``[P, 2, N]`` and ``stationary`` as ``[P, 2, M]`` (``DoubleRowSwInterleave``: ``[P, N, 2]``
    / ``[P, M, 2]``) and contracts over (partition, pair index), in the order k = 2p + j."""
    a = decode(moving)
    b = decode(stationary)
    if perf_mode != "None":
        P = a.shape[0]
        a = a.reshape(P, -1)
        b = b.reshape(P, -1)
        if perf_mode == "DoubleRowSwInterleave":
            a = a.reshape(P, -1, 2).transpose(0, 2, 1)
            b = b.reshape(P, -1, 2).transpose(0, 2, 1)
        a = a.reshape(2 * P, -1)
        b = b.reshape(2 * P, -1)
    a = a - F32(ifmap_zp)
    b = b - F32(weights_zp)
    return matmult(a, b)


# ---- MX: packed x4 dtypes, quantize_mx, nc_matmul_mx (docs/spec/machine-model.md §4.1, §6.2;
# docs/spec/nki-isa-semantics.md §3.2, §3.30) ---------------------------------------------------

#: x4 dtype -> (lane dtype, container dtype, bits per lane, Emax of the lane format)
X4_DTYPES = {
    "float8_e4m3fn_x4": (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.uint32), 8, 8),
    "float8_e5m2_x4": (np.dtype(ml_dtypes.float8_e5m2), np.dtype(np.uint32), 8, 15),
    "float4_e2m1fn_x4": (np.dtype(ml_dtypes.float4_e2m1fn), np.dtype(np.uint16), 4, 2),
}
_LANE_MAX = {"float8_e4m3fn_x4": 448.0, "float8_e5m2_x4": 57344.0, "float4_e2m1fn_x4": 6.0}


def _lane_codes(f, dtype):
    """fp32 values -> lane codes (uint32): RNE, saturating; fp4 NaN -> signed zero."""
    lane, _, bits, _ = X4_DTYPES[dtype]
    f = np.asarray(f, dtype=np.float32)
    m = _LANE_MAX[dtype]
    c = np.clip(f, -m, m).astype(lane).view(np.uint8).astype(np.uint32)
    if bits == 4:
        c = c & 0xF
        c = np.where(np.isnan(f), np.signbit(f).astype(np.uint32) << 3, c)
    return c


def x4_encode(values, dtype):
    """Pack ``values`` (``[..., 4F]``, any float) into ``[..., F]`` x4 containers: every 4
    consecutive values form one container, value q in lane q (bits ``[8q, 8q+8)`` of a
    uint32 for fp8, ``[4q, 4q+4)`` of a uint16 for fp4)."""
    _, cont, bits, _ = X4_DTYPES[dtype]
    f = decode(values)
    c = _lane_codes(f, dtype).reshape(f.shape[:-1] + (f.shape[-1] // 4, 4))
    out = np.zeros(c.shape[:-1], dtype=np.uint32)
    for q in range(4):
        out |= c[..., q] << np.uint32(bits * q)
    return out.astype(cont)


def x4_decode(containers, dtype):
    """Unpack x4 containers ``[..., F]`` into their fp32 values ``[..., 4F]``."""
    lane, _, bits, _ = X4_DTYPES[dtype]
    c = np.asarray(containers).astype(np.uint32)
    q = np.stack([(c >> np.uint32(bits * j)) & np.uint32((1 << bits) - 1) for j in range(4)],
                 axis=-1).astype(np.uint8)
    return q.view(lane).astype(np.float32).reshape(c.shape[:-1] + (4 * c.shape[-1],))


def quantize_mx(x, dtype):
    """quantize_mx of ``x`` (``[P, 4F]``, P a multiple of 8) into ``dtype`` (an x4 dtype):
    ``(codes [P, F] containers, scales [P/8, F] uint8)``, scales in group order.

    Per group of 8 partitions x 4 consecutive elements: ``X = 2^(floor(log2 amax) -
    (Emax - 1))`` (twice the OCP scale, docs/spec/nki-isa-semantics.md §3.30), scale byte
    ``log2 X + 127`` clipped to [0, 254], 0 for an all-zero group; values ``v / X``
    encoded with RNE and saturation. A group with an inf or NaN: byte 255, NaN values
    (fp4: signed zeros)."""
    _, _, _, emax = X4_DTYPES[dtype]
    f = decode(x)
    P, F = f.shape
    g = f.astype(np.float64).reshape(P // 8, 8, F // 4, 4)
    amax = np.abs(g).max(axis=(1, 3))
    special = ~np.isfinite(g).all(axis=(1, 3))
    _, ex = np.frexp(np.where(amax > 0, amax, 1.0))
    E = np.clip(ex - 1 + 127 - (emax - 1), 0, 254)
    E = np.where(amax > 0, E, 0)
    E = np.where(special, 255, E)
    y = g * np.exp2(127.0 - np.minimum(E, 254))[:, None, :, None]
    y = np.where(special[:, None, :, None], np.copysign(np.nan, g), y).astype(np.float32)
    codes = x4_encode(y.reshape(P, F), dtype)
    return codes, E.astype(np.uint8)


def mx_scale_quadrant(scales, P):
    """Group-order scales ``[P/8, F]`` laid out over ``P`` partitions the NKI way: group
    row g at partition 32 (g // 4) + g % 4; other partitions 0."""
    out = np.zeros((P, scales.shape[1]), dtype=scales.dtype)
    for g in range(scales.shape[0]):
        out[32 * (g // 4) + g % 4] = scales[g]
    return out


def _dequant(containers, scales, dtype):
    """``[P, F]`` containers and group-order scales -> ``[4P, F]`` fp32, row 4p + q."""
    v = x4_decode(containers, dtype)                       # [P, 4F]
    P, F = containers.shape
    v = v.reshape(P, F, 4)
    s = np.repeat(np.asarray(scales).astype(np.int64), 8, axis=0)[:, :, None]   # [P, F, 1]
    factor = np.where(s == 255, np.float32(np.nan),
                      np.exp2((np.minimum(s, 254) - 127).astype(np.float64))).astype(np.float32)
    d = (v * factor).astype(np.float32)
    return d.transpose(0, 2, 1).reshape(4 * P, F)


def matmult_mx(moving, stationary, moving_scales, stationary_scales, moving_dtype,
               stationary_dtype):
    """nc_matmul_mx: ``res[m, n] = Σ_{p, q} st[p, m, q] · mv[p, n, q]`` over dequantized
    values (each value times ``2^(s - 127)`` of its 8-partition group; s = 255 is NaN),
    summed in fp32 in the order k = 4p + q. Scales in group order ``[P/8, F]``."""
    a = _dequant(moving, moving_scales, moving_dtype)
    b = _dequant(stationary, stationary_scales, stationary_dtype)
    return matmult(a, b)


# ---- data synthesis and selection (docs/spec/machine-model.md §6.3) ---------------------------

def select(pred, on_true, on_false, out_dtype):
    """Select: ``pred ? on_true : on_false`` (pred 0 or 1); values travel through fp32."""
    p = decode(pred)
    if not np.all((p == 0) | (p == 1)):
        raise ValueError("Select predicate must be 0 or 1")
    return cast(np.where(p != 0, decode(on_true), decode(on_false)), out_dtype)


#: nl.fp32.min (bits 0xff7fffff), RangeSelect's default fill.
FP32_MIN = float(np.finfo(np.float32).min)

#: The comparisons of affine_select / range_select, by AluOpType name.
COMPARISONS = {"is_equal": np.equal, "not_equal": np.not_equal, "is_gt": np.greater,
               "is_ge": np.greater_equal, "is_lt": np.less, "is_le": np.less_equal}


def copy_predicated(src, pred, old, out_dtype, reverse_pred=False, fp8_overflow="saturate"):
    """CopyPredicated (docs/spec/nki-isa-semantics.md §3.16): ``old`` with the elements whose
    predicate element has any bit set (none, with ``reverse_pred``) replaced by ``src``
    (an array or a Python number), cast to ``out_dtype`` (bit copy for the same dtype)."""
    old = np.asarray(old)
    p = np.ascontiguousarray(pred)
    bits = p.view(np.uint8).reshape(p.shape + (p.dtype.itemsize,)).any(axis=-1)
    sel = bits != bool(reverse_pred)
    if isinstance(src, (int, float)):
        src = np.full(old.shape, src, np.float32)
    s = cast(np.asarray(src).reshape(old.shape), out_dtype, fp8_overflow=fp8_overflow)
    out = old.copy()
    out[sel.reshape(old.shape)] = s[sel.reshape(old.shape)]
    return out


def affine_select(x, fill, compare_op, out_dtype, base=0, channel_multiplier=0, pattern=None,
                  fp8_overflow="saturate"):
    """TensorScalarAffineSelect (docs/spec/nki-isa-semantics.md §3.21): with
    ``a = base + p*channel_multiplier + Σ step_d*coord_d`` (int32, ``pattern`` as Iota's),
    ``compare_op(a, 0) ? x : fill``; x keeps its bits when ``out_dtype`` is its dtype."""
    x = np.asarray(x)
    P = x.shape[0]
    free = int(np.prod(x.shape[1:]))
    pattern = pattern or [[1, free]]
    nums = [n for _, n in pattern]
    assert int(np.prod(nums)) == free
    coords = np.indices(nums).reshape(len(nums), -1)            # [ndim, free]
    off = sum(np.int64(s) * coords[d] for d, (s, _) in enumerate(pattern))
    a = _wrap32(np.int64(base) + np.arange(P, dtype=np.int64)[:, None] * channel_multiplier
                + off[None, :])
    keep = COMPARISONS[compare_op](a, 0)
    t = cast(x.reshape(P, free), out_dtype, fp8_overflow=fp8_overflow)
    f = cast(np.full((P, free), fill, np.float32), out_dtype, fp8_overflow=fp8_overflow)
    return np.where(keep, t, f)


def range_select(x, bound0, bound1, op0, op1, out_dtype, base=0, fill=FP32_MIN,
                 start=-np.inf, fp8_overflow="saturate"):
    """RangeSelect (docs/spec/nki-isa-semantics.md §3.22): ``j = fp32(base + free index)``;
    ``op0(j, bound0[p]) & op1(j, bound1[p]) ? x : fill`` in fp32, cast to ``out_dtype``.
    Returns ``(out, acc)`` with ``acc[p] = max(start, max_j of the fp32 results)``."""
    x = decode(np.asarray(x))
    P = x.shape[0]
    v = x.reshape(P, -1)
    j = (np.int64(base) + np.arange(v.shape[1])).astype(np.float32)[None, :]
    b0 = np.asarray(bound0, np.float32).reshape(P, 1)
    b1 = np.asarray(bound1, np.float32).reshape(P, 1)
    m = COMPARISONS[op0](j, b0) & COMPARISONS[op1](j, b1)
    r = np.where(m, v, np.float32(fill)).astype(np.float32)
    acc = np.maximum(np.float32(start), r.max(axis=1))
    return cast(r, out_dtype, fp8_overflow=fp8_overflow), acc.astype(np.float32)


def iota(shape, out_dtype, base=0, channel_multiplier=0, pattern=None):
    """Iota over a ``[P, free]`` output: ``base + p*channel_multiplier + Σ step_d*coord_d``
    in int32 (wrapping), then cast to ``out_dtype`` with the cast rules. ``pattern`` is a
    list of ``[step, num]`` (outermost first); ``None`` means step 1 over the free size."""
    P, free = shape
    if not pattern:
        pattern = [[1, free]]
    nums = [n for _, n in pattern]
    assert int(np.prod(nums)) == free
    coords = np.indices(nums).reshape(len(nums), -1)            # [ndim, free]
    off = sum(np.int64(s) * coords[d] for d, (s, _) in enumerate(pattern))
    v = np.int64(base) + np.arange(P, dtype=np.int64)[:, None] * channel_multiplier + off[None, :]
    v = _wrap32(v).astype(np.int32)
    return cast(v, out_dtype)


# ---- data movement (docs/spec/machine-model.md §6.4) ----------------------------------------

#: TransposeOps: destination axis order over the source's WZYX labels.
TRANSPOSE_OPS = ("WZXY", "WXZY", "WYXZ", "ZWYX", "ZYWX", "ZYXW", "YXWZ", "YXZW", "YWZX",
                 "XWZY", "XZYW", "XYZW", "XYWZ")


def dma_transpose(x, transpose_op):
    """DMACopy Transpose: ``x`` (at most 4-D, left-padded to W,Z,Y,X) permuted so that
    destination dim d is the source dim named by letter d of ``transpose_op``."""
    x = np.asarray(x)
    x4 = x.reshape((1,) * (4 - x.ndim) + x.shape)
    return np.transpose(x4, ["WZYX".index(c) for c in transpose_op])


def dma_replicate(x, out_count):
    """DMACopy Replicate: output element j := input element j mod count(x)."""
    flat = np.asarray(x).reshape(-1)
    assert out_count % flat.size == 0
    return np.tile(flat, out_count // flat.size)


def dma_cce(inputs, op="add", constants=None, out_dtype="float32"):
    """DMACopy CCE: ``in0 ⊕ in1 ⊕ …`` elementwise in fp32, folded left to right; for
    ``add`` each input k is first multiplied by ``constants[k]`` when given."""
    vals = []
    for k, x in enumerate(inputs):
        v = decode(x)
        if op == "add" and constants is not None and k < len(constants):
            v = alu("mult", v, F32(constants[k]))
        vals.append(v)
    acc = vals[0]
    for v in vals[1:]:
        acc = alu(op, acc, v)
    return cast(acc, out_dtype)


def stream_transpose(x):
    """StreamTranspose of a ``[P, F]`` tile (partition and element index swap their low 5
    bits): with P, F <= 32 the plain transpose ``[F, P]``; with P, F multiples of 32 every
    32x32 block transposed in place (``[P, F]``)."""
    x = np.asarray(x)
    P, F = x.shape
    if P <= 32 and F <= 32:
        return x.T.copy()
    if P % 32 or F % 32:
        raise ValueError("StreamTranspose has no whole output for a [%d, %d] tile" % (P, F))
    return x.reshape(P // 32, 32, F // 32, 32).transpose(0, 3, 2, 1).reshape(P, F)


# ---- registers (docs/spec/machine-model.md §6.5, docs/spec/BIR-JSON.md "Execution rules") ----------------

_REG_INT_OPS = {
    "bypass": lambda x, y: x,
    "add": lambda x, y: x + y,
    "subtract": lambda x, y: x - y,
    "mult": lambda x, y: x * y,
    "max": max, "min": min,
    "is_equal": lambda x, y: int(x == y), "not_equal": lambda x, y: int(x != y),
    "is_gt": lambda x, y: int(x > y), "is_ge": lambda x, y: int(x >= y),
    "is_lt": lambda x, y: int(x < y), "is_le": lambda x, y: int(x <= y),
    "bitwise_and": lambda x, y: x & y, "bitwise_or": lambda x, y: x | y,
    "bitwise_xor": lambda x, y: x ^ y, "bitwise_not": lambda x, y: ~x,
    "logical_and": lambda x, y: int(bool(x) and bool(y)),
    "logical_or": lambda x, y: int(bool(x) or bool(y)),
    "arith_shift_left": lambda x, y: x << y, "logical_shift_left": lambda x, y: x << y,
    "arith_shift_right": lambda x, y: x >> y,
}


def register_alu(op, x, y, dtype="int32"):
    """RegisterAlu on 32-bit integer registers: ``op(x, y)`` read at ``dtype``'s signedness,
    wrapped to 32 bits; returns the raw 32-bit pattern as a Python int."""
    def val(v):
        v &= 0xFFFFFFFF
        return v - (1 << 32) if dtype == "int32" and v >= 1 << 31 else v
    if op == "logical_shift_right":
        r = (x & 0xFFFFFFFF) >> y
    elif op == "divide":
        q = abs(val(x)) // abs(val(y))
        r = q if (val(x) < 0) == (val(y) < 0) else -q         # C: toward zero
    else:
        r = _REG_INT_OPS[op](val(x), val(y))
    return r & 0xFFFFFFFF


def to_register(value, mem_dtype, reg_dtype):
    """TensorLoad: one memory element into a register, by value with the cast rules
    (same-size integer dtypes copy bits). Returns the register's raw bits."""
    v = np.asarray([value], dtype=np_dtype(mem_dtype))
    rd = np_dtype(reg_dtype)
    if v.dtype.kind in "iu" and rd.kind in "iu" and v.dtype.itemsize == rd.itemsize:
        r = v.view(rd)
    elif v.dtype.kind in "iu" and rd.kind in "iu":
        r = v.astype(np.int64).astype(rd)
    else:
        r = cast(v, reg_dtype)
    return int(r.view("<u%d" % rd.itemsize)[0])


def from_register(bits, reg_dtype, mem_dtype):
    """TensorSave: a register's raw ``bits`` into one element of ``mem_dtype``."""
    rd = np_dtype(reg_dtype)
    v = np.asarray([bits], dtype="<u%d" % rd.itemsize).view(rd)
    md = np_dtype(mem_dtype)
    if v.dtype.kind in "iu" and md.kind in "iu" and v.dtype.itemsize == md.itemsize:
        return v.view(md)[0]
    return cast(v, mem_dtype)[0]


# ---- Batch-norm statistics (docs/spec/machine-model.md §6.6, docs/spec/nki-isa-semantics.md §3.25) -------

def bn_stats(x):
    """BNStats of ``x`` ``[P, ...]`` (free dims flattened, decoded to fp32): per partition
    two Welford lanes, over the elements at even and at odd positions, each step rounded
    to fp32 -- ``n += 1; d = x - mean; mean += d / n; M2 += d * (x - mean)``. Returns
    ``[P, 6]`` fp32 ``[n_even, mean_even, M2_even, n_odd, mean_odd, M2_odd]``."""
    v = decode(x)
    v = v.reshape(v.shape[0], -1)
    out = np.zeros((v.shape[0], 6), np.float32)
    for lane in (0, 1):
        n = np.zeros(v.shape[0], np.float32)
        mean = np.zeros(v.shape[0], np.float32)
        m2 = np.zeros(v.shape[0], np.float32)
        for j in range(lane, v.shape[1], 2):
            xj = v[:, j]
            d = xj - mean
            n = n + F32(1)
            mean = mean + d / n
            m2 = m2 + d * (xj - mean)
        out[:, 3 * lane:3 * lane + 3] = np.stack([n, mean, m2], axis=1)
    return out


def bn_aggr(t):
    """BNStatsAggregate of ``t`` ``[P, 3k]`` (count, mean, M2) triples: Chan's merge left
    to right in fp32, empty triples skipped --
    ``n = na + nb; d = mb - ma; mean = ma + d * (nb / n); M2 = (M2a + M2b) + (d * d) * ((na * nb) / n)``.
    Returns ``[P, 2]`` fp32 ``[mean, M2 / n]`` (NaN when every triple is empty)."""
    v = decode(t)
    v = v.reshape(v.shape[0], -1)
    out = np.zeros((v.shape[0], 2), np.float32)
    with np.errstate(all="ignore"):
        for p in range(v.shape[0]):
            n = mean = m2 = F32(0)
            for g in range(0, v.shape[1], 3):
                nb, mb, m2b = v[p, g], v[p, g + 1], v[p, g + 2]
                if nb == 0:
                    continue
                if n == 0:
                    n, mean, m2 = nb, mb, m2b
                    continue
                nn = F32(n + nb)
                d = F32(mb - mean)
                mean = F32(mean + F32(d * F32(nb / nn)))
                m2 = F32(F32(m2 + m2b) + F32(F32(d * d) * F32(F32(n * nb) / nn)))
                n = nn
            out[p] = (np.nan if n == 0 else mean, F32(m2 / n))
    return out


def _per_partition(v, P):
    v = np.asarray(decode(v) if not np.isscalar(v) else v, np.float32).reshape(-1)
    return np.broadcast_to(v, (P,)) if v.size == 1 else v.reshape(P)


def bn_gradients(x, dy, mean, vf):
    """BNGradients of ``x``, ``dy`` ``[P, ...]`` with per-partition ``mean`` and ``vf``
    (the inverse deviation): per partition, left to right in fp32,
    ``A += dy; t = ((x - m) * dy) * vf; Bc += t * vf; C += t``. Returns ``[P, 3]``
    ``[A, Bc, C]`` = ``[sum dy, sum (x-m) dy vf^2, sum (x-m) dy vf]``."""
    xv, gv = decode(x), decode(dy)
    P = xv.shape[0]
    xv, gv = xv.reshape(P, -1), gv.reshape(P, -1)
    m, v = _per_partition(mean, P), _per_partition(vf, P)
    a = np.zeros(P, np.float32)
    b = np.zeros(P, np.float32)
    c = np.zeros(P, np.float32)
    with np.errstate(all="ignore"):
        for j in range(xv.shape[1]):
            t = ((xv[:, j] - m) * gv[:, j]) * v
            a = a + gv[:, j]
            b = b + t * v
            c = c + t
    return np.stack([a, b, c], axis=1)


def bn_backprop(x, dy, mean, a, bc, scale, total_elements, out_dtype="float32"):
    """BNBackprop / BNBackprop2: ``dx = ((dy * N) - (((x - m) * Bc) + A)) * scale`` per
    element, rounded to fp32 at every step (m, A, Bc, scale per partition; N =
    ``total_elements`` rounded to fp32), cast to ``out_dtype``. Shape of ``x``."""
    xv, gv = decode(x), decode(dy)
    P = xv.shape[0]
    col = lambda v: _per_partition(v, P).reshape((P,) + (1,) * (xv.ndim - 1))  # noqa: E731
    n = F32(total_elements)
    with np.errstate(all="ignore"):
        dx = ((gv * n) - (((xv - col(mean)) * col(bc)) + col(a))) * col(scale)
    return cast(dx, out_dtype)


# ---- Scans (docs/spec/nki-isa-semantics.md §3.10, §3.13) ---------------------------------------

#: Reset value of a running op1 (tensor_scalar_cumulative: the identity of the op).
SCAN_IDENTITY = {"add": 0.0, "subtract": 0.0, "mult": 1.0, "max": -np.inf, "min": np.inf}


def _stage(op, l, r, reverse):
    return alu(op, r, l) if reverse else alu(op, l, r)


def tensor_scalar_cumulative(x, op0, c0, op1, start, reverse0=False, reverse1=False):
    """TensorScalarCache Cumulative over ``x`` ``[P, F...]`` (free dims flattened): per
    partition ``reg = start[p]``; for each element ``v = op0(x, c0)`` (reverse0:
    ``op0(c0, x)``), ``reg = op1(v, reg)`` (reverse1: ``op1(reg, v)``); returns every reg
    ``[P, F]`` fp32. ``c0``/``start``: scalars or one value per partition. The Reduce mode
    is the last column."""
    v = decode(x).reshape(np.shape(x)[0], -1)
    c0 = _f(np.broadcast_to(_f(c0).reshape(-1), (v.shape[0],)))
    reg = _f(np.broadcast_to(_f(start).reshape(-1), (v.shape[0],)))
    out = np.empty_like(v)
    for j in range(v.shape[1]):
        reg = _stage(op1, _stage(op0, v[:, j], c0, reverse0), reg, reverse1)
        out[:, j] = reg
    return out


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False):
    """NKI tensor_tensor_scan: ``r = op1(op0(data0[i], r), data1[i])`` from ``initial``
    (scalar or per partition); reverse0 makes data0 op0's right operand, reverse1 makes
    data1 op1's left operand. Returns ``[P, F]`` fp32."""
    a = decode(data0).reshape(np.shape(data0)[0], -1)
    b = decode(data1).reshape(a.shape)
    r = _f(np.broadcast_to(_f(initial).reshape(-1), (a.shape[0],)))
    out = np.empty_like(a)
    for j in range(a.shape[1]):
        t = alu(op0, r, a[:, j]) if reverse0 else alu(op0, a[:, j], r)
        r = _stage(op1, t, b[:, j], reverse1)
        out[:, j] = r
    return out


def scalar_tensor_tensor(x, op0, s, op1, tile, reverse0=False, reverse1=False):
    """NKI scalar_tensor_tensor: ``op1(op0(x, s[p]), tile)`` elementwise in fp32."""
    v = decode(x).reshape(np.shape(x)[0], -1)
    s = _f(np.broadcast_to(_f(s).reshape(-1), (v.shape[0],)))[:, None]
    t = decode(tile).reshape(v.shape)
    return _stage(op1, _stage(op0, v, s, reverse0), t, reverse1)


# ---- The top-8 family (docs/spec/nki-isa-semantics.md §3.24, §4 item 3) ------------------------

def max8(x):
    """NKI max8: per partition the 8 largest values (fp32), descending; NaN ranks above
    +inf (birsim's choice). Returns ``[P, 8]``."""
    v = decode(x).reshape(np.shape(x)[0], -1)
    out = np.empty((v.shape[0], 8), np.float32)
    for p in range(v.shape[0]):
        row = v[p]
        nan = row[np.isnan(row)]
        rest = np.sort(row[~np.isnan(row)])[::-1]
        out[p] = np.concatenate([nan, rest])[:8]
    return out


def not_found_index(dtype):
    """nc_find_index8's index for a value not present: all ones at the dtype's width."""
    return {"uint16": 0xFFFF, "uint32": 0xFFFFFFFF, "int32": -1}[dtype]


def find_index8(x, vals, dtype="uint32"):
    """NKI nc_find_index8: for each of the 8 values per partition the index of its first
    occurrence in the row (fp32 equality); equal values take successive occurrences in
    ascending slot order; not found -> :func:`not_found_index`. Returns ``[P, 8]`` int64."""
    v = decode(x).reshape(np.shape(x)[0], -1)
    w = decode(vals).reshape(v.shape[0], 8)
    none = not_found_index(dtype)
    out = np.full((v.shape[0], 8), none, np.int64)
    for p in range(v.shape[0]):
        used = set()
        for j in range(8):
            hits = [int(f) for f in np.flatnonzero(v[p] == w[p, j]) if int(f) not in used]
            if hits:
                out[p, j] = hits[0]
                used.add(hits[0])
    return out


def match_replace8(x, vals, imm, dtype="uint32"):
    """NKI nc_match_replace8: the first occurrence of each value replaced by ``imm``,
    values taken from slot 7 down to 0. Returns (the replaced rows ``[P, F]`` fp32, the
    indices ``[P, 8]`` as :func:`find_index8` writes them)."""
    v = decode(x).reshape(np.shape(x)[0], -1).copy()
    w = decode(vals).reshape(v.shape[0], 8)
    idx = np.full((v.shape[0], 8), not_found_index(dtype), np.int64)
    for p in range(v.shape[0]):
        for j in range(7, -1, -1):
            hits = np.flatnonzero(v[p] == w[p, j])
            if hits.size:
                v[p, hits[0]] = F32(imm)
                idx[p, j] = hits[0]
    return v, idx


# ---- StreamShuffle (docs/spec/nki-isa-semantics.md §3.34) ---------------------------------------

def stream_shuffle(x, mask, old):
    """Within each block of 32 partitions ``out[q*32+i] = x[q*32+mask[i]]``; mask 255
    keeps ``old[q*32+i]``. Rows are copied as they are (no cast)."""
    x, out = np.asarray(x), np.array(old, copy=True)
    for p in range(x.shape[0]):
        m = mask[p % 32]
        if m != 255:
            out[p] = x[(p // 32) * 32 + m]
    return out


# ---- Engine accumulators (docs/spec/machine-model.md §5 EngineAccumulationType, §6.1;
# docs/spec/nki-isa-semantics.md §1.6; birsim's rules in csrc/kernels/kaccum.h) ------------------

#: Reset value of an accumulator for each reduce op (its identity).
ACC_IDENTITY = {"add": 0.0, "subtract": 0.0, "mult": 1.0, "max": -np.inf, "min": np.inf,
                "abs_max": 0.0, "abs_min": np.inf, "logical_and": 1.0, "logical_or": 0.0,
                "logical_xor": 0.0}

#: NKI reduce_cmd spellings -> EngineAccumulationType names.
ACC_COMMANDS = {"idle": "Idle", "reset": "Zero", "reduce": "Accumulate",
                "reset_reduce": "ZeroAccumulate", "load_reduce": "LoadAccumulate"}


def accumulate(acc, cmd, results, op="add", load=None, consumed=False):
    """One instruction's effect on an engine accumulator: ``acc`` the lanes before (fp32,
    at least P), ``cmd`` an EngineAccumulationType (or NKI) name, ``results`` the
    instruction's fp32 results ``[P, ...]`` (before the cast to the output dtype), ``op``
    the reduce op, ``load`` the LoadAccumulate start (scalar or per partition),
    ``consumed`` whether a reader has read the accumulator since the last command. Per
    lane p < P: fold = op over row p from the identity, sequentially in fp32 (subtract:
    the sum); Zero sets the identity, ZeroAccumulate ``op(identity, fold)``,
    Accumulate/AddAccumulate ``op(acc, fold)`` (``op(identity, fold)`` when consumed),
    LoadAccumulate ``op(load, fold)``. Returns the new lanes."""
    cmd = ACC_COMMANDS.get(cmd, cmd)
    acc = _f(acc).copy()
    if cmd == "Idle":
        return acc
    v = _f(results).reshape(np.shape(results)[0], -1)
    P = v.shape[0]
    ident = F32(ACC_IDENTITY[op])
    if cmd == "Zero":
        acc[:P] = ident
        return acc
    fold = np.full(P, ident, np.float32)
    fop = "add" if op == "subtract" else op
    for j in range(v.shape[1]):
        fold = _f(alu(fop, fold, v[:, j]))
    if cmd == "ZeroAccumulate":
        start = np.full(P, ident, np.float32)
    elif cmd == "LoadAccumulate":
        start = _f(np.broadcast_to(_f(load).reshape(-1), (P,)))
    elif cmd in ("Accumulate", "AddAccumulate"):
        start = np.full(P, ident, np.float32) if consumed else acc[:P]
    else:
        raise ValueError("unknown accumulator command %r" % (cmd,))
    acc[:P] = _f(alu(op, start, fold))
    return acc
