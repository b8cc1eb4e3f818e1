/* vm/check.c -- the run-time checkers behind Simulator(checks=...): see check.h for the
** hooks, docs/DESIGN.md ("Checkers") for the model and check_int.h for what the three
** files share. The hooks on memory and outputs are here (operand accesses, NaN/Inf births,
** never-written reads), with the findings, the end-of-run checks and the lifecycle; the
** happens-before engine is vm/hb.c, the static checks vm/check_static.c. */
#include <math.h>
#include <stdio.h>
#include "check_int.h"

_Static_assert(BS_FD_OPERAND + 1 == BS_FINDING_NDETAIL, "detail slots (bs_enums.def FD)");

/* {=== Findings ===} */

int bs_chk_seen_add(bs_chk *k, uint64_t key)
{
    size_t mask, i;
    key = key * 0x9E3779B97F4A7C15ull | 1u;
    if (k->nseen * 2 >= k->seen_cap) {
        size_t ncap = k->seen_cap ? k->seen_cap * 2 : 1024;
        uint64_t *n = bs_calloc(ncap, sizeof *n);
        if (n == NULL)
            return 1;                                /* report anyway */
        for (size_t j = 0; j < k->seen_cap; j++)
            if (k->seen[j]) {
                size_t h = (size_t)(k->seen[j] >> 7) & (ncap - 1);
                while (n[h])
                    h = (h + 1) & (ncap - 1);
                n[h] = k->seen[j];
            }
        bs_free(k->seen);
        k->seen = n;
        k->seen_cap = ncap;
    }
    mask = k->seen_cap - 1;
    for (i = (size_t)(key >> 7) & mask; k->seen[i]; i = (i + 1) & mask)
        if (k->seen[i] == key)
            return 0;
    k->seen[i] = key;
    k->nseen++;
    return 1;
}

void bs_chk_detail_init(int64_t *d)
{
    for (int i = 0; i < BS_FINDING_NDETAIL; i++)
        d[i] = -1;
}

/* Record a finding; with strict=True fail the run with it. `insn` locates the error. */
bs_status bs_chk_add_finding(bs_sim *sim, int32_t check, const int64_t *d, int32_t core,
                             int32_t insn, const char *msg, bs_error *err)
{
    bs_chk *k = sim->chk;
    char *m;
    if (sim->opts.strict) {
        bs_errorf(err, BS_E_CHECK, "%s", msg);
        if (insn >= 0)
            bs_error_at_insn(err, sim->prog, insn);
        err->core = core;
    }
    if (k->nf >= CHK_MAX_FIND) {
        k->dropped++;
        return sim->opts.strict ? BS_E_CHECK : BS_OK;
    }
    {
        void *p = k->f;
        if (bs_reserve(&p, &k->fcap, (size_t)(k->nf + 1) * sizeof *k->f, 1))
            return bs_errorf(err, BS_E_NOMEM, "out of memory recording a finding");
        k->f = p;
    }
    m = bs_malloc(strlen(msg) + 1);
    if (m == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory recording a finding");
    strcpy(m, msg);
    k->f[k->nf].check = check;
    k->f[k->nf].msg = m;
    memcpy(k->f[k->nf].d, d, sizeof k->f[k->nf].d);
    k->nf++;
    return sim->opts.strict ? BS_E_CHECK : BS_OK;
}

static const char *thread_name(const bs_sim *sim, int32_t tid, char *buf, size_t n)
{
    int32_t s = tid % sim->chk->T;
    if (s < CHK_RDV)
        return bs_enum_name("ENGINE", s + 1);
    if (s == CHK_RDV)
        return "rendezvous";
    if (s - CHK_FIXED < sim->prog->n_queues)
        snprintf(buf, n, "DMA queue '%s'", bs_str(sim->prog, sim->prog->queues[s - CHK_FIXED].name));
    else
        snprintf(buf, n, "DMA queue");
    return buf;
}

/* "core k, function 'f', block 'b', position p, instruction 'n' (Engine)" */
void bs_chk_name_insn(const bs_sim *sim, int32_t core, int32_t insn, int32_t tid, char *buf,
                      size_t n)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    char qb[160], cb[32] = "";
    const char *eng = tid >= 0 ? thread_name(sim, tid, qb, sizeof qb)
                               : bs_enum_name("ENGINE", in->engine);
    if (sim->ncores > 1)
        snprintf(cb, sizeof cb, "core %d, ", core);
    snprintf(buf, n, "%sfunction '%s', block '%s', position %d, instruction '%s' (%s, %s)", cb,
             bs_str(p, p->funcs[in->func].name), bs_str(p, p->blocks[in->block].name),
             insn - p->blocks[in->block].insn0, bs_str(p, in->name), bs_opinfo_table[in->op].name,
             eng);
}

