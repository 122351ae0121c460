/* test_manifest.c - manifest format v1: every hostile fixture in tests/data/manifests/ fails with its code and
 * rule, valid ones parse and round-trip byte for byte, the builder is order-independent, limits, symlinks. */
#include "harness.h"
#include "hfs3/manifest.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *data_dir(void)
{
    const char *d = getenv("HFS3_TESTDATA");
    return d && *d ? d : "tests/data";
}

static char *load(const char *name, size_t *len)
{
    char path[1024];
    char *s = NULL;
    snprintf(path, sizeof path, "%s/manifests/%s", data_dir(), name);
    if (hfs3_read_file(path, HFS3_MAX_DOC + 1, &s, len) < 0) {
        fprintf(stderr, "cannot read %s: %s\n", path, hfs3_errmsg());
        return NULL;
    }
    return s;
}

/* Parses `name`; expects code and every '|'-separated word of `words` in the message. */
static void expect_fail(const char *name, int code, const char *words)
{
    size_t n;
    char *doc = load(name, &n);
    CHECK(doc != NULL);
    if (!doc)
        return;
    hfs3_manifest *m = (hfs3_manifest *)1;
    int rc = hfs3_manifest_parse(doc, n, &m);
    const char *msg = hfs3_errmsg();
    int ok = rc == code && m == NULL && strncmp(msg, "manifest: ", 10) == 0 && !strchr(msg, '\n');
    char w[256];
    snprintf(w, sizeof w, "%s", words);
    for (char *save, *t = strtok_r(w, "|", &save); t; t = strtok_r(NULL, "|", &save))
        if (!strstr(msg, t))
            ok = 0;
    if (ok) {
        t_pass++;
    } else {
        t_fail++;
        fprintf(stderr, "FAIL %s: rc %d (want %d), message \"%s\" (want \"%s\")\n", name, rc, code, msg, words);
    }
    hfs3_manifest_free(m == (hfs3_manifest *)1 ? NULL : m);
    free(doc);
}

