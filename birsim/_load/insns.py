"""Loader pass 2: fill every instruction record (engine, operands, syncs, per-opcode slots).

Each opcode's parameter slots are named by its BS_PARAM rows in csrc/bs_ops.def; handlers
write them by name through :class:`Slots` (an unknown name is a KeyError, so a handler
and the table cannot disagree in silence). One handler per opcode (or group) below.
"""

import itertools
import json
import math

from .exprs import X_CONST, constant_value, dynamic_ub
from .keys import check_keys
from .opcodes import (ACC_KEYS, BIRKERNEL_ATTRS, FP32_MIN, LATENCY_KEY, OPS, POOL_ALIASES,
                      REQUIRED)
from .operands import Resolver
from .spell import ENGINE_ALIASES, INPUT_KINDS, OUTPUT_KINDS
from .schema import (_I64_MAX, _I64_MIN, MISSING, Ctx, as_bool, as_dict, as_int, as_list,
                     as_name, as_num, as_str, enum_check, get, int_list)

__all__ = ["build_all", "Slots", "NKI_FUNC_CODE", "NKI_FUNC_MESSAGE"]

NKI_FUNC_CODE = 250
NKI_FUNC_MESSAGE = "I.getFunc() != nullptr"

_DESCRIPTOR_MODES = {"DMADescriptorCopy": "Copy", "DMADescriptorCCE": "CCE",
                     "DMADescriptorTranspose": "Transpose",
                     "DMADescriptorReplicate": "Replicate"}


class Slots:
    """Named access to the i/f/x slots of one instruction record (dict) of opcode ``op``."""

    __slots__ = ("rec", "layout", "op")

    def __init__(self, rec, layout, op):
        self.rec, self.layout, self.op = rec, layout, op

    def _where(self, name):
        try:
            return self.layout[name]
        except KeyError:
            raise KeyError("%s has no parameter %r (bs_ops.def declares %s)"
                           % (self.op, name, sorted(self.layout))) from None

    def __setitem__(self, name, value):
        slot, index = self._where(name)
        self.rec[slot][index] = value

    def __getitem__(self, name):
        slot, index = self._where(name)
        return self.rec[slot][index]


def fresh_slots(rec):
    """Reset the i/f/x slots of ``rec`` to their unused values (0, 0.0, -1)."""
    rec["i"], rec["f"], rec["x"] = [0] * 8, [0.0] * 4, [-1] * 4


def latency(v, ctx):
    """``predicted_latency_ns``: a finite number >= 0, as a float (the C walker reads the
    same; it declines any other value, which this then refuses)."""
    v = float(as_num(v, ctx))
    if not math.isfinite(v) or v < 0:
        raise ctx.error("must be a finite number >= 0 (ns), got %r" % v)
    return v


def build_all(loader):
    """Fill every instruction record of ``loader`` (after pass 1). The integer lists of
    the C walker's records go to ipool here, in instruction order among the Python
    path's (Tables.fast_lists), so ipool is the same on both paths."""
    b = None                                # made at the first instruction it builds
    lists = loader.t.fast_lists
    infos = loader.insns
    # the Python path's instructions (None: loaded by the C walker in pass 1), found at C
    # speed (an InsnInfo is true), and the walker's with a list, in instruction order
    first, end = loader.insn0, len(infos)
    todo = itertools.compress(range(first, end), infos[first:])
    if not lists:
        for i in todo:
            if b is None:
                b = _Builder(loader)
            b.build(infos[i])
        return
    for i in sorted(set(todo).union(i for i in lists if first <= i < end)):
        info = infos[i]
        if info is not None:
            if b is None:
                b = _Builder(loader)
            b.build(info)
        elif i in lists:
            values = lists.pop(i)
            if type(values[0]) is list:     # a "pairs" row's (Iota's pattern): flattened
                values = [x for pair in values for x in pair]
            loader.t.fast_list(i, values)


class _Builder(Resolver):
    def __init__(self, loader):
        super().__init__(loader)
        self.engine_aliases = ENGINE_ALIASES
        self.io_kinds = (INPUT_KINDS, OUTPUT_KINDS)
        self.engine_check = enum_check("engine", self.E["ENGINE"], ENGINE_ALIASES)
        self.alu_check = enum_check("ALU op", self.cat.alu_ops)
        self._checks = {}
        self._act_checks = {}
        self.recs = self.t.recs["insns"]

    def build(self, info):
        self.info = info
        rec = self.recs[info.index]
        obj, ctx = info.obj, info.ctx
        if "i" not in rec:                           # pass 1 fills loops' axis slot
            rec["i"], rec["f"], rec["x"] = [0] * 8, [0.0] * 4, [-1] * 4    # fresh_slots
        if info.back:
            # the handler's shortcut (_BACK_FAST) for the common values, else the handler
            fast = _BACK_FAST.get(info.op) if BACK_FAST else None
            if fast is not None and fast(self, info, rec, obj):
                return
            if ctx is None:             # left by _handed_back: the handler's context
                parts, k = info.where
                ctx = info.ctx = Ctx(parts + (k,), info.func.name, obj["name"])
            self.slots = Slots(rec, self.cat.params[info.op], info.op)
            # the C walker read the rest (engine, operands, sync, latency, the key
            # checks) exactly as below: the handler alone is left (fastload.HANDBACK)
            _HANDLERS[info.op](self, info, rec, obj, ctx)
            return
        self.slots = Slots(rec, self.cat.params[info.op], info.op)
        if info.op != "DMABlock":
            rec["engine"] = get(obj, "engine", ctx, self.engine_check, 0)
            self.operands(rec, obj, ctx)
        else:
            rec["opnd"] = len(self.t.recs["opnds"])
        self.syncs(rec, obj, ctx)
        rec["lat"] = get(obj, LATENCY_KEY, ctx, latency, -1.0)
        check_keys(info.op, obj, ctx, self.ld.warn)
        handler = _HANDLERS.get(info.op)
        if handler is not None:
            handler(self, info, rec, obj, ctx)

    # ---- small helpers ------------------------------------------------------------

    def alu(self, obj, key, ctx, default=None, what=None):
        d = {} if default is None else {"default": self.cat.alu_ops[default]}
        return get(obj, key, ctx, self.alu_check, what=what, **d)

    def enum(self, obj, key, ctx, group, default, what):
        """Enum ``group`` (of ``_birsim.enums``) at ``obj[key]``, default name ``default``."""
        return get(obj, key, ctx, self.enum_checker(group, what), self.E[group][default])

    def enum_checker(self, group, what, aliases=None):
        check = self._checks.get(what)
        if check is None:
            check = self._checks[what] = enum_check(what, self.E[group], aliases)
        return check

    def act_checker(self, what):
        check = self._act_checks.get(what)
        if check is None:
            check = self._act_checks[what] = enum_check(what, self.cat.act_funcs)
        return check

    def ilist(self, rec, values):
        """rec's list := values; none: list/nlist stay 0, as the C walker leaves them."""
        if values:
            rec["list"], rec["nlist"] = self.t.ilist(values)

    def names(self, obj, key, ctx, default=None):
        """A list of names (a single name is accepted as a one-element list)."""
        v = obj.get(key)
        if v is None:
            if default is None:
                raise ctx.error("missing required key '%s' of %s" % (key, self.info.op))
            return default
        if isinstance(v, str):
            return [(as_name(v, ctx.key(key)), ctx.key(key))]
        as_list(v, ctx.key(key))
        return [(as_name(x, ctx.key(key, i)), ctx.key(key, i)) for i, x in enumerate(v)]

    def shapes(self, obj, key, ctx):
        out = []
        for i, s in enumerate(get(obj, key, ctx, as_list, [])):
            dims = int_list(s, ctx.key(key, i), lo=0)
            out += [len(dims)] + dims
        return out

    def bind(self, rec, pairs):
        flat = []
        for callee, caller in pairs:
            flat += [callee, caller]
        self.ilist(rec, flat)