/* {=== Memory hooks ===} */

/* *acc = 1 when the instruction's output is read before it is written: a matmul that
** accumulates (MatmultMx too), TongaReduceMacroSymbolic after its first trip (out :=
** op(out, r); the trip expression x0 is 0 on the first trip, as its kernel reads it). */
static bs_status accumulates(bs_sim *sim, bs_core *c, const bs_insn *in, int *acc,
                             bs_error *err)
{
    int64_t trip = 0;
    switch (in->op) {
    case BS_OP_Matmult:
        *acc = (BS_PI(in, Matmult, acc_flags) & 3) == 1;
        break;
    case BS_OP_MatmultMx:
        *acc = (BS_PI(in, MatmultMx, acc_flags) & 3) == 1;
        break;
    case BS_OP_TongaReduceMacroSymbolic:
        if (BS_PI(in, TongaReduceMacroSymbolic, is_first_reduce) != 0
            && BS_PX(in, TongaReduceMacroSymbolic, trip) >= 0)
            BS_TRY(bs_core_eval(sim, c, BS_PX(in, TongaReduceMacroSymbolic, trip), &trip,
                                err));
        *acc = !(BS_PI(in, TongaReduceMacroSymbolic, is_first_reduce) != 0 && trip == 0);
        break;
    default:
        *acc = 0;
    }
    return BS_OK;
}

bs_status bs_chk_accumulate_into(bs_sim *sim, bs_core *c, int32_t insn, int j,
                                 const bs_view *v, const char *why, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_opnd *o = &p->opnds[in->opnd + j];
    char na[512], msg[900];
    int64_t d[BS_FINDING_NDETAIL];
    if (!(sim->chk->mask & MASK(uninitialized)) || v->ndim == 0 || v->count == 0 ||
        bs_view_initialized(v) || !bs_chk_seen_add(sim->chk, ((uint64_t)(uint32_t)insn << 8) ^ 0x61u))
        return BS_OK;
    bs_chk_name_insn(sim, c->index, insn, -1, na, sizeof na);
    snprintf(msg, sizeof msg, "uninitialized: %s accumulates into bytes of '%s' that "
             "nothing wrote%s", na, bs_str(p, p->locs[o->loc].name), why);
    bs_chk_detail_init(d);
    d[BS_FD_SUB] = BS_FINDING_uninit_accumulate;
    d[BS_FD_CORE_A] = c->index;
    d[BS_FD_INSN_A] = insn;
    d[BS_FD_LOC] = o->loc;
    d[BS_FD_OPERAND] = j >= in->nin ? BS_OUT_OPERAND + j - in->nin : j;
    return bs_chk_add_finding(sim, BS_CHECK_uninitialized, d, c->index, insn, msg, err);
}

bs_status bs_chk_access(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                        const int64_t *offs, bs_error *err)
{
    bs_chk *k = sim->chk;
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_opnd *o = &p->opnds[in->opnd + j];
    const bs_store *st = &c->stores[o->loc];
    int out = j >= in->nin;
    int acc = 0, rmw;
    chk_where w;
    chk_geom g;
    if (v->ndim == 0 || v->count == 0)
        return BS_OK;
    if (out)
        BS_TRY(accumulates(sim, c, in, &acc, err));
    rmw = acc || (in->op == BS_OP_CopyPredicated && out);   /* keeps unselected bytes */
    if (acc)
        BS_TRY(bs_chk_accumulate_into(sim, c, insn, j, v, " (no matmul started them)", err));
    if (!(k->mask & (MASK(races) | MASK(dead_writes) | MASK(capacity))))
        return BS_OK;
    bs_chk_where_of(sim, c, st, &w);
    bs_chk_geom_of(&w, st, v, offs, &g);
    if (k->mask & MASK(capacity))
        BS_TRY(bs_chk_capacity_access(sim, c, insn, j, o, &w, &g, err));
    if (k->mask & (MASK(races) | MASK(dead_writes)))
        return bs_chk_shadow_access(sim, c, insn, &w, &g, !out || rmw, out, o->loc, st->loc,
                                    err);
    return BS_OK;
}

