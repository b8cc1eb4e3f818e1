"""Builders of BIR dumps in the compiler's spelling (docs/spec/compiler-dumps.md): no ``Skind``,
set ``name`` or ``tensor_shape`` (a DRAM tensor's shape goes in ``debug.shape``); memory
``type`` strings; ``dims`` in bytes; the ``debug``/``dependencies`` keys the simulation
ignores; sync entries ``{from, id, wait_value}`` / ``{id, update_value}``; top-level
``queues`` of ``DMABlock``s with nested descriptor blocks. Written from that page, not
copied from any real dump. :mod:`birsim.build` writes birsim's own spelling instead.

    from birsim import dumps as D

    prog = D.module(
        [D.dram("x", "ExternalInput", [16, 8]), D.dram("y", "ExternalOutput", [16, 8]),
         D.tile("t", 16, 32)],
        [("entry", [D.insn("ld", "DMACopy", "SP", ins=[D.full("x", 1, 512)],
                           outs=[D.full("t", 16, 8)], update=[(1, 1)]),
                    D.insn("st", "DMACopy", "SP", ins=[D.full("t", 16, 8)],
                           outs=[D.full("y", 1, 512)], wait=[("ld", 1, 1)])])])

Every builder returns plain dicts (write them with :func:`json.dump`); nothing is
validated here: :func:`birsim.load` reports what is wrong.
"""

from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from . import _birsim

__all__ = ["ITEM", "dram", "tile", "register", "ap", "full", "imm", "reg_access", "insn",
           "copy", "function", "module", "dma_block", "queue"]

Json = Dict[str, Any]

#: Item sizes in bytes of the dtypes the builders size DRAM tensors for (every dtype of
#: csrc/bs_dtypes.def but the packed x4 ones).
ITEM = {k: v[1] for k, v in _birsim.dtypes.items() if v[2] != "P"}


