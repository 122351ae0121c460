/* cmd_fetch.c - `fetch REMOTE` (warm the cache, with progress) and the shim's helper commands `_index`,
 * `_get` and `_prefetch` (docs/internals.md). Argument handling, ordering and printing only: the cache
 * rules and the mount refresh are lib/cache.c's, the download lib/fetch.c's. */
#include "cmds.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hfs3/cache.h"
#include "hfs3/config.h"
#include "hfs3/durable.h"
#include "hfs3/explain.h"
#include "hfs3/fetch.h"
#include "hfs3/gc.h"
#include "hfs3/hub.h"
#include "hfs3/index.h"
#include "hfs3/log.h"
#include "hfs3/manifest.h"
#include "hfs3/progress.h"
#include "hfs3/util.h"

static void errline(const char *msg) { cmd_err("%s", msg); }

/* The shim hands us a clean descriptor table but other callers may not: an inherited descriptor (a
 * pipe the caller waits on to close) must not live as long as a background fetch. */
static void close_other_fds(int keep)
{
    /* a caller may also have spawned us with 0-2 closed: the next files we open would take those numbers
     * and an error message would land in a blob's temp file */
    for (;;) {
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0)
            break;
        if (fd > 2) {
            close(fd);
            break;
        }
        fcntl(fd, F_SETFD, 0);
    }
    if (keep < 3) {
        if (close_range(3, ~0U, 0) == 0)
            return;
    } else if ((keep == 3 || close_range(3, (unsigned)keep - 1, 0) == 0) &&
               close_range((unsigned)keep + 1, ~0U, 0) == 0) {
        return;
    }
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
        if (fd != keep)
            close((int)fd);
}

/* Parses a leading "--lock-fd N"; returns the index of the first positional argument or -1. */
static int parse_lock_fd(int argc, char **argv, int *lock_fd)
{
    *lock_fd = -1;
    int i = 1;
    const char *val = NULL;
    if (i < argc && !strcmp(argv[i], "--lock-fd")) {
        if (i + 1 >= argc)
            return -1;
        val = argv[i + 1];
        i += 2;
    } else if (i < argc && !strncmp(argv[i], "--lock-fd=", 10)) {
        val = argv[i++] + 10;
    }
    if (val) {
        char *end;
        long v = strtol(val, &end, 10);
        if (!*val || *end || v < 0 || v > 1 << 20)
            return -1;
        *lock_fd = (int)v;
    }
    /* a descriptor that is not open holds no lock: take it ourselves */
    if (*lock_fd >= 0 && fcntl(*lock_fd, F_GETFD) < 0)
        *lock_fd = -1;
    return i;
}

/* Opens the cache: 0, or the exit status after printing why: 1 when the cache's rules refuse it (a
 * directory or file another user could have subverted), 2 when none is configured or it cannot be made. */
static int open_cache(hfs3_cache **c)
{
    int rc = hfs3_cache_open(NULL, c);
    if (rc < 0) {
        errline(hfs3_errmsg());
        return rc == -EPERM || rc == -ELOOP || rc == -ENOTDIR ? 1 : 2;
    }
    return 0;
}

/* The cached manifest of the mount; when none is cached (or it is unreadable), a refresh first. */
static int load_manifest(const hfs3_cache *c, const char *spec, hfs3_remote **r, hfs3_manifest **m)
{
    int rc = hfs3_mount_load(c, spec, m);
    if (rc == 0)
        return 0;
    if (!*r && hfs3_remote_parse(spec, r) < 0)
        return -EINVAL;
    if ((rc = hfs3_mount_refresh(c, *r, -1, NULL)) < 0)
        return rc;
    return hfs3_mount_load(c, spec, m);
}

/* Whether files with chunk digests are checked chunk by chunk as they arrive, into the mount's cblobs/ (moved
 * into blobs/ by the flush once their sha256 matched: lib/fetch.c), rather than verified whole before the install.
 * HFS3_VERIFY=chunks or whole; unset: dflt (chunks for the shim's loads, whole for `fetch`, which warms the
 * shared blobs/ for every model). */
static int verify_chunks(int dflt)
{
    const char *v = getenv("HFS3_VERIFY");
    if (v && !strcmp(v, "chunks"))
        return 1;
    if (v && !strcmp(v, "whole"))
        return 0;
    if (v && *v)
        hfs3_warn("HFS3_VERIFY=%s is neither chunks nor whole; ignored", v);
    return dflt;
}

