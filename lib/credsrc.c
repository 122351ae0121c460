/* credsrc.c - asks one credential source for keys: STS AssumeRole (SigV4-signed) and AssumeRoleWithWebIdentity
 * (unsigned) with their XML replies parsed by expat, the container credentials endpoint (ECS, EKS Pod
 * Identity), IMDSv2 (token PUT, role name, role credentials) and credential_process (run without a shell,
 * its JSON read with cJSON). Messages start with the source's name and never hold a secret or a token. */
#include "creds_int.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <expat.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/log.h"
#include "hfs3/s3xml.h"
#include "hfs3/sigv4.h"
#include "hfs3/util.h"

#define REPLY_MAX (1u << 20)   /* an STS or metadata reply is a few KiB */
#define TOKEN_MAX (64u << 10)  /* a web identity token or an authorization token file */
#define STDERR_KEEP 512        /* what a failing credential_process said, for the one line */

extern char **environ;

void credsrc_free(credsrc *s)
{
    if (!s)
        return;
    hfs3_cred_clear(&s->keys);
    free(s->role_arn);
    free(s->session_name);
    free(s->external_id);
    free(s->duration);
    free(s->token_file);
    free(s->command);
    free(s->uri);
    if (s->auth)
        explicit_bzero(s->auth, strlen(s->auth));
    free(s->auth);
    free(s->auth_file);
    free(s->imds_endpoint);
    free(s->sts_endpoint);
    free(s->region);
    free(s->ca_bundle);
    credsrc_free(s->source);
    free(s);
}

/* ---------- small parsers ---------- */

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return -1;
        v = v * 10 + (**p - '0');
    }
    *out = v;
    return 0;
}

int credsrc_parse_time(const char *s, long long *out)
{
    if (!s)
        return -EINVAL;
    char buf[40];
    size_t n = strlen(s);
    if (n < 20 || n >= sizeof buf)
        return -EINVAL;
    /* split off the zone: Z, or +HH:MM / -HH:MM after the seconds (and fraction) */
    memcpy(buf, s, n + 1);
    long off = 0;
    char *z = buf + 19;
    if (*z == '.')
        for (z++; *z >= '0' && *z <= '9'; z++) {
        }
    if ((*z == '+' || *z == '-') && strlen(z) == 6 && z[3] == ':') {
        int hh, mm;
        const char *p = z + 1;
        if (digits(&p, 2, &hh) || *p++ != ':' || digits(&p, 2, &mm) || hh > 23 || mm > 59)
            return -EINVAL;
        off = (hh * 3600L + mm * 60L) * (*z == '+' ? 1 : -1);
        z[0] = 'Z';
        z[1] = 0;
    }
    long long t;
    if (hfs3_s3xml_parse_time(buf, &t) < 0)
        return -EINVAL;
    *out = t - off;
    return 0;
}

int credsrc_split(const char *cmd, char ***argv)
{
    *argv = NULL;
    size_t n = strlen(cmd), words = 0;
    /* worst case: every other character starts a word */
    char **v = malloc((n / 2 + 2) * sizeof *v + n + 1 + n / 2 + 1);
    if (!v)
        return hfs3_err(-ENOMEM, "out of memory");
    char *out = (char *)(v + n / 2 + 2), *w = NULL;
    const char *p = cmd;
    while (*p) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            if (w) {
                *out++ = 0;
                w = NULL;
            }
            p++;
            continue;
        }
        if (!w)
            v[words++] = w = out;
        if (*p == '\'') {
            const char *e = strchr(p + 1, '\'');
            if (!e)
                goto open_quote;
            memcpy(out, p + 1, (size_t)(e - p - 1));
            out += e - p - 1;
            p = e + 1;
        } else if (*p == '"') {
            for (p++; *p != '"'; p++) {
                if (!*p)
                    goto open_quote;
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                    p++;
                *out++ = *p;
            }
            p++;
        } else if (*p == '\\') {
            if (!p[1])
                goto open_quote;
            *out++ = p[1];
            p += 2;
        } else {
            *out++ = *p++;
        }
    }
    if (w)
        *out++ = 0;
    v[words] = NULL;
    if (!words) {
        free(v);
        return hfs3_err(-EINVAL, "empty command");
    }
    *argv = v;
    return 0;
