/* vm/check.c -- the run-time checkers behind Simulator(checks=...): see check.h for the
** hooks and docs/DESIGN.md ("Checkers") for the model.
**
** Happens-before. Every thread t has a vector clock vc(t) over all threads. An
** instruction starts a fresh epoch of its thread (vc(t)[t]++), acquires the clocks its
** waits were satisfied by, and its updates release vc(t) into the semaphore/event they
** touch. A rendezvous joins the seven engine/rendezvous clocks of its core before and
** after it. A fired DMA block's queue thread joins the trigger's clock (and keeps its
** own: queue order). A semaphore keeps a short history of (value after, cumulative
** clock) per update; a wait for >= v acquires the clock of the earliest update after
** which the value stayed >= v (C++ release sequences, but only as far back as needed).
**
** Shadow state. Per memory space (a core's SBUF, PSUM, each private buffer, its DRAM
** arena; each shared DRAM buffer, the all-cores DRAM arena) a list of access records, one per distinct access pattern: its box
** (partitions x bytes of the space), its exact pattern, the last write's epoch and the
** reads since (one epoch per thread, FastTrack-style). An access compares its epoch
** with every record whose box overlaps (boxes first, then the exact element sets only
** for unordered pairs) and replaces the records a dense write fully covers. */
#include <math.h>
#include <stdio.h>
#include "check.h"

#define CHK_RING       8         /* semaphore history entries */
#define CHK_READERS    6         /* reader epochs per record */
#define CHK_FIXED      7         /* threads per core before the DMA queues */
#define CHK_RDV        6         /* the rendezvous thread's slot */
#define CHK_MAX_FIND   1000
#define CHK_MAX_RECS   65536     /* per space; past it the oldest read-only record goes */
#define CHK_BANK       2048      /* PSUM bank bytes per partition (gen1..gen4) */

#define MASK(name) (1u << BS_CHECK_##name)

_Static_assert(BS_FD_OPERAND + 1 == BS_FINDING_NDETAIL, "detail slots (bs_enums.def FD)");

typedef struct chk_ep { uint32_t tid, clk; int32_t core, insn; } chk_ep;

typedef struct chk_geom {
    int64_t p0, p1, b0, b1;      /* box: partitions [p0,p1), bytes [b0,b1) of the space */
    int64_t off;                 /* first element's byte offset in the space */
    int64_t num[BS_MAX_DIMS], stride[BS_MAX_DIMS];
    int32_t ndim, isz;
    int32_t dense;               /* touches every byte of its box */
    int32_t exact;               /* 0: a gathered pattern, known by its box only */
} chk_geom;

typedef struct chk_rec {
    chk_geom g;
    int32_t  has_w, wread, wloc, nr, dead, live;
    uint32_t stamp;                  /* last scan that visited it */
    chk_ep   w;
    chk_ep   r[CHK_READERS];
} chk_rec;

typedef struct chk_bucket {
    int32_t *ids;                /* records whose byte range meets this bucket */
    int32_t  n;
    size_t   cap;                /* bytes */
} chk_bucket;

typedef struct chk_space {
    chk_rec *recs;               /* slots; freed ones are listed in free_ids */
    int32_t  n, live;            /* slots used (high-water), live records */
    size_t   cap;                /* bytes */
    int32_t *free_ids;
    int32_t  nfree;
    size_t   free_cap;           /* bytes */
    chk_bucket *bk;              /* nb buckets of 2^shift bytes (bucket_lo) */
    int32_t  nb, shift, linear;
    int64_t  pitch;
} chk_space;

typedef struct chk_sem {
    int32_t  n, head;            /* entries; ring index of the oldest */
    uint32_t base_value;         /* value before the oldest entry */
    uint32_t val[CHK_RING];
    uint32_t vc[];               /* (CHK_RING + 1) x N: entries, then the base clock */
} chk_sem;

typedef struct chk_finding {
    int32_t check;
    char   *msg;
    int64_t d[BS_FINDING_NDETAIL];
} chk_finding;

struct bs_chk {
    uint32_t     mask;
    int32_t      T, N, S;        /* threads per core, all threads, spaces per core */
    uint32_t    *vc;             /* N x N */
    uint32_t    *tmp;            /* N */
    int32_t      cur;            /* thread whose updates are being applied */
    chk_sem    **sems;           /* ncores x BS_NUM_SEMS, allocated on first update */
    uint32_t   **evc;            /* ncores x BS_NUM_EVENTS clocks, allocated on first set */
    chk_space   *spaces;         /* ncores x S, then one per location (shared DRAM), then the
                                    all-cores DRAM arena */
    int32_t      nspaces;
    chk_finding *f;
    int32_t      nf;
    size_t       fcap;           /* bytes */
    int64_t      dropped;
    uint64_t    *seen;           /* open-addressing set of reported keys (0 = empty) */
    size_t       nseen, seen_cap;/* entries, slots (power of 2) */
    int32_t      started, ended;
    uint32_t     stamp;          /* scan generation (chk_rec.stamp) */
};

/* {=== Clocks ===} */

static uint32_t *vc_of(bs_chk *k, int32_t t) { return k->vc + (size_t)t * (size_t)k->N; }

static void vc_join(bs_chk *k, uint32_t *dst, const uint32_t *src)
{
    for (int32_t i = 0; i < k->N; i++)
        if (src[i] > dst[i])
            dst[i] = src[i];
}

/* Join the engine and rendezvous clocks of core `core` and give every one the result. */
static void join_core(bs_chk *k, int32_t core)
{
    int32_t base = core * k->T;
    memcpy(k->tmp, vc_of(k, base), (size_t)k->N * sizeof *k->tmp);
    for (int32_t s = 1; s < CHK_FIXED; s++)
        vc_join(k, k->tmp, vc_of(k, base + s));
    for (int32_t s = 0; s < CHK_FIXED; s++)
        memcpy(vc_of(k, base + s), k->tmp, (size_t)k->N * sizeof *k->tmp);
}

static int32_t queue_thread(const bs_sim *sim, const bs_core *c, int32_t trigger)
{
    int64_t q = BS_PI(&sim->prog->insns[trigger], DMATrigger, queue);
    int32_t nq = sim->prog->n_queues;
    return c->index * sim->chk->T + CHK_FIXED + ((q >= 0 && q < nq) ? (int32_t)q : nq);
}

static int in_dma_frame(const bs_sim *sim, const bs_frame *f)
{
    return f->owner >= 0 && sim->prog->insns[f->owner].op == BS_OP_DMATrigger;
}

