"""birsim -- a fast, faithful simulator for AWS Neuron BIR programs.

    >>> import birsim
    >>> module = birsim.load("examples/add.json")
    >>> out = birsim.run(module, {"a": a, "b": b})

See README.md for the model (engines, semaphores, DMA queues, kernel_sim).
"""

from .errors import (BirsimError, CheckError, DeadlockError, KernelSimError, MemoryAccessError,
                     OutOfMemoryError, ProgramError, SimulationError, StepLimitError,
                     SyncError, UnknownNameError, WorkdirError)
from .loader import Module, load
from .simulator import BirsimWarning, Simulator, run
from .kernels import kernel, kernels
from . import ops, checks

__version__ = "0.1.0"

__all__ = [
    "load", "Module", "Simulator", "run", "kernel", "kernels", "ops", "BirsimWarning",
    "BirsimError", "ProgramError", "SimulationError", "MemoryAccessError",
    "DeadlockError", "SyncError", "KernelSimError", "StepLimitError", "OutOfMemoryError",
    "UnknownNameError", "WorkdirError",
    "CheckError", "checks",
]
