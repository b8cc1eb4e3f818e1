/* ir/program.h -- the loaded program: flat tables of fixed-layout records.
**
** The Python loader (birsim/_load/passes.py) validates BIR-JSON and fills these tables as
** NumPy structured arrays whose layout it reads from `_birsim.layouts`, which the
** binding generates from the field lists below: the lists are the single source for
** both the C structs and the Python layout. bs_program_new() copies the tables and
** re-verifies every index (house style G6), so garbage bytes give E_PROGRAM, never a
** crash. Cross references are indices into the other tables; names are byte offsets
** into `strings` (NUL-terminated). A program is immutable after loading.
**
** Field types: I32 = int32_t, I64 = int64_t, F64 = double. */
#ifndef BS_IR_PROGRAM_H
#define BS_IR_PROGRAM_H

#include "../core/common.h"
#include "../core/error.h"

typedef int32_t bs_I32;
typedef int64_t bs_I64;
typedef double  bs_F64;

/* Module header (exactly one record). */
#define BS_MODULE_FIELDS(F, A) \
    F(I32, arch)          /* BS_ARCH_* */ \
    F(I32, entry)         /* entry function index */ \
    F(I32, naxes)         /* loop-axis slots (one per Loop/DynamicForLoop) */ \
    F(I32, axis_names)    /* ipool: naxes string offsets */ \
    F(I32, ntriggers)     /* DMATrigger cursor slots */ \
    F(I32, nentries)      /* one program per core: core k runs funcs[ipool[entries + k]] */ \
    F(I32, entries)       /* ipool offset of nentries function indices (0 = every core */ \
    F(I32, pad_)          /* runs `entry`); functions carry their program in `prog` */

/* One function (functions first, then nki_functions). */
#define BS_FUNC_FIELDS(F, A) \
    F(I32, name) \
    F(I32, region)        /* its top-level blocks */ \
    F(I32, set0)          /* its tensor sets: sets[set0 .. set0+nset) */ \
    F(I32, nset) \
    F(I32, reg0)          /* its registers: regs[reg0 .. reg0+nreg) */ \
    F(I32, nreg) \
    F(I32, prog)          /* per-core program it belongs to (0 .. nentries-1; 0 if none) */

/* A tensor (memory_location_set). */
#define BS_SET_FIELDS(F, A) \
    F(I32, name) \
    F(I32, func) \
    F(I32, kind)          /* BS_TKIND_* */ \
    F(I32, io)            /* 0 internal, 1 input, 2 output (entry function only) */ \
    F(I32, dtype) \
    F(I32, shared)        /* addr_space Shared (DRAM only) */ \
    F(I32, ndim) \
    F(I32, loc0)          /* its locations: locs[loc0 .. loc0+nloc) */ \
    F(I32, nloc) \
    F(I32, alias)         /* an output of a must-alias pair: its input set (one buffer), else -1 */ \
    A(I64, shape, BS_MAX_SHAPE)

/* A memory location. Bytes are a flat space of parts*bpp bytes, partition-major. */
#define BS_LOC_FIELDS(F, A) \
    F(I32, name) \
    F(I32, set) \
    F(I32, memtype)       /* BS_MEM_DRAM, BS_MEM_SB or BS_MEM_PSUM (no-data types read as DRAM) */ \
    F(I32, placed)        /* SB/PSUM 1: at (base, addr) in the core's SBUF/PSUM (may alias); */ \
                          /* DRAM 1: at addr in the core's DRAM arena (may alias); DRAM 2: */ \
                          /* at addr in the DRAM arena of all cores (one tensor of all programs) */ \
    F(I64, parts)         /* dims[0] */ \
    F(I64, bpp)           /* dims[1]: bytes per partition */ \
    F(I64, base)          /* first partition (placed only) */ \
    F(I64, addr)          /* byte address inside each partition / in the arena (placed only) */

/* A register: one cell per core, shared by the core's engines. */
#define BS_REG_FIELDS(F, A) \
    F(I32, name) \
    F(I32, func) \
    F(I32, dtype)         /* int32, uint32, float32, int64 or uint64 */ \
    F(I32, wide)          /* 64-bit */

