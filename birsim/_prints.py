"""DevicePrint records: the C core's print log (csrc/vm/print.c) as NumPy arrays.

Each record is ``bs_print_rec`` (csrc/birsim.h: int32 core, insn, operand, dtype, ndim,
pad; int64 num[5]; int64 nbytes) followed by ``nbytes`` of dense row-major data padded to
8 bytes.
"""

import collections

import numpy as np

from . import _birsim
from .dtypes import numpy_dtype

__all__ = ["DevicePrint", "parse_prints", "format_print"]

#: One printed operand: the core (rank) that ran the DevicePrint, the instruction name,
#: the operand position in its ``ins``, the prefix (the instruction's ``prefix`` key,
#: else its name) and the values (an array of the operand's dtype, shaped as its access
#: pattern).
DevicePrint = collections.namedtuple("DevicePrint",
                                     "core instruction operand prefix values")

_HEADER = np.dtype([("core", "<i4"), ("insn", "<i4"), ("operand", "<i4"), ("dtype", "<i4"),
                    ("ndim", "<i4"), ("pad", "<i4"), ("num", "<i8", (5,)), ("nbytes", "<i8")])
_DTYPE_BY_CODE = {code: name for name, (code, *_rest) in _birsim.dtypes.items()}


def parse_prints(raw, names, prefixes):
    """The records of ``raw`` as DevicePrint tuples (``names``: birsim.simulator._Names;
    ``prefixes``: instruction index -> prefix string)."""
    out, pos = [], 0
    while pos + _HEADER.itemsize <= len(raw):
        h = np.frombuffer(raw, _HEADER, 1, pos)[0]
        pos += _HEADER.itemsize
        n = int(h["nbytes"])
        dt = numpy_dtype(_DTYPE_BY_CODE[int(h["dtype"])])
        shape = tuple(int(x) for x in h["num"][:int(h["ndim"])])
        values = np.frombuffer(raw, np.uint8, n, pos).copy().view(dt).reshape(shape)
        pos += (n + 7) & ~7
        insn = int(h["insn"])
        out.append(DevicePrint(int(h["core"]), names.instruction(insn), int(h["operand"]),
                               prefixes.get(insn) or names.instruction(insn), values))
    return out


def format_print(p, ncores):
    """The text NKI's device_print would show: the prefix, then the values."""
    where = f"[core {p.core}] " if ncores > 1 else ""
    with np.printoptions(threshold=64, edgeitems=3, linewidth=100):
        return f"{where}{p.prefix}: {p.values}"
