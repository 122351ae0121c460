/* fetch.c - the parallel verified fetcher: one file entry into CACHE/blobs/<sha256>. Worker threads (one
 * hfs3_s3 connection each) take ranges in order and pwrite them into tmp/<sha>.part; the calling thread
 * hashes the contiguous completed prefix from the file (page cache) while later ranges still arrive; or, with
 * chunk digests and a mount (hfs3_fetch_file.mount), each worker checks its range's digest as it arrives and
 * nothing is read back: the file goes to that mount's cblobs/ (durable.c moves it into blobs/ later);
 * completed range numbers go to tmp/<sha>.<random>.done so a killed fetch resumes. Nothing reaches blobs/
 * before its sha256 matched; the temp file is this user's, 0600, O_EXCL under an unpredictable name until
 * then, and is installed by renameat between the cache's checked directory descriptors. Not here: the cache
 * rules and locks (cache.c, cachefs.c), HTTP and retries (s3.c). */
#include "hfs3/fetch.h"
#include "hfs3/durable.h"
#include "hfs3/explain.h"
#include "hfs3/gc.h"
#include "hfs3/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/log.h"
#include "hfs3/s3.h"
#include "hfs3/util.h"

#define HASH_BUF (1u << 20)
/* curl hands the body over in pieces of at most 16 KiB; gathered into this much per worker, a GiB is 4,096
 * pwrites instead of 65,536 (bench/: a third less system time) */
#define WRITE_BUF (256u << 10)
#define MIN_HINT (64u << 10)

enum { CH_TODO = 0, CH_BUSY = 1, CH_DONE = 2 };

int hfs3_fetch_connections(void)
{
    const char *v = getenv("HFS3_CONNECTIONS");
    if (v && *v && strcmp(v, "auto") != 0) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == 0 && n >= 1 && n <= HFS3_FETCH_MAX_CONNECTIONS)
            return (int)n;
        hfs3_warn("HFS3_CONNECTIONS=%s is neither auto nor a number from 1 to %d; using auto", v,
                  HFS3_FETCH_MAX_CONNECTIONS);
    }
    return 0;
}

void hfs3_fetch_tune_init(hfs3_fetch_tune *t, int max)
{
    memset(t, 0, sizeof *t);
    t->max = max < 1 ? 1 : max;
    t->level = HFS3_FETCH_TUNE_START < t->max ? HFS3_FETCH_TUNE_START : t->max;
}

/* Settles at level (a verdict reached at now). */
static int tune_settle(hfs3_fetch_tune *t, int level, double now)
{
    t->level = level;
    t->settled = 1;
    t->settled_at = now;
    return level;
}

int hfs3_fetch_tune_step(hfs3_fetch_tune *t, uint64_t bytes, double now)
{
    if (t->settled && t->refused) {
        /* AIMD's additive increase: one more connection per quiet HFS3_FETCH_AIMD_GROW_MS */
        if (t->level < t->peak && (now - t->grown_at) * 1000 >= HFS3_FETCH_AIMD_GROW_MS &&
            (now - t->throttled_at) * 1000 >= HFS3_FETCH_AIMD_GROW_MS) {
            t->grown_at = now;
            hfs3_debug("connections per file: %d -> %d (no throttle for %d s)", t->level, t->level + 1,
                       HFS3_FETCH_AIMD_GROW_MS / 1000);
            t->level++;
        }
        return t->level;
    }
    if (t->settled) {
        if (t->level >= t->max || (now - t->settled_at) * 1000 < HFS3_FETCH_TUNE_REPROBE_MS)
            return t->level;
        /* a while at this count: one doubling again, judged against a fresh window at this count */
        hfs3_debug("connections per file: %d, measuring again", t->level);
        t->settled = 0;
        t->started = 0;
        t->prev_rate = 0;
        t->prev_level = 0;
    }
    if (!t->started) {
        t->started = 1;
        t->t0 = now;
        t->b0 = bytes;
        return t->level;
    }
    double secs = now - t->t0;
    uint64_t got = bytes - t->b0;
    if (secs * 1000 < HFS3_FETCH_TUNE_WINDOW_MS || got < (uint64_t)t->level * HFS3_FETCH_TUNE_BYTES)
        return t->level;
    double rate = (double)got / secs;
    t->rate = rate;
    t->rate_level = t->level;
    if (t->prev_rate > 0 && rate < t->prev_rate * HFS3_FETCH_TUNE_GAIN) {
        hfs3_debug("connections per file: %d (%.0f MB/s; %d gave %.0f MB/s)", t->prev_level, t->prev_rate / 1e6,
                   t->level, rate / 1e6);
        return tune_settle(t, t->prev_level, now);
    }
    if (t->level >= t->max) {
        hfs3_debug("connections per file: %d, the most (%.0f MB/s)", t->level, rate / 1e6);
        return tune_settle(t, t->level, now);
    }
    t->prev_rate = rate;
    t->prev_level = t->level;
    t->level = t->level * 2 < t->max ? t->level * 2 : t->max;
    t->t0 = now;
    t->b0 = bytes;
    hfs3_debug("connections per file: %d -> %d (%.0f MB/s)", t->prev_level, t->level, rate / 1e6);
    return t->level;
}

int hfs3_fetch_tune_throttled(hfs3_fetch_tune *t, double now)
{
    if (t->refused && (now - t->throttled_at) * 1000 < HFS3_FETCH_AIMD_HOLD_MS)
        return t->level; /* the same burst */
    if (!t->refused)
        t->peak = t->level;
    int was = t->level;
    t->level = t->level / 2 > 1 ? t->level / 2 : 1;
    t->refused = t->settled = 1;
    t->settled_at = t->throttled_at = t->grown_at = now;
    hfs3_debug("connections per file: %d -> %d (throttled: the server asked to slow down)", was, t->level);
    return t->level;
}

uint32_t hfs3_fetch_span(uint64_t chunk, uint32_t left, int conns, double conn_rate, uint64_t floor)
{
    if (!chunk || left <= 1)
        return 1;
    if (conns < 1)
        conns = 1;
    double want = conn_rate > 0 ? conn_rate * HFS3_FETCH_SPAN_SECS : 0;
    if (want < (double)floor)
        want = (double)floor;
    if (want > HFS3_FETCH_SPAN_MAX)
        want = HFS3_FETCH_SPAN_MAX;
    uint64_t k = (uint64_t)(want / (double)chunk);
    uint64_t round = left / (uint32_t)conns; /* each connection still gets a range */
    if (k > round)
        k = round;
    return k < 1 ? 1 : (uint32_t)k;
}

/* This process's tuner (one remote per process in practice: fetch, _get, _prefetch), and every byte it has
 * received, all files together (two files download at once where one's tail overlaps the next one's start). */
static pthread_mutex_t tune_mu = PTHREAD_MUTEX_INITIALIZER;
static hfs3_fetch_tune tune = {.level = HFS3_FETCH_TUNE_START, .max = HFS3_FETCH_MAX_CONNECTIONS};
static uint64_t tune_bytes;

