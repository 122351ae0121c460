/* cachedir.c - where the cache is, decided once per process. At start (no I/O but getcwd): HFS3_CACHE_DIR,
 * made absolute against the working directory when relative (and exported so, for children), else $XDG_CACHE_HOME/hfs3 (an absolute
 * XDG_CACHE_HOME only, as the XDG spec says), else $HOME/.cache/hfs3. At the first use that needs it (never in a
 * vfork child): the directory is created if missing and checked (a directory, reached through no symlink of
 * another user, owned by the user or root, not writable by others). An unusable default falls back to a
 * private per-user directory, $TMPDIR/hfs3-<euid> or /var/tmp/hfs3-<euid> (created 0700, and used only when it
 * is a real directory owned by the user and writable by nobody else); an unusable HFS3_CACHE_DIR does not
 * (the user asked for that one). Either way one log line says what happened; with no usable cache, every
 * mount is an empty directory and everything inside fails with EIO. */
#include "shim.h"
#include "hfs3/ownkey.h"
#include "hfs3/serve.h"

#include <pthread.h>
#include <sys/syscall.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

char sh_cache_real[SH_PATH];

static int explicit_dir;          /* sh_cache came from HFS3_CACHE_DIR */
static char start_error[SH_PATH + 128]; /* a problem already known at start */
static int no_default;            /* neither XDG_CACHE_HOME nor HOME gives one: the fallback decides */
static int state;                 /* atomic: 0 undecided, 1 deciding, 2 usable, 3 unusable */

static void strip_slashes(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = 0;
}

/* The environment's HFS3_CACHE_DIR entry pointed at "HFS3_CACHE_DIR=<absolute>": in place, in the array that
 * environ and main's envp share (bash builds its children's environment from envp, so setenv would not reach
 * them), no allocation; the string is never changed again. */
static char child_env[SH_PATH + 32];
static void export_abs(void)
{
    extern char **environ;
    snprintf(child_env, sizeof child_env, "HFS3_CACHE_DIR=%s", sh_cache);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "HFS3_CACHE_DIR=", 15)) {
            *e = child_env;
            return;
        }
}

