"""Benchmark: what schedule exploration costs. A script, not a test:

    python bench/bench_explore.py [--repeat N] [--runs R]

For each program, alternately in the same process, ``repeat`` rounds:

- one plain run (a Simulator made once, ``in_order``, no recording): the reference;
- one recorded run (``record=True``): the recording schedule's own run loop and log;
- one replay of that recording (``schedule=sim.recorded``);
- ``birsim.explore(program, inputs, runs=R, strategy="all")``: R + 1 runs, each with a new
  Simulator (what a user calls).

Reports median times, the median of the per-round ratios to the plain run and their
spread (min..max), and explore's ratio per run (ratio / (R + 1)). Programs: the semaphore
pipeline of bench_sync.py (4 engines, 1x1 tiles: scheduling dominates),
examples/sync_pipeline.json and examples/tiled_matmul.json.
"""

import argparse
import os
import sys
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


import birsim  # noqa: E402
from _common import EXAMPLES, Pair, inputs_for, once  # noqa: E402
from bench_sync import pipeline  # noqa: E402



def measure(module, inputs, repeat, runs):
    plain = birsim.Simulator(module, progress=False, print=False)
    rec = birsim.Simulator(module, progress=False, print=False, record=True)
    rec.run(inputs)
    rep = birsim.Simulator(module, progress=False, print=False, schedule=rec.recorded)
    rep.run(inputs)
    # each single-run figure is the mean of `inner` back-to-back runs (>= ~20 ms)
    inner = max(1, int(0.02 / max(once(lambda: plain.run(inputs)), 1e-6)))

    def runs_of(sim):
        return once(lambda: [sim.run(inputs) for _ in range(inner)]) / inner
    t_plain, t_rec, t_rep, t_exp = [], [], [], []
    res = None
    for _ in range(repeat):
        t_plain.append(runs_of(plain))
        t_rec.append(runs_of(rec))
        t_rep.append(runs_of(rep))

        def go():
            nonlocal res
            res = birsim.explore(module, inputs, runs=runs, strategy="all")
        t_exp.append(once(go))
    return (Pair(t_rec, t_plain), Pair(t_rep, t_plain), Pair(t_exp, t_plain),
            len(rec.recorded), res)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--trips", type=int, default=2000)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", birsim.BirsimWarning)
    rows = []
    sp = birsim.load(pipeline(args.trips))
    rows.append((f"sync pipeline ({args.trips} trips)", sp))
    for name in ("sync_pipeline.json", "tiled_matmul.json"):
        m = birsim.load(os.path.join(EXAMPLES, name))
        rows.append((f"examples/{name}", m))
    print(f"ratios to one plain in_order run (median, min-max over {args.repeat} rounds); "
          f"explore: {args.runs} runs + the in_order one")
    print(f"{'program':34s} {'plain':>10s} {'record':>16s} {'replay':>16s} "
          f"{'explore':>20s} {'per run':>8s} {'decisions':>9s} outcomes")
    for name, mod in rows:
        rec, rep, exp, ndec, res = measure(mod, inputs_for(mod), args.repeat, args.runs)
        print(f"{name:34s} {rec.t_ref * 1e3:8.2f}ms "
              f"{rec.ratio:6.2f} ({rec.spread():>9s}) {rep.ratio:6.2f} ({rep.spread():>9s}) "
              f"{exp.ratio:8.1f} ({min(exp.ratios):.1f}-{max(exp.ratios):.1f}) "
              f"{exp.ratio / (args.runs + 1):8.2f} {ndec:9d} {len(res.outcomes)}")


if __name__ == "__main__":
    sys.exit(main())
