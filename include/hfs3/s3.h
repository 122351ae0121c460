/* s3.h - a small S3 client on libcurl: GET (with Range, If-Match, If-None-Match), HEAD, ListObjectsV2
 * (all pages), PUT of a small object. Requests are signed with sigv4.c. One hfs3_s3 is one connection
 * (a CURL easy handle, kept alive and reused); use one per thread. Retries with exponential backoff
 * and jitter on connection errors, timeouts, 500, 502, 503 (SlowDown) and 504; a ranged GET that breaks
 * mid-body resumes from the last byte delivered. S3 XML error bodies become one line naming Code and
 * Message. Secrets never appear in messages. */
#ifndef HFS3_S3_H
#define HFS3_S3_H

#include <stddef.h>
#include <stdint.h>
#include "hfs3/config.h"
#include "hfs3/util.h"

typedef struct hfs3_s3 hfs3_s3;

typedef struct hfs3_s3_object {
    char *key;
    uint64_t size;
    char *etag;          /* as S3 returned it, quotes included: "\"abc\"" */
    long long mtime;     /* LastModified, seconds since the epoch (UTC) */
    double src_mtime;    /* HEAD only: the uploaded file's own mtime, rclone's X-Amz-Meta-Mtime; 0 unknown */
} hfs3_s3_object;

typedef struct hfs3_s3_list {
    hfs3_s3_object *v;
    size_t n, cap;
} hfs3_s3_list;

/* Tunables; zero fields take the defaults. */
typedef struct hfs3_s3_opts {
    long connect_timeout_ms;  /* default 10000 */
    long low_speed_time_s;    /* abort (and resume) a transfer slower than low_speed_limit bytes/s for this
                                 long; default HFS3_LOW_SPEED_TIME, else 30 */
    long low_speed_limit;     /* default HFS3_LOW_SPEED_LIMIT, else 1 byte/s */
    int max_retries;          /* default HFS3_RETRIES, else 5 (6 attempts); negative: no retries */
    long backoff_base_ms;     /* default 100; doubled each retry, capped at 5 s, full jitter */
    /* A throttled reply (503, 429, or an S3 Code such as SlowDown: hfs3_s3_is_throttle) is no hard error: it is
     * retried, not counted against max_retries, with full-jitter backoff from backoff_base_ms doubling up to
     * HFS3_S3_THROTTLE_CAP_MS (at least its Retry-After), until throttle_budget_ms have passed since the
     * request's first throttled reply. 0: HFS3_THROTTLE_BUDGET (seconds), else HFS3_S3_THROTTLE_BUDGET_S;
     * negative: none (a throttled reply counts as one of max_retries, as a 500 does). */
    long throttle_budget_ms;
    int list_max_keys;        /* max-keys per ListObjectsV2 page; 0: the server's default (1000) */
} hfs3_s3_opts;

/* r must outlive the client. opts may be NULL. Takes over the connection of a client parked for the same
 * endpoint (hfs3_s3_park), if there is one. */
int hfs3_s3_new(const hfs3_remote *r, const hfs3_s3_opts *opts, hfs3_s3 **out);
void hfs3_s3_free(hfs3_s3 *c);
/* Frees c but keeps its open connection for the next hfs3_s3_new to the same endpoint in this process (up to 64
 * are kept; a forked child does not inherit them): a fetch's next file reuses its connections. */
void hfs3_s3_park(hfs3_s3 *c);
/* Closes every kept connection. */
void hfs3_s3_park_close(void);

/* Every object under key prefix `prefix` (pass "" for the whole bucket), all pages of
 * ListObjectsV2 (continuation tokens), appended to *out in listing order.
 * (Named _objects, not hfs3_s3_list: in C a function cannot share its name with the typedef.) */
int hfs3_s3_list_objects(hfs3_s3 *c, const char *prefix, hfs3_s3_list *out);
/* One level under prefix (delimiter "/", all pages): the objects directly under it to objects, the
 * "folders" (CommonPrefixes, each ending in '/', as keys with nothing else set) to prefixes. */
