/* vm/collective.c -- work across cores (docs/spec/machine-model.md §3.6, §6.6; nki-isa-semantics
** §6): CollectiveCompute (AllReduce, AllGather, ReduceScatter, AllToAll), CollectiveSend /
** CollectiveRecv, and GPSIMDSB2SB (a copy into the partner core's SBUF).
**
** Ranks are the cores of the run (rank = core index). A collective is a rendezvous of
** its group: CollectiveCompute's group is the replica group holding this rank (every core
** when `replica_groups` is absent); a Send's group is itself and its peer, which must be
** at a CollectiveRecv naming it back (and vice versa). An instruction is ready when every
** member of its group has its matching collective at the head of an engine queue with
** its waits satisfied. The first member to run it does the whole exchange -- reading
** every member's real input, writing every member's output -- and the others then
** complete theirs without moving data. A collective some member never reaches stalls its
** ranks; when nothing else can advance that is a DeadlockError naming the waiting ranks
** and the ones they wait for.
**
** Data: inputs decode to fp32 and the reduction folds in group order with add, max or min
** (libm fmaxf/fminf); outputs encode with the cast rules. Same-dtype routing (gathers,
** all-to-all, send/recv) copies bits. Chunks are contiguous runs of the row-major element
** order of the access pattern: AllGather's output holds member g's input as chunk g;
** ReduceScatter's member g receives chunk g of the reduction; AllToAll sends chunk j of
** member g to chunk g of member j.
**
** Permutes (NKI collective_permute*): Permute and PermuteReduce route by `src_target_pairs`
** (their group is every rank the pairs name, in order of first appearance); the Implicit
** kinds run a ring over the replica group in its order, member g receiving from member
** g - 1 (mod n). The Reduce kinds send op(ins[0], ins[1]) folded in fp32; the others
** ins[0] (bits when the dtypes agree). A rank no pair targets keeps its output as it was.
** GetCurProcessingRankID names the member whose data a ring step holds: member
** (g - iter_id) mod n of this rank's replica group (NKI: iteration 0 is the rank itself,
** later ones its predecessors around the ring). */
#include <math.h>
#include <stdio.h>
#include "vm.h"
#include "check.h"

/* {=== Parameter slots (bs_ops.def) ===} */

_Static_assert(BS_Pi_CollectiveSend_peer == BS_Pi_CollectiveRecv_peer, "peer slot");
static inline int64_t cc_kind(const bs_insn *in) { return BS_PI(in, CollectiveCompute, kind); }
static inline int64_t cc_op(const bs_insn *in) { return BS_PI(in, CollectiveCompute, op); }
static inline int64_t cc_peer(const bs_insn *in) { return BS_PI(in, CollectiveSend, peer); }
/* Pairs at the end of the list (0 when the count does not fit it). */
static inline int32_t cc_npairs(const bs_insn *in)
{
    int64_t n = BS_PI(in, CollectiveCompute, npairs);
    return n > 0 && n <= in->nlist / 2 ? (int32_t)n : 0;
}

static int is_paired(int64_t kind)
{
    return kind == BS_COLLKIND_Permute || kind == BS_COLLKIND_PermuteReduce;
}

static int is_permute(int64_t kind)
{
    return kind >= BS_COLLKIND_Permute && kind <= BS_COLLKIND_PermuteReduceImplicit;
}

static int is_reducing_permute(int64_t kind)
{
    return kind == BS_COLLKIND_PermuteReduce || kind == BS_COLLKIND_PermuteReduceImplicit;
}

/* {=== Groups ===} */

#define CC_MAX 256       /* members of one group */

/* The replica groups [size, ranks...]... of `in` (CollectiveCompute or
** GetCurProcessingRankID) holding `rank`: its members in group order, the count, or -1
** when the groups do not hold the rank; no groups = every core. */
static int32_t replica_group(const bs_sim *sim, const bs_insn *in, int32_t nlist, int32_t rank,
                             int32_t *m)
{
    const bs_program *p = sim->prog;
    if (nlist == 0) {
        int32_t n = sim->ncores < CC_MAX ? sim->ncores : CC_MAX;
        for (int32_t r = 0; r < n; r++)
            m[r] = r;
        return n;
    }
    for (int32_t k = 0; k < nlist;) {
        int64_t size = p->ipool[in->list + k];
        int32_t has = 0;
        if (size < 0 || size > nlist - k - 1)
            return -1;                      /* not a group list (the loader writes none) */
        for (int32_t j = 0; j < size && j < CC_MAX; j++) {
            m[j] = (int32_t)p->ipool[in->list + k + 1 + j];
            has |= m[j] == rank;
        }
        if (has)
            return size < CC_MAX ? (int32_t)size : CC_MAX;
        k += 1 + (int32_t)size;
    }
    return -1;
}

