/* vm/defer.c -- Simulator(dma_mode="deferred"): a DMA transfers as late as its
** completion can be observed (the reading of Pallas's dma_execution_mode).
**
** A DMA-engine transfer instruction (Load, Save, DMACopy, DMADescriptor*) and a fired
** DMA block are not executed when they run: they leave their queue at once, and their
** transfer and their updates wait on a per-core pending list, in issue order. The list
** is flushed up to a pending DMA when an instruction at the head of a queue of any core
** waits on a semaphore or event that DMA updates; all of a frame's pending DMAs are
** flushed when its block ends; a rendezvous instruction (which joins the engines, the
** DMA engine included) first lets the DMA engine's transfers land, not the DMA queues';
** everything is flushed when nothing else can run. So
** code that reads a DMA's destination without waiting for it reads what was there
** before. Addresses (offsets, registers) are evaluated when the transfer happens. */
#include "vm.h"
#include "check.h"
#include "defer.h"

typedef struct defer_item {
    int32_t insn;        /* the DMA instruction, or the DMATrigger of a block */
    int32_t blk;         /* fired DMA block, -1 for an instruction */
    int32_t frame;       /* frame index that issued it */
    int32_t rslot;       /* register slot it reads */
} defer_item;

typedef struct defer_list {
    defer_item *items;
    int32_t     n;
    size_t      cap;     /* bytes */
} defer_list;

struct bs_defer {
    defer_list *cores;   /* ncores */
};

