"""Schedules a :class:`birsim.Simulator` takes besides the named ones: a recorded list of
decisions (:class:`Schedule`) and PCT (:class:`PCT`). What a decision is, and how
exploration uses them: :mod:`birsim.explore`. Kept apart from it so that the simulator,
which explore drives, imports only this."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

import numpy as np

__all__ = ["Schedule", "PCT"]


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A list of scheduling decisions (see the module docstring) that
    ``Simulator(program, schedule=this)`` replays exactly. ``origin`` says where it came
    from (e.g. ``"pct seed 7"``), for reports only."""

    decisions: Tuple[int, ...]
    origin: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "decisions", tuple(int(d) for d in self.decisions))
        for d in self.decisions:
            if not -1 <= d < 2**31:
                raise ValueError(f"a schedule decision is -1 (the default) or a core or "
                                 f"queue index, got {d}")

    def __len__(self) -> int:
        return len(self.decisions)

    @property
    def n_decisions(self) -> int:
        """Decisions that are not the default (-1): what :func:`shrink` minimises."""
        return sum(1 for d in self.decisions if d >= 0)

    def __repr__(self) -> str:
        head = ", ".join(map(str, self.decisions[:8]))
        more = ", ..." if len(self.decisions) > 8 else ""
        origin = f", origin={self.origin!r}" if self.origin else ""
        return f"Schedule([{head}{more}] ({len(self.decisions)} decisions){origin})"


@dataclasses.dataclass(frozen=True)
class PCT:
    """The PCT schedule: ``Simulator(program, schedule=PCT(depth, steps), seed=s)``.
    ``depth - 1`` priority change points fall uniformly in steps ``[0, steps)``."""

    depth: int = 3
    steps: int = 1000

    def __post_init__(self) -> None:
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or \
                not 0 <= self.depth <= 64:
            raise ValueError(f"PCT depth must be an integer in 0..64, got {self.depth!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"PCT steps must be a positive integer, got {self.steps!r}")


def _schedule_args(schedule: Any) -> Tuple[str, Optional[Tuple[int, ...]], int, int]:
    """Simulator(schedule=...) as (kind name, replay decisions or None, pct depth, pct steps)."""
    if isinstance(schedule, str):
        if schedule == "pct":
            return "pct", None, PCT().depth, PCT().steps
        return schedule, None, 0, 0
    if isinstance(schedule, PCT):
        return "pct", None, schedule.depth, schedule.steps
    if isinstance(schedule, Schedule):
        return "replay", schedule.decisions, 0, 0
    if isinstance(schedule, (list, tuple, np.ndarray)):
        return "replay", Schedule(tuple(schedule)).decisions, 0, 0
    raise TypeError(f"schedule must be a name, a birsim.Schedule, a list of decisions or a "
                    f"birsim.PCT, got {type(schedule).__name__}")
