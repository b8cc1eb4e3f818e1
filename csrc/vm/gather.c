/* vm/gather.c -- data movement by index (docs/spec/machine-model.md §6.4, docs/spec/nki-isa-semantics.md
** §3.15, §3.26, §3.27, §3.31): IndirectLoad/Save, IndirectSaveAccumulate, the Generic
** forms, DMACopy with a vector dynamic offset, Gather (nc_n_gather), IndirectCopy
** (local_gather) and TensorCopyDynamicSrc/Dst.
**
** Indices: uint16 and int32/uint32 are zero-extended, int64/uint64 taken as they are;
** the all-ones value at the index width (-1) marks an unused slot and is skipped. Any
** other index outside its axis is skipped when oob_is_err is false and an error naming
** the element when it is true (the default). All indices are checked before anything is
** written, so a failing instruction changes nothing. Rows move in index order (a later
** duplicate wins; accumulation folds in that order). Only the rows written are marked
** written. The indexed operand's access pattern is the table: its indexed dims' extents
** are the axis sizes; the pattern itself must lie inside its location. */
#include <stdio.h>
#include "vm.h"
#include "check.h"
#include "gather.h"

/* {=== Parameter slots (bs_ops.def): the indexed ops share slot positions ===} */

#define SAME_SLOT(a, b, f) (BS_Pi_##a##_##f == BS_Pi_##b##_##f)
_Static_assert(SAME_SLOT(IndirectLoad, IndirectSave, oob_skip)
               && SAME_SLOT(IndirectLoad, IndirectSaveAccumulate, oob_skip)
               && SAME_SLOT(IndirectLoad, GenericIndirectLoad, oob_skip)
               && SAME_SLOT(IndirectLoad, GenericIndirectSave, oob_skip)
               && SAME_SLOT(IndirectLoad, Gather, oob_skip)
               && SAME_SLOT(IndirectLoad, IndirectCopy, oob_skip)
               && SAME_SLOT(IndirectLoad, LocalGather, oob_skip)
               && SAME_SLOT(IndirectCopy, LocalGather, num_valid)
               && SAME_SLOT(IndirectSaveAccumulate, GenericIndirectSave, op)
               && SAME_SLOT(TensorCopyDynamicSrc, TensorCopyDynamicDst, scale),
               "indexed-op slots");
#undef SAME_SLOT

static inline int gx_oob_is_err(const bs_insn *in)
{
    return in->op == BS_OP_DMACopy ? BS_PI(in, DMACopy, oob_skip) == 0
                                   : BS_PI(in, IndirectLoad, oob_skip) == 0;
}
static inline int64_t gx_alu(const bs_insn *in) { return BS_PI(in, IndirectSaveAccumulate, op); }
static inline int64_t gx_limit(const bs_insn *in)
{
    return in->op == BS_OP_IndirectSaveAccumulate ? BS_PI(in, IndirectSaveAccumulate, num_indices)
           : in->op == BS_OP_IndirectCopy || in->op == BS_OP_LocalGather
           ? BS_PI(in, IndirectCopy, num_valid) : 0;
}
static inline int64_t gx_entry_step(const bs_insn *in)
{
    return BS_PI(in, IndirectSaveAccumulate, entry_step);
}
static inline int64_t gx_scale(const bs_insn *in) { return BS_PI(in, TensorCopyDynamicSrc, scale); }
static inline int32_t gx_ndims(const bs_insn *in)
{
    return in->op == BS_OP_GenericIndirectLoad || in->op == BS_OP_GenericIndirectSave
           ? in->nlist : 0;
}
static inline int32_t gx_dim(const bs_program *p, const bs_insn *in, int32_t k)
{
    return (int32_t)p->ipool[in->list + k];
}

/* {=== Operands ===} */


bs_status gx_fail_opnd(bs_sim *sim, bs_core *c, int32_t insn, int32_t pos, bs_status st,
                       bs_error *err)
{
    char msg[BS_ERRMSG];
    (void)sim, (void)c, (void)insn;     /* the location is attached once, by bs_core_step */
    snprintf(msg, sizeof msg, "%s", err->msg);
    bs_errorf(err, st, "%s[%d]: %s", pos >= BS_OUT_OPERAND ? "outs" : "ins",
              pos >= BS_OUT_OPERAND ? pos - BS_OUT_OPERAND : pos, msg);
    err->operand = pos;
    return st;
}

