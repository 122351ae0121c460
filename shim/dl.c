/* dl.c - the calls that hand a path to code the shim cannot interpose: dlopen (the dynamic loader opens the file
 * with its own internal open) and posix_spawn's file actions (the child runs them between clone and exec, through
 * no interposed call). A dlopen of a path in a mount is opened here, through the shim (fetched, verified), and the
 * real call gets the path of what was opened (the blob in the cache); every other path goes to the real dlopen
 * untouched, by a tail call, so that the loader still sees the program's own caller (whose RUNPATH and namespace a
 * bare library name is looked up with).
 * A file action is only recorded when it is added; posix_spawn replays the record on the state at that moment, as
 * the child will run it (its directory after each chdir action, its descriptors after each open, dup2, close and
 * closefrom action), opens here through the shim what the child's opens and chdirs reach (the kernel's answers on
 * a read-only tree, the write guard), and hands the child those very objects (issue 41 item 5). */
#include "shim.h"

#include <dlfcn.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <ucontext.h>
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

/* ---- posix_spawn's file actions: recorded when added, judged at the spawn ----------------------------------
 * What an action reaches depends on what the program does between adding it and posix_spawn (a chdir into a mount,
 * a descriptor closed and its number reused: issue 41 item 5), so nothing is judged, opened or held when an action
 * is added. Each add goes to glibc's own list as given (glibc's answers: EBADF for a number out of range, ENOMEM)
 * and to the shim's record of it, an array the shim allocates, hung in glibc's reserved words of the object (__pad,
 * zeroed by posix_spawn_file_actions_init, never read by glibc 2.36) and freed by destroy. posix_spawn replays the
 * record in order against the state at that moment (fa_replay: the child's directory and descriptors as its actions
 * change them) and hands the child a list of its own built from it, destroyed when the spawn returns. */
enum { A_OPEN, A_CLOSE, A_DUP2, A_CHDIR, A_FCHDIR, A_CLOSEFROM, A_TCPGRP };
struct fa_act {
    int kind, fd, fd2, oflag; /* fd2: dup2's target */
    mode_t mode;
    const char *path; /* open and chdir: the shim's copy (the record's), or a path of the replay's */
};
#define FA_MAGIC 0x68667334u
struct fa_rec {
    unsigned magic, n, cap;
    struct fa_act *a;
};
_Static_assert(sizeof(struct fa_rec) <= sizeof(((posix_spawn_file_actions_t *)0)->__pad), "fa_rec fits __pad");

static void fa_get(const posix_spawn_file_actions_t *fa, struct fa_rec *r)
{
    memcpy(r, fa->__pad, sizeof *r);
    if (r->magic != FA_MAGIC)
        memset(r, 0, sizeof *r);
}

static void fa_put(posix_spawn_file_actions_t *fa, struct fa_rec *r)
{
    r->magic = FA_MAGIC;
    memcpy(fa->__pad, r, sizeof *r);
}

/* one action appended to fa's record: 0, or ENOMEM (nothing appended) */
static int fa_note(posix_spawn_file_actions_t *fa, int kind, int fd, int fd2, const char *path, int oflag, mode_t mode)
{
    struct fa_rec r;
    fa_get(fa, &r);
    if (r.n == r.cap) {
        unsigned cap = r.cap ? 2 * r.cap : 8;
        struct fa_act *a = realloc(r.a, cap * sizeof *a);
        if (!a)
            return ENOMEM;
        r.a = a;
        r.cap = cap;
        fa_put(fa, &r);
    }
    char *p = path ? strdup(path) : NULL;
    if (path && !p)
        return ENOMEM;
    r.a[r.n++] = (struct fa_act){kind, fd, fd2, oflag, mode, p};
    fa_put(fa, &r);
    return 0;
}

/* glibc's answer rc to the add fa_note recorded: its error takes the record back; rc */
static int fa_kept(posix_spawn_file_actions_t *fa, int rc)
{
    struct fa_rec r;
    fa_get(fa, &r);
    if (rc && r.n) {
        free((char *)r.a[--r.n].path);
        fa_put(fa, &r);
    }
    return rc;
}

