/* sigv4.c - AWS SigV4 signing (header form): canonical request, string to sign, key derivation,
 * Authorization value, and the RFC 3986 encoding SigV4 wants. No HTTP here: s3.c builds the request
 * and sends it; this module only turns its parts into the header value. Credentials are never
 * logged or put into error messages. */
#include "hfs3/sigv4.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define ALGORITHM "AWS4-HMAC-SHA256"
/* "AWS4" + secret must fit a stack buffer; real secrets are 40 bytes. */
#define MAX_SECRET 1024

static int is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

static unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Whitespace a header value may carry; caller-joined folded lines may still hold CR/LF. */
static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Appends s[0..n) percent-encoded. Runs of unreserved bytes go in one append, so a long key costs
 * a handful of calls. Returns 0 or the buffer's error (the buffer is then freed). */
int hfs3_uri_encode(hfs3_buf *out, const char *s, size_t n, int keep_slash)
{
    static const char hexd[] = "0123456789ABCDEF";
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && (is_unreserved((unsigned char)s[j]) || (keep_slash && s[j] == '/')))
            j++;
        if (j > i) {
            int rc = hfs3_buf_add(out, s + i, j - i);
            if (rc < 0)
                return rc;
        }
        if (j < n) {
            unsigned char c = (unsigned char)s[j];
            char esc[3] = {'%', hexd[c >> 4], hexd[c & 15]};
            int rc = hfs3_buf_add(out, esc, 3);
            if (rc < 0)
                return rc;
            j++;
        }
        i = j;
    }
    return 0;
}

/* Formats t (seconds since the epoch, UTC). Out-of-range times give "19700101T000000Z" rather than
 * garbage, so a broken clock shows up as a clear RequestTimeTooSkewed from the server. */
void hfs3_amz_date(long long t, char out[17])
{
    time_t tt = (time_t)t;
    struct tm tm;
    if ((long long)tt != t || !gmtime_r(&tt, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        memcpy(out, "19700101T000000Z", 17);
        return;
    }
    if (strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
        memcpy(out, "19700101T000000Z", 17);
}

/* 1 if d is exactly "YYYYMMDDTHHMMSSZ" (digits where digits belong). */
static int valid_amz_date(const char *d)
{
    if (!d || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
        return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (d[i] < '0' || d[i] > '9'))
            return 0;
    return 1;
}

/* Appends the canonical URI for a decoded path. normalize: RFC 3986 remove_dot_segments plus
 * dropping empty segments ("//"), as every service but S3 expects; the result keeps a trailing
 * slash when the path ended in '/', "." or "..". S3 signs the path as it is, encoded once. */
static int canonical_uri(hfs3_buf *out, const char *path, int normalize)
{
    if (!normalize)
        return hfs3_uri_encode(out, path, strlen(path), 1);

    size_t n = strlen(path), nseg = 0;
    /* Segment start/length pairs; a path has at most n/2+1 non-empty segments. */
    size_t *seg = malloc((n / 2 + 2) * 2 * sizeof *seg);
    if (!seg) {
        hfs3_buf_free(out);
        return hfs3_err(-ENOMEM, "sigv4: out of memory normalising a path");
    }
    int trailing = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && path[i] == '/')
            i++;
        if (i >= n) {
            trailing = 1;
            break;
        }
        size_t start = i;
        while (i < n && path[i] != '/')
            i++;
        size_t len = i - start;
        trailing = 0;
        if (len == 1 && path[start] == '.') {
            trailing = 1;
        } else if (len == 2 && path[start] == '.' && path[start + 1] == '.') {
            if (nseg)
                nseg--;
            trailing = 1;
        } else {
            seg[2 * nseg] = start;
            seg[2 * nseg + 1] = len;
            nseg++;
        }
    }
    int rc = hfs3_buf_addc(out, '/');
    for (size_t k = 0; rc == 0 && k < nseg; k++) {
        if (k)
            rc = hfs3_buf_addc(out, '/');
        if (rc == 0)
            rc = hfs3_uri_encode(out, path + seg[2 * k], seg[2 * k + 1], 0);
    }
    if (rc == 0 && trailing && nseg)
        rc = hfs3_buf_addc(out, '/');
    free(seg);
    return rc;
}

typedef struct qpair {
    const char *name, *value;  /* encoded, inside the scratch buffer */
} qpair;

