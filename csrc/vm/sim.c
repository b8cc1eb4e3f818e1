/* vm/sim.c -- bs_sim lifecycle, per-core memory placement and host data transfer
** (diagnostics and error locations: vm/diag.c; the trace: vm/trace.c): the entry points of
** birsim.h (the run loop is vm/sched.c, register access vm/regs.c). No global state:
** everything hangs off the bs_sim. */
#include <stdarg.h>
#include <stdio.h>
#include "vm.h"
#include "check.h"
#include "defer.h"

/* {=== Memory placement ===} */

/* An own buffer that a zero_copy run may hand over (TAKEN) is allocated as NumPy allocates
** its arrays: below BS_DENSE_MIN from the C heap, so that a warm loop of runs reuses what
** the last returned array freed (fresh mapped pages fault in again on every run: a 1 MiB
** output took ~20x its run's DMA); from BS_DENSE_MIN on, mapped and asked for huge pages.
** Every other own buffer is bs_pages_alloc's (zero pages, resident only where touched). */
uint8_t *bs_sim_own_alloc(bs_sim *sim, int32_t l, size_t size)
{
    uint8_t *buf;
    if (sim->zc == NULL || !(sim->zc[l] & BS_ZC_TAKEN))
        return bs_pages_alloc(2 * size);
    if (size < BS_DENSE_MIN) {
        if ((buf = bs_calloc(2 * size, 1)) != NULL)
            sim->zc[l] |= BS_ZC_HEAP;
        return buf;
    }
    buf = bs_pages_alloc(2 * size);
    bs_pages_dense(buf, size);
    return buf;
}

void bs_sim_own_free(bs_sim *sim, int32_t l, uint8_t *buf)
{
    if (buf != NULL && sim->zc != NULL && (sim->zc[l] & BS_ZC_HEAP)) {
        sim->zc[l] &= (uint8_t)~BS_ZC_HEAP;
        bs_free(buf);
    } else
        bs_pages_free(buf, bs_loc_buffer_bytes(sim->prog, l));
}

static void core_free_memory(bs_sim *sim, bs_core *c)
{
    size_t sb = (size_t)sim->arch->sbuf_parts * (size_t)sim->arch->sbuf_bpp;
    size_t ps = (size_t)sim->arch->psum_parts * (size_t)sim->arch->psum_bpp;
    bs_pages_free(c->sbuf, 2 * (sb + ps));          /* with its shadow and PSUM's (core_reset) */
    bs_pages_free(c->dram, 2 * (size_t)c->dram_size);
    c->sbuf = c->sbuf_sh = c->psum = c->psum_sh = c->dram = NULL;
    c->placed_once = 0;
    if (c->priv)
        for (int32_t l = 0; l < sim->prog->n_locs; l++) {
            bs_sim_own_free(sim, l, c->priv[l]);
            c->priv[l] = NULL;
            if (c->pchunks)
                bs_sim_chunks_fini(&c->pchunks[l]);
            if (c->pstate)
                c->pstate[l] = BS_SH_PLAIN;
        }
}

/* Locations of at least this many bytes have their shadow cleared at a reset page by page,
** only where a byte is set: bs_pages_alloc maps zero pages, so a never-used tensor costs no
** resident memory
** and scanning it reads the one shared zero page (fast); clearing it whole would make every
** page resident, so a tensor of which a run wrote 128 bytes would cost its whole size from
** the next run on. A tensor a run wrote keeps its pages (re-allocating it would cost a page
** fault per 4 KB on the next run: 20x a memset). */
#define BS_LAZY_BYTES ((size_t)32 << 20)
#define BS_CLEAR_CHUNK ((size_t)4096)

static int any_set(const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8], acc = 0;
        memcpy(w, p + i, sizeof w);
        for (int j = 0; j < 8; j++)
            acc |= w[j];
        if (acc)
            return 1;
    }
    for (; i < n; i++)
        if (p[i])
            return 1;
    return 0;
}

/* Zero the chunks of shadow sh[0, n) that hold a set byte; untouched (zero) pages stay
** untouched. With data (uninitialized="zero"), the same chunks of data[0, n) too: only
** written bytes can be non-zero there. */
static void clear_set(uint8_t *sh, uint8_t *data, size_t n)
{
    for (size_t i = 0; i < n; i += BS_CLEAR_CHUNK) {
        size_t k = n - i < BS_CLEAR_CHUNK ? n - i : BS_CLEAR_CHUNK;
        if (any_set(sh + i, k)) {
            memset(sh + i, 0, k);
            if (data != NULL)
                memset(data + i, 0, k);
        }
    }
}

