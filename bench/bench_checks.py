"""Benchmark: what the checkers cost (Simulator(checks=...)). A script, not a test:

    python bench/bench_checks.py [--repeat N] [--trips T]

Runs each program unchecked (``checks=None``) and with ``checks="all"`` alternately in
the same process, ``repeat`` rounds, and reports the median times, the median of the
per-round ratios checked / unchecked and their spread (min..max). Programs:

- the semaphore pipeline of bench_sync.py (4 engines handing over through counting
  semaphores, ``trips`` trips, 1x1 tiles: the scheduler and the checkers dominate);
- examples/sync_pipeline.json (the 6-trip pipeline of the README, whole runs);
- the 64-trip K loop of [128,128] x [128,512] fp32 matmuls of bench_control_flow.py
  (a tiled matmul accumulating in PSUM);
- examples/tiled_matmul.json (whole runs).

Also times the control-flow loop (1,000,000 RegisterAlu trips) and the sync pipeline
with checks off, the figures to compare with a build without the checkers.
"""

import argparse
import os
import sys
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


import birsim  # noqa: E402
from _common import EXAMPLES, Pair, inputs_for, once  # noqa: E402
from bench_control_flow import kloop_matmul_program, loop_alu_program  # noqa: E402
from bench_sync import pipeline  # noqa: E402



def paired(module, inputs, repeat, inner=1):
    """Alternate unchecked / checked runs; returns a Pair (sim = checked, ref = plain)."""
    plain = birsim.Simulator(module, progress=False)
    checked = birsim.Simulator(module, progress=False, checks="all")

    def go(sim):
        for _ in range(inner):
            sim.run(inputs)
    go(plain)
    go(checked)
    ts, tr = [], []
    for _ in range(repeat):
        tr.append(once(lambda: go(plain)) / inner)
        ts.append(once(lambda: go(checked)) / inner)
    return Pair(ts, tr), checked


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--trips", type=int, default=25000)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", birsim.BirsimWarning)
    rows = []
    sp = birsim.load(pipeline(args.trips))
    rows.append((f"sync pipeline ({args.trips} trips)", sp, inputs_for(sp), 1))
    ex = birsim.load(os.path.join(EXAMPLES, "sync_pipeline.json"))
    rows.append(("examples/sync_pipeline.json", ex, inputs_for(ex), 200))
    mm = birsim.load(kloop_matmul_program()[0])
    rows.append(("K-loop matmul 64 x [128,128]x[128,512]", mm, inputs_for(mm), 1))
    tm = birsim.load(os.path.join(EXAMPLES, "tiled_matmul.json"))
    rows.append(("examples/tiled_matmul.json", tm, inputs_for(tm), 50))
    print(f"{'program':42s} {'unchecked':>11s} {'all checks':>11s} {'ratio':>6s} {'spread':>10s} findings")
    for name, mod, inputs, inner in rows:
        pair, sim = paired(mod, inputs, args.repeat, inner)
        print(f"{name:42s} {pair.t_ref * 1e3:9.3f}ms {pair.t_sim * 1e3:9.3f}ms "
              f"{pair.ratio:6.2f} {pair.spread():>10s} {len(sim.findings)}")
    print()
    print("checks off (compare with a build without the checkers):")
    loop = birsim.load(loop_alu_program(1_000_000))
    for name, mod, inputs in [("control-flow loop, 1,000,000 trips", loop, {}),
                              (f"sync pipeline ({args.trips} trips)", sp, inputs_for(sp))]:
        sim = birsim.Simulator(mod, progress=False)
        t = min(once(lambda: sim.run(inputs)) for _ in range(args.repeat))
        print(f"{name:42s} {t * 1e3:9.1f}ms (best of {args.repeat})")


if __name__ == "__main__":
    sys.exit(main())
