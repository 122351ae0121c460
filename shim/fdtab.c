/* fdtab.c - the descriptor table: which descriptors the shim returned (and for what entry), checked against the
 * real fstat so a closed-and-reused number is never mistaken for ours; fstat/fchdir/openat answers from it. */
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
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* --- descriptors ------------------------------------------------------------------------------------- */

struct fdent {
    uint8_t kind;
    uint32_t m;
    uint32_t e;
    dev_t dev;
    ino_t ino;
};
static struct fdent fdtab[SH_FD_MAX];
int sh_fd_used;   /* set once the shim has returned a descriptor of its own (shim.h sh_fd_forget) */

/* Descriptors from SH_FD_MAX up to SH_FD_HIGH (a server with RLIMIT_NOFILE raised): a second table, mapped the first
 * time the shim returns one (no allocation: MAP_NORESERVE, pages used only when touched), never unmapped. */
#define SH_FD_HIGH (1 << 20)
static struct fdent *fdhigh;   /* atomic */

static struct fdent *ent_high(int fd, int create);

/* The table entry of fd: NULL when fd is out of range, or high and the second table is not there (create: map it).
 * The first table inline: fstat of every descriptor comes here. */
static inline __attribute__((always_inline)) struct fdent *ent(int fd, int create)
{
    if (__builtin_expect((unsigned)fd < SH_FD_MAX, 1))
        return &fdtab[fd];
    return ent_high(fd, create);
}

