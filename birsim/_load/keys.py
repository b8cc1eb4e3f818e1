"""No field ignored in silence: the op-specific keys of each opcode birsim runs.

For every opcode birsim runs (every BS_OP row of csrc/bs_ops.def that is not abstract),
:data:`SCHEMA` lists the keys its loader reads (its handler in birsim/_insns.py and pass 1
of birsim/loader.py; tests/test_compute_keys.py checks the list against what the handler
really reads, for every handler). The row is required: :func:`known_keys` of an opcode
without one is a KeyError, so a forgotten row fails every load of that opcode instead of
leaving its misspelled keys unwarned (tests/test_verdicts_load.py misspells a key of
every opcode). :data:`OPERANDS` bounds each opcode's ``ins`` and ``outs`` the same way (a
missing row is a KeyError); :data:`IGNORED` lists the documented keys birsim deliberately
ignores (they do not change the numbers; README "Choices" table), and :data:`UNMODELLED`
the documented keys
whose non-default values birsim does not model yet: such a value is a ProgramError naming
the key, never a silently different result.

An optional key in no list but within a small edit distance of one that is gets a
warning with the suggestion (``negat`` -> ``negate``); keys far from every known one stay
silent (real compiler dumps carry many).
"""

__all__ = ["SCHEMA", "IGNORED", "UNMODELLED", "COMMON", "OPERANDS", "check_keys",
           "edit_distance", "suggestion", "known_keys", "operand_limits"]

#: Keys every instruction may carry (read by the loader's generic passes).
COMMON = frozenset({"name", "opcode", "type", "instruction_type", "engine", "ins", "outs",
                    "sync_info", "dependencies"})

#: The BIRKernel record keys passed to its kernel as attributes when present (BIR-JSON.md
#: "kernel_sim (birsim's reading)"); no other key of the record is.
BIRKERNEL_ATTRS = ("sb_buf_shape", "psum_buf_shape", "auto_cast", "is_causal",
                   "fused_rmsnorm", "norm_type", "lnc_size", "store_add", "quant_kernel",
                   "output_layout", "lower_bound")

_ACC = ("acc", "reduce_cmd", "accumulator_cmd")
_ACCUM = _ACC + ("reduce_op", "reduce_init")     # the engine accumulator's keys
_TS = ("op0", "op1", "reverse0", "reverse1", "const0", "const1")
_DMA = ("mode", "transpose_op", "cce_op", "op", "constants", "oob_is_err")

