"""``birsim.load``: read BIR-JSON, validate it and build the C core's tables.

The contract is /work/shared/spec/BIR-JSON.md; the tables are csrc/ir/program.h. Loading
runs in two passes over the program:

1. *structure*: functions, their allocations (sets, locations, registers), then every
   region (function body, loop body, DMA block) with its blocks and instructions. This
   assigns every index and records every name, so a name may be used before it is
   defined. Regions are placed breadth-first: a region's blocks are contiguous, a block's
   instructions are contiguous, and a loop body becomes a new region placed after its
   parent's blocks. DMA blocks come last, each as a ``DMABlock`` instruction whose body
   is a one-block region of its descriptors.
2. *details* (birsim/_insns.py): engines, operands, sync records and the per-opcode slots
   of every instruction, with every name resolved.

Every malformed input raises :class:`~birsim.errors.ProgramError` whose message starts with
the JSON path of the bad value.
"""

import collections
import gc
import json
import os

from . import _insns
from ._schema import (Ctx, as_dict, as_int, as_list, as_name, as_str, enum_check, enum_value,
                      get, int_list)
from ._tables import Catalog, Tables
from .dtypes import DTYPE_ALIASES
from .errors import ProgramError
from .module import Module

__all__ = ["load", "Module", "ENGINE_ALIASES", "ARCH_ALIASES", "OPCODE_KEYS"]

#: Alternative engine spellings (BIR-JSON.md, Instructions).
ENGINE_ALIASES = {
    "GPSIMD": "Pool", "gpsimd": "Pool", "pool": "Pool",
    "Scalar": "Activation", "act": "Activation", "ACT": "Activation",
    "Tensor": "PE", "pe": "PE",
    "SyncDMA": "DMA", "dma": "DMA",
    "Vector": "DVE", "dve": "DVE",
    "Sync": "SP", "sp": "SP",
    "All": "ALL",
}
#: Alternative architecture names (BIR-JSON.md, Module).
ARCH_ALIASES = {"trn1": "sunda", "inf2": "sunda", "gen2": "sunda", "trn2": "gen3",
                "trn3": "core_v4", "gen4": "core_v4"}
#: Keys naming an instruction's opcode, in order of preference.
OPCODE_KEYS = ("opcode", "type", "instruction_type")

INPUT_KINDS = ("ExternalInput", "ExternalInputParameter", "Input")
OUTPUT_KINDS = ("ExternalOutput", "ExternalOutputParameter", "Output")
NO_DATA_MEMORY = ("Unallocated", "Input", "Output", "RNGSTATE")
REGISTER_DTYPES = ("int32", "uint32", "float32", "int64", "uint64")
LOOP_OPS = ("Loop", "DynamicForLoop", "DoWhile")
TERMINATORS = ("CompareAndBranch", "UnconditionalBranch", "Break", "Return", "Exit")
DMA_BLOCK_OPS = ("DMACopy", "DMADescriptorCopy", "DMADescriptorCCE",
                 "DMADescriptorTranspose", "DMADescriptorReplicate")

_catalog = None


def default_catalog():
    """The catalog of the compiled extension ``birsim._birsim`` (imported on first use)."""
    global _catalog
    if _catalog is None:
        from . import _birsim
        _catalog = Catalog.from_extension(_birsim)
    return _catalog


def load(source):
    """Load a BIR-JSON program and return a :class:`birsim.module.Module`.

    ``source`` is a module ``dict``, JSON text (``bytes``, or a ``str`` whose first
    non-blank character is ``{``) or a file path (any other ``str``, or an
    ``os.PathLike``). The module may be bare or wrapped as ``{"module": {...}}``.
    Raises :class:`~birsim.errors.ProgramError` for anything malformed."""
    # Loading allocates millions of small objects while the whole JSON tree is alive, so
    # the cyclic collector's full passes kept rescanning it: pausing it halves load time
    # (a 20k-instruction file: 1.2 s -> 0.65 s). Nothing here needs collecting mid-load.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(source, default_catalog())
    finally:
        if was_enabled:
            gc.enable()


def _load(source, catalog):
    root, prefix = _read_source(source)
    return _Loader(catalog, root, prefix).run()