static int tune_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_mutex_lock(&tune_mu);
    int level = hfs3_fetch_tune_step(&tune, __atomic_load_n(&tune_bytes, __ATOMIC_RELAXED),
                                     (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
    pthread_mutex_unlock(&tune_mu);
    return level;
}

/* The smallest range after throttling (0: none yet): doubles at each halving of the count, from
 * HFS3_FETCH_CHUNK up to HFS3_FETCH_SPAN_MAX: when requests are the limit, fewer and larger ones. */
static uint64_t span_floor;

/* A throttled reply: AIMD's halving (a tuned count), and larger ranges from now on. The level to use. */
static int tune_throttled(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_mutex_lock(&tune_mu);
    int halvings = tune.refused ? 0 : 1;
    double at = tune.throttled_at;
    int level = hfs3_fetch_tune_throttled(&tune, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
    if (halvings || tune.throttled_at != at) {
        uint64_t f = span_floor ? span_floor * 2 : HFS3_FETCH_CHUNK;
        span_floor = f > HFS3_FETCH_SPAN_MAX ? HFS3_FETCH_SPAN_MAX : f;
    }
    pthread_mutex_unlock(&tune_mu);
    return level;
}

/* Chunks for a job's next GET (its mu held; tune_mu taken inside it, as follow_tune_locked does) */
static uint32_t span_of(uint64_t chunk, uint32_t left, int conns, int tuned)
{
    pthread_mutex_lock(&tune_mu);
    double rate = tune.rate_level > 0 ? tune.rate / tune.rate_level : 0;
    uint64_t floor = span_floor;
    pthread_mutex_unlock(&tune_mu);
    return hfs3_fetch_span(chunk, left, conns, tuned ? rate : 0, floor);
}

void hfs3_fetch_plan(uint64_t size, int conns, uint64_t chunk_hint, uint64_t *chunk, uint32_t *nchunks,
                     int *nthreads)
{
    if (conns < 1)
        conns = 1;
    if (size == 0) {
        *chunk = 0;
        *nchunks = 0;
        *nthreads = 0;
        return;
    }
    uint64_t c;
    if (chunk_hint) {
        c = chunk_hint < MIN_HINT ? MIN_HINT : chunk_hint;
    } else if (size <= HFS3_FETCH_MIN_CHUNK) {
        c = size;
    } else {
        c = HFS3_FETCH_CHUNK;
        uint64_t per = (size + (uint64_t)conns - 1) / (uint64_t)conns;
        per = (per + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
        if (per < c)
            c = per < HFS3_FETCH_MIN_CHUNK ? HFS3_FETCH_MIN_CHUNK : per;
    }
    uint64_t n = (size + c - 1) / c;
    *chunk = c;
    *nchunks = (uint32_t)n;
    *nthreads = n < (uint64_t)conns ? (int)n : conns;
}

void hfs3_fetch_done_header(uint64_t size, uint64_t chunk, char *out, size_t outn)
{
    snprintf(out, outn, "hfs3-done 1 %" PRIu64 " %" PRIu64 "\n", size, chunk);
}

int hfs3_fetch_parse_done(const char *text, size_t n, uint64_t size, uint64_t chunk, uint32_t nchunks,
                          unsigned char *done)
{
    char hdr[96];
    hfs3_fetch_done_header(size, chunk, hdr, sizeof hdr);
    size_t hl = strlen(hdr);
    if (n < hl || memcmp(text, hdr, hl) != 0)
        return hfs3_err(-EINVAL, "resume sidecar does not match this file's plan");
    memset(done, 0, nchunks);
    int count = 0;
    size_t i = hl;
    while (i < n) {
        const char *nl = memchr(text + i, '\n', n - i);
        if (!nl)
            break; /* torn by a kill mid-write: that chunk is simply not done */
        uint64_t v = 0;
        int ok = nl > text + i && nl - (text + i) <= 10;
        for (const char *p = text + i; ok && p < nl; p++) {
            if (*p < '0' || *p > '9')
                ok = 0;
            else
                v = v * 10 + (uint64_t)(*p - '0');
        }
        if (ok && v < nchunks && !done[v]) {
            done[v] = 1;
            count++;
        }
        i = (size_t)(nl - text) + 1;
    }
    return count;
}

typedef struct fetch_job {
    const hfs3_cache *c;
    const hfs3_remote *r;
    const hfs3_fetch_file *f;
    const hfs3_fetch_opts *o;
    int fd, done_fd;
    int fresh;            /* the .part is this attempt's own new file, not a dead fetch's (see hash_part) */
    int sync;             /* HFS3_DURABLE=sync: flushed before the install (else recorded in unflushed/) */
    char part[256], done[256]; /* their names under tmp/ */
    uint64_t chunk;
    uint32_t nchunks, next;
    unsigned char *state;
    pthread_mutex_t mu;
    pthread_mutex_t wmu;  /* one pwrite into the .part at a time (see chunk_write) */
    pthread_cond_t cv;
    int err;
    char errmsg[1024];
    uint64_t fetched;
    int refetched;        /* chunks fetched again after a digest mismatch */
    int instream;         /* chunk digests checked as each range arrives */
    int rechecked;        /* instream after a whole-file mismatch: each chunk's first try was the damaged one */
    int direct;           /* checked by its chunk digests alone, for the mount's cblobs/ (no whole-file hash) */
    int cdir;             /* direct: mounts/<key>/cblobs, checked */
    const char *cpath;    /* its path, for messages */
    int into_own;         /* not direct, and installed into cdir (HFS3_VERIFY_FOREIGN=1: blobs/<sha> a member's bad plant) */
    char rec[96];         /* direct: its name in unflushed/, "<sha256>.m<key>" */
    uint32_t ndone;       /* ranges in the .part (CH_DONE) */
    int handed_on;        /* o->downloaded was called: every range had started */
    int tuned;            /* no count asked for: the workers follow tune_now() */
    int limit;            /* workers wanted now; one beyond it leaves after its range */
    int active;           /* workers started and not left */
    int closed;           /* being joined: no worker starts another */
    int nstarted;         /* in tids */
    int cap;              /* tuned: the most workers from now on (the server refused one beyond them) */
    pthread_t tids[HFS3_FETCH_MAX_CONNECTIONS];
    char got[65];         /* the whole-file sha256 of the last attempt that did not match */
} fetch_job;

typedef struct chunk_sink {
    fetch_job *j;
    uint64_t off, end;    /* the next byte, and the end of the span (its last chunk's end) */
    hfs3_sha256_ctx *h;   /* the current chunk's digest as it arrives (chunk digests only) */
    char *wbuf;           /* the worker's write buffer (NULL: each piece is written as it comes) */
    size_t wlen;          /* bytes in wbuf, which belong at off - wlen */
    uint32_t ci, last;    /* the chunk arriving now, and one past the span's last */
    uint64_t cend;        /* where chunk ci ends */
    int digests;          /* each chunk checked against its digest as it arrives */
    char *got;            /* a mismatching chunk's digest goes here (65 bytes) */
    int *hand_on, *landed_all; /* the worker's: set by chunk_landed */
} chunk_sink;

/* 1 when the file has chunk digests and this job's ranges are those chunks. */
static int has_digests(const fetch_job *j) { return j->f->chunks && j->f->chunk_size && j->chunk == j->f->chunk_size; }

/* Where range i ends: its bytes are [i * chunk, range_end) (the last range is the shorter one). */
static uint64_t range_end(const fetch_job *j, uint32_t i)
{
    uint64_t off = (uint64_t)i * j->chunk;
    return j->f->size - off < j->chunk ? j->f->size : off + j->chunk;
}

/* Sleeps before try `attempt` (1 = the first retry): 200 ms doubled each time, up to cap_ms, with jitter
 * (half to all of it). Damaged bytes are not server load: chunk retries use a low cap. */
static void fetch_backoff(int attempt, long cap_ms)
{
    long ms = 200L << (attempt < 6 ? attempt - 1 : 5);
    if (ms > cap_ms)
        ms = cap_ms;
    unsigned r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (unsigned)getpid() ^ (unsigned)attempt;
    ms = ms / 2 + (long)(r % (unsigned)(ms / 2 + 1));
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* Feeds [off, end) of the .part into h. The file this attempt created holds only what this process wrote (its
 * pages are in the page cache) and is hashed in place; a dead fetch's .part (a resume) may be from before a
 * crash or a reboot, where a page that cannot be read must be an error (the chunk fetched again, or the .part
 * dropped), not SIGBUS, which would kill every later resume of it too: pread. */
static int hash_part(fetch_job *j, hfs3_sha256_ctx *h, uint64_t off, uint64_t end, char *buf)
{
    return j->fresh ? hfs3_sha256_update_fd_fresh(h, j->fd, off, end - off, buf, HASH_BUF, NULL)
                    : hfs3_sha256_update_fd(h, j->fd, off, end - off, buf, HASH_BUF, NULL);
}

/* Checks chunk i of the .part against its digest (resume, or the whole file did not match). 1 good, 0 bad or
 * unreadable; got (may be NULL) its sha256 when read. */
static int chunk_ok_on_disk(fetch_job *j, uint32_t i, char *buf, char got[65])
{
    uint64_t off = (uint64_t)i * j->chunk, end = range_end(j, i);
    hfs3_sha256_ctx *h = hfs3_sha256_new();
    if (!h)
        return 0;
    int good = hash_part(j, h, off, end, buf) == 0;
    unsigned char md[32];
    char hex[65];
    hfs3_sha256_final(h, md);
    hfs3_sha256_free(h);
    hfs3_hex(md, 32, hex);
    if (got)
        memcpy(got, good ? hex : "(unreadable)", good ? 65 : 13);
    return good && !memcmp(hex, j->f->chunks + (size_t)i * 64, 64);
}

/* Records the first failure (the message is per-thread: copy it to the job) and wakes the hasher. */
static void conn_wake(void);

static void job_fail(fetch_job *j, int rc)
{
    pthread_mutex_lock(&j->mu);
    if (!j->err) {
        j->err = rc;
        snprintf(j->errmsg, sizeof j->errmsg, "%s", hfs3_errmsg());
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    conn_wake(); /* its workers that wait for a connection leave */
}

/* The connections of every fetch in this process together: a file's workers never have more requests in
 * flight than its count (j->limit), the ranges of the file before it still arriving included. The next file
 * starts once every range of the one before has started (o->downloaded), and its workers take the
 * connections that one's workers leave, one by one: a server that takes as many requests at once as the count
 * (HFS3_CONNECTIONS=N for a gateway with a limit of N, nginx's limit_conn, MinIO's requests_max) never sees
 * one more, which it would refuse (503). Lock order: conn_mu, then a job's mu. */
static pthread_mutex_t conn_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conn_cv = PTHREAD_COND_INITIALIZER;
static int conn_busy;

/* Waits until this process has fewer requests in flight than j's count and takes one: 1. 0: j failed or is
 * being joined meanwhile, and the worker leaves without one. A file whose next one has started already (its
 * damaged chunks fetched again, or the whole file after a mismatch: rare, and a loader waits for this file
 * first) does not wait for that one's connections. */
static int conn_take(fetch_job *j)
{
    pthread_mutex_lock(&conn_mu);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int stop = j->err || j->closed, limit = j->handed_on ? INT_MAX : j->limit;
        pthread_mutex_unlock(&j->mu);
        if (stop || conn_busy < limit) {
            conn_busy += !stop;
            pthread_mutex_unlock(&conn_mu);
            return !stop;
        }
        pthread_cond_wait(&conn_cv, &conn_mu);
    }
}

static void conn_give(void)
{
    pthread_mutex_lock(&conn_mu);
    conn_busy--;
    pthread_cond_broadcast(&conn_cv);
    pthread_mutex_unlock(&conn_mu);
}

/* A job's state that conn_take looks at changed (never called with a job's mu held) */
static void conn_wake(void)
{
    pthread_mutex_lock(&conn_mu);
    pthread_cond_broadcast(&conn_cv);
    pthread_mutex_unlock(&conn_mu);
}

/* Writes n bytes at off into the .part. Writers take turns: ext4 holds the inode lock for a buffered write,
 * and threads that meet there spin on it in the kernel (bench/, perf: an eighth of a fetch's CPU). */
static int write_at(fetch_job *j, const char *p, size_t n, uint64_t off)
{
    int rc = 0;
    pthread_mutex_lock(&j->wmu);
    while (n) {
        ssize_t w = pwrite(j->fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = hfs3_err(-errno, "writing %s/%s: %s", j->c->p_tmp, j->part, strerror(errno));
            break;
        }
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    pthread_mutex_unlock(&j->wmu);
    return rc;
}

static int sink_flush(chunk_sink *s)
{
    int rc = s->wlen ? write_at(s->j, s->wbuf, s->wlen, s->off - s->wlen) : 0;
    s->wlen = 0;
    return rc;
}

static int follow_tune_locked(fetch_job *j);

/* Chunk i is in the .part (flushed from the worker's buffer; with digests, checked): recorded in the resume
 * sidecar and as done, the hasher woken, and (a tuned count) the workers follow the tuner. Sets *hand_on when
 * it was the last (the next file may start) and *landed_all. */
static void chunk_landed(fetch_job *j, uint32_t i, int *hand_on, int *landed_all)
{
    char line[16];
    int ln = snprintf(line, sizeof line, "%u\n", i);
    pthread_mutex_lock(&j->mu);
    /* a lost line only costs a re-download of that chunk on resume */
    if (j->done_fd >= 0 && write(j->done_fd, line, (size_t)ln) != ln)
        hfs3_debug("%s: resume sidecar write failed", j->f->path);
    j->state[i] = CH_DONE;
    int all = ++j->ndone == j->nchunks;
    pthread_cond_broadcast(&j->cv);
    int grew = j->tuned && !all && follow_tune_locked(j);
    *hand_on |= all && !j->handed_on;
    j->handed_on |= all;
    *landed_all |= all;
    pthread_mutex_unlock(&j->mu);
    if (grew)
        conn_wake();
}

/* The sink reached the end of chunk s->ci: flushed, checked (digests), landed; the next chunk of the span
 * begins. -EBADMSG: its digest does not match (s->got holds it). */
static int chunk_end_sink(chunk_sink *s)
{
    fetch_job *j = s->j;
    int rc = sink_flush(s);
    if (rc < 0)
        return rc;
    uint64_t off = (uint64_t)s->ci * j->chunk;
    if (s->h) {
        unsigned char md[32];
        char hex[65];
        hfs3_sha256_final(s->h, md);
        hfs3_sha256_free(s->h);
        s->h = NULL;
        hfs3_hex(md, 32, hex);
        if (s->got)
            memcpy(s->got, hex, 65);
        if (memcmp(hex, j->f->chunks + (size_t)s->ci * 64, 64) != 0)
            return hfs3_err(-EBADMSG, "chunk %u (bytes %" PRIu64 "-%" PRIu64 ") sha256 mismatch: expected %.64s got %s",
                            s->ci, off, s->cend - 1, j->f->chunks + (size_t)s->ci * 64, hex);
    }
    if (j->sync)
        /* start writing the range to disk now, so that the fsync before the install waits for the last ranges
         * only (bench/: the fsyncs had been a third of a cold fetch's wall time); a hint, errors do not matter */
        sync_file_range(j->fd, (off64_t)off, (off64_t)(s->cend - off), SYNC_FILE_RANGE_WRITE);
    chunk_landed(j, s->ci, s->hand_on, s->landed_all);
    s->ci++;
    if (s->ci < s->last) {
        s->cend = range_end(j, s->ci);
        if (s->digests && !(s->h = hfs3_sha256_new()))
            return hfs3_err(-ENOMEM, "out of memory");
    }
    return 0;
}

static int chunk_write(void *ud, const void *data, size_t n)
{
    chunk_sink *s = ud;
    fetch_job *j = s->j;
    if (n > s->end - s->off) {
        /* noticed where it arrives: not one byte past the range reaches the file */
        if (s->end == j->f->size)
            return hfs3_err(-EIO, "server sent more bytes than the manifest's size (%" PRIu64 " %s)",
                            j->f->size, hfs3_plural(j->f->size, "byte", "bytes"));
        return hfs3_err(-EIO, "server sent more bytes than requested (range %" PRIu64 "-%" PRIu64 ")",
                        (uint64_t)s->ci * j->chunk, s->end - 1);
    }
    const char *p = data;
    size_t total = n;
    while (n) {
        /* a GET of several chunks: each chunk checked and landed as its last byte arrives */
        size_t take = s->cend - s->off < n ? (size_t)(s->cend - s->off) : n;
        if (s->h)
            hfs3_sha256_update(s->h, p, take);
        int rc;
        if (s->wbuf && s->wlen + take > WRITE_BUF && (rc = sink_flush(s)) < 0)
            return rc;
        if (s->wbuf && take <= WRITE_BUF) {
            memcpy(s->wbuf + s->wlen, p, take);
            s->wlen += take;
        } else if ((rc = write_at(j, p, take, s->off)) < 0) {
            return rc;
        }
        s->off += take;
        p += take;
        n -= take;
        if (s->off == s->cend && (rc = chunk_end_sink(s)) < 0)
            return rc;
    }
    if (j->tuned)
        __atomic_add_fetch(&tune_bytes, total, __ATOMIC_RELAXED);
    pthread_mutex_lock(&j->mu);
    j->fetched += total;
    if (j->o->progress)
        j->o->progress(j->o->progress_ud, total);
    int stop = j->err;
    pthread_mutex_unlock(&j->mu);
    /* another range failed: stop this one too rather than finish a download that will be thrown away */
    return stop ? -ECANCELED : 0;
}

/* One GET's answer to its throttles: its job, and whether its worker leaves. */
typedef struct throttle_ctx {
    fetch_job *j;
    int left;
} throttle_ctx;

/* A throttled reply to one of j's GETs (s3.c asks before it backs off): AIMD (the count halves, ranges grow),
 * and with a tuned count a worker beyond the new count gives up its range to the others and leaves (1) rather
 * than wait: counted out of the active ones at once, so that workers throttled together never all leave. The
 * last worker, or a count the user set, waits and tries again (0). */
static int on_throttle(void *ud)
{
    throttle_ctx *t = ud;
    fetch_job *j = t->j;
    int level = tune_throttled();
    if (!j->tuned)
        return 0;
    pthread_mutex_lock(&j->mu);
    j->limit = level < j->cap ? level : j->cap;
    /* (j->limit is at least 1: the last worker never leaves) */
    int leave = !j->err && j->active > j->limit;
    if (leave)
        j->active--;
    pthread_mutex_unlock(&j->mu);
    t->left = leave;
    return leave;
}

/* Fetches chunks [i, i + k) into the .part with one GET, landing each as it arrives (with chunk digests,
 * checked: -EBADMSG at a mismatch). *at: the first chunk not landed (i + k when all were). *throttled: the GET
 * was given up at a throttled reply and its worker counted out (on_throttle). */
static int fetch_span(fetch_job *j, hfs3_s3 *s3, uint32_t i, uint32_t k, char *wbuf, char got[65], int *hand_on,
                      int *landed_all, uint32_t *at, int *throttled)
{
    uint64_t off = (uint64_t)i * j->chunk;
    uint64_t len = range_end(j, i + k - 1) - off;
    int digests = has_digests(j) && j->instream;
    chunk_sink s = {.j = j, .off = off, .end = off + len, .wbuf = wbuf, .ci = i, .last = i + k,
                    .cend = range_end(j, i), .digests = digests, .got = got, .hand_on = hand_on,
                    .landed_all = landed_all};
    throttle_ctx tc = {j, 0};
    *at = i;
    *throttled = 0;
    if (digests && !(s.h = hfs3_sha256_new()))
        return hfs3_err(-ENOMEM, "out of memory");
    hfs3_s3_get g = {0};
    g.ranged = j->nchunks > 1;
    g.offset = off;
    g.length = len;
    g.if_match = j->f->etag && *j->f->etag ? j->f->etag : NULL;
    g.on_throttle = on_throttle;
    g.on_throttle_ud = &tc;
    int rc = hfs3_s3_get_object(s3, j->f->key, &g, chunk_write, &s);
    *at = s.ci;
    *throttled = rc < 0 && tc.left;
    free(g.etag);
    if (s.h)
        hfs3_sha256_free(s.h);
    if (rc == -ECANCELED || rc == -EBADMSG)
        return rc;
    if (rc == -ESTALE && g.if_match) {
        char why[512];
        snprintf(why, sizeof why, "%s", hfs3_errmsg());
        return hfs3_err(rc, "object changed since the manifest was built (If-Match %s failed: %s)", g.if_match,
                        why);
    }
    if (rc < 0)
        return rc;
    if (s.off > s.end)
        return hfs3_err(-EIO, "server sent more bytes than requested (range at %" PRIu64 ")", off);
    if (s.off != s.end)
        return hfs3_err(-EIO, "object is shorter than the manifest's %" PRIu64 " %s (range at %" PRIu64
                        " ended after %" PRIu64 " of %" PRIu64 " %s)", j->f->size, hfs3_plural(j->f->size, "byte",
                        "bytes"), off, s.off - off, len, hfs3_plural(len, "byte", "bytes"));
    return 0;
}

/* Chunks [from, to) that a worker had taken and did not land go back to the others (j->mu not held). */
static void give_back(fetch_job *j, uint32_t from, uint32_t to)
{
    pthread_mutex_lock(&j->mu);
    for (uint32_t c = from; c < to; c++)
        if (j->state[c] == CH_BUSY)
            j->state[c] = CH_TODO;
    if (from < to && j->next > from)
        j->next = from;
    pthread_mutex_unlock(&j->mu);
}

/* fetch_span with the chunk-digest healing: a damaged chunk is fetched again alone, bounded, with backoff (the
 * span's chunks after it go back to the others). *at, *throttled: as fetch_span's, for the last GET. */
static int fetch_chunk_healing(fetch_job *j, hfs3_s3 *s3, uint32_t i, uint32_t k, char *wbuf, int *hand_on,
                               int *landed_all, uint32_t *at, int *throttled)
{
    /* no early stop on the same wrong digest twice here: a fault that damages the same byte of every
     * second reply gives equal wrong chunks, and still heals on the next try */
    char got[65] = "";
    /* after a whole-file mismatch this chunk's first try was the damaged one (recheck_chunks said so) */
    for (int t = j->rechecked ? 2 : 1;; t++) {
        int rc = fetch_span(j, s3, i, k, wbuf, got, hand_on, landed_all, at, throttled);
        if (rc != -EBADMSG || t >= HFS3_FETCH_CHUNK_TRIES)
            return rc;
        give_back(j, *at + 1, i + k);
        i = *at;
        k = 1;
        hfs3_warn("%s: %s: %s; fetching that chunk again (try %d of %d)", j->r->spec, j->f->path, hfs3_errmsg(),
                  t + 1, HFS3_FETCH_CHUNK_TRIES);
        pthread_mutex_lock(&j->mu);
        j->refetched++;
        int stop = j->err;
        pthread_mutex_unlock(&j->mu);
        if (stop)
            return -ECANCELED;
        fetch_backoff(t, 1000);
    }
}

static void *worker(void *arg);

/* Starts workers until n are active (j->mu held). Stops at the first thread that cannot be made: the ones that
 * run still finish the file. 0 or the pthread_create error. */
static int grow_locked(fetch_job *j, int n)
{
    while (j->active < n && j->nstarted < HFS3_FETCH_MAX_CONNECTIONS && !j->closed) {
        int e = pthread_create(&j->tids[j->nstarted], NULL, worker, j);
        if (e)
            return e;
        j->nstarted++;
        j->active++;
    }
    return 0;
}

/* A range just landed (j->mu held): with no count asked for, the workers follow the tuner. Never more than the
 * ranges left to start. 1 when the count rose (the caller wakes the workers that wait for a connection). */
static int follow_tune_locked(fetch_job *j)
{
    int want = tune_now(), was = j->limit;
    if (want > j->cap)
        want = j->cap;
    uint32_t left = j->nchunks > j->next ? j->nchunks - j->next : 0;
    if ((uint32_t)want > (uint32_t)j->active + left)
        want = j->active + (int)left;
    j->limit = want;
    if (want > j->active)
        (void)grow_locked(j, want);
    return want > was;
}

/* A GET of chunks [at, end) was throttled and given up (on_throttle counted this worker out: it is beyond the
 * halved count, and another runs): its chunks go back to the others, and this worker leaves. */
static void throttled_leave(fetch_job *j, uint32_t at, uint32_t end)
{
    pthread_mutex_lock(&j->mu);
    for (uint32_t c = at; c < end; c++)
        if (j->state[c] == CH_BUSY)
            j->state[c] = CH_TODO;
    if (j->next > at)
        j->next = at;
    hfs3_warn("%s: %s: %s; going on with %d %s", j->r->spec, j->f->path, hfs3_errmsg(), j->limit,
                  hfs3_plural((unsigned long long)j->limit, "connection", "connections"));
    pthread_mutex_unlock(&j->mu);
    conn_wake(); /* the others may now take more */
}

/* A worker's connection or range failed: the job's error (unless it was only stopped by another's), and one
 * worker fewer. */
static void worker_fail(fetch_job *j, int rc)
{
    if (rc != -ECANCELED)
        job_fail(j, rc);
    pthread_mutex_lock(&j->mu);
    j->active--;
    pthread_mutex_unlock(&j->mu);
}

static void *worker(void *arg)
{
    fetch_job *j = arg;
    if (!conn_take(j)) {
        pthread_mutex_lock(&j->mu);
        j->active--;
        pthread_mutex_unlock(&j->mu);
        return NULL;
    }
    hfs3_s3 *s3 = NULL;
    int rc = hfs3_s3_new(j->r, NULL, &s3);
    if (rc < 0) {
        conn_give();
        worker_fail(j, rc);
        return NULL;
    }
    char *wbuf = malloc(WRITE_BUF); /* NULL: unbuffered, slower, still right */
    int hand_on = 0, landed_all = 0, broken = 0;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        while (j->next < j->nchunks && j->state[j->next] != CH_TODO)
            j->next++;
        /* fewer connections wanted (the tuner settled lower): this one leaves */
        if (j->err || j->next >= j->nchunks || j->active > j->limit) {
            j->active--;
            /* the first worker without a range: every range has started, and the next file may start now,
             * beside this one's last ranges (bench/: against a server that paces each connection, as S3 does,
             * the connections that finished first had waited for the slowest range of every file) */
            int first = !j->err && j->next >= j->nchunks && !j->handed_on;
            j->handed_on |= first;
            hand_on |= first;
            pthread_mutex_unlock(&j->mu);
            break;
        }
        uint32_t i = j->next++;
        j->state[i] = CH_BUSY;
        /* one GET for several chunks where requests cost more than they pay (hfs3_fetch_span) */
        uint32_t k = 1, want = span_of(j->chunk, j->nchunks - i, j->limit, j->tuned);
        while (k < want && i + k < j->nchunks && j->state[i + k] == CH_TODO)
            j->state[i + k++] = CH_BUSY;
        if (j->next < i + k)
            j->next = i + k;
        pthread_mutex_unlock(&j->mu);
        uint32_t at;
        int throttled;
        rc = fetch_chunk_healing(j, s3, i, k, wbuf, &hand_on, &landed_all, &at, &throttled);
        if (rc < 0 && throttled) {
            throttled_leave(j, at, i + k);
            break;
        }
        if (rc < 0) {
            worker_fail(j, rc);
            broken = 1;
            break;
        }
        /* (after the last range this worker finds none left and leaves) */
    }
    free(wbuf);
    /* its connection goes on with the next file's first worker: parked before that file starts. After a
     * failure the connection is not trusted to be in a good state: closed */
    if (broken)
        hfs3_s3_free(s3);
    else
        hfs3_s3_park(s3);
    conn_give(); /* before the hand-on: the next file's first worker takes this connection */
    if (hand_on && j->o->downloaded)
        j->o->downloaded(j->o->downloaded_ud);
    /* the last range is in: flush the file now, while the hash thread reads its tail, so that the fsync before
     * the install finds nothing left to write (bench/: a loader waits for both, one after the other, on every
     * shard); a hint like the writeback above, the install's fsync is the one that counts */
    if (landed_all && j->sync)
        (void)fdatasync(j->fd);
    return NULL;
}

/* Waits until every range is in (each checked by its digest as it arrived). 0 or the job's error. */
static int wait_all(fetch_job *j)
{
    pthread_mutex_lock(&j->mu);
    while (j->ndone < j->nchunks && !j->err)
        pthread_cond_wait(&j->cv, &j->mu);
    int rc = j->err;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* Hashes the file's chunks in order as they complete. 0 and hex set, or the job's error. */
static int hash_in_order(fetch_job *j, char hex[65])
{
    hfs3_sha256_ctx *h = hfs3_sha256_new();
    char *buf = malloc(HASH_BUF);
    int rc = 0;
    if (!h || !buf) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        job_fail(j, rc);
        goto out;
    }
    for (uint32_t i = 0; i < j->nchunks; i++) {
        pthread_mutex_lock(&j->mu);
        while (j->state[i] != CH_DONE && !j->err)
            pthread_cond_wait(&j->cv, &j->mu);
        rc = j->err;
        pthread_mutex_unlock(&j->mu);
        if (rc)
            goto out;
        uint64_t off = (uint64_t)i * j->chunk, end = range_end(j, i);
        if ((rc = hash_part(j, h, off, end, buf)) < 0) {
            rc = hfs3_err(rc == -ENODATA ? -EIO : rc, "reading back %s/%s: %s", j->c->p_tmp, j->part,
                          rc == -ENODATA ? "unexpected end of file" : strerror(-rc));
            job_fail(j, rc);
            goto out;
        }
    }
    unsigned char md[32];
    hfs3_sha256_final(h, md);
    hfs3_hex(md, 32, hex);
out:
    free(buf);
    if (h)
        hfs3_sha256_free(h);
    return rc;
}

/* The stem of a temp name: "<sha>.<random>" of "<sha>.<random>.part" (or a dead older "<sha>.part"). */
static void temp_stem(const char *part, char *out, size_t n)
{
    size_t l = strlen(part) - strlen(".part");
    snprintf(out, n, "%.*s", (int)l, part);
}

/* hfs3_cache_scan callback: the first tmp/<sha>.*.part of this user's with the right size (a dead fetch of
 * this content: we hold its lock) is kept open in the job for a resume; other ones of ours are removed.
 * Another user's is left alone (the sticky bit would refuse anyway); a symlink or a hard link is never
 * opened for writing (hfs3_cache_openat). */
static int resume_pick(void *ud, const char *name)
{
    fetch_job *j = ud;
    struct stat st;
    int fd = hfs3_cache_openat(j->c, j->c->tmp, name, O_RDWR, &st, j->c->p_tmp);
    if (fd < 0) {
        hfs3_debug("%s: leaving %s/%s alone: %s", j->f->path, j->c->p_tmp, name, hfs3_errmsg());
        return 0;
    }
    char stem[200], done[210];
    temp_stem(name, stem, sizeof stem);
    snprintf(done, sizeof done, "%s.done", stem);
    if (j->fd < 0 && (uint64_t)st.st_size == j->f->size && strlen(name) < sizeof stem) {
        j->fd = fd;
        snprintf(j->part, sizeof j->part, "%s", name);
        snprintf(j->done, sizeof j->done, "%s", done);
        return 0;
    }
    close(fd);
    unlinkat(j->c->tmp, name, 0);
    unlinkat(j->c->tmp, done, 0);
    return 0;
}

/* Finds a dead fetch's temp file and reads its sidecar for a resume. Returns the number of done chunks
 * (0: start over; then nothing is left open). */
static int load_resume(fetch_job *j)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s.", j->f->sha256);
    (void)hfs3_cache_scan(j->c->tmp, prefix, ".part", resume_pick, j);
    if (j->fd < 0)
        return 0;
    char *text = NULL;
    size_t n = 0;
    int rc = 0;
    /* the dead fetch's range size wins (it may have run with other settings): its header says it */
    j->done_fd = hfs3_cache_openat(j->c, j->c->tmp, j->done, O_RDWR | O_APPEND, NULL, j->c->p_tmp);
    if (j->done_fd >= 0 && hfs3_read_fd(j->done_fd, 64u << 20, &text, &n, j->done) == 0) {
        unsigned long long size = 0, chunk = 0;
        if (sscanf(text, "hfs3-done 1 %llu %llu\n", &size, &chunk) == 2 && size == j->f->size &&
            chunk >= MIN_HINT && (size + chunk - 1) / chunk <= UINT32_MAX &&
            (!j->f->chunks || chunk == j->f->chunk_size)) {
            /* with chunk digests the ranges must be the chunks, so that each one can be checked */
            uint32_t nchunks = (uint32_t)((size + chunk - 1) / chunk);
            unsigned char *st2 = calloc(nchunks, 1);
            if (st2) {
                rc = hfs3_fetch_parse_done(text, n, size, chunk, nchunks, st2);
                if (rc > 0) {
                    free(j->state);
                    j->state = st2;
                    j->chunk = chunk;
                    j->nchunks = nchunks;
                } else {
                    free(st2);
                }
            }
        }
    }
    free(text);
    if (rc > 0)
        return rc;
    /* nothing to reuse: throw the dead fetch away */
    close(j->fd);
    j->fd = -1;
    if (j->done_fd >= 0)
        close(j->done_fd);
    j->done_fd = -1;
    unlinkat(j->c->tmp, j->part, 0);
    unlinkat(j->c->tmp, j->done, 0);
    return 0;
}

/* A new temp file and sidecar: tmp/<sha>.<random>.part (0600, O_EXCL) and the .done beside it. */
static int create_temp(fetch_job *j, int sidecar)
{
    j->fd = hfs3_cache_mktemp(j->c->tmp, j->f->sha256, ".part", j->part, sizeof j->part, j->c->p_tmp);
    if (j->fd < 0)
        return j->fd;
    j->fresh = 1;
    char stem[200];
    temp_stem(j->part, stem, sizeof stem);
    snprintf(j->done, sizeof j->done, "%s.done", stem);
    if (!sidecar)
        return 0;
    j->done_fd = openat(j->c->tmp, j->done, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (j->done_fd >= 0) {
        char hdr[96];
        hfs3_fetch_done_header(j->f->size, j->chunk, hdr, sizeof hdr);
        if (write(j->done_fd, hdr, strlen(hdr)) != (ssize_t)strlen(hdr)) {
            close(j->done_fd);
            j->done_fd = -1;
            unlinkat(j->c->tmp, j->done, 0);
        }
    }
    return 0;
}

/* Where a blob lives: blobs/ (verified by its whole-file sha256, shared by every manifest), or a mount's
 * cblobs/ (verified by the chunk digests of that mount's manifest alone: only that mount reads it). rec: its
 * name in unflushed/ (durable.h). */
typedef struct blob_at {
    int dir;
    const char *dpath;
    const char *rec;
    int chunked;
} blob_at;

static void at_shared(const hfs3_cache *c, const hfs3_fetch_file *f, blob_at *a)
{
    a->dir = c->blobs;
    a->dpath = c->p_blobs;
    a->rec = f->sha256;
    a->chunked = 0;
}

/* Installs the verified temp file tmp/part (open as fd) as blobs/<sha>: its final mode through fd, then
 * renameat between the checked descriptors, never over an existing blob; the name renamed must still be the
 * file that was hashed, before and after. Durability (durable.h): sync flushes the file first; otherwise it is
 * recorded in unflushed/ (durably) before the rename, and flushed later; when the record cannot be written the
 * file is flushed now. *unflushed (may be NULL) is set when the blob was installed recorded, not flushed.
 * 0, 1 (a blob was there already: part is removed, the caller checks that blob), or an error. */
static int install_blob(const hfs3_cache *c, const blob_at *at, int fd, const char *part, const char *sha, int sync,
                        int *unflushed)
{
    struct stat a, b;
    /* the size verified, for the flush: it promotes no larger file under this record (durable.h) */
    uint64_t size = fstat(fd, &a) == 0 ? (uint64_t)a.st_size : UINT64_MAX;
    if (!sync && hfs3_unflushed_mark(c, at->rec, size) < 0) {
        hfs3_debug("%s; flushing %s before its install instead", hfs3_errmsg(), sha);
        sync = 1;
    }
    /* what it was verified as, on the inode (include/hfs3/serve.h), while it is still this user's 0600 temp file:
     * hashed whole, the name anywhere; checked by a mount's chunk digests, that mount's cblobs/ name only. With
     * this boot's id until it is flushed (durable.h): a crash may tear it, whoever removes its record */
    int st = hfs3_stamp_set(fd, at->chunked ? at->rec : sha, sync);
    if (st < 0 && st != -ENOTSUP)
        return hfs3_err(st, "%s/%s: cannot stamp it as verified (%s)", c->p_tmp, part, strerror(-st));
    if (fchmod(fd, c->blob_mode) < 0 || (sync && fsync(fd) < 0) || fstat(fd, &a) < 0)
        return hfs3_err(-errno, "%s/%s: %s", c->p_tmp, part, strerror(errno));
    if (unflushed)
        *unflushed = !sync;
    if (fstatat(c->tmp, part, &b, AT_SYMLINK_NOFOLLOW) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return hfs3_err(-EIO, "cache: %s/%s is no longer the file that was verified; refusing to install it",
                        c->p_tmp, part);
    int r = renameat2(c->tmp, part, at->dir, sha, RENAME_NOREPLACE);
    if (r < 0 && (errno == EINVAL || errno == ENOSYS))
        r = renameat(c->tmp, part, at->dir, sha); /* a file system without RENAME_NOREPLACE */
    if (r < 0 && errno == EEXIST) {
        unlinkat(c->tmp, part, 0);
        return 1;
    }
    if (r < 0)
        return hfs3_err(-errno, "rename %s/%s to %s/%s: %s", c->p_tmp, part, at->dpath, sha, strerror(errno));
    if (fstatat(at->dir, sha, &b, AT_SYMLINK_NOFOLLOW) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return hfs3_err(-EIO, "cache: %s/%s was replaced right after it was installed; refusing", at->dpath, sha);
    if (sync)
        (void)fsync(at->dir);
    return 0;
}

/* A member's entry at at->dir/name, a directory of this user's own: removed (a file), or renamed to a fresh
 * .aside.<name>.<random> (a directory, which only its owner may empty), never opened or followed. 0 or -errno. */
static int move_aside(const blob_at *at, const char *name, unsigned uid)
{
    if (unlinkat(at->dir, name, 0) == 0) {
        hfs3_warn("cache: %s/%s was uid %u's, in a directory of your own: removed (HFS3_VERIFY_FOREIGN=1 serves only "
                  "your own copy)", at->dpath, name, uid);
        return 0;
    }
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    unsigned long long r;
    char aside[128];
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        return -EAGAIN;
    snprintf(aside, sizeof aside, ".aside.%.64s.%016llx", name, r);
    if (renameat2(at->dir, name, at->dir, aside, RENAME_NOREPLACE) < 0)
        return -errno;
    hfs3_warn("cache: %s/%s was uid %u's directory, in a directory of your own: moved aside to %s (HFS3_VERIFY_FOREIGN=1 "
              "serves only your own copy)", at->dpath, name, uid, aside);
    return 0;
}

/* serve.h's rule for the file st found as at->dir/<sha>: NULL when it may be served to this user as it is. */
static const char *serve_refusal(const hfs3_cache *c, const blob_at *at, const struct stat *st, uint64_t size)
{
    struct stat dst;
    if (fstat(at->dir, &dst) < 0)
        return "its directory cannot be checked";
    const char *why = hfs3_serve_dir_refusal(&dst, c->uid);
    return why ? why : hfs3_serve_refusal(st, c->uid, size);
}

/* serve.h's stamp rule for the file open as fd at at->dir/<sha>: NULL when it was verified as that name (from
 * cblobs/, by that mount's chunk digests also), and is on disk or in this boot's page cache; else why, with
 * hfs3_stamp_check's answer in *state. */
static const char *stamp_refusal(const hfs3_cache *c, const blob_at *at, int fd, const char *sha, uid_t owner,
                                 int *state)
{
    struct stat dst;
    char boot[37];
    *state = HFS3_STAMP_OTHER;
    if (fstat(at->dir, &dst) < 0)
        return "its directory cannot be checked";
    const char *key = at->rec[64] == '.' ? at->rec + 66 : NULL;
    const char *why = hfs3_stamp_refusal(fd, &dst, sha, key, hfs3_boot_id(boot) == 0 ? boot : NULL, state);
    /* installed under another boot: on disk unless its record says otherwise, where nobody but its owner or root
     * can have removed that record (the record's check below, hfs3_unflushed_state, decides then) */
    if (why && *state == HFS3_STAMP_BOOT && hfs3_unflushed_trusted(c, owner))
        why = NULL;
    return why;
}

/* Copies size bytes of src into the new, empty dst: a reflink where the file system shares extents (no disk
 * used until one side changes, and a change to the source then never reaches dst), else copy_file_range (in
 * the kernel; a reflink too on file systems that do it that way), else read and write. 0 or -errno. */
static int copy_bytes(int src, int dst, uint64_t size)
{
    if (ioctl(dst, FICLONE, src) == 0)
        return 0;
    uint64_t done = 0;
    loff_t in = 0, out = 0;
    while (done < size) {
        ssize_t k = copy_file_range(src, &in, dst, &out, (size_t)(size - done < (1u << 30) ? size - done : 1u << 30), 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        done += (uint64_t)k;
    }
    char *buf = done < size ? malloc(HASH_BUF) : NULL;
    if (done < size && !buf)
        return -ENOMEM;
    while (done < size) {
        ssize_t k = pread(src, buf, HASH_BUF, (off_t)done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : ENODATA;
            free(buf);
            return -e;
        }
        int w = lseek(dst, (off_t)done, SEEK_SET) < 0 ? -errno : hfs3_write_all(dst, buf, (size_t)k);
        if (w < 0) {
            free(buf);
            return w;
        }
        done += (uint64_t)k;
    }
    free(buf);
    return 0;
}

static int blob_check(const hfs3_cache *c, const hfs3_fetch_file *f, int locked, const blob_at *at);

/* blob_check's error for the member's plant it answered 3 for (this thread's last) */
static _Thread_local int plant_rc;

/* HFS3_VERIFY_FOREIGN=1 and src/<sha> is there but not this user's to serve (blob_check said 2: a member's
 * blob, one in a member's directory): this user's own copy of it goes to mounts/<f->own>/cblobs/<sha>, which
 * the shim serves. The bytes are copied into a new temp file of this user's (0600: nobody else can change it),
 * and that copy is hashed, so what is installed is what matched, whatever the source's owner does to it during
 * or after the copy. Installed as a chunk-checked blob is (recorded in unflushed/; the flush promotes it into
 * blobs/ only when that name is free or taken by a file this user may serve: durable.c). A file already at the
 * copy's name is not this user's to serve (blob_check asked first): in a directory of its own, removed.
 * Under the blob's lock. 1 (installed: the caller answers as for a cached blob), or an error with a message. */
static int own_copy(const hfs3_cache *c, const hfs3_fetch_file *f, const blob_at *src, hfs3_fetch_result *res)
{
    struct stat st, pst;
    if (!f->own)
        return hfs3_err(-EPERM, "cache: %s/%s is not yours to serve, HFS3_VERIFY_FOREIGN=1 serves only copies of "
                        "your own, and there is no mount to keep one in", src->dpath, f->sha256);
    /* the copy passes through tmp/, which a member may own (it made it first) and so rename the copy anywhere: it
     * is this user's 0600 file until it is hashed, then stamped as this sha256 (issue 44), so under another name
     * or half-written it is never served; issue 44 item 7: a member's tmp/ no longer denies every copy */
    char rec[96], tname[128], hex[65];
    char *opath = NULL;
    snprintf(rec, sizeof rec, "%s.m%s", f->sha256, f->own);
    int odir = hfs3_fetch_cblobs(c, f->own, &opath);
    if (odir < 0)
        return odir;
    blob_at own = {odir, opath, rec, 1};
    int rc = blob_check(c, f, 1, &own);   /* this user's own copy is there already (src may be this very dir) */
    if (rc != 0) {
        if (rc == 2) /* a member's file under the name in this user's own directory: removed below */
            rc = 0;
        else
            goto out;
    }
    int sfd = hfs3_cache_openat(c, src->dir, f->sha256, O_RDONLY, &st, src->dpath);
    if (sfd < 0) {
        rc = sfd;
        goto out;
    }
    int tfd = hfs3_cache_mktemp(c->tmp, f->sha256, ".copy", tname, sizeof tname, c->p_tmp);
    if (tfd < 0) {
        close(sfd);
        rc = tfd;
        goto out;
    }
    rc = copy_bytes(sfd, tfd, f->size);
    close(sfd);
    if (rc < 0)
        rc = hfs3_err(rc, "copying %s/%s: %s", src->dpath, f->sha256, strerror(-rc));
    else if ((rc = hfs3_sha256_fd(tfd, hex, NULL)) < 0)
        rc = hfs3_err(rc, "reading %s/%s: %s", c->p_tmp, tname, strerror(-rc));
    else if (strcmp(hex, f->sha256) != 0)
        rc = hfs3_err(-EBADMSG, "cache: %s/%s, written by uid %u, does not match its sha256 (it hashes to %s); "
                      "refusing it (HFS3_VERIFY_FOREIGN=1; ask uid %u or root to remove it)", src->dpath,
                      f->sha256, (unsigned)st.st_uid, hex, (unsigned)st.st_uid);
    else if (fstatat(odir, f->sha256, &pst, AT_SYMLINK_NOFOLLOW) == 0 && unlinkat(odir, f->sha256, 0) < 0)
        rc = hfs3_err(-errno, "cache: %s/%s is another user's and cannot be removed (%s); refusing (ask its owner "
                      "or root to remove it)", opath, f->sha256, strerror(errno));
    else if ((rc = install_blob(c, &(blob_at){odir, opath, rec, 0}, tfd, tname, f->sha256, hfs3_durable_sync(),
                                &res->unflushed)) == 1) /* (hashed whole: stamped as the sha256) */
        rc = hfs3_err(-EEXIST, "cache: %s/%s appeared while this user's copy was made; refusing it", opath,
                      f->sha256);
    if (rc < 0)
        unlinkat(c->tmp, tname, 0);
    close(tfd);
    if (rc == 0) {
        hfs3_info("%s/%s is uid %u's: HFS3_VERIFY_FOREIGN=1 made your own copy, %s/%s", src->dpath, f->sha256,
                  (unsigned)st.st_uid, opath, f->sha256);
        rc = 1;
    }
out:
    close(odir);
    free(opath);
    return rc;
}

/* Whether blobs/<sha> is there and may be served: 1 yes, 0 no (absent, or a bad one of this user's that was
 * removed), 2 (HFS3_VERIFY_FOREIGN=1) there but not this user's to serve as it is (serve.h's rule: another
 * user's, or in a directory another user owns): the caller serves its own copy of it (own_copy), or the error
 * that refuses it: not a regular file or of an owner the rules refuse, more than one
 * link, a size other than the manifest's, or (HFS3_VERIFY_FOREIGN=1) another user's blob whose content does
 * not match; 3 (HFS3_VERIFY_FOREIGN=1) a member's bad one, which is not this user's to remove: absent for it (the
 * error's code in plant_rc, its line set). A blob recorded unflushed under another boot (durable.h: a crash may have torn it) is hashed
 * again before it is served, under its lock (locked; without the lock it counts as absent, 0, and the caller
 * comes back with the lock): flushed and its record removed when it matches, removed and fetched again
 * otherwise. */
static int blob_check(const hfs3_cache *c, const hfs3_fetch_file *f, int locked, const blob_at *at)
{
    struct stat st;
    const char *why = NULL;
    int stamp = HFS3_STAMP_OK, again = 0;
    int fd = hfs3_cache_openat(c, at->dir, f->sha256, O_RDONLY, &st, at->dpath);
    if (fd == -ENOENT)
        return 0;
    int rc = 1;
    if (fd < 0) {
        rc = fd;
        if (fstatat(at->dir, f->sha256, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return rc;
    } else if (st.st_nlink != 1) {
        /* a blob has no other name: a hard link planted here could be any file of this user's */
        rc = hfs3_err(-EPERM, "cache: %s/%s of uid %u has %lu %s (a hard link to a file elsewhere?); refusing "
                      "it (ask uid %u or root to remove it)", at->dpath, f->sha256, (unsigned)st.st_uid,
                      (unsigned long)st.st_nlink, hfs3_plural(st.st_nlink, "link", "links"), (unsigned)st.st_uid);
    } else if ((uint64_t)st.st_size != f->size) {
        rc = hfs3_err(-EBADMSG, "cache: %s/%s of uid %u has %lld %s, the manifest says %" PRIu64 "; refusing it "
                      "(ask uid %u or root to remove it)", at->dpath, f->sha256, (unsigned)st.st_uid,
                      (long long)st.st_size, hfs3_plural((unsigned long long)st.st_size, "byte", "bytes"), f->size,
                      (unsigned)st.st_uid);
    } else if (c->verify_foreign && (why = serve_refusal(c, at, &st, f->size)) != NULL) {
        /* HFS3_VERIFY_FOREIGN=1: not servable as it is (include/hfs3/serve.h). This user's own file in a
         * directory of its own or root's is bad (a write bit): removed below and fetched again; any other is not
         * ours to remove or to trust, and the caller makes this user's own copy of it (own_copy) */
        struct stat dst;
        int in_own_dir = fstat(at->dir, &dst) == 0 && !hfs3_serve_dir_refusal(&dst, c->uid);
        if (st.st_uid == c->uid && in_own_dir && !locked) {
            close(fd);   /* (a flush of the user's stamps it: the owner's write bit for a moment, under the lock) */
            return 0;
        }
        if (st.st_uid == c->uid && in_own_dir)
            rc = hfs3_err(-EPERM, "cache: %s/%s: %s; refusing it (HFS3_VERIFY_FOREIGN=1)", at->dpath, f->sha256, why);
        else
            rc = 2;
    } else if (c->verify_foreign && (why = stamp_refusal(c, at, fd, f->sha256, st.st_uid, &stamp)) != NULL) {
        /* not stamped as verified as this name (serve.h; issue 44: the owner of a directory it passed through
         * can rename a verified file under another name of the same size). This user's own file in a directory
         * of its own or root's is hashed again below, under the lock, and stamped (a cache of an older version)
         * or removed (another file's bytes); any other is copied (own_copy hashes the copy and stamps it). A
         * file system without user extended attributes has no stamp to give: refused, one line */
        struct stat dst;
        if (stamp == HFS3_STAMP_UNSUP) {
            close(fd);
            return hfs3_err(-ENOTSUP, "cache: %s/%s: %s; HFS3_VERIFY_FOREIGN=1 serves nothing from it: use a "
                            "private cache (mode 0700) on this file system, or one that has user extended "
                            "attributes (ext4, XFS, btrfs, tmpfs)", at->dpath, f->sha256, why);
        }
        again = st.st_uid == c->uid && fstat(at->dir, &dst) == 0 && !hfs3_serve_dir_refusal(&dst, c->uid);
        if (!again)
            rc = 2;
    }
    if (rc == 1 && (again || hfs3_unflushed_state(c, at->rec, st.st_uid) == 2)) {
        if (!locked) {
            close(fd);
            return 0;
        }
        if (again)
            hfs3_info("%s/%s: %s", at->dpath, f->sha256, why);
        else
            hfs3_info("%s/%s was installed under another boot and not known to be on disk; verifying it again",
                      at->dpath, f->sha256);
        char hex[65];
        uint32_t bad = 0;
        /* (a file verified again for its stamp is hashed whole: then it is stamped as the sha256) */
        int bychunk = at->chunked && !again;
        int v = bychunk ? hfs3_fetch_check_chunks(fd, f->size, f->chunk_size, f->chunks, &bad)
                        : hfs3_sha256_fd(fd, hex, NULL);
        if (v == 0 && bychunk && bad)
            v = hfs3_err(-EBADMSG, "cache: %s/%s, installed under another boot and not flushed, has %u chunk%s "
                         "not matching the manifest's digests (torn by a crash?); refusing it", at->dpath, f->sha256,
                         bad, bad == 1 ? "" : "s");
        else if (v == 0 && !bychunk && strcmp(hex, f->sha256) != 0)
            v = again ? hfs3_err(-EBADMSG, "cache: %s/%s (%s) hashes to %s; refusing it", at->dpath, f->sha256,
                                 why, hex)
                      : hfs3_err(-EBADMSG, "cache: %s/%s, installed under another boot and not flushed, hashes to %s "
                         "(torn by a crash?); refusing it", at->dpath, f->sha256, hex);
        else if (v < 0)
            v = hfs3_err(v, "reading %s/%s: %s", at->dpath, f->sha256, strerror(-v));
        else if ((v = hfs3_unflushed_settle(c, at->dir, at->rec, fd)) < 0)
            v = hfs3_err(v, "flushing %s/%s: %s", at->dpath, f->sha256, strerror(-v));
        /* verified as this name again, and on disk: stamped so (a file of this user's; root's cannot be) */
        else if (st.st_uid == c->uid && (v = hfs3_stamp_set(fd, bychunk ? at->rec : f->sha256, 1)) < 0)
            v = v == -ENOTSUP ? 0 : hfs3_err(v, "%s/%s: cannot stamp it as verified (%s)", at->dpath, f->sha256,
                                             strerror(-v));
        if (v < 0)
            rc = v;
    }
    if (fd >= 0)
        close(fd);
    /* a bad entry of this user's own is ours to remove and fetch again; another user's stays refused */
    if (rc < 0 && st.st_uid == c->uid && unlinkat(at->dir, f->sha256, 0) == 0) {
        hfs3_warn("%s; removed it, fetching it again", hfs3_errmsg());
        /* an old boot's record of it has nothing left to flush, and the flush leaves such records to a helper
         * that can check them: gone with the blob (under the lock no install can be writing a new one) */
        if (locked && hfs3_unflushed_state(c, at->rec, st.st_uid) == 2)
            (void)unlinkat(c->unflushed, at->rec, 0);
        return 0;
    }
    /* HFS3_VERIFY_FOREIGN=1 and a member's bad entry (a directory, 0 bytes, a second link...): never served, and
     * it must not lock this user out for as long as it stays. In a directory of this user's own (sticky: only its
     * owner may move what others put there) it is moved out of the way; elsewhere (blobs/) it counts as absent,
     * 3: online the caller fetches this user's own copy into its cblobs/, offline it answers this error */
    if (rc < 0 && c->verify_foreign && st.st_uid != c->uid && st.st_uid != 0) {
        struct stat dst;
        if (fstat(at->dir, &dst) == 0 && dst.st_uid == c->uid && move_aside(at, f->sha256, st.st_uid) == 0)
            return 0;
        plant_rc = rc;
        return 3;
    }
    return rc;
}

/* The whole file did not match: which chunks do not match their digests (read back from the .part)? Each is
 * marked to fetch again, with one warning. The count, 0 when every chunk matches (then the digests and the
 * sha256 disagree: the whole file is fetched again), or -ENOMEM. */
static int recheck_chunks(fetch_job *j)
{
    char *buf = malloc(HASH_BUF);
    if (!buf)
        return hfs3_err(-ENOMEM, "out of memory");
    int bad = 0;
    char got[65];
    for (uint32_t i = 0; i < j->nchunks; i++) {
        if (chunk_ok_on_disk(j, i, buf, got))
            continue;
        uint64_t off = (uint64_t)i * j->chunk, end = range_end(j, i);
        hfs3_warn("%s: %s: chunk %u (bytes %" PRIu64 "-%" PRIu64 ") sha256 mismatch: expected %.64s got %s; "
                  "fetching that chunk again (try 2 of %d)", j->r->spec, j->f->path, i, off, end - 1,
                  j->f->chunks + (size_t)i * 64, got, HFS3_FETCH_CHUNK_TRIES);
        j->state[i] = CH_TODO;
        j->ndone--;
        j->refetched++;
        bad++;
    }
    free(buf);
    return bad;
}

/* Starts n workers (fewer when threads run short: those finish the file). None at all (a host at its thread
 * limit: ulimit -u, a container's pids.max; or the previous file's workers, still finishing, hold every thread
 * the user may have): the calling thread downloads the file itself, as its one worker (more join it when the
 * tuner asks and threads can be made by then). A file never fails, nor waits a guessed time, for want of a
 * thread: issue 41 item 7, where a wait of about two seconds was too short on a loaded machine. */
static int start_workers(fetch_job *j, int n)
{
    pthread_mutex_lock(&j->mu);
    j->closed = 0;
    if (n > j->cap)
        n = j->cap;
    j->limit = n;
    int e = grow_locked(j, n);
    int none = n > 0 && j->nstarted == 0;
    if (none)
        j->active++; /* this thread, as worker() expects of one started for it */
    pthread_mutex_unlock(&j->mu);
    if (none) {
        hfs3_debug("%s: no thread for its download (pthread_create: %s); downloading it on this one", j->f->path,
                   strerror(e ? e : EAGAIN));
        (void)worker(j);
    }
    return 0;
}

/* Waits for every worker; none starts another meanwhile. */
static void join_workers(fetch_job *j)
{
    pthread_mutex_lock(&j->mu);
    j->closed = 1;
    int n = j->nstarted;
    pthread_mutex_unlock(&j->mu);
    conn_wake(); /* its workers that still wait for a connection leave */
    for (int t = 0; t < n; t++)
        pthread_join(j->tids[t], NULL);
    j->nstarted = j->active = 0;
}

/* One attempt under the lock. allow_resume: use a dead fetch's temp file. *resumed_out: chunks reused. */
static int fetch_attempt(fetch_job *j, int allow_resume, int nthreads, hfs3_fetch_result *res, int *resumed_out)
{
    int rc = 0;
    int resumed = 0;
    j->state = calloc(j->nchunks ? j->nchunks : 1, 1);
    if (!j->state)
        return hfs3_err(-ENOMEM, "out of memory");
    if (allow_resume)
        resumed = load_resume(j);
    if (resumed) {
        for (uint32_t i = 0; i < j->nchunks; i++)
            j->state[i] = j->state[i] ? CH_DONE : CH_TODO;
        hfs3_info("%s: resuming %d of %u %s from a killed fetch", j->f->path, resumed, j->nchunks,
                  hfs3_plural(j->nchunks, "range", "ranges"));
    }
    *resumed_out = resumed;
    if (!resumed && (rc = create_temp(j, j->nchunks > 1)) < 0)
        goto out;
    if (resumed && has_digests(j)) {
        /* a .part is not trusted until the end: every reused chunk is checked against its digest now */
        char *buf = malloc(HASH_BUF);
        int bad = 0;
        for (uint32_t i = 0; buf && i < j->nchunks; i++)
            if (j->state[i] == CH_DONE && !chunk_ok_on_disk(j, i, buf, NULL)) {
                j->state[i] = CH_TODO;
                bad++;
            }
        if (!buf) {
            for (uint32_t i = 0; i < j->nchunks; i++)
                j->state[i] = CH_TODO;
            bad = resumed;
        }
        free(buf);
        if (bad) {
            hfs3_warn("%s: %s: %d of %d %s kept from a killed fetch %s; fetching %s again", j->r->spec,
                      j->f->path, bad, resumed, hfs3_plural((unsigned long long)resumed, "chunk", "chunks"),
                      bad == 1 ? "does not match its sha256" : "do not match their sha256", bad == 1 ? "it" : "them");
            resumed -= bad;
            *resumed_out = resumed;
            j->refetched += bad;
        }
    }
    if (!resumed) {
        int e = posix_fallocate(j->fd, 0, (off_t)j->f->size);
        if (e == EOPNOTSUPP || e == EINVAL)
            e = ftruncate(j->fd, (off_t)j->f->size) < 0 ? errno : 0;
        if (e) {
            rc = hfs3_err(-e, "%s/tmp: cannot reserve %" PRIu64 " %s: %s", j->c->dir, j->f->size,
                          hfs3_plural(j->f->size, "byte", "bytes"), strerror(e));
            goto out;
        }
    }
    if (resumed && j->o->progress) {
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < j->nchunks; i++)
            if (j->state[i] == CH_DONE)
                bytes += range_end(j, i) - (uint64_t)i * j->chunk;
        j->o->progress(j->o->progress_ud, bytes);
        res->bytes_resumed += bytes;
    }
    j->ndone = 0;
    for (uint32_t i = 0; i < j->nchunks; i++)
        j->ndone += j->state[i] == CH_DONE;
    int todo = (int)j->nchunks - resumed;
    j->cap = HFS3_FETCH_MAX_CONNECTIONS;
    if (j->tuned)
        nthreads = tune_now();
    if (nthreads > todo)
        nthreads = todo;
    if (j->direct)
        j->instream = 1;
    if ((rc = start_workers(j, nthreads)) < 0)
        goto out;
    if (j->direct) {
        /* every chunk was checked against its digest as it arrived: nothing is read back */
        rc = wait_all(j);
        join_workers(j);
        if (rc) {
            hfs3_err(rc, "%s", j->errmsg);
            goto out;
        }
        blob_at mine = {j->cdir, j->cpath, j->rec, 1};
        rc = install_blob(j->c, &mine, j->fd, j->part, j->f->sha256, j->sync, &res->unflushed);
        if (rc == 1)
            rc = blob_check(j->c, j->f, 1, &mine) == 1 ? 0 : hfs3_err_wrap(-EEXIST, "another blob took its place");
        goto out;
    }
    char hex[65];
    /* The common path hashes each byte once: the whole file, in order, as ranges complete. Chunk digests are
     * read only when it does not match (or on resume): then the damaged chunks alone are fetched again, each
     * checked as it arrives, and the whole file hashed again. */
    for (;;) {
        rc = hash_in_order(j, hex);
        join_workers(j);
        if (rc) {
            hfs3_err(rc, "%s", j->errmsg);
            goto out;
        }
        if (!strcmp(hex, j->f->sha256) || !has_digests(j) || j->instream)
            break;
        int bad = recheck_chunks(j);
        if (bad < 0) {
            rc = bad;
            goto out;
        }
        if (bad == 0)
            break;
        j->instream = j->rechecked = 1;
        j->next = 0;
        /* nthreads is 0 when a killed fetch had left every range (none to download then): the damaged ones
         * still need a worker, or the hash would wait for them forever */
        if (nthreads < 1)
            nthreads = 1;
        if ((rc = start_workers(j, bad < nthreads ? bad : nthreads)) < 0)
            goto out;
    }
    if (strcmp(hex, j->f->sha256) != 0) {
        memcpy(j->got, hex, sizeof j->got);
        rc = hfs3_err(-EBADMSG, "sha256 mismatch for %s: expected %s got %s", j->f->path, j->f->sha256, hex);
        goto out;
    }
    blob_at shared;
    at_shared(j->c, j->f, &shared);
    if (j->into_own)   /* blobs/<sha> is a member's bad plant: this user's own copy, hashed whole */
        shared = (blob_at){j->cdir, j->cpath, j->rec, 0};
    rc = install_blob(j->c, &shared, j->fd, j->part, j->f->sha256, j->sync, &res->unflushed);
    if (rc == 1)
        rc = blob_check(j->c, j->f, 1, &shared) == 1 ? 0 : hfs3_err_wrap(-EEXIST, "another blob took its place");
out:
    join_workers(j);
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
    if (j->done_fd >= 0)
        close(j->done_fd);
    j->done_fd = -1;
    free(j->state);
    j->state = NULL;
    res->bytes_fetched += j->fetched;
    j->fetched = 0;
    j->err = 0;
    j->next = 0;
    j->instream = j->rechecked = j->fresh = 0;
    /* both are this fetch's own (created O_EXCL, or checked as the user's own): nobody else can rename
     * them in tmp/ (private, or sticky) */
    if (rc < 0 && j->part[0])
        unlinkat(j->c->tmp, j->part, 0);
    if (j->done[0])
        unlinkat(j->c->tmp, j->done, 0);
    j->part[0] = j->done[0] = 0;
    return rc;
}

static int fetch_empty(const hfs3_cache *c, const hfs3_fetch_file *f)
{
    char hex[65], part[160];
    hfs3_sha256_hexof("", 0, hex);
    if (strcmp(hex, f->sha256) != 0)
        return hfs3_err(-EBADMSG, "sha256 mismatch for %s: expected %s got %s (the manifest says 0 bytes)", f->path,
                        f->sha256, hex);
    int fd = hfs3_cache_mktemp(c->tmp, f->sha256, ".part", part, sizeof part, c->p_tmp);
    if (fd < 0)
        return fd;
    /* nothing to flush in an empty file: lost in a crash, it is just missing */
    blob_at shared;
    at_shared(c, f, &shared);
    int rc = install_blob(c, &shared, fd, part, f->sha256, 1, NULL);
    close(fd);
    if (rc == 1)
        rc = blob_check(c, f, 1, &shared) == 1 ? 0 : hfs3_err_wrap(-EEXIST, "another blob took its place");
    else if (rc < 0)
        unlinkat(c->tmp, part, 0);
    return rc;
}

/* blob_check of blobs/<sha>, then of the mount's cblobs/<sha> (at2, may be NULL): 1 when one may be served, 0
 * when none is there, or an error. One that is there but not this user's to serve (HFS3_VERIFY_FOREIGN=1) is
 * copied (own_copy) under the lock; without it (locked 0) it counts as absent: the caller takes the lock and
 * asks again. */
static int blobs_check(const hfs3_cache *c, const hfs3_fetch_file *f, int locked, const blob_at *shared,
                       const blob_at *at2, hfs3_fetch_result *res, char *plant, size_t pn, int *prc)
{
    int rc = blob_check(c, f, locked, shared), r2 = 0;
    if (rc == 3) {   /* a member's bad blob: absent for this user, whose own copy goes to cblobs/ */
        snprintf(plant, pn, "%s", hfs3_errmsg());
        *prc = plant_rc < 0 ? plant_rc : -EPERM;
        rc = 0;
    }
    if (rc == 1 || rc < 0 || (at2 && ((r2 = blob_check(c, f, locked, at2)) == 1 || r2 < 0 || r2 == 3)))
        return rc == 1 || rc < 0 ? rc : r2 == 3 ? -EPERM : r2;
    if (rc != 2 && r2 != 2)
        return 0;
    if (!locked)
        return 0;
    rc = own_copy(c, f, rc == 2 ? shared : at2, res);
    /* the member's blob is not what the manifest says: as absent as a bad one of theirs (online this user
     * downloads its own copy; offline the caller answers this line) */
    if (rc == -EBADMSG && f->own) {
        snprintf(plant, pn, "%s", hfs3_errmsg());
        *prc = rc;
        rc = 0;
    }
    return rc;
}

/* HFS3_VERIFY_FOREIGN=1 without chunk digests: the user's own mounts/<f->own>/cblobs into *mine (whole-file
 * checked: chunked 0), its record name into rec. 0, or -1 (logged at debug: the caller goes on without it). */
static int own_cblobs(const hfs3_cache *c, const hfs3_remote *r, const hfs3_fetch_file *f, blob_at *mine, char *rec,
                      size_t rn, char **cpath)
{
    snprintf(rec, rn, "%s.m%s", f->sha256, f->own);
    if ((mine->dir = hfs3_fetch_cblobs(c, f->own, cpath)) < 0) {
        hfs3_debug("%s: %s", r->spec, hfs3_errmsg());
        mine->dir = -1;
        return -1;
    }
    mine->dpath = *cpath;
    mine->chunked = 0;
    return 0;
}

int hfs3_fetch(const hfs3_cache *c, const hfs3_remote *r, const hfs3_fetch_file *f, const hfs3_fetch_opts *o,
               hfs3_fetch_result *res)
{
    static const hfs3_fetch_opts defaults = {.lock_fd = -1};
    hfs3_fetch_result dummy;
    if (!o)
        o = &defaults;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    if (!hfs3_is_sha256_hex(f->sha256))
        return hfs3_err(-EINVAL, "%s: %s: malformed sha256", r->spec, f->path);
    int rc, lock_fd = -1;
    char lockname[80], errname[80], rec[96];
    snprintf(lockname, sizeof lockname, "%s.lock", f->sha256);
    snprintf(errname, sizeof errname, "%s.err", f->sha256);
    int digests = f->chunks && f->chunk_size && strlen(f->chunks) == 64 * ((f->size + f->chunk_size - 1) /
                                                                           f->chunk_size);
    /* With chunk digests (and the default durability) the file is checked chunk by chunk as it arrives, on the
     * receiving threads, and never read back: it goes to the mount's cblobs/, which only this mount reads
     * (another manifest could lie about the chunks of the same sha256); the detached flush moves it into
     * blobs/ once its whole-file sha256 matched (durable.c). A blob already in blobs/ serves everyone. */
    blob_at shared, mine = {-1, NULL, rec, 1};
    at_shared(c, f, &shared);
    char *cpath = NULL;
    if (digests && f->size > 0 && f->mount && !hfs3_durable_sync()) {
        snprintf(rec, sizeof rec, "%s.m%s", f->sha256, f->mount);
        if ((mine.dir = hfs3_fetch_cblobs(c, f->mount, &cpath)) < 0) {
            hfs3_debug("%s: %s; verifying %s whole instead", r->spec, hfs3_errmsg(), f->path);
            mine.dir = -1;
        }
        mine.dpath = cpath;
    } else if (c->verify_foreign && f->own && f->size > 0) {
        /* this user's own copy of a blob a member holds, or planted bad, in blobs/: hashed whole, kept in the
         * user's own cblobs/ (own_copy, and the download below when blobs/<sha> is a member's bad plant); looked
         * at when that directory is there, made only when a plant needs it */
        char rel[40];
        struct stat cst;
        snprintf(rel, sizeof rel, "%s/cblobs", f->own);
        if (fstatat(c->mounts, rel, &cst, AT_SYMLINK_NOFOLLOW) == 0)
            own_cblobs(c, r, f, &mine, rec, sizeof rec, &cpath);
    }
    const blob_at *at2 = mine.dir >= 0 ? &mine : NULL;
    char plant[1100] = "";
    int prc = -EPERM;
    if ((rc = blobs_check(c, f, o->lock_fd >= 0, &shared, at2, res, plant, sizeof plant, &prc)) < 0)
        goto failed;
    if (plant[0] && !at2 && f->own && own_cblobs(c, r, f, &mine, rec, sizeof rec, &cpath) == 0)
        at2 = &mine;
    if (rc == 1) {
        rc = 0;
        res->cached = 1;
        goto out;
    }
    if (o->lock_fd < 0) {
        rc = hfs3_cache_lock(c, c->locks, lockname, c->p_locks, o->nonblock, &lock_fd, NULL);
        if (rc == -EWOULDBLOCK)
            goto out;
        if (rc < 0)
            goto failed;
        plant[0] = 0;
        if ((rc = blobs_check(c, f, 1, &shared, at2, res, plant, sizeof plant, &prc)) < 0)
            goto failed;
        if (rc == 1) {
            rc = 0;
            res->cached = 1;
            goto out;
        }
    }
    if (plant[0] && hfs3_env_bool("HFS3_OFFLINE", 0)) {
        rc = hfs3_err(prc, "%s", plant);   /* a member's bad blob, and no download to replace it */
        goto failed;
    }
    if (plant[0])
        hfs3_info("%s; HFS3_VERIFY_FOREIGN=1: downloading your own copy into %s", plant, cpath ? cpath : "cblobs/");
    if (hfs3_env_bool("HFS3_OFFLINE", 0) && f->size > 0) {
        rc = hfs3_err(-ENETDOWN, "HFS3_OFFLINE=1 and the file is not in the cache");
        goto failed;
    }
    /* HFS3_CACHE_MAX and free space: evict or fail before the first byte (lib/gc.c) */
    if (f->size > 0 && (rc = hfs3_gc_make_room(c, f->sha256, f->size)) < 0)
        goto failed;
    if (f->size == 0) {
        rc = fetch_empty(c, f);
    } else {
        fetch_job j = {.c = c, .r = r, .f = f, .o = o, .fd = -1, .done_fd = -1, .sync = hfs3_durable_sync(),
                       .direct = at2 != NULL && mine.chunked, .cdir = mine.dir, .cpath = cpath,
                       .into_own = plant[0] && at2 != NULL};
        snprintf(j.rec, sizeof j.rec, "%s", rec);
        int conns = o->connections > 0 ? o->connections : hfs3_fetch_connections();
        /* no count asked for: the tuner decides how many connections run; ranges as planned for the default */
        j.tuned = conns == 0;
        if (j.tuned)
            conns = HFS3_FETCH_DEFAULT_CONNECTIONS;
        int nthreads;
        if (f->chunks && !digests) {
            rc = hfs3_err(-EINVAL, "chunk digests do not match the size");
            goto failed;
        }
        /* with chunk digests every range is one chunk, so each can be checked and fetched again alone */
        hfs3_fetch_plan(f->size, conns, digests ? f->chunk_size : o->chunk_size, &j.chunk, &j.nchunks, &nthreads);
        pthread_mutex_init(&j.mu, NULL);
        pthread_mutex_init(&j.wmu, NULL);
        pthread_cond_init(&j.cv, NULL);
        int resumed = 0;
        uint64_t plan_chunk = j.chunk;
        uint32_t plan_n = j.nchunks;
        char last[65] = "";
        for (int t = 1;; t++) {
            j.chunk = plan_chunk;
            j.nchunks = plan_n;
            j.got[0] = 0;
            rc = fetch_attempt(&j, t == 1, nthreads, res, &resumed);
            if (rc != -EBADMSG || t >= HFS3_FETCH_TRIES)
                break;
            /* the same wrong content from a fresh download: the object is not what the manifest says; and a
             * chunk that failed all its own tries is not helped by fetching every other chunk again */
            if ((j.got[0] && !strcmp(j.got, last) && !resumed) || (!j.got[0] && !resumed))
                break;
            memcpy(last, j.got, sizeof last);
            /* bytes damaged on the way, or reused from another version of the object: from scratch, with
             * backoff; nothing reaches blobs/ before the whole-file sha256 matched */
            hfs3_warn("%s: %s: %s; fetching it again from the start (try %d of %d)", r->spec, f->path,
                      hfs3_errmsg(), t + 1, HFS3_FETCH_TRIES);
            res->refetched_files++;
            fetch_backoff(t, 5000);
        }
        res->refetched_chunks += j.refetched;
        pthread_cond_destroy(&j.cv);
        pthread_mutex_destroy(&j.mu);
        pthread_mutex_destroy(&j.wmu);
    }
    if (rc < 0)
        goto failed;
    unlinkat(c->fails, errname, 0); /* another user's in a sticky fails/: it stays, the blob is what counts */
    goto out;
failed:
    hfs3_err_wrap(rc, "%s: %s", r->spec, f->path);
    hfs3_cache_write_line(c, c->fails, errname, c->p_fails, hfs3_errmsg());
out:
    if (rc == 0)
        hfs3_gc_touch(c, f->sha256); /* last use, for the least-recently-used eviction */
    hfs3_cache_unlock(lock_fd);
    if (mine.dir >= 0)
        close(mine.dir);
    free(cpath);
    return rc;
}

int hfs3_fetch_cblobs(const hfs3_cache *c, const char *mountkey, char **path)
{
    *path = NULL;
    if (strlen(mountkey) != 16 || strspn(mountkey, "0123456789abcdef") != 16)
        return hfs3_err(-EINVAL, "malformed mount key \"%s\"", mountkey);
    char *mpath = hfs3_cache_path(c, "mounts", mountkey, NULL);
    if (!mpath)
        return hfs3_err(-ENOMEM, "out of memory");
    int mfd = hfs3_cache_opendir(c, c->mounts, mountkey, 0, 0, c->p_mounts);
    struct stat ms, cs = {0};
    /* HFS3_VERIFY_FOREIGN=1: a member may make cblobs/ (or a file, a symlink there) in the user's own sticky mount
     * directory before the user does; its owner moves that out of the way rather than be refused for good */
    if (mfd >= 0 && c->verify_foreign && fstat(mfd, &ms) == 0 && ms.st_uid == c->uid &&
        fstatat(mfd, "cblobs", &cs, AT_SYMLINK_NOFOLLOW) == 0 && cs.st_uid != c->uid && cs.st_uid != 0) {
        blob_at m = {mfd, mpath, NULL, 0};
        if (move_aside(&m, "cblobs", (unsigned)cs.st_uid) < 0)
            hfs3_debug("cache: %s/cblobs is uid %u's and cannot be moved aside: %s", mpath, (unsigned)cs.st_uid,
                       strerror(errno));
    }
    /* sticky like blobs/: a member of a shared cache cannot replace what another one verified */
    int fd = mfd < 0 ? mfd : hfs3_cache_opendir(c, mfd, "cblobs", c->dir_mode, 1, mpath);
    /* HFS3_VERIFY_FOREIGN=1: what is served from here must be where only this user (or root) can rename it
     * (include/hfs3/serve.h) */
    const char *why = NULL;
    if (fd >= 0 && c->verify_foreign &&
        (fstat(mfd, &ms) < 0 || fstat(fd, &cs) < 0 || (why = hfs3_serve_dir_refusal(&ms, c->uid)) ||
         (why = hfs3_serve_dir_refusal(&cs, c->uid)))) {
        close(fd);
        fd = hfs3_err(-EPERM, "cache: %s/cblobs (owner uid %u): %s, and HFS3_VERIFY_FOREIGN=1 serves your files only "
                      "from directories of yours or root's; refusing (ask uid %u or root to remove it)", mpath,
                      (unsigned)cs.st_uid, why ? why : strerror(errno), (unsigned)cs.st_uid);
    }
    if (mfd >= 0)
        close(mfd);
    free(mpath);
    if (fd >= 0 && !(*path = hfs3_cache_path(c, "mounts", mountkey, "/cblobs"))) {
        close(fd);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    return fd;
}

int hfs3_fetch_check_chunks(int fd, uint64_t size, uint64_t chunk_size, const char *chunks, uint32_t *bad)
{
    *bad = 0;
    if (!chunk_size || !chunks || strlen(chunks) != 64 * ((size + chunk_size - 1) / chunk_size))
        return -EINVAL;
    char *buf = malloc(HASH_BUF);
    hfs3_sha256_ctx *h = NULL;
    int rc = 0;
    if (!buf)
        return -ENOMEM;
    for (uint64_t off = 0, i = 0; off < size; off += chunk_size, i++) {
        uint64_t len = size - off < chunk_size ? size - off : chunk_size;
        if (!(h = hfs3_sha256_new())) {
            rc = -ENOMEM;
            break;
        }
        rc = hfs3_sha256_update_fd(h, fd, off, len, buf, HASH_BUF, NULL);
        unsigned char md[32];
        char hex[65];
        hfs3_sha256_final(h, md);
        hfs3_sha256_free(h);
        if (rc == -ENODATA) {
            (*bad)++;     /* shorter than the manifest's size: this chunk and the rest are wrong */
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        hfs3_hex(md, 32, hex);
        if (memcmp(hex, chunks + i * 64, 64) != 0)
            (*bad)++;
    }
    free(buf);
    return rc;
}
