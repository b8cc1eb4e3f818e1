/* vm/exec.c -- executing one instruction that completes at once: operand resolution,
** data kernels, register instructions, sync opcodes, stubs and delegated kernels.
** Errors leave memory outside the instruction's outputs untouched. */
#include <stdio.h>
#include "vm.h"
#include "check.h"

/* {=== Scratch for non-linear patterns (kernel scratch: kernels/kstate.c) ===} */

static void *gather_buf(bs_core *c, int slot, size_t bytes)
{
    void *p = c->gather[slot];
    if (bs_reserve(&p, &c->gather_size[slot], bytes, 0))
        return NULL;
    c->gather[slot] = p;
    return p;
}

/* {=== Operands ===} */

/* The operand-view cache. A linear view is a pure function of the operand's pattern, its
** store (pointers and geometry: a call rebinds stores, a reset may move them) and the
** byte offset the offset expression, symbolic addresses or register evaluate to. Each
** operand keeps its last linear view with that key, so the evaluation still runs every
** time (loop variables, registers) and only the view building and bounds checks are
** skipped when the key repeats. Without memory for the cache, views are built anew.
** The view is kept relative to its store (an offset from its data and shadow, and the
** strides: dtype, extents and the rest come from the operand and the store), keyed by
** the store's geometry, so one cache serves every core (each core's store of a location
** has the same geometry, other bytes) at 96 bytes an operand: resident memory does not
** grow with the number of cores. */
typedef struct bs_vcache {
    int64_t  start;              /* key: the byte offset ... */
    int64_t  parts, bpp, pitch;  /* ... and the store's geometry */
    int32_t  meta;               /* key: memtype, cast and has-shadow (vc_meta); 0 = empty */
    int32_t  pad_;
    int64_t  off;                /* v.data - st.data (= v.shadow - st.shadow) */
    int64_t  count;
    int64_t  stride[BS_MAX_DIMS];
} bs_vcache;

/* Nonzero for every store: memtype and cast are small non-negative codes. */
static inline int32_t vc_meta(const bs_store *st)
{
    return 1 | (st->shadow != NULL) << 1 | (int32_t)st->memtype << 2 | (int32_t)st->cast << 12;
}

static inline int vc_hit(const bs_vcache *vc, const bs_store *st, int64_t start)
{
    return vc->meta == vc_meta(st) && vc->start == start && vc->parts == st->parts &&
           vc->bpp == st->bpp && vc->pitch == st->pitch;
}

/* The view bs_view_make gives for operand o over st: the same bytes field by field (a
** struct copy here compiles to `rep movs`, slow to start). */
static inline void vc_view(bs_view *v, const bs_vcache *vc, const bs_opnd *o,
                           const bs_store *st)
{
    v->data = st->data + vc->off;
    v->shadow = st->shadow != NULL ? st->shadow + vc->off : NULL;
    v->dtype = o->dtype;
    v->ndim = o->ndim;
    for (int j = 0; j < BS_MAX_DIMS; j++) {
        v->num[j] = j < o->ndim ? o->num[j] : 0;
        v->stride[j] = vc->stride[j];
    }
    v->count = vc->count;
    v->memtype = st->memtype;
    v->gathered = 0;
    v->cast = st->cast;
}

static void vc_fill(bs_vcache *vc, const bs_view *v, const bs_store *st, int64_t start)
{
    vc->start = start;
    vc->parts = st->parts;
    vc->bpp = st->bpp;
    vc->pitch = st->pitch;
    vc->meta = vc_meta(st);
    vc->off = (int64_t)(v->data - st->data);
    vc->count = v->count;
    for (int j = 0; j < BS_MAX_DIMS; j++)
        vc->stride[j] = v->stride[j];
}

