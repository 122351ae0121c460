/* jobs.c - the builder's and verifier's shared machinery: a pool of worker threads (each with its own S3
 * connection when asked), progress accounting, hashing an object as it streams, and problem lines.
 * Owns no global state. */
#include "jobs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool {
    pthread_mutex_t mu;
    size_t next, n;
    jobs_fn fn;
    void *ud;
    const hfs3_remote *remote;
    int rc;
    char msg[1024];
} pool;

/* Keeps the first failure and its message (messages are per thread, so copy it now). */
static void pool_fail(pool *p, int rc)
{
    pthread_mutex_lock(&p->mu);
    if (!p->rc) {
        p->rc = rc;
        snprintf(p->msg, sizeof p->msg, "%s", hfs3_errmsg());
    }
    pthread_mutex_unlock(&p->mu);
}

static void *pool_worker(void *arg)
{
    pool *p = arg;
    hfs3_s3 *c = NULL;
    if (p->remote) {
        int rc = hfs3_s3_new(p->remote, NULL, &c);
        if (rc < 0) {
            pool_fail(p, rc);
            return NULL;
        }
    }
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next++;
        int stop = p->rc != 0 || i >= p->n;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        int rc = p->fn(p->ud, i, c);
        if (rc < 0)
            pool_fail(p, rc);
    }
    hfs3_s3_free(c);
    return NULL;
}

/* Runs fn(ud, i) for i in [0, n) on `threads` threads; returns the first failure (its message is set in the
 * calling thread) or 0. */
int jobs_run(size_t n, int threads, const hfs3_remote *remote, jobs_fn fn, void *ud)
{
    if (n == 0)
        return 0;
    if (threads < 1)
        threads = 1;
    if ((size_t)threads > n)
        threads = (int)n;
    pool p = {.n = n, .fn = fn, .ud = ud, .remote = remote};
    pthread_mutex_init(&p.mu, NULL);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!tids)
        return hfs3_err(-ENOMEM, "out of memory");
    int started = 0;
    for (int t = 0; t < threads; t++) {
        if (pthread_create(&tids[t], NULL, pool_worker, &p) != 0)
            break;
        started++;
    }
    if (started == 0)
        pool_worker(&p);
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    free(tids);
    pthread_mutex_destroy(&p.mu);
    if (p.rc)
        return hfs3_err(p.rc, "%s", p.msg);
    return 0;
}

void jobs_progress_add(jobs_progress *pr, uint64_t bytes, size_t files)
{
    if (!pr->fn)
        return;
    pthread_mutex_lock(&pr->mu);
    pr->done += bytes;
    pr->files_done += files;
    if (files || pr->done - pr->last_report >= (8u << 20)) {
        pr->last_report = pr->done;
        pr->fn(pr->ud, pr->phase, pr->done, pr->total, pr->files_done, pr->files_total);
    }
    pthread_mutex_unlock(&pr->mu);
}


int jobs_chunker_init(jobs_chunker *k, uint64_t csize)
{
    memset(k, 0, sizeof *k);
    k->csize = csize;
    hfs3_buf_init(&k->hex, 0);
    k->whole = hfs3_sha256_new();
    if (csize)
        k->part = hfs3_sha256_new();
    if (!k->whole || (csize && !k->part)) {
        jobs_chunker_free(k);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    return 0;
}

static int chunk_end(jobs_chunker *k)
{
    unsigned char md[32];
    char hex[65];
    hfs3_sha256_final(k->part, md);
    hfs3_sha256_free(k->part);
    k->part = NULL;
    hfs3_hex(md, 32, hex);
    k->in_part = 0;
    if (hfs3_buf_add(&k->hex, hex, 64))
        return hfs3_err(-ENOMEM, "out of memory");
    return 0;
}

int jobs_chunker_add(jobs_chunker *k, const void *data, size_t n)
{
    hfs3_sha256_update(k->whole, data, n);
    const char *p = data;
    while (k->csize && n) {
        if (!k->part && !(k->part = hfs3_sha256_new()))
            return hfs3_err(-ENOMEM, "out of memory");
        size_t take = k->csize - k->in_part < n ? (size_t)(k->csize - k->in_part) : n;
        hfs3_sha256_update(k->part, p, take);
        k->in_part += take;
        p += take;
        n -= take;
        if (k->in_part == k->csize && chunk_end(k) < 0)
            return -ENOMEM;
    }
    return 0;
}

int jobs_chunker_finish(jobs_chunker *k, char out[65], char **chunks)
{
    int rc = 0;
    unsigned char md[32];
    hfs3_sha256_final(k->whole, md);
    hfs3_hex(md, 32, out);
    if (k->csize && k->in_part)
        rc = chunk_end(k);
    if (!rc && k->csize && chunks) {
        if (!(*chunks = k->hex.len ? hfs3_buf_take(&k->hex, NULL) : hfs3_strdup("")))
            rc = hfs3_err(-ENOMEM, "out of memory");
    }
    jobs_chunker_free(k);
    return rc;
}

void jobs_chunker_free(jobs_chunker *k)
{
    if (k->whole)
        hfs3_sha256_free(k->whole);
    if (k->part)
        hfs3_sha256_free(k->part);
    k->whole = k->part = NULL;
    hfs3_buf_free(&k->hex);
}

typedef struct stream_sink {
    jobs_chunker k;
    uint64_t n, unreported;
    jobs_progress *pr;
} stream_sink;

static int stream_to_sha(void *ud, const void *data, size_t n)
{
    stream_sink *s = ud;
    if (jobs_chunker_add(&s->k, data, n) < 0)
        return -ENOMEM;
    s->n += n;
    s->unreported += n;
    if (s->unreported >= (4u << 20)) {
        jobs_progress_add(s->pr, s->unreported, 0);
        s->unreported = 0;
    }
    return 0;
}

/* Streams object `key` and hashes it; also checks the byte count against `size`. */
int jobs_hash_object(hfs3_s3 *c, const char *key, const char *if_match, uint64_t size, jobs_progress *pr,
                     char out[65], char **chunks)
{
    stream_sink s = {.pr = pr};
    if (jobs_chunker_init(&s.k, chunks ? HFS3_CHUNK_SIZE : 0) < 0)
        return -ENOMEM;
    hfs3_s3_get g = {.if_match = if_match};
    int rc = hfs3_s3_get_object(c, key, &g, stream_to_sha, &s);
    free(g.etag);
    if (rc == 0 && s.n != size)
        rc = hfs3_err(-EIO, "%s: got %llu %s, the listing said %llu", key, (unsigned long long)s.n,
                      hfs3_plural(s.n, "byte", "bytes"), (unsigned long long)size);
    if (rc == 0) {
        rc = jobs_chunker_finish(&s.k, out, chunks);
        jobs_progress_add(pr, s.unreported, 1);
    }
    jobs_chunker_free(&s.k);
    return rc;
}

void jobs_problem(hfs3_buf *problems, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (hfs3_buf_adds(problems, line) == 0)
        hfs3_buf_addc(problems, '\n');
}

