/* main.c - hfs3-manifest: dispatches to one file per subcommand; the help texts and the error prefix
 * ("hfs3-manifest CMD: ") live here. Parsing and printing only; the work is in lib/. */
#include "cmds.h"

#include "hfs3/config.h"
#include "hfs3/util.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The shim, when it is loaded into this program too (a global LD_PRELOAD, or a run under `hfs3-manifest run` that
 * starts the helper), finds this symbol and keeps its write guard off: the helper writes the cache. Exported by the
 * link (Makefile: --export-dynamic-symbol). */
__attribute__((visibility("default"), used)) const int hfs3_helper_process = 1;

#define REMOTE_HELP                                                                                             \
    "REMOTE is name:bucket/prefix (an rclone remote from $RCLONE_CONFIG, else the first existing of\n"          \
    "$XDG_CONFIG_HOME/rclone/rclone.conf, ~/.config/rclone/rclone.conf, ~/.rclone.conf, each key overridable\n" \
    "by RCLONE_CONFIG_<NAME>_<KEY>) or s3://bucket/prefix (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"         \
    "AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_PROFILE with ~/.aws/credentials and config).\n"

#define S3_VARS                                                                                                \
    "  HFS3_S3_ADDRESSING  path, virtual or auto (default auto)\n"                                              \
    "  HFS3_TLS_VERIFY     0 turns certificate checks off (with a warning)\n"                                   \
    "  HFS3_LOG            error, warn, info or debug (default warn)\n"

#define CACHE_VARS                                                                                             \
    "  HFS3_CACHE_DIR      the cache (default $XDG_CACHE_HOME/hfs3, else ~/.cache/hfs3)\n"                      \
    "  HFS3_OFFLINE        1: never touch the network, use only what is cached\n"                               \
    "  HFS3_CONNECTIONS    parallel ranged GETs per file, 1 to 64 (default 8)\n"                                \
    "  HFS3_VERIFY_FOREIGN 1: re-hash blobs other users wrote into a shared cache\n"

#define EXIT_HELP                                                                                              \
    "Exit status: 0 success, 1 a failed check or operation, 2 a usage or configuration error.\n"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
    const char *help;
} commands[] = {
    {"build", cmd_build, "build [--local DIR] [--layout auto|flat|hf-cache] [--dry-run] [-o FILE|-] REMOTE | build --all HUB",
     "Lists the prefix and writes its manifest, PREFIX/.hfs3/manifest.json, with one PUT: every file, directory\n"
     "and symlink with size, sha256 and ETag. Prints one summary line on stdout. A rebuild of an unchanged\n"
     "prefix rewrites nothing (the summary says unchanged). Run it again after any change to the prefix.\n\n"
     "Options:\n"
     "  --local DIR         take sha256 from the local copy DIR (hashed on all cores); every local file must\n"
     "                      be in the bucket with the same size, else each difference is named and nothing\n"
     "                      is written\n"
     "  --layout L          auto (default), flat (a --local-dir download) or hf-cache (models--org--name)\n"
     "  --dry-run           print the manifest on stdout instead of writing it; the summary goes to stderr\n"
     "  -o FILE, --output FILE  write the manifest to FILE (- for stdout) instead of the bucket\n"
     "  --all               REMOTE is a hub prefix: build the manifest of every repository folder under it\n"
     "                      (models--*, datasets--*, spaces--*; one delimiter listing), skipping those whose\n"
     "                      objects still match their manifest (sizes, ETags); one line per repository\n"
     "                      (built, unchanged, failed), then a count; exit 1 when any failed\n"
     "  -h, --help          this text\n\n"
     "Variables:\n" S3_VARS "\n" EXIT_HELP},
    {"show", cmd_show, "show [--json] REMOTE",
     "Prints the stored manifest as a tree, with the layout, revision and totals on the first line. A manifest\n"
     "that breaks a rule of the format is refused with one line naming the entry and the rule.\n\n"
     "Options:\n"
     "  --json              print the manifest document itself\n"
     "  -h, --help          this text\n\n"
     "Variables:\n" S3_VARS "\n" EXIT_HELP},
    {"verify", cmd_verify, "verify [--deep] REMOTE",
     "Checks that every file of the stored manifest exists with its size and ETag (one listing). Prints one\n"
     "line per problem on stderr and a summary on stdout; exit 1 when any check failed.\n\n"
     "Options:\n"
     "  --deep              also stream every object and compare its sha256\n"
     "  -h, --help          this text\n\n"
     "Variables:\n" S3_VARS "\n" EXIT_HELP},
    {"fetch", cmd_fetch, "fetch [--repo NAME]... REMOTE",
     "Warms this machine's cache: fetches the manifest and every file of it (shards first), each verified\n"
     "against its sha256 and installed atomically; what is cached already is not fetched again. Prints one\n"
     "summary line on stdout: files, failed files, bytes fetched, bytes already cached, seconds, MB/s; exit 1\n"
     "when any file failed. Progress is shown when stderr is a terminal. A server started later with the same\n"
     "HFS3_CACHE_DIR and a REMOTE that resolves to the same endpoint, bucket and prefix (however it is spelled)\n"
     "can then run with HFS3_OFFLINE=1.\n"
     "REMOTE may be a hub prefix (repository folders models--*, datasets--*, spaces--*, each with its own\n"
     "manifest): then every repository under it is fetched, or only those --repo names. A repository inside a\n"
     "hub (REMOTE/models--ORG--NAME) also caches the hub's repository list, so that a hub mount of the parent\n"
     "works offline.\n\n"
     "Options:\n"
     "  --repo NAME         a hub: fetch only this repository (repeatable)\n"
     "  -h, --help          this text\n\n"
     "Variables:\n" CACHE_VARS S3_VARS "\n" EXIT_HELP},
    {"cache", cmd_cache,
     "cache du [--json] [REMOTE] | gc [--max SIZE] [--older-than DAYS] [--unreferenced] [--dry-run] [--json] | "
     "verify [--dry-run] [--json]",
     "Looks after this machine's cache. du: per mount and per model, files, bytes cached and not yet cached,\n"
     "last use. gc: removes blobs, least recently used first, until the cache is within --max (or\n"
     "HFS3_CACHE_MAX), or those unused for --older-than DAYS, or --unreferenced ones (in no cached manifest).\n"
     "verify: re-hashes every blob and removes the bad ones (exit 1 when any was bad). Each blob is handled\n"
     "under its lock, so other processes may use the cache meanwhile; a blob open in a program keeps working.\n\n"
     "Options:\n"
     "  --max SIZE          bytes with K/M/G/T suffixes, or a percentage of the file system\n"
     "  --older-than DAYS   blobs not used for DAYS days\n"
     "  --unreferenced      blobs no cached manifest names\n"
     "  --dry-run           say what would be removed, remove nothing\n"
     "  --json              one JSON document on stdout\n"
     "  -h, --help          this text\n\n"
     "Variables:\n" CACHE_VARS "  HFS3_CACHE_MAX      the cache's budget (SIZE as for --max)\n\n" EXIT_HELP},
    {"status", cmd_status, "status [--json] [REMOTE]",
     "Shows what is cached per mount, the fetches in progress on this machine (file, bytes, rate, which\n"
     "process), and the last errors (fails/, mounts/*/error).\n\n"
     "Options:\n"
     "  --json              one JSON document on stdout\n"
     "  -h, --help          this text\n\n"
     "Variables:\n" CACHE_VARS "\n" EXIT_HELP},
    {"run", cmd_run, "run [--mount LOCAL=REMOTE]... [--] PROGRAM [ARGS...]",
     "Runs PROGRAM with libhfs3shim.so preloaded by its absolute path (beside this helper, else the installed\n"
     "PREFIX/lib) and the mounts appended to HFS3_MOUNTS: no ldconfig or hand-written LD_PRELOAD needed.\n\n"
     "Options:\n"
     "  -m, --mount LOCAL=REMOTE  a mount for PROGRAM (repeatable)\n"
     "  -h, --help          this text\n\n"
     "Exit status: PROGRAM's; 127 PROGRAM not found, 126 it could not be run, 2 a usage error.\n"},
    {"_index", cmd_index, NULL, NULL},
    {"_get", cmd_get, NULL, NULL},
    {"_prefetch", cmd_prefetch, NULL, NULL},
};

