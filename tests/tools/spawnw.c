/* spawnw.c - posix_spawn file actions and children started in a mount, run under the shim (issue 33 items 1 and 2;
 * t_shim_dlspawn.sh). One line per case, "NAME: ANSWER", the answer an errno name or "ok" (and what the child
 * printed). Usage:
 *   spawnw guard M W       M: a mount's directory holding a.txt and dir/ (the flat fixture); W: a writable directory
 *                          outside the mounts whose first component a mount shares, holding blob -> a cached blob
 *   spawnw late M W P A    the actions judged on the state at the spawn: late() below (issue 41 item 5)
 *   spawnw cwd M/dir       from a cwd outside every mount, before any call touches a mount: a child started in
 *                          M/dir by posix_spawn's addchdir_np, by fork + chdir + exec and by vfork + chdir + exec
 *                          runs `pwd` there */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *ename(int e)
{
    const char *n = e ? strerrorname_np(e) : "ok";
    return n ? n : "E?";
}

/* posix_spawn of argv with fa; its exit status, or the error that kept it from starting */
static int run(posix_spawn_file_actions_t *fa, char **argv, int *status)
{
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], fa, NULL, argv, environ);
    if (rc)
        return rc;
    waitpid(pid, status, 0);
    return 0;
}

/* one file action added after an optional chdir (path) or fchdir (fd >= 0): the error adding it gave, or running it
 * with /bin/true */
static void one(const char *name, const char *chdir_to, int fchdir_fd, int tfd, const char *path, int oflag)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int rc = 0, st = 0;
    if (chdir_to)
        rc = posix_spawn_file_actions_addchdir_np(&fa, chdir_to);
    if (!rc && fchdir_fd >= 0)
        rc = posix_spawn_file_actions_addfchdir_np(&fa, fchdir_fd);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, tfd, path, oflag, 0644);
    char *argv[] = {"/bin/true", NULL};
    if (!rc)
        rc = run(&fa, argv, &st);
    posix_spawn_file_actions_destroy(&fa);
    printf("%s: %s%s\n", name, ename(rc), !rc && st ? " (the child failed)" : "");
}

