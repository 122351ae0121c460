/* test_durable.c - the flush behind the load (lib/durable.c): a blob's lock is free while the flush writes the
 * blob to disk, so that an open waiting on that lock (the shim polls it while a fetch runs) never waits for
 * another process's fdatasync and hash of a whole shard (issue 31, eight ranks: 4 of 8 ranks waited 2.3 s). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hfs3/cache.h"
#include "hfs3/durable.h"
#include "hfs3/fetch.h"
#include "hfs3/util.h"

static char root[128];

/* fdatasync of the watched blob looks at its lock from another open file description, as a waiting open does */
static char watch_lock[512];
static ino_t watch_ino;
static int flushes_seen, lock_busy_in_flush;
/* swap: while the flush is unlocked, the blob is replaced by a new file (a gc, then a fetch of the same sha256)
 * and its record written again, as that fetch does; the new file's flush is counted in new_flushed */
static const hfs3_cache *swap_c;
static char swap_path[700], swap_rec[100];
static const char *swap_data;
static size_t swap_len;
static ino_t new_ino;
static int new_flushed;

/* dir/sha written with len bytes of data (0444, as the helper installs), its identity in *st, then recorded
 * unflushed as rec: a blob as a fetch leaves it before the flush. 0, or -1 (the CHECK that failed says where). */
static int put_recorded(const hfs3_cache *c, int dir, const char *sha, const char *rec, const char *data, size_t len,
                        struct stat *st)
{
    int fd = openat(dir, sha, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    CHECK(fd >= 0);
    if (fd < 0)
        return -1;
    CHECK_EQ_INT(write(fd, data, len), (long long)len);
    CHECK_EQ_INT(fstat(fd, st), 0);
    close(fd);
    CHECK_EQ_INT(hfs3_unflushed_mark(c, rec, len), 0);
    return 0;
}

static void swap_now(const hfs3_cache *c)
{
    char tmp[720];
    snprintf(tmp, sizeof tmp, "%s.new", swap_path);
    int f = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    struct stat st;
    if (f < 0 || write(f, swap_data, swap_len) != (ssize_t)swap_len || fstat(f, &st) < 0) {
        fprintf(stderr, "swap: %s\n", tmp);
        exit(1);
    }
    close(f);
    new_ino = st.st_ino;
    if (rename(tmp, swap_path) < 0 || hfs3_unflushed_mark(c, swap_rec, swap_len) < 0) {
        fprintf(stderr, "swap: rename or record failed\n");
        exit(1);
    }
}

int fdatasync(int fd)
{
    struct stat st;
    if (new_ino && fstat(fd, &st) == 0 && st.st_ino == new_ino)
        new_flushed++;
    if (watch_lock[0] && fstat(fd, &st) == 0 && st.st_ino == watch_ino) {
        flushes_seen++;
        if (swap_c) {
            swap_now(swap_c);
            swap_c = NULL;
        }
        int l = open(watch_lock, O_RDONLY | O_CLOEXEC);
        if (l >= 0) {
            if (flock(l, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK)
                lock_busy_in_flush++;
            close(l);
        }
    }
    return (int)syscall(SYS_fdatasync, fd);
}

/* claim: the flush's flock of the record of this inode comes just after another flusher settled that record and
 * a gc and a fetch of the same sha256 wrote the blob and its record again (swap_now): the record it opened is
 * stale by the time it holds it */
static ino_t claim_ino;
static const hfs3_cache *claim_c;

int flock(int fd, int op)
{
    struct stat st;
    if (claim_ino && fstat(fd, &st) == 0 && st.st_ino == claim_ino) {
        claim_ino = 0;
        swap_now(claim_c);
    }
    return (int)syscall(SYS_flock, fd, op);
}

static void rmroot(void)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", root, root);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", root);
}

static int exists(const char *dir, const char *name)
{
    char p[700];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0;
}

