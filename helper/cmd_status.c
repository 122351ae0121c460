/* cmd_status.c - `hfs3-manifest status [--json] [REMOTE]`: what is cached per mount, the fetches in progress
 * on this machine (file, bytes so far, rate, which process holds and which wait on its lock), and the last
 * errors (fails/<sha>.err, mounts/K/error). Reads only: no lock is taken, nothing is written.
 * Bytes so far come from the fetch's sidecar tmp/<sha>.<rand>.done (its header "hfs3-done 1 SIZE CHUNK",
 * then one completed range number per line): the .part is allocated at full size when the fetch starts, so
 * its size says nothing. The holder and the waiters of locks/<sha>.lock come from /proc/locks. */
#include "cmds.h"
#include "report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/index.h"
#include "hfs3/explain.h"
#include "hfs3/util.h"

#define MAX_WAITERS 16
#define MAX_ERRORS 10

typedef struct fetch_info {
    char sha[65];
    char part[128];
    uint64_t size;
    int64_t done;        /* bytes of completed ranges; -1 unknown (a one-range fetch has no sidecar) */
    int64_t side;        /* the sidecar's size: its header and range numbers, written by the fetcher too */
    double started;      /* the .part's birth time, 0 unknown */
    double last_write;   /* the later of the .part's and the sidecar's mtime */
    uid_t uid;
    int pid;             /* holder of the blob's lock; 0: none (a dead fetch, resumable) */
    int waiters[MAX_WAITERS];
    int nwaiters;
    int helper;          /* the hfs3-manifest process with the lock open (the fetcher the shim ran), 0 none */
} fetch_info;

static double ts(const struct timespec *t) { return (double)t->tv_sec + (double)t->tv_nsec / 1e9; }

/* Completed bytes from a sidecar's text: -1 when it is not one. */
static int64_t done_bytes(const char *text, uint64_t size)
{
    unsigned long long sz = 0, chunk = 0;
    if (sscanf(text, "hfs3-done 1 %llu %llu", &sz, &chunk) != 2 || sz != size || !chunk)
        return -1;
    uint64_t n = (size + chunk - 1) / chunk;
    if (n > (64u << 20))
        return -1;
    unsigned char *seen = calloc(n ? n : 1, 1);
    if (!seen)
        return -1;
    int64_t bytes = 0;
    const char *p = strchr(text, '\n');
    while (p && *++p) {
        char *end;
        unsigned long long i = strtoull(p, &end, 10);
        if (*end != '\n')
            break; /* a torn last line */
        if (end != p && i < n && !seen[i]) {
            seen[i] = 1;
            bytes += (int64_t)(i + 1 == n ? size - i * chunk : chunk);
        }
        p = end;
    }
    free(seen);
    return bytes;
}

/* Holder and waiters of the flock on (dev, ino) from /proc/locks. */
static void lock_pids(dev_t dev, ino_t ino, fetch_info *f)
{
    FILE *fp = fopen("/proc/locks", "re");
    if (!fp)
        return;
    char line[256];
    while (fgets(line, sizeof line, fp)) {
        char kind[16], type[16];
        int pid;
        unsigned maj, min;
        unsigned long long inode;
        const char *p = strchr(line, ':');
        if (!p)
            continue;
        p++;
        int waiting = strstr(p, "->") != NULL;
        if (waiting)
            p = strstr(p, "->") + 2;
        if (sscanf(p, " %15s %*s %15s %d %x:%x:%llu", kind, type, &pid, &maj, &min, &inode) != 6 ||
            strcmp(kind, "FLOCK") || maj != major(dev) || min != minor(dev) || inode != (unsigned long long)ino)
            continue;
        if (!waiting)
            f->pid = pid;
        else if (f->nwaiters < MAX_WAITERS)
            f->waiters[f->nwaiters++] = pid;
    }
    fclose(fp);
}

/* /proc/PID/comm into out ("" when unknown). */
static void comm_of(int pid, char *out, size_t n);

/* A `_get` helper (one file per process, as the shim runs it): its wchar (/proc/PID/io), less its sidecar's size,
 * is that file's bytes as they land, where the sidecar counts whole ranges only (0 for a long time on a big shard). -1: not one, or its
 * io is not ours to read (another user's process). */
