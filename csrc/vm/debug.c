/* vm/debug.c -- step debugging: breakpoints that stop bs_sim_run, and read-only views of
** a paused run's sync state and engine queues (the Python debugger's inspection). */
#include <string.h>

#include "vm.h"
#include "../core/alloc.h"

bs_status bs_sim_set_breaks(bs_sim *sim, const uint8_t *bits, int64_t nbits, int every,
                            bs_error *err)
{
    size_t n = (size_t)sim->prog->n_insns;
    if (bits != NULL && nbits != (int64_t)n)
        return bs_errorf(err, BS_E_INPUT, "%lld breakpoint flags for %zu instructions",
                         (long long)nbits, n);
    if (bits == NULL && !every) {
        bs_free(sim->breaks);
        sim->breaks = NULL;
        sim->break_every = 0;
        return BS_OK;
    }
    if (sim->breaks == NULL) {
        sim->breaks = bs_calloc(n ? n : 1, 1);
        if (sim->breaks == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory for %zu breakpoint flags", n);
    }
    if (bits != NULL)
        memcpy(sim->breaks, bits, n);
    else
        memset(sim->breaks, 0, n);
    sim->break_every = every != 0;
    return BS_OK;
}

int32_t bs_sim_stopped(const bs_sim *sim, int32_t *core)
{
    *core = sim->stop_core;
    return sim->stop_insn;
}

int32_t bs_sim_queue_heads(const bs_sim *sim, int32_t core, int32_t *heads)
{
    const bs_program *p = sim->prog;
    const bs_core *c;
    const bs_frame *f;
    const bs_block *b;
    for (int e = 0; e < BS_NUM_ENGINES; e++)
        heads[e] = -1;
    if (core < 0 || core >= sim->ncores)
        return -1;
    c = &sim->cores[core];
    if (c->done || c->nframes == 0)
        return -1;
    f = &c->frames[c->nframes - 1];
    if (f->bi >= p->regions[f->region].nblock)
        return -1;
    b = &p->blocks[p->regions[f->region].block0 + f->bi];
    if (!f->started) {
        for (int e = 0; e < BS_NUM_ENGINES; e++) {
            int32_t k = p->qfirst[(size_t)(b - p->blocks) * BS_NUM_ENGINES + e];
            heads[e] = k < b->ninsn ? b->insn0 + k : -1;
        }
    } else if (f->seq) {
        if (f->pc < b->ninsn)
            heads[p->insns[b->insn0 + f->pc].engine] = b->insn0 + f->pc;
    } else {
        for (int e = 0; e < BS_NUM_ENGINES; e++)
            heads[e] = f->head[e] < b->ninsn ? b->insn0 + f->head[e] : -1;
    }
    return (int32_t)(b - p->blocks);
}

const uint32_t *bs_sim_sems(const bs_sim *sim, int32_t core)
{
    return core >= 0 && core < sim->ncores ? sim->cores[core].sem : NULL;
}

const uint8_t *bs_sim_events(const bs_sim *sim, int32_t core)
{
    return core >= 0 && core < sim->ncores ? sim->cores[core].evt : NULL;
}
