/* sysc.c - syscall(): the opens a program makes through libc's syscall() are answered as the interposed openat
 * answers them. onnx 1.23's onnx.load opens a model's external data with a raw openat2(dirfd, "x.onnx.data",
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) (glibc has no openat2 wrapper): in a mount the kernel finds only the
 * cache's skeleton (ENOENT). Here SYS_openat2 on a path in the mounts is walked as the kernel walks it under its
 * resolve flags (EXDEV out of dirfd, ELOOP at a symlink), then opened by the shim; SYS_openat and SYS_open are
 * openat's. Every other number, and every path outside the mounts, goes to libc's syscall() as it is (a write
 * open there is put to the write guard first). The shim's own raw calls use sh_libc_syscall (shim.h). */
#define SH_SYSC_C 1
#include "shim.h"
#undef syscall

#include <linux/openat2.h>
#include <stdint.h>
#include <sys/syscall.h>

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

/* syscall() and sh_libc_syscall() take their six arguments as named ones: a variadic caller passes integers where a
 * fixed-argument function reads them (the registers, then the caller's stack, on x86-64 and aarch64), and the
 * sixth is read whatever the caller passed, as glibc's own syscall() reads six registers. No va_list: a variadic
 * function's register save area would cost 200 bytes of the host's stack on every chain through it (make stack).
 * Neither unistd.h's variadic declaration is seen here (not included; sh_libc_syscall's C name differs). */
char *getcwd(char *buf, size_t size);   /* the interposed one (wrap.c): a mount's logical path */
__attribute__((visibility("hidden"))) long sc_libc_entry(long n, long a0, long a1, long a2, long a3, long a4,
                                                         long a5) __asm__("sh_libc_syscall");
long sc_libc_entry(long n, long a0, long a1, long a2, long a3, long a4, long a5)
{
    return sc_real()(n, a0, a1, a2, a3, a4, a5);
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
        k = (k = REAL(readlinkat, ssize_t (*)(int, const char *, char *, size_t))(dirfd, path, buf, n - 1)) < 0 ? -errno : k;
    if (k >= 0 && (size_t)k >= n - 1)
        return -ENAMETOOLONG;
    if (k >= 0)
        buf[k] = 0;
    return k;
}

/* The kernel's walk of path from dirfd under the resolve flags res, in the shim's view: into out (SH_SCR) the path
 * with every symlink but a last one not followed (O_NOFOLLOW) replaced by its target, relative to dirfd (absolute
 * when the spelling was, without RESOLVE_IN_ROOT); 0, or -errno (EXDEV: out of dirfd; ELOOP: a symlink refused). */
static int sc_walk(int dirfd, const char *path, uint64_t flags, uint64_t res, const char *pre, char *out,
                   struct sh_scratch *t)
{
    char *rem = t->a, *tgt = t->b, *tmp = t->c;
    int beneath = (res & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) != 0, hops = 0;
    size_t ol = 0, root = 0;
    if (pre) {
        /* dirfd outside the mounts (an ancestor of one), scoped: the walk is of absolute paths below its own */
        ol = strlen(pre);
        if (ol + 2 > SH_SCR)
            return -ENAMETOOLONG;
        memmove(out, pre, ol);
        if (out[ol - 1] != '/')
            out[ol++] = '/';
        root = ol;
        out[ol] = 0;
    }
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

/* a directory descriptor outside the mounts (/proc/self, whose fd/N leads into them): its path into buf (SH_SCR);
 * 0 when it has none the walk can climb from */
static int sc_fd_path(int fd, char *buf)
{
    char pp[32];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, buf, SH_SCR - 1);
    if (k <= 0 || buf[0] != '/')
        return 0;
    buf[k] = 0;
    return 1;
}

