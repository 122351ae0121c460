/* cwd.c - probe: chdir/fchdir into a mount, getcwd and relative paths there, fork and exec-free children. */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "probe.h"

int main(int argc, char **argv)
{
    char b[4096], buf[PATH_MAX], exp[4096];
    OK(chdir(P(b, "dir")) == 0, "chdir into a mount dir");
    snprintf(exp, sizeof exp, "%s/dir", argv[1]);
    OK(getcwd(buf, sizeof buf) && !strcmp(buf, exp), "getcwd -> %s", buf);
    char *g = getcwd(NULL, 0);
    OK(g && !strcmp(g, exp), "getcwd(NULL, 0)");
    free(g);
    OK(getcwd(buf, 3) == NULL && errno == ERANGE, "getcwd ERANGE");
    struct stat st;
    OK(stat("b.bin", &st) == 0 && st.st_size == 3000, "relative stat");
    int fd = open("deeper/c.txt", O_RDONLY);
    OK(fd >= 0 && read(fd, buf, 2) == 2, "relative open");
    close(fd);
    OK(chdir("up") == 0, "chdir through a symlinked dir");
    snprintf(exp, sizeof exp, "%s/dir/deeper", argv[1]);
    OK(getcwd(buf, sizeof buf) && !strcmp(buf, exp), "getcwd resolved -> %s", buf);
    OK(stat("../../a.txt", &st) == 0 && st.st_size == 13, "relative .. stat");
    OK(chdir("..") == 0 && getcwd(buf, sizeof buf) && strstr(buf, "/dir") && !strstr(buf, "deeper"), "chdir ..");
    pid_t pid = fork();
    if (pid == 0) {
        char c[PATH_MAX];
        int f = open("../a.txt", O_RDONLY);
        _exit(f >= 0 && read(f, c, 5) == 5 && getcwd(c, sizeof c) && strstr(c, "/dir") ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child reads relative to the cwd");
    int d = open(argv[1], O_RDONLY | O_DIRECTORY);
    OK(fchdir(d) == 0 && getcwd(buf, sizeof buf) && !strcmp(buf, argv[1]), "fchdir to mount root -> %s", buf);
    close(d);
    setenv("PWD", argv[1], 1);
    g = get_current_dir_name();
    OK(g && !strcmp(g, argv[1]), "get_current_dir_name");
    free(g);
    OK(chdir("a.txt") < 0 && errno == ENOTDIR, "chdir to a file");
    OK(chdir("/") == 0 && getcwd(buf, sizeof buf) && !strcmp(buf, "/"), "back out");
    OK(stat("a.txt", &st) < 0, "relative paths leave the mount");
    DONE();
}
