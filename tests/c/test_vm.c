/* tests/c/test_vm.c -- the VM through the public C API (birsim.h), without Python:
** a program built from raw tables (a Loop of 3 trips around a TensorTensor add with a
** semaphore update, then a copy out), run, checked; garbage tables rejected; and every
** allocation made to fail in turn, each attempt ending in E_NOMEM or success with no
** leak (the Makefile runs this under ASan with leak detection); and a module list of two
** programs, one with an addr-placed Internal DRAM tensor and the other with a smaller one
** or none, checked for the per-core arena invariant (arenas_hold) after every reset,
** poison, run and host write. Build: make -C tests/c */
#include <stdio.h>
#include "birsim.h"
#include "vm/vm.h"            /* the arena invariant reads the cores' stores */

static int passed, failed;
#define CHECK(c) do { if (c) passed++; else { failed++; printf("  FAIL line %d: %s\n", __LINE__, #c); } } while (0)

enum { P = 4, F = 8 };
static const char strings[] = "\0main\0a\0acc\0out\0b0\0body\0loop\0add\0cp\0i";
/* offsets into strings */
enum { S_MAIN = 1, S_A = 6, S_ACC = 8, S_OUT = 12, S_B0 = 16, S_BODY = 19, S_LOOP = 24,
       S_ADD = 29, S_CP = 33, S_I = 36 };

static bs_opnd ap(int32_t loc)
{
    bs_opnd o;
    memset(&o, 0, sizeof o);
    o.kind = BS_OPND_physical_ap;
    o.dtype = BS_DT_float32;
    o.loc = loc;
    o.ndim = 2;
    o.step[0] = F; o.num[0] = P;
    o.step[1] = 1; o.num[1] = F;
    o.offset_expr = -1;
    o.reg = -1;
    for (int d = 0; d < BS_MAX_DIMS; d++)
        o.addrs[d] = -1;
    return o;
}

static bs_insn insn(int32_t op, int32_t engine, int32_t name, int32_t block, int32_t opnd,
                    int32_t nin, int32_t nout)
{
    bs_insn in;
    memset(&in, 0, sizeof in);
    in.op = op; in.engine = engine; in.name = name; in.block = block;
    in.opnd = opnd; in.nin = nin; in.nout = nout;
    in.body = in.target = in.target2 = in.str = in.str2 = -1;
    for (int k = 0; k < 4; k++)
        in.x[k] = -1;
    return in;
}

typedef struct tables {
    bs_module module; bs_func func; bs_set sets[3]; bs_loc locs[3]; bs_region regions[2];
    bs_block blocks[2]; bs_sync sync; bs_opnd opnds[5]; bs_insn insns[3]; int64_t ipool[1];
    bs_program_parts parts;
} tables;