static int64_t get_wchar(int pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    int is_get = 0;
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
        buf[n] = 0;
        is_get |= !strcmp(buf + i, "_get");
    }
    return is_get ? hfs3_proc_wchar(pid) : -1;
}

static void add_waiter(fetch_info *f, int pid)
{
    for (int k = 0; k < f->nwaiters; k++)
        if (f->waiters[k] == pid)
            return;
    if (f->nwaiters < MAX_WAITERS)
        f->waiters[f->nwaiters++] = pid;
}

/* A fetch that holds the blob's lock but has no tmp/ file yet (the helper is starting: the manifest, the first
 * request) and is not cached: shown as starting, so that status never says "fetches: (none)" while a program is
 * blocked on it. Appended to *pv; NULL when out of memory or when the blob is cached already. */
static fetch_info *add_starting(fetch_info **pv, size_t *pn, const cmd_snap *s, const char *sha)
{
    if (hfs3_gc_find(s->b, s->nb, sha))
        return NULL;   /* installed: the lock is held for the last steps only */
    fetch_info *nv = realloc(*pv, (*pn + 1) * sizeof *nv);
    if (!nv)
        return NULL;
    *pv = nv;
    fetch_info *f = &nv[(*pn)++];
    memset(f, 0, sizeof *f);
    memcpy(f->sha, sha, 64);
    const hfs3_entry *e = cmd_snap_entry(s, sha, NULL);
    f->size = e ? e->size : 0;
    f->done = 0;
    struct stat st;
    char lock[80];
    snprintf(lock, sizeof lock, "%s.lock", sha);
    if (fstatat(s->c->locks, lock, &st, AT_SYMLINK_NOFOLLOW) == 0)
        lock_pids(st.st_dev, st.st_ino, f);
    return f;
}

/* The processes with locks/<sha>.lock open (/proc/PID/fd: ours, or all for root). A program whose open() waits
 * on a fetch the shim started polls that lock (so /proc/locks lists no waiter): it is waiting; the helper
 * (hfs3-manifest) that holds it is the fetcher, and its bytes so far count as they land. A lock open with no
 * fetch in tmp/ yet adds one that is starting (add_starting); one nobody holds is dropped at the end (a program
 * about to take the lock: nothing runs yet). */
static void lock_fd_holders(const char *locks, fetch_info **pv, size_t *pn, const cmd_snap *s)
{
    DIR *proc = opendir("/proc");
    struct dirent *pe;
    size_t ll = strlen(locks), first_new = *pn;
    while (proc && (pe = readdir(proc)) != NULL) {
        int pid = atoi(pe->d_name);
        if (pid <= 0)
            continue;
        char fdp[64], link[96], target[4200];
        snprintf(fdp, sizeof fdp, "/proc/%d/fd", pid);
        DIR *fds = opendir(fdp);
        struct dirent *fe;
        while (fds && (fe = readdir(fds)) != NULL) {
            if (fe->d_name[0] == '.')
                continue;
            snprintf(link, sizeof link, "%s/%.20s", fdp, fe->d_name);
            ssize_t k = readlink(link, target, sizeof target - 1);
            if (k <= (ssize_t)ll + 1 || strncmp(target, locks, ll) || target[ll] != '/')
                continue;
            target[k] = 0;
            const char *name = target + ll + 1;
            char sha[65];
            snprintf(sha, sizeof sha, "%.64s", name);
            if (!hfs3_is_sha256_hex(sha) || strcmp(name + 64, ".lock"))
                continue;   /* pins (<sha>.pin.lock) and other locks are no fetch */
            size_t i = 0;
            while (i < *pn && strcmp((*pv)[i].sha, sha))
                i++;
            if (i == *pn && !add_starting(pv, pn, s, sha))
                continue;
            fetch_info *v = *pv;
            char comm[32];
            comm_of(pid, comm, sizeof comm);
            int64_t w = strcmp(comm, "hfs3-manifest") ? -1 : get_wchar(pid);
            if (!strcmp(comm, "hfs3-manifest") && (w >= 0 || !v[i].helper)) {
                v[i].helper = pid;
                /* its writes are the file's bytes and its sidecar's (the header goes first, before any
                 * byte of the file has landed): the sidecar's are not the file's */
                int64_t data = w - v[i].side;
                if (data > v[i].done)
                    v[i].done = data < (int64_t)v[i].size ? data : (int64_t)v[i].size;
            } else if (pid != v[i].helper && strcmp(comm, "hfs3-manifest")) {
                add_waiter(&v[i], pid);
            }
        }
        if (fds)
            closedir(fds);
    }
    if (proc)
        closedir(proc);
    /* without a helper, the process holding the flock is the fetcher, not one of its waiters */
    for (size_t i = 0; i < *pn; i++) {
        fetch_info *f = &(*pv)[i];
        int w = 0;
        for (int q = 0; q < f->nwaiters; q++)
            if (f->helper || f->waiters[q] != f->pid)
                f->waiters[w++] = f->waiters[q];
        f->nwaiters = w;
    }
    size_t k = first_new;
    for (size_t i = first_new; i < *pn; i++)
        if ((*pv)[i].pid || (*pv)[i].helper)
            (*pv)[k++] = (*pv)[i];
    *pn = k;
}

