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

#endif