static bs_vcache *vcache_entry(bs_sim *sim, const bs_opnd *o)
{
    /* Only operands of the program table have a cache slot: callers also pass modified
    ** copies (gather windows) that live elsewhere, so compare addresses as integers
    ** (subtracting pointers into different objects is undefined). */
    uintptr_t a = (uintptr_t)o, lo = (uintptr_t)sim->prog->opnds;
    ptrdiff_t j;
    if (a < lo || (a - lo) % sizeof *o != 0
            || (a - lo) / sizeof *o >= (uintptr_t)sim->prog->n_opnds)
        return NULL;
    j = (ptrdiff_t)((a - lo) / sizeof *o);
    if (sim->vcache == NULL)     /* zero pages: only the operands a run reaches cost memory */
        sim->vcache = bs_pages_alloc((size_t)sim->prog->n_opnds * sizeof *sim->vcache);
    return sim->vcache != NULL ? &sim->vcache[j] : NULL;
}

void bs_exec_vcache_free(bs_sim *sim)
{
    bs_pages_free(sim->vcache, (size_t)sim->prog->n_opnds * sizeof *sim->vcache);
    sim->vcache = NULL;
}

bs_status bs_exec_view(bs_sim *sim, bs_core *c, const bs_opnd *o, int slot, bs_view *v,
                       int64_t **offs, bs_error *err)
{
    const bs_store *st = &c->stores[o->loc];
    int32_t isz = bs_dtinfo_table[o->dtype].size;
    int64_t start = o->offset, extra = 0, val;
    int linear = 1;
    int64_t term, byte;
    bs_vcache *vc;
    *offs = NULL;
    if (o->offset_expr >= 0)
        BS_TRY(bs_core_eval(sim, c, o->offset_expr, &start, err));
    if (o->kind == BS_OPND_symbolic_ap) {
        for (int d = 0; d < o->ndim; d++)
            if (o->addrs[d] >= 0) {
                BS_TRY(bs_core_eval(sim, c, o->addrs[d], &val, err));
                if (BS_MUL_OVF(o->step[d], val, &term) || BS_ADD_OVF(extra, term, &extra))
                    return bs_errorf(err, BS_E_OOB, "the address of dimension %d overflows "
                                     "int64 (step %lld x index %lld)", d,
                                     (long long)o->step[d], (long long)val);
            }
    } else if (o->kind == BS_OPND_register_ap) {
        if (BS_ADD_OVF(bs_core_reg_i64(sim, c, o->reg), o->const_ap_offset, &extra))
            return bs_errorf(err, BS_E_OOB, "register offset %lld + const_ap_offset %lld "
                             "overflows int64", (long long)bs_core_reg_i64(sim, c, o->reg),
                             (long long)o->const_ap_offset);
    }
    /* Offsets count elements: the byte offset is isz x (offset + register/index terms). */
    if (BS_ADD_OVF(start, extra, &term) || BS_MUL_OVF(term, (int64_t)isz, &byte))
        return bs_errorf(err, BS_E_OOB, "offset %lld + %lld elements of %d bytes overflows "
                         "int64", (long long)start, (long long)extra, (int)isz);
    vc = vcache_entry(sim, o);
    if (vc != NULL && vc_hit(vc, st, byte)) {
        vc_view(v, vc, o, st);
        return BS_OK;
    }
    BS_TRY(bs_view_make(v, st, o->dtype, o->ndim, o->step, o->num, byte, &linear, err));
    if (v->count > BS_MAX_OPND_ELEMS)       /* bounds one instruction's time and scratch */
        return bs_errorf(err, BS_E_PROGRAM, "the access pattern has %lld elements, above the "
                         "%lld one operand may have", (long long)v->count,
                         (long long)BS_MAX_OPND_ELEMS);
    if (linear && vc != NULL)
        vc_fill(vc, v, st, byte);
    if (!linear) {
        /* Gather into [offsets][data][shadow] (the offsets first: int64-aligned whatever
        ** the item size); the kernel sees a dense view. */
        int64_t n = 1, s = isz;
        uint8_t *buf;
        for (int d = 0; d < o->ndim; d++)
            n *= o->num[d];
        buf = gather_buf(c, slot, (size_t)n * ((size_t)isz * 2 + sizeof(int64_t)));
        if (buf == NULL)
            return bs_errorf(err, BS_E_NOMEM, "out of memory gathering an access pattern "
                             "(%lld elements)", (long long)n);
        *offs = (int64_t *)buf;
        buf += (size_t)n * sizeof(int64_t);
        bs_sim_chunks_off(sim, st->chunks);         /* copies and scatters shadow bytes */
        bs_view_offsets(st, isz, o->ndim, o->step, o->num, byte, *offs);
        for (int64_t e = 0; e < n; e++) {
            memcpy(buf + e * isz, st->data + (*offs)[e], (size_t)isz);
            if (st->shadow != NULL)
                memcpy(buf + n * isz + e * isz, st->shadow + (*offs)[e], (size_t)isz);
        }
        v->data = buf;
        v->shadow = st->shadow != NULL ? buf + n * isz : NULL;   /* NULL: all written */
        v->dtype = o->dtype;
        v->ndim = o->ndim;
        v->count = n;
        v->memtype = st->memtype;
        v->cast = st->cast;
        v->gathered = 1;
        for (int d = o->ndim - 1; d >= 0; d--) {
            v->num[d] = o->num[d];
            v->stride[d] = s;
            s *= o->num[d];
        }
    }
    return BS_OK;
}

