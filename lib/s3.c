/* s3.c - the S3 client on libcurl: addressing (path style or virtual host), SigV4-signed GET, HEAD, PUT and
 * ListObjectsV2, retries with backoff and jitter, resumption of a broken GET without repeating bytes, and
 * one-line error messages from S3's XML errors. Signing itself is sigv4.c's; XML parsing is s3xml.c's.
 * Never logs or reports the Authorization header, the secret key or the session token. */
#include "hfs3/s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/creds.h"
#include "hfs3/log.h"
#include "hfs3/s3xml.h"
#include "hfs3/sigv4.h"

#define ERRBODY_MAX (64 * 1024)        /* an S3 <Error> is well under 1 KiB; keep what is useful */
#define LIST_PAGE_MAX (32u << 20)      /* one ListObjectsV2 page (1000 keys) is a few hundred KiB */
#define BACKOFF_CAP_MS 5000

struct hfs3_s3 {
    const hfs3_remote *r;
    hfs3_s3_opts o;
    CURL *h;          /* kept across requests: its connection cache is what gets reused */
    char *origin;     /* "http://127.0.0.1:9000" or "https://bucket.s3.amazonaws.com" */
    char *host;       /* the Host header we send and sign */
    char *base;       /* decoded path before the key: "/bucket" (path style), "" (virtual) */
    uint64_t rng;
    struct curl_slist *resolve; /* HFS3_TEST_RESOLVE (tests only): host:port:address entries */
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* What one logical operation asks for; the retry loop turns it into one or more HTTP requests. */
typedef struct req {
    const char *method;         /* GET, HEAD, PUT */
    const char *op;             /* for messages: GET, HEAD, PUT, LIST */
    const char *key;            /* NULL: the bucket itself (listing) */
    const char *what;           /* "bucket/key" for messages */
    const hfs3_kv *query;
    size_t nquery;
    const char *if_match, *if_none_match, *content_type;
    int ranged;
    uint64_t lo, hi;            /* object bytes wanted: [lo, hi) when ranged, [0, end) otherwise */
    const void *body;           /* PUT */
    size_t body_len;
    hfs3_s3_sink sink;
    void *ud;
    hfs3_buf *restart;          /* a listing page: a retry starts the body over (no Range), emptying this */
    int (*on_throttle)(void *ud); /* hfs3_s3_get's: nonzero gives up at a throttled reply */
    void *on_throttle_ud;
} req;

/* One request's response plus the state that survives retries (next, pinned ETag). */
typedef struct xfer {
    const req *q;
    hfs3_s3 *c;
    long status;
    char *etag, *last_modified;
    char encoding[40];          /* Content-Encoding (printable, cut), "" when absent: named when the body is wrong */
    double meta_mtime;          /* X-Amz-Meta-Mtime (rclone's record of the file's mtime), 0 when absent */
    long retry_after_s;         /* Retry-After in seconds (-1: absent, or an HTTP date, which is not read) */
    int throttled;              /* throttled replies this request got (kept across retries) */
    int have_len, have_crange, have_total;
    uint64_t content_length, crange_start, crange_end, total;
    hfs3_buf err;               /* error body (non-2xx) */
    int body_started;
    uint64_t pos;               /* object offset of the next byte of this response's body */
    uint64_t next;              /* object offset of the next byte the sink has not seen */
    int sink_rc;
    int proto_rc;               /* a 2xx body we refused (wrong range, too long, other ETag): retryable */
    int stale_rc;               /* the object changed while it was read: final */
    const char *pinned;         /* the ETag a resumed body must carry (perform's copy) */
    size_t put_pos;
} xfer;

static void xfer_reset_headers(xfer *x)
{
    x->status = 0;
    free(x->etag);
    free(x->last_modified);
    x->etag = x->last_modified = NULL;
    x->encoding[0] = 0;
    x->meta_mtime = 0;
    x->retry_after_s = -1;
    x->have_len = x->have_crange = x->have_total = 0;
    x->content_length = x->crange_start = x->crange_end = x->total = 0;
    x->body_started = 0;
    x->pos = 0;
    hfs3_buf_free(&x->err);
    hfs3_buf_init(&x->err, ERRBODY_MAX);
}

static char *trimmed_dup(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == '\r' || s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return hfs3_strndup(s, n);
}

static int parse_u64(const char *s, char **end, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, end, 10);
    if (errno)
        return -1;
    *out = v;
    return 0;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    if (n >= 5 && !memcmp(p, "HTTP/", 5)) {
        /* a new response (after 100 Continue, or a retry): forget the previous one's headers */
        xfer_reset_headers(x);
        const char *sp = memchr(p, ' ', n);
        if (sp)
            x->status = strtol(sp + 1, NULL, 10);
        return n;
    }
    const char *colon = memchr(p, ':', n);
    if (!colon)
        return n;
    size_t nl = (size_t)(colon - p);
    char *v = trimmed_dup(colon + 1, n - nl - 1);
    if (!v)
        return 0;
    char *end;
    if (nl == 4 && !strncasecmp(p, "etag", 4)) {
        free(x->etag);
        x->etag = v;
        v = NULL;
    } else if (nl == 13 && !strncasecmp(p, "last-modified", 13)) {
        free(x->last_modified);
        x->last_modified = v;
        v = NULL;
    } else if (nl == 16 && !strncasecmp(p, "x-amz-meta-mtime", 16)) {
        double t = strtod(v, &end);
        x->meta_mtime = end != v && !*end && t > 0 && t < 1e11 ? t : 0;
    } else if (nl == 11 && !strncasecmp(p, "retry-after", 11)) {
        uint64_t secs;
        if (parse_u64(v, &end, &secs) == 0 && !*end)
            x->retry_after_s = secs > HFS3_S3_RETRY_AFTER_MAX_S ? HFS3_S3_RETRY_AFTER_MAX_S : (long)secs;
    } else if (nl == 16 && !strncasecmp(p, "content-encoding", 16)) {
        /* for the message only (it is the server's text: printable, cut); "identity" is no encoding */
        size_t k = 0;
        for (const char *s = v; *s && k + 1 < sizeof x->encoding; s++)
            x->encoding[k++] = *s > ' ' && *s < 127 ? *s : '?';
        x->encoding[k] = 0;
        if (!strcasecmp(x->encoding, "identity"))
            x->encoding[0] = 0;
    } else if (nl == 14 && !strncasecmp(p, "content-length", 14)) {
        x->have_len = parse_u64(v, &end, &x->content_length) == 0;
    } else if (nl == 13 && !strncasecmp(p, "content-range", 13) && !strncmp(v, "bytes ", 6)) {
        /* "bytes 100-199/1234"; a 416 has an asterisk for the range */
        const char *s = v + 6;
        if (parse_u64(s, &end, &x->crange_start) == 0 && *end == '-' &&
            parse_u64(end + 1, &end, &x->crange_end) == 0 && *end == '/' && x->crange_end >= x->crange_start)
            x->have_crange = 1;
        const char *slash = strchr(s, '/');
        if (slash && parse_u64(slash + 1, &end, &x->total) == 0)
            x->have_total = 1;
    }
    free(v);
    return n;
}

