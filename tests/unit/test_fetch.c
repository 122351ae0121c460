/* test_fetch.c - the fetcher's pure parts: the range plan (how a file is cut into ranged GETs and how many
 * connections are worth opening), the tmp/<sha>.done resume sidecar (its header pins the plan; torn, foreign
 * and out-of-range lines are ignored), HFS3_CONNECTIONS, and the chunk-digest check of a file (what re-verifies a
 * chunk-checked blob after a reboot). Fetching itself: tests/e2e/t_fetch_*.sh. */
#include "harness.h"
#include "hfs3/fetch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hfs3/util.h"

#define MiB (1ULL << 20)

static void plan_is(uint64_t size, int conns, uint64_t hint, uint64_t chunk, uint32_t n, int threads)
{
    uint64_t c = 7;
    uint32_t nc = 7;
    int nt = 7;
    hfs3_fetch_plan(size, conns, hint, &c, &nc, &nt);
    if (c != chunk || nc != n || nt != threads)
        fprintf(stderr, "plan(%llu, %d, %llu) = %llu x %u on %d, want %llu x %u on %d\n", (unsigned long long)size,
                conns, (unsigned long long)hint, (unsigned long long)c, nc, nt, (unsigned long long)chunk, n, threads);
    CHECK(c == chunk && nc == n && nt == threads);
}

static void plans(void)
{
    plan_is(0, 8, 0, 0, 0, 0);                                 /* nothing to fetch */
    plan_is(1, 8, 0, 1, 1, 1);                                 /* small: one plain GET */
    plan_is(2 * MiB, 8, 0, 2 * MiB, 1, 1);
    plan_is(2 * MiB + 1, 8, 0, 2 * MiB, 2, 2);                 /* split, but not below 2 MiB */
    plan_is(3 * MiB, 8, 0, 2 * MiB, 2, 2);
    plan_is(40 * MiB, 8, 0, 5 * MiB, 8, 8);                    /* one range per connection, whole MiB */
    plan_is(40 * MiB, 2, 0, 16 * MiB, 3, 2);                   /* capped at 16 MiB */
    plan_is(41 * MiB + 1, 8, 0, 6 * MiB, 7, 7);
    plan_is(1ULL << 30, 8, 0, 16 * MiB, 64, 8);
    plan_is((5ULL << 30) + 3, 8, 0, 16 * MiB, 321, 8);         /* past 32 bits */
    plan_is((1ULL << 40), 64, 0, 16 * MiB, 65536, 64);
    plan_is(10 * MiB, 0, 0, 10 * MiB, 1, 1);                   /* connections < 1 means 1 */
    plan_is(10 * MiB, 8, 1000, 64 << 10, 160, 8);              /* a hint is raised to 64 KiB */
    plan_is(10 * MiB, 8, 4 * MiB, 4 * MiB, 3, 3);
    plan_is(100, 8, 4 * MiB, 4 * MiB, 1, 1);
    /* whatever the inputs: ranges cover the file exactly, no range is empty, threads <= ranges and conns */
    for (uint64_t size = 1; size < (1ULL << 36); size = size * 3 + 12345)
        for (int conns = 1; conns <= 64; conns *= 4) {
            uint64_t c;
            uint32_t n;
            int t;
            hfs3_fetch_plan(size, conns, 0, &c, &n, &t);
            CHECK(c > 0 && n > 0 && (uint64_t)(n - 1) * c < size && size <= (uint64_t)n * c);
            CHECK(t >= 1 && t <= conns && (uint32_t)t <= n);
            CHECK(c <= HFS3_FETCH_CHUNK || c == size);
        }
}

static int parse(const char *text, uint64_t size, uint64_t chunk, uint32_t n, unsigned char *done)
{
    return hfs3_fetch_parse_done(text, strlen(text), size, chunk, n, done);
}

