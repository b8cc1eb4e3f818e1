"""Helpers shared by the bench/ scripts (not part of the birsim package).

Every script imports only the installed ``birsim`` (``pip install .``) plus this file,
which Python finds because a script's own directory is first on ``sys.path``.

Timing protocol: the machine may be shared, so one best figure says little. ``paired``
times birsim and its NumPy peer alternately in the same process, ``repeat`` rounds each,
and reports the median of each side, the median of the per-round ratios and the spread
of those ratios (min..max). Ratios are birsim / NumPy: below 1 means birsim is faster.
"""

import os
import statistics
import subprocess
import sys
import time

import numpy as np


# {=== BIR-JSON builders ===}

def tensor(name, kind, shape, dtype="float32", mem="SB"):
    """A memory_location_set with one location of the same name."""
    return {"Skind": "memory_location_set", "name": name, "kind": kind, "dtype": dtype,
            "tensor_shape": list(shape), "memorylocations": [{"name": name, "type": mem}]}


def whole(name, shape, dtype="float32", offset=None):
    """An access pattern over all of a [P, F] tensor (row-major, dense)."""
    o = {"kind": "physical_ap", "memref": name, "dtype": dtype,
         "ap": [[shape[1] if len(shape) > 1 else 1, shape[0]],
                [1, shape[1] if len(shape) > 1 else 1]]}
    if offset is not None:
        o["offset"] = offset
    return o


def program(tensors, insns, registers=()):
    return {"version": 2, "arch": "gen3", "functions": [{
        "name": "main", "allocations": list(tensors) + list(registers),
        "blocks": [{"name": "b0", "instructions": list(insns)}]}]}


# {=== Timing ===}

#: The repository's examples/ folder (the benches run from a checkout).
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def inputs_for(module, seed=0):
    """Uniform [0, 1) inputs of each input's declared dtype (bench programs only)."""
    import birsim
    rng = np.random.default_rng(seed)
    return {t.name: rng.random(t.shape).astype(birsim.dtypes.numpy_dtype(t.dtype))
            for t in module.inputs}


def once(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def per_call(fn, n):
    """Seconds per call of fn, over n back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


class Pair:
    """Medians and ratio spread of alternating birsim / NumPy timings."""

    def __init__(self, sim, ref):
        self.sim, self.ref = list(sim), list(ref)
        self.ratios = [s / r for s, r in zip(self.sim, self.ref)]

    @property
    def t_sim(self):
        return statistics.median(self.sim)

    @property
    def t_ref(self):
        return statistics.median(self.ref)

    @property
    def ratio(self):
        return statistics.median(self.ratios)

    def spread(self):
        return "%.2f-%.2f" % (min(self.ratios), max(self.ratios))


def paired(sim_fn, ref_fn, repeat, warm=1):
    """Time sim_fn and ref_fn alternately `repeat` times (each returns seconds)."""
    for _ in range(warm):
        sim_fn()
        ref_fn()
    s, r = [], []
    for i in range(repeat):
        if i % 2:
            r.append(ref_fn())
            s.append(sim_fn())
        else:
            s.append(sim_fn())
            r.append(ref_fn())
    return Pair(s, r)


def paired_calls(sim_call, ref_call, repeat, clock, warm=1):
    """paired() of two plain calls, each timed on `clock` (one call per round)."""
    def timed(fn):
        def round_():
            t0 = clock()
            fn()
            return clock() - t0
        return round_
    return paired(timed(sim_call), timed(ref_call), repeat, warm=warm)


def fmt_time(t):
    if t >= 1:
        return "%.2f s" % t
    if t >= 1e-3:
        return "%.2f ms" % (t * 1e3)
    return "%.1f us" % (t * 1e6)


def blas_info():
    """One line naming NumPy's BLAS, its kernel (threadpoolctl) and OPENBLAS_* overrides."""
    extra = "threadpoolctl not installed: kernel not queried"
    try:
        import threadpoolctl
        for p in threadpoolctl.threadpool_info():
            if p.get("user_api") == "blas":
                extra = "%s %s, kernel %s, %d threads" % (
                    p.get("internal_api"), p.get("version"), p.get("architecture"),
                    p.get("num_threads", 0))
                break
    except ImportError:
        pass
    env = ", ".join("%s=%s" % (k, os.environ[k]) for k in
                    ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                     "OPENBLAS_THREAD_TIMEOUT")
                    if k in os.environ) or "no OPENBLAS_* overrides"
    return "numpy %s; BLAS %s; %s" % (np.__version__, extra, env)


def blas_threads(n):
    """Context manager limiting NumPy's BLAS to n threads (threadpoolctl), or a no-op."""
    try:
        import threadpoolctl
        return threadpoolctl.threadpool_limits(limits=n, user_api="blas")
    except ImportError:
        import contextlib
        return contextlib.nullcontext()


def thread_children(script, threads, args, nfields):
    """Run ``script --child T *args`` once per thread count T, in a child process whose
    BLAS reads T threads from its environment (OPENBLAS/OMP/MKL_NUM_THREADS) when NumPy
    loads: no threadpoolctl needed. OpenBLAS's idle threads spin for 2**OPENBLAS_THREAD_TIMEOUT
    cycles before they sleep (default 2**28: ~0.1 s); the children set 20 (~0.3 ms, as long
    as birsim's workers spin), unless the caller set it, so that neither side's idle threads
    compete with the other side's timed calls when the two alternate. Each child prints ``BLAS <info>`` and lines ``ROW
    <nfields fields> <birsim times> | <NumPy times>``. Returns ([(T, fields, Pair)], blas
    info), or (None, info) after echoing a failed child's output to stderr."""
    out, blas = [], ""
    for t in threads:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t),
                   MKL_NUM_THREADS=str(t))
        env.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")
        res = subprocess.run([sys.executable, os.path.abspath(script), "--child", str(t)]
                             + [str(a) for a in args], env=env, capture_output=True, text=True)
        if res.returncode != 0:
            sys.stderr.write(res.stdout + res.stderr)
            return None, blas
        for line in res.stdout.splitlines():
            if line.startswith("BLAS "):
                blas = line[5:]
            elif line.startswith("ROW "):
                *fields, rest = line[4:].split(" ", nfields)
                s, r = rest.split("|")
                out.append((t, fields, Pair([float(x) for x in s.split()],
                                            [float(x) for x in r.split()])))
    return out, blas


def table(header, rows):
    """Print rows (lists of strings) as an aligned plain-text table."""
    w = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)).rstrip()
    print(line(header))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print(line(r))


def copy_round(full, empty, inputs, copies, timer):
    """One birsim round for paired(): a run of ``full`` (the instruction ``copies`` times)
    minus a run of ``empty`` (the same program without them), per copy."""
    return lambda: (timer(lambda: full.run(inputs)) - timer(lambda: empty.run(inputs))) / copies


def target_table(title, rows, target):
    """Print (name, Pair) rows against ``target`` (ratio <= target); True if all meet it."""
    out, ok = [], True
    for name, pr in rows:
        good = pr.ratio <= target
        ok &= good
        out.append([name, fmt_time(pr.t_sim), fmt_time(pr.t_ref), "%.2fx" % pr.ratio,
                    pr.spread(), "ok" if good else "MISS"])
    table([title, "birsim", "NumPy", "ratio", "spread", "<= %gx" % target], out)
    return ok