/* Members of insn's group as seen by `rank`, in group order; returns the count, or -1
** when the replica groups do not hold the rank. */
static int32_t group_of(const bs_sim *sim, const bs_insn *in, int32_t rank, int32_t *m)
{
    const bs_program *p = sim->prog;
    if (in->op != BS_OP_CollectiveCompute) {
        m[0] = in->op == BS_OP_CollectiveSend ? rank : (int32_t)cc_peer(in);
        m[1] = in->op == BS_OP_CollectiveSend ? (int32_t)cc_peer(in) : rank;
        return 2;
    }
    if (is_paired(cc_kind(in))) {          /* the ranks the pairs name, first appearance; */
                                           /* a rank no pair names is a group of itself */
        int32_t n = 0, has = 0, np2 = 2 * cc_npairs(in);
        const int64_t *pr = p->ipool + in->list + in->nlist - np2;
        for (int32_t k = 0; k < np2; k++) {
            int32_t r = (int32_t)pr[k], seen = 0;
            for (int32_t j = 0; j < n; j++)
                seen |= m[j] == r;
            if (!seen && n < CC_MAX)
                m[n++] = r;
            has |= r == rank;
        }
        if (!has) {
            m[0] = rank;
            return 1;
        }
        return n;
    }
    return replica_group(sim, in, in->nlist - 2 * cc_npairs(in), rank, m);
}

/* Does rank r's collective `h` match `in` run by rank `me`? */
static int matches(const bs_sim *sim, const bs_insn *in, int32_t me, const bs_insn *h, int32_t r)
{
    int32_t m[CC_MAX], n;
    if (in->op == BS_OP_CollectiveSend)
        return h->op == BS_OP_CollectiveRecv && cc_peer(h) == me;
    if (in->op == BS_OP_CollectiveRecv)
        return h->op == BS_OP_CollectiveSend && cc_peer(h) == me;
    if (h->op != BS_OP_CollectiveCompute)
        return 0;
    n = group_of(sim, h, r, m);
    for (int32_t j = 0; j < n; j++)
        if (m[j] == me)
            return 1;
    return 0;
}

/* The collective instruction at the head of one of core r's queues, ready except for the
** rendezvous and matching `in` of rank `me`; -1 if none. */
static int32_t head_collective(const bs_sim *sim, const bs_core *r, const bs_insn *in,
                               int32_t me)
{
    const bs_program *p = sim->prog;
    const bs_frame *f;
    const bs_block *b;
    int32_t rdv, minhead;
    if (r->done || r->nframes == 0)
        return -1;
    f = &r->frames[r->nframes - 1];
    if (f->bi >= p->regions[f->region].nblock || !f->started || f->npending == 0)
        return -1;
    b = &p->blocks[p->regions[f->region].block0 + f->bi];
    rdv = f->head[BS_Q_RDV];
    minhead = b->ninsn;
    for (int q = 0; q < BS_Q_RDV; q++)
        if (f->head[q] < minhead)
            minhead = f->head[q];
    for (int q = 0; q < BS_NUM_ENGINES; q++) {
        int32_t k = f->seq ? f->pc : f->head[q], insn;
        const bs_insn *h;
        if (k >= b->ninsn || (!f->seq && ((q != BS_Q_RDV && k > rdv) || (q == BS_Q_RDV && minhead < k))))
            continue;
        insn = b->insn0 + k;
        h = &p->insns[insn];
        if (bs_is_collective(h->op) && bs_sync_ready(sim, r, h->sync, h->nwait, bs_core_slot(sim, r, insn))
            && r->coll_done != insn && matches(sim, in, me, h, r->index))
            return insn;
        if (f->seq)
            break;
    }
    return -1;
}

int bs_coll_ready(const bs_sim *sim, const bs_core *c, int32_t insn)
{
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t m[CC_MAX], n;
    if (c->coll_done == insn)
        return 1;
    n = group_of(sim, in, c->index, m);
    for (int32_t j = 0; j < n; j++) {
        if (m[j] == c->index)
            continue;
        if (m[j] < 0 || m[j] >= sim->ncores)
            return 1;                       /* runs, and fails naming the rank */
        if (head_collective(sim, &sim->cores[m[j]], in, c->index) < 0)
            return 0;
    }
    return 1;
}

