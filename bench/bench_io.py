"""Benchmark: the cost of inputs and outputs per run against a memcpy of the same bytes.

    python bench/bench_io.py [--repeat R] [--cols 2048,16384,65536]

Rows, for a [128, F] fp32 tensor in DRAM, timed on copying Simulators (``zero_copy=False``:
the default reads inputs in place and hands outputs over, docs/python-api.md):

  write   ``sim.run({"x": x})`` of a program whose only tensor is the ExternalInput x
          and which has no instructions: the reset (shadow clears) and the input write,
          minus the same run with a [128, 1] x (the run's fixed cost)
                                                       vs  one ``np.copyto`` of x's bytes
  read    ``sim.read("y", out=dst)`` into a preallocated array, after a run
                                                       vs  one ``np.copyto`` into one
  read new ``sim.read("y")``, a new array              vs  ``x.copy()`` (both pay for the
          new array's pages: on this machine that alone swings 2x from call to call)
  run     a program copying x to the ExternalOutput y with one DMACopy: write, DMA,
          read-out                                     vs  three ``np.copyto`` (no target)
  run zc  the same run by a default (zero-copy) Simulator: the DMA into an output buffer
          handed over (the last run's, given back)     vs  ``x.copy()`` (no target)

Each round times birsim and NumPy back to back; the table gives medians over R rounds
and the min..max of the per-round ratios (target, issue 13: <= 2x a memcpy).
"""

import argparse
import sys

import numpy as np

import birsim
from _common import fmt_time, once, paired, program, table, tensor, whole

TARGET = 2.0


def write_program(F):
    return program([tensor("x", "ExternalInput", (128, F), mem="DRAM")], [])


def io_program(F):
    S = (128, F)
    tens = [tensor("x", "ExternalInput", S, mem="DRAM"), tensor("y", "ExternalOutput", S,
                                                               mem="DRAM")]
    insns = [{"name": "cp", "opcode": "DMACopy", "engine": "DMA", "ins": [whole("x", S)],
              "outs": [whole("y", S)]}]
    return program(tens, insns)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--cols", default="2048,16384,65536")
    args = ap.parse_args(argv)
    rows, ok = [], True
    for F in (int(c) for c in args.cols.split(",")):
        x = np.random.default_rng(0).standard_normal((128, F), dtype=np.float32)
        sim = birsim.Simulator(io_program(F), zero_copy=False)
        zsim = birsim.Simulator(io_program(F))
        assert np.array_equal(sim.run({"x": x})["y"], x)
        assert np.array_equal(zsim.run({"x": x})["y"], x)
        dst = np.empty_like(x)
        mb = x.nbytes / 2**20

        wsim = birsim.Simulator(write_program(F), zero_copy=False)
        tiny, x1 = birsim.Simulator(write_program(1), zero_copy=False), x[:, :1].copy()
        wr = paired(lambda: once(lambda: wsim.run({"x": x})) - once(lambda: tiny.run({"x": x1})),
                    lambda: once(lambda: np.copyto(dst, x)), args.repeat)
        rd = paired(lambda: once(lambda: sim.read("y", out=dst)),
                    lambda: once(lambda: np.copyto(dst, x)), args.repeat)
        rn = paired(lambda: once(lambda: sim.read("y")), lambda: once(lambda: x.copy()),
                    args.repeat)
        # a run moves x three times: input write, the DMA, output read-out
        run = paired(lambda: once(lambda: sim.run({"x": x})),
                     lambda: once(lambda: [np.copyto(dst, x) for _ in range(3)]), args.repeat)
        # warm-up runs first: the first ones allocate the buffers later runs reuse
        zrun = paired(lambda: once(lambda: zsim.run({"x": x})), lambda: once(lambda: x.copy()),
                      args.repeat, warm=4)
        for name, p, target in (("write (a run with one input)", wr, TARGET),
                                ("read (sim.read into out=)", rd, TARGET),
                                ("read (sim.read, a new array)", rn, TARGET),
                                ("run: write + DMA + read", run, None),
                                ("run, zero-copy: DMA into a new array", zrun, None)):
            good = target is None or p.ratio <= target
            ok &= good
            rows.append(["%s %.0f MB" % (name, mb), fmt_time(p.t_sim), fmt_time(p.t_ref),
                         "%.2fx" % p.ratio, p.spread(),
                         "" if target is None else "ok" if good else "MISSED"])
    print("median of %d rounds; peer: np.copyto of the same bytes (3 copies for a run); "
          "target ratio <= %.1f" % (args.repeat, TARGET))
    table(["I/O", "birsim", "numpy", "ratio", "spread", ""], rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
