"""timing="compiler" (docs/timing.md): an instruction's ``predicted_latency_ns`` (the
compiler's emit_predicted_latency) is its engine time; instructions without it keep birsim's
cost; other timing modes keep birsim's cost for every instruction. The key is read by both
load paths (csrc/py/fastload.c and birsim/_load/insns.py) and bad values are ProgramErrors
naming their JSON path."""

import numpy as np
import pytest

import birsim
from birsim import build as B
from birsim.errors import ProgramError

from test_load_fastload import Counter, outcome, same

TRN1_DVE_GHZ, MIN_II = 1.12, 64           # docs/timing.md: trn1 VectorE clock, MIN_II
F = 512                                   # elements per partition


def _chain(latencies, engine="DVE"):
    """x -> t0 -> t1 -> ...: TensorTensor adds on one engine, each reading the last
    result (one queue: program order is the data order, no sync needed)."""
    x = B.tensor("x", "ExternalInput", "float32", [128, F], "SB")
    y = B.tensor("y", "ExternalOutput", "float32", [128, F], "SB")
    t = B.tensor("t", "Internal", "float32", [128, F], "SB")
    insns, src = [], x
    for k, lat in enumerate(latencies):
        dst = y if k == len(latencies) - 1 else t
        extra = {} if lat is None else {"predicted_latency_ns": lat}
        insns.append(B.tensor_tensor(B.whole(src), B.whole(x), B.whole(dst), "add",
                                     engine=engine, name="i%d" % k, **extra))
        src = dst
    return B.module([B.function("main", [x, y, t], insns)], arch="trn1")


def _times(mod, timing):
    sim = birsim.Simulator(mod, trace=True, timing=timing)
    x = np.random.default_rng(0).standard_normal((128, F)).astype(np.float32)
    out = sim.run({"x": x})
    np.testing.assert_array_equal(out["y"], x * (len(sim.trace) + 1))
    return [(r.instruction, r.start, r.duration) for r in sim.trace], sim.profile


def _own_cost():
    # birsim's cost of a [128, 512] fp32 TensorTensor on SBUF: max(MIN_II, 2N) cycles
    return max(MIN_II, 2 * F) / TRN1_DVE_GHZ


def test_the_compiler_latencies_are_the_times_of_a_chain():
    lats = [250, 1000.5, 75, 4000]
    rows, prof = _times(_chain(lats), "compiler")
    assert [r[0] for r in rows] == ["i0", "i1", "i2", "i3"]
    assert [r[2] for r in rows] == pytest.approx(lats)
    assert [r[1] for r in rows] == pytest.approx(list(np.cumsum([0] + lats[:-1])))
    assert prof.total_ns == pytest.approx(sum(lats))
    assert prof.engines["DVE"]["active_ns"] == pytest.approx(sum(lats))


def test_instructions_without_the_key_keep_birsims_cost():
    lats = [300, None, 40, None]
    rows, prof = _times(_chain(lats), "compiler")
    want = [_own_cost() if lat is None else lat for lat in lats]
    assert [r[2] for r in rows] == pytest.approx(want)
    assert prof.total_ns == pytest.approx(sum(want))


def test_timing_on_uses_birsims_own_cost():
    rows, _ = _times(_chain([300, 40, 7]), True)
    assert [r[2] for r in rows] == pytest.approx([_own_cost()] * 3)
    plain, _ = _times(_chain([None] * 3), True)
    assert rows == plain


def test_timing_only_uses_birsims_own_cost():
    sim = birsim.Simulator(_chain([300, 40, 7]), timing="only")
    sim.run({"x": np.zeros((128, F), np.float32)})
    assert sim.profile.total_ns == pytest.approx(3 * _own_cost())


def test_a_dma_with_the_key_takes_that_time_and_keeps_its_bytes():
    src = B.tensor("src", "ExternalInput", "float32", [128, 1024], "DRAM")
    dst = B.tensor("dst", "ExternalOutput", "float32", [128, 1024], "SB")
    mod = B.module([B.function("main", [src, dst], [
        B.load_(B.whole(src), B.whole(dst), name="ld", predicted_latency_ns=2500)])],
        arch="trn1")
    x = np.arange(128 * 1024, dtype=np.float32).reshape(128, 1024)
    sim = birsim.Simulator(mod, trace=True, timing="compiler")
    np.testing.assert_array_equal(sim.run({"src": x})["dst"], x)
    (ld,) = sim.trace
    assert (ld.start, ld.duration) == (0, pytest.approx(2500))
    assert sim.profile.dma_bytes == x.nbytes
    on = birsim.Simulator(mod, trace=True, timing=True)
    on.run({"src": x})
    assert on.trace[0].duration != pytest.approx(2500)


