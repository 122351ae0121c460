/* test_s3.c - the parts of s3.c that need no server: addressing, key encoding, argument checks.
 * Requests against the real server are in tests/e2e/t_s3_client.sh. */
#include "harness.h"
#include "hfs3/s3.h"

#include <errno.h>
#include <stdlib.h>

static hfs3_remote remote(const char *endpoint, int path_style)
{
    hfs3_remote r;
    memset(&r, 0, sizeof r);
    r.spec = (char *)"test:models";
    r.bucket = (char *)"models";
    r.prefix = (char *)"";
    r.endpoint = (char *)endpoint;
    r.region = (char *)"us-east-1";
    r.access_key = (char *)"AK";
    r.secret_key = (char *)"SK";
    r.path_style = path_style;
    r.tls_verify = 1;
    return r;
}

static void url_is(const hfs3_remote *r, const char *key, const char *want)
{
    hfs3_s3 *c = NULL;
    CHECK_EQ_INT(hfs3_s3_new(r, NULL, &c), 0);
    if (!c)
        return;
    char *u = hfs3_s3_url(c, key);
    CHECK_EQ_STR(u, want);
    free(u);
    hfs3_s3_free(c);
}

static void addressing(void)
{
    hfs3_remote p = remote("http://127.0.0.1:9000", 1);
    url_is(&p, "qwen/config.json", "http://127.0.0.1:9000/models/qwen/config.json");
    /* every byte but unreserved and '/' is encoded, UTF-8 byte by byte, uppercase hex */
    url_is(&p, "a b+c/\xc3\xa9~$@=&.bin", "http://127.0.0.1:9000/models/a%20b%2Bc/%C3%A9~%24%40%3D%26.bin");
    url_is(&p, "dir/", "http://127.0.0.1:9000/models/dir/");
    url_is(&p, NULL, "http://127.0.0.1:9000/models");

    hfs3_remote v = remote("https://s3.us-east-1.amazonaws.com", 0);
    url_is(&v, "qwen/model-00001-of-00002.safetensors",
           "https://models.s3.us-east-1.amazonaws.com/qwen/model-00001-of-00002.safetensors");
    url_is(&v, NULL, "https://models.s3.us-east-1.amazonaws.com/");

    hfs3_remote sub = remote("https://gw.example.com:8443/s3", 1);
    url_is(&sub, "k", "https://gw.example.com:8443/s3/models/k");
}

static void bad_remotes(void)
{
    hfs3_s3 *c = (hfs3_s3 *)1;
    hfs3_remote r = remote("ftp://host", 1);
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    CHECK(c == NULL);
    r = remote("http://", 1);
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    r = remote("http://h", 1);
    r.secret_key = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    CHECK(strstr(hfs3_errmsg(), "SK") == NULL);
    r = remote("http://h", 1);
    r.bucket = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), -EINVAL);
    /* anonymous is fine */
    r = remote("http://h", 1);
    r.access_key = r.secret_key = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), 0);
    hfs3_s3_free(c);
    hfs3_s3_free(NULL);
}

static int never(void *ud, const void *d, size_t n)
{
    (void)ud, (void)d, (void)n;
    return -EIO;
}

static void empty_range(void)
{
    /* a zero-length range asks nothing of the server (no request, no sink call) */
    hfs3_remote r = remote("http://127.0.0.1:1", 1);
    hfs3_s3 *c = NULL;
    CHECK_EQ_INT(hfs3_s3_new(&r, NULL, &c), 0);
    hfs3_s3_get g;
    memset(&g, 0, sizeof g);
    g.ranged = 1;
    g.offset = 10;
    CHECK_EQ_INT(hfs3_s3_get_object(c, "k", &g, never, NULL), 0);
    CHECK(g.etag == NULL);
    hfs3_s3_free(c);
}

int main(void)
{
    TEST(addressing);
    TEST(bad_remotes);
    TEST(empty_range);
    return t_done("test_s3");
}
