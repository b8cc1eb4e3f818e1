"""Build BIR-JSON programs in Python: ``birsim.build``.

Every function returns plain ``dict``/``list`` values in the shape the loader reads
(``docs/program-format.md``), so a program is a few lines and any key can still be
tweaked by hand before :func:`birsim.load`::

    import numpy as np, birsim
    from birsim import build as B

    a = B.tensor("a", "ExternalInput", "float32", [128, 64], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [128, 64], "DRAM")
    prog = B.module([B.function("main", [a, out], [
        B.tensor_scalar(B.whole(a), B.whole(out), "mult", 2.0),
    ])])
    res = birsim.run(prog, {"a": np.ones((128, 64), np.float32)})

Conventions:

- A tensor (:func:`tensor`) is a ``memory_location_set`` with one memory location named
  like the set (``loc=`` says otherwise); operands take the tensor dict or a location name.
- Access patterns (:func:`ap`) are ``[[step, num], ...]`` pairs, outermost (partition)
  first, steps and ``offset`` in *elements* of the operand's dtype; :func:`whole` reads a
  ``[P, F...]`` tensor whole.
- Optional keys are left out unless given (the loader's defaults apply); ``None`` values
  are dropped. Extra keyword arguments become keys of the object, so every field of every
  opcode can be spelled: ``insn("TensorScalar", "DVE", ins, outs, op0="mult", const0=2.0)``.
- Instructions without a name are named when the module is built (:func:`module`):
  ``<opcode>_<n>``, counted per function.

The generic :func:`insn` covers all 110 opcodes; the helpers below it
(:func:`tensor_copy`, :func:`matmult`, :func:`loop`, :func:`compare_and_branch`, ...)
spell the common ones with their operands in order. :func:`to_json` writes the text the
loader reads; :func:`load` loads it.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union, cast

from .errors import ProgramError

if TYPE_CHECKING:
    from ._load.module import Module

__all__ = [
    # allocations
    "tensor", "register",
    # operands
    "ap", "whole", "sym_ap", "reg_ap", "imm", "imm_array", "reg",
    # affine expressions
    "iv", "rv", "shard", "affine", "affine_v1",
    # structure
    "insn", "block", "function", "module", "wrap", "to_json", "load",
    # control flow
    "loop", "dyn_loop", "do_while", "compare_and_branch", "branch", "break_", "ret",
    "exit_", "call", "nki_kernel",
    # sync
    "wait", "update", "sync_info", "sem_wait", "sem_inc", "sem_dec", "event_wait",
    "event_set", "barrier",
    # DMA queues
    "dma_queue", "dma_block", "dma_trigger", "dma_descriptor",
    # compute and data movement
    "tensor_copy", "load_", "save", "dma_copy", "tensor_tensor", "tensor_scalar",
    "tensor_reduce", "activation", "matmult", "memset", "iota", "select", "reciprocal",
    "exponential", "register_move", "register_alu", "tensor_load", "tensor_save",
    "custom_op", "bir_kernel",
]

#: A BIR-JSON object (what every builder returns).
Json = Dict[str, Any]
#: A tensor dict (from :func:`tensor`) or a memory-location name.
TensorRef = Union[Json, str]
#: An integer or an affine expression dict.
Expr = Union[int, Json]
Pattern = Sequence[Sequence[int]]


def _clean(d: Json) -> Json:
    return {k: v for k, v in d.items() if v is not None}


def _check_opcode(opcode: str) -> None:
    from . import _birsim
    if opcode not in _birsim.opcodes and opcode != "DMABlock":
        import difflib
        near = difflib.get_close_matches(str(opcode), list(_birsim.opcodes), 1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise ProgramError(f"birsim.build.insn: unknown opcode {opcode!r}{hint}")


def _check_engine(engine: Optional[str]) -> None:
    if engine is None:
        return
    from . import _birsim
    from ._load.spell import ENGINE_ALIASES
    if engine not in _birsim.enums["ENGINE"] and engine not in ENGINE_ALIASES:
        raise ProgramError(f"birsim.build.insn: unknown engine {engine!r}; engines are "
                           f"{sorted(_birsim.enums['ENGINE'])} (aliases "
                           f"{sorted(ENGINE_ALIASES)})")


# ---- allocations ---------------------------------------------------------------------

def tensor(name: str, kind: str = "Internal", dtype: str = "float32",
           shape: Sequence[int] = (128, 512), mem: Union[str, int] = "SB", *,
           loc: Optional[str] = None, dims: Optional[Sequence[int]] = None,
           base: Optional[int] = None, addr: Optional[int] = None,
           addr_space: Optional[str] = None, locations: Optional[List[Json]] = None,
           **extra: Any) -> Json:
    """A ``memory_location_set`` allocation with one location (named ``loc``, default
    ``name``) of memory type ``mem`` (``"SB"``, ``"PSUM"``, ``"DRAM"``, ... or a number).
    ``kind`` is ``"Internal"``, ``"ExternalInput"``, ``"ExternalOutput"``, ...; ``dims``,
    ``base`` and ``addr`` place the location (bytes); ``locations`` replaces the location
    list entirely."""
    if locations is None:
        locations = [_clean({"name": loc or name, "type": mem,
                             "dims": None if dims is None else list(dims),
                             "base": base, "addr": addr})]
    return _clean(dict({"Skind": "memory_location_set", "name": name, "kind": kind,
                        "dtype": dtype, "tensor_shape": list(shape),
                        "addr_space": addr_space, "memorylocations": locations}, **extra))


def register(name: str, dtype: Optional[str] = None) -> Json:
    """A ``register`` allocation (the loader's default dtype is int32)."""
    return _clean({"Skind": "register", "name": name, "dtype": dtype})


# ---- operands ------------------------------------------------------------------------

def _loc_name(t: TensorRef) -> str:
    if isinstance(t, dict):
        locs = t.get("memorylocations") or []
        return locs[0]["name"] if locs else t["name"]
    return t


def _dtype_of(t: TensorRef, dtype: Optional[str]) -> str:
    if dtype is not None:
        return dtype
    if isinstance(t, dict) and t.get("dtype"):
        return t["dtype"]
    return "float32"


def ap(loc: TensorRef, pattern: Pattern, dtype: Optional[str] = None, *,
       offset: Optional[Expr] = None, kind: str = "physical_ap", **extra: Any) -> Json:
    """A ``physical_ap`` operand on ``loc`` (a tensor dict or a location name);
    ``pattern`` holds ``[step, num]`` pairs, partition first; ``offset`` counts elements
    of ``dtype`` (an int or an affine expression, e.g. ``affine([(iv("k"), 128)])``).
    ``dtype`` defaults to the tensor's (float32 for a bare name)."""
    return _clean(dict({"kind": kind, "memref": _loc_name(loc), "dtype": _dtype_of(loc, dtype),
                        "ap": [list(p) for p in pattern], "offset": offset}, **extra))


def whole(loc: TensorRef, shape: Optional[Sequence[int]] = None,
          dtype: Optional[str] = None, **kw: Any) -> Json:
    """The AP reading a tensor of ``shape`` ``[P, F1, F2, ...]`` (default: the tensor's
    ``tensor_shape``) whole, row-major."""
    if shape is None:
        if not isinstance(loc, dict):
            raise ProgramError("birsim.build.whole: give shape= with a location name")
        shape = loc["tensor_shape"]
    shape = list(shape)
    if not shape:
        shape = [1, 1]
    free = 1
    for n in shape[1:]:
        free *= n
    pattern = [[free, shape[0]]]
    stride = free
    for n in shape[1:]:
        stride //= n
        pattern.append([stride, n])
    return ap(loc, pattern, dtype, **kw)


def sym_ap(loc: TensorRef, pattern: Pattern, addrs: Sequence[Optional[Expr]],
           dtype: Optional[str] = None, **kw: Any) -> Json:
    """A ``symbolic_ap``: ``addrs`` holds one affine expression (or None) per dimension,
    added to that dimension's index (``None`` = 0)."""
    return ap(loc, pattern, dtype, kind="symbolic_ap", addrs=list(addrs), **kw)


def reg_ap(loc: TensorRef, pattern: Pattern, register_name: str,
           const: Optional[int] = None, dtype: Optional[str] = None, **kw: Any) -> Json:
    """A ``register_ap`` whose start moves by the value of a register (elements), plus
    ``const``."""
    return ap(loc, pattern, dtype, kind="register_ap", reg_ap_offset=register_name,
              const_ap_offset=const, **kw)


def imm(value: Union[int, float], dtype: str = "float32") -> Json:
    """An ``imm_value`` operand."""
    return _clean({"kind": "imm_value", "dtype": dtype, "value": value})


def imm_array(values: Iterable[Union[int, float]], dtype: str = "float32") -> Json:
    """An ``imm_array`` operand."""
    return _clean({"kind": "imm_array", "dtype": dtype, "value_array": list(values)})


def reg(name: Union[str, Json], dtype: Optional[str] = None) -> Json:
    """A ``register_access`` operand (``name`` or the register dict)."""
    if isinstance(name, dict):
        name = name["name"]
    return _clean({"kind": "register_access", "regref": name, "dtype": dtype})


# ---- affine expressions (version 2 unless noted) ---------------------------------------

def iv(axis: str) -> Json:
    """The induction variable of the enclosing loop whose axis is named ``axis``."""
    return {"kind": "AffIVKind", "axis": axis}


def rv(register_name: str) -> Json:
    """The run-time value of a register."""
    return {"kind": "IntRuntimeValueKind", "regref": register_name}


def shard() -> Json:
    """This core's rank."""
    return {"kind": "ShardIDKind"}


def affine(terms: Sequence[Tuple[Json, int]], c: int = 0) -> Json:
    """``c + sum(coeff * expr)``; ``terms`` is a list of ``(expr, coeff)``, e.g.
    ``affine([(iv("k"), 128)])``."""
    return {"kind": "AffExprKind", "terms": [{"idx": e, "coeff": k} for e, k in terms],
            "c": c}


def affine_v1(terms: Sequence[Tuple[str, int]], c: int = 0) -> Json:
    """Version 1: ``c + sum(coef * axis)``; ``terms`` is a list of ``(axis, coef)``."""
    return {"terms": [{"axis": a, "coef": k} for a, k in terms], "c": c}


# ---- instructions and structure --------------------------------------------------------

def insn(opcode: str, engine: Optional[str] = None, ins: Sequence[Json] = (),
         outs: Sequence[Json] = (), *, name: Optional[str] = None,
         sync: Optional[Json] = None, validate: bool = True, **fields: Any) -> Json:
    """Any instruction: ``opcode`` (one of :class:`birsim.ops.Op`), ``engine`` (``"DVE"``,
    ``"Activation"``, ``"PE"``, ``"Pool"``, ``"SP"``, ``"DMA"``, ``"Unassigned"`` or an
    alias), operands, and the opcode's fields as keyword arguments (``op="add"``,
    ``func="Relu"``, ``accumulation_flag=1``, ...; see docs/instructions.md).
    ``sync`` is a ``sync_info`` object (:func:`sync_info`). Unknown opcodes and engines
    raise :class:`birsim.ProgramError` at once (``validate=False`` leaves them for the
    loader to report, as tests of the loader want)."""
    if validate:
        _check_opcode(opcode)
        _check_engine(engine)
    d = {"name": name, "opcode": opcode, "engine": engine, "ins": list(ins),
         "outs": list(outs), "sync_info": sync}
    d.update(fields)
    return _clean(d)


def block(name: str, *instructions: Json) -> Json:
    """A block: a name and its instructions (in program order)."""
    return {"name": name, "instructions": list(instructions)}


def _as_blocks(prefix: str, blocks: Sequence[Json]) -> List[Json]:
    blocks = list(blocks)
    if blocks and "instructions" not in blocks[0]:
        blocks = [block(prefix, *blocks)]
    return blocks


def function(name: str, allocations: Sequence[Json] = (), blocks: Sequence[Json] = (),
             **extra: Any) -> Json:
    """A function: its allocations (tensors, registers) and blocks. ``blocks`` may also
    be a flat list of instructions, which become one block named ``"b0"``."""
    return dict({"name": name, "allocations": list(allocations),
                 "blocks": _as_blocks("b0", blocks)}, **extra)


def _name_instructions(blocks: Iterable[Json], counter: Dict[str, int]) -> None:
    for b in blocks if isinstance(blocks, list) else ():
        insns = b.get("instructions") if isinstance(b, dict) else None
        for ins in insns if isinstance(insns, list) else ():
            if isinstance(ins, dict):
                if "name" not in ins and isinstance(ins.get("opcode"), str):
                    n = counter.get(ins["opcode"], 0)
                    counter[ins["opcode"]] = n + 1
                    ins["name"] = f"{ins['opcode']}_{n}"
                if isinstance(ins.get("blocks"), list):
                    _name_instructions(ins["blocks"], counter)


def module(functions: Sequence[Json], *, nki_functions: Optional[Sequence[Json]] = None,
           dma_queues: Optional[Sequence[Json]] = None, arch: Optional[str] = None,
           version: Optional[int] = None, name_instructions: bool = True,
           synchronize: bool = False, **extra: Any) -> Json:
    """A bare module dict (the first function is the entry). Instructions without a
    ``name`` are named ``<opcode>_<n>`` (counted per function, and once over all the DMA
    queues' descriptors; unnamed blocks ``<queue>_block<k>``) unless
    ``name_instructions=False``. ``synchronize=True`` returns
    :func:`birsim.synchronize` of the module: counting semaphores order every pair of
    conflicting accesses on different engines (docs/sync.md)."""
    functions = list(functions)
    for f in functions + list(nki_functions or ()) if name_instructions else ():
        if isinstance(f, dict):
            _name_instructions(f.get("blocks", ()), {})
    descs: Dict[str, int] = {}          # descriptor names are unique across the queues
    for q in dma_queues or () if name_instructions else ():
        if not isinstance(q, dict) or not isinstance(q.get("dma_blocks"), list):
            continue
        _name_instructions(q["dma_blocks"], descs)
        for k, b in enumerate(b for b in q["dma_blocks"] if isinstance(b, dict) and "name" not in b):
            b["name"] = f"{q.get('name', 'q')}_block{k}"
    mod = _clean(dict({"version": version, "arch": arch, "functions": functions,
                       "nki_functions": None if nki_functions is None else list(nki_functions),
                       "dma_queues": None if dma_queues is None else list(dma_queues)},
                      **extra))
    if synchronize:
        from .synchronize import synchronize as _synchronize
        mod = _synchronize(mod)
    return mod


def wrap(mod: Json) -> Json:
    """The ``{"module": {...}}`` form of a module."""
    return {"module": mod}


def to_json(mod: Json, path: Optional[Union[str, "os.PathLike[str]"]] = None, *,
            indent: Optional[int] = None) -> str:
    """The BIR-JSON text of ``mod``; also written to ``path`` when given."""
    text = json.dumps(mod, indent=indent)
    if path is not None:
        with open(path, "w") as f:
            f.write(text + "\n")
    return text


def load(mod: Json) -> "Module":
    """``birsim.load(mod)`` (a :class:`birsim.Module`)."""
    from ._load.passes import load as _load
    return _load(mod)


# ---- control flow -----------------------------------------------------------------------

def loop(axis: str, ub: int, body: Sequence[Json], *, lb: int = 0, stride: int = 1,
         name: Optional[str] = None, engine: Optional[str] = "Unassigned",
         parallel: Optional[bool] = None, **fields: Any) -> Json:
    """A static ``Loop`` running ``body`` for ``axis`` = lb, lb+stride, ... < ub.
    ``body`` is a list of blocks or a flat list of instructions (one block)."""
    if parallel is not None:
        fields["isParallel"] = parallel
    return insn("Loop", engine, name=name,
                LoopAxis={"name": axis, "lb": lb, "ub": ub, "stride": stride},
                blocks=_as_blocks((name or axis) + "_body", body),
                **fields)


def dyn_loop(axis: str, ub: Json, body: Sequence[Json], *, lb: Expr = 0,
             stride: Expr = 1, name: Optional[str] = None,
             engine: Optional[str] = "Unassigned", **fields: Any) -> Json:
    """A ``DynamicForLoop``: ``ub`` is ``affine([(rv("reg"), coeff)], c)`` (read at loop
    entry); ``lb`` and ``stride`` are ints or expressions."""
    return insn("DynamicForLoop", engine, name=name,
                DynamicForLoopAxis={"name": axis, "lb": lb, "ub": ub, "stride": stride},
                blocks=_as_blocks((name or axis) + "_body", body), **fields)


def do_while(cond_register: str, body: Sequence[Json], *, name: Optional[str] = None,
             engine: Optional[str] = "Unassigned", **fields: Any) -> Json:
    """A ``DoWhile`` running ``body`` once, then again while register ``cond_register``
    is non-zero."""
    return insn("DoWhile", engine, name=name, cond=rv(cond_register),
                blocks=_as_blocks((name or "do_while") + "_body", body), **fields)


def compare_and_branch(left: Json, right: Json, comp_op: str, on_true: str,
                       on_false: str, *, engine: Optional[str] = "Pool",
                       name: Optional[str] = None, **fields: Any) -> Json:
    """A ``CompareAndBranch`` terminator: ``left`` a register operand, ``right`` an
    :func:`imm` (``IS_EQIMM``, ``IS_LTIMM``, ...) or a :func:`reg` (``IS_LTREG``, ...);
    jumps to block ``on_true`` or ``on_false``."""
    return insn("CompareAndBranch", engine, [left, right], [], name=name, comp_op=comp_op,
                on_true=on_true, on_false=on_false, **fields)


def branch(target: str, *, engine: Optional[str] = "Pool", name: Optional[str] = None,
           **fields: Any) -> Json:
    """An ``UnconditionalBranch`` to block ``target``."""
    return insn("UnconditionalBranch", engine, name=name, target=target, **fields)


def break_(*, engine: Optional[str] = "Pool", name: Optional[str] = None,
           **fields: Any) -> Json:
    """A ``Break`` out of the innermost loop."""
    return insn("Break", engine, name=name, **fields)


def ret(*, engine: Optional[str] = "Pool", name: Optional[str] = None,
        **fields: Any) -> Json:
    """A ``Return`` from the current function (clears the core's semaphores)."""
    return insn("Return", engine, name=name, **fields)


def exit_(*, engine: Optional[str] = "Pool", name: Optional[str] = None,
          **fields: Any) -> Json:
    """An ``Exit``: stops this core."""
    return insn("Exit", engine, name=name, **fields)


def call(target: str, arguments: Optional[Dict[str, str]] = None, *,
         engine: Optional[str] = "Unassigned", name: Optional[str] = None,
         **fields: Any) -> Json:
    """A ``Call`` of function ``target``; ``arguments`` binds callee tensor sets to the
    caller's (``{"callee_set": "caller_set"}``)."""
    return insn("Call", engine, name=name, target=target, arguments=arguments, **fields)


def nki_kernel(func: str, func_args: Sequence[str], func_outs: Sequence[str], *,
               engine: Optional[str] = "Unassigned", name: Optional[str] = None,
               **fields: Any) -> Json:
    """An ``NKIKernel`` call of ``nki_functions`` entry ``func``, binding its inputs and
    outputs (in order) to the caller's sets."""
    return insn("NKIKernel", engine, name=name, func=func, func_args=list(func_args),
                func_outs=list(func_outs), **fields)


# ---- synchronization ----------------------------------------------------------------------

def wait(id: int, mode: str = "sem-ge-imm", value: Optional[int] = 1,
         type: Optional[str] = None, regref: Optional[str] = None) -> Json:
    """One ``on_wait`` entry: semaphore ``id`` >= ``value`` (``sem-ge-imm``), >= a
    register (``sem-ge-reg`` with ``regref``), or event ``id`` set (``evt-set-then-clear``,
    which clears it)."""
    return _clean({"type": type, "id": id, "mode": mode, "value": value, "regref": regref})


def update(id: int, mode: str = "sem-add-imm", value: Optional[int] = 1,
           type: Optional[str] = None, target_core: Optional[int] = None) -> Json:
    """One ``on_update`` entry (``sem-add-imm``, ``sem-sub-imm``, ``sem-wr-imm``,
    ``sem-inc``, ``sem-dec``, or ``evt-set`` for an event); ``target_core`` updates another
    core's semaphore."""
    return _clean({"type": type, "id": id, "mode": mode, "value": value,
                   "target_core": target_core})


def sync_info(waits: Sequence[Json] = (), updates: Sequence[Json] = ()) -> Json:
    """A ``sync_info`` object for :func:`insn`'s ``sync=``."""
    return {"on_wait": list(waits), "on_update": list(updates)}


def sem_wait(id: int, value: int = 1) -> Json:
    """Wait until semaphore ``id`` >= ``value``."""
    return wait(id, "sem-ge-imm", value, type="semaphore")


def sem_inc(id: int, target_core: Optional[int] = None) -> Json:
    """Add 1 to semaphore ``id`` when the instruction completes."""
    return update(id, "sem-inc", 1, type="semaphore", target_core=target_core)


def sem_dec(id: int) -> Json:
    """Subtract 1 from semaphore ``id`` when the instruction completes."""
    return update(id, "sem-dec", 1, type="semaphore")


def event_wait(id: int) -> Json:
    """Wait until event ``id`` is set (the wait clears it)."""
    return wait(id, "evt-set-then-clear", None, type="event")


def event_set(id: int) -> Json:
    """Set event ``id`` when the instruction completes."""
    return update(id, "evt-set", None, type="event")


def barrier(*, engine: Optional[str] = "ALL", name: Optional[str] = None,
            **fields: Any) -> Json:
    """An ``AllEngineBarrier``."""
    return insn("AllEngineBarrier", engine, name=name, **fields)


# ---- DMA queues -------------------------------------------------------------------------

def dma_descriptor(src: Union[Json, Sequence[Json]], dst: Json, *, mode: str = "Copy",
                   engine: Optional[str] = "DMA", name: Optional[str] = None,
                   **fields: Any) -> Json:
    """A DMA-block descriptor: ``DMADescriptorCopy`` (``mode="Copy"``), ``...CCE`` (``src``
    a list of inputs, ``cce_op``, ``constants``), ``...Transpose`` (``transpose_op``) or
    ``...Replicate``."""
    ins = list(src) if isinstance(src, (list, tuple)) else [cast(Json, src)]
    return insn("DMADescriptor" + mode, engine, ins, [dst], name=name, **fields)


def dma_block(name: str, *instructions: Json, sync: Optional[Json] = None,
              trigger: Optional[str] = None) -> Json:
    """A DMA block of descriptor instructions (run when a :func:`dma_trigger` reaches it);
    ``trigger`` names the DMATrigger instruction it belongs to."""
    return _clean({"name": name, "opcode": "DMABlock", "dma_trigger": trigger,
                   "sync_info": sync, "instructions": list(instructions)})


def dma_queue(name: str, blocks: Sequence[Json], semaphores: Sequence[int] = (),
              special: Sequence[int] = ()) -> Json:
    """A ``dma_queues`` entry: its blocks in order and the semaphores it may update."""
    return {"name": name, "semaphores": list(semaphores), "use_special_sema": list(special),
            "dma_blocks": list(blocks)}


def dma_trigger(queue: str, blocks: Sequence[str] = (), *, engine: Optional[str] = "DMA",
                name: Optional[str] = None, sync: Optional[Json] = None,
                **fields: Any) -> Json:
    """A ``DMATrigger`` starting the next block(s) of DMA queue ``queue`` (or the named
    ``blocks``)."""
    return insn("DMATrigger", engine, name=name, sync=sync, queue=queue,
                dma_blocks=list(blocks) or None, **fields)


# ---- compute and data movement -------------------------------------------------------------

def tensor_copy(src: Json, dst: Json, *, engine: str = "DVE", name: Optional[str] = None,
                **fields: Any) -> Json:
    """``TensorCopy``: dst := src, cast to dst's dtype."""
    return insn("TensorCopy", engine, [src], [dst], name=name, **fields)


def load_(src: Json, dst: Json, *, engine: str = "DMA", name: Optional[str] = None,
          **fields: Any) -> Json:
    """``Load`` (DRAM to SBUF): dst := src."""
    return insn("Load", engine, [src], [dst], name=name, **fields)


def save(src: Json, dst: Json, *, engine: str = "DMA", name: Optional[str] = None,
         **fields: Any) -> Json:
    """``Save`` (SBUF/PSUM to DRAM): dst := src."""
    return insn("Save", engine, [src], [dst], name=name, **fields)


def dma_copy(src: Json, dst: Json, *, mode: Optional[str] = None, engine: str = "DMA",
             name: Optional[str] = None, **fields: Any) -> Json:
    """``DMACopy`` (``mode`` Copy, Transpose with ``transpose_op``, Replicate, CCE with
    ``cce_op`` and ``constants``)."""
    return insn("DMACopy", engine, [src], [dst], name=name, mode=mode, **fields)


def tensor_tensor(a: Json, b: Json, out: Json, op: str, *, engine: str = "DVE",
                  name: Optional[str] = None, **fields: Any) -> Json:
    """``TensorTensor``: out := a <op> b (an ALU op: ``add``, ``mult``, ``max``, ...)."""
    return insn("TensorTensor", engine, [a, b], [out], name=name, op=op, **fields)


def tensor_scalar(src: Json, out: Json, op0: str, const0: float = 0.0,
                  op1: Optional[str] = None, const1: Optional[float] = None, *,
                  reverse0: Optional[bool] = None, reverse1: Optional[bool] = None,
                  engine: str = "DVE", name: Optional[str] = None, **fields: Any) -> Json:
    """``TensorScalar``: out := (src <op0> const0) <op1> const1 (``reverse`` swaps the
    operands of that stage)."""
    return insn("TensorScalar", engine, [src], [out], name=name, op0=op0, const0=const0,
                op1=op1, const1=const1, reverse0=reverse0, reverse1=reverse1, **fields)


def tensor_reduce(src: Json, out: Json, op: str, axis: Optional[str] = None, *,
                  negate: Optional[bool] = None, engine: str = "DVE",
                  name: Optional[str] = None, **fields: Any) -> Json:
    """``TensorReduce``: out := reduce(op) of src over ``axis`` (``X``, ``XY``, ...)."""
    return insn("TensorReduce", engine, [src], [out], name=name, op=op, axis=axis,
                negate=negate, **fields)


def activation(src: Json, out: Json, func: str, *, bias: Optional[Json] = None,
               scale: Optional[Union[float, Json]] = None, alpha: Optional[float] = None,
               acc: Optional[str] = None, engine: str = "Activation",
               name: Optional[str] = None, **fields: Any) -> Json:
    """``Activation``: out := func(src * scale + bias; alpha). ``bias`` is an operand
    (a [P, 1] AP) when given; ``scale`` a number or an operand."""
    ins = [src]
    if isinstance(scale, dict) or bias is not None:
        ins.append(scale if isinstance(scale, dict) else imm(1.0 if scale is None else scale))
        scale = None
        if bias is not None:
            ins.append(bias)
    return insn("Activation", engine, ins, [out], name=name, func=func, scale=scale,
                alpha=alpha, acc=acc, **fields)


def matmult(moving: Json, stationary: Json, psum: Json, *,
            accumulation_flag: Optional[int] = None, engine: str = "PE",
            name: Optional[str] = None, **fields: Any) -> Json:
    """``Matmult``: psum[M, N] (+)= stationary[K, M]^T @ moving[K, N].
    ``accumulation_flag``: 0 overwrite, 1 accumulate, 2 start, 3 start + stop."""
    return insn("Matmult", engine, [moving, stationary], [psum], name=name,
                accumulation_flag=accumulation_flag, **fields)


def memset(out: Json, constant: int = 0, *, mode: Optional[str] = None,
           engine: str = "Pool", name: Optional[str] = None, **fields: Any) -> Json:
    """``Memset``: every element of out := the raw bits ``constant``."""
    return insn("Memset", engine, [], [out], name=name, mode=mode, constant=constant,
                **fields)


def iota(out: Json, pattern: Sequence[Sequence[int]], base: Optional[Expr] = None, *,
         channel_multiplier: Optional[int] = None, engine: str = "Pool",
         name: Optional[str] = None, **fields: Any) -> Json:
    """``Iota``: out[p, i...] := base + p * channel_multiplier + sum(step * i)."""
    return insn("Iota", engine, [], [out], name=name, base=base,
                channel_multiplier=channel_multiplier,
                pattern=[list(p) for p in pattern], **fields)


def select(pred: Json, on_true: Json, on_false: Json, out: Json, *, engine: str = "DVE",
           name: Optional[str] = None, **fields: Any) -> Json:
    """``Select``: out := on_true where pred == 1 else on_false."""
    return insn("Select", engine, [pred, on_true, on_false], [out], name=name, **fields)


def reciprocal(src: Json, out: Json, *, engine: str = "DVE", name: Optional[str] = None,
               **fields: Any) -> Json:
    """``Reciprocal``: out := 1 / src."""
    return insn("Reciprocal", engine, [src], [out], name=name, **fields)


def exponential(src: Json, out: Json, *, engine: str = "Activation",
                name: Optional[str] = None, **fields: Any) -> Json:
    """``Exponential``: out := exp(src)."""
    return insn("Exponential", engine, [src], [out], name=name, **fields)


def register_move(dst: Json, src: Json, *, engine: str = "Pool",
                  name: Optional[str] = None, **fields: Any) -> Json:
    """``RegisterMove``: register dst := src (a register or an :func:`imm`)."""
    return insn("RegisterMove", engine, [src], [dst], name=name, **fields)


def register_alu(dst: Json, a: Json, b: Json, op: str, *, is_64bit: Optional[bool] = None,
                 engine: str = "Pool", name: Optional[str] = None, **fields: Any) -> Json:
    """``RegisterAlu``: register dst := a <op> b."""
    return insn("RegisterAlu", engine, [a, b], [dst], name=name, op=op, is_64bit=is_64bit,
                **fields)


def tensor_load(src: Json, dst: Json, *, engine: str = "Pool", name: Optional[str] = None,
                **fields: Any) -> Json:
    """``TensorLoad``: register dst := the single element at src."""
    return insn("TensorLoad", engine, [src], [dst], name=name, **fields)


def tensor_save(src: Json, dst: Json, *, engine: str = "Pool", name: Optional[str] = None,
                **fields: Any) -> Json:
    """``TensorSave``: the single element at dst := register src."""
    return insn("TensorSave", engine, [src], [dst], name=name, **fields)


def custom_op(function_name: str, ins: Sequence[Json], outs: Sequence[Json], *,
              srcs_shape: Optional[Sequence[Sequence[int]]] = None,
              dsts_shape: Optional[Sequence[Sequence[int]]] = None,
              engine: str = "Pool", name: Optional[str] = None, **fields: Any) -> Json:
    """``CustomOp`` delegated to the kernel_sim serving ``function_name``."""
    return insn("CustomOp", engine, ins, outs, name=name, opFunctionName=function_name,
                srcsShape=None if srcs_shape is None else [list(s) for s in srcs_shape],
                dstsShape=None if dsts_shape is None else [list(s) for s in dsts_shape],
                **fields)


def bir_kernel(kernel_name: str, ins: Sequence[Json], outs: Sequence[Json], *,
               kernel_attrs: Optional[Json] = None, engine: str = "Pool",
               name: Optional[str] = None, **attrs: Any) -> Json:
    """``BIRKernel`` delegated to the kernel_sim serving ``kernel_name``; extra keyword
    arguments are kernel attributes."""
    return insn("BIRKernel", engine, ins, outs, name=name, kernel_name=kernel_name,
                kernel_attrs=kernel_attrs, **attrs)