static int status_ok(long s) { return s >= 200 && s < 300; }

/* The end of a wrong body's message: a Content-Encoding explains a body longer or shorter than the range (the
 * bytes are encoded; hfs3 asks for none, Accept-Encoding: identity, so a proxy in between encoded them). */
static const char *enc_note(const xfer *x, char *buf, size_t n)
{
    if (!x->encoding[0])
        return "";
    snprintf(buf, n, "; the body came with Content-Encoding: %s, which hfs3 does not ask for (Accept-Encoding: "
             "identity): a proxy in between that compresses replies? (turn its compression off for this endpoint)",
             x->encoding);
    return buf;
}

/* Checks the start of a 2xx body against what this attempt asked for. 0, or a message in x->proto_rc
 * (retryable: a proxy or server that answered wrongly once may answer right the next time) or
 * x->stale_rc (final). */
static int body_check(xfer *x)
{
    const req *q = x->q;
    if (x->pinned && x->etag && strcmp(x->etag, x->pinned) != 0) {
        /* a resumed body from another version of the object would splice two versions together */
        x->stale_rc = hfs3_err(-ESTALE, "s3: %s %s: the object changed while it was read (ETag %s, now %s)",
                               q->op, q->what, x->pinned, x->etag);
        return -1;
    }
    if (q->if_match && x->etag && strcmp(x->etag, q->if_match) != 0) {
        /* a server that ignores If-Match (s3rver does) must not hand us another version either */
        x->stale_rc = hfs3_err(-ESTALE, "s3: %s %s: 412 If-Match %s failed: the object's ETag is %s", q->op,
                               q->what, q->if_match, x->etag);
        return -1;
    }
    if (x->status == 206) {
        if (!x->have_crange) {
            x->proto_rc = hfs3_err(-EIO, "s3: %s %s: 206 reply without a valid Content-Range", q->op, q->what);
            return -1;
        }
        if (x->crange_start != x->next) {
            x->proto_rc = hfs3_err(-EIO, "s3: %s %s: asked for bytes from %llu, the server sent a range starting "
                                   "at %llu", q->op, q->what, (unsigned long long)x->next,
                                   (unsigned long long)x->crange_start);
            return -1;
        }
        if (q->ranged && x->crange_end >= q->hi) {
            char eb[256];
            x->proto_rc = hfs3_err(-EIO, "s3: %s %s: server sent more bytes than requested (bytes %llu-%llu for "
                                   "a range ending at %llu)%s", q->op, q->what, (unsigned long long)x->crange_start,
                                   (unsigned long long)x->crange_end, (unsigned long long)(q->hi - 1),
                                   enc_note(x, eb, sizeof eb));
            return -1;
        }
        x->pos = x->crange_start;
    } else {
        x->pos = 0; /* a 200 is the whole object: a server that ignored Range; skip what we have */
    }
    return 0;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    if (!status_ok(x->status)) {
        /* error bodies are for the message, never for the sink; past the cap they are dropped */
        if (x->err.len + n <= ERRBODY_MAX)
            hfs3_buf_add(&x->err, p, n);
        return n;
    }
    if (!x->q->sink)
        return n;
    if (!x->body_started) {
        x->body_started = 1;
        if (body_check(x) < 0)
            return 0;
    }
    /* deliver only [next, hi): a server that ignored Range, or a resumed body, never repeats bytes */
    uint64_t start = x->pos, end = x->pos + n;
    x->pos = end;
    if (x->status == 206 && end > x->crange_end + 1) {
        char eb[256];
        x->proto_rc = hfs3_err(-EIO, "s3: %s %s: server sent more bytes than requested (past byte %llu)%s",
                               x->q->op, x->q->what, (unsigned long long)x->crange_end, enc_note(x, eb, sizeof eb));
        return 0;
    }
    uint64_t lo = start > x->next ? start : x->next;
    uint64_t hi = x->q->ranged && x->q->hi < end ? x->q->hi : end;
    if (lo < hi) {
        int rc = x->q->sink(x->q->ud, p + (lo - start), (size_t)(hi - lo));
        if (rc < 0) {
            x->sink_rc = rc;
            return 0;
        }
        x->next = hi;
    }
    return n;
}

