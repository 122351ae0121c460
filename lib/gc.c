/* gc.c - the cache within its disk: the budget (HFS3_CACHE_MAX), least-recently-used eviction and the
 * free-space check before a fetch, and the listings behind `cache du|gc|verify` and `status`. Every blob is
 * removed under its own lock taken without waiting (docs/internals.md), by unlinkat from the checked blobs/
 * descriptor, and only when its pin (locks/<sha>.pin.lock: an open about to read it, a `fetch` keeping its
 * model) is free; another user's blob in a shared (sticky) cache is never tried. Last use: lastuse.h. */
#include "hfs3/gc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/index.h"
#include "hfs3/lastuse.h"
#include "hfs3/log.h"
#include "hfs3/progress.h"
#include "hfs3/util.h"

#define GC_LOCK "gc.lock" /* serializes evictors (fetches making room, `cache gc`); not a blob's lock */
#define GC_ROOM_STALL 10  /* seconds without a change in the way before make_room gives up waiting */

int hfs3_gc_parse_size(const char *s, uint64_t fs_bytes, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+')
        return hfs3_err(-EINVAL, "bad size '%s': give bytes with an optional K, M, G or T, or a percentage",
                        s ? s : "");
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0)
        return hfs3_err(-EINVAL, "bad size '%s': give bytes with an optional K, M, G or T, or a percentage", s);
    double mul = 1;
    if (*end == '%') {
        if (end[1] || v > 100)
            return hfs3_err(-EINVAL, "bad size '%s': a percentage is 0%% to 100%% of the file system", s);
        *out = (uint64_t)((double)fs_bytes * v / 100.0);
        return 0;
    }
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, *end == 'k' ? 'K' : *end) : NULL;
    if (*end && u) {
        for (const char *p = units; p <= u; p++)
            mul *= 1024;
        end++;
        if (*end == 'i')
            end++;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * mul >= 9.2e18 || (mul == 1 && v != floor(v)))
        return hfs3_err(-EINVAL, "bad size '%s': give bytes with an optional K, M, G or T, or a percentage", s);
    *out = (uint64_t)(v * mul);
    return 0;
}

static uint64_t fs_total(const hfs3_cache *c)
{
    struct statvfs v;
    return fstatvfs(c->fd, &v) == 0 ? (uint64_t)v.f_blocks * v.f_frsize : 0;
}

/* Bytes this process may still write on the cache's file system (root may use the reserved blocks). */
static uint64_t fs_avail(const hfs3_cache *c)
{
    struct statvfs v;
    if (fstatvfs(c->fd, &v) < 0 || v.f_blocks == 0)
        return UINT64_MAX; /* unknown (ramfs reports no blocks at all): let the write itself fail */
    return (uint64_t)(geteuid() == 0 ? v.f_bfree : v.f_bavail) * v.f_frsize;
}

int hfs3_gc_budget(const hfs3_cache *c, uint64_t *max)
{
    const char *s = getenv("HFS3_CACHE_MAX");
    if (!s || !*s)
        return 0;
    int rc = hfs3_gc_parse_size(s, strchr(s, '%') ? fs_total(c) : 0, max);
    if (rc < 0)
        return hfs3_err_wrap(rc, "HFS3_CACHE_MAX");
    return 1;
}

void hfs3_gc_touch(const hfs3_cache *c, const char *sha)
{
    char name[80];
    snprintf(name, sizeof name, "%.64s.lock", sha);
    hfs3_lastuse_touch_at(c->locks, name);
}

static int cmp_sha(const void *a, const void *b)
{
    return strcmp(((const hfs3_gc_blob *)a)->sha, ((const hfs3_gc_blob *)b)->sha);
}

/* The bytes a file counts for against the budget: its size when it is this user's own; another user's at no more
 * than the blocks it holds. A sparse 1 TiB file costs a member of a shared cache no disk, and counted at its
 * apparent size it would fail every fetch of another user's under HFS3_CACHE_MAX (a file system that compresses
 * counts a member's files at what they take on disk too). */
static uint64_t held_bytes(const hfs3_cache *c, const struct stat *st)
{
    uint64_t size = (uint64_t)st->st_size, blocks = (uint64_t)st->st_blocks * 512;
    return st->st_uid == c->uid || blocks >= size ? size : blocks;
}

/* Opens a directory of the cache again for readdir (the cache keeps its own descriptor). */
static DIR *reopen_dir(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d)
        close(fd);
    return d;
}

