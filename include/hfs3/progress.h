/* progress.h - the words of a progress display (lib/progress.c): one line fitted to a terminal's width (a bar,
 * percent, bytes, rate, ETA, current file) or a plain log line, and sizes, rates and durations in human units.
 * Pure text: no I/O, no clock; the helper (helper/progress.c) draws it and decides when. */
#ifndef HFS3_PROGRESS_H
#define HFS3_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct hfs3_progress_view {
    const char *phase;    /* "fetch", "build", ... */
    uint64_t done, total; /* bytes */
    size_t files_done, files_total;
    double rate;          /* bytes per second; <= 0 unknown (too early to say) */
    const char *file;     /* the file in progress, or NULL */
} hfs3_progress_view;

/* "40.0 MiB" (binary units, one decimal; "512 B" below 1 KiB). Returns out. */
const char *hfs3_human_bytes(uint64_t n, char *out, size_t len);
/* "34.2 MB/s" (decimal, as network rates are given; "0 B/s" for <= 0). Returns out. */
const char *hfs3_human_rate(double bytes_per_s, char *out, size_t len);
/* "0:42", "12:05", "1:02:03" (a duration in seconds; "?" when negative or absurd). Returns out. */
const char *hfs3_human_secs(double s, char *out, size_t len);

/* The terminal line: at most width - 1 columns (the last column would make some terminals wrap), by priority
 * phase + percent, then bytes, rate, ETA, the file (shortened from its left), and the bar gets what is left
 * (none below 10 columns). width < 20 is taken as 20. Returns the length written (out always terminated). */
size_t hfs3_progress_bar(const hfs3_progress_view *v, int width, char *out, size_t len);
/* The plain line for a log (stderr not a terminal): "fetch: 45% of 1.0 GiB (460.8 MiB), 2/8 files,
 * 34.2 MB/s, ETA 0:16, model-00002.safetensors". Returns the length written. */
size_t hfs3_progress_plain(const hfs3_progress_view *v, char *out, size_t len);

#endif
