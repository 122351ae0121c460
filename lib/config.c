/* config.c - turns a REMOTE string, the environment and the config files (rclone.conf, ~/.aws/credentials,
 * ~/.aws/config) into an hfs3_remote: bucket, prefix, endpoint, region, addressing, TLS and credentials.
 * Owns the small INI readers for those files. No network and no signing here; secrets are copied into the
 * struct and never into a message or a log line. */
#include "hfs3/config.h"
#include "hfs3/index.h"

#include "hfs3/creds.h"
#include "hfs3/explain.h"
#include "hfs3/log.h"
#include "hfs3/util.h"

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Config files are a few lines; anything this large is not one. */
#define CONF_MAX (1u << 20)

/* ---------- INI files ---------- */

/* One line of an INI file, pointing into the file's text (which the ini owns). */
typedef struct ini_ent {
    const char *sect; /* section name; "profile x" and "services y" have their inner blanks collapsed */
    const char *key;  /* NULL for the entry that records a section header */
    const char *sub;  /* AWS nested key ("s3 =" followed by indented "addressing_style = path"), else NULL */
    const char *val;
} ini_ent;

typedef struct ini {
    char *text;
    ini_ent *e;
    size_t n, cap;
    int found;     /* the file exists */
    int encrypted; /* an rclone config encrypted with a password */
} ini;

static void ini_free(ini *f)
{
    free(f->text);
    free(f->e);
    memset(f, 0, sizeof *f);
}

static int ini_push(ini *f, const char *sect, const char *key, const char *sub, const char *val)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 32;
        ini_ent *e = realloc(f->e, cap * sizeof *e);
        if (!e)
            return hfs3_err(-ENOMEM, "out of memory");
        f->e = e;
        f->cap = cap;
    }
    f->e[f->n++] = (ini_ent){sect, key, sub, val};
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* rclone's INI reader drops one pair of surrounding quotes (" or `). */
static char *unquote(char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && (v[0] == '"' || v[0] == '`') && v[n - 1] == v[0]) {
        v[n - 1] = 0;
        return v + 1;
    }
    return v;
}

/* "profile   x" -> "profile x", so that lookups can build the name with one blank. */
static void collapse_blanks(char *s)
{
    char *p = s;
    while (*p && *p != ' ' && *p != '\t')
        p++;
    if (!*p)
        return;
    char *q = p;
    while (*q == ' ' || *q == '\t')
        q++;
    *p = ' ';
    memmove(p + 1, q, strlen(q) + 1);
}

/* Loads path. A missing file reads as an empty one (found = 0), as rclone and the AWS tools treat it.
 * aws: Python configparser rules (indented "k = v" lines under a key with an empty value are nested keys);
 * otherwise rclone's rules (surrounding quotes dropped, the RCLONE_ENCRYPT_V0 marker noticed).
 * Errors: the read error with the path in the message. On error f holds nothing. */
static int ini_load(ini *f, const char *path, int aws)
{
    memset(f, 0, sizeof *f);
    size_t len;
    int rc = hfs3_read_file(path, CONF_MAX, &f->text, &len);
    if (rc == -ENOENT || rc == -ENOTDIR) {
        hfs3_err_clear();
        return 0;
    }
    if (rc < 0)
        return rc;
    /* a NUL would silently end the text here, and every later line (a second endpoint...) with it */
    const char *nul = memchr(f->text, 0, len);
    if (nul) {
        size_t at = (size_t)(nul - f->text);
        free(f->text);
        f->text = NULL;
        return hfs3_err(-EINVAL, "%s: a NUL byte at byte %zu: the file is damaged or not text", path, at);
    }
    f->found = 1;
    char *line = f->text;
    const char *sect = NULL, *parent = NULL;
    while (line && rc == 0) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl++ = 0;
        int indented = *line == ' ' || *line == '\t';
        char *s = trim(line);
        line = nl;
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (!aws && hfs3_starts_with(s, "RCLONE_ENCRYPT_V0:")) {
            f->encrypted = 1;
            continue;
        }
        if (*s == '[' && !(aws && indented && parent)) {
            char *end = strrchr(s, ']');
            if (!end)
                continue;
            *end = 0;
            char *name = trim(s + 1);
            if (aws)
                collapse_blanks(name);
            sect = name;
            parent = NULL;
            rc = ini_push(f, sect, NULL, NULL, NULL);
            continue;
        }
        char *eq = strpbrk(s, "=:");
        if (!eq || !sect)
            continue;
        *eq = 0;
        char *k = trim(s), *v = trim(eq + 1);
        if (aws && indented) {
            /* configparser reads other indented lines as continuations of the previous value, which
             * no setting we read uses: skip them */
            if (parent)
                rc = ini_push(f, sect, parent, k, v);
            continue;
        }
        if (!aws)
            v = unquote(v);
        rc = ini_push(f, sect, k, NULL, v);
        parent = aws && !*v ? k : NULL;
    }
    if (rc < 0)
        ini_free(f);
    return rc;
}