bs_status bs_chk_touch(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                       const int64_t *offs, int rd, int wr, bs_error *err)
{
    const bs_opnd *o = &sim->prog->opnds[sim->prog->insns[insn].opnd + j];
    const bs_store *st = &c->stores[o->loc];
    chk_where w;
    chk_geom g;
    if (!(sim->chk->mask & (MASK(races) | MASK(dead_writes))) || v->ndim == 0 || v->count == 0)
        return BS_OK;
    bs_chk_where_of(sim, c, st, &w);
    bs_chk_geom_of(&w, st, v, offs, &g);
    return bs_chk_shadow_access(sim, c, insn, &w, &g, rd, wr, o->loc, st->loc, err);
}

bs_status bs_chk_capacity(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                          const int64_t *offs, bs_error *err)
{
    const bs_opnd *o = &sim->prog->opnds[sim->prog->insns[insn].opnd + j];
    const bs_store *st = &c->stores[o->loc];
    chk_where w;
    chk_geom g;
    if (!(sim->chk->mask & MASK(capacity)) || v->ndim == 0 || v->count == 0)
        return BS_OK;
    bs_chk_where_of(sim, c, st, &w);
    bs_chk_geom_of(&w, st, v, offs, &g);
    return bs_chk_capacity_access(sim, c, insn, j, o, &w, &g, err);
}

/* {=== NaN / Inf and never-written reads ===} */

static int is_float(int32_t dt)
{
    int kind = bs_dtinfo_table[dt].kind;
    return kind == BS_DK_F || kind == BS_DK_R;
}

/* 1 if any fp32 of the n at p (byte stride s) is NaN or Inf: all-ones exponent. */
static int any_nonfinite_f32(const uint8_t *p, int64_t n, int64_t s)
{
    uint32_t bad = 0;
    if (s == 4) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + s * i, 4);
            bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
    }
    return bad != 0;
}

/* Row-major index of the first element of v that is NaN or Inf, or -1. */
static int64_t first_nonfinite(const bs_view *v, int *is_nan)
{
    int64_t idx[BS_MAX_DIMS] = {0};
    if (v->ndim == 0 || v->count == 0 || !is_float(v->dtype))
        return -1;
    if (v->dtype == BS_DT_float32) {             /* fast scan of rows first */
        int32_t last = v->ndim - 1;
        int any = 0;
        for (;;) {
            const uint8_t *q = v->data;
            int32_t d;
            for (d = 0; d < last; d++)
                q += idx[d] * v->stride[d];
            if (any_nonfinite_f32(q, v->num[last], v->stride[last])) {
                any = 1;
                break;
            }
            d = last - 1;
            while (d >= 0 && ++idx[d] == v->num[d])
                idx[d--] = 0;
            if (d < 0)
                break;
        }
        if (!any)
            return -1;
        memset(idx, 0, sizeof idx);
    }
    for (int64_t e = 0;; e++) {
        const uint8_t *q = v->data;
        float x;
        int32_t d;
        for (d = 0; d < v->ndim; d++)
            q += idx[d] * v->stride[d];
        if (v->dtype == BS_DT_float32)
            memcpy(&x, q, 4);
        else
            x = bs_dt_load_f32(q, v->dtype);
        if (!isfinite(x)) {
            *is_nan = isnan(x) != 0;
            return e;
        }
        d = v->ndim - 1;
        while (d >= 0 && ++idx[d] == v->num[d])
            idx[d--] = 0;
        if (d < 0)
            return -1;
    }
}

