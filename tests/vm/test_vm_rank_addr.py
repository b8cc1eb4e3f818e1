"""Registers from the machine's layout: ReadVarAddr (the byte address of a variable in
birsim's memory model) and GetCurProcessingRankID (the rank whose data a ring step of
NKI's collective_permute_implicit holds). Expected values are computed here from the
arch's memory sizes (docs/spec/machine-model.md §3.2) and the replica groups, independently of
birsim's code; bad input is a clear error naming the instruction."""

import warnings

import numpy as np
import pytest

import birsim
from bir import (affine, ap, block, function, insn, iv, loop, module, reg, reg_ap, register,
                 shard, tensor, whole)

#: bytes per partition of SBUF and PSUM by arch (docs/spec/machine-model.md §3.2)
SBUF_BPP = {"inferentia": 96 * 1024, "sunda": 192 * 1024, "gen3": 224 * 1024,
            "core_v4": 256 * 1024}
PSUM_BPP = {"inferentia": 8 * 1024, "sunda": 16 * 1024, "gen3": 16 * 1024,
            "core_v4": 16 * 1024}


def _quiet_run(prog, inputs=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        sim = birsim.Simulator(prog, **kw)
        sim.run(inputs or {})
    return sim


# ---- ReadVarAddr -----------------------------------------------------------------------

def _addr_prog(var, operand, arch="gen3", reg_dtype=None, pre=()):
    return module([function("main", [var, register("r", reg_dtype), register("k")], [
        block("b0", *pre, insn("rva", "ReadVarAddr", "SP", ins=[operand], outs=[reg("r")]))])],
        arch=arch)


def _addr(prog):
    return _quiet_run(prog).register("r")


def _sb_addr(arch, base, addr, bpp_loc, isz, offset, mem="SB"):
    """Where element `offset` of a location at (base, addr) sits: partition-major bytes."""
    byte = offset * isz
    pitch = (SBUF_BPP if mem == "SB" else PSUM_BPP)[arch]
    return (base + byte // bpp_loc) * pitch + addr + byte % bpp_loc


@pytest.mark.parametrize("arch", ["sunda", "gen3", "core_v4"])
@pytest.mark.parametrize("base,addr,offset", [(0, 0, 0), (32, 1024, 205), (64, 4096, 399),
                                             (3, 8, 1)])
def test_read_var_addr_sbuf(arch, base, addr, offset):
    var = tensor("a", "Internal", "float32", (64, 100), "SB", base=base, addr=addr)
    prog = _addr_prog(var, ap("a", [[100, 2], [1, 10]], offset=offset), arch)
    assert _addr(prog) == _sb_addr(arch, base, addr, 400, 4, offset)


@pytest.mark.parametrize("dtype,isz", [("bfloat16", 2), ("int8", 1), ("int64", 8)])
def test_read_var_addr_counts_offsets_in_the_operands_elements(dtype, isz):
    var = tensor("a", "Internal", dtype, (16, 64), "SB", base=16, addr=512)
    prog = _addr_prog(var, ap("a", [[64, 1], [1, 8]], dtype, offset=70))
    assert _addr(prog) == _sb_addr("gen3", 16, 512, 64 * isz, isz, 70)


def test_read_var_addr_psum():
    var = tensor("p", "Internal", "float32", (128, 512), "PSUM", base=0, addr=6144)
    prog = _addr_prog(var, ap("p", [[512, 1], [1, 512]], offset=512 * 5 + 7), "sunda")
    assert _addr(prog) == _sb_addr("sunda", 0, 6144, 2048, 4, 512 * 5 + 7, "PSUM")


def test_read_var_addr_internal_dram_is_its_arena_address():
    var = tensor("d", "Internal", "float32", (4, 256), "DRAM", addr=65536)
    prog = _addr_prog(var, ap("d", [[256, 1], [1, 16]], offset=300))
    assert _addr(prog) == 65536 + 300 * 4


def test_read_var_addr_follows_a_register_start_and_a_loop_index():
    var = tensor("a", "Internal", "float32", (8, 64), "SB", base=8, addr=256)
    mv = insn("mv", "RegisterMove", "SP", ins=[{"kind": "imm_value", "dtype": "int32", "value": 70}],
              outs=[reg("k")])
    prog = _addr_prog(var, reg_ap("a", [[64, 1], [1, 4]], "k", const=3), pre=[mv])
    assert _addr(prog) == _sb_addr("gen3", 8, 256, 256, 4, 73)
    body = [insn("rva", "ReadVarAddr", "SP", ins=[ap("a", [[64, 1], [1, 4]],
                                                       offset=affine([(iv("i"), 64)], 1))],
                 outs=[reg("r")])]
    prog = module([function("main", [var, register("r")], [
        block("b0", loop("l", "i", 0, 6, 1, body, engine="SP"))])])
    assert _addr(prog) == _sb_addr("gen3", 8, 256, 256, 4, 5 * 64 + 1)   # the last trip's


def test_read_var_addr_of_an_unplaced_location_is_an_error_naming_it():
    for var in (tensor("a", "Internal", "float32", (8, 64), "SB"),
                tensor("a", "ExternalInput", "float32", (8, 64), "DRAM")):
        prog = _addr_prog(var, whole("a", (8, 64)))
        with pytest.raises(birsim.SimulationError, match="location 'a' .* has no address") as e:
            _quiet_run(prog, {"a": np.zeros((8, 64), np.float32)} if var["kind"] != "Internal"
                       else None)
        assert "'rva' (ReadVarAddr)" in str(e.value)


def test_read_var_addr_that_does_not_fit_the_register_is_an_error():
    var = tensor("a", "Internal", "float32", (16, 64), "SB", base=100, addr=0)
    prog = _addr_prog(var, whole("a", (16, 64)), reg_dtype="float32")
    with pytest.raises(birsim.SimulationError, match="does not fit register 'r' .float32.") as e:
        _addr(prog)
    assert "ReadVarAddr" in str(e.value)
    assert _addr(_addr_prog(var, whole("a", (16, 64)), reg_dtype="int64")) == 100 * SBUF_BPP["gen3"]


def test_read_var_addr_needs_an_ap_and_a_register():
    var = tensor("a", "Internal", "float32", (8, 64), "SB", base=0, addr=0)
    bad_out = module([function("main", [var, register("r")], [block("b0", insn(
        "rva", "ReadVarAddr", "SP", ins=[whole("a", (8, 64))], outs=[whole("a", (8, 64))]))])])
    with pytest.raises(birsim.BirsimError, match="needs a register output outs"):
        _quiet_run(bad_out)
    bad_in = module([function("main", [var, register("r")], [block("b0", insn(
        "rva", "ReadVarAddr", "SP", ins=[reg("r")], outs=[reg("r")]))])])
    with pytest.raises(birsim.BirsimError, match="needs an access pattern ins"):
        _quiet_run(bad_in)


def test_read_var_addr_outside_the_location_is_a_memory_error():
    var = tensor("a", "Internal", "float32", (8, 64), "SB", base=0, addr=0)
    prog = _addr_prog(var, ap("a", [[64, 8], [1, 64]], offset=1))
    with pytest.raises(birsim.MemoryAccessError):
        _addr(prog)


# ---- GetCurProcessingRankID --------------------------------------------------------------

K = 5        # ring steps read per core


def _ranks_prog(cores, groups=None, loop_form=False, **keys):
    """Every core reads the rank of ring steps 0..K-1 into ranks[rank, step]."""
    extra = {} if groups is None else {"replica_groups": groups}

    def step(k_expr, off_expr, tag):
        return [insn("cur" + tag, "GetCurProcessingRankID", "SP", ins=[], outs=[reg("r")],
                     iter_id=k_expr, channel_id=0, **extra, **keys),
                insn("sv" + tag, "TensorSave", "SP", ins=[reg("r")],
                     outs=[ap("ranks", [[1, 1], [1, 1]], "int32", offset=off_expr)])]
    if loop_form:
        body = [loop("l", "i", 0, K, 1, step(affine([(iv("i"), 1)]),
                                              affine([(shard(), K), (iv("i"), 1)]), ""),
                     engine="SP")]
    else:
        body = sum((step(k, affine([(shard(), K)], k), str(k)) for k in range(K)), [])
    return module([function("main", [
        tensor("ranks", "ExternalOutput", "int32", (cores, K), "DRAM", addr_space="Shared"),
        register("r")], [block("b0", *body)])])


def _want(cores, groups):
    groups = groups or [list(range(cores))]
    want = np.zeros((cores, K), np.int32)
    for g in groups:
        for pos, rank in enumerate(g):
            for k in range(K):
                want[rank, k] = g[(pos - k) % len(g)]     # k steps back around the ring
    return want


def _ranks(prog, cores):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        return birsim.Simulator(prog, cores=cores).run({})["ranks"]


@pytest.mark.parametrize("cores,groups", [(1, None), (2, None), (4, None), (4, [[0, 2], [1, 3]]),
                                          (4, [[3, 0, 2, 1]]), (3, [[2], [1, 0]])])
@pytest.mark.parametrize("loop_form", [False, True])
def test_cur_processing_rank_walks_the_ring_backwards(cores, groups, loop_form):
    out = _ranks(_ranks_prog(cores, groups, loop_form), cores)
    np.testing.assert_array_equal(out, _want(cores, groups))


def test_cur_processing_rank_names_whose_data_permute_implicit_delivered():
    """After one PermuteImplicit step a core holds the data of rank cur(1)."""
    P, F, cores, groups = 2, 4, 4, [[1, 3, 0, 2]]
    prog = module([function("main", [
        tensor("mine", "Internal", "int32", (P, F), "SB"),
        tensor("got", "Internal", "int32", (P, F), "SB"),
        tensor("held", "ExternalOutput", "int32", (cores, 2), "DRAM", addr_space="Shared"),
        register("r"), register("who")], [block("b0",
            insn("rk", "GetGlobalRankId", "SP", outs=[reg("r")]),
            insn("fill", "Iota", "SP", outs=[whole("mine", (P, F), "int32")],
                 base=affine([(shard(), 1)]), pattern=[[0, F]]),
            insn("cc", "CollectiveCompute", "SP", ins=[whole("mine", (P, F), "int32")],
                 outs=[whole("got", (P, F), "int32")], kind="PermuteImplicit",
                 replica_groups=groups),
            insn("cur", "GetCurProcessingRankID", "SP", outs=[reg("who")], iter_id=1,
                 channel_id=0, replica_groups=groups),
            insn("sv0", "DMACopy", "SP", ins=[ap("got", [[F, 1], [1, 1]], "int32")],
                 outs=[ap("held", [[2, 1], [1, 1]], "int32", offset=affine([(shard(), 2)]))]),
            insn("sv1", "TensorSave", "SP", ins=[reg("who")],
                 outs=[ap("held", [[2, 1], [1, 1]], "int32", offset=affine([(shard(), 2)], 1))]))])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", birsim.BirsimWarning)
        held = birsim.Simulator(prog, cores=cores).run({})["held"]
    np.testing.assert_array_equal(held[:, 0], held[:, 1])
    np.testing.assert_array_equal(held[:, 1], _want(cores, groups)[:, 1])


def test_cur_processing_rank_warns_when_the_ring_order_matters():
    with warnings.catch_warnings():
        warnings.simplefilter("error", birsim.BirsimWarning)
        birsim.load(module([function("main", [register("r")], [block("b0", insn(
            "cur", "GetCurProcessingRankID", "SP", outs=[reg("r")], iter_id=0,
            channel_id=0))])]))                        # iteration 0 is pinned: no warning
    with pytest.warns(birsim.BirsimWarning, match="ring step other than 0"):
        birsim.load(_ranks_prog(2))
    with pytest.warns(birsim.BirsimWarning, match="ring step other than 0"):
        birsim.load(_ranks_prog(2, loop_form=True))
    with pytest.warns(birsim.BirsimWarning, match="channel_id"):
        birsim.load(module([function("main", [register("r")], [block("b0", insn(
            "cur", "GetCurProcessingRankID", "SP", outs=[reg("r")], iter_id=0, channel_id=1))])]))


def test_cur_processing_rank_reads_the_same_ring_on_every_channel():
    prog = _ranks_prog(4)
    for ins in prog["functions"][0]["blocks"][0]["instructions"]:
        if ins["opcode"] == "GetCurProcessingRankID":
            ins["channel_id"] = 1
    np.testing.assert_array_equal(_ranks(prog, 4), _want(4, None))


@pytest.mark.parametrize("groups,cores,msg", [([[0]], 2, "replica_groups do not hold rank 1"),
                                              ([[0, 5]], 2, "rank 5 does not exist")])
def test_cur_processing_rank_bad_groups_are_errors_naming_the_instruction(groups, cores, msg):
    with pytest.raises(birsim.BirsimError, match=msg) as e:
        _ranks(_ranks_prog(cores, groups), cores)
    assert "GetCurProcessingRankID" in str(e.value)


def test_cur_processing_rank_needs_a_register_and_a_non_negative_step():
    t = tensor("t", "Internal", "int32", (1, 1), "SB")
    prog = module([function("main", [t, register("r")], [block("b0", insn(
        "cur", "GetCurProcessingRankID", "SP", outs=[whole("t", (1, 1), "int32")], iter_id=0,
        channel_id=0))])])
    with pytest.raises(birsim.BirsimError, match="needs a register output outs"):
        _quiet_run(prog)
    prog = module([function("main", [register("r")], [block("b0", insn(
        "cur", "GetCurProcessingRankID", "SP", outs=[reg("r")], iter_id=-2, channel_id=0))])])
    with pytest.raises(birsim.SimulationError, match="iter_id -2 is negative"):
        _quiet_run(prog)
