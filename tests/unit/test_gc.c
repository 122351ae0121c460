/* test_gc.c - sizes (HFS3_CACHE_MAX), the least-recently-used eviction before a fetch (never the blob being
 * fetched, nothing removed for a file that cannot fit), last use from the lock file, and verify's re-hash. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/cache.h"
#include "hfs3/gc.h"
#include "hfs3/util.h"
#include "../../shim/lastuse.c" /* the shim's entry point, built here too: its path handling is tested below */
#undef syscall
/* lastuse.c's raw calls go to the shim's sh_libc_syscall (shim/sysc.c, not linked here): libc's syscall() stands in
 * for it, under its assembler name, with sysc.c's six named arguments */
long test_libc_syscall(long n, long a, long b, long c, long d, long e) __asm__("sh_libc_syscall");
long test_libc_syscall(long n, long a, long b, long c, long d, long e)
{
    return syscall(n, a, b, c, d, e);
}

static char root[128];

static void sizes(void)
{
    static const struct {
        const char *s;
        uint64_t fs, want;
        int rc;
    } t[] = {
        {"0", 0, 0, 0},           {"123", 0, 123, 0},        {"10K", 0, 10240, 0},
        {"10k", 0, 10240, 0},     {"1.5G", 0, 3ull << 29, 0}, {"2T", 0, 2ull << 40, 0},
        {"4MiB", 0, 4u << 20, 0}, {"4MB", 0, 4u << 20, 0},   {"50%", 1000, 500, 0},
        {"100%", 1000, 1000, 0},  {"", 0, 0, -EINVAL},       {"-1", 0, 0, -EINVAL},
        {"1X", 0, 0, -EINVAL},    {"101%", 1000, 0, -EINVAL}, {"1.5", 0, 0, -EINVAL},
        {"K", 0, 0, -EINVAL},     {"nan", 0, 0, -EINVAL},    {"99999999T", 0, 0, -EINVAL},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint64_t v = 0;
        int rc = hfs3_gc_parse_size(t[i].s, t[i].fs, &v);
        CHECK_EQ_INT(rc, t[i].rc);
        if (rc == 0)
            CHECK_EQ_INT(v, t[i].want);
    }
}

/* A blob named by the sha of its content, its lock file last used `age` seconds ago. */
static void put_blob(const char *dir, int fill, size_t n, long age, char sha[65])
{
    char *buf = malloc(n), path[512];
    memset(buf, fill, n);
    hfs3_sha256_hexof(buf, n, sha);
    snprintf(path, sizeof path, "%s/blobs/%s", dir, sha);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0444);
    CHECK(fd >= 0 && write(fd, buf, n) == (ssize_t)n);
    close(fd);
    free(buf);
    struct timespec ts[2] = {{.tv_sec = time(NULL) - age}, {.tv_sec = time(NULL) - age}};
    utimensat(AT_FDCWD, path, ts, 0);
    snprintf(path, sizeof path, "%s/locks/%s.lock", dir, sha);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    close(fd);
    utimensat(AT_FDCWD, path, ts, 0);
}

static int has_blob(const char *dir, const char *sha)
{
    char path[512];
    snprintf(path, sizeof path, "%s/blobs/%s", dir, sha);
    return access(path, F_OK) == 0;
}

struct unlock_later {
    int fd, ms;
};

static void *unlock_later(void *arg)
{
    struct unlock_later *u = arg;
    struct timespec ts = {0, u->ms * 1000000L};
    nanosleep(&ts, NULL);
    hfs3_cache_unlock(u->fd);
    return NULL;
}

