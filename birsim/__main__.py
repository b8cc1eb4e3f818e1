"""Command line: ``python -m birsim``.

    python -m birsim listing PROGRAM.json
    python -m birsim run PROGRAM.json [--inputs in.npz | --input NAME=FILE.npy ...]
                         [--random-inputs SEED] [--out out.npz] [--cores N]
                         [--schedule in_order|round_robin|random] [--seed S] [--strict]
                         [--kernel-sim EXE] [--max-steps N]

``run`` prints each output's shape, dtype and a short summary, the instruction counts,
and the diagnostics; ``--out`` saves the outputs (bf16/fp8 as their raw bits, like the
kernel_sim protocol). Exit status: 0 on success, 1 on a birsim error (its message on
stderr), 2 on bad arguments.
"""

import argparse
import sys
import warnings

import numpy as np

from . import BirsimError, BirsimWarning, Simulator, load
from .kernels import _raw_dtype

__all__ = ["main"]


def _inputs(module, args):
    given = {}
    if args.inputs:
        with np.load(args.inputs, allow_pickle=False) as z:
            given.update({k: z[k] for k in z.files})
    for spec in args.input:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--input expects NAME=FILE.npy, got {spec!r}")
        given[name] = np.load(path, allow_pickle=False)
    if args.random_inputs is not None:
        rng = np.random.default_rng(args.random_inputs)
        for t in module.inputs:
            if t.name not in given:
                given[t.name] = _random_input(rng, t)
    for t in module.inputs:           # raw-bits files for bf16/fp8 inputs
        v = given.get(t.name)
        if isinstance(v, np.ndarray) and v.dtype == _raw_dtype(t.numpy_dtype) != t.numpy_dtype:
            given[t.name] = v.view(t.numpy_dtype)
    return given


def _random_input(rng, t):
    """Small non-negative integers (0..7: safe as counts, indices and loop bounds) for
    integer inputs, standard normal values for float inputs."""
    dt = t.numpy_dtype
    if dt.kind in "iub":
        return rng.integers(0, 8, size=t.shape).astype(dt)
    return rng.standard_normal(t.shape).astype(dt)


def _summary(a):
    try:
        f = a.astype(np.float64)
        return f"min {f.min():.6g}  max {f.max():.6g}  mean {f.mean():.6g}"
    except (TypeError, ValueError):
        return ""


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m birsim", description="Simulate BIR-JSON programs.")
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("listing", help="print a readable listing of the program")
    ls.add_argument("program")
    rn = sub.add_parser("run", help="run the program and report its outputs")
    rn.add_argument("program")
    rn.add_argument("--inputs", help=".npz holding the inputs by name")
    rn.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    rn.add_argument("--random-inputs", type=int, metavar="SEED",
                    help="standard-normal values for inputs not given otherwise")
    rn.add_argument("--out", help="save the outputs to this .npz")
    rn.add_argument("--cores", type=int, default=1)
    rn.add_argument("--schedule", default="in_order",
                    choices=["in_order", "round_robin", "random"])
    rn.add_argument("--seed", type=int, default=0)
    rn.add_argument("--strict", action="store_true")
    rn.add_argument("--max-steps", type=int)
    rn.add_argument("--kernel-sim", help="kernel_sim executable for custom ops")
    args = p.parse_args(argv)
    try:
        module = load(args.program)
        if args.cmd == "listing":
            print(module.listing())
            return 0
        sim = Simulator(module, cores=args.cores, schedule=args.schedule, seed=args.seed,
                        strict=args.strict, max_steps=args.max_steps,
                        kernel_sim=args.kernel_sim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BirsimWarning)
            outputs = sim.run(_inputs(module, args))
    except BirsimError as e:
        print(f"birsim: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    for name, a in outputs.items():
        print(f"{name}: shape {list(a.shape)} {a.dtype}  {_summary(a)}")
    print(f"executed {sim.stats['instructions']} instructions in {sim.stats['steps']} steps: "
          f"{sim.stats['opcodes']}")
    for w in sim.warnings:
        print(f"warning: {w}")
    for n in sim.notes:
        print(f"note: {n}")
    if args.out:
        np.savez(args.out, **{k: v.view(_raw_dtype(v.dtype)) for k, v in outputs.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
