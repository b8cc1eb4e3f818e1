/* kernels/kview.c -- view and operand helpers shared by the elementwise-style kernels
** (k_eltwise.c, k_act.c, k_select.c): read-all-then-write staging, free-dim collapsing,
** operand checks, per-partition scalar operands. Contracts in kview.h. */
#include <math.h>
#include "kernel.h"
#include "kview.h"

/* 1 if no two elements of v share a byte: sorted by |stride|, every stride clears the
** span of the dimensions inside it. Sufficient, not necessary. */
static int self_disjoint(const bs_view *v)
{
    int64_t st[BS_MAX_DIMS], nm[BS_MAX_DIMS], span = bs_dtinfo_table[v->dtype].size;
    int m = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->num[d] <= 1)
            continue;
        int64_t s = v->stride[d] < 0 ? -v->stride[d] : v->stride[d];
        int i = m++;
        for (; i > 0 && st[i - 1] > s; i--) {
            st[i] = st[i - 1];
            nm[i] = nm[i - 1];
        }
        st[i] = s;
        nm[i] = v->num[d];
    }
    for (int i = 0; i < m; i++) {
        if (st[i] < span)
            return 0;
        span += st[i] * (nm[i] - 1);
    }
    return 1;
}

bs_status bs_kview_detach(bs_kctx *k, bs_view *in, int32_t n, int slot0, bs_error *err)
{
    for (int32_t j = 0; j < n; j++) {
        int clash = 0;
        if (in[j].ndim == 0 || in[j].count == 0)
            continue;
        for (int32_t o = 0; o < k->nout && o < BS_KMAX; o++)
            if (k->out[o].ndim > 0 && bs_view_overlap(&in[j], &k->out[o])
                && !(bs_view_same(&in[j], &k->out[o]) && self_disjoint(&k->out[o])))
                clash = 1;
        if (!clash)
            continue;
        bs_view d = in[j];
        int64_t size = bs_dtinfo_table[d.dtype].size;
        d.data = bs_kstate_tmp(k->ks, slot0 + j, (size_t)(d.count * size));  /* count > 0 */
        if (d.data == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory for a %lld-byte input copy",
                             (long long)(d.count * size));
        d.shadow = NULL;
        d.gathered = 1;
        for (int dd = d.ndim - 1; dd >= 0; dd--) {
            d.stride[dd] = size;
            size *= d.num[dd];
        }
        bs_copy_raw(&d, &in[j]);
        in[j] = d;
    }
    return BS_OK;
}

void bs_kview_normalize_free(bs_view *v)
{
    int m = 1;
    for (int d = 1; d < v->ndim; d++) {
        if (v->num[d] == 1)
            continue;
        if (m > 1 && v->stride[m - 1] == v->stride[d] * v->num[d]) {
            v->num[m - 1] *= v->num[d];
            v->stride[m - 1] = v->stride[d];
            continue;
        }
        v->num[m] = v->num[d];
        v->stride[m] = v->stride[d];
        m++;
    }
    if (m == 1) {
        v->num[1] = 1;
        v->stride[1] = 0;
        m = 2;
    }
    v->ndim = m;
}

bs_status bs_kview_check(const bs_kctx *k, const bs_view *in, int32_t nt, uint32_t imm_ok,
                         const char *what, bs_error *err)
{
    if (k->nout < 1 || k->out[0].ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s: out[0] must be an access pattern", what);
    if (!bs_dt_numeric(k->out[0].dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: out[0] dtype %s is not supported for "
                         "arithmetic", what, bs_dtinfo_table[k->out[0].dtype].name);
    for (int32_t j = 0; j < nt; j++) {
        if (j < k->nin && in[j].ndim == 0 && (imm_ok >> j & 1))
            continue;
        if (j >= k->nin || in[j].ndim == 0)
            return bs_errorf(err, BS_E_PROGRAM, "%s: in[%d] must be an access pattern",
                             what, (int)j);
        if (!bs_dt_numeric(in[j].dtype))
            return bs_errorf(err, BS_E_UNSUPPORTED, "%s: in[%d] dtype %s is not supported "
                             "for arithmetic", what, (int)j, bs_dtinfo_table[in[j].dtype].name);
        if (in[j].count != k->out[0].count)
            return bs_errorf(err, BS_E_SIM, "%s: in[%d] has %lld elements but out[0] has %lld",
                             what, (int)j, (long long)in[j].count,
                             (long long)k->out[0].count);
    }
    return BS_OK;
}

bs_status bs_kscalar_values(const bs_kctx *k, int32_t j, double dflt, int64_t np, float *f,
                            int64_t *i, const char *what, bs_error *err)
{
    if (j >= k->nin || k->in[j].ndim == 0) {
        double v = j < k->nin ? k->imm[j] : dflt;
        for (int64_t p = 0; p < np; p++) {
            if (f) f[p] = (float)v;
            if (i) i[p] = f2i(v);
        }
        return BS_OK;
    }
    if (k->in[j].count != np)
        return bs_errorf(err, BS_E_SIM, "%s: in[%d] has %lld elements, expected one per "
                         "partition (%lld)", what, (int)j, (long long)k->in[j].count,
                         (long long)np);
    if (!bs_dt_numeric(k->in[j].dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s: in[%d] dtype %s is not supported for "
                         "arithmetic", what, (int)j, bs_dtinfo_table[k->in[j].dtype].name);
    bs_cursor c;
    bs_cur_init(&c, &k->in[j]);
    for (int64_t p = 0; c.left > 0; ) {
        int64_t n = c.left < BS_CHUNK ? c.left : BS_CHUNK;
        if (f) {
            float buf[BS_CHUNK];
            const float *x = bs_cur_read_f32(&c, n, buf);
            memcpy(f + p, x, (size_t)n * sizeof *f);
        } else {
            bs_cur_read_i64(&c, n, i + p);
        }
        p += n;
    }
    return BS_OK;
}
