/* test_explain.c - boolean settings, S3 failures worded for the user (lib/explain.c), and the mount key's
 * canonical REMOTE (include/hfs3/index.h). */
#include "harness.h"
#include "hfs3/config.h"
#include "hfs3/explain.h"
#include "hfs3/index.h"
#include "hfs3/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void env_bool(void)
{
    static const struct { const char *v; int dflt, want; } t[] = {
        {NULL, 0, 0}, {NULL, 1, 1}, {"", 1, 1},     {"1", 0, 1},    {"0", 1, 0},     {"true", 0, 1},
        {"TRUE", 0, 1}, {"False", 1, 0}, {"yes", 0, 1}, {"No", 1, 0}, {"on", 0, 1},  {"OFF", 1, 0},
        {"maybe", 0, 0}, {"maybe", 1, 1}, {"2", 0, 0}, {"1 ", 0, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].v)
            setenv("HFS3_TEST_BOOL", t[i].v, 1);
        else
            unsetenv("HFS3_TEST_BOOL");
        CHECK_EQ_INT(hfs3_env_bool("HFS3_TEST_BOOL", t[i].dflt), t[i].want);
    }
    unsetenv("HFS3_TEST_BOOL");
}

static hfs3_remote *remote(const char *spec, const char *source)
{
    hfs3_remote *r = calloc(1, sizeof *r);
    r->spec = strdup(spec);
    r->bucket = strdup("models");
    r->prefix = strdup("qwen");
    r->endpoint = strdup("http://127.0.0.1:9000");
    r->region = strdup("us-east-1");
    r->cred_source = source ? strdup(source) : NULL;
    return r;
}

static void explain(void)
{
    hfs3_remote *r = remote("minio:models/qwen/", "rclone remote 'minio' in /x/rclone.conf");
    const char *mk = "qwen/.hfs3/manifest.json";
    hfs3_err(-ENOENT, "s3: GET %s: 404 NoSuchBucket: The specified bucket does not exist", mk);
    CHECK_EQ_INT(hfs3_explain_s3(r, mk, -ENOENT), -ENOENT);
    CHECK_EQ_STR(hfs3_errmsg(), "minio:models/qwen/: bucket models does not exist at http://127.0.0.1:9000: check "
                 "the bucket name in minio:models/qwen/, or create the bucket");
    hfs3_err(-ENOENT, "s3: GET %s: 404 NoSuchKey: The specified key does not exist.", mk);
    hfs3_explain_s3(r, mk, -ENOENT);
    CHECK_EQ_STR(hfs3_errmsg(), "no manifest at s3://models/qwen/.hfs3/manifest.json: run hfs3-manifest build "
                 "minio:models/qwen/");
    hfs3_err(-EACCES, "s3: GET %s: 403 SignatureDoesNotMatch: The request signature we calculated does not match", mk);
    hfs3_explain_s3(r, mk, -EACCES);
    CHECK_EQ_STR(hfs3_errmsg(), "minio:models/qwen/: s3: GET qwen/.hfs3/manifest.json: 403 SignatureDoesNotMatch: "
                 "the server refused the credentials from rclone remote 'minio' in /x/rclone.conf: check the "
                 "secret key (and the access key and session token) there");
    hfs3_err(-ECONNREFUSED, "s3: GET %s: Couldn't connect to server", mk);
    hfs3_explain_s3(r, mk, -ECONNREFUSED);
    CHECK_EQ_STR(hfs3_errmsg(), "minio:models/qwen/: s3: GET qwen/.hfs3/manifest.json: Couldn't connect to server: "
                 "is the server at http://127.0.0.1:9000 up and reachable from here? if so, check the endpoint "
                 "of minio:models/qwen/");
    /* an ETag that changed since the build (fetch.c's If-Match): what to run */
    hfs3_err(-ESTALE, "minio:models/qwen/: a.bin: object changed since the manifest was built (If-Match \"x\" failed)");
    hfs3_explain_s3(r, "qwen/a.bin", -ESTALE);
    CHECK_EQ_STR(hfs3_errmsg(), "minio:models/qwen/: a.bin: object changed since the manifest was built (If-Match \"x\" "
                 "failed); run hfs3-manifest build minio:models/qwen/ (hfs3-manifest verify minio:models/qwen/ lists "
                 "every difference)");
    /* a message naming the remote already is left alone */
    hfs3_err(-EIO, "minio:models/qwen/: something");
    hfs3_explain_s3(r, NULL, -EIO);
    CHECK_EQ_STR(hfs3_errmsg(), "minio:models/qwen/: something");
    hfs3_remote_free(r);
    r = remote("s3://models/qwen", NULL);
    hfs3_err(-EACCES, "s3: LIST qwen/: 403 AccessDenied: Access Denied");
    hfs3_explain_s3(r, NULL, -EACCES);
    CHECK(strstr(hfs3_errmsg(), "no credentials were found for s3://models/qwen, so the request was anonymous") != NULL);
    hfs3_remote_free(r);
}

static void mountkey(void)
{
    static const char *const same[][2] = {
        {"minio:models/qwen", "minio:models/qwen/"},   {"minio:models/qwen", "minio:models//qwen//"},
        {"s3://models/qwen", "s3://models/qwen///"},   {"minio:models", "minio:models/"},
        {"minio:models/a//b", "minio:models/a//b/"}, {"minio:models/qwen", "minio:/models/qwen"},
        {"minio:models", "minio:/models//"},
    };
    static const char *const differ[][2] = {
        {"minio:models/qwen", "s3://models/qwen"}, {"minio:models/a/b", "minio:models/a//b"},
        {"minio:models/qwen", "other:models/qwen"}, {"minio:models/qwen", "minio:models/qwen2"},
        {"minio:/models/qwen", "minio:/models/qwen2"}, {"minio:/models", "minio:"}, {"minio:/", "minio:"},
        {"s3://models", "s3:///models"},
    };
    char a[17], b[17];
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        hfs3_mountkey(same[i][0], a);
        hfs3_mountkey(same[i][1], b);
        CHECK_EQ_STR(a, b);
    }
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        hfs3_mountkey(differ[i][0], a);
        hfs3_mountkey(differ[i][1], b);
        CHECK(strcmp(a, b) != 0);
    }
    /* the canonical spelling keeps the key it always had (FNV-1a 64 of the string): caches stay valid */
    hfs3_mountkey("minio:models/qwen", a);
    CHECK_EQ_STR(a, "d73df4b7733bd4bf");
    hfs3_mountkey("", a);
    CHECK_EQ_STR(a, "14650fb0739d0383"); /* the seed index.h has always used */
}

int main(void)
{
    TEST(env_bool);
    TEST(explain);
    TEST(mountkey);
    return t_done("test_explain");
}
