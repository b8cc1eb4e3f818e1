"""Loader verdicts (brief ld): a misspelled key warns on every opcode by construction;
extra ins/outs are refused at load on both load paths; strict=True makes load warnings
errors and warnings name the user's line; BIRKernel attributes are only the documented
ones; Simulator(rng_seed=) seeds the device RNG independently of the schedule seed."""

import json
import os
import sys
import warnings

import numpy as np
import pytest

import birsim
from birsim import _birsim
from birsim._load import keys as _keys, passes as loader
from birsim.kernels import unregister

from bir import block, dma_block, dma_queue, function, insn, module, tensor, whole

P, F = 16, 8


def _load_warnings(prog, fast=True, monkeypatch=None):
    """(load error or None, BirsimWarning messages) of loading ``prog``."""
    if monkeypatch is not None:
        monkeypatch.setattr(loader, "FAST_PATH", fast)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            birsim.load(prog)
            err = None
        except birsim.ProgramError as e:     # a later check; the keys were checked first
            err = e
    return err, [str(x.message) for x in w if issubclass(x.category, birsim.BirsimWarning)]


# ---- 1. a misspelled key warns on every opcode ----------------------------------------

RUNNABLE = sorted(op for op, (_, sim, _) in _birsim.opcodes.items() if sim != "B")


def _misspelt(op):
    """(a known key of ``op``, a one-edit misspelling of it that is no known key)."""
    known = _keys.known_keys(op)
    for key in sorted(_keys.OPS[op].read()) + ["dependencies", "sync_info"]:
        for bad in (key[:len(key) // 2] + key[len(key) // 2 + 1:], key + key[-1]):
            if bad not in known and _keys.suggestion(op, bad) == key:
                return key, bad
    raise AssertionError("no misspelling found for %s" % op)


def _program_with(op, extra):
    """A program with one ``op`` instruction carrying the keys ``extra`` (enough for pass
    1 of the loader; later errors do not matter: the keys are checked first)."""
    if op == "DMABlock":
        blk = dict(dma_block("blk", trigger="t"), **extra)
        trig = {"name": "t", "opcode": "DMATrigger", "engine": "SP", "queue": "q",
                "dma_blocks": ["blk"]}
        return module([function("main", [], [block("b0", trig)])],
                      dma_queues=[dma_queue("q", [blk])])
    obj = {"name": "i0", "opcode": op, "engine": "Unassigned"}
    if op == "Break":                  # only inside a loop
        obj = {"name": "L", "opcode": "Loop", "engine": "Unassigned",
               "LoopAxis": {"name": "i", "lb": 0, "ub": 1, "stride": 1},
               "blocks": [block("body", dict(obj, **extra))]}
    elif op == "Loop":
        obj.update(LoopAxis={"name": "i", "lb": 0, "ub": 1, "stride": 1}, blocks=[])
    elif op == "DynamicForLoop":
        obj.update(DynamicForLoopAxis={"name": "j", "lb": 0, "ub": 1, "stride": 1}, blocks=[])
    elif op == "DoWhile":
        obj.update(blocks=[])
    if op != "Break":
        obj.update(extra)
    return module([function("main", [], [block("b0", obj)])])


def test_every_runnable_opcode_has_key_and_operand_rows():
    assert set(RUNNABLE) - set(_keys.OPS) == set()


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "python"])
@pytest.mark.parametrize("op", RUNNABLE)
def test_a_misspelled_key_warns_on_every_opcode(op, fast, monkeypatch):
    key, bad = _misspelt(op)
    _, w = _load_warnings(_program_with(op, {bad: 1}), fast, monkeypatch)
    assert any("unknown key '%s'" % bad in m and "did you mean '%s'" % key in m for m in w), w


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "python"])
def test_dropout_misspelt_threshold_warns(fast, monkeypatch):
    prog = module([function("main", [
        tensor("x", "ExternalInput", "float32", (P, F), "SB"),
        tensor("p", "ExternalInput", "float32", (P, 1), "SB"),
        tensor("o", "ExternalOutput", "float32", (P, F), "SB")], [block("b0", insn(
            "d", "Dropout", "DVE", ins=[whole("x", (P, F)), whole("p", (P, 1))],
            outs=[whole("o", (P, F))], is_keep_treshold=True))])])
    err, w = _load_warnings(prog, fast, monkeypatch)
    assert err is None
    assert any("unknown key 'is_keep_treshold'" in m and "did you mean 'is_keep_threshold'"
               in m for m in w), w


