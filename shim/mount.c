/* mount.c - a mount's index: refreshed through the helper when missing or older than the TTL, checked, mapped
 * read-only once per process; a mount without a valid index is "broken" (its root is an empty dir, EIO below). */
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

/* --- mounts ------------------------------------------------------------------------------------------ */

struct fresh {
    const char *index;   /* or a hub's repos */
    long long seen;   /* the index's stamp before waiting for the lock (0: there was none) */
    const char *dir;  /* CACHE/mounts/<key> */
    long ttl;
};

/* HFS3_VERIFY_FOREIGN=1 and dir's index or manifest.json could have been written by someone else: another
 * user's (not root's), writable by its group or others, or with a second name; or dir (the user's own mount
 * directory, include/hfs3/index.h's hfs3_mountkey_as) is not the user's, or lets others replace what is in it
 * (shared and not sticky) - lib/cache.c's rule */
static int index_foreign(const char *dir)
{
    if (!sh_verify_foreign)
        return 0;
    SH_SCRATCH(t);
    uid_t me = geteuid();
    struct stat st;
    if (sh_r.lstat(dir, &st) == 0 &&
        (!S_ISDIR(st.st_mode) || st.st_uid != me || ((st.st_mode & S_IWGRP) && !(st.st_mode & S_ISVTX))))
        return 1;
    /* mounts/ itself: its owner may rename anything in it, sticky or not (swap two of this user's mounts) */
    snprintf(t->a, SH_SCR, "%s/mounts", sh_cache);
    if (sh_r.lstat(t->a, &st) == 0 && st.st_uid != me && st.st_uid != 0)
        return 1;
    static const char *const names[] = {"index", "manifest.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(t->a, SH_SCR, "%s/%s", dir, names[i]);
        if (sh_r.lstat(t->a, &st) == 0 && ((st.st_uid != me && st.st_uid != 0) ||
                                           (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_nlink != 1))
            return 1;
    }
    return 0;
}

static long long stamp_of(const struct stat *st)
{
    return st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec + st->st_ino;
}

/* With the mount lock held: 1 when whoever held it before us just installed an index (ten processes starting
 * at once make one manifest request, not ten in a row), or it is fresh by the TTL. */
static int index_fresh(const void *arg)
{
    const struct fresh *f = arg;
    struct stat st;
    if (sh_r.stat(f->index, &st) < 0 || index_foreign(f->dir))
        return 0;
    time_t now = time(NULL);
    return stamp_of(&st) != f->seen || (now - st.st_mtime < f->ttl && now >= st.st_mtime);
}

/* The helper's _index for m under the mount lock (load()); idx is the path of what ages (index, or a hub's
 * repos), st its stat when there is one. 1 when the helper refused the cached index: -EINTR, a signal, leaves
 * what is cached in use (or the mount broken for this process); so do a helper that could not run at all (not
 * installed, a read-only cache) and one that could not resolve the REMOTE here (exit 2: a server need not
 * define a spelling it has cached). Refused: it exited 3 (hfs3_mount_refused: an endpoint changed, a cache rule
 * broken), or 1 with an error it wrote into mounts/K/error during this run (it never does so while it falls back
 * to a cached manifest it accepts). The exit status alone decides a refusal: the error file may be unwritable
 * (a read-only cache, a full disk, a member's file in the sticky mount directory). *mkerr and why: the mkdir of mounts/K that failed, if one did. */
static int run_index(struct sh_mount *m, const char *idx, const struct stat *st, long ttl, int *mkerr, char *why,
                     int *lrc)
{
    SH_SCRATCH(t);
    char *lk = t->a;
    *mkerr = sh_mkdirs_why(m->dir, why, SH_SCR);
    snprintf(lk, SH_SCR, "%s/lock", m->dir);
    char *argv[] = {NULL, "_index", "--lock-fd", "3", m->remote, NULL};
    /* with a cached index the helper itself warns (once) when it has to fall back to it; offline, only an
     * index installed while we waited (its stamp changed) spares the check */
    struct fresh f = {idx, st ? stamp_of(st) : 0, m->dir, sh_offline ? 0 : ttl};
    struct sh_lockjob j = {lk, index_fresh, &f, argv, !st, NULL, NULL, NULL, 0, 0, NULL};
    sh_log(2, !sh_offline ? "%s: refreshing the manifest of %s" :
           st ? "%s: checking that %s still resolves to the endpoint of its cached manifest" :
           "%s: no manifest cached for %s: looking for one under another spelling", m->path, m->remote);
    time_t t0 = time(NULL);
    int rc = sh_run_locked(&j);
    if (lrc)
        *lrc = rc;
    if (rc == -ETIMEDOUT)
        sh_log(0, "%s: the manifest of %s did not come in %ld s (HFS3_STALL_TIMEOUT)", m->path, m->remote,
               sh_stall);
    struct stat est;
    snprintf(lk, SH_SCR, "%s/error", m->dir);
    return st && (rc == 3 || (rc == 1 && sh_r.stat(lk, &est) == 0 && est.st_mtime >= t0 - 1));
}

/* An index a vfork child mapped offline without the helper's check (vfork_map): the first call outside the child
 * runs the check, as load() would have; refused, the mount is broken from now on (the mapping stays: a thread may
 * already hold pointers into it). Called with the state taken (1). */
static void check_now(struct sh_mount *m)
{
    int cs;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
    sh_sig_hold();
    SH_SCRATCH(t);
    char *p = t->a, *why = t->b;
    struct stat st;
    int mkerr = 0;
    snprintf(p, SH_SCR, "%s/index", m->dir);
    if (sh_r.stat(p, &st) == 0 && run_index(m, p, &st, sh_ttl, &mkerr, why, NULL))
        __atomic_store_n(&m->broken, 1, __ATOMIC_RELEASE);   /* the helper said why, on its stderr */
    __atomic_store_n(&m->check_due, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&m->state, 2, __ATOMIC_RELEASE);
    pthread_setcancelstate(cs, NULL);
    sh_sig_release();   /* a handler held back runs now, with the mount loaded */
}

static int sub_quiet(const struct sh_mount *m);

/* errnos of a load that may pass, the process's own: its descriptors or memory, a signal */
#define LOAD_LOCAL_ERR(e) ((e) == EMFILE || (e) == ENFILE || (e) == ENOMEM || (e) == EAGAIN || (e) == EINTR)

/* The level of a load's failure line: 0 the first time for m, 2 (info) for the loads tried again after it */
static int told(struct sh_mount *m)
{
    return __atomic_exchange_n(&m->told, 1, __ATOMIC_RELAXED) ? 2 : 0;
}

static void load(struct sh_mount *m)
{
    SH_SCRATCH(t);
    char *p = t->a, *lk = t->b, *why = t->c;
    why[0] = 0;
    if (sh_cache_ready() < 0) {
        m->broken = 1;   /* logged once by sh_cache_ready, or here: which mkdir failed */
        const char *d;
        int e = sh_cache_mkdir_error(&d);
        if (e)
            sh_log(0, "%s: cache %s cannot be created: mkdir %s: %s (set HFS3_CACHE_DIR to a directory you can "
                   "create)", m->path, sh_cache, d, strerror(e));
        return;
    }
    int mkerr = 0;
    sh_mount_ownkey(m);
    snprintf(p, SH_SCR, "%s/index", m->dir);
    struct stat st;
    int have = sh_r.stat(p, &st) == 0;
    long ttl = sh_ttl;
    if (!have && !m->sub) {   /* a hub (hub.c): its repository list is what ages, by HFS3_HUB_TTL */
        snprintf(p, SH_SCR, "%s/repos", m->dir);
        if ((have = sh_r.stat(p, &st) == 0))
            ttl = sh_hub_ttl;
        else
            snprintf(p, SH_SCR, "%s/index", m->dir);
    }
    time_t now = time(NULL);
    /* HFS3_VERIFY_FOREIGN=1: an index or manifest.json another user (not root) wrote is stale whatever its age:
     * _index fetches the manifest whole and installs this user's own */
    int foreign = have && index_foreign(m->dir);
    if (foreign && sh_offline) {
        sh_log(0, "%s: the cached manifest of %s is another user's, HFS3_VERIFY_FOREIGN=1 and HFS3_OFFLINE=1: not "
               "used", m->path, m->remote);
        m->broken = 1;
        return;
    }
    /* HFS3_OFFLINE=1: the helper runs once per mount and process, without the network: with nothing cached to
     * look for the same endpoint + bucket + prefix cached under another spelling of the REMOTE
     * (mounts/K/canonical); with an index cached to check that the REMOTE still resolves to the endpoint its
     * manifest came from (rclone.conf or AWS_ENDPOINT_URL may have changed since) */
    int said_no = 0, lrc = 0;
    if (sh_offline || !have || foreign || now - st.st_mtime >= ttl || now < st.st_mtime)
        said_no = run_index(m, p, have ? &st : NULL, ttl, &mkerr, why, &lrc);
    m->broken = 1;
    snprintf(p, SH_SCR, "%s/index", m->dir);
    int fd = said_no ? -1 : sh_cache_open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
    int oe = fd < 0 ? errno : 0;
    int refused = fd < 0 && errno == ELOOP && !said_no;
    if (refused)
        sh_log(0, "%s: a symlink: not trusted, not read", p);
    if (fd >= 0 && !sh_trusted_file(fd, p)) {
        sh_r.close(fd);
        fd = -1;
        refused = 1;
    }
    /* HFS3_VERIFY_FOREIGN=1: still not this user's after the helper ran (it refused, or failed): never mapped */
    if (fd >= 0 && sh_verify_foreign &&
        (index_foreign(m->dir) || sh_r.fstat(fd, &st) < 0 || (st.st_uid != geteuid() && st.st_uid != 0) ||
         (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_nlink != 1)) {
        sh_log(0, "%s: %s could have been written by another user and HFS3_VERIFY_FOREIGN=1: not used", m->path, p);
        sh_r.close(fd);
        fd = -1;
        refused = 1;
    }
    if (fd >= 0 && sh_r.fstat(fd, &st) == 0 && st.st_size > 0) {
        void *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base != MAP_FAILED && hfs3_index_check(base, (size_t)st.st_size)) {
            m->ix = base;
            m->ixlen = (size_t)st.st_size;
            m->ents = (const void *)((const char *)base + m->ix->entries_off);
            m->kids = (const void *)((const char *)base + m->ix->children_off);
            m->strs = (const char *)base + m->ix->strings_off;
            m->mtime = st.st_mtime;
            __atomic_store_n(&m->broken, 0, __ATOMIC_RELEASE);   /* after the rest: retry_due reads it */
        } else if (base != MAP_FAILED) {
            munmap(base, (size_t)st.st_size);
            sh_log(0, "%s: %s: not a valid index", m->remote, p);
        }
    }
    if (fd >= 0)
        sh_r.close(fd);
    snprintf(lk, SH_SCR, "%s/tree", m->dir);
    int hub = m->broken && !refused && !said_no && sh_hub_load(m);
    /* no index, not a hub, for a reason that may pass (issue 41): no descriptor or memory for the lock, the helper
     * or the index (the call gets the errno, the next one loads again), or the helper's own failure with nothing
     * cached, a network error or a stall (loaded again by a call SH_RETRY_S later). Never remembered for the life
     * of the process; a refusal, an index not valid or not trusted is. */
    int local = 0;
    if (m->broken && !hub && !refused && !said_no) {
        local = LOAD_LOCAL_ERR(oe) ? -oe : LOAD_LOCAL_ERR(-lrc) ? lrc : 0;
        if (local || (lrc > 0 && lrc != 3) || lrc == -ETIMEDOUT)
            __atomic_store_n(&m->retry, local ? local : 1, __ATOMIC_RELEASE);
    }
    if (hub) {
        sh_mkdirs(lk);   /* a hub: its root is its skeleton, its repositories sub-mounts */
    } else if (m->broken && !refused && mkerr < 0 && why[0]) {
        sh_log(0, "%s: cache %s cannot be created: mkdir %s: %s (set HFS3_CACHE_DIR to a directory you can "
               "create)", m->path, sh_cache, why, strerror(-mkerr));
    } else if (m->broken && !refused && local) {
        /* not "none cached": the index may well be there (issue 41: "HFS3_OFFLINE=1 and none cached" with one
         * descriptor left) */
        static int said;   /* once per process at the default level: a shortage may last many calls */
        sh_log(__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED) ? 2 : 1,
               "%s: cannot load the manifest of %s now: %s (tried again at the next call)", m->path, m->remote,
               strerror(-local));
    } else if (m->broken && !refused) {
        snprintf(p, SH_SCR, "%s/error", m->dir);
        sh_read_line(p, why, 512);
        /* a hub's repository after the hub's first failure: counted (said at exit, hub.c), not logged */
        if (said_no || sub_quiet(m))
            ;   /* the helper said why on its stderr, kept with an index cached: one line, not two */
        else if (why[0])   /* the helper's line names the remote */
            sh_log(told(m), "%s: %s", m->path, why);
        else if (sh_offline)
            sh_log(told(m), "%s: no manifest for %s: HFS3_OFFLINE=1 and none cached: run hfs3-manifest fetch %s "
                   "online with HFS3_CACHE_DIR=%s first", m->path, m->remote, m->remote, sh_cache);
        else
            sh_log(told(m), "%s: no manifest for %s: no index in the cache", m->path, m->remote);
        sh_mkdirs(lk);
    }
    if (sh_r.stat(lk, &st) == 0 || sh_r.stat(sh_cache, &st) == 0)
        m->dev = st.st_dev;
}

