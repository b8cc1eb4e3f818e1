"""birsim.synchronize across cores (shared DRAM tensors of a module list, ordered with
``target_core`` semaphore updates) and with overlapped DMA queues (a trigger's blocks
are waited for only by what needs their bytes)."""

import json
import warnings

import numpy as np
import pytest

import birsim
from birsim import build as B

SEEDS = range(100)


def _findings(prog, inputs, **kw):
    sim = birsim.Simulator(prog, checks="all", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        out = sim.run(inputs)
    return out, sim.findings


def _races(prog, inputs, **kw):
    return [f for f in _findings(prog, inputs, **kw)[1] if f.kind == "races"]


def _schedules():
    return [dict(schedule="in_order"), dict(schedule="round_robin")] + \
        [dict(schedule="random", seed=s) for s in SEEDS]


def _assert_schedule_independent(prog, inputs, want, **kw):
    """Race-free under checks="all" and bit-identical to ``want`` under in_order,
    round_robin and 100 random seeds."""
    out, findings = _findings(prog, inputs, **kw)
    assert findings == []
    for name, ref in want.items():
        np.testing.assert_array_equal(out[name], ref)
    for sk in _schedules():
        got = birsim.Simulator(prog, **kw, **sk).run(inputs)
        for name, ref in want.items():
            np.testing.assert_array_equal(got[name], ref, err_msg=str(sk))


# {=== DMA queues: overlapped, not drained ===}

def _pipeline(T=4, P=16, F=64):
    """load (SP fires block in_k of queue qin: x tile k -> xs_k), compute (DVE: ys_k =
    2 xs_k, Activation: zs_k = relu(ys_k)), store (Activation fires block out_k of qout:
    zs_k -> out tile k), T tiles unrolled, each tile its own buffers: nothing orders the
    load of tile k + 1 after the compute of tile k but the sync a pass inserts. No sync."""
    x = B.tensor("x", "ExternalInput", "float32", [P, T * F], "DRAM")
    out = B.tensor("out", "ExternalOutput", "float32", [P, T * F], "DRAM")
    xs = [B.tensor("xs%d" % k, "Internal", "float32", [P, F], "SB") for k in range(T)]
    ys = [B.tensor("ys%d" % k, "Internal", "float32", [P, F], "SB") for k in range(T)]
    zs = [B.tensor("zs%d" % k, "Internal", "float32", [P, F], "SB") for k in range(T)]

    def tile(t, k):
        return B.ap(t, [[T * F, P], [1, F]], offset=k * F)
    qin = B.dma_queue("qin", [B.dma_block("in%d" % k, B.dma_descriptor(
        tile(x, k), B.whole(xs[k]), name="d_in%d" % k))
                              for k in range(T)])
    qout = B.dma_queue("qout", [B.dma_block("out%d" % k, B.dma_descriptor(
        B.whole(zs[k]), tile(out, k), name="d_out%d" % k))
                                for k in range(T)])
    code = []
    for k in range(T):
        code += [B.dma_trigger("qin", ["in%d" % k], engine="SP", name="load%d" % k),
                 B.tensor_scalar(B.whole(xs[k]), B.whole(ys[k]), "mult", 2.0, name="scale%d" % k),
                 B.activation(B.whole(ys[k]), B.whole(zs[k]), "Relu", name="relu%d" % k),
                 B.dma_trigger("qout", ["out%d" % k], engine="Activation",
                               name="store%d" % k)]
    return B.module([B.function("main", [x, out] + xs + ys + zs, code)], dma_queues=[qin, qout])


def _names_waited_for(prog, name):
    for b in prog["functions"][0]["blocks"]:
        for i in b["instructions"]:
            if i.get("name") == name:
                return [w.get("from") for w in i.get("sync_info", {}).get("on_wait", [])]
    raise KeyError(name)


def _makespan(prog, inputs):
    sim = birsim.Simulator(prog, timing="only")
    sim.run(inputs)
    return sim.profile.total_ns


def test_dma_pipeline_overlaps_loads_with_compute_and_stays_race_free():
    prog = _pipeline()
    x = np.random.default_rng(3).standard_normal((16, 256)).astype(np.float32)
    assert _races(prog, {"x": x}), "the test program must race without synchronize"
    synced = birsim.synchronize(prog)
    drained = birsim.synchronize(prog, overlap_dma=False)
    want = {"out": np.maximum(x * np.float32(2.0), 0)}
    _assert_schedule_independent(synced, {"x": x}, want)
    _assert_schedule_independent(synced, {"x": x}, want, dma_mode="deferred")
    _assert_schedule_independent(drained, {"x": x}, want)
    # nothing orders load k + 1 after the compute of tile k: no trigger waits at all
    # (its blocks write fresh tiles), and no drain follows a trigger
    for k in range(4):
        assert _names_waited_for(synced, "load%d" % k) == []
    names = [i["name"] for i in synced["functions"][0]["blocks"][0]["instructions"]]
    assert not [n for n in names if n.startswith("sync_drain")]
    assert [n for n in _names_waited_for(drained, "sync_drain_load1")] == ["load1"]
    # the compute waits for its own tile's block, the store for the compute
    assert _names_waited_for(synced, "scale2") == ["load2"]
    assert _names_waited_for(synced, "store2") == []          # relu2 precedes it on Activation
    # modelled time: the queues overlap compute (a drained store stalls Activation's next
    # relu), so the overlapped program is faster
    assert _makespan(synced, {"x": x}) < _makespan(drained, {"x": x})


def test_every_wait_of_the_overlapped_pipeline_is_needed():
    synced = birsim.synchronize(_pipeline(T=3))
    recs = birsim.audit(synced, schedules=("in_order", "round_robin", 0, 1))
    assert recs and all(r["label"] == "needed" for r in recs
                        if not r["instruction"].startswith("sync_reset")), \
        [(r["instruction"], r["label"]) for r in recs]


# {=== Edges between cores ===}

P, F = 16, 32


def _dram(name, kind, shape, shared=False):
    return B.tensor(name, kind, "float32", list(shape), "DRAM",
                    addr_space="Shared" if shared else None)


def _sb(name, shape=(P, F)):
    return B.tensor(name, "Internal", "float32", list(shape), "SB")


def _half(t, k, width=2 * F):
    return B.ap(t, [[width, P], [1, F]], offset=k * F)


def _producer_consumer():
    """Core 0 loads x, triples it (DVE) and stores it to the Shared HBM tensor mid; core
    1 loads mid, takes relu (Activation) and stores out. No sync."""
    x, mid, out = _dram("x", "ExternalInput", (P, F)), _dram("mid", "Internal", (P, F), True), \
        _dram("out", "ExternalOutput", (P, F))
    xs, ys, ms, rs = _sb("xs"), _sb("ys"), _sb("ms"), _sb("rs")
    m0 = B.module([B.function("main", [x, mid, xs, ys], [
        B.load_(B.whole(x), B.whole(xs), name="ld_x"),
        B.tensor_scalar(B.whole(xs), B.whole(ys), "mult", 3.0, name="triple"),
        B.save(B.whole(ys), B.whole(mid), name="st_mid")])])
    m1 = B.module([B.function("main", [mid, out, ms, rs], [
        B.load_(B.whole(mid), B.whole(ms), name="ld_mid"),
        B.activation(B.whole(ms), B.whole(rs), "Relu", name="relu"),
        B.save(B.whole(rs), B.whole(out), name="st_out")])])
    return [m0, m1]


def _exchange():
    """A collective-like exchange: core k scales its half of x by k + 2 and stores it to
    half k of the Shared buffer buf, loads the other core's half back, and stores its
    own minus the other's to half k of out. No sync."""
    mods = []
    for k in range(2):
        x, out = _dram("x", "ExternalInput", (P, 2 * F)), _dram("out", "ExternalOutput", (P, 2 * F))
        buf = _dram("buf", "Internal", (P, 2 * F), True)
        a, b, d = _sb("a"), _sb("b"), _sb("d")
        mods.append(B.module([B.function("main", [x, out, buf, a, b, d], [
            B.load_(_half(x, k), B.whole(a), name="ld_x"),
            B.tensor_scalar(B.whole(a), B.whole(a), "mult", float(k + 2), name="scale"),
            B.save(B.whole(a), _half(buf, k), engine="SP", name="st_mine"),
            B.load_(_half(buf, 1 - k), B.whole(b), name="ld_theirs"),
            B.tensor_tensor(B.whole(a), B.whole(b), B.whole(d), "subtract", name="diff"),
            B.save(B.whole(d), _half(out, k), name="st_out")])]))
    return mods


def _loops(T=3):
    """A loop on each core: core 0's Loop stores 2 x tile t to tile t of the Shared
    tensor mid, core 1's Loop loads tile t of mid, adds 1 and stores it to out. No sync."""
    x = _dram("x", "ExternalInput", (P, T * F))
    mid = _dram("mid", "Internal", (P, T * F), True)
    out = _dram("out", "ExternalOutput", (P, T * F))
    col = B.affine([(B.iv("t"), F)])

    def tile(t):
        return B.ap(t, [[T * F, P], [1, F]], offset=col)
    xs, ys, ms, rs = _sb("xs"), _sb("ys"), _sb("ms"), _sb("rs")
    m0 = B.module([B.function("main", [x, mid, xs, ys], [B.block("entry", B.loop("t", T, [
        B.load_(tile(x), B.whole(xs), name="ld_x"),
        B.tensor_scalar(B.whole(xs), B.whole(ys), "mult", 2.0, name="double"),
        B.save(B.whole(ys), tile(mid), name="st_mid")], name="produce"))])])
    m1 = B.module([B.function("main", [mid, out, ms, rs], [B.block("entry", B.loop("t", T, [
        B.load_(tile(mid), B.whole(ms), name="ld_mid"),
        B.tensor_scalar(B.whole(ms), B.whole(rs), "add", 1.0, engine="Pool", name="inc"),
        B.save(B.whole(rs), tile(out), name="st_out")], name="consume"))])])
    return [m0, m1]


def _case(name):
    rng = np.random.default_rng(7)
    if name == "producer_consumer":
        x = rng.standard_normal((P, F)).astype(np.float32)
        return _producer_consumer(), {"x": x}, {"out": np.maximum(x * np.float32(3), 0)}
    if name == "exchange":
        x = rng.standard_normal((P, 2 * F)).astype(np.float32)
        a0, a1 = x[:, :F] * np.float32(2), x[:, F:] * np.float32(3)
        return _exchange(), {"x": x}, {"out": np.concatenate([a0 - a1, a1 - a0], axis=1)}
    x = rng.standard_normal((P, 3 * F)).astype(np.float32)
    return _loops(), {"x": x}, {"out": x * np.float32(2) + np.float32(1)}


def _xcore_ids(mods):
    """Per core, the ids of the semaphores synchronize gave to edges between cores (the
    group its final sync_xreset resets)."""
    out = []
    for m in mods:
        ids = set()
        for b in m["functions"][0]["blocks"]:
            for i in b["instructions"]:
                if i.get("name", "").startswith("sync_xreset"):
                    ids.update(i["sema_group"])
        out.append(ids)
    return out


def _target_updates(mods):
    out = []

    def walk(blocks, core):
        for b in blocks:
            for i in b["instructions"]:
                for u in i.get("sync_info", {}).get("on_update", []):
                    if "target_core" in u:
                        out.append((core, i["name"], u))
                walk(i.get("blocks", []), core)
    for c, m in enumerate(mods):
        walk(m["functions"][0]["blocks"], c)
    return out


CASES = ["producer_consumer", "exchange", "loops"]


@pytest.mark.parametrize("case", CASES)
def test_cores_race_unsynchronised_and_not_once_synchronised(case):
    mods, inputs, want = _case(case)
    assert _races(mods, inputs, cores=2), "the test program must race between cores"
    st = {}
    synced = birsim.synchronize(mods, stats=st)
    assert st["cross_core_waits"] >= 1
    _assert_schedule_independent(synced, inputs, want, cores=2)
    # every cross-core update names the other core, in the contract's spelling
    ups = _target_updates(synced)
    assert ups and all(u["target_core"] == 1 - c and u["mode"] == "sem-inc"
                       and u["type"] == "semaphore" and u["value"] == 1 for c, _, u in ups)


@pytest.mark.parametrize("case", CASES)
def test_every_cross_core_wait_is_needed(case):
    mods, inputs, _ = _case(case)
    synced = birsim.synchronize(mods)
    ids = _xcore_ids(synced)
    recs = birsim.audit(synced, inputs, cores=2)
    cross = [r for r in recs if r["entry"]["id"] in ids[r["core"]]
             and r["instruction"] != "" and not r["instruction"].startswith("sync_reset")]
    assert cross, "synchronize must have inserted cross-core waits"
    assert all(r["label"] == "needed" for r in cross), \
        [(r["core"], r["instruction"], r["entry"], r["label"]) for r in cross]


def test_cross_core_waits_are_minimal():
    """The exchange needs exactly one wait per core (its load of the other half waits for
    the other core's store); the producer/consumer one; the loops one, before core 1's
    Loop, signalled after core 0's."""
    def waits(mods):
        ids = _xcore_ids(mods)
        out = []

        def walk(blocks, c):
            for b in blocks:
                for i in b["instructions"]:
                    for w in i.get("sync_info", {}).get("on_wait", []):
                        if w["id"] in ids[c]:
                            out.append((c, i["name"], w["from"], w["wait_value"]))
                    walk(i.get("blocks", []), c)
        for c, m in enumerate(mods):
            walk(m["functions"][0]["blocks"], c)
        return sorted(out)
    assert waits(birsim.synchronize(_exchange())) == [
        (0, "ld_theirs", "st_mine", 1), (1, "ld_theirs", "st_mine", 1)]
    assert waits(birsim.synchronize(_producer_consumer())) == [(1, "ld_mid", "st_mid", 1)]
    synced = birsim.synchronize(_loops())
    assert waits(synced) == [(1, "sync_xwait_consume", "produce", 1)]
    names0 = [i["name"] for i in synced[0]["functions"][0]["blocks"][0]["instructions"]]
    assert names0.index("sync_xsignal_produce") == names0.index("produce") + 1


def test_modules_without_shared_conflicts_are_synchronised_core_by_core():
    """Per-core behaviour is unchanged: a list whose cores share nothing they conflict on
    gets exactly what each module gets alone."""
    mods = [json.loads(json.dumps(m)) for m in _producer_consumer()]
    mods[1]["functions"][0]["allocations"][0]["name"] = "mid2"     # no longer shared
    assert birsim.synchronize(mods) == [birsim.synchronize(m) for m in mods]


def test_a_cross_core_cycle_is_a_program_error():
    """Core 0 reads a then writes b; core 1 reads b then writes a, each on one engine in
    that order: the data wants each write before the other core's read, which block order
    forbids. synchronize says so instead of inserting a deadlock."""
    mods = []
    for k in range(2):
        a, b = _dram("a", "Internal", (P, F), True), _dram("b", "Internal", (P, F), True)
        s = _sb("s")
        src, dst = (a, b) if k == 0 else (b, a)
        mods.append(B.module([B.function("main", [a, b, s], [
            B.load_(B.whole(src), B.whole(s), name="rd"),
            B.save(B.whole(s), B.whole(dst), name="wr")])]))
    with pytest.raises(birsim.ProgramError, match="cycle"):
        birsim.synchronize(mods)


def _queued_producer_consumer():
    """The producer/consumer through DMA queues: core 0's SP fires a block that stores ys
    to mid, core 1's Pool fires one that loads mid into ms. No sync."""
    x, mid, out = _dram("x", "ExternalInput", (P, F)), _dram("mid", "Internal", (P, F), True), \
        _dram("out", "ExternalOutput", (P, F))
    xs, ys, ms, rs = _sb("xs"), _sb("ys"), _sb("ms"), _sb("rs")
    q0 = B.dma_queue("q", [B.dma_block("put", B.dma_descriptor(B.whole(ys), B.whole(mid),
                                                                name="d_put"))])
    q1 = B.dma_queue("q", [B.dma_block("get", B.dma_descriptor(B.whole(mid), B.whole(ms),
                                                                name="d_get"))])
    m0 = B.module([B.function("main", [x, mid, xs, ys], [
        B.load_(B.whole(x), B.whole(xs), name="ld_x"),
        B.tensor_scalar(B.whole(xs), B.whole(ys), "mult", 3.0, name="triple"),
        B.dma_trigger("q", ["put"], engine="SP", name="fire_put")])],
        dma_queues=[q0])
    m1 = B.module([B.function("main", [mid, out, ms, rs], [
        B.dma_trigger("q", ["get"], engine="Pool", name="fire_get"),
        B.activation(B.whole(ms), B.whole(rs), "Relu", name="relu"),
        B.save(B.whole(rs), B.whole(out), name="st_out")])], dma_queues=[q1])
    return [m0, m1]


@pytest.mark.parametrize("overlap", [True, False])
def test_dma_queue_blocks_signal_another_core_when_they_complete(overlap):
    mods = _queued_producer_consumer()
    x = np.random.default_rng(5).standard_normal((P, F)).astype(np.float32)
    assert _races(mods, {"x": x}, cores=2)
    synced = birsim.synchronize(mods, overlap_dma=overlap)
    want = {"out": np.maximum(x * np.float32(3), 0)}
    _assert_schedule_independent(synced, {"x": x}, want, cores=2)
    _assert_schedule_independent(synced, {"x": x}, want, cores=2, dma_mode="deferred")
    ids = _xcore_ids(synced)
    cross = [r for r in birsim.audit(synced, {"x": x}, cores=2)
             if r["entry"]["id"] in ids[r["core"]]]
    assert cross and all(r["label"] == "needed" for r in cross)


def test_a_wait_another_core_already_ordered_is_not_repeated():
    """Three cores: core 1 loads A after core 0 stored it, then stores B (both on its DMA
    queue); core 2 loads B, then A. Waiting for core 1's store of B already orders core
    0's store of A (through core 1's wait), so core 2's load of A waits for nothing."""
    mods = []
    for c in range(3):
        x, out = _dram("x", "ExternalInput", (P, F)), _dram("out", "ExternalOutput", (P, F))
        a, b = _dram("A", "Internal", (P, F), True), _dram("B", "Internal", (P, F), True)
        s, t, d = _sb("s"), _sb("t"), _sb("d")
        code = [[B.load_(B.whole(x), B.whole(s), name="ld_x"),
                 B.save(B.whole(s), B.whole(a), name="st_A")],
                [B.load_(B.whole(a), B.whole(s), name="ld_A"),
                 B.tensor_scalar(B.whole(s), B.whole(s), "mult", 2.0, name="double"),
                 B.save(B.whole(s), B.whole(b), name="st_B")],
                [B.load_(B.whole(b), B.whole(t), name="ld_B"),
                 B.load_(B.whole(a), B.whole(s), name="ld_A"),
                 B.tensor_tensor(B.whole(s), B.whole(t), B.whole(d), "add", name="add"),
                 B.save(B.whole(d), B.whole(out), name="st_out")]][c]
        allocs = [x, a, b, s, t, d] + ([out] if c == 2 else [])
        mods.append(B.module([B.function("main", allocs, code)]))
    x = np.random.default_rng(11).standard_normal((P, F)).astype(np.float32)
    assert _races(mods, {"x": x}, cores=3)
    synced = birsim.synchronize(mods)
    ids = _xcore_ids(synced)
    waits = [(c, i["name"], w["from"]) for c, m in enumerate(synced)
             for i in m["functions"][0]["blocks"][0]["instructions"]
             for w in i.get("sync_info", {}).get("on_wait", []) if w["id"] in ids[c]]
    assert sorted(waits) == [(1, "ld_A", "st_A"), (2, "ld_B", "st_B")]
    _assert_schedule_independent(synced, {"x": x}, {"out": x + x * np.float32(2)}, cores=3)
    cross = [r for r in birsim.audit(synced, {"x": x}, cores=3)
             if r["entry"]["id"] in ids[r["core"]]]
    assert len(cross) == 2 and all(r["label"] == "needed" for r in cross)


def test_a_work_directory_synchronised_by_the_compiler_is_kept_as_written():
    """Blocks with sync of their own are their author's, between cores too (the compiler
    dump's cores write disjoint halves that loop-dependent offsets hide from footprints)."""
    from birsim.workdir import find_dumps
    progs = []
    for path in find_dumps("examples/compiler_workdir"):
        with open(path) as f:
            progs.append(json.load(f))
    assert birsim.synchronize(progs) == progs


def test_existing_target_core_updates_leave_the_cores_as_written():
    """A module list whose author already signals between cores is not given more
    cross-core sync (its edges may go the other way than write-before-read): here core
    1's loop body signals core 0, and its Loop is not ordered after core 0's."""
    mods = _loops()
    st = {}
    loop = mods[1]["functions"][0]["blocks"][0]["instructions"][0]
    loop["blocks"][0]["instructions"][2]["sync_info"] = {
        "on_wait": [], "on_update": [{"type": "semaphore", "id": 9, "mode": "sem-inc",
                                      "value": 1, "target_core": 0}]}
    birsim.synchronize(mods, stats=st)
    assert st["cross_core_waits"] == 0


def test_a_core_that_branches_is_a_program_error():
    mods = _producer_consumer()
    f = mods[1]["functions"][0]
    code = f["blocks"][0]["instructions"]
    f["blocks"] = [B.block("first", *code[:1], B.insn("UnconditionalBranch", "ALL", name="go",
                                                        target="second")),
                   B.block("second", *code[1:])]
    with pytest.raises(birsim.ProgramError, match="core 1's function 'main' branches"):
        birsim.synchronize(mods)