/* acc := 0 (never: acc is an input here), loop i < 3: acc := acc + a (sem 5 += 1),
** then out := acc. So out = acc0 + 3a, and semaphore 5 = 3. */
static void build(tables *t)
{
    memset(t, 0, sizeof *t);
    t->module = (bs_module){ .arch = BS_ARCH_gen3, .entry = 0, .naxes = 1, .axis_names = 0 };
    t->ipool[0] = S_I;
    t->func = (bs_func){ .name = S_MAIN, .region = 0, .set0 = 0, .nset = 3 };
    const int32_t names[3] = { S_A, S_ACC, S_OUT }, io[3] = { 1, 1, 2 };
    for (int s = 0; s < 3; s++) {
        t->sets[s] = (bs_set){ .name = names[s], .io = io[s], .dtype = BS_DT_float32, .ndim = 2,
                               .loc0 = s, .nloc = 1, .alias = -1, .shape = { P, F } };
        t->locs[s] = (bs_loc){ .name = names[s], .set = s, .memtype = BS_MEM_DRAM,
                               .parts = P, .bpp = F * 4 };
    }
    t->locs[1].memtype = BS_MEM_SB;                /* acc lives in SBUF, placed */
    t->locs[1].placed = 1;
    t->locs[1].base = 32;
    t->locs[1].addr = 1024;
    t->regions[0] = (bs_region){ .block0 = 0, .nblock = 1, .owner = -1, .func = 0 };
    t->regions[1] = (bs_region){ .block0 = 1, .nblock = 1, .owner = 0, .func = 0 };
    t->blocks[0] = (bs_block){ .name = S_B0, .region = 0, .insn0 = 0, .ninsn = 2 };
    t->blocks[1] = (bs_block){ .name = S_BODY, .region = 1, .insn0 = 2, .ninsn = 1 };
    t->insns[0] = insn(BS_OP_Loop, BS_ENGINE_Unassigned, S_LOOP, 0, 0, 0, 0);
    t->insns[0].body = 1;
    t->insns[0].i[0] = 0; t->insns[0].i[1] = 3; t->insns[0].i[2] = 1; t->insns[0].i[4] = 0;
    t->insns[1] = insn(BS_OP_TensorCopy, BS_ENGINE_DVE, S_CP, 0, 3, 1, 1);
    t->insns[2] = insn(BS_OP_TensorTensor, BS_ENGINE_DVE, S_ADD, 1, 0, 2, 1);
    t->insns[2].i[0] = BS_ALU_add;
    t->insns[2].nupd = 1;
    t->sync = (bs_sync){ .type = BS_SYNCTYPE_semaphore, .id = 5, .mode = BS_UPDATE_sem_add_imm,
                         .reg = -1, .target_core = -1, .value = 1 };
    t->opnds[0] = ap(1); t->opnds[1] = ap(0); t->opnds[2] = ap(1);   /* add: acc, a -> acc */
    t->opnds[3] = ap(1); t->opnds[4] = ap(2);                         /* cp: acc -> out */
    bs_program_parts *p = &t->parts;
    p->module = &t->module; p->n_module = 1;
    p->funcs = &t->func; p->n_funcs = 1;
    p->sets = t->sets; p->n_sets = 3;
    p->locs = t->locs; p->n_locs = 3;
    p->regions = t->regions; p->n_regions = 2;
    p->blocks = t->blocks; p->n_blocks = 2;
    p->syncs = &t->sync; p->n_syncs = 1;
    p->opnds = t->opnds; p->n_opnds = 5;
    p->insns = t->insns; p->n_insns = 3;
    p->ipool = t->ipool; p->n_ipool = 1;
    p->strings = strings; p->n_strings = sizeof strings;
}

/* Load, run, read back. Returns the first failing status (and frees everything). */
static bs_status load_and_run(const tables *t, float *out, bs_error *err)
{
    bs_program *prog = NULL;
    bs_sim *sim = NULL;
    bs_sim_opts opts = { .ncores = 1, .schedule = BS_SCHED_in_order };
    float a[P][F], acc[P][F];
    int finished = 0, written = 0;
    bs_status st;
    for (int p = 0; p < P; p++)
        for (int f = 0; f < F; f++) {
            a[p][f] = (float)(p * F + f);
            acc[p][f] = 0.5f;
        }
    st = bs_program_new(&prog, &t->parts, err);
    if (st != BS_OK) goto done;
    st = bs_sim_new(&sim, prog, &opts, err);
    if (st != BS_OK) goto done;
    st = bs_sim_write_loc(sim, -1, 0, a, P, F * 4, err);
    if (st != BS_OK) goto done;
    st = bs_sim_write_loc(sim, -1, 1, acc, P, F * 4, err);
    if (st != BS_OK) goto done;
    while (!finished && st == BS_OK)
        st = bs_sim_run(sim, 1000, &finished, err);
    if (st != BS_OK) goto done;
    st = bs_sim_read_loc(sim, 0, 2, out, P, F * 4, &written, err);
    if (st == BS_OK && !written)
        st = bs_errorf(err, BS_E_SIM, "output not written");
done:
    bs_sim_free(sim);
    bs_program_free(prog);
    return st;
}

/* {=== Two programs (a module list): each core's DRAM arena holds only its own tensors ===}
**
** Core 0 runs e0: scr := a, out := scr, with scr an Internal DRAM tensor placed in its
** per-core arena at 4096 (2P partitions; the copies use the first P). Core 1 runs e1: the
** same through a smaller scr at 64 (P partitions), or, without one, out := a (no arena).
** With `shr`, e0 also holds a Shared DRAM tensor placed at 8192 of the per-core arena: a
** store every core would place, which core 1's arena cannot hold. */
static const char pstrings[] = "\0e0\0e1\0a\0scr\0out\0shr\0b0\0cp";
enum { PS_E0 = 1, PS_E1 = 4, PS_A = 7, PS_SCR = 9, PS_OUT = 13, PS_SHR = 17, PS_B0 = 21,
       PS_CP = 24 };
