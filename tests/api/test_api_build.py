"""birsim.build: the public program builder.

Round trip (build -> JSON text -> load gives the same program as loading the dict), the
checked-in examples are exactly what examples/build_examples.py writes with the builder,
and programs built only with the helpers run to NumPy's answers."""

import json
import os
import sys

import numpy as np
import pytest

import birsim
from birsim import build as B
from birsim.testing import assert_sim_close

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(HERE, "..", "examples")


def _same_program(a, b):
    """Two Modules hold the same tables, field by field (padding bytes ignored)."""
    assert a.tables.keys() == b.tables.keys()
    for k in a.tables:
        x, y = a.tables[k], b.tables[k]
        if isinstance(x, bytes):
            assert x == y, k
        else:
            assert x.dtype == y.dtype and x.shape == y.shape, k
            for field in x.dtype.names or ():
                assert np.array_equal(x[field], y[field]), (k, field)
    assert str(a) == str(b)


@pytest.fixture(scope="module")
def examples():
    sys.path.insert(0, EXAMPLES)
    try:
        import build_examples
        yield build_examples
    finally:
        sys.path.remove(EXAMPLES)


def test_examples_are_what_the_builder_writes(examples):
    for fname, make in examples.EXAMPLES.items():
        with open(os.path.join(EXAMPLES, fname)) as f:
            assert f.read() == examples.text(make), fname


def test_round_trip_through_json_text(examples, tmp_path):
    for fname, make in examples.EXAMPLES.items():
        prog = make()
        path = tmp_path / fname
        text = B.to_json(prog, path)
        assert json.loads(text) == prog
        _same_program(birsim.load(str(path)), B.load(prog))
        _same_program(birsim.load(text), birsim.load(os.path.join(EXAMPLES, fname)))


def test_unknown_opcode_and_engine_are_program_errors():
    with pytest.raises(birsim.ProgramError, match="unknown opcode 'TensorCopi'.*TensorCopy"):
        B.insn("TensorCopi", "DVE")
    with pytest.raises(birsim.ProgramError, match="unknown engine 'GPU'"):
        B.insn("TensorCopy", "GPU")
    with pytest.raises(birsim.ProgramError, match="shape="):
        B.whole("a")


def test_every_opcode_can_be_spelled():
    for op in birsim.ops.Op:
        d = B.insn(op.name, "Pool", name="x", some_field=1)
        assert d["opcode"] == op.name and d["some_field"] == 1
    for alias in ("Vector", "GPSIMD", "Scalar"):
        assert B.insn("NoOp", alias)["engine"] == alias


def test_unnamed_instructions_are_named_per_function():
    a = B.tensor("a", "ExternalInput", "float32", [4, 4], "DRAM")
    o = B.tensor("o", "ExternalOutput", "float32", [4, 4], "DRAM")
    prog = B.module([B.function("main", [a, o], [
        B.tensor_copy(B.whole(a), B.whole(o)),
        B.loop("i", 2, [B.tensor_copy(B.whole(a), B.whole(o)),
                        B.tensor_copy(B.whole(a), B.whole(o), name="mine")]),
    ])])
    insns = prog["functions"][0]["blocks"][0]["instructions"]
    assert [i["name"] for i in insns] == ["TensorCopy_0", "Loop_0"]
    assert [i["name"] for i in insns[1]["blocks"][0]["instructions"]] == \
        ["TensorCopy_1", "mine"]
    assert "TensorCopy_1" in str(B.load(prog))


def test_operands_take_tensors():
    t = B.tensor("t", "Internal", "bfloat16", [8, 2, 3], "SB", loc="t_loc")
    w = B.whole(t)
    assert w == {"kind": "physical_ap", "memref": "t_loc", "dtype": "bfloat16",
                 "ap": [[6, 8], [3, 2], [1, 3]]}
    assert B.ap(t, [[1, 1]], "float32", offset=B.affine([(B.iv("k"), 4)]))["offset"] == \
        {"kind": "AffExprKind", "terms": [{"idx": {"kind": "AffIVKind", "axis": "k"},
                                           "coeff": 4}], "c": 0}
    assert B.reg(B.register("r"))["regref"] == "r"


