"""The ``kernel_sim`` command: the external .npy protocol, served by Python kernels.

    kernel_sim [--module MOD[,MOD...]] config.json
    python -m birsim.kernel_sim [--module MOD] config.json

Imports each module (a dotted name or a ``.py`` path; default: the comma-separated
``BIRSIM_KERNEL_MODULE`` environment variable), whose ``@birsim.kernel("name")``
functions register themselves, then runs the kernel named in ``config.json`` on the
input ``.npy`` files and writes the outputs where the config says. Exit status 0 on
success, 1 on any failure (with the reason on stderr).
"""

import argparse
import importlib
import importlib.util
import json
import os
import sys
import traceback

import numpy as np

__all__ = ["main"]


def _import(spec):
    if spec.endswith(".py") or os.sep in spec:
        name = "_birsim_kernels_" + os.path.splitext(os.path.basename(spec))[0]
        loader_spec = importlib.util.spec_from_file_location(name, spec)
        if loader_spec is None:
            raise ImportError(f"cannot import {spec}")
        mod = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(spec)


def serve(config_path, modules):
    """Run the kernel ``config_path`` names, with the kernels of ``modules`` registered."""
    from .dtypes import numpy_dtype
    from .kernels import _REGISTRY, _is_ml, _raw_dtype
    for m in modules:
        _import(m)
    with open(config_path) as f:
        cfg = json.load(f)
    name = cfg["kernel_name"]
    if name not in _REGISTRY:
        raise KeyError(f"no kernel registered as {name!r} (modules: {modules or 'none'}; "
                       f"registered: {sorted(_REGISTRY)})")
    inputs = []
    for meta in cfg["inputs"]:
        dtype = numpy_dtype(meta["dtype"])
        arr = np.load(meta["path"], allow_pickle=False)
        if _raw_dtype(dtype) != dtype and arr.dtype == _raw_dtype(dtype):
            arr = arr.view(dtype)
        inputs.append(arr.reshape(meta["shape"]))
    results = _REGISTRY[name](*inputs, **cfg.get("attrs", {}))
    if not cfg["outputs"] and results is None:
        results = []
    elif isinstance(results, np.ndarray) or not isinstance(results, (list, tuple)):
        results = [results]
    if len(results) != len(cfg["outputs"]):
        raise ValueError(f"kernel {name!r} returned {len(results)} outputs, "
                         f"config has {len(cfg['outputs'])}")
    for k, (res, meta) in enumerate(zip(results, cfg["outputs"])):
        dtype = numpy_dtype(meta["dtype"])
        arr = np.asarray(res)
        if list(arr.shape) != list(meta["shape"]):
            raise ValueError(f"kernel {name!r} output {k} has shape {list(arr.shape)}, "
                             f"expected {list(meta['shape'])}")
        if arr.dtype == dtype:
            arr = arr.view(_raw_dtype(dtype))        # bf16/fp8 travel as raw bits
        elif _is_ml(arr.dtype) or _raw_dtype(dtype) != dtype:
            # another dtype than declared: send values (birsim casts them with its own
            # rules); never bits that could be mistaken for the declared raw dtype
            arr = arr.astype(np.float32)
        np.save(meta["path"], np.ascontiguousarray(arr))


def main(argv=None):
    p = argparse.ArgumentParser(prog="kernel_sim", description=__doc__.splitlines()[0])
    p.add_argument("--module", "-m", action="append", default=[],
                   help="module (dotted name or .py path) registering kernels; repeatable, "
                        "or comma-separated")
    p.add_argument("config", help="config.json written by birsim")
    args = p.parse_args(argv)
    modules = []
    for spec in args.module + [os.environ.get("BIRSIM_KERNEL_MODULE", "")]:
        modules += [m for m in spec.split(",") if m and m not in modules]
    try:
        serve(args.config, modules)
    except Exception as e:  # noqa: BLE001 -- report any failure as exit status 1
        traceback.print_exc(file=sys.stderr)
        print(f"kernel_sim: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
