/* test_config.c - REMOTE parsing: s3:// with the AWS conventions, rclone remotes from file and environment,
 * endpoint, addressing and TLS rules, errors, and that no secret reaches a message or the log. */
#include "harness.h"
#include "hfs3/config.h"
#include "hfs3/creds.h"
#include "hfs3/log.h"
#include "hfs3/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* Every secret in these tests starts with this, so one strstr finds any leak. */
#define SECRET "SeCrEt"

static char tmp[256];
static char path_buf[512];

static const char *P(const char *rel)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", tmp, rel);
    return path_buf;
}

static void write_file(const char *rel, const char *text)
{
    char full[512];
    snprintf(full, sizeof full, "%s/%s", tmp, rel);
    for (char *s = full + strlen(tmp) + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        mkdir(full, 0700);
        *s = '/';
    }
    FILE *f = fopen(full, "w");
    if (!f) {
        perror(full);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

/* A clean slate: no variable any rule reads, HOME in the temp dir, no config files there. */
static void clean_env(void)
{
    static const char *const vars[] = {
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
        "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE", "AWS_CA_BUNDLE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
        "AWS_WEB_IDENTITY_TOKEN_FILE", "RCLONE_CONFIG", "RCLONE_CA_CERT", "XDG_CONFIG_HOME",
        "HFS3_S3_ADDRESSING", "HFS3_TLS_VERIFY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    /* unsetenv changes environ: start over after each removal */
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e; e++) {
            if (hfs3_starts_with(*e, "RCLONE_CONFIG_") || hfs3_starts_with(*e, "RCLONE_S3_")) {
                char name[256];
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)n, *e);
                unsetenv(name);
                again = 1;
                break;
            }
        }
    }
    char home[512];
    snprintf(home, sizeof home, "%s/home", tmp);
    setenv("HOME", home, 1);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", home, home);
    if (system(cmd) != 0)
        exit(2);
}

/* Parses spec expecting success; returns the remote (NULL after a recorded failure). */
static hfs3_remote *ok(const char *spec)
{
    hfs3_remote *r = NULL;
    int rc = hfs3_remote_parse(spec, &r);
    if (rc != 0)
        fprintf(stderr, "  parse %s: %d %s\n", spec, rc, hfs3_errmsg());
    CHECK_EQ_INT(rc, 0);
    return r;
}

/* Parses spec expecting -EINVAL with a message containing want and no secret. */
static void bad(const char *spec, const char *want)
{
    hfs3_remote *r = (hfs3_remote *)1;
    int rc = hfs3_remote_parse(spec, &r);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK(r == NULL);
    if (!strstr(hfs3_errmsg(), want))
        fprintf(stderr, "  message for %s: '%s' lacks '%s'\n", spec, hfs3_errmsg(), want);
    CHECK(strstr(hfs3_errmsg(), want) != NULL);
    CHECK(strstr(hfs3_errmsg(), SECRET) == NULL);
}

static void spec_errors(void)
{
    clean_env();
    bad("nocolon", "REMOTE 'nocolon': expected name:bucket/prefix or s3://bucket/prefix");
    bad("http://host/bucket", "expected name:bucket/prefix or s3://bucket/prefix");
    bad("gs://bucket/x", "expected name:bucket/prefix");
    bad(":bucket/x", "expected name:bucket/prefix");
    bad("/local/dir:x", "expected name:bucket/prefix");
    bad("s3://", "no bucket");
    bad("s3:///x", "no bucket");
    setenv("RCLONE_CONFIG_R_TYPE", "s3", 1);
    bad("r:", "no bucket");
    bad("r:/", "no bucket");
    bad("r://x", "expected name:bucket/prefix");
    /* issue 7 §2: dot segments would be signed for one path and sent (or resolved) as another */
    bad("r:models/zz/../m1", "remote r:models/zz/../m1: the path has a '..' segment");
    bad("r:models/./m1", "the path has a '.' segment");
    bad("r:models/m1/..", "'..' segment");
    bad("r:../models", "'..' segment");
    bad("s3://models/a/./b", "'.' segment");
    /* rclone connection strings carry secrets: refused, nothing after the comma repeated */
    bad("r,secret_access_key=" SECRET ":models/p", "REMOTE 'r,...': rclone connection-string remotes are not supported");
    bad("r,secret_access_key=" SECRET, "REMOTE 'r,...': rclone connection-string");
    bad("r,provider=Minio,access_key_id=AK,secret_access_key='" SECRET ":x':models", "REMOTE 'r,...'");
    hfs3_remote *r = ok("r:models/a..b/.c/..d");
    if (r)
        CHECK_EQ_STR(r->prefix, "a..b/.c/..d");
    hfs3_remote_free(r);
    /* rclone's S3 backend trims the root's slashes: r:/x is bucket x */
    r = ok("r:/x//p/");
    if (r) {
        CHECK_EQ_STR(r->bucket, "x");
        CHECK_EQ_STR(r->prefix, "p");
    }
    hfs3_remote_free(r);
}

/* The identity of a spec parsed with the environment as it is; NULL after a recorded failure. */
static char *ident(const char *spec)
{
    hfs3_remote *r = ok(spec);
    char *id = r ? hfs3_remote_identity(r) : NULL;
    CHECK(!r || id);
    hfs3_remote_free(r);
    return id;
}

static void check_ident(const char *spec, const char *want)
{
    char *id = ident(spec);
    if (id && strcmp(id, want))
        fprintf(stderr, "  identity of %s: %s, expected %s\n", spec, id, want);
    CHECK(id && !strcmp(id, want));
    free(id);
}