int hfs3_s3_list_dir(hfs3_s3 *c, const char *prefix, hfs3_s3_list *objects, hfs3_s3_list *prefixes);
void hfs3_s3_list_free(hfs3_s3_list *l);
/* Back to its first n entries (those past n freed): a failed page or listing leaves a list as it found it.
 * l may be NULL. */
void hfs3_s3_list_truncate(hfs3_s3_list *l, size_t n);
void hfs3_s3_object_free(hfs3_s3_object *o);   /* frees the members, not o */

/* HEAD: fills *out (key, size, etag, mtime). -ENOENT for 404. */
int hfs3_s3_head(hfs3_s3 *c, const char *key, hfs3_s3_object *out);

/* Receives body bytes in order; return 0 to go on, negative to abort (that code is returned). */
typedef int (*hfs3_s3_sink)(void *ud, const void *data, size_t n);

typedef struct hfs3_s3_get {
    int ranged;               /* 1: only bytes [offset, offset+length) */
    uint64_t offset, length;
    const char *if_match;     /* ETag or NULL: 412 gives -ESTALE */
    const char *if_none_match;/* ETag or NULL: 304 gives not_modified = 1 and no body */
    /* Called at each throttled reply (hfs3_s3_is_throttle), before the backoff: nonzero gives up now (the
     * request fails with that reply's error, and throttled says so). May be NULL. */
    int (*on_throttle)(void *ud);
    void *on_throttle_ud;
    /* results */
    int status;               /* final HTTP status */
    int throttled;            /* throttled replies this request got (retried, or the last one given up on) */
    int not_modified;
    char *etag;               /* malloc'd, caller frees (may be NULL) */
    uint64_t object_size;     /* from Content-Length or Content-Range when known */
} hfs3_s3_get;

/* GET into sink. Errors: -ENOENT 404, -EACCES 403, -ESTALE 412, -ERANGE 416, -EIO others,
 * -ETIMEDOUT, -ECONNREFUSED; the message names the key, the HTTP status and S3's Code and Message.
 * A retry after a partial body resumes where the sink stopped receiving (never repeats bytes). */
int hfs3_s3_get_object(hfs3_s3 *c, const char *key, hfs3_s3_get *g, hfs3_s3_sink sink, void *ud);
/* GET a whole small object into out (at most max bytes, else -EFBIG). g may be NULL. */
int hfs3_s3_get_buf(hfs3_s3 *c, const char *key, size_t max, hfs3_buf *out, hfs3_s3_get *g);

/* PUT a small object (single request, payload signed). On success *etag_out (if not NULL) gets the
 * new ETag (caller frees). */
int hfs3_s3_put(hfs3_s3 *c, const char *key, const void *data, size_t n, const char *content_type,
                char **etag_out);

/* Throttling (S3's 503 SlowDown): the backoff's ceiling, and how long one request keeps retrying. */
#define HFS3_S3_THROTTLE_CAP_MS 20000
#define HFS3_S3_THROTTLE_BUDGET_S 600
#define HFS3_S3_RETRY_AFTER_MAX_S 120  /* a longer Retry-After is taken as this */

/* 1 when an HTTP error status and S3 error Code (may be NULL) say "slow down" rather than "failed": 503 and 429
 * always; any status with Code SlowDown, Throttling, ThrottlingException, RequestLimitExceeded,
 * RequestThrottled, TooManyRequests or SlowDownRead/SlowDownWrite. */
int hfs3_s3_is_throttle(long status, const char *code);

/* Full-jitter exponential backoff (AWS's recommendation): a pause drawn uniformly from
 * [0, min(cap_ms, base_ms * 2^attempt)] by rnd, then raised to retry_after_ms when that is larger. Pure. */
long hfs3_s3_backoff_ms(int attempt, long base_ms, long cap_ms, long retry_after_ms, uint64_t rnd);

/* The full request URL and Host for key (exposed for tests and for the fetcher's logs, no secrets). */
char *hfs3_s3_url(const hfs3_s3 *c, const char *key);

#endif
