/* cmd_build.c - `hfs3-manifest build [--local DIR] [--layout auto|flat|hf-cache] [--dry-run] [-o FILE|-] REMOTE`:
 * parses arguments, calls hfs3_build and hfs3_publish, prints the summary. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "hfs3/builder.h"
#include "hfs3/explain.h"

int cmd_build(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"local", required_argument, NULL, 'l'}, {"layout", required_argument, NULL, 'L'},
        {"dry-run", no_argument, NULL, 'n'},     {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},        {0, 0, 0, 0},
    };
    hfs3_build_opts o = {.layout = "auto"};
    const char *output = NULL;
    int dry = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': o.local_dir = optarg; break;
        case 'L': o.layout = optarg; break;
        case 'n': dry = 1; break;
        case 'o': output = optarg; break;
        case 'h': cmd_help("build"); return 0;
        default: cmd_usage("build"); return 2;
        }
    }
    if (optind != argc - 1) {
        if (optind < argc - 1)
            cmd_err("one REMOTE expected, got %d arguments", argc - optind);
        else
            cmd_err("REMOTE missing");
        cmd_usage("build");
        return 2;
    }
    if (strcmp(o.layout, "auto") && strcmp(o.layout, "flat") && strcmp(o.layout, "hf-cache")) {
        cmd_err("--layout must be auto, flat or hf-cache, not '%s'", o.layout);
        return 2;
    }
    hfs3_remote *r = cmd_remote(argv[optind]);
    if (!r)
        return 2;
    if (cmd_progress_wanted()) {
        o.progress = cmd_progress;
    }
    int to_stdout = dry || (output && !strcmp(output, "-"));
    FILE *summary = to_stdout ? stderr : stdout;
    hfs3_manifest *m = NULL;
    hfs3_buf problems, doc;
    hfs3_buf_init(&problems, 0);
    hfs3_buf_init(&doc, 0);
    hfs3_build_stats st;
    int status = 1;
    int rc = hfs3_build(r, &o, &m, &problems, &st);
    cmd_progress_end();
    if (rc < 0) {
        if (problems.len)
            fprintf(stderr, "%s", hfs3_buf_str(&problems));
        else
            cmd_err("%s", (hfs3_explain_s3(r, NULL, rc), hfs3_errmsg()));
        if (problems.len)
            cmd_err("nothing written");
        goto done;
    }
    size_t files, dirs, links;
    uint64_t bytes;
    hfs3_manifest_counts(m, &files, &dirs, &links, &bytes);
    const char *where = "";
    char wherebuf[4200];
    if (to_stdout || output) {
        if ((rc = hfs3_manifest_write(m, &doc)) < 0) {
            cmd_err("%s", hfs3_errmsg());
            goto done;
        }
        if (to_stdout) {
            fwrite(hfs3_buf_str(&doc), 1, doc.len, stdout);
            fflush(stdout);
            where = dry ? "; dry run, nothing written" : "";
        } else {
            if ((rc = hfs3_write_output(output, hfs3_buf_str(&doc), doc.len, 0644)) < 0) {
                cmd_err("%s", hfs3_errmsg());
                goto done;
            }
            snprintf(wherebuf, sizeof wherebuf, "; wrote %s", output);
            where = wherebuf;
        }
    } else {
        int written = 0;
        if ((rc = hfs3_publish(r, m, &written)) < 0) {
            hfs3_explain_s3(r, NULL, rc);
            cmd_err("writing the manifest: %s", hfs3_errmsg());
            goto done;
        }
        char *key = hfs3_remote_manifest_key(r);
        snprintf(wherebuf, sizeof wherebuf, "; %s s3://%s/%s", written ? "wrote" : "unchanged", r->bucket,
                 key ? key : "");
        free(key);
        where = wherebuf;
    }
    fprintf(summary,
            "%s (%s): %zu files, %zu directories, %zu symlinks, %llu bytes; sha256 from %zu local files, "
            "%zu LFS names, %zu metadata, %zu S3 streams%s\n",
            r->spec, m->layout, files, dirs, links, (unsigned long long)bytes, st.from_local, st.from_lfs_name,
            st.from_metadata, st.from_s3, where);
    status = 0;
done:
    hfs3_buf_free(&problems);
    hfs3_buf_free(&doc);
    hfs3_manifest_free(m);
    hfs3_remote_free(r);
    return status;
}
