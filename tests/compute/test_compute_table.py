"""The opcode table of csrc/bs_ops.def: one handler per opcode, named parameter slots.

Every K-class opcode has a handler (a kernel, the VM, or an explicit `todo`); the slots
the loader writes, the verifier accepts, the kernels read and the listing prints are the
same named BS_PARAM rows, so a slot written under another opcode's layout is rejected.
"""

import numpy as np
import pytest

import birsim
from birsim import _birsim
from birsim._load.insns import Slots, fresh_slots
from birsim._load.tables import program_parts

from bir import function, insn, module, tensor, whole

SLOT_COUNTS = {"i": 8, "f": 4, "x": 4}


def test_every_opcode_has_a_handler():
    assert set(_birsim.handlers) == set(_birsim.opcodes)
    for name, (_, sim, fam) in _birsim.opcodes.items():
        h = _birsim.handlers[name]
        assert h, name
        if sim != "K":
            assert h == "vm", "%s is class %s but names handler %s" % (name, sim, h)


def test_k_class_handlers_are_kernels_vm_or_todo():
    k_ops = [n for n, (_, sim, _f) in _birsim.opcodes.items() if sim == "K"]
    assert len(k_ops) == 92          # 88 of 2.24 (+ NonzeroWithCount, pinned by NKI) + TopK, LocalGather, Nonzero
    kernels = {_birsim.handlers[n] for n in k_ops} - {"vm", "todo"}
    # a kernel stem is the name of one of the K opcodes it serves (bs_k_<Opcode>)
    assert kernels <= set(k_ops)
    vm_fams = {_birsim.opcodes[n][2] for n in k_ops if _birsim.handlers[n] == "vm"}
    # indexed moves, collectives and the cross-core / dynamic copies need the VM's stores
    # and cores (vm/gather.c, vm/collective.c)
    assert vm_fams <= {"reg", "sync", "term", "call", "custom", "dma", "nop", "indirect",
                       "collective", "copy"}


def test_param_slots_unique_and_in_range():
    assert set(_birsim.params) == set(_birsim.opcodes)
    for op, layout in _birsim.params.items():
        seen = set()
        for field, (slot, index) in layout.items():
            assert slot in SLOT_COUNTS and 0 <= index < SLOT_COUNTS[slot], (op, field)
            assert (slot, index) not in seen, (op, field)
            seen.add((slot, index))


def test_shared_kernels_share_slot_layouts():
    p = _birsim.params
    assert p["TensorScalarPtr"].items() >= p["TensorScalar"].items()
    for op in ("DMADescriptorCopy", "DMADescriptorCCE", "DMADescriptorTranspose",
               "DMADescriptorReplicate"):
        assert p["DMACopy"].items() >= p[op].items()    # DMACopy adds oob_skip
    assert p["Loop"]["axis"] == p["DynamicForLoop"]["axis"]


def test_slots_reject_an_undeclared_name():
    rec = {}
    fresh_slots(rec)
    s = Slots(rec, _birsim.params["TensorReduce"], "TensorReduce")
    s["negate"] = 1
    assert rec["i"][_birsim.params["TensorReduce"]["negate"][1]] == 1
    with pytest.raises(KeyError, match="TensorReduce has no parameter 'negat'"):
        s["negat"] = 1


def _tt_module():
    return birsim.load(module([function("main", [
        tensor("a", "ExternalInput", "float32", [4, 8], "DRAM"),
        tensor("b", "ExternalOutput", "float32", [4, 8], "DRAM")], [
        insn("tt", "TensorTensor", "DVE", ins=[whole("a", [4, 8]), whole("a", [4, 8])],
             outs=[whole("b", [4, 8])], op="add")])]))


@pytest.mark.parametrize("slot,index,value", [("i", 3, 5), ("f", 1, 1.5), ("x", 0, 0)])
def test_verifier_rejects_values_in_undeclared_slots(slot, index, value):
    m = _tt_module()
    tables = dict(m.tables)
    insns = tables["insns"].copy()
    insns[slot][0][index] = value
    tables["insns"] = insns
    with pytest.raises(birsim.ProgramError,
                       match=r"TensorTensor declares no parameter %s\[%d\]" % (slot, index)):
        _birsim.Program(program_parts(tables))


def test_declared_slot_is_accepted_and_used():
    m = _tt_module()
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = birsim.Simulator(m).run({"a": a})
    np.testing.assert_array_equal(out["b"], a + a)
    tables = dict(m.tables)
    insns = tables["insns"].copy()
    insns["i"][0][_birsim.params["TensorTensor"]["op"][1]] = birsim.ops.AluOp.mult
    tables["insns"] = insns
    _birsim.Program(program_parts(tables))        # verifies


def test_listing_names_parameters():
    assert "tt: DVE TensorTensor" in _tt_module().listing()
    assert "op=add" in _tt_module().listing()