void bs_coll_describe(const bs_sim *sim, const bs_core *c, int32_t insn, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t m[CC_MAX], n, first = 1;
    if (!bs_is_collective(in->op) || !bs_sync_ready(sim, c, in->sync, in->nwait, bs_core_slot(sim, c, insn)))
        return;
    n = group_of(sim, in, c->index, m);
    bs_error_append(err, "; waits for rank%s ", n > 2 ? "s" : "");
    for (int32_t j = 0; j < n; j++) {
        const bs_core *r;
        if (m[j] == c->index || m[j] < 0 || m[j] >= sim->ncores)
            continue;
        r = &sim->cores[m[j]];
        if (head_collective(sim, r, in, c->index) >= 0)
            continue;
        bs_error_append(err, "%s%d%s", first ? "" : ", ", m[j], r->done ? " (finished)" : "");
        first = 0;
    }
    bs_error_append(err, " to reach the matching %s",
                    in->op == BS_OP_CollectiveSend ? "CollectiveRecv"
                    : in->op == BS_OP_CollectiveRecv ? "CollectiveSend" : "CollectiveCompute");
}

/* {=== The exchange ===} */

typedef struct cc_member {
    int32_t  rank, insn;
    bs_core *core;
    int32_t  wrote;        /* its outputs were written (a Permute may skip a rank) */
    bs_kctx  k;
    int64_t *offs[BS_KMAX * 2];
} cc_member;

/* Dense fp32 copy of a view. */
static void load_f32(float *dst, const bs_view *v)
{
    bs_view_to_f32(dst, v);
}

/* dst (a dense buffer of v->count elements of dtype dt) := v, bit copy when same dtype. */
static void to_dense(uint8_t *dst, int32_t dt, const bs_view *v, float *tmp)
{
    if (v->dtype == dt) {
        bs_view d;
        memset(&d, 0, sizeof d);
        d.data = dst;
        d.dtype = dt;
        d.ndim = 1;
        d.num[0] = d.count = v->count;
        d.stride[0] = bs_dtinfo_table[dt].size;
        bs_copy_raw(&d, v);
    } else {
        bs_view_to_f32(tmp, v);
        bs_dt_store_row_f32(dst, bs_dtinfo_table[dt].size, tmp, v->count, dt);
    }
}

static void from_dense(const bs_view *v, const uint8_t *src, int32_t dt)
{
    bs_view d;
    memset(&d, 0, sizeof d);
    d.data = (uint8_t *)src;
    d.dtype = dt;
    d.ndim = 1;
    d.num[0] = d.count = v->count;
    d.stride[0] = bs_dtinfo_table[dt].size;
    bs_copy_raw(v, &d);
}

static void fold(int32_t op, float *acc, const float *x, int64_t n)
{
    if (op == BS_ALU_add)
        bs_alu_row_f32(BS_ALU_add, acc, acc, x, n);
    else if (op == BS_ALU_max)
        for (int64_t e = 0; e < n; e++)
            acc[e] = fmaxf(acc[e], x[e]);
    else
        for (int64_t e = 0; e < n; e++)
            acc[e] = fminf(acc[e], x[e]);
}

static void *scratch(bs_sim *sim, size_t bytes)
{
    void *p = sim->coll_buf;
    if (bs_reserve(&p, &sim->coll_cap, bytes, 0))
        return NULL;
    sim->coll_buf = p;
    return p;
}

/* Do two members' pair lists agree? */
static int same_pairs(const bs_program *p, const bs_insn *a, const bs_insn *b)
{
    int32_t na = 2 * cc_npairs(a);
    if (na != 2 * cc_npairs(b))
        return 0;
    for (int32_t k = 0; k < na; k++)
        if (p->ipool[a->list + a->nlist - na + k] != p->ipool[b->list + b->nlist - na + k])
            return 0;
    return 1;
}

/* The Permute kinds' sources: src[j] is the member whose data member j receives (-1:
** none). Ring kinds take the previous member; the paired kinds follow src_target_pairs,
** which every member must give alike. */
static bs_status permute_sources(bs_sim *sim, const bs_insn *in, int64_t kind, const cc_member *mb,
                                 int32_t n, int32_t *src, bs_error *err)
{
    const bs_program *p = sim->prog;
    int32_t np2;
    const int64_t *pr;
    for (int32_t j = 0; j < n; j++)
        src[j] = is_paired(kind) ? -1 : (j + n - 1) % n;
    if (!is_paired(kind))
        return BS_OK;
    np2 = 2 * cc_npairs(in);
    pr = p->ipool + in->list + in->nlist - np2;
    for (int32_t k = 0; k < np2; k += 2) {
        int32_t si = -1, ti = -1;
        for (int32_t j = 0; j < n; j++) {
            if (mb[j].rank == pr[k])
                si = j;
            if (mb[j].rank == pr[k + 1])
                ti = j;
        }
        if (si < 0 || ti < 0)
            continue;                   /* a rank no pair names runs alone */
        if (src[ti] >= 0)
            return bs_errorf(err, BS_E_PROGRAM, "src_target_pairs: pair %d (%lld, %lld) "
                             "repeats a target", (int)(k / 2), (long long)pr[k],
                             (long long)pr[k + 1]);
        src[ti] = si;
    }
    for (int32_t j = 1; j < n; j++)
        if (!same_pairs(p, &p->insns[mb[j].insn], in))
            return bs_errorf(err, BS_E_SIM, "rank %d's %s '%s' has other src_target_pairs "
                             "than rank %d's", mb[j].rank, bs_enum_name("COLLKIND", (int32_t)kind),
                             bs_str(p, p->insns[mb[j].insn].name), mb[0].rank);
    return BS_OK;
}