static const struct {
    const char *file;
    int code;
    const char *words;
} bad[] = {
    {"bad-version-2.json", -ENOTSUP, "version 2|not supported"},
    {"bad-version-missing.json", -EINVAL, "hfs3_manifest|missing"},
    {"bad-version-string.json", -EINVAL, "hfs3_manifest|not an integer"},
    {"bad-layout.json", -EINVAL, "layout \"tree\""},
    {"bad-layout-missing.json", -EINVAL, "layout|missing"},
    {"bad-entries-missing.json", -EINVAL, "entries|missing"},
    {"bad-entries-object.json", -EINVAL, "entries|not an array"},
    {"bad-not-object.json", -EINVAL, "not a JSON object"},
    {"bad-not-json.json", -EINVAL, "not valid JSON"},
    {"bad-trailing-garbage.json", -EINVAL, "trailing data"},
    {"bad-two-documents.json", -EINVAL, "trailing data"},
    {"bad-duplicate-top-key.json", -EINVAL, "\"layout\" appears more than once"},
    {"bad-duplicate-entry-key.json", -EINVAL, "entry 0|\"path\" appears more than once"},
    {"bad-entry-not-object.json", -EINVAL, "entry 0|not a JSON object"},
    {"bad-path-missing.json", -EINVAL, "entry 0|\"path\" is missing"},
    {"bad-type-missing.json", -EINVAL, "entry 0 \"a\"|\"type\" is missing"},
    {"bad-type-unknown.json", -EINVAL, "entry 0 \"a\"|unknown entry type \"socket\""},
    {"bad-unsorted.json", -EINVAL, "entry 1 \"a\"|not sorted bytewise|follows \"b\""},
    {"bad-unsorted-unsigned.json", -EINVAL, "entry 1 \"z\"|not sorted bytewise"},
    {"bad-missing-parent.json", -EINVAL, "entry 0 \"a/b\"|missing parent directory"},
    {"bad-missing-grandparent.json", -EINVAL, "entry 0 \"a/b\"|missing parent directory"},
    {"bad-path-empty.json", -EINVAL, "entry 0 \"\"|path is empty"},
    {"bad-path-absolute.json", -EINVAL, "entry 0 \"/a\"|path is absolute"},
    {"bad-path-dot.json", -EINVAL, "entry 1 \"a/./b\"|\".\" component"},
    {"bad-path-dot-only.json", -EINVAL, "entry 0 \".\"|\".\" component"},
    {"bad-path-dotdot.json", -EINVAL, "entry 1 \"a/../b\"|\"..\" component"},
    {"bad-path-double-slash.json", -EINVAL, "entry 1 \"a//b\"|'//'"},
    {"bad-path-trailing-slash.json", -EINVAL, "entry 1 \"a/b/\"|trailing '/'"},
    {"bad-path-control.json", -EINVAL, "entry 0 \"a\\x01b\"|control character"},
    {"bad-path-newline.json", -EINVAL, "entry 0 \"a\\x0ab\"|control character"},
    {"bad-path-del.json", -EINVAL, "entry 0 \"a\\x7fb\"|control character"},
    {"bad-path-nul.json", -EINVAL, "\\u0000"},
    {"bad-key-nul.json", -EINVAL, "\\u0000"},
    {"bad-duplicate.json", -EINVAL, "entry 1 \"a\"|duplicate path"},
    {"bad-duplicate-dir.json", -EINVAL, "entry 1 \"a\"|duplicate path"},
    {"bad-file-under-file.json", -EINVAL, "entry 1 \"a/b\"|parent is a file"},
    {"bad-dir-under-file.json", -EINVAL, "entry 1 \"a/b\"|parent is a file"},
    {"bad-file-under-symlink.json", -EINVAL, "entry 2 \"l/b\"|parent is a symlink"},
    {"bad-size-missing.json", -EINVAL, "entry 0 \"a\"|size is missing"},
    {"bad-size-string.json", -EINVAL, "entry 0 \"a\"|size is missing or not a number"},
    {"bad-size-negative.json", -EINVAL, "entry 0 \"a\"|size is negative"},
    {"bad-size-fraction.json", -EINVAL, "entry 0 \"a\"|not a whole number"},
    {"bad-size-2p53.json", -E2BIG, "entry 0 \"a\"|not below 2^53"},
    {"bad-size-huge.json", -E2BIG, "entry 0 \"a\"|not below 2^53"},
    {"bad-sha256-missing.json", -EINVAL, "entry 0 \"a\"|sha256 is missing"},
    {"bad-sha256-upper.json", -EINVAL, "entry 0 \"a\"|sha256 is not 64 lowercase hex"},
    {"bad-sha256-short.json", -EINVAL, "entry 0 \"a\"|sha256 is not 64 lowercase hex"},
    {"bad-sha256-nonhex.json", -EINVAL, "entry 0 \"a\"|sha256 is not 64 lowercase hex"},
    {"bad-mtime-fraction.json", -EINVAL, "entry 0 \"a\"|mtime"},
    {"bad-target-missing.json", -EINVAL, "entry 0 \"l\"|target is missing"},
    {"bad-target-empty.json", -EINVAL, "entry 0 \"l\"|target is empty"},
    {"bad-link-absolute.json", -EINVAL, "entry 0 \"l\"|absolute"},
    {"bad-link-escape.json", -EINVAL, "entry 1 \"a/l\"|leaves the tree"},
    {"bad-link-escape-root.json", -EINVAL, "entry 0 \"up\"|leaves the tree"},
    {"bad-link-escape-dangling.json", -EINVAL, "entry 0 \"l\"|leaves the tree"},
    {"bad-link-escape-via-link.json", -EINVAL, "entry 2 \"sub/x\"|leaves the tree"},
    {"bad-link-loop.json", -EINVAL, "entry 0 \"a\"|loops"},
    {"bad-link-self.json", -EINVAL, "entry 0 \"a\"|loops"},
    {"bad-link-loop-dir.json", -EINVAL, "entry 1 \"d/l\"|loops"},
    {"bad-path-utf8-invalid.json", -EINVAL, "entry 0|path is not valid UTF-8"},
    {"bad-path-utf8-overlong.json", -EINVAL, "entry 0|path is not valid UTF-8"},
    {"bad-path-utf8-surrogate.json", -EINVAL, "entry 0|path is not valid UTF-8"},
    {"bad-path-utf8-truncated.json", -EINVAL, "entry 0|path is not valid UTF-8"},
    {"bad-link-utf8.json", -EINVAL, "entry 0 \"l\"|symlink target is not valid UTF-8"},
    {"bad-chunks-length.json", -EINVAL, "entry 0 \"m\"|chunks has the wrong length"},
    {"bad-chunks-form.json", -EINVAL, "entry 0 \"m\"|chunks holds a digest that is not 64 lowercase hex"},
    {"bad-chunks-not-array.json", -EINVAL, "entry 0 \"m\"|chunks is not an array"},
    {"bad-chunks-without-size.json", -EINVAL, "entry 0 \"m\"|chunks without a document-level chunk_size"},
    {"bad-chunk-size-not-pow2.json", -EINVAL, "chunk_size 3145728 is not a power of two"},
    {"bad-chunk-size-small.json", -EINVAL, "chunk_size|not a power of two from 1 MiB to 1 GiB"},
    {"bad-chunk-size-huge.json", -EINVAL, "chunk_size|not a power of two from 1 MiB to 1 GiB"},
};
#define NBAD (sizeof bad / sizeof *bad)

