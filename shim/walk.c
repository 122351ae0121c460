/* walk.c - glibc's nftw(3) and ftw(3) for trees that start in a mount or at a mount's ancestor: glibc's own
 * walk calls its internal opendir and stat, which never see the mounts, so a walk that starts there is done
 * here with the interposed calls (everything else goes to glibc's, untouched). Supports FTW_PHYS, FTW_DEPTH,
 * FTW_MOUNT, FTW_CHDIR (the interposed chdir/fchdir: a skeleton directory is a real one) and FTW_ACTIONRETVAL;
 * the path buffer is one heap allocation per walk (never on the fast path). glibc's fts(3) is routed the same
 * way by fts.c. */
#include "shim.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* hides glibc's nonnull declarations from the optimiser (a NULL goes to glibc, which reports it) */
#define LAUNDER_W(p) __asm__("" : "+r"(p))

typedef int (*nftw_fn)(const char *, const struct stat *, int, struct FTW *);
typedef int (*ftw_fn)(const char *, const struct stat *, int);

struct walk {
    char *path;
    size_t cap;
    nftw_fn fn;
    ftw_fn old;   /* ftw(3)'s callback, when set */
    int flags;
    dev_t dev;
    struct { dev_t dev; ino_t ino; } *seen;   /* directories entered (as glibc: each once, so no link loops) */
    size_t nseen, capseen;
};

/* 1 when the directory st was entered before; else remembers it (0, or -1 out of memory). */
static int seen(struct walk *w, const struct stat *st)
{
    for (size_t i = 0; i < w->nseen; i++)
        if (w->seen[i].dev == st->st_dev && w->seen[i].ino == st->st_ino)
            return 1;
    if (w->nseen == w->capseen) {
        size_t c = w->capseen ? w->capseen * 2 : 64;
        void *p = realloc(w->seen, c * sizeof *w->seen);
        if (!p)
            return -1;
        w->seen = p;
        w->capseen = c;
    }
    w->seen[w->nseen].dev = st->st_dev;
    w->seen[w->nseen++].ino = st->st_ino;
    return 0;
}

static int call(struct walk *w, const struct stat *st, int type, int base, int level)
{
    if (w->old)
        return w->old(w->path, st, type);
    struct FTW f = {base, level};
    return w->fn(w->path, st, type, &f);
}

/* The name the walk's own calls use for the entry at w->path: the whole path, or with FTW_CHDIR (the cwd is the
 * entry's directory) its last component ("." for a root with none, as "/"). */
static const char *acc(const struct walk *w, int base)
{
    if (!(w->flags & FTW_CHDIR))
        return w->path;
    return w->path[base] ? w->path + base : ".";
}

/* With FTW_CHDIR: back to the directory a child directory was entered from (its stream's descriptor). */
static int chdir_back(int pfd)
{
    return pfd >= 0 && fchdir(pfd) < 0 ? -1 : 0;
}

/* 0 to go on, or the callback's value that ends the walk (FTW_SKIP_* handled here). pfd: with FTW_CHDIR, the
 * descriptor of the directory the cwd is in (-1 for the start). */
static int visit(struct walk *w, size_t len, int base, int level, int pfd)
{
    struct stat st;
    int type, r;
    int phys = w->flags & FTW_PHYS, chd = w->flags & FTW_CHDIR;
    const char *name = acc(w, base);
    if ((phys ? lstat : stat)(name, &st) < 0) {
        type = !phys && lstat(name, &st) == 0 && S_ISLNK(st.st_mode) ? FTW_SLN : FTW_NS;
    } else if (S_ISDIR(st.st_mode)) {
        type = FTW_D;
    } else {
        type = S_ISLNK(st.st_mode) ? FTW_SL : FTW_F;
    }
    if (type != FTW_D || ((w->flags & FTW_MOUNT) && st.st_dev != w->dev)) {
        r = call(w, &st, type, base, level);
        return (w->flags & FTW_ACTIONRETVAL) && (r == FTW_SKIP_SUBTREE) ? 0 : r;
    }
    int was = seen(w, &st);
    if (was)
        return was < 0 ? -1 : 0;
    /* with FTW_CHDIR the stream is opened first, as glibc's (relative to the parent, the cwd), and an unreadable
     * directory is reported only as FTW_DNR */
    DIR *d = NULL;
    if (chd && !(d = opendir(name)))
        return call(w, &st, FTW_DNR, base, level);
    if (!(w->flags & FTW_DEPTH)) {
        r = call(w, &st, FTW_D, base, level);
        if (r) {
            if (d)
                closedir(d);
            return (w->flags & FTW_ACTIONRETVAL) && r == FTW_SKIP_SUBTREE ? 0 : r;
        }
    }
    if (chd && fchdir(dirfd(d)) < 0) {
        closedir(d);
        return -1;
    }
    if (!chd && !(d = opendir(name)))
        return call(w, &st, FTW_DNR, base, level);
    struct dirent *e;
    r = 0;
    /* one '/' between the directory and its entries ("/" + "x" is "/x", as glibc joins them) */
    size_t at = len && w->path[len - 1] == '/' ? len : len + 1;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        size_t n = strlen(e->d_name);
        if (at + n + 1 > w->cap) {
            r = -1;
            errno = ENAMETOOLONG;
            break;
        }
        w->path[len] = '/';
        memcpy(w->path + at, e->d_name, n + 1);
        r = visit(w, at + n, (int)at, level + 1, chd ? dirfd(d) : -1);
        w->path[len] = 0;
        if ((w->flags & FTW_ACTIONRETVAL) && r == FTW_SKIP_SIBLINGS) {
            r = 0;
            break;
        }
        if (r)
            break;
    }
    if (!r && (w->flags & FTW_DEPTH)) {
        r = call(w, &st, FTW_DP, base, level);   /* with FTW_CHDIR in the directory itself, as glibc's */
        if ((w->flags & FTW_ACTIONRETVAL) && (r == FTW_SKIP_SUBTREE || r == FTW_SKIP_SIBLINGS))
            r = 0;
    }
    if (chd && chdir_back(pfd) < 0 && !r)
        r = -1;
    closedir(d);
    return r;
}

