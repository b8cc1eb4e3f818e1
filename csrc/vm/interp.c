/* vm/interp.c -- the per-core step machine: region frames, block queues, scheduling
** policy, structured loops, calls, terminators (docs/spec/control-flow-sync.md §1, §2, §4).
**
** One call of bs_core_step runs at most one instruction, after any block/region
** bookkeeping that precedes it (finishing a block, finishing/restarting a region).
** Region owners (Loop, DynamicForLoop, DoWhile, Call, NKIKernel, DMATrigger) push a
** frame and complete when that frame is popped. This file
** must not allocate while stepping. */
#include <stdio.h>
#include "vm.h"
#include "check.h"
#include "defer.h"
#include "sync.h"

/* The step machine is compiled three times from one source. A plain run (bs_sim_plain
** returns 1: no checker, register checker, timing model or trace, breakpoint, deferred DMA
** or exploration) steps with `plain` a constant 1, so every per-step "is X on?" test below
** (BS_ON) folds away; a timed one (2: the same but for the timing model, which also
** records the trace) keeps only the timing model's tests (BS_TM_ON); the general machine
** has plain = 0 and tests each hook as it goes. */
#define BS_ON(plain, x) (!(plain) && BS_UNLIKELY((x) != 0))
#define BS_TM_ON(plain, x) ((plain) != 1 && BS_UNLIKELY((x) != 0))
#define STEP_INLINE static inline __attribute__((always_inline))

/* {=== Frames ===} */

static bs_status push_frame(bs_sim *sim, bs_core *c, int32_t region, int32_t owner,
                            bs_error *err)
{
    bs_frame *f;
    if (c->nframes >= BS_MAX_FRAMES)
        return bs_errorf(err, BS_E_SIM, "nesting deeper than %d regions", BS_MAX_FRAMES);
    f = &c->frames[c->nframes++];
    memset(f, 0, sizeof *f);
    f->region = region;
    f->owner = owner;
    f->next = BS_NEXT_NONE;
    f->chooser = -1;
    f->running = -1;
    f->axis = -1;
    f->rslot = -1;
    (void)sim;
    return BS_OK;
}

bs_status bs_core_start(bs_sim *sim, bs_core *c, bs_error *err)
{
    const bs_module *m = sim->prog->module;      /* one program per core, or one for all */
    const bs_func *entry = &sim->prog->funcs[m->nentries > 1 ? sim->prog->ipool[m->entries + c->prog]
                                                               : m->entry];
    return push_frame(sim, c, entry->region, -1, err);
}

STEP_INLINE void start_block(bs_sim *sim, bs_frame *f)
{
    const bs_program *p = sim->prog;
    int32_t b = p->regions[f->region].block0 + f->bi;
    memcpy(f->head, p->qfirst + (size_t)b * BS_NUM_ENGINES, sizeof f->head);
    f->npending = p->blocks[b].ninsn;
    f->insn0 = p->blocks[b].insn0;
    f->pc = 0;
    f->seq = p->block_plain[b] && sim->opts.schedule == BS_SCHED_in_order && !sim->xp;
    f->next = BS_NEXT_NONE;
    f->chooser = -1;
    f->running = -1;
    f->started = 1;
}

/* Count one step of the instruction the step machine works on (c->where). */
static bs_status count_step(bs_sim *sim, bs_error *err)
{
    if (BS_UNLIKELY(++sim->steps > sim->max_steps))
        return bs_errorf(err, BS_E_LIMIT, "step limit of %lld reached", (long long)sim->max_steps);
    return BS_OK;
}

/* Mark block offset k of frame f finished: apply its updates, advance its queue. */
/* Block offset k (instruction insn) of frame f leaves its queue. In a frame that is not
** sequential, pc is a lower bound of the heads: no offset below it is left (pick). */
static void leave_queue(const bs_program *p, bs_frame *f, int32_t k, int32_t insn)
{
    if (f->seq) {
        f->pc = k + 1;
    } else {
        f->head[p->queue[insn]] = p->qnext[insn];
        if (k == f->pc)
            f->pc = k + 1;
    }
    f->npending--;
    f->running = -1;
}

