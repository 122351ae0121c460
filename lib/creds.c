/* creds.c - the AWS credential chain (creds.h): which source applies (SDK order), the provider that asks it
 * lazily and refreshes before expiry, and the per-user cache of temporary keys (~/.cache/hfs3-creds/, 0700,
 * files 0600 keyed by a hash of the source, written O_EXCL under an unpredictable name and renamed).
 * Asking a source is credsrc.c's. No secret ever reaches a message, a log line or an argv. */
#include "hfs3/creds.h"

#include "creds_int.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/log.h"
#include "hfs3/util.h"

#define REFRESH_MARGIN 300 /* seconds: keys with less left are fetched again (and not taken from the cache) */
#define RETRY_GAP 1.0      /* seconds between refresh attempts while old keys are still usable */
#define MAX_CHAIN 8        /* source_profile hops */

struct hfs3_creds {
    pthread_mutex_t mu;
    credsrc *src;
    char *ctx;
    char key[65];    /* the cache file's name: sha256 of the source's description */
    hfs3_cred cur;
    int have;
    int warned;      /* a failed refresh was reported (once per provider) */
    double last_try; /* monotonic time of the last fetch attempt */
};

void hfs3_cred_clear(hfs3_cred *c)
{
    if (c->secret_key)
        explicit_bzero(c->secret_key, strlen(c->secret_key));
    if (c->session_token)
        explicit_bzero(c->session_token, strlen(c->session_token));
    free(c->access_key);
    free(c->secret_key);
    free(c->session_token);
    memset(c, 0, sizeof *c);
}

