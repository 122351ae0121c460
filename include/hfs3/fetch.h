/* fetch.h - the parallel verified fetcher: one manifest file entry into CACHE/blobs/<sha256>, with N
 * ranged GETs (If-Match the manifest's ETag) written into tmp/<sha256>.part, sha256 computed over the
 * contiguous completed prefix while later ranges still arrive, resume of a killed fetch from
 * tmp/<sha256>.done, and an atomic rename into blobs/ only after the hash matched. Memory is bounded by
 * a few buffers per connection, whatever the file size. Locking: locks/<sha256>.lock (docs/internals.md). */
#ifndef HFS3_FETCH_H
#define HFS3_FETCH_H

#include <stddef.h>
#include <stdint.h>
#include "hfs3/cache.h"
#include "hfs3/config.h"

#define HFS3_FETCH_DEFAULT_CONNECTIONS 8
#define HFS3_FETCH_MAX_CONNECTIONS 64
#define HFS3_FETCH_CHUNK (16u << 20)     /* the largest range one GET asks for */
#define HFS3_FETCH_MIN_CHUNK (2u << 20)  /* ranges are not split below this (and smaller files: one GET) */
#define HFS3_FETCH_TRIES 3               /* whole-file fetches when the sha256 does not match */
#define HFS3_FETCH_CHUNK_TRIES 12        /* fetches of one chunk whose digest does not match */

/* What to fetch: a file entry of a manifest with its object key. */
typedef struct hfs3_fetch_file {
    const char *path;    /* manifest path, for messages */
    const char *key;     /* object key */
    uint64_t size;
    const char *sha256;  /* 64 lowercase hex */
    const char *etag;    /* may be NULL: no If-Match */
    uint64_t chunk_size; /* the manifest's chunk_size when chunks is set (docs/manifest.md), else 0 */
    const char *chunks;  /* NULL, or the sha256 of every chunk_size slice: 64 lowercase hex each, concatenated */
    const char *mount;   /* NULL, or the mount key (16 hex, hfs3_mountkey) whose manifest this entry is from: with
                          * chunks, the file is checked chunk by chunk as it arrives into that mount's cblobs/ */
    const char *own;     /* NULL, or (HFS3_VERIFY_FOREIGN=1) the user's own mount key: a blob there that is not the
                          * user's to serve (include/hfs3/serve.h) is copied into its cblobs/ and served from there */
} hfs3_fetch_file;

/* Called with the number of bytes that just arrived (or were found done on resume); calls are
 * serialized but may come from any thread. */
typedef void (*hfs3_fetch_progress)(void *ud, uint64_t bytes);

typedef struct hfs3_fetch_opts {
    int connections;      /* 0: HFS3_CONNECTIONS, else HFS3_FETCH_DEFAULT_CONNECTIONS */
    uint64_t chunk_size;  /* 0: planned from the size (hfs3_fetch_plan) */
    int lock_fd;          /* >= 0: locks/<sha>.lock is already held through it; -1: lock here */
    int nonblock;         /* 1: -EWOULDBLOCK when another process holds the lock (it will finish) */
    hfs3_fetch_progress progress;
    void *progress_ud;
    /* Called (from a worker thread) once every range of the file has started, while its last ranges still
     * arrive and before it is hashed, synced and installed: a caller that fetches several files starts the
     * next download then (its workers take the connections the last ranges leave: the fetches of a process
     * together never have more requests in flight than a file's count). May be NULL. */
    void (*downloaded)(void *ud);
    void *downloaded_ud;
} hfs3_fetch_opts;

/* Results besides the return code. */
typedef struct hfs3_fetch_result {
    int cached;               /* 1: blobs/<sha> was already there */
    uint64_t bytes_fetched;   /* bytes downloaded by this call */
    uint64_t bytes_resumed;   /* bytes of a killed fetch reused from tmp/ */
    int refetched_chunks;     /* chunks fetched again because their digest did not match */
    int refetched_files;      /* whole-file fetches again because the sha256 did not match */
    int unflushed;            /* 1: installed before its flush (durable.h): the caller runs hfs3_flush_spawn */
} hfs3_fetch_result;

