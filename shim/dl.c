/* dl.c - the calls that hand a path to code the shim cannot interpose: dlopen (the dynamic loader opens the file
 * with its own internal open) and posix_spawn_file_actions_addopen (the child opens it between clone and exec,
 * through no interposed call). A path in a mount is opened here, through the shim (fetched, verified), and the
 * real call gets the path of what was opened: the blob in the cache for a file, the skeleton for a directory; a
 * file action that would write there is refused with EROFS when it is added (the child's open is not ours).
 * Every other path goes to the real call untouched, dlopen's by a tail call, so that the loader still sees the
 * program's own caller (whose RUNPATH and namespace a bare library name is looked up with).
 * The file actions are glibc's to run in the child, through no interposed call: every one that could write
 * (addopen with write, create or truncate flags, whatever the spelling: /proc/self/fd/N, /proc/self/cwd/x, a
 * symlink) is put to the write guard here, on the directory the child will be in (an addchdir_np or addfchdir_np
 * before it moves the child: the guard then looks from there, and the child is handed the shim's own descriptor of
 * that directory, so that it moves where the guard looked), and refused with EROFS when it is added. */
#include "shim.h"

#include <dlfcn.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#define NOT_OURS ((void *)-1)
/* hides glibc's nonnull declarations from the optimiser: a NULL is the real call's to answer */
#define LAUNDER(p) __asm__("" : "+r"(p))

/* l (L_MNT) opened read-only through the shim, and the real path of what that gave into out (n bytes): 0, or
 * -errno (-ENOENT also when /proc is not mounted: the real call then fails on the logical path). */
