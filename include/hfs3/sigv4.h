/* sigv4.h - AWS Signature Version 4 (header-based): canonical request, string to sign, signing key,
 * Authorization header. Built on OpenSSL's HMAC-SHA256. No HTTP here: s3.c builds the request and
 * asks this module for the header. Tested against the AWS suite and the S3 examples in tests/data/sigv4. */
#ifndef HFS3_SIGV4_H
#define HFS3_SIGV4_H

#include <stddef.h>
#include "hfs3/util.h"

typedef struct hfs3_kv {
    const char *name;
    const char *value;  /* "" for a value-less query parameter (S3's ?lifecycle) */
} hfs3_kv;

typedef struct hfs3_sigv4_request {
    const char *method;        /* "GET", "HEAD", "PUT" ... */
    const char *path;          /* decoded path, e.g. "/bucket/dir/a b+c.json" (UTF-8 bytes) */
    int normalize_path;        /* 0 for S3 (path signed as is); 1 for the generic suite (dot segments, //) */
    const hfs3_kv *query;      /* decoded names and values, any order */
    size_t nquery;
    const hfs3_kv *headers;    /* every header to sign, any order and case; values are trimmed and
                                  inner whitespace runs collapsed; repeated names joined with ',' in order */
    size_t nheaders;
    const char *payload_hash;  /* hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
} hfs3_sigv4_request;

typedef struct hfs3_sigv4_key {
    const char *access_key;
    const char *secret_key;
    const char *region;        /* "us-east-1" */
    const char *service;       /* "s3" */
    const char *amz_date;      /* "20150830T123600Z" */
} hfs3_sigv4_key;

/* Each of these appends to out (a hfs3_buf) and returns 0, or a negative errno (buffer freed). */
int hfs3_sigv4_canonical_request(const hfs3_sigv4_request *r, hfs3_buf *out);
int hfs3_sigv4_string_to_sign(const hfs3_sigv4_request *r, const hfs3_sigv4_key *k, hfs3_buf *out);
/* "AWS4-HMAC-SHA256 Credential=AK/20150830/us-east-1/service/aws4_request, SignedHeaders=a;b, Signature=hex" */
int hfs3_sigv4_authorization(const hfs3_sigv4_request *r, const hfs3_sigv4_key *k, hfs3_buf *out);
/* The derived signing key (kSigning). */
void hfs3_sigv4_signing_key(const hfs3_sigv4_key *k, unsigned char out[32]);

/* RFC 3986 percent-encoding as SigV4 wants it: everything but A-Za-z0-9-._~ becomes %XX (uppercase);
 * '/' is kept when keep_slash. Appends to out. */
int hfs3_uri_encode(hfs3_buf *out, const char *s, size_t n, int keep_slash);
/* Formats t (UTC) as "YYYYMMDDTHHMMSSZ" into out[17]. */
void hfs3_amz_date(long long t, char out[17]);

#endif
