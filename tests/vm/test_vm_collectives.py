"""Across cores: CollectiveCompute (AllReduce, AllGather, ReduceScatter, AllToAll),
CollectiveSend/Recv and GPSIMDSB2SB on 2 and 4 cores against NumPy reductions and routing
written here; a collective some rank never reaches is a DeadlockError naming the waiting
ranks; a nonexistent rank is a clear error."""

import warnings

import numpy as np
import pytest

import birsim
from bir import affine, ap, block, function, insn, module, shard, tensor, whole

P, F = 32, 48
RNG = np.random.default_rng(48)


def _spmd(coll_insns, n_in=1, n_out=1, in_dtype="float32", out_dtype="float32", extra=()):
    """Each core loads rows [rank*P*n_in, ...) of xs into t (SB), runs the collective(s)
    t -> r, and stores r into rows [rank*P*n_out, ...) of the Shared output ys."""
    N = 4
    return module([function("main", [
        tensor("xs", "ExternalInput", in_dtype, (N * P * n_in, F), "DRAM"),
        tensor("t", "Internal", in_dtype, (P * n_in, F), "SB"),
        tensor("r", "Internal", out_dtype, (P * n_out, F), "SB"),
        tensor("ys", "ExternalOutput", out_dtype, (N * P * n_out, F), "DRAM", addr_space="Shared"),
        *extra], [
        block("b0",
              insn("ld", "DMACopy", "SP", ins=[ap("xs", [[F, P * n_in], [1, F]], in_dtype,
                                                  offset=affine([(shard(), P * n_in * F)]))],
                   outs=[whole("t", (P * n_in, F), in_dtype)]),
              *coll_insns,
              insn("st", "DMACopy", "SP", ins=[whole("r", (P * n_out, F), out_dtype)],
                   outs=[ap("ys", [[F, P * n_out], [1, F]], out_dtype,
                            offset=affine([(shard(), P * n_out * F)]))]))])])


def _cc(kind, n_in=1, n_out=1, op=None, dtype="float32", **keys):
    return insn("cc", "CollectiveCompute", "SP", ins=[whole("t", (P * n_in, F), dtype)],
                outs=[whole("r", (P * n_out, F), dtype)], kind=kind, op=op, **keys)


