"""Small builders for BIR-JSON dicts in tests.

Every function returns plain ``dict``/``list`` values in the shape BIR-JSON.md describes,
so a test can build a program in a few lines and still tweak any key by hand::

    from bir import ap, block, function, insn, module, tensor

    prog = module([function("main",
        [tensor("a", "ExternalInput", "float32", [128, 64], "DRAM"),
         tensor("b", "ExternalOutput", "float32", [128, 64], "DRAM")],
        [block("b0", insn("cp", "TensorCopy", "DVE",
                          ins=[ap("a", [[64, 128], [1, 64]])],
                          outs=[ap("b", [[64, 128], [1, 64]])]))])])

Conventions:
- ``tensor(name, ...)`` makes a set with one memory location; the location is named like
  the set unless ``loc=`` says otherwise, so operands can say ``ap("a", ...)``.
- ``ap(loc, pattern, dtype)`` takes the ``[[step, num], ...]`` pairs, outermost (partition)
  first, steps in elements; ``whole(loc, shape)`` is the AP reading a ``[P, F...]`` tensor
  whole.
- Optional keys are left out unless given (so the loader's defaults are exercised);
  ``None`` values are dropped.
"""

__all__ = ["tensor", "register", "ap", "whole", "sym_ap", "reg_ap", "imm", "imm_array",
           "reg", "insn", "block", "function", "module", "wrap", "loop", "dyn_loop",
           "do_while", "iv", "rv", "shard", "affine", "affine_v1", "wait", "update",
           "sync_info", "dma_queue", "dma_block", "copy_program"]


def _clean(d):
    return {k: v for k, v in d.items() if v is not None}


# ---- allocations -------------------------------------------------------------------

def tensor(name, kind="Internal", dtype="float32", shape=(128, 512), mem="SB", *,
           loc=None, dims=None, base=None, addr=None, addr_space=None, locations=None,
           **extra):
    """A ``memory_location_set`` allocation with one location (named ``loc``, default
    ``name``) of memory type ``mem`` (name or number). ``locations`` replaces the location
    list entirely (e.g. ``[]``)."""
    if locations is None:
        locations = [_clean({"name": loc or name, "type": mem, "dims": dims,
                             "base": base, "addr": addr})]
    return _clean(dict({"Skind": "memory_location_set", "name": name, "kind": kind,
                        "dtype": dtype, "tensor_shape": list(shape),
                        "addr_space": addr_space, "memorylocations": locations}, **extra))


def register(name, dtype=None):
    """A ``register`` allocation (dtype default int32 when left out)."""
    return _clean({"Skind": "register", "name": name, "dtype": dtype})


# ---- operands ----------------------------------------------------------------------

def ap(loc, pattern, dtype="float32", *, offset=None, kind="physical_ap", **extra):
    """A ``physical_ap`` operand on memory location ``loc``; ``pattern`` is the list of
    ``[step, num]`` pairs; ``offset`` counts elements of ``dtype`` (an int or an affine expression)."""
    return _clean(dict({"kind": kind, "memref": loc, "dtype": dtype,
                        "ap": [list(p) for p in pattern], "offset": offset}, **extra))


def whole(loc, shape, dtype="float32", **kw):
    """The AP reading a tensor of ``shape`` ``[P, F1, F2, ...]`` whole, row-major."""
    free = 1
    for n in shape[1:]:
        free *= n
    pattern = [[free, shape[0]]]
    stride = free
    for n in shape[1:]:
        stride //= n
        pattern.append([stride, n])
    return ap(loc, pattern, dtype, **kw)


def sym_ap(loc, pattern, addrs, dtype="float32", **kw):
    """A ``symbolic_ap``: ``addrs`` holds one affine expression (or None) per dimension."""
    return ap(loc, pattern, dtype, kind="symbolic_ap", addrs=list(addrs), **kw)


def reg_ap(loc, pattern, register_name, const=None, dtype="float32", **kw):
    """A ``register_ap`` whose start moves by the value of a register (elements)."""
    return ap(loc, pattern, dtype, kind="register_ap", reg_ap_offset=register_name,
              const_ap_offset=const, **kw)


def imm(value, dtype="float32"):
    """An ``imm_value`` operand."""
    return _clean({"kind": "imm_value", "dtype": dtype, "value": value})


def imm_array(values, dtype="float32"):
    """An ``imm_array`` operand."""
    return _clean({"kind": "imm_array", "dtype": dtype, "value_array": list(values)})


def reg(name, dtype=None):
    """A ``register_access`` operand."""
    return _clean({"kind": "register_access", "regref": name, "dtype": dtype})


# ---- instructions and structure ----------------------------------------------------

def insn(name, opcode, engine=None, ins=(), outs=(), *, sync=None, **keys):
    """An instruction. Extra keyword arguments become op-specific keys (``op="add"``,
    ``comp_op=...``); ``sync`` is a ``sync_info`` object (see :func:`sync_info`)."""
    d = {"name": name, "opcode": opcode, "engine": engine, "ins": list(ins),
         "outs": list(outs), "sync_info": sync}
    d.update(keys)
    return _clean(d)