#: opcode -> keys its loader handler reads.
SCHEMA = {
    "TensorTensor": ("op",) + _ACCUM,
    "TensorScalar": _TS + _ACCUM + ("reduce_res_negate",),
    "TensorScalarPtr": _TS + ("is_tensor_tensor_scan", "is_scalar_tensor_tensor",
                              "is_tensor_scalar_addr") + _ACCUM + ("reduce_res_negate",),
    "TensorScalarCache": ("mode", "op0", "op1", "reverse0", "reverse1", "const0", "imm0",
                          "const1", "imm1") + _ACC,
    "TensorReduce": ("op", "axis", "negate", "apply_transpose") + _ACCUM,
    "TongaReduceMacroSymbolic": ("op", "is_first_reduce", "reduce_axes"),
    "Activation": ("func", "activation_func", "scale", "alpha", "bias", "is_activate2",
                   "op0", "op1", "reverse0", "reverse1", "const0", "imm0", "const1", "imm1",
                   "relu_param") + _ACCUM,
    "Matmult": ("accumulation_flag", "start_tensor_calc", "ifmap_quant_offset",
                "weights_quant_offset", "perf_mode", "is_transpose", "psum_zero_region"),
    "MatmultMx": ("accumulation_flag", "start_tensor_calc", "psum_zero_region"),
    "MatmultSparse": ("accumulation_flag", "start_tensor_calc", "psum_zero_region"),
    "QuantizeMx": (),
    "DMACopy": _DMA,
    "DMADescriptorCopy": _DMA, "DMADescriptorCCE": _DMA, "DMADescriptorTranspose": _DMA,
    "DMADescriptorReplicate": _DMA,
    "Memset": ("mode", "constant"),
    "Iota": ("base", "channel_multiplier", "pattern"),
    "MatchReplace": ("imm_value", "imm"),
    "StreamShuffle": ("mask", "shuffle_mask"),
    "CopyPredicated": ("reverse_pred",) + _ACCUM,
    "TensorScalarAffineSelect": ("base", "channel_multiplier", "pattern", "compare_op",
                                 "cmp_op", "fill_value", "on_false_value"),
    "RangeSelect": ("base", "range_start", "compare_op0", "comp_op0", "compare_op1",
                    "comp_op1", "fill_value", "on_false_value") + _ACCUM,
    "MaxIndexAndMatchReplace": ("imm_value", "imm"),
    "Exponential": _ACCUM,
    "Select": (), "Reciprocal": (), "TensorCopy": (), "GenericCopy": (),
    "AbstractCopy": (), "Load": (), "Save": (), "StreamTranspose": (),
    "BNStats": ("apply_transpose",),
    "BNStatsAggregate": (), "BNGradients": (), "BNBackprop": ("total_elements",),
    "BNBackprop2": ("total_elements",), "Pool": ("func",), "Max": (), "MaxIndex": (),
    "ReadActivationAccumulator": (), "ActivationReadAccumulator": (),
    "DveReadAccumulator": (),
    "Rand": ("random_algorithm", "distribution", "rand_num_steps", "params"),
    "CollectiveCompute": ("kind", "op", "replica_groups", "src_target_pairs",
                          "source_target_pairs"),
    "GetCurProcessingRankID": ("iter_id", "iteration_id", "channel_id", "replica_groups"),
    "ReadVarAddr": (),
    "TopK": ("n", "sorted"),
    # the opcodes the VM runs itself, the rng family, no-ops and stubs
    **{op: () for op in ("LoadActFuncSet", "GetGlobalRankId", "NoOp", "EventSemaphore",
                         "AllEngineBarrier", "Halt", "GPSIMDSB2SB", "GenericRelu",
                         "NKIKLIRKernel", "GetRandState", "SetRandState",
                         "GetSequenceBounds", "RegisterMove", "TensorLoad", "TensorSave",
                         "BranchHint", "Return", "Exit", "Break", "CoreBarrier",
                         "InlineASMBytes", "TensorCompletion", "Rand2", "RandSetState",
                         "RandGetState", "Rng")},
    "GroupResetSemaphores": ("sema_group",),
    "Drain": ("is_reset_sema",),
    "TensorCopyDynamicSrc": ("scale",), "TensorCopyDynamicDst": ("scale",),
    "IndirectCopy": ("oob_is_err", "num_valid_indices"),
    "LocalGather": ("oob_is_err", "num_valid_indices"),
    "GenericIndirectLoad": ("oob_is_err", "indirect_dims"),
    "GenericIndirectSave": ("oob_is_err", "op", "indirect_dims"),
    "IndirectLoad": ("oob_is_err",), "IndirectSave": ("oob_is_err",), "Gather": ("oob_is_err",),
    "IndirectSaveAccumulate": ("oob_is_err", "op", "num_indices", "entry_step_elements"),
    "CollectiveSend": ("peer_id",), "CollectiveRecv": ("peer_id",),
    "CustomOp": ("opFunctionName", "srcsShape", "dstsShape"),
    "BIRKernel": ("kernel_name", "kernel_attrs", "srcs_shape", "dsts_shape") + BIRKERNEL_ATTRS,
    "NKIKernel": ("func", "func_args", "func_outs"),
    "DevicePrint": ("prefix", "print_prefix"),
    "Dropout": ("is_keep_threshold",),
    "NonzeroWithCount": ("index_offset", "padding_val"),
    "Nonzero": ("index_offset", "padding_val"),
    "DMATrigger": ("queue", "dma_blocks"),
    "DMABlock": ("dma_trigger", "instructions", "blocks"),
    "SwitchQueueInstance": ("queue", "no_rearm", "instance"),
    "ResetQueueInstance": ("queue", "instance"),
    "RegisterAlu": ("op", "is_64bit"),
    "CompareAndBranch": ("comp_op", "on_true", "on_false"),
    "UnconditionalBranch": ("target",),
    "Call": ("target", "arguments"),
    "Loop": ("LoopAxis", "isParallel", "blocks"),
    "DynamicForLoop": ("DynamicForLoopAxis", "blocks"),
    "DoWhile": ("cond", "blocks"),
}