/* uninitialized="zero": a reset makes never-written bytes read as 0 again, so the data an
** earlier run wrote is cleared with the shadow that marked it (uninitialized="nan" fills
** every location at a reset instead: check.c poison). */
static int zero_data(const bs_sim *sim)
{
    return sim->opts.uninit == BS_UNINIT_zero;
}

/* Mark the reused own buffer buf (size data bytes, then its shadow) never written again
** (the BS_SH_* states: vm.h). */
static void reset_buffer(bs_sim *sim, uint8_t *buf, uint8_t *state, size_t size, bs_chunks *ch)
{
    if (ch->on) {                     /* ZERO or PLAIN: the summary knows what was written */
        bs_chunks_clear(ch, zero_data(sim) ? buf : NULL);
        *state = BS_SH_ZERO;
    } else if (*state == BS_SH_LAZY)                /* its shadow was never touched */
        *state = zero_data(sim) ? BS_SH_LAZY_STALE : BS_SH_ZERO;
    else if (*state == BS_SH_ONES || *state == BS_SH_STALE)
        *state = BS_SH_STALE;                       /* all ones until needed */
    else if (*state == BS_SH_PLAIN) {
        if (size >= BS_LAZY_BYTES) {
            clear_set(buf + size, zero_data(sim) ? buf : NULL, size);
        } else {
            memset(buf + size, 0, size);            /* unwritten again */
            if (zero_data(sim))
                memset(buf, 0, size);
        }
        *state = BS_SH_ZERO;
    }                                               /* ZERO, LAZY_STALE: nothing since */
    if (ch->state != NULL && *state == BS_SH_ZERO && !ch->on) {
        memset(ch->state, 0, (size_t)((ch->size - 1) / BS_SH_CHUNK + 1));   /* all bytes 0 */
        ch->on = 1;
    }
    sim->stale = 1;
}

static bs_status place(bs_sim *sim, bs_core *c, int32_t l, int fresh, bs_error *err)
{
    const bs_loc *loc = &sim->prog->locs[l];
    const bs_set *set = &sim->prog->sets[loc->set];
    bs_store *st = &c->stores[l];
    size_t size = (size_t)loc->parts * (size_t)loc->bpp;
    st->parts = loc->parts;
    st->bpp = loc->bpp;
    st->memtype = loc->memtype;
    st->loc = l;
    st->cast = sim->opts.fp8_overflow;
    st->chunks = NULL;
    if (sim->prog->module->nentries > 1 && sim->prog->funcs[set->func].prog != c->prog &&
        !(set->shared && loc->memtype == BS_MEM_DRAM)) {
        st->data = st->shadow = NULL;  /* another core's program: no storage on this core */
        st->parts = st->bpp = st->pitch = 0;
        return BS_OK;
    }
    if (bs_storage_loc(sim->prog, l) != l) {  /* a must-alias output: core_reset points it */
        st->data = st->shadow = NULL;         /* at its input's bytes */
        st->pitch = loc->bpp;
        return BS_OK;
    }
    if (loc->placed && loc->memtype == BS_MEM_DRAM) {     /* in a DRAM arena at addr */
        int all = loc->placed == 2;
        uint8_t *arena = all ? sim->dram_all : c->dram;
        int64_t arena_bytes = all ? sim->dram_all_size : c->dram_size;
        if (arena == NULL || loc->addr < 0 || (int64_t)size > arena_bytes - loc->addr)
            return bs_errorf(err, BS_E_PROGRAM, "location '%s' (%zu bytes at %lld) does not "
                             "lie inside core %d's %s DRAM arena (%lld bytes)",
                             bs_str(sim->prog, loc->name), size, (long long)loc->addr,
                             c->index, all ? "all-cores" : "per-core", (long long)arena_bytes);
        st->pitch = loc->bpp;
        st->data = arena + loc->addr;
        st->shadow = arena + arena_bytes + loc->addr;
        if (!fresh && !all) {          /* the all-cores arena is cleared by bs_sim_reset */
            memset(st->shadow, 0, size);
            if (zero_data(sim))
                memset(st->data, 0, size);
        }
        return BS_OK;
    }
    if (loc->placed) {
        int sb = loc->memtype == BS_MEM_SB;
        st->pitch = sb ? sim->arch->sbuf_bpp : sim->arch->psum_bpp;
        st->data = (sb ? c->sbuf : c->psum) + loc->base * st->pitch + loc->addr;
        st->shadow = (sb ? c->sbuf_sh : c->psum_sh) + loc->base * st->pitch + loc->addr;
        if (!fresh)                    /* unwritten again: only the rows it occupies */
            for (int64_t r = 0; r < loc->parts; r++) {
                memset(st->shadow + r * st->pitch, 0, (size_t)loc->bpp);
                if (zero_data(sim))
                    memset(st->data + r * st->pitch, 0, (size_t)loc->bpp);
            }
        return BS_OK;
    }
    st->pitch = loc->bpp;
    if (bs_loc_one_buffer(sim->prog, loc) && sim->shared[l] != NULL) {
        st->data = sim->shared[l];
        st->shadow = sim->shared[l] + size;
        st->chunks = sim->schunks[l].on ? &sim->schunks[l] : NULL;
        return BS_OK;
    }
    if (c->priv[l] != NULL) {
        reset_buffer(sim, c->priv[l], &c->pstate[l], size, &c->pchunks[l]);
    } else {
        c->priv[l] = bs_sim_own_alloc(sim, l, size);
        if (c->priv[l] == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory allocating location '%s' (%zu bytes)",
                             bs_str(sim->prog, loc->name), size);
        c->pstate[l] = BS_SH_ZERO;                   /* fresh zero pages */
        bs_sim_chunks_init(sim, &c->pchunks[l], c->priv[l], size);
        sim->stale = 1;
    }
    st->data = c->priv[l];
    st->shadow = c->priv[l] + size;
    st->chunks = c->pchunks[l].on ? &c->pchunks[l] : NULL;
    return BS_OK;
}