static __attribute__((noinline)) struct fdent *ent_high(int fd, int create)
{
    if (fd < 0 || fd >= SH_FD_HIGH)
        return NULL;
    struct fdent *h = __atomic_load_n(&fdhigh, __ATOMIC_ACQUIRE);
    if (!h && create && !sh_in_vfork()) {
        void *m = mmap(NULL, (size_t)(SH_FD_HIGH - SH_FD_MAX) * sizeof *h, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        struct fdent *none = NULL;
        if (__atomic_compare_exchange_n(&fdhigh, &none, (struct fdent *)m, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            h = m;
        else
            munmap(m, (size_t)(SH_FD_HIGH - SH_FD_MAX) * sizeof *h), h = none;
    }
    return h ? &h[fd - SH_FD_MAX] : NULL;
}

void sh_fd_set(int fd, int kind, int m, uint32_t e)
{
    struct stat st;
    struct fdent *f;
    if (fd < 0 || sh_in_vfork() || !(f = ent(fd, 1)) || sh_r.fstat(fd, &st) < 0)
        return;
    __atomic_store_n(&sh_fd_used, 1, __ATOMIC_RELAXED);
    f->kind = 0;
    f->m = (uint32_t)m;
    f->e = e;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    __atomic_store_n(&f->kind, (uint8_t)kind, __ATOMIC_RELEASE);
}

void sh_fd_clear(int fd)
{
    struct fdent *f = ent(fd, 0);
    if (f && __atomic_load_n(&f->kind, __ATOMIC_RELAXED) && !sh_in_vfork())
        __atomic_store_n(&f->kind, 0, __ATOMIC_RELEASE);
}

void sh_fd_dup(int from, int to)
{
    struct fdent *a = ent(from, 0), *b;
    int ours = a && __atomic_load_n(&a->kind, __ATOMIC_ACQUIRE);
    if (!ours) {
        sh_fd_clear(to);
        return;
    }
    if (sh_in_vfork() || !(b = ent(to, 1)))
        return;
    __atomic_store_n(&sh_fd_used, 1, __ATOMIC_RELAXED);
    b->kind = 0;
    b->m = a->m;
    b->e = a->e;
    b->dev = a->dev;
    b->ino = a->ino;
    __atomic_store_n(&b->kind, a->kind, __ATOMIC_RELEASE);
}

void sh_fd_drop(int fd)
{
    int e = errno;
    sh_fd_clear(fd);
    sh_r.close(fd);
    errno = e;
}

void *sh_open_stream(const struct sh_loc *l, int flags, void *(*wrap)(int, const void *), const void *arg, int e)
{
    int fd = sh_open(l, flags, 0);
    if (fd < 0) {
        errno = -fd;
        return NULL;
    }
    void *stream = wrap(fd, arg);
    if (!stream) {
        sh_fd_drop(fd);
        return NULL;
    }
    errno = e;
    return stream;
}

int sh_fd_ours(int fd)
{
    struct fdent *f = ent(fd, 0);
    return f && __atomic_load_n(&f->kind, __ATOMIC_ACQUIRE);
}

/* The live table entry of fd (its real identity still matches), with the real fstat in *st. */
static int fd_get(int fd, struct fdent *out, struct stat *st)
{
    if (!sh_fd_ours(fd))
        return 0;
    *out = *ent(fd, 0);
    if (sh_r.fstat(fd, st) < 0 || st->st_dev != out->dev || st->st_ino != out->ino || !out->kind) {
        sh_fd_clear(fd);
        return 0;
    }
    return 1;
}

int sh_fd_is_file(int fd)
{
    struct fdent f;
    struct stat st;
    return fd_get(fd, &f, &st) && f.kind == FD_FILE;
}

/* The shim's answer for a directory descriptor it returned, over the real fstat in st: read-only, and a hub's
 * repository has the inode of its stat and of the hub's listing (hub.c); one function for sh_fd_stat and fstat's
 * fast path (sh_fd_after), so that the two never disagree. */
static void dir_answer(const struct fdent *f, struct stat *st)
{
    st->st_mode = (st->st_mode & S_IFMT) | 0555;
    if (f->kind == FD_DIR && f->e == 0 && sh_mnt(f->m)->sub)
        st->st_ino = sh_hub_root_ino(sh_mnt(f->m));
    const struct sh_mount *m = sh_mnt(f->m);
    if (f->kind == FD_DIR && __atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == 2 && !m->broken && m->ents)
        sh_dir_time(m, f->e, st);   /* as stat of its path */
}

int sh_fd_stat(int fd, struct stat *st)
{
    struct fdent f;
    if (!fd_get(fd, &f, st))
        return 0;
    if (f.kind == FD_FILE) {
        const struct sh_mount *m = sh_mnt(f.m);
        if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2 || m->broken)
            return 0;
        blkcnt_t b = st->st_blocks;
        int blob = S_ISREG(st->st_mode);   /* the copy itself (an O_PATH one of a file not cached: its parent) */
        sh_stat_synth(m, f.e, st);
        if (blob)
            st->st_blocks = b;
    } else {
        dir_answer(&f, st);
    }
    return 1;
}

void sh_fd_after(int fd, struct stat *st)
{
    struct fdent *f = ent(fd, 0);
    if (f && __atomic_load_n(&f->kind, __ATOMIC_ACQUIRE)) {
        struct fdent c = *f;
        if (c.kind && st->st_dev == c.dev && st->st_ino == c.ino) {
            if (c.kind == FD_FILE) {
                const struct sh_mount *m = sh_mnt(c.m);
                if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == 2 && !m->broken) {
                    blkcnt_t b = st->st_blocks;
                    int blob = S_ISREG(st->st_mode);   /* as in sh_fd_stat */
                    sh_stat_synth(m, c.e, st);
                    if (blob)
                        st->st_blocks = b;
                }
            } else {
                dir_answer(&c, st);
            }
            return;
        }
        sh_fd_clear(fd);   /* closed and reused by means the shim did not see */
    }
    if (sh_nmounts > 0 && S_ISDIR(st->st_mode) && !(st->st_mode & 07))
        sh_fd_untracked(fd, st);
}

void sh_fd_untracked(int fd, struct stat *st)
{
    int e = errno;
    SH_SCRATCH(t);
    char pp[32];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, t->a, SH_SCR - 1);
    if (k > 0) {
        t->a[k] = 0;
        if (sh_map_back(t->a, t->b, SH_PATH))
            st->st_mode = (st->st_mode & S_IFMT) | 0555;   /* what stat of its path says (sh_stat_skel) */
    }
    errno = e;
}

