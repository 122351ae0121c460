/* manifest.h - the manifest document, format v1 (docs/manifest.md): parse with every validation rule and
 * limit, build from entries, write canonical bytes, resolve symlinks inside the tree.
 * JSON through cJSON. No I/O here. */
#ifndef HFS3_MANIFEST_H
#define HFS3_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include "hfs3/util.h"

#define HFS3_MANIFEST_VERSION 1
#define HFS3_MAX_ENTRIES 262144
#define HFS3_MAX_DOC (64u << 20)
#define HFS3_MAX_PATH 4096
#define HFS3_MAX_NAME 255
#define HFS3_MAX_DEPTH 64
#define HFS3_MAX_SIZE ((1ULL << 53) - 1)
#define HFS3_MAX_HOPS 40
#define HFS3_MIN_CHUNK_SIZE (1ULL << 20)       /* chunk digests (optional): chunk_size is a power of two */
#define HFS3_MAX_CHUNK_SIZE (1ULL << 30)
#define HFS3_CHUNK_SIZE (8ULL << 20)           /* what `build` writes when it hashes content itself */

typedef enum hfs3_etype { HFS3_DIR = 1, HFS3_FILE = 2, HFS3_SYMLINK = 3 } hfs3_etype;

typedef struct hfs3_entry {
    char *path;        /* relative, '/'-separated, no leading '/' */
    hfs3_etype type;
    uint64_t size;     /* files */
    char sha256[65];   /* files: 64 lowercase hex */
    char *etag;        /* files: as S3 returned it, may be NULL */
    long long mtime;   /* files (0 when unknown) */
    char *target;      /* symlinks: the target, byte for byte */
    char *chunks;      /* files, optional: the sha256 of each chunk_size slice, 64 hex each, concatenated */
} hfs3_entry;

typedef struct hfs3_manifest {
    int version;
    char *layout;      /* "flat" or "hf-cache" */
    char *generator;   /* "hfs3-manifest 0.1.0" */
    char *revision;    /* may be NULL */
    uint64_t chunk_size; /* 0, or the slice size of the entries' chunk digests (a power of two, 1 MiB..1 GiB) */
    hfs3_entry *entries;
    size_t n, cap;
} hfs3_manifest;

/* Parses and validates a document. On success *out is the caller's (hfs3_manifest_free).
 * -EINVAL with a message naming the offending path and rule ("manifest: entry \"a/../b\": path has a
 * '..' component"), -E2BIG past a limit, -ENOTSUP for an unknown major version. */
int hfs3_manifest_parse(const char *json, size_t n, hfs3_manifest **out);

/* Building: new, add entries (any order, copies the strings), then finish: sorts bytewise, adds the
 * missing parent directories and validates with the same rules as parse.
 * new: layout NULL means "flat"; generator is "hfs3-manifest " HFS3_VERSION; NULL on out of memory.
 * add: refuses a path that breaks the path rules at once (-EINVAL, or -E2BIG past a length limit), and
 * more than HFS3_MAX_ENTRIES entries (-E2BIG). finish may be called again after more adds. */
hfs3_manifest *hfs3_manifest_new(const char *layout, const char *revision);
int hfs3_manifest_add(hfs3_manifest *m, const hfs3_entry *e);
int hfs3_manifest_finish(hfs3_manifest *m);
/* Validates m as it stands (sorted, parents present, paths, sizes, sha256, symlinks, limits). */
int hfs3_manifest_validate(const hfs3_manifest *m);

/* Canonical JSON: fixed key order, entries in path order, one entry per line, sizes as integers,
 * no timestamps beyond the entries' own mtime. Same manifest, same bytes. Appends to out.
 * Leaves out revision when NULL, etag when NULL, mtime when 0; writes m->generator as it is.
 * On failure (out's cap reached: -E2BIG, or -ENOMEM) out has been freed, as hfs3_buf does. */
int hfs3_manifest_write(const hfs3_manifest *m, hfs3_buf *out);

void hfs3_manifest_free(hfs3_manifest *m);

/* Binary search by exact path ("" is the root, which has no entry: returns NULL). */
const hfs3_entry *hfs3_manifest_find(const hfs3_manifest *m, const char *path);

/* Resolves a symlink entry's target relative to its directory, following further symlinks (also in
 * intermediate components) inside the tree. On success *out is the final non-symlink entry, or NULL
 * when the target is the root directory. -ENOENT when the target does not exist in the tree (dangling),
 * -ELOOP after HFS3_MAX_HOPS hops, -EXDEV when it leaves the tree (absolute or too many '..').
 * A target through a file ("file/x") is -ENOENT too. A non-symlink entry resolves to itself. */
int hfs3_manifest_resolve(const hfs3_manifest *m, const hfs3_entry *link, const hfs3_entry **out);

/* Summary counts. */
void hfs3_manifest_counts(const hfs3_manifest *m, size_t *files, size_t *dirs, size_t *links, uint64_t *bytes);

/* Checks one relative path against the path rules (empty, absolute, '.', '..', '//', NUL/control
 * characters, component and path length, depth). 0 or -EINVAL with a message. */
int hfs3_manifest_check_path(const char *path);

#endif
