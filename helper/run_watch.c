/* run_watch.c - `hfs3-manifest run` on a terminal: the program runs as its child, and this process draws the
 * progress of the program's cold loads on the terminal (issue 41 item 3: the shim inside a program writes no
 * progress into its descriptors; the child gets HFS3_PROGRESS=0). What `status` reads, for the child's process
 * tree only: a process of the tree with CACHE/locks/<sha>.lock open is a program's open waiting on that file's
 * fetch (the shim polls the lock), a tree process named hfs3-manifest with it open is the helper fetching it
 * (its /proc/PID/io wchar, less its sidecar's size, is the file's bytes as they land), and tmp/<sha>.<rand>.done
 * counts the ranges done. Every WATCH_MS: one line redrawn in place (helper/progress.c, the fetch bar's words
 * and units), shown once a wait has lasted SHOW_AFTER_MS; a file counts as done once no process of the tree
 * waits on it, and when none waits any more the line is drawn a last time at 100% ("done") and ended. Signals
 * sent to this process (TERM, HUP, USR1, USR2, ALRM) go on to the child; the terminal's INT and QUIT reach the
 * child from the terminal itself and are ignored here while it runs; the child's exit status is ours (a
 * signal that killed it kills this process too). */
#include "cmds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/cache.h"
#include "hfs3/index.h"
#include "hfs3/util.h"

#define WATCH_MS 250
#define SHOW_AFTER_MS 1000
#define MAX_FILES 64
#define MAX_TREE 4096

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

struct wfile {
    char sha[65];
    char label[512];
    uint64_t size;
    uint64_t done;
    int waiting;   /* seen waited on in this look */
    int finished;
};

static struct watch {
    char locks[PATH_MAX];   /* CACHE/locks, real path */
    char tmp[PATH_MAX];
    char mounts[PATH_MAX];
    const char *spec;       /* HFS3_MOUNTS */
    struct wfile f[MAX_FILES];
    int n;
    double since;           /* the first wait of this display began */
    int shown;
} w;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The processes of the tree of root: root and every descendant (from /proc/PID/stat's ppid). */
static int tree_of(pid_t root, pid_t *out, int max)
{
    static pid_t pid[MAX_TREE * 4], ppid[MAX_TREE * 4];
    int np = 0, n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL && np < MAX_TREE * 4) {
        int p = atoi(de->d_name);
        if (p <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", p);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (k <= 0)
            continue;
        buf[k] = 0;
        const char *rp = strrchr(buf, ')');   /* the name may hold spaces and parentheses */
        int pp;
        if (!rp || sscanf(rp + 1, " %*c %d", &pp) != 1)
            continue;
        pid[np] = p;
        ppid[np++] = pp;
    }
    if (d)
        closedir(d);
    out[n++] = root;
    for (int i = 0; i < n; i++)   /* breadth first: each found process's children */
        for (int j = 0; j < np && n < max; j++)
            if (ppid[j] == out[i] && pid[j] != root)
                out[n++] = pid[j];
    return n;
}

static int is_helper(int pid)
{
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    FILE *fp = fopen(path, "re");
    if (fp) {
        if (fgets(comm, sizeof comm, fp))
            comm[strcspn(comm, "\n")] = 0;
        fclose(fp);
    }
    return !strcmp(comm, "hfs3-manifest");
}

/* The file of sha: its size and "LOCAL/path" from the index of one of the mounts in the cache (a configured
 * mount's LOCAL, or a hub's LOCAL/<repository>). 0 found, -1 not. */
static int label_of(const char *sha, struct wfile *f)
{
    uint8_t want[32];
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(sha + 2 * i, "%2x", &v) != 1)
            return -1;
        want[i] = (uint8_t)v;
    }
    DIR *d = opendir(w.mounts);
    struct dirent *de;
    int found = -1;
    while (d && found < 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX + 300], remote[1100] = "";
        if ((size_t)snprintf(path, sizeof path, "%s/%s/remote", w.mounts, de->d_name) >= sizeof path)
            continue;
        FILE *fp = fopen(path, "re");
        if (fp) {
            if (fgets(remote, sizeof remote, fp))
                remote[strcspn(remote, "\n")] = 0;
            fclose(fp);
        }
        if ((size_t)snprintf(path, sizeof path, "%s/%s/index", w.mounts, de->d_name) >= sizeof path)
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > (1LL << 31)) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char *base = malloc((size_t)st.st_size);
        ssize_t got = base ? read(fd, base, (size_t)st.st_size) : -1;
        close(fd);
        if (got != st.st_size || !hfs3_index_check(base, (size_t)got)) {
            free(base);
            continue;
        }
        const struct hfs3_index_header *h = (const void *)base;
        const struct hfs3_index_entry *e = (const void *)(base + h->entries_off);
        const char *s = base + h->strings_off;
        for (uint32_t i = 0; i < h->n_entries && found < 0; i++) {
            if (e[i].type != HFS3_IX_FILE || memcmp(e[i].sha256, want, 32))
                continue;
            f->size = e[i].size;
            /* the local path: a configured mount whose REMOTE is this one, or a hub's whose is its prefix */
            char *spec = w.spec ? strdup(w.spec) : NULL, *save = NULL, local[PATH_MAX] = "";
            for (char *t = spec ? strtok_r(spec, ";", &save) : NULL; t && !local[0]; t = strtok_r(NULL, ";", &save)) {
                char *eq = strchr(t, '=');
                if (!eq)
                    continue;
                *eq = 0;
                size_t rl = strlen(eq + 1);
                while (rl > 0 && eq[1 + rl - 1] == '/')
                    rl--;
                if (!strncmp(remote, eq + 1, rl) && (remote[rl] == 0 || remote[rl] == '/'))
                    snprintf(local, sizeof local, "%s%s", t, remote + rl);
            }
            free(spec);
            if ((size_t)snprintf(f->label, sizeof f->label, "%s/%s", local[0] ? local : remote, s + e[i].path_off) >=
                sizeof f->label)
                memcpy(f->label + sizeof f->label - 4, "...", 4);   /* the bar shows its tail anyway */
            found = 0;
        }
        free(base);
    }
    if (d)
        closedir(d);
    return found;
}

