"""ONE row per opcode: everything the loader, its C walker and the docs know about an
opcode's JSON keys (docs/DESIGN.md, "Loader").

Each non-abstract opcode of csrc/bs_ops.def has an :class:`Op` row in :data:`OPS` (tests/
house/test_house_layers.py checks it):

- ``params``: the declared parameter rows ``(slot, key or (key, alias...), kind, default)``
  that BOTH readers take -- the Python path (``insns.read_params``) and the C walker
  (``fastload``, which receives them at import). ``slot`` names a BS_PARAM slot of
  bs_ops.def. Kinds: "alu" (an ALU op name), ("enum", GROUP, what) (``_birsim.enums[GROUP]``),
  ("act", what) (activation functions), "bool" (0/1), "num" (a float slot), "not_bool" (a
  bool stored inverted: oob_is_err -> oob_skip), ("int", lo, hi), ("acc_flags",)
  (Matmult's accumulation_flag, else start_tensor_calc: true 2, false 1, absent 0), ("raw",
  flag slot, value slot) (Memset's constant: a JSON float is a value, an integer the raw
  bits fitting outs[0]'s item size), ("acc", k) (the engine accumulator: command, reduce_op,
  reduce_init; LoadAccumulate's start is ins[k]; ("acc", k, op) folds with ``op`` when
  reduce_op is absent, else add), ("acc_cmd",) (the accumulator command alone), ("cmp",) (a
  comparison: is_equal ... is_le and their NKI/KLR spellings), ("count",) (a number > 0 and
  finite, into a float slot), ("const", GROUP, name) (no key: the slot is the opcode's
  constant ``_birsim.enums[GROUP][name]``), ("enum", GROUP, what, aliases) (an enum with
  alternative spellings), ("ilist", lo, hi) (a list of integers within [lo, hi] into the
  record's ``list``: slot None; default None: the handler reads an absent list, the C
  walker declines any absent list), ("ilist", lo, hi, n, (a, b)) (exactly n integers,
  none within [a, b]: StreamShuffle's mask), ("pairs", lo, hi, least) (a list of [x, y]
  integer pairs within [lo, hi], y >= least, flattened into the record's ``list``: Iota's
  pattern); these last two are read by their opcode's ``insns.PARAMS_FIRST`` handler,
  which gives their errors. Default REQUIRED: the key must be given.
- ``keys``: the other keys the opcode's Python handler (``insns._HANDLERS``) reads, a
  group ``(key, alias...)`` for alternative spellings. An instruction carrying one of them
  is declined by the C walker (the handler reads it).
- ``operands``: (most ``ins``, most ``outs``), None for any; more is a ProgramError.
- ``ignored``: documented keys birsim ignores on purpose (no effect on the numbers).
- ``unmodelled``: {key: (accepted(value), the modelled value)}: a documented key birsim
  models only at that value; any other value is a ProgramError naming it.
- ``warns``: the topic of the load-time warning the handler gives every instruction of
  the opcode (once per module): the C walker declines the first it meets (the Python
  path warns there) and takes the later ones.
- ``slow_values``: {key: values} a parameter row reads but the handler reads further
  (CollectiveCompute's Permute kinds, CopyPredicated's reduce_op bypass): the C walker
  declines an instruction carrying one.
- ``example``: the instruction docs/instructions.md prints (``B.insn(opcode, engine, ins,
  outs, **keys)``; operands are expressions over :data:`EXAMPLE_OPERANDS` and ``B`` =
  :mod:`birsim.build`); tests/house/test_house_layers.py loads every printed one.

A leaf: it imports nothing but :mod:`.schema`'s MISSING.
"""

from typing import Any, Dict, NamedTuple, Optional, Tuple

from .schema import MISSING

__all__ = ["OPS", "Op", "Example", "REQUIRED", "COMMON", "LATENCY_KEY", "EXAMPLE_OPERANDS",
           "EXAMPLE_CONTEXT", "BIRKERNEL_ATTRS", "row"]

#: A parameter row's default when the key must be given (``get`` then raises "missing
#: required key").
REQUIRED = MISSING

