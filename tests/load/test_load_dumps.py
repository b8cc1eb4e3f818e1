"""Dumps in the compiler's shape (docs/spec/compiler-dumps.md) load into the same program model as
birsim's own spelling (issue 8 points 5 and 6). Each test has an exact expected output
computed with NumPy, and a case that tells the right reading from a plausible wrong one.
"""

import json
import warnings

import numpy as np
import pytest

import birsim
from birsim import ProgramError

from dumps import ap, copy, dma_block, dram, full, function, insn, module, queue, reg, tile

RNG = np.random.default_rng(8)


def x_of(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def fails(source, path, match=None):
    with pytest.raises(ProgramError) as info:
        birsim.load(source)
    assert str(info.value).startswith(path + ":"), str(info.value)
    assert info.value.path == path
    if match:
        assert match in str(info.value), str(info.value)
    return info.value


def roundtrip(t_alloc, loc, p=4, f=8):
    """x (DRAM) -> tile -> out (DRAM), through location ``loc`` of ``t_alloc``."""
    return module([dram("x", "ExternalInput", [p, f]), dram("out", "ExternalOutput", [p, f]),
                   t_alloc],
                  [("b0", [copy("in", "SP", full(loc, p, f), full("x", p, f)),
                           copy("out", "SP", full("out", p, f), full(loc, p, f))])])


# ---- allocations ---------------------------------------------------------------------

def test_allocations_without_skind_name_or_tensor_shape():
    x = x_of([4, 8])
    m = birsim.load(roundtrip(tile("t0", 4, 32), "t0"))
    assert [(t.name, t.shape) for t in m.inputs] == [("x", (4, 8))]   # from debug
    t0 = m.tensor("t0")
    assert (t0.shape, t0.memory, t0.kind) == ((4, 8), "SB", "Internal")  # from dims
    out = birsim.run(m, {"x": x})["out"]
    np.testing.assert_array_equal(out, x)


def test_shapes_derived_from_dims():
    mod = module([dram("d", "Internal", [6, 2], debug=False), tile("s", 3, 12, dtype="int32"),
                  reg("r0")], [("b0", [])])
    m = birsim.load(mod)
    assert m.tensor("d").shape == (12,)             # DRAM: product(dims) / itemsize
    assert m.tensor("s").shape == (3, 3)            # SB: [dims[0], dims[1] / itemsize]
    assert int(m.tables["regs"]["dtype"][0]) == birsim._birsim.dtypes["int32"][0]
    assert len(m.tables["regs"]) == 1               # no memorylocations: a register


def test_malformed_allocations_have_json_paths():
    bad = tile("s", 3, 10)                          # 10 bytes: not whole fp32 elements
    fails(module([bad], [("b0", [])]), "functions[0].allocations[0].memorylocations[0].dims",
          "whole 4-byte elements")
    nameless = {"kind": "Internal", "dtype": "float32", "memorylocations": [
        {"type": "SB", "dims": [1, 4]}, {"name": "b", "type": "SB", "dims": [1, 4]}]}
    fails(module([nameless], [("b0", [])]), "functions[0].allocations[0]", "'name'")
    fails(module([{"dtype": "int32"}], [("b0", [])]), "functions[0].allocations[0]",
          "missing required key 'name' of register")
    fails(module([tile("p", 4, 64, "PSUM", addr=0, bank=8)], [("b0", [])]),
          "functions[0].allocations[0].memorylocations[0].bank", "must be <= 7")
    fails(module([tile("p", 4, 64, "PSUM", addr=2048, bank=1)], [("b0", [])]),
          "functions[0].allocations[0].memorylocations[0].addr", "bank-relative")
    fails(module([tile("p", 4, 64, "PSUM", addr=2000, bank=1)], [("b0", [])]),
          "functions[0].allocations[0].memorylocations[0]", "crosses the end")
    fails(module([dram("d", "ExternalInput", [4, 8], dims=[1, 100])], [("b0", [])]),
          "functions[0].allocations[0].memorylocations[0].dims", "too small")


def test_memory_type_strings_and_numbers_mix():
    x = x_of([4, 8])
    mod = roundtrip(tile("t0", 4, 32), "t0")
    mod["functions"][0]["allocations"][0]["memorylocations"][0]["type"] = 8     # DRAM
    np.testing.assert_array_equal(birsim.run(mod, {"x": x})["out"], x)


# ---- placement: SB quadrants, PSUM banks, the Internal DRAM arena --------------------

def _two_tiles(a, b, la="A", lb="B", p=4, f=8):
    """A := x, B := y, then out := A: out is x unless A and B share bytes."""
    return module([dram("x", "ExternalInput", [p, f]), dram("y", "ExternalInput", [p, f]),
                   dram("out", "ExternalOutput", [p, f]), a, b],
                  [("b0", [copy("a", "SP", full(la, p, f), full("x", p, f)),
                           copy("b", "SP", full(lb, p, f), full("y", p, f)),
                           copy("o", "SP", full("out", p, f), full(la, p, f))])])


def test_sb_tiles_at_one_addr_in_quadrants_0_and_32_do_not_alias():
    x, y = x_of([4, 8], 1), x_of([4, 8], 2)
    out = birsim.run(_two_tiles(tile("A", 4, 32, addr=64, base=0),
                                tile("B", 4, 32, addr=64, base=32)), {"x": x, "y": y})
    np.testing.assert_array_equal(out["out"], x)
    # the same addr and quadrant: the same bytes (so the test above can fail)
    out = birsim.run(_two_tiles(tile("A", 4, 32, addr=64, base=0),
                                tile("B", 4, 32, addr=64, base=0)), {"x": x, "y": y})
    np.testing.assert_array_equal(out["out"], y)


def test_psum_tiles_at_addr_0_in_banks_0_and_1_do_not_alias():
    x, y = x_of([4, 8], 1), x_of([4, 8], 2)
    out = birsim.run(_two_tiles(tile("A", 4, 32, "PSUM", addr=0, bank=0),
                                tile("B", 4, 32, "PSUM", addr=0, bank=1)), {"x": x, "y": y})
    np.testing.assert_array_equal(out["out"], x)
    # bank 1, addr 16 is byte 2048 + 16: the same bytes as an unbanked tile there
    out = birsim.run(_two_tiles(tile("A", 4, 32, "PSUM", addr=16, bank=1),
                                tile("B", 4, 32, "PSUM", addr=2048 + 16)), {"x": x, "y": y})
    np.testing.assert_array_equal(out["out"], y)


def test_psum_bank_without_addr_is_placed_only_with_base():
    m = birsim.load(module([tile("A", 4, 32, "PSUM", bank=2)], [("b0", [])]))
    del_addr = module([tile("A", 4, 32, "PSUM", bank=2)], [("b0", [])])
    del del_addr["functions"][0]["allocations"][0]["memorylocations"][0]["addr"]
    m = birsim.load(del_addr)
    assert int(m.tables["locs"]["placed"][0]) == 1 and int(m.tables["locs"]["addr"][0]) == 4096
    del del_addr["functions"][0]["allocations"][0]["memorylocations"][0]["base"]
    assert int(birsim.load(del_addr).tables["locs"]["placed"][0]) == 0


def test_internal_dram_tensors_overlapping_by_addr_alias():
    x, y = x_of([4, 8], 1), x_of([4, 8], 2)
    # A at bytes [0, 128), B at [64, 192): B's first 64 bytes are A's last 64
    out = birsim.run(_two_tiles(dram("A", "Internal", [4, 8], addr=0),
                                dram("B", "Internal", [4, 8], addr=64)),
                     {"x": x, "y": y})["out"]
    want = x.copy().reshape(-1)
    want[16:] = y.reshape(-1)[:16]
    np.testing.assert_array_equal(out.reshape(-1), want)
    # disjoint addresses, and External tensors at one addr: separate buffers
    for a, b in ((dram("A", "Internal", [4, 8], addr=0), dram("B", "Internal", [4, 8], addr=128)),
                 (dram("A", "ExternalOutput", [4, 8], addr=0),
                  dram("B", "ExternalOutput", [4, 8], addr=0))):
        out = birsim.run(_two_tiles(a, b), {"x": x, "y": y})["out"]
        np.testing.assert_array_equal(out, x)


def test_dram_dims_p_by_b_keep_their_row_pitch():
    x = x_of([4, 8])
    # dims [4, 64]: row p of the input starts at byte 64 p (32 bytes used per row)
    mod = module([dram("x", "ExternalInput", [4, 8], dims=[4, 64]),
                  dram("out", "ExternalOutput", [4, 16])],
                  [("b0", [copy("c", "SP", full("out", 4, 16), full("x", 4, 16))])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = birsim.run(mod, {"x": x})["out"]
    np.testing.assert_array_equal(out[:, :8], x)


# ---- operands ------------------------------------------------------------------------

def test_memsetref_location_set_and_register_ap_regref():
    x = x_of([1, 16])
    src = {"kind": "register_ap", "memsetref": "x_set", "regref": "r0", "dtype": "float32",
           "ap": [[16, 1], [1, 8]], "offset": 1}
    mod = module([dram("x", "ExternalInput", [1, 16]), dram("out", "ExternalOutput", [1, 8]),
                  reg("r0")],
                 [("b0", [insn("m", "RegisterMove", "SP", ins=[{"kind": "imm_value",
                                                                 "dtype": "int32", "value": 3}],
                               outs=[{"kind": "register_access", "regref": "r0"}]),
                          copy("c", "SP", {"kind": "physical_ap", "memsetref": "out_set",
                                           "dtype": "float32", "ap": [[8, 1], [1, 8]],
                                           "offset": 0}, src)])])
    with pytest.warns(birsim.BirsimWarning, match="regref"):
        m = birsim.load(mod)
    out = birsim.run(m, {"x": x})["out"]
    np.testing.assert_array_equal(out, x[:, 4:12])      # offset 1 + register 3 elements


# ---- sync, the end-of-body sequence, DMA ------------------------------------------------

def test_sync_entries_in_the_compiler_spelling_order_the_engines():
    x = x_of([4, 8])
    # the consumer comes first in block order: it must wait for the producer's update
    mod = module([dram("x", "ExternalInput", [4, 8]), dram("out", "ExternalOutput", [4, 8]),
                  tile("t", 4, 32)],
                 [("b0", [copy("use", "Activation", full("out", 4, 8), full("t", 4, 8),
                               wait=[("make", 3, 1)]),
                          copy("make", "Pool", full("t", 4, 8), full("x", 4, 8),
                               update=[(3, 1)])])])
    for schedule in ("in_order", "round_robin", "random"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = birsim.run(mod, {"x": x}, schedule=schedule, seed=5)["out"]
        np.testing.assert_array_equal(out, x)
    # without the wait the consumer reads the tile before it is written
    del mod["functions"][0]["blocks"][0]["instructions"][0]["sync_info"]
    with pytest.warns(birsim.BirsimWarning, match="never-written|not fully|unwritten|written"):
        out = birsim.run(mod, {"x": x})["out"]
    assert not np.array_equal(out, x)


def test_both_sync_spellings_mix_and_value_wins():
    x = x_of([4, 8])
    mod = module([dram("x", "ExternalInput", [4, 8]), dram("out", "ExternalOutput", [4, 8]),
                  tile("t", 4, 32)],
                 [("b0", [copy("use", "Activation", full("out", 4, 8), full("t", 4, 8),
                               wait=[("make", 3, 99)]),
                          copy("make", "Pool", full("t", 4, 8), full("x", 4, 8))])])
    use, make = mod["functions"][0]["blocks"][0]["instructions"]
    use["sync_info"]["on_wait"][0]["value"] = 2               # value wins over wait_value
    make["sync_info"] = {"on_update": [{"type": "semaphore", "id": 3, "mode": "sem-add-imm",
                                        "value": 2}]}
    np.testing.assert_array_equal(birsim.run(mod, {"x": x})["out"], x)
    use["sync_info"]["on_wait"][0]["wait_value"] = "two"
    del use["sync_info"]["on_wait"][0]["value"]
    fails(mod, "functions[0].blocks[0].instructions[0].sync_info.on_wait[0].wait_value",
          "integer")
    use["sync_info"]["on_wait"][0] = {"from": "make", "id": 3}
    fails(mod, "functions[0].blocks[0].instructions[0].sync_info.on_wait[0]", "wait_value")


def _end_of_body(p=4, f=8):
    """Block b0 ends with the lowered-loop sequence (Pool EventSemaphore waits,
    AllEngineBarrier, GroupResetSemaphores, AllEngineBarrier, Drain, core barrier); in
    b1 a consumer waits for semaphore 5 >= 1 before its producer runs. Only the reset
    makes it wait: without it, semaphore 5 is still 1 from b0."""
    sp = full
    return module(
        [dram("x", "ExternalInput", [p, f]), dram("y", "ExternalInput", [p, f]),
         dram("out", "ExternalOutput", [p, f]), tile("t", p, 4 * f)],
        [("b0", [copy("a", "SP", sp("t", p, f), sp("x", p, f), update=[(5, 1)]),
                 insn("ev", "EventSemaphore", "Pool", wait=[("a", 5, 1)]),
                 insn("bar0", "AllEngineBarrier", "ALL"),
                 insn("rst", "GroupResetSemaphores", "ALL", sema_group=[5], mode=0),
                 insn("bar1", "AllEngineBarrier", "ALL"),
                 insn("drain", "Drain", "SP", is_reset_sema=False),
                 insn("cb", "CoreBarrier", "ALL")]),
         ("b1", [copy("use", "Activation", sp("out", p, f), sp("t", p, f),
                      wait=[("b", 5, 1)]),
                 copy("b", "Pool", sp("t", p, f), sp("y", p, f), update=[(5, 1)])])])


def test_end_of_body_sequence_runs_and_resets_its_group():
    x, y = x_of([4, 8], 1), x_of([4, 8], 2)
    mod = _end_of_body()
    np.testing.assert_array_equal(birsim.run(mod, {"x": x, "y": y})["out"], y)
    # resetting another semaphore: the consumer no longer waits and copies x
    mod["functions"][0]["blocks"][0]["instructions"][3]["sema_group"] = [6]
    np.testing.assert_array_equal(birsim.run(mod, {"x": x, "y": y})["out"], x)
    # without sema_group nothing is reset, with a warning naming the reading
    del mod["functions"][0]["blocks"][0]["instructions"][3]["sema_group"]
    with pytest.warns(birsim.BirsimWarning, match="without sema_group resets nothing"):
        m = birsim.load(mod)
    np.testing.assert_array_equal(birsim.run(m, {"x": x, "y": y})["out"], x)


def test_drain_is_reset_sema_is_ignored_with_a_warning():
    mod = _end_of_body()
    mod["functions"][0]["blocks"][0]["instructions"][5]["is_reset_sema"] = True
    with pytest.warns(birsim.BirsimWarning, match="is_reset_sema is ignored"):
        m = birsim.load(mod)
    x, y = x_of([4, 8], 1), x_of([4, 8], 2)
    np.testing.assert_array_equal(birsim.run(m, {"x": x, "y": y})["out"], y)


def _dma_dump(p=4, f=8):
    """x -> t by a queues-held DMA block (two nested descriptor blocks, two rows each),
    fired by a Pool DMATrigger; the block's completion (+16) releases the consumer."""
    desc = [[insn("d%d" % r, "DMADescriptorCopy", "DMA",
                  ins=[ap("x", [[f, 1], [1, f]], offset=r * f)],
                  outs=[ap("t", [[f, 1], [1, f]], offset=r * f)]) for r in rows]
            for rows in ((0, 1), (2, 3))]
    return module(
        [dram("x", "ExternalInput", [p, f]), dram("out", "ExternalOutput", [p, f]),
         tile("t", p, 4 * f)],
        [("b0", [insn("trig", "DMATrigger", "Pool", queue="qPoolIO", dma_blocks=["load_x"]),
                 copy("use", "Activation", full("out", p, f), full("t", p, f),
                      wait=[("load_x", 9, 16)]),
                 insn("store", "DMACopy", "SP", ins=[full("out", p, f)],
                      outs=[full("out", p, f)], queue="qSPDynamicHW")])],
        [queue("qPoolIO", [dma_block("load_x", "trig", desc, update=[(9, 16)])])])


def test_queues_held_dma_blocks_fired_by_a_dma_trigger():
    x = x_of([4, 8])
    m = birsim.load(_dma_dump())
    assert len(m.tables["queues"]) == 1
    np.testing.assert_array_equal(birsim.run(m, {"x": x})["out"], x)
    # a completion of 8 (not 16) leaves the consumer waiting: the block's update counts
    mod = _dma_dump()
    mod["queues"][0]["blocks"][0]["instructions"][0]["sync_info"]["on_update"][0][
        "update_value"] = 8
    with pytest.raises(birsim.DeadlockError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        birsim.run(mod, {"x": x})


def test_dma_queue_errors():
    mod = _dma_dump()
    mod["dma_queues"] = [{"name": "qPoolIO", "dma_blocks": []}]
    fails(mod, "queues[0].name", "in dma_queues and queues")
    mod = _dma_dump()
    blocks = mod["queues"][0]["blocks"][0]["instructions"]
    blocks.append(json.loads(json.dumps(blocks[0])))
    blocks[0]["dma_trigger"] = blocks[1]["dma_trigger"] = None
    fails(mod, "functions[0].blocks[0].instructions[0].dma_blocks[0]", "ambiguous")
    mod = _dma_dump()
    mod["queues"][0]["blocks"][0]["instructions"][0]["blocks"] = {"x": 1}
    fails(mod, "queues[0].blocks[0].instructions[0].blocks", "expected a list")
    mod = _dma_dump()
    mod["queues"][0]["blocks"][0]["instructions"][0]["blocks"][0]["instructions"].append(
        copy("bad", "DMA", full("t", 4, 8), full("x", 4, 8)))
    fails(mod, "queues[0].blocks[0].instructions[0].blocks[0].instructions[2]", "not allowed")


def test_repeated_dma_block_names_told_apart_by_dma_trigger():
    x = x_of([4, 8])
    mod = _dma_dump()
    blocks = mod["queues"][0]["blocks"][0]["instructions"]
    other = json.loads(json.dumps(blocks[0]))
    other["dma_trigger"] = "trig2"
    other["sync_info"]["on_update"] = [{"id": 10, "update_value": 16}]
    blocks.append(other)
    ins = mod["functions"][0]["blocks"][0]["instructions"]
    ins.insert(1, insn("trig2", "DMATrigger", "Pool", queue="qPoolIO", dma_blocks=["load_x"]))
    ins[2]["sync_info"]["on_wait"].append({"from": "load_x", "id": 10, "wait_value": 16})
    np.testing.assert_array_equal(birsim.run(mod, {"x": x})["out"], x)


# ---- opcode names of newer compilers -------------------------------------------------

@pytest.mark.parametrize("alias,name", [("Max8", "Max"), ("MaxIndex8", "MaxIndex"),
                                        ("MatchReplace8", "MatchReplace")])
def test_newer_opcode_names_are_aliases(alias, name):
    mod = module([tile("t", 4, 32), tile("o", 4, 32)],
                 [("b0", [insn("m", alias, "DVE", ins=[full("t", 4, 8)],
                               outs=[full("o", 4, 8)],
                               # MatchReplace requires its replacement value
                               imm_value=0.0 if name == "MatchReplace" else None)])])
    m = birsim.load(mod)
    assert int(m.tables["insns"]["op"][0]) == int(birsim.ops.Op[name])


# ---- one program per core ----------------------------------------------------------------

def _core_dumps(p=8, f=8):
    """Core 0 copies rows 0..3 of x into out; core 1 writes rows 4..7 of out as 2 x,
    and copies the Shared DRAM tensor `buf` (written by core 0, released by a
    cross-core semaphore) into its own output `late`. The two programs differ."""
    h = p // 2
    rows = lambda loc, r0: ap(loc, [[f, h], [1, f]], offset=r0 * f)      # noqa: E731
    shared_buf = dict(dram("buf", "Internal", [h, f]), addr_space="Shared")
    common = [dram("x", "ExternalInput", [p, f]), dram("out", "ExternalOutput", [p, f]),
              tile("t", h, 4 * f), shared_buf]
    m0 = module(common, [("b0", [
        copy("in", "SP", full("t", h, f), rows("x", 0)),
        copy("o", "SP", rows("out", 0), full("t", h, f)),
        insn("s", "TensorCopy", "SP", ins=[rows("x", 0)], outs=[full("buf", h, f)],
             sync_info={"on_update": [{"type": "semaphore", "id": 2, "mode": "sem-add-imm",
                                       "value": 1, "target_core": 1}]})])])
    common = json.loads(json.dumps(common))
    m1 = module(common + [dram("late", "ExternalOutput", [h, f])], [("b0", [
        copy("in", "Pool", full("t", h, f), rows("x", h)),
        insn("dbl", "TensorScalar", "DVE", ins=[full("t", h, f)], outs=[full("t", h, f)],
             op0="mult", const0=2.0),
        copy("o", "SP", rows("out", h), full("t", h, f)),
        copy("l", "Activation", full("late", h, f), full("buf", h, f),
             wait=[("s", 2, 1)])])])
    return m0, m1


def test_module_k_runs_on_core_k_and_external_tensors_are_one():
    x = x_of([8, 8])
    m0, m1 = _core_dumps()
    mods = birsim.load([m0, m1])
    assert isinstance(mods, list) and [m.core for m in mods] == [0, 1]
    sim = birsim.Simulator(mods)
    assert sim.cores == 2
    out = sim.run({"x": x})                         # x given once
    want = np.concatenate([x[:4], np.float32(2) * x[4:]])
    assert sorted(out) == ["late", "out"]           # each output once
    np.testing.assert_array_equal(out["out"], want)  # both cores' halves in one tensor
    np.testing.assert_array_equal(out["late"], x[:4])
    np.testing.assert_array_equal(sim.read("out", core=1), want)
    np.testing.assert_array_equal(sim.read("late", core=1), x[:4])
    # each core's SBUF is its own: core 0's tile t holds x's first rows, core 1's 2 x's last
    np.testing.assert_array_equal(sim.read("t", core=0), x[:4])
    np.testing.assert_array_equal(sim.read("t", core=1), 2 * x[4:])


def test_module_lists_from_json_arrays_and_separate_loads():
    x = x_of([8, 8])
    m0, m1 = _core_dumps()
    want = np.concatenate([x[:4], np.float32(2) * x[4:]])
    mods = birsim.load(json.dumps([m0, m1]))
    assert len(mods) == 2
    np.testing.assert_array_equal(birsim.run(mods, {"x": x})["out"], want)
    separate = [birsim.load(m0), birsim.load(m1)]
    np.testing.assert_array_equal(birsim.run(separate, {"x": x})["out"], want)
    np.testing.assert_array_equal(birsim.run([m0, m1], {"x": x})["out"], want)
    with pytest.raises(ValueError, match="cores must be 2"):
        birsim.Simulator(mods, cores=3)


def test_one_module_of_a_list_runs_alone():
    x = x_of([8, 8])
    m0, _ = _core_dumps()
    alone = birsim.load([m0, _core_dumps()[1]])[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # core 0 writes only half of `out`
        out = birsim.run(alone, {"x": x}, cores=2)["out"]   # it signals core 1
    np.testing.assert_array_equal(out[:4], x[:4])


def test_module_list_errors_name_the_module():
    m0, m1 = _core_dumps()
    m1["functions"][0]["blocks"][0]["instructions"][0]["ins"][0]["memref"] = "nope"
    fails([m0, m1], "[1].functions[0].blocks[0].instructions[0].ins[0].memref", "nope")
    m0, m1 = _core_dumps()
    m1["functions"][0]["allocations"][0]["debug"]["shape"] = [4, 16]
    with pytest.raises(ProgramError, match="tensor 'x' is float32 \\[8, 8\\] in module 0 but "
                                           "float32 \\[4, 16\\] in module 1"):
        birsim.load([m0, m1])
    with pytest.raises(ProgramError, match=r"\[1\]: the BIR-JSON module must be an object"):
        birsim.load(json.dumps([m0, 3]))


@pytest.mark.parametrize("name", ["TopK"])     # LocalGather, Nonzero: tests/vm/test_vm_data_movement.py
def test_newer_opcodes_load_and_check_operands_when_run(name):
    """TopK (tests/compute/test_compute_topk_gpsimd.py) loads in dump form; run with one output
    (it needs values and indices) it stops with a clear error naming both."""
    mod = module([dram("x", "ExternalInput", [4, 8]), dram("out", "ExternalOutput", [4, 8]),
                  tile("t", 4, 32)],
                 [("b0", [copy("in", "SP", full("t", 4, 8), full("x", 4, 8)),
                          insn("m", name, "Pool", ins=[full("t", 4, 8)],
                               outs=[full("out", 4, 8)])])])
    m = birsim.load(mod)
    assert int(m.tables["insns"]["op"][1]) == int(birsim.ops.Op[name])
    with pytest.raises(birsim.BirsimError, match="%s needs outs\\[0\\] \\(values\\) and "
                                                 "outs\\[1\\]" % name):
        birsim.run(m, {"x": x_of([4, 8])})
