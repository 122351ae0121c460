/* shim.h - internals shared by the shim's .c files (all hidden: -fvisibility=hidden; only interposers in wrap.c and
 * dir.c are exported). libc only: no other hfs3 header but index.h. */
#ifndef HFS3_SHIM_H
#define HFS3_SHIM_H

#define HFS3_SHIM_BUILD 1
#include "hfs3/index.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <sys/types.h>

#define SH_EXPORT __attribute__((visibility("default")))
#define SH_PATH 4096
#define SH_MAX_HOPS 40
#define SH_FD_MAX 16384

/* The real libc functions, resolved once with dlsym(RTLD_NEXT). */
struct sh_real {
    int (*open)(const char *, int, ...);
    int (*openat)(int, const char *, int, ...);
    int (*close)(int);
    int (*stat)(const char *, struct stat *);
    int (*lstat)(const char *, struct stat *);
    int (*fstat)(int, struct stat *);
    int (*fstatat)(int, const char *, struct stat *, int);
    ssize_t (*readlink)(const char *, char *, size_t);
    char *(*getcwd)(char *, size_t);
    int (*chdir)(const char *);
    int (*mkdir)(const char *, mode_t);
    int (*statfs)(const char *, struct statfs *);
    char *(*realpath)(const char *, char *);
    int (*access)(const char *, int);
    int (*fcntl)(int, int, ...);
};
extern struct sh_real sh_r;
/* Looks up a real symbol (cached by the caller in a static pointer). */
void *sh_sym(const char *name);
#define REAL(name, type)                                                                                    \
    ({                                                                                                      \
        static __typeof__(type) p_;                                                                             \
        __typeof__(type) q_ = __atomic_load_n(&p_, __ATOMIC_RELAXED);                                                   \
        if (!q_) {                                                                                          \
            q_ = (type)sh_sym(#name);                                                                       \
            __atomic_store_n(&p_, q_, __ATOMIC_RELAXED);                                                    \
        }                                                                                                   \
        q_;                                                                                                 \
    })

struct sh_mount {
    char path[SH_PATH];        /* normalised local path, no trailing '/' */
    size_t len;
    size_t first_len;          /* length of its first component, with the '/' (the fast path's one check) */
    char remote[1024];
    char key[17];
    char dir[SH_PATH];         /* CACHE/mounts/<key> */
    int state;                 /* atomic: 0 not loaded, 1 loading, 2 loaded */
    int broken;                /* loaded but no index: inside fails with EIO */
    int prefetched;
    const struct hfs3_index_header *ix;
    size_t ixlen;
    const struct hfs3_index_entry *ents;
    const uint32_t *kids;
    const char *strs;
    dev_t dev;                 /* st_dev given to files (the tree's device) */
    time_t mtime;              /* the index's mtime: the time of symlinks, which the manifest does not keep */
    /* hubs (hub.c): a configured mount loaded as a hub, and the sub-mounts made for its repositories */
    int hub;                   /* its root lists the repositories of `names` (broken is set too: no index) */
    void *names;               /* atomic: the current repository list (hub.c's struct sh_names) */
    long hub_checked;          /* atomic: when the list was last checked against S3 */
    int hub_busy;              /* atomic: a thread is checking it */
    int sub;                   /* a repository of hub sh_mounts[hubm] (a slot after the configured mounts) */
    int hubm;
    int ready;                 /* atomic: the sub-mount slot is filled in */
    long loaded_at;            /* atomic: when load() last ran (a broken sub-mount is looked at again later) */
    int check_due;             /* atomic: mapped offline by a vfork child, the helper's endpoint check not run yet */
    int sub_failed;            /* atomic, a hub's: its repositories that failed to load in this process (one logged) */
    int retry;                 /* atomic: the last load failed for a reason that may pass (issue 41): -errno of a local
                                * one (descriptors, memory: loaded again at the next call, which gets it), 1 the
                                * helper's (a network error: loaded again at a call SH_RETRY_S later); 0 none */
    int told;                  /* atomic: a load's failure was logged (the loads tried again log at info) */
    int idx;                   /* its number: sh_mnt(idx) == this mount (fdtab, sh_loc's m) */
};
#define SH_RETRY_S 2
extern struct sh_mount *sh_mounts;   /* sh_nmounts of them, mapped in the constructor */
extern int sh_nmounts;               /* the configured mounts; hub.c's sub-mounts are numbered after them */
/* Sub-mount slots (repositories of hubs entered in one process, hub.c) live in chunks mapped as they are
 * needed: chunk k holds SH_SUB_CHUNK0 << k slots, so the address space grows with the repositories entered (a
 * process that enters none maps none). Numbers up to sh_sub_max (SH_SUB_MAX, or HFS3_TEST_SUB_MAX for tests);
 * a repository that fails to load takes none (issue 33 item 4). */
#define SH_SUB_MAX (1 << 20)
#define SH_SUB_CHUNK0 16
#define SH_SUB_NCHUNK 17   /* SH_SUB_CHUNK0 * (2^17 - 1) >= SH_SUB_MAX */
extern int sh_sub_max;
extern struct sh_mount *sh_sub_chunk[SH_SUB_NCHUNK];   /* atomic: published once, never unmapped */
/* Sub-mount slot s (0-based), or NULL when its chunk is not mapped (yet): the number of a published slot (hub.c's
 * hash table, an sh_loc, an fdtab entry) always has its chunk, published before it. */
static inline struct sh_mount *sh_sub_slot(int s)
{
    unsigned q = (unsigned)s + SH_SUB_CHUNK0;
    int k = 31 - __builtin_clz(q) - __builtin_ctz(SH_SUB_CHUNK0);
    if (s < 0 || k >= SH_SUB_NCHUNK)
        return NULL;
    struct sh_mount *c = __atomic_load_n(&sh_sub_chunk[k], __ATOMIC_ACQUIRE);
    return c ? &c[q - ((unsigned)SH_SUB_CHUNK0 << k)] : NULL;
}
/* Mount number i: a configured mount, or a hub's sub-mount. */
static inline struct sh_mount *sh_mnt(int i)
{
    return __builtin_expect(i < sh_nmounts, 1) ? &sh_mounts[i] : sh_sub_slot(i - sh_nmounts);
}
extern char sh_cache[SH_PATH];
extern char sh_test_boot_id[37];

/* Scratch buffers off the stack (scratch.c): SH_SCRATCH(s) gives s->a .. s->d, given back at the end of the
 * scope. The stack budget (docs/internals.md) allows no PATH_MAX array in a frame. */
#define SH_SCR 8192
struct sh_scratch {
    char a[SH_SCR], b[SH_SCR], c[SH_SCR], d[SH_SCR];
};
struct sh_scratch *sh_scratch_get(void);
void sh_scratch_put(struct sh_scratch **s);
/* In a forked child: the slots of the threads that did not come along are free again. */
void sh_scratch_after_fork(void);
/* A thread being cancelled inside the shim (helper.c's cancel_point): every slot it holds is given back. */
void sh_scratch_drop_mine(void);
#define SH_SCRATCH(s) struct sh_scratch *s __attribute__((cleanup(sh_scratch_put))) = sh_scratch_get()

/* The 64 hex digits of a sha256 (a blob's name), terminated */
static inline void sh_hexs(const uint8_t *h, char out[65])
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[64] = 0;
}

