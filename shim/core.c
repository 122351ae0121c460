/* core.c - the shim's state and logic: HFS3_MOUNTS and the other variables (read once), path
 * classification (the fast path), loading a mount's index (mmap, once per process), walking it, answering
 * stat/open/readlink/realpath/chdir from it, the descriptor table, and running the helper (lock protocol of
 * docs/internals.md). The exported interposers are in wrap.c and dir.c; no network, TLS or JSON here. */
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

struct sh_real sh_r;
struct sh_mount sh_mounts[SH_MAX_MOUNTS];
int sh_nmounts;
char sh_cache[SH_PATH];

static char cache_real[SH_PATH];   /* realpath of sh_cache, filled on first need (not in a vfork child) */
static char helper_env[SH_PATH];
static char cache_env[SH_PATH + 32]; /* "HFS3_CACHE_DIR=..." for the helper's environment */
static int log_level = 1, offline, prefetch = 1;
static long ttl = 60;
static pid_t init_pid;
static int cwd_state;              /* 0 unknown, 1 cwd is not in a mount (set only outside vfork children) */
static char env_error[512];
static int env_error_logged;
static size_t first_len[SH_MAX_MOUNTS];

/* --- basics ------------------------------------------------------------------------------------------ */

void *sh_sym(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

void sh_log(int level, const char *fmt, ...)
{
    if (level > log_level)
        return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "hfs3: ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    n += k;
    if ((size_t)n > sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    ssize_t w = write(2, buf, (size_t)n);
    (void)w;
}

int sh_in_vfork(void)
{
    return getpid() != __atomic_load_n(&init_pid, __ATOMIC_RELAXED);
}

static void after_fork_child(void)
{
    __atomic_store_n(&init_pid, getpid(), __ATOMIC_RELAXED);
    /* a load interrupted by fork in another thread would never finish here: start it again */
    for (int i = 0; i < sh_nmounts; i++)
        if (__atomic_load_n(&sh_mounts[i].state, __ATOMIC_ACQUIRE) == 1)
            __atomic_store_n(&sh_mounts[i].state, 0, __ATOMIC_RELEASE);
}

/* Path components: skips the '/'s at *p, points *s at the component there and moves *p past it. Its length,
 * 0 at the end of the path (*s then points at the end). */
static size_t next_comp(const char **p, const char **s)
{
    const char *q = *p;
    while (*q == '/')
        q++;
    *s = q;
    while (*q && *q != '/')
        q++;
    *p = q;
    return (size_t)(q - *s);
}

/* 1 for ".", 2 for "..", else 0. */
static int dot_comp(const char *s, size_t n)
{
    return n == 1 && s[0] == '.' ? 1 : n == 2 && s[0] == '.' && s[1] == '.' ? 2 : 0;
}

/* The length of buf[0..len) without its last component ("/a/b" -> "/a", "/a" -> ""): how ".." goes up. */
static size_t drop_comp(const char *buf, size_t len)
{
    while (len > 0 && buf[len - 1] != '/')
        len--;
    return len > 0 ? len - 1 : 0;
}

/* Lexical normalisation of an absolute path: "//a/./b/../c/" -> "/a/c". *slash = it ended in '/' (or /. /..).
 * 0 or -ENAMETOOLONG. */
static int normalise(const char *in, char *out, size_t outn, int *slash)
{
    size_t o = 0, n;
    const char *p = in, *s;
    int trailing = 0;
    while ((n = next_comp(&p, &s))) {
        int dot = dot_comp(s, n);
        trailing = dot != 0;
        if (dot == 2)
            o = drop_comp(out, o);
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
    return 0;
}

static void parse_env(void)
{
    const char *v;
    if ((v = getenv("HFS3_LOG")) && *v)
        log_level = !strcmp(v, "error") ? 0 : !strcmp(v, "info") ? 2 : !strcmp(v, "debug") ? 3 : 1;
    if ((v = getenv("HFS3_OFFLINE")) && !strcmp(v, "1"))
        offline = 1;
    if ((v = getenv("HFS3_PREFETCH")) && !strcmp(v, "0"))
        prefetch = 0;
    if ((v = getenv("HFS3_MANIFEST_TTL")) && *v) {
        char *end;
        long t = strtol(v, &end, 10);
        if (!*end && t >= 0)
            ttl = t;
    }
    if ((v = getenv("HFS3_HELPER")) && *v && strlen(v) < sizeof helper_env)
        strcpy(helper_env, v);
    const char *c = getenv("HFS3_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int n = -1;
    if (c && *c)
        n = snprintf(sh_cache, sizeof sh_cache, "%s", c);
    else if (x && *x)
        n = snprintf(sh_cache, sizeof sh_cache, "%s/hfs3", x);
    else if (h && *h)
        n = snprintf(sh_cache, sizeof sh_cache, "%s/.cache/hfs3", h);
    if (n < 0 || (size_t)n >= sizeof sh_cache)
        snprintf(sh_cache, sizeof sh_cache, "/nonexistent/hfs3-cache");
    while (strlen(sh_cache) > 1 && sh_cache[strlen(sh_cache) - 1] == '/')
        sh_cache[strlen(sh_cache) - 1] = 0;
    snprintf(cache_env, sizeof cache_env, "HFS3_CACHE_DIR=%s", sh_cache);

    const char *ms = getenv("HFS3_MOUNTS");
    if (!ms || !*ms)
        return;
    while (*ms && sh_nmounts < SH_MAX_MOUNTS) {
        const char *end = strchr(ms, ';');
        size_t len = end ? (size_t)(end - ms) : strlen(ms);
        const char *eq = memchr(ms, '=', len);
        char local[SH_PATH];
        struct sh_mount *m = &sh_mounts[sh_nmounts];
        if (len == 0)
            goto next;
        if (!eq || eq == ms || (size_t)(eq - ms) >= sizeof local || ms[0] != '/' ||
            len - (size_t)(eq - ms) - 1 >= sizeof m->remote || len - (size_t)(eq - ms) - 1 == 0) {
            snprintf(env_error, sizeof env_error, "HFS3_MOUNTS: ignoring \"%.*s\" (want /LOCALPATH=REMOTE)",
                     (int)(len > 200 ? 200 : len), ms);
            goto next;
        }
        memcpy(local, ms, (size_t)(eq - ms));
        local[eq - ms] = 0;
        if (normalise(local, m->path, sizeof m->path, NULL) < 0 || !strcmp(m->path, "/"))
            goto next;
        m->len = strlen(m->path);
        memcpy(m->remote, eq + 1, len - (size_t)(eq - ms) - 1);
        m->remote[len - (size_t)(eq - ms) - 1] = 0;
        int overlap = 0;
        for (int i = 0; i < sh_nmounts; i++) {
            size_t a = sh_mounts[i].len, b = m->len, k = a < b ? a : b;
            if (!memcmp(sh_mounts[i].path, m->path, k) && (a == b || (a < b ? m->path : sh_mounts[i].path)[k] == '/'))
                overlap = 1;
        }
        if (overlap) {
            snprintf(env_error, sizeof env_error, "HFS3_MOUNTS: %s overlaps another mount: ignored", m->path);
            memset(m, 0, sizeof *m);
            goto next;
        }
        char key[17];
        hfs3_mountkey(m->remote, key);
        memcpy(m->key, key, sizeof key);
        if ((size_t)snprintf(m->dir, sizeof m->dir, "%s/mounts/%s", sh_cache, key) >= sizeof m->dir)
            goto next;
        const char *fs = strchr(m->path + 1, '/');
        first_len[sh_nmounts] = fs ? (size_t)(fs - m->path) : m->len;
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

/* --- classification ---------------------------------------------------------------------------------- */

static int classify_abs(const char *path, struct sh_loc *l)
{
    const char *p = path, *s;
    size_t n = next_comp(&p, &s);
    int maybe = dot_comp(s, n) != 0;
    for (int i = 0; i < sh_nmounts && !maybe; i++)
        if (first_len[i] - 1 == n && !memcmp(sh_mounts[i].path + 1, s, n))
            maybe = 1;
    l->kind = L_NONE;
    if (!maybe)
        return L_NONE;
    if (normalise(path, l->path, sizeof l->path, &l->slash) < 0)
        return L_NONE;
    size_t len = strlen(l->path);
    for (int i = 0; i < sh_nmounts; i++) {
        const struct sh_mount *m = &sh_mounts[i];
        if (len >= m->len && !memcmp(l->path, m->path, m->len) && (l->path[m->len] == 0 || l->path[m->len] == '/')) {
            l->kind = L_MNT;
            l->m = i;
            l->rel = l->path + m->len + (l->path[m->len] == '/');
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
    return L_NONE;
}

/* Fills cache_real once (best effort). */
static const char *cache_realpath(char *tmp)
{
    if (cache_real[0])
        return cache_real;
    if (!sh_r.realpath(sh_cache, tmp))
        return NULL;
    if (!sh_in_vfork())
        strcpy(cache_real, tmp);
    return tmp;
}

static int map_under(const char *real, const char *cache, char *out, size_t outn)
{
    size_t cl = strlen(cache);
    if (strncmp(real, cache, cl) || strncmp(real + cl, "/mounts/", 8))
        return 0;
    const char *r = real + cl + 8;
    if (!strncmp(r, "ancestors", 9) && (r[9] == '/' || !r[9])) {
        const char *tail = r + 9;
        struct sh_loc l;
        if (classify_abs(*tail ? tail : "/", &l) != L_ANC)
            return 0;
        return (size_t)snprintf(out, outn, "%s", l.path) < outn;
    }
    for (int i = 0; i < sh_nmounts; i++) {
        const struct sh_mount *m = &sh_mounts[i];
        if (!strncmp(r, m->key, 16) && !strncmp(r + 16, "/tree", 5) && (r[21] == '/' || !r[21]))
            return (size_t)snprintf(out, outn, "%s%s", m->path, r + 21) < outn;
    }
    return 0;
}

int sh_map_back(const char *real, char *out, size_t outn)
{
    if (!sh_nmounts || !strstr(real, "/mounts/"))
        return 0;
    if (map_under(real, sh_cache, out, outn))
        return 1;
    char tmp[PATH_MAX];
    const char *cr = cache_realpath(tmp);
    return cr && map_under(real, cr, out, outn);
}

/* The cwd's logical path when it is inside the skeleton of a mount (or an ancestor): 1 and base filled. */
static int cwd_logical(char *base, size_t n)
{
    if (__atomic_load_n(&cwd_state, __ATOMIC_RELAXED) == 1)
        return 0;
    char buf[PATH_MAX];
    if (!sh_r.getcwd(buf, sizeof buf))
        return 0;
    if (sh_map_back(buf, base, n))
        return 1;
    if (!sh_in_vfork())
        __atomic_store_n(&cwd_state, 1, __ATOMIC_RELAXED);
    return 0;
}

void sh_cwd_changed(void)
{
    if (!sh_in_vfork())
        __atomic_store_n(&cwd_state, 0, __ATOMIC_RELAXED);
}

static int join_classify(const char *base, const char *path, struct sh_loc *l)
{
    char full[SH_PATH * 2];
    if ((size_t)snprintf(full, sizeof full, "%s/%s", base, path) >= sizeof full)
        return L_NONE;
    return classify_abs(full, l);
}

int sh_classify(int dirfd, const char *path, struct sh_loc *l)
{
    l->kind = L_NONE;
    if (!sh_nmounts || !path || !*path)
        return L_NONE;
    if (env_error[0] && !env_error_logged) {
        env_error_logged = 1;
        sh_log(0, "%s", env_error);
    }
    if (path[0] == '/')
        return classify_abs(path, l);
    int e = errno;
    int k = L_NONE;
    if (dirfd == AT_FDCWD) {
        char base[SH_PATH];
        if (cwd_logical(base, sizeof base))
            k = join_classify(base, path, l);
    } else {
        struct sh_loc b;
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
    if (comps < 5 || !slash || slash == abs || !slash[1] || dot_comp(slash + 1, strlen(slash + 1)))
        return 0;
    char dir[SH_PATH], real[SH_PATH], full[SH_PATH * 2], pp[64];
    size_t dl = (size_t)(slash - abs);
    if (dl >= sizeof dir)
        return 0;
    memcpy(dir, abs, dl);
    dir[dl] = 0;
    int fd = sh_r.open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int last_is_link = sh_r.fstatat(fd, slash + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, real, sizeof real - 1);
    sh_r.close(fd);
    if (last_is_link || k <= 0 || real[0] != '/')
        return 0;
    real[k] = 0;
    struct sh_loc l;
    if ((size_t)snprintf(full, sizeof full, "%s%s", real, slash) >= sizeof full)
        return 0;
    return classify_abs(full, &l) == L_NONE;
}

int sh_fallback(int dirfd, const char *path, struct sh_loc *l)
{
    l->kind = L_NONE;
    if (!sh_nmounts || !path || !*path)
        return L_NONE;
    int e = errno;
    char rem[SH_PATH * 2], res[SH_PATH], tmp[SH_PATH * 2];
    if (path[0] == '/') {
        if (strlen(path) >= sizeof rem)
            goto none;
        strcpy(rem, path);
    } else {
        char base[PATH_MAX], lg[SH_PATH];
        if (dirfd == AT_FDCWD) {
            if (!sh_r.getcwd || !sh_r.getcwd(base, sizeof base))
                goto none;
        } else {
            char pp[64];
            snprintf(pp, sizeof pp, "/proc/self/fd/%d", dirfd);
            ssize_t k = sh_r.readlink(pp, base, sizeof base - 1);
            if (k <= 0 || base[0] != '/')
                goto none;
            base[k] = 0;
        }
        const char *b = sh_map_back(base, lg, sizeof lg) ? lg : base;
        if ((size_t)snprintf(rem, sizeof rem, "%s/%s", b, path) >= sizeof rem)
            goto none;
    }
    if (parent_rules_out(rem))
        goto none;
    size_t rl = 0;   /* res holds the resolved real prefix ("" = root) */
    res[0] = 0;
    int hops = 0;
    const char *p = rem, *s;
    size_t n;
    while ((n = next_comp(&p, &s))) {
        int dot = dot_comp(s, n);
        if (dot == 1)
            continue;
        if (dot == 2) {
            rl = drop_comp(res, rl);
            res[rl] = 0;
            continue;
        }
        if (rl + 1 + n >= sizeof res)
            goto none;
        res[rl] = '/';
        memcpy(res + rl + 1, s, n);
        res[rl + 1 + n] = 0;
        struct sh_loc c;
        int ck = classify_abs(res, &c);
        if (ck != L_NONE) {
            if ((size_t)snprintf(tmp, sizeof tmp, "%s%s", res, p) >= sizeof tmp)
                goto none;
            int fk = classify_abs(tmp, l);
            if (fk == L_MNT || (fk == L_ANC && ck == L_ANC)) {
                errno = e;
                return fk;
            }
        }
        char tgt[SH_PATH];
        ssize_t k = sh_r.readlink(res, tgt, sizeof tgt - 1);
        if (k >= 0) {
            if (++hops > SH_MAX_HOPS)
                goto none;
            tgt[k] = 0;
            if ((size_t)snprintf(tmp, sizeof tmp, "%s%s", tgt, p) >= sizeof rem)
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
    l->kind = L_NONE;
    errno = e;
    return L_NONE;
}

/* --- running the helper ------------------------------------------------------------------------------ */

static const char *helper_path(char *buf, size_t n)
{
    if (helper_env[0])
        return helper_env;
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
static pid_t spawn_helper(char **argv, int lockfd, int quiet)
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
    envp[k++] = cache_env;
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
    if (quiet && log_level < 3)
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

static void reap(pid_t pid)
{
    /* The helper has exited or is exiting (it released the lock, or it double-forked). ECHILD is fine: the
     * host may reap it, or ignore SIGCHLD. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* 1 when CACHE is shared with a group: it exists setgid and group-writable (hfs3_cache_check_dir's rule, so the
 * shim and the helper agree). What the shim creates there must then keep the group's access whatever the umask:
 * another user of the group takes the same lock files and creates entries in the same directories. Asked at each
 * creation (first-touch code, never the fast path): CACHE may appear, made by the shim itself, in between. */
static int cache_shared(void)
{
    struct stat st;
    return sh_r.stat(sh_cache, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
}

/* Opens (creating) the lock file at path and flock()s it: 0600, or 0660 in a shared cache (fchmod when we own it:
 * the umask may have cut the group bits, and a lock file another user cannot open read-write breaks every later
 * open of that file for them). The descriptor, or -errno. */
static int lock_file(const char *path)
{
    mode_t mode = cache_shared() ? 0660 : 0600;
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

static int exists(const char *p)
{
    struct stat st;
    return sh_r.stat(p, &st) == 0;
}

/* The lock protocol: take lockpath, skip when done_path appeared meanwhile, else run the helper with the
 * lock as fd 3 and wait for the lock to come free. 0, or -errno when it could not even start. */
static int run_locked(const char *lockpath, const char *done_path, char **argv, int quiet)
{
    int fd = lock_file(lockpath);
    if (fd < 0)
        return fd;
    if (done_path && exists(done_path)) {
        sh_r.close(fd);
        return 0;
    }
    pid_t pid = spawn_helper(argv, fd, quiet);
    sh_r.close(fd);
    if (pid < 0)
        return pid;
    fd = lock_file(lockpath);   /* returns once the helper exited (or closed its fd 3) */
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        sh_r.close(fd);
    }
    reap(pid);
    return 0;
}

/* mkdir -p of a path under CACHE: 0700 under the umask, or 02770 in a shared cache (chmod of the directories
 * this call created, so the umask cannot cut the group's bits; existing ones are left as they are). */
static void mkdirs(const char *path)
{
    int shared = cache_shared();
    mode_t mode = shared ? 02770 : 0700;
    char b[SH_PATH];
    size_t n = strlen(path);
    if (n >= sizeof b)
        return;
    memcpy(b, path, n + 1);
    for (char *p = b + 1;; p++) {
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

static void read_line(const char *path, char *out, size_t n)
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

/* --- mounts ------------------------------------------------------------------------------------------ */

static int index_valid(const void *base, size_t len)
{
    const struct hfs3_index_header *h = base;
    if (len < sizeof *h || memcmp(h->magic, HFS3_INDEX_MAGIC, 8) || h->version != HFS3_INDEX_VERSION ||
        h->file_size != len || h->n_entries == 0 || h->entries_off > len ||
        (len - h->entries_off) / sizeof(struct hfs3_index_entry) < h->n_entries || h->children_off > len ||
        (len - h->children_off) / 4 < h->n_children || h->strings_off > len || len - h->strings_off < h->strings_len ||
        h->strings_len == 0 || h->entries_off % 8 || h->children_off % 4)
        return 0;
    const struct hfs3_index_entry *e = (const void *)((const char *)base + h->entries_off);
    const uint32_t *kids = (const void *)((const char *)base + h->children_off);
    const char *s = (const char *)base + h->strings_off;
    if (s[h->strings_len - 1] != 0 || e[0].type != HFS3_IX_DIR)
        return 0;
    for (uint32_t i = 0; i < h->n_entries; i++) {
        const struct hfs3_index_entry *x = &e[i];
        if (x->type < HFS3_IX_DIR || x->type > HFS3_IX_SYMLINK || x->parent >= h->n_entries ||
            e[x->parent].type != HFS3_IX_DIR || (uint64_t)x->path_off + x->path_len >= h->strings_len ||
            s[x->path_off + x->path_len] != 0 || x->name_len > x->path_len ||
            x->name_off != x->path_off + x->path_len - x->name_len)
            return 0;
        if (x->type == HFS3_IX_DIR && (uint64_t)x->child_first + x->child_count > h->n_children)
            return 0;
        if (x->type == HFS3_IX_SYMLINK && ((uint64_t)x->target_off + x->target_len >= h->strings_len ||
                                           s[x->target_off + x->target_len] != 0))
            return 0;
    }
    for (uint32_t i = 0; i < h->n_children; i++)
        if (kids[i] == 0 || kids[i] >= h->n_entries)
            return 0;
    return 1;
}

static void load(struct sh_mount *m)
{
    char p[SH_PATH + 64], lk[SH_PATH + 64];
    snprintf(p, sizeof p, "%s/index", m->dir);
    struct stat st;
    int have = sh_r.stat(p, &st) == 0;
    time_t now = time(NULL);
    if ((!have || now - st.st_mtime >= ttl || now < st.st_mtime) && !offline) {
        mkdirs(m->dir);
        snprintf(lk, sizeof lk, "%s/lock", m->dir);
        char *argv[] = {NULL, "_index", "--lock-fd", "3", m->remote, NULL};
        /* with a cached index the helper itself warns (once) when it has to fall back to it */
        run_locked(lk, NULL, argv, !have);
    }
    m->broken = 1;
    int fd = sh_r.open(p, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && sh_r.fstat(fd, &st) == 0 && st.st_size > 0) {
        void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base != MAP_FAILED && index_valid(base, (size_t)st.st_size)) {
            m->ix = base;
            m->ixlen = (size_t)st.st_size;
            m->ents = (const void *)((const char *)base + m->ix->entries_off);
            m->kids = (const void *)((const char *)base + m->ix->children_off);
            m->strs = (const char *)base + m->ix->strings_off;
            m->broken = 0;
            m->mtime = st.st_mtime;
        } else if (base != MAP_FAILED) {
            munmap(base, (size_t)st.st_size);
            sh_log(0, "%s: %s: not a valid index", m->remote, p);
        }
    }
    if (fd >= 0)
        sh_r.close(fd);
    snprintf(lk, sizeof lk, "%s/tree", m->dir);
    if (m->broken) {
        char why[512];
        snprintf(p, sizeof p, "%s/error", m->dir);
        read_line(p, why, sizeof why);
        sh_log(0, "%s: no manifest for %s: %s", m->path, m->remote,
               why[0] ? why : offline ? "HFS3_OFFLINE=1 and none cached" : "no index in the cache");
        mkdirs(lk);
    }
    if (sh_r.stat(lk, &st) == 0 || sh_r.stat(sh_cache, &st) == 0)
        m->dev = st.st_dev;
}

/* 0 once m is loaded (maybe broken); -EAGAIN in a vfork child that finds it not loaded. */
static int mount_get(struct sh_mount *m)
{
    if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == 2)
        return 0;
    if (sh_in_vfork())
        return -EAGAIN;
    int z = 0;
    if (__atomic_compare_exchange_n(&m->state, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        load(m);
        __atomic_store_n(&m->state, 2, __ATOMIC_RELEASE);
        return 0;
    }
    while (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* --- the index --------------------------------------------------------------------------------------- */

static uint32_t child(const struct sh_mount *m, uint32_t dir, const char *name, size_t n)
{
    const struct hfs3_index_entry *d = &m->ents[dir];
    const uint32_t *k = m->kids + d->child_first;
    size_t lo = 0, hi = d->child_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct hfs3_index_entry *c = &m->ents[k[mid]];
        size_t cn = c->name_len;
        int r = memcmp(m->strs + c->name_off, name, cn < n ? cn : n);
        if (r == 0)
            r = cn < n ? -1 : cn > n ? 1 : 0;
        if (r == 0)
            return k[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return HFS3_INDEX_NONE;
}

/* Walks rel (inside mount m) following symlinks (the last one only with follow). 0 and *out, or -errno. */
static int walk(const struct sh_mount *m, const char *rel, int follow, uint32_t *out)
{
    char rem[SH_PATH * 2];
    if (strlen(rel) >= sizeof rem)
        return -ENAMETOOLONG;
    strcpy(rem, rel);
    uint32_t cur = 0;
    int hops = 0;
    const char *p = rem, *s;
    size_t n;
    while ((n = next_comp(&p, &s))) {
        int dot = dot_comp(s, n);
        if (dot == 1)
            continue;
        if (m->ents[cur].type != HFS3_IX_DIR)
            return -ENOTDIR;
        if (dot == 2) {
            if (cur == 0)
                return -ENOENT;   /* a valid manifest never leaves its tree */
            cur = m->ents[cur].parent;
            continue;
        }
        uint32_t c = child(m, cur, s, n);
        if (c == HFS3_INDEX_NONE)
            return -ENOENT;
        const char *q = p;
        while (*q == '/')
            q++;
        if (m->ents[c].type == HFS3_IX_SYMLINK && (*q || follow || *p == '/')) {
            if (++hops > SH_MAX_HOPS)
                return -ELOOP;
            const char *t = m->strs + m->ents[c].target_off;
            if (t[0] == '/')
                return -ENOENT;
            char tmp[SH_PATH * 2];
            if ((size_t)snprintf(tmp, sizeof tmp, "%s%s", t, p) >= sizeof tmp)
                return -ENAMETOOLONG;
            strcpy(rem, tmp);
            p = rem;
            continue;
        }
        cur = c;
    }
    *out = cur;
    return 0;
}

static const char *epath(const struct sh_mount *m, uint32_t e)
{
    return m->strs + m->ents[e].path_off;
}

static void tree_path(const struct sh_mount *m, const char *rel, char *out, size_t n)
{
    snprintf(out, n, "%s/tree%s%s", m->dir, *rel ? "/" : "", rel);
}

static uint64_t fnv(const char *a, const char *b)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h = (h ^ '/') * 1099511628211ULL;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

static void stat_synth(const struct sh_mount *m, uint32_t e, struct stat *st)
{
    const struct hfs3_index_entry *x = &m->ents[e];
    memset(st, 0, sizeof *st);
    st->st_dev = m->dev;
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_blksize = 4096;
    st->st_nlink = 1;
    if (x->type == HFS3_IX_FILE) {
        uint64_t ino = 0;
        memcpy(&ino, x->sha256, 8);
        st->st_ino = (ino_t)(ino | (1ULL << 63));
        st->st_mode = S_IFREG | 0444;
        st->st_size = (off_t)x->size;
        st->st_blocks = (blkcnt_t)((x->size + 511) / 512);
        st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = (time_t)x->mtime;
    } else {
        st->st_ino = (ino_t)((fnv(m->remote, epath(m, e)) >> 2) | (1ULL << 62));
        st->st_mode = x->type == HFS3_IX_DIR ? S_IFDIR | 0555 : S_IFLNK | 0777;
        st->st_size = x->type == HFS3_IX_DIR ? 4096 : x->target_len;
        st->st_nlink = x->type == HFS3_IX_DIR ? 2 : 1;
        st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = m->mtime;
    }
}

/* Real stat of a skeleton directory (created when missing, outside vfork children), perms forced 0555. */
static int stat_skel(const char *real, struct stat *st)
{
    if (sh_r.stat(real, st) < 0) {
        if (sh_in_vfork())
            return -ENOENT;
        mkdirs(real);
        if (sh_r.stat(real, st) < 0)
            return -errno;
    }
    st->st_mode = (st->st_mode & S_IFMT) | 0555;
    return 0;
}

static void anc_path(const char *logical, char *out, size_t n)
{
    if ((size_t)snprintf(out, n, "%s/mounts/ancestors%s", sh_cache, logical) >= n)
        out[0] = 0;
}

/* Resolves l (L_MNT) to an entry; -EAGAIN when the mount is unloaded in a vfork child. */
static int resolve(const struct sh_loc *l, int follow, const struct sh_mount **mp, uint32_t *e)
{
    struct sh_mount *m = &sh_mounts[l->m];
    int rc = mount_get(m);
    if (rc < 0)
        return rc;
    *mp = m;
    if (m->broken) {
        if (*l->rel)
            return -EIO;
        *e = 0;
        return 1;   /* the root of a broken mount */
    }
    rc = walk(m, l->rel, follow || l->slash, e);
    if (rc == 0 && l->slash && m->ents[*e].type != HFS3_IX_DIR)
        return -ENOTDIR;
    return rc;
}

int sh_stat(const struct sh_loc *l, int follow, struct stat *st)
{
    char rp[SH_PATH + 64];
    if (l->kind == L_ANC) {
        if ((follow ? sh_r.stat : sh_r.lstat)(l->path, st) == 0)
            return 0;
        anc_path(l->path, rp, sizeof rp);
        if (stat_skel(rp, st) == 0)
            return 0;
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        st->st_ino = (ino_t)((fnv("ancestor", l->path) >> 2) | (1ULL << 62));
        return 0;
    }
    const struct sh_mount *m;
    uint32_t e;
    int rc = resolve(l, follow, &m, &e);
    if (rc == -EAGAIN) {
        tree_path(&sh_mounts[l->m], l->rel, rp, sizeof rp);
        return stat_skel(rp, st);
    }
    if (rc < 0)
        return rc;
    if (rc == 1 || m->ents[e].type == HFS3_IX_DIR) {
        tree_path(m, rc == 1 ? "" : epath(m, e), rp, sizeof rp);
        if (stat_skel(rp, st) == 0)
            return 0;
    }
    stat_synth(m, e, st);
    return 0;
}

/* --- descriptors ------------------------------------------------------------------------------------- */

struct fdent {
    uint8_t kind;
    uint8_t m;
    uint32_t e;
    dev_t dev;
    ino_t ino;
};
static struct fdent fdtab[SH_FD_MAX];

void sh_fd_set(int fd, int kind, int m, uint32_t e)
{
    struct stat st;
    if (fd < 0 || fd >= SH_FD_MAX || sh_in_vfork() || sh_r.fstat(fd, &st) < 0)
        return;
    fdtab[fd].kind = 0;
    fdtab[fd].m = (uint8_t)m;
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

int sh_fd_stat(int fd, struct stat *st)
{
    struct fdent f;
    if (!fd_get(fd, &f, st))
        return 0;
    if (f.kind == FD_FILE) {
        const struct sh_mount *m = &sh_mounts[f.m];
        if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2 || m->broken)
            return 0;
        stat_synth(m, f.e, st);
    } else {
        st->st_mode = (st->st_mode & S_IFMT) | 0555;
    }
    return 1;
}

int sh_fd_dirloc(int fd, struct sh_loc *l)
{
    struct fdent f;
    struct stat st;
    if (!fd_get(fd, &f, &st) || f.kind == FD_FILE)
        return 0;
    if (f.kind == FD_DIR) {
        const struct sh_mount *m = &sh_mounts[f.m];
        if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2)
            return 0;
        const char *r = m->broken ? "" : epath(m, f.e);
        char b[SH_PATH * 2];
        snprintf(b, sizeof b, "%s%s%s", m->path, *r ? "/" : "", r);
        return classify_abs(b, l) != L_NONE;
    }
    char pp[64], real[PATH_MAX], lg[SH_PATH];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    ssize_t k = sh_r.readlink(pp, real, sizeof real - 1);
    if (k <= 0)
        return 0;
    real[k] = 0;
    return sh_map_back(real, lg, sizeof lg) && classify_abs(lg, l) != L_NONE;
}

/* --- open -------------------------------------------------------------------------------------------- */

static void hexs(const uint8_t *h, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[64] = 0;
}

static void maybe_prefetch(struct sh_mount *m, uint32_t e)
{
    if (!prefetch || offline || sh_in_vfork() || __atomic_exchange_n(&m->prefetched, 1, __ATOMIC_ACQ_REL))
        return;
    char *argv[] = {NULL, "_prefetch", m->remote, (char *)epath(m, e), NULL};
    pid_t pid = spawn_helper(argv, -1, 1);
    if (pid > 0)
        reap(pid);
}

/* Makes sure blobs/<sha> of file entry e exists: 0 or -EIO (logged). */
static int ensure_blob(struct sh_mount *m, uint32_t e, char *blob, size_t n)
{
    char hex[65];
    hexs(m->ents[e].sha256, hex);
    if ((size_t)snprintf(blob, n, "%s/blobs/%s", sh_cache, hex) >= n)
        return -ENAMETOOLONG;
    if (exists(blob))
        return 0;
    if (offline) {
        sh_log(1, "%s/%s: not in the cache and HFS3_OFFLINE=1", m->path, epath(m, e));
        return -EIO;
    }
    if (sh_in_vfork())
        return -EIO;
    char lk[SH_PATH + 128];
    snprintf(lk, sizeof lk, "%s/locks", sh_cache);
    mkdirs(lk);
    snprintf(lk, sizeof lk, "%s/locks/%s.lock", sh_cache, hex);
    char *argv[] = {NULL, "_get", "--lock-fd", "3", m->remote, (char *)epath(m, e), NULL};
    int rc = run_locked(lk, blob, argv, 1);
    if (rc < 0) {
        sh_log(0, "%s/%s: cannot fetch: %s", m->path, epath(m, e), strerror(-rc));
        return -EIO;
    }
    if (exists(blob))
        return 0;
    char why[512];
    snprintf(lk, sizeof lk, "%s/fails/%s.err", sh_cache, hex);
    read_line(lk, why, sizeof why);
    sh_log(0, "%s/%s: fetch failed: %s", m->path, epath(m, e), why[0] ? why : "(no reason recorded)");
    return -EIO;
}

int sh_open(const struct sh_loc *l, int flags, mode_t mode)
{
    int keep = flags & (O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_PATH);
    int wr = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
    char rp[SH_PATH + 64];
    int fd;
    struct stat ast;
    if (l->kind == L_ANC && sh_r.lstat(l->path, &ast) == 0) {
        /* an ancestor that exists on disk is the host's own */
        fd = sh_r.open(l->path, flags, mode);
        return fd >= 0 ? fd : -errno;
    }
    if (wr)
        return -EROFS;
    if (l->kind == L_ANC) {
        struct stat st;
        anc_path(l->path, rp, sizeof rp);
        if (stat_skel(rp, &st) < 0)
            return -ENOENT;
        fd = sh_r.open(rp, O_RDONLY | O_DIRECTORY | keep);
        if (fd < 0)
            return -errno;
        sh_fd_set(fd, FD_ANC, l->m, 0);
        return fd;
    }
    const struct sh_mount *cm;
    uint32_t e;
    int rc = resolve(l, !(flags & O_NOFOLLOW), &cm, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc < 0)
        return rc;
    struct sh_mount *m = (struct sh_mount *)cm;
    struct stat st;
    uint32_t t = rc == 1 ? HFS3_IX_DIR : m->ents[e].type;
    if (t == HFS3_IX_DIR) {
        tree_path(m, rc == 1 ? "" : epath(m, e), rp, sizeof rp);
        if (stat_skel(rp, &st) < 0)
            return -EIO;
        fd = sh_r.open(rp, O_RDONLY | O_DIRECTORY | keep);
        if (fd < 0)
            return -errno;
        sh_fd_set(fd, FD_DIR, l->m, e);
        return fd;
    }
    if (flags & O_DIRECTORY)
        return -ENOTDIR;
    if (t == HFS3_IX_SYMLINK && !(flags & O_PATH))
        return -ELOOP;
    if (flags & O_PATH) {
        /* never fetch: a path descriptor on the parent's skeleton dir, with the entry's identity */
        tree_path(m, epath(m, m->ents[e].parent), rp, sizeof rp);
        if (stat_skel(rp, &st) < 0)
            return -EIO;
        fd = sh_r.open(rp, O_PATH | O_DIRECTORY | (keep & O_CLOEXEC));
    } else {
        if ((rc = ensure_blob(m, e, rp, sizeof rp)) < 0)
            return rc;
        fd = sh_r.open(rp, O_RDONLY | keep);
        if (fd >= 0)
            maybe_prefetch(m, e);
    }
    if (fd < 0)
        return -errno == -ENOENT ? -EIO : -errno;
    sh_fd_set(fd, FD_FILE, l->m, e);
    return fd;
}

/* --- other path calls -------------------------------------------------------------------------------- */

ssize_t sh_readlink(const struct sh_loc *l, char *buf, size_t n)
{
    if (l->kind == L_ANC) {
        ssize_t k = sh_r.readlink(l->path, buf, n);
        return k >= 0 ? k : errno == ENOENT ? -EINVAL : -errno;
    }
    const struct sh_mount *m;
    uint32_t e;
    int rc = resolve(l, 0, &m, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc < 0)
        return rc;
    if (rc == 1 || m->ents[e].type != HFS3_IX_SYMLINK)
        return -EINVAL;
    size_t k = m->ents[e].target_len < n ? m->ents[e].target_len : n;
    memcpy(buf, m->strs + m->ents[e].target_off, k);
    return (ssize_t)k;
}

int sh_realpath(const struct sh_loc *l, char out[SH_PATH])
{
    if (l->kind == L_ANC) {
        struct stat st;
        if (sh_r.stat(l->path, &st) == 0) {
            char tmp[PATH_MAX];
            if (!sh_r.realpath(l->path, tmp))
                return -errno;
            snprintf(out, SH_PATH, "%s", tmp);
            return 0;
        }
        snprintf(out, SH_PATH, "%s", l->path);
        return 0;
    }
    const struct sh_mount *m;
    uint32_t e;
    int rc = resolve(l, 1, &m, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc < 0)
        return rc;
    const char *r = rc == 1 ? "" : epath(m, e);
    if ((size_t)snprintf(out, SH_PATH, "%s%s%s", m->path, *r ? "/" : "", r) >= SH_PATH)
        return -ENAMETOOLONG;
    return 0;
}

int sh_access(const struct sh_loc *l, int mode)
{
    struct stat st;
    int rc = sh_stat(l, 1, &st);
    if (rc < 0)
        return rc;
    if (mode & W_OK)
        return -EROFS;
    if ((mode & X_OK) && !S_ISDIR(st.st_mode) && !(st.st_mode & 0111))
        return -EACCES;
    return 0;
}

int sh_chdir(const struct sh_loc *l)
{
    char rp[SH_PATH + 64];
    struct stat st;
    if (l->kind == L_ANC) {
        if (sh_r.chdir(l->path) == 0)
            return 0;
        if (errno != ENOENT)
            return -errno;
        anc_path(l->path, rp, sizeof rp);
        if (stat_skel(rp, &st) < 0)
            return -ENOENT;
        return sh_r.chdir(rp) == 0 ? 0 : -errno;
    }
    const struct sh_mount *m;
    uint32_t e;
    int rc = resolve(l, 1, &m, &e);
    if (rc == -EAGAIN) {
        /* a vfork child (subprocess cwd=): the skeleton is a real directory, no state needed */
        tree_path(&sh_mounts[l->m], l->rel, rp, sizeof rp);
        return sh_r.chdir(rp) == 0 ? 0 : -errno;
    }
    if (rc < 0)
        return rc;
    if (rc == 0 && m->ents[e].type != HFS3_IX_DIR)
        return -ENOTDIR;
    tree_path(m, rc == 1 ? "" : epath(m, e), rp, sizeof rp);
    if (stat_skel(rp, &st) < 0)
        return -EIO;
    return sh_r.chdir(rp) == 0 ? 0 : -errno;
}

int sh_statfs(const struct sh_loc *l, struct statfs *sf)
{
    struct stat st;
    int rc = sh_stat(l, 1, &st);
    if (rc < 0)
        return rc;
    const char *p = l->kind == L_MNT ? sh_mounts[l->m].dir : sh_cache;
    if (sh_r.statfs(p, sf) < 0 && sh_r.statfs("/", sf) < 0)
        return -errno;
    sf->f_flags |= ST_RDONLY;
    return 0;
}

/* --- listings ---------------------------------------------------------------------------------------- */

static unsigned char dtype(uint32_t t)
{
    return t == HFS3_IX_DIR ? DT_DIR : t == HFS3_IX_FILE ? DT_REG : DT_LNK;
}

int sh_list(const struct sh_loc *l, int (*fn)(void *, const struct sh_dent *), void *arg)
{
    struct sh_dent d;
    struct stat st;
    int rc;
    if ((rc = sh_stat(l, 1, &st)) < 0)
        return rc;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    d.type = DT_DIR;
    d.ino = st.st_ino;
    strcpy(d.name, ".");
    if ((rc = fn(arg, &d)) < 0)
        return rc;
    strcpy(d.name, "..");   /* its own identity would cost a lookup; 0 reads as a deleted entry */
    d.ino = st.st_ino ^ 1;
    if ((rc = fn(arg, &d)) < 0)
        return rc;
    if (l->kind == L_ANC) {
        size_t n = strlen(l->path);
        for (int i = 0; i < sh_nmounts; i++) {
            const struct sh_mount *m = &sh_mounts[i];
            if (m->len <= n || memcmp(m->path, l->path, n) || m->path[n] != '/')
                continue;
            const char *s = m->path + n + 1, *end = strchr(s, '/');
            size_t k = end ? (size_t)(end - s) : strlen(s);
            int dup = 0;
            for (int j = 0; j < i; j++) {
                const struct sh_mount *o = &sh_mounts[j];
                if (o->len > n + k && !memcmp(o->path, m->path, n + 1 + k) &&
                    (o->path[n + 1 + k] == '/' || !o->path[n + 1 + k]))
                    dup = 1;
            }
            if (dup || k >= sizeof d.name)
                continue;
            memcpy(d.name, s, k);
            d.name[k] = 0;
            struct sh_loc c;
            char full[SH_PATH * 2];
            snprintf(full, sizeof full, "%s/%s", l->path, d.name);
            d.ino = classify_abs(full, &c) != L_NONE && sh_stat(&c, 1, &st) == 0 ? st.st_ino : 1;
            if ((rc = fn(arg, &d)) < 0)
                return rc;
        }
        return 0;
    }
    const struct sh_mount *m;
    uint32_t e;
    rc = resolve(l, 1, &m, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc == 1)
        return -EIO;   /* the root of a mount without a manifest */
    if (rc < 0)
        return rc;
    const struct hfs3_index_entry *x = &m->ents[e];
    char rp[SH_PATH + 64];
    for (uint32_t i = 0; i < x->child_count; i++) {
        uint32_t c = m->kids[x->child_first + i];
        const struct hfs3_index_entry *y = &m->ents[c];
        if (y->name_len >= sizeof d.name)
            continue;
        memcpy(d.name, m->strs + y->name_off, y->name_len + 1);
        d.type = dtype(y->type);
        if (y->type == HFS3_IX_DIR) {
            tree_path(m, epath(m, c), rp, sizeof rp);
            d.ino = stat_skel(rp, &st) == 0 ? st.st_ino : 1;
        } else {
            stat_synth(m, c, &st);
            d.ino = st.st_ino;
        }
        if ((rc = fn(arg, &d)) < 0)
            return rc;
    }
    return 0;
}

void sh_stat_to_statx(const struct stat *st, struct statx *sx)
{
    memset(sx, 0, sizeof *sx);
    sx->stx_mask = STATX_BASIC_STATS;
    sx->stx_blksize = (uint32_t)st->st_blksize;
    sx->stx_nlink = (uint32_t)st->st_nlink;
    sx->stx_uid = st->st_uid;
    sx->stx_gid = st->st_gid;
    sx->stx_mode = (uint16_t)st->st_mode;
    sx->stx_ino = st->st_ino;
    sx->stx_size = (uint64_t)st->st_size;
    sx->stx_blocks = (uint64_t)st->st_blocks;
    sx->stx_atime.tv_sec = st->st_atim.tv_sec;
    sx->stx_atime.tv_nsec = (uint32_t)st->st_atim.tv_nsec;
    sx->stx_mtime.tv_sec = st->st_mtim.tv_sec;
    sx->stx_mtime.tv_nsec = (uint32_t)st->st_mtim.tv_nsec;
    sx->stx_ctime.tv_sec = st->st_ctim.tv_sec;
    sx->stx_ctime.tv_nsec = (uint32_t)st->st_ctim.tv_nsec;
    sx->stx_dev_major = major(st->st_dev);
    sx->stx_dev_minor = minor(st->st_dev);
    sx->stx_rdev_major = major(st->st_rdev);
    sx->stx_rdev_minor = minor(st->st_rdev);
}