#: opcode -> (most ``ins``, most ``outs``) it takes; None: any number (variadic, or
#: operands only listed, as no-ops and control flow may carry them). An instruction with
#: more is a ProgramError naming the first extra operand: a kernel never reads it, so an
#: extra output would never be written while the checkers count it as written.
OPERANDS = {
    "GenericCopy": (1, 1), "AbstractCopy": (1, 1), "TensorCopy": (1, 1), "Load": (1, 1),
    "Save": (1, 1), "Reciprocal": (1, 1), "StreamTranspose": (1, 1),
    "StreamShuffle": (1, 1), "GPSIMDSB2SB": (1, 1), "Pool": (1, 1),
    "Activation": (5, 1),                   # in0, scale, bias, alpha, LoadAccumulate start
    "Matmult": (2, 1), "MatmultSparse": (3, 1), "MatmultMx": (4, 1), "QuantizeMx": (1, 2),
    "Memset": (None, 1), "Iota": (None, 1),
    "TensorReduce": (2, 1), "TensorTensor": (3, 1), "TensorScalar": (4, 1),
    "TensorScalarPtr": (4, 1), "TensorScalarCache": (3, 1), "Exponential": (3, 1),
    "CopyPredicated": (3, 1), "Select": (3, 1), "TensorScalarAffineSelect": (1, 1),
    "RangeSelect": (4, 1), "TongaReduceMacroSymbolic": (1, 1),
    "ReadActivationAccumulator": (None, 1), "ActivationReadAccumulator": (None, 1),
    "DveReadAccumulator": (None, 1),
    "DMACopy": (None, 1),                   # CCE folds every input
    "DMADescriptorCopy": (None, 1), "DMADescriptorCCE": (None, 1),
    "DMADescriptorTranspose": (None, 1), "DMADescriptorReplicate": (None, 1),
    "BNStats": (1, 1), "BNStatsAggregate": (1, 1), "BNGradients": (4, 1),
    "BNBackprop": (6, 1), "BNBackprop2": (3, 1),
    "TensorCopyDynamicSrc": (2, 1), "TensorCopyDynamicDst": (2, 1), "IndirectCopy": (2, 1),
    "LocalGather": (2, 1), "IndirectLoad": (2, 1), "IndirectSave": (2, 1),
    "IndirectSaveAccumulate": (2, 1), "Gather": (2, 1),
    "GenericIndirectLoad": (None, 1), "GenericIndirectSave": (None, 1),
    "CollectiveCompute": (None, 1), "CollectiveSend": (1, 0), "CollectiveRecv": (None, 1),
    "Max": (1, 1), "MaxIndex": (2, 1), "MatchReplace": (2, 2),          # outs[1]: indices
    "MaxIndexAndMatchReplace": (2, 2), "TopK": (2, 2),
    "Rand": (None, 1), "Rand2": (2, 1), "RandGetState": (None, 1), "GetRandState": (None, 1),
    "Dropout": (2, 1), "NonzeroWithCount": (1, 1), "Nonzero": (1, 1),
    "GetSequenceBounds": (1, 1),
    "ReadVarAddr": (1, 1), "GetGlobalRankId": (None, 1), "GetCurProcessingRankID": (None, 1),
    "RegisterAlu": (2, 1), "RegisterMove": (1, 1), "TensorLoad": (1, 1), "TensorSave": (1, 1),
    "CompareAndBranch": (2, 0),
    **{op: (None, None) for op in (
        "SetRandState", "RandSetState", "CustomOp", "BIRKernel", "NKIKernel", "DevicePrint",
        "LoadActFuncSet", "NoOp", "EventSemaphore", "AllEngineBarrier", "Halt",
        "GenericRelu", "NKIKLIRKernel", "BranchHint", "CoreBarrier", "InlineASMBytes",
        "TensorCompletion", "Rng", "GroupResetSemaphores", "Drain", "DMATrigger", "DMABlock",
        "SwitchQueueInstance", "ResetQueueInstance", "UnconditionalBranch", "Return", "Exit",
        "Break", "Call", "Loop", "DynamicForLoop", "DoWhile")},
}

