/* bench/minimal_interp.c -- the peer of bench_control_flow.py's register loop: the same
** program (r := 0; Loop N { r := r + 1 }; out := r) in a minimal C interpreter, timed on
** this machine, so the gap between birsim's step machine and "a switch over decoded
** instructions" is measured, not guessed (docs/DESIGN.md, the VM section).
**
**   cc -O2 -o minimal_interp bench/minimal_interp.c && ./minimal_interp [trips] [repeat]
**
** Three interpreters, each a loop over an array of decoded instructions:
**   minimal   a switch per instruction, registers in an array, a loop instruction
**             that jumps back: no step count, no statistics;
**   counted   + what every birsim step also does: a step count checked against a limit,
**             per-opcode and per-engine counters, a status value per instruction;
**   framed    + birsim's structure: the loop is a region frame (iv, ub, stride) whose
**             body is a block with a queue head and a pending count, restarted per trip,
**             and each register read/write goes through the instruction's engine slot
**             (7 cells per register) with the operand decoded from a table.
** Prints one line per interpreter: "name ns_per_trip" (median of `repeat`, on the
** thread's CPU time, as bench_control_flow.py judges birsim: the machine is shared). */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_MOVI, OP_ADDI, OP_LOOP, OP_ENDLOOP, OP_STORE, OP_HALT };

typedef struct { int32_t op, a, b; int64_t imm; } ins;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t minimal(const ins *p, int64_t *out)
{
    int64_t r[4] = {0}, iv = 0, ub = 0;
    int32_t pc = 0, body = 0;
    for (;;) {
        const ins *i = &p[pc];
        switch (i->op) {
        case OP_MOVI: r[i->a] = i->imm; pc++; break;
        case OP_ADDI: r[i->a] = (int64_t)(int32_t)(r[i->b] + i->imm); pc++; break;
        case OP_LOOP: iv = 0; ub = i->imm; body = pc + 1; pc = iv < ub ? body : i->b; break;
        case OP_ENDLOOP: pc = ++iv < ub ? body : pc + 1; break;
        case OP_STORE: *out = r[i->a]; pc++; break;
        default: return iv;
        }
    }
}

typedef struct {
    int64_t steps, max_steps;
    int64_t op_counts[8], engine_counts[8];
} stats;

static int step(stats *s)
{
    return ++s->steps > s->max_steps;
}

static int64_t counted(const ins *p, int64_t *out, stats *s)
{
    int64_t r[4] = {0}, iv = 0, ub = 0;
    int32_t pc = 0, body = 0;
    for (;;) {
        const ins *i = &p[pc];
        int st = 0;
        if (i->op == OP_HALT)
            return iv;
        if (i->op != OP_ENDLOOP) {
            st = step(s);
            s->op_counts[i->op]++;
            s->engine_counts[i->b & 7]++;
        }
        if (st)
            return -1;
        switch (i->op) {
        case OP_MOVI: r[i->a] = i->imm; pc++; break;
        case OP_ADDI: r[i->a] = (int64_t)(int32_t)(r[i->b] + i->imm); pc++; break;
        case OP_LOOP: iv = 0; ub = i->imm; body = pc + 1; pc = iv < ub ? body : i->b; break;
        case OP_ENDLOOP:
            if (++iv < ub) {
                if (step(s))
                    return -1;
                pc = body;
            } else {
                pc++;
            }
            break;
        case OP_STORE: *out = r[i->a]; pc++; break;
        default: return -1;
        }
    }
}

/* birsim's shape, reduced: frames walking blocks, queue heads, engine register slots. */
typedef struct { int32_t kind, reg, dtype; int64_t imm; } opnd;
typedef struct { int32_t op, engine, opnd, nin, body_first, body_n; int64_t ub; } insn2;
typedef struct {
    int32_t first, n, owner, pc, npending, started;
    int64_t iv, ub;
} frame;

