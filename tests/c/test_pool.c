/* tests/c/test_pool.c -- unit tests for core/pool.c: every part of every job runs exactly
** once, on pools of 2..5 threads, with fewer and with more parts than threads, and with
** jobs posted while workers spin and after they went back to sleep; no pool / one part
** runs inline; failures to allocate (fault injection) leave nothing behind (ASan's leak
** check, and every started worker joined); bs_pool_get creates lazily and only once.
** Prints one line per failed check and "N passed, M failed" last; exits 1 on any failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include "core/alloc.h"
#include "core/pool.h"

static int failed, passed;

#define CHECK(cond) do { if (!(cond)) { failed++; \
    printf("FAIL line %d: %s\n", __LINE__, #cond); } else passed++; } while (0)

typedef struct job {
    atomic_int runs[BS_POOL_MAX];   /* per part */
    atomic_int bad;                 /* a part saw the wrong n */
    int32_t    n;
} job;

static void part(void *arg, int32_t i, int32_t n)
{
    job *j = arg;
    if (n != j->n || i < 0 || i >= n)
        atomic_fetch_add(&j->bad, 1);
    else
        atomic_fetch_add(&j->runs[i], 1);
}

/* Runs `rounds` jobs of n parts on p and checks each part ran once per job. */
static void check_jobs(bs_pool *p, int32_t n, int rounds)
{
    job j;
    memset(&j, 0, sizeof j);
    j.n = n;
    for (int r = 0; r < rounds; r++)
        bs_pool_run(p, part, &j, n);
    for (int32_t i = 0; i < n; i++)
        CHECK(atomic_load(&j.runs[i]) == rounds);
    CHECK(atomic_load(&j.bad) == 0);
}

int main(void)
{
    bs_error err;
    bs_pool *p = NULL;

    for (int32_t t = 2; t <= 5; t++) {               /* jobs of every size 1..t */
        bs_error_clear(&err);
        CHECK(bs_pool_new(&p, t, &err) == BS_OK && p != NULL);
        if (p == NULL)
            continue;
        CHECK(bs_pool_threads(p) == t);
        for (int32_t n = 1; n <= 4 * t; n++)
            check_jobs(p, n, 300);
        for (int r = 0; r < 5; r++) {                 /* idle past the spin: workers sleep */
            struct timespec ms = {0, 2000000};
            nanosleep(&ms, NULL);
            check_jobs(p, t, 1);
        }
        bs_pool_free(p);                              /* joins; ASan/LSan: nothing left */
        p = NULL;
    }
    check_jobs(NULL, 3, 5);                           /* no pool: inline, in order */
    CHECK(bs_pool_threads(NULL) == 1);
    bs_pool_free(NULL);

    bs_error_clear(&err);                             /* bad sizes */
    CHECK(bs_pool_new(&p, 1, &err) == BS_E_INPUT && p == NULL);
    CHECK(bs_pool_new(&p, BS_POOL_MAX + 1, &err) == BS_E_INPUT && p == NULL);

    for (int64_t n = 0; n < 4; n++) {                 /* every allocation of a 3-thread pool */
        bs_error_clear(&err);
        bs_alloc_fail_after(n);
        CHECK(bs_pool_new(&p, 3, &err) == BS_E_NOMEM && p == NULL);
        bs_alloc_fail_after(-1);
    }
    bs_error_clear(&err);
    bs_alloc_fail_after(4);                           /* 4 allocations suffice */
    CHECK(bs_pool_new(&p, 3, &err) == BS_OK && p != NULL);
    bs_alloc_fail_after(-1);
    if (p != NULL)
        check_jobs(p, 3, 10);
    bs_pool_free(p);
    p = NULL;

    {                                                 /* the lazily created pool */
        bs_pool_ref one = {NULL, 1, 0}, three = {NULL, 3, 0}, broken = {NULL, 3, 0};
        bs_pool *q;
        CHECK(bs_pool_get(&one) == NULL);
        q = bs_pool_get(&three);
        CHECK(q != NULL && bs_pool_get(&three) == q && bs_pool_threads(q) == 3);
        check_jobs(q, 2, 10);
        bs_pool_ref_fini(&three);
        CHECK(three.pool == NULL);
        bs_alloc_fail_after(0);
        CHECK(bs_pool_get(&broken) == NULL && broken.failed == 1);
        bs_alloc_fail_after(-1);
        CHECK(bs_pool_get(&broken) == NULL);          /* not retried */
        bs_pool_ref_fini(&one);
        bs_pool_ref_fini(&broken);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
