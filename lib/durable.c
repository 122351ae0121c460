/* durable.c - the flush behind the load: records of unflushed blobs (CACHE/unflushed/<name>, the boot id
 * inside), the boot id, and the flush that runs after the helper answered (include/hfs3/durable.h). The install
 * order is fetch.c's: record (fsynced) -> rename into blobs/ (or a mount's cblobs/) -> later fdatasync + fsync of
 * its directory -> a cblobs/ blob hashed whole and moved into blobs/ -> the record removed. */
#include "hfs3/durable.h"
#include "hfs3/serve.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/explain.h"
#include "hfs3/fetch.h"
#include "hfs3/gc.h"
#include "hfs3/log.h"
#include "hfs3/util.h"

int hfs3_durable_sync(void)
{
    const char *v = getenv("HFS3_DURABLE");
    if (!v || !*v || !strcmp(v, "later"))
        return 0;
    if (!strcmp(v, "sync"))
        return 1;
    hfs3_warn("HFS3_DURABLE=%s is neither sync nor later; using later", v);
    return 0;
}

int hfs3_boot_id(char out[37])
{
    const char *t = getenv("HFS3_TEST_BOOT_ID");
    if (t && *t) {
        snprintf(out, 37, "%s", t);
        return 0;
    }
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, out, 36);
    int e = errno;
    close(fd);
    if (n != 36)
        return n < 0 ? -e : -EIO;
    out[36] = 0;
    return 0;
}

int hfs3_stamp_set(int fd, const char *what, int flushed)
{
    char v[160], id[37];
    if (flushed)
        snprintf(v, sizeof v, "%s", what);
    else if (hfs3_boot_id(id) == 0)
        snprintf(v, sizeof v, "%s %s", what, id);
    else
        return -EIO;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    /* a user. attribute needs write permission: the owner's write bit for the moment of the fsetxattr (a reader
     * refuses the file meanwhile, and comes back under its lock, which the caller holds) */
    int wbit = !(st.st_mode & S_IWUSR) && st.st_uid == geteuid();
    if (wbit && fchmod(fd, (st.st_mode & 07777) | S_IWUSR) < 0)
        return -errno;
    int rc = fsetxattr(fd, HFS3_STAMP_XATTR, v, strlen(v), 0) < 0 ? -errno : 0;
    if (wbit && fchmod(fd, st.st_mode & 07777) < 0 && rc == 0)
        rc = -errno;
    if (rc == -EOPNOTSUPP)
        rc = -ENOTSUP;
    if (rc < 0 && rc != -ENOTSUP)
        hfs3_debug("stamping a verified file as %s: %s", what, strerror(-rc));
    return rc;
}

int hfs3_unflushed_trusted(const hfs3_cache *c, uid_t uid)
{
    struct stat st;
    return fstat(c->unflushed, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_uid == uid || st.st_uid == 0) &&
           !(st.st_mode & S_IWOTH) && (!(st.st_mode & S_IWGRP) || (st.st_mode & S_ISVTX));
}

int hfs3_unflushed_mark(const hfs3_cache *c, const char *name, uint64_t size)
{
    char id[37], line[64];
    int rc = hfs3_boot_id(id);
    if (rc < 0)
        return hfs3_err(rc, "the boot id (/proc/sys/kernel/random/boot_id) cannot be read: %s", strerror(-rc));
    /* the size on a second line: the flush promotes no file larger than its fetch installed (a member's sparse
     * 64 GiB file would be hashed whole); the first line alone is what the shim and older helpers read */
    int n = snprintf(line, sizeof line, "%s\n%" PRIu64 "\n", id, size);
    /* never group-writable (0640 in a shared cache): a member who could write this boot's id into an old boot's
     * record would have a blob a crash tore served, and then flushed as intact */
    if ((rc = hfs3_cache_write_atomic(c->unflushed, name, line, (size_t)n, c->file_mode & ~(mode_t)022,
                                      c->p_unflushed)) < 0)
        return rc;
    /* the record's name must be on disk before the blob's can be */
    if (fsync(c->unflushed) < 0)
        return hfs3_err(-errno, "fsync %s: %s", c->p_unflushed, strerror(errno));
    return 0;
}