bs_status bs_chk_born(bs_sim *sim, bs_core *c, int32_t insn, int32_t j, int32_t loc,
                      const bs_view *out, int inherited, bs_error *err)
{
    const bs_program *p = sim->prog;
    int isn = 0;
    int64_t e;
    char na[512], msg[1000];
    int64_t d[BS_FINDING_NDETAIL];
    if (inherited || !(sim->chk->mask & MASK(nan)) || (e = first_nonfinite(out, &isn)) < 0 ||
        !bs_chk_seen_add(sim->chk, ((uint64_t)(uint32_t)insn << 8) ^ 0x71u))
        return BS_OK;
    bs_chk_name_insn(sim, c->index, insn, -1, na, sizeof na);
    snprintf(msg, sizeof msg, "nan: %s writes %s into outs[%d] ('%s') at element %lld, and "
             "none of its inputs held a NaN or Inf", na, isn ? "NaN" : "Inf", j,
             bs_str(p, p->locs[loc].name), (long long)e);
    bs_chk_detail_init(d);
    d[BS_FD_SUB] = isn ? BS_FINDING_nan : BS_FINDING_inf;
    d[BS_FD_CORE_A] = c->index;
    d[BS_FD_INSN_A] = insn;
    d[BS_FD_LOC] = loc;
    d[BS_FD_INDEX] = e;
    d[BS_FD_OPERAND] = BS_OUT_OPERAND + j;
    return bs_chk_add_finding(sim, BS_CHECK_nan, d, c->index, insn, msg, err);
}

int bs_chk_nonfinite(const bs_view *v)
{
    int dummy;
    return first_nonfinite(v, &dummy) >= 0;
}

bs_status bs_chk_outputs(bs_sim *sim, bs_core *c, int32_t insn, const bs_kctx *k,
                         bs_error *err)
{
    if (!(sim->chk->mask & MASK(nan)))
        return BS_OK;
    for (int j = 0; j < k->nout; j++) {
        int inherited = 0, isn;
        if (first_nonfinite(&k->out[j], &isn) < 0)
            continue;
        for (int i = 0; i < k->nin && !inherited; i++) {
            if (k->in[i].ndim > 0)
                inherited = bs_chk_nonfinite(&k->in[i]);
            else
                inherited = !isfinite(k->imm[i]);
        }
        return bs_chk_born(sim, c, insn, j, k->outs[j].loc, &k->out[j], inherited, err);
    }
    return BS_OK;
}

bs_status bs_chk_uninit(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                        bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_opnd *o = &p->opnds[p->insns[insn].opnd + j];
    int64_t idx[BS_MAX_DIMS] = {0}, e = 0, isz = bs_dtinfo_table[v->dtype].size;
    char na[512], msg[1000];
    int64_t d[BS_FINDING_NDETAIL];
    if (!(sim->chk->mask & MASK(uninitialized)) || v->shadow == NULL || v->ndim == 0)
        return BS_OK;
    for (;; e++) {
        const uint8_t *q = v->shadow;
        int32_t dd;
        for (dd = 0; dd < v->ndim; dd++)
            q += idx[dd] * v->stride[dd];
        if (memchr(q, 0, (size_t)isz))
            break;
        dd = v->ndim - 1;
        while (dd >= 0 && ++idx[dd] == v->num[dd])
            idx[dd--] = 0;
        if (dd < 0)
            return BS_OK;
    }
    bs_chk_name_insn(sim, c->index, insn, -1, na, sizeof na);
    snprintf(msg, sizeof msg, "uninitialized: %s reads never-written bytes of '%s' (ins[%d], "
             "first at element %lld)", na, bs_str(p, p->locs[o->loc].name), j, (long long)e);
    bs_chk_detail_init(d);
    d[BS_FD_SUB] = BS_FINDING_uninit_read;
    d[BS_FD_CORE_A] = c->index;
    d[BS_FD_INSN_A] = insn;
    d[BS_FD_LOC] = o->loc;
    d[BS_FD_INDEX] = e;
    d[BS_FD_OPERAND] = j;
    return bs_chk_add_finding(sim, BS_CHECK_uninitialized, d, c->index, insn, msg, err);
}