static int read_small(int dirfd, const char *name, char *buf, size_t n, struct stat *st)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = -1;
    if (fstat(fd, st) == 0 && S_ISREG(st->st_mode))
        got = read(fd, buf, n - 1);
    close(fd);
    if (got < 0)
        return -1;
    buf[got] = 0;
    return 0;
}

/* The fetches under tmp/ (*.part), newest first. */
static size_t scan_fetches(const hfs3_cache *c, fetch_info **out)
{
    *out = NULL;
    int dfd = openat(c->tmp, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    fetch_info *v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t len = strlen(name);
        char sha[65];
        snprintf(sha, sizeof sha, "%.64s", name);
        if (len >= sizeof v->part || !hfs3_ends_with(name, ".part") || !hfs3_is_sha256_hex(sha) || name[64] != '.')
            continue;
        struct statx sx;
        if (statx(c->tmp, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx) < 0 ||
            !S_ISREG(sx.stx_mode))
            continue;
        fetch_info *nv = realloc(v, (n + 1) * sizeof *v);
        if (!nv)
            break;
        v = nv;
        fetch_info *f = &v[n++];
        memset(f, 0, sizeof *f);
        memcpy(f->sha, sha, 65);
        memcpy(f->part, name, len + 1);
        f->size = sx.stx_size;
        f->uid = sx.stx_uid;
        f->started = (sx.stx_mask & STATX_BTIME) ? (double)sx.stx_btime.tv_sec + sx.stx_btime.tv_nsec / 1e9 : 0;
        f->last_write = (double)sx.stx_mtime.tv_sec + sx.stx_mtime.tv_nsec / 1e9;
        f->done = -1;
        char done[160], text[1 << 16];
        struct stat st;
        snprintf(done, sizeof done, "%.*s.done", (int)(len - 5), name);
        if (read_small(c->tmp, done, text, sizeof text, &st) == 0) {
            f->done = done_bytes(text, f->size);
            f->side = st.st_size;
            if (ts(&st.st_mtim) > f->last_write)
                f->last_write = ts(&st.st_mtim);
        }
        char lock[80];
        snprintf(lock, sizeof lock, "%s.lock", sha);
        if (fstatat(c->locks, lock, &st, AT_SYMLINK_NOFOLLOW) == 0)
            lock_pids(st.st_dev, st.st_ino, f);
    }
    closedir(d);
    *out = v;
    return n;
}

static void comm_of(int pid, char *out, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    out[0] = 0;
    FILE *fp = fopen(path, "re");
    if (!fp)
        return;
    if (fgets(out, (int)n, fp))
        out[strcspn(out, "\n")] = 0;
    fclose(fp);
}

typedef struct err_info {
    int64_t time;
    char *where;
    char *msg;
} err_info;

static int cmp_err(const void *a, const void *b)
{
    const err_info *x = a, *y = b;
    return x->time > y->time ? -1 : x->time < y->time;
}