/* The last value of key (or key's nested sub) in sect; NULL when absent. Keys compare without case. */
static const char *ini_get(const ini *f, const char *sect, const char *key, const char *sub)
{
    for (size_t i = f->n; i-- > 0;) {
        const ini_ent *e = &f->e[i];
        if (!e->key || strcmp(e->sect, sect) != 0 || strcasecmp(e->key, key) != 0)
            continue;
        if (sub ? e->sub && strcasecmp(e->sub, sub) == 0 : !e->sub)
            return e->val;
    }
    return NULL;
}

static int ini_has(const ini *f, const char *sect)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->e[i].sect, sect) == 0)
            return 1;
    return 0;
}

/* ---------- small helpers ---------- */

/* An environment variable, NULL when unset or empty (the AWS tools treat both alike). */
static const char *envv(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static const char *nz(const char *v) { return v && *v ? v : NULL; }

static const char *home_dir(void)
{
    const char *h = envv("HOME");
    if (h)
        return h;
    struct passwd pw, *res = NULL;
    static _Thread_local char pwbuf[4096];
    if (getpwuid_r(getuid(), &pw, pwbuf, sizeof pwbuf, &res) == 0 && res && res->pw_dir)
        return res->pw_dir;
    return "/";
}

/* path with a leading "~/" replaced by the home directory; malloc'd, NULL on OOM. */
static char *expand_home(const char *path)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    int rc;
    if (strcmp(path, "~") == 0 || hfs3_starts_with(path, "~/"))
        rc = hfs3_buf_addf(&b, "%s%s", home_dir(), path + 1);
    else
        rc = hfs3_buf_adds(&b, path);
    if (rc < 0) {
        hfs3_buf_free(&b);
        return NULL;
    }
    return hfs3_buf_take(&b, NULL);
}

static char *home_path(const char *rel)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_buf_addf(&b, "%s/%s", home_dir(), rel) < 0)
        return NULL;
    return hfs3_buf_take(&b, NULL);
}

/* Replaces *dst with a copy of v (NULL stays NULL). -ENOMEM on OOM. */
static int set_str(char **dst, const char *v)
{
    char *c = NULL;
    if (v && !(c = strdup(v)))
        return hfs3_err(-ENOMEM, "out of memory");
    free(*dst);
    *dst = c;
    return 0;
}

/* Go's strconv.ParseBool, which rclone uses: 1 or 0, -1 when v is none of its spellings. */
static int parse_bool(const char *v)
{
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (strcmp(v, t[i]) == 0)
            return 1;
        if (strcmp(v, f[i]) == 0)
            return 0;
    }
    return -1;
}

/* The region goes into a host name and the signature's scope: keep it to characters that are safe there. */
static int check_region(const char *ctx, const char *region)
{
    for (const char *p = region; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return hfs3_err(-EINVAL, "remote %s: region '%s' has characters a region cannot have", ctx, region);
    return 0;
}

/* AWS's own endpoint for a region (China's regions live under amazonaws.com.cn). */
static int aws_endpoint(const char *region, char **out)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_buf_addf(&b, "https://s3.%s.amazonaws.com%s", region, hfs3_starts_with(region, "cn-") ? ".cn" : "") <
        0)
        return hfs3_err(-ENOMEM, "out of memory");
    free(*out);
    *out = hfs3_buf_take(&b, NULL);
    return 0;
}

/* Checks and normalises an endpoint into "scheme://host[:port]": lowercase scheme, no trailing '/'.
 * add_scheme: a value without "scheme://" gets https:// (rclone's S3 SDK does that: "minio:9000").
 * Errors: -EINVAL naming the endpoint and the cause. */
static int norm_endpoint(const char *ctx, const char *in, int add_scheme, char **out)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 4096);
    while (*in == ' ' || *in == '\t')
        in++;
    if (strchr(in, '@'))
        /* user info may hold a password: do not repeat the value */
        return hfs3_err(-EINVAL, "remote %s: the endpoint holds user info ('@'), which is not supported", ctx);
    const char *sep = strstr(in, "://");
    int rc = 0;
    if (!sep && add_scheme) {
        rc = hfs3_buf_addf(&b, "https://%s", in);
    } else if (sep && (size_t)(sep - in) == 4 && strncasecmp(in, "http", 4) == 0) {
        rc = hfs3_buf_addf(&b, "http%s", sep);
    } else if (sep && (size_t)(sep - in) == 5 && strncasecmp(in, "https", 5) == 0) {
        rc = hfs3_buf_addf(&b, "https%s", sep);
    } else {
        return hfs3_err(-EINVAL, "remote %s: endpoint '%s': only http:// and https:// endpoints are supported",
                        ctx, in);
    }
    if (rc < 0)
        return hfs3_err(rc, "remote %s: endpoint too long", ctx);
    const char *host = strstr(b.data, "://") + 3;
    size_t hoff = (size_t)(host - b.data);
    while (b.len > hoff && (b.data[b.len - 1] == '/' || b.data[b.len - 1] == ' ' || b.data[b.len - 1] == '\t'))
        b.data[--b.len] = 0;
    const char *bad = NULL;
    if (!*host || *host == ':')
        bad = "no host";
    else if (strpbrk(host, "/?# "))
        bad = "a path, query or blank after the host is not supported";
    if (bad) {
        rc = hfs3_err(-EINVAL, "remote %s: endpoint '%s': %s", ctx, b.data, bad);
        hfs3_buf_free(&b);
        return rc;
    }
    free(*out);
    *out = hfs3_buf_take(&b, NULL);
    return 0;
}

