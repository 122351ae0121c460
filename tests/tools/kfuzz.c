/* kfuzz.c - a seeded random differential fuzz of path calls (issue 22): one line per call, run once through the
 * shim over its mounts and once over a read-only copy of the same trees at the same paths (t_shim_kfuzz.sh); the
 * two transcripts must be equal. Usage:
 *   kfuzz SEED COUNT ROOT
 * ROOT (absolute) holds models/flat (the flat fixture) and models/lt (the links tree of t_shim_kernel.sh); its
 * parent is a read-only directory the paths may climb to, never above it. Every call family the shim wraps is
 * drawn: stat/lstat/fstatat/statx/__xstat, access/faccessat, readlink(at), realpath, open(at) in read modes with
 * a read of the file, fopen, opendir/readdir, scandir(at), fdopendir, chdir/fchdir/getcwd, xattrs, statfs/statvfs,
 * fstat/fstatat(AT_EMPTY_PATH) of the descriptors it holds, dup, and the write calls (mkdir, rmdir, unlink,
 * rename, link, symlink, chmod, chown, utimes, truncate, mknod, xattrs, open/fopen for writing, fchmod; beside
 * them, with no draw of their own, remove, renameat2, bind of a unix socket, lchmod, lchown, futimesat, utimes,
 * lutimes, utime, truncate64, mkfifoat, mknod, mkfifo, lsetxattr, lremovexattr, open64, creat64, fopen64,
 * freopen, freopen64), and
 * beside some of them the same path as a posix_spawn file action (a read open, a write open) and, from a held
 * descriptor N, as /proc/self/fd/N/PATH (mkdir, a write open), ok or err only (issue 33). Paths
 * are made of the trees' names, "." and "..", missing and 256-byte names, empty components, absolute or relative
 * to the cwd or to a held directory descriptor (a call that takes none: to the cwd), and now and then padded with
 * "./" past PATH_MAX. A write line says its errno, the kernel's on a read-only tree: it resolves the path first
 * (ENOENT, ENOTDIR, ENAMETOOLONG, EEXIST for a create's last ".", EISDIR...), then says EROFS
 * (KFUZZ_WRITE_ERRNO=0: ok or err only). Directory sizes, st_dev, st_ino and times
 * are not compared (the shim's are its own); types, permissions, file and link sizes and contents are. Paths
 * over 200 bytes are shown by their length (KFUZZ_FULL=1: in full). A descriptor an open returns is shown by its
 * number (the kernel's: the lowest free). KFUZZ_STORM=1: SIGALRM every 200 us and SIGCHLD, handlers without
 * SA_RESTART, all along (issue 41). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <utime.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static uint64_t rs;
static unsigned rnd(unsigned n)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (unsigned)(rs % n);
}

static const char *root;
static int root_depth;       /* components in ROOT */
static int werrno;           /* 1 (default): a write's errno; 0 (KFUZZ_WRITE_ERRNO=0): ok or err */
static char longname[300];

/* held directory descriptors and the lexical depth (below ROOT's parent) of what they name */
#define NFD 4
static int fds[NFD] = {-1, -1, -1, -1};
static int fd_depth[NFD];
static int cwd_depth;

static const char *names[] = {"models", "flat", "lt", "a.txt", "same.txt", "empty", "dir", "deeper", "c.txt",
                              "b.bin", "link-to-a", "dirlink", "up", "a", "b", "c", "f.txt", "x.txt", "lnk",
                              "deep", "missing", "top", ".", "..", "..", "..", "", NULL /* longname */};
#define NNAMES (sizeof names / sizeof names[0])

static const char *ename(int e)
{
    const char *n = strerrorname_np(e);
    return n ? n : "E?";
}

/* A random path into buf; *dirfd: AT_FDCWD or a held descriptor. The lexical depth never goes above ROOT's
 * parent (-1 below ROOT): every link of the trees points down or sideways, so the kernel's stays as low too. */
