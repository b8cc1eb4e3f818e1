"""Mutation score of birsim's race checker, and the cost of birsim.audit and
birsim.synchronize (issue 22, "Measured").

    python bench/bench_sync_audit.py [--seeds 20] [--repeat 5]

Programs: every shipped example (examples/*.json, the two work directories) and builder
kernels (flash attention, tiled matmul, layernorm, softmax, a K-loop matmul, MoE on two
cores with its all-reduce, two DMA-queue pipelines (one in a Loop, one on two cores), the
credit pipeline of bench_sync, dynamic_add, rmsnorm, an MX matmul, an exchange and a Loop
on each of two cores, an unrolled DMA pipeline with overlapped triggers). The kernels
written here are ordered by birsim.synchronize; the others by hand. ``--xcore`` runs
only the last three and the costs below that concern them.

Mutants: each wait deleted, and each update weakened (an add of v > 1 adds v - 1; any
other update is deleted), one at a time. A mutant is *observable* when its outputs
differ from the program's (or it deadlocks or stops with an error) under some schedule:
in_order, round_robin, ``--seeds`` random seeds, and in_order with deferred DMAs. It is
*detected* when one run with ``checks=["races", "leftover_sync"]`` reports a finding, or
the run stops with a DeadlockError or another birsim error. The score is detected
observable mutants / observable mutants (goal 100 %); the unmutated programs must have
no finding.

Costs: birsim.audit time per kernel as a ratio to one plain run of it (median of
``--repeat`` plain runs; audit once), and birsim.synchronize time per 1000 instructions
on flash attention of growing size and on a two-core module list (the exchange), and
the modelled makespan (``timing="only"``) of the unrolled DMA pipeline with its triggers
drained / overlapped.
"""

import argparse
import copy
import json
import os
import statistics
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = os.path.join(ROOT, "examples")
sys.path[:0] = [EXAMPLES, HERE]

import birsim  # noqa: E402
from birsim import build as B  # noqa: E402
from birsim.audit import _random_inputs  # noqa: E402


# {=== Kernels written here (ordered by birsim.synchronize) ===}

def _sb(name, shape, kind="Internal"):
    return B.tensor(name, kind, "float32", list(shape), "SB")


def _dram(name, kind, shape):
    return B.tensor(name, kind, "float32", list(shape), "DRAM")


def layernorm(P=128, F=256, eps=1e-5):
    """y = (x - mean) * rsqrt(var + eps), over the free axis, on four engines."""
    x, y = _dram("x", "ExternalInput", (P, F)), _dram("y", "ExternalOutput", (P, F))
    xs, d, sq, ys = _sb("xs", (P, F)), _sb("d", (P, F)), _sb("sq", (P, F)), _sb("ys", (P, F))
    s, m, v, r = _sb("s", (P, 1)), _sb("m", (P, 1)), _sb("v", (P, 1)), _sb("r", (P, 1))
    col = lambda t: B.ap(t, [[1, P], [1, 1]])            # noqa: E731
    bc = lambda t: B.ap(t, [[1, P], [0, F]])             # noqa: E731
    code = [
        B.load_(B.whole(x), B.whole(xs), name="load"),
        B.tensor_reduce(B.whole(xs), col(s), "add", "X", name="sum"),
        B.tensor_scalar(col(s), col(m), "mult", 1.0 / F, engine="Pool", name="mean"),
        B.tensor_tensor(B.whole(xs), bc(m), B.whole(d), "subtract", name="center"),
        B.activation(B.whole(d), B.whole(sq), "Square", name="square"),
        B.tensor_reduce(B.whole(sq), col(v), "add", "X", name="sumsq"),
        B.tensor_scalar(col(v), col(v), "mult", 1.0 / F, "add", eps, engine="Pool",
                        name="var"),
        B.activation(col(v), col(r), "Rsqrt", name="rstd"),
        B.tensor_tensor(B.whole(d), bc(r), B.whole(ys), "mult", engine="Pool", name="scale"),
        B.save(B.whole(ys), B.whole(y), name="store"),
    ]
    prog = B.module([B.function("main", [x, y, xs, d, sq, ys, s, m, v, r], code)],
                    synchronize=True)

    def ref(inp):
        a = inp["x"].astype(np.float64)
        return {"y": (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + eps)}
    return prog, ref


