/* main.c - hfs3-manifest: dispatches to one file per subcommand; the help texts and the error prefix
 * ("hfs3-manifest CMD: ") live here. Parsing and printing only; the work is in lib/. */
#include "cmds.h"

#include "hfs3/config.h"
#include "hfs3/s3.h"
#include "hfs3/util.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The shim, when it is loaded into this program too (a global LD_PRELOAD, or a run under `hfs3-manifest run` that
 * starts the helper), finds this symbol and keeps its write guard off: the helper writes the cache. Exported by the
 * link (Makefile and CMakeLists.txt: --export-dynamic-symbol). */
__attribute__((visibility("default"), used)) const int hfs3_helper_process = 1;

#define REMOTE_HELP                                                                                    \
    "REMOTE is name:bucket/prefix (an rclone remote from $RCLONE_CONFIG, else the first existing of\n" \
    "$XDG_CONFIG_HOME/rclone/rclone.conf, ~/.config/rclone/rclone.conf, ~/.rclone.conf, each key\n"    \
    "overridable by RCLONE_CONFIG_<NAME>_<KEY>) or s3://bucket/prefix (AWS_ACCESS_KEY_ID,\n"           \
    "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL_S3, AWS_PROFILE with\n"     \
    "~/.aws/credentials and config).\n"

#define EXIT_HELP                                                                                              \
    "Exit status: 0 success, 1 a failed check or operation, 2 a usage or configuration error.\n"

/* Every variable hfs3 reads: the one list that each command's --help and `help variables` print, and that
 * t_cli_help checks the code (every "HFS3_..." it reads), the man pages, docs/reference.md and the bash
 * completion against. where: h read by the helper (lib/, helper/), s by the shim, t by tests only. */
static const struct {
    const char *name, *where, *help;
} vars[] = {
    {"HFS3_MOUNTS", "hs", "LOCALPATH=REMOTE[;LOCALPATH=REMOTE...], the mounts (run --mount adds)"},
    {"HFS3_CACHE_DIR", "hs", "the cache (default $XDG_CACHE_HOME/hfs3, else ~/.cache/hfs3)"},
    {"HFS3_CACHE_MAX", "h", "the cache's budget: bytes with K/M/G/T, or a % of its file system"},
    {"HFS3_OFFLINE", "hs", "1: never touch the network, use only what is cached"},
    {"HFS3_CONNECTIONS", "h", "ranged GETs per file, 1-64 (default auto: from 2, doubled while it helps)"},
    {"HFS3_VERIFY_FOREIGN", "hs", "1: re-hash blobs other users wrote into a shared cache"},
    {"HFS3_RETRIES", "h", "retries of one HTTP request, with backoff (default 5; 0: none)"},
    {"HFS3_THROTTLE_BUDGET", "h", "seconds a request retries 503 SlowDown, 429 (default 600; 0: a retry)"},
    {"HFS3_LOW_SPEED_TIME", "h", "seconds under the low-speed limit before a transfer resumes (default 30)"},
    {"HFS3_LOW_SPEED_LIMIT", "h", "bytes/s under which a transfer counts as stalled (default 1)"},
    {"HFS3_S3_ADDRESSING", "h", "path, virtual or auto (default auto)"},
    {"HFS3_TLS_VERIFY", "h", "0 turns certificate checks off (with a warning)"},
    {"HFS3_LOG", "hs", "error, warn, info or debug (default warn)"},
    {"HFS3_PREFETCH", "s", "1 (default): a first open in a mount fetches its other files too"},
    {"HFS3_MANIFEST_TTL", "s", "seconds a cached manifest is used before S3 is asked again (default 60)"},
    {"HFS3_HUB_TTL", "s", "seconds a hub's repository list is used (default HFS3_MANIFEST_TTL)"},
    {"HFS3_PROGRESS", "hs", "0: the shim draws no progress on a terminal (run sets it and draws it)"},
    {"HFS3_STALL_TIMEOUT", "s", "seconds an open waits on a stalled fetch (default 120; 0: no limit)"},
    {"HFS3_HELPER", "hs", "the helper the shim runs (default: the installed hfs3-manifest)"},
    {"HFS3_VERIFY", "h", "chunks (the shim's default) or whole (fetch's): how files are verified"},
    {"HFS3_DURABLE", "h", "later (default): flushed after the answer; sync: before the install"},
    {"HFS3_TEST_RESOLVE", "t", "tests only: host:port:address[,...] overrides name resolution"},
    {"HFS3_TEST_BOOT_ID", "ht", "tests only: a 36-character boot id, to simulate a reboot"},
    {"HFS3_TEST_NO_FLUSH", "t", "tests only: 1 leaves the unflushed records, as a crash would"},
    {"HFS3_TEST_SUB_MAX", "t", "tests only: the shim's ceiling of mounts and hub repositories"},
};

