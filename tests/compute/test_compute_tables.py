"""The Python-visible tables come from the C X-macro lists and agree with the specs."""

import re

import pytest
from pathlib import Path

import birsim
from birsim import _birsim
from birsim.ops import ActivationFunction, AluOp, Dtype, Engine, Op, Status, enums

SPEC = Path(__file__).resolve().parents[2] / "docs/spec/machine-model.md"


def test_all_110_opcodes_in_instruction_type_order():
    assert len(Op) == 113           # the 110 of 2.24, then TopK, LocalGather, Nonzero
    assert [Op(c).name for c in (110, 111, 112)] == ["TopK", "LocalGather", "Nonzero"]
    assert Op.Generic == 0 and Op.Matmult == 8 and Op.Loop == 105 and Op.DoWhile == 108
    assert Op.TongaReduceMacroSymbolic == 109


def test_opcode_classes_match_machine_model_table():
    rows = re.findall(r"\|\s*(\d+)\s*\|\s*(\w+)\s*\|\s*[\w/-]+\s*\|\s*([KBNLE])\b",
                      SPEC.read_text())
    seen = {int(n): (name, cls) for n, name, cls in rows}
    assert len(seen) == 110
    for code, (name, cls) in seen.items():          # the newer names come after
        assert Op(code).name == name
        assert Op(code).sim_class == UPGRADED.get(name, (cls, cls))[1], name
        if name in UPGRADED:                        # the spec still says what it said
            assert cls == UPGRADED[name][0], name


#: Opcodes the compiler's simulator skips (class B in docs/spec/machine-model.md) that birsim
#: runs because the NKI docs pin their semantics (README: NonzeroWithCount row).
UPGRADED = {"NonzeroWithCount": ("B", "K")}


def test_dtypes_alu_act_engine_tables():
    assert len(Dtype) == 20 and Dtype.bfloat16.itemsize == 2 and Dtype.float8_e4m3fn_x4.itemsize == 4
    assert [d.itemsize for d in Dtype] == [1, 1, 2, 1, 1, 1, 1, 1, 4, 4, 2, 2, 2, 2, 4, 4, 4, 4, 8, 8]
    assert len(AluOp) == 33 and AluOp.mult == 6 and AluOp.mod_int == 32
    assert len(ActivationFunction) == 31 and ActivationFunction.Is_finite == 29
    assert Engine.PE == 3 and Engine.ALL == 7
    assert enums["CMP"].IS_GTREG == 11 and enums["UPDATE"].sem_wr_imm == 5


def test_every_status_maps_to_a_birsim_exception_or_builtin():
    for st in Status:
        if st.name == "OK":
            continue
        assert st.value > 0


def test_layouts_cover_every_table():
    assert set(_birsim.layouts) == {"module", "funcs", "sets", "locs", "regs", "regions",
                                    "blocks", "syncs", "opnds", "insns", "queues"}
    for name, lay in _birsim.layouts.items():
        end = max(off + {"I32": 4, "I64": 8, "F64": 8}[t] * n for _, off, t, n in lay["fields"])
        assert end <= lay["itemsize"], name


def test_public_api_names():
    for name in birsim.__all__:
        assert hasattr(birsim, name), name