/* snprintf(buf, n, "%s%s%s%s%s", ...) without the format machinery: the warm stat's and open's cache paths
 * (snprintf was a third of their instructions). A NULL part ends the list. Returns the whole's length, as snprintf
 * does: >= n when it did not fit (buf then holds a terminated prefix). */
static inline size_t sh_join(char *buf, size_t n, const char *p0, const char *p1, const char *p2, const char *p3,
                             const char *p4)
{
    const char *p[5] = {p0, p1, p2, p3, p4};
    size_t len = 0;
    for (int i = 0; i < 5 && p[i]; i++) {
        size_t k = strlen(p[i]);
        if (len < n)
            memcpy(buf + len, p[i], k < n - len ? k : n - len);
        len += k;
    }
    if (n)
        buf[len < n ? len : n - 1] = 0;
    return len;
}

enum { L_NONE = 0, L_ANC = 1, L_MNT = 2 };
struct sh_loc {
    int kind;
    int m;                     /* mount (L_MNT; for L_ANC the first mount below it) */
    int slash;                 /* the spelling ended in '/': the result must be a directory */
    int err;                   /* L_MNT: -errno the kernel's walk of the spelling gives ("m/file/../x": ENOTDIR),
                                * answered by sh_resolve for every call; 0 otherwise */
    const char *rel;           /* L_MNT: the path inside the mount ("" for its root), points into path */
    const char *raw;           /* L_MNT, NULL unless a ".." was applied below the mount's root: the spelling from
                                * where it last entered the root, unnormalised (scr->b); sh_resolve walks it */
    char *path;                /* normalised absolute logical path (SH_PATH bytes of scr) */
    const char *kpath;         /* L_NONE, a spelling that went through a mount or an ancestor with a ".." and came
                                * out (stat("/models/..")): the real path the kernel would reach, for the real
                                * call in place of the spelling (path.c kwalk); NULL otherwise */
    struct sh_scratch *scr;    /* taken by the first classification that needs a path, given back by sh_loc_done */
    const char *link;          /* a spelling that is a bare magic link of /proc or /dev/fd into the mounts' tree
                                * ("/proc/self/cwd", "/dev/fd/N"): the caller's spelling, for the calls that do not
                                * follow it (lstat, readlink, O_NOFOLLOW, removals: the link itself); NULL otherwise */
};
void sh_scratch_put(struct sh_scratch **s);
static inline void sh_loc_done(struct sh_loc *l)
{
    if (l->scr)
        sh_scratch_put(&l->scr);
}
/* A location on the stack: small; its scratch (if any) is given back at the end of the scope. */
#define SH_LOC(l) struct sh_loc l __attribute__((cleanup(sh_loc_done))) = {.kind = L_NONE}