/* Bytes the DRAM arena must hold: the end of its last location (placement `placed`; for
** the per-core arena only program `prog`'s locations). */
static int64_t arena_size(const bs_program *p, int32_t placed, int32_t prog)
{
    int64_t end = 0;
    for (int32_t l = 0; l < p->n_locs; l++) {
        const bs_loc *loc = &p->locs[l];
        if (loc->memtype != BS_MEM_DRAM || loc->placed != placed ||
            (placed == 1 && p->module->nentries > 1 && p->funcs[p->sets[loc->set].func].prog != prog))
            continue;
        if (loc->addr + loc->parts * loc->bpp > end)
            end = loc->addr + loc->parts * loc->bpp;
    }
    return end;
}

/* Whether any location of p is placed in SBUF or PSUM (at a fixed base and address). */
static int on_chip_placed(const bs_program *p)
{
    for (int32_t l = 0; l < p->n_locs; l++)
        if (p->locs[l].placed && p->locs[l].memtype != BS_MEM_DRAM)
            return 1;
    return 0;
}

/* Buffers are allocated on the first run and reused: a reset only marks memory
** unwritten again (clearing the shadow rows each location occupies), so repeated runs
** pay neither for fresh pages nor for clearing all of SBUF. Bytes only an overlapping
** access pattern reached outside every location are never read (bounds are checked
** against locations), so they need no clearing. */
static bs_status core_reset(bs_sim *sim, bs_core *c, bs_error *err)
{
    const bs_program *p = sim->prog;
    size_t sb = (size_t)sim->arch->sbuf_parts * (size_t)sim->arch->sbuf_bpp;
    size_t ps = (size_t)sim->arch->psum_parts * (size_t)sim->arch->psum_bpp;
    int fresh = !c->placed_once;
    if (fresh) {
        /* One mapping of zero pages (only touched ones cost memory): SBUF, its shadow,
        ** PSUM, its shadow; only for a program with a location placed there (the only
        ** readers of these pointers: place() and hb.c's windows of such a location).
        ** A program without one (a DRAM-only kernel) skips a 2 x 30 MiB mmap/munmap
        ** pair, ~4 us of a one-instruction pipeline. */
        if (on_chip_placed(p)) {
            c->sbuf = bs_pages_alloc(2 * (sb + ps));
            if (c->sbuf == NULL)
                return bs_errorf(err, BS_E_NOMEM, "out of memory allocating SBUF/PSUM");
            c->sbuf_sh = c->sbuf + sb;
            c->psum = c->sbuf_sh + sb;
            c->psum_sh = c->psum + ps;
        }
        c->placed_once = 1;
        c->dram_size = arena_size(p, 1, c->prog);
        if (c->dram_size && (c->dram = bs_pages_alloc(2 * (size_t)c->dram_size)) == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory allocating the DRAM arena "
                             "(%lld bytes)", (long long)c->dram_size);
    }
    memset(c->complete, 0, (size_t)p->n_locs);
    memset(c->touched, 0, (size_t)p->n_locs * sizeof *c->touched);
    for (int32_t l = 0; l < p->n_locs; l++)
        BS_TRY(place(sim, c, l, fresh, err));
    for (int32_t l = 0; l < p->n_locs; l++) {       /* a must-alias output: its input's bytes */
        const bs_store *in = &c->stores[bs_storage_loc(p, l)];
        if (in->loc != l) {
            c->stores[l].data = in->data;
            c->stores[l].shadow = in->shadow;
            c->stores[l].chunks = in->chunks;
            c->stores[l].pitch = in->pitch;
        }
    }
    for (int32_t r = 0; r < p->n_regs; r++)
        for (int s = 0; s < BS_REG_SLOTS; s++)
            c->regs[(size_t)r * BS_REG_SLOTS + (size_t)s] = p->regs[r].wide ? UINT64_MAX : 0xFFFFFFFFu;
    bs_regchk_reset(sim, c);
    for (int q = 0; q < BS_NUM_ENGINES; q++)
        c->last_done[q] = -1;
    c->last_any = -1;
    c->rslot = 0;
    c->where = c->where_block = -1;
    memset(c->sem, 0, sizeof c->sem);
    memset(c->evt, 0, sizeof c->evt);
    c->nevt = 0;
    memset(c->ks.pool_acc, 0, sizeof c->ks.pool_acc);
    memset(c->ks.act_acc, 0, sizeof c->ks.act_acc);
    memset(c->ks.dve_acc, 0, sizeof c->ks.dve_acc);
    memset(c->ks.acc_mark, 0, sizeof c->ks.acc_mark);
    c->ks.rng->ready = 0;                  /* reseeded on first use (kernels/rng.h) */
    c->ks.rng->seed = sim->opts.rng_seed;
    c->coll_done = -1;
    if (p->module->naxes) {
        memset(c->env, 0, (size_t)p->module->naxes * sizeof *c->env);
        memset(c->live, 0, (size_t)p->module->naxes);
    }
    if (p->module->ntriggers)
        memset(c->cursor, 0, (size_t)p->module->ntriggers * sizeof *c->cursor);
    c->nframes = 0;
    c->nbinds = 0;
    c->call_depth = 0;
    c->done = 0;
    c->last_engine = BS_Q_RDV;
    return bs_core_start(sim, c, err);
}

