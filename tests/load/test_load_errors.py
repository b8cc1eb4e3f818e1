"""Tests of birsim.load: valid programs, the tables they become, and every error class."""

import copy
import json
import pathlib

import numpy as np
import pytest

import birsim
from birsim import ProgramError
from birsim._birsim import alu_ops, act_funcs, dtypes, enums, opcodes
from birsim.dtypes import numpy_dtype
from birsim.loader import load

from bir import (affine, affine_v1, ap, block, copy_program, dma_block, dma_queue, do_while,
                 dyn_loop, function, imm, imm_array, insn, iv, loop, module, reg, reg_ap,
                 register, rv, shard, sym_ap, sync_info, tensor, update, wait, wrap)

X_CONST, X_IV, X_REG, X_SHARD, X_ADD, X_MUL, X_FLOORDIV, X_MOD = range(1, 9)
FULL = [[512, 128], [1, 512]]


def prog(*instructions, allocs=None, **kw):
    """A module whose entry function ``main`` has SB tensors x, y (f32 [128, 512]),
    register r0 and one block of ``instructions``."""
    if allocs is None:
        allocs = [tensor("x"), tensor("y"), register("r0")]
    return module([function("main", allocs, [block("b0", *instructions)])], **kw)


def copy_insn(name="cp", engine="DVE", **kw):
    return insn(name, "TensorCopy", engine, ins=[ap("x", FULL)], outs=[ap("y", FULL)], **kw)


def fails(source, path, code=None, match=None):
    """Load ``source`` expecting a ProgramError at ``path``; return the error."""
    with pytest.raises(ProgramError) as info:
        load(source)
    err = info.value
    assert str(err).startswith(path + ":") or (path == "" and err.path == ""), str(err)
    assert err.path == path
    if code is not None:
        assert err.code == code
    if match is not None:
        assert match in str(err), str(err)
    return err


def strings(m):
    """offset -> string of a module's string table."""
    out, off = {}, 0
    for s in m.tables["strings"].split(b"\0")[:-1]:
        out[off] = s.decode()
        off += len(s) + 1
    return out


def insn_by_name(m, name):
    names = strings(m)
    for i, rec in enumerate(m.tables["insns"]):
        if names[int(rec["name"])] == name:
            return i, rec
    raise KeyError(name)


def expr_code(m, index):
    n = int(m.tables["exprs"][index])
    return [int(v) for v in m.tables["exprs"][index + 1:index + 1 + n]]


def operands(m, rec):
    o = int(rec["opnd"])
    return m.tables["opnds"][o:o + int(rec["nin"]) + int(rec["nout"])]


# ---- sources -----------------------------------------------------------------------

def test_load_bare_dict():
    m = load(copy_program())
    assert isinstance(m, birsim.Module)
    assert m.functions == ("main",) and m.entry == "main"
    assert [t.name for t in m.inputs] == ["in"] and [t.name for t in m.outputs] == ["out"]
    assert m.arch == "gen3" and m.version == 2
    assert m.program is m.program          # built once, lazily


def test_load_wrapped_and_text_forms(tmp_path):
    mod = copy_program()
    text = json.dumps(wrap(mod))
    path = tmp_path / "prog.json"
    path.write_text(text)
    for source in (wrap(mod), text, "  \n" + text, text.encode(), str(path), path):
        m = load(source)
        assert m.entry == "main" and len(m.tables["insns"]) == 1


def test_wrapped_paths_start_with_module():
    mod = copy_program()
    mod["functions"][0]["blocks"][0]["instructions"][0]["opcode"] = "Nope"
    fails(wrap(mod), "module.functions[0].blocks[0].instructions[0].opcode")


def test_bad_source_type():
    with pytest.raises(TypeError):
        load(42)


def test_missing_file():
    err = fails("/nonexistent/prog.json", "")
    assert "cannot read" in str(err)


def test_bad_json_reports_line_and_column():
    with pytest.raises(ProgramError) as info:
        load('{"functions": [\n  {"name": "main",, }]}')
    assert "line 2 column" in str(info.value)
    with pytest.raises(ProgramError, match="line 1 column"):
        load(b'{"version": }')


def test_root_must_be_object():
    with pytest.raises(ProgramError, match="must be an object"):
        load(b"[1, 2]")


def test_null_is_absent_and_unknown_keys_ignored():
    mod = copy_program()
    mod["arch"] = None
    mod["whatever"] = {"nested": [1, 2]}
    i = mod["functions"][0]["blocks"][0]["instructions"][0]
    i["engine"] = None
    i["sync_info"] = None
    i["dependencies"] = ["x"]
    i["some_compiler_key"] = 17
    m = load(mod)
    assert m.arch == "gen3"
    assert m.tables["insns"][0]["engine"] == enums["ENGINE"]["Unassigned"]


# ---- module header -----------------------------------------------------------------

@pytest.mark.parametrize("alias,name", [("trn1", "sunda"), ("inf2", "sunda"),
                                        ("gen2", "sunda"), ("trn2", "gen3"),
                                        ("trn3", "core_v4"), ("gen4", "core_v4"),
                                        ("inferentia", "inferentia")])
def test_arch_aliases(alias, name):
    m = load(module(copy_program()["functions"], arch=alias))
    assert m.arch == name
    assert m.tables["module"][0]["arch"] == enums["ARCH"][name]


def test_unknown_arch():
    err = fails(module(copy_program()["functions"], arch="trn9"), "arch", match="trn9")
    assert "core_v4" in str(err) and "trn2" in str(err)


@pytest.mark.parametrize("version", [0, 3, "2"])
def test_bad_version(version):
    fails(module(copy_program()["functions"], version=version), "version")


def test_no_functions():
    with pytest.raises(ProgramError, match="no functions"):
        load({"version": 2})


def test_entry_is_main_else_first():
    def f(n):
        return function(n, [tensor("x")], [])
    assert load(module([f("a"), f("main")])).entry == "main"
    m = load(module([f("a"), f("b")]))
    assert m.entry == "a" and m.tables["module"][0]["entry"] == 0


def test_duplicate_function():
    fails(module([function("f"), function("f")]), "functions[1].name", match="duplicate")
    fails(module([function("f")], nki_functions=[function("f")]), "nki_functions[0].name")


# ---- allocations -------------------------------------------------------------------

