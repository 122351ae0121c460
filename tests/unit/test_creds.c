/* test_creds.c - the credential chain without a network: word splitting of credential_process, expiry times,
 * which source the chain picks for each environment and profile (SDK order), the refusals, and a real
 * credential_process run through the provider: its keys, the per-user cache file (0600 in a 0700 dir) reused
 * by a second provider, and that no secret reaches a message. */
#include "harness.h"
#include "hfs3/config.h"
#include "hfs3/creds.h"
#include "hfs3/log.h"
#include "hfs3/util.h"
#include "../../lib/creds_int.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECRET "SeCrEt"

static char tmp[256];

static void put(const char *rel, const char *text, int mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    FILE *f = fopen(p, "w");
    if (!f)
        exit(2);
    fputs(text, f);
    fclose(f);
    chmod(p, (mode_t)mode);
}

static void clean_env(void)
{
    static const char *const vars[] = {
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
        "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS", "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE", "AWS_CA_BUNDLE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
        "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "XDG_CACHE_HOME", "RCLONE_CONFIG",
        "HFS3_S3_ADDRESSING", "HFS3_TLS_VERIFY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    char p[512];
    snprintf(p, sizeof p, "%s/home", tmp);
    setenv("HOME", p, 1);
    snprintf(p, sizeof p, "%s/config", tmp);
    setenv("AWS_CONFIG_FILE", p, 1);
    snprintf(p, sizeof p, "%s/credentials", tmp);
    setenv("AWS_SHARED_CREDENTIALS_FILE", p, 1);
}

static void split(void)
{
    char **v;
    CHECK_EQ_INT(credsrc_split("a b\tc", &v), 0);
    CHECK_EQ_STR(v[0], "a");
    CHECK_EQ_STR(v[2], "c");
    CHECK(v[3] == NULL);
    free(v);
    CHECK_EQ_INT(credsrc_split("  '/opt/my tool' --x=\"a \\\"q\\\" b\" c\\ d ''", &v), 0);
    CHECK_EQ_STR(v[0], "/opt/my tool");
    CHECK_EQ_STR(v[1], "--x=a \"q\" b");
    CHECK_EQ_STR(v[2], "c d");
    CHECK_EQ_STR(v[3], "");
    CHECK(v[4] == NULL);
    free(v);
    CHECK_EQ_INT(credsrc_split("'it''s'", &v), 0); /* adjacent quoted parts make one word */
    CHECK_EQ_STR(v[0], "its");
    free(v);
    CHECK_EQ_INT(credsrc_split("a 'b", &v), -EINVAL);
    CHECK_EQ_INT(credsrc_split("a \"b", &v), -EINVAL);
    CHECK_EQ_INT(credsrc_split("a\\", &v), -EINVAL);
    CHECK_EQ_INT(credsrc_split("   ", &v), -EINVAL);
}

static void times(void)
{
    long long t;
    CHECK_EQ_INT(credsrc_parse_time("2026-12-01T10:00:00Z", &t), 0);
    CHECK_EQ_INT(t, 1796119200LL);
    CHECK_EQ_INT(credsrc_parse_time("2026-12-01T10:00:00.123Z", &t), 0);
    CHECK_EQ_INT(t, 1796119200LL);
    CHECK_EQ_INT(credsrc_parse_time("2026-12-01T12:00:00+02:00", &t), 0);
    CHECK_EQ_INT(t, 1796119200LL);
    CHECK_EQ_INT(credsrc_parse_time("2026-12-01T09:30:00.5-00:30", &t), 0);
    CHECK_EQ_INT(t, 1796119200LL);
    CHECK_EQ_INT(credsrc_parse_time("2026-12-01 10:00:00", &t), -EINVAL);
    CHECK_EQ_INT(credsrc_parse_time("2026-12-01T10:00:00+2:00", &t), -EINVAL);
    CHECK_EQ_INT(credsrc_parse_time("", &t), -EINVAL);
}

/* The source the chain picks for s3://b/p ("static", "anonymous" or the provider's name); NULL on error. */
static const char *source(void)
{
    static char out[64];
    hfs3_remote *r = NULL;
    if (hfs3_remote_parse("s3://b/p", &r) < 0)
        return NULL;
    snprintf(out, sizeof out, "%s", r->creds ? hfs3_creds_source(r->creds) : r->access_key ? "static" : "anonymous");
    hfs3_remote_free(r);
    return out;
}

static void refused(const char *want)
{
    hfs3_remote *r = NULL;
    CHECK_EQ_INT(hfs3_remote_parse("s3://b/p", &r), -EINVAL);
    if (!strstr(hfs3_errmsg(), want))
        fprintf(stderr, "  message '%s' lacks '%s'\n", hfs3_errmsg(), want);
    CHECK(strstr(hfs3_errmsg(), want) != NULL);
    CHECK(strstr(hfs3_errmsg(), SECRET) == NULL);
}

static void order(void)
{
    clean_env();
    put("credentials", "[default]\n"
                       "aws_access_key_id = AKIDDEF\naws_secret_access_key = " SECRET "def\n"
                       "[srckeys]\naws_access_key_id = AKIDSRC\naws_secret_access_key = " SECRET "src\n",
        0600);
    put("config", "[profile proc]\ncredential_process = /bin/true\n"
                  "[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = srckeys\n"
                  "[profile chained]\nrole_arn = arn:aws:iam::1:role/r2\nsource_profile = role\n"
                  "[profile loop1]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = loop2\n"
                  "[profile loop2]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = loop1\n"
                  "[profile nosrc]\nrole_arn = arn:aws:iam::1:role/r\n"
                  "[profile mfa]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = srckeys\nmfa_serial = x\n"
                  "[profile envsrc]\nrole_arn = arn:aws:iam::1:role/r\ncredential_source = Environment\n"
                  "[profile imdssrc]\nrole_arn = arn:aws:iam::1:role/r\ncredential_source = Ec2InstanceMetadata\n"
                  "[profile badsrc]\nrole_arn = arn:aws:iam::1:role/r\ncredential_source = Moon\n"
                  "[profile web]\nrole_arn = arn:aws:iam::1:role/w\nweb_identity_token_file = /t\n"
                  "[profile sso]\nsso_start_url = https://x.awsapps.com/start\n"
                  "[profile empty]\nregion = eu-west-1\n"
                  "[profile keysandproc]\naws_access_key_id = AKIDCFG\naws_secret_access_key = " SECRET "cfg\n"
                  "credential_process = /bin/true\n",
        0600);
    CHECK_EQ_STR(source(), "static"); /* [default] in the credentials file */
    setenv("AWS_PROFILE", "proc", 1);
    CHECK_EQ_STR(source(), "credential_process");
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET "env", 1);
    CHECK_EQ_STR(source(), "static"); /* the environment's keys come first */
    unsetenv("AWS_ACCESS_KEY_ID");
    refused("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    /* web identity from the environment beats the profile's credential_process */
    setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/eks.amazonaws.com/serviceaccount/token", 1);
    refused("web identity: a token file is configured but no role ARN");
    setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa", 1);
    CHECK_EQ_STR(source(), "web identity");
    unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
    unsetenv("AWS_ROLE_ARN");
    /* the config file's credential_process beats its keys (botocore: process before config-file keys) */
    setenv("AWS_PROFILE", "keysandproc", 1);
    CHECK_EQ_STR(source(), "credential_process");
    setenv("AWS_PROFILE", "role", 1);
    CHECK_EQ_STR(source(), "assume role");
    setenv("AWS_PROFILE", "chained", 1);
    CHECK_EQ_STR(source(), "assume role");
    setenv("AWS_PROFILE", "web", 1);
    CHECK_EQ_STR(source(), "web identity");
    setenv("AWS_PROFILE", "loop1", 1);
    refused("source_profile hops");
    setenv("AWS_PROFILE", "nosrc", 1);
    refused("has role_arn but neither source_profile nor credential_source");
    setenv("AWS_PROFILE", "mfa", 1);
    refused("mfa_serial");
    setenv("AWS_PROFILE", "envsrc", 1);
    refused("credential_source Environment but");
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET "env", 1);
    CHECK_EQ_STR(source(), "static"); /* env keys still come first in the chain */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("AWS_PROFILE", "imdssrc", 1);
    CHECK_EQ_STR(source(), "assume role");
    setenv("AWS_PROFILE", "badsrc", 1);
    refused("credential_source 'Moon'");
    setenv("AWS_PROFILE", "sso", 1);
    refused("uses SSO (sso_start_url)");
    /* nothing in the profile: container credentials, then IMDS, then (disabled) anonymous */
    setenv("AWS_PROFILE", "empty", 1);
    CHECK_EQ_STR(source(), "instance metadata");
    setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/abc", 1);
    CHECK_EQ_STR(source(), "container credentials");
    unsetenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.23/v1/credentials", 1);
    CHECK_EQ_STR(source(), "container credentials");
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.0.0.1/creds", 1);
    refused("plain http to a host other than loopback");
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "https://creds.example.com/x", 1);
    CHECK_EQ_STR(source(), "container credentials");
    unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    CHECK_EQ_STR(source(), "anonymous");
    setenv("AWS_EC2_METADATA_DISABLED", "false", 1);
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://user:pw@host", 1);
    refused("without user info");
    unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    /* rclone: env_auth = true takes the same chain */
    setenv("RCLONE_CONFIG_R_TYPE", "s3", 1);
    setenv("RCLONE_CONFIG_R_ENV_AUTH", "true", 1);
    setenv("RCLONE_CONFIG_R_PROFILE", "proc", 1);
    hfs3_remote *r = NULL;
    CHECK_EQ_INT(hfs3_remote_parse("r:b/p", &r), 0);
    CHECK(r && r->creds && strcmp(hfs3_creds_source(r->creds), "credential_process") == 0);
    hfs3_remote_free(r);
    unsetenv("RCLONE_CONFIG_R_TYPE");
    unsetenv("RCLONE_CONFIG_R_ENV_AUTH");
    unsetenv("RCLONE_CONFIG_R_PROFILE");
}

