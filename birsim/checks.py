"""Findings of the checkers: ``Simulator(..., checks="all")`` or an iterable of names.

The checks run in the C core (``csrc/vm/check.c``) over the same run as the simulation;
each finding comes back as a :class:`Finding` in ``sim.findings`` and is issued as a
:class:`birsim.BirsimWarning` (with ``strict=True`` the first one raises
:class:`birsim.CheckError`). The names, sub-kinds and detail slots are generated from
``csrc/bs_enums.def`` (groups ``CHECK``, ``FINDING``, ``FD``).
"""

from . import _birsim

__all__ = ["CHECKS", "Finding", "parse_checks"]

_CHECK_BITS = dict(_birsim.enums["CHECK"])
_CHECK_NAMES = {v: k for k, v in _CHECK_BITS.items()}
_SUB_NAMES = {v: k for k, v in _birsim.enums["FINDING"].items()}
_FD = dict(_birsim.enums["FD"])
_ENGINES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_OUT_OPERAND = _birsim.limits["out_operand"]   # BS_OUT_OPERAND: outs[k] is numbered this + k

#: Every checker's name, in bit order.
CHECKS = tuple(sorted(_CHECK_BITS, key=_CHECK_BITS.__getitem__))


def parse_checks(checks):
    """The bit mask for ``checks``: None, ``"all"``, one name, or an iterable of names."""
    if checks is None or checks is False:
        return 0
    if checks is True or checks == "all":
        return sum(1 << b for b in _CHECK_BITS.values())
    if isinstance(checks, str):
        checks = [checks]
    mask = 0
    try:
        names = list(checks)
    except TypeError:
        raise TypeError(f'checks must be None, "all" or an iterable of {list(CHECKS)}, '
                        f"got {checks!r}") from None
    for name in names:
        if name == "all":
            return parse_checks("all")
        if name not in _CHECK_BITS:
            raise ValueError(f"unknown check {name!r}; checks are {list(CHECKS)} or 'all'")
        mask |= 1 << _CHECK_BITS[name]
    return mask


class Finding:
    """One problem a checker found.

    ``kind`` is the check's name (``"races"``, ``"uninitialized"``, ``"leftover_sync"``,
    ``"capacity"``, ``"nan"``, ``"dead_writes"``, ``"uninit_regs"``); ``message`` one line naming the
    instructions by function, block, position and name; ``details`` a dict: ``sub`` (e.g.
    ``"RAW"``, ``"WAR"``, ``"WAW"``, ``"semaphore_left"``, ``"nan"``), ``first`` and (for
    races and overwritten writes) ``second`` instruction as dicts (``core``,
    ``function``, ``block``, ``position``, ``instruction``, ``opcode``, ``engine``), and
    where they apply ``tensor``, ``partitions`` and ``bytes`` (half-open, relative to the
    tensor's memory location), ``index`` (element index, semaphore or event id),
    ``value``, ``limit``, ``operand``; for ``uninit_regs`` (sub ``"uninit_reg"``)
    ``register`` and ``file`` (the engine whose register file was read, ``"shared"`` for
    the most recent value that rendezvous instructions and DoWhile conditions read).
    """

    __slots__ = ("kind", "message", "details")

    def __init__(self, kind, message, details):
        self.kind = kind
        self.message = message
        self.details = details

    @property
    def sub(self):
        return self.details.get("sub")

    def __repr__(self):
        return f"Finding({self.kind!r}, {self.message!r})"

    def __str__(self):
        return self.message


def _thread(sim_names, module, tid, insn_rec):
    """The engine (or DMA queue) that ran an access, from the checker's thread index."""
    n_queues = len(module.tables["queues"])
    per_core = 7 + n_queues + 1
    slot = tid % per_core
    if slot < 6:
        return _ENGINES[slot + 1]
    if slot == 6:
        return _ENGINES.get(int(insn_rec["engine"]), "ALL")
    q = slot - 7
    if q < n_queues:
        return "DMA queue " + sim_names._s(int(module.tables["queues"][q]["name"]))
    return "DMA queue"


def make_finding(names, module, check, message, d):
    """Build a Finding from the core's (check, message, detail slots)."""
    t = module.tables
    det = {"sub": _SUB_NAMES.get(d[_FD["SUB"]], str(d[_FD["SUB"]]))}

    def insn(core, i, tid):
        rec = t["insns"][i]
        block = int(rec["block"])
        info = {
            "core": core,
            "function": names.function(int(rec["func"])),
            "block": names.block(block),
            "position": i - int(t["blocks"][block]["insn0"]),
            "instruction": names.instruction(i),
            "opcode": _birsim_op_name(int(rec["op"])),
            "engine": (_thread(names, module, tid, rec) if tid >= 0
                       else _ENGINES.get(int(rec["engine"]), "?")),
        }
        return info

    if d[_FD["INSN_A"]] >= 0:
        det["first"] = insn(d[_FD["CORE_A"]], d[_FD["INSN_A"]], d[_FD["THREAD_A"]])
    if d[_FD["INSN_B"]] >= 0:
        det["second"] = insn(d[_FD["CORE_B"]], d[_FD["INSN_B"]], d[_FD["THREAD_B"]])
    if d[_FD["LOC"]] >= 0:
        det["tensor"] = names._s(int(t["locs"][d[_FD["LOC"]]]["name"]))
    if d[_FD["P1"]] >= 0:
        det["partitions"] = (d[_FD["P0"]], d[_FD["P1"]])
    if d[_FD["B1"]] >= 0:
        det["bytes"] = (d[_FD["B0"]], d[_FD["B1"]])
    for key in ("INDEX", "VALUE", "LIMIT"):
        if d[_FD[key]] >= 0:
            det[key.lower()] = d[_FD[key]]
    if d[_FD["OPERAND"]] >= 0:
        det["operand"] = operand_name(d[_FD["OPERAND"]])
    if det["sub"] in ("RAW", "WAR", "WAW"):
        det["access"] = det["sub"]
    if det["sub"] == "uninit_reg":           # index: the register; value: its file's slot
        det["register"] = names._s(int(t["regs"][d[_FD["INDEX"]]]["name"]))
        det["file"] = _ENGINES.get(d[_FD["VALUE"]], "shared") if d[_FD["VALUE"]] > 0 \
            else "shared"
    return Finding(_CHECK_NAMES.get(check, str(check)), message, det)


_OPS = {v[0]: k for k, v in _birsim.opcodes.items()}


def operand_name(o):
    """``ins[k]`` or ``outs[k]`` for the core's operand number ``o`` (errors, findings)."""
    return f"outs[{o - _OUT_OPERAND}]" if o >= _OUT_OPERAND else f"ins[{o}]"


def _birsim_op_name(op):
    return _OPS.get(op, str(op))
