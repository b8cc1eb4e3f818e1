"""The suite's builders of hand-made BIR dumps in the compiler's shape: the public
:mod:`birsim.dumps` (also used by examples/build_workdir.py), plus the names the tests
have always used (``reg`` is a register allocation here)."""

from birsim import dumps as _D
from birsim.dumps import (ITEM, ap, copy, dma_block, dram, full, function, imm, insn,  # noqa: F401
                          module, queue, reg_access, register)

__all__ = ["ITEM", "dram", "tile", "reg", "ap", "full", "insn", "copy", "function", "module",
           "dma_block", "queue", "imm", "reg_access", "register"]

#: a register allocation (the historical name in these tests)
reg = register


def tile(name, parts, nbytes, mem="SB", dtype="float32", *, addr=0, base=0, bank=None):
    """An SB/PSUM tile carrying the location keys real dumps add (``tensor_id``,
    ``runtime_reserved``), which the loader must ignore."""
    return _D.tile(name, parts, nbytes, mem, dtype, base=base, addr=addr, bank=bank,
                   tensor_id=7, runtime_reserved=False)