static int qpair_cmp(const void *a, const void *b)
{
    const qpair *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

/* Appends name=value pairs, each part encoded, sorted by encoded name then encoded value, joined
 * by '&'. Sorting after encoding matters: '%' sorts before letters, the raw byte may not.
 * On failure out may be freed; the caller frees it in any case. */
static int canonical_query(hfs3_buf *out, const hfs3_kv *q, size_t nq)
{
    if (nq == 0)
        return 0;
    int rc = 0;
    hfs3_buf scratch;
    hfs3_buf_init(&scratch, 0);
    size_t *off = malloc(nq * 2 * sizeof *off);
    qpair *pairs = malloc(nq * sizeof *pairs);
    if (!off || !pairs) {
        rc = -ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < nq; i++) {
        const char *name = q[i].name, *value = q[i].value ? q[i].value : "";
        if (!name) {
            rc = hfs3_err(-EINVAL, "sigv4: query parameter %zu has no name", i);
            goto done;
        }
        off[2 * i] = scratch.len;
        if ((rc = hfs3_uri_encode(&scratch, name, strlen(name), 0)) < 0 ||
            (rc = hfs3_buf_addc(&scratch, '\0')) < 0)
            goto done;
        off[2 * i + 1] = scratch.len;
        if ((rc = hfs3_uri_encode(&scratch, value, strlen(value), 0)) < 0 ||
            (rc = hfs3_buf_addc(&scratch, '\0')) < 0)
            goto done;
    }
    /* Pointers only now: the scratch buffer may have moved while it grew. */
    for (size_t i = 0; i < nq; i++) {
        pairs[i].name = scratch.data + off[2 * i];
        pairs[i].value = scratch.data + off[2 * i + 1];
    }
    qsort(pairs, nq, sizeof *pairs, qpair_cmp);
    for (size_t i = 0; i < nq; i++) {
        if ((i && (rc = hfs3_buf_addc(out, '&')) < 0) || (rc = hfs3_buf_adds(out, pairs[i].name)) < 0 ||
            (rc = hfs3_buf_addc(out, '=')) < 0 || (rc = hfs3_buf_adds(out, pairs[i].value)) < 0)
            goto done;
    }
done:
    free(off);
    free(pairs);
    hfs3_buf_free(&scratch);
    return rc;
}

typedef struct hdr {
    const char *name, *value;
    size_t idx;  /* original position: repeated names keep their order */
} hdr;

static int hdr_cmp(const void *a, const void *b)
{
    const hdr *x = a, *y = b;
    const unsigned char *p = (const unsigned char *)x->name, *q = (const unsigned char *)y->name;
    while (*p && ascii_lower(*p) == ascii_lower(*q)) {
        p++;
        q++;
    }
    int c = (int)ascii_lower(*p) - (int)ascii_lower(*q);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* A header name is an HTTP token: printable ASCII without separators we would mangle. */
static int valid_header_name(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= 0x20 || c >= 0x7f || c == ':' || c == ';' || c == ',')
            return 0;
    }
    return 1;
}

