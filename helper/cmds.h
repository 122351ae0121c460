/* cmds.h - the hfs3-manifest subcommands, one file each. Each takes argv from the subcommand name on
 * (argv[0] = "build", ...) and returns the process exit status: 0 success, 1 failed check or operation,
 * 2 usage or configuration error (README.md, docs/hfs3-manifest.1). */
#ifndef HFS3_HELPER_CMDS_H
#define HFS3_HELPER_CMDS_H

int cmd_build(int argc, char **argv);    /* cmd_build.c */
int cmd_show(int argc, char **argv);     /* cmd_show.c */
int cmd_verify(int argc, char **argv);   /* cmd_verify.c */
int cmd_fetch(int argc, char **argv);    /* cmd_fetch.c: fetch REMOTE — warm the cache */
int cmd_index(int argc, char **argv);    /* cmd_fetch.c: _index REMOTE (for the shim) */
int cmd_get(int argc, char **argv);      /* cmd_fetch.c: _get [--lock-fd N] REMOTE PATH (for the shim) */
int cmd_prefetch(int argc, char **argv); /* cmd_fetch.c: _prefetch REMOTE PATH (for the shim) */
int cmd_cache(int argc, char **argv);    /* cmd_cache.c: cache du|gc|verify */
int cmd_status(int argc, char **argv);   /* cmd_status.c: status [--json] [REMOTE] */
int cmd_run(int argc, char **argv);      /* cmd_run.c: run [--mount LOCAL=REMOTE]... -- PROGRAM ARGS */


/* Shared by the subcommands (main.c). */
void cmd_usage(const char *cmd);                 /* prints usage of cmd (or all) to stderr, for exit 2 */
void cmd_help(const char *cmd);                  /* prints cmd's --help text to stdout, for exit 0 */
/* Prints one error line to stderr, prefixed "hfs3-manifest CMD: " (CMD: the subcommand running). */
void cmd_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cmd_progress_wanted(void);                   /* 1 when stderr is a terminal */
/* progress.c: a hfs3_progress_fn that redraws one line on stderr fitted to the terminal (a bar, percent, bytes,
 * rate, ETA, the current file), or, when stderr is no terminal and cmd_progress_plain(1) was called, prints a
 * plain line every few seconds. _file names the file in progress; _clear erases the line (before an error line,
 * the next call draws it again); _end erases it and forgets the run. */
#include <stddef.h>
#include <stdint.h>
void cmd_progress(void *ud, const char *phase, uint64_t done, uint64_t total, size_t files_done,
                  size_t files_total);
void cmd_progress_plain(int on);
void cmd_progress_file(const char *name);
void cmd_progress_clear(void);
void cmd_progress_end(void);
/* cmd_show.c: after a manifest GET failed with rc, when the prefix is a hub, words the error to advise
 * `build --all` (the message is left alone otherwise). */
struct hfs3_remote;
void cmd_hub_advice(const struct hfs3_remote *r, int rc);
/* Parses REMOTE, printing the error; returns NULL (exit 2) when it is malformed. */
struct hfs3_remote;
struct hfs3_remote *cmd_remote(const char *spec);
/* Parses `CMD [--FLAG] REMOTE` (show --json, verify --deep): *flag is set to 1 when --FLAG is given. Returns the
 * remote (the caller frees it) or NULL with *status the exit code: 0 after --help, 2 for a usage or
 * configuration error (already printed). */
struct hfs3_remote *cmd_flag_remote(int argc, char **argv, const char *flag_name, int *flag, int *status);

#endif
