/* vm/sync.c -- the two-bank sync model (docs/spec/control-flow-sync.md §3): one-shot events and counting
** semaphores per core. Waits are polls; only event waits are consumed; updates may
** target another core. Protocol violations are SyncError, never silent. */
#include <stdio.h>
#include "vm.h"
#include "check.h"

/* sem-ge-reg: the register's cell in register slot `slot` (the waiting instruction's
** engine's file). */
static uint32_t wait_reg(const bs_core *c, const bs_sync *w, int32_t slot)
{
    return (uint32_t)c->regs[(size_t)w->reg * BS_REG_SLOTS + (size_t)slot];
}

static int wait_holds(const bs_core *c, const bs_sync *w, int32_t slot)
{
    if (w->type == BS_SYNCTYPE_event)
        return c->evt[w->id] != 0;
    if (w->mode == BS_WAIT_sem_ge_reg)
        return c->sem[w->id] >= wait_reg(c, w, slot);
    return c->sem[w->id] >= (uint32_t)w->value;
}

int bs_sync_ready(const bs_sim *sim, const bs_core *c, int32_t first, int32_t nwait,
                  int32_t slot)
{
    for (int32_t k = 0; k < nwait; k++)
        if (!wait_holds(c, &sim->prog->syncs[first + k], slot))
            return 0;
    return 1;
}

/* The DMA block a trigger fires next, or -1. */
static int32_t next_dma_block(const bs_sim *sim, const bs_core *c, const bs_insn *in)
{
    if (in->op != BS_OP_DMATrigger || in->nlist == 0)
        return -1;
    return (int32_t)sim->prog->ipool[in->list + (c->cursor[BS_PI(in, DMATrigger, cursor)] % in->nlist)];
}

int bs_insn_ready(const bs_sim *sim, const bs_core *c, int32_t insn)
{
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t blk, slot;
    if (in->nwait == 0 && in->op != BS_OP_DMATrigger && !bs_is_collective(in->op))
        return 1;                       /* nothing to wait for (most instructions) */
    slot = bs_core_slot(sim, c, insn);
    if (!bs_sync_ready(sim, c, in->sync, in->nwait, slot))
        return 0;
    if (BS_UNLIKELY(bs_is_collective(in->op)))
        return bs_coll_ready(sim, c, insn);
    blk = next_dma_block(sim, c, in);
    if (blk >= 0) {                     /* the block's waits read the trigger's file */
        const bs_insn *b = &sim->prog->insns[blk];
        return bs_sync_ready(sim, c, b->sync, b->nwait, slot);
    }
    return 1;
}

bs_status bs_sync_consume(bs_sim *sim, bs_core *c, int32_t first, int32_t nwait,
                          bs_error *err)
{
    for (int32_t k = 0; k < nwait; k++) {
        const bs_sync *w = &sim->prog->syncs[first + k];
        if (w->type != BS_SYNCTYPE_event)
            continue;
        /* Readiness saw it set; a second wait on the same event (in this instruction,
        ** or a trigger and its DMA block) finds it already cleared: clear-before-set. */
        if (!c->evt[w->id])
            return bs_errorf(err, BS_E_SYNC, "event %d cleared while not set (waited on "
                             "twice?)", w->id);
        c->evt[w->id] = 0;
        c->nevt--;
    }
    return BS_OK;
}

static bs_status apply(bs_sim *sim, bs_core *t, const bs_sync *u, bs_error *err)
{
    uint32_t v = (uint32_t)u->value, before = t->sem[u->id];
    if (u->type == BS_SYNCTYPE_event) {
        if (t->evt[u->id])
            return bs_errorf(err, BS_E_SYNC, "event %d set while already set (core %d)",
                             u->id, t->index);
        t->evt[u->id] = 1;
        t->nevt++;
        if (BS_UNLIKELY(sim->chk))
            bs_chk_update(sim, t, u, 0);
        return BS_OK;
    }
    switch (u->mode) {
    case BS_UPDATE_sem_wr_imm:  t->sem[u->id] = v; break;
    case BS_UPDATE_sem_add_imm: t->sem[u->id] += v; break;
    case BS_UPDATE_sem_sub_imm: t->sem[u->id] -= v; break;
    case BS_UPDATE_sem_inc:
    case BS_UPDATE_sem_dec:
        if (u->value != 1)
            return bs_errorf(err, BS_E_SYNC, "semaphore %d: %s value must be 1, got %lld", u->id,
                             u->mode == BS_UPDATE_sem_inc ? "sem-inc" : "sem-dec",
                             (long long)u->value);
        t->sem[u->id] += u->mode == BS_UPDATE_sem_inc ? 1u : (uint32_t)-1;
        break;
    default:
        return bs_errorf(err, BS_E_SYNC, "semaphore %d: unhandled update mode %d", u->id, u->mode);
    }
    if (BS_UNLIKELY(sim->chk))
        bs_chk_update(sim, t, u, before);
    return BS_OK;
}

bs_status bs_sync_update(bs_sim *sim, bs_core *c, int32_t first, int32_t nupd, bs_error *err)
{
    for (int32_t k = 0; k < nupd; k++) {
        const bs_sync *u = &sim->prog->syncs[first + k];
        bs_core *t = c;
        if (u->target_core >= 0) {
            if (u->target_core >= sim->ncores)
                return bs_errorf(err, BS_E_SYNC, "update targets core %d but the run has %d core%s",
                                 u->target_core, sim->ncores, sim->ncores == 1 ? "" : "s");
            t = &sim->cores[u->target_core];
        }
        if (BS_UNLIKELY(sim->tm != NULL))          /* timing model (vm/timing.c) */
            bs_tm_update(sim, c, t, u);
        BS_TRY(apply(sim, t, u, err));
    }
    return BS_OK;
}

static void describe(const bs_sim *sim, const bs_core *c, const bs_sync *w, int32_t slot,
                     const char *who, bs_error *err)
{
    if (wait_holds(c, w, slot))
        return;
    if (w->type == BS_SYNCTYPE_event)
        bs_error_append(err, "\n    %swaits for event %d to be set (it is clear)", who, w->id);
    else if (w->mode == BS_WAIT_sem_ge_reg)
        bs_error_append(err, "\n    %swaits for semaphore %d >= register '%s' = %u%s%s (now %u)",
                        who, w->id, bs_str(sim->prog, sim->prog->regs[w->reg].name),
                        wait_reg(c, w, slot), slot ? " in the file of " : "",
                        slot ? bs_enum_name("ENGINE", slot) : "", c->sem[w->id]);
    else
        bs_error_append(err, "\n    %swaits for semaphore %d >= %u (now %u)", who, w->id,
                        (uint32_t)w->value, c->sem[w->id]);
}

void bs_sync_describe_wait(const bs_sim *sim, const bs_core *c, int32_t insn, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t blk = next_dma_block(sim, c, in), slot = bs_core_slot(sim, c, insn);
    for (int32_t k = 0; k < in->nwait; k++)
        describe(sim, c, &sim->prog->syncs[in->sync + k], slot, "", err);
    if (blk >= 0) {
        const bs_insn *b = &sim->prog->insns[blk];
        char who[160];
        snprintf(who, sizeof who, "its next DMA block '%s' ", bs_str(sim->prog, b->name));
        for (int32_t k = 0; k < b->nwait; k++)
            describe(sim, c, &sim->prog->syncs[b->sync + k], slot, who, err);
    }
}