def softmax(P=128, F=512):
    """y = exp(x - max) / sum(exp(x - max)) over the free axis."""
    x, y = _dram("x", "ExternalInput", (P, F)), _dram("y", "ExternalOutput", (P, F))
    xs, e, ys = _sb("xs", (P, F)), _sb("e", (P, F)), _sb("ys", (P, F))
    mx, nm, s, r = _sb("mx", (P, 1)), _sb("nm", (P, 1)), _sb("s", (P, 1)), _sb("r", (P, 1))
    col = lambda t: B.ap(t, [[1, P], [1, 1]])            # noqa: E731
    code = [
        B.load_(B.whole(x), B.whole(xs), name="load"),
        B.tensor_reduce(B.whole(xs), col(mx), "max", "X", name="max"),
        B.tensor_scalar(col(mx), col(nm), "mult", -1.0, engine="Pool", name="negmax"),
        B.activation(B.whole(xs), B.whole(e), "Exp", bias=col(nm), name="exp"),
        B.tensor_reduce(B.whole(e), col(s), "add", "X", name="sum"),
        B.reciprocal(col(s), col(r), name="recip"),
        B.tensor_tensor(B.whole(e), B.ap(r, [[1, P], [0, F]]), B.whole(ys), "mult",
                        engine="Pool", name="norm"),
        B.save(B.whole(ys), B.whole(y), name="store"),
    ]
    prog = B.module([B.function("main", [x, y, xs, e, ys, mx, nm, s, r], code)],
                    synchronize=True)

    def ref(inp):
        a = inp["x"].astype(np.float64)
        z = np.exp(a - a.max(1, keepdims=True))
        return {"y": z / z.sum(1, keepdims=True)}
    return prog, ref


def kloop_matmul(K=4, T=128, M=128, N=256):
    """out = relu(x.T @ w): K tiles of T rows loaded inside a Loop (the loads of trip
    k + 1 reuse the tiles of trip k), accumulated in PSUM, then an epilogue."""
    x, w = _dram("x", "ExternalInput", (K * T, M)), _dram("w", "ExternalInput", (K * T, N))
    out = _dram("out", "ExternalOutput", (M, N))
    xs, ws, ys = _sb("xs", (T, M)), _sb("ws", (T, N)), _sb("ys", (M, N))
    ps = B.tensor("ps", "Internal", "float32", [M, N], "PSUM")
    body = [
        B.load_(B.ap(x, [[M, T], [1, M]], offset=B.affine([(B.iv("k"), T * M)])),
                B.whole(xs), name="load_x"),
        B.load_(B.ap(w, [[N, T], [1, N]], offset=B.affine([(B.iv("k"), T * N)])),
                B.whole(ws), name="load_w"),
        B.matmult(B.whole(ws), B.whole(xs), B.whole(ps), accumulation_flag=1, name="mm"),
    ]
    code = [
        B.memset(B.whole(ps), 0, engine="DVE", name="zero"),
        B.loop("k", K, body, name="kloop"),
        B.activation(B.whole(ps), B.whole(ys), "Relu", name="relu"),
        B.save(B.whole(ys), B.whole(out), name="store"),
    ]
    prog = B.module([B.function("main", [x, w, out, xs, ws, ys, ps], code)],
                    synchronize=True)

    def ref(inp):
        return {"out": np.maximum(inp["x"].astype(np.float64).T @ inp["w"], 0)}
    return prog, ref


def queue_pipeline(T=4, P=16, F=32):
    """A software-DGE pipeline: inside a Loop, Pool fires the next block of a DMA queue
    (in_k: x tile k -> xs), DVE doubles xs into ys, Pool fires out_k (ys -> out tile k);
    the tiles are reused every trip."""
    x, out = _dram("x", "ExternalInput", (P, T * F)), _dram("out", "ExternalOutput", (P, T * F))
    xs, ys = _sb("xs", (P, F)), _sb("ys", (P, F))

    def tile(t, k):
        return B.ap(t, [[T * F, P], [1, F]], offset=k * F)
    q = B.dma_queue("q0", [B.dma_block("in%d" % k, B.dma_descriptor(tile(x, k), B.whole(xs)))
                           for k in range(T)]
                    + [B.dma_block("out%d" % k, B.dma_descriptor(B.whole(ys), tile(out, k)))
                       for k in range(T)])
    body = [B.dma_trigger("q0", ["in%d" % k for k in range(T)], engine="Pool", name="fire_in"),
            B.tensor_scalar(B.whole(xs), B.whole(ys), "mult", 2.0, name="dbl"),
            B.dma_trigger("q0", ["out%d" % k for k in range(T)], engine="Pool",
                          name="fire_out")]
    prog = B.module([B.function("main", [x, out, xs, ys], [B.loop("t", T, body, name="tiles")])],
                    dma_queues=[q], synchronize=True)

    def ref(inp):
        return {"out": inp["x"] * 2}
    return prog, ref