def _run(allocs, instructions, inputs, **kw):
    prog = B.module([B.function("main", allocs, instructions)], **kw)
    return birsim.Simulator(prog, strict=True).run(inputs)


def test_compute_helpers_match_numpy():
    rng = np.random.default_rng(14)
    P, F = 16, 8
    x = rng.normal(size=(P, F)).astype(np.float32)
    y = rng.normal(size=(P, F)).astype(np.float32)
    w = rng.normal(size=(P, 4)).astype(np.float32)
    X = B.tensor("x", "ExternalInput", "float32", [P, F], "DRAM")
    Y = B.tensor("y", "ExternalInput", "float32", [P, F], "DRAM")
    W = B.tensor("w", "ExternalInput", "float32", [P, 4], "DRAM")
    names = ["add", "ts", "relu", "red", "mm", "io", "ms", "rcp"]
    outs = {n: B.tensor(n, "ExternalOutput", "float32", [P, F], "SB") for n in names}
    outs["red"] = B.tensor("red", "ExternalOutput", "float32", [P, 1], "SB")
    outs["mm"] = B.tensor("mm", "ExternalOutput", "float32", [4, F], "PSUM")
    outs["io"] = B.tensor("io", "ExternalOutput", "int32", [P, F], "SB")
    outs["ms"] = B.tensor("ms", "ExternalOutput", "int32", [P, F], "SB")
    xs = B.tensor("xs", "Internal", "float32", [P, F], "SB")
    o = {n: B.whole(t) for n, t in outs.items()}
    prog = [
        B.load_(B.whole(X), B.whole(xs)),
        B.tensor_tensor(B.whole(xs), B.whole(Y), o["add"], "add"),
        B.tensor_scalar(B.whole(xs), o["ts"], "mult", 3.0, "add", 0.5),
        B.activation(B.whole(xs), o["relu"], "Relu", scale=2.0),
        B.tensor_reduce(B.whole(xs), o["red"], "max", "X"),
        B.matmult(B.whole(xs), B.whole(W), o["mm"], accumulation_flag=3),
        B.iota(o["io"], [[1, F]], 5, channel_multiplier=100),
        B.memset(o["ms"], 7),
        B.reciprocal(B.whole(xs), o["rcp"]),
    ]
    out = _run([X, Y, W, xs] + list(outs.values()), prog, {"x": x, "y": y, "w": w})
    assert_sim_close(out["add"], x + y)
    assert_sim_close(out["ts"], (x * np.float32(3)) + np.float32(0.5))
    assert_sim_close(out["relu"], np.maximum(x * 2, 0), kind="exact")
    assert_sim_close(out["red"], x.max(axis=1, keepdims=True), kind="exact")
    assert_sim_close(out["mm"], w.T @ x, atol=1e-5)
    assert np.array_equal(out["io"], 5 + 100 * np.arange(P)[:, None] + np.arange(F))
    assert np.array_equal(out["ms"], np.full((P, F), 7, np.int32))
    assert_sim_close(out["rcp"], np.float32(1) / x, kind="exact")


