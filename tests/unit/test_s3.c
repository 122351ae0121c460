/* test_s3.c - the parts of s3.c that need no server: addressing, key encoding, argument checks, and the
 * retry backoff (against a port nobody listens on, with nanosleep replaced to record what was asked).
 * Requests against the real server are in tests/e2e/t_s3_client.sh. */
#include "harness.h"
#include "hfs3/s3.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* This program's nanosleep: s3.c's backoff calls it (libcurl does not), so each retry's pause is recorded
 * instead of waited: the test checks what was asked for, never how long anything took. */
#define MAX_SLEEPS 64
static long slept_ms[MAX_SLEEPS];
static int nslept;
int nanosleep(const struct timespec *req, struct timespec *rem)
{
    (void)rem;
    if (nslept < MAX_SLEEPS)
        slept_ms[nslept] = (long)req->tv_sec * 1000 + req->tv_nsec / 1000000;
    nslept++;
    return 0;
}

static hfs3_remote remote(const char *endpoint, int path_style)
{
    hfs3_remote r;
    memset(&r, 0, sizeof r);
    r.spec = (char *)"test:models";
    r.bucket = (char *)"models";
    r.prefix = (char *)"";
    r.endpoint = (char *)endpoint;
    r.region = (char *)"us-east-1";
    r.access_key = (char *)"AK";
    r.secret_key = (char *)"SK";
    r.path_style = path_style;
    r.tls_verify = 1;
    return r;
}

static void url_is(const hfs3_remote *r, const char *key, const char *want)
{
    hfs3_s3 *c = NULL;
    CHECK_EQ_INT(hfs3_s3_new(r, NULL, &c), 0);
    if (!c)
        return;
    char *u = hfs3_s3_url(c, key);
    CHECK_EQ_STR(u, want);
    free(u);
    hfs3_s3_free(c);
}

static void addressing(void)
{
    hfs3_remote p = remote("http://127.0.0.1:9000", 1);
    url_is(&p, "qwen/config.json", "http://127.0.0.1:9000/models/qwen/config.json");
    /* every byte but unreserved and '/' is encoded, UTF-8 byte by byte, uppercase hex */
    url_is(&p, "a b+c/\xc3\xa9~$@=&.bin", "http://127.0.0.1:9000/models/a%20b%2Bc/%C3%A9~%24%40%3D%26.bin");
    url_is(&p, "dir/", "http://127.0.0.1:9000/models/dir/");
    url_is(&p, NULL, "http://127.0.0.1:9000/models");

    hfs3_remote v = remote("https://s3.us-east-1.amazonaws.com", 0);
    url_is(&v, "qwen/model-00001-of-00002.safetensors",
           "https://models.s3.us-east-1.amazonaws.com/qwen/model-00001-of-00002.safetensors");
    url_is(&v, NULL, "https://models.s3.us-east-1.amazonaws.com/");

    hfs3_remote sub = remote("https://gw.example.com:8443/s3", 1);
    url_is(&sub, "k", "https://gw.example.com:8443/s3/models/k");
}

static void bad_remotes(void)
{
    hfs3_s3 *c = (hfs3_s3 *)1;
    hfs3_remote r = remote("ftp://host", 1);
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    CHECK(c == NULL);
    r = remote("http://", 1);
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    r = remote("http://h", 1);
    r.secret_key = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "SK") == NULL);
    r = remote("http://h", 1);
    r.bucket = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    /* anonymous is fine */
    r = remote("http://h", 1);
    r.access_key = r.secret_key = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), 0);
    hfs3_s3_free(c);
    hfs3_s3_free(NULL);
}

static int never(void *ud, const void *d, size_t n)
{
    (void)ud, (void)d, (void)n;
    return -EIO;
}

static void empty_range(void)
{
    /* a zero-length range asks nothing of the server (no request, no sink call) */
    hfs3_remote r = remote("http://127.0.0.1:1", 1);
    hfs3_s3 *c = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), 0);
    hfs3_s3_get g;
    memset(&g, 0, sizeof g);
    g.ranged = 1;
    g.offset = 10;
    CHECK_EQ_INT(hfs3_s3_get_object(c, "k", &g, never, NULL), 0);
    CHECK(g.etag == NULL);
    hfs3_s3_free(c);
}

/* Full-jitter exponential backoff: before retry k (k = 0..4 for 6 attempts) a pause in [0, min(base * 2^k, 5 s)].
 * Over 40 failed requests, each retry's largest pause must pass half its cap (a backoff that never grows, or
 * never sleeps, fails; by chance once in 2^40), and none may exceed it. */