bs_status bs_sim_reset(bs_sim *sim, bs_error *err)
{
    const bs_program *p = sim->prog;
    bs_status st;
    bs_sim_unlend(sim);                 /* no caller's buffer outlives its run */
    if (sim->pristine)
        return BS_OK;
    for (int32_t l = 0; l < p->n_locs; l++) {
        const bs_loc *loc = &p->locs[l];
        size_t size = (size_t)loc->parts * (size_t)loc->bpp;
        if (!bs_loc_one_buffer(p, loc))
            continue;
        if (sim->shared[l] != NULL) {
            reset_buffer(sim, sim->shared[l], &sim->sstate[l], size, &sim->schunks[l]);
            continue;
        }
        sim->shared[l] = bs_sim_own_alloc(sim, l, size);
        if (sim->shared[l] == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory allocating '%s'",
                             bs_str(p, loc->name));
        sim->sstate[l] = BS_SH_ZERO;                  /* fresh zero pages */
        bs_sim_chunks_init(sim, &sim->schunks[l], sim->shared[l], size);
        sim->stale = 1;
    }
    if (sim->dram_all == NULL) {
        sim->dram_all_size = arena_size(p, 2, 0);
        if (sim->dram_all_size && (sim->dram_all = bs_pages_alloc(2 * (size_t)sim->dram_all_size)) == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory allocating the shared DRAM arena "
                             "(%lld bytes)", (long long)sim->dram_all_size);
    } else {
        memset(sim->dram_all + sim->dram_all_size, 0, (size_t)sim->dram_all_size);
        if (zero_data(sim))
            memset(sim->dram_all, 0, (size_t)sim->dram_all_size);
    }
    bs_sim_clear_diags(sim);
    memset(sim->op_counts, 0, sizeof sim->op_counts);
    memset(sim->engine_counts, 0, sizeof sim->engine_counts);
    memset(sim->warned, 0, (size_t)p->n_insns);
    sim->ntrace = sim->trace_dropped = 0;
    if (sim->tm != NULL)
        bs_tm_reset(sim);
    sim->plog_len = 0;
    sim->plog_dropped = 0;
    sim->steps = 0;
    sim->exited = 0;
    sim->finished = 0;
    sim->last_core = 0;
    sim->stop_insn = sim->stop_core = -1;
    sim->rng = sim->opts.seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (sim->rng == 0)
        sim->rng = 1;
    for (int32_t k = 0; k < sim->ncores; k++)
        BS_TRY(core_reset(sim, &sim->cores[k], err));
    bs_defer_reset(sim);
    bs_xp_reset(sim);
    st = sim->chk ? bs_chk_reset(sim, err) : BS_OK;
    sim->pristine = st == BS_OK;
    return st;
}

