/* statloop.c - `statloop [-c] N PATH...`: stat()s each PATH N times and prints nanoseconds per call for each,
 * one line "PATH NS". For bench/: the shim's cost on paths outside its mounts, and on mount paths. -c: each
 * stat() is followed by the check the shim makes after a failed call outside its mounts (openat2 with
 * RESOLVE_NO_SYMLINKS of the same path, shim/path.c), without the shim: the floor of a failing stat there. */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int check = argc > 1 && strcmp(argv[1], "-c") == 0;
    argv += check;
    argc -= check;
    if (argc < 3) {
        fprintf(stderr, "usage: statloop [-c] N PATH...\n");
        return 2;
    }
    long n = atol(argv[1]);
    struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
    for (int a = 2; a < argc; a++) {
        struct stat st;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < n; i++) {
            (void)stat(argv[a], &st);
            if (check) {
                long fd = syscall(SYS_openat2, AT_FDCWD, argv[a], &how, sizeof how);
                if (fd >= 0)
                    close((int)fd);
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)n;
        printf("%s %.0f\n", argv[a], ns);
    }
    return 0;
}
