/* cachefs.c - how the helper touches the cache on disk, so that no other local user can subvert it: every
 * directory and file is reached one component at a time from a directory descriptor whose owner and mode
 * were checked, opened O_NOFOLLOW (O_DIRECTORY for directories); what is read must be a regular file of an
 * allowed owner (hfs3_cache_check_file); what is created is O_EXCL under an unpredictable name and 0600
 * until complete; only what this process created (or a directory it owns) is ever fchmod-ed; renames and
 * unlinks are *at() between checked descriptors. Opening the cache itself and the mount refresh are
 * cache.c's. The rules are docs/security.md's. */
#include "hfs3/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hfs3/util.h"

/* O_NONBLOCK: a FIFO planted under a cache name must not hang the open (regular files ignore the flag). */
#define OPEN_EXISTING (O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

/* A user other than this one and root whose files a shared cache accepts: one who wrote them with the
 * cache's group, which only members can do in a setgid directory that others cannot write. */
static int member_ok(const hfs3_cache *c, const struct stat *st)
{
    return c->shared && st->st_gid == c->gid;
}

static const char *fix_hint(const hfs3_cache *c)
{
    return c->shared ? "ask its owner or root to remove it" : "remove it, or use a cache of your own";
}

int hfs3_cache_check_file(const hfs3_cache *c, const struct stat *st, const char *dpath, const char *name)
{
    if (!S_ISREG(st->st_mode))
        return hfs3_err(-EPERM, "cache: %s/%s is not a regular file; refusing (%s)", dpath, name, fix_hint(c));
    if (st->st_mode & S_IWOTH)
        return hfs3_err(-EPERM, "cache: %s/%s is writable by others (mode %04o); refusing (%s)", dpath, name,
                        (unsigned)(st->st_mode & 07777), fix_hint(c));
    if (st->st_uid == c->uid || st->st_uid == 0 || member_ok(c, st))
        return 0;
    return hfs3_err(-EPERM, "cache: %s/%s belongs to uid %u (group %u), not to you or root%s; refusing (%s)", dpath,
                    name, (unsigned)st->st_uid, (unsigned)st->st_gid,
                    c->shared ? " or the cache's group" : " in a private cache", fix_hint(c));
}

/* The mode bits a shared directory must have: setgid, group rwx and, where asked, sticky. */
static int shared_bits_ok(const struct stat *st, int sticky)
{
    mode_t m = st->st_mode;
    return (m & S_ISGID) && (m & S_IRWXG) == S_IRWXG && (!sticky || (m & S_ISVTX));
}

int hfs3_cache_check_subdir(const hfs3_cache *c, int fd, const struct stat *st, int sticky, const char *path)
{
    unsigned mode = (unsigned)(st->st_mode & 07777);
    if (!S_ISDIR(st->st_mode))
        return hfs3_err(-ENOTDIR, "cache: %s is not a directory; refusing (%s)", path, fix_hint(c));
    if (st->st_mode & S_IWOTH)
        return hfs3_err(-EPERM, "cache: %s is writable by others (mode %04o); refusing (chmod o-w %s)", path, mode,
                        path);
    if (!c->shared) {
        if (st->st_uid != c->uid)
            return hfs3_err(-EPERM, "cache: %s belongs to uid %u, not to you (uid %u): every directory of a private "
                            "cache must be yours; refusing (%s)", path, (unsigned)st->st_uid, (unsigned)c->uid,
                            fix_hint(c));
        if (st->st_mode & S_IWGRP)
            return hfs3_err(-EPERM, "cache: %s is writable by its group (mode %04o) in a private cache; refusing "
                            "(chmod g-w %s)", path, mode, path);
        return 0;
    }
    if (st->st_uid != c->uid && st->st_uid != 0 && st->st_gid != c->gid)
        return hfs3_err(-EPERM, "cache: %s belongs to uid %u and group %u, not to you, root or the cache's group %u; "
                        "refusing (%s)", path, (unsigned)st->st_uid, (unsigned)st->st_gid, (unsigned)c->gid,
                        fix_hint(c));
    /* a directory of our own from before the cache was shared: give it the cache's group */
    if (st->st_gid != c->gid && !(st->st_uid == c->uid && fd >= 0 && fchown(fd, (uid_t)-1, c->gid) == 0))
        return hfs3_err(-EPERM, "cache: %s has group %u, not the cache's group %u; refusing (chgrp %u %s)", path,
                        (unsigned)st->st_gid, (unsigned)c->gid, (unsigned)c->gid, path);
    if (shared_bits_ok(st, sticky))
        return 0;
    /* a directory of our own that predates the sticky rule (or was made under a umask): bring it up to date
     * through the descriptor, which is this very directory */
    mode_t want = (st->st_mode & 07777) | S_ISGID | S_IRWXG | (sticky ? S_ISVTX : 0);
    if (st->st_uid == c->uid && fd >= 0 && fchmod(fd, want) == 0)
        return 0;
    return hfs3_err(-EPERM, "cache: %s has mode %04o, not setgid%s with group rwx as a shared cache needs; "
                    "refusing (its owner uid %u or root can run: chmod %o %s)", path, mode,
                    sticky ? " + sticky" : "", (unsigned)st->st_uid, (unsigned)want, path);
}