open_quote:
    free(v);
    return hfs3_err(-EINVAL, "unbalanced quote or trailing backslash in the command");
}

/* Control characters would break the one-line message; long texts are cut. */
static void one_line(char *s, size_t max)
{
    if (!s)
        return;
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    if (strlen(s) > max)
        strcpy(s + max - 3, "...");
}

/* ---------- HTTP ---------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_body(char *p, size_t sz, size_t nm, void *ud)
{
    return hfs3_buf_add(ud, p, sz * nm) < 0 ? 0 : sz * nm;
}

/* One request: method, url, extra headers (NULL-terminated), body or NULL. *status gets the HTTP status,
 * out the reply body (capped). Transport errors: -ETIMEDOUT, -ECONNREFUSED or -EIO with curl's reason. */
static int http(const credsrc *s, const char *method, const char *url, const char *const *hdrs, const char *body,
                long connect_ms, long total_ms, long *status, hfs3_buf *out)
{
    pthread_once(&curl_once, curl_init);
    *status = 0;
    hfs3_buf_init(out, REPLY_MAX);
    CURL *h = curl_easy_init();
    if (!h)
        return hfs3_err(-ENOMEM, "%s: curl_easy_init failed", s->name);
    struct curl_slist *l = NULL;
    int rc = 0;
    for (size_t i = 0; hdrs && hdrs[i] && !rc; i++) {
        struct curl_slist *n = curl_slist_append(l, hdrs[i]);
        if (!n)
            rc = hfs3_err(-ENOMEM, "%s: out of memory", s->name);
        else
            l = n;
    }
    struct curl_slist *n = rc ? NULL : curl_slist_append(l, "Expect:");
    if (!rc && !n)
        rc = hfs3_err(-ENOMEM, "%s: out of memory", s->name);
    if (n)
        l = n;
    char errbuf[CURL_ERROR_SIZE] = "";
    if (!rc) {
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, s->tls_verify ? 1L : 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, s->tls_verify ? 2L : 0L);
        if (s->ca_bundle)
            curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_bundle);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "hfs3/" HFS3_VERSION);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
        if (s->kind == SRC_IMDS || s->kind == SRC_CONTAINER)
            curl_easy_setopt(h, CURLOPT_NOPROXY, "*"); /* link-local metadata, never through a proxy; STS is */
        if (body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        }
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (!strcmp(method, "PUT") && !body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
        }
        hfs3_debug("%s: %s %s", s->name, method, url);
        CURLcode cc = curl_easy_perform(h);
        if (cc != CURLE_OK) {
            one_line(errbuf, 200);
            rc = hfs3_err(cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                          : cc == CURLE_COULDNT_CONNECT  ? -ECONNREFUSED
                                                         : -EIO,
                          "%s: %s %s: %s%s%s", s->name, method, url, curl_easy_strerror(cc), *errbuf ? ": " : "",
                          errbuf);
        } else {
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        }
    }
    curl_slist_free_all(l);
    curl_easy_cleanup(h);
    if (rc < 0)
        hfs3_buf_free(out);
    return rc;
}

/* ---------- STS ---------- */

/* "scheme://authority[/path]" -> the authority (Host header) and the path ("/" when none). */
static int split_url(const char *url, char *host, size_t hn, const char **path)
{
    const char *a = strstr(url, "://");
    if (!a)
        return -EINVAL;
    a += 3;
    size_t len = strcspn(a, "/?#");
    if (!len || len >= hn)
        return -EINVAL;
    memcpy(host, a, len);
    host[len] = 0;
    *path = a[len] == '/' ? a + len : "/";
    return 0;
}

/* The XML elements STS replies carry, found anywhere in the document. */
enum { X_AK, X_SK, X_TOK, X_EXP, X_CODE, X_MSG, X_N };
static const char *const xnames[X_N] = {"AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration", "Code",
                                        "Message"};

typedef struct stsx {
    char *v[X_N];
    int cur;
    hfs3_buf text;
} stsx;

static const char *local_name(const char *n)
{
    const char *c = strrchr(n, ':');
    return c ? c + 1 : n;
}

