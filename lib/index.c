/* index.c - writes the binary index of a manifest (include/hfs3/index.h) and the directory skeleton the
 * shim presents mount directories with (mount_dir/tree/). Owns the writer only: the reader is in shim/,
 * fetching and validating manifests is manifest.c's and cache.c's. */
#include "hfs3/index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hfs3/cache.h"
#include "hfs3/manifest.h"
#include "hfs3/util.h"

/* qsort_r context: bytewise order of two children by name. */
struct sort_ctx {
    const struct hfs3_index_entry *ents;
    const char *strs;
};

static int by_name_ctx(const void *a, const void *b, void *arg)
{
    const struct sort_ctx *c = arg;
    const struct hfs3_index_entry *x = &c->ents[*(const uint32_t *)a], *y = &c->ents[*(const uint32_t *)b];
    return strcmp(c->strs + x->name_off, c->strs + y->name_off);
}

/* Entry number of path's parent directory: 0 (the root) for a top-level path. */
static int parent_of(const hfs3_manifest *m, const char *path, uint32_t *out)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        *out = 0;
        return 0;
    }
    char buf[HFS3_MAX_PATH + 1];
    size_t n = (size_t)(slash - path);
    if (n > HFS3_MAX_PATH)
        return hfs3_err(-ENAMETOOLONG, "index: \"%s\": path too long", path);
    memcpy(buf, path, n);
    buf[n] = 0;
    const hfs3_entry *p = hfs3_manifest_find(m, buf);
    if (!p || p->type != HFS3_DIR)
        return hfs3_err(-EINVAL, "index: \"%s\": parent is not a directory", path);
    *out = (uint32_t)(p - m->entries) + 1;
    return 0;
}