def test_timing_compiler_is_a_named_mode():
    sim = birsim.Simulator(_chain([1]), timing="compiler")
    assert sim.timing == "compiler"
    with pytest.raises(ValueError, match="compiler"):
        birsim.Simulator(_chain([1]), timing="static")


# ---- loading: both paths, bad values ----------------------------------------------------

@pytest.mark.parametrize("value, ok", [
    (0, True), (12, True), (3.25, True), (None, True),
    (-1, False), (-0.5, False), ("12", False), (True, False), ([3], False),
    (float("nan"), False), (float("inf"), False),
])
def test_both_load_paths_read_the_key_alike(value, ok, monkeypatch):
    mod = _chain([5, 5, 5])
    mod["functions"][0]["blocks"][0]["instructions"][1]["predicted_latency_ns"] = value
    res = same(mod, monkeypatch)
    if ok:
        assert res[0][0] == "ok" and res[1] == []
        counter = Counter(monkeypatch)
        outcome(mod, True, monkeypatch)
        assert counter.taken == 3                 # the walker reads it itself
        lat = dict(res[0][1][0][0]["insns"])["lat"]
        want = -1.0 if value is None else float(value)
        assert np.frombuffer(lat, np.float64).tolist() == [5.0, want, 5.0]
    else:
        kind, msg, path = res[0]
        assert kind == "error"
        assert path == "functions[0].blocks[0].instructions[1].predicted_latency_ns"
        assert "'main'" in msg and "'i1'" in msg


def test_a_negative_latency_is_a_program_error_naming_its_path():
    mod = _chain([5, -3])
    with pytest.raises(ProgramError, match=r"predicted_latency_ns.*>= 0") as e:
        birsim.Simulator(mod, timing="compiler")
    assert e.value.path.endswith("instructions[1].predicted_latency_ns")


# ---- pe_throttle: TensorE's throttle ramp ------------------------------------------------

TRN1_PE_GHZ, RAMP_NS = 2.8, 3000.0        # docs/timing.md: trn1 PE clock, the ramp's length


def _matmuls(n, nmov=512):
    """n matmuls back to back on TensorE (one queue, program order; no other engine)."""
    mv = B.tensor("mv", "ExternalInput", "bfloat16", [128, nmov], "SB")
    st = B.tensor("st", "ExternalInput", "bfloat16", [128, 128], "SB")
    ps = B.tensor("ps", "ExternalOutput", "float32", [128, nmov], "PSUM")
    mm = [B.matmult(B.whole(mv), B.whole(st), B.whole(ps), name="mm%d" % k) for k in range(n)]
    return B.module([B.function("main", [mv, st, ps], mm)], arch="trn1")


def _run_pe(mod, **kw):
    rng = np.random.default_rng(1)
    x = {"mv": rng.standard_normal((128, 512)).astype(birsim.dtypes.numpy_dtype("bfloat16")),
         "st": rng.standard_normal((128, 128)).astype(birsim.dtypes.numpy_dtype("bfloat16"))}
    sim = birsim.Simulator(mod, trace=True, **kw)
    out = sim.run(x)
    ref = x["st"].astype(np.float32).T @ x["mv"].astype(np.float32)
    np.testing.assert_allclose(out["ps"], ref, rtol=1e-5, atol=1e-4)
    return sim


def _ramp_ends(work):
    """When TensorE has done `work` full-rate ns of work from a cold start: its rate
    (fraction of full) is 1/2 + t/(2 RAMP_NS) up to RAMP_NS, then 1 -- integrated on a
    fine grid (independent of the closed form timing.c uses)."""
    dt = 0.01
    t = np.arange(0, 3 * RAMP_NS + 2 * max(work), dt)
    rate = 0.5 + 0.5 * np.minimum(t / RAMP_NS, 1.0)
    done = np.concatenate([[0.0], np.cumsum(rate) * dt])
    return np.interp(work, done, np.concatenate([t, [t[-1] + dt]]))