# ---- 2. extra ins / outs ---------------------------------------------------------------

def _copy_prog(nins=1, nouts=1, opcode="TensorCopy", **keys):
    """y0 := x0, y1 := x1 in block b0/b1, then instruction 'bad' (b1, position 1):
    ``opcode`` with ins x0.. and outs y2, y0, y1 (the first ``nins`` / ``nouts``)."""
    allocs = [tensor("x%d" % k, "ExternalInput", "float32", (P, F), "SB") for k in range(3)]
    allocs += [tensor("y%d" % k, "ExternalOutput", "float32", (P, F), "SB") for k in range(3)]
    ins = [whole("x%d" % k, (P, F)) for k in range(nins)]
    outs = [whole("y%d" % k, (P, F)) for k in (2, 0, 1)[:nouts]]
    return module([function("main", allocs, [
        block("b0", insn("c0", "TensorCopy", "DVE", ins=[whole("x0", (P, F))],
                         outs=[whole("y0", (P, F))])),
        block("b1", insn("c1", "TensorCopy", "DVE", ins=[whole("x1", (P, F))],
                         outs=[whole("y1", (P, F))]),
              insn("bad", opcode, "DVE", ins=ins, outs=outs, **keys))])])


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "python"])
@pytest.mark.parametrize("op,nins,nouts,keys,extra", [
    ("TensorCopy", 1, 2, {}, "outs[1]"),
    ("TensorCopy", 2, 1, {}, "ins[1]"),
    ("TensorTensor", 2, 2, {"op": "add"}, "outs[1]"),
    ("TensorTensor", 3, 3, {"op": "add"}, "outs[1]"),
    ("Activation", 1, 2, {"func": "Identity"}, "outs[1]"),
])
def test_extra_operands_are_refused(op, nins, nouts, keys, extra, fast, monkeypatch):
    monkeypatch.setattr(loader, "FAST_PATH", fast)
    with pytest.raises(birsim.ProgramError) as ei:
        birsim.load(_copy_prog(nins, nouts, op, **keys))
    e = ei.value
    assert e.path == "functions[0].blocks[1].instructions[1]." + extra
    assert (e.function, e.instruction) == ("main", "bad")
    assert "%s is one too many" % extra in str(e) and op in str(e)
    assert "instruction 'bad' in function 'main'" in str(e)


def test_the_operand_counts_allowed_still_load_and_run():
    x = np.arange(P * F, dtype=np.float32).reshape(P, F)
    out = birsim.Simulator(_copy_prog(1, 1), strict=True).run({"x0": x, "x1": x + 1,
                                                               "x2": x})
    np.testing.assert_array_equal(out["y2"], x)
    np.testing.assert_array_equal(out["y1"], x + 1)


# ---- 3. strict load warnings; warnings name the caller's line ---------------------------

def _misspelt_prog():
    return _copy_prog(1, 1, "TensorScalar", op0="add", revrse0=True)


_MISSPELT = "unknown key 'revrse0'"
# BIRSIM_CHECK_FASTLOAD=1 wraps the loader in tests/conftest.py: its frame is the caller
_CALLERS = {__file__} | ({os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conftest.py")}
                         if os.environ.get("BIRSIM_CHECK_FASTLOAD") else set())


def test_load_warning_names_the_callers_file():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = birsim.load(_misspelt_prog())
    hits = [x for x in w if _MISSPELT in str(x.message)]
    assert hits and all(x.filename in _CALLERS for x in hits), [x.filename for x in hits]
    assert any(_MISSPELT in t for t in m.warnings)


def test_simulator_load_warning_names_the_callers_file():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        birsim.Simulator(_misspelt_prog())
    hits = [x for x in w if _MISSPELT in str(x.message)]
    assert hits and all(x.filename in _CALLERS for x in hits), [x.filename for x in hits]


def test_run_warning_names_the_callers_file():
    """A run diagnostic (an output never written) names the caller's line too."""
    prog = module([function("main", [tensor("y", "ExternalOutput", "float32", (P, F), "SB")],
                            [block("b0", insn("n", "NoOp", "DVE"))])])
    sim = birsim.Simulator(prog)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sim.run({})
    hits = [x for x in w if issubclass(x.category, birsim.BirsimWarning)]
    assert hits and all(x.filename == __file__ for x in hits), [x.filename for x in hits]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "python"])
