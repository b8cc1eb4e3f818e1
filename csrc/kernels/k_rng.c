/* kernels/k_rng.c -- randomness: the generators of rng.h and the instructions that use
** them (Rand, Rand2, Dropout, Get/SetRandState, RandGet/SetState, Memset Random).
** Semantics and birsim's choices where the specs are silent: README "Choices" table.
** Generators are addressed by the partition index *within the access pattern* (row p of
** out[0] uses generator p), so at most 128 partitions. */
#include <math.h>
#include "kernel.h"
#include "kview.h"
#include "rng.h"

/* {=== Generators ===} */

#define MT_MM 156
#define MT_A  0xB5026F5AA96619E9ull
#define MT_UM 0xFFFFFFFF80000000ull
#define MT_LM 0x000000007FFFFFFFull

void bs_mt64_seed(bs_mt64 *m, uint64_t seed)
{
    m->mt[0] = seed;
    for (int i = 1; i < BS_MT64_N; i++)
        m->mt[i] = 6364136223846793005ull * (m->mt[i - 1] ^ (m->mt[i - 1] >> 62)) + (uint64_t)i;
    m->mti = BS_MT64_N;
}

uint64_t bs_mt64_next(bs_mt64 *m)
{
    static const uint64_t mag[2] = { 0, MT_A };
    uint64_t x;
    if (m->mti >= BS_MT64_N) {
        int i;
        for (i = 0; i < BS_MT64_N - MT_MM; i++) {
            x = (m->mt[i] & MT_UM) | (m->mt[i + 1] & MT_LM);
            m->mt[i] = m->mt[i + MT_MM] ^ (x >> 1) ^ mag[x & 1];
        }
        for (; i < BS_MT64_N - 1; i++) {
            x = (m->mt[i] & MT_UM) | (m->mt[i + 1] & MT_LM);
            m->mt[i] = m->mt[i + (MT_MM - BS_MT64_N)] ^ (x >> 1) ^ mag[x & 1];
        }
        x = (m->mt[BS_MT64_N - 1] & MT_UM) | (m->mt[0] & MT_LM);
        m->mt[BS_MT64_N - 1] = m->mt[MT_MM - 1] ^ (x >> 1) ^ mag[x & 1];
        m->mti = 0;
    }
    x = m->mt[m->mti++];
    x ^= (x >> 29) & 0x5555555555555555ull;
    x ^= (x << 17) & 0x71D67FFFEDA60000ull;
    x ^= (x << 37) & 0xFFF7EEE000000000ull;
    x ^= x >> 43;
    return x;
}

static void fill_words(bs_mt64 *m, uint32_t *w, int n)
{
    for (int i = 0; i < n; i += 2) {
        uint64_t d = bs_mt64_next(m);
        w[i] = (uint32_t)d;
        if (i + 1 < n)
            w[i + 1] = (uint32_t)(d >> 32);
    }
}

void bs_rng_reset(bs_rng *r, uint64_t seed)
{
    bs_mt64_seed(&r->host, seed);
    for (int p = 0; p < BS_NUM_PARTITIONS; p++) {
        fill_words(&r->host, r->gen1[p], BS_RNG_WORDS);
        fill_words(&r->host, &r->gen2[p][0][0], BS_RNG_LANES * BS_RNG_WORDS);
    }
}

bs_rng *bs_rng_use(bs_rng *r)
{
    if (!r->ready) {
        bs_rng_reset(r, r->seed);
        r->ready = 1;
    }
    return r;
}

uint32_t bs_xorwow_next(uint32_t s[BS_RNG_WORDS])
{
    uint32_t t = s[0] ^ (s[0] >> 2);
    s[0] = s[1];
    s[1] = s[2];
    s[2] = s[3];
    s[3] = s[4];
    s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
    s[5] += 362437u;
    return s[4] + s[5];
}

uint32_t bs_lfsr_next(uint32_t s[BS_RNG_WORDS])
{
    uint32_t x = s[0];
    x = (x >> 1) ^ ((uint32_t)-(int32_t)(x & 1u) & 0x80200003u);
    s[0] = x;
    return x;
}

