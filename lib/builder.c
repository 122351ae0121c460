/* builder.c - build, publish, read back and verify manifests (include/hfs3/builder.h).
 * Owns: the mapping from a bucket listing to manifest entries (layouts, .rclonelink, bookkeeping), the choice
 * of where each sha256 comes from, publishing. Does not own: HTTP (s3.c), the document rules and bytes
 * (manifest.c), worker threads and streamed hashing (jobs.c), verify (verify.c), printing (helper/). */
#include "hfs3/builder.h"
#include "hfs3/explain.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hfs3/log.h"
#include "hfs3/s3.h"
#include "jobs.h"

#define BOOKKEEPING ".cache/huggingface/"
#define METADATA_DIR ".cache/huggingface/download/"
#define LINK_SUFFIX ".rclonelink"
#define MAX_SMALL_OBJECT 65536

/* ---- hashing ---- */

typedef struct item {
    char *rel;            /* manifest path */
    char *key;            /* object key */
    char *local;          /* local file to hash, or NULL */
    uint64_t size;
    char *etag;
    long long mtime;
    char sha256[65];
    int is_link;          /* .rclonelink object: body is the target */
    char *target;
    char *chunks;         /* chunk digests, when the content was hashed here (local or streamed) */
} item;

typedef struct hash_ctx {
    item **items;         /* the ones to hash */
    jobs_progress *pr;
    uint64_t hashed;
    pthread_mutex_t mu;
} hash_ctx;

