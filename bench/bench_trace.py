"""Cost of a traced run (issue 24, "traced run <= 1.5x the plain run"). A script, not a test:

    python bench/bench_trace.py [--repeat N] [--trips T]

The instruction-bound program of bench_control_flow.py (a Loop of T trips whose body is one
RegisterAlu) and a sync-heavy two-engine pipeline, each run plain and with ``trace=True``
alternately in one process (bench/_common.paired). A traced run records every instruction's
modelled start and duration in the C core (csrc/vm/timing.c); ``sim.trace`` wraps those
arrays and makes a record only when one is read, so the ratio is the core's cost. A second
column adds reading every record once (``list(sim.trace)``), what a user who walks the
trace in Python pays. Ratios are traced / plain: median and min-max over the repeats.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import birsim  # noqa: E402
from _common import paired  # noqa: E402
from bench_control_flow import loop_alu_program  # noqa: E402
from bench_timing import _pipeline  # noqa: E402

GOAL = 1.5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--trips", type=int, default=1_000_000)
    args = ap.parse_args()
    cases = [("register loop, %d trips" % args.trips, loop_alu_program(args.trips), {}),
             ("sync pipeline, 16384 trips", *_pipeline(16384))]
    print("program                        plain      traced     ratio  spread     "
          "+records read")
    for name, mod, x in cases:
        m = birsim.load(mod) if isinstance(mod, dict) else mod
        plain = birsim.Simulator(m)
        traced = birsim.Simulator(m, trace=True)

        def go(sim, walk=False):
            def f():
                t0 = time.perf_counter()
                sim.run(x)
                if walk:
                    for _ in sim.trace:
                        pass
                return time.perf_counter() - t0
            return f
        p = paired(go(traced), go(plain), args.repeat)
        w = paired(go(traced, True), go(plain), max(3, args.repeat // 3))
        print("%-30s %8.1f ms %8.1f ms  %5.2f  %s  %6.1fx (%s)   %s" % (
            name, p.t_ref * 1e3, p.t_sim * 1e3, p.ratio, p.spread(), w.ratio, w.spread(),
            "PASS" if p.ratio <= GOAL else "FAIL"))


if __name__ == "__main__":
    main()