/* Bytes of the fetch of f so far: the sidecar's whole ranges, or the fetching helper's writes as they land. */
static void bytes_of(struct wfile *f, int helper)
{
    DIR *d = opendir(w.tmp);
    struct dirent *de;
    int64_t side = 0, done = -1;
    uint64_t part = 0;
    while (d && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, f->sha, 64) || de->d_name[64] != '.')
            continue;
        char path[PATH_MAX + 300];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", w.tmp, de->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (stat(path, &st) < 0)
            continue;
        if (hfs3_ends_with(de->d_name, ".part")) {
            part = (uint64_t)st.st_size;
            continue;
        }
        if (!hfs3_ends_with(de->d_name, ".done"))
            continue;
        side = st.st_size;
        FILE *fp = fopen(path, "re");
        unsigned long long size = 0, chunk = 0, k;
        if (fp && fscanf(fp, "hfs3-done 1 %llu %llu", &size, &chunk) == 2 && chunk) {
            done = 0;
            uint64_t nr = (size + chunk - 1) / chunk;
            unsigned char *seen = nr < (64u << 20) ? calloc(nr ? nr : 1, 1) : NULL;
            while (seen && fscanf(fp, "%llu", &k) == 1)
                if (k < nr && !seen[k]) {
                    seen[k] = 1;
                    done += (int64_t)(k + 1 == nr ? size - k * chunk : chunk);
                }
            free(seen);
        }
        if (fp)
            fclose(fp);
    }
    if (d)
        closedir(d);
    if (!f->size)
        f->size = part;
    int64_t wc = helper > 0 ? hfs3_proc_wchar(helper) : -1;
    if (wc >= 0 && wc - side > done)
        done = wc - side;
    if (done > (int64_t)f->size)
        done = (int64_t)f->size;
    if (done > (int64_t)f->done)
        f->done = (uint64_t)done;
}

