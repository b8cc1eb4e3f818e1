"""The loader's C fast path (csrc/py/fastload.c): its configuration, built from the
single sources the Python path reads.

The Python loader is the specification. The C walker takes an instruction only when it
reads every key the instruction carries exactly as the Python path would, and declines
it otherwise (the Python path then loads it and reports any error with its JSON path):

- opcodes: those (every one has a row in ``opcodes.OPS``: its keys are known) whose
  handler in ``insns._HANDLERS`` is none or the declared-parameter handler ``_declared`` (their
  parameters are the ``params`` rows of ``OPS[op]``, placed in the slots of the BS_PARAM rows
  of bs_ops.def; the row kinds C reads: enum/ALU/activation tables, bool, inverted bool,
  number, bounded integer, the engine accumulator (or its command alone), comparisons,
  positive counts, opcode constants, integer lists, Matmult's accumulation flags and
  Memset's raw-or-value constant: a JSON float, or an integer within int64 fitting outs[0]'s item size) or
  one of ``insns.PARAMS_FIRST`` (the rows, then only keys of the row's ``keys``
  no row reads: the walker declines every instruction carrying one), and that pass 1
  gives no special treatment (terminators and DMA blocks; DMACopy in a function's
  blocks has none: the walker never runs in ``dma_queues`` blocks), or one of
  :data:`HANDBACK` (loops, DMA triggers, queue instances, calls, kernels: the walker
  reads their generic keys and hands them back, pass 1 places their blocks and pass 2
  runs their handler alone); an
  instruction with more ``ins`` or ``outs`` than the row's ``operands`` allow declines (the
  Python path refuses it);
  an opcode that gets a handler of its own leaves the fast path by itself; an opcode
  whose row ``warns`` has the first instruction of a module declined (the Python path
  warns there) and the later ones taken; a row's ``slow_values`` are left out of its
  table (declined); an ``ilist`` row's list (of a fixed length without the integers
  of a hole: StreamShuffle's mask) or a ``pairs`` row's list of [x, y] pairs (Iota's
  pattern, flattened) goes to ``Tables.fast_lists``, placed in ipool by pass 2 at its
  instruction's turn (``_insns.build_all``);
- keys, per opcode: the generic ones the walker reads (:data:`WALKER_KEYS`), the declared
  parameters, the keys the Python path never reads (``COMMON`` ones it skips,
  ``ignored``), ``unmodelled`` keys through their own ``accepted(value)`` function, and
  unknown keys that ``_keys.suggestion`` finds no near miss for (memoised per key); any
  other key (a schema key read by no declared row, a near miss that warns) declines;
- values: ``physical_ap`` and ``register_ap`` operands named by ``memref`` or
  ``memsetref`` (a set with one location, or the compiler's ``<location>_set``) with
  integer offsets (``_operands.Resolver._ap``; a ``register_ap`` by ``regref`` warns once,
  so the walker leaves the first it meets to the Python path and takes the later ones),
  ``register_access`` operands and ``imm_value`` operands within int64 or float
  (``Resolver.operand``), and sync entries in either spelling, ``sem-ge-reg`` waits
  included (``_sync``/``_fast_sync``).

A key the generic passes start to read must be added to :data:`WALKER_KEYS` only with
the C code that reads it; until then instructions carrying it are declined (not in the
table: classified as unknown, and a known key declines).
"""

from .. import _birsim
from ..dtypes import DTYPE_ALIASES
from . import insns as _insns, keys as _keys
from .opcodes import COMMON, LATENCY_KEY, OPS
from .spell import ENGINE_ALIASES, LOOP_OPS, OPCODE_ALIASES, TERMINATORS
from .tables import _DEFAULTS, PACKED, _to_array_fast

__all__ = ["new_state", "PACKED", "WALKER_KEYS", "LazyInsns", "lazy_tree"]

#: Instruction keys the C walker reads itself (csrc/py/fastload.c read_insn).
WALKER_KEYS = ("name", "opcode", "type", "instruction_type", "engine", "ins", "outs",
               "sync_info", LATENCY_KEY)

# key classes and parameter kinds: csrc/bs_fastload.def, the one list C numbers them from
_CLASS, _KIND = _birsim.fastload_codes["class"], _birsim.fastload_codes["kind"]
_GENERIC, _DECLARED, _SKIP, _DECLINE = (_CLASS[n] for n in ("GENERIC", "DECLARED", "SKIP",
                                                            "DECLINE"))
