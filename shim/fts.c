/* fts.c - glibc's fts(3) (fts_open, fts_read, fts_children, fts_set, fts_close and the fts64_* names) for walks
 * that start in a mount or at a mount's ancestor: glibc's fts calls its internal opendir and stat, which never
 * see the mounts, so such a walk is done here with the interposed calls, following fts(3) and glibc's io/fts.c
 * (the same fts_info answers, order, freeing and fts_set instructions). Without FTS_NOCHDIR (and FTS_LOGICAL, which
 * implies it) the walk changes directory as glibc's does, so that fts_accpath is the name and a program may open
 * e->fts_name or ask getcwd() during the walk; it goes up by the start directory's descriptor and the parent's
 * path rather than "..", so the way back never depends on how ".." reads in a synthesized directory. Each entry
 * owns its fts_path. A handle whose roots are all outside the mounts is glibc's, and so
 * is every later call on it. Our handles are told apart by a registry of their addresses (atomics only: nothing
 * to reset after a fork, no lock), never by reading the memory around glibc's. fts allocates by contract; none of
 * this runs on another call's fast path. */
#include "shim.h"

#include <fts.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* hides glibc's nonnull declarations from the optimiser (a NULL goes to glibc, which reports it) */
#define LAUNDER_F(p) __asm__("" : "+r"(p))

typedef int (*fts_cmp)(const FTSENT **, const FTSENT **);
typedef int (*fts64_cmp)(const FTSENT64 **, const FTSENT64 **);

/* --- the registry of our handles ----------------------------------------------------------------------- */

/* Chunks of slots, chained and never freed: as many handles as the program opens (glibc has no limit either). A
 * new chunk is linked in with one compare-and-swap; a lookup scans each chunk up to the highest slot it ever
 * used. */
#define FTS_SLOTS 1024
struct reg_chunk {
    FTS *slots[FTS_SLOTS];
    int top;                    /* slots above this were never used: a lookup stops there */
    struct reg_chunk *next;
};
static struct reg_chunk reg0;
static int nslots;   /* registered handles: 0 (no fts walk of a mount open) = no scan */

