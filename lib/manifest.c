/* manifest.c - the manifest document, format v1 (docs/manifest.md): parsing with cJSON, the one validator
 * that parse and the builder share, canonical writing by hand, lookup and symlink resolution inside the tree.
 * No I/O and no S3 here: callers bring the bytes and take the bytes. */
#include "hfs3/manifest.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#ifndef HFS3_VERSION
#define HFS3_VERSION "0.0.0"
#endif
#define GENERATOR "hfs3-manifest " HFS3_VERSION

/* 2^53: the first integer a double cannot tell from its neighbour. */
#define SIZE_LIMIT_D 9007199254740992.0

/* ---------- error messages ---------- */

/* Copies s into out as a quoted, one-line, bounded string for messages: control characters become \xNN,
 * long strings are cut with "..." so that a 4 KiB hostile path still leaves room for the rule. */
static const char *quote(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    if (!s)
        s = "(null)";
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 8 >= cap || (size_t)(p - (const unsigned char *)s) >= 160) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\') {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o++] = '"';
    out[o] = 0;
    return out;
}

/* "manifest: entry 3 \"a/../b\": <why>" */
static int entry_err(int code, size_t i, const char *path, const char *why)
{
    char q[256];
    if (!path)
        return hfs3_err(code, "manifest: entry %zu: %s", i, why);
    return hfs3_err(code, "manifest: entry %zu %s: %s", i, quote(path, q, sizeof q), why);
}

/* ---------- path rules ---------- */

/* 1 when s is valid UTF-8 (RFC 3629): no stray continuation bytes, no overlong forms, no encoded
 * surrogates (U+D800..U+DFFF), nothing above U+10FFFF. */
static int utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        size_t n;
        unsigned cp, min;
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            n = 1, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return 0; /* a continuation byte first, 0xc0/0xc1 (overlong), 0xf5.. */
        }
        for (size_t k = 1; k <= n; k++) {
            if ((p[k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        p += n + 1;
    }
    return 1;
}

/* Checks one path; on failure returns -EINVAL or -E2BIG (a limit) and points *why at the rule. */
static int path_rule(const char *path, const char **why)
{
    size_t len = strlen(path);
    if (len == 0) {
        *why = "path is empty";
        return -EINVAL;
    }
    if (path[0] == '/') {
        *why = "path is absolute";
        return -EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c < 0x20 || c == 0x7f) {
            *why = "path has a control character";
            return -EINVAL;
        }
    }
    if (!utf8_valid(path)) {
        *why = "path is not valid UTF-8";
        return -EINVAL;
    }
    if (len > HFS3_MAX_PATH) {
        *why = "path is longer than 4096 bytes";
        return -E2BIG;
    }
    if (path[len - 1] == '/') {
        *why = "path has a trailing '/'";
        return -EINVAL;
    }
    if (strstr(path, "//")) {
        *why = "path has '//' (an empty component)";
        return -EINVAL;
    }
    size_t depth = 0;
    for (const char *c = path; *c;) {
        const char *e = strchr(c, '/');
        size_t cl = e ? (size_t)(e - c) : strlen(c);
        if (cl == 1 && c[0] == '.') {
            *why = "path has a \".\" component";
            return -EINVAL;
        }
        if (cl == 2 && c[0] == '.' && c[1] == '.') {
            *why = "path has a \"..\" component";
            return -EINVAL;
        }
        if (cl > HFS3_MAX_NAME) {
            *why = "path has a component longer than 255 bytes";
            return -E2BIG;
        }
        if (++depth > HFS3_MAX_DEPTH) {
            *why = "path is deeper than 64 components";
            return -E2BIG;
        }
        c += cl;
        if (*c == '/')
            c++;
    }
    return 0;
}

int hfs3_manifest_check_path(const char *path)
{
    const char *why;
    char q[256];
    if (!path)
        return hfs3_err(-EINVAL, "manifest: path is NULL");
    if (path_rule(path, &why) < 0)
        return hfs3_err(-EINVAL, "manifest: %s: %s", quote(path, q, sizeof q), why);
    return 0;
}

/* ---------- lookup ---------- */

/* Compares an entry path with the string a[0..alen) + "/" + b[0..blen) (no "/" when alen == 0 or b is
 * NULL), bytewise as unsigned char, without building it. */
typedef struct jkey {
    const char *a, *b;
    size_t alen, blen;
} jkey;

static int jkey_cmp(const void *k, const void *elem)
{
    const jkey *key = k;
    const unsigned char *p = (const unsigned char *)((const hfs3_entry *)elem)->path;
    size_t total = key->alen + (key->b ? key->blen + (key->alen ? 1 : 0) : 0);
    for (size_t i = 0; i < total; i++) {
        unsigned char c;
        if (i < key->alen)
            c = (unsigned char)key->a[i];
        else if (key->alen && i == key->alen)
            c = '/';
        else
            c = (unsigned char)key->b[i - key->alen - (key->alen ? 1 : 0)];
        if (p[i] != c)
            return (int)c - (int)p[i];   /* p[i] == 0 (shorter entry) sorts first */
    }
    return p[total] ? -1 : 0;
}

/* Index of the entry with exactly that path among entries[0..n), or -1. */
static ssize_t find_join(const hfs3_entry *e, size_t n, const char *a, size_t alen, const char *b, size_t blen)
{
    jkey k = {a, b, alen, blen};
    const hfs3_entry *hit = bsearch(&k, e, n, sizeof *e, jkey_cmp);
    return hit ? hit - e : -1;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const hfs3_entry *)a)->path, ((const hfs3_entry *)b)->path);
}