/* issue 11 §1: what a REMOTE resolves to, so that spellings of one endpoint + bucket + prefix share a cache
 * entry: slashes, rclone remote or s3://, the remote's name, an endpoint's case, default port and trailing
 * slash, the addressing style, the region and the keys do not count; the endpoint, bucket and prefix do. */
static void identity(void)
{
    clean_env();
    setenv("RCLONE_CONFIG_MINIO_TYPE", "s3", 1);
    setenv("RCLONE_CONFIG_MINIO_ENDPOINT", "http://127.0.0.1:9000", 1);
    setenv("RCLONE_CONFIG_MINIO_ACCESS_KEY_ID", "AK1", 1);
    setenv("RCLONE_CONFIG_MINIO_SECRET_ACCESS_KEY", SECRET "1", 1);
    const char *want = "http://127.0.0.1:9000/models/qwen";
    check_ident("minio:models/qwen", want);
    check_ident("minio:models/qwen/", want);
    check_ident("minio:/models//qwen//", want);
    /* another name, other keys, another region, virtual-hosted, the endpoint spelled otherwise */
    setenv("RCLONE_CONFIG_OTHER_TYPE", "s3", 1);
    setenv("RCLONE_CONFIG_OTHER_ENDPOINT", "HTTP://127.0.0.1:9000/", 1);
    setenv("RCLONE_CONFIG_OTHER_REGION", "eu-west-1", 1);
    setenv("RCLONE_CONFIG_OTHER_FORCE_PATH_STYLE", "false", 1);
    check_ident("other:models/qwen", want);
    /* s3:// through the AWS variables */
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
    setenv("AWS_ACCESS_KEY_ID", "AK2", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET "2", 1);
    check_ident("s3://models/qwen", want);
    check_ident("s3://models/qwen///", want);
    setenv("HFS3_S3_ADDRESSING", "virtual", 1);
    check_ident("s3://models/qwen", want);
    unsetenv("HFS3_S3_ADDRESSING");
    /* host names in any case, default ports dropped (also written with leading zeros), others kept */
    setenv("AWS_ENDPOINT_URL", "http://MinIO.Example:80/", 1);
    check_ident("s3://models/qwen", "http://minio.example/models/qwen");
    setenv("AWS_ENDPOINT_URL", "https://minio.example:0443", 1);
    check_ident("s3://models/qwen", "https://minio.example/models/qwen");
    setenv("AWS_ENDPOINT_URL", "https://minio.example:80", 1);
    check_ident("s3://models/qwen", "https://minio.example:80/models/qwen");
    setenv("AWS_ENDPOINT_URL", "http://minio.example:443", 1);
    check_ident("s3://models/qwen", "http://minio.example:443/models/qwen");
    setenv("AWS_ENDPOINT_URL", "http://[FD00::1]:80", 1);
    check_ident("s3://models/qwen", "http://[fd00::1]/models/qwen");
    /* a bucket alone; case in the bucket and prefix counts (S3 keys are case-sensitive) */
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
    check_ident("s3://models", "http://127.0.0.1:9000/models");
    check_ident("minio:models/", "http://127.0.0.1:9000/models");
    check_ident("s3://models/Qwen", "http://127.0.0.1:9000/models/Qwen");
    check_ident("s3://models/a//b", "http://127.0.0.1:9000/models/a//b");
    /* AWS itself: the region is part of the endpoint */
    unsetenv("AWS_ENDPOINT_URL");
    setenv("AWS_REGION", "eu-west-1", 1);
    check_ident("s3://models/qwen", "https://s3.eu-west-1.amazonaws.com/models/qwen");
    setenv("AWS_REGION", "us-east-1", 1);
    check_ident("s3://models/qwen", "https://s3.us-east-1.amazonaws.com/models/qwen");
    /* what differs: the endpoint's scheme, host or port, the bucket, the prefix */
    static const char *const differ[][2] = {
        {"minio:models/qwen", "minio:models/qwen2"}, {"minio:models/qwen", "minio:models2/qwen"},
        {"minio:models/qwen", "minio:models/qwen/sub"}, {"minio:models/qwen", "minio:models"},
        {"minio:models/qwen", "s3://models/qwen"}, /* s3:// is AWS's endpoint here */
        {"minio:models/qwen", "port:models/qwen"}, {"minio:models/qwen", "tls:models/qwen"},
    };
    setenv("RCLONE_CONFIG_PORT_TYPE", "s3", 1);
    setenv("RCLONE_CONFIG_PORT_ENDPOINT", "http://127.0.0.1:9001", 1);
    setenv("RCLONE_CONFIG_TLS_TYPE", "s3", 1);
    setenv("RCLONE_CONFIG_TLS_ENDPOINT", "127.0.0.1:9000", 1); /* no scheme: https, as rclone does */
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        char *a = ident(differ[i][0]), *b = ident(differ[i][1]);
        if (a && b && !strcmp(a, b))
            fprintf(stderr, "  %s and %s both resolve to %s\n", differ[i][0], differ[i][1], a);
        CHECK(a && b && strcmp(a, b) != 0);
        free(a);
        free(b);
    }
    /* the identity is a cache file's content: no key in it */
    char *id = ident("minio:models/qwen");
    CHECK(id && !strstr(id, SECRET) && !strstr(id, "AK1"));
    free(id);
}

