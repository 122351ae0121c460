/* cache.c - the local cache directory: resolution from the environment, the checks of its path and of the
 * directory itself (OpenSSH StrictModes is the model), opening it and its subdirectories as descriptors,
 * and the refresh of a mount's manifest + index (`_index`). How files inside are opened and created is
 * cachefs.c's; fetching blobs fetch.c's; the index format index.c's; HTTP s3.c's. */
#include "hfs3/cache.h"
#include "hfs3/ownkey.h"
#include "hfs3/hub.h"
#include "hfs3/gc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/explain.h"
#include "hfs3/index.h"
#include "hfs3/log.h"
#include "hfs3/s3.h"
#include "hfs3/util.h"

static const char *const cache_subdirs[] = {"blobs", "tmp", "locks", "fails", "mounts", "unflushed"};

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static char *join2(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

char *hfs3_cache_dir_from_env(void)
{
    const char *v;
    char *s;
    if ((v = env_nonempty("HFS3_CACHE_DIR")))
        s = hfs3_strdup(v);
    else if ((v = env_nonempty("XDG_CACHE_HOME")) && v[0] == '/') /* relative: ignored, as the XDG spec and the shim */
        s = join2(v, "hfs3");
    else if ((v = env_nonempty("HOME")))
        s = join2(v, ".cache/hfs3");
    else {
        hfs3_err(-ENOENT, "cache: none of HFS3_CACHE_DIR, XDG_CACHE_HOME, HOME is set");
        return NULL;
    }
    if (!s) {
        hfs3_err(-ENOMEM, "out of memory");
        return NULL;
    }
    /* trailing slashes would double up in every path we build */
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/')
        s[--n] = 0;
    return s;
}

/* Whether path (or, path NULL, the directory fd) is the root of a mount: a volume a container runtime
 * mounted (a kubelet emptyDir or hostPath), not just a directory of the file system it is on. */
static int mount_root(const char *path, int fd)
{
    struct statx stx;
    if (statx(path ? AT_FDCWD : fd, path ? path : "", path ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH,
              STATX_BASIC_STATS, &stx) < 0)
        return 0;
    return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* A directory on the way to the cache: someone who can rename entries in it (a writable directory
 * without the sticky bit, or its owner) decides what the path leads to, so it must be the user's or
 * root's, and not writable by others unless sticky (/tmp is fine).
 * One exception, for Kubernetes: kubelet mounts emptyDir volumes mode 0777 (2777 with an fsGroup), and
 * nobody can chmod them from inside the pod. Such a volume is accepted as the cache's immediate parent
 * (volume_parent: comp holds the cache directory itself) when it is the root of a mount and belongs to
 * root or to this user: whoever can write into it is a process of the same pod, which is one trust domain,
 * and what they could do there (rename the cache away and plant another) is caught by the owner and mode
 * checks of the cache directory, which is then opened and used through a descriptor only. */
static int check_on_path(const char *dir, const char *comp, const struct stat *st, uid_t me, int volume_parent)
{
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX) &&
        !(volume_parent == 1 && (st->st_uid == 0 || st->st_uid == me)))
        return hfs3_err(-EPERM, "cache directory %s is reached through %s, writable by others without the sticky "
                        "bit (mode %04o)%s; refusing (chmod o-w or +t %s, or choose another HFS3_CACHE_DIR)", dir,
                        comp, (unsigned)(st->st_mode & 07777),
                        volume_parent == 0 ? ", which is not the root of a mounted volume either" : "", comp);
    if (st->st_uid != me && st->st_uid != 0)
        return hfs3_err(-EPERM, "cache directory %s is reached through %s, owned by uid %u (not you or root), "
                        "who could replace what is below it; refusing (choose another HFS3_CACHE_DIR)", dir, comp,
                        (unsigned)st->st_uid);
    return 0;
}