/* SYS_openat2: the shim's answer when the spelling is in the mounts, else the real call (-2: ask the kernel) */
static __attribute__((noinline)) long sc_openat2(int dirfd, const char *path, const struct open_how *how, size_t size,
                                                  struct sh_scratch *t, int *go_fd)
{
    if (!path || !how || size < sizeof(struct open_how))
        return -2;
    /* the kernel checks how (its size, E2BIG for non-zero bytes past the fields it knows or a size over a page,
     * EINVAL for a flag or a mode it does not take, EAGAIN for RESOLVE_CACHED with a create, EFAULT) before it
     * reads the path: asked with an empty path, it answers those, else ENOENT, with nothing opened */
    int e = errno;
    if (sc_real()(SYS_openat2, (long)AT_FDCWD, (long)"", (long)how, (long)size, 0L, 0L) < 0 && errno != ENOENT) {
        if (errno != ENOSYS)
            return -1;
    }
    errno = e;
    struct open_how h = *how;
    if ((h.flags >> 32) || (h.resolve & ~(uint64_t)RES_KNOWN) ||
        (h.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) == (RESOLVE_BENEATH | RESOLVE_IN_ROOT) ||
        (h.mode && !(h.flags & (O_CREAT | __O_TMPFILE))) || (h.mode & ~(uint64_t)07777))
        return -2;   /* the kernel's EINVAL */
    if ((h.resolve & RESOLVE_IN_ROOT) && path[0] == '/') {
        path += strspn(path, "/");   /* an absolute spelling starts from dirfd, as a relative one does */
        if (!*path)
            path = ".";
    }
    if (sh_outside(dirfd, path))
        return -2;
    int in = 0, viafd = 0, beneath = (h.resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) != 0;
    char *out = t->d, *base = t->c;
    {
        /* the spelling lands in the mounts' tree, or starts from a directory there (a ".." under RESOLVE_IN_ROOT
         * stays in it, whatever the spelling says) */
        SH_LOC(l);
        in = sh_classify(dirfd, path, &l) != L_NONE;
        if (!in && path[0] != '/' && dirfd != AT_FDCWD && sc_fd_path(dirfd, base) &&
            (size_t)snprintf(out, SH_SCR, "%s/%s", base, path) < SH_SCR) {
            /* from a directory outside the mounts: an ancestor's "mnt/x", or /proc/self's "fd/N/x" through its
             * magic link */
            SH_LOC(v);
            viafd = in = sh_classify(AT_FDCWD, out, &v) != L_NONE;
            viafd += in && (!strncmp(base, "/proc/", 6) || !strncmp(base, "/dev/", 5));
        }
        if (path[0] != '/' && (in || beneath) && !viafd) {
            SH_LOC(b);
            if (dirfd == AT_FDCWD ? sh_classify(AT_FDCWD, ".", &b) != L_NONE : sh_fd_dirloc(dirfd, &b))
                in = 1, beneath = beneath && strlen(b.path) < SH_SCR;
            if (in && !beneath) {
                /* a relative spelling climbs from the directory's logical path */
                if (dirfd == AT_FDCWD ? !getcwd(base, SH_SCR) : b.kind == L_NONE ? !sc_fd_path(dirfd, base)
                                                                                  : strlen(b.path) >= SH_SCR)
                    in = 0;
                else if (dirfd != AT_FDCWD && b.kind != L_NONE)
                    strcpy(base, b.path);
            }
        }
    }
    if (!in) {
        errno = e;
        return -2;
    }
    if (viafd == 2 && beneath)
        return -2;   /* a magic link in a scoped walk: the kernel's EXDEV */
    if ((h.resolve & (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)) &&
        (viafd == 2 || (path[0] == '/' && (!strncmp(path, "/proc/", 6) || !strncmp(path, "/dev/", 5)))))
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
    int rc = sc_walk(dirfd, p, h.flags, h.resolve, viafd && beneath ? base : NULL, out, t);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    errno = e;
    *go_fd = out[0] == '/' ? AT_FDCWD : dirfd;
    return 1;   /* the caller opens t->d (out of this frame: make stack) */
}

/* a raw openat2 outside the mounts, with write flags: put to the write guard, then the kernel's */
static __attribute__((noinline)) long sc_openat2_out(long a0, long a1, long a2, long a3)
{
    const struct open_how *how = (const struct open_how *)a2;
    if (sh_wguard_on && how && (size_t)a3 >= sizeof *how && (how->flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) &&
        sh_wguard_slow((int)a0, (const char *)a1, SH_W_OPEN, (int)how->flags)) {
        errno = EROFS;   /* a write into the cache, spelled outside the mounts */
        return -1;
    }
    long r = sc_real()(SYS_openat2, a0, a1, a2, a3, 0L, 0L);
    if (r >= 0)
        sh_fd_forget((int)r);
    return r;
}

SH_EXPORT long syscall(long n, long a0, long a1, long a2, long a3, long a4, long a5)
{
    if (__builtin_expect(!sh_nmounts, 1) || (n != SYS_openat2 && n != SYS_openat && n != SYS_open))
        return sc_real()(n, a0, a1, a2, a3, a4, a5);
    if (n == SYS_open)
        return sh_openat_ours(AT_FDCWD, (const char *)a0, (int)a1, (mode_t)a2);
    if (n == SYS_openat)
        return sh_openat_ours((int)a0, (const char *)a1, (int)a2, (mode_t)a3);
    SH_SCRATCH(t);
    int fd = AT_FDCWD;
    long r = sc_openat2((int)a0, (const char *)a1, (const struct open_how *)a2, (size_t)a3, t, &fd);
    if (r == 1)
        return sh_openat_ours(fd, t->d, (int)((const struct open_how *)a2)->flags,
                              (mode_t)((const struct open_how *)a2)->mode);
    return r != -2 ? r : sc_openat2_out(a0, a1, a2, a3);
}
