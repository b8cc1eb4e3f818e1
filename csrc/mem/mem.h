/* mem/mem.h -- where tensor bytes live (stores) and linear views of access patterns.
**
** A memory location's bytes form a flat space of parts*bpp bytes, partition-major
** (docs/spec/BIR-JSON.md "Access patterns"). Its *store* says where those bytes are right now:
** inside the core's SBUF/PSUM (placed locations, pitch = the SBUF/PSUM partition size,
** so overlapping locations alias), in a private buffer (pitch = bpp), or bound to a
** caller's store during a Call. Every data byte has a shadow byte: 0 = never written.
**
** bs_view_make() turns (store, dtype, ap, start byte) into a bs_view: a base pointer
** plus byte strides, the form kernels consume. All bounds are checked here, so kernels
** never see an address outside a location. */
#ifndef BS_MEM_MEM_H
#define BS_MEM_MEM_H

#include "../core/common.h"
#include "../core/error.h"

/* A per-chunk summary of a big own DRAM buffer's shadow (vm/sim.c keeps one per buffer
** and points its stores at it while it holds): chunk i covers shadow bytes
** [i * BS_SH_CHUNK, (i + 1) * BS_SH_CHUNK). A whole chunk written is recorded here, not in its
** 4 KiB of shadow bytes, so filling a tensor tile by tile, checking what it reads, reading
** it out and clearing it at a reset cost O(chunks) for whole chunks. BS_CH_*: */
#define BS_SH_CHUNK ((int64_t)4096)
enum {
    BS_CH_ZERO,           /* no byte written; shadow bytes all 0 */
    BS_CH_MIXED,          /* the shadow bytes are the truth (some 1) */
    BS_CH_FULL,           /* every byte written; shadow bytes all 0 (never set) */
    BS_CH_FULL_DIRTY      /* every byte written; shadow bytes stale (some 1) */
};
typedef struct bs_chunks {
    uint8_t *state;       /* owned by vm/sim.c: BS_CH_* per chunk */
    uint8_t *shadow;      /* the shadow it summarises (not owned) */
    int64_t  size;        /* its bytes */
    int32_t  on;          /* 1 while stores use it; 0: the shadow bytes are the truth */
} bs_chunks;

typedef struct bs_store {
    uint8_t *data;        /* byte 0 of partition 0 of the location (not owned) */
    uint8_t *shadow;      /* shadow of `data`, same geometry (not owned) */
    bs_chunks *chunks;    /* summary of `shadow` (pitch == bpp), or NULL: bytes alone */
    int64_t  parts;       /* partitions */
    int64_t  bpp;         /* bytes per partition of the location */
    int64_t  pitch;       /* distance in `data` between partitions */
    int32_t  memtype;     /* BS_MEM_DRAM / SB / PSUM */
    int32_t  loc;         /* location index whose bytes these are */
    int32_t  cast;        /* BS_FP8OVF_* of the simulator (copied into views) */
} bs_store;

/* A linear view of an access pattern: element (i0..i{ndim-1}) is at
** data + sum(i_d * stride[d]); its shadow byte(s) at shadow + the same offset.
** Kernels read and write through views only. ndim == 0 marks "not a memory operand". */
typedef struct bs_view {
    uint8_t *data;
    uint8_t *shadow;      /* NULL when not tracked */
    int32_t  dtype;       /* bs_dtype */
    int32_t  ndim;        /* 0..BS_MAX_DIMS */
    int64_t  num[BS_MAX_DIMS];
    int64_t  stride[BS_MAX_DIMS];   /* bytes; may be 0 (broadcast) or negative */
    int64_t  count;       /* product of num */
    int32_t  memtype;
    int32_t  gathered;    /* 1: data is a temporary copy (non-linear pattern) */
    int32_t  cast;        /* BS_FP8OVF_*: how encodes into this view treat fp8 overflow */
} bs_view;

/* Build the view of the access pattern (dtype, ndim, step[] in elements, num[]) whose
** first element starts at byte `start` of the store's flat space. Checks every element
** lies inside the location (E_OOB, message names the failing index and byte) and that
** no element straddles a partition. Returns BS_OK with *linear = 1 when the pattern maps
** to one pointer + strides, or *linear = 0 when it wraps partitions irregularly; then
** use bs_view_gather / bs_view_scatter with `offs` (count byte offsets, caller buffer). */
bs_status bs_view_make(bs_view *v, const bs_store *st, int32_t dtype, int32_t ndim,
                       const int64_t *step, const int64_t *num, int64_t start,
                       int *linear, bs_error *err);

/* A dense one-dimensional view of `count` elements of `dtype` over a scratch buffer
** (no shadow, no memory type): how kernels hand temporaries to the view routines. */
bs_view bs_view_dense(void *buf, int32_t dtype, int64_t count);

/* Byte offsets (into st->data) of every element of a non-linear pattern, row-major. */
void bs_view_offsets(const bs_store *st, int32_t itemsize, int32_t ndim,
                     const int64_t *step, const int64_t *num, int64_t start, int64_t *offs);

/* Collapse adjacent dimensions that are contiguous with each other and drop extents of
** 1, keeping the row-major element order. Makes kernels' innermost rows long. */
void bs_view_normalize(bs_view *v);

/* 1 if any byte any element of `a` touches may also be touched by `b`. Conservative:
** compares byte ranges. */
int bs_view_overlap(const bs_view *a, const bs_view *b);

/* 1 if a and b address exactly the same elements in the same order with the same dtype. */
int bs_view_same(const bs_view *a, const bs_view *b);

/* Shadow helpers: 1 if every byte of every element was written; mark them written. */
int  bs_view_initialized(const bs_view *v);
void bs_view_mark_written(const bs_view *v);

/* Store-aware forms: through st->chunks when the store has one (v must be a linear view
** of st), else the view functions above. */
int  bs_store_initialized(const bs_store *st, const bs_view *v);
void bs_store_mark_written(const bs_store *st, const bs_view *v);

/* Chunk summaries: 1 if every shadow byte in [a, b) is written; mark them written; make the
** shadow bytes the whole truth (whole chunks' bytes set to 1, on = 0); clear everything to
** never written (a reset: only chunks something was written in), with data (non-NULL) of
** the same geometry zeroed in those chunks too. */
int  bs_chunks_written(const bs_chunks *ch, int64_t a, int64_t b);
void bs_chunks_mark(bs_chunks *ch, int64_t a, int64_t b);
void bs_chunks_materialize(bs_chunks *ch);
void bs_chunks_clear(bs_chunks *ch, uint8_t *data);

#endif