/* The host of a normalised endpoint, without the port, into out. */
static void endpoint_host(const char *ep, char *out, size_t n)
{
    const char *h = strstr(ep, "://");
    h = h ? h + 3 : ep;
    size_t len;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        len = e ? (size_t)(e - h) + 1 : strlen(h);
    } else {
        len = strcspn(h, ":");
    }
    if (len >= n)
        len = n - 1;
    memcpy(out, h, len);
    out[len] = 0;
}

static int is_aws_endpoint(const char *ep)
{
    char host[256];
    endpoint_host(ep, host, sizeof host);
    size_t n = strlen(host);
    static const char *const sfx[] = {".amazonaws.com", ".amazonaws.com.cn"};
    for (size_t i = 0; i < 2; i++) {
        size_t m = strlen(sfx[i]);
        if (n > m && strcasecmp(host + n - m, sfx[i]) == 0)
            return 1;
    }
    return 0;
}

/* Whether bucket can be a virtual host name: 3-63 of [a-z0-9.-], alphanumeric at both ends, no empty or
 * dash-edged labels, not an IPv4 address; with TLS no dots (AWS's wildcard certificate covers one label). */
static int dns_bucket(const char *bucket, int https)
{
    size_t n = strlen(bucket);
    if (n < 3 || n > 63 || !isalnum((unsigned char)bucket[0]) || !isalnum((unsigned char)bucket[n - 1]))
        return 0;
    int all_digits_dots = 1;
    for (size_t i = 0; i < n; i++) {
        char c = bucket[i];
        if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-' || c == '.'))
            return 0;
        if (c == '.' && (https || bucket[i + 1] == '.' || bucket[i + 1] == '-' || bucket[i - 1] == '-'))
            return 0;
        if (!isdigit((unsigned char)c) && c != '.')
            all_digits_dots = 0;
    }
    return !all_digits_dots;
}

/* ---------- AWS conventions: environment, ~/.aws/credentials, ~/.aws/config ---------- */

typedef struct aws_files {
    ini cred, conf;
    char *cred_path, *conf_path;
    char *profile;
    char *psect; /* "profile NAME", the config file's section */
    int explicit_profile;
} aws_files;

static void aws_free(aws_files *a)
{
    ini_free(&a->cred);
    ini_free(&a->conf);
    free(a->cred_path);
    free(a->conf_path);
    free(a->profile);
    free(a->psect);
}

/* Loads the shared credentials and config files. profile / cred_file override AWS_PROFILE and
 * AWS_SHARED_CREDENTIALS_FILE (rclone's `profile` and `shared_credentials_file`); NULL: from the environment. */
static int aws_load(aws_files *a, const char *profile, const char *cred_file)
{
    memset(a, 0, sizeof *a);
    const char *p = nz(profile) ? profile : envv("AWS_PROFILE");
    a->explicit_profile = p != NULL;
    a->profile = strdup(p ? p : "default");
    const char *cf = nz(cred_file) ? cred_file : envv("AWS_SHARED_CREDENTIALS_FILE");
    a->cred_path = cf ? expand_home(cf) : home_path(".aws/credentials");
    const char *kf = envv("AWS_CONFIG_FILE");
    a->conf_path = kf ? expand_home(kf) : home_path(".aws/config");
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (a->profile && hfs3_buf_addf(&b, "profile %s", a->profile) == 0)
        a->psect = hfs3_buf_take(&b, NULL);
    if (!a->profile || !a->cred_path || !a->conf_path || !a->psect)
        return hfs3_err(-ENOMEM, "out of memory");
    int rc = ini_load(&a->cred, a->cred_path, 1);
    if (rc == 0)
        rc = ini_load(&a->conf, a->conf_path, 1);
    return rc;
}

/* A setting of the profile in the config file ("[profile NAME]", or "[default]" for the default one). */
static const char *aws_conf(const aws_files *a, const char *key, const char *sub)
{
    const char *v = ini_get(&a->conf, a->psect, key, sub);
    if (!v && strcmp(a->profile, "default") == 0)
        v = ini_get(&a->conf, "default", key, sub);
    return nz(v);
}