/* A region: the body of a function, loop, or DMA block. Its blocks are contiguous. */
#define BS_REGION_FIELDS(F, A) \
    F(I32, block0) \
    F(I32, nblock) \
    F(I32, owner)         /* owning instruction, -1 for a function body */ \
    F(I32, func)          /* function whose names the region uses */

/* A basic block. Its instructions are contiguous. */
#define BS_BLOCK_FIELDS(F, A) \
    F(I32, name) \
    F(I32, func) \
    F(I32, region) \
    F(I32, insn0) \
    F(I32, ninsn) \
    F(I32, pad_)

/* One wait or update of a sync_info. */
#define BS_SYNC_FIELDS(F, A) \
    F(I32, type)          /* BS_SYNCTYPE_event / _semaphore */ \
    F(I32, id)            /* < 256 */ \
    F(I32, mode)          /* BS_WAIT_* for waits, BS_UPDATE_* for updates */ \
    F(I32, reg)           /* sem-ge-reg: register index, else -1 */ \
    F(I32, target_core)   /* updates: core index, -1 = this core */ \
    F(I32, pad_) \
    F(I64, value)

/* An operand (one entry of ins/outs). */
#define BS_OPND_FIELDS(F, A) \
    F(I32, kind)          /* BS_OPND_* */ \
    F(I32, dtype)         /* how memory is read/written; immediates: their dtype */ \
    F(I32, loc)           /* APs: memory location; register_access: register index */ \
    F(I32, ndim)          /* APs: number of [step, num] pairs, 1..5 */ \
    A(I64, step, BS_MAX_DIMS)   /* elements; step[0] (partition) >= 0 */ \
    A(I64, num, BS_MAX_DIMS)    /* >= 1 */ \
    F(I64, offset)        /* APs: offset in elements of the operand's dtype when offset_expr < 0 */ \
    F(I32, offset_expr)   /* APs: expression giving the element offset, or -1 */ \
    F(I32, reg)           /* register_ap: register added to the start (elements), else -1 */ \
    F(I64, const_ap_offset)     /* register_ap: elements added to the start */ \
    A(I32, addrs, BS_MAX_DIMS)  /* symbolic_ap: per-dim expression (x step), -1 = none */ \
    F(I32, arr_off)       /* imm_array: first value in fpool */ \
    F(I32, arr_len) \
    F(F64, imm)           /* imm_value as a double */ \
    F(I64, imm_bits)      /* imm_value as an integer (exact when imm_is_int) */ \
    F(I32, imm_is_int)    /* the JSON value was an integer */ \
    F(I32, pad_)

#define BS_NSLOT_i 8
#define BS_NSLOT_f 4
#define BS_NSLOT_x 4

/* An instruction. Its op-specific slots i[], f[], x[] are named per opcode by the
** BS_PARAM rows of bs_ops.def (read them with BS_PI/BS_PF/BS_PX below); undeclared
** slots are 0 (x[]: -1), which the verifier checks. `list`/`flist` per opcode: the Notes
** of bs_ops.def. */
#define BS_INSN_FIELDS(F, A) \
    F(I32, op)            /* bs_opcode */ \
    F(I32, engine)        /* BS_ENGINE_* */ \
    F(I32, name) \
    F(I32, func)          /* function whose names it uses */ \
    F(I32, block)         /* its block */ \
    F(I32, nin) \
    F(I32, nout) \
    F(I32, opnd)          /* first operand: ins at opnds[opnd..], then outs */ \
    F(I32, nwait) \
    F(I32, nupd) \
    F(I32, sync)          /* first sync record: waits, then updates */ \
    F(I32, body)          /* region: loop body, DMABlock descriptors; else -1 */ \
    F(I32, target)        /* block: branch target / on_true; function: Call, NKIKernel */ \
    F(I32, target2)       /* block: on_false */ \
    F(I32, list)          /* ipool offset of the op's integer list */ \
    F(I32, nlist) \
    F(I32, flist)         /* fpool offset of the op's float list */ \
    F(I32, nflist) \
    F(I32, str)           /* string: CustomOp/BIRKernel kernel name, else -1 */ \
    F(I32, str2)          /* string: kernel_sim config JSON (attrs), else -1 */ \
    F(F64, lat)           /* predicted_latency_ns (timing="compiler"), else -1 */ \
    A(I32, x, BS_NSLOT_x) /* expression indices, -1 = none */ \
    A(I64, i, BS_NSLOT_i) /* op-specific integers */ \
    A(F64, f, BS_NSLOT_f) /* op-specific floats */

