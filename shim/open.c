/* open.c - open() of a path in a mount: directories open their skeleton, O_PATH never fetches, files are
 * fetched (through the helper, once per machine) into blobs/<sha256> and the blob is opened; background prefetch. */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* --- open -------------------------------------------------------------------------------------------- */

static void maybe_prefetch(struct sh_mount *m, uint32_t e)
{
    if (!sh_prefetch || sh_offline || sh_in_vfork() || __atomic_exchange_n(&m->prefetched, 1, __ATOMIC_ACQ_REL))
        return;
    char *argv[] = {NULL, "_prefetch", m->remote, (char *)sh_epath(m, e), NULL};
    sh_log(2, "%s: prefetching the mount's other files in the background", m->path);
    pid_t pid = sh_spawn_helper(argv, -1, 1);
    if (pid > 0)
        sh_reap(pid);
}

/* This boot's id (include/hfs3/durable.h): HFS3_TEST_BOOT_ID (tests only), else the kernel's. 0 or -1. */
static int boot_id(char out[37])
{
    if (sh_test_boot_id[0]) {
        memcpy(out, sh_test_boot_id, 37);
        return 0;
    }
    int fd = sh_r.open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t k = read(fd, out, 36);
    sh_r.close(fd);
    out[36] = 0;
    return k == 36 ? 0 : -1;
}

/* Whether the blob at path is there and may be used as it is. A blob the helper installed before flushing it
 * has CACHE/unflushed/<rec> holding the boot id: under another boot a crash may have torn it, and the shim
 * cannot hash, so it counts as missing: the helper's _get verifies it (or fetches it again). No record (the
 * common case: the blob is on disk) costs one failed open. A record speaks only for a file of its own user's (or
 * root's): one of another user's, fstat-ed on its descriptor, is not looked at (a member's 37 bytes would make the
 * file EIO at every open, as lib/durable.c's hfs3_unflushed_state says). */
static int record_ok(const char *rec, uid_t owner);

static int blob_usable(const char *blob, const char *rec)
{
    struct stat bs;
    return sh_r.stat(blob, &bs) == 0 && record_ok(rec, bs.st_uid);
}

/* No record of rec in unflushed/, one of this boot, or one that is neither owner's (the blob's) nor root's: the
 * blob it speaks for may be used as it is. */
static int record_ok(const char *rec, uid_t owner)
{
    struct stat rs;
    SH_SCRATCH(t);
    if (sh_join(t->a, SH_SCR, sh_cache, "/unflushed/", rec, NULL, NULL) >= SH_SCR)
        return 0;
    int fd = sh_cache_open(t->a, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0)
        return errno == ENOENT ||
               (sh_r.lstat(t->a, &rs) == 0 && rs.st_uid != owner && rs.st_uid != 0);
    int known = sh_r.fstat(fd, &rs) == 0;
    if (known && rs.st_uid != owner && rs.st_uid != 0) {
        sh_r.close(fd);
        return 1;
    }
    /* one a member could write into (group-writable, as records were before 0640) says nothing: its boot id
     * could be this boot's written over a crash's (lib/durable.c's record_state) */
    char got[37], id[37];
    ssize_t k = !known || (rs.st_mode & (S_IWGRP | S_IWOTH)) ? -1 : read(fd, got, 36);
    sh_r.close(fd);
    return k == 36 && boot_id(id) == 0 && !memcmp(got, id, 36);
}

int sh_boot_id(char out[37])
{
    static char id[37];
    static int have;   /* 1 read (the same 36 characters in every thread, a vfork child's too) */
    if (!__atomic_load_n(&have, __ATOMIC_ACQUIRE)) {
        char t[37];
        if (boot_id(t) < 0)
            return -1;
        memcpy(id, t, 37);
        __atomic_store_n(&have, 1, __ATOMIC_RELEASE);
    }
    memcpy(out, id, 37);
    return 0;
}

struct blob_find {
    char *blob;        /* out: the path of the copy found (blobs/<hex> when none) */
    size_t n;
    const char *hex, *key;
    unsigned long long size;   /* the manifest's */
};

/* Finds a usable copy of content hex for the mount with key: blobs/<hex> (verified by its whole sha256, for every
 * mount), else mounts/<key>/cblobs/<hex> (checked by this mount's own chunk digests: lib/fetch.c). 1 found. */
