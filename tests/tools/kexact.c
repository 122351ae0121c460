/* kexact.c - one normalised line per operation on a read-only tree (issue 6, item 11). Usage: kexact ROOT
 * ROOT holds the flat fixture (a.txt, same.txt with a.txt's bytes, dir/, link-to-a). Run once over a read-only
 * tmpfs and once over the mount through the shim: the two transcripts must agree, but for the differences
 * t_shim_kernel.sh lists with their reasons. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;

static void line(const char *op, int r)
{
    printf("%-40s %s\n", op, r >= 0 ? "ok" : strerrorname_np(errno));
}

static const char *P(const char *rel)
{
    static char b[4][1024];
    static int i;
    i = (i + 1) % 4;
    snprintf(b[i], sizeof b[i], "%s/%s", root, rel);
    return b[i];
}

static int op_open(const char *rel, int flags)
{
    int fd = open(P(rel), flags, 0644);
    if (fd >= 0)
        close(fd);
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    root = argv[1];
    struct stat st, st2;
    char buf[64], name[400];
    line("open(a.txt, O_RDONLY|O_CREAT)", op_open("a.txt", O_RDONLY | O_CREAT));
    line("open(a.txt, O_RDONLY|O_CREAT|O_EXCL)", op_open("a.txt", O_RDONLY | O_CREAT | O_EXCL));
    line("open(missing, O_RDONLY|O_CREAT)", op_open("missing", O_RDONLY | O_CREAT));
    line("open(missing, O_RDONLY)", op_open("missing", O_RDONLY));
    line("open(dir, O_WRONLY)", op_open("dir", O_WRONLY));
    line("open(dir, O_RDONLY|O_TRUNC)", op_open("dir", O_RDONLY | O_TRUNC));
    line("open(a.txt, O_WRONLY)", op_open("a.txt", O_WRONLY));
    line("open(a.txt, O_RDONLY|O_TRUNC)", op_open("a.txt", O_RDONLY | O_TRUNC));
    line("open(a.txt, O_RDONLY|O_APPEND)", op_open("a.txt", O_RDONLY | O_APPEND));
    line("open(a.txt, O_RDONLY|O_DIRECTORY)", op_open("a.txt", O_RDONLY | O_DIRECTORY));
    line("open(a.txt/, O_RDONLY)", op_open("a.txt/", O_RDONLY));
    line("open(link-to-a, O_RDONLY|O_NOFOLLOW)", op_open("link-to-a", O_RDONLY | O_NOFOLLOW));
    line("readlink(link-to-a, buf, 0)", (int)readlink(P("link-to-a"), buf, 0));
    line("readlink(a.txt)", (int)readlink(P("a.txt"), buf, sizeof buf));
    memset(name, 'x', 300);
    name[300] = 0;
    line("stat(300-byte name)", stat(P(name), &st));
    line("stat(a.txt/..)", stat(P("a.txt/.."), &st));
    line("stat(missing/..)", stat(P("missing/.."), &st));
    line("stat(dir/..)", stat(P("dir/.."), &st));
    line("mkdir(new)", mkdir(P("new"), 0755));
    line("unlink(a.txt)", unlink(P("a.txt")));
    line("rmdir(dir)", rmdir(P("dir")));
    line("rename(a.txt, b)", rename(P("a.txt"), P("b")));
    line("symlink(x, new)", symlink("x", P("new")));
    line("chmod(a.txt)", chmod(P("a.txt"), 0600));
    line("truncate(a.txt)", truncate(P("a.txt"), 0));
    line("access(a.txt, W_OK)", access(P("a.txt"), W_OK));
    line("access(a.txt, R_OK)", access(P("a.txt"), R_OK));
    int d = open(P("a.txt"), O_PATH);
    line("openat(O_PATH fd of a file, x)", openat(d, "x", O_RDONLY));
    line("fchdir(O_PATH fd of a file)", fchdir(d));
    close(d);
    stat(P("a.txt"), &st);
    stat(P("same.txt"), &st2);
    printf("%-40s %s\n", "a.txt and same.txt (equal content)", st.st_ino == st2.st_ino ? "one inode" : "two inodes");
    stat(P("link-to-a"), &st2);
    printf("%-40s %s\n", "a.txt and link-to-a", st.st_ino == st2.st_ino ? "one inode" : "two inodes");
    return 0;
}