/* The record `name` (open, read and decided on its own descriptor): 0 none, or none that counts (one whose
 * owner is neither the blob's, owner, nor root: a member's 37 bytes must not make another user's file
 * unusable), 1 this boot's, 2 another boot's or unreadable. *size: the size its second line holds, or
 * UINT64_MAX (none: an older record). *seen (may be NULL): the record read (its fstat), when one was. */
static int record_state(const hfs3_cache *c, const char *name, uid_t owner, uint64_t *size, struct stat *seen)
{
    char text[129], id[37];
    *size = UINT64_MAX;
    int fd = openat(c->unflushed, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        /* unreadable (a member's 0600 record, a symlink): counted only when it could be the owner's */
        if (fstatat(c->unflushed, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid != owner && st.st_uid != 0)
            return 0;
        return 2;
    }
    if (fstat(fd, &st) < 0) {
        close(fd);
        return 2;
    }
    if (seen)
        *seen = st;
    if (st.st_uid != owner && st.st_uid != 0) {
        close(fd);
        return 0;
    }
    /* one anybody else could write into (a member too: records are 0640, older ones were 0660) says nothing:
     * the blob is hashed again */
    ssize_t n = S_ISREG(st.st_mode) && st.st_nlink == 1 && !(st.st_mode & (S_IWGRP | S_IWOTH))
                    ? pread(fd, text, sizeof text - 1, 0)
                    : -1;
    close(fd);
    if (n < 36)
        return 2;
    text[n] = 0;
    int same = hfs3_boot_id(id) == 0 && !memcmp(text, id, 36) && (n == 36 || text[36] == '\n');
    if (same && n > 37) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(text + 37, &end, 10);
        if (!errno && end != text + 37 && (*end == '\n' || !*end))
            *size = (uint64_t)v;
    }
    return same ? 1 : 2;
}

int hfs3_unflushed_state(const hfs3_cache *c, const char *name, uid_t owner)
{
    uint64_t size;
    return record_state(c, name, owner, &size, NULL);
}

static int is_chunked(const char *name) { return name[64] != 0; }

static void drop_record(const hfs3_cache *c, const char *name)
{
    /* a record that stays (another user's, in the sticky unflushed/) only costs a hash after a reboot */
    if (unlinkat(c->unflushed, name, 0) < 0 && errno != ENOENT)
        hfs3_debug("%s/%s: %s", c->p_unflushed, name, strerror(errno));
}

/* A full disk has no block for a new record (a temp file and a rename), but the old boot's record has one: this
 * boot's id written over it in place, where it is this user's own "<id>\n<size>\n" (a torn write reads as another
 * boot: one more hash after a crash). 0, or -1 where it is left as it is. */
static int remark_in_place(const hfs3_cache *c, const char *name)
{
    char id[37];
    if (hfs3_boot_id(id) < 0)
        return -1;
    int fd = openat(c->unflushed, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = -1;
    /* and no longer group-writable (an older version's 0660): such a record says nothing (record_state) */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == c->uid &&
        st.st_size >= 37 && st.st_size <= 64 && fchmod(fd, st.st_mode & 07777 & ~(mode_t)022) == 0 &&
        pwrite(fd, id, 36, 0) == 36 && fdatasync(fd) == 0)
        rc = 0;
    close(fd);
    return rc;
}

int hfs3_unflushed_settle(const hfs3_cache *c, int dir, const char *name, int fd)
{
    if (fdatasync(fd) < 0 || fsync(dir) < 0)
        return -errno;
    /* a chunk-checked blob is still to be promoted into blobs/: its record stays, this boot's now, so that the
     * flush behind the load hashes it whole (off the open's path) and only then removes the record */
    if (is_chunked(name)) {
        char saved[1024];
        snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
        struct stat st;
        uint64_t size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX; /* checked: the manifest's */
        /* the old boot's record left as it is would make the shim take the copy as missing: an EIO offline */
        if (hfs3_unflushed_mark(c, name, size) < 0 && remark_in_place(c, name) < 0)
            hfs3_debug("%s", hfs3_errmsg()); /* the old boot's record stays: one more chunk check */
        hfs3_err(0, "%s", saved);
        return 0;
    }
    drop_record(c, name);
    return 0;
}

#define FLUSH_BAD_MAX 64
typedef struct flush_scan {
    const hfs3_cache *c;
    int flushed;
    int retry; /* records left because their blob was pinned or could not be settled yet */
    int nbad;  /* chunk-checked blobs already hashed and found not to match, pinned then: not hashed again */
    char bad[FLUSH_BAD_MAX][64 + 2 + 16 + 1];
} flush_scan;

