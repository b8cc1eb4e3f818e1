/* core/pool.h -- a small persistent pool of worker threads (POSIX threads) that runs the
** parts of one job at a time: bs_pool_run calls fn(arg, i, n) once for every i < n, each
** on whichever thread claims it first (the caller claims too, so parts never wait for a
** worker the OS has not woken), and returns when all have finished.
**
** A simulator owns at most one pool (bs_pool_ref), created on the first job that wants
** more than one thread and joined when the simulator is freed: no thread outlives it.
** Workers block every signal (the caller's thread keeps handling them) and sleep on a
** condition variable between jobs (after watching for the next one for a fraction of a
** millisecond). After fork() the child has none of the workers: the
** pool notices (the creating process id is recorded) and runs every part on the calling
** thread, and freeing it in the child releases memory without joining. A job never
** depends on how it is split: callers make parts compute disjoint results. */
#ifndef BS_CORE_POOL_H
#define BS_CORE_POOL_H

#include "common.h"
#include "error.h"

typedef struct bs_pool bs_pool;
typedef void bs_pool_fn(void *arg, int32_t part, int32_t nparts);

/* A pool of nthreads - 1 workers (the caller is the nthreads-th thread), 2 <= nthreads <=
** BS_POOL_MAX. E_NOMEM when memory or a thread cannot be had (nothing is left behind). */
#define BS_POOL_MAX 64
bs_status bs_pool_new(bs_pool **out, int32_t nthreads, bs_error *err);
void      bs_pool_free(bs_pool *p);               /* NULL-safe; joins every worker */
int32_t   bs_pool_threads(const bs_pool *p);      /* nthreads; 1 for NULL */

/* fn(arg, i, n) for i = 0 .. n-1, in any order and on any of the pool's threads (the
** caller included; n may exceed the thread count: parts are claimed one by one, so more
** parts than threads balance a thread that starts late). Runs every part on the calling
** thread, in order, when p is NULL, n <= 1, a job is already running on p (another thread
** called), or the process is a fork child of the one that made p. */
void      bs_pool_run(bs_pool *p, bs_pool_fn *fn, void *arg, int32_t n);

/* The lazily created pool of one simulator. */
typedef struct bs_pool_ref {
    bs_pool *pool;       /* owned; NULL until first wanted */
    int32_t  threads;    /* wanted size (Simulator(threads=...)), >= 1 */
    int32_t  failed;     /* creating it failed once: jobs run on the calling thread */
} bs_pool_ref;

/* The pool of ref (created now if wanted and not yet made), or NULL: threads <= 1, or
** creation failed (then results are the same, computed on one thread). */
bs_pool  *bs_pool_get(bs_pool_ref *ref);
void      bs_pool_ref_fini(bs_pool_ref *ref);

#endif