def test_sets_locations_registers_tables():
    allocs = [tensor("a", "ExternalInput", "bfloat16", [128, 4, 8], "DRAM", loc="a_loc"),
              register("r0"), register("w", "uint64"),
              tensor("p", "Internal", "float32", [64, 16], "PSUM", base=0, addr=2048),
              tensor("o", "ExternalOutput", "int8", [2, 3], 4)]
    other = function("g", [tensor("z", "ExternalInput", "float32", [1, 1], "DRAM")], [])
    m = load(module([function("main", allocs, []), other]))
    names = strings(m)
    sets, locs, regs, funcs = (m.tables[k] for k in ("sets", "locs", "regs", "funcs"))
    assert [names[int(s["name"])] for s in sets] == ["a", "p", "o", "z"]
    assert list(sets["loc0"]) == [0, 1, 2, 3] and list(sets["nloc"]) == [1, 1, 1, 1]
    assert list(sets["io"]) == [1, 0, 2, 0]          # io only in the entry function
    assert list(sets[0]["shape"][:3]) == [128, 4, 8] and sets[0]["ndim"] == 3
    assert sets[0]["dtype"] == dtypes["bfloat16"][0]
    assert list(locs["memtype"]) == [enums["MEM"]["DRAM"], enums["MEM"]["PSUM"],
                                     enums["MEM"]["DRAM"], enums["MEM"]["DRAM"]]
    assert (locs[0]["parts"], locs[0]["bpp"]) == (128, 4 * 8 * 2)       # derived dims
    assert (locs[1]["placed"], locs[1]["base"], locs[1]["addr"]) == (1, 0, 2048)
    assert locs[0]["placed"] == 0
    assert [names[int(r["name"])] for r in regs] == ["r0", "w"]
    assert list(regs["wide"]) == [0, 1] and regs[1]["dtype"] == dtypes["uint64"][0]
    assert list(funcs["set0"]) == [0, 3] and list(funcs["nset"]) == [3, 1]
    assert list(funcs["reg0"]) == [0, 2] and list(funcs["nreg"]) == [2, 0]
    t = m.tensor("a")
    assert (t.kind, t.dtype, t.shape, t.memory, t.locations) == \
        ("ExternalInput", "bfloat16", (128, 4, 8), "DRAM", ("a_loc",))
    assert m.inputs[0].location == "a_loc" and m.inputs[0].location_index == 0
    assert m.outputs[0].name == "o" and m.outputs[0].set_index == 2
    assert m.inputs[0].numpy_dtype == numpy_dtype("bfloat16")


def test_memory_type_names_and_no_data_types():
    for mem in ("Unallocated", "Input", "Output", 1, 2, 4, 8, "DRAM"):
        m = load(prog(allocs=[tensor("x", mem=mem)]))
        assert m.tables["locs"][0]["memtype"] == enums["MEM"]["DRAM"]
    fails(prog(allocs=[tensor("x", mem="HBM")]),
          "functions[0].allocations[0].memorylocations[0].type", match="SB")
    fails(prog(allocs=[tensor("x", mem=128)]),
          "functions[0].allocations[0].memorylocations[0].type")


def test_shared_dram_ok_sb_psum_rejected():
    m = load(prog(allocs=[tensor("x", mem="DRAM", addr_space="Shared")]))
    assert m.tables["sets"][0]["shared"] == 1 and m.tensors[0].shared
    for mem in ("SB", "PSUM"):
        fails(prog(allocs=[tensor("x", mem=mem, shape=[64, 16], addr_space="Shared")]),
              "functions[0].allocations[0].addr_space", match="Shared")


def test_dims_too_small():
    fails(prog(allocs=[tensor("x", shape=[128, 512], dims=[128, 2047])]),
          "functions[0].allocations[0].memorylocations[0].dims", match="too small")
    fails(prog(allocs=[tensor("x", shape=[128, 512], dims=[64, 4096])]),
          "functions[0].allocations[0].memorylocations[0].dims")
    m = load(prog(allocs=[tensor("x", shape=[100, 10], dims=[128, 64])]))
    assert (m.tables["locs"][0]["parts"], m.tables["locs"][0]["bpp"]) == (128, 64)


@pytest.mark.parametrize("mem,base,addr,shape,arch", [
    ("SB", 0, 229376 - 2047, [128, 512], None),        # gen3 SBUF: 224 KiB per partition
    ("SB", 1, 0, [128, 512], None),                   # partitions 1..128
    ("PSUM", 0, 14336, [128, 1024], None),             # 16 KiB PSUM
    ("PSUM", 0, 0, [128, 16], "inferentia"),           # inferentia PSUM has 64 partitions
])
def test_placed_location_must_fit(mem, base, addr, shape, arch):
    fails(prog(allocs=[tensor("x", mem=mem, shape=shape, base=base, addr=addr)], arch=arch),
          "functions[0].allocations[0].memorylocations[0]", match="does not fit")


def test_placed_location_fits_and_only_internal_dram_in_the_arena():
    m = load(prog(allocs=[tensor("x", "Internal", "float32", [128, 512], "SB", base=0,
                                 addr=229376 - 2048),
                          tensor("d", mem="DRAM", base=0, addr=5),
                          tensor("e", "ExternalInput", mem="DRAM", addr=5)]))
    assert list(m.tables["locs"]["placed"]) == [1, 1, 0]      # Internal DRAM: arena
    assert int(m.tables["locs"][1]["addr"]) == 5


def test_io_set_needs_one_location():
    fails(prog(allocs=[tensor("x", "ExternalInput", locations=[])]),
          "functions[0].allocations[0].memorylocations", match="exactly one")


def test_allocation_errors():
    fails(prog(allocs=[{"Skind": "tensor", "name": "x"}]), "functions[0].allocations[0].Skind")
    err = fails(prog(allocs=[{"Skind": "memory_location_set", "name": "x",
                              "tensor_shape": [1]}]),
                "functions[0].allocations[0]", match="'dtype'")
    assert err.function == "main"
    fails(prog(allocs=[tensor("x", dtype="float33")]), "functions[0].allocations[0].dtype",
          match="bfloat16")
    fails(prog(allocs=[tensor("x", kind="Weird")]), "functions[0].allocations[0].kind",
          match="ExternalInput")
    fails(prog(allocs=[tensor("x", shape=[128, "4"])]),
          "functions[0].allocations[0].tensor_shape[1]", match="integer")
    fails(prog(allocs=[tensor("x", shape=[])]), "functions[0].allocations[0].tensor_shape")
    fails(prog(allocs=[tensor("x", shape=[1] * 9)]), "functions[0].allocations[0].tensor_shape")
    fails(prog(allocs=[register("r", "float16")]), "functions[0].allocations[0].dtype")


@pytest.mark.parametrize("allocs,path", [
    ([tensor("x"), tensor("x", loc="x2")], "functions[0].allocations[1].name"),
    ([tensor("x"), tensor("z", loc="x")], "functions[0].allocations[1].memorylocations[0].name"),
    ([register("r"), register("r")], "functions[0].allocations[1].name"),
])
def test_duplicate_allocations(allocs, path):
    fails(prog(allocs=allocs), path, match="duplicate")


def test_dtype_aliases():
    m = load(prog(allocs=[tensor("x", dtype="fp8_e4m3fn"), tensor("y", dtype="fp8_e8m0fnu"),
                          tensor("z", dtype="fp4_e2m1fn_x4", shape=[2, 2])]))
    assert [t.dtype for t in m.tensors] == ["float8_e4m3fn", "float8_e8m0fnu",
                                            "float4_e2m1fn_x4"]
    assert m.tables["locs"][2]["bpp"] == 4          # x4 containers are 2 bytes


# ---- instructions and structure ----------------------------------------------------

