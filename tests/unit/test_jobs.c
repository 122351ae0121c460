/* test_jobs.c - the worker pool the builder and verifier share (lib/jobs.c), without a remote: every index
 * runs exactly once on up to `threads` threads, the first failure stops the hand-out and comes back with its
 * message in the calling thread, progress counts and reports, problem lines. */
#include "../../lib/jobs.h"

#include "harness.h"

#include <errno.h>
#include <stdlib.h>

typedef struct ctx {
    pthread_mutex_t mu;
    int runs[1000];
    int calls, fail_at, with_conn;
    pthread_t threads[64];
    int nthreads;
} ctx;

static int job(void *ud, size_t i, hfs3_s3 *c)
{
    ctx *x = ud;
    pthread_mutex_lock(&x->mu);
    x->runs[i]++;
    x->calls++;
    if (c)
        x->with_conn++;
    int seen = 0;
    for (int t = 0; t < x->nthreads; t++)
        seen |= pthread_equal(x->threads[t], pthread_self());
    if (!seen && x->nthreads < 64)
        x->threads[x->nthreads++] = pthread_self();
    pthread_mutex_unlock(&x->mu);
    if ((int)i == x->fail_at)
        return hfs3_err(-EIO, "job %zu broke", i);
    return 0;
}

static ctx *new_ctx(int fail_at)
{
    ctx *x = calloc(1, sizeof *x);
    pthread_mutex_init(&x->mu, NULL);
    x->fail_at = fail_at;
    return x;
}

static void free_ctx(ctx *x)
{
    pthread_mutex_destroy(&x->mu);
    free(x);
}

static void pool(void)
{
    ctx *x = new_ctx(-1);
    CHECK_EQ_INT(jobs_run(1000, 4, NULL, job, x), 0);
    int once = 1;
    for (int i = 0; i < 1000; i++)
        once &= x->runs[i] == 1;
    CHECK(once);
    CHECK_EQ_INT(x->calls, 1000);
    CHECK_EQ_INT(x->with_conn, 0); /* no remote: no connection */
    CHECK(x->nthreads >= 1 && x->nthreads <= 4);
    free_ctx(x);

    x = new_ctx(-1);
    CHECK_EQ_INT(jobs_run(0, 4, NULL, job, x), 0);
    CHECK_EQ_INT(x->calls, 0);
    CHECK_EQ_INT(jobs_run(3, 64, NULL, job, x), 0); /* more threads than work */
    CHECK_EQ_INT(x->calls, 3);
    CHECK(x->nthreads <= 3);
    CHECK_EQ_INT(jobs_run(5, 0, NULL, job, x), 0);  /* no thread count: one */
    CHECK_EQ_INT(x->calls, 8);
    free_ctx(x);
}

static void first_failure(void)
{
    /* one thread: work stops being handed out after the failure */
    ctx *x = new_ctx(5);
    hfs3_err_clear();
    CHECK_EQ_INT(jobs_run(100, 1, NULL, job, x), -EIO);
    CHECK_EQ_STR(hfs3_errmsg(), "job 5 broke");
    CHECK_EQ_INT(x->calls, 6);
    free_ctx(x);
    /* several threads: the failure and its message come back to the calling thread */
    x = new_ctx(0);
    hfs3_err_clear();
    CHECK_EQ_INT(jobs_run(1000, 4, NULL, job, x), -EIO);
    CHECK_EQ_STR(hfs3_errmsg(), "job 0 broke");
    CHECK(x->runs[0] == 1 && x->calls <= 1000);
    free_ctx(x);
}

typedef struct reports {
    int n;
    uint64_t done, total;
    size_t files_done, files_total;
    const char *phase;
} reports;

static void on_progress(void *ud, const char *phase, uint64_t done, uint64_t total, size_t fd, size_t ft)
{
    reports *r = ud;
    r->n++;
    r->phase = phase;
    r->done = done;
    r->total = total;
    r->files_done = fd;
    r->files_total = ft;
}

static void progress(void)
{
    reports rep = {0};
    jobs_progress pr = {.fn = on_progress, .ud = &rep, .phase = "hashing", .total = 100 << 20, .files_total = 3};
    pthread_mutex_init(&pr.mu, NULL);
    jobs_progress_add(&pr, 1 << 20, 0); /* under 8 MiB since the last report, no file done: quiet */
    CHECK_EQ_INT(rep.n, 0);
    jobs_progress_add(&pr, 8 << 20, 0);
    CHECK_EQ_INT(rep.n, 1);
    CHECK(rep.done == 9 << 20 && rep.total == 100 << 20);
    jobs_progress_add(&pr, 0, 1); /* a finished file always reports */
    CHECK_EQ_INT(rep.n, 2);
    CHECK(rep.files_done == 1 && rep.files_total == 3);
    CHECK_EQ_STR(rep.phase, "hashing");
    pthread_mutex_destroy(&pr.mu);
    jobs_progress none = {0};
    jobs_progress_add(&none, 1 << 30, 1); /* no callback: nothing, no lock taken */
    CHECK(none.done == 0);
}

static void problems(void)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    jobs_problem(&b, "%s: key %s is missing", "r:m", "k1");
    jobs_problem(&b, "second %d", 2);
    CHECK_EQ_STR(hfs3_buf_str(&b), "r:m: key k1 is missing\nsecond 2\n");
    hfs3_buf_free(&b);
}

int main(void)
{
    TEST(pool);
    TEST(first_failure);
    TEST(progress);
    TEST(problems);
    return t_done("test_jobs");
}
