"""Insert counting semaphores where a program's engines race: ``birsim.synchronize``.

``synchronize(program)`` returns a copy of ``program`` (a BIR-JSON dict, JSON text or a
file path; a list for one module per core) in which every pair of conflicting accesses
(two instructions on different engines touching a common byte, one of them writing) is
ordered, the way the compiler's sync pass does it (docs/sync.md):

- **Footprints.** Each operand's bytes are the box (partitions x bytes of its memory
  space) its access pattern spans; placed SBUF/PSUM locations share their space, so tiles
  that alias conflict. An offset that is an expression (loop variables, registers) or a
  ``symbolic_ap``/``register_ap`` is taken as the whole location (conservative).
  Registers need nothing: each engine has its own file, and the instructions that touch
  every file are rendezvous.
- **Segments.** A rendezvous (``ALL``/``Unassigned`` engine, ``Loop``, ``Call``, ...) joins
  every engine, so only instructions between two rendezvous (a *segment*) can race.
- **Waits.** One semaphore per (producer engine, consumer engine) pair. A producer that a
  consumer needs adds 1 at completion (``{"id", "update_value": 1}``); the consumer waits
  for that producer's count (``{"from", "id", "wait_value"}``). No wait is added where
  program order on one engine, or a wait already added (transitively: per-engine vector
  clocks), orders the pair.
- **Resets and fences.** A segment that uses semaphores ends with a
  ``GroupResetSemaphores`` on engine ``ALL`` (a rendezvous: every count restarts at 0 in
  the next segment, loop trip and block). A block whose last segment conflicts with an
  access of another block of its region (the next block or the next loop trip run
  unjoined) ends with that reset, or an ``AllEngineBarrier`` when it used no semaphore.
- **DMA queues.** A DMATrigger's blocks run on the queue after it: the trigger waits
  for what their descriptors read or overwrite, and its blocks add 1 to a semaphore of
  (queue, engine) when they complete. Overlapped (the default), the queue is an engine
  of its own in the segment: what needs a block's bytes waits for its count, the
  segment's reset waits for the last one. ``overlap_dma=False``: a drain right after the
  trigger on its engine (an ``EventSemaphore`` waiting for 1 and taking it back) orders
  what comes after them, giving up the queue's overlap with its engine.
- **Existing sync is kept.** A block that already has ``sync_info``, or fires DMA blocks
  that do or that another engine fires too, is left exactly as it is.
- **Between cores.** A module list is then ordered between cores: on the DRAM tensors
  every core sees, top-level instructions of each core's entry function (a loop or call
  with its whole body) that conflict are ordered write-before-read (two writes: in core
  order) with ``target_core`` ``sem-inc`` updates the consumer's core waits for; minimal
  by what each consumer already knows; a cycle against block order is a ProgramError;
  each consumer core resets its cross-core ids at the end. Blocks kept as written, and
  lists that already have ``target_core`` updates, get no cross-core edge (docs/sync.md).
"""

import functools
import json
import os
from typing import Any, Dict, List, Optional, Tuple, cast

from .errors import ProgramError

__all__ = ["synchronize"]

ENGINES = ("Pool", "Activation", "PE", "DMA", "DVE", "SP")
_ENGINE_ALIASES = {"GPSIMD": "Pool", "gpsimd": "Pool", "pool": "Pool", "Scalar": "Activation",
                   "act": "Activation", "ACT": "Activation", "Tensor": "PE", "pe": "PE",
                   "SyncDMA": "DMA", "dma": "DMA", "Vector": "DVE", "dve": "DVE",
                   "Sync": "SP", "sp": "SP", "All": "ALL"}
_STRUCTURED = {"Loop", "DynamicForLoop", "DoWhile", "Call", "NKIKernel"}
_TERMINATORS = {"CompareAndBranch", "UnconditionalBranch", "Break", "Return", "Exit"}
_AP_KINDS = {"physical_ap", "symbolic_ap", "symbolic_pwap", "register_ap"}
#: The memory space of the DRAM tensors every core of a module list sees (the loader's
#: all-cores arena: inputs and outputs by name, ``Shared`` sets).
SHARED = "DRAM-all-cores"


def read_program(program: Any) -> Any:
    """A deep copy of ``program`` as JSON values: a dict (bare or wrapped module), JSON
    text, a path, or a list of those (one per core)."""
    if isinstance(program, (list, tuple)):
        return [read_program(p) for p in program]
    if isinstance(program, dict):
        return json.loads(json.dumps(program))       # a deep copy, several times faster
    if isinstance(program, bytes):
        program = program.decode()
    if isinstance(program, os.PathLike) or (isinstance(program, str)
                                            and not program.lstrip().startswith(("{", "["))):
        with open(program) as f:
            return json.load(f)
    if isinstance(program, str):
        return json.loads(program)
    raise TypeError(f"expected a BIR-JSON dict, JSON text or a path, got {type(program).__name__}")


def _mod(prog: Dict[str, Any]) -> Dict[str, Any]:
    return prog["module"] if isinstance(prog.get("module"), dict) else prog


def engine_of(insn: Dict[str, Any]) -> str:
    e = insn.get("engine", "Unassigned")
    return _ENGINE_ALIASES.get(e, e) if isinstance(e, str) else "Unassigned"


def opcode_of(insn: Dict[str, Any]) -> str:
    for k in ("opcode", "type", "instruction_type"):
        if isinstance(insn.get(k), str):
            return insn[k]
    return ""


def is_rendezvous(insn: Dict[str, Any]) -> bool:
    return engine_of(insn) not in ENGINES or opcode_of(insn) in _STRUCTURED