def test_opcode_key_aliases_and_engine_aliases():
    aliases = {"GPSIMD": "Pool", "gpsimd": "Pool", "pool": "Pool", "Scalar": "Activation",
               "act": "Activation", "ACT": "Activation", "Tensor": "PE", "pe": "PE",
               "SyncDMA": "DMA", "dma": "DMA", "Vector": "DVE", "dve": "DVE", "Sync": "SP",
               "sp": "SP", "All": "ALL", "ALL": "ALL", "Unassigned": "Unassigned"}
    insns = []
    for k, alias in enumerate(aliases):
        i = copy_insn("c%d" % k, alias)
        key = ("opcode", "type", "instruction_type")[k % 3]
        i[key] = i.pop("opcode")
        insns.append(i)
    m = load(prog(*insns))
    assert list(m.tables["insns"]["engine"]) == [enums["ENGINE"][v] for v in aliases.values()]
    assert set(m.tables["insns"]["op"]) == {opcodes["TensorCopy"][0]}


def test_unknown_opcode_and_engine():
    err = fails(prog(dict(copy_insn(), opcode="Frobnicate")),
                "functions[0].blocks[0].instructions[0].opcode", match="Frobnicate")
    assert "TensorTensor" in str(err) and err.instruction == "cp" and err.function == "main"
    err = fails(prog(copy_insn(engine="GPU")), "functions[0].blocks[0].instructions[0].engine")
    assert "Pool" in str(err) and "GPSIMD" in str(err)


@pytest.mark.parametrize("op", ["Generic", "MatmultBase", "DMA", "Collective",
                                "DMADescriptor", "Terminator"])
def test_abstract_opcodes_rejected(op):
    fails(prog(insn("i", op)), "functions[0].blocks[0].instructions[0].opcode",
          match="abstract")


def test_missing_required_keys_name_key_and_owner():
    err = fails(prog({"name": "i0", "engine": "DVE"}),
                "functions[0].blocks[0].instructions[0]", match="'opcode'")
    assert "instruction 'i0'" in str(err) and "function 'main'" in str(err)
    fails(prog({"opcode": "NoOp"}), "functions[0].blocks[0].instructions[0]", match="'name'")
    fails(module([{"blocks": []}]), "functions[0]", match="'name'")
    fails(prog(insn("t", "TensorTensor", "DVE")),
          "functions[0].blocks[0].instructions[0]", match="'op'")


def test_wrong_types():
    fails(prog(dict(copy_insn(), ins={"a": 1})), "functions[0].blocks[0].instructions[0].ins",
          match="expected a list")
    fails(module([function("main", [], [block("b0", "notaninsn")])]),
          "functions[0].blocks[0].instructions[0]", match="expected an object")
    fails({"functions": {"main": {}}}, "functions", match="expected a list")
    fails(prog(insn("l", "Loop", LoopAxis={"name": "i", "ub": "4"}, blocks=[])),
          "functions[0].blocks[0].instructions[0].LoopAxis.ub", match="integer")


def test_duplicate_blocks_and_instructions():
    fails(module([function("main", [], [block("b"), block("b")])]),
          "functions[0].blocks[1].name", match="duplicate block")
    # instruction names are labels (compiler dumps repeat them): no error
    m = load(prog(insn("n", "NoOp"), insn("n", "NoOp")))
    assert "[0] n: Unassigned NoOp" in m.listing() and "[1] n: Unassigned NoOp" in m.listing()
    body = [block("b0")]                     # a loop body block named like a top block
    fails(prog(loop("l", "i", 0, 2, 1, body)),
          "functions[0].blocks[0].instructions[0].blocks[0].name", match="duplicate block")


def test_regions_blocks_instructions_contiguous():
    inner = loop("l2", "j", 0, 2, 1, [block("c0", insn("n3", "NoOp")),
                                      block("c1", insn("n4", "NoOp"))])
    outer = loop("l1", "i", 0, 4, 1, [block("a0", insn("n1", "NoOp"), inner),
                                      block("a1", insn("n2", "NoOp"))])
    allocs = [register("r")]
    m = load(module([function("main", allocs,
                              [block("b0", insn("n0", "NoOp"), outer),
                               block("b1", do_while("dw", "r", [insn("n5", "NoOp")]))])]))
    T = m.tables
    names = strings(m)
    for r, region in enumerate(T["regions"]):
        for b in range(region["block0"], region["block0"] + region["nblock"]):
            assert T["blocks"][b]["region"] == r
    for b, blk in enumerate(T["blocks"]):
        for i in range(blk["insn0"], blk["insn0"] + blk["ninsn"]):
            assert T["insns"][i]["block"] == b
    # every instruction is in exactly one block
    covered = sorted(i for blk in T["blocks"]
                     for i in range(blk["insn0"], blk["insn0"] + blk["ninsn"]))
    assert covered == list(range(len(T["insns"])))
    i1, l1 = insn_by_name(m, "l1")
    body = T["regions"][l1["body"]]
    assert body["owner"] == i1 and body["nblock"] == 2
    assert [names[int(T["blocks"][b]["name"])]
            for b in range(body["block0"], body["block0"] + 2)] == ["a0", "a1"]
    i2, l2 = insn_by_name(m, "l2")
    assert list(l1["i"][:5]) == [0, 4, 1, 0, 0] and list(l2["i"][:5]) == [0, 2, 1, 0, 1]
    assert m.axis_names == ("i", "j") and T["module"][0]["naxes"] == 2
    off = int(T["module"][0]["axis_names"])
    assert [names[int(v)] for v in T["ipool"][off:off + 2]] == ["i", "j"]
    _, dw = insn_by_name(m, "dw")
    assert dw["i"][0] == 0 and T["regions"][dw["body"]]["nblock"] == 1
    assert T["funcs"][0]["region"] == 0 and T["regions"][0]["owner"] == -1
    assert "    [1] l1: Unassigned Loop  i in range(0, 4, 1)" in m.listing()


def test_terminator_must_be_last():
    fails(prog(insn("r", "Return"), insn("n", "NoOp")),
          "functions[0].blocks[0].instructions[0]", match="last instruction")


def test_break_outside_loop():
    fails(prog(insn("brk", "Break")), "functions[0].blocks[0].instructions[0]", match="Break")
    m = load(prog(loop("l", "i", 0, 2, 1, [insn("brk", "Break")])))
    assert insn_by_name(m, "brk")[1]["op"] == opcodes["Break"][0]
    load(prog(do_while("d", "r0", [loop("l", "i", 0, 2, 1, [insn("x1", "NoOp")]),
                                   insn("brk", "Break")])))


def test_branches():
    cab = insn("cab", "CompareAndBranch", "SP", ins=[reg("r0"), imm(3, "int32")],
               comp_op="IS_LTIMM", on_true="b1", on_false="b2")
    m = load(module([function("main", [register("r0")],
                              [block("b0", cab), block("b1", insn("j", "UnconditionalBranch",
                                                                  target="b0")),
                               block("b2", insn("e", "Exit"))])]))
    _, rec = insn_by_name(m, "cab")
    assert (rec["i"][0], rec["target"], rec["target2"]) == (enums["CMP"]["IS_LTIMM"], 1, 2)
    assert insn_by_name(m, "j")[1]["target"] == 0
    m.program