static int real_of(const struct sh_loc *l, int oflag, char *out, size_t n)
{
    int fd = sh_open(l, (oflag & ~(O_CREAT | O_EXCL | O_TRUNC | O_APPEND | O_ACCMODE)) | O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return fd;
    char proc[40];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(proc, out, n - 1);
    sh_fd_drop(fd);
    if (k <= 0 || (size_t)k >= n - 1 || out[0] != '/')
        return -ENOENT;
    out[k] = 0;
    return 0;
}

/* path (relative to dirfd) classified, also when it reaches a mount through real symlinks: 1 for a path in a
 * mount. */
static int in_mount_at(int dirfd, const char *path, struct sh_loc *l)
{
    if (sh_classify(dirfd, path, l) == L_NONE) {
        struct stat st;
        if (sh_r.fstatat(dirfd, path, &st, 0) == 0 || !SH_FALLBACK_ERR(errno) ||
            sh_fallback(dirfd, path, l) == L_NONE)
            return 0;
    }
    return l->kind == L_MNT;
}

/* in_mount_at, or a synthesized ancestor of a mount that is not on disk (a spawn's file action may open one: its
 * skeleton in the cache) */
static __attribute__((noinline)) int in_view_at(int dirfd, const char *path, struct sh_loc *l)
{
    struct stat st;
    return in_mount_at(dirfd, path, l) || (l->kind == L_ANC && sh_r.lstat(l->path, &st) < 0);
}

static int in_mount(const char *path, struct sh_loc *l)
{
    return in_mount_at(AT_FDCWD, path, l);
}

/* The real path of a library in a mount into out, or 0 (not ours: the real dlopen takes the path as given). */
static __attribute__((noinline)) int dl_path(const char *path, char *out)
{
    SH_LOC(l);
    return in_mount(path, &l) && real_of(&l, O_RDONLY, out, SH_PATH) == 0;
}

static __attribute__((noinline)) void *dl_mount(const char *path, int mode)
{
    int e = errno;
    /* not a scratch slot: the library's constructors run inside the real dlopen and may need them all */
    char *real = malloc(SH_PATH);
    if (!real || !dl_path(path, real)) {
        free(real);
        errno = e;
        return NOT_OURS;
    }
    void *h = REAL(dlopen, void *(*)(const char *, int))(real, mode);
    free(real);
    return h;
}

/* optimize-sibling-calls: the real call stays a jump also in a build at -O1 (the sanitizer build) */
__attribute__((optimize("optimize-sibling-calls"))) SH_EXPORT void *dlopen(const char *path, int mode)
{
    /* a name without a '/' is searched for, never in a mount; any other path may reach one through a symlink */
    void *h = __builtin_expect(!path || !sh_nmounts || !strchr(path, '/'), 1) ? NOT_OURS : dl_mount(path, mode);
    if (h != NOT_OURS)
        return h;
    return REAL(dlopen, void *(*)(const char *, int))(path, mode);   /* a tail call: the caller stays the program */
}

/* The directory a file-actions object's child will be in when its next action runs, as the shim follows it: kept in
 * glibc's reserved words of the object (__pad, zeroed by posix_spawn_file_actions_init, never read by glibc 2.36).
 * Every addchdir_np / addfchdir_np the shim can resolve when it is added becomes an addfchdir_np of an O_PATH
 * descriptor the shim opened then and holds (with its identity, so that one the program closed and reused is never
 * taken for it, nor closed by destroy): the child moves to the directory the guard looked from, whatever the
 * program does to the path or to its own descriptor before posix_spawn (issue 33 round 4). One the shim cannot
 * resolve then (a path not there yet, a descriptor not open, no room left, or one a closefrom action added before
 * would close in the child) is left to the child as given, and the child's directory is "unknown": a relative or
 * /proc/self/cwd write action added after it is refused (EROFS), since the child may be anywhere by then.
 * An open, dup2 or close action runs in the child before a chdir action added after it: the number it gives or
 * takes could be the one the shim's descriptor has when the chdir is added (a number the program can predict), and
 * the child would move to the directory the program put there (a skeleton in the cache). The shim's descriptor is
 * moved above every number such an action names (tmax). */
#define FA_MAGIC 0x68667333u /* "hfs3" */
#define FA_HELD 3
struct fa_cwd {
    unsigned magic;
    unsigned char n;        /* descriptors held, the child's directory the last */
    unsigned char unknown;  /* the child's directory after the last chdir action is not known here */
    unsigned char cf;       /* a closefrom action was added, from cf_from */
    int cf_from;
    int tmax;               /* 1 + the highest descriptor an open, dup2 or close action added names; 0: none */
    struct {
        int fd;
        unsigned dev;
        unsigned long ino;
    } h[FA_HELD];
};
_Static_assert(sizeof(struct fa_cwd) <= sizeof(((posix_spawn_file_actions_t *)0)->__pad), "fa_cwd fits __pad");

static void fa_get(const posix_spawn_file_actions_t *fa, struct fa_cwd *c)
{
    memcpy(c, fa->__pad, sizeof *c);
    if (c->magic != FA_MAGIC)
        memset(c, 0, sizeof *c);
}

static void fa_put(posix_spawn_file_actions_t *fa, struct fa_cwd *c)
{
    c->magic = FA_MAGIC;
    memcpy(fa->__pad, c, sizeof *c);
}

/* 1 when held descriptor i is still the one the shim opened */
static int fa_same(const struct fa_cwd *c, int i)
{
    struct stat st;
    return sh_r.fstat(c->h[i].fd, &st) == 0 && (unsigned)st.st_dev == c->h[i].dev && st.st_ino == c->h[i].ino;
}

/* the child's directory for fa's next action: the descriptor held, or AT_FDCWD (no chdir action: the parent's cwd,
 * which the child starts in); -1 when it is unknown or the one held is no longer the same directory (the guard then
 * refuses what it cannot place) */
static int fa_dir(const posix_spawn_file_actions_t *fa)
{
    struct fa_cwd c;
    fa_get(fa, &c);
    if (c.unknown)
        return -1;
    if (!c.n)
        return AT_FDCWD;
    return fa_same(&c, c.n - 1) ? c.h[c.n - 1].fd : -1;
}

/* Descriptors the shim holds for all the file-actions objects of this process: a program that keeps many objects
 * alive (each with a chdir action) must not run out of descriptors because of the shim (round 4 review: 1100 live
 * objects left open() EMFILE under a limit of 1024). Past FA_MAX_LIVE a chdir action is the child's as given, its
 * directory unknown. Atomic, no lock: a forked child inherits the count with the descriptors. */
#define FA_MAX_LIVE 64
static int fa_live;

static void fa_unlive(void)
{
    __atomic_sub_fetch(&fa_live, 1, __ATOMIC_RELAXED);
}

static void fa_forget(posix_spawn_file_actions_t *fa)
{
    struct fa_cwd c;
    fa_get(fa, &c);
    for (int i = 0; i < c.n && i < FA_HELD; i++) {
        if (fa_same(&c, i))
            sh_r.close(c.h[i].fd);
        fa_unlive();
    }
    memset(fa->__pad, 0, sizeof(struct fa_cwd));
}

/* fd (an O_PATH directory descriptor of the shim's, or -1) as the directory of fa's next chdir action: 1 when it is
 * held, the action to be added with it; 0 when it cannot be (closed here; the action is added as the caller gave
 * it, and the child's directory becomes unknown) */
static int fa_hold(posix_spawn_file_actions_t *fa, int fd)
{
    struct fa_cwd c;
    struct stat st;
    fa_get(fa, &c);
    if (fd >= 0 && fd < c.tmax) { /* a number an action before this one gives or closes in the child */
        int hi = sh_r.fcntl(fd, F_DUPFD_CLOEXEC, c.tmax);
        sh_r.close(fd);
        fd = hi;
    }
    int room = fd >= 0 && __atomic_add_fetch(&fa_live, 1, __ATOMIC_RELAXED) <= FA_MAX_LIVE;
    if (fd >= 0 && !room)
        fa_unlive();
    if (room && c.n < FA_HELD && !(c.cf && fd >= c.cf_from) && sh_r.fstat(fd, &st) == 0) {
        c.h[c.n].fd = fd;
        c.h[c.n].dev = (unsigned)st.st_dev;
        c.h[c.n].ino = st.st_ino;
        c.n++;
        c.unknown = 0;
        fa_put(fa, &c);
        return 1;
    }
    if (room)
        fa_unlive();
    if (fd >= 0)
        sh_r.close(fd);
    return 0;
}

/* an open, dup2 or close action of descriptor fd added (rc 0): fd for fa_hold to keep clear of; rc */
static int fa_names(posix_spawn_file_actions_t *fa, int fd, int rc)
{
    struct fa_cwd c;
    if (rc || fd < 0 || !sh_nmounts)
        return rc;
    fa_get(fa, &c);
    if (fd >= c.tmax) {
        c.tmax = fd + 1;
        fa_put(fa, &c);
    }
    return rc;
}

/* the chdir action added (rc 0) with a descriptor fa_hold took: rc; otherwise that descriptor is given up again */
static int fa_added(posix_spawn_file_actions_t *fa, int held, int rc)
{
    struct fa_cwd c;
    fa_get(fa, &c);
    if (held && rc) {
        sh_r.close(c.h[--c.n].fd);
        fa_unlive();
        fa_put(fa, &c);
    } else if (!held && !rc) {
        c.unknown = 1;
        fa_put(fa, &c);
    }
    return rc;
}

/* After a chdir action, "/proc/self/cwd/REST" (or thread-self's) in a later action is the child's directory: REST
 * ("." for none) to look up from there; NULL for any other spelling. */
static const char *proc_cwd(const char *path)
{
    static const char *const pre[] = {"/proc/self/cwd", "/proc/thread-self/cwd"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(pre[i]);
        if (!strncmp(path, pre[i], n) && (path[n] == '/' || !path[n])) {
            while (path[n] == '/')
                n++;
            return path[n] ? path + n : ".";
        }
    }
    return NULL;
}

static int in_proc(const char *acc)
{
    struct statfs sf;
    return sh_r.statfs(acc[0] ? acc : "/", &sf) == 0 && sf.f_type == 0x9fa0; /* PROC_SUPER_MAGIC */
}

/* A write action's path walked as the child's open will walk it, with this process's file system: 1 when that walk
 * reaches something of the child's own that differs from this process's, where the guard's look from here proves
 * nothing (issue 33 round 4 review): /proc/self (thread-self, or a pid not there now: the child's, predictable)
 * then fd/K with K a number an open or dup2 action gives the child (below c->tmax), or cwd after a chdir action.
 * Spellings of it: /proc/self/fd/K, /dev/fd/K, /dev/stdout, a symlink anywhere to them (a spelled /proc/self/cwd
 * prefix comes here as the rest, from the held directory: proc_cwd). base: where a relative path starts; cwdfd: the
 * child's directory (fa_dir). 0 on anything it cannot follow (the guard's check stands). */
static __attribute__((noinline)) int child_own(const posix_spawn_file_actions_t *fa, int base, int cwdfd, const char *path)
{
    /* (not inlined, and the actions' record read here: addopen's frame is on the stack budget's worst chain) */
    struct fa_cwd cw, *c = &cw;
    fa_get(fa, c);
    SH_SCRATCH(s);
    char *acc = s->a, *rest = s->b, *alt = s->c, *lk = s->d;
    size_t al = 0, child_al = 0;
    int child = 0, hops = 0;
    if (strlen(path) >= SH_SCR)
        return 0;
    strcpy(rest, path);
    acc[0] = 0;
    if (path[0] != '/') {
        ssize_t k = -1;
        if (base == AT_FDCWD)
            k = sh_r.getcwd(acc, SH_SCR) ? (ssize_t)strlen(acc) : -1;
        else if (base >= 0) {
            snprintf(lk, SH_SCR, "/proc/self/fd/%d", base);
            k = sh_r.readlink(lk, acc, SH_SCR - 1);
        }
        if (k <= 0 || acc[0] != '/')
            return 0;
        al = k == 1 ? 0 : (size_t)k;
        acc[al] = 0;
    }
    int inproc = in_proc(acc);
    const char *r = rest;
    for (;;) {
        while (*r == '/')
            r++;
        if (!*r)
            return 0;
        size_t len = strcspn(r, "/");
        const char *comp = r, *next = r + len;
        if (len == 1 && comp[0] == '.') {
            r = next;
            continue;
        }
        size_t pl = al; /* acc's length before this component */
        if (len == 2 && comp[0] == '.' && comp[1] == '.') {
            while (al > 0 && acc[al - 1] != '/')
                al--;
            al -= al > 0;
            acc[al] = 0;
            child = child && al >= child_al;
            inproc = in_proc(acc);
            r = next;
            continue;
        }
        if (al + 1 + len >= SH_SCR)
            return 0;
        acc[al] = '/';
        memcpy(acc + al + 1, comp, len);
        al += 1 + len;
        acc[al] = 0;
        struct stat st;
        if (sh_r.lstat(acc, &st) < 0)
            return inproc; /* a /proc name not there here may be the child's: its pid */
        if (S_ISDIR(st.st_mode)) {
            inproc = in_proc(acc);
            r = next;
            continue;
        }
        if (!S_ISLNK(st.st_mode))
            return 0;
        const char *tgt = lk;
        if (inproc && !child && ((len == 4 && !memcmp(comp, "self", 4)) || (len == 11 && !memcmp(comp, "thread-self", 11)))) {
            child = 1; /* the child's own entry: walked as this process's, its fd and cwd looked at */
            child_al = al;
            r = next;
            continue;
        }
        if (inproc && child) {
            const char *pc = acc + pl; /* "/fd" before "/K"? */
            while (pc > acc && pc[-1] != '/')
                pc--;
            if (len == 3 && !memcmp(comp, "cwd", 3) && cwdfd != AT_FDCWD)
                return 1; /* this process's cwd is not the child's: the guard's look is of the wrong one */
            if (acc + pl - pc == 2 && !memcmp(pc, "fd", 2) && atoi(comp) < c->tmax)
                return 1;
        }
        {
            ssize_t k = sh_r.readlink(acc, lk, SH_SCR - 1);
            if (k <= 0)
                return 0;
            lk[k] = 0;
        }
        if (inproc && lk[0] != '/')
            return 0; /* a magic link to what is no path ("pipe:[N]"): the guard's check of the object stands */
        if (++hops > 40 || strlen(tgt) + strlen(next) >= SH_SCR)
            return 0;
        strcpy(alt, tgt);
        strcat(alt, next);
        char *sw = rest;
        rest = alt;
        alt = sw;
        if (tgt[0] == '/') {
            al = 0;
            child = 0;
        } else {
            al = pl;
        }
        acc[al] = 0;
        child = child && al >= child_al;
        inproc = in_proc(acc);
        r = rest;
    }
}

/* A read-only file action's path is the child's own to open: outside the mounts by its spelling and there on disk
 * (a name that is not may reach a mount or an ancestor through a symlink or from the cwd, which a plain call's
 * fallback would find after its real call failed: the child's open has no fallback) */
/* (not inlined: a struct stat each, off the frame of addopen, which is on the stack budget's worst chain) */
static __attribute__((noinline)) int ro_outside(const posix_spawn_file_actions_t *fa, const char *path)
{
    struct stat st;
    if (!sh_outside(AT_FDCWD, path) || fa_dir(fa) != AT_FDCWD)
        return 0;
    int e = errno, r = sh_r.stat(path, &st) == 0 || !SH_FALLBACK_ERR(errno);
    errno = e;
    return r;
}

static int addopen(posix_spawn_file_actions_t *fa, int fd, const char *path, int oflag, mode_t mode)
{
    int (*real)(posix_spawn_file_actions_t *, int, const char *, int, mode_t) =
        REAL(posix_spawn_file_actions_addopen, int (*)(posix_spawn_file_actions_t *, int, const char *, int, mode_t));
    int ro = (oflag & O_ACCMODE) == O_RDONLY && !(oflag & (O_CREAT | O_TRUNC));
    LAUNDER(path);
    /* a write takes no fast path: /proc/self/fd/N of a blob, /proc/self/cwd/x from a cwd in a mount, a symlink
     * into the cache are all spelled outside the mounts (issue 33 item 1) */
    if (!path || (ro ? sh_in_vfork() || ro_outside(fa, path) : !sh_wguard_on))
        return real(fa, fd, path, oflag, mode);
    int e = errno, d = path[0] == '/' ? AT_FDCWD : fa_dir(fa);
    if (d == -1)
        return ro ? real(fa, fd, path, oflag, mode) : EROFS;
    SH_LOC(l);
    SH_SCRATCH(t);
    /* a read-only open of a file or directory in a mount: the child opens what the shim opened here */
    struct stat st;
    int k = ro ? sh_classify(d, path, &l) : L_NONE;
    if ((k == L_NONE || (k == L_ANC && sh_r.lstat(l.path, &st) == 0)) && l.kpath && strlen(l.kpath) < SH_SCR)
        path = memcpy(t->b, l.kpath, strlen(l.kpath) + 1); /* a ".." out of an ancestor: where the kernel goes */
    else if (ro && in_view_at(d, path, &l) && real_of(&l, oflag, t->a, SH_SCR) == 0)
        path = t->a;
    /* a write into a mount (or, from a cwd there, into the cache's copy of it): refused now with the mount's
     * EROFS, since the child's open would create or truncate in the cache or fail with ENOENT */
    int gd = d;
    const char *gp = path;
    if (!ro && fa_dir(fa) != AT_FDCWD && (gp = proc_cwd(path))) /* the child's cwd, not this process's */
        gd = fa_dir(fa);
    else
        gp = path;
    if (!ro && (gd == -1 || child_own(fa, gd, fa_dir(fa), gp) || (sh_classify(gd, gp, &l) != L_NONE && !(l.kind == L_ANC && sh_r.lstat(l.path, &st) == 0)) ||
                sh_wguard_slow(gd, gp, SH_W_OPEN, oflag)))
        return EROFS;
    errno = e;
    return real(fa, fd, path, oflag, mode);
}

/* a write action is put to the guard in a vfork child too (and in the child of a raw fork syscall, which is one
 * for the shim for good): open() is there, and such a child may add actions and spawn as any program */
SH_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd, const char *path, int oflag,
                                               mode_t mode)
{
    return fa_names(fa, fd, addopen(fa, fd, path, oflag, mode));
}