bs_status bs_chk_run_end(bs_sim *sim, bs_error *err)
{
    bs_chk *k = sim->chk;
    if (k->ended)
        return BS_OK;
    k->ended = 1;
    if (k->mask & MASK(leftover_sync))
        for (int32_t ci = 0; ci < sim->ncores; ci++) {
            const bs_core *c = &sim->cores[ci];
            char cb[32] = "", msg[400];
            int64_t d[BS_FINDING_NDETAIL];
            if (sim->ncores > 1)
                snprintf(cb, sizeof cb, "core %d: ", ci);
            for (int32_t id = 0; id < BS_NUM_SEMS; id++) {
                if (c->sem[id] == 0)
                    continue;
                snprintf(msg, sizeof msg, "leftover_sync: %ssemaphore %d is %u at the end of the "
                         "run (must be back at 0 between kernels)", cb, id, c->sem[id]);
                bs_chk_detail_init(d);
                d[BS_FD_SUB] = BS_FINDING_semaphore_left;
                d[BS_FD_CORE_A] = ci;
                d[BS_FD_INDEX] = id;
                d[BS_FD_VALUE] = c->sem[id];
                BS_TRY(bs_chk_add_finding(sim, BS_CHECK_leftover_sync, d, ci, -1, msg, err));
            }
            for (int32_t id = 0; id < BS_NUM_EVENTS; id++) {
                if (!c->evt[id])
                    continue;
                snprintf(msg, sizeof msg, "leftover_sync: %sevent %d is still set at the end of the "
                         "run", cb, id);
                bs_chk_detail_init(d);
                d[BS_FD_SUB] = BS_FINDING_event_left;
                d[BS_FD_CORE_A] = ci;
                d[BS_FD_INDEX] = id;
                BS_TRY(bs_chk_add_finding(sim, BS_CHECK_leftover_sync, d, ci, -1, msg, err));
            }
        }
    if (k->mask & MASK(dead_writes))
        BS_TRY(bs_chk_unread_writes(sim, err));
    return BS_OK;
}

/* {=== Uninitialised memory as NaN ===} */

static void poison(bs_sim *sim)
{
    const bs_program *p = sim->prog;
    for (int32_t ci = 0; ci < sim->ncores; ci++) {
        bs_core *c = &sim->cores[ci];
        for (int32_t l = 0; l < p->n_locs; l++) {
            const bs_store *st = &c->stores[l];
            int32_t dt = p->sets[p->locs[l].set].dtype;
            int32_t isz = bs_dtinfo_table[dt].size, kind = bs_dtinfo_table[dt].kind;
            uint8_t pat[8] = {0};
            if (kind == BS_DK_F || kind == BS_DK_R)
                bs_dt_store_f32(pat, dt, NAN);
            else if (kind == BS_DK_U)
                memset(pat, 0xFF, (size_t)isz);
            else if (kind == BS_DK_S) {          /* little-endian 0x7F..FF */
                memset(pat, 0xFF, (size_t)isz);
                pat[isz - 1] = 0x7F;
            } else
                continue;
            if (st->parts <= 0 || st->data == NULL)
                continue;
            for (int64_t b = 0; b + isz <= st->bpp; b += isz)
                memcpy(st->data + b, pat, (size_t)isz);
            for (int64_t r = 1; r < st->parts; r++)
                memcpy(st->data + r * st->pitch, st->data, (size_t)st->bpp);
        }
    }
}

/* {=== Lifecycle and results ===} */

