"""Timeline traces: ``Simulator(trace=True)`` -> ``sim.trace``.

``sim.trace`` is a :class:`Trace`, a sequence of :class:`TraceRecord` in execution order
(the first four fields are the historical ``(core, engine, instruction, opcode)``). Each
record also carries the instruction's function, block and position in the block, its
``step`` (index in execution order), and its start time and duration in nanoseconds from
birsim's timing model; ``waits_on`` lists the steps whose semaphore/event updates released
its waits (at most the two latest).

The times come from the C core (``csrc/vm/timing.c``), computed while the program runs:
an instruction starts when its engine is free and when the updates its waits need have
landed plus their latency; a DMA occupies its queue only to issue and its bytes move on the
core's DMA engines, so several transfers are in flight at once (their slices overlap on
the DMA track). docs/timing.md gives the model and the source of every constant. This
module only wraps the core's records: a record is made when it is read.

``sim.trace.export("run.json")`` writes Chrome/Perfetto trace-event JSON
(``{"traceEvents": [...]}``; open it in ui.perfetto.dev or chrome://tracing): one process
per core (in core order), one named track per engine (overlapping DMA transfers spread over
extra "DMA" tracks), a slice per instruction (starting and ending on whole nanoseconds),
and a flow arrow from each update to the wait it released.
"""

from __future__ import annotations

import json
import math
import operator
import os
from collections.abc import Sequence
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _birsim
from .errors import SimulationError

__all__ = ["Trace", "TraceRecord", "plot_timeline"]

_ENGINE_NAMES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
_TIMES = np.dtype([("start", "<f8"), ("dur", "<f8"), ("src", "<i4", (2,))])