static size_t on_read(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t left = x->q->body_len - x->put_pos, n = sz * nm;
    if (n > left)
        n = left;
    memcpy(p, (const char *)x->q->body + x->put_pos, n);
    x->put_pos += n;
    return n;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
    xfer *x = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->q->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    x->put_pos = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

static uint64_t rng_next(hfs3_s3 *c)
{
    /* xorshift64*: jitter only needs to decorrelate clients, not be unpredictable */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 2685821657736338717ULL;
}

long hfs3_s3_backoff_ms(int attempt, long base_ms, long cap_ms, long retry_after_ms, uint64_t rnd)
{
    long cap = base_ms > 0 ? base_ms : 1;
    for (int i = 0; i < attempt && cap < cap_ms; i++)
        cap *= 2;
    if (cap > cap_ms)
        cap = cap_ms;
    long ms = (long)(rnd % (uint64_t)(cap + 1));
    return ms < retry_after_ms ? retry_after_ms : ms;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static void backoff(hfs3_s3 *c, int attempt)
{
    sleep_ms(hfs3_s3_backoff_ms(attempt, c->o.backoff_base_ms, BACKOFF_CAP_MS, 0, rng_next(c)));
}

int hfs3_s3_is_throttle(long status, const char *code)
{
    static const char *const codes[] = {"SlowDown", "SlowDownRead", "SlowDownWrite", "Throttling",
                                        "ThrottlingException", "RequestLimitExceeded", "RequestThrottled",
                                        "TooManyRequests"};
    if (status == 503 || status == 429)
        return 1;
    if (status_ok(status) || !code)
        return 0;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (!strcmp(code, codes[i]))
            return 1;
    return 0;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 when x's reply is a throttle (its status, or the Code of its XML error body) */
static int reply_throttles(const xfer *x)
{
    if (status_ok(x->status) || x->status == 304 || x->status == 0)
        return 0;
    if (x->status == 503 || x->status == 429)
        return 1;
    char *code = NULL, *msg = NULL;
    if (x->err.len)
        hfs3_s3xml_parse_error(x->err.data, x->err.len, &code, &msg);
    int t = hfs3_s3_is_throttle(x->status, code);
    free(code);
    free(msg);
    return t;
}

/* A tunable from the environment: its value when it is a whole number in [lo, hi], else dflt (with a
 * warning when it is set but wrong). 0 from HFS3_RETRIES means "no retries": stored as -1 below. */
static long env_long(const char *name, long lo, long hi, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < lo || n > hi) {
        hfs3_warn("%s=%s is not a whole number from %ld to %ld; using %ld", name, v, lo, hi, dflt);
        return dflt;
    }
    if (n == 0 && !strcmp(name, "HFS3_RETRIES"))
        return -1;
    return n;
}

/* Easy handles parked by hfs3_s3_park, each with the connection it kept open (TCP, TLS), for the next
 * hfs3_s3_new to the same origin: the next file's workers go on where the last file's left off, with no new
 * handshake and no new slow start. curl itself reuses a kept connection only for a request it matches (host,
 * port, TLS settings). A forked child forgets them unclosed: their sockets are the parent's too. */
#define PARK_MAX 64
typedef struct parked_handle {
    CURL *h;
    char *origin;
} parked_handle;
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static parked_handle parked[PARK_MAX];
static int nparked;
static pthread_once_t park_once = PTHREAD_ONCE_INIT;

static void park_forget(void)
{
    pthread_mutex_init(&park_mu, NULL);
    nparked = 0;
}

static void park_init(void) { (void)pthread_atfork(NULL, NULL, park_forget); }

/* A parked handle for origin (the caller owns it now), or NULL. */
static CURL *unpark(const char *origin)
{
    pthread_once(&park_once, park_init);
    CURL *h = NULL;
    pthread_mutex_lock(&park_mu);
    for (int i = nparked - 1; i >= 0 && !h; i--) {
        if (strcmp(parked[i].origin, origin) != 0)
            continue;
        h = parked[i].h;
        free(parked[i].origin);
        parked[i] = parked[--nparked];
    }
    pthread_mutex_unlock(&park_mu);
    return h;
}

void hfs3_s3_park(hfs3_s3 *c)
{
    if (!c)
        return;
    pthread_once(&park_once, park_init);
    char *origin = hfs3_strdup(c->origin);
    pthread_mutex_lock(&park_mu);
    if (origin && c->h && nparked < PARK_MAX) {
        /* its options point into c (the error buffer, the resolve list): gone with it, the connection kept */
        curl_easy_reset(c->h);
        parked[nparked++] = (parked_handle){c->h, origin};
        c->h = NULL;
        origin = NULL;
    }
    pthread_mutex_unlock(&park_mu);
    free(origin);
    hfs3_s3_free(c);
}

void hfs3_s3_park_close(void)
{
    pthread_once(&park_once, park_init);
    pthread_mutex_lock(&park_mu);
    for (int i = 0; i < nparked; i++) {
        curl_easy_cleanup(parked[i].h);
        free(parked[i].origin);
    }
    nparked = 0;
    pthread_mutex_unlock(&park_mu);
}

int hfs3_s3_new(const hfs3_remote *r, const hfs3_s3_opts *opts, hfs3_s3 **out)
{
    *out = NULL;
    if (!r || !r->bucket || !*r->bucket || !r->endpoint)
        return hfs3_err(-EINVAL, "s3: remote lacks a bucket or an endpoint");
    if ((r->access_key == NULL) != (r->secret_key == NULL))
        return hfs3_err(-EINVAL, "s3: %s: an access key needs a secret key and the other way round",
                        r->spec ? r->spec : r->bucket);
    const char *ep = r->endpoint, *rest;
    size_t sl;
    if (!strncmp(ep, "http://", 7))
        sl = 7;
    else if (!strncmp(ep, "https://", 8))
        sl = 8;
    else
        return hfs3_err(-EINVAL, "s3: endpoint %s: not http:// or https://", ep);
    rest = ep + sl;
    const char *slash = strchr(rest, '/');
    size_t alen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (!alen)
        return hfs3_err(-EINVAL, "s3: endpoint %s: no host", ep);
    const char *epath = slash ? slash : "";
    size_t eplen = strlen(epath);
    while (eplen && epath[eplen - 1] == '/')
        eplen--;

    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return hfs3_err(-EIO, "s3: curl_global_init: %s", curl_easy_strerror(curl_init_rc));

    hfs3_s3 *c = calloc(1, sizeof *c);
    if (!c)
        return hfs3_err(-ENOMEM, "s3: out of memory");
    c->r = r;
    if (opts)
        c->o = *opts;
    if (c->o.connect_timeout_ms <= 0)
        c->o.connect_timeout_ms = 10000;
    if (c->o.low_speed_time_s <= 0)
        c->o.low_speed_time_s = env_long("HFS3_LOW_SPEED_TIME", 1, 3600, 30);
    if (c->o.low_speed_limit <= 0)
        c->o.low_speed_limit = env_long("HFS3_LOW_SPEED_LIMIT", 1, 1L << 30, 1);
    if (c->o.max_retries == 0)
        c->o.max_retries = (int)env_long("HFS3_RETRIES", -1, 100, 5);
    if (c->o.max_retries < 0)
        c->o.max_retries = 0;
    if (c->o.backoff_base_ms <= 0)
        c->o.backoff_base_ms = 100;
    if (c->o.throttle_budget_ms == 0)
        c->o.throttle_budget_ms = env_long("HFS3_THROTTLE_BUDGET", 0, 86400, HFS3_S3_THROTTLE_BUDGET_S) * 1000;
    if (c->o.throttle_budget_ms == 0)
        c->o.throttle_budget_ms = -1; /* HFS3_THROTTLE_BUDGET=0: a throttle is one of the retries */
    c->rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c;
    if (!c->rng)
        c->rng = 88172645463325252ULL;

    hfs3_buf b;
    int rc = -ENOMEM;
    hfs3_buf_init(&b, 0);
    if (r->path_style) {
        if (hfs3_buf_add(&b, rest, alen) || !(c->host = hfs3_buf_take(&b, NULL)) ||
            hfs3_buf_add(&b, ep, sl + alen) || !(c->origin = hfs3_buf_take(&b, NULL)) ||
            hfs3_buf_add(&b, epath, eplen) || hfs3_buf_addc(&b, '/') || hfs3_buf_adds(&b, r->bucket) ||
            !(c->base = hfs3_buf_take(&b, NULL)))
            goto fail;
    } else {
        if (hfs3_buf_addf(&b, "%s.%.*s", r->bucket, (int)alen, rest) || !(c->host = hfs3_buf_take(&b, NULL)) ||
            hfs3_buf_addf(&b, "%.*s%s", (int)sl, ep, c->host) || !(c->origin = hfs3_buf_take(&b, NULL)) ||
            (eplen && hfs3_buf_add(&b, epath, eplen)) || !(c->base = hfs3_buf_take(&b, NULL)))
            goto fail;
    }
    /* test-only: name resolution overrides (curl's --resolve), so that virtual-hosted addressing and TLS
     * host names can be tested end to end on loopback; "host:port:address[,host:port:address...]" */
    const char *res = getenv("HFS3_TEST_RESOLVE");
    if (res && *res) {
        char *copy = hfs3_strdup(res), *save = NULL;
        if (!copy)
            goto fail;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            struct curl_slist *n = curl_slist_append(c->resolve, t);
            if (!n) {
                free(copy);
                goto fail;
            }
            c->resolve = n;
        }
        free(copy);
    }
    c->h = unpark(c->origin);
    if (!c->h && !(c->h = curl_easy_init())) {
        rc = hfs3_err(-ENOMEM, "s3: curl_easy_init failed");
        goto fail_msg;
    }
    *out = c;
    return 0;
fail:
    rc = hfs3_err(-ENOMEM, "s3: out of memory");
fail_msg:
    hfs3_buf_free(&b);
    hfs3_s3_free(c);
    return rc;
}

void hfs3_s3_free(hfs3_s3 *c)
{
    if (!c)
        return;
    if (c->h)
        curl_easy_cleanup(c->h);
    curl_slist_free_all(c->resolve);
    free(c->origin);
    free(c->host);
    free(c->base);
    free(c);
}

/* The decoded path of key (what SigV4 signs, before encoding): base + "/" + key, or the bucket. */
static int build_path(const hfs3_s3 *c, const char *key, hfs3_buf *out)
{
    if (hfs3_buf_adds(out, c->base))
        return -ENOMEM;
    if (key)
        return hfs3_buf_addc(out, '/') || hfs3_buf_adds(out, key) ? -ENOMEM : 0;
    return out->len ? 0 : hfs3_buf_addc(out, '/');
}

/* origin + encoded path + "?" + encoded query: the same encoding sigv4.c puts in the canonical request. */
static char *build_url(const hfs3_s3 *c, const char *path, const hfs3_kv *q, size_t nq)
{
    hfs3_buf u;
    hfs3_buf_init(&u, 0);
    if (hfs3_buf_adds(&u, c->origin) || hfs3_uri_encode(&u, path, strlen(path), 1) < 0)
        return NULL;
    for (size_t i = 0; i < nq; i++) {
        if (hfs3_buf_addc(&u, i ? '&' : '?') || hfs3_uri_encode(&u, q[i].name, strlen(q[i].name), 0) < 0 ||
            hfs3_buf_addc(&u, '=') || hfs3_uri_encode(&u, q[i].value, strlen(q[i].value), 0) < 0)
            return NULL;
    }
    return hfs3_buf_take(&u, NULL);
}

char *hfs3_s3_url(const hfs3_s3 *c, const char *key)
{
    hfs3_buf p;
    hfs3_buf_init(&p, 0);
    if (build_path(c, key, &p)) {
        hfs3_buf_free(&p);
        return NULL;
    }
    char *url = build_url(c, hfs3_buf_str(&p), NULL, 0);
    hfs3_buf_free(&p);
    return url;
}

static int add_header(struct curl_slist **l, const char *name, const char *value)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_buf_addf(&b, "%s: %s", name, value))
        return -ENOMEM;
    struct curl_slist *n = curl_slist_append(*l, b.data);
    hfs3_buf_free(&b);
    if (!n)
        return -ENOMEM;
    *l = n;
    return 0;
}