def test_strict_load_raises_with_the_warning_text(fast, monkeypatch):
    monkeypatch.setattr(loader, "FAST_PATH", fast)
    with pytest.raises(birsim.ProgramError, match=_MISSPELT + ".*did you mean 'reverse0'"):
        birsim.load(_misspelt_prog(), strict=True)
    with pytest.raises(birsim.ProgramError, match=_MISSPELT):
        birsim.load(json.dumps(_misspelt_prog()), strict=True)
    with pytest.raises(birsim.ProgramError, match=_MISSPELT):
        birsim.load([_misspelt_prog()], strict=True)


def test_strict_simulator_refuses_a_program_whose_load_warned():
    with pytest.raises(birsim.ProgramError, match=_MISSPELT):
        birsim.Simulator(_misspelt_prog(), strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        m = birsim.load(_misspelt_prog())
    with pytest.raises(birsim.ProgramError, match=_MISSPELT):
        birsim.Simulator(m, strict=True)
    with pytest.raises(birsim.ProgramError, match=_MISSPELT):
        birsim.Simulator([m], strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        birsim.Simulator(m)                         # not strict: loads (and warned)


def test_strict_accepts_a_clean_program():
    x = np.ones((P, F), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", birsim.BirsimWarning)
        m = birsim.load(_copy_prog(), strict=True)
        out = birsim.Simulator(m, strict=True).run({"x0": x, "x1": x, "x2": x})
    np.testing.assert_array_equal(out["y0"], x)


# ---- 4. BIRKernel attributes ------------------------------------------------------------

_DUMP_KEYS = {"debug": {"line": 3, "file": "attn.py"}, "origin": "nki", "engine_id": 2,
              "scheduled_start": 100, "scheduled_end": 180, "optin_passes": ["x"]}


def _birkernel_prog(name, **keys):
    allocs = [tensor("x", "ExternalInput", "float32", (P, F), "DRAM"),
              tensor("y", "ExternalOutput", "float32", (P, F), "DRAM")]
    k = insn("k", "BIRKernel", "Pool", ins=[whole("x", (P, F))], outs=[whole("y", (P, F))],
             kernel_name=name, srcs_shape=[[P, F]], dsts_shape=[[P, F]], **keys)
    return module([function("main", allocs, [block("b0", k)])])


def test_registered_kernel_gets_only_the_documented_attributes():
    seen = []

    @birsim.kernel("verdict_attrs")
    def fn(x, **attrs):
        seen.append(attrs)
        return x * 2
    try:
        kattrs = {"scale": 0.5}
        prog = _birkernel_prog("verdict_attrs", kernel_attrs=kattrs, is_causal=True,
                               lnc_size=2, **_DUMP_KEYS)
        x = np.arange(P * F, dtype=np.float32).reshape(P, F)
        out = birsim.Simulator(prog).run({"x": x})
    finally:
        unregister("verdict_attrs")
    np.testing.assert_array_equal(out["y"], x * 2)
    assert seen == [{"scale": 0.5, "is_causal": True, "lnc_size": 2, "kernel_attrs": kattrs}]


def test_ordinary_keyword_kernel_runs_on_a_compiler_shaped_record():
    """A kernel with named parameters only: the dump's keys would be unexpected keywords."""
    @birsim.kernel("verdict_named")
    def fn(x, scale, kernel_attrs):
        return x * scale
    try:
        prog = _birkernel_prog("verdict_named", kernel_attrs={"scale": 3.0}, **_DUMP_KEYS)
        x = np.ones((P, F), np.float32)
        out = birsim.Simulator(prog).run({"x": x})
    finally:
        unregister("verdict_named")
    np.testing.assert_array_equal(out["y"], x * 3)


def test_external_kernel_sim_config_attrs(tmp_path):
    log = tmp_path / "log"
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exe = tmp_path / "fake_kernel_sim"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {here!r})\n"
                   f"import _kernelsim_fake\n"
                   f"sys.exit(_kernelsim_fake.main('double', {str(log)!r}))\n")
    exe.chmod(0o755)
    kattrs = {"k": 1}
    prog = _birkernel_prog("ext_attrs", kernel_attrs=kattrs, norm_type="rms", **_DUMP_KEYS)
    x = np.arange(P * F, dtype=np.float32).reshape(P, F)
    out = birsim.Simulator(prog, kernel_sim=str(exe)).run({"x": x})
    np.testing.assert_array_equal(out["y"], x * 2)
    rec, = [json.loads(line) for line in log.read_text().splitlines()]
    assert rec["config"]["attrs"] == {"k": 1, "norm_type": "rms", "kernel_attrs": kattrs}


# ---- 5. rng_seed -------------------------------------------------------------------------

def _random_prog():
    """Dropout and Rand2 on DVE, a copy on Pool: race-free (no shared tensor written)."""
    allocs = [tensor("x", "ExternalInput", "float32", (P, F), "SB"),
              tensor("p", "ExternalInput", "float32", (P, 1), "SB"),
              tensor("lo", "ExternalInput", "float32", (P, 1), "SB"),
              tensor("hi", "ExternalInput", "float32", (P, 1), "SB"),
              tensor("d", "ExternalOutput", "float32", (P, F), "SB"),
              tensor("r", "ExternalOutput", "float32", (P, F), "SB"),
              tensor("c", "ExternalOutput", "float32", (P, F), "SB")]
    return module([function("main", allocs, [block(
        "b0",
        insn("copy", "TensorCopy", "Pool", ins=[whole("x", (P, F))], outs=[whole("c", (P, F))]),
        insn("drop", "Dropout", "DVE", ins=[whole("x", (P, F)), whole("p", (P, 1))],
             outs=[whole("d", (P, F))]),
        insn("rand", "Rand2", "DVE", ins=[whole("lo", (P, 1)), whole("hi", (P, 1))],
             outs=[whole("r", (P, F))]))])])


_INPUTS = {"x": np.arange(P * F, dtype=np.float32).reshape(P, F) + 1,
           "p": np.full((P, 1), 0.5, np.float32), "lo": np.zeros((P, 1), np.float32),
           "hi": np.ones((P, 1), np.float32)}


def _run_random(**opts):
    sim = birsim.Simulator(_random_prog(), checks="all", strict=True, **opts)
    out = sim.run(_INPUTS)
    assert sim.findings == []
    return out


def test_schedule_seed_does_not_change_device_random_numbers():
    runs = [_run_random(schedule="random", seed=s) for s in (0, 1, 2, 7)]
    assert 0 < np.count_nonzero(runs[0]["d"]) < P * F          # a real mask
    for r in runs[1:]:
        for k in ("d", "r", "c"):
            np.testing.assert_array_equal(r[k], runs[0][k])


def test_rng_seed_changes_device_random_numbers():
    a, b = _run_random(rng_seed=1), _run_random(rng_seed=2)
    assert not np.array_equal(a["d"], b["d"]) and not np.array_equal(a["r"], b["r"])
    np.testing.assert_array_equal(_run_random(rng_seed=1)["d"], a["d"])


def test_default_rng_seed_is_the_old_default():
    """Default results are bit-identical to those before rng_seed existed (42 + seed 0)."""
    default = _run_random()
    explicit = _run_random(rng_seed=42)
    for k in ("d", "r"):
        np.testing.assert_array_equal(default[k], explicit[k])
    assert birsim.Simulator(_random_prog()).rng_seed == 42


def test_cli_rng_seed(tmp_path):
    import subprocess
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_random_prog()))
    np.savez(tmp_path / "in.npz", **_INPUTS)
    outs = []
    for extra in ([], ["--seed", "5", "--schedule", "random"], ["--rng-seed", "9"]):
        out = tmp_path / ("o%d.npz" % len(outs))
        r = subprocess.run([sys.executable, "-m", "birsim", "run", str(path), "--inputs",
                            str(tmp_path / "in.npz"), "--out", str(out)] + extra,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with np.load(out) as z:
            outs.append(z["d"].copy())
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])
