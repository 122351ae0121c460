/* path.c - paths and classification: lexical normalisation, which mount (or mount ancestor) a path names (the
 * fast path: no allocation, no lock), the cwd and directory descriptors as bases for relative paths, mapping the
 * cache's skeleton back to logical paths, and the fallback walk through real symlinks after a failed real call. */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What is known of the cwd: bit 0 set = it is not in a mount's skeleton; the rest is a generation that every
 * chdir/fchdir bumps, so a thread that looked at the cwd before another thread's chdir cannot store a stale
 * answer (its compare-and-swap fails). */
unsigned long sh_cwd_word;

/* sh_outside's filter (shim.h) */
unsigned char sh_first_map[256];

void sh_filter_build(void)
{
    unsigned char m[256] = {0};
    for (int i = 0; i < sh_nmounts; i++)
        m[(unsigned char)sh_mounts[i].path[1]] = 1;
    if (sh_nmounts)
        m['.'] = m['/'] = 1;
    if (sh_nmounts)
        m['p'] = m['d'] = 1;   /* /proc/self/cwd/..., /dev/fd/N/...: magic links into the mounts (magic_classify) */
    if (sh_env_error[0] && !__atomic_load_n(&sh_env_error_logged, __ATOMIC_ACQUIRE))
        memset(m, 1, sizeof m);
    for (int i = 0; i < 256; i++)
        __atomic_store_n(&sh_first_map[i], m[i], __ATOMIC_RELAXED);
}

/* Lexical normalisation of an absolute path: "//a/./b/../c/" -> "/a/c". *slash = it ended in '/' (or /. /..);
 * *dotdot = it had a ".." component. 0 or -ENAMETOOLONG. */
static int normalise(const char *in, char *out, size_t outn, int *slash, int *dotdot)
{
    size_t o = 0, n;
    const char *p = in, *s;
    int trailing = 0, dd = 0;
    while ((n = sh_next_comp(&p, &s))) {
        int dot = sh_dot_comp(s, n);
        trailing = dot != 0;
        if (dot == 2) {
            o = sh_drop_comp(out, o);
            dd = 1;
        }
        if (dot)
            continue;
        if (o + 1 + n + 1 > outn)
            return -ENAMETOOLONG;
        out[o++] = '/';
        memcpy(out + o, s, n);
        o += n;
    }
    if (p > in && p[-1] == '/')
        trailing = 1;
    if (o == 0)
        out[o++] = '/';
    out[o] = 0;
    if (slash)
        *slash = trailing;
    if (dotdot)
        *dotdot = dd;
    return 0;
}

int sh_normalise(const char *in, char *out, size_t outn, int *slash)
{
    return normalise(in, out, outn, slash, NULL);
}

/* --- classification ---------------------------------------------------------------------------------- */

/* 1 when the normalised path o[0..ol) is mount m's root or below it. */
static int in_mount(const char *o, size_t ol, const struct sh_mount *m)
{
    return ol >= m->len && !memcmp(o, m->path, m->len) && (ol == m->len || o[m->len] == '/');
}

/* ".." inside a mount, as the kernel takes it: normalisation dropped a component without looking it up, but
 * "file/.." is ENOTDIR, "missing/.." ENOENT and "dirlink/.." the parent of the link's target. When the path
 * (which lands in mount m) applied a ".." below m's root, l->raw gets the spelling from where the path last
 * entered m's root from above, unnormalised (in l->scr->b), and sh_resolve walks that with the walk's ".."
 * (one level up from the entry reached). A ".." that climbs out of a mount's root from inside stays lexical:
 * what precedes it is not looked up ("m/file/../../m/x" answers for m/x where the kernel says ENOTDIR). */