static void gen(char *buf, size_t n, int *dirfd)
{
    int depth, rel = rnd(3);
    size_t o = 0;
    *dirfd = AT_FDCWD;
    if (rel == 0) {
        o = (size_t)snprintf(buf, n, "%s", root);
        depth = 0;
    } else if (rel == 1) {
        depth = cwd_depth;
        buf[0] = 0;
    } else {
        int k = (int)rnd(NFD);
        if (fds[k] < 0) {
            o = (size_t)snprintf(buf, n, "%s", root);
            depth = 0;
        } else {
            *dirfd = fds[k];
            depth = fd_depth[k];
            buf[0] = 0;
        }
    }
    /* most paths begin in the trees */
    int comps = 1 + (int)rnd(6);
    if (rnd(3)) {
        const char *start = rnd(2) ? "models/flat" : "models/lt";
        if (depth == 0) {
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "/" : "", start);
            depth = 2;
        }
    }
    for (int i = 0; i < comps; i++) {
        const char *c = names[rnd(NNAMES)];
        if (!c)
            c = longname;
        int dd = !strcmp(c, "..");
        if (dd && depth - 1 < -1)
            c = ".", dd = 0;
        if (dd)
            depth--;
        else if (*c && strcmp(c, "."))
            depth++;
        if (o + strlen(c) + 2 >= n)
            break;
        o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "/" : "", c);
    }
    if (rnd(8) == 0 && o > 0 && o + 1 < n)
        buf[o++] = '/', buf[o] = 0;
    if (o == 0)
        snprintf(buf, n, ".");
    /* the oracle runs as root on the host's own tree: an absolute path outside ROOT's parent is a bug here */
    if (buf[0] == '/' && strncmp(buf, root, strlen(root))) {
        fprintf(stderr, "kfuzz: generated %s outside %s\n", buf, root);
        abort();
    }
    /* past PATH_MAX now and then: a run of "./" or "//" after the first component (ENAMETOOLONG, whatever it
     * resolves to); a relative path gets "./" in front (never a leading '/') */
    if (rnd(40) == 0) {
        char *tmp = malloc(n);
        const char *cut = buf[0] == '/' ? strchr(buf + 1, '/') : NULL;
        size_t head = cut ? (size_t)(cut - buf) + 1 : 0, k = head, pad = PATH_MAX - 64 + rnd(128);
        const char *run = rnd(2) && head ? "//" : "./";
        memcpy(tmp, buf, head);
        while (k < head + pad && k + 3 < n)
            memcpy(tmp + k, run, 2), k += 2;
        snprintf(tmp + k, n - k, "%s", buf + head);
        memcpy(buf, tmp, n);
        buf[n - 1] = 0;
        free(tmp);
    }
}

/* the lexical depth of what p names from dirfd; *low (when not NULL): the lowest it climbs to on the way */
static int lex_depth_low(int dirfd, const char *p, int *low);
static int lex_depth(int dirfd, const char *p)
{
    return lex_depth_low(dirfd, p, NULL);
}

