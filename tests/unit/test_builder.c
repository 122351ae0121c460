/* test_builder.c - the pure half of `build`: a ListObjectsV2 listing turned into items (prefix, bookkeeping,
 * directory markers, .rclonelink), the checks a reader would otherwise reject (x beside x.rclonelink, a beside
 * a/, escaping links), layout detection, and items turned into the manifest -- sizes past 32 bits kept from
 * the XML to the canonical document. No server: the S3 half of build is tests/e2e/t_manifest_*.sh.
 * builder.c is included so that its static functions can be called (lib/builder.o is then not linked in). */
#include "../../lib/builder.c"

#include "harness.h"
#include "hfs3/s3xml.h"

static hfs3_remote remote(const char *prefix)
{
    hfs3_remote r;
    memset(&r, 0, sizeof r);
    r.spec = (char *)"test:models/m";
    r.bucket = (char *)"models";
    r.prefix = (char *)prefix;
    return r;
}

static const char *contents(hfs3_buf *b, const char *key, unsigned long long size)
{
    hfs3_buf_addf(b, "<Contents><Key>%s</Key><LastModified>2026-11-30T11:28:56.527Z</LastModified>"
                     "<ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag><Size>%llu</Size>"
                     "<StorageClass>STANDARD</StorageClass></Contents>",
                  key, size);
    return hfs3_buf_str(b);
}

static int parse_listing(hfs3_buf *xml, hfs3_s3_list *list)
{
    hfs3_buf doc;
    hfs3_buf_init(&doc, 0);
    hfs3_buf_adds(&doc, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
                        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>models</Name><Prefix>m/</Prefix>"
                        "<KeyCount>9</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>");
    hfs3_buf_adds(&doc, hfs3_buf_str(xml));
    hfs3_buf_adds(&doc, "</ListBucketResult>");
    int truncated = 1;
    char *next = NULL;
    int rc = hfs3_s3xml_parse_list(hfs3_buf_str(&doc), doc.len, list, &truncated, &next);
    CHECK_EQ_INT(truncated, 0);
    free(next);
    hfs3_buf_free(&doc);
    return rc;
}

static void free_state(build_state *st)
{
    items_free(st->items, st->n);
    for (size_t d = 0; d < st->ndirs; d++)
        free(st->dirs[d]);
    free(st->dirs);
    for (size_t d = 0; d < st->nmeta; d++)
        free(st->meta_keys[d]);
    free(st->meta_keys);
    memset(st, 0, sizeof *st);
}

static void sort_state(build_state *st)
{
    if (st->n)
        qsort(st->items, st->n, sizeof *st->items, cmp_item);
    if (st->ndirs)
        qsort(st->dirs, st->ndirs, sizeof *st->dirs, cmp_str);
}

#define FIVE_G ((5ULL << 30) + 3)
#define FOUR_G ((1ULL << 32) + 1)