static int aws_profile_exists(const aws_files *a)
{
    return ini_has(&a->cred, a->profile) || ini_has(&a->conf, a->psect) ||
           (strcmp(a->profile, "default") == 0 && ini_has(&a->conf, "default"));
}

/* creds.c reads the shared files through these: file 0 the credentials file, 1 the config file. */
static const char *files_get(void *ud, int file, const char *sect, const char *key, const char *sub)
{
    const aws_files *a = ud;
    return nz(ini_get(file ? &a->conf : &a->cred, sect, key, sub));
}

static int files_has(void *ud, int file, const char *sect)
{
    const aws_files *a = ud;
    return ini_has(file ? &a->conf : &a->cred, sect);
}

/* Credentials by the AWS chain (creds.h): static keys go into r, any other source becomes r->creds, asked
 * on the first request. Errors: -EINVAL for half a key pair or a profile hfs3 cannot use (SSO, MFA...). */
static int aws_creds(const aws_files *a, const char *ctx, hfs3_remote *r)
{
    hfs3_aws_files f = {files_get, files_has, (void *)a, a->cred_path, a->conf_path, a->profile};
    hfs3_cred k;
    int rc = hfs3_creds_plan(&f, ctx, &k, &r->creds);
    if (rc < 0)
        return rc;
    if (k.access_key) {
        r->access_key = k.access_key;
        r->secret_key = k.secret_key;
        r->session_token = k.session_token;
        /* for messages about refused keys: where they came from, never the keys */
        char desc[4400];
        if (envv("AWS_ACCESS_KEY_ID"))
            snprintf(desc, sizeof desc, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment");
        else
            snprintf(desc, sizeof desc, "AWS profile '%s' in %s", a->profile,
                     nz(ini_get(&a->cred, a->profile, "aws_access_key_id", NULL)) ? a->cred_path : a->conf_path);
        if ((rc = set_str(&r->cred_source, desc)) < 0)
            return rc;
    } else if (r->creds && (rc = set_str(&r->cred_source, hfs3_creds_source(r->creds))) < 0) {
        return rc;
    }
    return 0;
}

/* The addressing preference a config names: 1 path, 0 virtual, -1 none (auto). */
static int aws_addressing(const aws_files *a, const char *ctx, int *pref)
{
    const char *v = aws_conf(a, "s3", "addressing_style");
    *pref = -1;
    if (!v || strcmp(v, "auto") == 0)
        return 0;
    if (strcmp(v, "path") == 0)
        *pref = 1;
    else if (strcmp(v, "virtual") == 0)
        *pref = 0;
    else
        return hfs3_err(-EINVAL, "remote %s: addressing_style '%s' in %s: expected path, virtual or auto", ctx, v,
                        a->conf_path);
    return 0;
}

static int env_true(const char *name)
{
    const char *v = envv(name);
    return v && strcasecmp(v, "true") == 0;
}

/* The endpoint URL the AWS rules configure, or NULL: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
 * nested `s3 = endpoint_url`, its `services` section's s3 endpoint_url, its endpoint_url.
 * AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true turns them all off, as in the AWS SDKs. */
static const char *aws_endpoint_url(const aws_files *a)
{
    const char *ign = aws_conf(a, "ignore_configured_endpoint_urls", NULL);
    if (env_true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") || (ign && strcasecmp(ign, "true") == 0))
        return NULL;
    const char *v = envv("AWS_ENDPOINT_URL_S3");
    if (!v)
        v = envv("AWS_ENDPOINT_URL");
    if (!v)
        v = aws_conf(a, "s3", "endpoint_url");
    const char *svc = aws_conf(a, "services", NULL);
    if (!v && svc) {
        char sect[512];
        if ((size_t)snprintf(sect, sizeof sect, "services %s", svc) < sizeof sect)
            v = nz(ini_get(&a->conf, sect, "s3", "endpoint_url"));
    }
    if (!v)
        v = aws_conf(a, "endpoint_url", NULL);
    return v;
}

/* s3://bucket/prefix: everything from the AWS conventions. *pref: the config's addressing preference. */
static int parse_s3(hfs3_remote *r, int *pref)
{
    const char *ctx = r->spec;
    aws_files a;
    int rc = aws_load(&a, NULL, NULL);
    if (rc < 0)
        goto fail;
    if (a.explicit_profile && !aws_profile_exists(&a)) {
        rc = hfs3_err(-EINVAL, "remote %s: AWS profile '%s' not found in %s nor %s", ctx, a.profile, a.cred_path,
                      a.conf_path);
        goto fail;
    }
    if ((rc = aws_creds(&a, ctx, r)) < 0)
        goto fail;
    const char *region = envv("AWS_REGION");
    if (!region)
        region = envv("AWS_DEFAULT_REGION");
    if (!region)
        region = aws_conf(&a, "region", NULL);
    if (!region)
        region = "us-east-1";
    if ((rc = check_region(ctx, region)) < 0 || (rc = set_str(&r->region, region)) < 0)
        goto fail;
    const char *ep = aws_endpoint_url(&a);
    rc = ep ? norm_endpoint(ctx, ep, 0, &r->endpoint) : aws_endpoint(region, &r->endpoint);
    if (rc < 0)
        goto fail;
    const char *ca = envv("AWS_CA_BUNDLE");
    if (!ca)
        ca = aws_conf(&a, "ca_bundle", NULL);
    if (ca && !(r->ca_bundle = expand_home(ca))) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto fail;
    }
    rc = aws_addressing(&a, ctx, pref);
fail:
    aws_free(&a);
    return rc;
}

/* ---------- rclone remotes ---------- */

typedef struct rc_remote {
    const char *name;
    ini f;
    char *path;
    /* RCLONE_CONFIG_<NAME>_: rclone 1.60.1 keeps a '-' of the name (checked: RCLONE_CONFIG_MY-REMOTE_TYPE
     * defines my-remote, RCLONE_CONFIG_MY_REMOTE_TYPE does not); older releases turned it into '_', which
     * is also the only spelling a shell can export, so both are read, rclone's first */
    char env1[256], env2[256];
} rc_remote;

static void env_prefix(char *out, size_t n, const char *name, int dash_to_underscore)
{
    size_t len = (size_t)snprintf(out, n, "RCLONE_CONFIG_");
    for (const char *p = name; *p && len + 2 < n; p++) {
        char c = (char)toupper((unsigned char)*p);
        out[len++] = c == '-' && dash_to_underscore ? '_' : c;
    }
    out[len++] = '_';
    out[len] = 0;
}

/* rclone's order (checked with rclone 1.60.1): RCLONE_CONFIG_<NAME>_<KEY>, then RCLONE_S3_<KEY> (backend-wide;
 * not for `type`), then the config file. A variable that is set counts even when empty, as in rclone.
 * NULL when nowhere. */
static const char *rc_get(const rc_remote *c, const char *key)
{
    char var[512], ukey[128];
    size_t i;
    for (i = 0; key[i] && i + 1 < sizeof ukey; i++)
        ukey[i] = (char)toupper((unsigned char)key[i]);
    ukey[i] = 0;
    const char *v;
    snprintf(var, sizeof var, "%s%s", c->env1, ukey);
    if ((v = getenv(var)))
        return v;
    if (strcmp(c->env1, c->env2) != 0) {
        snprintf(var, sizeof var, "%s%s", c->env2, ukey);
        if ((v = getenv(var)))
            return v;
    }
    if (strcmp(key, "type") != 0) {
        snprintf(var, sizeof var, "RCLONE_S3_%s", ukey);
        if ((v = getenv(var)))
            return v;
    }
    return ini_get(&c->f, c->name, key, NULL);
}

/* Where rc_get found key, for messages: the variable's name, or the remote's section in the config file. */
static void rc_where(const rc_remote *c, const char *key, char *out, size_t n)
{
    char var[512], ukey[128];
    size_t i;
    for (i = 0; key[i] && i + 1 < sizeof ukey; i++)
        ukey[i] = (char)toupper((unsigned char)key[i]);
    ukey[i] = 0;
    const char *pre[] = {c->env1, c->env2, "RCLONE_S3_"};
    for (size_t k = 0; k < 3; k++) {
        snprintf(var, sizeof var, "%s%s", pre[k], ukey);
        if (getenv(var)) {
            snprintf(out, n, "%s in the environment (rclone remote '%s')", var, c->name);
            return;
        }
    }
    snprintf(out, n, "rclone remote '%s' in %s", c->name, c->path);
}

/* rclone looks for $RCLONE_CONFIG, else the first existing of $XDG_CONFIG_HOME/rclone/rclone.conf,
 * ~/.config/rclone/rclone.conf, ~/.rclone.conf (the first of those naming the file when none exists). */
static char *rclone_conf_path(void)
{
    const char *v = envv("RCLONE_CONFIG");
    if (v)
        return expand_home(v);
    char *cand[3] = {NULL, NULL, NULL};
    const char *xdg = envv("XDG_CONFIG_HOME");
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (xdg && hfs3_buf_addf(&b, "%s/rclone/rclone.conf", xdg) == 0)
        cand[0] = hfs3_buf_take(&b, NULL);
    cand[1] = home_path(".config/rclone/rclone.conf");
    cand[2] = home_path(".rclone.conf");
    char *pick = NULL;
    for (int i = 0; i < 3 && !pick; i++)
        if (cand[i] && access(cand[i], F_OK) == 0)
            pick = cand[i];
    if (!pick)
        pick = cand[0] ? cand[0] : cand[1];
    for (int i = 0; i < 3; i++)
        if (cand[i] != pick)
            free(cand[i]);
    return pick;
}

/* A boolean key: *out = default when absent or empty; -EINVAL for a value Go's ParseBool refuses. */
static int rc_bool(const rc_remote *c, const char *key, int dflt, int *out)
{
    const char *v = rc_get(c, key);
    *out = dflt;
    if (!v || !*v)
        return 0;
    int b = parse_bool(v);
    if (b < 0)
        return hfs3_err(-EINVAL, "remote %s: %s = '%s' is not a boolean (true or false)", c->name, key, v);
    *out = b;
    return 0;
}

/* Providers for which rclone 1.60.1 uses virtual-hosted addressing whatever force_path_style says (observed
 * from the Host header it sends; provider names compare with case, as in rclone). */
static int provider_virtual(const char *provider)
{
    static const char *const v[] = {"AWS", "Alibaba", "DigitalOcean", "Dreamhost", "HuaweiOBS", "LyveCloud",
                                    "Netease", "Qiniu", "RackCorp", "Scaleway", "Storj", "TencentCOS", "Wasabi"};
    for (size_t i = 0; provider && i < sizeof v / sizeof v[0]; i++)
        if (strcmp(provider, v[i]) == 0)
            return 1;
    return 0;
}

static int parse_rclone(hfs3_remote *r, const char *name, int *pref)
{
    rc_remote c;
    memset(&c, 0, sizeof c);
    c.name = name;
    env_prefix(c.env1, sizeof c.env1, name, 0);
    env_prefix(c.env2, sizeof c.env2, name, 1);
    aws_files a;
    memset(&a, 0, sizeof a);
    int rc = 0;
    if (!(c.path = rclone_conf_path())) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = ini_load(&c.f, c.path, 0)) < 0) {
        rc = hfs3_err_wrap(rc, "remote %s: rclone config", name);
        goto fail;
    }
    const char *type = rc_get(&c, "type");
    if (!type && c.f.encrypted) {
        rc = hfs3_err(-EINVAL,
                      "remote %s: rclone config %s is encrypted, which hfs3 cannot read; define the remote with "
                      "%sTYPE and the other %s* variables, or use an unencrypted config",
                      name, c.path, c.env1, c.env1);
        goto fail;
    }
    if (!type) {
        /* "s3:/bucket" or "s3:bucket" is a misspelt s3:// far more often than a remote named s3 */
        char hint[600] = "";
        if (!strcmp(name, "s3"))
            snprintf(hint, sizeof hint, "; did you mean s3://%.500s?", r->spec + 3 + strspn(r->spec + 3, "/"));
        if (!c.f.found && envv("RCLONE_CONFIG"))
            rc = hfs3_err(-EINVAL, "remote %s: the rclone config file %s (RCLONE_CONFIG) does not exist, and %sTYPE "
                          "is not set: fix RCLONE_CONFIG or define the remote with %s* variables%s", name, c.path,
                          c.env1, c.env1, hint);
        else
            rc = hfs3_err(-EINVAL, "remote %s: not found in rclone config %s%s (nor %sTYPE)%s", name, c.path,
                          c.f.found ? "" : ", which does not exist", c.env1, hint);
        goto fail;
    }
    if (strcmp(type, "s3") != 0) {
        /* hfs3 speaks the S3 API only: say what does work, and the way across for the rest */
        rc = hfs3_err(-EINVAL,
                      "remote %s: type %s is not s3: hfs3 reads S3 and S3-compatible stores only (an rclone remote "
                      "of type s3, any provider, or s3://); use the store's S3 endpoint if it has one, or copy the "
                      "model into an S3 bucket (rclone copy %s:PATH S3REMOTE:PATH)",
                      name, type, name);
        goto fail;
    }
    const char *provider = nz(rc_get(&c, "provider"));
    int env_auth, fps;
    if ((rc = rc_bool(&c, "env_auth", 0, &env_auth)) < 0 || (rc = rc_bool(&c, "force_path_style", 1, &fps)) < 0)
        goto fail;

    /* rclone: static keys first; else env_auth's AWS chain; else both empty means anonymous */
    const char *ak = nz(rc_get(&c, "access_key_id")), *sk = nz(rc_get(&c, "secret_access_key"));
    if (ak && sk) {
        if ((rc = set_str(&r->access_key, ak)) < 0 || (rc = set_str(&r->secret_key, sk)) < 0 ||
            (rc = set_str(&r->session_token, nz(rc_get(&c, "session_token")))) < 0)
            goto fail;
        char desc[4400];
        rc_where(&c, "secret_access_key", desc, sizeof desc);
        if ((rc = set_str(&r->cred_source, desc)) < 0)
            goto fail;
    } else if (env_auth) {
        if ((rc = aws_load(&a, rc_get(&c, "profile"), rc_get(&c, "shared_credentials_file"))) < 0 ||
            (rc = aws_creds(&a, name, r)) < 0)
            goto fail;
    } else if (ak || sk) {
        rc = hfs3_err(-EINVAL, "remote %s: %s is set but %s is not", name, ak ? "access_key_id" : "secret_access_key",
                      ak ? "secret_access_key" : "access_key_id");
        goto fail;
    }

    const char *region = nz(rc_get(&c, "region"));
    if (!region)
        region = "us-east-1";
    if ((rc = check_region(name, region)) < 0 || (rc = set_str(&r->region, region)) < 0)
        goto fail;
    const char *ep = nz(rc_get(&c, "endpoint"));
    rc = ep ? norm_endpoint(name, ep, 1, &r->endpoint) : aws_endpoint(region, &r->endpoint);
    if (rc < 0)
        goto fail;
    /* rclone's CA file is the global --ca-cert (RCLONE_CA_CERT); its AWS SDK also honours AWS_CA_BUNDLE */
    const char *ca = nz(rc_get(&c, "ca_cert"));
    if (!ca)
        ca = envv("RCLONE_CA_CERT");
    if (!ca)
        ca = envv("AWS_CA_BUNDLE");
    if (ca && !(r->ca_bundle = expand_home(ca))) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto fail;
    }
    *pref = provider_virtual(provider) ? 0 : fps;