/* Builds the header list for one attempt, signing exactly the headers it sends (besides the
 * Authorization itself and what curl adds: Accept, Content-Length, User-Agent). */
static int build_headers_keys(hfs3_s3 *c, const req *q, const char *path, const char *range, const char *if_match,
                              const char *if_none_match, const hfs3_cred *cr, struct curl_slist **out)
{
    const hfs3_remote *r = c->r;
    hfs3_kv h[10];
    size_t nh = 0;
    char date[17], payload[65];
    hfs3_amz_date((long long)time(NULL), date);
    if (q->body)
        hfs3_sha256_hexof(q->body, q->body_len, payload);
    else
        strcpy(payload, "UNSIGNED-PAYLOAD");
    h[nh++] = (hfs3_kv){"Host", c->host};
    /* never an encoded body: its bytes are not the object's (curl sends no Accept-Encoding by itself, but a proxy
     * or server may compress a reply to a request that does not say; identity says no). Signed, as every header
     * hfs3 sends but the transport's own */
    h[nh++] = (hfs3_kv){"Accept-Encoding", "identity"};
    if (range)
        h[nh++] = (hfs3_kv){"Range", range};
    if (if_match)
        h[nh++] = (hfs3_kv){"If-Match", if_match};
    if (if_none_match)
        h[nh++] = (hfs3_kv){"If-None-Match", if_none_match};
    if (q->content_type)
        h[nh++] = (hfs3_kv){"Content-Type", q->content_type};
    if (cr->access_key) {
        h[nh++] = (hfs3_kv){"x-amz-date", date};
        h[nh++] = (hfs3_kv){"x-amz-content-sha256", payload};
        if (cr->session_token)
            h[nh++] = (hfs3_kv){"x-amz-security-token", cr->session_token};
    }
    struct curl_slist *l = NULL;
    int rc = 0;
    for (size_t i = 0; i < nh && !rc; i++)
        rc = add_header(&l, h[i].name, h[i].value);
    /* no "Expect: 100-continue" round trip for small PUTs */
    if (!rc && q->body && !(l = curl_slist_append(l, "Expect:")))
        rc = -ENOMEM;
    if (!rc && cr->access_key) {
        hfs3_sigv4_request sr = {.method = q->method, .path = path, .normalize_path = 0, .query = q->query,
                                 .nquery = q->nquery, .headers = h, .nheaders = nh, .payload_hash = payload};
        hfs3_sigv4_key k = {.access_key = cr->access_key, .secret_key = cr->secret_key,
                            .region = r->region ? r->region : "us-east-1", .service = "s3", .amz_date = date};
        hfs3_buf auth;
        hfs3_buf_init(&auth, 0);
        if ((rc = hfs3_buf_adds(&auth, "Authorization: ")) == 0 &&
            (rc = hfs3_sigv4_authorization(&sr, &k, &auth)) == 0) {
            struct curl_slist *n = curl_slist_append(l, auth.data);
            if (n)
                l = n;
            else
                rc = -ENOMEM;
        }
        hfs3_buf_free(&auth);
        if (rc)
            rc = hfs3_err_wrap(rc < 0 ? rc : -EIO, "s3: %s %s: signing", q->op, q->what);
    } else if (rc) {
        rc = hfs3_err(-ENOMEM, "s3: out of memory");
    }
    if (rc) {
        curl_slist_free_all(l);
        return rc < 0 ? rc : hfs3_err(-ENOMEM, "s3: out of memory");
    }
    *out = l;
    return 0;
}