/* fd table kinds */
enum { FD_NONE = 0, FD_DIR = 1, FD_FILE = 2, FD_ANC = 3 };

void sh_init(void);
int sh_in_vfork(void);
/* What a fork child does first (pthread_atfork's handler): for a copy made by a raw clone (tree.c's chdir_by_copy) */
void sh_after_fork_child(void);
/* One wait of a thread that polls for another thread's work (a mount's index, the cache's decision): 1 ms, then
 * twice as long each time up to 16 ms. Hundreds of threads polling every 1 ms kept 2 cores busy waking up, and the
 * loading thread itself got a 500th of them (512 threads on a cold index: 23-30 s, 3-4 s with this). errno kept. */
static inline void sh_poll_wait(long *ns)
{
    int e = errno;
    if (*ns < 1000000L)
        *ns = 1000000L;
    struct timespec ts = {0, *ns};
    nanosleep(&ts, NULL);
    if (*ns < 16000000L)
        *ns *= 2;
    errno = e;
}
/* After a successful chdir/fchdir: the cwd must be looked at again. */
void sh_cwd_changed(void);
/* errno-preserving return: r < 0 sets errno = -r and gives -1; else errno = saved and gives r. */
static inline int sh_ret(int r, int saved)
{
    if (r < 0) {
        errno = -r;
        return -1;
    }
    errno = saved;
    return r;
}
void sh_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The shim's only writes to a host's descriptor: n bytes on 2, no SIGPIPE, errno kept (init.c). */
void sh_write_err(const char *buf, size_t n);
extern int sh_progress;   /* HFS3_PROGRESS (default 1): 0, no progress line of the shim's own (`run` draws it) */

/* Classification. sh_classify: L_NONE for paths the shim leaves to libc (the fast path). sh_fallback: after
 * a real call failed with ENOENT/ENOTDIR, resolves the existing part of the path through real symlinks and
 * classifies the result (L_NONE when it does not land in a mount). */
int sh_classify(int dirfd, const char *path, struct sh_loc *l);
/* sh_classify for a spelling of any length (realpath: glibc walks it in user space, no PATH_MAX limit) */
int sh_classify_long(int dirfd, const char *path, struct sh_loc *l);
int sh_fallback(int dirfd, const char *path, struct sh_loc *l);
/* The fast path's filter, built from the mounts once they are parsed (sh_filter_build): sh_first_map[c] is 1
 * when some mount's first component starts with byte c; also for '.' ("/../models" is a mount path) and '/'
 * ("//models") when there is a mount, and for every byte while an HFS3_MOUNTS error waits to be logged
 * (sh_classify logs it, then rebuilds). sh_cwd_word bit 0: the cwd is known to be outside every mount's
 * skeleton (path.c). */
extern unsigned char sh_first_map[256];
extern unsigned long sh_cwd_word;
extern char sh_env_error[1024];
extern int sh_env_error_logged;
void sh_filter_build(void);
/* 1 when path is surely outside the mounts and their ancestors (sh_classify would say L_NONE): one table
 * load for an absolute path, no call, errno untouched. 0: ask sh_classify. */
