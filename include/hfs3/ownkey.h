/* ownkey.h - which directory under mounts/ a user works in for a REMOTE under HFS3_VERIFY_FOREIGN=1 in a shared
 * cache. hfs3_mountkey_as's key is predictable: a member who makes mounts/<that key> first (a directory, a symlink,
 * a file of theirs) would lock the user out of that REMOTE for as long as it stays. So that name is used only while
 * it is free or the user's own; when a member holds it, the user works in a directory of its own named with the
 * key's first 8 hex digits and 8 random ones, found again by owner and by the `remote` file in it (the user's own,
 * one link, nobody else may write it: a member cannot point one of the user's directories at another REMOTE).
 * One rule for the helper (lib/cache.c) and the shim (shim/cachedir.c), which must find the same directory: raw
 * system calls only (the shim calls it, so nothing here is interposed), no allocation, a bounded stack; the
 * caller lends the buffer the directory is listed into. Names stay 16 hex digits: mounts/<key>/tree paths, the
 * records unflushed/<sha>.m<key> and the helper's arguments all take one. */
#ifndef HFS3_OWNKEY_H
#define HFS3_OWNKEY_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hfs3/index.h"

#define HFS3_OWNKEY_SHARED 8   /* hex digits a directory of the other shape shares with the predictable key */
#define HFS3_OWNKEY_REMOTE_MAX 1100

