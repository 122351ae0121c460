/* report.h - what `cache du` and `status` share (cmd_cache.c): a snapshot of the cache (its blobs and cached
 * manifests, read once), its summary and its per-mount report, as lines on stdout or as cJSON values. */
#ifndef HFS3_HELPER_REPORT_H
#define HFS3_HELPER_REPORT_H

#include <stdio.h>
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "hfs3/cache.h"
#include "hfs3/gc.h"

typedef struct cmd_snap {
    hfs3_cache *c;
    hfs3_gc_blob *b; /* sorted by sha */
    size_t nb;
    hfs3_gc_mount *m;
    size_t nm;
    uint64_t bytes;  /* of all blobs */
} cmd_snap;

/* Opens the cache and reads it: 0, or the exit status after one line "hfs3-manifest WHO: ..." (1 refused by
 * the cache's rules or unreadable, 2 none configured). */
int cmd_snap_read(cmd_snap *s, const char *who);
void cmd_snap_free(cmd_snap *s);
/* Adds the mounts' cblobs/ files (checked by their chunk digests, moved into blobs/ by the detached flush a few
 * seconds later) to s->b: cached files for `cache du` and `status`, which would say "not cached" for a file a
 * program has just opened. Not for gc, which lists them itself. 0, or -1 out of memory (s unchanged). */
int cmd_snap_add_cblobs(cmd_snap *s);
/* The cache's one-line summary on stdout (json 0, returns NULL) or as an object (the caller's). */
cJSON *cmd_snap_summary(cmd_snap *s, int json);
/* Each mount (only remote's when not NULL) and the repository folders of a hub mount: lines on stdout (json
 * 0, returns NULL) or an array (the caller's). */
cJSON *cmd_snap_mounts(cmd_snap *s, const char *remote, int json);
/* The first file entry of a cached manifest with that content (*mount: its mount), or NULL. */
const hfs3_entry *cmd_snap_entry(const cmd_snap *s, const char *sha, const hfs3_gc_mount **mount);
/* A mount's name in reports: its REMOTE, or mounts/KEY when the cache does not record it. */
const char *cmd_mount_name(const hfs3_gc_mount *m, char *buf, size_t n);
/* A UTC time as 2026-12-01T01:40:00Z ("never" for 0). */
const char *cmd_when(int64_t t, char *buf, size_t n);
/* Prints j on one line on stdout and frees it. */
void cmd_print_json(cJSON *j);
/* The text output of `status` and `cache du` carries what any member of a shared cache wrote (mounts/K/remote,
 * canonical, error files, manifest paths): cmd_text_begin gathers stdout, cmd_text_end prints it with every
 * control character but the newline escaped (\xHH, C1 controls in UTF-8 too), so no member's text can move the
 * reader's cursor, retitle the terminal or fake a line. cmd_text_begin returns the real stdout, or NULL (then
 * the output goes straight through, and cmd_text_end(NULL, ...) does nothing). */
FILE *cmd_text_begin(char **buf, size_t *len);
void cmd_text_end(FILE *real, char **buf, size_t *len);

#endif