/* {=== Lifecycle ===} */

static void core_fini(bs_sim *sim, bs_core *c)
{
    core_free_memory(sim, c);
    bs_free(c->priv);
    bs_free(c->pstate);
    bs_free(c->pchunks);
    bs_free(c->regs);
    bs_regchk_free(c);
    bs_free(c->env);
    bs_free(c->live);
    bs_free(c->cursor);
    bs_free(c->stores);
    bs_free(c->complete);
    bs_free(c->touched);
    bs_free(c->binds);
    for (int i = 0; i < BS_KMAX * 2; i++)
        bs_free(c->gather[i]);
    bs_kstate_fini(&c->ks);
    bs_free(c->ks.rng);
}

void bs_sim_free(bs_sim *sim)
{
    if (sim == NULL)
        return;
    bs_pool_ref_fini(&sim->pool);                  /* joins the workers */
    bs_chk_free(sim);
    bs_defer_free(sim);
    bs_xp_free(sim);
    if (sim->cores)
        for (int32_t k = 0; k < sim->ncores; k++)
            core_fini(sim, &sim->cores[k]);
    bs_free(sim->cores);
    bs_exec_vcache_free(sim);
    if (sim->shared)
        for (int32_t l = 0; l < sim->prog->n_locs; l++)
            bs_sim_own_free(sim, l, sim->shared[l]);
    if (sim->schunks)
        for (int32_t l = 0; l < sim->prog->n_locs; l++)
            bs_sim_chunks_fini(&sim->schunks[l]);
    bs_free(sim->schunks);
    bs_free(sim->shared);
    bs_free(sim->sstate);
    bs_free(sim->zc);
    bs_pages_free(sim->dram_all, 2 * (size_t)sim->dram_all_size);
    bs_sim_clear_diags(sim);
    bs_free(sim->diags);
    bs_free(sim->notes);
    bs_free(sim->warned);
    bs_free(sim->breaks);
    bs_free(sim->trace);
    bs_free(sim->trace_t);
    bs_tm_free(sim->tm);
    bs_free(sim->tm_skip);
    bs_free(sim->coll_buf);
    bs_free(sim->plog);
    bs_free(sim);
}

static bs_status core_init(bs_sim *sim, bs_core *c, int32_t index, bs_error *err)
{
    const bs_program *p = sim->prog;
    c->index = index;
    c->prog = p->module->nentries > 1 ? index : 0;
    c->regs = bs_calloc((size_t)p->n_regs * BS_REG_SLOTS, sizeof *c->regs);
    c->env = bs_calloc((size_t)p->module->naxes, sizeof *c->env);
    c->live = bs_calloc((size_t)p->module->naxes, 1);
    c->cursor = bs_calloc((size_t)p->module->ntriggers, sizeof *c->cursor);
    c->stores = bs_calloc((size_t)p->n_locs, sizeof *c->stores);
    c->priv = bs_calloc((size_t)p->n_locs, sizeof *c->priv);
    c->pstate = bs_calloc((size_t)p->n_locs, 1);
    c->pchunks = bs_calloc((size_t)p->n_locs, sizeof *c->pchunks);
    c->complete = bs_calloc((size_t)p->n_locs, 1);
    c->touched = bs_calloc((size_t)p->n_locs, sizeof *c->touched);
    c->ks.rng = bs_calloc(1, sizeof *c->ks.rng);
    c->ks.pool = &sim->pool;
    if (!c->regs || !c->env || !c->live || !c->cursor || !c->stores || !c->priv || !c->pstate
        || !c->pchunks || !c->complete || !c->touched
        || !c->ks.rng)
        return bs_errorf(err, BS_E_NOMEM, "out of memory creating core %d", index);
    return bs_regchk_new(sim, c, err);
}