/* Resolve ins[j] (pos j) or outs[j] (pos BS_OUT_OPERAND + j) to a view; outputs must be linear. */
bs_status gx_resolve(bs_sim *sim, bs_core *c, int32_t insn, int32_t pos, gx_op *g,
                     bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    int32_t idx = pos >= BS_OUT_OPERAND ? in->nin + pos - BS_OUT_OPERAND : pos;
    const bs_opnd *o = &p->opnds[in->opnd + idx];
    bs_status st;
    g->j = pos;
    if (!bs_exec_is_ap(o)) {
        bs_errorf(err, BS_E_PROGRAM, "must be an access pattern");
        return gx_fail_opnd(sim, c, insn, pos, BS_E_PROGRAM, err);
    }
    st = bs_exec_view(sim, c, o, idx, &g->v, &g->offs, err);
    if (st != BS_OK)
        return gx_fail_opnd(sim, c, insn, pos, st, err);
    if (pos >= BS_OUT_OPERAND && g->offs) {
        bs_errorf(err, BS_E_UNSUPPORTED, "'%s': an access pattern that wraps partitions "
                  "irregularly cannot be written by index", bs_str(p, p->locs[o->loc].name));
        return gx_fail_opnd(sim, c, insn, pos, BS_E_UNSUPPORTED, err);
    }
    if (BS_UNLIKELY(sim->chk))
        return bs_chk_capacity(sim, c, insn, idx, &g->v, g->offs, err);
    return BS_OK;
}

/* The checkers (races, dead writes): operand g touched v, a part of it (a row it moved), or
** all of it when g is a gathered pattern (known by its box). Call as
** `if (BS_UNLIKELY(sim->chk))`, the hooks' guard. */
bs_status gx_touch(bs_sim *sim, bs_core *c, int32_t insn, const gx_op *g, const bs_view *v,
                   int rd, int wr, bs_error *err)
{
    return bs_chk_touch(sim, c, insn, gx_pos(sim, insn, g->j), g->offs ? &g->v : v, g->offs, rd, wr, err);
}

/* Operand position pos (ins j or BS_OUT_OPERAND + j) as an index into the operands. */
int32_t gx_pos(const bs_sim *sim, int32_t insn, int32_t pos)
{
    return pos >= BS_OUT_OPERAND ? sim->prog->insns[insn].nin + pos - BS_OUT_OPERAND : pos;
}

/* checks "nan": view v of output operand pos now holds a NaN/Inf none of its sources did. */
bs_status gx_born(bs_sim *sim, bs_core *c, int32_t insn, int32_t pos, const bs_view *v,
                  int inherited, bs_error *err)
{
    const bs_program *p = sim->prog;
    if (pos < BS_OUT_OPERAND)
        return BS_OK;
    return bs_chk_born(sim, c, insn, pos - BS_OUT_OPERAND,
                       p->opnds[p->insns[insn].opnd + gx_pos(sim, insn, pos)].loc, v, inherited,
                       err);
}

/* Warn (once per instruction) when the elements of v were never written. */
bs_status gx_check_init(bs_sim *sim, bs_core *c, int32_t insn, int32_t k, const bs_view *v,
                        bs_error *err)
{
    if (sim->warned[insn] && !sim->opts.strict)
        return BS_OK;
    if (bs_view_initialized(v))
        return BS_OK;
    return bs_exec_warn_uninit(sim, c, insn, k, v, err);
}

/* 1 when every byte of ins[k]'s location was written this run (nothing to check). */
static int all_written(const bs_sim *sim, const bs_core *c, int32_t insn, int32_t k)
{
    return c->complete[c->stores[sim->prog->opnds[sim->prog->insns[insn].opnd + k].loc].loc];
}

/* {=== Indices ===} */


/* Read index view `iv` (operand ins[k]) against an axis of `size`. */
bs_status gx_read_indices(bs_sim *sim, bs_core *c, int32_t insn, int32_t k, const bs_view *iv,
                          int64_t size, int oob_err, int slot, gx_index *ix, bs_error *err)
{
    int32_t dt = iv->dtype, isz = bs_dtinfo_table[dt].size;
    int64_t idx[BS_MAX_DIMS] = {0}, off = 0;
    uint64_t ones;
    if (!(dt == BS_DT_uint16 || dt == BS_DT_int32 || dt == BS_DT_uint32 || dt == BS_DT_int64
          || dt == BS_DT_uint64)) {
        bs_errorf(err, BS_E_SIM, "index dtype %s is not supported (uint16, int32, uint32, "
                  "int64 or uint64)", bs_dtinfo_table[dt].name);
        return gx_fail_opnd(sim, c, insn, k, BS_E_SIM, err);
    }
    BS_TRY(gx_check_init(sim, c, insn, k, iv, err));
    ones = isz == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * isz)) - 1;
    ix->n = iv->count;
    ix->skipped = 0;
    ix->val = bs_kstate_tmp(&c->ks, slot, (size_t)(iv->count ? iv->count : 1) * sizeof(int64_t));
    if (ix->val == NULL)
        return (bs_errorf(err, BS_E_NOMEM, "out of memory reading "
                          "indices"));
    for (int64_t e = 0; e < iv->count; e++) {
        const uint8_t *q = iv->data + off;
        uint64_t raw = 0;
        for (int32_t b = 0; b < isz; b++)
            raw |= (uint64_t)q[b] << (8 * b);
        if (raw == ones) {
            ix->val[e] = -1;
        } else if (raw >= (uint64_t)size) {
            if (oob_err) {
                bs_errorf(err, BS_E_OOB, "index %llu (element %lld of the index tensor) is out "
                          "of bounds for axis of size %lld", (unsigned long long)raw,
                          (long long)e, (long long)size);
                return gx_fail_opnd(sim, c, insn, k, BS_E_OOB, err);
            }
            ix->val[e] = -1;
            ix->skipped++;
        } else {
            ix->val[e] = (int64_t)raw;
        }
        for (int32_t d = iv->ndim - 1; d >= 0; d--) {
            off += iv->stride[d];
            if (++idx[d] < iv->num[d])
                break;
            off -= iv->stride[d] * iv->num[d];
            idx[d] = 0;
        }
    }
    return BS_OK;
}

