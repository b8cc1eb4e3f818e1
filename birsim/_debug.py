"""Step debugging and progress for :class:`birsim.Simulator` (mixed into it).

    sim = birsim.Simulator(module)
    sim.breakpoint(name="mm")              # or opcode=, block=, function=, engine=, core=
    sim.debug(inputs)                      # None: paused; sim.stopped says where
    sim.registers(), sim.semaphores(), sim.events(), sim.queue_heads(), sim.read("ps")
    sim.step()                             # one more instruction; its record
    out = sim.resume()                     # to the next breakpoint (None) or the end (outputs)

A run stops right *after* a matching instruction ran (its outputs written, its
semaphore/event updates applied to a region's instructions when it completes), before
anything else runs. ``sim.start(inputs)`` begins a run paused before its first
instruction. ``sim.run(inputs)`` always returns the outputs (a pause there raises
:class:`birsim.SimulationError`): runs that pause are begun with ``sim.debug(inputs)``.
``on_instruction=fn`` (or ``sim.on_instruction = fn``) calls ``fn(sim, stop)``
after every instruction; a true return value pauses the run there.
"""

from __future__ import annotations

import sys
import time
import weakref
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional

import numpy as np

from . import _birsim
from .errors import BirsimError, SimulationError
# at import, not in start(): a relative import inside a function runs importlib's
# Python code at every run (simulator.py imports kernels at import anyway)
from .kernels import make_host

__all__ = ["Stop", "Breakpoint"]

_ENGINE_NAMES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
#: A run shows progress once it has taken this long (seconds).
PROGRESS_AFTER = 2.0
_PROGRESS_EVERY = 0.5
#: The shortest interval a rate is measured over (seconds).
_RATE_MIN = 0.1


class Stop(NamedTuple):
    """Where a paused run stopped: the instruction that just ran, and the run's step
    count (instructions + loop trips + taken branches so far)."""

    core: int
    engine: str
    instruction: str
    opcode: str
    function: str
    block: str
    position: int
    step: int

    @property
    def name(self) -> str:
        return self.instruction


class Breakpoint(NamedTuple):
    """A breakpoint: every given field must match (None matches anything)."""

    id: int
    name: Optional[str]
    opcode: Optional[str]
    block: Optional[str]
    function: Optional[str]
    engine: Optional[str]
    core: Optional[int]
    instructions: frozenset


class _Progress:
    """A progress line after PROGRESS_AFTER seconds: tqdm when installed, else a plain
    carriage-return line on stderr.

    The rate is measured over the interval since the previous reading (or since the run
    started or resumed); an interval shorter than _RATE_MIN gives no reading, so the first
    figure is never a count divided by a near-zero time. ``total`` (an int, or a callable
    giving an int or None, called once when the line first shows) is the run's step
    count when known in advance (:func:`_step_total`); ``clock`` is injectable for tests.
    """

    def __init__(self, enabled: bool, total=None, clock=time.monotonic):
        self.enabled = enabled
        self.clock = clock
        self.t0 = clock()
        self.shown = None
        self.bar = None
        self.plain = False
        self.last_steps = 0
        self.total = total
        self.rate: Optional[float] = None
        self.mark = (self.t0, 0)          # (time, steps) the next rate is measured from

    def restart(self, steps: int) -> None:
        """A paused run resumes: the time it was paused is no part of the rate."""
        self.mark = (self.clock(), steps)

    def update(self, steps: int, block: str) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.t0 < PROGRESS_AFTER or \
                (self.shown is not None and now - self.shown < _PROGRESS_EVERY):
            return
        if self.shown is None and callable(self.total):
            self.total = self.total()
        self.shown = now
        t, s = self.mark
        if now - t >= _RATE_MIN and now > t:
            self.rate = (steps - s) / (now - t)
            self.mark = (now, steps)
        if self.bar is None and not self.plain:
            try:
                from tqdm.auto import tqdm  # type: ignore[import-untyped, unused-ignore]
                # initial=: tqdm's rate counts the steps after the bar appears
                self.bar = tqdm(desc="birsim", unit=" steps", unit_scale=True, leave=False,
                                total=self.total, initial=steps)
                self.last_steps = steps
            except ImportError:
                self.plain = True
        if self.bar is not None:
            self.bar.update(steps - self.last_steps)
            self.bar.set_postfix_str(f"block {block}", refresh=True)
        else:
            sys.stderr.write("\r" + _progress_line(steps, block, self.rate, self.total) + "   ")
            sys.stderr.flush()
        self.last_steps = steps

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.plain and self.shown is not None:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.plain = False