/* The keys for this attempt: the remote's static ones, or its provider's current ones (fetched, or refreshed
 * when they are about to expire: a long fetch outlives temporary keys). */
static int build_headers(hfs3_s3 *c, const req *q, const char *path, const char *range, const char *if_match,
                         const char *if_none_match, struct curl_slist **out)
{
    const hfs3_remote *r = c->r;
    if (!r->creds) {
        hfs3_cred st = {r->access_key, r->secret_key, r->session_token, 0};
        return build_headers_keys(c, q, path, range, if_match, if_none_match, &st, out);
    }
    hfs3_cred cur;
    int rc = hfs3_creds_get(r->creds, &cur);
    if (rc == 0)
        rc = build_headers_keys(c, q, path, range, if_match, if_none_match, &cur, out);
    hfs3_cred_clear(&cur);
    return rc;
}

static int retryable_curl(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0;
    }
}

static int retryable_status(long s) { return s == 500 || s == 502 || s == 503 || s == 504; }

static const char *reason(long s)
{
    switch (s) {
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 412: return "Precondition Failed";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "HTTP error";
    }
}

static int status_errno(long s)
{
    switch (s) {
    case 404: return -ENOENT;
    case 403: return -EACCES;
    case 412: return -ESTALE;
    case 416: return -ERANGE;
    default: return -EIO;
    }
}

