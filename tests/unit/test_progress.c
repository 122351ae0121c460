/* test_progress.c - the words of the progress display (lib/progress.c): human units, the terminal line fitted
 * to every width from 20 to 300 columns (never the last column: no wrap), what it keeps as the width shrinks,
 * and the plain log line. */
#include "harness.h"
#include "hfs3/progress.h"

#include <string.h>

static void units(void)
{
    char b[32];
    CHECK_EQ_STR(hfs3_human_bytes(0, b, sizeof b), "0 B");
    CHECK_EQ_STR(hfs3_human_bytes(1023, b, sizeof b), "1023 B");
    CHECK_EQ_STR(hfs3_human_bytes(42106998, b, sizeof b), "40.2 MiB");
    CHECK_EQ_STR(hfs3_human_bytes(1ULL << 30, b, sizeof b), "1.0 GiB");
    CHECK_EQ_STR(hfs3_human_rate(0, b, sizeof b), "0 B/s");
    CHECK_EQ_STR(hfs3_human_rate(34.2e6, b, sizeof b), "34.2 MB/s");
    CHECK_EQ_STR(hfs3_human_rate(2.5e9, b, sizeof b), "2.5 GB/s");
    CHECK_EQ_STR(hfs3_human_secs(0, b, sizeof b), "0:00");
    CHECK_EQ_STR(hfs3_human_secs(42.4, b, sizeof b), "0:42");
    CHECK_EQ_STR(hfs3_human_secs(725, b, sizeof b), "12:05");
    CHECK_EQ_STR(hfs3_human_secs(3723, b, sizeof b), "1:02:03");
    CHECK_EQ_STR(hfs3_human_secs(-1, b, sizeof b), "?");
    CHECK_EQ_STR(hfs3_human_secs(1e12, b, sizeof b), "?");
}

static void bar(void)
{
    hfs3_progress_view v = {"fetch", 350000000, 1073741824, 1, 8, 29.1e6, "model-00001-of-00002.safetensors"};
    char line[1024];
    for (int w = 1; w <= 300; w++) {
        size_t n = hfs3_progress_bar(&v, w, line, sizeof line);
        CHECK_EQ_INT((int)n, (int)strlen(line));
        int cols = w < 20 ? 20 : w;
        if (n > (size_t)cols - 1)
            fprintf(stderr, "  width %d: %zu columns: '%s'\n", w, n, line);
        CHECK(n <= (size_t)cols - 1);
        CHECK(strncmp(line, "fetch  32%", 10) == 0);
        CHECK(strchr(line, '\n') == NULL && strchr(line, '\r') == NULL);
    }
    /* 40 columns: the bar and the ETA; 80: bytes, rate and the end of the file name; 120: all of it */
    hfs3_progress_bar(&v, 40, line, sizeof line);
    CHECK_EQ_STR(line, "fetch  32% [#####............] ETA 0:25");
    hfs3_progress_bar(&v, 80, line, sizeof line);
    CHECK_EQ_STR(line, "fetch  32% [##......] 333.8 MiB/1.0 GiB 29.1 MB/s ETA 0:25 ...00002.safetensors");
    hfs3_progress_bar(&v, 120, line, sizeof line);
    CHECK(strstr(line, " [###########.........................] 333.8 MiB/1.0 GiB 29.1 MB/s ETA 0:25 "
                       "model-00001-of-00002.safetensors") != NULL);
    CHECK(strlen(line) == 119);
    /* a control byte in a name (a manifest is data) never reaches the terminal */
    v.file = "evil\033]0;title\007.bin";
    hfs3_progress_bar(&v, 120, line, sizeof line);
    CHECK(strchr(line, '\033') == NULL && strchr(line, '\007') == NULL);
    /* unknown rate, nothing to fetch */
    hfs3_progress_view z = {"fetch", 0, 0, 0, 0, 0, NULL};
    hfs3_progress_bar(&z, 60, line, sizeof line);
    CHECK(strncmp(line, "fetch 100% [", 12) == 0);
}

static void plain(void)
{
    hfs3_progress_view v = {"fetch", 483183821, 1073741824, 2, 8, 34.2e6, "model-00002.safetensors"};
    char line[512];
    hfs3_progress_plain(&v, line, sizeof line);
    CHECK_EQ_STR(line, "fetch: 45% of 1.0 GiB (460.8 MiB), 2/8 files, 34.2 MB/s, ETA 0:17, model-00002.safetensors");
    v.rate = 0;
    v.file = NULL;
    hfs3_progress_plain(&v, line, sizeof line);
    CHECK_EQ_STR(line, "fetch: 45% of 1.0 GiB (460.8 MiB), 2/8 files, - B/s, ETA --:--");
    /* a model of one file: the noun agrees with the total (issue 46) */
    v.files_done = 0;
    v.files_total = 1;
    hfs3_progress_plain(&v, line, sizeof line);
    CHECK_EQ_STR(line, "fetch: 45% of 1.0 GiB (460.8 MiB), 0/1 file, - B/s, ETA --:--");
}

int main(void)
{
    TEST(units);
    TEST(bar);
    TEST(plain);
    return t_done("test_progress");
}