static int fetch_entry(const hfs3_cache *c, const hfs3_remote *r, const hfs3_manifest *m, const hfs3_entry *e,
                       const hfs3_fetch_opts *o, hfs3_fetch_result *res, int chunks)
{
    char *key = hfs3_remote_key(r, e->path);
    if (!key)
        return hfs3_err(-ENOMEM, "out of memory");
    char mkey[17];
    /* the mount whose manifest vouches for the chunk digests: the user's own under HFS3_VERIFY_FOREIGN=1, where the
     * shim looks (include/hfs3/index.h) */
    if (hfs3_cache_mount_key(c, r->spec, 1, mkey) < 0) {
        free(key);
        return -EPERM;
    }
    hfs3_fetch_file f = {e->path, key, e->size, e->sha256, e->etag, e->chunks ? m->chunk_size : 0, e->chunks,
                         chunks ? mkey : NULL, c->verify_foreign ? mkey : NULL};
    int rc = hfs3_fetch(c, r, &f, o, res);
    if (rc < 0 && rc != -EWOULDBLOCK)
        hfs3_explain_s3(r, key, rc); /* the remote, and what to do (fails/<sha>.err keeps fetch.c's line) */
    free(key);
    return rc;
}

/* Whether a fetched file is in the cache: blobs/<sha256>, or (chunk-checked, not yet promoted by the flush) the
 * mount's cblobs/<sha256>. Only for the check at the end of `fetch`, which names what went missing. */