uint32_t bs_pcg32_next(uint32_t s[BS_RNG_WORDS])
{
    uint64_t old = (uint64_t)s[0] | (uint64_t)s[1] << 32;
    uint64_t inc = ((uint64_t)s[2] | (uint64_t)s[3] << 32) | 1u;
    uint64_t nxt = old * 6364136223846793005ull + inc;
    uint32_t xs = (uint32_t)(((old >> 18) ^ old) >> 27);
    uint32_t rot = (uint32_t)(old >> 59);
    s[0] = (uint32_t)nxt;
    s[1] = (uint32_t)(nxt >> 32);
    return (xs >> rot) | (xs << ((32u - rot) & 31u));
}

void bs_philox_block(uint32_t s[BS_RNG_WORDS], uint32_t out[4])
{
    uint32_t c0 = s[0], c1 = s[1], c2 = s[2], c3 = s[3], k0 = s[4], k1 = s[5];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
    for (int w = 0; w < 4 && ++s[w] == 0; w++)
        ;
}

/* {=== Element walks ===} */

typedef struct elem_it {
    const bs_view *v;
    int64_t idx[BS_MAX_DIMS];
    int64_t off;
} elem_it;

static void it_init(elem_it *it, const bs_view *v)
{
    memset(it, 0, sizeof *it);
    it->v = v;
}

static void it_next(elem_it *it)
{
    for (int d = it->v->ndim - 1; d >= 0; d--) {
        it->off += it->v->stride[d];
        if (++it->idx[d] < it->v->num[d])
            return;
        it->off -= it->v->stride[d] * it->v->num[d];
        it->idx[d] = 0;
    }
}

static void store_bits(uint8_t *p, int32_t size, uint64_t bits)
{
    for (int32_t b = 0; b < size; b++)
        p[b] = (uint8_t)(bits >> (8 * b));
}

static uint64_t load_bits(const uint8_t *p, int32_t size)
{
    uint64_t bits = 0;
    for (int32_t b = 0; b < size; b++)
        bits |= (uint64_t)p[b] << (8 * b);
    return bits;
}

static inline float unit24(uint32_t x)
{
    return (float)(x >> 8) * 0x1p-24f;
}