static void write_bytes(const char *rel, const char *data, size_t n)
{
    write_file(rel, "");
    FILE *f = fopen(P(rel), "w");
    if (!f || fwrite(data, 1, n, f) != n)
        exit(2);
    fclose(f);
}

/* issue 7 §2: a NUL byte in a config file is refused, not taken as the end of the file */
static void nul_in_files(void)
{
    clean_env();
    static const char rc_text[] = "[n]\ntype = s3\nendpoint = http://a:1\n\0\nendpoint = http://b:2\n";
    write_bytes("nul/rclone.conf", rc_text, sizeof rc_text - 1);
    setenv("RCLONE_CONFIG", P("nul/rclone.conf"), 1);
    bad("n:models", "rclone.conf: a NUL byte at byte 36: the file is damaged or not text");
    unsetenv("RCLONE_CONFIG");
    static const char cred[] = "[default]\naws_access_key_id = AK\n\0aws_secret_access_key = x\n";
    write_bytes("nul/credentials", cred, sizeof cred - 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", P("nul/credentials"), 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
    bad("s3://models/x", "credentials: a NUL byte at byte 33");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    static const char conf[] = "[default]\n\0region = eu-1\n";
    write_bytes("nul/config", conf, sizeof conf - 1);
    setenv("AWS_CONFIG_FILE", P("nul/config"), 1);
    bad("s3://models/x", "config: a NUL byte at byte 10");
    unsetenv("AWS_CONFIG_FILE");
    unsetenv("AWS_ENDPOINT_URL");
}

static void s3_env(void)
{
    clean_env();
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET "env", 1);
    setenv("AWS_SESSION_TOKEN", SECRET "tok", 1);
    hfs3_remote *r = ok("s3://models//org/qwen/");
    if (r) {
        CHECK_EQ_STR(r->spec, "s3://models//org/qwen/");
        CHECK_EQ_STR(r->bucket, "models");
        CHECK_EQ_STR(r->prefix, "org/qwen");
        CHECK_EQ_STR(r->access_key, "AKIDENV");
        CHECK_EQ_STR(r->secret_key, SECRET "env");
        CHECK_EQ_STR(r->session_token, SECRET "tok");
        CHECK_EQ_STR(r->region, "us-east-1");
        CHECK_EQ_STR(r->endpoint, "https://s3.us-east-1.amazonaws.com");
        CHECK_EQ_INT(r->path_style, 0);
        CHECK_EQ_INT(r->tls_verify, 1);
        CHECK(r->ca_bundle == NULL);
        char *k = hfs3_remote_key(r, "a/b.json");
        CHECK_EQ_STR(k, "org/qwen/a/b.json");
        free(k);
        k = hfs3_remote_manifest_key(r);
        CHECK_EQ_STR(k, "org/qwen/.hfs3/manifest.json");
        free(k);
    }
    hfs3_remote_free(r);

    /* a prefix keeps its inner "//": only the ends are trimmed */
    r = ok("s3://b/a//c");
    if (r)
        CHECK_EQ_STR(r->prefix, "a//c");
    hfs3_remote_free(r);

    /* empty prefix */
    setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
    r = ok("s3://bucket");
    if (r) {
        CHECK_EQ_STR(r->prefix, "");
        CHECK_EQ_STR(r->region, "eu-west-3");
        CHECK_EQ_STR(r->endpoint, "https://s3.eu-west-3.amazonaws.com");
        char *k = hfs3_remote_key(r, "a/b.json");
        CHECK_EQ_STR(k, "a/b.json");
        free(k);
        k = hfs3_remote_manifest_key(r);
        CHECK_EQ_STR(k, ".hfs3/manifest.json");
        free(k);
    }
    hfs3_remote_free(r);
    /* AWS_REGION beats AWS_DEFAULT_REGION; China's endpoints */
    setenv("AWS_REGION", "cn-north-1", 1);
    r = ok("s3://bucket/");
    if (r) {
        CHECK_EQ_STR(r->region, "cn-north-1");
        CHECK_EQ_STR(r->endpoint, "https://s3.cn-north-1.amazonaws.com.cn");
        CHECK_EQ_INT(r->path_style, 0);
        CHECK_EQ_STR(r->prefix, "");
    }
    hfs3_remote_free(r);
    setenv("AWS_REGION", "us/../x", 1);
    bad("s3://bucket/p", "region 'us/../x'");
    unsetenv("AWS_REGION");

    /* endpoint precedence: _S3 beats the generic one; custom endpoints are path-style */
    setenv("AWS_ENDPOINT_URL", "http://generic:9000", 1);
    r = ok("s3://bucket/p");
    if (r) {
        CHECK_EQ_STR(r->endpoint, "http://generic:9000");
        CHECK_EQ_INT(r->path_style, 1);
    }
    hfs3_remote_free(r);
    setenv("AWS_ENDPOINT_URL_S3", "HTTP://127.0.0.1:9000//", 1);
    r = ok("s3://bucket/p");
    if (r)
        CHECK_EQ_STR(r->endpoint, "http://127.0.0.1:9000");
    hfs3_remote_free(r);
    setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
    r = ok("s3://bucket/p");
    if (r)
        CHECK_EQ_STR(r->endpoint, "https://s3.eu-west-3.amazonaws.com");
    hfs3_remote_free(r);
    unsetenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");

    /* endpoint checks */
    setenv("AWS_ENDPOINT_URL_S3", "ftp://host", 1);
    bad("s3://bucket/p", "only http:// and https://");
    setenv("AWS_ENDPOINT_URL_S3", "host:9000", 1);
    bad("s3://bucket/p", "only http:// and https://");
    setenv("AWS_ENDPOINT_URL_S3", "http://host:9000/sub/path", 1);
    bad("s3://bucket/p", "a path");
    setenv("AWS_ENDPOINT_URL_S3", "http://user:" SECRET "@host:9000", 1);
    bad("s3://bucket/p", "user info");
    setenv("AWS_ENDPOINT_URL_S3", "https://", 1);
    bad("s3://bucket/p", "no host");

    /* half a key pair */
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_ACCESS_KEY_ID");
    bad("s3://bucket/p", "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not");
    setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
    unsetenv("AWS_SECRET_ACCESS_KEY");
    bad("s3://bucket/p", "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");

    /* nothing anywhere: anonymous */
    clean_env();
    setenv("AWS_CA_BUNDLE", "/etc/ssl/ca.pem", 1);
    r = ok("s3://bucket/p");
    if (r) {
        CHECK(r->access_key == NULL && r->secret_key == NULL && r->session_token == NULL);
        CHECK_EQ_STR(r->ca_bundle, "/etc/ssl/ca.pem");
    }
    hfs3_remote_free(r);
}

