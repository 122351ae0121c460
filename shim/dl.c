/* dl.c - the calls that hand a path to code the shim cannot interpose: dlopen (the dynamic loader opens the file
 * with its own internal open) and posix_spawn_file_actions_addopen (the child opens it between clone and exec,
 * through no interposed call). A path in a mount is opened here, through the shim (fetched, verified), and the
 * real call gets the path of what was opened: the blob in the cache for a file, the skeleton for a directory; a
 * file action that would write there is refused with EROFS when it is added (the child's open is not ours).
 * Every other path goes to the real call untouched, dlopen's by a tail call, so that the loader still sees the
 * program's own caller (whose RUNPATH and namespace a bare library name is looked up with). */
#include "shim.h"

#include <dlfcn.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOT_OURS ((void *)-1)

/* l (L_MNT) opened read-only through the shim, and the real path of what that gave into out (n bytes): 0, or
 * -errno (-ENOENT also when /proc is not mounted: the real call then fails on the logical path). */
static int real_of(const struct sh_loc *l, int oflag, char *out, size_t n)
{
    int fd = sh_open(l, (oflag & ~(O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_ACCMODE)) | O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return fd;
    char proc[40];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(proc, out, n - 1);
    sh_fd_drop(fd);
    if (k <= 0 || (size_t)k >= n - 1 || out[0] != '/')
        return -ENOENT;
    out[k] = 0;
    return 0;
}

/* path classified (also when it reaches a mount through real symlinks): 1 for a path in a mount. */
static int in_mount(const char *path, struct sh_loc *l)
{
    if (sh_classify(AT_FDCWD, path, l) == L_NONE) {
        struct stat st;
        if (sh_r.stat(path, &st) == 0 || !SH_FALLBACK_ERR(errno) || sh_fallback(AT_FDCWD, path, l) == L_NONE)
            return 0;
    }
    return l->kind == L_MNT;
}

/* The real path of a library in a mount into out, or 0 (not ours: the real dlopen takes the path as given). */
static __attribute__((noinline)) int dl_path(const char *path, char *out)
{
    SH_LOC(l);
    return in_mount(path, &l) && real_of(&l, O_RDONLY, out, SH_PATH) == 0;
}

static __attribute__((noinline)) void *dl_mount(const char *path, int mode)
{
    int e = errno;
    /* not a scratch slot: the library's constructors run inside the real dlopen and may need them all */
    char *real = malloc(SH_PATH);
    if (!real || !dl_path(path, real)) {
        free(real);
        errno = e;
        return NOT_OURS;
    }
    void *h = REAL(dlopen, void *(*)(const char *, int))(real, mode);
    free(real);
    return h;
}

/* optimize-sibling-calls: the real call stays a jump also in a build at -O1 (the sanitizer build) */
__attribute__((optimize("optimize-sibling-calls"))) SH_EXPORT void *dlopen(const char *path, int mode)
{
    /* a name without a '/' is searched for, never in a mount; any other path may reach one through a symlink */
    void *h = __builtin_expect(!path || !sh_nmounts || !strchr(path, '/'), 1) ? NOT_OURS : dl_mount(path, mode);
    if (h != NOT_OURS)
        return h;
    return REAL(dlopen, void *(*)(const char *, int))(path, mode);   /* a tail call: the caller stays the program */
}

SH_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd, const char *path, int oflag,
                                               mode_t mode)
{
    int (*real)(posix_spawn_file_actions_t *, int, const char *, int, mode_t) =
        REAL(posix_spawn_file_actions_addopen, int (*)(posix_spawn_file_actions_t *, int, const char *, int, mode_t));
    if (__builtin_expect(sh_outside(AT_FDCWD, path), 1) || sh_in_vfork())
        return real(fa, fd, path, oflag, mode);
    int e = errno;
    SH_LOC(l);
    SH_SCRATCH(t);
    /* a read-only open of a file or directory in a mount: the child opens what the shim opened here */
    int ro = (oflag & O_ACCMODE) == O_RDONLY && !(oflag & (O_CREAT | O_TRUNC));
    if (ro && in_mount(path, &l) && real_of(&l, oflag, t->a, SH_SCR) == 0)
        path = t->a;
    /* a write into a mount (or, from a cwd there, into the cache's copy of it): refused now with the mount's
     * EROFS, since the child's open would create or truncate in the cache or fail with ENOENT */
    struct stat st;
    if (!ro && ((sh_classify(AT_FDCWD, path, &l) != L_NONE && !(l.kind == L_ANC && sh_r.lstat(l.path, &st) == 0)) ||
                sh_wguard(AT_FDCWD, path, SH_W_OPEN, oflag)))
        return EROFS;
    errno = e;
    return real(fa, fd, path, oflag, mode);
}
