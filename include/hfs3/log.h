/* log.h - leveled logging to stderr, level from HFS3_LOG (error, warn, info, debug; default warn).
 * One line per message, prefixed "hfs3: ". Never pass secrets. */
#ifndef HFS3_LOG_H
#define HFS3_LOG_H

enum { HFS3_LOG_ERROR = 0, HFS3_LOG_WARN = 1, HFS3_LOG_INFO = 2, HFS3_LOG_DEBUG = 3 };

void hfs3_log_init(void);            /* reads HFS3_LOG; called lazily by hfs3_log too */
void hfs3_log_set_level(int level);
int hfs3_log_level(void);
void hfs3_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define hfs3_error(...) hfs3_log(HFS3_LOG_ERROR, __VA_ARGS__)
#define hfs3_warn(...) hfs3_log(HFS3_LOG_WARN, __VA_ARGS__)
#define hfs3_info(...) hfs3_log(HFS3_LOG_INFO, __VA_ARGS__)
#define hfs3_debug(...) hfs3_log(HFS3_LOG_DEBUG, __VA_ARGS__)

#endif