/* One blob (chunked: in mount key's cblobs/, else in blobs/), its record of this boot, then the flush. */
static void flush_case(int chunked)
{
    char p[300], rec[100], sha[65];
    snprintf(p, sizeof p, "%s/c%d", root, chunked);
    hfs3_cache *c = NULL;
    CHECK_EQ_INT(hfs3_cache_open(p, &c), 0);
    if (!c)
        return;
    static char data[1 << 20];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i * 7 + chunked);
    hfs3_sha256_hexof(data, sizeof data, sha);
    const char *key = "0123456789abcdef";
    int dir = c->blobs;
    char *cpath = NULL;
    if (chunked) {
        char m[400];
        snprintf(m, sizeof m, "%s/mounts/%s", p, key);
        CHECK_EQ_INT(mkdir(m, 0700), 0);
        dir = hfs3_fetch_cblobs(c, key, &cpath);
        CHECK(dir >= 0);
        snprintf(rec, sizeof rec, "%s.m%s", sha, key);
    } else {
        snprintf(rec, sizeof rec, "%s", sha);
    }
    struct stat st;
    CHECK_EQ_INT(put_recorded(c, dir, sha, rec, data, sizeof data, &st), 0);
    CHECK_EQ_INT(hfs3_unflushed_state(c, rec, getuid()), 1);

    snprintf(watch_lock, sizeof watch_lock, "%s/locks/%s.lock", p, sha);
    watch_ino = st.st_ino;
    flushes_seen = lock_busy_in_flush = 0;
    CHECK_EQ_INT(hfs3_flush_pending(c), 1);
    watch_lock[0] = 0;
    CHECK_EQ_INT(flushes_seen, 1);
    /* the lock was free while the blob went to disk */
    CHECK_EQ_INT(lock_busy_in_flush, 0);
    /* and the flush still did all of its work: the record gone, a chunk-checked blob promoted into blobs/ */
    CHECK_EQ_INT(hfs3_unflushed_state(c, rec, getuid()), 0);
    CHECK(exists(c->p_blobs, sha));
    if (chunked)
        CHECK(!exists(cpath, sha));

    /* a blob whose lock is held (a fetch or a check of it now) is left to that process: its record stays */
    char sha2[65], rec2[100];
    data[0] ^= 1;
    hfs3_sha256_hexof(data, sizeof data, sha2);
    snprintf(rec2, sizeof rec2, "%s", sha2);
    CHECK_EQ_INT(put_recorded(c, c->blobs, sha2, rec2, data, sizeof data, &st), 0);
    char ln[80];
    snprintf(ln, sizeof ln, "%s.lock", sha2);
    int lk = -1;
    CHECK_EQ_INT(hfs3_cache_lock(c, c->locks, ln, c->p_locks, 1, &lk, NULL), 0);
    CHECK_EQ_INT(hfs3_flush_pending(c), 0);
    CHECK_EQ_INT(hfs3_unflushed_state(c, rec2, getuid()), 1);
    hfs3_cache_unlock(lk);
    CHECK_EQ_INT(hfs3_flush_pending(c), 1);
    CHECK_EQ_INT(hfs3_unflushed_state(c, rec2, getuid()), 0);

    /* a record another flusher holds (every _prefetch of a mount's processes flushes at its end) is left to it */
    data[0] ^= 2;
    hfs3_sha256_hexof(data, sizeof data, sha2);
    CHECK_EQ_INT(put_recorded(c, c->blobs, sha2, sha2, data, sizeof data, &st), 0);
    char rp[400];
    snprintf(rp, sizeof rp, "%s/%s", c->p_unflushed, sha2);
    int rf = open(rp, O_RDONLY | O_CLOEXEC);
    CHECK(rf >= 0 && flock(rf, LOCK_EX | LOCK_NB) == 0);
    CHECK_EQ_INT(hfs3_flush_pending(c), 0);
    CHECK_EQ_INT(hfs3_unflushed_state(c, sha2, getuid()), 1);
    close(rf);
    CHECK_EQ_INT(hfs3_flush_pending(c), 1);
    CHECK_EQ_INT(hfs3_unflushed_state(c, sha2, getuid()), 0);

    /* the blob replaced while the flush was unlocked: the record is the new file's now, and it is not removed
     * before the new file is flushed too */
    data[0] ^= 4;
    hfs3_sha256_hexof(data, sizeof data, sha);
    if (chunked)
        snprintf(rec, sizeof rec, "%s.m%s", sha, key);
    else
        snprintf(rec, sizeof rec, "%s", sha);
    CHECK_EQ_INT(put_recorded(c, dir, sha, rec, data, sizeof data, &st), 0);
    snprintf(watch_lock, sizeof watch_lock, "%s/locks/%s.lock", p, sha);
    watch_ino = st.st_ino;
    snprintf(swap_path, sizeof swap_path, "%s/%s", chunked ? cpath : c->p_blobs, sha);
    snprintf(swap_rec, sizeof swap_rec, "%s", rec);
    swap_data = data;
    swap_len = sizeof data;
    new_ino = 0;
    new_flushed = 0;
    swap_c = c;
    hfs3_flush_pending(c);
    watch_lock[0] = 0;
    CHECK_EQ_INT(new_flushed, 1);
    CHECK_EQ_INT(hfs3_unflushed_state(c, rec, getuid()), 0);
    CHECK(exists(c->p_blobs, sha));
    new_ino = 0;

    /* the record was settled by another flusher (and written again for a new file) between this flush's open of
     * it and its flock: that stale record is not worked on, and the new file is flushed and hashed once, under
     * its own record, not once more for the record that is gone */
    data[0] ^= 8;
    hfs3_sha256_hexof(data, sizeof data, sha);
    if (chunked)
        snprintf(rec, sizeof rec, "%s.m%s", sha, key);
    else
        snprintf(rec, sizeof rec, "%s", sha);
    CHECK_EQ_INT(put_recorded(c, dir, sha, rec, data, sizeof data, &st), 0);
    CHECK_EQ_INT(fstatat(c->unflushed, rec, &st, AT_SYMLINK_NOFOLLOW), 0);
    snprintf(swap_path, sizeof swap_path, "%s/%s", chunked ? cpath : c->p_blobs, sha);
    snprintf(swap_rec, sizeof swap_rec, "%s", rec);
    new_ino = 0;
    new_flushed = 0;
    claim_c = c;
    claim_ino = st.st_ino;
    CHECK_EQ_INT(hfs3_flush_pending(c), 1);
    CHECK_EQ_INT(claim_ino, 0);
    CHECK_EQ_INT(new_flushed, 1);
    CHECK_EQ_INT(hfs3_unflushed_state(c, rec, getuid()), 0);
    CHECK(exists(c->p_blobs, sha));
    if (chunked)
        CHECK(!exists(cpath, sha));
    new_ino = 0;

    free(cpath);
    if (chunked && dir >= 0)
        close(dir);
    hfs3_cache_free(c);
}

