/* cache.h - the local cache directory (docs/internals.md): where it is, who may use it, the paths inside
 * it, per-file locks, and the refresh of a mount's manifest and index (`_index`).
 * Layout: blobs/<sha256>, tmp/<sha256>.<random>.part|.done, locks/<sha256>.lock, fails/<sha256>.err,
 * mounts/<mountkey>/{manifest.json,etag,index,lock,error}, unflushed/<blob name> (durable.h). Fetching blobs is fetch.h's. Everything inside is
 * reached through the descriptors hfs3_cache_open checked (lib/cachefs.c; docs/security.md). */
#ifndef HFS3_CACHE_H
#define HFS3_CACHE_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "hfs3/config.h"
#include "hfs3/manifest.h"

typedef struct hfs3_cache {
    char *dir;          /* the cache directory as named (no trailing '/'), for messages */
    int shared;         /* 1: the directory is setgid + group-writable: shared with its group */
    mode_t dir_mode;    /* 0700, or 03770 when shared (setgid + sticky + group rwx) */
    mode_t file_mode;   /* lock files: 0600, or 0660 when shared (a member records a use on another's lock) */
    mode_t entry_mode;  /* what else the helper writes (mounts/K's manifest.json, etag, canonical, ...; fails/):
                         * 0600, or 0640 when shared: not group-writable, for a file that others can write is not
                         * its owner's (docs/security.md); all are replaced by rename, never written in place */
    mode_t blob_mode;   /* verified blobs: 0444, or 0440 when shared */
    uid_t uid;          /* this user (effective) */
    gid_t gid;          /* the cache directory's group */
    gid_t parent_gid;   /* hfs3_cache_open: the group of a setgid parent a new cache was created in */
    int verify_foreign; /* HFS3_VERIFY_FOREIGN=1: re-hash blobs and refetch manifests another user wrote */
    int fd;             /* the cache directory, reached and checked as hfs3_cache_open says */
    int blobs, tmp, locks, fails, mounts, unflushed; /* its subdirectories, checked */
    char *p_blobs, *p_tmp, *p_locks, *p_fails, *p_mounts, *p_unflushed; /* their paths, for messages */
} hfs3_cache;

/* The cache directory the environment names: $HFS3_CACHE_DIR, else $XDG_CACHE_HOME/hfs3, else
 * $HOME/.cache/hfs3 (empty variables count as unset). Returns a malloc'd string, or NULL with a message
 * when none of them is set (or on OOM). */
char *hfs3_cache_dir_from_env(void);

/* Checks that dir may be used as a cache (it need not exist), by its path: no component of the path is a
 * symlink owned by someone other than the user or root, and the directory, if it exists, is a directory that
 * others cannot write. On success *shared (may be NULL) says whether it exists setgid + group-writable.
 * -EPERM (refused, message names the path and the rule), -ENOTDIR, or another errno. hfs3_cache_open does
 * this and more (every directory of the real path, owners, the cache's own mode). */
int hfs3_cache_check_dir(const char *dir, int *shared);

/* Resolves (dir NULL: from the environment), checks and creates the cache with blobs/ tmp/ locks/ fails/
 * mounts/ unflushed/, and opens a descriptor on each. Refused (-EPERM, -ENOTDIR, -ELOOP; one line naming the directory,
 * why, and what to run) before anything is read or written when: the path goes through a symlink of another
 * user, or through a directory writable by others without the sticky bit or owned by another user (root
 * aside); the cache is not a directory or is writable by others; a private cache (or a directory in it) is
 * not the user's or is group-writable; a shared cache is not the user's or root's, or lacks setgid + sticky
 * + group rwx (added when the user owns it); a subdirectory breaks hfs3_cache_check_subdir. On success *out
 * is the caller's (hfs3_cache_free). */