bs_status bs_chk_new(bs_sim *sim, bs_error *err)
{
    bs_chk *k;
    const bs_program *p = sim->prog;
    if (sim->opts.checks == 0 && sim->opts.uninit == 0)
        return BS_OK;
    k = bs_calloc(1, sizeof *k);
    if (k == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory creating the checkers");
    sim->chk = k;
    k->mask = (uint32_t)sim->opts.checks;
    k->T = CHK_FIXED + p->n_queues + 1;
    k->N = sim->ncores * k->T;
    k->S = 2 + p->n_locs + 1;            /* SBUF, PSUM, each location, the DRAM arena */
    k->nspaces = sim->ncores * k->S + p->n_locs + 1;
    k->vc = bs_calloc((size_t)k->N * (size_t)k->N, sizeof *k->vc);
    k->tmp = bs_calloc((size_t)k->N, sizeof *k->tmp);
    k->sems = bs_calloc((size_t)sim->ncores * BS_NUM_SEMS, sizeof *k->sems);
    k->evc = bs_calloc((size_t)sim->ncores * BS_NUM_EVENTS, sizeof *k->evc);
    k->spaces = bs_calloc((size_t)k->nspaces, sizeof *k->spaces);
    if (!k->vc || !k->tmp || !k->sems || !k->evc || !k->spaces)
        return bs_errorf(err, BS_E_NOMEM, "out of memory creating the checkers");
    return BS_OK;
}

static void clear_findings(bs_chk *k)
{
    for (int32_t i = 0; i < k->nf; i++)
        bs_free(k->f[i].msg);
    k->nf = 0;
    k->dropped = 0;
}

void bs_chk_free(bs_sim *sim)
{
    bs_chk *k = sim->chk;
    if (k == NULL)
        return;
    clear_findings(k);
    bs_free(k->f);
    if (k->sems)
        for (size_t i = 0; i < (size_t)sim->ncores * BS_NUM_SEMS; i++)
            bs_free(k->sems[i]);
    if (k->evc)
        for (size_t i = 0; i < (size_t)sim->ncores * BS_NUM_EVENTS; i++)
            bs_free(k->evc[i]);
    if (k->spaces)
        for (int32_t s = 0; s < k->nspaces; s++) {
            chk_space *sp = &k->spaces[s];
            bs_free(sp->recs);
            bs_free(sp->free_ids);
            for (int32_t b = 0; sp->bk && b < sp->nb; b++)
                bs_free(sp->bk[b].ids);
            bs_free(sp->bk);
        }
    bs_free(k->sems);
    bs_free(k->evc);
    bs_free(k->spaces);
    bs_free(k->vc);
    bs_free(k->tmp);
    bs_free(k->seen);
    bs_free(k);
    sim->chk = NULL;
}

bs_status bs_chk_reset(bs_sim *sim, bs_error *err)
{
    bs_chk *k = sim->chk;
    (void)err;
    if (k == NULL)
        return BS_OK;
    clear_findings(k);
    memset(k->vc, 0, (size_t)k->N * (size_t)k->N * sizeof *k->vc);
    for (size_t i = 0; i < (size_t)sim->ncores * BS_NUM_SEMS; i++)
        if (k->sems[i])
            bs_chk_sem_restart(k, k->sems[i], 0);
    for (size_t i = 0; i < (size_t)sim->ncores * BS_NUM_EVENTS; i++) {
        bs_free(k->evc[i]);
        k->evc[i] = NULL;
    }
    for (int32_t s = 0; s < k->nspaces; s++) {
        chk_space *sp = &k->spaces[s];
        sp->n = sp->live = sp->nfree = 0;
        for (int32_t b = 0; sp->bk && b < sp->nb; b++)
            sp->bk[b].n = 0;
    }
    if (k->seen)
        memset(k->seen, 0, k->seen_cap * sizeof *k->seen);
    k->nseen = 0;
    k->cur = 0;
    k->started = k->ended = 0;
    if (sim->opts.uninit == BS_UNINIT_nan)
        poison(sim);
    return BS_OK;
}

int32_t bs_sim_nfinding(const bs_sim *sim) { return sim->chk ? sim->chk->nf : 0; }

int64_t bs_sim_findings_dropped(const bs_sim *sim) { return sim->chk ? sim->chk->dropped : 0; }

int bs_sim_finding(const bs_sim *sim, int32_t i, int32_t *check, const char **msg,
                   const int64_t **detail)
{
    if (sim->chk == NULL || i < 0 || i >= sim->chk->nf)
        return 0;
    *check = sim->chk->f[i].check;
    *msg = sim->chk->f[i].msg;
    *detail = sim->chk->f[i].d;
    return 1;
}
