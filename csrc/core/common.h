/* core/common.h -- limits, tiny macros and the enumerations generated from the .def lists.
** Every core file includes this first. It must not include Python.h or NumPy headers. */
#ifndef BS_CORE_COMMON_H
#define BS_CORE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BS_MAX_DIMS        5      /* access-pattern dimensions */
#define BS_MAX_SHAPE       8      /* tensor_shape rank kept by the core */
#define BS_NUM_SEMS        256
#define BS_NUM_EVENTS      256
#define BS_NUM_ENGINES     8      /* EngineType values; ALL (7) doubles as the rendezvous queue */
#define BS_MAX_FRAMES      256    /* nesting of loops + calls + blocks per core */
#define BS_MAX_CALL_DEPTH  64     /* Call/NKIKernel nesting */
#define BS_MAX_CORES       64     /* cores of one simulator (one program each in a module list) */
#define BS_AP_STEP_LIMIT   (INT64_C(1) << 40)   /* an access pattern's |step| is below this */
#define BS_AP_NUM_MAX      (INT64_C(1) << 31)   /* ... and each num at most this */
#define BS_EXPR_STACK      32     /* affine-expression evaluation stack */
#define BS_KMAX            16     /* operands per instruction side seen by kernels */
#define BS_NUM_PARTITIONS  128
#define BS_OUT_OPERAND     1000   /* operand numbers (errors, findings): ins[k] is k,
                                   ** outs[k] is BS_OUT_OPERAND + k */
#define BS_MAX_OPND_ELEMS  ((int64_t)1 << 24)   /* elements per operand: bounds one
                                                ** instruction's time (~0.1 s) and scratch */

