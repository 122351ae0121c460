/* lastuse.c - records that the shim opened a cached blob, for the cache's least-recently-used eviction
 * (HFS3_CACHE_MAX, lib/gc.c, include/hfs3/lastuse.h). One call after a successful open of a blob, with the
 * path that was opened (not in a vfork child):
 *     fd = sh_r.open(rp, O_RDONLY | keep);          rp = "CACHE/blobs/<sha256>"
 *     if (fd >= 0 && !sh_in_vfork()) hfs3_shim_lastuse(rp);
 * Cost: openat + fstat + close of CACHE/locks/<sha256>.lock by raw system call, plus one utimensat at most
 * once a minute per blob; nothing per read. Stack: a few words; the lock path is built in thread-local
 * storage (4 KiB + 80 per thread that opens a blob). */
#include <string.h>

/* the shim's raw calls go to libc's syscall(), never to the shim's own interposer (sysc.c, shim.h) */
__attribute__((visibility("hidden"))) long sh_libc_syscall(long n, ...);
#define syscall sh_libc_syscall
#include "hfs3/lastuse.h"

__attribute__((visibility("hidden"))) void hfs3_shim_lastuse(const char *blob_path);

void hfs3_shim_lastuse(const char *blob_path)
{
    static __thread char lock[4096 + 80];
    const char *b = strrchr(blob_path, '/');
    if (!b || b - blob_path < 6 || strncmp(b - 6, "/blobs", 6) || strlen(b + 1) != 64)
        return;
    size_t dir = (size_t)(b - 6 - blob_path);
    if (dir + sizeof "/locks/" + 64 + sizeof ".lock" > sizeof lock)
        return;
    memcpy(lock, blob_path, dir);
    memcpy(lock + dir, "/locks/", 7);
    memcpy(lock + dir + 7, b + 1, 64);
    memcpy(lock + dir + 7 + 64, ".lock", 6);
    hfs3_lastuse_touch_at(AT_FDCWD, lock);
}
