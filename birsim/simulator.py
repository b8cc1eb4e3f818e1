"""Running a loaded program: the :class:`Simulator`.

The C core (``birsim._birsim.Sim``) holds all machine state; this module converts
NumPy inputs and outputs, names things in errors, and surfaces diagnostics.
"""

import os
import warnings as _warnings

import numpy as np

from . import _birsim
from .dtypes import numpy_dtype
from .errors import BirsimError, ProgramError, SimulationError
from ._debug import DebugMixin
from .trace import Trace

__all__ = ["Simulator", "run", "BirsimWarning"]

_SCHEDULES = dict(_birsim.enums["SCHED"])
_ENGINE_NAMES = {v: k for k, v in _birsim.enums["ENGINE"].items()}
_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
_REG_ENGINES = ("Pool", "Activation", "PE", "DMA", "DVE", "SP")


class BirsimWarning(UserWarning):
    """A diagnostic from a run (never-written reads, dangling events, ...)."""


class Simulator(DebugMixin):
    """Simulate a BIR module on ``cores`` NeuronCores.

    ``module`` is a :class:`birsim.Module` or anything :func:`birsim.load` accepts.
    ``schedule`` picks the ready instruction each step: ``"in_order"`` (default),
    ``"round_robin"`` or ``"random"`` (seeded by ``seed``). ``max_steps`` bounds
    executed instructions + loop trips + taken branches (default 10**9).
    ``strict=True`` turns diagnostics into errors. ``kernel_sim`` is a callable
    ``fn(name, inputs, config)`` or the path of an external kernel_sim executable for
    CustomOp/BIRKernel (see :mod:`birsim.kernels`). ``trace=True`` records every
    executed instruction: after a run ``sim.trace`` (a :class:`birsim.trace.Trace`) lists
    records ``(core, engine, instruction, opcode, function, block, position, step, start,
    duration, waits_on)`` in execution order (loops and calls appear as their
    instruction, then their body's), with times from a documented cost model;
    ``sim.trace.export(path)`` writes Chrome/Perfetto trace-event JSON.
    ``progress`` (default on) shows steps, the current block and the rate once a run has
    taken 2 s (tqdm when installed). Breakpoints, stepping and ``on_instruction=fn``
    (called as ``fn(sim, stop)`` after every instruction; true pauses) are described in
    :mod:`birsim._debug`; ``sim.stats`` is filled even when a run is interrupted.
    """

    def __init__(self, module, *, arch=None, cores=None, max_steps=None, strict=False,
                 schedule="in_order", seed=0, kernel_sim=None, kernel_timeout=None,
                 trace=False, progress=True, on_instruction=None):
        from .loader import load, Module, program_group
        group = None
        if isinstance(module, (list, tuple)):       # one program per core
            group = program_group(module)
            if cores is None:
                cores = len(group)
            if cores != len(group):
                raise ValueError(f"a list of {len(group)} modules runs module k on core k: "
                                 f"cores must be {len(group)}, got {cores!r}")
            module = group[0]
        elif not isinstance(module, Module):
            module = load(module)
            if isinstance(module, list):
                return self.__init__(module, arch=arch, cores=cores, max_steps=max_steps,
                                     strict=strict, schedule=schedule, seed=seed,
                                     kernel_sim=kernel_sim, kernel_timeout=kernel_timeout,
                                     trace=trace, progress=progress,
                                     on_instruction=on_instruction)
        if cores is None:
            cores = 1
        if schedule not in _SCHEDULES:
            raise ValueError(f"schedule must be one of {sorted(_SCHEDULES)}, got {schedule!r}")
        if kernel_sim is not None and not callable(kernel_sim) and \
                not isinstance(kernel_sim, (str, bytes, os.PathLike)):
            raise TypeError("kernel_sim must be a callable fn(name, inputs, config) or the "
                            f"path of a kernel_sim executable, got {type(kernel_sim).__name__}")
        if not isinstance(cores, int) or cores < 1:
            raise ValueError(f"cores must be a positive integer, got {cores!r}")
        self.module = module
        self.modules = tuple(group) if group is not None else (module,)
        self.cores = cores
        self.schedule = schedule
        self.seed = seed
        self.strict = bool(strict)
        self.kernel_sim = kernel_sim
        self.kernel_timeout = kernel_timeout
        self._names = _Names(module)
        if group is not None:
            program = module._group.program if arch is None else \
                _program_for_arch(module._group, arch)
        else:
            program = module.program if arch is None else _program_for_arch(module, arch)
        self._sim = _birsim.Sim(program, cores, _SCHEDULES[schedule], int(seed) & (2**64 - 1),
                                int(max_steps or 0), self.strict, bool(trace))
        self._trace = bool(trace)
        self.trace = Trace()
        self.warnings = []
        self.notes = []
        self.exited = False
        self.stats = {}
        self._ran = False
        self._presets = {}
        self._debug_init(progress, on_instruction)

    # -- running -----------------------------------------------------------------

    def run(self, inputs=None, **kw_inputs):
        """Run the entry function on ``inputs`` (name -> array) and return a dict of
        every output tensor as a NumPy array of its dtype and shape (None when a
        breakpoint paused the run: see :meth:`resume`)."""
        self.start(inputs, **kw_inputs)
        return self._drive()

    def _outputs(self):
        outputs = {}
        for t in self._io("outputs"):
            if t.name in outputs:
                continue                # one tensor of several modules: returned once
            arr, written = self._read_tensor(t, t.core)
            if not written:
                self._diagnose(f"output '{t.name}' was not fully written")
            outputs[t.name] = arr
        self.outputs = outputs
        return outputs

    def preset(self, name, value):
        """Give output ``name`` initial contents, written before every run after the
        inputs (an output that aliases an input: the compiler's
        ``<name>.must_alias_input``)."""
        for t in self._io("outputs"):
            if t.name == name:
                self._presets[name] = value
                return
        raise ProgramError(f"preset: no output named '{name}'")

    def _io(self, kind):
        """The inputs or outputs of every module (one per core), module order."""
        return [t for m in self.modules for t in getattr(m, kind)]

    def _write_inputs(self, inputs):
        by_name = {}
        for t in self._io("inputs"):
            by_name[t.name] = t
            if t.location and t.location != t.name:
                by_name.setdefault(t.location, t)
        given = {}
        for name, value in inputs.items():
            if name not in by_name:
                raise ProgramError(f"unknown input '{name}'; inputs are "
                                   f"{[t.name for t in self.module.inputs]}")
            t = by_name[name]
            if t.name in given:
                raise ProgramError(f"input '{t.name}' given twice")
            given[t.name] = value
        for t in self._io("inputs"):
            if t.name not in given:
                raise ProgramError(f"missing input '{t.name}' (shape {list(t.shape)}, {t.dtype})")
            self._write_tensor(t, given[t.name])
        for t in self._io("outputs"):                 # outputs given initial contents
            if t.name in self._presets:
                self._write_tensor(t, self._presets[t.name])

    def _write_tensor(self, t, value):
        dt = numpy_dtype(t.dtype)
        try:
            arr = np.asarray(value)
        except Exception as e:  # noqa: BLE001 -- anything NumPy refuses
            raise ProgramError(f"input '{t.name}': cannot convert to an array: {e}") from None
        if tuple(arr.shape) != tuple(t.shape):
            raise ProgramError(f"input '{t.name}' has shape {list(arr.shape)}, "
                               f"expected {list(t.shape)}")
        if arr.dtype != dt:
            arr = _cast_input(t, arr, dt)
        # no copy when the caller's array already has the dtype and C order: the
        # binding then copies straight from its buffer into the location
        arr = np.ascontiguousarray(arr)
        rows, rowbytes = _rows(t, arr.dtype.itemsize)
        core = -1 if len(self.modules) == 1 else t.core
        self._sim.write(t.location_index, core, _raw(arr), rows, rowbytes)

    def _read_tensor(self, t, core):
        dt = numpy_dtype(t.dtype)
        rows, rowbytes = _rows(t, dt.itemsize)
        out = np.empty(tuple(t.shape), dt)          # filled in place: one copy
        _, written = self._sim.read(t.location_index, core, rows, rowbytes, _raw(out))
        return out, written

    def read(self, name, core=0):
        """Current contents of any tensor (set or location name) after a run."""
        if not self._ran:
            raise SimulationError("read() needs a run first")
        if not 0 <= core < self.cores:
            raise ValueError(f"core must be in 0..{self.cores - 1}")
        return self._read_tensor(self._names.tensor(name, self.modules[
            core if len(self.modules) > 1 else 0]), core)[0]

    def register(self, name, core=0, function=None, engine=None):
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
        if not 0 <= core < self.cores:
            raise ValueError(f"core must be in 0..{self.cores - 1}")
        return self._sim.reg(core, self._names.register(name, function), slot)

    # -- diagnostics -----------------------------------------------------------------

    def _diagnose(self, msg):
        if self.strict:
            raise SimulationError(msg + " (strict=True)")
        self.warnings.append(msg)
        _warnings.warn(msg, BirsimWarning, stacklevel=3)

    def _collect(self):
        msgs, dropped, notes, exited = self._sim.diagnostics()
        ops, engines, steps = self._sim.stats()
        self.warnings = list(msgs)
        if dropped:
            self.warnings.append(f"... and {dropped} more diagnostics")
        for m in self.warnings:
            _warnings.warn(m, BirsimWarning, stacklevel=4)
        self.notes = [n + ";" for n in notes.split(";") if n]
        if self._trace:
            self.trace = self._names.trace(*self._sim.trace())
        self.exited = bool(exited)
        self.stats = {
            "steps": steps,
            "opcodes": {_OP_NAMES[i]: n for i, n in enumerate(ops) if n},
            "engines": {_ENGINE_NAMES.get(i, str(i)): n for i, n in enumerate(engines) if n},
            "instructions": sum(ops),
        }

    def _name_error(self, e):
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
            e.operand = f"outs[{operand - 1000}]" if operand >= 1000 else f"ins[{operand}]"
        if core is not None and core >= 0:
            e.core = core


