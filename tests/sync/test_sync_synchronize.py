"""birsim.synchronize: the programs it returns are race-free, schedule-independent,
keep their author's sync, and carry no wait that program order already implies."""

import copy
import json
import warnings

import numpy as np
import pytest

import birsim
from birsim import build as B


def _racy(P=32, F=16, T=3):
    """load (DMA) -> scale (DVE) -> relu (Activation) -> store (DMA), T tiles in a Loop:
    no sync at all, so the engines race (RAW, WAR and across loop trips)."""
    x = B.tensor("x", "ExternalInput", "float32", [P, F * T], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [P, F * T], "DRAM")
    xs = B.tensor("xs", "Internal", "float32", [P, F], "SB")
    ys = B.tensor("ys", "Internal", "float32", [P, F], "SB")
    zs = B.tensor("zs", "Internal", "float32", [P, F], "SB")
    col = B.affine([(B.iv("t"), F)])
    body = [
        B.load_(B.ap(x, [[F * T, P], [1, F]], offset=col), B.whole(xs), name="load"),
        B.tensor_scalar(B.whole(xs), B.whole(ys), "mult", 3.0, name="scale"),
        B.activation(B.whole(ys), B.whole(zs), "Relu", name="relu"),
        B.save(B.whole(zs), B.ap(out, [[F * T, P], [1, F]], offset=col), name="store"),
    ]
    return B.module([B.function("main", [x, out, xs, ys, zs],
                                [B.block("entry", B.loop("t", T, body, name="tiles"))])])


def _run(prog, x, **kw):
    return birsim.Simulator(prog, **kw).run({"x": x})["out"]


def _races(prog, x):
    sim = birsim.Simulator(prog, checks="races")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim.run({"x": x})
    return [f for f in sim.findings if f.kind == "races"]


def test_unsynchronised_program_races_and_synchronized_one_does_not():
    prog = _racy()
    x = np.random.default_rng(1).standard_normal((32, 48)).astype(np.float32)
    assert _races(prog, x), "the test program must race without synchronize"
    synced = birsim.synchronize(prog)
    assert _races(synced, x) == []
    sim = birsim.Simulator(synced, checks="all")
    ref = sim.run({"x": x})["out"]
    assert sim.findings == []
    np.testing.assert_array_equal(ref, np.maximum(x * np.float32(3.0), 0))
    for seed in range(100):
        np.testing.assert_array_equal(_run(synced, x, schedule="random", seed=seed), ref)
    np.testing.assert_array_equal(_run(synced, x, schedule="round_robin"), ref)


def test_synchronize_does_not_modify_its_input_and_accepts_text_and_paths(tmp_path):
    prog = _racy()
    before = copy.deepcopy(prog)
    synced = birsim.synchronize(prog)
    assert prog == before
    assert birsim.synchronize(json.dumps(prog)) == synced
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prog))
    assert birsim.synchronize(str(path)) == synced
    assert B.module(prog["functions"], synchronize=True) == birsim.synchronize(
        B.module(copy.deepcopy(prog["functions"])))


def _waits(prog):
    out = []

    def walk(blocks):
        for b in blocks:
            for i in b["instructions"]:
                for w in i.get("sync_info", {}).get("on_wait", []):
                    out.append((i["name"], w))
                walk(i.get("blocks", []))
    for f in prog["functions"]:
        walk(f["blocks"])
    return out


def test_every_inserted_wait_is_needed():
    """Minimality: deleting any wait synchronize inserted makes a race (birsim.audit
    labels each one needed, and the audit's labels are proved in sync/test_sync_audit.py)."""
    synced = birsim.synchronize(_racy())
    assert len(_waits(synced)) == 3          # scale<-load, relu<-scale, store<-relu
    labels = [r["label"] for r in birsim.audit(synced)]
    assert labels == ["needed"] * 3


def test_program_order_needs_no_wait():
    """Two instructions on one engine are ordered by program order: nothing inserted."""
    a = B.tensor("a", "ExternalInput", "float32", [4, 4], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 4], "DRAM")
    s = B.tensor("s", "Internal", "float32", [4, 4], "SB")
    prog = B.module([B.function("main", [a, out, s], [
        B.load_(B.whole(a), B.whole(s), name="ld"),
        B.save(B.whole(s), B.whole(out), name="st"),
    ])])
    assert birsim.synchronize(prog) == prog