static void sidecar(void)
{
    char hdr[96];
    hfs3_fetch_done_header((5ULL << 30) + 3, 16 * MiB, hdr, sizeof hdr);
    CHECK_EQ_STR(hdr, "hfs3-done 1 5368709123 16777216\n");
    hfs3_fetch_done_header(10, 20, hdr, sizeof hdr);
    CHECK_EQ_STR(hdr, "hfs3-done 1 10 20\n");

    unsigned char done[8];
    memset(done, 9, sizeof done);
    CHECK_EQ_INT(parse("hfs3-done 1 100 20\n", 100, 20, 5, done), 0);
    CHECK(!done[0] && !done[4]);
    CHECK_EQ_INT(parse("hfs3-done 1 100 20\n0\n3\n", 100, 20, 5, done), 2);
    CHECK(done[0] && !done[1] && !done[2] && done[3] && !done[4]);
    /* a torn last line (killed mid-write) is not done; duplicates count once */
    CHECK_EQ_INT(parse("hfs3-done 1 100 20\n1\n1\n4", 100, 20, 5, done), 1);
    CHECK(done[1] && !done[4]);
    /* out of range, not a number, empty, signs, spaces, too long: ignored */
    CHECK_EQ_INT(parse("hfs3-done 1 100 20\n5\n99\nx\n\n-1\n 2\n2 \n00000000002\n4\n", 100, 20, 5, done), 1);
    CHECK(done[4] && !done[2]);
    CHECK_EQ_INT(parse("hfs3-done 1 100 20\n0002\n", 100, 20, 5, done), 1);
    CHECK(done[2]);
    /* another plan (size or chunk) or another format: start over */
    CHECK_EQ_INT(parse("hfs3-done 1 101 20\n0\n", 100, 20, 5, done), -EINVAL);
    CHECK_EQ_INT(parse("hfs3-done 1 100 21\n0\n", 100, 20, 5, done), -EINVAL);
    CHECK_EQ_INT(parse("hfs3-done 2 100 20\n0\n", 100, 20, 5, done), -EINVAL);
    CHECK_EQ_INT(parse("hfs3-done 1 100 20", 100, 20, 5, done), -EINVAL);
    CHECK_EQ_INT(parse("", 100, 20, 5, done), -EINVAL);
    CHECK_EQ_INT(parse("hfs3-done 1 1002 20\n0\n", 100, 20, 5, done), -EINVAL);
}

static void connections(void)
{
    static const struct {
        const char *v;
        int want;
    } cases[] = {{NULL, 0}, {"", 0}, {"auto", 0}, {"1", 1}, {"4", 4}, {"64", 64}, {"0", 0}, {"65", 0}, {"-3", 0},
                 {"4x", 0}, {"x", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].v)
            setenv("HFS3_CONNECTIONS", cases[i].v, 1);
        else
            unsetenv("HFS3_CONNECTIONS");
        CHECK_EQ_INT(hfs3_fetch_connections(), cases[i].want);
    }
    unsetenv("HFS3_CONNECTIONS");
}

/* The tuner of the connections per file: doubles while the rate grows by the gain, settles one step back at the
 * first doubling that does not, never past max, and never judges a window shorter than its time and bytes; a
 * settled count tries again after the re-probe interval, unless the server refused a connection. */
