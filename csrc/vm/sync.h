/* vm/sync.h -- the sync model's per-step fast paths, inlined into the step machine
** (vm/interp.c): a queue head's readiness, the consumption of its waits and the updates
** of a completed instruction. Each handles the common records (semaphore waits against
** an immediate, semaphore updates of this core) in line and hands every other record, one
** at a time and in order, to vm/sync.c, which holds the model, its checks and its errors:
** same results, same errors at the same instruction. */
#ifndef BS_VM_SYNC_H
#define BS_VM_SYNC_H

#include "vm.h"

/* Whether instruction insn (at the head of its queue on core c) can run: bs_insn_ready. */
static inline int bs_sync_insn_ready(const bs_sim *sim, const bs_core *c, int32_t insn)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    const bs_sync *w = &p->syncs[in->sync];
    if (BS_UNLIKELY(in->op == BS_OP_DMATrigger || bs_is_collective(in->op)))
        return bs_insn_ready(sim, c, insn);
    for (int32_t k = 0; k < in->nwait; k++, w++) {
        if (w->type != BS_SYNCTYPE_semaphore || w->mode != BS_WAIT_sem_ge_imm) {
            if (!bs_sync_ready(sim, c, in->sync + k, 1, bs_core_slot(sim, c, insn)))
                return 0;
        } else if (c->sem[w->id] < (uint32_t)w->value) {
            return 0;
        }
    }
    return 1;
}

/* Consume the waits of a starting instruction: bs_sync_consume (only event waits are
** consumed). */
static inline bs_status bs_sync_consume_fast(bs_sim *sim, bs_core *c, int32_t first,
                                             int32_t nwait, bs_error *err)
{
    const bs_sync *w = &sim->prog->syncs[first];
    for (int32_t k = 0; k < nwait; k++, w++)
        if (w->type == BS_SYNCTYPE_event)
            BS_TRY(bs_sync_consume(sim, c, first + k, 1, err));
    return BS_OK;
}

_Static_assert(BS_UPDATE_sem_add_imm == 1 && BS_UPDATE_sem_sub_imm == 2 &&
               BS_UPDATE_sem_inc == 3 && BS_UPDATE_sem_dec == 4,
               "bs_sync_update_fast: the adding modes are the odd ones (bs_enums.def UPDATE)");

/* Apply the updates of a completed instruction: bs_sync_update. With `plain` (no checker:
** bs_sim_plain; 2: the timing model on, which sees the update first) a semaphore update of
** this core whose mode needs no check is applied here; every other update goes through
** bs_sync_update. */
static inline bs_status bs_sync_update_fast(bs_sim *sim, bs_core *c, int32_t first,
                                            int32_t nupd, bs_error *err, const int plain)
{
    const bs_sync *u = &sim->prog->syncs[first];
    if (!plain)
        return bs_sync_update(sim, c, first, nupd, err);
    for (int32_t k = 0; k < nupd; k++, u++) {
        uint32_t *s;
        if (u->type != BS_SYNCTYPE_semaphore || u->target_core >= 0) {
            BS_TRY(bs_sync_update(sim, c, first + k, 1, err));
            continue;
        }
        s = &c->sem[u->id];
        if (u->mode == BS_UPDATE_sem_wr_imm) {
            if (plain == 2)                     /* as bs_sync_update: before it applies */
                bs_tm_update(sim, c, c, u);
            *s = (uint32_t)u->value;
        } else if (u->mode >= BS_UPDATE_sem_add_imm && u->mode <= BS_UPDATE_sem_dec) {
            /* add and inc (odd modes) add the value, sub and dec subtract it: no switch,
            ** whose indirect jump mispredicts as the modes alternate. */
            uint32_t v = (uint32_t)u->value;
            if (BS_UNLIKELY(u->mode >= BS_UPDATE_sem_inc && u->value != 1))
                return bs_sync_update(sim, c, first + k, 1, err);    /* the error */
            if (plain == 2)
                bs_tm_update(sim, c, c, u);
            *s += (u->mode & 1) ? v : 0u - v;
        } else {
            BS_TRY(bs_sync_update(sim, c, first + k, 1, err));
        }
    }
    return BS_OK;
}

#endif
