/* sigstorm.c - opens and reads files while signals arrive whose handlers lack SA_RESTART (issue 41 item 2), as a
 * program of the host would: the kernel's answers are the oracle (the same files in a local folder). Usage:
 *   sigstorm alrm|chld ROOT REL...
 * alrm: SIGALRM every 300 us (setitimer) and SIGCHLD, handlers without SA_RESTART; chld: only the SIGCHLD handler
 * (a program that runs children of its own). For each REL: stat, open O_RDONLY, read to the end, one line: "REL ok
 * fdN SIZE SUM" or "REL stat|open|read ERRNO". Last line: "sigchld N", the SIGCHLD the program got (it starts no
 * child: any is the shim's). The SIGALRM count goes to stderr. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t alrm, chld;
static void on_alrm(int s) { (void)s; alrm++; }
static void on_chld(int s) { (void)s; chld++; }

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_chld;
    sigaction(SIGCHLD, &sa, NULL);
    if (!strcmp(argv[1], "alrm")) {
        sa.sa_handler = on_alrm;
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 300}, {0, 300}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    char p[4096];
    for (int i = 3; i < argc; i++) {
        snprintf(p, sizeof p, "%s/%s", argv[2], argv[i]);
        struct stat st;
        if (stat(p, &st) < 0) {
            printf("%s stat %s\n", argv[i], strerrorname_np(errno));
            continue;
        }
        int fd = open(p, O_RDONLY);
        if (fd < 0) {
            printf("%s open %s\n", argv[i], strerrorname_np(errno));
            continue;
        }
        unsigned long long size = 0;
        unsigned sum = 0;
        char b[65536];
        ssize_t k;
        while ((k = read(fd, b, sizeof b)) > 0) {
            for (ssize_t j = 0; j < k; j++)
                sum = sum * 31 + (unsigned char)b[j];
            size += (unsigned long long)k;
        }
        if (k < 0)
            printf("%s read %s\n", argv[i], strerrorname_np(errno));
        else
            printf("%s ok fd%d %llu %u\n", argv[i], fd, size, sum);
        close(fd);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("sigchld %d\n", (int)chld);
    fprintf(stderr, "sigalrm %d\n", (int)alrm);
    return 0;
}