/* 1 once every byte of the store's location has been written this run (then marked in
** c->complete, and steady-state instructions on the location skip shadow checks and
** marking entirely). A view as large as the location scans it at once; smaller ones
** (tiles written or read piece by piece) add their bytes to c->touched, and the location
** is scanned whole when those reach its size: at most twice what the pieces' own checks
** and marks cost, and a buffer filled by several copies stops being checked after one
** more pass over it. */
static int store_complete(bs_core *c, const bs_store *st, const bs_view *v)
{
    int64_t size = st->parts * st->bpp, bytes = v->count * bs_dtinfo_table[v->dtype].size;
    if (c->complete[st->loc])
        return 1;
    if (st->shadow == NULL)            /* a LAZY buffer (vm.h): all written */
        return c->complete[st->loc] = 1;
    if (bytes < size && (c->touched[st->loc] += bytes) < size)
        return 0;
    c->touched[st->loc] = 0;
    if (st->chunks != NULL) {          /* own buffers: pitch == bpp */
        if (!bs_chunks_written(st->chunks, 0, size))
            return 0;
        return c->complete[st->loc] = 1;
    }
    for (int64_t r = 0; r < st->parts; r++)
        if (memchr(st->shadow + r * st->pitch, 0, (size_t)st->bpp))
            return 0;
    c->complete[st->loc] = 1;
    return 1;
}

static void scatter(bs_core *c, const bs_opnd *o, const bs_view *v, const int64_t *offs)
{
    const bs_store *st = &c->stores[o->loc];
    int32_t isz = bs_dtinfo_table[v->dtype].size;
    for (int64_t e = 0; e < v->count; e++) {
        memcpy(st->data + offs[e], v->data + e * isz, (size_t)isz);
        if (st->shadow != NULL)
            memset(st->shadow + offs[e], 1, (size_t)isz);
    }
}

int bs_exec_is_ap(const bs_opnd *o)
{
    return o->kind == BS_OPND_physical_ap || o->kind == BS_OPND_symbolic_ap ||
           o->kind == BS_OPND_register_ap;
}

static double reg_value(const bs_sim *sim, const bs_core *c, int32_t reg)
{
    if (sim->prog->regs[reg].dtype == BS_DT_float32) {
        float f;
        uint32_t u = (uint32_t)bs_core_reg_bits(c, reg);
        memcpy(&f, &u, 4);
        return f;
    }
    return (double)bs_core_reg_i64(sim, c, reg);
}

bs_status bs_exec_warn_uninit(bs_sim *sim, bs_core *c, int32_t insn, int k, const bs_view *v,
                              bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_opnd *o = &p->opnds[p->insns[insn].opnd + k];
    if (sim->warned[insn] && !sim->opts.strict)
        return BS_OK;
    sim->warned[insn] = 1;
    if (BS_UNLIKELY(sim->chk))      /* strict + the checker: its CheckError comes first */
        BS_TRY(bs_chk_uninit(sim, c, insn, k, v, err));
    if (sim->opts.strict) {
        err->operand = k;
        return bs_errorf(err, BS_E_UNINIT, "ins[%d] reads never-written bytes of '%s'", k,
                         bs_str(p, p->locs[o->loc].name));
    }
    return bs_sim_diagnose_at(sim, c, insn, err, "ins[%d] reads never-written bytes of '%s'", k,
                              bs_str(p, p->locs[o->loc].name));
}