/* AWS_CONTAINER_CREDENTIALS_FULL_URI over plain http: only to loopback and the ECS / Pod Identity addresses,
 * the host compared exactly (issue 25 item 1, issue 23 item 9). A host that merely starts like a loopback
 * address, or an IPv4 spelling libcurl hands to DNS (4294967423.0.0.1: sscanf's %u wraps it to 127), would get
 * the authorization token. */
static void container_hosts(void)
{
    clean_env();
    setenv("AWS_PROFILE", "empty", 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", SECRET "auth", 1);
    static const char *const good[] = {
        "http://127.0.0.1/creds", "http://127.0.0.1:8080/creds", "http://127.9.8.7/", "http://127.255.255.255",
        "http://localhost/creds", "http://LOCALHOST/creds", "http://LocalHost:80/creds", "http://[::1]/creds",
        "http://[::1]:9/creds", "http://[0:0:0:0:0:0:0:1]/", "http://169.254.170.2/v2/x", "http://169.254.170.23/v1/credentials",
        "http://[fd00:ec2::23]/creds", "http://[FD00:EC2:0::23]:80/creds", "http://127.0.0.1?x", "http://127.0.0.1#f"};
    static const char *const bad[] = {
        "http://127.0.0.1.evil.example/creds", "http://127.1.2.3x/creds", "http://4294967423.0.0.1/",
        "http://4294967423.0.0.1:80/creds", "http://127.0.0.1x/", "http://127.1/", "http://2130706433/",
        "http://0x7f.0.0.1/", "http://127.0.0.01/", "http://0127.0.0.1/", "http://127.0.0.256/", "http://localhost.evil.example/",
        "http://localhostx/", "http://[::1].evil/", "http://[::2]/", "http://[::ffff:127.0.0.1]/",
        "http://[::1/", "http://127.0.0.1:80x/", "http://169.254.170.20/", "http://10.0.0.1/", "http://evil.example/",
        "http:///creds", "http://:80/creds", "http://127.0.0.1\\@evil/"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", good[i], 1);
        const char *s = source();
        if (!s || strcmp(s, "container credentials"))
            fprintf(stderr, "  %s refused: %s\n", good[i], hfs3_errmsg());
        CHECK(s && !strcmp(s, "container credentials"));
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", bad[i], 1);
        hfs3_remote *r = NULL;
        int rc = hfs3_remote_parse("s3://b/p", &r);
        if (rc != -EINVAL)
            fprintf(stderr, "  %s accepted\n", bad[i]);
        CHECK_EQ_INT(rc, -EINVAL);
        CHECK(strstr(hfs3_errmsg(), SECRET) == NULL);
        hfs3_remote_free(r);
    }
    /* over https any host: the certificate says who it is */
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "https://127.0.0.1.evil.example/creds", 1);
    CHECK_EQ_STR(source(), "container credentials");
    unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN");
}