/* Control characters would break the one-line message. */
static void one_line(char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

/* "s3: GET bucket/key: 403 SignatureDoesNotMatch: The request signature..." from the last response. */
static int status_error(xfer *x, int attempts)
{
    char *code = NULL, *msg = NULL;
    if (x->err.len)
        hfs3_s3xml_parse_error(x->err.data, x->err.len, &code, &msg);
    one_line(code);
    one_line(msg);
    char tail[48] = "";
    if (attempts > 1)
        snprintf(tail, sizeof tail, " (after %d attempts)", attempts);
    int rc;
    if (code)
        rc = hfs3_err(status_errno(x->status), "s3: %s %s: %ld %s%s%s%s", x->q->op, x->q->what, x->status, code,
                      msg && *msg ? ": " : "", msg ? msg : "", tail);
    else
        rc = hfs3_err(status_errno(x->status), "s3: %s %s: %ld %s%s", x->q->op, x->q->what, x->status,
                      reason(x->status), tail);
    free(code);
    free(msg);
    return rc;
}

/* "DNS: " before a resolve failure's text, so that the line says what to look at (curl's own words do not). */
static const char *dns_tag(CURLcode cc)
{
    return cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY ? "DNS: " : "";
}

static int curl_error(hfs3_s3 *c, xfer *x, CURLcode cc, int attempts)
{
    int code = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO;
    one_line(c->errbuf);
    char tail[48] = "";
    if (attempts > 1)
        snprintf(tail, sizeof tail, " (after %d attempts)", attempts);
    return hfs3_err(code, "s3: %s %s: %s%s%s%s%s", x->q->op, x->q->what, dns_tag(cc), curl_easy_strerror(cc),
                    c->errbuf[0] ? ": " : "", c->errbuf, tail);
}

static int setup_curl(hfs3_s3 *c, xfer *x, const char *url, struct curl_slist *hdrs)
{
    CURL *h = c->h;
    const req *q = x->q;
    curl_easy_reset(h);  /* options only: live connections stay for reuse */
    c->errbuf[0] = 0;
    CURLcode cc = CURLE_OK;
#define SET(opt, val)                                                                                          \
    do {                                                                                                       \
        if (cc == CURLE_OK)                                                                                    \
            cc = curl_easy_setopt(h, opt, val);                                                                \
    } while (0)
    SET(CURLOPT_URL, url);
    /* send the path exactly as signed: libcurl would otherwise collapse "/./" and "/../" */
    SET(CURLOPT_PATH_AS_IS, 1L);
    SET(CURLOPT_ERRORBUFFER, c->errbuf);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SET(CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
    SET(CURLOPT_LOW_SPEED_LIMIT, c->o.low_speed_limit);
    SET(CURLOPT_LOW_SPEED_TIME, c->o.low_speed_time_s);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_SSL_VERIFYPEER, c->r->tls_verify ? 1L : 0L);
    SET(CURLOPT_SSL_VERIFYHOST, c->r->tls_verify ? 2L : 0L);
    if (c->r->ca_bundle)
        SET(CURLOPT_CAINFO, c->r->ca_bundle);
    if (c->resolve)
        SET(CURLOPT_RESOLVE, c->resolve);
    SET(CURLOPT_USERAGENT, "hfs3/" HFS3_VERSION);
    SET(CURLOPT_HTTPHEADER, hdrs);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, x);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, x);
    /* curl's default 16 KiB receive buffer makes a write callback (a pwrite, a lock) per 16 KiB of a shard;
     * 512 KiB (its maximum) cuts those 32-fold: bench/ measured the system time of a fetch. Only a hint: libcurl
     * 7.88 (Debian 12) refuses it with "bad argument" once the handle has a receive buffer (after a failed
     * resolve, say), and a failed hint must not replace the real error nor stop the retry of a DNS blip. */
    (void)curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
    if (!strcmp(q->method, "HEAD")) {
        SET(CURLOPT_NOBODY, 1L);
    } else if (!strcmp(q->method, "PUT")) {
        SET(CURLOPT_UPLOAD, 1L);
        SET(CURLOPT_READFUNCTION, on_read);
        SET(CURLOPT_READDATA, x);
        SET(CURLOPT_SEEKFUNCTION, on_seek);
        SET(CURLOPT_SEEKDATA, x);
        SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
    }
#undef SET
    if (cc != CURLE_OK)
        return hfs3_err(-EIO, "s3: %s %s: curl setup: %s", q->op, q->what, curl_easy_strerror(cc));
    return 0;
}

/* Runs q with retries. On success (2xx, or 304 when q asked If-None-Match) x holds the final response's
 * headers; the caller frees x's members with xfer_done. */
