/* vm/vm.h -- the simulator's internal state: cores, region frames, engine queues.
**
** Each core runs its own explicit stack of region frames (function body, loop body, call,
** DMA block) rather than C recursion, so cores and engines can interleave one instruction
** at a time and a failure or interrupt can stop anywhere. A frame walks the blocks of its
** region; inside the current block each engine queue has a head, and the scheduler picks
** one ready head per step (docs/spec/BIR-JSON.md "Engines and order inside a block"). */
#ifndef BS_VM_VM_H
#define BS_VM_VM_H

#include "../birsim.h"
#include "../mem/mem.h"
#include "../kernels/kernel.h"
#include "../kernels/rng.h"
#include "../core/pool.h"

typedef struct bs_frame {
    int32_t region;        /* region being walked */
    int32_t owner;         /* instruction that pushed it (Loop, Call, ...), -1 for the entry */
    int32_t bi;            /* current block, as an offset in the region; nblock = finished */
    int32_t started;       /* current block's queue state is initialised */
    int32_t insn0;         /* started: the current block's first instruction */
    int32_t head[BS_NUM_ENGINES];   /* next pending offset per queue (ninsn = empty) */
    int32_t npending;      /* instructions of the block not finished */
    int32_t pc;            /* sequential mode: next offset */
    int32_t seq;           /* block runs sequentially (no sync, in_order schedule) */
    int32_t next;          /* the block's choice: BS_NEXT_* or >= 0 a block offset */
    int32_t chooser;       /* instruction (block offset) that made the choice, -1 */
    int32_t broken;        /* Break ran: no further trips */
    int32_t running;       /* offset of the rendezvous instruction whose child frame runs, -1 */
    int32_t nbind;         /* Call: store bindings pushed by this frame */
    int64_t iv, ub, stride;/* loops */
    int32_t axis;          /* loop axis slot, -1 */
    int32_t rslot;         /* fired DMA block: its trigger's register slot, else -1 */
} bs_frame;

/* A block's choice of successor (bs_frame.next), set by its terminators. */
enum { BS_NEXT_NONE = -1, BS_NEXT_BREAK = -2, BS_NEXT_RETURN = -3, BS_NEXT_EXIT = -4 };

/* Registers are per engine (docs/spec/BIR-JSON.md "Registers are per engine"): each register has
** BS_REG_SLOTS cells per core, slot e (1..6, the engine's EngineType value) for each
** engine's file and slot 0 holding the value most recently written by any engine. An
** instruction on an engine reads and writes its slot (a write also sets slot 0); a
** rendezvous instruction (ALL, Unassigned, structured control) reads slot 0 and writes
** every slot. */
#define BS_REG_SLOTS 7

typedef struct bs_bind {   /* a saved store, restored when a call returns */
    int32_t  loc;
    bs_store saved;
} bs_bind;

/* The shadow of a location's own buffer (priv / shared; not arena-placed ones). A
** whole-location host write leaves every shadow byte 1 (ONES); a run only sets shadow
** bytes, so it stays so. Resetting such a buffer does not clear its shadow but marks it
** STALE -- logically never written, bytes still 1 -- so that the next whole-location host
** write (an input, every run) copies the data alone: no clearing, no re-setting, no fresh
** pages. Anything else clears a stale shadow first (bs_sim_flush_stale): a partial write,
** a read, the start of a run.
** A reset leaves any other buffer ZERO (every shadow byte 0). A whole-location host write
** into a ZERO (or LAZY_STALE) buffer leaves it LAZY -- logically all ones, physically
** untouched: its stores' shadow pointers are NULL (a view without a shadow is written,
** marking it is a no-op), so the first run of a big input faults no shadow page. A reset
** makes a LAZY buffer ZERO again, or LAZY_STALE (bytes still 0, data the last run's: cleared
** when needed) when never-written bytes must read as zero. The start of a run turns ZERO
** into PLAIN (kernels set shadow bytes without telling the state). */
enum { BS_SH_PLAIN, BS_SH_ONES, BS_SH_STALE, BS_SH_ZERO, BS_SH_LAZY, BS_SH_LAZY_STALE };