/* out[0] must be an access pattern of at most 128 partitions; *per = elements per
** partition. */
static bs_status rows_of(const bs_kctx *k, const bs_view *v, const char *what, int64_t *per,
                         bs_error *err)
{
    if (v->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s: needs an access pattern", what);
    if (v->num[0] > BS_NUM_PARTITIONS)
        return bs_errorf(err, BS_E_SIM, "%s: %lld partitions, the generators cover %d", what,
                         (long long)v->num[0], BS_NUM_PARTITIONS);
    (void)k;
    *per = v->count / v->num[0];
    return BS_OK;
}

/* {=== Memset Random: each element := the low item-size bytes of one host draw ===} */

/* The core's generators, or E_SIM when the context has none. */
#define NEED_RNG(k, what) \
    do { if ((k)->ks == NULL || (k)->ks->rng == NULL) \
        return bs_errorf(err, BS_E_SIM, "%s: no random generator state", what); } while (0)

bs_status bs_rng_memset(bs_kctx *k, bs_error *err)
{
    const bs_view *o = &k->out[0];
    int32_t size = bs_dtinfo_table[o->dtype].size;
    bs_mt64 *m;
    elem_it it;
    NEED_RNG(k, "Memset Random");
    m = &bs_rng_use(k->ks->rng)->host;
    it_init(&it, o);
    for (int64_t e = 0; e < o->count; e++, it_next(&it))
        store_bits(o->data + it.off, size, bs_mt64_next(m));
    return BS_OK;
}

/* {=== Rand: gen-1, by random_algorithm and distribution ===} */

typedef struct drawer {
    int32_t  alg;
    int32_t  steps;        /* generator steps per number (rand_num_steps; 0 reads as 1) */
    uint32_t *s;
    uint32_t buf[4];
    int32_t  n;            /* Philox words left in buf */
} drawer;

static uint32_t step(drawer *d)
{
    if (d->alg == BS_RANDALG_LFSR)
        return bs_lfsr_next(d->s);
    if (d->alg == BS_RANDALG_PCG32)
        return bs_pcg32_next(d->s);
    if (d->n == 0) {
        bs_philox_block(d->s, d->buf);
        d->n = 4;
    }
    return d->buf[4 - d->n--];
}

/* One number: the generator steps `steps` times, the last step's output is the number. */
static uint32_t draw(drawer *d)
{
    for (int32_t k = 1; k < d->steps; k++)
        (void)step(d);
    return step(d);
}

static double param(const bs_kctx *k, int32_t j, double dflt)
{
    const bs_insn *in = k->insn;
    return j < in->nflist ? k->prog->fpool[in->flist + j] : dflt;
}

bs_status bs_k_Rand(bs_kctx *k, bs_error *err)
{
    const bs_insn *in = k->insn;
    const bs_view *o = &k->out[0];
    int64_t alg = BS_PI(in, Rand, algorithm), dist = BS_PI(in, Rand, distribution);
    int64_t steps = BS_PI(in, Rand, num_steps), per = 1, ntrial = 1;
    int32_t size, isf;
    float a, b;
    drawer d;
    elem_it it;
    NEED_RNG(k, "Rand");
    if (k->nout < 1)
        return bs_errorf(err, BS_E_PROGRAM, "Rand: needs out[0]");
    BS_TRY(rows_of(k, o, "Rand out[0]", &per, err));
    if (alg < BS_RANDALG_LFSR || alg > BS_RANDALG_PHILOX_1)
        return bs_errorf(err, BS_E_PROGRAM, "Rand: invalid random_algorithm %lld", (long long)alg);
    if (dist < BS_RANDDIST_Raw || dist > BS_RANDDIST_Binomial)
        return bs_errorf(err, BS_E_PROGRAM, "Rand: invalid distribution %lld", (long long)dist);
    if (steps < 0 || steps > 255)
        return bs_errorf(err, BS_E_PROGRAM, "Rand: rand_num_steps %lld is outside 0..255",
                         (long long)steps);
    size = bs_dtinfo_table[o->dtype].size;
    isf = bs_dt_numeric(o->dtype);
    if (dist != BS_RANDDIST_Raw && !isf)
        return bs_errorf(err, BS_E_UNSUPPORTED, "Rand: distribution needs a numeric out[0] "
                         "dtype, got %s", bs_dtinfo_table[o->dtype].name);
    a = (float)param(k, 0, dist == BS_RANDDIST_Binomial ? 1.0 : 0.0);
    b = (float)param(k, 1, dist == BS_RANDDIST_Binomial ? 0.5 : 1.0);
    if (dist == BS_RANDDIST_Binomial) {
        if (!(a >= 0 && a <= 1048576.0f) || a != floorf(a))
            return bs_errorf(err, BS_E_SIM, "Rand: Binomial needs params [n, p] with n a whole "
                             "number in 0..2^20, got n = %g", (double)a);
        ntrial = (int64_t)a;
    }
    memset(&d, 0, sizeof d);
    d.alg = (int32_t)alg;
    d.steps = (int32_t)steps;
    it_init(&it, o);
    for (int64_t e = 0; e < o->count; e++, it_next(&it)) {
        int64_t p = e / per;
        uint8_t *dst = o->data + it.off;
        float v;
        if (e % per == 0) {
            d.s = bs_rng_use(k->ks->rng)->gen1[p];
            d.n = 0;
        }
        switch (dist) {
        case BS_RANDDIST_Raw:
            store_bits(dst, size, draw(&d));
            continue;
        case BS_RANDDIST_Uniform:
            v = a + unit24(draw(&d)) * (b - a);
            break;
        case BS_RANDDIST_Normal: {
            float u1 = (float)((draw(&d) >> 8) + 1u) * 0x1p-24f;
            float u2 = unit24(draw(&d));
            float r = sqrtf(-2.0f * logf(u1));
            float z = r * cosf(6.28318530717958647692f * u2);
            v = a + b * z;
            break;
        }
        default: {
            int64_t cnt = 0;
            for (int64_t t = 0; t < ntrial; t++)
                cnt += unit24(draw(&d)) < b;
            v = (float)cnt;
            break;
        }
        }
        bs_dt_store_f32(dst, o->dtype, v);
    }
    return BS_OK;
}

/* {=== Rand2 and Dropout: gen-2 Xorwow, lane j % 4 for element j of a partition ===} */

/* Scalar operand ins[j] per partition (immediate, register or [P, 1] tensor). */
static bs_status per_partition(const bs_kctx *k, int32_t j, double dflt, int64_t np, float *f,
                               const char *what, bs_error *err)
{
    return bs_kscalar_values(k, j, dflt, np, f, NULL, what, err);
}

bs_status bs_k_Rand2(bs_kctx *k, bs_error *err)
{
    const bs_view *o = &k->out[0];
    float lo[BS_NUM_PARTITIONS], hi[BS_NUM_PARTITIONS];
    int64_t per = 1;
    elem_it it;
    NEED_RNG(k, "Rand2");
    if (k->nout < 1)
        return bs_errorf(err, BS_E_PROGRAM, "Rand2: needs out[0]");
    BS_TRY(rows_of(k, o, "Rand2 out[0]", &per, err));
    if (!bs_dt_numeric(o->dtype))
        return bs_errorf(err, BS_E_UNSUPPORTED, "Rand2: out[0] dtype %s is not numeric",
                         bs_dtinfo_table[o->dtype].name);
    BS_TRY(per_partition(k, 0, 0.0, o->num[0], lo, "Rand2 ins[0] (min)", err));
    BS_TRY(per_partition(k, 1, 1.0, o->num[0], hi, "Rand2 ins[1] (max)", err));
    it_init(&it, o);
    for (int64_t e = 0; e < o->count; e++, it_next(&it)) {
        int64_t p = e / per, j = e % per;
        float u = unit24(bs_xorwow_next(bs_rng_use(k->ks->rng)->gen2[p][j % BS_RNG_LANES]));
        bs_dt_store_f32(o->data + it.off, o->dtype, lo[p] + u * (hi[p] - lo[p]));
    }
    return BS_OK;
}

bs_status bs_k_Dropout(bs_kctx *k, bs_error *err)
{
    const bs_view *o = &k->out[0], *x = &k->in[0];
    float prob[BS_NUM_PARTITIONS];
    int keep_thr = BS_PI(k->insn, Dropout, keep_threshold) != 0, same;
    int32_t size;
    int64_t per = 1;
    elem_it io, ix;
    bs_view xin;
    NEED_RNG(k, "Dropout");
    if (k->nout < 1 || k->nin < 2 || x->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "Dropout: needs out[0], ins[0] (data) and ins[1] "
                         "(probability)");
    BS_TRY(rows_of(k, o, "Dropout out[0]", &per, err));
    if (x->count != o->count)
        return bs_errorf(err, BS_E_SIM, "Dropout: ins[0] has %lld elements, out[0] %lld",
                         (long long)x->count, (long long)o->count);
    same = x->dtype == o->dtype;
    if (!same && (!bs_dt_numeric(x->dtype) || !bs_dt_numeric(o->dtype)))
        return bs_errorf(err, BS_E_UNSUPPORTED, "Dropout: cannot cast %s to %s",
                         bs_dtinfo_table[x->dtype].name, bs_dtinfo_table[o->dtype].name);
    BS_TRY(per_partition(k, 1, 0.0, o->num[0], prob, "Dropout ins[1] (probability)", err));
    xin = *x;
    BS_TRY(bs_kview_detach(k, &xin, 1, BS_KSLOT_A, err));
    size = bs_dtinfo_table[o->dtype].size;
    it_init(&io, o);
    it_init(&ix, &xin);
    for (int64_t e = 0; e < o->count; e++, it_next(&io), it_next(&ix)) {
        int64_t p = e / per, j = e % per;
        float u = unit24(bs_xorwow_next(bs_rng_use(k->ks->rng)->gen2[p][j % BS_RNG_LANES]));
        int keep = keep_thr ? u < prob[p] : !(u < prob[p]);
        uint8_t *dst = o->data + io.off;
        if (!keep)
            store_bits(dst, size, 0);
        else if (same)
            memmove(dst, xin.data + ix.off, (size_t)size);
        else
            bs_dt_store_f32(dst, o->dtype, bs_dt_load_f32(xin.data + ix.off, xin.dtype));
    }
    return BS_OK;
}

/* {=== State transfer: [P, 6] (gen-1) or [P, 24] (gen-2) 32-bit words ===} */

static bs_status state_view(const bs_view *v, int64_t words, const char *what, bs_error *err)
{
    if (v->ndim == 0)
        return bs_errorf(err, BS_E_PROGRAM, "%s: needs an access pattern", what);
    if (bs_dtinfo_table[v->dtype].size != 4 || bs_dtinfo_table[v->dtype].kind == BS_DK_F)
        return bs_errorf(err, BS_E_SIM, "%s: the state is 32-bit words (uint32 or int32), got "
                         "%s", what, bs_dtinfo_table[v->dtype].name);
    if (v->num[0] > BS_NUM_PARTITIONS || v->count != v->num[0] * words)
        return bs_errorf(err, BS_E_SIM, "%s: needs [P, %lld] words with P <= %d, got %lld "
                         "elements over %lld partitions", what, (long long)words,
                         BS_NUM_PARTITIONS, (long long)v->count, (long long)v->num[0]);
    return BS_OK;
}

static uint32_t *state_words(bs_rng *r, int gen2, int64_t p)
{
    return gen2 ? &r->gen2[p][0][0] : r->gen1[p];
}

static bs_status get_state(bs_kctx *k, int gen2, const char *what, bs_error *err)
{
    int64_t words = gen2 ? BS_RNG_LANES * BS_RNG_WORDS : BS_RNG_WORDS;
    elem_it it;
    NEED_RNG(k, what);
    if (k->nout < 1)
        return bs_errorf(err, BS_E_PROGRAM, "%s: needs out[0]", what);
    BS_TRY(state_view(&k->out[0], words, what, err));
    it_init(&it, &k->out[0]);
    for (int64_t e = 0; e < k->out[0].count; e++, it_next(&it))
        store_bits(k->out[0].data + it.off, 4, state_words(bs_rng_use(k->ks->rng), gen2, e / words)[e % words]);
    return BS_OK;
}

static bs_status set_state(bs_kctx *k, int gen2, const char *what, bs_error *err)
{
    int64_t words = gen2 ? BS_RNG_LANES * BS_RNG_WORDS : BS_RNG_WORDS;
    elem_it it;
    NEED_RNG(k, what);
    if (k->nin < 1 || k->in[0].ndim == 0) {
        if (gen2 || k->nin > 0)
            return bs_errorf(err, BS_E_PROGRAM, "%s: needs ins[0], the state words", what);
        for (int p = 0; p < BS_NUM_PARTITIONS; p++)     /* reseed gen-1 from the host */
            fill_words(&bs_rng_use(k->ks->rng)->host, bs_rng_use(k->ks->rng)->gen1[p], BS_RNG_WORDS);
        return BS_OK;
    }
    BS_TRY(state_view(&k->in[0], words, what, err));
    it_init(&it, &k->in[0]);
    for (int64_t e = 0; e < k->in[0].count; e++, it_next(&it))
        state_words(bs_rng_use(k->ks->rng), gen2, e / words)[e % words] =
            (uint32_t)load_bits(k->in[0].data + it.off, 4);
    return BS_OK;
}

bs_status bs_k_GetRandState(bs_kctx *k, bs_error *err) { return get_state(k, 0, "GetRandState", err); }
bs_status bs_k_SetRandState(bs_kctx *k, bs_error *err) { return set_state(k, 0, "SetRandState", err); }
bs_status bs_k_RandGetState(bs_kctx *k, bs_error *err) { return get_state(k, 1, "RandGetState", err); }
bs_status bs_k_RandSetState(bs_kctx *k, bs_error *err) { return set_state(k, 1, "RandSetState", err); }