static void hostile_fixtures(void)
{
    for (size_t i = 0; i < NBAD; i++)
        expect_fail(bad[i].file, bad[i].code, bad[i].words);
    /* every bad-*.json on disk has a row: a new fixture cannot go untested */
    char path[1024];
    snprintf(path, sizeof path, "%s/manifests", data_dir());
    DIR *d = opendir(path);
    CHECK(d != NULL);
    size_t seen = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        if (strncmp(de->d_name, "bad-", 4) != 0)
            continue;
        seen++;
        int found = 0;
        for (size_t i = 0; i < NBAD; i++)
            found |= strcmp(bad[i].file, de->d_name) == 0;
        if (!found)
            fprintf(stderr, "fixture %s has no row in the table\n", de->d_name);
        CHECK(found);
    }
    if (d)
        closedir(d);
    CHECK_EQ_INT(seen, NBAD);
}

static char *write_str(const hfs3_manifest *m)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_manifest_write(m, &b) < 0)
        return NULL;
    size_t n;
    return hfs3_buf_take(&b, &n);
}

/* write(parse(doc)) == doc, and parse(write(m)) writes the same again. */
static void canonical_fixtures(void)
{
    const char *names[] = {"good-flat.json", "good-hf-cache.json", "good-empty.json", "good-chunks.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t n;
        char *doc = load(names[i], &n);
        CHECK(doc != NULL);
        if (!doc)
            continue;
        /* an exact-length copy with no NUL after it: parse must not read past n */
        char *exact = malloc(n);
        memcpy(exact, doc, n);
        hfs3_manifest *m = NULL;
        int rc = hfs3_manifest_parse(exact, n, &m);
        if (rc)
            fprintf(stderr, "%s: %s\n", names[i], hfs3_errmsg());
        CHECK_EQ_INT(rc, 0);
        char *out = m ? write_str(m) : NULL;
        CHECK(out && strcmp(out, doc) == 0);
        if (out && strcmp(out, doc) != 0)
            fprintf(stderr, "%s: rewritten as:\n%s", names[i], out);
        hfs3_manifest *m2 = NULL;
        CHECK_EQ_INT(out ? hfs3_manifest_parse(out, strlen(out), &m2) : -1, 0);
        char *out2 = m2 ? write_str(m2) : NULL;
        CHECK(out2 && strcmp(out2, doc) == 0);
        free(out2);
        free(out);
        hfs3_manifest_free(m2);
        hfs3_manifest_free(m);
        free(exact);
        free(doc);
    }
}