static int find_blob(const struct blob_find *f)
{
    char rec[96];
    sh_join(f->blob, f->n, sh_cache, "/blobs/", f->hex, NULL, NULL);
    if (blob_usable(f->blob, f->hex))
        return 1;
    sh_join(rec, sizeof rec, f->hex, ".m", f->key, NULL, NULL);
    sh_join(f->blob, f->n, sh_cache, "/mounts/", f->key, "/cblobs/", f->hex);
    if (blob_usable(f->blob, rec))
        return 1;
    /* the flush may have moved it from cblobs/ into blobs/ between the two looks */
    sh_join(f->blob, f->n, sh_cache, "/blobs/", f->hex, NULL, NULL);
    return blob_usable(f->blob, f->hex);
}

/* Whether some copy of f->hex is there for f->key at all, trusted or not (f->blob: the last path looked at). */
static int copy_exists(const struct blob_find *f)
{
    snprintf(f->blob, f->n, "%s/mounts/%s/cblobs/%s", sh_cache, f->key, f->hex);
    if (sh_exists(f->blob))
        return 1;
    snprintf(f->blob, f->n, "%s/blobs/%s", sh_cache, f->hex);
    return sh_exists(f->blob);
}

/* Why no copy of f->hex is usable although the helper answered: a copy is there, but a record of another boot
 * that this user could not remove stands beside it. 1 with the line in why, 0 none such. */
static int record_why(const struct blob_find *f, char *why, size_t n)
{
    SH_SCRATCH(t);
    struct stat bs, rs;
    for (int i = 0; i < 2; i++) {
        if (i == 0) {
            snprintf(t->a, SH_SCR, "%s/blobs/%s", sh_cache, f->hex);
            snprintf(t->b, SH_SCR, "%s/unflushed/%s", sh_cache, f->hex);
        } else {
            snprintf(t->a, SH_SCR, "%s/mounts/%s/cblobs/%s", sh_cache, f->key, f->hex);
            snprintf(t->b, SH_SCR, "%s/unflushed/%s.m%s", sh_cache, f->hex, f->key);
        }
        if (sh_r.stat(t->a, &bs) == 0 && sh_r.lstat(t->b, &rs) == 0) {
            int w = snprintf(why, n, "%s is cached, but the record %s (uid %u's) says it was installed under another boot "
                     "and not flushed, and this user cannot remove it: ask uid %u or root to remove that record",
                     t->a, t->b, (unsigned)rs.st_uid, (unsigned)rs.st_uid);
            return w > 0;
        }
    }
    return 0;
}

/* HFS3_VERIFY_FOREIGN=1: opens (flags) the first copy of f->hex whose descriptor may be served (sh_may_serve,
 * include/hfs3/serve.h): blobs/<hex>, else this mount's cblobs/<hex> (where the helper puts this user's own copy
 * of a member's blob), each only when its record allows (record_ok, after the open: the record's owner against the file's); blobs/ once more, for the flush may have
 * promoted the cblobs/ one in between. Decided on the descriptor returned, after the open: a name a member
 * fills between a look and the open is refused like any other of theirs. fd (f->blob its path), or -1. */
static int serve_open(const struct blob_find *f, int flags)
{
    char rec[96];
    struct stat dir;
    for (int i = 0; i < 3; i++) {
        if (i == 1) {
            snprintf(f->blob, f->n, "%s/mounts/%s/cblobs/%s", sh_cache, f->key, f->hex);
            snprintf(rec, sizeof rec, "%s.m%s", f->hex, f->key);
        } else {
            snprintf(f->blob, f->n, "%s/blobs/%s", sh_cache, f->hex);
            snprintf(rec, sizeof rec, "%s", f->hex);
        }
        int fd = sh_cache_open_in(f->blob, flags, 0, &dir);
        if (fd < 0)
            continue;
        struct stat st;
        if (sh_may_serve_as(fd, &dir, f->size, f->blob, 2, f->hex, i == 1 ? f->key : NULL, NULL) &&
            sh_r.fstat(fd, &st) == 0 && record_ok(rec, st.st_uid))
            return fd;
        sh_r.close(fd);
    }
    return -1;
}

