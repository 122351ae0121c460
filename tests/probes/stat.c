/* stat.c - probe: the stat family (stat, lstat, fstatat, fstat identity, statx, AT_EMPTY_PATH, EFAULT). */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "probe.h"

int main(int argc, char **argv)
{
    char b[4096], b2[4096];
    struct stat st, st2;
    OK(stat(P(b, "a.txt"), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0444 && st.st_size == 13 &&
           st.st_blocks == 8 && st.st_nlink == 1, "stat a.txt");
    OK(stat(P(b, "dir/b.bin"), &st) == 0 && st.st_size == 3000 && st.st_blocks == 8, "stat size/blocks");
    OK(stat(P(b, "dir"), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0555, "stat dir 0555");
    OK(stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode), "stat mount root");
    OK(lstat(P(b, "link-to-a"), &st) == 0 && S_ISLNK(st.st_mode) && st.st_size == 5, "lstat symlink");
    OK(stat(P(b, "link-to-a"), &st) == 0 && S_ISREG(st.st_mode), "stat follows symlink");
    stat(P(b, "a.txt"), &st);
    stat(P(b, "link-to-a"), &st2);
    OK(st.st_dev == st2.st_dev && st.st_ino == st2.st_ino, "link and target share identity");
    stat(P(b, "same.txt"), &st2);
    OK(st.st_ino != st2.st_ino, "equal content, two files, two identities (design.md 5)");
    int fd = open(P(b, "a.txt"), O_RDONLY);
    OK(fd >= 0 && fstat(fd, &st2) == 0 && st.st_dev == st2.st_dev && st.st_ino == st2.st_ino &&
           st2.st_size == 13 && (st2.st_mode & 07777) == 0444, "fstat agrees with stat");
    OK(fstatat(fd, "", &st2, AT_EMPTY_PATH) == 0 && st.st_ino == st2.st_ino, "fstatat AT_EMPTY_PATH");
    struct statx sx;
    OK(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) == 0 && sx.stx_ino == st.st_ino && sx.stx_size == 13,
       "statx AT_EMPTY_PATH");
    close(fd);
    OK(statx(AT_FDCWD, P(b, "dir/b.bin"), 0, STATX_BASIC_STATS, &sx) == 0 && sx.stx_size == 3000, "statx path");
    OK(statx(AT_FDCWD, P(b, "dirlink"), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) == 0 && S_ISLNK(sx.stx_mode),
       "statx nofollow");
    errno = 0;
    const char *volatile nullp = NULL;
    struct statx *volatile nullx = NULL;
    OK(statx(0, nullp, 0, STATX_ALL, nullx) < 0 && errno == EFAULT, "statx NULL is EFAULT");
    int d = open(P(b, "dir"), O_RDONLY | O_DIRECTORY);
    OK(fstatat(d, "b.bin", &st, 0) == 0 && st.st_size == 3000, "fstatat relative to a mount dir");
    OK(fstatat(d, "up", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode), "fstatat nofollow");
    OK(fstatat(d, "up", &st, 0) == 0 && S_ISDIR(st.st_mode), "fstatat follows dir link");
    OK(fstat(d, &st) == 0 && stat(P(b2, "dir"), &st2) == 0 && st.st_ino == st2.st_ino && S_ISDIR(st.st_mode),
       "dir fd identity");
    close(d);
    errno = 0;
    OK(stat(P(b, "a.txt/x"), &st) < 0 && errno == ENOTDIR, "ENOTDIR for file/x");
    OK(stat(P(b, "a.txt/"), &st) < 0 && errno == ENOTDIR, "ENOTDIR for file/");
    OK(stat(P(b, "nope"), &st) < 0 && errno == ENOENT, "ENOENT");
    snprintf(b, sizeof b, "/%s//dir/./../a.txt", argv[1]);
    OK(stat(b, &st) == 0 && st.st_size == 13, "odd spelling %s", b);
    snprintf(b, sizeof b, "%s/", argv[1]);
    OK(stat(b, &st) == 0 && S_ISDIR(st.st_mode), "trailing slash");
    DONE();
}
