/* index.h - the binary index of a manifest that the helper writes into the cache and the shim maps.
 * libc-only on purpose: the shim includes this header. Layout and invariants: docs/internals.md.
 * The format details below are owned together by lib/index.c (writer) and shim/ (reader). */
#ifndef HFS3_INDEX_H
#define HFS3_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 of the REMOTE string, as 16 lowercase hex digits + NUL: the name of mounts/<key>/. */
static inline void hfs3_mountkey(const char *remote, char out[17])
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)remote; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    static const char hexd[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        out[i] = hexd[h & 15];
        h >>= 4;
    }
    out[16] = 0;
}

#ifndef HFS3_SHIM_BUILD
struct hfs3_manifest;
/* Writes the index of m to path atomically (temp + rename). 0 or a negative errno with a message. */
int hfs3_index_write_file(const struct hfs3_manifest *m, const char *path);
#endif

#endif
