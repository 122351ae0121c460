/* test_verify.c - the comparisons `verify` makes, without a server: a manifest entry against its listed object
 * (missing, size, link body length, ETag) and, for --deep, the streamed sha256 against the manifest's. Each
 * difference is one line naming the remote, the entry, the key and both values. The listing and streaming are
 * tests/e2e/t_verify.sh's. verify.c is included so that its static functions can be called. */
#include "../../lib/verify.c"

#include "harness.h"

static const char *SHA_A = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

static hfs3_remote remote(void)
{
    hfs3_remote r;
    memset(&r, 0, sizeof r);
    r.spec = (char *)"rem:models/m";
    r.bucket = (char *)"models";
    r.prefix = (char *)"m";
    return r;
}

static hfs3_entry file(const char *path, uint64_t size, const char *etag)
{
    hfs3_entry e;
    memset(&e, 0, sizeof e);
    e.path = (char *)path;
    e.type = HFS3_FILE;
    e.size = size;
    e.etag = (char *)etag;
    memcpy(e.sha256, SHA_A, 65);
    return e;
}

/* check_listed(e, obj) returns want and appends exactly want lines, the line holding `words` */
static void listed_is(const hfs3_entry *e, const hfs3_s3_object *obj, int want, const char *words)
{
    hfs3_remote r = remote();
    hfs3_buf p;
    hfs3_buf_init(&p, 0);
    CHECK_EQ_INT(check_listed(&r, e, "m/key", obj, &p), want);
    if (want) {
        CHECK(strstr(hfs3_buf_str(&p), words) != NULL);
        if (!strstr(hfs3_buf_str(&p), words))
            fprintf(stderr, "  got: %s  want: %s\n", hfs3_buf_str(&p), words);
        CHECK(!strncmp(hfs3_buf_str(&p), "rem:models/m: ", 14));
        CHECK_EQ_INT(p.len && hfs3_buf_str(&p)[p.len - 1] == '\n' && !memchr(hfs3_buf_str(&p), '\n', p.len - 1), 1);
    } else {
        CHECK_EQ_INT(p.len, 0);
    }
    hfs3_buf_free(&p);
}

static void listing_checks(void)
{
    hfs3_entry e = file("a.bin", 5, "\"e1\"");
    hfs3_s3_object o = {.key = (char *)"m/key", .size = 5, .etag = (char *)"\"e1\""};
    listed_is(&e, &o, 0, NULL);
    listed_is(&e, NULL, 1, "a.bin: key m/key is missing");
    o.size = 6;
    listed_is(&e, &o, 1, "a.bin: key m/key has 6 bytes, the manifest says 5");
    o.size = 5;
    o.etag = (char *)"\"e2\"";
    listed_is(&e, &o, 1, "a.bin: key m/key has ETag \"e2\", the manifest says \"e1\"");
    /* sizes past 32 bits compare in full */
    hfs3_entry big = file("big.bin", (1ULL << 32) + 7, NULL);
    hfs3_s3_object ob = {.key = (char *)"m/key", .size = 7};
    listed_is(&big, &ob, 1, "has 7 bytes, the manifest says 4294967303");
    ob.size = (1ULL << 32) + 7;
    listed_is(&big, &ob, 0, NULL);
    /* no ETag on either side: nothing to compare */
    o.etag = NULL;
    listed_is(&e, &o, 0, NULL);
    hfs3_entry noetag = file("a.bin", 5, NULL);
    o.etag = (char *)"\"e2\"";
    listed_is(&noetag, &o, 0, NULL);
    /* a symlink: its object's size is the target's length; its ETag is not compared */
    hfs3_entry l;
    memset(&l, 0, sizeof l);
    l.path = (char *)"link";
    l.type = HFS3_SYMLINK;
    l.target = (char *)"../config.json";
    hfs3_s3_object lo = {.key = (char *)"m/link.rclonelink", .size = 14, .etag = (char *)"\"x\""};
    listed_is(&l, &lo, 0, NULL);
    lo.size = 15;
    listed_is(&l, &lo, 1, "link: link object m/key has 15 bytes, target \"../config.json\" has 14");
    listed_is(&l, NULL, 1, "link: key m/key is missing");
}

static void hash_checks(void)
{
    hfs3_remote r = remote();
    hfs3_entry e = file("w.bin", 5, NULL);
    hfs3_buf p;
    hfs3_buf_init(&p, 0);
    CHECK_EQ_INT(check_hash(&r, &e, "m/w.bin", SHA_A, &p), 0);
    CHECK_EQ_INT(p.len, 0);
    /* one digit off, at either end, is a mismatch */
    char got[65];
    memcpy(got, SHA_A, 65);
    got[63] = 'b';
    CHECK_EQ_INT(check_hash(&r, &e, "m/w.bin", got, &p), 1);
    CHECK(strstr(hfs3_buf_str(&p), "rem:models/m: w.bin: sha256 of key m/w.bin is aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab, "
                                   "the manifest says aaaa") != NULL);
    hfs3_buf_reset(&p);
    memcpy(got, SHA_A, 65);
    got[0] = 'b';
    CHECK_EQ_INT(check_hash(&r, &e, "m/w.bin", got, &p), 1);
    hfs3_buf_free(&p);
}

int main(void)
{
    TEST(listing_checks);
    TEST(hash_checks);
    return t_done("test_verify");
}