bs_status bs_sim_new(bs_sim **out, const bs_program *prog, const bs_sim_opts *opts,
                     bs_error *err)
{
    bs_sim *sim = bs_calloc(1, sizeof *sim);
    bs_status st = BS_OK;
    if (sim == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory");
    sim->prog = prog;
    sim->opts = *opts;
    sim->ncores = opts->ncores;
    sim->max_steps = opts->max_steps > 0 ? opts->max_steps : INT64_C(1000000000);
    sim->arch = bs_arch_find(prog->module->arch);
    if (opts->ncores < 1 || opts->ncores > BS_MAX_CORES) {
        st = bs_errorf(err, BS_E_INPUT, "cores must be between 1 and %d, got %d", BS_MAX_CORES,
                       opts->ncores);
        goto fail;
    }
    if (prog->module->nentries > 1 && opts->ncores != prog->module->nentries) {
        st = bs_errorf(err, BS_E_INPUT, "the program holds one program per core for %d cores; "
                       "cores must be %d, got %d", prog->module->nentries,
                       prog->module->nentries, opts->ncores);
        goto fail;
    }
    sim->pool.threads = opts->threads > 1 ? opts->threads : 1;
    if (opts->threads < 0 || opts->threads > BS_POOL_MAX) {
        st = bs_errorf(err, BS_E_INPUT, "threads must be between 1 and %d, got %d", BS_POOL_MAX,
                       (int)opts->threads);
        goto fail;
    }
    if (opts->schedule < 0 || opts->schedule > BS_SCHED_pct) {
        st = bs_errorf(err, BS_E_INPUT, "bad schedule %d", opts->schedule);
        goto fail;
    }
    if (opts->fp8_overflow < BS_FP8OVF_saturate || opts->fp8_overflow > BS_FP8OVF_inf) {
        st = bs_errorf(err, BS_E_INPUT, "bad fp8_overflow %d", opts->fp8_overflow);
        goto fail;
    }
    sim->cores = bs_calloc((size_t)sim->ncores, sizeof *sim->cores);
    sim->shared = bs_calloc((size_t)prog->n_locs, sizeof *sim->shared);
    sim->sstate = bs_calloc((size_t)prog->n_locs, 1);
    sim->schunks = bs_calloc((size_t)prog->n_locs, sizeof *sim->schunks);
    sim->warned = bs_calloc((size_t)prog->n_insns, 1);
    if (!sim->cores || !sim->shared || !sim->sstate || !sim->schunks || !sim->warned) {
        st = bs_errorf(err, BS_E_NOMEM, "out of memory");
        goto fail;
    }
    for (int32_t k = 0; k < sim->ncores; k++) {
        st = core_init(sim, &sim->cores[k], k, err);
        if (st != BS_OK)
            goto fail;
    }
    if (opts->timing < BS_TIMING_off || opts->timing > BS_TIMING_compiler) {
        st = bs_errorf(err, BS_E_INPUT, "bad timing %d", opts->timing);
        goto fail;
    }
    st = bs_chk_new(sim, err);
    if (st == BS_OK)
        st = bs_defer_new(sim, err);
    if (st == BS_OK && (opts->timing != BS_TIMING_off || opts->trace))
        st = bs_tm_new(sim, err);
    if (st == BS_OK)
        st = bs_xp_new(sim, err);
    sim->chunks_ok = st == BS_OK && bs_sim_chunks_allowed(sim);
    if (st == BS_OK)
        st = bs_sim_reset(sim, err);
    if (st != BS_OK)
        goto fail;
    *out = sim;
    return BS_OK;
fail:
    bs_sim_free(sim);
    return st;
}

void bs_sim_set_host(bs_sim *sim, bs_host_kernel_fn *fn, void *ctx)
{
    sim->host = fn;
    sim->host_ctx = ctx;
}

/* {=== Host data transfer ===} */

bs_status bs_sim_check_rows(const bs_sim *sim, int32_t core, int32_t loc, int64_t rows,
                            int64_t rowbytes, bs_error *err)
{
    const bs_loc *l;
    if (loc < 0 || loc >= sim->prog->n_locs || core < -1 || core >= sim->ncores)
        return bs_errorf(err, BS_E_INPUT, "bad location or core");
    l = &sim->prog->locs[loc];
    if (rows < 0 || rowbytes < 0 || rows > l->parts || rowbytes > l->bpp)
        return bs_errorf(err, BS_E_INPUT, "%lld rows of %lld bytes do not fit location '%s' "
                         "(%lld partitions x %lld bytes)", (long long)rows, (long long)rowbytes,
                         bs_str(sim->prog, l->name), (long long)l->parts, (long long)l->bpp);
    return BS_OK;
}

/* The BS_SH_* state of the buffer core k's location l lives in, or NULL when it lives in
** an arena (SBUF, PSUM, placed DRAM) or not on core k. */
static uint8_t *buf_state(bs_sim *sim, int32_t k, int32_t l)
{
    const bs_store *st;
    l = bs_storage_loc(sim->prog, l);           /* a must-alias output: its input's buffer */
    st = &sim->cores[k].stores[l];
    if (sim->prog->locs[l].placed || st->data == NULL)
        return NULL;
    if (sim->shared[l] != NULL && st->data == sim->shared[l])
        return &sim->sstate[l];
    if (sim->cores[k].priv[l] != NULL && st->data == sim->cores[k].priv[l])
        return &sim->cores[k].pstate[l];
    return NULL;
}

/* Make the shadow bytes of core k's location l's buffer the truth (PLAIN) unless they
** are (ONES) or stand for all ones (LAZY). */
static void clear_stale(bs_sim *sim, int32_t k, int32_t l)
{
    const bs_store *st = &sim->cores[k].stores[bs_storage_loc(sim->prog, l)];
    uint8_t *state = buf_state(sim, k, l);
    if (state == NULL || *state == BS_SH_PLAIN || *state == BS_SH_ONES || *state == BS_SH_LAZY)
        return;
    if (*state == BS_SH_STALE)
        memset(st->shadow, 0, (size_t)(st->parts * st->bpp));
    if (*state != BS_SH_ZERO && zero_data(sim))  /* the last run's input, not written again */
        memset(st->data, 0, (size_t)(st->parts * st->bpp));
    *state = BS_SH_PLAIN;
}

/* A whole-location host write into core k's location l's ZERO (or LAZY_STALE) buffer:
** leave its shadow untouched, every store on it without a shadow (vm.h, BS_SH_LAZY). */
static void go_lazy(bs_sim *sim, int32_t k, int32_t l, uint8_t *state)
{
    int32_t s = bs_storage_loc(sim->prog, l);
    const uint8_t *buf = sim->cores[k].stores[s].data;
    for (int32_t j = 0; j < sim->ncores; j++)
        if (sim->cores[j].stores[s].data == buf) {   /* a shared buffer: every core's store */
            sim->cores[j].stores[s].shadow = NULL;
            sim->cores[j].complete[s] = 1;
        }
    *state = BS_SH_LAZY;
    sim->stale = 1;                    /* must-alias outputs follow (bs_sim_flush_stale) */
}

void bs_sim_flush_stale(bs_sim *sim)
{
    const bs_program *p = sim->prog;
    if (!sim->stale)
        return;
    for (int32_t k = 0; k < sim->ncores; k++)
        for (int32_t l = 0; l < p->n_locs; l++) {
            bs_store *st = &sim->cores[k].stores[l];
            const bs_store *in = &sim->cores[k].stores[bs_storage_loc(p, l)];
            clear_stale(sim, k, l);
            if (in != st && in->shadow == NULL && st->data == in->data)
                st->shadow = NULL;     /* a must-alias output of a LAZY input */
        }
    sim->stale = 0;
}

/* Rows that are adjacent in the store (rowbytes == pitch) move as one block. */
bs_status bs_sim_write_loc(bs_sim *sim, int32_t core, int32_t loc, const void *data,
                           int64_t rows, int64_t rowbytes, bs_error *err)
{
    BS_TRY(bs_sim_check_rows(sim, core, loc, rows, rowbytes, err));
    if (sim->nlent > 0 && (sim->zc[loc] & BS_ZC_LENT))
        return bs_errorf(err, BS_E_INPUT, "location '%s' is read in place from the caller's "
                         "array this run (zero_copy): it cannot be written",
                         bs_str(sim->prog, sim->prog->locs[loc].name));
    sim->pristine = 0;
    for (int32_t k = 0; k < sim->ncores; k++)      /* host writes set shadow bytes */
        bs_sim_chunks_off(sim, sim->cores[k].stores[loc].chunks);
    for (int32_t k = 0; k < sim->ncores; k++) {
        const bs_store *st;
        uint8_t *state;
        int whole;
        if (core >= 0 && k != core)
            continue;
        st = &sim->cores[k].stores[loc];
        if (st->data == NULL) {
            if (core < 0)
                continue;
            return bs_errorf(err, BS_E_INPUT, "location '%s' is not in core %d's program",
                             bs_str(sim->prog, sim->prog->locs[loc].name), k);
        }
        whole = rows == st->parts && rowbytes == st->bpp;
        state = buf_state(sim, k, loc);
        if (state != NULL && whole && rowbytes == st->pitch &&
            (*state == BS_SH_ZERO || *state == BS_SH_LAZY_STALE || *state == BS_SH_LAZY)) {
            memcpy(st->data, data, (size_t)(rows * rowbytes));
            go_lazy(sim, k, loc, state);
        } else if (state != NULL && *state == BS_SH_LAZY) {  /* already all written */
            for (int64_t r = 0; r < rows; r++)
                memcpy(st->data + r * st->pitch, (const uint8_t *)data + r * rowbytes,
                       (size_t)rowbytes);
        } else if (state != NULL && *state != BS_SH_PLAIN && *state != BS_SH_ONES && !whole) {
            clear_stale(sim, k, loc);
        }
        if (state != NULL && *state == BS_SH_LAZY) {
            /* done: no shadow to mark */
        } else if (rowbytes == st->pitch) {
            memcpy(st->data, data, (size_t)(rows * rowbytes));
            if (state == NULL || *state == BS_SH_PLAIN)
                memset(st->shadow, 1, (size_t)(rows * rowbytes));
        } else {
            for (int64_t r = 0; r < rows; r++) {
                memcpy(st->data + r * st->pitch, (const uint8_t *)data + r * rowbytes,
                       (size_t)rowbytes);
                memset(st->shadow + r * st->pitch, 1, (size_t)rowbytes);
            }
        }
        if (whole) {
            sim->cores[k].complete[st->loc] = 1;
            if (state != NULL && *state != BS_SH_LAZY)
                *state = BS_SH_ONES;
        }
        if (sim->shared[bs_storage_loc(sim->prog, loc)] ||
            sim->prog->locs[bs_storage_loc(sim->prog, loc)].placed == 2)
            break;                     /* one buffer for all cores */
    }
    return BS_OK;
}

/* A location marked complete needs no shadow scan for *all_written. */
bs_status bs_sim_read_loc(bs_sim *sim, int32_t core, int32_t loc, void *data,
                          int64_t rows, int64_t rowbytes, int *all_written, bs_error *err)
{
    const bs_core *c;
    const bs_store *st;
    int scan, ok = 1;
    BS_TRY(bs_sim_check_rows(sim, core < 0 ? 0 : core, loc, rows, rowbytes, err));
    bs_sim_flush_stale(sim);
    bs_sim_zc_clean(sim, loc);
    c = &sim->cores[core < 0 ? 0 : core];
    st = &c->stores[loc];
    if (st->data == NULL)
        return bs_errorf(err, BS_E_INPUT, "location '%s' is not in core %d's program",
                         bs_str(sim->prog, sim->prog->locs[loc].name), core < 0 ? 0 : core);
    scan = all_written != NULL && !c->complete[st->loc] && st->shadow != NULL;
    if (scan && st->chunks != NULL) {               /* whole chunks from the summary */
        for (int64_t r = 0; r < rows && ok; r++)
            ok = bs_chunks_written(st->chunks, r * st->pitch, r * st->pitch + rowbytes);
        scan = 0;
    }
    if (rowbytes == st->pitch) {
        memcpy(data, st->data, (size_t)(rows * rowbytes));
        if (scan && rows * rowbytes > 0 && memchr(st->shadow, 0, (size_t)(rows * rowbytes)))
            ok = 0;
    } else {
        for (int64_t r = 0; r < rows; r++) {
            memcpy((uint8_t *)data + r * rowbytes, st->data + r * st->pitch, (size_t)rowbytes);
            if (scan && ok && rowbytes && memchr(st->shadow + r * st->pitch, 0, (size_t)rowbytes))
                ok = 0;
        }
    }
    if (all_written)
        *all_written = ok;
    return BS_OK;
}

bs_status bs_sim_read_written(bs_sim *sim, int32_t core, int32_t loc, uint8_t *mask,
                              int64_t rows, int64_t rowbytes, bs_error *err)
{
    const bs_core *c;
    const bs_store *st;
    BS_TRY(bs_sim_check_rows(sim, core < 0 ? 0 : core, loc, rows, rowbytes, err));
    bs_sim_flush_stale(sim);
    c = &sim->cores[core < 0 ? 0 : core];
    st = &c->stores[loc];
    if (st->data == NULL)
        return bs_errorf(err, BS_E_INPUT, "location '%s' is not in core %d's program",
                         bs_str(sim->prog, sim->prog->locs[loc].name), core < 0 ? 0 : core);
    bs_sim_chunks_off(sim, st->chunks);             /* the bytes, for the mask */
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *sh;
        uint8_t *m = mask + r * rowbytes;
        if (c->complete[st->loc] || st->shadow == NULL) {   /* or LAZY (vm.h) */
            memset(m, 1, (size_t)rowbytes);
            continue;
        }
        sh = st->shadow + r * st->pitch;
        for (int64_t i = 0; i < rowbytes; i++)
            m[i] = sh[i] != 0;
    }
    return BS_OK;
}

int bs_sim_exited(const bs_sim *sim) { return sim->exited; }
int64_t bs_sim_steps(const bs_sim *sim) { return sim->steps; }
const int64_t *bs_sim_op_counts(const bs_sim *sim) { return sim->op_counts; }
const int64_t *bs_sim_engine_counts(const bs_sim *sim) { return sim->engine_counts; }
int32_t bs_sim_ncores(const bs_sim *sim) { return sim->ncores; }
