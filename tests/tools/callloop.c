/* callloop.c - `callloop N KIND PATH`: N iterations of KIND on PATH, then one line "KIND NS" (nanoseconds per
 * iteration). KIND: pair = stat() + open(O_RDONLY) + close() of PATH, stat = stat() alone (PATH may be missing).
 * For bench/: run under callgrind at two N, the slope of the instruction count is the cost per iteration (the
 * shim's added instructions = the slope with LD_PRELOAD minus the slope without). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[2], "pair") && strcmp(argv[2], "stat"))) {
        fprintf(stderr, "usage: callloop N pair|stat PATH\n");
        return 2;
    }
    long n = atol(argv[1]);
    int pair = !strcmp(argv[2], "pair");
    const char *path = argv[3];
    struct stat st;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        (void)stat(path, &st);
        if (pair) {
            int fd = open(path, O_RDONLY);
            if (fd >= 0)
                close(fd);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)(n ? n : 1);
    printf("%s %.0f\n", argv[2], ns);
    return 0;
}