static void eviction(void)
{
    char dir[256], a[65], b[65], c3[65], d[65], fresh[65];
    snprintf(dir, sizeof dir, "%s/cache", root);
    hfs3_cache *c = NULL;
    CHECK_EQ_INT(hfs3_cache_open(dir, &c), 0);
    if (!c)
        return;
    put_blob(dir, 'a', 1000, 400, a);  /* oldest */
    put_blob(dir, 'b', 1000, 300, b);
    put_blob(dir, 'c', 1000, 200, c3);
    put_blob(dir, 'd', 1000, 100, d);  /* newest */
    hfs3_sha256_hexof("new", 3, fresh);

    hfs3_gc_blob *v = NULL;
    size_t n = 0;
    CHECK_EQ_INT(hfs3_gc_list(c, &v, &n), 0);
    CHECK_EQ_INT(n, 4);
    hfs3_gc_blob *hit = hfs3_gc_find(v, n, a);
    CHECK(hit && hit->size == 1000 && hit->last_use <= time(NULL) - 399);
    free(v);

    /* no budget: nothing removed */
    unsetenv("HFS3_CACHE_MAX");
    CHECK_EQ_INT(hfs3_gc_make_room(c, fresh, 1500), 0);
    CHECK(has_blob(dir, a) && has_blob(dir, d));

    /* larger than the whole budget: -ENOSPC, nothing removed */
    setenv("HFS3_CACHE_MAX", "5000", 1);
    CHECK_EQ_INT(hfs3_gc_make_room(c, fresh, 5001), -ENOSPC);
    CHECK(strstr(hfs3_errmsg(), "more than the whole cache budget") != NULL);
    CHECK(has_blob(dir, a) && has_blob(dir, b) && has_blob(dir, c3) && has_blob(dir, d));

    /* 4000 + 1500 > 5000: the oldest goes, only it */
    CHECK_EQ_INT(hfs3_gc_make_room(c, fresh, 1500), 0);
    CHECK(!has_blob(dir, a) && has_blob(dir, b) && has_blob(dir, c3) && has_blob(dir, d));

    /* a use of b makes c the least recently used */
    char lock[512];
    snprintf(lock, sizeof lock, "%s/locks/%s.lock", dir, b);
    hfs3_gc_touch(c, b);
    struct stat st;
    CHECK(stat(lock, &st) == 0 && st.st_mtime >= time(NULL) - 5);
    CHECK_EQ_INT(hfs3_gc_make_room(c, fresh, 3000), 0);
    CHECK(has_blob(dir, b) && !has_blob(dir, c3) && has_blob(dir, d));

    /* the blob being fetched is never chosen: d is the one "fetched" here, b must go */
    CHECK_EQ_INT(hfs3_gc_make_room(c, d, 4500), 0);
    CHECK(!has_blob(dir, b) && has_blob(dir, d));

    /* a busy blob (its lock held) is skipped, and waited for: the room is made once its lock is free */
    put_blob(dir, 'e', 1000, 500, a);
    int lfd = -1;
    char lname[80];
    snprintf(lname, sizeof lname, "%s.lock", a);
    CHECK_EQ_INT(hfs3_cache_lock(c, c->locks, lname, c->p_locks, 0, &lfd, NULL), 0);
    pthread_t th;
    struct unlock_later ul = {lfd, 300};
    CHECK(pthread_create(&th, NULL, unlock_later, &ul) == 0);
    double t0 = hfs3_now();
    CHECK_EQ_INT(hfs3_gc_make_room(c, fresh, 4500), 0);
    CHECK(hfs3_now() - t0 >= 0.25);
    pthread_join(th, NULL);
    CHECK(!has_blob(dir, a));

    /* a pinned blob (LOCK_SH on locks/<sha>.pin.lock, by any process or descriptor) is busy for remove */
    put_blob(dir, 'e', 1000, 500, a);
    hfs3_gc_blob pb = {.size = 1000, .uid = getuid()};
    memcpy(pb.sha, a, 65);
    char pname[512];
    snprintf(pname, sizeof pname, "%s/locks/%s" HFS3_GC_PIN_SUFFIX, dir, a);
    int pfd = open(pname, O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK(pfd >= 0 && flock(pfd, LOCK_SH) == 0);
    CHECK_EQ_INT(hfs3_gc_remove(c, &pb, 0, 0), -EBUSY);
    CHECK(strstr(hfs3_errmsg(), "is pinned") != NULL);
    CHECK(has_blob(dir, a));
    /* a pin of this process: make_room does not try it, and says so without waiting */
    close(pfd);
    int pin = hfs3_gc_pin(c, a);
    CHECK(pin >= 0 && hfs3_gc_pinned_here(a));
    setenv("HFS3_CACHE_MAX", "1500", 1);
    t0 = hfs3_now();
    CHECK_EQ_INT(hfs3_gc_make_room(c, fresh, 1000), -ENOSPC);
    CHECK(hfs3_now() - t0 < 2);
    CHECK(strstr(hfs3_errmsg(), "1000 B are files this command holds for the model it is fetching") != NULL);
    CHECK(has_blob(dir, a));
    hfs3_gc_unpin(pin, a);
    CHECK(!hfs3_gc_pinned_here(a));
    CHECK_EQ_INT(hfs3_gc_remove(c, &pb, 0, 0), 0);
    put_blob(dir, 'e', 1000, 500, a);
    setenv("HFS3_CACHE_MAX", "5000", 1);

    /* verify's re-hash: a good blob is kept, a bad one removed */
    hfs3_gc_blob good = {.size = 1000, .uid = getuid()};
    memcpy(good.sha, a, 65);
    CHECK_EQ_INT(hfs3_gc_remove(c, &good, 0, 1), 1);
    CHECK(has_blob(dir, a));
    char bad[65], path[512];
    memset(bad, 'f', 64);
    bad[64] = 0;
    snprintf(path, sizeof path, "%s/blobs/%s", dir, bad);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0444);
    CHECK(fd >= 0 && write(fd, "junk", 4) == 4);
    close(fd);
    hfs3_gc_blob badb = {.size = 4, .uid = getuid()};
    memcpy(badb.sha, bad, 65);
    CHECK_EQ_INT(hfs3_gc_remove(c, &badb, 1, 1), 0); /* dry run: reported, kept */
    CHECK(has_blob(dir, bad));
    CHECK_EQ_INT(hfs3_gc_remove(c, &badb, 0, 1), 0);
    CHECK(!has_blob(dir, bad));
    hfs3_cache_free(c);
    unsetenv("HFS3_CACHE_MAX");
}