/* Resolve every operand of `insn` into k; check inputs for never-written bytes. */
bs_status bs_exec_resolve(bs_sim *sim, bs_core *c, int32_t insn, bs_kctx *k,
                         int64_t **offs, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    /* Not memset: the context is ~4 KB and most of it unused. Operand views are filled
    ** below (immediates zeroed); the unused tail only says "not a memory operand". */
    for (int j = in->nin; j < BS_KMAX; j++)
        k->in[j].ndim = 0;
    for (int j = in->nout; j < BS_KMAX; j++)
        k->out[j].ndim = 0;
    memset(k->imm, 0, sizeof k->imm);
    memset(k->xval, 0, sizeof k->xval);
    k->prog = p;
    k->insn = in;
    k->ins = p->opnds + in->opnd;
    k->outs = p->opnds + in->opnd + in->nin;
    k->nin = in->nin;
    k->nout = in->nout;
    k->ks = &c->ks;
    for (int j = 0; j < in->nin + in->nout; j++) {
        const bs_opnd *o = &p->opnds[in->opnd + j];
        int out = j >= in->nin;
        bs_view *v = out ? &k->out[j - in->nin] : &k->in[j];
        bs_status st;
        offs[j] = NULL;
        if (out)
            k->ostore[j - in->nin] = bs_exec_is_ap(o) ? &c->stores[o->loc] : NULL;
        if (!bs_exec_is_ap(o))
            memset(v, 0, sizeof *v);
        if (bs_exec_is_ap(o)) {
            st = bs_exec_view(sim, c, o, j, v, &offs[j], err);
            if (st != BS_OK) {
                char msg[BS_ERRMSG];
                snprintf(msg, sizeof msg, "%s", err->msg);
                bs_errorf(err, st, "%s[%d] ('%s'): %s", out ? "outs" : "ins",
                          out ? j - in->nin : j, bs_str(p, p->locs[o->loc].name), msg);
                err->operand = out ? BS_OUT_OPERAND + j - in->nin : j;
                return st;
            }
            if (BS_UNLIKELY(sim->chk))
                BS_TRY(bs_chk_access(sim, c, insn, j, v, offs[j], err));
            if (!out && !c->complete[c->stores[o->loc].loc]) {
                if (!bs_store_initialized(&c->stores[o->loc], v))
                    BS_TRY(bs_exec_warn_uninit(sim, c, insn, j, v, err));
                else
                    store_complete(c, &c->stores[o->loc], v);
            }
        } else if (!out) {
            if (o->kind == BS_OPND_register_access)
                k->imm[j] = reg_value(sim, c, o->loc);
            else if (o->kind == BS_OPND_imm_array)
                k->imm[j] = o->arr_len ? p->fpool[o->arr_off] : 0.0;
            else
                k->imm[j] = o->imm;
        }
    }
    for (int j = 0; j < 4; j++)
        if (in->x[j] >= 0) {
            BS_TRY(bs_core_eval(sim, c, in->x[j], &k->xval[j], err));
        }
    return BS_OK;
}

void bs_exec_finish(bs_core *c, const bs_kctx *k, int32_t nin, int64_t **offs)
{
    for (int j = 0; j < k->nout; j++) {
        if (k->out[j].ndim == 0)
            continue;
        const bs_store *st = &c->stores[k->outs[j].loc];
        if (offs[nin + j])
            scatter(c, &k->outs[j], &k->out[j], offs[nin + j]);
        else if (!c->complete[st->loc]) {
            bs_store_mark_written(st, &k->out[j]);
            store_complete(c, st, &k->out[j]);
        }
    }
}

static bs_status run_kernel(bs_sim *sim, bs_core *c, int32_t insn, bs_kernel_fn *fn,
                            bs_error *err)
{
    bs_kctx k;
    int64_t *offs[BS_KMAX * 2];
    bs_status st = bs_exec_resolve(sim, c, insn, &k, offs, err);
    if (st != BS_OK)
        return st;
    st = fn(&k, err);
    if (st != BS_OK)
        return st;
    if (BS_UNLIKELY(sim->chk))
        BS_TRY(bs_chk_outputs(sim, c, insn, &k, err));
    bs_exec_finish(c, &k, k.nin, offs);
    return BS_OK;
}