static inline int sh_outside(int dirfd, const char *path)
{
    if (!path)
        return 1;
    if (__builtin_expect(path[0] == '/', 1))
        return !__atomic_load_n(&sh_first_map[(unsigned char)path[1]], __ATOMIC_RELAXED);
    return !path[0] || !__atomic_load_n(&sh_first_map['.'], __ATOMIC_RELAXED) ||
           (dirfd == AT_FDCWD && (__atomic_load_n(&sh_cwd_word, __ATOMIC_RELAXED) & 1));
}

/* errno after a failed real call that may warrant sh_fallback */
#define SH_FALLBACK_ERR(e) ((e) == ENOENT || (e) == ENOTDIR)

/* Operations on a classified path: >= 0 or -errno. */
int sh_stat(const struct sh_loc *l, int follow, struct stat *st);
int sh_open(const struct sh_loc *l, int flags, mode_t mode);
ssize_t sh_readlink(const struct sh_loc *l, char *buf, size_t n);
int sh_realpath(const struct sh_loc *l, char out[SH_PATH]);
int sh_access(const struct sh_loc *l, int mode);
int sh_chdir(const struct sh_loc *l);
int sh_statfs(const struct sh_loc *l, struct statfs *sf);

/* Descriptors. */
void sh_fd_set(int fd, int kind, int m, uint32_t e);
void sh_fd_clear(int fd);
/* sh_fd_clear for a descriptor the real libc just returned or is closing: nothing to do (one load) until the
 * shim has ever returned a descriptor of its own in this process. */
extern int sh_fd_used;
static inline void sh_fd_forget(int fd)
{
    if (__builtin_expect(__atomic_load_n(&sh_fd_used, __ATOMIC_RELAXED), 0))
        sh_fd_clear(fd);
}
void sh_fd_dup(int from, int to);
/* The shim's own descriptors never take a number the program's call could be given (issue 41 item 1). sh_fd_aside
 * moves fd, a descriptor the shim holds across a real call that makes one for the program (the write guard's
 * directory during the real open), above the numbers the program is given: F_DUPFD_CLOEXEC from SH_FD_ASIDE_TOP - 16
 * (from the soft RLIMIT_NOFILE - 16 when that is lower), else from fd + 1; fd is closed. The new number, or -1
 * (errno kept) when none is free above fd: fd is then the last free number, still open, and the caller's real
 * call needs it. sh_fd_low gives fd, a descriptor about to be returned to the program once the shim holds no other,
 * the lowest free number (the kernel's answer), keeping its open file description: fd or the new number (errno kept;
 * fd as it is when no number is free). */
#define SH_FD_ASIDE_TOP 1024
int sh_fd_aside(int fd);
int sh_fd_low(int fd, int cloexec);
/* 1 and *l (a logical dir location) when fd is a live descriptor the shim returned for a directory. */
int sh_fd_dirloc(int fd, struct sh_loc *l);
/* 1 when fd is a live descriptor the shim returned; st gets the shim's answer. */
int sh_fd_stat(int fd, struct stat *st);
int sh_fd_ours(int fd);
/* After a real fstat of a descriptor the table does not know (inherited through exec, opened by means the shim did
 * not see): a skeleton or ancestor directory of the cache gets the mode stat of its path gives. Only directories
 * without permission bits for others (the cache's, 0700 or 03770) are looked at (one readlink); errno kept. */
void sh_fd_untracked(int fd, struct stat *st);
/* After a successful real *at stat relative to a descriptor d the table does not know, whose answer in st is a
 * directory with no permission bits for others (a skeleton directory of the cache, inherited through exec: issue
 * 33 item 6): the mount's answer for the logical path (d's mapped back, then p) replaces st. Other results and
 * descriptors are left alone. 1 when st was replaced; errno kept. */
int sh_at_untracked(int d, const char *p, struct stat *st, int follow);
/* After a successful real fstat into st: the shim's answer for a descriptor it returned (the identity stat of its
 * path gives), or sh_fd_untracked's. */
void sh_fd_after(int fd, struct stat *st);
/* fstat's fast path: the real call, then one or two loads unless the shim ever returned a descriptor or st is a
 * directory with no permission bits for others */