/* A local file's sha256 and its HFS3_CHUNK_SIZE chunk digests (*chunks malloc'd), and its size. */
static int hash_file_chunks(const char *path, char hex[65], char **chunks, uint64_t *size)
{
    enum { BUF = 1 << 20 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hfs3_err(-errno, "%s: %s", path, strerror(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    jobs_chunker k;
    char *buf = malloc(BUF);
    int rc = jobs_chunker_init(&k, HFS3_CHUNK_SIZE);
    if (rc == 0 && !buf)
        rc = hfs3_err(-ENOMEM, "%s: out of memory", path);
    *size = 0;
    while (rc == 0) {
        ssize_t n = read(fd, buf, BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = hfs3_err(-errno, "%s: read: %s", path, strerror(errno));
        if (n <= 0)
            break;
        rc = jobs_chunker_add(&k, buf, (size_t)n);
        *size += (uint64_t)n;
    }
    if (rc == 0)
        rc = jobs_chunker_finish(&k, hex, chunks);
    jobs_chunker_free(&k);
    free(buf);
    close(fd);
    return rc;
}

static int hash_local_job(void *ud, size_t i, hfs3_s3 *c)
{
    hash_ctx *h = ud;
    item *it = h->items[i];
    uint64_t size = 0;
    int rc = hash_file_chunks(it->local, it->sha256, &it->chunks, &size);
    if (rc < 0)
        return rc;
    if (size != it->size)
        return hfs3_err(-EIO, "%s: changed while hashing (%llu %s, expected %llu)", it->local,
                        (unsigned long long)size, hfs3_plural(size, "byte", "bytes"), (unsigned long long)it->size);
    jobs_progress_add(h->pr, size, 1);
    return 0;
}

static int hash_s3_job(void *ud, size_t i, hfs3_s3 *c)
{
    hash_ctx *h = ud;
    item *it = h->items[i];
    return jobs_hash_object(c, it->key, it->etag, it->size, h->pr, it->sha256, &it->chunks);
}

static int link_job(void *ud, size_t i, hfs3_s3 *c)
{
    item **links = ud;
    item *it = links[i];
    hfs3_buf body;
    hfs3_buf_init(&body, 0);
    int rc = hfs3_s3_get_buf(c, it->key, HFS3_MAX_PATH, &body, NULL);
    if (rc < 0)
        return rc;
    it->target = hfs3_buf_take(&body, NULL);
    return it->target ? 0 : hfs3_err(-ENOMEM, "out of memory");
}

/* ---- the listing, turned into items ---- */

typedef struct build_state {
    const hfs3_remote *r;
    const hfs3_build_opts *o;
    hfs3_buf *problems;
    item *items;
    size_t n;
    char **dirs;          /* explicit directory markers */
    size_t ndirs;
    char **meta_keys;     /* METADATA_DIR<file>.metadata objects, relative to the prefix */
    size_t nmeta;
} build_state;

static void items_free(item *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].rel);
        free(v[i].key);
        free(v[i].local);
        free(v[i].etag);
        free(v[i].target);
        free(v[i].chunks);
    }
    free(v);
}

static int cmp_item(const void *a, const void *b) { return strcmp(((const item *)a)->rel, ((const item *)b)->rel); }
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_lfs_blob(const char *rel)
{
    return hfs3_starts_with(rel, "blobs/") && hfs3_is_sha256_hex(rel + 6);
}

/* Reads `.cache/huggingface/download/<rel>.metadata` objects and takes line 2 when it is a sha256
 * (huggingface_hub writes the LFS sha256 there; for small git files it is a sha1, which is no use), under
 * huggingface_hub's own rule (_local_folder.py, read_download_metadata): the metadata holds only while the
 * file's mtime is at most one second past its timestamp (line 3); a file edited after the download is hashed.
 * The file's mtime is the local file's under --local, else the one rclone records in X-Amz-Meta-Mtime (a HEAD);
 * unknown (another uploader): hashed. Also returns the commit (line 1) when every metadata file agrees. */
typedef struct meta_ctx {
    build_state *st;
    char **bodies;
    double *mtimes;       /* the described file's mtime, -1 unknown */
} meta_ctx;

static item *find_item(build_state *st, const char *rel)
{
    item probe = {.rel = (char *)rel};
    if (!st->n)
        return NULL;
    return bsearch(&probe, st->items, st->n, sizeof *st->items, cmp_item);
}

/* The item a metadata key describes, or NULL. */
static item *meta_item(build_state *st, const char *meta_key)
{
    const char *described = meta_key + strlen(METADATA_DIR);
    char *file = hfs3_strndup(described, strlen(described) - strlen(".metadata"));
    item *it = file ? find_item(st, file) : NULL;
    free(file);
    return it && !it->is_link ? it : NULL;
}

/* Whether line 2 of a metadata body is a sha256 (then the file's mtime is worth a HEAD). */
static int meta_has_sha(const char *body)
{
    const char *l2 = body ? strchr(body, '\n') : NULL;
    char hex[65];
    if (!l2 || strcspn(l2 + 1, "\r\n") != 64)
        return 0;
    memcpy(hex, l2 + 1, 64);
    hex[64] = 0;
    return hfs3_is_sha256_hex(hex);
}

static int meta_job(void *ud, size_t i, hfs3_s3 *c)
{
    meta_ctx *m = ud;
    const char *local = m->st->o->local_dir;
    char path[HFS3_MAX_PATH * 2];
    m->mtimes[i] = -1;
    if (local) {
        /* --local: the folder rclone uploaded holds the same bookkeeping; reading it saves a GET each */
        snprintf(path, sizeof path, "%s/%s", local, m->st->meta_keys[i]);
        if (hfs3_read_file(path, MAX_SMALL_OBJECT, &m->bodies[i], NULL) < 0)
            hfs3_err_clear();
    }
    int rc = 0;
    if (!m->bodies[i]) {
        char *key = hfs3_remote_key(m->st->r, m->st->meta_keys[i]);
        if (!key)
            return hfs3_err(-ENOMEM, "out of memory");
        hfs3_buf body;
        hfs3_buf_init(&body, 0);
        rc = hfs3_s3_get_buf(c, key, MAX_SMALL_OBJECT, &body, NULL);
        free(key);
        if (rc < 0)
            return rc;
        m->bodies[i] = hfs3_buf_take(&body, NULL);
    }
    item *it = meta_item(m->st, m->st->meta_keys[i]);
    if (!it || !meta_has_sha(m->bodies[i]))
        return 0;
    struct stat lst;
    if (local && (size_t)snprintf(path, sizeof path, "%s/%s", local, it->rel) < sizeof path &&
        stat(path, &lst) == 0) {
        m->mtimes[i] = (double)lst.st_mtim.tv_sec + (double)lst.st_mtim.tv_nsec / 1e9;
        return 0;
    }
    hfs3_s3_object o;
    if ((rc = hfs3_s3_head(c, it->key, &o)) < 0)
        return rc;
    if (o.src_mtime > 0)
        m->mtimes[i] = o.src_mtime;
    hfs3_s3_object_free(&o);
    return 0;
}

static int use_metadata(build_state *st, char **revision, hfs3_build_stats *stats)
{
    if (st->nmeta == 0)
        return 0;
    meta_ctx m = {.st = st, .bodies = calloc(st->nmeta, sizeof(char *)),
                  .mtimes = calloc(st->nmeta, sizeof(double))};
    if (!m.bodies || !m.mtimes) {
        free(m.bodies);
        free(m.mtimes);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    int rc = jobs_run(st->nmeta, 8, st->r, meta_job, &m);
    int agree = 1;
    char *commit = NULL;
    for (size_t i = 0; rc == 0 && i < st->nmeta; i++) {
        char *lines[3] = {0};
        char *save = NULL, *p = m.bodies[i];
        for (int l = 0; l < 3; l++) {
            lines[l] = strtok_r(l ? NULL : p, "\r\n", &save);
            if (!lines[l])
                break;
        }
        if (lines[0] && strlen(lines[0]) == 40) {
            if (!commit)
                commit = hfs3_strdup(lines[0]);
            else if (strcmp(commit, lines[0]))
                agree = 0;
        }
        item *it = meta_item(st, st->meta_keys[i]);
        if (!it || it->sha256[0] || !lines[1] || !hfs3_is_sha256_hex(lines[1]))
            continue;
        char *end = NULL;
        double stamp = lines[2] ? strtod(lines[2], &end) : 0;
        /* huggingface_hub's rule, its one second of slack included (mtimes are not always precise) */
        if (!lines[2] || end == lines[2] || m.mtimes[i] < 0 || m.mtimes[i] - 1 > stamp) {
            hfs3_debug("%s: %s: %s; hashing the file", st->r->spec, st->meta_keys[i],
                       m.mtimes[i] < 0 ? "the file's mtime is unknown (no X-Amz-Meta-Mtime: upload with rclone)"
                                       : "the file changed after the metadata was written");
            stats->metadata_outdated++;
            continue;
        }
        memcpy(it->sha256, lines[1], 65);
        stats->from_metadata++;
    }
    for (size_t i = 0; i < st->nmeta; i++)
        free(m.bodies[i]);
    free(m.bodies);
    free(m.mtimes);
    if (rc == 0 && commit && agree && revision && !*revision)
        *revision = commit;
    else
        free(commit);
    return rc;
}

static int add_item(build_state *st, const hfs3_s3_object *o, const char *rel)
{
    item *v = realloc(st->items, (st->n + 1) * sizeof *v);
    if (!v)
        return hfs3_err(-ENOMEM, "out of memory");
    st->items = v;
    item *it = &v[st->n];
    memset(it, 0, sizeof *it);
    it->is_link = hfs3_ends_with(rel, LINK_SUFFIX);
    it->rel = it->is_link ? hfs3_strndup(rel, strlen(rel) - strlen(LINK_SUFFIX)) : hfs3_strdup(rel);
    it->key = hfs3_strdup(o->key);
    it->etag = hfs3_strdup(o->etag);
    it->size = o->size;
    it->mtime = o->mtime;
    st->n++;
    if (!it->rel || !it->key || (o->etag && !it->etag))
        return hfs3_err(-ENOMEM, "out of memory");
    return 0;
}

static int push_str(char ***v, size_t *n, const char *s, size_t len)
{
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return -ENOMEM;
    *v = nv;
    if (!(nv[*n] = hfs3_strndup(s, len)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

static int read_listing(build_state *st, const hfs3_s3_list *list)
{
    const char *prefix = st->r->prefix;
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < list->n; i++) {
        const hfs3_s3_object *o = &list->v[i];
        const char *rel = o->key;
        if (plen) {
            if (strncmp(rel, prefix, plen) || rel[plen] != '/')
                continue;
            rel += plen + 1;
        }
        if (!*rel || hfs3_starts_with(rel, ".hfs3/"))
            continue;
        size_t len = strlen(rel);
        if (hfs3_starts_with(rel, BOOKKEEPING)) {
            if (hfs3_starts_with(rel, METADATA_DIR) && hfs3_ends_with(rel, ".metadata")) {
                if (push_str(&st->meta_keys, &st->nmeta, rel, len) < 0)
                    return hfs3_err(-ENOMEM, "out of memory");
            }
            continue;
        }
        if (rel[len - 1] == '/') {
            if (push_str(&st->dirs, &st->ndirs, rel, len - 1) < 0)
                return hfs3_err(-ENOMEM, "out of memory");
            continue;
        }
        int rc = add_item(st, o, rel);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- the local folder (--local): what rclone should have uploaded ---- */

typedef struct local_file {
    char *rel;
    char *path;
    uint64_t size;
    char *target;  /* symlinks */
} local_file;

typedef struct local_list {
    local_file *v;
    size_t n;
} local_list;

static int walk_local(const char *root, const char *rel, local_list *out)
{
    char dirpath[HFS3_MAX_PATH * 2];
    snprintf(dirpath, sizeof dirpath, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(dirpath);
    if (!d)
        return hfs3_err(-errno, "--local %s: %s", dirpath, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char crel[HFS3_MAX_PATH * 2], cpath[HFS3_MAX_PATH * 3];
        snprintf(crel, sizeof crel, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        snprintf(cpath, sizeof cpath, "%s/%s", root, crel);
        struct stat sb;
        if (lstat(cpath, &sb) < 0) {
            rc = hfs3_err(-errno, "--local %s: %s", cpath, strerror(errno));
            break;
        }
        if (S_ISDIR(sb.st_mode)) {
            if ((rc = walk_local(root, crel, out)) < 0)
                break;
            continue;
        }
        if (!S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
            continue;
        local_file *v = realloc(out->v, (out->n + 1) * sizeof *v);
        if (!v) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            break;
        }
        out->v = v;
        local_file *f = &v[out->n++];
        memset(f, 0, sizeof *f);
        f->rel = hfs3_strdup(crel);
        f->path = hfs3_strdup(cpath);
        f->size = (uint64_t)sb.st_size;
        if (S_ISLNK(sb.st_mode)) {
            char t[HFS3_MAX_PATH + 1];
            ssize_t tn = readlink(cpath, t, sizeof t - 1);
            if (tn < 0) {
                rc = hfs3_err(-errno, "--local readlink %s: %s", cpath, strerror(errno));
                break;
            }
            f->target = hfs3_strndup(t, (size_t)tn);
            f->size = (uint64_t)tn;
        }
        if (!f->rel || !f->path || (S_ISLNK(sb.st_mode) && !f->target)) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            break;
        }
    }
    closedir(d);
    return rc;
}

static void local_free(local_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].rel);
        free(l->v[i].path);
        free(l->v[i].target);
    }
    free(l->v);
}

typedef struct listed {
    const char *rel;   /* points into the listing */
    uint64_t size;
} listed;

static int cmp_listed(const void *a, const void *b) { return strcmp(((const listed *)a)->rel, ((const listed *)b)->rel); }

/* Every local file must be an object of the same size (a local symlink: NAME.rclonelink holding the target).
 * Attaches local paths to the items so they are hashed here instead of downloaded. */
static int check_local(build_state *st, const hfs3_s3_list *list, hfs3_buf *problems)
{
    local_list loc = {0};
    int rc = walk_local(st->o->local_dir, "", &loc);
    size_t plen = strlen(st->r->prefix);
    listed *objs = calloc(list->n + 1, sizeof *objs);
    size_t nobj = 0;
    if (rc == 0 && !objs)
        rc = hfs3_err(-ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < list->n; i++) {
        const char *rel = list->v[i].key;
        if (plen) {
            if (strncmp(rel, st->r->prefix, plen) || rel[plen] != '/')
                continue;
            rel += plen + 1;
        }
        objs[nobj].rel = rel;
        objs[nobj++].size = list->v[i].size;
    }
    if (rc == 0 && nobj)
        qsort(objs, nobj, sizeof *objs, cmp_listed);
    size_t bad = 0;
    for (size_t i = 0; rc == 0 && i < loc.n; i++) {
        local_file *f = &loc.v[i];
        char want[HFS3_MAX_PATH * 2];
        snprintf(want, sizeof want, "%s%s", f->rel, f->target ? LINK_SUFFIX : "");
        listed probe = {.rel = want};
        listed *hit = bsearch(&probe, objs, nobj, sizeof *objs, cmp_listed);
        char *key = hfs3_remote_key(st->r, want);
        if (!hit) {
            jobs_problem(problems, "%s: missing from bucket %s: key %s (local %s)", st->r->spec, st->r->bucket,
                    key ? key : want, f->path);
            bad++;
        } else if (hit->size != f->size) {
            jobs_problem(problems, "%s: key %s has %llu %s, local %s has %llu", st->r->spec, key ? key : want,
                    (unsigned long long)hit->size, hfs3_plural(hit->size, "byte", "bytes"), f->path,
                    (unsigned long long)f->size);
            bad++;
        } else if (!f->target) {
            item *it = find_item(st, f->rel);
            if (it && !it->is_link) {
                it->local = f->path;
                f->path = NULL;
            }
        }
        free(key);
    }
    free(objs);
    local_free(&loc);
    if (rc == 0 && bad)
        rc = -EINVAL;
    return rc;
}

/* ---- checks a manifest reader would otherwise reject, named by key ---- */

static int link_escapes(const char *rel, const char *target)
{
    if (target[0] == '/')
        return 1;
    int depth = 0;
    for (const char *p = rel; *p; p++)
        if (*p == '/')
            depth++;
    const char *p = target;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return 1;
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            depth++;
        }
        p += len;
        if (*p == '/')
            p++;
    }
    return 0;
}

static size_t check_conflicts(build_state *st, hfs3_buf *problems)
{
    size_t bad = 0;
    for (size_t i = 0; i < st->n; i++) {
        item *it = &st->items[i];
        if (i + 1 < st->n && !strcmp(it->rel, st->items[i + 1].rel)) {
            jobs_problem(problems, "%s: both %s and %s exist: a path cannot be a file and a symlink", st->r->spec,
                    it->is_link ? st->items[i + 1].key : it->key, it->is_link ? it->key : st->items[i + 1].key);
            bad++;
        }
        /* an object `a` beside objects under `a/`: the first path >= "a/" tells */
        size_t lo = i + 1, hi = st->n, len = strlen(it->rel);
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = strncmp(st->items[mid].rel, it->rel, len);
            if (c < 0 || (c == 0 && st->items[mid].rel[len] < '/'))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < st->n && !strncmp(st->items[lo].rel, it->rel, len) && st->items[lo].rel[len] == '/') {
            jobs_problem(problems, "%s: key %s is an object but %s is also under it as a directory", st->r->spec,
                    it->key, st->items[lo].key);
            bad++;
        }
        for (size_t d = 0; d < st->ndirs; d++)
            if (!strcmp(st->dirs[d], it->rel)) {
                jobs_problem(problems, "%s: key %s is an object and a directory marker %s/ too", st->r->spec, it->key,
                        it->rel);
                bad++;
            }
        if (it->is_link && it->target) {
            if (link_escapes(it->rel, it->target)) {
                jobs_problem(problems, "%s: key %s: symlink target \"%s\" leaves the tree", st->r->spec, it->key,
                        it->target);
                bad++;
            } else if (hfs3_manifest_check_path(it->rel) < 0) {
                jobs_problem(problems, "%s: key %s: %s", st->r->spec, it->key, hfs3_errmsg());
                bad++;
            }
        } else if (hfs3_manifest_check_path(it->rel) < 0) {
            jobs_problem(problems, "%s: key %s: %s", st->r->spec, it->key, hfs3_errmsg());
            bad++;
        }
    }
    return bad;
}

static const char *detect_layout(build_state *st)
{
    int blobs = 0, snaps = 0, refs = 0;
    for (size_t i = 0; i < st->n; i++) {
        blobs |= hfs3_starts_with(st->items[i].rel, "blobs/");
        snaps |= hfs3_starts_with(st->items[i].rel, "snapshots/");
        refs |= hfs3_starts_with(st->items[i].rel, "refs/");
    }
    return blobs && snaps && refs ? "hf-cache" : "flat";
}

/* An HF cache repository uploaded without --links: rclone skips symlinks by default, and every file under
 * snapshots/ is one, so blobs/ (named by digest) and refs/ arrive and snapshots/ does not. A flat manifest of
 * that is of no use to a loader (and would stream-hash every blob). */
static int links_skipped(build_state *st)
{
    int blobs = 0, refs = 0;
    for (size_t i = 0; i < st->n; i++) {
        const char *rel = st->items[i].rel;
        if (hfs3_starts_with(rel, "snapshots/"))
            return 0;
        if (hfs3_starts_with(rel, "blobs/") && !st->items[i].is_link) {
            size_t n = strlen(rel + 6), k = strspn(rel + 6, "0123456789abcdef");
            if (k != n || (n != 64 && n != 40))
                return 0; /* a folder that merely has a blobs/ */
            blobs = 1;
        }
        refs |= hfs3_starts_with(rel, "refs/");
    }
    for (size_t i = 0; i < st->ndirs; i++)
        if (hfs3_starts_with(st->dirs[i], "snapshots"))
            return 0;
    return blobs && refs;
}

/* The manifest of the items (every sha256 and link target known by now) and the directory markers. Pure: no I/O.
 * On success *out is the caller's. A document readers would reject is a problem line and -EINVAL. */
static int make_manifest(build_state *st, const char *layout, const char *revision, hfs3_manifest **out)
{
    *out = NULL;
    hfs3_manifest *m = hfs3_manifest_new(layout, revision);
    if (!m)
        return hfs3_err(-ENOMEM, "out of memory");
    int rc = 0;
    for (size_t d = 0; rc == 0 && d < st->ndirs; d++) {
        hfs3_entry e = {.path = st->dirs[d], .type = HFS3_DIR};
        rc = hfs3_manifest_add(m, &e);
    }
    for (size_t i = 0; rc == 0 && i < st->n; i++) {
        item *it = &st->items[i];
        hfs3_entry e = {.path = it->rel};
        if (it->is_link) {
            e.type = HFS3_SYMLINK;
            e.target = it->target;
        } else {
            e.type = HFS3_FILE;
            e.size = it->size;
            memcpy(e.sha256, it->sha256, 65);
            e.etag = it->etag;
            e.mtime = it->mtime;
            /* only digests of content hashed here: never invented for a sha256 taken from a name */
            e.chunks = it->chunks;
            if (it->chunks)
                m->chunk_size = HFS3_CHUNK_SIZE;
        }
        rc = hfs3_manifest_add(m, &e);
    }
    if (rc == 0 && (rc = hfs3_manifest_finish(m)) < 0) {
        jobs_problem(st->problems, "%s: the manifest would be rejected by readers: %s", st->r->spec, hfs3_errmsg());
        rc = -EINVAL;
    }
    if (rc < 0) {
        hfs3_manifest_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int hfs3_build(const hfs3_remote *r, const hfs3_build_opts *o, hfs3_manifest **out, hfs3_buf *problems,
               hfs3_build_stats *stats)
{
    hfs3_build_opts defaults = {0};
    hfs3_build_stats dummy;
    if (!o)
        o = &defaults;
    if (!stats)
        stats = &dummy;
    memset(stats, 0, sizeof *stats);
    *out = NULL;
    build_state st = {.r = r, .o = o, .problems = problems};
    hfs3_s3_list list = {0};
    hfs3_s3 *c = NULL;
    hfs3_manifest *m = NULL;
    char *revision = NULL;
    item **queue = NULL;
    jobs_progress pr = {.fn = o->progress, .ud = o->progress_ud};
    pthread_mutex_init(&pr.mu, NULL);
    int rc = hfs3_s3_new(r, NULL, &c);
    if (rc < 0)
        goto done;
    char *lprefix = NULL;
    if (*r->prefix && asprintf(&lprefix, "%s/", r->prefix) < 0) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto done;
    }
    rc = hfs3_s3_list_objects(c, lprefix ? lprefix : "", &list);
    free(lprefix);
    if (rc < 0)
        goto done;
    if ((rc = read_listing(&st, &list)) < 0)
        goto done;
    if (st.n)
        qsort(st.items, st.n, sizeof *st.items, cmp_item);
    if (st.ndirs)
        qsort(st.dirs, st.ndirs, sizeof *st.dirs, cmp_str);
    if (st.n == 0 && st.ndirs == 0) {
        rc = hfs3_err(-ENOENT, "%s: no objects under s3://%s/%s", r->spec, r->bucket, r->prefix);
        goto done;
    }
    const char *layout = o->layout && strcmp(o->layout, "auto") ? o->layout : detect_layout(&st);
    if ((!o->layout || !strcmp(o->layout, "auto")) && links_skipped(&st)) {
        jobs_problem(problems, "%s: blobs/ and refs/ but no snapshots/: an HF cache repository uploaded without its "
                     "symlinks (rclone skips them unless told); upload it again with rclone copy --links "
                     "LOCAL_REPO %s, then build (or build --layout flat to take it as it is)", r->spec, r->spec);
        rc = -EINVAL;
        goto done;
    }

    if (o->local_dir && (rc = check_local(&st, &list, problems)) < 0)
        goto done;

    /* symlink bodies */
    size_t nlinks = 0;
    queue = calloc(st.n + 1, sizeof *queue);
    if (!queue) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < st.n; i++)
        if (st.items[i].is_link)
            queue[nlinks++] = &st.items[i];
    if ((rc = jobs_run(nlinks, 8, r, link_job, queue)) < 0)
        goto done;
    if (check_conflicts(&st, problems)) {
        rc = -EINVAL;
        goto done;
    }

    /* sha256 sources, cheapest first */
    size_t nlocal = 0;
    for (size_t i = 0; i < st.n; i++) {
        item *it = &st.items[i];
        if (it->is_link)
            continue;
        if (it->local)
            queue[nlocal++] = it;
        else if (!strcmp(layout, "hf-cache") && is_lfs_blob(it->rel)) {
            memcpy(it->sha256, it->rel + 6, 65);
            stats->from_lfs_name++;
        }
    }
    /* largest first, so the threads finish together */
    for (size_t i = 1; i < nlocal; i++)
        for (size_t j = i; j > 0 && queue[j - 1]->size < queue[j]->size; j--) {
            item *t = queue[j];
            queue[j] = queue[j - 1];
            queue[j - 1] = t;
        }
    hash_ctx h = {.items = queue, .pr = &pr};
    pr.phase = "hashing local files";
    pr.total = 0;
    for (size_t i = 0; i < nlocal; i++)
        pr.total += queue[i]->size;
    pr.files_total = nlocal;
    if ((rc = jobs_run(nlocal, o->threads ? o->threads : hfs3_ncpu(), NULL, hash_local_job, &h)) < 0)
        goto done;
    stats->from_local = nlocal;
    stats->bytes_hashed += pr.total;

    if (!strcmp(layout, "hf-cache")) {
        item *ref = find_item(&st, "refs/main");
        if (ref && !ref->is_link) {
            hfs3_buf body;
            hfs3_buf_init(&body, 0);
            if ((rc = hfs3_s3_get_buf(c, ref->key, MAX_SMALL_OBJECT, &body, NULL)) < 0)
                goto done;
            char *s = hfs3_buf_take(&body, NULL);
            size_t len = s ? strcspn(s, " \t\r\n") : 0;
            if (s && len)
                revision = hfs3_strndup(s, len);
            free(s);
        }
    }
    if ((rc = use_metadata(&st, &revision, stats)) < 0)
        goto done;

    size_t nremote = 0;
    pr.total = pr.done = pr.last_report = 0;
    pr.files_done = 0;
    for (size_t i = 0; i < st.n; i++)
        if (!st.items[i].is_link && !st.items[i].sha256[0]) {
            queue[nremote++] = &st.items[i];
            pr.total += st.items[i].size;
        }
    pr.phase = "hashing objects";
    pr.files_total = nremote;
    if ((rc = jobs_run(nremote, o->threads ? o->threads : 8, r, hash_s3_job, &h)) < 0)
        goto done;
    stats->from_s3 = nremote;
    stats->bytes_hashed += pr.total;

    if ((rc = make_manifest(&st, layout, revision, &m)) < 0)
        goto done;
    *out = m;
    m = NULL;
done:
    hfs3_manifest_free(m);
    free(revision);
    free(queue);
    items_free(st.items, st.n);
    for (size_t d = 0; d < st.ndirs; d++)
        free(st.dirs[d]);
    free(st.dirs);
    for (size_t d = 0; d < st.nmeta; d++)
        free(st.meta_keys[d]);
    free(st.meta_keys);
    hfs3_s3_list_free(&list);
    hfs3_s3_free(c);
    pthread_mutex_destroy(&pr.mu);
    return rc;
}

/* ---- publish / read back ---- */

int hfs3_publish(const hfs3_remote *r, const hfs3_manifest *m, int *written)
{
    hfs3_buf doc, old;
    hfs3_buf_init(&doc, HFS3_MAX_DOC);
    hfs3_buf_init(&old, HFS3_MAX_DOC);
    hfs3_s3 *c = NULL;
    char *key = hfs3_remote_manifest_key(r);
    *written = 0;
    int rc = key ? hfs3_manifest_write(m, &doc) : hfs3_err(-ENOMEM, "out of memory");
    if (rc < 0)
        goto done;
    if ((rc = hfs3_s3_new(r, NULL, &c)) < 0)
        goto done;
    rc = hfs3_s3_get_buf(c, key, HFS3_MAX_DOC, &old, NULL);
    if (rc == 0 && old.len == doc.len && !memcmp(hfs3_buf_str(&old), hfs3_buf_str(&doc), doc.len))
        goto done;
    if (rc < 0 && rc != -ENOENT && rc != -EFBIG)
        goto done;
    if ((rc = hfs3_s3_put(c, key, hfs3_buf_str(&doc), doc.len, "application/json", NULL)) == 0)
        *written = 1;
done:
    free(key);
    hfs3_buf_free(&doc);
    hfs3_buf_free(&old);
    hfs3_s3_free(c);
    return rc;
}

int hfs3_fetch_manifest(const hfs3_remote *r, hfs3_manifest **out, hfs3_buf *doc)
{
    hfs3_buf body;
    hfs3_buf_init(&body, HFS3_MAX_DOC);
    hfs3_s3 *c = NULL;
    char *key = hfs3_remote_manifest_key(r);
    int rc = key ? hfs3_s3_new(r, NULL, &c) : hfs3_err(-ENOMEM, "out of memory");
    if (rc == 0)
        rc = hfs3_s3_get_buf(c, key, HFS3_MAX_DOC, &body, NULL);
    if (rc == -EFBIG)
        rc = hfs3_err(-E2BIG, "%s: manifest %s is larger than the %u-byte limit", r->spec, key, HFS3_MAX_DOC);
    else if (rc < 0 && key) /* a missing bucket or manifest, refused keys: say which and what to do */
        rc = hfs3_explain_s3(r, key, rc);
    if (rc == 0 && (rc = hfs3_manifest_parse(hfs3_buf_str(&body), body.len, out)) < 0)
        hfs3_err_wrap(rc, "%s: s3://%s/%s", r->spec, r->bucket, key);
    if (rc == 0 && doc) {
        *doc = body;
        hfs3_buf_init(&body, 0);
    }
    free(key);
    hfs3_buf_free(&body);
    hfs3_s3_free(c);
    return rc;
}