static int add_lower(hfs3_buf *out, const char *s)
{
    for (; *s; s++) {
        int rc = hfs3_buf_addc(out, (char)ascii_lower((unsigned char)*s));
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Trimall: drop leading/trailing whitespace, collapse inner runs to one space. */
static int add_trimmed(hfs3_buf *out, const char *v)
{
    const unsigned char *s = (const unsigned char *)(v ? v : "");
    while (*s && is_ws(*s))
        s++;
    int pending_space = 0, rc = 0;
    for (; *s && rc == 0; s++) {
        if (is_ws(*s)) {
            pending_space = 1;
            continue;
        }
        if (pending_space) {
            rc = hfs3_buf_addc(out, ' ');
            pending_space = 0;
        }
        if (rc == 0)
            rc = hfs3_buf_addc(out, (char)*s);
    }
    return rc;
}

/* Appends the canonical headers block (each "name:value\n") to out and the signed-header list
 * ("a;b;c") to sh. On failure either may be freed; the caller frees both in any case. */
static int canonical_headers(hfs3_buf *out, hfs3_buf *sh, const hfs3_kv *h, size_t nh)
{
    if (nh == 0)
        return 0;
    int rc = 0;
    hdr *v = malloc(nh * sizeof *v);
    if (!v) {
        rc = -ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < nh; i++) {
        if (!valid_header_name(h[i].name)) {
            rc = hfs3_err(-EINVAL, "sigv4: header %zu has an invalid name", i);
            goto fail;
        }
        v[i].name = h[i].name;
        v[i].value = h[i].value;
        v[i].idx = i;
    }
    qsort(v, nh, sizeof *v, hdr_cmp);
    for (size_t i = 0; i < nh; i++) {
        int same = i && strcasecmp(v[i].name, v[i - 1].name) == 0;
        if (same) {
            rc = hfs3_buf_addc(out, ',');
        } else {
            if (i && (rc = hfs3_buf_addc(out, '\n')) < 0)
                goto fail;
            if ((i && (rc = hfs3_buf_addc(sh, ';')) < 0) || (rc = add_lower(sh, v[i].name)) < 0)
                goto fail;
            if ((rc = add_lower(out, v[i].name)) == 0)
                rc = hfs3_buf_addc(out, ':');
        }
        if (rc == 0)
            rc = add_trimmed(out, v[i].value);
        if (rc < 0)
            goto fail;
    }
    rc = hfs3_buf_addc(out, '\n');
    if (rc < 0)
        goto fail;
    free(v);
    return 0;
fail:
    free(v);
    return rc;
}

/* Appends the canonical request to out; the signed-header list goes to sh. Both freed on failure. */
static int build_canonical(const hfs3_sigv4_request *r, hfs3_buf *out, hfs3_buf *sh)
{
    int rc;
    if (!r || !r->method || !*r->method || !r->path || !r->payload_hash || !*r->payload_hash ||
        (r->nquery && !r->query) || (r->nheaders && !r->headers)) {
        rc = hfs3_err(-EINVAL, "sigv4: request lacks a method, path or payload hash");
        goto fail;
    }
    if (r->path[0] && r->path[0] != '/') {
        rc = hfs3_err(-EINVAL, "sigv4: path must start with '/'");
        goto fail;
    }
    const char *path = r->path[0] ? r->path : "/";
    if ((rc = hfs3_buf_adds(out, r->method)) < 0 || (rc = hfs3_buf_addc(out, '\n')) < 0 ||
        (rc = canonical_uri(out, path, r->normalize_path)) < 0 || (rc = hfs3_buf_addc(out, '\n')) < 0 ||
        (rc = canonical_query(out, r->query, r->nquery)) < 0 || (rc = hfs3_buf_addc(out, '\n')) < 0)
        goto fail;
    if ((rc = canonical_headers(out, sh, r->headers, r->nheaders)) < 0)
        goto fail;
    if ((rc = hfs3_buf_addc(out, '\n')) < 0 || (rc = hfs3_buf_adds(out, hfs3_buf_str(sh))) < 0 ||
        (rc = hfs3_buf_addc(out, '\n')) < 0 || (rc = hfs3_buf_adds(out, r->payload_hash)) < 0)
        goto fail;
    return 0;
fail:
    hfs3_buf_free(out);
    hfs3_buf_free(sh);
    if (rc == -ENOMEM || rc == -E2BIG)
        rc = hfs3_err(rc, "sigv4: canonical request too large or out of memory");
    return rc;
}

int hfs3_sigv4_canonical_request(const hfs3_sigv4_request *r, hfs3_buf *out)
{
    hfs3_buf sh;
    hfs3_buf_init(&sh, 0);
    int rc = build_canonical(r, out, &sh);
    hfs3_buf_free(&sh);
    return rc;
}

/* 1 if s can sit in the Credential field of the Authorization header: no control character or blank
 * (a CR/LF would end the header and start another), no ',' (ends the field), no '/' (splits the scope). */
static int valid_scope_part(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= 0x20 || c == 0x7f || c == ',' || c == '/')
            return 0;
    }
    return 1;
}

static int check_key(const hfs3_sigv4_key *k)
{
    if (!k || !k->access_key || !*k->access_key || !k->secret_key || !k->region || !*k->region ||
        !k->service || !*k->service)
        return hfs3_err(-EINVAL, "sigv4: credentials, region or service missing");
    if (!valid_amz_date(k->amz_date))
        return hfs3_err(-EINVAL, "sigv4: date is not of the form YYYYMMDDTHHMMSSZ");
    if (strlen(k->secret_key) > MAX_SECRET)
        return hfs3_err(-EINVAL, "sigv4: secret key longer than %d bytes", MAX_SECRET);
    if (!valid_scope_part(k->access_key) || !valid_scope_part(k->region) || !valid_scope_part(k->service))
        return hfs3_err(-EINVAL, "sigv4: access key, region or service contains '/', ',', a blank or a "
                                 "control character");
    return 0;
}

