/* dir.c - directory streams for mount directories: opendir/fdopendir give the shim's own stream (a DIR*
 * the host never looks into) listing exactly the index's children, over a real descriptor of the
 * skeleton directory (so dirfd, fchdir, fstatfs and *at calls work); every DIR function is interposed and
 * passes real streams through. scandir is rebuilt because glibc's calls its internal opendir. */
#include "shim.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Real glibc DIRs start with an int fd and an int lock (0..2): they never hold this pattern. */
#define SH_DIR_MAGIC 0x48465333deadbeefULL

struct rec {
    ino_t ino;
    unsigned char type;
    char name[];
};

struct sh_dir {
    uint64_t magic;
    int fd;
    long pos, n;
    size_t *off;               /* n offsets into data */
    char *data;
    size_t len, cap, ocap;
    struct dirent64 ent;
};

static int is_ours(const void *d)
{
    uint64_t m;
    if (!d)
        return 0;
    memcpy(&m, d, sizeof m);
    return m == SH_DIR_MAGIC;
}

static int add(void *arg, const struct sh_dent *e)
{
    struct sh_dir *d = arg;
    size_t nl = strlen(e->name), need = sizeof(struct rec) + nl + 1;
    need = (need + 7) & ~(size_t)7;
    if (d->len + need > d->cap) {
        size_t c = d->cap ? d->cap * 2 : 4096;
        while (c < d->len + need)
            c *= 2;
        char *p = realloc(d->data, c);
        if (!p)
            return -ENOMEM;
        d->data = p;
        d->cap = c;
    }
    if ((size_t)d->n == d->ocap) {
        size_t c = d->ocap ? d->ocap * 2 : 64;
        size_t *p = realloc(d->off, c * sizeof *p);
        if (!p)
            return -ENOMEM;
        d->off = p;
        d->ocap = c;
    }
    struct rec *r = (struct rec *)(d->data + d->len);
    r->ino = e->ino;
    r->type = e->type;
    memcpy(r->name, e->name, nl + 1);
    d->off[d->n++] = d->len;
    d->len += need;
    return 0;
}

static void dir_free(struct sh_dir *d)
{
    free(d->off);
    free(d->data);
    free(d);
}

/* A stream over fd (which it then owns) listing l. NULL with errno (fd left open) on failure. */
static DIR *dir_new(int fd, const struct sh_loc *l)
{
    struct sh_dir *d = calloc(1, sizeof *d);
    if (!d) {
        errno = ENOMEM;
        return NULL;
    }
    d->magic = SH_DIR_MAGIC;
    d->fd = fd;
    int r = sh_list(l, add, d);
    if (r < 0) {
        dir_free(d);
        errno = -r;
        return NULL;
    }
    return (DIR *)d;
}

static void *wrap_dir(int fd, const void *l)
{
    return dir_new(fd, l);
}

/* A relative spelling from a real directory that is a mount's ancestor (a cwd there: "." or "./x/.."): the
 * listing must name the mounts below it, as an absolute spelling's does. 1 and *l (L_ANC) when the directory the
 * kernel opens for (dirfd, p) is one; errno kept. Only relative spellings with mounts configured pay (one open,
 * one readlink). */
static int rel_anc(int dirfd, const char *p, struct sh_loc *l)
{
    if (!sh_nmounts || !p || p[0] == '/' || !*p)
        return 0;
    int e = errno, hit = 0;
    int fd = sh_r.openat(dirfd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        SH_SCRATCH(t);
        char pp[32];
        snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
        ssize_t k = sh_r.readlink(pp, t->a, SH_SCR - 1);
        sh_r.close(fd);
        if (k > 0) {
            t->a[k] = 0;
            hit = sh_classify_abs(t->a, l) == L_ANC;
        }
    }
    errno = e;
    return hit;
}

static DIR *opendir_ours(const struct sh_loc *l, int e)
{
    return sh_open_stream(l, O_RDONLY | O_DIRECTORY | O_CLOEXEC, wrap_dir, l, e);
}

typedef DIR *(*opendir_fn)(const char *);

SH_EXPORT DIR *opendir(const char *p)
{
    opendir_fn real = REAL(opendir, opendir_fn);
    SH_LOC(l);
    int e = errno;
    int k = sh_classify(AT_FDCWD, p, &l);
    if (k == L_NONE && (l.kpath || !rel_anc(AT_FDCWD, p, &l))) {
        DIR *d = real(l.kpath ? l.kpath : p);
        if (d || !SH_FALLBACK_ERR(errno))
            return d;
        if (sh_fallback(AT_FDCWD, p, &l) == L_NONE) {
            if (l.kpath) { /* a relative ".." through an ancestor: where the kernel would be (WITH_LOC) */
                errno = e;
                d = real(l.kpath);
            }
            return d;
        }
    }
    return opendir_ours(&l, e);
}