/* the record noted (fa_note), then glibc's add (EXPR): its answer. errno kept. */
#define FA_ADD(FA, KIND, FD, FD2, PATH, FL, MODE, EXPR)                                                     \
    do {                                                                                                    \
        int e_ = errno, rc_ = fa_note((FA), (KIND), (FD), (FD2), (PATH), (FL), (MODE));                     \
        rc_ = rc_ ? rc_ : fa_kept((FA), (EXPR));                                                            \
        errno = e_;                                                                                         \
        return rc_;                                                                                         \
    } while (0)

/* The replay of a record at posix_spawn (fa_replay). The child's descriptors an action changed: t (the last entry
 * of a number wins), each with the descriptor here that holds what the child will have there (FA_CLOSED: none;
 * FA_UNKNOWN: opened by the child as given, in a vfork child). own: the shim's descriptors for the spawn (the
 * objects the child's opens and chdirs reach, opened here), above every number an action names (base) and closed
 * when the spawn returns; the child has them until its exec (O_CLOEXEC). op: what the child is handed. cw: the
 * child's directory here (AT_FDCWD: the program's cwd, which the child starts in; a descriptor of own; -1 unknown,
 * in a vfork child). cf: a closefrom action closed every number from cf. vf: in a vfork child, where nothing is
 * opened through the shim: a write is put to the guard and handed over as given, the rest as given. */
#define FA_CLOSED (-1)
#define FA_UNKNOWN (-3)
struct fa_run {
    const struct fa_act *a;
    unsigned n, nt, nown, nop;
    struct {
        int k, st;
    } *t;
    int *own;
    struct fa_act *op;
    char (*buf)[32];
    int cw, cf, base, vf, rc;
    posix_spawn_file_actions_t out; /* the child's, built by fa_build */
    ucontext_t uc[2];               /* the host's stack, the replay's (FA_STACK) */
};

/* what the child's descriptor k holds at this point of the replay: the descriptor here that has the same object (k
 * itself when no action changed it), FA_CLOSED, or FA_UNKNOWN */
static int fa_at(const struct fa_run *r, int k)
{
    for (unsigned i = r->nt; i-- > 0;)
        if (r->t[i].k == k)
            return r->t[i].st;
    if (k < 0 || k >= r->cf)
        return FA_CLOSED;
    for (unsigned i = 0; i < r->nown; i++)
        if (r->own[i] == k)
            return FA_CLOSED; /* not open when the spawn began: the program's child would not have it */
    return k;
}

static int fa_is_own(const struct fa_run *r, int k)
{
    for (unsigned i = 0; i < r->nown; i++)
        if (r->own[i] == k)
            return 1;
    return 0;
}

static void fa_set(struct fa_run *r, int k, int st)
{
    r->t[r->nt].k = k;
    r->t[r->nt++].st = st;
}

/* the next action handed to the child: a, with path p */
static void fa_emit(struct fa_run *r, const struct fa_act *a, int kind, int fd, const char *p)
{
    struct fa_act *o = &r->op[r->nop++];
    *o = *a;
    o->kind = kind;
    o->fd = fd;
    o->path = p;
}

/* fd, a descriptor the shim opened for this spawn (O_CLOEXEC), kept in own: moved to a number no action names (the
 * child's actions would close or replace it before it is used); the number, or -1 with errno */
static int fa_own(struct fa_run *r, int fd)
{
    if (fd < 0)
        return -1;
    if (fd < r->base) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, r->base), e = errno;
        close(fd);
        if (hi < 0) {
            errno = e;
            return -1;
        }
        fd = hi;
    }
    r->own[r->nown++] = fd;
    return fd;
}

/* "/proc/self/fd/K" (thread-self's, "/dev/fd/K") or "/dev/stdin|stdout|stderr", and *rest what follows it ("" or a
 * path, its '/'s skipped; "." for a trailing '/' alone): K; -1 for any other spelling */
