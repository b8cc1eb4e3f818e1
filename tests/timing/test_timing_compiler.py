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