/* The location whose storage location l uses: the input of a must-alias pair for its
** output (docs/spec/BIR-JSON.md, "Must-alias pairs"), else l itself. */
static inline int32_t bs_storage_loc(const bs_program *p, int32_t l)
{
    int32_t a = p->sets[p->locs[l].set].alias;
    return a >= 0 ? p->sets[a].loc0 : l;
}

/* The bytes location l's own buffer (data, then shadow) is allocated with. */
static inline size_t bs_loc_buffer_bytes(const bs_program *p, int32_t l)
{
    return 2 * (size_t)p->locs[l].parts * (size_t)p->locs[l].bpp;
}

/* A DRAM location with one buffer for all cores (sim->shared): a Shared one, and with one
** program on every core an input or output (docs/spec/BIR-JSON.md, "One program per core"). */
static inline int bs_loc_one_buffer(const bs_program *p, const bs_loc *loc)
{
    const bs_set *set = &p->sets[loc->set];
    return loc->memtype == BS_MEM_DRAM && !loc->placed && set->alias < 0 &&
           (set->shared || (set->io != 0 && p->module->nentries <= 1));
}

typedef struct bs_core {
    int32_t   index;             /* rank */
    int32_t   done;              /* finished its entry function (or exited) */
    int32_t   nframes;
    bs_frame  frames[BS_MAX_FRAMES];
    int32_t   call_depth;
    uint64_t *regs;              /* owned; BS_REG_SLOTS cells per program register */
    int32_t   rslot;             /* register slot of the instruction being run */
    int32_t   where;             /* instruction the current step works on, -1 */
    int32_t   where_block;       /* block the current step works on, -1 */
    uint32_t  sem[BS_NUM_SEMS];
    uint8_t   evt[BS_NUM_EVENTS];
    int32_t   nevt;              /* events set in evt (block ends skip the scan when 0) */
    int64_t  *env;               /* owned; per loop-axis slot */
    uint8_t  *live;              /* owned; axis slot is in scope */
    int32_t  *cursor;            /* owned; DMATrigger cursors */
    bs_store *stores;            /* owned; per location: where its bytes live now */
    uint8_t  *complete;          /* owned; per location: every byte written this run (shadows
                                    only go 0 -> 1 during a run, so this never goes stale) */
    int64_t  *touched;           /* owned; per location: bytes of partial views marked or
                                    checked since its last whole scan (vm/exec.c) */
    uint8_t  *sbuf, *sbuf_sh;    /* owned; partitions x sbuf_bpp */
    uint8_t  *psum, *psum_sh;    /* owned; sbuf..psum_sh NULL when no location of the program
                                    is placed in SBUF/PSUM (vm/sim.c core_reset) */
    int       placed_once;       /* core_reset has placed the locations (buffers exist) */
    uint8_t  *dram;              /* owned; Internal DRAM arena (data, then shadow) */
    int64_t   dram_size;
    int32_t   prog;              /* per-core program it runs (module prog field) */
    uint8_t **priv;              /* owned; per location: private buffer (data then shadow) */
    uint8_t  *pstate;            /* owned; per location: BS_SH_* of priv[l]'s shadow */
    bs_chunks *pchunks;          /* owned; per location: summary of priv[l]'s shadow
                                    (state NULL: none; vm/sim.c, "Chunk summaries") */
    bs_bind  *binds;             /* owned; call-binding stack */
    int32_t   nbinds;
    size_t    binds_cap;         /* bytes */
    bs_kstate ks;                /* kernel scratch and accumulators */
    uint8_t  *gather[BS_KMAX * 2];     /* owned; temporaries for non-linear patterns */
    size_t    gather_size[BS_KMAX * 2];
    int32_t   last_engine;       /* round_robin rotation */
    int32_t   coll_done;         /* collective insn another rank already exchanged, or -1 */
    struct bs_regchk *regchk;    /* owned; checks="uninit_regs" (vm/check_regs.c), else NULL */
    int32_t   last_done[BS_NUM_ENGINES];  /* per queue: last instruction completed, -1 */
    int32_t   last_any;          /* last instruction the core completed, -1 (deadlock reports) */
} bs_core;