/* Record names: <sha256> (blobs/<sha256>), or <sha256>.m<mount key> (mounts/<key>/cblobs/<sha256>, a blob
 * checked by that mount's chunk digests). */
static int blob_name_ok(const char *name)
{
    size_t n = strlen(name);
    return hfs3_is_sha256_hex(name) ||
           (n == 64 + 2 + 16 && name[64] == '.' && name[65] == 'm' && strspn(name, "0123456789abcdef") == 64 &&
            strspn(name + 66, "0123456789abcdef") == 16);
}

/* A chunk-checked blob that hashed to another sha256 than its name (its manifest's chunks and sha256
 * disagree: a manifest built wrong, or lying) is removed once no open is about to use it (its pin is free; a
 * process that has it open keeps reading it), so a cblobs/ file never outlives its record. 0 removed, 1 pinned
 * (try again later). Under the blob's lock. */
static int drop_mismatch(const hfs3_cache *c, int cdir, const char *sha)
{
    int r = hfs3_gc_unlink_unpinned(c, cdir, "mounts/<key>/cblobs", sha, 0);
    if (r == -EBUSY)
        return 1;
    if (r < 0) /* gone already, or another user's (theirs to remove): nothing more to do here */
        return 0;
    hfs3_warn("cache: a file checked by its manifest's chunk digests does not hash to %s as the manifest says: "
              "removed (rebuild that manifest with hfs3-manifest build)", sha);
    return 0;
}

/* The detached flush process (one thread, nothing else in it) hashes a promotion's file in place in the page
 * cache, as a fetch hashes its new .part: pread would copy each byte once more, and the promotion hashes every
 * chunk-checked GiB a second time. A page that cannot be read (an I/O error, a hole on a full tmpfs) is SIGBUS
 * on a mapping: here that ends the mapped pass, and pread hashes the file again from its start and says how it
 * fails. Any other process hashes with pread. */
static int in_flush_child;
static sigjmp_buf bus_jump;
static volatile sig_atomic_t bus_armed;