const hfs3_entry *hfs3_manifest_find(const hfs3_manifest *m, const char *path)
{
    if (!m || !path || !*path || !m->n)
        return NULL;
    ssize_t i = find_join(m->entries, m->n, path, strlen(path), NULL, 0);
    return i < 0 ? NULL : &m->entries[i];
}

/* Length of the parent's path ("" -> 0 for a top-level entry). */
static size_t parent_len(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? (size_t)(s - path) : 0;
}

static int path_depth(const hfs3_manifest *m, ssize_t at)
{
    if (at < 0)
        return 0;
    int d = 1;
    for (const char *p = m->entries[at].path; *p; p++)
        d += *p == '/';
    return d;
}

/* ---------- symlink resolution ---------- */

/* A link's resolution depends only on the link (it starts from the link's own directory), so validate
 * remembers each result: a hostile document with many links into long chains then costs one walk per
 * link instead of one per hop. */
enum { MEMO_NONE, MEMO_BUSY, MEMO_DONE };
typedef struct memo {
    int state, rc, hops;
    ssize_t loc;
} memo;

typedef struct resolver {
    const hfs3_manifest *m;
    memo *memo;   /* NULL: no memory, the recursion is bounded by the hop limit alone */
} resolver;

static int follow(resolver *r, size_t li, int depth, ssize_t *loc, int *hops);

/* Walks `path` from the directory `start` (entry index, -1 for the root) as the kernel would, following
 * symlinks in every component. On success *loc is the final entry (-1: the root). *hops counts the
 * symlinks followed. A missing component (or one under a file) makes the result -ENOENT, but the rest of
 * the path is still walked lexically so that "missing/../../x" is reported as leaving the tree. */
static int walk(resolver *r, ssize_t start, const char *path, int depth, ssize_t *loc, int *hops)
{
    const hfs3_manifest *m = r->m;
    ssize_t cur = start;
    int lexdepth = -1;   /* >= 0: lexical mode after a failure */
    int fail = 0;
    *hops = 0;
    if (path[0] == '/')
        return -EXDEV;
    const char *p = path;
    while (*p) {
        const char *c = p;
        while (*p && *p != '/')
            p++;
        size_t cl = (size_t)(p - c);
        int slash = *p == '/';
        while (*p == '/')
            p++;
        if (cl == 1 && c[0] == '.') {
            if (lexdepth < 0 && cur >= 0 && m->entries[cur].type != HFS3_DIR) {
                fail = -ENOENT;
                lexdepth = path_depth(m, cur);
            }
            continue;
        }
        int dotdot = cl == 2 && c[0] == '.' && c[1] == '.';
        if (lexdepth < 0 && cur >= 0 && m->entries[cur].type != HFS3_DIR) {
            /* a component after a file: ENOTDIR for the kernel; dangling for us */
            fail = -ENOENT;
            lexdepth = path_depth(m, cur);
        }
        if (lexdepth >= 0) {
            if (dotdot) {
                if (lexdepth == 0)
                    return -EXDEV;
                lexdepth--;
            } else {
                lexdepth++;
            }
            continue;
        }
        if (dotdot) {
            if (cur < 0)
                return -EXDEV;
            const char *cp = m->entries[cur].path;
            size_t pl = parent_len(cp);
            cur = pl ? find_join(m->entries, m->n, cp, pl, NULL, 0) : -1;
            if (pl && cur < 0)
                return -ENOENT;   /* only in an unvalidated manifest */
            continue;
        }
        const char *cp = cur < 0 ? "" : m->entries[cur].path;
        ssize_t e = find_join(m->entries, m->n, cp, strlen(cp), c, cl);
        if (e < 0) {
            fail = -ENOENT;
            lexdepth = path_depth(m, cur) + 1;
            continue;
        }
        if (m->entries[e].type == HFS3_SYMLINK) {
            ssize_t to;
            int h, rc = follow(r, (size_t)e, depth + 1, &to, &h);
            *hops += h;
            if (*hops > HFS3_MAX_HOPS)
                return -ELOOP;
            if (rc == -ENOENT) {
                fail = -ENOENT;
                lexdepth = path_depth(m, cur) + 1;
                continue;
            }
            if (rc < 0)
                return rc;
            e = to;
        }
        cur = e;
        if (slash && cur >= 0 && m->entries[cur].type != HFS3_DIR && !*p) {
            fail = -ENOENT;   /* "file/" */
            break;
        }
    }
    if (fail)
        return fail;
    *loc = cur;
    return 0;
}