static void values(void)
{
    size_t n;
    char *doc = load("good-hf-cache.json", &n);
    hfs3_manifest *m = NULL;
    CHECK_EQ_INT(doc ? hfs3_manifest_parse(doc, n, &m) : -1, 0);
    free(doc);
    if (!m)
        return;
    CHECK_EQ_STR(m->layout, "hf-cache");
    CHECK_EQ_STR(m->revision, "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567");
    CHECK_EQ_STR(m->generator, "hfs3-manifest 0.1.0");
    const hfs3_entry *a =
        hfs3_manifest_find(m, "blobs/a2f1c0c4b4a3a7e2c6d8f0e1b3a5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1");
    CHECK(a && a->type == HFS3_FILE && a->size == 4831838208ULL && a->mtime == 1764496802);
    CHECK(a && strcmp(a->etag, "\"d41d8cd98f00b204e9800998ecf8427e-289\"") == 0);
    const hfs3_entry *b =
        hfs3_manifest_find(m, "blobs/5c9b2d1e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c");
    CHECK(b && b->size == HFS3_MAX_SIZE && b->size == 9007199254740991ULL);
    CHECK(hfs3_manifest_find(m, "") == NULL);
    CHECK(hfs3_manifest_find(m, "blob") == NULL);
    CHECK(hfs3_manifest_find(m, "refs/main/x") == NULL);
    CHECK(hfs3_manifest_find(m, "refs") && hfs3_manifest_find(m, "refs")->type == HFS3_DIR);
    /* two revisions share blobs: both snapshot links land on the same entry */
    const hfs3_entry *l1 = hfs3_manifest_find(
        m, "snapshots/0a1b2c3d4e5f60718293a4b5c6d7e8f901234567/model-00001-of-00002.safetensors");
    const hfs3_entry *l2 = hfs3_manifest_find(
        m, "snapshots/ffee000000000000000000000000000000000001/model-00001-of-00002.safetensors");
    const hfs3_entry *t1 = NULL, *t2 = NULL;
    CHECK_EQ_INT(hfs3_manifest_resolve(m, l1, &t1), 0);
    CHECK_EQ_INT(hfs3_manifest_resolve(m, l2, &t2), 0);
    CHECK(t1 == a && t2 == a);
    const hfs3_entry *self = NULL;
    CHECK_EQ_INT(hfs3_manifest_resolve(m, a, &self), 0);
    CHECK(self == a);
    size_t f, d, l;
    uint64_t by;
    hfs3_manifest_counts(m, &f, &d, &l, &by);
    CHECK_EQ_INT(f, 4);
    CHECK_EQ_INT(d, 5);
    CHECK_EQ_INT(l, 5);
    CHECK(by == 726ULL + 9007199254740991ULL + 4831838208ULL + 40ULL);
    hfs3_manifest_free(m);
}

static void lenient(void)
{
    size_t n;
    char *doc = load("good-lenient.json", &n);
    hfs3_manifest *m = NULL;
    int rc = doc ? hfs3_manifest_parse(doc, n, &m) : -1;
    if (rc)
        fprintf(stderr, "good-lenient.json: %s\n", hfs3_errmsg());
    CHECK_EQ_INT(rc, 0);
    free(doc);
    if (!m)
        return;
    CHECK_EQ_STR(m->generator, "other 9");
    CHECK(m->revision == NULL);
    const hfs3_entry *f = hfs3_manifest_find(m, "a/b/f");
    CHECK(f && f->size == 1000 && f->etag == NULL && f->mtime == 0);
    CHECK(hfs3_manifest_find(m, "escaped\\u0000name") != NULL);
    const hfs3_entry *t = NULL;
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "via"), &t), 0);
    CHECK(t == f);
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "via2"), &t), 0);
    CHECK(t == f);
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "alias"), &t), 0);
    CHECK(t == hfs3_manifest_find(m, "a/b"));
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "dangling"), &t), -ENOENT);
    CHECK(t == NULL);
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "dangling-file"), &t), -ENOENT);
    /* canonical rewrite is stable */
    char *w1 = write_str(m);
    hfs3_manifest *m2 = NULL;
    CHECK_EQ_INT(w1 ? hfs3_manifest_parse(w1, strlen(w1), &m2) : -1, 0);
    char *w2 = m2 ? write_str(m2) : NULL;
    CHECK(w1 && w2 && strcmp(w1, w2) == 0);
    CHECK(w1 && strstr(w1, "\"size\": 1000, ") != NULL);
    free(w1);
    free(w2);
    hfs3_manifest_free(m2);
    hfs3_manifest_free(m);
}

static void symlinks_through_dirlinks(void)
{
    size_t n;
    char *doc = load("good-flat.json", &n);
    hfs3_manifest *m = NULL;
    CHECK_EQ_INT(doc ? hfs3_manifest_parse(doc, n, &m) : -1, 0);
    free(doc);
    if (!m)
        return;
    const hfs3_entry *t = (const hfs3_entry *)1;
    /* sub/weights -> up/model.safetensors, sub/up -> .. */
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "sub/weights"), &t), 0);
    CHECK(t == hfs3_manifest_find(m, "model.safetensors"));
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "sub/up"), &t), 0);
    CHECK(t == NULL);   /* the root */
    hfs3_manifest_free(m);
}

static hfs3_entry file_entry(const char *path, uint64_t size)
{
    hfs3_entry e = {.path = (char *)path, .type = HFS3_FILE, .size = size, .mtime = 1764496800};
    memcpy(e.sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 65);
    return e;
}