static void tune(void)
{
    const uint64_t M = 1u << 20, W = HFS3_FETCH_TUNE_BYTES;
    const double T = HFS3_FETCH_TUNE_WINDOW_MS / 1000.0;
    hfs3_fetch_tune t;
    hfs3_fetch_tune_init(&t, 64);
    CHECK_EQ_INT(t.level, HFS3_FETCH_TUNE_START);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 5 * M, 10.0), 2); /* opens the first window */
    /* too short in time, then too few bytes: no verdict */
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 5 * M + 4 * W, 10.0 + T / 2), 2);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 5 * M + 2 * W - 1, 10.0 + 1.5 * T), 2);
    /* 2 connections: 2 W in 2 T; then 4 of them twice the rate: 8 */
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 5 * M + 2 * W, 10.0 + 2 * T), 4);
    uint64_t b = 5 * M + 2 * W;
    double now = 10.0 + 2 * T;
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, b + 4 * W, now + 2 * T), 8);
    b += 4 * W;
    now += 2 * T;
    /* 8 gives 1.1x what 4 gave: back to 4 */
    now += 8 * W * 2 * T / (4 * W) / 1.1;
    b += 8 * W;
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, b, now), 4);
    CHECK(t.settled);
    /* until the re-probe is due, 4 whatever comes */
    const double R = HFS3_FETCH_TUNE_REPROBE_MS / 1000.0;
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, b + 1000 * W, now + R * 0.9), 4);
    CHECK(t.settled);
    /* then one doubling again, judged on a fresh window at 4: 8 now gives 3x what 4 gives (the link got
     * better), and 16 no more than 8: settled at 8 */
    b += 1000 * W;
    now += R;
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, b, now), 4);
    CHECK(!t.settled);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, b + 4 * W, now + 1.0), 8);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, b + 4 * W + 12 * W, now + 2.0), 16);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, b + 16 * W + 16 * W, now + 2.0 + 16.0 / 13), 8);
    CHECK(t.settled);
    /* just at the gain: kept */
    hfs3_fetch_tune_init(&t, 64);
    hfs3_fetch_tune_step(&t, 0, 0);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2 * W, 1.0), 4);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2 * W + 4 * W, 1.0 + 4.0 / 2.41), 8);
    /* slower with more: back */
    hfs3_fetch_tune_init(&t, 64);
    hfs3_fetch_tune_step(&t, 0, 0);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2 * W, 1.0), 4);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 6 * W, 3.0), 2);
    CHECK(t.settled);
    /* the ceiling: 2 -> 3, and at 3 no further step */
    hfs3_fetch_tune_init(&t, 3);
    hfs3_fetch_tune_step(&t, 0, 0);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2 * W, 1.0), 3);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2 * W + 3 * W, 1.5), 3);
    CHECK(t.settled);
    /* one connection at most: one */
    hfs3_fetch_tune_init(&t, 1);
    CHECK_EQ_INT(t.level, 1);
    hfs3_fetch_tune_step(&t, 0, 0);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 100 * W, 5.0), 1);
    CHECK(t.settled);
    /* throttled (503 SlowDown): AIMD. Halved, once per burst; no doubling again; one more per quiet
     * HFS3_FETCH_AIMD_GROW_MS, up to the count it had when first throttled */
    const double H = HFS3_FETCH_AIMD_HOLD_MS / 1000.0, G = HFS3_FETCH_AIMD_GROW_MS / 1000.0;
    hfs3_fetch_tune_init(&t, 64);
    hfs3_fetch_tune_step(&t, 0, 0);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2 * W, 1.0), 4);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 6 * W, 2.0), 8);
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 2.0), 4);
    CHECK(t.settled);
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 2.0 + H / 2), 4); /* the same burst: not halved again */
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 2.0 + H * 1.5), 2); /* a later one is */
    double t0 = 2.0 + H * 1.5;
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 100 * W, t0 + G / 2), 2); /* not quiet long enough */
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 1000 * W, t0 + G), 3);   /* additive: one more */
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2000 * W, t0 + G * 1.5), 3);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 3000 * W, t0 + G * 2), 4);
    for (int k = 3; k < 40; k++)
        hfs3_fetch_tune_step(&t, (uint64_t)k * 1000 * W, t0 + G * k);
    CHECK_EQ_INT(t.level, 8); /* back to where it was throttled, never doubling past it */
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 1000.0), 4);
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 1000.0 + H), 2);
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 1000.0 + 2 * H), 1);
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 1000.0 + 3 * H), 1); /* never below one */
    /* throttled at the start: halved from the start, no doublings */
    hfs3_fetch_tune_init(&t, 64);
    CHECK_EQ_INT(hfs3_fetch_tune_throttled(&t, 0.5), HFS3_FETCH_TUNE_START / 2);
    hfs3_fetch_tune_step(&t, 0, 1.0);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 100 * W, 1.1), HFS3_FETCH_TUNE_START / 2);
    CHECK(t.rate == 0);
    /* a closed window leaves its rate for the range planner */
    hfs3_fetch_tune_init(&t, 64);
    hfs3_fetch_tune_step(&t, 0, 0);
    CHECK_EQ_INT(hfs3_fetch_tune_step(&t, 2 * W, 1.0), 4);
    CHECK(t.rate == 2.0 * W && t.rate_level == 2);
}

/* Chunks per GET: 8 MiB chunks, ranges from the link (half a second at one connection's rate), larger after
 * throttling, at most 64 MiB, and never so large that the chunks left stop going round the connections. */