STEP_INLINE bs_status complete_insn(bs_sim *sim, bs_core *c, bs_frame *f, int32_t k,
                                    int32_t insn, bs_error *err, const int plain)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    if (BS_ON(plain, sim->chk)) {
        bs_chk_complete(sim, c, f, insn);
        BS_TRY(bs_chk_reg_flush(sim, c, insn, err));
    }
    if (in->nupd)
        BS_TRY(bs_sync_update_fast(sim, c, in->sync + in->nwait, in->nupd, err, plain));
    leave_queue(p, f, k, insn);
    c->last_done[p->queue[insn]] = c->last_any = insn;
    return BS_OK;
}

/* Pop the top frame and complete its owner in the frame below. */
static bs_status pop_complete(bs_sim *sim, bs_core *c, bs_error *err, const int plain)
{
    bs_frame *parent;
    c->nframes--;
    if (c->nframes == 0) {
        c->done = 1;
        return BS_OK;
    }
    parent = &c->frames[c->nframes - 1];
    if (BS_TM_ON(plain, sim->tm))                 /* timing model: the owner's updates */
        bs_tm_owner_done(sim, c);
    return complete_insn(sim, c, parent, parent->running, parent->insn0 + parent->running, err,
                         plain);
}

static void unbind(bs_core *c, bs_frame *f)
{
    while (f->nbind > 0) {
        bs_bind *b = &c->binds[--c->nbinds];
        c->stores[b->loc] = b->saved;
        f->nbind--;
    }
}

/* {=== Loops ===} */

/* After a call returns: a recursive callee runs the same Loop instructions, so it may
** have overwritten (and, on leaving, killed) axis slots that loops of the frames below
** still own. Put every live loop's induction value back. */
static void restore_axes(bs_core *c)
{
    for (int32_t k = 0; k < c->nframes; k++) {
        const bs_frame *f = &c->frames[k];
        if (f->axis >= 0) {
            c->env[f->axis] = f->iv;
            c->live[f->axis] = 1;
        }
    }
}

/* DoWhile condition: the register's value is non-zero (a float register by value), read
** as a rendezvous instruction reads it: the value most recently written. */
static int cond_true(const bs_sim *sim, bs_core *c, int32_t r)
{
    uint64_t bits;
    c->rslot = 0;
    bits = bs_core_reg_bits(c, r);
    if (sim->prog->regs[r].dtype == BS_DT_float32) {
        float v;
        uint32_t u = (uint32_t)bits;
        memcpy(&v, &u, 4);
        return v != 0.0f;
    }
    return bits != 0;
}

static bs_status enter_loop(bs_sim *sim, bs_core *c, int32_t insn, int64_t lb, int64_t ub,
                            int64_t stride, int *pushed, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    bs_frame *f;
    *pushed = 0;
    if (in->op != BS_OP_DoWhile && lb >= ub)
        return BS_OK;                   /* zero trips: the guard comes first (docs/spec/control-flow-sync.md §1.1, §1.3) */
    if (stride <= 0 && in->op != BS_OP_DoWhile)
        return bs_errorf(err, BS_E_SIM, "loop stride must be > 0, got %lld", (long long)stride);
    BS_TRY(push_frame(sim, c, in->body, insn, err));
    f = &c->frames[c->nframes - 1];
    f->iv = lb;
    f->ub = ub;
    f->stride = stride;
    if (in->op != BS_OP_DoWhile) {
        f->axis = (int32_t)BS_PI(in, Loop, axis);       /* = DynamicForLoop's */
        c->env[f->axis] = lb;
        c->live[f->axis] = 1;
    }
    *pushed = 1;
    return count_step(sim, err);                      /* one step per trip */
}

