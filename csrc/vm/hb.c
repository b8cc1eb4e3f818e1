/* vm/hb.c -- the race detector's happens-before engine (vm/check.c holds the hooks on
** memory and the findings; check_int.h what they share).
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
#include <stdio.h>
#include "check_int.h"

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

void bs_chk_sem_restart(bs_chk *k, chk_sem *s, uint32_t value)
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
            bs_chk_sem_restart(k, s, 0);                    /* a store starts a new history */
        else if (sem_newest(s) != before)
            bs_chk_sem_restart(k, s, before);               /* zeroed by a reset since */
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
            bs_chk_sem_restart(k, s, now);
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

/* The thread of insn (a rendezvous joins its core's engines first); -1 when no check
** needs clocks. */
static int32_t enter(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn)
{
    bs_chk *k = sim->chk;
    int32_t t;
    if (!(k->mask & (MASK(races) | MASK(dead_writes))))
        return -1;
    t = thread_of(sim, c, f, insn);
    if (t % k->T == CHK_RDV)
        join_core(k, c->index);
    return t;
}

void bs_chk_begin(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn)
{
    bs_chk *k = sim->chk;
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t t = enter(sim, c, f, insn);
    if (t < 0)
        return;
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
    int32_t t = enter(sim, c, f, insn);
    if (t >= 0)
        sim->chk->cur = t;
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

/* {=== Geometry ===} */

void bs_chk_where_of(bs_sim *sim, bs_core *c, const bs_store *st, chk_where *w)
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

void bs_chk_geom_of(const chk_where *w, const bs_store *st, const bs_view *v,
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
    if (!bs_chk_seen_add(sim->chk, key))
        return BS_OK;
    bs_chk_name_insn(sim, now->core, now->insn, (int32_t)now->tid, nb, sizeof nb);
    bs_chk_name_insn(sim, prev->core, prev->insn, (int32_t)prev->tid, na, sizeof na);
    snprintf(msg, sizeof msg, "race (%s) on '%s' partitions [%lld, %lld) bytes [%lld, %lld): %s %s "
             "bytes that %s %s, with no wait, barrier or queue order between them",
             race_names[sub], bs_str(sim->prog, sim->prog->locs[loc].name), (long long)p0,
             (long long)p1, (long long)b0, (long long)b1, nb, verb[sub], na, prevverb[sub]);
    bs_chk_detail_init(d);
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
    return bs_chk_add_finding(sim, BS_CHECK_races, d, now->core, now->insn, msg, err);
}

static bs_status report_dead(bs_sim *sim, const chk_rec *r, const chk_ep *by, bs_error *err)
{
    char na[512], nb[512], msg[1200];
    int64_t d[BS_FINDING_NDETAIL];
    if (!bs_chk_seen_add(sim->chk, ((uint64_t)(uint32_t)r->w.insn << 20) ^ ((uint64_t)(uint32_t)r->w.core << 52) ^
                  (by ? 0x1000u : 0x2000u)))
        return BS_OK;
    bs_chk_name_insn(sim, r->w.core, r->w.insn, (int32_t)r->w.tid, na, sizeof na);
    bs_chk_detail_init(d);
    d[BS_FD_CORE_A] = r->w.core;
    d[BS_FD_INSN_A] = r->w.insn;
    d[BS_FD_THREAD_A] = r->w.tid;
    d[BS_FD_LOC] = r->wloc;
    if (by) {
        bs_chk_name_insn(sim, by->core, by->insn, (int32_t)by->tid, nb, sizeof nb);
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
    return bs_chk_add_finding(sim, BS_CHECK_dead_writes, d, r->w.core, r->w.insn, msg, err);
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

/* The access meets record R (their boxes overlap; ov: 1 if their elements surely do, -1
** if not known yet): a race with R's writer or readers, R's write read, and *covered when
** a write covers R (R is dead: unlinked by unlink_covered). */
static bs_status meet_record(bs_sim *sim, chk_rec *R, const chk_where *w, const chk_geom *g,
                             int rd, int wr, const chk_ep *now, int ov, int32_t loc,
                             int *covered, bs_error *err)
{
    bs_chk *k = sim->chk;
    const uint32_t *V = vc_of(k, (int32_t)now->tid);
    int races = (k->mask & MASK(races)) != 0, dead = (k->mask & MASK(dead_writes)) != 0;
    *covered = 0;
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
        *covered = 1;
    }
    return BS_OK;
}

/* Every record the access's box meets, once each (k->stamp): *same is the one with the
** same geometry (-1: none), *ncovered counts the records a write covers. */
static bs_status meet(bs_sim *sim, const chk_where *w, const chk_geom *g, int rd, int wr,
                      const chk_ep *now, int32_t loc, int32_t *same, int32_t *ncovered,
                      bs_error *err)
{
    chk_space *sp = w->sp;
    uint32_t stamp = ++sim->chk->stamp;
    for (int32_t b = bucket_lo(sp, g); b <= bucket_hi(sp, g); b++)
        for (int32_t j = 0; j < sp->bk[b].n; j++) {
            chk_rec *R = &sp->recs[sp->bk[b].ids[j]];
            int eq, covered;
            if (R->stamp == stamp || !box_overlap(&R->g, g))
                continue;
            R->stamp = stamp;
            eq = geom_equal(&R->g, g);
            if (eq)
                *same = sp->bk[b].ids[j];
            BS_TRY(meet_record(sim, R, w, g, rd, wr, now, eq ? 1 : -1, loc, &covered, err));
            *ncovered += covered;
        }
    return BS_OK;
}

/* Unlink the records a write covered (R->dead) from every bucket; their slots go to the
** free list. */
static bs_status unlink_covered(chk_space *sp, const chk_geom *g, bs_error *err)
{
    for (int32_t b = bucket_lo(sp, g); b <= bucket_hi(sp, g); b++)
        for (int32_t j = 0; j < sp->bk[b].n; j++) {
            int32_t rid = sp->bk[b].ids[j];
            chk_rec *R = &sp->recs[rid];
            void *p = sp->free_ids;
            if (!R->dead)
                continue;
            for (int32_t b2 = bucket_lo(sp, &R->g); b2 <= bucket_hi(sp, &R->g); b2++)
                if (b2 != b)
                    bucket_del(&sp->bk[b2], rid);
            sp->bk[b].ids[j--] = sp->bk[b].ids[--sp->bk[b].n];
            R->dead = 0;
            R->live = 0;                    /* a free slot */
            if (bs_reserve(&p, &sp->free_cap, (size_t)(sp->nfree + 1) * sizeof(int32_t), 1))
                return bs_errorf(err, BS_E_NOMEM, "out of memory in the race checker");
            sp->free_ids = p;
            sp->free_ids[sp->nfree++] = rid;
            sp->live--;
        }
    return BS_OK;
}

/* A read of exactly R's geometry joins R's readers (full: one is forgotten). */
static void add_reader(chk_rec *R, const chk_ep *now)
{
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
}

/* A new record for the access (a free slot or a new one), linked into its buckets. */
static bs_status new_record(chk_space *sp, const chk_geom *g, int wr, const chk_ep *now,
                            int32_t wloc, bs_error *err)
{
    chk_rec *R;
    int32_t id;
    if (sp->nfree > 0) {
        id = sp->free_ids[--sp->nfree];
    } else {
        void *p = sp->recs;
        if (bs_reserve(&p, &sp->cap, (size_t)(sp->n + 1) * sizeof *sp->recs, 1))
            return bs_errorf(err, BS_E_NOMEM, "out of memory in the race checker");
        sp->recs = p;
        id = sp->n++;
    }
    R = &sp->recs[id];
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
    sp->live++;
    for (int32_t b = bucket_lo(sp, g); b <= bucket_hi(sp, g); b++)
        BS_TRY(bucket_add(&sp->bk[b], id, err));
    return BS_OK;
}

/* One access against the space's records: report what it races with (and the writes it
** makes dead), then record it -- a write replaces what it covers, a read of a known
** geometry joins that record's readers. */
static bs_status shadow(bs_sim *sim, const chk_where *w, const chk_geom *g, int rd, int wr,
                        const chk_ep *now, int32_t loc, int32_t wloc, bs_error *err)
{
    chk_space *sp = w->sp;
    int32_t same = -1, ncovered = 0;
    if (sp->bk == NULL)
        BS_TRY(space_init(sp, w, err));
    BS_TRY(meet(sim, w, g, rd, wr, now, loc, &same, &ncovered, err));
    if (ncovered) {
        BS_TRY(unlink_covered(sp, g, err));
        same = -1;
    }
    if (!wr && same >= 0) {
        add_reader(&sp->recs[same], now);
        return BS_OK;
    }
    if (!wr && sp->live >= CHK_MAX_RECS)
        return BS_OK;                            /* full: reads stop being recorded */
    return new_record(sp, g, wr, now, wloc, err);
}

bs_status bs_chk_shadow_access(bs_sim *sim, bs_core *c, int32_t insn, const chk_where *w,
                               const chk_geom *g, int rd, int wr, int32_t loc, int32_t wloc,
                               bs_error *err)
{
    bs_chk *k = sim->chk;
    chk_ep now;
    now.tid = (uint32_t)k->cur;
    now.clk = vc_of(k, k->cur)[k->cur];
    now.core = c->index;
    now.insn = insn;
    return shadow(sim, w, g, rd, wr, &now, loc, wloc, err);
}

bs_status bs_chk_unread_writes(bs_sim *sim, bs_error *err)
{
    bs_chk *k = sim->chk;
    const bs_program *p = sim->prog;
    for (int32_t s = 0; s < k->nspaces; s++)
        for (int32_t i = 0; i < k->spaces[s].n; i++) {
            const chk_rec *R = &k->spaces[s].recs[i];
            if (R->live && R->has_w && !R->wread && p->sets[p->locs[R->wloc].set].io != 2)
                BS_TRY(report_dead(sim, R, NULL, err));
        }
    return BS_OK;
}