/* 0 once m is loaded (maybe broken); -EAGAIN in a vfork child that finds it not loaded. */
/* A hub's repository that had no manifest when first looked at (its files uploaded, `build` not run yet) is
 * looked at again once HFS3_HUB_TTL has passed, as a repository new in the hub's list would be. A mount that
 * loaded an index is never reloaded: other threads hold pointers into its mapping. */
static int retry_due(const struct sh_mount *m)
{
    if (!__atomic_load_n(&m->broken, __ATOMIC_ACQUIRE))
        return 0;
    int r = __atomic_load_n(&m->retry, __ATOMIC_ACQUIRE);
    long now = (long)time(NULL), at = __atomic_load_n(&m->loaded_at, __ATOMIC_RELAXED);
    if (r < 0)
        return 1;   /* a local failure that may pass (issue 41): at the next call */
    if (r > 0 && (now - at >= SH_RETRY_S || now < at))
        return 1;
    if (!m->sub)
        return 0;
    return now - at >= sh_hub_ttl || now < at;
}

/* Cancellation stays off while the state is 1: a thread cancelled inside load() (nanosleep, waitpid and
 * sigtimedwait are cancellation points) would leave it at 1, and every later call on the mount in this process
 * would wait for it forever. A pending cancel acts at the caller's next cancellation point. */