#: The compiler's static cost of an instruction in ns (emit_predicted_latency; docs/
#: spec/compiler-dumps.md): any instruction may carry it; ``timing="compiler"`` uses it as
#: the instruction's engine time (docs/timing.md), other modes keep birsim's own cost.
LATENCY_KEY = "predicted_latency_ns"

#: Keys every instruction may carry (read by the loader's generic passes).
COMMON = frozenset({"name", "opcode", "type", "instruction_type", "engine", "ins", "outs",
                    "sync_info", "dependencies", LATENCY_KEY})

#: The BIRKernel record keys passed to its kernel as attributes when present (docs/spec/BIR-JSON.md
#: "kernel_sim (birsim's reading)"); no other key of the record is.
BIRKERNEL_ATTRS = ("sb_buf_shape", "psum_buf_shape", "auto_cast", "is_causal",
                   "fused_rmsnorm", "norm_type", "lnc_size", "store_add", "quant_kernel",
                   "output_layout", "lower_bound")

#: The operand names examples use: name -> (memory, dtype, shape) of the tensor it is the
#: whole of (tests/house/test_house_layers.py and bench/bench_load.py build them).
EXAMPLE_OPERANDS = {
    "src": ("SB", "float32", [128, 64]), "dst": ("SB", "float32", [128, 64]),
    "a": ("SB", "float32", [128, 64]), "b": ("SB", "float32", [128, 64]),
    "pred": ("SB", "uint8", [128, 64]), "idx": ("SB", "int32", [128, 1]),
    "st": ("SB", "bfloat16", [128, 128]), "mv": ("SB", "bfloat16", [128, 64]),
    "psum": ("PSUM", "float32", [128, 64]), "vals": ("SB", "float32", [128, 8]),
    "tags": ("SB", "uint8", [128, 64]), "mv_scale": ("SB", "uint8", [128, 2]),
    "st_scale": ("SB", "uint8", [128, 4]), "dst_scale": ("SB", "uint8", [128, 2]),
}
#: What else the example instructions name: a function ``callee``, an NKI function
#: ``nki_kern``, blocks ``body`` (the example's) and ``done``, a register ``r``, a DMA
#: queue ``q0`` with block ``blk0``.
EXAMPLE_CONTEXT = ("callee", "nki_kern", "body", "done", "r", "q0", "blk0")


class Example(NamedTuple):
    engine: str
    ins: Tuple[str, ...] = ()
    outs: Tuple[str, ...] = ()
    keys: Dict[str, Any] = {}


def X(engine, ins=(), outs=(), **keys):
    return Example(engine, tuple(ins), tuple(outs), keys)


class Op(NamedTuple):
    params: Tuple[tuple, ...] = ()
    keys: Tuple[Any, ...] = ()
    operands: Tuple[Optional[int], Optional[int]] = (None, None)
    ignored: Tuple[str, ...] = ()
    unmodelled: Dict[str, tuple] = {}
    example: Optional[Example] = None
    warns: Optional[str] = None
    slow_values: Dict[str, tuple] = {}

    def groups(self):
        """Every key the opcode's readers take, as (key, alias...) groups: the
        parameter rows' first (Matmult's acc_flags and the accumulator's keys are
        separate keys, not spellings), then ``keys``."""
        out = []
        for _, key, kind, _ in self.params:
            if not key:                 # a constant: no key
                continue
            if isinstance(key, str):
                out.append((key,))
            elif isinstance(kind, tuple) and kind[0] == "acc":
                out += [key[:3], (key[3],), (key[4],)]
            elif isinstance(kind, tuple) and kind[0] == "acc_flags":
                out += [(k,) for k in key]
            else:
                out.append(tuple(key))
        out += [(k,) if isinstance(k, str) else tuple(k) for k in self.keys]
        return out

    def read(self):
        """Every key (and spelling) the opcode's readers take."""
        return frozenset(k for g in self.groups() for k in g)

    def declared(self):
        """The keys (and spellings) of the parameter rows: both readers take them."""
        return frozenset(k for _, key, _, _ in self.params
                         for k in ((key,) if isinstance(key, str) else key))