# ---- handlers ----------------------------------------------------------------------

# ---- declared parameters -------------------------------------------------------------
#
# An opcode's declared parameter rows (``opcodes.OPS[op].params``: slot, key or aliases,
# kind, default) are read by ``read_params`` here (the specification) and by the C walker
# (csrc/py/fastload.c, configured by fastload.py) from the same rows, so an opcode's keys
# have one reading per language. ``_declared`` is the handler of an opcode that reads
# nothing else.

def _declared(b, info, rec, obj, ctx):
    """The handler of an opcode whose row's ``params`` are all it reads."""
    read_params(b, info.op, OPS[info.op].params, obj, ctx)


def read_params(b, op, params, obj, ctx):
    p = b.slots
    for name, key, kind, default in params:
        what = op if default is REQUIRED else None      # names the opcode when missing
        if kind == "alu":
            if default is REQUIRED:
                p[name] = b.alu(obj, key, ctx, what=op)
            else:
                p[name] = b.alu(obj, key, ctx, default=default)
        elif kind == "bool":
            p[name] = int(get(obj, key, ctx, as_bool, default, what))
        elif kind == "num":
            p[name] = float(get(obj, key, ctx, as_num, default, what))
        elif kind == "not_bool":
            p[name] = int(not get(obj, key, ctx, as_bool, default, what))
        elif kind[0] == "int":
            lo, hi = kind[1], kind[2]
            p[name] = get(obj, key, ctx, lambda v, c: as_int(v, c, lo, hi), default, what)
        elif kind[0] == "count":
            n = float(get(obj, key, ctx, as_num, default, what))
            if not n > 0 or n == float("inf"):
                raise ctx.key(key).error("%s %s must be a finite count > 0, got %r"
                                         % (op, key, obj[key]))
            p[name] = n
        elif kind[0] == "const":
            p[name] = b.E[kind[1]][kind[2]]
        elif kind[0] == "ilist":
            lo, hi = kind[1], kind[2]
            b.ilist(b.t.recs["insns"][b.info.index],
                    get(obj, key, ctx, lambda v, c: int_list(v, c, lo, hi), default, what))
        elif kind[0] == "cmp":
            p[name] = _compare(b, obj, key, ctx, default)
        elif kind[0] == "acc_cmd":
            if key != ACC_KEYS:
                raise KeyError("acc_cmd rows of %s read %s" % (op, ACC_KEYS))
            p[name] = _acc(b, obj, ctx, default)
        elif kind[0] == "acc_flags":
            if key != ACC_FLAG_KEYS:
                raise KeyError("acc_flags rows of %s read %s" % (op, ACC_FLAG_KEYS))
            p[name] = _ROW_READERS["acc_flags"](obj, ctx)   # not a call gen_docs follows
        elif kind[0] == "raw":
            _raw_constant(b, name, key, kind[1], kind[2], obj, ctx)
        elif kind[0] == "acc":
            _accumulator(b, b.info, b.t.recs["insns"][b.info.index], obj, ctx, kind[1],
                         default, *kind[2:])
        elif kind[0] == "enum":
            check = b.enum_checker(kind[1], kind[2], *kind[3:])
            if default is REQUIRED:
                p[name] = get(obj, key, ctx, check, what=op)
            else:
                p[name] = get(obj, key, ctx, check, b.E[kind[1]][default])
        elif kind[0] == "act":
            check = b.act_checker(kind[1])
            if default is REQUIRED:
                p[name] = get(obj, key, ctx, check, what=op)
            else:
                p[name] = get(obj, key, ctx, check, b.cat.act_funcs[default])
        else:
            raise KeyError("unknown parameter kind %r of %s" % (kind, op))


# PARAMS_FIRST handlers: the rows, then only keys of SCHEMA no row reads (is_activate2 &
# co., reduce_res_negate), so the C walker loads instructions without them.

def _tensor_scalar(b, info, rec, obj, ctx):
    read_params(b, info.op, OPS[info.op].params, obj, ctx)
    _res_negate(b, info, obj, ctx)


def _res_negate(b, info, obj, ctx):
    """NKI tensor_scalar_reduce's ``reduce_res_negate`` (docs/spec/nki-isa-semantics.md §3.9): the
    accumulator's readers write -lane; it needs an accumulator command."""
    if not get(obj, "reduce_res_negate", ctx, as_bool, False):
        return
    if b.slots["acc"] == b.E["ACC"]["Idle"]:
        raise ctx.key("reduce_res_negate").error(
            "%s key 'reduce_res_negate' = true needs an accumulator command ('acc' / "
            "'reduce_cmd' / 'accumulator_cmd' other than Idle)" % info.op)
    b.slots["res_negate"] = 1


def _activation(b, info, rec, obj, ctx):
    read_params(b, "Activation", OPS["Activation"].params, obj, ctx)
    if get(obj, "is_activate2", ctx, as_bool, False):
        _activate2(b, info, rec, obj, ctx)
        return
    for key in _ACT2_KEYS:                  # never ignored in silence
        v = obj.get(key)
        if v is not None and v is not False and v != "bypass":
            raise ctx.key(key).error("Activation key '%s' = %r needs is_activate2 = true"
                                     % (key, v))


# NKI activate2's stage-1 pairs (docs/spec/nki-isa-semantics.md §3.5)
ACT2_PAIRS = (("mult", "add"), ("mult", "subtract"), ("mult", "bypass"), ("add", "bypass"),
              ("subtract", "bypass"), ("bypass", "bypass"))
_IDENTITY = {"mult": 1.0}
_ACT2_KEYS = ("op0", "op1", "reverse0", "reverse1", "const0", "imm0", "const1", "imm1",
              "relu_param")


def _activate2(b, info, rec, obj, ctx):
    """Activation with is_activate2: t = (x op0 imm0) op1 imm1 (reverse0/1 put the constant
    on the left), then func(t; alpha / relu_param). imm0/imm1 are ins[1]/ins[2] when
    present, else const0/imm0 and const1/imm1 (default: the op's identity)."""
    p = b.slots
    names = {v: k for k, v in b.cat.alu_ops.items()}
    op0 = b.alu(obj, "op0", ctx, default="bypass")
    op1 = b.alu(obj, "op1", ctx, default="bypass")
    pair = (names[op0], names[op1])
    if pair not in ACT2_PAIRS:
        raise ctx.key("op0").error("Activation is_activate2: (op0, op1) = (%s, %s) is not one "
                                   "of activate2's pairs %s" % (pair + (", ".join(
                                       "(%s, %s)" % q for q in ACT2_PAIRS),)))
    for key in ("scale", "bias"):
        if obj.get(key) is not None:
            raise ctx.key(key).error("Activation is_activate2 takes op0/op1 with const0/const1 "
                                     "(or ins[1]/ins[2]), not '%s'" % key)
    p["activate2"] = 1
    p["op0"], p["op1"] = op0, op1
    p["reverse"] = int(get(obj, "reverse0", ctx, as_bool, False)) \
        | int(get(obj, "reverse1", ctx, as_bool, False)) << 1
    c0 = float(get(obj, ("const0", "imm0"), ctx, as_num, _IDENTITY.get(pair[0], 0.0)))
    c1 = float(get(obj, ("const1", "imm1"), ctx, as_num, _IDENTITY.get(pair[1], 0.0)))
    p["alpha"] = float(get(obj, ("relu_param", "alpha"), ctx, as_num, 0.0))
    rec["flist"], rec["nflist"] = b.t.flist([c0, c1])


ACC_FLAG_KEYS = ("accumulation_flag", "start_tensor_calc")


