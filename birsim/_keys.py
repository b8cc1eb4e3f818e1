"""No field ignored in silence: the op-specific keys of each opcode birsim runs.

For every opcode with a kernel, :data:`SCHEMA` lists the keys its loader handler reads
(birsim/_insns.py; tests/test_compute_keys.py checks the list against what the handler
really reads), :data:`IGNORED` the documented keys birsim deliberately ignores (they do
not change the numbers; README "Choices" table), and :data:`UNMODELLED` the documented keys
whose non-default values birsim does not model yet: such a value is a ProgramError naming
the key, never a silently different result.

An optional key in no list but within a small edit distance of one that is gets a
warning with the suggestion (``negat`` -> ``negate``); keys far from every known one stay
silent (real compiler dumps carry many).
"""

__all__ = ["SCHEMA", "IGNORED", "UNMODELLED", "COMMON", "check_keys", "edit_distance",
           "suggestion"]

#: Keys every instruction may carry (read by the loader's generic passes).
COMMON = frozenset({"name", "opcode", "type", "instruction_type", "engine", "ins", "outs",
                    "sync_info", "dependencies"})

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
    return (COMMON | set(SCHEMA.get(op, ())) | set(IGNORED.get(op, ()))
            | set(UNMODELLED.get(op, {})))


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


_SUGGESTIONS = {}
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
    if op not in SCHEMA:
        return
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
