/* fd.c - probe: the descriptor table (dup, dup2, F_DUPFD, close and reuse), mmap, fork after first use. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "probe.h"

int main(int argc, char **argv)
{
    char b[4096];
    struct stat st, st2;
    stat(P(b, "a.txt"), &st);
    int fd = open(b, O_RDONLY);
    int a = dup(fd), c = fcntl(fd, F_DUPFD_CLOEXEC, 50);
    OK(a >= 0 && fstat(a, &st2) == 0 && st2.st_ino == st.st_ino, "dup keeps identity");
    OK(c >= 50 && fstat(c, &st2) == 0 && st2.st_ino == st.st_ino, "F_DUPFD_CLOEXEC keeps identity");
    OK(dup2(fd, 40) == 40 && fstat(40, &st2) == 0 && st2.st_ino == st.st_ino, "dup2 keeps identity");
    close(a);
    close(c);
    close(40);
    close(fd);
    int o = open("/proc/self/exe", O_RDONLY);
    OK(o == fd && fstat(o, &st2) == 0 && st2.st_ino != st.st_ino && (st2.st_mode & 0111), "reused fd is real");
    close(o);
    fd = open(P(b, "dir/b.bin"), O_RDONLY);
    void *m = mmap(NULL, 3000, PROT_READ, MAP_PRIVATE, fd, 0);
    OK(m != MAP_FAILED && lseek(fd, 0, SEEK_END) == 3000, "mmap + lseek");
    FILE *f = fdopen(fd, "r");
    fclose(f);   /* closes fd inside libc: the table must not lie about the next owner of the number */
    o = open("/proc/self/exe", O_RDONLY);
    OK(fstat(o, &st2) == 0 && (st2.st_mode & 0111), "fd reused after fclose is real");
    close(o);
    pid_t pid = fork();
    if (pid == 0) {
        struct stat s;
        int f2 = open(P(b, "link-to-a"), O_RDONLY);
        _exit(f2 >= 0 && fstat(f2, &s) == 0 && s.st_ino == st.st_ino ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork after first use");
    DONE();
}