def test_branch_errors():
    body = [block("lb0", insn("j", "UnconditionalBranch", target="b0"))]
    fails(prog(loop("l", "i", 0, 2, 1, body)),
          "functions[0].blocks[0].instructions[0].blocks[0].instructions[0].target",
          match="same region")
    fails(prog(insn("j", "UnconditionalBranch", target="nowhere")),
          "functions[0].blocks[0].instructions[0].target", match="unknown block")
    fails(prog(insn("c", "CompareAndBranch", ins=[reg("r0"), imm(1)], comp_op="IS_BIG",
                    on_true="b0", on_false="b0")),
          "functions[0].blocks[0].instructions[0].comp_op", match="IS_LTIMM")
    fails(prog(insn("c", "CompareAndBranch", ins=[reg("r0")], comp_op="IS_LTIMM",
                    on_true="b0", on_false="b0")),
          "functions[0].blocks[0].instructions[0].ins", match="2 ins")


# ---- operands ----------------------------------------------------------------------

def test_operand_records():
    # DMACopy: an opcode taking any number of ins (CCE folds them all; the row's operands, birsim/_load/opcodes.py)
    i = insn("t", "DMACopy", "Pool",
             ins=[ap("x", FULL, offset=512), imm(2.5), imm(7, "int32"), imm_array([1, 2.5]),
                  reg("r0"), {"kind": "register", "regref": "r0", "dtype": "uint32"},
                  {"kind": "physical_ap", "memsetref": "y", "ap": [[1, 1]]}],
             outs=[reg_ap("y", [[0, 1], [1, 4]], "r0", 3, dtype="bfloat16")], op="add")
    m = load(prog(i))
    _, rec = insn_by_name(m, "t")
    ops = operands(m, rec)
    assert (rec["nin"], rec["nout"], rec["opnd"]) == (7, 1, 0)
    K = enums["OPND"]
    assert list(ops["kind"]) == [K["physical_ap"], K["imm_value"], K["imm_value"],
                                 K["imm_array"], K["register_access"],
                                 K["register_access"], K["physical_ap"], K["register_ap"]]
    a = ops[0]
    assert (a["loc"], a["ndim"], a["offset"], a["offset_expr"]) == (0, 2, 512, -1)
    assert list(a["step"]) == [512, 1, 0, 0, 0] and list(a["num"]) == [128, 512, 0, 0, 0]
    assert (ops[1]["imm"], ops[1]["imm_is_int"], ops[1]["dtype"]) == \
        (2.5, 0, dtypes["float32"][0])
    assert (ops[2]["imm_bits"], ops[2]["imm_is_int"], ops[2]["imm"]) == (7, 1, 7.0)
    assert list(m.tables["fpool"][ops[3]["arr_off"]:ops[3]["arr_off"] + 2]) == [1.0, 2.5]
    assert ops[4]["loc"] == 0 and ops[4]["dtype"] == dtypes["int32"][0]
    assert ops[5]["dtype"] == dtypes["uint32"][0]
    assert ops[6]["loc"] == 1 and ops[6]["dtype"] == dtypes["float32"][0]   # set's dtype
    assert (ops[7]["reg"], ops[7]["const_ap_offset"], ops[7]["dtype"]) == \
        (0, 3, dtypes["bfloat16"][0])
    assert rec["i"][2] == alu_ops["add"]                  # DMACopy cce_op ('op')
    assert "SB x[1:128:1, 0:512:1] f32" in m.listing()     # offset 512 elements = partition 1
    m.program


@pytest.mark.parametrize("pattern,path,match", [
    ([[1, 1]] * 6, "ap", "1 to 5"),
    ([], "ap", "1 to 5"),
    ([[512, 128], [1, 0]], "ap[1][1]", "num"),
    ([[-1, 2], [1, 4]], "ap[0]", "partition step"),
    ([[1, 2, 3]], "ap[0]", "pair"),
])
def test_access_pattern_errors(pattern, path, match):
    fails(prog(insn("c", "TensorCopy", ins=[ap("x", pattern)], outs=[ap("y", FULL)])),
          "functions[0].blocks[0].instructions[0].ins[0]." + path, match=match)


def test_negative_free_steps_and_broadcast_allowed():
    load(prog(insn("c", "TensorCopy", ins=[ap("x", [[0, 128], [-1, 4]], offset=4)],
                   outs=[ap("y", FULL)])))


def test_operand_errors():
    base = "functions[0].blocks[0].instructions[0]."
    fails(prog(insn("c", "TensorCopy", ins=[ap("nope", FULL)])), base + "ins[0].memref",
          match="unknown memory location 'nope'")
    fails(prog(insn("c", "TensorCopy", ins=[{"kind": "physical_ap", "memsetref": "zz",
                                             "ap": FULL}])),
          base + "ins[0].memsetref", match="unknown tensor set")
    fails(prog(insn("c", "TensorCopy", ins=[reg("r9")])), base + "ins[0].regref",
          match="unknown register 'r9'")
    fails(prog(insn("c", "TensorCopy", ins=[{"kind": "weird"}])), base + "ins[0].kind",
          match="physical_ap")
    fails(prog(insn("c", "TensorCopy", ins=[ap("x", FULL, dtype="f32")])),
          base + "ins[0].dtype", match="float32")
    fails(prog(insn("c", "TensorCopy", ins=[{"kind": "physical_ap", "ap": FULL}])),
          base + "ins[0]", match="memref")
    fails(prog(insn("c", "TensorCopy", ins=[imm("1.0")])), base + "ins[0].value",
          match="number")


def test_memsetref_needs_one_location():
    two = [{"name": "x0", "type": "DRAM"}, {"name": "x1", "type": "DRAM"}]
    allocs = [tensor("x", locations=two), register("r0")]
    fails(prog(insn("c", "TensorCopy", ins=[{"kind": "physical_ap", "memsetref": "x",
                                             "ap": FULL}]), allocs=allocs),
          "functions[0].blocks[0].instructions[0].ins[0].memsetref", match="exactly one")


def test_registers_resolve_within_function():
    callee = function("g", [], [insn("m", "RegisterMove", ins=[imm(1, "int32")],
                                     outs=[reg("r0")])])
    fails(module([function("main", [register("r0")], []), callee]),
          "functions[1].blocks[0].instructions[0].outs[0].regref", match="function 'g'")


# ---- affine expressions ------------------------------------------------------------

def test_v2_expressions():
    offset = affine([(iv("i"), 2048), (rv("r0"), 4)], 8)
    addrs = [{"kind": "SumKind", "terms": [iv("i"), shard()]},
             {"kind": "FloorDivKind", "numer": {"kind": "MultKind", "var": iv("i"),
                                                "scale": 3}, "denom": 2},
             None]
    body = [insn("c", "TensorCopy", "DVE", ins=[ap("x", FULL, offset=offset)],
                 outs=[sym_ap("y", [[512, 1], [1, 4], [1, 2]], addrs)]),
            insn("io", "Iota", "Pool", outs=[ap("y", FULL, "int32")],
                 base={"kind": "ModuloKind", "numer": iv("i"), "denom": 4},
                 pattern=[[1, 512]], channel_multiplier=512)]
    m = load(prog(loop("l", "i", 0, 4, 1, body)))
    _, rec = insn_by_name(m, "c")
    a, s = operands(m, rec)
    assert expr_code(m, a["offset_expr"]) == [X_IV, 0, X_MUL, 2048, X_REG, 0, X_MUL, 4,
                                              X_ADD, 0, X_CONST, 8, X_ADD, 0]
    assert expr_code(m, s["addrs"][0]) == [X_IV, 0, X_SHARD, 0, X_ADD, 0]
    assert expr_code(m, s["addrs"][1]) == [X_IV, 0, X_MUL, 3, X_FLOORDIV, 2]
    assert list(s["addrs"][2:]) == [-1, -1, -1]
    _, io = insn_by_name(m, "io")
    assert expr_code(m, io["x"][0]) == [X_IV, 0, X_MOD, 4]
    assert io["i"][1] == 512 and list(m.tables["ipool"][io["list"]:io["list"] + 2]) == [1, 512]
    m.program


