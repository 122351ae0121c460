/* test_scratch.c - shim/scratch.c, compiled in (the shim exports nothing but its interposers): a taker never
 * waits on other holders (issue 22, item 1): past the pool's last slot buffers are mapped, and given back
 * unmapped; 100 threads that each hold 3 buffers at once (more than the pool) and then take a 4th all finish;
 * after fork() the child finds free every slot another thread held, and still holds its own (item 2); a spilled
 * buffer given back is unmapped, every page, and a long pile-up does not grow the process (issue 34 item 6).
 * The pool's groups are mapped as they are needed, one busy group at a time (issue 41 item 4).
 * sh_join (shim.h), which builds the warm path's cache paths, gives what snprintf("%s%s...") gives.
 * A hang is a failure: alarm() ends the run (the child of the fork test has its own). */
#include "../../shim/scratch.c"
#include "../../shim/shim.h" /* (sh_join; scratch.c has it already: named for make mutate) */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static int in_pool(const struct sh_scratch *s)
{
    for (int g = 0; g < SH_NGROUP; g++) {
        const struct sh_scratch *p = __atomic_load_n(&group[g], __ATOMIC_ACQUIRE);
        if (p && s >= p && s < p + SH_GROUP)
            return 1;
    }
    return 0;
}

/* the owner[] number of pooled buffer s, -1 when it is not one */
static int slot_of(const struct sh_scratch *s)
{
    for (int g = 0; g < SH_NGROUP; g++) {
        const struct sh_scratch *p = __atomic_load_n(&group[g], __ATOMIC_ACQUIRE);
        if (p && s >= p && s < p + SH_GROUP)
            return g * SH_GROUP + (int)(s - p);
    }
    return -1;
}

static int groups_mapped(void)
{
    int n = 0;
    for (int g = 0; g < SH_NGROUP; g++)
        n += __atomic_load_n(&group[g], __ATOMIC_ACQUIRE) != NULL;
    return n;
}

static int busy_slots(void)
{
    int n = 0;
    for (int i = 0; i < SH_SLOTS; i++)
        n += __atomic_load_n(&owner[i], __ATOMIC_ACQUIRE) != 0;
    return n;
}

static void test_spill(void)
{
    enum { N = SH_SLOTS + 8 };
    static struct sh_scratch *s[N];
    int pooled = 0, distinct = 1;
    /* the pool grows with use (issue 41 item 4): one group (in the .bss) until every slot of it is busy at once,
     * the next mapped then; all of them once every slot is */
    CHECK_EQ_INT(groups_mapped(), 1);
    for (int i = 0; i < N; i++) {
        if (i == SH_GROUP)
            CHECK_EQ_INT(groups_mapped(), 1);
        if (i == SH_GROUP + 1)
            CHECK_EQ_INT(groups_mapped(), 2);
        s[i] = sh_scratch_get();
        memset(s[i], i & 0xff, sizeof *s[i]);   /* the whole buffer is ours: ASan or a fault says otherwise */
        pooled += in_pool(s[i]);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < i; j++)
            distinct &= s[i] != s[j];
    CHECK(distinct);
    CHECK_EQ_INT(pooled, SH_SLOTS);
    CHECK_EQ_INT(groups_mapped(), SH_NGROUP);
    CHECK(!in_pool(s[N - 1]));
    CHECK_EQ_INT((unsigned char)s[N - 1]->d[SH_SCR - 1], (N - 1) & 0xff);
    int e = errno = 1234;
    for (int i = 0; i < N; i++)
        sh_scratch_put(&s[i]);
    CHECK_EQ_INT(errno, e);
    CHECK(s[0] == NULL && s[N - 1] == NULL);
    CHECK_EQ_INT(busy_slots(), 0);
    struct sh_scratch *again = sh_scratch_get();
    CHECK(in_pool(again));
    sh_scratch_put(&again);
}

/* 1 when no page of [p, p + n) is mapped: msync answers ENOMEM for a range with an unmapped page, so each page is
 * asked alone */
static int unmapped(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
    for (; a < (uintptr_t)p + n; a += (uintptr_t)pg)
        if (msync((void *)a, (size_t)pg, MS_ASYNC) == 0 || errno != ENOMEM)
            return 0;
    return 1;
}

/* The process's address space (VmSize, KiB), from /proc/self/status; -1 when it cannot be read */
static long vm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7))
            v = atol(line + 7);
    if (f)
        fclose(f);
    return v;
}

/* The header's promise (issue 34 item 6): a buffer spilled past the pool is unmapped when given back, every page
 * of it; and a long pile-up (every slot held, one more buffer taken and given back 20000 times: 640 MB of mappings
 * if they stayed) does not grow the process. */
