/* lastuse.h - the last use of a blob, recorded cheaply: the mtime of its lock file locks/<sha256>.lock, set
 * to now when a blob is opened (by the shim on open, by the helper when a fetch finds it cached). A lock file
 * is only ever flocked, never written, so nothing else moves its mtime but its creation, which happens when
 * the blob is first fetched. libc-only on purpose: the shim includes this header (shim/lastuse.c), and the
 * calls are raw system calls so that inside the shim they do not go through its own interposers.
 * Why the lock file and not the blob: setting both times to now needs only write access (other changes
 * need the owner); a blob is 0444 (0440 shared) and may be another member's, while every member may write a
 * shared lock file (0660). Why not atime: relatime updates it at most daily, noatime never. */
#ifndef HFS3_LASTUSE_H
#define HFS3_LASTUSE_H

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Skip the write when the recorded use is younger than this: a model opening its shards again and again
 * costs an openat, an fstat and a close. */
#define HFS3_LASTUSE_GRAIN 60

/* Sets the mtime of dirfd/name (a lock file; dirfd may be AT_FDCWD with a full path) to now, if it exists,
 * is a regular file with one link (never followed: O_NOFOLLOW; a FIFO cannot block: O_NONBLOCK) and was not
 * touched in the last HFS3_LASTUSE_GRAIN seconds. Errors are ignored: a missing record only makes the blob
 * look older. Stack: a struct stat and two timespecs. No allocation, no lock taken, never creates a file. */
static inline void hfs3_lastuse_touch_at(int dirfd, const char *name)
{
    long fd = syscall(SYS_openat, dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    if (fd < 0)
        return;
    struct stat st;
    struct timespec now;
    if (syscall(SYS_fstat, (int)fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
        clock_gettime(CLOCK_REALTIME, &now) == 0 &&
        (now.tv_sec - st.st_mtim.tv_sec >= HFS3_LASTUSE_GRAIN || now.tv_sec < st.st_mtim.tv_sec)) {
        /* both times to now (times NULL): the only change that write access allows without owning the
         * file, so a member records a use on another member's lock file; atime of a lock file means nothing */
        (void)syscall(SYS_utimensat, (int)fd, NULL, NULL, 0);
    }
    (void)syscall(SYS_close, (int)fd);
}

#endif
