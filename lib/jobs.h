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
 * exactly `size` bytes. chunks not NULL: also the HFS3_CHUNK_SIZE chunk digests (see jobs_chunker). */
int jobs_hash_object(hfs3_s3 *c, const char *key, const char *if_match, uint64_t size, jobs_progress *pr,
                     char out[65], char **chunks);

/* Chunk digests (docs/manifest.md): the whole-file sha256 and the sha256 of each `csize` slice. */
typedef struct jobs_chunker {
    hfs3_sha256_ctx *whole, *part;
    uint64_t csize, in_part;
    hfs3_buf hex;          /* 64 hex per finished chunk */
} jobs_chunker;
/* 0 or -ENOMEM. csize 0: the whole-file digest only. */
int jobs_chunker_init(jobs_chunker *k, uint64_t csize);
int jobs_chunker_add(jobs_chunker *k, const void *data, size_t n);
/* Ends both digests: out gets the whole file's, *chunks (when csize and chunks) the concatenated chunk
 * digests (malloc'd; "" for an empty file). Frees k's state either way. */
int jobs_chunker_finish(jobs_chunker *k, char out[65], char **chunks);
void jobs_chunker_free(jobs_chunker *k);

/* Appends one printf-formatted line to problems. */
void jobs_problem(hfs3_buf *problems, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
