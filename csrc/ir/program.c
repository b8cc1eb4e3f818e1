/* ir/program.c -- copy the loader's tables, verify every cross reference once (ir/verify.c),
** and derive the per-block engine queues. After bs_program_new succeeds the VM may index
** any table with the stored indices without further checks (house style G6). */
#include <stdio.h>
#include "program.h"
#include "../core/alloc.h"

/* {=== Named parameter slots (bs_ops.def BS_PARAM rows) ===} */

#define BS_PARAM(op, field, slot, index, note) \
    _Static_assert((index) >= 0 && (index) < BS_NSLOT_##slot, #op "." #field ": slot out of range");
#include "../bs_ops.def"

const bs_paraminfo bs_param_table[] = {
#define BS_PARAM(op, field, slot, index, note) { BS_OP_##op, #slot[0], (index), #field, note },
#include "../bs_ops.def"
};
/* Opcodes that share code read these fields under one name. */
_Static_assert(BS_Pi_Loop_axis == BS_Pi_DynamicForLoop_axis, "loop axis slot");
_Static_assert(BS_Pi_SwitchQueueInstance_queue == BS_Pi_ResetQueueInstance_queue, "queue slot");

const int32_t bs_param_count = (int32_t)(sizeof bs_param_table / sizeof bs_param_table[0]);

/* {=== Copying ===} */

static bs_status copy_table(void **dst, const void *src, int64_t n, size_t size,
                            const char *what, bs_error *err)
{
    if (n < 0 || n > INT32_MAX)
        return bs_errorf(err, BS_E_PROGRAM, "table %s: bad record count %lld", what, (long long)n);
    if (n > 0 && src == NULL)
        return bs_errorf(err, BS_E_PROGRAM, "table %s: missing data", what);
    *dst = bs_malloc((size_t)n * size);
    if (*dst == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory copying table %s", what);
    if (n > 0)
        memcpy(*dst, src, (size_t)n * size);
    return BS_OK;
}

/* A table the program may point at: records aligned for their type. An empty one points
** at `empty` (never NULL, as a copy's buffer is not; no record is read). */
static const union { max_align_t a; unsigned char b[1024]; } empty;

static int borrowable(const void *src, int64_t n, size_t align)
{
    return n == 0 || (n > 0 && n <= INT32_MAX && src != NULL && (uintptr_t)src % align == 0);
}

static void *borrow(const void *src, int64_t n)
{
    return (void *)(uintptr_t)(n == 0 ? (const void *)&empty : src);
}

static int all_borrowable(const bs_program_parts *parts)
{
    int ok = parts->borrow != 0;
#define BS_PART(name, type, fields) ok = ok && borrowable(parts->name, parts->n_##name, _Alignof(type));
    BS_TABLES(BS_PART)
#undef BS_PART
    return ok && borrowable(parts->exprs, parts->n_exprs, _Alignof(int64_t)) &&
           borrowable(parts->ipool, parts->n_ipool, _Alignof(int64_t)) &&
           borrowable(parts->fpool, parts->n_fpool, _Alignof(double)) &&
           borrowable(parts->strings, parts->n_strings, 1);
}

void bs_program_free(bs_program *p)
{
    if (p == NULL)
        return;
    if (!p->borrowed) {
#define BS_PART(name, type, fields) bs_free(p->name);
        BS_TABLES(BS_PART)
#undef BS_PART
        bs_free(p->exprs);
        bs_free(p->ipool);
        bs_free(p->fpool);
        bs_free(p->strings);
    }
    bs_free(p->queue);
    bs_free(p->qnext);
    bs_free(p->qfirst);
    bs_free(p->block_plain);
    bs_free(p);
}

#define CHECK(cond, ...) do { if (!(cond)) return bs_errorf(err, BS_E_PROGRAM, __VA_ARGS__); } while (0)

/* {=== Derived queue structure ===} */

/* ALL / Unassigned instructions and structured control run as a rendezvous. A
** terminator sits in its engine's queue (a rendezvous on ALL / Unassigned). */
static int is_rendezvous(const bs_insn *in)
{
    int fam = bs_opinfo_table[in->op].family;
    return in->engine == BS_ENGINE_ALL || in->engine == BS_ENGINE_Unassigned ||
           fam == BS_FAM_loop || fam == BS_FAM_call;
}

static bs_status derive(bs_program *p, bs_error *err)
{
    p->queue = bs_calloc((size_t)p->n_insns, 1);
    p->qnext = bs_calloc((size_t)p->n_insns, sizeof(int32_t));
    p->qfirst = bs_calloc((size_t)p->n_blocks * BS_NUM_ENGINES, sizeof(int32_t));
    p->block_plain = bs_calloc((size_t)p->n_blocks, 1);
    if (!p->queue || !p->qnext || !p->qfirst || !p->block_plain)
        return bs_errorf(err, BS_E_NOMEM, "out of memory deriving queues");
    for (int32_t b = 0; b < p->n_blocks; b++) {
        const bs_block *blk = &p->blocks[b];
        int32_t *first = p->qfirst + (size_t)b * BS_NUM_ENGINES;
        int32_t last[BS_NUM_ENGINES];
        int plain = 1;
        for (int q = 0; q < BS_NUM_ENGINES; q++) {
            first[q] = blk->ninsn;
            last[q] = -1;
        }
        int nterm = 0, termq = 0;
        for (int32_t k = 0; k < blk->ninsn; k++) {
            const bs_insn *in = &p->insns[blk->insn0 + k];
            int q = is_rendezvous(in) ? BS_Q_RDV : in->engine;
            /* Terminators come after all the block's other instructions, at most one per
            ** queue (docs/spec/BIR-JSON.md "Several terminators in one block"). */
            if (bs_opinfo_table[in->op].family == BS_FAM_term) {
                CHECK(!(termq & (1 << q)), "blocks[%d]: two terminators on one engine", b);
                termq |= 1 << q;
                nterm++;
            } else {
                CHECK(nterm == 0, "blocks[%d]: a terminator before a non-terminator", b);
            }
            p->queue[blk->insn0 + k] = (uint8_t)q;
            p->qnext[blk->insn0 + k] = blk->ninsn;
            if (last[q] < 0)
                first[q] = k;
            else
                p->qnext[blk->insn0 + last[q]] = k;
            last[q] = k;
            if (in->nwait + in->nupd > 0 || in->op == BS_OP_DMATrigger
                || in->op == BS_OP_CollectiveCompute || in->op == BS_OP_CollectiveSend
                || in->op == BS_OP_CollectiveRecv)
                plain = 0;      /* collectives wait for their group, like a sync wait */
        }
        p->block_plain[b] = (uint8_t)plain;
    }
    return BS_OK;
}

bs_status bs_program_new(bs_program **out, const bs_program_parts *parts, bs_error *err)
{
    bs_program *p = bs_calloc(1, sizeof *p);
    bs_status st;
    if (p == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory");
    if (all_borrowable(parts)) {     /* the caller's tables, read-only from here on */
        p->borrowed = 1;
#define BS_PART(name, type, fields) p->name = borrow(parts->name, parts->n_##name); \
        p->n_##name = (int32_t)parts->n_##name;
        BS_TABLES(BS_PART)
#undef BS_PART
        p->exprs = borrow(parts->exprs, parts->n_exprs);
        p->n_exprs = parts->n_exprs;
        p->ipool = borrow(parts->ipool, parts->n_ipool);
        p->n_ipool = parts->n_ipool;
        p->fpool = borrow(parts->fpool, parts->n_fpool);
        p->n_fpool = parts->n_fpool;
        p->strings = borrow(parts->strings, parts->n_strings);
        p->n_strings = parts->n_strings;
        goto verify;
    }
#define BS_PART(name, type, fields) \
    st = copy_table((void **)&p->name, parts->name, parts->n_##name, sizeof(type), #name, err); \
    if (st != BS_OK) goto fail; \
    p->n_##name = (int32_t)parts->n_##name;
    BS_TABLES(BS_PART)
#undef BS_PART
    st = copy_table((void **)&p->exprs, parts->exprs, parts->n_exprs, sizeof(int64_t), "exprs", err);
    if (st != BS_OK) goto fail;
    p->n_exprs = parts->n_exprs;
    st = copy_table((void **)&p->ipool, parts->ipool, parts->n_ipool, sizeof(int64_t), "ipool", err);
    if (st != BS_OK) goto fail;
    p->n_ipool = parts->n_ipool;
    st = copy_table((void **)&p->fpool, parts->fpool, parts->n_fpool, sizeof(double), "fpool", err);
    if (st != BS_OK) goto fail;
    p->n_fpool = parts->n_fpool;
    st = copy_table((void **)&p->strings, parts->strings, parts->n_strings, 1, "strings", err);
    if (st != BS_OK) goto fail;
    p->n_strings = parts->n_strings;
verify:
    st = bs_program_verify(p, err);
    if (st != BS_OK) goto fail;
    st = derive(p, err);
    if (st != BS_OK) goto fail;
    *out = p;
    return BS_OK;
fail:
    bs_program_free(p);
    return st;
}

/* {=== Names and expressions ===} */

bs_error *bs_error_at_insn(bs_error *err, const bs_program *p, int32_t insn)
{
    const bs_insn *in = &p->insns[insn];
    err->insn = insn;
    err->block = in->block;
    err->func = in->func;
    return err;
}

bs_status bs_expr_eval(const bs_program *p, int32_t e, const bs_expr_env *env,
                       int64_t *out, bs_error *err)
{
    int64_t stack[BS_EXPR_STACK];
    int top = 0;
    int64_t n = p->exprs[e];
    for (int64_t k = e + 1; k < e + 1 + n; k += 2) {
        int64_t op = p->exprs[k], arg = p->exprs[k + 1];
        switch (op) {
        case BS_X_CONST: stack[top++] = arg; break;
        case BS_X_IV:
            if (!env->live[arg])
                return bs_errorf(err, BS_E_SIM, "loop axis '%s' is read outside its loop",
                                 bs_str(p, (int32_t)p->ipool[p->module->axis_names + arg]));
            stack[top++] = env->iv[arg];
            break;
        case BS_X_REG:   stack[top++] = env->reg_read(env->ctx, (int32_t)arg); break;
        case BS_X_SHARD: stack[top++] = env->rank; break;
        case BS_X_ADD:
            top--;
            if (BS_ADD_OVF(stack[top - 1], stack[top], &stack[top - 1]))
                return bs_errorf(err, BS_E_PROGRAM, "an address expression overflows int64");
            break;
        case BS_X_MUL:
            if (BS_MUL_OVF(stack[top - 1], arg, &stack[top - 1]))
                return bs_errorf(err, BS_E_PROGRAM, "an address expression overflows int64 "
                                 "(x %lld)", (long long)arg);
            break;
        case BS_X_FLOORDIV: {
            int64_t a = stack[top - 1], q = a / arg;
            if ((a % arg != 0) && (a < 0))
                q--;
            stack[top - 1] = q;
            break;
        }
        case BS_X_MOD: {
            int64_t r = stack[top - 1] % arg;
            stack[top - 1] = r < 0 ? r + arg : r;
            break;
        }
        default: break;
        }
    }
    *out = stack[0];
    return BS_OK;
}
