/* kernels/k_accum.c -- the per-engine accumulator (kaccum.h) and the instructions that
** read it out: ReadActivationAccumulator / ActivationReadAccumulator (Activation) and
** DveReadAccumulator (DVE). */
#include <math.h>
#include "kaccum.h"
#include "kview.h"

/* 0 Pool, 1 Activation, 2 DVE (bs_kstate.acc_mark's order); -1 for the other engines. */
static int engine_index(const bs_kctx *k, int32_t dflt)
{
    int32_t e = k->insn->engine;
    if (e == BS_ENGINE_Unassigned || e == BS_ENGINE_ALL)
        e = dflt;
    switch (e) {
    case BS_ENGINE_Pool: return 0;
    case BS_ENGINE_Activation: return 1;
    case BS_ENGINE_DVE: return 2;
    default: return -1;
    }
}

float *bs_accum_engine(const bs_kctx *k, int32_t dflt)
{
    switch (engine_index(k, dflt)) {
    case 0: return k->ks->pool_acc;
    case 1: return k->ks->act_acc;
    case 2: return k->ks->dve_acc;
    default: return NULL;
    }
}

uint8_t *bs_accum_mark(const bs_kctx *k, int32_t dflt)
{
    int i = engine_index(k, dflt);
    return i < 0 ? NULL : &k->ks->acc_mark[i];
}

int bs_accum_op(int32_t op, float *id)
{
    switch (op) {
    case BS_ALU_add: *id = 0.0f; return 1;
    case BS_ALU_subtract: *id = 0.0f; return 1;
    case BS_ALU_mult: *id = 1.0f; return 1;
    case BS_ALU_max: *id = -INFINITY; return 1;
    case BS_ALU_min: *id = INFINITY; return 1;
    case BS_ALU_abs_max: *id = 0.0f; return 1;
    case BS_ALU_abs_min: *id = INFINITY; return 1;
    case BS_ALU_logical_and: *id = 1.0f; return 1;
    case BS_ALU_logical_or: *id = 0.0f; return 1;
    case BS_ALU_logical_xor: *id = 0.0f; return 1;
    default: *id = 0.0f; return 0;
    }
}

bs_status bs_accum_start(bs_kctx *k, bs_accum *a, int64_t cmd, int32_t op, int32_t dflt,
                         int32_t load_j, double load_key, int64_t np, const char *what,
                         bs_error *err)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    if (cmd == BS_ACC_Idle)
        return BS_OK;
    if (cmd < BS_ACC_Idle || cmd > BS_ACC_LoadAccumulate)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: accumulator command %lld is not an "
                         "EngineAccumulationType", what, (long long)cmd);
    if (!bs_accum_op(op, &a->id))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: reduce_op %s cannot accumulate (add, "
                         "subtract, mult, max, min, abs_max, abs_min, logical_and, logical_or "
                         "or logical_xor)", what,
                         op >= 0 && op < BS_ALU__COUNT ? bs_alu_table[op].name : "?");
    a->eng = bs_accum_engine(k, dflt);
    if (a->eng == NULL)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: engine %s has no accumulator (Pool, "
                         "Activation and DVE have one)", what,
                         bs_enum_name("ENGINE", k->insn->engine));
    if (np > BS_NUM_PARTITIONS)
        return bs_errorf(err, BS_E_SIM, "%s: accumulating over %lld partitions (at most %d)",
                         what, (long long)np, BS_NUM_PARTITIONS);
    a->op = op;
    a->np = np;
    a->mark = bs_accum_mark(k, dflt);
    if (cmd == BS_ACC_LoadAccumulate) {
        a->load = k->ks->acc_load;
        BS_TRY(bs_kscalar_values(k, load_j, load_key, np, a->load, NULL, what, err));
    }
    if (cmd != BS_ACC_Zero) {
        a->row = k->ks->acc_row;
        for (int64_t p = 0; p < np; p++)
            a->row[p] = a->id;
    }
    return BS_OK;
}