_TABLE, _BOOL, _NUM, _NOT_BOOL, _INT, _ACC_FLAGS, _RAW, _ACC, _CONST, _COUNT, _ILIST = (
    _KIND[n] for n in ("TABLE", "BOOL", "NUM", "NOT_BOOL", "INT", "ACC_FLAGS", "RAW", "ACC",
                       "CONST", "COUNT", "ILIST"))


def _merged(table, aliases):
    """{spelling: code} for enum_check(table, aliases).fast: an alias names its target."""
    out = {}
    for k in set(table) | set(aliases or ()):
        target = aliases.get(k, k) if aliases else k
        if target in table:
            out[k] = table[target]
    return out


def _drop(table, keys, slow):
    """``table`` without the spellings ``slow`` (opcodes.OPS slow_values) lists for any
    of ``keys``: the walker declines those (the handler reads them further)."""
    out = dict(table)
    for k in keys:
        for v in slow.get(k, ()):
            out.pop(v, None)
    return out


def _param_rows(cat, op, params):
    """The C rows of ``params`` of ``op``, or None when one is of a form C does not read."""
    rows = []
    slots = cat.params.get(op, {})
    slow = OPS[op].slow_values
    for name, key, kind, default in params:
        if name not in slots and kind[0] not in ("ilist", "pairs"):
            return None
        slot, index = slots.get(name, ("l", 0))
        keys = key if isinstance(key, tuple) else (key,)
        required = default is _insns.REQUIRED
        if kind == "alu":
            code, table = _TABLE, cat.alu_ops
        elif kind == "bool":
            code, table = _BOOL, None
        elif kind == "num":
            code, table = _NUM, None
        elif kind == "not_bool":
            code, table = _NOT_BOOL, None
        elif isinstance(kind, tuple) and kind[0] == "int":
            code, table = _INT, (int(kind[1]), int(kind[2]))
        elif isinstance(kind, tuple) and kind[0] == "acc_flags" and len(keys) == 2:
            code, table = _ACC_FLAGS, None
        elif isinstance(kind, tuple) and kind[0] == "raw":
            # the walker takes the JSON floats and the integers within int64 that fit
            # outs[0]'s item size (config dtype_sizes); others decline
            flag, value = slots.get(kind[1]), slots.get(kind[2])
            if flag is None or value is None or flag[0] != "i" or value[0] != "f":
                return None
            code, table = _RAW, (flag[1], value[1], (1 << 63) - 1)
        elif isinstance(kind, tuple) and kind[0] == "acc":
            # the engine accumulator (_insns._accumulator): commands, reduce ops, the ops
            # it folds with, LoadAccumulate, the default op, the start's ins index and the
            # reduce_op / reduce_init slots
            rop, init = slots.get("reduce_op"), slots.get("reduce_init")
            if rop is None or init is None or rop[0] != "i" or init[0] != "f" \
                    or len(keys) != 5:
                return None
            acc = cat.enums["ACC"]
            code, table = _ACC, (_drop(_merged(acc, _insns.ACC_ALIASES), keys[:3], slow),
                                 _drop(_merged(cat.alu_ops, _insns.REDUCE_OP_ALIASES),
                                       keys[3:4], slow),
                                 tuple(cat.alu_ops[o] for o in _insns.ACC_REDUCE_OPS),
                                 acc["LoadAccumulate"],
                                 cat.alu_ops[kind[2] if len(kind) > 2 else "add"],
                                 int(kind[1]), rop[1], init[1], acc["Idle"])
        elif isinstance(kind, tuple) and kind[0] == "acc_cmd":
            code, table = _TABLE, _merged(cat.enums["ACC"], _insns.ACC_ALIASES)
            default = cat.enums["ACC"][default]
        elif isinstance(kind, tuple) and kind[0] == "cmp":
            # _insns._compare: the comparisons, by their names and spellings
            code, table = _TABLE, _merged({n: cat.alu_ops[n] for n in _insns.CMPS},
                                          _insns.CMP_ALIASES)
            default = default if required else cat.alu_ops[default]
        elif isinstance(kind, tuple) and kind[0] == "count":
            code, table = _COUNT, None
        elif isinstance(kind, tuple) and kind[0] == "ilist":
            # the record's list (Tables.fast_lists: placed in ipool in pass 2)
            # (absent: the handler decides, the walker declines)
            code, table, required = _ILIST, (int(kind[1]), int(kind[2])), True
            if len(kind) > 3:           # (count, hole, width 0, -): StreamShuffle's mask
                table += (int(kind[3]), int(kind[4][0]), int(kind[4][1]), 0, 0)
        elif isinstance(kind, tuple) and kind[0] == "pairs":
            # [x, y] pairs (Iota's pattern), flattened by _insns.build_all
            code, table, required = _ILIST, (int(kind[1]), int(kind[2]), -1, 1, 0, 2,
                                             int(kind[3])), True
        elif isinstance(kind, tuple) and kind[0] == "const":
            code, table, keys = _CONST, None, ()
            default = cat.enums[kind[1]][kind[2]]
        elif isinstance(kind, tuple) and kind[0] == "enum":
            code, table = _TABLE, _merged(cat.enums[kind[1]], kind[3] if len(kind) > 3
                                          else None)
        elif isinstance(kind, tuple) and kind[0] == "act":
            code, table = _TABLE, cat.act_funcs
        else:
            return None
        if (code in (_NUM, _COUNT)) != (slot == "f") or (code == _ILIST) != (slot == "l") \
                or slot not in ("i", "f", "l"):
            return None
        if code == _TABLE:
            table = _drop(table, keys, slow)
        if required:
            dflt = None
        elif code == _TABLE and kind[0] in ("acc_cmd", "cmp"):
            dflt = default                  # the code (above)
        elif code == _TABLE:
            dflt = cat.alu_ops[default] if kind == "alu" else \
                cat.act_funcs[default] if kind[0] == "act" else cat.enums[kind[1]][default]
        elif code == _ACC:
            dflt = cat.enums["ACC"][default]
        elif code == _BOOL:
            dflt = int(bool(default))
        elif code == _NOT_BOOL:
            dflt = int(not default)
        elif code in (_INT, _ACC_FLAGS, _RAW, _CONST, _ILIST):
            dflt = int(default)
        else:
            dflt = float(default)
        rows.append((slot, index, code, tuple(keys), dict(table) if isinstance(table, dict)
                     else table, dflt))
    return tuple(rows)


