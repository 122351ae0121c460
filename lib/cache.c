/* cache.c - the local cache directory: resolution from the environment, the checks of its path and of the
 * directory itself (OpenSSH StrictModes is the model), opening it and its subdirectories as descriptors,
 * and the refresh of a mount's manifest + index (`_index`). How files inside are opened and created is
 * cachefs.c's; fetching blobs fetch.c's; the index format index.c's; HTTP s3.c's. */
#include "hfs3/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/index.h"
#include "hfs3/log.h"
#include "hfs3/s3.h"
#include "hfs3/util.h"

static const char *const cache_subdirs[] = {"blobs", "tmp", "locks", "fails", "mounts"};

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static char *join2(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

char *hfs3_cache_dir_from_env(void)
{
    const char *v;
    char *s;
    if ((v = env_nonempty("HFS3_CACHE_DIR")))
        s = hfs3_strdup(v);
    else if ((v = env_nonempty("XDG_CACHE_HOME")))
        s = join2(v, "hfs3");
    else if ((v = env_nonempty("HOME")))
        s = join2(v, ".cache/hfs3");
    else {
        hfs3_err(-ENOENT, "cache: none of HFS3_CACHE_DIR, XDG_CACHE_HOME, HOME is set");
        return NULL;
    }
    if (!s) {
        hfs3_err(-ENOMEM, "out of memory");
        return NULL;
    }
    /* trailing slashes would double up in every path we build */
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/')
        s[--n] = 0;
    return s;
}

/* A directory on the way to the cache: someone who can rename entries in it (a writable directory
 * without the sticky bit, or its owner) decides what the path leads to, so it must be the user's or
 * root's, and not writable by others unless sticky (/tmp is fine). */
static int check_on_path(const char *dir, const char *comp, const struct stat *st, uid_t me)
{
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX))
        return hfs3_err(-EPERM, "cache directory %s is reached through %s, writable by others without the sticky "
                        "bit (mode %04o); refusing (chmod o-w or +t %s, or choose another HFS3_CACHE_DIR)", dir,
                        comp, (unsigned)(st->st_mode & 07777), comp);
    if (st->st_uid != me && st->st_uid != 0)
        return hfs3_err(-EPERM, "cache directory %s is reached through %s, owned by uid %u (not you or root), "
                        "who could replace what is below it; refusing (choose another HFS3_CACHE_DIR)", dir, comp,
                        (unsigned)st->st_uid);
    return 0;
}