static int perform(hfs3_s3 *c, const req *q, xfer *x)
{
    memset(x, 0, sizeof *x);
    x->q = q;
    x->c = c;
    hfs3_buf_init(&x->err, ERRBODY_MAX);
    x->next = q->ranged ? q->lo : 0;
    char *pinned = NULL; /* the ETag of the first body we delivered from: a resumed GET must match it */
    hfs3_buf path;
    hfs3_buf_init(&path, 0);
    int rc;
    if (build_path(c, q->key, &path))
        return hfs3_err(-ENOMEM, "s3: out of memory");
    char *url = build_url(c, hfs3_buf_str(&path), q->query, q->nquery);
    if (!url) {
        hfs3_buf_free(&path);
        return hfs3_err(-ENOMEM, "s3: out of memory");
    }
    int attempts = c->o.max_retries + 1;
    int throttles = 0;
    long throttled_since = 0;
    for (int attempt = 1;; attempt++) {
        uint64_t start = q->ranged ? q->lo : 0;
        if (q->restart) {
            hfs3_buf_reset(q->restart);
            x->next = 0;
        }
        int resumed = x->next > start;
        char range[64], *rp = NULL;
        if (q->ranged || resumed) {
            if (q->ranged)
                snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)x->next,
                         (unsigned long long)(q->hi - 1));
            else
                snprintf(range, sizeof range, "bytes=%llu-", (unsigned long long)x->next);
            rp = range;
        }
        const char *im = q->if_match ? q->if_match : resumed ? pinned : NULL;
        const char *inm = resumed ? NULL : q->if_none_match;
        struct curl_slist *hdrs = NULL;
        if ((rc = build_headers(c, q, hfs3_buf_str(&path), rp, im, inm, &hdrs)) < 0)
            break;
        if ((rc = setup_curl(c, x, url, hdrs)) < 0) {
            curl_slist_free_all(hdrs);
            break;
        }
        x->put_pos = 0;
        x->sink_rc = 0;
        x->proto_rc = 0;
        x->stale_rc = 0;
        x->pinned = resumed ? pinned : NULL;
        hfs3_debug("s3: %s %s (attempt %d)%s%s", q->method, url, attempt, rp ? " Range " : "", rp ? rp : "");
        CURLcode cc = curl_easy_perform(c->h);
        curl_slist_free_all(hdrs);
        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, NULL);
        if (x->sink_rc) {
            rc = x->sink_rc;
            if (x->encoding[0]) { /* the sink refused the bytes (too many for the file): say they were encoded */
                char eb[256];
                hfs3_err(rc, "%s%s", hfs3_errmsg(), enc_note(x, eb, sizeof eb));
            }
            break;
        }
        if (x->stale_rc) {
            rc = x->stale_rc;
            break;
        }
        if (x->proto_rc) {
            char why[512];
            snprintf(why, sizeof why, "%s", hfs3_errmsg());
            if (attempt >= attempts) {
                rc = hfs3_err(x->proto_rc, "%s (after %d %s)", why, attempt, hfs3_plural(attempt, "attempt", "attempts"));
                break;
            }
            hfs3_warn("%s; retrying (attempt %d of %d)", why, attempt + 1, attempts);
            backoff(c, attempt - 1);
            continue;
        }
        if (!pinned && x->etag && status_ok(x->status) && x->next > start && !(pinned = hfs3_strdup(x->etag))) {
            rc = hfs3_err(-ENOMEM, "s3: out of memory");
            break;
        }
        int retry = 0;
        if (cc != CURLE_OK && q->sink && status_ok(x->status) && strcmp(q->method, "HEAD") &&
            ((q->ranged && x->next >= q->hi) || (x->status == 206 && x->have_total && x->next >= x->total) ||
             (x->status == 200 && x->have_len && x->next >= x->content_length))) {
            /* every byte asked for arrived and the error came after the last one (a reset, or the low-speed
             * timer firing at the end): done; a retry would ask for an empty range (416) */
            hfs3_debug("s3: %s %s: %s after the last byte; the body is complete", q->op, q->what,
                       curl_easy_strerror(cc));
            rc = 0;
            break;
        }
        if (cc != CURLE_OK) {
            if (!retryable_curl(cc) || attempt >= attempts) {
                rc = curl_error(c, x, cc, attempt);
                break;
            }
            retry = 1;
            hfs3_info("s3: %s %s: %s%s, retrying (attempt %d of %d)", q->op, q->what, dns_tag(cc),
                      curl_easy_strerror(cc), attempt + 1, attempts);
        } else if (status_ok(x->status)) {
            /* a body that ended early without curl noticing (no Content-Length) is a broken body too */
            uint64_t want = q->ranged ? q->hi : UINT64_MAX;
            if (x->status == 206 && x->have_total && x->total < want)
                want = x->total;
            else if (x->status == 200 && x->have_len && x->content_length < want)
                want = x->content_length;
            if (q->sink && want != UINT64_MAX && x->next < want && strcmp(q->method, "HEAD")) {
                if (attempt >= attempts) {
                    char eb[256];
                    rc = hfs3_err(-EIO, "s3: %s %s: body ended at byte %llu of %llu (after %d %s)%s", q->op,
                                  q->what, (unsigned long long)x->next, (unsigned long long)want, attempt,
                                  hfs3_plural(attempt, "attempt", "attempts"), enc_note(x, eb, sizeof eb));
                    break;
                }
                retry = 1;
            } else {
                rc = 0;
                break;
            }
        } else if (x->status == 304 && q->if_none_match) {
            rc = 0;
            break;
        } else if (c->o.throttle_budget_ms > 0 && reply_throttles(x)) {
            /* slow down, not failed: retried past max_retries (each throttle adds an attempt) with a longer
             * backoff, for up to the budget; the caller may give up sooner (a fetch's spare connection leaves) */
            x->throttled++;
            long t = now_ms();
            if (!throttles++)
                throttled_since = t;
            if ((q->on_throttle && q->on_throttle(q->on_throttle_ud)) || t - throttled_since >= c->o.throttle_budget_ms) {
                rc = status_error(x, attempt);
                break;
            }
            attempts++;
            long ms = hfs3_s3_backoff_ms(throttles - 1, c->o.backoff_base_ms, HFS3_S3_THROTTLE_CAP_MS,
                                         x->retry_after_s > 0 ? x->retry_after_s * 1000 : 0, rng_next(c));
            hfs3_info("s3: %s %s: HTTP %ld (throttled, %d in a row), retrying in %ld ms", q->op, q->what,
                      x->status, throttles, ms);
            /* a user waiting up to the budget hears why, once per process (a fleet's every request would flood) */
            static int told;
            if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
                hfs3_warn("s3: %s %s: the server is throttling requests (HTTP %ld); retrying with backoff for up "
                          "to %ld s (HFS3_THROTTLE_BUDGET), a slow start is expected", q->op, q->what, x->status,
                          c->o.throttle_budget_ms / 1000);
            sleep_ms(ms);
            continue;
        } else if ((retryable_status(x->status) || reply_throttles(x)) && attempt < attempts) {
            retry = 1;
            hfs3_info("s3: %s %s: HTTP %ld, retrying (attempt %d of %d)", q->op, q->what, x->status, attempt + 1,
                      attempts);
        } else if (x->status == 412 && resumed && !q->if_match && pinned) {
            rc = hfs3_err(-ESTALE, "s3: %s %s: the object changed while it was read (If-Match %s: 412)", q->op,
                          q->what, pinned);
            break;
        } else {
            rc = status_error(x, attempt);
            break;
        }
        if (retry)
            backoff(c, attempt - 1);
    }
    free(pinned);
    free(url);
    hfs3_buf_free(&path);
    return rc;
}

static void xfer_done(xfer *x)
{
    free(x->etag);
    free(x->last_modified);
    hfs3_buf_free(&x->err);
    x->etag = x->last_modified = NULL;
}

static char *what_of(const hfs3_s3 *c, const char *key)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_buf_addf(&b, "%s/%s", c->r->bucket, key ? key : ""))
        return NULL;
    char *s = hfs3_buf_take(&b, NULL);
    one_line(s);
    return s;
}

int hfs3_s3_get_object(hfs3_s3 *c, const char *key, hfs3_s3_get *g, hfs3_s3_sink sink, void *ud)
{
    g->status = 0;
    g->not_modified = 0;
    g->etag = NULL;
    g->object_size = 0;
    if (g->ranged && g->length == 0)
        return 0;
    if (g->ranged && g->offset + g->length < g->offset)
        return hfs3_err(-EINVAL, "s3: GET %s: range overflows", key);
    char *what = what_of(c, key);
    if (!what)
        return hfs3_err(-ENOMEM, "s3: out of memory");
    req q = {.method = "GET", .op = "GET", .key = key, .what = what, .if_match = g->if_match,
             .if_none_match = g->if_none_match, .ranged = g->ranged, .lo = g->offset,
             .hi = g->offset + g->length, .sink = sink, .ud = ud, .on_throttle = g->on_throttle,
             .on_throttle_ud = g->on_throttle_ud};
    xfer x;
    int rc = perform(c, &q, &x);
    g->status = (int)x.status;
    g->throttled = x.throttled;
    if (rc == 0) {
        g->not_modified = x.status == 304;
        g->etag = x.etag;
        x.etag = NULL;
        if (x.have_total)
            g->object_size = x.total;
        else if (x.status == 200 && x.have_len)
            g->object_size = x.content_length;
    }
    xfer_done(&x);
    free(what);
    return rc;
}