static void load_now(struct sh_mount *m)
{
    int cs;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
    sh_sig_hold();
    __atomic_store_n(&m->check_due, 0, __ATOMIC_RELAXED);   /* load() checks (a fork during check_now: state 0) */
    __atomic_store_n(&m->retry, 0, __ATOMIC_RELAXED);
    load(m);
    __atomic_store_n(&m->loaded_at, (long)time(NULL), __ATOMIC_RELAXED);
    __atomic_store_n(&m->state, 2, __ATOMIC_RELEASE);
    pthread_setcancelstate(cs, NULL);
    sh_sig_release();   /* a handler held back runs now, with the mount loaded */
}

/* A hub's repository loaded on a private copy (hub.c's hub_sub), before it has a slot: 0 with an index, -1
 * broken (no slot is taken for it). Cancellation off as in load_now. */
int sh_mount_probe(struct sh_mount *m)
{
    int cs;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
    sh_sig_hold();
    __atomic_store_n(&m->state, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&m->retry, 0, __ATOMIC_RELAXED);
    load(m);
    __atomic_store_n(&m->loaded_at, (long)time(NULL), __ATOMIC_RELAXED);
    __atomic_store_n(&m->state, 2, __ATOMIC_RELEASE);
    pthread_setcancelstate(cs, NULL);
    sh_sig_release();   /* a handler held back runs now, with the mount loaded */
    return __atomic_load_n(&m->broken, __ATOMIC_ACQUIRE) ? -1 : 0;
}