static int32_t thread_of(const bs_sim *sim, const bs_core *c, const bs_frame *f, int32_t insn)
{
    int q;
    if (in_dma_frame(sim, f))
        return queue_thread(sim, c, f->owner);
    q = sim->prog->queue[insn];
    if (q == BS_Q_RDV || q <= 0 || q > CHK_RDV)
        return c->index * sim->chk->T + CHK_RDV;
    return c->index * sim->chk->T + q - 1;
}

static int ordered(const chk_ep *e, int32_t tid, const uint32_t *v)
{
    return e->tid == (uint32_t)tid || e->clk <= v[e->tid];
}

/* {=== Semaphore history ===} */

static uint32_t *sem_vc(const bs_chk *k, chk_sem *s, int32_t slot)
{
    return s->vc + (size_t)slot * (size_t)k->N;
}

static chk_sem *sem_get(bs_chk *k, int32_t core, int32_t id)
{
    chk_sem **slot = &k->sems[(size_t)core * BS_NUM_SEMS + (size_t)id];
    if (*slot == NULL)
        *slot = bs_calloc(1, sizeof(chk_sem) + (size_t)(CHK_RING + 1) * (size_t)k->N * sizeof(uint32_t));
    return *slot;
}

static void sem_restart(bs_chk *k, chk_sem *s, uint32_t value)
{
    s->n = 0;
    s->head = 0;
    s->base_value = value;
    memset(sem_vc(k, s, CHK_RING), 0, (size_t)k->N * sizeof(uint32_t));
}

static uint32_t sem_newest(const chk_sem *s)
{
    return s->n ? s->val[(s->head + s->n - 1) % CHK_RING] : s->base_value;
}

static void sem_push(bs_chk *k, chk_sem *s, uint32_t value, const uint32_t *clock)
{
    int32_t prev = s->n ? (s->head + s->n - 1) % CHK_RING : CHK_RING, idx;
    if (s->n == CHK_RING) {                  /* the oldest becomes the base */
        s->base_value = s->val[s->head];
        memcpy(sem_vc(k, s, CHK_RING), sem_vc(k, s, s->head), (size_t)k->N * sizeof(uint32_t));
        if (prev == s->head)
            prev = CHK_RING;
        s->head = (s->head + 1) % CHK_RING;
        s->n--;
    }
    idx = (s->head + s->n) % CHK_RING;
    memcpy(k->tmp, sem_vc(k, s, prev), (size_t)k->N * sizeof(uint32_t));
    vc_join(k, k->tmp, clock);
    memcpy(sem_vc(k, s, idx), k->tmp, (size_t)k->N * sizeof(uint32_t));
    s->val[idx] = value;
    s->n++;
}

void bs_chk_update(bs_sim *sim, const bs_core *t, const bs_sync *u, uint32_t before)
{
    bs_chk *k = sim->chk;
    const uint32_t *src;
    if (!(k->mask & MASK(races)))
        return;
    src = vc_of(k, k->cur);
    if (u->type == BS_SYNCTYPE_event) {
        uint32_t **e = &k->evc[(size_t)t->index * BS_NUM_EVENTS + (size_t)u->id];
        if (*e == NULL)
            *e = bs_malloc((size_t)k->N * sizeof(uint32_t));
        if (*e != NULL)
            memcpy(*e, src, (size_t)k->N * sizeof(uint32_t));
        return;
    }
    {
        chk_sem *s = sem_get(k, t->index, u->id);
        if (s == NULL)
            return;
        if (u->mode == BS_UPDATE_sem_wr_imm)
            sem_restart(k, s, 0);                    /* a store starts a new history */
        else if (sem_newest(s) != before)
            sem_restart(k, s, before);               /* zeroed by a reset since */
        sem_push(k, s, t->sem[u->id], src);
    }
}

static void acquire(bs_sim *sim, const bs_core *c, int32_t tid, const bs_sync *w)
{
    bs_chk *k = sim->chk;
    uint32_t *dst = vc_of(k, tid);
    if (w->type == BS_SYNCTYPE_event) {
        const uint32_t *e = k->evc[(size_t)c->index * BS_NUM_EVENTS + (size_t)w->id];
        if (e != NULL)
            vc_join(k, dst, e);
        return;
    }
    {
        chk_sem *s = k->sems[(size_t)c->index * BS_NUM_SEMS + (size_t)w->id];
        uint32_t now = c->sem[w->id], v;
        int32_t i;
        if (s == NULL)
            return;
        v = w->mode == BS_WAIT_sem_ge_reg
                ? (uint32_t)c->regs[(size_t)w->reg * BS_REG_SLOTS + (size_t)(c->rslot < 0 ? 0 : c->rslot)]
                : (uint32_t)w->value;
        if (sem_newest(s) != now) {                  /* reset since the last update */
            sem_restart(k, s, now);
            return;
        }
        for (i = s->n - 1; i >= 0; i--)
            if (s->val[(s->head + i) % CHK_RING] < v)
                break;
        if (i >= 0 && i + 1 < s->n)
            vc_join(k, dst, sem_vc(k, s, (s->head + i + 1) % CHK_RING));
        else if (i < 0 && s->n > 0 && s->base_value < v)
            vc_join(k, dst, sem_vc(k, s, s->head));
        else if (i < 0)
            vc_join(k, dst, sem_vc(k, s, CHK_RING));
    }
}

/* {=== Interpreter hooks ===} */

void bs_chk_begin(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn)
{
    bs_chk *k = sim->chk;
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t t;
    if (!(k->mask & (MASK(races) | MASK(dead_writes))))
        return;
    t = thread_of(sim, c, f, insn);
    if (t % k->T == CHK_RDV)
        join_core(k, c->index);
    vc_of(k, t)[t]++;
    for (int32_t j = 0; j < in->nwait; j++)
        acquire(sim, c, t, &sim->prog->syncs[in->sync + j]);
    k->cur = t;
}

static int32_t member_thread(bs_sim *sim, bs_core *m, int32_t insn)
{
    static const bs_frame none = { .owner = -1 };
    return thread_of(sim, m, m->nframes > 0 ? &m->frames[m->nframes - 1] : &none, insn);
}

void bs_chk_join(bs_sim *sim, bs_core *m, int32_t insn)
{
    bs_chk *k = sim->chk;
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t t;
    if (!(k->mask & (MASK(races) | MASK(dead_writes))))
        return;
    t = member_thread(sim, m, insn);
    if (t == k->cur)
        return;
    if (t % k->T == CHK_RDV)
        join_core(k, m->index);
    vc_of(k, t)[t]++;
    for (int32_t j = 0; j < in->nwait; j++)
        acquire(sim, m, t, &sim->prog->syncs[in->sync + j]);
    vc_join(k, vc_of(k, k->cur), vc_of(k, t));
}