/* The shim's hfs3_shim_lastuse(blob path) moves the lock file's mtime, and only that file's. */
static void shim_lastuse(void)
{
    char dir[256], path[512], lock[512], sha[65];
    snprintf(dir, sizeof dir, "%s/cache2", root);
    hfs3_cache *c = NULL;
    CHECK_EQ_INT(hfs3_cache_open(dir, &c), 0);
    if (!c)
        return;
    put_blob(dir, 'z', 10, 1000, sha);
    snprintf(path, sizeof path, "%s/blobs/%s", dir, sha);
    snprintf(lock, sizeof lock, "%s/locks/%s.lock", dir, sha);
    struct stat st;
    hfs3_shim_lastuse(path);
    CHECK(stat(lock, &st) == 0 && st.st_mtime >= time(NULL) - 5);
    CHECK(stat(path, &st) == 0 && st.st_mtime <= time(NULL) - 999); /* the blob itself untouched */
    /* not a blob path: nothing happens, nothing crashes */
    hfs3_shim_lastuse("/nonexistent");
    hfs3_shim_lastuse("blobs/short");
    hfs3_shim_lastuse("");
    /* cost of the common case (touched within the minute: openat + fstat + close) */
    double t0 = hfs3_now();
    for (int i = 0; i < 100000; i++)
        hfs3_shim_lastuse(path);
    printf("hfs3_shim_lastuse: %.2f us per open of a cached blob\n", (hfs3_now() - t0) * 1e6 / 100000);
    hfs3_cache_free(c);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/hfs3-test-gc.XXXXXX");
    if (!mkdtemp(root))
        return 1;
    TEST(sizes);
    TEST(eviction);
    TEST(shim_lastuse);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", root);
    return t_done("test_gc");
}