fail:
    aws_free(&a);
    ini_free(&c.f);
    free(c.path);
    return rc;
}

/* ---------- the REMOTE string ---------- */

/* path = "bucket[/prefix]": the bucket up to the first '/', the prefix without leading or trailing '/'. */
static int split_bucket(hfs3_remote *r, const char *path)
{
    size_t bl = strcspn(path, "/");
    if (bl == 0)
        return hfs3_err(-EINVAL, "remote %s: no bucket (expected name:bucket/prefix or s3://bucket/prefix)",
                        r->spec);
    const char *p = path + bl;
    while (*p == '/')
        p++;
    size_t pl = strlen(p);
    while (pl && p[pl - 1] == '/')
        pl--;
    if (!(r->bucket = strndup(path, bl)) || !(r->prefix = strndup(p, pl)))
        return hfs3_err(-ENOMEM, "out of memory");
    /* "." and ".." segments: a URL path with them is normalised by HTTP stacks, so what is signed and what
     * a server or proxy resolves could name different objects; no S3 prefix needs them */
    for (const char *c = path; *c;) {
        size_t cl = strcspn(c, "/");
        if ((cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.'))
            return hfs3_err(-EINVAL, "remote %s: the path has a '%.*s' segment, which is not supported (name the "
                            "prefix without '.' and '..')", r->spec, (int)cl, c);
        c += cl;
        while (*c == '/')
            c++;
    }
    return 0;
}

/* Applies HFS3_S3_ADDRESSING (mode), the config's preference (pref: 1 path, 0 virtual, -1 auto) and the
 * bucket name's limits. */
static void choose_addressing(hfs3_remote *r, int mode, int pref)
{
    if (mode == 1)
        r->path_style = 1;
    else if (mode == 2)
        r->path_style = 0;
    else if (pref >= 0)
        r->path_style = pref;
    else
        r->path_style = !is_aws_endpoint(r->endpoint);
    if (!r->path_style && !dns_bucket(r->bucket, hfs3_starts_with(r->endpoint, "https://"))) {
        hfs3_debug("remote %s: bucket '%s' cannot be a host name: path-style addressing", r->spec, r->bucket);
        r->path_style = 1;
    }
}

static void warn_tls_once(void)
{
    static atomic_int warned;
    if (!atomic_exchange(&warned, 1))
        hfs3_warn("HFS3_TLS_VERIFY=0: TLS certificates are not checked");
}

int hfs3_remote_parse(const char *spec, hfs3_remote **out)
{
    *out = NULL;
    int rc, mode = 0, pref = -1;
    hfs3_remote *r = calloc(1, sizeof *r);
    if (!r || !(r->spec = strdup(spec))) {
        free(r);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    r->tls_verify = 1;

    const char *am = envv("HFS3_S3_ADDRESSING");
    if (am && strcmp(am, "path") == 0)
        mode = 1;
    else if (am && strcmp(am, "virtual") == 0)
        mode = 2;
    else if (am && strcmp(am, "auto") != 0) {
        rc = hfs3_err(-EINVAL, "HFS3_S3_ADDRESSING='%s': expected path, virtual or auto", am);
        goto fail;
    }
    /* 1/0, true/false, yes/no, on/off; anything else warns once and keeps the checks on */
    r->tls_verify = hfs3_env_bool("HFS3_TLS_VERIFY", 1);

    const char *colon = strchr(spec, ':');
    int namelen;
    if (hfs3_remote_connstr(spec, &namelen)) {
        /* rclone's connection strings (name,key=value,...:bucket/p) carry secrets: nothing after the comma
         * is repeated, here or anywhere (r->spec is in every later message); the shim refuses them too */
        rc = hfs3_err(-EINVAL, HFS3_CONNSTR_MSG, namelen, spec);
        memset(r->spec, 0, strlen(r->spec));
        goto fail;
    }
    if (hfs3_starts_with(spec, "s3://")) {
        if ((rc = split_bucket(r, spec + 5)) < 0 || (rc = parse_s3(r, &pref)) < 0)
            goto fail;
    } else if (colon && colon != spec && !memchr(spec, '/', (size_t)(colon - spec)) &&
               !hfs3_starts_with(colon + 1, "//")) {
        char *name = strndup(spec, (size_t)(colon - spec));
        if (!name) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            goto fail;
        }
        /* rclone's S3 backend trims the root's slashes: name:/bucket/p is name:bucket/p (name://... is not a
         * remote, see above) */
        rc = split_bucket(r, colon + 1 + (colon[1] == '/'));
        if (rc == 0)
            rc = parse_rclone(r, name, &pref);
        free(name);
        if (rc < 0)
            goto fail;
    } else {
        rc = hfs3_err(-EINVAL, "REMOTE '%s': expected name:bucket/prefix or s3://bucket/prefix", spec);
        goto fail;
    }
    choose_addressing(r, mode, pref);
    if (r->creds && (rc = hfs3_creds_set_net(r->creds, r->region, r->ca_bundle, r->tls_verify)) < 0)
        goto fail;
    if (!r->tls_verify)
        warn_tls_once();
    hfs3_debug("remote %s: bucket %s, prefix '%s', endpoint %s, region %s, %s-style, %s", spec, r->bucket,
               r->prefix, r->endpoint, r->region, r->path_style ? "path" : "virtual",
               r->creds ? hfs3_creds_source(r->creds) : r->access_key ? "signed" : "anonymous");
    *out = r;
    return 0;
fail:
    hfs3_remote_free(r);
    return rc;
}

/* Frees every field; the secrets are wiped first so they do not linger in freed heap memory. */
void hfs3_remote_free(hfs3_remote *r)
{
    if (!r)
        return;
    char *secrets[] = {r->secret_key, r->session_token};
    for (size_t i = 0; i < 2; i++)
        if (secrets[i])
            explicit_bzero(secrets[i], strlen(secrets[i]));
    free(r->spec);
    free(r->bucket);
    free(r->prefix);
    free(r->endpoint);
    free(r->region);
    free(r->access_key);
    free(r->secret_key);
    free(r->session_token);
    free(r->ca_bundle);
    hfs3_creds_free(r->creds);
    free(r->cred_source);
    free(r);
}

char *hfs3_remote_key(const hfs3_remote *r, const char *rel)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    int rc = *r->prefix ? hfs3_buf_addf(&b, "%s/%s", r->prefix, rel) : hfs3_buf_adds(&b, rel);
    if (rc < 0)
        return NULL;
    return hfs3_buf_take(&b, NULL);
}

char *hfs3_remote_manifest_key(const hfs3_remote *r) { return hfs3_remote_key(r, ".hfs3/manifest.json"); }

char *hfs3_remote_identity(const hfs3_remote *r)
{
    /* r->endpoint is norm_endpoint's "scheme://host[:port]" (scheme already in lower case) */
    if (!r->endpoint || !r->bucket || !r->prefix)
        return NULL;
    const char *ep = r->endpoint, *sep = strstr(ep, "://");
    const char *host = sep ? sep + 3 : ep;
    size_t hl = *host == '[' && strchr(host, ']') ? (size_t)(strchr(host, ']') - host) + 1 : strcspn(host, ":");
    const char *port = host[hl] == ':' ? host + hl + 1 : "";
    while (*port == '0' && port[1]) /* ":0080" is port 80 */
        port++;
    int https = sep && (size_t)(sep - ep) == 5;
    if (!strcmp(port, https ? "443" : "80"))
        port = "";
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    int rc = hfs3_buf_addf(&b, "%.*s", (int)(host - ep), ep);
    for (size_t i = 0; rc == 0 && i < hl; i++)
        rc = hfs3_buf_addf(&b, "%c", (char)tolower((unsigned char)host[i]));
    if (rc == 0 && *port)
        rc = hfs3_buf_addf(&b, ":%s", port);
    if (rc == 0)
        rc = hfs3_buf_addf(&b, "/%s%s%s", r->bucket, *r->prefix ? "/" : "", r->prefix);
    if (rc < 0) {
        hfs3_buf_free(&b);
        return NULL;
    }
    return hfs3_buf_take(&b, NULL);
}