def exchange_two_cores(T=2, P=32, F=64):
    """A collective-like exchange on two cores, ordered by birsim.synchronize (one module
    per core): core k scales T tiles of its half of x by k + 2 and stores them to its half
    of the Shared buffer buf; then it loads the other half back and stores own - other to
    its half of out."""
    mods = []
    W = 2 * T * F
    for k in range(2):
        x, out = _dram("x", "ExternalInput", (P, W)), _dram("out", "ExternalOutput", (P, W))
        buf = B.tensor("buf", "Internal", "float32", [P, W], "DRAM", addr_space="Shared")
        code, sbs = [], []
        for t in range(T):
            a, b, d = _sb("a%d" % t, (P, F)), _sb("b%d" % t, (P, F)), _sb("d%d" % t, (P, F))
            sbs += [a, b, d]
            mine = (k * T + t) * F
            theirs = ((1 - k) * T + t) * F
            code += [
                B.load_(B.ap(x, [[W, P], [1, F]], offset=mine), B.whole(a), name="ld_x%d" % t),
                B.tensor_scalar(B.whole(a), B.whole(a), "mult", float(k + 2), name="scale%d" % t),
                B.save(B.whole(a), B.ap(buf, [[W, P], [1, F]], offset=mine), engine="SP",
                       name="st_mine%d" % t)]
            code += [
                B.load_(B.ap(buf, [[W, P], [1, F]], offset=theirs), B.whole(b),
                        name="ld_theirs%d" % t),
                B.tensor_tensor(B.whole(a), B.whole(b), B.whole(d), "subtract", name="diff%d" % t),
                B.save(B.whole(d), B.ap(out, [[W, P], [1, F]], offset=mine), name="st_out%d" % t)]
        mods.append(B.module([B.function("main", [x, out, buf] + sbs, code)]))
    mods = birsim.synchronize(mods)

    def ref(inp):
        x = inp["x"]
        h0, h1 = x[:, :T * F] * np.float32(2), x[:, T * F:] * np.float32(3)
        return {"out": np.concatenate([h0 - h1, h1 - h0], axis=1)}
    return mods, ref


def loops_two_cores(T=4, P=32, F=64):
    """A Loop on each core, ordered by birsim.synchronize: core 0 stores 2 x tile by tile
    to the Shared tensor mid, core 1 loads it tile by tile, adds 1 and stores out."""
    x, out = _dram("x", "ExternalInput", (P, T * F)), _dram("out", "ExternalOutput", (P, T * F))
    mid = B.tensor("mid", "Internal", "float32", [P, T * F], "DRAM", addr_space="Shared")
    col = B.affine([(B.iv("t"), F)])
    tile = lambda t: B.ap(t, [[T * F, P], [1, F]], offset=col)     # noqa: E731
    xs, ys, ms, rs = (_sb(n, (P, F)) for n in ("xs", "ys", "ms", "rs"))
    m0 = B.module([B.function("main", [x, mid, xs, ys], [B.block("entry", B.loop("t", T, [
        B.load_(tile(x), B.whole(xs), name="ld_x"),
        B.tensor_scalar(B.whole(xs), B.whole(ys), "mult", 2.0, name="double"),
        B.save(B.whole(ys), tile(mid), name="st_mid")], name="produce"))])])
    m1 = B.module([B.function("main", [mid, out, ms, rs], [B.block("entry", B.loop("t", T, [
        B.load_(tile(mid), B.whole(ms), name="ld_mid"),
        B.tensor_scalar(B.whole(ms), B.whole(rs), "add", 1.0, engine="Pool", name="inc"),
        B.save(B.whole(rs), tile(out), name="st_out")], name="consume"))])])

    def ref(inp):
        return {"out": inp["x"] * np.float32(2) + np.float32(1)}
    return birsim.synchronize([m0, m1]), ref


