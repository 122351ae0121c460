/* wguard.c - the write guard's kernel half: a write the kernel would resolve into the cache's copy of a mount (a
 * skeleton directory CACHE/mounts/<key>/tree..., a synthesized ancestor CACHE/mounts/ancestors...) or into the
 * blobs every process shares (CACHE/blobs, the blobs themselves: a file opened in a mount is one), or anywhere
 * else in the cache (what `..` reaches from a skeleton directory: CACHE/mounts/<key>) gives EROFS,
 * whatever the spelling: /proc/self/fd/N or /proc/self/cwd, a cwd or a dirfd there, a symlink to the mount point
 * or to a directory above it or to a blob. The classifier (path.c) reads spellings; this asks the kernel where the
 * object really is. Only write calls come here, and only when mounts are configured and the process is not the
 * helper (sh_wguard_on in shim.h). */
#include "shim.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

/* 1 when real (a canonical absolute path) is the cache directory or lies below it: the blobs every process shares,
 * the mounts' skeletons (CACHE/mounts/<key>/tree), the synthesized ancestors (CACHE/mounts/ancestors) and what
 * `..` reaches from them (CACHE/mounts/<key>), the helper's own files. Only the helper writes there. */
static int skel_under(const char *real, const char *cache)
{
    size_t cl = strlen(cache);
    return cl > 1 && !strncmp(real, cache, cl) && (real[cl] == '/' || !real[cl]);
}

/* Without /proc (a chroot, a bare container) no descriptor has a path: 1 when fd is, by its identity, a guarded
 * object. A directory is walked up with ".." (at most 256 levels) and compared with the cache directory and the
 * configured mount points that exist on disk; a file cannot be walked up, so a regular file without write
 * permission on the cache's device is taken for a blob (the helper installs them 0444 or 0440). */
static __attribute__((noinline)) int fd_guarded_noproc(int fd)
{
    struct stat st, rc, x;
    if (sh_r.fstat(fd, &st) < 0)
        return 0;
    int hc = sh_r.stat(sh_cache, &rc) == 0;
    if (!S_ISDIR(st.st_mode))
        return hc && S_ISREG(st.st_mode) && st.st_dev == rc.st_dev && !(st.st_mode & 0222);
    int cur = sh_r.openat(fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC), hit = 0;
    for (int lvl = 0; cur >= 0 && lvl < 256 && !hit; lvl++) {
        if (sh_r.fstat(cur, &st) < 0)
            break;
        hit = hc && st.st_dev == rc.st_dev && st.st_ino == rc.st_ino;
        for (int i = 0; i < sh_nmounts && !hit; i++)
            hit = sh_r.stat(sh_mounts[i].path, &x) == 0 && x.st_dev == st.st_dev && x.st_ino == st.st_ino;
        int up = sh_r.openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (up >= 0 && sh_r.fstat(up, &x) == 0 && x.st_dev == st.st_dev && x.st_ino == st.st_ino) {
            sh_r.close(up); /* the root: ".." is itself */
            up = -1;
        }
        sh_r.close(cur);
        cur = up;
    }
    if (cur >= 0)
        sh_r.close(cur);
    return hit;
}

/* 1 when the directory or file fd is open on (a kernel object, whatever path reached it) is in the cache (its
 * skeleton, its ancestors, its blobs: skel_under), or its real path is a mount's (a real directory at the mount point, or in one). Uses
 * t->b and t->c. When /proc does not answer, fd_guarded_noproc decides. */
static int real_in_skel(struct sh_scratch *t);
static int fd_in_skel(int fd, struct sh_scratch *t)
{
    char pp[32];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, t->b, SH_SCR - 1);
    if (k < 0)
        return fd_guarded_noproc(fd);
    if (k <= 0 || t->b[0] != '/')
        return 0;
    t->b[k] = 0;
    return real_in_skel(t);
}

