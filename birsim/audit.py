"""What each wait of a program is for: ``birsim.audit``.

``audit(program)`` gives one record per wait (every ``on_wait`` entry of every
instruction and DMA block), labelled by running mutants of the program under the race
checker (``checks="races"``, happens-before, so one run says whether a mutant races):

- ``needed``: deleting the wait makes a race (or a deadlock or sync error); ``evidence``
  holds the findings of that mutant.
- ``redundant``: deleting it leaves the program race-free under every schedule tried;
  program order or other waits already order everything it orders.
- ``over-strong``: a ``sem-ge-imm`` wait that is needed, but a smaller value still orders
  every conflicting access: ``suggested_value`` is the smallest value for which the
  mutant stays race-free (binary search; every value below it races, ``evidence`` holds
  the findings one below it).

A label is a fact about the mutants that were run: each is run under ``schedules``
(default ``in_order``, ``round_robin`` and random seed 0) with ``inputs`` (default:
random values of the declared dtypes). docs/sync.md describes the labels.
"""

import copy
import math
import os
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from .errors import BirsimError, ProgramError
from .synchronize import _mod, read_program

__all__ = ["audit", "DEFAULT_SCHEDULES", "format_table"]

#: Schedules each mutant runs under: names, or an int for ``random`` with that seed.
DEFAULT_SCHEDULES = ("in_order", "round_robin", 0)


