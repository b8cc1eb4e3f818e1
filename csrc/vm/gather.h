/* vm/gather.h -- what the gather family's files share (gather.c: operands, indices and
** rows; gather_dyn.c: TensorCopyDynamicSrc/Dst). Private to csrc/vm/gather*.c. */
#ifndef BS_VM_GATHER_H
#define BS_VM_GATHER_H

#include "vm.h"

typedef struct gx_op {
    bs_view  v;
    int64_t *offs;        /* non-NULL: gathered copy of a non-linear pattern */
    int32_t  j;           /* operand position in ins (j) or outs (BS_OUT_OPERAND + j) */
} gx_op;

typedef struct gx_index {
    int64_t *val;         /* n values; -1 = skip */
    int64_t  n;
    int64_t  skipped;     /* out-of-bounds indices skipped (oob_is_err false) */
} gx_index;

/* A failure naming operand `pos` (ins j or BS_OUT_OPERAND + j) of the instruction. */
bs_status gx_fail_opnd(bs_sim *sim, bs_core *c, int32_t insn, int32_t pos, bs_status st,
                       bs_error *err);
/* Operand `pos` as a view (a gathered copy when its pattern is not linear). */
bs_status gx_resolve(bs_sim *sim, bs_core *c, int32_t insn, int32_t pos, gx_op *g,
                     bs_error *err);
/* Report to the checkers that the instruction read/wrote view v of operand g. */
bs_status gx_touch(bs_sim *sim, bs_core *c, int32_t insn, const gx_op *g, const bs_view *v,
                   int rd, int wr, bs_error *err);
/* Operand position pos (ins j or BS_OUT_OPERAND + j) as an index into the operands. */
int32_t gx_pos(const bs_sim *sim, int32_t insn, int32_t pos);
/* checks "nan": view v of operand pos (an output) holds a NaN/Inf its sources did not. */
bs_status gx_born(bs_sim *sim, bs_core *c, int32_t insn, int32_t pos, const bs_view *v,
                  int inherited, bs_error *err);
/* A never-written read of view v of operand k (checks and uninitialized=). */
bs_status gx_check_init(bs_sim *sim, bs_core *c, int32_t insn, int32_t k, const bs_view *v,
                        bs_error *err);
/* The indices in view iv (operand ins[k]) against an axis of `size`. */
bs_status gx_read_indices(bs_sim *sim, bs_core *c, int32_t insn, int32_t k, const bs_view *iv,
                          int64_t size, int oob_err, int slot, gx_index *ix, bs_error *err);
bs_status gx_move_row(bs_core *c, const bs_view *dst, const bs_view *src, int acc,
                      bs_error *err);
int gx_numeric_pair(const bs_view *a, const bs_view *b);
/* gather_dyn.c */
bs_status gx_run_dynamic(bs_sim *sim, bs_core *c, int32_t insn, int dst_side, int64_t scale,
                         bs_error *err);

#endif