/* fd_in_skel's verdict on the real path in t->b (uses t->c) */
static int real_in_skel(struct sh_scratch *t)
{
    /* a real directory at a mount's path (the host's, shown as the mount): the kernel writes there */
    SH_LOC(l);
    if (sh_classify_abs(t->b, &l) == L_MNT)
        return 1;
    if (skel_under(t->b, sh_cache))
        return 1;
    if (sh_cache_real[0])
        return skel_under(t->b, sh_cache_real);
    /* the cache is not decided in this process yet (a cwd or descriptor inherited from the parent): its real path,
     * found once (a thread that finds another finding it, or a child forked meanwhile, looks for itself) */
    static char real[SH_PATH];
    static int state; /* atomic: 0 not found, 1 being found, 2 in real */
    int z = 0;
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == 2)
        return skel_under(t->b, real);
    if (__atomic_compare_exchange_n(&state, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        int ok = sh_r.realpath(sh_cache, t->c) && strlen(t->c) < sizeof real;
        if (ok)
            memcpy(real, t->c, strlen(t->c) + 1);
        __atomic_store_n(&state, ok ? 2 : 0, __ATOMIC_RELEASE);
        return ok && skel_under(t->b, real);
    }
    return sh_r.realpath(sh_cache, t->c) && skel_under(t->b, t->c);
}

/* For open(2) flags, the entry base of a guarded directory pfd: 1 when the real call may run, as the kernel's on a
 * read-only file system would: the entry is there and O_CREAT|O_EXCL (EEXIST), or it is a directory (the kernel
 * answers EISDIR, EINVAL, ENOTDIR... before it writes anything), or nothing writes (no write access, no O_TRUNC:
 * it opens). */