def _random_inputs(modules, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for m in modules:
        for t in m.inputs:
            dt = t.numpy_dtype
            if dt.kind in "iub":
                out[t.name] = rng.integers(0, 8, size=t.shape).astype(dt)
            else:
                out[t.name] = rng.standard_normal(t.shape).astype(dt)
    return out


def _walk_blocks(blocks, where, out):
    for b in blocks if isinstance(blocks, list) else ():
        insns = b.get("instructions") if isinstance(b, dict) else None
        for pos, insn in enumerate(insns if isinstance(insns, list) else ()):
            if not isinstance(insn, dict):
                continue
            s = insn.get("sync_info")
            waits = s.get("on_wait") if isinstance(s, dict) else None
            for k, w in enumerate(waits if isinstance(waits, list) else ()):
                if isinstance(w, dict):
                    out.append((dict(where, block=b.get("name"), position=pos,
                                     instruction=insn.get("name"), wait=k), insn, k))
            if isinstance(insn.get("blocks"), list):
                _walk_blocks(insn["blocks"], where, out)


def _waits(prog: Dict[str, Any], core: int) -> List[Any]:
    """(record, instruction dict, index) for every wait of one module."""
    mod = _mod(prog)
    out: List = []
    for f in (mod.get("functions") or []) + (mod.get("nki_functions") or []):
        if isinstance(f, dict):
            _walk_blocks(f.get("blocks"), {"core": core, "function": f.get("name")}, out)
    for q in mod.get("dma_queues") or []:
        if isinstance(q, dict):
            _walk_blocks([{"name": q.get("name"), "instructions": q.get("dma_blocks") or []}],
                         {"core": core, "function": None}, out)
    for q in mod.get("queues") or []:
        if isinstance(q, dict):
            for b in q.get("blocks") or []:
                if isinstance(b, dict):
                    _walk_blocks([dict(b, name=b.get("name", q.get("name")))],
                                 {"core": core, "function": None}, out)
    return out


def _value_key(w):
    return "wait_value" if "wait_value" in w else "value"


def _is_sem_imm(w):
    mode = w.get("mode")
    if "wait_value" in w and mode is None:
        return True
    return mode in ("sem-ge-imm", "sem_ge_imm", 1) and isinstance(w.get("value"), int)


class _Runner:
    def __init__(self, progs, inputs, schedules, options):
        from .loader import load
        self.load = load
        self.progs = progs
        self.schedules = list(schedules)
        self.options = options
        self.inputs = inputs
        self.runs = 0

    def findings(self, progs):
        """The race findings (as dicts) of the program ``progs`` under every schedule; a
        run that stops with an error gives one finding of kind ``error``."""
        from .simulator import Simulator
        mods = self.load(progs if len(progs) > 1 else progs[0])
        if self.inputs is None:
            self.inputs = _random_inputs(mods if isinstance(mods, list) else [mods])
        out, seen = [], set()
        for sch in self.schedules:
            kw = dict(self.options)
            if isinstance(sch, int):
                kw.update(schedule="random", seed=sch)
            else:
                kw.update(schedule=sch)
            self.runs += 1
            try:
                sim = Simulator(mods, checks="races", **kw)
                import warnings
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sim.run(self.inputs)
            except BirsimError as e:
                out.append({"kind": "error", "error": type(e).__name__, "message": str(e),
                            "schedule": sch})
                break
            for f in sim.findings:
                if f.kind != "races" or f.message in seen:
                    continue
                seen.add(f.message)
                out.append({"kind": "race", "access": f.details.get("access"),
                            "message": f.message, "first": f.details.get("first"),
                            "second": f.details.get("second"), "schedule": sch})
        return out

    def modelled_ns(self, progs):
        """The timing model's total for ``progs`` (in_order; docs/timing.md)."""
        from .simulator import Simulator
        import warnings
        mods = self.load(progs if len(progs) > 1 else progs[0])
        kw = {k: v for k, v in self.options.items() if k not in ("schedule", "seed")}
        sim = Simulator(mods, timing=True, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sim.run(self.inputs)
        return sim.profile.total_ns


def audit(program: Any, inputs: Optional[Dict[str, Any]] = None, *,
          schedules: Iterable[Any] = DEFAULT_SCHEDULES, **options: Any) -> List[Dict[str, Any]]:
    """One record per wait of ``program`` (a BIR-JSON dict, JSON text, a path, a compiler
    work directory, or a list, one module per core), labelled ``needed``, ``redundant``
    or ``over-strong`` by running mutants under the race checker (module docstring,
    docs/sync.md). ``inputs`` defaults to random values of the declared dtypes;
    ``schedules`` lists the schedules each mutant runs under (a name, or an int: random
    with that seed); other keyword arguments go to :class:`birsim.Simulator` (``cores``,
    ``kernel_sim``, ...).

    Each record: ``core``, ``function`` (None for a DMA block), ``block``, ``position``,
    ``instruction``, ``wait`` (index in ``on_wait``), ``entry`` (the wait as written),
    ``label``, ``suggested_value`` (over-strong only), ``saved_ns`` (redundant and
    over-strong: the modelled time the program gains when the wait is deleted or lowered,
    birsim's timing model, in_order; None for needed waits) and ``evidence`` (race findings
    as dicts: ``access``, ``message``, ``first``, ``second``, ``schedule``; or ``kind:
    "error"``). Raises :class:`ProgramError` when the unmutated program already races."""
    if isinstance(program, (str, os.PathLike)) and os.path.isdir(program):
        from .workdir import find_dumps
        program = [str(p) for p in find_dumps(program)]
    prog = read_program(program)
    progs = prog if isinstance(prog, list) else [prog]
    run = _Runner(progs, inputs, schedules, options)
    base = run.findings(progs)
    if base:
        raise ProgramError("birsim.audit: the program is not race-free as written, so "
                           "no wait can be judged; first finding: " + base[0]["message"])
    records = []
    base_ns = None
    for core, p in enumerate(progs):
        for rec, insn, k in _waits(p, core):
            entry = insn["sync_info"]["on_wait"][k]
            rec["entry"] = copy.deepcopy(entry)
            rec["label"], rec["suggested_value"], rec["evidence"] = \
                _judge(run, progs, core, insn, k)
            rec["saved_ns"] = None
            if rec["label"] != "needed":
                if base_ns is None:
                    base_ns = run.modelled_ns(progs)
                rec["saved_ns"] = base_ns - run.modelled_ns(
                    _mutant(progs, core, insn, k, rec["suggested_value"]))
            records.append(rec)
    return records


def _mutant(progs, core, insn, k, value=None):
    """The programs with wait ``k`` of ``insn`` deleted (``value`` None) or set to
    ``value``; ``insn`` is restored after the copy."""
    waits = insn["sync_info"]["on_wait"]
    saved = waits[k]
    try:
        if value is None:
            del waits[k]
        else:
            waits[k] = dict(saved, **{_value_key(saved): value})
        return copy.deepcopy(progs)
    finally:
        if value is None:
            waits.insert(k, saved)
        else:
            waits[k] = saved


def _step(prog, sid):
    """The gcd of the amounts the module adds to semaphore ``sid``: wait values between
    two multiples of it are satisfied by the same update (DMA completions add 16)."""
    g = 0

    def walk(v):
        nonlocal g
        if isinstance(v, dict):
            s = v.get("sync_info")
            for u in (s.get("on_update") or []) if isinstance(s, dict) else ():
                if not isinstance(u, dict) or u.get("id") != sid:
                    continue
                if "update_value" in u and u.get("mode") is None:
                    amount = u["update_value"]
                elif u.get("mode") in ("sem-add-imm", "sem_add_imm", 1, "sem-inc", "sem_inc", 3):
                    amount = u.get("value", 1)
                else:
                    continue
                if isinstance(amount, int) and 0 < amount < 2 ** 31:
                    g = math.gcd(g, amount)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(_mod(prog))
    return g or 1


def _judge(run, progs, core, insn, k):
    w = insn["sync_info"]["on_wait"][k]
    deleted = run.findings(_mutant(progs, core, insn, k))
    if not deleted:
        return "redundant", None, []
    value = w.get(_value_key(w))
    if not _is_sem_imm(w) or not isinstance(value, int) or value <= 1:
        return "needed", None, deleted
    g = _step(progs[core], w.get("id"))
    lo, hi = 0, -(-value // g)              # in steps of g: hi is race-free, 0 = deleted
    below = deleted
    while hi - lo > 1:                      # invariant: lo races, hi is race-free
        mid = (lo + hi) // 2
        f = run.findings(_mutant(progs, core, insn, k, mid * g))
        if f:
            lo, below = mid, f
        else:
            hi = mid
    if hi * g < value:
        return "over-strong", hi * g, below
    return "needed", None, deleted


def format_table(records: List[Dict[str, Any]]) -> str:
    """The records as a text table (``birsim audit``)."""
    rows = [("core", "function", "block", "pos", "instruction", "wait", "entry", "label",
             "suggested", "saves ns", "evidence")]
    for r in records:
        e = r["entry"]
        ent = f"id {e.get('id')} >= {e.get('wait_value', e.get('value', e.get('regref')))}"
        ev = r["evidence"][0]["message"] if r["evidence"] else ""
        if len(ev) > 80:
            ev = ev[:77] + "..."
        rows.append((str(r["core"]), str(r["function"]), str(r["block"]), str(r["position"]),
                     str(r["instruction"]), str(r["wait"]), ent, r["label"],
                     "" if r["suggested_value"] is None else str(r["suggested_value"]),
                     "" if r.get("saved_ns") is None else "%.0f" % r["saved_ns"], ev))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:-1], widths)) + "  " + row[-1]
             for row in rows]
    counts: Dict[str, int] = {}
    for r in records:
        counts[r["label"]] = counts.get(r["label"], 0) + 1
    lines.append(f"{len(records)} wait(s): " + ", ".join(
        f"{counts.get(k, 0)} {k}" for k in ("needed", "redundant", "over-strong")))
    return "\n".join(line.rstrip() for line in lines)