/* The message for an openat(O_NOFOLLOW) of an existing name that failed with e: a symlink is named as one. */
static int refuse_open(const hfs3_cache *c, int dirfd, const char *name, const char *dpath, int e)
{
    struct stat st;
    if ((e == ELOOP || e == ENOTDIR || e == EMLINK) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
        return hfs3_err(-ELOOP, "cache: %s/%s is a symlink (owner uid %u); refusing, symlinks in the cache are "
                        "never followed (%s)", dpath, name, (unsigned)st.st_uid,
                        st.st_uid == c->uid ? "remove it" : fix_hint(c));
    if (e == ENOTDIR)
        return hfs3_err(-ENOTDIR, "cache: %s/%s is not a directory; refusing (remove it)", dpath, name);
    return hfs3_err(-e, "cache: %s/%s: %s", dpath, name, strerror(e));
}

static void join_path(char *out, size_t n, const char *dpath, const char *name)
{
    snprintf(out, n, "%s/%s", dpath, name);
}

int hfs3_cache_opendir(const hfs3_cache *c, int dirfd, const char *name, mode_t create_mode, int sticky,
                       const char *dpath)
{
    char path[4400];
    join_path(path, sizeof path, dpath, name);
    int created = 0;
    if (create_mode) {
        /* 0700 first: nobody else can enter before it has its final mode */
        if (mkdirat(dirfd, name, 0700) == 0)
            created = 1;
        else if (errno != EEXIST)
            return hfs3_err(-errno, "cache: mkdir %s: %s", path, strerror(errno));
    }
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | OPEN_EXISTING);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        if (e == ENOENT)
            return hfs3_err(-ENOENT, "cache: %s: no such directory", path);
        /* not ours to open: say which rule it breaks rather than just "Permission denied" */
        if (e == EACCES && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
            hfs3_cache_check_subdir(c, -1, &st, sticky, path) < 0)
            return -EPERM;
        return refuse_open(c, dirfd, name, dpath, e);
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return hfs3_err(-e, "cache: %s: %s", path, strerror(e));
    }
    /* the exact mode whatever the umask, only on the directory this call made (and owns) */
    if (created && st.st_uid == c->uid && (st.st_mode & 07777) != create_mode) {
        if (fchmod(fd, create_mode) < 0 || fstat(fd, &st) < 0) {
            int e = errno;
            close(fd);
            return hfs3_err(-e, "cache: chmod %s: %s", path, strerror(e));
        }
    }
    int rc = hfs3_cache_check_subdir(c, fd, &st, sticky, path);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