/* Resolves link entry li: its target from the link's directory. *hops includes the link itself. */
static int follow(resolver *r, size_t li, int depth, ssize_t *loc, int *hops)
{
    const hfs3_manifest *m = r->m;
    const hfs3_entry *l = &m->entries[li];
    memo *mo = r->memo ? &r->memo[li] : NULL;
    *hops = 1;
    *loc = -1;
    if (mo && mo->state == MEMO_DONE) {
        *hops = mo->hops;
        *loc = mo->loc;
        return mo->rc;
    }
    /* a link already being resolved further up is a cycle; a nesting deeper than the hop limit is a
     * chain longer than it, either way the outermost link loops */
    if ((mo && mo->state == MEMO_BUSY) || depth > HFS3_MAX_HOPS)
        return -ELOOP;
    if (!l->target || !*l->target)
        return -ENOENT;
    if (l->target[0] == '/')
        return -EXDEV;
    if (mo)
        mo->state = MEMO_BUSY;
    ssize_t dir = -1;
    size_t pl = parent_len(l->path);
    if (pl) {
        dir = find_join(m->entries, m->n, l->path, pl, NULL, 0);
        if (dir < 0) {
            if (mo)
                mo->state = MEMO_NONE;
            return -ENOENT;
        }
    }
    int h = 0;
    int rc = walk(r, dir, l->target, depth, loc, &h);
    *hops = 1 + h;
    if (rc == 0 && *hops > HFS3_MAX_HOPS)
        rc = -ELOOP;
    if (mo) {
        /* a loop found through the nesting bound is not this link's own property: keep only the
         * context-free answers */
        if (rc == 0 || rc == -ENOENT || rc == -EXDEV) {
            mo->state = MEMO_DONE;
            mo->rc = rc;
            mo->hops = *hops;
            mo->loc = *loc;
        } else {
            mo->state = MEMO_NONE;
        }
    }
    return rc;
}

int hfs3_manifest_resolve(const hfs3_manifest *m, const hfs3_entry *link, const hfs3_entry **out)
{
    *out = NULL;
    if (!m || !link)
        return hfs3_err(-EINVAL, "manifest: resolve: no entry");
    size_t li;
    if (m->n && link >= m->entries && link < m->entries + m->n) {
        li = (size_t)(link - m->entries);
    } else {
        const hfs3_entry *e = hfs3_manifest_find(m, link->path);
        if (!e)
            return hfs3_err(-ENOENT, "manifest: resolve: entry not in this manifest");
        li = (size_t)(e - m->entries);
    }
    if (m->entries[li].type != HFS3_SYMLINK) {
        *out = &m->entries[li];
        return 0;
    }
    resolver r = {m, NULL};
    ssize_t loc;
    int hops;
    int rc = follow(&r, li, 0, &loc, &hops);
    char q[256];
    quote(m->entries[li].path, q, sizeof q);
    switch (rc) {
    case 0:
        *out = loc < 0 ? NULL : &m->entries[loc];
        return 0;
    case -ENOENT:
        return hfs3_err(rc, "manifest: symlink %s: target does not exist in the tree", q);
    case -ELOOP:
        return hfs3_err(rc, "manifest: symlink %s: more than 40 hops (a loop)", q);
    case -EXDEV:
        return hfs3_err(rc, "manifest: symlink %s: target leaves the tree", q);
    default:
        return hfs3_err(rc, "manifest: symlink %s: cannot resolve", q);
    }
}

/* ---------- validation ---------- */

