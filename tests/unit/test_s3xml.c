#include "harness.h"
#include "hfs3/s3xml.h"

#include <errno.h>
#include <stdlib.h>

/* A page as S3 and s3rver write it: default namespace, entities in ETags, CommonPrefixes, a token. */
static const char LIST1[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>models</Name><Prefix>qwen/</Prefix><KeyCount>3</KeyCount><MaxKeys>3</MaxKeys>"
    "<IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "<Contents><Key>qwen/config.json</Key><LastModified>2026-11-30T11:28:56.527Z</LastModified>"
    "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>726</Size>"
    "<StorageClass>STANDARD</StorageClass><Owner><ID>123</ID><DisplayName>x</DisplayName></Owner></Contents>"
    "<Contents><Key>qwen/a b+c=d~e$f@g &#xE9;&amp;.bin</Key><LastModified>2026-01-02T03:04:05Z</LastModified>"
    "<ETag>\"d41d8cd98f00b204e9800998ecf8427e-12\"</ETag><Size>4965567488</Size></Contents>"
    "<CommonPrefixes><Prefix>qwen/sub/</Prefix></CommonPrefixes>"
    "<Contents><Size>9007199254740991</Size><Key>qwen/big</Key></Contents>"
    "</ListBucketResult>";

static void list_page(void)
{
    hfs3_s3_list l = {0};
    int trunc = -1;
    char *tok = NULL;
    CHECK_EQ_INT(hfs3_s3xml_parse_list(LIST1, sizeof LIST1 - 1, &l, &trunc, &tok), 0);
    CHECK_EQ_INT(l.n, 3);
    CHECK_EQ_INT(trunc, 1);
    CHECK_EQ_STR(tok, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    if (l.n == 3) {
        CHECK_EQ_STR(l.v[0].key, "qwen/config.json");
        CHECK_EQ_INT(l.v[0].size, 726);
        CHECK_EQ_STR(l.v[0].etag, "\"9b2cf535f27731c974343645a3985328\"");
        CHECK_EQ_INT(l.v[0].mtime, 1796038136LL);
        CHECK_EQ_STR(l.v[1].key, "qwen/a b+c=d~e$f@g \xc3\xa9&.bin");
        CHECK_EQ_INT(l.v[1].size, 4965567488ULL);
        CHECK_EQ_STR(l.v[1].etag, "\"d41d8cd98f00b204e9800998ecf8427e-12\"");
        CHECK_EQ_INT(l.v[1].mtime, 1767323045LL);
        CHECK_EQ_STR(l.v[2].key, "qwen/big");
        CHECK_EQ_INT(l.v[2].size, 9007199254740991ULL);
        CHECK(l.v[2].etag == NULL);
        CHECK_EQ_INT(l.v[2].mtime, 0);
    }
    /* a second page appends */
    static const char LAST[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
                               "<Contents><Key>qwen/z</Key><Size>0</Size></Contents></ListBucketResult>";
    free(tok);
    tok = (char *)"sentinel";
    CHECK_EQ_INT(hfs3_s3xml_parse_list(LAST, sizeof LAST - 1, &l, &trunc, &tok), 0);
    CHECK_EQ_INT(l.n, 4);
    CHECK_EQ_INT(trunc, 0);
    CHECK(tok == NULL);
    hfs3_s3_list_free(&l);
    CHECK(l.v == NULL && l.n == 0);
}

static void list_prefixed_ns(void)
{
    static const char X[] = "<s3:ListBucketResult xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                            "<s3:Contents><s3:Key>k</s3:Key><s3:Size>5</s3:Size></s3:Contents>"
                            "</s3:ListBucketResult>";
    hfs3_s3_list l = {0};
    int trunc = 7;
    CHECK_EQ_INT(hfs3_s3xml_parse_list(X, sizeof X - 1, &l, &trunc, NULL), 0);
    CHECK_EQ_INT(l.n, 1);
    CHECK_EQ_INT(trunc, 0);
    if (l.n == 1)
        CHECK_EQ_STR(l.v[0].key, "k");
    hfs3_s3_list_free(&l);

    static const char EMPTY[] = "<ListBucketResult><KeyCount>0</KeyCount></ListBucketResult>";
    CHECK_EQ_INT(hfs3_s3xml_parse_list(EMPTY, sizeof EMPTY - 1, &l, &trunc, NULL), 0);
    CHECK_EQ_INT(l.n, 0);
    hfs3_s3_list_free(&l);
}

static void expect_bad_list(const char *xml, const char *needle)
{
    hfs3_s3_list l = {0};
    /* one good object already in the list: a failed page must leave it alone */
    static const char GOOD[] = "<ListBucketResult><Contents><Key>keep</Key><Size>1</Size></Contents></ListBucketResult>";
    CHECK_EQ_INT(hfs3_s3xml_parse_list(GOOD, sizeof GOOD - 1, &l, NULL, NULL), 0);
    int trunc = 0;
    char *tok = NULL;
    hfs3_err_clear();
    CHECK_EQ_INT(hfs3_s3xml_parse_list(xml, strlen(xml), &l, &trunc, &tok), -EINVAL);
    CHECK(tok == NULL);
    CHECK_EQ_INT(l.n, 1);
    if (!strstr(hfs3_errmsg(), needle)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", hfs3_errmsg(), needle);
        CHECK(0);
    }
    CHECK(strchr(hfs3_errmsg(), '\n') == NULL);
    hfs3_s3_list_free(&l);
}

static void list_malformed(void)
{
    const char *head = "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken>"
                       "<Contents><Key>a</Key><Size>1</Size></Contents>";
    char buf[1024];
    /* truncated body */
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Ke", head);
    expect_bad_list(buf, "ListObjectsV2");
    snprintf(buf, sizeof buf, "%s", head);
    expect_bad_list(buf, "ListObjectsV2");
    /* bad nesting */
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Size></Key></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "mismatched tag");
    snprintf(buf, sizeof buf, "%s<Contents><Key>b<x/></Key><Size>1</Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "inside a text field");
    /* sizes */
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key><Size>9007199254740992</Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "2^53");
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key><Size>99999999999999999999999</Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "2^53");
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key><Size>-1</Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "Size \"-1\"");
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key><Size>12a</Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "whole number");
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key><Size>1.5</Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "whole number");
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key><Size></Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "whole number");
    /* missing fields */
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "without <Size>");
    snprintf(buf, sizeof buf, "%s<Contents><Size>3</Size></Contents></ListBucketResult>", head);
    expect_bad_list(buf, "without <Key>");
    /* other documents and junk */
    expect_bad_list("<Error><Code>NoSuchBucket</Code></Error>", "<Error>");
    expect_bad_list("", "ListObjectsV2");
    expect_bad_list("not xml at all", "ListObjectsV2");
    snprintf(buf, sizeof buf, "%s<Contents><Key>b</Key><Size>1</Size><LastModified>yesterday</LastModified>"
                              "</Contents></ListBucketResult>", head);
    expect_bad_list(buf, "LastModified");
    snprintf(buf, sizeof buf, "%s</ListBucketResult><ListBucketResult/>", head);
    expect_bad_list(buf, "junk after document element");
    expect_bad_list("<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>", "IsTruncated");
    expect_bad_list("<ListBucketResult><Contents><Key>&bogus;</Key><Size>1</Size></Contents></ListBucketResult>",
                    "undefined entity");
    /* issue 7 §2: an entity reference in <Key> (declared in a DTD) must not become an empty key */
    expect_bad_list("<!DOCTYPE ListBucketResult SYSTEM \"x.dtd\"><ListBucketResult><Contents><Key>&ext;</Key>"
                    "<Size>1</Size></Contents></ListBucketResult>", "a DOCTYPE");
    expect_bad_list("<!DOCTYPE ListBucketResult [<!ENTITY e \"secret\">]><ListBucketResult><Contents><Key>a&e;</Key>"
                    "<Size>1</Size></Contents></ListBucketResult>", "DOCTYPE");
    expect_bad_list("<ListBucketResult><Contents><Key></Key><Size>1</Size></Contents></ListBucketResult>",
                    "<Key> is empty");
    /* a second <Key> must not replace the first */
    expect_bad_list("<ListBucketResult><Contents><Key>a</Key><Key>b</Key><Size>1</Size></Contents></ListBucketResult>",
                    "<Contents> for key \"a\" has a second <Key>");
    expect_bad_list("<ListBucketResult><Contents><Key>a</Key><Size>1</Size><Size>2</Size></Contents></ListBucketResult>",
                    "a second <Size>");
    /* character references are plain text, and fine */
    hfs3_s3_list l = {0};
    static const char AMP[] = "<ListBucketResult><Contents><Key>a&amp;b&#x41;</Key><Size>1</Size></Contents></ListBucketResult>";
    CHECK_EQ_INT(hfs3_s3xml_parse_list(AMP, sizeof AMP - 1, &l, NULL, NULL), 0);
    CHECK(l.n == 1 && !strcmp(l.v[0].key, "a&bA"));
    hfs3_s3_list_free(&l);
}

