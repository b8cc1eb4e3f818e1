/* birsim.h -- the public C API of the birsim core: the only header the binding includes.
**
** A bs_program (ir/program.h) is built once from the loader's tables; a bs_sim runs it
** on N cores. bs_sim_run executes in slices (a step budget) so the caller can check for
** interrupts between slices; it never calls back except through the host kernel hook,
** which CustomOp/BIRKernel use to delegate to a kernel_sim. */
#ifndef BIRSIM_H
#define BIRSIM_H

#include "core/common.h"
#include "core/error.h"
#include "core/alloc.h"
#include "ir/program.h"

typedef struct bs_sim bs_sim;

#define BS_TRACE_MAX (INT64_C(1) << 24)     /* trace records per run: 16M, 128 MiB */
#define BS_PRINT_MAX ((size_t)1 << 28)      /* DevicePrint log bytes per run: 256 MiB */

typedef struct bs_sim_opts {
    int32_t  ncores;       /* >= 1 */
    int32_t  schedule;     /* BS_SCHED_* */
    uint64_t seed;         /* for BS_SCHED_random and BS_SCHED_pct */
    uint64_t rng_seed;     /* the device RNG's seed (Rand, Dropout, ...; kernels/rng.h) */
    int64_t  max_steps;    /* instructions + loop trips + taken branches; <= 0: 10^9 */
    int32_t  strict;       /* diagnostics become errors */
    int32_t  trace;        /* record every executed instruction (core, insn), in order */
    int32_t  checks;       /* bit BS_CHECK_* per checker (vm/check.h); 0 = none */
    int32_t  uninit;       /* BS_UNINIT_*: what never-written memory reads as */
    int32_t  dma_mode;     /* BS_DMAMODE_* */
    int32_t  fp8_overflow; /* BS_FP8OVF_*: what a cast into fp8 does with an overflow */
    int32_t  threads;      /* threads for large matmuls, 1..BS_POOL_MAX (0 counts as 1) */
    int64_t  trace_max;    /* most trace records kept per run (<= 0: BS_TRACE_MAX) */
    int64_t  print_max;    /* most DevicePrint log bytes per run (<= 0: BS_PRINT_MAX) */
    int32_t  record;       /* keep the run's scheduling decisions (vm/explore.c) */
    int32_t  pct_depth;    /* BS_SCHED_pct: d, with d - 1 priority change points (0..64) */
    int64_t  pct_steps;    /* BS_SCHED_pct: change points fall in steps [0, pct_steps) */
    int32_t  timing;       /* BS_TIMING_*: the timing model (vm/timing.c); trace implies on */
    int32_t  pe_throttle;  /* timing: TensorE starts at half rate, full after 3 us busy */
} bs_sim_opts;

/* One delegated kernel call (CustomOp / BIRKernel). Inputs are dense, row-major, in the
** operand's dtype; outputs are dense buffers in the output operand's dtype that the host
** fills completely. Pointers are valid only during the call. */
typedef struct bs_host_call {
    const char   *kernel;          /* kernel name */
    const char   *config;          /* JSON text: attrs ("{}" when none) */
    const char   *insn_name;
    int32_t       opcode;
    int32_t       core;            /* index (rank) of the core running the instruction */
    int32_t       nin, nout;
    const void   *in_data[BS_KMAX];
    void         *out_data[BS_KMAX];
    int32_t       in_dtype[BS_KMAX], out_dtype[BS_KMAX];
    int32_t       in_ndim[BS_KMAX],  out_ndim[BS_KMAX];
    int64_t       in_shape[BS_KMAX][BS_MAX_SHAPE];
    int64_t       out_shape[BS_KMAX][BS_MAX_SHAPE];
    int32_t       in_direct[BS_KMAX];   /* 1: in_data points into simulator memory (read-only) */
    int32_t       fp8_overflow;         /* the simulator's BS_FP8OVF_* (bs_host_store_f32) */
} bs_host_call;

/* Returns BS_OK after filling every output, else BS_E_KERNEL with err->msg set (and
** every output buffer untouched). */
typedef bs_status bs_host_kernel_fn(void *ctx, const bs_host_call *call, bs_error *err);
/* For hosts: encode `src` (one fp32 per element of outs[j]) into out_data[j] with the
** simulator's cast rules (RNE, saturating or not by fp8_overflow; as TensorCopy casts). outs[j] must not be a
** packed x4 dtype. */
void bs_host_store_f32(const bs_host_call *call, int32_t j, const float *src);

bs_status bs_sim_new(bs_sim **out, const bs_program *prog, const bs_sim_opts *opts,
                     bs_error *err);
void      bs_sim_free(bs_sim *sim);                    /* NULL-safe */
void      bs_sim_set_host(bs_sim *sim, bs_host_kernel_fn *fn, void *ctx);
/* Whether any instruction of the sim's program is delegated to the host (CustomOp,
** BIRKernel: the `host` handler of bs_ops.def); without one a run needs no host. */
int       bs_sim_has_host_ops(const bs_sim *sim);