/* The top frame's region ran off its end (or left by Break/Return). */
STEP_INLINE bs_status region_end(bs_sim *sim, bs_core *c, bs_error *err, const int plain)
{
    bs_frame *f = &c->frames[c->nframes - 1];
    const bs_insn *in;
    if (f->owner < 0)
        return pop_complete(sim, c, err, plain);
    c->where = f->owner;
    in = &sim->prog->insns[f->owner];
    switch (in->op) {
    case BS_OP_Loop:
    case BS_OP_DynamicForLoop: {
        int64_t next;                 /* iv + stride past INT64_MAX ends the loop */
        if (!f->broken && !BS_ADD_OVF(f->iv, f->stride, &next) && next < f->ub) {
            f->iv = next;
            c->env[f->axis] = f->iv;
            f->bi = 0;
            f->started = 0;
            return count_step(sim, err);
        }
        c->live[f->axis] = 0;
        return pop_complete(sim, c, err, plain);
    }
    case BS_OP_DoWhile: {
        int again = !f->broken && cond_true(sim, c, (int32_t)BS_PI(in, DoWhile, cond_reg));
        if (BS_ON(plain, c->regchk))          /* the condition's read */
            BS_TRY(bs_chk_reg_flush(sim, c, -1, err));
        if (again) {
            f->bi = 0;
            f->started = 0;
            return count_step(sim, err);
        }
        return pop_complete(sim, c, err, plain);
    }
    case BS_OP_NKIKernel:                         /* the synthetic Return */
        memset(c->sem, 0, sizeof c->sem);
        /* fall through */
    case BS_OP_Call:
        unbind(c, f);
        c->call_depth--;
        restore_axes(c);                      /* the call frame itself has no axis */
        return pop_complete(sim, c, err, plain);
    case BS_OP_DMATrigger: {                      /* the fired DMA block's updates */
        const bs_insn *blk = &sim->prog->insns[f->iv];
        if (BS_ON(plain, sim->chk))
            bs_chk_dma_end(sim, c, f);
        if (BS_TM_ON(plain, sim->tm))      /* timing model: the block's updates */
            bs_tm_owner_done(sim, c);
        BS_TRY(bs_sync_update(sim, c, blk->sync + blk->nwait, blk->nupd, err));
        return pop_complete(sim, c, err, plain);
    }
    default:
        return pop_complete(sim, c, err, plain);
    }
}

/* {=== Region owners and terminators ===} */

static bs_status do_call(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    bs_frame *f;
    int32_t nb = 0;
    if (c->call_depth >= BS_MAX_CALL_DEPTH)
        return bs_errorf(err, BS_E_SIM, "calls nested deeper than %d", BS_MAX_CALL_DEPTH);
    for (int32_t k = 0; k < in->nlist; k += 2)
        nb += p->sets[p->ipool[in->list + k]].nloc;
    {
        void *b = c->binds;
        if (bs_reserve(&b, &c->binds_cap, (size_t)(c->nbinds + nb) * sizeof *c->binds, 1))
            return bs_errorf(err, BS_E_NOMEM, "out of memory binding call arguments");
        c->binds = b;
    }
    BS_TRY(push_frame(sim, c, p->funcs[in->target].region, insn, err));
    f = &c->frames[c->nframes - 1];
    for (int32_t k = 0; k < in->nlist; k += 2) {
        const bs_set *callee = &p->sets[p->ipool[in->list + k]];
        const bs_set *caller = &p->sets[p->ipool[in->list + k + 1]];
        for (int32_t j = 0; j < callee->nloc && j < caller->nloc; j++) {
            bs_bind *b = &c->binds[c->nbinds++];
            b->loc = callee->loc0 + j;
            b->saved = c->stores[b->loc];
            c->stores[b->loc] = c->stores[caller->loc0 + j];
            f->nbind++;
        }
    }
    c->call_depth++;
    return BS_OK;
}

/* Return: leave every frame up to and including the current function's. */
static bs_status do_return(bs_sim *sim, bs_core *c, bs_error *err)
{
    memset(c->sem, 0, sizeof c->sem);
    for (;;) {
        bs_frame *f = &c->frames[c->nframes - 1];
        int32_t op = f->owner < 0 ? -1 : sim->prog->insns[f->owner].op;
        if (op == -1 || op == BS_OP_Call || op == BS_OP_NKIKernel) {
            f->bi = sim->prog->regions[f->region].nblock;
            return region_end(sim, c, err, 0);
        }
        if (op == BS_OP_DMATrigger)
            return bs_errorf(err, BS_E_SIM, "Return inside a DMA block");
        if (f->axis >= 0)
            c->live[f->axis] = 0;
        c->nframes--;
    }
}