/* The Permute kinds' operands: the reducing kinds need a second input like the first, and
** every receiving member an output of the sent size. */
static bs_status permute_check(int64_t kind, int32_t op, const cc_member *mb, int32_t n,
                               const int32_t *src, bs_error *err)
{
    int32_t red = is_reducing_permute(kind);
    int64_t cnt = mb[0].k.in[0].count;
    const char *kname = bs_enum_name("COLLKIND", (int32_t)kind);
    if (red && op != BS_ALU_add && op != BS_ALU_max && op != BS_ALU_min)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s with op %s (add, max or min)", kname,
                         bs_alu_table[op].name);
    for (int32_t j = 0; j < n; j++) {
        const bs_kctx *k = &mb[j].k;
        if (red && (k->nin < 2 || k->in[1].ndim == 0))
            return bs_errorf(err, BS_E_PROGRAM, "rank %d's %s needs a second input ins[1] "
                             "(it sends op(ins[0], ins[1]))", mb[j].rank, kname);
        if (red && k->in[1].count != cnt)
            return bs_errorf(err, BS_E_SIM, "rank %d's ins[1] has %lld elements, ins[0] %lld",
                             mb[j].rank, (long long)k->in[1].count, (long long)cnt);
        if (red && !bs_dt_numeric(k->in[1].dtype))
            return bs_errorf(err, BS_E_UNSUPPORTED, "rank %d: packed dtypes cannot be "
                             "exchanged", mb[j].rank);
        if (src[j] >= 0 && k->out[0].count != cnt)
            return bs_errorf(err, BS_E_SIM, "rank %d's output has %lld elements, needs %lld "
                             "(rank %d's input)", mb[j].rank, (long long)k->out[0].count,
                             (long long)cnt, mb[src[j]].rank);
    }
    return BS_OK;
}