int hfs3_gc_list(const hfs3_cache *c, hfs3_gc_blob **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = reopen_dir(c->blobs);
    if (!d)
        return hfs3_err(-errno, "%s: %s", c->p_blobs, strerror(errno));
    hfs3_gc_blob *v = NULL;
    size_t len = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        struct stat st, ls;
        if (!hfs3_is_sha256_hex(de->d_name) || fstatat(c->blobs, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 256;
            hfs3_gc_blob *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = hfs3_err(-ENOMEM, "out of memory");
                break;
            }
            v = nv;
            cap = nc;
        }
        hfs3_gc_blob *b = &v[len++];
        memset(b, 0, sizeof *b);
        memcpy(b->sha, de->d_name, 65);
        b->size = held_bytes(c, &st);
        b->uid = st.st_uid;
        b->last_use = st.st_mtim.tv_sec;
        char lock[80];
        snprintf(lock, sizeof lock, "%s.lock", b->sha);
        if (fstatat(c->locks, lock, &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ls.st_mode) &&
            ls.st_mtim.tv_sec > b->last_use)
            b->last_use = ls.st_mtim.tv_sec;
    }
    closedir(d);
    if (rc < 0) {
        free(v);
        return rc;
    }
    if (len)
        qsort(v, len, sizeof *v, cmp_sha);
    *out = v;
    *n = len;
    return 0;
}

hfs3_gc_blob *hfs3_gc_find(hfs3_gc_blob *b, size_t n, const char *sha)
{
    hfs3_gc_blob key;
    if (!b || !n || strlen(sha) != 64)
        return NULL;
    memcpy(key.sha, sha, 65);
    return bsearch(&key, b, n, sizeof *b, cmp_sha);
}