static int guard(const char *m, const char *w)
{
    char p[4096], q[4096], dir[4096];
    snprintf(dir, sizeof dir, "%s/dir", m);
    snprintf(p, sizeof p, "%s/a.txt", m);
    int n = open(p, O_RDONLY);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (n < 0 || dfd < 0) {
        perror(p);
        return 2;
    }
    /* spellings no mount shares the first component of */
    snprintf(q, sizeof q, "/proc/self/fd/%d", n);
    one("addopen /proc/self/fd/N O_WRONLY|O_TRUNC", NULL, -1, 1, q, O_WRONLY | O_TRUNC);
    one("addopen /proc/self/fd/N O_RDWR", NULL, -1, 5, q, O_RDWR);
    snprintf(q, sizeof q, "/dev/fd/%d", n);
    one("addopen /dev/fd/N O_WRONLY|O_APPEND", NULL, -1, 5, q, O_WRONLY | O_APPEND);
    snprintf(q, sizeof q, "/proc/%d/fd/%d", (int)getpid(), n);
    one("addopen /proc/PID/fd/N O_WRONLY", NULL, -1, 5, q, O_WRONLY);
    one("addopen /proc/self/fd/N O_RDONLY", NULL, -1, 5, q, O_RDONLY);
    one("addopen /dev/null O_WRONLY", NULL, -1, 5, "/dev/null", O_WRONLY);
    /* a spelling whose first component a mount shares: a symlink to a blob, a new file beside it */
    snprintf(q, sizeof q, "%s/blob", w);
    one("addopen W/blob (a symlink to a blob) O_WRONLY", NULL, -1, 5, q, O_WRONLY);
    snprintf(q, sizeof q, "%s/new.txt", w);
    one("addopen W/new.txt O_WRONLY|O_CREAT", NULL, -1, 5, q, O_WRONLY | O_CREAT);
    /* from a cwd in a mount: /proc/self/cwd/x is the cache's copy of it */
    if (chdir(dir) < 0) {
        perror(dir);
        return 2;
    }
    one("cwd M/dir: addopen /proc/self/cwd/x O_CREAT", NULL, -1, 5, "/proc/self/cwd/x", O_WRONLY | O_CREAT);
    one("cwd M/dir: addopen x O_CREAT", NULL, -1, 5, "x", O_WRONLY | O_CREAT);
    one("cwd M/dir: addopen deeper/c.txt O_RDONLY", NULL, -1, 5, "deeper/c.txt", O_RDONLY);
    if (chdir(w) < 0) {
        perror(w);
        return 2;
    }
    /* the child's own chdir first: the guard looks from where it will be */
    one("addchdir_np M/dir, addopen x O_CREAT", dir, -1, 5, "x", O_WRONLY | O_CREAT);
    one("addchdir_np M/dir, addopen /proc/self/cwd/x O_CREAT", dir, -1, 5, "/proc/self/cwd/x", O_WRONLY | O_CREAT);
    one("addchdir_np M/dir, addopen deeper/c.txt O_RDONLY", dir, -1, 5, "deeper/c.txt", O_RDONLY);
    one("addfchdir_np fd of M/dir, addopen x O_CREAT", NULL, dfd, 5, "x", O_WRONLY | O_CREAT);
    one("addchdir_np W, addopen made.txt O_CREAT", w, -1, 5, "made.txt", O_WRONLY | O_CREAT);
    /* after a chdir action /proc/self/cwd is the child's directory, not this process's: from a cwd in a mount, a
     * write there into W is the child's to make (a guard that looked at this process's cwd, or gave up on the
     * spelling, would refuse it) */
    if (chdir(dir) < 0) {
        perror(dir);
        return 2;
    }
    one("cwd M/dir, addchdir_np W, addopen /proc/self/cwd/made3.txt O_CREAT", w, -1, 5, "/proc/self/cwd/made3.txt",
        O_WRONLY | O_CREAT);
    if (chdir(w) < 0) {
        perror(w);
        return 2;
    }
    /* issue 41 item 5: the child's chdir goes where its path leads at the spawn, and the actions after it are judged
     * from there. A path not there when the action is added, made a symlink into the cache before the spawn (here
     * /proc/self/fd/N of M/dir: the child inherits N), so that a relative write would land in the skeleton: refused */
    snprintf(q, sizeof q, "%s/later", w);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int rc = posix_spawn_file_actions_addchdir_np(&fa, q);
    char lk[64];
    snprintf(lk, sizeof lk, "/proc/self/fd/%d", dfd);
    if (!rc && symlink(lk, q) < 0)
        rc = errno;
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "x", O_WRONLY | O_CREAT, 0644);
    char *tv[] = {"/bin/true", NULL};
    int st = 0;
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    printf("addchdir_np W/later (not there; then a symlink to M/dir's fd), addopen x O_CREAT: %s\n", ename(rc));
    /* a path there when added (a real directory), replaced by a symlink to M/dir's fd before the spawn: the child
     * would move into M/dir (where the path leads then), the write is refused, nothing in W/swap.old */
    snprintf(q, sizeof q, "%s/swap", w);
    snprintf(p, sizeof p, "%s/swap.old", w);
    mkdir(q, 0755);
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addchdir_np(&fa, q);
    if (!rc && (rename(q, p) < 0 || symlink(lk, q) < 0))
        rc = errno;
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "x3", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    snprintf(p, sizeof p, "%s/swap.old/x3", w);
    printf("addchdir_np W/swap, then W/swap a symlink to M/dir's fd, addopen x3 O_CREAT: %s (W/swap.old/x3 %s)\n",
           ename(rc), access(p, F_OK) == 0 ? "made" : "missing");
    /* addfchdir_np of a harmless directory, then the caller's descriptor replaced by M/dir's before the spawn: the
     * child would move into M/dir, the write is refused */
    snprintf(q, sizeof q, "%s/harm", w);
    mkdir(q, 0755);
    int hfd = open(q, O_RDONLY | O_DIRECTORY);
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addfchdir_np(&fa, hfd);
    if (!rc && dup2(dfd, hfd) < 0)
        rc = errno;
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "x2", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    close(hfd);
    snprintf(p, sizeof p, "%s/harm/x2", w);
    printf("addfchdir_np fd of W/harm, then dup2(fd of M/dir) onto it, addopen x2 O_CREAT: %s (W/harm/x2 %s)\n",
           ename(rc), access(p, F_OK) == 0 ? "made" : "missing");
    /* addfchdir_np of a descriptor not open yet, then M/dir's dup2-ed onto it: the child moves there at the spawn */
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addfchdir_np(&fa, 900);
    if (!rc && dup2(dfd, 900) < 0)
        rc = errno;
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "x", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    close(900);
    printf("addfchdir_np 900 (not open; then dup2(fd of M/dir, 900)), addopen x O_CREAT: %s\n", ename(rc));
    /* two chdir actions, the second relative to the first: the write lands in W/harm */
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addchdir_np(&fa, w);
    if (!rc)
        rc = posix_spawn_file_actions_addchdir_np(&fa, "harm");
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "y", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    snprintf(p, sizeof p, "%s/harm/y", w);
    printf("addchdir_np W, addchdir_np harm, addopen y O_CREAT: %s (W/harm/y %s)\n", ename(rc),
           access(p, F_OK) == 0 ? "made" : "missing");
    /* a closefrom action before a chdir would close the shim's descriptor in the child: the chdir is the child's
     * by path, it still starts there; a relative write after it is refused (where the child is is not known) */
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    if (!rc)
        rc = posix_spawn_file_actions_addchdir_np(&fa, dir);
    char *pv[] = {"/bin/pwd", NULL};
    fflush(stdout);
    if (!rc)
        rc = run(&fa, pv, &st);
    printf("addclosefrom_np 3, addchdir_np M/dir, pwd: %s %d\n", ename(rc), st);
    rc = posix_spawn_file_actions_addopen(&fa, 5, "x", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    printf("addclosefrom_np 3, addchdir_np M/dir, addopen x O_CREAT: %s\n", ename(rc));
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addchdir_np(&fa, w);
    if (!rc)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "made2.txt", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    printf("addchdir_np W, addclosefrom_np 3, addopen made2.txt O_CREAT: %s\n", ename(rc));
    /* issue 33 round 4 review: an open, dup2 or close action added before a chdir names the number the shim's
     * descriptor for the chdir then gets (the lowest free one: a program can predict it). The child must still move
     * where the guard looked (W: x4, x5 made there, nothing in M/dir's skeleton), and a close must not make the
     * spawn fail (the kernel runs it) */
    for (int k = 0; k < 3; k++) {
        int next = dup(0);
        close(next);
        posix_spawn_file_actions_init(&fa);
        rc = k == 0 ? posix_spawn_file_actions_adddup2(&fa, dfd, next)
           : k == 1 ? posix_spawn_file_actions_addopen(&fa, next, dir, O_RDONLY | O_DIRECTORY, 0)
                    : posix_spawn_file_actions_addclose(&fa, next);
        if (!rc)
            rc = posix_spawn_file_actions_addchdir_np(&fa, w);
        snprintf(q, sizeof q, "x%d", 4 + k);
        if (!rc)
            rc = posix_spawn_file_actions_addopen(&fa, 9, q, O_WRONLY | O_CREAT, 0644);
        if (!rc)
            rc = run(&fa, tv, &st);
        posix_spawn_file_actions_destroy(&fa);
        snprintf(p, sizeof p, "%s/x%d", w, 4 + k);
        printf("%s onto the next free number, addchdir_np W, addopen x%d O_CREAT: %s%s (W/x%d %s)\n",
               k == 0 ? "adddup2(fd of M/dir)" : k == 1 ? "addopen(M/dir)" : "addclose", 4 + k, ename(rc),
               !rc && st ? " (the child failed)" : "", 4 + k, access(p, F_OK) == 0 ? "made" : "missing");
    }
    /* a child of the raw fork syscall (no atfork handler: a vfork child for the shim, for good) adds write actions
     * and spawns: the guard still looks at them */
    fflush(stdout);
    pid_t c = syscall(SYS_fork);
    if (c == 0) {
        snprintf(q, sizeof q, "/proc/self/fd/%d", n);
        one("raw fork child: addopen /proc/self/fd/N O_WRONLY|O_TRUNC", NULL, -1, 1, q, O_WRONLY | O_TRUNC);
        one("raw fork child: addfchdir_np fd of M/dir, addopen x O_CREAT", NULL, dfd, 5, "x", O_WRONLY | O_CREAT);
        one("raw fork child: addchdir_np M/dir, addopen x O_CREAT", dir, -1, 5, "x", O_WRONLY | O_CREAT);
        fflush(stdout);
        _exit(0);
    }
    if (c > 0)
        waitpid(c, &st, 0);
    /* a write action spelled through a descriptor an earlier action gives the child (60: not open here), through the
     * child's own pid (not there here), or through a symlink to /proc/self/cwd after a chdir into a mount: what the
     * guard sees here is not what the child opens; refused. /dev/stdout with no action before it still works. */
    {
        static const struct { const char *name; int give; const char *path; int fl; } fp[] = {
            {"adddup2(fd of a.txt, 60), addopen /proc/self/fd/60 O_WRONLY|O_TRUNC", 1, "/proc/self/fd/60", O_WRONLY | O_TRUNC},
            {"addopen(60, M/a.txt), addopen /dev/fd/60 O_WRONLY|O_APPEND", 2, "/dev/fd/60", O_WRONLY | O_APPEND},
            {"adddup2(fd of M/dir, 60), addopen /proc/self/fd/60/x O_CREAT", 3, "/proc/self/fd/60/x", O_WRONLY | O_CREAT},
            {"adddup2(fd of M/dir, 60), addopen W/fdlink/x (-> /proc/self/fd/60) O_CREAT", 3, "fdlink/x", O_WRONLY | O_CREAT},
            {"addopen /proc/PID+1000000/fd/N (a pid not there: the child's?) O_WRONLY", 0, NULL, O_WRONLY},
            {"addchdir_np M/dir, addopen W/cwdlink/x (-> /proc/self/cwd) O_CREAT", 4, "cwdlink/x", O_WRONLY | O_CREAT},
            {"addopen /dev/stdout O_WRONLY (no action before it)", 5, "/dev/stdout", O_WRONLY},
            {"60 W here, adddup2(fd of M/dir, 60), addopen /proc/self/fd/60/x O_CREAT", 6, "/proc/self/fd/60/x", O_WRONLY | O_CREAT},
            {"60 W here, adddup2(fd of M/dir, 60), addopen W/fdlink/x (-> /proc/self/fd/60) O_CREAT", 6, "fdlink/x", O_WRONLY | O_CREAT},
        };
        char ma[4096];
        snprintf(ma, sizeof ma, "%s/a.txt", m);
        symlink("/proc/self/fd/60", "fdlink");
        symlink("/proc/self/cwd", "cwdlink");
        for (size_t i = 0; i < sizeof fp / sizeof fp[0]; i++) {
            posix_spawn_file_actions_init(&fa);
            rc = fp[i].give == 1 ? posix_spawn_file_actions_adddup2(&fa, n, 60)
               : fp[i].give == 2 ? posix_spawn_file_actions_addopen(&fa, 60, ma, O_RDONLY, 0)
               : fp[i].give == 3 ? posix_spawn_file_actions_adddup2(&fa, dfd, 60)
               : fp[i].give == 4 ? posix_spawn_file_actions_addchdir_np(&fa, dir) : 0;
            if (fp[i].give == 6) { /* here 60 is W (the guard's look finds nothing to refuse), in the child M/dir */
                int h = open(w, O_RDONLY | O_DIRECTORY);
                rc = h < 0 || dup2(h, 60) < 0 ? errno : posix_spawn_file_actions_adddup2(&fa, dfd, 60);
                if (h >= 0)
                    close(h);
            }
            const char *wp = fp[i].path;
            if (!wp) {
                snprintf(q, sizeof q, "/proc/%d/fd/%d", (int)getpid() + 1000000, n);
                wp = q;
            } else if (wp[0] != '/') {
                snprintf(q, sizeof q, "%s/%s", w, wp);
                wp = q;
            }
            if (!rc)
                rc = posix_spawn_file_actions_addopen(&fa, 61, wp, fp[i].fl, 0644);
            if (!rc)
                rc = run(&fa, tv, &st);
            posix_spawn_file_actions_destroy(&fa);
            close(60);
            printf("%s: %s%s\n", fp[i].name, ename(rc), !rc && st ? " (the child failed)" : "");
        }
    }
    /* the child started in the mount sees it (it runs under the shim too) */
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    fflush(stdout);
    char *argv[] = {"/bin/pwd", NULL};
    rc = run(&fa, argv, &st);
    posix_spawn_file_actions_destroy(&fa);
    printf("addchdir_np M/dir, pwd: %s %d\n", ename(rc), st);
    /* the program closes every descriptor after the chdir action and fills the numbers with W: the child still
     * moves to M/dir (the action's path, at the spawn), where a write is refused */
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    closefrom(3);
    /* every number from 3 to 63 now names W, the kept one among them */
    int wfd = open(w, O_RDONLY | O_DIRECTORY), open_after = 0;
    for (int k = 3; k < 64; k++)
        if (k != wfd)
            dup2(wfd, k);
    rc = posix_spawn_file_actions_addopen(&fa, 5, "x", O_WRONLY | O_CREAT, 0644);
    int src = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    for (int k = 3; k < 64; k++)
        open_after += fcntl(k, F_GETFD) >= 0;
    printf("addchdir_np M/dir, every descriptor closed and reused, addopen x O_CREAT: %s (%d of 61 still open)\n",
           ename(rc), open_after);
    printf("addchdir_np M/dir, every descriptor closed and reused, posix_spawn: %s\n", ename(src));
    return 0;
}

