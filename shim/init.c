/* init.c - the shim's process state: the real libc functions (dlsym once), HFS3_* variables and HFS3_MOUNTS
 * (parsed once, in the constructor), logging, and the fork/vfork bookkeeping. Nothing here touches the cache. */
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
#include <strings.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct sh_real sh_r;
struct sh_mount *sh_mounts;
int sh_nmounts;
int sh_wguard_on;
char sh_cache[SH_PATH];
int sh_sub_max = SH_SUB_MAX;
char sh_test_boot_id[37]; /* HFS3_TEST_BOOT_ID (tests only: a simulated reboot, include/hfs3/durable.h) */

char sh_helper_env[SH_PATH];
char sh_cache_env[SH_PATH + 32]; /* "HFS3_CACHE_DIR=..." for the helper's environment */
int sh_log_level = 1, sh_offline, sh_prefetch = 1, sh_verify_foreign, sh_progress = 1;
long sh_ttl = 60, sh_stall = 120;
char sh_env_error[1024];
int sh_env_error_logged;
static pid_t init_pid;

/* --- basics ------------------------------------------------------------------------------------------ */

void *sh_sym(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

void sh_log(int level, const char *fmt, ...)
{
    if (level > sh_log_level)
        return;
    SH_SCRATCH(t);
    char *buf = t->a;
    size_t cap = 1024;   /* one line, as long as a long path */
    int n = snprintf(buf, cap, "hfs3: ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + n, cap - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    n += k;
    if ((size_t)n > cap - 2)
        n = (int)cap - 2;
    buf[n++] = '\n';
    sh_write_err(buf, (size_t)n);
}

/* Writes buf on descriptor 2 for the user, where the program's own write would raise SIGPIPE (issue 41 item 3:
 * a program whose stderr is a pipe nobody reads was killed, exit 141, by a line of an open that succeeded):
 * never raises it in the host, and leaves errno as it found it. A socket: send with MSG_NOSIGNAL. Anything
 * else: SIGPIPE blocked in this thread for the write; one the write raised (EPIPE) is taken back with a
 * sigtimedwait that does not wait, unless one was pending already (the program's: ours merged into it, which
 * stays). Whole or nothing is not promised: a write cut short by a signal goes on with the rest. */
void sh_write_err(const char *buf, size_t n)
{
    int e = errno;
    ssize_t w = send(2, buf, n, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) {
        sigset_t pipe, old, pend;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe, &old);
        int was = sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE) == 1;
        size_t done = 0;
        while (done < n) {
            w = write(2, buf + done, n - done);
            if (w > 0)
                done += (size_t)w;
            else if (w < 0 && errno == EINTR)
                continue;
            else
                break;
        }
        if (w < 0 && errno == EPIPE && !was) {
            struct timespec z = {0, 0};
            sigtimedwait(&pipe, NULL, &z);   /* none when SIGPIPE is ignored: EAGAIN */
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    errno = e;
}

int sh_in_vfork(void)
{
    return getpid() != __atomic_load_n(&init_pid, __ATOMIC_RELAXED);
}

static void after_fork_child(void)
{
    __atomic_store_n(&init_pid, getpid(), __ATOMIC_RELAXED);
    sh_scratch_after_fork();   /* first: what follows takes scratch buffers */
    /* a load interrupted by fork in another thread would never finish here: start it again */
    int nall = sh_nmounts + __atomic_load_n(&sh_nsubs, __ATOMIC_ACQUIRE);   /* hub.c's sub-mounts too */
    for (int i = 0; i < nall && i < sh_nmounts + sh_sub_max; i++) {
        struct sh_mount *m = sh_mnt(i);   /* NULL: a slot claimed by a thread whose chunk never came */
        if (!m)
            continue;
        if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == 1)
            __atomic_store_n(&m->state, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&m->hub_busy, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&m->sub_failed, 0, __ATOMIC_RELEASE);   /* the parent says its own count */
    }
    sh_cache_after_fork();
    sh_locks_after_fork();
}

void sh_after_fork_child(void)
{
    after_fork_child();
}

/* Adds one HFS3_MOUNTS complaint to the line logged at the first classified call ("; " between them). */
static void env_err(const char *fmt, ...)
{
    size_t n = strlen(sh_env_error);
    if (n && n + 2 < sizeof sh_env_error) {
        memcpy(sh_env_error + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh_env_error + n, sizeof sh_env_error - n, fmt, ap);
    va_end(ap);
}

/* A boolean variable as the helper reads it (hfs3_env_bool): 1/0, true/false, yes/no, on/off in any case;
 * unset or empty: def; anything else: one warning (this runs once per process) and def. */
static int env_bool(const char *name, int def)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return 1;
        if (!strcasecmp(v, no[i]))
            return 0;
    }
    sh_log(1, "%s=%.64s is not a boolean (1/0, true/false, yes/no, on/off): using %s", name, v, def ? "1" : "0");
    return def;
}

