/* fts.c - glibc's fts(3) over trees (issue 6, item 12): fts_open, fts_read, fts_children, fts_set, fts_close.
 * Usage: fts MODE ROOT... ; prints one line per entry in the order the walk gives them:
 *   INFO LEVEL PATH NAME [size] [errno]
 * MODE: phys, log (FTS_PHYSICAL / FTS_LOGICAL, siblings sorted by name), raw (FTS_PHYSICAL, no comparison
 * function: the directory's own order, and fts_accpath printed), comfollow, nostat, seedot, xdev, skip (fts_set FTS_SKIP on a directory
 * named "dir"), again (FTS_AGAIN on the first "a.txt"), follow (FTS_FOLLOW on every symlink), children
 * (fts_children at every directory, and before the first fts_read), nameonly (the same with FTS_NAMEONLY),
 * fts64 (the fts64_* names, FTS_LOGICAL). Sizes are printed for files and symlinks (not with FTS_NOSTAT). */
#include <errno.h>
#include <fts.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

static int nostat, acc;

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
    return fts_close(sp) != 0 || e;
}
