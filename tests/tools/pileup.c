/* pileup.c - many threads of one process open cold files at once, and fork() while they wait (issue 22, items
 * 1 and 2). Usage:
 *   pileup [-f NCHILD] NTHREADS MNT=LOCAL...
 * NTHREADS threads wait at a barrier, then thread i opens the MNT of pair i % npairs, reads it whole and compares
 * it with LOCAL (a copy outside the mounts). With -f the main thread forks 1 s after the barrier, while the
 * threads are still waiting on their fetches (the count of those is printed: the case is only exercised when
 * it is NTHREADS), and the child runs NCHILD threads the same way under alarm(CHILD_S): a child that never
 * finishes dies of SIGALRM. Prints one line; exit 0 when every thread read the right bytes and no child hung. */
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

#define CHILD_S 25

static char **mnt, **loc;
static int npairs, returned, bad;
static pthread_barrier_t go;

/* 0 when the two files hold the same bytes; -1 (and why, on stderr, once) otherwise */
static int same(const char *a, const char *b)
{
    static int said;
    int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
    __atomic_add_fetch(&returned, 1, __ATOMIC_RELAXED);
    if (fa < 0 || fb < 0) {
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            fprintf(stderr, "open %s: %s\n", fa < 0 ? a : b, strerror(errno));
        if (fa >= 0)
            close(fa);
        if (fb >= 0)
            close(fb);
        return -1;
    }
    char x[8192], y[8192];
    int rc = 0;
    for (;;) {
        ssize_t n = read(fa, x, sizeof x), k = 0;
        while (k < n) {   /* the local copy may come in other pieces */
            ssize_t m = read(fb, y + k, (size_t)(n - k));
            if (m <= 0)
                break;
            k += m;
        }
        if (n < 0 || k != n || memcmp(x, y, (size_t)n)) {
            rc = -1;
            break;
        }
        if (n == 0)
            break;
    }
    if (rc == 0 && read(fb, y, 1) != 0)
        rc = -1;
    if (rc < 0 && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "%s: other bytes than %s\n", a, b);
    close(fa);
    close(fb);
    return rc;
}

static void *worker(void *arg)
{
    long i = (long)arg;
    if (i >= 0)
        pthread_barrier_wait(&go);
    else
        i = -i - 1;
    if (same(mnt[i % npairs], loc[i % npairs]) < 0)
        __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* n threads; a barrier first when barrier (then the caller waits on it too). 0, or -1 when one cannot start. */
static int start(pthread_t *th, int n, int barrier)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 256 << 10);
    for (long i = 0; i < n; i++) {
        int e = pthread_create(&th[i], &at, worker, (void *)(barrier ? i : -i - 1));
        if (e) {
            fprintf(stderr, "pthread_create: %s\n", strerror(e));
            return -1;
        }
    }
    pthread_attr_destroy(&at);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int nchild = -1, a = 1;
    if (argc > 2 && !strcmp(argv[1], "-f")) {
        nchild = atoi(argv[2]);
        a = 3;
    }
    if (argc - a < 2) {
        fprintf(stderr, "usage: pileup [-f NCHILD] NTHREADS MNT=LOCAL...\n");
        return 2;
    }
    int n = atoi(argv[a++]);
    npairs = argc - a;
    mnt = calloc((size_t)npairs, sizeof *mnt);
    loc = calloc((size_t)npairs, sizeof *loc);
    pthread_t *th = calloc((size_t)(n > nchild ? n : nchild) + 1, sizeof *th);
    if (n < 1 || !mnt || !loc || !th)
        return 2;
    for (int i = 0; i < npairs; i++) {
        char *eq = strchr(argv[a + i], '=');
        if (!eq)
            return 2;
        *eq = 0;
        mnt[i] = argv[a + i];
        loc[i] = eq + 1;
    }
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    if (start(th, n, 1) < 0)
        return 1;
    double t0 = now();
    pthread_barrier_wait(&go);
    int waiting = -1, child_ok = 1;
    pid_t pid = -1;
    if (nchild >= 0) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        waiting = n - __atomic_load_n(&returned, __ATOMIC_RELAXED);
        pid = fork();
        if (pid == 0) {
            alarm(CHILD_S);
            __atomic_store_n(&bad, 0, __ATOMIC_RELAXED);
            if (start(th, nchild, 0) < 0)
                _exit(1);
            for (int i = 0; i < nchild; i++)
                pthread_join(th[i], NULL);
            _exit(__atomic_load_n(&bad, __ATOMIC_RELAXED) ? 3 : 0);
        }
        if (pid < 0) {
            perror("fork");
            return 1;
        }
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    double t1 = now();
    printf("threads %d, wrong or failed %d, %.1f s", n, bad, t1 - t0);
    if (pid > 0) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        child_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("; waiting in open at fork %d; child of %d threads: %s, %.1f s", waiting, nchild,
               WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? "hung" :
               WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed", now() - t0);
    }
    printf("\n");
    return bad || !child_ok || (nchild >= 0 && waiting != n) ? 1 : 0;
}