/* ---- spawnw late: the actions judged on the state at the spawn (issue 41 item 5, issue 42 class 2) ---- */

/* posix_spawn of argv with fa and the child's stdout on a pipe: the error, or "ok" and what the child printed (its
 * lines joined by ' ') into out */
static int capture(posix_spawn_file_actions_t *fa, char **argv, char *out, size_t n)
{
    int pp[2];
    out[0] = 0;
    if (pipe2(pp, O_CLOEXEC) < 0)
        return errno;
    posix_spawn_file_actions_adddup2(fa, pp[1], 1);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], fa, NULL, argv, environ), st;
    close(pp[1]);
    size_t k = 0;
    ssize_t r;
    while (k + 1 < n && (r = read(pp[0], out + k, n - 1 - k)) > 0)
        k += (size_t)r;
    out[k] = 0;
    while (k > 0 && out[k - 1] == '\n')
        out[--k] = 0;
    for (size_t i = 0; i < k; i++)
        if (out[i] == '\n')
            out[i] = ' ';
    close(pp[0]);
    if (!rc)
        waitpid(pid, &st, 0);
    return rc;
}

static void show(const char *name, int rc, const char *what)
{
    printf("%s: %s%s%s\n", name, ename(rc), what && what[0] ? " " : "", what ? what : "");
}