int hfs3_cache_open(const char *dir, hfs3_cache **out);
/* The private fallback of a default cache that cannot be used (dir NULL, no HFS3_CACHE_DIR: hfs3_cache_open then
 * warns one line and uses it, as the shim does): $TMPDIR/hfs3-<euid> (an absolute TMPDIR), else
 * /var/tmp/hfs3-<euid>. malloc'd, NULL on OOM. */
char *hfs3_cache_dir_fallback(void);
void hfs3_cache_free(hfs3_cache *c);

/* dir/sub/name+suffix, malloc'd (NULL on OOM). sub and suffix may be NULL or "". For messages. */
char *hfs3_cache_path(const hfs3_cache *c, const char *sub, const char *name, const char *suffix);

/* ---- the on-disk rules (lib/cachefs.c). dpath is the path of dirfd, for messages; name one component. ---- */

/* Whether a file read from the cache may be used: a regular file, not writable by others, owned by the user
 * or root, or in a shared cache carrying the cache's group. 0 or -EPERM with a message naming it. */
int hfs3_cache_check_file(const hfs3_cache *c, const struct stat *st, const char *dpath, const char *name);
/* Whether a directory of the cache may be used: not writable by others; private: the user's and not group-
 * writable; shared: the cache's group, setgid + group rwx (+ sticky when asked), owned by anyone of the group
 * (a member's directory: members are trusted for content). A directory of the user's own that lacks the bits
 * is fchmod-ed through fd (fd -1: never). 0, -ENOTDIR or -EPERM with a message. */
int hfs3_cache_check_subdir(const hfs3_cache *c, int fd, const struct stat *st, int sticky, const char *path);
/* Opens directory name under dirfd (O_DIRECTORY | O_NOFOLLOW), creating it first when create_mode is not 0
 * (then exactly that mode, set on the new directory only), and checks it. Returns the descriptor or -ENOENT
 * (not there, no create), -ELOOP (a symlink), -ENOTDIR, -EPERM, with a message. */
int hfs3_cache_opendir(const hfs3_cache *c, int dirfd, const char *name, mode_t create_mode, int sticky,
                       const char *dpath);
/* Opens an existing file (O_NOFOLLOW, O_NONBLOCK against FIFOs) and checks it with hfs3_cache_check_file;
 * opened for writing it must also be the user's own with one link. *st (may be NULL) is its fstat. Returns
 * the descriptor, or -ENOENT (quiet: a message is set but callers may ignore it), -ELOOP, -EPERM ... */
int hfs3_cache_openat(const hfs3_cache *c, int dirfd, const char *name, int flags, struct stat *st,
                      const char *dpath);
/* hfs3_cache_openat + read it whole (at most max bytes; NUL-terminated *out, the caller's). */
int hfs3_cache_read(const hfs3_cache *c, int dirfd, const char *name, size_t max, char **out, size_t *len,
                    struct stat *st, const char *dpath);
/* fstatat without following, then the file rules: 0, -ENOENT (no message), -ELOOP or -EPERM. */
int hfs3_cache_stat(const hfs3_cache *c, int dirfd, const char *name, struct stat *st, const char *dpath);
/* Reads fd to its end (at most max bytes); what names it in messages. */
int hfs3_read_fd(int fd, size_t max, char **out, size_t *len, const char *what);

/* Opens the lock file name under dirfd and flock()s it exclusively. An existing one must pass
 * hfs3_cache_check_file (a symlink, a FIFO or a stranger's file is refused, never followed, never
 * chmod-ed); a missing one is created O_EXCL with the cache's file mode. nonblock: -EWOULDBLOCK at once when
 * another process holds it. On success *fd (O_CLOEXEC) holds the lock until hfs3_cache_unlock closes it.
 * *waited (may be NULL) is set when the lock was busy and this call had to wait. */
int hfs3_cache_lock(const hfs3_cache *c, int dirfd, const char *name, const char *dpath, int nonblock, int *fd,
                    int *waited);
void hfs3_cache_unlock(int fd);

