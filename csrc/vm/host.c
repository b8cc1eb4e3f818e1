/* vm/host.c -- delegated kernels (CustomOp, BIRKernel; docs/spec/control-flow-sync.md §6.1): operands are checked
** against the instruction's shape lists, handed to the host kernel hook (the binding's
** kernel_sim dispatcher), and results written back through the output patterns.
**
** Operands whose (normalised) view is one dense run of bytes -- in simulator memory, or
** in the gather buffer of a non-linear pattern -- are handed over as they are (no copy);
** the others go through one scratch allocation per call, shared with nothing else.
** Outputs are written by the host only after every result is valid, so a failed call
** leaves memory untouched. */
#include "vm.h"
#include "check.h"

void bs_host_store_f32(const bs_host_call *call, int32_t j, const float *src)
{
    int32_t dt = call->out_dtype[j];
    int64_t n = 1;
    for (int32_t d = 0; d < call->out_ndim[j]; d++)
        n *= call->out_shape[j][d];
    bs_dt_store_row_f32_cast(call->out_data[j], bs_dtinfo_table[dt].size, src, n, dt,
                             call->fp8_overflow);
}

/* Bytes of v's dense copy in the scratch block, rounded up so every copy stays aligned. */
static size_t scratch_size(const bs_view *v)
{
    return ((size_t)v->count * (size_t)bs_dtinfo_table[v->dtype].size + 31) & ~(size_t)15;
}

static int dense_view(const bs_view *v)
{
    bs_view nv = *v;
    bs_view_normalize(&nv);
    return nv.ndim == 1 && (nv.num[0] == 1 || nv.stride[0] == bs_dtinfo_table[v->dtype].size);
}

static const bs_view *operand_view(const bs_kctx *k, int j)
{
    return j >= k->nin ? &k->out[j - k->nin] : &k->in[j];
}

/* Fill call's shapes and dtypes from the instruction's shape list (rank, dims... per
** input then output), checking each operand covers its shape; direct[j] = 1 when operand
** j can travel without a copy. Outputs go direct only if all of them can. */
static bs_status describe(bs_sim *sim, int32_t insn, const bs_kctx *k,
                          bs_host_call *call, int *direct, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    const int64_t *sh = sim->prog->ipool + in->list, *end = sh + in->nlist;
    int out_direct = 1;
    for (int j = 0; j < in->nin + in->nout; j++) {
        int out = j >= in->nin, idx = out ? j - in->nin : j;
        const bs_view *v = operand_view(k, j);
        const char *side = out ? "outs" : "ins";
        int64_t rank, n = 1;
        int64_t *shape = out ? call->out_shape[idx] : call->in_shape[idx];
        if (sh >= end || (rank = *sh++) < 0 || rank > BS_MAX_SHAPE || sh + rank > end) {
            return bs_errorf(err, BS_E_KERNEL, "kernel '%s': missing or bad shape for %s[%d]",
                             call->kernel, side, idx);
        }
        for (int64_t d = 0; d < rank; d++)
            if (BS_MUL_OVF(n, (shape[d] = *sh++), &n))
                return bs_errorf(err, BS_E_KERNEL, "kernel '%s': the shape of %s[%d] has more "
                                 "elements than int64 holds", call->kernel, side, idx);
        if (!bs_exec_is_ap(out ? &k->outs[idx] : &k->ins[idx]) || v->count != n) {
            if (bs_exec_is_ap(out ? &k->outs[idx] : &k->ins[idx]))
                bs_errorf(err, BS_E_KERNEL, "kernel '%s': %s[%d] covers %lld elements but its "
                          "shape %s has %lld", call->kernel, side, idx, (long long)v->count,
                          out ? "(dsts_shape)" : "(srcs_shape)", (long long)n);
            else
                bs_errorf(err, BS_E_KERNEL, "kernel '%s': %s[%d] is not an access pattern",
                          call->kernel, side, idx);
            err->operand = out ? BS_OUT_OPERAND + idx : idx;
            return BS_E_KERNEL;
        }
        if (out) {
            call->out_ndim[idx] = (int32_t)rank;
            call->out_dtype[idx] = v->dtype;
        } else {
            call->in_ndim[idx] = (int32_t)rank;
            call->in_dtype[idx] = v->dtype;
        }
        direct[j] = dense_view(v);
        out_direct &= !out || direct[j];
    }
    if (sh != end) {
        return bs_errorf(err, BS_E_KERNEL, "kernel '%s': more shapes than operands (%d ins, "
                         "%d outs)", call->kernel, in->nin, in->nout);
    }
    for (int j = in->nin; j < in->nin + in->nout; j++)
        direct[j] &= out_direct;               /* keeps the outputs' write order */
    return BS_OK;
}

