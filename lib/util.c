/* util.c - per-thread error messages, the size-capped buffer, hex, SHA-256/HMAC through OpenSSL, and small
 * file helpers. Owns nothing global except each thread's error slot. */
#include "hfs3/util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char err_msg[1024];

int hfs3_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return code;
}

int hfs3_err_wrap(int code, const char *fmt, ...)
{
    char prefix[512], old[sizeof err_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_msg, sizeof old);
    /* truncation is fine: the message stays one readable line */
    const char *rest = old[0] ? old : strerror(code < 0 ? -code : code);
    size_t lp = strlen(prefix), lr = strlen(rest), cap = sizeof err_msg - 1;
    if (lp > cap)
        lp = cap;
    memcpy(err_msg, prefix, lp);
    size_t pos = lp;
    if (pos + 2 <= cap) {
        memcpy(err_msg + pos, ": ", 2);
        pos += 2;
    }
    if (lr > cap - pos)
        lr = cap - pos;
    memcpy(err_msg + pos, rest, lr);
    err_msg[pos + lr] = 0;
    return code;
}

const char *hfs3_errmsg(void) { return err_msg; }
void hfs3_err_clear(void) { err_msg[0] = 0; }

void hfs3_buf_init(hfs3_buf *b, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max ? max : (size_t)-1;
}

