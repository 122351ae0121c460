/* hub.c - a hub prefix (include/hfs3/hub.h): its repository list from one delimiter listing, the cache file the
 * shim reads it from, and `build --all`'s test of whether a repository changed since its manifest was built. */
#include "hfs3/hub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hfs3/builder.h"
#include "hfs3/index.h"
#include "hfs3/s3.h"
#include "hfs3/util.h"

#define BOOKKEEPING ".cache/huggingface/"
#define LINK_SUFFIX ".rclonelink"

int hfs3_hub_name_ok(const char *name)
{
    return hfs3_hub_name_okn(name, strlen(name));
}

void hfs3_hub_names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int hfs3_hub_list(const hfs3_remote *r, char ***names, size_t *n, int *has_manifest)
{
    hfs3_s3 *s3 = NULL;
    hfs3_s3_list objs = {0}, pre = {0};
    char *lprefix = NULL, **v = NULL;
    size_t nv = 0;
    *names = NULL;
    *n = 0;
    *has_manifest = 0;
    int rc = hfs3_s3_new(r, NULL, &s3);
    if (rc < 0)
        return rc;
    if (asprintf(&lprefix, "%s%s", r->prefix, *r->prefix ? "/" : "") < 0) {
        lprefix = NULL;
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = hfs3_s3_list_dir(s3, lprefix, &objs, &pre)) < 0)
        goto out;
    size_t pl = strlen(lprefix);
    if (pre.n && !(v = calloc(pre.n, sizeof *v))) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < pre.n; i++) {
        const char *k = pre.v[i].key;
        size_t kl = strlen(k);
        if (kl <= pl + 1 || strncmp(k, lprefix, pl) || k[kl - 1] != '/')
            continue;
        char *name = hfs3_strndup(k + pl, kl - pl - 1);
        if (!name) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            goto out;
        }
        if (!strcmp(name, ".hfs3"))
            *has_manifest = 1;
        if (!hfs3_hub_name_ok(name)) {
            free(name);
            continue;
        }
        v[nv++] = name;
    }
    if (nv)
        qsort(v, nv, sizeof *v, cmp_name);
    size_t u = 0;
    for (size_t i = 0; i < nv; i++) {
        if (u && !strcmp(v[u - 1], v[i]))
            free(v[i]);
        else
            v[u++] = v[i];
    }
    *names = v;
    *n = u;
    v = NULL;
    nv = 0;
out:
    hfs3_hub_names_free(v, nv);
    hfs3_s3_list_free(&objs);
    hfs3_s3_list_free(&pre);
    free(lprefix);
    hfs3_s3_free(s3);
    return rc;
}

char *hfs3_hub_repo_spec(const char *hub, const char *name)
{
    size_t n = strlen(hub);
    while (n > 0 && hub[n - 1] == '/')
        n--;
    char *s = NULL;
    if (asprintf(&s, "%.*s/%s", (int)n, hub, name) < 0)
        return NULL;
    return s;
}

int hfs3_hub_install(const hfs3_cache *c, int mfd, const char *mdir, char *const *names, size_t n)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    for (size_t i = 0; i < n; i++)
        if (hfs3_buf_addf(&b, "%s\n", names[i]) < 0) {
            hfs3_buf_free(&b);
            return hfs3_err(-ENOMEM, "out of memory");
        }
    int rc = hfs3_cache_write_atomic(mfd, "repos", hfs3_buf_str(&b), b.len, c->entry_mode, mdir);
    hfs3_buf_free(&b);
    if (rc < 0)
        return rc;
    /* the prefix was a repository before: its index must not win over the list */
    unlinkat(mfd, "index", 0);
    unlinkat(mfd, "manifest.json", 0);
    unlinkat(mfd, "etag", 0);
    return 0;
}