enum { ADDR0 = 4096, ADDR1 = 64, ADDR_SHR = 8192 };

typedef struct pair {
    bs_module module; bs_func funcs[2]; bs_set sets[7]; bs_loc locs[7]; bs_region regions[2];
    bs_block blocks[2]; bs_opnd opnds[8]; bs_insn insns[4]; int64_t ipool[2];
    bs_program_parts parts;
    int32_t a[2], scr[2], out[2];     /* location (= set) indices per core; -1: none */
} pair;

static int32_t pair_tensor(pair *t, int32_t func, int32_t name, int32_t io, int64_t parts,
                           int32_t placed, int64_t addr)
{
    int32_t s = (int32_t)t->parts.n_sets++;
    t->sets[s] = (bs_set){ .name = name, .func = func, .io = io, .dtype = BS_DT_float32,
                           .ndim = 2, .loc0 = s, .nloc = 1, .alias = -1, .shape = { parts, F } };
    t->locs[s] = (bs_loc){ .name = name, .set = s, .memtype = BS_MEM_DRAM, .parts = parts,
                           .bpp = F * 4, .placed = placed, .addr = addr };
    t->parts.n_locs = t->parts.n_sets;
    t->funcs[func].nset++;
    return s;
}

static void pair_copy(pair *t, int32_t func, int32_t from, int32_t to)
{
    int32_t i = (int32_t)t->parts.n_insns++, o = (int32_t)t->parts.n_opnds;
    t->opnds[o] = ap(from);
    t->opnds[o + 1] = ap(to);
    t->parts.n_opnds += 2;
    t->insns[i] = insn(BS_OP_TensorCopy, BS_ENGINE_DVE, PS_CP, func, o, 1, 1);
    t->insns[i].func = func;
    t->blocks[func].ninsn++;
}

static void build_pair(pair *t, int core1_scr, int shr)
{
    bs_program_parts *p = &t->parts;
    memset(t, 0, sizeof *t);
    t->module = (bs_module){ .arch = BS_ARCH_gen3, .entry = 0, .nentries = 2, .entries = 0 };
    t->ipool[0] = 0;
    t->ipool[1] = 1;
    p->module = &t->module; p->n_module = 1;
    p->funcs = t->funcs; p->n_funcs = 2;
    p->sets = t->sets; p->locs = t->locs;
    p->regions = t->regions; p->n_regions = 2;
    p->blocks = t->blocks; p->n_blocks = 2;
    p->opnds = t->opnds; p->insns = t->insns;
    p->ipool = t->ipool; p->n_ipool = 2;
    p->strings = pstrings; p->n_strings = sizeof pstrings;
    for (int32_t k = 0; k < 2; k++) {
        t->funcs[k] = (bs_func){ .name = k ? PS_E1 : PS_E0, .region = k, .set0 = (int32_t)p->n_sets,
                                 .prog = k };
        t->a[k] = pair_tensor(t, k, PS_A, 1, P, 0, 0);
        t->scr[k] = k == 0 ? pair_tensor(t, k, PS_SCR, 0, 2 * P, 1, ADDR0) :
                    core1_scr ? pair_tensor(t, k, PS_SCR, 0, P, 1, ADDR1) : -1;
        t->out[k] = pair_tensor(t, k, PS_OUT, 2, P, 0, 0);
        if (k == 0 && shr) {
            int32_t s = pair_tensor(t, k, PS_SHR, 0, P, 1, ADDR_SHR);
            t->sets[s].shared = 1;
        }
        t->regions[k] = (bs_region){ .block0 = k, .nblock = 1, .owner = -1, .func = k };
        t->blocks[k] = (bs_block){ .name = PS_B0, .func = k, .region = k,
                                   .insn0 = (int32_t)p->n_insns };
        if (t->scr[k] >= 0) {
            pair_copy(t, k, t->a[k], t->scr[k]);
            pair_copy(t, k, t->scr[k], t->out[k]);
        } else {
            pair_copy(t, k, t->a[k], t->out[k]);
        }
    }
}

