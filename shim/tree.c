/* tree.c - answers from the index: walking a path inside a mount (symlinks followed as the kernel would), the
 * stat of entries (synthesised for files and links, the skeleton directory for dirs), the skeleton and ancestor
 * directories in the cache, and the path calls that need no fetch (readlink, realpath, access, chdir, statfs). */
#include "shim.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* --- the index --------------------------------------------------------------------------------------- */

static uint32_t child(const struct sh_mount *m, uint32_t dir, const char *name, size_t n)
{
    const struct hfs3_index_entry *d = &m->ents[dir];
    const uint32_t *k = m->kids + d->child_first;
    size_t lo = 0, hi = d->child_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct hfs3_index_entry *c = &m->ents[k[mid]];
        size_t cn = c->name_len;
        int r = memcmp(m->strs + c->name_off, name, cn < n ? cn : n);
        if (r == 0)
            r = cn < n ? -1 : cn > n ? 1 : 0;
        if (r == 0)
            return k[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return HFS3_INDEX_NONE;
}

/* Walks rel (inside mount m) following symlinks (the last one only with follow). 0 and *out, or -errno. */
static int walk(const struct sh_mount *m, const char *rel, int follow, uint32_t *out)
{
    SH_SCRATCH(t);
    char *rem = t->a, *tmp = t->b;
    if (strlen(rel) >= SH_SCR)
        return -ENAMETOOLONG;
    strcpy(rem, rel);
    uint32_t cur = 0;
    int hops = 0;
    const char *p = rem, *s;
    size_t n;
    while ((n = sh_next_comp(&p, &s))) {
        int dot = sh_dot_comp(s, n);
        if (dot == 1)
            continue;
        if (m->ents[cur].type != HFS3_IX_DIR)
            return -ENOTDIR;
        if (dot == 2) {
            if (cur == 0)
                return -ENOENT;   /* a valid manifest never leaves its tree */
            cur = m->ents[cur].parent;
            continue;
        }
        if (n > NAME_MAX)
            return -ENAMETOOLONG;
        uint32_t c = child(m, cur, s, n);
        if (c == HFS3_INDEX_NONE)
            return -ENOENT;
        const char *q = p;
        while (*q == '/')
            q++;
        if (m->ents[c].type == HFS3_IX_SYMLINK && (*q || follow || *p == '/')) {
            if (++hops > SH_MAX_HOPS)
                return -ELOOP;
            const char *tg = m->strs + m->ents[c].target_off;
            if (tg[0] == '/')
                return -ENOENT;
            if ((size_t)snprintf(tmp, SH_SCR, "%s%s", tg, p) >= SH_SCR)
                return -ENAMETOOLONG;
            strcpy(rem, tmp);
            p = rem;
            continue;
        }
        cur = c;
    }
    *out = cur;
    return 0;
}

const char *sh_epath(const struct sh_mount *m, uint32_t e)
{
    return m->strs + m->ents[e].path_off;
}

void sh_tree_path(const struct sh_mount *m, const char *rel, char *out, size_t n)
{
    snprintf(out, n, "%s/tree%s%s", m->dir, *rel ? "/" : "", rel);
}

static uint64_t fnv(const char *a, const char *b)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h = (h ^ '/') * 1099511628211ULL;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

void sh_stat_synth(const struct sh_mount *m, uint32_t e, struct stat *st)
{
    const struct hfs3_index_entry *x = &m->ents[e];
    memset(st, 0, sizeof *st);
    st->st_dev = m->dev;
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_blksize = 4096;
    st->st_nlink = 1;
    if (x->type == HFS3_IX_FILE) {
        /* by path, not content: two files with equal content are two files (du, tar, cp -a); links
         * resolve to their target's entry first, so they share its identity */
        st->st_ino = (ino_t)((fnv(m->remote, sh_epath(m, e)) >> 1) | (1ULL << 63));
        st->st_mode = S_IFREG | 0444;
        st->st_size = (off_t)x->size;
        /* not in the cache: what the file written whole takes in 4 KiB blocks (ext4, xfs, tmpfs), in 512-byte
         * units; once cached, sh_stat and fstat give the copy's own (sh_blob_blocks, fdtab.c) */
        st->st_blocks = (blkcnt_t)((x->size + 4095) / 4096 * 8);
        st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = (time_t)x->mtime;
    } else {
        st->st_ino = (ino_t)((fnv(m->remote, sh_epath(m, e)) >> 2) | (1ULL << 62));
        st->st_mode = x->type == HFS3_IX_DIR ? S_IFDIR | 0555 : S_IFLNK | 0777;
        st->st_size = x->type == HFS3_IX_DIR ? 4096 : x->target_len;
        st->st_blocks = x->type == HFS3_IX_DIR ? 8 : 0;   /* one 4 KiB block, as st_size says */
        st->st_nlink = x->type == HFS3_IX_DIR ? 2 : 1;
        st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = x->mtime ? (time_t)x->mtime : m->mtime;
    }
}

void sh_dir_time(const struct sh_mount *m, uint32_t e, struct stat *st)
{
    int64_t t = m->ents[e].mtime;
    if (!t)
        return;
    st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = (time_t)t;
    st->st_mtim.tv_nsec = st->st_atim.tv_nsec = st->st_ctim.tv_nsec = 0;
}

/* A skeleton or ancestor directory under CACHE, by descriptor: every directory on the way opened
 * O_DIRECTORY|O_NOFOLLOW from the checked cache descriptor (helper.c's sh_cache_open), so that a symlink a
 * member planted for one (mounts/ancestors/NAME, mounts/K/tree/SUB) is refused as the helper refuses it, never
 * followed to a directory of the member's. Created when missing, outside vfork children. fd, or -errno. */
static int skel_open(const char *real)
{
    /* the cache's group decides which directories are trusted; a vfork child (subprocess cwd=, before the parent
     * touched a mount) reads an undecided cache as it is, deciding nothing (issue 33 item 2) */
    if ((sh_in_vfork() ? sh_cache_peek() : sh_cache_ready()) < 0)
        return -EIO;
    int fd = sh_cache_open(real, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0 && errno == ENOENT && !sh_in_vfork()) {
        sh_mkdirs(real);
        fd = sh_cache_open(real, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    }
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP || e == ENOTDIR)
            sh_log(1, "%s: not a directory (a symlink?): not trusted, not used", real);
        return -e;
    }
    struct stat st;
    if (sh_r.fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || (st.st_mode & S_IWOTH)) {
        sh_r.close(fd);
        sh_log(1, "%s: writable by others: not trusted, not used", real);
        return -EPERM;
    }
    return fd;
}

