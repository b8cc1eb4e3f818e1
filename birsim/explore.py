"""Schedule exploration: ``birsim.explore``, replayable schedules and their shrinking.

A run's *decisions* are the choices its schedule made wherever a step had a real choice,
in order: which core to step when more than one core is live (the core's index), and
which ready queue head of a block to run when more than one is ready (the queue: the
EngineType value of the engine, Pool=1 ... SP=6, 7 for the rendezvous queue ALL; the DMA
queue is one of them). ``Simulator(..., record=True)`` keeps them (``sim.recorded``, a
:class:`Schedule`); ``Simulator(program, schedule=S)`` with a :class:`Schedule` (or a list
of decisions) replays them. The simulator is deterministic given its decisions, so a
recorded schedule replays the run exactly (same outputs, findings, errors and step
count), with the same program, cores, inputs and options. A decision of ``-1``, one that
names no candidate at its point, and every point past the end of the list take the
default: the ``in_order`` choice (the lowest-index core that can advance; the ready head
of lowest position in its block).

:func:`explore` runs a program under many schedules and groups the outputs; strategies:

- ``"random"``: the ``random`` schedule with seeds ``seed``, ``seed + 1``, ...
- ``"pct"``: probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010): every
  queue of every core (and every core) gets a random priority, the highest-priority
  ready one runs, and at ``depth - 1`` random steps (within the in_order run's step count)
  the running queue and its core drop below all others. Orders that need one engine to
  run far ahead of another -- which a uniform random choice at each step almost never
  produces -- come up in a fixed fraction of runs.
- ``"all"``: both, half the runs each.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._schedule import PCT, Schedule, _schedule_args

__all__ = ["Schedule", "PCT", "Outcome", "ExploreResult", "explore", "shrink"]


@dataclasses.dataclass
class Outcome:
    """One distinct result: ``outputs`` (name -> array) or ``error`` (the exception's
    type name and message, e.g. a deadlock), and every schedule that gave it."""

    outputs: Optional[Dict[str, np.ndarray]]
    error: Optional[str]
    schedules: List[Schedule]

    @property
    def deadlock(self) -> bool:
        return self.error is not None and self.error.startswith("DeadlockError")


class ExploreResult:
    """What :func:`explore` found. ``outcomes`` lists the distinct results, the in_order
    run's first; ``failing`` the schedules whose result differs from it (other outputs, a
    deadlock or another error), each replayable; ``runs`` counts the runs."""

    def __init__(self, program: Any, inputs: Mapping[str, Any], options: Dict[str, Any]):
        self.outcomes: List[Outcome] = []
        self.runs = 0
        self._keys: Dict[bytes, Outcome] = {}
        self._program, self._inputs, self._options = program, inputs, options

    @property
    def failing(self) -> List[Schedule]:
        return [s for o in self.outcomes[1:] for s in o.schedules]

    @property
    def reference(self) -> Outcome:
        return self.outcomes[0]

    def _add(self, key: bytes, outputs, error, schedule: Schedule) -> None:
        self.runs += 1
        o = self._keys.get(key)
        if o is None:
            o = self._keys[key] = Outcome(outputs, error, [])
            self.outcomes.append(o)
        o.schedules.append(schedule)

    def shrink(self, schedule: Schedule, max_runs: int = 2000) -> Schedule:
        """:func:`shrink` with this exploration's program, inputs and options: the
        failure is any result other than the in_order run's."""
        return shrink(self._program, self._inputs, schedule, max_runs=max_runs,
                      _reference=_outcome_key(*self._run_reference()), **self._options)

    def _run_reference(self):
        o = self.reference
        return o.outputs, o.error

    def __repr__(self) -> str:
        return (f"ExploreResult({self.runs} runs, {len(self.outcomes)} outcome(s), "
                f"{len(self.failing)} failing)")


def _outcome_key(outputs: Optional[Mapping[str, np.ndarray]], error: Optional[str]) -> bytes:
    h = hashlib.sha256()
    if error is not None:
        h.update(b"E" + error.encode("utf-8", "replace"))
        return h.digest()
    outputs = outputs or {}
    for name in sorted(outputs):
        a = np.ascontiguousarray(outputs[name])
        h.update(name.encode() + b"\0" + str(a.dtype).encode() + repr(a.shape).encode())
        h.update(a.view(np.uint8).tobytes())       # bitwise: NaNs and -0.0 compare
    return h.digest()


def _error_text(e: BaseException) -> str:
    from .errors import DeadlockError
    # a deadlock's message names where each engine waits: the kind alone groups them
    if isinstance(e, DeadlockError):
        return "DeadlockError: " + str(e).split("\n")[0]
    return f"{type(e).__name__}: {e}"


class _Runner:
    """One Simulator for every run of an exploration (making one per run costs more than
    a small kernel's run); its schedule is set before each run."""

    def __init__(self, module: Any, options: Dict[str, Any]):
        from .simulator import Simulator
        self.sim = Simulator(module, record=True, progress=False, print=False, **options)

    def __call__(self, inputs: Mapping[str, Any], schedule: Any, seed: int):
        self.sim._set_schedule(schedule, seed)
        return _run(self.sim, inputs)


