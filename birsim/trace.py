"""Timeline traces: ``Simulator(trace=True)`` -> ``sim.trace``.

``sim.trace`` is a :class:`Trace`, a list of :class:`TraceRecord` in execution order (the
first four fields are the historical ``(core, engine, instruction, opcode)``). Each
record also carries the instruction's function, block and position in the block, its
``step`` (index in execution order), and a start time and duration from the cost model
below; ``waits_on`` lists the steps whose semaphore/event updates released its waits.

``sim.trace.export("run.json")`` writes Chrome/Perfetto trace-event JSON
(``{"traceEvents": [...]}``; open it in ui.perfetto.dev or chrome://tracing): one process
per core (in core order), one named track per engine, a slice per instruction (starting
and ending on whole nanoseconds, so no slice overlaps its neighbour and Perfetto shows
them all), and a flow arrow from each update to the wait it released.

The cost model
--------------
birsim does not model time; the timeline is a *picture* of the schedule under a simple,
documented model (not calibrated against hardware), good for seeing which engine waits
on which and where a pipeline serialises:

- an instruction costs ``base + per_unit * units`` nanoseconds, with ``(base, per_unit,
  unit)`` from :data:`ENGINE_COSTS` for its engine, overridden per opcode by
  :data:`OPCODE_COSTS`; ``unit`` is ``"bytes"`` (all bytes read and written, for DMA) or
  ``"elements"`` (elements per partition of its largest operand: the compute engines
  work on all partitions at once);
- it starts when its engine (on its core) is free, when every instruction whose update
  released one of its waits has finished (the most recent update of that semaphore or
  event before it ran), and not before the block instance it belongs to started;
- a block instance (a block entered, or a loop trip) starts when every engine of the
  core has finished the previous one (the simulator drains a block's queues before the
  next block runs).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _birsim
from .errors import SimulationError

__all__ = ["Trace", "TraceRecord", "ENGINE_COSTS", "OPCODE_COSTS", "plot_timeline"]

#: engine -> (base ns, ns per unit, unit). Compute engines: ~1.4 GHz, one element per
#: partition per cycle, ~64 cycles of fixed cost; DMA: 2 µs latency, ~100 bytes/ns.
ENGINE_COSTS: Dict[str, Tuple[float, float, str]] = {
    "DVE": (45.0, 0.7, "elements"),
    "Activation": (45.0, 0.7, "elements"),
    "Pool": (45.0, 1.4, "elements"),
    "PE": (45.0, 0.7, "elements"),
    "DMA": (2000.0, 0.01, "bytes"),
    "SP": (10.0, 0.0, "elements"),
    "Unassigned": (10.0, 0.0, "elements"),
    "ALL": (10.0, 0.0, "elements"),
}
#: opcode -> (base ns, ns per unit, unit), overriding the engine's.
OPCODE_COSTS: Dict[str, Tuple[float, float, str]] = {
    "Load": (2000.0, 0.01, "bytes"),
    "Save": (2000.0, 0.01, "bytes"),
    "DMACopy": (2000.0, 0.01, "bytes"),
    "DMADescriptorCopy": (2000.0, 0.01, "bytes"),
    "DMADescriptorTranspose": (2000.0, 0.02, "bytes"),
    "DMADescriptorReplicate": (2000.0, 0.01, "bytes"),
    "DMADescriptorCCE": (2000.0, 0.02, "bytes"),
    "Matmult": (64.0, 0.7, "elements"),
    "Activation": (64.0, 0.7, "elements"),
    "RegisterMove": (10.0, 0.0, "elements"),
    "RegisterAlu": (10.0, 0.0, "elements"),
    "TensorLoad": (100.0, 0.0, "elements"),
    "TensorSave": (100.0, 0.0, "elements"),
    "Loop": (10.0, 0.0, "elements"),
    "DynamicForLoop": (10.0, 0.0, "elements"),
    "DoWhile": (10.0, 0.0, "elements"),
    "Call": (10.0, 0.0, "elements"),
    "CustomOp": (1000.0, 0.7, "elements"),
    "BIRKernel": (1000.0, 0.7, "elements"),
}

_ENGINE_NAMES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
_DTYPE_SIZE = {v[0]: v[1] for v in _birsim.dtypes.values()}
_AP_KINDS = {v for k, v in _birsim.enums["OPND"].items() if k.endswith("_ap")}
_EVENT = _birsim.enums["SYNCTYPE"]["event"]


class TraceRecord(NamedTuple):
    """One executed instruction. Times are nanoseconds of the cost model."""

    core: int
    engine: str
    instruction: str
    opcode: str
    function: str
    block: str
    position: int
    step: int
    start: float
    duration: float
    waits_on: Tuple[int, ...] = ()

    @property
    def name(self) -> str:
        """The instruction's name (same as ``instruction``)."""
        return self.instruction

    @property
    def end(self) -> float:
        return self.start + self.duration


