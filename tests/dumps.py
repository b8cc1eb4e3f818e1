"""Builders of hand-made BIR dumps in the compiler's shape (compiler-dumps.md): no
``Skind``, set ``name`` or ``tensor_shape``; memory ``type`` strings; ``dims`` in bytes;
``debug``/``dependencies`` keys the simulation ignores; sync entries
``{from, id, wait_value}`` / ``{id, update_value}``; top-level ``queues``. Written from
that page, not copied from any real dump."""

import numpy as np

ITEM = {"float32": 4, "bfloat16": 2, "int32": 4, "uint8": 1}


def dram(name, kind, shape, dtype="float32", *, addr=None, dims=None, debug=True):
    """A DRAM tensor: ``dims`` ``[1, nbytes]`` unless given; shape in ``debug.shape``."""
    nbytes = int(np.prod(shape)) * ITEM[dtype]
    loc = {"name": name, "type": "DRAM", "dims": dims or [1, nbytes]}
    if addr is not None:
        loc["addr"] = addr
    a = {"kind": kind, "dtype": dtype, "memorylocations": [loc]}
    if debug:
        a["debug"] = {"tensor_name": name, "shape": list(shape)}
    return a


def tile(name, parts, nbytes, mem="SB", dtype="float32", *, addr=0, base=0, bank=None):
    """An SB/PSUM tile: ``dims`` ``[parts, bytes per partition]``, placed at addr/base
    (and ``bank`` on PSUM); no debug, so its shape is derived from dims."""
    loc = {"name": name, "type": mem, "dims": [parts, nbytes], "addr": addr, "base": base,
           "tensor_id": 7, "runtime_reserved": False}
    if bank is not None:
        loc["bank"] = bank
    return {"kind": "Internal", "dtype": dtype, "memorylocations": [loc]}


def reg(name):
    """A register allocation as the dumps probably write it (no Skind, no
    memorylocations)."""
    return {"name": name, "dtype": "int32"}


def ap(loc, pattern, dtype="float32", offset=0):
    return {"kind": "physical_ap", "memref": loc, "dtype": dtype, "ap": pattern,
            "offset": offset}


def full(loc, p, f, dtype="float32", offset=0):
    return ap(loc, [[f, p], [1, f]], dtype, offset)


def insn(name, opcode, engine, ins=(), outs=(), wait=(), update=(), **keys):
    """An instruction with the keys the dumps carry; ``wait`` holds (from, id, value),
    ``update`` (id, value)."""
    obj = {"name": name, "opcode": opcode, "engine": engine, "ins": list(ins),
           "outs": list(outs),
           "debug": {"lineno": 12, "op_name": "op", "filename": "kernel.py"},
           "dependencies": [], "loop_carried_dependencies": []}
    if wait or update:
        obj["sync_info"] = {
            "on_wait": [{"from": f, "id": i, "wait_value": v} for f, i, v in wait],
            "on_update": [{"id": i, "update_value": v} for i, v in update]}
    obj.update(keys)
    return obj


def copy(name, engine, dst, src, **kw):
    return insn(name, "TensorCopy", engine, ins=[src], outs=[dst], **kw)


def function(allocs, blocks, name="sg0000"):
    """``blocks``: a list of (name, instructions)."""
    return {"name": name, "allocations": list(allocs),
            "blocks": [{"name": n, "instructions": list(i)} for n, i in blocks]}


def module(allocs, blocks, queues=()):
    """A dump's top level: ``functions`` and ``queues``, both present, no wrapper."""
    return {"functions": [function(allocs, blocks)], "queues": list(queues)}


def dma_block(name, trigger, descriptor_blocks, update=()):
    """A queues-held DMABlock: descriptors under nested ``blocks``."""
    return {"name": name, "engine": "DMA", "opcode": "DMABlock", "ins": [], "outs": [],
            "dma_trigger": trigger,
            "sync_info": {"on_wait": [], "on_update": [{"id": i, "update_value": v}
                                                       for i, v in update]},
            "blocks": [{"name": "%s_Block%d" % (name, k), "instructions": list(d)}
                       for k, d in enumerate(descriptor_blocks)]}


def queue(name, dma_blocks):
    return {"name": name, "blocks": [{"instructions": list(dma_blocks)}]}
