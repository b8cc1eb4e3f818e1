"""Command line: ``python -m birsim``.

    python -m birsim listing PROGRAM.json
    python -m birsim run PROGRAM.json [--inputs in.npz | --input NAME=FILE.npy ...]
                         [--random-inputs SEED] [--out out.npz] [--cores N]
                         [--schedule in_order|round_robin|random|pct] [--seed S] [--rng-seed R]
                         [--strict] [--kernel-sim EXE] [--kernel-module MODULE] [--max-steps N]
                         [--checks all|NAME,...] [--trace FILE]

    python -m birsim check WORKDIR [--dump GLOB] [--flow standard|baremetal]
                           [--tolerance REL,ABS] [--out DIR]
                           [--schedule ...] [--seed S] [--rng-seed R] [--strict]
                           [--max-steps N] [--kernel-module MODULE] [--checks all|NAME,...]
                           [--trace FILE]
    python -m birsim audit PROGRAM.json|WORKDIR [--schedules S,...] [--kernel-module MODULE]
    python -m birsim profile PROGRAM.json|WORKDIR [--arch trn1|trn2|trn3] [--only]
                             [--compiler] [--pe-throttle]
                             [--inputs in.npz | --input NAME=FILE.npy ...] [--cores N]
                             [--json OUT.json] [--trace FILE]
    python -m birsim --version

``check`` runs a compiler work directory as the compiler's BIRSim hook would (see
birsim/workdir.py and docs/cli.md): per core ``ncNN/sg00/`` (or ``sg00/``) the
``lower_sync`` dump or NKI's ``bir.json``; inputs, results and goldens named
``value_<name>.npy`` / ``value_<name>-birsim.npy`` (the standard flow) or ``<name>.npy`` /
``<name>-birsim.npy`` (NKI's baremetal flow); results under core 0's directory (or
``--out``), never-written elements as BIRSim's 0xFF fill. Exit status: 0 every output that
has a golden matches and at least one was compared, 1 a mismatch (or ``--checks``
findings), 2 could not run (the message names why), 3 nothing compared (no golden found;
the results are still written).

``run`` prints each output's shape, dtype and a short summary, the instruction counts
(and how many modules ran on how many cores: a JSON array holds one module per core),
the diagnostics and the ``--checks`` findings; ``--out`` saves the outputs (bf16/fp8 as
their raw bits, like the kernel_sim protocol). Exit status: 0 on success, 1 on a birsim
error (its message on stderr) or when ``--checks`` found something (the outputs are
still reported and saved), 2 on bad arguments (an unknown check, a kernel module that
does not import, an unwritable ``--trace`` file, ...).

``profile`` runs the program (or a work directory, on its inputs) with the timing model
(``Simulator(timing=True)``, docs/timing.md) and prints ``sim.profile``: modelled total
time, per-engine utilisation, HFU, MBU and DMA transfer sizes; inputs not given are
standard-normal values (seed 0); ``--only`` skips the arithmetic (``timing="only"``);
``--json`` writes the profile. Exit status 0, 1 on a birsim error, 2 on bad arguments.

``--trace FILE`` writes the run's Chrome/Perfetto timeline (``Simulator(trace=True)``,
birsim/trace.py), also when the run stopped on an error; ``--kernel-module MODULE`` (a
dotted name or a ``.py`` path; repeatable or comma-separated) is imported first, so its
``@birsim.kernel("name")`` functions serve the program's custom ops in-process.
"""

import argparse
import os
import sys
import warnings

import numpy as np

from . import BirsimError, BirsimWarning, Simulator, __version__, load
from .checks import CHECKS, parse_checks
from .kernels import _raw_dtype

__all__ = ["main"]