/* Start a fresh run: all memory unwritten, registers 0xFFFFFFFF, semaphores/events 0,
** statistics and diagnostics cleared. */
bs_status bs_sim_reset(bs_sim *sim, bs_error *err);

/* Copy `rows` rows of `rowbytes` bytes into location `loc` (row p at byte 0 of partition
** p) on core `core` (-1: every core; shared DRAM is written once), marking them written. */
bs_status bs_sim_write_loc(bs_sim *sim, int32_t core, int32_t loc, const void *data,
                           int64_t rows, int64_t rowbytes, bs_error *err);
/* The reverse; *all_written = 1 if every byte copied had been written (all_written
** NULL: not asked, the shadow is not scanned). */
bs_status bs_sim_read_loc(bs_sim *sim, int32_t core, int32_t loc, void *data,
                          int64_t rows, int64_t rowbytes, int *all_written, bs_error *err);
/* Which of those bytes a run wrote: mask[r * rowbytes + i] = 1 for a written byte, 0 for a
** byte no instruction or input wrote (birsim check gives these BIRSim's 0xFF fill). */
bs_status bs_sim_read_written(bs_sim *sim, int32_t core, int32_t loc, uint8_t *mask,
                              int64_t rows, int64_t rowbytes, bs_error *err);

/* Zero-copy (Simulator(zero_copy=True); vm/zerocopy.c). Lend: make location `loc` (rows x
** rowbytes: the whole location) read the caller's bytes at `data` in place until the next
** bs_sim_unlend or bs_sim_reset, when nothing in the program can ever write it (a static,
** conservative fact), it has one own buffer on one core and `data` is 16-byte aligned;
** *lent = 0 when not (the
** caller copies with bs_sim_write_loc instead). The caller keeps `data` alive and
** unchanged meanwhile. */
bs_status bs_sim_lend_loc(bs_sim *sim, int32_t loc, const void *data, int64_t rows,
                          int64_t rowbytes, int *lent, bs_error *err);
void      bs_sim_unlend(bs_sim *sim);
/* Take: hand location `loc`'s own buffer (rows x rowbytes: the whole location, one core,
** not arena-placed, not a must-alias pair's) to the caller: *buf (its data, `rows *
** rowbytes` bytes, then its shadow; `*bytes` in all, freed with bs_free(*buf) when *heap,
** else bs_pages_free(*buf, *bytes)); the simulator forgets it (the next reset allocates a
** fresh one). Only a location whose every byte was written is taken (as bs_sim_read_loc
** decides it), so what was handed over needs no written() mask. *buf NULL: not taken
** (read it instead). */
bs_status bs_sim_take_loc(bs_sim *sim, int32_t loc, int64_t rows, int64_t rowbytes,
                          void **buf, size_t *bytes, int *heap, bs_error *err);
/* Give location `loc` back a buffer bs_sim_take_loc handed over for it (heap: *heap was
** set), once its taker is done with it (the binding's spares): it becomes loc's own buffer
** again, cleared, if loc has none now. A mapped buffer is kept only for an output no
** instruction reads, under uninitialized="zero": then its data is not cleared (a run that
** leaves bytes unwritten has them zeroed before the host sees them), which saves the new
** pages' faults. 1: kept; 0: not (the caller frees it). Between runs. */
int       bs_sim_give_loc(bs_sim *sim, int32_t loc, void *buf, int heap);
/* A zero_copy Simulator: the buffers of outputs bs_sim_take_loc may hand over are
** allocated from now on as NumPy allocates its own arrays (vm/sim.c, bs_sim_own_alloc). */
void      bs_sim_zero_copy(bs_sim *sim);

/* Run up to `budget` steps, or about 20 ms, whichever comes first (so the caller can
** poll for interrupts). *finished = 1 when every core has finished (or Exit ran).
** A failure leaves memory as it was for inspection. */
bs_status bs_sim_run(bs_sim *sim, int64_t budget, int *finished, bs_error *err);

/* Results and diagnostics of the last run. */
int            bs_sim_exited(const bs_sim *sim);
int64_t        bs_sim_steps(const bs_sim *sim);
const int64_t *bs_sim_op_counts(const bs_sim *sim);      /* BS_OP__COUNT entries */
const int64_t *bs_sim_engine_counts(const bs_sim *sim);  /* BS_NUM_ENGINES entries */
int32_t        bs_sim_ndiag(const bs_sim *sim);
const char    *bs_sim_diag(const bs_sim *sim, int32_t i);
int64_t        bs_sim_diag_dropped(const bs_sim *sim);
const char    *bs_sim_notes(const bs_sim *sim);          /* "<Opcode>;" per stub, in order */
int32_t        bs_sim_ncores(const bs_sim *sim);
/* DevicePrint records of the last run (vm/print.c): each a bs_print_rec followed by
** nbytes of dense row-major data, padded to 8 bytes; *dropped counts records past the cap. */
typedef struct bs_print_rec {
    int32_t core, insn, operand, dtype, ndim, pad_;
    int64_t num[BS_MAX_DIMS];
    int64_t nbytes;
} bs_print_rec;
const uint8_t *bs_sim_prints(const bs_sim *sim, int64_t *len, int64_t *dropped);
/* With opts.trace: one record per executed instruction, in execution order (parallel to
** its (core, insn) pair; at most BS_TRACE_MAX are kept, the rest counted as dropped): its
** modelled start and duration (ns) and the trace indices of the updates that released its
** waits (-1 unused; at most the two latest). */
typedef struct bs_trace_time {
    double  start, dur;
    int32_t src[2];
} bs_trace_time;
/* Hand the last run's trace over without a copy: buf[0] holds its *n (core, insn) pairs,
** buf[1] their bs_trace_time records (either NULL when nothing was recorded), cap[] their
** sizes in bytes; the new owner frees them with bs_free. The trace is left empty and
** without buffers. Only once a run is over (finished or failed), before the next reset. */
void bs_sim_trace_take(bs_sim *sim, void *buf[2], size_t cap[2], int64_t *n,
                       int64_t *dropped);