static int entry_cached(const hfs3_cache *c, const char *mkey, const char *sha)
{
    struct stat st;
    if (fstatat(c->blobs, sha, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return 1;
    char rel[17 + 8 + 65];
    if (!mkey || snprintf(rel, sizeof rel, "%s/cblobs/%s", mkey, sha) >= (int)sizeof rel)
        return 0;
    return fstatat(c->mounts, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int cmd_index(int argc, char **argv)
{
    int lock_fd;
    int i = parse_lock_fd(argc, argv, &lock_fd);
    if (i < 0 || argc - i != 1) {
        fprintf(stderr, "usage: hfs3-manifest _index [--lock-fd N] REMOTE\n");
        return 2;
    }
    close_other_fds(lock_fd);
    const char *spec = argv[i];
    hfs3_cache *c = NULL;
    int oc = open_cache(&c);
    if (oc)
        return oc;
    hfs3_remote *r = NULL;
    int status = 0;
    if (hfs3_remote_parse(spec, &r) < 0 && hfs3_env_bool("HFS3_OFFLINE", 0) && hfs3_mount_cached(c, spec)) {
        /* offline, a REMOTE not defined here (a server need not define it) with what its very spelling
         * cached: there is no endpoint to compare that manifest's canonical with, so it is used */
        hfs3_debug("%s: cannot be resolved here (%s); HFS3_OFFLINE=1: using what is cached under this spelling",
                   spec, hfs3_errmsg());
    } else if (!r) {
        if (hfs3_env_bool("HFS3_OFFLINE", 0)) {
            /* offline with nothing cached under this spelling: say that first */
            char why[1024];
            snprintf(why, sizeof why, "%s", hfs3_errmsg());
            hfs3_err(-EINVAL, "%s: HFS3_OFFLINE=1 and no cached manifest for it, and it cannot be resolved here to "
                     "look for one cached under another REMOTE (%s): run hfs3-manifest fetch %s online with "
                     "HFS3_CACHE_DIR=%s first, or define the remote here", spec, why, spec, c->dir);
        }
        errline(hfs3_errmsg());
        hfs3_mount_set_error(c, spec, hfs3_errmsg());
        status = 2;
    } else if (hfs3_mount_refresh(c, r, lock_fd, NULL) < 0) {
        errline(hfs3_errmsg());
        status = hfs3_mount_refused() ? 3 : 1; /* 3: the shim maps no index this refused */
    }
    if (lock_fd >= 0)
        close(lock_fd);
    hfs3_remote_free(r);
    hfs3_cache_free(c);
    return status;
}

/* The sha256 named by the lock file behind fd (locks/<sha>.lock), so that a failure can be reported
 * where the shim looks even when the manifest changed under it. 0 or -1. */
static int lock_fd_sha(int fd, char sha[65])
{
    char link[64], target[4200];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return -1;
    target[n] = 0;
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (strlen(base) != 64 + 5 || strcmp(base + 64, ".lock") != 0)
        return -1;
    memcpy(sha, base, 64);
    sha[64] = 0;
    return hfs3_is_sha256_hex(sha) ? 0 : -1;
}

/* A failure that says the prefix no longer holds what the manifest names (an object gone, or other bytes). */
static int is_stale(int rc) { return rc == -ENOENT || rc == -EBADMSG || rc == -ESTALE; }

/* After a stale failure of entry e (the cached manifest's): revalidates the cached manifest (a conditional GET,
 * cheap), so that a rebuild made within the TTL reaches the cache now, and rewords the error: when the manifest
 * was rebuilt, the next step is to open the file again, not to build. Offline: nothing to ask. */
static void revalidate(const hfs3_cache *c, const hfs3_remote *r, const hfs3_entry *e)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", hfs3_errmsg());
    hfs3_manifest *nm = NULL;
    int stale = 0;
    if (hfs3_env_bool("HFS3_OFFLINE", 0) || hfs3_mount_refresh(c, r, -1, &stale) < 0 || stale ||
        hfs3_mount_load(c, r->spec, &nm) < 0) {
        hfs3_manifest_free(nm);
        hfs3_err(-EIO, "%s", why);
        return;
    }
    const hfs3_entry *ne = hfs3_manifest_find(nm, e->path);
    if (ne && ne->type == HFS3_SYMLINK && hfs3_manifest_resolve(nm, ne, &ne) < 0)
        ne = NULL;
    if (ne && ne->type == HFS3_FILE && !strcmp(ne->sha256, e->sha256))
        hfs3_err(-EIO, "%s", why); /* the manifest in S3 is the stale one: explain's "run build" holds */
    else
        hfs3_err(-ESTALE, "%s: %s: the manifest was rebuilt since it was cached%s; the cache has the new one now: "
                 "open it again (a running program's mounts reload it within HFS3_MANIFEST_TTL, 60 s by default; "
                 "a new program's at once)", r->spec, e->path, ne ? "" : " and no longer lists it");
    hfs3_manifest_free(nm);
}

int cmd_get(int argc, char **argv)
{
    int lock_fd;
    int i = parse_lock_fd(argc, argv, &lock_fd);
    if (i < 0 || argc - i != 2) {
        fprintf(stderr, "usage: hfs3-manifest _get [--lock-fd N] REMOTE PATH\n");
        return 2;
    }
    close_other_fds(lock_fd);
    const char *spec = argv[i], *path = argv[i + 1];
    hfs3_cache *c = NULL;
    hfs3_remote *r = NULL;
    hfs3_manifest *m = NULL;
    char lock_sha[65] = "";
    int status = 1, rc;
    if (lock_fd >= 0)
        (void)lock_fd_sha(lock_fd, lock_sha);
    if ((status = open_cache(&c)) != 0)
        goto out;
    status = 1;
    if ((rc = load_manifest(c, spec, &r, &m)) < 0) {
        status = rc == -EINVAL && !r ? 2 : 1;
        goto fail;
    }
    const hfs3_entry *e = hfs3_manifest_find(m, path);
    if (e && e->type == HFS3_SYMLINK) {
        const hfs3_entry *t = NULL;
        if ((rc = hfs3_manifest_resolve(m, e, &t)) < 0) {
            hfs3_err_wrap(rc, "%s: %s", spec, path);
            goto fail;
        }
        e = t;
    }
    if (!e || e->type != HFS3_FILE) {
        hfs3_err(-ENOENT, "%s: %s: %s in the manifest", spec, path, e ? "not a file" : "no such file");
        goto fail;
    }
    if (lock_sha[0] && strcmp(lock_sha, e->sha256) != 0) {
        hfs3_err(-ESTALE, "%s: %s: the manifest changed (now sha256 %s) since the caller loaded it: open it again "
                 "(a running program's mounts reload it within HFS3_MANIFEST_TTL, 60 s by default)", spec, path,
                 e->sha256);
        goto fail;
    }
    if (!r && hfs3_remote_parse(spec, &r) < 0) {
        status = 2;
        goto fail_sha;
    }
    hfs3_fetch_opts o = {.lock_fd = lock_fd};
    rc = fetch_entry(c, r, m, e, &o, NULL, verify_chunks(1));
    if (rc == 0) {
        status = 0;
        goto out;
    }
    if (rc == -EWOULDBLOCK) {
        errline(hfs3_errmsg());
        goto out;
    }
    if (is_stale(rc))
        revalidate(c, r, e);
    /* the caller (the shim) shows fails/<sha>.err: the worded line with the next step, not fetch.c's */
    snprintf(lock_sha, sizeof lock_sha, "%s", e->sha256);
    goto fail;
fail_sha:
    snprintf(lock_sha, sizeof lock_sha, "%s", e->sha256);
fail:
    errline(hfs3_errmsg());
    if (lock_sha[0] && c) {
        char name[80];
        snprintf(name, sizeof name, "%s.err", lock_sha);
        hfs3_cache_write_line(c, c->fails, name, c->p_fails, hfs3_errmsg());
    }
out:
    if (lock_fd >= 0)
        close(lock_fd);
    /* the caller has its answer (the lock is free): the flush goes on without it */
    if (c)
        hfs3_flush_spawn(c);
    hfs3_manifest_free(m);
    hfs3_remote_free(r);
    hfs3_cache_free(c);
    return status;
}

static int is_shard_name(const char *path)
{
    return hfs3_ends_with(path, ".safetensors") || hfs3_ends_with(path, ".bin");
}

/* Appends entry index k to order[] unless its content is already listed. */
static void order_add(const hfs3_manifest *m, size_t *order, size_t *n, unsigned char *seen, size_t k)
{
    if (seen[k])
        return;
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(m->entries[order[i]].sha256, m->entries[k].sha256)) {
            seen[k] = 1;
            return;
        }
    seen[k] = 1;
    order[(*n)++] = k;
}

/* The prefetch order: shards (*.safetensors, *.bin, also through hf-cache snapshot symlinks) in name order,
 * then every other file; each content once. Returns a malloc'd array of entry indices. */
static size_t *prefetch_order(const hfs3_manifest *m, size_t *count)
{
    size_t *order = malloc((m->n ? m->n : 1) * sizeof *order);
    unsigned char *seen = calloc(m->n ? m->n : 1, 1);
    size_t n = 0;
    if (!order || !seen) {
        free(order);
        free(seen);
        return NULL;
    }
    for (size_t k = 0; k < m->n; k++) {
        const hfs3_entry *e = &m->entries[k];
        if (!is_shard_name(e->path))
            continue;
        if (e->type == HFS3_SYMLINK) {
            const hfs3_entry *t = NULL;
            if (hfs3_manifest_resolve(m, e, &t) == 0 && t && t->type == HFS3_FILE)
                order_add(m, order, &n, seen, (size_t)(t - m->entries));
        } else if (e->type == HFS3_FILE) {
            order_add(m, order, &n, seen, k);
        }
    }
    for (size_t k = 0; k < m->n; k++)
        if (m->entries[k].type == HFS3_FILE)
            order_add(m, order, &n, seen, k);
    free(seen);
    *count = n;
    return order;
}

/* Progress of `fetch`: totals over all files, redrawn at most ten times a second. */
typedef struct fetch_progress {
    int on;
    uint64_t done, total;
    size_t files_done, files_total;
    double last;
    pthread_mutex_t mu;   /* two files are fetched at once (fetch_files) */
} fetch_progress;

static void progress_draw(fetch_progress *p, int force)
{
    if (!p->on)
        return;
    double now = hfs3_now();
    if (!force && now - p->last < 0.1)
        return;
    p->last = now;
    cmd_progress(NULL, "fetch", p->done, p->total, p->files_done, p->files_total);
}

static void progress_bytes(void *ud, uint64_t n)
{
    fetch_progress *p = ud;
    pthread_mutex_lock(&p->mu);
    p->done += n;
    progress_draw(p, 0);
    pthread_mutex_unlock(&p->mu);
}

/* The files of one manifest in order, two lanes: a file downloads alone, at the full rate (a loader waiting for
 * the next shard gets it as soon as one file can come), and the next file starts as soon as every range of the
 * previous one has started, while that one's last ranges arrive and its tail is hashed, synced and installed
 * (bench/: those gaps were a fifth of a cold fetch's wall time from nginx, and a third against a server that
 * paces each connection). */
typedef struct fetch_files {
    hfs3_cache *c;
    hfs3_remote *r;
    const hfs3_manifest *m;
    const size_t *order;
    size_t n, next, failed, stale; /* stale: failed because the prefix changed (is_stale) */
    uint64_t fetched, cached;
    fetch_progress *p;        /* its mutex guards next and the counts */
    hfs3_fetch_opts o;
    const char *prefetch;     /* _prefetch SPEC: debug lines, no error lines */
    int *pins;                /* `fetch` under a budget: each file's pin (hfs3_gc_pin), -1 none; else NULL */
    size_t npins, pin_cap;    /* pins held, and at most (descriptors left for the fetches themselves) */
    unsigned char *failed_k;  /* which files failed (reported already) */
    int chunks;               /* verify_chunks() */
    pthread_mutex_t slot_mu;  /* the download slot: which lane is downloading */
    pthread_cond_t slot_cv;
    int slot_busy;
} fetch_files;

typedef struct fetch_lane {
    fetch_files *ff;
    int holding;
} fetch_lane;

static void slot_release(void *ud)
{
    fetch_lane *l = ud;
    pthread_mutex_lock(&l->ff->slot_mu);
    if (l->holding) {
        l->holding = 0;
        l->ff->slot_busy = 0;
        pthread_cond_signal(&l->ff->slot_cv);
    }
    pthread_mutex_unlock(&l->ff->slot_mu);
}

static void slot_take(fetch_lane *l)
{
    pthread_mutex_lock(&l->ff->slot_mu);
    while (l->ff->slot_busy)
        pthread_cond_wait(&l->ff->slot_cv, &l->ff->slot_mu);
    l->ff->slot_busy = l->holding = 1;
    pthread_mutex_unlock(&l->ff->slot_mu);
}

static void *fetch_files_run(void *arg)
{
    fetch_lane *l = arg;
    fetch_files *ff = l->ff;
    fetch_progress *p = ff->p;
    hfs3_fetch_opts o = ff->o;
    o.downloaded = slot_release;
    o.downloaded_ud = l;
    for (;;) {
        slot_take(l);
        pthread_mutex_lock(&p->mu);
        size_t k = ff->next++;
        pthread_mutex_unlock(&p->mu);
        if (k >= ff->n) {
            slot_release(l);
            return NULL;
        }
        const hfs3_entry *e = &ff->m->entries[ff->order[k]];
        if (p->on) {
            pthread_mutex_lock(&p->mu);
            cmd_progress_file(e->path);   /* the one downloading now: the other lane only finishes its tail */
            pthread_mutex_unlock(&p->mu);
        }
        hfs3_fetch_result res = {0};   /* fetch_entry can fail before hfs3_fetch fills it */
        /* pinned before its fetch: a later file's room is never made by removing it (make_room skips this
         * process's pins), nor by another process's gc. Without a pin (out of descriptors) the check at the
         * end still says when it went. */
        if (ff->pins && __atomic_load_n(&ff->npins, __ATOMIC_ACQUIRE) < ff->pin_cap &&
            (ff->pins[k] = hfs3_gc_pin(ff->c, e->sha256)) >= 0)
            __atomic_add_fetch(&ff->npins, 1, __ATOMIC_ACQ_REL);
        int rc = fetch_entry(ff->c, ff->r, ff->m, e, &o, &res, ff->chunks);
        slot_release(l);   /* cached, failed, or never downloaded here */
        if (rc < 0 && ff->failed_k)
            ff->failed_k[k] = 1;
        pthread_mutex_lock(&p->mu);
        if (ff->prefetch) {
            if (rc == -EWOULDBLOCK)
                hfs3_debug("_prefetch %s: %s is being fetched by another process", ff->prefetch, e->path);
            else if (rc < 0)
                hfs3_debug("_prefetch: %s", hfs3_errmsg());
            else if (!res.cached)
                hfs3_debug("_prefetch %s: fetched %s", ff->prefetch, e->path);
        } else if (rc < 0) {
            if (p->on)
                cmd_progress_clear();
            errline(hfs3_errmsg());
            ff->failed++;
            ff->stale += is_stale(rc);
        } else if (res.cached) {
            ff->cached += e->size;
            p->done += e->size;
        } else {
            ff->cached += res.bytes_resumed;
        }
        ff->fetched += res.bytes_fetched;
        p->files_done++;
        progress_draw(p, 1);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Runs ff over its files in two lanes (one when there is one file). */
static void fetch_files_all(fetch_files *ff)
{
    pthread_mutex_init(&ff->slot_mu, NULL);
    pthread_cond_init(&ff->slot_cv, NULL);
    fetch_lane a = {ff, 0}, b = {ff, 0};
    pthread_t second;
    int two = ff->n > 1 && pthread_create(&second, NULL, fetch_files_run, &b) == 0;
    fetch_files_run(&a);
    if (two)
        pthread_join(second, NULL);
    pthread_cond_destroy(&ff->slot_cv);
    pthread_mutex_destroy(&ff->slot_mu);
}

int cmd_prefetch(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hfs3-manifest _prefetch REMOTE PATH\n");
        return 2;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cmd_err("fork: %s", strerror(errno));
        return 1;
    }
    if (pid > 0) {
        /* the intermediate child exits at once: reap it so the caller sees no zombie of ours */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return 0;
    }
    setsid();
    pid = fork();
    if (pid != 0)
        _exit(0);
    /* the grandchild: no session leader, so no controlling terminal can ever come back */
    int debug = hfs3_log_level() >= HFS3_LOG_DEBUG;
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, 0);
        if (!debug) {
            dup2(nul, 1);
            dup2(nul, 2);
        }
        if (nul > 2)
            close(nul);
    }
    close_other_fds(-1);
    const char *spec = argv[1];
    hfs3_cache *c = NULL;
    hfs3_remote *r = NULL;
    hfs3_manifest *m = NULL;
    size_t *order = NULL, n = 0;
    if (hfs3_cache_open(NULL, &c) < 0 || load_manifest(c, spec, &r, &m) < 0 ||
        (!r && hfs3_remote_parse(spec, &r) < 0)) {
        hfs3_debug("_prefetch %s: %s", spec, hfs3_errmsg());
        goto out;
    }
    if (!(order = prefetch_order(m, &n)))
        goto out;
    fetch_progress p = {.on = 0};
    pthread_mutex_init(&p.mu, NULL);
    fetch_files ff = {.c = c, .r = r, .m = m, .order = order, .n = n, .p = &p, .prefetch = spec,
                      .chunks = verify_chunks(1), .o = {.lock_fd = -1}};
    fetch_files_all(&ff);
    pthread_mutex_destroy(&p.mu);
    /* this process is detached already: the flush waits for nobody, and yields to the program that is loading,
     * as hfs3_flush_spawn's does (each process of a multi-rank server has its own _prefetch) */
    if (nice(10) < 0) {
    }
    hfs3_flush_pending(c);
out:
    free(order);
    hfs3_manifest_free(m);
    hfs3_remote_free(r);
    hfs3_cache_free(c);
    _exit(0);
}

/* Fetches one mount's manifest and files; one summary line. 0, 1 (a file or the manifest failed). */
static int fetch_one(hfs3_cache *c, const char *spec, hfs3_remote *r, int *is_hub)
{
    hfs3_manifest *m = NULL;
    size_t *order = NULL, n = 0;
    int *pins = NULL;
    unsigned char *failed_k = NULL;
    int status = 1;
    double t0 = hfs3_now();
    if (hfs3_mount_refresh(c, r, -1, NULL) < 0) {
        errline(hfs3_errmsg());
        goto out;
    }
    if (hfs3_mount_load(c, spec, &m) < 0) {
        char **names = NULL;
        size_t nn = 0;
        if (is_hub && hfs3_hub_load(c, spec, &names, &nn) == 0) {
            hfs3_hub_names_free(names, nn);
            *is_hub = 1;
            status = 0;
            goto out;
        }
        errline(hfs3_errmsg());
        goto out;
    }
    if (!(order = prefetch_order(m, &n))) {
        errline("out of memory");
        goto out;
    }
    fetch_progress p = {.on = 1, .files_total = n};   /* a bar on a terminal, else a line every few seconds */
    cmd_progress_plain(1);
    for (size_t k = 0; k < n; k++)
        p.total += m->entries[order[k]].size;
    uint64_t max = 0;
    int budget = hfs3_gc_budget(c, &max);
    if (budget < 0) {
        errline(hfs3_errmsg());
        goto out;
    }
    if (budget && p.total > max) {
        /* it cannot all stay: say so before a byte, not "0 failed" over a cache an offline server then lacks */
        char a[32], b[32];
        cmd_err("%s: the model's files are %s, more than the cache budget HFS3_CACHE_MAX=%s (%s): they cannot all "
                "stay cached, and a server with HFS3_OFFLINE=1 would miss some; nothing was downloaded (raise "
                "HFS3_CACHE_MAX to at least %s, or unset it)", spec, hfs3_gc_human(p.total, a, sizeof a),
                getenv("HFS3_CACHE_MAX"), hfs3_gc_human(max, b, sizeof b), a);
        goto out;
    }
    pins = budget ? malloc(n * sizeof *pins) : NULL;
    failed_k = calloc(n ? n : 1, 1);
    if ((budget && !pins) || !failed_k) {
        errline("out of memory");
        goto out;
    }
    for (size_t k = 0; pins && k < n; k++)
        pins[k] = -1;
    /* a descriptor per pin: raise the soft limit to the hard one, and keep 256 for the fetches themselves
     * (a file past the cap is not pinned; the check at the end still names it if it goes) */
    size_t pin_cap = 0;
    struct rlimit rl;
    if (pins && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t cur = rl.rlim_cur;
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                rl.rlim_cur = cur;
        }
        pin_cap = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX : rl.rlim_cur > 512 ? (size_t)rl.rlim_cur - 256 : 0;
    }
    char mkey[17];
    if (hfs3_cache_mount_key(c, r->spec, 1, mkey) < 0)
        hfs3_mountkey_as(r->spec, c->verify_foreign, (unsigned)c->uid, mkey);   /* its files failed already */
    pthread_mutex_init(&p.mu, NULL);
    fetch_files ff = {.c = c, .r = r, .m = m, .order = order, .n = n, .p = &p, .pins = pins, .failed_k = failed_k,
                      .pin_cap = pin_cap, .chunks = verify_chunks(0),
                      .o = {.lock_fd = -1, .progress = progress_bytes, .progress_ud = &p}};
    fetch_files_all(&ff);
    pthread_mutex_destroy(&p.mu);
    uint64_t fetched = ff.fetched, cached = ff.cached;
    size_t failed = ff.failed, missing = 0;
    /* every file that did not fail must be in the cache now (a gc or the budget may have taken one since) */
    for (size_t k = 0; k < n; k++) {
        const hfs3_entry *e = &m->entries[order[k]];
        if (failed_k[k] || e->size == 0 || entry_cached(c, ff.chunks ? mkey : NULL, e->sha256))
            continue;
        if (p.on && !missing)
            cmd_progress_end();
        cmd_err("%s: %s: not in the cache after this fetch: removed while it ran (%s)", spec, e->path,
                budget ? "HFS3_CACHE_MAX making room for another file, or a `cache gc`"
                       : "a `cache gc`, or another process's fetch making room under its HFS3_CACHE_MAX");
        missing++;
    }
    if (p.on)
        cmd_progress_end();
    double secs = hfs3_now() - t0;
    char hf[24], hc[24], hr[24];
    printf("%s: %zu %s, %s fetched, %s already cached, %.1f s, %s, %zu failed", spec, n, hfs3_plural(n, "file", "files"),
           hfs3_human_bytes(fetched, hf, sizeof hf), hfs3_human_bytes(cached, hc, sizeof hc), secs,
           hfs3_human_rate(secs > 0 ? (double)fetched / secs : 0.0, hr, sizeof hr), failed);
    if (missing)
        printf(", %zu not cached", missing);
    printf("\n");
    fflush(stdout);
    if (failed && ff.stale)
        /* fetch refreshed the manifest first: the one in S3 no longer matches its prefix */
        cmd_err("%s: %zu of %zu %s failed (each named above): the prefix changed since the manifest was built; "
                "run hfs3-manifest build %s, then fetch again", spec, failed, n, hfs3_plural(n, "file", "files"), spec);
    else if (failed)
        cmd_err("%s: %zu of %zu %s failed (each named above); run the same command again to retry %s", spec,
                failed, n, hfs3_plural(n, "file", "files"), hfs3_plural(failed, "it", "them"));
    if (missing)
        cmd_err("%s: %zu of %zu %s %s not in the cache (each named above): a server with HFS3_OFFLINE=1 would "
                "fail on %s", spec, missing, n, hfs3_plural(n, "file", "files"), hfs3_plural(missing, "is", "are"),
                hfs3_plural(missing, "it", "them"));
    status = failed || missing ? 1 : 0;
out:
    for (size_t k = 0; pins && k < n; k++)
        hfs3_gc_unpin(pins[k], m->entries[order[k]].sha256);
    free(pins);
    free(failed_k);
    free(order);
    hfs3_manifest_free(m);
    return status;
}