def dma_pipeline(T=4, P=16, F=64, overlap=True):
    """Load-compute-store over T unrolled tiles through two DMA queues (SP fires the
    loads, Activation the stores; DVE scales, Activation takes relu), each tile its own
    buffers, ordered by birsim.synchronize with DMA triggers overlapped (or drained)."""
    x, out = _dram("x", "ExternalInput", (P, T * F)), _dram("out", "ExternalOutput", (P, T * F))
    xs = [_sb("xs%d" % k, (P, F)) for k in range(T)]
    ys = [_sb("ys%d" % k, (P, F)) for k in range(T)]
    zs = [_sb("zs%d" % k, (P, F)) for k in range(T)]
    tile = lambda t, k: B.ap(t, [[T * F, P], [1, F]], offset=k * F)     # noqa: E731
    qin = B.dma_queue("qin", [B.dma_block("in%d" % k, B.dma_descriptor(
        tile(x, k), B.whole(xs[k]), name="d_in%d" % k)) for k in range(T)])
    qout = B.dma_queue("qout", [B.dma_block("out%d" % k, B.dma_descriptor(
        B.whole(zs[k]), tile(out, k), name="d_out%d" % k)) for k in range(T)])
    code = []
    for k in range(T):
        code += [B.dma_trigger("qin", ["in%d" % k], engine="SP", name="load%d" % k),
                 B.tensor_scalar(B.whole(xs[k]), B.whole(ys[k]), "mult", 2.0, name="scale%d" % k),
                 B.activation(B.whole(ys[k]), B.whole(zs[k]), "Relu", name="relu%d" % k),
                 B.dma_trigger("qout", ["out%d" % k], engine="Activation", name="store%d" % k)]
    prog = birsim.synchronize(B.module([B.function("main", [x, out] + xs + ys + zs, code)],
                                       dma_queues=[qin, qout]), overlap_dma=overlap)

    def ref(inp):
        return {"out": np.maximum(inp["x"] * np.float32(2), 0)}
    return prog, ref


# {=== The program list ===}

def programs():
    """(name, group, program (dict, list, path, or (dict, NumPy reference)), inputs or
    None, cores)."""
    import rmsnorm_kernel  # noqa: F401  (serves the custom op)
    import build_examples
    import flash_attention as fa
    import moe_dispatch
    import bench_sync
    import bench_mx
    out = []
    for n in sorted(os.listdir(EXAMPLES)):
        if n.endswith(".json"):
            cores = 2 if n == "moe_dispatch.json" else 1
            inp = moe_dispatch.make_inputs() if n == "moe_dispatch.json" else None
            out.append((n, "example", os.path.join(EXAMPLES, n), inp, cores))
    for n in ("compiler_workdir", "kv_cache_workdir"):
        out.append((n, "example", os.path.join(EXAMPLES, n), None, 2))
    q, k, v = fa.inputs(512, 64)
    out += [
        ("flash_attention(512, 64)", "kernel", fa.build(512, 64), fa.to_inputs(q, k, v), 1),
        ("tiled_matmul", "kernel", build_examples.tiled_matmul(), None, 1),
        ("layernorm", "kernel", layernorm(), None, 1),
        ("softmax", "kernel", softmax(), None, 1),
        ("kloop_matmul", "kernel", kloop_matmul(), None, 1),
        ("moe_dispatch (2 cores, all-reduce)", "kernel", moe_dispatch.build(),
         moe_dispatch.make_inputs(), 2),
        ("DMA-queue pipeline in a Loop (synchronize)", "kernel", queue_pipeline(), None, 1),
        ("DMA-queue pipeline (compiler_workdir, 2 cores)", "kernel",
         os.path.join(EXAMPLES, "compiler_workdir"), None, 2),
        ("credit pipeline (bench_sync)", "kernel", bench_sync.pipeline(8), None, 1),
        ("sync_pipeline", "kernel", build_examples.sync_pipeline(), None, 1),
        ("dynamic_add", "kernel", build_examples.dynamic_add(), None, 1),
        ("rmsnorm_customop", "kernel", build_examples.rmsnorm_customop(), None, 1),
        ("mx_matmult", "kernel", bench_mx.make("matmult", 2), None, 1),
    ] + xcore_programs()
    return out


def xcore_programs():
    """The kernels of cross-core edges and overlapped DMA triggers (synchronize)."""
    return [
        ("exchange on two cores (synchronize)", "kernel", exchange_two_cores(), None, 2),
        ("a Loop on each of two cores (synchronize)", "kernel", loops_two_cores(), None, 2),
        ("DMA pipeline, overlapped triggers (synchronize)", "kernel", dma_pipeline(), None, 1),
    ]