static void XMLCALL x_start(void *ud, const char *name, const char **atts)
{
    stsx *x = ud;
    x->cur = -1;
    for (int i = 0; i < X_N; i++)
        if (!strcmp(local_name(name), xnames[i]))
            x->cur = i;
    hfs3_buf_reset(&x->text);
}

static void XMLCALL x_text(void *ud, const char *s, int len)
{
    stsx *x = ud;
    if (x->cur >= 0)
        hfs3_buf_add(&x->text, s, (size_t)len);
}

static void XMLCALL x_end(void *ud, const char *name)
{
    stsx *x = ud;
    if (x->cur >= 0 && !x->v[x->cur])
        x->v[x->cur] = hfs3_strdup(hfs3_buf_str(&x->text));
    x->cur = -1;
}

static void stsx_free(stsx *x)
{
    for (int i = 0; i < X_N; i++) {
        if (x->v[i])
            explicit_bzero(x->v[i], strlen(x->v[i]));
        free(x->v[i]);
    }
    if (x->text.data)
        explicit_bzero(x->text.data, x->text.len);
    hfs3_buf_free(&x->text);
}

static int parse_sts(const char *xml, size_t n, stsx *x)
{
    memset(x, 0, sizeof *x);
    x->cur = -1;
    hfs3_buf_init(&x->text, REPLY_MAX);
    XML_Parser p = XML_ParserCreateNS(NULL, ':');
    if (!p)
        return -ENOMEM;
    XML_SetUserData(p, x);
    XML_SetElementHandler(p, x_start, x_end);
    XML_SetCharacterDataHandler(p, x_text);
    int ok = XML_Parse(p, xml, (int)n, 1) == XML_STATUS_OK;
    XML_ParserFree(p);
    return ok ? 0 : -EINVAL;
}

static int add_form(hfs3_buf *b, const char *k, const char *v)
{
    if (!v)
        return 0;
    if ((b->len && hfs3_buf_addc(b, '&')) || hfs3_buf_adds(b, k) || hfs3_buf_addc(b, '=') ||
        hfs3_uri_encode(b, v, strlen(v), 0) < 0)
        return -ENOMEM;
    return 0;
}

/* The STS URL: the configured one, else the regional endpoint. */
static int sts_url(const credsrc *s, hfs3_buf *u)
{
    hfs3_buf_init(u, 0);
    const char *region = s->region ? s->region : "us-east-1";
    int rc = s->sts_endpoint ? hfs3_buf_adds(u, s->sts_endpoint)
                             : hfs3_buf_addf(u, "https://sts.%s.amazonaws.com%s", region,
                                             hfs3_starts_with(region, "cn-") ? ".cn" : "");
    return rc < 0 ? hfs3_err(-ENOMEM, "out of memory") : 0;
}