int hfs3_manifest_validate(const hfs3_manifest *m)
{
    if (!m)
        return hfs3_err(-EINVAL, "manifest: no manifest");
    if (m->version != HFS3_MANIFEST_VERSION)
        return hfs3_err(-ENOTSUP, "manifest: format version %d is not supported (this reader knows %d)",
                        m->version, HFS3_MANIFEST_VERSION);
    if (!m->layout || (strcmp(m->layout, "flat") != 0 && strcmp(m->layout, "hf-cache") != 0)) {
        char q[256];
        return hfs3_err(-EINVAL, "manifest: layout %s is neither \"flat\" nor \"hf-cache\"",
                        quote(m->layout, q, sizeof q));
    }
    if (m->n > HFS3_MAX_ENTRIES)
        return hfs3_err(-E2BIG, "manifest: %zu entries, more than the limit of %d", m->n, HFS3_MAX_ENTRIES);
    if (m->chunk_size && (m->chunk_size < HFS3_MIN_CHUNK_SIZE || m->chunk_size > HFS3_MAX_CHUNK_SIZE ||
                          (m->chunk_size & (m->chunk_size - 1))))
        return hfs3_err(-EINVAL, "manifest: chunk_size %" PRIu64 " is not a power of two from 1 MiB to 1 GiB",
                        m->chunk_size);
    size_t nlinks = 0;
    for (size_t i = 0; i < m->n; i++) {
        const hfs3_entry *e = &m->entries[i];
        const char *why;
        int rc;
        if (!e->path)
            return entry_err(-EINVAL, i, NULL, "no path");
        if ((rc = path_rule(e->path, &why)) < 0)
            return entry_err(rc, i, e->path, why);
        if (i > 0) {
            int c = strcmp(m->entries[i - 1].path, e->path);
            if (c == 0)
                return entry_err(-EINVAL, i, e->path, "duplicate path");
            if (c > 0) {
                char q[256], w[320];
                snprintf(w, sizeof w, "entries are not sorted bytewise (it follows %s)",
                         quote(m->entries[i - 1].path, q, sizeof q));
                return entry_err(-EINVAL, i, e->path, w);
            }
        }
        size_t pl = parent_len(e->path);
        if (pl) {
            /* the parent sorts before the entry, and entries[0..i) are sorted */
            ssize_t p = find_join(m->entries, i, e->path, pl, NULL, 0);
            if (p < 0)
                return entry_err(-EINVAL, i, e->path, "missing parent directory entry");
            if (m->entries[p].type != HFS3_DIR)
                return entry_err(-EINVAL, i, e->path,
                                 m->entries[p].type == HFS3_FILE ? "parent is a file, not a directory"
                                                                 : "parent is a symlink, not a directory");
        }
        switch (e->type) {
        case HFS3_DIR:
            break;
        case HFS3_FILE:
            if (e->size > HFS3_MAX_SIZE)
                return entry_err(-E2BIG, i, e->path, "size is not below 2^53");
            if (!hfs3_is_sha256_hex(e->sha256))
                return entry_err(-EINVAL, i, e->path, "sha256 is not 64 lowercase hex digits");
            if (e->chunks) {
                if (!m->chunk_size)
                    return entry_err(-EINVAL, i, e->path, "chunks without a document-level chunk_size");
                uint64_t want = (e->size + m->chunk_size - 1) / m->chunk_size;
                size_t have = strlen(e->chunks);
                if (have % 64 || have / 64 != want)
                    return entry_err(-EINVAL, i, e->path, "chunks has the wrong length for size and chunk_size");
                for (size_t k = 0; k < have; k++)
                    if (!((e->chunks[k] >= '0' && e->chunks[k] <= '9') || (e->chunks[k] >= 'a' && e->chunks[k] <= 'f')))
                        return entry_err(-EINVAL, i, e->path, "chunks holds a digest that is not 64 lowercase hex digits");
            }
            break;
        case HFS3_SYMLINK:
            if (!e->target || !*e->target)
                return entry_err(-EINVAL, i, e->path, "symlink target is empty");
            if (strlen(e->target) > HFS3_MAX_PATH)
                return entry_err(-E2BIG, i, e->path, "symlink target is longer than 4096 bytes");
            for (const unsigned char *t = (const unsigned char *)e->target; *t; t++)
                if (*t < 0x20 || *t == 0x7f)
                    return entry_err(-EINVAL, i, e->path, "symlink target has a control character");
            if (!utf8_valid(e->target))
                return entry_err(-EINVAL, i, e->path, "symlink target is not valid UTF-8");
            if (e->target[0] == '/')
                return entry_err(-EINVAL, i, e->path, "symlink target is absolute (leaves the tree)");
            nlinks++;
            break;
        default:
            return entry_err(-EINVAL, i, e->path, "unknown entry type");
        }
    }
    if (!nlinks)
        return 0;
    memo *mo = calloc(m->n, sizeof *mo);
    if (!mo)
        return hfs3_err(-ENOMEM, "manifest: out of memory");
    resolver r = {m, mo};
    int rc = 0;
    for (size_t i = 0; i < m->n && !rc; i++) {
        if (m->entries[i].type != HFS3_SYMLINK)
            continue;
        ssize_t loc;
        int hops;
        int frc = follow(&r, i, 0, &loc, &hops);
        if (frc == -ELOOP)
            rc = entry_err(-EINVAL, i, m->entries[i].path, "symlink loops (more than 40 hops)");
        else if (frc == -EXDEV)
            rc = entry_err(-EINVAL, i, m->entries[i].path, "symlink target leaves the tree");
        else if (frc < 0 && frc != -ENOENT)   /* dangling is allowed: the shim answers ENOENT */
            rc = entry_err(frc, i, m->entries[i].path, "symlink cannot be resolved");
    }
    free(mo);
    return rc;
}

/* ---------- building ---------- */

static void entry_clear(hfs3_entry *e)
{
    free(e->path);
    free(e->etag);
    free(e->target);
    free(e->chunks);
}

void hfs3_manifest_free(hfs3_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        entry_clear(&m->entries[i]);
    free(m->entries);
    free(m->layout);
    free(m->generator);
    free(m->revision);
    free(m);
}

hfs3_manifest *hfs3_manifest_new(const char *layout, const char *revision)
{
    hfs3_manifest *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->version = HFS3_MANIFEST_VERSION;
    m->layout = hfs3_strdup(layout ? layout : "flat");
    m->generator = hfs3_strdup(GENERATOR);
    m->revision = revision ? hfs3_strdup(revision) : NULL;
    if (!m->layout || !m->generator || (revision && !m->revision)) {
        hfs3_manifest_free(m);
        return NULL;
    }
    return m;
}

