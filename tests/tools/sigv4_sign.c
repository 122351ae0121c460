/* sigv4_sign.c - test driver: signs one request described on argv with lib/sigv4.c and prints the
 * Authorization value (or, with -c / -t, the canonical request / string to sign). The secret comes
 * from $HFS3_SIGV4_SECRET so it never shows in a process listing. Used by t_sigv4_botocore.sh.
 *
 *   sigv4_sign -m METHOD -p PATH [-q NAME=VALUE]... [-H NAME:VALUE]... -x PAYLOAD_HASH
 *              -d YYYYMMDDTHHMMSSZ -a ACCESS_KEY [-r REGION] [-s SERVICE] [-n] [-c|-t]
 *
 * PATH and query parts are decoded (raw UTF-8 bytes); -n selects generic path normalisation. */
#include "hfs3/sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_KV 64

static int usage(void)
{
    fprintf(stderr, "usage: sigv4_sign -m METHOD -p PATH [-q NAME=VALUE]... [-H NAME:VALUE]... -x HASH "
                    "-d AMZDATE -a ACCESS_KEY [-r REGION] [-s SERVICE] [-n] [-c|-t]\n");
    return 2;
}

/* Splits "name<sep>value" in place; a missing separator means an empty value. */
static void split(char *s, char sep, hfs3_kv *kv)
{
    char *p = strchr(s, sep);
    kv->name = s;
    kv->value = "";
    if (p) {
        *p = 0;
        kv->value = p + 1;
    }
}

int main(int argc, char **argv)
{
    hfs3_kv q[MAX_KV], h[MAX_KV];
    size_t nq = 0, nh = 0;
    hfs3_sigv4_request r = {0};
    hfs3_sigv4_key k = {0};
    k.region = "us-east-1";
    k.service = "s3";
    int what = 2, opt;
    while ((opt = getopt(argc, argv, "m:p:q:H:x:d:a:r:s:nct")) != -1) {
        switch (opt) {
        case 'm': r.method = optarg; break;
        case 'p': r.path = optarg; break;
        case 'q':
            if (nq == MAX_KV)
                return usage();
            split(optarg, '=', &q[nq++]);
            break;
        case 'H':
            if (nh == MAX_KV)
                return usage();
            split(optarg, ':', &h[nh++]);
            break;
        case 'x': r.payload_hash = optarg; break;
        case 'd': k.amz_date = optarg; break;
        case 'a': k.access_key = optarg; break;
        case 'r': k.region = optarg; break;
        case 's': k.service = optarg; break;
        case 'n': r.normalize_path = 1; break;
        case 'c': what = 0; break;
        case 't': what = 1; break;
        default: return usage();
        }
    }
    if (optind != argc || !r.method || !r.path)
        return usage();
    r.query = q;
    r.nquery = nq;
    r.headers = h;
    r.nheaders = nh;
    k.secret_key = getenv("HFS3_SIGV4_SECRET");
    if (what && !k.secret_key) {
        fprintf(stderr, "sigv4_sign: HFS3_SIGV4_SECRET is not set\n");
        return 2;
    }
    hfs3_buf out;
    hfs3_buf_init(&out, 0);
    int rc = what == 0   ? hfs3_sigv4_canonical_request(&r, &out)
             : what == 1 ? hfs3_sigv4_string_to_sign(&r, &k, &out)
                         : hfs3_sigv4_authorization(&r, &k, &out);
    if (rc < 0) {
        fprintf(stderr, "sigv4_sign: %s\n", hfs3_errmsg());
        return 1;
    }
    fwrite(out.data, 1, out.len, stdout);
    putchar('\n');
    hfs3_buf_free(&out);
    return 0;
}
