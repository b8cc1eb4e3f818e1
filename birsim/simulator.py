"""Running a loaded program: the :class:`Simulator`.

The C core (``birsim._birsim.Sim``) holds all machine state; this module converts
NumPy inputs and outputs, names things in errors, and surfaces diagnostics.
"""

import builtins
import operator
import os
import threading
from types import MappingProxyType
import warnings as _warnings
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _birsim
from .dtypes import numpy_dtype
from .errors import (BirsimError, BirsimWarning, CheckError, DeadlockError, OutOfMemoryError, ProgramError, SimulationError,
                     UnknownNameError)
from .checks import make_finding, operand_name, parse_checks
from ._debug import DebugMixin
from ._load.passes import Module, load, program_group, raise_load_warnings
from ._load.module import location_bytes, tables_bytes
from ._schedule import Schedule, _schedule_args
from . import kernels as _kernels
from ._warn import user_stacklevel
from .trace import Trace

__all__ = ["Simulator", "run"]

# schedules by name; "replay" is asked for with a birsim.Schedule (birsim/explore.py)
_SCHEDULE_KINDS = dict(_birsim.enums["SCHED"])
_SCHEDULES = {k: v for k, v in _SCHEDULE_KINDS.items() if k != "replay"}
_UNINIT = dict(_birsim.enums["UNINIT"])
_DMA_MODES = dict(_birsim.enums["DMAMODE"])
_TIMING: Dict[Any, int] = dict(_birsim.enums["TIMING"])
_TIMING.update({False: _TIMING["off"], True: _TIMING["on"]})
_TIMING_NAME = {v: k for k, v in _TIMING.items() if isinstance(k, str)}
#: check mask -> the names of its checks (Simulator.checks), filled as masks are met
_CHECK_NAMES: Dict[int, Tuple[str, ...]] = {}
_FP8_OVERFLOW = dict(_birsim.enums["FP8OVF"])
_ENGINE_NAMES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
#: Sim.summary's names of the opcode and engine counts (stats["opcodes"], ["engines"]), by index
_STAT_OPS = tuple(_OP_NAMES[i] for i in range(len(_OP_NAMES)))
_STAT_ENGINES = tuple(_ENGINE_NAMES.get(i, str(i)) for i in range(len(_birsim.enums["ENGINE"])))
#: The engines with a register file: every ENGINE of bs_enums.def but Unassigned and ALL.
_REG_ENGINES = tuple(n for n, v in sorted(_birsim.enums["ENGINE"].items(), key=lambda kv: kv[1])
                     if _birsim.enums["ENGINE"]["Unassigned"] < v < _birsim.enums["ENGINE"]["ALL"])


MAX_CORES = _birsim.limits["max_cores"]      # BS_MAX_CORES (csrc/core/common.h)
MAX_THREADS = _birsim.limits["max_threads"]  # BS_POOL_MAX (csrc/core/pool.h)
#: The device RNG's default seed (``Simulator(rng_seed=)``; before rng_seed existed the
#: device RNG was seeded 42 + seed, so default results are unchanged).
DEFAULT_RNG_SEED = 42
_DEFAULT = object()
_EMPTY_MAP: Mapping[Any, Any] = MappingProxyType({})
#: BIR dtype name -> numpy_dtype(name), as plans meet them
_NP_DTYPES: Dict[str, Any] = {}


def _physical_memory():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 36


_PHYSICAL: List[int] = []     # _physical_memory(), asked once per process


def _default_memory_limit():
    if not _PHYSICAL:
        _PHYSICAL.append(_physical_memory())
    return _PHYSICAL[0]


def _fmt_bytes(n):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# Per loaded Module (its tables never change): (per-core, shared) bytes of its own
# locations, and the bytes of its tables -- computed once, not at every Simulator(), and
# kept on the Module (``_byte_counts``: a weak-keyed table cost more than the counting).
_LOC_FIELDS = ("placed", "memtype", "parts", "bpp", "set")


def _location_bytes(module):
    """(per-core, shared) bytes of data + shadow of ``module``'s own buffers (counted at
    load, else here once per module)."""
    counts = module._byte_counts
    if counts[0] is not None:
        return counts[0]
    t = module.tables
    locs = t["locs"]
    # the records as tuples of Python ints, one conversion for the table (not a NumPy
    # scalar per field, nor a column view and its list per field)
    fields = operator.itemgetter(*(locs.dtype.names.index(f) for f in _LOC_FIELDS))
    counts[0] = location_bytes(map(fields, locs.tolist()), t["sets"]["shared"].tolist(),
                               _birsim.enums["MEM"]["DRAM"])
    return counts[0]


_ARCH_BY_LEVEL: Dict[int, Any] = {}     # arch level -> its _birsim.arches row


def _declared_bytes(module, cores, arch):
    """Bytes a Simulator may allocate for ``module``: data + shadow of every location
    (shared DRAM once, the others per core) and of SBUF and PSUM per core."""
    name = _ARCH_ALIASES.get(arch, arch) if arch else None
    info = _birsim.arches.get(name) if name else None
    if info is None:
        level = module._byte_counts[2]
        if level is None:
            level = module._byte_counts[2] = int(module.tables["module"][0]["arch"])
        info = _ARCH_BY_LEVEL.get(level)
        if info is None:
            info = _ARCH_BY_LEVEL[level] = next(
                (v for v in _birsim.arches.values() if v[0] == level), max(_birsim.arches.values()))
    per_core, shared = _location_bytes(module)
    chip = 2 * (info[1] * info[2] + info[3] * info[4])
    if name is None:
        _CHIP_BY_LEVEL[level] = chip
    return shared + cores * (per_core + chip)


#: arch level -> bytes of SBUF and PSUM data + shadow per core (_declared_bytes)
_CHIP_BY_LEVEL: Dict[int, int] = {}


def _declared_bytes_known(module):
    """``_declared_bytes(module, 1, None)`` from what the module and _declared_bytes
    counted before, or None when something is not counted yet."""
    loc, _, level = module._byte_counts
    chip = _CHIP_BY_LEVEL.get(level) if loc is not None else None
    return None if chip is None else loc[1] + loc[0] + chip




#: Bytes one trace record costs at its peak (the C pair and times, the last run's set kept
#: for reuse or by its Trace, and the Python record; measured ~300) and bytes of memory
#: per byte of DevicePrint log (the C log, its copy, the values' arrays and a record per
#: print): memory_limit= caps both (README, Choices).
TRACE_RECORD_BYTES = 336
PRINT_LOG_FACTOR = 8


def _tables_bytes(modules):
    """Bytes of the loaded tables (one set for a module list), counted once: the C program
    made from them points at them (csrc/ir/program.c, bs_program_parts.borrow)."""
    if len(modules) == 1 and modules[0]._byte_counts[1] is not None:
        return modules[0]._byte_counts[1]
    total = tables_bytes({id(v): v for m in modules for v in m.tables.values()})
    if len(modules) == 1:
        modules[0]._byte_counts[1] = total
    return total


