/* progress.c - the one-line progress display on a terminal (stderr), shared by the subcommands.
 * Quiet when stderr is not a terminal. */
#include "cmds.h"

#include <stdint.h>
#include <stdio.h>

#include "hfs3/util.h"

static double started;

void cmd_progress(void *ud, const char *phase, uint64_t done, uint64_t total, size_t files_done,
                  size_t files_total)
{
    (void)ud;
    if (!started)
        started = hfs3_now();
    double secs = hfs3_now() - started;
    fprintf(stderr, "\r\033[K%s: %zu/%zu files, %.1f/%.1f MiB", phase, files_done, files_total,
            (double)done / 1048576.0, (double)total / 1048576.0);
    if (secs >= 0.5) /* a rate over a few milliseconds means nothing */
        fprintf(stderr, ", %.0f MB/s", (double)done / 1e6 / secs);
    fflush(stderr);
}

void cmd_progress_end(void)
{
    if (started)
        fprintf(stderr, "\r\033[K");
    started = 0;
}