/* Real stat of a skeleton directory (created when missing, outside vfork children), perms forced 0555. */
int sh_stat_skel(const char *real, struct stat *st)
{
    int fd = skel_open(real);
    if (fd < 0)
        return fd;
    int rc = sh_r.fstat(fd, st) < 0 ? -errno : 0;
    sh_r.close(fd);
    if (rc == 0)
        st->st_mode = (st->st_mode & S_IFMT) | 0555;
    return rc;
}

/* chdir into the skeleton directory real: fchdir on the descriptor skel_open checked. */
static int skel_chdir(const char *real)
{
    int fd = skel_open(real);
    if (fd < 0)
        return fd;
    int rc = syscall(SYS_fchdir, fd) == 0 ? 0 : -errno;
    sh_r.close(fd);
    return rc;
}

/* 1 when name in mounts/ (mfd) is a directory of this user's own that nobody else can write into. */
static int anc_root_own(int mfd, const char *name)
{
    struct stat st;
    int fd = sh_r.openat(mfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int ok = sh_r.fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
             !(st.st_mode & (S_IWGRP | S_IWOTH));
    sh_r.close(fd);
    return ok;
}

/* Under HFS3_VERIFY_FOREIGN=1 in a shared cache the ancestors' skeleton is this user's own, in a directory only it
 * can write: mounts/anc.<uid>, or, where a member took that name first (a symlink, a directory of its own),
 * mounts/anc.<uid>.<random> found again by its owner (a member can make names of that shape too, never one
 * of this user's). A fixed name a member can take first would deny `cd` into every ancestor for good. Its name
 * into out: 0, or -1 (none could be had: the ancestors are then synthesized, and cd into them fails). */
static int anc_root(char *out, size_t n)
{
    SH_SCRATCH(t);
    unsigned me = (unsigned)geteuid();
    if ((size_t)snprintf(t->b, SH_SCR, "%s/mounts", sh_cache) >= SH_SCR)
        return -1;
    int mfd = sh_cache_open(t->b, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    if (mfd < 0 && errno == ENOENT && !sh_in_vfork() && sh_mkdirs(t->b) == 0)
        mfd = sh_cache_open(t->b, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    if (mfd < 0)
        return -1;
    int rc = -1;
    snprintf(out, n, "anc.%u", me);
    if (anc_root_own(mfd, out) ||
        (!sh_in_vfork() && syscall(SYS_mkdirat, mfd, out, 0700) == 0 && anc_root_own(mfd, out))) {
        rc = 0;
        goto out;
    }
    /* taken: this user's own of the other shape, else a new one */
    char pre[32];
    size_t pl = (size_t)snprintf(pre, sizeof pre, "anc.%u.", me);
    long k;
    int dfd = sh_r.openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (dfd >= 0 && rc < 0 && (k = syscall(SYS_getdents64, dfd, t->a, SH_SCR)) > 0) {
        for (long off = 0; off < k && rc < 0;) {
            struct dirent64 *d = (struct dirent64 *)(t->a + off);
            off += d->d_reclen;
            if (!strncmp(d->d_name, pre, pl) && strlen(d->d_name) < n && anc_root_own(mfd, d->d_name)) {
                snprintf(out, n, "%s", d->d_name);
                rc = 0;
            }
        }
    }
    if (dfd >= 0)
        sh_r.close(dfd);
    for (int i = 0; rc < 0 && i < 8 && !sh_in_vfork(); i++) {
        unsigned long long r = 0;
        if (syscall(SYS_getrandom, &r, sizeof r, 0) != (long)sizeof r) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            r = ((unsigned long long)ts.tv_nsec << 20) ^ (unsigned long long)ts.tv_sec ^ (unsigned long long)getpid();
        }
        snprintf(out, n, "%s%016llx", pre, r);
        if (syscall(SYS_mkdirat, mfd, out, 0700) == 0 && anc_root_own(mfd, out))
            rc = 0;
    }
out:
    sh_r.close(mfd);
    if (rc < 0)
        sh_log(1, "%s/mounts: no directory of this user's own for the ancestors' skeleton: not used", sh_cache);
    return rc;
}

void sh_anc_path(const char *logical, char *out, size_t n)
{
    char root[48];
    if (sh_verify_foreign && sh_cache_ready() == 0 && sh_cache_shared()) {
        if (anc_root(root, sizeof root) < 0 ||
            (size_t)snprintf(out, n, "%s/mounts/%s%s", sh_cache, root, logical) >= n)
            out[0] = 0;
        return;
    }
    if ((size_t)snprintf(out, n, "%s/mounts/ancestors%s", sh_cache, logical) >= n)
        out[0] = 0;
}

/* Resolves l (L_MNT) to an entry; -EAGAIN when the mount is unloaded in a vfork child. Every path call on a mount
 * (stat, open, opendir, chdir, access, readlink, realpath, listings) comes here, so ".." is taken alike. */
int sh_resolve(const struct sh_loc *l, int follow, const struct sh_mount **mp, uint32_t *e)
{
    if (l->err)
        return l->err;   /* the kernel's walk of the spelling failed before the mount (path.c kwalk) */
    struct sh_mount *m = sh_mnt(l->m);
    int rc = sh_mount_get(m);
    if (rc < 0)
        return rc;
    /* a ".." applied below the root: the spelling as written, each ".." one level up from what the walk
     * reached (path.c, raw_rel) */
    const char *rel = l->raw ? l->raw : l->rel;
    if (m->broken && *rel && m->hub) {
        /* a repository named at the hub's root (hub.c): its sub-mount now, resolved at its root */
        int k = sh_hub_late(l);
        if (k < 0)
            return k;   /* a name not in its repository list */
        m = sh_mnt(k);
        if ((rc = sh_mount_get(m)) < 0)
            return rc;
        rel = "";
    }
    *mp = m;
    if (m->broken) {
        if (*rel)
            return m->hub ? -ENOENT : -EIO;
        *e = 0;
        return 1;   /* the root of a broken mount */
    }
    rc = walk(m, rel, follow || l->slash, e);
    if (rc == 0 && l->slash && m->ents[*e].type != HFS3_IX_DIR)
        return -ENOTDIR;
    return rc;
}

/* A read-only directory that has no real one behind it (a missing ancestor, a mount without a cache). */
static void stat_dir_synth(const char *logical, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2;
    st->st_uid = getuid();
    st->st_gid = getgid();
    st->st_blksize = 4096;
    st->st_ino = (ino_t)((fnv("ancestor", logical) >> 2) | (1ULL << 62));
}

int sh_stat(const struct sh_loc *l, int follow, struct stat *st)
{
    if (l->link && !follow)
        return sh_r.lstat(l->link, st) == 0 ? 0 : -errno;   /* the magic link itself */
    SH_SCRATCH(t);
    char *rp = t->a;
    if (l->kind == L_ANC) {
        if ((follow ? sh_r.stat : sh_r.lstat)(l->path, st) == 0)
            return 0;
        sh_anc_path(l->path, rp, SH_SCR);
        if (sh_stat_skel(rp, st) == 0)
            return 0;
        stat_dir_synth(l->path, st);
        return 0;
    }
    if (sh_hub_stat(l, st))
        return 0;   /* a hub's repository, before anything needs its manifest */
    const struct sh_mount *m;
    uint32_t e;
    int rc = sh_resolve(l, follow, &m, &e);
    if (rc == -EAGAIN) {
        sh_tree_path(sh_mnt(l->m), l->rel, rp, SH_SCR);
        return sh_stat_skel(rp, st);
    }
    if (rc < 0)
        return rc;
    if (rc == 1 || m->ents[e].type == HFS3_IX_DIR) {
        sh_tree_path(m, rc == 1 ? "" : sh_epath(m, e), rp, SH_SCR);
        if (sh_stat_skel(rp, st) == 0) {
            if (m->sub && (rc == 1 || e == 0))
                st->st_ino = sh_hub_root_ino(m);   /* a hub's repository: the inode of the hub's listing */
            if (rc == 0)
                sh_dir_time(m, e, st);
            return 0;
        }
        if (rc == 1) {
            /* a broken mount without its skeleton (no usable cache): still an empty directory */
            stat_dir_synth(m->path, st);
            return 0;
        }
    }
    sh_stat_synth(m, e, st);
    if (m->ents[e].type == HFS3_IX_FILE)
        sh_blob_blocks(m, e, t->b, st);
    return 0;
}

/* st_blocks of file entry e as du sees the source (issue 33 item 6): the cached copy's own (blobs/<sha256>, else
 * this mount's cblobs/<sha256>: lstat, a regular file of the entry's size), else sh_stat_synth's size-derived
 * value stays. buf: SH_SCR bytes of scratch. Two lstat calls at most, on stat of a file in a mount only. */
void sh_blob_blocks(const struct sh_mount *m, uint32_t e, char *buf, struct stat *st)
{
    char hex[65];
    sh_hexs(m->ents[e].sha256, hex);
    struct stat b;
    int err = errno;
    if ((sh_join(buf, SH_SCR, sh_cache, "/blobs/", hex, NULL, NULL) < SH_SCR && sh_r.lstat(buf, &b) == 0) ||
        (sh_join(buf, SH_SCR, sh_cache, "/mounts/", m->key, "/cblobs/", hex) < SH_SCR && sh_r.lstat(buf, &b) == 0)) {
        if (S_ISREG(b.st_mode) && (uint64_t)b.st_size == m->ents[e].size)
            st->st_blocks = b.st_blocks;
    }
    errno = err;
}

/* --- other path calls -------------------------------------------------------------------------------- */

ssize_t sh_readlink(const struct sh_loc *l, char *buf, size_t n)
{
    if (n == 0)
        return -EINVAL;   /* as the kernel, before any lookup */
    if (l->link) {
        /* /proc/self/fd/N, /proc/self/cwd into the mounts: the path the kernel gives for a real folder (onnxruntime
         * checks that an external data file it opened is inside the model's directory) */
        size_t k = strlen(l->path);
        memcpy(buf, l->path, k < n ? k : n);
        return (ssize_t)(k < n ? k : n);
    }
    if (l->kind == L_ANC) {
        ssize_t k = sh_r.readlink(l->path, buf, n);
        return k >= 0 ? k : errno == ENOENT ? -EINVAL : -errno;
    }
    const struct sh_mount *m;
    uint32_t e;
    int rc = sh_resolve(l, 0, &m, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc < 0)
        return rc;
    if (rc == 1 || m->ents[e].type != HFS3_IX_SYMLINK)
        return -EINVAL;
    size_t k = m->ents[e].target_len < n ? m->ents[e].target_len : n;
    memcpy(buf, m->strs + m->ents[e].target_off, k);
    return (ssize_t)k;
}

int sh_realpath(const struct sh_loc *l, char out[SH_PATH])
{
    if (l->kind == L_ANC) {
        struct stat st;
        if (sh_r.stat(l->path, &st) == 0) {
            SH_SCRATCH(t);
            if (!sh_r.realpath(l->path, t->a))
                return -errno;
            if (strlen(t->a) >= SH_PATH)
                return -ENAMETOOLONG;
            memcpy(out, t->a, strlen(t->a) + 1);
            return 0;
        }
        snprintf(out, SH_PATH, "%s", l->path);
        return 0;
    }
    const struct sh_mount *m;
    uint32_t e;
    int rc = sh_resolve(l, 1, &m, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc < 0)
        return rc;
    const char *r = rc == 1 ? "" : sh_epath(m, e);
    if ((size_t)snprintf(out, SH_PATH, "%s%s%s", m->path, *r ? "/" : "", r) >= SH_PATH)
        return -ENAMETOOLONG;
    return 0;
}

int sh_access(const struct sh_loc *l, int mode)
{
    struct stat st;
    int rc = sh_stat(l, 1, &st);
    if (rc < 0)
        return rc;
    if (mode & W_OK)
        return -EROFS;
    if ((mode & X_OK) && !S_ISDIR(st.st_mode) && !(st.st_mode & 0111))
        return -EACCES;
    return 0;
}

/* The skeleton directory a chdir to l (L_MNT) lands in, into rp (SH_SCR): 0, 1 when it cannot be decided in a vfork
 * child (the mount not loaded: rp is the spelling's place in its skeleton), or -errno. */
static int chdir_target(const struct sh_loc *l, char *rp)
{
    const struct sh_mount *m;
    uint32_t e;
    int rc = sh_resolve(l, 1, &m, &e);
    if (rc == -EAGAIN) {
        sh_tree_path(sh_mnt(l->m), l->rel, rp, SH_SCR);
        return 1;
    }
    if (rc < 0)
        return rc;
    if (rc == 0 && m->ents[e].type != HFS3_IX_DIR)
        return -ENOTDIR;
    sh_tree_path(m, rc == 1 ? "" : sh_epath(m, e), rp, SH_SCR);
    return 0;
}

/* A vfork child's chdir into a mount it cannot answer (subprocess.run(cwd=M/dir) on a fresh cache: no index to map;
 * a hub's repository: no slot may be claimed in memory shared with the parent). A copy of the process (a raw clone
 * without CLONE_VM: no fork handlers run, nothing of the parent is written) answers as the parent would, loading
 * the mount (the helper fetches the manifest, the skeleton is made), and sends back the skeleton directory or the
 * errno through a pipe; the child, which writes nothing shared, then changes to it. -EIO when it cannot be asked. */
static int chdir_by_copy(const struct sh_loc *l, char *rp)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -EIO;
    long pid = syscall(SYS_clone, 0L, 0L, 0L, 0L, 0L);   /* exit signal 0: no SIGCHLD runs a handler of the host */
    if (pid == 0) {
        sh_after_fork_child();   /* a process of its own: loads, spawns and waits as a fork child does */
        sh_r.close(p[0]);
        SH_LOC(c);
        int rc = sh_classify_abs(l->path, &c) == L_MNT ? chdir_target(&c, rp) : -EIO;
        if (rc == 0) {
            int fd = skel_open(rp);   /* made now when missing */
            rc = fd < 0 ? -EIO : 0;
            if (fd >= 0)
                sh_r.close(fd);
        }
        int w = rc < 0 ? -rc : 0;
        ssize_t k = write(p[1], &w, sizeof w);
        if (rc == 0)
            k = write(p[1], rp, strlen(rp) + 1);
        (void)k;
        _exit(0);
    }
    sh_r.close(p[1]);
    int rc = -EIO, w = EIO;
    if (pid > 0) {
        size_t got = 0;
        ssize_t k;
        char *buf = rp;
        if (read(p[0], &w, sizeof w) == (ssize_t)sizeof w) {
            while (got < SH_SCR - 1 && ((k = read(p[0], buf + got, SH_SCR - 1 - got)) > 0 || (k < 0 && errno == EINTR)))
                got += k > 0 ? (size_t)k : 0;
            buf[got] = 0;
            rc = w ? -w : got ? 0 : -EIO;
        }
        while (waitpid((pid_t)pid, NULL, __WALL) < 0 && errno == EINTR)
            ;
    }
    sh_r.close(p[0]);
    return rc;
}

int sh_chdir(const struct sh_loc *l)
{
    SH_SCRATCH(t);
    char *rp = t->a;
    if (l->kind == L_ANC) {
        if (sh_r.chdir(l->path) == 0)
            return 0;
        if (errno != ENOENT)
            return -errno;
        sh_anc_path(l->path, rp, SH_SCR);
        return skel_chdir(rp) == 0 ? 0 : -ENOENT;
    }
    int rc = chdir_target(l, rp);
    if (rc == 1 && skel_chdir(rp) == 0)
        return 0;   /* a vfork child (subprocess cwd=): the skeleton is a real directory, no state needed */
    if (rc != 0 && !l->err && sh_in_vfork()) {
        /* what the child could not decide: the mount not loaded and its skeleton not there (a fresh cache), a hub's
         * repository (its sub-mount cannot be made here) */
        rc = chdir_by_copy(l, rp);
        if (rc == 0)
            return skel_chdir(rp) == 0 ? 0 : -EIO;
        return rc;
    }
    if (rc < 0)
        return rc;
    if (rc == 1)
        return -EIO;
    return skel_chdir(rp) == 0 ? 0 : -EIO;
}

int sh_statfs(const struct sh_loc *l, struct statfs *sf)
{
    struct stat st;
    int rc = sh_stat(l, 1, &st);
    if (rc < 0)
        return rc;
    const char *p = l->kind == L_MNT ? sh_mnt(l->m)->dir : sh_cache;
    if (sh_r.statfs(p, sf) < 0 && sh_r.statfs("/", sf) < 0)
        return -errno;
    sf->f_flags |= ST_RDONLY;
    return 0;
}

void sh_stat_to_statx(const struct stat *st, struct statx *sx)
{
    memset(sx, 0, sizeof *sx);
    sx->stx_mask = STATX_BASIC_STATS;
    sx->stx_blksize = (uint32_t)st->st_blksize;
    sx->stx_nlink = (uint32_t)st->st_nlink;
    sx->stx_uid = st->st_uid;
    sx->stx_gid = st->st_gid;
    sx->stx_mode = (uint16_t)st->st_mode;
    sx->stx_ino = st->st_ino;
    sx->stx_size = (uint64_t)st->st_size;
    sx->stx_blocks = (uint64_t)st->st_blocks;
    sx->stx_atime.tv_sec = st->st_atim.tv_sec;
    sx->stx_atime.tv_nsec = (uint32_t)st->st_atim.tv_nsec;
    sx->stx_mtime.tv_sec = st->st_mtim.tv_sec;
    sx->stx_mtime.tv_nsec = (uint32_t)st->st_mtim.tv_nsec;
    sx->stx_ctime.tv_sec = st->st_ctim.tv_sec;
    sx->stx_ctime.tv_nsec = (uint32_t)st->st_ctim.tv_nsec;
    sx->stx_dev_major = major(st->st_dev);
    sx->stx_dev_minor = minor(st->st_dev);
    sx->stx_rdev_major = major(st->st_rdev);
    sx->stx_rdev_minor = minor(st->st_rdev);
}