def _keyclass(op, params, back=False):
    """key -> class (or the unmodelled accepted() function) for ``op``; None when the
    opcode's keys need more than the walker does. ``back``: a HANDBACK opcode, whose
    handler reads its keys (the walker skips them)."""
    r = OPS[op]
    declared = r.declared()
    if declared & COMMON:
        return None
    kc = {}
    for k in r.read():
        kc[k] = _SKIP if back else _DECLINE
    for k in r.ignored:
        kc[k] = _SKIP
    for k in declared:
        kc[k] = _SKIP if back else _DECLARED
    for k in COMMON:
        kc[k] = _GENERIC if k in WALKER_KEYS else _SKIP
    for k in WALKER_KEYS:
        if k not in kc:                 # read by the walker but not COMMON: the Python
            return None                 # path would check it as a key: keep it there
    for k, (ok, _) in r.unmodelled.items():
        kc[k] = ok                      # a declared one too: ok(value) first, then its row
    return kc


def _classify(op, key):
    """An unknown key: skipped in silence when no known key is near it, else declined
    (the Python path warns)."""
    return _SKIP if _keys.suggestion(op, key) is None else _DECLINE


#: Opcodes whose own keys only their handler reads (structured control, DMA triggers and
#: queue instances, calls and kernels): the walker reads the rest of the instruction
#: (name, engine, operands, sync, latency, the key checks) and hands it back to pass 1
#: (``passes._Loader._handed_back``: the loop's axis and body region, the trigger's DMA
#: blocks), and pass 2 runs the handler alone on the record (``InsnInfo.back``).
HANDBACK = ("Loop", "DynamicForLoop", "DoWhile", "DMATrigger", "Call", "NKIKernel",
            "CustomOp", "BIRKernel", "SwitchQueueInstance", "ResetQueueInstance")


