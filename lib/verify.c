/* verify.c - `verify`: check a bucket against its manifest (sizes and ETags from one listing; with deep, the
 * sha256 of every object as it streams). Reports problems as lines; does not print. */
#include "hfs3/verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hfs3/s3.h"
#include "jobs.h"

#define LINK_SUFFIX ".rclonelink"

typedef struct listed {
    const char *rel;
    size_t index;  /* into the listing */
} listed;

static int cmp_listed(const void *a, const void *b) { return strcmp(((const listed *)a)->rel, ((const listed *)b)->rel); }

typedef struct verify_ctx {
    const hfs3_remote *r;
    const hfs3_entry **files;
    char **keys;
    char (*got)[65];
    int *failed;
    char **errors;
    jobs_progress *pr;
} verify_ctx;

static int verify_job(void *ud, size_t i, hfs3_s3 *c)
{
    verify_ctx *v = ud;
    int rc = jobs_hash_object(c, v->keys[i], NULL, v->files[i]->size, v->pr, v->got[i], NULL);
    if (rc < 0) {
        v->failed[i] = 1;
        v->errors[i] = hfs3_strdup(hfs3_errmsg());
    }
    return 0; /* one bad object must not stop the others from being checked */
}

/* Compares manifest entry e (a file or symlink) with its object obj from the listing (NULL: not listed), key
 * its object key. 0 when they agree as far as a listing can tell; otherwise appends one line naming the
 * entry, the key and the difference (missing, size, link body length, ETag) and returns 1. */
static int check_listed(const hfs3_remote *r, const hfs3_entry *e, const char *key, const hfs3_s3_object *obj,
                        hfs3_buf *problems)
{
    if (!obj) {
        jobs_problem(problems, "%s: %s: key %s is missing", r->spec, e->path, key);
        return 1;
    }
    if (e->type == HFS3_SYMLINK) {
        if (obj->size != strlen(e->target)) {
            jobs_problem(problems, "%s: %s: link object %s has %llu %s, target \"%s\" has %zu", r->spec, e->path,
                         key, (unsigned long long)obj->size, hfs3_plural(obj->size, "byte", "bytes"), e->target,
                         strlen(e->target));
            return 1;
        }
        return 0;
    }
    if (obj->size != e->size) {
        jobs_problem(problems, "%s: %s: key %s has %llu %s, the manifest says %llu", r->spec, e->path, key,
                     (unsigned long long)obj->size, hfs3_plural(obj->size, "byte", "bytes"), (unsigned long long)e->size);
        return 1;
    }
    if (e->etag && obj->etag && strcmp(e->etag, obj->etag)) {
        jobs_problem(problems, "%s: %s: key %s has ETag %s, the manifest says %s (changed since the build)", r->spec,
                     e->path, key, obj->etag, e->etag);
        return 1;
    }
    return 0;
}

/* --deep: the sha256 got (64 hex) of file e's object key against the manifest's. 0, or 1 with a line appended. */
static int check_hash(const hfs3_remote *r, const hfs3_entry *e, const char *key, const char *got, hfs3_buf *problems)
{
    if (strcmp(got, e->sha256)) {
        jobs_problem(problems, "%s: %s: sha256 of key %s is %s, the manifest says %s", r->spec, e->path, key, got,
                     e->sha256);
        return 1;
    }
    return 0;
}

int hfs3_verify(const hfs3_remote *r, const hfs3_manifest *m, int deep, const hfs3_build_opts *o,
                hfs3_buf *problems, size_t *checked)
{
    hfs3_s3 *c = NULL;
    hfs3_s3_list list = {0};
    size_t bad = 0, nfiles = 0;
    char *lprefix = NULL;
    verify_ctx v = {.r = r};
    jobs_progress pr = {.fn = o ? o->progress : NULL, .ud = o ? o->progress_ud : NULL, .phase = "verifying"};
    pthread_mutex_init(&pr.mu, NULL);
    int rc = hfs3_s3_new(r, NULL, &c);
    if (rc == 0 && *r->prefix && asprintf(&lprefix, "%s/", r->prefix) < 0)
        rc = hfs3_err(-ENOMEM, "out of memory");
    if (rc == 0)
        rc = hfs3_s3_list_objects(c, lprefix ? lprefix : "", &list);
    free(lprefix);
    if (rc < 0)
        goto done;
    listed *objs = calloc(list.n + 1, sizeof *objs);
    v.files = calloc(m->n + 1, sizeof *v.files);
    v.keys = calloc(m->n + 1, sizeof *v.keys);
    if (!objs || !v.files || !v.keys) {
        free(objs);
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < list.n; i++) {
        objs[i].rel = list.v[i].key;
        objs[i].index = i;
    }
    qsort(objs, list.n, sizeof *objs, cmp_listed);
    for (size_t i = 0; i < m->n; i++) {
        const hfs3_entry *e = &m->entries[i];
        if (e->type == HFS3_DIR)
            continue;
        char rel[HFS3_MAX_PATH + 16];
        snprintf(rel, sizeof rel, "%s%s", e->path, e->type == HFS3_SYMLINK ? LINK_SUFFIX : "");
        char *key = hfs3_remote_key(r, rel);
        if (!key) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            break;
        }
        listed probe = {.rel = key};
        listed *hit = bsearch(&probe, objs, list.n, sizeof *objs, cmp_listed);
        const hfs3_s3_object *obj = hit ? &list.v[hit->index] : NULL;
        if (checked)
            (*checked)++;
        if (check_listed(r, e, key, obj, problems)) {
            bad++;
        } else if (deep && e->type == HFS3_FILE) {
            v.files[nfiles] = e;
            v.keys[nfiles++] = key;
            key = NULL;
            pr.total += e->size;
        }
        free(key);
    }
    free(objs);
    if (rc == 0 && deep && nfiles) {
        v.got = calloc(nfiles, sizeof *v.got);
        v.failed = calloc(nfiles, sizeof *v.failed);
        v.errors = calloc(nfiles, sizeof *v.errors);
        v.pr = &pr;
        pr.files_total = nfiles;
        if (!v.got || !v.failed || !v.errors)
            rc = hfs3_err(-ENOMEM, "out of memory");
        else
            rc = jobs_run(nfiles, o && o->threads ? o->threads : 8, r, verify_job, &v);
        for (size_t i = 0; rc == 0 && i < nfiles; i++) {
            if (v.failed[i]) {
                jobs_problem(problems, "%s: %s: %s", r->spec, v.files[i]->path, v.errors[i] ? v.errors[i] : "failed");
                bad++;
            } else {
                bad += (size_t)check_hash(r, v.files[i], v.keys[i], v.got[i], problems);
            }
        }
        for (size_t i = 0; v.errors && i < nfiles; i++)
            free(v.errors[i]);
    }
    if (rc == 0 && bad)
        rc = -EINVAL;
done:
    for (size_t i = 0; v.keys && i < nfiles; i++)
        free(v.keys[i]);
    free(v.keys);
    free(v.files);
    free(v.got);
    free(v.failed);
    free(v.errors);
    hfs3_s3_list_free(&list);
    hfs3_s3_free(c);
    pthread_mutex_destroy(&pr.mu);
    return rc;
}