static int lex_depth_low(int dirfd, const char *p, int *low)
{
    int d;
    if (p[0] == '/') {
        d = -root_depth;
    } else if (dirfd == AT_FDCWD) {
        d = cwd_depth;
    } else {
        d = 0;
        for (int k = 0; k < NFD; k++)
            if (fds[k] == dirfd)
                d = fd_depth[k];
    }
    const char *s = p;
    while (*s) {
        while (*s == '/')
            s++;
        const char *e = s;
        while (*e && *e != '/')
            e++;
        size_t n = (size_t)(e - s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            d--;
        else if (n && !(n == 1 && s[0] == '.'))
            d++;
        if (low && d < *low)
            *low = d;
        s = e;
    }
    return d;
}

static void st_line(const char *op, const char *p, int r, const struct stat *st)
{
    if (r < 0) {
        printf("%s %s -> %s\n", op, p, ename(errno));
        return;
    }
    const char *t = S_ISDIR(st->st_mode) ? "dir" : S_ISREG(st->st_mode) ? "file" : S_ISLNK(st->st_mode) ? "link" : "other";
    if (S_ISDIR(st->st_mode))
        printf("%s %s -> ok %s %o\n", op, p, t, (unsigned)(st->st_mode & 07777));
    else
        printf("%s %s -> ok %s %o %lld\n", op, p, t, (unsigned)(st->st_mode & 07777), (long long)st->st_size);
}

static void r_line(const char *op, const char *p, long r)
{
    if (r < 0)
        printf("%s %s -> %s\n", op, p, ename(errno));
    else
        printf("%s %s -> ok\n", op, p);
}

static void w_line(const char *op, const char *p, long r)
{
    if (r >= 0 && (!strncmp(op, "open", 4) || !strncmp(op, "creat", 5)))   /* a descriptor: its number, the kernel's lowest free one (issue 41) */
        printf("W %s %s -> ok fd%ld\n", op, p, r);
    else if (r >= 0)
        printf("W %s %s -> ok\n", op, p);
    else if (werrno)
        /* the oracle's trees and their ancestors share one file system; the shim's mounts are their own (a rename
         * across their edge: EXDEV, as across real mounts, which the kernel says before the EBUSY of a "." or ".."
         * and the EROFS): the oracle cannot show it, so a rename refused after both parents resolved is one answer */
        printf("W %s %s -> %s\n", op, p,
               (errno == EXDEV || errno == EBUSY) && !strncmp(op, "renameat", 8) ? "EROFS" : ename(errno));
    else
        printf("W %s %s -> err\n", op, p);
}

/* A posix_spawn of /bin/true whose file action opens path with oflag as descriptor 3 (the child's open, or the
 * shim's, judged at the spawn: issue 41 item 5): ok, or the errno the spawn answers (exact: 1; else err, for the
 * /proc/self/fd/N/PATH spelling, whose errno the shim's own open does not match yet: issue 41 item 6); a child that
 * fails: err. */
static void spawn_line(const char *op, const char *w, const char *path, int oflag, int exact)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int rc = posix_spawn_file_actions_addopen(&fa, 3, path, oflag, 0644);
    if (!rc) {
        pid_t pid;
        char *argv[] = {"/bin/true", NULL};
        rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        int st;
        int w;
        while (!rc && (w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;   /* the signal storm (KFUZZ_STORM): the kernel's EINTR, the same with and without the shim */
        if (!rc && (w < 0 || !WIFEXITED(st) || WEXITSTATUS(st)))
            rc = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    printf("%s %s -> %s\n", op, w, rc > 0 && exact ? ename(rc) : rc ? "err" : "ok");
}

/* the descriptor's type and, for a file, its first bytes' sum */
static void fd_line(const char *op, const char *p, int fd)
{
    if (fd < 0) {
        printf("%s %s -> %s\n", op, p, ename(errno));
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        printf("%s %s -> ok fstat %s\n", op, p, ename(errno));
        return;
    }
    unsigned sum = 0;
    if (S_ISREG(st.st_mode)) {
        unsigned char b[512];
        ssize_t k = read(fd, b, sizeof b);
        for (ssize_t i = 0; i < k; i++)
            sum = sum * 31 + b[i];
    }
    printf("%s %s -> ok fd%d %s %o sum %u\n", op, p, fd,
           S_ISDIR(st.st_mode) ? "dir" : S_ISREG(st.st_mode) ? "file" : "other", (unsigned)(st.st_mode & 07777), sum);
}

static int byname(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_dir(const char *op, const char *p, DIR *d)
{
    if (!d) {
        printf("%s %s -> %s\n", op, p, ename(errno));
        return;
    }
    char *v[256];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256)
        v[n++] = strdup(de->d_name);
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, byname);
    printf("%s %s -> ok", op, p);
    for (int i = 0; i < n; i++) {
        printf(" %s", v[i]);
        free(v[i]);
    }
    printf("\n");
}

static void hold(int fd, int depth)
{
    int k = (int)rnd(NFD);
    if (fds[k] >= 0)
        close(fds[k]);
    fds[k] = fd;
    fd_depth[k] = depth;
}

static void one(int i)
{
    static char p[PATH_MAX + 512], q[PATH_MAX + 512];
    int d, d2;
    gen(p, sizeof p, &d);
    /* the call: one that takes no descriptor resolves a relative path from the cwd, whatever gen drew it from
     * (its depth bound, and the line, say so: a ".." from a descriptor at ROOT's parent is a ".." from the cwd) */
    int op = (int)rnd(44);
    static const char at_ops[44] = {[2] = 1, [3] = 1, [4] = 1, [5] = 1, [7] = 1, [11] = 1, [12] = 1, [17] = 1,
                                    [18] = 1, [28] = 1, [30] = 1, [31] = 1, [32] = 1, [33] = 1, [34] = 1,
                                    [36] = 1, [38] = 1, [41] = 1, [43] = 1};
    if (!at_ops[op])
        d = AT_FDCWD;
    int low = 0, depth = lex_depth_low(d, p, &low);
    low = low < depth ? low : depth;
    struct stat st;
    char buf[PATH_MAX + 1];
    ssize_t k;
    int fd, r;
    printf("%d ", i);
    /* the descriptor's spelling in the line: a held one by its slot */
    char where[PATH_MAX + 600];
    int slot = -1;
    for (int j = 0; j < NFD; j++)
        if (d != AT_FDCWD && fds[j] == d)
            slot = j;
    char shown[64];
    size_t lim = getenv("KFUZZ_FULL") ? sizeof where - 100 : 200;
    if (strlen(p) > lim)
        snprintf(shown, sizeof shown, "<%zu bytes>", strlen(p));
    if (slot >= 0)
        snprintf(where, sizeof where, "fd%d:%s", slot, strlen(p) > lim ? shown : p);
    else
        snprintf(where, sizeof where, "%s", strlen(p) > lim ? shown : p);
    const char *w = where;
    if (low < -1 && p[0] != '/') {
        printf("skip\n");
        fflush(stdout);
        return;
    }
    switch (op) {
    case 0: r = stat(p, &st); st_line("stat", w, r, &st); break;
    case 1: r = lstat(p, &st); st_line("lstat", w, r, &st); break;
    case 2: r = fstatat(d, p, &st, 0); st_line("fstatat", w, r, &st); break;
    case 3: r = fstatat(d, p, &st, AT_SYMLINK_NOFOLLOW); st_line("fstatat-nofollow", w, r, &st); break;
    case 4: {
        struct statx sx;
        r = statx(d, p, rnd(2) ? AT_SYMLINK_NOFOLLOW : 0, STATX_BASIC_STATS, &sx);
        st.st_mode = sx.stx_mode;
        st.st_size = (off_t)sx.stx_size;
        st_line("statx", w, r, &st);
        break;
    }
    case 5: { static const int m[] = {F_OK, R_OK, W_OK, X_OK}; int a = m[rnd(4)];
        r = faccessat(d, p, a, 0); printf("faccessat%d ", a); r_line("", w, r); break; }
    case 6: r = access(p, R_OK | X_OK); r_line("access-rx", w, r); break;
    case 7: k = readlinkat(d, p, buf, sizeof buf - 1);
        if (k >= 0) buf[k] = 0, printf("readlinkat %s -> ok %s\n", w, buf); else r_line("readlinkat", w, -1); break;
    case 8: k = readlink(p, buf, 3);
        if (k >= 0) printf("readlink3 %s -> ok %zd\n", w, k); else r_line("readlink3", w, -1); break;
    case 9: case 10: {
        char *rp = realpath(p, NULL);
        if (rp) printf("realpath %s -> ok %s\n", w, rp); else r_line("realpath", w, -1);
        free(rp);
        break;
    }
    case 11: case 12: { static const int f[] = {O_RDONLY, O_RDONLY | O_DIRECTORY, O_RDONLY | O_NOFOLLOW, O_PATH,
                                                O_PATH | O_NOFOLLOW, O_RDONLY | O_CLOEXEC};
        int fl = f[rnd(6)];
        fd = openat(d, p, fl);
        printf("openat%x ", fl); fd_line("", w, fd);
        if (fd >= 0) {
            struct stat s2;
            if (!(fl & O_PATH) && fstat(fd, &s2) == 0 && S_ISDIR(s2.st_mode) && depth >= -1 && rnd(2))
                hold(fd, depth);
            else
                close(fd);
        }
        break;
    }
    case 13: fd = open(p, O_RDONLY); fd_line("open", w, fd); if (fd >= 0) close(fd);
        spawn_line("spawn-open", w, p, O_RDONLY, 1); break;
    case 14: { FILE *f = fopen(p, "r");
        if (!f) { r_line("fopen-r", w, -1); break; }
        int c = fgetc(f); printf("fopen-r %s -> ok %d\n", w, c); fclose(f); break; }
    case 15: case 16: list_dir("opendir", w, opendir(p)); break;
    case 17: {
        struct dirent **v;
        int n = scandirat(d, p, &v, NULL, alphasort);
        if (n < 0) { r_line("scandirat", w, -1); break; }
        printf("scandirat %s -> ok", w);
        for (int j = 0; j < n; j++) printf(" %s", v[j]->d_name), free(v[j]);
        free(v); printf("\n");
        break;
    }
    case 18: fd = openat(d, p, O_RDONLY | O_DIRECTORY);
        if (fd < 0) r_line("fdopendir", w, -1); else list_dir("fdopendir", w, fdopendir(fd));
        break;
    case 19: case 20:
        if (depth < -1 || d != AT_FDCWD) { printf("skip\n"); break; }
        r = chdir(p);
        if (r == 0) cwd_depth = depth;
        if (r == 0 && getcwd(buf, sizeof buf)) printf("chdir %s -> ok %s\n", w, buf); else r_line("chdir", w, r);
        break;
    case 21: { int j = (int)rnd(NFD);
        if (fds[j] < 0) { printf("skip\n"); break; }
        r = fchdir(fds[j]);
        if (r == 0) cwd_depth = fd_depth[j];
        if (r == 0 && getcwd(buf, sizeof buf)) printf("fchdir fd%d -> ok %s\n", j, buf); else r_line("fchdir", "", r);
        break;
    }
    case 22: if (getcwd(buf, sizeof buf)) printf("getcwd -> ok %s\n", buf); else r_line("getcwd", "", -1); break;
    case 23: k = getxattr(p, "user.kfuzz", buf, sizeof buf); r_line("getxattr", w, k); break;
    case 24: k = listxattr(p, buf, sizeof buf);
        if (k >= 0) printf("listxattr %s -> ok %zd\n", w, k); else r_line("listxattr", w, -1); break;
    case 25: { struct statfs sf; r = statfs(p, &sf);
        if (r == 0) printf("statfs %s -> ok ro=%d\n", w, !!(sf.f_flags & ST_RDONLY)); else r_line("statfs", w, -1); break; }
    case 26: { struct statvfs sv; r = statvfs(p, &sv);
        if (r == 0) printf("statvfs %s -> ok ro=%d\n", w, !!(sv.f_flag & ST_RDONLY)); else r_line("statvfs", w, -1); break; }
    case 27: { int j = (int)rnd(NFD);
        if (fds[j] < 0) { printf("skip\n"); break; }
        r = fstat(fds[j], &st); st_line("fstat", j ? "fd" : "fd0", r, &st);
        r = fstatat(fds[j], "", &st, AT_EMPTY_PATH); st_line("fstatat-empty", "", r, &st);
        int nd = dup(fds[j]);
        r = fstat(nd, &st); st_line("fstat-dup", "", r, &st); close(nd);
        break;
    }
    /* writes */
    case 28: w_line("mkdirat", w, mkdirat(d, p, 0755));
        if (d != AT_FDCWD && strlen(p) < sizeof q - 40) {
            snprintf(q, sizeof q, "/proc/self/fd/%d/%s", d, p);
            printf("W mkdir-proc %s -> %s\n", w, mkdir(q, 0755) == 0 ? "ok" : "err");
        }
        break;
    case 29: w_line("rmdir", w, rmdir(p)); w_line("remove", w, remove(p)); break;
    case 30: w_line("unlinkat", w, unlinkat(d, p, rnd(2) ? AT_REMOVEDIR : 0)); break;
    case 31: gen(q, sizeof q, &d2);
        if (lex_depth(d2, q) < -1) { printf("skip\n"); break; }
        w_line("renameat", w, renameat(d, p, d2, q)); printf("  to %.200s\n", d2 == AT_FDCWD ? q : "(fd)");
        w_line("renameat2", w, renameat2(d, p, d2, q, 0)); break;
    case 32: gen(q, sizeof q, &d2);
        if (lex_depth(d2, q) < -1) { printf("skip\n"); break; }
        w_line("linkat", w, linkat(d, p, d2, q, 0)); printf("  to %.200s\n", d2 == AT_FDCWD ? q : "(fd)"); break;
    case 33: w_line("symlinkat", w, symlinkat("a.txt", d, p));
        if (d == AT_FDCWD && strlen(p) < sizeof(((struct sockaddr_un *)0)->sun_path)) { /* a unix socket's name */
            struct sockaddr_un a = {.sun_family = AF_UNIX};
            memcpy(a.sun_path, p, strlen(p) + 1);
            int s = socket(AF_UNIX, SOCK_STREAM, 0);
            w_line("bind", w, bind(s, (struct sockaddr *)&a, sizeof a));
            close(s);
        }
        break;
    /* beside the calls drawn, the other entry points of the same family on the same path (issue 33 round 4; no
     * draw, so that a seed's paths stay the same) */
    case 34: w_line("fchmodat", w, fchmodat(d, p, 0700, 0));
        if (d == AT_FDCWD)
            w_line("lchmod", w, lchmod(p, 0700));
        break;
    case 35: w_line("chown", w, chown(p, 0, 0)); w_line("lchown", w, lchown(p, 0, 0)); break;
    case 36: w_line("utimensat", w, utimensat(d, p, NULL, rnd(2) ? AT_SYMLINK_NOFOLLOW : 0));
        w_line("futimesat", w, futimesat(d, p, NULL));
        if (d == AT_FDCWD) {
            w_line("utimes", w, utimes(p, NULL));
            w_line("lutimes", w, lutimes(p, NULL));
            w_line("utime", w, utime(p, NULL));
        }
        break;
    case 37: w_line("truncate", w, truncate(p, 0)); w_line("truncate64", w, truncate64(p, 0)); break;
    case 38: w_line("mknodat", w, mknodat(d, p, S_IFIFO | 0600, 0));
        w_line("mkfifoat", w, mkfifoat(d, p, 0600));
        if (d == AT_FDCWD) {
            w_line("mknod", w, mknod(p, S_IFIFO | 0600, 0));
            w_line("mkfifo", w, mkfifo(p, 0600));
        }
        break;
    case 39: w_line("setxattr", w, setxattr(p, "user.kfuzz", "x", 1, 0));
        w_line("lsetxattr", w, lsetxattr(p, "user.kfuzz", "x", 1, 0)); break;
    case 40: w_line("removexattr", w, removexattr(p, "user.kfuzz"));
        w_line("lremovexattr", w, lremovexattr(p, "user.kfuzz")); break;
    case 41: { static const int f[] = {O_WRONLY, O_RDWR, O_CREAT | O_WRONLY, O_CREAT | O_EXCL | O_WRONLY,
                                       O_RDONLY | O_TRUNC, O_WRONLY | O_APPEND, O_CREAT | O_RDONLY};
        int fl = f[rnd(7)];
        if (fl == (O_CREAT | O_RDONLY) && !werrno)
            fl = O_CREAT | O_WRONLY;   /* on a mount's directory: issue 22 item 5, with the write errnos */
        fd = openat(d, p, fl, 0644);
        printf("[%x] ", fl); w_line("openat-w", w, fd);
        if (fd >= 0) close(fd);
        if (d == AT_FDCWD) {
            fd = open64(p, fl, 0644);
            printf("[%x] ", fl); w_line("open64-w", w, fd);
            if (fd >= 0) close(fd);
            if (fl == (O_CREAT | O_WRONLY)) {
                fd = creat64(p, 0644);
                w_line("creat64", w, fd);
                if (fd >= 0) close(fd);
            }
        }
        /* the same write as a spawn's file action, and from a held descriptor as /proc/self/fd/N/PATH (issue 33):
         * a writing open fails on both read-only trees, so ok or err is compared (an O_CREAT|O_RDONLY of a file
         * opens it, which the shim's /proc/self/fd spelling of a mount's directory does not: left out) */
        if (fl != (O_CREAT | O_RDONLY)) {
            char *sp = p;
            if (d != AT_FDCWD && strlen(p) < sizeof q - 40)
                snprintf(q, sizeof q, "/proc/self/fd/%d/%s", d, p), sp = q;
            printf("[%x] ", fl);
            spawn_line("W spawn-open", w, sp, fl, sp == p);
            if (d != AT_FDCWD) {
                fd = open(sp, fl, 0644);
                printf("[%x] W open-proc %s -> %s\n", fl, w, fd >= 0 ? "ok" : "err");
                if (fd >= 0) close(fd);
            }
        }
        break;
    }
    case 42: { static const char *m[] = {"w", "a", "r+", "w+"}; const char *mm = m[rnd(4)];
        FILE *f = fopen(p, mm);
        printf("[%s] ", mm); w_line("fopen-w", w, f ? 0 : -1);
        if (f) fclose(f);
        f = fopen64(p, mm);
        printf("[%s] ", mm); w_line("fopen64-w", w, f ? 0 : -1);
        if (f) fclose(f);
        /* (a stream freopen failed on is closed but still allocated: glibc's fclose frees it) */
        FILE *n = fopen("/dev/null", "r");
        f = n ? freopen(p, mm, n) : NULL;
        printf("[%s] ", mm); w_line("freopen-w", w, f ? 0 : -1);
        if (n) fclose(n);
        n = fopen("/dev/null", "r");
        f = n ? freopen64(p, mm, n) : NULL;
        printf("[%s] ", mm); w_line("freopen64-w", w, f ? 0 : -1);
        if (n) fclose(n);
        break;
    }
    case 43: fd = openat(d, p, O_RDONLY);
        if (fd < 0) { printf("skip\n"); break; }
        w_line("fchmod", w, fchmod(fd, 0700));
        w_line("fchown", w, fchown(fd, 0, 0));
        close(fd);
        break;
    }
    fflush(stdout);
}

static volatile sig_atomic_t sigs;
static void on_sig(int s)
{
    (void)s;
    sigs++;
}

int main(int argc, char **argv)
{
    if (argc != 4 || argv[3][0] != '/') {
        fprintf(stderr, "usage: kfuzz SEED COUNT ROOT\n");
        return 2;
    }
    rs = strtoull(argv[1], NULL, 10) * 2654435761ULL + 88172645463325252ULL;
    int count = atoi(argv[2]);
    root = argv[3];
    werrno = !getenv("KFUZZ_WRITE_ERRNO") || strcmp(getenv("KFUZZ_WRITE_ERRNO"), "0");
    for (const char *s = root; *s; s++)
        root_depth += *s == '/';
    memset(longname, 'n', 256);
    longname[256] = 0;
    if (chdir(root) < 0) {
        perror(root);
        return 2;
    }
    if (getenv("KFUZZ_STORM") && strcmp(getenv("KFUZZ_STORM"), "0")) {
        /* a signal storm (issue 41 item 2): SIGALRM every 200 us and SIGCHLD, handlers without SA_RESTART (what
         * Python's signal.signal installs): every answer must still be the kernel's */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sig;
        sigaction(SIGALRM, &sa, NULL);
        sigaction(SIGCHLD, &sa, NULL);
        struct itimerval it = {{0, 200}, {0, 200}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    for (int i = 0; i < count; i++)
        one(i);
    return 0;
}