def _whole_ns(t: float) -> int:
    """``t`` (ns) rounded to a whole nanosecond (halves up); monotonic, so slices that do
    not overlap in the cost model do not overlap once rounded."""
    return math.floor(t + 0.5)


def _us(ns: int) -> float:
    """``ns`` in microseconds: ``ns / 1000.0``, raised by ulps until its product with
    1000.0 is not below ``ns``, so that Perfetto's conversion to nanoseconds
    (``llround(ts * 1000.0)``, a truncating cast in older versions) gives ``ns`` back."""
    v = ns / 1000.0
    while v * 1000.0 < ns:
        v = math.nextafter(v, math.inf)
    return v


class Trace(list):
    """The records of a traced run (a ``list`` of :class:`TraceRecord`); ``dropped``
    counts executed instructions past the recording limit."""

    dropped: int = 0
    #: True for the trace of a run made with ``trace=True`` (even one that executed
    #: nothing); False for the empty placeholder of an untraced or not yet run Simulator.
    recorded: bool = False
    #: After a deadlock: the blocked queue heads (dicts: core, engine, instruction, ...,
    #: last_completed), exported as one instant event each at the end of the timeline.
    deadlock: Optional[List[dict]] = None

    @property
    def total_time(self) -> float:
        """Nanoseconds from the first start to the last end (cost model)."""
        return max((r.end for r in self), default=0.0)

    def busy(self) -> Dict[Tuple[int, str], float]:
        """Busy nanoseconds per ``(core, engine)``."""
        out: Dict[Tuple[int, str], float] = {}
        for r in self:
            out[(r.core, r.engine)] = out.get((r.core, r.engine), 0.0) + r.duration
        return out

    def events(self) -> List[dict]:
        """The Chrome trace events (what :meth:`export` writes). Each slice starts and
        ends on a whole nanosecond (the cost model's times rounded once each, ``dur`` the
        difference), so slices that abut stay abutting and none overlaps the one before
        it on its track; ``ts``/``dur`` are microseconds whose product with 1000 is that
        integer (Perfetto converts each to nanoseconds separately and drops a slice that
        overlaps its predecessor)."""
        ev: List[dict] = []
        tids: Dict[Tuple[int, str], int] = {}
        for core in sorted({r.core for r in self}):
            ev.append({"ph": "M", "name": "process_name", "pid": core, "tid": 0,
                       "args": {"name": f"core {core}"}})
            ev.append({"ph": "M", "name": "process_sort_index", "pid": core, "tid": 0,
                       "args": {"sort_index": core}})
        for r in self:
            if (r.core, r.engine) not in tids:
                tids[(r.core, r.engine)] = tid = _birsim.enums["ENGINE"].get(r.engine, 99)
                ev.append({"ph": "M", "name": "thread_name", "pid": r.core, "tid": tid,
                           "args": {"name": r.engine}})
                ev.append({"ph": "M", "name": "thread_sort_index", "pid": r.core,
                           "tid": tid, "args": {"sort_index": tid}})
        start = [_whole_ns(r.start) for r in self]
        flow = 0
        for r, t0 in zip(self, start):
            tid = tids[(r.core, r.engine)]
            ev.append({"ph": "X", "name": r.instruction, "cat": r.opcode, "pid": r.core,
                       "tid": tid, "ts": _us(t0), "dur": _us(_whole_ns(r.end) - t0),
                       "args": {"opcode": r.opcode, "function": r.function,
                                "block": r.block, "position": r.position,
                                "step": r.step}})
            for s in r.waits_on:
                src = self[s]
                flow += 1
                ev.append({"ph": "s", "id": flow, "name": "sync", "cat": "sync",
                           "pid": src.core, "tid": tids[(src.core, src.engine)],
                           "ts": _us(start[s])})
                ev.append({"ph": "f", "bp": "e", "id": flow, "name": "sync", "cat": "sync",
                           "pid": r.core, "tid": tid, "ts": _us(t0)})
        end = _us(max((_whole_ns(r.end) for r in self), default=0))
        for n in self.deadlock or ():
            tid = _birsim.enums["ENGINE"].get(n["engine"], 99)
            if (n["core"], n["engine"]) not in tids:
                tids[(n["core"], n["engine"])] = tid
                ev.append({"ph": "M", "name": "thread_name", "pid": n["core"], "tid": tid,
                           "args": {"name": n["engine"]}})
            ev.append({"ph": "i", "s": "t", "name": f"deadlock: blocked at {n['instruction']}",
                       "cat": "deadlock", "pid": n["core"], "tid": tid, "ts": end,
                       "args": {k: n[k] for k in ("function", "block", "position",
                                                  "instruction", "opcode", "last_completed")}})
        return ev

    def export(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write Chrome/Perfetto trace-event JSON (``{"traceEvents": [...]}``) to
        ``path``; times are microseconds of the cost model, on whole nanoseconds.
        Raises :class:`birsim.SimulationError` when nothing was recorded (a Simulator
        made without ``trace=True``, or not run yet) rather than write an empty file; a
        traced run that executed nothing exports an empty trace."""
        if not self.recorded and not self:
            raise SimulationError("no trace to export: none was recorded (make the "
                                  "Simulator with trace=True and run it first)")
        with open(path, "w") as f:
            json.dump({"traceEvents": self.events(),
                       "otherData": {"generator": "birsim", "dropped": self.dropped}}, f)

    def _repr_html_(self) -> str:
        from ._html import trace_html
        return trace_html(self)

    def plot(self, ax=None, **kw: Any) -> Any:
        """A per-engine timeline with matplotlib (see :func:`plot_timeline`)."""
        return plot_timeline(self, ax=ax, **kw)


def plot_timeline(trace: Sequence[TraceRecord], ax=None, *, labels: bool = True) -> Any:
    """Draw ``trace`` as one row per (core, engine), a bar per instruction coloured by
    opcode; returns the matplotlib Axes. Needs matplotlib (``pip install birsim[plot]``)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plot_timeline needs matplotlib: pip install 'birsim[plot]'") from None
    rows = sorted({(r.core, r.engine) for r in trace},
                  key=lambda k: (k[0], _birsim.enums["ENGINE"].get(k[1], 99)))
    row = {k: i for i, k in enumerate(rows)}
    ops = sorted({r.opcode for r in trace})
    cmap = plt.get_cmap("tab20")
    colour = {op: cmap(i % 20) for i, op in enumerate(ops)}
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.5 + 0.5 * len(rows)))
    bars: Dict[Tuple[str, int], list] = {}
    for r in trace:
        bars.setdefault((r.opcode, row[(r.core, r.engine)]), []).append(
            (r.start / 1000.0, max(r.duration, 1e-3) / 1000.0))
    seen = set()
    for (op, y), spans in bars.items():
        ax.broken_barh(spans, (y - 0.4, 0.8), color=colour[op],
                       label=None if op in seen else op)
        seen.add(op)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"core {c} {e}" for c, e in rows] if len({c for c, _ in rows}) > 1
                       else [e for _, e in rows])
    ax.invert_yaxis()
    ax.set_xlabel("µs (birsim cost model)")
    if labels and ops:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return ax


