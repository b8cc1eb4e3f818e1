/* vm/defer.h -- dma_mode "deferred" (vm/defer.c). sim->defer is NULL in eager mode;
** every hook is called as `if (BS_UNLIKELY(sim->defer)) ...`. */
#ifndef BS_VM_DEFER_H
#define BS_VM_DEFER_H

#include "vm.h"

bs_status bs_defer_new(bs_sim *sim, bs_error *err);
void      bs_defer_free(bs_sim *sim);
void      bs_defer_reset(bs_sim *sim);
/* insn (in frame f) is about to run: *taken = 1 when it is a DMA transfer now pending
** (it leaves its queue without transferring or updating). */
bs_status bs_defer_take(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn, int *taken,
                        bs_error *err);
/* A DMATrigger fired DMA block blk (waits consumed): pending instead of pushed. */
bs_status bs_defer_take_block(bs_sim *sim, bs_core *c, int32_t trigger, int32_t blk,
                              bs_error *err);
/* Before picking in frame f: transfer the pending DMAs a queue head waits on. */
bs_status bs_defer_poll(bs_sim *sim, bs_core *c, const bs_frame *f, bs_error *err);
/* The block of frame index `frame` ends: transfer core c's pending DMAs if any of them
** was issued by that frame or a deeper one. */
bs_status bs_defer_flush_frame(bs_sim *sim, bs_core *c, int32_t frame, bs_error *err);
/* A rendezvous instruction is about to run on core c: the DMA engine's pending
** instructions transfer (fired DMA blocks stay pending). */
bs_status bs_defer_rendezvous(bs_sim *sim, bs_core *c, bs_error *err);
int       bs_defer_pending(const bs_sim *sim);
bs_status bs_defer_flush_all(bs_sim *sim, bs_error *err);

/* After one pass over the cores of a run loop (vm/sched.c, vm/explore.c): BS_ROUND_GO
** to go on, BS_ROUND_AGAIN when deferred transfers had to land (nothing else could run),
** BS_ROUND_DONE when the run finished; a deadlock is its error status. */
enum { BS_ROUND_GO, BS_ROUND_AGAIN, BS_ROUND_DONE };
static inline bs_status bs_round_end(bs_sim *sim, int progressed, int live, int *what,
                                     bs_error *err)
{
    *what = BS_ROUND_GO;
    if (BS_UNLIKELY(sim->defer) && !progressed && bs_defer_pending(sim)) {
        *what = BS_ROUND_AGAIN;
        return bs_defer_flush_all(sim, err);
    }
    if (live > 0 && progressed)
        return BS_OK;
    for (int32_t k = 0; live > 0 && k < sim->ncores; k++)
        if (!sim->cores[k].done)
            return bs_sim_deadlock(sim, err);
    sim->finished = 1;
    *what = BS_ROUND_DONE;
    return BS_OK;
}

#endif
