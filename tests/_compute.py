"""A small harness for the compute tests (tests/test_compute_*.py): run one instruction
whose operands are DRAM tensors, laid out contiguously or strided, and return its outputs.

    out = run1("BNStats", [In("x", data, "bfloat16", "strided")], [Out("y", (P, 6))])
"""

import warnings

import numpy as np

import birsim
from birsim import reference as ref

from bir import ap, function, imm, insn, module, tensor

LAYOUTS = ("contig", "strided", "free3d")


class In:
    """An input tensor operand: ``data`` (logical [P, F...] values, cast to ``dtype``)
    with ``layout``: contig (the AP reads the tensor whole), strided (every other element
    of a [P, 2F] tensor, odd positions hold junk), free3d (the free dim read as two dims)."""

    def __init__(self, name, data, dtype="float32", layout="contig"):
        self.name, self.dtype, self.layout = name, dtype, layout
        self.data = ref.cast(np.asarray(data), dtype) if not isinstance(data, float) else data
        P = self.data.shape[0]
        F = int(np.prod(self.data.shape[1:]))
        self.P, self.F = P, F
        flat = self.data.reshape(P, F)
        if layout == "strided":
            store = np.zeros((P, 2 * F), dtype=flat.dtype)
            store[:, 0::2] = flat
            store[:, 1::2] = ref.cast(np.full((P, F), 7.25, np.float32), dtype)
            self.store, self.pattern = store, [[2 * F, P], [2, F]]
        elif layout == "free3d" and F % 2 == 0:
            self.store, self.pattern = flat.copy(), [[F, P], [F // 2, 2], [1, F // 2]]
        else:
            self.store, self.pattern = flat.copy(), [[F, P], [1, F]]

    def alloc(self):
        return tensor(self.name, "ExternalInput", self.dtype, self.store.shape, "DRAM")

    def operand(self):
        return ap(self.name, self.pattern, self.dtype)


class Imm:
    def __init__(self, value, dtype="float32"):
        self.value, self.dtype = value, dtype

    def operand(self):
        return imm(self.value, self.dtype)


class Out:
    """An output tensor operand of logical shape ``[P, F]``."""

    def __init__(self, name, shape, dtype="float32", layout="contig"):
        self.name, self.shape, self.dtype, self.layout = name, tuple(shape), dtype, layout
        P, F = self.shape[0], int(np.prod(self.shape[1:]))
        self.P, self.F = P, F
        if layout == "strided":
            self.store_shape, self.pattern = (P, 2 * F), [[2 * F, P], [2, F]]
        else:
            self.store_shape, self.pattern = (P, F), [[F, P], [1, F]]

    def alloc(self):
        return tensor(self.name, "ExternalOutput", self.dtype, self.store_shape, "DRAM")

    def operand(self):
        return ap(self.name, self.pattern, self.dtype)

    def extract(self, arr):
        arr = np.asarray(arr)
        if self.layout == "strided":
            arr = arr[:, 0::2]
        return np.ascontiguousarray(arr).reshape(self.shape)


def program(opcode, ins, outs, engine="DVE", pre=(), **keys):
    allocs = [o.alloc() for o in ins if isinstance(o, In)] + [o.alloc() for o in outs]
    body = list(pre) + [insn("op", opcode, engine, ins=[o.operand() for o in ins],
                             outs=[o.operand() for o in outs], **keys)]
    return module([function("main", allocs, body)])


def run1(opcode, ins, outs, engine="DVE", **keys):
    """Run one ``opcode`` instruction; returns the outputs' logical arrays, in order."""
    prog = program(opcode, ins, outs, engine, **keys)
    sim = birsim.Simulator(prog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)   # strided outputs: gaps unwritten
        res = sim.run({o.name: o.store for o in ins if isinstance(o, In)})
    return [o.extract(res[o.name]) for o in outs]
