/* log.c - leveled one-line logging to stderr; the level comes from HFS3_LOG. Owns only the level. */
#include "hfs3/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_level = -1;

void hfs3_log_init(void)
{
    const char *v = getenv("HFS3_LOG");
    log_level = HFS3_LOG_WARN;
    if (!v || !*v)
        return;
    if (!strcmp(v, "error"))
        log_level = HFS3_LOG_ERROR;
    else if (!strcmp(v, "warn"))
        log_level = HFS3_LOG_WARN;
    else if (!strcmp(v, "info"))
        log_level = HFS3_LOG_INFO;
    else if (!strcmp(v, "debug"))
        log_level = HFS3_LOG_DEBUG;
}

void hfs3_log_set_level(int level) { log_level = level; }

int hfs3_log_level(void)
{
    if (log_level < 0)
        hfs3_log_init();
    return log_level;
}

void hfs3_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > hfs3_log_level())
        return;
    char line[2048];
    int n = snprintf(line, sizeof line, "hfs3: %s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