/* Walks dir as given (the callback gets the spelling it was given, trailing slashes dropped, as glibc's). With
 * FTW_CHDIR the cwd goes to the start's directory first, into each directory before its entries, and back to
 * where it was at the end. */
static int walk_ours(const char *dir, nftw_fn fn, ftw_fn old, int flags, int e)
{
    struct walk w = {NULL, SH_PATH * 2, fn, old, flags, 0, NULL, 0, 0};
    struct stat st;
    size_t len = strlen(dir);
    if (len + 1 > w.cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!(w.path = malloc(w.cap))) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(w.path, dir, len + 1);
    while (len > 1 && w.path[len - 1] == '/')
        w.path[--len] = 0;
    const char *slash = strrchr(w.path, '/');
    int base = slash ? (int)(slash - w.path) + 1 : 0, r = -1, cwdfd = -1;
    if (flags & FTW_CHDIR) {
        if ((cwdfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            goto out;
        if (base > 0) {
            char c = w.path[base - 1];
            w.path[base - 1] = 0;
            int k = chdir(base == 1 ? "/" : w.path);
            w.path[base - 1] = c;
            if (k < 0)
                goto out;
        }
    }
    if (stat(acc(&w, base), &st) < 0)
        goto out;
    w.dev = st.st_dev;
    r = visit(&w, len, base, 0, -1);
out:
    if (cwdfd >= 0) {
        int k = errno;
        if (fchdir(cwdfd) < 0 && r >= 0)
            r = -1;
        else
            errno = k;
        close(cwdfd);
    }
    free(w.path);
    free(w.seen);
    if ((flags & FTW_ACTIONRETVAL) && r == FTW_STOP)
        r = FTW_STOP;
    if (r >= 0)
        errno = e;
    return r;
}

SH_EXPORT int nftw(const char *dir, nftw_fn fn, int nopenfd, int flags)
{
    SH_LOC(l);
    int e = errno;
    LAUNDER_W(dir);
    if (!dir || sh_classify(AT_FDCWD, dir, &l) == L_NONE)
        return REAL(nftw, int (*)(const char *, nftw_fn, int, int))(dir, fn, nopenfd, flags);
    return walk_ours(dir, fn, NULL, flags, e);
}

/* struct stat64 is struct stat on x86-64 and the other 64-bit targets glibc builds the shim for */
typedef int (*nftw64_fn)(const char *, const struct stat64 *, int, struct FTW *);
typedef int (*ftw64_fn)(const char *, const struct stat64 *, int);

SH_EXPORT int nftw64(const char *dir, nftw64_fn fn, int nopenfd, int flags)
{
    SH_LOC(l);
    int e = errno;
    LAUNDER_W(dir);
    if (!dir || sh_classify(AT_FDCWD, dir, &l) == L_NONE)
        return REAL(nftw64, int (*)(const char *, nftw64_fn, int, int))(dir, fn, nopenfd, flags);
    return walk_ours(dir, (nftw_fn)fn, NULL, flags, e);
}

SH_EXPORT int ftw(const char *dir, ftw_fn fn, int nopenfd)
{
    SH_LOC(l);
    int e = errno;
    LAUNDER_W(dir);
    if (!dir || sh_classify(AT_FDCWD, dir, &l) == L_NONE)
        return REAL(ftw, int (*)(const char *, ftw_fn, int))(dir, fn, nopenfd);
    return walk_ours(dir, NULL, fn, 0, e);
}

SH_EXPORT int ftw64(const char *dir, ftw64_fn fn, int nopenfd)
{
    SH_LOC(l);
    int e = errno;
    LAUNDER_W(dir);
    if (!dir || sh_classify(AT_FDCWD, dir, &l) == L_NONE)
        return REAL(ftw64, int (*)(const char *, ftw64_fn, int))(dir, fn, nopenfd);
    return walk_ours(dir, NULL, (ftw_fn)fn, 0, e);
}