def fast_ops(cat):
    """(rows, index) of the opcodes the walker loads."""
    # DMACopy and the DMADescriptor* forms in a function's blocks get no pass-1
    # treatment (the walker never runs in dma_queues blocks; their `queue` key is IGNORED)
    special = set(LOOP_OPS) | set(TERMINATORS) | {"DMATrigger", "DMABlock"}
    abstract = cat.abstract_opcodes()
    rows, index = [], {}
    # every opcode has a row (opcodes.OPS; tests/house/test_house_layers.py); in code order
    for op in sorted(cat.op_code, key=cat.op_code.get):
        # (a row that warns has its first instruction declined: not with a hand-back)
        back = op in HANDBACK and op in _insns._HANDLERS and OPS[op].warns is None
        if op in abstract or (op in special and not back):
            continue
        handler = _insns._HANDLERS.get(op)
        if back:
            params = ()
        elif handler is None:
            params = ()
        elif handler is _insns._declared or _insns.PARAMS_FIRST.get(op) is handler:
            params = OPS[op].params
        else:
            continue
        prow = _param_rows(cat, op, params)
        kc = _keyclass(op, params, back)
        if prow is None or kc is None:
            continue
        index[op] = len(rows)
        most = tuple(limit if limit is not None else _birsim.limits["operands_per_side"]
                     for limit in OPS[op].operands)
        rows.append((op, cat.op_code[op], kc, prow) + most + (OPS[op].warns, back))
    spelled = {}
    for name in index:
        if name not in OPCODE_ALIASES:
            spelled[name] = index[name]
    for alias, target in OPCODE_ALIASES.items():
        if target in index:
            spelled[alias] = index[target]
    return tuple(rows), spelled


def _template(cat, table):
    return _to_array_fast([{}], cat.numpy_dtypes[table], _DEFAULTS.get(table, {})).tobytes()


# The configuration that depends on the catalog and the opcode tables alone, built once:
# (key, {name: value}). Building it costs ~0.5 ms, most of a tiny program's load. The key
# holds copies of the tables, so a row replaced, added or removed at run time (a handler
# of its own, a schema extended) builds it afresh.
_STATIC: list = [None, None]


def _static_tables():
    return (OPS, _insns._HANDLERS, _insns.PARAMS_FIRST, OPCODE_ALIASES)


def _static_key(cat):
    tables = _static_tables()
    # the version tags first: a change while copying makes them stale, never wrong
    return (cat,) + tuple(dict(t) for t in tables) + (_birsim._dict_versions(tables),)


def _static_current(cat, key=None):
    """Whether ``key`` (default ``_STATIC``'s) was made for ``cat`` and the tables as they
    are now: the tables' dict version tags as when the key was made (none changed since),
    else the copies compared with the tables in C (a value by identity first), not a
    fresh key of tuples per load (that cost a tiny program's load 8 us of its ~120; the
    comparison of ~200 entries still ~2 us)."""
    if key is None:
        key = _STATIC[0]
    if key is None or key[0] is not cat:
        return False
    tables = _static_tables()
    versions = _birsim._dict_versions(tables)
    if versions is not None and versions == key[-1]:
        return True
    for saved, table in zip(key[1:-1], tables):
        if saved != table:
            return False
    return True


def new_state(loader):
    """The walker's state for the tables of ``loader`` (shared by a group's modules), or
    None when the catalog is not the extension's own."""
    cat, t, shared = loader.cat, loader.t, loader.shared
    if cat.program_type is not getattr(_birsim, "Program", None):
        return None
    key, static = _STATIC               # one snapshot: another thread may replace it
    if not _static_current(cat, key):
        # the walker's static state, made once per configuration (parsing the opcode
        # rows at every load was a quarter of a tiny program's load)
        key, static = _static_key(cat), _birsim._fast_static(_static_cfg(loader))
        _STATIC[:] = [key, static]
    return _birsim._fast_new(static, {
        "insn_recs": t.recs["insns"], "opnd_recs": t.recs["opnds"],
        "sync_recs": t.recs["syncs"], "infos": shared.insns,
        "sets": t.recs["sets"], "locs": t.recs["locs"], "regs": t.recs["regs"],
        "sbuf": t._sbuf, "lists": t.fast_lists,
    })


