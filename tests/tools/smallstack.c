/* smallstack.c - every interposer on a thread with a small stack (issue 6, item 2). Usage:
 *   smallstack KIB MOUNT MISSING_OUTSIDE
 * Runs the same list of calls - on MOUNT's files, dirs, links and missing entries, relative to a cwd inside the
 * mount, and on MISSING_OUTSIDE (a deep path outside the mounts that does not exist: the failing lookup that
 * walks the fallback) - first on a thread whose stack is KIB KiB (with the guard page below it: an overflow is
 * a SIGSEGV), then on the main thread, and compares the two transcripts line by line. Exit 0 when the small
 * thread finished and both agree. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *mnt, *missing;
static char *out;
static size_t outlen, outcap;

static void emit(const char *what, long r)
{
    char line[512];
    int n = snprintf(line, sizeof line, "%s -> %ld %s\n", what, r, r < 0 ? strerror(errno) : "");
    if (outlen + (size_t)n + 1 > outcap)
        return;
    memcpy(out + outlen, line, (size_t)n + 1);
    outlen += (size_t)n;
}

/* each call on one path; P is a small buffer so the probe's own frame stays small */
static void on_path(const char *p)
{
    struct stat st;
    struct statx sx;
    struct statfs sf;
    struct statvfs sv;
    char b[128], what[300];
#define DO(NAME, EXPR)                                                                                      \
    do {                                                                                                    \
        errno = 0;                                                                                          \
        long r_ = (long)(EXPR);                                                                             \
        snprintf(what, sizeof what, "%s(%s)", NAME, p);                                                     \
        emit(what, r_);                                                                                     \
    } while (0)
    DO("stat", stat(p, &st));
    DO("lstat", lstat(p, &st));
    DO("statx", statx(AT_FDCWD, p, 0, STATX_BASIC_STATS, &sx));
    DO("fstatat", fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW));
    DO("access", access(p, R_OK));
    DO("faccessat", faccessat(AT_FDCWD, p, R_OK, 0));
    DO("readlink", readlink(p, b, sizeof b));
    DO("statfs", statfs(p, &sf));
    DO("statvfs", statvfs(p, &sv));
    DO("getxattr", getxattr(p, "user.x", b, sizeof b));
    DO("listxattr", listxattr(p, b, sizeof b));
    DO("mkdir", mkdir(p, 0700));
    DO("unlink", unlink(p));
    DO("rename", rename(p, p));
    DO("chmod", chmod(p, 0700));
    char *rp = realpath(p, NULL);
    DO("realpath", rp ? 0 : -1);
    free(rp);
    int fd = open(p, O_RDONLY);
    DO("open", fd >= 0 ? 0 : -1);
    if (fd >= 0) {
        DO("fstat", fstat(fd, &st));
        DO("fstatfs", fstatfs(fd, &sf));
        close(fd);
    }
    fd = openat(AT_FDCWD, p, O_RDONLY | O_PATH);
    DO("openat(O_PATH)", fd >= 0 ? 0 : -1);
    if (fd >= 0)
        close(fd);
    FILE *f = fopen(p, "r");
    DO("fopen", f ? 0 : -1);
    if (f)
        fclose(f);
    DIR *d = opendir(p);
    DO("opendir", d ? 0 : -1);
    if (d) {
        long n = 0;
        while (readdir(d))
            n++;
        DO("readdir", n);
        closedir(d);
    }
    struct dirent **list;
    int n = scandir(p, &list, NULL, alphasort);
    DO("scandir", n);
    for (int i = 0; i < n; i++)
        free(list[i]);
    if (n >= 0)
        free(list);
    char *roots[] = {(char *)p, NULL};
    FTS *ft = fts_open(roots, FTS_LOGICAL, NULL);
    long ne = 0;
    FTSENT *e;
    while (ft && (e = fts_read(ft)))
        ne += e->fts_info;
    DO("fts", ft ? ne : -1);
    if (ft)
        fts_close(ft);
}

static void *run(void *arg)
{
    static const char *rel[] = {"a.txt", "dir", "link-to-a", "dir/deeper/c.txt", "nope", "dir/nope/x", "dirlink/up",
                                 "a.txt/..", "dirlink/deeper/../b.bin", "nope/.."};
    char p[256];
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        snprintf(p, sizeof p, "%s/%s", mnt, rel[i]);
        on_path(p);
    }
    on_path(mnt);
    on_path(missing);
    /* relative calls with the cwd inside the mount, then back outside */
    char cwd[256];
    if (!getcwd(cwd, sizeof cwd))
        return NULL;
    snprintf(p, sizeof p, "%s/dir", mnt);
    errno = 0;
    emit("chdir(mount/dir)", chdir(p));
    char g[256];
    emit(getcwd(g, sizeof g) ? g : "getcwd failed", 0);
    on_path("deeper/c.txt");
    on_path("nope");
    on_path(".");
    emit("chdir(back)", chdir(cwd));
    on_path("nope/deeper/still/missing");
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: smallstack KIB MOUNT MISSING_OUTSIDE\n");
        return 2;
    }
    size_t kib = (size_t)atol(argv[1]);
    mnt = argv[2];
    missing = argv[3];
    outcap = 1 << 20;
    char *small = calloc(1, outcap), *big = calloc(1, outcap);
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (pthread_attr_setstacksize(&at, kib * 1024)) {
        fprintf(stderr, "cannot set a %zu KiB stack\n", kib);
        return 2;
    }
    pthread_t th;
    out = small;
    outlen = 0;
    if (pthread_create(&th, &at, run, NULL)) {
        fprintf(stderr, "pthread_create failed\n");
        return 2;
    }
    pthread_join(th, NULL);
    size_t ls = outlen;
    out = big;
    outlen = 0;
    run(NULL);
    int lines = 0;
    for (char *c = small; *c; c++)
        lines += *c == '\n';
    if (ls != outlen || memcmp(small, big, ls)) {
        printf("the %zu KiB thread and the main thread disagree:\n--- small\n%s--- main\n%s", kib, small, big);
        return 1;
    }
    printf("%d calls on a %zu KiB stack, the same answers as on the main thread\n", lines, kib);
    return 0;
}