int hfs3_cache_openat(const hfs3_cache *c, int dirfd, const char *name, int flags, struct stat *st,
                      const char *dpath)
{
    int fd = openat(dirfd, name, flags | OPEN_EXISTING);
    if (fd < 0) {
        int e = errno;
        struct stat lst;
        if (e == ENOENT)
            return hfs3_err(-ENOENT, "cache: %s/%s: no such file", dpath, name);
        if (e == EACCES && fstatat(dirfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
            hfs3_cache_check_file(c, &lst, dpath, name) < 0)
            return -EPERM;
        return refuse_open(c, dirfd, name, dpath, e);
    }
    struct stat tmp;
    if (!st)
        st = &tmp;
    int rc = fstat(fd, st) < 0 ? hfs3_err(-errno, "cache: %s/%s: %s", dpath, name, strerror(errno))
                               : hfs3_cache_check_file(c, st, dpath, name);
    /* what this user writes into must be its own and have no other name: a hard link planted under a cache
     * name could be a file of this user's elsewhere */
    if (rc == 0 && (flags & O_ACCMODE) != O_RDONLY && (st->st_uid != c->uid || st->st_nlink != 1))
        rc = hfs3_err(-EPERM, "cache: %s/%s is not this user's own single-link file (owner uid %u, %lu %s); "
                      "refusing to write into it", dpath, name, (unsigned)st->st_uid, (unsigned long)st->st_nlink,
                      hfs3_plural(st->st_nlink, "link", "links"));
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

int hfs3_read_fd(int fd, size_t max, char **out, size_t *len, const char *what)
{
    hfs3_buf b;
    hfs3_buf_init(&b, max);
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            hfs3_buf_free(&b);
            return hfs3_err(-e, "%s: read: %s", what, strerror(e));
        }
        if (n == 0)
            break;
        if (hfs3_buf_add(&b, chunk, (size_t)n) < 0)
            return hfs3_err(-E2BIG, "%s: larger than %zu bytes", what, max);
    }
    *out = hfs3_buf_take(&b, len);
    return *out ? 0 : hfs3_err(-ENOMEM, "out of memory");
}

int hfs3_cache_read(const hfs3_cache *c, int dirfd, const char *name, size_t max, char **out, size_t *len,
                    struct stat *st, const char *dpath)
{
    int fd = hfs3_cache_openat(c, dirfd, name, O_RDONLY, st, dpath);
    if (fd < 0)
        return fd;
    char what[4400];
    join_path(what, sizeof what, dpath, name);
    int rc = hfs3_read_fd(fd, max, out, len, what);
    close(fd);
    return rc;
}

int hfs3_cache_stat(const hfs3_cache *c, int dirfd, const char *name, struct stat *st, const char *dpath)
{
    if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return -ENOENT;
        return hfs3_err(-errno, "cache: %s/%s: %s", dpath, name, strerror(errno));
    }
    if (S_ISLNK(st->st_mode))
        return refuse_open(c, dirfd, name, dpath, ELOOP);
    return hfs3_cache_check_file(c, st, dpath, name);
}