/* Appends a copy of e (path, etag, target duplicated). Does not validate. */
static int push(hfs3_manifest *m, const hfs3_entry *e)
{
    if (m->n >= HFS3_MAX_ENTRIES)
        return hfs3_err(-E2BIG, "manifest: more than %d entries", HFS3_MAX_ENTRIES);
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        hfs3_entry *ne = realloc(m->entries, cap * sizeof *ne);
        if (!ne)
            return hfs3_err(-ENOMEM, "manifest: out of memory");
        m->entries = ne;
        m->cap = cap;
    }
    hfs3_entry c = *e;
    c.path = hfs3_strdup(e->path);
    c.etag = e->etag ? hfs3_strdup(e->etag) : NULL;
    c.target = e->target ? hfs3_strdup(e->target) : NULL;
    c.chunks = e->chunks && e->type == HFS3_FILE ? hfs3_strdup(e->chunks) : NULL;
    if (e->type != HFS3_FILE) {
        c.size = 0;
        c.sha256[0] = 0;
        c.mtime = 0;
        free(c.etag);
        c.etag = NULL;
    }
    if (e->type != HFS3_SYMLINK) {
        free(c.target);
        c.target = NULL;
    }
    c.sha256[64] = 0;
    if (!c.path || (e->type == HFS3_FILE && e->etag && !c.etag) || (e->type == HFS3_FILE && e->chunks && !c.chunks) ||
        (e->type == HFS3_SYMLINK && e->target && !c.target)) {
        entry_clear(&c);
        return hfs3_err(-ENOMEM, "manifest: out of memory");
    }
    m->entries[m->n++] = c;
    return 0;
}

int hfs3_manifest_add(hfs3_manifest *m, const hfs3_entry *e)
{
    if (!m || !e || !e->path)
        return hfs3_err(-EINVAL, "manifest: add: no entry or no path");
    const char *why;
    int rc = path_rule(e->path, &why);
    if (rc < 0)
        return entry_err(rc, m->n, e->path, why);
    return push(m, e);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int hfs3_manifest_finish(hfs3_manifest *m)
{
    if (!m)
        return hfs3_err(-EINVAL, "manifest: no manifest");
    if (m->n)
        qsort(m->entries, m->n, sizeof *m->entries, entry_cmp);
    for (size_t i = 1; i < m->n; i++)
        if (strcmp(m->entries[i - 1].path, m->entries[i].path) == 0)
            return entry_err(-EINVAL, i, m->entries[i].path, "duplicate path");
    /* every proper prefix at a '/' that has no entry becomes a dir entry */
    size_t norig = m->n, nmiss = 0, capmiss = 0;
    char **miss = NULL;
    int rc = 0;
    for (size_t i = 0; i < norig && !rc; i++) {
        const char *p = m->entries[i].path;
        for (const char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
            size_t pl = (size_t)(s - p);
            if (find_join(m->entries, norig, p, pl, NULL, 0) >= 0)
                continue;
            if (nmiss == capmiss) {
                size_t cap = capmiss ? capmiss * 2 : 16;
                char **nm = realloc(miss, cap * sizeof *nm);
                if (!nm) {
                    rc = hfs3_err(-ENOMEM, "manifest: out of memory");
                    break;
                }
                miss = nm;
                capmiss = cap;
            }
            if (!(miss[nmiss] = hfs3_strndup(p, pl))) {
                rc = hfs3_err(-ENOMEM, "manifest: out of memory");
                break;
            }
            nmiss++;
        }
    }
    if (!rc && nmiss) {
        qsort(miss, nmiss, sizeof *miss, str_cmp);
        for (size_t i = 0; i < nmiss && !rc; i++) {
            if (i > 0 && strcmp(miss[i - 1], miss[i]) == 0)
                continue;
            hfs3_entry d = {.path = miss[i], .type = HFS3_DIR};
            rc = push(m, &d);
        }
        if (!rc)
            qsort(m->entries, m->n, sizeof *m->entries, entry_cmp);
    }
    for (size_t i = 0; i < nmiss; i++)
        free(miss[i]);
    free(miss);
    if (rc)
        return rc;
    return hfs3_manifest_validate(m);
}

/* ---------- parsing ---------- */

/* JSON cannot hold a raw NUL, and cJSON turns "\u0000" into a NUL that silently cuts the string (a key
 * "path\u0000x" would read as "path"). Scans the raw text, string-aware, so "\\u0000" stays legal. */
static int prescan(const char *s, size_t n)
{
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == 0)
            return hfs3_err(-EINVAL, "manifest: byte %zu: a raw NUL byte in the document", i);
        if (!in_str) {
            in_str = c == '"';
            continue;
        }
        if (c == '"') {
            in_str = 0;
        } else if (c == '\\') {
            if (i + 5 < n && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0)
                return hfs3_err(-EINVAL, "manifest: byte %zu: a string holds \\u0000 (NUL), which is not allowed",
                                i);
            i++;
        }
    }
    return 0;
}

/* The member named key, or NULL; *dup set when the key appears more than once (which reader's value
 * would count is then ambiguous, so it is refused). */
static cJSON *member(const cJSON *obj, const char *key, int *dup)
{
    cJSON *hit = NULL;
    for (cJSON *c = obj->child; c; c = c->next) {
        if (c->string && strcmp(c->string, key) == 0) {
            if (hit)
                *dup = 1;
            else
                hit = c;
        }
    }
    return hit;
}

