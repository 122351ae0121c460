/* wrap.c - the exported interposers for path and descriptor calls (interposition.md's list, minus the
 * directory streams, which are dir.c's). Each one classifies its path (one cheap check for paths outside
 * the mounts, then the real call with no allocation and no lock) and hands mount paths to path.c, tree.c and open.c. */
#include "shim.h"

#include <limits.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>
#include <utmp.h>
#include <utmpx.h>

/* An ancestor of a mount that exists on disk is the host's own directory: writes to it are real. noinline: its
 * struct stat would otherwise sit in the frame of every wrapper and of look(), on the 2 KiB stack budget of calls
 * outside the mounts. */
static __attribute__((noinline)) int anc_real(const struct sh_loc *l)
{
    struct stat st;
    return l->kind == L_ANC && sh_r.lstat(l->path, &st) == 0;
}

/* Runs REALEXPR for paths the shim leaves alone (and for mount ancestors that exist on disk). For mount paths, or when REALEXPR failed (FAILED, over
 * rv_) with ENOENT/ENOTDIR and the path reaches a mount through real symlinks, runs OURS with l_ (the
 * location) and e_ (the caller's errno) in scope; OURS returns. */
#define WITH_LOC(DIRFD, PATH, REALEXPR, FAILED, OURS)                                                       \
    do {                                                                                                    \
        int e_ = errno;                                                                                     \
        int fast_ = sh_outside((DIRFD), (PATH));                                                            \
        __typeof__(REALEXPR) rv_ = 0;                                                                       \
        if (__builtin_expect(fast_, 1)) {                                                                   \
            rv_ = (REALEXPR);                                                                               \
            if (__builtin_expect(!(FAILED) || !SH_FALLBACK_ERR(errno), 1))                                  \
                return rv_;                                                                                 \
        }                                                                                                   \
        SH_LOC(l_);                                                                                         \
        if (fast_) {                                                                                        \
            if (sh_fallback((DIRFD), (PATH), &l_) == L_NONE) {                                              \
                if (l_.kpath) { /* a relative ".." through an ancestor: where the kernel would be */        \
                    (PATH) = l_.kpath;                                                                      \
                    errno = e_;                                                                             \
                    rv_ = (REALEXPR);                                                                       \
                }                                                                                           \
                return rv_;                                                                                 \
            }                                                                                               \
        } else if (sh_classify((DIRFD), (PATH), &l_) == L_NONE || anc_real(&l_)) {                          \
            if (l_.kpath)                                                                                   \
                (PATH) = l_.kpath;   /* a ".." out of the mounts: where the kernel would be */               \
            rv_ = (REALEXPR);                                                                               \
            if (!(FAILED) || !SH_FALLBACK_ERR(errno))                                                       \
                return rv_;                                                                                 \
            if (sh_fallback((DIRFD), (PATH), &l_) == L_NONE) {                                              \
                if (l_.kpath) {                                                                             \
                    (PATH) = l_.kpath;                                                                      \
                    errno = e_;                                                                             \
                    rv_ = (REALEXPR);                                                                       \
                }                                                                                           \
                return rv_;                                                                                 \
            }                                                                                               \
        }                                                                                                   \
        OURS;                                                                                               \
    } while (0)

/* WITH_LOC split in two for the hottest calls (a stat, an access of a path outside the mounts): the exported
 * function is only the fast path (the filter, the real call, the result), so its frame stays small; the rest
 * is NAME_slow, which gets the caller's errno e_ and fast_ (1: the real call already failed with ENOENT/ENOTDIR).
 * For functions returning int, -1 on failure. PARAMS and ARGS in parentheses. */
#define SH_UNPAREN(...) __VA_ARGS__
#define WITH_LOC_SPLIT(NAME, PARAMS, ARGS, DIRFD, PATH, REALEXPR, OURS)                                     \
    static __attribute__((noinline)) int NAME##_slow(int e_, int fast_, SH_UNPAREN PARAMS)                  \
    {                                                                                                       \
        SH_LOC(l_);                                                                                         \
        if (fast_) {                                                                                        \
            if (sh_fallback((DIRFD), (PATH), &l_) == L_NONE) {                                              \
                if (!l_.kpath)                                                                              \
                    return -1;                                                                              \
                (PATH) = l_.kpath; /* a relative ".." through an ancestor: where the kernel would be */     \
                errno = e_;                                                                                 \
                return (REALEXPR);                                                                          \
            }                                                                                               \
        } else if (sh_classify((DIRFD), (PATH), &l_) == L_NONE || anc_real(&l_)) {                          \
            if (l_.kpath)                                                                                   \
                (PATH) = l_.kpath;                                                                          \
            int rv_ = (REALEXPR);                                                                           \
            if (rv_ >= 0 || !SH_FALLBACK_ERR(errno))                                                        \
                return rv_;                                                                                 \
            if (sh_fallback((DIRFD), (PATH), &l_) == L_NONE) {                                              \
                if (!l_.kpath)                                                                              \
                    return rv_;                                                                             \
                (PATH) = l_.kpath;                                                                          \
                errno = e_;                                                                                 \
                return (REALEXPR);                                                                          \
            }                                                                                               \
        }                                                                                                   \
        OURS;                                                                                               \
    }                                                                                                       \
    SH_EXPORT int NAME(SH_UNPAREN PARAMS)                                                                   \
    {                                                                                                       \
        int e_ = errno;                                                                                     \
        if (__builtin_expect(!sh_outside((DIRFD), (PATH)), 0))                                              \
            return NAME##_slow(e_, 0, SH_UNPAREN ARGS);                                                     \
        int rv_ = (REALEXPR);                                                                               \
        if (__builtin_expect(rv_ >= 0, 1) || !SH_FALLBACK_ERR(errno))                                       \
            return rv_;                                                                                     \
        return NAME##_slow(e_, 1, SH_UNPAREN ARGS);                                                         \
    }

/* Hides glibc's nonnull declarations from the optimiser: Rust passes NULL on purpose (EFAULT probe). */
#define LAUNDER(p) __asm__("" : "+r"(p))

#define EROFS_OURS                                                                                          \
    {                                                                                                       \
        (void)e_;                                                                                           \
        (void)l_;                                                                                           \
        errno = EROFS;                                                                                      \
        return -1;                                                                                          \
    }

/* --- open ---------------------------------------------------------------------------------------------- */

static int kopen_err(int d, const char *p, int fl);

/* open flags that write: the kernel's resolution of the path is checked (sh_wguard) before the real call */
#define OPEN_WRITES (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);

/* Past the fast path: a path that may be a mount's (fallback = 0), or one outside whose real open just failed
 * with ENOENT/ENOTDIR (fallback = 1: -1 and the real errno unless it reaches a mount through real symlinks). */
static __attribute__((noinline)) int open_slow(int dirfd, const char *path, int flags, mode_t mode, int e, int fallback)
{
    SH_LOC(l);
    if (fallback) {
        if (sh_fallback(dirfd, path, &l) == L_NONE) {
            if (!l.kpath)
                return -1;
            /* a relative ".." through a synthesized ancestor: where the kernel would be (WITH_LOC), so that
             * "top/../<256-byte name>/x" is ENAMETOOLONG, as for stat */
            if ((flags & OPEN_WRITES) && sh_wguard_on && sh_wguard_slow(dirfd, l.kpath, SH_W_OPEN, flags)) {
                errno = EROFS;
                return -1;
            }
            errno = e;
            int fd = dirfd == AT_FDCWD ? REAL(open64, open_fn)(l.kpath, flags, mode)
                                       : REAL(openat64, openat_fn)(dirfd, l.kpath, flags, mode);
            if (fd >= 0)
                sh_fd_forget(fd);
            return fd;
        }
    } else if (sh_classify(dirfd, path, &l) == L_NONE) {
        if (l.kpath)
            path = l.kpath;
        int fd = dirfd == AT_FDCWD ? REAL(open64, open_fn)(path, flags, mode)
                                   : REAL(openat64, openat_fn)(dirfd, path, flags, mode);
        if (fd >= 0) {
            sh_fd_forget(fd);
            return fd;
        }
        if (!SH_FALLBACK_ERR(errno) || sh_fallback(dirfd, path, &l) == L_NONE)
            return fd;
    }
    return sh_ret(sh_open(&l, flags, mode), e);
}

/* A write call's real errno that the kernel's walk of the spelling in the shim's view may answer otherwise: the real
 * directory lacks a synthesized ancestor (ENOENT, ENOTDIR) or is read-only where the kernel would find one (EROFS) */
#define KWALK_ERR(e) ((e) == ENOENT || (e) == ENOTDIR || (e) == EROFS)

/* The real open of path from dirfd, or of base from pfd when the guard handed its checked directory back
 * (sh_wguard_at; closed here, errno kept): the open lands where the guard looked, whatever a symlink on the way
 * says by now. */
static __attribute__((noinline)) int open_on(int dirfd, const char *path, int pfd, const char *base, int flags, mode_t mode)
{
    if (pfd < 0)
        return dirfd == AT_FDCWD ? REAL(open64, open_fn)(path, flags, mode)
                                 : REAL(openat64, openat_fn)(dirfd, path, flags, mode);
    /* the guard's descriptor goes above the program's numbers first: the open gets the number the kernel would
     * give (issue 41 item 1: it took the lowest free one, and the daemon's open("/dev/null") after close(0..2)
     * got 1) */
    int hi = sh_fd_aside(pfd), fd, e;
    if (hi < 0) {
        /* pfd is the last free number, which the kernel gives this open: the open runs on the path, and what it
         * opened is looked at after (a guarded object: closed, EROFS). The one case the check and the call are
         * two lookups: a program with one descriptor left. */
        sh_r.close(pfd);
        fd = dirfd == AT_FDCWD ? REAL(open64, open_fn)(path, flags, mode)
                               : REAL(openat64, openat_fn)(dirfd, path, flags, mode);
        if (fd >= 0 && sh_wguard_fd_slow(fd)) {
            sh_r.close(fd);
            errno = EROFS;
            return -1;
        }
        return fd;
    }
    fd = REAL(openat64, openat_fn)(hi, base, flags, mode), e = errno;
    sh_r.close(hi);
    errno = e;
    return fd;
}

/* open_w's real open outside the mounts, guarded (out of line: the guard's descriptor is not in open_w's frame
 * while kopen_err walks, the 2 KiB budget): the descriptor, -1 and the real errno, or -2 (errno EROFS) */
static __attribute__((noinline)) int open_w_out(int dirfd, const char *path, int flags, int nf, mode_t mode, int e)
{
    int pfd = -1, fd;
    const char *pb = NULL;
    if (sh_wguard_at(dirfd, path, SH_W_OPEN, flags | nf, &pfd, &pb)) {
        errno = EROFS;
        return -2;
    }
    fd = open_on(dirfd, path, pfd, pb, flags | nf, mode);
    if (fd < 0 && nf && errno == ELOOP) {
        if (sh_wguard_at(dirfd, path, SH_W_OPEN, flags, &pfd, &pb)) {
            errno = EROFS;
            return -2;
        }
        errno = e;
        fd = open_on(dirfd, path, pfd, pb, flags, mode);
    }
    return fd;
}

/* A write-open while the write guard is on (sh_wguard_on). Outside the mounts the real call gets O_NOFOLLOW added,
 * so that the guard need not look at the last component: a symlink there (a /proc/self/fd/N magic link included)
 * gives ELOOP, and then the guard follows it and the real call runs as asked. */