typedef struct buf_sink {
    hfs3_buf *out;
    size_t got, max;
    const char *key;
} buf_sink;

static int to_buf(void *ud, const void *data, size_t n)
{
    buf_sink *s = ud;
    if (n > s->max - s->got)
        return hfs3_err(-EFBIG, "s3: GET %s: object larger than %zu bytes", s->key, s->max);
    s->got += n;
    if (hfs3_buf_add(s->out, data, n))
        return hfs3_err(-ENOMEM, "s3: GET %s: out of memory", s->key);
    return 0;
}

int hfs3_s3_get_buf(hfs3_s3 *c, const char *key, size_t max, hfs3_buf *out, hfs3_s3_get *g)
{
    hfs3_s3_get local;
    memset(&local, 0, sizeof local);
    buf_sink s = {out, 0, max, key};
    int rc = hfs3_s3_get_object(c, key, g ? g : &local, to_buf, &s);
    free(local.etag);
    return rc;
}

int hfs3_s3_head(hfs3_s3 *c, const char *key, hfs3_s3_object *out)
{
    memset(out, 0, sizeof *out);
    char *what = what_of(c, key);
    if (!what)
        return hfs3_err(-ENOMEM, "s3: out of memory");
    req q = {.method = "HEAD", .op = "HEAD", .key = key, .what = what};
    xfer x;
    int rc = perform(c, &q, &x);
    if (rc == 0) {
        if (!x.have_len) {
            rc = hfs3_err(-EIO, "s3: HEAD %s: %ld without Content-Length", what, x.status);
        } else if (!(out->key = hfs3_strdup(key))) {
            rc = hfs3_err(-ENOMEM, "s3: out of memory");
        } else {
            out->size = x.content_length;
            out->etag = x.etag;
            x.etag = NULL;
            out->src_mtime = x.meta_mtime;
            if (x.last_modified) {
                time_t t = curl_getdate(x.last_modified, NULL);
                out->mtime = t < 0 ? 0 : (long long)t;
            }
        }
    }
    xfer_done(&x);
    free(what);
    return rc;
}

int hfs3_s3_put(hfs3_s3 *c, const char *key, const void *data, size_t n, const char *content_type,
                char **etag_out)
{
    if (etag_out)
        *etag_out = NULL;
    char *what = what_of(c, key);
    if (!what)
        return hfs3_err(-ENOMEM, "s3: out of memory");
    static const char empty[1] = "";
    req q = {.method = "PUT", .op = "PUT", .key = key, .what = what, .content_type = content_type,
             .body = data ? data : empty, .body_len = n};
    xfer x;
    int rc = perform(c, &q, &x);
    if (rc == 0 && etag_out) {
        *etag_out = x.etag;
        x.etag = NULL;
    }
    xfer_done(&x);
    free(what);
    return rc;
}

static int to_page(void *ud, const void *data, size_t n)
{
    hfs3_buf *b = ud;
    int rc = hfs3_buf_add(b, data, n);
    return rc == -E2BIG ? hfs3_err(-EIO, "s3: listing page larger than %u bytes", LIST_PAGE_MAX)
                        : rc ? hfs3_err(rc, "s3: out of memory") : 0;
}

/* Every page of a ListObjectsV2 of prefix; with delim, the CommonPrefixes go to prefixes. */
static int list_pages(hfs3_s3 *c, const char *prefix, const char *delim, hfs3_s3_list *out, hfs3_s3_list *prefixes)
{
    if (!prefix)
        prefix = "";
    char *what = what_of(c, prefix);
    if (!what)
        return hfs3_err(-ENOMEM, "s3: out of memory");
    size_t first = out->n, pfirst = prefixes ? prefixes->n : 0;
    char *token = NULL, maxk[24];
    hfs3_buf page;
    hfs3_buf_init(&page, LIST_PAGE_MAX);
    int rc = 0, npages = 0;
    snprintf(maxk, sizeof maxk, "%d", c->o.list_max_keys);
    for (;;) {
        hfs3_kv qv[5];
        size_t nq = 0;
        if (token)
            qv[nq++] = (hfs3_kv){"continuation-token", token};
        if (delim)
            qv[nq++] = (hfs3_kv){"delimiter", delim};
        qv[nq++] = (hfs3_kv){"list-type", "2"};
        if (c->o.list_max_keys > 0)
            qv[nq++] = (hfs3_kv){"max-keys", maxk};
        qv[nq++] = (hfs3_kv){"prefix", prefix};
        hfs3_buf_init(&page, LIST_PAGE_MAX);
        req q = {.method = "GET", .op = "LIST", .key = NULL, .what = what, .query = qv, .nquery = nq,
                 .sink = to_page, .ud = &page, .restart = &page};
        xfer x;
        rc = perform(c, &q, &x);
        xfer_done(&x);
        if (rc)
            break;
        int truncated = 0;
        char *next = NULL;
        rc = hfs3_s3xml_parse_list_dir(hfs3_buf_str(&page), page.len, out, prefixes, &truncated, &next);
        hfs3_buf_free(&page);
        if (rc) {
            rc = hfs3_err_wrap(rc, "s3: LIST %s: page %d", what, npages + 1);
            break;
        }
        npages++;
        free(token);
        token = next;
        if (!truncated)
            break;
        if (!token || !*token) {
            rc = hfs3_err(-EIO, "s3: LIST %s: page %d is truncated but has no NextContinuationToken", what,
                          npages);
            break;
        }
    }
    hfs3_buf_free(&page);
    free(token);
    if (rc) {
        hfs3_s3_list_truncate(out, first);
        hfs3_s3_list_truncate(prefixes, pfirst);
    }
    free(what);
    return rc;
}

int hfs3_s3_list_objects(hfs3_s3 *c, const char *prefix, hfs3_s3_list *out)
{
    return list_pages(c, prefix, NULL, out, NULL);
}

int hfs3_s3_list_dir(hfs3_s3 *c, const char *prefix, hfs3_s3_list *objects, hfs3_s3_list *prefixes)
{
    return list_pages(c, prefix, "/", objects, prefixes);
}