/* Appends the string to sign for an already-built canonical request. */
static int sts_from_creq(const hfs3_sigv4_key *k, const hfs3_buf *creq, hfs3_buf *out)
{
    char hex[65];
    hfs3_sha256_hexof(creq->data ? creq->data : "", creq->len, hex);
    int rc = hfs3_buf_addf(out, ALGORITHM "\n%s\n%.8s/%s/%s/aws4_request\n%s", k->amz_date, k->amz_date,
                           k->region, k->service, hex);
    if (rc < 0)
        return hfs3_err(rc, "sigv4: string to sign too large or out of memory");
    return 0;
}

int hfs3_sigv4_string_to_sign(const hfs3_sigv4_request *r, const hfs3_sigv4_key *k, hfs3_buf *out)
{
    int rc = check_key(k);
    if (rc < 0) {
        hfs3_buf_free(out);
        return rc;
    }
    hfs3_buf creq;
    hfs3_buf_init(&creq, 0);
    if ((rc = hfs3_sigv4_canonical_request(r, &creq)) < 0) {
        hfs3_buf_free(out);
        return rc;
    }
    rc = sts_from_creq(k, &creq, out);
    hfs3_buf_free(&creq);
    return rc;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request").
 * Inputs that hfs3_sigv4_authorization would refuse (a missing part, a bad date, a secret longer
 * than MAX_SECRET) give an all-zero key, which no server accepts. */
void hfs3_sigv4_signing_key(const hfs3_sigv4_key *k, unsigned char out[32])
{
    unsigned char kbuf[4 + MAX_SECRET];
    unsigned char a[32], b[32];
    if (!k || !k->secret_key || !k->region || !k->service || !valid_amz_date(k->amz_date) ||
        strlen(k->secret_key) > MAX_SECRET) {
        memset(out, 0, 32);
        return;
    }
    size_t slen = strlen(k->secret_key);
    memcpy(kbuf, "AWS4", 4);
    memcpy(kbuf + 4, k->secret_key, slen);
    hfs3_hmac_sha256(kbuf, 4 + slen, k->amz_date, 8, a);
    hfs3_hmac_sha256(a, 32, k->region, strlen(k->region), b);
    hfs3_hmac_sha256(b, 32, k->service, strlen(k->service), a);
    hfs3_hmac_sha256(a, 32, "aws4_request", 12, out);
    /* Derived keys are as good as the secret for a day: do not leave them on the stack. */
    explicit_bzero(kbuf, sizeof kbuf);
    explicit_bzero(a, sizeof a);
    explicit_bzero(b, sizeof b);
}

int hfs3_sigv4_authorization(const hfs3_sigv4_request *r, const hfs3_sigv4_key *k, hfs3_buf *out)
{
    int rc = check_key(k);
    if (rc < 0) {
        hfs3_buf_free(out);
        return rc;
    }
    hfs3_buf creq, sh, sts;
    hfs3_buf_init(&creq, 0);
    hfs3_buf_init(&sh, 0);
    hfs3_buf_init(&sts, 0);
    if ((rc = build_canonical(r, &creq, &sh)) < 0)
        goto fail;
    if ((rc = sts_from_creq(k, &creq, &sts)) < 0)
        goto fail;
    unsigned char key[32], sig[32];
    char sighex[65];
    hfs3_sigv4_signing_key(k, key);
    hfs3_hmac_sha256(key, 32, sts.data, sts.len, sig);
    explicit_bzero(key, sizeof key);
    hfs3_hex(sig, 32, sighex);
    rc = hfs3_buf_addf(out,
                       ALGORITHM " Credential=%s/%.8s/%s/%s/aws4_request, SignedHeaders=%s, Signature=%s",
                       k->access_key, k->amz_date, k->region, k->service, hfs3_buf_str(&sh), sighex);
    if (rc < 0) {
        rc = hfs3_err(rc, "sigv4: Authorization value too large or out of memory");
        goto fail;
    }
    hfs3_buf_free(&creq);
    hfs3_buf_free(&sh);
    hfs3_buf_free(&sts);
    return 0;
fail:
    hfs3_buf_free(&creq);
    hfs3_buf_free(&sh);
    hfs3_buf_free(&sts);
    hfs3_buf_free(out);
    return rc;
}