struct bs_sim {
    const bs_program *prog;      /* borrowed; the binding keeps the Program alive */
    bs_sim_opts opts;
    const bs_archinfo *arch;
    int32_t   ncores;
    bs_core  *cores;             /* owned; ncores */
    uint8_t **shared;            /* owned; per location: shared DRAM buffer or NULL */
    uint8_t  *sstate;            /* owned; per location: BS_SH_* of shared[l]'s shadow */
    bs_chunks *schunks;          /* owned; per location: summary of shared[l]'s shadow */
    int32_t   chunks_ok;         /* the program's shadows may be summarised (vm/sim.c) */
    uint8_t  *zc;                /* owned; per location: BS_ZC_* bits (vm/zerocopy.c),
                                    NULL until bs_sim_zero_copy or the first lend */
    int32_t   nlent;             /* locations whose store points at a caller's buffer now */
    int32_t   stale;             /* some buffer is BS_SH_STALE, _LAZY_STALE, _ZERO or newly
                                    _LAZY (bs_sim_flush_stale) */
    int32_t   pristine;          /* nothing ran or was written since the last reset: a
                                    reset has nothing to do (the first run of a new Simulator
                                    does not scan the memory it has just mapped) */
    uint8_t  *dram_all;          /* owned; DRAM arena of all cores (data, then shadow) */
    int64_t   dram_all_size;
    bs_host_kernel_fn *host;
    void     *host_ctx;
    int64_t   steps, max_steps;
    int32_t   exited;
    int32_t   finished;
    int32_t   last_core;
    uint64_t  rng;               /* xorshift64* state for the random schedule */
    int64_t   op_counts[BS_OP__COUNT];
    int64_t   engine_counts[BS_NUM_ENGINES];
    char    **diags;             /* owned; diagnostic messages */
    int32_t   ndiag;
    size_t    diags_cap;         /* bytes */
    int64_t   diag_dropped;
    char     *notes;             /* owned; "<Opcode>;" list */
    size_t    notes_len, notes_cap;
    uint8_t  *warned;            /* owned; per (insn) uninitialised-read warning issued */
    struct bs_chk *chk;          /* owned; the checkers (vm/check.c), NULL when off */
    struct bs_vcache *vcache;    /* owned (exec.c); per operand, for every core: its last
                                    linear view, relative to its store */
    bs_pool_ref pool;            /* owned; worker threads, started on first use */
    struct bs_defer *defer;      /* owned; dma_mode deferred (vm/defer.c), else NULL */
    struct bs_xp *xp;            /* owned; record / replay / pct (vm/explore.c), else NULL */
    int32_t  *trace;             /* owned; (core, insn) pairs when opts.trace */
    bs_trace_time *trace_t;      /* owned; their modelled times (parallel to trace) */
    size_t    trace_t_cap;       /* bytes */
    struct bs_tm *tm;            /* owned; the timing model (vm/timing.c), NULL when off */
    uint8_t  *tm_skip;           /* owned; timing="only": per insn, its arithmetic is skipped */
    int64_t   ntrace, trace_dropped;
    int64_t   trace_room;        /* records both buffers hold, at most the cap: the
                                    fast path of bs_sim_trace_add below ntrace */
    size_t    trace_cap;         /* bytes */
    void     *coll_buf;          /* owned; collective scratch (vm/collective.c) */
    size_t    coll_cap;
    uint8_t  *plog;              /* owned; DevicePrint records of this run (vm/print.c) */
    size_t    plog_len, plog_cap;
    int64_t   plog_dropped;
    uint8_t  *breaks;            /* owned; per insn: stop bs_sim_run after it (vm/debug.c) */
    int32_t   break_every;       /* stop after every instruction */
    int32_t   stop_core, stop_insn;   /* where the last bs_sim_run stopped, -1 */
};

