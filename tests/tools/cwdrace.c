/* cwdrace.c - chdir in one thread, relative calls in another (issue 6, item 5). Usage:
 *   cwdrace N INSIDE N_INSIDE OUTSIDE N_OUTSIDE
 * The main thread chdirs N times into INSIDE (a mount directory listing N_INSIDE entries) and OUTSIDE (a real
 * directory listing N_OUTSIDE), listing "." after each; three other threads stat relative names all along. Prints
 * the number of wrong listings (a stale idea of the cwd lists the skeleton, not the mount); exit 1 if any. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile int stop;

static void *stats(void *arg)
{
    struct stat st;
    long n = 0;
    while (!stop) {
        stat("b.bin", &st);
        stat("x", &st);
        lstat("nope", &st);
        n++;
    }
    return (void *)n;
}

static int count(void)
{
    DIR *d = opendir(".");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return 2;
    long iters = atol(argv[1]);
    int nin = atoi(argv[3]), nout = atoi(argv[5]);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, stats, NULL);
    long wrong = 0;
    for (long i = 0; i < iters; i++) {
        int c = -2;
        if (chdir(argv[2]) < 0 || (c = count()) != nin) {
            if (!wrong++)
                fprintf(stderr, "first wrong listing: %d entries in %s (%m)\n", c, argv[2]);
        }
        if (chdir(argv[4]) < 0 || (c = count()) != nout) {
            if (!wrong++)
                fprintf(stderr, "first wrong listing: %d entries in %s\n", c, argv[4]);
        }
    }
    stop = 1;
    long total = 0;
    for (int i = 0; i < 3; i++) {
        void *n;
        pthread_join(th[i], &n);
        total += (long)n;
    }
    printf("%ld chdir pairs, %ld relative stat rounds alongside, %ld wrong listings\n", iters, total, wrong);
    return wrong ? 1 : 0;
}