static const char *const top_keys[] = {"hfs3_manifest", "layout", "generator", "revision", "chunk_size", "entries"};
static const char *const entry_keys[] = {"path", "type", "size", "sha256", "etag", "mtime", "target", "chunks"};

static const char *dup_key(const cJSON *obj, const char *const *keys, size_t nkeys)
{
    for (size_t k = 0; k < nkeys; k++) {
        int dup = 0;
        member(obj, keys[k], &dup);
        if (dup)
            return keys[k];
    }
    return NULL;
}

static int is_whole(double d) { return d >= -SIZE_LIMIT_D && d <= SIZE_LIMIT_D && d == (double)(long long)d; }

/* Reads entries[i] into e (strings copied). */
static int parse_entry(const cJSON *j, size_t i, hfs3_entry *e)
{
    char w[96];
    memset(e, 0, sizeof *e);
    if (!cJSON_IsObject(j))
        return entry_err(-EINVAL, i, NULL, "not a JSON object");
    int dup = 0;
    const char *dk = dup_key(j, entry_keys, sizeof entry_keys / sizeof *entry_keys);
    const cJSON *jp = member(j, "path", &dup);
    const char *path = cJSON_IsString(jp) ? jp->valuestring : NULL;
    if (dk) {
        snprintf(w, sizeof w, "key \"%s\" appears more than once", dk);
        return entry_err(-EINVAL, i, path, w);
    }
    if (!path)
        return entry_err(-EINVAL, i, NULL, "\"path\" is missing or not a string");
    const cJSON *jt = member(j, "type", &dup);
    if (!cJSON_IsString(jt))
        return entry_err(-EINVAL, i, path, "\"type\" is missing or not a string");
    if (strcmp(jt->valuestring, "dir") == 0) {
        e->type = HFS3_DIR;
    } else if (strcmp(jt->valuestring, "file") == 0) {
        e->type = HFS3_FILE;
    } else if (strcmp(jt->valuestring, "symlink") == 0) {
        e->type = HFS3_SYMLINK;
    } else {
        char q[96];
        snprintf(w, sizeof w, "unknown entry type %s", quote(jt->valuestring, q, 64));
        return entry_err(-EINVAL, i, path, w);
    }
    if (e->type == HFS3_FILE) {
        const cJSON *js = member(j, "size", &dup);
        if (!cJSON_IsNumber(js))
            return entry_err(-EINVAL, i, path, "size is missing or not a number");
        double d = js->valuedouble;
        if (d < 0)
            return entry_err(-EINVAL, i, path, "size is negative");
        if (d >= SIZE_LIMIT_D)
            return entry_err(-E2BIG, i, path, "size is not below 2^53");
        if (d != (double)(uint64_t)d)
            return entry_err(-EINVAL, i, path, "size is not a whole number");
        e->size = (uint64_t)d;
        const cJSON *jh = member(j, "sha256", &dup);
        if (!cJSON_IsString(jh))
            return entry_err(-EINVAL, i, path, "sha256 is missing or not a string");
        if (!hfs3_is_sha256_hex(jh->valuestring))
            return entry_err(-EINVAL, i, path, "sha256 is not 64 lowercase hex digits");
        memcpy(e->sha256, jh->valuestring, 65);
        const cJSON *je = member(j, "etag", &dup);
        if (je && !cJSON_IsNull(je) && !cJSON_IsString(je))
            return entry_err(-EINVAL, i, path, "etag is not a string");
        const cJSON *jm = member(j, "mtime", &dup);
        if (jm && !cJSON_IsNull(jm)) {
            if (!cJSON_IsNumber(jm) || !is_whole(jm->valuedouble))
                return entry_err(-EINVAL, i, path, "mtime is not a whole number of seconds");
            e->mtime = (long long)jm->valuedouble;
        }
        if (cJSON_IsString(je) && !(e->etag = hfs3_strdup(je->valuestring)))
            return hfs3_err(-ENOMEM, "manifest: out of memory");
        const cJSON *jc = member(j, "chunks", &dup);
        if (jc && !cJSON_IsNull(jc)) {
            if (!cJSON_IsArray(jc)) {
                entry_clear(e);
                return entry_err(-EINVAL, i, path, "chunks is not an array");
            }
            size_t nc = (size_t)cJSON_GetArraySize(jc);
            if (nc > (HFS3_MAX_SIZE >> 20) + 1) {
                entry_clear(e);
                return entry_err(-E2BIG, i, path, "chunks has more digests than any size allows");
            }
            if (!(e->chunks = malloc(nc * 64 + 1))) {
                entry_clear(e);
                return hfs3_err(-ENOMEM, "manifest: out of memory");
            }
            size_t k = 0;
            for (const cJSON *c = jc->child; c; c = c->next, k++) {
                if (!cJSON_IsString(c) || !hfs3_is_sha256_hex(c->valuestring)) {
                    entry_clear(e);
                    return entry_err(-EINVAL, i, path, "chunks holds a digest that is not 64 lowercase hex digits");
                }
                memcpy(e->chunks + k * 64, c->valuestring, 64);
            }
            e->chunks[nc * 64] = 0;
        }
    } else if (e->type == HFS3_SYMLINK) {
        const cJSON *jl = member(j, "target", &dup);
        if (!cJSON_IsString(jl))
            return entry_err(-EINVAL, i, path, "symlink target is missing or not a string");
        if (!(e->target = hfs3_strdup(jl->valuestring)))
            return hfs3_err(-ENOMEM, "manifest: out of memory");
    }
    if (!(e->path = hfs3_strdup(path))) {
        entry_clear(e);
        return hfs3_err(-ENOMEM, "manifest: out of memory");
    }
    return 0;
}

