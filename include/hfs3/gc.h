/* gc.h - keeping the cache within its disk: the budget (HFS3_CACHE_MAX), the least-recently-used eviction and
 * the free-space check a fetch runs before its first byte, and the scans behind `cache du|gc|verify` and
 * `status`. Last use is the mtime of locks/<sha>.lock (include/hfs3/lastuse.h). A blob is only removed under
 * its own lock, taken without waiting: a blob being fetched or checked is skipped, never waited for. A blob a
 * process has open or mapped keeps working after the unlink (Linux keeps the inode until the last close). */
#ifndef HFS3_GC_H
#define HFS3_GC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "hfs3/cache.h"
#include "hfs3/manifest.h"

/* "123", "10K", "1.5G", "2T" (powers of 1024; an optional trailing "B"/"iB") or "80%" of fs_bytes.
 * 0 or -EINVAL with a message naming the text. */
int hfs3_gc_parse_size(const char *s, uint64_t fs_bytes, uint64_t *out);

/* The cache's budget from HFS3_CACHE_MAX (unset or empty: none). 0 (no budget), 1 (*max set) or -EINVAL. */
int hfs3_gc_budget(const hfs3_cache *c, uint64_t *max);

/* Records a use of blob sha now (the mtime of its lock file, when that exists). */
void hfs3_gc_touch(const hfs3_cache *c, const char *sha);

/* Before fetching blob sha of size bytes (its lock held by the caller): with a budget, removes the least
 * recently used other blobs until the cache plus the new file fits; then checks the file system's free
 * space. A file that cannot fit fails at once with -ENOSPC and one line (larger than the whole budget, the
 * file system too small even after eviction, or no budget and not enough free space), before anything is
 * downloaded or removed for nothing. Bytes of a dead fetch of this blob already in tmp/ count as there. */
int hfs3_gc_make_room(const hfs3_cache *c, const char *sha, uint64_t size);

/* One blob of the cache. */
typedef struct hfs3_gc_blob {
    char sha[65];
    uint64_t size;
    int64_t last_use;  /* seconds: the later of its lock file's and its own mtime */
    uid_t uid;
    int refs;          /* number of cached manifests naming it (filled by hfs3_gc_count_refs) */
    char mount[17];    /* "": blobs/<sha>; else mounts/<mount>/cblobs/<sha> (make_room's candidates only) */
} hfs3_gc_blob;

/* Lists blobs/ (names of 64 hex digits that are regular files), sorted by sha. *out is the caller's (free). */
int hfs3_gc_list(const hfs3_cache *c, hfs3_gc_blob **out, size_t *n);
/* The blob of that sha in a sorted list, or NULL. */
hfs3_gc_blob *hfs3_gc_find(hfs3_gc_blob *b, size_t n, const char *sha);

/* One cached mount: mounts/<key>/ with its manifest (NULL when none could be read: err says why). */
typedef struct hfs3_gc_mount {
    char key[17];
    char *remote;      /* mounts/K/remote (the REMOTE string), or NULL when unknown (an older cache) */
    char *canonical;   /* mounts/K/canonical: what REMOTE resolves to (hfs3_remote_identity), or NULL; mounts
                          with the same one are spellings of one endpoint + bucket + prefix */
    hfs3_manifest *m;
    char *load_err;    /* why m is NULL */
    char *error;       /* mounts/K/error: the last failed refresh, or NULL */
    int64_t error_time;
    int64_t checked;   /* the index's mtime: the last check against S3 (0: none) */
} hfs3_gc_mount;

/* Reads every mounts/<16 hex>/ (sorted by key); sets refs of the blobs each names (b may be NULL). */
int hfs3_gc_mounts(const hfs3_cache *c, hfs3_gc_blob *b, size_t nb, hfs3_gc_mount **out, size_t *n);
void hfs3_gc_mounts_free(hfs3_gc_mount *m, size_t n);

/* Writes mounts/<key>/remote (mfd, path mdir) when it does not hold spec yet: how `du` and `status` name a
 * mount. Errors are ignored. */
void hfs3_gc_note_remote(const hfs3_cache *c, int mfd, const char *mdir, const char *spec);

/* Pins: a pinned blob is busy for hfs3_gc_remove (LOCK_SH on locks/<sha>.pin.lock, which a dead holder
 * cannot leak: see gc.c). hfs3_gc_pin returns the pin's descriptor (waits up to a second for a gc's unlink to
 * end), or -errno with the message set; hfs3_gc_unpin(fd, sha) releases it. hfs3_gc_pinned_here: 1 when this
 * process pins sha (make_room does not try those, and says so). The shim pins by the same file. */
#define HFS3_GC_PIN_SUFFIX ".pin.lock"
int hfs3_gc_pin(const hfs3_cache *c, const char *sha);
void hfs3_gc_unpin(int fd, const char *sha);
int hfs3_gc_pinned_here(const char *sha);
/* The bytes of the mounts' cblobs/ files still to be hashed whole (found by their unflushed/ records): counted
 * against the budget, and evicted by make_room like blobs. */
uint64_t hfs3_gc_cblob_bytes(const hfs3_cache *c);
/* Those files as gc entries (mount set, refs 1), unsorted; *out is the caller's (free). */
int hfs3_gc_list_cblobs(const hfs3_cache *c, hfs3_gc_blob **out, size_t *n);
/* Removes dir/sha (dpath names dir in messages) unless its pin is held; the caller holds the blob's lock
 * (locks/<sha>.lock), so no pin can start in between. 0 (also with dry_run, nothing removed), -EBUSY pinned,
 * or -errno with the message set. */
int hfs3_gc_unlink_unpinned(const hfs3_cache *c, int dir, const char *dpath, const char *sha, int dry_run);

/* Removes blob b (dry_run: only checks it could) under its lock taken without waiting. 0 removed (or would
 * be), -EBUSY its lock is held (being fetched or checked) or it is pinned, -EPERM another user's in a sticky directory
 * (only its owner or root may remove it), -ENOENT already gone, or another error. With check set, the blob
 * is first re-hashed under the lock and only removed when it does not match its name (the message says what
 * it hashes to): 1 it is good (kept); -EPERM then means bad but another user's. */
int hfs3_gc_remove(const hfs3_cache *c, const hfs3_gc_blob *b, int dry_run, int check);

/* What a cached manifest holds and how much of it is in the cache: files (file entries; a symlink is not
 * one), cached_files, bytes by content (equal content counted once), and the latest last use among its
 * cached blobs (0: none). group NULL: the whole manifest; otherwise only the entries under group/ (a
 * repository folder such as models--org--name of a hub mount). b: sorted by sha (hfs3_gc_list). */
typedef struct hfs3_gc_usage {
    size_t files, cached_files;
    uint64_t bytes_cached, bytes_missing;
    int64_t last_use;
} hfs3_gc_usage;
int hfs3_gc_usage_of(const hfs3_manifest *m, const char *group, hfs3_gc_blob *b, size_t nb, hfs3_gc_usage *u);
/* Whether a top-level name is a Hugging Face repository folder (models--, datasets--, spaces--). */
int hfs3_gc_is_repo(const char *name);

/* n bytes as "40.0 MiB" into buf. */
const char *hfs3_gc_human(uint64_t n, char *buf, size_t len);

/* Sum of the sizes of tmp/ files (fetches in progress or dead). */
uint64_t hfs3_gc_tmp_bytes(const hfs3_cache *c);

#endif