def test_control_flow_and_sync_helpers():
    """A loop summing tiles with semaphores between engines, a branch on a register,
    a call, a DMA queue triggered by an instruction."""
    T, P, F = 3, 4, 8
    x = np.arange(T * P * F, dtype=np.float32).reshape(T * P, F)
    X = B.tensor("x", "ExternalInput", "float32", [T * P, F], "DRAM")
    sel = B.tensor("sel", "ExternalInput", "int32", [1, 1], "DRAM")
    acc = B.tensor("acc", "ExternalOutput", "float32", [P, F], "SB")
    tile = B.tensor("tile", "Internal", "float32", [P, F], "SB")
    q_out = B.tensor("q_out", "ExternalOutput", "float32", [P, F], "DRAM")
    br = B.tensor("br", "ExternalOutput", "int32", [1, 1], "DRAM")
    s = B.register("s")
    body = [
        B.load_(B.ap(X, [[F, P], [1, F]], offset=B.affine([(B.iv("i"), P * F)])),
                B.whole(tile), sync=B.sync_info([], [B.sem_inc(0)])),
        B.tensor_tensor(B.whole(acc), B.whole(tile), B.whole(acc), "add",
                        sync=B.sync_info([B.sem_wait(0)], [B.sem_dec(0)])),
    ]
    q = B.dma_queue("q", [B.dma_block("blk", B.dma_descriptor(B.whole(acc), B.whole(q_out),
                                                              name="d"), trigger="trig")])
    entry = B.block("entry",
                    B.memset(B.whole(acc), 0),
                    B.loop("i", T, body),
                    B.dma_trigger("q", ["blk"], name="trig"),
                    B.call("set_br", {"o": "br"}),
                    B.tensor_load(B.whole(sel), B.reg(s)),
                    B.compare_and_branch(B.reg(s), B.imm(1, "int32"), "IS_EQIMM",
                                         "one", "other"))
    blocks = [entry,
              B.block("one", B.memset(B.whole(br), 1), B.branch("end")),
              B.block("other", B.memset(B.whole(br), 2)),
              B.block("end", B.exit_())]
    callee = B.function("set_br", [B.tensor("o", "Internal", "int32", [1, 1], "DRAM")],
                        [B.memset(B.whole(B.tensor("o", "Internal", "int32", [1, 1])), 9),
                         B.ret()])
    prog = B.module([B.function("main", [X, sel, acc, tile, q_out, br, s], blocks), callee],
                    dma_queues=[q])
    expect = x.reshape(T, P, F).sum(axis=0)
    for v, want in ((1, 1), (0, 2)):
        sim = birsim.Simulator(prog, strict=True)
        out = sim.run({"x": x, "sel": np.array([[v]], np.int32)})
        assert_sim_close(out["acc"], expect)
        assert_sim_close(out["q_out"], expect)
        assert out["br"][0, 0] == want
        assert sim.exited


# ---- inputs as users hold them ---------------------------------------------------------

import ml_dtypes  # noqa: E402
import subprocess  # noqa: E402
import warnings  # noqa: E402


def _copy(dtype, shape=(4, 8)):
    a = B.tensor("a", "ExternalInput", dtype, shape, "DRAM")
    o = B.tensor("o", "ExternalOutput", dtype, shape, "DRAM")
    return B.module([B.function("main", [a, o], [B.tensor_copy(B.whole(a), B.whole(o))])])


def _run_copy(dtype, value):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = birsim.run(_copy(dtype), {"a": value})["o"]
    return out, [str(m.message) for m in w if issubclass(m.category, birsim.BirsimWarning)]


def test_bf16_array_for_fp32_input_is_cast_exactly():
    x = np.random.default_rng(1).normal(size=(4, 8)).astype(ml_dtypes.bfloat16)
    out, warned = _run_copy("float32", x)
    assert out.dtype == np.float32 and warned == []
    assert np.array_equal(out, x.astype(np.float32))


def test_lossy_casts_warn_with_a_count():
    x = np.full((4, 8), 0.1)                                  # float64
    x[0, 0] = 0.5                                             # exact in every dtype
    out, warned = _run_copy("bfloat16", x)
    assert out.dtype == ml_dtypes.bfloat16
    assert np.array_equal(out, x.astype(ml_dtypes.bfloat16))
    assert warned == ["input 'a': casting float64 to bfloat16 changes 31 of 32 values"]
    out, warned = _run_copy("int32", np.full((4, 8), 2.5))
    assert (out == 2).all() and "changes 32 of 32" in warned[0]
    out, warned = _run_copy("float32", np.arange(32, dtype=np.int64).reshape(4, 8))
    assert warned == [] and np.array_equal(out, np.arange(32).reshape(4, 8))
    nan = np.full((4, 8), np.nan)
    out, warned = _run_copy("float32", nan)
    assert warned == [] and np.isnan(out).all()


