/* jobs.h - lib-internal: worker pool, progress, streamed hashing, problem lines (jobs.c). */
#ifndef HFS3_JOBS_H
#define HFS3_JOBS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "hfs3/builder.h"
#include "hfs3/s3.h"

/* One unit of work; c is this thread's S3 connection (NULL when the pool was started without a remote). */
typedef int (*jobs_fn)(void *ud, size_t i, hfs3_s3 *c);

/* Runs fn(ud, i) for i in [0, n) on `threads` threads, each with its own connection to `remote` when remote is
 * not NULL. Stops handing out work at the first failure and returns it (its message set in the calling
 * thread), else 0. */
int jobs_run(size_t n, int threads, const hfs3_remote *remote, jobs_fn fn, void *ud);

/* Progress shared by the workers; fn may be NULL (then nothing is counted). Init mu before use. */
typedef struct jobs_progress {
    pthread_mutex_t mu;
    hfs3_progress_fn fn;
    void *ud;
    const char *phase;
    uint64_t done, total, last_report;
    size_t files_done, files_total;
} jobs_progress;

void jobs_progress_add(jobs_progress *pr, uint64_t bytes, size_t files);

/* Streams object `key` (If-Match if_match when not NULL), hashes it into out (64 hex), and checks that it had
 * exactly `size` bytes. */
int jobs_hash_object(hfs3_s3 *c, const char *key, const char *if_match, uint64_t size, jobs_progress *pr,
                     char out[65]);

/* Appends one printf-formatted line to problems. */
void jobs_problem(hfs3_buf *problems, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