static bs_status fire_dma(bs_sim *sim, bs_core *c, int32_t insn, int *pushed, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t blk;
    const bs_insn *b;
    *pushed = 0;
    if (in->nlist == 0)
        return BS_OK;
    int64_t cur = BS_PI(in, DMATrigger, cursor);
    blk = (int32_t)sim->prog->ipool[in->list + (c->cursor[cur] % in->nlist)];
    b = &sim->prog->insns[blk];
    c->cursor[cur] = (c->cursor[cur] + 1) % in->nlist;
    if (BS_UNLIKELY(sim->chk))
        bs_chk_dma_fire(sim, c, insn, blk);
    BS_TRY(bs_sync_consume(sim, c, b->sync, b->nwait, err));
    if (BS_UNLIKELY(sim->defer))
        return bs_defer_take_block(sim, c, insn, blk, err);
    BS_TRY(push_frame(sim, c, b->body, insn, err));
    *pushed = 1;
    c->frames[c->nframes - 1].iv = blk;        /* remembered for its updates */
    c->frames[c->nframes - 1].rslot = c->rslot;   /* its registers: the trigger's file */
    return BS_OK;
}

static int32_t region_offset(const bs_sim *sim, const bs_frame *f, int32_t block)
{
    return block - sim->prog->regions[f->region].block0;
}

/* What choice `next` names, for messages. */
static void choice_text(const bs_sim *sim, const bs_frame *f, int32_t next, char *buf, size_t cap)
{
    const bs_program *p = sim->prog;
    switch (next) {
    case BS_NEXT_BREAK:  snprintf(buf, cap, "Break (leave the loop)"); break;
    case BS_NEXT_RETURN: snprintf(buf, cap, "Return"); break;
    case BS_NEXT_EXIT:   snprintf(buf, cap, "Exit"); break;
    default:
        snprintf(buf, cap, "block '%s'",
                 bs_str(p, p->blocks[p->regions[f->region].block0 + next].name));
        break;
    }
}

/* Terminator at block offset k chooses `next` (BS_NEXT_* or a block offset). A block's
** terminators (at most one per engine) must agree (docs/spec/BIR-JSON.md "Several terminators in
** one block"); the choice takes effect when the block's queues are empty (block_end). */
static bs_status choose(bs_sim *sim, bs_frame *f, int32_t k, int32_t next, bs_error *err)
{
    if (f->chooser >= 0 && f->next != next) {
        const bs_program *p = sim->prog;
        int32_t b0 = p->blocks[p->regions[f->region].block0 + f->bi].insn0;
        char mine[300], theirs[300], where[600];
        choice_text(sim, f, next, mine, sizeof mine);
        choice_text(sim, f, f->next, theirs, sizeof theirs);
        bs_insn_where(p, b0 + f->chooser, where, sizeof where);
        return bs_errorf(err, BS_E_SIM, "terminators of one block disagree: this one chose %s, "
                         "but %s chose %s", mine, where, theirs);
    }
    f->next = next;
    f->chooser = k;
    return BS_OK;
}

