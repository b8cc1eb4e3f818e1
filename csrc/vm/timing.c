/* vm/timing.c -- the timing model: modelled start and end of every executed instruction,
** computed as the program runs (docs/timing.md gives every constant and its source).
**
** Each core keeps, per engine queue, the time the engine is free; per DMA engine the same;
** per semaphore a short history of its updates in modelled-time order, and per event the
** time it was set. An instruction starts when its queue is free and the updates its waits
** need have landed plus their latency:
**   - an event wait: the time the event was set;
**   - a semaphore wait for value v: replaying the semaphore's updates in modelled-time order,
**     the last time its count went from below v to v or more. This does not depend on the
**     order the functional schedule applied the updates in, so a race-free program gets the
**     same times under every schedule= (tests/timing/test_timing_model.py).
** Its duration is a per-instruction cost from the documented rates (cost_of below); a DMA
** instruction occupies its queue for the issue cost only, its bytes move on the core's DMA
** engines (descriptors spread over them), and it ends when its last descriptor lands.
** With timing "compiler" an instruction carrying predicted_latency_ns takes that time
** instead, a DMA one included (its queue is busy for it; no descriptor engines).
** Blocks and loop trips add nothing: each engine runs on through them (no drain). A
** rendezvous instruction (engine ALL) starts when the last engine reaches it and costs
** each engine a control instruction; only one that waits holds the engines back. This file is only called when opts.timing (or opts.trace) is set. */
#include <math.h>
#include "vm.h"

typedef struct bs_tm_arch {
    double pe_mhz, act_mhz, dve_mhz, pool_mhz;
    int32_t dma_engines;
    double dma_mbps, hbm_mbps, dge_ns;
} bs_tm_arch;

static const bs_tm_arch tm_arch[] = {
#define BS_TIMING(name, pe, act, dve, pool, ndma, dmabw, hbm, dge) \
    { pe, act, dve, pool, ndma, dmabw, hbm, dge },
#include "../bs_timing.def"
#undef BS_TIMING
};
_Static_assert(sizeof tm_arch / sizeof tm_arch[0] == BS_ARCHI__COUNT,
               "bs_timing.def needs one row per bs_arch.def row");

/* birsim's choices (docs/timing.md says why). */
#define TM_MIN_II        64      /* cycles: an instruction's minimum initiation interval */
#define TM_TINY_CYCLES   100     /* cycles: a 1-element instruction's static overhead */
#define TM_CTRL_CYCLES   16      /* cycles: register, branch and other non-tensor instructions */
#define TM_SEM_NS        100.0   /* an update reaching a waiting engine of the same core */
#define TM_CORE_SEM_NS   1000.0  /* ... of another core */
#define TM_DMA_START_NS  1300.0  /* a DMA's issue to its first byte (semaphore -> DMA start) */
#define TM_DESC_NS       64.0    /* a DMA engine's fixed cost per descriptor */
#define TM_DESC_MAX      65536   /* bytes: larger contiguous runs split into descriptors */
#define TM_MAX_DMA       64
#define TM_HIST          16      /* semaphore updates kept per semaphore */
#define TM_PE_RAMP_NS    3000.0  /* pe_throttle: TensorE's rate ramps from half to full over this
                                 ** much busy time; an idle gap starts the ramp again */

typedef struct tm_upd {
    double   t;
    int32_t  step, mode;
    uint32_t value, cnt;         /* the update; the count after it (replaying from base) */
} tm_upd;
typedef struct tm_sem {
    double   base_t;             /* when the count became `base` (history folded in) */
    int32_t  base_step, n;
    uint32_t base, fval;         /* count before the oldest update; functional value after
                                    the last one */
    int32_t  lo, pad_;           /* the oldest update is h[lo]: a ring (sem_h) */
    tm_upd   h[TM_HIST];         /* sorted by t */
} tm_sem;
_Static_assert((TM_HIST & (TM_HIST - 1)) == 0, "TM_HIST indexes a ring: a power of two");

/* The i-th oldest update of s's history. */
static inline tm_upd *sem_h(tm_sem *s, int32_t i)
{
    return &s->h[(s->lo + i) & (TM_HIST - 1)];
}