def _parse_threads(threads: Any) -> int:
    """Simulator(threads=...) as an int in 1..MAX_THREADS: an int, or "auto" (usable CPUs)."""
    if threads == "auto":
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
        return max(1, min(MAX_THREADS, n))
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be an integer in 1..{MAX_THREADS} or 'auto', got {threads!r}")
    return threads

def _resolve_modules(module, cores, strict):
    """(entry module, its group or None, cores) of what ``Simulator()`` was given: a list
    of modules (one per core: cores defaults to their number and must equal it), a
    loaded :class:`Module`, or anything :func:`birsim.load` takes (a work directory
    loads as a list). ``strict`` raises the load warnings."""
    group = None
    if isinstance(module, (list, tuple)):       # one program per core
        group = program_group(module, strict=strict)
        if strict:
            raise_load_warnings(group)
        if cores is None:
            cores = len(group)
        if cores != len(group):
            raise ValueError(f"a list of {len(group)} modules runs module k on core k: "
                             f"cores must be {len(group)}, got {cores!r}")
        module = group[0]
    elif not isinstance(module, Module):
        module = load(module, strict=strict)
        if isinstance(module, list):
            return _resolve_modules(module, cores, strict)
    elif strict:
        raise_load_warnings([module])
    return module, group, 1 if cores is None else cores


def _checked_options(schedule, kernel_sim, cores, max_steps, seed, rng_seed, memory_limit,
                     kernel_timeout, uninitialized, dma_mode, fp8_overflow, threads, checks):
    """Validate ``Simulator()``'s options (ValueError / TypeError naming the bad one);
    return (seed, rng_seed, memory_limit, kernel_timeout, threads, check mask) with
    their defaults filled in."""
    if kernel_sim is not None and not callable(kernel_sim) and \
            not isinstance(kernel_sim, (str, bytes, os.PathLike)):
        raise TypeError("kernel_sim must be a callable fn(name, inputs, config) or the "
                        f"path of a kernel_sim executable, got {type(kernel_sim).__name__}")
    if not isinstance(cores, int) or isinstance(cores, bool) or not 1 <= cores <= MAX_CORES:
        raise ValueError(f"cores must be an integer in 1..{MAX_CORES}, got {cores!r}")
    if max_steps is not None and (not isinstance(max_steps, int) or isinstance(max_steps, bool)
                                  or not 0 <= max_steps < 2**63):
        raise ValueError(f"max_steps must be None or an integer in 0..2**63-1, got {max_steps!r}")
    seed = operator.index(seed)           # TypeError for a non-integer
    rng_seed = operator.index(rng_seed)
    if memory_limit is None:
        memory_limit = _default_memory_limit()
    if not isinstance(memory_limit, int) or isinstance(memory_limit, bool) or memory_limit < 0:
        raise ValueError(f"memory_limit must be a number of bytes, got {memory_limit!r}")
    if kernel_timeout is _DEFAULT:
        kernel_timeout = _kernels.DEFAULT_TIMEOUT
    if kernel_timeout is not None and (isinstance(kernel_timeout, bool) or
                                       not isinstance(kernel_timeout, (int, float)) or
                                       not kernel_timeout > 0):
        raise ValueError(f"kernel_timeout must be None or a positive number of seconds, "
                         f"got {kernel_timeout!r}")
    if uninitialized not in _UNINIT:
        raise ValueError(f"uninitialized must be one of {sorted(_UNINIT)}, got {uninitialized!r}")
    if dma_mode not in _DMA_MODES:
        raise ValueError(f"dma_mode must be one of {sorted(_DMA_MODES)}, got {dma_mode!r}")
    if fp8_overflow not in _FP8_OVERFLOW:
        raise ValueError(f"fp8_overflow must be one of {sorted(_FP8_OVERFLOW)}, "
                         f"got {fp8_overflow!r}")
    nthreads = _parse_threads(threads)
    check_mask = parse_checks(checks)
    return seed, rng_seed, memory_limit, kernel_timeout, nthreads, check_mask