def test_raw_bits_are_reinterpreted_when_the_item_size_matches():
    bits = np.full((4, 8), 0x3FC0, np.uint16)                 # bf16 1.5
    out, warned = _run_copy("bfloat16", bits)
    assert warned == [] and (out.astype(np.float32) == 1.5).all()
    out, _ = _run_copy("bfloat16", bits.view("V2"))
    assert (out.astype(np.float32) == 1.5).all()
    fp8 = np.full((4, 8), 0x38, np.uint8)                     # float8_e4m3fn 1.0
    assert (_run_copy("float8_e4m3fn", fp8)[0].astype(np.float32) == 1.0).all()
    with pytest.raises(birsim.ProgramError, match=r"raw \|V2 items are 2 bytes, float32 needs 4"):
        _run_copy("float32", bits.view("V2"))
    for bad, text in ((np.full((4, 8), "x"), "cannot cast <U1 to float32"),
                      (np.full((4, 8), 1j), "cannot cast complex128 to float32")):
        with pytest.raises(birsim.ProgramError, match=text):
            _run_copy("float32", bad)


def test_random_inputs_are_small_integers_and_normal_floats(tmp_path):
    n = B.tensor("n", "ExternalInput", "int32", [1, 64], "DRAM")
    x = B.tensor("x", "ExternalInput", "bfloat16", [4, 64], "DRAM")
    on = B.tensor("on", "ExternalOutput", "int32", [1, 64], "DRAM")
    ox = B.tensor("ox", "ExternalOutput", "bfloat16", [4, 64], "DRAM")
    prog = B.module([B.function("main", [n, x, on, ox], [
        B.tensor_copy(B.whole(n), B.whole(on)), B.tensor_copy(B.whole(x), B.whole(ox))])])
    path = tmp_path / "p.json"
    B.to_json(prog, path)
    r = subprocess.run([sys.executable, "-W", "error::birsim.BirsimWarning", "-m", "birsim",
                        "run", str(path), "--random-inputs", "5", "--out",
                        str(tmp_path / "o.npz")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "o.npz") as z:
        ints, floats = z["on"], z["ox"].view(ml_dtypes.bfloat16).astype(np.float32)
    assert ints.min() >= 0 and ints.max() <= 7 and len(np.unique(ints)) > 1
    assert floats.min() < 0 < floats.max() and 0.5 < floats.std() < 2


def test_unnamed_descriptors_of_two_queues_get_distinct_names():
    """B.module names descriptors once over all the queues (it counted per queue, and two
    queues' 'DMADescriptorCopy_0' made the module fail to load)."""
    from birsim import build as B
    a = B.tensor("a", "ExternalInput", "float32", [4, 8], "DRAM")
    b = B.tensor("b", "ExternalOutput", "float32", [4, 8], "DRAM")
    c = B.tensor("c", "ExternalOutput", "float32", [4, 8], "DRAM")
    q0 = B.dma_queue("q0", [B.dma_block("k0", B.dma_descriptor(B.whole(a), B.whole(b)),
                                        trigger="t0")])
    q1 = B.dma_queue("q1", [B.dma_block("k1", B.dma_descriptor(B.whole(a), B.whole(c)),
                                        trigger="t1")])
    f = B.function("main", [a, b, c], [B.dma_trigger("q0", ["k0"], name="t0"),
                                       B.dma_trigger("q1", ["k1"], name="t1")])
    mod = B.module([f], dma_queues=[q0, q1])
    names = [i["name"] for q in mod["dma_queues"] for blk in q["dma_blocks"]
             for i in blk["instructions"]]
    assert len(set(names)) == 2
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    sim = birsim.Simulator(mod, checks="all")
    out = sim.run({"a": x})
    assert sim.findings == []
    np.testing.assert_array_equal(out["b"], x)
    np.testing.assert_array_equal(out["c"], x)