class TraceRecord(NamedTuple):
    """One executed instruction. Times are nanoseconds of the timing model."""

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
    not overlap in the timing model do not overlap once rounded."""
    return math.floor(t + 0.5)


def _us(ns: int) -> float:
    """``ns`` in microseconds: ``ns / 1000.0``, raised by ulps until its product with
    1000.0 is not below ``ns``, so that Perfetto's conversion to nanoseconds
    (``llround(ts * 1000.0)``, a truncating cast in older versions) gives ``ns`` back."""
    v = ns / 1000.0
    while v * 1000.0 < ns:
        v = math.nextafter(v, math.inf)
    return v


class Trace(Sequence):
    """The records of a traced run (a sequence of :class:`TraceRecord`, made when read from
    the core's arrays); ``dropped`` counts executed instructions past the recording limit.
    Compares equal to a list of the same records."""

    dropped: int = 0
    #: True for the trace of a run made with ``trace=True`` (even one that executed
    #: nothing); False for the empty placeholder of an untraced or not yet run Simulator.
    recorded: bool = False
    #: After a deadlock: the blocked queue heads (dicts: core, engine, instruction, ...,
    #: last_completed), exported as one instant event each at the end of the timeline.
    deadlock: Optional[List[dict]] = None

    def __init__(self, names: Any = None, pairs: Any = None, times: Any = None) -> None:
        self._names = names
        self._pairs = np.zeros((0, 2), np.int32) if pairs is None else pairs
        self._times = np.zeros(0, _TIMES) if times is None else times
        self._static: Dict[int, tuple] = {}
        self._pl: Any = None
        self._tl: Any = None

    def __len__(self) -> int:
        return len(self._pairs)

    def _lists(self):
        """The core's arrays as Python lists (made once, on the first record read)."""
        if self._pl is None:
            self._pl = self._pairs.tolist()
            self._tl = list(zip(self._times["start"].tolist(), self._times["dur"].tolist(),
                                self._times["src"].tolist()))
        return self._pl, self._tl

    def _record(self, step: int) -> TraceRecord:
        pl, tl = self._lists()
        core, i = pl[step]
        s = self._static.get(i)
        if s is None:
            n = self._names
            t = n.module.tables
            rec = t["insns"][i]
            b = int(rec["block"])
            s = self._static[i] = (
                _ENGINE_NAMES.get(int(rec["engine"]), "?"), n.instruction(i),
                _OP_NAMES[int(rec["op"])], n.function(int(rec["func"])),
                n.block(b) if b >= 0 else "",
                i - int(t["blocks"][b]["insn0"]) if b >= 0 else -1)
        start, dur, (a, b2) = tl[step]
        waits = () if a < 0 and b2 < 0 else tuple(sorted({x for x in (a, b2) if x >= 0}))
        return TraceRecord(core, s[0], s[1], s[2], s[3], s[4], s[5], step, start, dur, waits)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self._record(j) for j in range(*k.indices(len(self)))]
        k = operator.index(k)
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError("trace index out of range")
        return self._record(k)

    def __iter__(self):
        pl, tl = self._lists()
        static, make = self._static, TraceRecord
        for step, ((core, i), (start, dur, (a, b))) in enumerate(zip(pl, tl)):
            s = static.get(i)
            if s is None:
                self._record(step)
                s = static[i]
            waits = () if a < 0 and b < 0 else tuple(sorted({x for x in (a, b) if x >= 0}))
            yield make(core, s[0], s[1], s[2], s[3], s[4], s[5], step, start, dur, waits)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Trace)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<birsim Trace: {len(self)} records, {self.total_time:.0f} ns>"

    @property
    def total_time(self) -> float:
        """Nanoseconds from the first start to the last end (timing model)."""
        if not len(self):
            return 0.0
        return float((self._times["start"] + self._times["dur"]).max())

    def busy(self) -> Dict[Tuple[int, str], float]:
        """Busy nanoseconds per ``(core, engine)`` (DMA: the sum of its transfers' times)."""
        out: Dict[Tuple[int, str], float] = {}
        if not len(self):
            return out
        eng = self._names.module.tables["insns"]["engine"][self._pairs[:, 1]]
        key = self._pairs[:, 0].astype(np.int64) * 16 + eng
        sums = np.bincount(key, weights=self._times["dur"])
        for k in np.nonzero(np.bincount(key))[0]:
            out[(int(k) // 16, _ENGINE_NAMES.get(int(k) % 16, "?"))] = float(sums[k])
        return out

    def events(self) -> List[dict]:
        """The Chrome trace events (what :meth:`export` writes). Each slice starts and
        ends on a whole nanosecond (the model's times rounded once each, ``dur`` the
        difference), so slices that abut stay abutting; a slice that would overlap the
        one before it on its engine's track (DMA transfers in flight together) goes on
        another track of the same name (tid + 100 x lane); ``ts``/``dur`` are
        microseconds whose product with 1000 is that integer (Perfetto converts each to
        nanoseconds separately and drops a slice that overlaps its predecessor)."""
        ev: List[dict] = []
        recs = list(self)
        for core in sorted({r.core for r in recs}):
            ev.append({"ph": "M", "name": "process_name", "pid": core, "tid": 0,
                       "args": {"name": f"core {core}"}})
            ev.append({"ph": "M", "name": "process_sort_index", "pid": core, "tid": 0,
                       "args": {"sort_index": core}})
        lanes: Dict[Tuple[int, str], List[int]] = {}     # (core, engine) -> end per lane
        start = [_whole_ns(r.start) for r in recs]
        tid_of: List[int] = []
        slices: List[dict] = []
        for r, t0 in zip(recs, start):
            ends = lanes.setdefault((r.core, r.engine), [])
            lane = next((j for j, e in enumerate(ends) if e <= t0), len(ends))
            t1 = max(_whole_ns(r.end), t0)
            tid = _birsim.enums["ENGINE"].get(r.engine, 99) + 100 * lane
            if lane == len(ends):
                ends.append(t1)
                ev.append({"ph": "M", "name": "thread_name", "pid": r.core, "tid": tid,
                           "args": {"name": r.engine}})
                ev.append({"ph": "M", "name": "thread_sort_index", "pid": r.core,
                           "tid": tid, "args": {"sort_index": tid}})
            else:
                ends[lane] = t1
            tid_of.append(tid)
            slices.append({"ph": "X", "name": r.instruction, "cat": r.opcode, "pid": r.core,
                           "tid": tid, "ts": _us(t0), "dur": _us(t1 - t0),
                           "args": {"opcode": r.opcode, "function": r.function,
                                    "block": r.block, "position": r.position,
                                    "step": r.step}})
        flow = 0
        for r, t0, tid, sl in zip(recs, start, tid_of, slices):
            ev.append(sl)
            for s in r.waits_on:
                flow += 1
                ev.append({"ph": "s", "id": flow, "name": "sync", "cat": "sync",
                           "pid": recs[s].core, "tid": tid_of[s], "ts": _us(start[s])})
                ev.append({"ph": "f", "bp": "e", "id": flow, "name": "sync", "cat": "sync",
                           "pid": r.core, "tid": tid, "ts": _us(t0)})
        end = _us(max((_whole_ns(r.end) for r in self), default=0))
        for n in self.deadlock or ():         # on the engine's first track
            tid = _birsim.enums["ENGINE"].get(n["engine"], 99)
            if (n["core"], n["engine"]) not in lanes:
                lanes[(n["core"], n["engine"])] = []
                ev.append({"ph": "M", "name": "thread_name", "pid": n["core"], "tid": tid,
                           "args": {"name": n["engine"]}})
            ev.append({"ph": "i", "s": "t", "name": f"deadlock: blocked at {n['instruction']}",
                       "cat": "deadlock", "pid": n["core"], "tid": tid, "ts": end,
                       "args": {k: n[k] for k in ("function", "block", "position",
                                                  "instruction", "opcode", "last_completed")}})
        return ev

    def export(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write Chrome/Perfetto trace-event JSON (``{"traceEvents": [...]}``) to
        ``path``; times are microseconds of the timing model, on whole nanoseconds.
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
    ax.set_xlabel("µs (birsim timing model)")
    if labels and ops:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return ax


def build_trace(names, raw: Any, dropped: int, times: Any) -> Trace:
    """The :class:`Trace` of a run from the core's ``(core, insn)`` pairs and their
    modelled times (buffers the core handed over, read in place); ``names`` is the
    simulator's name resolver (function/block/instruction names by index)."""
    pairs = np.frombuffer(raw, dtype=np.int32).reshape(-1, 2)
    tt = np.frombuffer(times, dtype=_TIMES)
    pairs.flags.writeable = False           # a record, not a buffer to write
    tt.flags.writeable = False
    out = Trace(names, pairs, tt)
    out.dropped = int(dropped)
    out.recorded = True
    return out
