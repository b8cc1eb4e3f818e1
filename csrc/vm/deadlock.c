/* vm/deadlock.c -- the DeadlockError report: every blocked instruction of every live
** core (core, engine, function, block, position, name) with each unsatisfied wait and its current
** vs needed value; identical entries on several cores are listed once ("cores 0-15"),
** and entries that do not fit the message are counted, never cut mid-line. */
#include <stdio.h>
#include "vm.h"

/* One blocked instruction of the deadlock report: the text after "core k, ". */
typedef struct dl_entry {
    int32_t core;
    int32_t done;
    char   *text;
} dl_entry;

const int32_t *bs_sim_last_done(const bs_sim *sim, int32_t core, int32_t *last_any)
{
    if (core < 0 || core >= sim->ncores)
        return NULL;
    *last_any = sim->cores[core].last_any;
    return sim->cores[core].last_done;
}

/* "core 3, " or "cores 0-5,7,9-10, " for the entries e[i..] with the same text (marked
** done). Returns how many cores that is. */
static int32_t dl_cores(dl_entry *e, int32_t n, int32_t i, char *buf, size_t cap)
{
    int32_t cores[64], nc = 0;
    size_t len;
    for (int32_t j = i; j < n; j++)
        if (!e[j].done && strcmp(e[j].text, e[i].text) == 0) {
            cores[nc++] = e[j].core;
            e[j].done = 1;
        }
    len = (size_t)snprintf(buf, cap, "core%s ", nc > 1 ? "s" : "");
    for (int32_t a = 0; a < nc && len < cap;) {
        int32_t b = a;
        while (b + 1 < nc && cores[b + 1] == cores[b] + 1)
            b++;
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", a ? "," : "", cores[a]);
        if (b > a && len < cap)
            len += (size_t)snprintf(buf + len, cap - len, "-%d", cores[b]);
        a = b + 1;
    }
    if (len < cap)
        snprintf(buf + len, cap - len, ", ");
    return nc;
}

/* List every blocked instruction of every live core into err (DeadlockError): engine,
** function, block, position, instruction, and each unsatisfied wait with its current value.
** Identical entries of several cores (SPMD programs) are listed once with their cores.
** An entry is appended only whole; those that do not fit are counted at the end, so the
** report is never silently cut. */
/* The blocked instructions collected so far: one entry per blocked engine head, and how
** many could not be kept (out of memory) or listed (the message is full). */
typedef struct dl_list {
    dl_entry *ent;
    int32_t n;
    long long omitted;
    bs_error *one;                      /* scratch: one entry's text */
} dl_list;

/* Adds core k's blocked engine heads to l; the first one found is the error's place. */
static void dl_collect_core(bs_sim *sim, int32_t k, bs_error *err, dl_list *l)
{
    const bs_program *p = sim->prog;
    bs_core *c = &sim->cores[k];
    const bs_frame *f;
    const bs_block *b;
    if (c->done || c->nframes == 0)
        return;
    f = &c->frames[c->nframes - 1];
    if (f->bi >= p->regions[f->region].nblock)
        return;
    b = &p->blocks[p->regions[f->region].block0 + f->bi];
    for (int q = 0; q < BS_NUM_ENGINES; q++) {
        int32_t off = f->head[q], insn;
        const bs_insn *in;
        char where[600];
        if (off >= b->ninsn)
            continue;
        insn = b->insn0 + off;
        if (bs_insn_ready(sim, c, insn))
            continue;
        in = &p->insns[insn];
        if (err->insn < 0) {
            err->insn = insn;
            err->block = in->block;
            err->func = in->func;
            err->core = k;
        }
        if (l->one == NULL || l->ent == NULL) {     /* out of memory: count only */
            l->omitted++;
            continue;
        }
        l->one->msg[0] = '\0';
        bs_insn_where(p, insn, where, sizeof where);
        bs_error_append(l->one, "engine %s, %s", bs_enum_name("ENGINE", in->engine), where);
        bs_sync_describe_wait(sim, c, insn, l->one);
        bs_coll_describe(sim, c, insn, l->one);
        l->ent[l->n].core = k;
        l->ent[l->n].text = bs_malloc(strlen(l->one->msg) + 1);
        if (l->ent[l->n].text == NULL) {
            l->omitted++;
            continue;
        }
        strcpy(l->ent[l->n++].text, l->one->msg);
    }
}

/* Appends each distinct entry, with its cores, while the whole of it fits; then the count
** of those that did not. */
static void dl_report(bs_error *err, dl_list *l)
{
    static const char more_fmt[] = "\n  ... and %lld more blocked instruction%s not listed";
    size_t used = strlen(err->msg);
    for (int32_t i = 0; i < l->n; i++) {
        char who[400];
        size_t nw, nt;
        int32_t ncores;
        if (l->ent[i].done)
            continue;
        ncores = dl_cores(l->ent, l->n, i, who, sizeof who);
        nw = strlen(who);
        nt = strlen(l->ent[i].text);
        if (l->omitted == 0 && used + 3 + nw + nt + sizeof more_fmt + 32 < sizeof err->msg) {
            memcpy(err->msg + used, "\n  ", 3);
            memcpy(err->msg + used + 3, who, nw);
            memcpy(err->msg + used + 3 + nw, l->ent[i].text, nt + 1);
            used += 3 + nw + nt;
        } else {
            l->omitted += ncores;
        }
    }
    if (l->omitted)
        bs_error_append(err, more_fmt, l->omitted, l->omitted == 1 ? "" : "s");
}

bs_status bs_sim_deadlock(bs_sim *sim, bs_error *err)
{
    dl_list l = { 0 };
    l.one = bs_malloc(sizeof *l.one);
    l.ent = bs_calloc((size_t)sim->ncores * BS_NUM_ENGINES + 1, sizeof *l.ent);
    bs_errorf(err, BS_E_DEADLOCK, "deadlock: no engine of any core can advance. Blocked:");
    for (int32_t k = 0; k < sim->ncores; k++)
        dl_collect_core(sim, k, err, &l);
    dl_report(err, &l);
    for (int32_t i = 0; i < l.n; i++)
        bs_free(l.ent[i].text);
    bs_free(l.ent);
    bs_free(l.one);
    return BS_E_DEADLOCK;
}
