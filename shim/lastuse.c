/* lastuse.c - records that the shim opened a cached blob, for the cache's least-recently-used eviction
 * (HFS3_CACHE_MAX, lib/gc.c, include/hfs3/lastuse.h). One call where an open finds CACHE/blobs/<sha>
 * already there (not in a vfork child):
 *     hfs3_shim_lastuse("CACHE/locks/<sha>.lock");
 * Cost: openat + fstat + close by raw system call, plus one utimensat at most once a minute per blob. */
#include "hfs3/lastuse.h"

__attribute__((visibility("hidden"))) void hfs3_shim_lastuse(const char *lock_path);

void hfs3_shim_lastuse(const char *lock_path)
{
    hfs3_lastuse_touch_at(AT_FDCWD, lock_path);
}