/* One STS request; *retry is set when trying again may help (no answer, 5xx, throttling). */
static int sts_once(const credsrc *s, hfs3_buf *form, const hfs3_cred *signer, hfs3_cred *out, int *retry)
{
    *retry = 0;
    hfs3_buf url, reply;
    char host[512], date[17], payload[65];
    const char *path;
    int rc = sts_url(s, &url);
    if (rc < 0)
        goto wipe;
    if (split_url(url.data, host, sizeof host, &path) < 0) {
        rc = hfs3_err(-EINVAL, "%s: STS endpoint '%s' is not a URL", s->name, url.data);
        goto wipe;
    }
    hfs3_amz_date((long long)time(NULL), date);
    hfs3_sha256_hexof(form->data, form->len, payload);
    hfs3_buf hb[6];
    const char *hdrs[7] = {NULL};
    size_t nh = 0;
    for (size_t i = 0; i < 6; i++)
        hfs3_buf_init(&hb[i], 0);
    static const char ctype[] = "application/x-www-form-urlencoded; charset=utf-8";
    if (hfs3_buf_addf(&hb[nh], "Content-Type: %s", ctype) < 0) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto done;
    }
    hdrs[nh] = hb[nh].data, nh++;
    if (signer) {
        /* botocore signs Host, Content-Type, X-Amz-Date (and the token); x-amz-content-sha256 is added for
         * servers that read the payload hash from it (RGW), STS accepts it */
        hfs3_kv h[5] = {{"Host", host}, {"Content-Type", ctype}, {"X-Amz-Date", date},
                        {"X-Amz-Content-Sha256", payload}, {"X-Amz-Security-Token", signer->session_token}};
        size_t n = signer->session_token ? 5 : 4;
        hfs3_sigv4_request sr = {.method = "POST", .path = path, .normalize_path = 1, .headers = h, .nheaders = n,
                                 .payload_hash = payload};
        hfs3_sigv4_key k = {.access_key = signer->access_key, .secret_key = signer->secret_key,
                            .region = s->region ? s->region : "us-east-1", .service = "sts", .amz_date = date};
        if (hfs3_buf_addf(&hb[nh], "X-Amz-Date: %s", date) < 0 ||
            hfs3_buf_addf(&hb[nh + 1], "X-Amz-Content-Sha256: %s", payload) < 0 ||
            (signer->session_token &&
             hfs3_buf_addf(&hb[nh + 2], "X-Amz-Security-Token: %s", signer->session_token) < 0) ||
            hfs3_buf_adds(&hb[nh + 3], "Authorization: ") < 0 || hfs3_sigv4_authorization(&sr, &k, &hb[nh + 3]) < 0) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            goto done;
        }
        size_t first = nh;
        for (size_t i = first; i < first + 4; i++)
            if (hb[i].len)
                hdrs[nh++] = hb[i].data;
    }
    long status;
    if ((rc = http(s, "POST", url.data, hdrs, form->data, 3000, 30000, &status, &reply)) < 0) {
        *retry = 1;
        goto done;
    }
    stsx x;
    int prc = parse_sts(hfs3_buf_str(&reply), reply.len, &x);
    if (status == 200 && prc == 0 && x.v[X_AK] && x.v[X_SK] && x.v[X_TOK] && x.v[X_EXP]) {
        long long exp;
        if (credsrc_parse_time(x.v[X_EXP], &exp) < 0) {
            one_line(x.v[X_EXP], 64);
            rc = hfs3_err(-EIO, "%s: STS sent Expiration '%s', not an ISO 8601 time", s->name, x.v[X_EXP]);
        } else {
            out->access_key = x.v[X_AK];
            out->secret_key = x.v[X_SK];
            out->session_token = x.v[X_TOK];
            x.v[X_AK] = x.v[X_SK] = x.v[X_TOK] = NULL;
            out->expires = exp;
        }
    } else if (status == 200) {
        rc = hfs3_err(-EIO, "%s: STS answered 200 without credentials", s->name);
    } else {
        one_line(x.v[X_CODE], 100);
        one_line(x.v[X_MSG], 300);
        int code = status == 400 || status == 401 || status == 403 ? -EACCES : -EIO;
        *retry = status >= 500 || (x.v[X_CODE] && (!strcmp(x.v[X_CODE], "Throttling") ||
                                                   !strcmp(x.v[X_CODE], "IDPCommunicationError")));
        if (prc == 0 && x.v[X_CODE] && x.v[X_MSG] && *x.v[X_MSG])
            rc = hfs3_err(code, "%s: %s: %s", s->name, x.v[X_CODE], x.v[X_MSG]);
        else if (prc == 0 && x.v[X_CODE])
            rc = hfs3_err(code, "%s: %s (HTTP %ld from STS %s)", s->name, x.v[X_CODE], status, url.data);
        else
            rc = hfs3_err(code, "%s: STS %s answered HTTP %ld", s->name, url.data, status);
    }
    stsx_free(&x);
    hfs3_buf_free(&reply);
done:
    for (size_t i = 0; i < 6; i++) {
        if (hb[i].data)
            explicit_bzero(hb[i].data, hb[i].len);
        hfs3_buf_free(&hb[i]);
    }
    hfs3_buf_free(&url);
wipe:
    return rc;
}

/* STS with up to 3 attempts (botocore retries STS too), 0.2 s then 0.4 s apart. */
static int sts_call(const credsrc *s, hfs3_buf *form, const hfs3_cred *signer, hfs3_cred *out)
{
    int rc, retry;
    for (int attempt = 1;; attempt++) {
        rc = sts_once(s, form, signer, out, &retry);
        if (rc == 0 || !retry || attempt >= 3)
            return rc;
        hfs3_info("%s: %s; trying again", s->name, hfs3_errmsg());
        usleep(200000u << (attempt - 1));
    }
}

