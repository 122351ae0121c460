/* s3cli.c - a small driver of lib/s3.c for end-to-end tests (not installed):
 *   s3cli ENDPOINT BUCKET ACCESS SECRET list PREFIX | listdir PREFIX | get KEY [OFF LEN] | head KEY | put KEY FILE
 * ACCESS "-" means anonymous. list prints "key<TAB>size<TAB>etag<TAB>mtime" lines; listdir (delimiter '/') the
 * objects directly under PREFIX ("key<TAB>size"), then its common prefixes (one per line); get writes the body to
 * stdout; head prints "size etag mtime"; put prints the new ETag. Errors: one line on stderr, exit 1
 * (2 for usage). Environment: S3CLI_MAX_KEYS (ListObjectsV2 page size), S3CLI_RETRIES, S3CLI_BACKOFF_MS,
 * S3CLI_SESSION_TOKEN, S3CLI_VIRTUAL=1 (virtual-hosted addressing), S3CLI_IF_MATCH and
 * S3CLI_IF_NONE_MATCH (conditional GET), S3CLI_LOW_SPEED_S or S3CLI_LOW_SPEED_TIME (seconds without a
 * byte before a timeout; default HFS3_LOW_SPEED_TIME or 30). get reports "status N size N etag E [not-modified]" on stderr.
 * It fills hfs3_remote by hand so it depends on nothing but s3.c and sigv4.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hfs3/s3.h"

static int usage(void)
{
    fprintf(stderr, "usage: s3cli ENDPOINT BUCKET ACCESS SECRET list PREFIX | get KEY [OFF LEN] | head KEY | "
                    "put KEY FILE\n");
    return 2;
}

static int to_stdout(void *ud, const void *data, size_t n)
{
    (void)ud;
    if (fwrite(data, 1, n, stdout) != n)
        return -EIO;
    return 0;
}

static long envl(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : 0;
}

int main(int argc, char **argv)
{
    if (argc < 7)
        return usage();
    hfs3_remote r;
    memset(&r, 0, sizeof r);
    r.spec = "s3cli";
    r.endpoint = argv[1];
    r.bucket = argv[2];
    r.prefix = "";
    r.region = "us-east-1";
    if (strcmp(argv[3], "-")) {
        r.access_key = argv[3];
        r.secret_key = argv[4];
    }
    r.session_token = getenv("S3CLI_SESSION_TOKEN");
    r.path_style = envl("S3CLI_VIRTUAL") ? 0 : 1;
    r.tls_verify = 1;
    hfs3_s3_opts o;
    memset(&o, 0, sizeof o);
    o.list_max_keys = (int)envl("S3CLI_MAX_KEYS");
    o.max_retries = (int)envl("S3CLI_RETRIES");
    o.backoff_base_ms = envl("S3CLI_BACKOFF_MS");
    o.connect_timeout_ms = 3000;
    o.low_speed_time_s = envl("S3CLI_LOW_SPEED_TIME") > 0 ? envl("S3CLI_LOW_SPEED_TIME")
                       : envl("S3CLI_LOW_SPEED_S") > 0  ? envl("S3CLI_LOW_SPEED_S")
                                                        : 0; /* 0: lib/s3.c's default */

    hfs3_s3 *c = NULL;
    int rc = hfs3_s3_new(&r, &o, &c);
    const char *cmd = argv[5];
    if (rc) {
        /* nothing more to do */
    } else if (!strcmp(cmd, "list") && argc == 7) {
        hfs3_s3_list l = {0};
        rc = hfs3_s3_list_objects(c, argv[6], &l);
        for (size_t i = 0; rc == 0 && i < l.n; i++)
            printf("%s\t%llu\t%s\t%lld\n", l.v[i].key, (unsigned long long)l.v[i].size,
                   l.v[i].etag ? l.v[i].etag : "-", l.v[i].mtime);
        hfs3_s3_list_free(&l);
    } else if (!strcmp(cmd, "listdir") && argc == 7) {
        hfs3_s3_list o = {0}, p = {0};
        rc = hfs3_s3_list_dir(c, argv[6], &o, &p);
        for (size_t i = 0; rc == 0 && i < o.n; i++)
            printf("%s\t%llu\n", o.v[i].key, (unsigned long long)o.v[i].size);
        for (size_t i = 0; rc == 0 && i < p.n; i++)
            printf("%s\n", p.v[i].key);
        hfs3_s3_list_free(&o);
        hfs3_s3_list_free(&p);
    } else if (!strcmp(cmd, "get") && (argc == 7 || argc == 9)) {
        hfs3_s3_get g;
        memset(&g, 0, sizeof g);
        if (argc == 9) {
            g.ranged = 1;
            g.offset = strtoull(argv[7], NULL, 10);
            g.length = strtoull(argv[8], NULL, 10);
        }
        g.if_match = getenv("S3CLI_IF_MATCH");
        g.if_none_match = getenv("S3CLI_IF_NONE_MATCH");
        rc = hfs3_s3_get_object(c, argv[6], &g, to_stdout, NULL);
        if (fflush(stdout) && rc == 0)
            rc = -EIO;
        if (rc == 0)
            fprintf(stderr, "status %d size %llu etag %s%s\n", g.status, (unsigned long long)g.object_size,
                    g.etag ? g.etag : "-", g.not_modified ? " not-modified" : "");
        free(g.etag);
    } else if (!strcmp(cmd, "head") && argc == 7) {
        hfs3_s3_object ob;
        rc = hfs3_s3_head(c, argv[6], &ob);
        if (rc == 0)
            printf("%llu %s %lld\n", (unsigned long long)ob.size, ob.etag ? ob.etag : "-", ob.mtime);
        hfs3_s3_object_free(&ob);
    } else if (!strcmp(cmd, "put") && argc == 8) {
        char *data = NULL, *etag = NULL;
        size_t n = 0;
        FILE *f = fopen(argv[7], "rb");
        if (!f) {
            fprintf(stderr, "s3cli: %s: %s\n", argv[7], strerror(errno));
            hfs3_s3_free(c);
            return 1;
        }
        hfs3_buf b;
        hfs3_buf_init(&b, 0);
        char tmp[65536];
        size_t k;
        while ((k = fread(tmp, 1, sizeof tmp, f)) > 0)
            if ((rc = hfs3_buf_add(&b, tmp, k)))
                break;
        fclose(f);
        data = hfs3_buf_take(&b, &n);
        if (rc == 0)
            rc = hfs3_s3_put(c, argv[6], data, n, "application/octet-stream", &etag);
        if (rc == 0)
            printf("%s\n", etag ? etag : "-");
        free(etag);
        free(data);
    } else {
        hfs3_s3_free(c);
        return usage();
    }
    hfs3_s3_free(c);
    if (rc) {
        fprintf(stderr, "%s\n", hfs3_errmsg());
        return 1;
    }
    return 0;
}