/* {=== Rows ===} */

/* The view of v with dims in `drop` (bit d) removed, starting at byte offset `base`. */
static bs_view sub_view(const bs_view *v, uint32_t drop, int64_t base)
{
    bs_view r = *v;
    int32_t n = 0;
    r.data = v->data + base;
    r.shadow = v->shadow ? v->shadow + base : NULL;
    r.count = 1;
    for (int32_t d = 0; d < v->ndim; d++) {
        if (drop & (1u << d))
            continue;
        r.num[n] = v->num[d];
        r.stride[n] = v->stride[d];
        r.count *= v->num[d];
        n++;
    }
    if (n == 0) {
        r.num[0] = 1;
        r.stride[0] = 0;
        n = 1;
    }
    r.ndim = n;
    return r;
}

/* Row i (of n, each w elements) of the dense side d: d as [n, ...], or contiguous. */
static int dense_row(const bs_view *d, int64_t n, int64_t w, int64_t i, bs_view *row)
{
    bs_view t;
    if (n == 1) {
        *row = *d;
        return 1;
    }
    if (d->ndim >= 2 && d->num[0] == n) {
        *row = sub_view(d, 1u, i * d->stride[0]);
        return 1;
    }
    t = *d;
    bs_view_normalize(&t);
    if (t.ndim != 1)
        return 0;
    *row = t;
    row->num[0] = w;
    row->count = w;
    row->data = t.data + i * w * t.stride[0];
    row->shadow = t.shadow ? t.shadow + i * w * t.stride[0] : NULL;
    return 1;
}