static void s3_profiles(void)
{
    clean_env();
    write_file("home/.aws/credentials", "[default]\n"
                                        "aws_access_key_id = AKIDDEF\n"
                                        "aws_secret_access_key = " SECRET "def\n"
                                        "\n"
                                        "# a comment\n"
                                        "[dev]\n"
                                        "aws_access_key_id=AKIDDEV\r\n"
                                        "aws_secret_access_key=" SECRET "dev\r\n"
                                        "aws_session_token = " SECRET "devtok\n"
                                        "[half]\n"
                                        "aws_access_key_id = AKIDHALF\n");
    write_file("home/.aws/config", "[default]\n"
                                   "region = ap-south-1\n"
                                   "[profile   dev]\n"
                                   "region = eu-central-1\n"
                                   "endpoint_url = https://minio.example.com/\n"
                                   "ca_bundle = ~/ca.pem\n"
                                   "s3 =\n"
                                   "  addressing_style = virtual\n"
                                   "  endpoint_url = https://s3dev.example.com\n"
                                   "[profile plain]\n"
                                   "endpoint_url = https://plain.example.com:8443\n"
                                   "s3 =\n"
                                   "    addressing_style = path\n"
                                   "[profile cfgkeys]\n"
                                   "aws_access_key_id = AKIDCFG\n"
                                   "aws_secret_access_key = " SECRET "cfg\n"
                                   "services = mysvc\n"
                                   "[services mysvc]\n"
                                   "s3 =\n"
                                   "  endpoint_url = http://svc.local:9000\n"
                                   "[profile role]\n"
                                   "role_arn = arn:aws:iam::1:role/x\n"
                                   "source_profile = default\n"
                                   "[profile badstyle]\n"
                                   "s3 =\n"
                                   "  addressing_style = sideways\n");
    /* default profile */
    hfs3_remote *r = ok("s3://bucket/p");
    if (r) {
        CHECK_EQ_STR(r->access_key, "AKIDDEF");
        CHECK_EQ_STR(r->secret_key, SECRET "def");
        CHECK(r->session_token == NULL);
        CHECK_EQ_STR(r->region, "ap-south-1");
        CHECK_EQ_STR(r->endpoint, "https://s3.ap-south-1.amazonaws.com");
        CHECK_EQ_INT(r->path_style, 0);
    }
    hfs3_remote_free(r);

    /* a named profile: nested s3 endpoint beats the profile's, addressing_style virtual, ~ in ca_bundle */
    setenv("AWS_PROFILE", "dev", 1);
    r = ok("s3://bucket/p");
    if (r) {
        CHECK_EQ_STR(r->access_key, "AKIDDEV");
        CHECK_EQ_STR(r->secret_key, SECRET "dev");
        CHECK_EQ_STR(r->session_token, SECRET "devtok");
        CHECK_EQ_STR(r->region, "eu-central-1");
        CHECK_EQ_STR(r->endpoint, "https://s3dev.example.com");
        CHECK_EQ_INT(r->path_style, 0);
        CHECK_EQ_STR(r->ca_bundle, P("home/ca.pem"));
    }
    hfs3_remote_free(r);
    /* env beats the profile for keys, region, endpoint and CA */
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET "env", 1);
    setenv("AWS_REGION", "us-west-2", 1);
    setenv("AWS_ENDPOINT_URL", "http://envhost:1234", 1);
    setenv("AWS_CA_BUNDLE", "/env/ca.pem", 1);
    r = ok("s3://bucket/p");
    if (r) {
        CHECK_EQ_STR(r->access_key, "AKIDENV");
        CHECK(r->session_token == NULL);
        CHECK_EQ_STR(r->region, "us-west-2");
        CHECK_EQ_STR(r->endpoint, "http://envhost:1234");
        CHECK_EQ_STR(r->ca_bundle, "/env/ca.pem");
        CHECK_EQ_INT(r->path_style, 0); /* addressing_style = virtual overrides auto */
    }
    hfs3_remote_free(r);
    /* HFS3_S3_ADDRESSING overrides the config file */
    setenv("HFS3_S3_ADDRESSING", "path", 1);
    r = ok("s3://bucket/p");
    if (r)
        CHECK_EQ_INT(r->path_style, 1);
    hfs3_remote_free(r);
    unsetenv("HFS3_S3_ADDRESSING");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_REGION");
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_CA_BUNDLE");

    /* the profile's own endpoint_url; addressing_style = path on an AWS-looking name is still path */
    setenv("AWS_PROFILE", "plain", 1);
    r = ok("s3://bucket/p");
    if (r) {
        CHECK(r->access_key == NULL);
        CHECK_EQ_STR(r->endpoint, "https://plain.example.com:8443");
        CHECK_EQ_STR(r->region, "us-east-1");
        CHECK_EQ_INT(r->path_style, 1);
    }
    hfs3_remote_free(r);

    /* keys in the config file, endpoint from a services section */
    setenv("AWS_PROFILE", "cfgkeys", 1);
    r = ok("s3://bucket/p");
    if (r) {
        CHECK_EQ_STR(r->access_key, "AKIDCFG");
        CHECK_EQ_STR(r->secret_key, SECRET "cfg");
        CHECK_EQ_STR(r->endpoint, "http://svc.local:9000");
        CHECK_EQ_INT(r->path_style, 1);
    }
    hfs3_remote_free(r);

    setenv("AWS_PROFILE", "half", 1);
    bad("s3://bucket/p", "AWS profile 'half' in");
    CHECK(strstr(hfs3_errmsg(), "has aws_access_key_id but no aws_secret_access_key") != NULL);
    setenv("AWS_PROFILE", "role", 1);
    r = ok("s3://bucket/p"); /* AssumeRole, asked on first use (test_creds.c) */
    CHECK(r && r->creds && !r->access_key && strcmp(hfs3_creds_source(r->creds), "assume role") == 0);
    hfs3_remote_free(r);
    setenv("AWS_PROFILE", "badstyle", 1);
    bad("s3://bucket/p", "addressing_style 'sideways'");
    setenv("AWS_PROFILE", "nosuch", 1);
    bad("s3://bucket/p", "AWS profile 'nosuch' not found in");

    /* other file names */
    write_file("alt/creds", "[x]\naws_access_key_id = AKIDALT\naws_secret_access_key = " SECRET "alt\n");
    write_file("alt/conf", "[profile x]\nregion = sa-east-1\n");
    setenv("AWS_SHARED_CREDENTIALS_FILE", P("alt/creds"), 1);
    setenv("AWS_CONFIG_FILE", P("alt/conf"), 1);
    setenv("AWS_PROFILE", "x", 1);
    r = ok("s3://bucket/p");
    if (r) {
        CHECK_EQ_STR(r->access_key, "AKIDALT");
        CHECK_EQ_STR(r->region, "sa-east-1");
    }
    hfs3_remote_free(r);
}

