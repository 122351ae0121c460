/* fts.c - glibc's fts(3) over trees (issue 6, item 12): fts_open, fts_read, fts_children, fts_set, fts_close.
 * Usage: fts MODE ROOT... ; prints one line per entry in the order the walk gives them:
 *   INFO LEVEL PATH NAME [size] [errno]
 * MODE: phys, log (FTS_PHYSICAL / FTS_LOGICAL, siblings sorted by name), raw (FTS_PHYSICAL, no comparison
 * function: the directory's own order, and fts_accpath printed), comfollow, nostat, seedot, xdev, skip (fts_set FTS_SKIP on a directory
 * named "dir"), again (FTS_AGAIN on the first "a.txt"), follow (FTS_FOLLOW on every symlink), children
 * (fts_children at every directory, and before the first fts_read), nameonly (the same with FTS_NAMEONLY),
 * fts64 (the fts64_* names, FTS_LOGICAL), cwd (FTS_PHYSICAL without FTS_NOCHDIR, as du and find do: each line adds
 * fts_accpath, getcwd() and whether open(fts_accpath) works; after fts_close, the cwd again), many (3,000 handles
 * open at once on the roots, each read once: how many fts_open or fts_read refused). Sizes are printed for files
 * and symlinks (not with FTS_NOSTAT). */
#include <errno.h>
#include <fts.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *iname(int i)
{
    static const char *n[] = {"?", "D", "DC", "DEFAULT", "DNR", "DOT", "DP", "ERR", "F", "INIT", "NS", "NSOK", "SL", "SLNONE", "W"};
    return i >= 0 && i <= 14 ? n[i] : "?";
}

static int byname(const FTSENT **a, const FTSENT **b)
{
    return strcmp((*a)->fts_name, (*b)->fts_name);
}

static int byname64(const FTSENT64 **a, const FTSENT64 **b)
{
    return strcmp((*a)->fts_name, (*b)->fts_name);
}

static int nostat, acc, cwd;

static void show(const char *tag, const FTSENT *p)
{
    printf("%s%s %d %s %s", tag, iname(p->fts_info), p->fts_level, p->fts_path, p->fts_name);
    if (strlen(p->fts_name) != p->fts_namelen || strlen(p->fts_path) != p->fts_pathlen)
        printf(" BAD-LENGTHS");
    if (!nostat && (p->fts_info == FTS_F || p->fts_info == FTS_SL))
        printf(" %lld", (long long)p->fts_statp->st_size);
    if (p->fts_info == FTS_NS || p->fts_info == FTS_DNR || p->fts_info == FTS_ERR)
        printf(" %s", strerrorname_np(p->fts_errno));
    if (acc)   /* glibc's walk chdirs: fts_accpath is the name; the shim's is the path */
        printf(" acc=%s", p->fts_accpath);
    if (cwd) {
        char here[4096];
        printf(" acc=%s cwd=%s", p->fts_accpath, getcwd(here, sizeof here) ? here : strerrorname_np(errno));
        if (p->fts_info == FTS_F || p->fts_info == FTS_D) {
            int fd = open(p->fts_accpath, O_RDONLY);
            printf(" open=%s", fd >= 0 ? "ok" : strerrorname_np(errno));
            if (fd >= 0)
                close(fd);
        }
    }
    printf("\n");
}

/* children: names (and their info unless FTS_NAMEONLY) of the list fts_children gave */
static void show_children(FTS *sp, int flags)
{
    errno = 0;
    FTSENT *c = fts_children(sp, flags);
    if (!c && errno)
        printf("  children: %s\n", strerrorname_np(errno));
    for (; c; c = c->fts_link)
        printf("  child %s %s\n", flags ? "-" : iname(c->fts_info), c->fts_name);
}

static int walk64(char **roots)
{
    FTS64 *sp = fts64_open(roots, FTS_LOGICAL, byname64);
    if (!sp) {
        printf("fts64_open: %s\n", strerrorname_np(errno));
        return 1;
    }
    FTSENT64 *p;
    while ((p = fts64_read(sp)))
        printf("%s %d %s %s\n", iname(p->fts_info), p->fts_level, p->fts_path, p->fts_name);
    int e = errno;
    printf("end %s\n", e ? strerrorname_np(e) : "0");
    return fts64_close(sp) != 0 || e;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    char **roots = argv + 2;
    if (!strcmp(mode, "fts64"))
        return walk64(roots);
    if (!strcmp(mode, "many")) {
        enum { N = 3000 };
        static FTS *h[N];
        int bad_open = 0, bad_read = 0;
        for (int i = 0; i < N; i++)
            if (!(h[i] = fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR, byname)))
                bad_open++;
            else if (!fts_read(h[i]))
                bad_read++;
        for (int i = 0; i < N; i++)
            if (h[i])
                fts_close(h[i]);
        printf("many %d: %d fts_open failed, %d fts_read failed\n", N, bad_open, bad_read);
        return bad_open || bad_read;
    }
    int opt = FTS_PHYSICAL;
    int (*cmp)(const FTSENT **, const FTSENT **) = byname;
    if (!strcmp(mode, "log"))
        opt = FTS_LOGICAL;
    else if (!strcmp(mode, "raw"))
        cmp = NULL, acc = 1;
    else if (!strcmp(mode, "comfollow"))
        opt |= FTS_COMFOLLOW;
    else if (!strcmp(mode, "nostat"))
        opt |= FTS_NOSTAT, nostat = 1;
    else if (!strcmp(mode, "seedot"))
        opt |= FTS_SEEDOT;
    else if (!strcmp(mode, "xdev"))
        opt |= FTS_XDEV;
    else if (!strcmp(mode, "cwd"))
        cwd = 1;
    FTS *sp = fts_open(roots, opt, cmp);
    if (!sp) {
        printf("fts_open: %s\n", strerrorname_np(errno));
        return 1;
    }
    int children = !strcmp(mode, "children"), nameonly = !strcmp(mode, "nameonly"), again_done = 0;
    if (children || nameonly)
        show_children(sp, nameonly ? FTS_NAMEONLY : 0);
    FTSENT *p;
    while ((p = fts_read(sp))) {
        show("", p);
        if (p->fts_info == FTS_D && (children || nameonly))
            show_children(sp, nameonly ? FTS_NAMEONLY : 0);
        if (!strcmp(mode, "skip") && p->fts_info == FTS_D && !strcmp(p->fts_name, "dir"))
            fts_set(sp, p, FTS_SKIP);
        if (!strcmp(mode, "again") && p->fts_info == FTS_F && !strcmp(p->fts_name, "a.txt") && !again_done++)
            fts_set(sp, p, FTS_AGAIN);
        if (!strcmp(mode, "follow") && p->fts_info == FTS_SL)
            fts_set(sp, p, FTS_FOLLOW);
    }
    int e = errno;
    printf("end %s\n", e ? strerrorname_np(e) : "0");
    if (fts_set(sp, NULL, 99) != 1 || errno != EINVAL)
        printf("fts_set(99): not EINVAL\n");
    int rc = fts_close(sp) != 0 || e;
    if (cwd) {
        char here[4096];
        printf("after fts_close: cwd=%s\n", getcwd(here, sizeof here) ? here : strerrorname_np(errno));
    }
    return rc;
}