static char *session_name(const credsrc *s)
{
    if (s->session_name)
        return hfs3_strdup(s->session_name);
    char b[48];
    snprintf(b, sizeof b, "hfs3-session-%lld", (long long)time(NULL));
    return hfs3_strdup(b);
}

static int fetch_webid(const credsrc *s, hfs3_cred *out)
{
    char *tok = NULL;
    size_t len;
    int rc = hfs3_read_file(s->token_file, TOKEN_MAX, &tok, &len);
    if (rc < 0)
        return hfs3_err_wrap(rc, "%s: token file", s->name);
    while (len && (tok[len - 1] == '\n' || tok[len - 1] == '\r' || tok[len - 1] == ' '))
        tok[--len] = 0;
    char *sn = session_name(s);
    hfs3_buf form;
    hfs3_buf_init(&form, 0);
    if (!len) {
        rc = hfs3_err(-EINVAL, "%s: token file %s is empty", s->name, s->token_file);
    } else if (!sn || add_form(&form, "Action", "AssumeRoleWithWebIdentity") ||
               add_form(&form, "DurationSeconds", s->duration) || add_form(&form, "RoleArn", s->role_arn) ||
               add_form(&form, "RoleSessionName", sn) || add_form(&form, "Version", "2011-06-15") ||
               add_form(&form, "WebIdentityToken", tok)) {
        rc = hfs3_err(-ENOMEM, "out of memory");
    } else {
        rc = sts_call(s, &form, NULL, out);
    }
    explicit_bzero(tok, len);
    free(tok);
    free(sn);
    if (form.data)
        explicit_bzero(form.data, form.len);
    hfs3_buf_free(&form);
    return rc;
}

static int fetch_role(const credsrc *s, hfs3_cred *out)
{
    hfs3_cred src = {0};
    int rc = credsrc_fetch(s->source, &src);
    if (rc < 0)
        return hfs3_err_wrap(rc, "%s: source", s->name);
    if (!src.access_key) {
        hfs3_cred_clear(&src);
        return hfs3_err(-EACCES, "%s: the source (%s) has no credentials", s->name, s->source->name);
    }
    char *sn = session_name(s);
    hfs3_buf form;
    hfs3_buf_init(&form, 0);
    if (!sn || add_form(&form, "Action", "AssumeRole") || add_form(&form, "DurationSeconds", s->duration) ||
        add_form(&form, "ExternalId", s->external_id) || add_form(&form, "RoleArn", s->role_arn) ||
        add_form(&form, "RoleSessionName", sn) || add_form(&form, "Version", "2011-06-15"))
        rc = hfs3_err(-ENOMEM, "out of memory");
    else
        rc = sts_call(s, &form, &src, out);
    hfs3_cred_clear(&src);
    free(sn);
    hfs3_buf_free(&form);
    return rc;
}

/* ---------- JSON credentials (container endpoint, IMDS, credential_process) ---------- */

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring && *v->valuestring ? v->valuestring : NULL;
}

/* Takes AccessKeyId, SecretAccessKey, tok_key and Expiration from a JSON document. need_exp: the source
 * always sends an Expiration (metadata endpoints); credential_process may leave it out. */
static int json_creds(const credsrc *s, const char *text, size_t n, const char *tok_key, int need_exp,
                      hfs3_cred *out)
{
    cJSON *j = cJSON_ParseWithLength(text, n);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return hfs3_err(-EIO, "%s: the reply is not a JSON object", s->name);
    }
    int rc = 0;
    const char *ak = jstr(j, "AccessKeyId"), *sk = jstr(j, "SecretAccessKey"), *tok = jstr(j, tok_key);
    const char *exp = jstr(j, "Expiration");
    long long t = 0;
    if (!ak || !sk)
        rc = hfs3_err(-EIO, "%s: the reply lacks %s", s->name, ak ? "SecretAccessKey" : "AccessKeyId");
    else if ((exp || need_exp) && credsrc_parse_time(exp, &t) < 0)
        rc = hfs3_err(-EIO, "%s: the reply's Expiration is missing or not an ISO 8601 time", s->name);
    else if (!(out->access_key = hfs3_strdup(ak)) || !(out->secret_key = hfs3_strdup(sk)) ||
             (tok && !(out->session_token = hfs3_strdup(tok))))
        rc = hfs3_err(-ENOMEM, "out of memory");
    out->expires = t;
    if (rc < 0)
        hfs3_cred_clear(out);
    /* wipe the secrets in the parsed tree before freeing it */
    for (cJSON *it = j->child; it; it = it->next)
        if (cJSON_IsString(it) && it->valuestring)
            explicit_bzero(it->valuestring, strlen(it->valuestring));
    cJSON_Delete(j);
    return rc;
}

