/* kernels/k_shuffle.c -- StreamShuffle (docs/spec/machine-model.md §6.4, docs/spec/nki-isa-semantics.md §3.34).
** Within each block of 32 partitions (counted from the access pattern's first partition):
** out[q*32 + i] := in[q*32 + mask[i]], mask[i] = 255 leaves out[q*32 + i] unchanged; the
** same 32-entry mask (list) applies to every block. Rows are copied bit for bit (no cast:
** ins[0] and outs[0] must share a dtype). In place is allowed (the input is read whole
** first). */
#include "kernel.h"

static bs_view row(const bs_view *v, int64_t p)
{
    bs_view r = *v;
    r.data += p * v->stride[0];
    if (r.shadow)
        r.shadow += p * v->stride[0];
    r.num[0] = 1;
    r.count = v->count / v->num[0];
    return r;
}

bs_status bs_k_StreamShuffle(bs_kctx *k, bs_error *err)
{
    const int64_t *mask = k->prog->ipool + k->insn->list;
    bs_view in = k->in[0], out = k->out[0];
    if (k->nin < 1 || k->nout < 1 || in.ndim == 0 || out.ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "StreamShuffle needs access patterns as ins[0] "
                         "and outs[0]");
    if (in.dtype != out.dtype)
        return bs_errorf(err, BS_E_UNSUPPORTED, "StreamShuffle does not cast (ins[0] %s, "
                         "outs[0] %s)", bs_dtinfo_table[in.dtype].name,
                         bs_dtinfo_table[out.dtype].name);
    if (k->insn->nlist != 32)
        return bs_errorf(err, BS_E_PROGRAM, "StreamShuffle needs a mask of 32 entries, got %d",
                         (int)k->insn->nlist);
    if (in.num[0] != out.num[0] || in.count != out.count)
        return bs_errorf(err, BS_E_SIM, "StreamShuffle: ins[0] (%lld partitions, %lld "
                         "elements) and outs[0] (%lld, %lld) differ", (long long)in.num[0],
                         (long long)in.count, (long long)out.num[0], (long long)out.count);
    int64_t P = in.num[0];
    for (int64_t i = 0; i < 32 && i < P; i++)
        for (int64_t q = 0; q * 32 + i < P; q++)
            if (mask[i] != 255 && q * 32 + mask[i] >= P)
                return bs_errorf(err, BS_E_SIM, "StreamShuffle: mask[%lld] = %lld names "
                                 "partition %lld of %lld", (long long)i, (long long)mask[i],
                                 (long long)(q * 32 + mask[i]), (long long)P);
    {   /* a dense private copy of the input: rows move between partitions, so even the
        ** exact same view as the output must be read whole first */
        int64_t isz = bs_dtinfo_table[in.dtype].size, n = in.count / P;
        bs_view d = in;
        d.data = bs_kstate_tmp(k->ks, BS_KSLOT_A, (size_t)(in.count * isz) + 1);
        if (d.data == NULL)
            return bs_errorf(err, BS_E_NOMEM, "StreamShuffle: out of memory");
        d.shadow = NULL;
        d.ndim = 2;
        d.num[0] = P;
        d.num[1] = n;
        d.stride[0] = n * isz;
        d.stride[1] = isz;
        d.gathered = 1;
        bs_copy_raw(&d, &in);
        in = d;
    }
    for (int64_t p = 0; p < P; p++) {
        int64_t m = mask[p % 32];
        if (m == 255)
            continue;
        bs_view d = row(&out, p), s = row(&in, (p / 32) * 32 + m);
        bs_copy_raw(&d, &s);
    }
    return BS_OK;
}