int32_t bs_chk_as(bs_sim *sim, bs_core *m, int32_t insn)
{
    bs_chk *k = sim->chk;
    int32_t prev = k->cur, t;
    if (!(k->mask & (MASK(races) | MASK(dead_writes))))
        return prev;
    t = member_thread(sim, m, insn);
    if (t != prev)
        vc_join(k, vc_of(k, t), vc_of(k, prev));
    k->cur = t;
    return prev;
}

void bs_chk_restore(bs_sim *sim, int32_t tid)
{
    sim->chk->cur = tid;
}

void bs_chk_complete(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn)
{
    bs_chk *k = sim->chk;
    int32_t t;
    if (!(k->mask & (MASK(races) | MASK(dead_writes))))
        return;
    t = thread_of(sim, c, f, insn);
    if (t % k->T == CHK_RDV)
        join_core(k, c->index);
    k->cur = t;
}

void bs_chk_dma_fire(bs_sim *sim, bs_core *c, int32_t trigger, int32_t blk)
{
    bs_chk *k = sim->chk;
    const bs_insn *b = &sim->prog->insns[blk];
    int32_t q, e = sim->prog->queue[trigger];
    if (!(k->mask & (MASK(races) | MASK(dead_writes))))
        return;
    q = queue_thread(sim, c, trigger);
    e = c->index * k->T + ((e == BS_Q_RDV || e <= 0 || e > CHK_RDV) ? CHK_RDV : e - 1);
    vc_join(k, vc_of(k, q), vc_of(k, e));            /* trigger -> descriptors */
    vc_of(k, q)[q]++;
    for (int32_t j = 0; j < b->nwait; j++)
        acquire(sim, c, q, &sim->prog->syncs[b->sync + j]);
}

void bs_chk_defer(bs_sim *sim, bs_core *c, int32_t insn, int32_t blk)
{
    bs_chk *k = sim->chk;
    if (!(k->mask & (MASK(races) | MASK(dead_writes))))
        return;
    k->cur = blk >= 0 ? queue_thread(sim, c, insn) : c->index * k->T + BS_ENGINE_DMA - 1;
}

void bs_chk_dma_end(bs_sim *sim, bs_core *c, const bs_frame *f)
{
    if (sim->chk->mask & (MASK(races) | MASK(dead_writes)))
        sim->chk->cur = queue_thread(sim, c, f->owner);
}

/* {=== Findings ===} */

static int seen_add(bs_chk *k, uint64_t key)
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

static void dflt(int64_t *d)
{
    for (int i = 0; i < BS_FINDING_NDETAIL; i++)
        d[i] = -1;
}

