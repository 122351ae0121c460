/* harness.h - a tiny test harness: CHECK macros, per-file main, a closing "N passed, N failed" line. */
#ifndef HFS3_HARNESS_H
#define HFS3_HARNESS_H

#include <stdio.h>
#include <string.h>

static int t_pass, t_fail;
static const char *t_name = "";

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (cond) {                                                                                   \
            t_pass++;                                                                                 \
        } else {                                                                                      \
            t_fail++;                                                                                 \
            fprintf(stderr, "FAIL %s %s:%d: %s\n", t_name, __FILE__, __LINE__, #cond);                \
        }                                                                                             \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                                            \
    do {                                                                                              \
        long long _a = (long long)(a), _b = (long long)(b);                                           \
        if (_a == _b) {                                                                               \
            t_pass++;                                                                                 \
        } else {                                                                                      \
            t_fail++;                                                                                 \
            fprintf(stderr, "FAIL %s %s:%d: %s == %s (%lld != %lld)\n", t_name, __FILE__, __LINE__,   \
                    #a, #b, _a, _b);                                                                  \
        }                                                                                             \
    } while (0)
#define CHECK_EQ_STR(a, b)                                                                            \
    do {                                                                                              \
        const char *_a = (a), *_b = (b);                                                              \
        if (_a && _b && strcmp(_a, _b) == 0) {                                                        \
            t_pass++;                                                                                 \
        } else {                                                                                      \
            t_fail++;                                                                                 \
            fprintf(stderr, "FAIL %s %s:%d: %s == %s (\"%s\" != \"%s\")\n", t_name, __FILE__,         \
                    __LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)");                        \
        }                                                                                             \
    } while (0)

#define TEST(fn)                                                                                      \
    do {                                                                                              \
        t_name = #fn;                                                                                 \
        fn();                                                                                         \
    } while (0)

/* Prints the closing line; the exit status is what run-unit.sh reads. */
static int t_done(const char *file)
{
    printf("%s: %d passed, %d failed\n", file, t_pass, t_fail);
    return t_fail ? 1 : 0;
}

#endif
