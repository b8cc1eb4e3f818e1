/* vm/check_int.h -- what the checker's three files share (not for other rooms: they
** call the hooks of check.h): the checker's state, its memory records and the finding
** helpers.
**   vm/check.c         the hooks on memory and outputs, findings, lifecycle and results
**   vm/hb.c            happens-before: vector clocks, semaphore histories, per-space
**                      access records, races and dead writes
**   vm/check_static.c  the capacity and engine/memory rules, unreachable waits */
#ifndef BS_VM_CHECK_INT_H
#define BS_VM_CHECK_INT_H

#include "check.h"

#define CHK_RING       8         /* semaphore history entries */
#define CHK_READERS    6         /* reader epochs per record */
#define CHK_FIXED      7         /* threads per core before the DMA queues */
#define CHK_RDV        6         /* the rendezvous thread's slot */
#define CHK_MAX_FIND   1000
#define CHK_MAX_RECS   65536     /* per space; past it the oldest read-only record goes */
#define CHK_BANK       2048      /* PSUM bank bytes per partition (gen1..gen4) */

#define MASK(name) (1u << BS_CHECK_##name)

_Static_assert(BS_FD_OPERAND + 1 == BS_FINDING_NDETAIL, "detail slots (bs_enums.def FD)");

typedef struct chk_ep { uint32_t tid, clk; int32_t core, insn; } chk_ep;

typedef struct chk_geom {
    int64_t p0, p1, b0, b1;      /* box: partitions [p0,p1), bytes [b0,b1) of the space */
    int64_t off;                 /* first element's byte offset in the space */
    int64_t num[BS_MAX_DIMS], stride[BS_MAX_DIMS];
    int32_t ndim, isz;
    int32_t dense;               /* touches every byte of its box */
    int32_t exact;               /* 0: a gathered pattern, known by its box only */
} chk_geom;

typedef struct chk_rec {
    chk_geom g;
    int32_t  has_w, wread, wloc, nr, dead, live;
    uint32_t stamp;                  /* last scan that visited it */
    chk_ep   w;
    chk_ep   r[CHK_READERS];
} chk_rec;

typedef struct chk_bucket {
    int32_t *ids;                /* records whose byte range meets this bucket */
    int32_t  n;
    size_t   cap;                /* bytes */
} chk_bucket;

typedef struct chk_space {
    chk_rec *recs;               /* slots; freed ones are listed in free_ids */
    int32_t  n, live;            /* slots used (high-water), live records */
    size_t   cap;                /* bytes */
    int32_t *free_ids;
    int32_t  nfree;
    size_t   free_cap;           /* bytes */
    chk_bucket *bk;              /* nb buckets of 2^shift bytes (bucket_lo) */
    int32_t  nb, shift, linear;
    int64_t  pitch;
} chk_space;

typedef struct chk_sem {
    int32_t  n, head;            /* entries; ring index of the oldest */
    uint32_t base_value;         /* value before the oldest entry */
    uint32_t val[CHK_RING];
    uint32_t vc[];               /* (CHK_RING + 1) x N: entries, then the base clock */
} chk_sem;

typedef struct chk_finding {
    int32_t check;
    char   *msg;
    int64_t d[BS_FINDING_NDETAIL];
} chk_finding;

struct bs_chk {
    uint32_t     mask;
    int32_t      T, N, S;        /* threads per core, all threads, spaces per core */
    uint32_t    *vc;             /* N x N */
    uint32_t    *tmp;            /* N */
    int32_t      cur;            /* thread whose updates are being applied */
    chk_sem    **sems;           /* ncores x BS_NUM_SEMS, allocated on first update */
    uint32_t   **evc;            /* ncores x BS_NUM_EVENTS clocks, allocated on first set */
    chk_space   *spaces;         /* ncores x S, then one per location (shared DRAM), then the
                                    all-cores DRAM arena */
    int32_t      nspaces;
    chk_finding *f;
    int32_t      nf;
    size_t       fcap;           /* bytes */
    int64_t      dropped;
    uint64_t    *seen;           /* open-addressing set of reported keys (0 = empty) */
    size_t       nseen, seen_cap;/* entries, slots (power of 2) */
    int32_t      started, ended;
    uint32_t     stamp;          /* scan generation (chk_rec.stamp) */
};

typedef struct chk_where {
    chk_space *sp;
    const uint8_t *base;
    int64_t pitch;
    int64_t rp, rb;              /* the location's first partition and byte in the space */
    int64_t size;                /* bytes of a private or DRAM buffer */
    int32_t placed;
} chk_where;

/* {=== Findings (check.c) ===} */

/* 1 the first time `key` is seen this run (report), 0 after. */
int       bs_chk_seen_add(bs_chk *k, uint64_t key);
/* Every detail slot -1 (not applicable). */
void      bs_chk_detail_init(int64_t *d);
/* Record a finding; with strict=True fail the run with it. `insn` locates the error. */
bs_status bs_chk_add_finding(bs_sim *sim, int32_t check, const int64_t *d, int32_t core,
                             int32_t insn, const char *msg, bs_error *err);
/* "core k, function 'f', block 'b', position p, instruction 'n' (Op, Engine)"; tid < 0:
** the instruction's engine instead of the checker's thread. */
void      bs_chk_name_insn(const bs_sim *sim, int32_t core, int32_t insn, int32_t tid,
                           char *buf, size_t n);

/* {=== Happens-before (hb.c) ===} */

/* A semaphore history starts again at `value` with an empty clock. */
void      bs_chk_sem_restart(bs_chk *k, chk_sem *s, uint32_t value);
/* The space of core c's store st and where its location lies in it. */
void      bs_chk_where_of(bs_sim *sim, bs_core *c, const bs_store *st, chk_where *w);
/* The box and pattern of view v (offs: gathered offsets or NULL) in w's space. */
void      bs_chk_geom_of(const chk_where *w, const bs_store *st, const bs_view *v,
                         const int64_t *offs, chk_geom *g);
/* Operand access of insn on core c by the current thread: compared with the space's
** records (races, dead writes), then recorded. rd/wr: it reads/writes; loc names the
** operand's location, wloc the store written. */
bs_status bs_chk_shadow_access(bs_sim *sim, bs_core *c, int32_t insn, const chk_where *w,
                               const chk_geom *g, int rd, int wr, int32_t loc, int32_t wloc,
                               bs_error *err);
/* End of run: every write nothing read (outputs of the kernel excepted). */
bs_status bs_chk_unread_writes(bs_sim *sim, bs_error *err);

/* {=== Static checks (check_static.c) ===} */

/* Operand j of insn (location o, box g): start partition and PSUM bank rules. */
bs_status bs_chk_capacity_access(bs_sim *sim, bs_core *c, int32_t insn, int j,
                                 const bs_opnd *o, const chk_where *w, const chk_geom *g,
                                 bs_error *err);

#endif