typedef struct tm_core {
    double  efree[BS_NUM_ENGINES];
    double  dfree[TM_MAX_DMA];
    double  active[BS_NUM_ENGINES];
    double  upd_t;               /* the time updates applied now carry */
    int32_t upd_step;            /* ... and their trace index (-1) */
    int32_t rr;                  /* next DMA engine for a transfer's first descriptor */
    double  pe_busy;             /* pe_throttle: TensorE's busy time since it was last idle */
    double  evt_t[BS_NUM_EVENTS];
    int32_t evt_step[BS_NUM_EVENTS];
    tm_sem  sem[BS_NUM_SEMS];
} tm_core;

typedef struct tm_cost {         /* per instruction, from its static operands */
    double   ns;                 /* engine time (compute) or issue cost (DMA) */
    int64_t  bytes, rows;        /* DMA: bytes moved, descriptors */
    int64_t  macs;
    int32_t  dma, hbm;           /* a DMA; one side in DRAM */
    int32_t  fixed, pad_;        /* ns is the compiler's predicted_latency_ns (whole time) */
} tm_cost;

struct bs_tm {
    bs_tm_arch a;
    tm_cost   *cost;             /* per instruction */
    tm_core   *cores;
    double     total;
    int64_t    macs, dma_bytes, hbm_bytes, hist[BS_TM_NHIST];
    double     dma_busy;
};

/* {=== Static costs ===} */

static int64_t free_elems(const bs_opnd *o)
{
    int64_t n = 1;
    for (int32_t d = 1; d < o->ndim; d++)
        n *= o->num[d];
    return n;
}

static int is_dma_op(int32_t op, int32_t engine)
{
    return engine == BS_ENGINE_DMA || bs_opinfo_table[op].family == BS_FAM_dma ||
           op == BS_OP_DMACopy || op == BS_OP_IndirectLoad || op == BS_OP_IndirectSave ||
           op == BS_OP_IndirectSaveAccumulate || op == BS_OP_GenericIndirectLoad ||
           op == BS_OP_GenericIndirectSave;
}

static double engine_mhz(const bs_tm_arch *a, int32_t engine)
{
    switch (engine) {
    case BS_ENGINE_PE:         return a->pe_mhz;
    case BS_ENGINE_DVE:        return a->dve_mhz;
    case BS_ENGINE_Activation: return a->act_mhz;
    default:                   return a->pool_mhz;    /* Pool, SP, Unassigned */
    }
}

/* What the cost rules read off an instruction's access patterns: the largest free size
   and its operand, whether an input is in PSUM, whether every input is 2 bytes or less,
   whether an operand lies outside SBUF/PSUM. */
typedef struct tm_shape {
    int64_t n;
    int nap, psum_in, narrow, dram;
    const bs_opnd *big;
} tm_shape;

static void shape_of(const bs_program *p, const bs_insn *in, const bs_opnd *o, tm_shape *s)
{
    *s = (tm_shape){ .narrow = 1 };
    for (int32_t k = 0; k < in->nin + in->nout; k++) {
        const bs_opnd *x = &o[k];
        int64_t e;
        int32_t mt;
        if (!bs_exec_is_ap(x))
            continue;
        s->nap++;
        e = free_elems(x);
        mt = x->loc >= 0 ? p->locs[x->loc].memtype : BS_MEM_DRAM;
        if (mt != BS_MEM_SB && mt != BS_MEM_PSUM)
            s->dram = 1;
        if (k < in->nin) {
            s->psum_in |= mt == BS_MEM_PSUM;
            s->narrow &= bs_dtinfo_table[x->dtype].size <= 2;
        }
        if (e > s->n || s->big == NULL) {
            s->n = e;
            s->big = x;
        }
    }
}

