"""The birsim exception hierarchy.

Every error birsim raises is a :class:`BirsimError`. Load-time problems are
:class:`ProgramError` (with the JSON path of the bad value); run-time problems are
:class:`SimulationError` subclasses carrying ``function``, ``block``, ``position`` and
``instruction`` where they apply. Instruction names are labels that may repeat (compiler
dumps repeat them), so an instruction is identified by its function, block and position
(0-based, in its block); the name is given beside them. The C core's status codes map onto these classes through the
exception column of ``csrc/bs_status.def``.
"""

__all__ = [
    "BirsimError", "ProgramError", "SimulationError", "MemoryAccessError",
    "DeadlockError", "SyncError", "KernelSimError", "StepLimitError", "OutOfMemoryError",
    "UnknownNameError", "WorkdirError",
    "CheckError", "BirsimWarning",
]


class BirsimWarning(UserWarning):
    """A diagnostic: a load-time reading of the program birsim warns about, or one from a
    run (never-written reads, dangling events, ...)."""


class BirsimError(Exception):
    """Base class of every birsim error.

    Attributes (``None`` when they do not apply): ``function``, ``block``,
    ``instruction`` (names from the program), ``position`` (the instruction's 0-based
    position in its block), ``operand`` (e.g. ``"ins[1]"``),
    ``core`` (core index), ``code`` (the compiler's error code, e.g. 1910 or 250),
    ``path`` (JSON path, for load errors).
    """

    def __init__(self, message, *, function=None, block=None, instruction=None,
                 operand=None, core=None, code=None, path=None, position=None):
        super().__init__(message)
        self.message = message
        self.function = function
        self.block = block
        self.instruction = instruction
        self.position = position
        self.operand = operand
        self.core = core
        self.code = code
        self.path = path


class ProgramError(BirsimError):
    """The program (or an input given to it) is malformed."""


class SimulationError(BirsimError):
    """Something went wrong while the program ran."""


class MemoryAccessError(SimulationError):
    """An access pattern touched bytes outside its memory location (or, with
    ``strict=True``, read never-written bytes)."""


class DeadlockError(SimulationError):
    """No engine of any core can advance; the message lists every blocked wait, the
    wait-for cycle (or the waits no pending update can satisfy) and the last instruction
    each core and engine completed. Raised by a Simulator run, it also carries ``dot``
    (the wait-for graph as Graphviz DOT text; :meth:`write_dot` saves it), ``graph``
    (nodes, edges, ``cycle``, ``unsatisfiable``), ``cycle`` and ``last_completed``."""

    dot = None
    graph = None
    cycle: list = []
    last_completed: dict = {}

    def write_dot(self, path) -> None:
        """Write the wait-for graph (Graphviz DOT) to ``path``."""
        if self.dot is None:
            raise SimulationError("this DeadlockError has no wait-for graph (it was not "
                                  "raised by a Simulator run)")
        with open(path, "w") as f:
            f.write(self.dot)


class SyncError(SimulationError):
    """An event or semaphore protocol violation (double set, clear of an unset event,
    inc/dec by a value other than 1)."""


class KernelSimError(SimulationError):
    """A custom op's kernel_sim failed, was missing, or returned bad results."""


class StepLimitError(SimulationError):
    """The run executed more than ``max_steps`` steps."""


class OutOfMemoryError(SimulationError, MemoryError):
    """The simulation needs more memory than ``Simulator(memory_limit=...)`` allows or the
    machine can give; also a :class:`MemoryError`."""


class UnknownNameError(ProgramError, KeyError):
    """``read()``/``register()`` of a name the program does not declare; also a
    :class:`KeyError`."""

    def __str__(self):
        return self.message


class WorkdirError(BirsimError):
    """A compiler work directory lacks a file birsim needs (a dump, an input) or holds
    one it cannot read; the message names the file it looked for."""


class CheckError(SimulationError):
    """With ``Simulator(checks=..., strict=True)``: the first finding of a checker (a race,
    a leftover semaphore, ...). ``.finding`` is the :class:`birsim.checks.Finding`."""

    finding = None