int sh_at_untracked(int d, const char *p, struct stat *st, int follow)
{
    /* AT_FDCWD: the cwd's state says where it is (path.c), an inherited one included */
    if (sh_nmounts <= 0 || d < 0 || !p || p[0] == '/' || sh_fd_ours(d))
        return 0;
    int e = errno, done = 0;
    SH_SCRATCH(t);
    char pp[32], *real = t->a, *lg = t->b;
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", d);
    ssize_t k = sh_r.readlink(pp, real, SH_SCR - 1);
    if (k > 0) {
        real[k] = 0;
        if (sh_map_back(real, lg, SH_PATH) && (size_t)snprintf(t->c, SH_SCR, "%s%s%s", lg, *p ? "/" : "", p) < SH_PATH) {
            SH_LOC(l);
            struct stat s2;
            if (sh_classify_abs(t->c, &l) != L_NONE)
                done = sh_stat(&l, follow, &s2) == 0;
            else
                done = (follow ? sh_r.stat : sh_r.lstat)(l.kpath ? l.kpath : t->c, &s2) == 0;
            if (done)
                *st = s2;
        }
    }
    errno = e;
    return done;
}

int sh_fd_dirloc(int fd, struct sh_loc *l)
{
    struct fdent f;
    struct stat st;
    if (!fd_get(fd, &f, &st))
        return 0;
    /* a file's (an O_PATH descriptor lives on its parent's skeleton dir): relative lookups under it must
     * fail with ENOTDIR, as the walk does for "file/x" */
    if (f.kind == FD_DIR || f.kind == FD_FILE) {
        const struct sh_mount *m = sh_mnt(f.m);
        if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2)
            return 0;
        const char *r = m->broken ? "" : sh_epath(m, f.e);
        SH_SCRATCH(t);
        snprintf(t->a, SH_SCR, "%s%s%s", m->path, *r ? "/" : "", r);
        return sh_classify_abs(t->a, l) != L_NONE;
    }
    SH_SCRATCH(t);
    char pp[32], *real = t->a, *lg = t->b;
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, real, SH_SCR - 1);
    if (k <= 0)
        return 0;
    real[k] = 0;
    return sh_map_back(real, lg, SH_PATH) && sh_classify_abs(lg, l) != L_NONE;
}


/* --- the shim's own descriptors and the program's numbers (issue 41 item 1) ---------------------------- */

/* See shim.h. */
int sh_fd_aside(int fd)
{
    int e = errno;
    /* SH_FD_ASIDE_TOP - 16 and up when the soft limit allows it, else the last 16 below the soft limit; never at or
     * below fd, which is closed here and is the number the program's call is to be given */
    int arg = SH_FD_ASIDE_TOP - 16, h = sh_r.fcntl(fd, F_DUPFD_CLOEXEC, arg > fd ? arg : fd + 1);
    if (h < 0 && errno == EINVAL) {
        struct rlimit rl;
        arg = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 16 && rl.rlim_cur < SH_FD_ASIDE_TOP
                  ? (int)rl.rlim_cur - 16 : fd + 1;
        h = sh_r.fcntl(fd, F_DUPFD_CLOEXEC, arg > fd ? arg : fd + 1);
    }
    if (h < 0 && arg > fd + 1)
        h = sh_r.fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
    if (h < 0) {
        errno = e;
        return -1;
    }
    sh_r.close(fd);
    errno = e;
    return h;
}

/* See shim.h. */
int sh_fd_low(int fd, int cloexec)
{
    int e = errno;
    int low = sh_r.fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
    if (low >= 0 && low < fd) {
        sh_r.close(fd);
        fd = low;
    } else if (low >= 0) {
        sh_r.close(low);
    }
    errno = e;
    return fd;
}