uint64_t hfs3_gc_tmp_bytes(const hfs3_cache *c)
{
    DIR *d = reopen_dir(c->tmp);
    uint64_t sum = 0;
    if (!d)
        return 0;
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d)) != NULL)
        if (hfs3_ends_with(de->d_name, ".part") && fstatat(c->tmp, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            sum += held_bytes(c, &st);
    closedir(d);
    return sum;
}

/* A number that changes when anything in tmp/ does: a fetch in progress writes its .part (mtime) and sidecar
 * (size), so make_room's wait sees a slow download as moving even though the .part's size is fixed. */
static uint64_t tmp_state(const hfs3_cache *c)
{
    DIR *d = reopen_dir(c->tmp);
    uint64_t h = 1469598103934665603ULL;
    if (!d)
        return 0;
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && fstatat(c->tmp, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            h = (h ^ ((uint64_t)st.st_size * 1000003u + (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                      (uint64_t)st.st_mtim.tv_nsec + de->d_ino)) * 1099511628211ULL;
    closedir(d);
    return h;
}

/* The sizes of all blobs but sha. */
static uint64_t blob_bytes(const hfs3_cache *c, const char *sha)
{
    DIR *d = reopen_dir(c->blobs);
    uint64_t sum = 0;
    if (!d)
        return UINT64_MAX / 4; /* unknown: take the slow path, which says why */
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d)) != NULL)
        if (hfs3_is_sha256_hex(de->d_name) && strcmp(de->d_name, sha) &&
            fstatat(c->blobs, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            sum += held_bytes(c, &st);
    closedir(d);
    return sum;
}

/* The mounts' cblobs/ files (blobs checked by their chunk digests, include/hfs3/durable.h), appended to *v: each
 * has its record unflushed/<sha256>.m<mount key> until the flush moved it into blobs/ or removed it, so the
 * records find them all without a walk of every mount (a hub has thousands). Returns the bytes, or sets *oom. */
static uint64_t list_cblobs(const hfs3_cache *c, hfs3_gc_blob **v, size_t *len, size_t *cap, int *oom)
{
    DIR *d = reopen_dir(c->unflushed);
    uint64_t sum = 0;
    if (!d)
        return 0;
    struct dirent *de;
    struct stat st, ls;
    char rel[128];
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        /* <sha>.k<key>: a copy the flush kept in cblobs/ beside a blob its owner may not be served (durable.c
         * mark_kept); counted once, when its <sha>.m<key> record is not there too */
        if (strlen(n) != 64 + 2 + 16 || n[64] != '.' || (n[65] != 'm' && n[65] != 'k') ||
            strspn(n, "0123456789abcdef") != 64 || strspn(n + 66, "0123456789abcdef") != 16)
            continue;
        if (n[65] == 'k') {
            snprintf(rel, sizeof rel, "%.64s.m%.16s", n, n + 66);
            if (fstatat(c->unflushed, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
                continue;
        }
        /* through no symlink (a record planted by a member could point mounts/K or cblobs outside the cache) */
        int mfd = openat(c->mounts, n + 66, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int cfd = mfd < 0 ? -1 : openat(mfd, "cblobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        snprintf(rel, sizeof rel, "%.64s", n);
        int got = cfd >= 0 && fstatat(cfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
        if (cfd >= 0)
            close(cfd);
        if (mfd >= 0)
            close(mfd);
        if (!got)
            continue;
        sum += held_bytes(c, &st);
        if (!v)
            continue;
        if (*len == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            hfs3_gc_blob *nv = realloc(*v, nc * sizeof *nv);
            if (!nv) {
                *oom = 1;
                break;
            }
            *v = nv;
            *cap = nc;
        }
        hfs3_gc_blob *b = &(*v)[(*len)++];
        memset(b, 0, sizeof *b);
        snprintf(b->sha, sizeof b->sha, "%.64s", n);
        snprintf(b->mount, sizeof b->mount, "%s", n + 66);
        b->size = held_bytes(c, &st);
        b->uid = st.st_uid;
        b->last_use = st.st_mtim.tv_sec;
        snprintf(rel, sizeof rel, "%s.lock", b->sha);
        if (fstatat(c->locks, rel, &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ls.st_mode) &&
            ls.st_mtim.tv_sec > b->last_use)
            b->last_use = ls.st_mtim.tv_sec;
    }
    closedir(d);
    return sum;
}

uint64_t hfs3_gc_cblob_bytes(const hfs3_cache *c) { return list_cblobs(c, NULL, NULL, NULL, NULL); }

int hfs3_gc_list_cblobs(const hfs3_cache *c, hfs3_gc_blob **out, size_t *n)
{
    size_t cap = 0;
    int oom = 0;
    *out = NULL;
    *n = 0;
    list_cblobs(c, out, n, &cap, &oom);
    if (oom) {
        free(*out);
        *out = NULL;
        *n = 0;
        return hfs3_err(-ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < *n; i++)
        (*out)[i].refs = 1; /* its mount's manifest vouched for it: never "unreferenced" */
    return 0;
}

/* Bytes of blob sha already reserved in tmp/ by a dead fetch of this user's that a resume would reuse. */
static uint64_t part_bytes(const hfs3_cache *c, const char *sha, uint64_t size)
{
    DIR *d = reopen_dir(c->tmp);
    uint64_t got = 0;
    if (!d)
        return 0;
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d)) != NULL)
        if (!strncmp(de->d_name, sha, 64) && de->d_name[64] == '.' && hfs3_ends_with(de->d_name, ".part") &&
            fstatat(c->tmp, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == c->uid && st.st_nlink == 1 && (uint64_t)st.st_size == size) {
            got = size;
            break;
        }
    closedir(d);
    return got;
}

/* Another user's blob in a shared cache: its sticky blobs/ lets only the owner (or root) remove it. */
static int not_ours(const hfs3_cache *c, const hfs3_gc_blob *b)
{
    return c->shared && b->uid != c->uid && c->uid != 0;
}

/* ---- pins: a blob a process is about to open, or that a `fetch` keeps for its model ----
 * A pin is LOCK_SH on locks/<sha>.pin.lock, held by the shim from before it waits on a blob's fetch until its
 * open has the file, and by `fetch` for each file of the model it fetches until it exits. hfs3_gc_remove takes
 * LOCK_EX on it without waiting, so a pinned blob is busy. flock belongs to the open file: a dead holder's
 * pin goes with it, nothing to clean up. The name ends in ".lock", so the shim's fork handler closes a
 * pin's descriptor in a forked child (the parent's pin stays held). */

static pthread_mutex_t pins_mu = PTHREAD_MUTEX_INITIALIZER;
static char (*pins_here)[65]; /* the shas this process pins (hfs3_gc_pinned_here) */
static size_t pins_n, pins_cap;

static void pin_name(char *buf, size_t n, const char *sha)
{
    snprintf(buf, n, "%.64s" HFS3_GC_PIN_SUFFIX, sha);
}

int hfs3_gc_pin(const hfs3_cache *c, const char *sha)
{
    char name[96];
    pin_name(name, sizeof name, sha);
    int f = -1;
    for (int tries = 0; f < 0 && tries < 16; tries++) {
        f = hfs3_cache_openat(c, c->locks, name, O_RDONLY, NULL, c->p_locks);
        if (f >= 0 || f != -ENOENT)
            break;
        f = openat(c->locks, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (f >= 0)
            (void)fchmod(f, c->file_mode);
        else if (errno != EEXIST)
            return hfs3_err(-errno, "cache: %s/%s: %s", c->p_locks, name, strerror(errno));
    }
    if (f < 0)
        return f;
    /* a gc holds it exclusively only for one unlink: wait for that, never longer than a second */
    for (int i = 0; flock(f, LOCK_SH | LOCK_NB) < 0; i++) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || i >= 1000) {
            int e = errno == EWOULDBLOCK ? EBUSY : errno;
            close(f);
            return hfs3_err(-e, "cache: pinning %s/%s: %s", c->p_locks, name, strerror(e));
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&pins_mu);
    if (pins_n == pins_cap) {
        size_t nc = pins_cap ? pins_cap * 2 : 64;
        char(*nv)[65] = realloc(pins_here, nc * sizeof *nv);
        if (nv) {
            pins_here = nv;
            pins_cap = nc;
        }
    }
    if (pins_n < pins_cap)
        snprintf(pins_here[pins_n++], 65, "%s", sha);
    pthread_mutex_unlock(&pins_mu);
    return f;
}

void hfs3_gc_unpin(int fd, const char *sha)
{
    if (fd < 0)
        return;
    pthread_mutex_lock(&pins_mu);
    for (size_t i = 0; i < pins_n; i++)
        if (!strcmp(pins_here[i], sha)) {
            memcpy(pins_here[i], pins_here[--pins_n], 65);
            break;
        }
    if (!pins_n) {
        free(pins_here);
        pins_here = NULL;
        pins_cap = 0;
    }
    pthread_mutex_unlock(&pins_mu);
    close(fd); /* releases the LOCK_SH */
}

int hfs3_gc_pinned_here(const char *sha)
{
    int hit = 0;
    pthread_mutex_lock(&pins_mu);
    for (size_t i = 0; i < pins_n && !hit; i++)
        hit = !strcmp(pins_here[i], sha);
    pthread_mutex_unlock(&pins_mu);
    return hit;
}

/* Re-hashes the open blob fd: 1 it matches its name, 0 it does not, or an error. */
static int blob_good(int fd, const char *sha, const char *dpath)
{
    char hex[65];
    int rc = hfs3_sha256_fd(fd, hex, NULL);
    if (rc == -ENOMEM)
        return hfs3_err(rc, "out of memory");
    if (rc < 0)
        return hfs3_err(rc, "reading %s/%s: %s", dpath, sha, strerror(-rc));
    if (strcmp(hex, sha) != 0) {
        hfs3_err(0, "%s/%s hashes to %s", dpath, sha, hex);
        return 0;
    }
    return 1;
}

/* A mount's cblobs/ file (b->mount): removed under the blob's lock unless pinned, then its record. */
static int remove_cblob(const hfs3_cache *c, const hfs3_gc_blob *b, int dry_run)
{
    char lock[80], dpath[64];
    snprintf(lock, sizeof lock, "%s.lock", b->sha);
    snprintf(dpath, sizeof dpath, "mounts/%s/cblobs", b->mount);
    int fd = -1, rc = hfs3_cache_lock(c, c->locks, lock, c->p_locks, 1, &fd, NULL);
    if (rc == -EWOULDBLOCK)
        return hfs3_err(-EBUSY, "%s/%s is being fetched or checked by another process", dpath, b->sha);
    if (rc < 0)
        return rc;
    int mfd = openat(c->mounts, b->mount, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int dir = mfd < 0 ? -1 : openat(mfd, "cblobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) {
        rc = hfs3_err(-errno, "%s: %s", dpath, strerror(errno));
    } else if ((rc = hfs3_gc_unlink_unpinned(c, dir, dpath, b->sha, dry_run)) == 0 && !dry_run) {
        char rec[96];
        snprintf(rec, sizeof rec, "%s.m%s", b->sha, b->mount);
        (void)unlinkat(c->unflushed, rec, 0);
        rec[65] = 'k';   /* or its mark as a kept copy */
        (void)unlinkat(c->unflushed, rec, 0);
    }
    if (dir >= 0)
        close(dir);
    if (mfd >= 0)
        close(mfd);
    hfs3_cache_unlock(fd);
    return rc;
}

int hfs3_gc_remove(const hfs3_cache *c, const hfs3_gc_blob *b, int dry_run, int check)
{
    if (b->mount[0] && !check)
        return not_ours(c, b) ? hfs3_err(-EPERM, "mounts/%s/cblobs/%s belongs to uid %u: only its owner or root may "
                                         "remove it from a shared cache", b->mount, b->sha, (unsigned)b->uid)
                              : remove_cblob(c, b, dry_run);
    if (!check && not_ours(c, b))
        return hfs3_err(-EPERM, "%s/%s belongs to uid %u: only its owner or root may remove it from a shared cache",
                        c->p_blobs, b->sha, (unsigned)b->uid);
    char lock[80];
    struct stat st;
    snprintf(lock, sizeof lock, "%s.lock", b->sha);
    int had_lock = fstatat(c->locks, lock, &st, AT_SYMLINK_NOFOLLOW) == 0;
    int fd = -1, rc = hfs3_cache_lock(c, c->locks, lock, c->p_locks, 1, &fd, NULL);
    if (rc == -EWOULDBLOCK)
        return hfs3_err(-EBUSY, "%s/%s is being fetched or checked by another process", c->p_blobs, b->sha);
    if (rc < 0)
        return rc;
    if (!had_lock && fstatat(c->blobs, b->sha, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        /* the lock file made here is no use of the blob: keep its last use where it was */
        const struct timespec t[2] = {st.st_mtim, st.st_mtim};
        (void)futimens(fd, t);
    }
    if (fstatat(c->blobs, b->sha, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        rc = hfs3_err(-errno, "%s/%s: %s", c->p_blobs, b->sha, strerror(errno));
        goto out;
    }
    if (check) {
        int bfd = openat(c->blobs, b->sha, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (bfd < 0) {
            rc = hfs3_err(-errno, "%s/%s: %s", c->p_blobs, b->sha, strerror(errno));
            goto out;
        }
        struct stat fst;
        if (fstat(bfd, &fst) == 0 && !S_ISREG(fst.st_mode))
            rc = hfs3_err(0, "%s/%s is not a regular file", c->p_blobs, b->sha);
        else if (fst.st_nlink != 1)
            rc = hfs3_err(0, "%s/%s has %lu %s", c->p_blobs, b->sha, (unsigned long)fst.st_nlink,
                          hfs3_plural(fst.st_nlink, "link", "links"));
        else
            rc = blob_good(bfd, b->sha, c->p_blobs);
        close(bfd);
        if (rc != 0)
            goto out; /* 1: good, kept; < 0: could not be read */
        if (not_ours(c, b)) {
            rc = hfs3_err(-EPERM, "%s; it belongs to uid %u: only its owner or root may remove it from a shared "
                          "cache", hfs3_errmsg(), (unsigned)b->uid);
            goto out;
        }
    }
    rc = hfs3_gc_unlink_unpinned(c, c->blobs, c->p_blobs, b->sha, dry_run);
out:
    hfs3_cache_unlock(fd);
    return rc;
}

int hfs3_gc_unlink_unpinned(const hfs3_cache *c, int dir, const char *dpath, const char *sha, int dry_run)
{
    /* a pinned blob (a process is about to open it, or a fetch keeps it for its model) stays. No pin file:
     * nobody pins it now, and none is created here (no litter for every blob ever removed): a shim that pins
     * later takes the blob's lock, held by the caller, before it looks for the blob; `fetch`, which looks
     * first, finds a file removed that way in its check at the end */
    char pin[96];
    struct stat st = {.st_uid = c->uid};
    pin_name(pin, sizeof pin, sha);
    /* (fstatat first: a missing pin is the common case, and must not replace verify's message) */
    int rc, pfd = fstatat(c->locks, pin, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT
                      ? -ENOENT : hfs3_cache_openat(c, c->locks, pin, O_RDONLY, NULL, c->p_locks);
    if (pfd == -ENOENT)
        pfd = -1;
    else if (pfd < 0 && st.st_uid != c->uid) {
        /* another user's inode this user cannot lock (a FIFO, a directory, a symlink, a 0600 file): no pin of this
         * user's goes through it, and it must not keep the blob for good (issue 44 item 6) */
        hfs3_debug("%s/%s is uid %u's and cannot be locked: not a pin", c->p_locks, pin, (unsigned)st.st_uid);
        pfd = -1;
    } else if (pfd < 0)
        return pfd;
    if (pfd >= 0 && flock(pfd, LOCK_EX | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK ? hfs3_err(-EBUSY, "%s/%s is pinned: a process is opening it, or a fetch keeps "
                                             "it for its model", dpath, sha)
                                  : hfs3_err(-errno, "flock %s/%s: %s", c->p_locks, pin, strerror(errno));
    } else if (!dry_run && unlinkat(dir, sha, 0) < 0) {
        int e = errno;
        rc = hfs3_err(e == EACCES ? -EPERM : -e, "removing %s/%s: %s", dpath, sha, strerror(e));
    } else {
        rc = 0;
    }
    hfs3_cache_unlock(pfd);
    return rc;
}

static int cmp_lru(const void *a, const void *b)
{
    const hfs3_gc_blob *x = a, *y = b;
    if (x->last_use != y->last_use)
        return x->last_use < y->last_use ? -1 : 1;
    return strcmp(x->sha, y->sha);
}

const char *hfs3_gc_human(uint64_t n, char *buf, size_t len) { return hfs3_human_bytes(n, buf, len); }

/* Why the cache cannot take need more bytes: the nonzero ones of what may not be removed, as "X are ..., Y
 * are ..." into buf. */
static const char *room_why(char *buf, size_t n, uint64_t tmp, uint64_t busy, uint64_t held, uint64_t foreign)
{
    const struct { uint64_t b; const char *what; } part[] = {
        {held, "files this command holds for the model it is fetching"},
        {foreign, "other users' files (only their owners may remove them)"},
        {tmp, "fetches in progress or partial files left for a resume (tmp/)"},
        {busy, "files being fetched, checked or opened right now"},
    };
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
        if (!part[i].b)
            continue;
        char h[32];
        int w = snprintf(buf + k, n - k, "%s%s are %s", k ? ", " : "", hfs3_gc_human(part[i].b, h, sizeof h),
                         part[i].what);
        if (w < 0 || (size_t)w >= n - k)
            break;
        k += (size_t)w;
    }
    if (!k)
        snprintf(buf, n, "nothing else may be removed");
    return buf;
}

/* One pass of make_room under gc.lock. 0 (it fits now), or -ENOSPC with the message set; *again says whether
 * waiting can help: bytes that will become removable once a fetch in progress ends or an open has its file
 * (tmp/, busy). *sig: a number that changes when that state moves (the caller's stall detection). */
static int room_once(const hfs3_cache *c, const char *sha, uint64_t size, uint64_t need, uint64_t max, int *again,
                     uint64_t *sig)
{
    char h1[32], h2[32], why[512];
    *again = 0;
    int lfd = -1, rc = hfs3_cache_lock(c, c->locks, GC_LOCK, c->p_locks, 0, &lfd, NULL);
    if (rc < 0)
        return rc;
    hfs3_gc_blob *b = NULL;
    size_t n = 0;
    if ((rc = hfs3_gc_list(c, &b, &n)) < 0)
        goto out;
    /* a cblobs/ file is a cached file like a blob (the flush only moves it): counted, and evicted in LRU order */
    size_t cap = n;
    int oom = 0;
    list_cblobs(c, &b, &n, &cap, &oom);
    if (oom) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    uint64_t tmp = hfs3_gc_tmp_bytes(c), used = tmp, evictable = 0, foreign = 0, held = 0, busy_b = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(b[i].sha, sha))
            continue; /* the one being fetched (only there when a racing install beat us: it fits) */
        used += b[i].size;
        if (not_ours(c, &b[i]))
            foreign += b[i].size;
        else if (hfs3_gc_pinned_here(b[i].sha))
            held += b[i].size;
        else
            evictable += b[i].size;
    }
    *sig = (used * 31 + tmp) ^ tmp_state(c);
    uint64_t avail = fs_avail(c);
    /* what can never fit fails before anything is removed for it; what fits once the fetches in progress
     * end is waited for (a fetch's next file starts while the previous one is still being installed) */
    if (used - evictable + need > max) {
        *again = foreign + held + need <= max;
        rc = hfs3_err(-ENOSPC, "the file is %s and the cache budget HFS3_CACHE_MAX=%s (%s) cannot make room: %s; "
                      "nothing was removed or downloaded", hfs3_gc_human(size, h1, sizeof h1),
                      getenv("HFS3_CACHE_MAX"), hfs3_gc_human(max, h2, sizeof h2),
                      room_why(why, sizeof why, tmp, 0, held, foreign));
        goto out;
    }
    if (avail != UINT64_MAX && need > avail + evictable) {
        char h3[32];
        rc = hfs3_err(-ENOSPC, "%s: the file is %s and the file system of %s has %s free, %s more after removing "
                      "every cached file it may; nothing was removed or downloaded", strerror(ENOSPC),
                      hfs3_gc_human(size, h1, sizeof h1),
                      c->dir,
                      hfs3_gc_human(avail, h2, sizeof h2), hfs3_gc_human(evictable, h3, sizeof h3));
        goto out;
    }
    qsort(b, n, sizeof *b, cmp_lru);
    size_t removed = 0, busy = 0;
    uint64_t freed = 0;
    for (size_t i = 0; i < n && (used + need > max || need > avail); i++) {
        if (!strcmp(b[i].sha, sha) || not_ours(c, &b[i]) || hfs3_gc_pinned_here(b[i].sha))
            continue;
        int r = hfs3_gc_remove(c, &b[i], 0, 0);
        if (r == -EBUSY) {
            busy++;
            busy_b += b[i].size;
            continue;
        }
        if (r < 0 && r != -ENOENT) {
            hfs3_debug("cache: %s", hfs3_errmsg());
            continue;
        }
        used -= b[i].size;
        if (r == 0) {
            removed++;
            freed += b[i].size;
            hfs3_debug("cache: removed %s (%" PRIu64 " %s, last used %" PRId64 ") to make room", b[i].sha, b[i].size,
                       hfs3_plural(b[i].size, "byte", "bytes"), b[i].last_use);
        }
        if (need > avail)
            avail = fs_avail(c);
    }
    *sig = *sig * 31 + used * 7 + busy;
    if (removed)
        hfs3_info("cache: removed %zu least recently used files (%s) to stay within HFS3_CACHE_MAX=%s", removed,
                  hfs3_gc_human(freed, h1, sizeof h1), getenv("HFS3_CACHE_MAX"));
    if (used + need > max) {
        *again = busy > 0 || tmp > 0;
        rc = hfs3_err(-ENOSPC, "the file is %s and the cache budget HFS3_CACHE_MAX=%s (%s) cannot make room: %s; "
                      "nothing was downloaded", hfs3_gc_human(size, h1, sizeof h1), getenv("HFS3_CACHE_MAX"),
                      hfs3_gc_human(max, h2, sizeof h2), room_why(why, sizeof why, tmp, busy_b, held, foreign));
    } else if (need > avail) {
        rc = hfs3_err(-ENOSPC, "%s: the file is %s and the file system of %s has %s free (removed files still "
                      "open elsewhere free their space only when closed); nothing was downloaded", strerror(ENOSPC),
                      hfs3_gc_human(size, h1, sizeof h1), c->dir, hfs3_gc_human(avail, h2, sizeof h2));
    } else {
        rc = 0;
    }
out:
    free(b);
    hfs3_cache_unlock(lfd);
    return rc;
}

int hfs3_gc_make_room(const hfs3_cache *c, const char *sha, uint64_t size)
{
    uint64_t max = 0;
    char h1[32], h2[32];
    int budget = hfs3_gc_budget(c, &max);
    if (budget < 0)
        return budget;
    uint64_t need = size - part_bytes(c, sha, size);
    if (!budget) {
        uint64_t avail = fs_avail(c);
        if (need > avail)
            return hfs3_err(-ENOSPC, "%s: the file is %s and the file system of %s has %s free; nothing was "
                            "downloaded (free space, or set HFS3_CACHE_MAX so that least recently used files "
                            "are removed: docs/cache.md)", strerror(ENOSPC),
                            hfs3_gc_human(size, h1, sizeof h1), c->dir, hfs3_gc_human(avail, h2, sizeof h2));
        return 0;
    }
    if (size > max)
        return hfs3_err(-ENOSPC, "the file is %s, more than the whole cache budget HFS3_CACHE_MAX=%s (%s); "
                        "nothing was removed or downloaded (raise HFS3_CACHE_MAX)", hfs3_gc_human(size, h1, sizeof h1),
                        getenv("HFS3_CACHE_MAX"), hfs3_gc_human(max, h2, sizeof h2));
    /* the common case, the file fits: one readdir and one fstatat per blob, no lock, no last-use lookups */
    if (blob_bytes(c, sha) + hfs3_gc_tmp_bytes(c) + hfs3_gc_cblob_bytes(c) + need <= max && need <= fs_avail(c))
        return 0;
    /* Bytes of fetches in progress and blobs busy for a moment become removable when those end: wait while
     * that state keeps moving, and give up after GC_ROOM_STALL seconds without a change (a dead fetch's
     * partial file never moves). gc.lock is not held while waiting. */
    uint64_t sig = 0, last = 0;
    double changed = hfs3_now();
    int said = 0;
    for (;;) {
        int again = 0;
        int rc = room_once(c, sha, size, need, max, &again, &sig);
        if (rc != -ENOSPC || !again)
            return rc;
        double now = hfs3_now();
        if (sig != last) {
            last = sig;
            changed = now;
        } else if (now - changed >= GC_ROOM_STALL) {
            return hfs3_err(rc, "%s (after waiting %.0f s for them to change)", hfs3_errmsg(), now - changed);
        }
        if (!said++)
            hfs3_info("cache: waiting for fetches in progress to end to make room within HFS3_CACHE_MAX=%s",
                      getenv("HFS3_CACHE_MAX"));
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* ---- mounts ---- */

int hfs3_gc_is_repo(const char *name)
{
    return !strchr(name, '/') && (hfs3_starts_with(name, "models--") || hfs3_starts_with(name, "datasets--") ||
                                  hfs3_starts_with(name, "spaces--"));
}

static int cmp_entry_sha(const void *a, const void *b)
{
    return strcmp((*(const hfs3_entry *const *)a)->sha256, (*(const hfs3_entry *const *)b)->sha256);
}

int hfs3_gc_usage_of(const hfs3_manifest *m, const char *group, hfs3_gc_blob *b, size_t nb, hfs3_gc_usage *u)
{
    memset(u, 0, sizeof *u);
    size_t gl = group ? strlen(group) : 0, k = 0;
    const hfs3_entry **v = calloc(m->n ? m->n : 1, sizeof *v);
    if (!v)
        return hfs3_err(-ENOMEM, "out of memory");
    for (size_t i = 0; i < m->n; i++) {
        const hfs3_entry *e = &m->entries[i];
        if (e->type == HFS3_FILE && (!group || (!strncmp(e->path, group, gl) && e->path[gl] == '/')))
            v[k++] = e;
    }
    u->files = k;
    qsort(v, k, sizeof *v, cmp_entry_sha);
    for (size_t i = 0; i < k; i++) {
        hfs3_gc_blob *hit = hfs3_gc_find(b, nb, v[i]->sha256);
        u->cached_files += hit != NULL;
        if (i && !strcmp(v[i]->sha256, v[i - 1]->sha256))
            continue; /* equal content is stored once */
        if (!hit) {
            u->bytes_missing += v[i]->size;
            continue;
        }
        u->bytes_cached += hit->size;
        if (hit->last_use > u->last_use)
            u->last_use = hit->last_use;
    }
    free(v);
    return 0;
}

static int is_key(const char *s)
{
    if (strlen(s) != 16)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

static int cmp_mount(const void *a, const void *b)
{
    return strcmp(((const hfs3_gc_mount *)a)->key, ((const hfs3_gc_mount *)b)->key);
}

/* A one-line file's text without its newline, or NULL. */
static char *read_line_at(const hfs3_cache *c, int dirfd, const char *name, const char *dpath, int64_t *mtime)
{
    char *text = NULL;
    size_t len = 0;
    struct stat st;
    if (hfs3_cache_read(c, dirfd, name, 64 << 10, &text, &len, &st, dpath) < 0)
        return NULL;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = 0;
    if (mtime)
        *mtime = st.st_mtim.tv_sec;
    return text;
}

static void load_mount(const hfs3_cache *c, hfs3_gc_mount *gm, hfs3_gc_blob *b, size_t nb)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", c->p_mounts, gm->key);
    int fd = hfs3_cache_opendir(c, c->mounts, gm->key, 0, 0, c->p_mounts);
    if (fd < 0) {
        gm->load_err = hfs3_strdup(hfs3_errmsg());
        return;
    }
    gm->remote = read_line_at(c, fd, "remote", path, NULL);
    gm->canonical = read_line_at(c, fd, "canonical", path, NULL);
    gm->error = read_line_at(c, fd, "error", path, &gm->error_time);
    struct stat st;
    if (fstatat(fd, "index", &st, AT_SYMLINK_NOFOLLOW) == 0)
        gm->checked = st.st_mtim.tv_sec;
    char *doc = NULL;
    size_t len = 0;
    int rc = hfs3_cache_read(c, fd, "manifest.json", HFS3_MAX_DOC, &doc, &len, NULL, path);
    if (rc == 0)
        rc = hfs3_manifest_parse(doc, len, &gm->m);
    if (rc < 0)
        gm->load_err = hfs3_strdup(rc == -ENOENT ? "no manifest cached" : hfs3_errmsg());
    free(doc);
    close(fd);
    for (size_t i = 0; gm->m && i < gm->m->n; i++) {
        hfs3_gc_blob *hit = gm->m->entries[i].type == HFS3_FILE ? hfs3_gc_find(b, nb, gm->m->entries[i].sha256) : NULL;
        if (hit)
            hit->refs++;
    }
}

int hfs3_gc_mounts(const hfs3_cache *c, hfs3_gc_blob *b, size_t nb, hfs3_gc_mount **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = reopen_dir(c->mounts);
    if (!d)
        return hfs3_err(-errno, "%s: %s", c->p_mounts, strerror(errno));
    hfs3_gc_mount *v = NULL;
    size_t len = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        if (!is_key(de->d_name))
            continue;
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 16;
            hfs3_gc_mount *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = hfs3_err(-ENOMEM, "out of memory");
                break;
            }
            v = nv;
            cap = nc;
        }
        memset(&v[len], 0, sizeof v[len]);
        memcpy(v[len].key, de->d_name, 17);
        len++;
    }
    closedir(d);
    if (rc < 0) {
        hfs3_gc_mounts_free(v, len);
        return rc;
    }
    if (len)
        qsort(v, len, sizeof *v, cmp_mount);
    for (size_t i = 0; i < len; i++)
        load_mount(c, &v[i], b, nb);
    *out = v;
    *n = len;
    return 0;
}

void hfs3_gc_mounts_free(hfs3_gc_mount *m, size_t n)
{
    for (size_t i = 0; m && i < n; i++) {
        free(m[i].remote);
        free(m[i].canonical);
        free(m[i].load_err);
        free(m[i].error);
        hfs3_manifest_free(m[i].m);
    }
    free(m);
}

void hfs3_gc_note_remote(const hfs3_cache *c, int mfd, const char *mdir, const char *spec)
{
    /* a note for `cache du` and `status`: it must not replace the message of the refresh that called it */
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
    char *have = read_line_at(c, mfd, "remote", mdir, NULL);
    if (!have || strcmp(have, spec) != 0)
        hfs3_cache_write_line(c, mfd, "remote", mdir, spec);
    free(have);
    hfs3_err(0, "%s", saved);
}