def block(name, *instructions):
    """A block of instructions."""
    return {"name": name, "instructions": list(instructions)}


def function(name, allocations=(), blocks=(), **extra):
    """A function. ``blocks`` may also be a flat list of instructions, which become one
    block named ``"b0"``."""
    blocks = list(blocks)
    if blocks and "instructions" not in blocks[0]:
        blocks = [block("b0", *blocks)]
    return dict({"name": name, "allocations": list(allocations), "blocks": blocks}, **extra)


def module(functions, *, nki_functions=None, dma_queues=None, arch=None, version=None,
           **extra):
    """A bare module dict."""
    return _clean(dict({"version": version, "arch": arch, "functions": list(functions),
                        "nki_functions": nki_functions, "dma_queues": dma_queues}, **extra))


def wrap(mod):
    """The ``{"module": {...}}`` form of a module."""
    return {"module": mod}


def loop(name, axis, lb, ub, stride, blocks, engine=None, **keys):
    """A static ``Loop``; ``blocks`` may be a flat list of instructions."""
    return insn(name, "Loop", engine, LoopAxis={"name": axis, "lb": lb, "ub": ub,
                                                "stride": stride},
                blocks=_body(name, blocks), **keys)


def dyn_loop(name, axis, lb, ub, stride, blocks, engine=None, **keys):
    """A ``DynamicForLoop``; ``lb``/``stride`` are expressions, ``ub`` should be
    ``affine([(rv(reg), coeff)], c)``."""
    return insn(name, "DynamicForLoop", engine,
                DynamicForLoopAxis={"name": axis, "lb": lb, "ub": ub, "stride": stride},
                blocks=_body(name, blocks), **keys)


def do_while(name, cond_register, blocks, engine=None, **keys):
    """A ``DoWhile`` repeating while register ``cond_register`` is non-zero."""
    return insn(name, "DoWhile", engine, cond=rv(cond_register),
                blocks=_body(name, blocks), **keys)


def _body(name, blocks):
    blocks = list(blocks)
    if blocks and "instructions" not in blocks[0]:
        blocks = [block(name + "_body", *blocks)]
    return blocks


# ---- affine expressions (version 2 unless noted) ------------------------------------

def iv(axis):
    """The induction variable of the loop with axis name ``axis``."""
    return {"kind": "AffIVKind", "axis": axis}


def rv(register_name):
    """The run-time value of a register."""
    return {"kind": "IntRuntimeValueKind", "regref": register_name}


def shard():
    """This core's rank."""
    return {"kind": "ShardIDKind"}


def affine(terms, c=0):
    """``c + sum(coeff * expr)``; ``terms`` is a list of ``(expr, coeff)``."""
    return {"kind": "AffExprKind", "terms": [{"idx": e, "coeff": k} for e, k in terms],
            "c": c}


def affine_v1(terms, c=0):
    """Version 1: ``c + sum(coef * axis)``; ``terms`` is a list of ``(axis, coef)``."""
    return {"terms": [{"axis": a, "coef": k} for a, k in terms], "c": c}


# ---- synchronization ---------------------------------------------------------------

def wait(id, mode="sem-ge-imm", value=1, type=None, regref=None):
    """One ``on_wait`` entry (``value`` is left out when None)."""
    return _clean({"type": type, "id": id, "mode": mode, "value": value, "regref": regref})


def update(id, mode="sem-add-imm", value=1, type=None, target_core=None):
    """One ``on_update`` entry (``value`` is left out when None; ``sem-inc``/``sem-dec``
    need 1)."""
    return _clean({"type": type, "id": id, "mode": mode, "value": value,
                   "target_core": target_core})


def sync_info(waits=(), updates=()):
    """A ``sync_info`` object."""
    return {"on_wait": list(waits), "on_update": list(updates)}


# ---- DMA queues --------------------------------------------------------------------

def dma_block(name, *instructions, sync=None, trigger=None):
    """A DMA block of descriptor instructions."""
    return _clean({"name": name, "opcode": "DMABlock", "dma_trigger": trigger,
                   "sync_info": sync, "instructions": list(instructions)})


def dma_queue(name, blocks, semaphores=(), special=()):
    """A DMA queue (``dma_queues`` entry)."""
    return {"name": name, "semaphores": list(semaphores), "use_special_sema": list(special),
            "dma_blocks": list(blocks)}


# ---- ready-made programs -----------------------------------------------------------

def copy_program(shape=(128, 64), dtype="float32", mem="DRAM", engine="DVE"):
    """The smallest useful program: ``out := in`` (sets ``in``/``out``)."""
    return module([function("main", [
        tensor("in", "ExternalInput", dtype, shape, mem),
        tensor("out", "ExternalOutput", dtype, shape, mem)],
        [insn("copy", "TensorCopy", engine, ins=[whole("in", shape, dtype)],
              outs=[whole("out", shape, dtype)])])])