static int wanted(const cmd_snap *s, const char *sha, const char *key, const hfs3_gc_mount **mount)
{
    const hfs3_gc_mount *m = NULL;
    *mount = NULL;
    for (size_t i = 0; i < s->nm; i++) {
        if (key && strcmp(s->m[i].key, key))
            continue;
        for (size_t j = 0; s->m[i].m && j < s->m[i].m->n; j++)
            if (s->m[i].m->entries[j].type == HFS3_FILE && !strcmp(s->m[i].m->entries[j].sha256, sha)) {
                m = &s->m[i];
                *mount = m;
                return 1;
            }
    }
    return key == NULL;
}

static const char *path_in(const hfs3_gc_mount *m, const char *sha)
{
    for (size_t j = 0; m && m->m && j < m->m->n; j++)
        if (m->m->entries[j].type == HFS3_FILE && !strcmp(m->m->entries[j].sha256, sha))
            return m->m->entries[j].path;
    return NULL;
}

/* fails/<sha>.err and mounts/K/error, newest first (at most MAX_ERRORS). */
static size_t scan_errors(const cmd_snap *s, const char *key, err_info **out)
{
    err_info *v = NULL;
    size_t n = 0;
    char kb[40], buf[1100];
    for (size_t i = 0; i < s->nm; i++) {
        if (!s->m[i].error || (key && strcmp(s->m[i].key, key)))
            continue;
        err_info *nv = realloc(v, (n + 1) * sizeof *v);
        if (!nv)
            break;
        v = nv;
        v[n].time = s->m[i].error_time;
        v[n].where = hfs3_strdup(cmd_mount_name(&s->m[i], kb, sizeof kb));
        v[n].msg = hfs3_strdup(s->m[i].error);
        n++;
    }
    int dfd = openat(s->c->fails, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d && dfd >= 0)
        close(dfd);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char sha[65];
        struct stat st;
        snprintf(sha, sizeof sha, "%.64s", de->d_name);
        if (!hfs3_is_sha256_hex(sha) || strcmp(de->d_name + 64, ".err") ||
            read_small(s->c->fails, de->d_name, buf, sizeof buf, &st) < 0)
            continue;
        const hfs3_gc_mount *m;
        if (!wanted(s, sha, key, &m))
            continue;
        buf[strcspn(buf, "\n")] = 0;
        err_info *nv = realloc(v, (n + 1) * sizeof *v);
        if (!nv)
            break;
        v = nv;
        const char *p = path_in(m, sha);
        char where[700];
        if (p)
            snprintf(where, sizeof where, "%s %s", cmd_mount_name(m, kb, sizeof kb), p);
        else
            snprintf(where, sizeof where, "fails/%s.err", sha);
        v[n].time = st.st_mtim.tv_sec;
        v[n].where = hfs3_strdup(where);
        v[n].msg = hfs3_strdup(buf);
        n++;
    }
    if (d)
        closedir(d);
    if (n)
        qsort(v, n, sizeof *v, cmp_err);
    for (size_t i = MAX_ERRORS; i < n; i++) {
        free(v[i].where);
        free(v[i].msg);
    }
    *out = v;
    return n < MAX_ERRORS ? n : MAX_ERRORS;
}

