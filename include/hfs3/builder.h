/* builder.h - what `hfs3-manifest build`, `show` and `verify` do, as library calls: list a remote, find each
 * file's sha256 (local files, LFS blob names, huggingface_hub bookkeeping, or streaming from S3, in parallel),
 * turn .rclonelink objects into symlinks, check the result, publish it; read a stored manifest back.
 * Printing is the caller's. (Checking a bucket against a manifest: verify.h.) */
#ifndef HFS3_BUILDER_H
#define HFS3_BUILDER_H

#include <stddef.h>
#include <stdint.h>
#include "hfs3/config.h"
#include "hfs3/manifest.h"
#include "hfs3/util.h"

/* Called from worker threads (serialised by the builder) while hashing or verifying. */
typedef void (*hfs3_progress_fn)(void *ud, const char *phase, uint64_t bytes_done, uint64_t bytes_total,
                                 size_t files_done, size_t files_total);

typedef struct hfs3_build_opts {
    const char *local_dir;      /* --local DIR or NULL */
    const char *layout;         /* "auto" (NULL), "flat" or "hf-cache" */
    int threads;                /* 0: all cores for local hashing, 8 for S3 streams */
    hfs3_progress_fn progress;  /* may be NULL */
    void *progress_ud;
} hfs3_build_opts;

/* Where each file's sha256 came from, for the summary. */
typedef struct hfs3_build_stats {
    size_t from_local, from_lfs_name, from_metadata, from_s3;
    size_t metadata_outdated; /* .metadata files not used: the file is newer, or its mtime unknown */
    uint64_t bytes_hashed;
} hfs3_build_stats;

/* Builds the manifest of remote r. On success *out is the caller's. Problems that the user must fix (a local
 * file missing from the bucket, a link escaping the tree, `x` beside `x.rclonelink`...) are appended to
 * problems, one line each naming the key, and the call returns -EINVAL. Other failures: a negative errno
 * with hfs3_errmsg(). */
int hfs3_build(const hfs3_remote *r, const hfs3_build_opts *o, hfs3_manifest **out, hfs3_buf *problems,
               hfs3_build_stats *stats);

/* Writes m's canonical bytes to the manifest key unless the stored object already has exactly those bytes.
 * *written = 1 when it PUT the object. */
int hfs3_publish(const hfs3_remote *r, const hfs3_manifest *m, int *written);

/* GETs and validates the stored manifest. *doc (optional) receives the raw document. -ENOENT when there
 * is none. */
int hfs3_fetch_manifest(const hfs3_remote *r, hfs3_manifest **out, hfs3_buf *doc);

#endif