SH_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int to)
{
    return fa_names(fa, to, REAL(posix_spawn_file_actions_adddup2, int (*)(posix_spawn_file_actions_t *, int, int))(fa, fd, to));
}

SH_EXPORT int posix_spawn_file_actions_addclose(posix_spawn_file_actions_t *fa, int fd)
{
    return fa_names(fa, fd, REAL(posix_spawn_file_actions_addclose, int (*)(posix_spawn_file_actions_t *, int))(fa, fd));
}

/* The child's chdir: a directory in a mount (or a synthesized ancestor) becomes the real directory the shim's
 * chdir would go to (its skeleton in the cache), so that the child starts in the mount. The directory is opened
 * here and the child gets an addfchdir_np of that descriptor (fa_hold): the guard of the actions added after it
 * looks from the directory the child will really be in. */
SH_EXPORT int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *fa, const char *path)
{
    int (*real)(posix_spawn_file_actions_t *, const char *) =
        REAL(posix_spawn_file_actions_addchdir_np, int (*)(posix_spawn_file_actions_t *, const char *));
    LAUNDER(path);
    if (!path || !sh_nmounts)
        return real(fa, path);
    if (sh_in_vfork()) /* nothing opened here: as given, and where the child will be is unknown */
        return fa_added(fa, 0, real(fa, path));
    int e = errno, d = path[0] == '/' ? AT_FDCWD : fa_dir(fa);
    SH_LOC(l);
    SH_SCRATCH(t);
    const char *to = path;
    if (d != -1 && sh_classify(d, path, &l) != L_NONE && real_of(&l, O_RDONLY | O_DIRECTORY, t->a, SH_SCR) == 0)
        to = t->a;
    int held = fa_hold(fa, d == -1 ? -1 : sh_r.openat(d, to, O_PATH | O_DIRECTORY | O_CLOEXEC)), rc;
    if (held)
        rc = REAL(posix_spawn_file_actions_addfchdir_np, int (*)(posix_spawn_file_actions_t *, int))(fa, fa_dir(fa));
    else
        rc = real(fa, to);
    fa_added(fa, held, rc);
    errno = e;
    return rc;
}