/* A DMA transfer: bytes and descriptor rows (split at TM_DESC_MAX) of its destination. */
static void dma_cost(const bs_tm_arch *a, const bs_insn *in, const bs_opnd *o,
                     const tm_shape *s, tm_cost *tc)
{
    const bs_opnd *out = in->nout > 0 && bs_exec_is_ap(&o[in->nin]) ? &o[in->nin] : s->big;
    int64_t elems = out->num[0] * free_elems(out);
    int64_t bytes = elems * bs_dtinfo_table[out->dtype].size, rows = out->num[0] > 0 ? out->num[0] : 1;
    int64_t bpp = bytes / rows;
    tc->dma = 1;
    tc->hbm = s->dram;
    tc->bytes = bytes;
    if (bpp > TM_DESC_MAX)
        rows *= (bpp + TM_DESC_MAX - 1) / TM_DESC_MAX;
    tc->rows = rows;
    tc->ns = a->dge_ns;
}

/* An engine instruction's cycles by opcode (docs/timing.md), before the floors; a matmul
   also counts its multiply-accumulates. */
static int64_t engine_cycles(const bs_insn *in, const bs_opnd *o, const tm_shape *s,
                             tm_cost *tc)
{
    int64_t n = s->n;
    switch (in->op) {
    case BS_OP_Matmult:
    case BS_OP_MatmultSparse:
    case BS_OP_MatmultMx: {
        /* ins[0] moving [K, N], ins[1] stationary [K, M] (bs_ops.def) */
        int64_t nmov = in->nin > 0 ? free_elems(&o[0]) : n;
        int64_t nst = in->nin > 1 ? free_elems(&o[1]) : 1;
        int64_t cycles = nmov > (nst < 64 ? nst : 64) ? nmov : (nst < 64 ? nst : 64);
        if (in->nin > 0 && bs_dtinfo_table[o[0].dtype].size >= 4)
            cycles *= 4;                        /* fp32 moves at a quarter rate */
        if (in->nin > 1)
            tc->macs = o[0].num[0] * nst * nmov;
        return cycles;
    }
    case BS_OP_TensorTensor:
    case BS_OP_TensorScalarPtr:
        return s->psum_in || s->narrow ? n : 2 * n;
    case BS_OP_TensorReduce:
    case BS_OP_Memset:
        return s->narrow ? n / 2 : n;
    case BS_OP_TensorCopyDynamicSrc:
    case BS_OP_TensorCopyDynamicDst:
        return n > 600 ? n : 600;
    case BS_OP_Reciprocal:
        return 8 * n;
    case BS_OP_BNStatsAggregate:
        return 13 * n / 3;
    case BS_OP_Iota:
    case BS_OP_TensorScalarAffineSelect:
        return 150 + n;
    default:
        return n;
    }
}

static void cost_of(const bs_program *p, const bs_tm_arch *a, int32_t insn, tm_cost *tc)
{
    const bs_insn *in = &p->insns[insn];
    const bs_opnd *o = in->nin + in->nout > 0 ? &p->opnds[in->opnd] : NULL;
    tm_shape s;
    int64_t cycles;
    memset(tc, 0, sizeof *tc);
    shape_of(p, in, o, &s);
    if (is_dma_op(in->op, in->engine) && s.big != NULL && in->op != BS_OP_DMATrigger) {
        dma_cost(a, in, o, &s, tc);
        return;
    }
    if (s.nap == 0 || in->engine == BS_ENGINE_Unassigned || in->engine == BS_ENGINE_ALL) {
        cycles = s.nap == 0 ? TM_CTRL_CYCLES : 0;
        if (in->engine == BS_ENGINE_Unassigned)
            cycles = 0;
        else if (in->engine == BS_ENGINE_ALL)  /* each engine runs its copy (a control cost) */
            cycles = TM_CTRL_CYCLES;
        tc->ns = (double)cycles * 1000.0 / engine_mhz(a, in->engine);
        return;
    }
    cycles = engine_cycles(in, o, &s, tc);
    if (cycles < TM_MIN_II)
        cycles = TM_MIN_II;
    if (s.n <= 1 && cycles < TM_TINY_CYCLES)
        cycles = TM_TINY_CYCLES;
    tc->ns = (double)cycles * 1000.0 / engine_mhz(a, in->engine);
}

/* {=== timing="only" ===} */

