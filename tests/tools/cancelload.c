/* cancelload.c - `cancelload PATH`: a thread stat()s PATH, the first touch of its mount, and is cancelled
 * (pthread_cancel) 0.7 s later while the helper still works on the index; then the main thread stat()s PATH
 * itself. Exit 0 when that stat returns (either way), which it must: a mount left "loading" by the cancelled
 * thread made every later call on it wait forever. Run it under `timeout`. */
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *path;

static void *toucher(void *arg)
{
    struct stat st;
    (void)arg;
    stat(path, &st);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cancelload PATH\n");
        return 2;
    }
    path = argv[1];
    pthread_t t;
    if (pthread_create(&t, NULL, toucher, NULL))
        return 1;
    usleep(700000);
    pthread_cancel(t);
    pthread_join(t, NULL);
    struct stat st;
    int r = stat(path, &st);
    printf("%s\n", r == 0 ? "stat ok" : "stat failed");
    return 0;
}
