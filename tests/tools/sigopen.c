/* sigopen.c - open() of a file while a signal arrives (issue 6, item 8). Usage: sigopen restart|norestart FILE
 * SIGALRM's handler is installed with or without SA_RESTART, alarm(1) armed, FILE opened. Prints "fd" or the
 * errno name, and the seconds the open took. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_alarm(int s) { got = s; }

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = strcmp(argv[1], "restart") ? 0 : SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    alarm(1);
    int fd = open(argv[2], O_RDONLY);
    int e = errno;
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%s %.1f handler=%d\n", fd >= 0 ? "fd" : e == EINTR ? "EINTR" : strerror(e), s, got != 0);
    return 0;
}