static __attribute__((noinline)) int open_w(int dirfd, const char *path, int flags, mode_t mode, int e)
{
    if ((flags & (O_CREAT | O_DIRECTORY)) == (O_CREAT | O_DIRECTORY)) {
        /* the kernel's own verdict on the flags (EINVAL since Linux 6.4), taken before any lookup: ask it */
        int pf = sh_r.openat(AT_FDCWD, "", flags, 0);
        if (pf >= 0)
            sh_r.close(pf);
        else if (errno == EINVAL)
            return -1;
        errno = e;
    }
    SH_LOC(l);
    const char *p0 = path; /* the caller's spelling: the kernel's walk (kopen_err) */
    int out = sh_outside(dirfd, path);
    if (!out) { /* beside the mounts (a name under the same first directory): the same as outside */
        out = sh_classify(dirfd, path, &l) == L_NONE;
        if (out && l.kpath) /* where the kernel goes: a ".." out of the mounts, a name below a synthesized ancestor */
            path = l.kpath;
    }
    int nf = out && !(flags & O_NOFOLLOW) && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL) ? O_NOFOLLOW : 0;
    /* a mount's path (or an ancestor's) is opened by sh_open on its logical path, which never writes: the
     * kernel's answers there; the guard would look in the skeleton (directories only: "M/file" O_CREAT: EROFS) */
    int fd, ae;
    if (!out) {
        /* a mount's path or a synthesized ancestor's: the kernel's answer on a read-only tree (kopen_err), then
         * sh_open for an open that writes nothing (it opens: O_CREAT of an existing file, read only) */
        /* O_TMPFILE: sh_open answers in the kernel's order (EINVAL, the lookup, EROFS for a directory) */
        if (!anc_real(&l) && (flags & __O_TMPFILE) != __O_TMPFILE && (ae = kopen_err(dirfd, path, flags))) {
            errno = ae;
            return -1;
        }
        errno = e;
        fd = open_slow(dirfd, path, flags, mode, e, 0);
        if (fd < 0 && errno == ENOENT &&
            (ae = sh_anc_create_err(dirfd, path, (flags & O_CREAT) ? SH_C_OPEN : SH_C_LOOKUP)))
            errno = kopen_err(dirfd, p0, flags) ?: ae;
        return fd;
    }
    if ((fd = open_w_out(dirfd, path, flags, nf, mode, e)) == -2)
        return -1; /* EROFS */
    if (fd >= 0) {
        sh_fd_forget(fd);
        return fd;
    }
    /* the real directory's answer; the kernel's walk of the caller's spelling may pass through the shim's view (a
     * synthesized ancestor named from its real parent, a ".." out of one: a kpath drops a last ".") */
    int re = errno;
    if (KWALK_ERR(re) && (ae = kopen_err(dirfd, p0, flags))) {
        errno = ae;
        return -1;
    }
    errno = re;
    if (!SH_FALLBACK_ERR(errno))
        return fd;
    return open_slow(dirfd, path, flags, mode, e, 1);
}

static inline __attribute__((always_inline)) int do_open(int dirfd, const char *path, int flags, mode_t mode)
{
    int e = errno;
    if (__builtin_expect(flags & OPEN_WRITES, 0) && __builtin_expect(sh_wguard_on, 0))
        return open_w(dirfd, path, flags, mode, e);
    if (__builtin_expect(!sh_outside(dirfd, path), 0))
        return open_slow(dirfd, path, flags, mode, e, 0);
    int fd = dirfd == AT_FDCWD ? REAL(open64, open_fn)(path, flags, mode)
                               : REAL(openat64, openat_fn)(dirfd, path, flags, mode);
    if (__builtin_expect(fd >= 0, 1)) {
        sh_fd_forget(fd);
        return fd;
    }
    if (!SH_FALLBACK_ERR(errno))
        return fd;
    return open_slow(dirfd, path, flags, mode, e, 1);
}

int sh_openat_ours(int dirfd, const char *path, int flags, mode_t mode)
{
    return do_open(dirfd, path, flags, mode);
}

/* the mode argument, read only when flags say there is one (va_start off the fast path) */
#define OPEN_MODE(flags, mode)                                                                              \
    mode_t mode = 0;                                                                                        \
    if (__builtin_expect((flags) & (O_CREAT | __O_TMPFILE), 0)) { /* glibc's __OPEN_NEEDS_MODE, cheaper */  \
        va_list ap;                                                                                         \
        va_start(ap, flags);                                                                                \
        mode = (mode_t)va_arg(ap, int);                                                                     \
        va_end(ap);                                                                                         \
    }

SH_EXPORT int open(const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode)
    return do_open(AT_FDCWD, path, flags, mode);
}

SH_EXPORT int open64(const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode)
    return do_open(AT_FDCWD, path, flags, mode);
}

SH_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode)
    return do_open(dirfd, path, flags, mode);
}

SH_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode)
    return do_open(dirfd, path, flags, mode);
}

SH_EXPORT int __open_2(const char *path, int flags) { return do_open(AT_FDCWD, path, flags, 0); }
SH_EXPORT int __open64_2(const char *path, int flags) { return do_open(AT_FDCWD, path, flags, 0); }
SH_EXPORT int __openat_2(int dirfd, const char *path, int flags) { return do_open(dirfd, path, flags, 0); }
SH_EXPORT int __openat64_2(int dirfd, const char *path, int flags) { return do_open(dirfd, path, flags, 0); }

SH_EXPORT int creat(const char *path, mode_t mode)
{
    return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

SH_EXPORT int creat64(const char *path, mode_t mode)
{
    return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* glibc's exported aliases of open (GLIBC_2.2.5): a program may call them by name */
SH_EXPORT int __open(const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode)
    return do_open(AT_FDCWD, path, flags, mode);
}

SH_EXPORT int __open64(const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode)
    return do_open(AT_FDCWD, path, flags, mode);
}

/* open_by_handle_at (root: CAP_DAC_READ_SEARCH): no path for the guard, and a handle of a blob or of a skeleton
 * directory (name_to_handle_at of its real path) opens it past every spelling. A write (write access, O_TRUNC)
 * first opens the same handle O_PATH and puts that object to the guard; the handle names the inode (and its
 * generation: one freed and reused gives ESTALE), so the real open that follows is of the object checked. */
SH_EXPORT int open_by_handle_at(int mfd, struct file_handle *h, int flags)
{
    int (*real)(int, struct file_handle *, int) = REAL(open_by_handle_at, int (*)(int, struct file_handle *, int));
    if (!sh_wguard_on || !(flags & (O_WRONLY | O_RDWR | O_TRUNC)))
        return real(mfd, h, flags);
    int e = errno, fd = real(mfd, h, O_PATH | O_CLOEXEC);
    if (fd < 0) /* the kernel's EPERM, ESTALE, EBADF...: the real call gives it again */
        return real(mfd, h, flags);
    int hit = sh_wguard_obj_slow(fd);
    sh_r.close(fd);
    if (hit) {
        errno = EROFS;
        return -1;
    }
    errno = e;
    return real(mfd, h, flags);
}

/* --- stdio --------------------------------------------------------------------------------------------- */

/* open(2) flags for a mount path opened with an fopen mode: -EROFS for anything but reading. */
static int fmode_flags(const char *mode)
{
    if (!mode || mode[0] != 'r')
        return -EROFS;
    int fl = O_RDONLY;
    for (const char *p = mode + 1; *p && *p != ','; p++) {
        if (*p == '+')
            return -EROFS;
        if (*p == 'e')
            fl |= O_CLOEXEC;
    }
    return fl;
}

/* open(2) flags of an fopen mode, for sh_wguard ("w": write, create, truncate; "a": write, create; "+": read and
 * write; "x": exclusive). */
static int fmode_oflags(const char *mode)
{
    if (!mode)
        return 0;
    int fl = mode[0] == 'r' ? O_RDONLY : mode[0] == 'w' ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY | O_CREAT;
    for (const char *p = mode + 1; *p && *p != ','; p++) {
        if (*p == '+')
            fl = (fl & ~O_WRONLY) | O_RDWR;
        if (*p == 'x')
            fl |= O_EXCL;
    }
    return fl;
}

/* fopen/freopen's guard: 1 (errno EROFS) when the kernel would resolve a writing mode's path into the cache's
 * copy of a mount. */
static int fopen_refused(const char *path, const char *mode)
{
    int fl = fmode_oflags(mode);
    if (!(fl & OPEN_WRITES) || !sh_wguard(AT_FDCWD, path, SH_W_OPEN, fl))
        return 0;
    errno = EROFS;
    return 1;
}

static void *wrap_fdopen(int fd, const void *mode)
{
    return fdopen(fd, mode);
}

/* A writing mode on a mount path (path: its spelling): the kernel's answer on a read-only file system
 * (kopen_err: the walk, EISDIR for a directory, ENOENT, EEXIST for "x", EROFS). An ancestor on disk is the
 * host's: sh_open opens it. */
static int fopen_ours_err(const struct sh_loc *l, const char *path, const char *mode)
{
    int ke = path && !anc_real(l) ? kopen_err(AT_FDCWD, path, fmode_oflags(mode)) : 0;
    if (ke)
        return -ke;
    int fd = sh_open(l, fmode_oflags(mode) | O_CLOEXEC, 0666);
    if (fd >= 0) { /* not expected: every writing flag is refused there */
        sh_fd_drop(fd);
        fd = -EROFS;
    }
    return fd;
}

static FILE *fopen_ours(const struct sh_loc *l, const char *path, const char *mode, int e)
{
    int fl = fmode_flags(mode);
    if (fl == -EROFS)
        fl = fopen_ours_err(l, path, mode);
    if (fl < 0) {
        errno = -fl;
        return NULL;
    }
    return sh_open_stream(l, fl, wrap_fdopen, mode, e);
}

typedef FILE *(*fopen_fn)(const char *, const char *);
typedef FILE *(*freopen_fn)(const char *, const char *, FILE *);

static FILE *do_fopen(const char *path, const char *mode, fopen_fn real)
{
    SH_LOC(l);
    int e = errno;
    if (sh_outside(AT_FDCWD, path) || sh_classify(AT_FDCWD, path, &l) == L_NONE) {
        if (sh_wguard_on && fopen_refused(l.kpath ? l.kpath : path, mode))
            return NULL;
        FILE *f = real(l.kpath ? l.kpath : path, mode);
        if (f) {
            sh_fd_forget(fileno(f));
            return f;
        }
        int ae, wfl = fmode_oflags(mode), re = errno;
        if (sh_wguard_on && (wfl & OPEN_WRITES) && KWALK_ERR(re) && (ae = kopen_err(AT_FDCWD, path, wfl))) {
            errno = ae; /* the kernel's walk of the caller's spelling (open_w) */
            return NULL;
        }
        errno = re;
        if (errno == ENOENT && sh_wguard_on &&
            (ae = sh_anc_create_err(AT_FDCWD, l.kpath ? l.kpath : path,
                                    (fmode_oflags(mode) & O_CREAT) ? SH_C_OPEN : SH_C_LOOKUP))) {
            errno = kopen_err(AT_FDCWD, path, fmode_oflags(mode)) ?: ae; /* the caller's spelling: the kernel's walk */
            return NULL;
        }
        if (!SH_FALLBACK_ERR(errno))
            return f;
        if (sh_fallback(AT_FDCWD, path, &l) == L_NONE) {
            if (!l.kpath)
                return f;
            errno = e; /* a relative ".." through an ancestor: where the kernel would be (WITH_LOC) */
            if ((f = real(l.kpath, mode)))
                sh_fd_forget(fileno(f));
            return f;
        }
    }
    return fopen_ours(&l, path, mode, e);
}

SH_EXPORT FILE *fopen(const char *path, const char *mode) { return do_fopen(path, mode, REAL(fopen, fopen_fn)); }
SH_EXPORT FILE *fopen64(const char *path, const char *mode)
{
    return do_fopen(path, mode, REAL(fopen64, fopen_fn));
}
/* glibc's exported alias of fopen */
SH_EXPORT FILE *_IO_fopen(const char *path, const char *mode) { return do_fopen(path, mode, REAL(_IO_fopen, fopen_fn)); }
/* glibc's exported _IO_file_fopen and _IO_file_open open a caller's path on a FILE the caller holds (one fopen gave,
 * emptied by _IO_file_close_it: no knowledge of glibc's layout needed) with glibc's own open: a writing mode or
 * flags checked first, as fopen's (issue 33 round 4 review: _IO_file_fopen(fp, "/proc/self/fd/N", "a") appended
 * to a blob). A read of a mount path is not served (the real call's ENOENT), as before. */
/* 1 (errno set) when a write by glibc's own open of path with flags fl is refused: a mount path (not an ancestor on
 * disk) with the kernel's answer on a read-only file system, any other spelling by the guard */
static int io_file_refused(const char *path, int fl)
{
    SH_LOC(l);
    if (!path || !sh_wguard_on || !(fl & OPEN_WRITES))
        return 0;
    if (!sh_outside(AT_FDCWD, path) && sh_classify(AT_FDCWD, path, &l) != L_NONE) {
        if (anc_real(&l))
            return 0;
        errno = kopen_err(AT_FDCWD, path, fl) ?: EROFS;
        return 1;
    }
    if (!sh_wguard(AT_FDCWD, l.kpath ? l.kpath : path, SH_W_OPEN, fl))
        return 0;
    errno = EROFS;
    return 1;
}
SH_EXPORT FILE *_IO_file_fopen(FILE *fp, const char *path, const char *mode, int is32)
{
    LAUNDER(path);
    if (mode && io_file_refused(path, fmode_oflags(mode)))
        return NULL;
    return REAL(_IO_file_fopen, FILE *(*)(FILE *, const char *, const char *, int))(fp, path, mode, is32);
}
SH_EXPORT FILE *_IO_file_open(FILE *fp, const char *path, int flags, int prot, int rw, int is32)
{
    LAUNDER(path);
    if (io_file_refused(path, flags))
        return NULL;
    return REAL(_IO_file_open, FILE *(*)(FILE *, const char *, int, int, int, int))(fp, path, flags, prot, rw, is32);
}

