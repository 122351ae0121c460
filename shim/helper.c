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
#include <sys/syscall.h>
#include <linux/futex.h>

extern char **environ;

/* --- running the helper ------------------------------------------------------------------------------ */

/* Which helper to run, in this order: $HFS3_HELPER (a bare name is looked up in PATH), then
 * ../bin/hfs3-manifest beside this library (an install tree: PREFIX/lib/libhfs3shim.so), then the compiled-in
 * PREFIX/bin/hfs3-manifest, then hfs3-manifest in PATH. *why says why (logged once at debug). */
static const char *helper_path(char *buf, size_t n, const char **why)
{
    if (sh_helper_env[0]) {
        *why = strchr(sh_helper_env, '/') ? "HFS3_HELPER" : "HFS3_HELPER, looked up in PATH";
        return sh_helper_env;
    }
    Dl_info di;
    if (dladdr((void *)sh_init, &di) && di.dli_fname && di.dli_fname[0] == '/') {
        const char *sl = strrchr(di.dli_fname, '/');
        if ((size_t)snprintf(buf, n, "%.*s/../bin/hfs3-manifest", (int)(sl - di.dli_fname), di.dli_fname) < n &&
            sh_r.access(buf, X_OK) == 0) {
            *why = "beside the library";
            return buf;
        }
    }
#ifdef HFS3_INSTALLED_HELPER
    if (sh_r.access(HFS3_INSTALLED_HELPER, X_OK) == 0) {
        *why = "the installed prefix";
        return HFS3_INSTALLED_HELPER;
    }
#endif
    *why = "none found beside the library or in the prefix: looked up in PATH";
    return "hfs3-manifest";
}

/* A system call that leaves errno alone: the helper's parent process below shares our memory, and so the errno of
 * whichever host thread started it; -errno on failure. */
static inline long raw_sc(long n, long a, long b, long c, long d, long e)
{
#if defined(__x86_64__)
    long r;
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
    return r;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c,
                  x3 __asm__("x3") = d, x4 __asm__("x4") = e;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory", "cc");
    return x0;
#else
    long r = syscall(n, a, b, c, d, e);
    return r < 0 ? -errno : r;
#endif
}

/* One helper being run (issue 41 item 2). Its exit must not signal the host: every child that execs sends its
 * parent SIGCHLD when it exits (exec sets the exit signal back to SIGCHLD), and a host's handler without SA_RESTART
 * then failed the host's own open() with EINTR. So the helper is the child of a small process of ours, `mid`:
 * clone(CLONE_VM) with exit signal 0 and no exec, which starts the helper (clone(CLONE_VM | CLONE_VFORK), exec),
 * says its pid, waits for it and keeps its status here, then exits, signalling nobody. sh_reap reaps mid
 * (waitpid __WALL: the host's wait() never takes it) and gives the helper's status. mid runs on our memory with
 * every signal blocked and default dispositions (its own table: no host handler runs there), raw system calls
 * only (raw_sc), and holds no descriptor once the helper has started. */
struct spawn_slot {
    pid_t mid;          /* atomic: 0 free, -1 claimed, else mid's pid */
    int helper;         /* atomic (futex): 0 until mid says: the helper's pid, or -errno */
    int status;         /* the helper's wait status, set before mid exits */
    char *stack;        /* SH_SPAWN_STACK bytes: mid's on the upper half, the helper's child on the lower */
    const char *path;
    char **argv, **envp;
    int lockfd;         /* becomes descriptor 3 (-1: none) */
    int null2;          /* stderr to /dev/null too */
    int err;            /* the errno of the helper child's step that failed (it shares our memory until its exec) */
    int direct;         /* no mid: the helper is our own child (spawn_direct), mid == its pid */
    int abandoned;      /* atomic: the open that started it gave up (pending_add): pending_reap reaps it */
};
#define SH_SPAWN_SLOTS 256
#define SH_SPAWN_STACK (64 * 1024)
static struct spawn_slot spawn_slots[SH_SPAWN_SLOTS];

/* every signal's disposition to default, in the calling process's own table */
static __attribute__((no_sanitize_address, no_sanitize_undefined)) void all_default(void)
{
    unsigned long dfl[8] = {0};   /* a kernel sigaction: SIG_DFL, no flags, an empty mask */
    for (int sig = 1; sig < 65; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            raw_sc(SYS_rt_sigaction, sig, (long)dfl, 0, 8, 0);
}

/* The helper's child, on our memory until its exec: the descriptors (lockfd as 3, /dev/null on 0, 1 and maybe 2,
 * nothing else), the empty mask, the exec. A failure: its errno in s->err, exit 127. */
static __attribute__((no_sanitize_address, no_sanitize_undefined)) int spawn_child(void *p)
{
    struct spawn_slot *s = p;
    long r = 0, none = 0;
    if (s->lockfd >= 0)
        r = s->lockfd == 3 ? raw_sc(SYS_fcntl, 3, F_SETFD, 0, 0, 0) : raw_sc(SYS_dup3, s->lockfd, 3, 0, 0, 0);
    long nfd = r < 0 ? r : raw_sc(SYS_openat, AT_FDCWD, (long)"/dev/null", O_RDWR, 0, 0);
    for (int t = 0; t < 3 && nfd >= 0 && r >= 0; t++)
        if ((t < 2 || s->null2 || s->lockfd == t) && nfd != t)   /* (2 the lock: the host had closed its stderr) */
            r = raw_sc(SYS_dup3, nfd, t, 0, 0, 0);
    if (nfd < 0)
        r = nfd;
    if (r >= 0) {
        unsigned first = s->lockfd >= 0 ? 4 : 3;
        if (raw_sc(SYS_close_range, first, ~0U, 0, 0, 0) < 0)
            for (unsigned fd = first; fd < 4096; fd++)
                raw_sc(SYS_close, fd, 0, 0, 0, 0);
        raw_sc(SYS_rt_sigprocmask, SIG_SETMASK, (long)&none, 0, 8, 0);
        r = raw_sc(SYS_execve, (long)s->path, (long)s->argv, (long)s->envp, 0, 0);
    }
    s->err = r < 0 ? (int)-r : EIO;
    raw_sc(SYS_exit, 127, 0, 0, 0, 0);
    return 0;
}

/* mid (see struct spawn_slot): starts the helper, says its pid (futex wake), waits for it, exits */
static __attribute__((no_sanitize_address, no_sanitize_undefined)) int spawn_mid(void *p)
{
    struct spawn_slot *s = p;
    all_default();
    long h = clone(spawn_child, s->stack + SH_SPAWN_STACK / 2, CLONE_VM | CLONE_VFORK | SIGCHLD, s);
    /* the helper has its copies now (it execed): mid keeps none of the host's descriptors (a pipe's end would
     * never see its EOF) nor the lock, which is free the moment the helper exits, as before mid (the helper's
     * detached flush takes the blob's lock once it is gone: t_shim_shared) */
    if (raw_sc(SYS_close_range, 0, ~0U, 0, 0, 0) < 0)
        for (int fd = 0; fd < 4096; fd++)
            raw_sc(SYS_close, fd, 0, 0, 0, 0);
    int err = h < 0 ? EAGAIN : s->err;
    int st = 0;
    if (h > 0 && err)
        raw_sc(SYS_wait4, h, (long)&st, __WALL, 0, 0);
    __atomic_store_n(&s->helper, err ? -err : (int)h, __ATOMIC_RELEASE);
    raw_sc(SYS_futex, (long)&s->helper, FUTEX_WAKE_PRIVATE, 1, 0, 0);
    if (!err) {
        while (raw_sc(SYS_wait4, h, (long)&st, __WALL, 0, 0) == -EINTR)
            ;
        __atomic_store_n(&s->status, st, __ATOMIC_RELEASE);
    }
    raw_sc(SYS_exit, 0, 0, 0, 0, 0);
    return 0;
}

static void pending_reap(void);

/* argv[0] looked up in PATH (a name without '/', as a shell would): the first executable match in buf, or NULL */
static const char *path_lookup(const char *name, char *buf, size_t n)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;; ) {
        const char *c = strchr(p, ':');
        size_t dl = c ? (size_t)(c - p) : strlen(p);
        if ((size_t)snprintf(buf, n, "%.*s%s%s", (int)dl, p, dl ? "/" : "", name) < n &&
            sh_r.access(buf, X_OK) == 0)
            return buf;
        if (!c)
            return NULL;
        p = c + 1;
    }
}