static void span(void)
{
    const uint64_t C = 8u << 20;
    const double MB = 1 << 20;
    CHECK_EQ_INT(hfs3_fetch_span(C, 100, 8, 0, 0), 1);            /* nothing measured: 8 MiB */
    CHECK_EQ_INT(hfs3_fetch_span(C, 100, 8, 10 * MB, 0), 1);      /* 10 MiB/s a connection: 8 MiB pays */
    CHECK_EQ_INT(hfs3_fetch_span(C, 100, 8, 64 * MB, 0), 4);      /* 32 MiB a half second */
    CHECK_EQ_INT(hfs3_fetch_span(C, 1000, 8, 900 * MB, 0), 8);    /* 64 MiB at most */
    CHECK_EQ_INT(hfs3_fetch_span(C, 1000, 8, 0, 32u << 20), 4);   /* throttled: the floor */
    CHECK_EQ_INT(hfs3_fetch_span(C, 1000, 8, 0, 1u << 30), 8);    /* a floor past the most: the most */
    CHECK_EQ_INT(hfs3_fetch_span(C, 20, 8, 900 * MB, 0), 2);      /* 20 chunks left over 8 connections */
    CHECK_EQ_INT(hfs3_fetch_span(C, 7, 8, 900 * MB, 1u << 30), 1); /* fewer than the connections: one each */
    CHECK_EQ_INT(hfs3_fetch_span(C, 1, 1, 900 * MB, 1u << 30), 1);
    CHECK_EQ_INT(hfs3_fetch_span(C, 1000, 0, 900 * MB, 0), 8);    /* no count: taken as one */
    CHECK_EQ_INT(hfs3_fetch_span(0, 1000, 8, 900 * MB, 0), 1);
    CHECK_EQ_INT(hfs3_fetch_span(2u << 20, 1000, 1, 900 * MB, 0), 32); /* 2 MiB chunks: 64 MiB is 32 of them */
}

/* A temp file holding data[0..n), open read-write, already unlinked. */
static int temp_with(const unsigned char *data, size_t n)
{
    char path[] = "/tmp/hfs3-test-chunks-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    unlink(path);
    if (write(fd, data, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    return fd;
}

static void chunk_check(void)
{
    enum { CH = 1 << 20, N = 2 * CH + 12345 };
    unsigned char *d = malloc(N);
    CHECK(d != NULL);
    if (!d)
        return;
    for (size_t i = 0; i < N; i++)
        d[i] = (unsigned char)(i * 131 + (i >> 11));
    char digests[3 * 64 + 1];
    for (int i = 0; i < 3; i++) {
        size_t off = (size_t)i * CH, len = N - off < CH ? N - off : CH;
        char hex[65];
        hfs3_sha256_hexof(d + off, len, hex);
        memcpy(digests + 64 * i, hex, 64);
    }
    digests[192] = 0;
    uint32_t bad = 99;
    int fd = temp_with(d, N);
    CHECK(fd >= 0);
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, N, CH, digests, &bad), 0);
    CHECK_EQ_INT((int)bad, 0);
    /* the digests must fit the size: one too few, one too many, a chunk size of 0 */
    char shortd[2 * 64 + 1];
    memcpy(shortd, digests, 128);
    shortd[128] = 0;
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, N, CH, shortd, &bad), -EINVAL);
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, 2 * CH, CH, digests, &bad), -EINVAL);
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, N, 0, digests, &bad), -EINVAL);
    /* one byte changed in the middle chunk: exactly that chunk */
    unsigned char x = d[CH + 77] ^ 1;
    CHECK(pwrite(fd, &x, 1, CH + 77) == 1);
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, N, CH, digests, &bad), 0);
    CHECK_EQ_INT((int)bad, 1);
    /* zeroed (what a crash leaves): every chunk */
    unsigned char *z = calloc(1, N);
    CHECK(z != NULL && pwrite(fd, z, N, 0) == N);
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, N, CH, digests, &bad), 0);
    CHECK_EQ_INT((int)bad, 3);
    /* torn: the file is shorter than the manifest says: the missing tail does not match */
    CHECK(pwrite(fd, d, N, 0) == N && ftruncate(fd, CH + 10) == 0);
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, N, CH, digests, &bad), 0);
    CHECK_EQ_INT((int)bad, 2);
    /* another file's digests (a manifest that lies about the chunks) */
    for (size_t i = 0; i < 192; i++)
        digests[i] = digests[i] == 'a' ? 'b' : 'a';
    CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, d, N, 0) == N);
    CHECK_EQ_INT(hfs3_fetch_check_chunks(fd, N, CH, digests, &bad), 0);
    CHECK_EQ_INT((int)bad, 3);
    close(fd);
    free(z);
    free(d);
}

int main(void)
{
    setenv("HFS3_LOG", "error", 1); /* the warnings of bad HFS3_CONNECTIONS values are expected */
    TEST(plans);
    TEST(sidecar);
    TEST(connections);
    TEST(tune);
    TEST(span);
    TEST(chunk_check);
    return t_done("test_fetch");
}