/* Named parameter slots, from the BS_PARAM rows of bs_ops.def: BS_Pi_<Op>_<field> is the
** index of an i[] slot (BS_Pf_ f[], BS_Px_ x[]). A name of the wrong slot kind, or of
** another opcode, does not compile. */
enum {
#define BS_PARAM(op, field, slot, index, note) BS_P##slot##_##op##_##field = (index),
#include "../bs_ops.def"
    BS_P__END
};
#define BS_PI(in, op, field) ((in)->i[BS_Pi_##op##_##field])
#define BS_PF(in, op, field) ((in)->f[BS_Pf_##op##_##field])
#define BS_PX(in, op, field) ((in)->x[BS_Px_##op##_##field])
#define BS_PXI(op, field)    BS_Px_##op##_##field      /* index into bs_kctx.xval */

/* The BS_PARAM rows as data (ir/program.c), for the verifier and the binding. */
typedef struct bs_paraminfo {
    int32_t     op;
    char        slot;      /* 'i', 'f' or 'x' */
    int32_t     index;
    const char *field;
    const char *note;      /* what the slot holds (bs_ops.def), "" if nothing to add */
} bs_paraminfo;
extern const bs_paraminfo bs_param_table[];
extern const int32_t bs_param_count;

/* A DMA queue. */
#define BS_QUEUE_FIELDS(F, A) \
    F(I32, name) \
    F(I32, sems)          /* ipool: semaphore ids of `semaphores` */ \
    F(I32, nsems) \
    F(I32, special)       /* ipool: ids of `use_special_sema` */ \
    F(I32, nspecial) \
    F(I32, pad_)

/* Affine expressions live in `exprs` (int64) as postfix code. An expression index e
** points at a length word n, followed by n/2 (op, arg) pairs. The opcodes:
**   BS_XOP(NAME, code)                                                       effect */
#define BS_XOPS(X) \
    X(CONST, 1)       /* push arg */ \
    X(IV, 2)          /* push env[arg] (loop axis slot) */ \
    X(REG, 3)         /* push register arg (signed, at its dtype) */ \
    X(SHARD, 4)       /* push this core's rank */ \
    X(ADD, 5)         /* pop b, a; push a + b */ \
    X(MUL, 6)         /* top *= arg */ \
    X(FLOORDIV, 7)    /* top = floor(top / arg), arg > 0 */ \
    X(MOD, 8)         /* top = top mod arg (non-negative), arg > 0 */
enum {
#define BS_XOP_ENUM(name, code) BS_X_##name = code,
    BS_XOPS(BS_XOP_ENUM)
#undef BS_XOP_ENUM
    BS_X__END
};

#define BS_DECL_F(type, name) bs_##type name;
#define BS_DECL_A(type, name, n) bs_##type name[n];
typedef struct bs_module { BS_MODULE_FIELDS(BS_DECL_F, BS_DECL_A) } bs_module;
typedef struct bs_func   { BS_FUNC_FIELDS(BS_DECL_F, BS_DECL_A) } bs_func;
typedef struct bs_set    { BS_SET_FIELDS(BS_DECL_F, BS_DECL_A) } bs_set;
typedef struct bs_loc    { BS_LOC_FIELDS(BS_DECL_F, BS_DECL_A) } bs_loc;
typedef struct bs_reg    { BS_REG_FIELDS(BS_DECL_F, BS_DECL_A) } bs_reg;
typedef struct bs_region { BS_REGION_FIELDS(BS_DECL_F, BS_DECL_A) } bs_region;
typedef struct bs_block  { BS_BLOCK_FIELDS(BS_DECL_F, BS_DECL_A) } bs_block;
typedef struct bs_sync   { BS_SYNC_FIELDS(BS_DECL_F, BS_DECL_A) } bs_sync;
typedef struct bs_opnd   { BS_OPND_FIELDS(BS_DECL_F, BS_DECL_A) } bs_opnd;
typedef struct bs_insn   { BS_INSN_FIELDS(BS_DECL_F, BS_DECL_A) } bs_insn;
typedef struct bs_queue  { BS_QUEUE_FIELDS(BS_DECL_F, BS_DECL_A) } bs_queue;
#undef BS_DECL_F
#undef BS_DECL_A