/* the words of out that base lacks, into res ("none" for none) */
static const char *extra(const char *out, const char *base, char *res, size_t n)
{
    char w[32];
    size_t k = 0;
    res[0] = 0;
    for (const char *p = out; *p;) {
        size_t l = strcspn(p, " ");
        int found = 0;
        snprintf(w, sizeof w, "%.*s", (int)l, p);
        for (const char *b = base; *b && !found;) {
            size_t bl = strcspn(b, " ");
            found = bl == l && !strncmp(b, p, l);
            b += bl + (b[bl] == ' ');
        }
        if (!found && k + l + 2 < n)
            k += (size_t)snprintf(res + k, n - k, "%s%s", k ? " " : "", w);
        p += l + (p[l] == ' ');
    }
    return k ? res : "none";
}

/* the first line of a file, or "missing" */
static const char *head1(const char *p, char *buf, size_t n)
{
    FILE *f = fopen(p, "r");
    if (!f)
        return "missing";
    if (!fgets(buf, (int)n, f))
        buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return buf;
}

/* M: a mount's directory (or, for the kernel's answers, a read-only bind mount of the same tree) holding a.txt and
 * dir/deeper/c.txt; W: an empty writable directory outside the mounts; P and A: P/A a directory the program's view
 * has but not P's disk (a synthesized ancestor of M, from its real parent; in the kernel's tree a real one). Every
 * descriptor opened here is O_CLOEXEC: the child's descriptors are the actions' only. */
