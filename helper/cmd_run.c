/* cmd_run.c - `hfs3-manifest run [--mount LOCAL=REMOTE]... [--] PROGRAM [ARGS...]`: execs PROGRAM with the
 * shim preloaded by its absolute path and HFS3_MOUNTS set, so that neither ldconfig nor a hand-written
 * LD_PRELOAD is needed and a container entrypoint is one line. The shim is found beside this helper
 * (../lib/libhfs3shim.so from /proc/self/exe: the installed layout and the build tree alike), else in the
 * compiled-in $(PREFIX)/lib. HFS3_HELPER is set to this helper when unset, so the shim runs the same one. */
#include "cmds.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hfs3/cache.h"
#include "hfs3/config.h"
#include "hfs3/explain.h"
#include "hfs3/index.h"
#include "hfs3/util.h"

#ifndef HFS3_PREFIX
#define HFS3_PREFIX "/usr/local"
#endif
#define SHIM_NAME "libhfs3shim.so"

int run_watch(pid_t pid);   /* run_watch.c: waits for the program, drawing its loads; its exit status */

static void run_err(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "hfs3-manifest run: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

/* The shim's absolute path into out: 0, or -ENOENT naming where it looked. */
static int find_shim(char *out, size_t n, const char *self)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        snprintf(out, n, "%s/../lib/%s", dir, SHIM_NAME);
        char real[PATH_MAX];
        if (realpath(out, real) && access(real, R_OK) == 0) {
            snprintf(out, n, "%s", real);
            return 0;
        }
    }
    snprintf(out, n, "%s/lib/%s", HFS3_PREFIX, SHIM_NAME);
    if (access(out, R_OK) == 0)
        return 0;
    return hfs3_err(-ENOENT, "%s not found in %s/../lib or %s/lib (make install, or keep the helper beside it)",
                    SHIM_NAME, dir, HFS3_PREFIX);
}

/* LD_PRELOAD with the shim appended (separated by a space, as ld.so reads it), unless it is already there. */
static char *preload_with(const char *shim)
{
    const char *old = getenv("LD_PRELOAD");
    hfs3_buf b;
    hfs3_buf_init(&b, 1 << 20);
    if (old && *old) {
        char *copy = hfs3_strdup(old), *save = NULL;
        int have = 0;
        for (char *t = copy ? strtok_r(copy, " :", &save) : NULL; t; t = strtok_r(NULL, " :", &save))
            have |= !strcmp(t, shim);
        free(copy);
        if (have)
            return hfs3_strdup(old);
        if (hfs3_buf_adds(&b, old) < 0 || hfs3_buf_addc(&b, ' ') < 0)
            return NULL;
    }
    if (hfs3_buf_adds(&b, shim) < 0)
        return NULL;
    return hfs3_buf_take(&b, NULL);
}

/* 1 when the cache holds a manifest or a hub's list for spec (mounts/KEY/index or repos), as the shim reads
 * them: the shim then serves the mount without resolving the remote. A probe: it leaves the thread's error
 * message as it found it, since the caller's message (why the remote did not resolve) is the one to print. */
static int cached_mount(const char *spec)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", hfs3_errmsg());
    /* the default cache, or its fallback when the default cannot be used (hfs3_cache_open's rule) */
    const char *set = getenv("HFS3_CACHE_DIR");
    char *dirs[2] = {hfs3_cache_dir_from_env(), set && *set ? NULL : hfs3_cache_dir_fallback()};
    char key[17], path[PATH_MAX];
    hfs3_mountkey(spec, key);
    int found = 0;
    const char *names[] = {"index", "repos"};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 2 && !found && dirs[d]; i++)
            found = (size_t)snprintf(path, sizeof path, "%s/mounts/%s/%s", dirs[d], key, names[i]) < sizeof path &&
                    access(path, R_OK) == 0;
    free(dirs[0]);
    free(dirs[1]);
    hfs3_err(0, "%s", why);
    return found;
}