def _read_source(source):
    if isinstance(source, dict):
        data = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = _parse_json(bytes(source))
    elif isinstance(source, str) and source.lstrip(" \t\r\n\ufeff").startswith("{"):
        data = _parse_json(source)
    elif isinstance(source, (str, os.PathLike)):
        try:
            with open(source, "rb") as fh:
                text = fh.read()
        except OSError as e:
            raise ProgramError("cannot read BIR-JSON file %r: %s" % (os.fspath(source), e),
                               path="") from e
        data = _parse_json(text, os.fspath(source))
    else:
        raise TypeError("birsim.load() takes a dict, JSON text or a path, not %s"
                        % type(source).__name__)
    if not isinstance(data, dict):
        raise ProgramError("the BIR-JSON module must be an object, got %s"
                           % type(data).__name__, path="")
    if isinstance(data.get("module"), dict) and "functions" not in data:
        return data["module"], ("module",)
    return data, ()


def _parse_json(text, filename=None):
    where = " in %s" % filename if filename else ""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8-sig")
        text = text.lstrip("\ufeff")
        return json.loads(text)
    except UnicodeDecodeError as e:
        raise ProgramError("invalid JSON%s: not UTF-8 (%s)" % (where, e), path="") from None
    except json.JSONDecodeError as e:
        raise ProgramError("invalid JSON%s: line %d column %d: %s"
                           % (where, e.lineno, e.colno, e.msg), path="") from None
    except RecursionError:
        raise ProgramError("invalid JSON%s: nested too deeply" % where, path="") from None


class FuncInfo:
    """A function while loading: its names and where its records are."""

    def __init__(self, index, name, obj, ctx, nki):
        self.index, self.name, self.obj, self.ctx, self.nki = index, name, obj, ctx, nki
        self.sets, self.locs, self.regs = {}, {}, {}
        self.blocks, self.insns = {}, {}
        self.inputs, self.outputs = [], []      # set indices, allocation order


class InsnInfo:
    """An instruction while loading. ``loops`` is the chain of enclosing loops, outermost
    first, as (opcode, axis name or None, axis slot or -1)."""

    __slots__ = ("index", "obj", "ctx", "op", "func", "block", "region", "loops", "dma")

    def __init__(self, index, obj, ctx, op, func, block, region, loops, dma=False):
        self.index, self.obj, self.ctx, self.op = index, obj, ctx, op
        self.func, self.block, self.region, self.loops, self.dma = \
            func, block, region, loops, dma