/* The child's fchdir: to a descriptor of the shim's, opened on dfd's directory now (the program may close dfd or
 * dup2 another directory onto it before posix_spawn: the guard looked from this one) */
SH_EXPORT int posix_spawn_file_actions_addfchdir_np(posix_spawn_file_actions_t *fa, int dfd)
{
    int (*real)(posix_spawn_file_actions_t *, int) =
        REAL(posix_spawn_file_actions_addfchdir_np, int (*)(posix_spawn_file_actions_t *, int));
    if (!sh_nmounts || dfd < 0)
        return real(fa, dfd);
    if (sh_in_vfork())
        return fa_added(fa, 0, real(fa, dfd));
    int e = errno;
    int held = fa_hold(fa, sh_r.openat(dfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    int rc = fa_added(fa, held, real(fa, held ? fa_dir(fa) : dfd));
    errno = e;
    return rc;
}

/* A closefrom action closes, in the child, every descriptor the shim would hold for a chdir action added after it:
 * those are then left to the child as given (fa_hold) */
SH_EXPORT int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *fa, int from)
{
    int rc = REAL(posix_spawn_file_actions_addclosefrom_np, int (*)(posix_spawn_file_actions_t *, int))(fa, from);
    if (rc == 0 && sh_nmounts && !sh_in_vfork()) {
        struct fa_cwd c;
        fa_get(fa, &c);
        if (!c.cf || from < c.cf_from)
            c.cf_from = from;
        c.cf = 1;
        fa_put(fa, &c);
    }
    return rc;
}

SH_EXPORT int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t *fa)
{
    LAUNDER(fa);
    if (fa && sh_nmounts && !sh_in_vfork()) {
        int e = errno;
        fa_forget(fa);
        errno = e;
    }
    return REAL(posix_spawn_file_actions_destroy, int (*)(posix_spawn_file_actions_t *))(fa);
}

/* A descriptor held for a chdir action that is no longer the shim's (the program closed it, and another directory
 * may have its number now): the child would move there, past the guard; the spawn fails with EBADF instead */
static int fa_intact(const posix_spawn_file_actions_t *fa)
{
    struct fa_cwd c;
    if (!fa || !sh_nmounts) /* a vfork child too: it may have replaced an inherited one */
        return 1;
    fa_get(fa, &c);
    int e = errno, ok = 1;
    for (int i = 0; i < c.n && i < FA_HELD && ok; i++)
        ok = fa_same(&c, i);
    errno = e;
    return ok;
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                        char *const[], char *const[]);

SH_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
    LAUNDER(fa);
    return fa_intact(fa) ? REAL(posix_spawn, spawn_fn)(pid, path, fa, at, argv, envp) : EBADF;
}

SH_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
    LAUNDER(fa);
    return fa_intact(fa) ? REAL(posix_spawnp, spawn_fn)(pid, file, fa, at, argv, envp) : EBADF;
}
