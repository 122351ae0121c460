/* guardrace.c - the write guard's check and the call race (issue 33 item 5), run under the shim: one thread flips
 * the symlink W/link between W/real (a real directory) and S (a directory of the cache's skeleton, reached by its
 * real path) while other threads create and remove through it: open(O_CREAT), mkdir, mkfifo, symlink, mknod,
 * unlink, rmdir of W/link/NAME. A call the guard let through must land in W/real; after the run S must hold what it
 * held before (t_shim_guardrace.sh checks). Usage:
 *   guardrace W S COUNT SECONDS [open|wtmp]
 * Stops after COUNT creates or SECONDS, whichever comes first (a bound on the run, never an assertion). Prints
 * "creates N, refused R, made M" (made: creates that succeeded; refused: EROFS). With "open": open(O_CREAT|O_EXCL)
 * only (the write-open's own path, open_w, which a mix of calls reaches too rarely to land one in 10 s). With
 * "wtmp": S is a file of the cache (a blob), the link flips between it and W/real/wt, and the threads append a
 * record with updwtmp(W/link) (glibc's own open of the path it is given): each record must land in W/real/wt
 * ("made" counts the records there, "refused" the calls that left errno EROFS). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utmp.h>

static const char *w, *s;
static long count, secs;
static int opens_only, wtmp;
static int stop;
static long creates, refused, made;
static time_t start;

static void *flip(void *arg)
{
    (void)arg;
    char link[4096], tmp[4096], real[4096];
    snprintf(link, sizeof link, "%s/link", w);
    snprintf(tmp, sizeof tmp, "%s/link.tmp", w);
    snprintf(real, sizeof real, "%s/real", w);
    for (unsigned i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
        unlink(tmp);
        if (symlink(i & 1 ? s : wtmp ? "real/wt" : real, tmp) == 0)
            rename(tmp, link);
    }
    return NULL;
}

static void *work(void *arg)
{
    long id = (long)arg;
    char p[4096], q[4096];
    for (long i = 0;; i++) {
        long n = __atomic_add_fetch(&creates, 1, __ATOMIC_RELAXED);
        if (n > count || time(NULL) - start >= secs)
            break;
        if (wtmp) {
            struct utmp ut;
            memset(&ut, 0, sizeof ut);
            snprintf(p, sizeof p, "%s/link", w);
            errno = 0;
            updwtmp(p, &ut);
            if (errno == EROFS)
                __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
            continue;
        }
        snprintf(p, sizeof p, "%s/link/t%ld-%ld", w, id, i);
        /* opens three times as often as each other create (KIND "open": opens only) */
        int r, k = opens_only ? 0 : (int)(i % 8);
        k = k < 3 ? 0 : k - 2;
        if (k == 5) {
            /* a removal: S/deeper (an empty skeleton directory) is there, W/real/deeper is not */
            snprintf(p, sizeof p, "%s/link/deeper", w);
            if (rmdir(p) < 0 && errno == EROFS)
                __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (k == 0) {
            int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
            r = fd < 0 ? -1 : 0;
            if (fd >= 0)
                close(fd);
        } else if (k == 1) {
            r = mkdir(p, 0755);
        } else if (k == 2) {
            r = mkfifo(p, 0644);
        } else if (k == 3) {
            r = symlink("x", p);
        } else {
            r = mknod(p, S_IFREG | 0644, 0);
        }
        if (r == 0) {
            __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED);
            /* removed through the link too: the remove must not reach the skeleton either */
            snprintf(q, sizeof q, "%s/real/t%ld-%ld", w, id, i);
            if (k == 1 ? rmdir(p) : unlink(p))
                k == 1 ? rmdir(q) : unlink(q);
        } else if (errno == EROFS) {
            __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: guardrace W S COUNT SECONDS [open|wtmp]\n");
        return 2;
    }
    opens_only = argc == 6 && !strcmp(argv[5], "open");
    wtmp = argc == 6 && !strcmp(argv[5], "wtmp");
    w = argv[1];
    s = argv[2];
    count = atol(argv[3]);
    secs = atol(argv[4]);
    start = time(NULL);
    pthread_t f, t[3];
    pthread_create(&f, NULL, flip, NULL);
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(f, NULL);
    if (wtmp) {
        char p[4096];
        struct stat st;
        snprintf(p, sizeof p, "%s/real/wt", w);
        made = stat(p, &st) == 0 ? (long)(st.st_size / (off_t)sizeof(struct utmp)) : 0;
    }
    printf("creates %ld, refused %ld, made %ld\n", creates > count ? count : creates, refused, made);
    return 0;
}
