"""The timing model (csrc/vm/timing.c, docs/timing.md): instruction costs from the documented
rates, DMA bandwidth and fixed costs, overlap, latency, schedule independence, the profile,
timing="only" and the ``birsim profile`` command. Reference figures are computed here from
the documented constants (docs/timing.md), never read back from the model."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import birsim
from birsim import build as B

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "examples")

# docs/timing.md: trn1 clocks (GHz), DMA engines per core, one engine's B/ns, fixed costs
TRN1 = {"PE": 2.8, "Activation": 1.4, "DVE": 1.12, "Pool": 1.4}
DMA_ENGINES, DMA_BPNS = 16, 17.0
DGE_NS, DMA_START_NS, DESC_NS, SEM_NS = 0.0, 1300.0, 64.0, 100.0   # trn1: no hardware DGE
MIN_II = 64


def _run(mod, inputs, **kw):
    kw.setdefault("arch", "trn1")
    sim = birsim.Simulator(mod, trace=True, timing=True, **kw)
    sim.run(inputs)
    return sim


def _matmul(dtype, nmov, nst=128):
    mv = B.tensor("mv", "ExternalInput", dtype, [128, nmov], "SB")
    st = B.tensor("st", "ExternalInput", dtype, [128, nst], "SB")
    ps = B.tensor("ps", "ExternalOutput", "float32", [nst, nmov], "PSUM")
    mod = B.module([B.function("main", [mv, st, ps], [
        B.matmult(B.whole(mv), B.whole(st), B.whole(ps), name="mm")])])
    rng = np.random.default_rng(0)
    np_dt = np.float32 if dtype == "float32" else birsim.dtypes.numpy_dtype(dtype)
    x = {"mv": rng.standard_normal((128, nmov)).astype(np_dt),
         "st": rng.standard_normal((128, nst)).astype(np_dt)}
    return mod, x


@pytest.mark.parametrize("dtype,nmov,nst,cycles", [
    ("bfloat16", 512, 128, 512),          # N_moving back to back
    ("bfloat16", 32, 128, 64),            # max(min(64, N_stationary), N_moving)
    ("bfloat16", 32, 16, 32),             # a narrow stationary loads faster
    ("float32", 512, 128, 4 * 512),       # fp32: four passes
])
def test_matmul_pe_time_from_the_documented_rate(dtype, nmov, nst, cycles):
    mod, x = _matmul(dtype, nmov, nst)
    sim = _run(mod, x)
    (mm,) = [r for r in sim.trace if r.instruction == "mm"]
    assert mm.engine == "PE" and mm.start == 0
    assert mm.duration == pytest.approx(max(cycles, MIN_II) / TRN1["PE"])
    # the profile counts its multiply-accumulates: HFU = 2 MACs / (peak bf16 x time)
    prof = sim.profile
    assert prof.macs == 128 * nst * nmov
    peak = 128 * 128 * 2 * TRN1["PE"] * 1e9
    assert prof.peak_tflops == pytest.approx(peak / 1e12)
    assert prof.hfu == pytest.approx(2 * prof.macs / (peak * prof.total_ns * 1e-9))


def _load(free, dtype="float32", parts=128):
    src = B.tensor("src", "ExternalInput", dtype, [parts, free], "DRAM")
    dst = B.tensor("dst", "ExternalOutput", dtype, [parts, free], "SB")
    mod = B.module([B.function("main", [src, dst], [
        B.load_(B.whole(src), B.whole(dst), name="ld")])])
    return mod, {"src": np.ones((parts, free), np.float32)}


def test_dma_bandwidth_of_a_large_transfer():
    mod, x = _load(4096)                          # 16 KiB per partition
    sim = _run(mod, x)
    (ld,) = sim.trace
    nbytes = 128 * 4096 * 4
    moving = ld.duration - DGE_NS - DMA_START_NS
    # 128 descriptors over 16 engines at 17 B/ns each, 64 ns per descriptor
    assert moving == pytest.approx(128 / DMA_ENGINES * (DESC_NS + 4096 * 4 / DMA_BPNS))
    assert nbytes / moving > 0.9 * DMA_ENGINES * DMA_BPNS       # near peak
    prof = sim.profile
    assert prof.dma_bytes == prof.hbm_bytes == nbytes
    assert prof.dma_histogram == {"<256B": 0, "<2KiB": 0, "<4KiB": 0, ">=4KiB": 1}
    assert prof.mbu == pytest.approx(nbytes / (prof.peak_hbm_gbps * prof.total_ns))


def test_small_transfers_are_fixed_cost_bound():
    mod, x = _load(16)                            # 64 B per partition
    sim = _run(mod, x)
    (ld,) = sim.trace
    fixed = DGE_NS + DMA_START_NS
    assert ld.duration == pytest.approx(fixed + 128 / DMA_ENGINES * (DESC_NS + 64 / DMA_BPNS))
    # a few percent of the engines' peak, and mostly per-descriptor cost on the engines
    assert 128 * 64 / ld.duration < 0.05 * DMA_ENGINES * DMA_BPNS
    assert sim.profile.dma_histogram["<256B"] == 1
    # a transfer costs at least the fixed part whatever its size
    mod2, x2 = _load(1, parts=1)
    sim2 = _run(mod2, x2)
    assert sim2.trace[0].duration == pytest.approx(fixed + DESC_NS + 4 / DMA_BPNS)


def test_transfers_in_flight_together_share_the_dma_engines():
    src = B.tensor("src", "ExternalInput", "float32", [128, 1024], "DRAM")
    d1 = B.tensor("d1", "ExternalOutput", "float32", [128, 1024], "SB")
    d2 = B.tensor("d2", "ExternalOutput", "float32", [128, 1024], "SB")
    mod = B.module([B.function("main", [src, d1, d2], [
        B.load_(B.whole(src), B.whole(d1), name="a"),
        B.load_(B.whole(src), B.whole(d2), name="b")])])
    sim = _run(mod, {"src": np.ones((128, 1024), np.float32)})
    a, b = sim.trace
    assert b.start == pytest.approx(a.start + DGE_NS)     # the queue issues one after another
    assert b.start < a.end                                # both in flight
    if DGE_NS == 0:
        assert sim.profile.engines["DMA"]["utilization"] > 0.3
    per = 128 / DMA_ENGINES * (DESC_NS + 4096 / DMA_BPNS)
    assert a.end == pytest.approx(DGE_NS + DMA_START_NS + per)
    assert b.end == pytest.approx(a.end + per)            # b's bytes wait for the engines


def _two(sync, engines=("DVE", "Activation")):
    a = B.tensor("a", "ExternalInput", "float32", [128, 256], "SB")
    o1 = B.tensor("o1", "ExternalOutput", "float32", [128, 256], "SB")
    o2 = B.tensor("o2", "ExternalOutput", "float32", [128, 256], "SB")
    s1 = B.sync_info([], [B.sem_inc(3)]) if sync else None
    s2 = B.sync_info([B.sem_wait(3)], [B.sem_dec(3)]) if sync else None
    return B.module([B.function("main", [a, o1, o2], [
        B.tensor_copy(B.whole(a), B.whole(o1), engine=engines[0], sync=s1, name="c1"),
        B.tensor_copy(B.whole(a), B.whole(o2), engine=engines[1], sync=s2, name="c2")])])


def test_independent_engines_overlap():
    x = {"a": np.ones((128, 256), np.float32)}
    sim = _run(_two(False), x)
    c1, c2 = sim.trace
    assert c1.start == c2.start == 0
    assert c1.duration == pytest.approx(256 / TRN1["DVE"])            # max(MIN_II, N)
    assert c2.duration == pytest.approx(256 / TRN1["Activation"])
    assert sim.profile.total_ns == pytest.approx(max(c1.end, c2.end))
    eng = sim.profile.engines
    assert eng["DVE"]["active_ns"] == pytest.approx(c1.duration)
    assert eng["DVE"]["utilization"] == pytest.approx(c1.duration / sim.profile.total_ns)


def test_latency_of_a_cross_engine_chain():
    a = B.tensor("a", "ExternalInput", "float32", [128, 64], "SB")
    outs = [B.tensor(f"o{k}", "ExternalOutput", "float32", [128, 64], "SB") for k in range(3)]
    chain = []
    for k, eng in enumerate(("DVE", "Activation", "Pool")):
        waits = [B.sem_wait(k)] if k else []
        chain.append(B.tensor_copy(B.whole(a if k == 0 else outs[k - 1]), B.whole(outs[k]),
                                   engine=eng, name=f"s{k}",
                                   sync=B.sync_info(waits, [B.sem_inc(k + 1)])))
    sim = _run(B.module([B.function("main", [a] + outs, chain)]), {"a": np.ones((128, 64), np.float32)})
    recs = list(sim.trace)
    durs = [MIN_II / TRN1[e] for e in ("DVE", "Activation", "Pool")]
    for k, r in enumerate(recs):
        assert r.duration == pytest.approx(durs[k])
        if k:
            assert r.waits_on == (k - 1,)
            assert r.start == pytest.approx(recs[k - 1].end + SEM_NS)
    assert sim.profile.total_ns == pytest.approx(sum(durs) + 2 * SEM_NS)
    assert sim.profile.critical_path == [0, 1, 2]


def _two_producers():
    """A loop of 4 trips: DVE and Pool each write a tile and add 1 to semaphore 5;
    Activation waits for 2, combines the tiles into trip i's slice of the output and
    frees the tiles for the next trip (semaphores 6 and 7, primed before the loop)."""
    a = B.tensor("a", "ExternalInput", "float32", [128, 512], "SB")
    o1 = B.tensor("o1", "Internal", "float32", [128, 512], "SB")
    o2 = B.tensor("o2", "Internal", "float32", [128, 512], "SB")
    o3 = B.tensor("o3", "ExternalOutput", "float32", [128, 4 * 512], "SB")
    sem = dict(type="semaphore")
    body = [
        B.tensor_copy(B.whole(a), B.whole(o1), engine="DVE", name="p1",
                      sync=B.sync_info([B.sem_wait(6)], [B.sem_dec(6), B.sem_inc(5)])),
        B.tensor_scalar(B.whole(a), B.whole(o2), "mult", 2.0, engine="Pool", name="p2",
                        sync=B.sync_info([B.sem_wait(7)], [B.sem_dec(7), B.sem_inc(5)])),
        B.tensor_tensor(B.whole(o1), B.whole(o2),
                        B.ap(o3, [[4 * 512, 128], [1, 512]],
                             offset=B.affine([(B.iv("i"), 512)])),
                        "add", engine="Activation", name="c",
                        sync=B.sync_info([B.sem_wait(5, 2)],
                                         [B.update(5, "sem-sub-imm", 2, **sem),
                                          B.sem_inc(6), B.sem_inc(7)])),
    ]
    prime = B.insn("NoOp", "Activation", name="prime",
                   sync=B.sync_info([], [B.sem_inc(6), B.sem_inc(7)]))
    drain = B.insn("NoOp", "Activation", name="drain",
                   sync=B.sync_info([B.sem_wait(6), B.sem_wait(7)], [B.sem_dec(6), B.sem_dec(7)]))
    return B.module([B.function("main", [a, o1, o2, o3],
                                [prime, B.loop("i", 4, body), drain])])


def _counted():
    """DVE writes two tiles, adding 1 to semaphore 8 after each; Activation reads the first
    once the count is 1 and the second once it is 2. in_order runs both DVE copies before
    the first wait; round_robin runs that wait after the first copy alone."""
    a = B.tensor("a", "ExternalInput", "float32", [128, 2048], "SB")
    t1 = B.tensor("t1", "Internal", "float32", [128, 2048], "SB")
    t2 = B.tensor("t2", "Internal", "float32", [128, 64], "SB")
    o1 = B.tensor("o1", "ExternalOutput", "float32", [128, 2048], "SB")
    o2 = B.tensor("o2", "ExternalOutput", "float32", [128, 64], "SB")
    sem = dict(type="semaphore")
    return B.module([B.function("main", [a, t1, t2, o1, o2], [
        B.tensor_copy(B.whole(a), B.whole(t1), engine="DVE", name="w1",
                      sync=B.sync_info([], [B.sem_inc(8)])),
        B.tensor_copy(B.whole(a, [128, 64]), B.whole(t2), engine="DVE", name="w2",
                      sync=B.sync_info([], [B.sem_inc(8)])),
        B.tensor_copy(B.whole(t1), B.whole(o1), engine="Activation", name="r1",
                      sync=B.sync_info([B.sem_wait(8, 1)], [])),
        B.tensor_copy(B.whole(t2), B.whole(o2), engine="Activation", name="r2",
                      sync=B.sync_info([B.sem_wait(8, 2)],
                                       [B.update(8, "sem-sub-imm", 2, **sem)]))])])


@pytest.mark.parametrize("prog", ["pipeline", "producers", "counted"])
def test_times_do_not_depend_on_the_schedule(prog):
    if prog == "counted":
        mod = _counted()
        x = {"a": np.ones((128, 2048), np.float32)}
    elif prog == "pipeline":
        mod = os.path.join(EXAMPLES, "sync_pipeline.json")
        x = {"x": np.ones((96, 8), np.float32), "w": np.ones((16, 4), np.float32)}
    else:
        mod = _two_producers()
        x = {"a": np.ones((128, 512), np.float32)}
    runs = [("in_order", 0), ("round_robin", 0)] + [("random", s) for s in range(5)]
    seen = []
    for schedule, seed in runs:
        sim = birsim.Simulator(mod, trace=True, timing=True, schedule=schedule, seed=seed,
                               checks="all")
        sim.run(x)
        assert sim.findings == []                              # race-free
        times = sorted((r.core, r.instruction, r.start, r.duration) for r in sim.trace)
        seen.append((times, sim.profile.total_ns))
    assert all(s == seen[0] for s in seen[1:])
    if prog == "counted":      # r1 starts when w1's update lands, not w2's
        recs = {r.instruction: r for r in _run(mod, x).trace}
        assert recs["r1"].start == pytest.approx(recs["w1"].end + SEM_NS)
        assert recs["r2"].start == pytest.approx(max(recs["r1"].end, recs["w2"].end + SEM_NS))
    if prog == "producers":    # the consumer waits for the later of its two producers
        tr = birsim.Simulator(mod, trace=True, timing=True)
        tr.run(x)
        recs = list(tr.trace)
        for k, r in enumerate(recs):
            if r.instruction == "c":
                p1, p2 = (next(q for q in reversed(recs[:k]) if q.instruction == n)
                          for n in ("p1", "p2"))
                assert r.start >= max(p1.end, p2.end) + SEM_NS


def test_profile_fields_json_and_html(tmp_path):
    mod, x = _matmul("bfloat16", 512)
    sim = _run(mod, x)
    prof = sim.profile
    assert isinstance(prof, birsim.Profile)
    assert prof.opcode_counts == {"Matmult": 1}
    assert set(prof.bounds) == {"memory_bound_ns", "compute_bound_ns"}
    flops = 2 * 128 * 128 * 512
    assert prof.bounds["compute_bound_ns"] == pytest.approx(
        flops / (128 * 128 * 2 * TRN1["PE"]))
    assert prof.total_ns >= prof.bounds["compute_bound_ns"]
    prof.to_json(tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["total_ns"] == pytest.approx(prof.total_ns) and doc["arch"] == "trn1"
    assert doc["engines"]["PE"]["utilization"] == pytest.approx(1.0)
    html = prof._repr_html_()
    assert "PE" in html and "HFU" in html
    # off by default
    plain = birsim.Simulator(mod)
    plain.run(x)
    assert plain.profile is None and plain.timing == "off"
    with pytest.raises(ValueError, match="timing must be"):
        birsim.Simulator(mod, timing="fast")


def test_timing_only_gives_the_same_times_without_arithmetic():
    for mod, x in (_two_producers(), {"a": np.ones((128, 512), np.float32)}), \
            (os.path.join(EXAMPLES, "sync_pipeline.json"),
             {"x": np.ones((96, 8), np.float32), "w": np.ones((16, 4), np.float32)}):
        full = birsim.Simulator(mod, trace=True, timing=True)
        out = full.run(x)
        assert out
        only = birsim.Simulator(mod, trace=True, timing="only")
        assert only.run(x) == {}                       # nothing computed
        assert [(r.instruction, r.start, r.duration) for r in only.trace] == \
            [(r.instruction, r.start, r.duration) for r in full.trace]
        assert only.profile.total_ns == full.profile.total_ns


def test_timing_only_runs_in_full_when_memory_steers():
    """A TensorLoad moves memory into a register: timing="only" computes everything."""
    t = B.tensor("t", "ExternalInput", "int32", [1, 1], "SB")
    o = B.tensor("o", "ExternalOutput", "float32", [4, 8], "SB")
    a = B.tensor("a", "ExternalInput", "float32", [4, 8], "SB")
    mod = B.module([B.function("main", [t, o, a, B.register("r", "int32")], [
        B.tensor_load(B.whole(t), B.reg("r")),
        B.tensor_copy(B.whole(a), B.whole(o))])])
    x = {"t": np.array([[3]], np.int32), "a": np.arange(32, dtype=np.float32).reshape(4, 8)}
    sim = birsim.Simulator(mod, timing="only")
    out = sim.run(x)
    assert sim.profile.total_ns > 0 and out == {}


def test_cli_profile(tmp_path):
    mod, _ = _matmul("bfloat16", 512)
    prog = tmp_path / "mm.json"
    B.to_json(mod, prog)
    out = tmp_path / "prof.json"
    r = subprocess.run([sys.executable, "-m", "birsim", "profile", str(prog), "--arch", "trn1",
                        "--json", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "HFU" in r.stdout and "PE" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["total_ns"] == pytest.approx(512 / TRN1["PE"])
    r = subprocess.run([sys.executable, "-m", "birsim", "profile", str(tmp_path / "nope.json")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "birsim:" in r.stderr


def test_matmul_ladder_stages_are_synchronised_and_right():
    """The four NKI tutorial stages (examples/nki_matmul_ladder.py) at a small shape: race-free
    under every check, the product NumPy computes, and the same times with timing="only"."""
    import ml_dtypes
    sys.path.insert(0, EXAMPLES)
    try:
        from nki_matmul_ladder import stage
    finally:
        sys.path.remove(EXAMPLES)
    M, N, K = 256, 1024, 256
    rng = np.random.default_rng(1)
    lhsT = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    totals = []
    for k in (1, 2, 3, 4):
        mod = stage(k, M, N, K, blocks=(2, 2, 2))
        sim = birsim.Simulator(mod, timing=True, checks="all")
        out = sim.run({"lhsT": lhsT, "rhs": rhs})["result"].astype(np.float64)
        assert sim.findings == []
        # bf16 output of an fp32 accumulation: within bf16's rounding of the exact product
        np.testing.assert_allclose(out, ref, rtol=2 ** -7, atol=2 ** -7 * np.abs(ref).max())
        only = birsim.Simulator(mod, timing="only")
        only.run({"lhsT": lhsT, "rhs": rhs})
        assert only.profile.total_ns == sim.profile.total_ns
        assert sim.profile.macs == M * N * K
        totals.append(sim.profile.total_ns)
    assert totals[3] < totals[0]