int cmd_run(int argc, char **argv)
{
    hfs3_buf mounts;
    hfs3_buf_init(&mounts, 1 << 20);
    const char *env = getenv("HFS3_MOUNTS");
    if (env && *env && hfs3_buf_adds(&mounts, env) < 0)
        goto oom;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cmd_help("run");
            hfs3_buf_free(&mounts);
            return 0;
        }
        if (!strcmp(a, "--mount") || !strcmp(a, "-m")) {
            if (i + 1 >= argc) {
                run_err("%s needs LOCAL=REMOTE%s", a, "");
                goto usage;
            }
            val = argv[++i];
        } else if (!strncmp(a, "--mount=", 8)) {
            val = a + 8;
        } else if (a[0] == '-') {
            run_err("unknown option '%s'%s", a, "");
            goto usage;
        } else {
            break;
        }
        const char *eq = strchr(val, '=');
        if (!eq || val[0] != '/' || strchr(val, ';') || !eq[1]) {
            run_err("--mount '%s': want LOCAL=REMOTE, LOCAL an absolute path%s", val, "");
            goto usage;
        }
        hfs3_remote *r = NULL;
        int namelen;
        if (hfs3_remote_connstr(eq + 1, &namelen)) {
            /* its secrets must not reach the shim's environment or any message: refused as the shim would */
            hfs3_err(-EINVAL, HFS3_CONNSTR_MSG, namelen, eq + 1);
            run_err("--mount: %s%s", hfs3_errmsg(), "");
            hfs3_buf_free(&mounts);
            return 2;
        }
        if (hfs3_remote_parse(eq + 1, &r) < 0 && !cached_mount(eq + 1)) {
            /* a remote that cannot be resolved here is fine when the cache serves it (a server without the
             * remote's variables, fed by an init container): the shim alone needs no more */
            run_err("--mount '%s': %s (and no manifest of it is cached here)", val, hfs3_errmsg());
            hfs3_buf_free(&mounts);
            return 2;
        }
        hfs3_remote_free(r);
        if ((mounts.len && hfs3_buf_addc(&mounts, ';') < 0) || hfs3_buf_adds(&mounts, val) < 0)
            goto oom;
    }
    if (i >= argc) {
        run_err("no PROGRAM to run%s%s", "", "");
        goto usage;
    }
    if (!mounts.len) {
        run_err("no mounts: give --mount LOCAL=REMOTE or set HFS3_MOUNTS%s%s", "", "");
        goto usage;
    }
    char self[PATH_MAX], shim[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    if (find_shim(shim, sizeof shim, self) < 0) {
        run_err("%s%s", hfs3_errmsg(), "");
        hfs3_buf_free(&mounts);
        return 1;
    }
    char *pre = preload_with(shim);
    if (!pre)
        goto oom;
    /* on a terminal, the program runs as a child and this process draws its cold loads (run_watch.c); the
     * program's shim then draws nothing (HFS3_PROGRESS=0). Elsewhere the program takes this process's place. */
    int watch = isatty(2) == 1 && hfs3_env_bool("HFS3_PROGRESS", 1);
    int e = setenv("LD_PRELOAD", pre, 1) || setenv("HFS3_MOUNTS", hfs3_buf_str(&mounts), 1) ||
            (n > 0 && setenv("HFS3_HELPER", self, 0)) || (watch && setenv("HFS3_PROGRESS", "0", 1));
    free(pre);
    hfs3_buf_free(&mounts);
    if (e)
        goto oom;
    fflush(NULL);
    pid_t pid = watch ? fork() : -1;
    if (pid > 0)
        return run_watch(pid);
    if (watch && pid < 0)
        setenv("HFS3_PROGRESS", "1", 1);   /* no child to watch: the program's shim draws on the terminal */
    execvp(argv[i], argv + i);
    e = errno;
    fprintf(stderr, "hfs3-manifest run: %s: %s\n", argv[i], strerror(e));
    if (pid == 0)
        _exit(e == ENOENT ? 127 : 126);
    return e == ENOENT ? 127 : 126; /* as env(1) and the shells do */
usage:
    hfs3_buf_free(&mounts);
    cmd_usage("run");
    return 2;
oom:
    hfs3_buf_free(&mounts);
    fprintf(stderr, "hfs3-manifest run: out of memory\n");
    return 1;
}