def _run(prog, cores, xs, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim = birsim.Simulator(prog, cores=cores, **kw)
        return sim.run({"xs": xs}), sim


@pytest.mark.parametrize("cores", [2, 4])
@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_all_reduce(cores, op):
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    out, _ = _run(_spmd([_cc("AllReduce", op=op)]), cores, xs)
    parts = xs[:cores * P].reshape(cores, P, F)
    fold = {"add": np.add, "max": np.fmax, "min": np.fmin}[op]
    want = parts[0]
    for r in range(1, cores):                          # fp32, in rank order
        want = fold(want, parts[r]).astype(np.float32)
    np.testing.assert_array_equal(out["ys"][:cores * P], np.tile(want, (cores, 1)))


@pytest.mark.parametrize("schedule", ["round_robin", "random"])
def test_all_reduce_any_schedule(schedule):
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    out, _ = _run(_spmd([_cc("AllReduce")]), 4, xs, schedule=schedule, seed=9)
    want = xs.reshape(4, P, F)
    want = ((want[0] + want[1]) + want[2]) + want[3]
    np.testing.assert_array_equal(out["ys"], np.tile(want, (4, 1)))


@pytest.mark.parametrize("cores", [2, 4])
def test_all_gather(cores):
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = _spmd([_cc("AllGather", n_out=cores)], n_out=cores)
    out, _ = _run(prog, cores, xs)
    gathered = xs[:cores * P]                           # member g's input is chunk g
    np.testing.assert_array_equal(out["ys"][:cores * cores * P], np.tile(gathered, (cores, 1)))


@pytest.mark.parametrize("cores", [2, 4])
def test_reduce_scatter(cores):
    xs = RNG.standard_normal((4 * P * cores, F)).astype(np.float32)
    prog = _spmd([_cc("ReduceScatter", n_in=cores)], n_in=cores)
    out, _ = _run(prog, cores, xs)
    inputs = xs[:cores * cores * P].reshape(cores, cores, P, F)    # [rank, chunk, P, F]
    total = inputs[0]
    for r in range(1, cores):
        total = (total + inputs[r]).astype(np.float32)
    np.testing.assert_array_equal(out["ys"][:cores * P].reshape(cores, P, F), total)


def test_all_to_all():
    cores = 4
    xs = RNG.standard_normal((4 * P * cores, F)).astype(np.float32)
    prog = _spmd([_cc("AllToAll", n_in=cores, n_out=cores)], n_in=cores, n_out=cores)
    out, _ = _run(prog, cores, xs)
    inputs = xs.reshape(cores, cores, P, F)                       # [rank, chunk, ...]
    want = inputs.transpose(1, 0, 2, 3)                           # rank g gets chunk g of all
    np.testing.assert_array_equal(out["ys"].reshape(cores, cores, P, F), want)


def test_all_reduce_int32_and_cast():
    xs = RNG.integers(-1000, 1000, (4 * P, F)).astype(np.int32)
    out, _ = _run(_spmd([_cc("AllReduce", dtype="int32")], in_dtype="int32",
                        out_dtype="int32"), 2, xs)
    want = (xs[:P] + xs[P:2 * P])
    np.testing.assert_array_equal(out["ys"][:2 * P], np.tile(want, (2, 1)))


def test_replica_groups_split_the_ranks():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = _spmd([_cc("AllReduce", replica_groups=[[0, 2], [1, 3]])])
    out, _ = _run(prog, 4, xs)
    parts = xs.reshape(4, P, F)
    ys = out["ys"].reshape(4, P, F)
    np.testing.assert_array_equal(ys[0], parts[0] + parts[2])
    np.testing.assert_array_equal(ys[2], parts[0] + parts[2])
    np.testing.assert_array_equal(ys[1], parts[1] + parts[3])
    np.testing.assert_array_equal(ys[3], parts[1] + parts[3])


def _two_ranks(insns0, insns1):
    """Two cores of one module: rank 0 runs insns0, rank 1 insns1 (a branch on the rank),
    each between the load of its tile t and the store of r."""
    rk = {"kind": "register_access", "regref": "rk"}

    def body(name, insns):
        return block(name,
                     insn("ld" + name, "DMACopy", "SP", ins=[ap("xs", [[F, P], [1, F]],
                                                         offset=affine([(shard(), P * F)]))],
                          outs=[whole("t", (P, F))]),
                     *insns,
                     insn("st" + name, "DMACopy", "SP", ins=[whole("r", (P, F))],
                          outs=[ap("ys", [[F, P], [1, F]], offset=affine([(shard(), P * F)]))]),
                     insn("x" + name, "Exit", "SP", ins=[], outs=[]))
    return module([function("main", [
        tensor("xs", "ExternalInput", "float32", (4 * P, F), "DRAM"),
        tensor("t", "Internal", "float32", (P, F), "SB"),
        tensor("r", "Internal", "float32", (P, F), "SB"),
        tensor("ys", "ExternalOutput", "float32", (4 * P, F), "DRAM", addr_space="Shared"),
        {"Skind": "register", "name": "rk", "dtype": "int32"}], [
        block("b0",
              insn("rank", "GetGlobalRankId", "SP", ins=[], outs=[rk]),
              insn("br", "CompareAndBranch", "SP",
                   ins=[rk, {"kind": "imm_value", "dtype": "int32", "value": 0}],
                   comp_op="IS_EQIMM", on_true="r0", on_false="r1")),
        body("r0", insns0), body("r1", [dict(i, name=i["name"] + "1") for i in insns1])])])


def _send(peer, name="snd"):
    return insn(name, "CollectiveSend", "SP", ins=[whole("t", (P, F))], outs=[], peer_id=peer)


def _recv(peer, name="rcv"):
    return insn(name, "CollectiveRecv", "SP", ins=[], outs=[whole("r", (P, F))], peer_id=peer)


def test_send_recv_swap():
    """Rank 0 sends then receives, rank 1 receives then sends: the tiles swap."""
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    out, _ = _run(_two_ranks([_send(1), _recv(1)], [_recv(0), _send(0)]), 2, xs)
    ys = out["ys"].reshape(4, P, F)
    np.testing.assert_array_equal(ys[0], xs[P:2 * P])
    np.testing.assert_array_equal(ys[1], xs[:P])


def test_send_recv_in_the_same_order_deadlocks():
    """Both ranks send first: each Send waits for a Recv the peer never reaches."""
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    with pytest.raises(birsim.DeadlockError, match="waits for rank 1 to reach the matching "
                       "CollectiveRecv"):
        _run(_two_ranks([_send(1), _recv(1)], [_send(0), _recv(0)]), 2, xs)


def test_send_to_own_rank_is_an_error():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    with pytest.raises(birsim.SimulationError, match="peer_id 0 is this core's own rank"):
        _run(_two_ranks([_send(0)], [_recv(0)]), 2, xs)


def test_mismatched_kinds_are_an_error():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    with pytest.raises(birsim.SimulationError, match="does not match"):
        _run(_two_ranks([_cc("AllReduce")], [_cc("AllGather")]), 2, xs)


def test_collective_not_every_rank_reaches_is_a_deadlock_naming_ranks():
    """Rank 1 exits before the collective: ranks 0, 2 and 3 wait for it."""
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = module([function("main", [
        tensor("xs", "ExternalInput", "float32", (4 * P, F), "DRAM"),
        tensor("t", "Internal", "float32", (P, F), "SB"),
        tensor("r", "Internal", "float32", (P, F), "SB"),
        {"Skind": "register", "name": "rk", "dtype": "int32"}], [
        block("b0",
              insn("rank", "GetGlobalRankId", "SP", ins=[], outs=[{"kind": "register_access", "regref": "rk"}]),
              insn("br", "CompareAndBranch", "SP", ins=[{"kind": "register_access", "regref": "rk"},
                                                       {"kind": "imm_value", "dtype": "int32", "value": 1}],
                   comp_op="IS_EQIMM", on_true="quit", on_false="work")),
        block("quit", insn("x", "Exit", "SP", ins=[], outs=[])),
        block("work",
              insn("ld", "DMACopy", "SP", ins=[whole("xs", (P, F))], outs=[whole("t", (P, F))]),
              _cc("AllReduce"))])])
    sim = birsim.Simulator(prog, cores=4)
    with pytest.raises(birsim.DeadlockError) as e:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", birsim.BirsimWarning)
            sim.run({"xs": xs})
    msg = str(e.value)
    assert "cores 0,2-3" in msg and "CollectiveCompute" in msg
    assert "waits for ranks 1 (finished) to reach the matching CollectiveCompute" in msg


def test_nonexistent_rank_is_an_error_naming_it():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = _spmd([_cc("AllReduce", replica_groups=[[0, 1, 5]])])
    sim = birsim.Simulator(prog, cores=2)
    with pytest.raises(birsim.SimulationError, match=r"rank 5 does not exist \(the run has 2 "
                       r"cores: ranks 0..1\)") as e:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", birsim.BirsimWarning)
            sim.run({"xs": xs})
    assert e.value.instruction == "cc"


# ---- GPSIMDSB2SB -------------------------------------------------------------------------

def test_gpsimd_sb2sb_copies_into_the_partner_core():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    copy = insn("x", "GPSIMDSB2SB", "SP", ins=[whole("t", (P, F))], outs=[whole("r", (P, F))])
    # r is written by the partner; each core then stores what it received. Order: both
    # cores copy, then store -- a barrier via semaphores on the partner would be the real
    # program; with the in-order schedule core 0 runs to the end first, so store only on
    # core 1's program point after both copies: use a second block.
    prog = _spmd([copy])
    out, sim = _run(prog, 2, xs, schedule="in_order")
    # core 0 ran first: it copied its t into core 1's r, then stored its own r, which core
    # 1 had not written yet (never-written warning); core 1 then stored core 0's t.
    ys = out["ys"].reshape(4, P, F)
    np.testing.assert_array_equal(ys[1], xs[:P])
    np.testing.assert_array_equal(sim.read("r", core=0), xs[P:2 * P])


def test_gpsimd_sb2sb_needs_two_cores():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = _spmd([insn("x", "GPSIMDSB2SB", "SP", ins=[whole("t", (P, F))], outs=[whole("r", (P, F))])])
    with pytest.raises(birsim.SimulationError, match="needs exactly 2 cores"):
        _run(prog, 4, xs)


# ---- the MoE example ---------------------------------------------------------------------

def test_moe_dispatch_example_matches_numpy_under_any_schedule():
    """examples/moe_dispatch.py: top-1 indices -> IndirectLoad of token rows -> per-core
    matmul -> scatter-add -> all-reduce, on 2 cores, against the NumPy reference; the
    checked-in JSON is what the script builds."""
    import json
    import os
    import sys
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "examples")
    sys.path.insert(0, here)
    try:
        import moe_dispatch as moe
    finally:
        sys.path.remove(here)
    mod = moe.build()
    with open(os.path.join(here, "moe_dispatch.json")) as f:
        assert json.load(f) == json.loads(json.dumps(mod))
    inputs = moe.make_inputs(seed=3)
    want = moe.reference(inputs)
    for schedule, seed in (("in_order", 0), ("round_robin", 0), ("random", 5)):
        sim = birsim.Simulator(mod, cores=2, schedule=schedule, seed=seed)
        out = sim.run(inputs)
        assert sim.warnings == []
        np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(sim.read("y", core=1), out["y"])