#define SH_FSTAT_AFTER(fd, st)                                                                              \
    do {                                                                                                    \
        if (__builtin_expect(__atomic_load_n(&sh_fd_used, __ATOMIC_RELAXED), 0) ||                            \
            __builtin_expect(S_ISDIR((st)->st_mode) && !((st)->st_mode & 07), 0))                           \
            sh_fd_after((fd), (struct stat *)(st));                                                         \
    } while (0)
/* 1 when fd is a live descriptor the shim returned for a file (fchdir on it: ENOTDIR). */
int sh_fd_is_file(int fd);
/* Forgets and closes a descriptor the shim returned (a stream over it could not be made); errno kept. */
void sh_fd_drop(int fd);
/* Opens l with flags (sh_open) and wraps the descriptor in a stream (fdopen, a DIR*): the stream, with errno
 * set back to e; NULL and errno when either failed (the descriptor is then dropped). */
void *sh_open_stream(const struct sh_loc *l, int flags, void *(*wrap)(int, const void *), const void *arg, int e);

/* Directory listing support: entries of a dir location. */
struct sh_dent {
    char name[256];
    unsigned char type;
    ino_t ino;
};
/* Calls fn for ".", "..", then each child; returns 0 or -errno. */
int sh_list(const struct sh_loc *l, int (*fn)(void *, const struct sh_dent *), void *arg);

/* Maps a real path under the cache's tree/ancestor skeleton back to its logical path: 1 if mapped. */
int sh_map_back(const char *real, char *out, size_t outn);

void sh_stat_to_statx(const struct stat *st, struct statx *sx);

/* --- init.c: configuration, read once ---------------------------------------------------------------- */
extern char sh_helper_env[SH_PATH];
extern char sh_cache_env[SH_PATH + 32];
extern int sh_log_level, sh_offline, sh_prefetch;
extern int sh_verify_foreign;     /* HFS3_VERIFY_FOREIGN: what another user (not root) wrote is checked by the helper */
extern long sh_ttl;
extern long sh_stall;             /* HFS3_STALL_TIMEOUT: seconds without progress before an open gives up */
extern char sh_cache_real[SH_PATH]; /* realpath of sh_cache once sh_cache_ready decided it */
extern char sh_env_error[1024];
extern int sh_env_error_logged;

/* --- path components (path.c, tree.c) ------------------------------------------------------------------ */
/* Path components: skips the '/'s at *p, points *s at the component there and moves *p past it. Its length,
 * 0 at the end of the path (*s then points at the end). */
static inline size_t sh_next_comp(const char **p, const char **s)
{
    const char *q = *p;
    while (*q == '/')
        q++;
    *s = q;
    while (*q && *q != '/')
        q++;
    *p = q;
    return (size_t)(q - *s);
}

/* 1 for ".", 2 for "..", else 0. */
static inline int sh_dot_comp(const char *s, size_t n)
{
    return n == 1 && s[0] == '.' ? 1 : n == 2 && s[0] == '.' && s[1] == '.' ? 2 : 0;
}

/* The length of buf[0..len) without its last component ("/a/b" -> "/a", "/a" -> ""): how ".." goes up. */
static inline size_t sh_drop_comp(const char *buf, size_t len)
{
    while (len > 0 && buf[len - 1] != '/')
        len--;
    return len > 0 ? len - 1 : 0;
}

/* Lexical normalisation of an absolute path: "//a/./b/../c/" -> "/a/c". *slash = it ended in '/' (or /. /..).
 * 0 or -ENAMETOOLONG. */
int sh_normalise(const char *in, char *out, size_t outn, int *slash);
/* The mount or ancestor an absolute path names, lexically (l->kind). */
int sh_classify_abs(const char *path, struct sh_loc *l);

/* --- wguard.c: writes the kernel would put into the cache's copy of a mount ----------------------------- */
/* What a write call changes: SH_W_PARENT an entry of the parent directory (rename's two ends, unlink, rmdir);
 * SH_W_CREATE a new entry there (mkdir, mknod, symlink, link's destination: when the entry is there already the
 * real call runs and gives EEXIST, as the kernel's on a read-only file system); SH_W_FOLLOW / SH_W_NOFOLLOW the
 * object itself (chmod, chown, truncate, utimes, xattrs; oflags: AT_EMPTY_PATH makes dirfd the object);
 * SH_W_OPEN an open with write, create or truncate flags oflags. */