def row(op):
    """The row of ``op`` (KeyError for an opcode without one)."""
    return OPS[op]


ACC_KEYS = ("acc", "reduce_cmd", "accumulator_cmd")


def _acc_row(load_index, command="Idle", op=None):
    """The engine accumulator's row; LoadAccumulate's start value is ins[load_index], the
    command defaults to ``command``, reduce_op to ``op`` (else add)."""
    kind = ("acc", load_index) if op is None else ("acc", load_index, op)
    return ("acc", ACC_KEYS + ("reduce_op", "reduce_init"), kind, command)


#: Pool's function spellings.
POOL_ALIASES = {"max": "Max", "avg": "Avg", "average": "Avg"}
#: nl.fp32.min (0xff7fffff): RangeSelect's default fill.
FP32_MIN = -3.4028234663852886e38
_I64 = ("int", -(1 << 63), (1 << 63) - 1)
_COUNT = ("int", 0, (1 << 63) - 1)
_OOB = ("oob_skip", "oob_is_err", "not_bool", True)


def _false(v):
    return v is False or v == 0


def _zero(v):
    return v == 0 and not isinstance(v, bool)


def _none(v):
    return v in ("None", "none", 0) and not isinstance(v, bool)


def _perf(v):
    """The modelled MatmultPerfMode values (DoubleColumn / DoublePixel: layout undocumented)."""
    return v in ("None", "none", 0, "DoubleRow", 1, "DoubleRowSwInterleave", 4) \
        and not isinstance(v, bool)


def _four(v):
    return v == 4 and not isinstance(v, bool)


def _free(v):
    return v in ("Free", "free", 1) and not isinstance(v, bool)


_DMA = ("mode", "cce_op", "op", "constants")


def _descriptor(mode):
    """A DMADescriptor* row: the mode is the opcode's; cce_op (default add) is read for
    CCE, else only when given (the handler reads it: the walker declines)."""
    rows = (("mode", (), ("const", "COPYMODE", mode), 0),
            ("transpose_op", "transpose_op", ("enum", "TRANSPOSE", "transpose op"), "None"),
            _OOB)
    if mode == "CCE":
        return Op(params=rows + (("cce_op", ("cce_op", "op"), "alu", "add"),),
                  keys=("mode", "constants"), operands=(None, 1), ignored=_DMA_HINTS,
                  example=X('DMA', ['src'], ['dst']))
    return Op(params=rows, keys=_DMA, operands=(None, 1), ignored=_DMA_HINTS,
              example=X('DMA', ['src'], ['dst']))

_MATMUL_HINTS = ("stop_tensor_calc", "tile_size", "tile_position", "is_fmap_onezero",
                 "is_weight_onezero", "is_stationary_onezero", "is_moving_onezero")
_DMA_HINTS = ("dge_mode", "priority", "qos", "queue")

#: opcode -> its row, in bs_ops.def order.
# TensorScalar and TensorScalarPtr read the same two-stage parameters.
_TENSOR_SCALAR_PARAMS = (('op0', 'op0', 'alu', REQUIRED),
                         ('op1', 'op1', 'alu', 'bypass'),
                         ('reverse0', 'reverse0', 'bool', False),
                         ('reverse1', 'reverse1', 'bool', False),
                         ('const0', 'const0', 'num', 0.0),
                         ('const1', 'const1', 'num', 0.0),
                         _acc_row(3))