/* The provider for s3://b/p with AWS_PROFILE=prof (NULL on error; the caller frees the remote). */
static hfs3_remote *remote_of(const char *prof)
{
    hfs3_remote *r = NULL;
    setenv("AWS_PROFILE", prof, 1);
    if (hfs3_remote_parse("s3://b/p", &r) < 0 || !r->creds) {
        fprintf(stderr, "  profile %s: %s\n", prof, hfs3_errmsg());
        hfs3_remote_free(r);
        return NULL;
    }
    return r;
}

/* The per-user cache is keyed by everything that decides whose keys come back (issue 25 item 5): two profiles
 * that assume different roles from one source_profile never get each other's cached keys. Keys cached for
 * role a (a file written here, as a helper that asked STS would have left it) are used for role a, and never
 * for role b, which asks STS (a closed port here: it fails) instead. Each setting of AssumeRole changes the key;
 * the same settings under another profile name share it. */
static void cache_keys(void)
{
    clean_env();
    char xdg[512], cfg[2048];
    snprintf(xdg, sizeof xdg, "%s/xdg-keys", tmp);
    setenv("XDG_CACHE_HOME", xdg, 1);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9", 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    put("credentials", "[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = " SECRET "base\n"
                       "[base2]\naws_access_key_id = AKIDBASE2\naws_secret_access_key = " SECRET "base2\n", 0600);
    snprintf(cfg, sizeof cfg, "%s",
             "[profile ra]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = base\n"
             "[profile rb]\nrole_arn = arn:aws:iam::123456789012:role/b\nsource_profile = base\n"
             "[profile ra-again]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = base\n"
             "[profile ra-ext]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = base\nexternal_id = x1\n"
             "[profile ra-name]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = base\n"
             "role_session_name = other\n"
             "[profile ra-dur]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = base\n"
             "duration_seconds = 7200\n"
             "[profile ra-src2]\nrole_arn = arn:aws:iam::123456789012:role/a\nsource_profile = base2\n");
    put("config", cfg, 0600);
    static const char *const other[] = {"rb", "ra-ext", "ra-name", "ra-dur", "ra-src2"};
    hfs3_remote *ra = remote_of("ra"), *again = remote_of("ra-again");
    CHECK(ra && again);
    if (!ra || !again)
        goto out;
    char ka[65];
    snprintf(ka, sizeof ka, "%s", creds_cache_key(ra->creds));
    CHECK_EQ_INT(strlen(ka), 64);
    CHECK_EQ_STR(creds_cache_key(again->creds), ka);
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        hfs3_remote *r = remote_of(other[i]);
        CHECK(r != NULL);
        if (r && !strcmp(creds_cache_key(r->creds), ka))
            fprintf(stderr, "  profile %s shares role a's cache key\n", other[i]);
        CHECK(r && strcmp(creds_cache_key(r->creds), ka) != 0);
        hfs3_remote_free(r);
    }
    /* role a's keys in the cache, as a helper that asked STS for them would have left them */
    char dir[600], file[700], text[512];
    snprintf(dir, sizeof dir, "%s/hfs3-creds", xdg);
    CHECK_EQ_INT(hfs3_mkdirs(dir, 0700), 0);
    chmod(xdg, 0700);
    snprintf(file, sizeof file, "%s/%s", dir, ka);
    snprintf(text, sizeof text, "{\"AccessKeyId\": \"AKIDROLEA\", \"SecretAccessKey\": \"" SECRET "rolea\", "
             "\"SessionToken\": \"" SECRET "tok\", \"Expiration\": %lld}", (long long)time(NULL) + 3600);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (!f)
        goto out;
    fputs(text, f);
    fclose(f);
    chmod(file, 0600);
    hfs3_cred k = {0};
    CHECK_EQ_INT(hfs3_creds_get(ra->creds, &k), 0);
    CHECK(k.access_key && !strcmp(k.access_key, "AKIDROLEA"));
    hfs3_cred_clear(&k);
    hfs3_remote *rb = remote_of("rb");
    CHECK(rb != NULL);
    int rc = rb ? hfs3_creds_get(rb->creds, &k) : 0;
    CHECK(rc < 0);   /* asked STS, which is not there */
    CHECK(rc < 0 || !k.access_key || strcmp(k.access_key, "AKIDROLEA") != 0);
    if (rc == 0)
        hfs3_cred_clear(&k);
    CHECK(strstr(hfs3_errmsg(), SECRET) == NULL);
    hfs3_remote_free(rb);