static const char *current = NULL; /* the subcommand running, for the error prefix */

void cmd_err(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (current)
        fprintf(stderr, "hfs3-manifest %s: %s\n", current, line);
    else
        fprintf(stderr, "hfs3-manifest: %s\n", line);
}

static void overview(FILE *out)
{
    fprintf(out, "usage: hfs3-manifest COMMAND [OPTIONS] REMOTE\n"
                 "       hfs3-manifest COMMAND --help | --help | --version\n\n"
                 "Writes and reads the manifests that let libhfs3shim.so show a Hugging Face model folder stored in\n"
                 "S3 as a local read-only directory, and warms the local cache.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].usage)
            fprintf(out, "  %s\n", commands[i].usage);
    fprintf(out, "\n" REMOTE_HELP "\n" EXIT_HELP "See hfs3-manifest(1), hfs3(7) and README.md.\n");
}

void cmd_usage(const char *cmd)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].usage && (!cmd || !strcmp(cmd, commands[i].name)))
            fprintf(stderr, "usage: hfs3-manifest %s\n", commands[i].usage);
    fprintf(stderr, "Try 'hfs3-manifest %s%s--help' for more information.\n", cmd ? cmd : "", cmd ? " " : "");
}

void cmd_help(const char *cmd)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].help && !strcmp(cmd, commands[i].name)) {
            printf("usage: hfs3-manifest %s\n\n%s\n%s", commands[i].usage, commands[i].help, REMOTE_HELP);
            return;
        }
}

int cmd_progress_wanted(void) { return isatty(2); }

struct hfs3_remote *cmd_remote(const char *spec)
{
    hfs3_remote *r = NULL;
    if (hfs3_remote_parse(spec, &r) < 0) {
        /* config.c names the rclone remote ("remote minio: ..."): name the REMOTE as the user wrote it too */
        const char *m = hfs3_errmsg();
        if (!strncmp(m, "remote ", 7) && strncmp(m + 7, spec, strlen(spec)) != 0)
            cmd_err("%s: %s", spec, m);
        else
            cmd_err("%s", m);
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
        if (c == 'h') {
            cmd_help(argv[0]);
            *status = 0;
        } else {
            cmd_usage(argv[0]);
        }
        return NULL;
    }
    if (optind != argc - 1) {
        if (optind < argc - 1)
            cmd_err("one REMOTE expected, got %d arguments", argc - optind);
        else
            cmd_err("REMOTE missing");
        cmd_usage(argv[0]);
        return NULL;
    }
    return cmd_remote(argv[optind]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        overview(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        if (argc > 2 && strcmp(argv[1], "help") == 0) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (commands[i].help && !strcmp(argv[2], commands[i].name)) {
                    cmd_help(argv[2]);
                    return 0;
                }
        }
        overview(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("hfs3-manifest %s\n", HFS3_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            current = commands[i].name;
            return commands[i].fn(argc - 1, argv + 1);
        }
    cmd_err("unknown command '%s'", argv[1]);
    fprintf(stderr, "Try 'hfs3-manifest --help' for more information.\n");
    return 2;
}
