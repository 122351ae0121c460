#include "harness.h"
#include "hfs3/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static void buf_cap(void)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 8);
    CHECK_EQ_INT(hfs3_buf_adds(&b, "abcd"), 0);
    CHECK_EQ_INT(hfs3_buf_addf(&b, "%d", 123), 0);
    CHECK_EQ_STR(hfs3_buf_str(&b), "abcd123");
    CHECK_EQ_INT(hfs3_buf_adds(&b, "xy"), -E2BIG);
    CHECK(b.data == NULL && b.len == 0);
    hfs3_buf_init(&b, 0);
    for (int i = 0; i < 1000; i++)
        CHECK_EQ_INT(hfs3_buf_addf(&b, "%0300d", i), 0);
    CHECK_EQ_INT(b.len, 300000);
    size_t n;
    char *s = hfs3_buf_take(&b, &n);
    CHECK_EQ_INT(n, 300000);
    free(s);
}

static void hex_sha(void)
{
    char hex[65];
    hfs3_sha256_hexof("abc", 3, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hfs3_is_sha256_hex(hex));
    CHECK(!hfs3_is_sha256_hex("BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    unsigned char raw[32];
    CHECK_EQ_INT(hfs3_unhex(hex, raw, 32), 0);
    CHECK_EQ_INT(raw[0], 0xba);
    CHECK_EQ_INT(hfs3_unhex("zz", raw, 1), -EINVAL);
    hfs3_sha256_ctx *h = hfs3_sha256_new();
    hfs3_sha256_update(h, "a", 1);
    hfs3_sha256_update(h, "bc", 2);
    unsigned char md[32];
    hfs3_sha256_final(h, md);
    hfs3_hex(md, 32, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hfs3_sha256_free(h);
}

static void errors(void)
{
    CHECK_EQ_INT(hfs3_err(-ENOENT, "key %s", "a/b"), -ENOENT);
    CHECK_EQ_INT(hfs3_err_wrap(-ENOENT, "remote %s", "r:"), -ENOENT);
    CHECK_EQ_STR(hfs3_errmsg(), "remote r:: key a/b");
}

static int mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

/* hfs3_write_file_atomic keeps what the umask takes; the _ex form and hfs3_create_file with exact set
 * do not (the cache's shared mode needs its group bits). */
static void files(void)
{
    char dir[] = "/tmp/hfs3-test-util.XXXXXX", p[256], q[256], r[256], bad[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(p, sizeof p, "%s/plain", dir);
    snprintf(q, sizeof q, "%s/exact", dir);
    snprintf(r, sizeof r, "%s/created", dir);
    snprintf(bad, sizeof bad, "%s/missing/x", dir);
    mode_t old = umask(027);

    CHECK_EQ_INT(hfs3_write_file_atomic(p, "first", 5, 0664), 0);
    CHECK_EQ_INT(hfs3_write_file_atomic(p, "second", 6, 0664), 0);
    char *s = NULL;
    size_t n = 0;
    CHECK_EQ_INT(hfs3_read_file(p, 100, &s, &n), 0);
    CHECK_EQ_STR(s, "second");
    CHECK_EQ_INT(n, 6);
    free(s);
    CHECK_EQ_INT(mode_of(p), 0640);

    CHECK_EQ_INT(hfs3_write_file_atomic_ex(q, "x", 1, 0664, 1), 0);
    CHECK_EQ_INT(mode_of(q), 0664);
    CHECK_EQ_INT(hfs3_write_file_atomic_ex(q, "", 0, 0440, 1), 0);
    CHECK_EQ_INT(mode_of(q), 0440);
    CHECK_EQ_INT(hfs3_read_file(q, 100, &s, &n), 0);
    CHECK_EQ_INT(n, 0);
    free(s);

    int fd = hfs3_create_file(r, O_RDWR, 0660, 1);
    CHECK(fd >= 0);
    close(fd);
    CHECK_EQ_INT(mode_of(r), 0660);
    unlink(r);
    fd = hfs3_create_file(r, O_RDWR, 0660, 0);
    CHECK(fd >= 0);
    close(fd);
    CHECK_EQ_INT(mode_of(r), 0640);

    CHECK_EQ_INT(hfs3_write_file_atomic_ex(bad, "x", 1, 0600, 1), -ENOENT);
    CHECK(strstr(hfs3_errmsg(), "/missing/x.tmp.") != NULL);
    CHECK_EQ_INT(hfs3_create_file(bad, O_RDWR, 0600, 0), -ENOENT);
    CHECK(strstr(hfs3_errmsg(), bad) != NULL);

    umask(old);
    /* the temp file was renamed away, not left beside */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/plain.tmp.%ld", dir, (long)getpid());
    CHECK(access(tmp, F_OK) < 0);
    unlink(p);
    unlink(q);
    unlink(r);
    CHECK_EQ_INT(rmdir(dir), 0);
}

typedef int (*update_fd_fn)(hfs3_sha256_ctx *, int, uint64_t, uint64_t, void *, size_t, uint64_t *);

/* Minor page faults of this thread while fn hashes the whole of fd (after a first pass, so that the code, the
 * buffer and the page cache are warm): a mapping faults its pages in, pread copies into a buffer already there. */
static long hash_faults(update_fd_fn fn, int fd, char *buf)
{
    long faults = 0;
    for (int pass = 0; pass < 2; pass++) {
        struct rusage a, b;
        hfs3_sha256_ctx *h = hfs3_sha256_new();
        getrusage(RUSAGE_THREAD, &a);
        CHECK_EQ_INT(fn(h, fd, 0, UINT64_MAX, buf, 1 << 16, NULL), 0);
        getrusage(RUSAGE_THREAD, &b);
        hfs3_sha256_free(h);
        faults = b.ru_minflt - a.ru_minflt;
    }
    return faults;
}

/* hfs3_sha256_update_fd_fresh gives the same digest through a mapping (our own file, nobody else may write it)
 * and through pread (a file others may write), at offsets inside a page and across the mapping's windows, and
 * -ENODATA past the end; hfs3_sha256_update_fd the same always through pread (a file from before this process:
 * a page that cannot be read is -EIO, not SIGBUS). Which reader ran is told by the page faults. */
static void hash_ranges(void)
{
    char dir[] = "/tmp/hfs3-test-util.XXXXXX", p[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(p, sizeof p, "%s/data", dir);
    size_t size = (9u << 20) + 4099;
    unsigned char *data = malloc(size), md[32], want[32];
    char *buf = malloc(1 << 16);
    CHECK(data && buf);
    if (!data || !buf)
        return;
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        data[i] = (unsigned char)x;
    }
    int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK_EQ_INT(write(fd, data, size), (long long)size);
    const uint64_t ranges[][2] = {{0, 9u << 20}, {4097, (5u << 20) + 3}, {1, size - 1}, {(4u << 20) - 1, 2},
                                  {size - 5, 5}, {8191, UINT64_MAX}};
    /* 0: fresh, ours alone (mapped); 1: fresh, 0666 (others may write it: pread); 2: not fresh (pread) */
    for (int mode = 0; mode < 3; mode++) {
        update_fd_fn fn = mode < 2 ? hfs3_sha256_update_fd_fresh : hfs3_sha256_update_fd;
        CHECK_EQ_INT(fchmod(fd, mode == 1 ? 0666 : 0600), 0);
        long faults = hash_faults(fn, fd, buf);
        if (mode == 0 ? faults < 3 : faults > 2) /* 3 windows of 4 MiB, each mapped anew */
            fprintf(stderr, "hash_ranges: mode %d: %ld page faults\n", mode, faults);
        CHECK(mode == 0 ? faults >= 3 : faults <= 2);
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
            uint64_t off = ranges[r][0], len = ranges[r][1], n = len == UINT64_MAX ? size - off : len, done = 0;
            hfs3_sha256_ctx *h = hfs3_sha256_new();
            CHECK_EQ_INT(fn(h, fd, off, len, buf, 1 << 16, &done), 0);
            CHECK_EQ_INT(done, n);
            hfs3_sha256_final(h, md);
            hfs3_sha256_free(h);
            hfs3_sha256(data + off, (size_t)n, want);
            CHECK(!memcmp(md, want, 32));
        }
        hfs3_sha256_ctx *h = hfs3_sha256_new();
        uint64_t done = 0;
        CHECK_EQ_INT(fn(h, fd, size - 10, 20, buf, 1 << 16, &done), -ENODATA);
        CHECK_EQ_INT(done, 10);
        CHECK_EQ_INT(fn(h, fd, size + 10, 20, buf, 1 << 16, &done), -ENODATA);
        CHECK_EQ_INT(done, 0);
        hfs3_sha256_free(h);
    }
    close(fd);
    unlink(p);
    rmdir(dir);
    free(data);
    free(buf);
}

/* the noun that goes with a count in the helper's messages (issue 46: "a hub of 1 repositories") */
static void plural(void)
{
    CHECK_EQ_STR(hfs3_plural(0, "file", "files"), "files");
    CHECK_EQ_STR(hfs3_plural(1, "file", "files"), "file");
    CHECK_EQ_STR(hfs3_plural(2, "repository", "repositories"), "repositories");
    CHECK_EQ_STR(hfs3_plural(1, "repository", "repositories"), "repository");
    CHECK_EQ_STR(hfs3_plural(11, "entry", "entries"), "entries");
    CHECK_EQ_STR(hfs3_plural(1ULL << 32 | 1, "byte", "bytes"), "bytes");
    CHECK_EQ_STR(hfs3_plural(UINT64_MAX, "byte", "bytes"), "bytes");
}

int main(void)
{
    TEST(plural);
    TEST(buf_cap);
    TEST(hex_sha);
    TEST(errors);
    TEST(files);
    TEST(hash_ranges);
    return t_done("test_util");
}