enum { SH_W_PARENT = 0, SH_W_CREATE = 1, SH_W_FOLLOW = 2, SH_W_NOFOLLOW = 3, SH_W_OPEN = 4 };
/* 1 when the kernel resolves path (relative to dirfd) so that the call would write into a directory of a mount's
 * skeleton (CACHE/mounts/<key>/tree...), a synthesized ancestor (CACHE/mounts/ancestors...) or the blobs
 * (CACHE/blobs, a blob), or a real directory at a mount's path: the caller then fails with EROFS (EXDEV for a
 * link's source). Without /proc, decided by the objects' identities (wguard.c). The spelling does not matter (/proc/self/fd/N, a cwd or dirfd there, symlinks). errno kept. */
int sh_wguard_slow(int dirfd, const char *path, int how, int oflags);
/* sh_wguard_slow deciding on the descriptor the call will use (issue 33 item 5: a symlink flipped between the
 * check and a call on the path could land the call in the cache): when it answers 0 for a call on an entry of a
 * directory (SH_W_PARENT, SH_W_CREATE, SH_W_OPEN; not a last ".", ".." or a followed dangling symlink), *pfd is the
 * O_PATH descriptor of the directory it checked and *pbase the last component of path (a pointer into it): the
 * caller runs the *at call on them and closes *pfd. Otherwise *pfd is -1 and the call runs on the path. */
int sh_wguard_at(int dirfd, const char *path, int how, int oflags, int *pfd, const char **pbase);
/* 1 when fd is open on such a directory, or on something in one (fchmod, fchown, futimens, fsetxattr), or on a
 * blob. */
int sh_wguard_fd_slow(int fd);
/* sh_wguard_fd_slow for a descriptor that may not have a path (open_by_handle_at's: a dentry not connected to its
 * file system's root): when /proc/self/fd/N does not name the same object, its identity decides, as without /proc. */
int sh_wguard_obj_slow(int fd);
/* What a write call would create, for the kernel's errno on a read-only file system: SH_C_DIR a directory
 * (mkdir: a trailing slash is fine), SH_C_OPEN a file by open(O_CREAT), SH_C_NODE anything else (symlink, mknod,
 * mkfifo, link's destination, bind), SH_C_LOOKUP nothing (an open without O_CREAT), SH_C_PARENT nothing: only the
 * parent's lookup counts (rename). */
enum { SH_C_DIR = 0, SH_C_OPEN = 1, SH_C_NODE = 2, SH_C_LOOKUP = 3, SH_C_PARENT = 4 };
/* The kernel's errno for creating the entry l (a mount's path or a synthesized ancestor's) on a read-only file
 * system: ENOENT/ENOTDIR (its parent), EISDIR, ENAMETOOLONG, EEXIST, ENOENT, EROFS; for SH_C_PARENT 0 when the
 * parent is a directory. */
int sh_create_err(const struct sh_loc *l, int kind);
/* For a path outside the mounts whose real call failed with ENOENT: when its parent (by spelling) is a synthesized
 * ancestor of a mount (/models for /models/new, not on disk), the kernel's errno there (EROFS, ENAMETOOLONG,
 * EISDIR, ENOENT; SH_C_PARENT: EROFS); 0 otherwise (the real errno stands). */
int sh_anc_create_err(int dirfd, const char *path, int kind);
/* 1 when mounts are configured and this process is not the helper (init.c): nothing to check (no call) otherwise. */
extern int sh_wguard_on;
static inline int sh_wguard(int dirfd, const char *path, int how, int oflags)
{
    return __builtin_expect(sh_wguard_on, 0) && sh_wguard_slow(dirfd, path, how, oflags);
}
static inline int sh_wguard_fd(int fd)
{
    return __builtin_expect(sh_wguard_on, 0) && sh_wguard_fd_slow(fd);
}

/* --- cachedir.c: where the cache is ------------------------------------------------------------------ */
/* At start: sh_cache and sh_cache_env from the environment (no I/O but getcwd). */
void sh_cache_from_env(void);
/* 0 once the cache directory is decided and usable (the first call creates and checks it, logging one line
 * when it is not usable or a fallback is used); -EIO otherwise, and in a vfork child that finds it undecided. */
int sh_cache_ready(void);
void sh_cache_after_fork(void);
/* For a vfork child, which may not decide the cache (sh_cache_ready: -EIO there): 0 when the cache is decided, or
 * undecided but its directory exists and passes check_dir's rules as it is (nothing created, written or logged:
 * the child only reads it, a chdir into a skeleton the index writer made); -EIO otherwise. */