void sh_cache_from_env(void)
{
    const char *c = getenv("HFS3_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int n = -1;
    sh_cache[0] = 0;
    if (c && *c) {
        explicit_dir = 1;
        if (c[0] == '/') {
            n = snprintf(sh_cache, SH_PATH, "%s", c);
        } else {
            /* relative: against the working directory at start, so a later chdir cannot move the cache */
            SH_SCRATCH(t);
            char *cwd = t->a;
            if (!sh_r.getcwd || !sh_r.getcwd(cwd, SH_PATH)) {
                snprintf(start_error, sizeof start_error,
                         "HFS3_CACHE_DIR=%.200s is relative and the working directory is unknown", c);
                goto fail;
            }
            n = snprintf(sh_cache, SH_PATH, "%s/%s", strcmp(cwd, "/") ? cwd : "", c);
        }
    } else if (x && x[0] == '/') {
        n = snprintf(sh_cache, SH_PATH, "%s/hfs3", x);
    } else if (h && *h) {
        n = snprintf(sh_cache, SH_PATH, "%s/.cache/hfs3", h);
    }
    if (n < 0 || n >= SH_PATH) {
        if (n >= SH_PATH)
            snprintf(start_error, sizeof start_error, "the cache directory's name is too long");
        goto fail;
    }
    if (sh_cache[0] != '/') {
        if (explicit_dir)
            goto fail;
        /* no usable default: the fallback decides at first use; meanwhile a name that maps nothing back */
        no_default = 1;
        snprintf(sh_cache, SH_PATH, "/nonexistent/hfs3-cache");
    }
    strip_slashes(sh_cache);
    /* "." and ".." inside are harmless for the kernel, but the skeleton's paths are compared as strings */
    SH_SCRATCH(t);
    char *norm = t->a;
    if (sh_normalise(sh_cache, norm, SH_PATH, NULL) == 0)
        memcpy(sh_cache, norm, strlen(norm) + 1);
    snprintf(sh_cache_env, sizeof sh_cache_env, "HFS3_CACHE_DIR=%s", sh_cache);
    /* a relative HFS3_CACHE_DIR: children inherit the absolute one, so a child started from another directory
     * (a shell's `cd M/x && ls`) uses this process's cache, not one of its own */
    if (explicit_dir && c[0] != '/')
        export_abs();
    return;
fail:
    if (!start_error[0])
        snprintf(start_error, sizeof start_error, "HFS3_CACHE_DIR=%.200s is not usable", c ? c : "");
    snprintf(sh_cache, SH_PATH, "/nonexistent/hfs3-cache");
    snprintf(sh_cache_env, sizeof sh_cache_env, "HFS3_CACHE_DIR=%s", sh_cache);
    __atomic_store_n(&state, 3, __ATOMIC_RELEASE);
}

/* The mkdir that failed while creating the cache (an explicit HFS3_CACHE_DIR): each mount says it at load. */
static char mkdir_failed[SH_PATH];
static int mkdir_errno;

int sh_cache_mkdir_error(const char **dir)
{
    *dir = mkdir_failed;
    return explicit_dir && mkdir_failed[0] ? mkdir_errno : 0;   /* a default has the fallback's own line */
}

/* Whether path is the root of a mount (a volume a container runtime mounted: a kubelet emptyDir or hostPath), as
 * lib/cache.c's mount_root says. The raw system call: glibc's statx would be the shim's own. Out of line: its
 * struct statx is not on check_dir's frame. */
static __attribute__((noinline)) int mount_root(const char *path)
{
    struct statx stx;
    if (syscall(SYS_statx, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) < 0)
        return 0;
    return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* 0 when dir can be this user's cache (created when missing, parents 0700): else -errno, *why set. */
static int check_dir(const char *dir, const char **why)
{
    SH_SCRATCH(t);
    char *b = t->a;
    size_t n = strlen(dir);
    struct stat st;
    uid_t me = geteuid();
    if (n >= SH_PATH || dir[0] != '/') {
        *why = "not an absolute path";
        return -EINVAL;
    }
    memcpy(b, dir, n + 1);
    /* every existing component: a symlink there decides where everything below goes (lib/cache.c's rule) */
    for (char *p = b + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = 0;
        if (sh_r.lstat(b, &st) < 0) {
            if (errno != ENOENT) {
                *why = strerror(errno);
                return -errno;
            }
            if (sh_r.mkdir(b, 0700) < 0 && errno != EEXIST) {
                *why = strerror(errno);
                mkdir_errno = errno;
                snprintf(mkdir_failed, sizeof mkdir_failed, "%.*s", (int)sizeof mkdir_failed - 1, b);
                return -mkdir_errno;
            }
            if (sh_r.lstat(b, &st) < 0) {
                *why = strerror(errno);
                return -errno;
            }
        }
        if (S_ISLNK(st.st_mode) && st.st_uid != me && st.st_uid != 0) {
            *why = "reached through a symlink owned by another user";
            return -EPERM;
        }
        /* a directory on the way, at any depth, that others can write without the sticky bit: whoever can rename
         * its entries decides what the path leads to, after this check too (lib/cache.c's check_on_path, and its
         * one exception: a volume's root, root's or ours, as kubelet mounts an emptyDir 0777, holding the cache
         * directory itself) */
        if (c && S_ISLNK(st.st_mode) && sh_r.stat(b, &st) < 0)
            st.st_mode = 0;
        if (c && S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX) &&
            !(!strchr(p + 1, '/') && (st.st_uid == 0 || st.st_uid == me) && mount_root(b))) {
            static char wbuf[SH_PATH + 160];
            snprintf(wbuf, sizeof wbuf, "reached through %.*s, writable by others without the sticky bit (chmod o-w "
                     "or +t it, or choose another HFS3_CACHE_DIR)", (int)(SH_PATH - 1), b);
            *why = wbuf;
            return -EPERM;
        }
        *p = c;
        if (!c)
            break;
    }
    if (sh_r.stat(dir, &st) < 0) {
        *why = strerror(errno);
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        *why = "not a directory";
        return -ENOTDIR;
    }
    if (st.st_uid != me && st.st_uid != 0) {
        *why = "owned by another user";
        return -EPERM;
    }
    if (st.st_mode & S_IWOTH) {
        *why = "writable by others";
        return -EPERM;
    }
    /* the helper's words (lib/cache.c) rather than "Permission denied": whose it is and what to do; decide()
     * runs once per process, so one static buffer serves */
    static char whybuf[400];
    int shared = (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
    if (st.st_uid != me && !shared) {
        snprintf(whybuf, sizeof whybuf, "belongs to uid %u, not to you (uid %u): a private cache must be yours "
                 "(use a cache of your own; or share one: install -d -m 3770 -g GROUP DIR, or on Kubernetes give "
                 "the pod an fsGroup)", (unsigned)st.st_uid, (unsigned)me);
        *why = whybuf;
        return -EPERM;
    }
    if (sh_r.access(dir, W_OK | X_OK) < 0) {
        int e = errno;
        /* a warm cache on a read-only volume (a node's prewarmed cache mounted read-only into pods): offline,
         * nothing needs writing (no helper runs, so no lock file; the last-use stamp is skipped), so it is used
         * as it is; online a fetch could not land, and it is refused with a line that says what to set */
        if (e == EROFS && sh_offline && sh_r.access(dir, R_OK | X_OK) == 0) {
            __atomic_store_n(&sh_cache_ro, 1, __ATOMIC_RELEASE);
            return 0;
        }
        if (e == EACCES && shared) {
            snprintf(whybuf, sizeof whybuf, "shared with group %u, which uid %u is not in (check the server's "
                     "groups, e.g. the pod's fsGroup)", (unsigned)st.st_gid, (unsigned)me);
            *why = whybuf;
        } else {
            *why = e == EROFS ? "Read-only file system (set HFS3_OFFLINE=1 to read what it holds)" : strerror(e);
        }
        return -e;
    }
    return 0;
}

/* The private fallback: BASE/hfs3-<euid>, made here 0700; 0 when it is a real directory of ours that nobody
 * else can write (an existing one is never chmod-ed or followed). */
static int fallback(char *out, size_t n)
{
    const char *tmpdir = getenv("TMPDIR");
    const char *base = tmpdir && tmpdir[0] == '/' ? tmpdir : "/var/tmp";
    SH_SCRATCH(t);
    char *d = t->a;
    struct stat st;
    if ((size_t)snprintf(d, SH_PATH, "%s/hfs3-%u", base, (unsigned)geteuid()) >= SH_PATH)
        return -ENAMETOOLONG;
    strip_slashes(d);
    if (sh_r.mkdir(d, 0700) < 0 && errno != EEXIST)
        return -errno;
    if (sh_r.lstat(d, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return -EPERM;
    if ((size_t)snprintf(out, n, "%s", d) >= n)
        return -ENAMETOOLONG;
    return 0;
}

/* Points every mount's directory at the (new) cache. */
static void set_dirs(void)
{
    snprintf(sh_cache_env, sizeof sh_cache_env, "HFS3_CACHE_DIR=%s", sh_cache);
    for (int i = 0; i < sh_nmounts; i++)
        snprintf(sh_mounts[i].dir, sizeof sh_mounts[i].dir, "%s/mounts/%s", sh_cache, sh_mounts[i].key);
}

static int decide(void)
{
    const char *why = NULL;
    if (start_error[0]) {
        sh_log(0, "%s: mounts fail with EIO", start_error);
        return -EIO;
    }
    if (!no_default && check_dir(sh_cache, &why) == 0)
        return 0;
    if (explicit_dir) {
        if (!mkdir_failed[0])   /* else each mount says it, with the mkdir that failed (mount.c) */
            sh_log(0, "cache directory %s: %s: mounts fail with EIO", sh_cache, why);
        return -EIO;
    }
    SH_SCRATCH(t);
    char *fb = t->a;
    int rc = fallback(fb, SH_PATH);
    if (rc < 0) {
        sh_log(0, "cache directory %s: %s, and the fallback under $TMPDIR or /var/tmp is not usable (%s): mounts "
               "fail with EIO", no_default ? "(none: no HOME)" : sh_cache, why ? why : "no HOME", strerror(-rc));
        return -EIO;
    }
    sh_log(1, "cache directory %s: %s: using %s", no_default ? "(none: no HOME)" : sh_cache, why ? why : "no HOME",
           fb);
    memcpy(sh_cache, fb, strlen(fb) + 1);
    set_dirs();
    return 0;
}

int sh_cache_ro;
static gid_t cache_gid;
static int cache_group_shared;

gid_t sh_cache_gid(void)
{
    struct stat st;
    /* a vfork child reading an undecided cache (sh_cache_peek): the directory's own group, found again */
    if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != 2 && sh_in_vfork() && sh_r.stat(sh_cache, &st) == 0)
        return st.st_gid;
    return cache_gid;
}

int sh_trusted_file(int fd, const char *what)
{
    struct stat st;
    uid_t me = geteuid();
    const char *why = NULL;
    if (sh_r.fstat(fd, &st) < 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_mode & S_IWOTH)
        why = "writable by others";
    else if (st.st_uid != me && st.st_uid != 0 && !(cache_group_shared && st.st_gid == cache_gid))
        why = cache_group_shared ? "owned by another user, outside the cache's group"
                                 : "owned by another user, in a private cache";
    else if ((st.st_mode & S_IWGRP) && st.st_gid != cache_gid && st.st_uid != 0)
        why = "writable by a group other than the cache's";
    if (!why)
        return 1;
    sh_log(0, "%s: %s: not trusted, not read", what, why);
    return 0;
}

int sh_may_serve(int fd, const struct stat *dir, unsigned long long size, const char *what, int level)
{
    return sh_may_serve_as(fd, dir, size, what, level, NULL, NULL, NULL);
}

int sh_may_serve_as(int fd, const struct stat *dir, unsigned long long size, const char *what, int level,
                    const char *hex, const char *key, int *again)
{
    if (again)
        *again = 0;
    if (!sh_verify_foreign)
        return sh_trusted_file(fd, what);
    struct stat st = {0};
    uid_t me = geteuid();
    const char *why = sh_r.fstat(fd, &st) < 0 ? strerror(errno)
                      : !dir                     ? "its directory is not known"
                                                 : hfs3_serve_dir_refusal(dir, me);
    if (!why)
        why = hfs3_serve_refusal(&st, me, size);
    /* verified as this very name (issue 44): the stamp on the inode, read through the descriptor served */
    char boot[37];
    int stamp = HFS3_STAMP_OK;
    if (!why)
        why = !hex ? "no name to check its stamp against"
                   : hfs3_stamp_refusal(fd, dir, hex, key, sh_boot_id(boot) == 0 ? boot : NULL, &stamp);
    /* installed under another boot: on disk unless its record (record_ok, the caller's) says otherwise, where
     * nobody but the file's owner or root can have removed that record: unflushed/ theirs, sticky (lib/durable.c
     * hfs3_unflushed_trusted); a member's unflushed/ could have lost a crash's record (issue 44 item 4) */
    struct stat us;
    SH_SCRATCH(t);
    if (why && stamp == HFS3_STAMP_BOOT && (size_t)snprintf(t->a, SH_SCR, "%s/unflushed", sh_cache) < SH_SCR &&
        sh_r.lstat(t->a, &us) == 0 && S_ISDIR(us.st_mode) && (us.st_uid == st.st_uid || us.st_uid == 0) &&
        !(us.st_mode & S_IWOTH) && (!(us.st_mode & S_IWGRP) || (us.st_mode & S_ISVTX))) {
        why = NULL;
        stamp = HFS3_STAMP_OK;
    }
    if (why && again && stamp != HFS3_STAMP_OK && stamp != HFS3_STAMP_UNSUP && st.st_uid == me)
        *again = 1;
    if (!why)
        return 1;
    sh_log(level, "%s: %s (owner uid %u, mode %04o, %lu links): not served (HFS3_VERIFY_FOREIGN=1)", what, why,
           (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned long)st.st_nlink);
    return 0;
}

/* decide() and then the real path (what /proc/self/fd and getcwd show), the group of a shared cache */
static int decide_all(void)
{
    int rc = decide();
    struct stat st;
    if (rc == 0 && sh_r.stat(sh_cache, &st) == 0) {
        cache_gid = st.st_gid;
        cache_group_shared = (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
    }
    SH_SCRATCH(t);
    char *tmp = t->a;
    if (rc == 0 && sh_r.realpath(sh_cache, tmp) && strlen(tmp) < sizeof sh_cache_real)
        memcpy(sh_cache_real, tmp, strlen(tmp) + 1);
    return rc;
}

int sh_cache_ready(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 2)
        return 0;
    if (s == 3 || sh_in_vfork())
        return -EIO;
    int z = 0;
    if (__atomic_compare_exchange_n(&state, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        int cs;   /* no cancellation while the state is 1 (mount.c's load_now) */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
        int rc = decide_all();
        __atomic_store_n(&state, rc == 0 ? 2 : 3, __ATOMIC_RELEASE);
        pthread_setcancelstate(cs, NULL);
        return rc;
    }
    long wait = 0;
    while ((s = __atomic_load_n(&state, __ATOMIC_ACQUIRE)) == 1) {
        sh_poll_wait(&wait);
    }
    return s == 2 ? 0 : -EIO;
}

/* See shim.h. check_dir's verdict on an existing directory, read only: no mkdir, no fallback, no log, no global
 * written (a vfork child shares the parent's memory, and its descriptors are not the parent's). */
int sh_cache_peek(void)
{
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 2)
        return 0;
    if (s == 3 || no_default || start_error[0])
        return -EIO;
    struct stat st;
    uid_t me = geteuid();
    if (sh_r.stat(sh_cache, &st) < 0 || !S_ISDIR(st.st_mode) || (st.st_uid != me && st.st_uid != 0) ||
        (st.st_mode & S_IWOTH))
        return -EIO;
    int shared = (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
    return st.st_uid == me || shared ? 0 : -EIO;
}

void sh_cache_after_fork(void)
{
    /* a decision interrupted by fork in another thread would never finish in the child */
    int one = 1;
    __atomic_compare_exchange_n(&state, &one, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* HFS3_VERIFY_FOREIGN=1 in a shared cache: the mount's directory is the user's own (include/hfs3/ownkey.h, the
 * helper's rule): the predictable mounts/<key> while it is free or the user's, else the user's own directory of
 * the other shape, found (or made) here as the helper finds it. A member who took the predictable name first then
 * costs the user one listing of mounts/ per process, never the mount. Called by a mount's load before its
 * directory is used (m->key and m->dir change only then); errno preserved. */
void sh_mount_ownkey(struct sh_mount *m)
{
    if (!sh_verify_foreign || !sh_cache_shared() || sh_in_vfork())
        return;
    int e = errno;
    SH_SCRATCH(t);
    if ((size_t)snprintf(t->a, SH_SCR, "%s/mounts", sh_cache) >= SH_SCR)
        goto out;
    int mfd = sh_cache_open(t->a, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    if (mfd < 0 && errno == ENOENT && sh_mkdirs(t->a) == 0)
        mfd = sh_cache_open(t->a, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    if (mfd < 0)
        goto out;
    char key[17];
    int rc = hfs3_ownkey(mfd, m->remote, (unsigned)geteuid(), 1, 03770, t->b, SH_SCR, key);
    /* a member's names in it (a directory at lock, which the shim's lock would refuse before any helper runs) */
    int kd = rc < 0 ? -1 : (int)syscall(SYS_openat, mfd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
                                                             O_CLOEXEC);
    struct stat kst;
    if (kd >= 0 && sh_r.fstat(kd, &kst) == 0 && kst.st_uid == geteuid() && hfs3_ownkey_aside(kd, kst.st_uid) > 0)
        sh_log(1, "%s: %s/mounts/%s: another user's entries moved out of the way (HFS3_VERIFY_FOREIGN=1)", m->path,
               sh_cache, key);
    if (kd >= 0)
        sh_r.close(kd);
    sh_r.close(mfd);
    if (rc == 1 && (size_t)snprintf(t->c, SH_SCR, "%s/mounts/%s", sh_cache, key) < sizeof m->dir) {
        sh_log(1, "%s: %s is another user's: using your own %s (HFS3_VERIFY_FOREIGN=1)", m->path, m->dir, t->c);
        memcpy(m->key, key, sizeof key);
        memcpy(m->dir, t->c, strlen(t->c) + 1);
    } else if (rc < 0) {
        sh_log(0, "%s: %s is another user's and no directory of your own could be made beside it (%s): ask root "
               "to remove it", m->path, m->dir, strerror(-rc));
    }
out:
    errno = e;
}
