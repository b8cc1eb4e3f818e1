"""The timing model checked against published timings, and its cost (issue 23). A script,
not a test:

    python bench/bench_timing.py [--repeat N] [--quick]

1. The four stages of the NKI matrix-multiplication tutorial (examples/nki_matmul_ladder.py),
   [4096, 8192] @ [8192, 8192] bf16 on trn1, run with ``timing="only"``: birsim's modelled
   time and HFU beside the published figures, and modelled / published. Goals: the stages
   ranked in the published order, median |modelled - published| / published <= 25 %.
2. The timing model's cost on top of a functional run: the same program run plain and with
   ``timing=True`` alternately (bench/_common.paired), on an instruction-bound program
   (a 16,384-trip loop of a small DVE/Activation/Pool pipeline) and on stage 4 at
   [512, 1024] @ [1024, 1024]; ratio timed / plain, median and min-max. Goal <= 1.20.
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import numpy as np  # noqa: E402
import ml_dtypes  # noqa: E402

import birsim  # noqa: E402
from birsim import build as B  # noqa: E402
from _common import paired  # noqa: E402
from nki_matmul_ladder import NAMES, PUBLISHED, stage  # noqa: E402


def ladder(M=4096, N=8192, K=8192):
    lhsT = np.zeros((K, M), ml_dtypes.bfloat16)
    rhs = np.zeros((K, N), ml_dtypes.bfloat16)
    rows, errs, model = [], [], []
    print("stage              modelled ms  published ms  ratio   HFU model  HFU published"
          "  run (s)")
    for k in (1, 2, 3, 4):
        mod = birsim.build.load(stage(k, M, N, K))
        sim = birsim.Simulator(mod, timing="only")
        t0 = time.perf_counter()
        sim.run({"lhsT": lhsT, "rhs": rhs})
        wall = time.perf_counter() - t0
        p = sim.profile
        ms, (pub_ms, pub_hfu) = p.total_ns / 1e6, PUBLISHED[k]
        errs.append(abs(ms - pub_ms) / pub_ms)
        model.append(ms)
        print("%d %-16s %11.2f  %12.2f  %5.2f   %8.2f%%  %12.2f%%  %7.2f" % (
            k, NAMES[k], ms, pub_ms, ms / pub_ms, 100 * p.hfu, pub_hfu, wall))
        rows.append((k, ms, pub_ms, p))
    ranked = model == sorted(model, reverse=True)
    med = statistics.median(errs)
    print("ranked in the published order: %s; median |error| %.1f%% (goal <= 25%%): %s" % (
        ranked, 100 * med, "PASS" if ranked and med <= 0.25 else "FAIL"))
    for k, ms, pub, p in rows:
        busy = ", ".join("%s %.0f%%" % (e, 100 * v["utilization"])
                         for e, v in sorted(p.engines.items(), key=lambda kv: -kv[1]["utilization"]))
        print("  stage %d engines: %s" % (k, busy))


def _pipeline(trips=4096):
    a = B.tensor("a", "ExternalInput", "float32", [128, 8], "SB")
    t = B.tensor("t", "Internal", "float32", [128, 8], "SB")
    o = B.tensor("o", "ExternalOutput", "float32", [128, 8], "SB")
    body = [
        B.tensor_copy(B.whole(a), B.whole(t), engine="DVE",
                      sync=B.sync_info([B.sem_wait(2)], [B.sem_dec(2), B.sem_inc(1)])),
        B.activation(B.whole(t), B.whole(o), "Relu",
                     sync=B.sync_info([B.sem_wait(1)], [B.sem_dec(1), B.sem_inc(2)])),
    ]
    prime = B.insn("NoOp", "Activation", sync=B.sync_info([], [B.sem_inc(2)]))
    done = B.insn("NoOp", "Activation", sync=B.sync_info([B.sem_wait(2)], [B.sem_dec(2)]))
    return (B.module([B.function("main", [a, t, o], [prime, B.loop("i", trips, body), done])]),
            {"a": np.ones((128, 8), np.float32)})


def cost(repeat):
    l4 = np.random.default_rng(0).standard_normal((1024, 512)).astype(ml_dtypes.bfloat16)
    r4 = np.random.default_rng(1).standard_normal((1024, 1024)).astype(ml_dtypes.bfloat16)
    cases = [("instruction-bound pipeline", *_pipeline(16384)),
             ("stage 4 [512,1024]@[1024,1024]", stage(4, 512, 1024, 1024, blocks=(4, 2, 8)),
              {"lhsT": l4, "rhs": r4})]
    print("\ncost of the timing model (same run plain and with timing=True, alternately)")
    print("program                          plain       timed       ratio  spread")
    for name, mod, x in cases:
        m = birsim.build.load(mod)
        plain = birsim.Simulator(m)
        timed = birsim.Simulator(m, timing=True)

        def go(sim):
            def f():
                t0 = time.perf_counter()
                sim.run(x)
                return time.perf_counter() - t0
            return f
        p = paired(go(timed), go(plain), repeat)
        print("%-32s %8.2f ms  %8.2f ms  %5.2f  %s" % (name, p.t_ref * 1e3, p.t_sim * 1e3,
                                                     p.ratio, p.spread()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="skip the full-size ladder")
    args = ap.parse_args()
    if not args.quick:
        ladder()
    cost(args.repeat)


if __name__ == "__main__":
    main()