def _as_json(prog):
    if isinstance(prog, str) and os.path.isdir(prog):
        from birsim.workdir import find_dumps
        return [json.load(open(p)) for p in find_dumps(prog)]
    if isinstance(prog, str):
        with open(prog) as f:
            return json.load(f)
    return copy.deepcopy(prog)


# {=== Mutants ===}

def _sync_entries(progs):
    """(sync_info dict, key, index) for every wait and update, in a fixed order."""
    out = []

    def walk(v):
        if isinstance(v, dict):
            si = v.get("sync_info")
            if isinstance(si, dict):
                for key in ("on_wait", "on_update"):
                    for i, _ in enumerate(si.get(key) or []):
                        out.append((si, key, i))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(progs)
    return out


def mutants(progs):
    """(description, mutated copy) for each wait deleted and each update weakened (an
    add of v > 1 adds v - 1; any other update is deleted)."""
    for m in range(len(_sync_entries(progs))):
        mp = copy.deepcopy(progs)
        si, key, i = _sync_entries(mp)[m]
        entry = si[key][i]
        if key == "on_wait":
            del si[key][i]
            yield "delete wait %s" % json.dumps(entry), mp
            continue
        vk = "update_value" if "update_value" in entry else "value"
        adds = entry.get("mode") in ("sem-add-imm", "sem_add_imm", 1, "sem-inc") or \
            (entry.get("mode") is None and "update_value" in entry)
        if adds and isinstance(entry.get(vk), int) and 1 < entry[vk] < 2 ** 31:
            entry[vk] -= 1
            yield "weaken update %s" % json.dumps(entry), mp
        else:
            del si[key][i]
            yield "delete update %s" % json.dumps(entry), mp


def _restore_ok(progs, before):
    assert progs == before, "a mutant leaked into the program"


def _run(progs, inputs, cores, **kw):
    mod = birsim.load(progs if len(progs) > 1 else progs[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = birsim.Simulator(mod, cores=cores, **kw)
        return sim, sim.run(inputs)


def _same(a, b):
    return a.keys() == b.keys() and all(
        np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8)) for k in a)


def observable(progs, inputs, cores, ref, seeds):
    kws = [dict(schedule="in_order"), dict(schedule="round_robin"),
           dict(schedule="in_order", dma_mode="deferred")]
    kws += [dict(schedule="random", seed=s) for s in range(seeds)]
    for kw in kws:
        try:
            _, out = _run(progs, inputs, cores, **kw)
        except birsim.BirsimError:
            return True
        if not _same(out, ref):
            return True
    return False


def detected(progs, inputs, cores):
    try:
        sim, _ = _run(progs, inputs, cores, checks=["races", "leftover_sync"])
    except birsim.BirsimError:
        return True
    return bool(sim.findings)


