"""BIR dtype names on the NumPy side.

BIR-JSON names dtypes by their BIR spelling (``float32``, ``bfloat16``, ``float8e4``, ...).
This module maps each to the NumPy (or ``ml_dtypes``) type that holds one element, as
docs/spec/BIR-JSON.md "Dtypes on the NumPy side" lists them:

- ``bfloat16`` and the fp8 types are ``ml_dtypes`` types;
- the packed ``x4`` types are their raw container (``uint32`` or ``uint16``, four values
  per element);
- ``float32r`` is stored as ``float32``.

Packed x4 tensors travel as their containers (what memory holds); :func:`pack_x4` and
:func:`unpack_x4` convert between containers and the values they hold: container c of a
row holds values 4c .. 4c+3, value 4c+q in lane q = bits [8q, 8q+8) of the uint32 (fp8)
or [4q, 4q+4) of the uint16 (fp4 e2m1).

The list of dtypes birsim knows is the C core's (``birsim._birsim.dtypes``); the table
below only says how each looks to NumPy. ``ml_dtypes`` is imported on the first use of
one of its types: its import costs more than the rest of ``import birsim``
(docs/DESIGN.md "The pytest plugin").
"""

import numpy as np

__all__ = ["DTYPE_ALIASES", "canonical_dtype", "numpy_dtype", "short_name", "pack_x4",
           "unpack_x4"]

#: Alternative spellings accepted wherever a dtype is named (docs/spec/BIR-JSON.md).
DTYPE_ALIASES = {
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e8m0fnu": "float8_e8m0fnu",
    "fp4_e2m1fn_x4": "float4_e2m1fn_x4",
    "fp8_e4m3fn_x4": "float8_e4m3fn_x4",
    "fp8_e5m2_x4": "float8_e5m2_x4",
}

# A str value names an ml_dtypes type, made a NumPy dtype on first use (_ml).
_NUMPY = {
    "float32": np.dtype(np.float32),
    "float32r": np.dtype(np.float32),
    "bfloat16": "bfloat16",
    "float16": np.dtype(np.float16),
    "float8e4": "float8_e4m3",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8e5": "float8_e5m2",
    "float8e3": "float8_e3m4",
    "float8_e8m0fnu": "float8_e8m0fnu",
    "float8_e4m3fn_x4": np.dtype(np.uint32),
    "float8_e5m2_x4": np.dtype(np.uint32),
    "float4_e2m1fn_x4": np.dtype(np.uint16),
    "uint8": np.dtype(np.uint8),
    "int8": np.dtype(np.int8),
    "uint16": np.dtype(np.uint16),
    "int16": np.dtype(np.int16),
    "uint32": np.dtype(np.uint32),
    "int32": np.dtype(np.int32),
    "uint64": np.dtype(np.uint64),
    "int64": np.dtype(np.int64),
}


def canonical_dtype(name):
    """Return the BIR spelling of dtype ``name`` (resolving aliases); unknown names are
    returned unchanged."""
    return DTYPE_ALIASES.get(name, name)


def numpy_dtype(name):
    """The NumPy dtype holding one element of BIR dtype ``name`` (aliases accepted).

    >>> numpy_dtype("float32r")
    dtype('float32')

    Raises ``ValueError`` for a name that is not a BIR dtype.
    """
    try:
        dt = _NUMPY[canonical_dtype(name)]
    except (KeyError, TypeError):
        raise ValueError("unknown BIR dtype %r; accepted: %s"
                         % (name, ", ".join(sorted(_NUMPY)))) from None
    return _ml(dt) if isinstance(dt, str) else dt


def _ml(type_name):
    """The NumPy dtype of ml_dtypes' ``type_name`` (importing ml_dtypes)."""
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, type_name))


def short_name(name):
    """A compact spelling of a BIR dtype for listings: ``float32`` -> ``f32``,
    ``bfloat16`` -> ``bf16``, ``uint8`` -> ``u8``, ``float8_e4m3fn`` -> ``f8_e4m3fn``."""
    for long, short in (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i")):
        if name.startswith(long):
            return short + name[len(long):]
    return name


# lane format, bits per lane, largest finite lane value
_X4 = {
    "float8_e4m3fn_x4": ("float8_e4m3fn", 8, 448.0),
    "float8_e5m2_x4": ("float8_e5m2", 8, 57344.0),
    "float4_e2m1fn_x4": ("float4_e2m1fn", 4, 6.0),
}


def _x4(name):
    try:
        lane, bits, top = _X4[canonical_dtype(name)]
    except (KeyError, TypeError):
        raise ValueError("%r is not a packed x4 dtype; accepted: %s"
                         % (name, ", ".join(sorted(_X4)))) from None
    return _ml(lane), bits, top


def pack_x4(values, dtype):
    """Encode ``values`` (last axis a multiple of 4) into the containers of x4 dtype
    ``dtype``: last axis / 4, dtype ``numpy_dtype(dtype)``. Values round to nearest even
    and saturate to the lane format's largest finite value (448, 57344, 6); NaN stays NaN
    in fp8 lanes and becomes a signed zero in fp4 lanes (docs/spec/machine-model.md §4.2).

    >>> pack_x4([[1.0, 2.0, -0.5, 6.0]], "float4_e2m1fn_x4")
    array([[31042]], dtype=uint16)
    """
    lane, bits, top = _x4(dtype)
    f = np.asarray(values, dtype=np.float32)
    if f.ndim == 0 or f.shape[-1] % 4:
        raise ValueError("pack_x4: the last axis (%s) must be a multiple of 4"
                         % (f.shape[-1] if f.ndim else "a scalar"))
    code = np.clip(f, -top, top).astype(lane).view(np.uint8).astype(np.uint32)
    if bits == 4:
        code = np.where(np.isnan(f), np.signbit(f).astype(np.uint32) << 3, code & 0xF)
    code = code.reshape(f.shape[:-1] + (f.shape[-1] // 4, 4))
    out = code[..., 0] | (code[..., 1] << bits) | (code[..., 2] << 2 * bits) \
        | (code[..., 3] << 3 * bits)
    return out.astype(numpy_dtype(dtype))


def unpack_x4(containers, dtype):
    """The values (float32, last axis x 4) held by the containers of x4 dtype ``dtype``."""
    lane, bits, _ = _x4(dtype)
    c = np.asarray(containers).astype(np.uint32)
    mask = np.uint32((1 << bits) - 1)
    codes = np.stack([(c >> np.uint32(bits * q)) & mask for q in range(4)], axis=-1)
    vals = codes.astype(np.uint8).view(lane).astype(np.float32)
    return vals.reshape(c.shape[:-1] + (4 * c.shape[-1],)) if c.ndim else vals