/* A repository inside a hub (its last component models--*, ...): the hub's repository list is cached too, so a
 * hub mount of the parent works with HFS3_OFFLINE=1 after this fetch. Quiet when the parent is no hub. */
static void note_parent_hub(hfs3_cache *c, const hfs3_remote *r)
{
    const char *slash = strrchr(r->prefix, '/'), *last = slash ? slash + 1 : r->prefix;
    if (!*last || !hfs3_hub_name_ok(last))
        return;
    size_t n = strlen(r->spec);
    while (n > 0 && r->spec[n - 1] == '/')
        n--;
    while (n > 0 && r->spec[n - 1] != '/' && r->spec[n - 1] != ':')
        n--;
    char *parent = hfs3_strndup(r->spec, n);
    hfs3_remote *pr = NULL;
    if (parent && hfs3_remote_parse(parent, &pr) == 0) {
        char **names = NULL;
        size_t nn = 0;
        int has_manifest = 0;
        /* only a hub: a parent that is not one gets no cache entry */
        if (hfs3_hub_list(pr, &names, &nn, &has_manifest) == 0 && nn && !has_manifest) {
            char *mdir = NULL;
            int mfd = hfs3_cache_mount_dir(c, pr->spec, 1, &mdir);
            int fd = -1;
            if (mfd >= 0 && hfs3_cache_lock(c, mfd, "lock", mdir, 0, &fd, NULL) == 0 &&
                hfs3_hub_install(c, mfd, mdir, names, nn) == 0) {
                unlinkat(mfd, "error", 0);
                hfs3_gc_note_remote(c, mfd, mdir, pr->spec);
                hfs3_debug("%s: the repository list of the hub %s is cached too", r->spec, pr->spec);
            }
            hfs3_cache_unlock(fd);
            if (mfd >= 0)
                close(mfd);
            free(mdir);
        }
        hfs3_hub_names_free(names, nn);
    }
    hfs3_remote_free(pr);
    free(parent);
}