static int proc_fd(const char *path, const char **rest)
{
    static const char *const pre[] = {"/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"};
    static const char *const std[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
    const char *q = NULL;
    long k = -1;
    for (int i = 0; i < 3 && !q; i++) {
        size_t n = strlen(pre[i]);
        if (!strncmp(path, pre[i], n) && path[n] >= '0' && path[n] <= '9') {
            char *end;
            k = strtol(path + n, &end, 10);
            q = end;
        }
        n = strlen(std[i]);
        if (!q && !strncmp(path, std[i], n))
            k = i, q = path + n;
    }
    if (!q || (*q && *q != '/') || k > 1 << 30)
        return -1;
    int slash = *q == '/';
    while (*q == '/')
        q++;
    *rest = *q ? q : slash ? "." : "";
    return (int)k;
}

/* Where the child's walk of path starts, as a place here: *d and the path to walk from it (path itself; what
 * follows "/proc/self/cwd" after a chdir action, from the child's directory; what follows "/proc/self/fd/K" from
 * the descriptor that holds the child's K, or "/proc/self/fd/<that one>" for K itself, in buf). NULL: ENOENT (the
 * child has no K). *d -1: the child's directory or descriptor is not known here (a vfork child). */
static const char *fa_where(const struct fa_run *r, const char *path, int *d, char *buf)
{
    const char *rest;
    *d = AT_FDCWD;
    if (path[0] != '/') {
        *d = r->cw;
        return path;
    }
    if ((rest = proc_cwd(path))) {
        if (r->cw == AT_FDCWD)
            return path;
        *d = r->cw;
        return rest;
    }
    int k = proc_fd(path, &rest), st = k < 0 ? k : fa_at(r, k);
    if (k < 0 || st == k)
        return path;
    if (st == FA_UNKNOWN) {
        *d = -1;
        return path;
    }
    if (st == FA_CLOSED)
        return NULL;
    if (*rest) {
        *d = st;
        return rest;
    }
    snprintf(buf, 32, "/proc/self/fd/%d", st);
    return buf;
}
/* A write action's path walked as the child's open will walk it, with this process's file system: 1 when that walk
 * reaches something of the child's own that differs from this process's, where the guard's look from here proves
 * nothing (issue 33 round 4 review): /proc/self (thread-self, or a pid not there now: the child's, predictable)
 * then fd/K with K a number an action before this one changed in the child (fa_at), or cwd after a chdir action.
 * The spellings that start so (/proc/self/fd/K, /dev/fd/K, /dev/stdout, /proc/self/cwd) come here as fa_where
 * placed them, so what is left is a symlink to them on the way. base: where a relative path starts (fa_where's
 * place). 0 on anything it cannot follow (the guard's look from here stands). */
static __attribute__((noinline)) int child_own(const struct fa_run *fr, int base, const char *path)
{
    int cwdfd = fr->cw;
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
            if (acc + pl - pc == 2 && !memcmp(pc, "fd", 2) && fa_at(fr, atoi(comp)) != atoi(comp) &&
                !fa_is_own(fr, atoi(comp)))
                return 1; /* the child's K is not this process's K */
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


/* An open action: the child's open. One outside the mounts that reads (no write access, no O_CREAT or O_TRUNC) of
 * something there on disk is the child's own, as given; its object is held here (O_PATH) for a later action's
 * /proc/self/fd/K. Any other (a write, a read of a mount's path, of a synthesized ancestor's, of what a ".." or a
 * fallback finds) is opened here, by the shim's own openat on the place fa_where found: the kernel's answer on a
 * read-only tree (EROFS, EEXIST for O_CREAT|O_EXCL of a file there, an O_RDONLY|O_CREAT of one opens it), the write
 * guard (its check and the open on the same directory), a file of a mount fetched and verified; the child gets a
 * dup2 of that descriptor, so that it has the very object judged. A character device (a terminal) is reopened by
 * the child itself through /proc/self/fd/<the shim's descriptor>: a child of POSIX_SPAWN_SETSID still makes it its
 * controlling terminal (the shim's own open here adds O_NOCTTY). 0, or the errno the spawn answers. */
static int fa_open(struct fa_run *r, const struct fa_act *a)
{
    int ro = (a->oflag & O_ACCMODE) == O_RDONLY && !(a->oflag & (O_CREAT | O_TRUNC)), d;
    char *buf = r->buf[r->nop];
    const char *p = fa_where(r, a->path, &d, buf);
    struct stat st;
    if (!p)
        return ENOENT;
    if (d == -1 || r->vf) {
        /* nothing opened here: a write the guard cannot place is refused */
        SH_LOC(l);
        if (!ro && (d == -1 || child_own(r, d, p) ||
                    (sh_classify(d, p, &l) != L_NONE && !(l.kind == L_ANC && sh_r.lstat(l.path, &st) == 0)) ||
                    sh_wguard_slow(d, p, SH_W_OPEN, a->oflag)))
            return EROFS;
        fa_emit(r, a, A_OPEN, a->fd, a->path);
        fa_set(r, a->fd, FA_UNKNOWN);
        return 0;
    }
    if (ro && sh_outside(d, p) && (sh_r.fstatat(d, p, &st, 0) == 0 || !SH_FALLBACK_ERR(errno))) {
        int h = fa_own(r, sh_r.openat(d, p, O_PATH | O_CLOEXEC | (a->oflag & O_NOFOLLOW)));
        fa_emit(r, a, A_OPEN, a->fd, a->path);
        fa_set(r, a->fd, h < 0 ? FA_UNKNOWN : h);
        return 0;
    }
    if (!ro && child_own(r, d, p))
        return EROFS;
    int e = errno, fd = fa_own(r, openat(d, p, a->oflag | O_CLOEXEC | O_NOCTTY, a->mode));
    if (fd < 0) {
        int k = errno;
        errno = e;
        return k;
    }
    if (!(a->oflag & O_NOCTTY) && sh_r.fstat(fd, &st) == 0 && S_ISCHR(st.st_mode)) {
        snprintf(buf, 32, "/proc/self/fd/%d", fd);
        fa_emit(r, a, A_OPEN, a->fd, buf);
    } else {
        fa_emit(r, a, A_DUP2, fd, NULL);
        r->op[r->nop - 1].fd2 = a->fd;
    }
    fa_set(r, a->fd, fd);
    return 0;
}

/* A chdir action (path) or an fchdir action (its descriptor): the directory the child would move to, opened here
 * (O_PATH; a mount's directory or a synthesized ancestor: its skeleton in the cache, where the shim's chdir goes),
 * and the child gets an fchdir of that descriptor, so that it moves where the actions after it were judged from.
 * In a vfork child (nothing opened here), as given: the child's directory is then unknown. 0 or the errno. */
static int fa_chdir(struct fa_run *r, const struct fa_act *a)
{
    int d = -1, h = -1, e = errno;
    const char *p = NULL;
    if (a->kind == A_CHDIR && !(p = fa_where(r, a->path, &d, r->buf[r->nop])))
        return ENOENT;
    int st = a->kind == A_FCHDIR ? fa_at(r, a->fd) : 0;
    if (a->kind == A_FCHDIR && st == FA_CLOSED)
        return EBADF;
    if (r->vf || (a->kind == A_CHDIR ? d == -1 : st == FA_UNKNOWN)) {
        fa_emit(r, a, a->kind, a->fd, a->path);
        r->cw = -1;
        return 0;
    }
    if (a->kind == A_FCHDIR) {
        h = sh_r.openat(st, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    } else {
        SH_LOC(l);
        SH_SCRATCH(t);
        int k = sh_classify(d, p, &l) != L_NONE ? real_of(&l, O_RDONLY | O_DIRECTORY, t->a, SH_SCR) : -ENOENT;
        if (k < 0 && k != -ENOENT)
            return -k;
        h = sh_r.openat(d, k == 0 ? t->a : p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if ((h = fa_own(r, h)) < 0) {
        int k = errno;
        errno = e;
        return k;
    }
    fa_emit(r, a, A_FCHDIR, h, NULL);
    r->cw = h;
    return 0;
}

/* The record replayed in order against the state at the spawn (see fa_run): 0 and r->op, or the errno the child's
 * first failing action would give (the spawn answers it; the child is not started). */
static int fa_replay(struct fa_run *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        const struct fa_act *a = &r->a[i];
        int rc = 0, st;
        switch (a->kind) {
        case A_OPEN:
            rc = fa_open(r, a);
            break;
        case A_CHDIR:
        case A_FCHDIR:
            rc = fa_chdir(r, a);
            break;
        case A_DUP2:
            st = fa_at(r, a->fd);
            if (st == FA_CLOSED || (st >= 0 && sh_r.fcntl(st, F_GETFD) < 0))
                return EBADF;
            fa_set(r, a->fd2, st);
            fa_emit(r, a, a->kind, a->fd, NULL);
            break;
        case A_CLOSE:
            fa_set(r, a->fd, FA_CLOSED);
            fa_emit(r, a, a->kind, a->fd, NULL);
            break;
        case A_CLOSEFROM:
            for (unsigned j = 0; j < r->nt; j++)
                if (r->t[j].k >= a->fd)
                    r->t[j].st = FA_CLOSED;
            if (a->fd < r->cf)
                r->cf = a->fd;
            fa_emit(r, a, a->kind, a->fd, NULL);
            break;
        default:
            fa_emit(r, a, a->kind, a->fd, NULL);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* r->op added to out with glibc's own adds. A closefrom action would close the shim's descriptors the child has not
 * used yet (all above every number an action names): it becomes a close of each number from its own up to them and a
 * closefrom above them. 0 or ENOMEM. */
static int fa_build(const struct fa_run *r, posix_spawn_file_actions_t *out)
{
    int hi = 0, rc = 0;
    for (unsigned i = 0; i < r->nown; i++)
        if (r->own[i] >= hi)
            hi = r->own[i] + 1;
    for (unsigned i = 0; i < r->nop && !rc; i++) {
        const struct fa_act *o = &r->op[i];
        switch (o->kind) {
        case A_OPEN:
            rc = REAL(posix_spawn_file_actions_addopen, int (*)(posix_spawn_file_actions_t *, int, const char *, int,
                                                                mode_t))(out, o->fd, o->path, o->oflag, o->mode);
            break;
        case A_DUP2:
            rc = REAL(posix_spawn_file_actions_adddup2, int (*)(posix_spawn_file_actions_t *, int, int))(out, o->fd, o->fd2);
            break;
        case A_CLOSE:
            rc = REAL(posix_spawn_file_actions_addclose, int (*)(posix_spawn_file_actions_t *, int))(out, o->fd);
            break;
        case A_CHDIR:
            rc = REAL(posix_spawn_file_actions_addchdir_np, int (*)(posix_spawn_file_actions_t *, const char *))(out, o->path);
            break;
        case A_FCHDIR:
            rc = REAL(posix_spawn_file_actions_addfchdir_np, int (*)(posix_spawn_file_actions_t *, int))(out, o->fd);
            break;
        case A_CLOSEFROM:
            for (int k = o->fd; k < hi && !rc; k++)
                if (!fa_is_own(r, k))
                    rc = REAL(posix_spawn_file_actions_addclose, int (*)(posix_spawn_file_actions_t *, int))(out, k);
            if (!rc)
                rc = REAL(posix_spawn_file_actions_addclosefrom_np, int (*)(posix_spawn_file_actions_t *, int))(
                    out, o->fd > hi ? o->fd : hi);
            break;
        default:
            rc = REAL(posix_spawn_file_actions_addtcsetpgrp_np, int (*)(posix_spawn_file_actions_t *, int))(out, o->fd);
        }
    }
    return rc;
}

typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                        char *const[], char *const[]);

/* The replay runs on a stack of the shim's own (FA_STACK, mapped for the spawn, a guard page below it): its chain
 * reaches the shim's whole open (the write guard, the kernel's walk, a mount's load), deeper than the 2 KiB the
 * shim may take of a host thread's stack (docs/internals.md, "Rules for code that runs in the host"); the host's
 * stack carries fa_spawn's frame and swapcontext's. */
#define FA_STACK (256u << 10)
static __thread struct fa_run *fa_cur;

static void fa_main(void)
{
    struct fa_run *r = fa_cur;
    r->rc = fa_replay(r);
    if (!r->rc)
        r->rc = fa_build(r, &r->out);
}

/* fa_main run on stk; r->rc its answer (ENOMEM when the switch failed). Out of line: getcontext returns twice.
 * The sanitized build (ASan, whose stack bookkeeping cannot follow a switch: it warns on stderr, the program's)
 * runs it on the caller's stack: make stack checks the plain build's frames. */
#if defined(__SANITIZE_ADDRESS__)
#define FA_SAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FA_SAN 1
#endif
#endif
static __attribute__((noinline)) void fa_on_stack(struct fa_run *r, char *stk)
{
#ifdef FA_SAN
    (void)stk;
    fa_cur = r;
    fa_main();
    return;
#endif
    r->rc = ENOMEM;
    if (getcontext(&r->uc[1]) < 0)
        return;
    r->uc[1].uc_stack.ss_sp = stk;
    r->uc[1].uc_stack.ss_size = FA_STACK;
    r->uc[1].uc_link = &r->uc[0];
    makecontext(&r->uc[1], fa_main, 0);
    fa_cur = r;
    if (swapcontext(&r->uc[0], &r->uc[1]) < 0)
        r->rc = ENOMEM;
}

/* posix_spawn(p) (spawnp: 1) with fa's actions judged now (fa_replay). One without an open or chdir action runs as
 * it is, and so does one whose record is not glibc's list: actions added past the shim, through glibc's own adds
 * (the shim's helper spawns /dev/null redirections so, shim/helper.c), are not the program's by any interposed
 * call. Everything is on the heap (the frame stays small: see FA_STACK). */
static __attribute__((noinline)) int fa_spawn(int spawnp, pid_t *pid, const char *path,
                                              const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
                                              char *const argv[], char *const envp[])
{
    spawn_fn real = spawnp ? REAL(posix_spawnp, spawn_fn) : REAL(posix_spawn, spawn_fn);
    struct fa_rec rec;
    fa_get(fa, &rec);
    unsigned judge = 0;
    int base = 3;
    for (unsigned i = 0; i < rec.n; i++) {
        const struct fa_act *a = &rec.a[i];
        judge += a->kind == A_OPEN || a->kind == A_CHDIR || a->kind == A_FCHDIR;
        if (a->kind != A_CLOSEFROM && a->fd >= base)
            base = a->fd + 1;
        if (a->kind == A_DUP2 && a->fd2 >= base)
            base = a->fd2 + 1;
    }
    if (!judge || (int)rec.n != fa->__used)
        return real(pid, path, fa, at, argv, envp);
    int e = errno, rc = ENOMEM;
    unsigned n = rec.n;
    struct fa_run *r = calloc(1, sizeof *r);
    char *stk = MAP_FAILED;
    if (!r)
        return ENOMEM;
    *r = (struct fa_run){.a = rec.a, .n = n, .cw = AT_FDCWD, .cf = INT_MAX, .base = base, .vf = sh_in_vfork()};
    r->t = malloc(n * sizeof *r->t);
    r->own = malloc(n * sizeof *r->own);
    r->op = malloc(n * sizeof *r->op);
    r->buf = malloc(n * sizeof *r->buf);
    if (r->t && r->own && r->op && r->buf &&
        (stk = mmap(NULL, FA_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1,
                    0)) != MAP_FAILED &&
        mprotect(stk, 4096, PROT_NONE) == 0 && posix_spawn_file_actions_init(&r->out) == 0) {
        fa_on_stack(r, stk);
        if (!(rc = r->rc))
            rc = real(pid, path, &r->out, at, argv, envp);
        REAL(posix_spawn_file_actions_destroy, int (*)(posix_spawn_file_actions_t *))(&r->out);
    }
    if (stk != MAP_FAILED)
        munmap(stk, FA_STACK);
    for (unsigned i = 0; i < r->nown; i++)
        close(r->own[i]);
    free(r->t);
    free(r->own);
    free(r->op);
    free(r->buf);
    free(r);
    errno = e;
    return rc;
}

SH_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
    LAUNDER(fa);
    if (!fa || !sh_nmounts)
        return REAL(posix_spawn, spawn_fn)(pid, path, fa, at, argv, envp);
    return fa_spawn(0, pid, path, fa, at, argv, envp);
}

SH_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
    LAUNDER(fa);
    if (!fa || !sh_nmounts)
        return REAL(posix_spawnp, spawn_fn)(pid, file, fa, at, argv, envp);
    return fa_spawn(1, pid, file, fa, at, argv, envp);
}

/* The adds: recorded (FA_ADD) while mounts are configured, in a vfork child too (the replay knows it is one). */
SH_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd, const char *path, int oflag,
                                               mode_t mode)
{
    int (*real)(posix_spawn_file_actions_t *, int, const char *, int, mode_t) =
        REAL(posix_spawn_file_actions_addopen, int (*)(posix_spawn_file_actions_t *, int, const char *, int, mode_t));
    LAUNDER(path);
    LAUNDER(fa);
    if (!fa || !path || !sh_nmounts)
        return real(fa, fd, path, oflag, mode);
    FA_ADD(fa, A_OPEN, fd, 0, path, oflag, mode, real(fa, fd, path, oflag, mode));
}

SH_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int to)
{
    int (*real)(posix_spawn_file_actions_t *, int, int) =
        REAL(posix_spawn_file_actions_adddup2, int (*)(posix_spawn_file_actions_t *, int, int));
    LAUNDER(fa);
    if (!fa || !sh_nmounts)
        return real(fa, fd, to);
    FA_ADD(fa, A_DUP2, fd, to, NULL, 0, 0, real(fa, fd, to));
}

SH_EXPORT int posix_spawn_file_actions_addclose(posix_spawn_file_actions_t *fa, int fd)
{
    int (*real)(posix_spawn_file_actions_t *, int) = REAL(posix_spawn_file_actions_addclose, int (*)(posix_spawn_file_actions_t *, int));
    LAUNDER(fa);
    if (!fa || !sh_nmounts)
        return real(fa, fd);
    FA_ADD(fa, A_CLOSE, fd, 0, NULL, 0, 0, real(fa, fd));
}

SH_EXPORT int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *fa, const char *path)
{
    int (*real)(posix_spawn_file_actions_t *, const char *) =
        REAL(posix_spawn_file_actions_addchdir_np, int (*)(posix_spawn_file_actions_t *, const char *));
    LAUNDER(path);
    LAUNDER(fa);
    if (!fa || !path || !sh_nmounts)
        return real(fa, path);
    FA_ADD(fa, A_CHDIR, -1, 0, path, 0, 0, real(fa, path));
}

SH_EXPORT int posix_spawn_file_actions_addfchdir_np(posix_spawn_file_actions_t *fa, int dfd)
{
    int (*real)(posix_spawn_file_actions_t *, int) =
        REAL(posix_spawn_file_actions_addfchdir_np, int (*)(posix_spawn_file_actions_t *, int));
    LAUNDER(fa);
    if (!fa || !sh_nmounts)
        return real(fa, dfd);
    FA_ADD(fa, A_FCHDIR, dfd, 0, NULL, 0, 0, real(fa, dfd));
}

SH_EXPORT int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *fa, int from)
{
    int (*real)(posix_spawn_file_actions_t *, int) =
        REAL(posix_spawn_file_actions_addclosefrom_np, int (*)(posix_spawn_file_actions_t *, int));
    LAUNDER(fa);
    if (!fa || !sh_nmounts)
        return real(fa, from);
    FA_ADD(fa, A_CLOSEFROM, from, 0, NULL, 0, 0, real(fa, from));
}

SH_EXPORT int posix_spawn_file_actions_addtcsetpgrp_np(posix_spawn_file_actions_t *fa, int fd)
{
    int (*real)(posix_spawn_file_actions_t *, int) =
        REAL(posix_spawn_file_actions_addtcsetpgrp_np, int (*)(posix_spawn_file_actions_t *, int));
    LAUNDER(fa);
    if (!fa || !sh_nmounts)
        return real(fa, fd);
    FA_ADD(fa, A_TCPGRP, fd, 0, NULL, 0, 0, real(fa, fd));
}

/* the record freed with the object (a forked child frees its own copy) */
SH_EXPORT int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t *fa)
{
    LAUNDER(fa);
    if (fa && sh_nmounts) {
        struct fa_rec r;
        fa_get(fa, &r);
        for (unsigned i = 0; i < r.n; i++)
            free((char *)r.a[i].path);
        free(r.a);
        memset(fa->__pad, 0, sizeof r);
    }
    return REAL(posix_spawn_file_actions_destroy, int (*)(posix_spawn_file_actions_t *))(fa);
}
