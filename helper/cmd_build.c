/* cmd_build.c - `hfs3-manifest build [--local DIR] [--layout auto|flat|hf-cache] [--dry-run] [-o FILE|-] REMOTE`:
 * parses arguments, calls hfs3_build and hfs3_publish, prints the summary. `build --all HUB`: the same for
 * every repository folder under a hub prefix (include/hfs3/hub.h), skipping the unchanged ones. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "hfs3/builder.h"
#include "hfs3/explain.h"
#include "hfs3/hub.h"

/* build --all: one line per repository on stdout ("NAME: built ...", "NAME: unchanged", "NAME: failed (the
 * reason is on stderr)"), each failure's reason once on stderr; then "HUB: N repositories: B built, U
 * unchanged, F failed". 0, or 1 when any failed (or none was found). */
static int build_all(const hfs3_remote *hub, hfs3_build_opts *o)
{
    char **names = NULL;
    size_t n = 0;
    int has_manifest = 0;
    int rc = hfs3_hub_list(hub, &names, &n, &has_manifest);
    if (rc < 0) {
        cmd_err("%s", (hfs3_explain_s3(hub, NULL, rc), hfs3_errmsg()));
        return 1;
    }
    if (n == 0) {
        cmd_err("%s: no repository folders (models--*, datasets--*, spaces--*) under s3://%s/%s", hub->spec,
                hub->bucket, hub->prefix);
        return 1;
    }
    size_t built = 0, same = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        char *spec = hfs3_hub_repo_spec(hub->spec, names[i]);
        hfs3_remote *r = spec ? cmd_remote(spec) : NULL;
        hfs3_manifest *m = NULL;
        hfs3_buf problems;
        hfs3_buf_init(&problems, 0);
        int unchanged = 0, written = 0;
        hfs3_build_stats st;
        if (!r) {
            rc = -EINVAL;
        } else if ((rc = hfs3_hub_repo_unchanged(r, o->layout, &unchanged)) == 0 && !unchanged &&
                   (rc = hfs3_build(r, o, &m, &problems, &st)) == 0) {
            rc = hfs3_publish(r, m, &written);
        }
        cmd_progress_end();
        if (rc < 0) {
            /* the reason once, on stderr, as a single build prints it (it names the repository's REMOTE); the
             * repository's line on stdout says where it is, so that a terminal shows the reason one time */
            printf("%s: failed (the reason is on stderr)\n", names[i]);
            fflush(stdout);
            if (problems.len) {
                fprintf(stderr, "%s", hfs3_buf_str(&problems));
            } else {
                if (r)
                    hfs3_explain_s3(r, NULL, rc);
                const char *why = r ? hfs3_errmsg() : "not a valid REMOTE";
                size_t sl = spec ? strlen(spec) : 0;
                /* an S3 error may name the REMOTE already: not twice */
                if (spec && !strncmp(why, spec, sl) && why[sl] == ':')
                    cmd_err("%s", why);
                else
                    cmd_err("%s: %s", spec ? spec : names[i], why);
            }
            failed++;
        } else if (unchanged) {
            printf("%s: unchanged\n", names[i]);
            same++;
        } else {
            size_t files, dirs, links;
            uint64_t bytes;
            hfs3_manifest_counts(m, &files, &dirs, &links, &bytes);
            printf("%s: built (%s): %zu %s, %zu %s, %zu %s, %llu %s; %s\n", names[i], m->layout, files,
                   hfs3_plural(files, "file", "files"), dirs, hfs3_plural(dirs, "directory", "directories"), links,
                   hfs3_plural(links, "symlink", "symlinks"), (unsigned long long)bytes,
                   hfs3_plural(bytes, "byte", "bytes"), written ? "written" : "manifest unchanged");
            built++;
        }
        fflush(stdout);
        hfs3_buf_free(&problems);
        hfs3_manifest_free(m);
        hfs3_remote_free(r);
        free(spec);
    }
    printf("%s: %zu %s: %zu built, %zu unchanged, %zu failed\n", hub->spec, n,
           hfs3_plural(n, "repository", "repositories"), built, same, failed);
    hfs3_hub_names_free(names, n);
    return failed ? 1 : 0;
}

int cmd_build(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"local", required_argument, NULL, 'l'}, {"layout", required_argument, NULL, 'L'},
        {"dry-run", no_argument, NULL, 'n'},     {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},        {"all", no_argument, NULL, 'a'},
        {0, 0, 0, 0},
    };
    hfs3_build_opts o = {.layout = "auto"};
    const char *output = NULL;
    int dry = 0, all = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l': o.local_dir = optarg; break;
        case 'L': o.layout = optarg; break;
        case 'n': dry = 1; break;
        case 'a': all = 1; break;
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
    if (all && (dry || output || o.local_dir)) {
        cmd_err("--all builds and writes each repository's manifest: --dry-run, -o and --local do not apply");
        return 2;
    }
    hfs3_remote *r = cmd_remote(argv[optind]);
    if (!r)
        return 2;
    if (cmd_progress_wanted()) {
        o.progress = cmd_progress;
    }
    if (all) {
        int st = build_all(r, &o);
        hfs3_remote_free(r);
        return st;
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
            "%s (%s): %zu %s, %zu %s, %zu %s, %llu %s; sha256 from %zu local %s, "
            "%zu LFS %s, %zu metadata, %zu S3 %s%s%s\n",
            r->spec, m->layout, files, hfs3_plural(files, "file", "files"), dirs,
            hfs3_plural(dirs, "directory", "directories"), links, hfs3_plural(links, "symlink", "symlinks"),
            (unsigned long long)bytes, hfs3_plural(bytes, "byte", "bytes"), st.from_local,
            hfs3_plural(st.from_local, "file", "files"), st.from_lfs_name, hfs3_plural(st.from_lfs_name, "name", "names"),
            st.from_metadata, st.from_s3, hfs3_plural(st.from_s3, "stream", "streams"),
            st.metadata_outdated ? " (.metadata of a file changed since, or of unknown mtime, not used)" : "", where);
    status = 0;
done:
    hfs3_buf_free(&problems);
    hfs3_buf_free(&doc);
    hfs3_manifest_free(m);
    hfs3_remote_free(r);
    return status;
}