static int buf_grow(hfs3_buf *b, size_t need)
{
    if (need > b->max || need < b->len) {
        hfs3_buf_free(b);
        return -E2BIG;
    }
    if (need + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need + 1)
        cap = cap * 2 < cap ? need + 1 : cap * 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        hfs3_buf_free(b);
        return -ENOMEM;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int hfs3_buf_add(hfs3_buf *b, const void *p, size_t n)
{
    int rc = buf_grow(b, b->len + n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int hfs3_buf_adds(hfs3_buf *b, const char *s) { return hfs3_buf_add(b, s, strlen(s)); }
int hfs3_buf_addc(hfs3_buf *b, char c) { return hfs3_buf_add(b, &c, 1); }

int hfs3_buf_addf(hfs3_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        hfs3_buf_free(b);
        return -EINVAL;
    }
    if ((size_t)n < sizeof small)
        return hfs3_buf_add(b, small, (size_t)n);
    int rc = buf_grow(b, b->len + (size_t)n);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void hfs3_buf_reset(hfs3_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}

char *hfs3_buf_take(hfs3_buf *b, size_t *len)
{
    char *p = b->data;
    if (len)
        *len = b->len;
    if (!p)
        p = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void hfs3_buf_free(hfs3_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void hfs3_hex(const unsigned char *in, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[2 * n] = 0;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int hfs3_unhex(const char *s, unsigned char *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hexval((unsigned char)s[2 * i]), lo = hi < 0 ? -1 : hexval((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return s[2 * n] ? -EINVAL : 0;
}

int hfs3_is_sha256_hex(const char *s)
{
    if (!s)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[64] == 0;
}

struct hfs3_sha256_ctx {
    EVP_MD_CTX *ctx;
};

hfs3_sha256_ctx *hfs3_sha256_new(void)
{
    hfs3_sha256_ctx *h = malloc(sizeof *h);
    if (!h)
        return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(h->ctx);
        free(h);
        return NULL;
    }
    return h;
}

void hfs3_sha256_update(hfs3_sha256_ctx *h, const void *p, size_t n) { EVP_DigestUpdate(h->ctx, p, n); }

void hfs3_sha256_final(hfs3_sha256_ctx *h, unsigned char out[32])
{
    unsigned int len = 32;
    EVP_DigestFinal_ex(h->ctx, out, &len);
    EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL);
}

void hfs3_sha256_reset(hfs3_sha256_ctx *h) { EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL); }

void hfs3_sha256_free(hfs3_sha256_ctx *h)
{
    if (!h)
        return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void hfs3_sha256(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len = 32;
    EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
}

void hfs3_sha256_hexof(const void *p, size_t n, char out[65])
{
    unsigned char md[32];
    hfs3_sha256(p, n, md);
    hfs3_hex(md, 32, out);
}

/* Hashes [*off, end) of fd through read-only mappings, a window at a time, and advances *off. 0, or -1 when a
 * window cannot be mapped (the caller reads the rest with pread). */
static int sha256_mapped(hfs3_sha256_ctx *h, int fd, uint64_t *off, uint64_t end)
{
    enum { WINDOW = 4 << 20 };
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    while (*off < end) {
        uint64_t base = *off & ~(page - 1), stop = base + WINDOW < end ? base + WINDOW : end;
        void *p = mmap(NULL, (size_t)(stop - base), PROT_READ, MAP_SHARED, fd, (off_t)base);
        if (p == MAP_FAILED)
            return -1;
        (void)madvise(p, (size_t)(stop - base), MADV_SEQUENTIAL);
        hfs3_sha256_update(h, (const char *)p + (*off - base), (size_t)(stop - *off));
        munmap(p, (size_t)(stop - base));
        *off = stop;
    }
    return 0;
}

/* Whether nobody but this process's user can shorten the file behind fd: a mapping of a file that shrinks under
 * it raises SIGBUS, so only a file of our own that no one else may write is hashed through one. */
static int only_ours(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
        return 0;
    *size = (uint64_t)st.st_size;
    return 1;
}

static int sha256_update_fd(hfs3_sha256_ctx *h, int fd, uint64_t off, uint64_t len, void *buf, size_t n,
                            uint64_t *done, int map)
{
    uint64_t start = off, size;
    int rc = 0;
    /* Our own file is hashed in place in the page cache: pread copies every byte once more, and that copy was
     * the largest cost of `fetch` after the hash itself (perf: 16% of its samples in _copy_to_iter, issue 21) */
    if (map && len && only_ours(fd, &size) && off < size) {
        uint64_t from = off, end = len == UINT64_MAX || len > size - off ? size : off + len;
        (void)sha256_mapped(h, fd, &off, end); /* what it could not map, pread reads below; past the end, it
                                                * finds the end of file as before */
        if (len != UINT64_MAX)
            len -= off - from;
    }
    while (len) {
        size_t want = len < n ? (size_t)len : n;
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            rc = got < 0 ? -errno : len == UINT64_MAX ? 0 : -ENODATA;
            break;
        }
        hfs3_sha256_update(h, buf, (size_t)got);
        off += (uint64_t)got;
        if (len != UINT64_MAX)
            len -= (uint64_t)got;
    }
    if (done)
        *done = off - start;
    return rc;
}

int hfs3_sha256_update_fd(hfs3_sha256_ctx *h, int fd, uint64_t off, uint64_t len, void *buf, size_t n,
                          uint64_t *done)
{
    return sha256_update_fd(h, fd, off, len, buf, n, done, 0);
}

int hfs3_sha256_update_fd_fresh(hfs3_sha256_ctx *h, int fd, uint64_t off, uint64_t len, void *buf, size_t n,
                                uint64_t *done)
{
    return sha256_update_fd(h, fd, off, len, buf, n, done, 1);
}

static int sha256_fd(int fd, char hex[65], uint64_t *size, int map)
{
    enum { CHUNK = 1 << 20 };
    hfs3_sha256_ctx *h = hfs3_sha256_new();
    unsigned char *buf = malloc(CHUNK);
    int rc = -ENOMEM;
    if (h && buf && (rc = sha256_update_fd(h, fd, 0, UINT64_MAX, buf, CHUNK, size, map)) == 0) {
        unsigned char md[32];
        hfs3_sha256_final(h, md);
        hfs3_hex(md, 32, hex);
    }
    free(buf);
    if (h)
        hfs3_sha256_free(h);
    return rc;
}

int hfs3_sha256_fd(int fd, char hex[65], uint64_t *size) { return sha256_fd(fd, hex, size, 0); }

int hfs3_sha256_fd_fresh(int fd, char hex[65], uint64_t *size) { return sha256_fd(fd, hex, size, 1); }

int hfs3_sha256_file(const char *path, char hex[65], uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hfs3_err(-errno, "%s: %s", path, strerror(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    int rc = hfs3_sha256_fd(fd, hex, size);
    close(fd);
    if (rc == -ENOMEM)
        return hfs3_err(rc, "%s: out of memory", path);
    if (rc < 0)
        return hfs3_err(rc, "%s: read: %s", path, strerror(-rc));
    return 0;
}

void hfs3_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t n, unsigned char out[32])
{
    unsigned int len = 32;
    HMAC(EVP_sha256(), key, (int)keylen, msg, n, out, &len);
}

char *hfs3_strdup(const char *s) { return s ? strdup(s) : NULL; }
char *hfs3_strndup(const char *s, size_t n) { return s ? strndup(s, n) : NULL; }
int hfs3_starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

int hfs3_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

int64_t hfs3_proc_wchar(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/io", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *w = strstr(buf, "wchar: ");
    return w ? (int64_t)strtoll(w + 7, NULL, 10) : -1;
}

int hfs3_read_file(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hfs3_err(-errno, "%s: %s", path, strerror(errno));
    hfs3_buf b;
    hfs3_buf_init(&b, max);
    char chunk[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = hfs3_err(-errno, "%s: read: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if ((rc = hfs3_buf_add(&b, chunk, (size_t)n)) < 0) {
            rc = hfs3_err(rc, "%s: larger than %zu bytes", path, max);
            break;
        }
    }
    close(fd);
    if (rc < 0) {
        hfs3_buf_free(&b);
        return rc;
    }
    *out = hfs3_buf_take(&b, len);
    return *out ? 0 : hfs3_err(-ENOMEM, "out of memory");
}

int hfs3_create_file(const char *path, int flags, int mode, int exact)
{
    int fd = open(path, flags | O_CREAT | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return hfs3_err(-errno, "%s: %s", path, strerror(errno));
    struct stat st;
    if (exact && fstat(fd, &st) == 0 && st.st_uid == geteuid() && (int)(st.st_mode & 07777) != mode)
        (void)fchmod(fd, (mode_t)mode);
    return fd;
}

int hfs3_write_file_atomic(const char *path, const void *data, size_t n, int mode)
{
    return hfs3_write_file_atomic_ex(path, data, n, mode, 0);
}

/* A temp name nobody can guess: another user who can write the directory cannot plant it in advance. */
static int random_suffix(char out[17])
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    hfs3_hex(r, sizeof r, out);
    return 0;
}

int hfs3_write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int hfs3_write_file_atomic_ex(const char *path, const void *data, size_t n, int mode, int exact)
{
    char tmp[4200], suffix[17];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        if (random_suffix(suffix) < 0)
            return hfs3_err(-errno, "%s: no random bytes for a temp name: %s", path, strerror(errno));
        if (snprintf(tmp, sizeof tmp, "%s.tmp.%s", path, suffix) >= (int)sizeof tmp)
            return hfs3_err(-ENAMETOOLONG, "%s: path too long", path);
        /* O_EXCL | O_NOFOLLOW: never write through something planted under the temp name */
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (fd < 0 && errno != EEXIST)
            return hfs3_err(-errno, "%s: %s", tmp, strerror(errno));
    }
    if (fd < 0)
        return hfs3_err(-EEXIST, "%s: no free temp name", path);
    /* only a file this call created is ever fchmod-ed */
    if (exact)
        (void)fchmod(fd, (mode_t)mode);
    int rc = hfs3_write_all(fd, data, n);
    if (rc < 0) {
        close(fd);
        unlink(tmp);
        return hfs3_err(rc, "%s: write: %s", tmp, strerror(-rc));
    }
    if (fsync(fd) < 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return hfs3_err(-e, "%s: fsync: %s", tmp, strerror(e));
    }
    if (close(fd) < 0) {
        int e = errno;
        unlink(tmp);
        return hfs3_err(-e, "%s: close: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return hfs3_err(-e, "rename %s: %s", path, strerror(e));
    }
    return 0;
}

int hfs3_write_output(const char *path, const void *data, size_t n, int mode)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        if (errno != ENOENT)
            return hfs3_err(-errno, "%s: %s", path, strerror(errno));
        /* a new name; a dangling symlink is not followed (it could name anything) */
        struct stat lst;
        if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
            return hfs3_err(-ENOENT, "%s: a symlink to a missing file; not followed", path);
        return hfs3_write_file_atomic(path, data, n, mode);
    }
    if (S_ISDIR(st.st_mode))
        return hfs3_err(-EISDIR, "%s: is a directory", path);
    if (S_ISREG(st.st_mode)) {
        /* a symlink to a regular file keeps being a symlink: the file it names is replaced */
        char *real = realpath(path, NULL);
        if (!real)
            return hfs3_err(-errno, "%s: %s", path, strerror(errno));
        int rc = hfs3_write_file_atomic(real, data, n, mode);
        free(real);
        return rc;
    }
    /* a character device (/dev/null, a terminal), a FIFO or a socket is written in place, never replaced */
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return hfs3_err(-errno, "%s: %s", path, strerror(errno));
    int rc = hfs3_write_all(fd, data, n);
    if (close(fd) < 0 && rc == 0 && errno != EINTR)
        rc = -errno;
    if (rc < 0)
        return hfs3_err(rc, "%s: write: %s", path, strerror(-rc));
    return 0;
}

int hfs3_mkdirs(const char *path, int mode)
{
    char buf[4200];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return hfs3_err(-ENAMETOOLONG, "%s: path too long", path);
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, (mode_t)mode) < 0 && errno != EEXIST)
                return hfs3_err(-errno, "mkdir %s: %s", buf, strerror(errno));
            *p = c;
            if (!c)
                break;
        }
    }
    return 0;
}

int hfs3_ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

double hfs3_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *hfs3_plural(unsigned long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}