class _Costs:
    """Per-instruction cost (ns) from the operand tables, cached by instruction index."""

    def __init__(self, tables: Any) -> None:
        self.insns = tables["insns"]
        self.opnds = tables["opnds"]
        self.cache: Dict[int, float] = {}

    def __call__(self, i: int) -> float:
        c = self.cache.get(i)
        if c is None:
            c = self.cache[i] = self._cost(i)
        return c

    def _cost(self, i: int) -> float:
        rec = self.insns[i]
        op = _OP_NAMES[int(rec["op"])]
        eng = _ENGINE_NAMES.get(int(rec["engine"]), "Unassigned")
        base, per, unit = OPCODE_COSTS.get(op) or ENGINE_COSTS.get(eng, (10.0, 0.0, "elements"))
        if per == 0.0:
            return base
        total_bytes, per_part = 0, 0
        o0 = int(rec["opnd"])
        for k in range(o0, o0 + int(rec["nin"]) + int(rec["nout"])):
            o = self.opnds[k]
            if int(o["kind"]) not in _AP_KINDS:
                continue
            nd = int(o["ndim"])
            nums = [int(n) for n in o["num"][:nd]] or [1]
            n = int(np.prod(nums))
            total_bytes += n * _DTYPE_SIZE.get(int(o["dtype"]), 4)
            per_part = max(per_part, n // max(nums[0], 1))
        units = total_bytes if unit == "bytes" else per_part
        return round(base + per * units, 3)


def build_trace(names, raw: bytes, dropped: int) -> Trace:
    """The :class:`Trace` of a run from the core's ``(core, insn)`` pairs; ``names`` is
    the simulator's name resolver (function/block/instruction names by index)."""
    t = names.module.tables
    insns, blocks, syncs = t["insns"], t["blocks"], t["syncs"]
    costs = _Costs(t)
    pairs = np.frombuffer(raw, dtype=np.int32).reshape(-1, 2).tolist()
    static: Dict[int, tuple] = {}
    clock: Dict[Tuple[int, str], float] = {}          # (core, engine) -> free at
    barrier: Dict[int, float] = {}                     # core -> block instance start
    instance: Dict[int, Tuple[int, set]] = {}          # core -> (block, insns seen)
    last_update: Dict[Tuple[int, int, int], int] = {}  # (core, type, id) -> step
    out = Trace()
    for step, (core, i) in enumerate(pairs):
        s = static.get(i)
        if s is None:
            rec = insns[i]
            b = int(rec["block"])
            s = static[i] = (
                _ENGINE_NAMES.get(int(rec["engine"]), "?"), names.instruction(i),
                _OP_NAMES[int(rec["op"])], names.function(int(rec["func"])),
                names.block(b) if b >= 0 else "", i - int(blocks[b]["insn0"]) if b >= 0 else -1,
                b, int(rec["sync"]), int(rec["nwait"]), int(rec["nupd"]))
        eng, name, op, func, bname, pos, b, sync0, nwait, nupd = s
        cur = instance.get(core)
        if cur is None or cur[0] != b or i in cur[1]:
            barrier[core] = max([barrier.get(core, 0.0)]
                                + [v for (c, _), v in clock.items() if c == core])
            cur = instance[core] = (b, set())
        cur[1].add(i)
        start = max(clock.get((core, eng), 0.0), barrier[core])
        waits = []
        for k in range(sync0, sync0 + nwait):
            sy = syncs[k]
            src = last_update.get((core, int(sy["type"]), int(sy["id"])))
            if src is not None:
                waits.append(src)
                start = max(start, out[src].end)
        dur = costs(i)
        out.append(TraceRecord(core, eng, name, op, func, bname, pos, step, start, dur,
                               tuple(sorted(set(waits)))))
        clock[(core, eng)] = start + dur
        for k in range(sync0 + nwait, sync0 + nwait + nupd):
            sy = syncs[k]
            target = int(sy["target_core"])
            last_update[(core if target < 0 else target, int(sy["type"]), int(sy["id"]))] = step
    out.dropped = int(dropped)
    out.recorded = True
    return out
