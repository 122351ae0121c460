/* write.c - probe: every write attempt on a mount is EROFS (a rename out of it EXDEV, as across a read-only
 * mount's edge). */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "probe.h"

#define RO(call, what) do { errno = 0; OK((call) < 0 && errno == EROFS, what); } while (0)
#define XD(call, what) do { errno = 0; OK((call) < 0 && errno == EXDEV, what); } while (0)

int main(int argc, char **argv)
{
    char b[4096], b2[4096];
    RO(mkdir(P(b, "newdir"), 0755), "mkdir");
    RO(mkdirat(AT_FDCWD, P(b, "newdir"), 0755), "mkdirat");
    RO(rmdir(P(b, "dir")), "rmdir");
    RO(unlink(P(b, "a.txt")), "unlink");
    RO(unlinkat(AT_FDCWD, P(b, "a.txt"), 0), "unlinkat");
    RO(rename(P(b, "a.txt"), P(b2, "b.txt")), "rename");
    XD(rename(P(b, "a.txt"), "/tmp/hfs3-probe-never"), "rename out");
    RO(link(P(b, "a.txt"), P(b2, "hard")), "link");
    RO(symlink("a.txt", P(b, "sym")), "symlink");
    RO(truncate(P(b, "a.txt"), 0), "truncate");
    RO(chmod(P(b, "a.txt"), 0600), "chmod");
    RO(fchmodat(AT_FDCWD, P(b, "a.txt"), 0600, 0), "fchmodat");
    RO(chown(P(b, "a.txt"), 0, 0), "chown");
    RO(lchown(P(b, "link-to-a"), 0, 0), "lchown");
    RO(utimensat(AT_FDCWD, P(b, "a.txt"), NULL, 0), "utimensat");
    RO(utimes(P(b, "a.txt"), NULL), "utimes");
    RO(setxattr(P(b, "a.txt"), "user.x", "1", 1, 0), "setxattr");
    RO(removexattr(P(b, "a.txt"), "user.x"), "removexattr");
    RO(mknod(P(b, "fifo"), S_IFIFO | 0600, 0), "mknod");
    int fd = open(P(b, "a.txt"), O_RDONLY);
    RO(fchmod(fd, 0600), "fchmod on a mount fd");
    RO(futimens(fd, NULL), "futimens on a mount fd");
    RO(fsetxattr(fd, "user.x", "1", 1, 0), "fsetxattr on a mount fd");
    struct stat st;
    OK(fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0444, "blob untouched");
    close(fd);
    DONE();
}