int sh_cache_peek(void);
/* 1 when fd (a blob, an index) may be read: a regular file, not writable by others, owned by the user or root,
 * or in a shared cache carrying the cache's group (OpenSSH StrictModes' idea). 0 and one log line otherwise. */
int sh_trusted_file(int fd, const char *what);
/* The one place the shim decides whether the blob descriptor fd, opened from the directory whose fstat is dir,
 * is handed to the program as a file entry of size bytes: under HFS3_VERIFY_FOREIGN=1 include/hfs3/serve.h's rule
 * (the helper's blob check applies the same), otherwise sh_trusted_file's. One fstat of fd. 1 yes; 0 no, with
 * one log line at level (sh_trusted_file's refusals always at 0). */
int sh_may_serve(int fd, const struct stat *dir, unsigned long long size, const char *what, int level);
/* sh_may_serve under HFS3_VERIFY_FOREIGN=1 for the copy of content hex (64 hex digits) in blobs/ (key NULL) or in
 * the cblobs/ of the mount with key: the file must also be stamped as verified as that name (serve.h's
 * hfs3_stamp_refusal; issue 44). *again (may be NULL): set to 1 when only the stamp fails and the file is the
 * user's own in a directory of its own or root's, which the helper's _get verifies again (no network needed). */
int sh_may_serve_as(int fd, const struct stat *dir, unsigned long long size, const char *what, int level,
                    const char *hex, const char *key, int *again);
/* This boot's id (36 characters + NUL; HFS3_TEST_BOOT_ID in tests), read once per process: 0, or -1. */
int sh_boot_id(char out[37]);
gid_t sh_cache_gid(void);   /* the cache directory's group (a shared cache's members) */
/* 1 once sh_cache_ready took a cache on a read-only file system (HFS3_OFFLINE=1 only): nothing is written to it,
 * no helper is started (sh_run_locked gives -EROFS), what is cached is read. */
extern int sh_cache_ro;

/* --- helper.c: the helper and the lock protocol -------------------------------------------------------- */
pid_t sh_spawn_helper(char **argv, int lockfd, int quiet);
int sh_reap(pid_t pid);   /* the helper's exit status, 128 + N killed by signal N, -1 unknown (reaped by the host) */
int sh_pin(const char *hex);   /* LOCK_SH on locks/<hex>.pin.lock: no gc removes the blob meanwhile; fd or -1 */
void sh_unpin(int fd);
int sh_cache_shared(void);
int sh_exists(const char *p);
struct sh_lockjob {
    const char *lockpath;
    int (*done)(const void *arg);   /* with the lock held: 1 when the work is there already (skip the helper) */
    const void *arg;
    char **argv;                    /* the helper's command (argv[0] filled in) */
    int quiet;                      /* its stderr to /dev/null */
    const char *tmpdir, *sha;       /* CACHE/tmp and the sha256 whose tmp/<sha>.* changing means progress
                                     * (NULL: none; time since the start). A file's fetch (sha set): a request to
                                     * stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT) whose handler lacks SA_RESTART ends
                                     * the wait with -EINTR; every other signal, and every signal in an index's
                                     * load (sha NULL), has its handler run and the wait go on (issue 41 item 2) */
    const char *label;              /* HFS3_LOG=info: "MOUNT/PATH" for progress lines while waiting (NULL: none) */
    unsigned long long size;        /* the file's size, for those lines */
    int cancel;                     /* the caller runs with cancellation disabled (a cold open: sh_open) but its
                                     * host had it enabled: the wait is where a pthread_cancel acts (helper.c's
                                     * cancel_point), releasing what the open holds. 0: never acts there */
    int *pin;                       /* the open's pin (sh_pin), released there too (NULL: none) */
};
int sh_run_locked(const struct sh_lockjob *j);
/* Within a hold (a mount's load, state 1), the shim's waits keep a host's signal handlers for the hold's end
 * (helper.c): a handler that siglongjmps cannot leave the state taken. Nested holds count. */