/* {=== Registers ===}
** RegisterMove and RegisterAlu are in vm/regs.c (bs_exec_reg_move, bs_exec_reg_alu). */

/* TensorLoad (to_reg) / TensorSave: one element <-> one register, by value. */
static bs_status tensor_reg(bs_sim *sim, bs_core *c, int32_t insn, int to_reg, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    const bs_opnd *o = sim->prog->opnds + in->opnd;
    const bs_opnd *mem = to_reg ? &o[0] : &o[in->nin];
    const bs_opnd *reg = to_reg ? &o[in->nin] : &o[0];
    int32_t rdt, mdt;
    bs_view v;
    int64_t *offs;
    uint8_t tmp[8];
    if (in->nin < 1 || in->nout < 1 || reg->kind != BS_OPND_register_access || !bs_exec_is_ap(mem))
        return bs_errorf(err, BS_E_SIM, "%s needs one register and one memory operand",
                         to_reg ? "TensorLoad" : "TensorSave");
    BS_TRY(bs_exec_view(sim, c, mem, 0, &v, &offs, err));
    if (BS_UNLIKELY(sim->chk))
        BS_TRY(bs_chk_access(sim, c, insn, to_reg ? 0 : in->nin, &v, offs, err));
    if (v.count != 1)
        return bs_errorf(err, BS_E_SIM, "the memory operand must be one element, has %lld",
                         (long long)v.count);
    rdt = sim->prog->regs[reg->loc].dtype;
    mdt = v.dtype;
    if (to_reg && !bs_store_initialized(&c->stores[mem->loc], &v))
        BS_TRY(bs_exec_warn_uninit(sim, c, insn, 0, &v, err));
    if (to_reg) {
        int same = bs_dtinfo_table[mdt].size == bs_dtinfo_table[rdt].size &&
                   bs_dtinfo_table[mdt].kind != BS_DK_F && bs_dtinfo_table[rdt].kind != BS_DK_F;
        uint64_t bits = 0;
        if (same) {
            memcpy(&bits, v.data, (size_t)bs_dtinfo_table[mdt].size);
        } else if (bs_dtinfo_table[mdt].kind == BS_DK_F || bs_dtinfo_table[rdt].kind == BS_DK_F) {
            bs_dt_store_f32(tmp, rdt, bs_dt_load_f32(v.data, mdt));
            memcpy(&bits, tmp, (size_t)bs_dtinfo_table[rdt].size);
        } else {
            bs_dt_store_i64(tmp, rdt, bs_dt_load_i64(v.data, mdt));
            memcpy(&bits, tmp, (size_t)bs_dtinfo_table[rdt].size);
        }
        bs_core_reg_set(sim, c, reg->loc, bits);
    } else {
        uint64_t bits = bs_core_reg_bits(c, reg->loc);
        int same = bs_dtinfo_table[mdt].size == bs_dtinfo_table[rdt].size &&
                   bs_dtinfo_table[mdt].kind != BS_DK_F && bs_dtinfo_table[rdt].kind != BS_DK_F;
        memcpy(tmp, &bits, 8);
        if (same)
            memcpy(v.data, tmp, (size_t)bs_dtinfo_table[mdt].size);
        else if (bs_dtinfo_table[mdt].kind == BS_DK_F || bs_dtinfo_table[rdt].kind == BS_DK_F)
            bs_dt_store_f32_cast(v.data, mdt, bs_dt_load_f32(tmp, rdt), v.cast);
        else
            bs_dt_store_i64(v.data, mdt, bs_dt_load_i64(tmp, rdt));
        if (offs)
            scatter(c, mem, &v, offs);
        else
            bs_store_mark_written(&c->stores[mem->loc], &v);
    }
    return BS_OK;
}

/* {=== Sync opcodes and DMA queues ===} */

