/* list.c - directory listings: the entries of a mount directory from the index, and of a mount ancestor (the
 * mounts below it), handed one by one to dir.c's readdir/getdents callers. */
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* --- listings ---------------------------------------------------------------------------------------- */

static unsigned char dtype(uint32_t t)
{
    return t == HFS3_IX_DIR ? DT_DIR : t == HFS3_IX_FILE ? DT_REG : DT_LNK;
}

static void real_closedir(DIR *d)
{
    int e = errno;
    REAL(closedir, int (*)(DIR *))(d);
    errno = e;
}

int sh_list(const struct sh_loc *l, int (*fn)(void *, const struct sh_dent *), void *arg)
{
    SH_SCRATCH(t);
    struct sh_dent d;
    struct stat st;
    int rc;
    if ((rc = sh_stat(l, 1, &st)) < 0)
        return rc;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    d.type = DT_DIR;
    d.ino = st.st_ino;
    strcpy(d.name, ".");
    if ((rc = fn(arg, &d)) < 0)
        return rc;
    strcpy(d.name, "..");   /* its own identity would cost a lookup; 0 reads as a deleted entry */
    d.ino = st.st_ino ^ 1;
    if ((rc = fn(arg, &d)) < 0)
        return rc;
    if (l->kind == L_ANC) {
        size_t n = strlen(l->path);
        DIR *rd = NULL;
        struct stat rst;
        if (sh_r.stat(l->path, &rst) == 0 && S_ISDIR(rst.st_mode)) {
            /* an ancestor that exists on disk: its own entries, then the mounts below it that it lacks */
            if (!(rd = REAL(opendir, DIR *(*)(const char *))(l->path)))
                return -errno;
            struct dirent64 *de;
            while ((de = REAL(readdir64, struct dirent64 *(*)(DIR *))(rd))) {
                if (sh_dot_comp(de->d_name, strlen(de->d_name)) || strlen(de->d_name) >= sizeof d.name)
                    continue;
                strcpy(d.name, de->d_name);
                d.type = de->d_type;
                d.ino = de->d_ino;
                if ((rc = fn(arg, &d)) < 0) {
                    real_closedir(rd);
                    return rc;
                }
            }
            d.type = DT_DIR;
        }
        for (int i = 0; i < sh_nmounts; i++) {
            const struct sh_mount *m = &sh_mounts[i];
            if (m->len <= n || memcmp(m->path, l->path, n) || m->path[n] != '/')
                continue;
            const char *s = m->path + n + 1, *end = strchr(s, '/');
            size_t k = end ? (size_t)(end - s) : strlen(s);
            int dup = 0;
            for (int j = 0; j < i; j++) {
                const struct sh_mount *o = &sh_mounts[j];
                if (o->len > n + k && !memcmp(o->path, m->path, n + 1 + k) &&
                    (o->path[n + 1 + k] == '/' || !o->path[n + 1 + k]))
                    dup = 1;
            }
            if (dup || k >= sizeof d.name)
                continue;
            memcpy(d.name, s, k);
            d.name[k] = 0;
            if (rd && sh_r.fstatat(dirfd(rd), d.name, &rst, AT_SYMLINK_NOFOLLOW) == 0)
                continue;   /* listed above */
            SH_LOC(c);
            snprintf(t->b, SH_SCR, "%s/%s", l->path, d.name);
            d.ino = sh_classify_abs(t->b, &c) != L_NONE && sh_stat(&c, 1, &st) == 0 ? st.st_ino : 1;
            if ((rc = fn(arg, &d)) < 0)
                break;
        }
        if (rd)
            real_closedir(rd);
        return rc < 0 ? rc : 0;
    }
    const struct sh_mount *m;
    uint32_t e;
    rc = sh_resolve(l, 1, &m, &e);
    if (rc == -EAGAIN)
        return -EIO;
    if (rc == 1 && m->hub)
        return sh_hub_list(m->idx, fn, arg);
    if (rc == 1)
        return -EIO;   /* the root of a mount without a manifest */
    if (rc < 0)
        return rc;
    const struct hfs3_index_entry *x = &m->ents[e];
    char *rp = t->a;
    for (uint32_t i = 0; i < x->child_count; i++) {
        uint32_t c = m->kids[x->child_first + i];
        const struct hfs3_index_entry *y = &m->ents[c];
        if (y->name_len >= sizeof d.name)
            continue;
        memcpy(d.name, m->strs + y->name_off, y->name_len + 1);
        d.type = dtype(y->type);
        if (y->type == HFS3_IX_DIR) {
            sh_tree_path(m, sh_epath(m, c), rp, SH_SCR);
            d.ino = sh_stat_skel(rp, &st) == 0 ? st.st_ino : 1;
        } else {
            sh_stat_synth(m, c, &st);
            d.ino = st.st_ino;
        }
        if ((rc = fn(arg, &d)) < 0)
            return rc;
    }
    return 0;
}