/* setmntent opens its file with glibc's own fopen (past the PLT): glibc's setmntent (a mode with "ce" added, the
 * stream locked by the caller) on the shim's fopen, so that its writes are guarded and a mount's file reads. A mode
 * too long for m goes to the shim's fopen as given: glibc's fopen reads only its first 7 characters (and a ",ccs="),
 * so the "ce" after them would change nothing (issue 33 round 4 review: such a mode, "w" and padding, reached the
 * real setmntent and truncated a blob) */
SH_EXPORT FILE *setmntent(const char *path, const char *mode)
{
    char m[16];
    LAUNDER(path);
    if (!path || !mode || !sh_nmounts)
        return REAL(setmntent, fopen_fn)(path, mode);
    size_t ml = strlen(mode);
    if (ml <= sizeof m - 3) {
        memcpy(m, mode, ml);
        memcpy(m + ml, "ce", 3);
    }
    FILE *f = do_fopen(path, ml <= sizeof m - 3 ? m : mode, REAL(fopen, fopen_fn));
    if (f)
        __fsetlocking(f, FSETLOCKING_BYCALLER);
    return f;
}

static FILE *do_freopen(const char *path, const char *mode, FILE *stream, freopen_fn real)
{
    SH_LOC(l);
    int e = errno;
    const char *p0 = path; /* the caller's spelling: the kernel's walk (path may become a kpath) */
    if (!path || sh_classify(AT_FDCWD, path, &l) == L_NONE) {
        if (path && l.kpath) /* where the kernel goes (see do_fopen) */
            path = l.kpath;
        if (path && sh_wguard_on && fopen_refused(path, mode))
            return NULL;
        /* no path: glibc reopens /proc/self/fd/N itself (an internal open the shim does not see); a stream on a
         * blob (a file opened in a mount) or in the skeleton is not reopened for writing: EROFS, as the kernel's
         * on a read-only file system, and the stream is left as it was (glibc would have closed it) */
        if (!path && stream && (fmode_oflags(mode) & OPEN_WRITES) &&
            sh_wguard(fileno(stream), "", SH_W_FOLLOW, AT_EMPTY_PATH)) {
            errno = EROFS;
            return NULL;
        }
        FILE *f = real(path, mode, stream);
        int ae, wfl = fmode_oflags(mode), re = errno;
        if (!f && path && sh_wguard_on && (wfl & OPEN_WRITES) && KWALK_ERR(re)) {
            /* the kernel's walk of the caller's spelling, which may pass through the shim's view (do_fopen's) */
            if ((ae = kopen_err(AT_FDCWD, p0, wfl)) ||
                (re == ENOENT && (ae = sh_anc_create_err(AT_FDCWD, path, (wfl & O_CREAT) ? SH_C_OPEN : SH_C_LOOKUP)))) {
                errno = ae;
                return NULL;
            }
            errno = re;
        }
        if (f || !path || !SH_FALLBACK_ERR(errno) || sh_fallback(AT_FDCWD, path, &l) == L_NONE) {
            if (f)
                sh_fd_clear(fileno(f));
            return f;
        }
    }
    int fl = fmode_flags(mode);
    int fd = fl == -EROFS ? fopen_ours_err(&l, path, mode) : fl < 0 ? fl : sh_open(&l, fl, 0);
    if (fd < 0) {
        errno = -fd;
        return NULL;
    }
    /* reopen the stream on /dev/null, then put the mount file's descriptor under it */
    FILE *f = real("/dev/null", mode, stream);
    if (!f || dup3(fd, fileno(f), (fl & O_CLOEXEC)) < 0) {
        sh_fd_drop(fd);
        return NULL;
    }
    sh_fd_dup(fd, fileno(f));
    sh_fd_drop(fd);
    errno = e;
    return f;
}

SH_EXPORT FILE *freopen(const char *path, const char *mode, FILE *s)
{
    return do_freopen(path, mode, s, REAL(freopen, freopen_fn));
}
SH_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *s)
{
    return do_freopen(path, mode, s, REAL(freopen64, freopen_fn));
}

/* --- stat ---------------------------------------------------------------------------------------------- */

#define STAT_OURS(FOLLOW, ST)                                                                               \
    return sh_ret(sh_stat(&l_, (FOLLOW), (struct stat *)(ST)), e_)

typedef int (*stat_fn)(const char *, struct stat *);
typedef int (*fstatat_fn)(int, const char *, struct stat *, int);
typedef int (*xstat_fn)(int, const char *, struct stat *);
typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);
typedef int (*fstat_fn)(int, struct stat *);
typedef int (*fxstat_fn)(int, int, struct stat *);

WITH_LOC_SPLIT(stat, (const char *p, struct stat *st), (p, st), AT_FDCWD, p, REAL(stat, stat_fn)(p, st), STAT_OURS(1, st))
WITH_LOC_SPLIT(stat64, (const char *p, struct stat64 *st), (p, st), AT_FDCWD, p, REAL(stat64, int (*)(const char *, struct stat64 *))(p, st), STAT_OURS(1, st))
WITH_LOC_SPLIT(lstat, (const char *p, struct stat *st), (p, st), AT_FDCWD, p, REAL(lstat, stat_fn)(p, st), STAT_OURS(0, st))
WITH_LOC_SPLIT(lstat64, (const char *p, struct stat64 *st), (p, st), AT_FDCWD, p, REAL(lstat64, int (*)(const char *, struct stat64 *))(p, st), STAT_OURS(0, st))
SH_EXPORT int __xstat(int v, const char *p, struct stat *st)
{
    WITH_LOC(AT_FDCWD, p, REAL(__xstat, xstat_fn)(v, p, st), rv_ < 0, STAT_OURS(1, st));
}
SH_EXPORT int __xstat64(int v, const char *p, struct stat64 *st)
{
    WITH_LOC(AT_FDCWD, p, REAL(__xstat64, int (*)(int, const char *, struct stat64 *))(v, p, st), rv_ < 0,
             STAT_OURS(1, st));
}
SH_EXPORT int __lxstat(int v, const char *p, struct stat *st)
{
    WITH_LOC(AT_FDCWD, p, REAL(__lxstat, xstat_fn)(v, p, st), rv_ < 0, STAT_OURS(0, st));
}
SH_EXPORT int __lxstat64(int v, const char *p, struct stat64 *st)
{
    WITH_LOC(AT_FDCWD, p, REAL(__lxstat64, int (*)(int, const char *, struct stat64 *))(v, p, st), rv_ < 0,
             STAT_OURS(0, st));
}

static int fstat_ours(int fd, void *st)
{
    return sh_fd_stat(fd, (struct stat *)st);
}

static int fstatat_do(int d, const char *p, struct stat *st, int fl)
{
    LAUNDER(p);
    if (p && !*p && (fl & AT_EMPTY_PATH) && fstat_ours(d, st))
        return 0;
    WITH_LOC(d, p, REAL(fstatat, fstatat_fn)(d, p, st, fl), rv_ < 0, STAT_OURS(!(fl & AT_SYMLINK_NOFOLLOW), st));
}
SH_EXPORT int fstatat(int d, const char *p, struct stat *st, int fl)
{
    int r = fstatat_do(d, p, st, fl);
    if (__builtin_expect(r == 0 && S_ISDIR(st->st_mode) && !(st->st_mode & 07), 0))
        sh_at_untracked(d, p, (struct stat *)st, !(fl & AT_SYMLINK_NOFOLLOW));
    return r;
}
static int fstatat64_do(int d, const char *p, struct stat64 *st, int fl)
{
    LAUNDER(p);
    if (p && !*p && (fl & AT_EMPTY_PATH) && fstat_ours(d, st))
        return 0;
    WITH_LOC(d, p, REAL(fstatat64, int (*)(int, const char *, struct stat64 *, int))(d, p, st, fl), rv_ < 0,
             STAT_OURS(!(fl & AT_SYMLINK_NOFOLLOW), st));
}
SH_EXPORT int fstatat64(int d, const char *p, struct stat64 *st, int fl)
{
    int r = fstatat64_do(d, p, st, fl);
    if (__builtin_expect(r == 0 && S_ISDIR(st->st_mode) && !(st->st_mode & 07), 0))
        sh_at_untracked(d, p, (struct stat *)st, !(fl & AT_SYMLINK_NOFOLLOW));
    return r;
}
static int __fxstatat_do(int v, int d, const char *p, struct stat *st, int fl)
{
    LAUNDER(p);
    if (p && !*p && (fl & AT_EMPTY_PATH) && fstat_ours(d, st))
        return 0;
    WITH_LOC(d, p, REAL(__fxstatat, fxstatat_fn)(v, d, p, st, fl), rv_ < 0,
             STAT_OURS(!(fl & AT_SYMLINK_NOFOLLOW), st));
}
SH_EXPORT int __fxstatat(int v, int d, const char *p, struct stat *st, int fl)
{
    int r = __fxstatat_do(v, d, p, st, fl);
    if (__builtin_expect(r == 0 && S_ISDIR(st->st_mode) && !(st->st_mode & 07), 0))
        sh_at_untracked(d, p, (struct stat *)st, !(fl & AT_SYMLINK_NOFOLLOW));
    return r;
}
static int __fxstatat64_do(int v, int d, const char *p, struct stat64 *st, int fl)
{
    LAUNDER(p);
    if (p && !*p && (fl & AT_EMPTY_PATH) && fstat_ours(d, st))
        return 0;
    WITH_LOC(d, p, REAL(__fxstatat64, int (*)(int, int, const char *, struct stat64 *, int))(v, d, p, st, fl),
             rv_ < 0, STAT_OURS(!(fl & AT_SYMLINK_NOFOLLOW), st));
}
SH_EXPORT int __fxstatat64(int v, int d, const char *p, struct stat64 *st, int fl)
{
    int r = __fxstatat64_do(v, d, p, st, fl);
    if (__builtin_expect(r == 0 && S_ISDIR(st->st_mode) && !(st->st_mode & 07), 0))
        sh_at_untracked(d, p, (struct stat *)st, !(fl & AT_SYMLINK_NOFOLLOW));
    return r;
}

SH_EXPORT int fstat(int fd, struct stat *st)
{
    int r = REAL(fstat, fstat_fn)(fd, st);
    if (r == 0)
        SH_FSTAT_AFTER(fd, st);
    return r;
}
SH_EXPORT int fstat64(int fd, struct stat64 *st)
{
    int r = REAL(fstat64, int (*)(int, struct stat64 *))(fd, st);
    if (r == 0)
        SH_FSTAT_AFTER(fd, st);
    return r;
}
SH_EXPORT int __fxstat(int v, int fd, struct stat *st)
{
    int r = REAL(__fxstat, fxstat_fn)(v, fd, st);
    if (r == 0)
        SH_FSTAT_AFTER(fd, st);
    return r;
}
SH_EXPORT int __fxstat64(int v, int fd, struct stat64 *st)
{
    int r = REAL(__fxstat64, int (*)(int, int, struct stat64 *))(v, fd, st);
    if (r == 0)
        SH_FSTAT_AFTER(fd, st);
    return r;
}

typedef int (*statx_fn)(int, const char *, int, unsigned int, struct statx *);

static int statx_do(int d, const char *p, int fl, unsigned int mask, struct statx *sx)
{
    statx_fn real = REAL(statx, statx_fn);
    LAUNDER(p);
    if (!p)
        return real(d, p, fl, mask, sx);   /* Rust probes for EFAULT */
    struct stat st;
    if (!*p && (fl & AT_EMPTY_PATH)) {
        if (fstat_ours(d, &st)) {
            sh_stat_to_statx(&st, sx);
            return 0;
        }
        return real(d, p, fl, mask, sx);
    }
    WITH_LOC(d, p, real(d, p, fl, mask, sx), rv_ < 0, {
        int r = sh_stat(&l_, !(fl & AT_SYMLINK_NOFOLLOW), &st);
        if (r == 0)
            sh_stat_to_statx(&st, sx);
        return sh_ret(r, e_);
    });
}

SH_EXPORT int statx(int d, const char *p, int fl, unsigned int mask, struct statx *sx)
{
    int r = statx_do(d, p, fl, mask, sx);
    if (__builtin_expect(r == 0 && S_ISDIR(sx->stx_mode) && !(sx->stx_mode & 07), 0)) {
        struct stat st;
        st.st_mode = S_IFDIR;
        if (sh_at_untracked(d, p, &st, !(fl & AT_SYMLINK_NOFOLLOW)))
            sh_stat_to_statx(&st, sx);
    }
    return r;
}

/* --- access -------------------------------------------------------------------------------------------- */

WITH_LOC_SPLIT(access, (const char *p, int mode), (p, mode), AT_FDCWD, p, REAL(access, int (*)(const char *, int))(p, mode),
               return sh_ret(sh_access(&l_, mode), e_))
WITH_LOC_SPLIT(eaccess, (const char *p, int mode), (p, mode), AT_FDCWD, p, REAL(eaccess, int (*)(const char *, int))(p, mode),
               return sh_ret(sh_access(&l_, mode), e_))