def _timed(fn, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="random schedules per mutant")
    ap.add_argument("--repeat", type=int, default=5, help="plain runs timed per kernel")
    ap.add_argument("--xcore", action="store_true",
                    help="only the cross-core and overlapped-DMA kernels and their costs")
    args = ap.parse_args(argv)
    rows, total = [], {"mutants": 0, "observable": 0, "detected_obs": 0, "detected": 0}
    for name, group, prog, inputs, cores in (xcore_programs() if args.xcore else programs()):
        prog, numpy_ref = prog if isinstance(prog, tuple) else (prog, None)
        progs = _as_json(prog)
        progs = progs if isinstance(progs, list) else [progs]
        mods = birsim.load(progs if len(progs) > 1 else progs[0])
        mods = mods if isinstance(mods, list) else [mods]
        if inputs is None:
            inputs = _random_inputs(mods)
        sim, ref = _run(progs, inputs, cores, checks="all")
        clean = [f for f in sim.findings if f.kind in ("races", "leftover_sync")]
        if numpy_ref is not None:             # the kernels written here compute the right thing
            for k, want in numpy_ref(inputs).items():
                np.testing.assert_allclose(ref[k], want, rtol=1e-4, atol=1e-4, err_msg=name)
        before = copy.deepcopy(progs)
        n = obs = det_obs = det = 0
        for _desc, mp in mutants(progs):
            n += 1
            o = observable(mp, inputs, cores, ref, args.seeds)
            d = detected(mp, inputs, cores)
            obs += o
            det += d
            det_obs += o and d
        _restore_ok(progs, before)
        t_plain = _timed(lambda: _run(progs, inputs, cores), args.repeat)
        t0 = time.perf_counter()
        try:
            birsim.audit(progs if len(progs) > 1 else progs[0], inputs, cores=cores)
            t_audit = time.perf_counter() - t0
        except birsim.BirsimError as e:
            t_audit = float("nan")
            print("audit of %s failed: %s" % (name, e), file=sys.stderr)
        rows.append((name, group, len(clean), n, obs, det_obs, det, t_audit / t_plain))
        for k, v in (("mutants", n), ("observable", obs), ("detected_obs", det_obs),
                     ("detected", det)):
            total[k] += v
    print("birsim sync mutation bench: %d random seeds + in_order, round_robin, deferred DMAs"
          % args.seeds)
    print("%-48s %-8s %8s %8s %10s %17s %9s %12s" % (
        "program", "group", "findings", "mutants", "observable", "detected/observ.",
        "detected", "audit/run"))
    for name, group, clean, n, obs, det_obs, det, ratio in rows:
        print("%-48s %-8s %8d %8d %10d %11d (%3.0f%%) %9d %12.1f" % (
            name, group, clean, n, obs, det_obs, 100.0 * det_obs / obs if obs else 100.0,
            det, ratio))
    print("total: %d mutants, %d observable, %d of them detected (%.1f%%); %d detected in all"
          % (total["mutants"], total["observable"], total["detected_obs"],
             100.0 * total["detected_obs"] / max(1, total["observable"]), total["detected"]))
    ratios = [r[-1] for r in rows if r[-1] == r[-1]]
    print("audit time / one plain run: median %.1f, min %.1f, max %.1f over %d programs"
          % (statistics.median(ratios), min(ratios), max(ratios), len(ratios)))
    xcore_costs(args.repeat)
    if args.xcore:
        return 0
    import flash_attention as fa
    per = []
    for S in (512, 1024, 2048):
        prog = fa.build(S, 64, synchronize=False)
        st = {}
        t = _timed(lambda: birsim.synchronize(prog, stats=st), args.repeat)
        t_load = _timed(lambda: birsim.load(prog), args.repeat)
        per.append(t / st["instructions"] * 1000)
        print("synchronize: flash attention S=%d, %d instructions: %.3f s (%.3f s per 1000 "
              "instructions; %.1f x a birsim.load of it)" % (S, st["instructions"], t, per[-1],
                                                             t / t_load))
    return 0


def xcore_costs(repeat):
    """synchronize time per 1000 instructions on a module list (the two-core exchange,
    growing), and the modelled makespan (timing="only") of the DMA pipeline drained /
    overlapped."""
    for T in (8, 32, 128):
        mods = exchange_two_cores(T)[0]
        raw = [json.loads(json.dumps(m)) for m in mods]
        for m in raw:                        # back to the bare program
            m["functions"][0]["blocks"][0]["instructions"] = [
                dict((k, v) for k, v in i.items() if k != "sync_info")
                for i in m["functions"][0]["blocks"][0]["instructions"]
                if not i["name"].startswith("sync_")]
        st = {}
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            birsim.synchronize(raw, stats=st)
            ts.append(time.perf_counter() - t0)
        per = [t / st["instructions"] * 1000 for t in ts]
        print("synchronize: two-core exchange T=%d, %d instructions, %d cross-core waits: "
              "%.3f s per 1000 instructions (min %.3f, max %.3f)"
              % (T, st["instructions"], st["cross_core_waits"], statistics.median(per),
                 min(per), max(per)))
    for T, P, F in ((4, 16, 64), (8, 32, 1024), (16, 32, 1024)):
        x = np.random.default_rng(0).standard_normal((P, T * F)).astype(np.float32)
        ns = {}
        for overlap in (False, True):
            sim = birsim.Simulator(dma_pipeline(T, P, F, overlap)[0], timing="only")
            sim.run({"x": x})
            ns[overlap] = sim.profile.total_ns
        print("DMA pipeline T=%d tiles of %dx%d: modelled makespan drained %.0f ns, "
              "overlapped %.0f ns, drained/overlapped %.3f"
              % (T, P, F, ns[False], ns[True], ns[False] / ns[True]))


if __name__ == "__main__":
    sys.exit(main())