def test_v1_expressions_and_plain_ints():
    body = [insn("c", "TensorCopy", ins=[ap("x", FULL, offset=affine_v1([("i", 4)], 2048))],
                 outs=[sym_ap("y", [[512, 1], [1, 4]], [7, affine_v1([("i", 1)])])])]
    m = load(prog(loop("l", "i", 0, 4, 1, body), version=1))
    _, rec = insn_by_name(m, "c")
    a, s = operands(m, rec)
    assert expr_code(m, a["offset_expr"]) == [X_IV, 0, X_MUL, 4, X_CONST, 2048, X_ADD, 0]
    assert expr_code(m, s["addrs"][0]) == [X_CONST, 7]
    assert expr_code(m, s["addrs"][1]) == [X_IV, 0]
    m2 = load(prog(insn("io", "Iota", outs=[ap("y", FULL, "int32")], base=5)))
    _, io = insn_by_name(m2, "io")
    assert (io["i"][0], io["x"][0]) == (5, -1)


def test_symbolic_pwap_alias():
    body = [insn("c", "TensorCopy", ins=[dict(sym_ap("x", FULL, [iv("i")]),
                                              kind="symbolic_pwap")], outs=[ap("y", FULL)])]
    m = load(prog(loop("l", "i", 0, 4, 1, body)))
    assert m.tables["opnds"][0]["kind"] == enums["OPND"]["symbolic_ap"]


def test_axis_resolution():
    def use(n):
        return insn(n, "TensorCopy", ins=[sym_ap("x", FULL, [iv("i")])], outs=[ap("y", FULL)])

    # innermost enclosing loop wins over an outer loop of the same name
    m = load(prog(loop("o", "i", 0, 2, 1, [use("c1"), loop("n", "i", 0, 2, 1, [use("c2")])])))
    assert expr_code(m, m.tables["opnds"][0]["addrs"][0]) == [X_IV, 0]
    assert expr_code(m, m.tables["opnds"][2]["addrs"][0]) == [X_IV, 1]
    # not enclosing: the unique loop of that name in the module
    m = load(prog(loop("o", "i", 0, 2, 1, []), use("c")))
    assert expr_code(m, m.tables["opnds"][0]["addrs"][0]) == [X_IV, 0]
    base = "functions[0].blocks[0].instructions[2].ins[0].addrs[0].axis"
    fails(prog(loop("a", "i", 0, 2, 1, []), loop("b", "i", 0, 2, 1, []), use("c")), base,
          match="2 loops")
    fails(prog(use("c")), "functions[0].blocks[0].instructions[0].ins[0].addrs[0].axis",
          match="unknown loop axis 'i'")


def test_expression_errors():
    base = "functions[0].blocks[0].instructions[0].ins[0].offset"

    def bad(off):
        return prog(insn("c", "TensorCopy", ins=[ap("x", FULL, offset=off)]))
    fails(bad({"kind": "Nope"}), base + ".kind", match="AffExprKind")
    fails(bad({"kind": "FloorDivKind", "numer": 1, "denom": 0}), base + ".denom")
    fails(bad({"kind": "AffExprKind", "terms": [{"coeff": 2}]}), base + ".terms[0]",
          match="'idx'")
    fails(bad(affine([(rv("nope"), 1)])), base + ".terms[0].idx.regref")
    fails(bad({"something": 1}), base, match="kind")


# ---- loops -------------------------------------------------------------------------

def test_loop_stride_must_be_positive():
    for stride in (0, -1):
        fails(prog(loop("l", "i", 0, 4, stride, [])),
              "functions[0].blocks[0].instructions[0].LoopAxis.stride", match="> 0")
        fails(prog(dyn_loop("l", "i", 0, affine([(rv("r0"), 1)]), stride, [])),
              "functions[0].blocks[0].instructions[0].DynamicForLoopAxis.stride")


def test_loop_missing_keys():
    fails(prog(insn("l", "Loop", LoopAxis={"name": "i", "ub": 2})),
          "functions[0].blocks[0].instructions[0]", match="'blocks'")
    fails(prog(insn("l", "Loop", blocks=[])), "functions[0].blocks[0].instructions[0]",
          match="'LoopAxis'")


def test_dynamic_for_loop_slots():
    lb = affine([(iv("o"), 2)], 1)
    inner = dyn_loop("d", "k", lb, affine([(rv("r0"), 3)], 5), 2, [insn("n", "NoOp")])
    m = load(prog(loop("o", "o", 0, 2, 1, [inner])))
    _, rec = insn_by_name(m, "d")
    assert list(rec["i"][:5]) == [5, 3, 0, 0, 1]
    assert expr_code(m, rec["x"][0]) == [X_IV, 0, X_MUL, 2, X_CONST, 1, X_ADD, 0]
    assert rec["x"][1] == -1 and expr_code(m, rec["x"][2]) == [X_CONST, 2]
    m.program


@pytest.mark.parametrize("ub", [
    affine([(rv("r0"), 1), (rv("r0"), 1)]),                   # two terms
    affine([(iv("o"), 1)], 4),                                # term is not a register
    affine([], 8),                                            # no term at all
    rv("r0"),                                                 # not an AffExprKind
    16,
    {"kind": "SumKind", "terms": [rv("r0")]},
])
def test_dynamic_for_loop_ub_code_1910(ub):
    err = fails(prog(loop("o", "o", 0, 2, 1, [dyn_loop("d", "k", 0, ub, 1, [])])),
                "functions[0].blocks[0].instructions[0].blocks[0].instructions[0]"
                ".DynamicForLoopAxis.ub", code=1910)
    assert "Only scalar values supported in Dynamic For Loop upper bound expressions" \
        in str(err)


def test_do_while_cond():
    fails(prog(insn("d", "DoWhile", cond=rv("nope"), blocks=[])),
          "functions[0].blocks[0].instructions[0].cond.regref", match="unknown register")
    fails(prog(insn("d", "DoWhile", blocks=[])), "functions[0].blocks[0].instructions[0]",
          match="'cond'")


# ---- sync --------------------------------------------------------------------------