def _acc_flags(obj, ctx):
    """The matmul flags: accumulation_flag (0..3), else start_tensor_calc (true 2, false
    1), else 0 (the keys of ACC_FLAG_KEYS, spelt out for docs/gen_docs.py)."""
    flag = get(obj, "accumulation_flag", ctx, lambda v, c: as_int(v, c, 0, 3), None)
    if flag is None:
        start = get(obj, "start_tensor_calc", ctx, as_bool, None)
        flag = 0 if start is None else (2 if start else 1)
    return flag


_ROW_READERS = {"acc_flags": _acc_flags}


def _zero_region(b, obj, ctx):
    """The zero_region slot: 1 + ``psum_zero_region`` r (r in 0..3), 0 when the key is
    absent; a start zeroes 2^r PSUM banks (k_psum.c bs_matmul_write; README choices).
    Warned: the window is birsim's reading. No parameter row reads the key, so the C walker
    declines instructions carrying it and this handler (and its warning) runs."""
    r = get(obj, "psum_zero_region", ctx, lambda v, c: as_int(v, c, 0, 3), None)
    if r is None:
        return 0
    b.ld.warn("psum-zero-region", "%s: psum_zero_region: a start zeroes the 2^r-bank PSUM "
              "window (2 KiB banks, aligned to 2^r banks) holding the output's first byte, on "
              "the output's partitions; that window is birsim's reading (README choices)"
              % ctx.path)
    return r + 1


def _matmult(b, info, rec, obj, ctx):
    """MatmultMx: the accumulation flags (its row) and psum_zero_region."""
    read_params(b, info.op, OPS[info.op].params, obj, ctx)
    b.slots["zero_region"] = _zero_region(b, obj, ctx)


def _matmult_fields(b, info, rec, obj, ctx):
    """Matmult: the flags, zero points, perf mode, transpose mode and psum_zero_region (all
    parameter rows)."""
    read_params(b, "Matmult", OPS["Matmult"].params, obj, ctx)
    b.slots["zero_region"] = _zero_region(b, obj, ctx)


def _dma_copy(b, info, rec, obj, ctx):
    """DMACopy: the rows (mode, transpose_op, cce_op, oob_is_err), then the constants (no
    row reads them: the C walker declines instructions carrying them)."""
    read_params(b, "DMACopy", OPS["DMACopy"].params, obj, ctx)
    _dma_constants(b, rec, obj, ctx)


def _dma_descriptor(b, info, rec, obj, ctx):
    """DMADescriptor*: the rows (the mode is the opcode's; CCE's cce_op), then cce_op when
    given to another mode, and the constants."""
    read_params(b, info.op, OPS[info.op].params, obj, ctx)
    if _DESCRIPTOR_MODES[info.op] != "CCE" and (obj.get("op") is not None
                                                 or obj.get("cce_op") is not None):
        b.slots["cce_op"] = b.alu(obj, ("cce_op", "op"), ctx, default="add")
    _dma_constants(b, rec, obj, ctx)


def _dma_constants(b, rec, obj, ctx):
    consts = get(obj, "constants", ctx, as_list, [])
    if consts:                          # none: flist/nflist stay 0, as the C walker leaves them
        rec["flist"], rec["nflist"] = b.t.flist(
            [as_num(v, ctx.key("constants", k)) for k, v in enumerate(consts)])


def _raw_constant(b, name, key, flag, value, obj, ctx):
    """Memset's constant (the "raw" parameter kind)."""
    raw = obj.get(key)
    if isinstance(raw, float):
        # a JSON number with a fraction or exponent is a value, cast to outs[0]'s dtype in
        # the kernel (docs/spec/BIR-JSON.md "Execution rules")
        b.slots[flag] = 1
        b.slots[value] = raw
        return
    const = get(obj, key, ctx, as_int, 0)
    if const < 0:
        raise ctx.key(key).error("Memset constant must be a non-negative integer, got %d"
                                 % const)
    rec = b.t.recs["insns"][b.info.index]
    if rec["nout"]:
        out = b.t.recs["opnds"][rec["opnd"] + rec["nin"]]
        if "dtype" in out:
            dt = b.cat.dtype_name[out["dtype"]]
            size = b.cat.dtype_size[dt]
            if const >= 1 << (8 * size):
                raise ctx.key(key).error(
                    "Memset constant %d does not fit the %d-byte item size of outs[0] (%s)"
                    % (const, size, dt))
    b.slots[name] = const


def _memset(b, info, rec, obj, ctx):
    read_params(b, "Memset", OPS["Memset"].params, obj, ctx)


# NKI's reduce_cmd spellings of EngineAccumulationType (docs/spec/nki-isa-semantics.md §1.6)
ACC_ALIASES = {"idle": "Idle", "reset": "Zero", "reduce": "Accumulate",
               "reset_reduce": "ZeroAccumulate", "load_reduce": "LoadAccumulate"}


def _acc(b, obj, ctx, default):
    check = b._checks.get("accumulator command")
    if check is None:
        check = b._checks["accumulator command"] = enum_check(
            "accumulator command", b.E["ACC"], ACC_ALIASES)
    return get(obj, ACC_KEYS, ctx, check, b.E["ACC"][default])


# The reduce ops an engine accumulator folds with (kernels/k_accum.c bs_accum_op), and
# NKI's spellings of them (nl.maximum, nl.minimum, nl.multiply).
ACC_REDUCE_OPS = ("add", "subtract", "mult", "max", "min", "abs_max", "abs_min",
                  "logical_and", "logical_or", "logical_xor")
REDUCE_OP_ALIASES = {"maximum": "max", "minimum": "min", "multiply": "mult"}


_ACC_ANY = ACC_KEYS + ("reduce_op", "reduce_init")


def _reduce_op(b, obj, ctx, default):
    check = b._checks.get("reduce op")
    if check is None:
        check = b._checks["reduce op"] = enum_check("ALU op", b.cat.alu_ops,
                                                    REDUCE_OP_ALIASES)
    return get(obj, "reduce_op", ctx, check, b.cat.alu_ops[default])


def _accumulator(b, info, rec, obj, ctx, load_index, cmd_default="Idle", op_default="add"):
    """The engine accumulator fields (kernels/kaccum.h): the command (``acc`` /
    ``reduce_cmd`` / ``accumulator_cmd``, default ``cmd_default``), ``reduce_op`` (default
    ``op_default``) and the LoadAccumulate start: ``ins[load_index]``, else the key
    ``reduce_init``."""
    p = b.slots
    for k in _ACC_ANY:
        if obj.get(k) is not None:
            break
    else:          # the common case: no accumulator keys; the slots stay 0 (Idle), as the
        if cmd_default == "Idle":   # C walker leaves them (reduce_op is read only when
            return                  # acc is not Idle)
    cmd = p["acc"] = _acc(b, obj, ctx, cmd_default)
    op = p["reduce_op"] = _reduce_op(b, obj, ctx, op_default)
    # an Idle accumulator leaves reduce_op unused: any ALU op (NKI's "bypass") is fine
    if cmd != b.E["ACC"]["Idle"] and b.cat.alu_name[op] not in ACC_REDUCE_OPS:
        raise ctx.key("reduce_op").error(
            "%s key 'reduce_op' = %r is not modelled by birsim as an accumulator reduce op "
            "(only %s are)" % (info.op, obj["reduce_op"], ", ".join(ACC_REDUCE_OPS)))
    init = get(obj, "reduce_init", ctx, as_num, None)
    p["reduce_init"] = 0.0 if init is None else float(init)
    if cmd == b.E["ACC"]["LoadAccumulate"] and init is None and rec["nin"] <= load_index:
        key = next((k for k in ACC_KEYS if obj.get(k) is not None), "acc")
        raise ctx.key(key).error(
            "%s key '%s' = %r: LoadAccumulate needs its start value: ins[%d] (an immediate, "
            "a register or one value per partition) or the key 'reduce_init'"
            % (info.op, key, obj[key], load_index))