/* An error reply's "code"/"message" (container endpoints) or "Code"/"Message" (IMDS), for the message. */
static void json_error(const hfs3_buf *b, char *out, size_t n)
{
    out[0] = 0;
    cJSON *j = b->len ? cJSON_ParseWithLength(b->data, b->len) : NULL;
    if (j) {
        const char *c = jstr(j, "code"), *m = jstr(j, "message");
        if (!c)
            c = jstr(j, "Code");
        if (!m)
            m = jstr(j, "Message");
        if (c || m)
            snprintf(out, n, ": %s%s%s", c ? c : "", c && m ? ": " : "", m ? m : "");
    }
    cJSON_Delete(j);
    one_line(out, n - 1);
}

static int fetch_container(const credsrc *s, hfs3_cred *out)
{
    char *tok = NULL;
    int rc = 0;
    if (s->auth_file) {
        size_t len;
        if ((rc = hfs3_read_file(s->auth_file, TOKEN_MAX, &tok, &len)) < 0)
            return hfs3_err_wrap(rc, "%s: AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", s->name);
        while (len && (tok[len - 1] == '\n' || tok[len - 1] == '\r'))
            tok[--len] = 0;
    } else if (s->auth && !(tok = hfs3_strdup(s->auth))) {
        return hfs3_err(-ENOMEM, "out of memory");
    }
    if (tok && strpbrk(tok, "\r\n")) {
        rc = hfs3_err(-EINVAL, "%s: the authorization token holds a line break", s->name);
        goto out;
    }
    hfs3_buf hdr, reply;
    hfs3_buf_init(&hdr, 0);
    const char *hdrs[3] = {"Accept: application/json", NULL, NULL};
    if (tok && *tok) {
        if (hfs3_buf_addf(&hdr, "Authorization: %s", tok) < 0) {
            rc = hfs3_err(-ENOMEM, "out of memory");
            goto out;
        }
        hdrs[1] = hdr.data;
    }
    /* as botocore: 2 s per attempt, 3 attempts */
    long status = 0;
    for (int attempt = 1; attempt <= 3; attempt++) {
        rc = http(s, "GET", s->uri, hdrs, NULL, 2000, 2000, &status, &reply);
        if (rc == 0 && status == 200)
            break;
        if (rc == 0 && status < 500) {
            char why[256];
            json_error(&reply, why, sizeof why);
            rc = hfs3_err(status == 401 || status == 403 ? -EACCES : -EIO, "%s: GET %s: HTTP %ld%s", s->name,
                          s->uri, status, why);
            hfs3_buf_free(&reply);
            break;
        }
        if (rc == 0) {
            rc = hfs3_err(-EIO, "%s: GET %s: HTTP %ld", s->name, s->uri, status);
            hfs3_buf_free(&reply);
        }
        if (attempt < 3)
            usleep(200000);
    }
    if (rc == 0) {
        rc = json_creds(s, hfs3_buf_str(&reply), reply.len, "Token", 1, out);
        explicit_bzero(reply.data, reply.len);
        hfs3_buf_free(&reply);
    }
    if (hdr.data)
        explicit_bzero(hdr.data, hdr.len);
    hfs3_buf_free(&hdr);
out:
    if (tok) {
        explicit_bzero(tok, strlen(tok));
        free(tok);
    }
    return rc;
}