def has_sync(insn: Dict[str, Any]) -> bool:
    s = insn.get("sync_info")
    return isinstance(s, dict) and bool(s.get("on_wait") or s.get("on_update"))


def _dicts(v: Any):
    """Every dict inside a module (depth first)."""
    stack = [v]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            yield v
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))


def used_ids(mod: Dict[str, Any]) -> set:
    """Every semaphore id a module names (waits, updates, groups, queues)."""
    ids = set()
    for v in _dicts(mod):
        if isinstance(v.get("sync_info"), dict):
            si = v["sync_info"]
            for e in (si.get("on_wait") or []) + (si.get("on_update") or []):
                if isinstance(e, dict) and isinstance(e.get("id"), int):
                    ids.add(e["id"])
        for k in ("sema_group", "semaphores", "use_special_sema"):
            if isinstance(v.get(k), list):
                ids.update(i for i in v[k] if isinstance(i, int))
    return ids


# ---- footprints ----------------------------------------------------------------------

class _Geometry:
    """Where each location lives, read from the loaded tables."""

    def __init__(self, module: Any, prog: int = -1) -> None:
        from ._load.module import _string
        t = module.tables
        s = t["strings"]
        self.mem = {v: k for k, v in _dtables_enums()["MEM"].items()}
        funcs = [_string(s, int(f["name"])) for f in t["funcs"]]
        mine = [prog < 0 or int(f["prog"]) == prog for f in t["funcs"]]
        self.locs: Dict[Tuple[str, str], Tuple] = {}
        self.sets: Dict[Tuple[str, str], Tuple] = {}
        self.cache: Dict[int, Tuple[Dict[str, Any], list]] = {}
        #: id(instruction) -> (footprint as a consumer, as a producer): a DMATrigger
        #: consumes its blocks' accesses, the drain after it produces them
        self.roles: Dict[int, Tuple[list, list]] = {}
        self.queues: Any = None
        #: id(DMATrigger) -> (semaphore, footprint, queue engine) of an overlapped trigger
        self.fired: Dict[int, Tuple[int, list, str]] = {}
        self.fired_count: Dict[int, int] = {}    # its block's count in its segment
        self.drains: Dict[int, Dict[str, Any]] = {}     # id(DMATrigger) -> its drain
        self.kept: set = set()                   # id(block) of blocks left as written
        self.overlap = True
        sets = t["sets"]
        for li, loc in enumerate(t["locs"]):
            st = sets[int(loc["set"])]
            if not mine[int(st["func"])]:       # another core's module (a group load)
                continue
            fn = funcs[int(st["func"])]
            alias = int(st["alias"])
            geo = self._geo(li, loc, sets, t)
            if alias >= 0:                      # a Call argument: its caller's storage
                geo = ("alias",)
            self.locs[(fn, _string(s, int(loc["name"])))] = geo
            self.sets.setdefault((fn, _string(s, int(st["name"]))), geo)

    def _geo(self, li, loc, sets, t):
        mem = self.mem.get(int(loc["memtype"]), "?")
        parts, bpp = int(loc["parts"]), int(loc["bpp"])
        if int(loc["placed"]) and mem in ("SB", "PSUM"):
            return (mem, int(loc["base"]), int(loc["addr"]), parts, bpp, False)
        if int(loc["placed"]) == 2 and mem == "DRAM":     # one tensor for every core:
            return ((SHARED, int(loc["addr"])), 0, 0, parts, bpp, False)   # rows x bytes
        if int(loc["placed"]) and mem == "DRAM":
            return ("DRAM-arena", 0, int(loc["addr"]), parts, bpp, True)
        return (("loc", li), 0, 0, parts, bpp, False)

    def lookup(self, func: str, op: Dict[str, Any]):
        if isinstance(op.get("memref"), str):
            return self.locs.get((func, op["memref"]))
        name = op.get("memsetref")
        if isinstance(name, str):
            g = self.sets.get((func, name))
            if g is None and name.endswith("_set"):
                g = self.sets.get((func, name[:-4])) or self.locs.get((func, name[:-4]))
            return g
        return None


def _dtables_enums():
    from . import _birsim
    return _birsim.enums


@functools.lru_cache(maxsize=None)
def _itemsize(dtype: Any) -> int:
    from .dtypes import numpy_dtype
    try:
        return numpy_dtype(dtype).itemsize
    except Exception:                       # noqa: BLE001 -- unknown: the loader says
        return 4