static void test_spill_unmapped(void)
{
    static struct sh_scratch *s[SH_SLOTS];
    for (int i = 0; i < SH_SLOTS; i++)
        s[i] = sh_scratch_get();
    struct sh_scratch *x = sh_scratch_get();
    CHECK(!in_pool(x));
    memset(x, 1, sizeof *x);
    CHECK(!unmapped(x, sizeof *x));
    void *was = x;
    sh_scratch_put(&x);
    CHECK(x == NULL);
    CHECK(unmapped(was, sizeof *x));
    long before = vm_kib();
    for (int i = 0; i < 20000; i++) {
        x = sh_scratch_get();
        x->a[0] = 1;
        x->d[SH_SCR - 1] = 1;
        sh_scratch_put(&x);
    }
    long after = vm_kib();
    CHECK(before > 0 && after > 0);
    if (after - before >= 4096)
        printf("test_scratch: VmSize grew by %ld KiB over 20000 spilled buffers given back\n", after - before);
    CHECK(after - before < 4096);
    for (int i = 0; i < SH_SLOTS; i++)
        sh_scratch_put(&s[i]);
    CHECK_EQ_INT(busy_slots(), 0);
}

/* each holds 3 at the barrier (all of them at once), then takes a 4th: an open waiting on a fetch */
static pthread_barrier_t all_hold;
static int wrong;

static void *waiter(void *arg)
{
    struct sh_scratch *s[4];
    for (int i = 0; i < 3; i++) {
        s[i] = sh_scratch_get();
        memset(s[i]->a, (int)(long)arg, SH_SCR);
    }
    pthread_barrier_wait(&all_hold);
    s[3] = sh_scratch_get();
    memset(s[3]->a, 0, SH_SCR);
    for (int i = 0; i < 3; i++)
        if (s[i]->a[SH_SCR - 1] != (char)(long)arg)
            __atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 4; i++)
        sh_scratch_put(&s[i]);
    return NULL;
}

static void test_waiters(void)
{
    enum { T = 100 };   /* 300 held at once: more than the 256 slots */
    pthread_t th[T];
    pthread_barrier_init(&all_hold, NULL, T);
    for (long i = 0; i < T; i++)
        pthread_create(&th[i], NULL, waiter, (void *)(i + 1));
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&all_hold);
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(busy_slots(), 0);
}

/* a thread holds 200 slots across the fork; the forking thread holds one */
static int ready[2], go[2];

static void *holder(void *arg)
{
    struct sh_scratch *s[200];
    for (int i = 0; i < 200; i++)
        s[i] = sh_scratch_get();
    char c = 1;
    (void)!write(ready[1], &c, 1);   /* holding */
    (void)!read(go[0], &c, 1);       /* until told */
    for (int i = 0; i < 200; i++)
        sh_scratch_put(&s[i]);
    return arg;
}

static void test_fork(void)
{
    if (pipe(ready) < 0 || pipe(go) < 0)
        return;
    pthread_t th;
    pthread_create(&th, NULL, holder, NULL);
    char c;
    (void)!read(ready[0], &c, 1);
    struct sh_scratch *mine = sh_scratch_get();
    CHECK_EQ_INT(busy_slots(), 201);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        sh_scratch_after_fork();   /* what init.c's pthread_atfork child handler does first */
        int bad = 0;
        bad |= busy_slots() != 1;                                                    /* 1 */
        bad |= __atomic_load_n(&owner[slot_of(mine)], __ATOMIC_ACQUIRE) != (unsigned long)pthread_self();   /* 2 */
        int pooled = 0;
        static struct sh_scratch *s[SH_SLOTS - 1];
        for (int i = 0; i < SH_SLOTS - 1; i++)
            pooled += in_pool(s[i] = sh_scratch_get()) && s[i] != mine;
        bad |= (pooled != SH_SLOTS - 1) << 2;                                         /* 4 */
        _exit(bad);
    }
    int st = -1;
    if (pid > 0)
        waitpid(pid, &st, 0);
    CHECK(pid > 0 && WIFEXITED(st));
    CHECK_EQ_INT(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
    (void)!write(go[1], &c, 1);
    pthread_join(th, NULL);
    sh_scratch_put(&mine);
    CHECK_EQ_INT(busy_slots(), 0);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
}

/* sh_join (shim.h), the scratch paths' builder: snprintf("%s%s...")'s result, length and terminated prefix */
static void test_join(void)
{
    char buf[16], ref[16];
    const char *parts[][5] = {{"/c", "/blobs/", "ab", NULL, NULL}, {"", NULL, NULL, NULL, NULL},
                              {"/cache", "/mounts/", "0123", "/cblobs/", "f00d"}, {"0123456789abcdef", "x", NULL, NULL, NULL},
                              {"0123456789abcde", NULL, NULL, NULL, NULL}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const char *const *p = parts[i];
        for (size_t n = 0; n <= sizeof buf; n += 5) {
            memset(buf, 'z', sizeof buf);
            memset(ref, 'z', sizeof ref);
            size_t got = sh_join(buf, n, p[0], p[1], p[2], p[3], p[4]);
            int want = snprintf(ref, n, "%s%s%s%s%s", p[0], p[1] ? p[1] : "", p[1] && p[2] ? p[2] : "",
                                p[1] && p[2] && p[3] ? p[3] : "", p[1] && p[2] && p[3] && p[4] ? p[4] : "");
            CHECK_EQ_INT((int)got, want);
            CHECK(!memcmp(buf, ref, sizeof buf));
        }
    }
}

int main(void)
{
    alarm(30);   /* a taker that waits forever (the bug) ends the run as a failure, not a hung suite */
    TEST(test_spill);
    TEST(test_spill_unmapped);
    TEST(test_waiters);
    TEST(test_fork);
    TEST(test_join);
    return t_done("test_scratch");
}