static int late(const char *m, const char *w, const char *par, const char *anc)
{
    char dir[4096], ma[4096], q[4096], out[512], b[256];
    char *tv[] = {"/bin/true", NULL}, *echo[] = {"/bin/echo", "PWNED", NULL}, *cat[] = {"/bin/cat", NULL};
    char *ls[] = {"/bin/ls", "/proc/self/fd", NULL};
    posix_spawn_file_actions_t fa;
    int rc, st;
    snprintf(dir, sizeof dir, "%s/dir", m);
    snprintf(ma, sizeof ma, "%s/a.txt", m);
    if (chdir(w) < 0)
        return 2;
    /* (a) a relative create added from W, then the program moves into the mount: the child is there at the spawn */
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addopen(&fa, 5, "late", O_WRONLY | O_CREAT, 0644);
    if (chdir(dir) < 0)
        return 2;
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    snprintf(q, sizeof q, "%s/late", w);
    show("addopen late O_CREAT from W, chdir M/dir, spawn", rc, access(q, F_OK) ? "(W/late missing)" : "(W/late made)");
    /* (b) the same spelled /proc/self/cwd/late */
    if (chdir(w) < 0)
        return 2;
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addopen(&fa, 5, "/proc/self/cwd/late", O_WRONLY | O_CREAT, 0644);
    if (chdir(dir) < 0)
        return 2;
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    show("addopen /proc/self/cwd/late O_CREAT from W, chdir M/dir, spawn", rc,
         access(q, F_OK) ? "(W/late missing)" : "(W/late made)");
    /* the other side: added from the mount, the program in W at the spawn: the child creates it there */
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addopen(&fa, 5, "late2", O_WRONLY | O_CREAT, 0644);
    if (chdir(w) < 0)
        return 2;
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    show("addopen late2 O_CREAT from M/dir, chdir W, spawn", rc, access("late2", F_OK) ? "(W/late2 missing)" : "(W/late2 made)");
    /* (c) /proc/self/fd/N added while N is /dev/null; N closed and a mount's file opened onto it before the spawn */
    close(open("target", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    for (int side = 0; side < 2; side++) {
        int n = open("/dev/null", O_RDONLY | O_CLOEXEC);
        posix_spawn_file_actions_init(&fa);
        snprintf(q, sizeof q, "/proc/self/fd/%d", n);
        rc = posix_spawn_file_actions_addopen(&fa, 1, q, O_WRONLY | O_TRUNC, 0);
        close(n);
        int n2 = side ? open("target", O_RDONLY | O_CLOEXEC) : open(ma, O_RDONLY | O_CLOEXEC);
        if (!rc && n2 != n)
            rc = EBADFD; /* the number was not reused: the case is not made */
        if (!rc)
            rc = run(&fa, echo, &st);
        posix_spawn_file_actions_destroy(&fa);
        close(n2);
        if (side)
            show("addopen /proc/self/fd/N O_WRONLY|O_TRUNC (N /dev/null), N reused by W/target, echo PWNED", rc,
                 head1("target", b, sizeof b));
        else
            show("addopen /proc/self/fd/N O_WRONLY|O_TRUNC (N /dev/null), N reused by M/a.txt, echo PWNED", rc,
                 head1(ma, b, sizeof b));
    }
    /* a read-only tree's answers to the flags */
    static const struct { const char *name, *path; int fl; } fl[] = {
        {"addopen M/a.txt O_RDONLY|O_CREAT, cat", "a.txt", O_RDONLY | O_CREAT},
        {"addopen M/a.txt O_RDONLY|O_CREAT|O_EXCL", "a.txt", O_RDONLY | O_CREAT | O_EXCL},
        {"addopen M/new.txt O_RDONLY|O_CREAT", "new.txt", O_RDONLY | O_CREAT},
        {"addopen M/a.txt O_WRONLY", "a.txt", O_WRONLY},
        {"addopen M/dir O_WRONLY", "dir", O_WRONLY},
        {"addopen M/dir/deeper/c.txt O_RDONLY|O_TRUNC", "dir/deeper/c.txt", O_RDONLY | O_TRUNC},
    };
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        snprintf(q, sizeof q, "%s/%s", m, fl[i].path);
        posix_spawn_file_actions_init(&fa);
        rc = posix_spawn_file_actions_addopen(&fa, 0, q, fl[i].fl, 0644);
        if (!rc)
            rc = capture(&fa, cat, out, sizeof out);
        posix_spawn_file_actions_destroy(&fa);
        show(fl[i].name, rc, out);
    }
    /* ".." out of a directory the program's view has and P's disk does not, from P */
    if (chdir(par) < 0)
        return 2;
    snprintf(q, sizeof q, "%s/..", anc);
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addopen(&fa, 3, q, O_RDONLY | O_DIRECTORY, 0);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    show("from P: addopen A/.. O_RDONLY", rc, NULL);
    if (chdir(w) < 0)
        return 2;
    /* issue 42 class 2: /proc/self/fd/K where an action before gives the child's K another object than this
     * process's K: the child's decides (here K is /dev/null, there M/a.txt: refused; here M/a.txt, there W/t2:
     * written) */
    for (int side = 0; side < 2; side++) {
        int h = side ? open(ma, O_RDONLY | O_CLOEXEC) : open("/dev/null", O_RDONLY | O_CLOEXEC);
        int fd = open("t2", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        close(fd);
        if (h < 0 || dup2(h, 60) < 0)
            return 2;
        close(h);
        posix_spawn_file_actions_init(&fa);
        rc = posix_spawn_file_actions_addopen(&fa, 60, side ? "t2" : ma, O_RDONLY, 0);
        if (!rc)
            rc = posix_spawn_file_actions_addopen(&fa, 1, "/proc/self/fd/60", O_WRONLY | O_TRUNC, 0);
        if (!rc)
            rc = run(&fa, echo, &st);
        posix_spawn_file_actions_destroy(&fa);
        close(60);
        if (side)
            show("60 M/a.txt here, addopen(60, W/t2), addopen /proc/self/fd/60 O_WRONLY|O_TRUNC, echo PWNED", rc,
                 head1("t2", b, sizeof b));
        else
            show("60 /dev/null here, addopen(60, M/a.txt), addopen /proc/self/fd/60 O_WRONLY|O_TRUNC, echo PWNED", rc,
                 head1(ma, b, sizeof b));
    }
    /* the directory the shim opens for a chdir action is not the child's after its exec: the child's descriptors are
     * those of a child without the chdir action */
    char base[512];
    posix_spawn_file_actions_init(&fa);
    rc = capture(&fa, ls, base, sizeof base);
    posix_spawn_file_actions_destroy(&fa);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int side = 0; side < 3; side++) {
        posix_spawn_file_actions_init(&fa);
        rc = side == 2 ? posix_spawn_file_actions_addfchdir_np(&fa, dfd)
                       : posix_spawn_file_actions_addchdir_np(&fa, side ? dir : w);
        if (!rc)
            rc = capture(&fa, ls, out, sizeof out);
        posix_spawn_file_actions_destroy(&fa);
        show(side == 2 ? "addfchdir_np fd of M/dir, ls /proc/self/fd"
             : side    ? "addchdir_np M/dir, ls /proc/self/fd"
                       : "addchdir_np W, ls /proc/self/fd",
             rc, strcmp(out, base) ? out : "(the descriptors of a child without it)");
    }
    /* the shim's own descriptors for the spawn are the child's until its exec only; a number the program's child
     * would not have (the next free one from 10, which the shim's open for an action naming 9 takes) opens nothing */
    for (int t = 50; t >= 0; t -= 50) { /* 0: the shim's descriptor then takes a number above the pipe's, unmoved */
        posix_spawn_file_actions_init(&fa);
        rc = posix_spawn_file_actions_addopen(&fa, t, ma, O_RDONLY, 0);
        if (!rc)
            rc = capture(&fa, ls, out, sizeof out);
        posix_spawn_file_actions_destroy(&fa);
        printf("addopen(%d, M/a.txt), ls /proc/self/fd: the descriptors of a child without it and: %s %s\n", t,
               ename(rc), extra(out, base, b, sizeof b));
    }
    int next = fcntl(0, F_DUPFD_CLOEXEC, 10);
    close(next);
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addopen(&fa, 9, ma, O_RDONLY, 0);
    snprintf(q, sizeof q, "/proc/self/fd/%d", next);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 7, q, O_RDONLY, 0);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    show("addopen(9, M/a.txt), addopen /proc/self/fd/K (K the next free number from 10) O_RDONLY", rc, NULL);
    /* two open actions onto the next free numbers K+1 then K: the shim's own descriptors for them are above both */
    {
        int pq[2];
        if (pipe2(pq, O_CLOEXEC) < 0)
            return 2;
        int k = fcntl(0, F_DUPFD_CLOEXEC, 3);
        close(k);
        char f1[32], f2[32], c2[4200];
        snprintf(f1, sizeof f1, "/proc/self/fd/%d", k);
        snprintf(f2, sizeof f2, "/proc/self/fd/%d", k + 1);
        snprintf(c2, sizeof c2, "%s/deeper/c.txt", dir);
        char *shv[] = {"/bin/cat", f1, f2, NULL};
        posix_spawn_file_actions_init(&fa);
        rc = posix_spawn_file_actions_adddup2(&fa, pq[1], 1);
        if (!rc)
            rc = posix_spawn_file_actions_addopen(&fa, k + 1, ma, O_RDONLY, 0);
        if (!rc)
            rc = posix_spawn_file_actions_addopen(&fa, k, c2, O_RDONLY, 0);
        pid_t sp;
        if (!rc)
            rc = posix_spawn(&sp, shv[0], &fa, NULL, shv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pq[1]);
        ssize_t g, tot = 0;
        while (tot < (ssize_t)sizeof out - 1 && (g = read(pq[0], out + tot, sizeof out - 1 - (size_t)tot)) > 0)
            tot += g;
        out[tot] = 0;
        for (char *c = out; *c; c++)
            if (*c == '\n')
                *c = *(c + 1) ? ' ' : 0;
        close(pq[0]);
        if (!rc)
            waitpid(sp, &st, 0);
        show("adddup2(pipe, 1), addopen(K+1, M/a.txt), addopen(K, M/dir/deeper/c.txt) (K the next free number), cat both",
             rc, out);
    }
    /* the highest number an action names (a close, a dup2's target) is not one the shim's own descriptors take:
     * L the next free number (after the pipe for the output), adddup2(pipe, 1), addclose(L) or adddup2(0, L), then
     * addopen(2, M/a.txt): the child's cat of its descriptor 2 reads a.txt (issue 42 class 2) */
    for (int side = 0; side < 2; side++) {
        int pq[2];
        if (pipe2(pq, O_CLOEXEC) < 0)
            return 2;
        int l = fcntl(0, F_DUPFD_CLOEXEC, 3);
        close(l);
        char *catv[] = {"/bin/cat", "/proc/self/fd/2", NULL};
        posix_spawn_file_actions_init(&fa);
        rc = posix_spawn_file_actions_adddup2(&fa, pq[1], 1);
        if (!rc)
            rc = side ? posix_spawn_file_actions_adddup2(&fa, 0, l) : posix_spawn_file_actions_addclose(&fa, l);
        if (!rc)
            rc = posix_spawn_file_actions_addopen(&fa, 2, ma, O_RDONLY, 0);
        pid_t sp;
        if (!rc)
            rc = posix_spawn(&sp, catv[0], &fa, NULL, catv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pq[1]);
        ssize_t g, tot = 0;
        while (tot < (ssize_t)sizeof out - 1 && (g = read(pq[0], out + tot, sizeof out - 1 - (size_t)tot)) > 0)
            tot += g;
        out[tot] = 0;
        out[strcspn(out, "\n")] = 0;
        close(pq[0]);
        if (!rc)
            waitpid(sp, &st, 0);
        show(side ? "adddup2(pipe, 1), adddup2(0, L) (L the next free number), addopen(2, M/a.txt), cat 2"
                  : "adddup2(pipe, 1), addclose(L) (L the next free number), addopen(2, M/a.txt), cat 2",
             rc, out);
    }
    /* a descriptor the program's dup2 action puts on the number the shim's own would take: the child still moves
     * where its chdir action leads */
    next = fcntl(0, F_DUPFD_CLOEXEC, 3);
    close(next);
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_adddup2(&fa, dfd, next);
    if (!rc)
        rc = posix_spawn_file_actions_addchdir_np(&fa, w);
    char *pwd[] = {"/bin/pwd", NULL};
    if (!rc)
        rc = capture(&fa, pwd, out, sizeof out);
    posix_spawn_file_actions_destroy(&fa);
    show("adddup2(fd of M/dir, the next free number), addchdir_np W, pwd", rc, strcmp(out, w) ? out : "W");
    close(dfd);
    /* a closefrom action closes the program's descriptors from its number in the child, the shim's own for the
     * actions after it aside: the child of ls has 0 1 2 and its own 3; a /proc/self/fd/K after it is gone */
    int leak = open("/dev/null", O_RDONLY), pp[2];
    if (leak < 0 || pipe2(pp, O_CLOEXEC) < 0)
        return 2;
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_adddup2(&fa, pp[1], 1);
    if (!rc)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    if (!rc)
        rc = posix_spawn_file_actions_addchdir_np(&fa, w);
    pid_t pid;
    if (!rc)
        rc = posix_spawn(&pid, ls[0], &fa, NULL, ls, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pp[1]);
    ssize_t got = read(pp[0], out, sizeof out - 1);
    out[got > 0 ? got : 0] = 0;
    for (char *c = out; *c; c++)
        if (*c == '\n')
            *c = *(c + 1) ? ' ' : 0;
    close(pp[0]);
    if (!rc)
        waitpid(pid, &st, 0);
    show("a descriptor not close-on-exec, adddup2(pipe, 1), addclosefrom_np 3, addchdir_np W, ls /proc/self/fd", rc, out);
    int tg = open("target", O_RDONLY | O_CLOEXEC);
    for (int side = 0; side < 2; side++) {
        posix_spawn_file_actions_init(&fa);
        rc = side ? posix_spawn_file_actions_addopen(&fa, 9, "target", O_RDONLY, 0) : 0;
        if (!rc)
            rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
        snprintf(q, sizeof q, "/proc/self/fd/%d", side ? 9 : tg);
        if (!rc)
            rc = posix_spawn_file_actions_addopen(&fa, 1, q, O_WRONLY, 0);
        if (!rc)
            rc = run(&fa, tv, &st);
        posix_spawn_file_actions_destroy(&fa);
        show(side ? "addopen(9, W/target), addclosefrom_np 3, addopen /proc/self/fd/9 O_WRONLY"
                  : "addclosefrom_np 3, addopen /proc/self/fd/N (N W/target here) O_WRONLY",
             rc, NULL);
    }
    close(tg);
    close(leak);
    /* an add glibc refuses (a negative descriptor) is not in the record either: the actions after it are judged */
    int mfd = open(ma, O_RDONLY | O_CLOEXEC);
    posix_spawn_file_actions_init(&fa);
    int bad = posix_spawn_file_actions_addopen(&fa, -1, "/dev/null", O_RDONLY, 0);
    snprintf(q, sizeof q, "/proc/self/fd/%d", mfd);
    rc = posix_spawn_file_actions_addopen(&fa, 1, q, O_WRONLY | O_TRUNC, 0);
    if (!rc)
        rc = run(&fa, echo, &st);
    posix_spawn_file_actions_destroy(&fa);
    close(mfd);
    printf("addopen(-1): %s, then addopen /proc/self/fd/N (N M/a.txt) O_WRONLY|O_TRUNC, echo PWNED: %s %s\n",
           ename(bad), ename(rc), head1(ma, b, sizeof b));
    /* /proc/thread-self/cwd after a chdir action is the child's directory: from M/dir into W, written; from W into
     * M/dir, refused */
    if (chdir(dir) < 0)
        return 2;
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addchdir_np(&fa, w);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "/proc/thread-self/cwd/ts.txt", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    snprintf(q, sizeof q, "%s/ts.txt", w);
    show("cwd M/dir, addchdir_np W, addopen /proc/thread-self/cwd/ts.txt O_CREAT", rc,
         access(q, F_OK) ? "(W/ts.txt missing)" : "(W/ts.txt made)");
    if (chdir(w) < 0)
        return 2;
    posix_spawn_file_actions_init(&fa);
    rc = posix_spawn_file_actions_addchdir_np(&fa, dir);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 5, "/proc/thread-self/cwd/ts2.txt", O_WRONLY | O_CREAT, 0644);
    if (!rc)
        rc = run(&fa, tv, &st);
    posix_spawn_file_actions_destroy(&fa);
    show("cwd W, addchdir_np M/dir, addopen /proc/thread-self/cwd/ts2.txt O_CREAT", rc,
         access("ts2.txt", F_OK) ? "(W/ts2.txt missing)" : "(W/ts2.txt made)");
    return 0;
}