static void rewind_triggers(bs_sim *sim, bs_core *c, const bs_insn *in)
{
    const bs_program *p = sim->prog;
    for (int32_t t = 0; t < p->n_insns; t++) {
        const bs_insn *tr = &p->insns[t];
        if (tr->op != BS_OP_DMATrigger)
            continue;
        for (int32_t a = 0; a < tr->nlist; a++)
            for (int32_t b = 0; b < in->nlist; b++)
                if (p->ipool[tr->list + a] == p->ipool[in->list + b])
                    c->cursor[BS_PI(tr, DMATrigger, cursor)] = 0;
    }
}

static void queue_instance(bs_sim *sim, bs_core *c, const bs_insn *in, int sw)
{
    const bs_program *p = sim->prog;
    int64_t queue = BS_PI(in, SwitchQueueInstance, queue);   /* = ResetQueueInstance's */
    if (sw && queue >= 0 && queue < p->n_queues) {
        const bs_queue *q = &p->queues[queue];
        for (int32_t k = 0; k < q->nsems; k++)
            c->sem[p->ipool[q->sems + k]] = 0;
        for (int32_t k = 0; k < q->nspecial; k++)
            c->sem[p->ipool[q->special + k]] = 0;
        if (BS_PI(in, SwitchQueueInstance, no_rearm))
            return;
    }
    rewind_triggers(sim, c, in);
}

/* {=== DMA out-of-bounds skip ===} */

_Static_assert(BS_Pi_DMACopy_oob_skip == BS_Pi_DMADescriptorCopy_oob_skip &&
               BS_Pi_DMACopy_oob_skip == BS_Pi_DMADescriptorCCE_oob_skip &&
               BS_Pi_DMACopy_oob_skip == BS_Pi_DMADescriptorTranspose_oob_skip &&
               BS_Pi_DMACopy_oob_skip == BS_Pi_DMADescriptorReplicate_oob_skip,
               "DMACopy and DMADescriptor* oob_skip slots");

/* An operand whose start is only known at run time: a register offset, or an offset or
** address expression. */
static int dynamic_start(const bs_opnd *o)
{
    if (o->kind == BS_OPND_register_ap || o->offset_expr >= 0)
        return 1;
    if (o->kind == BS_OPND_symbolic_ap)
        for (int d = 0; d < o->ndim; d++)
            if (o->addrs[d] >= 0)
                return 1;
    return 0;
}

/* DMACopy / DMADescriptor* with oob_is_err false (docs/spec/machine-model.md §6.4: a dynamic offset
** out of bounds is "otherwise tolerated"; NKI dma_copy oob_mode=skip): when an operand
** with a dynamic start lands outside its location, the whole transfer is skipped (*skip
** = 1; its destination keeps its bytes, its sync updates still fire). A static pattern
** out of bounds, and any other error, stays an error. */
static bs_status dma_oob_skip(bs_sim *sim, bs_core *c, int32_t insn, int *skip, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    *skip = 0;
    if (!BS_PI(in, DMACopy, oob_skip))
        return BS_OK;
    for (int32_t j = 0; j < in->nin + in->nout; j++) {
        const bs_opnd *o = &p->opnds[in->opnd + j];
        bs_view v;
        int64_t *offs;
        bs_status st;
        if (!bs_exec_is_ap(o) || !dynamic_start(o))
            continue;
        st = bs_exec_view(sim, c, o, j, &v, &offs, err);
        if (st == BS_E_OOB) {
            bs_error_clear(err);
            *skip = 1;
            return BS_OK;
        }
        if (st != BS_OK)
            return st;
    }
    return BS_OK;
}

/* {=== Dispatch: one executor per handler of bs_ops.def ===} */

typedef bs_status bs_exec_fn(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err);

static bs_status x_todo(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    int32_t op = sim->prog->insns[insn].op;
    (void)c;
    return bs_errorf(err, BS_E_UNSUPPORTED, "opcode %s is not implemented by birsim yet%s",
                     bs_opinfo_table[op].name, op == BS_OP_TopK ? " (no source pins its BIR "
                     "operands, keys or tie-breaks; README choices)" : "");
}