#define S3_VARS "HFS3_S3_ADDRESSING HFS3_TLS_VERIFY HFS3_RETRIES HFS3_LOW_SPEED_TIME HFS3_LOW_SPEED_LIMIT HFS3_LOG"
#define CACHE_VARS "HFS3_CACHE_DIR HFS3_LOG"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
    const char *help;
    const char *vars; /* names from vars[], for the command's "Variables:" */
    const char *exit; /* NULL: EXIT_HELP */
    const char *summary; /* the one line of `hfs3-manifest --help` (git's and rclone's command list) */
} commands[] = {
    {"build", cmd_build, "build [--all] [--local DIR] [--layout L] [--dry-run] [-o FILE|-] REMOTE",
     "Lists the prefix and writes its manifest, PREFIX/.hfs3/manifest.json, with one PUT: every file,\n"
     "directory and symlink with size, sha256 and ETag. Prints one summary line on stdout. A rebuild of an\n"
     "unchanged prefix rewrites nothing (the summary says unchanged). Run it again after any change to\n"
     "the prefix.\n\n"
     "Options:\n"
     "  --local DIR         take sha256 from the local copy DIR (hashed on all cores); every local file\n"
     "                      must be in the bucket with the same size, else each difference is named and\n"
     "                      nothing is written\n"
     "  --layout L          auto (default), flat (a --local-dir download) or hf-cache (models--org--name)\n"
     "  --dry-run           print the manifest on stdout instead of writing it; the summary goes to stderr\n"
     "  -o FILE, --output FILE  write the manifest to FILE (- for stdout) instead of the bucket\n"
     "  --all               REMOTE is a hub prefix: build the manifest of every repository folder under\n"
     "                      it (models--*, datasets--*, spaces--*; one delimiter listing), skipping those\n"
     "                      whose objects still match their manifest (sizes, ETags); one line per\n"
     "                      repository (built, unchanged, failed), then a count; exit 1 when any failed\n"
     "  -h, --help          this text\n",
     S3_VARS, NULL, "write the manifest of a model prefix into the bucket"},
    {"show", cmd_show, "show [--json] REMOTE",
     "Prints the stored manifest as a tree, with the layout, revision and totals on the first line. A\n"
     "manifest that breaks a rule of the format is refused with one line naming the entry and the rule.\n\n"
     "Options:\n"
     "  --json              print the manifest document itself\n"
     "  -h, --help          this text\n",
     S3_VARS, NULL, "print a stored manifest as a tree (--json: the document)"},
    {"verify", cmd_verify, "verify [--deep] REMOTE",
     "Checks that every file of the stored manifest exists with its size and ETag (one listing). Prints\n"
     "one line per problem on stderr and a summary on stdout; exit 1 when any check failed.\n\n"
     "Options:\n"
     "  --deep              also stream every object and compare its sha256\n"
     "  -h, --help          this text\n",
     S3_VARS, NULL, "check the bucket's objects against the manifest (--deep: their sha256)"},
    {"fetch", cmd_fetch, "fetch [--repo NAME]... REMOTE",
     "Warms this machine's cache: fetches the manifest and every file of it (shards first), each verified\n"
     "against its sha256 and installed atomically; what is cached already is not fetched again. Prints\n"
     "one summary line on stdout in human units: files, bytes fetched, bytes already cached, seconds,\n"
     "rate, failed files; exit 1 when any file failed or is no longer cached at the end, and at once when\n"
     "the model is larger than HFS3_CACHE_MAX. Progress: a bar on a terminal, else a line every 5 s.\n"
     "A server started later\n"
     "with the same HFS3_CACHE_DIR and a REMOTE that resolves to the same endpoint, bucket and prefix\n"
     "(however it is spelled) can then run with HFS3_OFFLINE=1.\n"
     "REMOTE may be a hub prefix (repository folders models--*, datasets--*, spaces--*, each with its own\n"
     "manifest): then every repository under it is fetched, or only those --repo names. A repository\n"
     "inside a hub (REMOTE/models--ORG--NAME) also caches the hub's repository list, so that a hub mount\n"
     "of the parent works offline.\n\n"
     "Options:\n"
     "  --repo NAME         a hub: fetch only this repository (repeatable)\n"
     "  -h, --help          this text\n",
     "HFS3_CACHE_DIR HFS3_CACHE_MAX HFS3_OFFLINE HFS3_CONNECTIONS HFS3_VERIFY_FOREIGN " S3_VARS, NULL,
     "warm this machine's cache: fetch a model's files (shards first)"},
    {"cache", cmd_cache, "cache du|gc|verify [OPTIONS]",
     "Looks after this machine's cache: du shows it, gc removes blobs, verify re-hashes them.\n"
     "See hfs3-manifest cache du --help, cache gc --help and cache verify --help.\n\n"
     "Options:\n"
     "  -h, --help          this text\n",
     CACHE_VARS, NULL, "look after this machine's cache:"},
    {"cache du", NULL, "cache du [--json] [REMOTE]",
     "Shows the cache: files, bytes, budget, free space, what no cached manifest names. Then one line per\n"
     "cached mount (or only REMOTE's): files, how many are cached and their bytes, bytes not cached yet,\n"
     "last use; a hub also one line per repository.\n\n"
     "Options:\n"
     "  --json              one JSON document on stdout\n"
     "  -h, --help          this text\n",
     CACHE_VARS, NULL, "show what the cache holds, per mount and model"},
    {"cache gc", NULL, "cache gc [--max SIZE] [--older-than DAYS] [--unreferenced] [--dry-run] [--json]",
     "Removes blobs: the least recently used until the cache is within --max (default HFS3_CACHE_MAX),\n"
     "those unused for --older-than DAYS, and --unreferenced ones (in no cached manifest). A blob goes if\n"
     "any option selects it. Each is removed under its lock, so other processes may use the cache\n"
     "meanwhile; a blob open in a program keeps working. Exit 1 when --max could not be reached.\n\n"
     "Options:\n"
     "  --max SIZE          bytes with K/M/G/T suffixes, or a percentage of the file system\n"
     "  --older-than DAYS   blobs not used for DAYS days\n"
     "  --unreferenced      blobs no cached manifest names (one used in the last 5 minutes is kept)\n"
     "  --dry-run           say what would be removed, remove nothing\n"
     "  --json              one JSON document on stdout\n"
     "  -h, --help          this text\n",
     "HFS3_CACHE_DIR HFS3_CACHE_MAX HFS3_LOG", NULL, "remove cached files by size, age or reference"},
    {"cache verify", NULL, "cache verify [--dry-run] [--json]",
     "Re-hashes every blob and removes those that do not match their name; other users' blobs in a shared\n"
     "cache are reported, not removed. Exit 1 when any was bad.\n\n"
     "Options:\n"
     "  --dry-run           say what would be removed, remove nothing\n"
     "  --json              one JSON document on stdout\n"
     "  -h, --help          this text\n",
     CACHE_VARS, NULL, "re-hash cached files and remove the bad ones"},
    {"status", cmd_status, "status [--json] [REMOTE]",
     "Shows what is cached per mount, the fetches in progress on this machine (file, bytes, rate, which\n"
     "process), and the last errors (fails/, mounts/*/error). It only reads: no lock is taken.\n\n"
     "Options:\n"
     "  --json              one JSON document on stdout\n"
     "  -h, --help          this text\n",
     CACHE_VARS, NULL, "show what is cached, the fetches in progress and the last errors"},
    {"run", cmd_run, "run [--mount LOCAL=REMOTE]... [--] PROGRAM [ARGS...]",
     "Runs PROGRAM with libhfs3shim.so preloaded by its absolute path (beside this helper, else the\n"
     "installed PREFIX/lib) and the mounts appended to HFS3_MOUNTS: no ldconfig or hand-written LD_PRELOAD\n"
     "needed. HFS3_HELPER is set to this helper when unset. PROGRAM reads the shim's variables\n"
     "(hfs3-manifest help variables).\n\n"
     "Options:\n"
     "  -m, --mount LOCAL=REMOTE  a mount for PROGRAM (repeatable)\n"
     "  -h, --help          this text\n",
     "HFS3_MOUNTS HFS3_HELPER",
     "Exit status: PROGRAM's; 127 PROGRAM not found, 126 it could not be run, 2 a usage error.\n",
     "run a program with the shim preloaded and the mounts set"},
    {"_index", cmd_index, NULL, NULL, NULL, NULL, NULL},
    {"_get", cmd_get, NULL, NULL, NULL, NULL, NULL},
    {"_prefetch", cmd_prefetch, NULL, NULL, NULL, NULL, NULL},
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
                 "       hfs3-manifest COMMAND --help | help variables | --help | --version\n\n"
                 "Writes and reads the manifests that let libhfs3shim.so show a Hugging Face model folder\n"
                 "stored in S3 as a local read-only directory, and warms the local cache.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].usage && strchr(commands[i].name, ' '))
            fprintf(out, "    %-14s%s\n", commands[i].name, commands[i].summary);
        else if (commands[i].usage)
            fprintf(out, "  %-16s%s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nhfs3-manifest COMMAND --help shows a command's options.\n\n" REMOTE_HELP "\n" EXIT_HELP
                 "See hfs3-manifest help variables, hfs3-manifest(1), hfs3(7) and docs/reference.md.\n");
}