/* The list of tables: X(name, record type, field list). Used by the loader interface
** (bs_program_parts), the verifier and the binding's layout export. */
#define BS_TABLES(X) \
    X(module,  bs_module, BS_MODULE_FIELDS) \
    X(funcs,   bs_func,   BS_FUNC_FIELDS) \
    X(sets,    bs_set,    BS_SET_FIELDS) \
    X(locs,    bs_loc,    BS_LOC_FIELDS) \
    X(regs,    bs_reg,    BS_REG_FIELDS) \
    X(regions, bs_region, BS_REGION_FIELDS) \
    X(blocks,  bs_block,  BS_BLOCK_FIELDS) \
    X(syncs,   bs_sync,   BS_SYNC_FIELDS) \
    X(opnds,   bs_opnd,   BS_OPND_FIELDS) \
    X(insns,   bs_insn,   BS_INSN_FIELDS) \
    X(queues,  bs_queue,  BS_QUEUE_FIELDS)

/* Raw tables handed to bs_program_new (borrowed; copied unless `borrow`). */
typedef struct bs_program_parts {
#define BS_PART(name, type, fields) const type *name; int64_t n_##name;
    BS_TABLES(BS_PART)
#undef BS_PART
    const int64_t *exprs;   int64_t n_exprs;
    const int64_t *ipool;   int64_t n_ipool;
    const double  *fpool;   int64_t n_fpool;
    const char    *strings; int64_t n_strings;  /* must end with NUL */
    int32_t borrow;         /* 1: the program points at these tables (when each is aligned
                               for its records) instead of copying them; the caller keeps
                               them alive and unchanged until bs_program_free */
} bs_program_parts;

/* Queue ids inside a block: the engine (0..6), and the rendezvous queue. */
#define BS_Q_RDV 7

typedef struct bs_program {
#define BS_PART(name, type, fields) type *name; int32_t n_##name;
    BS_TABLES(BS_PART)
#undef BS_PART
    int64_t *exprs;   int64_t n_exprs;
    int64_t *ipool;   int64_t n_ipool;
    double  *fpool;   int64_t n_fpool;
    char    *strings; int64_t n_strings;
    int32_t  borrowed;     /* the tables above are the caller's (bs_program_parts.borrow) */
    /* derived by bs_program_new; owned */
    uint8_t *queue;        /* per insn: BS_Q_RDV or its engine's queue */
    int32_t *qnext;        /* per insn: block offset of the next insn in the same queue, or ninsn */
    int32_t *qfirst;       /* per block x BS_NUM_ENGINES: first offset per queue, or ninsn */
    uint8_t *block_plain;  /* per block: 1 if no insn has sync_info or is a DMATrigger */
    int64_t  max_sbuf_parts;
} bs_program;

/* Copy and verify `parts`. On success *out owns the copy. On failure returns E_PROGRAM
** (or E_NOMEM) with err naming the table, record and field. */
bs_status bs_program_new(bs_program **out, const bs_program_parts *parts, bs_error *err);
void      bs_program_free(bs_program *prog);      /* NULL-safe */
/* ir/verify.c: the checks bs_program_new runs on the copied tables (E_PROGRAM). */
bs_status bs_program_verify(const bs_program *p, bs_error *err);

static inline const char *bs_str(const bs_program *p, int32_t off)
{
    return (off >= 0 && off < p->n_strings) ? p->strings + off : "?";
}

/* Write "function 'f', block 'b', instruction 'i' (Opcode)" into err's location fields
** and prefix for messages; returns err for chaining. */
bs_error *bs_error_at_insn(bs_error *err, const bs_program *p, int32_t insn);

/* Evaluate expression `e` with an environment: returns E_SIM with a message naming the
** axis when an axis is not live. */
typedef struct bs_expr_env {
    const int64_t *iv;        /* per axis slot */
    const uint8_t *live;      /* per axis slot: 1 while its loop runs */
    int64_t (*reg_read)(void *ctx, int32_t reg);
    void    *ctx;
    int64_t  rank;
} bs_expr_env;
bs_status bs_expr_eval(const bs_program *p, int32_t e, const bs_expr_env *env,
                       int64_t *out, bs_error *err);

#endif