def test_sync_records():
    s = sync_info([wait(3, "sem-ge-imm", 2), wait(4, "sem-ge-reg", None, regref="r0"),
                   wait(7, "evt-set-then-clear", None, type="event")],
                  [update(3, "sem-add-imm", 1), update(8, "evt-set", None, type=0),
                   update(0, "sem-inc", 1, target_core=1), update(5, 5, 9, type=1)])
    m = load(prog(copy_insn(sync=s), copy_insn("cp2", sync=sync_info([], [update(1)]))))
    _, rec = insn_by_name(m, "cp")
    assert (rec["nwait"], rec["nupd"]) == (3, 4)
    s0 = int(rec["sync"])
    S = m.tables["syncs"][s0:s0 + 7]
    W, U, T = enums["WAIT"], enums["UPDATE"], enums["SYNCTYPE"]
    assert list(S["mode"]) == [W["sem_ge_imm"], W["sem_ge_reg"], W["evt_set_then_clear"],
                               U["sem_add_imm"], U["evt_set"], U["sem_inc"], U["sem_wr_imm"]]
    assert list(S["type"]) == [T["semaphore"], T["semaphore"], T["event"],
                               T["semaphore"], T["event"], T["semaphore"], T["semaphore"]]
    assert list(S["reg"][:3]) == [-1, 0, -1] and list(S["target_core"][3:7]) == [-1, -1, 1, -1]
    assert list(S["value"]) == [2, 0, 0, 1, 0, 1, 9]
    rec2 = insn_by_name(m, "cp2")[1]
    assert (rec2["nwait"], rec2["nupd"]) == (0, 1) and len(m.tables["syncs"]) == 8
    assert m.tables["syncs"][int(rec2["sync"])]["value"] == 1
    m.program


@pytest.mark.parametrize("entry,path,match", [
    (wait(256), "id", "0..255"),
    (wait(-1), "id", "0..255"),
    (wait(1, "sem-gt-imm"), "mode", "sem-ge-imm"),
    (wait(1, "evt-set-then-clear", type="semaphore"), "type", "event"),
    (wait(1, "sem-ge-reg"), "", "'regref'"),
    (wait(1, "sem-ge-reg", regref="zz"), "regref", "unknown register"),
    ({"mode": "sem-ge-imm"}, "", "'id'"),
])
def test_sync_errors(entry, path, match):
    p = "functions[0].blocks[0].instructions[0].sync_info.on_wait[0]"
    fails(prog(copy_insn(sync=sync_info([entry]))), p + ("." + path if path else ""),
          match=match)


def test_sync_update_id_range():
    fails(prog(copy_insn(sync=sync_info([], [update(300)]))),
          "functions[0].blocks[0].instructions[0].sync_info.on_update[0].id")


# ---- per-opcode slots --------------------------------------------------------------

def test_compute_slots():
    ins, outs = [ap("x", FULL)], [ap("y", FULL)]
    m = load(prog(
        insn("ts", "TensorScalar", "DVE", ins, outs, op0="mult", const0=2, reverse0=True,
             op1="add", const1=-1.5),
        insn("ts1", "TensorScalar", "DVE", ins, outs, op0="subtract"),
        insn("tr", "TensorReduce", "DVE", ins, outs, op="max", axis="XY", negate=True),
        insn("act", "Activation", "Activation", ins, outs, func="Exp", acc="Zero", scale=0.5,
             alpha=0.1, bias=2),
        insn("act2", "Activation", "Activation", ins, outs, activation_func="Gelu"),
        insn("mm", "Matmult", "PE", ins, outs, accumulation_flag=3),
        insn("mm2", "Matmult", "PE", ins, outs, start_tensor_calc=True),
        insn("mm3", "Matmult", "PE", ins, outs, start_tensor_calc=False),
        insn("ra", "RegisterAlu", "SP", [reg("r0"), imm(1, "int32")], [reg("r0")],
             op="arith_shift_left", is_64bit=True),
        insn("gr", "GroupResetSemaphores", "SP", sema_group=[1, 5], mode="SemaphoreZero")))

    def g(n):
        return insn_by_name(m, n)[1]
    assert list(g("ts")["i"][:4]) == [alu_ops["mult"], alu_ops["add"], 1, 0]
    assert list(g("ts")["f"][:2]) == [2.0, -1.5]
    assert list(g("ts1")["i"][:2]) == [alu_ops["subtract"], alu_ops["bypass"]]
    assert list(g("tr")["i"][:3]) == [alu_ops["max"], enums["AXIS"]["XY"], 1]
    assert list(g("act")["i"][:2]) == [act_funcs["Exp"], enums["ACC"]["Zero"]]
    assert list(g("act")["f"][:3]) == [0.5, 0.1, 2.0]
    assert g("act2")["i"][0] == act_funcs["Gelu"] and g("act2")["f"][0] == 1.0
    assert [g(n)["i"][0] for n in ("mm", "mm2", "mm3")] == [3, 2, 1]
    assert list(g("ra")["i"][:2]) == [alu_ops["arith_shift_left"], 1]
    gr = g("gr")
    assert list(m.tables["ipool"][gr["list"]:gr["list"] + gr["nlist"]]) == [1, 5]
    m.program


def test_compute_slot_errors():
    base = "functions[0].blocks[0].instructions[0]."
    fails(prog(insn("t", "TensorTensor", op="multiply")), base + "op", match="mult")
    fails(prog(insn("a", "Activation", func="Softmax")), base + "func", match="Gelu")
    fails(prog(insn("t", "TensorReduce", op="add", axis="Q")), base + "axis", match="XYZW")
    fails(prog(insn("t", "TensorScalar", op0="add", reverse0="yes")), base + "reverse0",
          match="boolean")


def test_dma_copy_and_descriptor_slots():
    ins, outs = [ap("x", FULL), ap("x", FULL)], [ap("y", FULL)]
    m = load(prog(insn("c", "DMACopy", "DMA", ins, outs, mode="CCE", cce_op="max",
                       constants=[1, 0.5]),
                  insn("c2", "DMACopy", "DMA", ins[:1], outs, mode="Transpose",
                       transpose_op="XYZW"),
                  insn("c3", "DMACopy", "DMA", ins, outs, mode="CCE")))

    def g(n):
        return insn_by_name(m, n)[1]
    c = g("c")
    assert list(c["i"][:3]) == [enums["COPYMODE"]["CCE"], 0, alu_ops["max"]]
    assert list(m.tables["fpool"][c["flist"]:c["flist"] + c["nflist"]]) == [1.0, 0.5]
    assert list(g("c2")["i"][:2]) == [enums["COPYMODE"]["Transpose"],
                                      enums["TRANSPOSE"]["XYZW"]]
    assert g("c3")["i"][2] == alu_ops["add"]
    fails(prog(insn("c", "DMACopy", mode="Gather")),
          "functions[0].blocks[0].instructions[0].mode", match="Replicate")


def test_memset():
    out8 = [ap("y", [[512, 128], [1, 512]], "uint8")]
    m = load(prog(insn("m", "Memset", "Pool", outs=out8, constant=255)))
    _, rec = insn_by_name(m, "m")
    assert list(rec["i"][:2]) == [enums["MEMSET"]["Const"], 255]
    fails(prog(insn("m", "Memset", "Pool", outs=out8, constant=256)),
          "functions[0].blocks[0].instructions[0].constant", match="does not fit")
    fails(prog(insn("m", "Memset", "Pool", outs=[ap("y", FULL)], constant=-1)),
          "functions[0].blocks[0].instructions[0].constant", match="non-negative")
    load(prog(insn("m", "Memset", "Pool", outs=[ap("y", FULL)], constant=0xFFFFFFFF)))


