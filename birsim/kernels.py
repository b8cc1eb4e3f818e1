"""Custom ops delegated to a kernel_sim (seed §6.1, BIR-JSON.md "kernel_sim").

Resolution, per call: an explicit ``Simulator(kernel_sim=...)`` (a callable or an
executable path) always wins; else a kernel registered with :func:`kernel`; else the
``BIRSIM_KERNEL_SIM`` environment variable; else a ``kernel_sim`` on ``PATH``.

In-process kernels get read-only NumPy views of the inputs (no copy when the access
pattern is contiguous). The external protocol writes ``<run_id>-<idx>-birsim.npy``
files and a ``config.json`` into a private temporary directory, runs
``exe config.json`` there (argv, no shell) and reads ``<run_id>-<idx>-simout.npy``
back. bf16/fp8 arrays travel as raw ``uint16``/``uint8`` bits.
"""

import itertools
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

from . import _birsim
from .dtypes import numpy_dtype
from .errors import KernelSimError

__all__ = ["kernel", "kernels", "unregister", "call_external"]

_REGISTRY = {}
_DTYPE_NAMES = {v[0]: k for k, v in _birsim.dtypes.items()}
_OP_NAMES = {v[0]: k for k, v in _birsim.opcodes.items()}
_RUN_IDS = itertools.count()


def kernel(name):
    """Register ``fn(*inputs, **attrs)`` as the kernel_sim for kernel ``name``.

    It returns an array or a tuple/list of arrays (one per output)."""
    if not isinstance(name, str) or not name:
        raise TypeError("kernel name must be a non-empty string")

    def deco(fn):
        _REGISTRY[name] = fn
        return fn
    return deco


def kernels():
    """Names of the registered kernels."""
    return sorted(_REGISTRY)


def unregister(name):
    """Remove a registered kernel (no error if absent)."""
    _REGISTRY.pop(name, None)


def _raw_dtype(np_dt):
    """The dtype an array travels as in .npy files (ml_dtypes types as raw bits)."""
    if np_dt.kind == "V" or np_dt.type.__module__.startswith("ml_dtypes"):
        return np.dtype(f"u{np_dt.itemsize}")
    return np_dt


def _find_executable():
    env = os.environ.get("BIRSIM_KERNEL_SIM")
    if env:
        return env
    return shutil.which("kernel_sim")