/* HFS3_VERIFY_FOREIGN=1 and the copy at f->blob is there but may not be served as it is (a member's: the helper
 * makes this user's own copy of it). A look only, to choose what to do; what is served is decided again on the
 * descriptor (serve_open). */
static int blob_foreign(const struct blob_find *f, int *again)
{
    *again = 0;
    if (!sh_verify_foreign)
        return 0;
    struct stat dir;
    int fd = sh_cache_open_in(f->blob, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0, &dir);
    if (fd < 0)
        return errno != ENOENT;
    int bad = !sh_may_serve_as(fd, &dir, f->size, f->blob, 2, f->hex, strstr(f->blob, "/cblobs/") ? f->key : NULL,
                               again);
    sh_r.close(fd);
    return bad && !*again;
}

/* Done waiting: a usable copy is there; with HFS3_VERIFY_FOREIGN=1 one that may be served (a member's, which
 * one could have planted while holding the lock we waited for, is the helper's to copy) */
static int blob_there(const void *arg)
{
    const struct blob_find *f = arg;
    if (!sh_verify_foreign)
        return find_blob(f);
    int fd = serve_open(f, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0)
        sh_r.close(fd);
    return fd >= 0;
}

/* The fails/<sha>.err that was there before this fetch (its inode and time): never this fetch's reason. */
struct err_before {
    ino_t ino;
    struct timespec mtim;
};

/* 1 when the file at path was modified at or after t0 - slack_ns and is not the one seen before the fetch (a
 * line written by an earlier attempt within the slack: the helper replaces the file by rename, a new inode). */
static int err_since(const char *path, const struct timespec *t0, long slack_ns, const struct err_before *b)
{
    struct stat st;
    if (sh_r.stat(path, &st) < 0)
        return 0;
    if (b->ino && st.st_ino == b->ino && st.st_mtim.tv_sec == b->mtim.tv_sec && st.st_mtim.tv_nsec == b->mtim.tv_nsec)
        return 0;
    long long m = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    long long t = (long long)t0->tv_sec * 1000000000LL + t0->tv_nsec - slack_ns;
    return m >= t;
}

/* Makes sure blobs/<sha> of file entry e exists: 0, -EINTR (a signal ended the wait), or -EIO (logged). With
 * HFS3_VERIFY_FOREIGN=1 (serve_blob) a copy that may not be served counts as missing: the helper's _get, under the
 * blob's lock, makes this user's own copy of a member's blob (hashed as copied; refused when it does not match),
 * and 0 means a copy that may be served is there (serve_open decides again on the descriptor). force: run the helper even when the
 * blob is there (it went away between this and the open: a gc removed it). Whenever it goes past the fast
 * path it pins the blob first (sh_pin; *pin: the descriptor, -1 none), so that what it fetched or found is
 * still there when the caller opens it; the caller unpins (sh_unpin) once the open is done, in every case. */