def test_iota_pattern_errors():
    fails(prog(insn("io", "Iota", outs=[ap("y", FULL, "int32")], pattern=[[1, 0]])),
          "functions[0].blocks[0].instructions[0].pattern[0]")


# ---- calls and kernels -------------------------------------------------------------

def _callee(name="g"):
    return function(name, [tensor("a", "ExternalInput", shape=[128, 512]),
                           tensor("w", "Internal", shape=[1, 4]),
                           tensor("b", "ExternalOutput", shape=[128, 512])],
                    [insn("cp", "TensorCopy", ins=[ap("a", FULL)], outs=[ap("b", FULL)])])


def test_call_and_nki_kernel_bindings():
    main = function("main", [tensor("x"), tensor("y")], [
        insn("call", "Call", target="g", arguments={"a": "x", "b": "y"}),
        insn("nki", "NKIKernel", func="k", func_args=["x"], func_outs=["y"])])
    m = load(module([main, _callee()], nki_functions=[_callee("k")]))
    assert m.functions == ("main", "g", "k") and m.nki_functions == ("k",)
    _, call = insn_by_name(m, "call")
    _, nki = insn_by_name(m, "nki")
    ip = m.tables["ipool"]
    assert call["target"] == 1 and list(ip[call["list"]:call["list"] + 4]) == [2, 0, 4, 1]
    assert nki["target"] == 2 and list(ip[nki["list"]:nki["list"] + 4]) == [5, 0, 7, 1]
    assert m.tables["sets"][2]["io"] == 0            # callee inputs are not run inputs
    m.program


def test_call_errors():
    base = "functions[0].blocks[0].instructions[0]."

    def mk(i):
        return module([function("main", [tensor("x")], [i]), _callee()])
    fails(mk(insn("c", "Call", target="nope")), base + "target", match="unknown function")
    fails(mk(insn("c", "Call", target="g", arguments={"zz": "x"})), base + "arguments.zz",
          match="function 'g'")
    fails(mk(insn("c", "Call", target="g", arguments={"a": "zz"})), base + "arguments.a",
          match="function 'main'")


def test_nki_kernel_func_code_250():
    def mk(i):
        return module([function("main", [tensor("x"), tensor("y")], [i]), _callee()],
                      nki_functions=[_callee("k")])

    err = fails(mk(insn("n", "NKIKernel", func_args=["x"], func_outs=["y"])),
                "functions[0].blocks[0].instructions[0]", code=250)
    assert "I.getFunc() != nullptr" in str(err)
    for func in ("nope", "g"):                       # g is a function, not an NKI function
        err = fails(mk(insn("n", "NKIKernel", func=func, func_args=["x"], func_outs=["y"])),
                    "functions[0].blocks[0].instructions[0].func", code=250)
        assert "I.getFunc() != nullptr" in str(err)
    fails(mk(insn("n", "NKIKernel", func="k", func_args=[], func_outs=["y"])),
          "functions[0].blocks[0].instructions[0].func_args", match="1 inputs")


def test_custom_op_and_bir_kernel():
    ins, outs = [ap("x", FULL)], [ap("y", FULL)]
    m = load(prog(
        insn("co", "CustomOp", "Pool", ins, outs, opFunctionName="my_op",
             srcsShape=[[128, 512]], dstsShape=[[128, 4, 128]]),
        insn("bk", "BIRKernel", "Pool", ins, outs, kernel_name="attn",
             srcs_shape=[[128, 512]], dsts_shape=[[128, 512]],
             kernel_attrs={"scale": 0.5, "lnc_size": 1}, is_causal=True, lnc_size=2)))
    names = strings(m)
    _, co = insn_by_name(m, "co")
    _, bk = insn_by_name(m, "bk")
    ip = m.tables["ipool"]
    assert names[int(co["str"])] == "my_op" and json.loads(names[int(co["str2"])]) == {}
    assert list(ip[co["list"]:co["list"] + co["nlist"]]) == [2, 128, 512, 3, 128, 4, 128]
    assert names[int(bk["str"])] == "attn"
    attrs = json.loads(names[int(bk["str2"])])
    assert attrs == {"is_causal": True, "lnc_size": 1, "scale": 0.5,
                     "kernel_attrs": {"scale": 0.5, "lnc_size": 1}}
    assert list(ip[bk["list"]:bk["list"] + bk["nlist"]]) == [2, 128, 512, 2, 128, 512]
    assert m.tables["insns"][0]["str2"] >= 0 and m.tables["insns"][0]["x"][0] == -1
    fails(prog(insn("co", "CustomOp", "Pool", ins, outs)),
          "functions[0].blocks[0].instructions[0]", match="'opFunctionName'")
    m.program


# ---- DMA queues --------------------------------------------------------------------

def _dma_module(trigger_fn="main", blocks=("blk0", "blk1"), extra=()):
    def desc(n):
        return insn(n, "DMADescriptorCopy", "DMA", ins=[ap("x", FULL)], outs=[ap("y", FULL)])

    q = dma_queue("q0", [dma_block("blk0", desc("d0"), desc("d1"),
                                   sync=sync_info([wait(1)], [update(2)]), trigger="trig"),
                         dma_block("blk1", desc("d2"))], semaphores=[10, 11], special=[12])
    trig = insn("trig", "DMATrigger", "DMA", queue="q0", dma_blocks=list(blocks))
    allocs = [tensor("x"), tensor("y")]
    body = [loop("l", "i", 0, 4, 1, [trig]),
            insn("sw", "SwitchQueueInstance", "SP", queue="q0", instance="blk1",
                 no_rearm=True),
            insn("rs", "ResetQueueInstance", "SP", queue="q0")] + list(extra)
    funcs = [function("main", allocs, body if trigger_fn == "main" else body[1:])]
    if trigger_fn != "main":
        funcs.append(function(trigger_fn, allocs, [trig]))
    return module(funcs, dma_queues=[q])


def test_dma_queue_tables():
    m = load(_dma_module())
    T, names, ip = m.tables, strings(m), m.tables["ipool"]
    q = T["queues"][0]
    assert names[int(q["name"])] == "q0"
    assert list(ip[q["sems"]:q["sems"] + q["nsems"]]) == [10, 11]
    assert list(ip[q["special"]:q["special"] + q["nspecial"]]) == [12]
    ti, trig = insn_by_name(m, "trig")
    b0, blk0 = insn_by_name(m, "blk0")
    b1, blk1 = insn_by_name(m, "blk1")
    assert blk0["op"] == opcodes["DMABlock"][0]
    assert list(trig["i"][:2]) == [0, 0] and list(ip[trig["list"]:trig["list"] + 2]) == [b0, b1]
    assert T["module"][0]["ntriggers"] == 1
    region = T["regions"][blk0["body"]]
    assert region["owner"] == b0 and region["nblock"] == 1 and region["func"] == 0
    blk = T["blocks"][region["block0"]]
    assert names[int(blk["name"])] == "blk0" and blk["ninsn"] == 2
    assert [names[int(T["insns"][i]["name"])]
            for i in range(blk["insn0"], blk["insn0"] + 2)] == ["d0", "d1"]
    assert (blk0["nwait"], blk0["nupd"]) == (1, 1)
    assert T["insns"][blk["insn0"]]["i"][0] == enums["COPYMODE"]["Copy"]
    _, sw = insn_by_name(m, "sw")
    assert list(sw["i"][:2]) == [0, 1] and list(ip[sw["list"]:sw["list"] + sw["nlist"]]) == [b1]
    _, rs = insn_by_name(m, "rs")
    assert list(ip[rs["list"]:rs["list"] + rs["nlist"]]) == [b0, b1]   # default: all blocks
    assert "dma_queue q0" in m.listing()
    m.program