def _progress_line(steps: int, block: str, rate: Optional[float],
                   total: Optional[int]) -> str:
    """The plain progress line: steps (of the total, when known), block, rate (when
    measured)."""
    line = f"birsim: {steps:,}"
    if total:
        line += f" / {total:,} steps ({100 * steps / total:.0f}%)"
    else:
        line += " steps"
    line += f", block {block}"
    if rate is not None:
        for scale, unit in ((1e9, "G "), (1e6, "M "), (1e3, "k "), (1, "")):
            if rate >= scale or scale == 1:
                line += f", {rate / scale:.1f} {unit}steps/s"
                break
    return line


def _step_total(module, cores: int) -> Optional[int]:
    """The step count of a run of ``module`` on ``cores`` cores, when its control flow
    is static: no branch, Break/Return/Exit, Call/NKIKernel, CustomOp/BIRKernel, DMA block,
    DynamicForLoop or DoWhile, only static ``Loop`` s. A step is one instruction, plus one
    per loop trip (csrc/vm/interp.c ``count_step``). None when the count depends on the
    run (``max_steps`` is a budget, not a total)."""
    t = module.tables
    insns, blocks, regions = t["insns"], t["blocks"], t["regions"]
    ops = insns["op"]
    if np.isin(ops, _DYNAMIC_OPS).any():
        return None
    is_loop = ops == _LOOP
    if (insns["body"][~is_loop] >= 0).any():
        return None
    placed = insns["block"] >= 0
    region = blocks["region"][insns["block"][placed]]
    plain = np.bincount(region, minlength=len(regions))    # one step per instruction
    loops: Dict[int, List[int]] = {}
    for i in np.flatnonzero(is_loop & placed):
        loops.setdefault(int(blocks["region"][insns["block"][i]]), []).append(int(i))
    memo: Dict[int, Optional[int]] = {}

    def steps(r: int) -> Optional[int]:
        if r not in memo:
            n = int(plain[r])
            total: Optional[int] = n
            for i in loops.get(r, ()):
                lb, ub, stride = (int(v) for v in insns[i]["i"][:3])
                body = steps(int(insns[i]["body"]))
                if body is None or (lb < ub and stride <= 0):
                    total = None                   # the run fails: no total to show
                    break
                if lb < ub:
                    trips = -(-(ub - lb) // stride)
                else:                              # the zero-trip guard of docs/spec/control-flow-sync.md §1.1; 0, 0, 0: once
                    trips = 1 if lb == ub == stride == 0 else 0
                n += trips * (1 + body)
                total = n
            memo[r] = total
        return memo[r]

    entry = steps(int(t["funcs"][int(t["module"][0]["entry"])]["region"]))
    return None if entry is None else cores * entry


_LOOP = _birsim.opcodes["Loop"][0]
_DYNAMIC_OPS = np.array(sorted(v[0] for k, v in _birsim.opcodes.items()
                               if v[2] in ("term", "call", "custom", "dma")
                               or k in ("DynamicForLoop", "DoWhile")))


#: the core's breakpoint state of a new Simulator: no flags, no stop-every (DebugMixin._arm)
_NO_FLAGS = (False, ())


def _weak_total(sim: "DebugMixin") -> Callable[[], Optional[int]]:
    """``sim._progress_total`` through a weak reference to ``sim``."""
    ref = weakref.ref(sim)

    def total() -> Optional[int]:
        s = ref()
        return None if s is None else s._progress_total()
    return total


class DebugMixin:
    """The debugger and progress parts of :class:`birsim.Simulator`."""

    # state set by Simulator.__init__ (and its methods), declared for type checkers
    _sim: Any
    _names: Any
    module: Any
    modules: Any
    cores: int
    _write_inputs: Callable[[Mapping[str, Any]], None]
    _collect: Callable[[], None]
    _outputs: Callable[[], Dict[str, np.ndarray]]
    _name_error: Callable[[BaseException], None]

    def _debug_init(self, progress: bool, on_instruction) -> None:
        self.progress = bool(progress)
        self.on_instruction = on_instruction

    # A new Simulator's debugger state, class-level (immutable values; what a Simulator
    # changes it stores: Simulator.__init__ stores only what differs from these).
    progress = True
    on_instruction: Optional[Callable[[Any, Any], Any]] = None
    stopped: Optional[Stop] = None
    paused = False
    outputs: Optional[Dict[str, np.ndarray]] = None
    _breaks: Any = ()                   # Breakpoint list (a new list at every change)
    _host: Any = None
    _stepping = False
    # the core starts with no breakpoint flags and no stop-every: set_breaks(None, False)
    _flags_state: Any = _NO_FLAGS
    _total_steps: Any = ...             # not computed yet (_progress_total)
    _weak_total: Optional[Callable[[], Optional[int]]] = None
    _progress: Optional[_Progress] = None   # the run's progress line (_drive)
    _run_t0: Optional[float] = None         # when the run started; None: no progress

    # -- breakpoints ---------------------------------------------------------------

    def breakpoint(self, name: Optional[str] = None, *, opcode: Optional[str] = None,
                   block: Optional[str] = None, function: Optional[str] = None,
                   engine: Optional[str] = None, core: Optional[int] = None) -> Breakpoint:
        """Pause runs right after an instruction matching every given field (its
        ``name``, ``opcode``, ``block``, ``function``, ``engine``; ``core`` filters the
        core running it). Raises ``ValueError`` when no instruction matches."""
        t = self.module.tables["insns"]
        names = self._names
        match = []
        for i in range(len(t)):
            rec = t[i]
            if name is not None and names.instruction(i) != name:
                continue
            if opcode is not None and _OP_NAMES[int(rec["op"])] != opcode:
                continue
            if engine is not None and _ENGINE_NAMES.get(int(rec["engine"])) != engine:
                continue
            if block is not None and (int(rec["block"]) < 0
                                      or names.block(int(rec["block"])) != block):
                continue
            if function is not None and names.function(int(rec["func"])) != function:
                continue
            match.append(i)
        if not match:
            given = {k: v for k, v in dict(name=name, opcode=opcode, block=block,
                                           function=function, engine=engine).items()
                     if v is not None}
            raise ValueError(f"breakpoint: no instruction matches {given}")
        bp = Breakpoint(len(self._breaks) + 1 if not self._breaks else self._breaks[-1].id + 1,
                        name, opcode, block, function, engine, core, frozenset(match))
        self._breaks = [*self._breaks, bp]
        return bp

    def clear_breakpoints(self, bp: Optional[Breakpoint] = None) -> None:
        """Remove one breakpoint (or all)."""
        self._breaks = [] if bp is None else [b for b in self._breaks if b.id != bp.id]

    @property
    def breakpoints(self) -> List[Breakpoint]:
        return list(self._breaks)

    def _arm(self) -> None:
        every = self._stepping or self.on_instruction is not None
        state = (every, tuple(b.id for b in self._breaks))
        if state == self._flags_state:
            return
        if self._breaks:
            bits = np.zeros(len(self.module.tables["insns"]), np.uint8)
            for b in self._breaks:
                bits[list(b.instructions)] = 1
            self._sim.set_breaks(bits.tobytes(), every)
        else:
            self._sim.set_breaks(None, every)
        self._flags_state = state

    # -- running -------------------------------------------------------------------

    def start(self, inputs: Optional[Mapping[str, Any]] = None, **kw_inputs: Any) -> None:
        """Begin a run on ``inputs`` paused before its first instruction (then
        :meth:`step` or :meth:`resume`)."""
        if self._host is not None:
            self._close_host()
        # read, never kept nor changed: a caller's dict is used as it is
        inputs = inputs if not kw_inputs and type(inputs) is dict else dict(inputs or {}, **kw_inputs)
        self._sim.reset()
        self._ran = True
        if self.outputs is not None:
            self.outputs = None
        if self.stopped is not None:
            self.stopped = None
        self._write_inputs(inputs)
        if self._sim.needs_host:        # a program without CustomOp/BIRKernel: no host
            self._host = make_host(self)
        # the progress line's state is made when a slice of the run ends unfinished
        # (_drive): a run that ends in its first slice never needs it
        if self._progress is not None:
            self._progress = None
        self._run_t0 = time.monotonic() if self.progress else None
        self.paused = True

    def resume(self) -> Optional[Dict[str, np.ndarray]]:
        """Continue a paused run to the next breakpoint (returns None; ``sim.stopped``
        says where) or to its end (returns the outputs, as :meth:`run` does)."""
        if not self.paused:
            raise SimulationError("resume(): no paused run (start one with run() or start())")
        return self._drive()

    def step(self) -> Optional[Stop]:
        """Run one instruction of a paused run; returns where it stopped (None when the
        run finished: ``sim.outputs`` holds the outputs)."""
        if not self.paused:
            raise SimulationError("step(): no paused run (start one with start())")
        self._stepping = True
        try:
            self._drive()
        finally:
            self._stepping = False
        return self.stopped if self.paused else None

    def _drive(self):
        if self._breaks or self._stepping or self.on_instruction is not None or \
                self._flags_state is not _NO_FLAGS:
            self._arm()
        host, prog, t0 = self._host, self._progress, self._run_t0
        self.paused = False
        if prog is not None:
            if prog.enabled:
                prog.restart(self._sim.steps())
        elif t0 is not None:
            # no slice of this run has ended unfinished yet: it is at step 0
            t_drive = time.monotonic()
        try:
            while True:
                finished, score, sinsn = self._sim.advance(host)
                if finished:
                    break
                if prog is None and t0 is not None:
                    prog = self._new_progress(t0, t_drive)
                if prog is not None and prog.enabled:
                    steps = self._sim.steps()
                    block, _ = self._sim.queue_heads(0)
                    prog.update(steps, self._names.block(block) if block >= 0 else "-")
                if sinsn >= 0 and self._should_pause(score, sinsn):
                    self.paused = True
                    return None
        except BirsimError as e:
            self._finish_run()
            self._name_error(e)
            raise
        except BaseException:            # Ctrl-C, a failing callback: stats still filled
            self._finish_run()
            raise
        self._finish_run()
        return self._outputs()

    def _new_progress(self, t0: float, t_drive: float) -> _Progress:
        """The run's progress state as start() made it before (started at ``t0``, the rate
        measured from ``t_drive``, the start of this slice's drive, at step 0)."""
        # the total through a weak reference: a bound method would be a cycle keeping a
        # dropped paused Simulator alive until the cyclic GC runs
        total = self._weak_total
        if total is None:
            total = self._weak_total = _weak_total(self)     # one per Simulator
        prog = self._progress = _Progress(True, total=total)
        prog.t0 = t0
        prog.mark = (t_drive, 0)
        return prog

    def _should_pause(self, core: int, insn: int) -> bool:
        stop = None
        if self.on_instruction is not None:
            stop = self._stop_at(core, insn)
            if self.on_instruction(self, stop):
                self.stopped = stop
                return True
        hit = self._stepping
        for b in self._breaks:
            if insn in b.instructions and (b.core is None or b.core == core):
                hit = True
        if hit:
            self.stopped = stop or self._stop_at(core, insn)
        return hit

    def _stop_at(self, core: int, insn: int) -> Stop:
        rec = self.module.tables["insns"][insn]
        b = int(rec["block"])
        blocks = self.module.tables["blocks"]
        return Stop(core, _ENGINE_NAMES.get(int(rec["engine"]), "?"),
                    self._names.instruction(insn), _OP_NAMES[int(rec["op"])],
                    self._names.function(int(rec["func"])),
                    self._names.block(b) if b >= 0 else "",
                    insn - int(blocks[b]["insn0"]) if b >= 0 else -1,
                    self._sim.steps())

    def _progress_total(self) -> Optional[int]:
        """The step count of this Simulator's runs when known in advance (one program
        for all cores; see _step_total), computed once."""
        if self._total_steps is Ellipsis:
            self._total_steps = _step_total(self.module, self.cores) \
                if len(self.modules) == 1 else None
        return self._total_steps

    def _finish_run(self) -> None:
        if self.paused:
            self.paused = False
        if self._progress is not None:
            self._progress.close()
        if self._host is not None:
            self._close_host()
        self._collect()

    def _close_host(self) -> None:
        if self._host is not None:
            host, self._host = self._host, None
            host.close()

    def _repr_html_(self) -> str:
        """Jupyter: state, outputs (shape, dtype, min, max, NaN count), warnings, notes,
        findings and stats."""
        from ._html import simulator_html
        return simulator_html(self)

    # -- inspection (paused or after a run) ----------------------------------------------

    def _check_core(self, core: int) -> None:
        if not 0 <= core < self.cores:
            raise ValueError(f"core must be in 0..{self.cores - 1}, got {core!r}")

    def registers(self, core: int = 0, engine: Optional[str] = None) -> Dict[str, int]:
        """Every register's raw value on ``core`` (``function.name`` keys when names
        repeat across functions): ``engine``'s register file, or by default the value
        most recently written by any engine (as :meth:`register`)."""
        self._check_core(core)
        slot = -1 if engine is None else _birsim.enums["ENGINE"].get(engine)
        if slot is None or slot in (0, 7):
            raise ValueError(f"engine must be an engine with registers or None, got {engine!r}")
        regs = self.module.tables["regs"]
        names = [self._names._s(int(regs[i]["name"])) for i in range(len(regs))]
        out = {}
        for i, n in enumerate(names):
            if names.count(n) > 1:
                n = f"{self._names.function(int(regs[i]['func']))}.{n}"
            out[n] = int(self._sim.reg(core, i, slot))
        return out

    def semaphores(self, core: int = 0) -> np.ndarray:
        """The 256 semaphore values of ``core`` (uint32)."""
        self._check_core(core)
        return np.frombuffer(self._sim.sync_state(core)[0], dtype=np.uint32).copy()

    def events(self, core: int = 0) -> np.ndarray:
        """The 256 event flags of ``core`` (bool)."""
        self._check_core(core)
        return np.frombuffer(self._sim.sync_state(core)[1], dtype=np.uint8).astype(bool)

    def queue_heads(self, core: int = 0) -> Dict[str, Dict[str, Any]]:
        """The next instruction waiting in each engine queue of ``core``'s current block:
        ``{engine: {"instruction", "opcode", "block", "position"}}``."""
        self._check_core(core)
        block, heads = self._sim.queue_heads(core)
        t = self.module.tables["insns"]
        out = {}
        for i in heads:
            if i < 0:
                continue
            rec = t[i]
            b = int(rec["block"])
            out[_ENGINE_NAMES.get(int(rec["engine"]), "?")] = {
                "instruction": self._names.instruction(i), "opcode": _OP_NAMES[int(rec["op"])],
                "block": self._names.block(b),
                "position": i - int(self.module.tables["blocks"][b]["insn0"])}
        return out