/* The listing -> items -> manifest -> canonical JSON -> parsed manifest path keeps every size exactly. */
static void listing_to_manifest(void)
{
    hfs3_buf xml;
    hfs3_buf_init(&xml, 0);
    contents(&xml, "m/.cache/huggingface/download/model-00001.safetensors.metadata", 120);
    contents(&xml, "m/.hfs3/manifest.json", 900);
    contents(&xml, "m/config.json", 27);
    contents(&xml, "m/link.json.rclonelink", 11);
    contents(&xml, "m/model-00001.safetensors", FIVE_G);
    contents(&xml, "m/sub/", 0);
    contents(&xml, "m/sub/b.bin", FOUR_G);
    contents(&xml, "m/sub/c.bin", (1ULL << 31) + 1);
    contents(&xml, "mx/elsewhere.bin", 5);
    hfs3_s3_list list = {0};
    CHECK_EQ_INT(parse_listing(&xml, &list), 0);
    hfs3_buf_free(&xml);
    CHECK_EQ_INT(list.n, 9);

    hfs3_remote r = remote("m");
    hfs3_build_opts o = {0};
    hfs3_buf problems;
    hfs3_buf_init(&problems, 0);
    build_state st = {.r = &r, .o = &o, .problems = &problems};
    CHECK_EQ_INT(read_listing(&st, &list), 0);
    sort_state(&st);
    /* the manifest itself, the bookkeeping and keys outside the prefix are not content */
    CHECK_EQ_INT(st.n, 5);
    CHECK_EQ_INT(st.ndirs, 1);
    CHECK_EQ_STR(st.ndirs ? st.dirs[0] : NULL, "sub");
    CHECK_EQ_INT(st.nmeta, 1);
    CHECK_EQ_STR(st.nmeta ? st.meta_keys[0] : NULL, ".cache/huggingface/download/model-00001.safetensors.metadata");
    item *big = find_item(&st, "model-00001.safetensors");
    item *b4 = find_item(&st, "sub/b.bin");
    item *c2 = find_item(&st, "sub/c.bin");
    item *link = find_item(&st, "link.json");
    CHECK(big && b4 && c2 && link);
    if (!big || !b4 || !c2 || !link) {
        free_state(&st);
        hfs3_s3_list_free(&list);
        hfs3_buf_free(&problems);
        return;
    }
    CHECK(big->size == FIVE_G);
    CHECK(b4->size == FOUR_G);
    CHECK(c2->size == (1ULL << 31) + 1);
    CHECK_EQ_STR(big->key, "m/model-00001.safetensors");
    CHECK_EQ_STR(big->etag, "\"0123456789abcdef0123456789abcdef\"");
    CHECK_EQ_INT(big->mtime, 1796038136); /* 2026-11-30T11:28:56Z */
    CHECK(link->is_link && !big->is_link);
    CHECK_EQ_STR(link->key, "m/link.json.rclonelink");
    CHECK_EQ_STR(detect_layout(&st), "flat");

    /* what the S3 half would fill in: each sha256 and the link's target */
    for (size_t i = 0; i < st.n; i++)
        if (!st.items[i].is_link)
            hfs3_sha256_hexof(st.items[i].rel, strlen(st.items[i].rel), st.items[i].sha256);
    link->target = hfs3_strdup("config.json");
    CHECK_EQ_INT(check_conflicts(&st, &problems), 0);
    hfs3_manifest *m = NULL;
    CHECK_EQ_INT(make_manifest(&st, "flat", NULL, &m), 0);
    CHECK_EQ_STR(hfs3_buf_str(&problems), "");
    if (m) {
        CHECK_EQ_INT(m->n, 6);
        const hfs3_entry *e = hfs3_manifest_find(m, "model-00001.safetensors");
        CHECK(e && e->type == HFS3_FILE && e->size == FIVE_G);
        e = hfs3_manifest_find(m, "sub/b.bin");
        CHECK(e && e->size == FOUR_G);
        e = hfs3_manifest_find(m, "sub");
        CHECK(e && e->type == HFS3_DIR);
        e = hfs3_manifest_find(m, "link.json");
        CHECK(e && e->type == HFS3_SYMLINK && !strcmp(e->target, "config.json"));
        hfs3_buf doc;
        hfs3_buf_init(&doc, HFS3_MAX_DOC);
        CHECK_EQ_INT(hfs3_manifest_write(m, &doc), 0);
        CHECK(strstr(hfs3_buf_str(&doc), "\"size\": 5368709123,") != NULL);
        CHECK(strstr(hfs3_buf_str(&doc), "\"size\": 4294967297,") != NULL);
        hfs3_manifest *back = NULL;
        CHECK_EQ_INT(hfs3_manifest_parse(hfs3_buf_str(&doc), doc.len, &back), 0);
        e = back ? hfs3_manifest_find(back, "model-00001.safetensors") : NULL;
        CHECK(e && e->size == FIVE_G);
        e = back ? hfs3_manifest_find(back, "sub/c.bin") : NULL;
        CHECK(e && e->size == (1ULL << 31) + 1);
        hfs3_manifest_free(back);
        hfs3_buf_free(&doc);
    }
    hfs3_manifest_free(m);
    free_state(&st);
    hfs3_s3_list_free(&list);
    hfs3_buf_free(&problems);
}

/* An empty prefix: every key is content; keys end up relative to the bucket. */
static void empty_prefix(void)
{
    hfs3_buf xml;
    hfs3_buf_init(&xml, 0);
    contents(&xml, ".hfs3/manifest.json", 10);
    contents(&xml, "a.txt", 1);
    contents(&xml, "d/", 0);
    hfs3_s3_list list = {0};
    CHECK_EQ_INT(parse_listing(&xml, &list), 0);
    hfs3_buf_free(&xml);
    hfs3_remote r = remote("");
    hfs3_build_opts o = {0};
    build_state st = {.r = &r, .o = &o};
    CHECK_EQ_INT(read_listing(&st, &list), 0);
    CHECK_EQ_INT(st.n, 1);
    CHECK_EQ_STR(st.n ? st.items[0].rel : NULL, "a.txt");
    CHECK_EQ_INT(st.ndirs, 1);
    free_state(&st);
    hfs3_s3_list_free(&list);
}

static void add(build_state *st, const char *key, uint64_t size, const char *target)
{
    hfs3_s3_object o = {.key = (char *)key, .size = size};
    const char *rel = key + strlen(st->r->prefix) + (*st->r->prefix ? 1 : 0);
    CHECK_EQ_INT(add_item(st, &o, rel), 0);
    if (target)
        st->items[st->n - 1].target = hfs3_strdup(target);
}

