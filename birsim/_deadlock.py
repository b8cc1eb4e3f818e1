"""The wait-for graph of a deadlock (attached to :class:`birsim.DeadlockError`).

Nodes are the blocked queue heads of every live core (core, engine queue; the
rendezvous queue is ``ALL``). An unsatisfied wait of head A on semaphore s (or event e)
of core c gets an edge A -> B to every head B whose queue still holds, in its current
block, an instruction with an update that raises s (sem-inc, sem-add-imm, sem-wr-imm to a
larger value) or sets e on core c: B must advance for A to. A wait no pending instruction
can satisfy gets an edge to an ``unsatisfiable`` node. A head held back only by the
block's order rules (a rendezvous instruction waits for the heads before it; an engine
waits for a rendezvous instruction before it) gets an edge to what holds it. A cycle
among the heads is reported as such; without one, the unsatisfiable waits are the cause.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _birsim

_ENGINES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_RDV = 7
_W = dict(_birsim.enums["WAIT"])
_U = dict(_birsim.enums["UPDATE"])
_EVENT = dict(_birsim.enums["SYNCTYPE"])["event"]
_FAMILY = {v[0]: v[2] for v in _birsim.opcodes.values()}
_OPNAME = {v[0]: k for k, v in _birsim.opcodes.items()}


def _queue(rec) -> int:
    e = int(rec["engine"])
    if e not in range(1, 7) or _FAMILY.get(int(rec["op"])) in ("loop", "call"):
        return _RDV
    return e


def _qname(q: int) -> str:
    return "ALL" if q == _RDV else _ENGINES.get(q, str(q))


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class WaitForGraph:
    """``nodes``: {node id: dict(core, engine, instruction, function, block, position,
    opcode, last_completed)}; ``edges``: list of (from, to, label); ``cycle``: the node ids
    of one cycle (empty when there is none); ``unsatisfiable``: (node, label) of waits no
    pending update can satisfy; ``last_completed``: {core: {"core": name or None,
    engine: name}} -- the last instruction each core and each of its engines completed."""

    def __init__(self) -> None:
        self.nodes: Dict[str, Dict[str, Any]] = {}
        self.edges: List[Tuple[str, str, str]] = []
        self.cycle: List[str] = []
        self.unsatisfiable: List[Tuple[str, str]] = []
        self.last_completed: Dict[int, Dict[str, Optional[str]]] = {}

    def to_dot(self) -> str:
        lines = ["digraph deadlock {", '  rankdir=LR;',
                 '  node [shape=box, fontname="monospace", fontsize=10];']
        on_cycle = set(zip(self.cycle, self.cycle[1:] + self.cycle[:1])) if self.cycle else set()
        for nid, n in self.nodes.items():
            if n.get("unsatisfiable"):
                lines.append(f"  {_dot_str(nid)} [shape=octagon, color=red, "
                             f"label={_dot_str(n['label'])}];")
                continue
            label = (f"core {n['core']} {n['engine']}\n{n['function']}/{n['block']} "
                     f"#{n['position']} '{n['instruction']}' ({n['opcode']})\n"
                     f"last completed: {n['last_completed'] or '-'}")
            colour = ", color=red" if nid in self.cycle else ""
            lines.append(f"  {_dot_str(nid)} [label={_dot_str(label)}{colour}];")
        for a, b, label in self.edges:
            colour = ", color=red, penwidth=2" if (a, b) in on_cycle else ""
            lines.append(f"  {_dot_str(a)} -> {_dot_str(b)} [label={_dot_str(label)}{colour}];")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        """Lines appended to the DeadlockError message."""
        out = []
        if self.cycle:
            out.append("wait-for cycle: " + " -> ".join(self.cycle + self.cycle[:1]))
        for nid, label in self.unsatisfiable[:20]:
            out.append(f"no pending instruction can satisfy {nid}'s wait: {label}")
        if len(self.unsatisfiable) > 20:
            out.append(f"... and {len(self.unsatisfiable) - 20} more unsatisfiable waits")
        by_text: Dict[str, List[int]] = {}        # identical lines of several cores once
        for core, d in sorted(self.last_completed.items()):
            eng = ", ".join(f"{e} '{i}'" for e, i in d.items() if e != "core" and i)
            text = (f"'{d['core']}'" if d.get("core") else "nothing") + \
                (f" (per engine: {eng})" if eng else "")
            by_text.setdefault(text, []).append(core)
        for i, (text, cores) in enumerate(by_text.items()):
            if i == 20:
                out.append(f"... and {len(by_text) - 20} more last-completed lines")
                break
            out.append(f"last completed on core{'s' if len(cores) > 1 else ''} "
                       f"{_ranges(cores)}: {text}")
        return "\n".join(out)


def _ranges(cores: List[int]) -> str:
    parts, i = [], 0
    while i < len(cores):
        j = i
        while j + 1 < len(cores) and cores[j + 1] == cores[j] + 1:
            j += 1
        parts.append(str(cores[i]) if i == j else f"{cores[i]}-{cores[j]}")
        i = j + 1
    return ",".join(parts)


def build_graph(sim: Any) -> WaitForGraph:
    """The wait-for graph of a Simulator whose run ended in a deadlock."""
    g = WaitForGraph()
    names = sim._names
    csim = sim._sim
    tables = sim.module.tables            # a module list's: the whole group's (as _debug)

    def mod_tables(core):
        return tables

    heads: Dict[Tuple[int, int], int] = {}
    pending: Dict[Tuple[int, int], List[int]] = {}
    sems: Dict[int, np.ndarray] = {}
    evts: Dict[int, np.ndarray] = {}
    for core in range(sim.cores):
        t = mod_tables(core)
        ins = t["insns"]
        last, any_ = csim.last_done(core)
        d: Dict[str, Optional[str]] = {"core": names.instruction(any_) if any_ >= 0 else None}
        for q, i in enumerate(last):
            if i >= 0:
                d[_qname(q)] = names.instruction(i)
        g.last_completed[core] = d
        s, e = csim.sync_state(core)
        sems[core] = np.frombuffer(s, np.uint32)
        evts[core] = np.frombuffer(e, np.uint8)
        block, hs = csim.queue_heads(core)
        if block < 0:
            continue
        b = t["blocks"][block]
        i0, n = int(b["insn0"]), int(b["ninsn"])
        for q, h in enumerate(hs):
            if h < 0:
                continue
            heads[(core, q)] = h
            pending[(core, q)] = [i for i in range(h, i0 + n) if _queue(ins[i]) == q]

    def nid(core, q):
        return f"core{core}.{_qname(q)}"

    for (core, q), h in heads.items():
        rec = mod_tables(core)["insns"][h]
        b = int(rec["block"])
        g.nodes[nid(core, q)] = {
            "core": core, "engine": _qname(q), "instruction": names.instruction(h),
            "function": names.function(int(rec["func"])), "block": names.block(b),
            "position": h - int(mod_tables(core)["blocks"][b]["insn0"]),
            "opcode": _OPNAME.get(int(rec["op"]), "?"),
            "last_completed": g.last_completed[core].get(_qname(q))}

    def raisers(core, typ, sid, need):
        """Heads whose pending instructions raise (typ, sid) of `core` to >= need."""
        out = []
        for (c2, q2), lst in pending.items():
            t2 = mod_tables(c2)
            for i in lst:
                rec = t2["insns"][i]
                s0 = int(rec["sync"]) + int(rec["nwait"])
                hit = False
                for k in range(int(rec["nupd"])):
                    u = t2["syncs"][s0 + k]
                    tgt = int(u["target_core"])
                    if (tgt if tgt >= 0 else c2) != core or int(u["id"]) != sid:
                        continue
                    mode = int(u["mode"])
                    if typ == _EVENT:
                        hit |= mode == _U["evt_set"]
                    elif mode in (_U["sem_add_imm"], _U["sem_inc"]):
                        hit = True
                    elif mode == _U["sem_wr_imm"] and int(u["value"]) >= need:
                        hit = True
                if hit:
                    out.append((c2, q2))
                    break
        return out

    for (core, q), h in heads.items():
        t = mod_tables(core)
        rec = t["insns"][h]
        a = nid(core, q)
        unmet = False
        for k in range(int(rec["nwait"])):
            w = t["syncs"][int(rec["sync"]) + k]
            typ, sid, mode = int(w["type"]), int(w["id"]), int(w["mode"])
            if typ == _EVENT:
                if evts[core][sid]:
                    continue
                label, need = f"event {sid} set", 1
            else:
                if mode == _W["sem_ge_reg"]:
                    need = int(sim._sim.reg(core, int(w["reg"]), q if q != _RDV else -1))
                else:
                    need = int(w["value"])
                if int(sems[core][sid]) >= need:
                    continue
                label = f"semaphore {sid} >= {need} (now {int(sems[core][sid])})"
            unmet = True
            who = raisers(core, typ, sid, need)     # (core, q) itself: a later instruction
            if not who:
                u = f"unsat.{a}.{k}"
                g.nodes[u] = {"unsatisfiable": True,
                              "label": f"no pending update:\n{label} on core {core}"}
                g.edges.append((a, u, label))
                g.unsatisfiable.append((a, label))
            for c2, q2 in who:
                g.edges.append((a, nid(c2, q2), label))
        if unmet:
            continue
        # held back by the block's order rules only
        rdv = heads.get((core, _RDV))
        if q == _RDV:
            for (c2, q2), h2 in heads.items():
                if c2 == core and q2 != _RDV and h2 < h:
                    g.edges.append((a, nid(c2, q2), "rendezvous waits for earlier heads"))
        elif rdv is not None and rdv < h:
            g.edges.append((a, nid(core, _RDV), "waits for the rendezvous before it"))
    g.cycle = _find_cycle([n for n in g.nodes if not g.nodes[n].get("unsatisfiable")], g.edges)
    return g


def _find_cycle(nodes: List[str], edges: List[Tuple[str, str, str]]) -> List[str]:
    adj: Dict[str, List[str]] = {n: [] for n in nodes}
    for a, b, _ in edges:
        if a in adj and b in adj and b not in adj[a]:
            adj[a].append(b)
    colour: Dict[str, int] = {}
    stack: List[str] = []

    def dfs(v):
        colour[v] = 1
        stack.append(v)
        for w in adj[v]:
            if colour.get(w) == 1:
                return stack[stack.index(w):]
            if w not in colour:
                c = dfs(w)
                if c:
                    return c
        stack.pop()
        colour[v] = 2
        return None

    for n in nodes:
        if n not in colour:
            c = dfs(n)
            if c:
                return list(c)
    return []


def attach(sim: Any, e: Any) -> None:
    """Give DeadlockError e its wait-for graph: ``e.graph``, ``e.dot``, ``e.cycle``,
    ``e.last_completed``, ``e.write_dot(path)``; the summary goes into its message and,
    with trace=True, one instant event per blocked head into ``sim.trace.deadlock``."""
    try:
        g = build_graph(sim)
    except Exception as x:  # noqa: BLE001 -- the report must never hide the deadlock
        e.graph = None
        e.dot = None
        e.args = (f"{e.args[0] if e.args else ''}\n(no wait-for graph: {x})",)
        return
    e.graph = g
    e.dot = g.to_dot()
    e.cycle = list(g.cycle)
    e.last_completed = g.last_completed
    text = g.summary()
    if text and e.args and isinstance(e.args[0], str):
        # after the first sentence, before the list of blocked instructions
        head, sep, rest = e.args[0].partition(" Blocked:")
        msg = f"{head}\n{text}\nBlocked:{rest}" if sep else f"{e.args[0]}\n{text}"
        e.args = (msg,) + tuple(e.args[1:])
    if getattr(sim, "_trace", False):
        sim.trace.deadlock = [dict(n, node=k) for k, n in g.nodes.items()
                              if not n.get("unsatisfiable")]
