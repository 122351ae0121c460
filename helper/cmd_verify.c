/* cmd_verify.c - `hfs3-manifest verify [--deep] REMOTE`: every file of the stored manifest exists with its
 * size and ETag; --deep also streams each object and compares its sha256. Exit 1 on any problem. */
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "hfs3/builder.h"
#include "hfs3/verify.h"

int cmd_verify(int argc, char **argv)
{
    int deep, status;
    hfs3_remote *r = cmd_flag_remote(argc, argv, "deep", &deep, &status);
    if (!r)
        return status;
    hfs3_manifest *m = NULL;
    hfs3_buf problems;
    hfs3_buf_init(&problems, 0);
    hfs3_build_opts o = {.progress = cmd_progress_wanted() ? cmd_progress : NULL};
    size_t checked = 0;
    status = 1;
    int frc = hfs3_fetch_manifest(r, &m, NULL);
    if (frc < 0) {
        cmd_hub_advice(r, frc);
        cmd_err("%s", hfs3_errmsg());
        goto done;
    }
    int rc = hfs3_verify(r, m, deep, &o, &problems, &checked);
    cmd_progress_end();
    if (problems.len)
        fprintf(stderr, "%s", hfs3_buf_str(&problems));
    if (rc < 0 && !problems.len) {
        cmd_err("%s", hfs3_errmsg());
        goto done;
    }
    size_t nbad = 0;
    for (const char *p = hfs3_buf_str(&problems); *p; p++)
        nbad += *p == '\n';
    printf("%s: %zu %s checked%s: %s\n", r->spec, checked, hfs3_plural(checked, "entry", "entries"), deep ? " (sizes, ETags and sha256)" : " (sizes and ETags)",
           nbad ? "FAILED" : "OK");
    if (nbad)
        printf("%s: %zu %s\n", r->spec, nbad, hfs3_plural(nbad, "problem", "problems"));
    status = nbad ? 1 : 0;
done:
    hfs3_buf_free(&problems);
    hfs3_manifest_free(m);
    hfs3_remote_free(r);
    return status;
}