def test_the_throttle_ramp_slows_a_pe_chain_by_the_expected_amount():
    n = 40
    each = 512 / TRN1_PE_GHZ                     # a bf16 matmul, 512 moving columns
    plain = _run_pe(_matmuls(n), timing=True)
    slow = _run_pe(_matmuls(n), timing=True, pe_throttle=True)
    assert plain.profile.total_ns == pytest.approx(n * each)
    ends = _ramp_ends(each * np.arange(1, n + 1))
    assert [r.start + r.duration for r in slow.trace] == pytest.approx(ends.tolist(), rel=1e-5)
    assert slow.profile.total_ns == pytest.approx(ends[-1], rel=1e-5)
    # the first matmul at about half rate, the last ones (past 3 us) at full rate
    assert 1.8 * each < slow.trace[0].duration < 2 * each
    assert slow.trace[-1].duration == pytest.approx(each, rel=1e-6)
    assert slow.profile.total_ns > plain.profile.total_ns


def test_without_the_option_times_are_identical():
    a = _run_pe(_matmuls(12), timing=True)
    b = _run_pe(_matmuls(12), timing=True, pe_throttle=False)
    key = [(r.instruction, r.start, r.duration) for r in a.trace]
    assert key == [(r.instruction, r.start, r.duration) for r in b.trace]


def test_the_throttle_leaves_other_engines_alone():
    a, _ = _times(_chain([None] * 3), True)
    sim = birsim.Simulator(_chain([None] * 3), trace=True, timing=True, pe_throttle=True)
    sim.run({"x": np.zeros((128, F), np.float32)})
    assert [(r.instruction, r.start, r.duration) for r in sim.trace] == a


def test_an_idle_gap_restarts_the_ramp():
    # two matmuls separated by a DVE instruction the second waits on: a gap on TensorE
    mv = B.tensor("mv", "ExternalInput", "bfloat16", [128, 512], "SB")
    st = B.tensor("st", "ExternalInput", "bfloat16", [128, 128], "SB")
    mv2 = B.tensor("mv2", "Internal", "bfloat16", [128, 512], "SB")
    ps = B.tensor("ps", "ExternalOutput", "float32", [128, 512], "PSUM")
    ps1 = B.tensor("ps1", "Internal", "float32", [128, 512], "PSUM")
    mod = B.module([B.function("main", [mv, st, mv2, ps, ps1], [
        B.matmult(B.whole(mv), B.whole(st), B.whole(ps1), name="mm0"),
        B.tensor_copy(B.whole(mv), B.whole(mv2), name="cp"),
        B.matmult(B.whole(mv2), B.whole(st), B.whole(ps), name="mm1")])],
        arch="trn1", synchronize=True)
    sim = _run_pe(mod, timing=True, pe_throttle=True)
    (m0,) = [r for r in sim.trace if r.instruction == "mm0"]
    (m1,) = [r for r in sim.trace if r.instruction == "mm1"]
    assert m1.start > m0.start + m0.duration            # TensorE idled in between
    assert m1.duration == pytest.approx(m0.duration)    # ... so it ramps again from half


def test_pe_throttle_needs_the_timing_model():
    with pytest.raises(ValueError, match="pe_throttle"):
        birsim.Simulator(_matmuls(1), pe_throttle=True)


# ---- the CLI: birsim profile --compiler / --pe-throttle ----------------------------------

def _cli_total(tmp_path, mod, *flags):
    import json
    import subprocess
    import sys
    prog, out = tmp_path / "p.json", tmp_path / "prof.json"
    B.to_json(mod, prog)
    r = subprocess.run([sys.executable, "-m", "birsim", "profile", str(prog), "--json", str(out),
                        *flags], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())["total_ns"]


def test_cli_profile_compiler_and_pe_throttle_flags(tmp_path):
    lats = [250, 1000.5, 75, 4000]
    assert _cli_total(tmp_path, _chain(lats), "--compiler") == pytest.approx(sum(lats))
    assert _cli_total(tmp_path, _chain(lats)) == pytest.approx(4 * _own_cost())
    n = 12
    plain = _cli_total(tmp_path, _matmuls(n))
    ramp = _cli_total(tmp_path, _matmuls(n), "--pe-throttle")
    assert plain == pytest.approx(n * 512 / TRN1_PE_GHZ)
    assert ramp == pytest.approx(_ramp_ends(512 / TRN1_PE_GHZ * np.arange(1, n + 1))[-1],
                                 rel=1e-5)


def test_cli_profile_compiler_with_only_is_refused(tmp_path):
    import subprocess
    import sys
    prog = tmp_path / "p.json"
    B.to_json(_chain([10]), prog)
    r = subprocess.run([sys.executable, "-m", "birsim", "profile", str(prog), "--compiler",
                        "--only"], capture_output=True, text=True)
    assert r.returncode == 2 and "--compiler and --only cannot be combined" in r.stderr
