"""BIR dtype names on the NumPy side.

BIR-JSON names dtypes by their BIR spelling (``float32``, ``bfloat16``, ``float8e4``, ...).
This module maps each to the NumPy (or ``ml_dtypes``) type that holds one element, as
BIR-JSON.md "Dtypes on the NumPy side" lists them:

- ``bfloat16`` and the fp8 types are ``ml_dtypes`` types;
- the packed ``x4`` types are their raw container (``uint32`` or ``uint16``, four values
  per element);
- ``float32r`` is stored as ``float32``.

The list of dtypes birsim knows is the C core's (``birsim._birsim.dtypes``); the table
below only says how each looks to NumPy.
"""

import ml_dtypes
import numpy as np

__all__ = ["DTYPE_ALIASES", "canonical_dtype", "numpy_dtype", "short_name"]

#: Alternative spellings accepted wherever a dtype is named (BIR-JSON.md).
DTYPE_ALIASES = {
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e8m0fnu": "float8_e8m0fnu",
    "fp4_e2m1fn_x4": "float4_e2m1fn_x4",
    "fp8_e4m3fn_x4": "float8_e4m3fn_x4",
    "fp8_e5m2_x4": "float8_e5m2_x4",
}

_NUMPY = {
    "float32": np.dtype(np.float32),
    "float32r": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "float8e4": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8e5": np.dtype(ml_dtypes.float8_e5m2),
    "float8e3": np.dtype(ml_dtypes.float8_e3m4),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
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
        return _NUMPY[canonical_dtype(name)]
    except (KeyError, TypeError):
        raise ValueError("unknown BIR dtype %r; accepted: %s"
                         % (name, ", ".join(sorted(_NUMPY)))) from None


def short_name(name):
    """A compact spelling of a BIR dtype for listings: ``float32`` -> ``f32``,
    ``bfloat16`` -> ``bf16``, ``uint8`` -> ``u8``, ``float8_e4m3fn`` -> ``f8_e4m3fn``."""
    for long, short in (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i")):
        if name.startswith(long):
            return short + name[len(long):]
    return name
