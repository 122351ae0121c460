/* util.h - errors, size-capped buffers, hex and SHA-256: the small pieces every module uses.
 *
 * Error convention for all of lib/: functions return 0 (or a count) on success and a negative
 * errno-style code on failure, after storing a one-line human message in a per-thread slot
 * (hfs3_err_set / hfs3_errmsg). Callers print hfs3_errmsg(); they never free it. */
#ifndef HFS3_UTIL_H
#define HFS3_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Stores a printf-style message for this thread and returns `code` (a negative errno). */
int hfs3_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current message (adds context on the way up). Returns `code`. */
int hfs3_err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of this thread's last failure ("" if none). Valid until the next hfs3_err call. */
const char *hfs3_errmsg(void);
void hfs3_err_clear(void);

/* A growable byte buffer with a hard cap (like curl's dynbuf). data is always NUL-terminated
 * when len > 0. A failed append frees the buffer and returns -ENOMEM or -E2BIG (cap reached). */
typedef struct hfs3_buf {
    char *data;
    size_t len, cap, max;
} hfs3_buf;

void hfs3_buf_init(hfs3_buf *b, size_t max);
int hfs3_buf_add(hfs3_buf *b, const void *p, size_t n);
int hfs3_buf_adds(hfs3_buf *b, const char *s);
int hfs3_buf_addc(hfs3_buf *b, char c);
int hfs3_buf_addf(hfs3_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hfs3_buf_reset(hfs3_buf *b);                 /* len = 0, keeps the memory */
char *hfs3_buf_take(hfs3_buf *b, size_t *len);    /* caller owns the result ("" if empty); b is reset */
void hfs3_buf_free(hfs3_buf *b);
/* the contents as a C string, never NULL */
static inline const char *hfs3_buf_str(const hfs3_buf *b) { return b->data ? b->data : ""; }

/* Lowercase hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void hfs3_hex(const unsigned char *in, size_t n, char *out);
/* Parses 2n hex digits (either case) into n bytes; -EINVAL if s is not exactly that. */
int hfs3_unhex(const char *s, unsigned char *out, size_t n);
/* 1 if s is exactly 64 lowercase hex digits. */
int hfs3_is_sha256_hex(const char *s);

/* Streaming SHA-256 (OpenSSL EVP). */
typedef struct hfs3_sha256_ctx hfs3_sha256_ctx;
hfs3_sha256_ctx *hfs3_sha256_new(void);              /* NULL on allocation failure */
void hfs3_sha256_update(hfs3_sha256_ctx *h, const void *p, size_t n);
void hfs3_sha256_final(hfs3_sha256_ctx *h, unsigned char out[32]); /* h may be updated again after reset */
void hfs3_sha256_reset(hfs3_sha256_ctx *h);
void hfs3_sha256_free(hfs3_sha256_ctx *h);
void hfs3_sha256(const void *p, size_t n, unsigned char out[32]);
void hfs3_sha256_hexof(const void *p, size_t n, char out[65]);
/* Feeds len bytes of fd from off into h (len UINT64_MAX: to the end of the file), read with pread through
 * buf (n bytes); *done (may be NULL) gets the bytes hashed. 0; -errno of a failed read; -ENODATA when the
 * file ends before len bytes. Sets no message: the caller names the file. */
int hfs3_sha256_update_fd(hfs3_sha256_ctx *h, int fd, uint64_t off, uint64_t len, void *buf, size_t n,
                          uint64_t *done);
/* The same for a file this process has just written and no one else can shorten (a fetch's own new .part): read
 * in place through read-only mappings, with no copy, when it is ours and no one else may write it (else pread).
 * A mapping turns a page that cannot be read (an I/O error, a hole on a full tmpfs, a file shortened under it)
 * into SIGBUS where pread gives -EIO, zeros or -ENODATA: a file from before this process (a blob, a dead fetch's
 * .part) goes through hfs3_sha256_update_fd. */
int hfs3_sha256_update_fd_fresh(hfs3_sha256_ctx *h, int fd, uint64_t off, uint64_t len, void *buf, size_t n,
                                uint64_t *done);
/* Hashes the whole open file fd (from offset 0): 0 with hex and *size (may be NULL) set; -ENOMEM, or -errno of
 * a failed read. Sets no message. */
int hfs3_sha256_fd(int fd, char hex[65], uint64_t *size);
/* The same through mappings, for a file no one else can shorten (hfs3_sha256_update_fd_fresh's rule). */
int hfs3_sha256_fd_fresh(int fd, char hex[65], uint64_t *size);
/* Hashes a whole local file; on success hex holds 64 hex digits and *size the bytes read. */
int hfs3_sha256_file(const char *path, char hex[65], uint64_t *size);

/* HMAC-SHA256 (OpenSSL). */
void hfs3_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n, unsigned char out[32]);

/* Small string helpers. */
char *hfs3_strdup(const char *s);                  /* NULL in, NULL out; aborts never: NULL on OOM */
char *hfs3_strndup(const char *s, size_t n);
int hfs3_starts_with(const char *s, const char *prefix);
int hfs3_ends_with(const char *s, const char *suffix);
/* Reads a whole local file (at most max bytes) into *out (NUL-terminated). */
int hfs3_read_file(const char *path, size_t max, char **out, size_t *len);
/* The bytes process pid has written so far (wchar of /proc/PID/io), or -1 when that is not ours to read (another
 * user's process, one gone). `status` and `run` draw a fetch's progress from the helper's. */
int64_t hfs3_proc_wchar(int pid);
/* open(path, flags | O_CREAT | O_CLOEXEC, mode). With exact set, the file ends up with exactly mode
 * whatever the umask took (a shared cache needs its group bits), if this user owns it: only the owner
 * may fchmod. Returns the fd. */
int hfs3_create_file(const char *path, int flags, int mode, int exact);
/* Writes data to path atomically: an O_EXCL temp file with an unpredictable name in the same directory,
 * fsync, rename. Whatever path is, it is replaced: callers with a user-named path use hfs3_write_output. */
int hfs3_write_file_atomic(const char *path, const void *data, size_t n, int mode);
/* The same; with exact set the file gets exactly mode, as with hfs3_create_file. */
int hfs3_write_file_atomic_ex(const char *path, const void *data, size_t n, int mode, int exact);
/* write(2) until all n bytes are out (EINTR retried). 0 or -errno. */
int hfs3_write_all(int fd, const void *data, size_t n);
/* Writes a user-named output (build -o FILE): a regular file or a new name is replaced atomically (through
 * a symlink, the file it names); a character device, FIFO or socket is written in place and never replaced;
 * a directory is refused. */
int hfs3_write_output(const char *path, const void *data, size_t n, int mode);
/* mkdir -p with the given mode for created directories. */
int hfs3_mkdirs(const char *path, int mode);
/* Number of online CPUs (>= 1). */
int hfs3_ncpu(void);
/* Monotonic seconds. */
double hfs3_now(void);
/* The noun that goes with the count n in a message: one when n is 1, else many ("0 files", "1 file",
 * "2 repositories"). Every count the helper prints goes through it: printf("%zu %s", n, hfs3_plural(n, "file", "files")). */
const char *hfs3_plural(unsigned long long n, const char *one, const char *many);

#endif
