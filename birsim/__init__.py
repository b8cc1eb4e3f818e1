"""birsim -- a fast, faithful simulator for AWS Neuron BIR programs.

    >>> import birsim
    >>> module = birsim.load("examples/add.json")
    >>> out = birsim.run(module, {"a": a, "b": b})

See README.md for the model (engines, semaphores, DMA queues, kernel_sim).
"""

import os as _os


def _installed_copy():
    """The directory of an installed birsim (one holding the built extension) elsewhere
    on ``sys.path``, or None."""
    import sys
    from importlib.machinery import EXTENSION_SUFFIXES
    here = _os.path.realpath(_os.path.dirname(__file__))
    for entry in sys.path:
        d = _os.path.realpath(_os.path.join(entry or _os.getcwd(), "birsim"))
        if d != here and any(_os.path.isfile(_os.path.join(d, "_birsim" + s))
                             for s in EXTENSION_SUFFIXES):
            return d
    return None


try:
    from . import _birsim  # noqa: F401  (the C core; everything below needs it)
except ImportError as _e:
    # A source tree without an in-place build found first on sys.path (``python -m
    # pytest`` or ``python -m birsim`` run in a checkout or an unpacked sdist after a plain
    # ``pip install .``): the package becomes the installed copy, so what runs is what was
    # installed, not the unbuilt sources (docs/DESIGN.md, packaging).
    _other = _installed_copy()
    if _other is None:
        raise ImportError(
            "birsim's C extension is not built in %s and no installed birsim was found on "
            "sys.path: install with `pip install .` (or `pip install -e .` for an in-place "
            "build)" % _os.path.dirname(__file__)) from _e
    __path__[:] = [_other]
    __file__ = _os.path.join(_other, "__init__.py")
    if __spec__ is not None:
        __spec__.submodule_search_locations = [_other]
    from . import _birsim  # noqa: F401,F811

from .errors import (BirsimError, BirsimWarning, CheckError, DeadlockError, KernelSimError,
                     MemoryAccessError, OutOfMemoryError, ProgramError, SimulationError,
                     StepLimitError, SyncError, UnknownNameError, WorkdirError)
from .loader import Module, load
from .simulator import Simulator, run
from .profile import Profile
from .kernels import kernel, kernels
from . import ops, checks, testing, module
from .explore import PCT, ExploreResult, Schedule, explore, shrink
from .synchronize import synchronize
from .audit import audit

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
    "explore", "shrink", "Schedule", "PCT", "ExploreResult", "synchronize", "audit",
]