static int ensure_blob(struct sh_mount *m, uint32_t e, char *blob, size_t n, int force, int *pin, int cancel)
{
    char hex[65];
    sh_hexs(m->ents[e].sha256, hex);
    if (sh_join(blob, n, sh_cache, "/mounts/", m->key, "/cblobs/", hex) >= n)
        return -ENAMETOOLONG;
    struct blob_find bf = {blob, n, hex, m->key, (unsigned long long)m->ents[e].size};
    int again = 0, found = find_blob(&bf);
    int foreign = found && blob_foreign(&bf, &again);
    if (!force && !foreign && !again && found)
        return 0;
    if (sh_offline) {
        if (foreign) {
            sh_log(0, "%s/%s: the cached copy is another user's, HFS3_VERIFY_FOREIGN=1 and HFS3_OFFLINE=1: not "
                   "verified, not read", m->path, sh_epath(m, e));
            return -EIO;
        }
        /* (a copy of this user's own not stamped as verified as this name: the helper hashes it, offline too) */
        if (found && !again)
            return 0;
        /* a copy from before the last restart (its record holds another boot id): the helper's _get hashes it
         * again, which needs no network. Nothing there, or a read-only cache (no record can be written): EIO */
        int ro = __atomic_load_n(&sh_cache_ro, __ATOMIC_ACQUIRE), stale = copy_exists(&bf);
        if (ro || !stale) {
            sh_log(1, "%s/%s: not in the cache%s and HFS3_OFFLINE=1", m->path, sh_epath(m, e),
                   !stale ? (ro ? ", which is read-only," : "")
                          : " (a copy not known to be on disk before the last restart, in a read-only cache: not "
                            "verified)");
            return -EIO;
        }
    }
    if (sh_in_vfork())
        return -EIO;
    if (*pin < 0)
        *pin = sh_pin(hex);
    SH_SCRATCH(t);
    char *lk = t->a, *tmp = t->b, *why = t->d;
    snprintf(lk, SH_SCR, "%s/locks", sh_cache);
    sh_mkdirs(lk);
    snprintf(lk, SH_SCR, "%s/locks/%s.lock", sh_cache, hex);
    char *argv[] = {NULL, "_get", "--lock-fd", "3", m->remote, (char *)sh_epath(m, e), NULL};
    snprintf(tmp, SH_SCR, "%s/tmp", sh_cache);
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    char *label = t->c;
    snprintf(label, SH_SCR, "%s/%s", m->path, sh_epath(m, e));
    struct sh_lockjob j = {lk, blob_there, &bf, argv, 1, tmp, hex, label,
                           (unsigned long long)m->ents[e].size, cancel, pin};
    sh_log(2, "%s: fetching %s/%s (%llu bytes)%s", label, m->remote, sh_epath(m, e),
           (unsigned long long)m->ents[e].size, foreign ? " (another user's copy: making your own)" : "");
    struct err_before eb = {0, {0, 0}};
    struct stat es;
    if ((size_t)snprintf(why, SH_SCR, "%s/fails/%s.err", sh_cache, hex) < SH_SCR && sh_r.stat(why, &es) == 0)
        eb = (struct err_before){es.st_ino, es.st_mtim};
    struct timespec s0;
    clock_gettime(CLOCK_MONOTONIC, &s0);
    int rc = sh_run_locked(&j);
    if (rc == -EINTR)
        return rc;   /* a signal: the fetch goes on for the next open */
    if (rc == -ETIMEDOUT) {
        sh_log(0, "%s/%s: the fetch made no progress for %ld s (HFS3_STALL_TIMEOUT): giving up", m->path,
               sh_epath(m, e), sh_stall);
        return -EIO;
    }
    if (rc < 0) {
        sh_log(0, "%s/%s: cannot fetch: %s", m->path, sh_epath(m, e), strerror(-rc));
        return -EIO;
    }
    snprintf(lk, SH_SCR, "%s/fails/%s.err", sh_cache, hex);
    /* HFS3_VERIFY_FOREIGN=1: done when a copy that may be served is there now (serve_open decides again on the
     * descriptor it returns), whatever the helper said */
    int have = sh_verify_foreign ? blob_there(&bf) : find_blob(&bf);
    /* the detached flush may hold a stamped file's owner write bit for a moment (lib/durable.c hfs3_stamp_set,
     * under the blob's lock) just as this look ran, after the lock was let go: one more look, under the lock */
    if (sh_verify_foreign && !have && rc == 0 && (rc = sh_run_locked(&j)) == 0)
        have = blob_there(&bf);
    /* and a few more, 50 ms apart (1 s at most, only when a refusal is about to be the answer): a clean-clone CI
     * run still saw one refusal after the locked look, in t_cache_deny's planted cblobs/<sha> case, whose cause was
     * not found; the decision stays the one serve_open makes on the descriptor it returns */
    for (int k = 0; sh_verify_foreign && !have && rc == 0 && k < 20; k++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        have = blob_there(&bf);
    }
    if (sh_verify_foreign)
        foreign = 1;
    if (foreign && rc == 0 && err_since(lk, &t0, 0, &eb))
        rc = 1;   /* a helper reaped by the host tells nothing: a .err written since we started says it refused */
    if (have) {
        struct timespec s1;
        clock_gettime(CLOCK_MONOTONIC, &s1);
        sh_log(2, "%s: fetched in %.1f s", label,
               (double)(s1.tv_sec - s0.tv_sec) + (double)(s1.tv_nsec - s0.tv_nsec) / 1e9);
        return 0;
    }
    /* the reason of this fetch only: a line left by an earlier one would name another failure (20 ms of
     * slack: file times come from the kernel's coarse clock, which lags CLOCK_REALTIME by up to a tick) */
    why[0] = 0;
    if (err_since(lk, &t0, 20000000L, &eb))
        sh_read_line(lk, why, 512);
    if (!why[0]) {
        /* the helper left no line in fails/: say what is known (never "no reason") */
        if (rc > 128)
            snprintf(why, 512, "the helper was killed by signal %d (%s) before it finished", rc - 128,
                     strsignal(rc - 128));
        else if (rc > 0)
            snprintf(why, 512, "the helper exited with status %d without a reason (HFS3_LOG=debug shows its "
                     "output)", rc);
        else if (*pin < 0)
            snprintf(why, 512, "the file was removed from the cache (a `cache gc` or HFS3_CACHE_MAX making room) "
                     "before this open could pin it: try again");
        else if (!record_why(&bf, why, 512))
            snprintf(why, 512, "the helper ended without installing the file and without a reason (killed, or "
                     "reaped by this program before it could tell)");
    }
    sh_log(0, "%s/%s: fetch failed: %s", m->path, sh_epath(m, e), why);
    return -EIO;
}