def test_transitive_wait_is_not_repeated():
    """c (PE) conflicts with a (DMA) and b (DVE); b already waits for a, so c waits only
    for b."""
    a = B.tensor("a", "ExternalInput", "float32", [4, 4], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 4], "DRAM")
    s, t = (B.tensor(n, "Internal", "float32", [4, 4], "SB") for n in ("s", "t"))
    u = B.tensor("u", "Internal", "float32", [4, 4], "SB")
    prog = B.module([B.function("main", [a, out, s, t, u], [
        B.load_(B.whole(a), B.whole(s), name="a"),
        B.tensor_scalar(B.whole(s), B.whole(t), "add", 1.0, name="b"),
        B.tensor_tensor(B.whole(s), B.whole(t), B.whole(u), "add", engine="Pool", name="c"),
        B.save(B.whole(u), B.whole(out), name="d"),
    ])])
    synced = birsim.synchronize(prog)
    froms = {(n, w["from"]) for n, w in _waits(synced)}
    assert froms == {("b", "a"), ("c", "b"), ("d", "c")}
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    sim = birsim.Simulator(synced, checks="all")
    np.testing.assert_array_equal(sim.run({"a": x})["out"], x + (x + 1))
    assert sim.findings == []


def test_disjoint_columns_need_no_wait():
    """Two engines writing different columns of one tile do not conflict."""
    out = B.tensor("out", "ExternalOutput", "float32", [4, 8], "DRAM")
    s = B.tensor("s", "Internal", "float32", [4, 8], "SB")
    prog = B.module([B.function("main", [out, s], [
        B.memset(B.ap(s, [[8, 4], [1, 4]]), 0, name="left"),
        B.memset(B.ap(s, [[8, 4], [1, 4]], offset=4), 0, engine="DVE", name="right"),
    ])])
    assert birsim.synchronize(prog) == prog


def test_existing_sync_is_kept():
    with open("examples/tiled_matmul.json") as f:
        prog = json.load(f)
    assert birsim.synchronize(prog) == prog


def test_stats_and_ids_avoid_the_programs_own():
    prog = _racy()
    prog["functions"][0]["blocks"][0]["instructions"].insert(
        0, B.insn("GroupResetSemaphores", "ALL", name="r", sema_group=[0, 1, 2]))
    st = {}
    synced = birsim.synchronize(prog, stats=st)
    assert st["semaphores"] == 3 and st["instructions"] == 4
    ids = {w["id"] for _, w in _waits(synced)}
    assert ids and not ids & {0, 1, 2}
    x = np.ones((32, 48), np.float32)
    assert _races(synced, x) == []


def test_aliasing_tiles_are_ordered():
    """Two SBUF tensors placed at the same address are one tile: a write through one and
    a read through the other conflict."""
    x = B.tensor("x", "ExternalInput", "float32", [16, 16], "DRAM")
    p = B.tensor("p", "Internal", "float32", [16, 16], "SB", addr=0, base=0)
    q = B.tensor("q", "Internal", "float32", [16, 16], "SB", addr=0, base=0)
    o = B.tensor("o", "ExternalOutput", "float32", [16, 16], "DRAM")
    prog = B.module([B.function("main", [x, p, q, o], [
        B.load_(B.whole(x), B.whole(p), name="ld"),
        B.tensor_scalar(B.whole(q), B.whole(q), "mult", 3.0, name="scale"),
        B.save(B.whole(q), B.whole(o), name="st"),
    ])])
    xv = np.arange(256, dtype=np.float32).reshape(16, 16)
    sim = birsim.Simulator(prog, checks="races")
    with pytest.warns(birsim.BirsimWarning):
        sim.run({"x": xv})
    assert sim.findings
    synced = birsim.synchronize(prog)
    sim = birsim.Simulator(synced, checks="all")
    np.testing.assert_array_equal(sim.run({"x": xv})["o"], xv * 3)
    assert sim.findings == []