/* a child in dir started three ways from a cwd outside the mounts; nothing here touches a mount first */
static int cwd(const char *dir)
{
    char *argv[] = {"/bin/pwd", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    printf("posix_spawn addchdir_np: ");
    fflush(stdout);
    int st = 0, rc = run(&fa, argv, &st);
    posix_spawn_file_actions_destroy(&fa);
    if (rc)
        printf("%s\n", ename(rc));
    fflush(stdout);
    for (int v = 0; v < 2; v++) {
        printf("%s + chdir + exec: ", v ? "vfork" : "fork");
        fflush(stdout);
        pid_t pid = v ? vfork() : fork();
        if (pid == 0) {
            if (chdir(dir) < 0) {
                const char *e = strerrorname_np(errno);
                (void)!write(1, e, strlen(e));
                (void)!write(1, "\n", 1);
                _exit(1);
            }
            execv(argv[0], argv);
            _exit(127);
        }
        waitpid(pid, &st, 0);
    }
    return 0;
}

/* 1100 live file-action objects, each with a chdir action to w, under a descriptor limit of 1024: the program's own
 * open() still works (the shim holds a bounded number of descriptors for them), and a child still starts in w */
static int many(const char *w)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max < 1024 ? rl.rlim_max : 1024;
    setrlimit(RLIMIT_NOFILE, &rl);
    enum { N = 1100 };
    static posix_spawn_file_actions_t fa[N];
    int fails = 0, st = 0;
    for (int i = 0; i < N; i++) {
        posix_spawn_file_actions_init(&fa[i]);
        fails += posix_spawn_file_actions_addchdir_np(&fa[i], w) != 0;
    }
    int fd = open("/dev/null", O_RDONLY);
    printf("%d live objects with a chdir action (%d adds failed): open: %s\n", N, fails, fd >= 0 ? "ok" : ename(errno));
    char *argv[] = {"/bin/pwd", NULL};
    fflush(stdout);
    int rc = run(&fa[N - 1], argv, &st);
    printf("the last one's child: %s %d\n", ename(rc), st);
    for (int i = 0; i < N; i++)
        posix_spawn_file_actions_destroy(&fa[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "guard"))
        return guard(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "many"))
        return many(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "cwd"))
        return cwd(argv[2]);
    if (argc == 6 && !strcmp(argv[1], "late"))
        return late(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: spawnw guard M W | spawnw cwd DIR\n");
    return 2;
}