int hfs3_cache_check_dir(const char *dir, int *shared)
{
    char buf[4200];
    size_t n = strlen(dir);
    if (n == 0)
        return hfs3_err(-EINVAL, "cache: empty cache directory name");
    if (n >= sizeof buf)
        return hfs3_err(-ENAMETOOLONG, "cache directory %s: path too long", dir);
    memcpy(buf, dir, n + 1);
    uid_t me = geteuid();
    /* Each existing component: a symlink there decides where everything below goes, so only the user or
     * root may own one; a directory holding the next component must be safe as check_on_path says.
     * Components past the first missing one do not exist yet. */
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != 0)
            continue;
        char c = *p;
        *p = 0;
        struct stat st;
        if (lstat(buf, &st) < 0) {
            if (errno == ENOENT)
                break;
            return hfs3_err(-errno, "cache directory %s: %s: %s", dir, buf, strerror(errno));
        }
        if (S_ISLNK(st.st_mode) && st.st_uid != me && st.st_uid != 0)
            return hfs3_err(-EPERM, "cache directory %s is reached through symlink %s owned by uid %u; refusing",
                            dir, buf, (unsigned)st.st_uid);
        if (c && S_ISLNK(st.st_mode) && stat(buf, &st) < 0)
            break;
        int rc;
        if (c && S_ISDIR(st.st_mode) && (rc = check_on_path(dir, buf, &st, me)) < 0)
            return rc;
        *p = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(dir, &st) < 0) {
        if (errno == ENOENT) {
            if (shared)
                *shared = 0;
            return 0;
        }
        return hfs3_err(-errno, "cache directory %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return hfs3_err(-ENOTDIR, "cache directory %s is not a directory", dir);
    if (st.st_mode & S_IWOTH)
        return hfs3_err(-EPERM, "cache directory %s is writable by others (mode %04o); refusing", dir,
                        (unsigned)(st.st_mode & 07777));
    if (shared)
        *shared = (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
    return 0;
}

/* Opens the real path of dir one component at a time from "/", O_DIRECTORY | O_NOFOLLOW, each directory on
 * the way checked by check_on_path: what the returned descriptor names is what was checked, whatever
 * happens to the path later. */
static int walk_open(const char *dir, uid_t me)
{
    char *real = realpath(dir, NULL);
    if (!real)
        return hfs3_err(-errno, "cache directory %s: %s", dir, strerror(errno));
    int rc = 0, fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rc = hfs3_err(-errno, "cache directory %s: /: %s", dir, strerror(errno));
        goto out;
    }
    char walked[4200] = "";
    size_t wl = 0;
    char *save = NULL;
    for (char *comp = strtok_r(real + 1, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
        struct stat st;
        if (fstat(fd, &st) < 0) {
            rc = hfs3_err(-errno, "cache directory %s: %s", dir, strerror(errno));
            goto out;
        }
        if ((rc = check_on_path(dir, wl ? walked : "/", &st, me)) < 0)
            goto out;
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            rc = hfs3_err(-errno, "cache directory %s: %s/%s changed while it was checked (%s); refusing", dir,
                          walked, comp, strerror(errno));
            goto out;
        }
        close(fd);
        fd = next;
        int k = snprintf(walked + wl, sizeof walked - wl, "/%s", comp);
        if (k > 0 && (size_t)k < sizeof walked - wl)
            wl += (size_t)k;
    }
out:
    free(real);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    return fd;
}

/* The rules of the cache directory itself (its descriptor fd): sets c->shared, c->gid and the modes. */
static int check_top(hfs3_cache *c, int fd, int created)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return hfs3_err(-errno, "cache directory %s: %s", c->dir, strerror(errno));
    if (created && st.st_uid == c->uid && (st.st_mode & 07777) != 0700) {
        if (fchmod(fd, 0700) < 0 || fstat(fd, &st) < 0)
            return hfs3_err(-errno, "chmod %s: %s", c->dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return hfs3_err(-ENOTDIR, "cache directory %s is not a directory", c->dir);
    if (st.st_mode & S_IWOTH)
        return hfs3_err(-EPERM, "cache directory %s is writable by others (mode %04o); refusing (chmod o-w %s)",
                        c->dir, (unsigned)(st.st_mode & 07777), c->dir);
    c->shared = (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
    c->gid = st.st_gid;
    c->dir_mode = c->shared ? 03770 : 0700;
    c->file_mode = c->shared ? 0660 : 0600;
    c->blob_mode = c->shared ? 0440 : 0444;
    if (c->shared && st.st_uid != c->uid && st.st_uid != 0)
        return hfs3_err(-EPERM, "cache directory %s is shared (setgid, group-writable) but belongs to uid %u, not to "
                        "you or root; refusing (its owner could replace anything in it)", c->dir,
                        (unsigned)st.st_uid);
    if (!c->shared && st.st_uid != c->uid)
        return hfs3_err(-EPERM, "cache directory %s belongs to uid %u, not to you (uid %u): a private cache must be "
                        "yours; refusing (choose another HFS3_CACHE_DIR)",
                        c->dir, (unsigned)st.st_uid, (unsigned)c->uid);
    if (!c->shared && (st.st_mode & S_IWGRP))
        return hfs3_err(-EPERM, "cache directory %s is group-writable without setgid (mode %04o), neither private "
                        "nor shared; refusing (chmod 700 %s, or chmod 3770 %s to share it with its group)", c->dir,
                        (unsigned)(st.st_mode & 07777), c->dir, c->dir);
    return hfs3_cache_check_subdir(c, fd, &st, 1, c->dir);
}

void hfs3_cache_free(hfs3_cache *c)
{
    if (!c)
        return;
    int fds[] = {c->fd, c->blobs, c->tmp, c->locks, c->fails, c->mounts};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(c->p_blobs);
    free(c->p_tmp);
    free(c->p_locks);
    free(c->p_fails);
    free(c->p_mounts);
    free(c->dir);
    free(c);
}

/* Opens (creating) the five subdirectories. */
static int open_subdirs(hfs3_cache *c)
{
    int *fds[] = {&c->blobs, &c->tmp, &c->locks, &c->fails, &c->mounts};
    char **paths[] = {&c->p_blobs, &c->p_tmp, &c->p_locks, &c->p_fails, &c->p_mounts};
    for (size_t i = 0; i < sizeof cache_subdirs / sizeof cache_subdirs[0]; i++) {
        if (!(*paths[i] = join2(c->dir, cache_subdirs[i])))
            return hfs3_err(-ENOMEM, "out of memory");
        int fd = hfs3_cache_opendir(c, c->fd, cache_subdirs[i], c->dir_mode, 1, c->dir);
        if (fd < 0)
            return fd;
        *fds[i] = fd;
    }
    return 0;
}

int hfs3_cache_open(const char *dir, hfs3_cache **out)
{
    int rc;
    hfs3_cache *c = calloc(1, sizeof *c);
    if (!c)
        return hfs3_err(-ENOMEM, "out of memory");
    c->fd = c->blobs = c->tmp = c->locks = c->fails = c->mounts = -1;
    c->uid = geteuid();
    const char *vf = getenv("HFS3_VERIFY_FOREIGN");
    c->verify_foreign = vf && !strcmp(vf, "1");
    c->dir = dir ? hfs3_strdup(dir) : hfs3_cache_dir_from_env();
    if (!c->dir) {
        rc = dir ? hfs3_err(-ENOMEM, "out of memory") : -ENOENT;
        goto fail;
    }
    if ((rc = hfs3_cache_check_dir(c->dir, NULL)) < 0)
        goto fail;
    int created = 0;
    struct stat st;
    if (lstat(c->dir, &st) < 0 && errno == ENOENT) {
        /* a new private cache: its parents as mkdir -p makes them, then checked like any others */
        if ((rc = hfs3_mkdirs(c->dir, 0700)) < 0)
            goto fail;
        created = 1;
        if ((rc = hfs3_cache_check_dir(c->dir, NULL)) < 0)
            goto fail;
    }
    if ((rc = c->fd = walk_open(c->dir, c->uid)) < 0)
        goto fail;
    if ((rc = check_top(c, c->fd, created)) < 0 || (rc = open_subdirs(c)) < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    hfs3_cache_free(c);
    return rc;
}

char *hfs3_cache_path(const hfs3_cache *c, const char *sub, const char *name, const char *suffix)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_buf_adds(&b, c->dir) < 0)
        return NULL;
    if (sub && *sub && hfs3_buf_addf(&b, "/%s", sub) < 0)
        return NULL;
    if (name && *name && hfs3_buf_addf(&b, "/%s", name) < 0)
        return NULL;
    if (suffix && *suffix && hfs3_buf_adds(&b, suffix) < 0)
        return NULL;
    return hfs3_buf_take(&b, NULL);
}

int hfs3_cache_mount_dir(const hfs3_cache *c, const char *spec, int create, char **path)
{
    char key[17];
    hfs3_mountkey(spec, key);
    /* not sticky: every member's refresh replaces index, manifest.json and etag in it */
    int fd = hfs3_cache_opendir(c, c->mounts, key, create ? (c->shared ? 02770 : 0700) : 0, 0, c->p_mounts);
    if (fd < 0)
        return fd;
    if (path && !(*path = hfs3_cache_path(c, "mounts", key, NULL))) {
        close(fd);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    return fd;
}

void hfs3_mount_set_error(const hfs3_cache *c, const char *spec, const char *msg)
{
    char *d = NULL;
    int fd = hfs3_cache_mount_dir(c, spec, 1, &d);
    if (fd < 0)
        return;
    hfs3_cache_write_line(c, fd, "error", d, msg);
    close(fd);
    free(d);
}

/* Written by a user other than this one and root: HFS3_VERIFY_FOREIGN=1 does not take it on trust. */
static int foreign(const hfs3_cache *c, const struct stat *st)
{
    return st->st_uid != c->uid && st->st_uid != 0;
}

int hfs3_mount_load(const hfs3_cache *c, const char *spec, hfs3_manifest **out)
{
    char *mdir = NULL, *doc = NULL;
    size_t n = 0;
    struct stat st;
    int rc, fd = hfs3_cache_mount_dir(c, spec, 0, &mdir);
    if (fd < 0) {
        if (fd == -ENOENT)
            hfs3_err(fd, "%s: no cached manifest (%s/mounts/... does not exist)", spec, c->dir);
        return fd;
    }
    rc = hfs3_cache_read(c, fd, "manifest.json", HFS3_MAX_DOC, &doc, &n, &st, mdir);
    if (rc == -ENOENT)
        hfs3_err(rc, "%s: no cached manifest (%s/manifest.json)", spec, mdir);
    if (rc == 0 && c->verify_foreign && foreign(c, &st))
        rc = hfs3_err(-EACCES, "%s: the cached %s/manifest.json was written by uid %u, and HFS3_VERIFY_FOREIGN=1 "
                      "asks for one of your own", spec, mdir, (unsigned)st.st_uid);
    if (rc == 0 && (rc = hfs3_manifest_parse(doc, n, out)) < 0)
        hfs3_err_wrap(rc, "%s: cached %s/manifest.json", spec, mdir);
    close(fd);
    free(doc);
    free(mdir);
    return rc;
}

static int ts_ge(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

/* The network half of a refresh: GET (If-None-Match when use_cached) and install into the mount directory
 * mfd (path mdir). 0, or an error with its message. */
static int refresh_fetch(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir, int use_cached)
{
    int rc;
    hfs3_s3 *s3 = NULL;
    hfs3_manifest *m = NULL;
    char *etag = NULL;
    hfs3_buf doc;
    hfs3_buf_init(&doc, HFS3_MAX_DOC);
    hfs3_s3_get g = {0};
    char *key = hfs3_remote_manifest_key(r);
    if (!key) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    if (use_cached) {
        size_t n;
        if (hfs3_cache_read(c, mfd, "etag", 4096, &etag, &n, NULL, mdir) == 0) {
            while (n && (etag[n - 1] == '\n' || etag[n - 1] == '\r'))
                etag[--n] = 0;
            if (n)
                g.if_none_match = etag;
        }
    }
    if ((rc = hfs3_s3_new(r, NULL, &s3)) < 0)
        goto wrap;
    if ((rc = hfs3_s3_get_buf(s3, key, HFS3_MAX_DOC, &doc, &g)) < 0)
        goto wrap;
    if (g.not_modified) {
        /* Not modified: reinstall the index from the cached document rather than just touching it. That
         * heals an index damaged on disk (the shim refuses an invalid one, and would otherwise keep failing
         * until the manifest changes), and in a shared cache it works when another user owns the index. */
        char *text = NULL;
        size_t n = 0;
        if (hfs3_cache_read(c, mfd, "manifest.json", HFS3_MAX_DOC, &text, &n, NULL, mdir) == 0 &&
            hfs3_manifest_parse(text, n, &m) == 0) {
            free(text);
            if ((rc = hfs3_index_install_at(m, c, mfd, mdir)) < 0)
                goto wrap;
            hfs3_debug("%s: manifest not modified", r->spec);
            goto out;
        }
        free(text);
        /* the cached document itself is damaged: fetch it whole */
        hfs3_warn("%s: the cached %s/manifest.json is unreadable (%s); fetching the manifest again", r->spec, mdir,
                  hfs3_errmsg());
        free(g.etag);
        g = (hfs3_s3_get){0};
        hfs3_buf_reset(&doc);
        if ((rc = hfs3_s3_get_buf(s3, key, HFS3_MAX_DOC, &doc, &g)) < 0)
            goto wrap;
    }
    if ((rc = hfs3_manifest_parse(hfs3_buf_str(&doc), doc.len, &m)) < 0) {
        hfs3_err_wrap(rc, "%s: %s", r->spec, key);
        goto out;
    }
    /* manifest.json before the index: whoever sees the new index finds a manifest at least as new */
    if ((rc = hfs3_cache_write_atomic(mfd, "manifest.json", hfs3_buf_str(&doc), doc.len, c->file_mode, mdir)) < 0)
        goto wrap;
    if (g.etag && *g.etag) {
        if ((rc = hfs3_cache_write_atomic(mfd, "etag", g.etag, strlen(g.etag), c->file_mode, mdir)) < 0)
            goto wrap;
    } else {
        unlinkat(mfd, "etag", 0);
    }
    if ((rc = hfs3_index_install_at(m, c, mfd, mdir)) < 0)
        goto wrap;
    hfs3_debug("%s: manifest installed (%zu entries)", r->spec, m->n);
    goto out;
wrap:
    /* s3.c's messages name the key already */
    hfs3_err_wrap(rc, "%s", r->spec);
out:
    hfs3_manifest_free(m);
    if (s3)
        hfs3_s3_free(s3);
    hfs3_buf_free(&doc);
    free(g.etag);
    free(etag);
    free(key);
    return rc;
}

/* What is cached for the mount in mfd: 1 (index and manifest.json, both acceptable), 0 (not both there),
 * or the error of one the rules refuse. *foreign_out: HFS3_VERIFY_FOREIGN=1 and another user wrote one of
 * them, so it is not to be used; *index_st: the index's stat. */
static int cached_state(const hfs3_cache *c, int mfd, const char *mdir, struct stat *index_st, int *foreign_out)
{
    struct stat st_doc;
    int ri = hfs3_cache_stat(c, mfd, "index", index_st, mdir);
    if (ri < 0 && ri != -ENOENT)
        return ri;
    int rd = hfs3_cache_stat(c, mfd, "manifest.json", &st_doc, mdir);
    if (rd < 0 && rd != -ENOENT)
        return rd;
    if (ri < 0 || rd < 0)
        return 0;
    *foreign_out = c->verify_foreign && (foreign(c, index_st) || foreign(c, &st_doc));
    return 1;
}

int hfs3_mount_refresh(const hfs3_cache *c, const hfs3_remote *r, int lock_fd, int *stale)
{
    int rc, fd = -1, waited = 0, foreign_cached = 0;
    char *mdir = NULL;
    if (stale)
        *stale = 0;
    int mfd = hfs3_cache_mount_dir(c, r->spec, 1, &mdir);
    if (mfd < 0)
        return hfs3_err_wrap(mfd, "%s", r->spec);
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    if (lock_fd < 0 && (rc = hfs3_cache_lock(c, mfd, "lock", mdir, 0, &fd, &waited)) < 0) {
        hfs3_err_wrap(rc, "%s", r->spec);
        goto fail;
    }
    struct stat st_index;
    int have_cached = cached_state(c, mfd, mdir, &st_index, &foreign_cached);
    if (have_cached < 0) {
        rc = hfs3_err_wrap(have_cached, "%s", r->spec);
        goto fail;
    }
    if (waited && have_cached && !foreign_cached && ts_ge(&st_index.st_mtim, &t0)) {
        /* another process checked S3 while we waited: one round trip is enough */
        hfs3_debug("%s: refreshed by another process", r->spec);
        rc = 0;
        goto ok;
    }
    const char *off = getenv("HFS3_OFFLINE");
    if (off && !strcmp(off, "1")) {
        if (have_cached && !foreign_cached) {
            rc = 0;
            goto ok;
        }
        rc = hfs3_err(-ENOENT, "%s: HFS3_OFFLINE=1 and no cached manifest %sfor it in %s", r->spec,
                      foreign_cached ? "of your own (HFS3_VERIFY_FOREIGN=1) " : "", mdir);
        goto fail;
    }
    /* a cached manifest another user wrote is not asked about under HFS3_VERIFY_FOREIGN=1: a whole GET */
    rc = refresh_fetch(c, r, mfd, mdir, have_cached && !foreign_cached);
    if (rc == 0)
        goto ok;
    if (have_cached && !foreign_cached) {
        hfs3_warn("%s; using the cached manifest", hfs3_errmsg());
        if (stale)
            *stale = 1;
        rc = 0;
        goto out;
    }
fail:
    hfs3_cache_write_line(c, mfd, "error", mdir, hfs3_errmsg());
    goto out;
ok:
    unlinkat(mfd, "error", 0);
out:
    hfs3_cache_unlock(fd);
    close(mfd);
    free(mdir);
    return rc;
}