/* Instructions that move memory into registers, addresses or a host: with one of these in
** the program every instruction runs (a skipped result could steer the run). */
static int steers(const bs_insn *in)
{
    switch (in->op) {
    case BS_OP_TensorLoad: case BS_OP_IndirectLoad: case BS_OP_IndirectSave:
    case BS_OP_IndirectSaveAccumulate: case BS_OP_GenericIndirectLoad:
    case BS_OP_GenericIndirectSave: case BS_OP_Gather: case BS_OP_LocalGather:
    case BS_OP_IndirectCopy: case BS_OP_TensorCopyDynamicSrc: case BS_OP_TensorCopyDynamicDst:
    case BS_OP_GetSequenceBounds: case BS_OP_NonzeroWithCount: case BS_OP_Nonzero:
    case BS_OP_CustomOp: case BS_OP_BIRKernel: case BS_OP_CollectiveCompute:
    case BS_OP_CollectiveSend: case BS_OP_CollectiveRecv: case BS_OP_GPSIMDSB2SB:
        return 1;
    case BS_OP_DMACopy:
        return in->nin >= 2;            /* a vector dynamic offset read from memory */
    default:
        return 0;
    }
}

/* Data instructions whose only effect is on tensor memory. */
static int skippable(int32_t op)
{
    switch (op) {
    case BS_OP_Activation: case BS_OP_Matmult: case BS_OP_MatmultSparse: case BS_OP_MatmultMx:
    case BS_OP_Memset: case BS_OP_Load: case BS_OP_Save: case BS_OP_TensorCopy:
    case BS_OP_TensorReduce: case BS_OP_TensorScalar: case BS_OP_TensorScalarPtr:
    case BS_OP_TensorScalarCache: case BS_OP_TensorTensor: case BS_OP_DMACopy: case BS_OP_Pool:
    case BS_OP_Reciprocal: case BS_OP_BNStats: case BS_OP_BNStatsAggregate: case BS_OP_Select:
    case BS_OP_CopyPredicated: case BS_OP_Iota: case BS_OP_TensorScalarAffineSelect:
    case BS_OP_Exponential: case BS_OP_Max: case BS_OP_StreamShuffle: case BS_OP_StreamTranspose:
    case BS_OP_DMADescriptorCopy: case BS_OP_DMADescriptorTranspose:
    case BS_OP_DMADescriptorReplicate: case BS_OP_QuantizeMx:
        return 1;
    default:
        return 0;
    }
}