/* Give back a buffer bs_sim_trace_take handed over (which: 0 pairs, 1 times; cap bytes)
** for the next runs to record into: 1 if the trace took it (it had none), else 0 (the
** caller still owns it). */
int bs_sim_trace_give(bs_sim *sim, int which, void *buf, size_t cap);
/* With opts.timing: the modelled profile of the last run (vm/timing.c). */
#define BS_TM_NHIST 4
typedef struct bs_timing_summary {
    double  total_ns;                        /* last end over all cores */
    double  active_ns[BS_NUM_ENGINES];       /* busy ns per engine, summed over cores */
    int64_t macs;                            /* multiply-accumulates of Matmult */
    int64_t dma_bytes, hbm_bytes;            /* all DMA bytes; those with a DRAM side */
    int64_t dma_hist[BS_TM_NHIST];           /* transfers by bytes/partition: <256, <2K, <4K, >=4K */
    double  pe_tflops_bf16, hbm_gbps;        /* the target's peaks (per core) */
    double  dma_engines_ns;                  /* busy ns of the DMA engines, summed */
    int32_t dma_engines;                     /* DMA engines per core */
} bs_timing_summary;
int bs_sim_timing(const bs_sim *sim, bs_timing_summary *out);   /* 0: timing off */
/* Findings of opts.checks in the order found: finding i's check (BS_CHECK_*), its
** one-line message and BS_FINDING_NDETAIL detail slots (BS_FD_*, -1 where unused).
** Returns 0 when i is out of range. */
#define BS_FINDING_NDETAIL 16
int32_t        bs_sim_nfinding(const bs_sim *sim);
int            bs_sim_finding(const bs_sim *sim, int32_t i, int32_t *check, const char **msg,
                              const int64_t **detail);
int64_t        bs_sim_findings_dropped(const bs_sim *sim);
/* Step debugging (vm/debug.c). bs_sim_run stops right after an instruction whose flag is
** set in `bits` (nbits = n_insns bytes, copied), or after every one with `every`; NULL and 0
** clear. bs_sim_stopped: the instruction the last bs_sim_run stopped after, or -1. */
bs_status       bs_sim_set_breaks(bs_sim *sim, const uint8_t *bits, int64_t nbits, int every,
                                  bs_error *err);
int32_t         bs_sim_stopped(const bs_sim *sim, int32_t *core);
/* The block the innermost frame of `core` is in (-1 when none) and, in
** heads[BS_NUM_ENGINES], the instruction at the head of each engine queue (-1 empty). */
int32_t         bs_sim_queue_heads(const bs_sim *sim, int32_t core, int32_t *heads);
/* The 256 semaphores / events of `core` (NULL for a bad core). */
const uint32_t *bs_sim_sems(const bs_sim *sim, int32_t core);
const uint8_t  *bs_sim_events(const bs_sim *sim, int32_t core);
/* Register value of `reg` on `core` (raw 64-bit cell) in the file of `engine` (an
** EngineType value Pool..SP); any other engine value gives the value most recently
** written by any engine. */
uint64_t       bs_sim_reg(const bs_sim *sim, int32_t core, int32_t reg, int32_t engine);
/* Schedules for exploration (vm/explore.c). BS_SCHED_replay takes its decisions from
** `dec` (n values, copied; kept across resets); with opts.record, bs_sim_decisions gives
** the decisions of the last run (*dropped counts those lost to out-of-memory). */
bs_status      bs_sim_set_decisions(bs_sim *sim, const int32_t *dec, int64_t n, bs_error *err);
/* Change the schedule options of later runs (bs_sim_reset applies them); a replay's
** decisions are dropped (bs_sim_set_decisions gives new ones). */
bs_status      bs_sim_set_schedule(bs_sim *sim, int32_t schedule, uint64_t seed, int32_t record,
                                   int32_t pct_depth, int64_t pct_steps, bs_error *err);
const int32_t *bs_sim_decisions(const bs_sim *sim, int64_t *n, int64_t *dropped);
/* The last instruction `core` completed on each queue (BS_NUM_ENGINES entries, -1 none;
** index 7 the rendezvous queue) and, in *last_any, on any (NULL for a bad core). */
const int32_t *bs_sim_last_done(const bs_sim *sim, int32_t core, int32_t *last_any);

#endif