static void backoff_grows(int base, int runs)
{
    hfs3_remote r = remote("http://127.0.0.1:1", 1);
    hfs3_s3_opts o = {.max_retries = 5, .backoff_base_ms = base, .connect_timeout_ms = 2000};
    long max[5] = {0}, total = 0;
    int bad_count = 0, over_cap = 0;
    /* one client for all the requests: its jitter generator is seeded once (from the time, the pid and its
     * address, so clients made one after another in one second at one address would draw the same pauses) */
    hfs3_s3 *c = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, &o, &c), 0);
    if (!c)
        return;
    for (int run = 0; run < runs; run++) {
        hfs3_buf b;
        hfs3_buf_init(&b, 0);
        nslept = 0;
        int rc = hfs3_s3_get_buf(c, "k", 100, &b, NULL);
        hfs3_buf_free(&b);
        CHECK_EQ_INT(rc, -ECONNREFUSED);
        if (run == 0)
            CHECK(strstr(hfs3_errmsg(), "(after 6 attempts)") != NULL);
        if (nslept != 5) {
            bad_count++;
            continue;
        }
        for (int k = 0; k < 5; k++) {
            long cap = (long)base << k;
            if (cap > 5000)
                cap = 5000;
            if (slept_ms[k] < 0 || slept_ms[k] > cap)
                over_cap++;
            if (slept_ms[k] > max[k])
                max[k] = slept_ms[k];
            total += slept_ms[k];
        }
    }
    hfs3_s3_free(c);
    CHECK_EQ_INT(bad_count, 0); /* one pause between each two of the 6 attempts */
    CHECK_EQ_INT(over_cap, 0);
    CHECK(total > 0);
    for (int k = 0; k < 5; k++) {
        long cap = (long)base << k;
        if (cap > 5000)
            cap = 5000;
        if (max[k] <= cap / 2)
            fprintf(stderr, "backoff base %d: retry %d paused at most %ld ms of %ld\n", base, k, max[k], cap);
        CHECK(max[k] > cap / 2);
    }
}

static void backoff(void)
{
    backoff_grows(100, 40);   /* caps 100, 200, 400, 800, 1600 ms */
    backoff_grows(2000, 40);  /* caps 2000, 4000, then 5000 (the ceiling) */
    /* no retries: one attempt, no pause */
    hfs3_remote r = remote("http://127.0.0.1:1", 1);
    hfs3_s3_opts o = {.max_retries = -1, .backoff_base_ms = 100};
    hfs3_s3 *c = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, &o, &c), 0);
    hfs3_s3_object ob;
    nslept = 0;
    CHECK_EQ_INT(hfs3_s3_head(c, "k", &ob), -ECONNREFUSED);
    hfs3_s3_object_free(&ob);
    CHECK_EQ_INT(nslept, 0);
    CHECK(strstr(hfs3_errmsg(), "attempts") == NULL);
    hfs3_s3_free(c);
}

/* Throttling (503 SlowDown): which replies are throttles, and the full-jitter pause with its ceiling and
 * Retry-After. */
static void throttle(void)
{
    CHECK(hfs3_s3_is_throttle(503, NULL));
    CHECK(hfs3_s3_is_throttle(503, "ServiceUnavailable"));
    CHECK(hfs3_s3_is_throttle(429, NULL));
    CHECK(hfs3_s3_is_throttle(400, "Throttling"));
    CHECK(hfs3_s3_is_throttle(400, "RequestLimitExceeded"));
    CHECK(hfs3_s3_is_throttle(500, "SlowDown"));
    CHECK(!hfs3_s3_is_throttle(500, "InternalError"));
    CHECK(!hfs3_s3_is_throttle(500, NULL));
    CHECK(!hfs3_s3_is_throttle(403, "AccessDenied"));
    CHECK(!hfs3_s3_is_throttle(200, "SlowDown"));
    CHECK(!hfs3_s3_is_throttle(404, "SlowDownish"));
    /* [0, min(cap, base * 2^k)]: the draw's largest value reaches the bound, never passes it */
    long cap = HFS3_S3_THROTTLE_CAP_MS;
    for (int k = 0; k < 12; k++) {
        long bound = 100L << k < cap ? 100L << k : cap;
        CHECK_EQ_INT(hfs3_s3_backoff_ms(k, 100, cap, 0, (uint64_t)bound), bound);
        CHECK_EQ_INT(hfs3_s3_backoff_ms(k, 100, cap, 0, (uint64_t)bound + 1), 0);
        CHECK_EQ_INT(hfs3_s3_backoff_ms(k, 100, cap, 0, UINT64_MAX - 1) <= bound, 1);
        CHECK_EQ_INT(hfs3_s3_backoff_ms(k, 100, cap, 0, 0), 0);
    }
    CHECK_EQ_INT(hfs3_s3_backoff_ms(1000, 100, cap, 0, (uint64_t)cap), cap); /* no overflow far out */
    /* Retry-After: at least that long, whatever the draw */
    CHECK_EQ_INT(hfs3_s3_backoff_ms(0, 100, cap, 3000, 0), 3000);
    CHECK_EQ_INT(hfs3_s3_backoff_ms(20, 100, cap, 3000, (uint64_t)cap), cap);
}

/* A server that keeps answering 503 SlowDown: retried past max_retries with growing pauses until the budget
 * (a real clock) runs out; on_throttle can stop it at once. Against a port nobody listens on there is no 503,
 * so this part is in the e2e tests (t_fetch_slowdown); here only the give-up hook's absence of effect on a
 * connection refused: a refused connection is no throttle. */
static void throttle_not_refused(void)
{
    hfs3_remote r = remote("http://127.0.0.1:1", 1);
    hfs3_s3_opts o = {.max_retries = 2, .backoff_base_ms = 100};
    hfs3_s3 *c = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, &o, &c), 0);
    hfs3_s3_get g = {0};
    nslept = 0;
    CHECK_EQ_INT(hfs3_s3_get_object(c, "k", &g, NULL, NULL), -ECONNREFUSED);
    CHECK_EQ_INT(g.throttled, 0);
    CHECK_EQ_INT(nslept, 2);
    free(g.etag);
    hfs3_s3_free(c);
}

int main(void)
{
    TEST(throttle);
    TEST(throttle_not_refused);
    TEST(addressing);
    TEST(bad_remotes);
    TEST(empty_range);
    TEST(backoff);
    return t_done("test_s3");
}
