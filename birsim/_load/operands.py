"""Name resolution, operands and sync records of one instruction (loader pass 2).

:class:`Resolver` turns names into table indices with the rules of docs/spec/BIR-JSON.md: sets,
locations, registers, blocks and instructions resolve in the instruction's function
(for a DMA block: the function of the DMATrigger that lists it); loop axes resolve to the
innermost enclosing Loop/DynamicForLoop of that name, else to the only loop of that name
in the module.
"""

import math

from .exprs import compile_expr
from .keys import operand_limits
from .schema import (MISSING as _MISSING, as_dict, as_int, as_list, as_name, as_num, describe,
                      enum_check, get, _short_int)

from .. import _birsim

_MAX_OPERANDS = _birsim.limits["operands_per_side"]

__all__ = ["Resolver", "OPERAND_ALIASES"]

#: Alternative operand kinds (docs/spec/BIR-JSON.md, Operands).
OPERAND_ALIASES = {"symbolic_pwap": "symbolic_ap", "register": "register_access"}
_AP_KINDS = ("physical_ap", "symbolic_ap", "register_ap")


class Resolver:
    """Resolves names for the instruction being built (``self.info``) and builds its
    operand and sync records."""

    def __init__(self, loader):
        self.ld = loader
        self.t = loader.t
        self.cat = loader.cat
        self.E = loader.cat.enums
        self.info = None
        self.max_dims = loader._field_count("opnds", "step")
        self._wait = {n.replace("_", "-"): v for n, v in self.E["WAIT"].items()}
        self._upd = {n.replace("_", "-"): v for n, v in self.E["UPDATE"].items()}
        self._update = {n.replace("_", "-"): v for n, v in self.E["UPDATE"].items()}
        self._wait_check = enum_check("wait mode", self._wait, {
            n: n.replace("_", "-") for n in self.E["WAIT"] if "_" in n}, True)
        self._update_check = enum_check("update mode", self._update, {
            n: n.replace("_", "-") for n in self.E["UPDATE"] if "_" in n}, True)
        self._type_check = enum_check("sync type", self.E["SYNCTYPE"], allow_int=True)
        self._opnd_check = enum_check("operand kind", self.E["OPND"], OPERAND_ALIASES)
        self._evt_waits = {v for n, v in self.E["WAIT"].items() if n.startswith("evt")}
        self._evt_updates = {v for n, v in self.E["UPDATE"].items() if n.startswith("evt")}

    # ---- names --------------------------------------------------------------------

    def _lookup(self, table, name, ctx, what, func=None):
        f = func or self.info.func
        name = as_name(name, ctx)
        index = table(f).get(name)
        if index is None:
            raise ctx.error("unknown %s '%s' (not defined in function '%s')"
                            % (what, name, f.name))
        return index

    def loc(self, name, ctx):
        index = self.info.func.locs.get(name) if type(name) is str else None
        if index is not None:
            return index
        return self._lookup(lambda f: f.locs, name, ctx, "memory location")

    def set(self, name, ctx, func=None):
        return self._lookup(lambda f: f.sets, name, ctx, "tensor set", func)

    def reg(self, name, ctx):
        return self._lookup(lambda f: f.regs, name, ctx, "register")

    def block(self, name, ctx):
        """A branch target: a block of the same region as the instruction."""
        index = self._lookup(lambda f: f.blocks, name, ctx, "block")
        if self.t.recs["blocks"][index]["region"] != self.info.region:
            raise ctx.error("branch target '%s' is not a block of the same region (function "
                            "body or loop body) as the branch" % name)
        return index

    def func(self, name, ctx, nki_only=False, code=None):
        name = as_name(name, ctx)
        f = self.ld.func_by_name.get(name)
        if f is None or (nki_only and not f.nki):
            where = "nki_functions" if nki_only else "functions or nki_functions"
            raise ctx.error("unknown function '%s' (not in %s)" % (name, where), code=code)
        return f

    def queue(self, name, ctx):
        name = as_name(name, ctx)
        if name not in self.ld.queues:
            raise ctx.error("unknown DMA queue '%s'" % name)
        return self.ld.queues[name]

    def dma_block(self, name, ctx, queue, trigger=None):
        """The DMABlock instruction called ``name`` in queue ``queue``; names repeating in
        one queue are told apart by the blocks' ``dma_trigger`` (``trigger``)."""
        name = as_name(name, ctx)
        found = self.ld.dma_blocks.get((queue, name))
        if not found:
            if any(n == name for _, n in self.ld.dma_blocks):
                raise ctx.error("DMA block '%s' belongs to another DMA queue" % name)
            raise ctx.error("unknown DMA block '%s'" % name)
        if len(found) > 1:
            match = [i for i in found if trigger is not None
                     and self.ld.insns[i].obj.get("dma_trigger") == trigger]
            if len(match) != 1:
                raise ctx.error("ambiguous DMA block '%s': %d blocks of its queue have that "
                                "name and their dma_trigger does not tell them apart"
                                % (name, len(found)))
            return match[0]
        return found[0]

    def axis(self, name, ctx):
        for _, axis, slot in reversed(self.info.loops):
            if axis == name:
                return slot
        slots = self.ld.axis_slots.get(name, ())
        if len(slots) == 1:
            return slots[0]
        if not slots:
            raise ctx.error("unknown loop axis '%s'" % name)
        raise ctx.error("loop axis '%s' is not an enclosing loop's and %d loops in the module "
                        "have that name" % (name, len(slots)))

    def expr(self, value, ctx):
        return compile_expr(value, ctx, self, self.t.exprs)

    def single_loc(self, set_index, ctx, what):
        rec = self.t.recs["sets"][set_index]
        if rec["nloc"] != 1:
            raise ctx.error("%s '%s' must have exactly one memory location, has %d"
                            % (what, self.ld.sets[set_index]["name"], rec["nloc"]))
        return rec["loc0"]

    # ---- operands -----------------------------------------------------------------

    def operands(self, rec, obj, ctx):
        """Append the records of ``ins`` then ``outs``; fill opnd, nin, nout."""
        recs = self.t.recs["opnds"]
        rec["opnd"] = len(recs)
        op = self.info.op
        for side, count, most in zip(("ins", "outs"), ("nin", "nout"), operand_limits(op)):
            values = get(obj, side, ctx, as_list, [])
            if len(values) > _MAX_OPERANDS:
                raise ctx.key(side).error("at most %d operands per side, got %d"
                                          % (_MAX_OPERANDS, len(values)))
            if most is not None and len(values) > most:
                raise ctx.key(side, most).error(
                    "%s takes at most %d %s, got %d: %s[%d] is one too many (no kernel "
                    "reads it)" % (op, most, side, len(values), side, most))
            rec[count] = len(values)
            for k, v in enumerate(values):
                recs.append(self.operand(v, ctx.key(side, k)))

    def operand(self, v, ctx):
        as_dict(v, ctx)
        kind = get(v, "kind", ctx, self._opnd_check, what="operand")
        kname = self.cat.enum_name["OPND"][kind]
        rec = {"kind": kind}
        dtypes = self.ld.dtype_check
        if kname in _AP_KINDS:
            self._ap(v, ctx, kname, rec, dtypes)
        elif kname == "imm_value":
            value = get(v, "value", ctx, _imm, what="imm_value")
            is_int = isinstance(value, int)
            if is_int and not _I64_MIN <= value <= _I64_MAX:
                raise ctx.key("value").error("integer immediate %s does not fit 64 bits"
                                             % _short_int(value))
            default = "int32" if is_int else "float32"
            rec["dtype"] = get(v, "dtype", ctx, dtypes, self.cat.dtype_code[default])
            rec["imm"] = float(value)
            rec["imm_is_int"] = int(is_int)
            rec["imm_bits"] = value if is_int else (
                int(value) if math.isfinite(value) and abs(value) < 2.0 ** 63 else 0)
        elif kname == "imm_array":
            values = get(v, "value_array", ctx, as_list, what="imm_array")
            values = [_imm(x, ctx.key("value_array", i)) for i, x in enumerate(values)]
            rec["dtype"] = get(v, "dtype", ctx, dtypes, self.cat.dtype_code["float32"])
            rec["arr_off"], rec["arr_len"] = self.t.flist(values)
        else:                                   # register_access
            reg = self.reg(get(v, "regref", ctx, what="register operand"), ctx.key("regref"))
            rec["loc"] = reg
            rec["dtype"] = get(v, "dtype", ctx, dtypes, self.t.recs["regs"][reg]["dtype"])
        return rec

    def _ap(self, v, ctx, kname, rec, dtypes):
        t = self.t
        if v.get("memref") is not None:
            loc = self.loc(v["memref"], ctx.key("memref"))
        elif v.get("memsetref") is not None:
            ref = v["memsetref"]
            sets, locs = self.info.func.sets, self.info.func.locs
            if type(ref) is str and ref not in sets and ref.endswith("_set") \
                    and ref[:-4] in locs:
                loc = locs[ref[:-4]]            # the compiler's "<location>_set"
            else:
                s = self.set(ref, ctx.key("memsetref"))
                loc = self.single_loc(s, ctx.key("memsetref"), "memsetref tensor set")
        else:
            raise ctx.error("missing required key 'memref' (or 'memsetref') of %s operand"
                            % kname)
        rec["loc"] = loc
        set_dtype = t.recs["sets"][t.recs["locs"][loc]["set"]]["dtype"]
        rec["dtype"] = dtype = get(v, "dtype", ctx, dtypes, set_dtype)
        ap = get(v, "ap", ctx, as_list, what="%s operand" % kname)
        if not 1 <= len(ap) <= self.max_dims:
            raise ctx.key("ap").error("access pattern has %d dimensions; must have 1 to %d"
                                      % (len(ap), self.max_dims))
        steps, nums = [], []
        for d, pair in enumerate(ap):
            if type(pair) is list and len(pair) == 2 and type(pair[0]) is int \
                    and type(pair[1]) is int and 1 <= pair[1] <= _NUM_MAX and (d or pair[0] >= 0) \
                    and abs(pair[0]) < _STEP_LIMIT:
                step, num = pair                    # the common case, checked cheaply
            else:
                step, num = _pair(pair, ctx.key("ap", d), d)
            steps.append(step)
            nums.append(num)
        rec["ndim"], rec["step"], rec["num"] = len(ap), steps, nums
        offset = v.get("offset")
        if isinstance(offset, dict):
            rec["offset_expr"] = self.expr(offset, ctx.key("offset"))
        elif offset is not None:
            rec["offset"] = as_int(offset, ctx.key("offset"))    # elements of dtype
        if kname == "symbolic_ap":
            addrs = get(v, "addrs", ctx, as_list, [])
            if len(addrs) > len(ap):
                raise ctx.key("addrs").error("%d addrs for %d access-pattern dimensions"
                                             % (len(addrs), len(ap)))
            rec["addrs"] = [-1 if a is None else self.expr(a, ctx.key("addrs", d))
                            for d, a in enumerate(addrs)]
        elif kname == "register_ap":
            key = "reg_ap_offset" if v.get("reg_ap_offset") is not None else "regref"
            if key == "regref" and v.get("regref") is not None:
                self.ld.warn("register-ap", "%s: register_ap 'regref' is read as a number of "
                             "elements added to the pattern's start, like reg_ap_offset (how "
                             "the compiler computes it is unknown; README choices)" % ctx.path)
            rec["reg"] = self.reg(get(v, ("reg_ap_offset", "regref"), ctx,
                                      what="register_ap operand"), ctx.key(key))
            rec["const_ap_offset"] = get(v, "const_ap_offset", ctx, as_int, 0)

    # ---- sync ---------------------------------------------------------------------

    def syncs(self, rec, obj, ctx):
        """Append the sync records of ``sync_info`` (waits, then updates)."""
        recs = self.t.recs["syncs"]
        rec["sync"] = len(recs)
        info = get(obj, "sync_info", ctx, as_dict, {})
        ctx = ctx.key("sync_info")
        for key, count, wait in (("on_wait", "nwait", True), ("on_update", "nupd", False)):
            entries = get(info, key, ctx, as_list, [])
            rec[count] = len(entries)
            for k, e in enumerate(entries):
                recs.append(self._sync(e, ctx.key(key, k), wait))

    def _sync(self, e, ctx, wait):
        as_dict(e, ctx)
        compiler_key = "wait_value" if wait else "update_value"
        if e.get("mode") is None and e.get(compiler_key) is not None:
            return self._compiler_sync(e, ctx, wait, compiler_key)
        if e.get("mode") is None and e.get("type") is None:
            raise ctx.error("missing required key 'mode' of sync entry (or '%s' in the "
                            "compiler's spelling)" % compiler_key)
        mode = get(e, "mode", ctx, self._wait_check if wait else self._update_check,
                   what="sync entry")
        is_event = mode in (self._evt_waits if wait else self._evt_updates)
        types = self.E["SYNCTYPE"]
        want = types["event"] if is_event else types["semaphore"]
        stype = get(e, "type", ctx, self._type_check, want)
        if stype != want:
            raise ctx.key("type").error("mode %s needs type %s"
                                        % (describe(e["mode"]), "event" if is_event
                                           else "semaphore"))
        sid = get(e, "id", ctx, as_int, what="sync entry")
        if not 0 <= sid < 256:
            raise ctx.key("id").error("sync id %d out of range: must be 0..255" % sid)
        # sem-inc / sem-dec change by one: a missing value means 1 (any other is a
        # SyncError at run time, as in the compiler's simulator).
        unit = not wait and mode in (self._upd["sem-inc"], self._upd["sem-dec"])
        rec = {"type": stype, "id": sid, "mode": mode,
               "value": get(e, "value", ctx, as_int if is_event else _sem_value,
                            1 if unit else 0)}
        if wait and mode == self._wait["sem-ge-reg"]:
            rec["reg"] = self.reg(get(e, "regref", ctx, what="sem-ge-reg wait"),
                                  ctx.key("regref"))
        if not wait:
            rec["target_core"] = get(e, "target_core", ctx,
                                     lambda v, c: as_int(v, c, lo=0), -1)
        return rec


    def _compiler_sync(self, e, ctx, wait, key):
        """``{from, id, wait_value}`` (a sem-ge-imm wait) or ``{id, update_value}`` (a
        sem-add-imm update); ``from`` is informational (docs/spec/BIR-JSON.md, Synchronization)."""
        types = self.E["SYNCTYPE"]
        stype = get(e, "type", ctx, self._type_check, types["semaphore"])
        if stype != types["semaphore"]:
            raise ctx.key("type").error("a sync entry with '%s' is a semaphore entry, got "
                                        "type %s" % (key, describe(e["type"])))
        sid = get(e, "id", ctx, as_int, what="sync entry")
        if not 0 <= sid < 256:
            raise ctx.key("id").error("sync id %d out of range: must be 0..255" % sid)
        value = get(e, "value", ctx, _sem_value, None)
        if value is None:
            value = get(e, key, ctx, _sem_value)
        rec = {"type": stype, "id": sid, "value": value,
               "mode": self._wait["sem-ge-imm"] if wait else self._upd["sem-add-imm"]}
        if not wait:
            rec["target_core"] = get(e, "target_core", ctx,
                                     lambda v, c: as_int(v, c, lo=0), -1)
        return rec