/* The refusals build makes itself, naming the key, before any reader sees the document. */
static void conflicts(void)
{
    hfs3_remote r = remote("p");
    hfs3_build_opts o = {0};
    hfs3_buf problems;
    hfs3_buf_init(&problems, 0);
    build_state st = {.r = &r, .o = &o, .problems = &problems};
    add(&st, "p/x", 1, NULL);
    add(&st, "p/x.rclonelink", 1, "y");
    add(&st, "p/a", 1, NULL);
    add(&st, "p/a/b", 1, NULL);
    add(&st, "p/d/up.rclonelink", 12, "../../escape");
    add(&st, "p/d/ok.rclonelink", 5, "../x");
    add(&st, "p/abs.rclonelink", 4, "/etc");
    sort_state(&st);
    CHECK_EQ_INT(check_conflicts(&st, &problems), 4);
    const char *p = hfs3_buf_str(&problems);
    CHECK(strstr(p, "test:models/m: both p/x and p/x.rclonelink exist") != NULL);
    CHECK(strstr(p, "key p/a is an object but p/a/b is also under it") != NULL);
    CHECK(strstr(p, "key p/d/up.rclonelink: symlink target \"../../escape\" leaves the tree") != NULL);
    CHECK(strstr(p, "key p/abs.rclonelink: symlink target \"/etc\" leaves the tree") != NULL);
    CHECK(strstr(p, "ok.rclonelink") == NULL);
    free_state(&st);
    hfs3_buf_free(&problems);

    /* an object and a directory marker of the same name */
    hfs3_buf_init(&problems, 0);
    st = (build_state){.r = &r, .o = &o, .problems = &problems};
    add(&st, "p/m", 1, NULL);
    CHECK_EQ_INT(push_str(&st.dirs, &st.ndirs, "m", 1), 0);
    CHECK_EQ_INT(check_conflicts(&st, &problems), 1);
    CHECK(strstr(hfs3_buf_str(&problems), "key p/m is an object and a directory marker m/ too") != NULL);
    free_state(&st);
    hfs3_buf_free(&problems);
}

static void escapes(void)
{
    static const struct {
        const char *rel, *target;
        int escapes;
    } cases[] = {
        {"a", "b", 0},
        {"a", "../b", 1},
        {"d/a", "../b", 0},
        {"d/a", "../../b", 1},
        {"d/a", "./../b", 0},
        {"d/a", "x/../../b", 0},
        {"d/a", "x/../../../b", 1},
        {"snapshots/rev/config.json", "../../blobs/abc", 0},
        {"snapshots/rev/config.json", "../../../blobs/abc", 1},
        {"a", "/abs", 1},
        {"a", "", 0},
        {"d/e/f", "../../..", 1},
        {"d/e/f", "../..", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int got = link_escapes(cases[i].rel, cases[i].target);
        if (got != cases[i].escapes)
            fprintf(stderr, "link_escapes(%s, %s) = %d\n", cases[i].rel, cases[i].target, got);
        CHECK_EQ_INT(got, cases[i].escapes);
    }
}

static void layouts(void)
{
    hfs3_remote r = remote("");
    hfs3_build_opts o = {0};
    build_state st = {.r = &r, .o = &o};
    add(&st, "blobs/0000000000000000000000000000000000000000000000000000000000000000", 1, NULL);
    add(&st, "snapshots/rev/x.rclonelink", 1, NULL);
    CHECK_EQ_STR(detect_layout(&st), "flat");
    add(&st, "refs/main", 1, NULL);
    CHECK_EQ_STR(detect_layout(&st), "hf-cache");
    free_state(&st);
    CHECK(is_lfs_blob("blobs/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(!is_lfs_blob("blobs/0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(!is_lfs_blob("blobs/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde"));
    CHECK(!is_lfs_blob("x/blobs/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    CHECK(!is_lfs_blob("blobs/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.x"));
}

/* make_manifest refuses what readers refuse (a dangling parent is added, a loop is not written). */
static void refused_manifest(void)
{
    hfs3_remote r = remote("");
    hfs3_build_opts o = {0};
    hfs3_buf problems;
    hfs3_buf_init(&problems, 0);
    build_state st = {.r = &r, .o = &o, .problems = &problems};
    add(&st, "d/l1.rclonelink", 2, "l2");
    add(&st, "d/l2.rclonelink", 2, "l1");
    sort_state(&st);
    hfs3_manifest *m = (hfs3_manifest *)1;
    CHECK_EQ_INT(make_manifest(&st, "flat", NULL, &m), -EINVAL);
    CHECK(m == NULL);
    CHECK(strstr(hfs3_buf_str(&problems), "the manifest would be rejected by readers") != NULL);
    CHECK(strstr(hfs3_buf_str(&problems), "loop") != NULL);
    free_state(&st);
    hfs3_buf_free(&problems);
}

int main(void)
{
    TEST(listing_to_manifest);
    TEST(empty_prefix);
    TEST(conflicts);
    TEST(escapes);
    TEST(layouts);
    TEST(refused_manifest);
    return t_done("test_builder");
}