# ---- permutes (NKI collective_permute, _implicit, _implicit_reduce) ----------------------

def _perm(kind, cores, op=None, two=False, **keys):
    """The SPMD program with a permute t -> r; with ``two`` the tile t holds 2P rows and
    the collective sends op(rows 0..P-1, rows P..2P-1)."""
    if two:
        ins = [ap("t", [[F, P], [1, F]]), ap("t", [[F, P], [1, F]], offset=P * F)]
        cc = insn("cc", "CollectiveCompute", "SP", ins=ins, outs=[whole("r", (P, F))],
                  kind=kind, op=op, **keys)
        return _spmd([cc], n_in=2)
    return _spmd([_cc(kind, op=op, **keys)])


def _filled(prog, value):
    """prog with r set to ``value`` before the collective (to see what is left alone)."""
    body = prog["functions"][0]["blocks"][0]["instructions"]
    body.insert(1, insn("fill", "Memset", "SP", ins=[], outs=[whole("r", (P, F))],
                        mode="Const", constant=float(value)))
    return prog


@pytest.mark.parametrize("pairs", [[[0, 1], [1, 2], [2, 3], [3, 0]],
                                   [[0, 3], [3, 0], [1, 2], [2, 1]],
                                   [[2, 0], [0, 1], [1, 2], [3, 3]]])
