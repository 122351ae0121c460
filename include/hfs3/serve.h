/* serve.h - the one rule of HFS3_VERIFY_FOREIGN=1 for "may this file be served": decided on the descriptor that
 * will be served (its fstat, taken after the open) and on the directory it was opened from, never on a path
 * looked at before. The shim applies it to the descriptor it returns to the program (shim/open.c); the helper's
 * blob check (lib/fetch.c's blob_check) applies it before it answers that a blob is there, and the flush
 * (lib/durable.c) before it gives up a copy of the user's own for one in blobs/. libc-only, no allocation:
 * the shim includes it. docs/internals.md ("Which descriptor is served") says why each part is there.
 *
 * The file: a regular file of the user's own or root's, with no write bit at all (a blob is installed 0444 or
 * 0440 and never written again; no group write bit also means no ACL entry can write it, for the group bits
 * are the ACL mask), one link (a hard link planted here could be any file of the user's elsewhere), and the
 * manifest's size. Nobody else can change its bytes, and its owner's own check put it there.
 * The directory: the user's own or root's, not writable by others, and sticky when its group can write: then
 * no other user can rename another file under the name (the owner of a directory can rename anything in it).
 * A file that fails the rule is not served as it is: the helper makes the user's own copy of it, hashing the
 * copy (lib/fetch.c), and the shim serves that one. */
#ifndef HFS3_SERVE_H
#define HFS3_SERVE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* NULL when the file whose fstat is st may be served to user me as the content of a manifest entry of size
 * bytes; else the reason, a phrase for a log line ("another user's (uid 1001)" is the caller's to add). */
static inline const char *hfs3_serve_refusal(const struct stat *st, uid_t me, uint64_t size)
{
    if (!S_ISREG(st->st_mode))
        return "not a regular file";
    if (st->st_uid != me && st->st_uid != 0)
        return "another user's file";
    if (st->st_mode & (S_IWUSR | S_IWGRP | S_IWOTH))
        return "a file with a write bit (blobs are read-only)";
    if (st->st_nlink != 1)
        return "a file with a second name (a hard link)";
    if ((uint64_t)st->st_size != size)
        return "not the size the manifest says";
    return 0;
}

/* NULL when files may be served from the directory whose fstat is st (as hfs3_serve_refusal says), else why. */
static inline const char *hfs3_serve_dir_refusal(const struct stat *st, uid_t me)
{
    if (!S_ISDIR(st->st_mode))
        return "not a directory";
    if (st->st_uid != me && st->st_uid != 0)
        return "in a directory of another user, who can rename anything in it";
    if (st->st_mode & S_IWOTH)
        return "in a directory writable by others";
    if ((st->st_mode & S_IWGRP) && !(st->st_mode & S_ISVTX))
        return "in a directory its group can write without the sticky bit";
    return 0;
}

/* The stamp: what the verifying process verified a file as, on the inode itself (issue 44). The owner and mode
 * rules above say who put a file under a name; only the stamp says that the file was verified *as that name*:
 * the owner of a directory a verified file passed through can rename it under another name of the same size.
 * The helper sets the extended attribute HFS3_STAMP_XATTR with fsetxattr on the descriptor it verified, while the
 * file is still its own 0600 temp file (a `user.` attribute needs write permission on the file: once the file has
 * no write bit, only its owner, who can chmod it, or root can change it; the rule above serves only files of the
 * user's own or root's). Its value: "<sha256>" (hashed whole: served under that name anywhere), or
 * "<sha256>.m<mount key>" (checked by that mount's chunk digests only: served only from that mount's cblobs/),
 * followed by " <boot id>" when it was installed before its flush: under another boot it passes only where
 * unflushed/ is the owner's or root's (then the record of a crash is still there to say so: lib/durable.c
 * hfs3_unflushed_trusted), else it is verified again. docs/security.md and docs/internals.md ("Which descriptor
 * is served") say why. */
#define HFS3_STAMP_XATTR "user.hfs3.verified"

enum {
    HFS3_STAMP_OK = 0,    /* verified as this name, and on disk or in this boot's page cache */
    HFS3_STAMP_NONE,      /* no stamp (a file of an older version, a .part, a copy made by hand) */
    HFS3_STAMP_OTHER,     /* verified as another name (or another mount's chunk digests) */
    HFS3_STAMP_BOOT,      /* verified as this name under another boot, and not known to be on disk */
    HFS3_STAMP_UNSUP,     /* the file system has no user extended attributes */
};

/* The stamp of the file open as fd (its fgetxattr) against the name hex (64 hex digits) served from blobs/ (key NULL) or from the
 * cblobs/ of the mount with key (16 hex digits). boot: this boot's id (36 characters), or NULL when unknown (a
 * stamp with a boot id is then HFS3_STAMP_BOOT). errno is preserved. */
static inline int hfs3_stamp_check(int fd, const char *hex, const char *key, const char *boot)
{
    char v[160];
    int e = errno;
    /* the raw system call: the shim exports its own fgetxattr (shim/wrap.c), which a call from inside it reaches */
    long n = syscall(SYS_fgetxattr, fd, HFS3_STAMP_XATTR, v, sizeof v - 1);
    if (n < 0 && errno == EBADF) {
        /* an O_PATH descriptor (the shim's path_of_blob): the same inode through its /proc/self/fd link */
        char p[40];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        n = syscall(SYS_getxattr, p, HFS3_STAMP_XATTR, v, sizeof v - 1);
    }
    int unsup = n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP);
    errno = e;
    if (n < 0)
        return unsup ? HFS3_STAMP_UNSUP : HFS3_STAMP_NONE;
    v[n] = 0;
    if (n < 64 || memcmp(v, hex, 64) != 0)
        return HFS3_STAMP_OTHER;
    size_t i = 64;
    if (v[i] == '.') {
        if (!key || v[i + 1] != 'm' || strlen(key) != 16 || strncmp(v + i + 2, key, 16) != 0)
            return HFS3_STAMP_OTHER;
        i += 18;
    }
    if (v[i] == 0)
        return HFS3_STAMP_OK;
    if (v[i] != ' ' || strlen(v + i + 1) != 36)
        return HFS3_STAMP_OTHER;
    return boot && !memcmp(v + i + 1, boot, 36) ? HFS3_STAMP_OK : HFS3_STAMP_BOOT;
}

