/* kernels/kaccum.h -- the per-engine accumulator (k_accum.c; docs/spec/machine-model.md §5
** EngineAccumulationType, §6.1; docs/spec/nki-isa-semantics.md §1.6).
**
** Each core has one fp32 accumulator lane per partition on each compute engine that has
** one (Pool, Activation, DVE: bs_kstate.pool_acc/act_acc/dve_acc). An instruction uses
** the accumulator of the engine it runs on (Unassigned/ALL: the opcode's own engine).
** Lane p is the p-th partition of the instruction's output access pattern. With reduce
** op R (bs_alu; add unless `reduce_op` says otherwise), identity e (the reset value) and
** fold = R folded over lane p's results (fp32, before the cast to the output dtype) in
** row-major order from e, the command does:
**     Idle                        nothing
**     Zero                        acc[p] := e                   (results not folded)
**     Accumulate, AddAccumulate   acc[p] := R(acc[p], fold)
**     ZeroAccumulate              acc[p] := R(e, fold)
**     LoadAccumulate              acc[p] := R(load[p], fold)    (load: an operand or key)
** For R = subtract, fold is the results' sum (folded as add) and the command applies
** acc[p] - fold (ZeroAccumulate: e - fold; the lane minus every result).
** State beside the lanes (bs_kstate.acc_mark, per engine): CONSUMED, set by a reader
** (docs/spec/machine-model.md §6.1 "marks it consumed"): the next Accumulate / AddAccumulate starts
** from e instead of acc[p] (reading drains the accumulator); NEGATE, set by an instruction
** with reduce_res_negate (docs/spec/nki-isa-semantics.md §3.9): readers write -acc[p], the lanes
** keep acc[p]. Every command but Idle clears CONSUMED and sets NEGATE to its own flag.
** Use: bs_accum_begin, then bs_accum_row for every chunk of results (or bs_accum_rows for
** a dense block), then bs_accum_end. With Idle, begin does nothing else and `row` is NULL,
** so a kernel's element loop pays one pointer test per chunk. */
#ifndef BS_KERNELS_KACCUM_H
#define BS_KERNELS_KACCUM_H

#include "kernel.h"

/* bs_kstate.acc_mark bits */
enum { BS_ACCM_CONSUMED = 1, BS_ACCM_NEGATE = 2 };

typedef struct bs_accum {
    int64_t  cmd;     /* BS_ACC_* */
    int      negate;  /* reduce_res_negate: readers of this result write -lane (set after begin) */
    uint8_t *mark;    /* the engine's bs_kstate.acc_mark entry */
    int32_t  op;      /* the reduce op R (bs_alu) */
    float    id;      /* its identity e */
    int64_t  np;      /* lanes the instruction covers */
    float   *eng;     /* the engine's accumulator (BS_NUM_PARTITIONS lanes) */
    float   *row;     /* np folds of this instruction's results; NULL: nothing folded */
    float   *load;    /* np LoadAccumulate start values */
} bs_accum;

/* The accumulator of the engine k's instruction runs on (`dflt`, a BS_ENGINE_*, for
** Unassigned/ALL); NULL for an engine without one (PE, DMA, SP). */
float *bs_accum_engine(const bs_kctx *k, int32_t dflt);
/* Its bs_kstate.acc_mark entry (BS_ACCM_* bits); NULL for an engine without one. */
uint8_t *bs_accum_mark(const bs_kctx *k, int32_t dflt);
/* The command an instruction's start value follows: Accumulate / AddAccumulate on a
** consumed accumulator start from the reset value (ZeroAccumulate); others unchanged. */
static inline int64_t bs_accum_from(int64_t cmd, const uint8_t *mark)
{
    if ((cmd == BS_ACC_Accumulate || cmd == BS_ACC_AddAccumulate) && mark != NULL &&
        (*mark & BS_ACCM_CONSUMED))
        return BS_ACC_ZeroAccumulate;
    return cmd;
}

/* 1 if `op` (bs_alu) can be an accumulator's reduce op (add, subtract, mult, max, min,
** abs_max, abs_min, logical_and, logical_or, logical_xor), with its identity in *id. */
int bs_accum_op(int32_t op, float *id);

/* Prepare command `cmd` with reduce op `op` over np lanes on the accumulator of the
** instruction's engine (`dflt` for Unassigned/ALL). LoadAccumulate takes its start values
** from ins[load_j] (an immediate, a register or np values) or, when absent, `load_key`.
** E_UNSUPPORTED for an unknown command or reduce op, or an engine without an
** accumulator; E_SIM for more than BS_NUM_PARTITIONS lanes. */
bs_status bs_accum_start(bs_kctx *k, bs_accum *a, int64_t cmd, int32_t op, int32_t dflt,
                         int32_t load_j, double load_key, int64_t np, const char *what,
                         bs_error *err);
static inline bs_status bs_accum_begin(bs_kctx *k, bs_accum *a, int64_t cmd, int32_t op,
                                       int32_t dflt, int32_t load_j, double load_key,
                                       int64_t np, const char *what, bs_error *err)
{
    a->cmd = cmd;
    a->row = NULL;
    if (BS_LIKELY(cmd == BS_ACC_Idle))            /* the common path: nothing to prepare */
        return BS_OK;
    return bs_accum_start(k, a, cmd, op, dflt, load_j, load_key, np, what, err);
}
/* Fold n results of lane p (0 <= p < np) into the instruction's fold (a->row != NULL). */
void bs_accum_row(bs_accum *a, int64_t p, const float *y, int64_t n);
/* Fold a dense block of P rows of F results, row r into lane r (a->row may be NULL). */
void bs_accum_rows(bs_accum *a, const float *y, int64_t P, int64_t F);
/* Apply the command to the engine accumulator. */
void bs_accum_apply(bs_accum *a);
static inline void bs_accum_end(bs_accum *a)
{
    if (BS_UNLIKELY(a->cmd != BS_ACC_Idle))
        bs_accum_apply(a);
}

/* out0[p, ...] := accumulator lane p of the instruction's engine (`dflt` for
** Unassigned/ALL), broadcast over the partition's elements, cast to out0's dtype. */
bs_status bs_accum_read(bs_kctx *k, int32_t dflt, const char *what, bs_error *err);

#endif