/* a delimiter listing: <CommonPrefixes><Prefix> go to their own list; the plain parser ignores them */
static void list_common_prefixes(void)
{
    const char *xml = "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                      "<Prefix>hub/</Prefix><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
                      "<NextContinuationToken>t2</NextContinuationToken>"
                      "<Contents><Key>hub/version.txt</Key><Size>2</Size></Contents>"
                      "<CommonPrefixes><Prefix>hub/models--a--b/</Prefix></CommonPrefixes>"
                      "<CommonPrefixes><Prefix>hub/models--c--d/</Prefix></CommonPrefixes></ListBucketResult>";
    hfs3_s3_list l = {0}, p = {0};
    int trunc = 0;
    char *tok = NULL;
    CHECK(hfs3_s3xml_parse_list_dir(xml, strlen(xml), &l, &p, &trunc, &tok) == 0);
    CHECK(l.n == 1 && !strcmp(l.v[0].key, "hub/version.txt"));
    CHECK(p.n == 2 && !strcmp(p.v[0].key, "hub/models--a--b/") && !strcmp(p.v[1].key, "hub/models--c--d/"));
    CHECK(trunc == 1 && tok && !strcmp(tok, "t2"));
    free(tok);
    hfs3_s3_list_free(&l);
    hfs3_s3_list_free(&p);
    CHECK(hfs3_s3xml_parse_list(xml, strlen(xml), &l, NULL, NULL) == 0 && l.n == 1);
    hfs3_s3_list_free(&l);
    const char *bad = "<ListBucketResult><CommonPrefixes><Prefix></Prefix></CommonPrefixes></ListBucketResult>";
    CHECK(hfs3_s3xml_parse_list_dir(bad, strlen(bad), &l, &p, NULL, NULL) == -EINVAL && l.n == 0 && p.n == 0);
    /* a bad page after good ones: what the page appended before its error is freed, the earlier pages stay */
    CHECK(hfs3_s3xml_parse_list_dir(xml, strlen(xml), &l, &p, NULL, NULL) == 0 && l.n == 1 && p.n == 2);
    const char *half = "<ListBucketResult><Contents><Key>x</Key><Size>1</Size></Contents>"
                       "<CommonPrefixes><Prefix>a/</Prefix></CommonPrefixes>"
                       "<CommonPrefixes><Prefix></Prefix></CommonPrefixes></ListBucketResult>";
    CHECK(hfs3_s3xml_parse_list_dir(half, strlen(half), &l, &p, NULL, NULL) == -EINVAL && l.n == 1 && p.n == 2);
    CHECK(!strcmp(l.v[0].key, "hub/version.txt") && !strcmp(p.v[1].key, "hub/models--c--d/"));
    hfs3_s3_list_truncate(&p, 5);   /* longer than the list: nothing to do */
    CHECK(p.n == 2);
    hfs3_s3_list_truncate(&p, 1);
    CHECK(p.n == 1 && !strcmp(p.v[0].key, "hub/models--a--b/"));
    hfs3_s3_list_truncate(NULL, 0);
    hfs3_s3_list_free(&l);
    hfs3_s3_list_free(&p);
}