#: An access pattern's |step| is below this, each num at most _NUM_MAX (csrc/core/common.h).
_STEP_LIMIT = _birsim.limits["ap_step_limit"]
_NUM_MAX = _birsim.limits["ap_num_max"]
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_U32_MAX = (1 << 32) - 1


def _sem_value(v, ctx):
    """A semaphore wait or update value: the banks hold uint32 (docs/spec/control-flow-sync.md §3.1), so 0..2^32-1
    (larger or negative values would silently wrap)."""
    v = as_int(v, ctx)
    if not 0 <= v <= _U32_MAX:
        raise ctx.error("semaphore value %d does not fit 32 bits: must be 0..%d"
                        % (v, _U32_MAX))
    return v


def _pair(pair, ctx, d):
    """Check one ``[step, num]`` pair of an access pattern (the slow path)."""
    if not isinstance(pair, list) or len(pair) != 2:
        raise ctx.error("expected a [step, num] pair, got %s" % describe(pair))
    step = as_int(pair[0], ctx.key(0))
    num = as_int(pair[1], ctx.key(1))
    if not 1 <= num <= _NUM_MAX:
        raise ctx.key(1).error("num must be in 1..2^31, got %d" % num)
    if not -_STEP_LIMIT < step < _STEP_LIMIT:
        raise ctx.key(0).error("step %d is out of range (|step| < 2^40)" % step)
    if d == 0 and step < 0:
        raise ctx.error("the partition step (ap[0]) must be >= 0, got %d" % step)
    return step, num


def _imm(v, ctx):
    """An immediate: a number (booleans read as 0/1)."""
    if isinstance(v, bool):
        return int(v)
    return as_num(v, ctx)