OPS = {
    'GenericCopy': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'GenericRelu': Op(
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'])),
    'AbstractCopy': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'Activation': Op(
        params=(('func', ('func', 'activation_func'), ('act', 'activation function'), REQUIRED),
                ('scale', 'scale', 'num', 1.0),
                ('alpha', 'alpha', 'num', 0.0),
                ('bias', 'bias', 'num', 0.0),
                _acc_row(4)),
        keys=('is_activate2', 'op0', 'op1', 'reverse0', 'reverse1', ('const0', 'imm0'),
              ('const1', 'imm1'), 'relu_param'),
        operands=(5, 1),
        example=X('Activation', ['src'], ['dst'], func='Exp', scale=1.0, acc='ZeroAccumulate',
                  reduce_op='add')),
    'ReadActivationAccumulator': Op(
        operands=(None, 1),
        example=X('Activation', ['src'], ['dst'])),
    'LoadActFuncSet': Op(
        operands=(None, None),
        example=X('Pool')),
    'Matmult': Op(
        params=(('acc_flags', ('accumulation_flag', 'start_tensor_calc'), ('acc_flags',), 0),
                ('ifmap_zp', 'ifmap_quant_offset', ('int', 0, 255), 0),
                ('weights_zp', 'weights_quant_offset', ('int', 0, 255), 0),
                ('perf_mode', 'perf_mode', ('enum', 'PERF', 'matmul perf mode'), 'None'),
                ('transpose', 'is_transpose', 'bool', False)),
        keys=('psum_zero_region',),
        operands=(2, 1),
        ignored=_MATMUL_HINTS,
        unmodelled={'perf_mode': (_perf, 'None, DoubleRow or DoubleRowSwInterleave')},
        example=X('PE', ['st', 'mv'], ['psum'], accumulation_flag=3)),
    'MatmultSparse': Op(
        params=(('acc_flags', ('accumulation_flag', 'start_tensor_calc'), ('acc_flags',), 0),),
        keys=('psum_zero_region',),
        warns='matmult-sparse-reading',
        operands=(3, 1),
        ignored=_MATMUL_HINTS,
        unmodelled={'compress_ratio': (_four, '4'), 'is_transpose': (_false, 'false'),
                    'replication_num_rows': (_zero, '0'),
                    'replication_resolution': (_zero, '0'),
                    'replication_shift_amnt': (_zero, '0')},
        example=X('PE', ['mv', 'st', 'tags'], ['psum'])),
    'Memset': Op(
        params=(('mode', 'mode', ('enum', 'MEMSET', 'memset mode'), 'Const'),
                ('constant', 'constant', ('raw', 'by_value', 'value'), 0)),
        operands=(None, 1),
        example=X('Pool', [], ['dst'], constant=0.0)),
    'GetGlobalRankId': Op(
        operands=(None, 1),
        example=X('Pool', ['src'], ['dst'])),
    'NoOp': Op(
        operands=(None, None),
        example=X('Pool')),
    'EventSemaphore': Op(
        operands=(None, None),
        example=X('Pool')),
    'GroupResetSemaphores': Op(
        params=((None, 'sema_group', ('ilist', 0, 255), None),),     # absent: warns
        operands=(None, None),
        example=X('ALL', sema_group=[0])),
    'AllEngineBarrier': Op(
        operands=(None, None),
        example=X('Pool')),
    'Drain': Op(
        keys=('is_reset_sema',),
        operands=(None, None),
        example=X('Pool')),
    'Halt': Op(
        operands=(None, None),
        example=X('Pool')),
    'Load': Op(
        operands=(1, 1),
        ignored=_DMA_HINTS,
        example=X('DMA', ['src'], ['dst'])),
    'Pool': Op(
        params=(('func', 'func', ('enum', 'POOL', 'pool function', POOL_ALIASES), REQUIRED),),
        operands=(1, 1),
        ignored=('axis',),
        example=X('DVE', ['src'], ['dst'], func='Max')),
    'Reciprocal': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'Save': Op(
        operands=(1, 1),
        ignored=_DMA_HINTS,
        example=X('DMA', ['src'], ['dst'])),
    'TensorCopy': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'TensorCopyDynamicSrc': Op(
        params=(('scale', 'scale', _COUNT, 0),),
        operands=(2, 1),
        example=X('DVE', ['src'], ['dst'])),
    'TensorCopyDynamicDst': Op(
        params=(('scale', 'scale', _COUNT, 0),),
        operands=(2, 1),
        example=X('DVE', ['src'], ['dst'])),
    'IndirectCopy': Op(
        params=(_OOB, ('num_valid', 'num_valid_indices', _COUNT, 0)),
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'TensorReduce': Op(
        params=(('op', 'op', 'alu', REQUIRED),
                ('axis', 'axis', ('enum', 'AXIS', 'axis'), 'X'),
                ('negate', 'negate', 'bool', False),
                ('apply_transpose', 'apply_transpose', 'bool', False),
                _acc_row(1)),
        operands=(2, 1),
        example=X('DVE', ['src'], ['dst'], op='add', axis='X')),
    'TensorScalar': Op(
        params=_TENSOR_SCALAR_PARAMS,
        keys=('reduce_res_negate',),
        operands=(4, 1),
        example=X('DVE', ['src'], ['dst'], op0='mult', const0=2.0, op1='add', const1=1.0)),
    'TensorScalarPtr': Op(
        params=_TENSOR_SCALAR_PARAMS,
        keys=('is_tensor_tensor_scan', 'is_scalar_tensor_tensor', 'is_tensor_scalar_addr',
              'reduce_res_negate'),
        operands=(4, 1),
        example=X('DVE', ['src'], ['dst'], op0='mult', const0=2.0)),
    'TensorScalarCache': Op(
        params=(('mode', 'mode', ('enum', 'TSC', 'TensorScalarCache mode'), REQUIRED),
                ('op0', 'op0', 'alu', REQUIRED),
                ('op1', 'op1', 'alu', REQUIRED),
                ('reverse0', 'reverse0', 'bool', False),
                ('reverse1', 'reverse1', 'bool', False),
                ('acc', ACC_KEYS, ('acc_cmd',), 'ZeroAccumulate'),
                ('const0', ('const0', 'imm0'), 'num', 0.0),
                ('const1', ('const1', 'imm1'), 'num', 0.0)),
        operands=(3, 1),
        example=X('DVE', ['src'], ['dst'], mode='Reduce', op0='mult', op1='add')),
    'TensorTensor': Op(
        params=(('op', 'op', 'alu', REQUIRED),
                _acc_row(2)),
        operands=(3, 1),
        example=X('DVE', ['a', 'b'], ['dst'], op='add')),
    'DMACopy': Op(
        params=(('mode', 'mode', ('enum', 'COPYMODE', 'copy mode'), 'Copy'),
                ('transpose_op', 'transpose_op', ('enum', 'TRANSPOSE', 'transpose op'), 'None'),
                ('cce_op', ('cce_op', 'op'), 'alu', 'add'),
                ('oob_skip', 'oob_is_err', 'not_bool', True)),
        keys=('constants',),
        operands=(None, 1),
        ignored=_DMA_HINTS,
        example=X('DMA', ['src'], ['dst'])),
    'GPSIMDSB2SB': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'BNStats': Op(
        params=(('apply_transpose', 'apply_transpose', 'bool', False),),
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'BNStatsAggregate': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'BNGradients': Op(
        operands=(4, 1),
        example=X('DVE', ['src'], ['dst'])),
    'BNBackprop': Op(
        params=(('total_elements', 'total_elements', ('count',), REQUIRED),),
        operands=(6, 1),
        example=X('DVE', ['src'], ['dst'], total_elements=64.0)),
    'BNBackprop2': Op(
        params=(('total_elements', 'total_elements', ('count',), REQUIRED),),
        operands=(3, 1),
        example=X('DVE', ['src'], ['dst'], total_elements=64.0)),
    'StreamShuffle': Op(       # read by its handler (insns.PARAMS_FIRST: 32 entries, ...)
        params=((None, ('mask', 'shuffle_mask'), ('ilist', 0, 255, 32, (32, 254)), REQUIRED),),
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'], mask=[31 - p for p in range(32)])),
    'StreamTranspose': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'ReadVarAddr': Op(
        operands=(1, 1),
        example=X('Pool', ['src'], ['dst'])),
    'GenericIndirectLoad': Op(
        params=(_OOB,),
        keys=('indirect_dims',),
        operands=(None, 1),
        example=X('Pool', ['src'], ['dst'])),
    'IndirectLoad': Op(
        params=(_OOB,),
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'GenericIndirectSave': Op(
        params=(_OOB, ('op', 'op', 'alu', 'add')),
        keys=('indirect_dims',),
        operands=(None, 1),
        example=X('Pool', ['src'], ['dst'])),
    'IndirectSave': Op(
        params=(_OOB,),
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'IndirectSaveAccumulate': Op(
        params=(_OOB, ('op', 'op', 'alu', 'add'), ('num_indices', 'num_indices', _COUNT, 0),
                ('entry_step', 'entry_step_elements', _COUNT, 0)),
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'CollectiveCompute': Op(
        params=(('kind', 'kind', ('enum', 'COLLKIND', 'collective kind'), 'AllReduce'),
                ('op', 'op', 'alu', 'add')),
        keys=('replica_groups', ('src_target_pairs', 'source_target_pairs')),
        slow_values={'kind': ('Permute', 'PermuteReduce')},
        operands=(None, 1),
        unmodelled={'cc_dim': (_free, 'Free')},
        example=X('Pool', ['src'], ['dst'])),
    'CollectiveSend': Op(
        params=(('peer', 'peer_id', _COUNT, REQUIRED),),
        operands=(1, 0),
        example=X('Pool', ['src'], [], peer_id=1)),
    'CollectiveRecv': Op(
        params=(('peer', 'peer_id', _COUNT, REQUIRED),),
        operands=(None, 1),
        example=X('Pool', [], ['dst'], peer_id=0)),
    'Select': Op(
        operands=(3, 1),
        example=X('DVE', ['pred', 'a', 'b'], ['dst'])),
    'CopyPredicated': Op(
        params=(('reverse_pred', 'reverse_pred', 'bool', False),
                _acc_row(2, op='max')),
        slow_values={'reduce_op': ('bypass',)},
        operands=(3, 1),
        example=X('DVE', ['src', 'pred'], ['dst'])),
    'CustomOp': Op(
        keys=('opFunctionName', 'srcsShape', 'dstsShape'),
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'], opFunctionName='my_kernel')),
    'BIRKernel': Op(
        keys=('kernel_name', 'kernel_attrs', 'srcs_shape', 'dsts_shape') + BIRKERNEL_ATTRS,
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'], kernel_name='my_kernel')),
    'NKIKernel': Op(
        keys=('func', 'func_args', 'func_outs'),
        operands=(None, None),
        example=X('Pool', func='nki_kern', func_args=[], func_outs=[])),
    'NKIKLIRKernel': Op(
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'])),
    'DevicePrint': Op(
        keys=(('prefix', 'print_prefix'),),
        operands=(None, None),
        example=X('Pool')),
    'GetRandState': Op(
        operands=(None, 1),
        example=X('Pool', ['src'], ['dst'])),
    'SetRandState': Op(
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'])),
    'Rand': Op(
        params=(('algorithm', 'random_algorithm', ('enum', 'RANDALG', 'random algorithm'),
                 'LFSR'),
                ('distribution', 'distribution', ('enum', 'RANDDIST', 'random distribution'),
                 'Raw'),
                ('num_steps', 'rand_num_steps', ('int', 0, 255), 0)),
        keys=('params',),
        operands=(None, 1),
        example=X('Pool', ['src'], ['dst'])),
    'Iota': Op(                # read by its handler (insns.PARAMS_FIRST; base: or an expr)
        params=(('base', 'base', _I64, 0), ('channel_multiplier', 'channel_multiplier', _I64, 0),
                (None, 'pattern', ('pairs', -(1 << 63), (1 << 63) - 1, 1), [])),
        operands=(None, 1),
        example=X('Pool', [], ['idx'], base=0, channel_multiplier=1, pattern=[[1, 1]])),
    'TensorScalarAffineSelect': Op(
        params=(('channel_multiplier', 'channel_multiplier', _I64, 0),
                ('compare_op', ('compare_op', 'cmp_op'), ('cmp',), 'is_equal'),
                ('fill_value', ('fill_value', 'on_false_value'), 'num', 0.0)),
        keys=('base', 'pattern'),
        operands=(1, 1),
        example=X('Pool', ['src'], ['dst'])),
    'RangeSelect': Op(
        params=(('base', ('base', 'range_start'), _I64, 0),
                ('compare_op0', ('compare_op0', 'comp_op0'), ('cmp',), 'is_ge'),
                ('compare_op1', ('compare_op1', 'comp_op1'), ('cmp',), 'is_lt'),
                _acc_row(3, 'ZeroAccumulate', 'max'),
                ('fill_value', ('fill_value', 'on_false_value'), 'num', FP32_MIN)),
        operands=(4, 1),
        example=X('Pool', ['src', 'a', 'b'], ['dst'])),
    'GetSequenceBounds': Op(
        operands=(1, 1),
        example=X('Pool', ['src'], ['dst'])),
    'Dropout': Op(
        params=(('keep_threshold', 'is_keep_threshold', 'bool', False),),
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'GetCurProcessingRankID': Op(
        keys=(('iter_id', 'iteration_id'), 'channel_id', 'replica_groups'),
        operands=(None, 1),
        ignored=('stream_id',),
        example=X('Pool', ['src'], ['dst'])),
    'DMATrigger': Op(
        keys=('queue', 'dma_blocks'),
        operands=(None, None),
        example=X('Pool', queue='q0', dma_blocks=['blk0'])),
    'DMADescriptorCopy': _descriptor('Copy'),
    'DMADescriptorCCE': _descriptor('CCE'),
    'DMADescriptorTranspose': _descriptor('Transpose'),
    'DMADescriptorReplicate': _descriptor('Replicate'),
    'RegisterAlu': Op(
        params=(('op', 'op', 'alu', REQUIRED),
                ('is_64bit', 'is_64bit', 'bool', False)),
        operands=(2, 1),
        example=X('Pool', ['B.reg("r")', 'B.imm(1, "int32")'], ['B.reg("r")'], op='add')),
    'RegisterMove': Op(
        operands=(1, 1),
        example=X('Pool', ['B.imm(1, "int32")'], ['B.reg("r")'])),
    'TensorLoad': Op(
        operands=(1, 1),
        example=X('Pool', ['src'], ['dst'])),
    'TensorSave': Op(
        operands=(1, 1),
        example=X('Pool', ['src'], ['dst'])),
    'CompareAndBranch': Op(
        keys=('comp_op', 'on_true', 'on_false'),
        operands=(2, 0),
        example=X('Pool', ['B.reg("r")', 'B.imm(4, "int32")'], [], comp_op='IS_LTIMM',
                  on_true='body', on_false='done')),
    'UnconditionalBranch': Op(
        keys=('target',),
        operands=(None, None),
        example=X('Pool', target='done')),
    'BranchHint': Op(
        operands=(None, None),
        example=X('Pool')),
    'Return': Op(
        operands=(None, None),
        example=X('Pool')),
    'Exit': Op(
        operands=(None, None),
        example=X('Pool')),
    'Break': Op(
        operands=(None, None),
        example=X('Pool')),
    'Call': Op(
        keys=('target', 'arguments'),
        operands=(None, None),
        example=X('Pool', target='callee')),
    'SwitchQueueInstance': Op(
        keys=('queue', 'no_rearm', 'instance'),
        operands=(None, None),
        example=X('ALL', queue='q0')),
    'ResetQueueInstance': Op(
        keys=('queue', 'instance'),
        operands=(None, None),
        example=X('ALL', queue='q0')),
    'CoreBarrier': Op(
        operands=(None, None),
        example=X('Pool')),
    'Max': Op(
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'])),
    'MaxIndex': Op(
        operands=(2, 1),
        example=X('DVE', ['src'], ['dst'])),
    'MatchReplace': Op(
        params=(('imm_value', ('imm_value', 'imm'), 'num', REQUIRED),),
        operands=(2, 2),
        example=X('DVE', ['src', 'b'], ['dst', 'idx'], imm_value=-1.0)),
    'MaxIndexAndMatchReplace': Op(
        params=(('imm_value', ('imm_value', 'imm'), 'num', REQUIRED),),
        operands=(2, 2),
        example=X('DVE', ['src', 'b'], ['dst', 'idx'], imm_value=-1.0)),
    'Gather': Op(
        params=(_OOB,),
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'InlineASMBytes': Op(
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'])),
    'TensorCompletion': Op(
        operands=(None, None),
        example=X('Pool')),
    'MatmultMx': Op(
        params=(('acc_flags', ('accumulation_flag', 'start_tensor_calc'), ('acc_flags',), 0),),
        keys=('psum_zero_region',),
        operands=(4, 1),
        ignored=_MATMUL_HINTS,
        example=X('PE', ['mv', 'st', 'mv_scale', 'st_scale'], ['psum'])),
    'QuantizeMx': Op(
        operands=(1, 2),
        example=X('DVE', ['src'], ['dst', 'dst_scale'])),
    'Rand2': Op(
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'RandSetState': Op(
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'])),
    'RandGetState': Op(
        operands=(None, 1),
        example=X('Pool', ['src'], ['dst'])),
    'Rng': Op(
        operands=(None, None),
        example=X('Pool', ['src'], ['dst'])),
    'ActivationReadAccumulator': Op(
        operands=(None, 1),
        example=X('Activation', ['src'], ['dst'])),
    'DveReadAccumulator': Op(
        operands=(None, 1),
        example=X('Activation', ['src'], ['dst'])),
    'Exponential': Op(
        params=(_acc_row(2),),
        operands=(3, 1),
        example=X('DVE', ['src'], ['dst'])),
    'NonzeroWithCount': Op(
        params=(('index_offset', 'index_offset', _I64, 0),
                ('padding_val', 'padding_val', 'num', -1.0)),
        operands=(1, 1),
        example=X('Pool', ['src'], ['dst'])),
    'Loop': Op(
        keys=('LoopAxis', 'isParallel', 'blocks'),
        operands=(None, None),
        example=X('Pool', LoopAxis={'name': 'i', 'lb': 0, 'ub': 4, 'stride': 1},
                  blocks=[{'name': 'loop_body', 'instructions': []}])),
    'DynamicForLoop': Op(
        keys=('DynamicForLoopAxis', 'blocks'),
        operands=(None, None),
        example=X('Pool', DynamicForLoopAxis={
            'name': 'j', 'lb': 0, 'stride': 1,
            'ub': {'kind': 'AffExprKind', 'c': 0, 'terms': [
                {'idx': {'kind': 'IntRuntimeValueKind', 'regref': 'r'}, 'coeff': 1}]}},
            blocks=[{'name': 'loop_body', 'instructions': []}])),
    'DMABlock': Op(
        keys=('dma_trigger', 'instructions', 'blocks'),
        operands=(None, None),
        example=X('DMA')),
    'DoWhile': Op(
        keys=('cond', 'blocks'),
        operands=(None, None),
        example=X('Pool', cond={'kind': 'IntRuntimeValueKind', 'regref': 'r'},
                  blocks=[{'name': 'loop_body', 'instructions': []}])),
    'TongaReduceMacroSymbolic': Op(
        params=(('op', 'op', 'alu', REQUIRED),
                ('is_first_reduce', 'is_first_reduce', 'bool', REQUIRED)),
        keys=('reduce_axes',),
        operands=(1, 1),
        example=X('DVE', ['src'], ['dst'], op='add', is_first_reduce=True)),
    'TopK': Op(
        params=(('n', 'n', ('int', 8, 65535), 0),),
        keys=('sorted',),
        warns='topk-reading',
        operands=(2, 2),
        example=X('Pool', ['src'], ['vals', 'idx'], n=8)),
    'LocalGather': Op(
        params=(_OOB, ('num_valid', 'num_valid_indices', _COUNT, 0)),
        operands=(2, 1),
        example=X('Pool', ['src'], ['dst'])),
    'Nonzero': Op(
        params=(('index_offset', 'index_offset', _I64, 0),
                ('padding_val', 'padding_val', 'num', -1.0)),
        operands=(1, 1),
        example=X('Pool', ['src'], ['dst'])),
}