/* One "  NAME  meaning" line of vars[]. */
static void print_var(size_t i)
{
    printf("  %-21s %s\n", vars[i].name, vars[i].help);
}

static void print_vars(const char *names)
{
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        size_t n = strlen(vars[i].name);
        for (const char *p = names; (p = strstr(p, vars[i].name)); p += n)
            if ((p == names || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) {
                print_var(i);
                break;
            }
    }
}

static void variables_help(void)
{
    printf("Variables hfs3 reads. h: hfs3-manifest, s: libhfs3shim.so (which passes its environment to the\n"
           "helper it runs), t: tests only. Booleans take 1/0, true/false, yes/no or on/off.\n\n");
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        printf("  %-21s %-3s%s\n", vars[i].name, vars[i].where, vars[i].help);
    }
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
            printf("usage: hfs3-manifest %s\n\n%s\n", commands[i].usage, commands[i].help);
            printf("Variables:\n");
            print_vars(commands[i].vars);
            printf("\n%s\n%s", commands[i].exit ? commands[i].exit : EXIT_HELP, REMOTE_HELP);
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
            if (!strcmp(argv[2], "variables")) {
                variables_help();
                return 0;
            }
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
        if (commands[i].fn && !strcmp(argv[1], commands[i].name)) {
            current = commands[i].name;
            int rc = commands[i].fn(argc - 1, argv + 1);
            hfs3_s3_park_close(); /* the connections a fetch kept for its next file */
            return rc;
        }
    cmd_err("unknown command '%s'", argv[1]);
    fprintf(stderr, "Try 'hfs3-manifest --help' for more information.\n");
    return 2;
}