_TSP_FORMS = ("is_tensor_tensor_scan", "is_scalar_tensor_tensor", "is_tensor_scalar_addr")


def _tensor_scalar_ptr(b, info, rec, obj, ctx):
    read_params(b, info.op, OPS[info.op].params, obj, ctx)
    on = [k for k in _TSP_FORMS if get(obj, k, ctx, as_bool, False)]
    if len(on) > 1:
        raise ctx.key(on[1]).error("TensorScalarPtr takes at most one of %s, got %s"
                                   % (", ".join(_TSP_FORMS), " and ".join(on)))
    if on:
        b.slots["form"] = b.E["TSPF"][on[0]]
    _res_negate(b, info, obj, ctx)
    if on == ["is_tensor_scalar_addr"] and b.slots["acc"] != b.E["ACC"]["Idle"]:
        key = next((k for k in ACC_KEYS if obj.get(k) is not None), "acc")
        raise ctx.key(key).error("TensorScalarPtr with is_tensor_scalar_addr (the integer "
                                 "address ALU) cannot feed the accumulator: '%s' must be "
                                 "Idle" % key)


def _stream_shuffle(b, info, rec, obj, ctx):
    mctx = ctx.key("mask")
    mask = int_list(get(obj, ("mask", "shuffle_mask"), ctx, as_list, what=info.op), mctx, 0, 255)
    if len(mask) != 32 or any(31 < m < 255 for m in mask):
        raise mctx.error("StreamShuffle mask must be 32 partition numbers 0..31 or 255, got %s"
                         % mask)
    b.ilist(rec, mask)


def _loop_lb(b, info, slot, name, ctx):
    """The lower bound of the enclosing static Loop whose axis is ``slot``."""
    for li in b.ld.insns:
        if li is not None and li.op in ("Loop", "DynamicForLoop") and \
                Slots(b.t.recs["insns"][li.index], b.cat.params[li.op], li.op)["axis"] == slot:
            if li.op != "Loop":
                raise ctx.error("%s reduce axis '%s' belongs to a DynamicForLoop (only static "
                                "Loop axes are modelled)" % (info.op, name))
            return get(li.obj["LoopAxis"], "lb", li.ctx.key("LoopAxis"), as_int, 0)
    raise ctx.error("%s reduce axis '%s' names no loop" % (info.op, name))  # not reached


def _tonga_reduce(b, info, rec, obj, ctx):
    p = b.slots
    read_params(b, info.op, OPS[info.op].params, obj, ctx)      # op, is_first_reduce
    enclosing = {name: slot for _, name, slot in info.loops if name is not None}
    terms, c = [], 0
    for name, nctx in b.names(obj, "reduce_axes", ctx, default=[]):
        if name not in enclosing:
            raise nctx.error("%s reduce axis '%s' is not an enclosing loop's axis (enclosing: "
                             "%s)" % (info.op, name, ", ".join(sorted(enclosing)) or "none"))
        c -= _loop_lb(b, info, enclosing[name], name, nctx)
        terms.append({"axis": name, "coef": 1})
    if terms:       # sum of (axis - lb) over reduce_axes: 0 exactly on the first trip
        p["trip"] = b.expr({"terms": terms, "c": c}, ctx.key("reduce_axes"))


def _iota(b, info, rec, obj, ctx):
    base = obj.get("base")
    if isinstance(base, dict):
        b.slots["base_expr"] = b.expr(base, ctx.key("base"))
    elif base is not None:
        b.slots["base"] = as_int(base, ctx.key("base"))
    if info.op == "Iota":
        b.slots["channel_multiplier"] = get(obj, "channel_multiplier", ctx, as_int, 0)
    else:                               # TensorScalarAffineSelect: its first row
        read_params(b, info.op, OPS[info.op].params[:1], obj, ctx)
    flat = []
    for k, pair in enumerate(get(obj, "pattern", ctx, as_list, [])):
        pctx = ctx.key("pattern", k)
        pair = int_list(pair, pctx)
        if len(pair) != 2 or pair[1] < 1:
            raise pctx.error("expected a [step, num] pair with num >= 1, got %s" % pair)
        flat += pair
    b.ilist(rec, flat)


# Comparison spellings: AluOpType names, NKI's (nl.equal, nl.greater_equal, ...) and KLR's
# older comparator enum (docs/spec/nki-isa-semantics.md §3.21-3.22).
CMP_ALIASES = {"equal": "is_equal", "greater": "is_gt", "greater_equal": "is_ge",
               "less": "is_lt", "less_equal": "is_le", "Eq": "is_equal", "NotEq": "not_equal",
               "GreaterThan": "is_gt", "GreaterThanEq": "is_ge", "LessThan": "is_lt",
               "LessThanEq": "is_le"}
CMPS = ("is_equal", "not_equal", "is_gt", "is_ge", "is_lt", "is_le")


def _compare(b, obj, key, ctx, default):
    table = {n: b.cat.alu_ops[n] for n in CMPS}
    check = enum_check("comparison (%s)" % ", ".join(CMPS), table, CMP_ALIASES)
    return get(obj, key, ctx, check, table[default])


def _copy_predicated(b, info, rec, obj, ctx):
    """The rows: reverse_pred and the accumulator (NKI select_reduce: reduce_op max),
    but reduce_op bypass (opcodes.OPS slow_values: the walker declines it)."""
    rows = OPS[info.op].params
    if obj.get("reduce_op") == "bypass":     # NKI's "no reduce": only without a command
        read_params(b, info.op, rows[:1], obj, ctx)
        if _acc(b, obj, ctx, "Idle") != b.E["ACC"]["Idle"]:
            raise ctx.key("reduce_op").error(
                "CopyPredicated key 'reduce_op' = 'bypass' cannot feed the accumulator "
                "(its command is not Idle)")
        return
    read_params(b, info.op, rows, obj, ctx)


def _affine_select(b, info, rec, obj, ctx):
    _iota(b, info, rec, obj, ctx)       # base, channel_multiplier (row), pattern
    read_params(b, info.op, OPS[info.op].params[1:], obj, ctx)    # compare_op, fill_value


#: The dtypes CompareAndBranch compares at (docs/spec/control-flow-sync.md §2.2: the scalar widths up to 32 bits).
_CAB_DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "float32")


def _compare_and_branch(b, info, rec, obj, ctx):
    if rec["nin"] < 2:
        raise ctx.key("ins").error("CompareAndBranch needs 2 ins (left side, right side), "
                                   "got %d" % rec["nin"])
    table = b.E["CMP"]
    b.slots["comp_op"] = get(obj, "comp_op", ctx, enum_check("comp_op", table), what=info.op)
    # compared at the left side's dtype, one of the scalar widths (docs/spec/control-flow-sync.md §2.2; else FATAL)
    left = b.t.recs["opnds"][rec["opnd"]]
    dt = b.cat.dtype_name.get(left.get("dtype"))
    if dt not in _CAB_DTYPES:
        lctx = ctx.key("ins", 0)
        if isinstance(obj["ins"][0], dict) and obj["ins"][0].get("dtype") is not None:
            lctx = lctx.key("dtype")
        raise lctx.error("CompareAndBranch compares at its left side's dtype, one of %s; "
                         "ins[0] is %s" % (", ".join(_CAB_DTYPES), dt))
    # ...IMM ops compare with an immediate, ...REG ops with a register (docs/spec/control-flow-sync.md §2.1).
    right = obj["ins"][1].get("kind") if isinstance(obj["ins"][1], dict) else None
    want_reg = b.slots["comp_op"] >= table["IS_LTREG"]
    if (right in ("register_access", "register")) != want_reg:
        raise ctx.key("ins", 1).error("%s compares with %s, got a %s operand"
                                      % (obj["comp_op"], "a register" if want_reg
                                         else "an imm_value", right))
    rec["target"] = b.block(get(obj, "on_true", ctx, what=info.op), ctx.key("on_true"))
    rec["target2"] = b.block(get(obj, "on_false", ctx, what=info.op), ctx.key("on_false"))