def test_permute_routes_by_src_target_pairs(pairs):
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    out, _ = _run(_perm("Permute", 4, src_target_pairs=pairs), 4, xs)
    parts, ys = xs.reshape(4, P, F), out["ys"].reshape(4, P, F)
    for s, t in pairs:
        np.testing.assert_array_equal(ys[t], parts[s])


def test_permute_rank_no_pair_targets_keeps_its_output():
    """Ranks 2 and 3 are named by no pair (NKI spelling source_target_pairs): each runs
    alone and its r keeps the fill."""
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = _filled(_perm("Permute", 4, source_target_pairs=[[0, 1], [1, 0]]), 7.0)
    out, _ = _run(prog, 4, xs)
    parts, ys = xs.reshape(4, P, F), out["ys"].reshape(4, P, F)
    np.testing.assert_array_equal(ys[0], parts[1])
    np.testing.assert_array_equal(ys[1], parts[0])
    np.testing.assert_array_equal(ys[2], np.full((P, F), 7.0, np.float32))
    np.testing.assert_array_equal(ys[3], np.full((P, F), 7.0, np.float32))


def test_permute_source_only_rank_keeps_its_output():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = _filled(_perm("Permute", 4, src_target_pairs=[[3, 0], [0, 1], [1, 2]]), -1.5)
    out, _ = _run(prog, 4, xs)
    parts, ys = xs.reshape(4, P, F), out["ys"].reshape(4, P, F)
    np.testing.assert_array_equal(ys[0], parts[3])
    np.testing.assert_array_equal(ys[1], parts[0])
    np.testing.assert_array_equal(ys[2], parts[1])
    np.testing.assert_array_equal(ys[3], np.full((P, F), -1.5, np.float32))


@pytest.mark.parametrize("cores,groups", [(2, None), (4, None), (4, [[0, 2], [1, 3]]),
                                          (4, [[3, 1, 0, 2]]), (3, [[0], [2, 1]])])
def test_permute_implicit_is_a_ring_over_the_replica_group(cores, groups):
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    keys = {} if groups is None else {"replica_groups": groups}
    out, _ = _run(_perm("PermuteImplicit", cores, **keys), cores, xs)
    parts, ys = xs.reshape(4, P, F), out["ys"].reshape(4, P, F)
    for g in (groups or [list(range(cores))]):
        for k, rank in enumerate(g):                   # member k receives from k - 1
            np.testing.assert_array_equal(ys[rank], parts[g[(k - 1) % len(g)]])


