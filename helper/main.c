/* main.c - hfs3-manifest: dispatches to one file per subcommand. Parsing and printing only; the work is
 * in lib/. */
#include "cmds.h"

#include "hfs3/config.h"
#include "hfs3/util.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
} commands[] = {
    {"build", cmd_build, "build [--local DIR] [--layout auto|flat|hf-cache] [--dry-run] [-o FILE|-] REMOTE"},
    {"show", cmd_show, "show [--json] REMOTE"},
    {"verify", cmd_verify, "verify [--deep] REMOTE"},
    {"fetch", cmd_fetch, "fetch REMOTE"},
    {"cache", cmd_cache, "cache du [--json] [REMOTE] | gc [--max SIZE] [--older-than DAYS] [--unreferenced] "
                         "[--dry-run] [--json] | verify [--dry-run] [--json]"},
    {"status", cmd_status, "status [--json] [REMOTE]"},
    {"run", cmd_run, "run [--mount LOCAL=REMOTE]... [--] PROGRAM [ARGS...]"},
    {"_index", cmd_index, NULL},
    {"_get", cmd_get, NULL},
    {"_prefetch", cmd_prefetch, NULL},
};

void cmd_usage(const char *cmd)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].usage && (!cmd || !strcmp(cmd, commands[i].name)))
            fprintf(stderr, "usage: hfs3-manifest %s\n", commands[i].usage);
    if (!cmd)
        fprintf(stderr, "REMOTE is name:bucket/prefix (an rclone remote) or s3://bucket/prefix. See README.md.\n");
}

int cmd_progress_wanted(void) { return isatty(2); }

struct hfs3_remote *cmd_remote(const char *spec)
{
    hfs3_remote *r = NULL;
    if (hfs3_remote_parse(spec, &r) < 0) {
        fprintf(stderr, "hfs3-manifest: %s\n", hfs3_errmsg());
        return NULL;
    }
    return r;
}

struct hfs3_remote *cmd_flag_remote(int argc, char **argv, const char *flag_name, int *flag, int *status)
{
    const struct option longopts[] = {{flag_name, no_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'},
                                      {0, 0, 0, 0}};
    int c;
    *flag = 0;
    *status = 2;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'f') {
            *flag = 1;
            continue;
        }
        cmd_usage(argv[0]);
        if (c == 'h')
            *status = 0;
        return NULL;
    }
    if (optind != argc - 1) {
        cmd_usage(argv[0]);
        return NULL;
    }
    return cmd_remote(argv[optind]);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        cmd_usage(NULL);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("hfs3-manifest %s\n", HFS3_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "hfs3-manifest: unknown command '%s'\n", argv[1]);
    cmd_usage(NULL);
    return 2;
}