void bs_accum_row(bs_accum *a, int64_t p, const float *y, int64_t n)
{
    float s = a->row[p];
    switch (a->op) {
    case BS_ALU_add:
    case BS_ALU_subtract:                          /* the sum; bs_accum_apply subtracts it */
        for (int64_t j = 0; j < n; j++)
            s = s + y[j];                          /* sequential fp32 */
        break;
    case BS_ALU_mult:
        for (int64_t j = 0; j < n; j++)
            s = s * y[j];
        break;
    default:
        for (int64_t j = 0; j < n; j++)
            s = bs_alu_f32(a->op, s, y[j]);
        break;
    }
    a->row[p] = s;
}

void bs_accum_rows(bs_accum *a, const float *y, int64_t P, int64_t F)
{
    if (a->row == NULL)
        return;
    for (int64_t p = 0; p < P; p++)
        bs_accum_row(a, p, y + p * F, F);
}

void bs_accum_apply(bs_accum *a)
{
    int64_t cmd = bs_accum_from(a->cmd, a->mark);
    if (cmd == BS_ACC_Idle)
        return;
    for (int64_t p = 0; p < a->np; p++) {
        float s;
        switch (cmd) {
        case BS_ACC_Zero: a->eng[p] = a->id; continue;
        case BS_ACC_ZeroAccumulate: s = a->id; break;
        case BS_ACC_LoadAccumulate: s = a->load[p]; break;
        default: s = a->eng[p]; break;             /* Accumulate, AddAccumulate */
        }
        a->eng[p] = bs_alu_f32(a->op, s, a->row[p]);
    }
    *a->mark = a->negate ? BS_ACCM_NEGATE : 0;
}

/* {=== Reading the accumulator out ===} */

bs_status bs_accum_read(bs_kctx *k, int32_t dflt, const char *what, bs_error *err)
{
    bs_view out = k->out[0];
    bs_cursor co;
    float obuf[BS_CHUNK];
    const float *acc = bs_accum_engine(k, dflt);
    uint8_t *mark = bs_accum_mark(k, dflt);
    int neg;
    if (k->nout < 1 || out.ndim == 0)
        return bs_errorf(err, BS_E_SIM, "%s needs an output tensor", what);
    if (acc == NULL)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: engine %s has no accumulator (Pool, "
                         "Activation and DVE have one)", what,
                         bs_enum_name("ENGINE", k->insn->engine));
    if (out.num[0] > BS_NUM_PARTITIONS)
        return bs_errorf(err, BS_E_SIM, "%s: %lld partitions, the accumulator has %d", what,
                         (long long)out.num[0], BS_NUM_PARTITIONS);
    if (!bs_dt_numeric(out.dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s cannot write %s", what,
                         bs_dtinfo_table[out.dtype].name);
    neg = (*mark & BS_ACCM_NEGATE) != 0;            /* reduce_res_negate: -lane, exactly */
    bs_cur_init(&co, &out);
    while (co.left > 0) {
        /* along a 1-D pattern every element is its own partition */
        int64_t n = out.ndim == 1 ? 1 : co.left < BS_CHUNK ? co.left : BS_CHUNK;
        float v = neg ? -acc[co.idx[0]] : acc[co.idx[0]];
        float *y = bs_cur_write_begin(&co, n, obuf);
        for (int64_t j = 0; j < n; j++)
            y[j] = v;
        bs_cur_write_end(&co, n, y);
    }
    *mark |= BS_ACCM_CONSUMED;
    return BS_OK;
}

bs_status bs_k_ReadActivationAccumulator(bs_kctx *k, bs_error *err)
{
    return bs_accum_read(k, BS_ENGINE_Activation, "ReadActivationAccumulator", err);
}

bs_status bs_k_ActivationReadAccumulator(bs_kctx *k, bs_error *err)
{
    return bs_accum_read(k, BS_ENGINE_Activation, "ActivationReadAccumulator", err);
}

bs_status bs_k_DveReadAccumulator(bs_kctx *k, bs_error *err)
{
    return bs_accum_read(k, BS_ENGINE_DVE, "DveReadAccumulator", err);
}