static void build_order_independent(void)
{
    hfs3_entry es[] = {
        file_entry("b/c/d.bin", 4831838208ULL),
        file_entry("a.json", 10),
        file_entry("b/zz", 0),
        {.path = "b/link", .type = HFS3_SYMLINK, .target = "c/d.bin"},
        {.path = "empty", .type = HFS3_DIR},
        file_entry("\xc3\xa9.txt", 1),   /* sorts after every ASCII name */
        file_entry("b-sibling", 2),      /* '-' sorts before '/': "b", "b-sibling", "b/..." */
    };
    size_t ne = sizeof es / sizeof *es;
    es[1].etag = "\"etag\"";
    char *outs[2] = {NULL, NULL};
    for (int pass = 0; pass < 2; pass++) {
        hfs3_manifest *m = hfs3_manifest_new("flat", pass ? "rev" : "rev");
        CHECK(m != NULL);
        for (size_t i = 0; i < ne; i++)
            CHECK_EQ_INT(hfs3_manifest_add(m, &es[pass ? ne - 1 - i : i]), 0);
        int rc = hfs3_manifest_finish(m);
        if (rc)
            fprintf(stderr, "finish: %s\n", hfs3_errmsg());
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_STR(m->generator, "hfs3-manifest " HFS3_VERSION);
        CHECK(hfs3_manifest_find(m, "b") && hfs3_manifest_find(m, "b")->type == HFS3_DIR);
        CHECK(hfs3_manifest_find(m, "b/c") != NULL);
        CHECK_EQ_INT(m->n, ne + 2);
        CHECK_EQ_STR(m->entries[0].path, "a.json");
        CHECK_EQ_STR(m->entries[m->n - 1].path, "\xc3\xa9.txt");
        outs[pass] = write_str(m);
        hfs3_manifest_free(m);
    }
    CHECK(outs[0] && outs[1] && strcmp(outs[0], outs[1]) == 0);
    hfs3_manifest *p = NULL;
    CHECK_EQ_INT(outs[0] ? hfs3_manifest_parse(outs[0], strlen(outs[0]), &p) : -1, 0);
    char *again = p ? write_str(p) : NULL;
    CHECK(again && outs[0] && strcmp(again, outs[0]) == 0);
    CHECK(outs[0] && strstr(outs[0], "\"size\": 4831838208, ") != NULL);
    free(again);
    hfs3_manifest_free(p);
    free(outs[0]);
    free(outs[1]);
}

static void build_rejects(void)
{
    hfs3_manifest *m = hfs3_manifest_new("flat", NULL);
    hfs3_entry a = file_entry("x", 1), dup = file_entry("x", 2), bad = file_entry("a/../b", 1);
    CHECK_EQ_INT(hfs3_manifest_add(m, &a), 0);
    CHECK_EQ_INT(hfs3_manifest_add(m, &bad), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "\"a/../b\"") && strstr(hfs3_errmsg(), "\"..\" component"));
    CHECK_EQ_INT(hfs3_manifest_add(m, &dup), 0);
    CHECK_EQ_INT(hfs3_manifest_finish(m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "duplicate path") != NULL);
    hfs3_manifest_free(m);

    m = hfs3_manifest_new("flat", NULL);
    hfs3_entry esc = {.path = "d/l", .type = HFS3_SYMLINK, .target = "../../etc/passwd"};
    CHECK_EQ_INT(hfs3_manifest_add(m, &esc), 0);
    CHECK_EQ_INT(hfs3_manifest_finish(m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "\"d/l\"") && strstr(hfs3_errmsg(), "leaves the tree"));
    hfs3_manifest_free(m);

    m = hfs3_manifest_new("flat", NULL);
    hfs3_entry f = file_entry("f", 1), under = file_entry("f/g", 1);
    CHECK_EQ_INT(hfs3_manifest_add(m, &f), 0);
    CHECK_EQ_INT(hfs3_manifest_add(m, &under), 0);
    CHECK_EQ_INT(hfs3_manifest_finish(m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "parent is a file") != NULL);
    hfs3_manifest_free(m);

    m = hfs3_manifest_new("tree", NULL);
    CHECK_EQ_INT(hfs3_manifest_finish(m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "layout") != NULL);
    hfs3_manifest_free(m);

    m = hfs3_manifest_new("flat", NULL);
    hfs3_entry big = file_entry("big", HFS3_MAX_SIZE + 1);
    CHECK_EQ_INT(hfs3_manifest_add(m, &big), 0);
    CHECK_EQ_INT(hfs3_manifest_finish(m), -E2BIG);
    hfs3_manifest_free(m);
}