/* Point each operand's data at memory (direct) or at its part of one scratch block
** (*scratch, owned by the caller), copying inputs there. */
static bs_status marshal(const bs_kctx *k, bs_host_call *call, const int *direct,
                         uint8_t **scratch, bs_error *err)
{
    size_t bytes = 0, pos = 0;
    for (int j = 0; j < k->nin + k->nout; j++)
        if (!direct[j])
            bytes += scratch_size(operand_view(k, j));
    if (bytes && (*scratch = bs_malloc(bytes)) == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory marshalling operands of kernel '%s'",
                         call->kernel);
    for (int j = 0; j < k->nin + k->nout; j++) {
        int out = j >= k->nin, idx = out ? j - k->nin : j;
        const bs_view *v = operand_view(k, j);
        int64_t isz = bs_dtinfo_table[v->dtype].size;
        uint8_t *data = v->data;               /* a dense view starts at its first element */
        if (!direct[j]) {
            bs_view dense = { .data = *scratch + pos, .dtype = v->dtype, .ndim = 1,
                              .num = { v->count }, .stride = { isz }, .count = v->count };
            data = *scratch + pos;
            pos += scratch_size(v);
            if (!out)
                bs_copy_raw(&dense, v);
        }
        if (out) {
            call->out_data[idx] = data;
        } else {
            call->in_data[idx] = data;
            call->in_direct[idx] = direct[j];
        }
    }
    return BS_OK;
}

bs_status bs_exec_host(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    bs_host_call call;
    bs_kctx k;
    int64_t *offs[BS_KMAX * 2];
    int direct[BS_KMAX * 2];
    uint8_t *scratch = NULL;
    bs_status st;
    memset(&call, 0, sizeof call);
    call.kernel = bs_str(p, in->str);
    call.config = in->str2 >= 0 ? bs_str(p, in->str2) : "{}";
    call.insn_name = bs_str(p, in->name);
    call.opcode = in->op;
    call.core = c->index;
    call.nin = in->nin;
    call.nout = in->nout;
    call.fp8_overflow = sim->opts.fp8_overflow;
    if (sim->host == NULL) {
        return bs_errorf(err, BS_E_KERNEL, "no kernel_sim is available for kernel '%s'",
                         call.kernel);
    }
    BS_TRY(bs_exec_resolve(sim, c, insn, &k, offs, err));
    BS_TRY(describe(sim, insn, &k, &call, direct, err));
    st = marshal(&k, &call, direct, &scratch, err);
    if (st == BS_OK)
        st = sim->host(sim->host_ctx, &call, err);
    for (int j = 0; st == BS_OK && j < in->nout; j++) {
        const bs_view *v = &k.out[j];
        int64_t isz = bs_dtinfo_table[v->dtype].size;
        bs_view dense = { .data = call.out_data[j], .dtype = v->dtype, .ndim = 1,
                          .num = { v->count }, .stride = { isz }, .count = v->count };
        if (!direct[in->nin + j])
            bs_copy_raw(&k.out[j], &dense);
    }
    bs_free(scratch);
    if (st != BS_OK) {
        err->status = (st == BS_E_NOMEM || st == BS_E_INTERRUPT) ? st : BS_E_KERNEL;
        return err->status;
    }
    if (BS_UNLIKELY(sim->chk))
        BS_TRY(bs_chk_outputs(sim, c, insn, &k, err));
    bs_exec_finish(c, &k, k.nin, offs);
    return BS_OK;
}
