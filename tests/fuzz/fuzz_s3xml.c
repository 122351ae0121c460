/* fuzz_s3xml.c - libFuzzer target for the S3 XML parsers (lib/s3xml.c).
 *
 * Input: any bytes. The first byte picks what is fed the rest: a ListObjectsV2 body
 * (hfs3_s3xml_parse_list), an <Error> body (hfs3_s3xml_parse_error) or a LastModified time string
 * (hfs3_s3xml_parse_time, NUL-terminated copy). Checks: no crash, no leak, no UB; on success every object
 * has a key and a size below 2^53, results are owned and freed; on failure nothing is handed out.
 * Built and run by tests/fuzz/run.sh; seeds in tests/fuzz/corpus/s3xml (hand-written bodies). */
#include "hfs3/s3xml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "fuzz_s3xml: %s (%s)\n", what, hfs3_errmsg());
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 3;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;

    if (mode == 0) {
        hfs3_s3_list l = {0};
        int trunc = -1;
        char *tok = (char *)1;
        int rc = hfs3_s3xml_parse_list(s, n, &l, &trunc, &tok);
        if (rc == 0) {
            for (size_t i = 0; i < l.n; i++)
                if (!l.v[i].key || l.v[i].size >= (1ULL << 53))
                    die("object without a key or with a size past 2^53");
            if (tok != NULL && tok != (char *)1)
                free(tok);
            else if (tok == (char *)1)
                die("next_token not set on success");
        }
        hfs3_s3_list_free(&l);
    } else if (mode == 1) {
        char *code = NULL, *msg = NULL;
        int rc = hfs3_s3xml_parse_error(s, n, &code, &msg);
        if (rc < 0 && (code || msg))
            die("failed parse_error handed out strings");
        free(code);
        free(msg);
    } else {
        char *z = malloc(n + 1);
        if (!z)
            return 0;
        memcpy(z, s, n);
        z[n] = 0;
        long long t = 0;
        hfs3_s3xml_parse_time(z, &t);
        free(z);
    }
    return 0;
}