/* c01 -> c02 -> ... -> c40 -> f is 40 hops; c00 in front makes 41. */
static void hop_limit(void)
{
    hfs3_manifest *m = hfs3_manifest_new("flat", NULL);
    hfs3_entry f = file_entry("f", 1);
    hfs3_manifest_add(m, &f);
    char name[16], target[16];
    for (int i = 1; i <= 40; i++) {
        snprintf(name, sizeof name, "c%02d", i);
        snprintf(target, sizeof target, i == 40 ? "f" : "c%02d", i + 1);
        hfs3_entry l = {.path = name, .type = HFS3_SYMLINK, .target = target};
        CHECK_EQ_INT(hfs3_manifest_add(m, &l), 0);
    }
    int rc = hfs3_manifest_finish(m);
    if (rc)
        fprintf(stderr, "hop_limit: %s\n", hfs3_errmsg());
    CHECK_EQ_INT(rc, 0);
    const hfs3_entry *t = NULL;
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "c01"), &t), 0);
    CHECK(t == hfs3_manifest_find(m, "f"));
    /* validate remembers c01..c40 before it reaches these: the remembered hops must still add up */
    hfs3_entry x = {.path = "x", .type = HFS3_SYMLINK, .target = "c02"};   /* 1 + 39 hops */
    CHECK_EQ_INT(hfs3_manifest_add(m, &x), 0);
    CHECK_EQ_INT(hfs3_manifest_finish(m), 0);
    hfs3_entry y = {.path = "y", .type = HFS3_SYMLINK, .target = "./c01"};   /* 1 + 40 hops */
    CHECK_EQ_INT(hfs3_manifest_add(m, &y), 0);
    CHECK_EQ_INT(hfs3_manifest_finish(m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "\"y\"") && strstr(hfs3_errmsg(), "loops"));
    m->n--;   /* drop y again (sorted last) */
    free(m->entries[m->n].path);
    free(m->entries[m->n].target);
    hfs3_entry c0 = {.path = "c00", .type = HFS3_SYMLINK, .target = "c01"};
    CHECK_EQ_INT(hfs3_manifest_add(m, &c0), 0);
    CHECK_EQ_INT(hfs3_manifest_finish(m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "\"c00\"") && strstr(hfs3_errmsg(), "loops"));
    CHECK_EQ_INT(hfs3_manifest_resolve(m, hfs3_manifest_find(m, "c00"), &t), -ELOOP);
    hfs3_manifest_free(m);
}

/* A document with `count` directory entries named d0000000, d0000001, ... */
static char *many_dirs(size_t count, size_t *len)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    hfs3_buf_adds(&b, "{\"hfs3_manifest\": 1, \"layout\": \"flat\", \"entries\": [\n");
    for (size_t i = 0; i < count; i++)
        hfs3_buf_addf(&b, "%s{\"path\": \"d%07zu\", \"type\": \"dir\"}\n", i ? "," : "", i);
    hfs3_buf_adds(&b, "]}\n");
    return hfs3_buf_take(&b, len);
}

static int parse_str(const char *doc, hfs3_manifest **m) { return hfs3_manifest_parse(doc, strlen(doc), m); }

/* A one-file document with the given path. */
static int parse_path(const char *path)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    hfs3_buf_adds(&b, "{\"hfs3_manifest\": 1, \"layout\": \"flat\", \"entries\": [\n");
    /* its parent directories first */
    for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/'))
        hfs3_buf_addf(&b, "{\"path\": \"%.*s\", \"type\": \"dir\"},\n", (int)(s - path), path);
    hfs3_buf_addf(&b, "{\"path\": \"%s\", \"type\": \"dir\"}]}", path);
    hfs3_manifest *m = NULL;
    int rc = parse_str(hfs3_buf_str(&b), &m);
    hfs3_manifest_free(m);
    hfs3_buf_free(&b);
    return rc;
}