def _inputs(sim, args):
    inputs = [t for m in sim.modules for t in m.inputs]
    given = {}
    if args.inputs:
        with np.load(args.inputs, allow_pickle=False) as z:
            given.update({k: z[k] for k in z.files})
    for spec in args.input:
        name, _, path = spec.partition("=")
        if not path:
            raise ValueError(f"--input expects NAME=FILE.npy, got {spec!r}")
        given[name] = np.load(path, allow_pickle=False)
    if args.random_inputs is not None:
        rng = np.random.default_rng(args.random_inputs)
        for t in inputs:
            if t.name not in given:
                given[t.name] = _random_input(rng, t)
    for t in inputs:                  # raw-bits files for bf16/fp8 inputs
        v = given.get(t.name)
        if isinstance(v, np.ndarray) and v.dtype == _raw_dtype(t.numpy_dtype) != t.numpy_dtype:
            given[t.name] = v.view(t.numpy_dtype)
    return given


def _tolerance(text):
    """``--tolerance REL,ABS``, checked by the one parser of the compiler's form
    (:func:`birsim.testing.parse_tolerance`) and handed on as given."""
    from .testing import parse_tolerance
    try:
        parse_tolerance(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _checks(text):
    """--checks: "all" or a comma-separated list of check names (Simulator(checks=...))."""
    names = "all" if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    try:
        parse_checks(names)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    if not names:
        raise argparse.ArgumentTypeError("expected 'all' or a comma-separated list of checks")
    return names


_UNITS = {"": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GIB": 1 << 30}


def _bytes(text):
    """--memory-limit: a number of bytes, optionally with K/M/G (KiB, MiB, GiB)."""
    t = text.strip().upper()
    digits = t.rstrip("KMGIB")
    unit = t[len(digits):]
    if not digits.isdigit() or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected bytes such as 512M or 2G, got {text!r}")
    return int(digits) * _UNITS[unit]


def _cores(text):
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _import_kernel_modules(specs):
    """Import each --kernel-module (dotted name or .py path; comma-separated allowed):
    its @birsim.kernel registrations serve custom ops in this process. Returns an error
    message, or None."""
    from .kernel_sim import _import
    if specs and os.getcwd() not in sys.path:   # the birsim script's sys.path lacks the cwd
        sys.path.insert(0, os.getcwd())
    for spec in specs:
        for name in (m.strip() for m in spec.split(",")):
            if not name:
                continue
            try:
                _import(name)
            except Exception as e:  # noqa: BLE001 -- any failure of the user's module
                return f"cannot import kernel module {name!r}: {type(e).__name__}: {e}"
    return None


def _write_trace(sim, path):
    """Export the run's trace to --trace PATH; returns an error message, or None."""
    try:
        sim.trace.export(path)
    except (OSError, BirsimError) as e:
        return f"cannot write the trace to {path}: {e}"
    print(f"wrote trace of {len(sim.trace)} instructions to {path}")
    return None


def _print_findings(sim):
    """Print the --checks findings; returns how many there are."""
    for f in sim.findings:
        print(f"finding: {f.kind}: {f.message}")
    if sim.checks:
        print(f"checks ({', '.join(sim.checks)}): {len(sim.findings) or 'no'} finding(s)")
    return len(sim.findings)


def _cores_text(sim):
    n, c = len(sim.modules), sim.cores
    return f"{n} module{'s' if n != 1 else ''} on {c} core{'s' if c != 1 else ''}"


_RUN_EPILOG = """\
exit status:
  0  the program ran (and --checks, if given, found nothing)
  1  a birsim error (the message on stderr; --trace still writes the timeline up to
     it), or --checks found something (the findings are printed; the outputs are
     still reported and --out written)
  2  bad arguments: an unknown check, a kernel module that does not import, an input
     or output file that cannot be read or written, --cores not matching a JSON array
     of modules (one per core), ...
"""


_CHECK_EPILOG = """\
work directory (per core ncNN/sg00/, one core sg00/):
  program   bir_debug.*after-lower_sync*.json (the lower_sync dump), else bir.json
            (NKI's kernel BIR); a .colz kernel is refused (NKI_USE_COLZ=0 writes JSON);
            another subgraph directory (sg01, ...) holding files is refused
  files     standard flow: inputs and goldens value_<name>.npy, results
            value_<name>-birsim.npy; NKI's baremetal flow: <name>.npy and
            <name>-birsim.npy. The flow is the one the inputs are found in (no inputs:
            standard); <name> is the tensor's memory location's name or its set's.
            An in-place output <name> starts as the input <name>.must_alias_input.
  goldens   a golden of another dtype or shape fails; otherwise an output passes when
            it equals its golden exactly, else when |a - g| <= ABS + REL/100 * |g| for
            every element (NaN matches NaN). Elements the program never wrote hold
            BIRSim's 0xFF fill (NaN) in the result file and are compared as such.
exit status:
  0  every output that has a golden matches, and at least one was compared
  1  an output does not match its golden, or --checks found something
  2  could not run (missing or unreadable input, load or run error, a kernel module
     that does not import, an unwritable --trace file: the message says)
  3  nothing compared: no output has a golden (the results are still written)
"""


def _check(args):
    from .workdir import FLOWS, check, format_table
    err = _import_kernel_modules(args.kernel_module)
    if err:
        print(f"birsim: {err}", file=sys.stderr)
        return 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BirsimWarning)
        report = check(args.workdir, args.dump, args.tolerance, args.out, flow=args.flow,
                       schedule=args.schedule, seed=args.seed, rng_seed=args.rng_seed,
                       strict=args.strict, max_steps=args.max_steps, checks=args.checks,
                       trace=args.trace is not None, memory_limit=args.memory_limit)
    sim, wd = report.sim, report.workdir
    findings = {f.message for f in sim.findings}
    from .testing import parse_tolerance
    rtol, atol = parse_tolerance(args.tolerance)
    print(f"birsim check {args.workdir}: {len(sim.modules)} core(s), {wd.flow} flow, "
          f"{sim.stats['instructions']} instructions; tolerance rel {rtol * 100:g}% "
          f"abs {atol:g}")
    print(format_table(report.comparisons))
    for w in dict.fromkeys(str(c.message) for c in caught):
        if w not in findings:
            print(f"warning: {w}")
    nfind = _print_findings(sim)
    if _trace_failed(sim, args):
        return 2
    out_dir = os.path.dirname(next(iter(report.results.values()))) if report.results else ""
    print(f"wrote {len(report.results)} {FLOWS[wd.flow][1] % '<name>'} file(s) to {out_dir}")
    status = report.status
    if status == 1:
        print("MISMATCH: " + ", ".join(c.name for c in report.comparisons if not c.ok))
    elif status == 3:
        print(f"NOTHING COMPARED: no output has a golden ({FLOWS[wd.flow][0] % '<output>'} "
              f"in core 0's directory or another core's); exit status 3")
    else:
        print(f"OK: {len(report.compared)} of {len(report.comparisons)} output(s) compared")
    if nfind:
        print(f"FINDINGS: --checks found {nfind} problem(s); exit status 1")
        status = 1
    return status


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


def _add_run_options(p):
    p.add_argument("--kernel-module", action="append", default=[], metavar="MODULE",
                   help="import this module (dotted name or .py path; repeatable or "
                        "comma-separated) first: its @birsim.kernel(\"name\") functions "
                        "serve the program's custom ops (the external kernel_sim command "
                        "reads BIRSIM_KERNEL_MODULE instead)")
    p.add_argument("--checks", type=_checks, metavar="all|NAME,...",
                   help="run with Simulator(checks=...): 'all' or a comma-separated list "
                        "of " + ", ".join(CHECKS) + " (uninit_regs: an instruction reads a "
                        "register from its engine's register file, which no instruction of "
                        "that engine wrote); findings are printed and make the exit status "
                        "1")
    p.add_argument("--trace", metavar="FILE",
                   help="write the run's Chrome/Perfetto trace-event JSON (open it in "
                        "ui.perfetto.dev)")
    p.add_argument("--memory-limit", type=_bytes, metavar="BYTES",
                   help="Simulator(memory_limit=...), e.g. 2G: the memory the program, "
                        "its tables, trace and print log (and check's .npy arrays) may take")


def _schedules(text):
    """--schedules: names and random seeds, comma-separated."""
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        if item.lstrip("-").isdigit():
            out.append(int(item))
        elif item in ("in_order", "round_robin"):
            out.append(item)
        else:
            raise argparse.ArgumentTypeError(f"expected in_order, round_robin or a seed, "
                                             f"got {item!r}")
    if not out:
        raise argparse.ArgumentTypeError("expected at least one schedule")
    return out


def _audit(args):
    """``birsim audit``: the table of birsim.audit; 0 on success, 1 on a birsim error
    (a program that races as written included), 2 on a kernel module that does not
    import."""
    from .audit import DEFAULT_SCHEDULES, audit, format_table
    err = _import_kernel_modules(args.kernel_module)
    if err:
        print(f"birsim: {err}", file=sys.stderr)
        return 2
    try:
        records = audit(args.program, schedules=args.schedules or DEFAULT_SCHEDULES)
    except BirsimError as e:
        return _fail(e, 1)
    except (OSError, ValueError) as e:
        return _fail(e, 2)
    print(format_table(records))
    return 0


def _write(path, what, write):
    """Call ``write()``; on an OSError say that ``what`` could not be written to ``path``
    and return True."""
    try:
        write()
    except OSError as e:
        print(f"birsim: cannot write {what} to {path}: {e}", file=sys.stderr)
        return True
    return False


def _trace_failed(sim, args):
    """Write --trace FILE if asked; True (after saying why) when it could not be."""
    err = _write_trace(sim, args.trace) if args.trace is not None else None
    if err:
        print(f"birsim: {err}", file=sys.stderr)
    return bool(err)


def _fail(e, status):
    """Print ``e`` as the command's error (a birsim error with its class) and return
    ``status``."""
    text = f"{type(e).__name__}: {e}" if isinstance(e, BirsimError) else str(e)
    print(f"birsim: {text}", file=sys.stderr)
    return status


def format_profile(prof):
    """The text ``birsim profile`` prints for a :class:`birsim.Profile`."""
    lines = [f"modelled time {prof.total_ns / 1000:.4g} us on {prof.arch or 'the module arch'}"
             f" ({prof.cores} core(s)); HFU {100 * prof.hfu:.2f}%, MBU {100 * prof.mbu:.2f}%",
             f"bounds: compute {prof.bounds['compute_bound_ns'] / 1000:.4g} us, memory "
             f"{prof.bounds['memory_bound_ns'] / 1000:.4g} us"]
    for e, v in sorted(prof.engines.items(), key=lambda kv: -kv[1]["active_ns"]):
        lines.append(f"  {e:<11} {v['active_ns'] / 1000:10.4g} us  {100 * v['utilization']:5.1f}%")
    lines.append(f"DMA: {prof.dma_bytes} bytes; transfers by bytes/partition "
                 + ", ".join(f"{k} {n}" for k, n in prof.dma_histogram.items()))
    return "\n".join(lines)


def _profile(args):
    if args.compiler and args.only:
        print("birsim profile: --compiler and --only cannot be combined (the compiler's "
              "latencies are read on a full run)", file=sys.stderr)
        return 2
    timing = "only" if args.only else "compiler" if args.compiler else True
    if os.path.isdir(args.program):
        from .workdir import Workdir
        wd = Workdir(args.program)
        sim = Simulator(wd.modules, arch=args.arch, timing=timing,
                        pe_throttle=args.pe_throttle, trace=args.trace is not None)
        inputs = dict(wd.inputs)
    else:
        module = load(args.program)
        cores = len(module) if isinstance(module, list) else (args.cores or 1)
        sim = Simulator(module, arch=args.arch, cores=cores, trace=args.trace is not None,
                        timing=timing, pe_throttle=args.pe_throttle)
        if args.random_inputs is None:
            args.random_inputs = 0
        inputs = _inputs(sim, args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BirsimWarning)
        sim.run(inputs)
    print(format_profile(sim.profile))
    if args.json and _write(args.json, "the profile", lambda: sim.profile.to_json(args.json)):
        return 2
    return 2 if _trace_failed(sim, args) else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="birsim", description="Simulate BIR-JSON programs.")
    p.add_argument("--version", action="version", version="birsim " + __version__)
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("listing", help="print a readable listing of the program")
    ls.add_argument("program")
    rn = sub.add_parser("run", help="run the program and report its outputs",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog=_RUN_EPILOG)
    rn.add_argument("program")
    rn.add_argument("--inputs", help=".npz holding the inputs by name")
    rn.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    rn.add_argument("--random-inputs", type=int, metavar="SEED",
                    help="standard-normal values for inputs not given otherwise")
    rn.add_argument("--out", help="save the outputs to this .npz")
    rn.add_argument("--cores", type=_cores,
                    help="cores running the program (default 1; a JSON array of modules "
                         "runs module k on core k)")
    rn.add_argument("--schedule", default="in_order",
                    choices=["in_order", "round_robin", "random", "pct"])
    rn.add_argument("--seed", type=int, default=0)
    rn.add_argument("--rng-seed", type=int, default=42,
                    help="seed of the device RNG (Rand, Dropout; default 42), independent "
                         "of --seed")
    rn.add_argument("--strict", action="store_true")
    rn.add_argument("--max-steps", type=int)
    rn.add_argument("--kernel-sim", help="kernel_sim executable for custom ops")
    _add_run_options(rn)
    ck = sub.add_parser("check", help="run a compiler work directory and compare with "
                                      "its goldens",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog=_CHECK_EPILOG)
    ck.add_argument("workdir", help="work directory (ncNN/sg00/ or sg00/) or a dump file")
    ck.add_argument("--dump", metavar="GLOB",
                    help="dump file name pattern in each core's directory (default "
                         "bir_debug.*after-lower_sync*.json)")
    ck.add_argument("--tolerance", type=_tolerance, default="1,1e-5", metavar="REL,ABS",
                    help="as the compiler's --birsim-output-tolerance: REL in percent "
                         "(default 1,1e-5)")
    ck.add_argument("--out", metavar="DIR", help="write the result files here "
                                                 "(default: core 0's directory)")
    ck.add_argument("--flow", choices=["standard", "baremetal"],
                    help="the work directory's file names (default: the flow its input "
                         "files are found in; standard when it has none)")
    ck.add_argument("--schedule", default="in_order",
                    choices=["in_order", "round_robin", "random", "pct"])
    ck.add_argument("--seed", type=int, default=0)
    ck.add_argument("--rng-seed", type=int, default=42,
                    help="seed of the device RNG (Rand, Dropout; default 42), independent "
                         "of --seed")
    ck.add_argument("--strict", action="store_true")
    ck.add_argument("--max-steps", type=int)
    _add_run_options(ck)
    au = sub.add_parser("audit", help="label every wait of a program needed, redundant or "
                                      "over-strong (birsim.audit, docs/sync.md)")
    au.add_argument("program", help="BIR-JSON program or compiler work directory")
    au.add_argument("--schedules", type=_schedules, default=None, metavar="S,...",
                    help="schedules each mutant runs under: in_order, round_robin or a "
                         "random seed (default in_order,round_robin,0)")
    au.add_argument("--kernel-module", action="append", default=[], metavar="MODULE",
                    help="import this module first (its @birsim.kernel functions serve "
                         "custom ops)")
    pf = sub.add_parser("profile", help="run with the timing model and print the profile")
    pf.add_argument("program", help="program JSON or a compiler work directory")
    pf.add_argument("--arch", choices=["trn1", "trn2", "trn3"],
                    help="target (default: the module's arch)")
    pf.add_argument("--only", action="store_true",
                    help="timing only: skip the arithmetic (timing=\"only\")")
    pf.add_argument("--compiler", action="store_true",
                    help="each instruction's predicted_latency_ns, where the dump gives one, "
                         "as its engine time (timing=\"compiler\")")
    pf.add_argument("--pe-throttle", action="store_true",
                    help="model TensorE's throttle ramp (pe_throttle=True)")
    pf.add_argument("--inputs", help=".npz holding the inputs by name")
    pf.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    pf.add_argument("--random-inputs", type=int, metavar="SEED",
                    help="seed of the standard-normal inputs not given (default 0)")
    pf.add_argument("--cores", type=_cores)
    pf.add_argument("--json", metavar="OUT", help="write the profile as JSON")
    pf.add_argument("--trace", metavar="FILE",
                    help="write the run's Chrome/Perfetto trace-event JSON")
    args = p.parse_args(argv)
    if args.cmd == "audit":
        return _audit(args)
    if args.cmd == "profile":
        try:
            return _profile(args)
        except BirsimError as e:
            return _fail(e, 1)
        except (OSError, ValueError) as e:
            return _fail(e, 2)
    if args.cmd == "check":
        try:
            return _check(args)
        except (BirsimError, ValueError) as e:  # could not run (or a refused option): 2
            return _fail(e, 2)
    try:
        module = load(args.program)
        if isinstance(module, list):        # one module per core
            if args.cmd == "listing":
                print("\n".join(m.listing() for m in module))
                return 0
            if args.cores not in (None, len(module)):
                print(f"birsim: {args.program} holds {len(module)} modules, one per core: "
                      f"--cores must be {len(module)}, got {args.cores}", file=sys.stderr)
                return 2
            args.cores = len(module)
        if args.cmd == "listing":
            print(module.listing())
            return 0
        err = _import_kernel_modules(args.kernel_module)
        if err:
            print(f"birsim: {err}", file=sys.stderr)
            return 2
        sim = Simulator(module, cores=args.cores or 1, schedule=args.schedule,
                        seed=args.seed, rng_seed=args.rng_seed, strict=args.strict,
                        max_steps=args.max_steps, kernel_sim=args.kernel_sim,
                        checks=args.checks, trace=args.trace is not None,
                        memory_limit=args.memory_limit)
    except BirsimError as e:
        return _fail(e, 1)
    except ValueError as e:                 # an option the Simulator refuses
        return _fail(e, 2)
    try:
        inputs = _inputs(sim, args)
    except (OSError, ValueError) as e:
        print(f"birsim: cannot read the inputs: {e}", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BirsimWarning)
            outputs = sim.run(inputs)
    except BirsimError as e:
        print(f"birsim: {type(e).__name__}: {e}", file=sys.stderr)
        _trace_failed(sim, args)            # the timeline up to the error
        return 1
    for name, a in outputs.items():
        print(f"{name}: shape {list(a.shape)} {a.dtype}  {_summary(a)}")
    print(f"executed {sim.stats['instructions']} instructions in {sim.stats['steps']} steps "
          f"({_cores_text(sim)}): {sim.stats['opcodes']}")
    for w in sim.warnings:
        print(f"warning: {w}")
    for n in sim.notes:
        print(f"note: {n}")
    nfind = _print_findings(sim)
    if args.out and _write(args.out, "the outputs", lambda: np.savez(
            args.out, **{k: v.view(_raw_dtype(v.dtype)) for k, v in outputs.items()})):
        return 2
    if _trace_failed(sim, args):
        return 2
    if nfind:
        print(f"birsim: --checks found {nfind} problem(s)", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
