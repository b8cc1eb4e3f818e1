/* kernels/krows.c -- dense fp32 rows per partition (krows.h). */
#include <math.h>
#include "krows.h"
#include "kview.h"

static bs_status need_view(const bs_view *v, int have, const char *side,
                           int32_t j, const char *what, bs_error *err)
{
    if (!have || v->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s needs an access pattern as %s[%d]", what, side, j);
    if (!bs_dt_numeric(v->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: %s[%d] has packed dtype %s", what, side, j,
                         bs_dtinfo_table[v->dtype].name);
    return BS_OK;
}

bs_status bs_rows_in(bs_kctx *k, int32_t j, int slot, bs_rows *r, const char *what,
                     bs_error *err)
{
    const bs_view *v = &k->in[j];
    BS_TRY(need_view(v, j < k->nin, "ins", j, what, err));
    r->P = v->num[0];
    r->F = v->count / (r->P > 0 ? r->P : 1);
    r->v = bs_kstate_tmp(k->ks, slot, (size_t)v->count * sizeof(float) + 1);
    if (r->v == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory for %lld elements", what,
                         (long long)v->count);
    bs_view_to_f32(r->v, v);
    return BS_OK;
}

bs_status bs_rows_out_check(const bs_kctx *k, int32_t j, int64_t P, int64_t F,
                            const char *what, bs_error *err)
{
    const bs_view *v = &k->out[j];
    BS_TRY(need_view(v, j < k->nout, "outs", j, what, err));
    if (v->num[0] != P || v->count != P * F)
        return bs_errorf(err, BS_E_SIM, "%s: outs[%d] must hold %lld partitions x %lld "
                         "elements, it has %lld partitions and %lld elements", what, j,
                         (long long)P, (long long)F, (long long)v->num[0], (long long)v->count);
    return BS_OK;
}

bs_status bs_rows_scalar(bs_kctx *k, int32_t j, double dflt, int64_t P, int slot,
                         const float **out, const char *what, bs_error *err)
{
    float *f = bs_kstate_tmp(k->ks, slot, (size_t)P * sizeof(float) + 1);
    if (f == NULL)
        return bs_errorf(err, BS_E_NOMEM, "%s: out of memory", what);
    BS_TRY(bs_kscalar_values(k, j, dflt, P, f, NULL, what, err));
    *out = f;
    return BS_OK;
}

bs_status bs_rows_identity(int32_t op, float *id, const char *what, bs_error *err)
{
    switch (op) {
    case BS_ALU_add: case BS_ALU_subtract: *id = 0.0f; return BS_OK;
    case BS_ALU_mult: *id = 1.0f; return BS_OK;
    case BS_ALU_max: *id = -INFINITY; return BS_OK;
    case BS_ALU_min: *id = INFINITY; return BS_OK;
    default:
        *id = 0.0f;
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: op1 %s cannot accumulate (add, subtract, "
                         "mult, max or min)", what,
                         op >= 0 && op < BS_ALU__COUNT ? bs_alu_table[op].name : "?");
    }
}

bs_status bs_acc_check(int64_t acc, int64_t P, const char *what, bs_error *err)
{
    if (acc < BS_ACC_Idle || acc > BS_ACC_LoadAccumulate)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: accumulator command %lld is not an "
                         "EngineAccumulationType", what, (long long)acc);
    if (acc != BS_ACC_Idle && P > BS_NUM_PARTITIONS)
        return bs_errorf(err, BS_E_SIM, "%s: accumulating over %lld partitions (at most %d)",
                         what, (long long)P, BS_NUM_PARTITIONS);
    return BS_OK;
}