/* dst := src, or dst := dst + src (acc), casting through fp32 when dtypes differ. */
bs_status gx_move_row(bs_core *c, const bs_view *dst, const bs_view *src, int acc,
                      bs_error *err)
{
    if (!acc && dst->dtype == src->dtype) {
        bs_copy_raw(dst, src);
    } else {
        float *a = bs_kstate_tmp(&c->ks, BS_KSLOT_A, (size_t)src->count * sizeof(float) * 2);
        if (a == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory moving a row");
        bs_view_to_f32(a, src);
        if (acc) {
            float *b = a + src->count;
            bs_view_to_f32(b, dst);
            for (int64_t e = 0; e < src->count; e++)
                a[e] = b[e] + a[e];
        }
        bs_view_from_f32(dst, a);
    }
    if (dst->shadow)
        bs_view_mark_written(dst);
    return BS_OK;
}

int gx_numeric_pair(const bs_view *a, const bs_view *b)
{
    return a->dtype == b->dtype || (bs_dt_numeric(a->dtype) && bs_dt_numeric(b->dtype));
}

/* {=== Indirect loads and saves ===}
** The table (the indexed side) is viewed as 4 dims labelled W, Z, Y, X after left-padding
** its pattern; `dims` (bit d) are the indexed ones, in order, index tensor k for the k-th
** set bit. Position i of the index tensors selects the row at sum_k idx_k[i]*stride[d_k];
** rows pair with the dense side's rows in order. */

typedef struct gx_plan {
    int32_t  save;          /* 1: the table is written (scatter) */
    int32_t  acc;           /* saves: add instead of overwrite */
    int32_t  oob_err;
    int64_t  limit;         /* use only the first `limit` indices (0 = all) */
    int64_t  row_stride;    /* > 0: bytes between table rows (IndirectSaveAccumulate) */
    int32_t  ndims;         /* indexed dims */
    int32_t  dim[4];        /* indexed dims (table view dims) */
    int32_t  ins_idx[4];    /* ins position of each index tensor */
    int32_t  table, dense;  /* operand positions (ins j or BS_OUT_OPERAND + j) */
} gx_plan;

/* Rows placed by entry_step_elements (row_stride) may lie past the table operand's own
** extent: the largest index must still fall inside the table's location. */
static bs_status check_row_stride(bs_sim *sim, bs_core *c, int32_t insn, const gx_plan *pl,
                                  const bs_view *table, const int64_t *idx, int64_t nuse,
                                  bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_opnd *o = &p->opnds[p->insns[insn].opnd + p->insns[insn].nin
                                 + (pl->table - BS_OUT_OPERAND)];
    int64_t maxv = -1, *poffs;
    bs_opnd probe = *o;
    bs_view pv;
    bs_status st;
    for (int64_t i = 0; i < nuse; i++)
        if (idx[i] > maxv)
            maxv = idx[i];
    if (maxv < 0)
        return BS_OK;
    probe.step[0] = pl->row_stride / bs_dtinfo_table[table->dtype].size;
    probe.num[0] = maxv + 1;
    st = bs_exec_view(sim, c, &probe, pl->table - BS_OUT_OPERAND + p->insns[insn].nin, &pv,
                      &poffs, err);
    if (st == BS_OK && poffs != NULL)
        st = bs_errorf(err, BS_E_UNSUPPORTED, "rows wrap partitions irregularly");
    if (st != BS_OK) {
        char msg[BS_ERRMSG];
        snprintf(msg, sizeof msg, "%s", err->msg);
        bs_errorf(err, st, "index %lld with entry_step_elements %lld: %s",
                  (long long)maxv, (long long)probe.step[0], msg);
        return gx_fail_opnd(sim, c, insn, pl->table, st, err);
    }
    return BS_OK;
}

/* Move the first nuse rows: row i of the dense operand to or from the table row its
** indices select (an index < 0 skips the row). */
static bs_status move_rows(bs_sim *sim, bs_core *c, int32_t insn, const gx_plan *pl,
                           const gx_op *tab, const gx_op *den, const gx_index *ix,
                           uint32_t drop, int64_t n, int64_t w, int64_t nuse, bs_error *err)
{
    const bs_view *table = &tab->v, *dense = &den->v;
    bs_status st;
    for (int64_t i = 0; i < nuse; i++) {
        int64_t base = 0;
        bs_view trow, drow;
        int skip = 0;
        for (int32_t k = 0; k < pl->ndims; k++) {
            if (ix[k].val[i] < 0)
                skip = 1;
            else
                base += ix[k].val[i] * (pl->row_stride > 0 && k == 0 ? pl->row_stride
                                        : table->stride[pl->dim[k]]);
        }
        if (skip)
            continue;
        trow = sub_view(table, drop, base);
        if (!dense_row(dense, n, w, i, &drow)) {
            bs_errorf(err, BS_E_UNSUPPORTED, "must be [%lld, ...] (one row per index) or "
                      "contiguous", (long long)n);
            return gx_fail_opnd(sim, c, insn, pl->dense, BS_E_UNSUPPORTED, err);
        }
        if (BS_UNLIKELY(sim->chk)) {  /* the rows moved (a gathered pattern: run_rows) */
            if (!tab->offs)
                BS_TRY(gx_touch(sim, c, insn, tab, &trow, !pl->save || pl->acc, pl->save, err));
            if (!den->offs)
                BS_TRY(gx_touch(sim, c, insn, den, &drow, pl->save, !pl->save, err));
        }
        if (pl->save) {
            int inherited = 0;
            if (BS_UNLIKELY(sim->chk)) {
                if (pl->acc)
                    BS_TRY(bs_chk_accumulate_into(sim, c, insn, gx_pos(sim, insn, pl->table),
                                                  &trow, "", err));
                inherited = bs_chk_nonfinite(&drow) || (pl->acc && bs_chk_nonfinite(&trow));
            }
            st = gx_move_row(c, &trow, &drow, pl->acc, err);
            if (st == BS_OK && BS_UNLIKELY(sim->chk) && (pl->acc || trow.dtype != drow.dtype))
                st = gx_born(sim, c, insn, pl->table, &trow, inherited, err);
        } else {
            if (!c->complete[sim->prog->opnds[sim->prog->insns[insn].opnd + pl->table].loc])
                BS_TRY(gx_check_init(sim, c, insn, pl->table, &trow, err));
            st = gx_move_row(c, &drow, &trow, 0, err);
            if (st == BS_OK && BS_UNLIKELY(sim->chk) && trow.dtype != drow.dtype)
                st = gx_born(sim, c, insn, pl->dense, &drow, bs_chk_nonfinite(&trow), err);
        }
        if (st != BS_OK)
            return st;
    }
    return BS_OK;
}

static bs_status run_rows(bs_sim *sim, bs_core *c, int32_t insn, const gx_plan *pl,
                          bs_error *err)
{
    gx_op table, dense, idxv[4];
    gx_index ix[4];
    uint32_t drop = 0;
    int64_t n = -1, nuse, w;
    BS_TRY(gx_resolve(sim, c, insn, pl->table, &table, err));
    BS_TRY(gx_resolve(sim, c, insn, pl->dense, &dense, err));
    for (int32_t k = 0; k < pl->ndims; k++) {
        int32_t d = pl->dim[k];
        int64_t size = table.v.num[d];
        BS_TRY(gx_resolve(sim, c, insn, pl->ins_idx[k], &idxv[k], err));
        if (pl->row_stride > 0 && k == 0)
            size = INT64_MAX;     /* bounded below by the location check */
        BS_TRY(gx_read_indices(sim, c, insn, pl->ins_idx[k], &idxv[k].v, size, pl->oob_err,
                            BS_KSLOT_B + k, &ix[k], err));
        if (n >= 0 && ix[k].n != n) {
            bs_errorf(err, BS_E_SIM, "index tensors have %lld and %lld elements", (long long)n,
                      (long long)ix[k].n);
            return gx_fail_opnd(sim, c, insn, pl->ins_idx[k], BS_E_SIM, err);
        }
        n = ix[k].n;
        drop |= 1u << d;
    }
    w = 1;
    for (int32_t d = 0; d < table.v.ndim; d++)
        if (!(drop & (1u << d)))
            w *= table.v.num[d];
    if (dense.v.count != n * w) {
        bs_errorf(err, BS_E_SIM, "%lld indices of %lld-element rows need %lld elements, the "
                  "operand has %lld", (long long)n, (long long)w, (long long)(n * w),
                  (long long)dense.v.count);
        return gx_fail_opnd(sim, c, insn, pl->dense, BS_E_SIM, err);
    }
    nuse = n;
    if (!gx_numeric_pair(&table.v, &dense.v) || (pl->acc && !bs_dt_numeric(table.v.dtype))) {
        bs_errorf(err, BS_E_UNSUPPORTED, "cannot move %s rows to %s",
                  bs_dtinfo_table[pl->save ? dense.v.dtype : table.v.dtype].name,
                  bs_dtinfo_table[pl->save ? table.v.dtype : dense.v.dtype].name);
        return BS_E_UNSUPPORTED;
    }
    if (pl->limit > 0 && pl->limit < nuse)
        nuse = pl->limit;
    if (pl->row_stride > 0)            /* rows beyond the table's own extent: bounds */
        BS_TRY(check_row_stride(sim, c, insn, pl, &table.v, ix[0].val, nuse, err));
    for (int64_t i = 0; pl->save && i < nuse && !all_written(sim, c, insn, pl->dense); i++) {
        bs_view drow;                  /* a save reads only the rows it moves */
        int skip = 0;
        for (int32_t k = 0; k < pl->ndims; k++)
            skip |= ix[k].val[i] < 0;
        if (!skip && dense_row(&dense.v, n, w, i, &drow))
            BS_TRY(gx_check_init(sim, c, insn, pl->dense, &drow, err));
    }
    if (BS_UNLIKELY(sim->chk)) {
        for (int32_t k = 0; k < pl->ndims; k++)
            BS_TRY(gx_touch(sim, c, insn, &idxv[k], &idxv[k].v, 1, 0, err));
        if (table.offs)                   /* gathered: the whole pattern, once */
            BS_TRY(gx_touch(sim, c, insn, &table, &table.v, !pl->save || pl->acc, pl->save, err));
        if (dense.offs)
            BS_TRY(gx_touch(sim, c, insn, &dense, &dense.v, pl->save, !pl->save, err));
    }
    return move_rows(sim, c, insn, pl, &table, &dense, ix, drop, n, w, nuse, err);
}

/* {=== Gather (nc_n_gather): out[p, j] := in0[p].flat[in1[p, j]] ===} */

static int64_t flat_off(const bs_view *v, int64_t e)
{
    int64_t off = 0;
    for (int32_t d = v->ndim - 1; d >= 1; d--) {
        off += (e % v->num[d]) * v->stride[d];
        e /= v->num[d];
    }
    return off;
}

/* Partition p of v (its first dim), or its one element at byte offset off. */
static bs_view part_row(const bs_view *v, int64_t p)
{
    bs_view r = *v;
    r.count = v->count / v->num[0];
    r.num[0] = 1;
    r.data = v->data + p * v->stride[0];
    r.shadow = v->shadow ? v->shadow + p * v->stride[0] : NULL;
    return r;
}
static bs_view one_elem(const bs_view *v, int64_t off)
{
    bs_view r = *v;
    r.ndim = 1;
    r.num[0] = r.count = 1;
    r.stride[0] = bs_dtinfo_table[v->dtype].size;
    r.data = v->data + off;
    r.shadow = v->shadow ? v->shadow + off : NULL;
    return r;
}

/* The checkers: partition p of `data` was read (when it moved anything) and the elements
** of out's partition p written: its first n elements (in its flat order) take ix[0..n) at
** runs of E (skipped: -1). */
static bs_status touch_part(bs_sim *sim, bs_core *c, int32_t insn, const gx_op *out,
                            const gx_op *data, int64_t p, const int64_t *ix, int64_t n,
                            int64_t E, bs_error *err)
{
    int64_t used = 0;
    bs_view r;
    for (int64_t i = 0; i < n; i++)
        used += ix[i] >= 0;
    if (used == 0)
        return BS_OK;
    if (!data->offs) {
        r = part_row(&data->v, p);
        BS_TRY(gx_touch(sim, c, insn, data, &r, 1, 0, err));
    }
    if (used == n && n * E == out->v.count / out->v.num[0]) {
        r = part_row(&out->v, p);
        return gx_touch(sim, c, insn, out, &r, 0, 1, err);
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = 0; ix[i] >= 0 && e < E; e++) {
            r = one_elem(&out->v, p * out->v.stride[0] + flat_off(&out->v, i * E + e));
            BS_TRY(gx_touch(sim, c, insn, out, &r, 0, 1, err));
        }
    return BS_OK;
}

static bs_status run_gather(bs_sim *sim, bs_core *c, int32_t insn, int oob_err, bs_error *err)
{
    gx_op out, data, idx;
    gx_index ix;
    int64_t P, F, J;
    BS_TRY(gx_resolve(sim, c, insn, BS_OUT_OPERAND, &out, err));
    BS_TRY(gx_resolve(sim, c, insn, 0, &data, err));
    BS_TRY(gx_resolve(sim, c, insn, 1, &idx, err));
    P = data.v.num[0];
    F = data.v.count / P;
    if (out.v.num[0] != P || idx.v.num[0] != P || out.v.count != idx.v.count) {
        bs_errorf(err, BS_E_SIM, "out[0] (%lld partitions, %lld elements), ins[0] (%lld "
                  "partitions) and ins[1] (%lld partitions, %lld elements) must have the same "
                  "partitions and out[0] one element per index", (long long)out.v.num[0],
                  (long long)out.v.count, (long long)P, (long long)idx.v.num[0],
                  (long long)idx.v.count);
        return BS_E_SIM;
    }
    if (!gx_numeric_pair(&out.v, &data.v)) {
        bs_errorf(err, BS_E_UNSUPPORTED, "cannot gather %s into %s",
                  bs_dtinfo_table[data.v.dtype].name, bs_dtinfo_table[out.v.dtype].name);
        return BS_E_UNSUPPORTED;
    }
    BS_TRY(gx_read_indices(sim, c, insn, 1, &idx.v, F, oob_err, BS_KSLOT_B, &ix, err));
    J = idx.v.count / P;
    for (int64_t e = 0; !all_written(sim, c, insn, 0) && e < out.v.count; e++)
        if (ix.val[e] >= 0) {                          /* the elements it gathers */
            bs_view one = one_elem(&data.v, (e / J) * data.v.stride[0]
                                   + flat_off(&data.v, ix.val[e]));
            BS_TRY(gx_check_init(sim, c, insn, 0, &one, err));
        }
    {
        int32_t osz = bs_dtinfo_table[out.v.dtype].size;
        for (int64_t e = 0; e < out.v.count; e++) {
            int64_t p = e / J, v = ix.val[e];
            uint8_t *dst, *dsh;
            const uint8_t *src;
            int64_t ooff;
            if (v < 0)
                continue;
            ooff = p * out.v.stride[0] + flat_off(&out.v, e % J);
            dst = out.v.data + ooff;
            dsh = out.v.shadow ? out.v.shadow + ooff : NULL;
            src = data.v.data + p * data.v.stride[0] + flat_off(&data.v, v);
            if (out.v.dtype == data.v.dtype)
                memmove(dst, src, (size_t)osz);
            else
                bs_dt_store_f32(dst, out.v.dtype, bs_dt_load_f32(src, data.v.dtype));
            if (dsh)
                memset(dsh, 1, (size_t)osz);
        }
    }
    if (BS_UNLIKELY(sim->chk)) {
        BS_TRY(gx_touch(sim, c, insn, &idx, &idx.v, 1, 0, err));
        if (data.offs)
            BS_TRY(gx_touch(sim, c, insn, &data, &data.v, 1, 0, err));
        for (int64_t p = 0; p < P; p++)
            BS_TRY(touch_part(sim, c, insn, &out, &data, p, ix.val + p * J, J, 1, err));
    }
    return BS_OK;
}

/* {=== IndirectCopy / LocalGather (local_gather) ===
** Each group of 16 partitions gathers the same positions: the group's index elements in
** column-major order (partition fastest), the first num_valid_indices of them (all when
** 0), are element offsets into each partition's flattened in0; each index takes E
** consecutive elements, E = out[0]'s elements per partition / num_valid_indices. */

static bs_status run_local_gather(bs_sim *sim, bs_core *c, int32_t insn, int64_t nvalid,
                                  int oob_err, bs_error *err)
{
    gx_op out, data, idx;
    gx_index ix;
    int64_t P, F, FO, M, E;
    BS_TRY(gx_resolve(sim, c, insn, BS_OUT_OPERAND, &out, err));
    BS_TRY(gx_resolve(sim, c, insn, 0, &data, err));
    BS_TRY(gx_resolve(sim, c, insn, 1, &idx, err));
    P = data.v.num[0];
    F = data.v.count / P;
    FO = out.v.count / out.v.num[0];
    M = idx.v.count / idx.v.num[0];
    if (out.v.num[0] != P || idx.v.num[0] != P || P % 16 != 0) {
        bs_errorf(err, BS_E_SIM, "out[0], ins[0] and ins[1] must cover the same partitions, a "
                  "multiple of 16 (%lld, %lld, %lld)", (long long)out.v.num[0], (long long)P,
                  (long long)idx.v.num[0]);
        return BS_E_SIM;
    }
    if (idx.v.dtype != BS_DT_uint16) {
        bs_errorf(err, BS_E_SIM, "local gather indices are uint16, got %s",
                  bs_dtinfo_table[idx.v.dtype].name);
        return gx_fail_opnd(sim, c, insn, 1, BS_E_SIM, err);
    }
    if (out.v.dtype != data.v.dtype) {
        bs_errorf(err, BS_E_SIM, "no dtype cast: out[0] is %s, ins[0] %s",
                  bs_dtinfo_table[out.v.dtype].name, bs_dtinfo_table[data.v.dtype].name);
        return BS_E_SIM;
    }
    if (nvalid <= 0)
        nvalid = 16 * M;
    if (nvalid > 16 * M || FO % nvalid != 0) {
        bs_errorf(err, BS_E_SIM, "num_valid_indices %lld: the 16-partition groups hold %lld "
                  "indices and out[0] has %lld elements per partition (a multiple of it)",
                  (long long)nvalid, (long long)(16 * M), (long long)FO);
        return BS_E_SIM;
    }
    E = FO / nvalid;
    BS_TRY(gx_read_indices(sim, c, insn, 1, &idx.v, F, oob_err, BS_KSLOT_B, &ix, err));
    /* Whole runs of E elements must fit the partition (checked before writing). */
    for (int64_t e = 0; e < ix.n; e++)
        if (ix.val[e] >= 0 && ix.val[e] + E > F) {
            if (oob_err) {
                bs_errorf(err, BS_E_OOB, "index %lld (element %lld of the index tensor) "
                          "reads %lld elements past the %lld of a partition",
                          (long long)ix.val[e], (long long)e, (long long)E, (long long)F);
                return gx_fail_opnd(sim, c, insn, 1, BS_E_OOB, err);
            }
            ix.val[e] = -1;
        }
    for (int64_t g = 0; !all_written(sim, c, insn, 0) && g < P / 16; g++)
        for (int64_t i = 0; i < nvalid; i++) {       /* the runs it gathers */
            int64_t v = ix.val[(g * 16 + i % 16) * M + i / 16];
            for (int64_t p = g * 16; v >= 0 && p < g * 16 + 16; p++)
                for (int64_t e = 0; e < E; e++) {
                    bs_view one = one_elem(&data.v, p * data.v.stride[0]
                                           + flat_off(&data.v, v + e));
                    BS_TRY(gx_check_init(sim, c, insn, 0, &one, err));
                }
        }
    {
        int32_t sz = bs_dtinfo_table[out.v.dtype].size;
        for (int64_t g = 0; g < P / 16; g++)
            for (int64_t i = 0; i < nvalid; i++) {
                int64_t r = i % 16, col = i / 16;
                int64_t v = ix.val[(g * 16 + r) * M + col];
                if (v < 0)
                    continue;
                for (int64_t p = g * 16; p < g * 16 + 16; p++)
                    for (int64_t e = 0; e < E; e++) {
                        int64_t oo = p * out.v.stride[0] + flat_off(&out.v, i * E + e);
                        memmove(out.v.data + oo, data.v.data + p * data.v.stride[0]
                                + flat_off(&data.v, v + e), (size_t)sz);
                        if (out.v.shadow)
                            memset(out.v.shadow + oo, 1, (size_t)sz);
                    }
            }
    }
    if (BS_UNLIKELY(sim->chk)) {
        int64_t *gi = bs_kstate_tmp(&c->ks, BS_KSLOT_A, (size_t)(nvalid ? nvalid : 1)
                                    * sizeof(int64_t));
        if (gi == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory checking a local gather");
        BS_TRY(gx_touch(sim, c, insn, &idx, &idx.v, 1, 0, err));
        if (data.offs)
            BS_TRY(gx_touch(sim, c, insn, &data, &data.v, 1, 0, err));
        for (int64_t g = 0; g < P / 16; g++) {
            for (int64_t i = 0; i < nvalid; i++)
                gi[i] = ix.val[(g * 16 + i % 16) * M + i / 16];
            for (int64_t p = g * 16; p < g * 16 + 16; p++)
                BS_TRY(touch_part(sim, c, insn, &out, &data, p, gi, nvalid, E, err));
        }
    }
    return BS_OK;
}

/* {=== Dispatch ===} */

bs_status bs_exec_gather(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    gx_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.oob_err = (int32_t)gx_oob_is_err(in);
    switch (in->op) {
    case BS_OP_Gather:
        if (in->nin < 2 || in->nout < 1)
            break;
        return run_gather(sim, c, insn, pl.oob_err, err);
    case BS_OP_IndirectCopy:
    case BS_OP_LocalGather:
        if (in->nin < 2 || in->nout < 1)
            break;
        return run_local_gather(sim, c, insn, gx_limit(in), pl.oob_err, err);
    case BS_OP_TensorCopyDynamicSrc:
    case BS_OP_TensorCopyDynamicDst: {
        int64_t scale = gx_scale(in);
        return gx_run_dynamic(sim, c, insn, in->op == BS_OP_TensorCopyDynamicDst,
                           scale > 0 ? scale : 1, err);
    }
    default:
        break;
    }
    if (in->nin < 2 || in->nout < 1) {
        bs_errorf(err, BS_E_PROGRAM, "needs out[0], ins[0] and an index tensor ins[1]");
        return BS_E_PROGRAM;
    }
    pl.save = in->op == BS_OP_IndirectSave || in->op == BS_OP_IndirectSaveAccumulate
              || in->op == BS_OP_GenericIndirectSave;
    pl.table = pl.save ? BS_OUT_OPERAND : 0;
    pl.dense = pl.save ? 0 : BS_OUT_OPERAND;
    pl.limit = gx_limit(in);
    if (in->op == BS_OP_IndirectSaveAccumulate || in->op == BS_OP_GenericIndirectSave) {
        int64_t op = gx_alu(in);
        if (op != BS_ALU_bypass && op != BS_ALU_add) {
            bs_errorf(err, BS_E_UNSUPPORTED, "op %s is not supported (bypass or add)",
                      bs_alu_table[op].name);
            return BS_E_UNSUPPORTED;
        }
        pl.acc = op == BS_ALU_add;
    }
    if (in->op == BS_OP_IndirectSaveAccumulate && gx_entry_step(in) > 0) {
        const bs_opnd *t = &p->opnds[in->opnd + in->nin];
        pl.row_stride = gx_entry_step(in) * bs_dtinfo_table[t->dtype].size;
    }
    {
        const bs_opnd *t = &p->opnds[in->opnd + (pl.save ? in->nin : 0)];
        int32_t nd = t->ndim, pad = 4 - nd;
        int32_t ndl = gx_ndims(in);
        if (ndl == 0) {
            pl.ndims = 1;
            pl.dim[0] = 0;
        } else {
            for (int32_t k = 0; k < ndl; k++) {
                int32_t label = gx_dim(p, in, k);     /* IndirectDim: W=0, Z=1, Y=2, X=3 */
                int32_t d = nd <= 4 ? label - pad : label;
                if (d < 0 || d >= nd) {
                    bs_errorf(err, BS_E_PROGRAM, "indirect_dims[%d] names a dimension the %d-dim "
                              "access pattern does not have", (int)k, (int)nd);
                    return BS_E_PROGRAM;
                }
                pl.dim[pl.ndims++] = d;
            }
        }
        if (in->nin < 1 + pl.ndims) {
            bs_errorf(err, BS_E_PROGRAM, "%d indexed dimensions need %d index tensors "
                      "(ins[1..]), got %d", (int)pl.ndims, (int)pl.ndims, (int)(in->nin - 1));
            return BS_E_PROGRAM;
        }
        for (int32_t k = 0; k < pl.ndims; k++)
            pl.ins_idx[k] = 1 + k;
    }
    return run_rows(sim, c, insn, &pl, err);
}