/* The invariant: on every core, each arena-placed DRAM store of the core's own program
** lies inside that core's arena at its addr (data in the first half, shadow in the
** second), another program's tensors have no storage there, and the arena bytes no own
** location covers are still zero (data and shadow): no reset, poison or write left the
** locations, let alone the arena. */
static int arenas_hold(const bs_sim *sim)
{
    const bs_program *p = sim->prog;
    for (int32_t k = 0; k < sim->ncores; k++) {
        const bs_core *c = &sim->cores[k];
        int64_t n = c->dram_size;
        for (int32_t l = 0; l < p->n_locs; l++) {
            const bs_loc *loc = &p->locs[l];
            const bs_store *st = &c->stores[l];
            int64_t size = loc->parts * loc->bpp;
            if (p->funcs[p->sets[loc->set].func].prog != c->prog) {
                if (st->data != NULL || st->shadow != NULL)
                    return 0;
                continue;
            }
            if (loc->memtype != BS_MEM_DRAM || loc->placed != 1)
                continue;
            if (c->dram == NULL || loc->addr < 0 || size > n - loc->addr ||
                st->data != c->dram + loc->addr || st->shadow != c->dram + n + loc->addr)
                return 0;
        }
        for (int64_t b = 0; b < n; b++) {
            int covered = 0;
            for (int32_t l = 0; l < p->n_locs && !covered; l++) {
                const bs_loc *loc = &p->locs[l];
                covered = loc->memtype == BS_MEM_DRAM && loc->placed == 1 &&
                          p->funcs[p->sets[loc->set].func].prog == c->prog &&
                          b >= loc->addr && b < loc->addr + loc->parts * loc->bpp;
            }
            if (!covered && (c->dram[b] != 0 || c->dram[n + b] != 0))
                return 0;
        }
    }
    return 1;
}

/* Two runs of the pair (uninitialised memory poisoned with NaN when `nan`), the invariant
** checked after creation (reset, poison), each run, each reset and host writes; each
** core's out must equal its own a. Returns the first failing status. */
static bs_status run_pair(const pair *t, int nan, bs_error *err)
{
    bs_program *prog = NULL;
    bs_sim *sim = NULL;
    bs_sim_opts opts = { .ncores = 2, .schedule = BS_SCHED_round_robin,
                         .uninit = nan ? BS_UNINIT_nan : BS_UNINIT_zero };
    float a[2][P][F], out[P][F], big[2 * P][F];
    int finished, written;
    bs_status st;
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < P; p++)
            for (int f = 0; f < F; f++)
                a[k][p][f] = (float)(1000 * k + p * F + f) + 0.25f;
    memset(big, 0x3f, sizeof big);
    st = bs_program_new(&prog, &t->parts, err);
    if (st != BS_OK) goto done;
    st = bs_sim_new(&sim, prog, &opts, err);
    if (st != BS_OK) goto done;
    CHECK(arenas_hold(sim));
    for (int run = 0; run < 2; run++) {
        if (run > 0) {
            st = bs_sim_reset(sim, err);
            if (st != BS_OK) goto done;
            CHECK(arenas_hold(sim));
        }
        for (int k = 0; k < 2 && st == BS_OK; k++)
            st = bs_sim_write_loc(sim, k, t->a[k], a[k], P, F * 4, err);
        finished = 0;
        while (!finished && st == BS_OK)
            st = bs_sim_run(sim, 1000, &finished, err);
        if (st != BS_OK) goto done;
        CHECK(arenas_hold(sim));
        for (int k = 0; k < 2; k++) {
            written = 0;
            st = bs_sim_read_loc(sim, k, t->out[k], out, P, F * 4, &written, err);
            if (st != BS_OK) goto done;
            CHECK(written && memcmp(out, a[k], sizeof out) == 0);
        }
    }
    /* Host writes: every core (-1) writes core 0's scr on core 0 alone; core 1 has none. */
    st = bs_sim_write_loc(sim, -1, t->scr[0], big, 2 * P, F * 4, err);
    if (st != BS_OK) goto done;
    CHECK(arenas_hold(sim));
    CHECK(bs_sim_write_loc(sim, 1, t->scr[0], big, 2 * P, F * 4, err) == BS_E_INPUT &&
          strstr(err->msg, "not in core 1's program"));
    CHECK(bs_sim_read_loc(sim, 1, t->scr[0], big, 2 * P, F * 4, NULL, err) != BS_OK);
    CHECK(arenas_hold(sim));
    st = BS_OK;