def test_dma_block_in_other_function():
    m = load(_dma_module("helper"))
    _, blk0 = insn_by_name(m, "blk0")
    assert blk0["func"] == 1 and m.tables["regions"][blk0["body"]]["func"] == 1


def test_dma_errors():
    fails(_dma_module(blocks=("blk0",)), "dma_queues[0].dma_blocks[1].name",
          match="not listed by any DMATrigger")
    mod = _dma_module(extra=[insn("t2", "DMATrigger", queue="q0", dma_blocks=["blk1"])])
    mod["functions"].append(function("h", [], [insn("t3", "DMATrigger", queue="q0",
                                                    dma_blocks=["blk1"])]))
    fails(mod, "dma_queues[0].dma_blocks[1].name", match="different functions")
    fails(_dma_module(blocks=("blk0", "blk1", "blk9")),
          "functions[0].blocks[0].instructions[0].blocks[0].instructions[0].dma_blocks[2]",
          match="unknown DMA block")
    mod = _dma_module()
    mod["functions"][0]["blocks"][0]["instructions"][0]["blocks"][0]["instructions"][0][
        "queue"] = "q9"
    fails(mod, "functions[0].blocks[0].instructions[0].blocks[0].instructions[0].queue",
          match="unknown DMA queue")
    mod = _dma_module()
    mod["dma_queues"][0]["dma_blocks"][0]["dma_trigger"] = "nope"
    fails(mod, "dma_queues[0].dma_blocks[0].dma_trigger", match="unknown DMATrigger")
    mod = _dma_module()
    mod["dma_queues"][0]["dma_blocks"][1]["instructions"][0]["ins"][0]["memref"] = "zz"
    fails(mod, "dma_queues[0].dma_blocks[1].instructions[0].ins[0].memref",
          match="unknown memory location")
    mod = _dma_module()
    mod["dma_queues"][0]["dma_blocks"][1]["instructions"].append(insn("bad", "TensorCopy"))
    fails(mod, "dma_queues[0].dma_blocks[1].instructions[1]", match="not allowed")
    mod = _dma_module()
    mod["dma_queues"].append(copy.deepcopy(mod["dma_queues"][0]))
    fails(mod, "dma_queues[1].name", match="duplicate")


# ---- Module ------------------------------------------------------------------------

def test_listing_shows_structure():
    m = load(_dma_module(extra=[copy_insn("cp9", sync=sync_info([wait(3, value=2)]))]))
    text = str(m)
    assert "function main (entry)" in text
    assert "tensor x Internal f32 [128, 512]: SB x[128 x 2048]" in text
    assert "    [0] l: Unassigned Loop  i in range(0, 4, 1)" in text
    assert "      block l_body:" in text and "        [0] trig: DMA DMATrigger" in text
    assert "cp9: DVE TensorCopy SB y[0:128:1, 0:512:1] f32 <- SB x[0:128:1, 0:512:1] f32" \
        in text
    assert "{wait sem 3 sem-ge-imm 2}" in text
    assert "d0: DMA DMADescriptorCopy" in text
    assert repr(m).startswith("<birsim.Module entry='main'")


def test_tables_and_program_for_arch():
    m = load(copy_program())
    for name in ("module", "funcs", "sets", "locs", "regs", "regions", "blocks", "syncs",
                 "opnds", "insns", "queues"):
        assert isinstance(m.tables[name], np.ndarray)
        assert m.tables[name].dtype.itemsize == birsim._birsim.layouts[name]["itemsize"]
    assert m.tables["strings"].endswith(b"\0") and m.tables["exprs"].dtype == np.int64
    assert m.program_for_arch("trn1") is not None
    with pytest.raises(ValueError):
        m.program_for_arch("trn9")


def test_loaded_copy_runs():
    m = load(copy_program())
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    out = birsim.run(m, {"in": a})
    assert np.array_equal(out["out"], a)


# ---- dtypes ------------------------------------------------------------------------

def test_numpy_dtypes():
    import ml_dtypes
    assert numpy_dtype("float32r") == np.float32
    assert numpy_dtype("bfloat16") == ml_dtypes.bfloat16
    assert numpy_dtype("float8e4") == ml_dtypes.float8_e4m3
    assert numpy_dtype("fp8_e4m3fn") == ml_dtypes.float8_e4m3fn
    assert numpy_dtype("float8e5") == ml_dtypes.float8_e5m2
    assert numpy_dtype("float8e3") == ml_dtypes.float8_e3m4
    assert numpy_dtype("float8_e4m3fn_x4") == np.uint32
    assert numpy_dtype("fp4_e2m1fn_x4") == np.uint16
    assert numpy_dtype("int16") == np.int16
    for name in dtypes:                  # every dtype the core knows has a NumPy type
        assert numpy_dtype(name).itemsize == dtypes[name][1]
    with pytest.raises(ValueError):
        numpy_dtype("float128")


def test_public_modules_have_all():
    import birsim.dtypes
    import birsim.loader
    import birsim.module
    for mod in (birsim.loader, birsim.module, birsim.dtypes):
        assert mod.__all__ and all(hasattr(mod, n) for n in mod.__all__)


def test_pathlib_path_of_missing_file():
    with pytest.raises(ProgramError):
        load(pathlib.Path("/nonexistent/x.json"))


def test_offset_counts_elements_of_the_operand_dtype():
    """BIR-JSON: ``offset`` counts elements like the steps. A bf16 copy from offset 3 of
    a [1, 8] row reads elements 3..6 (a byte reading would start at element 1.5 and be
    rejected); an int32 copy with offset 5 reads element 5."""
    import ml_dtypes
    for dt, npdt, off in (("bfloat16", ml_dtypes.bfloat16, 3), ("int32", np.int32, 5),
                          ("float32", np.float32, 1)):
        allocs = [tensor("x", "ExternalInput", dt, [1, 8], "DRAM"),
                  tensor("y", "ExternalOutput", dt, [1, 2], "DRAM")]
        m = module([function("main", allocs, [insn(
            "c", "TensorCopy", "Pool", ins=[ap("x", [[8, 1], [1, 2]], dt, offset=off)],
            outs=[ap("y", [[2, 1], [1, 2]], dt)])])])
        x = np.arange(8).astype(npdt).reshape(1, 8)
        y = birsim.run(m, {"x": x})["y"]
        assert y.tolist() == x[:, off:off + 2].tolist(), dt
