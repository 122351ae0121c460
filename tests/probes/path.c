/* path.c - probe: readlink, realpath, access, xattr and statfs on a mount, and where a mount ends: a name that
 * only begins with the mount's path (M/flata.txt, M/flat2 beside M/flat) is not inside it. */
#include <fcntl.h>
#include <limits.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "probe.h"

int main(int argc, char **argv)
{
    char b[4096], buf[PATH_MAX], exp[4096];
    ssize_t n = readlink(P(b, "link-to-a"), buf, sizeof buf);
    OK(n == 5 && !memcmp(buf, "a.txt", 5), "readlink");
    n = readlink(P(b, "dir/up"), buf, 4);
    OK(n == 4 && !memcmp(buf, "../d", 4), "readlink truncates");
    errno = 0;
    OK(readlink(P(b, "a.txt"), buf, sizeof buf) < 0 && errno == EINVAL, "readlink on a file is EINVAL");
    int d = open(argv[1], O_RDONLY | O_DIRECTORY);
    n = readlinkat(d, "dirlink", buf, sizeof buf);
    OK(n == 3 && !memcmp(buf, "dir", 3), "readlinkat");
    close(d);
    snprintf(exp, sizeof exp, "%s/a.txt", argv[1]);
    OK(realpath(P(b, "link-to-a"), buf) && !strcmp(buf, exp), "realpath -> %s", buf);
    char *r = realpath(P(b, "dir/up/c.txt"), NULL);
    snprintf(exp, sizeof exp, "%s/dir/deeper/c.txt", argv[1]);
    OK(r && !strcmp(r, exp), "realpath through dir links -> %s", r ? r : "(null)");
    free(r);
    r = canonicalize_file_name(P(b, "dirlink/./deeper/../b.bin"));
    snprintf(exp, sizeof exp, "%s/dir/b.bin", argv[1]);
    OK(r && !strcmp(r, exp), "canonicalize_file_name -> %s", r ? r : "(null)");
    free(r);
    errno = 0;
    OK(realpath(P(b, "nope"), buf) == NULL && errno == ENOENT, "realpath missing");
    OK(access(P(b, "a.txt"), R_OK) == 0, "access R_OK");
    OK(access(P(b, "a.txt"), W_OK) < 0 && errno == EROFS, "access W_OK is EROFS");
    OK(access(P(b, "a.txt"), X_OK) < 0 && errno == EACCES, "access X_OK on a file");
    OK(access(P(b, "dir"), X_OK) == 0, "access X_OK on a dir");
    OK(faccessat(AT_FDCWD, P(b, "nope"), F_OK, 0) < 0 && errno == ENOENT, "faccessat missing");
    OK(getxattr(P(b, "a.txt"), "user.x", buf, sizeof buf) < 0 && errno == ENODATA, "getxattr ENODATA");
    OK(lgetxattr(P(b, "link-to-a"), "user.x", buf, sizeof buf) < 0 && errno == ENODATA, "lgetxattr ENODATA");
    OK(listxattr(P(b, "a.txt"), buf, sizeof buf) == 0, "listxattr empty");
    int fd = open(P(b, "a.txt"), O_RDONLY);
    OK(fgetxattr(fd, "user.x", buf, sizeof buf) < 0 && errno == ENODATA, "fgetxattr ENODATA");
    OK(flistxattr(fd, buf, sizeof buf) == 0, "flistxattr empty");
    struct statvfs sv;
    OK(fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY), "fstatvfs read-only");
    close(fd);
    struct statfs sf;
    OK(statfs(P(b, "dir"), &sf) == 0 && (sf.f_flags & ST_RDONLY), "statfs read-only");
    OK(statvfs(argv[1], &sv) == 0 && (sv.f_flag & ST_RDONLY), "statvfs read-only");
    /* the mount's boundary is a '/': these siblings do not exist (the mount's parent is not on disk) */
    struct stat st;
    snprintf(b, sizeof b, "%sa.txt", argv[1]);
    errno = 0;
    OK(stat(b, &st) < 0 && errno == ENOENT, "stat %s (the mount's path + a file's name) is ENOENT", b);
    OK(open(b, O_RDONLY) < 0 && errno == ENOENT, "open %s is ENOENT", b);
    snprintf(b, sizeof b, "%s2/a.txt", argv[1]);
    OK(lstat(b, &st) < 0 && errno == ENOENT, "lstat %s is ENOENT", b);
    snprintf(b, sizeof b, "%sdir", argv[1]);
    OK(access(b, F_OK) < 0 && errno == ENOENT, "access %s is ENOENT", b);
    DONE();
}