/* BS_K rows: resolve the operands and run the row's kernel. A DMACopy with a second input
** is a vector dynamic offset (vm/gather.c); DMA copies may skip an out-of-bounds
** transfer (dma_oob_skip). */
static bs_status x_kernel(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    if (in->op == BS_OP_DMACopy && in->nin >= 2 && BS_PI(in, DMACopy, mode) == BS_COPYMODE_Copy)
        return bs_exec_gather(sim, c, insn, err);
    if (in->op == BS_OP_DMACopy || in->op == BS_OP_DMADescriptorCopy ||
        in->op == BS_OP_DMADescriptorCCE || in->op == BS_OP_DMADescriptorTranspose ||
        in->op == BS_OP_DMADescriptorReplicate) {
        int skip;
        BS_TRY(dma_oob_skip(sim, c, insn, &skip, err));
        if (skip)
            return BS_OK;
    }
    if (bs_kernel_for(in->op) == NULL)      /* no row does this: BS_K names a kernel */
        return x_todo(sim, c, insn, err);
    return run_kernel(sim, c, insn, bs_kernel_for(in->op), err);
}

static bs_status x_nop(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    (void)sim, (void)c, (void)insn, (void)err;
    return BS_OK;
}

/* A B-class leaf: a note, and a warning (with strict=True an error). */
static bs_status x_stub(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const char *name = bs_opinfo_table[sim->prog->insns[insn].op].name;
    char note[64];
    snprintf(note, sizeof note, "%s;", name);
    BS_TRY(bs_sim_note(sim, note, err));
    return bs_sim_diagnose_at(sim, c, insn, err, "%s is not simulated (skipped, as the "
                              "compiler's simulator does)", name);
}

/* Abstract opcodes never load, and the step machine (vm/interp.c) runs the control flow
** before it gets here: reaching either is a bug of the VM. */
static bs_status x_abstract(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    (void)c;
    return bs_errorf(err, BS_E_SIM, "internal: %s reached the executor table",
                     bs_opinfo_table[sim->prog->insns[insn].op].name);
}
#define x_flow x_abstract

static bs_status x_tensor_load(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    return tensor_reg(sim, c, insn, 1, err);
}

static bs_status x_tensor_save(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    return tensor_reg(sim, c, insn, 0, err);
}

static bs_status x_global_rank(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    if (in->nout < 1 || p->opnds[in->opnd + in->nin].kind != BS_OPND_register_access)
        return bs_errorf(err, BS_E_SIM, "GetGlobalRankId needs a register output");
    bs_core_reg_set(sim, c, p->opnds[in->opnd + in->nin].loc, (uint64_t)c->index);
    return BS_OK;
}

static bs_status x_reset_semaphores(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    (void)err;
    for (int32_t k = 0; k < in->nlist; k++)
        c->sem[p->ipool[in->list + k]] = 0;
    return BS_OK;
}

static bs_status x_switch_queue(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    (void)err;
    queue_instance(sim, c, &sim->prog->insns[insn], 1);
    return BS_OK;
}

static bs_status x_reset_queue(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    (void)err;
    queue_instance(sim, c, &sim->prog->insns[insn], 0);
    return BS_OK;
}

/* The executors of other files, under their handler names. */
#define x_reg_alu       bs_exec_reg_alu
#define x_reg_move      bs_exec_reg_move
#define x_gather        bs_exec_gather
#define x_collective    bs_exec_collective
#define x_sb2sb         bs_exec_sb2sb
#define x_cur_rank      bs_exec_cur_rank
#define x_read_var_addr bs_exec_read_var_addr
#define x_print         bs_exec_print
#define x_host          bs_exec_host

/* opcode -> executor: the handler column of bs_ops.def. */
#define BS_K(stem) x_kernel
#define BS_VM(what) x_##what
#define BS_TODO x_todo
static bs_exec_fn *const exec_table[BS_OP__COUNT] = {
#define BS_OP(name, sim, fam, handler, sem) [BS_OP_##name] = handler,
#include "../bs_ops.def"
};
#undef BS_K
#undef BS_VM
#undef BS_TODO

bs_status bs_exec_insn(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    return exec_table[sim->prog->insns[insn].op](sim, c, insn, err);
}

int bs_sim_has_host_ops(const bs_sim *sim)
{
    const bs_program *p = sim->prog;
    for (int32_t i = 0; i < p->n_insns; i++) {
        int32_t op = p->insns[i].op;
        if (op >= 0 && op < BS_OP__COUNT && exec_table[op] == x_host)
            return 1;
    }
    return 0;
}