/* Creates a new file under dirfd named stem.<16 random hex digits>suffix (suffix may be NULL), O_EXCL |
 * O_NOFOLLOW, mode exactly 0600, open read-write; its name goes to name. Returns the descriptor. */
int hfs3_cache_mktemp(int dirfd, const char *stem, const char *suffix, char *name, size_t namesz,
                      const char *dpath);
/* Replaces name under dirfd atomically: hfs3_cache_mktemp(name.tmp), write, fchmod mode, fsync, renameat. */
int hfs3_cache_write_atomic(int dirfd, const char *name, const void *data, size_t n, mode_t mode,
                            const char *dpath);
/* Writes a one-line message (a trailing newline is added) as name under dirfd atomically; errors are
 * ignored: this is how failures are reported, a second failure has nowhere to go. */
void hfs3_cache_write_line(const hfs3_cache *c, int dirfd, const char *name, const char *dpath, const char *msg);

/* Calls fn(ud, name) for each entry of dirfd whose name starts with prefix and ends with suffix, until fn
 * returns non-zero (that value is returned). -errno when the directory cannot be read. */
typedef int (*hfs3_cache_scan_fn)(void *ud, const char *name);
int hfs3_cache_scan(int dirfd, const char *prefix, const char *suffix, hfs3_cache_scan_fn fn, void *ud);

/* mounts/<hfs3_mountkey(spec)> (created with create set: setgid + group rwx without sticky when shared, since
 * every member's refresh replaces the files in it), opened and checked. Returns its descriptor; *path
 * (may be NULL) gets its malloc'd path. */
int hfs3_cache_mount_dir(const hfs3_cache *c, const char *spec, int create, char **path);
/* The key of the mount directory this user works in for spec (16 hex + NUL into key): hfs3_mountkey_as's; under
 * HFS3_VERIFY_FOREIGN=1 in a shared cache, one of the user's own when a member holds that name
 * (include/hfs3/ownkey.h), made when create is set. 0, or -errno with a message. */
int hfs3_cache_mount_key(const hfs3_cache *c, const char *spec, int create, char key[17]);

/* The `_index` refresh of mount `spec` (r: its parsed remote). Under mounts/K/lock (taken here unless
 * lock_fd >= 0 says the caller holds it): offline (HFS3_OFFLINE=1) uses the cached index, failing when
 * there is none; otherwise a GET of the manifest with If-None-Match of the stored ETag: 304 touches the
 * index, 200 validates the document and installs manifest.json, etag and the index. A failure while an
 * index is cached warns one line and returns 0 with *stale = 1; any other failure writes mounts/K/error
 * (one line naming the remote, the key and the cause) and returns the error. Success removes error.
 * When another process refreshed the mount while this one waited for the lock, its result is used. */
int hfs3_mount_refresh(const hfs3_cache *c, const hfs3_remote *r, int lock_fd, int *stale);
/* 1 when this thread's last hfs3_mount_refresh failed with an index cached under that very spelling: it
 * refused it (its REMOTE now resolves to another endpoint; not the user's own under HFS3_VERIFY_FOREIGN=1).
 * `_index` exits 3 then: the shim's sign not to map it, which needs no file written (a read-only cache, a full
 * disk, a member's mounts/K/error in the way). */
int hfs3_mount_refused(void);

/* Records a failure of the mount that happened before a refresh could start (e.g. a configuration
 * error): writes mounts/K/error. */
void hfs3_mount_set_error(const hfs3_cache *c, const char *spec, const char *msg);

/* 1 when spec has an index and a manifest.json cached under its own spelling that the rules (and
 * HFS3_VERIFY_FOREIGN) accept; 0 otherwise. Nothing is created or written. */
int hfs3_mount_cached(const hfs3_cache *c, const char *spec);

/* Loads and validates mounts/K/manifest.json of spec. -ENOENT when none is cached. */
int hfs3_mount_load(const hfs3_cache *c, const char *spec, hfs3_manifest **out);

#endif
