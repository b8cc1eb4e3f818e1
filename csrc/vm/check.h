/* vm/check.h -- the run-time checkers (Simulator(checks=...)): races by happens-before
** over vector clocks, never-written reads and NaN poisoning, semaphores and events left
** over, capacity and placement rules, NaN/Inf births, dead writes; and the DMA modes.
**
** Every hook is called as `if (BS_UNLIKELY(sim->chk)) ...`: with no check and the
** default modes sim->chk is NULL and a run pays one predictable branch per hook.
** Findings are collected in the checker (bs_sim_nfinding/bs_sim_finding); with
** opts.strict the first one fails the run with BS_E_CHECK.
**
** Threads of the happens-before relation, per core: the six engines (Pool, Activation,
** PE, DMA, DVE, SP), the rendezvous thread (ALL/Unassigned and structured-control
** instructions, which join every engine before and after them), and one thread per DMA
** queue (descriptors of fired DMA blocks). docs/DESIGN.md ("Checkers") explains the
** clocks and the shadow state. */
#ifndef BS_VM_CHECK_H
#define BS_VM_CHECK_H

#include "vm.h"

/* Findings carry BS_FINDING_NDETAIL int64 detail slots, BS_FD_* (bs_enums.def), with the
** sub-kind BS_FINDING_* in slot BS_FD_SUB. */

typedef struct bs_chk bs_chk;

/* Lifecycle (sim.c): new when any check or non-default mode is asked for. */
bs_status bs_chk_new(bs_sim *sim, bs_error *err);
void      bs_chk_free(bs_sim *sim);
/* After bs_sim_reset's memory reset: clear the checker; poison memory (uninit = nan). */
bs_status bs_chk_reset(bs_sim *sim, bs_error *err);
/* Start of bs_sim_run: static checks once per run (capacity, unreachable waits). */
bs_status bs_chk_run_start(bs_sim *sim, bs_error *err);
/* The run finished: leftover semaphores/events, unread writes. */
bs_status bs_chk_run_end(bs_sim *sim, bs_error *err);

/* interp.c: insn (block offset in frame f) is about to run; its waits hold. Picks its
** thread, joins engines for a rendezvous, acquires its waits' clocks. */
void      bs_chk_begin(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn);
/* collective.c: the running core's collective does the exchange of its whole group.
** Each other member m (at its collective insn, its waits satisfied: the group is ready)
** joins first: its instruction begins on its thread, whose clock joins the running
** thread's. Once all have, each member's operands are accessed on its own thread holding
** the group's clock (bs_chk_as; bs_chk_restore gives back the thread it returns). */
void      bs_chk_join(bs_sim *sim, bs_core *m, int32_t insn);
int32_t   bs_chk_as(bs_sim *sim, bs_core *m, int32_t insn);
void      bs_chk_restore(bs_sim *sim, int32_t tid);
/* insn completes (before its updates are applied). */
void      bs_chk_complete(bs_sim *sim, bs_core *c, const bs_frame *f, int32_t insn);
/* A DMATrigger fires DMA block `blk` (before its waits are consumed). */
void      bs_chk_dma_fire(bs_sim *sim, bs_core *c, int32_t trigger, int32_t blk);
/* The fired DMA block of frame f ends (before its updates). */
void      bs_chk_dma_end(bs_sim *sim, bs_core *c, const bs_frame *f);

/* defer.c: a deferred DMA instruction (blk < 0) or fired block transfers now. */
void      bs_chk_defer(bs_sim *sim, bs_core *c, int32_t insn, int32_t blk);

/* sync.c: update u was applied to core t (semaphore value before it in `before`). */
void      bs_chk_update(bs_sim *sim, const bs_core *t, const bs_sync *u, uint32_t before);

/* exec.c: operand j of insn resolved to view v (offs: gathered offsets or NULL). */
bs_status bs_chk_access(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                        const int64_t *offs, bs_error *err);
/* gather.c: the gather family's part v of operand j of insn (offs: gathered offsets or
** NULL) -- a row it moved, an index tensor -- was read (rd) and/or written (wr): races and
** dead writes, as bs_chk_access for an ordinary operand. */
bs_status bs_chk_touch(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                       const int64_t *offs, int rd, int wr, bs_error *err);
/* gather.c: the capacity rules (checks "capacity") on the whole of operand j, resolved to
** view v (offs: gathered offsets or NULL), as bs_chk_access applies them. */
bs_status bs_chk_capacity(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                          const int64_t *offs, bs_error *err);
/* exec.c/host.c: the kernel of insn wrote its outputs (views still as resolved). */
bs_status bs_chk_outputs(bs_sim *sim, bs_core *c, int32_t insn, const bs_kctx *k,
                         bs_error *err);
/* A NaN/Inf in out (outs[j] of insn, location loc) was born there unless `inherited` (one
** of the inputs held one): checks "nan" (exec.c via bs_chk_outputs; gather.c per row). */
bs_status bs_chk_born(bs_sim *sim, bs_core *c, int32_t insn, int32_t j, int32_t loc,
                      const bs_view *out, int inherited, bs_error *err);
/* 1 if a float view holds a NaN or Inf. */
int       bs_chk_nonfinite(const bs_view *v);
/* Operand j of insn accumulates into view v: a finding when v holds never-written bytes
** (checks "uninitialized"; why: appended to the message). */
bs_status bs_chk_accumulate_into(bs_sim *sim, bs_core *c, int32_t insn, int j,
                                 const bs_view *v, const char *why, bs_error *err);
/* exec.c: operand j of insn read never-written bytes. */
bs_status bs_chk_uninit(bs_sim *sim, bs_core *c, int32_t insn, int j, const bs_view *v,
                        bs_error *err);

/* check_regs.c: checks="uninit_regs". new/free/reset of core c's state (sim.c); a
** register read and write through core c's current slot (declared in vm.h for its inline
** accessors); the reads noted since
** the last flush become findings (interp.c; insn: the instruction completing, or -1). */
bs_status bs_regchk_new(bs_sim *sim, bs_core *c, bs_error *err);
void      bs_regchk_free(bs_core *c);
void      bs_regchk_reset(const bs_sim *sim, bs_core *c);
bs_status bs_chk_reg_flush(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);

#endif