void sh_sig_hold(void);
void sh_sig_release(void);
void sh_locks_after_fork(void);
int sh_mkdirs(const char *path);
void sh_mount_ownkey(struct sh_mount *m);   /* cachedir.c: under HFS3_VERIFY_FOREIGN=1, the user's own mounts/<key> */
/* open of a file under CACHE, every directory on the way reached from the checked cache descriptor (helper.c) */
int sh_cache_open(const char *path, int flags, mode_t mode);
/* The same, and *dir gets the fstat of the directory the file was opened from (st_mode 0: none, a path outside) */
int sh_cache_open_in(const char *path, int flags, mode_t mode, struct stat *dir);
/* sh_mkdirs, and the directory whose mkdir failed in failed[n] (empty when none did) */
int sh_mkdirs_why(const char *path, char *failed, size_t n);
/* the errno of the mkdir that kept the cache from being created (*dir: which), or 0 */
int sh_cache_mkdir_error(const char **dir);
/* lastuse.c: records a use of CACHE/blobs/<sha256> (the mtime of its lock file, at most once a minute) */
void hfs3_shim_lastuse(const char *blob_path);
void sh_read_line(const char *path, char *out, size_t n);

/* --- mount.c ------------------------------------------------------------------------------------------- */
/* 0 once m is loaded (maybe broken); -EAGAIN in a vfork child that finds it not loaded. */
int sh_mount_get(struct sh_mount *m);

/* --- hub.c: one mount for a whole hub prefix ----------------------------------------------------------- */
extern long sh_hub_ttl;   /* HFS3_HUB_TTL (default HFS3_MANIFEST_TTL) */
int sh_mount_probe(struct sh_mount *m);
extern int sh_nsubs;      /* sub-mount slots claimed */
/* With m's refresh done and no valid index: 1 when its mounts/K/repos makes it a hub (m->hub set). */
int sh_hub_load(struct sh_mount *m);
/* l (L_MNT) in a hub's repository: l->m becomes that repository's sub-mount, l->rel the path inside it. A
 * repository itself ("HUB/NAME") stays the hub's (l->rel the name) until its sub-mount is made: sh_hub_stat
 * answers a stat of it without one, sh_hub_late makes it for every other call (sh_resolve). */
void sh_hub_classify(struct sh_loc *l);
/* 1 and *st when l is a repository of a hub that has no sub-mount yet; 0: not such a location. */
int sh_hub_stat(const struct sh_loc *l, struct stat *st);
/* The sub-mount of the repository l (the hub's, l->rel its name) names, made now; -ENOENT when not listed. */
int sh_hub_late(const struct sh_loc *l);
/* The inode of a hub repository's root (sub a sub-mount), whatever its skeleton's. */
ino_t sh_hub_root_ino(const struct sh_mount *sub);
/* The entries of a hub's root: its repositories (after "." and ".."). */
int sh_hub_list(int hub, int (*fn)(void *, const struct sh_dent *), void *arg);
/* map_back for CACHE/mounts/<r> that is no configured mount's: a hub repository's skeleton. */
int sh_hub_map(const char *r, char *out, size_t outn);

/* --- tree.c: answers from the index ------------------------------------------------------------------- */
const char *sh_epath(const struct sh_mount *m, uint32_t e);
void sh_tree_path(const struct sh_mount *m, const char *rel, char *out, size_t n);
void sh_stat_synth(const struct sh_mount *m, uint32_t e, struct stat *st);
/* A directory's times from its index entry (the newest file below it, lib/index.c), over its skeleton's real ones
 * (the install's); left as they are when the index has none (an older writer). */
void sh_dir_time(const struct sh_mount *m, uint32_t e, struct stat *st);
void sh_blob_blocks(const struct sh_mount *m, uint32_t e, char *buf, struct stat *st);
int sh_stat_skel(const char *real, struct stat *st);
void sh_anc_path(const char *logical, char *out, size_t n);
/* Resolves l (L_MNT) to an entry: 0 and *e, 1 for the root of a broken mount, -EAGAIN when the mount is
 * unloaded in a vfork child, else -errno. */
int sh_resolve(const struct sh_loc *l, int follow, const struct sh_mount **mp, uint32_t *e);

/* --- sysc.c: syscall() ------------------------------------------------------------------------------------ */
/* The shim exports syscall() (a program's raw openat2, openat and open: sysc.c); its own raw calls go to libc's,
 * never through that interposer (a lookup of the shim's must see the kernel's answer). */
#ifndef SH_SYSC_C
long sh_libc_syscall(long n, ...);
#endif
#define syscall sh_libc_syscall
/* wrap.c: the interposed openat (the shim's answer for a path, guarded writes) */
int sh_openat_ours(int dirfd, const char *path, int flags, mode_t mode);

#endif