static int fetch_imds(const credsrc *s, hfs3_cred *out)
{
    hfs3_buf url, reply, th;
    hfs3_buf_init(&url, 0);
    hfs3_buf_init(&th, 0);
    long status = 0, cto = s->imds_timeout_ms, tto = s->imds_timeout_ms * 2;
    int rc = 0;
    char *token = NULL;
    /* 1. the session token (IMDSv2); a 403/404/405 means an IMDS without v2, then go on without it */
    if (hfs3_buf_addf(&url, "%s/latest/api/token", s->imds_endpoint) < 0)
        return hfs3_err(-ENOMEM, "out of memory");
    const char *h1[] = {"X-aws-ec2-metadata-token-ttl-seconds: 21600", NULL};
    for (int attempt = 1;; attempt++) {
        rc = http(s, "PUT", url.data, h1, NULL, cto, tto, &status, &reply);
        if (rc == 0 || attempt >= s->imds_attempts)
            break;
    }
    if (rc < 0) {
        if (s->optional) {
            hfs3_debug("%s: not available (%s): anonymous requests", s->name, hfs3_errmsg());
            hfs3_err_clear();
            rc = 0;
        }
        goto done;
    }
    if (status == 200) {
        token = hfs3_buf_take(&reply, NULL);
    } else if (status == 403 || status == 404 || status == 405) {
        hfs3_buf_free(&reply);
    } else {
        hfs3_buf_free(&reply);
        rc = hfs3_err(-EIO, "%s: PUT %s: HTTP %ld", s->name, url.data, status);
        goto done;
    }
    if (token && (hfs3_buf_addf(&th, "X-aws-ec2-metadata-token: %s", token) < 0)) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto done;
    }
    const char *h2[] = {th.data, NULL};
    /* 2. the role's name */
    hfs3_buf_reset(&url);
    if (hfs3_buf_addf(&url, "%s/latest/meta-data/iam/security-credentials/", s->imds_endpoint) < 0) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = http(s, "GET", url.data, token ? h2 : NULL, NULL, cto, tto, &status, &reply)) < 0)
        goto done;
    if (status == 404 && s->optional) {
        hfs3_debug("%s: no IAM role attached to this instance: anonymous requests", s->name);
        hfs3_buf_free(&reply);
        goto done;
    }
    if (status != 200 || !reply.len) {
        hfs3_buf_free(&reply);
        rc = hfs3_err(status == 401 || status == 403 ? -EACCES : -EIO, "%s: GET %s: HTTP %ld%s", s->name,
                      url.data, status, status == 200 ? " without a role name" : "");
        goto done;
    }
    char *role = hfs3_buf_take(&reply, NULL);
    role[strcspn(role, "\r\n")] = 0;
    int bad = !*role || strpbrk(role, "/?#% ") != NULL;
    if (!bad)
        rc = hfs3_buf_adds(&url, role) < 0 ? hfs3_err(-ENOMEM, "out of memory") : 0;
    free(role);
    if (bad) {
        rc = hfs3_err(-EIO, "%s: the role name it sent is not one", s->name);
        goto done;
    }
    if (rc < 0)
        goto done;
    /* 3. the role's credentials */
    if ((rc = http(s, "GET", url.data, token ? h2 : NULL, NULL, cto, tto, &status, &reply)) < 0)
        goto done;
    if (status != 200) {
        char why[256];
        json_error(&reply, why, sizeof why);
        hfs3_buf_free(&reply);
        rc = hfs3_err(status == 401 || status == 403 ? -EACCES : -EIO, "%s: GET %s: HTTP %ld%s", s->name, url.data,
                      status, why);
        goto done;
    }
    cJSON *j = cJSON_ParseWithLength(hfs3_buf_str(&reply), reply.len);
    const char *code = j ? jstr(j, "Code") : NULL;
    if (code && strcmp(code, "Success") != 0) {
        char c[64];
        snprintf(c, sizeof c, "%s", code);
        one_line(c, sizeof c - 1);
        rc = hfs3_err(-EIO, "%s: the role's credentials have Code %s", s->name, c);
    }
    cJSON_Delete(j);
    if (rc == 0)
        rc = json_creds(s, hfs3_buf_str(&reply), reply.len, "Token", 1, out);
    explicit_bzero(reply.data, reply.len);
    hfs3_buf_free(&reply);
done:
    if (token) {
        explicit_bzero(token, strlen(token));
        free(token);
    }
    if (th.data)
        explicit_bzero(th.data, th.len);
    hfs3_buf_free(&th);
    hfs3_buf_free(&url);
    return rc;
}