out:
    hfs3_remote_free(ra);
    hfs3_remote_free(again);
    unsetenv("AWS_ENDPOINT_URL_STS");
    unsetenv("AWS_EC2_METADATA_DISABLED");
}

/* A real credential_process through the provider, and the per-user cache. */
static void process_and_cache(void)
{
    clean_env();
    char cfg[1024], xdg[512], calls[512];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmp);
    setenv("XDG_CACHE_HOME", xdg, 1);
    snprintf(calls, sizeof calls, "%s/calls", tmp);
    char script[1024];
    snprintf(script, sizeof script,
             "#!/bin/sh\necho x >>'%s'\n"
             "printf '{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", \"SecretAccessKey\": \"" SECRET "proc\", "
             "\"SessionToken\": \"" SECRET "tok\", \"Expiration\": \"%%s\"}' \"$(date -u -d @$(($(date +%%s) + 3600)) "
             "+%%Y-%%m-%%dT%%H:%%M:%%SZ)\"\n",
             calls);
    put("proc.sh", script, 0700);
    put("fail.sh", "#!/bin/sh\necho 'token " SECRET "x rejected' >&2\nexit 4\n", 0700);
    snprintf(cfg, sizeof cfg,
             "[profile p]\ncredential_process = %s/proc.sh\n[profile f]\ncredential_process = %s/fail.sh\n", tmp,
             tmp);
    put("config", cfg, 0600);
    put("credentials", "", 0600);
    setenv("AWS_PROFILE", "p", 1);
    for (int round = 0; round < 2; round++) {
        hfs3_remote *r = NULL;
        CHECK_EQ_INT(hfs3_remote_parse("s3://b/p", &r), 0);
        hfs3_cred k;
        CHECK_EQ_INT(r ? hfs3_creds_get(r->creds, &k) : -1, 0);
        CHECK_EQ_STR(k.access_key, "AKIDPROC");
        CHECK_EQ_STR(k.secret_key, SECRET "proc");
        CHECK_EQ_STR(k.session_token, SECRET "tok");
        CHECK(k.expires > (long long)time(NULL) + 3000);
        hfs3_cred_clear(&k);
        /* asked again in the same process: the kept keys */
        CHECK_EQ_INT(r ? hfs3_creds_get(r->creds, &k) : -1, 0);
        CHECK_EQ_STR(k.access_key, "AKIDPROC");
        hfs3_cred_clear(&k);
        hfs3_remote_free(r);
    }
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ_INT(hfs3_read_file(calls, 4096, &text, &len), 0);
    CHECK_EQ_INT(len, 2); /* one run for two providers: the second took the cache */
    free(text);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/hfs3-creds", xdg);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);

    /* a failing command: one line naming the source, its last stderr line; the test puts no secret there
     * but the token-like word shows the line is passed on as the command wrote it */
    setenv("AWS_PROFILE", "f", 1);
    hfs3_remote *r = NULL;
    CHECK_EQ_INT(hfs3_remote_parse("s3://b/p", &r), 0);
    hfs3_cred k;
    CHECK_EQ_INT(r ? hfs3_creds_get(r->creds, &k) : -1, -EACCES);
    CHECK(strstr(hfs3_errmsg(), "credential_process: ") == hfs3_errmsg());
    CHECK(strstr(hfs3_errmsg(), "exited with status 4: token") != NULL);
    CHECK(strchr(hfs3_errmsg(), '\n') == NULL);
    hfs3_remote_free(r);

    /* a cache directory others can enter is not used (and not changed) */
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/hfs3-creds' && chmod 0755 '%s/hfs3-creds'", xdg, xdg, xdg);
    CHECK_EQ_INT(system(cmd), 0);
    setenv("AWS_PROFILE", "p", 1);
    hfs3_log_set_level(HFS3_LOG_ERROR);
    CHECK_EQ_INT(hfs3_remote_parse("s3://b/p", &r), 0);
    CHECK_EQ_INT(r ? hfs3_creds_get(r->creds, &k) : -1, 0);
    hfs3_cred_clear(&k);
    hfs3_remote_free(r);
    hfs3_log_set_level(HFS3_LOG_WARN);
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0755);
    snprintf(cmd, sizeof cmd, "ls -A '%s/hfs3-creds' | wc -l | grep -qx 0", xdg);
    CHECK_EQ_INT(system(cmd), 0);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "%s/hfs3-test-creds.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp))
        return 2;
    char home[300];
    snprintf(home, sizeof home, "%s/home", tmp);
    mkdir(home, 0700);
    TEST(split);
    TEST(times);
    TEST(order);
    TEST(container_hosts);
    TEST(cache_keys);
    TEST(process_and_cache);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return t_done("test_creds");
}