static void raw_rel(const char *path, const struct sh_mount *m, struct sh_loc *l)
{
    char *o = l->scr->c;
    size_t ol = 0, n;
    const char *p = path, *s, *from = NULL;
    int dd = 0;
    while ((n = sh_next_comp(&p, &s))) {
        int dot = sh_dot_comp(s, n), was_in = in_mount(o, ol, m);
        if (dot == 2) {
            ol = sh_drop_comp(o, ol);
        } else if (!dot) {
            if (ol + 1 + n > SH_SCR)
                return;
            o[ol] = '/';
            memcpy(o + ol + 1, s, n);
            ol += 1 + n;
        }
        if (!in_mount(o, ol, m))
            from = NULL;
        else if (!was_in)
            from = p, dd = 0;   /* entered the root from above: the raw part starts after this component */
        else if (dot == 2)
            dd = 1;
    }
    if (!from || !dd || strlen(from) >= SH_SCR)
        return;
    strcpy(l->scr->b, from);
    l->raw = l->scr->b;
}

/* The directory the kernel reaches at the logical path o (no "." or ".." in it; the spelling goes on below it),
 * written back into o as the place a ".." climbs from: inside a mount its entry's own path (symlinks
 * followed: "m/lnk/.." is the parent of lnk's target), a synthesized ancestor as it is, a real directory as
 * the kernel resolves it (mapped back when that is a mount's skeleton). 0, 1 when it cannot be decided here (a
 * vfork child, a mount not loaded), or -errno: ENOENT, ENOTDIR ("m/a.txt/.."), ELOOP, EIO. *virt: set when
 * it was a mount's or an ancestor. */
static int classify_plain(const char *path, struct sh_loc *l);

