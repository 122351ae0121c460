/* verify.h - check a bucket against its manifest (`hfs3-manifest verify`). */
#ifndef HFS3_VERIFY_H
#define HFS3_VERIFY_H

#include <stddef.h>
#include "hfs3/builder.h"

/* Checks that every file and symlink of m exists in the bucket with the manifest's size and ETag; with deep,
 * streams each file and compares its sha256. Problems go to `problems` (one line each); returns -EINVAL when
 * there are any. o supplies progress and threads (may be NULL). */
int hfs3_verify(const hfs3_remote *r, const hfs3_manifest *m, int deep, const hfs3_build_opts *o,
                hfs3_buf *problems, size_t *checked);

#endif