/* Builds the index bytes of m into out. */
static int build(const hfs3_manifest *m, hfs3_buf *out)
{
    size_t n = m->n + 1, strings_len = 1;
    for (size_t i = 0; i < m->n; i++) {
        strings_len += strlen(m->entries[i].path) + 1;
        if (m->entries[i].type == HFS3_SYMLINK)
            strings_len += strlen(m->entries[i].target ? m->entries[i].target : "") + 1;
    }
    if (n > HFS3_MAX_ENTRIES + 1 || strings_len > UINT32_MAX)
        return hfs3_err(-E2BIG, "index: manifest too large");
    struct hfs3_index_entry *ents = calloc(n, sizeof *ents);
    uint32_t *kids = calloc(n, sizeof *kids);
    uint32_t *fill = calloc(n, sizeof *fill);
    char *strs = malloc(strings_len);
    int rc = 0;
    if (!ents || !kids || !fill || !strs) {
        rc = hfs3_err(-ENOMEM, "index: out of memory");
        goto out;
    }
    size_t so = 0;
    strs[so++] = 0;
    ents[0].type = HFS3_IX_DIR;
    ents[0].resolved = HFS3_INDEX_NONE;
    for (size_t i = 0; i < m->n; i++) {
        const hfs3_entry *e = &m->entries[i];
        struct hfs3_index_entry *x = &ents[i + 1];
        x->type = e->type == HFS3_DIR ? HFS3_IX_DIR : e->type == HFS3_FILE ? HFS3_IX_FILE : HFS3_IX_SYMLINK;
        if ((rc = parent_of(m, e->path, &x->parent)) < 0)
            goto out;
        size_t pl = strlen(e->path);
        const char *slash = strrchr(e->path, '/');
        size_t nl = slash ? pl - (size_t)(slash - e->path) - 1 : pl;
        x->path_off = (uint32_t)so;
        x->path_len = (uint32_t)pl;
        x->name_off = (uint32_t)(so + pl - nl);
        x->name_len = (uint32_t)nl;
        memcpy(strs + so, e->path, pl + 1);
        so += pl + 1;
        x->resolved = HFS3_INDEX_NONE;
        if (e->type == HFS3_FILE) {
            x->size = e->size;
            x->mtime = e->mtime;
            if (hfs3_unhex(e->sha256, x->sha256, 32) < 0) {
                rc = hfs3_err(-EINVAL, "index: \"%s\": bad sha256", e->path);
                goto out;
            }
        } else if (e->type == HFS3_SYMLINK) {
            const char *t = e->target ? e->target : "";
            size_t tl = strlen(t);
            x->target_off = (uint32_t)so;
            x->target_len = (uint32_t)tl;
            memcpy(strs + so, t, tl + 1);
            so += tl + 1;
            const hfs3_entry *fin = NULL;
            int r = hfs3_manifest_resolve(m, e, &fin);
            if (r == 0)
                x->resolved = fin ? (uint32_t)(fin - m->entries) + 1 : 0;
            else if (r != -ENOENT) {
                rc = hfs3_err_wrap(r, "index: \"%s\"", e->path);
                goto out;
            }
        }
        ents[x->parent].child_count++;
    }
    /* a manifest keeps no time for directories and symlinks: a directory gets the newest mtime of the files below it,
     * an empty one and a symlink its parent's, so that their time stays while the manifest does (the install's time
     * made `find -newer` list every directory and `tar`/`cp -a` record the day of the install); 0 when no file has
     * one (the shim then answers the index file's time). Parents come before their children: one pass back up, one
     * pass down. */
    for (size_t i = n - 1; i >= 1; i--)
        if (ents[i].type != HFS3_IX_SYMLINK && ents[i].mtime > ents[ents[i].parent].mtime)
            ents[ents[i].parent].mtime = ents[i].mtime;
    for (size_t i = 1; i < n; i++)
        if (ents[i].type != HFS3_IX_FILE && !ents[i].mtime)
            ents[i].mtime = ents[ents[i].parent].mtime;
    /* children runs: prefix sums, then fill in manifest order and sort each run by name */
    uint32_t at = 0;
    for (size_t i = 0; i < n; i++) {
        ents[i].child_first = at;
        at += ents[i].child_count;
    }
    for (size_t i = 1; i < n; i++) {
        uint32_t p = ents[i].parent;
        kids[ents[p].child_first + fill[p]++] = (uint32_t)i;
    }
    struct sort_ctx ctx = {ents, strs};
    for (size_t i = 0; i < n; i++)
        if (ents[i].child_count > 1)
            qsort_r(kids + ents[i].child_first, ents[i].child_count, sizeof *kids, by_name_ctx, &ctx);

    struct hfs3_index_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, HFS3_INDEX_MAGIC, 8);
    h.version = HFS3_INDEX_VERSION;
    h.n_entries = (uint32_t)n;
    h.n_children = (uint32_t)(n - 1);
    h.entries_off = sizeof h;
    h.children_off = h.entries_off + n * sizeof *ents;
    h.strings_off = (h.children_off + (n - 1) * sizeof *kids + 7) & ~(uint64_t)7;
    h.strings_len = so;
    h.file_size = h.strings_off + so;
    h.layout = m->layout && !strcmp(m->layout, "hf-cache") ? 1 : 0;
    static const char zeros[8];
    if ((rc = hfs3_buf_add(out, &h, sizeof h)) < 0 || (rc = hfs3_buf_add(out, ents, n * sizeof *ents)) < 0 ||
        (rc = hfs3_buf_add(out, kids, (n - 1) * sizeof *kids)) < 0 ||
        (rc = hfs3_buf_add(out, zeros, h.strings_off - out->len)) < 0 ||
        (rc = hfs3_buf_add(out, strs, so)) < 0) {
        hfs3_err(rc, "index: out of memory");
        goto out;
    }
    /* what the shim will check before it maps the index in: a writer bug fails here, with a message */
    if (!hfs3_index_check(out->data, out->len))
        rc = hfs3_err(-EINVAL, "index: the index built from the manifest fails its own check (a bug)");
out:
    free(ents);
    free(kids);
    free(fill);
    free(strs);
    return rc;
}

/* Opens (creating) the directory rel ("a/b/c") under tree, one component at a time, O_NOFOLLOW: a component
 * replaced by a symlink is refused, never followed. Returns the descriptor of the last one. */