/* Run instruction at block offset k. *pushed = 1 if it pushed a frame (it completes when
** that frame pops). Terminators record the block's choice of successor. */
STEP_INLINE bs_status run(bs_sim *sim, bs_core *c, bs_frame *f, int32_t k, bs_error *err,
                          const int plain)
{
    const bs_program *p = sim->prog;
    int32_t insn = f->insn0 + k;
    const bs_insn *in = &p->insns[insn];
    int pushed = 0;
    int32_t target = 0;
    int64_t lb, ub, stride;
    bs_status st;
    c->where = insn;
    c->rslot = bs_core_slot(sim, c, insn);
    BS_TRY(count_step(sim, err));
    if (BS_TM_ON(plain, sim->tm))                 /* timing model (vm/timing.c) */
        bs_tm_insn(sim, c, insn);
    if (BS_ON(plain, sim->breaks) && (sim->break_every || sim->breaks[insn])) {
        sim->stop_core = c->index;          /* bs_sim_run returns after this step */
        sim->stop_insn = insn;
    }
    sim->op_counts[in->op]++;
    sim->engine_counts[in->engine]++;
    if (BS_ON(plain, sim->chk))
        bs_chk_begin(sim, c, f, insn);
    if (in->nwait)
        BS_TRY(bs_sync_consume_fast(sim, c, in->sync, in->nwait, err));
    if (BS_ON(plain, sim->defer)) {            /* a DMA transfer waits to be observed */
        int taken;
        BS_TRY(bs_defer_take(sim, c, f, insn, &taken, err));
        if (taken) {
            leave_queue(p, f, k, insn);
            return BS_OK;
        }
        if (p->queue[insn] == BS_Q_RDV)
            BS_TRY(bs_defer_rendezvous(sim, c, err));
        c->where = insn;
    }
    f->running = k;
    switch (in->op) {
    case BS_OP_Loop:
        lb = BS_PI(in, Loop, lb);
        ub = BS_PI(in, Loop, ub);
        stride = BS_PI(in, Loop, stride);
        if (lb == 0 && ub == 0 && stride == 0) {
            ub = 1;                     /* an axis with no bound: one body pass, i = 0 (docs/spec/control-flow-sync.md §1.1) */
            stride = 1;
        }
        st = enter_loop(sim, c, insn, lb, ub, stride, &pushed, err);
        break;
    case BS_OP_DynamicForLoop:
        st = bs_core_eval(sim, c, BS_PX(in, DynamicForLoop, lb), &lb, err);
        if (st == BS_OK)
            st = bs_core_eval(sim, c, BS_PX(in, DynamicForLoop, stride), &stride, err);
        if (st == BS_OK && (BS_MUL_OVF(BS_PI(in, DynamicForLoop, ub_coeff),
                                       bs_core_reg_i64(sim, c,
                                                       (int32_t)BS_PI(in, DynamicForLoop, ub_reg)),
                                       &ub)
                            || BS_ADD_OVF(BS_PI(in, DynamicForLoop, ub_const), ub, &ub)))
            st = bs_errorf(err, BS_E_PROGRAM, "the upper bound %lld + %lld x register overflows "
                           "int64", (long long)BS_PI(in, DynamicForLoop, ub_const),
                           (long long)BS_PI(in, DynamicForLoop, ub_coeff));
        if (st == BS_OK)
            st = enter_loop(sim, c, insn, lb, ub, stride, &pushed, err);
        break;
    case BS_OP_DoWhile:
        st = enter_loop(sim, c, insn, 0, 0, 0, &pushed, err);
        break;
    case BS_OP_Call:
    case BS_OP_NKIKernel:
        if (in->target < 0) {           /* a Call without a callee: a no-op (docs/spec/control-flow-sync.md §2.4) */
            st = BS_OK;
            break;
        }
        st = do_call(sim, c, insn, err);
        pushed = st == BS_OK;
        break;
    case BS_OP_DMATrigger:
        st = fire_dma(sim, c, insn, &pushed, err);
        break;
    case BS_OP_UnconditionalBranch:
        st = choose(sim, f, k, region_offset(sim, f, in->target), err);
        break;
    case BS_OP_CompareAndBranch:
        st = bs_exec_compare_branch(sim, c, insn, &target, err);
        if (st == BS_OK)
            st = choose(sim, f, k, region_offset(sim, f, target), err);
        break;
    case BS_OP_Break:
        st = choose(sim, f, k, BS_NEXT_BREAK, err);
        break;
    case BS_OP_Return:
        st = choose(sim, f, k, BS_NEXT_RETURN, err);
        break;
    case BS_OP_Exit:
        st = choose(sim, f, k, BS_NEXT_EXIT, err);
        break;
    case BS_OP_RegisterAlu:                     /* loop counters: no trip through the table */
        st = BS_TM_ON(plain, sim->tm_skip) && sim->tm_skip[insn] ? BS_OK
                                                              : bs_exec_reg_alu(sim, c, insn, err);
        break;
    default:                                    /* timing="only" skips pure arithmetic */
        st = BS_TM_ON(plain, sim->tm_skip) && sim->tm_skip[insn] ? BS_OK
                                                              : bs_exec_insn(sim, c, insn, err);
        break;
    }
    if (st != BS_OK)
        return st;
    return pushed ? BS_OK : complete_insn(sim, c, f, k, insn, err, plain);
}

/* {=== Scheduling inside a block ===} */

static const uint8_t rotation[] = { BS_ENGINE_Pool, BS_ENGINE_Activation, BS_ENGINE_PE,
                                    BS_ENGINE_DMA, BS_ENGINE_DVE, BS_ENGINE_SP, BS_Q_RDV };

