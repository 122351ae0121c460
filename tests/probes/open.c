/* open.c - probe: the open family and stdio on a mount (read, EROFS, ENOTDIR, openat, fortified paths), and
 * that O_CLOEXEC (fopen's "e") is kept: a model descriptor must not leak into an exec'd child. */
#include <fcntl.h>
#include <unistd.h>
#include "probe.h"

int main(int argc, char **argv)
{
    char b[4096], buf[64];
    volatile int rd = O_RDONLY;   /* not constant: fortified builds call __open_2 */
    int fd = open(P(b, "a.txt"), rd);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
    OK(fd >= 0 && n == 13 && !memcmp(buf, "hello from a\n", 13), "open+read a.txt");
    close(fd);
    fd = open(P(b, "link-to-a"), O_RDONLY | O_CLOEXEC);
    OK(fd >= 0 && read(fd, buf, sizeof buf) == 13, "open through a symlink");
    close(fd);
    /* FD_CLOEXEC exactly when asked for: files, directories, O_PATH, openat, the mount's ancestor */
    fd = open(P(b, "a.txt"), O_RDONLY | O_CLOEXEC);
    OK(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC, "open O_CLOEXEC: FD_CLOEXEC set");
    close(fd);
    fd = open(P(b, "a.txt"), rd);
    OK(fd >= 0 && fcntl(fd, F_GETFD) == 0, "open without O_CLOEXEC: FD_CLOEXEC clear");
    close(fd);
    fd = open(P(b, "dir"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    OK(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC, "open a dir O_CLOEXEC: FD_CLOEXEC set");
    int fd2 = fd >= 0 ? openat(fd, "b.bin", O_RDONLY | O_CLOEXEC) : -1;
    OK(fd2 >= 0 && fcntl(fd2, F_GETFD) == FD_CLOEXEC, "openat O_CLOEXEC: FD_CLOEXEC set");
    close(fd2);
    close(fd);
    fd = open(P(b, "a.txt"), O_PATH | O_CLOEXEC);
    OK(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC, "O_PATH|O_CLOEXEC: FD_CLOEXEC set");
    close(fd);
    fd = open(P(b, ".."), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    OK(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC, "the mount's parent O_CLOEXEC: FD_CLOEXEC set");
    close(fd);
    FILE *fe = fopen(P(b, "a.txt"), "re");
    OK(fe && fcntl(fileno(fe), F_GETFD) == FD_CLOEXEC, "fopen re: FD_CLOEXEC set");
    if (fe)
        fclose(fe);
    errno = 0;
    OK(open(P(b, "a.txt"), O_WRONLY) < 0 && errno == EROFS, "O_WRONLY is EROFS");
    OK(open(P(b, "new"), O_WRONLY | O_CREAT, 0644) < 0 && errno == EROFS, "O_CREAT is EROFS");
    OK(open(P(b, "a.txt"), O_RDONLY | O_TRUNC) < 0 && errno == EROFS, "O_TRUNC is EROFS");
    OK(creat(P(b, "c"), 0644) < 0 && errno == EROFS, "creat is EROFS");
    OK(open(P(b, "a.txt"), O_RDONLY | O_DIRECTORY) < 0 && errno == ENOTDIR, "O_DIRECTORY on a file");
    OK(open(P(b, "a.txt/x"), O_RDONLY) < 0 && errno == ENOTDIR, "file/x is ENOTDIR");
    OK(open(P(b, "missing"), O_RDONLY) < 0 && errno == ENOENT, "missing is ENOENT");
    OK(open(P(b, "link-to-a"), O_RDONLY | O_NOFOLLOW) < 0 && errno == ELOOP, "O_NOFOLLOW on a link");
    int d = open(P(b, "dir"), O_RDONLY | O_DIRECTORY);
    OK(d >= 0, "open a dir");
    fd = openat(d, "b.bin", O_RDONLY);
    OK(fd >= 0 && read(fd, buf, 10) == 10, "openat relative to a mount dir");
    close(fd);
    fd = openat(d, "deeper/c.txt", rd);
    OK(fd >= 0 && read(fd, buf, 2) == 2 && buf[0] == 'c', "openat nested");
    close(fd);
    int d2 = openat(d, "..", O_RDONLY | O_DIRECTORY);
    fd = d2 >= 0 ? openat(d2, "a.txt", O_RDONLY) : -1;
    OK(fd >= 0, "openat .. then a.txt");
    close(fd);
    close(d2);
    close(d);
    FILE *f = fopen(P(b, "a.txt"), "r");
    OK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "hello from a\n"), "fopen+fgets");
    if (f)
        fclose(f);
    f = fopen(P(b, "dir/deeper/c.txt"), "re");
    OK(f != NULL, "fopen re");
    if (f) {
        f = freopen(P(b, "a.txt"), "r", f);
        OK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "hello from a\n"), "freopen");
        if (f)
            fclose(f);
    }
    errno = 0;
    OK(fopen(P(b, "a.txt"), "w") == NULL && errno == EROFS, "fopen w is EROFS");
    OK(fopen(P(b, "a.txt"), "r+") == NULL && errno == EROFS, "fopen r+ is EROFS");
    fd = open(P(b, "empty"), O_RDONLY);
    OK(fd >= 0 && read(fd, buf, 1) == 0, "empty file");
    close(fd);
    DONE();
}