static int cred_copy(hfs3_cred *dst, const hfs3_cred *src)
{
    memset(dst, 0, sizeof *dst);
    if ((src->access_key && !(dst->access_key = hfs3_strdup(src->access_key))) ||
        (src->secret_key && !(dst->secret_key = hfs3_strdup(src->secret_key))) ||
        (src->session_token && !(dst->session_token = hfs3_strdup(src->session_token)))) {
        hfs3_cred_clear(dst);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    dst->expires = src->expires;
    return 0;
}

/* ---------- planning: which source, from the environment and the shared files ---------- */

static const char *envv(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int env_true(const char *name)
{
    const char *v = envv(name);
    return v && strcasecmp(v, "true") == 0;
}

typedef struct planner {
    const hfs3_aws_files *f;
    const char *ctx;
} planner;

/* A profile's setting as botocore merges them: the credentials file's [NAME] beats the config file's
 * [profile NAME] ([default] for the default profile). */
static const char *pget(const planner *p, const char *prof, const char *key)
{
    const char *v = p->f->get(p->f->ud, 0, prof, key, NULL);
    if (v)
        return v;
    char sect[512];
    if ((size_t)snprintf(sect, sizeof sect, "profile %s", prof) >= sizeof sect)
        return NULL;
    v = p->f->get(p->f->ud, 1, sect, key, NULL);
    if (!v && strcmp(prof, "default") == 0)
        v = p->f->get(p->f->ud, 1, "default", key, NULL);
    return v;
}

/* The config file's nested setting (`sts =` / `  endpoint_url = ...`) of a profile. */
static const char *pget_sub(const planner *p, const char *prof, const char *key, const char *sub)
{
    char sect[512];
    if ((size_t)snprintf(sect, sizeof sect, "profile %s", prof) >= sizeof sect)
        return NULL;
    const char *v = p->f->get(p->f->ud, 1, sect, key, sub);
    if (!v && strcmp(prof, "default") == 0)
        v = p->f->get(p->f->ud, 1, "default", key, sub);
    return v;
}

static int profile_exists(const planner *p, const char *prof)
{
    char sect[512];
    snprintf(sect, sizeof sect, "profile %s", prof);
    return p->f->has(p->f->ud, 0, prof) || p->f->has(p->f->ud, 1, sect) ||
           (strcmp(prof, "default") == 0 && p->f->has(p->f->ud, 1, "default"));
}

static credsrc *src_new(int kind, const char *name)
{
    credsrc *s = calloc(1, sizeof *s);
    if (!s) {
        hfs3_err(-ENOMEM, "out of memory");
        return NULL;
    }
    s->kind = kind;
    s->name = name;
    s->tls_verify = 1;
    return s;
}

/* *dst = copy of v (NULL stays NULL). */
static int dup_to(char **dst, const char *v)
{
    if (v && !(*dst = strdup(v)))
        return hfs3_err(-ENOMEM, "out of memory");
    return 0;
}

/* The STS endpoint the AWS rules configure, or NULL (regional): AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, the
 * profile's nested `sts = endpoint_url`, its `services` section's sts endpoint_url, its endpoint_url;
 * AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true (or the profile's ignore_configured_endpoint_urls) turns them off. */
static const char *sts_endpoint(const planner *p)
{
    const char *prof = p->f->profile;
    const char *ign = pget(p, prof, "ignore_configured_endpoint_urls");
    if (env_true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") || (ign && strcasecmp(ign, "true") == 0))
        return NULL;
    const char *v = envv("AWS_ENDPOINT_URL_STS");
    if (!v)
        v = envv("AWS_ENDPOINT_URL");
    if (!v)
        v = pget_sub(p, prof, "sts", "endpoint_url");
    const char *svc = pget(p, prof, "services");
    if (!v && svc) {
        char sect[512];
        if ((size_t)snprintf(sect, sizeof sect, "services %s", svc) < sizeof sect)
            v = p->f->get(p->f->ud, 1, sect, "sts", "endpoint_url");
    }
    if (!v)
        v = pget(p, prof, "endpoint_url");
    return v;
}

/* An STS URL must be http(s)://host[:port][/path] without user info (it could hold a password). */
static int check_url(const planner *p, const char *what, const char *url)
{
    if (!(hfs3_starts_with(url, "http://") || hfs3_starts_with(url, "https://")) || strchr(url, '@') ||
        strpbrk(url, " \t\r\n"))
        return hfs3_err(-EINVAL, "remote %s: %s '%s' is not an http:// or https:// URL without user info", p->ctx,
                        what, url);
    return 0;
}

static int set_sts(const planner *p, credsrc *s)
{
    const char *ep = sts_endpoint(p);
    if (!ep)
        return 0;
    int rc = check_url(p, "STS endpoint", ep);
    if (rc == 0)
        rc = dup_to(&s->sts_endpoint, ep);
    if (rc == 0) {
        size_t n = strlen(s->sts_endpoint);
        while (n > 8 && s->sts_endpoint[n - 1] == '/')
            s->sts_endpoint[--n] = 0;
    }
    return rc;
}

static int plan_container(const planner *p, credsrc **out);
static int plan_imds(const planner *p, int optional, credsrc **out);

/* Static keys of a profile (credentials file first, then config file); 1 found, 0 none, <0 half a pair. */
static int profile_keys(const planner *p, const char *prof, int file, hfs3_cred *k)
{
    const char *ak, *sk, *tok;
    if (file == 0) {
        ak = p->f->get(p->f->ud, 0, prof, "aws_access_key_id", NULL);
        sk = p->f->get(p->f->ud, 0, prof, "aws_secret_access_key", NULL);
        tok = p->f->get(p->f->ud, 0, prof, "aws_session_token", NULL);
    } else {
        char sect[512];
        snprintf(sect, sizeof sect, "profile %s", prof);
        const char *s = p->f->has(p->f->ud, 1, sect) || strcmp(prof, "default") != 0 ? sect : "default";
        ak = p->f->get(p->f->ud, 1, s, "aws_access_key_id", NULL);
        sk = p->f->get(p->f->ud, 1, s, "aws_secret_access_key", NULL);
        tok = p->f->get(p->f->ud, 1, s, "aws_session_token", NULL);
    }
    if (!ak && !sk)
        return 0;
    const char *where = file ? p->f->conf_path : p->f->cred_path;
    if (!ak || !sk)
        return hfs3_err(-EINVAL, "remote %s: AWS profile '%s' in %s has %s but no %s", p->ctx, prof, where,
                        ak ? "aws_access_key_id" : "aws_secret_access_key",
                        ak ? "aws_secret_access_key" : "aws_access_key_id");
    if (k && (dup_to(&k->access_key, ak) || dup_to(&k->secret_key, sk) || dup_to(&k->session_token, tok)))
        return -ENOMEM;
    return 1;
}

static int plan_role(const planner *p, const char *prof, int depth, credsrc **out);

/* What a profile named as source_profile yields (botocore's _resolve_source_credentials): a role of its own
 * (chained), web identity, credential_process, else its static keys. self: the profile naming itself. */
static int plan_source_profile(const planner *p, const char *prof, int self, int depth, credsrc **out)
{
    *out = NULL;
    if (!profile_exists(p, prof))
        return hfs3_err(-EINVAL, "remote %s: source_profile '%s' not found in %s nor %s", p->ctx, prof,
                        p->f->cred_path, p->f->conf_path);
    if (!self && pget(p, prof, "role_arn"))
        return plan_role(p, prof, depth + 1, out);
    const char *wif = pget(p, prof, "web_identity_token_file");
    if (!self && wif) {
        credsrc *s = src_new(SRC_WEBID, "web identity");
        int rc = !s ? -ENOMEM : 0;
        const char *arn = pget(p, prof, "role_arn");
        if (!rc && !arn)
            rc = hfs3_err(-EINVAL, "remote %s: AWS profile '%s' has web_identity_token_file but no role_arn", p->ctx,
                          prof);
        if (!rc && !(rc = dup_to(&s->token_file, wif)) && !(rc = dup_to(&s->role_arn, arn)) &&
            !(rc = dup_to(&s->session_name, pget(p, prof, "role_session_name"))))
            rc = set_sts(p, s);
        if (rc < 0) {
            credsrc_free(s);
            return rc;
        }
        *out = s;
        return 0;
    }
    const char *cp = pget(p, prof, "credential_process");
    credsrc *s;
    if (cp && !self) {
        if (!(s = src_new(SRC_PROCESS, "credential_process")))
            return -ENOMEM;
        if (dup_to(&s->command, cp) < 0) {
            credsrc_free(s);
            return -ENOMEM;
        }
        *out = s;
        return 0;
    }
    if (!(s = src_new(SRC_STATIC, "source profile")))
        return -ENOMEM;
    int rc = profile_keys(p, prof, 0, &s->keys);
    if (rc == 0)
        rc = profile_keys(p, prof, 1, &s->keys);
    if (rc == 0 && cp) {
        /* a profile with role_arn and credential_process naming itself */
        s->kind = SRC_PROCESS;
        s->name = "credential_process";
        rc = dup_to(&s->command, cp) < 0 ? -ENOMEM : 1;
    }
    if (rc == 0)
        rc = hfs3_err(-EINVAL, "remote %s: source_profile '%s' has no credentials (static keys, role_arn, "
                               "web_identity_token_file or credential_process)",
                      p->ctx, prof);
    if (rc < 0) {
        credsrc_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* role_arn with source_profile or credential_source: STS AssumeRole. */
static int plan_role(const planner *p, const char *prof, int depth, credsrc **out)
{
    *out = NULL;
    if (depth > MAX_CHAIN)
        return hfs3_err(-EINVAL, "remote %s: AWS profile '%s': more than %d source_profile hops (a loop?)", p->ctx,
                        prof, MAX_CHAIN);
    const char *arn = pget(p, prof, "role_arn"), *sp = pget(p, prof, "source_profile"),
               *cs = pget(p, prof, "credential_source");
    if (pget(p, prof, "mfa_serial"))
        return hfs3_err(-EINVAL, "remote %s: AWS profile '%s' needs an MFA code (mfa_serial), which hfs3 cannot "
                                 "ask for",
                        p->ctx, prof);
    if (sp && cs)
        return hfs3_err(-EINVAL, "remote %s: AWS profile '%s' has both source_profile and credential_source",
                        p->ctx, prof);
    if (!sp && !cs)
        return hfs3_err(-EINVAL, "remote %s: AWS profile '%s' has role_arn but neither source_profile nor "
                                 "credential_source",
                        p->ctx, prof);
    credsrc *s = src_new(SRC_ROLE, "assume role");
    if (!s)
        return -ENOMEM;
    int rc;
    if ((rc = dup_to(&s->role_arn, arn)) < 0 ||
        (rc = dup_to(&s->session_name, pget(p, prof, "role_session_name"))) < 0 ||
        (rc = dup_to(&s->external_id, pget(p, prof, "external_id"))) < 0 ||
        (rc = dup_to(&s->duration, pget(p, prof, "duration_seconds"))) < 0 || (rc = set_sts(p, s)) < 0)
        goto fail;
    if (sp) {
        rc = plan_source_profile(p, sp, strcmp(sp, prof) == 0, depth, &s->source);
    } else if (strcmp(cs, "Environment") == 0) {
        const char *ak = envv("AWS_ACCESS_KEY_ID"), *sk = envv("AWS_SECRET_ACCESS_KEY");
        if (!ak || !sk) {
            rc = hfs3_err(-EINVAL, "remote %s: AWS profile '%s': credential_source Environment but "
                                   "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not both set",
                          p->ctx, prof);
            goto fail;
        }
        if (!(s->source = src_new(SRC_STATIC, "environment"))) {
            rc = -ENOMEM;
            goto fail;
        }
        if (dup_to(&s->source->keys.access_key, ak) || dup_to(&s->source->keys.secret_key, sk) ||
            dup_to(&s->source->keys.session_token, envv("AWS_SESSION_TOKEN")))
            rc = -ENOMEM;
    } else if (strcmp(cs, "EcsContainer") == 0) {
        rc = plan_container(p, &s->source);
        if (rc == 0 && !s->source)
            rc = hfs3_err(-EINVAL, "remote %s: AWS profile '%s': credential_source EcsContainer but no "
                                   "AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI",
                          p->ctx, prof);
    } else if (strcmp(cs, "Ec2InstanceMetadata") == 0) {
        rc = plan_imds(p, 0, &s->source);
    } else {
        rc = hfs3_err(-EINVAL, "remote %s: AWS profile '%s': credential_source '%s': expected Environment, "
                               "EcsContainer or Ec2InstanceMetadata",
                      p->ctx, prof, cs);
    }
    if (rc < 0)
        goto fail;
    *out = s;
    return 0;
fail:
    credsrc_free(s);
    return rc < 0 ? rc : -ENOMEM;
}

/* Web identity from the environment (which wins, as in botocore) or the profile. 0 with *out NULL: none. */
static int plan_webid(const planner *p, credsrc **out)
{
    *out = NULL;
    const char *prof = p->f->profile;
    const char *tf = envv("AWS_WEB_IDENTITY_TOKEN_FILE"), *arn = envv("AWS_ROLE_ARN"),
               *sn = envv("AWS_ROLE_SESSION_NAME");
    if (!tf)
        tf = pget(p, prof, "web_identity_token_file");
    if (!tf)
        return 0;
    if (!arn)
        arn = pget(p, prof, "role_arn");
    if (!sn)
        sn = pget(p, prof, "role_session_name");
    if (!arn)
        return hfs3_err(-EINVAL, "remote %s: web identity: a token file is configured but no role ARN "
                                 "(AWS_ROLE_ARN or the profile's role_arn)",
                        p->ctx);
    credsrc *s = src_new(SRC_WEBID, "web identity");
    int rc = !s ? -ENOMEM : 0;
    if (!rc && !(rc = dup_to(&s->token_file, tf)) && !(rc = dup_to(&s->role_arn, arn)) &&
        !(rc = dup_to(&s->session_name, sn)))
        rc = set_sts(p, s);
    if (rc < 0) {
        credsrc_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Hosts an http:// full URI may name (botocore's list): loopback, and the ECS and EKS Pod Identity addresses.
 * The host must be exactly one of them: "localhost" in any case, an IPv4 address in dotted-quad form parsed
 * strictly (inet_pton: four decimal parts of 0-255, nothing after) in 127.0.0.0/8, 169.254.170.2 or
 * 169.254.170.23, or a bracketed IPv6 address equal to ::1 or fd00:ec2::23. A prefix match or a lenient parse
 * would send the authorization token elsewhere: sscanf("%u") took 4294967423.0.0.1 for 127.0.0.1 (it wraps),
 * while libcurl hands that name to DNS. check_url already refused user info and blanks; after the host only a
 * decimal port may follow. */
static int allowed_http_host(const char *uri)
{
    const char *h = uri + 7, *rest;
    char host[256];
    size_t n;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        if (!e || (size_t)(e - h - 1) >= sizeof host)
            return 0;
        n = (size_t)(e - h - 1);
        memcpy(host, h + 1, n);
        rest = e + 1;
    } else {
        n = strcspn(h, ":/?#");
        if (n >= sizeof host)
            return 0;
        memcpy(host, h, n);
        rest = h + n;
    }
    host[n] = 0;
    if (*rest == ':')
        for (rest++; *rest >= '0' && *rest <= '9'; rest++)
            ;
    if (*rest && !strchr("/?#", *rest))
        return 0;
    if (*h == '[') {
        struct in6_addr a6, ecs6;
        return inet_pton(AF_INET6, host, &a6) == 1 && inet_pton(AF_INET6, "fd00:ec2::23", &ecs6) == 1 &&
               (IN6_IS_ADDR_LOOPBACK(&a6) || IN6_ARE_ADDR_EQUAL(&a6, &ecs6));
    }
    if (!strcasecmp(host, "localhost"))
        return 1;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) != 1)
        return 0;
    uint32_t ip = ntohl(a4.s_addr);
    return (ip >> 24) == 127 || ip == 0xA9FEAA02u /* 169.254.170.2 */ || ip == 0xA9FEAA17u /* 169.254.170.23 */;
}

static int plan_container(const planner *p, credsrc **out)
{
    *out = NULL;
    const char *rel = envv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = envv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!rel && !full)
        return 0;
    credsrc *s = src_new(SRC_CONTAINER, "container credentials");
    if (!s)
        return -ENOMEM;
    int rc = 0;
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (rel) {
        /* the relative URI wins, as in botocore; it never gets the authorization token */
        if (hfs3_buf_addf(&b, "http://169.254.170.2%s%s", *rel == '/' ? "" : "/", rel) < 0 ||
            !(s->uri = hfs3_buf_take(&b, NULL)))
            rc = hfs3_err(-ENOMEM, "out of memory");
    } else {
        if ((rc = check_url(p, "AWS_CONTAINER_CREDENTIALS_FULL_URI", full)) == 0 &&
            hfs3_starts_with(full, "http://") && !allowed_http_host(full))
            rc = hfs3_err(-EINVAL, "remote %s: container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI '%s' is "
                                   "plain http to a host other than loopback, 169.254.170.2 or 169.254.170.23",
                          p->ctx, full);
        if (rc == 0)
            rc = dup_to(&s->uri, full);
        const char *tf = envv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
        const char *tok = envv("AWS_CONTAINER_AUTHORIZATION_TOKEN");
        if (rc == 0 && tf)
            rc = dup_to(&s->auth_file, tf);
        else if (rc == 0 && tok)
            rc = dup_to(&s->auth, tok);
    }
    if (rc < 0) {
        credsrc_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = envv(name);
    if (!v)
        return dflt;
    char *end;
    double d = strtod(v, &end);
    if (*end || d < lo || d > hi)
        return dflt;
    return (long)(d * (strcmp(name, "AWS_METADATA_SERVICE_TIMEOUT") == 0 ? 1000 : 1));
}

/* IMDS: AWS_EC2_METADATA_SERVICE_ENDPOINT (or the profile's ec2_metadata_service_endpoint), else
 * http://169.254.169.254 (http://[fd00:ec2::254] with AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6); AWS_METADATA_SERVICE_TIMEOUT seconds (1) and _NUM_ATTEMPTS (1) as botocore. */
static int plan_imds(const planner *p, int optional, credsrc **out)
{
    *out = NULL;
    credsrc *s = src_new(SRC_IMDS, "instance metadata");
    if (!s)
        return -ENOMEM;
    s->optional = optional;
    const char *ep = envv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    if (!ep)
        ep = pget(p, p->f->profile, "ec2_metadata_service_endpoint");
    const char *mode = envv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
    if (!mode)
        mode = pget(p, p->f->profile, "ec2_metadata_service_endpoint_mode");
    if (!ep)
        ep = mode && strcasecmp(mode, "IPv6") == 0 ? "http://[fd00:ec2::254]" : "http://169.254.169.254";
    int rc = check_url(p, "AWS_EC2_METADATA_SERVICE_ENDPOINT", ep);
    if (rc == 0)
        rc = dup_to(&s->imds_endpoint, ep);
    if (rc < 0) {
        credsrc_free(s);
        return rc;
    }
    size_t n = strlen(s->imds_endpoint);
    while (n > 8 && s->imds_endpoint[n - 1] == '/')
        s->imds_endpoint[--n] = 0;
    s->imds_timeout_ms = env_long("AWS_METADATA_SERVICE_TIMEOUT", 1000, 1, 60);
    s->imds_attempts = (int)env_long("AWS_METADATA_SERVICE_NUM_ATTEMPTS", 1, 1, 10);
    *out = s;
    return 0;
}

/* A stable description of the source (the cache key's input): kind and every setting that changes whose
 * keys come back. Secrets only go in hashed. */
static int describe(const credsrc *s, hfs3_buf *b)
{
    int rc = hfs3_buf_addf(b, "%d|", s->kind);
#define F(x)                                                                                                   \
    if (!rc)                                                                                                   \
    rc = hfs3_buf_addf(b, "%s|", (x) ? (x) : "")
    F(s->role_arn);
    F(s->session_name);
    F(s->external_id);
    F(s->duration);
    F(s->token_file);
    F(s->command);
    F(s->uri);
    F(s->auth_file);
    F(s->imds_endpoint);
    F(s->sts_endpoint);
    F(s->region);
    F(s->keys.access_key);
#undef F
    if (!rc && (s->auth || s->keys.secret_key)) {
        char h[65];
        hfs3_buf t;
        hfs3_buf_init(&t, 0);
        rc = hfs3_buf_addf(&t, "%s|%s", s->auth ? s->auth : "", s->keys.secret_key ? s->keys.secret_key : "");
        if (!rc) {
            hfs3_sha256_hexof(t.data, t.len, h);
            explicit_bzero(t.data, t.len);
            rc = hfs3_buf_addf(b, "%s|", h);
        }
        hfs3_buf_free(&t);
    }
    if (!rc && s->source) {
        rc = hfs3_buf_adds(b, "<");
        if (!rc)
            rc = describe(s->source, b);
    }
    return rc;
}

int hfs3_creds_plan(const hfs3_aws_files *f, const char *ctx, hfs3_cred *keys, hfs3_creds **out)
{
    *out = NULL;
    memset(keys, 0, sizeof *keys);
    planner p = {f, ctx};
    const char *prof = f->profile;
    credsrc *s = NULL;
    int rc;

    /* 1. the environment */
    const char *ak = envv("AWS_ACCESS_KEY_ID"), *sk = envv("AWS_SECRET_ACCESS_KEY");
    if (ak || sk) {
        if (!ak || !sk)
            return hfs3_err(-EINVAL, "remote %s: %s is set but %s is not", ctx,
                            ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                            ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
        if (dup_to(&keys->access_key, ak) || dup_to(&keys->secret_key, sk) ||
            dup_to(&keys->session_token, envv("AWS_SESSION_TOKEN"))) {
            hfs3_cred_clear(keys);
            return -ENOMEM;
        }
        hfs3_debug("remote %s: credentials from the environment", ctx);
        return 0;
    }
    /* 2. role_arn (unless it belongs to web identity) */
    if (pget(&p, prof, "role_arn") && !pget(&p, prof, "web_identity_token_file")) {
        if ((rc = plan_role(&p, prof, 0, &s)) < 0)
            return rc;
        goto provider;
    }
    /* 3. web identity */
    if ((rc = plan_webid(&p, &s)) < 0)
        return rc;
    if (s)
        goto provider;
    /* 4. SSO */
    static const char *const sso[] = {"sso_session", "sso_start_url"};
    for (size_t i = 0; i < 2; i++)
        if (pget(&p, prof, sso[i]))
            return hfs3_err(-EINVAL,
                            "remote %s: AWS profile '%s' uses SSO (%s), which hfs3 does not support; add "
                            "credential_process = aws configure export-credentials --profile %s --format process "
                            "(AWS CLI v2, which SSO profiles need) to another profile and use that one",
                            ctx, prof, sso[i], prof);
    /* 5. the credentials file's keys */
    if ((rc = profile_keys(&p, prof, 0, keys)) != 0) {
        if (rc > 0)
            hfs3_debug("remote %s: credentials from %s", ctx, f->cred_path);
        else
            hfs3_cred_clear(keys);
        return rc < 0 ? rc : 0;
    }
    /* 6. credential_process */
    const char *cp = pget(&p, prof, "credential_process");
    if (cp) {
        if (!(s = src_new(SRC_PROCESS, "credential_process")))
            return -ENOMEM;
        if (dup_to(&s->command, cp) < 0) {
            credsrc_free(s);
            return -ENOMEM;
        }
        goto provider;
    }
    /* 7. the config file's keys */
    if ((rc = profile_keys(&p, prof, 1, keys)) != 0) {
        if (rc > 0)
            hfs3_debug("remote %s: credentials from %s", ctx, f->conf_path);
        else
            hfs3_cred_clear(keys);
        return rc < 0 ? rc : 0;
    }
    /* 8. container credentials */
    if ((rc = plan_container(&p, &s)) < 0)
        return rc;
    if (s)
        goto provider;
    /* 9. IMDS, unless disabled; nothing there means anonymous */
    if (env_true("AWS_EC2_METADATA_DISABLED")) {
        hfs3_debug("remote %s: no credentials (AWS_EC2_METADATA_DISABLED): anonymous requests", ctx);
        return 0;
    }
    if ((rc = plan_imds(&p, 1, &s)) < 0)
        return rc;
provider:;
    hfs3_creds *c = calloc(1, sizeof *c);
    if (!c || !(c->ctx = strdup(ctx))) {
        free(c);
        credsrc_free(s);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    pthread_mutex_init(&c->mu, NULL);
    c->src = s;
    hfs3_debug("remote %s: credentials from %s (asked on first use)", ctx, s->name);
    *out = c;
    return 0;
}

static void set_net(credsrc *s, const char *region, const char *ca, int tls, int *rc)
{
    for (; s; s = s->source) {
        free(s->region);
        free(s->ca_bundle);
        s->region = s->ca_bundle = NULL;
        if (dup_to(&s->region, region) < 0 || dup_to(&s->ca_bundle, ca) < 0)
            *rc = -ENOMEM;
        s->tls_verify = tls;
    }
}

int hfs3_creds_set_net(hfs3_creds *c, const char *region, const char *ca_bundle, int tls_verify)
{
    int rc = 0;
    set_net(c->src, region, ca_bundle, tls_verify, &rc);
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (rc == 0 && describe(c->src, &b) < 0)
        rc = -ENOMEM;
    if (rc == 0)
        hfs3_sha256_hexof(b.data, b.len, c->key);
    if (b.data)
        explicit_bzero(b.data, b.len);
    hfs3_buf_free(&b);
    return rc < 0 ? hfs3_err(rc, "out of memory") : 0;
}

const char *hfs3_creds_source(const hfs3_creds *c) { return c->src->name; }

const char *creds_cache_key(const hfs3_creds *c) { return c->key; }

void hfs3_creds_free(hfs3_creds *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    hfs3_cred_clear(&c->cur);
    credsrc_free(c->src);
    free(c->ctx);
    free(c);
}

/* ---------- the per-user cache ---------- */

/* Opens (creating as needed) $XDG_CACHE_HOME/hfs3-creds (an absolute XDG_CACHE_HOME only, as the XDG spec says)
 * or ~/.cache/hfs3-creds: a directory this user owns
 * that nobody else may enter. Returns its descriptor, or -1 (the cache is then not used; debug line). */
static int cache_dir(int create)
{
    const char *x = envv("XDG_CACHE_HOME"), *home = envv("HOME");
    if (x && x[0] != '/')
        x = NULL; /* relative: it would name a place under the cwd (through the shim, the program's); ignored */
    struct passwd pw, *res = NULL;
    char pwbuf[4096];
    if (!x && !home && getpwuid_r(geteuid(), &pw, pwbuf, sizeof pwbuf, &res) == 0 && res && res->pw_dir &&
        *res->pw_dir)
        home = res->pw_dir; /* as the AWS CLI: no HOME, the user's home from the password database */
    char path[4096];
    if (x)
        snprintf(path, sizeof path, "%s/hfs3-creds", x);
    else if (home)
        snprintf(path, sizeof path, "%s/.cache/hfs3-creds", home);
    else
        return -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", path);
        *strrchr(parent, '/') = 0;
        if (hfs3_mkdirs(parent, 0700) < 0)
            hfs3_err_clear();
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
            hfs3_debug("credentials cache %s: %s: not used", path, strerror(errno));
            return -1;
        }
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
        hfs3_warn("credentials cache %s: not a private directory of this user (mode 0700): not used", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* Keys from the cache file for c, when they are valid for REFRESH_MARGIN more seconds. 1 found, 0 not. */
static int cache_read(hfs3_creds *c, hfs3_cred *out)
{
    int dfd = cache_dir(0);
    if (dfd < 0)
        return 0;
    int found = 0;
    int fd = openat(dfd, c->key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    close(dfd);
    if (fd < 0)
        return 0;
    struct stat st;
    char buf[16384];
    ssize_t n = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077) &&
        st.st_size < (off_t)sizeof buf)
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    cJSON *j = cJSON_ParseWithLength(buf, (size_t)n);
    explicit_bzero(buf, sizeof buf);
    if (!j)
        return 0;
    const cJSON *ak = cJSON_GetObjectItemCaseSensitive(j, "AccessKeyId"),
                *sk = cJSON_GetObjectItemCaseSensitive(j, "SecretAccessKey"),
                *tok = cJSON_GetObjectItemCaseSensitive(j, "SessionToken"),
                *exp = cJSON_GetObjectItemCaseSensitive(j, "Expiration");
    if (cJSON_IsString(ak) && cJSON_IsString(sk) && cJSON_IsNumber(exp) &&
        exp->valuedouble > (double)time(NULL) + REFRESH_MARGIN) {
        hfs3_cred k = {ak->valuestring, sk->valuestring, cJSON_IsString(tok) ? tok->valuestring : NULL,
                       (long long)exp->valuedouble};
        found = cred_copy(out, &k) == 0;
    }
    for (cJSON *it = j->child; it; it = it->next)
        if (cJSON_IsString(it) && it->valuestring)
            explicit_bzero(it->valuestring, strlen(it->valuestring));
    cJSON_Delete(j);
    return found;
}

/* Stores k for later processes: a temp file O_CREAT|O_EXCL|O_NOFOLLOW, 0600, unpredictable name, renamed
 * over the key's file. Failures only cost a later fetch: debug line. */
static void cache_write(hfs3_creds *c, const hfs3_cred *k)
{
    int dfd = cache_dir(1);
    if (dfd < 0)
        return;
    cJSON *j = cJSON_CreateObject();
    char *text = NULL;
    if (j && cJSON_AddStringToObject(j, "AccessKeyId", k->access_key) &&
        cJSON_AddStringToObject(j, "SecretAccessKey", k->secret_key) &&
        (!k->session_token || cJSON_AddStringToObject(j, "SessionToken", k->session_token)) &&
        cJSON_AddNumberToObject(j, "Expiration", (double)k->expires) &&
        cJSON_AddStringToObject(j, "Source", c->src->name))
        text = cJSON_PrintUnformatted(j);
    if (j) {
        for (cJSON *it = j->child; it; it = it->next)
            if (cJSON_IsString(it) && it->valuestring)
                explicit_bzero(it->valuestring, strlen(it->valuestring));
        cJSON_Delete(j);
    }
    if (!text) {
        close(dfd);
        return;
    }
    unsigned char rnd[12];
    char tmp[96], hex[25];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        explicit_bzero(text, strlen(text));
        free(text);
        close(dfd);
        return;
    }
    hfs3_hex(rnd, sizeof rnd, hex);
    snprintf(tmp, sizeof tmp, ".tmp.%s", hex);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t len = strlen(text);
    int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
    if (fd >= 0 && close(fd) < 0)
        ok = 0;
    if (ok && renameat(dfd, tmp, dfd, c->key) < 0)
        ok = 0;
    if (!ok) {
        hfs3_debug("credentials cache: could not store keys: %s", strerror(errno));
        if (fd >= 0)
            unlinkat(dfd, tmp, 0);
    }
    explicit_bzero(text, len);
    free(text);
    close(dfd);
}

/* ---------- the provider ---------- */

int hfs3_creds_get(hfs3_creds *c, hfs3_cred *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&c->mu);
    long long now = (long long)time(NULL);
    int rc = 0;
    int fresh = c->have && (!c->cur.expires || c->cur.expires - now > REFRESH_MARGIN);
    if (!fresh && c->have && hfs3_now() - c->last_try < RETRY_GAP && c->cur.expires > now) {
        fresh = 1; /* tried a moment ago: use what we have rather than ask again per request */
    }
    if (!fresh) {
        hfs3_cred k = {0};
        if (cache_read(c, &k)) {
            hfs3_debug("remote %s: %s: keys from the credentials cache", c->ctx, c->src->name);
        } else {
            c->last_try = hfs3_now();
            rc = credsrc_fetch(c->src, &k);
            if (rc < 0) {
                if (c->have && c->cur.expires > now + 10) {
                    if (!c->warned++)
                        hfs3_warn("remote %s: %s; using the current keys, valid %lld s more", c->ctx,
                                  hfs3_errmsg(), c->cur.expires - now);
                    rc = 0;
                    goto copy;
                }
                goto out; /* the caller names the remote */
            }
            if (k.access_key && k.expires)
                cache_write(c, &k);
            if (k.access_key)
                hfs3_debug("remote %s: %s: new keys%s", c->ctx, c->src->name, k.expires ? "" : " (no expiry)");
        }
        hfs3_cred_clear(&c->cur);
        c->cur = k;
        c->have = 1;
    }
copy:
    rc = cred_copy(out, &c->cur);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}