/* in_order: the ready head with the smallest block offset (heads are distinct offsets).
** Heads are tried in offset order, so the usual case checks one head's waits, not all;
** `tried` has a bit for each queue whose head is known blocked. */
static int32_t pick_in_order(const bs_sim *sim, const bs_core *c, const bs_frame *f,
                             const bs_block *b, int32_t minhead, uint32_t tried)
{
    int32_t rdv = f->head[BS_Q_RDV];
    for (;;) {
        int32_t best = -1;
        for (int q = 0; q < BS_NUM_ENGINES; q++) {
            int32_t k = f->head[q];
            if ((tried >> q & 1) || k >= b->ninsn || (q != BS_Q_RDV && k > rdv) ||
                (q == BS_Q_RDV && minhead < k))
                continue;
            if (best < 0 || k < f->head[best])
                best = q;
        }
        if (best < 0)
            return -1;
        if (bs_sync_insn_ready(sim, c, b->insn0 + f->head[best]))
            return f->head[best];
        tried |= 1u << best;
    }
}

/* Block offset of the instruction to run next, or -1 if every head is blocked (called by
** pick_next when in_order's usual step does not apply). */
static int32_t pick(bs_sim *sim, bs_core *c, bs_frame *f, const bs_block *b)
{
    int32_t cand[BS_NUM_ENGINES], qs[BS_NUM_ENGINES], n = 0, rdv = f->head[BS_Q_RDV];
    int32_t minhead = b->ninsn;
    int in_order = sim->opts.schedule == BS_SCHED_in_order && sim->xp == NULL;  /* recording: below */
    int32_t k = f->pc;                  /* in_order: pick_next found it blocked if a head */
    /* One head at a time, through the rotation: a vectorised load of the heads just after
    ** leave_queue stored one of them stalls on store forwarding (~20 % of a synced step). */
    for (size_t r = 0; r + 1 < sizeof rotation; r++)
        if (f->head[rotation[r]] < minhead)
            minhead = f->head[rotation[r]];
    if (in_order) {
        int32_t least = minhead < rdv ? minhead : rdv;   /* the smallest head is eligible */
        if (least >= b->ninsn)
            return -1;
        f->pc = least;                  /* = the smallest offset not yet left */
        if (least == k)                 /* blocked: pick_next checked it */
            return pick_in_order(sim, c, f, b, minhead,
                                 1u << sim->prog->queue[b->insn0 + least]);
        if (bs_sync_insn_ready(sim, c, b->insn0 + least))
            return least;
        return pick_in_order(sim, c, f, b, minhead, 0);
    }
    for (size_t r = 0; r < sizeof rotation; r++) {
        int q = rotation[r];
        k = f->head[q];
        if (k >= b->ninsn || (q != BS_Q_RDV && k > rdv) || (q == BS_Q_RDV && minhead < k))
            continue;
        if (!bs_sync_insn_ready(sim, c, b->insn0 + k))
            continue;
        cand[n] = k;
        qs[n++] = q;
    }
    if (n == 0)
        return -1;
    if (BS_UNLIKELY(sim->xp != NULL))
        return bs_xp_pick(sim, c, cand, qs, n);
    if (sim->opts.schedule == BS_SCHED_random) {
        int32_t i = (int32_t)(bs_sim_random(sim) % (uint64_t)n);
        c->last_engine = qs[i];
        return cand[i];
    }
    if (sim->opts.schedule == BS_SCHED_round_robin) {
        int32_t best = 0, bestd = 99;
        int32_t lastpos = 0;
        for (size_t r = 0; r < sizeof rotation; r++)
            if (rotation[r] == c->last_engine)
                lastpos = (int32_t)r;
        for (int32_t i = 0; i < n; i++) {
            int32_t pos = 0, d;
            for (size_t r = 0; r < sizeof rotation; r++)
                if (rotation[r] == qs[i])
                    pos = (int32_t)r;
            d = (pos - lastpos - 1 + (int32_t)sizeof rotation) % (int32_t)sizeof rotation;
            if (d < bestd) {
                bestd = d;
                best = i;
            }
        }
        c->last_engine = qs[best];
        return cand[best];
    }
    {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (cand[i] < cand[best])
                best = i;
        return cand[best];
    }
}