def _branch(b, info, rec, obj, ctx):
    rec["target"] = b.block(get(obj, "target", ctx, what=info.op), ctx.key("target"))


def _loop(b, info, rec, obj, ctx):
    actx = ctx.key("LoopAxis")
    axis = obj["LoopAxis"]
    p = b.slots
    p["lb"] = get(axis, "lb", actx, as_int, 0)
    p["ub"] = get(axis, "ub", actx, as_int, what="LoopAxis")
    p["stride"] = get(axis, "stride", actx, as_int, 1)
    # docs/spec/control-flow-sync.md §1.1: the zero-trip guard (lb >= ub) comes before any step, and an axis with
    # lb = ub = stride = 0 runs the body once; only a loop that never ends is refused
    if p["stride"] <= 0 and p["lb"] < p["ub"]:
        raise actx.key("stride").error("Loop stride must be > 0 when lb < ub (it would never "
                                       "end), got %d" % p["stride"])
    p["parallel"] = int(get(obj, "isParallel", ctx, as_bool, False))


def _dynamic_for_loop(b, info, rec, obj, ctx):
    actx = ctx.key("DynamicForLoopAxis")
    axis = obj["DynamicForLoopAxis"]
    p = b.slots
    p["lb"] = b.expr(axis.get("lb", 0) if axis.get("lb") is not None else 0, actx.key("lb"))
    stride = axis.get("stride")
    stride = 1 if stride is None else stride
    const = constant_value(stride)
    if const is not None and const <= 0:
        raise actx.key("stride").error("DynamicForLoop stride must be > 0, got %d" % const)
    p["stride"] = b.expr(stride, actx.key("stride"))
    ub = get(axis, "ub", actx, what="DynamicForLoopAxis")
    p["ub_const"], p["ub_coeff"], p["ub_reg"] = dynamic_ub(ub, actx.key("ub"), b)


def _do_while(b, info, rec, obj, ctx):
    cond = get(obj, "cond", ctx, as_dict, what=info.op)
    cctx = ctx.key("cond")
    kind = cond.get("kind", "IntRuntimeValueKind")
    if kind != "IntRuntimeValueKind":
        raise cctx.key("kind").error("DoWhile cond must be an IntRuntimeValueKind, got %r"
                                     % (kind,))
    b.slots["cond_reg"] = b.reg(get(cond, "regref", cctx, what="DoWhile cond"),
                                cctx.key("regref"))


def _group_reset(b, info, rec, obj, ctx):
    """The row (sema_group, required by the walker: it declines an instruction without
    one), else a warning."""
    if obj.get("sema_group") is None:
        b.ld.warn("reset-no-group", "%s: GroupResetSemaphores without sema_group resets "
                  "nothing (birsim's reading until real dumps show otherwise; README choices)"
                  % ctx.path)
        return
    read_params(b, info.op, OPS[info.op].params, obj, ctx)


def _drain(b, info, rec, obj, ctx):
    """No rows: is_reset_sema (the walker declines it) warns."""
    if get(obj, "is_reset_sema", ctx, as_bool, False):
        b.ld.warn("drain-reset", "%s: Drain's is_reset_sema is ignored (its meaning is "
                  "unknown; README choices)" % ctx.path)


def _dma_trigger(b, info, rec, obj, ctx):
    queue = b.queue(get(obj, "queue", ctx, what=info.op), ctx.key("queue"))
    b.slots["cursor"] = b.ld.shared.ntriggers
    b.ld.shared.ntriggers += 1
    b.slots["queue"] = b.ld.queue0 + queue
    blocks = b.names(obj, "dma_blocks", ctx, [])
    b.ilist(rec, [b.dma_block(n, c, queue, obj.get("name")) for n, c in blocks])
    if len(blocks) > 1 and _compiler_queue(b, queue):
        b.ld.warn("trigger-blocks", "a DMATrigger of a compiler 'queues' queue lists %d DMA "
                  "blocks: birsim fires one per run of the trigger, round-robin (whether the "
                  "compiler fires one or all is unknown; README choices)" % len(blocks))


def _compiler_queue(b, queue):
    return queue in b.ld.compiler_queues


def _queue_instance(b, info, rec, obj, ctx):
    queue = b.queue(get(obj, "queue", ctx, what=info.op), ctx.key("queue"))
    b.slots["queue"] = b.ld.queue0 + queue
    if info.op == "SwitchQueueInstance":
        b.slots["no_rearm"] = int(get(obj, "no_rearm", ctx, as_bool, False))
    names = b.names(obj, "instance", ctx, ())
    if names:
        b.ilist(rec, [b.dma_block(n, c, queue) for n, c in names])
    else:
        _all_blocks(b, rec, queue)


def _all_blocks(b, rec, queue):
    """rec's list := every DMA block of the queue, as one ipool range per queue shared by
    every instruction that names no instance (a copy each made the tables quadratic: a
    queue of n blocks reset n times held n * n entries; the core only reads the range)."""
    blocks = b.ld.queue_blocks[queue]
    if blocks:
        got = b.ld.queue_all.get(queue)
        if got is None:
            got = b.ld.queue_all[queue] = b.t.ilist(blocks)
        rec["list"], rec["nlist"] = got


def _dma_block(b, info, rec, obj, ctx):
    trig = obj.get("dma_trigger")
    if trig is not None:
        tctx = ctx.key("dma_trigger")
        if as_name(trig, tctx) not in b.ld.trigger_names[info.func.index]:
            raise tctx.error("unknown DMATrigger '%s' (not a DMATrigger instruction of "
                             "function '%s')" % (trig, info.func.name))


def _call(b, info, rec, obj, ctx):
    if obj.get("target") is None:
        # docs/spec/control-flow-sync.md §2.4: a call without a callee is a no-op (its waits and updates still act);
        # with nothing to bind, arguments would be a mistake
        if get(obj, "arguments", ctx, as_dict, {}):
            raise ctx.key("arguments").error("a Call without a 'target' (a no-op) binds no "
                                             "arguments")
        return
    callee = b.func(get(obj, "target", ctx, what=info.op), ctx.key("target"))
    rec["target"] = callee.index
    args = get(obj, "arguments", ctx, as_dict, {})
    pairs = []
    for k, v in args.items():
        actx = ctx.key("arguments", k)
        s_callee = b.set(k, actx, callee)
        s_caller = b.set(v, actx)
        b.single_loc(s_callee, actx, "bound tensor set")
        b.single_loc(s_caller, actx, "bound tensor set")
        pairs.append((s_callee, s_caller))
    b.bind(rec, pairs)


def _nki_kernel(b, info, rec, obj, ctx):
    name = obj.get("func")
    if name is None:
        raise ctx.error("missing required key 'func' of NKIKernel: " + NKI_FUNC_MESSAGE,
                        code=NKI_FUNC_CODE)
    if not isinstance(name, str) or not b.ld.func_by_name.get(name) \
            or not b.ld.func_by_name[name].nki:
        raise ctx.key("func").error("unknown NKI function %r (not in nki_functions): %s"
                                    % (name, NKI_FUNC_MESSAGE), code=NKI_FUNC_CODE)
    callee = b.ld.func_by_name[name]
    rec["target"] = callee.index
    pairs = []
    for key, kinds in (("func_args", b.io_kinds[0]), ("func_outs", b.io_kinds[1])):
        params = [s for s in range(b.t.recs["funcs"][callee.index]["set0"],
                                   b.t.recs["funcs"][callee.index]["set0"]
                                   + b.t.recs["funcs"][callee.index]["nset"])
                  if b.ld.sets[s]["kind"] in kinds]
        names = b.names(obj, key, ctx, [])
        if len(names) != len(params):
            raise ctx.key(key).error("%d tensor sets given for the %d %s of NKI function '%s'"
                                     % (len(names), len(params), "inputs" if key == "func_args"
                                        else "outputs", name))
        for p, (n, c) in zip(params, names):
            s = b.set(n, c)
            b.single_loc(s, c, "bound tensor set")
            b.single_loc(p, c, "bound tensor set")
            pairs.append((p, s))
    b.bind(rec, pairs)