static int kdir(char *o, int *virt)
{
    SH_LOC(c);
    int k = classify_plain(o, &c);
    struct stat st;
    if (k == L_ANC && sh_r.lstat(o, &st) < 0) {
        *virt = 1;
        return 0;   /* synthesized: a directory, and ".." is its lexical parent */
    }
    if (k == L_MNT) {
        *virt = 1;
        const struct sh_mount *m;
        uint32_t e;
        int rc = sh_resolve(&c, 1, &m, &e);
        if (rc == -EAGAIN)
            return 1;
        if (rc < 0)
            return rc;
        if (rc == 0 && m->ents[e].type != HFS3_IX_DIR)
            return -ENOTDIR;
        const char *r = rc == 1 ? "" : sh_epath(m, e);
        return (size_t)snprintf(o, SH_PATH, "%s%s%s", m->path, *r ? "/" : "", r) < SH_PATH ? 0 : -ENAMETOOLONG;
    }
    /* real (or an ancestor that exists on disk): where the kernel is (a real symlink into a mount followed
     * by "..": the kernel's answer, ENOENT; sh_fallback is not asked, it classifies spellings with "..") */
    SH_SCRATCH(t);
    if (!sh_r.realpath(o, t->a))
        return -errno;
    if (sh_r.stat(t->a, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    if (!sh_map_back(t->a, o, SH_PATH)) {
        if (strlen(t->a) >= SH_PATH)
            return -ENAMETOOLONG;
        strcpy(o, t->a);
    } else {
        *virt = 1;
    }
    return 0;
}

/* A spelling with "..", walked as the kernel walks it: every component that a ".." comes after is looked up
 * as a directory (kdir), and the ".." climbs from where that lookup landed; the components after the last ".."
 * are left to the caller's lexical classification, as in a spelling without one. So "m/a.txt/../.." is ENOTDIR,
 * "m/missing/../x" ENOENT, "m/lnk/../../a" (lnk -> a/b) stays in m, and "/models/.." (an ancestor) is the real
 * "/", never the cache's directory behind the ancestor. Into out (SH_PATH): the path reached, normalised. 0,
 * 1 when it cannot be decided here (the lexical answer stands), -errno. *virt: the walk went through a mount
 * or an ancestor (otherwise the kernel takes the spelling as it is). */
static int kwalk(const char *in, char *out, int *virt)
{
    const char *p = in, *s, *last = in;
    size_t n, ol = 0;
    while ((n = sh_next_comp(&p, &s)))
        if (sh_dot_comp(s, n) == 2)
            last = s;
    out[0] = 0;
    p = in;
    while ((n = sh_next_comp(&p, &s))) {
        int dot = sh_dot_comp(s, n);
        if (dot == 2) {
            ol = sh_drop_comp(out, ol);
            out[ol] = 0;
            continue;
        }
        if (dot == 1)
            continue;
        if (ol + 1 + n + 1 > SH_PATH)
            return -ENAMETOOLONG;
        out[ol] = '/';
        memcpy(out + ol + 1, s, n);
        ol += 1 + n;
        out[ol] = 0;
        if (s > last)
            continue;   /* no ".." after it: looked up by whoever answers for the whole path */
        if (n > NAME_MAX)
            return -ENAMETOOLONG;
        int rc = kdir(out, virt);
        if (rc)
            return rc;
        ol = strlen(out);
        if (ol == 1)
            ol = 0;   /* "/" */
    }
    if (ol == 0)
        strcpy(out, "/");
    return 0;
}

/* The first step of a classification: 0 for a path surely outside (its first component is no mount's), else 1
 * with l->path the normalised spelling (*dotdot: it had a ".."). */
static int classify_prep(const char *path, struct sh_loc *l, int *dotdot)
{
    const char *p = path, *s;
    size_t n = sh_next_comp(&p, &s);
    int maybe = sh_dot_comp(s, n) != 0;
    for (int i = 0; i < sh_nmounts && !maybe; i++)
        if (sh_mounts[i].first_len - 1 == n && !memcmp(sh_mounts[i].path + 1, s, n))
            maybe = 1;
    l->kind = L_NONE;
    l->raw = NULL;
    l->kpath = NULL;
    l->link = NULL;
    l->err = 0;
    if (!maybe)
        return 0;
    if (!l->scr)
        l->scr = sh_scratch_get();
    l->path = l->scr->a;
    return normalise(path, l->path, SH_PATH, &l->slash, dotdot) == 0;
}

static int classify_lex(const char *path, struct sh_loc *l, int dotdot, int kw);

/* sh_classify_abs for a spelling without "..": no kernel walk (kdir and map_under, which kwalk reaches) */
static int classify_plain(const char *path, struct sh_loc *l)
{
    int dotdot;
    if (!classify_prep(path, l, &dotdot))
        return L_NONE;
    return classify_lex(path, l, dotdot, 1);
}

int sh_classify_abs(const char *path, struct sh_loc *l)
{
    int dotdot;
    if (!classify_prep(path, l, &dotdot))
        return L_NONE;
    int virt = 0, kw = 1;
    if (dotdot) {
        int e = errno;
        kw = kwalk(path, l->scr->d, &virt);
        errno = e;
    }
    if (kw < 0 && !virt)
        return L_NONE;   /* it fails before it reaches a mount: the kernel says why, from the spelling */
    if (kw < 0) {
        /* the kernel's walk fails inside the mounts' tree: every call gives its errno (sh_resolve) */
        l->kind = L_MNT;
        l->m = 0;
        l->rel = "";
        l->err = kw;
        return L_MNT;
    }
    if (kw == 0) {
        strcpy(l->path, l->scr->d);   /* ".." taken: what follows is a spelling without one */
        if (virt)
            l->kpath = l->path;       /* for a real call (an ancestor on disk, or out of the mounts) */
    }
    return classify_lex(path, l, dotdot, kw);
}

/* The rest of a classification, on l->path: the mount or ancestor it names, lexically. */
static int classify_lex(const char *path, struct sh_loc *l, int dotdot, int kw)
{
    size_t len = strlen(l->path);
    for (int i = 0; i < sh_nmounts; i++) {
        const struct sh_mount *m = &sh_mounts[i];
        if (in_mount(l->path, len, m)) {
            l->kind = L_MNT;
            l->m = i;
            l->rel = l->path + m->len + (l->path[m->len] == '/');
            sh_hub_classify(l);   /* a hub's repository: its sub-mount (hub.c) */
            if (kw && dotdot && !sh_mnt(l->m)->hub)   /* a hub's own root: its names stay lexical */
                raw_rel(path, sh_mnt(l->m), l);
            return L_MNT;
        }
    }
    if (len > 1)
        for (int i = 0; i < sh_nmounts; i++) {
            const struct sh_mount *m = &sh_mounts[i];
            if (len < m->len && !memcmp(l->path, m->path, len) && m->path[len] == '/') {
                l->kind = L_ANC;
                l->m = i;
                l->rel = NULL;
                return L_ANC;
            }
        }
    /* a name longer than NAME_MAX right below a synthesized ancestor: the kernel's lookup stops there with
     * ENAMETOOLONG, where the real call (which finds no ancestor on disk) would say ENOENT */
    size_t al = 0;
    for (int i = 0; i < sh_nmounts; i++) {
        const struct sh_mount *m = &sh_mounts[i];
        size_t k = 0, whole = 0;
        while (k < len && k < m->len && l->path[k] == m->path[k])
            if (l->path[k++] == '/')
                whole = k - 1;   /* l->path[0..whole) is a whole-component prefix of the mount's path */
        if (whole > al)
            al = whole;
    }
    if (al > 1) {
        const char *c = l->path + al + 1, *ce = strchr(c, '/');
        size_t cn = ce ? (size_t)(ce - c) : strlen(c);
        struct stat st;
        l->path[al] = 0;
        int ondisk = sh_r.lstat(l->path, &st) == 0;
        l->path[al] = '/';
        if (cn > NAME_MAX && !ondisk) {
            l->kind = L_MNT;
            l->m = 0;
            l->rel = "";
            l->err = -ENAMETOOLONG;
            return L_MNT;
        }
    }
    /* out of the mounts' tree through a "..": the real call goes where the kernel would go (kpath); a last "." or
     * ".." stays a last ".": the kernel resolves the directory it names before a create or an open looks at it
     * ("x/missing/." is ENOENT, never a mkdir of x/missing; "x/.." is a directory: EEXIST, EISDIR) */
    size_t pn = strlen(path);
    while (pn > 1 && path[pn - 1] == '/')
        pn--;
    int dot = l->kpath && pn && path[pn - 1] == '.' &&
              (pn == 1 || path[pn - 2] == '/' || (path[pn - 2] == '.' && (pn == 2 || path[pn - 3] == '/')));
    if (dot && len + 2 < SH_PATH)
        strcpy(l->path + len, len > 1 ? "/." : ".");
    else if (l->kpath && l->slash && len > 1 && len + 1 < SH_PATH)
        strcpy(l->path + len, "/");
    return L_NONE;
}

static int map_under(const char *real, const char *cache, char *out, size_t outn)
{
    size_t cl = strlen(cache);
    if (strncmp(real, cache, cl) || strncmp(real + cl, "/mounts/", 8))
        return 0;
    const char *r = real + cl + 8;
    /* ancestors/..., or this user's own anc.<uid>[.<random>]/... (tree.c, under HFS3_VERIFY_FOREIGN=1) */
    size_t al = !strncmp(r, "ancestors", 9) && (r[9] == '/' || !r[9]) ? 9
                : !strncmp(r, "anc.", 4) && r[4] >= '0' && r[4] <= '9' ? strcspn(r, "/") : 0;
    if (al) {
        const char *tail = r + al;
        SH_LOC(l);
        if (classify_plain(*tail ? tail : "/", &l) != L_ANC)
            return 0;
        return (size_t)snprintf(out, outn, "%s", l.path) < outn;
    }
    for (int i = 0; i < sh_nmounts; i++) {
        const struct sh_mount *m = &sh_mounts[i];
        if (!strncmp(r, m->key, 16) && !strncmp(r + 16, "/tree", 5) && (r[21] == '/' || !r[21]))
            return (size_t)snprintf(out, outn, "%s%s", m->path, r + 21) < outn;
    }
    return sh_hub_map(r, out, outn);
}

int sh_map_back(const char *real, char *out, size_t outn)
{
    if (!sh_nmounts || !strstr(real, "/mounts/"))
        return 0;
    if (map_under(real, sh_cache, out, outn))
        return 1;
    if (sh_cache_real[0])
        return map_under(real, sh_cache_real, out, outn);
    /* the cache is not decided in this process yet (a cwd inherited from the parent): its real path now */
    SH_SCRATCH(t);
    return sh_r.realpath(sh_cache, t->a) && map_under(real, t->a, out, outn);
}

/* A relative name from a directory of the mounts' tree (a cwd or a descriptor in a skeleton directory or a
 * synthesized ancestor) that names neither a mount nor an ancestor: the kernel would look it up in the cache's copy
 * (CACHE/mounts/ancestors/...), where a member of a shared cache can have made an entry; on a read-only tree only
 * the mounts and their ancestors are there. The real call goes to the logical path (l->kpath): ENOENT unless the
 * host has it; a create there is the ancestor's EROFS (sh_anc_create_err). */
static int rel_logical(int k, struct sh_loc *l)
{
    if (k != L_NONE || l->kpath || !l->scr || l->path != l->scr->a)
        return k;
    size_t len = strlen(l->path);
    if (l->slash && len > 1 && len + 1 < SH_PATH)
        strcpy(l->path + len, "/");
    l->kpath = l->path;
    return k;
}

/* Classifies path relative to the cwd when the cwd is inside the skeleton of a mount (or an ancestor). */
static int cwd_classify(const char *path, struct sh_loc *l)
{
    unsigned long w = __atomic_load_n(&sh_cwd_word, __ATOMIC_ACQUIRE);
    if (w & 1)
        return L_NONE;
    SH_SCRATCH(t);
    if (!sh_r.getcwd(t->a, SH_SCR))
        return L_NONE;
    if (sh_map_back(t->a, t->b, SH_PATH)) {
        if ((size_t)snprintf(t->c, SH_SCR, "%s/%s", t->b, path) >= SH_SCR)
            return L_NONE;
        return rel_logical(sh_classify_abs(t->c, l), l);
    }
    /* not in a mount: remember it, unless a chdir came in between (vfork children share the word: no) */
    if (!sh_in_vfork())
        __atomic_compare_exchange_n(&sh_cwd_word, &w, w | 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    return L_NONE;
}

void sh_cwd_changed(void)
{
    /* a new generation, "unknown" (bit 0 clear); in a vfork child too: the parent's cwd is not affected, but
     * forgetting costs the parent one getcwd, while a stale "not in a mount" would answer wrongly */
    unsigned long w = __atomic_load_n(&sh_cwd_word, __ATOMIC_RELAXED), n;
    do
        n = (w | 1) + 1;
    while (!__atomic_compare_exchange_n(&sh_cwd_word, &w, n, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
}

static int join_classify(const char *base, const char *path, struct sh_loc *l)
{
    SH_SCRATCH(t);
    if ((size_t)snprintf(t->a, SH_SCR, "%s/%s", base, path) >= SH_SCR)
        return L_NONE;
    return rel_logical(sh_classify_abs(t->a, l), l);
}

int sh_classify(int dirfd, const char *path, struct sh_loc *l)
{
    l->kind = L_NONE;
    /* before the no-mount exit: an HFS3_MOUNTS with no valid mount left is still said once */
    if (__builtin_expect(sh_env_error[0], 0) && !__atomic_exchange_n(&sh_env_error_logged, 1, __ATOMIC_ACQ_REL)) {
        int e = errno;
        sh_log(0, "%s", sh_env_error);
        sh_filter_build();
        errno = e;
    }
    if (!sh_nmounts || !path || !*path)
        return L_NONE;
    /* the kernel refuses a spelling of PATH_MAX bytes or more before any lookup, whatever it would resolve to */
    if (strnlen(path, PATH_MAX) >= PATH_MAX)
        return L_NONE;
    return sh_classify_long(dirfd, path, l);
}

/* The magic link a spelling starts with: "/proc/P/cwd", "/proc/P/fd/N", "/proc/P/task/T/cwd" (P self, thread-self
 * or a pid), "/dev/fd/N"; its length (the rest of the spelling follows it: "" or "/..."), *fd N (-1 for a cwd),
 * *own 1 when the descriptor is this process's. 0: no such spelling (other spellings of /proc are left to the
 * kernel: docs/reference.md's known limits). */
static long magic_num(const char **q)
{
    const char *s = *q;
    long v = 0;
    while (*s >= '0' && *s <= '9' && v < (1L << 30))
        v = v * 10 + (*s++ - '0');
    if (s == *q || (*s && *s != '/'))
        return -1;
    *q = s;
    return v;
}

static size_t magic_len(const char *p, int *fd, int *own)
{
    const char *q;
    long v;
    *fd = -1;
    *own = 1;
    if (!strncmp(p, "/dev/fd/", 8)) {
        q = p + 8;
    } else {
        if (strncmp(p, "/proc/", 6))
            return 0;
        q = p + 6;
        if (!strncmp(q, "self/", 5))
            q += 5;
        else if (!strncmp(q, "thread-self/", 12))
            q += 12;
        else if ((v = magic_num(&q)) >= 0 && *q == '/')
            *own = v == (long)getpid(), q++;
        else
            return 0;
        if (!strncmp(q, "task/", 5)) {
            q += 5;
            if (magic_num(&q) < 0 || *q != '/')
                return 0;
            q++;
        }
        if (!strncmp(q, "cwd", 3) && (!q[3] || q[3] == '/'))
            return (size_t)(q + 3 - p);
        if (strncmp(q, "fd/", 3))
            return 0;
        q += 3;
    }
    if ((v = magic_num(&q)) < 0)
        return 0;
    *fd = (int)v;
    return (size_t)(q - p);
}

/* A spelling through a magic link of /proc or /dev/fd whose target is in the mounts' tree (a cwd or a directory
 * descriptor in a mount's skeleton or an ancestor's, a descriptor the shim returned): the kernel follows the link to
 * the real directory, the cache's skeleton, which holds only directories; the shim's answer is the logical path's
 * (the link's target as the kernel gives it for a real folder, then the rest of the spelling). The kind, or -1: no
 * such spelling, or its link leads elsewhere (the real call answers). A bare link gets l->link. */
static int magic_classify(const char *path, struct sh_loc *l)
{
    int fd, own;
    size_t n = magic_len(path, &fd, &own);
    if (!n)
        return -1;
    int e = errno, got = 0;
    SH_SCRATCH(t);
    char *lg = t->b;
    if (fd >= 0 && own) {
        /* a descriptor the shim returned: its entry (an O_PATH one of a file lives on its parent's skeleton) */
        SH_LOC(b);
        if (sh_fd_dirloc(fd, &b) && b.kind != L_NONE && strlen(b.path) < SH_PATH)
            got = 1, strcpy(lg, b.path);
    }
    if (!got && n < SH_SCR) {
        memcpy(t->a, path, n);
        t->a[n] = 0;
        ssize_t k = sh_r.readlink(t->a, t->c, SH_SCR - 1);
        if (k > 0) {
            t->c[k] = 0;
            got = t->c[0] == '/' && sh_map_back(t->c, lg, SH_PATH);
        }
    }
    int k = -1;
    if (got && (size_t)snprintf(t->d, SH_SCR, "%s%s", strcmp(lg, "/") ? lg : "", path[n] ? path + n : "") < SH_PATH) {
        k = sh_classify_abs(*t->d ? t->d : "/", l);
        if (k == L_NONE)
            k = -1;
        else if (!path[n])
            l->link = path;
    }
    errno = e;
    return k;
}

int sh_classify_long(int dirfd, const char *path, struct sh_loc *l)
{
    l->kind = L_NONE;
    l->link = NULL;
    if (!sh_nmounts || !path || !*path)
        return L_NONE;
    if (path[0] == '/' && (path[1] == 'p' || path[1] == 'd')) {
        int k = magic_classify(path, l);
        if (k >= 0)
            return k;
    }
    if (path[0] == '/')
        return sh_classify_abs(path, l);
    int e = errno;
    int k = L_NONE;
    if (dirfd == AT_FDCWD) {
        k = cwd_classify(path, l);
    } else {
        SH_LOC(b);
        if (sh_fd_dirloc(dirfd, &b))
            k = join_classify(b.path, path, l);
    }
    errno = e;
    return k;
}

/* Most calls that fail outside the mounts name a missing entry of a directory that exists (an interpreter
 * probing its search path). If that directory opens, the kernel resolved every symlink on the way; where it
 * really is, plus the last component (when that is not a link itself), says whether the path can lead into
 * a mount: four system calls instead of a readlink per component (a third less time for the 8-component
 * paths of a Python site-packages). 1: it cannot (the caller's real answer stands); 0: walk the path. */
static int parent_rules_out(const char *abs)
{
    /* measured: below five components the walk is as cheap */
    int comps = 0;
    for (const char *c = abs; *c; c++)
        comps += *c == '/';
    const char *slash = strrchr(abs, '/');
    if (comps < 5 || !slash || slash == abs || !slash[1] || sh_dot_comp(slash + 1, strlen(slash + 1)))
        return 0;
    SH_SCRATCH(t);
    char *dir = t->a, *real = t->b, *full = t->c, pp[32];
    size_t dl = (size_t)(slash - abs);
    if (dl >= SH_PATH)
        return 0;
    memcpy(dir, abs, dl);
    dir[dl] = 0;
    int fd = sh_r.open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int last_is_link = sh_r.fstatat(fd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, real, SH_PATH - 1);
    sh_r.close(fd);
    if (last_is_link || k <= 0 || real[0] != '/')
        return 0;
    real[k] = 0;
    if (sh_map_back(real, full, SH_PATH))
        return 0;   /* a directory of the mounts' skeleton (reached through /proc/self/fd/N): the walk maps it */
    SH_LOC(l);
    if ((size_t)snprintf(full, SH_SCR, "%s%s", real, slash) >= SH_SCR)
        return 0;
    return sh_classify_abs(full, &l) == L_NONE;
}

/* One system call that rules most failed calls out: openat2 with RESOLVE_NO_SYMLINKS walks the same path and
 * fails with ENOENT/ENOTDIR only when it reached the missing component without meeting a symlink, and then
 * the real path is the lexical one the caller already classified. 1: no symlink on the way (the caller's real
 * answer stands, for an absolute path); 0: a symlink on the way (ELOOP), it exists now, or openat2 is not
 * there (ENOSYS, or EPERM from a seccomp filter: remembered, not asked again): walk. errno is the caller's. */
static int nosym_miss(int dirfd, const char *path)
{
    static int unusable;
    if (__atomic_load_n(&unusable, __ATOMIC_RELAXED))
        return 0;
    struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0) {
        sh_r.close((int)fd);
        return 0;
    }
    if (errno == ENOENT || errno == ENOTDIR)
        return 1;
    if (errno == ENOSYS || errno == EPERM || errno == E2BIG)
        __atomic_store_n(&unusable, 1, __ATOMIC_RELAXED);
    return 0;
}

int sh_fallback(int dirfd, const char *path, struct sh_loc *l)
{
    l->kind = L_NONE;
    l->kpath = NULL;
    l->link = NULL;
    if (!sh_nmounts || !path || !*path)
        return L_NONE;   /* (a spelling of PATH_MAX bytes or more fails with ENAMETOOLONG: never comes here) */
    int e = errno;
    if (path[0] == '/' && nosym_miss(AT_FDCWD, path)) {
        errno = e;
        return L_NONE;
    }
    SH_SCRATCH(t);
    /* rem: what is left to walk; res: the resolved real prefix; tmp, tgt: for splicing in a link's target */
    char *rem = t->a, *res = t->b, *tmp = t->c, *tgt = t->d;
    if (path[0] == '/') {
        if (strlen(path) >= SH_SCR)
            goto none;
        strcpy(rem, path);
    } else {
        char *base = tmp, *lg = tgt;
        if (dirfd == AT_FDCWD) {
            if (!sh_r.getcwd || !sh_r.getcwd(base, SH_SCR))
                goto none;
        } else {
            char pp[32];
            snprintf(pp, sizeof pp, "/proc/self/fd/%d", dirfd);
            ssize_t k = sh_r.readlink(pp, base, SH_SCR - 1);
            if (k <= 0 || base[0] != '/')
                goto none;
            base[k] = 0;
        }
        const char *b = sh_map_back(base, lg, SH_PATH) ? lg : base;
        if ((size_t)snprintf(rem, SH_SCR, "%s/%s", b, path) >= SH_SCR)
            goto none;
    }
    if (path[0] != '/' && nosym_miss(dirfd, path)) {
        /* no symlink in the relative part: the base (the cwd, a directory descriptor) is a real path, so the
         * joined path is where the call went; a mount's ancestor (cwd "/", path "models/x") is still one */
        if (sh_classify_abs(rem, l) == L_NONE)
            goto none_kpath; /* ("./top/.." from the parent of an ancestor: where the kernel goes, l->kpath) */
        l->kpath = NULL;
    } else if (parent_rules_out(rem))
        goto none;
    size_t rl = 0;   /* res holds the resolved real prefix ("" = root) */
    res[0] = 0;
    int hops = 0;
    const char *p = rem, *s;
    size_t n;
    while ((n = sh_next_comp(&p, &s))) {
        int dot = sh_dot_comp(s, n);
        if (dot == 1)
            continue;
        if (dot == 2) {
            rl = sh_drop_comp(res, rl);
            res[rl] = 0;
            continue;
        }
        if (rl + 1 + n >= SH_PATH)
            goto none;
        res[rl] = '/';
        memcpy(res + rl + 1, s, n);
        res[rl + 1 + n] = 0;
        SH_LOC(c);
        int ck = sh_classify_abs(res, &c);
        if (ck != L_NONE) {
            if ((size_t)snprintf(tmp, SH_SCR, "%s%s", res, p) >= SH_SCR)
                goto none;
            int fk = sh_classify_abs(tmp, l);
            if (fk == L_MNT || (fk == L_ANC && ck == L_ANC)) {
                errno = e;
                return fk;
            }
        }
        ssize_t k = sh_r.readlink(res, tgt, SH_PATH - 1);
        if (k >= 0) {
            if (++hops > SH_MAX_HOPS)
                goto none;
            tgt[k] = 0;
            /* a magic link of /proc (a cwd, a descriptor) into a mount's skeleton: the logical directory, as for
             * the spelling from "/" (magic_classify), so that "cwd/x" from /proc/self finds x */
            if (tgt[0] == '/' && !strncmp(res, "/proc/", 6) && sh_map_back(tgt, tmp, SH_PATH))
                strcpy(tgt, tmp);
            if ((size_t)snprintf(tmp, SH_SCR, "%s%s", tgt, p) >= SH_SCR)
                goto none;
            strcpy(rem, tmp);
            p = rem;
            if (tgt[0] == '/')
                rl = 0;
            res[rl] = 0;
            continue;
        }
        if (errno != EINVAL)
            goto none;
        rl += 1 + n;
    }
none:
    l->kpath = NULL;
none_kpath:
    l->kind = L_NONE;
    errno = e;
    return L_NONE;
}