static int tree_dir(const hfs3_cache *c, int tree, const char *tpath, const char *rel)
{
    char comp[HFS3_MAX_PATH + 1], shown[HFS3_MAX_PATH + 600];
    int fd = tree;
    const char *p = rel;
    snprintf(shown, sizeof shown, "%s", tpath);
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || n > HFS3_MAX_PATH)
            break;
        memcpy(comp, p, n);
        comp[n] = 0;
        /* tree/ holds directories only and the shim adds some too: sticky or not, both are fine */
        int next = hfs3_cache_opendir(c, fd, comp, c->dir_mode, 0, shown);
        if (fd != tree)
            close(fd);
        if (next < 0)
            return next;
        fd = next;
        size_t sl = strlen(shown);
        snprintf(shown + sl, sizeof shown - sl, "/%s", comp);
        p += n + (slash ? 1 : 0);
    }
    return fd == tree ? dup(tree) : fd;
}

/* Creates tree/ under the mount directory and one directory per dir entry (parents come first in manifest
 * order). */
static int make_tree(const hfs3_manifest *m, const hfs3_cache *c, int mfd, const char *mpath)
{
    char tpath[HFS3_MAX_PATH + 512];
    snprintf(tpath, sizeof tpath, "%s/tree", mpath);
    int tree = hfs3_cache_opendir(c, mfd, "tree", c->dir_mode, 0, mpath);
    if (tree < 0)
        return tree;
    int rc = 0;
    for (size_t i = 0; i < m->n && rc == 0; i++) {
        if (m->entries[i].type != HFS3_DIR)
            continue;
        int fd = tree_dir(c, tree, tpath, m->entries[i].path);
        if (fd < 0)
            rc = fd;
        else
            close(fd);
    }
    close(tree);
    return rc;
}

int hfs3_index_install_at(const hfs3_manifest *m, const hfs3_cache *c, int mfd, const char *mpath)
{
    int rc;
    if ((rc = make_tree(m, c, mfd, mpath)) < 0)
        return rc;
    hfs3_buf b;
    hfs3_buf_init(&b, (size_t)1 << 31);
    if ((rc = build(m, &b)) < 0) {
        hfs3_buf_free(&b);
        return rc;
    }
    /* the mode is set before the rename: a reader never sees an index its group cannot open. With its owner's
     * write bit (0640/0600, never written in place all the same): only blobs have no write bit at all, so an
     * index a member moved out of a non-sticky mounts/K under a blob's name is never served as one
     * (include/hfs3/serve.h) */
    rc = hfs3_cache_write_atomic(mfd, "index", b.data, b.len, c->entry_mode, mpath);
    hfs3_buf_free(&b);
    return rc;
}

int hfs3_index_install(const hfs3_manifest *m, const char *mount_dir)
{
    /* A cache context for the tools and tests that name a mount directory by path. Shared as
     * hfs3_cache_open decides it, asked of mount_dir's parent (CACHE/mounts, which has the cache's mode). */
    char p[HFS3_MAX_PATH + 512];
    if (snprintf(p, sizeof p, "%s/..", mount_dir) >= (int)sizeof p)
        return hfs3_err(-ENAMETOOLONG, "index: %s: path too long", mount_dir);
    struct stat st;
    if (stat(mount_dir, &st) < 0 || stat(p, &st) < 0)
        return hfs3_err(-errno, "index: %s: %s", mount_dir, strerror(errno));
    hfs3_cache c = {.uid = geteuid(), .gid = st.st_gid, .fd = -1};
    c.shared = (st.st_mode & S_IWGRP) && (st.st_mode & S_ISGID);
    c.dir_mode = c.shared ? 03770 : 0700;
    c.file_mode = c.shared ? 0660 : 0600;
    c.entry_mode = c.shared ? 0640 : 0600;
    int fd = open(mount_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return hfs3_err(-errno, "index: %s: %s", mount_dir, strerror(errno));
    int rc = hfs3_index_install_at(m, &c, fd, mount_dir);
    close(fd);
    return rc;
}
