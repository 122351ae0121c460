/* cache.h - the local cache directory (docs/internals.md): where it is, who may use it, the paths inside
 * it, per-file locks, and the refresh of a mount's manifest and index (`_index`).
 * Layout: blobs/<sha256>, tmp/<sha256>.part|.done, locks/<sha256>.lock, fails/<sha256>.err,
 * mounts/<mountkey>/{manifest.json,etag,index,lock,error}. Fetching blobs is fetch.h's. */
#ifndef HFS3_CACHE_H
#define HFS3_CACHE_H

#include <stddef.h>
#include <sys/types.h>
#include "hfs3/config.h"
#include "hfs3/manifest.h"

typedef struct hfs3_cache {
    char *dir;        /* the cache directory as resolved (no trailing '/') */
    int shared;       /* 1: the directory was already setgid + group-writable: share with the group */
    mode_t dir_mode;  /* 0700, or 02770 when shared */
    mode_t file_mode; /* files other than blobs: 0600, or 0660 when shared */
    mode_t blob_mode; /* verified blobs: 0444, or 0440 when shared */
} hfs3_cache;

/* The cache directory the environment names: $HFS3_CACHE_DIR, else $XDG_CACHE_HOME/hfs3, else
 * $HOME/.cache/hfs3 (empty variables count as unset). Returns a malloc'd string, or NULL with a message
 * when none of them is set (or on OOM). */
char *hfs3_cache_dir_from_env(void);

/* Checks that dir may be used as a cache (it need not exist): no component of the path is a symlink
 * owned by someone other than the user or root, and the directory, if it exists, is a directory that
 * others cannot write. On success *shared (may be NULL) says whether it exists setgid + group-writable.
 * -EPERM (refused, message names the path and the rule), -ENOTDIR, or another errno. */
int hfs3_cache_check_dir(const char *dir, int *shared);

/* Resolves (dir NULL: from the environment), checks and creates the cache with blobs/ tmp/ locks/ fails/
 * mounts/. On success *out is the caller's (hfs3_cache_free). */
int hfs3_cache_open(const char *dir, hfs3_cache **out);
void hfs3_cache_free(hfs3_cache *c);

/* dir/sub/name+suffix, malloc'd (NULL on OOM). sub and suffix may be NULL or "". */
char *hfs3_cache_path(const hfs3_cache *c, const char *sub, const char *name, const char *suffix);

/* Opens (creating with the cache's file mode) the lock file at path and flock()s it exclusively.
 * nonblock: -EWOULDBLOCK at once when another process holds it. On success *fd is the descriptor
 * (O_CLOEXEC); hfs3_cache_unlock closes it (which releases the lock). *waited (may be NULL) is set when
 * the lock was busy and this call had to wait. */
int hfs3_cache_lock(const hfs3_cache *c, const char *path, int nonblock, int *fd, int *waited);
void hfs3_cache_unlock(int fd);

/* Creates path (O_CREAT|O_EXCL when excl) with mode set regardless of the umask (fchmod when we own it).
 * Returns the descriptor (O_CLOEXEC) or a negative errno with a message naming the path. */
int hfs3_cache_create(const char *path, int flags, mode_t mode);

/* mkdir with exactly mode (chmod after it: the umask would cut the group bits a shared cache needs). An
 * existing one is left as it is (in a shared cache it may be another user's, and only its owner may chmod
 * it) but must be a real directory (not a symlink) that others cannot write: -ENOTDIR or -EPERM otherwise,
 * with a message naming the path. */
int hfs3_cache_mkdir(const char *path, mode_t mode);

/* Writes data to path atomically (temp beside it, fchmod mode, fsync, rename). */
int hfs3_cache_write_atomic(const char *path, const void *data, size_t n, mode_t mode);

/* Writes a one-line message (a trailing newline is added) to path atomically; errors are ignored:
 * this is how failures are reported, a second failure has nowhere to go. */
void hfs3_cache_write_line(const hfs3_cache *c, const char *path, const char *msg);

/* mounts/<hfs3_mountkey(spec)>, created with the cache's directory mode. *out malloc'd. */
int hfs3_cache_mount_dir(const hfs3_cache *c, const char *spec, char **out);

/* The `_index` refresh of mount `spec` (r: its parsed remote). Under mounts/K/lock (taken here unless
 * lock_fd >= 0 says the caller holds it): offline (HFS3_OFFLINE=1) uses the cached index, failing when
 * there is none; otherwise a GET of the manifest with If-None-Match of the stored ETag: 304 touches the
 * index, 200 validates the document and installs manifest.json, etag and the index. A failure while an
 * index is cached warns one line and returns 0 with *stale = 1; any other failure writes mounts/K/error
 * (one line naming the remote, the key and the cause) and returns the error. Success removes error.
 * When another process refreshed the mount while this one waited for the lock, its result is used. */
int hfs3_mount_refresh(const hfs3_cache *c, const hfs3_remote *r, int lock_fd, int *stale);

/* Records a failure of the mount that happened before a refresh could start (e.g. a configuration
 * error): writes mounts/K/error. */
void hfs3_mount_set_error(const hfs3_cache *c, const char *spec, const char *msg);

/* Loads and validates mounts/K/manifest.json of spec. -ENOENT when none is cached. */
int hfs3_mount_load(const hfs3_cache *c, const char *spec, hfs3_manifest **out);

#endif