int cmd_status(int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
    int json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'j') {
            json = 1;
            continue;
        }
        if (c == 'h') {
            cmd_help("status");
            return 0;
        }
        cmd_usage("status");
        return 2;
    }
    if (argc - optind > 1) {
        cmd_usage("status");
        return 2;
    }
    const char *remote = optind < argc ? argv[optind] : NULL;
    char key[17];
    if (remote)
        hfs3_mountkey_as(remote, hfs3_env_bool("HFS3_VERIFY_FOREIGN", 0), (unsigned)geteuid(), key);
    cmd_snap s;
    int rc = cmd_snap_read(&s, "status");
    if (rc)
        return rc;
    cmd_snap_add_cblobs(&s);   /* a file checked by its chunks and not flushed yet is cached: programs read it */
    fetch_info *f = NULL;
    size_t nf = scan_fetches(s.c, &f);
    char *real = realpath(s.c->dir, NULL), locks[4200];
    if (real && (size_t)snprintf(locks, sizeof locks, "%s/locks", real) < sizeof locks)
        lock_fd_holders(locks, &f, &nf, &s);
    free(real);
    err_info *e = NULL;
    size_t ne = scan_errors(&s, remote ? key : NULL, &e);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    double wall = ts(&rt);
    cJSON *root = NULL, *jf = NULL;
    char *text = NULL;
    size_t text_len = 0;
    FILE *real_stdout = NULL;
    if (json) {
        root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "cache", cmd_snap_summary(&s, 1));
        cJSON_AddItemToObject(root, "mounts", cmd_snap_mounts(&s, remote, 1));
        jf = cJSON_AddArrayToObject(root, "fetches");
    } else {
        real_stdout = cmd_text_begin(&text, &text_len);
        cmd_snap_summary(&s, 0);
        printf("mounts:\n");
        if (!s.nm)
            printf("  (none cached)\n");
        cmd_snap_mounts(&s, remote, 0);
        printf("fetches:\n");
    }
    size_t shown = 0;
    const hfs3_gc_mount **fm = calloc(nf ? nf : 1, sizeof *fm);   /* each fetch's mount, for the totals */
    for (size_t i = 0; i < nf; i++) {
        const hfs3_gc_mount *m;
        if (!wanted(&s, f[i].sha, remote ? key : NULL, &m))
            continue;
        if (fm)
            fm[i] = m;
        shown++;
        const char *path = path_in(m, f[i].sha);
        char kb[40], comm[32] = "";
        if (f[i].helper)   /* the shim's helper fetches; the lock's creator (the program) waits */
            f[i].pid = f[i].helper;
        if (f[i].pid > 0)
            comm_of(f[i].pid, comm, sizeof comm);
        double elapsed = f[i].started > 0 ? wall - f[i].started : 0;
        double rate = f[i].done > 0 && elapsed > 0.5 ? (double)f[i].done / elapsed : 0;
        double idle = wall - f[i].last_write;
        if (idle < 0)
            idle = 0;
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "sha256", f[i].sha);
            if (m) {
                cJSON_AddStringToObject(o, "remote", cmd_mount_name(m, kb, sizeof kb));
                cJSON_AddStringToObject(o, "path", path);
            } else {
                cJSON_AddNullToObject(o, "remote");
                cJSON_AddNullToObject(o, "path");
            }
            cJSON_AddStringToObject(o, "state", !f[i].part[0] ? "starting" : f[i].pid ? "running" : "dead");
            cJSON_AddNumberToObject(o, "size", (double)f[i].size);
            if (f[i].done >= 0)
                cJSON_AddNumberToObject(o, "bytes_done", (double)f[i].done);
            else
                cJSON_AddNullToObject(o, "bytes_done");
            if (rate > 0) {
                cJSON_AddNumberToObject(o, "rate_bytes_per_s", rate);
                cJSON_AddNumberToObject(o, "eta_s", (double)(f[i].size - (uint64_t)f[i].done) / rate);
            } else {
                cJSON_AddNullToObject(o, "rate_bytes_per_s");
                cJSON_AddNullToObject(o, "eta_s");
            }
            if (f[i].part[0])
                cJSON_AddNumberToObject(o, "seconds_since_last_write", (double)(int64_t)idle);
            else
                cJSON_AddNullToObject(o, "seconds_since_last_write");
            if (f[i].pid) {
                cJSON_AddNumberToObject(o, "pid", f[i].pid);
                cJSON_AddStringToObject(o, "process", comm);
            } else {
                cJSON_AddNullToObject(o, "pid");
                cJSON_AddNullToObject(o, "process");
            }
            cJSON *w = cJSON_AddArrayToObject(o, "waiting_pids");
            for (int k = 0; k < f[i].nwaiters; k++)
                cJSON_AddItemToArray(w, cJSON_CreateNumber(f[i].waiters[k]));
            cJSON_AddNumberToObject(o, "uid", f[i].uid);
            cJSON_AddItemToArray(jf, o);
            continue;
        }
        char a[32], b[32];
        printf("  %s %s: ", m ? cmd_mount_name(m, kb, sizeof kb) : "?", path ? path : f[i].sha);
        if (f[i].done >= 0 && f[i].part[0])
            printf("%s of %s (%.0f%%)", hfs3_gc_human((uint64_t)f[i].done, a, sizeof a),
                   hfs3_gc_human(f[i].size, b, sizeof b),
                   f[i].size ? 100.0 * (double)f[i].done / (double)f[i].size : 100.0);
        else
            printf("%s", hfs3_gc_human(f[i].size, b, sizeof b));
        if (rate > 0)
            printf(", %.1f MB/s, ETA %.0f s", rate / 1e6, (double)(f[i].size - (uint64_t)f[i].done) / rate);
        if (!f[i].part[0])
            printf(", starting (the lock is held, nothing in tmp/ yet)");
        else
            printf(", last write %.0f s ago", idle);
        if (f[i].pid)
            printf(", pid %d (%s)", f[i].pid, comm[0] ? comm : "?");
        else
            printf(", no process: a dead fetch, resumed by the next open or fetch");
        for (int k = 0; k < f[i].nwaiters; k++) {
            char wc[32];
            comm_of(f[i].waiters[k], wc, sizeof wc);
            printf("%s%d (%s)", k ? ", pid " : "; waiting: pid ", f[i].waiters[k], wc[0] ? wc : "?");
        }
        printf("\n");
    }
    if (!json && !shown)
        printf("  (none)\n");
    /* the whole model of each mount with a fetch in progress: what is cached, plus what has landed so far */
    cJSON *jt = json ? cJSON_AddArrayToObject(root, "totals") : NULL;
    for (size_t i = 0; fm && i < nf; i++) {
        const hfs3_gc_mount *m = fm[i];
        int first = m && m->m;
        for (size_t k = 0; first && k < i; k++)
            first = fm[k] != m;
        if (!first)
            continue;
        hfs3_gc_usage u = {0};
        hfs3_gc_usage_of(m->m, NULL, s.b, s.nb, &u);
        uint64_t landed = 0, all = u.bytes_cached + u.bytes_missing;
        size_t nfetch = 0;
        for (size_t k = i; k < nf; k++)
            if (fm[k] == m) {
                nfetch++;
                landed += f[k].done > 0 ? (uint64_t)f[k].done : 0;
            }
        uint64_t have = u.bytes_cached + landed > all ? all : u.bytes_cached + landed;
        char kb[40], a[32], b[32];
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "remote", cmd_mount_name(m, kb, sizeof kb));
            cJSON_AddNumberToObject(o, "bytes_total", (double)all);
            cJSON_AddNumberToObject(o, "bytes_done", (double)have);
            cJSON_AddNumberToObject(o, "fetches", (double)nfetch);
            cJSON_AddItemToArray(jt, o);
        } else {
            printf("  %s, the whole model: %s of %s (%.0f%%) cached or landed, %zu file%s in progress\n",
                   cmd_mount_name(m, kb, sizeof kb), hfs3_gc_human(have, a, sizeof a), hfs3_gc_human(all, b, sizeof b),
                   all ? 100.0 * (double)have / (double)all : 100.0, nfetch, nfetch == 1 ? "" : "s");
        }
    }
    free(fm);
    if (json) {
        cJSON *je = cJSON_AddArrayToObject(root, "errors");
        for (size_t i = 0; i < ne; i++) {
            char w[40];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "time", cmd_when(e[i].time, w, sizeof w));
            cJSON_AddStringToObject(o, "where", e[i].where ? e[i].where : "");
            cJSON_AddStringToObject(o, "message", e[i].msg ? e[i].msg : "");
            cJSON_AddItemToArray(je, o);
        }
        cmd_print_json(root);
    } else {
        printf("errors:\n");
        if (!ne)
            printf("  (none)\n");
        for (size_t i = 0; i < ne; i++) {
            char w[40];
            printf("  %s %s: %s\n", cmd_when(e[i].time, w, sizeof w), e[i].where ? e[i].where : "",
                   e[i].msg ? e[i].msg : "");
        }
        cmd_text_end(real_stdout, &text, &text_len);
    }
    for (size_t i = 0; i < ne; i++) {
        free(e[i].where);
        free(e[i].msg);
    }
    free(e);
    free(f);
    cmd_snap_free(&s);
    return 0;
}