static bs_status only_mode(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    uint8_t *skip;
    for (int32_t i = 0; i < p->n_insns; i++)
        if (steers(&p->insns[i]))
            return BS_OK;
    skip = bs_calloc((size_t)p->n_insns > 0 ? (size_t)p->n_insns : 1, 1);
    if (skip == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory for the timing model");
    for (int32_t i = 0; i < p->n_insns; i++)
        skip[i] = (uint8_t)skippable(p->insns[i].op);
    sim->tm_skip = skip;
    return BS_OK;
}

/* {=== Lifecycle ===} */

bs_status bs_tm_new(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    struct bs_tm *tm = bs_calloc(1, sizeof *tm);
    if (tm == NULL)
        goto nomem;
    tm->a = tm_arch[sim->arch - bs_arch_table];
    if (tm->a.dma_engines > TM_MAX_DMA)
        tm->a.dma_engines = TM_MAX_DMA;
    tm->cost = bs_calloc((size_t)p->n_insns > 0 ? (size_t)p->n_insns : 1, sizeof *tm->cost);
    tm->cores = bs_calloc((size_t)sim->ncores, sizeof *tm->cores);
    if (tm->cost == NULL || tm->cores == NULL)
        goto nomem;
    for (int32_t i = 0; i < p->n_insns; i++) {
        cost_of(p, &tm->a, i, &tm->cost[i]);
        if (sim->opts.timing == BS_TIMING_compiler && p->insns[i].lat >= 0.0) {
            tm->cost[i].ns = p->insns[i].lat;
            tm->cost[i].fixed = 1;
        }
    }
    sim->tm = tm;
    return sim->opts.timing == BS_TIMING_only ? only_mode(sim, err) : BS_OK;
nomem:
    if (tm != NULL) {
        bs_free(tm->cost);
        bs_free(tm);
    }
    return bs_errorf(err, BS_E_NOMEM, "out of memory for the timing model");
}

void bs_tm_free(struct bs_tm *tm)
{
    if (tm == NULL)
        return;
    bs_free(tm->cost);
    bs_free(tm->cores);
    bs_free(tm);
}

void bs_tm_reset(bs_sim *sim)
{
    struct bs_tm *tm = sim->tm;
    memset(tm->cores, 0, (size_t)sim->ncores * sizeof *tm->cores);
    for (int32_t k = 0; k < sim->ncores; k++)
        tm->cores[k].upd_step = -1;
    tm->total = tm->dma_busy = 0;
    tm->macs = tm->dma_bytes = tm->hbm_bytes = 0;
    memset(tm->hist, 0, sizeof tm->hist);
}

/* {=== Semaphores in modelled time ===} */

static uint32_t sem_apply(uint32_t v, int32_t mode, uint32_t x)
{
    switch (mode) {
    case BS_UPDATE_sem_wr_imm:  return x;
    case BS_UPDATE_sem_sub_imm: return v - x;
    case BS_UPDATE_sem_dec:     return v - 1u;
    case BS_UPDATE_sem_inc:     return v + 1u;
    default:                    return v + x;       /* sem_add_imm */
    }
}

/* A semaphore changed outside updates (Return, GroupResetSemaphores): restart its history. */
static void sem_sync(tm_sem *s, uint32_t now, double t)
{
    if (s->fval != now) {
        s->n = s->lo = 0;
        s->base = s->fval = now;
        s->base_t = t;
        s->base_step = -1;
    }
}

/* Release time of a wait for count >= v, and the update that gave it: replaying the updates
** in time order, the last time the count went from below v to v or more. Scanned from the
** newest: the counts after each update are kept (tm_upd.cnt). When the count ends below v
** (time order disagrees with what the run saw) it is the newest update. */
static double sem_release(tm_sem *s, uint32_t v, int32_t *step)
{
    int32_t i = s->n - 1;
    const tm_upd *h;
    if (i < 0 || sem_h(s, i)->cnt < v) {        /* no update, or below v after the last */
        h = i < 0 ? NULL : sem_h(s, i);
        *step = h ? h->step : s->base_step;
        return h ? h->t : s->base_t;
    }
    while (i > 0 && sem_h(s, i - 1)->cnt >= v)   /* back to the update that reached v */
        i--;
    if (i == 0 && s->base >= v) {                /* at v or more since the base */
        *step = s->base_step;
        return s->base_t;
    }
    h = sem_h(s, i);
    *step = h->step;
    return h->t;
}

void bs_tm_update(bs_sim *sim, const bs_core *c, const bs_core *t, const bs_sync *u)
{
    const tm_core *src = &sim->tm->cores[c->index];
    tm_core *dst = &sim->tm->cores[t->index];
    double when = src->upd_t + (t != c ? TM_CORE_SEM_NS : TM_SEM_NS);
    tm_sem *s;
    uint32_t cnt;
    int32_t i;
    if (u->type == BS_SYNCTYPE_event) {
        dst->evt_t[u->id] = when;
        dst->evt_step[u->id] = src->upd_step;
        return;
    }
    s = &dst->sem[u->id];
    sem_sync(s, t->sem[u->id], when);       /* called before the update applies */
    if (s->n == TM_HIST) {                  /* fold the oldest into the base */
        const tm_upd *h0 = sem_h(s, 0);
        s->base = h0->cnt;
        s->base_t = h0->t;
        s->base_step = h0->step;
        s->lo = (s->lo + 1) & (TM_HIST - 1);
        s->n--;
    }
    for (i = s->n; i > 0 && sem_h(s, i - 1)->t > when; i--)
        *sem_h(s, i) = *sem_h(s, i - 1);
    sem_h(s, i)->t = when;
    sem_h(s, i)->step = src->upd_step;
    sem_h(s, i)->mode = u->mode;
    sem_h(s, i)->value = (uint32_t)u->value;
    s->n++;
    cnt = i > 0 ? sem_h(s, i - 1)->cnt : s->base;
    for (; i < s->n; i++) {                 /* the counts from the new update on */
        tm_upd *h = sem_h(s, i);
        h->cnt = cnt = sem_apply(cnt, h->mode, h->value);
    }
    s->fval = sem_apply(t->sem[u->id], u->mode, (uint32_t)u->value);
}

/* Latest release time over the waits first..first+nwait, with their sources. */
static double waits_release(bs_sim *sim, bs_core *c, int32_t first, int32_t nwait,
                            int32_t slot, int32_t src[2], double *srct)
{
    tm_core *tc = &sim->tm->cores[c->index];
    double rel = 0.0;
    for (int32_t k = 0; k < nwait; k++) {
        const bs_sync *w = &sim->prog->syncs[first + k];
        double t;
        int32_t step;
        if (w->type == BS_SYNCTYPE_event) {
            t = tc->evt_t[w->id];
            step = tc->evt_step[w->id];
        } else {
            uint32_t v = w->mode == BS_WAIT_sem_ge_reg
                ? (uint32_t)c->regs[(size_t)w->reg * BS_REG_SLOTS + (size_t)slot]
                : (uint32_t)w->value;
            tm_sem *s = &tc->sem[w->id];
            sem_sync(s, c->sem[w->id], s->n ? sem_h(s, s->n - 1)->t : s->base_t);
            t = sem_release(s, v, &step);
        }
        if (t > rel)
            rel = t;
        if (step >= 0 && step != src[0] && step != src[1]) {   /* keep the two latest */
            if (src[0] < 0 || t >= srct[0]) {
                src[1] = src[0];
                srct[1] = srct[0];
                src[0] = step;
                srct[0] = t;
            } else if (src[1] < 0 || t >= srct[1]) {
                src[1] = step;
                srct[1] = t;
            }
        }
    }
    return rel;
}

/* {=== The per-instruction hook ===} */

/* pe_throttle: TensorE's work done (in full-rate ns) after `a` ns of continuous activity,
** its rate ramping linearly from 1/2 to 1 over TM_PE_RAMP_NS; and its inverse. */
static double pe_work(double a)
{
    const double r = TM_PE_RAMP_NS;
    return a <= r ? 0.5 * a + 0.25 * a * a / r : 0.75 * r + (a - r);
}

static double pe_busy_for(double w)
{
    const double r = TM_PE_RAMP_NS;
    return w <= 0.75 * r ? r * (sqrt(1.0 + 4.0 * w / r) - 1.0) : r + (w - 0.75 * r);
}

/* The time a TensorE instruction of full-rate cost `ns` takes starting at `start`. */
static double pe_throttled(tm_core *tc, double start, double ns)
{
    double a0 = start > tc->efree[BS_ENGINE_PE] ? 0.0 : tc->pe_busy;
    double a1 = pe_busy_for(pe_work(a0) + ns);
    tc->pe_busy = a1;
    return a1 - a0;
}

static double dma_transfer(struct bs_tm *tm, tm_core *tc, const tm_cost *k, double t0)
{
    int32_t ne = tm->a.dma_engines;
    int64_t per = k->rows / ne, extra = k->rows % ne;
    double desc = TM_DESC_NS + ((double)k->bytes / (double)k->rows) * 1000.0 / tm->a.dma_mbps;
    double end = t0;
    for (int32_t j = 0; j < ne; j++) {
        int32_t e = (tc->rr + j) % ne;
        int64_t nd = per + (j < extra);
        double s, d;
        if (nd == 0)
            break;
        s = tc->dfree[e] > t0 ? tc->dfree[e] : t0;
        d = (double)nd * desc;
        tc->dfree[e] = s + d;
        tm->dma_busy += d;
        if (s + d > end)
            end = s + d;
    }
    tc->rr = (int32_t)((tc->rr + k->rows) % ne);
    return end;
}

void bs_tm_insn(bs_sim *sim, bs_core *c, int32_t insn)
{
    struct bs_tm *tm = sim->tm;
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const tm_cost *k = &tm->cost[insn];
    tm_core *tc = &tm->cores[c->index];
    int32_t q = p->queue[insn], src[2] = { -1, -1 }, step = -1;
    double srct[2] = { 0, 0 }, start, end, rel = 0.0;
    if (in->nwait)
        rel = waits_release(sim, c, in->sync, in->nwait, c->rslot, src, srct);
    if (in->op == BS_OP_DMATrigger && in->nlist > 0) {   /* and its next block's waits */
        const bs_insn *b = &p->insns[p->ipool[in->list + (c->cursor[BS_PI(in, DMATrigger, cursor)]
                                                          % in->nlist)]];
        double r2 = waits_release(sim, c, b->sync, b->nwait, c->rslot, src, srct);
        if (r2 > rel)
            rel = r2;
    }
    start = tc->efree[q] > rel ? tc->efree[q] : rel;
    if (q == BS_Q_RDV)                       /* when the last engine reaches it */
        for (int e = 0; e < BS_NUM_ENGINES; e++)
            if (tc->efree[e] > start)
                start = tc->efree[e];
    if (k->dma && !k->fixed) {
        double issue_end = start + k->ns;
        tc->efree[q] = issue_end;
        end = dma_transfer(tm, tc, k, issue_end + TM_DMA_START_NS);
    } else if (sim->opts.pe_throttle && in->engine == BS_ENGINE_PE && q == BS_ENGINE_PE &&
               !k->fixed) {
        end = start + pe_throttled(tc, start, k->ns);
        tc->efree[q] = end;
    } else {
        end = start + k->ns;
        tc->efree[q] = end;
    }
    if (k->dma) {
        tm->dma_bytes += k->bytes;
        if (k->hbm)
            tm->hbm_bytes += k->bytes;
        {
            double bpp = (double)k->bytes / (double)(k->rows > 0 ? k->rows : 1);
            tm->hist[bpp < 256 ? 0 : bpp < 2048 ? 1 : bpp < 4096 ? 2 : 3]++;
        }
    }
    if (q == BS_Q_RDV && in->nwait)          /* every engine waits with it */
        for (int e = 0; e < BS_NUM_ENGINES; e++)
            if (tc->efree[e] < start)
                tc->efree[e] = start;
    tc->active[in->engine < BS_NUM_ENGINES ? in->engine : 0] += end - start;
    tm->macs += k->macs;
    if (end > tm->total)
        tm->total = end;
    if (sim->opts.trace)
        step = bs_sim_trace_add(sim, c->index, insn, start, end - start, src);
    tc->upd_t = end;
    tc->upd_step = step;
}

/* A region owner (Loop, Call, DMATrigger, ...) completes: its updates carry the time every
** engine of the core is done. */
void bs_tm_owner_done(bs_sim *sim, bs_core *c)
{
    tm_core *tc = &sim->tm->cores[c->index];
    double t = 0.0;
    for (int e = 0; e < BS_NUM_ENGINES; e++)
        if (tc->efree[e] > t)
            t = tc->efree[e];
    for (int32_t e = 0; e < sim->tm->a.dma_engines; e++)
        if (tc->dfree[e] > t)
            t = tc->dfree[e];
    tc->upd_t = t;
}

int bs_sim_timing(const bs_sim *sim, bs_timing_summary *out)
{
    const struct bs_tm *tm = sim->tm;
    memset(out, 0, sizeof *out);
    if (tm == NULL)
        return 0;
    out->total_ns = tm->total;
    for (int32_t k = 0; k < sim->ncores; k++)
        for (int e = 0; e < BS_NUM_ENGINES; e++)
            out->active_ns[e] += tm->cores[k].active[e];
    out->macs = tm->macs;
    out->dma_bytes = tm->dma_bytes;
    out->hbm_bytes = tm->hbm_bytes;
    memcpy(out->dma_hist, tm->hist, sizeof out->dma_hist);
    out->pe_tflops_bf16 = 128.0 * 128.0 * 2.0 * tm->a.pe_mhz * 1e6 / 1e12;
    out->hbm_gbps = tm->a.hbm_mbps / 1000.0;
    out->dma_engines_ns = tm->dma_busy;
    out->dma_engines = tm->a.dma_engines;
    return 1;
}
