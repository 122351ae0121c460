/* probe.h - tiny checks for the shim probes: each probe prints what it checks and exits 1 on a wrong
 * answer. argv[1] is the mount of the "flat" fixture (tests/e2e/shim_fixture.py). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int probe_fails;
#define OK(cond, ...)                                                                                       \
    do {                                                                                                    \
        int c_ = !!(cond);                                                                                  \
        printf("%s ", c_ ? "ok  " : "FAIL");                                                                \
        printf(__VA_ARGS__);                                                                                \
        printf(" (errno %d)\n", errno);                                                                     \
        if (!c_)                                                                                            \
            probe_fails++;                                                                                  \
    } while (0)
#define DONE() return probe_fails ? 1 : 0
#define P(buf, rel) (snprintf(buf, sizeof buf, "%s/%s", argv[1], rel), buf)