#if defined(__GNUC__)
#define BS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define BS_LIKELY(x)   __builtin_expect(!!(x), 1)
#else
#define BS_UNLIKELY(x) (x)
#define BS_LIKELY(x)   (x)
#endif
#define BS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A portable row loop compiled twice, the AVX2 copy picked at load time where the CPU has
** it (GCC's target_clones): the compiler vectorises that copy 8 lanes wide. The same
** IEEE operations in the same order, each rounded once (-ffp-contract=off: no FMA), so
** the same bits; hosts without AVX-512 get 8 lanes instead of SSE2's 4. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define BS_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BS_AVX2_CLONES
#endif

/* Checked int64 arithmetic where the contract forbids wrap-around (addresses, offsets,
** bounds, trip counts, sizes): nonzero on overflow, *r then holds the wrapped value. */
#define BS_ADD_OVF(a, b, r) __builtin_add_overflow((a), (b), (r))
#define BS_SUB_OVF(a, b, r) __builtin_sub_overflow((a), (b), (r))
#define BS_MUL_OVF(a, b, r) __builtin_mul_overflow((a), (b), (r))

/* double -> int64 without undefined behaviour: truncates toward zero, saturates outside
** [-2^63, 2^63) (+-inf included), NaN gives 0 (README, "Choices"). */
static inline int64_t bs_f64_to_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

#ifdef BS_DEBUG
#include <assert.h>
#define BS_ASSERT(x) assert(x)
#else
#define BS_ASSERT(x) ((void)0)
#endif

typedef enum bs_status {
#define BS_ST(name, exc, msg) BS_##name,
#include "../bs_status.def"
#undef BS_ST
    BS_ST__COUNT
} bs_status;

/* Only for functions that own nothing (house style G7). */
#define BS_TRY(expr) do { bs_status s_ = (expr); if (s_ != BS_OK) return s_; } while (0)

typedef enum bs_opcode {
#define BS_OP(name, sim, fam, handler, sem) BS_OP_##name,
#include "../bs_ops.def"
    BS_OP__COUNT
} bs_opcode;

typedef enum bs_dtype {
#define BS_DT(name, bytes, kind, lanes) BS_DT_##name,
#include "../bs_dtypes.def"
#undef BS_DT
    BS_DT__COUNT
} bs_dtype;

typedef enum bs_alu {
#define BS_ALU(name, cls) BS_ALU_##name,
#include "../bs_alu.def"
#undef BS_ALU
    BS_ALU__COUNT
} bs_alu;

typedef enum bs_act {
#define BS_ACT(name) BS_ACT_##name,
#include "../bs_act.def"
#undef BS_ACT
    BS_ACT__COUNT
} bs_act;

enum {
#define BS_EV(group, name, value) BS_##group##_##name = value,
#include "../bs_enums.def"
#undef BS_EV
    BS_EV__END
};

/* A class letter list: X(letter, meaning). BS_LETTERS(list) is the string of its letters
** in order ("KBNLE"), so letter i of the string names value i of the enumeration. */
#define BS_LETTER_OF(l, meaning) #l
#define BS_LETTERS(list) list(BS_LETTER_OF)

/* Op simulator classes (the sim column of bs_ops.def) and families. */
#define BS_SIM_CLASSES(X) X(K, "own kernel") \
    X(B, "skipped with a note (abstract or unsupported)") X(N, "no-op") \
    X(L, "region loop (re-runs its body)") X(E, "empty (sync_info only)")
enum {
#define BS_SIM_ENUM(l, meaning) BS_SIM_##l,
    BS_SIM_CLASSES(BS_SIM_ENUM)
#undef BS_SIM_ENUM
    BS_SIM__COUNT
};
#define BS_FAMILIES(X) X(abstract) X(stub) X(copy) X(act) X(nop) X(matmul) X(select) \
    X(reg) X(sync) X(reduce) X(eltwise) X(indirect) X(bn) X(collective) X(custom) X(call) \
    X(rng) X(dma) X(term) X(topk) X(loop)
enum {
#define BS_FAM_ENUM(f) BS_FAM_##f,
    BS_FAMILIES(BS_FAM_ENUM)
#undef BS_FAM_ENUM
    BS_FAM__COUNT
};

typedef struct bs_opinfo {
    const char *name;
    int32_t     sim;       /* BS_SIM_* */
    int32_t     family;    /* BS_FAM_* */
    const char *handler;   /* kernel stem, "vm" or "todo" (bs_ops.def) */
    const char *semantics; /* one line (bs_ops.def), "" if none yet */
} bs_opinfo;
extern const bs_opinfo bs_opinfo_table[BS_OP__COUNT];
extern const char *const bs_family_names[BS_FAM__COUNT];

/* Dtype kinds (the kind column of bs_dtypes.def). */
#define BS_DT_KINDS(X) X(U, "unsigned integer") X(S, "signed integer") X(F, "float") \
    X(R, "raw byte") X(P, "packed x4")
enum {
#define BS_DK_ENUM(l, meaning) BS_DK_##l,
    BS_DT_KINDS(BS_DK_ENUM)
#undef BS_DK_ENUM
    BS_DK__COUNT
};
typedef struct bs_dtinfo {
    const char *name;
    int32_t     size;      /* bytes per container */
    int32_t     kind;      /* BS_DK_* */
    int32_t     lanes;     /* logical elements per container */
} bs_dtinfo;
extern const bs_dtinfo bs_dtinfo_table[BS_DT__COUNT];

/* ALU op classes (the cls column of bs_alu.def). */
#define BS_ALU_CLASSES(Y) Y(A, "arithmetic on fp32") Y(B, "bit-vector on integers") \
    Y(C, "compare (1.0/0.0)") Y(U, "unary (ignores the right operand)") \
    Y(X, "not elementwise (TensorReduce only)")
enum {
#define BS_ALUC_ENUM(l, meaning) BS_ALUC_##l,
    BS_ALU_CLASSES(BS_ALUC_ENUM)
#undef BS_ALUC_ENUM
    BS_ALUC__COUNT
};
typedef struct bs_aluinfo { const char *name; int32_t cls; } bs_aluinfo;
extern const bs_aluinfo bs_alu_table[BS_ALU__COUNT];
extern const char *const bs_act_names[BS_ACT__COUNT];

typedef struct bs_archinfo {
    const char *name;
    int32_t level;
    int32_t sbuf_parts;  int64_t sbuf_bpp;
    int32_t psum_parts;  int64_t psum_bpp;
} bs_archinfo;
enum {
#define BS_ARCH(name, level, sp, sb, pp, pb) BS_ARCHI_##name,
#include "../bs_arch.def"
#undef BS_ARCH
    BS_ARCHI__COUNT
};
extern const bs_archinfo bs_arch_table[BS_ARCHI__COUNT];
/* The arch table entry for BS_ARCH_* level `level`, or NULL. */
const bs_archinfo *bs_arch_find(int32_t level);

/* The small enumerations as data (bs_enums.def), for names in messages and for Python. */
typedef struct bs_enuminfo { const char *group; const char *name; int64_t value; } bs_enuminfo;
extern const bs_enuminfo bs_enum_table[];       /* ends with a NULL group */
const char *bs_enum_name(const char *group, int64_t value);   /* "?" if unknown */
/* One more than the largest value of `group`: its size when the values run 0, 1, ... */
int64_t bs_enum_end(const char *group);

#endif
