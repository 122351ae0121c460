/* helper.c - running the helper and the lock protocol of docs/internals.md: posix_spawn with the lock as fd 3,
 * lock files, the cache's directories (mkdir -p with the shared cache's modes), and reading the one-line reasons
 * the helper leaves behind. */
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

extern char **environ;

/* --- running the helper ------------------------------------------------------------------------------ */

static const char *helper_path(char *buf, size_t n)
{
    if (sh_helper_env[0])
        return sh_helper_env;
#ifdef HFS3_INSTALLED_HELPER
    if (sh_r.access(HFS3_INSTALLED_HELPER, X_OK) == 0)
        return HFS3_INSTALLED_HELPER;
#endif
    Dl_info di;
    if (dladdr((void *)sh_init, &di) && di.dli_fname && di.dli_fname[0] == '/') {
        const char *sl = strrchr(di.dli_fname, '/');
        if ((size_t)snprintf(buf, n, "%.*s/../bin/hfs3-manifest", (int)(sl - di.dli_fname), di.dli_fname) < n)
            return buf;
    }
    return "hfs3-manifest";
}

/* posix_spawn the helper with argv (argv[0] filled here): stdin/stdout /dev/null, stderr kept unless quiet
 * (then the shim logs the one line itself, from the cache; HFS3_LOG=debug keeps it), lockfd (if >= 0) as
 * descriptor 3, nothing else inherited, no LD_PRELOAD, default signal dispositions. pid or -errno. */
pid_t sh_spawn_helper(char **argv, int lockfd, int quiet)
{
    char hb[SH_PATH];
    argv[0] = (char *)helper_path(hb, sizeof hb);
    size_t ne = 0;
    for (char **e = environ; e && *e; e++)
        ne++;
    char **envp = malloc((ne + 2) * sizeof *envp);
    if (!envp)
        return -ENOMEM;
    size_t k = 0;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "HFS3_CACHE_DIR=", 15))
            envp[k++] = *e;
    envp[k++] = sh_cache_env;
    envp[k] = NULL;
    int high = -1;
    if (lockfd >= 0 && lockfd <= 3) {
        high = sh_r.fcntl(lockfd, F_DUPFD_CLOEXEC, 10);
        if (high < 0) {
            free(envp);
            return -errno;
        }
        lockfd = high;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (quiet && sh_log_level < 3)
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (lockfd >= 0)
        posix_spawn_file_actions_adddup2(&fa, lockfd, 3);
    posix_spawn_file_actions_addclosefrom_np(&fa, lockfd >= 0 ? 4 : 3);
    sigset_t all, none;
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free(envp);
    if (high >= 0)
        sh_r.close(high);
    if (rc) {
        sh_log(0, "cannot run the helper %s: %s", argv[0], strerror(rc));
        return -rc;
    }
    return pid;
}

void sh_reap(pid_t pid)
{
    /* The helper has exited or is exiting (it released the lock, or it double-forked). ECHILD is fine: the
     * host may sh_reap it, or ignore SIGCHLD. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* 1 when CACHE is shared with a group: it exists setgid and group-writable (hfs3_cache_check_dir's rule, so the
 * shim and the helper agree). What the shim creates there must then keep the group's access whatever the umask:
 * another user of the group takes the same lock files and creates entries in the same directories. Asked at each
 * creation (first-touch code, never the fast path): CACHE may appear, made by the shim itself, in between. */
int sh_cache_shared(void)
{
    struct stat st;
    return sh_r.stat(sh_cache, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
}

/* Opens (creating) the lock file at path and flock()s it: 0600, or 0660 in a shared cache (fchmod when we own it:
 * the umask may have cut the group bits, and a lock file another user cannot open read-write breaks every later
 * open of that file for them). The descriptor, or -errno. */
static int lock_file(const char *path)
{
    mode_t mode = sh_cache_shared() ? 0660 : 0600;
    int fd = sh_r.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (mode == 0660 && sh_r.fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) != mode)
        (void)REAL(fchmod, int (*)(int, mode_t))(fd, mode);
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            int e = errno;
            sh_r.close(fd);
            return -e;
        }
    }
    return fd;
}

int sh_exists(const char *p)
{
    struct stat st;
    return sh_r.stat(p, &st) == 0;
}

/* The lock protocol: take lockpath, skip when done_path appeared meanwhile, else run the helper with the
 * lock as fd 3 and wait for the lock to come free. 0, or -errno when it could not even start. */
int sh_run_locked(const char *lockpath, const char *done_path, char **argv, int quiet)
{
    int fd = lock_file(lockpath);
    if (fd < 0)
        return fd;
    if (done_path && sh_exists(done_path)) {
        sh_r.close(fd);
        return 0;
    }
    pid_t pid = sh_spawn_helper(argv, fd, quiet);
    sh_r.close(fd);
    if (pid < 0)
        return pid;
    fd = lock_file(lockpath);   /* returns once the helper exited (or closed its fd 3) */
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        sh_r.close(fd);
    }
    sh_reap(pid);
    return 0;
}

/* mkdir -p of a path under CACHE: 0700 under the umask, or 02770 in a shared cache (chmod of the directories
 * this call created, so the umask cannot cut the group's bits; existing ones are left as they are). */
void sh_mkdirs(const char *path)
{
    if (sh_cache_ready() < 0)
        return;
    int shared = sh_cache_shared();
    mode_t mode = shared ? 02770 : 0700;
    char b[SH_PATH];
    size_t n = strlen(path), cl = strlen(sh_cache);
    /* only below the cache, which sh_cache_ready made */
    if (n >= sizeof b || n <= cl || strncmp(path, sh_cache, cl) || path[cl] != '/')
        return;
    memcpy(b, path, n + 1);
    for (char *p = b + cl + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (sh_r.mkdir(b, mode) == 0 && shared)
                (void)REAL(chmod, int (*)(const char *, mode_t))(b, mode);
            *p = c;
            if (!c)
                break;
        }
    }
}

void sh_read_line(const char *path, char *out, size_t n)
{
    out[0] = 0;
    int fd = sh_r.open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t k = read(fd, out, n - 1);
    sh_r.close(fd);
    if (k < 0)
        k = 0;
    out[k] = 0;
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = 0;
}