static int open_existing_ok(int pfd, const char *base, int oflags)
{
    struct stat st;
    if ((oflags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
        return sh_r.fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (sh_r.fstatat(pfd, base, &st, (oflags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0) != 0)
        return 0;
    return S_ISDIR(st.st_mode) || !(oflags & (O_WRONLY | O_RDWR | O_TRUNC));
}

/* An open of the entry base of an unguarded directory pfd whose last component is a symlink (followed, as the
 * kernel would: no O_NOFOLLOW): 1 when its target is guarded and the open writes it (a blob behind
 * /proc/self/fd/N, a file under a mount's real directory). A dangling symlink: 2 (the kernel creates its target
 * when O_CREAT: the caller follows it). Uses t->b and t->c, and the caller's st (the stack budget: the caller's
 * chain is on the write path of every call outside the mounts, 2 KiB in all). */
static int open_through_link(int pfd, const char *base, int oflags, struct sh_scratch *t, struct stat *st)
{
    if (sh_r.fstatat(pfd, base, st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st->st_mode))
        return 0;
    if (sh_r.fstatat(pfd, base, st, 0) != 0)
        return errno == ENOENT && (oflags & O_CREAT) ? 2 : 0;
    if (S_ISDIR(st->st_mode) || !(oflags & (O_WRONLY | O_RDWR | O_TRUNC)))
        return 0; /* the kernel's EISDIR, or an open that writes nothing */
    int fd = sh_r.openat(pfd, base, O_PATH | O_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
        /* no descriptor to look with (issue 41: one left, the program's): the target's real path, found with none
         * (/proc/self/fd/PFD, the name, realpath), decides; one that cannot be found is refused */
        char pp[32];
        snprintf(pp, sizeof pp, "/proc/self/fd/%d", pfd);
        ssize_t k = sh_r.readlink(pp, t->c, SH_SCR - 1);
        if (k <= 0 || (size_t)k + strlen(base) + 2 >= SH_SCR)
            return 1;
        t->c[k] = 0;
        snprintf(t->c + k, SH_SCR - (size_t)k, "/%s", base);
        if (!sh_r.realpath(t->c, t->b))
            return 1;
        return real_in_skel(t);
    }
    if (fd < 0)
        return 0;
    int hit = fd_in_skel(fd, t);
    sh_r.close(fd);
    return hit;
}

/* The directories this thread last found unguarded, by identity: a write's directory is looked up by one fstatat
 * instead of an open, a readlink and a close (t_shim_writes.sh counts). The change time is part of the identity:
 * a directory renamed (into a mount's path, say) or removed and its inode reused is not the one remembered.
 * Per thread: no lock; a child of fork() keeps what is still true of the same directories. */
#define MEMO_N 4
static __thread struct memo {
    dev_t dev;
    ino_t ino;
    struct timespec ctim;
} memo_tab[MEMO_N];
static __thread unsigned memo_next;

static int memo_has(const struct stat *st)
{
    for (int i = 0; i < MEMO_N; i++) {
        const struct memo *m = &memo_tab[i];
        if (m->ino == st->st_ino && m->dev == st->st_dev && m->ctim.tv_sec == st->st_ctim.tv_sec &&
            m->ctim.tv_nsec == st->st_ctim.tv_nsec && m->ino)
            return 1;
    }
    return 0;
}

/* remembers st, the identity of the directory fd was checked on, unless fd is another one (replaced meanwhile) */
static void memo_add(int fd, const struct stat *st)
{
    struct stat now;
    if (sh_r.fstat(fd, &now) < 0 || now.st_ino != st->st_ino || now.st_dev != st->st_dev ||
        now.st_ctim.tv_sec != st->st_ctim.tv_sec || now.st_ctim.tv_nsec != st->st_ctim.tv_nsec)
        return;
    struct memo *m = &memo_tab[memo_next++ % MEMO_N];
    m->dev = st->st_dev;
    m->ino = st->st_ino;
    m->ctim = st->st_ctim;
}

/* See shim.h. Contract: errno kept; 0 (the real call runs and answers) whenever the kernel cannot tell, e.g. the
 * parent does not exist (the real call gives ENOENT/ENOTDIR) or the path is longer than a scratch buffer.
 * open(O_CREAT) through a dangling symlink follows it (up to SH_MAX_HOPS links), as the kernel would; an open
 * without O_NOFOLLOW through a symlink to a guarded file is refused (do_open adds O_NOFOLLOW to its real call and
 * asks again, without it, on ELOOP: the common write-open costs no look at its last component). O_TMPFILE names
 * the directory written to. Stack: a struct stat and 32 bytes; the paths are in one scratch (t->a the spelling,
 * t->b/t->c the real paths, t->d a symlink's target). */
int sh_wguard_slow(int dirfd, const char *path, int how, int oflags)
{
    return sh_wguard_at(dirfd, path, how, oflags, NULL, NULL);
}

/* See shim.h. */
int sh_wguard_at(int dirfd, const char *path, int how, int oflags, int *pfd, const char **pbase)
{
    if (pfd)
        *pfd = -1;
    if (!path)
        return 0;
    int e = errno, hit = 0;
    SH_SCRATCH(t);
    if (!path[0]) { /* AT_EMPTY_PATH: the object is dirfd itself */
        hit = (how == SH_W_FOLLOW || how == SH_W_NOFOLLOW) && (oflags & AT_EMPTY_PATH) && dirfd >= 0 &&
              fd_in_skel(dirfd, t);
        errno = e;
        return hit;
    }
    size_t n = strnlen(path, PATH_MAX);
    if (n >= PATH_MAX)
        return 0; /* the real call: the kernel's ENAMETOOLONG before any lookup */
    memcpy(t->a, path, n + 1);
    int tmpfile = how == SH_W_OPEN && (oflags & __O_TMPFILE) == __O_TMPFILE;
    int held = -1; /* the directory of a dangling symlink being followed (open O_CREAT), ours to close */
    for (int hop = 0; hop <= SH_MAX_HOPS; hop++) {
        while (n > 1 && t->a[n - 1] == '/')
            t->a[--n] = 0;
        char *slash = strrchr(t->a, '/');
        const char *base = slash ? slash + 1 : t->a, *dir = t->a;
        int whole = how == SH_W_FOLLOW || how == SH_W_NOFOLLOW || tmpfile || sh_dot_comp(base, strlen(base)) ||
                    !base[0];
        if (!whole && !slash)
            dir = ".";
        else if (!whole && slash == t->a)
            dir = "/";
        else if (!whole)
            *slash = 0;
        /* a directory this thread found unguarded lately, when nothing but the directory matters: one fstatat */
        struct stat ds;
        int link = how == SH_W_OPEN && !(oflags & O_NOFOLLOW) && (oflags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
        /* the caller's call will run on the directory checked here (issue 33 item 5): no look by path first */
        int pin = pfd && !whole && held < 0;
        int memo = !pin && !whole && held < 0 && (!link || path[strlen(path) - 1] != '/') &&
                   sh_r.fstatat(dirfd, dir, &ds, 0) == 0;
        if (memo && memo_has(&ds)) {
            /* the entry's own symlink, if it is one, is still to be followed (fopen: no O_NOFOLLOW to add) */
            if (!link || (hit = open_through_link(dirfd, path, oflags, t, &ds)) != 2)
                break;
            hit = memo = 0; /* a dangling symlink: followed below */
        }
        int fl = O_PATH | O_CLOEXEC | (!whole ? O_DIRECTORY : how == SH_W_NOFOLLOW ? O_NOFOLLOW : 0);
        int fd = sh_r.openat(held >= 0 ? held : dirfd, dir, fl);
        if (fd < 0)
            break;
        if (pin && sh_r.fstat(fd, &ds) == 0) {
            /* the descriptor's identity: one this thread found unguarded lately needs no readlink */
            hit = memo_has(&ds) ? 0 : fd_in_skel(fd, t);
            memo = !hit;
        } else {
            hit = fd_in_skel(fd, t);
        }
        if (!hit && memo)
            memo_add(fd, &ds);
        if (hit && !whole && strlen(base) > NAME_MAX)
            hit = 0; /* no such name can be made: the real call gives the kernel's ENAMETOOLONG */
        if (hit && !whole && how == SH_W_CREATE) {
            /* ds is done with (memo_add above): the one struct stat of this frame */
            hit = sh_r.fstatat(fd, base, &ds, AT_SYMLINK_NOFOLLOW) != 0; /* there: the real call gives EEXIST */
        } else if (hit && !whole && how == SH_W_OPEN)
            hit = !open_existing_ok(fd, base, oflags);
        ssize_t k;
        if (!hit && !whole && link && (hit = open_through_link(fd, base, oflags, t, &ds)) == 2) {
            hit = 0;
            if ((k = REAL(readlinkat, ssize_t(*)(int, const char *, char *, size_t))(fd, base, t->d, SH_SCR - 1)) > 0) {
                /* a dangling symlink: the kernel creates its target, relative to the link's directory */
                memcpy(t->a, t->d, (size_t)k);
                t->a[k] = 0;
                n = (size_t)k;
                if (held >= 0)
                    sh_r.close(held);
                held = fd;
                continue;
            }
        }
        if (pin && !hit) {
            /* the directory checked, and the last component as the caller spelled it (trailing '/'s kept: the
             * kernel's answer to "name/" is the call's own) */
            *pfd = fd;
            *pbase = path + (slash ? (size_t)(slash + 1 - t->a) : 0);
        } else {
            sh_r.close(fd);
        }
        break;
    }
    if (held >= 0)
        sh_r.close(held);
    errno = e;
    return hit;
}

/* See shim.h. */
int sh_wguard_fd_slow(int fd)
{
    int e = errno;
    SH_SCRATCH(t);
    int hit = fd >= 0 && fd_in_skel(fd, t);
    errno = e;
    return hit;
}

/* See shim.h. */
int sh_wguard_obj_slow(int fd)
{
    int e = errno, hit = 0;
    SH_SCRATCH(t);
    struct stat a, b;
    if (fd >= 0 && !(hit = fd_in_skel(fd, t)) && sh_r.fstat(fd, &a) == 0) {
        /* a descriptor whose dentry is not connected (a handle's file not in the dentry cache) shows a path that is
         * not the object's: its identity decides (fd_guarded_noproc) */
        char pp[32];
        snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
        ssize_t k = sh_r.readlink(pp, t->d, SH_SCR - 1);
        if (k > 0)
            t->d[k] = 0;
        if (k <= 0 || t->d[0] != '/' || sh_r.stat(t->d, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
            hit = fd_guarded_noproc(fd);
    }
    errno = e;
    return hit;
}

/* See shim.h. The kernel's order (filename_create, open_last_lookups): the parent's lookup, a trailing slash on
 * an O_CREAT open (EISDIR), the name's lookup (ENAMETOOLONG), an entry there (EEXIST), a trailing slash on a
 * non-directory create (ENOENT), the read-only mount (EROFS). */
int sh_create_err(const struct sh_loc *l, int kind)
{
    struct stat st;
    if (l->err) /* a component before a ".." does not resolve: the parent's walk fails there */
        return -l->err;
    int rc = kind == SH_C_PARENT ? -ENOENT : sh_stat(l, 0, &st);
    if (rc < 0 && rc != -ENOENT)
        return -rc;
    const char *path = l->path, *slash = path ? strrchr(path, '/') : NULL;
    if (slash && slash[1]) {
        SH_SCRATCH(t);
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        memcpy(t->a, path, n);
        t->a[n] = 0;
        SH_LOC(pl);
        int k = sh_classify_abs(t->a, &pl), pr;
        if (k == L_NONE || (k == L_ANC && sh_r.lstat(t->a, &st) == 0))
            pr = sh_r.stat(t->a, &st) < 0 ? -errno : 0;
        else
            pr = sh_stat(&pl, 1, &st);
        if (pr < 0)
            return -pr;
        if (!S_ISDIR(st.st_mode))
            return ENOTDIR;
    }
    if (kind == SH_C_PARENT)
        return 0;
    if (kind == SH_C_OPEN && l->slash)
        return EISDIR;
    if (rc == 0)
        return EEXIST;
    if (slash && strlen(slash + 1) > NAME_MAX)
        return ENAMETOOLONG;
    return kind == SH_C_NODE && l->slash ? ENOENT : EROFS;
}

/* 1 when the synthesized ancestor anc (a logical path) has the entry name (n bytes): a mount or an ancestor */
static __attribute__((noinline)) int anc_has(const char *anc, const char *name, size_t n)
{
    SH_SCRATCH(t);
    if ((size_t)snprintf(t->a, SH_SCR, "%s/%.*s", strcmp(anc, "/") ? anc : "", (int)n, name) >= SH_SCR)
        return 0;
    SH_LOC(c);
    return sh_classify_abs(t->a, &c) != L_NONE;
}

/* See shim.h. */
int sh_anc_create_err(int dirfd, const char *path, int kind)
{
    size_t n = path ? strlen(path) : 0;
    int slashed = n > 1 && path[n - 1] == '/';
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *slash = n ? memrchr(path, '/', n) : NULL;
    if (!slash || n >= SH_SCR)
        return 0;
    SH_SCRATCH(t);
    size_t pn = slash == path ? 1 : (size_t)(slash - path);
    memcpy(t->a, path, pn);
    t->a[pn] = 0;
    SH_LOC(pl);
    struct stat st;
    /* (the real call failed: a cwd outside the mounts still reaches an ancestor by a relative name, the fallback's
     * walk finds it) */
    int pk = sh_outside(dirfd, t->a) ? sh_fallback(dirfd, t->a, &pl) : sh_classify(dirfd, t->a, &pl);
    if (kind == SH_C_PARENT && pk == L_MNT && sh_dot_comp(slash + 1, n - (size_t)(slash + 1 - path)))
        return EROFS; /* "m/.." or "m/dir/.": the directory is the mount's (the whole path classifies past it) */
    if (pk != L_ANC || sh_r.lstat(pl.path, &st) == 0 || sh_stat(&pl, 1, &st) < 0)
        return 0;
    if (kind == SH_C_PARENT)
        return EROFS; /* in the read-only tree: rename answers EXDEV, EBUSY ("." or ".."), EROFS: the caller */
    /* (a last "." or ".." for an open or a create: the callers answer with kopen_err, the kernel's walk of the
     * caller's spelling, first; round 5: a check of it here was a second line no test could reach) */
    if (kind == SH_C_OPEN && slashed)
        return EISDIR;
    if (n - (size_t)(slash + 1 - path) > NAME_MAX)
        return ENAMETOOLONG;
    if (kind == SH_C_LOOKUP && anc_has(pl.path, slash + 1, n - (size_t)(slash + 1 - path)))
        return 0; /* a mount or an ancestor below it ("top/models/" from top's parent): it opens (the fallback) */
    return kind == SH_C_LOOKUP ? ENOENT : kind == SH_C_NODE && slashed ? ENOENT : EROFS;
}
