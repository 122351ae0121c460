/* forkstress.c - fork() while other threads wait on cold fetches (issue 6, item 3). Usage:
 *   forkstress MS FILE...
 * One thread per FILE opens it (and reads a byte) in a loop for MS milliseconds while the main thread forks
 * every 2 ms; each child opens every FILE too, under alarm(8), and exits. A lock descriptor of the shim that
 * survived into a child would make that child wait for itself: it then dies of SIGALRM. Prints the number of
 * children, hung children and failed opens; exit 0 when no child hung and the threads finished. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static int nfail;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int touch(const char *p)
{
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -1;
    char c;
    (void)!read(fd, &c, 1);
    close(fd);
    return 0;
}

static void *worker(void *arg)
{
    while (!stop)
        if (touch(arg) < 0)
            __atomic_add_fetch(&nfail, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: forkstress MS FILE...\n");
        return 2;
    }
    long ms = atol(argv[1]);
    int nf = argc - 2;
    pthread_t th[64];
    if (nf > 64)
        nf = 64;
    for (int i = 0; i < nf; i++)
        pthread_create(&th[i], NULL, worker, argv[2 + i]);
    long long end = now_ms() + ms;
    int kids = 0, hung = 0, bad = 0;
    while (now_ms() < end) {
        pid_t p = fork();
        if (p == 0) {
            alarm(8);
            int f = 0;
            for (int i = 0; i < nf; i++)
                f += touch(argv[2 + i]) < 0;
            _exit(f ? 3 : 0);
        }
        if (p > 0)
            kids++;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
            if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
                hung++;
            else if (!WIFEXITED(st) || WEXITSTATUS(st))
                bad++;
            kids--;
        }
    }
    stop = 1;
    for (int i = 0; i < nf; i++)
        pthread_join(th[i], NULL);
    int st;
    int total_left = kids;
    while (kids > 0 && waitpid(-1, &st, 0) > 0) {
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
            hung++;
        else if (!WIFEXITED(st) || WEXITSTATUS(st))
            bad++;
        kids--;
    }
    printf("children left at the end %d, hung %d, failed %d, failed opens in threads %d\n", total_left, hung, bad,
           nfail);
    return hung ? 1 : 0;
}