static int parse_tree(const cJSON *root, hfs3_manifest *m)
{
    if (!cJSON_IsObject(root))
        return hfs3_err(-EINVAL, "manifest: the document is not a JSON object");
    const char *dk = dup_key(root, top_keys, sizeof top_keys / sizeof *top_keys);
    if (dk)
        return hfs3_err(-EINVAL, "manifest: key \"%s\" appears more than once", dk);
    int dup = 0;
    const cJSON *jv = member(root, "hfs3_manifest", &dup);
    if (!cJSON_IsNumber(jv) || !is_whole(jv->valuedouble))
        return hfs3_err(-EINVAL, "manifest: \"hfs3_manifest\" (the format version) is missing or not an integer");
    if (jv->valuedouble != HFS3_MANIFEST_VERSION)
        return hfs3_err(-ENOTSUP, "manifest: format version %.0f is not supported (this reader knows %d)",
                        jv->valuedouble, HFS3_MANIFEST_VERSION);
    m->version = HFS3_MANIFEST_VERSION;
    const cJSON *jl = member(root, "layout", &dup);
    if (!cJSON_IsString(jl))
        return hfs3_err(-EINVAL, "manifest: \"layout\" is missing or not a string");
    if (!(m->layout = hfs3_strdup(jl->valuestring)))
        return hfs3_err(-ENOMEM, "manifest: out of memory");
    const cJSON *jg = member(root, "generator", &dup);
    if (jg && !cJSON_IsNull(jg)) {
        if (!cJSON_IsString(jg))
            return hfs3_err(-EINVAL, "manifest: \"generator\" is not a string");
        if (!(m->generator = hfs3_strdup(jg->valuestring)))
            return hfs3_err(-ENOMEM, "manifest: out of memory");
    }
    const cJSON *jr = member(root, "revision", &dup);
    if (jr && !cJSON_IsNull(jr)) {
        if (!cJSON_IsString(jr))
            return hfs3_err(-EINVAL, "manifest: \"revision\" is not a string");
        if (!(m->revision = hfs3_strdup(jr->valuestring)))
            return hfs3_err(-ENOMEM, "manifest: out of memory");
    }
    const cJSON *jc = member(root, "chunk_size", &dup);
    if (jc && !cJSON_IsNull(jc)) {
        if (!cJSON_IsNumber(jc) || !is_whole(jc->valuedouble) || jc->valuedouble < (double)HFS3_MIN_CHUNK_SIZE ||
            jc->valuedouble > (double)HFS3_MAX_CHUNK_SIZE)
            return hfs3_err(-EINVAL, "manifest: \"chunk_size\" is not a power of two from 1 MiB to 1 GiB");
        m->chunk_size = (uint64_t)jc->valuedouble;
    }
    const cJSON *je = member(root, "entries", &dup);
    if (!cJSON_IsArray(je))
        return hfs3_err(-EINVAL, "manifest: \"entries\" is missing or not an array");
    size_t count = 0;
    for (const cJSON *c = je->child; c; c = c->next)
        if (++count > HFS3_MAX_ENTRIES)
            return hfs3_err(-E2BIG, "manifest: more than %d entries", HFS3_MAX_ENTRIES);
    if (count) {
        m->entries = calloc(count, sizeof *m->entries);
        if (!m->entries)
            return hfs3_err(-ENOMEM, "manifest: out of memory");
        m->cap = count;
    }
    size_t i = 0;
    for (const cJSON *c = je->child; c; c = c->next, i++) {
        int rc = parse_entry(c, i, &m->entries[i]);
        if (rc < 0)
            return rc;
        m->n = i + 1;
    }
    return 0;
}