done:
    bs_sim_free(sim);
    bs_program_free(prog);
    return st;
}

static void test_pair(void)
{
    pair t;
    bs_error err;
    for (int core1_scr = 0; core1_scr < 2; core1_scr++) {
        for (int nan = 0; nan < 2; nan++) {
            build_pair(&t, core1_scr, 0);
            bs_error_clear(&err);
            CHECK(run_pair(&t, nan, &err) == BS_OK);
        }
        /* A store core 1's arena (none, or 192 bytes) cannot hold: an error, not a write. */
        build_pair(&t, core1_scr, 1);
        CHECK(run_pair(&t, 0, &err) == BS_E_PROGRAM &&
              strstr(err.msg, "does not lie inside core 1's per-core DRAM arena"));
    }
    /* Every allocation failing in turn: E_NOMEM or success, never a crash or leak. */
    build_pair(&t, 1, 0);
    for (int n = 0, ok = 0; n < 300 && !ok; n++) {
        bs_status st;
        bs_alloc_fail_after(n);
        st = run_pair(&t, 1, &err);
        bs_alloc_fail_after(-1);
        ok = st == BS_OK;
        CHECK(st == BS_OK || st == BS_E_NOMEM);
        CHECK(n < 299 || ok);
    }
}

/* A schedule's decisions (vm/explore.c): a recorded round_robin run of the pair on two
** cores replays under BS_SCHED_replay with the same step count, and records the same
** decisions again; bad options and a replay list without the replay schedule are errors. */
static void test_explore_replay(void)
{
    pair t;
    bs_program *prog = NULL;
    bs_sim *rec = NULL, *rep = NULL, *plain = NULL;
    bs_sim_opts o = { .ncores = 2, .schedule = BS_SCHED_round_robin, .record = 1 };
    bs_error err;
    const int32_t *d, *d2;
    int32_t *copy = NULL, one = 0;
    int64_t n = 0, n2 = 0, dropped = 0, steps;
    int finished = 0;
    build_pair(&t, 0, 0);
    bs_error_clear(&err);
    CHECK(bs_program_new(&prog, &t.parts, &err) == BS_OK);
    CHECK(bs_sim_new(&rec, prog, &o, &err) == BS_OK);
    while (rec && !finished && bs_sim_run(rec, 1000, &finished, &err) == BS_OK) {}
    CHECK(finished);
    d = bs_sim_decisions(rec, &n, &dropped);
    CHECK(d != NULL && n > 0 && dropped == 0);
    steps = bs_sim_steps(rec);
    copy = bs_malloc((size_t)n * sizeof *copy);
    CHECK(copy != NULL);
    memcpy(copy, d, (size_t)n * sizeof *copy);
    o.schedule = BS_SCHED_replay;
    CHECK(bs_sim_new(&rep, prog, &o, &err) == BS_OK);
    CHECK(bs_sim_set_decisions(rep, copy, n, &err) == BS_OK);
    CHECK(bs_sim_reset(rep, &err) == BS_OK);
    finished = 0;
    while (!finished && bs_sim_run(rep, 1000, &finished, &err) == BS_OK) {}
    CHECK(finished && bs_sim_steps(rep) == steps);
    d2 = bs_sim_decisions(rep, &n2, &dropped);
    CHECK(n2 == n && memcmp(d2, copy, (size_t)n * sizeof *copy) == 0);
    o.record = 0;
    o.schedule = BS_SCHED_in_order;
    CHECK(bs_sim_new(&plain, prog, &o, &err) == BS_OK);
    CHECK(bs_sim_set_decisions(plain, &one, 1, &err) == BS_E_INPUT);
    CHECK(bs_sim_set_schedule(plain, 99, 0, 0, 0, 0, &err) == BS_E_INPUT);
    CHECK(bs_sim_set_schedule(plain, BS_SCHED_pct, 1, 1, 65, 10, &err) == BS_E_INPUT &&
          strstr(err.msg, "pct depth"));
    CHECK(bs_sim_set_schedule(plain, BS_SCHED_pct, 1, 1, 3, 10, &err) == BS_OK);
    CHECK(bs_sim_reset(plain, &err) == BS_OK);
    finished = 0;
    while (!finished && bs_sim_run(plain, 1000, &finished, &err) == BS_OK) {}
    CHECK(finished && bs_sim_steps(plain) == steps);
    bs_free(copy);
    bs_sim_free(plain);
    bs_sim_free(rep);
    bs_sim_free(rec);
    bs_program_free(prog);
}

