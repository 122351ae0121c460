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

void sh_fd_set(int fd, int kind, int m, uint32_t e)
{
    struct stat st;
    if (fd < 0 || fd >= SH_FD_MAX || sh_in_vfork() || sh_r.fstat(fd, &st) < 0)
        return;
    __atomic_store_n(&sh_fd_used, 1, __ATOMIC_RELAXED);
    fdtab[fd].kind = 0;
    fdtab[fd].m = (uint32_t)m;
    fdtab[fd].e = e;
    fdtab[fd].dev = st.st_dev;
    fdtab[fd].ino = st.st_ino;
    __atomic_store_n(&fdtab[fd].kind, (uint8_t)kind, __ATOMIC_RELEASE);
}

void sh_fd_clear(int fd)
{
    if (fd >= 0 && fd < SH_FD_MAX && __atomic_load_n(&fdtab[fd].kind, __ATOMIC_RELAXED) && !sh_in_vfork())
        __atomic_store_n(&fdtab[fd].kind, 0, __ATOMIC_RELEASE);
}

void sh_fd_dup(int from, int to)
{
    if (to < 0 || to >= SH_FD_MAX)
        return;
    int ours = from >= 0 && from < SH_FD_MAX && __atomic_load_n(&fdtab[from].kind, __ATOMIC_ACQUIRE);
    if (!ours) {
        sh_fd_clear(to);
        return;
    }
    if (sh_in_vfork())
        return;
    __atomic_store_n(&sh_fd_used, 1, __ATOMIC_RELAXED);
    fdtab[to].kind = 0;
    fdtab[to].m = fdtab[from].m;
    fdtab[to].e = fdtab[from].e;
    fdtab[to].dev = fdtab[from].dev;
    fdtab[to].ino = fdtab[from].ino;
    __atomic_store_n(&fdtab[to].kind, fdtab[from].kind, __ATOMIC_RELEASE);
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
    return fd >= 0 && fd < SH_FD_MAX && __atomic_load_n(&fdtab[fd].kind, __ATOMIC_ACQUIRE);
}

/* The live table entry of fd (its real identity still matches), with the real fstat in *st. */
static int fd_get(int fd, struct fdent *out, struct stat *st)
{
    if (!sh_fd_ours(fd))
        return 0;
    *out = fdtab[fd];
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

int sh_fd_stat(int fd, struct stat *st)
{
    struct fdent f;
    if (!fd_get(fd, &f, st))
        return 0;
    if (f.kind == FD_FILE) {
        const struct sh_mount *m = &sh_mounts[f.m];
        if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2 || m->broken)
            return 0;
        sh_stat_synth(m, f.e, st);
    } else {
        st->st_mode = (st->st_mode & S_IFMT) | 0555;
        if (f.kind == FD_DIR && f.e == 0 && sh_mounts[f.m].sub)
            st->st_ino = sh_hub_root_ino(&sh_mounts[f.m]);   /* a hub's repository: as its stat (hub.c) */
    }
    return 1;
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
        const struct sh_mount *m = &sh_mounts[f.m];
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