static int64_t framed(const insn2 *p, const opnd *o, int32_t nmain, int64_t *out, stats *s,
                      uint64_t *regs)
{
    frame fr[4];
    int32_t nf = 1;
    memset(fr, 0, sizeof fr);
    fr[0].first = 0;
    fr[0].n = nmain;
    fr[0].owner = -1;
    for (;;) {
        frame *f = &fr[nf - 1];
        const insn2 *in;
        int32_t slot;
        if (!f->started) {
            f->pc = 0;
            f->npending = f->n;
            f->started = 1;
        }
        if (f->npending == 0) {             /* block end, region end */
            if (f->owner < 0)
                return 0;
            if (++f->iv < f->ub) {
                if (step(s))
                    return -1;
                f->started = 0;
                continue;
            }
            nf--;
            fr[nf - 1].pc++;
            fr[nf - 1].npending--;
            continue;
        }
        in = &p[f->first + f->pc];
        if (step(s))
            return -1;
        s->op_counts[in->op]++;
        s->engine_counts[in->engine]++;
        slot = in->engine;
        switch (in->op) {
        case OP_LOOP:
            if (in->ub <= 0)
                break;
            f = &fr[nf++];
            memset(f, 0, sizeof *f);
            f->first = in->body_first;
            f->n = in->body_n;
            f->owner = 1;
            f->ub = in->ub;
            continue;
        case OP_MOVI:
            regs[o[in->opnd + 1].reg * 7 + slot] = regs[o[in->opnd + 1].reg * 7] =
                (uint64_t)o[in->opnd].imm;
            break;
        case OP_ADDI: {
            const opnd *a = &o[in->opnd], *b = &o[in->opnd + 1], *d = &o[in->opnd + 2];
            int64_t x = a->kind ? a->imm : (int64_t)(int32_t)regs[a->reg * 7 + slot];
            int64_t y = b->kind ? b->imm : (int64_t)(int32_t)regs[b->reg * 7 + slot];
            uint64_t v = (uint64_t)(int64_t)(int32_t)(uint32_t)(x + y) & 0xFFFFFFFFu;
            regs[d->reg * 7 + slot] = regs[d->reg * 7] = v;
            break;
        }
        case OP_STORE:
            *out = (int64_t)(int32_t)regs[o[in->opnd].reg * 7 + slot];
            break;
        default:
            return -1;
        }
        f->pc++;
        f->npending--;
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int64_t trips = argc > 1 ? atoll(argv[1]) : 1000000;
    int repeat = argc > 2 ? atoi(argv[2]) : 5;
    /* r0 := 0; Loop trips { r0 := r0 + 1 }; out := r0 */
    ins prog[] = { { OP_MOVI, 0, 0, 0 }, { OP_LOOP, 0, 4, trips }, { OP_ADDI, 0, 0, 1 },
                   { OP_ENDLOOP, 0, 0, 0 }, { OP_STORE, 0, 0, 0 }, { OP_HALT, 0, 0, 0 } };
    opnd ops[] = { { 1, 0, 0, 0 }, { 0, 0, 0, 0 },                  /* movi: imm 0 -> r0 */
                   { 0, 0, 0, 0 }, { 1, 0, 0, 1 }, { 0, 0, 0, 0 },  /* add: r0, 1 -> r0 */
                   { 0, 0, 0, 0 } };                                 /* store r0 */
    insn2 p2[] = { { OP_MOVI, 1, 0, 1, 0, 0, 0 }, { OP_LOOP, 0, 0, 0, 3, 1, trips },
                   { OP_STORE, 1, 5, 1, 0, 0, 0 }, { OP_ADDI, 1, 2, 2, 0, 0, 0 } };
    const char *names[] = { "minimal", "counted", "framed" };
    double t[3][64];
    if (repeat < 1 || repeat > 64)
        repeat = 5;
    for (int k = 0; k < repeat; k++) {
        for (int v = 0; v < 3; v++) {
            int64_t out = -1;
            stats s;
            uint64_t regs[7] = {0};
            double t0;
            memset(&s, 0, sizeof s);
            s.max_steps = INT64_MAX;
            t0 = now();
            if (v == 0)
                minimal(prog, &out);
            else if (v == 1)
                counted(prog, &out, &s);
            else
                framed(p2, ops, 3, &out, &s, regs);
            t[v][k] = now() - t0;
            if (out != (int64_t)(int32_t)trips) {
                fprintf(stderr, "%s: wrong result %lld\n", names[v], (long long)out);
                return 1;
            }
        }
    }
    for (int v = 0; v < 3; v++) {
        qsort(t[v], (size_t)repeat, sizeof t[v][0], cmp);
        printf("%s %.3f\n", names[v], t[v][repeat / 2] * 1e9 / (double)(trips > 0 ? trips : 1));
    }
    return 0;
}