static const char *RCLONE_CONF = "# rclone config\n"
                                 "[minio]\n"
                                 "type = s3\n"
                                 "provider = Minio\n"
                                 "access_key_id = AKIDMINIO\n"
                                 "secret_access_key = " SECRET "minio\n"
                                 "endpoint = http://minio.ns.svc:9000/\n"
                                 "region = eu-1\n"
                                 "\n"
                                 "[aws]\n"
                                 "type = s3\n"
                                 "provider = AWS\n"
                                 "env_auth = true\n"
                                 "region = eu-west-1\n"
                                 "\n"
                                 "[noscheme]\n"
                                 "type = \"s3\"\n"
                                 "endpoint = minio:9000\n"
                                 "force_path_style = false\n"
                                 "\n"
                                 "[my-remote]\n"
                                 "type = s3\n"
                                 "endpoint = http://h:1\n"
                                 "\n"
                                 "[drive]\n"
                                 "type = drive\n"
                                 "\n"
                                 "[halfkey]\n"
                                 "type = s3\n"
                                 "secret_access_key = " SECRET "half\n"
                                 "\n"
                                 "[badbool]\n"
                                 "type = s3\n"
                                 "force_path_style = maybe\n"
                                 "\n"
                                 "[ftp]\n"
                                 "type = s3\n"
                                 "secret_access_key = " SECRET "ftp\n"
                                 "access_key_id = AKIDFTP\n"
                                 "endpoint = ftp://x\n";