/* Fetches f into c's blobs/<f->sha256>. 0 when the blob exists at the end (res->cached says whether it
 * was already there). Healing: with chunk digests (f->chunks) every range is one chunk; when the whole file
 * does not match, the chunks that do not match their digests are fetched again alone, checked as they
 * arrive (HFS3_FETCH_CHUNK_TRIES in all, with backoff; each byte is hashed once on the common path), and
 * a killed fetch's ranges are checked chunk by chunk before they are reused; without them a file whose
 * sha256 does not match is fetched again from the start (HFS3_FETCH_TRIES in all, with backoff). Each
 * retry is a warning in the log. The whole-file sha256 is verified before the install either way. Errors: -EWOULDBLOCK (nonblock and busy: nothing written), otherwise a negative errno
 * with a one-line message naming the remote, the path and the cause (-ESTALE: the object changed since the
 * manifest was built; -EBADMSG: sha256 mismatch; -ENOSPC ...; -ENETDOWN: HFS3_OFFLINE=1 and not cached),
 * also written to fails/<sha>.err; nothing is left in tmp/ or blobs/. res and o may be NULL. */
int hfs3_fetch(const hfs3_cache *c, const hfs3_remote *r, const hfs3_fetch_file *f, const hfs3_fetch_opts *o,
               hfs3_fetch_result *res);

/* The range plan of a file: *chunk bytes per range (the last one shorter) and *nchunks ranges, and the
 * number of connections worth opening (<= conns, <= nchunks). A file no larger than HFS3_FETCH_MIN_CHUNK
 * (or size 0) is one range, fetched by one plain GET. chunk_hint 0: chunks of HFS3_FETCH_CHUNK, shrunk
 * (not below HFS3_FETCH_MIN_CHUNK, in whole MiB) so that every connection gets one. */
void hfs3_fetch_plan(uint64_t size, int conns, uint64_t chunk_hint, uint64_t *chunk, uint32_t *nchunks,
                     int *nthreads);

/* The tmp/<sha>.done sidecar. Its first line pins the plan ("hfs3-done 1 SIZE CHUNK\n"), then one
 * completed chunk number per line. Parses text (n bytes) into done[0..nchunks) (1 = complete):
 * returns the number of complete chunks, or -EINVAL when the header does not match size and chunk
 * (start over). A torn last line (no newline) and out-of-range numbers are ignored. */
int hfs3_fetch_parse_done(const char *text, size_t n, uint64_t size, uint64_t chunk, uint32_t nchunks,
                          unsigned char *done);
/* The header line for a plan, into out (at least 64 bytes). */
void hfs3_fetch_done_header(uint64_t size, uint64_t chunk, char *out, size_t outn);

/* Opens (creating) CACHE/mounts/<mountkey>/cblobs, the blobs verified by that mount's chunk digests alone:
 * sticky, checked. The descriptor, *path its malloc'd path; or -errno with a message (no such mount ...). */
int hfs3_fetch_cblobs(const hfs3_cache *c, const char *mountkey, char **path);

/* Checks the file open as fd, size bytes, against chunk digests (chunk_size slices, 64 lowercase hex each,
 * concatenated). 0 with *bad the number of chunks that do not match (a missing tail counts as not matching);
 * -EINVAL when the digests do not fit the size, -ENOMEM, or -errno of a failed read. */
int hfs3_fetch_check_chunks(int fd, uint64_t size, uint64_t chunk_size, const char *chunks, uint32_t *bad);

/* The connection count the environment asks for: HFS3_CONNECTIONS (1..HFS3_FETCH_MAX_CONNECTIONS), or 0 when
 * it is unset or "auto": then the connections per file follow the rate (hfs3_fetch_tune). */
int hfs3_fetch_connections(void);