/* pick, with in_order's usual step in line: no offset below pc is left (leave_queue),
** so pc, when it heads its queue, is the smallest head and runs if ready, with no scan
** of the heads. */
STEP_INLINE int32_t pick_next(bs_sim *sim, bs_core *c, bs_frame *f, const bs_block *b)
{
    int32_t k = f->pc;
    if (sim->opts.schedule == BS_SCHED_in_order && sim->xp == NULL && k < b->ninsn
            && f->head[sim->prog->queue[b->insn0 + k]] == k
            && bs_sync_insn_ready(sim, c, b->insn0 + k))
        return k;
    return pick(sim, c, f, b);
}

/* The block's queues are empty: check for dangling events, then take its choice. */
STEP_INLINE bs_status block_end(bs_sim *sim, bs_core *c, bs_frame *f, bs_error *err)
{
    const bs_program *p = sim->prog;
    int32_t bidx = p->regions[f->region].block0 + f->bi;
    const bs_block *b = &p->blocks[bidx];
    /* Dangling events: checked at the end of basic blocks, not of a fired DMA block
    ** (its descriptors run inside the trigger's block, which is checked when it ends). */
    const uint8_t *set = c->nevt == 0 || (f->owner >= 0 &&
                                          p->insns[f->owner].op == BS_OP_DMATrigger)
                             ? NULL : memchr(c->evt, 1, BS_NUM_EVENTS);
    c->where = -1;
    c->where_block = bidx;
    if (set != NULL) {
        bs_status st;
        if (sim->opts.strict)
            st = bs_errorf(err, BS_E_STRICT, "block ended with event %d still set",
                           (int)(set - c->evt));
        else if (sim->ncores > 1)
            st = bs_sim_diagnose(sim, err, "core %d, function '%s': block '%s' ended with "
                                 "event %d still set", c->index,
                                 bs_str(p, p->funcs[b->func].name), bs_str(p, b->name),
                                 (int)(set - c->evt));
        else
            st = bs_sim_diagnose(sim, err, "function '%s': block '%s' ended with event %d "
                                 "still set", bs_str(p, p->funcs[b->func].name),
                                 bs_str(p, b->name), (int)(set - c->evt));
        if (st != BS_OK)
            return st;
    }
    f->started = 0;
    if (f->chooser >= 0)
        c->where = b->insn0 + f->chooser;
    switch (f->next) {
    case BS_NEXT_NONE:
        f->bi++;
        return BS_OK;
    case BS_NEXT_BREAK:
        f->broken = 1;
        f->bi = p->regions[f->region].nblock;
        return BS_OK;
    case BS_NEXT_RETURN:
        return do_return(sim, c, err);
    case BS_NEXT_EXIT:
        sim->exited = 1;
        c->done = 1;
        if (sim->ncores == 1)
            sim->finished = 1;
        return BS_OK;
    default:
        f->bi = f->next;
        return count_step(sim, err);              /* one step per taken branch */
    }
}

/* The loop trip of a plain run as one piece of bookkeeping: the body, a single block that
** chose no successor and left no event set, has run to its end and its Loop or
** DynamicForLoop goes round again. block_end, region_end and start_block would leave
** exactly this state (a sequential block never moves its queue heads, a synchronised one
** gets them back; `where` is as region_end leaves it for the trip's step); 1 if it
** applied, the trip's step not yet counted. */
STEP_INLINE int next_trip(bs_sim *sim, bs_core *c, bs_frame *f, const bs_region *r)
{
    const bs_insn *in;
    int64_t next;
    if (r->nblock != 1 || f->next != BS_NEXT_NONE || c->nevt != 0 || f->owner < 0
            || f->broken || sim->prog->blocks[r->block0].ninsn == 0)
        return 0;                       /* an empty body: block_end's route (no insn 0) */
    in = &sim->prog->insns[f->owner];
    if ((in->op != BS_OP_Loop && in->op != BS_OP_DynamicForLoop)
            || BS_ADD_OVF(f->iv, f->stride, &next) || next >= f->ub)
        return 0;
    c->where = f->owner;
    c->where_block = r->block0;
    f->iv = next;
    c->env[f->axis] = next;
    f->pc = 0;
    f->npending = sim->prog->blocks[r->block0].ninsn;
    if (!f->seq)
        memcpy(f->head, sim->prog->qfirst + (size_t)r->block0 * BS_NUM_ENGINES, sizeof f->head);
    return 1;
}

