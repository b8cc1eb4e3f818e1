/* tests/c/test_vm.c -- the VM through the public C API (birsim.h), without Python:
** a program built from raw tables (a Loop of 3 trips around a TensorTensor add with a
** semaphore update, then a copy out), run, checked; garbage tables rejected; and every
** allocation made to fail in turn, each attempt ending in E_NOMEM or success with no
** leak (the Makefile runs this under ASan with leak detection). Build: make -C tests/c */
#include <stdio.h>
#include "birsim.h"

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
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
