/* wguard.c - the write guard's kernel half: a write the kernel would resolve into the cache's copy of a mount (a
 * skeleton directory CACHE/mounts/<key>/tree..., a synthesized ancestor CACHE/mounts/ancestors...) gives EROFS,
 * whatever the spelling: /proc/self/fd/N or /proc/self/cwd, a cwd or a dirfd there, a symlink to the mount point
 * or to a directory above it. The classifier (path.c) reads spellings; this asks the kernel where the directory
 * really is. Only write calls come here, and only when mounts are configured (sh_wguard in shim.h). */
#include "shim.h"

#include <string.h>
#include <unistd.h>

/* 1 when real (a canonical absolute path) is CACHE/mounts/ancestors or CACHE/mounts/<key>/tree, or lies below one. */
static int skel_under(const char *real, const char *cache)
{
    size_t cl = strlen(cache);
    if (!cl || strncmp(real, cache, cl) || strncmp(real + cl, "/mounts/", 8))
        return 0;
    const char *r = real + cl + 8;
    if (!strncmp(r, "ancestors", 9) && (r[9] == '/' || !r[9]))
        return 1;
    size_t k = 0;
    while (k < 16 && r[k] && r[k] != '/')
        k++;
    return k == 16 && !strncmp(r + 16, "/tree", 5) && (r[21] == '/' || !r[21]);
}

/* 1 when the directory or file fd is open on (a kernel object, whatever path reached it) is in the cache's skeleton
 * or its ancestors, or its real path is a mount's (a real directory at the mount point, or in one). Uses t->b and
 * t->c. 0 when /proc does not answer (nothing is refused then). */
static int fd_in_skel(int fd, struct sh_scratch *t)
{
    char pp[32];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, t->b, SH_SCR - 1);
    if (k <= 0 || t->b[0] != '/')
        return 0;
    t->b[k] = 0;
    /* a real directory at a mount's path (the host's, shown as the mount): the kernel writes there */
    SH_LOC(l);
    if (sh_classify_abs(t->b, &l) == L_MNT)
        return 1;
    if (!strstr(t->b, "/mounts/"))
        return 0;
    if (skel_under(t->b, sh_cache))
        return 1;
    if (sh_cache_real[0])
        return skel_under(t->b, sh_cache_real);
    /* the cache is not decided in this process yet (a cwd or descriptor inherited from the parent) */
    return sh_r.realpath(sh_cache, t->c) && skel_under(t->b, t->c);
}

/* For open(2) flags that find the entry there already: 1 when the real call may run, as the kernel's on a
 * read-only file system would (O_CREAT|O_EXCL: EEXIST; no write access and no O_TRUNC: it opens). */
static int open_existing_ok(int pfd, const char *base, int oflags)
{
    struct stat st;
    if ((oflags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
        return sh_r.fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
    return !(oflags & (O_WRONLY | O_RDWR | O_TRUNC)) &&
           sh_r.fstatat(pfd, base, &st, (oflags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0) == 0;
}

/* See shim.h. Contract: errno kept; 0 (the real call runs and answers) whenever the kernel cannot tell, e.g. the
 * parent does not exist (the real call gives ENOENT/ENOTDIR) or the path is longer than a scratch buffer.
 * open(O_CREAT) through a dangling symlink follows it (up to SH_MAX_HOPS links), as the kernel would. Stack: a
 * struct stat and 32 bytes; the paths are in one scratch (t->a the spelling, t->b/t->c the real paths, t->d a
 * symlink's target). */
int sh_wguard_slow(int dirfd, const char *path, int how, int oflags)
{
    if (!path)
        return 0;
    int e = errno, hit = 0;
    SH_SCRATCH(t);
    if (!path[0]) { /* AT_EMPTY_PATH: the object is dirfd itself */
        hit = (how == SH_W_FOLLOW || how == SH_W_NOFOLLOW) && (oflags & AT_EMPTY_PATH) && dirfd >= 0 &&
              fd_in_skel(dirfd, t);
        errno = e;
        return hit;
    }
    size_t n = strlen(path);
    if (n >= SH_SCR)
        return 0;
    memcpy(t->a, path, n + 1);
    int held = -1; /* the directory of a dangling symlink being followed (open O_CREAT), ours to close */
    for (int hop = 0; hop <= SH_MAX_HOPS; hop++) {
        while (n > 1 && t->a[n - 1] == '/')
            t->a[--n] = 0;
        char *slash = strrchr(t->a, '/');
        const char *base = slash ? slash + 1 : t->a, *dir = t->a;
        int whole = how == SH_W_FOLLOW || how == SH_W_NOFOLLOW || sh_dot_comp(base, strlen(base)) || !base[0];
        if (!whole && !slash)
            dir = ".";
        else if (!whole && slash == t->a)
            dir = "/";
        else if (!whole)
            *slash = 0;
        int fl = O_PATH | O_CLOEXEC | (!whole ? O_DIRECTORY : how == SH_W_NOFOLLOW ? O_NOFOLLOW : 0);
        int fd = sh_r.openat(held >= 0 ? held : dirfd, dir, fl);
        if (fd < 0)
            break;
        hit = fd_in_skel(fd, t);
        if (hit && !whole && how == SH_W_CREATE) {
            struct stat st;
            hit = sh_r.fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) != 0; /* there: the real call gives EEXIST */
        } else if (hit && !whole && how == SH_W_OPEN)
            hit = !open_existing_ok(fd, base, oflags);
        struct stat st;
        ssize_t k;
        if (!hit && !whole && how == SH_W_OPEN && (oflags & O_CREAT) && !(oflags & (O_EXCL | O_NOFOLLOW)) &&
            sh_r.fstatat(fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) &&
            sh_r.fstatat(fd, base, &st, 0) != 0 && errno == ENOENT &&
            (k = REAL(readlinkat, ssize_t(*)(int, const char *, char *, size_t))(fd, base, t->d, SH_SCR - 1)) > 0) {
            /* a dangling symlink: the kernel creates its target, relative to the link's directory */
            memcpy(t->a, t->d, (size_t)k);
            t->a[k] = 0;
            n = (size_t)k;
            if (held >= 0)
                sh_r.close(held);
            held = fd;
            continue;
        }
        sh_r.close(fd);
        break;
    }
    if (held >= 0)
        sh_r.close(held);
    errno = e;
    return hit;
}

/* See shim.h. */
int sh_wguard_fd_slow(int fd)
{
    int e = errno;
    SH_SCRATCH(t);
    int hit = fd >= 0 && fd_in_skel(fd, t);
    errno = e;
    return hit;
}