int main(void)
{
    tables t;
    float out[P * F];
    bs_error err;
    int nomem = 0, ok_at = -1;

    {   /* bs_reserve: keep grows geometrically and keeps contents; failure changes nothing */
        void *buf = NULL;
        size_t cap = 0;
        CHECK(bs_reserve(&buf, &cap, 8, 1) == 0 && cap == 8);
        memcpy(buf, "abcdefg", 8);
        CHECK(bs_reserve(&buf, &cap, 9, 1) == 0 && cap == 16 && strcmp(buf, "abcdefg") == 0);
        bs_alloc_fail_after(0);
        CHECK(bs_reserve(&buf, &cap, 100, 0) == -1 && cap == 16 && strcmp(buf, "abcdefg") == 0);
        bs_alloc_fail_after(-1);
        CHECK(bs_reserve(&buf, &cap, 100, 0) == 0 && cap == 100);
        bs_free(buf);
    }
    {   /* bs_pages_alloc: zeroed at both sizes (OS pages from BS_PAGES_MIN, calloc below),
        ** writable, freed with its size; an injected failure is NULL */
        size_t sizes[2] = { BS_PAGES_MIN * 4 + 123, 1000 };
        for (int k = 0; k < 2; k++) {
            uint8_t *a = bs_pages_alloc(sizes[k]);
            int zero = a != NULL;
            for (size_t i = 0; a != NULL && i < sizes[k]; i += 511)
                zero &= a[i] == 0;
            CHECK(zero && a[sizes[k] - 1] == 0);
            if (a != NULL) {
                memset(a, 0xAB, sizes[k]);
                CHECK(a[sizes[k] - 1] == 0xAB);
            }
            bs_pages_free(a, sizes[k]);
            bs_alloc_fail_after(0);
            CHECK(bs_pages_alloc(sizes[k]) == NULL);
            bs_alloc_fail_after(-1);
        }
        bs_pages_free(NULL, 1 << 20);
    }

    build(&t);
    bs_error_clear(&err);
    CHECK(load_and_run(&t, out, &err) == BS_OK);
    for (int i = 0; i < P * F; i++)
        CHECK(out[i] == 0.5f + 3.0f * (float)i);

    /* Garbage in a table is E_PROGRAM, never a crash. */
    t.insns[2].opnd = 1000;
    CHECK(load_and_run(&t, out, &err) == BS_E_PROGRAM);
    build(&t);
    t.locs[1].base = 126;                          /* 4 partitions from 126 > 128 */
    CHECK(load_and_run(&t, out, &err) == BS_E_PROGRAM && strstr(err.msg, "does not fit"));
    build(&t);
    t.opnds[1].num[1] = F + 1;                     /* reads past the end of 'a' */
    CHECK(load_and_run(&t, out, &err) == BS_E_OOB && err.insn == 2);
    build(&t);

    /* Every allocation failing in turn: E_NOMEM or success, never a crash or leak. */
    for (int n = 0; n < 200 && ok_at < 0; n++) {
        bs_status st;
        bs_alloc_fail_after(n);
        st = load_and_run(&t, out, &err);
        bs_alloc_fail_after(-1);
        if (st == BS_E_NOMEM)
            nomem++;
        else if (st == BS_OK)
            ok_at = n;
        else
            CHECK(!"unexpected status under allocation failure");
    }
    CHECK(ok_at > 0 && nomem == ok_at);
    for (int i = 0; i < P * F; i++)
        CHECK(out[i] == 0.5f + 3.0f * (float)i);

    test_pair();
    test_explore_replay();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