def operand_box(geo, op: Dict[str, Any]):
    """(space, p0, p1, b0, b1): the partitions and bytes ``op`` may touch (half-open)."""
    if geo[0] == "alias":
        return ("alias", 0, 1 << 30, 0, 1 << 62)
    space, base, addr, parts, bpp, flat = geo
    whole = (space, base, base + parts, addr, addr + bpp) if not flat else \
        (space, 0, 1, addr, addr + parts * bpp)
    ap = op.get("ap")
    off = op.get("offset", 0)
    if op.get("kind") not in ("physical_ap", None) or not isinstance(off, int) \
            or not isinstance(ap, list) or not ap:
        return whole
    try:
        steps = [(int(s), int(n)) for s, n in ap]
    except (TypeError, ValueError):
        return whole
    size = _itemsize(op.get("dtype", "float32"))
    lo = hi = off
    for s, n in steps[1:]:
        lo += min(0, s * (n - 1))
        hi += max(0, s * (n - 1))
    s0, n0 = steps[0]
    b0, b1 = size * lo, size * (hi + 1)
    if flat:
        return (space, 0, 1, addr + b0 + min(0, s0 * (n0 - 1)) * size,
                addr + b1 + max(0, s0 * (n0 - 1)) * size)
    if bpp > 0 and (s0 * size) % bpp == 0 and b0 >= 0 and b1 <= (b0 // bpp + 1) * bpp:
        row = b0 // bpp
        pstep = s0 * size // bpp
        p0, p1 = row, row + pstep * (n0 - 1) + 1
        return (space, base + p0, base + p1, addr + b0 - row * bpp, addr + b1 - row * bpp)
    if bpp <= 0:
        return whole
    f0 = b0 + min(0, s0 * (n0 - 1)) * size
    f1 = b1 + max(0, s0 * (n0 - 1)) * size
    return (space, base + f0 // bpp, base + (f1 - 1) // bpp + 1, addr, addr + bpp)


def footprint(geometry: _Geometry, func: str, insn: Dict[str, Any], cache: bool = True):
    """[(box, is_write)] of an instruction's memory operands (computed once per
    instruction object and pass; a DMA descriptor, whose names resolve in the function
    of the trigger that fires it, with ``cache=False``)."""
    key = id(insn)
    hit = geometry.cache.get(key) if cache else None
    if hit is not None and hit[0] is insn:
        return hit[1]
    if key in geometry.roles:
        return geometry.roles[key][0] + geometry.roles[key][1]
    out = []
    for side, write in (("ins", False), ("outs", True)):
        ops = insn.get(side)
        for op in ops if isinstance(ops, list) else ():
            if not isinstance(op, dict) or op.get("kind", "physical_ap") not in _AP_KINDS:
                continue
            geo = geometry.lookup(func, op)
            if geo is None:
                continue
            out.append((operand_box(geo, op), write))
    if cache:
        geometry.cache[key] = (insn, out)
    return out


def _overlap(a, b) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]


def conflicts(fa, fb) -> bool:
    for a, wa in fa:
        for b, wb in fb:
            if (wa or wb) and _overlap(a, b):
                return True
    return False


class _Queues:
    """The DMA queues of a module (either spelling): each block with its descriptors,
    and the engines of the DMATriggers that may fire it."""

    def __init__(self, mod: Dict[str, Any]) -> None:
        self.blocks: Dict[Any, List[Tuple[Dict[str, Any], List[Dict[str, Any]]]]] = {}
        self.engines: Dict[int, set] = {}
        self.mine: set = set()
        for q in mod.get("dma_queues") or []:
            if isinstance(q, dict):
                self.blocks[q.get("name")] = [
                    (b, [d for d in b.get("instructions") or [] if isinstance(d, dict)])
                    for b in q.get("dma_blocks") or [] if isinstance(b, dict)]
        for q in mod.get("queues") or []:
            if not isinstance(q, dict):
                continue
            out = self.blocks.setdefault(q.get("name"), [])
            for outer in q.get("blocks") or []:
                for b in (outer.get("instructions") or []) if isinstance(outer, dict) else ():
                    if isinstance(b, dict):
                        out.append((b, [d for nb in b.get("blocks") or [] if isinstance(nb, dict)
                                        for d in nb.get("instructions") or []
                                        if isinstance(d, dict)]))

        def walk(v):
            if isinstance(v, dict):
                if opcode_of(v) == "DMATrigger":
                    for b, _ in self.trigger_blocks(v) or ():
                        self.engines.setdefault(id(b), set()).add(engine_of(v))
                for x in v.values():
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
        walk(mod.get("functions"))
        walk(mod.get("nki_functions"))

    def trigger_blocks(self, t: Dict[str, Any]):
        """The blocks a DMATrigger may fire (with their descriptors), or None."""
        blocks = self.blocks.get(t.get("queue"))
        if not blocks:
            return None
        names = t.get("dma_blocks")
        if not names:
            return blocks
        by_name = {b.get("name"): (b, d) for b, d in blocks}
        if not isinstance(names, list) or any(n not in by_name for n in names):
            return None
        return [by_name[n] for n in names]


# ---- the pass ---------------------------------------------------------------------------

class _Ids:
    def __init__(self, used: Any) -> None:
        self.used = set(used)
        self.pair: Dict[Tuple[str, str], int] = {}

    def get(self, producer: str, consumer: str) -> int:
        key = (producer, consumer)
        if key not in self.pair:
            i = next((i for i in range(256) if i not in self.used), None)
            if i is None:
                raise ProgramError("birsim.synchronize: no free semaphore id (all 256 are used)")
            self.used.add(i)
            self.pair[key] = i
        return self.pair[key]


def _sync_segment(seg: List[Dict[str, Any]], func: str, geometry: _Geometry,
                  ids: _Ids) -> Tuple[set, list, list]:
    """Add waits and updates to the instructions of one segment (a list of dicts); the
    semaphore ids it used, the footprints, and the waits a reset at its end needs (an
    overlapped DMA queue's last block of the segment)."""
    fps = [footprint(geometry, func, insn) for insn in seg]
    # An overlapped DMATrigger's blocks run on its queue after it: a virtual instruction
    # right after the trigger, on the queue's own "engine" (its blocks complete in firing
    # order, each adding 1 to the queue's semaphore), producing the descriptors' accesses.
    items: List[Dict[str, Any]] = []
    for insn in seg:
        items.append(insn)
        if id(insn) in geometry.fired:
            items.append({"_fired": insn})
    cons: List[list] = []
    prod: List[list] = []
    engines: List[str] = []
    k = 0
    for insn in items:
        if "_fired" in insn:
            _, fp, veng = geometry.fired[id(insn["_fired"])]
            cons.append([])
            prod.append(fp)
            engines.append(veng)
        else:
            fp = fps[k]
            k += 1
            r = geometry.roles.get(id(insn), (fp, fp))
            cons.append(r[0])
            prod.append(r[1])
            engines.append(engine_of(insn))
    index: List[int] = []                   # position of each instruction on its engine
    count = {e: 0 for e in ENGINES}
    for e in engines:
        count.setdefault(e, 0)
        index.append(count[e])
        count[e] += 1
    vcs: List[Dict[str, int]] = []
    last: Dict[str, Dict[str, int]] = {}
    signal: Dict[Tuple[int, str], int] = {}      # (producer, consumer engine) -> count
    counts: Dict[Tuple[str, str], int] = {}
    last_signaller: Dict[Tuple[str, str], int] = {}
    used = set()
    tail: Dict[int, Dict[str, Any]] = {}         # queue semaphore -> wait for its last block
    for j, insn in enumerate(items):
        e = engines[j]
        if "_fired" in insn:                    # forked from its trigger, after the last block
            vc = dict(last.get(e, {}))
            for t, v in vcs[j - 1].items():
                if v > vc.get(t, -1):
                    vc[t] = v
            vc[e] = index[j]
            vcs.append(vc)
            last[e] = vc
            sid = geometry.fired[id(insn["_fired"])][0]
            geometry.fired_count[id(insn["_fired"])] = index[j] + 1
            used.add(sid)
            tail[sid] = {"from": insn["_fired"].get("name", ""), "id": sid,
                         "wait_value": index[j] + 1}
            continue
        own_queue = geometry.fired.get(id(insn), (None, None, None))[2]
        vc = dict(last.get(e, {}))
        vc[e] = index[j]
        waits = []
        while True:
            need: Dict[str, int] = {}
            open_engines = {p for p in count if p != e and p != own_queue and count[p]}
            for i in range(j - 1, -1, -1):     # backwards: the latest conflict per engine
                p = engines[i]
                if p not in open_engines:
                    continue
                if vc.get(p, -1) >= index[i]:
                    open_engines.discard(p)    # this and every earlier one are ordered
                elif conflicts(prod[i], cons[j]):
                    need[p] = i
                    open_engines.discard(p)
                if not open_engines:
                    break
            if not need:
                break
            i = max(need.values())             # the latest producer covers the most
            p = engines[i]
            if "_fired" in items[i]:           # its blocks signal already: count k is block k
                sid = geometry.fired[id(items[i]["_fired"])][0]
                waits.append({"from": items[i]["_fired"].get("name", ""), "id": sid,
                              "wait_value": index[i] + 1})
            else:
                key = (p, e)
                if (i, e) not in signal:
                    assert last_signaller.get(key, -1) < i
                    counts[key] = counts.get(key, 0) + 1
                    signal[(i, e)] = counts[key]
                    last_signaller[key] = i
                    sid = ids.get(p, e)
                    si = items[i].setdefault("sync_info", {})
                    si.setdefault("on_update", []).append({"id": sid, "update_value": 1})
                sid = ids.get(p, e)
                used.add(sid)
                waits.append({"from": items[i].get("name", ""), "id": sid,
                              "wait_value": signal[(i, e)]})
            for t, v in vcs[i].items():
                if v > vc.get(t, -1):
                    vc[t] = v
        if waits:
            insn.setdefault("sync_info", {}).setdefault("on_wait", []).extend(waits)
        if "sync_info" in insn:
            insn["sync_info"].setdefault("on_wait", [])
            insn["sync_info"].setdefault("on_update", [])
        vcs.append(vc)
        last[e] = vc
    out = []
    for s in sorted(tail):                       # unless a real instruction already waits
        veng = next(engines[j] for j, it in enumerate(items)    # for the last block
                    if "_fired" in it and geometry.fired[id(it["_fired"])][0] == s)
        n = tail[s]["wait_value"] - 1
        if not any(vcs[j].get(veng, -1) >= n for j, it in enumerate(items) if "_fired" not in it):
            out.append(tail[s])
    return used, fps, out


def _fence(opcode, ids, where, n):
    d = {"name": f"sync_{'reset' if ids else 'fence'}_{where}_{n}", "opcode": opcode,
         "engine": "ALL", "ins": [], "outs": []}
    if ids:
        d["sema_group"] = sorted(ids)
    return d


def _drain_triggers(insns, func, geometry, ids, overlap=True) -> bool:
    """Give each DMATrigger of a block a semaphore of (queue, engine) its blocks add 1
    to when they complete; the trigger consumes the blocks' accesses
    (``geometry.roles``). Overlapped (the default): the blocks produce them on the queue's
    own engine (``geometry.fired``, see ``_sync_segment``), so whatever needs them waits
    for that block's count and nothing else waits. Drained: an EventSemaphore right after
    the trigger waits for it and takes it back (so it is 0 again), and produces them.
    False (the block is left as written) when a trigger's blocks carry sync of their own
    or are fired from another engine too."""
    found = [(pos, i) for pos, i in enumerate(insns) if opcode_of(i) == "DMATrigger"]
    plans = []
    for pos, t in found:
        blocks = geometry.queues.trigger_blocks(t)
        if blocks is None or any(has_sync(b) and id(b) not in geometry.queues.mine
                                 for b, _ in blocks) or any(
                geometry.queues.engines.get(id(b), {engine_of(t)}) != {engine_of(t)}
                for b, _ in blocks):
            return False
        plans.append((pos, t, blocks))
    for pos, t, blocks in reversed(plans):
        e, q = engine_of(t), t.get("queue")
        sid = ids.get("queue " + str(q), e)
        for b, _ in blocks:
            geometry.queues.mine.add(id(b))
            upd = b.setdefault("sync_info", {}).setdefault("on_update", [])
            if {"id": sid, "update_value": 1} not in upd:
                upd.append({"id": sid, "update_value": 1})
        fp = [box for _, descs in blocks for d in descs
              for box in footprint(geometry, func, d, cache=False)]
        geometry.roles[id(t)] = (fp, [])
        if overlap:
            geometry.fired[id(t)] = (sid, fp, "queue %s@%s" % (q, e))
            continue
        drain = {"name": f"sync_drain_{t.get('name', 'trigger')}", "opcode": "EventSemaphore",
                 "engine": e, "ins": [], "outs": [], "sync_info": {
                     "on_wait": [{"from": t.get("name", ""), "id": sid, "wait_value": 1}],
                     "on_update": [{"type": "semaphore", "id": sid, "mode": "sem-sub-imm",
                                    "value": 1}]}}
        insns.insert(pos + 1, drain)
        geometry.roles[id(drain)] = ([], fp)
        geometry.drains[id(t)] = drain
    return True


def _crosses(mine, all_fp) -> bool:
    """Whether a block's last segment conflicts with an access on another engine in some
    block of its region (the next block, or the next loop trip, runs unjoined)."""
    if not any(fp for _, fp in mine):
        return False
    for other in all_fp:
        if other is None:                 # a block left as it was: assume it conflicts
            return True
        for e1, f1 in mine:
            if any(e1 != e2 and conflicts(f1, f2) for e2, f2 in other):
                return True
    return False


def _region(blocks, func, geometry, ids, stats, funcs_todo):
    """Synchronise the blocks of one region (a function body or a loop body)."""
    plan = []                 # per block: its segments (lists of positions) or None
    for b in blocks:
        insns = b.get("instructions") if isinstance(b, dict) else None
        if not isinstance(insns, list):
            plan.append(None)
            continue
        for insn in insns:
            if isinstance(insn, dict) and isinstance(insn.get("blocks"), list):
                _region(insn["blocks"], func, geometry, ids, stats, funcs_todo)
            callee = insn.get({"Call": "target", "NKIKernel": "func"}.get(opcode_of(insn), ""),
                              None) if isinstance(insn, dict) else None
            if isinstance(callee, str):
                funcs_todo.append(callee)
        if not all(isinstance(i, dict) for i in insns) or any(has_sync(i) for i in insns) \
                or not _drain_triggers(insns, func, geometry, ids, geometry.overlap):
            plan.append(None)             # synchronised by its author, or not ours to read
            stats["kept_blocks"] += 1
            geometry.kept.add(id(b))
            continue
        segs, cur = [], []
        for pos, insn in enumerate(insns):
            if is_rendezvous(insn):
                segs.append((cur, pos))
                cur = []
            else:
                cur.append(pos)
        segs.append((cur, len(insns)))
        plan.append(segs)
    # accesses per block, for the fences
    all_fp = []
    for b, segs in zip(blocks, plan):
        if segs is None:
            all_fp.append(None)
            continue
        insns = b["instructions"]
        all_fp.append([(engine_of(insns[p]), footprint(geometry, func, insns[p]))
                       for seg, _ in segs for p in seg])
    for bi, (b, segs) in enumerate(zip(blocks, plan)):
        if segs is None:
            continue
        insns = b["instructions"]
        inserts = []              # (position, instruction)
        for si, (seg, end) in enumerate(segs):
            is_last = si == len(segs) - 1
            terms = [p for p in seg if opcode_of(insns[p]) in _TERMINATORS] if is_last else []
            body = [p for p in seg if p not in terms]
            used, fps, tail = _sync_segment([insns[p] for p in body], func, geometry, ids)
            stats["instructions"] += len(seg)
            fence = False
            if terms:                 # terminators read after everything of their block
                tfps = [(engine_of(insns[p]), footprint(geometry, func, insns[p])) for p in terms]
                fence = any(e1 != engine_of(insns[p]) and conflicts(f1, fps[k])
                            for e1, f1 in tfps for k, p in enumerate(body))
            if is_last and not fence and not used:    # (a reset is a fence already)
                mine = [(engine_of(insns[p]), footprint(geometry, func, insns[p])) for p in seg]
                fence = _crosses(mine, all_fp)
            if used or fence:
                at = end
                if is_last:               # before the block's terminators
                    while at > 0 and opcode_of(insns[at - 1]) in _TERMINATORS:
                        at -= 1
                op = "GroupResetSemaphores" if used else "AllEngineBarrier"
                d = _fence(op, used, b.get("name", "b"), len(inserts))
                if tail:                  # the queue's last block lands before the reset
                    d["sync_info"] = {"on_wait": tail, "on_update": []}
                inserts.append((at, d))
                stats["fences"] += 1
        for at, d in reversed(inserts):
            insns.insert(at, d)
        stats["blocks"] += 1


def _sync_module(mod, module_obj, stats, overlap_dma=True, prog=-1):
    geometry = _Geometry(module_obj, prog)
    geometry.overlap = overlap_dma
    geometry.queues = _Queues(mod)
    ids = _Ids(used_ids(mod))
    every = [f for f in (mod.get("functions") or []) + (mod.get("nki_functions") or [])
             if isinstance(f, dict)]
    funcs = {f.get("name"): f for f in every}
    done = set()
    todo = [f.get("name") for f in every]
    while todo:
        name = todo.pop(0)
        if name in done or name not in funcs:
            continue
        done.add(name)
        f = funcs[name]
        if isinstance(f.get("blocks"), list):
            _region(f["blocks"], name, geometry, ids, stats, todo)
    stats["semaphores"] += len(ids.pair)
    return geometry


# ---- between cores ----------------------------------------------------------------------

_XRDV = "ALL"          # the chain of a core's rendezvous


class _Node:
    """One top-level instruction of a core's entry function, with what it does to the
    tensors every core sees."""

    __slots__ = ("core", "idx", "insn", "block", "engine", "rdv", "owner", "trigger",
                 "fp", "k", "signal", "geo")

    def __init__(self, core: int, idx: int, insn: Dict[str, Any], block: Dict[str, Any],
                 fp: list, geo: Any) -> None:
        self.core, self.idx, self.insn, self.block, self.fp = core, idx, insn, block, fp
        self.geo = geo
        self.engine = engine_of(insn)
        self.rdv = is_rendezvous(insn)
        self.owner = opcode_of(insn) in _STRUCTURED
        self.trigger = opcode_of(insn) == "DMATrigger"
        self.k: Dict[Any, int] = {}          # what completed before it (see _known)
        self.signal: Optional[Dict[str, Any]] = None    # the instruction that signals it

    @property
    def chain(self) -> str:
        """The in-order stream its completion is signalled from."""
        return _XRDV if self.rdv else self.engine

    def where(self) -> str:
        return "core %d, block '%s', instruction '%s'" % (
            self.core, self.block.get("name", "?"), self.insn.get("name", "?"))


def _shared_fp(geometry, func, insn, funcs) -> list:
    """[(box, is_write)] of ``insn`` (a region owner: everything in its body; a Call or
    NKIKernel: its shared argument tensors, read and written) on the shared tensors."""
    out = [(b, w) for b, w in footprint(geometry, func, insn) if _is_shared(b[0])]
    if isinstance(insn.get("blocks"), list):
        for b in insn["blocks"]:
            for i in (b.get("instructions") or []) if isinstance(b, dict) else ():
                if isinstance(i, dict):
                    out += _shared_fp(geometry, func, i, funcs)
    op = opcode_of(insn)
    if op in ("Call", "NKIKernel"):
        names = list((insn.get("arguments") or {}).values()) if op == "Call" else \
            list(insn.get("func_args") or []) + list(insn.get("func_outs") or [])
        for n in names:
            g = geometry.lookup(func, {"memsetref": n}) if isinstance(n, str) else None
            if g is not None and _is_shared(g[0]):
                box = operand_box(g, {})
                out += [(box, False), (box, True)]
    return out


def _is_shared(space) -> bool:
    return isinstance(space, tuple) and space[0] == SHARED


def _direction(a: "_Node", b: "_Node") -> int:
    """+1: a must come before b, -1: after, 0: they do not conflict. A write comes before
    a read of its bytes on another core (the reader wants the data); two writes, or two
    read-modify-writes, go in core order."""
    ab = any(wa and not wb and _overlap(x, y) for x, wa in a.fp for y, wb in b.fp)
    ba = any(wb and not wa and _overlap(x, y) for x, wa in a.fp for y, wb in b.fp)
    if ab != ba:
        return 1 if ab else -1
    if ab or any(wa and wb and _overlap(x, y) for x, wa in a.fp for y, wb in b.fp):
        return 1 if a.core < b.core else -1
    return 0


def _candidates(xs: List["_Node"], ys: List["_Node"]):
    """The pairs (x, y) that touch a common byte, one of them writing (a grid over each
    space's bytes, so tiles of one tensor are not compared all against all)."""
    widths = sorted(box[4] - box[3] for y in ys for box, _ in y.fp)
    if not widths or not xs:
        return []
    cell = max(1, widths[len(widths) // 2])
    grid: Dict[Any, list] = {}
    wide: Dict[Any, list] = {}
    for y in ys:
        for box, w in y.fp:
            c0, c1 = box[3] // cell, (box[4] - 1) // cell
            if c1 - c0 > 16:
                wide.setdefault(box[0], []).append((box, w, y))
            else:
                for c in range(c0, c1 + 1):
                    grid.setdefault((box[0], c), []).append((box, w, y))
    out = []
    for x in xs:
        seen = set()
        for box, w in x.fp:
            c0, c1 = box[3] // cell, (box[4] - 1) // cell
            cands = list(wide.get(box[0], ()))
            if c1 - c0 > 16:
                cands += [e for (sp, _), es in grid.items() if sp == box[0] for e in es]
            else:
                for c in range(c0, c1 + 1):
                    cands += grid.get((box[0], c), ())
            for b2, w2, y in cands:
                if (w or w2) and y.idx not in seen and _overlap(box, b2):
                    seen.add(y.idx)
                    out.append((x, y))
    return out


def _known(p: "_Node", k: Dict[Any, int]) -> bool:
    """Whether knowledge ``k`` orders ``p``'s completion: a later (or the same) node on
    its engine or a later rendezvous of its core completed (a DMATrigger's blocks: only a
    later rendezvous, which follows the reset that waits for them, or its own signal)."""
    if k.get((p.core, _XRDV), -1) > p.idx or (p.rdv and k.get((p.core, _XRDV), -1) == p.idx):
        return True
    if p.trigger:
        return k.get((p.core, "blocks", p.idx), 0) > 0
    return k.get((p.core, p.engine), -1) >= p.idx


def _join(a: Dict[Any, int], b: Dict[Any, int]) -> None:
    for t, v in b.items():
        if v > a.get(t, -1):
            a[t] = v


def _cross_cores(mods, geos, stats) -> None:
    """Order the conflicting accesses of different cores to the tensors they share with
    semaphore updates that name the consumer's core (``target_core``)."""
    timelines: List[List[_Node]] = []
    entries: List[Tuple[Dict[str, Any], list]] = []
    for c, (mod, geo) in enumerate(zip(mods, geos)):
        every = [f for f in (mod.get("functions") or []) if isinstance(f, dict)]
        entry: Dict[str, Any] = next((f for f in every if f.get("name") == "main"),
                                     every[0] if every else {})
        nodes: List[_Node] = []
        branches = []
        for b in entry.get("blocks") or []:
            for insn in b.get("instructions") or [] if isinstance(b, dict) else ():
                if not isinstance(insn, dict):
                    continue
                if opcode_of(insn) in ("CompareAndBranch", "UnconditionalBranch", "Break"):
                    branches.append((b, insn))
                nodes.append(_Node(c, len(nodes), insn, b,
                                   _shared_fp(geo, entry.get("name"), insn, every), geo))
        timelines.append(nodes)
        entries.append((entry, branches))
    if any(_targeted_ids(m) for m in mods):
        return                   # the cores are synchronised by their author: kept as written
    # which producers each node needs (per pair of cores); a block kept as written is
    # its author's (its accesses are ordered by the sync it has)
    need: Dict[Tuple[int, int], List[_Node]] = {}
    touching = [[n for n in t if n.fp and id(n.block) not in n.geo.kept] for t in timelines]
    for c1 in range(len(timelines)):
        for c2 in range(c1 + 1, len(timelines)):
            for a, b in _candidates(touching[c1], touching[c2]):
                d = _direction(a, b)
                if d:
                    first, second = (a, b) if d > 0 else (b, a)
                    if first.trigger and id(first.insn) in first.geo.drains:
                        continue            # its drain (next on its engine) produces
                    need.setdefault((second.core, second.idx), []).append(first)
    if not need:
        return
    for c, (entry, branches) in enumerate(entries):
        if branches and touching[c]:
            b, insn = branches[0]
            raise ProgramError(
                "birsim.synchronize: core %d's function '%s' branches (block '%s', "
                "instruction '%s'), so its accesses to the tensors the cores share cannot "
                "be ordered with another core's: cross-core edges need the entry "
                "function's blocks to run once each, in order (loops as Loop instructions)"
                % (c, entry.get("name"), b.get("name"), insn.get("name")))
    # ids per consumer core: none its module uses or another core's updates target
    used = [used_ids(m) for m in mods]
    for m in mods:
        for t, i in _targeted_ids(m):
            if 0 <= t < len(used):
                used[t].add(i)
    xids = [_Ids(u) for u in used]
    nsig: Dict[Any, Dict[int, list]] = {}     # semaphore -> {producer idx: its waits}
    last_on: List[Dict[str, Dict[Any, int]]] = [{} for _ in timelines]
    rdv_k: List[Dict[Any, int]] = [{} for _ in timelines]
    before: Dict[int, list] = {}              # id(insn) -> instructions to insert before
    after: Dict[int, list] = {}
    pos = [0] * len(timelines)
    done = set()
    while any(pos[c] < len(t) for c, t in enumerate(timelines)):
        progressed = False
        for c, t in enumerate(timelines):
            while pos[c] < len(t):
                n = t[pos[c]]
                wanted = need.get((c, n.idx), [])
                if any((p.core, p.idx) not in done for p in wanted):
                    break
                _xwait(n, wanted, last_on[c], rdv_k[c], xids[c], nsig, before, after, stats)
                done.add((c, n.idx))
                pos[c] += 1
                progressed = True
        if not progressed:
            stuck = [t[pos[c]] for c, t in enumerate(timelines) if pos[c] < len(t)]
            raise ProgramError(
                "birsim.synchronize: the cores' accesses to shared tensors form a cycle "
                "(each core's block order against the order the data needs): %s"
                % "; ".join("%s waits for %s" % (n.where(), ", ".join(
                    p.where() for p in need.get((n.core, n.idx), [])
                    if (p.core, p.idx) not in done)) for n in stuck))
    # each wait counts the signals of its semaphore up to its producer's, in chain order
    for signalled in nsig.values():
        for rank, i in enumerate(sorted(signalled), 1):
            for w in signalled[i]:
                w["wait_value"] = rank
    # a reset of each core's cross-core semaphores once every signal has landed
    for c, (entry, _) in enumerate(entries):
        ids = sorted(xids[c].pair.values())
        if not ids or not entry.get("blocks"):
            continue
        stats["semaphores"] += len(ids)
        b = entry["blocks"][-1]
        insns = b["instructions"]
        at = len(insns)
        while at > 0 and opcode_of(insns[at - 1]) in _TERMINATORS:
            at -= 1
        reset: Dict[str, Any] = {"name": "sync_xreset_core%d" % c,
                                 "opcode": "GroupResetSemaphores",
                                 "engine": "ALL", "ins": [], "outs": [], "sema_group": ids}
        insns.insert(at, reset)
    for entry, _ in entries:
        for b in entry.get("blocks") or []:
            if not isinstance(b, dict) or not isinstance(b.get("instructions"), list):
                continue
            out = []
            for insn in b["instructions"]:
                out += before.get(id(insn), [])
                out.append(insn)
                out += after.get(id(insn), [])
            b["instructions"] = out


def _targeted_ids(mod) -> list:
    """(core, id) of every update of ``mod`` that names a ``target_core``."""
    out = []
    for v in _dicts(mod):
        si = v.get("sync_info")
        if isinstance(si, dict):
            for u in si.get("on_update") or []:
                if isinstance(u, dict) and isinstance(u.get("target_core"), int) \
                        and isinstance(u.get("id"), int):
                    out.append((u["target_core"], u["id"]))
    return out


def _signal(p: "_Node", after: Dict[int, list]) -> Dict[str, Any]:
    """The instruction whose completion signals ``p``'s (made once): ``p`` itself, an
    ``EventSemaphore`` on ``ALL`` right after a region owner, or, after a DMATrigger, its
    drain or an ``EventSemaphore`` on its engine waiting for its block's count."""
    if p.signal is not None:
        return p.signal
    geo = p.geo
    if p.trigger:
        if id(p.insn) in geo.drains:
            p.signal = geo.drains[id(p.insn)]
            return p.signal
        if id(p.insn) not in geo.fired_count:
            raise ProgramError(
                "birsim.synchronize: %s is a DMATrigger whose blocks keep their own sync: "
                "its completion cannot be signalled to another core" % p.where())
        sid = geo.fired[id(p.insn)][0]
        waits = [{"from": p.insn.get("name", ""), "id": sid,
                  "wait_value": geo.fired_count[id(p.insn)]}]
        engine = p.engine
    elif p.rdv:
        waits, engine = [], "ALL"
    else:
        p.signal = p.insn
        return p.signal
    p.signal = {"name": "sync_xsignal_%s" % p.insn.get("name", "i"), "opcode": "EventSemaphore",
                "engine": engine, "ins": [], "outs": [],
                "sync_info": {"on_wait": waits, "on_update": []}}
    after.setdefault(id(p.insn), []).append(p.signal)
    return p.signal


def _xwait(n, wanted, last_on, rdv_k, xids, nsig, before, after, stats) -> None:
    """The waits node ``n`` needs for the producers ``wanted`` (other cores, all
    processed), fewest first: the latest producer of a chain covers the earlier ones."""
    if n.rdv:
        k: Dict[Any, int] = dict(rdv_k)
        for v in last_on.values():
            _join(k, v)
        k[(n.core, _XRDV)] = n.idx
    else:
        k = dict(rdv_k)
        _join(k, last_on.get(n.engine, {}))
        k[(n.core, n.engine)] = n.idx
    waits = []
    chain = n.chain
    while True:
        open_ = [p for p in wanted if not _known(p, k)]
        if not open_:
            break
        p = max(open_, key=lambda q: (q.idx, q.core))
        sig = _signal(p, after)
        key = ("core %d" % p.core, p.chain)
        sid = xids.get(key, chain)
        signalled = nsig.setdefault((n.core, key, chain), {})
        if p.idx not in signalled:
            signalled[p.idx] = []
            sig.setdefault("sync_info", {}).setdefault("on_wait", [])
            sig["sync_info"].setdefault("on_update", []).append(
                {"type": "semaphore", "id": sid, "mode": "sem-inc", "value": 1,
                 "target_core": n.core})
        w = {"from": p.insn.get("name", ""), "id": sid, "wait_value": 0}
        signalled[p.idx].append(w)          # its value: p's rank on its chain (at the end)
        waits.append(w)
        _join(k, p.k)
        if p.trigger:
            k[(p.core, "blocks", p.idx)] = 1
    if waits:
        stats["cross_core_waits"] += len(waits)
        if n.owner:                         # a region owner: a rendezvous right before it
            d: Dict[str, Any] = {"name": "sync_xwait_%s" % n.insn.get("name", "region"),
                 "opcode": "EventSemaphore", "engine": "ALL", "ins": [], "outs": [],
                 "sync_info": {"on_wait": waits, "on_update": []}}
            before.setdefault(id(n.insn), []).append(d)
        else:
            si = n.insn.setdefault("sync_info", {})
            si.setdefault("on_wait", []).extend(waits)
            si.setdefault("on_update", [])
    n.k = k
    if n.rdv:
        rdv_k.clear()
        rdv_k.update(k)
    else:
        last_on[n.engine] = k


def synchronize(program: Any, *, stats: Optional[Dict[str, int]] = None,
                overlap_dma: bool = True) -> Any:
    """A copy of ``program`` with counting semaphores ordering every pair of conflicting
    accesses on different engines (see the module docstring and docs/sync.md).

    ``program`` is a BIR-JSON module dict (bare or ``{"module": ...}``), JSON text or a
    path, or a list of those (one per core); the result has the same form (a dict for
    text or a path). The input is not modified. ``stats``, when given, receives counts:
    ``instructions`` analysed, ``blocks`` synchronised, ``kept_blocks`` (already
    synchronised, left as they were), ``semaphores`` and ``fences`` inserted, and
    ``cross_core_waits`` (a module list: waits between cores).
    ``overlap_dma=False`` drains each DMATrigger's blocks on its engine right after it
    (the queue no longer overlaps its engine) instead of making only what needs their
    accesses wait for them."""
    from .loader import load
    prog = read_program(program)
    st = {"instructions": 0, "blocks": 0, "kept_blocks": 0, "semaphores": 0, "fences": 0,
          "cross_core_waits": 0}
    progs = prog if isinstance(prog, list) else [prog]
    for p in progs:
        if not isinstance(p, dict):
            raise ProgramError("birsim.synchronize: a module must be a JSON object")
    if len(progs) > 1:                     # one module per core: shared tensors by name
        loaded = cast(List[Any], load(json.dumps(progs)))
        geos = [_sync_module(_mod(p), loaded[k], st, overlap_dma, k)
                for k, p in enumerate(progs)]
        _cross_cores([_mod(p) for p in progs], geos, st)
    else:
        for p in progs:
            _sync_module(_mod(p), load(json.dumps(p)), st, overlap_dma)
    if stats is not None:
        stats.update(st)
    return prog