class _Names:
    """Names of program objects by table index, read from the module's tables."""

    def __init__(self, module):
        t = module.tables
        self._strings = bytes(t["strings"])
        self._t = t
        self.module = module

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

    def trace(self, raw, dropped):
        """The run's :class:`birsim.trace.Trace` from the core's (core, insn) pairs."""
        from .trace import build_trace
        return build_trace(self, raw, dropped)

    def tensor(self, name, module=None):
        """An IO-like record for the set or location `name` of `module` (entry function
        first)."""
        module = module or self.module
        sets, locs = self._t["sets"], self._t["locs"]
        entry = module._entry_index()
        funcs = self._t["funcs"]
        order = sorted((i for i in range(len(sets))
                        if int(funcs[int(sets[i]["func"])]["prog"]) == module.core),
                       key=lambda i: int(sets[i]["func"]) != entry)
        for si in order:
            s = sets[si]
            sname = self._s(int(s["name"]))
            for li in range(int(s["loc0"]), int(s["loc0"]) + int(s["nloc"])):
                lname = self._s(int(locs[li]["name"]))
                if name in (sname, lname):
                    return module.io_tensor(si, li)
        raise KeyError(f"no tensor or memory location named '{name}'")

    def register(self, name, function=None):
        regs = self._t["regs"]
        fidx = None if function is None else self.module.functions.index(function)
        for i in range(len(regs)):
            if self._s(int(regs[i]["name"])) == name and (fidx is None or int(regs[i]["func"]) == fidx):
                return i
        raise KeyError(f"no register named '{name}'")


_ARCH_ALIASES = {"trn1": "sunda", "inf2": "sunda", "gen2": "sunda", "trn2": "gen3",
                 "trn3": "core_v4", "gen4": "core_v4"}


def _program_for_arch(module, arch):
    """The module's (or group's) program re-verified for another architecture's memory
    sizes."""
    from ._tables import program_parts
    name = _ARCH_ALIASES.get(arch, arch)
    if name not in _birsim.arches:
        raise ValueError(f"unknown arch {arch!r}; accepted: {sorted(_birsim.arches) + sorted(_ARCH_ALIASES)}")
    tables = dict(module._alone() if hasattr(module, "_alone") else module.tables)
    mod = tables["module"].copy()
    mod["arch"] = _birsim.arches[name][0]
    tables["module"] = mod
    return _birsim.Program(program_parts(tables))


def _raw(arr):
    """A C-contiguous array's bytes as a uint8 view (the buffer protocol cannot export
    ml_dtypes' dtypes such as bfloat16)."""
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
                       f"{arr.size} values", BirsimWarning, stacklevel=4)
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


def run(program, inputs=None, **options):
    """Load (if needed), simulate and return the outputs in one call."""
    return Simulator(program, **options).run(inputs)