static void limits(void)
{
    size_t n;
    hfs3_manifest *m = NULL;
    char *doc = many_dirs(HFS3_MAX_ENTRIES, &n);
    CHECK_EQ_INT(hfs3_manifest_parse(doc, n, &m), 0);
    CHECK(m && m->n == HFS3_MAX_ENTRIES);
    hfs3_manifest_free(m);
    free(doc);
    m = NULL;
    doc = many_dirs(HFS3_MAX_ENTRIES + 1, &n);
    CHECK_EQ_INT(hfs3_manifest_parse(doc, n, &m), -E2BIG);
    CHECK(strstr(hfs3_errmsg(), "262144") != NULL);
    CHECK(m == NULL);
    free(doc);

    /* 64 MiB + 1 byte: refused before parsing */
    size_t big = (size_t)HFS3_MAX_DOC + 1;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    CHECK_EQ_INT(hfs3_manifest_parse(huge, big, &m), -E2BIG);
    CHECK(strstr(hfs3_errmsg(), "64 MiB") != NULL);
    free(huge);

    char path[8192];
    /* depth 64 ok, 65 not */
    path[0] = 0;
    for (int i = 0; i < 64; i++)
        strcat(path, i ? "/d" : "d");
    CHECK_EQ_INT(parse_path(path), 0);
    strcat(path, "/d");
    CHECK_EQ_INT(parse_path(path), -E2BIG);
    CHECK(strstr(hfs3_errmsg(), "deeper than 64") != NULL);
    /* 255-byte component ok, 256 not */
    memset(path, 'x', 255);
    path[255] = 0;
    CHECK_EQ_INT(parse_path(path), 0);
    memset(path, 'x', 256);
    path[256] = 0;
    CHECK_EQ_INT(parse_path(path), -E2BIG);
    CHECK(strstr(hfs3_errmsg(), "longer than 255") != NULL);
    /* 4096-byte path ok (20 components of 200 + separators + a 76-byte tail), 4097 not */
    size_t o = 0;
    for (int i = 0; i < 20; i++) {
        memset(path + o, 'a' + i, 200);
        o += 200;
        path[o++] = '/';
    }
    memset(path + o, 'z', 4096 - o);
    path[4096] = 0;
    CHECK_EQ_INT(strlen(path), 4096);
    CHECK_EQ_INT(parse_path(path), 0);
    path[4096] = 'z';
    path[4097] = 0;
    CHECK_EQ_INT(parse_path(path), -E2BIG);
    CHECK(strstr(hfs3_errmsg(), "longer than 4096") != NULL);
}

static void nul_and_garbage(void)
{
    hfs3_manifest *m = NULL;
    /* a raw NUL byte in the middle of the buffer */
    const char raw[] = "{\"hfs3_manifest\": 1, \"layout\": \"flat\", \"entries\": []}\0 ";
    CHECK_EQ_INT(hfs3_manifest_parse(raw, sizeof raw - 1, &m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "NUL") != NULL);
    CHECK_EQ_INT(parse_str("{\"hfs3_manifest\": 1, \"layout\": \"fl\\u0000at\", \"entries\": []}", &m), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "\\u0000") != NULL);
    /* an escaped backslash before u0000 is an ordinary string */
    CHECK_EQ_INT(parse_str("{\"hfs3_manifest\": 1, \"x\": \"\\\\u0000\", \"layout\": \"flat\", \"entries\": []}", &m),
                 0);
    hfs3_manifest_free(m);
    m = NULL;
    CHECK_EQ_INT(parse_str("{\"hfs3_manifest\": 1, \"layout\": \"flat\", \"entries\": []} \n\t\r ", &m), 0);
    hfs3_manifest_free(m);
    m = NULL;
    CHECK_EQ_INT(parse_str("", &m), -EINVAL);
    CHECK_EQ_INT(parse_str("{\"hfs3_manifest\": 1.0, \"layout\": \"flat\", \"entries\": []}", &m), 0);
    hfs3_manifest_free(m);
    m = NULL;
    CHECK_EQ_INT(parse_str("{\"hfs3_manifest\": 1.5, \"layout\": \"flat\", \"entries\": []}", &m), -EINVAL);
    CHECK_EQ_INT(parse_str("{\"hfs3_manifest\": 0, \"layout\": \"flat\", \"entries\": []}", &m), -ENOTSUP);
}

/* Truncated and odd documents in exact-length buffers (no NUL after them): ASan catches a read past n. */
static void exact_buffers(void)
{
    static const char *docs[] = {
        "1", "12345", "{\"a\": 12", "{\"a\": \"x", "{\"a\": \"x\\", "{\"a\": \"\\u00", "{\"a\": tru", "[", "{", "\"",
        "{\"hfs3_manifest\": 1, \"layout\": \"flat\", \"entries\": [",
        "{\"hfs3_manifest\": 1, \"layout\": \"flat\", \"entries\": []} 7",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        size_t n = strlen(docs[i]);
        char *b = malloc(n);
        memcpy(b, docs[i], n);
        hfs3_manifest *m = NULL;
        CHECK_EQ_INT(hfs3_manifest_parse(b, n, &m), -EINVAL);
        CHECK(m == NULL);
        free(b);
    }
}

