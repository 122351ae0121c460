/* progress.c - the words of a progress display (include/hfs3/progress.h): a line fitted to a terminal's width,
 * a plain log line, and human units. Pure text: the caller draws it (helper/progress.c). */
#include "hfs3/progress.h"
#include "hfs3/util.h"

#include <stdio.h>
#include <string.h>

const char *hfs3_human_bytes(uint64_t n, char *out, size_t len)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 5) {
        v /= 1024;
        i++;
    }
    snprintf(out, len, i ? "%.1f %s" : "%.0f %s", v, u[i]);
    return out;
}

const char *hfs3_human_rate(double r, char *out, size_t len)
{
    static const char *const u[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
    double v = r > 0 ? r : 0;
    int i = 0;
    while (v >= 1000 && i < 4) {
        v /= 1000;
        i++;
    }
    snprintf(out, len, i ? "%.1f %s" : "%.0f %s", v, u[i]);
    return out;
}

const char *hfs3_human_secs(double s, char *out, size_t len)
{
    if (!(s >= 0) || s > 99 * 3600.0) {
        snprintf(out, len, "?");
        return out;
    }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600)
        snprintf(out, len, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, len, "%lu:%02lu", t / 60, t % 60);
    return out;
}

static int percent(const hfs3_progress_view *v)
{
    if (!v->total || v->done >= v->total)
        return v->total && v->done < v->total ? 99 : 100;
    return (int)((double)v->done * 100.0 / (double)v->total);
}

/* The name as it may appear on a terminal: printable ASCII only (a manifest's name is data, and a control
 * byte, a C1 control in UTF-8 or a wide character would move the cursor or break the column count). */
static void clean_name(const char *in, char *out, size_t len)
{
    size_t i = 0;
    for (; in && in[i] && i + 1 < len; i++)
        out[i] = in[i] >= 0x20 && in[i] < 0x7f ? in[i] : '?';
    out[i] = 0;
}

static void eta_of(const hfs3_progress_view *v, char *out, size_t len)
{
    if (v->rate > 0 && v->total > v->done)
        hfs3_human_secs((double)(v->total - v->done) / v->rate, out, len);
    else if (v->total && v->done >= v->total)
        snprintf(out, len, "0:00");
    else
        snprintf(out, len, "--:--");
}

size_t hfs3_progress_bar(const hfs3_progress_view *v, int width, char *out, size_t len)
{
    enum { BAR_MIN = 10, BAR_MAX = 60, FILE_MIN = 12 };
    char head[64], bytes[64], rate[32], eta[40], a[24], b[24], name[256];
    if (width < 20)
        width = 20;
    size_t avail = (size_t)width - 1;
    int pct = percent(v);
    /* the phase in full on a usual terminal ("hashing local files"), cut to 16 where the bar needs the room */
    snprintf(head, sizeof head, "%.*s %3d%%", width >= 60 ? 32 : 16, v->phase ? v->phase : "", pct);
    snprintf(bytes, sizeof bytes, "%s/%s", hfs3_human_bytes(v->done, a, sizeof a),
             hfs3_human_bytes(v->total, b, sizeof b));
    if (v->rate > 0)
        hfs3_human_rate(v->rate, rate, sizeof rate);
    else
        snprintf(rate, sizeof rate, "- B/s");
    char e[24];
    eta_of(v, e, sizeof e);
    snprintf(eta, sizeof eta, "ETA %s", e);
    clean_name(v->file, name, sizeof name);
    /* by priority: the ETA, the rate, then the bytes, each only when it fits beside the smallest bar */
    const char *opt[3] = {eta, rate, bytes};
    int take[3] = {0, 0, 0};
    size_t used = strlen(head) + 1 + BAR_MIN;
    for (int i = 0; i < 3; i++)
        if (used + 1 + strlen(opt[i]) <= avail) {
            take[i] = 1;
            used += 1 + strlen(opt[i]);
        }
    size_t extra = used <= avail ? avail - used : 0, nl = strlen(name), fw = 0;
    if (nl && extra >= 1 + FILE_MIN) {   /* the name before a longer bar: it says which shard is coming */
        fw = nl < extra - 1 ? nl : extra - 1;
        extra -= 1 + fw;
    }
    size_t bw = BAR_MIN + extra;
    if (bw > BAR_MAX)
        bw = BAR_MAX;
    if (used > avail) /* even the smallest bar does not fit (width < 20 is taken as 20, so this is the head) */
        bw = 0;
    char bar[BAR_MAX + 1];
    size_t inner = bw >= 2 ? bw - 2 : 0, fill = (size_t)((double)inner * pct / 100.0);
    for (size_t i = 0; i < inner; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[inner] = 0;
    size_t n = 0;
#define PUT(...)                                                                                              \
    do {                                                                                                      \
        int k_ = snprintf(out + n, n < len ? len - n : 0, __VA_ARGS__);                                       \
        if (k_ > 0)                                                                                           \
            n += (size_t)k_;                                                                                  \
    } while (0)
    PUT("%s", head);
    if (bw)
        PUT(" [%s]", bar);
    if (take[2])
        PUT(" %s", bytes);
    if (take[1])
        PUT(" %s", rate);
    if (take[0])
        PUT(" %s", eta);
    if (fw)
        PUT(" %s%s", fw < nl ? "..." : "", fw < nl ? name + nl - (fw > 3 ? fw - 3 : 0) : name);
#undef PUT
    if (n >= len)
        n = len ? len - 1 : 0;
    return n;
}

size_t hfs3_progress_plain(const hfs3_progress_view *v, char *out, size_t len)
{
    char a[24], b[24], r[32], e[24], name[256];
    clean_name(v->file, name, sizeof name);
    eta_of(v, e, sizeof e);
    int k = snprintf(out, len, "%s: %d%% of %s (%s), %zu/%zu %s, %s, ETA %s%s%s", v->phase ? v->phase : "",
                     percent(v), hfs3_human_bytes(v->total, a, sizeof a), hfs3_human_bytes(v->done, b, sizeof b),
                     v->files_done, v->files_total, hfs3_plural(v->files_total, "file", "files"), v->rate > 0 ? hfs3_human_rate(v->rate, r, sizeof r) : "- B/s",
                     e, name[0] ? ", " : "", name);
    if (k < 0)
        return 0;
    return (size_t)k < len ? (size_t)k : (len ? len - 1 : 0);
}