def _product(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def dram(name: str, kind: str, shape: Sequence[int], dtype: str = "float32", *,
         addr: Optional[int] = None, dims: Optional[Sequence[int]] = None, debug: bool = True,
         tensor_id: Optional[int] = None) -> Json:
    """A DRAM tensor as the compiler writes it: one location of ``dims`` ``[1, nbytes]``
    unless given (``addr`` and ``tensor_id`` when given), its name and shape in
    ``debug`` (``debug=False`` leaves them out)."""
    loc: Json = {"name": name, "type": "DRAM",
                 "dims": list(dims) if dims else [1, _product(shape) * ITEM[dtype]]}
    if addr is not None:
        loc["addr"] = addr
    if tensor_id is not None:
        loc["tensor_id"] = tensor_id
    a: Json = {"kind": kind, "dtype": dtype}
    if debug:
        a["debug"] = {"tensor_name": name, "shape": list(shape)}
    a["memorylocations"] = [loc]
    return a


def tile(name: str, parts: int, nbytes: int, mem: str = "SB", dtype: str = "float32", *,
         base: int = 0, addr: int = 0, bank: Optional[int] = None, **loc_keys: Any) -> Json:
    """An SB/PSUM tile: ``dims`` ``[parts, bytes per partition]`` placed at ``base``
    (partition) and ``addr`` (byte; bank-relative with ``bank`` on PSUM); ``loc_keys``
    are further location keys (``tensor_id=7``, ...). No debug, so its shape comes from
    ``dims``."""
    loc: Json = {"name": name, "type": mem, "dims": [parts, nbytes], "base": base,
                 "addr": addr}
    loc.update(loc_keys)
    if bank is not None:
        loc["bank"] = bank
    return {"kind": "Internal", "dtype": dtype, "memorylocations": [loc]}


def register(name: str, dtype: str = "int32") -> Json:
    """A register allocation as the dumps write it (no ``Skind``, no locations)."""
    return {"name": name, "dtype": dtype}


def ap(loc: str, pattern: Sequence[Sequence[int]], dtype: str = "float32",
       offset: Any = 0) -> Json:
    """A ``physical_ap`` on location ``loc``: ``[step, num]`` pairs, partition first;
    ``offset`` counts elements."""
    return {"kind": "physical_ap", "memref": loc, "dtype": dtype,
            "ap": [list(p) for p in pattern], "offset": offset}


def full(loc: str, p: int, f: int, dtype: str = "float32", offset: Any = 0) -> Json:
    """The AP over ``p`` partitions of ``f`` contiguous elements."""
    return ap(loc, [[f, p], [1, f]], dtype, offset)


def imm(value: Any, dtype: str = "int32") -> Json:
    """An ``imm_value`` operand."""
    return {"kind": "imm_value", "dtype": dtype, "value": value}


def reg_access(name: str) -> Json:
    """A ``register_access`` operand of register ``name``."""
    return {"kind": "register_access", "regref": name}


def insn(name: str, opcode: str, engine: str, ins: Iterable[Json] = (),
         outs: Iterable[Json] = (), wait: Iterable[Tuple[str, int, int]] = (),
         update: Iterable[Tuple[int, int]] = (), *, lineno: int = 12,
         op_name: Optional[str] = None, **keys: Any) -> Json:
    """An instruction with the keys the dumps carry; ``wait`` holds (from, id, value),
    ``update`` (id, value); ``lineno``/``op_name`` fill ``debug`` (``op_name`` default:
    the opcode); ``keys`` are the opcode's fields."""
    wait, update = list(wait), list(update)
    obj: Json = {"name": name, "opcode": opcode, "engine": engine, "ins": list(ins),
                 "outs": list(outs),
                 "debug": {"lineno": lineno, "op_name": opcode if op_name is None else op_name,
                           "filename": "kernel.py"},
                 "dependencies": [], "loop_carried_dependencies": []}
    if wait or update:
        obj["sync_info"] = {
            "on_wait": [{"from": f, "id": i, "wait_value": v} for f, i, v in wait],
            "on_update": [{"id": i, "update_value": v} for i, v in update]}
    obj.update(keys)
    return obj


def copy(name: str, engine: str, dst: Json, src: Json, **kw: Any) -> Json:
    """A TensorCopy ``dst := src``."""
    return insn(name, "TensorCopy", engine, ins=[src], outs=[dst], **kw)


def function(allocs: Iterable[Json], blocks: Iterable[Tuple[str, Iterable[Json]]],
             name: str = "sg0000") -> Json:
    """A function; ``blocks`` is a list of (name, instructions)."""
    return {"name": name, "allocations": list(allocs),
            "blocks": [{"name": n, "instructions": list(i)} for n, i in blocks]}


def module(allocs: Iterable[Json], blocks: Iterable[Tuple[str, Iterable[Json]]],
           queues: Iterable[Json] = ()) -> Json:
    """A dump's top level: ``functions`` (one, named sg0000) and ``queues``, both
    present, no wrapper."""
    return {"functions": [function(allocs, blocks)], "queues": list(queues)}


def dma_block(name: str, trigger: str, descriptor_blocks: Iterable[Iterable[Json]],
              update: Iterable[Tuple[int, int]] = ()) -> Json:
    """A queues-held DMABlock fired by DMATrigger ``trigger``: each element of
    ``descriptor_blocks`` (a list of descriptor instructions) becomes a nested block
    ``<name>_Block<k>``; ``update`` holds (id, value)."""
    return {"name": name, "engine": "DMA", "opcode": "DMABlock", "ins": [], "outs": [],
            "dma_trigger": trigger,
            "sync_info": {"on_wait": [], "on_update": [{"id": i, "update_value": v}
                                                       for i, v in update]},
            "blocks": [{"name": "%s_Block%d" % (name, k), "instructions": list(d)}
                       for k, d in enumerate(descriptor_blocks)]}


def queue(name: str, dma_blocks: Iterable[Json]) -> Json:
    """A top-level ``queues`` entry holding its DMA blocks."""
    return {"name": name, "blocks": [{"instructions": list(dma_blocks)}]}