int hfs3_cache_check_dir(const char *dir, int *shared)
{
    char buf[4200];
    size_t n = strlen(dir);
    if (n == 0)
        return hfs3_err(-EINVAL, "cache: empty cache directory name");
    if (n >= sizeof buf)
        return hfs3_err(-ENAMETOOLONG, "cache directory %s: path too long", dir);
    memcpy(buf, dir, n + 1);
    uid_t me = geteuid();
    /* Each existing component: a symlink there decides where everything below goes, so only the user or
     * root may own one; a directory holding the next component must be safe as check_on_path says.
     * Components past the first missing one do not exist yet. */
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != 0)
            continue;
        char c = *p;
        *p = 0;
        struct stat st;
        if (lstat(buf, &st) < 0) {
            if (errno == ENOENT)
                break;
            return hfs3_err(-errno, "cache directory %s: %s: %s", dir, buf, strerror(errno));
        }
        if (S_ISLNK(st.st_mode) && st.st_uid != me && st.st_uid != 0)
            return hfs3_err(-EPERM, "cache directory %s is reached through symlink %s owned by uid %u; refusing",
                            dir, buf, (unsigned)st.st_uid);
        if (c && S_ISLNK(st.st_mode) && stat(buf, &st) < 0)
            break;
        int rc, vp = -1;
        if (c && S_ISDIR(st.st_mode) && !strchr(p + 1, '/')) /* buf holds the cache directory itself */
            vp = mount_root(buf, -1);
        if (c && S_ISDIR(st.st_mode) && (rc = check_on_path(dir, buf, &st, me, vp)) < 0)
            return rc;
        *p = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(dir, &st) < 0) {
        if (errno == ENOENT) {
            if (shared)
                *shared = 0;
            return 0;
        }
        return hfs3_err(-errno, "cache directory %s: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return hfs3_err(-ENOTDIR, "cache directory %s is not a directory", dir);
    if (st.st_mode & S_IWOTH)
        return hfs3_err(-EPERM, "cache directory %s is writable by others (mode %04o)%s; refusing (%s)", dir,
                        (unsigned)(st.st_mode & 07777), mount_root(dir, -1) ? ", a volume as kubelet mounts an "
                        "emptyDir" : "", mount_root(dir, -1) ? "set HFS3_CACHE_DIR to a folder inside it, e.g. "
                        "DIR/hfs3, which hfs3 then creates itself" : "chmod o-w it, or set HFS3_CACHE_DIR to a new "
                        "folder, which hfs3 creates itself");
    if (shared)
        *shared = (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
    return 0;
}

/* A private cache directory (no setgid + group write) of another user. */
static int refuse_not_yours(const char *dir, uid_t owner, uid_t me)
{
    return hfs3_err(-EPERM, "cache directory %s belongs to uid %u, not to you (uid %u): a private cache must be "
                    "yours; refusing (use a cache of your own, e.g. another HFS3_CACHE_DIR; or share one: install -d "
                    "-m 3770 -g GROUP DIR, or on Kubernetes give the pod an fsGroup, or run the init container as "
                    "uid %u)", dir, (unsigned)owner, (unsigned)me, (unsigned)me);
}

/* Opens the real path of dir one component at a time from "/", O_DIRECTORY | O_NOFOLLOW, each directory on
 * the way checked by check_on_path: what the returned descriptor names is what was checked, whatever
 * happens to the path later. */
static int walk_open(const char *dir, uid_t me)
{
    char *real = realpath(dir, NULL);
    if (!real)
        return hfs3_err(-errno, "cache directory %s: %s", dir, strerror(errno));
    int rc = 0, fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rc = hfs3_err(-errno, "cache directory %s: /: %s", dir, strerror(errno));
        goto out;
    }
    char walked[4200] = "";
    size_t wl = 0;
    char *save = NULL;
    for (char *comp = strtok_r(real + 1, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
        struct stat st;
        if (fstat(fd, &st) < 0) {
            rc = hfs3_err(-errno, "cache directory %s: %s", dir, strerror(errno));
            goto out;
        }
        int vp = -1;
        if (!*save) /* fd holds the cache directory itself */
            vp = mount_root(NULL, fd);
        if ((rc = check_on_path(dir, wl ? walked : "/", &st, me, vp)) < 0)
            goto out;
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat cst;
        if (next < 0 && errno == EACCES && fstatat(fd, comp, &cst, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(cst.st_mode)) {
            /* not ours to enter: say whose it is and what to do rather than "Permission denied" */
            if (!*save && !((cst.st_mode & S_ISGID) && (cst.st_mode & S_IWGRP)))
                rc = refuse_not_yours(dir, cst.st_uid, me);
            else
                rc = hfs3_err(-EPERM, "cache directory %s: %s/%s (owner uid %u, group %u, mode %04o) cannot be "
                              "entered by uid %u; refusing (a shared cache needs you in its group: check the "
                              "server's groups, e.g. the pod's fsGroup)", dir, walked, comp, (unsigned)cst.st_uid,
                              (unsigned)cst.st_gid, (unsigned)(cst.st_mode & 07777), (unsigned)me);
            goto out;
        }
        if (next < 0) {
            rc = hfs3_err(-errno, "cache directory %s: %s/%s changed while it was checked (%s); refusing", dir,
                          walked, comp, strerror(errno));
            goto out;
        }
        close(fd);
        fd = next;
        int k = snprintf(walked + wl, sizeof walked - wl, "/%s", comp);
        if (k > 0 && (size_t)k < sizeof walked - wl)
            wl += (size_t)k;
    }
out:
    free(real);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    return fd;
}

/* The rules of the cache directory itself (its descriptor fd): sets c->shared, c->gid and the modes. */
static int check_top(hfs3_cache *c, int fd, int created)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return hfs3_err(-errno, "cache directory %s: %s", c->dir, strerror(errno));
    /* a new cache inside a setgid, group-writable directory (a volume with a pod's fsGroup) is shared with
     * that group, which mkdir gave it: 3770, so that an init container and the server (another uid of the
     * group) both use it; anywhere else it is private */
    mode_t want = created == 2 && st.st_gid == c->parent_gid ? 03770 : 0700;
    if (created && st.st_uid == c->uid && (st.st_mode & 07777) != want) {
        if (fchmod(fd, want) < 0 || fstat(fd, &st) < 0)
            return hfs3_err(-errno, "chmod %s: %s", c->dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return hfs3_err(-ENOTDIR, "cache directory %s is not a directory", c->dir);
    if (st.st_mode & S_IWOTH)
        return hfs3_err(-EPERM, "cache directory %s is writable by others (mode %04o); refusing (chmod o-w %s)",
                        c->dir, (unsigned)(st.st_mode & 07777), c->dir);
    c->shared = (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP);
    c->gid = st.st_gid;
    c->dir_mode = c->shared ? 03770 : 0700;
    c->file_mode = c->shared ? 0660 : 0600;
    c->entry_mode = c->shared ? 0640 : 0600;
    c->blob_mode = c->shared ? 0440 : 0444;
    if (c->shared && st.st_uid != c->uid && st.st_uid != 0)
        return hfs3_err(-EPERM, "cache directory %s is shared (setgid, group-writable) but belongs to uid %u, not to "
                        "you or root; refusing (its owner could replace anything in it)", c->dir,
                        (unsigned)st.st_uid);
    if (!c->shared && st.st_uid != c->uid)
        return refuse_not_yours(c->dir, st.st_uid, c->uid);
    if (!c->shared && (st.st_mode & S_IWGRP))
        return hfs3_err(-EPERM, "cache directory %s is group-writable without setgid (mode %04o), neither private "
                        "nor shared; refusing (chmod 700 %s, or chmod 3770 %s to share it with its group)", c->dir,
                        (unsigned)(st.st_mode & 07777), c->dir, c->dir);
    return hfs3_cache_check_subdir(c, fd, &st, 1, c->dir);
}

void hfs3_cache_free(hfs3_cache *c)
{
    if (!c)
        return;
    int fds[] = {c->fd, c->blobs, c->tmp, c->locks, c->fails, c->mounts, c->unflushed};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(c->p_blobs);
    free(c->p_tmp);
    free(c->p_locks);
    free(c->p_fails);
    free(c->p_mounts);
    free(c->p_unflushed);
    free(c->dir);
    free(c);
}

/* Opens (creating) the six subdirectories. */
static int open_subdirs(hfs3_cache *c)
{
    int *fds[] = {&c->blobs, &c->tmp, &c->locks, &c->fails, &c->mounts, &c->unflushed};
    char **paths[] = {&c->p_blobs, &c->p_tmp, &c->p_locks, &c->p_fails, &c->p_mounts, &c->p_unflushed};
    for (size_t i = 0; i < sizeof cache_subdirs / sizeof cache_subdirs[0]; i++) {
        if (!(*paths[i] = join2(c->dir, cache_subdirs[i])))
            return hfs3_err(-ENOMEM, "out of memory");
        int fd = hfs3_cache_opendir(c, c->fd, cache_subdirs[i], c->dir_mode, 1, c->dir);
        if (fd < 0)
            return fd;
        *fds[i] = fd;
    }
    return 0;
}

char *hfs3_cache_dir_fallback(void)
{
    const char *t = env_nonempty("TMPDIR");
    char *s = join2(t && t[0] == '/' ? t : "/var/tmp", "hfs3-");
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (!s || hfs3_buf_addf(&b, "%s%u", s, (unsigned)geteuid()) < 0) {
        free(s);
        hfs3_err(-ENOMEM, "out of memory");
        return NULL;
    }
    free(s);
    s = hfs3_buf_take(&b, NULL);
    size_t n = s ? strlen(s) : 0;
    while (n > 1 && s[n - 1] == '/')
        s[--n] = 0;
    return s;
}

static int cache_open_dir(const char *dir, hfs3_cache **out);

/* The default cache (no HFS3_CACHE_DIR) that cannot be used (a HOME that is not writable: uid 1000 with HOME=/
 * in a container) falls back to hfs3_cache_dir_fallback, as the shim does (shim/cachedir.c): the same rule on
 * both sides, so that `fetch` warms the cache the server reads. The fallback is used only when it is a
 * directory of this user that nobody else can enter (made 0700 here when missing; never chmod-ed). An
 * HFS3_CACHE_DIR that cannot be used is an error: the user asked for that one. */
int hfs3_cache_open(const char *dir, hfs3_cache **out)
{
    if (dir || env_nonempty("HFS3_CACHE_DIR"))
        return cache_open_dir(dir, out);
    char *def = hfs3_cache_dir_from_env(), why[1400];
    int rc = def ? cache_open_dir(def, out) : -ENOENT;
    if (rc == 0 || rc == -ENOMEM) {
        free(def);
        return rc;
    }
    snprintf(why, sizeof why, "%s", hfs3_errmsg());
    char *fb = hfs3_cache_dir_fallback();
    struct stat st;
    int frc = fb ? 0 : -ENOMEM;
    if (frc == 0 && mkdir(fb, 0700) < 0 && errno != EEXIST)
        frc = hfs3_err(-errno, "mkdir %s: %s", fb, strerror(errno));
    if (frc == 0 && lstat(fb, &st) < 0)
        frc = hfs3_err(-errno, "%s: %s", fb, strerror(errno));
    if (frc == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)))
        frc = hfs3_err(-EPERM, "%s is not a directory of yours that only you can enter", fb);
    if (frc == 0)
        frc = cache_open_dir(fb, out);
    if (frc == 0)
        hfs3_warn("%s; using %s (set HFS3_CACHE_DIR to choose)", why, fb);
    else
        hfs3_err(rc, "%s; and the fallback %s cannot be used either (%s)", why, fb ? fb : "hfs3-UID",
                 hfs3_errmsg());
    free(def);
    free(fb);
    return frc == 0 ? 0 : rc;
}

static int cache_open_dir(const char *dir, hfs3_cache **out)
{
    int rc;
    hfs3_cache *c = calloc(1, sizeof *c);
    if (!c)
        return hfs3_err(-ENOMEM, "out of memory");
    c->fd = c->blobs = c->tmp = c->locks = c->fails = c->mounts = c->unflushed = -1;
    c->uid = geteuid();
    c->verify_foreign = hfs3_env_bool("HFS3_VERIFY_FOREIGN", 0);
    c->dir = dir ? hfs3_strdup(dir) : hfs3_cache_dir_from_env();
    if (!c->dir) {
        rc = dir ? hfs3_err(-ENOMEM, "out of memory") : -ENOENT;
        goto fail;
    }
    if ((rc = hfs3_cache_check_dir(c->dir, NULL)) < 0)
        goto fail;
    int created = 0;
    struct stat st;
    if (lstat(c->dir, &st) < 0 && errno == ENOENT) {
        /* a new cache: its parents as mkdir -p makes them, then checked like any others; shared when its
         * parent is setgid and group-writable (check_top) */
        char *parent = hfs3_strdup(c->dir), *slash = parent ? strrchr(parent, '/') : NULL;
        struct stat pst;
        if (slash)
            *(slash == parent ? slash + 1 : slash) = 0;
        created = 1;
        if (slash && stat(parent, &pst) == 0 && S_ISDIR(pst.st_mode) && (pst.st_mode & S_ISGID) &&
            (pst.st_mode & S_IRWXG) == S_IRWXG) {
            created = 2;
            c->parent_gid = pst.st_gid;
        }
        free(parent);
        if ((rc = hfs3_mkdirs(c->dir, 0700)) < 0) {
            hfs3_err_wrap(rc, "cache directory %s cannot be created (set HFS3_CACHE_DIR to a directory you can "
                          "create, or create it: install -d -m 700 DIR)", c->dir);
            goto fail;
        }
        if ((rc = hfs3_cache_check_dir(c->dir, NULL)) < 0)
            goto fail;
    }
    if ((rc = c->fd = walk_open(c->dir, c->uid)) < 0)
        goto fail;
    if ((rc = check_top(c, c->fd, created)) < 0 || (rc = open_subdirs(c)) < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    hfs3_cache_free(c);
    return rc;
}

char *hfs3_cache_path(const hfs3_cache *c, const char *sub, const char *name, const char *suffix)
{
    hfs3_buf b;
    hfs3_buf_init(&b, 0);
    if (hfs3_buf_adds(&b, c->dir) < 0)
        return NULL;
    if (sub && *sub && hfs3_buf_addf(&b, "/%s", sub) < 0)
        return NULL;
    if (name && *name && hfs3_buf_addf(&b, "/%s", name) < 0)
        return NULL;
    if (suffix && *suffix && hfs3_buf_adds(&b, suffix) < 0)
        return NULL;
    return hfs3_buf_take(&b, NULL);
}

int hfs3_cache_mount_key(const hfs3_cache *c, const char *spec, int create, char key[17])
{
    if (!(c->verify_foreign && c->shared)) {
        hfs3_mountkey_as(spec, c->verify_foreign, (unsigned)c->uid, key);
        return 0;
    }
    /* the predictable name while it is free or this user's; else one of this user's own that no member could
     * take first (include/hfs3/ownkey.h, the shim's rule too) */
    char buf[8192];
    int rc = hfs3_ownkey(c->mounts, spec, (unsigned)c->uid, create, 03770, buf, sizeof buf, key);
    if (rc == 1)
        hfs3_debug("cache: the usual mount directory for %s is another user's: using your own %s/%s", spec,
                   c->p_mounts, key);
    if (rc == -ENOENT)
        return hfs3_err(rc, "cache: %s: no mount directory of yours for %s (another user holds its usual name)",
                        c->p_mounts, spec);
    if (rc < 0)
        return hfs3_err(rc, "cache: %s: no mount directory of yours can be made for %s (another user holds its "
                        "usual name): %s; ask root to remove that user's directory", c->p_mounts, spec,
                        strerror(-rc));
    return 0;
}

int hfs3_cache_mount_dir(const hfs3_cache *c, const char *spec, int create, char **path)
{
    char key[17];
    int krc = hfs3_cache_mount_key(c, spec, create, key);
    if (krc < 0)
        return krc;
    /* not sticky: every member's refresh replaces index, manifest.json and etag in it; under
     * HFS3_VERIFY_FOREIGN=1 the user's own directory (hfs3_mountkey_as), sticky, and only while it is the user's */
    int own = c->verify_foreign && c->shared;
    int fd = hfs3_cache_opendir(c, c->mounts, key, create ? (c->shared ? (own ? 03770 : 02770) : 0700) : 0, own,
                                c->p_mounts);
    if (fd < 0)
        return fd;
    struct stat st;
    if (own && (fstat(fd, &st) < 0 || st.st_uid != c->uid)) {
        close(fd);
        return hfs3_err(-EPERM, "cache: %s/%s (for %s) belongs to uid %u, not to you: under HFS3_VERIFY_FOREIGN=1 a "
                        "mount's directory must be your own; refusing (ask its owner or root to remove it)",
                        c->p_mounts, key, spec, (unsigned)st.st_uid);
    }
    /* the owner of a sticky directory may still rename anything in it: a member who made mounts/ could swap two
     * of this user's mount directories */
    if (own && (fstat(c->mounts, &st) < 0 || (st.st_uid != c->uid && st.st_uid != 0))) {
        close(fd);
        return hfs3_err(-EPERM, "cache: %s belongs to uid %u, who could swap the mount directories in it: under "
                        "HFS3_VERIFY_FOREIGN=1 it must be yours or root's; refusing (ask root to chown it, or let "
                        "the cache's owner create its subdirectories first)", c->p_mounts, (unsigned)st.st_uid);
    }
    int moved = own ? hfs3_ownkey_aside(fd, (unsigned)c->uid) : 0;
    if (moved > 0)   /* a member's names in a directory of this user's own (include/hfs3/ownkey.h) */
        hfs3_warn("cache: %s/%s (for %s): %d entr%s of another user's moved out of the way (HFS3_VERIFY_FOREIGN=1)",
                  c->p_mounts, key, spec, moved, moved == 1 ? "y" : "ies");
    if (path && !(*path = hfs3_cache_path(c, "mounts", key, NULL))) {
        close(fd);
        return hfs3_err(-ENOMEM, "out of memory");
    }
    return fd;
}

void hfs3_mount_set_error(const hfs3_cache *c, const char *spec, const char *msg)
{
    char *d = NULL;
    int fd = hfs3_cache_mount_dir(c, spec, 1, &d);
    if (fd < 0)
        return;
    hfs3_cache_write_line(c, fd, "error", d, msg);
    close(fd);
    free(d);
}

/* Someone other than this user (and root) could have written it: HFS3_VERIFY_FOREIGN=1 does not take it on
 * trust. Another user's file; or one its group or others can write (0660: any member could have rewritten it in
 * place, whoever owns it); or one with a second name (a file of this user's linked in from elsewhere). The
 * directory it sits in is the caller's part: under HFS3_VERIFY_FOREIGN=1 a mount directory is the user's own
 * and sticky (hfs3_cache_mount_dir, own_dir), so nobody else can rename another file over it. */
static int foreign(const hfs3_cache *c, const struct stat *st)
{
    return (st->st_uid != c->uid && st->st_uid != 0) || (st->st_mode & (S_IWGRP | S_IWOTH)) || st->st_nlink != 1;
}

/* A mount directory (descriptor fd) whose files nobody but this user (and root) can replace: the user's own or
 * root's (a root init container's, prewarmed with HFS3_VERIFY_FOREIGN=1), and sticky or private. */
static int own_dir(const hfs3_cache *c, int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && (st.st_uid == c->uid || st.st_uid == 0) &&
           (!c->shared || (st.st_mode & S_ISVTX)) && !(st.st_mode & S_IWOTH);
}

int hfs3_mount_load(const hfs3_cache *c, const char *spec, hfs3_manifest **out)
{
    char *mdir = NULL, *doc = NULL;
    size_t n = 0;
    struct stat st;
    int rc, fd = hfs3_cache_mount_dir(c, spec, 0, &mdir);
    if (fd < 0) {
        if (fd == -ENOENT)
            hfs3_err(fd, "%s: no cached manifest (%s/mounts/... does not exist)", spec, c->dir);
        return fd;
    }
    rc = hfs3_cache_read(c, fd, "manifest.json", HFS3_MAX_DOC, &doc, &n, &st, mdir);
    if (rc == -ENOENT)
        hfs3_err(rc, "%s: no cached manifest (%s/manifest.json)", spec, mdir);
    if (rc == 0 && c->verify_foreign && (foreign(c, &st) || !own_dir(c, fd)))
        rc = hfs3_err(-EACCES, "%s: the cached %s/manifest.json could have been written by another user (owner uid "
                      "%u, mode %04o, %lu %s), and HFS3_VERIFY_FOREIGN=1 asks for one of your own", spec, mdir,
                      (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned long)st.st_nlink,
                      hfs3_plural(st.st_nlink, "link", "links"));
    if (rc == 0 && (rc = hfs3_manifest_parse(doc, n, out)) < 0)
        hfs3_err_wrap(rc, "%s: cached %s/manifest.json", spec, mdir);
    close(fd);
    free(doc);
    free(mdir);
    return rc;
}

static int ts_ge(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec >= b->tv_nsec);
}

/* The manifest of r is missing (404): a hub prefix (include/hfs3/hub.h) has repository folders instead. 1 when
 * it is one (its list installed as mfd's "repos"), 0 when not (the 404's message kept), or an error. */
static int hub_detect(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir)
{
    char *why = hfs3_strdup(hfs3_errmsg());
    char **names = NULL;
    size_t n = 0;
    int has_manifest = 0;
    int rc = hfs3_hub_list(r, &names, &n, &has_manifest);
    if (rc == 0 && n > 0 && !has_manifest) {
        rc = hfs3_hub_install(c, mfd, mdir, names, n);
        if (rc == 0) {
            hfs3_debug("%s: a hub of %zu %s", r->spec, n, hfs3_plural(n, "repository", "repositories"));
            rc = 1;
        }
    } else {
        /* not a hub (or the listing failed): the missing manifest is what to report */
        hfs3_err(-ENOENT, "%s", why ? why : "no manifest");
        rc = 0;
    }
    hfs3_hub_names_free(names, n);
    free(why);
    return rc;
}

/* The network half of a refresh: GET (If-None-Match when use_cached) and install into the mount directory
 * mfd (path mdir). 0, or an error with its message. */
static int refresh_fetch(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir, int use_cached)
{
    int rc;
    hfs3_s3 *s3 = NULL;
    hfs3_manifest *m = NULL;
    char *etag = NULL;
    hfs3_buf doc;
    hfs3_buf_init(&doc, HFS3_MAX_DOC);
    hfs3_s3_get g = {0};
    char *key = hfs3_remote_manifest_key(r);
    if (!key) {
        rc = hfs3_err(-ENOMEM, "out of memory");
        goto out;
    }
    if (use_cached) {
        size_t n;
        struct stat est;
        if (hfs3_cache_read(c, mfd, "etag", 4096, &etag, &n, &est, mdir) == 0 && c->verify_foreign &&
            foreign(c, &est)) {
            free(etag); /* not this user's: no If-None-Match, the whole manifest */
            etag = NULL;
        }
        if (etag) {
            while (n && (etag[n - 1] == '\n' || etag[n - 1] == '\r'))
                etag[--n] = 0;
            if (n)
                g.if_none_match = etag;
        }
    }
    if ((rc = hfs3_s3_new(r, NULL, &s3)) < 0)
        goto wrap;
    if ((rc = hfs3_s3_get_buf(s3, key, HFS3_MAX_DOC, &doc, &g)) < 0) {
        int hub = rc == -ENOENT ? hub_detect(c, r, mfd, mdir) : 0;
        if (hub == 1)
            rc = 0;
        if (hub)
            goto out;
        goto wrap;
    }
    if (g.not_modified) {
        /* Not modified: reinstall the index from the cached document rather than just touching it. That
         * heals an index damaged on disk (the shim refuses an invalid one, and would otherwise keep failing
         * until the manifest changes), and in a shared cache it works when another user owns the index. */
        char *text = NULL;
        size_t n = 0;
        struct stat mst;
        /* what is parsed is what was checked: the descriptor read, not an earlier stat of the name */
        if (hfs3_cache_read(c, mfd, "manifest.json", HFS3_MAX_DOC, &text, &n, &mst, mdir) == 0 &&
            !(c->verify_foreign && foreign(c, &mst)) && hfs3_manifest_parse(text, n, &m) == 0) {
            free(text);
            if ((rc = hfs3_index_install_at(m, c, mfd, mdir)) < 0)
                goto wrap;
            hfs3_debug("%s: manifest not modified", r->spec);
            goto out;
        }
        free(text);
        /* the cached document itself is damaged: fetch it whole */
        hfs3_warn("%s: the cached %s/manifest.json is unreadable (%s); fetching the manifest again", r->spec, mdir,
                  hfs3_errmsg());
        free(g.etag);
        g = (hfs3_s3_get){0};
        hfs3_buf_reset(&doc);
        if ((rc = hfs3_s3_get_buf(s3, key, HFS3_MAX_DOC, &doc, &g)) < 0)
            goto wrap;
    }
    if ((rc = hfs3_manifest_parse(hfs3_buf_str(&doc), doc.len, &m)) < 0) {
        hfs3_err_wrap(rc, "%s: %s", r->spec, key);
        goto out;
    }
    /* manifest.json before the index: whoever sees the new index finds a manifest at least as new */
    if ((rc = hfs3_cache_write_atomic(mfd, "manifest.json", hfs3_buf_str(&doc), doc.len, c->entry_mode, mdir)) < 0)
        goto wrap;
    if (g.etag && *g.etag) {
        if ((rc = hfs3_cache_write_atomic(mfd, "etag", g.etag, strlen(g.etag), c->entry_mode, mdir)) < 0)
            goto wrap;
    } else {
        unlinkat(mfd, "etag", 0);
    }
    if ((rc = hfs3_index_install_at(m, c, mfd, mdir)) < 0)
        goto wrap;
    unlinkat(mfd, "repos", 0);   /* it was a hub before */
    hfs3_debug("%s: manifest installed (%zu %s)", r->spec, m->n, hfs3_plural(m->n, "entry", "entries"));
    goto out;
wrap:
    /* s3.c's messages name the key already; a missing bucket or manifest and refused keys say what to do */
    hfs3_explain_s3(r, key, rc);
out:
    hfs3_manifest_free(m);
    if (s3)
        hfs3_s3_free(s3);
    hfs3_buf_free(&doc);
    free(g.etag);
    free(etag);
    free(key);
    return rc;
}

/* What is cached for the mount in mfd: 1 (index and manifest.json, both acceptable), 0 (not both there),
 * or the error of one the rules refuse. *foreign_out: HFS3_VERIFY_FOREIGN=1 and another user wrote one of
 * them, so it is not to be used; *index_st: the index's stat. */
static int cached_state(const hfs3_cache *c, int mfd, const char *mdir, struct stat *index_st, int *foreign_out)
{
    struct stat st_doc;
    int ri = hfs3_cache_stat(c, mfd, "index", index_st, mdir);
    if (ri < 0 && ri != -ENOENT)
        return ri;
    int rd = hfs3_cache_stat(c, mfd, "manifest.json", &st_doc, mdir);
    if (rd < 0 && rd != -ENOENT)
        return rd;
    if (ri < 0 || rd < 0) {
        /* a hub: its repository list stands for the index (include/hfs3/hub.h) */
        int rr = hfs3_cache_stat(c, mfd, "repos", index_st, mdir);
        if (rr < 0)
            return rr == -ENOENT ? 0 : rr;
        *foreign_out = c->verify_foreign && (foreign(c, index_st) || !own_dir(c, mfd));
        return 1;
    }
    *foreign_out = c->verify_foreign && (foreign(c, index_st) || foreign(c, &st_doc) || !own_dir(c, mfd));
    return 1;
}

int hfs3_mount_cached(const hfs3_cache *c, const char *spec)
{
    char *mdir = NULL;
    int mfd = hfs3_cache_mount_dir(c, spec, 0, &mdir);
    if (mfd < 0)
        return 0;
    struct stat st;
    int foreign_cached = 0, have = cached_state(c, mfd, mdir, &st, &foreign_cached);
    close(mfd);
    free(mdir);
    return have == 1 && !foreign_cached;
}

/* mounts/K/canonical: one mount cached under several spellings (the alias section at the end of this file) */
static void alias_forget_other(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir);
static char *alias_read_line(const hfs3_cache *c, int mfd, const char *mdir, const char *name, struct stat *st);
static void alias_note(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir);
static int alias_adopt(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir, int offline);

static _Thread_local int refused;

int hfs3_mount_refused(void) { return refused; }

int hfs3_mount_refresh(const hfs3_cache *c, const hfs3_remote *r, int lock_fd, int *stale)
{
    int rc, fd = -1, waited = 0, foreign_cached = 0, checked_only = 0, had_index = 0;
    refused = 0;
    char *mdir = NULL, *id = NULL, *was = NULL;
    if (stale)
        *stale = 0;
    int mfd = hfs3_cache_mount_dir(c, r->spec, 1, &mdir);
    if (mfd < 0)
        return hfs3_err_wrap(mfd, "%s", r->spec);
    struct timespec t0;
    clock_gettime(CLOCK_REALTIME, &t0);
    if (lock_fd < 0 && (rc = hfs3_cache_lock(c, mfd, "lock", mdir, 0, &fd, &waited)) < 0) {
        hfs3_err_wrap(rc, "%s", r->spec);
        goto fail;
    }
    struct stat st_index;
    int have_cached = cached_state(c, mfd, mdir, &st_index, &foreign_cached);
    if (have_cached < 0) {
        rc = hfs3_err_wrap(have_cached, "%s", r->spec);
        goto fail;
    }
    had_index = have_cached;
    /* the REMOTE now resolves to another endpoint, bucket or prefix than the one its cached manifest came from
     * (rclone.conf or AWS_ENDPOINT_URL changed): that manifest is not this REMOTE's any more */
    struct stat cst;
    id = hfs3_remote_identity(r);
    if (have_cached && id && (was = alias_read_line(c, mfd, mdir, "canonical", &cst)) &&
        (!strcmp(was, id) || (c->verify_foreign && foreign(c, &cst)))) {
        free(was);
        was = NULL;
    }
    if (was) {
        hfs3_debug("%s: cached from %s, now resolves to %s: not used", r->spec, was, id);
        have_cached = 0;
    }
    if (waited && have_cached && !foreign_cached && ts_ge(&st_index.st_mtim, &t0)) {
        /* another process checked S3 while we waited: one round trip is enough */
        hfs3_debug("%s: refreshed by another process", r->spec);
        rc = 0;
        goto ok;
    }
    if (hfs3_env_bool("HFS3_OFFLINE", 0)) {
        if (have_cached && !foreign_cached) {
            /* the shim's check, once per mount and process: it writes nothing (a lock file aside), and the
             * name `cache du` knows the mount by stays the one it was fetched under */
            checked_only = 1;
            rc = 0;
            goto ok;
        }
        if ((rc = alias_adopt(c, r, mfd, mdir, 1)) <= 0)
            goto rc_set; /* 0: cached under another spelling; < 0: its error */
        if (was)
            rc = hfs3_err(-ENOENT, "%s: HFS3_OFFLINE=1 and its cached manifest came from %s, but it now resolves to "
                          "%s: not used (run hfs3-manifest fetch %s online with HFS3_CACHE_DIR=%s first, or point "
                          "it back)", r->spec, was, id, r->spec, c->dir);
        else
            rc = hfs3_err(-ENOENT, "%s: HFS3_OFFLINE=1 and no cached manifest %sfor it or any REMOTE that resolves "
                          "to the same %s: run hfs3-manifest fetch %s online with HFS3_CACHE_DIR=%s first", r->spec,
                          foreign_cached ? "of your own (HFS3_VERIFY_FOREIGN=1) " : "",
                          id ? id : "endpoint, bucket and prefix", r->spec, c->dir);
        goto fail;
    }
    /* a cached manifest another user wrote is not asked about under HFS3_VERIFY_FOREIGN=1: a whole GET. The
     * canonical of an entry whose REMOTE now resolves elsewhere is replaced only once the new manifest is in:
     * removed before, a failed fetch would leave the old manifest with nothing to say it is another endpoint's,
     * and the next refresh would fall back to it without a word */
    rc = refresh_fetch(c, r, mfd, mdir, have_cached && !foreign_cached);
    if (rc == 0) {
        alias_forget_other(c, r, mfd, mdir);
        alias_note(c, r, mfd, mdir);
        goto ok;
    }
    if (!(have_cached && !foreign_cached) && alias_adopt(c, r, mfd, mdir, 0) == 0) {
        if (stale)
            *stale = 1;
        goto out; /* warned */
    }
    if (have_cached && !foreign_cached) {
        hfs3_warn("%s; using the cached manifest", hfs3_errmsg());
        if (stale)
            *stale = 1;
        rc = 0;
        goto out;
    }
    if (was) {
        char saved[1024];
        snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
        hfs3_err(rc, "%s (its manifest cached from %s is not used: it now resolves to %s)", saved, was, id);
    }
rc_set:
    if (rc == 0)
        goto ok;
fail:
    refused = had_index;
    hfs3_cache_write_line(c, mfd, "error", mdir, hfs3_errmsg());
    goto out;
ok:
    unlinkat(mfd, "error", 0);
out:
    if (!checked_only)
        hfs3_gc_note_remote(c, mfd, mdir, r->spec); /* how `cache du` and `status` name the mount */
    hfs3_cache_unlock(fd);
    close(mfd);
    free(mdir);
    free(was);
    free(id);
    return rc;
}

/* ---- aliases: one endpoint + bucket + prefix cached under several spellings ----
 * mounts/K/canonical holds hfs3_remote_identity() of the REMOTE whose manifest K holds, written only after that
 * manifest was fetched or confirmed (200/304) under that resolution. A spelling with nothing cached of its own
 * (HFS3_OFFLINE=1, or S3 failing) takes a copy of the newest K' whose canonical is the same: manifest.json, etag,
 * and an index made from it, dated as K''s (when it was last checked against S3). K' is read without its lock:
 * its files are replaced by rename, etag after manifest.json, so reading etag first never pairs a manifest with
 * a newer ETag (that would make a later If-None-Match keep an old manifest). Every file is read through the
 * cache's rules; under HFS3_VERIFY_FOREIGN=1 a K' with a file of another user is not used. */

/* The one-line file name of mfd without its newline, or NULL (missing, refused). Keeps the error message. */
static char *alias_read_line(const hfs3_cache *c, int mfd, const char *mdir, const char *name, struct stat *st)
{
    char saved[1024], *text = NULL;
    size_t n = 0;
    snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
    if (hfs3_cache_read(c, mfd, name, 64 << 10, &text, &n, st, mdir) < 0)
        text = NULL;
    while (text && n && text[n - 1] == '\n')
        text[--n] = 0;
    hfs3_err(0, "%s", saved);
    return text;
}

static void alias_forget_other(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir)
{
    char *id = hfs3_remote_identity(r), *have = alias_read_line(c, mfd, mdir, "canonical", NULL);
    if (have && (!id || strcmp(have, id) != 0))
        unlinkat(mfd, "canonical", 0); /* the manifest about to come is another resolution's */
    free(have);
    free(id);
}

static void alias_note(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir)
{
    char *id = hfs3_remote_identity(r), *have = alias_read_line(c, mfd, mdir, "canonical", NULL);
    if (id && (!have || strcmp(have, id) != 0)) {
        char saved[1024];
        snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
        hfs3_cache_write_line(c, mfd, "canonical", mdir, id);
        hfs3_err(0, "%s", saved);
    }
    free(have);
    free(id);
}

typedef struct alias_scan {
    const hfs3_cache *c;
    const char *id;
    char self[17], best[17];
    struct timespec best_checked;
} alias_scan;

/* For each mounts/<16 hex>: a candidate when its canonical is the identity and it has an index and a
 * manifest.json the rules (and HFS3_VERIFY_FOREIGN) accept; the newest index wins. */
static int alias_consider(void *ud, const char *name)
{
    alias_scan *a = ud;
    const hfs3_cache *c = a->c;
    if (strlen(name) != 16 || strspn(name, "0123456789abcdef") != 16 || !strcmp(name, a->self))
        return 0;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
    int fd = hfs3_cache_opendir(c, c->mounts, name, 0, 0, c->p_mounts);
    if (fd >= 0) {
        struct stat sc, si, sm;
        char *canon = alias_read_line(c, fd, c->p_mounts, "canonical", &sc);
        if (canon && !strcmp(canon, a->id) && hfs3_cache_stat(c, fd, "index", &si, c->p_mounts) == 0 &&
            hfs3_cache_stat(c, fd, "manifest.json", &sm, c->p_mounts) == 0 &&
            !(c->verify_foreign && (foreign(c, &sc) || foreign(c, &si) || foreign(c, &sm) || !own_dir(c, fd))) &&
            (!a->best[0] || !ts_ge(&a->best_checked, &si.st_mtim))) {
            memcpy(a->best, name, 17);
            a->best_checked = si.st_mtim;
        }
        free(canon);
        close(fd);
    }
    hfs3_err(0, "%s", saved);
    return 0;
}

/* Nothing usable cached for r in mfd: installs the newest copy cached under another spelling of the same
 * identity. 0 done (offline: one info line; online, S3 having failed with the message set: one warning), 1 none
 * found (the message kept), or an error reading or installing it (offline: the message says it; online: S3's
 * message is kept and this one goes to the debug log). */
static int alias_adopt(const hfs3_cache *c, const hfs3_remote *r, int mfd, const char *mdir, int offline)
{
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", hfs3_errmsg());
    alias_scan a = {.c = c, .id = hfs3_remote_identity(r)};
    if (!a.id)
        return 1; /* out of memory, or a remote that was not parsed (tests): nothing to compare with */
    hfs3_mountkey(r->spec, a.self);
    hfs3_cache_scan(c->mounts, "", "", alias_consider, &a);
    int rc = 1, sfd = -1;
    char *spath = NULL, *etag = NULL, *doc = NULL, *other = NULL;
    size_t elen = 0, dlen = 0;
    hfs3_manifest *m = NULL;
    if (!a.best[0]) {
        hfs3_err(0, "%s", saved);
        goto out;
    }
    if ((sfd = hfs3_cache_opendir(c, c->mounts, a.best, 0, 0, c->p_mounts)) < 0 ||
        !(spath = hfs3_cache_path(c, "mounts", a.best, NULL))) {
        rc = sfd < 0 ? sfd : hfs3_err(-ENOMEM, "out of memory");
        goto fail;
    }
    other = alias_read_line(c, sfd, spath, "remote", NULL);
    /* alias_consider's checks were made on other opens: under HFS3_VERIFY_FOREIGN=1 each file is checked again
     * on the descriptor it is read from, and the directory and its canonical again, so that nothing swapped in
     * between is copied (the copy would be this user's own file, paired with the real ETag) */
    struct stat cst, est, mst;
    char *canon = alias_read_line(c, sfd, spath, "canonical", &cst);
    int vf = c->verify_foreign;
    if (vf && (!own_dir(c, sfd) || !canon || strcmp(canon, a.id) || foreign(c, &cst))) {
        free(canon);
        rc = hfs3_err(-EACCES, "%s changed while it was read, or could have been written by another user "
                      "(HFS3_VERIFY_FOREIGN=1); not used", spath);
        goto fail;
    }
    free(canon);
    int re = hfs3_cache_read(c, sfd, "etag", 4096, &etag, &elen, &est, spath); /* first: see above */
    if (re < 0 && re != -ENOENT) {
        rc = re;
        goto fail;
    }
    if ((rc = hfs3_cache_read(c, sfd, "manifest.json", HFS3_MAX_DOC, &doc, &dlen, &mst, spath)) < 0)
        goto fail;
    if (vf && foreign(c, &mst)) {
        rc = hfs3_err(-EACCES, "%s/manifest.json could have been written by another user (owner uid %u, mode %04o, "
                      "%lu %s), and HFS3_VERIFY_FOREIGN=1 asks for one of your own", spath, (unsigned)mst.st_uid,
                      (unsigned)(mst.st_mode & 07777), (unsigned long)mst.st_nlink,
                      hfs3_plural(mst.st_nlink, "link", "links"));
        goto fail;
    }
    if (vf && re == 0 && foreign(c, &est)) {
        /* an ETag someone else could have written would pair this manifest with another one's 304: the copy
         * goes without it, and its next check against S3 is a whole GET */
        free(etag);
        etag = NULL;
    }
    if ((rc = hfs3_manifest_parse(doc, dlen, &m)) < 0 ||
        (rc = hfs3_cache_write_atomic(mfd, "manifest.json", doc, dlen, c->entry_mode, mdir)) < 0 ||
        (rc = etag ? hfs3_cache_write_atomic(mfd, "etag", etag, elen, c->entry_mode, mdir) : 0) < 0 ||
        (rc = hfs3_index_install_at(m, c, mfd, mdir)) < 0)
        goto fail;
    if (!etag)
        unlinkat(mfd, "etag", 0);
    /* dated when its source was last checked against S3: the TTL counts from then */
    struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, a.best_checked};
    utimensat(mfd, "index", times, AT_SYMLINK_NOFOLLOW);
    hfs3_cache_write_line(c, mfd, "canonical", mdir, a.id);
    if (offline)
        hfs3_info("%s: using the manifest cached for %s (the same %s)", r->spec, other ? other : spath, a.id);
    else
        hfs3_warn("%s; using the manifest cached for %s (the same %s)", saved, other ? other : spath, a.id);
    rc = 0;
    goto out;
fail:
    hfs3_err_wrap(rc, "%s: the manifest cached for %s (the same %s)", r->spec, other ? other : a.best, a.id);
    if (!offline) {
        /* S3's failure is the one to report: this one only says why it could not be bridged */
        hfs3_debug("%s", hfs3_errmsg());
        hfs3_err(0, "%s", saved);
    }
out:
    if (sfd >= 0)
        close(sfd);
    hfs3_manifest_free(m);
    free(spath);
    free(etag);
    free(doc);
    free(other);
    free((char *)a.id);
    return rc;
}
