"""The BIR enumerations as Python enums, generated from the C core's X-macro lists.

Nothing here re-declares a name or number: every enum is built from the tables the
extension exports (``csrc/bs_ops.def``, ``bs_dtypes.def``, ``bs_alu.def``,
``bs_act.def``, ``bs_enums.def``, ``bs_status.def``).

    >>> from birsim.ops import Op, Dtype, AluOp
    >>> Op.Matmult, Op["TensorTensor"].family
"""

import enum

from . import _birsim

__all__ = ["Op", "Dtype", "AluOp", "ActivationFunction", "Engine", "Status", "enums",
           "OPCODE_CLASSES"]

#: What each simulator class letter of bs_ops.def means (BS_SIM_CLASSES, csrc/core/common.h).
OPCODE_CLASSES = dict(_birsim.classes["sim"])


class _Op(enum.IntEnum):
    @property
    def sim_class(self):
        """K, B, N, L or E (see OPCODE_CLASSES)."""
        return _birsim.opcodes[self.name][1]

    @property
    def family(self):
        return _birsim.opcodes[self.name][2]


class _Dtype(enum.IntEnum):
    @property
    def itemsize(self):
        return _birsim.dtypes[self.name][1]

    @property
    def kind(self):
        """U unsigned, S signed, F float, R raw byte, P packed x4."""
        return _birsim.dtypes[self.name][2]


def _make(name, table, base=enum.IntEnum):
    return base(name, sorted(table.items(), key=lambda kv: kv[1]), module=__name__)


Op = _make("Op", {k: v[0] for k, v in _birsim.opcodes.items()}, _Op)
Dtype = _make("Dtype", {k: v[0] for k, v in _birsim.dtypes.items()}, _Dtype)
AluOp = _make("AluOp", _birsim.alu_ops)
ActivationFunction = _make("ActivationFunction", _birsim.act_funcs)
Engine = _make("Engine", _birsim.enums["ENGINE"])
Status = _make("Status", _birsim.statuses)

#: Every small enumeration of bs_enums.def: {group: IntEnum}.
enums = {group: _make(group.title().replace("_", ""), values)
         for group, values in _birsim.enums.items()}