/* Connections per file when none is asked for. Each connection costs the client CPU (its receive path, its
 * thread), which a fast link (a LAN server, loopback) does not need and a 2-core host cannot spare; against S3
 * each carries only a slice of a fast NIC. So the count starts low and doubles while the rate this process
 * receives grows by HFS3_FETCH_TUNE_GAIN per doubling; at the first doubling that does not, it settles on the
 * count before it (the cheaper one). A step is measured over at least HFS3_FETCH_TUNE_WINDOW_MS and
 * HFS3_FETCH_TUNE_BYTES per connection. One early measurement must not decide a long download (a 100 GB
 * _prefetch; a window that held the first TLS handshakes, or a moment the host was busy): a settled count tries
 * one doubling again every HFS3_FETCH_TUNE_REPROBE_MS, unless the server throttled (503 SlowDown): then the
 * count follows AIMD (hfs3_fetch_tune_throttled) for the rest of the process. */
#define HFS3_FETCH_TUNE_START 2
#define HFS3_FETCH_TUNE_GAIN 1.2
#define HFS3_FETCH_TUNE_WINDOW_MS 200
#define HFS3_FETCH_TUNE_BYTES (8u << 20)
#define HFS3_FETCH_TUNE_REPROBE_MS 10000
typedef struct hfs3_fetch_tune {
    int level;        /* connections per file now */
    int max;          /* the most it may reach */
    int settled;
    int prev_level;   /* the level before the last doubling, and the rate measured at it (0: none yet) */
    double prev_rate;
    double t0;        /* this level's window: its start (seconds) and the bytes received by then */
    uint64_t b0;
    int started;
    double settled_at; /* when it settled (seconds) */
    int refused;      /* throttled: settled, grown back by AIMD (hfs3_fetch_tune_throttled) */
    int peak;         /* the level when first throttled: AIMD grows back to it */
    double throttled_at, grown_at; /* the last halving, the last additive step (seconds) */
    double rate;      /* the rate of the last window closed (bytes/s; 0: none yet), at rate_level connections */
    int rate_level;
} hfs3_fetch_tune;

/* Starts a tuner at HFS3_FETCH_TUNE_START connections (at most max). */
void hfs3_fetch_tune_init(hfs3_fetch_tune *t, int max);

/* One look at the rate: bytes is every byte this process has received so far, now a monotonic clock in
 * seconds. Closes the level's window when it is long enough and moves to the next level or settles. Returns the
 * level to use from now on. Pure (no clock, no lock): the caller serializes calls. */
int hfs3_fetch_tune_step(hfs3_fetch_tune *t, uint64_t bytes, double now);

/* The server throttled a request (503 SlowDown, 429; as S3, nginx's limit_conn, MinIO's requests_max and RGW's
 * rgw_max_concurrent_requests answer one request too many): AIMD. The count halves (not below 1), at most once
 * per HFS3_FETCH_AIMD_HOLD_MS (the throttles of one burst are one signal), the tuner stops doubling, and the count
 * grows back by one per HFS3_FETCH_AIMD_GROW_MS without a throttle, up to the count it had when first throttled.
 * now: a monotonic clock in seconds. Returns the level to use from now on. Pure, as hfs3_fetch_tune_step. */
#define HFS3_FETCH_AIMD_HOLD_MS 1000
#define HFS3_FETCH_AIMD_GROW_MS 5000
int hfs3_fetch_tune_throttled(hfs3_fetch_tune *t, double now);

/* How many chunks one GET asks for (a range of span * chunk bytes), from the link and what is left of the file:
 * a request should last at least HFS3_FETCH_SPAN_SECS at the rate one connection gets (conn_rate bytes/s, 0:
 * not measured yet), so that its fixed cost (a round trip, one request of the server's rate limit) is small
 * beside its transfer; after throttling, at least floor bytes (doubling at each halving of the count, from
 * HFS3_FETCH_CHUNK up to HFS3_FETCH_SPAN_MAX); never more than HFS3_FETCH_SPAN_MAX bytes, and never so much
 * that the `left` chunks still to start no longer go round the `conns` connections. At least 1. Pure. */
#define HFS3_FETCH_SPAN_MAX (64u << 20)
#define HFS3_FETCH_SPAN_SECS 0.5
uint32_t hfs3_fetch_span(uint64_t chunk, uint32_t left, int conns, double conn_rate, uint64_t floor);

#endif