/* O_PATH of file entry e when a usable copy is in the cache (never a fetch): a path descriptor of the blob, which
 * the kernel re-opens through /proc/self/fd/N as the file. fd, or -1: none there, another user's under
 * HFS3_VERIFY_FOREIGN=1, or not trusted (the caller falls back to the parent's skeleton). */
static int path_of_blob(struct sh_mount *m, uint32_t e, char *blob, int keep)
{
    char hex[65];
    sh_hexs(m->ents[e].sha256, hex);
    struct blob_find bf = {blob, SH_SCR, hex, m->key, (unsigned long long)m->ents[e].size};
    if (sh_cache_ready() < 0)
        return -1;
    if (sh_verify_foreign)   /* decided on the descriptor, as a data open is */
        return serve_open(&bf, O_PATH | (keep & O_CLOEXEC));
    if (!find_blob(&bf))
        return -1;
    int fd = sh_cache_open(blob, O_PATH | (keep & O_CLOEXEC), 0);
    struct stat st;
    if (fd >= 0 && (!sh_trusted_file(fd, blob) || sh_r.fstat(fd, &st) < 0 ||
                    (uint64_t)st.st_size != m->ents[e].size)) {
        sh_r.close(fd);
        fd = -1;
    }
    return fd;
}

/* HFS3_VERIFY_FOREIGN=1: the descriptor served for file entry e, decided on itself (serve_open): a copy that may
 * be served as it is, else the one the helper's _get leaves (fetched, or this user's own copy of a member's
 * blob, hashed as it was copied). fd, or -errno (-EIO logged). */
static int serve_blob(struct sh_mount *m, uint32_t e, char *rp, int keep, int cancel)
{
    char hex[65];
    sh_hexs(m->ents[e].sha256, hex);
    struct blob_find bf = {rp, SH_SCR, hex, m->key, (unsigned long long)m->ents[e].size};
    int flags = O_RDONLY | O_NONBLOCK | keep, pin = -1;
    int fd = serve_open(&bf, flags);
    if (fd >= 0)
        return fd;
    int rc = ensure_blob(m, e, rp, SH_SCR, 1, &pin, cancel);
    if (rc == 0 && (fd = serve_open(&bf, flags)) < 0) {
        sh_log(0, "%s/%s: no copy of your own or root's to serve, and HFS3_VERIFY_FOREIGN=1 serves no other "
               "(HFS3_LOG=debug says why each copy was refused)", m->path, sh_epath(m, e));
        rc = -EIO;
    }
    sh_unpin(pin);
    return rc < 0 ? rc : fd;
}

/* The data open of file entry e (the blob, fetched first when missing): fd, or -errno. cancel: the host has
 * cancellation enabled (sh_open turned it off for this call). */