struct hfs3_ownkey_dent_ {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* 1 when mounts/<name> (mfd) is uid's own directory that others cannot write; with remote set, also holding
 * uid's own single-link `remote`, writable by nobody else, that names exactly that REMOTE. */
static inline int hfs3_ownkey_dir_(int mfd, const char *name, const char *remote, unsigned uid)
{
    int fd = (int)syscall(SYS_openat, mfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int ok = syscall(SYS_fstat, fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid && !(st.st_mode & S_IWOTH);
    if (ok && remote) {
        char buf[HFS3_OWNKEY_REMOTE_MAX];
        size_t rl = strlen(remote);
        int rf = (int)syscall(SYS_openat, fd, "remote", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        ok = rf >= 0 && rl + 1 <= sizeof buf && syscall(SYS_fstat, rf, &st) == 0 && S_ISREG(st.st_mode) &&
             st.st_uid == uid && st.st_nlink == 1 && !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
             (size_t)st.st_size == rl + 1 && syscall(SYS_read, rf, buf, rl + 1) == (long)(rl + 1) &&
             !memcmp(buf, remote, rl) && buf[rl] == '\n';
        if (rf >= 0)
            syscall(SYS_close, rf);
    }
    syscall(SYS_close, fd);
    return ok;
}

/* The key (16 hex + NUL into key) of uid's mount directory for remote, mfd being mounts/: 0 the predictable one
 * (hfs3_mountkey_as: free, or uid's own directory), 1 one of the other shape (a member holds the predictable
 * name), found, or with create made now: mode 0700 while its `remote` is written, then mode; -errno when there is
 * none (-ENOENT: none made yet, create not set). A directory of the other shape, once there, is found before a
 * free predictable name (a member who empties that name must not move the user to another directory while a
 * process of the user's still works in the first); a free one is made at once with create (0700, then mode).
 * buf (n bytes, at least 4096) is scratch for the listing. */
static inline int hfs3_ownkey(int mfd, const char *remote, unsigned uid, int create, mode_t mode, char *buf,
                              size_t n, char key[17])
{
    hfs3_mountkey_as(remote, 1, uid, key);
    int fd = (int)syscall(SYS_openat, mfd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    /* a free predictable name does not win over a directory of the other shape made while a member held it (and
     * then emptied it): a process that found that one, and the helpers it runs later, must keep finding it */
    int absent = fd < 0 && errno == ENOENT;
    if (fd >= 0) {
        struct stat st;
        int own = syscall(SYS_fstat, fd, &st) == 0 && st.st_uid == uid;
        syscall(SYS_close, fd);
        if (own)
            return 0;
    }
    char name[17];
    int dfd = (int)syscall(SYS_openat, mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long k;
    while (dfd >= 0 && (k = syscall(SYS_getdents64, dfd, buf, n)) > 0) {
        for (long off = 0; off < k;) {
            const struct hfs3_ownkey_dent_ *d = (const struct hfs3_ownkey_dent_ *)(buf + off);
            off += d->reclen;
            if (strlen(d->name) != 16 || strspn(d->name, "0123456789abcdef") != 16 ||
                memcmp(d->name, key, HFS3_OWNKEY_SHARED) || !memcmp(d->name, key, 16))
                continue;
            if (hfs3_ownkey_dir_(mfd, d->name, remote, uid)) {
                memcpy(key, d->name, 17);
                syscall(SYS_close, dfd);
                return 1;
            }
        }
    }
    if (dfd >= 0)
        syscall(SYS_close, dfd);
    if (absent && !create)
        return 0;
    /* made here, at once, so that the choice stays: the user's own from now on (mounts/ is sticky) */
    long made = absent ? syscall(SYS_mkdirat, mfd, key, 0700) : -1;
    if (absent && made < 0 && errno != EEXIST)
        return 0;   /* the caller's own mkdir says why */
    if (made == 0) {
        int kd = (int)syscall(SYS_openat, mfd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int ok = kd >= 0 && syscall(SYS_fchmod, kd, mode) == 0;
        if (kd >= 0)
            syscall(SYS_close, kd);
        return ok ? 0 : -EACCES;
    }
    if (absent) {   /* taken since: another process of the user's (then it is the user's), or a member */
        struct stat st;
        int kd = (int)syscall(SYS_openat, mfd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int own = kd >= 0 && syscall(SYS_fstat, kd, &st) == 0 && st.st_uid == uid;
        if (kd >= 0)
            syscall(SYS_close, kd);
        if (own)
            return 0;
    }
    if (!create)
        return -ENOENT;
    size_t rl = strlen(remote);
    if (rl + 1 > HFS3_OWNKEY_REMOTE_MAX)
        return -ENAMETOOLONG;
    static const char hexd[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) {
        uint32_t r = 0;
        if (syscall(SYS_getrandom, &r, sizeof r, 0) != (long)sizeof r)
            return -EAGAIN;
        memcpy(name, key, HFS3_OWNKEY_SHARED);
        for (int j = 15; j >= HFS3_OWNKEY_SHARED; j--, r >>= 4)
            name[j] = hexd[r & 15];
        name[16] = 0;
        if (!memcmp(name, key, 16) || syscall(SYS_mkdirat, mfd, name, 0700) < 0)
            continue;
        /* 0700 until its `remote` is there: nobody else can put one in first */
        int nd = (int)syscall(SYS_openat, mfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (nd < 0)
            continue;
        int rf = (int)syscall(SYS_openat, nd, "remote", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int ok = rf >= 0 && syscall(SYS_write, rf, remote, rl) == (long)rl && syscall(SYS_write, rf, "\n", 1) == 1 &&
                 syscall(SYS_fchmod, rf, 0644) == 0;
        if (rf >= 0)
            syscall(SYS_close, rf);
        ok = ok && syscall(SYS_fchmod, nd, mode) == 0;
        syscall(SYS_close, nd);
        if (ok && hfs3_ownkey_dir_(mfd, name, remote, uid)) {
            memcpy(key, name, 17);
            return 1;
        }
    }
    return -EEXIST;
}

/* In uid's own mount directory d (sticky, group-writable): a member's entry at one of the names the directory
 * holds is removed (a file) or renamed to .aside.<name>.<random> (a directory, which only its owner may empty),
 * never opened or followed. A member can make one in the moment between the directory's mkdir and its first
 * files: a directory named index, lock or tree, which the user's rename cannot replace, would refuse the user
 * the REMOTE until its owner or root removed it. Helper (lib/cache.c) and shim (a mount's load) alike. Returns
 * how many were moved; the names that stay (a rename that failed) are the caller's to report. */
static inline int hfs3_ownkey_aside(int d, unsigned uid)
{
    static const char *const names[] = {"index", "manifest.json", "etag", "canonical", "lock",
                                        "tree",  "error",         "remote", "repos", "cblobs"};
    static const char hexd[] = "0123456789abcdef";
    int moved = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        struct stat st;
        if (syscall(SYS_newfstatat, d, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid == uid ||
            st.st_uid == 0)
            continue;
        if (syscall(SYS_unlinkat, d, names[i], 0) == 0) {
            moved++;
            continue;
        }
        uint64_t r = 0;
        char aside[48];
        if (syscall(SYS_getrandom, &r, sizeof r, 0) != (long)sizeof r)
            continue;
        size_t nl = strlen(names[i]);
        memcpy(aside, ".aside.", 7);
        memcpy(aside + 7, names[i], nl);
        aside[7 + nl] = '.';
        for (int j = 0; j < 16; j++, r >>= 4)
            aside[8 + nl + j] = hexd[r & 15];
        aside[24 + nl] = 0;
        if (syscall(SYS_renameat2, d, names[i], d, aside, 1 /* RENAME_NOREPLACE */) == 0)
            moved++;
    }
    return moved;
}

#endif