/* ---------- credential_process ---------- */

static int fetch_process(const credsrc *s, hfs3_cred *out)
{
    char **argv;
    int rc = credsrc_split(s->command, &argv);
    if (rc < 0)
        return hfs3_err_wrap(rc, "%s", s->name);
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    hfs3_buf so, se;
    hfs3_buf_init(&so, REPLY_MAX);
    hfs3_buf_init(&se, 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    pid_t pid = -1;
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        rc = hfs3_err(-errno, "%s: pipe: %s", s->name, strerror(errno));
        goto done;
    }
    /* stdout and stderr to us; nothing else of ours (a lock descriptor) leaks into it */
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    if (e) {
        rc = hfs3_err(-e, "%s: cannot run %s: %s", s->name, argv[0], strerror(e));
        goto done;
    }
    struct pollfd pf[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2, too_big = 0;
    while (open_fds) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !pf[i].revents)
                continue;
            char buf[4096];
            ssize_t n = read(pf[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                pf[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0 && !too_big && hfs3_buf_add(&so, buf, (size_t)n) < 0)
                too_big = 1;
            if (i == 1) {
                /* keep the tail: the last line is the useful one */
                hfs3_buf_add(&se, buf, (size_t)n);
                if (se.len > 4 * STDERR_KEEP) {
                    memmove(se.data, se.data + se.len - STDERR_KEEP, STDERR_KEEP);
                    se.len = STDERR_KEEP;
                    se.data[se.len] = 0;
                }
            }
        }
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        /* its last non-empty stderr line says why */
        char *t = se.data ? se.data : "";
        size_t n = se.len;
        while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
            t[--n] = 0;
        char *nl = strrchr(t, '\n');
        char why[STDERR_KEEP + 1];
        snprintf(why, sizeof why, "%s", nl ? nl + 1 : t);
        one_line(why, 300);
        char how[48];
        if (WIFEXITED(st))
            snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
        else
            snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(st));
        rc = hfs3_err(-EACCES, "%s: %s %s%s%s", s->name, argv[0], how, *why ? ": " : "", why);
        goto done;
    }
    if (too_big) {
        rc = hfs3_err(-EIO, "%s: %s printed more than %u bytes", s->name, argv[0], REPLY_MAX);
        goto done;
    }
    cJSON *j = cJSON_ParseWithLength(hfs3_buf_str(&so), so.len);
    const cJSON *ver = j ? cJSON_GetObjectItemCaseSensitive(j, "Version") : NULL;
    int v1 = cJSON_IsNumber(ver) && ver->valuedouble == 1;
    cJSON_Delete(j);
    if (!j)
        rc = hfs3_err(-EIO, "%s: %s printed something that is not JSON", s->name, argv[0]);
    else if (!v1)
        rc = hfs3_err(-EIO, "%s: %s printed JSON without \"Version\": 1", s->name, argv[0]);
    else
        rc = json_creds(s, hfs3_buf_str(&so), so.len, "SessionToken", 0, out);
done:
    if (so.data)
        explicit_bzero(so.data, so.len);
    hfs3_buf_free(&so);
    hfs3_buf_free(&se);
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    posix_spawn_file_actions_destroy(&fa);
    free(argv);
    return rc;
}

int credsrc_fetch(const credsrc *s, hfs3_cred *out)
{
    memset(out, 0, sizeof *out);
    switch (s->kind) {
    case SRC_STATIC:
        if (!(out->access_key = hfs3_strdup(s->keys.access_key)) ||
            !(out->secret_key = hfs3_strdup(s->keys.secret_key)) ||
            (s->keys.session_token && !(out->session_token = hfs3_strdup(s->keys.session_token)))) {
            hfs3_cred_clear(out);
            return hfs3_err(-ENOMEM, "out of memory");
        }
        out->expires = s->keys.expires;
        return 0;
    case SRC_WEBID: return fetch_webid(s, out);
    case SRC_ROLE: return fetch_role(s, out);
    case SRC_PROCESS: return fetch_process(s, out);
    case SRC_CONTAINER: return fetch_container(s, out);
    case SRC_IMDS: return fetch_imds(s, out);
    }
    return hfs3_err(-EINVAL, "unknown credential source");
}