static void rclone_file(void)
{
    clean_env();
    write_file("rclone.conf", RCLONE_CONF);
    setenv("RCLONE_CONFIG", P("rclone.conf"), 1);
    /* AWS variables are not read for a remote without env_auth */
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET "env", 1);
    hfs3_remote *r = ok("minio:models/hub/models--Qwen--Qwen3/");
    if (r) {
        CHECK_EQ_STR(r->bucket, "models");
        CHECK_EQ_STR(r->prefix, "hub/models--Qwen--Qwen3");
        CHECK_EQ_STR(r->access_key, "AKIDMINIO");
        CHECK_EQ_STR(r->secret_key, SECRET "minio");
        CHECK(r->session_token == NULL);
        CHECK_EQ_STR(r->endpoint, "http://minio.ns.svc:9000");
        CHECK_EQ_STR(r->region, "eu-1");
        CHECK_EQ_INT(r->path_style, 1);
        CHECK(r->ca_bundle == NULL);
    }
    hfs3_remote_free(r);

    /* RCLONE_CONFIG_<NAME>_<KEY> beats the file */
    setenv("RCLONE_CONFIG_MINIO_ENDPOINT", "https://other:9443", 1);
    setenv("RCLONE_CONFIG_MINIO_ACCESS_KEY_ID", "AKIDOVR", 1);
    setenv("RCLONE_CONFIG_MINIO_SESSION_TOKEN", SECRET "ovrtok", 1);
    setenv("RCLONE_CONFIG_MINIO_FORCE_PATH_STYLE", "false", 1);
    setenv("RCLONE_CONFIG_MINIO_CA_CERT", "/ca/minio.pem", 1);
    r = ok("minio:models");
    if (r) {
        CHECK_EQ_STR(r->prefix, "");
        CHECK_EQ_STR(r->endpoint, "https://other:9443");
        CHECK_EQ_STR(r->access_key, "AKIDOVR");
        CHECK_EQ_STR(r->secret_key, SECRET "minio");
        CHECK_EQ_STR(r->session_token, SECRET "ovrtok");
        CHECK_EQ_INT(r->path_style, 0); /* force_path_style = false */
        CHECK_EQ_STR(r->ca_bundle, "/ca/minio.pem");
    }
    hfs3_remote_free(r);
    /* HFS3_S3_ADDRESSING=path beats force_path_style; auto leaves it to force_path_style */
    setenv("HFS3_S3_ADDRESSING", "path", 1);
    r = ok("minio:models");
    if (r)
        CHECK_EQ_INT(r->path_style, 1);
    hfs3_remote_free(r);
    setenv("HFS3_S3_ADDRESSING", "auto", 1);
    r = ok("minio:models");
    if (r)
        CHECK_EQ_INT(r->path_style, 0);
    hfs3_remote_free(r);
    unsetenv("HFS3_S3_ADDRESSING");
    /* a set-but-empty variable overrides too (rclone's LookupEnv): no endpoint, so AWS's */
    setenv("RCLONE_CONFIG_MINIO_ENDPOINT", "", 1);
    r = ok("minio:models");
    if (r)
        CHECK_EQ_STR(r->endpoint, "https://s3.eu-1.amazonaws.com");
    hfs3_remote_free(r);
    /* backend-wide RCLONE_S3_<KEY> sits between the remote's variables and the file */
    unsetenv("RCLONE_CONFIG_MINIO_ENDPOINT");
    setenv("RCLONE_S3_ENDPOINT", "http://backend:1", 1);
    r = ok("minio:models");
    if (r)
        CHECK_EQ_STR(r->endpoint, "http://backend:1");
    hfs3_remote_free(r);
    unsetenv("RCLONE_S3_ENDPOINT");

    /* env_auth: keys from the AWS chain; provider AWS without endpoint: AWS's, virtual-hosted */
    r = ok("aws:my-bucket/x");
    if (r) {
        CHECK_EQ_STR(r->access_key, "AKIDENV");
        CHECK_EQ_STR(r->secret_key, SECRET "env");
        CHECK_EQ_STR(r->region, "eu-west-1");
        CHECK_EQ_STR(r->endpoint, "https://s3.eu-west-1.amazonaws.com");
        CHECK_EQ_INT(r->path_style, 0);
    }
    hfs3_remote_free(r);
    /* ... and from a profile when the environment has no keys */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    write_file("home/.aws/credentials", "[default]\naws_access_key_id = AKIDPROF\naws_secret_access_key = " SECRET
                                        "prof\n[other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = " SECRET
                                        "other\n");
    r = ok("aws:my-bucket/x");
    if (r)
        CHECK_EQ_STR(r->access_key, "AKIDPROF");
    hfs3_remote_free(r);
    setenv("RCLONE_CONFIG_AWS_PROFILE", "other", 1);
    r = ok("aws:my-bucket/x");
    if (r)
        CHECK_EQ_STR(r->access_key, "AKIDOTHER");
    hfs3_remote_free(r);
    /* dots in a bucket name with https: path-style even where virtual was chosen */
    r = ok("aws:my.bucket/x");
    if (r)
        CHECK_EQ_INT(r->path_style, 1);
    hfs3_remote_free(r);

    /* endpoint without a scheme gets https://, as rclone's SDK does */
    r = ok("noscheme:bkt");
    if (r) {
        CHECK_EQ_STR(r->endpoint, "https://minio:9000");
        CHECK_EQ_INT(r->path_style, 0);
        CHECK(r->access_key == NULL); /* no keys, no env_auth: anonymous */
        CHECK_EQ_STR(r->region, "us-east-1");
    }
    hfs3_remote_free(r);

    /* a name with '-': RCLONE_CONFIG_MY_REMOTE_* (a shell can export it) and RCLONE_CONFIG_MY-REMOTE_*
     * (rclone 1.60.1's own spelling, which wins) */
    setenv("RCLONE_CONFIG_MY_REMOTE_ENDPOINT", "http://dash:2", 1);
    r = ok("my-remote:bkt/p");
    if (r)
        CHECK_EQ_STR(r->endpoint, "http://dash:2");
    hfs3_remote_free(r);
    setenv("RCLONE_CONFIG_MY-REMOTE_ENDPOINT", "http://dash:3", 1);
    r = ok("my-remote:bkt/p");
    if (r)
        CHECK_EQ_STR(r->endpoint, "http://dash:3");
    hfs3_remote_free(r);
    setenv("RCLONE_CONFIG_ENV-ONLY_TYPE", "s3", 1);
    r = ok("env-only:bkt/p");
    hfs3_remote_free(r);

    /* providers rclone always addresses virtual-hosted, whatever force_path_style says; names have case */
    setenv("RCLONE_CONFIG_PROV_TYPE", "s3", 1);
    setenv("RCLONE_CONFIG_PROV_ENDPOINT", "https://s3.wasabisys.com", 1);
    setenv("RCLONE_CONFIG_PROV_FORCE_PATH_STYLE", "true", 1);
    setenv("RCLONE_CONFIG_PROV_PROVIDER", "Wasabi", 1);
    r = ok("prov:bkt");
    if (r)
        CHECK_EQ_INT(r->path_style, 0);
    hfs3_remote_free(r);
    setenv("RCLONE_CONFIG_PROV_PROVIDER", "wasabi", 1);
    r = ok("prov:bkt");
    if (r)
        CHECK_EQ_INT(r->path_style, 1);
    hfs3_remote_free(r);
    setenv("RCLONE_CONFIG_PROV_PROVIDER", "Ceph", 1);
    unsetenv("RCLONE_CONFIG_PROV_FORCE_PATH_STYLE");
    r = ok("prov:bkt");
    if (r)
        CHECK_EQ_INT(r->path_style, 1); /* force_path_style defaults to true */
    hfs3_remote_free(r);

    bad("drive:bkt/p", "remote drive: type drive is not s3");
    bad("nosuch:bkt/p", "remote nosuch: not found in rclone config ");
    CHECK(strstr(hfs3_errmsg(), P("rclone.conf")) != NULL);
    CHECK(strstr(hfs3_errmsg(), "(nor RCLONE_CONFIG_NOSUCH_TYPE)") != NULL);
    bad("halfkey:bkt", "remote halfkey: secret_access_key is set but access_key_id is not");
    bad("badbool:bkt", "remote badbool: force_path_style = 'maybe' is not a boolean");
    bad("ftp:bkt", "only http:// and https://");
    setenv("RCLONE_CONFIG_MINIO_TYPE", "local", 1);
    bad("minio:bkt", "remote minio: type local is not s3");
}