def _static_cfg(loader):
    """The part of the walker's configuration no program changes."""
    cat = loader.cat
    E = cat.enums
    wait = {n.replace("_", "-"): v for n, v in E["WAIT"].items()}
    upd = {n.replace("_", "-"): v for n, v in E["UPDATE"].items()}
    wait_alias = {n: n.replace("_", "-") for n in E["WAIT"] if "_" in n}
    upd_alias = {n: n.replace("_", "-") for n in E["UPDATE"] if "_" in n}
    rows, index = fast_ops(cat)
    return {
        "engines": _merged(E["ENGINE"], ENGINE_ALIASES),
        "dtypes": _merged(cat.dtype_code, DTYPE_ALIASES),
        "waits": _merged(wait, wait_alias), "updates": _merged(upd, upd_alias),
        "synctypes": dict(E["SYNCTYPE"]),
        "classify": _classify,
        "physical": E["OPND"]["physical_ap"], "register_access": E["OPND"]["register_access"],
        "register_ap": E["OPND"]["register_ap"],
        "imm_value": E["OPND"]["imm_value"],
        "int32": cat.dtype_code["int32"], "float32": cat.dtype_code["float32"],
        "semaphore": E["SYNCTYPE"]["semaphore"], "event": E["SYNCTYPE"]["event"],
        "sem_ge_imm": wait["sem-ge-imm"], "sem_ge_reg": wait["sem-ge-reg"],
        "sem_add_imm": upd["sem-add-imm"], "sem_inc": upd["sem-inc"],
        "sem_dec": upd["sem-dec"],
        "evt_waits": tuple(v for n, v in E["WAIT"].items() if n.startswith("evt")),
        "evt_updates": tuple(v for n, v in E["UPDATE"].items() if n.startswith("evt")),
        "dtype_sizes": tuple(cat.dtype_size.get(cat.dtype_name.get(c), 0)
                             for c in range(max(cat.dtype_code.values()) + 1)),
        "max_dims": loader._field_count("opnds", "step"),
        "max_operands": _birsim.limits["operands_per_side"],
        "insn_tmpl": _template(cat, "insns"), "opnd_tmpl": _template(cat, "opnds"),
        "sync_tmpl": _template(cat, "syncs"),
        "ops": rows, "ops_index": index,
    }


# ---- instruction arrays parsed when the loader reaches their block ------------------

#: Text of at least LAZY_FROM bytes has its blocks' instruction arrays of at least
#: LAZY_MIN bytes parsed one by one when the loader reaches their block (``lazy_tree``),
#: each just before the walker reads it (and frees it), so the tree never outgrows the
#: caches; the rest of the document (the skeleton) and each array at most LAZY_MAX
#: bytes, nested at most LAZY_DEPTH deep (msgspec parses pieces the way it parses the
#: whole: a deeper document is parsed whole, as before).
LAZY_FROM = 64 << 10
LAZY_MIN = 16 << 10
LAZY_MAX = 8 << 20
LAZY_DEPTH = 64
_LAZY_KEYS = ("functions", "nki_functions")


class LazyInsns:
    """A block's ``instructions`` array not parsed yet: its text in the document."""
    __slots__ = ("text", "start", "end")

    def __init__(self, text, start, end):
        self.text, self.start, self.end = text, start, end

    def parse(self, decode):
        return decode(self.text[self.start:self.end])


def lazy_tree(body, decode):
    """The document ``body`` (bytes) parsed by ``decode`` but its large instruction
    arrays, each a :class:`LazyInsns` in its block (``_place_region`` parses it when it
    reaches the block), or None (parse it whole). ``decode``'s errors propagate. The
    loader runs on such a tree only in ``passes._load_lazily``: any failure, the arrays'
    parse errors included, loads the text again parsed whole (the errors and warnings of
    today's order: a syntax error anywhere comes before any semantic one)."""
    if len(body) < LAZY_FROM:
        return None
    split = _birsim._json_lazy(body, LAZY_MIN, LAZY_MAX, LAZY_DEPTH)
    if split is None:
        return None
    skeleton, spans = split
    root = decode(skeleton)
    text = memoryview(body)
    for key, f, b, start, end in spans:
        try:
            blk = root[_LAZY_KEYS[key]][f]["blocks"][b]
            ok = blk["instructions"] == []
        except (KeyError, IndexError, TypeError):
            ok = False
        if not ok:                  # the scan misread the text: parse it whole
            return None
        blk["instructions"] = LazyInsns(text, start, end)
    return root