@pytest.mark.parametrize("op", ["add", "max", "min"])
@pytest.mark.parametrize("cores", [2, 4])
def test_permute_reduce_implicit_sends_op_of_two_inputs(op, cores):
    xs = RNG.standard_normal((4 * 2 * P, F)).astype(np.float32)
    out, _ = _run(_perm("PermuteReduceImplicit", cores, op=op, two=True), cores, xs)
    fold = {"add": np.add, "max": np.fmax, "min": np.fmin}[op]
    halves = xs.reshape(4, 2, P, F)
    sent = fold(halves[:, 0], halves[:, 1]).astype(np.float32)      # [rank, P, F]
    ys = out["ys"][:cores * P].reshape(cores, P, F)
    for r in range(cores):
        np.testing.assert_array_equal(ys[r], sent[(r - 1) % cores])


def test_permute_reduce_routes_op_by_pairs():
    xs = RNG.standard_normal((4 * 2 * P, F)).astype(np.float32)
    pairs = [[0, 2], [2, 0], [1, 3], [3, 1]]
    out, _ = _run(_perm("PermuteReduce", 4, op="max", two=True, src_target_pairs=pairs), 4, xs)
    halves = xs.reshape(4, 2, P, F)
    ys = out["ys"].reshape(4, P, F)
    for s, t in pairs:
        np.testing.assert_array_equal(ys[t], np.fmax(halves[s, 0], halves[s, 1]))


def test_permute_casts_through_fp32_when_dtypes_differ():
    xs = RNG.integers(-300, 300, (4 * P, F)).astype(np.int32)
    prog = _spmd([insn("cc", "CollectiveCompute", "SP", ins=[whole("t", (P, F), "int32")],
                       outs=[whole("r", (P, F), "bfloat16")], kind="PermuteImplicit")],
                 in_dtype="int32", out_dtype="bfloat16")
    out, _ = _run(prog, 2, xs)
    import ml_dtypes
    want = xs[:2 * P].reshape(2, P, F)[::-1].astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out["ys"][:2 * P].reshape(2, P, F).view(np.uint16),
                                  want.view(np.uint16))


def test_permute_in_place_reads_every_input_first():
    """outs[0] is the tile ins[0] reads: each rank's input is read before any is written."""
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    prog = _spmd([insn("cc", "CollectiveCompute", "SP", ins=[whole("t", (P, F))],
                       outs=[whole("t", (P, F))], kind="PermuteImplicit"),
                  insn("cp", "DMACopy", "SP", ins=[whole("t", (P, F))],
                       outs=[whole("r", (P, F))])])
    out, _ = _run(prog, 4, xs)
    parts = xs.reshape(4, P, F)
    np.testing.assert_array_equal(out["ys"].reshape(4, P, F), parts[[3, 0, 1, 2]])


def test_permute_without_pairs_is_a_program_error():
    with pytest.raises(birsim.ProgramError, match="needs 'src_target_pairs'"):
        birsim.load(_perm("Permute", 2))


@pytest.mark.parametrize("pairs,msg", [([[0, 1], [2, 1]], "rank 1 is already the target"),
                                       ([[0, 1], [0, 2]], "rank 0 is already the source"),
                                       ([[0, 1, 2]], r"is \[source, target\]"),
                                       ([[0, -1]], "must be >= 0")])
def test_permute_bad_pairs_are_program_errors_with_the_path(pairs, msg):
    with pytest.raises(birsim.ProgramError, match=msg) as e:
        birsim.load(_perm("Permute", 2, src_target_pairs=pairs))
    assert "src_target_pairs" in str(e.value)


def test_permute_to_a_rank_that_does_not_exist():
    xs = RNG.standard_normal((4 * P, F)).astype(np.float32)
    with pytest.raises(birsim.SimulationError, match="rank 5 does not exist") as e:
        _run(_perm("Permute", 2, src_target_pairs=[[0, 1], [1, 5]]), 2, xs)
    assert "CollectiveCompute" in str(e.value)


def test_permute_reduce_needs_a_second_input_and_a_reducing_op():
    xs = RNG.standard_normal((8 * P, F)).astype(np.float32)
    with pytest.raises(birsim.BirsimError, match="needs a second input ins"):
        _run(_perm("PermuteReduceImplicit", 2), 2, xs[:4 * P])
    with pytest.raises(birsim.BirsimError, match="op mult"):
        _run(_perm("PermuteReduceImplicit", 2, op="mult", two=True), 2, xs)


def test_cc_dim_other_than_free_is_rejected_naming_the_key():
    birsim.load(_spmd([_cc("AllGather", n_out=2, cc_dim="Free")], n_out=2))
    with pytest.raises(birsim.ProgramError, match="cc_dim"):
        birsim.load(_spmd([_cc("AllGather", n_out=2, cc_dim="Partition")], n_out=2))