class _Loader:
    def __init__(self, cat, root, prefix):
        self.cat = cat
        self.root = root
        self.ctx = Ctx(prefix)
        self.t = Tables()
        self.funcs = []
        self.func_by_name = {}
        self.insns = []                  # InsnInfo, by instruction index
        self.axes = []                   # axis names, by slot
        self.axis_slots = collections.defaultdict(list)
        self.triggers = collections.defaultdict(list)   # DMA block name -> [InsnInfo]
        self.queues = {}                 # queue name -> index
        self.queue_blocks = []           # per queue: [DMABlock insn index]
        self.dma_blocks = {}             # DMA block name -> (queue index, insn index)
        self.dma_insn_names = {}         # instruction names inside dma_queues
        self.sets = []                   # per set: dict used by Module
        self.locs = []                   # per location: dict used by Module
        self._pending = collections.deque()
        self.E = cat.enums
        self.abstract = cat.abstract_opcodes()
        self.dtype_check = enum_check("dtype", cat.dtype_code, DTYPE_ALIASES)

    # ---- module -------------------------------------------------------------------

    def run(self):
        root, ctx = self.root, self.ctx
        self.version = get(root, "version", ctx, as_int, 2)
        if self.version not in (1, 2):
            raise ctx.key("version").error("unsupported version %d; accepted: 1, 2"
                                           % self.version)
        self.arch = get(root, "arch", ctx, enum_check(
            "arch", {n: n for n in self.cat.arches}, ARCH_ALIASES), "gen3")
        self.arch_info = self.cat.arches[self.arch]
        self._index_functions()
        self._drain()
        self._index_queues()
        _insns.build_all(self)
        self._finish()
        return Module(self)

    def _index_functions(self):
        root, ctx = self.root, self.ctx
        lists = []
        for key in ("functions", "nki_functions"):
            lists.append(get(root, key, ctx, as_list, []))
        if not lists[0]:
            raise ctx.error("the module has no functions (missing or empty 'functions')")
        entries = [(key, i, f) for key, lst in zip(("functions", "nki_functions"), lists)
                   for i, f in enumerate(lst)]
        for index, (key, i, f) in enumerate(entries):
            fctx = ctx.key(key, i)
            as_dict(f, fctx)
            name = get(f, "name", fctx, as_name, what="function")
            if name in self.func_by_name:
                raise fctx.key("name").error("duplicate function name '%s'" % name)
            info = FuncInfo(index, name, f, fctx.named(function=name), key == "nki_functions")
            self.funcs.append(info)
            self.func_by_name[name] = info
        main = self.func_by_name.get("main")
        self.entry = main if main is not None and not main.nki else self.funcs[0]
        for f in self.funcs:
            self._allocations(f)
        for f in self.funcs:
            rec = self.t.recs["funcs"][f.index]
            rec["region"] = self._new_region(-1, f, get(f.obj, "blocks", f.ctx, as_list, []),
                                             f.ctx.key("blocks"), ())

    # ---- allocations --------------------------------------------------------------

    def _allocations(self, f):
        t = self.t
        rec = {"name": t.string(f.name), "set0": len(t.recs["sets"]),
               "reg0": len(t.recs["regs"])}
        t.recs["funcs"].append(rec)
        allocs = get(f.obj, "allocations", f.ctx, as_list, [])
        for i, a in enumerate(allocs):
            actx = f.ctx.key("allocations", i)
            as_dict(a, actx)
            skind = get(a, "Skind", actx, as_str, what="allocation")
            if skind == "memory_location_set":
                self._set(f, a, actx)
            elif skind == "register":
                self._register(f, a, actx)
            else:
                raise actx.key("Skind").error("unknown allocation Skind '%s'; accepted: "
                                              "memory_location_set, register" % skind)
        rec["nset"] = len(t.recs["sets"]) - rec["set0"]
        rec["nreg"] = len(t.recs["regs"]) - rec["reg0"]

    def _set(self, f, a, ctx):
        t, E = self.t, self.E
        name = get(a, "name", ctx, as_name, what="tensor set")
        if name in f.sets:
            raise ctx.key("name").error("duplicate tensor set name '%s'" % name)
        kind = get(a, "kind", ctx, enum_check("tensor kind", E["TKIND"]), E["TKIND"]["Internal"])
        kind_name = self.cat.enum_name["TKIND"][kind]
        dtype = get(a, "dtype", ctx, self.dtype_check, what="tensor set '%s'" % name)
        dtype_name = self.cat.dtype_name[dtype]
        shape = get(a, "tensor_shape", ctx, lambda v, c: int_list(v, c, lo=1),
                    what="tensor set '%s'" % name)
        max_rank = self._field_count("sets", "shape")
        if not 1 <= len(shape) <= max_rank:
            raise ctx.key("tensor_shape").error("tensor_shape must have 1 to %d dimensions, "
                                                "got %d" % (max_rank, len(shape)))
        get(a, "partition_dim", ctx, as_int, 0)
        space = get(a, "addr_space", ctx, enum_check("addr_space", E["ADDRSPACE"]), 0)
        shared = space == E["ADDRSPACE"]["Shared"]
        io = 0
        if kind_name in INPUT_KINDS or kind_name in OUTPUT_KINDS:
            io = 1 if kind_name in INPUT_KINDS else 2
        index = len(t.recs["sets"])
        f.sets[name] = index
        rec = {"name": t.string(name), "func": f.index, "kind": kind, "dtype": dtype,
               "shared": int(shared), "ndim": len(shape), "shape": shape,
               "loc0": len(t.recs["locs"]),
               "io": io if f is self.entry else 0}
        t.recs["sets"].append(rec)
        if f is self.entry and io:
            (f.inputs if io == 1 else f.outputs).append(index)
        itemsize = self.cat.dtype_size[dtype_name]
        row = itemsize
        for n in shape[1:]:
            row *= n
        locs = get(a, "memorylocations", ctx, as_list, [])
        info = {"name": name, "kind": kind_name, "dtype": dtype_name, "shape": tuple(shape),
                "function": f.name, "shared": shared, "locs": [], "memory": None}
        for j, loc in enumerate(locs):
            self._location(f, index, info, loc, ctx.key("memorylocations", j), shape, row,
                           shared, ctx)
        if io and len(locs) != 1:
            raise ctx.key("memorylocations").error(
                "%s tensor set '%s' must have exactly one memory location, has %d"
                % (kind_name, name, len(locs)))
        rec["nloc"] = len(locs)
        self.sets.append(info)

    def _field_count(self, table, field):
        for name, _, _, count in self.cat.layouts[table]["fields"]:
            if name == field:
                return count
        raise KeyError(field)

    def _location(self, f, set_index, info, loc, ctx, shape, row, shared, set_ctx):
        t, E = self.t, self.E
        as_dict(loc, ctx)
        name = get(loc, "name", ctx, as_name, what="memory location")
        if name in f.locs:
            raise ctx.key("name").error("duplicate memory location name '%s'" % name)
        mem = get(loc, "type", ctx, enum_check("memory type", E["MEM"], allow_int=True),
                  what="memory location '%s'" % name)
        mem_name = self.cat.enum_name["MEM"][mem]
        if mem_name in NO_DATA_MEMORY:
            mem_name = "DRAM"
        elif mem_name not in ("DRAM", "SB", "PSUM"):
            raise ctx.key("type").error("memory type %s cannot hold a tensor (use DRAM, SB "
                                        "or PSUM)" % mem_name)
        dims = get(loc, "dims", ctx, lambda v, c: int_list(v, c, lo=1), None)
        if dims is None:
            dims = [shape[0], row]
        elif len(dims) != 2:
            raise ctx.key("dims").error("dims must be [num_partitions, bytes_per_partition]")
        elif dims[0] < shape[0] or dims[1] < row:
            raise ctx.key("dims").error(
                "dims %s too small for tensor_shape %s of %s: need at least [%d, %d]"
                % (dims, list(shape), info["dtype"], shape[0], row))
        if shared and mem_name != "DRAM":
            raise set_ctx.key("addr_space").error(
                "addr_space Shared is only allowed on DRAM; location '%s' is %s"
                % (name, mem_name))
        base = get(loc, "base", ctx, lambda v, c: as_int(v, c, lo=0), None)
        addr = get(loc, "addr", ctx, lambda v, c: as_int(v, c, lo=0), None)
        placed = base is not None and addr is not None and mem_name in ("SB", "PSUM")
        if placed:
            _, sb_parts, sb_bpp, ps_parts, ps_bpp = self.arch_info
            parts, bpp = (sb_parts, sb_bpp) if mem_name == "SB" else (ps_parts, ps_bpp)
            if base + dims[0] > parts or addr + dims[1] > bpp:
                raise ctx.error(
                    "location '%s' at base %d, addr %d with dims %s does not fit the %s "
                    "of arch %s (%d partitions x %d bytes)"
                    % (name, base, addr, dims, mem_name, self.arch, parts, bpp))
        index = len(t.recs["locs"])
        f.locs[name] = index
        t.recs["locs"].append({
            "name": t.string(name), "set": set_index, "memtype": E["MEM"][mem_name],
            "placed": int(placed), "parts": dims[0], "bpp": dims[1],
            "base": base if placed else 0, "addr": addr if placed else 0})
        info["locs"].append(name)
        if info["memory"] is None:
            info["memory"] = mem_name
        self.locs.append({"name": name, "set": set_index, "memory": mem_name,
                          "dims": tuple(dims), "placed": placed})

    def _register(self, f, a, ctx):
        t = self.t
        name = get(a, "name", ctx, as_name, what="register")
        if name in f.regs:
            raise ctx.key("name").error("duplicate register name '%s'" % name)
        dt = get(a, "dtype", ctx, lambda v, c: DTYPE_ALIASES.get(as_str(v, c), v), "int32")
        if dt not in REGISTER_DTYPES:
            raise ctx.key("dtype").error("unknown register dtype %r; accepted: %s"
                                         % (dt, ", ".join(REGISTER_DTYPES)))
        f.regs[name] = len(t.recs["regs"])
        t.add("regs", name=t.string(name), func=f.index, dtype=self.cat.dtype_code[dt],
              wide=int(dt.endswith("64")))

    # ---- regions, blocks, instructions --------------------------------------------

    def _new_region(self, owner, f, blocks, ctx, loops):
        index = self.t.add("regions", owner=owner, func=f.index)
        self._pending.append((index, f, blocks, ctx, loops))
        return index

    def _drain(self):
        while self._pending:
            self._place_region(*self._pending.popleft())

    def _place_region(self, region, f, blocks, ctx, loops):
        t = self.t
        block0 = len(t.recs["blocks"])
        t.recs["regions"][region].update(block0=block0, nblock=len(blocks))
        names = []
        for i, b in enumerate(blocks):
            bctx = ctx.key(i)
            as_dict(b, bctx)
            name = get(b, "name", bctx, as_name, what="block")
            if name in f.blocks:
                raise bctx.key("name").error("duplicate block name '%s'" % name)
            f.blocks[name] = block0 + i
            names.append(name)
            t.add("blocks", name=t.string(name), func=f.index, region=region)
        for i, b in enumerate(blocks):
            insns = get(b, "instructions", ctx.key(i), as_list, [])
            self._place_block(block0 + i, region, f, insns, ctx.key(i, "instructions"), loops)

    def _place_block(self, block, region, f, insns, ctx, loops, dma=False):
        t = self.t
        rec = t.recs["blocks"][block]
        rec["insn0"] = len(t.recs["insns"])
        rec["ninsn"] = len(insns)
        for k, obj in enumerate(insns):
            ictx = ctx.key(k).named(function=f.name)
            as_dict(obj, ictx)
            name = get(obj, "name", ictx, as_name, what="instruction")
            ictx = ictx.named(instruction=name)
            names = self.dma_insn_names if dma else f.insns
            if name in names:
                raise ictx.key("name").error("duplicate instruction name '%s'%s"
                                             % (name, " in dma_queues" if dma else ""))
            index = len(t.recs["insns"])
            names[name] = index
            op = self._opcode(obj, ictx)
            if dma and op not in DMA_BLOCK_OPS:
                raise ictx.error("opcode %s is not allowed in a DMA block; accepted: %s"
                                 % (op, ", ".join(DMA_BLOCK_OPS)))
            if op in TERMINATORS and k != len(insns) - 1:
                raise ictx.error("terminator %s must be the last instruction of its block"
                                 % op)
            if op == "Break" and not loops:
                raise ictx.error("Break outside any Loop, DynamicForLoop or DoWhile")
            t.add("insns", op=self.cat.op_code[op], name=t.string(name), func=f.index,
                  block=block)
            info = InsnInfo(index, obj, ictx, op, f, block, region, loops, dma)
            self.insns.append(info)
            if op in LOOP_OPS:
                self._loop(info, obj, ictx, f, loops)
            elif op == "DMATrigger":
                names = obj.get("dma_blocks") or []
                for n in [names] if isinstance(names, str) else names:
                    if isinstance(n, str):          # checked in pass 2
                        self.triggers[n].append(info)

    def _opcode(self, obj, ctx):
        op = get(obj, OPCODE_KEYS, ctx, what="instruction")
        key = next(k for k in OPCODE_KEYS if obj.get(k) is not None)
        op = enum_value(op, ctx.key(key), "opcode", self.cat.op_code)
        op = self.cat.op_name[op]
        if op in self.abstract:
            raise ctx.key(key).error("%s is an abstract opcode and cannot be instantiated"
                                     % op)
        if op == "DMABlock":
            raise ctx.key(key).error("DMABlock instructions exist only inside dma_queues")
        return op

    def _loop(self, info, obj, ctx, f, loops):
        t = self.t
        axis_name, slot = None, -1
        if info.op != "DoWhile":
            key = "LoopAxis" if info.op == "Loop" else "DynamicForLoopAxis"
            axis = get(obj, key, ctx, as_dict, what=info.op)
            axis_name = get(axis, "name", ctx.key(key), as_name, what=key)
            slot = len(self.axes)
            self.axes.append(axis_name)
            self.axis_slots[axis_name].append(slot)
            rec = t.recs["insns"][info.index]
            _insns.fresh_slots(rec)
            _insns.Slots(rec, self.cat.params[info.op], info.op)["axis"] = slot
        blocks = get(obj, "blocks", ctx, as_list, what=info.op)
        body = self._new_region(info.index, f, blocks, ctx.key("blocks"),
                                loops + ((info.op, axis_name, slot),))
        t.recs["insns"][info.index]["body"] = body

    # ---- DMA queues ---------------------------------------------------------------

    def _index_queues(self):
        t = self.t
        queues = get(self.root, "dma_queues", self.ctx, as_list, [])
        for qi, q in enumerate(queues):
            qctx = self.ctx.key("dma_queues", qi)
            as_dict(q, qctx)
            name = get(q, "name", qctx, as_name, what="DMA queue")
            if name in self.queues:
                raise qctx.key("name").error("duplicate DMA queue name '%s'" % name)
            self.queues[name] = qi
            sems = get(q, "semaphores", qctx, lambda v, c: int_list(v, c, 0, 255), [])
            special = get(q, "use_special_sema", qctx, lambda v, c: int_list(v, c, 0, 255), [])
            s0, ns = t.ilist(sems)
            p0, np_ = t.ilist(special)
            t.add("queues", name=t.string(name), sems=s0, nsems=ns, special=p0, nspecial=np_)
            blocks = []
            self.queue_blocks.append(blocks)
            for bi, b in enumerate(get(q, "dma_blocks", qctx, as_list, [])):
                blocks.append(self._dma_block(qi, b, qctx.key("dma_blocks", bi)))

    def _dma_block(self, queue, b, ctx):
        t = self.t
        as_dict(b, ctx)
        name = get(b, "name", ctx, as_name, what="DMA block")
        if name in self.dma_blocks:
            raise ctx.key("name").error("duplicate DMA block name '%s'" % name)
        op = get(b, OPCODE_KEYS, ctx, as_str, "DMABlock")
        if op != "DMABlock":
            raise ctx.key("opcode").error("a DMA block's opcode must be DMABlock, got '%s'"
                                          % op)
        triggers = self.triggers.get(name)
        if not triggers:
            raise ctx.key("name").error("DMA block '%s' is not listed by any DMATrigger"
                                        % name)
        funcs = sorted({tr.func.name for tr in triggers})
        if len(funcs) > 1:
            raise ctx.key("name").error("DMA block '%s' is listed by DMATriggers in "
                                        "different functions (%s)" % (name, ", ".join(funcs)))
        f, loops = triggers[0].func, triggers[0].loops
        # The DMABlock instruction is in no block's range; its `block` is its own
        # descriptor block (so error locations name it).
        index = t.add("insns", op=self.cat.op_code["DMABlock"], name=t.string(name),
                      func=f.index, engine=self.E["ENGINE"]["DMA"])
        self.dma_blocks[name] = (queue, index)
        region = t.add("regions", owner=index, func=f.index,
                       block0=len(t.recs["blocks"]), nblock=1)
        block = t.add("blocks", name=t.string(name), func=f.index, region=region)
        t.recs["insns"][index].update(body=region, block=block)
        bctx = ctx.named(function=f.name, instruction=name)
        self.insns.append(InsnInfo(index, b, bctx, "DMABlock", f, block, region, loops, True))
        insns = get(b, "instructions", ctx, as_list, [])
        self._place_block(block, region, f, insns, ctx.key("instructions"), loops, dma=True)
        return index

    # ---- finishing ----------------------------------------------------------------

    def _finish(self):
        t = self.t
        off, n = t.ilist([t.string(a) for a in self.axes])
        ntrig = sum(1 for i in self.insns if i.op == "DMATrigger")
        t.add("module", arch=self.E["ARCH"][self.arch], entry=self.entry.index, naxes=n,
              axis_names=off, ntriggers=ntrig)