bs_status bs_defer_new(bs_sim *sim, bs_error *err)
{
    if (sim->opts.dma_mode != BS_DMAMODE_deferred)
        return BS_OK;
    sim->defer = bs_calloc(1, sizeof *sim->defer);
    if (sim->defer == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory");
    sim->defer->cores = bs_calloc((size_t)sim->ncores, sizeof *sim->defer->cores);
    if (sim->defer->cores == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory");
    return BS_OK;
}

void bs_defer_free(bs_sim *sim)
{
    if (sim->defer == NULL)
        return;
    if (sim->defer->cores)
        for (int32_t k = 0; k < sim->ncores; k++)
            bs_free(sim->defer->cores[k].items);
    bs_free(sim->defer->cores);
    bs_free(sim->defer);
    sim->defer = NULL;
}

void bs_defer_reset(bs_sim *sim)
{
    if (sim->defer)
        for (int32_t k = 0; k < sim->ncores; k++)
            sim->defer->cores[k].n = 0;
}

static int is_transfer(int32_t op)
{
    return op == BS_OP_Load || op == BS_OP_Save || op == BS_OP_DMACopy ||
           op == BS_OP_DMADescriptorCopy || op == BS_OP_DMADescriptorTranspose ||
           op == BS_OP_DMADescriptorReplicate || op == BS_OP_DMADescriptorCCE;
}

static bs_status push(bs_sim *sim, bs_core *c, int32_t insn, int32_t blk, bs_error *err)
{
    defer_list *l = &sim->defer->cores[c->index];
    void *p = l->items;
    if (bs_reserve(&p, &l->cap, (size_t)(l->n + 1) * sizeof *l->items, 1))
        return bs_errorf(err, BS_E_NOMEM, "out of memory deferring a DMA");
    l->items = p;
    l->items[l->n].insn = insn;
    l->items[l->n].blk = blk;
    l->items[l->n].frame = c->nframes - 1;
    l->items[l->n].rslot = c->rslot;
    l->n++;
    return BS_OK;
}

bs_status bs_defer_take(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn, int *taken,
                        bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    *taken = 0;
    if (in->engine != BS_ENGINE_DMA || !is_transfer(in->op) ||
        (f->owner >= 0 && sim->prog->insns[f->owner].op == BS_OP_DMATrigger))
        return BS_OK;
    BS_TRY(push(sim, c, insn, -1, err));
    *taken = 1;
    return BS_OK;
}

bs_status bs_defer_take_block(bs_sim *sim, bs_core *c, int32_t trigger, int32_t blk,
                              bs_error *err)
{
    return push(sim, c, trigger, blk, err);
}

/* Transfer pending item `it` of core c now: its kernel(s), then its updates. */
static bs_status transfer(bs_sim *sim, bs_core *c, const defer_item *it, bs_error *err)
{
    const bs_program *p = sim->prog;
    int32_t saved = c->rslot;
    const bs_insn *u;
    c->rslot = it->rslot;
    if (it->blk < 0) {
        if (BS_UNLIKELY(sim->chk))
            bs_chk_defer(sim, c, it->insn, -1);
        c->where = it->insn;
        BS_TRY(bs_exec_insn(sim, c, it->insn, err));
        u = &p->insns[it->insn];
    } else {
        const bs_region *r = &p->regions[p->insns[it->blk].body];
        if (BS_UNLIKELY(sim->chk))
            bs_chk_defer(sim, c, it->insn, it->blk);
        for (int32_t b = r->block0; b < r->block0 + r->nblock; b++)
            for (int32_t i = p->blocks[b].insn0; i < p->blocks[b].insn0 + p->blocks[b].ninsn; i++) {
                c->where = i;
                BS_TRY(bs_exec_insn(sim, c, i, err));
            }
        u = &p->insns[it->blk];
        c->where = it->insn;
    }
    c->rslot = saved;
    if (u->nupd)
        BS_TRY(bs_sync_update(sim, c, u->sync + u->nwait, u->nupd, err));
    return BS_OK;
}

/* Transfer core k's first `upto` pending items, in order. */
static bs_status flush_core(bs_sim *sim, int32_t k, int32_t upto, bs_error *err)
{
    defer_list *l = &sim->defer->cores[k];
    bs_core *c = &sim->cores[k];
    int32_t done = 0;
    bs_status st = BS_OK;
    while (done < upto && st == BS_OK) {
        defer_item it = l->items[done++];
        st = transfer(sim, c, &it, err);
    }
    memmove(l->items, l->items + done, (size_t)(l->n - done) * sizeof *l->items);
    l->n -= done;
    return st;
}

bs_status bs_defer_flush_frame(bs_sim *sim, bs_core *c, int32_t frame, bs_error *err)
{
    defer_list *l = &sim->defer->cores[c->index];
    int32_t upto = l->n;
    while (upto > 0 && l->items[upto - 1].frame >= frame)
        upto--;
    if (upto == l->n)
        return BS_OK;
    /* queue order: what was issued before that frame's items transfers first */
    return flush_core(sim, c->index, l->n, err);
}

bs_status bs_defer_rendezvous(bs_sim *sim, bs_core *c, bs_error *err)
{
    defer_list *l = &sim->defer->cores[c->index];
    int32_t n = 0;
    bs_status st = BS_OK;
    for (int32_t i = 0; i < l->n; i++) {
        defer_item it = l->items[i];
        if (it.blk < 0 && st == BS_OK)
            st = transfer(sim, c, &it, err);
        else if (it.blk >= 0)
            l->items[n++] = it;
    }
    l->n = n;
    return st;
}

int bs_defer_pending(const bs_sim *sim)
{
    for (int32_t k = 0; k < sim->ncores; k++)
        if (sim->defer->cores[k].n)
            return 1;
    return 0;
}

bs_status bs_defer_flush_all(bs_sim *sim, bs_error *err)
{
    for (int32_t k = 0; k < sim->ncores; k++)
        if (sim->defer->cores[k].n)
            BS_TRY(flush_core(sim, k, sim->defer->cores[k].n, err));
    return BS_OK;
}

/* 1 if pending item `it` (of core `from`) updates (type, id) on core `to`. */
static int updates(const bs_sim *sim, int32_t from, const defer_item *it, int32_t to,
                   const bs_sync *w)
{
    const bs_insn *u = &sim->prog->insns[it->blk >= 0 ? it->blk : it->insn];
    for (int32_t j = u->sync + u->nwait; j < u->sync + u->nwait + u->nupd; j++) {
        const bs_sync *y = &sim->prog->syncs[j];
        int32_t t = y->target_core >= 0 ? y->target_core : from;
        if (t == to && y->type == w->type && y->id == w->id)
            return 1;
    }
    return 0;
}

bs_status bs_defer_poll(bs_sim *sim, bs_core *c, const bs_frame *f, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_block *b = &p->blocks[p->regions[f->region].block0 + f->bi];
    for (int q = 0; q < BS_NUM_ENGINES; q++) {
        int32_t k = f->head[q], insn;
        const bs_insn *in;
        if (k >= b->ninsn)
            continue;
        insn = b->insn0 + k;
        in = &p->insns[insn];
        for (int32_t j = in->sync; j < in->sync + in->nwait; j++) {
            const bs_sync *w = &p->syncs[j];
            for (int32_t from = 0; from < sim->ncores; from++) {
                const defer_list *l = &sim->defer->cores[from];
                for (int32_t i = l->n - 1; i >= 0; i--)
                    if (updates(sim, from, &l->items[i], c->index, w)) {
                        BS_TRY(flush_core(sim, from, i + 1, err));
                        break;
                    }
            }
        }
    }
    return BS_OK;
}