/* vm/sim.c */
bs_status bs_sim_diagnose(bs_sim *sim, bs_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
bs_status bs_sim_note(bs_sim *sim, const char *text, bs_error *err);
/* vm/trace.c: record an executed instruction (opts.trace) with its modelled start,
** duration and the trace indices of the updates that released it; returns its index. Out
** of memory or past the cap it counts the entry as dropped instead (returns -1): tracing
** never fails a run. Inline while the buffers have room (trace_room), else
** bs_sim_trace_grow. */
int32_t   bs_sim_trace_grow(bs_sim *sim, int32_t core, int32_t insn, double start,
                            double dur, const int32_t src[2]);   /* past trace_room */
static inline int32_t bs_sim_trace_add(bs_sim *sim, int32_t core, int32_t insn, double start,
                                       double dur, const int32_t src[2])
{
    bs_trace_time *r;
    if (BS_UNLIKELY(sim->ntrace >= sim->trace_room))
        return bs_sim_trace_grow(sim, core, insn, start, dur, src);
    sim->trace[2 * sim->ntrace] = core;
    sim->trace[2 * sim->ntrace + 1] = insn;
    r = &sim->trace_t[sim->ntrace];
    r->start = start;
    r->dur = dur;
    r->src[0] = src[0];
    r->src[1] = src[1];
    return (int32_t)sim->ntrace++;
}
/* vm/sched.c: next value of the run's seeded xorshift64* generator (the random schedule). */
uint64_t  bs_sim_random(bs_sim *sim);
/* vm/regs.c */
/* Register access is on every step of a register loop, so its helpers are inline here
** (the step loop and the register instructions live in other files). */
/* Register slot instruction `insn` uses by itself (0 for rendezvous instructions), and the
** one it uses on core c now (inside a fired DMA block: the trigger's). */
static inline int32_t bs_insn_slot(const bs_program *p, int32_t insn)
{
    /* = its engine (Pool .. SP), or 0 for a rendezvous instruction (ALL / Unassigned,
    ** loops, calls): exactly the queue it sits in (ir/program.c), one byte to read. */
    int32_t q = p->queue[insn];
    return q == BS_Q_RDV ? 0 : q;
}

static inline int32_t bs_core_slot(const bs_sim *sim, const bs_core *c, int32_t insn)
{
    if (c->nframes > 0 && c->frames[c->nframes - 1].rslot >= 0)
        return c->frames[c->nframes - 1].rslot;
    return bs_insn_slot(sim->prog, insn);
}

/* Register access through the running instruction's slot (c->rslot). */
/* checks="uninit_regs" (vm/check_regs.c): a read or write of one of c's registers, noted
** when c->regchk is set. Declared here for the inline accessors below. */
void bs_chk_reg_read(const bs_core *c, int32_t reg);
void bs_chk_reg_write(const bs_core *c, int32_t reg);

static inline uint64_t bs_core_reg_bits(const bs_core *c, int32_t reg)
{
    if (BS_UNLIKELY(c->regchk != NULL))
        bs_chk_reg_read(c, reg);
    return c->regs[(size_t)reg * BS_REG_SLOTS + (size_t)c->rslot];
}

/* Value of `bits` as register `reg`'s dtype, signed (float32: truncated, NaN -> 0). */
static inline int64_t bs_reg_i64(const bs_sim *sim, int32_t reg, uint64_t v)
{
    switch (sim->prog->regs[reg].dtype) {
    case BS_DT_uint32:  return (int64_t)(uint32_t)v;
    case BS_DT_float32: {
        float f;
        uint32_t b = (uint32_t)v;
        memcpy(&f, &b, 4);
        return bs_f64_to_i64(f);            /* saturates; NaN -> 0 */
    }
    case BS_DT_int64:
    case BS_DT_uint64:  return (int64_t)v;
    default:            return (int64_t)(int32_t)(uint32_t)v;
    }
}

static inline int64_t bs_core_reg_i64(const bs_sim *sim, const bs_core *c, int32_t reg)
{
    return bs_reg_i64(sim, reg, bs_core_reg_bits(c, reg));
}

static inline void bs_core_reg_set(const bs_sim *sim, bs_core *c, int32_t reg, uint64_t bits)
{
    uint64_t *cell = c->regs + (size_t)reg * BS_REG_SLOTS;
    if (!sim->prog->regs[reg].wide)
        bits &= 0xFFFFFFFFu;
    if (BS_UNLIKELY(c->regchk != NULL))
        bs_chk_reg_write(c, reg);
    if (c->rslot == 0) {
        for (int s = 0; s < BS_REG_SLOTS; s++)
            cell[s] = bits;
    } else {
        cell[c->rslot] = bits;
        cell[0] = bits;
    }
}

bs_status bs_core_eval(bs_sim *sim, bs_core *c, int32_t expr, int64_t *out, bs_error *err);
/* vm/diag.c */
/* "function 'f', block 'b', position k, instruction 'i' (Op)" into buf. */
void      bs_insn_where(const bs_program *p, int32_t insn, char *buf, size_t cap);
/* Attach a location to a run-time error: prefix err->msg with "core k, " (several cores)
** and the instruction's bs_insn_where, or with function and block when insn < 0 and
** err->block >= 0, and set err's location fields. Called in exactly one place, when an
** error leaves bs_core_step (which knows what the step was working on): code below it
** returns bare messages. */
bs_status bs_fail_at(bs_sim *sim, bs_core *c, int32_t insn, bs_status st, bs_error *err);
/* Forget the run's diagnostics and notes (bs_sim_reset, bs_sim_free). */
void      bs_sim_clear_diags(bs_sim *sim);
/* A diagnostic about instruction insn: as a warning its text is prefixed with the
** location; with strict=True it is an error whose location bs_core_step attaches. */
bs_status bs_sim_diagnose_at(bs_sim *sim, const bs_core *c, int32_t insn, bs_error *err,
                             const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* vm/deadlock.c: fill err with the deadlock report; returns BS_E_DEADLOCK. */
bs_status bs_sim_deadlock(bs_sim *sim, bs_error *err);

/* vm/sync.c */
/* Waits hold; sem-ge-reg waits read register slot `slot`. */
int       bs_sync_ready(const bs_sim *sim, const bs_core *c, int32_t first, int32_t nwait,
                        int32_t slot);
bs_status bs_sync_consume(bs_sim *sim, bs_core *c, int32_t first, int32_t nwait,
                          bs_error *err);
bs_status bs_sync_update(bs_sim *sim, bs_core *c, int32_t first, int32_t nupd, bs_error *err);
int       bs_insn_ready(const bs_sim *sim, const bs_core *c, int32_t insn);
void      bs_sync_describe_wait(const bs_sim *sim, const bs_core *c, int32_t insn, bs_error *err);

/* vm/sim.c: make a chunk summary's shadow bytes the whole truth and detach it from every
** store until the next reset (before anything reads or writes those shadow bytes other
** than through bs_store_* and bs_chunks_*). NULL-safe. */
void bs_sim_chunks_off(bs_sim *sim, bs_chunks *ch);
/* vm/chunks.c: 1 when the program's shadows may be summarised (sim->chunks_ok); a summary
** for the new own buffer buf (size data bytes, then its shadow) of at least BS_CHUNKS_MIN
** bytes, on (the buffer is ZERO), or none; freeing one. */
#define BS_CHUNKS_MIN ((size_t)BS_SH_CHUNK)   /* smaller: one partial chunk, no gain */
int  bs_sim_chunks_allowed(const bs_sim *sim);
void bs_sim_chunks_init(const bs_sim *sim, bs_chunks *ch, uint8_t *buf, size_t size);
void bs_sim_chunks_fini(bs_chunks *ch);

/* Zero-copy (vm/zerocopy.c): sim->zc bits per location. LENDABLE: nothing in the program can
** ever write it (a static, conservative fact); LENT: its store points at a caller's
** buffer until bs_sim_unlend; TAKEN: its buffers may be handed over, so they are allocated
** as NumPy allocates its own arrays (bs_sim_own_alloc); HEAP: its current own buffer came
** from the C heap (bs_sim_own_free frees it with bs_free); UNREAD: no instruction can read
** it (static, conservative, as LENDABLE); STALE: its own buffer was given back with an
** earlier run's data, so a byte its shadow says never written may hold a value until
** bs_sim_zc_clean zeroes it (only the host can see those bytes: UNREAD). */
enum { BS_ZC_LENDABLE = 1, BS_ZC_LENT = 2, BS_ZC_TAKEN = 4, BS_ZC_HEAP = 8, BS_ZC_UNREAD = 16,
       BS_ZC_STALE = 32 };
/* vm/zerocopy.c: location loc's bytes as a fresh buffer's before the host reads them. */
void bs_sim_zc_clean(bs_sim *sim, int32_t loc);

/* vm/sim.c: a new zeroed own buffer of location l, `size` data bytes then as many shadow
** bytes (NULL: out of memory); free it with bs_sim_own_free. */
uint8_t *bs_sim_own_alloc(bs_sim *sim, int32_t l, size_t size);
void     bs_sim_own_free(bs_sim *sim, int32_t l, uint8_t *buf);

/* vm/sim.c: E_INPUT unless `rows` rows of `rowbytes` bytes fit location loc and core is
** -1 or a core (the host transfers' argument check). */
bs_status bs_sim_check_rows(const bs_sim *sim, int32_t core, int32_t loc, int64_t rows,
                            int64_t rowbytes, bs_error *err);

/* vm/sim.c: clear every BS_SH_STALE shadow (before anything reads shadows). */
void bs_sim_flush_stale(bs_sim *sim);

/* vm/exec.c: give back core c's view cache (core_fini). */
void      bs_exec_vcache_free(bs_sim *sim);
/* vm/exec.c: run one instruction that completes at once (not a region owner). */
bs_status bs_exec_insn(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);
/* vm/regs.c: RegisterAlu (the step machine calls it directly) and RegisterMove. */
bs_status bs_exec_reg_alu(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);
bs_status bs_exec_reg_move(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);
/* Resolve an AP operand to a view (gathering non-linear patterns); `slot` picks the
** temporary. Outputs gathered this way are written back by bs_exec_scatter. */
bs_status bs_exec_view(bs_sim *sim, bs_core *c, const bs_opnd *o, int slot, bs_view *v,
                       int64_t **offs, bs_error *err);

/* Shared by exec.c and host.c: resolve every operand of insn into k (checking inputs
** for never-written bytes), and mark/scatter its outputs afterwards. */
int       bs_exec_is_ap(const bs_opnd *o);
bs_status bs_exec_resolve(bs_sim *sim, bs_core *c, int32_t insn, bs_kctx *k,
                          int64_t **offs, bs_error *err);
void      bs_exec_finish(bs_core *c, const bs_kctx *k, int32_t nin, int64_t **offs);

/* The never-written-read warning of ins[k] (once per instruction; strict: an error). */
bs_status bs_exec_warn_uninit(bs_sim *sim, bs_core *c, int32_t insn, int k, const bs_view *v,
                              bs_error *err);

/* vm/gather.c: IndirectLoad/Save/SaveAccumulate, GenericIndirectLoad/Save, Gather,
** IndirectCopy, TensorCopyDynamicSrc/Dst, DMACopy with a vector dynamic offset. */
bs_status bs_exec_gather(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);

/* vm/collective.c: CollectiveCompute/Send/Recv (a rendezvous of the group's ranks) and
** GPSIMDSB2SB. bs_coll_ready is the rendezvous half of readiness; bs_coll_describe adds
** the ranks a blocked collective waits for to a deadlock report entry. */
static inline int bs_is_collective(int32_t op)
{
    return op == BS_OP_CollectiveCompute || op == BS_OP_CollectiveSend
           || op == BS_OP_CollectiveRecv;
}
int       bs_coll_ready(const bs_sim *sim, const bs_core *c, int32_t insn);
void      bs_coll_describe(const bs_sim *sim, const bs_core *c, int32_t insn, bs_error *err);
bs_status bs_exec_collective(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);
bs_status bs_exec_sb2sb(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);
/* GetCurProcessingRankID: register outs[0] := the ring member whose data step iter_id
** holds (collective.c). */
bs_status bs_exec_cur_rank(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);

/* vm/varaddr.c: ReadVarAddr, register outs[0] := the address of ins[0]'s first element. */
bs_status bs_exec_read_var_addr(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);
/* Write integer v into register reg, or E_SIM naming `what` when the register's dtype
** cannot hold it exactly (exec.c). */
bs_status bs_exec_reg_set_int(bs_sim *sim, bs_core *c, int32_t reg, int64_t v, const char *what,
                              bs_error *err);

/* vm/print.c: DevicePrint appends its operands' values to the run's print log. */
bs_status bs_exec_print(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);

/* vm/host.c: CustomOp / BIRKernel through the host kernel hook. */
bs_status bs_exec_host(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);

/* vm/branch.c: CompareAndBranch: *next = the chosen block (a block index). */
bs_status bs_exec_compare_branch(bs_sim *sim, bs_core *c, int32_t insn, int32_t *next,
                                 bs_error *err);

/* vm/explore.c: every hook is called as `if (BS_UNLIKELY(sim->xp)) ...`. */
bs_status bs_xp_new(bs_sim *sim, bs_error *err);     /* no-op unless the options need it */
void      bs_xp_free(bs_sim *sim);
void      bs_xp_reset(bs_sim *sim);
/* pick() with n >= 1 ready candidates (block offsets cand[], queues qs[]). */
int32_t   bs_xp_pick(bs_sim *sim, bs_core *c, const int32_t *cand, const int32_t *qs,
                     int32_t n);
/* bs_sim_run's loop up to step `stop`. */
bs_status bs_xp_run(bs_sim *sim, int64_t stop, int *finished, bs_error *err);
/* vm/timing.c: the timing model (opts.timing). bs_tm_insn runs once per executed
** instruction, before its waits are consumed; bs_tm_update once per update, before it
** applies; bs_tm_owner_done when a region owner completes. */
bs_status bs_tm_new(bs_sim *sim, bs_error *err);
void      bs_tm_free(struct bs_tm *tm);
void      bs_tm_reset(bs_sim *sim);
void      bs_tm_insn(bs_sim *sim, bs_core *c, int32_t insn);
void      bs_tm_update(bs_sim *sim, const bs_core *c, const bs_core *t, const bs_sync *u);
void      bs_tm_owner_done(bs_sim *sim, bs_core *c);

/* vm/interp.c */
bs_status bs_core_start(bs_sim *sim, bs_core *c, bs_error *err);
/* One scheduling step of core c. *progress = 1 if anything happened. */
bs_status bs_core_step(bs_sim *sim, bs_core *c, int *progress, bs_error *err);
/* 1 if nothing hooks this run's steps (no checker, register checker, timing model or
** trace, breakpoint, deferred DMA, exploration), 2 if only the timing model does (a trace
** is the timing model's records: vm/timing.c), else 0:
** bs_sim_run may then step with the variants below (given that value), which skip the
** other hooks' tests (same results, same step boundaries). */
int       bs_sim_plain(const bs_sim *sim);
bs_status bs_core_step_plain(bs_sim *sim, bs_core *c, int *progress, int plain, bs_error *err);
/* bs_core_step_plain up to `calls` times while c is not done and the run's step count is
** below stop; *blocked = 1 when a step made no progress (c cannot advance). */
bs_status bs_core_run_plain(bs_sim *sim, bs_core *c, int64_t stop, int32_t calls, int plain,
                            int *blocked, bs_error *err);

#endif