def _custom(b, info, rec, obj, ctx):
    t = b.t
    if info.op == "CustomOp":
        rec["str"] = t.string(get(obj, "opFunctionName", ctx, as_str, what=info.op))
        attrs = {}
        shapes = b.shapes(obj, "srcsShape", ctx) + b.shapes(obj, "dstsShape", ctx)
    else:
        rec["str"] = t.string(get(obj, "kernel_name", ctx, as_str, what=info.op))
        kattrs = get(obj, "kernel_attrs", ctx, as_dict, {})
        # the listed record attributes only: a dump's debug, origin, engine_id,
        # scheduled_start/_end... never reach a kernel (docs/spec/BIR-JSON.md "kernel_sim")
        attrs = {k: obj[k] for k in BIRKERNEL_ATTRS if obj.get(k) is not None}
        attrs.update(kattrs)
        attrs["kernel_attrs"] = kattrs
        shapes = b.shapes(obj, "srcs_shape", ctx) + b.shapes(obj, "dsts_shape", ctx)
    for key, count, side in ((("srcsShape", "srcs_shape"), rec["nin"], "ins"),
                             (("dstsShape", "dsts_shape"), rec["nout"], "outs")):
        key = key[info.op != "CustomOp"]
        given = obj.get(key)
        if isinstance(given, list) and len(given) != count:
            raise ctx.key(key).error("%s has %d shapes for the %d %s of %s"
                                     % (key, len(given), count, side, info.op))
    rec["str2"] = t.string(json.dumps(attrs, separators=(",", ":")))
    b.ilist(rec, shapes)


# ---- data movement by index, randomness, collectives (issue 10) ------------------

_INDIRECT_DIMS = {"W": 0, "Z": 1, "Y": 2, "X": 3}


def _generic_indirect(b, info, rec, obj, ctx):
    """GenericIndirectLoad/Save (vm/gather.c): the rows (oob_is_err, op), then
    indirect_dims (the walker declines it)."""
    read_params(b, info.op, OPS[info.op].params, obj, ctx)
    dims = []
    for k, d in enumerate(get(obj, "indirect_dims", ctx, as_list, [])):
        if isinstance(d, str) and d in _INDIRECT_DIMS:
            dims.append(_INDIRECT_DIMS[d])
        else:
            dims.append(as_int(d, ctx.key("indirect_dims", k), 0, 3))
    b.ilist(rec, dims)


def _rand(b, info, rec, obj, ctx):
    """The rows (algorithm, distribution, num_steps), then params (the walker declines
    it; none: flist/nflist stay 0, as the walker leaves them)."""
    read_params(b, info.op, OPS[info.op].params, obj, ctx)
    params = get(obj, "params", ctx, as_list, [])
    if params:
        rec["flist"], rec["nflist"] = b.t.flist(
            [as_num(v, ctx.key("params", k)) for k, v in enumerate(params)])


def _rank_groups(b, obj, key, ctx):
    flat = []
    for k, g in enumerate(get(obj, key, ctx, as_list, [])):
        ranks = int_list(g, ctx.key(key, k), lo=0)
        flat += [len(ranks)] + ranks
    return flat


def _first_key(obj, keys):
    """The first of ``keys`` (aliases) present in ``obj``, else the first."""
    return next((k for k in keys if obj.get(k) is not None), keys[0])


def _target_pairs(obj, keys, kind, ctx):
    """The (source, target) pairs of a Permute / PermuteReduce, flattened; each rank is
    at most one pair's source and one pair's target (a ProgramError naming the pair).
    ``keys``: the key and its aliases."""
    key = _first_key(obj, keys)
    pairs = get(obj, key, ctx, as_list, None)
    if pairs is None:
        raise ctx.error("CollectiveCompute kind %s needs 'src_target_pairs' (a list of "
                        "[source, target] ranks)" % kind)
    flat, sources, targets = [], set(), set()
    for k, pair in enumerate(pairs):
        pctx = ctx.key(key, k)
        pair = int_list(pair, pctx, lo=0)
        if len(pair) != 2:
            raise pctx.error("a src_target_pairs entry is [source, target], got %s" % pair)
        if pair[0] in sources or pair[1] in targets:
            raise pctx.error("rank %d is already the %s of another pair"
                             % ((pair[0], "source") if pair[0] in sources else (pair[1], "target")))
        sources.add(pair[0])
        targets.add(pair[1])
        flat += pair
    return flat


def _collective(b, info, rec, obj, ctx):
    """CollectiveCompute: the rows (kind, op), then replica_groups and the Permute kinds'
    pairs (the walker declines them)."""
    p = b.slots
    read_params(b, info.op, OPS[info.op].params, obj, ctx)
    groups = _rank_groups(b, obj, "replica_groups", ctx)
    kinds = b.E["COLLKIND"]
    paired = {kinds["Permute"]: "Permute", kinds["PermuteReduce"]: "PermuteReduce"}
    kind = paired.get(p["kind"])
    pairs = [] if kind is None else _target_pairs(
        obj, ("src_target_pairs", "source_target_pairs"), kind, ctx)
    p["npairs"] = len(pairs) // 2
    b.ilist(rec, groups + pairs)


def _ring_expr(b, obj, keys, slot, ctx):
    """Slot ``slot`` := the expression at the first of ``keys`` present (absent: left
    unused, read as 0); returns its constant value (None when it is not a constant)."""
    key = _first_key(obj, keys)
    if obj.get(key) is None:
        return 0
    b.slots[slot] = b.expr(obj[key], ctx.key(key))
    return constant_value(obj[key])


def _cur_rank(b, info, rec, obj, ctx):
    """GetCurProcessingRankID: iter_id and channel_id (integers or affine expressions of
    loop axes and registers) and the replica groups of the ring."""
    values = {"iter": _ring_expr(b, obj, ("iter_id", "iteration_id"), "iter", ctx),
              "channel": _ring_expr(b, obj, ("channel_id",), "channel", ctx)}
    b.ilist(rec, _rank_groups(b, obj, "replica_groups", ctx))
    if values["iter"] != 0:
        b.ld.warn("cur-rank-ring", "%s: GetCurProcessingRankID at a ring step other than 0 "
                  "reads birsim's ring, the replica group in its order (member g receives "
                  "from member g - 1); the runtime's per-arch rank table is not known"
                  % ctx.path)
    if values["channel"] != 0:
        b.ld.warn("cur-rank-channel", "%s: GetCurProcessingRankID channel_id is read as "
                  "running the same ring as channel 0 (how channels change the ring is not "
                  "known)" % ctx.path)


def _device_print(b, info, rec, obj, ctx):
    prefix = get(obj, ("prefix", "print_prefix"), ctx, as_str, None)
    if prefix is not None:
        rec["str"] = b.t.string(prefix)


def _matmult_sparse(b, info, rec, obj, ctx):
    """MatmultSparse: the accumulation flags (its row); ``compress_ratio`` must be 4
    (_keys.UNMODELLED). The operand layout is birsim's reading (k_sparse.c, README
    choices): warned (opcodes.OPS warns)."""
    _matmult(b, info, rec, obj, ctx)
    b.ld.warn("matmult-sparse-reading", "%s: MatmultSparse's tag layout (in[2] int16 [32, M], "
              "nibble q of word [g, m] places active row 32q+g at dense row g+32(d//4)+128(d%%4) "
              "of in[0] read as [128, 4, N]) is birsim's reading; no source pins it (README "
              "choices)" % ctx.path)