static void on_bus(int sig)
{
    if (bus_armed)
        siglongjmp(bus_jump, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int hash_promotion(int fd, char hex[65])
{
    if (!in_flush_child)
        return hfs3_sha256_fd(fd, hex, NULL);
    int rc;
    if (sigsetjmp(bus_jump, 1) == 0) {
        bus_armed = 1;
        rc = hfs3_sha256_fd_fresh(fd, hex, NULL);
        bus_armed = 0;
        return rc;
    }
    /* (what the mapped pass held, its window and buffer, stays: this process ends soon) */
    bus_armed = 0;
    return hfs3_sha256_fd(fd, hex, NULL);
}

/* 1 when blobs/<sha> may be served as it is to uid (include/hfs3/serve.h): the file's rule, and its stamp (issue
 * 44: root's blob of an older version has none, and the copy is what its owner reads then). */
static int blobs_serves(const hfs3_cache *c, const char *sha, uid_t uid, uint64_t size)
{
    struct stat b, d;
    char boot[37];
    int fd = openat(c->blobs, sha, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int state = HFS3_STAMP_OK;
    int ok = fstat(fd, &b) == 0 && fstat(c->blobs, &d) == 0 && !hfs3_serve_dir_refusal(&d, uid) &&
             !hfs3_serve_refusal(&b, uid, size) &&
             (!hfs3_stamp_refusal(fd, &d, sha, NULL, hfs3_boot_id(boot) == 0 ? boot : NULL, &state) ||
              (state == HFS3_STAMP_BOOT && hfs3_unflushed_trusted(c, uid)));
    close(fd);
    return ok;
}

/* A chunk-checked blob, flushed, enters blobs/ once its whole-file sha256 matches: then every manifest with
 * that sha256 may use it (and gc counts it); an open about to read it from cblobs/ finds it gone and looks
 * again (shim/open.c). Under the blob's lock; fd is cblobs/<sha> open, hex its whole-file sha256 (hashed before
 * the lock was taken: flush_one). 0 when settled (moved, already in blobs/, removed), -1 when worth another try
 * at the next flush (the rename failed), 1 when it does not match and is pinned (drop_mismatch): then its
 * record stays. */
static int promote(const hfs3_cache *c, int cdir, const char *sha, int fd, const char *hex)
{
    struct stat a, b;
    if (fstat(fd, &a) < 0)
        return -1;
    if (strcmp(hex, sha) != 0)
        return drop_mismatch(c, cdir, sha);
    /* the name must still be the file that was hashed (a member's own file could have been swapped) */
    if (fstatat(cdir, sha, &b, AT_SYMLINK_NOFOLLOW) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return 0;
    /* hashed whole, and flushed: stamped as the sha256 (include/hfs3/serve.h) before any other mount may read it;
     * one that cannot be stamped stays its mount's own */
    char boot[37];
    int sr = hfs3_boot_id(boot) == 0 && hfs3_stamp_check(fd, sha, NULL, boot) == HFS3_STAMP_OK
                 ? 0 /* stamped whole already (a copy): its stamp stands, and no write bit shows */
                 : hfs3_stamp_set(fd, sha, 1);
    if (sr < 0 && sr != -ENOTSUP)
        return -1;
    /* HFS3_VERIFY_FOREIGN=1: never into a blobs/ its owner may not be served from (a member made it first: its
     * owner can rename anything out of it); the copy stays its mount's own */
    if (c->verify_foreign && (fstat(c->blobs, &b) < 0 || hfs3_serve_dir_refusal(&b, a.st_uid)))
        return 0;
    int r = renameat2(cdir, sha, c->blobs, sha, RENAME_NOREPLACE);
    if (r < 0 && errno == EEXIST) {
        /* blobs/<sha> is there already: under HFS3_VERIFY_FOREIGN=1 the copy goes only when that one may be
         * served to the copy's owner (include/hfs3/serve.h). A member's file planted there while the copy was
         * fetched, or one a member could rewrite, is never served then: the copy is what its owner reads.
         * (Without the setting members are trusted, and one file is enough.) */
        if (!c->verify_foreign || blobs_serves(c, sha, a.st_uid, (uint64_t)a.st_size))
            unlinkat(cdir, sha, 0);
        return 0;
    }
    if (r < 0)
        return -1;
    if (fstatat(c->blobs, sha, &b, AT_SYMLINK_NOFOLLOW) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        hfs3_warn("cache: %s/%s was replaced right after it was installed; removing it", c->p_blobs, sha);
        unlinkat(c->blobs, sha, 0);
        return 0;
    }
    (void)fsync(c->blobs);
    (void)fsync(cdir);
    return 0;
}

/* A cblobs/ file of this user's larger than the size its fetch recorded (a file that is not what the fetch
 * installed): removed unhashed, once its pin is free, as drop_mismatch does (a sparse 64 GiB file costs its maker
 * nothing and the hash an hour of holes). 0 removed or gone, 1 pinned. */
static int drop_oversize(const hfs3_cache *c, int cdir, const char *sha, long long have, uint64_t size)
{
    int r = hfs3_gc_unlink_unpinned(c, cdir, "mounts/<key>/cblobs", sha, 0);
    if (r == -EBUSY)
        return 1;
    if (r == 0)
        hfs3_warn("cache: mounts/<key>/cblobs/%s has %lld %s, its fetch installed %" PRIu64 ": removed unhashed",
                  sha, have, hfs3_plural((unsigned long long)have, "byte", "bytes"), size);
    return 0;
}

/* The blob's lock, without waiting long: a shim open holds it for a look, a fetch of the same name (one that
 * came back after a gc) for its download. Up to 2 s, 10 ms at a time. fd or -1 (busy: the record stays for the
 * next pass). */
static int relock(const hfs3_cache *c, const char *lockname)
{
    int lk = -1;
    for (int i = 0; hfs3_cache_lock(c, c->locks, lockname, c->p_locks, 1, &lk, NULL) < 0; i++) {
        if (i >= 200)
            return -1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return lk;
}

/* 1 when dir/name is still the file open as fd (same device and inode). */
static int same_file(int dir, const char *name, int fd)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstatat(dir, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* unflushed/<sha>.k<key> for the record <sha>.m<key>: an empty file of this user's, never read; the flush passes
 * over such names (blob_name_ok). */
static void mark_kept(const hfs3_cache *c, const char *name)
{
    char k[96];
    snprintf(k, sizeof k, "%s", name);
    k[65] = 'k';
    int fd = openat(c->unflushed, k, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640);
    if (fd >= 0)
        close(fd);
    else if (errno != EEXIST)
        hfs3_debug("%s/%s: %s", c->p_unflushed, k, strerror(errno));
}

/* One record: the blob flushed (fdatasync, fsync of its directory), a chunk-checked one hashed whole and moved
 * into blobs/, then the record removed. The blob's lock (locks/<sha>.lock, what every open and fetch of it
 * takes) is held only to look and to settle, never across the disk or the hash: an open waiting on that lock
 * (the shim polls it while a fetch runs) would wait for this process's fdatasync and hash of a whole shard
 * (bench/bench_ranks.py: 1.7 s of disk and 0.6 s of sha256 for a 256 MiB shard, while 4 of 8 ranks waited to
 * open it). Flushers are kept apart by a flock on the record itself instead: every `_prefetch` of a mount's
 * processes flushes at its end, and only one of them hashes a blob. */
static int flush_one(void *ud, const char *name)
{
    flush_scan *s = ud;
    const hfs3_cache *c = s->c;
    uint64_t size;
    /* this user's own records only: another's is its owner's to flush (and this user could not remove it) */
    struct stat seen, st;
    if (!blob_name_ok(name) || record_state(c, name, c->uid, &size, &seen) != 1)
        return 0;
    int rfd = openat(c->unflushed, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (rfd < 0)
        return 0;
    if (flock(rfd, LOCK_EX | LOCK_NB) < 0) { /* another flusher has it */
        close(rfd);
        return 0;
    }
    /* the record held must be the one read above and still at its name: another flusher may have settled
     * (removed) it between that read and this flock, and a gc and a fetch written it again for a new file;
     * worked on under the stale one, the new file would be flushed and hashed once for nothing (while the
     * new record's flusher hashes it too), its settle refused by same_file below */
    if (fstat(rfd, &st) < 0 || st.st_dev != seen.st_dev || st.st_ino != seen.st_ino ||
        !same_file(c->unflushed, name, rfd)) {
        if (fstatat(c->unflushed, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            s->retry++; /* a new record: looked at again in the next pass */
        close(rfd);
        return 0;
    }
    char lockname[80];
    snprintf(lockname, sizeof lockname, "%.64s.lock", name);
    int lk = -1;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
    /* a blob being fetched or checked right now is left to that process, which records it again */
    if (hfs3_cache_lock(c, c->locks, lockname, c->p_locks, 1, &lk, NULL) < 0) {
        hfs3_err(0, "%s", saved);
        close(rfd);
        return 0;
    }
    char sha[65];
    snprintf(sha, sizeof sha, "%.64s", name);
    int dir = c->blobs, chunked = name[64] != 0;
    if (chunked) {
        char *p = NULL;
        dir = hfs3_fetch_cblobs(c, name + 66, &p);
        free(p);
    }
    int fd = dir < 0 ? -1 : openat(dir, sha, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && (dir == -ENOENT || errno == ENOENT))
        unlinkat(c->unflushed, name, 0); /* its blob was removed (gc) or promoted: nothing left to flush */
    /* let go before the disk and the hash */
    hfs3_cache_unlock(lk);
    lk = -1;
    if (fd >= 0) {
        /* crash-safe order: the data on disk, then (a chunk-checked blob) moved into blobs/, and only then the
         * record gone; a crash in between leaves a record that the next flush finishes */
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fdatasync(fd) == 0 && fsync(dir) == 0) {
            s->flushed++;
            /* a mismatch is removed only once its pin is free (an open about to read it, a fetch keeping its
             * model): until then its record stays, and it is not hashed again */
            int known_bad = 0;
            for (int i = 0; chunked && i < s->nbad && !known_bad; i++)
                known_bad = !strcmp(s->bad[i], name);
            char hex[65] = "";
            int hash = chunked && !known_bad && st.st_uid == c->uid &&
                       !(size != UINT64_MAX && (uint64_t)st.st_size > size);
            int r = -1, leave = 0;
            if (hash && hash_promotion(fd, hex) < 0)
                ; /* unreadable now: the next flush tries again */
            else if (lk < 0 && (lk = relock(c, lockname)) < 0)
                leave = 1; /* busy for 2 s: a fetch of it again, which records it again; the next flush settles it */
            else if (!same_file(dir, sha, fd) || !same_file(c->unflushed, name, rfd))
                /* the blob or its record was replaced while unlocked (a gc, then a fetch that records its new
                 * file again): that record is the new file's, left to the next flush */
                r = same_file(c->unflushed, name, rfd) && fstatat(dir, sha, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
                            errno == ENOENT ? 0 : -1;
            else if (!chunked)
                r = 0; /* (its stamp keeps its boot id: the record gone from a trusted unflushed/ says flushed) */
            else if (known_bad)
                r = drop_mismatch(c, dir, sha);
            else if (st.st_uid != c->uid)
                /* another user's file under this user's record (a member's, planted once this user's was gone):
                 * never hashed nor promoted, and the record goes, as the file it spoke for went */
                r = 0;
            else if (size != UINT64_MAX && (uint64_t)st.st_size > size)
                r = drop_oversize(c, dir, sha, (long long)st.st_size, size);
            else
                r = promote(c, dir, sha, fd, hex);
            struct stat now;
            /* a copy the promotion kept (HFS3_VERIFY_FOREIGN=1: blobs/<sha> is a file its owner may not be
             * served) is still a cached file: marked unflushed/<sha>.k<key> first, so that gc finds it, counts it
             * in the budget and can evict it, as it does one with its record (lib/gc.c list_cblobs) */
            if (r == 0 && chunked && fstatat(dir, sha, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
                now.st_dev == st.st_dev)
                mark_kept(c, name);
            if (r == 0)
                drop_record(c, name);
            else if (!leave)
                s->retry++;
            if (r == 1 && !known_bad && s->nbad < FLUSH_BAD_MAX)
                snprintf(s->bad[s->nbad++], sizeof s->bad[0], "%s", name);
        }
        close(fd);
    }
    if (chunked && dir >= 0)
        close(dir);
    hfs3_cache_unlock(lk);
    close(rfd);
    hfs3_err(0, "%s", saved);
    return 0;
}

int hfs3_flush_pending(const hfs3_cache *c)
{
    static flush_scan s; /* (the bad list is 5 KiB: off the stack; one flush per process) */
    memset(&s, 0, sizeof s);
    s.c = c;
    (void)hfs3_cache_scan(c->unflushed, "", "", flush_one, &s);
    /* pins last as long as an open (or a fetch, whose end spawned this flush): look again for a few seconds */
    for (int i = 0; s.retry && i < 50; i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        s.retry = 0;
        (void)hfs3_cache_scan(c->unflushed, "", "", flush_one, &s);
    }
    if (s.flushed)
        hfs3_debug("flushed %d blob%s to disk", s.flushed, s.flushed == 1 ? "" : "s");
    return s.flushed;
}

static int any_record(void *ud, const char *name)
{
    const hfs3_cache *c = ud;
    struct stat st;
    /* another user's record is its owner's to flush: no process for it after every run of this user's */
    return blob_name_ok(name) && fstatat(c->unflushed, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           (st.st_uid == c->uid || st.st_uid == 0);
}

void hfs3_flush_spawn(const hfs3_cache *c)
{
    if (hfs3_env_bool("HFS3_TEST_NO_FLUSH", 0) || hfs3_cache_scan(c->unflushed, "", "", any_record, (void *)c) != 1)
        return;
    char *dir = hfs3_strdup(c->dir);
    if (!dir)
        return;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        hfs3_flush_pending(c); /* no process to leave it to: now, then */
        free(dir);
        return;
    }
    if (pid > 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        free(dir);
        return;
    }
    setsid();
    if (fork() != 0)
        _exit(0);
    /* the flush and the hash of a promotion yield to the program that is loading */
    if (nice(10) < 0) {
    }
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        /* never the caller's stderr, even at debug: this process outlives the command, and a line written later
         * lands in whatever the caller's terminal or log file holds by then (or, in a file truncated meanwhile,
         * after a run of NULs) */
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        if (nul > 2)
            close(nul);
    }
    /* no lock descriptor of the parent's may live on in here */
    if (close_range(3, ~0U, 0) < 0) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
            close((int)fd);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_bus;
    sigemptyset(&sa.sa_mask);
    in_flush_child = sigaction(SIGBUS, &sa, NULL) == 0;
    hfs3_cache *cc = NULL;
    if (hfs3_cache_open(dir, &cc) == 0)
        hfs3_flush_pending(cc);
    _exit(0);
}