/* NULL when the file open as fd, which passed hfs3_serve_refusal, may be served under the name hex from the
 * directory whose fstat is dir (key, boot: as hfs3_stamp_check), else why. On a file system without user extended
 * attributes no file carries a stamp: there a file passes only from a directory nobody but its owner (the user or
 * root: hfs3_serve_dir_refusal) can write, for nobody else can then have renamed any file into it. *state (may be
 * NULL): hfs3_stamp_check's answer. */
static inline const char *hfs3_stamp_refusal(int fd, const struct stat *dir, const char *hex, const char *key,
                                             const char *boot, int *state)
{
    int s = hfs3_stamp_check(fd, hex, key, boot);
    if (state)
        *state = s;
    switch (s) {
    case HFS3_STAMP_OK:
        return 0;
    case HFS3_STAMP_NONE:
        return "not stamped as verified (" HFS3_STAMP_XATTR "): verified again before it is served";
    case HFS3_STAMP_OTHER:
        return "stamped as verified as another file (" HFS3_STAMP_XATTR "): renamed from another name";
    case HFS3_STAMP_BOOT:
        return "verified under another boot and not known to be on disk: verified again before it is served";
    default:
        return dir->st_mode & (S_IWGRP | S_IWOTH) ? "in a directory others can write, on a file system without "
                                                    "user extended attributes (no stamp can say what it was "
                                                    "verified as)" : 0;
    }
}

#endif