/* One look at the child's tree: which files its processes wait on, and their bytes. */
static void look(pid_t root)
{
    static pid_t tree[MAX_TREE];
    int nt = tree_of(root, tree, MAX_TREE);
    size_t ll = strlen(w.locks);
    int helper_of[MAX_FILES];
    for (int i = 0; i < w.n; i++) {
        w.f[i].waiting = 0;
        helper_of[i] = 0;
    }
    for (int t = 0; t < nt; t++) {
        char fdp[64], link[128], target[PATH_MAX];
        snprintf(fdp, sizeof fdp, "/proc/%d/fd", (int)tree[t]);
        DIR *d = opendir(fdp);
        struct dirent *de;
        int helper = -1;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            snprintf(link, sizeof link, "%s/%.20s", fdp, de->d_name);
            ssize_t k = readlink(link, target, sizeof target - 1);
            if (k <= (ssize_t)ll + 1 || strncmp(target, w.locks, ll) || target[ll] != '/')
                continue;
            target[k] = 0;
            const char *name = target + ll + 1;
            if (strlen(name) != 69 || strcmp(name + 64, ".lock"))
                continue;   /* pins (<sha>.pin.lock) and other locks are no fetch */
            if (helper < 0)
                helper = is_helper((int)tree[t]);
            int i = 0;
            while (i < w.n && strncmp(w.f[i].sha, name, 64))
                i++;
            if (i == w.n) {
                if (helper || w.n == MAX_FILES)
                    continue;   /* a prefetch nobody waits on */
                memset(&w.f[i], 0, sizeof w.f[i]);
                memcpy(w.f[i].sha, name, 64);
                if (label_of(w.f[i].sha, &w.f[i]) < 0) {
                    memcpy(w.f[i].label, name, 12);
                    memcpy(w.f[i].label + 12, "...", 4);
                }
                helper_of[i] = 0;
                w.n++;
                if (!w.since)
                    w.since = now_s();
            }
            if (helper)
                helper_of[i] = (int)tree[t];
            else
                w.f[i].waiting = 1;
        }
        if (d)
            closedir(d);
    }
    for (int i = 0; i < w.n; i++) {
        if (w.f[i].finished)
            continue;
        if (!w.f[i].waiting) {   /* its open returned: the file is in (or the program has its error) */
            w.f[i].finished = 1;
            w.f[i].done = w.f[i].size;
            continue;
        }
        bytes_of(&w.f[i], helper_of[i]);
    }
}

/* Draws the display: the files of this display, done and in progress; the name of the first still waited on. */
static void draw(int final)
{
    uint64_t done = 0, total = 0;
    size_t fdone = 0;
    const char *name = NULL;
    for (int i = 0; i < w.n; i++) {
        done += w.f[i].done;
        total += w.f[i].size;
        fdone += (size_t)w.f[i].finished;
        if (!w.f[i].finished && !name)
            name = w.f[i].label;
    }
    cmd_progress_file(final ? (w.n == 1 ? w.f[0].label : NULL) : name);
    cmd_progress(NULL, final ? "hfs3: done" : "hfs3: loading", final ? total : done, total, fdone, (size_t)w.n);
    w.shown = 1;
}

/* After a look: the display shown once a wait has lasted SHOW_AFTER_MS, and ended when no file is waited on. */
static void step(int child_gone)
{
    int active = 0;
    for (int i = 0; i < w.n; i++)
        active |= !w.f[i].finished;
    if (active && !child_gone) {
        if (w.shown || now_s() - w.since >= SHOW_AFTER_MS / 1000.0)
            draw(0);
        return;
    }
    if (w.shown) {
        if (!active)
            draw(1);   /* every file in: 100%, done; a child gone halfway leaves its last state */
        fputs("\n", stderr);
        fflush(stderr);
        cmd_progress_end();
    }
    w.n = 0;
    w.since = 0;
    w.shown = 0;
}

int run_watch(pid_t pid)
{
    child_pid = pid;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    const int fw[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t i = 0; i < sizeof fw / sizeof fw[0]; i++)
        sigaction(fw[i], &sa, NULL);
    signal(SIGINT, SIG_IGN);   /* the terminal sends them to the child too: it decides */
    signal(SIGQUIT, SIG_IGN);
    char *cache = hfs3_cache_dir_from_env();
    w.spec = getenv("HFS3_MOUNTS");
    int status = 0, can = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            break;
        struct timespec ts = {0, WATCH_MS * 1000000L};
        nanosleep(&ts, NULL);
        if (!can && cache) {   /* the cache as the kernel names it in /proc/PID/fd, once the child made it */
            char *real = realpath(cache, NULL);
            can = real && (size_t)snprintf(w.locks, sizeof w.locks, "%s/locks", real) < sizeof w.locks &&
                  (size_t)snprintf(w.tmp, sizeof w.tmp, "%s/tmp", real) < sizeof w.tmp &&
                  (size_t)snprintf(w.mounts, sizeof w.mounts, "%s/mounts", real) < sizeof w.mounts;
            free(real);
        }
        if (can) {
            look(pid);
            step(0);
        }
    }
    if (can && WIFEXITED(status))
        look(pid);   /* the child exited between two looks: what it waited on then is in (not when it was killed) */
    if (can)
        step(1);
    free(cache);
    child_pid = 0;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit no = {0, 0};
        setrlimit(RLIMIT_CORE, &no);   /* the child dumped its own core, where it could */
        signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        return 128 + sig;
    }
    return 1;
}