/* 1 where a general clone (CLONE_VM without CLONE_THREAD or CLONE_VFORK, as mid's) kills the process instead of
 * failing: under valgrind, which says "Unsupported clone() flags" and exits the program (its preload is in
 * LD_PRELOAD). There the helper is started by libc's posix_spawn as before issue 41, and its exit sends the host
 * SIGCHLD: the one place it does. */
static int general_clone_unsafe(void)
{
    static int known;   /* 0 not asked, 1 safe, 2 unsafe */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (!k) {
        const char *pre = getenv("LD_PRELOAD");
        k = pre && strstr(pre, "/vgpreload_") ? 2 : 1;
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k == 2;
}

/* The helper as our own child, by libc's posix_spawn (not dl.c's interposer: it would judge /dev/null again from
 * inside a load): the descriptors and signals of spawn_child. 0 and *pid, or an errno. */
static int spawn_direct(const char *exe, char **argv, char **envp, int lockfd, int null2, pid_t *pid)
{
    int high = -1;
    if (lockfd >= 0 && lockfd <= 3) {
        if ((high = sh_r.fcntl(lockfd, F_DUPFD_CLOEXEC, 10)) < 0)
            return errno;
        lockfd = high;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    REAL(posix_spawn_file_actions_init, int (*)(posix_spawn_file_actions_t *))(&fa);
    posix_spawnattr_init(&at);
    int (*addopen)(posix_spawn_file_actions_t *, int, const char *, int, mode_t) =
        REAL(posix_spawn_file_actions_addopen, int (*)(posix_spawn_file_actions_t *, int, const char *, int, mode_t));
    int (*adddup2)(posix_spawn_file_actions_t *, int, int) =
        REAL(posix_spawn_file_actions_adddup2, int (*)(posix_spawn_file_actions_t *, int, int));
    int (*addclosefrom)(posix_spawn_file_actions_t *, int) =
        REAL(posix_spawn_file_actions_addclosefrom_np, int (*)(posix_spawn_file_actions_t *, int));
    addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (null2)
        addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    if (lockfd >= 0)
        adddup2(&fa, lockfd, 3);
    addclosefrom(&fa, lockfd >= 0 ? 4 : 3);
    sigset_t all, none;
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    int rc = REAL(posix_spawn, int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                                       const posix_spawnattr_t *, char *const[], char *const[]))(pid, exe, &fa, &at,
                                                                                                 argv, envp);
    REAL(posix_spawn_file_actions_destroy, int (*)(posix_spawn_file_actions_t *))(&fa);
    posix_spawnattr_destroy(&at);
    if (high >= 0)
        sh_r.close(high);
    return rc;
}

/* Runs the helper with argv (argv[0] filled here): stdin/stdout /dev/null, stderr kept unless quiet (then the shim
 * logs the one line itself, from the cache; HFS3_LOG=debug keeps it), lockfd (if >= 0) as descriptor 3, nothing
 * else inherited, no LD_PRELOAD, default signal dispositions, an empty mask, as the child of mid (struct
 * spawn_slot): its exit signals nothing to the host. No descriptor of the shim's is made in the host. The helper's
 * pid (sh_reap reaps it) or -errno. */
pid_t sh_spawn_helper(char **argv, int lockfd, int quiet)
{
    SH_SCRATCH(t);
    const char *why = "";
    argv[0] = (char *)helper_path(t->a, SH_SCR, &why);
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL))
        sh_log(3, "helper: %s (%s)", argv[0], why);
    const char *exe = strchr(argv[0], '/') ? argv[0] : path_lookup(argv[0], t->b, SH_SCR);
    int rc = exe ? 0 : ENOENT;
    struct spawn_slot *s = NULL;
    /* 256 helpers of this process running at once: wait for one to end (each is reaped by the open that started it,
     * or below when that open gave up), as the kernel's open would just take longer; 300 threads opening distinct
     * cold files gave EIO to 44 of them. No handler of the host runs in this wait: the caller may hold the file's
     * lock (LOCK_EX), which a handler's siglongjmp would leave held for the life of the process. */
    sigset_t all, old;
    sigfillset(&all);
    int blocked = 0;
    for (int i = 0; !rc && !s; i++) {
        if (i == SH_SPAWN_SLOTS) {
            if (!blocked++)
                pthread_sigmask(SIG_BLOCK, &all, &old);
            int e = errno;
            pending_reap();
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
            errno = e;
            i = 0;
        }
        pid_t z = 0;
        if (__atomic_compare_exchange_n(&spawn_slots[i].mid, &z, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            s = &spawn_slots[i];
    }
    if (blocked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    size_t ne = 0;
    for (char **e = environ; e && *e; e++)
        ne++;
    /* mapped, not malloc-ed: this also runs in tree.c's chdir_by_copy, a raw-clone copy of the process in which
     * another thread's malloc lock may be held for good (no fork handler reset it): a malloc there hung the copy,
     * and with it the vfork child and the program's subprocess.run (3 of 15 runs, review of issue 41) */
    size_t envsz = (ne + 2) * sizeof(char *);
    char **envp = rc ? NULL : mmap(NULL, envsz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (envp == MAP_FAILED)
        envp = NULL;
    if (!rc && !envp)
        rc = ENOMEM;
    if (!rc) {
        size_t k = 0;
        for (char **e = environ; e && *e; e++)
            if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "HFS3_CACHE_DIR=", 15))
                envp[k++] = *e;
        envp[k++] = sh_cache_env;
        envp[k] = NULL;
        s->direct = general_clone_unsafe();
    }
    if (!rc && s->direct) {
        pid_t h = -1;
        if (!(rc = spawn_direct(exe, argv, envp, lockfd, quiet && sh_log_level < 2, &h))) {
            __atomic_store_n(&s->helper, h, __ATOMIC_RELEASE);
            __atomic_store_n(&s->mid, h, __ATOMIC_RELEASE);
            munmap(envp, envsz);
            return h;
        }
    } else if (!rc) {
        s->stack = mmap(NULL, SH_SPAWN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (s->stack == MAP_FAILED)
            rc = ENOMEM;
    }
    pid_t pid = -1;
    if (!rc) {
        s->path = exe;
        s->argv = argv;
        s->envp = envp;
        s->lockfd = lockfd;
        s->null2 = quiet && sh_log_level < 2;   /* info and debug keep its stderr */
        s->err = 0;
        s->status = 0;
        __atomic_store_n(&s->helper, 0, __ATOMIC_RELEASE);
        pthread_sigmask(SIG_BLOCK, &all, &old);   /* mid starts with all blocked, and stays so */
        int e = errno;
        pid_t mid = clone(spawn_mid, s->stack + SH_SPAWN_STACK, CLONE_VM, s);
        if (mid < 0) {
            rc = errno;
        } else {
            __atomic_store_n(&s->mid, mid, __ATOMIC_RELEASE);
            int h;
            while ((h = __atomic_load_n(&s->helper, __ATOMIC_ACQUIRE)) == 0)
                syscall(SYS_futex, &s->helper, FUTEX_WAIT_PRIVATE, 0, NULL);
            if (h < 0) {
                rc = -h;
                int st;
                while (waitpid(mid, &st, __WALL) < 0 && errno == EINTR)
                    ;
            } else {
                pid = h;
            }
        }
        errno = e;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (envp)
        munmap(envp, envsz);
    if (rc && s) {
        if (s->stack && s->stack != MAP_FAILED)
            munmap(s->stack, SH_SPAWN_STACK);
        s->stack = NULL;
        __atomic_store_n(&s->mid, 0, __ATOMIC_RELEASE);
    }
    if (rc) {
        sh_log(0, "cannot run the helper %s: %s (HFS3_HELPER names a path; a bare name is looked up in PATH)",
               argv[0], strerror(rc));
        return -rc;
    }
    return pid;
}

/* Reaps helper pid's mid (flags: 0 or WNOHANG): the helper's wait status in *st; 1 reaped, 0 not yet (WNOHANG),
 * -1 unknown (no such helper of ours) */
static int reap_mid(pid_t pid, int flags, int *st)
{
    for (int i = 0; i < SH_SPAWN_SLOTS; i++) {
        struct spawn_slot *s = &spawn_slots[i];
        pid_t mid = __atomic_load_n(&s->mid, __ATOMIC_ACQUIRE);
        if (mid <= 0 || __atomic_load_n(&s->helper, __ATOMIC_ACQUIRE) != pid)
            continue;
        int e = errno, ms, r;
        while ((r = waitpid(mid, &ms, flags | __WALL)) < 0 && errno == EINTR)
            ;
        errno = e;
        if (r == 0)
            return 0;
        /* mid is gone (r == mid), or was taken by someone else's waitpid(__WALL): its status stands */
        *st = s->direct ? (r == mid ? ms : 0) : __atomic_load_n(&s->status, __ATOMIC_ACQUIRE);
        if (s->stack)
            munmap(s->stack, SH_SPAWN_STACK);
        s->stack = NULL;
        s->direct = 0;
        __atomic_store_n(&s->helper, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&s->abandoned, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&s->mid, 0, __ATOMIC_RELEASE);
        return r == mid ? 1 : -1;
    }
    return -1;
}

int sh_reap(pid_t pid)
{
    /* The helper has exited or is exiting (it released the lock, or it double-forked); mid follows it at once. */
    int st = 0;
    if (reap_mid(pid, 0, &st) != 1)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
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

/* Lock descriptors open in this process now, in any thread: a fork() in another thread copies them into the
 * child, where one would keep the lock held (flock belongs to the open file description) for as long as the
 * child lives, and a child that then opens the same file waits for itself. The child handler closes them. */
static int locks_inflight;

/* Helpers this process started and left running when an open gave up (a signal, a stall): reaped later, by
 * their slot (a list of 32 lost the 33rd, whose slot then stayed taken for the life of the process). */
static void pending_add(pid_t pid)
{
    for (int i = 0; i < SH_SPAWN_SLOTS; i++)
        if (__atomic_load_n(&spawn_slots[i].mid, __ATOMIC_ACQUIRE) > 0 &&
            __atomic_load_n(&spawn_slots[i].helper, __ATOMIC_ACQUIRE) == pid)
            __atomic_store_n(&spawn_slots[i].abandoned, 1, __ATOMIC_RELEASE);
}

static void pending_reap(void)
{
    for (int i = 0; i < SH_SPAWN_SLOTS; i++) {
        struct spawn_slot *s = &spawn_slots[i];
        int one = 1, st;
        if (!__atomic_load_n(&s->abandoned, __ATOMIC_ACQUIRE) ||
            !__atomic_compare_exchange_n(&s->abandoned, &one, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;   /* (taken by another thread's pending_reap) */
        pid_t h = __atomic_load_n(&s->helper, __ATOMIC_ACQUIRE);
        if (h <= 0 || reap_mid(h, WNOHANG, &st) == 0)
            __atomic_store_n(&s->abandoned, h > 0, __ATOMIC_RELEASE);   /* still running: later */
    }
}

/* Opens (creating) the lock file at path, never through a symlink (O_NOFOLLOW), never anything but a regular
 * file. Created by this call (O_EXCL): fchmod-ed to 0600, or 0660 in a shared cache (the umask may have cut the
 * group bits, and a lock file another user cannot open read-write breaks every later open of that file for
 * them); an existing one is never chmod-ed. Counted in locks_inflight until lock_close. fd or -errno. */
static int lock_open(const char *path)
{
    mode_t mode = sh_cache_shared() ? 0660 : 0600;
    __atomic_add_fetch(&locks_inflight, 1, __ATOMIC_ACQ_REL);
    int fd = sh_cache_open(path, O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC, mode);
    if (fd >= 0)
        (void)REAL(fchmod, int (*)(int, mode_t))(fd, mode);
    else if (errno == EEXIST)
        fd = sh_cache_open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
    int e = errno;
    struct stat st;
    if (fd >= 0 && (sh_r.fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        sh_r.close(fd);
        fd = -1;
        e = EIO;
    } else if (fd >= 0 && !sh_trusted_file(fd, path)) {   /* an owner the rules refuse: logged there */
        sh_r.close(fd);
        __atomic_sub_fetch(&locks_inflight, 1, __ATOMIC_ACQ_REL);
        return -EPERM;
    }
    if (fd < 0) {
        __atomic_sub_fetch(&locks_inflight, 1, __ATOMIC_ACQ_REL);
        if (e == ELOOP || e == EIO)
            sh_log(0, "lock file %s is not a regular file: refusing it", path);
        return -e;
    }
    return fd;
}

/* Closes a lock descriptor; unlock first when the lock is ours alone (not when the helper shares it). */
static void lock_close(int fd, int unlock)
{
    if (unlock)
        flock(fd, LOCK_UN);
    sh_r.close(fd);
    __atomic_sub_fetch(&locks_inflight, 1, __ATOMIC_ACQ_REL);
}

/* The pin of blob hex (include/hfs3/gc.h): LOCK_SH on CACHE/locks/<hex>.pin.lock, taken before an open waits on
 * the blob's fetch and held until the open has the file, so that no gc (a fetch making room under
 * HFS3_CACHE_MAX, `cache gc`) removes the blob between the helper's install and the open. A gc holds the pin
 * exclusively for one unlink only: waited for up to a second, 1 ms at a time. fd, or -1 (no pin: the open
 * goes on unprotected). The descriptor is a lock descriptor: closed in a forked child (sh_locks_after_fork),
 * released when this process dies. */
int sh_pin(const char *hex)
{
    SH_SCRATCH(t);
    if ((size_t)snprintf(t->a, SH_SCR, "%s/locks/%s.pin.lock", sh_cache, hex) >= SH_SCR)
        return -1;
    int fd = lock_open(t->a);
    if (fd < 0)
        return -1;
    for (int i = 0; flock(fd, LOCK_SH | LOCK_NB) < 0; i++) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || i >= 1000) {
            lock_close(fd, 0);
            return -1;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return fd;
}

void sh_unpin(int fd)
{
    if (fd >= 0)
        lock_close(fd, 0);   /* the close releases it (a forked child's copy was closed in the child) */
}

/* Progress of the fetch of one sha256: the helper writes tmp/<sha>.<16 random hex>.part, allocated at its full
 * size up front (its mtime moves with each write), and the sidecar tmp/<sha>.<rand>.done, which grows as ranges
 * complete (docs/internals.md "Size, last use and progress"). Every tmp/ entry named "<sha>." is folded into
 * one number (name, size, mtime), so a write, a sidecar line, a new or a removed file all change it; -1 when
 * there is none. The slow path of a wait: getdents64 into a scratch buffer, no allocation; never in a vfork
 * child (the caller never waits there). */
static long long progress(const char *tmpdir, const char *sha)
{
    if (!tmpdir || !sha)
        return -1;
    int dfd = sh_cache_open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dfd < 0)
        return -1;
    SH_SCRATCH(t);
    size_t sl = strlen(sha);
    long long acc = -1;
    long n;
    while ((n = syscall(SYS_getdents64, dfd, t->a, SH_SCR)) > 0) {
        for (long off = 0; off < n;) {
            struct dirent64 *d = (struct dirent64 *)(t->a + off);
            off += d->d_reclen;
            if (strncmp(d->d_name, sha, sl) || d->d_name[sl] != '.')
                continue;
            struct stat st;
            if (sh_r.fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            unsigned long long h = 1469598103934665603ULL;
            for (const char *c = d->d_name + sl; *c; c++)
                h = (h ^ (unsigned char)*c) * 1099511628211ULL;
            acc = acc * 31 + (long long)(h & 0xffffffffffffULL) + (long long)st.st_size * 1000003LL +
                  st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        }
    }
    sh_r.close(dfd);
    return acc;
}

/* Bytes so far of the fetch of sha (docs/internals.md "Size, last use and progress"): from the sidecar
 * tmp/<sha>.<rand>.done: line 1 "hfs3-done 1 SIZE CHUNK", then one completed range number per line; bytes =
 * the distinct ranges' sizes (the last one SIZE - N*CHUNK). -1 when there is no sidecar (one range: nothing
 * until it is done); *side: the sidecar's size (0 when none). Scratch buffers only: one for the directory, one
 * for the file, one as the ranges' bitmap. */
static long long bytes_so_far(const char *tmpdir, const char *sha, long long *side)
{
    *side = 0;
    int dfd = sh_cache_open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dfd < 0)
        return -1;
    SH_SCRATCH(t);
    size_t sl = strlen(sha);
    int fd = -1;
    long n;
    while (fd < 0 && (n = syscall(SYS_getdents64, dfd, t->a, SH_SCR)) > 0) {
        for (long off = 0; off < n && fd < 0;) {
            struct dirent64 *d = (struct dirent64 *)(t->a + off);
            off += d->d_reclen;
            size_t dl = strlen(d->d_name);
            if (!strncmp(d->d_name, sha, sl) && d->d_name[sl] == '.' && dl > sl + 5 &&
                !strcmp(d->d_name + dl - 5, ".done"))
                fd = sh_r.openat(dfd, d->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        }
    }
    sh_r.close(dfd);
    if (fd < 0)
        return -1;
    struct stat sst;
    if (sh_r.fstat(fd, &sst) == 0)
        *side = (long long)sst.st_size;
    unsigned char *seen = (unsigned char *)t->c;
    memset(seen, 0, SH_SCR);
    unsigned long long size = 0, chunk = 0, bytes = 0, num = 0;
    int line = 0, have = 0, hdr_ok = 0;
    char hdr[64];
    size_t hl = 0;
    while ((n = read(fd, t->b, SH_SCR)) > 0) {
        for (long i = 0; i < n; i++) {
            char c = t->b[i];
            if (line == 0) {
                if (c != '\n') {
                    if (hl < sizeof hdr - 1)
                        hdr[hl++] = c;
                    continue;
                }
                hdr[hl] = 0;
                hdr_ok = sscanf(hdr, "hfs3-done 1 %llu %llu", &size, &chunk) == 2 && chunk > 0;
                line = 1;
                continue;
            }
            if (!hdr_ok)
                break;
            if (c >= '0' && c <= '9') {
                num = num * 10 + (unsigned long long)(c - '0');
                have = 1;
            } else if (c == '\n') {
                if (have && num * chunk < size && num < SH_SCR * 8ULL && !(seen[num / 8] & (1u << (num % 8)))) {
                    seen[num / 8] |= (unsigned char)(1u << (num % 8));
                    bytes += size - num * chunk < chunk ? size - num * chunk : chunk;
                }
                num = 0;
                have = 0;
            } else {
                num = 0;
                have = 0;
            }
        }
    }
    sh_r.close(fd);
    return hdr_ok ? (long long)bytes : -1;
}

/* "1.5 MiB"-style sizes for the progress lines */
static void human(unsigned long long b, char *out, size_t n)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* "12.5 MB/s": rates in decimal units, as `status` and the helper's bars give them (lib/progress.c) */
static void human_rate(double r, char *out, size_t n)
{
    static const char *const u[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
    int i = 0;
    while (r >= 1000 && i < 4) {
        r /= 1000;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", r, u[i]);
}

/* A cold load says what it is doing where descriptor 2 is a terminal (issue 41 item 3: the program's stderr is
 * not a log; a pipe, a file or a socket gets no progress line, and `hfs3-manifest run`, which owns the terminal
 * of the program it started, sets HFS3_PROGRESS=0 and draws it itself; HFS3_LOG=error silences it): once an
 * open has waited SH_PROGRESS_AFTER_MS on the fetch of a file of SH_PROGRESS_MIN_SIZE or more (any size at
 * info), one line updated in place (\r) every SH_PROGRESS_TTY_MS, and when the file is in, its last state:
 * "... (100%), done in N s" with a newline. Many threads waiting on many files print one line between them: the
 * first whose turn comes takes it (prog_next, compare-and-swap) and names its file, then how many other opens
 * wait (on it or on other files). */
#define SH_PROGRESS_AFTER_MS 2000
#define SH_PROGRESS_TTY_MS 1000
#define SH_PROGRESS_MIN_SIZE (1ULL << 20)
static long long prog_next;   /* CLOCK_MONOTONIC ms before which no thread prints a progress line */

/* 1 when descriptor 2 is a terminal now (asked at each line: a program may dup2 a data file onto it), errno kept */
static int stderr_tty(void)
{
    int e = errno, tty = isatty(2) == 1;
    errno = e;
    return tty;
}
static int prog_waits;        /* opens of this process waiting on a file's fetch now */
static int prog_open;         /* a \r line is on the terminal without its newline */

/* The bytes our own helper (pid) has written so far, from /proc/PID/io's wchar: a `_get` fetches one file, so
 * that is the file's bytes as they land (its sidecar counts whole ranges only, 0 for a long time on a big
 * shard). -1 when unknown. 256 bytes of stack. */
static long long helper_wchar(pid_t pid)
{
    if (pid <= 0)
        return -1;
    char buf[200];
    snprintf(buf, sizeof buf, "/proc/%d/io", (int)pid);
    int fd = sh_r.open(buf, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    sh_r.close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *w = strstr(buf, "wchar: ");
    return w ? strtoll(w + 7, NULL, 10) : -1;
}

/* The bytes of j's fetch so far: the sidecar's whole ranges, or our helper's writes as they land. -1 unknown. */
static long long fetched_bytes(const struct sh_lockjob *j, pid_t helper)
{
    long long side, b = bytes_so_far(j->tmpdir, j->sha, &side), w = helper_wchar(helper);
    /* the helper's writes are the file's and its sidecar's (whose header goes first): not the sidecar's */
    if (w >= 0)
        w -= side;
    if (w > b)
        b = (unsigned long long)w < j->size ? w : (long long)j->size;
    return b;
}

/* One progress line of the wait on j: "LABEL: B of SIZE (P%), R MB/s, about E s left[; N more opens waiting]"
 * ("..., waiting N s" while nothing has landed; "LABEL: fetching SIZE, waiting N s" when the bytes are
 * unknown). waited_ms since the wait began; b0 the bytes then (-1 unknown), so that the rate is this wait's,
 * not the fetch's since an earlier prefetch began it. The line replaces the last one (\r ... erase to the
 * end), no newline: the wait's end puts its done line (progress_done). One write, from a scratch buffer. */
static void progress_line(const struct sh_lockjob *j, long long waited_ms, long long b0, pid_t helper)
{
    long long b = fetched_bytes(j, helper);
    int others = __atomic_load_n(&prog_waits, __ATOMIC_RELAXED) - 1;
    char hb[32], hs[32], hr[32], more[48] = "";
    human(j->size, hs, sizeof hs);
    if (others > 0)
        snprintf(more, sizeof more, "; %d more open%s waiting", others, others == 1 ? "" : "s");
    SH_SCRATCH(t);
    char *line = t->d;
    int n;
    if (b < 0) {
        n = snprintf(line, 1024, "\rhfs3: %s: fetching %s, waiting %lld s%s\033[K", j->label, hs, waited_ms / 1000,
                     more);
    } else {
        human((unsigned long long)b, hb, sizeof hb);
        long long since = b0 >= 0 && b >= b0 ? b - b0 : b;
        double rate = waited_ms > 0 ? (double)since * 1000.0 / (double)waited_ms : 0;
        human_rate(rate, hr, sizeof hr);
        long long left = rate > 0 && j->size > (unsigned long long)b
                             ? (long long)((double)(j->size - (unsigned long long)b) / rate) : 0;
        int pct = j->size ? (int)((unsigned long long)b * 100 / j->size) : 100;
        if (rate < 1)   /* nothing landed during this wait yet: no rate to tell, no time left to guess */
            n = snprintf(line, 1024, "\rhfs3: %s: %s of %s (%d%%), waiting %lld s%s\033[K", j->label, hb, hs, pct,
                         waited_ms / 1000, more);
        else
            n = snprintf(line, 1024, "\rhfs3: %s: %s of %s (%d%%), %s, about %lld s left%s\033[K", j->label, hb, hs,
                         pct, hr, left, more);
    }
    if (n <= 0)
        return;
    if (n >= 1024) {   /* a very long path: cut, the line still ends */
        n = 1023;
        line[n - 1] = '\n';
    }
    __atomic_store_n(&prog_open, 1, __ATOMIC_RELAXED);
    sh_write_err(line, (size_t)n);
}

/* The end of a wait on j that a progress line may have shown (the terminal's line is open): its file's last
 * state, "LABEL: SIZE of SIZE (100%), done in N s" (rc 0) and a newline, so the display ends with the file in
 * (it stayed at "99%, about 0 s left"); after a failure only the newline, before the error's own line. The next
 * update of another wait starts a line of its own. */
static void progress_done(const struct sh_lockjob *j, long long waited_ms, int rc)
{
    if (!__atomic_exchange_n(&prog_open, 0, __ATOMIC_RELAXED) || !stderr_tty())
        return;
    SH_SCRATCH(t);
    char hs[32], *line = t->d;
    int n = 1;
    line[0] = '\n';
    if (rc == 0) {
        human(j->size, hs, sizeof hs);
        n = snprintf(line, 1024, "\rhfs3: %s: %s of %s (100%%), done in %lld s\033[K\n", j->label, hs, hs,
                     (waited_ms + 500) / 1000);
        if (n >= 1024) {
            n = 1023;
            line[n - 1] = '\n';
        }
    }
    if (n > 0)
        sh_write_err(line, (size_t)n);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* The signals that ask a program to stop: a handler without SA_RESTART for one of them ends a fetch's wait */
#define SH_STOP_SIG(s) ((s) == SIGINT || (s) == SIGTERM || (s) == SIGHUP || (s) == SIGQUIT)

/* Waits up to ms for a signal that the caller's mask lets through (all are blocked in this thread meanwhile).
 * 0 on timeout or a signal whose handler has SA_RESTART (the handler has run when this returns), -EINTR for
 * one without (its handler has run), as a blocking flock would have it. The signal is taken with sigtimedwait,
 * so none slips by between two polls, and queued again to this thread, siginfo and all, with the caller's
 * mask back in place: its handler runs as it would have; a signal whose default is to stop or kill does that. */
/* A hold (sh_sig_hold): this thread has taken once-only state that every other call waits on (a mount being
 * loaded: state 1). A host's handler run inside it may siglongjmp out (a C watchdog on SIGALRM), and the state
 * would stay taken for the life of the process: every later call on the mount waited forever. So within a hold a
 * signal with a handler is queued back and left pending until the hold ends (sh_sig_release), as the kernel
 * runs a handler only once a call that sleeps uninterruptibly has returned; one with the default action (stop,
 * terminate, ignore) takes it at once. */
static __thread int hold_depth;
static __thread sigset_t hold_host;    /* the host's mask before the outermost hold */
static __thread sigset_t hold_taken;   /* handlers' signals taken and queued back during it */

void sh_sig_hold(void)
{
    if (hold_depth++ == 0) {
        sigset_t all;
        sigfillset(&all);
        sigemptyset(&hold_taken);
        pthread_sigmask(SIG_BLOCK, &all, &hold_host);
    }
}

void sh_sig_release(void)
{
    if (--hold_depth == 0) {
        int e = errno;
        pthread_sigmask(SIG_SETMASK, &hold_host, NULL);   /* the handlers held back run here */
        errno = e;
    }
}

static int sig_wait(const sigset_t *old, long ms, int intr)
{
    sigset_t set;
    sigfillset(&set);
    if (hold_depth)
        old = &hold_host;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(old, sig) == 1 || (hold_depth && sigismember(&hold_taken, sig) == 1))
            sigdelset(&set, sig);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    siginfo_t si;
    int sig = sigtimedwait(&set, &si, &ts);
    if (sig <= 0)
        return 0;
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), sig, &si);
    int handler = sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL;
    sigset_t cur, one;
    if (hold_depth && handler) {
        sigaddset(&hold_taken, sig);   /* runs at the hold's end */
    } else if (hold_depth) {
        sigfillset(&one);
        sigdelset(&one, sig);   /* its default action, and nothing held back */
        pthread_sigmask(SIG_SETMASK, &one, &cur);
        pthread_sigmask(SIG_SETMASK, &cur, NULL);
    } else {
        pthread_sigmask(SIG_SETMASK, old, &cur);   /* the handler runs here */
        pthread_sigmask(SIG_SETMASK, &cur, NULL);
    }
    if (!handler)
        return 0;
    /* the shim's own wait goes on (issue 41 item 2: an open of a regular file on a local file system never gives
     * EINTR; a SIGALRM watchdog or a SIGWINCH ended it): only a request to stop ends a file's fetch wait (intr),
     * as on a network file system mounted "intr" - Ctrl-C in Python stays a KeyboardInterrupt at once */
    if (!intr || !SH_STOP_SIG(sig))
        return 0;
    return (sa.sa_flags & SA_RESTART) ? 0 : -EINTR;
}

/* Threads of this process in lock_wait: many of them poll less often each. */
static int lock_waiters;

/* What a cold open holds while it waits (issue 33 item 3): released when a pthread_cancel ends the wait. */
struct cancel_ctx {
    int fd;          /* the lock descriptor waited on */
    pid_t helper;    /* the helper this open started (0: none yet): left running for the next caller, reaped later */
    int *pin;        /* the open's pin */
};

static void on_cancel(void *arg)
{
    const struct cancel_ctx *c = arg;
    lock_close(c->fd, 0);   /* never held here: the wait had not got it */
    if (c->helper > 0)
        pending_add(c->helper);
    if (c->pin && *c->pin >= 0) {
        sh_unpin(*c->pin);
        *c->pin = -1;
    }
    __atomic_sub_fetch(&lock_waiters, 1, __ATOMIC_RELAXED);
    sh_scratch_drop_mine();   /* the frames' scratch: the forced unwind skips their cleanups */
}

/* The one place a cold open can be cancelled (sh_open keeps cancellation disabled everywhere else, so that no
 * cancellation point inside it - open, read, close, nanosleep, waitpid - unwinds it halfway, and a close that
 * acted could not be told from one that did not): between two polls of the wait, which is where a fetch of
 * minutes keeps the thread, and where everything the open holds is known. A pending cancel unwinds from here
 * through on_cancel; none, and the wait goes on with cancellation disabled again. A host that had cancellation
 * disabled never gets here (j->cancel 0). Out of line: the unwind buffer stays off lock_wait's frame. */
static __attribute__((noinline)) void cancel_point(int fd, const struct sh_lockjob *j, pid_t helper)
{
    struct cancel_ctx c = {fd, helper, j->pin};
    pthread_cleanup_push(on_cancel, &c);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    pthread_testcancel();
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_cleanup_pop(0);
}

/* Waits until fd holds LOCK_EX, polling LOCK_NB every 5 ms (20 ms with 60 or more threads waiting): what a
 * poll oversleeps a fetch's end by is on the program's critical path, once per file it opens (bench/: a cold
 * load opens 6 files). A signal ends the wait as it would end a blocking flock (sig_wait): a host's Ctrl-C
 * (Python installs SIGINT without SA_RESTART) at once, others not. A stall (no tmp/<sha>.* file changed for
 * sh_stall seconds; 0: never; looked at every 100 ms) ends it with -ETIMEDOUT. 0 or -errno. */
static int lock_wait(int fd, const struct sh_lockjob *j, pid_t helper)
{
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    if (errno != EWOULDBLOCK && errno != EINTR)
        return -errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int waiters = __atomic_add_fetch(&lock_waiters, 1, __ATOMIC_RELAXED);
    long long last = progress(j->tmpdir, j->sha), since = now_ms(), start = since;
    long long looked = since;
    /* progress lines: only for a file's fetch (label), not at HFS3_LOG=error; at the default level only for a
     * file of SH_PROGRESS_MIN_SIZE or more (a shard: a config or tokenizer file that takes seconds is latency,
     * which the stall timeout names when it hangs) */
    int shows = j->label && j->tmpdir && sh_progress &&
                (sh_log_level >= 2 || (sh_log_level >= 1 && j->size >= SH_PROGRESS_MIN_SIZE)),
        lines = 0;
    long long b0 = -1;
    if (shows) {
        __atomic_add_fetch(&prog_waits, 1, __ATOMIC_RELAXED);
        b0 = fetched_bytes(j, helper);
    }
    long wait = 2 + waiters / 4;
    int rc;
    for (;;) {
        if ((rc = sig_wait(&old, wait < 20 ? wait : 20, j->sha != NULL)) < 0)
            break;
        if (j->cancel)
            cancel_point(fd, j, helper);
        wait = 5 + __atomic_load_n(&lock_waiters, __ATOMIC_RELAXED) / 4;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            rc = 0;
            break;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) {
            rc = -errno;
            break;
        }
        long long t = now_ms();
        if (t - looked < 100)
            continue;
        looked = t;
        long long cur = progress(j->tmpdir, j->sha);
        if (shows && t - start >= SH_PROGRESS_AFTER_MS) {
            long long nx = __atomic_load_n(&prog_next, __ATOMIC_RELAXED);
            /* one printer per turn for the whole process: the thread whose swap succeeds, and only on a
             * terminal (a pipe, a file, a socket: no progress line at all) */
            if (t >= nx &&
                __atomic_compare_exchange_n(&prog_next, &nx, t + SH_PROGRESS_TTY_MS, 0, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED) &&
                stderr_tty()) {
                progress_line(j, t - start, b0, helper);
                lines++;
            }
        }
        if (cur != last) {
            last = cur;
            since = t;
        } else if (sh_stall > 0 && t - since >= sh_stall * 1000LL) {
            rc = -ETIMEDOUT;
            break;
        }
    }
    if (shows) {
        /* a wait that could have been shown ends the terminal's line: with its file done, or (the last wait
         * of the process, after a failure) with a newline */
        int last = __atomic_sub_fetch(&prog_waits, 1, __ATOMIC_RELAXED) == 0;
        if ((rc == 0 && now_ms() - start >= SH_PROGRESS_AFTER_MS) || last)
            progress_done(j, now_ms() - start, rc);
    }
    if (lines && rc == 0)
        sh_log(2, "%s: waited %lld s", j->label, (now_ms() - start) / 1000);
    __atomic_sub_fetch(&lock_waiters, 1, __ATOMIC_RELAXED);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int sh_exists(const char *p)
{
    struct stat st;
    return sh_r.stat(p, &st) == 0;
}

/* The lock protocol (docs/internals.md): take the lock, skip when done(arg) says the work is there (someone
 * did it while we waited), else run the helper with the lock as fd 3 and wait for the lock to come free.
 * 0 (see done() for the outcome), the helper's exit status when it failed and this process reaped it, -EINTR (a signal without SA_RESTART: the helper carries on for the next
 * caller), -ETIMEDOUT (no progress for HFS3_STALL_TIMEOUT seconds: our own helper is killed), or -errno. */
int sh_run_locked(const struct sh_lockjob *j)
{
    if (__atomic_load_n(&sh_cache_ro, __ATOMIC_ACQUIRE))
        return -EROFS;   /* a read-only cache (offline): no lock file to take, nothing the helper could write */
    pending_reap();
    int fd = lock_open(j->lockpath);
    if (fd < 0)
        return fd;
    int rc = lock_wait(fd, j, 0);
    if (rc < 0) {
        lock_close(fd, 0);
        return rc;
    }
    if (j->done && j->done(j->arg)) {
        lock_close(fd, 1);
        return 0;
    }
    pid_t pid = sh_spawn_helper(j->argv, fd, j->quiet);
    lock_close(fd, 0);   /* the helper holds the lock now, through the same open file description */
    if (pid < 0)
        return pid;
    fd = lock_open(j->lockpath);   /* free once the helper exited (or closed its fd 3) */
    rc = fd < 0 ? fd : lock_wait(fd, j, pid);
    if (fd >= 0)
        lock_close(fd, rc == 0);
    if (rc == -ETIMEDOUT) {
        kill(pid, SIGKILL);
        sh_reap(pid);
        return rc;
    }
    if (rc < 0) {
        pending_add(pid);
        return rc;
    }
    rc = sh_reap(pid);
    return rc > 0 ? rc : 0;
}

/* In a forked child (pthread_atfork): closes every lock descriptor other threads had open (found by their
 * path in /proc/self/fd, so one opened a moment before the fork is found too). No LOCK_UN: the open file
 * description is the parent's too, whose lock must stay held. */
void sh_locks_after_fork(void)
{
    /* the helpers other threads started are the parent's (their mids are not this child's children): their slots
     * would stay taken for the child's life, and with 256 every cold open of the child waited for one forever */
    for (int i = 0; i < SH_SPAWN_SLOTS; i++)
        if (__atomic_load_n(&spawn_slots[i].mid, __ATOMIC_ACQUIRE)) {
            if (spawn_slots[i].stack)
                munmap(spawn_slots[i].stack, SH_SPAWN_STACK);   /* this child's copy */
            spawn_slots[i].stack = NULL;
            __atomic_store_n(&spawn_slots[i].helper, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&spawn_slots[i].abandoned, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&spawn_slots[i].mid, 0, __ATOMIC_RELEASE);
        }
    __atomic_store_n(&lock_waiters, 0, __ATOMIC_RELAXED); /* the waiting threads stayed in the parent */
    __atomic_store_n(&prog_waits, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&prog_open, 0, __ATOMIC_RELAXED);   /* the parent ends its own line */
    if (!__atomic_load_n(&locks_inflight, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&locks_inflight, 0, __ATOMIC_RELEASE);
    int dfd = sh_r.open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    SH_SCRATCH(t);
    char *buf = t->a, pp[32], *link = t->b;
    long n;
    size_t cl = strlen(sh_cache_real);
    while ((n = syscall(SYS_getdents64, dfd, buf, SH_SCR)) > 0) {
        for (long off = 0; off < n;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            int fd = atoi(d->d_name);
            if (d->d_name[0] < '0' || d->d_name[0] > '9' || fd == dfd)
                continue;
            snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
            ssize_t k = sh_r.readlink(pp, link, SH_SCR - 1);
            if (k <= 0)
                continue;
            link[k] = 0;
            if (!cl || strncmp(link, sh_cache_real, cl) || link[cl] != '/')
                continue;
            const char *r = link + cl + 1;
            size_t rl = strlen(r);
            if ((!strncmp(r, "locks/", 6) && rl > 11 && !strcmp(r + rl - 5, ".lock")) ||
                (!strncmp(r, "mounts/", 7) && rl > 12 && !strcmp(r + rl - 5, "/lock")))
                sh_r.close(fd);
        }
    }
    sh_r.close(dfd);
}

/* A directory of the cache the shim is about to use (lib/cachefs.c's hfs3_cache_check_subdir, without the
 * repairs): a directory, not writable by others; private: the user's, not group-writable; shared: the user's,
 * root's or the cache's group's. 1 when fine. */
static int dir_ok(const struct stat *st, int shared)
{
    uid_t me = geteuid();
    if (!S_ISDIR(st->st_mode) || (st->st_mode & S_IWOTH))
        return 0;
    if (!shared)
        return st->st_uid == me && !(st->st_mode & S_IWGRP);
    return st->st_uid == me || st->st_uid == 0 || st->st_gid == sh_cache_gid();
}

/* mkdir -p of a path under CACHE, one component at a time from the cache's descriptor (mkdirat, then
 * openat(O_DIRECTORY|O_NOFOLLOW) and the check of dir_ok, so nothing is created through a symlink or in a
 * directory the rules refuse). Made 0700, then - only a directory this call created, through its descriptor -
 * fchmod-ed to its final mode whatever the umask: private 0700; shared 03770 (setgid, sticky, group rwx: a
 * member cannot remove or rename what another created), but mounts/<key>/ itself 02770 (lib/cache.c's modes).
 * Existing ones are never chmod-ed. 0, or -errno (logged once when a directory is refused). */
int sh_mkdirs(const char *path)
{
    return sh_mkdirs_why(path, NULL, 0);
}

int sh_mkdirs_why(const char *path, char *failed, size_t fn)
{
    if (failed && fn)
        failed[0] = 0;
    if (sh_cache_ready() < 0)
        return -EIO;
    int shared = sh_cache_shared();
    SH_SCRATCH(t);
    char *b = t->a;
    size_t n = strlen(path), cl = strlen(sh_cache);
    /* only below the cache, which sh_cache_ready made and checked */
    if (n >= SH_SCR || n <= cl || strncmp(path, sh_cache, cl) || path[cl] != '/')
        return -EINVAL;
    memcpy(b, path + cl + 1, n - cl);
    int dfd = sh_r.open(sh_cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    int depth = 0, in_mounts = 0, rc = 0;
    char *name = b;
    for (char *p = b;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = 0;
        if (!*name || !strcmp(name, ".")) {   /* "a//b", "a/./b" */
            *p = c;
            name = p + 1;
            if (!c)
                break;
            continue;
        }
        depth++;
        if (depth == 1)
            in_mounts = !strcmp(name, "mounts");
        /* mounts/<key>: 02770, but 03770 under HFS3_VERIFY_FOREIGN=1, where the key is this user's own
         * (include/hfs3/index.h, hfs3_mountkey_as) and nobody else may replace what is in it */
        mode_t want = !shared ? 0700 : (in_mounts && depth == 2 && strcmp(name, "ancestors") && !sh_verify_foreign)
                                           ? 02770 : 03770;
        int created = syscall(SYS_mkdirat, dfd, name, 0700) == 0;
        int e = errno;
        int fd = -1;
        struct stat st;
        if (!created && e != EEXIST) {
            rc = -e;
            if (failed && fn)
                snprintf(failed, fn, "%s/%s", sh_cache, b);
        }
        else if ((fd = sh_r.openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
            rc = -errno;
        else if (sh_r.fstat(fd, &st) < 0)
            rc = -errno;
        else if (created && st.st_uid == geteuid() && (st.st_mode & 07777) != want &&
                 (syscall(SYS_fchmod, fd, want) < 0 || sh_r.fstat(fd, &st) < 0))
            rc = -errno;
        else if (!dir_ok(&st, shared)) {
            rc = -EPERM;
            *p = 0;
            sh_log(0, "%s/%s: a directory of another user or writable by others (mode %04o): not trusted, not used",
                   sh_cache, b, (unsigned)(st.st_mode & 07777));
        }
        sh_r.close(dfd);
        dfd = fd;
        if (rc < 0 || !c)
            break;
        *p = c;
        name = p + 1;
    }
    if (dfd >= 0)
        sh_r.close(dfd);
    return rc;
}

/* open(path, flags | O_NOFOLLOW, mode) of a file under CACHE, reached one directory at a time from the
 * cache's descriptor: every directory on the way opened openat(O_DIRECTORY|O_NOFOLLOW) and checked by dir_ok,
 * so a directory another member renamed away and replaced, or a symlink planted for one, is never walked
 * through. A path outside CACHE is opened as it is (O_NOFOLLOW). fd, or -1 with errno (EPERM: a directory
 * the rules refuse, logged once per call). Nothing is created but the final file (flags' O_CREAT). */
int sh_cache_open(const char *path, int flags, mode_t mode)
{
    return sh_cache_open_in(path, flags, mode, NULL);
}

int sh_cache_open_in(const char *path, int flags, mode_t mode, struct stat *dir)
{
    size_t cl = strlen(sh_cache), n = strlen(path);
    if (dir)
        dir->st_mode = 0;
    if (!sh_cache[0] || n <= cl || n >= SH_SCR || strncmp(path, sh_cache, cl) || path[cl] != '/')
        return sh_r.open(path, flags | O_NOFOLLOW, mode);
    int shared = sh_cache_shared();
    SH_SCRATCH(t);
    char *b = t->a;
    memcpy(b, path + cl + 1, n - cl);
    int dfd = sh_r.open(sh_cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    char *name = b, *slash;
    while ((slash = strchr(name, '/')) != NULL) {
        *slash = 0;
        if (!*name || !strcmp(name, ".")) {
            name = slash + 1;
            continue;
        }
        struct stat st;
        int fd = sh_r.openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int e = errno;
        if (fd >= 0 && (sh_r.fstat(fd, &st) < 0 || !dir_ok(&st, shared))) {
            sh_log(0, "%s/%s: a directory of another user or writable by others (mode %04o): not trusted, "
                   "not used", sh_cache, b, (unsigned)(st.st_mode & 07777));
            sh_r.close(fd);
            fd = -1;
            e = EPERM;
        }
        sh_r.close(dfd);
        if (fd < 0) {
            errno = e;
            return -1;
        }
        if (dir)
            *dir = st;   /* the last one is the file's own directory: sh_may_serve's */
        dfd = fd;
        name = slash + 1;
    }
    int fd = sh_r.openat(dfd, name, flags | O_NOFOLLOW, mode);
    int e = errno;
    sh_r.close(dfd);
    errno = e;
    return fd;
}

void sh_read_line(const char *path, char *out, size_t n)
{
    out[0] = 0;
    int fd = sh_cache_open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (!sh_trusted_file(fd, path)) {
        sh_r.close(fd);
        return;
    }
    ssize_t k = read(fd, out, n - 1);
    sh_r.close(fd);
    if (k < 0)
        k = 0;
    out[k] = 0;
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = 0;
}

