/* cancelopen.c - `cancelopen PATH N GATE [CMD]`: N times, a thread open()s PATH (a file of a mount not in the
 * cache, whose fetch waits for the file GATE) and is cancelled (pthread_cancel) 30 ms later, inside the shim's
 * wait on the fetch; then GATE is created, the main thread opens PATH itself (waiting for the fetch to end) and
 * closes it. Prints "fds BEFORE AFTER" (the entries of /proc/self/fd before the first thread and after the last
 * close), one "left FD -> TARGET" line per descriptor that was not there before, then runs CMD (system(), while
 * this process still lives: what a gc run now can evict) and prints "cmd RC". A cancelled open must leave
 * nothing behind: no descriptor, no lock, no pin that keeps a gc from removing the file (issue 33 item 3). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static char seen[4096];

static void *opener(void *arg)
{
    (void)arg;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int fds(int mark)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0, me = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        if (fd == me)
            continue;
        n++;
        if (mark && fd < (int)sizeof seen)
            seen[fd] = 1;
        else if (!mark && (fd >= (int)sizeof seen || !seen[fd])) {
            char p[64], t[4096];
            snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
            ssize_t k = readlink(p, t, sizeof t - 1);
            t[k > 0 ? k : 0] = 0;
            printf("left %d -> %s\n", fd, t);
        }
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 4 || atoi(argv[2]) <= 0) {
        fprintf(stderr, "usage: cancelopen PATH N GATE [CMD]\n");
        return 2;
    }
    path = argv[1];
    int n = atoi(argv[2]);
    int before = fds(1);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, opener, NULL))
            return 1;
        struct timespec ts = {0, 30 * 1000000L};
        nanosleep(&ts, NULL);
        pthread_cancel(t);
        pthread_join(t, NULL);
    }
    int g = open(argv[3], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (g < 0) {
        perror(argv[3]);
        return 1;
    }
    close(g);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    close(fd);
    int after = fds(0);
    printf("fds %d %d\n", before, after);
    fflush(stdout);
    if (argc > 4)
        printf("cmd %d\n", system(argv[4]));
    return 0;
}
