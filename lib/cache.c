/* cache.c - the local cache directory: resolution from the environment, the permission rules (no
 * directory others can write, no symlink of another user on the way), paths, flock helpers, umask-proof
 * file creation, and the refresh of a mount's manifest + index (`_index`). Fetching blobs is fetch.c's;
 * the index format is index.c's; HTTP is s3.c's. */
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
     * root may own one. Components past the first missing one do not exist yet. */
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

void hfs3_cache_free(hfs3_cache *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c);
}

int hfs3_cache_mkdir(const char *path, mode_t mode)
{
    if (mkdir(path, mode) == 0) {
        if (chmod(path, mode) < 0)
            return hfs3_err(-errno, "chmod %s: %s", path, strerror(errno));
        return 0;
    }
    if (errno != EEXIST)
        return hfs3_err(-errno, "mkdir %s: %s", path, strerror(errno));
    struct stat st;
    if (lstat(path, &st) < 0)
        return hfs3_err(-errno, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return hfs3_err(-ENOTDIR, "cache: %s is not a directory; refusing", path);
    if (st.st_mode & S_IWOTH)
        return hfs3_err(-EPERM, "cache: %s is writable by others; refusing", path);
    return 0;
}

int hfs3_cache_open(const char *dir, hfs3_cache **out)
{
    int rc;
    hfs3_cache *c = calloc(1, sizeof *c);
    if (!c)
        return hfs3_err(-ENOMEM, "out of memory");
    c->dir = dir ? hfs3_strdup(dir) : hfs3_cache_dir_from_env();
    if (!c->dir) {
        rc = dir ? hfs3_err(-ENOMEM, "out of memory") : -ENOENT;
        goto fail;
    }
    int shared = 0;
    if ((rc = hfs3_cache_check_dir(c->dir, &shared)) < 0)
        goto fail;
    struct stat st;
    if (stat(c->dir, &st) < 0) {
        if ((rc = hfs3_mkdirs(c->dir, 0700)) < 0)
            goto fail;
        if (chmod(c->dir, 0700) < 0) {
            rc = hfs3_err(-errno, "chmod %s: %s", c->dir, strerror(errno));
            goto fail;
        }
        /* someone may have raced us to it: check again what we are about to use */
        if ((rc = hfs3_cache_check_dir(c->dir, &shared)) < 0)
            goto fail;
    }
    c->shared = shared;
    c->dir_mode = shared ? 02770 : 0700;
    c->file_mode = shared ? 0660 : 0600;
    c->blob_mode = shared ? 0440 : 0444;
    for (size_t i = 0; i < sizeof cache_subdirs / sizeof cache_subdirs[0]; i++) {
        char *p = join2(c->dir, cache_subdirs[i]);
        if (!p) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            goto fail;
        }
        rc = hfs3_cache_mkdir(p, c->dir_mode);
        free(p);
        if (rc < 0)
            goto fail;
    }
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

int hfs3_cache_create(const char *path, int flags, mode_t mode)
{
    /* exact: the umask may have taken group bits a shared cache needs */
    return hfs3_create_file(path, flags, (int)mode, 1);
}

int hfs3_cache_lock(const hfs3_cache *c, const char *path, int nonblock, int *fd, int *waited)
{
    if (waited)
        *waited = 0;
    int f = hfs3_cache_create(path, O_RDWR, c->file_mode);
    if (f < 0)
        return f;
    if (flock(f, LOCK_EX | LOCK_NB) == 0) {
        *fd = f;
        return 0;
    }
    if (errno != EWOULDBLOCK) {
        int e = errno;
        close(f);
        return hfs3_err(-e, "flock %s: %s", path, strerror(e));
    }
    if (nonblock) {
        close(f);
        return hfs3_err(-EWOULDBLOCK, "%s: busy (another process holds it)", path);
    }
    if (waited)
        *waited = 1;
    while (flock(f, LOCK_EX) < 0) {
        if (errno == EINTR)
            continue;
        int e = errno;
        close(f);
        return hfs3_err(-e, "flock %s: %s", path, strerror(e));
    }
    *fd = f;
    return 0;
}

void hfs3_cache_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

int hfs3_cache_write_atomic(const char *path, const void *data, size_t n, mode_t mode)
{
    return hfs3_write_file_atomic_ex(path, data, n, (int)mode, 1);
}

void hfs3_cache_write_line(const hfs3_cache *c, const char *path, const char *msg)
{
    size_t n = strlen(msg);
    char *line = malloc(n + 2);
    if (!line)
        return;
    memcpy(line, msg, n);
    /* one line, whatever the message held */
    for (size_t i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n] = '\n';
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
    (void)hfs3_cache_write_atomic(path, line, n + 1, c->file_mode);
    hfs3_err(0, "%s", saved);
    free(line);
}

int hfs3_cache_mount_dir(const hfs3_cache *c, const char *spec, char **out)
{
    char key[17];
    hfs3_mountkey(spec, key);
    char *d = hfs3_cache_path(c, "mounts", key, NULL);
    if (!d)
        return hfs3_err(-ENOMEM, "out of memory");
    int rc = hfs3_cache_mkdir(d, c->dir_mode);
    if (rc < 0) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void hfs3_mount_set_error(const hfs3_cache *c, const char *spec, const char *msg)
{
    char *d = NULL;
    if (hfs3_cache_mount_dir(c, spec, &d) < 0)
        return;
    char *p = join2(d, "error");
    if (p)
        hfs3_cache_write_line(c, p, msg);
    free(p);
    free(d);
}

int hfs3_mount_load(const hfs3_cache *c, const char *spec, hfs3_manifest **out)
{
    char key[17];
    hfs3_mountkey(spec, key);
    char *p = hfs3_cache_path(c, "mounts", key, "/manifest.json");
    if (!p)
        return hfs3_err(-ENOMEM, "out of memory");
    char *doc = NULL;
    size_t n = 0;
    int rc = hfs3_read_file(p, HFS3_MAX_DOC, &doc, &n);
    if (rc < 0) {
        if (rc == -ENOENT)
            hfs3_err(rc, "%s: no cached manifest (%s)", spec, p);
        free(p);
        return rc;
    }
    rc = hfs3_manifest_parse(doc, n, out);
    if (rc < 0)
        hfs3_err_wrap(rc, "%s: cached %s", spec, p);
    free(doc);
    free(p);
    return rc;
}

static int ts_ge(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

/* The network half of a refresh: GET (If-None-Match) and install. 0, or an error with its message. */
static int refresh_fetch(const hfs3_cache *c, const hfs3_remote *r, const char *mdir, int have_cached)
{
    int rc;
    hfs3_s3 *s3 = NULL;
    hfs3_manifest *m = NULL;
    char *etag = NULL;
    hfs3_buf doc;
    hfs3_buf_init(&doc, HFS3_MAX_DOC);
    hfs3_s3_get g = {0};
    char *key = hfs3_remote_manifest_key(r);
    char *p_etag = join2(mdir, "etag"), *p_doc = join2(mdir, "manifest.json");
    if (!key || !p_etag || !p_doc) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    if (have_cached) {
        size_t n;
        if (hfs3_read_file(p_etag, 4096, &etag, &n) == 0) {
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
        if (hfs3_read_file(p_doc, HFS3_MAX_DOC, &text, &n) == 0 && hfs3_manifest_parse(text, n, &m) == 0) {
            free(text);
            if ((rc = hfs3_index_install(m, mdir)) < 0)
                goto wrap;
            hfs3_debug("%s: manifest not modified", r->spec);
            goto out;
        }
        free(text);
        /* the cached document itself is damaged: fetch it whole */
        hfs3_warn("%s: the cached %s is unreadable (%s); fetching the manifest again", r->spec, p_doc,
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
    if ((rc = hfs3_cache_write_atomic(p_doc, hfs3_buf_str(&doc), doc.len, c->file_mode)) < 0)
        goto wrap;
    if (g.etag && *g.etag) {
        if ((rc = hfs3_cache_write_atomic(p_etag, g.etag, strlen(g.etag), c->file_mode)) < 0)
            goto wrap;
    } else {
        unlink(p_etag);
    }
    if ((rc = hfs3_index_install(m, mdir)) < 0)
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
    free(p_etag);
    free(p_doc);
    return rc;
}

int hfs3_mount_refresh(const hfs3_cache *c, const hfs3_remote *r, int lock_fd, int *stale)
{
    int rc, fd = -1, waited = 0;
    char *mdir = NULL, *p_lock = NULL, *p_index = NULL, *p_doc = NULL, *p_err = NULL;
    if (stale)
        *stale = 0;
    if ((rc = hfs3_cache_mount_dir(c, r->spec, &mdir)) < 0)
        return rc;
    p_lock = join2(mdir, "lock");
    p_index = join2(mdir, "index");
    p_doc = join2(mdir, "manifest.json");
    p_err = join2(mdir, "error");
    if (!p_lock || !p_index || !p_doc || !p_err) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    if (lock_fd < 0 && (rc = hfs3_cache_lock(c, p_lock, 0, &fd, &waited)) < 0)
        goto out;
    struct stat st_index, st_doc;
    int have_cached = stat(p_index, &st_index) == 0 && stat(p_doc, &st_doc) == 0;
    if (waited && have_cached && ts_ge(&st_index.st_mtim, &t0)) {
        /* another process checked S3 while we waited: one round trip is enough */
        hfs3_debug("%s: refreshed by another process", r->spec);
        rc = 0;
        goto ok;
    }
    const char *off = getenv("HFS3_OFFLINE");
    if (off && !strcmp(off, "1")) {
        if (have_cached) {
            rc = 0;
            goto ok;
        }
        rc = hfs3_err(-ENOENT, "%s: HFS3_OFFLINE=1 and no cached manifest for it in %s", r->spec, mdir);
        goto fail;
    }
    rc = refresh_fetch(c, r, mdir, have_cached);
    if (rc == 0)
        goto ok;
    if (have_cached) {
        hfs3_warn("%s; using the cached manifest", hfs3_errmsg());
        if (stale)
            *stale = 1;
        rc = 0;
        goto out;
    }
fail:
    hfs3_cache_write_line(c, p_err, hfs3_errmsg());
    goto out;
ok:
    unlink(p_err);
out:
    hfs3_cache_unlock(fd);
    free(mdir);
    free(p_lock);
    free(p_index);
    free(p_doc);
    free(p_err);
    return rc;
}
