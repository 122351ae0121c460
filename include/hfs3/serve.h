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

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

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

#endif