static void rclone_env_only(void)
{
    clean_env();
    /* no config file at all: $HOME/.config/rclone/rclone.conf does not exist */
    bad("s3test:models", "not found in rclone config ");
    CHECK(strstr(hfs3_errmsg(), P("home/.config/rclone/rclone.conf")) != NULL);
    CHECK(strstr(hfs3_errmsg(), "rclone.conf, which does not exist (nor RCLONE_CONFIG_S3TEST_TYPE)") != NULL);
    /* s3:/b and s3:b are a misspelt s3:// */
    bad("s3:/models/x", "remote s3: not found in rclone config ");
    CHECK(hfs3_ends_with(hfs3_errmsg(), "(nor RCLONE_CONFIG_S3_TYPE); did you mean s3://models/x?"));
    bad("s3:models", "; did you mean s3://models?");
    /* RCLONE_CONFIG naming a file that is not there: said so */
    setenv("RCLONE_CONFIG", P("no-such-rclone.conf"), 1);
    bad("s3test:models", "remote s3test: the rclone config file ");
    CHECK(strstr(hfs3_errmsg(), "no-such-rclone.conf (RCLONE_CONFIG) does not exist, and RCLONE_CONFIG_S3TEST_TYPE is "
                 "not set: fix RCLONE_CONFIG or define the remote with RCLONE_CONFIG_S3TEST_* variables") != NULL);
    unsetenv("RCLONE_CONFIG");
    setenv("RCLONE_CONFIG_S3TEST_TYPE", "s3", 1);
    setenv("RCLONE_CONFIG_S3TEST_PROVIDER", "Other", 1);
    setenv("RCLONE_CONFIG_S3TEST_ACCESS_KEY_ID", "S3RVER", 1);
    setenv("RCLONE_CONFIG_S3TEST_SECRET_ACCESS_KEY", SECRET "s3rver", 1);
    setenv("RCLONE_CONFIG_S3TEST_ENDPOINT", "http://127.0.0.1:4568", 1);
    setenv("RCLONE_CONFIG_S3TEST_REGION", "us-east-1", 1);
    setenv("RCLONE_CONFIG_S3TEST_FORCE_PATH_STYLE", "true", 1);
    hfs3_remote *r = ok("s3test:models/m");
    if (r) {
        CHECK_EQ_STR(r->access_key, "S3RVER");
        CHECK_EQ_STR(r->secret_key, SECRET "s3rver");
        CHECK_EQ_STR(r->endpoint, "http://127.0.0.1:4568");
        CHECK_EQ_INT(r->path_style, 1);
        CHECK_EQ_STR(r->prefix, "m");
    }
    hfs3_remote_free(r);
    /* HFS3_S3_ADDRESSING=virtual wins over force_path_style */
    setenv("HFS3_S3_ADDRESSING", "virtual", 1);
    r = ok("s3test:models/m");
    if (r)
        CHECK_EQ_INT(r->path_style, 0);
    hfs3_remote_free(r);
    setenv("HFS3_S3_ADDRESSING", "sideways", 1);
    bad("s3test:models/m", "HFS3_S3_ADDRESSING='sideways': expected path, virtual or auto");
    unsetenv("HFS3_S3_ADDRESSING");

    /* the default file locations: XDG first, then ~/.config/rclone, then ~/.rclone.conf */
    write_file("home/.rclone.conf", "[legacy]\ntype = s3\nendpoint = http://legacy:1\n");
    r = ok("legacy:b");
    if (r)
        CHECK_EQ_STR(r->endpoint, "http://legacy:1");
    hfs3_remote_free(r);
    write_file("home/.config/rclone/rclone.conf", "[dot]\ntype = s3\nendpoint = http://dot:1\n");
    bad("legacy:b", "not found in rclone config");
    r = ok("dot:b");
    hfs3_remote_free(r);
    write_file("xdg/rclone/rclone.conf", "[xdg]\ntype = s3\nendpoint = http://xdg:1\n");
    setenv("XDG_CONFIG_HOME", P("xdg"), 1);
    r = ok("xdg:b");
    if (r)
        CHECK_EQ_STR(r->endpoint, "http://xdg:1");
    hfs3_remote_free(r);
    unsetenv("XDG_CONFIG_HOME");

    /* an encrypted config: refused clearly, unless the remote lives in the environment */
    write_file("enc.conf", "# Encrypted rclone configuration File\n\nRCLONE_ENCRYPT_V0:\nabcdefBASE64==\n");
    setenv("RCLONE_CONFIG", P("enc.conf"), 1);
    bad("secure:b", "is encrypted");
    r = ok("s3test:models");
    hfs3_remote_free(r);
}