class Simulator(DebugMixin):
    """Simulate a BIR module on ``cores`` NeuronCores.

    ``module`` is a :class:`birsim.Module` or anything :func:`birsim.load` accepts.
    ``schedule`` picks the ready instruction each step: ``"in_order"`` (default),
    ``"round_robin"`` or ``"random"`` (seeded by ``seed``); for exploration also
    ``"pct"`` or a :class:`birsim.PCT` (priorities with change points, seeded by ``seed``)
    and a :class:`birsim.Schedule` (or a list of decisions), which replays a run that
    ``record=True`` recorded (``sim.recorded``) exactly; see :mod:`birsim.explore`.
    ``rng_seed`` seeds the device
    RNG (Rand, Rand2, Dropout, ...; default :data:`DEFAULT_RNG_SEED`), independently of
    ``seed``: a sweep over schedule seeds draws the same random numbers. ``max_steps`` bounds
    executed instructions + loop trips + taken branches (default 10**9).
    ``strict=True`` turns diagnostics into errors, load-time warnings included: a program
    given as anything but a Module is loaded with ``birsim.load(..., strict=True)``, and a
    Module whose load warned raises :class:`ProgramError` with the warning's text.
    ``kernel_sim`` is a callable ``fn(name, inputs, config)`` or the path of an external
    kernel_sim executable for CustomOp/BIRKernel (see :mod:`birsim.kernels`).
    ``trace=True`` records every
    executed instruction: after a run ``sim.trace`` (a :class:`birsim.trace.Trace`) lists
    records ``(core, engine, instruction, opcode, function, block, position, step, start,
    duration, waits_on)`` in execution order (loops and calls appear as their
    instruction, then their body's), with times from birsim's timing model (docs/timing.md);
    ``sim.trace.export(path)`` writes Chrome/Perfetto trace-event JSON.
    ``timing=True`` (or ``"on"``) runs the timing model as the program runs (each
    instruction's modelled start and end on its engine, waits, DMA engines; the module's
    ``arch`` or ``arch=`` picks the target's clocks and bandwidths) and after a run sets
    ``sim.profile``, a :class:`birsim.Profile` (total time, per-engine utilisation, HFU,
    MBU, DMA sizes, ...). ``timing="only"`` gives the same times without computing
    tensor data (no outputs are returned) when no instruction moves memory into registers
    or addresses; otherwise it runs in full. ``timing="compiler"`` is ``"on"`` with each
    instruction's ``predicted_latency_ns`` (the compiler's estimate), where the dump gives
    one, as its engine time. ``pe_throttle=True`` models TensorE's throttle ramp (half rate
    at first, full after 3 us of continuous activity; docs/timing.md). ``trace=True``
    implies the model.
    ``progress`` (default on) shows steps, the current block and the rate once a run has
    taken 2 s (tqdm when installed), and the run's total step count when it is known in
    advance (static control flow; see ``birsim._debug._step_total``). Breakpoints, stepping and ``on_instruction=fn``
    (called as ``fn(sim, stop)`` after every instruction; true pauses) are described in
    :mod:`birsim._debug`; ``sim.stats`` is filled even when a run is interrupted.
    ``memory_limit`` (bytes; default: the machine's physical memory) bounds the memory
    the program declares (every location and its shadow, per core, plus SBUF/PSUM) and
    its loaded tables (a module list's once): above it ``Simulator()`` raises
    :class:`OutOfMemoryError` before allocating anything. What is left caps a run's
    trace (half of it with ``trace=True``, at :data:`TRACE_RECORD_BYTES` a record) and its
    DevicePrint log (:data:`PRINT_LOG_FACTOR` bytes per logged byte); records past a cap
    are dropped with a warning naming ``memory_limit``.
    Large locations are allocated lazily, so untouched tensors cost address space, not
    RSS. ``kernel_timeout`` defaults to :data:`birsim.kernels.DEFAULT_TIMEOUT` seconds
    per external kernel_sim call (``None``: no limit).

    One Simulator runs one run at a time: ``run()``, ``start()``, ``resume()``,
    ``step()``, ``read()`` or ``register()`` from another thread while a run of the same
    Simulator is executing raises :class:`SimulationError` ("simulator busy"), as does a
    new run started from inside a kernel callback. Different Simulators run in parallel
    (the GIL is released while simulating).

    ``checks`` turns on checkers over the same run: ``"all"`` or an iterable of
    ``"races"``, ``"uninitialized"``, ``"leftover_sync"``, ``"capacity"``, ``"nan"``,
    ``"dead_writes"``, ``"uninit_regs"`` (see :mod:`birsim.checks`); after a run ``sim.findings`` lists
    :class:`birsim.checks.Finding` objects, each also issued as a :class:`BirsimWarning`
    (with ``strict=True`` the first raises :class:`birsim.CheckError`). Off by default.
    ``uninitialized`` is what never-written memory reads as: ``"zero"`` (default) or
    ``"nan"`` (floats NaN, integers their maximum), on every run (each run starts with
    all memory never written, whatever an earlier run of the Simulator wrote). ``dma_mode`` is ``"eager"`` (a DMA
    transfers when it runs, the default) or ``"deferred"`` (as late as its completion
    can be observed). ``fp8_overflow`` is what a cast into an fp8 dtype does with a value
    beyond the format's largest finite one: ``"saturate"`` (the default, as the compiler's
    simulator does: ±max) or ``"inf"`` (±inf, as NKI's docs show for ``range_select``'s
    fill; ``float8_e4m3fn`` has no inf and gives NaN). Infinities follow the same rule.

    ``threads`` (default 1) is how many threads a large Matmult (at least 2**21
    multiply-adds) may split its output over; ``"auto"`` means the CPUs this process may
    run on. Results are bit-identical for every value (each element's sum is computed
    whole, in k order, by one thread). The workers start on the first such matmul and
    are joined when the Simulator is freed; a process forked from one that started them
    runs every matmul on its calling thread.

    ``zero_copy`` (default True) spares ``run()`` a copy of each input and output: it
    reads an input given as an array of its exact dtype and shape, C-contiguous and 16-byte
    aligned, in place when nothing in the program can ever write it (decided statically
    and conservatively), and returns an output that is one whole own DRAM buffer, every
    byte written, as that buffer, handed over (the simulator allocates a new one for the
    next run). Anything else is copied, and so is everything in ``debug()``/``start()``
    and in a run that breakpoints or ``on_instruction`` could pause. ``read()`` of a tensor
    that was read in place or handed over raises :class:`SimulationError` (``written()``
    of it is all True). ``zero_copy=False`` copies every input and output, so that the
    caller's arrays are never simulator memory and ``read()`` answers for every tensor.
    Outputs are bit-identical either way (docs/python-api.md, "Zero-copy runs").
    """

    def __init__(self, module: Any, *, arch: Optional[str] = None,
                 cores: Optional[int] = None, max_steps: Optional[int] = None,
                 strict: bool = False, schedule: Any = "in_order", seed: int = 0,
                 kernel_sim: Union[Callable[..., Any], str, bytes, "os.PathLike[str]", None]
                 = None, kernel_timeout: Optional[float] = _DEFAULT,  # type: ignore[assignment]
                 trace: bool = False, progress: bool = True,
                 on_instruction: Optional[Callable[[Any, Any], Any]] = None,
                 memory_limit: Optional[int] = None,
                 checks: Union[str, Iterable[str], None] = None,
                 uninitialized: str = "zero", dma_mode: str = "eager", print: bool = True,
                 fp8_overflow: str = "saturate", threads: Union[int, str] = 1,
                 rng_seed: int = DEFAULT_RNG_SEED, record: bool = False,
                 timing: Union[bool, str] = False, pe_throttle: bool = False,
                 zero_copy: bool = True) -> None:
        if (type(module) is Module and cores is None and arch is None and schedule is _D_SCHEDULE
                and seed is _D_SEED and rng_seed is _D_RNG_SEED and max_steps is None
                and kernel_sim is None and kernel_timeout is _DEFAULT and memory_limit is None
                and checks is None and uninitialized is _D_UNINIT and dma_mode is _D_DMA_MODE
                and fp8_overflow is _D_FP8 and threads is _D_THREADS and timing is False
                and pe_throttle is False and (zero_copy is False or zero_copy is True)):
            # Every option that needs a check is its default (the same object): the
            # general path's answers, known in advance (tests/api/test_api_sim_defaults.py).
            # Attributes at their class-level defaults (below) are not stored.
            if strict:
                raise_load_warnings([module])
                self.strict = True
            self.module = module
            self.modules = (module,)
            self._names = _Names(module)
            self.kernel_timeout = _kernels.DEFAULT_TIMEOUT
            self.memory_limit = memory_limit = _PHYSICAL[0] if _PHYSICAL else _default_memory_limit()
            self._lock = threading.RLock()
            need = _declared_bytes_known(module)
            tables = module._byte_counts[1]
            if need is None or tables is None:
                self._budget_logs(None, None, trace)
            else:
                self._budget(need, tables, trace)
            self._sim = _birsim.Sim(module.program, 1, _SCHED_IN_ORDER, 0, 0, self.strict,
                                    bool(trace), 0, _UNINIT_ZERO, _DMA_EAGER, _FP8_SATURATE, 1,
                                    DEFAULT_RNG_SEED, self._trace_max, self._print_max,
                                    bool(record), 0, 0, _TIMING_OFF, False)
            self.findings = []
            self.prints = []
            self.warnings = []
            self.notes = []
            self.stats = {}
            if trace:
                self._trace = True
            if not print:
                self._print = False
            if record:
                self.record = True
            if zero_copy:
                self._sim.zero_copy()
                self._zc_gone = {}
            else:
                self.zero_copy = False
            if not progress:
                self.progress = False
            if on_instruction is not None:
                self.on_instruction = on_instruction
            return
        module, group, cores = _resolve_modules(module, cores, strict)
        sched_name, decisions, pct_depth, pct_steps = _schedule_args(schedule)
        if sched_name not in _SCHEDULES and decisions is None:
            raise ValueError(f"schedule must be one of {sorted(_SCHEDULES)}, a birsim.Schedule "
                             f"or a birsim.PCT, got {schedule!r}")
        seed, rng_seed, memory_limit, kernel_timeout, nthreads, check_mask = _checked_options(
            schedule, kernel_sim, cores, max_steps, seed, rng_seed, memory_limit,
            kernel_timeout, uninitialized, dma_mode, fp8_overflow, threads, checks)
        timing_mode = _TIMING.get(timing if isinstance(timing, str) else bool(timing))
        if timing_mode is None:
            raise ValueError(f"timing must be False, True, 'on', 'only' or 'compiler', "
                             f"got {timing!r}")
        if pe_throttle and timing_mode == _TIMING["off"] and not trace:
            raise ValueError("pe_throttle=True needs the timing model (timing= or trace=)")
        if not isinstance(zero_copy, bool):
            raise ValueError(f"zero_copy must be True or False, got {zero_copy!r}")
        self.module = module
        self.modules = tuple(group) if group is not None else (module,)
        self.cores = cores
        self.schedule = sched_name
        self.replayed = Schedule(decisions) if decisions is not None else None
        self.record = bool(record)
        self.seed = seed
        self.rng_seed = rng_seed
        self.strict = bool(strict)
        self.kernel_sim = kernel_sim
        self.kernel_timeout = kernel_timeout
        self._names = _Names(module)
        if group is not None:
            program = module._group.program if arch is None else \
                _program_for_arch(module._group, arch)
        else:
            program = module.program if arch is None else _program_for_arch(module, arch)
        self.memory_limit = memory_limit
        self._lock = threading.RLock()
        self._driving = False
        self._budget_logs(group, arch, trace)
        self._sim = _birsim.Sim(program, cores, _SCHEDULE_KINDS[sched_name],
                                int(seed) & (2**64 - 1),
                                int(max_steps or 0), self.strict, bool(trace), check_mask,
                                _UNINIT[uninitialized], _DMA_MODES[dma_mode],
                                _FP8_OVERFLOW[fp8_overflow], nthreads,
                                int(rng_seed) & (2**64 - 1), self._trace_max, self._print_max,
                                bool(record), pct_depth, pct_steps, timing_mode,
                                bool(pe_throttle))
        if decisions:
            self._sim.set_decisions(np.asarray(decisions, np.int32).tobytes())
        self.threads = nthreads
        names = _CHECK_NAMES.get(check_mask)
        if names is None:
            names = _CHECK_NAMES[check_mask] = tuple(
                n for n in _birsim.enums["CHECK"] if check_mask >> _birsim.enums["CHECK"][n] & 1)
        self.checks = names
        self.uninitialized = uninitialized
        self.dma_mode = dma_mode
        self.fp8_overflow = fp8_overflow
        self._init_run_state(trace, print)
        self.timing = _TIMING_NAME[timing_mode]
        self.pe_throttle = bool(pe_throttle)
        self.profile = None
        self._arch = arch
        self.zero_copy = zero_copy
        if zero_copy:
            self._sim.zero_copy()
            self._zc_gone = {}
        self._zc_run = False
        self._plans = None
        self._debug_init(progress, on_instruction)

    # -- the state of a new Simulator at its options' defaults: class-level, so that a
    # Simulator stores only what differs (a store past CPython's 30 shared instance keys
    # is a dict operation; a tiny program's Simulator() made ~56). Only immutable values.
    # what a run fills in (every Simulator has its own)
    findings: List[Any]
    prints: List[Any]
    warnings: List[str]
    notes: List[str]
    stats: Dict[str, Any]
    cores = 1
    schedule = "in_order"
    replayed: Any = None
    record = False
    seed = 0
    rng_seed = DEFAULT_RNG_SEED
    strict = False
    kernel_sim: Any = None
    _driving = False
    threads = 1
    checks: Tuple[str, ...] = ()
    uninitialized = "zero"
    dma_mode = "eager"
    fp8_overflow = "saturate"
    _trace = False
    _print = True           # DevicePrint to stdout as well as sim.prints
    _trace_obj: Optional[Trace] = None     # sim.trace: made when first read
    exited = False
    _ran = False
    #: "off", "on" or "only" (``timing=``); with timing on, ``profile`` after a run
    timing = "off"
    #: TensorE throttle ramp modelled (``pe_throttle=``; docs/timing.md)
    pe_throttle = False
    profile: Optional[Any] = None
    _arch: Optional[str] = None
    #: run() reads never-written inputs in place and hands output buffers over
    #: (docs/python-api.md, "Zero-copy runs")
    zero_copy = True
    _zc_run = False         # this run() lends and takes (zero_copy, no pause)
    # location -> read in place / handed over: a Simulator with zero_copy=True has its
    # own dict, the others never write it (the binding holds the lent buffers' exports)
    _zc_gone: Any = _EMPTY_MAP
    _plans: Any = None      # _make_plans(), at the first run

    def _set_schedule(self, schedule: Any, seed: int = 0, record: bool = True) -> None:
        """Schedule, seed and recording of later runs (birsim.explore reuses one
        Simulator over many schedules)."""
        name, decisions, depth, steps = _schedule_args(schedule)
        if name not in _SCHEDULES and decisions is None:
            raise ValueError(f"schedule must be one of {sorted(_SCHEDULES)}, a birsim.Schedule "
                             f"or a birsim.PCT, got {schedule!r}")
        seed = operator.index(seed)
        self._sim.set_schedule(_SCHEDULE_KINDS[name], int(seed) & (2**64 - 1), bool(record),
                               depth, steps)
        if decisions:
            self._sim.set_decisions(np.asarray(decisions, np.int32).tobytes())
        self.schedule, self.seed, self.record = name, seed, bool(record)
        self.replayed = Schedule(decisions) if decisions is not None else None

    @property
    def recorded(self) -> Any:
        """With ``record=True``: the last run's scheduling decisions as a
        :class:`birsim.Schedule` that ``Simulator(module, schedule=it)`` replays exactly
        (see :mod:`birsim.explore`); None without ``record``."""
        from ._schedule import Schedule
        if not self.record:
            return None
        data, dropped = self._sim.decisions()
        if dropped:
            raise SimulationError(f"{dropped} scheduling decision(s) were lost (out of "
                                  f"memory): the recorded schedule is incomplete")
        return Schedule(tuple(np.frombuffer(data, np.int32).tolist()),
                        origin=self.schedule if self.schedule != "random"
                        else f"random seed {self.seed}")

    def _budget_logs(self, group: Any, arch: Optional[str], trace: bool) -> None:
        """Refuse a program whose memory and tables exceed ``memory_limit``; what is left
        bounds a run's trace (half of it when tracing) and print log."""
        module, cores, memory_limit = self.module, self.cores, self.memory_limit
        if group is None:
            need = _declared_bytes(module, cores, arch)
        else:
            need = sum(_declared_bytes(m, 1, arch) for m in self.modules)
        self._budget(need, _tables_bytes(self.modules), trace)

    def _budget(self, need: int, tables: int, trace: bool) -> None:
        """_budget_logs with the program's declared bytes and tables bytes counted."""
        memory_limit = self.memory_limit
        if need + tables > memory_limit:
            raise OutOfMemoryError(f"the program declares {_fmt_bytes(need)} of memory "
                                   f"({self.cores} core(s), locations and their shadows) and its "
                                   f"tables take {_fmt_bytes(tables)}, above "
                                   f"memory_limit={_fmt_bytes(memory_limit)}")
        left = memory_limit - need - tables
        limits = _birsim.limits
        trace_budget = left // 2 if trace else 0
        self._trace_max = max(1, min(limits["trace_max"], trace_budget // TRACE_RECORD_BYTES))
        self._print_max = max(1, min(limits["print_max"],
                                     (left - trace_budget) // PRINT_LOG_FACTOR))

    def _init_run_state(self, trace: bool, print_: bool) -> None:
        """What a run fills in: findings, trace, prints, warnings, notes, stats."""
        self.findings = []
        self._trace = bool(trace)
        self._print = bool(print_)           # DevicePrint to stdout as well as sim.prints
        self.prints = []
        self._trace_obj = None      # sim.trace: made when first read
        self.warnings = []
        self.notes = []
        self.exited = False
        self.stats = {}
        self._ran = False

    @property
    def trace(self) -> Trace:
        """The last traced run's :class:`birsim.trace.Trace` (``trace=True``); an empty
        one before a run or without ``trace=True``."""
        t = self._trace_obj
        if t is None:
            t = self._trace_obj = Trace()
        return t

    @trace.setter
    def trace(self, value: Trace) -> None:
        self._trace_obj = value

    # -- running -----------------------------------------------------------------

    def run(self, inputs: Optional[Mapping[str, Any]] = None,
            **kw_inputs: Any) -> Dict[str, np.ndarray]:
        """Run the entry function on ``inputs`` (name -> array) and return a dict of
        every output tensor as a NumPy array of its dtype and shape. A run that a
        breakpoint or ``on_instruction`` would pause is begun with :meth:`debug`: here
        such a pause raises :class:`SimulationError` naming where (the run stays paused:
        :meth:`resume` continues it)."""
        # _Busy(self, "run()", True), inlined (every run enters it): the lock taken, never
        # waited for; no run inside a run of the same Simulator
        lock = self._lock
        if not lock.acquire(blocking=False):
            raise SimulationError("simulator busy: run() while another thread runs "
                                  "this Simulator (use one Simulator per thread)")
        try:
            if self._driving:
                raise SimulationError("simulator busy: run() inside a run of the same "
                                      "Simulator (from a kernel callback?)")
            self._driving = True
            try:
                # zero_copy: only a run that cannot pause (no breakpoint, no on_instruction)
                if self.zero_copy and not self._breaks and self.on_instruction is None:
                    self._zc_run = True
                try:
                    DebugMixin.start(self, inputs, **kw_inputs)
                    out = self._drive()
                finally:
                    if self._zc_run:
                        self._zc_run = False
                        self._sim.unlend()      # no pointer to a caller's array outlives the run
            finally:
                self._driving = False
        finally:
            lock.release()
        if out is None:
            raise SimulationError(f"run() paused at {self.stopped}: a run that "
                                  f"breakpoints or on_instruction pause is begun with "
                                  f"sim.debug(inputs) (None while paused); "
                                  f"sim.resume() continues this one")
        return out

    def debug(self, inputs: Optional[Mapping[str, Any]] = None,
              **kw_inputs: Any) -> Optional[Dict[str, np.ndarray]]:
        """Run as :meth:`run` does, pausing at breakpoints and when ``on_instruction``
        returns true: returns the outputs when the run ends, None while it is paused
        (``sim.stopped`` says where; :meth:`resume` and :meth:`step` continue)."""
        with self._busy("debug()", drive=True):
            DebugMixin.start(self, inputs, **kw_inputs)
            return self._drive()

    def start(self, inputs: Optional[Mapping[str, Any]] = None, **kw_inputs: Any) -> None:
        with self._busy("start()", drive=True):
            return DebugMixin.start(self, inputs, **kw_inputs)
    start.__doc__ = DebugMixin.start.__doc__

    def resume(self) -> Optional[Dict[str, np.ndarray]]:
        with self._busy("resume()", drive=True):
            return DebugMixin.resume(self)
    resume.__doc__ = DebugMixin.resume.__doc__

    def step(self) -> Any:
        with self._busy("step()", drive=True):
            return DebugMixin.step(self)
    step.__doc__ = DebugMixin.step.__doc__

    def _busy(self, what, drive=False):
        """Serialise the Simulator's state: another thread gets "simulator busy" (never
        waits); the running thread may inspect (kernel callbacks) but not start a run.
        A context manager (:class:`_Busy`)."""
        return _Busy(self, what, drive)

    def _outputs(self):
        outputs = {}
        if self.timing == "only":       # no arithmetic ran: no outputs (sim.profile)
            return outputs
        sim = self._sim
        # zero_copy: an output handed over (bs_sim_take_loc: one module, every byte written)
        zc_run = self._zc_run and len(self.modules) == 1
        for t, dt, shape, rows, rowbytes, _ in (self._plans or self._make_plans())[2]:
            if t.name in outputs:
                continue                # one tensor of several modules: returned once
            pages = sim.take(t.location_index, rows, rowbytes) if zc_run else None
            if pages is not None:
                self._zc_gone[t.location_index] = "handed over as run()'s output"
                arr = np.frombuffer(pages, dt).reshape(shape)
            else:
                if self._zc_gone and t.location_index in self._zc_gone:
                    self._read_tensor(t, t.core)        # raises: no longer held
                arr = np.empty(shape, dt)   # _read_tensor's work with the plan's figures
                if not sim.read(t.location_index, t.core, rows, rowbytes,
                                arr if dt.isbuiltin == 1 else _raw(arr), True)[1]:
                    self._diagnose(f"output '{t.name}' was not fully written")
            outputs[t.name] = arr
        self.outputs = outputs
        return outputs

    def _make_plans(self):
        """(input by name (set and location names), inputs, outputs), each input and
        output as (tensor, NumPy dtype, shape, rows, rowbytes, core to write: -1 for
        all), made at the first run: the modules never change."""
        modules = self.modules
        multi = len(modules) > 1
        by_name = {}
        plans = []
        for kind in ("inputs", "outputs"):
            rows_ = []
            for t in (getattr(modules[0], kind) if not multi else
                      [t for m in modules for t in getattr(m, kind)]):
                dt = _NP_DTYPES.get(t.dtype)
                if dt is None:
                    dt = _NP_DTYPES[t.dtype] = numpy_dtype(t.dtype)
                rows, rowbytes = (t.rows, t.rowbytes) if t.rows is not None else \
                    _rows(t, dt.itemsize)
                rows_.append((t, dt, tuple(t.shape), rows, rowbytes, t.core if multi else -1))
            plans.append(tuple(rows_))
        for e in plans[0]:
            t = e[0]
            by_name[t.name] = e
            if t.location and t.location != t.name:
                by_name.setdefault(t.location, e)
        self._plans = (by_name, plans[0], plans[1])
        return self._plans

    def _write_inputs(self, inputs):
        if self._zc_gone:
            self._zc_gone.clear()       # a new run: every tensor is the simulator's again
        by_name, ins, _ = self._plans or self._make_plans()
        if len(ins) == 1 and len(inputs) == 1:
            # one input, given once by one of its names: the loops below, unrolled
            e = ins[0]
            for name, value in inputs.items():
                if by_name.get(name) is e:
                    return self._write_tensor(e, value)
        given = {}
        for name, value in inputs.items():
            if name not in by_name:
                raise ProgramError(f"unknown input '{name}'; inputs are "
                                   f"{[t.name for t in self.module.inputs]}")
            t = by_name[name][0]
            if t.name in given:
                raise ProgramError(f"input '{t.name}' given twice")
            given[t.name] = value
        for e in ins:
            t = e[0]
            if t.name not in given:
                raise ProgramError(f"missing input '{t.name}' (shape {list(t.shape)}, {t.dtype})")
            self._write_tensor(e, given[t.name])

    def _write_tensor(self, e, value):
        """Input ``value`` into the location of plan entry ``e`` (_make_plans)."""
        t, dt, shape, rows, rowbytes, core = e
        if type(value) is np.ndarray:
            arr = value
        else:
            try:
                arr = np.asarray(value)
            except Exception as err:  # noqa: BLE001 -- anything NumPy refuses
                raise ProgramError(f"input '{t.name}': cannot convert to an array: {err}") from None
        if arr.shape != shape:
            raise ProgramError(f"input '{t.name}' has shape {list(arr.shape)}, "
                               f"expected {list(t.shape)}")
        if arr.dtype != dt:
            arr = _cast_input(t, arr, dt)
        elif self._zc_run and arr.flags.c_contiguous and arr.flags.aligned and arr.size:
            # lent: the binding holds its buffer export (and so the array) until unlend()
            if self._sim.lend(t.location_index, arr if dt.isbuiltin == 1 else _raw(arr),
                              rows, rowbytes):
                self._zc_gone[t.location_index] = "read in place"
                return
        # no copy when the caller's array already has the dtype and C order: the
        # binding then copies straight from its buffer into the location
        arr = np.ascontiguousarray(arr)
        self._sim.write(t.location_index, core, arr if dt.isbuiltin == 1 else _raw(arr),
                        rows, rowbytes)

    def _read_tensor(self, t, core, out=None, check=True):
        if self._zc_gone:
            gone = self._zc_gone.get(t.location_index)
            if gone is not None:
                raise SimulationError(f"'{t.name}' was {gone} (zero_copy, the default): "
                                      f"the simulator kept no copy; Simulator(..., "
                                      f"zero_copy=False) keeps one")
        dt = numpy_dtype(t.dtype)
        rows, rowbytes = _rows(t, dt.itemsize)
        if out is None:
            out = np.empty(tuple(t.shape), dt)      # filled in place: one copy
        elif not (isinstance(out, np.ndarray) and out.dtype == dt and
                  tuple(out.shape) == tuple(t.shape) and out.flags.c_contiguous and
                  out.flags.writeable):
            got = (f"{type(out).__name__} {getattr(out, 'dtype', '')} "
                   f"{list(getattr(out, 'shape', ()))}").strip()
            raise ProgramError(f"read('{t.name}', out=...): out must be a writeable "
                               f"C-contiguous {dt} array of shape {list(t.shape)}, got {got}")
        _, written = self._sim.read(t.location_index, core, rows, rowbytes, _raw(out), check)
        return out, written

    def read(self, name: str, core: int = 0, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Current contents of any tensor (set or location name) after a run: a new
        array, or ``out`` (a writeable C-contiguous array of the tensor's dtype and
        shape) filled in place and returned -- one copy, no allocation."""
        if not self._ran:
            raise SimulationError("read() needs a run first")
        self._check_core(core)
        with self._busy("read()"):
            return self._read_tensor(self._names.tensor(name, self.modules[
                core if len(self.modules) > 1 else 0]), core, out, False)[0]

    def written(self, name: str, core: int = 0) -> np.ndarray:
        """A boolean array of the tensor's shape: True where the last run (or an input, or
        the input of a must-alias pair) wrote every byte of the element, False where
        some byte was never written. ``birsim check`` gives the False elements BIRSim's
        ``0xFF`` fill in its result files. All True for an input read in place (given
        whole) and an output handed over (only a wholly written one is)."""
        if not self._ran:
            raise SimulationError("written() needs a run first")
        self._check_core(core)
        with self._busy("written()"):
            t = self._names.tensor(name, self.modules[core if len(self.modules) > 1 else 0])
            if t.location_index in self._zc_gone:
                return np.ones(tuple(t.shape), bool)
            itemsize = numpy_dtype(t.dtype).itemsize
            rows, rowbytes = _rows(t, itemsize)
            mask = np.frombuffer(self._sim.written(t.location_index, core, rows, rowbytes),
                                 np.uint8)
            return mask.reshape(-1, itemsize).all(axis=1).reshape(tuple(t.shape))

    def register(self, name: str, core: int = 0, function: Optional[str] = None,
                 engine: Optional[str] = None) -> int:
        """Raw 32/64-bit value of a register after a run.

        Registers are per engine: ``engine`` (``"Pool"``, ``"Activation"``, ``"PE"``,
        ``"DMA"``, ``"DVE"``, ``"SP"``) reads that engine's copy; by default (``None``)
        the value most recently written by any engine of the core."""
        if engine is None:
            slot = -1
        elif engine in _REG_ENGINES:
            slot = _birsim.enums["ENGINE"][engine]
        else:
            raise ValueError(f"engine must be one of {list(_REG_ENGINES)} or None, got {engine!r}")
        self._check_core(core)
        module = self.modules[core if len(self.modules) > 1 else 0]
        with self._busy("register()"):
            return self._sim.reg(core, self._names.register(name, function, module), slot)

    def _check_core(self, core):
        if not isinstance(core, int) or isinstance(core, bool):
            raise TypeError(f"core must be an integer, got {type(core).__name__}")
        if not 0 <= core < self.cores:
            raise ValueError(f"core must be in 0..{self.cores - 1}, got {core!r}")

    # -- diagnostics -----------------------------------------------------------------

    def _diagnose(self, msg):
        if self.strict:
            raise SimulationError(msg + " (strict=True)")
        self.warnings.append(msg)
        _warnings.warn(msg, BirsimWarning, stacklevel=user_stacklevel())

    def _collect_prints(self):
        """sim.prints from the run's DevicePrint log; echoed to stdout unless print=False;
        records past the log's cap become a warning."""
        raw, dropped = self._sim.prints()
        if not raw and not dropped:
            self.prints = []
            return
        from ._prints import format_print, parse_prints
        if not hasattr(self, "_print_prefixes"):
            self._print_prefixes = _print_prefixes(self.module)
        self.prints = parse_prints(raw, self._names, self._print_prefixes)
        if self._print:
            for p in self.prints:
                builtins.print(format_print(p, self.cores), flush=True)
        if dropped:
            msg = f"{dropped} DevicePrint operands not recorded (print log full)"
            if self._print_max < _birsim.limits["print_max"]:
                msg += (f": the log is capped at {_fmt_bytes(self._print_max)} by "
                        f"memory_limit={_fmt_bytes(self.memory_limit)}")
            self.warnings.append(msg)
            _warnings.warn(msg, BirsimWarning, stacklevel=user_stacklevel())

    def _collect(self):
        # one C call: diagnostics, the stats dict (the opcodes and engines that ran) and
        # whether anything was printed
        msgs, dropped, notes, exited, self.stats, printed = self._sim.summary(_STAT_OPS,
                                                                             _STAT_ENGINES)
        self.warnings = msgs
        if dropped:
            msgs.append(f"... and {dropped} more diagnostics")
        for m in msgs:
            _warnings.warn(m, BirsimWarning, stacklevel=user_stacklevel())
        self.notes = [n + ";" for n in notes.split(";") if n] if notes else []
        self.findings = []
        if self.checks:
            raw, fdropped = self._sim.findings()
            self.findings = [make_finding(self._names, self.module, c, m, d) for c, m, d in raw]
            if not self.strict:
                for f in self.findings:
                    _warnings.warn(f.message, BirsimWarning, stacklevel=user_stacklevel())
                if fdropped:
                    _warnings.warn(f"... and {fdropped} more findings", BirsimWarning,
                                   stacklevel=user_stacklevel())
        if printed:
            self._collect_prints()
        else:
            self.prints = []
        if self._trace:
            self.trace = self._names.trace(*self._sim.take_trace())
            if self.trace.dropped and self._trace_max < _birsim.limits["trace_max"]:
                msg = (f"trace: {self.trace.dropped} executed instructions not recorded: "
                       f"the trace is capped at {self._trace_max} records by "
                       f"memory_limit={_fmt_bytes(self.memory_limit)}")
                self.warnings.append(msg)
                _warnings.warn(msg, BirsimWarning, stacklevel=user_stacklevel())
        self.exited = exited
        if self.timing != "off":            # timing off: the core has no summary
            tm = self._sim.timing()
            if tm is not None:
                from .profile import Profile
                self.profile = Profile._from_core(tm, self)

    def _name_error(self, e):
        if isinstance(e, CheckError) and self.findings:
            e.finding = self.findings[-1]
        if isinstance(e, DeadlockError):
            from ._deadlock import attach
            attach(self, e)
        where = getattr(e, "_where", None)
        if not where:
            return
        func, block, insn, operand, core = where
        names = self._names
        if func >= 0:
            e.function = names.function(func)
        if block >= 0:
            e.block = names.block(block)
        if insn >= 0:
            e.instruction = names.instruction(insn)
            e.position = names.position(insn)
        if operand is not None and operand >= 0:
            e.operand = operand_name(operand)
        if core is not None and core >= 0:
            e.core = core



# Simulator()'s defaults (the very objects its signature holds: the fast path of
# __init__ compares by identity) and what the general path makes of them.
_D_SCHEDULE, _D_SEED, _D_RNG_SEED, _D_UNINIT, _D_DMA_MODE, _D_FP8, _D_THREADS = (
    Simulator.__init__.__kwdefaults__[k] for k in (  # type: ignore[index]
        "schedule", "seed", "rng_seed", "uninitialized", "dma_mode", "fp8_overflow", "threads"))
_SCHED_IN_ORDER = _SCHEDULE_KINDS[_D_SCHEDULE]
_UNINIT_ZERO = _UNINIT[_D_UNINIT]
_DMA_EAGER = _DMA_MODES[_D_DMA_MODE]
_FP8_SATURATE = _FP8_OVERFLOW[_D_FP8]
_TIMING_OFF = _TIMING["off"]


def _print_prefixes(module):
    """Instruction index -> the `prefix` string of its DevicePrint (loader: insns str)."""
    t = module.tables
    strings = bytes(t["strings"])
    out = {}
    for i, rec in enumerate(t["insns"]):
        if int(rec["op"]) == _birsim.opcodes["DevicePrint"][0] and int(rec["str"]) >= 0:
            off = int(rec["str"])
            out[i] = strings[off:strings.index(b"\0", off)].decode()
    return out


class _Busy:
    """``Simulator._busy``: the lock taken (never waited for) and ``_driving`` set for the
    body, both restored after it however it ends. A class rather than a generator-based
    context manager: every run, read and register enters one, and the generator cost a
    tiny program's run ~2 us."""

    __slots__ = ("sim", "what", "drive", "was")

    def __init__(self, sim, what, drive):
        self.sim, self.what, self.drive = sim, what, drive

    def __enter__(self):
        sim = self.sim
        if not sim._lock.acquire(blocking=False):
            raise SimulationError(f"simulator busy: {self.what} while another thread runs "
                                  f"this Simulator (use one Simulator per thread)")
        if self.drive and sim._driving:
            sim._lock.release()
            raise SimulationError(f"simulator busy: {self.what} inside a run of the same "
                                  f"Simulator (from a kernel callback?)")
        self.was, sim._driving = sim._driving, sim._driving or self.drive

    def __exit__(self, *exc):
        sim = self.sim
        try:
            sim._driving = self.was
        finally:
            sim._lock.release()
        return False


class _Names:
    """Names of program objects by table index, read from the module's tables."""

    def __init__(self, module):
        self._t = module.tables
        self.module = module

    def __getattr__(self, name):
        # made when first needed: most runs never name anything
        if name == "_strings":
            value = self._strings = bytes(self._t["strings"])
        elif name == "_by_name":
            value = self._by_name = {}  # id(module) -> {set or location name: (set, location)}
        else:
            raise AttributeError(name)
        return value

    def _s(self, off):
        end = self._strings.index(b"\0", off)
        return self._strings[off:end].decode()

    def function(self, i):
        return self._s(int(self._t["funcs"][i]["name"]))

    def block(self, i):
        return self._s(int(self._t["blocks"][i]["name"]))

    def instruction(self, i):
        return self._s(int(self._t["insns"][i]["name"]))

    def position(self, i):
        """0-based position of instruction i in its block (None for a DMABlock, which is
        in no block's instruction list)."""
        blk = self._t["blocks"][int(self._t["insns"][i]["block"])]
        pos = i - int(blk["insn0"])
        return pos if 0 <= pos < int(blk["ninsn"]) else None

    def trace(self, raw, dropped, times):
        """The run's :class:`birsim.trace.Trace` from the core's (core, insn) pairs and
        their modelled times."""
        from .trace import build_trace
        return build_trace(self, raw, dropped, times)

    def tensor(self, name, module=None):
        """An IO-like record for the set or location `name` of `module` (entry function
        first)."""
        module = module or self.module
        names = self._by_name.get(id(module))
        if names is None:
            names = self._by_name[id(module)] = self._names_of(module)
        hit = names.get(name)
        if hit is None:
            raise UnknownNameError(f"no tensor or memory location named {name!r}")
        return module.io_tensor(*hit)

    def _names_of(self, module):
        """name -> (set, location) of `module`'s sets and locations; the first match in
        the order the entry function's sets first, then the others, set before its
        locations, wins."""
        sets, locs = self._t["sets"], self._t["locs"]
        entry = module._entry_index()
        funcs = self._t["funcs"]
        order = sorted((i for i in range(len(sets))
                        if int(funcs[int(sets[i]["func"])]["prog"]) == module.core),
                       key=lambda i: int(sets[i]["func"]) != entry)
        names = {}
        for si in order:
            s = sets[si]
            sname = self._s(int(s["name"]))
            for li in range(int(s["loc0"]), int(s["loc0"]) + int(s["nloc"])):
                names.setdefault(sname, (si, li))
                names.setdefault(self._s(int(locs[li]["name"])), (si, li))
        return names

    def register(self, name, function=None, module=None):
        """Index of register `name` of `module` (the one core k runs), in `function` when
        given."""
        module = module or self.module
        regs, funcs = self._t["regs"], self._t["funcs"]
        fidx = None
        if function is not None:
            if function not in module.functions:
                raise UnknownNameError(f"no function named {function!r}")
            fidx = module._func0 + module.functions.index(function)
        for i in range(len(regs)):
            f = int(regs[i]["func"])
            if int(funcs[f]["prog"]) == module.core and self._s(int(regs[i]["name"])) == name \
                    and (fidx is None or f == fidx):
                return i
        raise UnknownNameError(f"no register named {name!r}")


_ARCH_ALIASES = _birsim.arch_aliases       # BS_ARCH_ALIAS rows of csrc/bs_arch.def


def _program_for_arch(module, arch):
    """The module's (or group's) program re-verified for another architecture's memory
    sizes."""
    from ._load.tables import program_parts
    name = _ARCH_ALIASES.get(arch, arch)
    if name not in _birsim.arches:
        raise ValueError(f"unknown arch {arch!r}; accepted: {sorted(_birsim.arches) + sorted(_ARCH_ALIASES)}")
    tables = dict(module._alone() if hasattr(module, "_alone") else module.tables)
    mod = tables["module"].copy()
    mod["arch"] = _birsim.arches[name][0]
    tables["module"] = mod
    return _birsim.Program(program_parts(tables))


def _raw(arr):
    """A C-contiguous array's bytes for the binding: the array itself when its dtype is
    one of NumPy's own (it exports its buffer; no two views per tensor and run), else a
    uint8 view (the buffer protocol cannot export ml_dtypes' dtypes such as bfloat16)."""
    if arr.dtype.isbuiltin == 1:
        return arr
    return arr.reshape(-1).view(np.uint8)


def _cast_input(t, arr, dt):
    """``arr`` as an array of ``dt`` for input ``t``: raw bits (a ``|V<n>`` array, or an
    unsigned array for a bf16/fp8 input) of the same item size are reinterpreted; anything
    else castable by value is cast, with a :class:`BirsimWarning` when values change."""
    raw = arr.dtype.type is np.void and arr.dtype.names is None
    if raw or (arr.dtype.kind == "u" and dt.kind == "V"):
        if arr.dtype.itemsize != dt.itemsize:
            raise ProgramError(f"input '{t.name}': raw {arr.dtype} items are "
                               f"{arr.dtype.itemsize} bytes, {t.dtype} needs {dt.itemsize}")
        return np.ascontiguousarray(arr).view(dt)
    if arr.dtype.kind in "OUSMmcV" and not _is_ml_float(arr.dtype):
        raise ProgramError(f"input '{t.name}': cannot cast {arr.dtype} to {t.dtype}")
    try:
        with np.errstate(all="ignore"):
            out = arr.astype(dt)
            back = out.astype(arr.dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise ProgramError(f"input '{t.name}': cannot cast {arr.dtype} to {t.dtype}: {e}") from None
    with np.errstate(invalid="ignore"):
        changed = back != arr
    if arr.dtype.kind in "fV":
        changed &= ~(np.isnan(arr.astype(np.float32)) & np.isnan(back.astype(np.float32)))
    n = int(np.count_nonzero(changed))
    if n:
        _warnings.warn(f"input '{t.name}': casting {arr.dtype} to {t.dtype} changes {n} of "
                       f"{arr.size} values", BirsimWarning, stacklevel=user_stacklevel())
    return out


def _is_ml_float(dtype):
    """bfloat16, float8_* and the other ``ml_dtypes`` floats (NumPy kind ``V`` with a
    scalar type of their own, unlike raw ``|V<n>`` bytes)."""
    return dtype.kind == "V" and dtype.type is not np.void and dtype.names is None


def _rows(t, itemsize):
    if t.rows is not None:
        return t.rows, t.rowbytes
    shape = tuple(t.shape)
    if len(shape) == 0:
        return 1, itemsize
    free = 1
    for s in shape[1:]:
        free *= s
    return shape[0], free * itemsize


def run(program: Any, inputs: Optional[Mapping[str, Any]] = None,
        **options: Any) -> Dict[str, np.ndarray]:
    """Load (if needed), simulate and return the outputs in one call, zero-copy as
    ``Simulator.run`` is by default (``zero_copy=False`` copies)."""
    return Simulator(program, **options).run(inputs)
