/* s3xml.c - streaming libexpat parsers for S3's ListObjectsV2 result and <Error> bodies, S3's ISO 8601
 * timestamps, and the memory helpers of hfs3_s3_list (kept here so a parser test needs no HTTP code).
 * No network here: s3.c fetches the bodies. */
#include "hfs3/s3xml.h"

#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XML_TEXT_MAX (64 * 1024) /* one element's text: keys are <= 1024 bytes, tokens a few hundred */
#define XML_DEPTH_MAX 8          /* deeper elements are ignored, never tracked */
#define SIZE_LIMIT (1ULL << 53)  /* sizes must survive a trip through a double (JSON manifests) */

void hfs3_s3_object_free(hfs3_s3_object *o)
{
    if (!o)
        return;
    free(o->key);
    free(o->etag);
    o->key = o->etag = NULL;
}

void hfs3_s3_list_truncate(hfs3_s3_list *l, size_t n)
{
    if (!l)
        return;
    for (size_t i = n; i < l->n; i++)
        hfs3_s3_object_free(&l->v[i]);
    if (n < l->n)
        l->n = n;
}

void hfs3_s3_list_free(hfs3_s3_list *l)
{
    if (!l)
        return;
    hfs3_s3_list_truncate(l, 0);
    free(l->v);
    l->v = NULL;
    l->cap = 0;
}

/* Which element's text we are collecting. */
enum { F_NONE, F_KEY, F_SIZE, F_ETAG, F_MTIME, F_TRUNC, F_TOKEN, F_CODE, F_MESSAGE, F_PREFIX };

typedef struct xparse {
    XML_Parser p;
    int rc;                    /* first failure, 0 while fine */
    const char *what;          /* "ListObjectsV2" or "Error", for messages */
    const char *root;          /* expected document element */
    int depth;
    int saw_root;
    int field;                 /* F_*, set while inside an interesting leaf */
    hfs3_buf text;
    /* list state */
    hfs3_s3_list *out;
    hfs3_s3_list *prefixes;    /* <CommonPrefixes><Prefix> (a delimiter listing), or NULL: ignored */
    int in_contents, in_prefixes;
    hfs3_s3_object cur;
    int have_key, have_size;
    int truncated;
    char *token;
    /* error state */
    char *code, *message;
} xparse;

/* The local part of a namespaced name ("uri|Key" -> "Key"): S3 puts its elements in a default
 * namespace and other servers use prefixes; either way only the local name matters. */
static const char *local_name(const XML_Char *name)
{
    const char *s = strrchr(name, '|');
    return s ? s + 1 : name;
}

static void xfail(xparse *x, int code, const char *fmt, const char *arg)
{
    if (x->rc)
        return;
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    x->rc = hfs3_err(code, "s3xml: %s body: %s (line %lu)", x->what, msg,
                     (unsigned long)XML_GetCurrentLineNumber(x->p));
    XML_StopParser(x->p, XML_FALSE);
}

static int list_field(int depth, int in_contents, const char *n)
{
    if (depth == 3 && in_contents == 2)
        return !strcmp(n, "Prefix") ? F_PREFIX : F_NONE;
    if (depth == 3 && in_contents) {
        if (!strcmp(n, "Key"))
            return F_KEY;
        if (!strcmp(n, "Size"))
            return F_SIZE;
        if (!strcmp(n, "ETag"))
            return F_ETAG;
        if (!strcmp(n, "LastModified"))
            return F_MTIME;
    } else if (depth == 2) {
        if (!strcmp(n, "IsTruncated"))
            return F_TRUNC;
        if (!strcmp(n, "NextContinuationToken"))
            return F_TOKEN;
    }
    return F_NONE;
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    xparse *x = ud;
    const char *n = local_name(name);
    x->depth++;
    if (x->rc)
        return;
    if (x->depth == 1) {
        if (strcmp(n, x->root)) {
            xfail(x, -EINVAL, "document element is <%s>", n);
            return;
        }
        x->saw_root = 1;
        return;
    }
    if (x->depth > XML_DEPTH_MAX)
        return;
    if (x->field != F_NONE) {
        xfail(x, -EINVAL, "element <%s> inside a text field", n);
        return;
    }
    if (x->out) {
        if (x->depth == 2 && !strcmp(n, "Contents")) {
            x->in_contents = 1;
            memset(&x->cur, 0, sizeof x->cur);
            x->have_key = x->have_size = 0;
            return;
        }
        if (x->depth == 2 && x->prefixes && !strcmp(n, "CommonPrefixes")) {
            x->in_prefixes = 1;
            return;
        }
        x->field = list_field(x->depth, x->in_prefixes ? 2 : x->in_contents, n);
    } else if (x->depth == 2) {
        if (!strcmp(n, "Code"))
            x->field = F_CODE;
        else if (!strcmp(n, "Message"))
            x->field = F_MESSAGE;
    }
    hfs3_buf_reset(&x->text);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    xparse *x = ud;
    if (x->rc || x->field == F_NONE)
        return;
    if (hfs3_buf_add(&x->text, s, (size_t)len))
        xfail(x, -EINVAL, "%s", "element text too long");
}