static void error_body(void)
{
    static const char E[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code>"
        "<Message>The request signature we calculated does not match the signature you provided. "
        "Check your key &amp; signing method.</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>";
    char *code = NULL, *msg = NULL;
    CHECK_EQ_INT(hfs3_s3xml_parse_error(E, sizeof E - 1, &code, &msg), 0);
    CHECK_EQ_STR(code, "SignatureDoesNotMatch");
    CHECK_EQ_STR(msg, "The request signature we calculated does not match the signature you provided. "
                      "Check your key & signing method.");
    free(code);
    free(msg);

    static const char E2[] = "<Error xmlns=\"urn:x\"><Code>NoSuchKey</Code></Error>";
    code = msg = (char *)"x";
    CHECK_EQ_INT(hfs3_s3xml_parse_error(E2, sizeof E2 - 1, &code, &msg), 0);
    CHECK_EQ_STR(code, "NoSuchKey");
    CHECK(msg == NULL);
    free(code);

    code = msg = NULL;
    CHECK_EQ_INT(hfs3_s3xml_parse_error("<html>503</html>", 16, &code, &msg), -EINVAL);
    CHECK(code == NULL && msg == NULL);
    CHECK_EQ_INT(hfs3_s3xml_parse_error("<Error><Code>Slow", 17, &code, &msg), -EINVAL);
    CHECK(code == NULL && msg == NULL);
    CHECK_EQ_INT(hfs3_s3xml_parse_error("", 0, &code, &msg), -EINVAL);
    CHECK_EQ_INT(hfs3_s3xml_parse_error(E, sizeof E - 1, NULL, NULL), 0);
}

static void times(void)
{
    long long t = -1;
    CHECK_EQ_INT(hfs3_s3xml_parse_time("1970-01-01T00:00:00Z", &t), 0);
    CHECK_EQ_INT(t, 0);
    CHECK_EQ_INT(hfs3_s3xml_parse_time("2026-11-30T11:28:56.527Z", &t), 0);
    CHECK_EQ_INT(t, 1796038136LL);
    CHECK_EQ_INT(hfs3_s3xml_parse_time("2026-11-30T11:28:56Z", &t), 0);
    CHECK_EQ_INT(t, 1796038136LL);
    CHECK_EQ_INT(hfs3_s3xml_parse_time("2024-02-29T23:59:59.000000Z", &t), 0);
    CHECK_EQ_INT(t, 1709251199LL);
    CHECK_EQ_INT(hfs3_s3xml_parse_time("2099-12-31T23:59:59Z", &t), 0);
    CHECK_EQ_INT(t, 4102444799LL);
    CHECK_EQ_INT(hfs3_s3xml_parse_time("2025-02-29T00:00:00Z", &t), -EINVAL); /* not a leap year */
    CHECK_EQ_INT(hfs3_s3xml_parse_time("2100-02-29T00:00:00Z", &t), -EINVAL);
    CHECK_EQ_INT(hfs3_s3xml_parse_time("2000-02-29T00:00:00Z", &t), 0);
    const char *bad[] = {"", "2026-11-30", "2026-11-30T11:28:56", "2026-11-30T11:28:56.Z", "2026-13-01T00:00:00Z",
                         "2026-11-30 11:28:56Z", "2026-11-30T25:00:00Z", "2026-11-30T11:28:56Zjunk",
                         "2026-11-30T11:28:56+01:00", "20261130T112856Z", "2026-1-30T11:28:56Z"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(hfs3_s3xml_parse_time(bad[i], &t), -EINVAL);
    CHECK_EQ_INT(hfs3_s3xml_parse_time(NULL, &t), -EINVAL);
}

static void big_list(void)
{
    /* 1000 entries in one page, like the server's full pages */
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    hfs3_buf_adds(&b, "<ListBucketResult><IsTruncated>false</IsTruncated>");
    for (int i = 0; i < 1000; i++)
        hfs3_buf_addf(&b, "<Contents><Key>k/%04d</Key><Size>%d</Size><ETag>&quot;e%d&quot;</ETag></Contents>", i, i, i);
    CHECK_EQ_INT(hfs3_buf_adds(&b, "</ListBucketResult>"), 0);
    hfs3_s3_list l = {0};
    CHECK_EQ_INT(hfs3_s3xml_parse_list(b.data, b.len, &l, NULL, NULL), 0);
    CHECK_EQ_INT(l.n, 1000);
    if (l.n == 1000) {
        CHECK_EQ_STR(l.v[999].key, "k/0999");
        CHECK_EQ_INT(l.v[999].size, 999);
        CHECK_EQ_STR(l.v[999].etag, "\"e999\"");
    }
    hfs3_s3_list_free(&l);
    hfs3_buf_free(&b);
}

int main(void)
{
    TEST(list_page);
    TEST(list_prefixed_ns);
    TEST(list_malformed);
    TEST(list_common_prefixes);
    TEST(error_body);
    TEST(times);
    TEST(big_list);
    return t_done("test_s3xml");
}