SH_EXPORT DIR *fdopendir(int fd)
{
    SH_LOC(l);
    int e = errno;
    if (sh_fd_dirloc(fd, &l)) {
        DIR *d = dir_new(fd, &l);
        if (d)
            errno = e;
        return d;
    }
    if (sh_nmounts) {
        /* a descriptor of a skeleton dir the table does not know (opened relative to one, or dup'ed) */
        SH_SCRATCH(t);
        char pp[32], *real = t->a, *lg = t->b;
        snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
        ssize_t k = sh_r.readlink(pp, real, SH_SCR - 1);
        if (k > 0) {
            real[k] = 0;
            /* or a real directory that is a mount's ancestor (fts and find open it, then fdopendir it) */
            if ((sh_map_back(real, lg, SH_PATH) && sh_classify(AT_FDCWD, lg, &l) != L_NONE) ||
                sh_classify_abs(real, &l) == L_ANC) {
                DIR *d = dir_new(fd, &l);
                if (d)
                    errno = e;
                return d;
            }
        }
        errno = e;
    }
    return REAL(fdopendir, DIR *(*)(int))(fd);
}

static struct dirent64 *next(struct sh_dir *d)
{
    if (d->pos < 0 || d->pos >= d->n)
        return NULL;   /* the end: errno untouched */
    const struct rec *r = (const struct rec *)(d->data + d->off[d->pos]);
    d->pos++;
    memset(&d->ent, 0, offsetof(struct dirent64, d_name));
    d->ent.d_ino = r->ino;
    d->ent.d_off = d->pos;
    d->ent.d_reclen = sizeof d->ent;
    d->ent.d_type = r->type;
    size_t nl = strlen(r->name);
    memcpy(d->ent.d_name, r->name, nl + 1);
    return &d->ent;
}

SH_EXPORT struct dirent *readdir(DIR *dp)
{
    if (is_ours(dp))
        return (struct dirent *)next((struct sh_dir *)dp);
    return REAL(readdir, struct dirent *(*)(DIR *))(dp);
}

SH_EXPORT struct dirent64 *readdir64(DIR *dp)
{
    if (is_ours(dp))
        return next((struct sh_dir *)dp);
    return REAL(readdir64, struct dirent64 *(*)(DIR *))(dp);
}

SH_EXPORT int readdir_r(DIR *dp, struct dirent *entry, struct dirent **result)
{
    if (!is_ours(dp))
        return REAL(readdir_r, int (*)(DIR *, struct dirent *, struct dirent **))(dp, entry, result);
    struct dirent64 *e = next((struct sh_dir *)dp);
    if (!e) {
        *result = NULL;
        return 0;
    }
    memcpy(entry, e, sizeof *entry);
    *result = entry;
    return 0;
}

SH_EXPORT int readdir64_r(DIR *dp, struct dirent64 *entry, struct dirent64 **result)
{
    if (!is_ours(dp))
        return REAL(readdir64_r, int (*)(DIR *, struct dirent64 *, struct dirent64 **))(dp, entry, result);
    struct dirent64 *e = next((struct sh_dir *)dp);
    if (!e) {
        *result = NULL;
        return 0;
    }
    memcpy(entry, e, sizeof *entry);
    *result = entry;
    return 0;
}

SH_EXPORT int closedir(DIR *dp)
{
    if (!is_ours(dp))
        return REAL(closedir, int (*)(DIR *))(dp);
    struct sh_dir *d = (struct sh_dir *)dp;
    int fd = d->fd;
    d->magic = 0;
    dir_free(d);
    sh_fd_clear(fd);
    return REAL(close, int (*)(int))(fd);
}

SH_EXPORT int dirfd(DIR *dp)
{
    if (is_ours(dp))
        return ((struct sh_dir *)dp)->fd;
    return REAL(dirfd, int (*)(DIR *))(dp);
}

SH_EXPORT void rewinddir(DIR *dp)
{
    if (is_ours(dp)) {
        ((struct sh_dir *)dp)->pos = 0;
        return;
    }
    REAL(rewinddir, void (*)(DIR *))(dp);
}

SH_EXPORT void seekdir(DIR *dp, long loc)
{
    if (is_ours(dp)) {
        ((struct sh_dir *)dp)->pos = loc;
        return;
    }
    REAL(seekdir, void (*)(DIR *, long))(dp, loc);
}

SH_EXPORT long telldir(DIR *dp)
{
    if (is_ours(dp))
        return ((struct sh_dir *)dp)->pos;
    return REAL(telldir, long (*)(DIR *))(dp);
}

/* --- scandir ------------------------------------------------------------------------------------------- */

typedef int (*filt_fn)(const struct dirent *);
typedef int (*cmp_fn)(const struct dirent **, const struct dirent **);