int hfs3_manifest_parse(const char *json, size_t n, hfs3_manifest **out)
{
    *out = NULL;
    if (!json)
        return hfs3_err(-EINVAL, "manifest: no document");
    if (n > HFS3_MAX_DOC)
        return hfs3_err(-E2BIG, "manifest: the document is %zu bytes, more than the limit of 64 MiB", n);
    int rc = prescan(json, n);
    if (rc < 0)
        return rc;
    /* cJSON's require_null_terminated wants a NUL inside the length; a length-delimited buffer has none,
     * so the end is checked here instead: only whitespace may follow the value. */
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, n, &end, 0);
    if (!root) {
        size_t at = end && end >= json && end <= json + n ? (size_t)(end - json) : 0;
        return hfs3_err(-EINVAL, "manifest: not valid JSON (at byte %zu)", at);
    }
    size_t at = (size_t)(end - json);
    while (at < n && (json[at] == ' ' || json[at] == '\t' || json[at] == '\n' || json[at] == '\r'))
        at++;
    if (at < n) {
        cJSON_Delete(root);
        return hfs3_err(-EINVAL, "manifest: trailing data after the JSON document (at byte %zu)", at);
    }
    hfs3_manifest *m = calloc(1, sizeof *m);
    if (!m) {
        cJSON_Delete(root);
        return hfs3_err(-ENOMEM, "manifest: out of memory");
    }
    rc = parse_tree(root, m);
    cJSON_Delete(root);
    if (rc == 0)
        rc = hfs3_manifest_validate(m);
    if (rc < 0) {
        hfs3_manifest_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* ---------- canonical writing ---------- */

static int put_str(hfs3_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    int rc = hfs3_buf_addc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p && rc == 0; p++) {
        const unsigned char *q = p;
        while (*q && *q >= 0x20 && *q != 0x7f && *q != '"' && *q != '\\')
            q++;
        if (q > p) {
            rc = hfs3_buf_add(b, p, (size_t)(q - p));
            p = q - 1;
            continue;
        }
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            rc = hfs3_buf_add(b, e, 2);
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            rc = hfs3_buf_add(b, e, 6);
        }
    }
    return rc ? rc : hfs3_buf_addc(b, '"');
}

/* One key and string value: ", \"key\": \"value\"" (first: without the leading ", "). */
static int put_kv(hfs3_buf *b, const char *lead, const char *key, const char *val)
{
    int rc = hfs3_buf_addf(b, "%s\"%s\": ", lead, key);
    return rc ? rc : put_str(b, val);
}

int hfs3_manifest_write(const hfs3_manifest *m, hfs3_buf *out)
{
    if (!m || !out)
        return hfs3_err(-EINVAL, "manifest: write: nothing to write");
    int rc = hfs3_buf_addf(out, "{\n  \"hfs3_manifest\": %d,\n", m->version);
    if (!rc)
        rc = put_kv(out, "  ", "layout", m->layout ? m->layout : "flat");
    if (!rc)
        rc = put_kv(out, ",\n  ", "generator", m->generator ? m->generator : GENERATOR);
    if (!rc && m->revision)
        rc = put_kv(out, ",\n  ", "revision", m->revision);
    if (!rc && m->chunk_size)
        rc = hfs3_buf_addf(out, ",\n  \"chunk_size\": %" PRIu64, m->chunk_size);
    if (!rc)
        rc = hfs3_buf_adds(out, m->n ? ",\n  \"entries\": [\n" : ",\n  \"entries\": [");
    for (size_t i = 0; i < m->n && !rc; i++) {
        const hfs3_entry *e = &m->entries[i];
        rc = put_kv(out, "    {", "path", e->path);
        if (rc)
            break;
        if (e->type == HFS3_DIR) {
            rc = hfs3_buf_adds(out, ", \"type\": \"dir\"");
        } else if (e->type == HFS3_FILE) {
            rc = hfs3_buf_addf(out, ", \"type\": \"file\", \"size\": %" PRIu64 ", \"sha256\": \"%s\"", e->size,
                               e->sha256);
            if (!rc && e->etag)
                rc = put_kv(out, ", ", "etag", e->etag);
            if (!rc && e->mtime)
                rc = hfs3_buf_addf(out, ", \"mtime\": %lld", e->mtime);
            if (!rc && e->chunks && m->chunk_size) {
                size_t nc = strlen(e->chunks) / 64;
                rc = hfs3_buf_adds(out, ", \"chunks\": [");
                for (size_t k = 0; k < nc && !rc; k++)
                    rc = hfs3_buf_addf(out, "%s\"%.64s\"", k ? ", " : "", e->chunks + k * 64);
                if (!rc)
                    rc = hfs3_buf_addc(out, ']');
            }
        } else {
            rc = hfs3_buf_adds(out, ", \"type\": \"symlink\"");
            if (!rc)
                rc = put_kv(out, ", ", "target", e->target ? e->target : "");
        }
        if (!rc)
            rc = hfs3_buf_adds(out, i + 1 < m->n ? "},\n" : "}\n  ");
    }
    if (!rc)
        rc = hfs3_buf_adds(out, "]\n}\n");
    if (rc)
        return hfs3_err(rc, "manifest: write: %s", rc == -E2BIG ? "output buffer limit reached" : "out of memory");
    return 0;
}

/* ---------- summary ---------- */

void hfs3_manifest_counts(const hfs3_manifest *m, size_t *files, size_t *dirs, size_t *links, uint64_t *bytes)
{
    size_t f = 0, d = 0, l = 0;
    uint64_t by = 0;
    for (size_t i = 0; m && i < m->n; i++) {
        switch (m->entries[i].type) {
        case HFS3_FILE:
            f++;
            by += m->entries[i].size;
            break;
        case HFS3_DIR:
            d++;
            break;
        case HFS3_SYMLINK:
            l++;
            break;
        }
    }
    if (files)
        *files = f;
    if (dirs)
        *dirs = d;
    if (links)
        *links = l;
    if (bytes)
        *bytes = by;
}