static void parse_env(void)
{
    const char *v;
    if ((v = getenv("HFS3_LOG")) && *v)
        sh_log_level = !strcmp(v, "error") ? 0 : !strcmp(v, "info") ? 2 : !strcmp(v, "debug") ? 3 : 1;
    sh_offline = env_bool("HFS3_OFFLINE", 0);
    if ((v = getenv("HFS3_TEST_BOOT_ID")) && *v)
        snprintf(sh_test_boot_id, sizeof sh_test_boot_id, "%s", v);
    sh_prefetch = env_bool("HFS3_PREFETCH", 1);
    sh_progress = env_bool("HFS3_PROGRESS", 1);
    sh_verify_foreign = env_bool("HFS3_VERIFY_FOREIGN", 0);
    if ((v = getenv("HFS3_MANIFEST_TTL")) && *v) {
        char *end;
        long t = strtol(v, &end, 10);
        if (!*end && t >= 0)
            sh_ttl = t;
    }
    sh_hub_ttl = sh_ttl;
    if ((v = getenv("HFS3_HUB_TTL")) && *v) {
        char *end;
        long t = strtol(v, &end, 10);
        if (!*end && t >= 0)
            sh_hub_ttl = t;
    }
    if ((v = getenv("HFS3_STALL_TIMEOUT")) && *v) {
        char *end;
        long t = strtol(v, &end, 10);
        if (!*end && t >= 0)
            sh_stall = t;
    }
    if ((v = getenv("HFS3_HELPER")) && *v && strlen(v) < sizeof sh_helper_env)
        strcpy(sh_helper_env, v);
    sh_cache_from_env();

    const char *ms = getenv("HFS3_MOUNTS");
    if (!ms || !*ms)
        return;
    /* the table: one entry per ';'-separated item at most (hubs' repositories get theirs from hub.c, in chunks
     * mapped as they are entered), mapped once and never freed */
    size_t cap = 1;
    for (const char *q = ms; *q; q++)
        cap += *q == ';';
    const char *tv = getenv("HFS3_TEST_SUB_MAX");   /* tests only: a ceiling a test can reach */
    if (tv && atoi(tv) > 0 && atoi(tv) < SH_SUB_MAX)
        sh_sub_max = atoi(tv);
    void *tab = mmap(NULL, cap * sizeof *sh_mounts, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tab == MAP_FAILED) {
        env_err("HFS3_MOUNTS: no memory for %zu mounts: all ignored", cap);
        return;
    }
    sh_mounts = tab;
    while (*ms && (size_t)sh_nmounts < cap) {
        const char *end = strchr(ms, ';');
        size_t len = end ? (size_t)(end - ms) : strlen(ms);
        const char *eq = memchr(ms, '=', len);
        int namelen;
        SH_SCRATCH(t);
        char *local = t->a;
        struct sh_mount *m = &sh_mounts[sh_nmounts];
        if (len == 0)
            goto next;
        if (!eq || eq == ms || (size_t)(eq - ms) >= SH_PATH || ms[0] != '/' ||
            len - (size_t)(eq - ms) - 1 >= sizeof m->remote || len - (size_t)(eq - ms) - 1 == 0) {
            env_err("HFS3_MOUNTS: ignoring \"%.*s\" (want /LOCALPATH=REMOTE)",
                     (int)(len > 200 ? 200 : len), ms);
            goto next;
        }
        if (eq[-1] == ' ' || eq[-1] == '\t' || eq[1] == ' ' || eq[1] == '\t') {
            /* "/models/x = r:b/p" would mount "/models/x " and look for remote " r": silent ENOENT later */
            env_err("HFS3_MOUNTS: ignoring \"%.*s\" (a blank around '=': write /LOCALPATH=REMOTE with no blanks)",
                    (int)(len > 200 ? 200 : len), ms);
            goto next;
        }
        memcpy(local, ms, (size_t)(eq - ms));
        local[eq - ms] = 0;
        if (sh_normalise(local, m->path, sizeof m->path, NULL) < 0 || !strcmp(m->path, "/")) {
            env_err("HFS3_MOUNTS: ignoring \"%.*s\" (a mount at / or too long)",
                     (int)(len > 200 ? 200 : len), ms);
            memset(m, 0, sizeof *m);
            goto next;
        }
        if (hfs3_remote_connstr(eq + 1, &namelen)) {
            /* its secrets must reach no helper's argv (every local user can read /proc/PID/cmdline) and no log
             * line: refused here, with the helper's own message, and never copied */
            env_err("HFS3_MOUNTS: %s: " HFS3_CONNSTR_MSG ": ignored", m->path, namelen, eq + 1);
            memset(m, 0, sizeof *m);
            goto next;
        }
        m->len = strlen(m->path);
        memcpy(m->remote, eq + 1, len - (size_t)(eq - ms) - 1);
        m->remote[len - (size_t)(eq - ms) - 1] = 0;
        int overlap = -1;
        for (int i = 0; i < sh_nmounts && overlap < 0; i++) {
            size_t a = sh_mounts[i].len, b = m->len, k = a < b ? a : b;
            if (!memcmp(sh_mounts[i].path, m->path, k) && (a == b || (a < b ? m->path : sh_mounts[i].path)[k] == '/'))
                overlap = i;
        }
        if (overlap >= 0) {
            env_err("HFS3_MOUNTS: %s overlaps the mount %s=%s: ignored (mounts may not nest or repeat)", m->path,
                    sh_mounts[overlap].path, sh_mounts[overlap].remote);
            memset(m, 0, sizeof *m);
            goto next;
        }
        char key[17];
        hfs3_mountkey_as(m->remote, sh_verify_foreign, (unsigned)geteuid(), key);
        memcpy(m->key, key, sizeof key);
        m->idx = sh_nmounts;
        if ((size_t)snprintf(m->dir, sizeof m->dir, "%s/mounts/%s", sh_cache, key) >= sizeof m->dir) {
            env_err("HFS3_MOUNTS: %s: cache path too long: ignored", m->path);
            memset(m, 0, sizeof *m);
            goto next;
        }
        const char *fs = strchr(m->path + 1, '/');
        m->first_len = fs ? (size_t)(fs - m->path) : m->len;
        sh_nmounts++;
    next:
        if (!end)
            break;
        ms = end + 1;
    }
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_once_fn(void)
{
    init_pid = getpid();
    sh_r.open = REAL(open, int (*)(const char *, int, ...));
    sh_r.openat = REAL(openat, int (*)(int, const char *, int, ...));
    sh_r.close = REAL(close, int (*)(int));
    sh_r.stat = REAL(stat, int (*)(const char *, struct stat *));
    sh_r.lstat = REAL(lstat, int (*)(const char *, struct stat *));
    sh_r.fstat = REAL(fstat, int (*)(int, struct stat *));
    sh_r.fstatat = REAL(fstatat, int (*)(int, const char *, struct stat *, int));
    sh_r.readlink = REAL(readlink, ssize_t (*)(const char *, char *, size_t));
    sh_r.getcwd = REAL(getcwd, char *(*)(char *, size_t));
    sh_r.chdir = REAL(chdir, int (*)(const char *));
    sh_r.mkdir = REAL(mkdir, int (*)(const char *, mode_t));
    sh_r.statfs = REAL(statfs, int (*)(const char *, struct statfs *));
    sh_r.realpath = REAL(realpath, char *(*)(const char *, char *));
    sh_r.access = REAL(access, int (*)(const char *, int));
    sh_r.fcntl = REAL(fcntl, int (*)(int, int, ...));
    parse_env();
    /* the helper (hfs3-manifest exports this symbol) writes the cache: under a global LD_PRELOAD, or started by a
     * program that runs under the shim, its writes are not the host program's */
    sh_wguard_on = sh_nmounts > 0 && !dlsym(RTLD_DEFAULT, "hfs3_helper_process");
    sh_filter_build();
    pthread_atfork(NULL, NULL, after_fork_child);
}

void sh_init(void)
{
    pthread_once(&init_once, init_once_fn);
}

__attribute__((constructor)) static void shim_ctor(void)
{
    sh_init();
}