/* A repository of a hub that failed to load: 1 when it is not the hub's first in this process (not logged: the
 * count is, at exit, hub.c). */
static int sub_quiet(const struct sh_mount *m)
{
    return m->sub && __atomic_add_fetch(&sh_mounts[m->hubm].sub_failed, 1, __ATOMIC_ACQ_REL) > 1;
}

/* A vfork child (subprocess(cwd=M/dirlink) before the parent looked at the mount): a cached index that needs no
 * refresh (HFS3_OFFLINE=1, or younger than the TTL), that no one else could have written (load()'s rule), is mapped
 * as load() maps it, with no lock, helper, log line or allocation; the child shares the parent's memory, so the
 * parent finds the mount loaded. Offline, load() would first have the helper check the index's endpoint: the child
 * skips that (it only changes directory and execs, and the program it runs loads and checks the mount itself),
 * but the parent, sharing its memory, must not inherit an unchecked index: check_due makes its next touch of the
 * mount run the check (check_now). Every system call comes before the mount is claimed, and the claim, the fields
 * and the release follow with none in between. 0 once loaded, -EAGAIN when it cannot be done here. */
static int vfork_map(struct sh_mount *m)
{
    if (m->sub || __atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 0)
        return -EAGAIN;
    SH_SCRATCH(t);
    struct stat st, dst;
    if ((size_t)snprintf(t->a, SH_SCR, "%s/index", m->dir) >= SH_SCR)
        return -EAGAIN;
    snprintf(t->b, SH_SCR, "%s/tree", m->dir);
    int fd = sh_r.open(t->a, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -EAGAIN;
    time_t now = time(NULL);
    uid_t me = geteuid();
    void *base = MAP_FAILED;
    if (sh_r.fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == me || st.st_uid == 0) &&
        !(st.st_mode & (S_IWGRP | S_IWOTH)) && st.st_nlink == 1 && st.st_size > 0 && sh_r.stat(t->b, &dst) == 0 &&
        !(sh_verify_foreign && index_foreign(m->dir)) &&
        (sh_offline || (now - st.st_mtime < sh_ttl && now >= st.st_mtime)))
        base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    sh_r.close(fd);
    if (base == MAP_FAILED)
        return -EAGAIN;
    int z = 0;
    if (!hfs3_index_check(base, (size_t)st.st_size) ||
        !__atomic_compare_exchange_n(&m->state, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        munmap(base, (size_t)st.st_size);
        return __atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == 2 ? 0 : -EAGAIN;
    }
    m->ix = base;
    m->ixlen = (size_t)st.st_size;
    m->ents = (const void *)((const char *)base + m->ix->entries_off);
    m->kids = (const void *)((const char *)base + m->ix->children_off);
    m->strs = (const char *)base + m->ix->strings_off;
    m->mtime = st.st_mtime;
    m->dev = dst.st_dev;
    __atomic_store_n(&m->check_due, sh_offline, __ATOMIC_RELAXED);
    __atomic_store_n(&m->broken, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&m->loaded_at, (long)now, __ATOMIC_RELAXED);
    __atomic_store_n(&m->state, 2, __ATOMIC_RELEASE);
    return 0;
}

/* After a load: its local failure that may pass (-EMFILE...: the call that waited for it gets it, as the kernel's
 * own call short of descriptors would), else 0 */
static int load_err(const struct sh_mount *m)
{
    int r = __atomic_load_n(&m->retry, __ATOMIC_ACQUIRE);
    return r < 0 ? r : 0;
}

int sh_mount_get(struct sh_mount *m)
{
    if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == 2) {
        int two = 2;
        if (__builtin_expect(__atomic_load_n(&m->check_due, __ATOMIC_RELAXED), 0) && !sh_in_vfork()) {
            /* the thread that wins checks; the others wait for it (nothing is served unchecked) */
            if (__atomic_compare_exchange_n(&m->state, &two, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                if (__atomic_load_n(&m->check_due, __ATOMIC_RELAXED))
                    check_now(m);
                else
                    __atomic_store_n(&m->state, 2, __ATOMIC_RELEASE);   /* checked meanwhile */
            }
            long wait = 0;
            while (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2)
                sh_poll_wait(&wait);
            return 0;
        }
        /* the thread that wins reloads; the others wait for it below, or answer from the broken mount */
        if (__builtin_expect(retry_due(m), 0) && !sh_in_vfork() &&
            __atomic_compare_exchange_n(&m->state, &two, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            load_now(m);
            return load_err(m);
        }
        return 0;
    }
    if (sh_in_vfork())
        return vfork_map(m);
    int z = 0;
    if (__atomic_compare_exchange_n(&m->state, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        load_now(m);
        return load_err(m);
    }
    long wait = 0;
    while (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != 2) {
        sh_poll_wait(&wait);
    }
    return load_err(m);
}