static void addressing_rules(void)
{
    clean_env();
    setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET "x", 1);
    struct {
        const char *mode, *endpoint, *spec;
        int path;
    } t[] = {
        {NULL, NULL, "s3://bucket/p", 0},                              /* AWS endpoint: virtual */
        {"auto", "https://s3.us-east-1.amazonaws.com", "s3://b-1/p", 0}, /* explicit, still AWS */
        {NULL, "http://minio:9000", "s3://bucket/p", 1},               /* custom: path */
        {"virtual", "http://minio:9000", "s3://bucket/p", 0},
        {"virtual", "http://minio:9000", "s3://my.bucket/p", 0}, /* dots are fine without TLS */
        {"virtual", "https://minio:9000", "s3://my.bucket/p", 1}, /* dots with TLS: path */
        {NULL, NULL, "s3://my.bucket/p", 1},
        {NULL, NULL, "s3://My-Bucket/p", 1},   /* uppercase */
        {NULL, NULL, "s3://my_bucket/p", 1},   /* underscore */
        {NULL, NULL, "s3://ab/p", 1},          /* too short */
        {NULL, NULL, "s3://-bucket/p", 1},     /* dash at an end */
        {"virtual", "http://m:1", "s3://10.0.0.1/p", 1}, /* an IP address */
        {"path", NULL, "s3://bucket/p", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].mode)
            setenv("HFS3_S3_ADDRESSING", t[i].mode, 1);
        else
            unsetenv("HFS3_S3_ADDRESSING");
        if (t[i].endpoint)
            setenv("AWS_ENDPOINT_URL_S3", t[i].endpoint, 1);
        else
            unsetenv("AWS_ENDPOINT_URL_S3");
        hfs3_remote *r = ok(t[i].spec);
        if (r) {
            if (r->path_style != t[i].path)
                fprintf(stderr, "  addressing case %zu (%s)\n", i, t[i].spec);
            CHECK_EQ_INT(r->path_style, t[i].path);
        }
        hfs3_remote_free(r);
    }
}

static void tls_rules(void)
{
    clean_env();
    setenv("HFS3_TLS_VERIFY", "0", 1);
    hfs3_remote *r = ok("s3://bucket/p");
    if (r)
        CHECK_EQ_INT(r->tls_verify, 0);
    hfs3_remote_free(r);
    setenv("HFS3_TLS_VERIFY", "1", 1);
    r = ok("s3://bucket/p");
    if (r)
        CHECK_EQ_INT(r->tls_verify, 1);
    hfs3_remote_free(r);
    setenv("HFS3_TLS_VERIFY", "off", 1);
    r = ok("s3://bucket/p");
    if (r)
        CHECK_EQ_INT(r->tls_verify, 0);
    hfs3_remote_free(r);
    /* a value that is no boolean: one warning, and the checks stay on */
    setenv("HFS3_TLS_VERIFY", "perhaps", 1);
    r = ok("s3://bucket/p");
    if (r)
        CHECK_EQ_INT(r->tls_verify, 1);
    hfs3_remote_free(r);
}

/* Every parse above logged at debug level into a file: no secret may be in it. */
static char log_path[512];

static void no_secret_in_log(void)
{
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ_INT(hfs3_read_file(log_path, 1 << 24, &text, &len), 0);
    CHECK(len > 0); /* the debug lines did arrive */
    CHECK(text && strstr(text, SECRET) == NULL);
    CHECK(text && strstr(text, "HFS3_TLS_VERIFY=0") != NULL);
    free(text);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/hfs3-test-config-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 2;
    }
    /* route the log (at debug level) into a file to check it for secrets */
    snprintf(log_path, sizeof log_path, "%s/log", tmp);
    fflush(stderr);
    int saved = dup(2);
    int lfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    hfs3_log_set_level(HFS3_LOG_DEBUG);
    dup2(lfd, 2);
    close(lfd);

    TEST(spec_errors);
    TEST(s3_env);
    TEST(s3_profiles);
    TEST(rclone_file);
    TEST(rclone_env_only);
    TEST(addressing_rules);
    TEST(tls_rules);
    TEST(nul_in_files);
    TEST(identity);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    hfs3_log_set_level(HFS3_LOG_WARN);
    /* test failures went to the log file too: show them */
    char *text = NULL;
    if (hfs3_read_file(log_path, 1 << 24, &text, NULL) == 0) {
        for (char *l = text; l && *l;) {
            char *nl = strchr(l, '\n');
            if (nl)
                *nl++ = 0;
            if (strstr(l, "FAIL") || hfs3_starts_with(l, "  "))
                fprintf(stderr, "%s\n", l);
            l = nl;
        }
        free(text);
    }
    TEST(no_secret_in_log);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return t_done("test_config");
}