_MATMUL_HINTS = ("stop_tensor_calc", "tile_size", "tile_position", "is_fmap_onezero",
                 "is_weight_onezero", "is_stationary_onezero", "is_moving_onezero")
_DMA_HINTS = ("dge_mode", "priority", "qos", "queue")

#: opcode -> documented keys birsim ignores on purpose (no effect on the numbers).
IGNORED = {
    "Matmult": _MATMUL_HINTS,
    "MatmultMx": _MATMUL_HINTS,
    "MatmultSparse": _MATMUL_HINTS,
    "Pool": ("axis",),          # Pool always folds the two innermost dims (machine-model §6.1)
    **{op: _DMA_HINTS for op in ("DMACopy", "DMADescriptorCopy", "DMADescriptorCCE",
                                 "DMADescriptorTranspose", "DMADescriptorReplicate", "Load",
                                 "Save")},
    "GetCurProcessingRankID": ("stream_id",),
}


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


#: opcode -> {key: (accepted(value), the modelled value)}: documented keys birsim models
#: only at that value.
UNMODELLED = {
    "CollectiveCompute": {"cc_dim": (_free, "Free")},
    "Matmult": {"perf_mode": (_perf, "None, DoubleRow or DoubleRowSwInterleave")},
    "MatmultSparse": {"compress_ratio": (_four, "4"),
                      "is_transpose": (_false, "false"),
                      "replication_num_rows": (_zero, "0"), "replication_resolution": (_zero, "0"),
                      "replication_shift_amnt": (_zero, "0")},
}


def edit_distance(a, b):
    """Levenshtein distance with adjacent transpositions (optimal string alignment)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def _limit(key):
    return 1 if len(key) <= 5 else 2


def known_keys(op):
    """The keys ``op`` knows (KeyError for an opcode without a :data:`SCHEMA` row)."""
    return (COMMON | set(SCHEMA[op]) | set(IGNORED.get(op, ()))
            | set(UNMODELLED.get(op, {})))


def operand_limits(op):
    """(most ins, most outs) of ``op``, None for any (KeyError without an OPERANDS row)."""
    return OPERANDS[op]


def suggestion(op, key):
    """The known key of ``op`` closest to ``key`` within the warning distance, or None.
    Memoised per (opcode, key): compiler dumps carry the same far-off keys (``debug``,
    ``loop_carried_dependencies``) on every instruction, and the edit distances to every
    known key cost ~1 ms per instruction. The cache is keyed by the known-key set too, so
    a schema extended at run time is not answered from a stale entry."""
    known = frozenset(known_keys(op))
    ck = (op, key, known)
    hit = _SUGGESTIONS.get(ck, MISSING)
    if hit is MISSING:
        if len(_SUGGESTIONS) >= 4096:       # bounded: keys come from the input
            _SUGGESTIONS.clear()
        hit = _SUGGESTIONS[ck] = _suggestion(known, key)
    return hit


_SUGGESTIONS: dict = {}
MISSING = object()


def _suggestion(known, key):
    best = None
    for k in sorted(known):
        dist = edit_distance(key, k)
        if dist <= _limit(k) and (best is None or dist < best[0]):
            best = (dist, k)
    return best and best[1]


def check_keys(op, obj, ctx, warn):
    """Reject unmodelled values of documented keys of ``op``; warn about near misses.
    ``warn(topic, message)`` is the loader's once-per-topic warning."""
    SCHEMA[op]                          # noqa: B018 -- KeyError: the opcode has no row
    for key, (ok, modelled) in UNMODELLED.get(op, {}).items():
        v = obj.get(key)
        if v is not None and not ok(v):
            raise ctx.key(key).error("%s key '%s' = %r is not modelled by birsim (only %s is); "
                                     "refusing to give different numbers" % (op, key, v, modelled))
    known = None
    for key in obj:
        if key in COMMON:
            continue
        if known is None:
            known = known_keys(op)
        if key in known:
            continue
        near = suggestion(op, key)
        if near is not None:
            warn("key:%s:%s" % (op, key), "%s: unknown key '%s' of %s is ignored; did you "
                 "mean '%s'?" % (ctx.key(key).path, key, op, near))
