"""The gather family (csrc/vm/gather.c: IndirectLoad/Save/SaveAccumulate, the Generic forms,
DMACopy with a vector dynamic offset, Gather, IndirectCopy/LocalGather,
TensorCopyDynamicSrc/Dst) reports the bytes it actually reads and writes to the checkers:
an unsynchronised producer on another engine races with it, the synchronised twin is
silent and schedule-independent, its reads make earlier writes live, and rows it does not
touch are not reported.

Each program: inputs reach SBUF through rendezvous copies (ordered before everything)
except the one tensor 'prod' writes on another engine; the result leaves through a
rendezvous copy. References are NumPy fancy indexing written here.
"""

import os
import sys
import warnings

import numpy as np
import pytest

import birsim
from bir import ap, block, function, insn, module, sync_info, tensor, update, wait, whole

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(HERE, "..", "examples")
SCHEDULES = [("in_order", 0), ("round_robin", 0), ("random", 1), ("random", 7)]

R, W, N = 12, 6, 5            # table rows, row width, indices (row ops)
P, F, J = 32, 10, 4           # partitions, elements per partition, indices (Gather)
K = 3                         # TensorCopyDynamic offsets
E, S = 2, 5                   # IndirectCopy: elements per index, index positions


def _rows_case(opcode, rng, **keys):
    """Row gather: out[N, W] := tab[idx]."""
    idx = rng.permutation(R)[:N].astype(np.int32).reshape(N, 1)
    tab = rng.standard_normal((R, W)).astype(np.float32)
    return dict(op=opcode, engine="SP", keys=keys,
                ins=[("tab", "float32", (R, W)), ("idx", "int32", (N, 1))], out=("out", (N, W)),
                data={"tab": tab, "idx": idx, "out": np.zeros((N, W), np.float32)},
                ref=tab[idx[:, 0]], table="tab")


def _scatter_case(opcode, rng, acc, **keys):
    """Row scatter: tab[idx] := src (or += src), tab prefilled."""
    idx = rng.permutation(R)[:N].astype(np.int32).reshape(N, 1)
    src = rng.standard_normal((N, W)).astype(np.float32)
    pre = rng.standard_normal((R, W)).astype(np.float32)
    ref = pre.copy()
    for i, v in enumerate(idx[:, 0]):
        ref[v] = (ref[v] + src[i]).astype(np.float32) if acc else src[i]
    return dict(op=opcode, engine="SP", keys=keys,
                ins=[("src", "float32", (N, W)), ("idx", "int32", (N, 1))], out=("out", (R, W)),
                data={"src": src, "idx": idx, "out": pre}, ref=ref, table="out")


def _ngather_case(rng):
    d = rng.standard_normal((P, F)).astype(np.float32)
    ix = rng.integers(0, F, (P, J)).astype(np.uint32)
    return dict(op="Gather", engine="Pool", keys={},
                ins=[("d", "float32", (P, F)), ("ix", "uint32", (P, J))], out=("out", (P, J)),
                data={"d": d, "ix": ix, "out": np.zeros((P, J), np.float32)},
                ref=np.take_along_axis(d, ix.astype(np.int64), axis=1), table="d")