int hfs3_cache_lock(const hfs3_cache *c, int dirfd, const char *name, const char *dpath, int nonblock, int *fd,
                    int *waited)
{
    if (waited)
        *waited = 0;
    int f = -1;
    /* Existing: used as it is (another member's lock is fine to flock, never to chmod). Missing: created
     * O_EXCL, so that the fchmod can only reach the file this call made. A lock file is only ever flocked,
     * never written: read-only is enough. */
    for (int tries = 0; f < 0 && tries < 16; tries++) {
        f = hfs3_cache_openat(c, dirfd, name, O_RDONLY, NULL, dpath);
        if (f >= 0 || f != -ENOENT)
            break;
        f = openat(dirfd, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (f >= 0) {
            (void)fchmod(f, c->file_mode);
        } else if (errno != EEXIST) {
            int e = errno;
            return hfs3_err(-e, "cache: %s/%s: %s", dpath, name, strerror(e));
        }
    }
    if (f < 0)
        return f;
    if (flock(f, LOCK_EX | LOCK_NB) == 0) {
        *fd = f;
        return 0;
    }
    if (errno != EWOULDBLOCK) {
        int e = errno;
        close(f);
        return hfs3_err(-e, "flock %s/%s: %s", dpath, name, strerror(e));
    }
    if (nonblock) {
        close(f);
        return hfs3_err(-EWOULDBLOCK, "%s/%s: busy (another process holds it)", dpath, name);
    }
    if (waited)
        *waited = 1;
    while (flock(f, LOCK_EX) < 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        close(f);
        return hfs3_err(-e, "flock %s/%s: %s", dpath, name, strerror(e));
    }
    *fd = f;
    return 0;
}

void hfs3_cache_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

int hfs3_cache_mktemp(int dirfd, const char *stem, const char *suffix, char *name, size_t namesz,
                      const char *dpath)
{
    for (int tries = 0; tries < 16; tries++) {
        unsigned char r[8];
        char hex[17];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            return hfs3_err(-EIO, "cache: %s: no random bytes for a temp name: %s", dpath, strerror(errno));
        hfs3_hex(r, sizeof r, hex);
        if (snprintf(name, namesz, "%s.%s%s", stem, hex, suffix ? suffix : "") >= (int)namesz)
            return hfs3_err(-ENAMETOOLONG, "cache: %s/%s: name too long", dpath, stem);
        /* O_EXCL | O_NOFOLLOW: never write through anything planted under the name */
        int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            (void)fchmod(fd, 0600); /* a file this call created: exact whatever the umask */
            return fd;
        }
        if (errno != EEXIST)
            return hfs3_err(-errno, "cache: %s/%s: %s", dpath, name, strerror(errno));
    }
    return hfs3_err(-EEXIST, "cache: %s: no free temp name for %s", dpath, stem);
}

int hfs3_cache_write_atomic(int dirfd, const char *name, const void *data, size_t n, mode_t mode,
                            const char *dpath)
{
    char stem[300], tmp[340];
    if (snprintf(stem, sizeof stem, "%s.tmp", name) >= (int)sizeof stem)
        return hfs3_err(-ENAMETOOLONG, "cache: %s/%s: name too long", dpath, name);
    int fd = hfs3_cache_mktemp(dirfd, stem, NULL, tmp, sizeof tmp, dpath);
    if (fd < 0)
        return fd;
    int rc = hfs3_write_all(fd, data, n);
    /* the final mode before the rename: a reader never sees a file its group cannot open */
    if (rc == 0 && (fchmod(fd, mode) < 0 || fsync(fd) < 0))
        rc = -errno;
    if (close(fd) < 0 && rc == 0 && errno != EINTR)
        rc = -errno;
    if (rc < 0) {
        unlinkat(dirfd, tmp, 0);
        return hfs3_err(rc, "cache: %s/%s: write: %s", dpath, tmp, strerror(-rc));
    }
    if (renameat(dirfd, tmp, dirfd, name) < 0) {
        int e = errno;
        unlinkat(dirfd, tmp, 0);
        return hfs3_err(-e, "cache: cannot replace %s/%s: %s%s", dpath, name, strerror(e),
                        e == EPERM ? " (another user's file in a sticky directory)" : "");
    }
    return 0;
}

void hfs3_cache_write_line(const hfs3_cache *c, int dirfd, const char *name, const char *dpath, const char *msg)
{
    size_t n = strlen(msg);
    char *line = malloc(n + 2);
    if (!line)
        return;
    memcpy(line, msg, n);
    /* one line, whatever the message held */
    for (size_t i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n] = '\n';
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
    (void)hfs3_cache_write_atomic(dirfd, name, line, n + 1, c->entry_mode, dpath);
    hfs3_err(0, "%s", saved);
    free(line);
}

int hfs3_cache_scan(int dirfd, const char *prefix, const char *suffix, hfs3_cache_scan_fn fn, void *ud)
{
    int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    DIR *d = fdopendir(dfd);
    if (!d) {
        int e = errno;
        close(dfd);
        return -e;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (hfs3_starts_with(de->d_name, prefix) && hfs3_ends_with(de->d_name, suffix))
            rc = fn(ud, de->d_name);
    }
    closedir(d);
    return rc;
}