static int open_data(struct sh_mount *m, uint32_t e, char *rp, int keep, int cancel)
{
    int rc, fd;
    /* before this file's own fetch: the prefetcher takes the shards in order from now, and the file
     * opened here is fetched alongside it (or waited for, where the prefetcher has it) */
    maybe_prefetch(m, e);
    int pin = -1;
    if (sh_verify_foreign) {
        fd = serve_blob(m, e, rp, keep, cancel);
        if (fd < 0)
            return fd;
        goto opened;
    }
    if ((rc = ensure_blob(m, e, rp, SH_SCR, 0, &pin, cancel)) < 0) {
        sh_unpin(pin);
        return rc;
    }
    /* O_NONBLOCK: a FIFO planted under the blob's name cannot hang the open; cleared again after the
     * checks when the caller did not ask for it (regular files ignore it, F_GETFL shows it) */
    fd = sh_cache_open(rp, O_RDONLY | O_NONBLOCK | keep, 0);
    if (fd < 0 && errno == ENOENT && !sh_in_vfork()) {
        /* removed between the check and the open (a gc making room): fetch it once more, pinned; or moved
         * (the flush promoting a cblobs/ file into blobs/): offline, one more look finds it there */
        if ((rc = ensure_blob(m, e, rp, SH_SCR, 1, &pin, cancel)) < 0) {
            sh_unpin(pin);
            return rc;
        }
        fd = sh_cache_open(rp, O_RDONLY | O_NONBLOCK | keep, 0);
    }
    int oe = errno;
    sh_unpin(pin);   /* the open has the file (or failed): a gc may remove the name now */
    errno = oe;
    if (fd < 0 && errno == ELOOP) {
        sh_log(0, "%s: a symlink: not trusted, not read", rp);
        return -EIO;
    }
    if (fd >= 0 && !sh_may_serve(fd, NULL, m->ents[e].size, rp, 0)) {
        sh_r.close(fd);
        return -EIO;
    }
opened:
    if (fd >= 0 && !(keep & O_NONBLOCK))
        (void)sh_r.fcntl(fd, F_SETFL, sh_r.fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (fd >= 0 && !sh_in_vfork())
        hfs3_shim_lastuse(rp);   /* the lock file's mtime: this blob was used now (gc's LRU) */
    if (fd < 0)
        return -errno == -ENOENT ? -EIO : -errno;
    return fd;
}

int sh_open(const struct sh_loc *l, int flags, mode_t mode)
{
    /* O_DIRECT kept: a GPU-direct loader (cuFile, KvikIO, fastsafetensors) reads the blob past the page cache,
     * and where the cache's file system cannot, the open fails with the kernel's EINVAL (issue 33 item 7) */
    int keep = flags & (O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_PATH | O_DIRECT);
    int wr = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
    if (l->link && (flags & O_NOFOLLOW)) {
        int fd = sh_r.open(l->link, flags, mode);   /* the magic link itself: ELOOP, or O_PATH of the link */
        return fd >= 0 ? fd : -errno;
    }
    SH_SCRATCH(t);
    char *rp = t->a;
    int fd;
    struct stat ast;
    if (l->kind == L_ANC && sh_r.lstat(l->path, &ast) == 0) {
        /* an ancestor that exists on disk is the host's own */
        fd = sh_r.open(l->path, flags, mode);
        return fd >= 0 ? fd : -errno;
    }
    if ((flags & __O_TMPFILE) == __O_TMPFILE) {
        /* the kernel's order (issue 33 item 6): the flags first (O_TMPFILE needs write access, no O_CREAT),
         * then the lookup, then the read-only file system: EROFS for a directory, not EISDIR */
        if ((flags & O_CREAT) || (flags & O_ACCMODE) == O_RDONLY)
            return -EINVAL;
        struct stat st;
        int rc = sh_stat(l, !(flags & O_NOFOLLOW), &st);
        return rc < 0 ? rc : S_ISDIR(st.st_mode) ? -EROFS : -ENOTDIR;
    }
    if (wr) {
        /* the answers of a read-only file system, in the kernel's order (t_shim_kernel.sh compares) */
        struct stat st;
        int rc = sh_stat(l, !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL)), &st);
        if ((flags & O_CREAT) && (rc == -ENOENT || (rc == 0 && l->slash))) {
            int ce = sh_create_err(l, SH_C_OPEN); /* the parent's lookup, EISDIR, ENAMETOOLONG, EROFS */
            if (ce != EEXIST)
                return -ce;
        }
        if (rc < 0)
            return rc;
        if ((flags & O_CREAT) && (flags & O_EXCL))
            return -EEXIST;
        int writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
        /* (O_CREAT of a directory, the kernel's EISDIR, is answered before: wrap.c's kopen_err, one place) */
        if (S_ISDIR(st.st_mode) && writes)
            return -EISDIR;
        if (writes)
            return -EROFS;
        flags &= ~(O_CREAT | O_APPEND);   /* an existing file, read only: what the kernel allows */
    }
    if (l->kind == L_ANC) {
        struct stat st;
        sh_anc_path(l->path, rp, SH_SCR);
        if (sh_stat_skel(rp, &st) < 0)
            return -ENOENT;
        fd = sh_cache_open(rp, O_RDONLY | O_DIRECTORY | keep, 0);
        if (fd < 0)
            return -errno;
        fd = sh_fd_low(fd, keep & O_CLOEXEC);   /* the kernel's number: sh_cache_open held its directory's */
        sh_fd_set(fd, FD_ANC, l->m, 0);
        return fd;
    }
    const struct sh_mount *cm;
    uint32_t e;
    int rc = sh_resolve(l, !(flags & O_NOFOLLOW), &cm, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc < 0)
        return rc;
    struct sh_mount *m = (struct sh_mount *)cm;
    struct stat st;
    uint32_t ty = rc == 1 ? HFS3_IX_DIR : m->ents[e].type;
    if (ty == HFS3_IX_DIR) {
        sh_tree_path(m, rc == 1 ? "" : sh_epath(m, e), rp, SH_SCR);
        if (sh_stat_skel(rp, &st) < 0)
            return -EIO;
        fd = sh_cache_open(rp, O_RDONLY | O_DIRECTORY | keep, 0);
        if (fd < 0)
            return -errno;
        fd = sh_fd_low(fd, keep & O_CLOEXEC);
        sh_fd_set(fd, FD_DIR, m->idx, e);   /* a hub's repository: its sub-mount (sh_resolve) */
        return fd;
    }
    if (flags & O_DIRECTORY)
        return -ENOTDIR;
    if (ty == HFS3_IX_SYMLINK && !(flags & O_PATH))
        return -ELOOP;
    if ((flags & O_PATH) && ty == HFS3_IX_FILE && (fd = path_of_blob(m, e, rp, keep)) >= 0) {
        /* the file itself: re-opened through /proc/self/fd/N it is the file (issue 33 item 6) */
    } else if (flags & O_PATH) {
        /* never fetch: not in the cache, a path descriptor on the parent's skeleton dir, with the entry's
         * identity (re-opened through /proc/self/fd/N it is that directory: the one difference left) */
        sh_tree_path(m, sh_epath(m, m->ents[e].parent), rp, SH_SCR);
        if (sh_stat_skel(rp, &st) < 0)
            return -EIO;
        fd = sh_cache_open(rp, O_PATH | O_DIRECTORY | (keep & O_CLOEXEC), 0);
    } else {
        /* Cancellation is off for the whole cold open (issue 33 item 3): a thread cancelled at one of the
         * cancellation points inside (open, read, close, nanosleep, waitpid) was unwound past the pin and the
         * lock it held, which stayed open for the process's life, and the pin's shared lock kept every gc from
         * removing the file. A pending cancel acts in the wait on the fetch (helper.c's cancel_point, which
         * releases them) or at the host's next cancellation point after the open. */
        int cs;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
        fd = open_data(m, e, rp, keep, cs == PTHREAD_CANCEL_ENABLE);
        pthread_setcancelstate(cs, NULL);
        if (fd < 0)
            return fd;
    }
    if (fd < 0)
        return -errno == -ENOENT ? -EIO : -errno;
    /* the number the kernel would give (issue 41 item 1): the pin, the lock and sh_cache_open's directory were held
     * while the blob was opened, and a cold open of a first file got 9 with 0 free */
    fd = sh_fd_low(fd, keep & O_CLOEXEC);
    sh_fd_set(fd, FD_FILE, m->idx, e);
    return fd;
}