/* The Permute kinds: member j's outs[0] := what member src[j] sends (its ins[0], or for
** the Reduce kinds op(ins[0], ins[1]) in fp32); every input is read before any output is
** written (an output may be another member's input). */
static bs_status permute(bs_sim *sim, const bs_insn *in, int64_t kind, int32_t op, cc_member *mb,
                         int32_t n, bs_error *err)
{
    int32_t src[CC_MAX], red = is_reducing_permute(kind);
    int64_t cnt = mb[0].k.in[0].count;
    uint8_t *buf;
    float *tmp;
    BS_TRY(permute_sources(sim, in, kind, mb, n, src, err));
    BS_TRY(permute_check(kind, op, mb, n, src, err));
    /* [n inputs: fp32 (Reduce) or raw bits of their dtype, 8 bytes an element][cnt fp32] */
    buf = scratch(sim, (size_t)cnt * ((size_t)n * 8 + 4));
    if (buf == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory in a collective");
    tmp = (float *)(buf + (size_t)cnt * (size_t)n * 8);
    for (int32_t j = 0; j < n; j++) {
        uint8_t *slot = buf + (size_t)j * (size_t)cnt * 8;
        if (red) {
            bs_view_to_f32((float *)slot, &mb[j].k.in[0]);
            bs_view_to_f32(tmp, &mb[j].k.in[1]);
            fold(op, (float *)slot, tmp, cnt);
        } else {
            to_dense(slot, mb[j].k.in[0].dtype, &mb[j].k.in[0], tmp);
        }
    }
    for (int32_t j = 0; j < n; j++) {
        uint8_t *slot;
        int32_t dt;
        mb[j].wrote = src[j] >= 0;
        if (src[j] < 0)
            continue;
        slot = buf + (size_t)src[j] * (size_t)cnt * 8;
        dt = red ? BS_DT_float32 : mb[src[j]].k.in[0].dtype;
        if (!red && dt == mb[j].k.out[0].dtype) {
            from_dense(&mb[j].k.out[0], slot, dt);
        } else {
            bs_view d = bs_view_dense(slot, dt, cnt);
            bs_view_to_f32(tmp, &d);
            bs_view_from_f32(&mb[j].k.out[0], tmp);
        }
    }
    return BS_OK;
}

/* Every member has the operands its part needs, in dtypes that can be exchanged. */
static bs_status check_operands(bs_sim *sim, const bs_insn *in, const cc_member *mb, int32_t n,
                                bs_error *err)
{
    for (int32_t j = 0; j < n; j++) {
        const bs_kctx *k = &mb[j].k;
        int sr = in->op != BS_OP_CollectiveCompute;     /* member 0 sends, 1 receives */
        int need_in = !sr || j == 0, need_out = !sr || j == 1;
        if ((need_in && (k->nin < 1 || k->in[0].ndim == 0))
            || (need_out && (k->nout < 1 || k->out[0].ndim == 0)))
            return bs_errorf(err, BS_E_PROGRAM, "rank %d's %s needs %s", mb[j].rank,
                             bs_opinfo_table[sim->prog->insns[mb[j].insn].op].name,
                             need_in ? "an input ins[0]" : "an output outs[0]");
        if ((need_in && !bs_dt_numeric(k->in[0].dtype))
            || (need_out && !bs_dt_numeric(k->out[0].dtype)))
            return bs_errorf(err, BS_E_UNSUPPORTED, "rank %d: packed dtypes cannot be "
                             "exchanged", mb[j].rank);
    }
    return BS_OK;
}

/* CollectiveSend/Recv: member 1's outs[0] := member 0's ins[0], cast. */
static bs_status send_recv(bs_sim *sim, cc_member *mb, bs_error *err)
{
    const bs_view *src = &mb[0].k.in[0], *dst = &mb[1].k.out[0];
    float *tmp;
    if (src->count != dst->count)
        return bs_errorf(err, BS_E_SIM, "rank %d sends %lld elements, rank %d receives %lld",
                         mb[0].rank, (long long)src->count, mb[1].rank,
                         (long long)dst->count);
    if (src->dtype == dst->dtype) {
        bs_copy_raw(dst, src);
        return BS_OK;
    }
    tmp = scratch(sim, (size_t)src->count * sizeof(float));
    if (tmp == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory in a collective");
    bs_view_to_f32(tmp, src);
    bs_view_from_f32(dst, tmp);
    return BS_OK;
}

/* Every member's CollectiveCompute has member 0's kind and op and as many input elements. */
static bs_status check_same_kind(bs_sim *sim, int64_t kind, int32_t op, const cc_member *mb,
                                 int32_t n, bs_error *err)
{
    const bs_view *i0 = &mb[0].k.in[0];
    for (int32_t j = 0; j < n; j++) {
        const bs_insn *h = &sim->prog->insns[mb[j].insn];
        if (cc_kind(h) != kind || (int32_t)cc_op(h) != op)
            return bs_errorf(err, BS_E_SIM, "rank %d's CollectiveCompute '%s' (%s, %s) does not "
                             "match rank %d's (%s, %s)", mb[j].rank, bs_str(sim->prog, h->name),
                             bs_enum_name("COLLKIND", (int32_t)cc_kind(h)),
                             bs_alu_table[cc_op(h)].name, mb[0].rank,
                             bs_enum_name("COLLKIND", (int32_t)kind), bs_alu_table[op].name);
        if (mb[j].k.in[0].count != i0->count)
            return bs_errorf(err, BS_E_SIM, "rank %d's input has %lld elements, rank %d's %lld",
                             mb[j].rank, (long long)mb[j].k.in[0].count, mb[0].rank,
                             (long long)i0->count);
    }
    return BS_OK;
}

/* AllReduce (every member gets the fold of all inputs, fp32) and ReduceScatter (member j
** gets chunk j of it). */
static bs_status reduce_all(bs_sim *sim, int64_t kind, int32_t op, cc_member *mb, int32_t n,
                            int64_t cnt, bs_error *err)
{
    int64_t chunk = kind == BS_COLLKIND_AllReduce ? cnt : cnt / n;
    float *acc, *x;
    if (op != BS_ALU_add && op != BS_ALU_max && op != BS_ALU_min)
        return bs_errorf(err, BS_E_UNSUPPORTED, "%s with op %s (add, max or min)",
                         bs_enum_name("COLLKIND", (int32_t)kind), bs_alu_table[op].name);
    if (kind == BS_COLLKIND_ReduceScatter && cnt % n)
        return bs_errorf(err, BS_E_SIM, "ReduceScatter input of %lld elements does not "
                         "split into %d chunks", (long long)cnt, (int)n);
    for (int32_t j = 0; j < n; j++)
        if (mb[j].k.out[0].count != chunk)
            return bs_errorf(err, BS_E_SIM, "rank %d's output has %lld elements, needs %lld",
                             mb[j].rank, (long long)mb[j].k.out[0].count, (long long)chunk);
    acc = scratch(sim, (size_t)cnt * 2 * sizeof(float));
    if (acc == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory in a collective");
    x = acc + cnt;
    load_f32(acc, &mb[0].k.in[0]);
    for (int32_t j = 1; j < n; j++) {
        const bs_view *v = &mb[j].k.in[0];
        if (v->dtype == BS_DT_float32 && v->ndim >= 1) {
            bs_view t = *v;
            bs_view_normalize(&t);
            if (t.ndim == 1 && t.stride[0] == 4) {
                fold(op, acc, (const float *)t.data, cnt);
                continue;
            }
        }
        load_f32(x, v);
        fold(op, acc, x, cnt);
    }
    for (int32_t j = 0; j < n; j++) {
        const float *part = kind == BS_COLLKIND_AllReduce ? acc : acc + (int64_t)j * chunk;
        bs_view_from_f32(&mb[j].k.out[0], part);
    }
    return BS_OK;
}

/* AllGather (every member gets all inputs in member order) and AllToAll (member g's chunk
** j := member j's chunk g), bit for bit in the output dtype. */
static bs_status gather_all(bs_sim *sim, int64_t kind, cc_member *mb, int32_t n, int64_t cnt,
                            bs_error *err)
{
    int32_t dt = mb[0].k.out[0].dtype, sz = bs_dtinfo_table[dt].size;
    int64_t total = kind == BS_COLLKIND_AllGather ? cnt * n : cnt, chunk;
    uint8_t *buf;
    float *tmp;
    if (kind == BS_COLLKIND_AllToAll && cnt % n)
        return bs_errorf(err, BS_E_SIM, "AllToAll input of %lld elements does not split "
                         "into %d chunks", (long long)cnt, (int)n);
    for (int32_t j = 0; j < n; j++)
        if (mb[j].k.out[0].count != total || mb[j].k.out[0].dtype != dt)
            return bs_errorf(err, BS_E_SIM, "rank %d's output has %lld %s elements, needs "
                             "%lld %s", mb[j].rank, (long long)mb[j].k.out[0].count,
                             bs_dtinfo_table[mb[j].k.out[0].dtype].name, (long long)total,
                             bs_dtinfo_table[dt].name);
    /* [all inputs, dense in dt][one output / fp32 scratch, 8 bytes an element] */
    buf = scratch(sim, (size_t)(cnt * n) * ((size_t)sz + 8));
    if (buf == NULL)
        return bs_errorf(err, BS_E_NOMEM, "out of memory in a collective");
    tmp = (float *)(buf + (size_t)(cnt * n) * (size_t)sz);
    for (int32_t j = 0; j < n; j++)
        to_dense(buf + (size_t)(j * cnt) * (size_t)sz, dt, &mb[j].k.in[0], tmp);
    if (kind == BS_COLLKIND_AllGather) {
        for (int32_t j = 0; j < n; j++)
            from_dense(&mb[j].k.out[0], buf, dt);
        return BS_OK;
    }
    chunk = cnt / n;
    for (int32_t g = 0; g < n; g++) {       /* member g's chunk j := member j's chunk g */
        uint8_t *dense = (uint8_t *)tmp;
        for (int32_t j = 0; j < n; j++)
            memcpy(dense + (size_t)(j * chunk) * (size_t)sz,
                   buf + (size_t)(j * cnt + g * chunk) * (size_t)sz,
                   (size_t)chunk * (size_t)sz);
        from_dense(&mb[g].k.out[0], dense, dt);
    }
    return BS_OK;
}

/* The data movement of one collective, once every member has arrived. */
static bs_status exchange(bs_sim *sim, int32_t insn, cc_member *mb, int32_t n, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    int64_t kind = in->op == BS_OP_CollectiveCompute ? cc_kind(in) : BS_COLLKIND_SendRecv;
    int32_t op = (int32_t)cc_op(in);
    BS_TRY(check_operands(sim, in, mb, n, err));
    if (kind == BS_COLLKIND_SendRecv)
        return send_recv(sim, mb, err);
    BS_TRY(check_same_kind(sim, kind, op, mb, n, err));
    if (is_permute(kind))
        return permute(sim, in, kind, op, mb, n, err);
    if (kind == BS_COLLKIND_AllReduce || kind == BS_COLLKIND_ReduceScatter)
        return reduce_all(sim, kind, op, mb, n, mb[0].k.in[0].count, err);
    if (kind == BS_COLLKIND_AllGather || kind == BS_COLLKIND_AllToAll)
        return gather_all(sim, kind, mb, n, mb[0].k.in[0].count, err);
    return bs_errorf(err, BS_E_UNSUPPORTED, "CollectiveCompute kind %s is not supported "
                     "(AllReduce, AllGather, ReduceScatter, AllToAll, Permute, PermuteReduce, "
                     "PermuteImplicit, PermuteReduceImplicit)",
                     bs_enum_name("COLLKIND", (int32_t)kind));
}

bs_status bs_exec_collective(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_insn *in = &sim->prog->insns[insn];
    int32_t m[CC_MAX], n;
    cc_member *mb;
    bs_status st;
    if (c->coll_done == insn) {             /* another member did the exchange */
        c->coll_done = -1;
        return BS_OK;
    }
    n = group_of(sim, in, c->index, m);
    if (n < 0) {
        bs_errorf(err, BS_E_PROGRAM, "replica_groups do not hold rank %d", c->index);
        return BS_E_PROGRAM;
    }
    for (int32_t j = 0; j < n; j++)
        if (m[j] < 0 || m[j] >= sim->ncores) {
            bs_errorf(err, BS_E_SIM, "rank %d does not exist (the run has %d core%s: ranks "
                      "0..%d)", m[j], sim->ncores, sim->ncores == 1 ? "" : "s", sim->ncores - 1);
            return BS_E_SIM;
        }
    if (in->op != BS_OP_CollectiveCompute && m[0] == m[1]) {
        bs_errorf(err, BS_E_SIM, "peer_id %d is this core's own rank", m[0]);
        return BS_E_SIM;
    }
    mb = bs_kstate_tmp(&c->ks, BS_KSLOT_D, (size_t)n * sizeof *mb);
    if (mb == NULL)
        return (bs_errorf(err, BS_E_NOMEM, "out of memory in a "
                          "collective"));
    for (int32_t j = 0; j < n; j++) {
        mb[j].rank = m[j];
        mb[j].wrote = in->op == BS_OP_CollectiveCompute || j == 1;
        mb[j].core = &sim->cores[m[j]];
        mb[j].insn = m[j] == c->index ? insn : head_collective(sim, mb[j].core, in, c->index);
        if (mb[j].insn < 0) {
            bs_errorf(err, BS_E_SIM, "rank %d is not at a matching collective", m[j]);
            return BS_E_SIM;
        }
        if (BS_UNLIKELY(sim->chk) && mb[j].core != c) {   /* the group meets (check.h) */
            int32_t saved = mb[j].core->rslot;
            mb[j].core->rslot = bs_core_slot(sim, mb[j].core, mb[j].insn);
            bs_chk_join(sim, mb[j].core, mb[j].insn);
            mb[j].core->rslot = saved;
        }
    }
    for (int32_t j = 0; j < n; j++) {
        /* the member's operands read its own engine's registers, on its own thread */
        int32_t saved = mb[j].core->rslot, tid = 0;
        mb[j].core->rslot = bs_core_slot(sim, mb[j].core, mb[j].insn);
        if (BS_UNLIKELY(sim->chk))
            tid = bs_chk_as(sim, mb[j].core, mb[j].insn);
        st = bs_exec_resolve(sim, mb[j].core, mb[j].insn, &mb[j].k, mb[j].offs, err);
        if (BS_UNLIKELY(sim->chk))
            bs_chk_restore(sim, tid);
        mb[j].core->rslot = saved;
        if (st != BS_OK)
            return st;
    }
    st = exchange(sim, insn, mb, n, err);
    if (st != BS_OK)
        return st;
    for (int32_t j = 0; j < n; j++) {
        if (mb[j].wrote)
            bs_exec_finish(mb[j].core, &mb[j].k, mb[j].k.nin, mb[j].offs);
        if (mb[j].core != c)
            mb[j].core->coll_done = mb[j].insn;
    }
    return BS_OK;
}

/* {=== GetCurProcessingRankID: the rank whose data a ring step holds ===} */

bs_status bs_exec_cur_rank(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    int32_t m[CC_MAX], n, pos = 0;
    int64_t iter = 0, chan = 0;
    if (in->nout < 1 || p->opnds[in->opnd + in->nin].kind != BS_OPND_register_access)
        return bs_errorf(err, BS_E_PROGRAM, "needs a register output outs[0]");
    if (BS_PX(in, GetCurProcessingRankID, iter) >= 0)
        BS_TRY(bs_core_eval(sim, c, BS_PX(in, GetCurProcessingRankID, iter), &iter, err));
    if (BS_PX(in, GetCurProcessingRankID, channel) >= 0)
        BS_TRY(bs_core_eval(sim, c, BS_PX(in, GetCurProcessingRankID, channel), &chan, err));
    if (iter < 0)
        return bs_errorf(err, BS_E_SIM, "iter_id %lld is negative", (long long)iter);
    if (chan < 0)
        return bs_errorf(err, BS_E_SIM, "channel_id %lld is negative", (long long)chan);
    n = replica_group(sim, in, in->nlist, c->index, m);
    if (n < 0)
        return bs_errorf(err, BS_E_PROGRAM, "replica_groups do not hold rank %d", c->index);
    for (int32_t j = 0; j < n; j++) {
        if (m[j] < 0 || m[j] >= sim->ncores)
            return bs_errorf(err, BS_E_SIM, "rank %d does not exist (the run has %d core%s: "
                             "ranks 0..%d)", m[j], sim->ncores, sim->ncores == 1 ? "" : "s",
                             sim->ncores - 1);
        if (m[j] == c->index)
            pos = j;
    }
    return bs_exec_reg_set_int(sim, c, p->opnds[in->opnd + in->nin].loc,
                               m[(pos + n - (int32_t)(iter % n)) % n], "rank", err);
}

/* {=== GPSIMDSB2SB: out[0], an SBUF location of the partner core, := in[0] ===} */

bs_status bs_exec_sb2sb(bs_sim *sim, bs_core *c, int32_t insn, bs_error *err)
{
    const bs_program *p = sim->prog;
    const bs_insn *in = &p->insns[insn];
    bs_core *peer;
    bs_opnd o;
    bs_view src, dst;
    int64_t *soffs, *doffs, start = 0, extra = 0, val;
    bs_status st;
    if (sim->ncores != 2) {
        bs_errorf(err, BS_E_SIM, "GPSIMDSB2SB needs exactly 2 cores (the partner is core "
                  "(core + 1) & 1); the run has %d", sim->ncores);
        return BS_E_SIM;
    }
    if (in->nin < 1 || in->nout < 1 || !bs_exec_is_ap(&p->opnds[in->opnd])
        || !bs_exec_is_ap(&p->opnds[in->opnd + in->nin])) {
        bs_errorf(err, BS_E_PROGRAM, "needs an access pattern ins[0] and outs[0]");
        return BS_E_PROGRAM;
    }
    peer = &sim->cores[(c->index + 1) & 1];
    o = p->opnds[in->opnd + in->nin];
    if (p->locs[o.loc].memtype != BS_MEM_SB) {
        bs_errorf(err, BS_E_SIM, "outs[0] ('%s') must be in SBUF", bs_str(p, p->locs[o.loc].name));
        return BS_E_SIM;
    }
    /* Addresses are this core's (its loop indices and registers); memory the partner's. */
    start = o.offset;
    if (o.offset_expr >= 0 && (st = bs_core_eval(sim, c, o.offset_expr, &start, err)) != BS_OK)
        return st;
    if (o.kind == BS_OPND_symbolic_ap) {
        for (int d = 0; d < o.ndim; d++)
            if (o.addrs[d] >= 0) {
                if ((st = bs_core_eval(sim, c, o.addrs[d], &val, err)) != BS_OK)
                    return st;
                extra += o.step[d] * val;
            }
    } else if (o.kind == BS_OPND_register_ap) {
        extra = bs_core_reg_i64(sim, c, o.reg) + o.const_ap_offset;
    }
    o.kind = BS_OPND_physical_ap;
    o.offset = start + extra;
    o.offset_expr = -1;
    st = bs_exec_view(sim, c, &p->opnds[in->opnd], 0, &src, &soffs, err);
    if (st == BS_OK)
        st = bs_exec_view(sim, peer, &o, 1, &dst, &doffs, err);
    if (st == BS_OK && doffs != NULL)
        st = bs_errorf(err, BS_E_UNSUPPORTED, "outs[0] wraps partitions irregularly");
    if (st == BS_OK && src.count != dst.count)
        st = bs_errorf(err, BS_E_SIM, "ins[0] has %lld elements, outs[0] %lld",
                       (long long)src.count, (long long)dst.count);
    if (st == BS_OK && src.dtype != dst.dtype)
        st = bs_errorf(err, BS_E_SIM, "no dtype cast: ins[0] is %s, outs[0] %s",
                       bs_dtinfo_table[src.dtype].name, bs_dtinfo_table[dst.dtype].name);
    if (st != BS_OK)
        return st;
    if (!bs_view_initialized(&src))
        BS_TRY(bs_exec_warn_uninit(sim, c, insn, 0, &src, err));
    bs_copy_raw(&dst, &src);
    bs_view_mark_written(&dst);
    return BS_OK;
}