class _Host:
    """The callable the C core invokes for each CustomOp/BIRKernel."""

    def __init__(self, sim):
        self.sim = sim
        self.calls = 0

    def close(self):
        pass

    def __call__(self, name, config_json, insn, opcode, ins, outs):
        self.calls += 1
        attrs = json.loads(config_json) if config_json else {}
        inputs = []
        in_meta = []
        for mv, dt, shape in ins:
            dtype = numpy_dtype(_DTYPE_NAMES[dt])
            arr = np.frombuffer(mv, dtype=dtype).reshape(shape)
            inputs.append(arr)
            in_meta.append({"shape": list(shape), "dtype": _DTYPE_NAMES[dt]})
        out_meta = [{"shape": list(shape), "dtype": _DTYPE_NAMES[dt]} for _, dt, shape in outs]
        config = {"kernel_name": name, "opcode": _OP_NAMES[opcode], "instruction": insn,
                  "attrs": attrs, "inputs": in_meta, "outputs": out_meta}
        results = self._dispatch(name, inputs, config)
        if isinstance(results, np.ndarray) or not isinstance(results, (list, tuple)):
            results = [results]
        if len(results) != len(outs):
            raise KernelSimError(f"kernel '{name}' returned {len(results)} outputs, "
                                 f"expected {len(outs)}")
        staged = []
        for k, (res, (mv, dt, shape)) in enumerate(zip(results, outs)):
            dtype = numpy_dtype(_DTYPE_NAMES[dt])
            try:
                res = np.asarray(res)
            except Exception as e:  # noqa: BLE001
                raise KernelSimError(f"kernel '{name}' output {k}: not an array ({e})") from None
            if tuple(res.shape) != tuple(shape):
                raise KernelSimError(f"kernel '{name}' output {k} has shape {list(res.shape)}, "
                                     f"expected {list(shape)}")
            if res.dtype.kind in "OUSVc" and res.dtype != dtype:
                raise KernelSimError(f"kernel '{name}' output {k}: cannot cast {res.dtype} "
                                     f"to {_DTYPE_NAMES[dt]}")
            try:
                staged.append(np.ascontiguousarray(res.astype(dtype)))
            except (TypeError, ValueError) as e:
                raise KernelSimError(f"kernel '{name}' output {k}: cannot cast {res.dtype} "
                                     f"to {_DTYPE_NAMES[dt]}: {e}") from None
        # Only once every output is valid does anything reach simulator memory.
        for arr, (mv, dt, shape) in zip(staged, outs):
            np.frombuffer(mv, dtype=np.uint8)[:] = arr.view(np.uint8).reshape(-1)

    def _dispatch(self, name, inputs, config):
        ks = self.sim.kernel_sim
        if ks is not None and callable(ks):
            return ks(name, inputs, config)
        if ks is not None:
            return call_external(os.fspath(ks), name, inputs, config, self.sim.kernel_timeout)
        if name in _REGISTRY:
            return _REGISTRY[name](*inputs, **config["attrs"])
        exe = _find_executable()
        if exe:
            return call_external(exe, name, inputs, config, self.sim.kernel_timeout)
        raise KernelSimError(
            f"no kernel_sim for kernel '{name}': no kernel_sim= given to the Simulator, no "
            f"kernel registered under that name (registered: {kernels()}), "
            f"BIRSIM_KERNEL_SIM is not set and there is no kernel_sim on PATH")


def make_host(sim):
    return _Host(sim)


def call_external(exe, name, inputs, config, timeout=None):
    """Run an external kernel_sim executable on ``inputs`` by the .npy protocol and
    return its outputs (arrays viewed back as the declared dtypes)."""
    run_id = next(_RUN_IDS)
    workdir = tempfile.mkdtemp(prefix="birsim-kernel-")
    try:
        cfg = dict(config)
        cfg["inputs"] = []
        for idx, (arr, meta) in enumerate(zip(inputs, config["inputs"])):
            path = os.path.join(workdir, f"{run_id}-{idx}-birsim.npy")
            np.save(path, np.ascontiguousarray(arr).view(_raw_dtype(arr.dtype)))
            cfg["inputs"].append(dict(meta, path=path))
        cfg["outputs"] = [dict(meta, path=os.path.join(workdir, f"{run_id}-{idx}-simout.npy"))
                          for idx, meta in enumerate(config["outputs"])]
        cfg_path = os.path.join(workdir, "config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        try:
            proc = subprocess.run([exe, cfg_path], cwd=workdir, capture_output=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise KernelSimError(f"kernel_sim executable not found: {exe}") from None
        except PermissionError:
            raise KernelSimError(f"kernel_sim is not executable: {exe}") from None
        except subprocess.TimeoutExpired:
            raise KernelSimError(f"kernel_sim {exe} timed out after {timeout} s "
                                 f"on kernel '{name}'") from None
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace")[-2000:]
            raise KernelSimError(f"kernel_sim {exe} exited with status {proc.returncode} on "
                                 f"kernel '{name}'; stderr tail:\n{tail}")
        results = []
        for meta in cfg["outputs"]:
            dtype = numpy_dtype(meta["dtype"])
            try:
                arr = np.load(meta["path"], allow_pickle=False)
            except FileNotFoundError:
                raise KernelSimError(f"kernel_sim {exe} left no output {meta['path']!r} "
                                     f"for kernel '{name}'") from None
            except Exception as e:  # noqa: BLE001 -- malformed file
                raise KernelSimError(f"kernel_sim output {meta['path']!r} is malformed: {e}") from None
            raw = _raw_dtype(dtype)
            if raw != dtype and arr.dtype == raw:
                arr = arr.view(dtype)
            results.append(arr)
        return results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