def _topk(b, info, rec, obj, ctx):
    """TopK (NKI topk): ``n`` active elements per 16-partition snake (absent: the whole
    snake); ``sorted`` is accepted and changes nothing (birsim always writes ascending)."""
    read_params(b, info.op, OPS[info.op].params, obj, ctx)     # n
    get(obj, "sorted", ctx, as_bool, False)
    b.ld.warn("topk-reading", "%s: TopK's output layout (the K best of each 16-partition "
              "snake in ascending order, written in the snake layout), its tie-break (equal "
              "values by ascending index) and the untouched slots are birsim's reading of "
              "NKI topk, not pinned by any source (README choices)" % ctx.path)


# ---- the handed-back opcodes' shortcuts ----------------------------------------------
#
# A handed-back instruction (fastload.HANDBACK) has its handler run alone in pass 2. For
# the values real programs carry, the handler's work is a few lookups; these shortcuts do
# it without the handler's contexts, Slots and checkers: each returns True having written
# exactly what its handler writes, or False having written nothing (an unusual value: a
# float for an integer, a missing key, an unknown name...), and then the handler runs
# and reports any error. tests/load/test_load_backfast.py compares every shortcut with
# its handler (``BACK_FAST = False``) on the values each one takes and each it declines.

#: Off: every handed-back instruction is built by its handler (the specification).
BACK_FAST = True


def _name_ok(v):
    """``as_name(v)`` would return ``v`` (no error)."""
    if type(v) is not str or not v or "\0" in v:
        return False
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _bool_or(v, default):
    """``int(get(.., as_bool, default))`` for a value ``v`` (None: absent), or None."""
    if v is None:
        return default
    if v is True or v is False or (type(v) is int and (v == 0 or v == 1)):
        return int(v)
    return None


def _i64(v):
    return type(v) is int and _I64_MIN <= v <= _I64_MAX


def _loop_fast(b, info, rec, obj):
    axis = obj["LoopAxis"]                  # pass 1 read it as an object
    lb, ub, stride = axis.get("lb"), axis.get("ub"), axis.get("stride")
    lb = 0 if lb is None else lb
    stride = 1 if stride is None else stride
    if not (_i64(lb) and _i64(ub) and _i64(stride)) or (stride <= 0 and lb < ub):
        return False
    parallel = _bool_or(obj.get("isParallel"), 0)
    if parallel is None:
        return False
    i = rec["i"]
    lay = b.cat.params["Loop"]
    i[lay["lb"][1]], i[lay["ub"][1]], i[lay["stride"][1]] = lb, ub, stride
    i[lay["parallel"][1]] = parallel
    return True


def _const_expr(b, value):
    """``b.expr(value)`` of an integer constant."""
    exprs = b.t.exprs
    index = len(exprs)
    exprs += (2, X_CONST, value)
    return index


def _dynamic_for_loop_fast(b, info, rec, obj):
    axis = obj["DynamicForLoopAxis"]        # pass 1 read it as an object
    lb, stride, ub = axis.get("lb"), axis.get("stride"), axis.get("ub")
    lb = 0 if lb is None else lb
    stride = 1 if stride is None else stride
    if not (_i64(lb) and _i64(stride)) or stride <= 0 or type(ub) is not dict \
            or ub.get("kind", "AffExprKind") != "AffExprKind":
        return False
    terms = ub.get("terms")
    if type(terms) is not list or len(terms) != 1 or type(terms[0]) is not dict:
        return False
    term = terms[0]
    idx = term.get("idx")
    if type(idx) is not dict or idx.get("kind") != "IntRuntimeValueKind":
        return False
    coeff = term.get("coeff")
    if coeff is None:
        coeff = term.get("coef")
    coeff = 1 if coeff is None else coeff
    c = ub.get("c")
    c = 0 if c is None else c
    name = idx.get("regref")
    reg = info.func.regs.get(name) if _name_ok(name) else None
    if reg is None or not (_i64(coeff) and _i64(c)):
        return False
    lay = b.cat.params["DynamicForLoop"]
    rec[lay["lb"][0]][lay["lb"][1]] = _const_expr(b, lb)
    rec[lay["stride"][0]][lay["stride"][1]] = _const_expr(b, stride)
    i = rec["i"]
    i[lay["ub_const"][1]], i[lay["ub_coeff"][1]], i[lay["ub_reg"][1]] = c, coeff, reg
    return True


def _do_while_fast(b, info, rec, obj):
    cond = obj.get("cond")
    if type(cond) is not dict or cond.get("kind", "IntRuntimeValueKind") \
            != "IntRuntimeValueKind":
        return False
    name = cond.get("regref")
    reg = info.func.regs.get(name) if _name_ok(name) else None
    if reg is None:
        return False
    rec["i"][b.cat.params["DoWhile"]["cond_reg"][1]] = reg
    return True


def _queue_of(b, obj):
    """``b.queue(obj["queue"])`` when that is a known queue's name, else None."""
    name = obj.get("queue")
    return b.ld.queues.get(name) if _name_ok(name) else None


def _names_of(obj, key):
    """``[n for n, _ in b.names(obj, key, ..)]`` when each is a name, else None; absent:
    ()."""
    v = obj.get(key)
    if v is None:
        return ()
    v = [v] if type(v) is str else v
    if type(v) is not list:
        return None
    for n in v:
        if not _name_ok(n):
            return None
    return v


def _dma_blocks_of(b, names, queue):
    """``[b.dma_block(n, .., queue) for n in names]`` when each names one block of the
    queue, else None."""
    blocks = b.ld.dma_blocks
    out = []
    for n in names:
        found = blocks.get((queue, n))
        if not found or len(found) != 1:
            return None
        out.append(found[0])
    return out


def _dma_trigger_fast(b, info, rec, obj):
    queue = _queue_of(b, obj)
    names = _names_of(obj, "dma_blocks") if queue is not None else None
    if names is None or (len(names) > 1 and _compiler_queue(b, queue)):
        return False
    blocks = _dma_blocks_of(b, names, queue)
    if blocks is None:
        return False
    lay, i, shared = b.cat.params["DMATrigger"], rec["i"], b.ld.shared
    i[lay["cursor"][1]] = shared.ntriggers
    shared.ntriggers += 1
    i[lay["queue"][1]] = b.ld.queue0 + queue
    b.ilist(rec, blocks)
    return True


def _queue_instance_fast(b, info, rec, obj):
    queue = _queue_of(b, obj)
    if queue is None:
        return False
    rearm = 0
    if info.op == "SwitchQueueInstance":
        rearm = _bool_or(obj.get("no_rearm"), 0)
        if rearm is None:
            return False
    names = _names_of(obj, "instance")
    if names is None:
        return False
    blocks = _dma_blocks_of(b, names, queue) if names else None
    if names and blocks is None:
        return False
    lay, i = b.cat.params[info.op], rec["i"]
    i[lay["queue"][1]] = b.ld.queue0 + queue
    if info.op == "SwitchQueueInstance":
        i[lay["no_rearm"][1]] = rearm
    if names:
        b.ilist(rec, blocks)
    else:
        _all_blocks(b, rec, queue)
    return True


def _one_loc_set(b, func, name):
    """``b.set(name, .., func)`` when a tensor set of one location, else None."""
    s = func.sets.get(name) if _name_ok(name) else None
    if s is None or b.t.recs["sets"][s]["nloc"] != 1:
        return None
    return s


