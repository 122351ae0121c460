/* sigjump.c - a host whose SIGALRM handler siglongjmps out of an open (a watchdog as C programs write one), the
 * kernel's answers the oracle (the same files in a local folder). Usage: sigjump ROOT REL...
 * For each REL: a one-shot timer of 20 ms armed, open inside sigsetjmp (a jump abandons it; an open that returns
 * first is closed), the timer disarmed; then the open again with no timer: "REL fdN SIZE" or "REL open ERRNO".
 * The kernel's open of a local file returns before the timer; through the shim a cold one waits for its fetch
 * and the handler jumps out of the wait: whatever the shim held then must not hang or change a later call. Last
 * line: the lowest free descriptor (none of the shim's is left behind). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static sigjmp_buf jb;
static volatile sig_atomic_t jumps;
static void on_alrm(int s) { (void)s; jumps++; siglongjmp(jb, 1); }

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alrm;
    sigaction(SIGALRM, &sa, NULL);
    char p[4096], buf[65536];
    for (int i = 2; i < argc; i++) {
        snprintf(p, sizeof p, "%s/%s", argv[1], argv[i]);
        static volatile int fd;
        fd = -1;
        if (!sigsetjmp(jb, 1)) {
            struct itimerval it = {{0, 0}, {0, 20000}};
            setitimer(ITIMER_REAL, &it, NULL);
            fd = open(p, O_RDONLY);
        }
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
        if (fd >= 0)
            close(fd);
        int f = open(p, O_RDONLY);
        if (f < 0) {
            printf("%s open %s\n", argv[i], strerrorname_np(errno));
            continue;
        }
        long long size = 0;
        ssize_t n;
        while ((n = read(f, buf, sizeof buf)) > 0)
            size += n;
        printf("%s fd%d %lld\n", argv[i], f, size);
        close(f);
    }
    int low = dup(0);
    printf("lowest free fd%d\n", low);
    fprintf(stderr, "jumps %d\n", (int)jumps);
    return 0;
}
