/* sysc.c - syscall(): the opens a program makes through libc's syscall() are answered as the interposed openat
 * answers them. onnx 1.23's onnx.load opens a model's external data with a raw openat2(dirfd, "x.onnx.data",
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) (glibc has no openat2 wrapper): in a mount the kernel finds only the
 * cache's skeleton (ENOENT). Here SYS_openat2 on a path in the mounts is walked as the kernel walks it under its
 * resolve flags (EXDEV out of dirfd, ELOOP at a symlink), then opened by the shim; SYS_openat and SYS_open are
 * openat's. Every other number, and every path outside the mounts, goes to libc's syscall() as it is (a write
 * open there is put to the write guard first). The shim's own raw calls use sh_libc_syscall (shim.h). */
#include "shim.h"
#undef syscall

#include <linux/openat2.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef long (*syscall_fn)(long, ...);

static syscall_fn sc_real(void)
{
    return REAL(syscall, syscall_fn);
}

/* resolved before main: a vfork child's first raw call must not run dlsym */
__attribute__((constructor)) static void sc_prime(void)
{
    (void)sc_real();
}

#define SC_ARGS(ap, a)                                                                                      \
    do {                                                                                                    \
        for (int i_ = 0; i_ < 6; i_++)                                                                      \
            (a)[i_] = va_arg((ap), long);                                                                   \
    } while (0)

/* Six arguments are read whatever the caller passed, as glibc's syscall() reads six registers: past what a caller
 * passed, that is a read of its frame, which ASan would report (no_sanitize_address). */