def _local_case(op, rng):
    """local_gather: each 16-partition group takes E elements at each of its S indices."""
    d = rng.standard_normal((P, F)).astype(np.float32)
    ix = rng.integers(0, F - E + 1, (P, 1)).astype(np.uint16)
    nvalid = S
    ref = np.empty((P, nvalid * E), np.float32)
    for g in range(P // 16):
        sl = slice(16 * g, 16 * g + 16)
        pos = ix[sl].flatten(order="F")[:nvalid].astype(np.int64)
        ref[sl] = d[sl][:, (pos[:, None] + np.arange(E)).ravel()]
    return dict(op=op, engine="Pool", keys={"num_valid_indices": nvalid},
                ins=[("d", "float32", (P, F)), ("ix", "uint16", (P, 1))],
                out=("out", (P, nvalid * E)),
                data={"d": d, "ix": ix, "out": np.zeros((P, nvalid * E), np.float32)},
                ref=ref, table="d")


def _dyn_case(op, rng):
    """TensorCopyDynamicSrc: out[:, k] := s[:, off[k]]; Dst: out[:, off[k]] := s[:, k]."""
    off = rng.permutation(F)[:K].astype(np.int32).reshape(1, K)
    if op.endswith("Src"):
        s = rng.standard_normal((P, F)).astype(np.float32)
        return dict(op=op, engine="DVE", keys={}, window="s",
                    ins=[("s", "float32", (P, F)), ("off", "int32", (1, K))], out=("out", (P, K)),
                    data={"s": s, "off": off, "out": np.zeros((P, K), np.float32)},
                    ref=s[:, off[0]], table="s")
    s = rng.standard_normal((P, K)).astype(np.float32)
    pre = rng.standard_normal((P, F)).astype(np.float32)
    ref = pre.copy()
    ref[:, off[0]] = s
    return dict(op=op, engine="DVE", keys={}, window="out",
                ins=[("s", "float32", (P, K)), ("off", "int32", (1, K))], out=("out", (P, F)),
                data={"s": s, "off": off, "out": pre}, ref=ref, table="out")


def make_case(op, seed=0):
    rng = np.random.default_rng(seed)
    if op in ("IndirectLoad", "DMACopy"):
        return _rows_case(op, rng)
    if op == "GenericIndirectLoad":
        return _rows_case(op, rng, indirect_dims=["Y"])
    if op == "IndirectSave":
        return _scatter_case(op, rng, acc=False)
    if op == "IndirectSaveAccumulate":
        return _scatter_case(op, rng, acc=True, op="add")
    if op == "GenericIndirectSave":
        return _scatter_case(op, rng, acc=True, indirect_dims=["Y"], op="add")
    if op == "Gather":
        return _ngather_case(rng)
    if op in ("IndirectCopy", "LocalGather"):
        return _local_case(op, rng)
    return _dyn_case(op, rng)


OPS = ["IndirectLoad", "DMACopy", "GenericIndirectLoad", "IndirectSave",
       "IndirectSaveAccumulate", "GenericIndirectSave", "Gather", "IndirectCopy", "LocalGather",
       "TensorCopyDynamicSrc", "TensorCopyDynamicDst"]


def _operand(case, name, dtype, shape):
    if case.get("window") == name:            # the shifted one-column window
        return ap(name, [[shape[1], shape[0]], [1, 1]])
    return whole(name, shape, dtype)


def build(case, produced, synced, prod_rows=None):
    """The program; 'prod' (Activation) writes `produced` (rows prod_rows of it, default all)
    from its input, the others arrive by rendezvous copies. synced: prod -> g by semaphore 0."""
    tensors, body, late = [], [], None
    onm, oshape = case["out"]
    specs = case["ins"] + [(onm, "float32", oshape)]
    for name, dt, shape in specs:
        tensors += [tensor(name + "_in", "ExternalInput", dt, shape, "DRAM"),
                    tensor(name, "Internal", dt, shape, "SB")]
        cp = insn("ld_" + name, "DMACopy", None, ins=[whole(name + "_in", shape, dt)],
                  outs=[whole(name, shape, dt)])
        if name != produced:
            body.append(cp)
            continue
        rows = prod_rows or (0, shape[0])
        sub = [[shape[1], rows[1] - rows[0]], [1, shape[1]]]
        late = insn("prod", "DMACopy", "Activation",
                    ins=[ap(name + "_in", sub, dt, offset=rows[0] * shape[1])],
                    outs=[ap(name, sub, dt, offset=rows[0] * shape[1])],
                    sync=sync_info([], [update(0, "sem-inc", 1)]) if synced else None)
        if prod_rows is not None and rows != (0, shape[0]):
            body.append(cp)                  # the rest written first, in order
    tensors.append(tensor("y", "ExternalOutput", "float32", oshape, "DRAM"))
    body.append(late)
    body.append(insn("g", case["op"], case["engine"],
                     ins=[_operand(case, n, dt, sh) for n, dt, sh in case["ins"]],
                     outs=[_operand(case, onm, "float32", oshape)],
                     sync=sync_info([wait(0, "sem-ge-imm", 1)], [update(0, "sem-dec", 1)])
                     if synced else None, **case["keys"]))
    body.append(insn("o", "DMACopy", None, ins=[whole(onm, oshape)], outs=[whole("y", oshape)]))
    return module([function("main", tensors, [block("b0", *body)])])


def inputs(case, **over):
    data = dict(case["data"], **over)
    return {k + "_in": v for k, v in data.items()}


def run(prog, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim = birsim.Simulator(prog, **kw)
        out = sim.run(data)
    return sim, out


def races(sim):
    return {(f.details["access"], f.details["first"]["instruction"],
             f.details["second"]["instruction"], f.details["tensor"])
            for f in sim.findings if f.kind == "races"}


def _targets():
    for op in OPS:
        case = make_case(op)
        yield op, case["ins"][0][0]                  # the data / dense side
        yield op, case["ins"][1][0]                  # the indices / offsets
        if case["table"] == case["out"][0]:
            yield op, case["out"][0]                 # a scatter's table


# ---- (a) unsynchronised producer: a race naming both instructions ----------------------

@pytest.mark.parametrize("op,target", list(_targets()))
def test_unsynchronised_producer_races_with_the_gather(op, target):
    case = make_case(op)
    sim, _ = run(build(case, target, synced=False), inputs(case), checks="races")
    found = races(sim)
    assert found, f"no race between prod and g on {target!r}"
    assert all(f[1:] == ("prod", "g", target) for f in found), found
    writes = target == case["out"][0]
    # prod (program order first, in_order) writes; g then reads it or writes it again.
    assert {f[0] for f in found} <= ({"WAW", "RAW"} if writes else {"RAW"})
    f = next(f for f in sim.findings if f.kind == "races")
    for word in ("'prod'", "'g'", f"'{target}'", case["op"]):
        assert word in f.message


# ---- (b) the synchronised twin: silent, right, schedule-independent --------------------

@pytest.mark.parametrize("op,target", list(_targets()))
def test_synchronised_twin_is_silent_and_bit_identical(op, target):
    case = make_case(op, seed=3)
    outs = []
    for schedule, seed in SCHEDULES:
        sim, out = run(build(case, target, synced=True), inputs(case), checks="all",
                       schedule=schedule, seed=seed)
        assert [f.message for f in sim.findings] == []
        outs.append(out["y"])
    np.testing.assert_array_equal(outs[0], case["ref"])
    for o in outs[1:]:
        assert o.tobytes() == outs[0].tobytes()


# ---- (c) the MoE example: what IndirectLoad reads is not a dead write -------------------

def test_moe_dispatch_example_has_no_dead_write_under_all_checks():
    sys.path.insert(0, EXAMPLES)
    try:
        import moe_dispatch as moe
    finally:
        sys.path.remove(EXAMPLES)
    data = moe.make_inputs(seed=3)
    sim, out = run(os.path.join(EXAMPLES, "moe_dispatch.json"), data, cores=2, checks="all")
    assert [f.message for f in sim.findings if f.kind == "dead_writes"] == []
    assert sim.findings == []
    np.testing.assert_allclose(out["y"], moe.reference(data), rtol=1e-5, atol=1e-5)


def test_a_table_only_a_gather_reads_is_not_a_dead_write():
    """prod writes tab and only the IndirectLoad reads it: prod's write is live."""
    case = make_case("IndirectLoad")
    idx = np.arange(R, dtype=np.int32).reshape(R, 1)
    full = dict(case, ins=[("tab", "float32", (R, W)), ("idx", "int32", (R, 1))],
                out=("out", (R, W)))
    data = dict(case["data"], idx=idx, out=np.zeros((R, W), np.float32))
    sim, out = run(build(full, "tab", synced=True), {k + "_in": v for k, v in data.items()},
                   checks="dead_writes")
    assert sim.findings == []
    np.testing.assert_array_equal(out["y"], case["data"]["tab"])


# ---- (d) reading never-written memory ---------------------------------------------------

def partial(case, target, rows):
    """The synchronised program where only rows `rows` of `target` are ever written."""
    prog = build(case, target, synced=True, prod_rows=rows)
    b = prog["functions"][0]["blocks"][0]
    b["instructions"] = [i for i in b["instructions"] if i["name"] != "ld_" + target]
    return prog


def uninit(sim):
    return [f for f in sim.findings if f.kind == "uninitialized"]


def _half_table(op):
    """tab rows [0, R/2) written by prod; rows [R/2, R) never."""
    case = make_case(op)
    return case, partial(case, "tab", (0, R // 2))


@pytest.mark.parametrize("op", ["IndirectLoad", "DMACopy", "GenericIndirectLoad"])
def test_gather_of_never_written_rows_is_an_uninitialized_finding(op):
    case, prog = _half_table(op)
    bad = np.array([[0], [R // 2 + 1], [1], [2], [3]], np.int32)
    sim, _ = run(prog, inputs(case, idx=bad), checks="uninitialized")
    (f,) = [f for f in sim.findings if f.kind == "uninitialized"]
    assert "'g'" in f.message and "'tab'" in f.message
    good = np.array([[0], [R // 2 - 1], [1], [2], [3]], np.int32)
    sim, out = run(prog, inputs(case, idx=good), checks="uninitialized")
    assert sim.findings == []
    np.testing.assert_array_equal(out["y"], case["data"]["tab"][good[:, 0]])


# ---- (e) rows not touched are not reported ----------------------------------------------

@pytest.mark.parametrize("op", ["IndirectLoad", "DMACopy", "GenericIndirectLoad"])
def test_rows_the_gather_does_not_touch_do_not_race(op):
    """prod (unsynchronised) writes tab rows [R/2, R) late; the gather reads only rows below
    R/2: no race. One index at R/2 or above: the race."""
    case = make_case(op)
    prog = build(case, "tab", synced=False, prod_rows=(R // 2, R))
    low = np.array([[0], [5], [1], [2], [3]], np.int32)
    sim, out = run(prog, inputs(case, idx=low), checks="races")
    assert races(sim) == set()
    np.testing.assert_array_equal(out["y"], case["data"]["tab"][low[:, 0]])
    high = np.array([[0], [5], [1], [R - 1], [3]], np.int32)
    sim, _ = run(prog, inputs(case, idx=high), checks="races")
    assert races(sim) == {("RAW", "prod", "g", "tab")}


@pytest.mark.parametrize("op", ["IndirectSave", "IndirectSaveAccumulate"])
def test_scatter_rows_not_written_do_not_race(op):
    """prod (unsynchronised) writes table rows [R/2, R); the scatter writes rows below R/2
    only: no race; one row at R/2 or above: the race."""
    case = make_case(op)
    prog = build(case, "out", synced=False, prod_rows=(R // 2, R))
    low = np.array([[0], [5], [1], [2], [3]], np.int32)
    sim, _ = run(prog, inputs(case, idx=low), checks="races")
    assert races(sim) == set()
    high = np.array([[0], [5], [1], [R - 2], [3]], np.int32)
    sim, _ = run(prog, inputs(case, idx=high), checks="races")
    assert {r[1:] for r in races(sim)} == {("prod", "g", "out")}


def test_gather_partitions_with_no_index_do_not_race():
    """Gather: partitions whose indices are all -1 (skipped) read nothing there."""
    case = make_case("Gather")
    prog = build(case, "d", synced=False, prod_rows=(P // 2, P))
    ix = case["data"]["ix"].copy()
    ix[P // 2:] = np.uint32(0xFFFFFFFF)
    sim, out = run(prog, inputs(case, ix=ix), checks="races")
    assert races(sim) == set()
    ref = np.take_along_axis(case["data"]["d"][:P // 2], ix[:P // 2].astype(np.int64), axis=1)
    np.testing.assert_array_equal(out["y"][:P // 2], ref)
    ix[P - 1, 2] = 1
    sim, _ = run(prog, inputs(case, ix=ix), checks="races")
    assert races(sim) == {("RAW", "prod", "g", "d")}


@pytest.mark.parametrize("op", ["Gather", "IndirectCopy"])
def test_gather_reads_of_written_partitions_only_are_not_uninitialized(op):
    """Data partitions [P/2, P) never written: indices only in partitions below P/2 (the
    others all -1, or for local_gather, identical within a group) read nothing unwritten."""
    case = make_case(op)
    prog = partial(case, "d", (0, P // 2))
    ix = case["data"]["ix"].copy()
    if op == "Gather":
        ix[P // 2:] = np.uint32(0xFFFFFFFF)
    else:
        ix[P // 2:] = np.uint16(0xFFFF)                  # the second group skips all
    sim, out = run(prog, inputs(case, ix=ix), checks="uninitialized")
    assert uninit(sim) == []
    np.testing.assert_array_equal(out["y"][:P // 2], case["ref"][:P // 2])
    ix[P // 2] = 1                                   # the first position of group 2
    sim, _ = run(prog, inputs(case, ix=ix), checks="uninitialized")
    (f,) = uninit(sim)
    assert "'g'" in f.message and "'d'" in f.message


def test_scatter_of_unwritten_skipped_rows_is_not_uninitialized():
    """IndirectSave: src rows [3, N) never written but their indices are -1 (skipped)."""
    case = make_case("IndirectSave")
    prog = partial(case, "src", (0, 3))
    idx = case["data"]["idx"].copy()
    idx[3:] = -1
    sim, out = run(prog, inputs(case, idx=idx), checks="uninitialized")
    assert uninit(sim) == []
    ref = case["data"]["out"].copy()
    ref[idx[:3, 0]] = case["data"]["src"][:3]
    np.testing.assert_array_equal(out["y"], ref)
    idx[4] = R - 1
    sim, _ = run(prog, inputs(case, idx=idx), checks="uninitialized")
    (f,) = uninit(sim)
    assert "'g'" in f.message and "'src'" in f.message


def test_tensor_copy_dynamic_dst_reading_never_written_source_is_uninitialized():
    case = make_case("TensorCopyDynamicDst")
    prog = partial(case, "s", (0, P // 2))
    sim, _ = run(prog, inputs(case), checks="uninitialized")
    (f,) = uninit(sim)
    assert "'g'" in f.message and "'s'" in f.message and "ins[0]" in f.message


def test_tensor_copy_dynamic_src_into_never_written_output_is_not_uninitialized():
    """The output is written, not read: nothing to report (its source is all written)."""
    case = make_case("TensorCopyDynamicSrc")
    prog = partial(case, "out", (0, 0))
    b = prog["functions"][0]["blocks"][0]
    b["instructions"] = [i for i in b["instructions"] if i["name"] != "prod"]
    for i in b["instructions"]:
        i.pop("sync_info", None)
    sim, out = run(prog, inputs(case), checks="uninitialized")
    assert uninit(sim) == []
    np.testing.assert_array_equal(out["y"], case["ref"])


def test_strict_never_written_gather_fails_before_writing_anything():
    """strict=True: the never-written element is found before any element moves, so the
    output keeps its prefill."""
    case = make_case("Gather")
    prog = partial(case, "d", (0, P // 2))
    ix = case["data"]["ix"].copy()
    ix[P // 2:] = np.uint32(0xFFFFFFFF)
    ix[P - 1, J - 1] = 0                                  # the last element gathered
    sim = birsim.Simulator(prog, strict=True)
    with pytest.raises(birsim.BirsimError, match="never-written") as e:
        sim.run(inputs(case, ix=ix))
    assert e.value.instruction == "g"
    np.testing.assert_array_equal(sim.read("out"), case["data"]["out"])


# ---- (f) accumulating into never-written rows, NaN/Inf births, capacity -----------------

@pytest.mark.parametrize("op", ["IndirectSaveAccumulate", "GenericIndirectSave"])
def test_scatter_accumulating_into_never_written_rows_is_uninitialized(op):
    """The table's rows [R/2, R) are never written: accumulating into one of them reads
    garbage on hardware (a finding naming the table); rows below R/2 only: silent."""
    case = make_case(op)
    prog = partial(case, "out", (0, R // 2))
    low = np.array([[0], [5], [1], [2], [3]], np.int32)
    by_g = lambda sim: [f for f in uninit(sim) if f.details["first"]["instruction"] == "g"]
    sim, out = run(prog, inputs(case, idx=low), checks="uninitialized")
    assert by_g(sim) == []                       # (the final copy 'o' reads rows nobody wrote)
    ref = case["data"]["out"].copy()
    ref[low[:, 0]] += case["data"]["src"]
    np.testing.assert_array_equal(out["y"][:R // 2], ref[:R // 2])
    high = np.array([[0], [5], [1], [R - 1], [3]], np.int32)
    sim, _ = run(prog, inputs(case, idx=high), checks="uninitialized")
    (f,) = by_g(sim)
    assert f.details["sub"] == "uninit_accumulate"
    assert "instruction 'g'" in f.message
    assert "accumulates into bytes of 'out' that nothing wrote" in f.message


@pytest.mark.parametrize("op", ["IndirectSaveAccumulate", "GenericIndirectSave"])
def test_scatter_accumulate_overflowing_to_inf_is_a_birth(op):
    """Two finite fp32 values whose sum overflows: an Inf born in the table (its row index
    in the finding); the same scatter on a table already holding an Inf inherits it."""
    case = make_case(op)
    prog = build(case, "out", synced=True)
    big = np.float32(3e38)
    pre = case["data"]["out"].copy()
    src = case["data"]["src"].copy()
    idx = case["data"]["idx"]
    pre[idx[2, 0]] = big
    src[2] = big
    sim, out = run(prog, inputs(case, out=pre, src=src), checks="nan")
    (f,) = [f for f in sim.findings if f.kind == "nan"]
    assert f.details["sub"] == "inf" and "'g'" in f.message and "'out'" in f.message
    assert np.isinf(out["y"][idx[2, 0]]).all()
    pre[idx[0, 0], 0] = np.inf                   # an input Inf: nothing is born
    src[2] = 1.0
    sim, _ = run(prog, inputs(case, out=pre, src=src), checks="nan")
    assert [f for f in sim.findings if f.kind == "nan"] == []


def test_scatter_of_finite_rows_has_no_birth():
    case = make_case("IndirectSaveAccumulate")
    sim, out = run(build(case, "out", synced=True), inputs(case), checks="all")
    assert sim.findings == []
    np.testing.assert_array_equal(out["y"], case["ref"])


@pytest.mark.parametrize("op", ["Gather", "IndirectCopy", "TensorCopyDynamicSrc"])
def test_gather_on_a_compute_engine_obeys_the_start_partition_rule(op):
    """A 32-partition operand of a Pool/DVE gather must start at partition 0, 32, 64 or 96:
    placed at 16 it is a capacity finding naming the gather; at 32 it is silent."""
    case = make_case(op)
    name = case["ins"][0][0]

    def placed(base):
        prog = build(case, name, synced=True)
        shape = next(sh for n, _, sh in case["ins"] if n == name)
        moved = tensor(name, "Internal", "float32", shape, "SB", base=base, addr=0)
        ts = prog["functions"][0]["allocations"] if "allocations" in prog["functions"][0] \
            else prog["functions"][0]["tensors"]
        for i, t in enumerate(ts):
            if t["name"] == name:
                ts[i] = moved
        return prog

    sim, out = run(placed(16), inputs(case), checks="capacity")
    subs = [(f.details["sub"], f.details["first"]["instruction"]) for f in sim.findings]
    assert ("start_partition", "g") in subs
    np.testing.assert_array_equal(out["y"], case["ref"])
    sim, out = run(placed(32), inputs(case), checks="capacity")
    assert sim.findings == []
    np.testing.assert_array_equal(out["y"], case["ref"])
