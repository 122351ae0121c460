/* cmd_verify.c - `hfs3-manifest verify [--deep] REMOTE`: every file of the stored manifest exists with its
 * size and ETag; --deep also streams each object and compares its sha256. Exit 1 on any problem. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "hfs3/builder.h"
#include "hfs3/verify.h"

int cmd_verify(int argc, char **argv)
{
    static const struct option longopts[] = {{"deep", no_argument, NULL, 'd'}, {"help", no_argument, NULL, 'h'},
                                             {0, 0, 0, 0}};
    int deep = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'd')
            deep = 1;
        else {
            cmd_usage("verify");
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1) {
        cmd_usage("verify");
        return 2;
    }
    hfs3_remote *r = cmd_remote(argv[optind]);
    if (!r)
        return 2;
    hfs3_manifest *m = NULL;
    hfs3_buf problems;
    hfs3_buf_init(&problems, 0);
    hfs3_build_opts o = {.progress = cmd_progress_wanted() ? cmd_progress : NULL};
    size_t checked = 0;
    int status = 1;
    if (hfs3_fetch_manifest(r, &m, NULL) < 0) {
        fprintf(stderr, "hfs3-manifest: verify: %s\n", hfs3_errmsg());
        goto done;
    }
    int rc = hfs3_verify(r, m, deep, &o, &problems, &checked);
    cmd_progress_end();
    if (problems.len)
        fprintf(stderr, "%s", hfs3_buf_str(&problems));
    if (rc < 0 && !problems.len) {
        fprintf(stderr, "hfs3-manifest: verify: %s\n", hfs3_errmsg());
        goto done;
    }
    size_t nbad = 0;
    for (const char *p = hfs3_buf_str(&problems); *p; p++)
        nbad += *p == '\n';
    printf("%s: %zu entries checked%s: %s\n", r->spec, checked, deep ? " (sizes, ETags and sha256)" : " (sizes and ETags)",
           nbad ? "FAILED" : "OK");
    if (nbad)
        printf("%s: %zu problems\n", r->spec, nbad);
    status = nbad ? 1 : 0;
done:
    hfs3_buf_free(&problems);
    hfs3_manifest_free(m);
    hfs3_remote_free(r);
    return status;
}