/* A whole decimal number below 2^53; nothing else (no sign, no spaces, no exponent). */
static int parse_size(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v >= SIZE_LIMIT)
            return -EINVAL;
    }
    *out = v;
    return 0;
}

/* Moves the collected text out as a fresh string (or fails the parse on OOM). */
static char *take_text(xparse *x)
{
    char *s = hfs3_buf_take(&x->text, NULL);
    hfs3_buf_init(&x->text, XML_TEXT_MAX);
    if (!s)
        xfail(x, -ENOMEM, "%s", "out of memory");
    return s;
}

static int list_push(hfs3_s3_list *l, hfs3_s3_object *o)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        hfs3_s3_object *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *o;
    memset(o, 0, sizeof *o);
    return 0;
}

static void end_field(xparse *x)
{
    const char *t = hfs3_buf_str(&x->text);
    char *s;
    switch (x->field) {
    case F_KEY:
        if (x->have_key) {
            xfail(x, -EINVAL, "<Contents> for key \"%.200s\" has a second <Key>", x->cur.key);
            break;
        }
        if (!*t) {
            xfail(x, -EINVAL, "%s", "<Key> is empty");
            break;
        }
        if ((s = take_text(x))) {
            free(x->cur.key);
            x->cur.key = s;
            x->have_key = 1;
        }
        break;
    case F_SIZE:
        if (x->have_size)
            xfail(x, -EINVAL, "%s", "<Contents> has a second <Size>");
        else if (parse_size(t, &x->cur.size))
            xfail(x, -EINVAL, "Size \"%.64s\" is not a whole number below 2^53", t);
        else
            x->have_size = 1;
        break;
    case F_ETAG:
        if ((s = take_text(x))) {
            free(x->cur.etag);
            x->cur.etag = s;
        }
        break;
    case F_MTIME:
        if (hfs3_s3xml_parse_time(t, &x->cur.mtime))
            xfail(x, -EINVAL, "LastModified \"%.64s\" is not an ISO 8601 UTC time", t);
        break;
    case F_TRUNC:
        if (!strcmp(t, "true"))
            x->truncated = 1;
        else if (!strcmp(t, "false"))
            x->truncated = 0;
        else
            xfail(x, -EINVAL, "IsTruncated \"%.64s\" is not true or false", t);
        break;
    case F_TOKEN:
        if ((s = take_text(x))) {
            free(x->token);
            x->token = s;
        }
        break;
    case F_PREFIX:
        if (!*t) {
            xfail(x, -EINVAL, "%s", "<Prefix> of <CommonPrefixes> is empty");
            break;
        }
        if ((s = take_text(x))) {
            hfs3_s3_object o = {.key = s};
            if (list_push(x->prefixes, &o)) {
                free(s);
                xfail(x, -ENOMEM, "%s", "out of memory");
            }
        }
        break;
    case F_CODE:
        if ((s = take_text(x))) {
            free(x->code);
            x->code = s;
        }
        break;
    case F_MESSAGE:
        if ((s = take_text(x))) {
            free(x->message);
            x->message = s;
        }
        break;
    }
}


static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    xparse *x = ud;
    int depth = x->depth--;
    if (x->rc || depth > XML_DEPTH_MAX)
        return;
    if (x->field != F_NONE) {
        end_field(x);
        x->field = F_NONE;
        return;
    }
    if (depth == 2 && x->in_prefixes) {
        x->in_prefixes = 0;
        return;
    }
    if (x->out && depth == 2 && x->in_contents) {
        x->in_contents = 0;
        if (!x->have_key) {
            xfail(x, -EINVAL, "%s", "<Contents> without <Key>");
            return;
        }
        if (!x->have_size) {
            xfail(x, -EINVAL, "<Contents> for key \"%.200s\" without <Size>", x->cur.key);
            return;
        }
        if (list_push(x->out, &x->cur))
            xfail(x, -ENOMEM, "%s", "out of memory");
    }
    (void)name;
}

/* S3 sends no DTD: a DOCTYPE could declare entities whose references expat would drop or expand (a key
 * read as empty, or a billion laughs); refused at the declaration, before any entity is used. */
