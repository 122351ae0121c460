/* fuzz_sigv4.c - libFuzzer target for SigV4 signing (lib/sigv4.c).
 *
 * Input: any bytes, split at NUL bytes into fields: method, path, then (name, value) pairs that alternate
 * between query parameters and headers (the first byte's low bits choose normalize_path and the split).
 * With bit 5 of the first byte the last three fields become the access key, region and service.
 * hfs3_sigv4_authorization, hfs3_sigv4_canonical_request and hfs3_uri_encode run over them.
 * Checks: no crash, no leak, no UB; the Authorization value starts with the expected credential scope,
 * contains no control characters (it goes into an HTTP header) and never the secret key.
 * Built and run by tests/fuzz/run.sh; seeds in tests/fuzz/corpus/sigv4. */
#include "hfs3/sigv4.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXF 64
#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"

static void die(const char *what, const char *s)
{
    fprintf(stderr, "fuzz_sigv4: %s: %s\n", what, s ? s : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int flags = data[0];
    char *copy = malloc(size);
    if (!copy)
        return 0;
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = 0;

    const char *f[MAXF];
    size_t nf = 0;
    for (char *p = copy; nf < MAXF && p <= copy + size - 1;) {
        f[nf++] = p;
        p += strlen(p) + 1;
    }
    hfs3_kv q[MAXF], h[MAXF];
    size_t nq = 0, nh = 0;
    /* flags bit 1: pairs alternate between query and headers; else the first half are query parameters */
    for (size_t i = 2; i + 1 < nf; i += 2) {
        int to_q = (flags & 2) ? (i / 2) % 2 == 1 : (i < nf / 2);
        hfs3_kv kv = {f[i], f[i + 1]};
        if (to_q)
            q[nq++] = kv;
        else
            h[nh++] = kv;
    }
    if (nh == 0 && !(flags & 4)) {
        h[nh++] = (hfs3_kv){"host", "example.amazonaws.com"};
        h[nh++] = (hfs3_kv){"x-amz-date", "20150830T123600Z"};
    }
    hfs3_sigv4_request r = {
        .method = nf > 0 ? f[0] : "GET",
        .path = nf > 1 ? f[1] : "/",
        .normalize_path = flags & 1,
        .query = q,
        .nquery = nq,
        .headers = h,
        .nheaders = nh,
        .payload_hash = (flags & 8) ? "UNSIGNED-PAYLOAD"
                                    : "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    };
    hfs3_sigv4_key k = {"AKIDEXAMPLE", SECRET, "us-east-1", "s3", "20150830T123600Z"};
    /* flags bit 5: the last three fields are the access key, region and service (they come from
     * config files and the environment, so they are input too) */
    int fuzz_key = (flags & 32) && nf >= 5;
    if (fuzz_key) {
        k.access_key = f[nf - 3];
        k.region = f[nf - 2];
        k.service = f[nf - 1];
    }

    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_sigv4_authorization(&r, &k, &b) == 0) {
        const char *a = hfs3_buf_str(&b);
        static const char lead[] = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/s3/aws4_request, ";
        if (!fuzz_key && strncmp(a, lead, sizeof lead - 1) != 0)
            die("bad Authorization prefix", a);
        if (strstr(a, SECRET))
            die("secret in Authorization", "");
        for (const unsigned char *p = (const unsigned char *)a; *p; p++)
            if (*p < 0x20 || *p == 0x7f)
                die("control character in Authorization", a);
        hfs3_buf_free(&b);
    }
    hfs3_buf_init(&b, 0);
    if (hfs3_sigv4_canonical_request(&r, &b) == 0)
        hfs3_buf_free(&b);
    hfs3_buf_init(&b, 0);
    if (hfs3_uri_encode(&b, (const char *)data, size, flags & 16) == 0) {
        for (size_t i = 0; i < b.len; i++) {
            char c = b.data[i];
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  strchr("-._~%/", c)))
                die("unencoded byte in uri_encode output", b.data);
        }
        hfs3_buf_free(&b);
    }
    char d[17];
    /* the signer only ever formats time(): keep t within years 1970..9999 */
    unsigned long long t = 0;
    memcpy(&t, data, size >= 8 ? 8 : size);
    hfs3_amz_date((long long)(t % 253402300800ULL), d);
    free(copy);
    return 0;
}
