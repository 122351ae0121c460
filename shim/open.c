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

static void hexs(const uint8_t *h, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[64] = 0;
}

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

static int blob_there(const void *blob)
{
    return sh_exists(blob);
}

/* HFS3_VERIFY_FOREIGN=1 and the blob at path is another user's (root aside): not handed out on trust. */
static int blob_foreign(const char *path)
{
    struct stat st;
    uid_t me = geteuid();
    return sh_verify_foreign && sh_r.lstat(path, &st) == 0 && st.st_uid != me && st.st_uid != 0;
}

static int never_done(const void *arg)
{
    (void)arg;
    return 0;
}

/* Makes sure blobs/<sha> of file entry e exists: 0, -EINTR (a signal ended the wait), or -EIO (logged). With
 * HFS3_VERIFY_FOREIGN=1 a blob of another user is not used as it is: the helper's _get, under the blob's lock as
 * for a missing one, re-hashes it (and refuses it when it does not match). force: run the helper even when the
 * blob is there (it went away between this and the open: a gc removed it). */
static int ensure_blob(struct sh_mount *m, uint32_t e, char *blob, size_t n, int force)
{
    char hex[65];
    hexs(m->ents[e].sha256, hex);
    if ((size_t)snprintf(blob, n, "%s/blobs/%s", sh_cache, hex) >= n)
        return -ENAMETOOLONG;
    int foreign = blob_foreign(blob);
    if (!force && !foreign && sh_exists(blob))
        return 0;
    if (sh_offline) {
        if (foreign) {
            sh_log(0, "%s/%s: the cached copy is another user's, HFS3_VERIFY_FOREIGN=1 and HFS3_OFFLINE=1: not "
                   "verified, not read", m->path, sh_epath(m, e));
            return -EIO;
        }
        if (sh_exists(blob))
            return 0;
        sh_log(1, "%s/%s: not in the cache%s and HFS3_OFFLINE=1", m->path, sh_epath(m, e),
               __atomic_load_n(&sh_cache_ro, __ATOMIC_ACQUIRE) ? ", which is read-only," : "");
        return -EIO;
    }
    if (sh_in_vfork())
        return -EIO;
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
    struct sh_lockjob j = {lk, foreign ? never_done : blob_there, blob, argv, 1, tmp, hex, label,
                           (unsigned long long)m->ents[e].size};
    sh_log(2, "%s: fetching %s/%s (%llu bytes)%s", label, m->remote, sh_epath(m, e),
           (unsigned long long)m->ents[e].size, foreign ? " (another user's copy: verifying it)" : "");
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
    if (foreign && rc == 0) {
        /* a helper reaped by the host tells nothing: a .err written since we started says it refused */
        struct stat st;
        if (sh_r.stat(lk, &st) == 0 && (st.st_mtim.tv_sec > t0.tv_sec ||
                                        (st.st_mtim.tv_sec == t0.tv_sec && st.st_mtim.tv_nsec >= t0.tv_nsec)))
            rc = 1;
    }
    if (!(foreign && rc) && sh_exists(blob)) {
        struct timespec s1;
        clock_gettime(CLOCK_MONOTONIC, &s1);
        sh_log(2, "%s: fetched in %.1f s", label,
               (double)(s1.tv_sec - s0.tv_sec) + (double)(s1.tv_nsec - s0.tv_nsec) / 1e9);
        return 0;
    }
    sh_read_line(lk, why, 512);
    sh_log(0, "%s/%s: fetch failed: %s", m->path, sh_epath(m, e), why[0] ? why : "(no reason recorded)");
    return -EIO;
}

int sh_open(const struct sh_loc *l, int flags, mode_t mode)
{
    int keep = flags & (O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_PATH);
    int wr = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
    SH_SCRATCH(t);
    char *rp = t->a;
    int fd;
    struct stat ast;
    if (l->kind == L_ANC && sh_r.lstat(l->path, &ast) == 0) {
        /* an ancestor that exists on disk is the host's own */
        fd = sh_r.open(l->path, flags, mode);
        return fd >= 0 ? fd : -errno;
    }
    if (wr) {
        /* the answers of a read-only file system, in the kernel's order (t_shim_kernel.sh compares) */
        struct stat st;
        int rc = sh_stat(l, !(flags & O_NOFOLLOW) && !((flags & O_CREAT) && (flags & O_EXCL)), &st);
        if (rc == -ENOENT && (flags & O_CREAT))
            return -EROFS;
        if (rc < 0)
            return rc;
        if ((flags & O_CREAT) && (flags & O_EXCL))
            return -EEXIST;
        int writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
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
        sh_fd_set(fd, FD_DIR, (int)(m - sh_mounts), e);   /* a hub's repository: its sub-mount (sh_resolve) */
        return fd;
    }
    if (flags & O_DIRECTORY)
        return -ENOTDIR;
    if (ty == HFS3_IX_SYMLINK && !(flags & O_PATH))
        return -ELOOP;
    if (flags & O_PATH) {
        /* never fetch: a path descriptor on the parent's skeleton dir, with the entry's identity */
        sh_tree_path(m, sh_epath(m, m->ents[e].parent), rp, SH_SCR);
        if (sh_stat_skel(rp, &st) < 0)
            return -EIO;
        fd = sh_cache_open(rp, O_PATH | O_DIRECTORY | (keep & O_CLOEXEC), 0);
    } else {
        /* before this file's own fetch: the prefetcher takes the shards in order from now, and the file
         * opened here is fetched alongside it (or waited for, where the prefetcher has it) */
        maybe_prefetch(m, e);
        if ((rc = ensure_blob(m, e, rp, SH_SCR, 0)) < 0)
            return rc;
        /* O_NONBLOCK: a FIFO planted under the blob's name cannot hang the open; cleared again after the
         * checks when the caller did not ask for it (regular files ignore it, F_GETFL shows it) */
        fd = sh_cache_open(rp, O_RDONLY | O_NONBLOCK | keep, 0);
        if (fd < 0 && errno == ENOENT && !sh_offline && !sh_in_vfork()) {
            /* removed between the check and the open (a gc making room): fetch it once more */
            if ((rc = ensure_blob(m, e, rp, SH_SCR, 1)) < 0)
                return rc;
            fd = sh_cache_open(rp, O_RDONLY | O_NONBLOCK | keep, 0);
        }
        if (fd < 0 && errno == ELOOP) {
            sh_log(0, "%s: a symlink: not trusted, not read", rp);
            return -EIO;
        }
        if (fd >= 0 && !sh_trusted_file(fd, rp)) {
            sh_r.close(fd);
            return -EIO;
        }
        if (fd >= 0 && !(keep & O_NONBLOCK))
            (void)sh_r.fcntl(fd, F_SETFL, sh_r.fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        if (fd >= 0 && !sh_in_vfork())
            hfs3_shim_lastuse(rp);   /* the lock file's mtime: this blob was used now (gc's LRU) */
    }
    if (fd < 0)
        return -errno == -ENOENT ? -EIO : -errno;
    sh_fd_set(fd, FD_FILE, (int)(m - sh_mounts), e);
    return fd;
}