static void check_path_table(void)
{
    static const struct {
        const char *p;
        int ok;
    } t[] = {
        {"a", 1}, {"a/b", 1}, {"a.b/..c/...", 1}, {".hidden", 1}, {"a b/\xc3\xa9", 1}, {"", 0}, {"/a", 0},
        {"a/", 0}, {"a//b", 0}, {".", 0}, {"..", 0}, {"a/.", 0}, {"./a", 0}, {"a/../b", 0}, {"a\tb", 0},
        {"a\x7f", 0}, {"a\x1f", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        int rc = hfs3_manifest_check_path(t[i].p);
        if ((rc == 0) != t[i].ok)
            fprintf(stderr, "check_path(\"%s\") = %d\n", t[i].p, rc);
        CHECK_EQ_INT(rc, t[i].ok ? 0 : -EINVAL);
    }
    CHECK_EQ_INT(hfs3_manifest_check_path("a/../b"), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "\"a/../b\"") && strstr(hfs3_errmsg(), "\"..\" component"));
}

static void write_cap(void)
{
    hfs3_manifest *m = hfs3_manifest_new("hf-cache", "r\"ev");
    hfs3_entry f = file_entry("f", 1);
    hfs3_manifest_add(m, &f);
    CHECK_EQ_INT(hfs3_manifest_finish(m), 0);
    hfs3_buf b;
    hfs3_buf_init(&b, 40);
    CHECK_EQ_INT(hfs3_manifest_write(m, &b), -E2BIG);
    CHECK(b.data == NULL);
    char *s = write_str(m);
    CHECK(s && strstr(s, "\"revision\": \"r\\\"ev\",\n") != NULL);
    CHECK(s && s[strlen(s) - 1] == '\n');
    free(s);
    hfs3_manifest_free(m);
    hfs3_manifest_free(NULL);
}

/* Chunk digests (design §2): read into chunk_size and each file's concatenated digests. */
static void chunk_digests(void)
{
    size_t n;
    char *doc = load("good-chunks.json", &n);
    hfs3_manifest *m = NULL;
    CHECK(doc && hfs3_manifest_parse(doc, n, &m) == 0);
    if (!m) {
        free(doc);
        return;
    }
    CHECK(m->chunk_size == 1048576);
    const hfs3_entry *e = hfs3_manifest_find(m, "m");
    CHECK(e && e->chunks && strlen(e->chunks) == 3 * 64 && e->chunks[0] == 'a' && e->chunks[64] == 'b' &&
          e->chunks[128] == 'c');
    const hfs3_entry *z = hfs3_manifest_find(m, "z");
    CHECK(z && z->chunks && !*z->chunks);
    /* a size that no longer fits the digests is refused by validate too (build uses it) */
    ((hfs3_entry *)e)->size = 3 * 1048576 + 1;
    CHECK(hfs3_manifest_validate(m) == -EINVAL && strstr(hfs3_errmsg(), "chunks has the wrong length"));
    hfs3_manifest_free(m);
    free(doc);
    /* valid UTF-8 of every length passes the path rule */
    CHECK(hfs3_manifest_check_path("a/\xc3\xa9/\xe6\xbc\xa2/\xf0\x9f\x98\x80") == 0);
    CHECK(hfs3_manifest_check_path("\xf4\x90\x80\x80") == -EINVAL); /* above U+10FFFF */
    CHECK(hfs3_manifest_check_path("\xe0\x80\xaf") == -EINVAL);     /* overlong '/' */
    CHECK(hfs3_manifest_check_path("\x80") == -EINVAL);               /* a lone continuation byte */
}

int main(void)
{
    TEST(hostile_fixtures);
    TEST(canonical_fixtures);
    TEST(values);
    TEST(lenient);
    TEST(symlinks_through_dirlinks);
    TEST(build_order_independent);
    TEST(build_rejects);
    TEST(hop_limit);
    TEST(limits);
    TEST(nul_and_garbage);
    TEST(exact_buffers);
    TEST(check_path_table);
    TEST(write_cap);
    TEST(chunk_digests);
    return t_done("test_manifest");
}