__attribute__((no_sanitize_address)) long sh_libc_syscall(long n, ...)
{
    long a[6];
    va_list ap;
    va_start(ap, n);
    SC_ARGS(ap, a);
    va_end(ap);
    return sc_real()(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

#define RES_KNOWN (RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_IN_ROOT | \
                   RESOLVE_CACHED)

/* lstat of path from dirfd in the shim's view: 0, or -errno */
static int sc_lstat(int dirfd, const char *path, struct stat *st)
{
    SH_LOC(l);
    if (sh_classify(dirfd, path, &l) != L_NONE)
        return sh_stat(&l, 0, st);
    return sh_r.fstatat(dirfd, l.kpath ? l.kpath : path, st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

/* readlink of path from dirfd in the shim's view, terminated: its length, or -errno */
static ssize_t sc_readlink(int dirfd, const char *path, char *buf, size_t n)
{
    SH_LOC(l);
    ssize_t k;
    if (sh_classify(dirfd, path, &l) != L_NONE)
        k = sh_readlink(&l, buf, n - 1);
    else
        k = (k = readlinkat(dirfd, path, buf, n - 1)) < 0 ? -errno : k;
    if (k >= 0 && (size_t)k >= n - 1)
        return -ENAMETOOLONG;
    if (k >= 0)
        buf[k] = 0;
    return k;
}

/* The kernel's walk of path from dirfd under the resolve flags res, in the shim's view: into out (SH_SCR) the path
 * with every symlink but a last one not followed (O_NOFOLLOW) replaced by its target, relative to dirfd (absolute
 * when the spelling was, without RESOLVE_IN_ROOT); 0, or -errno (EXDEV: out of dirfd; ELOOP: a symlink refused). */
static int sc_walk(int dirfd, const char *path, uint64_t flags, uint64_t res, char *out, struct sh_scratch *t)
{
    char *rem = t->a, *tgt = t->b, *tmp = t->c;
    int beneath = (res & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) != 0, hops = 0;
    size_t ol = 0, root = 0;
    if (path[0] == '/') {
        if (res & RESOLVE_BENEATH)
            return -EXDEV;
        if (!(res & RESOLVE_IN_ROOT))
            out[ol++] = '/', root = 1;
    }
    out[ol] = 0;
    if (strlen(path) >= SH_SCR)
        return -ENAMETOOLONG;
    strcpy(rem, path);
    const char *p = rem, *s;
    size_t n;
    while ((n = sh_next_comp(&p, &s))) {
        int dot = sh_dot_comp(s, n);
        if (dot == 1)
            continue;
        if (dot == 2) {
            if (ol == root) {
                if (res & RESOLVE_BENEATH)
                    return -EXDEV;   /* a ".." above dirfd */
                continue;            /* at the root: IN_ROOT's root, or "/" */
            }
            while (ol > root && out[ol - 1] != '/')
                ol--;
            if (ol > root)
                ol--;
            out[ol] = 0;
            continue;
        }
        size_t at = ol;
        if (ol + 1 + n + 1 > SH_SCR)
            return -ENAMETOOLONG;
        if (ol > root)
            out[ol++] = '/';
        memcpy(out + ol, s, n);
        ol += n;
        out[ol] = 0;
        int last = !*p || !p[strspn(p, "/")];
        if (last && (flags & O_NOFOLLOW) && (!(res & RESOLVE_NO_SYMLINKS) || (flags & O_PATH)))
            break;   /* the link itself is opened (O_PATH) or refused by the open (ELOOP) */
        struct stat st;
        int rc = sc_lstat(dirfd, ol ? out : ".", &st);
        if (rc < 0)
            return last ? 0 : rc;   /* a missing last component is the open's (O_CREAT) */
        if (!S_ISLNK(st.st_mode))
            continue;
        if (res & RESOLVE_NO_SYMLINKS)
            return -ELOOP;
        if (++hops > SH_MAX_HOPS)
            return -ELOOP;
        ssize_t k = sc_readlink(dirfd, out, tgt, SH_SCR);
        if (k < 0)
            return (int)k;
        if (tgt[0] == '/') {
            if (!beneath) {
                ol = 0;
                out[ol++] = '/';
                root = 1;
            } else if (res & RESOLVE_BENEATH) {
                return -EXDEV;
            } else {
                ol = root;   /* IN_ROOT: an absolute target starts from dirfd */
            }
        } else {
            ol = at;   /* the link's component is replaced by its target */
        }
        out[ol] = 0;
        if ((size_t)snprintf(tmp, SH_SCR, "%s%s", tgt, p) >= SH_SCR)
            return -ENAMETOOLONG;
        strcpy(rem, tmp);
        p = rem;
    }
    if (!ol)
        strcpy(out, ".");
    return 0;
}

/* SYS_openat2: the shim's answer when the spelling is in the mounts, else the real call (-2: ask the kernel) */
static long sc_openat2(int dirfd, const char *path, const struct open_how *how, size_t size)
{
    if (!path || !how || size < sizeof(struct open_how))
        return -2;
    struct open_how h = *how;
    if ((h.flags >> 32) || (h.resolve & ~(uint64_t)RES_KNOWN) ||
        (h.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) == (RESOLVE_BENEATH | RESOLVE_IN_ROOT) ||
        (h.mode && !(h.flags & (O_CREAT | __O_TMPFILE))) || (h.mode & ~(uint64_t)07777))
        return -2;   /* the kernel's EINVAL */
    if (sh_outside(dirfd, path))
        return -2;
    int e = errno, in = 0, beneath = (h.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) != 0;
    SH_SCRATCH(t);
    char *out = t->d, *base = t->c;
    {
        /* the spelling lands in the mounts' tree, or starts from a directory there (a ".." under RESOLVE_IN_ROOT
         * stays in it, whatever the spelling says) */
        SH_LOC(l);
        in = sh_classify(dirfd, path, &l) != L_NONE;
        if (path[0] != '/' && (in || beneath)) {
            SH_LOC(b);
            if (dirfd == AT_FDCWD ? sh_classify(AT_FDCWD, ".", &b) != L_NONE : sh_fd_dirloc(dirfd, &b))
                in = 1, beneath = beneath && strlen(b.path) < SH_SCR;
            if (in && !beneath) {
                /* a relative spelling climbs from the directory's logical path */
                if (dirfd == AT_FDCWD ? !getcwd(base, SH_SCR) : b.kind == L_NONE || strlen(b.path) >= SH_SCR)
                    in = 0;
                else if (dirfd != AT_FDCWD)
                    strcpy(base, b.path);
            }
        }
    }
    if (!in) {
        errno = e;
        return -2;
    }
    if (path[0] == '/' && (h.resolve & (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)) &&
        (!strncmp(path, "/proc/", 6) || !strncmp(path, "/dev/", 5)))
        return -2;   /* through a magic link: the kernel's ELOOP */
    const char *p = path;
    if (path[0] != '/' && !beneath) {
        size_t bl = strlen(base);
        if (bl + 1 + strlen(path) + 1 > SH_SCR) {
            errno = ENAMETOOLONG;
            return -1;
        }
        base[bl] = '/';
        strcpy(base + bl + 1, path);
        p = base;
    }
    int rc = sc_walk(dirfd, p, h.flags, h.resolve, out, t);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    errno = e;
    return sh_openat_ours(out[0] == '/' ? AT_FDCWD : dirfd, out, (int)h.flags, (mode_t)h.mode);
}

__attribute__((no_sanitize_address)) SH_EXPORT long syscall(long n, ...)
{
    long a[6];
    va_list ap;
    va_start(ap, n);
    SC_ARGS(ap, a);
    va_end(ap);
    if (__builtin_expect(!sh_nmounts, 1) || (n != SYS_openat2 && n != SYS_openat && n != SYS_open))
        return sc_real()(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (n == SYS_open)
        return sh_openat_ours(AT_FDCWD, (const char *)a[0], (int)a[1], (mode_t)a[2]);
    if (n == SYS_openat)
        return sh_openat_ours((int)a[0], (const char *)a[1], (int)a[2], (mode_t)a[3]);
    long r = sc_openat2((int)a[0], (const char *)a[1], (const struct open_how *)a[2], (size_t)a[3]);
    if (r != -2)
        return r;
    const struct open_how *how = (const struct open_how *)a[2];
    if (sh_wguard_on && how && (size_t)a[3] >= sizeof *how && (how->flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) &&
        sh_wguard_slow((int)a[0], (const char *)a[1], SH_W_OPEN, (int)how->flags)) {
        errno = EROFS;   /* a write into the cache, spelled outside the mounts */
        return -1;
    }
    r = sc_real()(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (r >= 0)
        sh_fd_forget((int)r);
    return r;
}