def _call_fast(b, info, rec, obj):
    target, args = obj.get("target"), obj.get("arguments")
    if type(args) is not dict and args is not None:
        return False
    if target is None:
        return not args                     # a no-op binding nothing
    callee = b.ld.func_by_name.get(target) if _name_ok(target) else None
    if callee is None:
        return False
    pairs = []
    for k, v in (args or {}).items():
        s_callee, s_caller = _one_loc_set(b, callee, k), _one_loc_set(b, info.func, v)
        if s_callee is None or s_caller is None:
            return False
        pairs += (s_callee, s_caller)
    rec["target"] = callee.index
    b.ilist(rec, pairs)
    return True


def _nki_kernel_fast(b, info, rec, obj):
    name = obj.get("func")
    callee = b.ld.func_by_name.get(name) if type(name) is str else None
    if not callee or not callee.nki:
        return False
    frec = b.t.recs["funcs"][callee.index]
    sets = b.ld.sets
    pairs = []
    for key, kinds in (("func_args", b.io_kinds[0]), ("func_outs", b.io_kinds[1])):
        params = [s for s in range(frec["set0"], frec["set0"] + frec["nset"])
                  if sets[s]["kind"] in kinds]
        names = _names_of(obj, key)
        if names is None or len(names) != len(params):
            return False
        for p, n in zip(params, names):
            s = _one_loc_set(b, info.func, n)
            if s is None or b.t.recs["sets"][p]["nloc"] != 1:
                return False
            pairs += (p, s)
    rec["target"] = callee.index
    b.ilist(rec, pairs)
    return True


def _shapes_of(obj, key, count):
    """``b.shapes(obj, key, ..)`` when each shape is a list of integers >= 0 and a list
    of them has ``count``, else None."""
    v = obj.get(key)
    if v is None:
        return []
    if type(v) is not list or len(v) != count:
        return None
    out = []
    for s in v:
        if type(s) is not list:
            return None
        for x in s:
            if type(x) is not int or not 0 <= x <= _I64_MAX:
                return None
        out.append(len(s))
        out += s
    return out


_BIRKERNEL_ATTRS = frozenset(BIRKERNEL_ATTRS)
_NO_ATTRS = json.dumps({}, separators=(",", ":"))
_NO_KERNEL_ATTRS = json.dumps({"kernel_attrs": {}}, separators=(",", ":"))


def _custom_fast(b, info, rec, obj):
    custom = info.op == "CustomOp"
    name = obj.get("opFunctionName" if custom else "kernel_name")
    if type(name) is not str or not name.isascii():
        return False
    keys = ("srcsShape", "dstsShape") if custom else ("srcs_shape", "dsts_shape")
    srcs = _shapes_of(obj, keys[0], rec["nin"])
    dsts = _shapes_of(obj, keys[1], rec["nout"]) if srcs is not None else None
    if dsts is None:
        return False
    if custom:
        attrs = _NO_ATTRS
    else:
        kattrs = obj.get("kernel_attrs")
        if kattrs is None or (type(kattrs) is dict and not kattrs):
            if not _BIRKERNEL_ATTRS.isdisjoint(obj):
                for k in BIRKERNEL_ATTRS:
                    if obj.get(k) is not None:
                        return False
            attrs = _NO_KERNEL_ATTRS
        else:
            return False
    t = b.t
    rec["str"] = t.string(name)
    rec["str2"] = t.string(attrs)
    b.ilist(rec, srcs + dsts)
    return True


#: opcode -> the shortcut of its handler for a handed-back instruction (above)
_BACK_FAST = {"Loop": _loop_fast, "DynamicForLoop": _dynamic_for_loop_fast,
              "DoWhile": _do_while_fast, "DMATrigger": _dma_trigger_fast,
              "SwitchQueueInstance": _queue_instance_fast,
              "ResetQueueInstance": _queue_instance_fast, "Call": _call_fast,
              "NKIKernel": _nki_kernel_fast, "CustomOp": _custom_fast,
              "BIRKernel": _custom_fast}


#: opcode -> its handler, when that handler reads the opcode's parameter rows first and then
#: acts only on keys of _keys.SCHEMA that no row reads (an instruction without such keys
#: loads as the rows say: the C walker takes those and declines the others).
PARAMS_FIRST = {"Activation": _activation, "TensorScalar": _tensor_scalar,
                "Matmult": _matmult_fields,
                "DMACopy": _dma_copy, "Memset": _memset,
                "MatmultMx": _matmult, "MatmultSparse": _matmult_sparse,
                "TensorScalarPtr": _tensor_scalar_ptr,
                "DMADescriptorCopy": _dma_descriptor, "DMADescriptorCCE": _dma_descriptor,
                "DMADescriptorTranspose": _dma_descriptor,
                "DMADescriptorReplicate": _dma_descriptor,
                "CopyPredicated": _copy_predicated,
                "TensorScalarAffineSelect": _affine_select,
                "StreamShuffle": _stream_shuffle, "Iota": _iota,
                "TongaReduceMacroSymbolic": _tonga_reduce,
                "GenericIndirectLoad": _generic_indirect,
                "GenericIndirectSave": _generic_indirect,
                "Rand": _rand, "CollectiveCompute": _collective, "TopK": _topk,
                "Drain": _drain, "DevicePrint": _device_print,
                "GetCurProcessingRankID": _cur_rank, "GroupResetSemaphores": _group_reset}

_HANDLERS = {
    "TensorTensor": _declared,
    "TensorScalar": _tensor_scalar,
    "TensorScalarPtr": _tensor_scalar_ptr,
    "TensorScalarCache": _declared,
    "MatchReplace": _declared,
    "StreamShuffle": _stream_shuffle,
    "MaxIndexAndMatchReplace": _declared,
    "TensorReduce": _declared,
    "Activation": _activation,
    "Exponential": _declared,
    "Matmult": _matmult_fields,
    "MatmultSparse": _matmult_sparse,
    "MatmultMx": _matmult,
    "DMACopy": _dma_copy,
    "DMADescriptorCopy": _dma_descriptor,
    "DMADescriptorCCE": _dma_descriptor,
    "DMADescriptorTranspose": _dma_descriptor,
    "DMADescriptorReplicate": _dma_descriptor,
    "Memset": _memset,
    "Iota": _iota,
    "CopyPredicated": _copy_predicated,
    "TensorScalarAffineSelect": _affine_select,
    "RangeSelect": _declared,
    "BNStats": _declared,
    "BNBackprop": _declared,
    "Pool": _declared,
    "TongaReduceMacroSymbolic": _tonga_reduce,
    "BNBackprop2": _declared,
    "RegisterAlu": _declared,
    "CompareAndBranch": _compare_and_branch,
    "UnconditionalBranch": _branch,
    "Loop": _loop,
    "DynamicForLoop": _dynamic_for_loop,
    "DoWhile": _do_while,
    "GroupResetSemaphores": _group_reset,
    "Drain": _drain,
    "DMATrigger": _dma_trigger,
    "SwitchQueueInstance": _queue_instance,
    "ResetQueueInstance": _queue_instance,
    "DMABlock": _dma_block,
    "Call": _call,
    "NKIKernel": _nki_kernel,
    "CustomOp": _custom,
    "BIRKernel": _custom,
    "IndirectLoad": _declared,
    "IndirectSave": _declared,
    "IndirectSaveAccumulate": _declared,
    "GenericIndirectLoad": _generic_indirect,
    "GenericIndirectSave": _generic_indirect,
    "Gather": _declared,
    "IndirectCopy": _declared,
    "TensorCopyDynamicSrc": _declared,
    "TensorCopyDynamicDst": _declared,
    "Rand": _rand,
    "Dropout": _declared,
    "DevicePrint": _device_print,
    "NonzeroWithCount": _declared,
    "Nonzero": _declared,
    "TopK": _topk,
    "LocalGather": _declared,
    "CollectiveCompute": _collective,
    "CollectiveSend": _declared,
    "CollectiveRecv": _declared,
    "GetCurProcessingRankID": _cur_rank,
}