int hfs3_hub_repo_unchanged(const hfs3_remote *r, const char *layout, int *unchanged)
{
    *unchanged = 0;
    hfs3_manifest *m = NULL;
    hfs3_s3 *s3 = NULL;
    hfs3_s3_list list = {0};
    char *lprefix = NULL, *mkey = hfs3_remote_manifest_key(r);
    if (!mkey)
        return hfs3_err(-ENOMEM, "out of memory");
    int rc = hfs3_fetch_manifest(r, &m, NULL);
    if (rc == -ENOENT) {
        rc = 0;   /* none yet: build it */
        goto out;
    }
    if (rc < 0) {
        /* a stored manifest readers reject: build a good one over it */
        rc = 0;
        goto out;
    }
    if (layout && strcmp(layout, "auto") && strcmp(layout, m->layout))
        goto out;
    if ((rc = hfs3_s3_new(r, NULL, &s3)) < 0)
        goto out;
    if (asprintf(&lprefix, "%s%s", r->prefix, *r->prefix ? "/" : "") < 0) {
        lprefix = NULL;
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = hfs3_s3_list_objects(s3, lprefix, &list)) < 0)
        goto out;
    long long mtime = -1;
    for (size_t i = 0; i < list.n; i++)
        if (!strcmp(list.v[i].key, mkey))
            mtime = list.v[i].mtime;
    if (mtime < 0)
        goto out;
    size_t pl = strlen(lprefix), seen = 0, want = 0;
    for (size_t i = 0; i < m->n; i++)
        want += m->entries[i].type != HFS3_DIR;
    for (size_t i = 0; i < list.n; i++) {
        const hfs3_s3_object *o = &list.v[i];
        const char *rel = o->key + pl;
        if (strncmp(o->key, lprefix, pl) || !*rel || hfs3_starts_with(rel, ".hfs3/") ||
            hfs3_starts_with(rel, BOOKKEEPING))
            continue;
        size_t len = strlen(rel);
        char *path = NULL;
        int link = hfs3_ends_with(rel, LINK_SUFFIX), dir = rel[len - 1] == '/';
        if (!(path = hfs3_strndup(rel, len - (dir ? 1 : link ? strlen(LINK_SUFFIX) : 0)))) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            goto out;
        }
        const hfs3_entry *e = hfs3_manifest_find(m, path);
        free(path);
        if (!e)
            goto out;
        if (dir) {
            if (e->type != HFS3_DIR)
                goto out;
            continue;
        }
        if (link) {
            if (e->type != HFS3_SYMLINK || o->mtime > mtime)
                goto out;
        } else if (e->type != HFS3_FILE || e->size != o->size || !e->etag || !o->etag ||
                   strcmp(e->etag, o->etag)) {
            goto out;
        }
        seen++;
    }
    *unchanged = seen == want;
out:
    hfs3_manifest_free(m);
    hfs3_s3_list_free(&list);
    hfs3_s3_free(s3);
    free(lprefix);
    free(mkey);
    return rc;
}

int hfs3_hub_load(const hfs3_cache *c, const char *spec, char ***names, size_t *n)
{
    char *mdir = NULL, *text = NULL, **v = NULL;
    size_t len = 0, nv = 0;
    *names = NULL;
    *n = 0;
    int fd = hfs3_cache_mount_dir(c, spec, 0, &mdir);
    if (fd < 0)
        return fd;
    int rc = hfs3_cache_read(c, fd, "repos", 16u << 20, &text, &len, NULL, mdir);
    close(fd);
    for (char *p = text, *nl; rc == 0 && p && (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = 0;
        if (!hfs3_hub_name_ok(p))
            continue;
        char **w = realloc(v, (nv + 1) * sizeof *w);
        if (!w || !(w[nv] = hfs3_strdup(p))) {
            if (w)
                v = w;
            rc = hfs3_err(-ENOMEM, "out of memory");
            break;
        }
        v = w;
        nv++;
    }
    free(text);
    free(mdir);
    if (rc < 0) {
        hfs3_hub_names_free(v, nv);
        return rc;
    }
    *names = v;
    *n = nv;
    return 0;
}
