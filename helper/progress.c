/* progress.c - the progress display of the subcommands on stderr: on a terminal, one line redrawn in place and
 * fitted to its width (lib/progress.c words it); not on a terminal (an init container's log), with
 * cmd_progress_plain(1), a plain line every PLAIN_EVERY seconds; otherwise quiet. The rate is measured over the
 * last few seconds, so a pause or a burst of cached files shows soon. Callers serialise their calls (fetch and
 * build hold their own mutex around them); a mutex here too keeps it safe if one does not. */
#include "cmds.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hfs3/progress.h"
#include "hfs3/util.h"

#define PLAIN_EVERY 5.0 /* seconds between two plain lines */
#define WINDOW 8.0      /* seconds the rate is measured over */
#define NSAMPLES 32

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static double started, last_plain, last_sample;
static int plain_wanted, drawn;
static char file[256];
static struct sample {
    double t;
    uint64_t done;
} samples[NSAMPLES];
static int nsamples, head;

void cmd_progress_plain(int on) { plain_wanted = on; }

void cmd_progress_file(const char *name)
{
    pthread_mutex_lock(&mu);
    snprintf(file, sizeof file, "%s", name ? name : "");
    pthread_mutex_unlock(&mu);
}

/* The terminal's width: stderr's window, else $COLUMNS, else 80. */
static int term_width(void)
{
    struct winsize ws;
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 && n < 10000 ? n : 80;
}

/* Bytes per second over the last WINDOW seconds (a sample every quarter second); 0 in the first half second. */
static double rate_now(double now, uint64_t done)
{
    if (now - last_sample >= 0.25 || !nsamples) {
        samples[head] = (struct sample){now, done};
        head = (head + 1) % NSAMPLES;
        if (nsamples < NSAMPLES)
            nsamples++;
        last_sample = now;
    }
    const struct sample *old = NULL;
    for (int i = 0; i < nsamples; i++) {
        const struct sample *s = &samples[(head - nsamples + i + NSAMPLES) % NSAMPLES];
        if (now - s->t <= WINDOW) {
            old = s;
            break;
        }
    }
    if (!old || now - old->t < 0.5 || done < old->done)
        return now - started >= 0.5 && done ? (double)done / (now - started) : 0;
    return (double)(done - old->done) / (now - old->t);
}

void cmd_progress(void *ud, const char *phase, uint64_t done, uint64_t total, size_t files_done,
                  size_t files_total)
{
    (void)ud;
    int tty = cmd_progress_wanted();
    if (!tty && !plain_wanted)
        return;
    pthread_mutex_lock(&mu);
    double now = hfs3_now();
    if (!started)
        started = last_plain = now;
    hfs3_progress_view v = {phase, done, total, files_done, files_total, rate_now(now, done), file[0] ? file : NULL};
    char line[1024];
    if (tty) {
        hfs3_progress_bar(&v, term_width(), line, sizeof line);
        fprintf(stderr, "\r%s\033[K", line);
        fflush(stderr);
        drawn = 1;
    } else if (now - last_plain >= PLAIN_EVERY) {
        last_plain = now;
        hfs3_progress_plain(&v, line, sizeof line);
        fprintf(stderr, "%s\n", line);
        fflush(stderr);
    }
    pthread_mutex_unlock(&mu);
}

void cmd_progress_clear(void)
{
    pthread_mutex_lock(&mu);
    if (drawn)
        fprintf(stderr, "\r\033[K");
    drawn = 0;
    pthread_mutex_unlock(&mu);
}

void cmd_progress_end(void)
{
    pthread_mutex_lock(&mu);
    if (drawn)
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
    drawn = 0;
    started = last_plain = last_sample = 0;
    nsamples = head = 0;
    file[0] = 0;
    pthread_mutex_unlock(&mu);
}