WITH_LOC_SPLIT(euidaccess, (const char *p, int mode), (p, mode), AT_FDCWD, p, REAL(euidaccess, int (*)(const char *, int))(p, mode),
               return sh_ret(sh_access(&l_, mode), e_))
SH_EXPORT int faccessat(int d, const char *p, int mode, int fl)
{
    WITH_LOC(d, p, REAL(faccessat, int (*)(int, const char *, int, int))(d, p, mode, fl), rv_ < 0,
             return sh_ret(sh_access(&l_, mode), e_));
}

/* --- readlink ------------------------------------------------------------------------------------------ */

static ssize_t rl_ret(ssize_t r, int e)
{
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    errno = e;
    return r;
}

SH_EXPORT ssize_t readlink(const char *p, char *buf, size_t n)
{
    WITH_LOC(AT_FDCWD, p, REAL(readlink, ssize_t (*)(const char *, char *, size_t))(p, buf, n), rv_ < 0,
             return rl_ret(sh_readlink(&l_, buf, n), e_));
}
SH_EXPORT ssize_t readlinkat(int d, const char *p, char *buf, size_t n)
{
    WITH_LOC(d, p, REAL(readlinkat, ssize_t (*)(int, const char *, char *, size_t))(d, p, buf, n), rv_ < 0,
             return rl_ret(sh_readlink(&l_, buf, n), e_));
}
SH_EXPORT ssize_t __readlink_chk(const char *p, char *buf, size_t n, size_t buflen)
{
    return readlink(p, buf, n < buflen ? n : buflen);
}
SH_EXPORT ssize_t __readlinkat_chk(int d, const char *p, char *buf, size_t n, size_t buflen)
{
    return readlinkat(d, p, buf, n < buflen ? n : buflen);
}

/* --- realpath ------------------------------------------------------------------------------------------ */

static char *realpath_ours(const struct sh_loc *l, char *resolved, int e)
{
    SH_SCRATCH(t);
    char *out = t->a;
    int r = sh_realpath(l, out);
    if (r < 0) {
        errno = -r;
        return NULL;
    }
    size_t n = strlen(out) + 1;
    if (resolved) {
        if (n > PATH_MAX) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        memcpy(resolved, out, n);
        errno = e;
        return resolved;
    }
    char *p = malloc(n);
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(p, out, n);
    errno = e;
    return p;
}

SH_EXPORT char *realpath(const char *p, char *resolved)
{
    if (__builtin_expect(p && !sh_outside(AT_FDCWD, p) && strnlen(p, PATH_MAX) >= PATH_MAX, 0)) {
        /* glibc walks a spelling component by component: one of PATH_MAX bytes or more is no error there */
        SH_LOC(l);
        int e = errno;
        int k = sh_classify_long(AT_FDCWD, p, &l);
        /* a mount's path reached by a ".." keeps its kpath (normalised: a trailing slash dropped) */
        if (k == L_MNT || (k == L_ANC && !l.kpath))
            return realpath_ours(&l, resolved, e);
        if (l.kpath)
            p = l.kpath;
    }
    WITH_LOC(AT_FDCWD, p, REAL(realpath, char *(*)(const char *, char *))(p, resolved), rv_ == NULL,
             return realpath_ours(&l_, resolved, e_));
}
SH_EXPORT char *__realpath_chk(const char *p, char *resolved, size_t len)
{
    return realpath(p, resolved);
}
SH_EXPORT char *canonicalize_file_name(const char *p)
{
    return realpath(p, NULL);
}

/* --- cwd ----------------------------------------------------------------------------------------------- */

SH_EXPORT int chdir(const char *p)
{
    SH_LOC(l);
    int e = errno;
    if (sh_classify(AT_FDCWD, p, &l) == L_NONE) {
        if (l.kpath)
            p = l.kpath;
        int r = REAL(chdir, int (*)(const char *))(p);
        if (r == 0) {
            sh_cwd_changed();
            return 0;
        }
        if (!SH_FALLBACK_ERR(errno))
            return r;
        if (sh_fallback(AT_FDCWD, p, &l) == L_NONE) {
            if (!l.kpath)
                return r;
            errno = e; /* a relative ".." through an ancestor: where the kernel would be (WITH_LOC) */
            if ((r = REAL(chdir, int (*)(const char *))(l.kpath)) == 0)
                sh_cwd_changed();
            return r;
        }
    }
    int r = sh_chdir(&l);
    if (r == 0)
        sh_cwd_changed();
    return sh_ret(r, e);
}

SH_EXPORT int fchdir(int fd)
{
    if (sh_fd_is_file(fd)) {
        errno = ENOTDIR;   /* an O_PATH descriptor of a mount file lives on its parent's skeleton dir */
        return -1;
    }
    int r = REAL(fchdir, int (*)(int))(fd);
    if (r == 0)
        sh_cwd_changed();
    return r;
}

typedef char *(*getcwd_fn)(char *, size_t);

SH_EXPORT char *getcwd(char *buf, size_t size)
{
    getcwd_fn real = REAL(getcwd, getcwd_fn);
    if (!sh_nmounts)
        return real(buf, size);
    int e = errno;
    SH_SCRATCH(t);
    char *tmp = t->a, *lg = t->b;
    if (!real(tmp, SH_SCR) || !sh_map_back(tmp, lg, SH_PATH)) {
        errno = e;
        return real(buf, size);
    }
    size_t n = strlen(lg) + 1;
    if (!buf) {
        size_t cap = size ? size : n;
        if (cap < n) {
            errno = ERANGE;
            return NULL;
        }
        if (!(buf = malloc(cap))) {
            errno = ENOMEM;
            return NULL;
        }
    } else if (size < n) {
        errno = size ? ERANGE : EINVAL;
        return NULL;
    }
    memcpy(buf, lg, n);
    errno = e;
    return buf;
}

SH_EXPORT char *__getcwd_chk(char *buf, size_t size, size_t buflen)
{
    return getcwd(buf, size < buflen ? size : buflen);
}