static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid,
                               int has_internal_subset)
{
    (void)sysid;
    (void)pubid;
    (void)has_internal_subset;
    xfail(ud, -EINVAL, "a DOCTYPE (<!DOCTYPE %.64s>), which S3 never sends", name);
}

static void XMLCALL on_skipped_entity(void *ud, const XML_Char *name, int is_parameter_entity)
{
    (void)is_parameter_entity;
    xfail(ud, -EINVAL, "an entity reference (&%.64s;), which S3 never sends", name);
}

static int run_parser(xparse *x, const char *xml, size_t n)
{
    x->p = XML_ParserCreateNS(NULL, '|');
    if (!x->p)
        return hfs3_err(-ENOMEM, "s3xml: out of memory");
    XML_SetUserData(x->p, x);
    XML_SetElementHandler(x->p, on_start, on_end);
    XML_SetCharacterDataHandler(x->p, on_text);
    XML_SetStartDoctypeDeclHandler(x->p, on_doctype);
    XML_SetSkippedEntityHandler(x->p, on_skipped_entity);
    hfs3_buf_init(&x->text, XML_TEXT_MAX);
    /* expat takes an int length: feed big bodies in pieces */
    size_t off = 0;
    do {
        size_t chunk = n - off > (1u << 30) ? (1u << 30) : n - off;
        int final = off + chunk == n;
        if (XML_Parse(x->p, xml + off, (int)chunk, final) == XML_STATUS_ERROR && !x->rc)
            x->rc = hfs3_err(-EINVAL, "s3xml: %s body: %s at line %lu column %lu", x->what,
                             XML_ErrorString(XML_GetErrorCode(x->p)),
                             (unsigned long)XML_GetCurrentLineNumber(x->p),
                             (unsigned long)XML_GetCurrentColumnNumber(x->p));
        off += chunk;
    } while (off < n && !x->rc);
    if (!x->rc && !x->saw_root)
        x->rc = hfs3_err(-EINVAL, "s3xml: %s body: empty document", x->what);
    XML_ParserFree(x->p);
    x->p = NULL;
    hfs3_buf_free(&x->text);
    return x->rc;
}

int hfs3_s3xml_parse_list(const char *xml, size_t n, hfs3_s3_list *out, int *truncated, char **next_token)
{
    return hfs3_s3xml_parse_list_dir(xml, n, out, NULL, truncated, next_token);
}

int hfs3_s3xml_parse_list_dir(const char *xml, size_t n, hfs3_s3_list *out, hfs3_s3_list *prefixes,
                              int *truncated, char **next_token)
{
    xparse x;
    memset(&x, 0, sizeof x);
    x.what = "ListObjectsV2";
    x.root = "ListBucketResult";
    x.out = out;
    x.prefixes = prefixes;
    size_t first = out->n, pfirst = prefixes ? prefixes->n : 0;
    int rc = run_parser(&x, xml, n);
    hfs3_s3_object_free(&x.cur);
    if (rc) {
        /* leave out as we found it: a half-appended page is worse than none */
        hfs3_s3_list_truncate(out, first);
        hfs3_s3_list_truncate(prefixes, pfirst);
        free(x.token);
        return rc;
    }
    if (truncated)
        *truncated = x.truncated;
    if (next_token)
        *next_token = x.token;
    else
        free(x.token);
    return 0;
}

int hfs3_s3xml_parse_error(const char *xml, size_t n, char **code, char **message)
{
    xparse x;
    memset(&x, 0, sizeof x);
    x.what = "Error";
    x.root = "Error";
    int rc = run_parser(&x, xml, n);
    if (rc) {
        free(x.code);
        free(x.message);
        return rc;
    }
    if (code)
        *code = x.code;
    else
        free(x.code);
    if (message)
        *message = x.message;
    else
        free(x.message);
    return 0;
}

static int digits(const char **s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*s)[i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *s += n;
    *out = v;
    return 0;
}

int hfs3_s3xml_parse_time(const char *s, long long *out)
{
    int Y, M, D, h, m, sec;
    const char *p = s;
    if (!s || digits(&p, 4, &Y) || *p++ != '-' || digits(&p, 2, &M) || *p++ != '-' || digits(&p, 2, &D) ||
        (*p != 'T' && *p != 't') || !*p++ || digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &m) ||
        *p++ != ':' || digits(&p, 2, &sec))
        return -EINVAL;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -EINVAL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if ((*p != 'Z' && *p != 'z') || p[1])
        return -EINVAL;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    /* sec 60: a leap second, which timegm folds into the next minute as S3 clients do */
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || (M == 2 && D == 29 && !leap) || h > 23 || m > 59 ||
        sec > 60)
        return -EINVAL;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    *out = (long long)timegm(&tm);
    return 0;
}