int cmd_fetch(int argc, char **argv)
{
    const char *spec = NULL, **repos = NULL;
    size_t nrepos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cmd_help("fetch");
            free(repos);
            return 0;
        }
        const char *val = NULL;
        if (!strcmp(a, "--repo") && i + 1 < argc)
            val = argv[++i];
        else if (!strncmp(a, "--repo=", 7))
            val = a + 7;
        if (val) {
            const char **w = realloc(repos, (nrepos + 1) * sizeof *w);
            if (!w) {
                free(repos);
                errline("out of memory");
                return 1;
            }
            repos = w;
            repos[nrepos++] = val;
            if (!hfs3_hub_name_ok(val)) {
                cmd_err("--repo '%s' is not a repository folder name (models--ORG--NAME, datasets--..., spaces--...)",
                        val);
                free(repos);
                return 2;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) {
            cmd_err(!strcmp(a, "--repo") ? "--repo needs a NAME" : "unknown option '%s'", a);
            cmd_usage("fetch");
            free(repos);
            return 2;
        }
        if (spec) {
            cmd_err("one REMOTE expected");
            cmd_usage("fetch");
            free(repos);
            return 2;
        }
        spec = a;
    }
    if (!spec) {
        cmd_err("REMOTE missing");
        cmd_usage("fetch");
        free(repos);
        return 2;
    }
    hfs3_remote *r = cmd_remote(spec);
    if (!r) {
        free(repos);
        return 2;
    }
    hfs3_cache *c = NULL;
    int status = 1, is_hub = 0;
    if ((status = open_cache(&c)) != 0)
        goto out;
    status = fetch_one(c, spec, r, &is_hub);
    if (status == 0 && !is_hub && nrepos) {
        cmd_err("%s has a manifest of its own, not a hub: --repo does not apply", spec);
        status = 2;
    }
    if (status == 0 && !is_hub && !hfs3_env_bool("HFS3_OFFLINE", 0))
        note_parent_hub(c, r);
    if (status == 0 && is_hub) {
        /* a hub: every repository (or those --repo names), each as its own mount REMOTE/NAME */
        char **names = NULL;
        size_t nn = 0;
        if (hfs3_hub_load(c, spec, &names, &nn) < 0) {
            errline(hfs3_errmsg());
            status = 1;
            goto out;
        }
        size_t failed = 0, done = 0;
        for (size_t k = 0; k < nrepos; k++) {
            int found = 0;
            for (size_t i = 0; i < nn && !found; i++)
                found = !strcmp(names[i], repos[k]);
            if (!found) {
                cmd_err("%s: no repository %s under it", spec, repos[k]);
                failed++;
            }
        }
        for (size_t i = 0; i < nn; i++) {
            int want = !nrepos;
            for (size_t k = 0; k < nrepos && !want; k++)
                want = !strcmp(names[i], repos[k]);
            if (!want)
                continue;
            char *rs = hfs3_hub_repo_spec(spec, names[i]);
            hfs3_remote *rr = rs ? cmd_remote(rs) : NULL;
            if (!rr || fetch_one(c, rs, rr, NULL) != 0)
                failed++;
            done++;
            hfs3_remote_free(rr);
            free(rs);
        }
        printf("%s: a hub: %zu %s fetched, %zu failed\n", spec, done, hfs3_plural(done, "repository", "repositories"),
               failed);
        hfs3_hub_names_free(names, nn);
        status = failed ? 1 : 0;
    }
out:
    /* every file is in the cache: the flush to disk goes on after this command returns */
    if (c)
        hfs3_flush_spawn(c);
    free(repos);
    hfs3_cache_free(c);
    hfs3_remote_free(r);
    return status;
}