/* Record a finding; with strict=True fail the run with it. `insn` locates the error. */
static bs_status add_finding(bs_sim *sim, int32_t check, const int64_t *d, int32_t core,
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
static void name_insn(const bs_sim *sim, int32_t core, int32_t insn, int32_t tid, char *buf,
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

/* {=== Geometry ===} */

typedef struct chk_where {
    chk_space *sp;
    const uint8_t *base;
    int64_t pitch;
    int64_t rp, rb;              /* the location's first partition and byte in the space */
    int64_t size;                /* bytes of a private or DRAM buffer */
    int32_t placed;
} chk_where;

static void where_of(bs_sim *sim, bs_core *c, const bs_store *st, chk_where *w)
{
    int32_t l = bs_storage_loc(sim->prog, st->loc);    /* a must-alias output: its input's */
    const bs_loc *L = &sim->prog->locs[l];
    bs_chk *k = sim->chk;
    w->placed = L->placed && L->memtype != BS_MEM_DRAM;
    w->size = 0;
    if (L->placed && L->memtype == BS_MEM_DRAM) {       /* a DRAM arena: one flat space */
        int all = L->placed == 2;
        w->base = all ? sim->dram_all : c->dram;
        w->size = w->pitch = all ? sim->dram_all_size : c->dram_size;
        w->rp = 0;
        w->rb = L->addr;
        w->sp = all ? &k->spaces[sim->ncores * k->S + sim->prog->n_locs]
                    : &k->spaces[c->index * k->S + 2 + sim->prog->n_locs];
        return;
    }
    if (L->placed) {
        int sb = L->memtype == BS_MEM_SB;
        w->sp = &k->spaces[c->index * k->S + (sb ? 0 : 1)];
        w->base = sb ? c->sbuf : c->psum;
        w->pitch = sb ? sim->arch->sbuf_bpp : sim->arch->psum_bpp;
        w->rp = L->base;
        w->rb = L->addr;
        return;
    }
    w->base = st->data;
    w->pitch = st->pitch;
    w->size = st->parts * st->pitch;
    w->rp = w->rb = 0;
    if (sim->shared[l] != NULL && st->data == sim->shared[l])
        w->sp = &k->spaces[sim->ncores * k->S + l];
    else
        w->sp = &k->spaces[c->index * k->S + 2 + l];
}

static void geom_of(const chk_where *w, const bs_store *st, const bs_view *v,
                    const int64_t *offs, chk_geom *g)
{
    int64_t isz = bs_dtinfo_table[v->dtype].size, pitch = w->pitch;
    memset(g, 0, sizeof *g);
    g->isz = (int32_t)isz;
    if (offs != NULL) {                          /* gathered: the box of its elements */
        int64_t rel = st->data - w->base;
        g->p0 = g->b0 = INT64_MAX;
        g->p1 = g->b1 = INT64_MIN;
        for (int64_t e = 0; e < v->count; e++) {
            int64_t o = rel + offs[e], p = o / pitch, b = o % pitch;
            if (p < g->p0) g->p0 = p;
            if (p + 1 > g->p1) g->p1 = p + 1;
            if (b < g->b0) g->b0 = b;
            if (b + isz > g->b1) g->b1 = b + isz;
        }
        if (v->count == 0)
            g->p0 = g->p1 = g->b0 = g->b1 = 0;
        g->off = g->p0 * pitch + g->b0;
        g->ndim = 0;
        return;
    }
    {
        int64_t off = v->data - w->base, lo = off, hi = off + isz, fl, fh, distinct = 1;
        g->exact = 1;
        g->off = off;
        g->ndim = v->ndim;
        fl = off % pitch;
        fh = fl + isz;
        for (int32_t d = 0; d < v->ndim; d++) {
            int64_t s = v->stride[d], ext = s * (v->num[d] - 1);
            g->num[d] = v->num[d];
            g->stride[d] = s;
            if (ext < 0) lo += ext; else hi += ext;
            if (s != 0)
                distinct *= v->num[d];
            if (s % pitch != 0) {
                if (ext < 0) fl += ext; else fh += ext;
            }
        }
        g->p0 = lo / pitch;
        g->p1 = (hi - 1) / pitch + 1;
        if (fl >= 0 && fh <= pitch) {
            g->b0 = fl;
            g->b1 = fh;
        } else {
            g->b0 = 0;
            g->b1 = pitch;
        }
        g->dense = distinct * isz == (g->p1 - g->p0) * (g->b1 - g->b0);
    }
}

static int box_overlap(const chk_geom *a, const chk_geom *b)
{
    return a->p0 < b->p1 && b->p0 < a->p1 && a->b0 < b->b1 && b->b0 < a->b1;
}

static int geom_equal(const chk_geom *a, const chk_geom *b)
{
    if (a->exact != b->exact || a->off != b->off || a->ndim != b->ndim || a->isz != b->isz ||
        a->p0 != b->p0 || a->p1 != b->p1 || a->b0 != b->b0 || a->b1 != b->b1)
        return 0;
    for (int32_t d = 0; d < a->ndim; d++)
        if (a->num[d] != b->num[d] || a->stride[d] != b->stride[d])
            return 0;
    return a->exact;
}

/* a touches every byte b touches */
static int covers(const chk_geom *a, const chk_geom *b)
{
    if (geom_equal(a, b))
        return 1;
    return a->dense && a->p0 <= b->p0 && b->p1 <= a->p1 && a->b0 <= b->b0 && b->b1 <= a->b1;
}

/* Visit every byte of g inside box [p0,p1) x [b0,b1): set (mode 0) or test (mode 1) its
** bit in map. Returns 1 when a tested bit is set. */
static int walk(const chk_geom *g, int64_t pitch, int64_t p0, int64_t b0, int64_t p1, int64_t b1,
                uint8_t *map, int mode)
{
    int64_t idx[BS_MAX_DIMS] = {0}, w = b1 - b0;
    if (g->ndim == 0)
        return 0;
    for (;;) {
        int64_t o = g->off;
        int32_t d;
        for (d = 0; d < g->ndim; d++)
            o += idx[d] * g->stride[d];
        for (int64_t q = o; q < o + g->isz; q++) {
            int64_t p = q / pitch, b = q % pitch;
            if (p >= p0 && p < p1 && b >= b0 && b < b1) {
                int64_t bit = (p - p0) * w + (b - b0);
                if (mode == 0)
                    map[bit >> 3] |= (uint8_t)(1u << (bit & 7));
                else if (map[bit >> 3] & (1u << (bit & 7)))
                    return 1;
            }
        }
        d = g->ndim - 1;
        while (d >= 0 && ++idx[d] == g->num[d])
            idx[d--] = 0;
        if (d < 0)
            return 0;
    }
}

/* 1 if a and b share a byte (boxes already overlap). Conservative when not exact. */
static int elems_overlap(const chk_geom *a, const chk_geom *b, int64_t pitch)
{
    int64_t p0, p1, b0, b1, bits;
    uint8_t *map;
    int r;
    if (!a->exact || !b->exact || (a->dense && b->dense))
        return 1;
    p0 = a->p0 > b->p0 ? a->p0 : b->p0;
    p1 = a->p1 < b->p1 ? a->p1 : b->p1;
    b0 = a->b0 > b->b0 ? a->b0 : b->b0;
    b1 = a->b1 < b->b1 ? a->b1 : b->b1;
    bits = (p1 - p0) * (b1 - b0);
    if (bits > (INT64_C(1) << 27))
        return 1;
    map = bs_calloc((size_t)(bits + 7) / 8, 1);
    if (map == NULL)
        return 1;
    walk(b, pitch, p0, b0, p1, b1, map, 0);
    r = walk(a, pitch, p0, b0, p1, b1, map, 1);
    bs_free(map);
    return r;
}

/* {=== Races and dead writes ===} */

static const char *const race_names[] = { "RAW", "WAR", "WAW" };

static bs_status report_race(bs_sim *sim, int sub, const chk_ep *prev, const chk_ep *now,
                             const chk_where *w, const chk_geom *a, const chk_geom *b,
                             int32_t loc, bs_error *err)
{
    char na[512], nb[512], msg[1400];
    int64_t d[BS_FINDING_NDETAIL];
    int64_t p0 = (a->p0 > b->p0 ? a->p0 : b->p0) - w->rp, p1 = (a->p1 < b->p1 ? a->p1 : b->p1) - w->rp;
    int64_t b0 = (a->b0 > b->b0 ? a->b0 : b->b0) - w->rb, b1 = (a->b1 < b->b1 ? a->b1 : b->b1) - w->rb;
    static const char *const verb[] = { "reads", "writes", "writes" };
    static const char *const prevverb[] = { "wrote", "read", "wrote" };
    uint64_t key = ((uint64_t)(uint32_t)prev->insn << 34) ^ ((uint64_t)(uint32_t)now->insn << 4) ^
                   ((uint64_t)(uint32_t)prev->core << 50) ^ ((uint64_t)(uint32_t)now->core << 58) ^
                   (uint64_t)sub;
    if (!seen_add(sim->chk, key))
        return BS_OK;
    name_insn(sim, now->core, now->insn, (int32_t)now->tid, nb, sizeof nb);
    name_insn(sim, prev->core, prev->insn, (int32_t)prev->tid, na, sizeof na);
    snprintf(msg, sizeof msg, "race (%s) on '%s' partitions [%lld, %lld) bytes [%lld, %lld): %s %s "
             "bytes that %s %s, with no wait, barrier or queue order between them",
             race_names[sub], bs_str(sim->prog, sim->prog->locs[loc].name), (long long)p0,
             (long long)p1, (long long)b0, (long long)b1, nb, verb[sub], na, prevverb[sub]);
    dflt(d);
    d[BS_FD_SUB] = BS_FINDING_RAW + sub;
    d[BS_FD_CORE_A] = prev->core;
    d[BS_FD_INSN_A] = prev->insn;
    d[BS_FD_THREAD_A] = prev->tid;
    d[BS_FD_CORE_B] = now->core;
    d[BS_FD_INSN_B] = now->insn;
    d[BS_FD_THREAD_B] = now->tid;
    d[BS_FD_LOC] = loc;
    d[BS_FD_P0] = p0;
    d[BS_FD_P1] = p1;
    d[BS_FD_B0] = b0;
    d[BS_FD_B1] = b1;
    return add_finding(sim, BS_CHECK_races, d, now->core, now->insn, msg, err);
}

static bs_status report_dead(bs_sim *sim, const chk_rec *r, const chk_ep *by, bs_error *err)
{
    char na[512], nb[512], msg[1200];
    int64_t d[BS_FINDING_NDETAIL];
    if (!seen_add(sim->chk, ((uint64_t)(uint32_t)r->w.insn << 20) ^ ((uint64_t)(uint32_t)r->w.core << 52) ^
                  (by ? 0x1000u : 0x2000u)))
        return BS_OK;
    name_insn(sim, r->w.core, r->w.insn, (int32_t)r->w.tid, na, sizeof na);
    dflt(d);
    d[BS_FD_CORE_A] = r->w.core;
    d[BS_FD_INSN_A] = r->w.insn;
    d[BS_FD_THREAD_A] = r->w.tid;
    d[BS_FD_LOC] = r->wloc;
    if (by) {
        name_insn(sim, by->core, by->insn, (int32_t)by->tid, nb, sizeof nb);
        snprintf(msg, sizeof msg, "dead write: %s writes '%s', overwritten by %s before anything "
                 "read it", na, bs_str(sim->prog, sim->prog->locs[r->wloc].name), nb);
        d[BS_FD_SUB] = BS_FINDING_overwritten;
        d[BS_FD_CORE_B] = by->core;
        d[BS_FD_INSN_B] = by->insn;
        d[BS_FD_THREAD_B] = by->tid;
    } else {
        snprintf(msg, sizeof msg, "dead write: %s writes '%s', never read before the end of the run",
                 na, bs_str(sim->prog, sim->prog->locs[r->wloc].name));
        d[BS_FD_SUB] = BS_FINDING_unread;
    }
    return add_finding(sim, BS_CHECK_dead_writes, d, r->w.core, r->w.insn, msg, err);
}

static bs_status bucket_add(chk_bucket *b, int32_t id, bs_error *err)
{
    void *p = b->ids;
    if (bs_reserve(&p, &b->cap, (size_t)(b->n + 1) * sizeof *b->ids, 1))
        return bs_errorf(err, BS_E_NOMEM, "out of memory in the race checker");
    b->ids = p;
    b->ids[b->n++] = id;
    return BS_OK;
}

static void bucket_del(chk_bucket *b, int32_t id)
{
    for (int32_t j = 0; j < b->n; j++)
        if (b->ids[j] == id) {
            b->ids[j] = b->ids[--b->n];
            return;
        }
}

/* Buckets a box meets: over the byte-in-partition axis of SBUF/PSUM (tiles span
** partitions), over linear addresses of a private or DRAM buffer (rows are short). */
static int32_t bucket_lo(const chk_space *sp, const chk_geom *g)
{
    int64_t l = sp->linear ? g->p0 * sp->pitch + g->b0 : g->b0;
    l >>= sp->shift;
    return (int32_t)(l < sp->nb - 1 ? l : sp->nb - 1);
}

static int32_t bucket_hi(const chk_space *sp, const chk_geom *g)
{
    int64_t h = sp->linear ? (g->p1 - 1) * sp->pitch + g->b1 - 1 : g->b1 - 1;
    h >>= sp->shift;
    return (int32_t)(h < sp->nb - 1 ? h : sp->nb - 1);
}

/* First use of a space: buckets of 2^shift bytes, at most 4096 of them. */
static bs_status space_init(chk_space *sp, const chk_where *w, bs_error *err)
{
    int32_t shift = 6;
    int64_t extent = w->placed ? w->pitch : w->size;
    while ((extent >> shift) >= 4096)
        shift++;
    sp->linear = !w->placed;
    sp->pitch = w->pitch;
    sp->shift = shift;
    sp->nb = (int32_t)(extent >> shift) + 1;
    sp->bk = bs_calloc((size_t)sp->nb, sizeof *sp->bk);
    if (sp->bk == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory in the race checker");
    return BS_OK;
}

static bs_status shadow(bs_sim *sim, const chk_where *w, const chk_geom *g, int rd, int wr,
                        const chk_ep *now, int32_t loc, int32_t wloc, bs_error *err)
{
    bs_chk *k = sim->chk;
    chk_space *sp = w->sp;
    const uint32_t *V = vc_of(k, (int32_t)now->tid);
    int races = (k->mask & MASK(races)) != 0, dead = (k->mask & MASK(dead_writes)) != 0;
    int32_t same = -1, nrm = 0, id;
    uint32_t stamp = ++k->stamp;
    if (sp->bk == NULL)
        BS_TRY(space_init(sp, w, err));
    for (int32_t b = bucket_lo(sp, g); b <= bucket_hi(sp, g); b++)
        for (int32_t j = 0; j < sp->bk[b].n; j++) {
            chk_rec *R = &sp->recs[sp->bk[b].ids[j]];
            int ov = -1;
            if (R->stamp == stamp || !box_overlap(&R->g, g))
                continue;
            R->stamp = stamp;
            if (geom_equal(&R->g, g)) {
                same = sp->bk[b].ids[j];
                ov = 1;
            }
            if (R->has_w) {
                if (races && !ordered(&R->w, (int32_t)now->tid, V)) {
                    if (ov < 0)
                        ov = elems_overlap(&R->g, g, w->pitch);
                    if (ov)
                        BS_TRY(report_race(sim, wr ? 2 : 0, &R->w, now, w, &R->g, g, loc, err));
                }
                if (rd && !R->wread) {
                    if (ov < 0)
                        ov = elems_overlap(&R->g, g, w->pitch);
                    if (ov)
                        R->wread = 1;
                }
            }
            if (wr && races)
                for (int32_t r = 0; r < R->nr; r++)
                    if (!ordered(&R->r[r], (int32_t)now->tid, V)) {
                        if (ov < 0)
                            ov = elems_overlap(&R->g, g, w->pitch);
                        if (ov)
                            BS_TRY(report_race(sim, 1, &R->r[r], now, w, &R->g, g, loc, err));
                    }
            if (wr && !R->dead && covers(g, &R->g)) {
                if (dead && R->has_w && !R->wread && ordered(&R->w, (int32_t)now->tid, V))
                    BS_TRY(report_dead(sim, R, now, err));
                R->dead = 1;
                nrm++;
            }
        }
    if (nrm) {                                   /* unlink the covered records */
        for (int32_t b = bucket_lo(sp, g); b <= bucket_hi(sp, g); b++)
            for (int32_t j = 0; j < sp->bk[b].n; j++) {
                int32_t rid = sp->bk[b].ids[j];
                chk_rec *R = &sp->recs[rid];
                if (!R->dead)
                    continue;
                for (int32_t b2 = bucket_lo(sp, &R->g); b2 <= bucket_hi(sp, &R->g); b2++)
                    if (b2 != b)
                        bucket_del(&sp->bk[b2], rid);
                sp->bk[b].ids[j--] = sp->bk[b].ids[--sp->bk[b].n];
                R->dead = 0;
                R->live = 0;                    /* a free slot */
                {
                    void *p = sp->free_ids;
                    if (bs_reserve(&p, &sp->free_cap, (size_t)(sp->nfree + 1) * sizeof(int32_t), 1))
                        return bs_errorf(err, BS_E_NOMEM, "out of memory in the race checker");
                    sp->free_ids = p;
                }
                sp->free_ids[sp->nfree++] = rid;
                sp->live--;
            }
        same = -1;
    }
    if (!wr && same >= 0) {
        chk_rec *R = &sp->recs[same];
        int32_t j;
        for (j = 0; j < R->nr; j++)
            if (R->r[j].tid == now->tid)
                break;
        if (j == R->nr) {
            if (R->nr < CHK_READERS)
                R->nr++;
            else
                j = (int32_t)(now->clk % CHK_READERS);      /* full: forget one reader */
        }
        R->r[j] = *now;
        return BS_OK;
    }
    if (!wr && sp->live >= CHK_MAX_RECS)
        return BS_OK;                            /* full: reads stop being recorded */
    if (sp->nfree > 0) {
        id = sp->free_ids[--sp->nfree];
    } else {
        void *p = sp->recs;
        if (bs_reserve(&p, &sp->cap, (size_t)(sp->n + 1) * sizeof *sp->recs, 1))
            return bs_errorf(err, BS_E_NOMEM, "out of memory in the race checker");
        sp->recs = p;
        id = sp->n++;
    }
    {
        chk_rec *R = &sp->recs[id];
        memset(R, 0, sizeof *R);
        R->g = *g;
        R->wloc = wloc;
        R->live = 1;
        if (wr) {
            R->has_w = 1;
            R->w = *now;
        } else {
            R->nr = 1;
            R->r[0] = *now;
        }
    }
    sp->live++;
    for (int32_t b = bucket_lo(sp, g); b <= bucket_hi(sp, g); b++)
        BS_TRY(bucket_add(&sp->bk[b], id, err));
    return BS_OK;
}

/* {=== Memory hooks ===} */

static int is_dma_op(int32_t op)
{
    const char *n = bs_opinfo_table[op].name;
    return strncmp(n, "DMA", 3) == 0 || op == BS_OP_Load || op == BS_OP_Save ||
           op == BS_OP_TensorLoad || op == BS_OP_TensorSave || op == BS_OP_CustomOp ||
           op == BS_OP_BIRKernel || strstr(n, "IndirectLoad") || strstr(n, "IndirectSave");
}

static int is_compute_engine(int32_t e)
{
    return e == BS_ENGINE_Pool || e == BS_ENGINE_Activation || e == BS_ENGINE_PE ||
           e == BS_ENGINE_DVE;
}

static bs_status capacity_access(bs_sim *sim, bs_core *c, int32_t insn, int j,
                                 const bs_opnd *o, const chk_where *w, const chk_geom *g,
                                 bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_loc *L = &p->locs[o->loc];
    int out = j >= in->nin;
    char na[512], msg[1000];
    int64_t d[BS_FINDING_NDETAIL];
    dflt(d);
    d[BS_FD_CORE_A] = c->index;
    d[BS_FD_INSN_A] = insn;
    d[BS_FD_LOC] = o->loc;
    d[BS_FD_OPERAND] = out ? 1000 + j - in->nin : j;
    if (is_compute_engine(in->engine) && !is_dma_op(in->op) &&
        (L->memtype == BS_MEM_SB || L->memtype == BS_MEM_PSUM)) {
        int64_t n = g->p1 - g->p0, start = w->placed ? g->p0 : g->p0 + 0;
        int ok = n > 64 ? start == 0 : n > 32 ? (start == 0 || start == 64) : start % 32 == 0;
        if (!ok && seen_add(sim->chk, ((uint64_t)(uint32_t)insn << 8) ^ 0x51u ^ ((uint64_t)j << 40))) {
            name_insn(sim, c->index, insn, -1, na, sizeof na);
            snprintf(msg, sizeof msg, "capacity: %s: %s[%d] on '%s' covers %lld partitions starting "
                     "at partition %lld; an operand of %s partitions must start at %s", na,
                     out ? "outs" : "ins", out ? j - in->nin : j, bs_str(p, L->name), (long long)n,
                     (long long)start, n > 64 ? "65-128" : n > 32 ? "33-64" : "1-32",
                     n > 64 ? "0" : n > 32 ? "0 or 64" : "0, 32, 64 or 96");
            d[BS_FD_SUB] = BS_FINDING_start_partition;
            d[BS_FD_P0] = start;
            d[BS_FD_P1] = start + n;
            BS_TRY(add_finding(sim, BS_CHECK_capacity, d, c->index, insn, msg, err));
        }
    }
    if (in->op == BS_OP_Matmult && out && L->memtype == BS_MEM_PSUM &&
        g->b0 / CHK_BANK != (g->b1 - 1) / CHK_BANK &&
        seen_add(sim->chk, ((uint64_t)(uint32_t)insn << 8) ^ 0x52u)) {
        name_insn(sim, c->index, insn, -1, na, sizeof na);
        snprintf(msg, sizeof msg, "capacity: %s accumulates into '%s' bytes [%lld, %lld) of each "
                 "partition, across PSUM banks of %d bytes (a matmul output must fit one bank)",
                 na, bs_str(p, L->name), (long long)(g->b0 - w->rb), (long long)(g->b1 - w->rb), CHK_BANK);
        d[BS_FD_SUB] = BS_FINDING_psum_banks;
        d[BS_FD_B0] = g->b0 - w->rb;
        d[BS_FD_B1] = g->b1 - w->rb;
        d[BS_FD_LIMIT] = CHK_BANK;
        BS_TRY(add_finding(sim, BS_CHECK_capacity, d, c->index, insn, msg, err));
    }
    return BS_OK;
}

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
    if (acc && (k->mask & MASK(uninitialized)) && !bs_view_initialized(v) &&
        seen_add(k, ((uint64_t)(uint32_t)insn << 8) ^ 0x61u)) {
        char na[512], msg[900];
        int64_t d[BS_FINDING_NDETAIL];
        name_insn(sim, c->index, insn, -1, na, sizeof na);
        snprintf(msg, sizeof msg, "uninitialized: %s accumulates into bytes of '%s' that "
                 "nothing wrote (no matmul started them)", na, bs_str(p, p->locs[o->loc].name));
        dflt(d);
        d[BS_FD_SUB] = BS_FINDING_uninit_accumulate;
        d[BS_FD_CORE_A] = c->index;
        d[BS_FD_INSN_A] = insn;
        d[BS_FD_LOC] = o->loc;
        d[BS_FD_OPERAND] = 1000 + j - in->nin;
        BS_TRY(add_finding(sim, BS_CHECK_uninitialized, d, c->index, insn, msg, err));
    }
    if (!(k->mask & (MASK(races) | MASK(dead_writes) | MASK(capacity))))
        return BS_OK;
    where_of(sim, c, st, &w);
    geom_of(&w, st, v, offs, &g);
    if (k->mask & MASK(capacity))
        BS_TRY(capacity_access(sim, c, insn, j, o, &w, &g, err));
    if (k->mask & (MASK(races) | MASK(dead_writes))) {
        chk_ep now;
        now.tid = (uint32_t)k->cur;
        now.clk = vc_of(k, k->cur)[k->cur];
        now.core = c->index;
        now.insn = insn;
        return shadow(sim, &w, &g, !out || rmw, out, &now, o->loc, st->loc, err);
    }
    return BS_OK;
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

bs_status bs_chk_outputs(bs_sim *sim, bs_core *c, int32_t insn, const bs_kctx *k,
                         bs_error *err)
{
    const bs_program *p = sim->prog;
    if (!(sim->chk->mask & MASK(nan)))
        return BS_OK;
    for (int j = 0; j < k->nout; j++) {
        int isn = 0, dummy;
        int64_t e = first_nonfinite(&k->out[j], &isn);
        char na[512], msg[1000];
        int64_t d[BS_FINDING_NDETAIL];
        int inherited = 0;
        if (e < 0)
            continue;
        for (int i = 0; i < k->nin && !inherited; i++) {
            if (k->in[i].ndim > 0)
                inherited = first_nonfinite(&k->in[i], &dummy) >= 0;
            else
                inherited = !isfinite(k->imm[i]);
        }
        if (inherited || !seen_add(sim->chk, ((uint64_t)(uint32_t)insn << 8) ^ 0x71u))
            return BS_OK;
        name_insn(sim, c->index, insn, -1, na, sizeof na);
        snprintf(msg, sizeof msg, "nan: %s writes %s into outs[%d] ('%s') at element %lld, and "
                 "none of its inputs held a NaN or Inf", na, isn ? "NaN" : "Inf", j,
                 bs_str(p, p->locs[k->outs[j].loc].name), (long long)e);
        dflt(d);
        d[BS_FD_SUB] = isn ? BS_FINDING_nan : BS_FINDING_inf;
        d[BS_FD_CORE_A] = c->index;
        d[BS_FD_INSN_A] = insn;
        d[BS_FD_LOC] = k->outs[j].loc;
        d[BS_FD_INDEX] = e;
        d[BS_FD_OPERAND] = 1000 + j;
        return add_finding(sim, BS_CHECK_nan, d, c->index, insn, msg, err);
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
    name_insn(sim, c->index, insn, -1, na, sizeof na);
    snprintf(msg, sizeof msg, "uninitialized: %s reads never-written bytes of '%s' (ins[%d], "
             "first at element %lld)", na, bs_str(p, p->locs[o->loc].name), j, (long long)e);
    dflt(d);
    d[BS_FD_SUB] = BS_FINDING_uninit_read;
    d[BS_FD_CORE_A] = c->index;
    d[BS_FD_INSN_A] = insn;
    d[BS_FD_LOC] = o->loc;
    d[BS_FD_INDEX] = e;
    d[BS_FD_OPERAND] = j;
    return add_finding(sim, BS_CHECK_uninitialized, d, c->index, insn, msg, err);
}

/* {=== Static checks at the start of a run ===} */

static bs_status unreachable_waits(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    uint8_t ev_set[BS_NUM_EVENTS] = {0}, sem_up[BS_NUM_SEMS] = {0};
    uint32_t sem_wr[BS_NUM_SEMS] = {0};
    for (int32_t i = 0; i < p->n_insns; i++) {
        const bs_insn *in = &p->insns[i];
        for (int32_t u = in->sync + in->nwait; u < in->sync + in->nwait + in->nupd; u++) {
            const bs_sync *y = &p->syncs[u];
            if (y->type == BS_SYNCTYPE_event)
                ev_set[y->id] = 1;
            else if (y->mode == BS_UPDATE_sem_wr_imm) {
                if ((uint32_t)y->value > sem_wr[y->id])
                    sem_wr[y->id] = (uint32_t)y->value;
            } else if ((y->mode == BS_UPDATE_sem_add_imm && y->value != 0) ||
                       y->mode == BS_UPDATE_sem_inc)
                sem_up[y->id] = 1;
        }
    }
    for (int32_t i = 0; i < p->n_insns; i++) {
        const bs_insn *in = &p->insns[i];
        for (int32_t u = in->sync; u < in->sync + in->nwait; u++) {
            const bs_sync *y = &p->syncs[u];
            int never;
            char na[512], msg[1000];
            int64_t d[BS_FINDING_NDETAIL];
            if (y->type == BS_SYNCTYPE_event)
                never = !ev_set[y->id];
            else if (y->mode == BS_WAIT_sem_ge_imm)
                never = (uint32_t)y->value > 0 && !sem_up[y->id] && sem_wr[y->id] < (uint32_t)y->value;
            else
                never = 0;
            if (!never)
                continue;
            name_insn(sim, 0, i, -1, na, sizeof na);
            if (y->type == BS_SYNCTYPE_event)
                snprintf(msg, sizeof msg, "leftover_sync: %s waits for event %d, which no update "
                         "in the program ever sets", na, y->id);
            else
                snprintf(msg, sizeof msg, "leftover_sync: %s waits for semaphore %d >= %lld, a "
                         "value no update in the program can reach", na, y->id, (long long)y->value);
            dflt(d);
            d[BS_FD_SUB] = BS_FINDING_wait_unreachable;
            d[BS_FD_CORE_A] = 0;
            d[BS_FD_INSN_A] = i;
            d[BS_FD_INDEX] = y->id;
            d[BS_FD_VALUE] = y->type == BS_SYNCTYPE_event ? -1 : y->value;
            BS_TRY(add_finding(sim, BS_CHECK_leftover_sync, d, 0, i, msg, err));
        }
    }
    return BS_OK;
}

static bs_status static_capacity(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    char msg[1000], na[512];
    int64_t d[BS_FINDING_NDETAIL];
    for (int32_t l = 0; l < p->n_locs; l++) {
        const bs_loc *L = &p->locs[l];
        int32_t lim = L->memtype == BS_MEM_PSUM ? sim->arch->psum_parts : sim->arch->sbuf_parts;
        if ((L->memtype != BS_MEM_SB && L->memtype != BS_MEM_PSUM) || L->parts <= lim)
            continue;
        snprintf(msg, sizeof msg, "capacity: '%s' has %lld partitions; %s has %d", bs_str(p, L->name),
                 (long long)L->parts, L->memtype == BS_MEM_SB ? "SBUF" : "PSUM", lim);
        dflt(d);
        d[BS_FD_SUB] = BS_FINDING_partitions;
        d[BS_FD_LOC] = l;
        d[BS_FD_VALUE] = L->parts;
        d[BS_FD_LIMIT] = lim;
        BS_TRY(add_finding(sim, BS_CHECK_capacity, d, -1, -1, msg, err));
    }
    for (int32_t fi = 0; fi < p->n_funcs; fi++) {
        const bs_func *fn = &p->funcs[fi];
        for (int m = 0; m < 2; m++) {
            int32_t mt = m ? BS_MEM_PSUM : BS_MEM_SB;
            int64_t lim = m ? sim->arch->psum_bpp : sim->arch->sbuf_bpp, sum = 0, placed = 0;
            for (int32_t s = fn->set0; s < fn->set0 + fn->nset; s++)
                for (int32_t l = p->sets[s].loc0; l < p->sets[s].loc0 + p->sets[s].nloc; l++) {
                    const bs_loc *L = &p->locs[l];
                    if (L->memtype != mt)
                        continue;
                    if (L->placed) {
                        if (L->addr + L->bpp > placed)
                            placed = L->addr + L->bpp;
                    } else {
                        sum += L->bpp;
                    }
                }
            if (sum + placed <= lim)
                continue;
            snprintf(msg, sizeof msg, "capacity: function '%s' holds %lld bytes per partition of %s "
                     "tiles (%lld unplaced + %lld placed), more than the %lld of %s on %s",
                     bs_str(p, fn->name), (long long)(sum + placed), m ? "PSUM" : "SBUF",
                     (long long)sum, (long long)placed, (long long)lim, m ? "PSUM" : "SBUF",
                     sim->arch->name);
            dflt(d);
            d[BS_FD_SUB] = m ? BS_FINDING_psum_full : BS_FINDING_sbuf_full;
            d[BS_FD_VALUE] = sum + placed;
            d[BS_FD_LIMIT] = lim;
            d[BS_FD_INDEX] = fi;
            BS_TRY(add_finding(sim, BS_CHECK_capacity, d, -1, -1, msg, err));
        }
    }
    for (int32_t i = 0; i < p->n_insns; i++) {
        const bs_insn *in = &p->insns[i];
        for (int32_t j = 0; j < in->nin + in->nout; j++) {
            const bs_opnd *o = &p->opnds[in->opnd + j];
            int out = j >= in->nin, bad_mm, bad_dram, bad_psum, pool;
            if (o->kind != BS_OPND_physical_ap && o->kind != BS_OPND_symbolic_ap &&
                o->kind != BS_OPND_register_ap)
                continue;
            bad_mm = in->op == BS_OP_Matmult && out && p->locs[o->loc].memtype != BS_MEM_PSUM;
            bad_dram = is_compute_engine(in->engine) && !is_dma_op(in->op) &&
                       p->locs[o->loc].memtype == BS_MEM_DRAM;
            /* GpSimd reaches SBUF only, no PSUM (nki-isa-semantics.md §1) */
            pool = in->engine == BS_ENGINE_Pool;
            bad_psum = pool && !is_dma_op(in->op) && p->locs[o->loc].memtype == BS_MEM_PSUM;
            if (!bad_mm && !bad_dram && !bad_psum)
                continue;
            name_insn(sim, 0, i, -1, na, sizeof na);
            if (bad_mm)
                snprintf(msg, sizeof msg, "capacity: %s writes its result into '%s' (%s); a matmul "
                         "writes PSUM", na, bs_str(p, p->locs[o->loc].name),
                         bs_enum_name("MEM", p->locs[o->loc].memtype));
            else
                snprintf(msg, sizeof msg, "capacity: %s: %s[%d] is '%s' in %s; the %s engine "
                         "reads and writes only %s", na, out ? "outs" : "ins",
                         out ? j - in->nin : j, bs_str(p, p->locs[o->loc].name),
                         bad_dram ? "DRAM" : "PSUM", bs_enum_name("ENGINE", in->engine),
                         pool ? "SBUF (GpSimd has no PSUM access; DRAM goes through DMA)"
                              : "SBUF and PSUM (DRAM goes through DMA)");
            dflt(d);
            d[BS_FD_SUB] = bad_mm ? BS_FINDING_matmul_not_psum
                         : bad_dram ? BS_FINDING_engine_dram : BS_FINDING_engine_psum;
            d[BS_FD_CORE_A] = 0;
            d[BS_FD_INSN_A] = i;
            d[BS_FD_LOC] = o->loc;
            d[BS_FD_OPERAND] = out ? 1000 + j - in->nin : j;
            BS_TRY(add_finding(sim, BS_CHECK_capacity, d, 0, i, msg, err));
        }
    }
    return BS_OK;
}

bs_status bs_chk_run_start(bs_sim *sim, bs_error *err)
{
    bs_chk *k = sim->chk;
    if (k->started)
        return BS_OK;
    k->started = 1;
    if (k->mask & MASK(leftover_sync))
        BS_TRY(unreachable_waits(sim, err));
    if (k->mask & MASK(capacity))
        BS_TRY(static_capacity(sim, err));
    return BS_OK;
}

bs_status bs_chk_run_end(bs_sim *sim, bs_error *err)
{
    bs_chk *k = sim->chk;
    const bs_program *p = sim->prog;
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
                dflt(d);
                d[BS_FD_SUB] = BS_FINDING_semaphore_left;
                d[BS_FD_CORE_A] = ci;
                d[BS_FD_INDEX] = id;
                d[BS_FD_VALUE] = c->sem[id];
                BS_TRY(add_finding(sim, BS_CHECK_leftover_sync, d, ci, -1, msg, err));
            }
            for (int32_t id = 0; id < BS_NUM_EVENTS; id++) {
                if (!c->evt[id])
                    continue;
                snprintf(msg, sizeof msg, "leftover_sync: %sevent %d is still set at the end of the "
                         "run", cb, id);
                dflt(d);
                d[BS_FD_SUB] = BS_FINDING_event_left;
                d[BS_FD_CORE_A] = ci;
                d[BS_FD_INDEX] = id;
                BS_TRY(add_finding(sim, BS_CHECK_leftover_sync, d, ci, -1, msg, err));
            }
        }
    if (k->mask & MASK(dead_writes))
        for (int32_t s = 0; s < k->nspaces; s++)
            for (int32_t i = 0; i < k->spaces[s].n; i++) {
                const chk_rec *R = &k->spaces[s].recs[i];
                if (R->live && R->has_w && !R->wread && p->sets[p->locs[R->wloc].set].io != 2)
                    BS_TRY(report_dead(sim, R, NULL, err));
            }
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
            sem_restart(k, k->sems[i], 0);
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
