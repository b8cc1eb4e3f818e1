"""The test suite's builders: a thin adapter over :mod:`birsim.build`.

Tests keep their historical signatures (``insn(name, opcode, ...)``,
``loop(name, axis, lb, ub, stride, blocks)``) while the dicts come from the public
builder. Two differences from ``birsim.build`` on purpose: nothing is validated here
(tests of the loader build bad programs) and :func:`module` does not name unnamed
instructions (tests of missing names)::

    from bir import ap, block, function, insn, module, tensor

    prog = module([function("main",
        [tensor("a", "ExternalInput", "float32", [128, 64], "DRAM"),
         tensor("b", "ExternalOutput", "float32", [128, 64], "DRAM")],
        [block("b0", insn("cp", "TensorCopy", "DVE",
                          ins=[ap("a", [[64, 128], [1, 64]])],
                          outs=[ap("b", [[64, 128], [1, 64]])]))])])
"""

from birsim import build as _B
from birsim.build import (affine, affine_v1, ap, block, dma_block, dma_queue, function,  # noqa: F401
                          imm, imm_array, iv, reg, reg_ap, register, rv, shard, sym_ap,
                          sync_info, tensor, update, wait, whole, wrap)

__all__ = ["tensor", "register", "ap", "whole", "sym_ap", "reg_ap", "imm", "imm_array",
           "reg", "insn", "block", "function", "module", "wrap", "loop", "dyn_loop",
           "do_while", "iv", "rv", "shard", "affine", "affine_v1", "wait", "update",
           "sync_info", "dma_queue", "dma_block", "copy_program"]


def insn(name, opcode, engine=None, ins=(), outs=(), *, sync=None, **keys):
    """An instruction (``birsim.build.insn`` with the name first, not validated)."""
    return _B.insn(opcode, engine, ins, outs, name=name, sync=sync, validate=False, **keys)


def module(functions, *, nki_functions=None, dma_queues=None, arch=None, version=None,
           **extra):
    """A bare module dict, instructions left as given."""
    return _B.module(functions, nki_functions=nki_functions, dma_queues=dma_queues,
                     arch=arch, version=version, name_instructions=False, **extra)


def loop(name, axis, lb, ub, stride, blocks, engine=None, **keys):
    """A static ``Loop``; ``blocks`` may be a flat list of instructions."""
    return _B.loop(axis, ub, blocks, lb=lb, stride=stride, name=name, engine=engine,
                   validate=False, **keys)


def dyn_loop(name, axis, lb, ub, stride, blocks, engine=None, **keys):
    """A ``DynamicForLoop``; ``ub`` should be ``affine([(rv(reg), coeff)], c)``."""
    return _B.dyn_loop(axis, ub, blocks, lb=lb, stride=stride, name=name, engine=engine,
                       validate=False, **keys)


def do_while(name, cond_register, blocks, engine=None, **keys):
    """A ``DoWhile`` repeating while register ``cond_register`` is non-zero."""
    return _B.do_while(cond_register, blocks, name=name, engine=engine, validate=False,
                       **keys)


def copy_program(shape=(128, 64), dtype="float32", mem="DRAM", engine="DVE"):
    """The smallest useful program: ``out := in`` (sets ``in``/``out``)."""
    return module([function("main", [
        tensor("in", "ExternalInput", dtype, shape, mem),
        tensor("out", "ExternalOutput", dtype, shape, mem)],
        [insn("copy", "TensorCopy", engine, ins=[whole("in", shape, dtype)],
              outs=[whole("out", shape, dtype)])])])