def test_a_register_dependent_footprint_is_the_whole_tensor():
    """A register_ap's columns move with a register at run time: DVE writes columns
    [r, r + 4) of s, Pool reads columns 4..8. Read statically (offset 0) they would be
    disjoint; with r = 4 they are the same bytes, and synchronize must order them."""
    n = B.tensor("n", "ExternalInput", "int32", [1, 1], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [4, 4], "DRAM")
    s = B.tensor("s", "Internal", "float32", [4, 8], "SB")
    t = B.tensor("t", "Internal", "float32", [4, 4], "SB")
    r = B.register("r", "int32")
    prog = B.module([B.function("main", [n, out, s, t, r], [
        B.memset(B.whole(s), 0, engine="Pool", name="zero"),
        B.tensor_load(B.ap(n, [[1, 1], [1, 1]]), B.reg(r), engine="DVE", name="read_r"),
        B.memset(B.reg_ap(s, [[8, 4], [1, 4]], "r"), 0x40400000, engine="DVE", name="fill"),
        B.tensor_copy(B.ap(s, [[8, 4], [1, 4]], offset=4), B.whole(t), engine="Pool",
                      name="take"),
        B.save(B.whole(t), B.whole(out), name="st"),
    ])])
    synced = birsim.synchronize(prog)
    froms = {(name, w["from"]) for name, w in _waits(synced)}
    assert ("fill", "zero") in froms and ("take", "fill") in froms
    sim = birsim.Simulator(synced, checks="all")
    got = sim.run({"n": np.array([[4]], np.int32)})["out"]
    assert sim.findings == []
    np.testing.assert_array_equal(got, np.full((4, 4), 3.0, np.float32))


def _queue_program(P=16, F=32):
    """Pool fires DMA-queue blocks (software DGE): in_k loads half k of x into xs, DVE
    doubles it into ys, out_k stores ys; xs and ys are reused by the second half. No sync."""
    x = B.tensor("x", "ExternalInput", "float32", [P, 2 * F], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [P, 2 * F], "DRAM")
    xs = B.tensor("xs", "Internal", "float32", [P, F], "SB")
    ys = B.tensor("ys", "Internal", "float32", [P, F], "SB")

    def half(t, k):
        return B.ap(t, [[2 * F, P], [1, F]], offset=k * F)
    q = B.dma_queue("q0", [
        B.dma_block("in0", B.dma_descriptor(half(x, 0), B.whole(xs))),
        B.dma_block("out0", B.dma_descriptor(B.whole(ys), half(out, 0))),
        B.dma_block("in1", B.dma_descriptor(half(x, 1), B.whole(xs))),
        B.dma_block("out1", B.dma_descriptor(B.whole(ys), half(out, 1))),
    ])
    code = []
    for k in range(2):
        code += [B.dma_trigger("q0", ["in%d" % k], engine="Pool", name="fire_in%d" % k),
                 B.tensor_scalar(B.whole(xs), B.whole(ys), "mult", 2.0, name="dbl%d" % k),
                 B.dma_trigger("q0", ["out%d" % k], engine="Pool", name="fire_out%d" % k)]
    return B.module([B.function("main", [x, out, xs, ys], code)], dma_queues=[q])


def test_dma_queue_blocks_are_ordered():
    """The descriptors of a fired block run on the queue, after their trigger: the
    trigger waits for what they read or overwrite, and a drain after it (its blocks
    signal completion) orders what comes after them."""
    prog = _queue_program()
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    assert _races(prog, x)
    synced = birsim.synchronize(prog)
    assert all("sync_info" in b for b in synced["dma_queues"][0]["dma_blocks"])
    sim = birsim.Simulator(synced, checks="all")
    ref = sim.run({"x": x})["out"]
    assert sim.findings == []
    np.testing.assert_array_equal(ref, 2 * x)
    for kw in [dict(schedule="round_robin"), dict(dma_mode="deferred")] + \
            [dict(schedule="random", seed=s) for s in range(100)]:
        np.testing.assert_array_equal(_run(synced, x, **kw), ref)
    assert [r["label"] for r in birsim.audit(synced)].count("needed") >= 4