SH_EXPORT char *get_current_dir_name(void)
{
    const char *pwd = getenv("PWD");
    struct stat a, b;
    int e = errno;
    if (pwd && pwd[0] == '/' && stat(pwd, &a) == 0 && REAL(stat, stat_fn)(".", &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
        errno = e;
        return strdup(pwd);
    }
    errno = e;
    return getcwd(NULL, 0);
}

/* --- xattr: none on mount paths ------------------------------------------------------------------------ */

#define XATTR_GET_OURS                                                                                      \
    {                                                                                                       \
        struct stat st_;                                                                                    \
        int r_ = sh_stat(&l_, 1, &st_);                                                                     \
        (void)e_;                                                                                           \
        errno = r_ < 0 ? -r_ : ENODATA;                                                                     \
        return -1;                                                                                          \
    }
#define XATTR_LIST_OURS                                                                                     \
    {                                                                                                       \
        struct stat st_;                                                                                    \
        return sh_ret(sh_stat(&l_, 1, &st_), e_);                                                           \
    }

typedef ssize_t (*getxattr_fn)(const char *, const char *, void *, size_t);
typedef ssize_t (*listxattr_fn)(const char *, char *, size_t);

SH_EXPORT ssize_t getxattr(const char *p, const char *name, void *v, size_t n)
{
    WITH_LOC(AT_FDCWD, p, REAL(getxattr, getxattr_fn)(p, name, v, n), rv_ < 0, XATTR_GET_OURS);
}
SH_EXPORT ssize_t lgetxattr(const char *p, const char *name, void *v, size_t n)
{
    WITH_LOC(AT_FDCWD, p, REAL(lgetxattr, getxattr_fn)(p, name, v, n), rv_ < 0, XATTR_GET_OURS);
}
SH_EXPORT ssize_t fgetxattr(int fd, const char *name, void *v, size_t n)
{
    struct stat st;
    if (fstat_ours(fd, &st)) {
        errno = ENODATA;
        return -1;
    }
    return REAL(fgetxattr, ssize_t (*)(int, const char *, void *, size_t))(fd, name, v, n);
}
SH_EXPORT ssize_t listxattr(const char *p, char *list, size_t n)
{
    WITH_LOC(AT_FDCWD, p, REAL(listxattr, listxattr_fn)(p, list, n), rv_ < 0, XATTR_LIST_OURS);
}
SH_EXPORT ssize_t llistxattr(const char *p, char *list, size_t n)
{
    WITH_LOC(AT_FDCWD, p, REAL(llistxattr, listxattr_fn)(p, list, n), rv_ < 0, XATTR_LIST_OURS);
}
SH_EXPORT ssize_t flistxattr(int fd, char *list, size_t n)
{
    struct stat st;
    if (fstat_ours(fd, &st))
        return 0;
    return REAL(flistxattr, ssize_t (*)(int, char *, size_t))(fd, list, n);
}

/* --- statfs -------------------------------------------------------------------------------------------- */

SH_EXPORT int statfs(const char *p, struct statfs *sf)
{
    WITH_LOC(AT_FDCWD, p, REAL(statfs, int (*)(const char *, struct statfs *))(p, sf), rv_ < 0,
             return sh_ret(sh_statfs(&l_, sf), e_));
}
SH_EXPORT int statfs64(const char *p, struct statfs64 *sf)
{
    WITH_LOC(AT_FDCWD, p, REAL(statfs64, int (*)(const char *, struct statfs64 *))(p, sf), rv_ < 0,
             return sh_ret(sh_statfs(&l_, (struct statfs *)sf), e_));
}

static int statvfs_ours(const struct sh_loc *l, struct statvfs *sv, int e)
{
    struct stat st;
    int r = sh_stat(l, 1, &st);
    if (r < 0)
        return sh_ret(r, e);
    int (*real)(const char *, struct statvfs *) = REAL(statvfs, int (*)(const char *, struct statvfs *));
    if (real(sh_cache, sv) < 0 && real("/", sv) < 0)
        return -1;
    sv->f_flag |= ST_RDONLY;
    errno = e;
    return 0;
}

SH_EXPORT int statvfs(const char *p, struct statvfs *sv)
{
    WITH_LOC(AT_FDCWD, p, REAL(statvfs, int (*)(const char *, struct statvfs *))(p, sv), rv_ < 0,
             return statvfs_ours(&l_, sv, e_));
}
SH_EXPORT int statvfs64(const char *p, struct statvfs64 *sv)
{
    WITH_LOC(AT_FDCWD, p, REAL(statvfs64, int (*)(const char *, struct statvfs64 *))(p, sv), rv_ < 0,
             return statvfs_ours(&l_, (struct statvfs *)sv, e_));
}
SH_EXPORT int fstatfs(int fd, struct statfs *sf)
{
    int r = REAL(fstatfs, int (*)(int, struct statfs *))(fd, sf);
    struct stat st;
    if (r == 0 && fstat_ours(fd, &st))
        sf->f_flags |= ST_RDONLY;
    return r;
}
SH_EXPORT int fstatfs64(int fd, struct statfs64 *sf)
{
    int r = REAL(fstatfs64, int (*)(int, struct statfs64 *))(fd, sf);
    struct stat st;
    if (r == 0 && fstat_ours(fd, &st))
        sf->f_flags |= ST_RDONLY;
    return r;
}
SH_EXPORT int fstatvfs(int fd, struct statvfs *sv)
{
    int r = REAL(fstatvfs, int (*)(int, struct statvfs *))(fd, sv);
    struct stat st;
    if (r == 0 && fstat_ours(fd, &st))
        sv->f_flag |= ST_RDONLY;
    return r;
}
SH_EXPORT int fstatvfs64(int fd, struct statvfs64 *sv)
{
    int r = REAL(fstatvfs64, int (*)(int, struct statvfs64 *))(fd, sv);
    struct stat st;
    if (r == 0 && fstat_ours(fd, &st))
        sv->f_flag |= ST_RDONLY;
    return r;
}

/* --- writes: EROFS on a mount -------------------------------------------------------------------------- */

/* The real call, unless the kernel would resolve it into the cache's copy of a mount (wguard.c): HOW, OFL as
 * sh_wguard's. A spelling outside the mounts can still get there (/proc/self/fd/N, a cwd there, a symlink). */
#define GUARDED(DIRFD, P, HOW, OFL, REALEXPR)                                                               \
    (sh_wguard((DIRFD), (P), (HOW), (OFL)) ? (errno = EROFS, -1) : (REALEXPR))

/* The kernel's answer to a write call that a mount (or a synthesized ancestor) refuses: it resolves the path first
 * (the object, or for rmdir/unlink/rename the parent: filename_parentat) and only then says EROFS
 * (mnt_want_write), so a path that does not resolve gives its ENOENT, ENOTDIR, ENAMETOOLONG. KIND: */
enum { RO_PLAIN, RO_TRUNC, RO_RMDIR, RO_UNLINK };
enum { LAST_NORM_, LAST_DOT_, LAST_DOTDOT_, LAST_ROOT_ };

/* The kernel's stat of a spelling, mounts and ancestors included (as the stat wrappers answer): 0 or the errno. */
static int look(int d, const char *p, int follow, struct stat *st)
{
    if (!p || !p[0])
        return ENOENT;
    if (strnlen(p, PATH_MAX) >= PATH_MAX)
        return ENAMETOOLONG;
    SH_LOC(l);
    if (sh_outside(d, p) || sh_classify(d, p, &l) == L_NONE || anc_real(&l)) {
        const char *kp = l.kpath ? l.kpath : p;
        if (sh_r.fstatat(d, kp, st, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0)
            return 0;
        int e = errno;
        if (!SH_FALLBACK_ERR(e) || sh_fallback(d, kp, &l) == L_NONE)
            return l.kpath ? (sh_r.fstatat(d, l.kpath, st, follow ? 0 : AT_SYMLINK_NOFOLLOW) ? errno : 0) : e;
    }
    int r = sh_stat(&l, follow, st);
    return r < 0 ? -r : 0;
}

/* The kernel's filename_parentat of p: 0 or the errno of the walk to its last component's directory; *last: the
 * last component's type (".", "..", "/" or a name). st: the caller's, lent (the 2 KiB stack budget of a write call
 * outside the mounts). */
static int parent_err(int d, const char *p, int *last, struct stat *st)
{
    *last = LAST_NORM_;
    if (!p || !p[0])
        return ENOENT;
    size_t n = strnlen(p, PATH_MAX);
    if (n >= PATH_MAX)
        return ENAMETOOLONG;
    SH_SCRATCH(t);
    memcpy(t->a, p, n + 1);
    while (n > 1 && t->a[n - 1] == '/')
        t->a[--n] = 0;
    char *slash = strrchr(t->a, '/');
    const char *base = slash ? slash + 1 : t->a, *dir = ".";
    if (!strcmp(t->a, "/")) {
        *last = LAST_ROOT_;
        return 0;
    }
    *last = !strcmp(base, ".") ? LAST_DOT_ : !strcmp(base, "..") ? LAST_DOTDOT_ : LAST_NORM_;
    if (slash == t->a)
        dir = "/";
    else if (slash) {
        slash[1] = 0; /* "a/b" -> "a/": the walk of a directory */
        dir = t->a;
    }
    int e = look(d, dir, 1, st);
    return e ? e : S_ISDIR(st->st_mode) ? 0 : ENOTDIR;
}

/* The last component of p (trailing slashes cut) in t->a, *base into it, *slashed: p ended in '/'. 0, or
 * ENAMETOOLONG for a spelling longer than a scratch buffer (parent_err said so first). */
static int last_comp(const char *p, struct sh_scratch *t, const char **base, int *slashed)
{
    size_t n = strnlen(p, PATH_MAX);
    if (n >= PATH_MAX || n >= SH_SCR)
        return ENAMETOOLONG;
    memcpy(t->a, p, n + 1);
    *slashed = n > 1 && t->a[n - 1] == '/';
    while (n > 1 && t->a[n - 1] == '/')
        t->a[--n] = 0;
    const char *slash = strrchr(t->a, '/');
    *base = slash ? slash + 1 : t->a;
    return 0;
}

/* Where the kernel's create would write when nothing came first: EROFS in the shim's read-only tree (ro), else
 * the real file system's own verdict on its mount (EROFS for a read-only one, 0: it would go on). */
static int create_ro(int d, const char *parent, int ro)
{
    if (ro)
        return EROFS;
    int fd = sh_r.openat(d, parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct statvfs sv; /* (a parent the real file system lacks, or the cache holds: the shim's, a synthesized
                        * ancestor or a skeleton directory reached by a cwd or a descriptor there) */
    int r = fd < 0 || sh_wguard_fd(fd) || (fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY)) ? EROFS : 0;
    if (fd >= 0)
        sh_r.close(fd);
    return r;
}

/* create_ro of the directory of p's last component (t: the caller's scratch) */
static int parent_ro(int d, const char *p, int ro, struct sh_scratch *t)
{
    const char *base;
    int slashed, e = last_comp(p, t, &base, &slashed);
    if (e)
        return e;
    if (base == t->a)
        return create_ro(d, ".", ro);
    t->a[base - t->a] = 0; /* "dir/" */
    return create_ro(d, t->a, ro);
}

/* The kernel's filename_create of p (mkdir, mknod, symlink, link's destination: KIND SH_C_DIR or SH_C_NODE),
 * answered from the shim's view of every component (look): the parent's walk, EEXIST for a last ".", ".." or "/",
 * ENAMETOOLONG for the name, EEXIST for an entry there (a symlink, dangling or not, a file under "name/"), ENOENT
 * for "name/" that is no directory's, then the mount's write access: EROFS where ro (the shim's trees), else the
 * real mount's (create_ro). 0: the kernel would go on. */
static int kcreate_err(int d, const char *p, int kind, int ro)
{
    struct stat st;
    int last, slashed, e = parent_err(d, p, &last, &st);
    if (e)
        return e;
    if (last != LAST_NORM_)
        return EEXIST;
    SH_SCRATCH(t);
    const char *base;
    if ((e = last_comp(p, t, &base, &slashed)))
        return e;
    if (strlen(base) > NAME_MAX)
        return ENAMETOOLONG;
    if (look(d, t->a, 0, &st) == 0)
        return EEXIST;
    if (slashed && kind != SH_C_DIR)
        return ENOENT;
    return parent_ro(d, p, ro, t);
}

/* The kernel's path_openat of p with flags fl that write or create, in the shim's read-only tree: the parent's
 * walk; a last ".", ".." or "/" (a directory: EEXIST for O_CREAT|O_EXCL, EISDIR); for O_CREAT a trailing slash
 * (EISDIR); the name (ENAMETOOLONG); a missing entry (ENOENT, or EROFS for O_CREAT; a dangling symlink followed:
 * its target, hops at most SH_MAX_HOPS); an entry (EEXIST for O_CREAT|O_EXCL, EISDIR, ENOTDIR for O_DIRECTORY or
 * "file/", ELOOP for a symlink not followed, EROFS for a write). 0: an open that writes nothing (it opens). */
static int kopen_err(int d, const char *p, int fl)
{
    struct stat st;
    int creat = fl & O_CREAT, excl = creat && (fl & O_EXCL);
    int writes = (fl & O_ACCMODE) != O_RDONLY || (fl & O_TRUNC);
    SH_SCRATCH(t);
    for (int hop = 0;; hop++) {
        int last, slashed, e = parent_err(d, p, &last, &st);
        if (e)
            return e;
        if (last != LAST_NORM_)
            return creat ? (excl ? EEXIST : EISDIR) : writes ? EISDIR : 0;
        const char *base;
        if ((e = last_comp(p, t, &base, &slashed)))
            return e;
        if (creat && slashed)
            return EISDIR;
        if (strlen(base) > NAME_MAX)
            return ENAMETOOLONG;
        int follow = slashed || (!(fl & O_NOFOLLOW) && !excl);
        e = look(d, slashed ? p : t->a, follow, &st);
        if (e == ENOENT && creat && follow && look(d, t->a, 0, &st) == 0 && S_ISLNK(st.st_mode)) {
            /* a dangling symlink: the kernel creates its target, from the link's directory */
            if (hop >= SH_MAX_HOPS)
                return ELOOP;
            ssize_t k = readlinkat(d, t->a, t->d, SH_SCR - 1); /* the shim's readlinkat: a mount's links too */
            size_t dl = (size_t)(base - t->a);
            if (k <= 0 || (t->d[0] != '/' && dl + (size_t)k >= SH_SCR))
                return k == 0 ? ENOENT : EROFS;
            t->d[k] = 0;
            if (t->d[0] != '/') {
                memmove(t->d + dl, t->d, (size_t)k + 1);
                memcpy(t->d, t->a, dl);
            }
            memcpy(t->b, t->d, strlen(t->d) + 1);
            p = t->b;
            continue;
        }
        if (e)
            return e == ENOENT && creat ? EROFS : e;
        if (excl)
            return EEXIST;
        if (S_ISDIR(st.st_mode))
            return creat || writes ? EISDIR : 0;
        if ((fl & O_DIRECTORY) || slashed)
            return ENOTDIR;
        if (S_ISLNK(st.st_mode))
            return ELOOP;
        return writes ? EROFS : 0;
    }
}

static int ro_err(int d, const char *p, const struct sh_loc *l, int how, int kind)
{
    struct stat st;
    if (how != SH_W_PARENT) {
        int r = sh_stat(l, how == SH_W_FOLLOW, &st);
        if (r < 0)
            return -r;
        if (kind == RO_TRUNC) /* vfs_truncate: the type before the mount */
            return S_ISDIR(st.st_mode) ? EISDIR : !S_ISREG(st.st_mode) ? EINVAL : EROFS;
        return EROFS;
    }
    int last, e = parent_err(d, p, &last, &st);
    if (e)
        return e;
    if (kind == RO_UNLINK && last != LAST_NORM_)
        return EISDIR;
    if (kind == RO_RMDIR && last != LAST_NORM_)
        return last == LAST_DOTDOT_ ? ENOTEMPTY : last == LAST_DOT_ ? EINVAL : EBUSY;
    return EROFS;
}

#define RO1(DIRFD, P, HOW, OFL, REALEXPR) RO1K(DIRFD, P, HOW, OFL, RO_PLAIN, REALEXPR)
/* rmdir, unlink past the fast path: a last component ".", ".." or "/" is answered by the kernel from the parent's
 * walk whatever the file system (the real call on the spelling a ".." out of the mounts is repointed to would not
 * see it); a name in a synthesized ancestor that the real call finds missing is there for the kernel's walk of
 * the parent, which then says EROFS. */
static int ro_parent_real(int d, const char *p0, int kind, int rv)
{
    int re = errno;
    if (rv < 0 && sh_wguard_on && KWALK_ERR(re)) {
        /* the kernel's walk of the caller's spelling p0 to its directory, which may pass through the shim's view
         * (a synthesized ancestor named from its real parent): its errno, or EROFS there before the name's lookup */
        struct stat st;
        int last, e = parent_err(d, p0, &last, &st);
        if (!e && last == LAST_NORM_) {
            SH_SCRATCH(t);
            e = parent_ro(d, p0, 0, t);
        }
        errno = e ? e : re;
    }
    return rv;
}
static int ro_dots(int d, const char *p, int kind)
{
    /* spellings outside too while the guard is on: one may reach a mount with "..", where it would say EROFS */
    if (!p || (kind != RO_RMDIR && kind != RO_UNLINK) || (!sh_wguard_on && sh_outside(d, p)))
        return 0;
    size_t n = strnlen(p, PATH_MAX);
    while (n > 1 && p[n - 1] == '/')
        n--;
    if (!(n == 1 && p[0] == '/') && !(n >= 1 && p[n - 1] == '.' && (n == 1 || p[n - 2] == '/' ||
                                      (p[n - 2] == '.' && (n == 2 || p[n - 3] == '/')))))
        return 0;
    SH_LOC(l);
    return ro_err(d, p, &l, SH_W_PARENT, kind);
}
#define RO1K(DIRFD, P, HOW, OFL, KIND, REALEXPR)                                                            \
    do {                                                                                                    \
        const char *p0_ = (P); /* the caller's spelling (P may become a kpath) */                           \
        int de_ = (HOW) == SH_W_PARENT ? ro_dots(DIRFD, P, KIND) : 0;                                       \
        if (de_) {                                                                                          \
            errno = de_;                                                                                    \
            return -1;                                                                                      \
        }                                                                                                   \
        RO1_(DIRFD, P, HOW, KIND,                                                                           \
             (HOW) == SH_W_PARENT ? ro_parent_real(DIRFD, p0_, KIND, GUARDED(DIRFD, P, HOW, OFL, REALEXPR))  \
                                  : GUARDED(DIRFD, P, HOW, OFL, REALEXPR));                                 \
    } while (0)
/* The guard deciding on the descriptor (sh_wguard_at, HOW: SH_W_PARENT for a removal, SH_W_CREATE for a create):
 * REALEXPR, an *at call written with DIRFD and P (lvalues), runs with them repointed at the directory the guard
 * checked and the last component, so that a symlink flipped between the check and the call cannot move it into
 * the cache (issue 33 item 5); refused: errno DENIED (evaluated only then), -1 */
#define GUARDED_AT(DIRFD, P, HOW, DENIED, REALEXPR)                                                         \
    ({                                                                                                      \
        int pfd_ = -1, r_;                                                                                  \
        const char *pb_ = NULL;                                                                             \
        if (sh_wguard_on && sh_wguard_at((DIRFD), (P), (HOW), 0, &pfd_, &pb_)) {                            \
            errno = (DENIED);                                                                               \
            r_ = -1;                                                                                        \
        } else if (pfd_ < 0) {                                                                              \
            r_ = (REALEXPR);                                                                                \
        } else {                                                                                            \
            int sd_ = (DIRFD);                                                                              \
            const char *sp_ = (P);                                                                          \
            (DIRFD) = pfd_;                                                                                 \
            (P) = pb_;                                                                                      \
            r_ = (REALEXPR);                                                                                \
            int re_ = errno;                                                                                \
            (DIRFD) = sd_;                                                                                  \
            (P) = sp_;                                                                                      \
            sh_r.close(pfd_);                                                                               \
            errno = re_;                                                                                    \
        }                                                                                                   \
        r_;                                                                                                 \
    })
#define RO1KP(DIRFD, P, KIND, REALEXPR)                                                                     \
    do {                                                                                                    \
        const char *p0_ = (P);                                                                              \
        int de_ = ro_dots(DIRFD, P, KIND);                                                                  \
        if (de_) {                                                                                          \
            errno = de_;                                                                                    \
            return -1;                                                                                      \
        }                                                                                                   \
        RO1_(DIRFD, P, SH_W_PARENT, KIND, ro_parent_real(DIRFD, p0_, KIND, GUARDED_AT(DIRFD, P, SH_W_PARENT, EROFS, REALEXPR))); \
    } while (0)
#define RO1_(DIRFD, P, HOW, KIND, REALEXPR)                                                                 \
    WITH_LOC(DIRFD, P, REALEXPR, rv_ < 0, {                                                                 \
        if (anc_real(&l_) || l_.link) { /* a bare magic link (/proc/self/cwd): the guarded real call */     \
            if (l_.kpath)                                                                                   \
                (P) = l_.kpath;                                                                             \
            errno = e_;                                                                                     \
            return REALEXPR;                                                                                \
        }                                                                                                   \
        errno = ro_err(DIRFD, P, &l_, HOW, KIND);                                                           \
        return -1;                                                                                          \
    })

/* fchmodat, fchownat, utimensat: the object, its last symlink followed unless flags say not */
#define AT_HOW(f) (((f) & AT_SYMLINK_NOFOLLOW) ? SH_W_NOFOLLOW : SH_W_FOLLOW)
/* linkat: its source's last symlink is followed only with AT_SYMLINK_FOLLOW */
#define AT_HOW_LINK(f) (((f) & AT_SYMLINK_FOLLOW) ? SH_W_FOLLOW : SH_W_NOFOLLOW)

/* rename and link between a mount (its path, or whatever the kernel resolves into a mount or the cache: sh_wguard)
 * and elsewhere: the kernel's answers with a read-only mount there. rename: EXDEV across its edge, EROFS within.
 * link: EROFS into it (its destination is created first), EXDEV out of it (a blob hard-linked out, by
 * /proc/self/fd/N with AT_SYMLINK_FOLLOW or a descriptor with AT_EMPTY_PATH, could be opened for writing there).
 * H1: how the source is guarded, with the flags F1. 0 or the errno. */
/* The lookups of ro2_err and link_real_err out of line: their struct stat is not on the stack while
 * kcreate_err walks (the 2 KiB budget outside the mounts). */
static __attribute__((noinline)) int src_look(int d1, const char *p1, int f1)
{
    struct stat st;
    return look(d1, p1, (f1 & AT_SYMLINK_FOLLOW) != 0, &st);
}

static __attribute__((noinline)) int parents_err(int d1, const char *p1, int *t1, int d2, const char *p2, int *t2)
{
    struct stat st;
    int pe = parent_err(d1, p1, t1, &st);
    return pe ? pe : parent_err(d2, p2, t2, &st);
}

static int ro2_err(int d1, const char *p1, int h1, int f1, int d2, const char *p2, int h2, int islink,
                   struct sh_loc *l1p, struct sh_loc *l2p)
{
#define l1 (*l1p)
#define l2 (*l2p)
    int o1 = sh_outside(d1, p1), o2 = sh_outside(d2, p2);
    int m1 = !o1 && sh_classify(d1, p1, &l1) != L_NONE && !anc_real(&l1);
    int m2 = !o2 && sh_classify(d2, p2, &l2) != L_NONE && !anc_real(&l2);
    int pe;
    if (islink) { /* the kernel's order: the source's lookup, the destination's create, then EXDEV */
        int pe2 = m2 ? 0 : sh_anc_create_err(d2, p2, SH_C_NODE);
        int g2 = m2 || pe2 || sh_wguard(d2, p2, h2, 0), g1 = m1 || sh_wguard(d1, p1, h1, f1);
        if (!g1 && !g2)
            return 0;
        if (!(p1 && !p1[0] && (f1 & AT_EMPTY_PATH)) && (pe = src_look(d1, p1, f1)))
            return pe;
        /* the destination's create as the kernel walks it (its parent's lookup before any EXDEV), in the read-only
         * tree or on the real file system (whose own mount may be read-only: EROFS before EXDEV) */
        int ce = kcreate_err(d2, p2, SH_C_NODE, g2);
        return ce ? ce : EXDEV;
    }
    /* rename: both parents' lookups, then EXDEV across the edge, EBUSY for ".", ".." or "/", EROFS within */
    int a = m1 || sh_anc_create_err(d1, p1, SH_C_PARENT) || sh_wguard(d1, p1, h1, f1);
    int b = m2 || sh_anc_create_err(d2, p2, SH_C_PARENT) || sh_wguard(d2, p2, h2, 0);
    if (!a && !b && o1 && o2)
        return 0;
    int t1, t2;
    if ((pe = parents_err(d1, p1, &t1, d2, p2, &t2)))
        return pe;
    /* two mounts (or a mount and a synthesized ancestor, the host's directory) are two file systems */
    if (a != b || (m1 && m2 && (l1.kind != l2.kind || (l1.kind == L_MNT && l1.m != l2.m))))
        return EXDEV;
    if (t1 != LAST_NORM_ || t2 != LAST_NORM_)
        return EBUSY;
    return a ? EROFS : 0; /* neither: the real call, on the paths the kernel reaches (RO2: kpath) */
#undef l1
#undef l2
}

/* A link the real call refused (KWALK_ERR e) whose spellings' walk may pass through the shim's view (a synthesized
 * ancestor named from its real parent): the kernel's order, the source's lookup, the destination's create, then
 * EXDEV (a source found only there is not on the destination's file system). */
static int link_real_err(int d1, const char *p1, int f1, int d2, const char *p2, int e)
{
    int pe = p1 && !p1[0] && (f1 & AT_EMPTY_PATH) ? 0 : src_look(d1, p1, f1);
    if (pe)
        return pe;
    int ce = kcreate_err(d2, p2, SH_C_NODE, 0);
    return ce ? ce : e == EROFS ? e : EXDEV;
}

/* A rename the real call refused (KWALK_ERR e) whose spellings' walk may pass through the shim's view: both
 * parents' walks, then (a parent the shim's or on a read-only mount) EXDEV when only one is, EBUSY for ".", ".."
 * or "/", EROFS (ro2_err's order); e when neither is. */
static int rename_real_err(int d1, const char *p1, int d2, const char *p2, int e)
{
    int t1, t2, pe;
    if ((pe = parents_err(d1, p1, &t1, d2, p2, &t2)))
        return pe;
    SH_SCRATCH(t);
    int a = parent_ro(d1, p1, 0, t) == EROFS, b = parent_ro(d2, p2, 0, t) == EROFS;
    if (!a && !b)
        return e;
    return a != b ? EXDEV : t1 != LAST_NORM_ || t2 != LAST_NORM_ ? EBUSY : EROFS;
}

#define RO2(D1, P1, H1, F1, D2, P2, H2, ISLINK, REALEXPR)                                                   \
    do {                                                                                                    \
        SH_LOC(l1_);                                                                                        \
        SH_LOC(l2_);                                                                                        \
        const char *p1_ = (P1), *p2_ = (P2); /* the caller's spellings (P1, P2 may become kpaths) */        \
        int e_ = errno, err_ = ro2_err(D1, P1, H1, F1, D2, P2, H2, ISLINK, &l1_, &l2_);                     \
        if (err_) {                                                                                         \
            errno = err_;                                                                                   \
            return -1;                                                                                      \
        }                                                                                                   \
        if (l1_.kpath) /* a ".." through an ancestor: where the kernel goes */                              \
            (P1) = l1_.kpath;                                                                               \
        if (l2_.kpath)                                                                                      \
            (P2) = l2_.kpath;                                                                               \
        errno = e_;                                                                                         \
        int r_ = (REALEXPR);                                                                                \
        if (r_ < 0 && sh_wguard_on && KWALK_ERR(errno))                                                     \
            errno = (ISLINK) ? link_real_err(D1, p1_, F1, D2, p2_, errno) : rename_real_err(D1, p1_, D2, p2_, errno); \
        return r_;                                                                                          \
    } while (0)

#define RO_FD(FD, REALEXPR)                                                                                 \
    do {                                                                                                    \
        struct stat st_;                                                                                    \
        if (fstat_ours(FD, &st_) || sh_wguard_fd(FD)) {                                                     \
            errno = EROFS;                                                                                  \
            return -1;                                                                                      \
        }                                                                                                   \
        return REALEXPR;                                                                                    \
    } while (0)

/* After a create outside the mounts failed (KWALK_ERR): the kernel's answer for the caller's spelling p0, whose walk
 * may pass through the shim's view (a synthesized ancestor: EEXIST for its name, EROFS below it), the real call's
 * errno otherwise (kcreate_err of a real spelling: the same walk, 0). rv is returned. */
static int create_real(int d, const char *p0, int kind, int rv)
{
    int re = errno;
    if (rv < 0 && sh_wguard_on && KWALK_ERR(re)) {
        int ke = kcreate_err(d, p0, kind, 0);
        errno = ke ? ke : re;
    }
    return rv;
}

/* A create: the real call unless the path is a mount's (the kernel's answer there: create_err) or the kernel
 * resolves it into one or into the cache (EROFS, or EEXIST from the real call for an entry there). */
#define RO_CREATE(DIRFD, P, REALEXPR) RO_CREATE_K(DIRFD, P, SH_C_NODE, REALEXPR)
/* GUARDED for a create: what the kernel says first there (kcreate_err of the spelling P0: the parent's walk,
 * EEXIST...), else EROFS */
#define GUARDED_C(DIRFD, P, P0, KIND, REALEXPR)                                                             \
    (sh_wguard((DIRFD), (P), SH_W_CREATE, 0) ? (errno = kcreate_err((DIRFD), (P0), (KIND), 1), -1) : (REALEXPR))
/* (the caller's spelling p0_ is the kernel's walk: P may become the kpath of a ".." through an ancestor, which
 * drops a last "." that the kernel resolves: "missing/." is ENOENT) */
#define RO_CREATE_K(DIRFD, P, KIND, REALEXPR)                                                               \
    do {                                                                                                    \
        const char *p0_ = (P);                                                                              \
        WITH_LOC(DIRFD, P, create_real(DIRFD, p0_, KIND, GUARDED_C(DIRFD, P, p0_, KIND, REALEXPR)), rv_ < 0, { \
            if (anc_real(&l_))                                                                              \
                return GUARDED_C(DIRFD, P, p0_, KIND, REALEXPR);                                            \
            (void)e_;                                                                                       \
            errno = kcreate_err(DIRFD, p0_, KIND, 1);                                                       \
            return -1;                                                                                      \
        });                                                                                                 \
    } while (0)

/* RO_CREATE_K whose real call is an *at call on DIRFD and P (lvalues): run on the descriptor the guard checked
 * (GUARDED_AT), refused with GUARDED_C's errno */
#define RO_CREATE_KP(DIRFD, P, KIND, REALEXPR)                                                              \
    do {                                                                                                    \
        const char *p0_ = (P);                                                                              \
        WITH_LOC(DIRFD, P, create_real(DIRFD, p0_, KIND,                                                   \
                                       GUARDED_AT(DIRFD, P, SH_W_CREATE, kcreate_err(DIRFD, p0_, KIND, 1), REALEXPR)), \
                 rv_ < 0, {                                                                                 \
            if (anc_real(&l_))                                                                              \
                return GUARDED_AT(DIRFD, P, SH_W_CREATE, kcreate_err(DIRFD, p0_, KIND, 1), REALEXPR);       \
            (void)e_;                                                                                       \
            errno = kcreate_err(DIRFD, p0_, KIND, 1);                                                       \
            return -1;                                                                                      \
        });                                                                                                 \
    } while (0)
#define RO_CREATE_P(DIRFD, P, REALEXPR) RO_CREATE_KP(DIRFD, P, SH_C_NODE, REALEXPR)

SH_EXPORT int mkdir(const char *p, mode_t m)
{
    int d = AT_FDCWD;
    RO_CREATE_KP(d, p, SH_C_DIR, REAL(mkdirat, int (*)(int, const char *, mode_t))(d, p, m));
}
SH_EXPORT int mkdirat(int d, const char *p, mode_t m)
{
    RO_CREATE_KP(d, p, SH_C_DIR, REAL(mkdirat, int (*)(int, const char *, mode_t))(d, p, m));
}
SH_EXPORT int rmdir(const char *p)
{
    int d = AT_FDCWD;
    RO1KP(d, p, RO_RMDIR, REAL(unlinkat, int (*)(int, const char *, int))(d, p, AT_REMOVEDIR));
}
SH_EXPORT int unlink(const char *p)
{
    int d = AT_FDCWD;
    RO1KP(d, p, RO_UNLINK, REAL(unlinkat, int (*)(int, const char *, int))(d, p, 0));
}
SH_EXPORT int unlinkat(int d, const char *p, int f)
{
    RO1KP(d, p, (f & AT_REMOVEDIR) ? RO_RMDIR : RO_UNLINK, REAL(unlinkat, int (*)(int, const char *, int))(d, p, f));
}
/* The utmp/wtmp writers open their file with glibc's own open, which the shim does not see (round 5 review: a name
 * checked, then opened again by glibc, was written in seven ways). glibc's x names stand for the plain ones when
 * they are not there (its TRANSFORM_UTMP_FILE_NAME). */
static const char *utmp_real_name(const char *f)
{
    int e = errno;
    if (!strcmp(f, _PATH_UTMP "x") && sh_r.access(_PATH_UTMP "x", F_OK) != 0)
        f = _PATH_UTMP;
    else if (!strcmp(f, _PATH_WTMP "x") && sh_r.access(_PATH_WTMP "x", F_OK) != 0)
        f = _PATH_WTMP;
    errno = e;
    return f;
}

/* A name glibc's own open of file would not find, or finds in the cache: the kernel's answer on a read-only mount
 * for an open with oflags (EROFS; ENOENT, EISDIR... for a mount's path, which glibc's open cannot see), else 0.
 * *pfd: the descriptor the kernel's own resolution gives, opened with oflags (O_PATH to look only), or -1. */
static int utmp_file_err(const char *file, int oflags, int *pfd)
{
    *pfd = -1; /* (round 5 review: a refusal left it unset, and the caller closed whatever number was there) */
    int e = errno;
    int fd = sh_r.openat(AT_FDCWD, file, oflags | O_CLOEXEC), oe = errno;
    if (fd >= 0 && sh_wguard_fd(fd)) {
        sh_r.close(fd);
        errno = e;
        return EROFS;
    }
    *pfd = fd;
    int err = 0;
    SH_LOC(l);
    if (fd < 0 && !sh_outside(AT_FDCWD, file) && sh_classify(AT_FDCWD, file, &l) != L_NONE) {
        int r = sh_open(&l, O_RDWR, 0); /* a write never opens there: the read-only tree's errno */
        if (r >= 0)
            sh_r.close(r); /* an ancestor that is the host's own directory: glibc's open answers */
        else
            err = -r;
    }
    errno = fd < 0 && !err ? oe : e; /* glibc's own open would answer the same */
    return err;
}

/* updwtmp: glibc's __libc_updwtmp, on the descriptor the guard checked (nothing resolves the name, or a descriptor
 * number, again): the record appended under a write lock, a torn tail cut back to a whole record first, a short
 * write undone. glibc waits up to 10 s for the lock (with alarm(), which a library must not take): polled here. */
static void utmp_append(const char *file, const void *ut)
{
    int fd, err = utmp_file_err(utmp_real_name(file), O_WRONLY, &fd);
    if (err || fd < 0) {
        if (err)
            errno = err;
        return; /* (fd < 0: the open's own errno) */
    }
    int e = errno;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += 10;
    int locked = 0;
    while (!(locked = sh_r.fcntl(fd, F_SETLK, &fl) == 0) && (errno == EAGAIN || errno == EACCES)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)) {
            errno = EINTR; /* glibc's answer when its alarm ends the wait */
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (locked) {
        off_t off = lseek(fd, 0, SEEK_END);
        if (off >= 0 && off % (off_t)sizeof(struct utmp)) {
            off -= off % (off_t)sizeof(struct utmp);
            (void)!ftruncate(fd, off); /* (glibc goes on when this fails) */
            if (lseek(fd, 0, SEEK_END) < 0)
                off = -1;
        }
        if (off >= 0 && write(fd, ut, sizeof(struct utmp)) != (ssize_t)sizeof(struct utmp) && ftruncate(fd, off) != 0)
            off = -1;
        fl.l_type = F_UNLCK;
        sh_r.fcntl(fd, F_SETLK, &fl);
        e = off >= 0 ? e : errno;
    } else {
        e = errno;
    }
    sh_r.close(fd);
    errno = e;
}
SH_EXPORT void updwtmp(const char *file, const struct utmp *ut)
{
    if (!sh_wguard_on || !file)
        REAL(updwtmp, void (*)(const char *, const struct utmp *))(file, ut);
    else
        utmp_append(file, ut);
}
SH_EXPORT void updwtmpx(const char *file, const struct utmpx *ut)
{
    if (!sh_wguard_on || !file)
        REAL(updwtmpx, void (*)(const char *, const struct utmpx *))(file, ut);
    else
        utmp_append(file, ut); /* (struct utmpx is struct utmp on Linux: glibc's updwtmpx is its updwtmp) */
}
/* logwtmp: glibc's, a record made here and appended by utmp_append (glibc's calls its own updwtmp) */
SH_EXPORT void logwtmp(const char *line, const char *name, const char *host)
{
    if (!sh_wguard_on) {
        REAL(logwtmp, void (*)(const char *, const char *, const char *))(line, name, host);
        return;
    }
    struct utmp ut;
    struct timeval tv;
    memset(&ut, 0, sizeof ut);
    ut.ut_pid = getpid();
    ut.ut_type = name[0] ? USER_PROCESS : DEAD_PROCESS;
    strncpy(ut.ut_line, line, sizeof ut.ut_line);
    strncpy(ut.ut_name, name, sizeof ut.ut_name);
    strncpy(ut.ut_host, host, sizeof ut.ut_host);
    gettimeofday(&tv, NULL);
    ut.ut_tv.tv_sec = (int32_t)tv.tv_sec;
    ut.ut_tv.tv_usec = (int32_t)tv.tv_usec;
    utmp_append(_PATH_WTMP, &ut);
}

/* utmpname names the file a later setutent, getutent or pututline opens (O_RDWR, else O_RDONLY): on a read-only
 * file system naming it and reading it work, and pututline's write gives EROFS. So the shim keeps the name (glibc
 * keeps its own copy, out of reach) and decides at the write on what the name reaches then, by the kernel's
 * resolution (a name given before it led into the cache: a relative name and a later chdir, /proc/self/fd/N with
 * N opened later, a symlink on disk at a mount's path). glibc opens the name again after that: a symlink flipped
 * in between, or another thread naming another file (glibc's utmp calls are not thread-safe, race:utent), is the
 * documented limit; no lock here, which a fork could leave held. A name the buffer cannot hold is glibc's
 * ENAMETOOLONG at its open. login and logout name _PATH_UTMP with glibc's own utmpname: the copy follows. */
static char utmp_name[PATH_MAX + 1];
static int utmp_name_long;
static int utmp_named(const char *file, int (*real)(const char *))
{
    int r = real(file);
    if (r == 0 && file) {
        size_t n = strnlen(file, PATH_MAX + 1);
        utmp_name_long = n > PATH_MAX;
        if (!utmp_name_long) {
            memcpy(utmp_name, file, n);
            utmp_name[n] = 0;
        }
    }
    return r;
}
SH_EXPORT int utmpname(const char *file)
{
    return utmp_named(file, REAL(utmpname, int (*)(const char *)));
}
SH_EXPORT int utmpxname(const char *file)
{
    return utmp_named(file, REAL(utmpxname, int (*)(const char *)));
}
static int utmp_put_err(const char *name)
{
    int fd, err = utmp_file_err(utmp_real_name(name), O_PATH, &fd);
    if (fd >= 0)
        sh_r.close(fd);
    return err;
}
static int utmp_put_refused(void)
{
    int err = !sh_wguard_on || utmp_name_long ? 0 : utmp_put_err(utmp_name[0] ? utmp_name : _PATH_UTMP);
    if (err)
        errno = err;
    return err != 0;
}
SH_EXPORT struct utmp *pututline(const struct utmp *ut)
{
    return utmp_put_refused() ? NULL : REAL(pututline, struct utmp *(*)(const struct utmp *))(ut);
}
SH_EXPORT struct utmpx *pututxline(const struct utmpx *ut)
{
    return utmp_put_refused() ? NULL : REAL(pututxline, struct utmpx *(*)(const struct utmpx *))(ut);
}
/* login writes _PATH_UTMP (pututline) and _PATH_WTMP (updwtmp), logout the first, with glibc's own calls: refused
 * whole (EROFS) when either file is in the cache; the shim's copy of the name is then glibc's default */
SH_EXPORT void login(const struct utmp *ut)
{
    int err = 0, fd = -1;
    if (sh_wguard_on && !(err = utmp_put_err(_PATH_UTMP)) && !(err = utmp_file_err(_PATH_WTMP, O_PATH, &fd)) && fd >= 0)
        sh_r.close(fd);
    if (err) {
        errno = err;
        return;
    }
    REAL(login, void (*)(const struct utmp *))(ut);
    utmp_name[0] = 0;
    utmp_name_long = 0;
}
SH_EXPORT int logout(const char *line)
{
    int err = sh_wguard_on ? utmp_put_err(_PATH_UTMP) : 0;
    if (err) {
        errno = err;
        return 0;
    }
    int r = REAL(logout, int (*)(const char *))(line);
    utmp_name[0] = 0;
    utmp_name_long = 0;
    return r;
}

/* glibc's remove calls its own unlink and rmdir (past the PLT): the shim's, in glibc's order */
SH_EXPORT int remove(const char *p)
{
    if (unlink(p) == 0)
        return 0;
    if (errno != EISDIR)
        return -1;
    return rmdir(p);
}
SH_EXPORT int rename(const char *a, const char *b)
{
    RO2(AT_FDCWD, a, SH_W_PARENT, 0, AT_FDCWD, b, SH_W_PARENT, 0, REAL(rename, int (*)(const char *, const char *))(a, b));
}
SH_EXPORT int renameat(int da, const char *a, int db, const char *b)
{
    RO2(da, a, SH_W_PARENT, 0, db, b, SH_W_PARENT, 0, REAL(renameat, int (*)(int, const char *, int, const char *))(da, a, db, b));
}
SH_EXPORT int renameat2(int da, const char *a, int db, const char *b, unsigned int f)
{
    RO2(da, a, SH_W_PARENT, 0, db, b, SH_W_PARENT, 0, REAL(renameat2, int (*)(int, const char *, int, const char *, unsigned))(da, a, db, b, f));
}
SH_EXPORT int link(const char *a, const char *b)
{
    RO2(AT_FDCWD, a, SH_W_NOFOLLOW, 0, AT_FDCWD, b, SH_W_CREATE, 1, REAL(link, int (*)(const char *, const char *))(a, b));
}
SH_EXPORT int linkat(int da, const char *a, int db, const char *b, int f)
{
    RO2(da, a, AT_HOW_LINK(f), f, db, b, SH_W_CREATE, 1, REAL(linkat, int (*)(int, const char *, int, const char *, int))(da, a, db, b, f));
}
SH_EXPORT int symlink(const char *t, const char *p)
{
    int d = AT_FDCWD;
    RO_CREATE_P(d, p, REAL(symlinkat, int (*)(const char *, int, const char *))(t, d, p));
}
SH_EXPORT int symlinkat(const char *t, int d, const char *p)
{
    RO_CREATE_P(d, p, REAL(symlinkat, int (*)(const char *, int, const char *))(t, d, p));
}
SH_EXPORT int truncate(const char *p, off_t n) { RO1K(AT_FDCWD, p, SH_W_FOLLOW, 0, RO_TRUNC, REAL(truncate, int (*)(const char *, off_t))(p, n)); }
SH_EXPORT int truncate64(const char *p, off64_t n)
{
    RO1K(AT_FDCWD, p, SH_W_FOLLOW, 0, RO_TRUNC, REAL(truncate64, int (*)(const char *, off64_t))(p, n));
}
SH_EXPORT int chmod(const char *p, mode_t m) { RO1(AT_FDCWD, p, SH_W_FOLLOW, 0, REAL(chmod, int (*)(const char *, mode_t))(p, m)); }
/* glibc's fchmodat(AT_SYMLINK_NOFOLLOW) and lchmod: a symlink's mode cannot be changed on Linux, EOPNOTSUPP once
 * the path resolved and before any write (so on a read-only file system too); the shim's view (a mount's symlink)
 * included. Out of line: its struct stat is not on the stack of the other writes. */
static __attribute__((noinline)) int chmod_link(int d, const char *p)
{
    struct stat st;
    if (!sh_nmounts || !p || !p[0] || look(d, p, 0, &st) || !S_ISLNK(st.st_mode))
        return 0;
    errno = EOPNOTSUPP;
    return 1;
}
SH_EXPORT int lchmod(const char *p, mode_t m)
{
    LAUNDER(p);
    if (chmod_link(AT_FDCWD, p))
        return -1;
    RO1(AT_FDCWD, p, SH_W_NOFOLLOW, 0, REAL(lchmod, int (*)(const char *, mode_t))(p, m));
}
SH_EXPORT int fchmodat(int d, const char *p, mode_t m, int f)
{
    LAUNDER(p);
    if ((f & AT_SYMLINK_NOFOLLOW) && chmod_link(d, p))
        return -1;
    RO1(d, p, AT_HOW(f), f, REAL(fchmodat, int (*)(int, const char *, mode_t, int))(d, p, m, f));
}
SH_EXPORT int chown(const char *p, uid_t u, gid_t g)
{
    RO1(AT_FDCWD, p, SH_W_FOLLOW, 0, REAL(chown, int (*)(const char *, uid_t, gid_t))(p, u, g));
}
SH_EXPORT int lchown(const char *p, uid_t u, gid_t g)
{
    RO1(AT_FDCWD, p, SH_W_NOFOLLOW, 0, REAL(lchown, int (*)(const char *, uid_t, gid_t))(p, u, g));
}
SH_EXPORT int fchownat(int d, const char *p, uid_t u, gid_t g, int f)
{
    RO1(d, p, AT_HOW(f), f, REAL(fchownat, int (*)(int, const char *, uid_t, gid_t, int))(d, p, u, g, f));
}
SH_EXPORT int utimensat(int d, const char *p, const struct timespec t[2], int f)
{
    LAUNDER(p);
    if (!p)
        RO_FD(d, REAL(utimensat, int (*)(int, const char *, const struct timespec *, int))(d, p, t, f));
    RO1(d, p, AT_HOW(f), f, REAL(utimensat, int (*)(int, const char *, const struct timespec *, int))(d, p, t, f));
}
SH_EXPORT int utimes(const char *p, const struct timeval t[2])
{
    RO1(AT_FDCWD, p, SH_W_FOLLOW, 0, REAL(utimes, int (*)(const char *, const struct timeval *))(p, t));
}
SH_EXPORT int lutimes(const char *p, const struct timeval t[2])
{
    RO1(AT_FDCWD, p, SH_W_NOFOLLOW, 0, REAL(lutimes, int (*)(const char *, const struct timeval *))(p, t));
}
SH_EXPORT int futimesat(int d, const char *p, const struct timeval t[2])
{
    RO1(d, p, SH_W_FOLLOW, 0, REAL(futimesat, int (*)(int, const char *, const struct timeval *))(d, p, t));
}
SH_EXPORT int utime(const char *p, const struct utimbuf *t)
{
    RO1(AT_FDCWD, p, SH_W_FOLLOW, 0, REAL(utime, int (*)(const char *, const struct utimbuf *))(p, t));
}
SH_EXPORT int mknod(const char *p, mode_t m, dev_t dv)
{
    int d = AT_FDCWD;
    RO_CREATE_P(d, p, REAL(mknodat, int (*)(int, const char *, mode_t, dev_t))(d, p, m, dv));
}
SH_EXPORT int mknodat(int d, const char *p, mode_t m, dev_t dv)
{
    RO_CREATE_P(d, p, REAL(mknodat, int (*)(int, const char *, mode_t, dev_t))(d, p, m, dv));
}
SH_EXPORT int __xmknod(int v, const char *p, mode_t m, dev_t *dv)
{
    int d = AT_FDCWD;
    RO_CREATE_P(d, p, REAL(__xmknodat, int (*)(int, int, const char *, mode_t, dev_t *))(v, d, p, m, dv));
}
SH_EXPORT int __xmknodat(int v, int d, const char *p, mode_t m, dev_t *dv)
{
    RO_CREATE_P(d, p, REAL(__xmknodat, int (*)(int, int, const char *, mode_t, dev_t *))(v, d, p, m, dv));
}
/* glibc's mkfifo, mkstemp and mkdtemp, and the kernel's bind of a unix socket, create through internal calls
 * the shim does not see: each is guarded here as a create of its path. */
SH_EXPORT int mkfifo(const char *p, mode_t m)
{
    int d = AT_FDCWD;
    RO_CREATE_P(d, p, REAL(mkfifoat, int (*)(int, const char *, mode_t))(d, p, m));
}
SH_EXPORT int mkfifoat(int d, const char *p, mode_t m)
{
    RO_CREATE_P(d, p, REAL(mkfifoat, int (*)(int, const char *, mode_t))(d, p, m));
}

/* mkstemp's template: 1 when it is one glibc accepts (six X before a suffix of sl bytes); otherwise the real call
 * answers EINVAL */
static int tmpl_ok(const char *p, int sl)
{
    size_t n = p ? strlen(p) : 0;
    return sl >= 0 && n >= (size_t)sl + 6 && !memcmp(p + n - (size_t)sl - 6, "XXXXXX", 6);
}
/* A create whose real call does not take the spelling the guard checks (a template filled in place, a socket's
 * address): RO_CREATE may repoint the guard's copy at the logical tree (a ".." through a mount, a name below a
 * synthesized ancestor), but the kernel resolves the caller's own spelling from the real cwd, which may be a
 * skeleton directory in the cache: that spelling is guarded too. */
#define RO_OWN(P)                                                                                           \
    do {                                                                                                    \
        if (!sh_outside(AT_FDCWD, (P)) && sh_wguard(AT_FDCWD, (P), SH_W_CREATE, 0)) {                       \
            errno = kcreate_err(AT_FDCWD, (P), SH_C_NODE, 1); /* a last "." or "..": EEXIST, as the kernel */ \
            return -1;                                                                                      \
        }                                                                                                   \
    } while (0)
#define RO_TEMP(P, SL, REALEXPR)                                                                            \
    do {                                                                                                    \
        if (!tmpl_ok((P), (SL)))                                                                            \
            return REALEXPR;                                                                                \
        RO_OWN(P);                                                                                          \
        const char *tp_ = (P);   /* the guard's copy: REALEXPR fills in the caller's own template */       \
        RO_CREATE(AT_FDCWD, tp_, REALEXPR);                                                                 \
    } while (0)
SH_EXPORT int mkstemp(char *p) { RO_TEMP(p, 0, REAL(mkstemp, int (*)(char *))(p)); }
SH_EXPORT int mkstemp64(char *p) { RO_TEMP(p, 0, REAL(mkstemp64, int (*)(char *))(p)); }
SH_EXPORT int mkostemp(char *p, int f) { RO_TEMP(p, 0, REAL(mkostemp, int (*)(char *, int))(p, f)); }
SH_EXPORT int mkostemp64(char *p, int f) { RO_TEMP(p, 0, REAL(mkostemp64, int (*)(char *, int))(p, f)); }
SH_EXPORT int mkstemps(char *p, int sl) { RO_TEMP(p, sl, REAL(mkstemps, int (*)(char *, int))(p, sl)); }
SH_EXPORT int mkstemps64(char *p, int sl) { RO_TEMP(p, sl, REAL(mkstemps64, int (*)(char *, int))(p, sl)); }
SH_EXPORT int mkostemps(char *p, int sl, int f)
{
    RO_TEMP(p, sl, REAL(mkostemps, int (*)(char *, int, int))(p, sl, f));
}
SH_EXPORT int mkostemps64(char *p, int sl, int f)
{
    RO_TEMP(p, sl, REAL(mkostemps64, int (*)(char *, int, int))(p, sl, f));
}
static int mkdtemp_int(char *p)
{
    char *(*real)(char *) = REAL(mkdtemp, char *(*)(char *));
    if (!tmpl_ok(p, 0))
        return real(p) ? 0 : -1;
    const char *tp = p;   /* the guard's copy: real() fills in the caller's own template */
    RO_OWN(p);
    RO_CREATE_K(AT_FDCWD, tp, SH_C_DIR, real(p) ? 0 : -1);
}
SH_EXPORT char *mkdtemp(char *p) { return mkdtemp_int(p) == 0 ? p : NULL; }

/* bind of a unix socket to a path creates it: the kernel's answers on a read-only file system (EADDRINUSE for a
 * name that is there). Abstract names and other families are the kernel's. */
static int bind_path(int fd, const char *p, const struct sockaddr *a, socklen_t n)
{
    RO_OWN(p);
    RO_CREATE(AT_FDCWD, p, REAL(bind, int (*)(int, const struct sockaddr *, socklen_t))(fd, a, n));
}
SH_EXPORT int bind(int fd, const struct sockaddr *a, socklen_t n)
{
    int (*real)(int, const struct sockaddr *, socklen_t) = REAL(bind, int (*)(int, const struct sockaddr *, socklen_t));
    const size_t off = offsetof(struct sockaddr_un, sun_path);
    if (!sh_nmounts || !a || n <= off || a->sa_family != AF_UNIX || !((const char *)a)[off])
        return real(fd, a, n);
    char p[sizeof(struct sockaddr_un) - offsetof(struct sockaddr_un, sun_path) + 1];
    size_t k = (size_t)n - off < sizeof p - 1 ? (size_t)n - off : sizeof p - 1;
    memcpy(p, (const char *)a + off, k);
    p[k] = 0;
    int rc = bind_path(fd, p, a, n);
    if (rc < 0 && errno == EEXIST)
        errno = EADDRINUSE;
    return rc;
}

SH_EXPORT int setxattr(const char *p, const char *n, const void *v, size_t s, int f)
{
    RO1(AT_FDCWD, p, SH_W_FOLLOW, 0, REAL(setxattr, int (*)(const char *, const char *, const void *, size_t, int))(p, n, v, s, f));
}
SH_EXPORT int lsetxattr(const char *p, const char *n, const void *v, size_t s, int f)
{
    RO1(AT_FDCWD, p, SH_W_NOFOLLOW, 0, REAL(lsetxattr, int (*)(const char *, const char *, const void *, size_t, int))(p, n, v, s, f));
}
SH_EXPORT int removexattr(const char *p, const char *n)
{
    RO1(AT_FDCWD, p, SH_W_FOLLOW, 0, REAL(removexattr, int (*)(const char *, const char *))(p, n));
}
SH_EXPORT int lremovexattr(const char *p, const char *n)
{
    RO1(AT_FDCWD, p, SH_W_NOFOLLOW, 0, REAL(lremovexattr, int (*)(const char *, const char *))(p, n));
}
SH_EXPORT int fsetxattr(int fd, const char *n, const void *v, size_t s, int f)
{
    RO_FD(fd, REAL(fsetxattr, int (*)(int, const char *, const void *, size_t, int))(fd, n, v, s, f));
}
SH_EXPORT int fremovexattr(int fd, const char *n)
{
    RO_FD(fd, REAL(fremovexattr, int (*)(int, const char *))(fd, n));
}
SH_EXPORT int fchmod(int fd, mode_t m) { RO_FD(fd, REAL(fchmod, int (*)(int, mode_t))(fd, m)); }
SH_EXPORT int fchown(int fd, uid_t u, gid_t g) { RO_FD(fd, REAL(fchown, int (*)(int, uid_t, gid_t))(fd, u, g)); }
SH_EXPORT int futimens(int fd, const struct timespec t[2])
{
    RO_FD(fd, REAL(futimens, int (*)(int, const struct timespec *))(fd, t));
}
SH_EXPORT int futimes(int fd, const struct timeval t[2])
{
    RO_FD(fd, REAL(futimes, int (*)(int, const struct timeval *))(fd, t));
}

/* --- descriptors: keep the table of what the shim returned ---------------------------------------------- */

SH_EXPORT int close(int fd)
{
    int (*real)(int) = REAL(close, int (*)(int));
    sh_fd_forget(fd);
    return real(fd);
}

SH_EXPORT int dup(int fd)
{
    int r = REAL(dup, int (*)(int))(fd);
    if (r >= 0)
        sh_fd_dup(fd, r);
    return r;
}

SH_EXPORT int dup2(int a, int b)
{
    int r = REAL(dup2, int (*)(int, int))(a, b);
    if (r >= 0 && a != b)
        sh_fd_dup(a, b);
    return r;
}

SH_EXPORT int dup3(int a, int b, int f)
{
    int r = REAL(dup3, int (*)(int, int, int))(a, b, f);
    if (r >= 0)
        sh_fd_dup(a, b);
    return r;
}

SH_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    int r = REAL(fcntl, int (*)(int, int, ...))(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        sh_fd_dup(fd, r);
    return r;
}

SH_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    int r = REAL(fcntl64, int (*)(int, int, ...))(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        sh_fd_dup(fd, r);
    return r;
}
