/* statloop.c - `statloop N PATH...`: stat()s each PATH N times and prints nanoseconds per call for each, one
 * line "PATH NS". For bench/: the shim's cost on paths outside its mounts, and on mount paths. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: statloop N PATH...\n");
        return 2;
    }
    long n = atol(argv[1]);
    for (int a = 2; a < argc; a++) {
        struct stat st;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < n; i++)
            (void)stat(argv[a], &st);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)n;
        printf("%s %.0f\n", argv[a], ns);
    }
    return 0;
}