/* A record in a shared cache is not group-writable: a member who wrote this boot's id over a crash's would have
 * a torn blob served, then flushed as intact. One that is (written by an older version, or chmod-ed) says
 * nothing: the blob is hashed again, and the flush leaves it. */
static void test_record_not_group_writable(void)
{
    char p[300], sha[65];
    snprintf(p, sizeof p, "%s/shared", root);
    CHECK_EQ_INT(mkdir(p, 0700), 0);
    CHECK_EQ_INT(chmod(p, 02770), 0);
    hfs3_cache *c = NULL;
    CHECK_EQ_INT(hfs3_cache_open(p, &c), 0);
    if (!c)
        return;
    CHECK(c->shared);
    static const char data[] = "a blob of a shared cache";
    hfs3_sha256_hexof(data, sizeof data, sha);
    int fd = openat(c->blobs, sha, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0440);
    CHECK(fd >= 0);
    CHECK_EQ_INT(write(fd, data, sizeof data), (long long)sizeof data);
    close(fd);
    CHECK_EQ_INT(hfs3_unflushed_mark(c, sha, sizeof data), 0);
    struct stat st;
    CHECK_EQ_INT(fstatat(c->unflushed, sha, &st, AT_SYMLINK_NOFOLLOW), 0);
    CHECK_EQ_INT(st.st_mode & 07777, 0640);
    CHECK_EQ_INT(hfs3_unflushed_state(c, sha, getuid()), 1);
    CHECK_EQ_INT(fchmodat(c->unflushed, sha, 0660, 0), 0);
    CHECK_EQ_INT(hfs3_unflushed_state(c, sha, getuid()), 2);
    CHECK_EQ_INT(hfs3_flush_pending(c), 0);
    CHECK(exists(c->p_unflushed, sha));
    hfs3_cache_free(c);
}

static void test_flush_plain(void) { flush_case(0); }
static void test_flush_chunked(void) { flush_case(1); }

int main(void)
{
    snprintf(root, sizeof root, "/tmp/hfs3-test-durable.XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("HFS3_TEST_BOOT_ID");
    TEST(test_flush_plain);
    TEST(test_flush_chunked);
    TEST(test_record_not_group_writable);
    rmroot();
    return t_done("test_durable");
}