static int reg_add(FTS *sp)
{
    for (struct reg_chunk *c = &reg0; c;) {
        for (int i = 0; i < FTS_SLOTS; i++) {
            FTS *z = NULL;
            if (!__atomic_load_n(&c->slots[i], __ATOMIC_RELAXED) &&
                __atomic_compare_exchange_n(&c->slots[i], &z, sp, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                int t = __atomic_load_n(&c->top, __ATOMIC_RELAXED);
                while (t < i + 1 &&
                       !__atomic_compare_exchange_n(&c->top, &t, i + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                    ;
                __atomic_add_fetch(&nslots, 1, __ATOMIC_ACQ_REL);
                return 0;
            }
        }
        struct reg_chunk *n = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
        if (!n) {
            struct reg_chunk *fresh = calloc(1, sizeof *fresh), *z = NULL;
            if (!fresh)
                return -1;
            if (__atomic_compare_exchange_n(&c->next, &z, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                n = fresh;
            } else {
                free(fresh);   /* another thread linked one in first */
                n = z;
            }
        }
        c = n;
    }
    return -1;
}

/* The chunk and slot of one of our handles; NULL (glibc's) when none. A handle is looked up only after its
 * fts_open returned, so its slot is below its chunk's top by then. */
static struct reg_chunk *reg_find(const void *sp, int *slot)
{
    if (!sp || !__atomic_load_n(&nslots, __ATOMIC_ACQUIRE))
        return NULL;
    for (struct reg_chunk *c = &reg0; c; c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE)) {
        int t = __atomic_load_n(&c->top, __ATOMIC_ACQUIRE);
        for (int i = 0; i < t; i++)
            if (__atomic_load_n(&c->slots[i], __ATOMIC_ACQUIRE) == sp) {
                *slot = i;
                return c;
            }
    }
    return NULL;
}

static int ours(const void *sp)
{
    int i;
    return reg_find(sp, &i) != NULL;
}

/* Forgets sp: 1 when it was ours. */
static int reg_del(const void *sp)
{
    int i;
    struct reg_chunk *c = reg_find(sp, &i);
    if (!c)
        return 0;
    __atomic_store_n(&c->slots[i], NULL, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&nslots, 1, __ATOMIC_ACQ_REL);
    return 1;
}

/* --- entries ------------------------------------------------------------------------------------------- */

enum { BCHILD = 1, BNAMES = 2, BREAD = 3 };   /* why a directory is read (glibc's fts_build) */

static int is_dot(const char *s)
{
    return sh_dot_comp(s, strlen(s)) != 0;
}

/* One block: the FTSENT, its name, its own path (dir + '/' + name as glibc joins them: one trailing '/' of dir
 * dropped; dir NULL: a root, path = name) and its stat. NULL (errno ENOMEM) when out of memory. */
static FTSENT *ent_alloc(const char *name, size_t nlen, const FTSENT *dir)
{
    size_t dlen = 0;
    if (dir) {
        dlen = dir->fts_pathlen;
        if (dlen && dir->fts_path[dlen - 1] == '/')
            dlen--;
    }
    size_t plen = dir ? dlen + 1 + nlen : nlen;
    size_t poff = offsetof(FTSENT, fts_name) + nlen + 1;
    size_t soff = (poff + plen + 1 + 15) & ~(size_t)15;
    size_t size = soff + sizeof(struct stat);
    FTSENT *p = calloc(1, size > sizeof(FTSENT) ? size : sizeof(FTSENT));
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(p->fts_name, name, nlen);
    p->fts_namelen = (unsigned short)nlen;
    p->fts_path = (char *)p + poff;
    if (dir) {
        memcpy(p->fts_path, dir->fts_path, dlen);
        p->fts_path[dlen] = '/';
        memcpy(p->fts_path + dlen + 1, name, nlen);
    } else {
        memcpy(p->fts_path, name, nlen);
    }
    p->fts_pathlen = (unsigned short)plen;
    p->fts_accpath = p->fts_path;
    p->fts_statp = (struct stat *)((char *)p + soff);
    p->fts_instr = FTS_NOINSTR;
    p->fts_symfd = -1;
    return p;
}

static void ent_lfree(FTSENT *p)
{
    while (p) {
        FTSENT *n = p->fts_link;
        free(p);
        p = n;
    }
}

/* glibc's fts_stat: the entry's fts_info from stat (a logical walk, or follow) or lstat, with the interposed
 * calls; directories get their identity (cycles against the ancestors: FTS_DC) and link count. */
static unsigned short ent_stat(const FTS *sp, FTSENT *p, int follow)
{
    struct stat *sb = p->fts_statp;
    if ((sp->fts_options & FTS_LOGICAL) || follow) {
        if (stat(p->fts_accpath, sb) < 0) {
            int e = errno;
            if (lstat(p->fts_accpath, sb) == 0) {
                errno = 0;
                return FTS_SLNONE;
            }
            p->fts_errno = e;
            memset(sb, 0, sizeof *sb);
            return FTS_NS;
        }
    } else if (lstat(p->fts_accpath, sb) < 0) {
        p->fts_errno = errno;
        memset(sb, 0, sizeof *sb);
        return FTS_NS;
    }
    if (S_ISDIR(sb->st_mode)) {
        p->fts_dev = sb->st_dev;
        p->fts_ino = sb->st_ino;
        p->fts_nlink = sb->st_nlink;
        if (is_dot(p->fts_name))
            return FTS_DOT;
        for (FTSENT *t = p->fts_parent; t && t->fts_level >= FTS_ROOTLEVEL; t = t->fts_parent)
            if (t->fts_ino == p->fts_ino && t->fts_dev == p->fts_dev) {
                p->fts_cycle = t;
                return FTS_DC;
            }
        return FTS_D;
    }
    if (S_ISLNK(sb->st_mode))
        return FTS_SL;
    if (S_ISREG(sb->st_mode))
        return FTS_F;
    return FTS_DEFAULT;
}

/* Sorts a list of n entries with the handle's comparison function (unsorted when out of memory, as glibc). */
static FTSENT *ent_sort(FTS *sp, FTSENT *head, size_t n)
{
    if (n > (size_t)sp->fts_nitems) {
        FTSENT **a = realloc(sp->fts_array, (n + 40) * sizeof *a);
        if (!a) {
            free(sp->fts_array);
            sp->fts_array = NULL;
            sp->fts_nitems = 0;
            return head;
        }
        sp->fts_array = a;
        sp->fts_nitems = (int)(n + 40);
    }
    FTSENT **a = sp->fts_array, *p = head;
    for (size_t i = 0; i < n; i++, p = p->fts_link)
        a[i] = p;
    qsort(a, n, sizeof *a, sp->fts_compar);
    for (size_t i = 0; i + 1 < n; i++)
        a[i]->fts_link = a[i + 1];
    a[n - 1]->fts_link = NULL;
    return a[0];
}

/* The walk's working directory (glibc's fts_safe_changedir and FCHDIR; nothing with FTS_NOCHDIR). Into p: from
 * its parent for an entry (fts_accpath its name), from the start directory for a root (fts_accpath its path). */
static int cd_into(const FTS *sp, const FTSENT *p)
{
    if (sp->fts_options & FTS_NOCHDIR)
        return 0;
    /* glibc's check: the directory opened is the one stat-ed (a tree changed under the walk: ENOENT) */
    int fd = open(p->fts_accpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) == 0) {
        if (sb.st_dev != p->fts_dev || sb.st_ino != p->fts_ino)
            errno = ENOENT;
        else
            rc = fchdir(fd);
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Back to where p's siblings are reached from: the start directory for a root, else p's parent (the start
 * directory, then the parent's path from there). */
static int cd_up(const FTS *sp, const FTSENT *p)
{
    if (sp->fts_options & FTS_NOCHDIR)
        return 0;
    if (fchdir(sp->fts_rfd) < 0)
        return -1;
    if (p->fts_level <= FTS_ROOTLEVEL)
        return 0;
    const FTSENT *q = p->fts_parent;
    struct stat sb;
    if (chdir(q->fts_path) < 0 || stat(".", &sb) < 0)
        return -1;
    if (sb.st_dev != q->fts_dev || sb.st_ino != q->fts_ino) {
        errno = ENOENT;   /* not the directory the walk came down through */
        return -1;
    }
    return 0;
}

/* glibc's fts_build: the entries of the current directory (stat-ed as the options say), sorted when the handle
 * has a comparison function. NULL when it cannot be read (BREAD: fts_info FTS_DNR) or is empty (BREAD:
 * FTS_DP), or out of memory (FTS_STOP). */
static FTSENT *build(FTS *sp, int type)
{
    FTSENT *cur = sp->fts_cur;
    DIR *d = opendir(cur->fts_accpath);
    if (!d) {
        if (type == BREAD) {
            cur->fts_info = FTS_DNR;
            cur->fts_errno = errno;
        }
        return NULL;
    }
    long nlinks;
    int nostat = 0;
    if (type == BNAMES) {
        nlinks = 0;
    } else if ((sp->fts_options & FTS_NOSTAT) && (sp->fts_options & FTS_PHYSICAL)) {
        /* glibc counts the subdirectories down from the link count and takes the rest unseen; a synthesized
         * directory (a mount's ancestor) has no such count, so every entry whose type says directory (or does
         * not say) is looked at: the same answers wherever the count is right */
        nlinks = -1;
        nostat = 1;
    } else {
        nlinks = -1;
    }
    int descend = 0, cderr = 0;
    if (nlinks != 0 || type == BREAD) {
        if (cd_into(sp, cur) < 0) {
            if (nlinks && type == BREAD)
                cur->fts_errno = errno;
            cur->fts_flags |= FTS_DONTCHDIR;
            cderr = errno;
        } else {
            descend = 1;
        }
    }
    FTSENT *head = NULL, *tail = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!(sp->fts_options & FTS_SEEDOT) && is_dot(de->d_name))
            continue;
        FTSENT *p = ent_alloc(de->d_name, strlen(de->d_name), cur);
        if (!p) {
            ent_lfree(head);
            closedir(d);
            if (descend)
                cd_up(sp, cur);
            cur->fts_info = FTS_ERR;
            sp->fts_options |= FTS_STOP;
            errno = ENOMEM;
            return NULL;
        }
        p->fts_level = (short)(cur->fts_level + 1);
        p->fts_parent = cur;
        if (!(sp->fts_options & FTS_NOCHDIR))
            p->fts_accpath = p->fts_name;
        if (cderr) {
            p->fts_info = nlinks ? FTS_NS : FTS_NSOK;
            p->fts_errno = nlinks ? cderr : 0;
            p->fts_accpath = cur->fts_accpath;
        } else if (nlinks == 0 || (nostat && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)) {
            p->fts_info = FTS_NSOK;
        } else {
            p->fts_info = ent_stat(sp, p, 0);
            if (nlinks > 0 && (p->fts_info == FTS_D || p->fts_info == FTS_DC || p->fts_info == FTS_DOT))
                nlinks--;
        }
        if (!head)
            head = p;
        else
            tail->fts_link = p;
        tail = p;
        n++;
    }
    closedir(d);
    if (descend && (type == BCHILD || !n) && cd_up(sp, cur) < 0) {
        cur->fts_info = FTS_ERR;
        sp->fts_options |= FTS_STOP;
        ent_lfree(head);
        return NULL;
    }
    if (!n) {
        if (type == BREAD)
            cur->fts_info = FTS_DP;
        return NULL;
    }
    if (sp->fts_compar && n > 1)
        head = ent_sort(sp, head, n);
    return head;
}

/* A root as fts_read returns it: its name is the last component of what was given (glibc's fts_load). */
static void root_load(FTS *sp, FTSENT *p)
{
    char *cp = strrchr(p->fts_name, '/');
    if (cp && (cp != p->fts_name || cp[1])) {
        size_t len = strlen(++cp);
        memmove(p->fts_name, cp, len + 1);
        p->fts_namelen = (unsigned short)len;
    }
    p->fts_accpath = p->fts_path;
    sp->fts_dev = p->fts_dev;
}

/* --- the calls on our handles ---------------------------------------------------------------------------- */

/* noinline: a mount-side walk; inlined, its frame and calls would count against every fts_open outside the mounts */
static __attribute__((noinline)) FTS *o_open(char *const *argv, int options, fts_cmp compar)
{
    FTS *sp = calloc(1, sizeof *sp);
    FTSENT *parent = NULL, *root = NULL, *tail = NULL, *cur;
    if (!sp)
        goto oom;
    sp->fts_compar = (int (*)(const void *, const void *))compar;
    sp->fts_options = options | ((options & FTS_LOGICAL) ? FTS_NOCHDIR : 0);   /* glibc's rule */
    sp->fts_rfd = -1;
    if (!(sp->fts_options & FTS_NOCHDIR) && (sp->fts_rfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        sp->fts_options |= FTS_NOCHDIR;
    if (!(parent = ent_alloc("", 0, NULL)))
        goto fail;
    parent->fts_level = FTS_ROOTPARENTLEVEL;
    size_t n = 0;
    for (; *argv; argv++, n++) {
        size_t len = strlen(*argv);
        if (!len) {
            errno = ENOENT;   /* glibc: no zero-length paths */
            goto fail;
        }
        FTSENT *p = ent_alloc(*argv, len, NULL);
        if (!p)
            goto fail;
        p->fts_level = FTS_ROOTLEVEL;
        p->fts_parent = parent;
        p->fts_info = ent_stat(sp, p, options & FTS_COMFOLLOW);
        if (p->fts_info == FTS_DOT)
            p->fts_info = FTS_D;   /* "." and ".." given as roots are real directories */
        if (compar) {
            p->fts_link = root;
            root = p;
        } else {
            if (!root)
                root = p;
            else
                tail->fts_link = p;
            tail = p;
        }
    }
    if (compar && n > 1)
        root = ent_sort(sp, root, n);
    /* the node "before" the roots: fts_read starts by moving on from it */
    if (!(cur = ent_alloc("", 0, NULL)))
        goto fail;
    cur->fts_link = root;
    cur->fts_parent = parent;
    cur->fts_info = FTS_INIT;
    sp->fts_cur = cur;
    if (reg_add(sp) < 0) {
        free(cur);
        errno = EMFILE;
        goto fail;
    }
    return sp;
fail:;
    int e = errno;
    ent_lfree(root);
    free(parent);
    if (sp && sp->fts_rfd >= 0)
        close(sp->fts_rfd);
    if (sp)
        free(sp->fts_array);
    free(sp);
    errno = e;
    return NULL;
oom:
    errno = ENOMEM;
    return NULL;
}

static FTSENT *o_read(FTS *sp)
{
    FTSENT *p = sp->fts_cur, *tmp;
    if (!p || (sp->fts_options & FTS_STOP))
        return NULL;
    int instr = p->fts_instr;
    p->fts_instr = FTS_NOINSTR;
    if (instr == FTS_AGAIN) {
        p->fts_info = ent_stat(sp, p, 0);
        return p;
    }
    if (instr == FTS_FOLLOW && (p->fts_info == FTS_SL || p->fts_info == FTS_SLNONE)) {
        p->fts_info = ent_stat(sp, p, 1);
        return p;
    }
    if (p->fts_info == FTS_D) {
        /* skipped, or on another device with FTS_XDEV: the post-order visit at once */
        if (instr == FTS_SKIP || ((sp->fts_options & FTS_XDEV) && p->fts_dev != sp->fts_dev)) {
            ent_lfree(sp->fts_child);
            sp->fts_child = NULL;
            p->fts_info = FTS_DP;
            return p;
        }
        /* fts_children read only the names: read again, with stat */
        if (sp->fts_child && (sp->fts_options & FTS_NAMEONLY)) {
            sp->fts_options &= ~FTS_NAMEONLY;
            ent_lfree(sp->fts_child);
            sp->fts_child = NULL;
        }
        if (sp->fts_child) {
            /* read by fts_children, which came back out: in again */
            if (cd_into(sp, p) < 0) {
                p->fts_errno = errno;
                p->fts_flags |= FTS_DONTCHDIR;
                for (FTSENT *c = sp->fts_child; c; c = c->fts_link)
                    c->fts_accpath = c->fts_parent->fts_accpath;
            }
        } else if (!(sp->fts_child = build(sp, BREAD))) {
            return (sp->fts_options & FTS_STOP) ? NULL : p;
        }
        p = sp->fts_child;
        sp->fts_child = NULL;
        return sp->fts_cur = p;
    }
next:
    tmp = p;
    if ((p = p->fts_link)) {
        sp->fts_cur = p;
        free(tmp);
        if (p->fts_level == FTS_ROOTLEVEL) {
            if (cd_up(sp, p) < 0) {
                sp->fts_options |= FTS_STOP;
                return NULL;
            }
            root_load(sp, p);
            return p;
        }
        if (p->fts_instr == FTS_SKIP)
            goto next;
        if (p->fts_instr == FTS_FOLLOW) {
            p->fts_info = ent_stat(sp, p, 1);
            p->fts_instr = FTS_NOINSTR;
        }
        return p;
    }
    /* the last of its directory: up to the parent, in post-order */
    p = tmp->fts_parent;
    sp->fts_cur = p;
    free(tmp);
    if (p->fts_level == FTS_ROOTPARENTLEVEL) {
        free(p);
        errno = 0;   /* the end, not an error */
        return sp->fts_cur = NULL;
    }
    if ((p->fts_level == FTS_ROOTLEVEL || !(p->fts_flags & FTS_DONTCHDIR)) && cd_up(sp, p) < 0) {
        sp->fts_options |= FTS_STOP;
        return NULL;
    }
    p->fts_info = p->fts_errno ? FTS_ERR : FTS_DP;
    return p;
}

static FTSENT *o_children(FTS *sp, int instr)
{
    if (instr != 0 && instr != FTS_NAMEONLY) {
        errno = EINVAL;
        return NULL;
    }
    FTSENT *p = sp->fts_cur;
    errno = 0;
    if (!p || (sp->fts_options & FTS_STOP))
        return NULL;
    if (p->fts_info == FTS_INIT)
        return p->fts_link;   /* before the first fts_read: the roots */
    if (p->fts_info != FTS_D)
        return NULL;
    ent_lfree(sp->fts_child);
    sp->fts_child = NULL;
    if (instr == FTS_NAMEONLY)
        sp->fts_options |= FTS_NAMEONLY;
    else
        sp->fts_options &= ~FTS_NAMEONLY;
    return sp->fts_child = build(sp, instr == FTS_NAMEONLY ? BNAMES : BCHILD);
}

static int o_set(FTSENT *p, int instr)
{
    if (instr != 0 && instr != FTS_AGAIN && instr != FTS_FOLLOW && instr != FTS_NOINSTR && instr != FTS_SKIP) {
        errno = EINVAL;
        return 1;
    }
    p->fts_instr = (unsigned short)instr;
    return 0;
}

static int o_close(FTS *sp)
{
    int e = errno;
    if (sp->fts_cur) {
        /* what fts_read has not freed yet: the rest of each level up to the roots' parent */
        FTSENT *p = sp->fts_cur;
        while (p->fts_level >= FTS_ROOTLEVEL) {
            FTSENT *f = p;
            p = p->fts_link ? p->fts_link : p->fts_parent;
            free(f);
        }
        free(p);
    }
    ent_lfree(sp->fts_child);
    free(sp->fts_array);
    int rc = 0;
    if (!(sp->fts_options & FTS_NOCHDIR)) {
        /* back where fts_open found the process */
        if (fchdir(sp->fts_rfd) < 0) {
            e = errno;
            rc = -1;
        }
        close(sp->fts_rfd);
    }
    free(sp);
    errno = e;
    return rc;
}

/* --- the exported calls ------------------------------------------------------------------------------------ */

/* 1 when a root is in a mount or a mount's ancestor, directly or through real symlinks (a real lstat, or stat
 * when the roots are followed, failed with ENOENT/ENOTDIR and the fallback walk lands in a mount). errno kept. */
static int roots_ours(char *const *argv, int options)
{
    if (!sh_nmounts || !argv)
        return 0;
    int e = errno, hit = 0;
    for (; *argv && !hit; argv++) {
        SH_LOC(l);
        const char *a = *argv;
        if (sh_classify(AT_FDCWD, a, &l) != L_NONE) {
            hit = 1;
        } else if (*a) {
            struct stat st;
            int r = (options & (FTS_COMFOLLOW | FTS_LOGICAL)) ? sh_r.stat(a, &st) : sh_r.lstat(a, &st);
            hit = r < 0 && SH_FALLBACK_ERR(errno) && sh_fallback(AT_FDCWD, a, &l) != L_NONE;
        }
    }
    errno = e;
    return hit;
}

static FTS *do_open(char *const *argv, int options, fts_cmp compar, FTS *(*real)(char *const *, int, fts_cmp))
{
    LAUNDER_F(argv);
    if (!(options & ~FTS_OPTIONMASK) && roots_ours(argv, options))
        return o_open(argv, options, compar);
    return real(argv, options, compar);
}

SH_EXPORT FTS *fts_open(char *const *argv, int options, fts_cmp compar)
{
    return do_open(argv, options, compar, REAL(fts_open, FTS *(*)(char *const *, int, fts_cmp)));
}

SH_EXPORT FTSENT *fts_read(FTS *sp)
{
    if (ours(sp))
        return o_read(sp);
    return REAL(fts_read, FTSENT *(*)(FTS *))(sp);
}

SH_EXPORT FTSENT *fts_children(FTS *sp, int instr)
{
    if (ours(sp))
        return o_children(sp, instr);
    return REAL(fts_children, FTSENT *(*)(FTS *, int))(sp, instr);
}

SH_EXPORT int fts_set(FTS *sp, FTSENT *p, int instr)
{
    if (ours(sp))
        return o_set(p, instr);
    return REAL(fts_set, int (*)(FTS *, FTSENT *, int))(sp, p, instr);
}

SH_EXPORT int fts_close(FTS *sp)
{
    if (reg_del(sp))
        return o_close(sp);
    return REAL(fts_close, int (*)(FTS *))(sp);
}

/* FTS64/FTSENT64 are FTS/FTSENT on the 64-bit targets the shim is built for (glibc's fts64_* are aliases) */
_Static_assert(sizeof(FTSENT64) == sizeof(FTSENT) && sizeof(FTS64) == sizeof(FTS), "FTSENT64 is FTSENT");

SH_EXPORT FTS64 *fts64_open(char *const *argv, int options, fts64_cmp compar)
{
    return (FTS64 *)do_open(argv, options, (fts_cmp)compar,
                            (FTS * (*)(char *const *, int, fts_cmp)) REAL(fts64_open, FTS64 *(*)(char *const *, int, fts64_cmp)));
}

SH_EXPORT FTSENT64 *fts64_read(FTS64 *sp)
{
    if (ours(sp))
        return (FTSENT64 *)o_read((FTS *)sp);
    return REAL(fts64_read, FTSENT64 *(*)(FTS64 *))(sp);
}

SH_EXPORT FTSENT64 *fts64_children(FTS64 *sp, int instr)
{
    if (ours(sp))
        return (FTSENT64 *)o_children((FTS *)sp, instr);
    return REAL(fts64_children, FTSENT64 *(*)(FTS64 *, int))(sp, instr);
}

SH_EXPORT int fts64_set(FTS64 *sp, FTSENT64 *p, int instr)
{
    if (ours(sp))
        return o_set((FTSENT *)p, instr);
    return REAL(fts64_set, int (*)(FTS64 *, FTSENT64 *, int))(sp, p, instr);
}

SH_EXPORT int fts64_close(FTS64 *sp)
{
    if (reg_del(sp))
        return o_close((FTS *)sp);
    return REAL(fts64_close, int (*)(FTS64 *))(sp);
}