static int scan_ours(const struct sh_loc *l, struct dirent ***list, filt_fn filter, cmp_fn compar, int e)
{
    DIR *dp = opendir_ours(l, e);
    if (!dp)
        return -1;
    struct dirent **v = NULL, *x;
    size_t n = 0, cap = 0;
    while ((x = (struct dirent *)next((struct sh_dir *)dp))) {
        if (filter && !filter(x))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            struct dirent **nv = realloc(v, cap * sizeof *v);
            if (!nv)
                goto oom;
            v = nv;
        }
        if (!(v[n] = malloc(sizeof *x)))
            goto oom;
        memcpy(v[n++], x, sizeof *x);
    }
    closedir(dp);
    if (compar && n > 1)
        qsort(v, n, sizeof *v, (int (*)(const void *, const void *))compar);
    *list = v;
    errno = e;
    return (int)n;
oom:
    while (n)
        free(v[--n]);
    free(v);
    closedir(dp);
    errno = ENOMEM;
    return -1;
}

SH_EXPORT int scandir(const char *p, struct dirent ***list, filt_fn filter, cmp_fn compar)
{
    SH_LOC(l);
    int e = errno;
    if (sh_classify(AT_FDCWD, p, &l) == L_NONE && (l.kpath || !rel_anc(AT_FDCWD, p, &l))) {
        int (*real)(const char *, struct dirent ***, filt_fn, cmp_fn) =
            REAL(scandir, int (*)(const char *, struct dirent ***, filt_fn, cmp_fn));
        int r = real(l.kpath ? l.kpath : p, list, filter, compar);
        if (r >= 0 || !SH_FALLBACK_ERR(errno))
            return r;
        if (sh_fallback(AT_FDCWD, p, &l) == L_NONE) {
            if (l.kpath) { /* (opendir) */
                errno = e;
                r = real(l.kpath, list, filter, compar);
            }
            return r;
        }
    }
    return scan_ours(&l, list, filter, compar, e);
}

SH_EXPORT int scandir64(const char *p, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
                        int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
    return scandir(p, (struct dirent ***)list, (filt_fn)filter, (cmp_fn)compar);
}

SH_EXPORT int scandirat(int dfd, const char *p, struct dirent ***list, filt_fn filter, cmp_fn compar)
{
    SH_LOC(l);
    int e = errno;
    if (sh_classify(dfd, p, &l) == L_NONE && (l.kpath || !rel_anc(dfd, p, &l))) {
        int (*real)(int, const char *, struct dirent ***, filt_fn, cmp_fn) =
            REAL(scandirat, int (*)(int, const char *, struct dirent ***, filt_fn, cmp_fn));
        int r = real(dfd, l.kpath ? l.kpath : p, list, filter, compar);
        if (r >= 0 || !SH_FALLBACK_ERR(errno))
            return r;
        if (sh_fallback(dfd, p, &l) == L_NONE) {
            if (l.kpath) { /* (opendir) */
                errno = e;
                r = real(dfd, l.kpath, list, filter, compar);
            }
            return r;
        }
    }
    return scan_ours(&l, list, filter, compar, e);
}

SH_EXPORT int scandirat64(int dfd, const char *p, struct dirent64 ***list, int (*filter)(const struct dirent64 *),
                          int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
    return scandirat(dfd, p, (struct dirent ***)list, (filt_fn)filter, (cmp_fn)compar);
}

/* --- glob: glibc's walks the tree with its internal opendir; hand it ours through GLOB_ALTDIRFUNC ------ */

#include <glob.h>

typedef int (*glob_errfn)(const char *, int);

static void *g_opendir(const char *p) { return opendir(p); }
static struct dirent *g_readdir(void *d) { return readdir(d); }
static struct dirent64 *g_readdir64(void *d) { return readdir64(d); }
static void g_closedir(void *d) { closedir(d); }

SH_EXPORT int glob(const char *pat, int flags, glob_errfn errfunc, glob_t *g)
{
    int (*real)(const char *, int, glob_errfn, glob_t *) = REAL(glob, int (*)(const char *, int, glob_errfn, glob_t *));
    if (!sh_nmounts || (flags & GLOB_ALTDIRFUNC))
        return real(pat, flags, errfunc, g);
    g->gl_opendir = g_opendir;
    g->gl_readdir = g_readdir;
    g->gl_closedir = g_closedir;
    g->gl_lstat = lstat;
    g->gl_stat = stat;
    return real(pat, flags | GLOB_ALTDIRFUNC, errfunc, g);
}

SH_EXPORT int glob64(const char *pat, int flags, glob_errfn errfunc, glob64_t *g)
{
    int (*real)(const char *, int, glob_errfn, glob64_t *) =
        REAL(glob64, int (*)(const char *, int, glob_errfn, glob64_t *));
    if (!sh_nmounts || (flags & GLOB_ALTDIRFUNC))
        return real(pat, flags, errfunc, g);
    g->gl_opendir = g_opendir;
    g->gl_readdir = g_readdir64;
    g->gl_closedir = g_closedir;
    g->gl_lstat = lstat64;
    g->gl_stat = stat64;
    return real(pat, flags | GLOB_ALTDIRFUNC, errfunc, g);
}