def _run(sim: Any, inputs: Mapping[str, Any]):
    from .errors import BirsimError, StepLimitError
    try:
        out = sim.run(inputs)
        err = None
    except StepLimitError as e:
        out, err = None, f"StepLimitError: {e}"
    except BirsimError as e:
        out, err = None, _error_text(e)
    return out, err, sim.recorded, int(sim.stats.get("steps", 0) or 0)


def explore(program: Any, inputs: Mapping[str, Any], runs: int = 100, strategy: str = "pct",
            *, seed: int = 0, depth: int = 3, **options: Any) -> ExploreResult:
    """Run ``program`` on ``inputs`` under the in_order schedule and then ``runs`` more
    schedules of ``strategy`` (``"pct"``, ``"random"`` or ``"all"``; see the module
    docstring), recording each run's decisions, and group the results. PCT runs take
    depths 1, 2, ..., ``depth`` in turn (depth d: d - 1 priority changes). ``options`` go to every
    :class:`~birsim.Simulator` (``cores``, ``dma_mode``, ``max_steps``, ``checks``...).
    Returns an :class:`ExploreResult`: a race-free program gives one outcome."""
    from .loader import Module, load
    if strategy not in ("pct", "random", "all"):
        raise ValueError(f"strategy must be 'pct', 'random' or 'all', got {strategy!r}")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 0:
        raise ValueError(f"runs must be a non-negative integer, got {runs!r}")
    for k in ("schedule", "record", "seed"):
        if k in options:
            raise TypeError(f"explore() chooses the schedules itself: no {k}= option")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 64:
        raise ValueError(f"depth must be an integer in 1..64, got {depth!r}")
    if not isinstance(program, (Module, list, tuple)):
        program = load(program, strict=bool(options.get("strict")))
    res = ExploreResult(program, inputs, options)
    run = _Runner(program, options)
    out, err, sched, steps = run(inputs, "in_order", 0)
    res._add(_outcome_key(out, err), out, err, dataclasses.replace(sched, origin="in_order"))
    span = max(1, steps)
    for i in range(runs):
        kind = strategy if strategy != "all" else ("pct" if i % 2 == 0 else "random")
        s = seed + i
        # depths 1..depth in turn: a deep search alone misses shallow orders often
        spec: Any = PCT(1 + (i // 2 if strategy == "all" else i) % depth, span) \
            if kind == "pct" else "random"
        out, err, sched, _ = run(inputs, spec, s)
        res._add(_outcome_key(out, err), out, err,
                 dataclasses.replace(sched, origin=f"{kind} seed {s}"))
    return res


def shrink(program: Any, inputs: Mapping[str, Any], schedule: Union[Schedule, Sequence[int]],
           *, max_runs: int = 2000, _reference: Optional[bytes] = None,
           **options: Any) -> Schedule:
    """The smallest schedule found (fewest non-default decisions, by delta debugging over
    the decisions of ``schedule``; the others become the default, -1) whose replay still
    fails: gives a result other than the in_order run's. At most ``max_runs`` replays;
    ``schedule`` itself must fail (else :class:`ValueError`)."""
    from .loader import Module, load
    if not isinstance(schedule, Schedule):
        schedule = Schedule(tuple(schedule))
    if not isinstance(program, (Module, list, tuple)):
        program = load(program, strict=bool(options.get("strict")))
    run = _Runner(program, options)
    if _reference is None:
        _reference = _outcome_key(*run(inputs, "in_order", 0)[:2])
    dec = list(schedule.decisions)
    cache: Dict[Tuple[int, ...], bool] = {}
    budget = [max_runs]

    def build(keep: Sequence[int]) -> Schedule:
        d = [-1] * len(dec)
        for i in keep:
            d[i] = dec[i]
        while d and d[-1] < 0:
            d.pop()
        return Schedule(tuple(d), origin=f"shrunk from {schedule.origin or 'a schedule'}")

    def fails(keep: Sequence[int]) -> bool:
        key = tuple(keep)
        if key not in cache:
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            out, err = run(inputs, build(keep), 0)[:2]
            cache[key] = _outcome_key(out, err) != _reference
        return cache[key]

    cur = [i for i, d in enumerate(dec) if d >= 0]
    if not fails(cur):
        raise ValueError("shrink(): the schedule does not fail (its replay gives the "
                         "in_order run's result)")
    n = 2
    while len(cur) >= 2:                      # ddmin (Zeller & Hildebrandt 2002)
        size = -(-len(cur) // n)
        chunks = [cur[i:i + size] for i in range(0, len(cur), size)]
        done = False
        for c in chunks:                      # a chunk alone fails
            if fails(c):
                cur, n, done = c, 2, True
                break
        if not done:
            for j in range(len(chunks)):      # the rest without a chunk fails
                rest = [i for k, ch in enumerate(chunks) if k != j for i in ch]
                if fails(rest):
                    cur, n, done = rest, max(n - 1, 2), True
                    break
        if not done:
            if n >= len(cur):
                break
            n = min(len(cur), 2 * n)
    if len(cur) == 1 and fails([]):
        cur = []
    return build(cur)