/* Bookkeeping (finishing a block, ending or restarting a region) is chained with the
** instruction that follows it, so one call runs at most one instruction but a loop trip
** does not cost three trips through the run loop. The chain is bounded so that a loop
** with an empty body still returns to the run loop (budget, interrupts) regularly. */
#define BS_MAX_CHAIN 16

STEP_INLINE bs_status core_step(bs_sim *sim, bs_core *c, int *progress, bs_error *err,
                                const int plain)
{
    const bs_program *p = sim->prog;
    bs_status st = BS_OK;
    int tripped = 0;            /* next_trip did the bookkeeping of a chain's first links */
    *progress = 0;
    for (int n = 0; n < BS_MAX_CHAIN; n++) {
        bs_frame *f;
        const bs_region *r;
        int32_t k;
        if (c->done)
            return BS_OK;
        f = &c->frames[c->nframes - 1];
        r = &p->regions[f->region];
        *progress = 1;
        c->where = c->where_block = -1;
        if (f->bi >= r->nblock) {
            st = region_end(sim, c, err, plain);
            if (st != BS_OK)
                break;
            continue;
        }
        if (!f->started)
            start_block(sim, f);
        if (BS_ON(plain, sim->defer) && f->npending == 0) {
            st = bs_defer_flush_frame(sim, c, c->nframes - 1, err);
            if (st != BS_OK)
                break;
        }
        if (f->npending == 0) {
            if (plain && next_trip(sim, c, f, r)) {
                tripped = 1;
                st = count_step(sim, err);        /* one step per trip */
                if (st != BS_OK)
                    break;
                c->where = c->where_block = -1;
            } else {
                st = block_end(sim, c, f, err);
                if (st != BS_OK)
                    break;
                continue;
            }
        }
        if (f->seq) {
            k = f->pc;
        } else {
            if (BS_ON(plain, sim->defer)) {
                st = bs_defer_poll(sim, c, f, err);
                if (st != BS_OK)
                    break;
            }
            k = pick_next(sim, c, f, &p->blocks[r->block0 + f->bi]);
            if (k < 0) {                /* blocked: progress if bookkeeping was done */
                *progress = n > 0 || tripped;
                return BS_OK;
            }
        }
        st = run(sim, c, f, k, err, plain);
        break;
    }
    if (st != BS_OK) {
        /* The one place a run-time error gets its location. */
        if (c->where < 0)
            err->block = c->where_block;
        return bs_fail_at(sim, c, c->where, st, err);
    }
    return BS_OK;
}

bs_status bs_core_step(bs_sim *sim, bs_core *c, int *progress, bs_error *err)
{
    return core_step(sim, c, progress, err, 0);
}

int bs_sim_plain(const bs_sim *sim)
{
    if (sim->chk != NULL || sim->breaks != NULL || sim->defer != NULL || sim->xp != NULL)
        return 0;
    for (int32_t k = 0; k < sim->ncores; k++)
        if (sim->cores[k].regchk != NULL)
            return 0;
    return sim->tm != NULL || sim->tm_skip != NULL ? 2 : 1;
}

bs_status bs_core_step_plain(bs_sim *sim, bs_core *c, int *progress, int plain, bs_error *err)
{
    return plain == 2 ? core_step(sim, c, progress, err, 2) : core_step(sim, c, progress, err, 1);
}

STEP_INLINE bs_status run_n(bs_sim *sim, bs_core *c, int64_t stop, int32_t calls, int *blocked,
                            bs_error *err, const int plain)
{
    *blocked = 0;
    for (int32_t n = 0; n < calls && !c->done && sim->steps < stop; n++) {
        int progress;
        BS_TRY(core_step(sim, c, &progress, err, plain));
        if (!progress) {
            *blocked = 1;
            break;
        }
    }
    return BS_OK;
}

bs_status bs_core_run_plain(bs_sim *sim, bs_core *c, int64_t stop, int32_t calls, int plain,
                            int *blocked, bs_error *err)
{
    return plain == 2 ? run_n(sim, c, stop, calls, blocked, err, 2)
                      : run_n(sim, c, stop, calls, blocked, err, 1);
}
