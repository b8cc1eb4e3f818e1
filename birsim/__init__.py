"""birsim -- a fast, faithful simulator for AWS Neuron BIR programs.

    >>> import birsim
    >>> module = birsim.load("examples/add.json")
    >>> out = birsim.run(module, {"a": a, "b": b})

See README.md for the model (engines, semaphores, DMA queues, kernel_sim).
"""

import os as _os

try:
    from . import _birsim  # noqa: F401  (the C core; everything below needs it)
except ImportError as _e:          # a source checkout shadowing the installed package
    raise ImportError(
        "birsim's C extension is not built in %s (a source checkout without an in-place "
        "build is shadowing the installed package). Run from another directory, use the "
        "`birsim` command instead of `python -m birsim`, or install with `pip install -e .`"
        % _os.path.dirname(__file__)) from _e

from .errors import (BirsimError, CheckError, DeadlockError, KernelSimError, MemoryAccessError,
                     OutOfMemoryError, ProgramError, SimulationError, StepLimitError,
                     SyncError, UnknownNameError, WorkdirError)
from .loader import Module, load
from .simulator import BirsimWarning, Simulator, run
from .profile import Profile
from .kernels import kernel, kernels
from . import ops, checks, testing

def _version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("birsim")
    except PackageNotFoundError:      # run from a source tree that was never installed
        return "0+unknown"


__version__ = _version()

__all__ = [
    "load", "Module", "Simulator", "run", "kernel", "kernels", "ops", "BirsimWarning",
    "BirsimError", "ProgramError", "SimulationError", "MemoryAccessError",
    "DeadlockError", "SyncError", "KernelSimError", "StepLimitError", "OutOfMemoryError",
    "UnknownNameError", "WorkdirError",
    "CheckError", "checks", "testing",
]
