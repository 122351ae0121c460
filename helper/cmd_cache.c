/* cmd_cache.c - `hfs3-manifest cache du|gc|verify`: what the cache holds per mount and model, removing
 * blobs by size, age or reference, and re-hashing every blob. Safe beside running fetches and readers: a
 * blob is only removed under its own lock taken without waiting (lib/gc.c), and a process that has it open
 * keeps reading it. Printing only: the work is lib/gc.c's. */
#include "cmds.h"
#include "report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "hfs3/cache.h"
#include "hfs3/config.h"
#include "hfs3/gc.h"
#include "hfs3/hub.h"
#include "hfs3/index.h"
#include "hfs3/explain.h"
#include "hfs3/util.h"

#define KEEP_FRESH 300 /* --unreferenced keeps a blob used in the last 5 minutes: its manifest may be arriving */

static const char *sub = "cache";

static void err1(const char *msg) { fprintf(stderr, "hfs3-manifest cache %s: %s\n", sub, msg); }

void cmd_snap_free(cmd_snap *s)
{
    free(s->b);
    hfs3_gc_mounts_free(s->m, s->nm);
    hfs3_cache_free(s->c);
    memset(s, 0, sizeof *s);
}

int cmd_snap_read(cmd_snap *s, const char *who)
{
    memset(s, 0, sizeof *s);
    int rc = hfs3_cache_open(NULL, &s->c);
    if (rc < 0) {
        fprintf(stderr, "hfs3-manifest %s: %s\n", who, hfs3_errmsg());
        return rc == -EPERM || rc == -ELOOP || rc == -ENOTDIR ? 1 : 2;
    }
    if (hfs3_gc_list(s->c, &s->b, &s->nb) < 0 || hfs3_gc_mounts(s->c, s->b, s->nb, &s->m, &s->nm) < 0) {
        fprintf(stderr, "hfs3-manifest %s: %s\n", who, hfs3_errmsg());
        cmd_snap_free(s);
        return 1;
    }
    for (size_t i = 0; i < s->nb; i++)
        s->bytes += s->b[i].size;
    return 0;
}

static int cmp_blob_sha(const void *a, const void *b)
{
    return strcmp(((const hfs3_gc_blob *)a)->sha, ((const hfs3_gc_blob *)b)->sha);
}

int cmd_snap_add_cblobs(cmd_snap *s)
{
    hfs3_gc_blob *cb = NULL;
    size_t ncb = 0, added = 0;
    if (hfs3_gc_list_cblobs(s->c, &cb, &ncb) < 0 || !ncb) {
        hfs3_err_clear();
        free(cb);
        return 0;
    }
    hfs3_gc_blob *nv = realloc(s->b, (s->nb + ncb) * sizeof *nv);
    if (!nv) {
        free(cb);
        return -1;
    }
    s->b = nv;
    size_t nb = s->nb;
    for (size_t i = 0; i < ncb; i++) {
        /* the same content in blobs/ (the flush's copy) or in two mounts' cblobs/: one cached file */
        int dup = hfs3_gc_find(s->b, nb, cb[i].sha) != NULL;
        for (size_t k = nb; !dup && k < nb + added; k++)
            dup = !strcmp(s->b[k].sha, cb[i].sha);
        if (dup)
            continue;
        s->b[nb + added++] = cb[i];
        s->bytes += cb[i].size;
    }
    s->nb = nb + added;
    if (added)
        qsort(s->b, s->nb, sizeof *s->b, cmp_blob_sha);
    free(cb);
    return 0;
}

const char *cmd_when(int64_t t, char *buf, size_t n)
{
    if (!t)
        return "never";
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/* The name of a mount in reports: its REMOTE, or mounts/<key> when an older helper cached it. */
const char *cmd_mount_name(const hfs3_gc_mount *m, char *buf, size_t n)
{
    if (m->remote)
        return m->remote;
    snprintf(buf, n, "mounts/%s", m->key);
    return buf;
}

const hfs3_entry *cmd_snap_entry(const cmd_snap *s, const char *sha, const hfs3_gc_mount **mount)
{
    for (size_t i = 0; i < s->nm; i++)
        for (size_t j = 0; s->m[i].m && j < s->m[i].m->n; j++) {
            const hfs3_entry *e = &s->m[i].m->entries[j];
            if (e->type == HFS3_FILE && !strcmp(e->sha256, sha)) {
                if (mount)
                    *mount = &s->m[i];
                return e;
            }
        }
    return NULL;
}

/* The first file entry naming sha in any cached manifest: " (REMOTE PATH)" for messages, or "". */
static void blob_name(const cmd_snap *s, const char *sha, char *out, size_t n)
{
    out[0] = 0;
    for (size_t i = 0; i < s->nm; i++)
        for (size_t j = 0; s->m[i].m && j < s->m[i].m->n; j++) {
            const hfs3_entry *e = &s->m[i].m->entries[j];
            if (e->type == HFS3_FILE && !strcmp(e->sha256, sha)) {
                char kb[40];
                snprintf(out, n, " (%s %s)", cmd_mount_name(&s->m[i], kb, sizeof kb), e->path);
                return;
            }
        }
}

/* getopt_long over lo, each option handed to fn (which returns -1 to go on, or an exit status). Returns -1
 * when all were taken (optind: the first operand), or the exit status: 0 after --help, 2 for a bad option. */
static int parse_opts(int argc, char **argv, const struct option *lo, const char *usage_cmd,
                      int (*fn)(int, const char *, void *), void *ud)
{
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            char name[32];
            snprintf(name, sizeof name, "cache %s", sub);
            cmd_help(name);
            return 0;
        }
        if (c == '?') {
            fprintf(stderr, "usage: hfs3-manifest %s\n", usage_cmd);
            return 2;
        }
        int rc = fn(c, optarg, ud);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

/* ---- du ---- */

typedef struct du_opts {
    int json;
    const char *remote;
} du_opts;

static int du_opt(int c, const char *arg, void *ud)
{
    du_opts *o = ud;
    if (c == 'j')
        o->json = 1;
    return -1;
}

static cJSON *usage_json(const hfs3_gc_usage *u)
{
    cJSON *j = cJSON_CreateObject();
    char w[40];
    cJSON_AddNumberToObject(j, "files", (double)u->files);
    cJSON_AddNumberToObject(j, "files_cached", (double)u->cached_files);
    cJSON_AddNumberToObject(j, "bytes_cached", (double)u->bytes_cached);
    cJSON_AddNumberToObject(j, "bytes_not_cached", (double)u->bytes_missing);
    if (u->last_use)
        cJSON_AddStringToObject(j, "last_use", cmd_when(u->last_use, w, sizeof w));
    else
        cJSON_AddNullToObject(j, "last_use");
    return j;
}

static void usage_line(const char *indent, const char *name, const hfs3_gc_usage *u)
{
    char a[32], b[32], w[40];
    printf("%s%s: %zu %s, %zu cached (%s), %s not cached, last use %s\n", indent, name, u->files,
           hfs3_plural(u->files, "file", "files"), u->cached_files, hfs3_gc_human(u->bytes_cached, a, sizeof a), hfs3_gc_human(u->bytes_missing, b, sizeof b),
           cmd_when(u->last_use, w, sizeof w));
}

/* Whether a and b are spellings of one endpoint + bucket + prefix (mounts/K/canonical). */
static int same_mount(const hfs3_gc_mount *a, const hfs3_gc_mount *b)
{
    return a == b || (a->canonical && b->canonical && !strcmp(a->canonical, b->canonical));
}

/* The mount reported for m's group of spellings: the one with a manifest checked last (then the lowest key);
 * the others are listed as its aliases, so one model is not shown (or counted) twice. */
static const hfs3_gc_mount *group_head(const cmd_snap *s, const hfs3_gc_mount *m)
{
    const hfs3_gc_mount *h = m;
    for (size_t i = 0; m->canonical && i < s->nm; i++) {
        const hfs3_gc_mount *o = &s->m[i];
        if (o == h || !same_mount(o, m))
            continue;
        int oh = o->m != NULL, hh = h->m != NULL;
        if (oh > hh || (oh == hh && (o->checked > h->checked || (o->checked == h->checked && strcmp(o->key, h->key) < 0))))
            h = o;
    }
    return h;
}

/* The aliases of head (every other spelling of its group): an array of {key, remote} for JSON, or one line. */
static void group_aliases(const cmd_snap *s, const hfs3_gc_mount *head, cJSON *j)
{
    cJSON *arr = j ? cJSON_AddArrayToObject(j, "aliases") : NULL;
    int n = 0;
    char w[40];
    for (size_t i = 0; i < s->nm; i++) {
        const hfs3_gc_mount *o = &s->m[i];
        if (o == head || !same_mount(o, head))
            continue;
        char nb[40];
        if (arr) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, "key", o->key);
            if (o->remote)
                cJSON_AddStringToObject(a, "remote", o->remote);
            else
                cJSON_AddNullToObject(a, "remote");
            if (o->error)
                cJSON_AddStringToObject(a, "error", o->error);
            cJSON_AddItemToArray(arr, a);
        } else {
            printf("%s%s", n ? ", " : "  also as: ", cmd_mount_name(o, nb, sizeof nb));
        }
        n++;
    }
    if (!arr && n)
        printf(" (all resolve to %s)\n", head->canonical);
    for (size_t i = 0; !arr && i < s->nm; i++) {
        const hfs3_gc_mount *o = &s->m[i];
        char nb[40];
        if (o != head && same_mount(o, head) && o->error)
            printf("  last refresh of %s failed (%s): %s\n", cmd_mount_name(o, nb, sizeof nb),
                   cmd_when(o->error_time, w, sizeof w), o->error);
    }
}

/* A hub mount (mounts/K/repos, no manifest of its own: docs/reference.md "One mount for a whole hub"): its repositories, each
 * with the usage of its own mount (REMOTE/NAME) when fetched. Text: lines under the hub's; JSON: into j.
 * 0 when m is no hub. */
static int hub_report(cmd_snap *s, const hfs3_gc_mount *m, const char *name, cJSON *j)
{
    char **names = NULL;
    size_t nn = 0, fetched = 0;
    if (m->m || !m->remote || hfs3_hub_load(s->c, m->remote, &names, &nn) < 0) {
        hfs3_err_clear();
        return 0;
    }
    cJSON *arr = j ? cJSON_AddArrayToObject(j, "repositories") : NULL;
    hfs3_gc_usage *u = calloc(nn ? nn : 1, sizeof *u);
    unsigned char *have = calloc(nn ? nn : 1, 1);
    for (size_t i = 0; u && have && i < nn; i++) {
        char *rs = hfs3_hub_repo_spec(m->remote, names[i]), key[17];
        if (!rs)
            continue;
        hfs3_mountkey(rs, key);
        free(rs);
        for (size_t k = 0; k < s->nm && !have[i]; k++)
            if (!strcmp(s->m[k].key, key) && s->m[k].m) {
                hfs3_gc_usage_of(s->m[k].m, NULL, s->b, s->nb, &u[i]);
                have[i] = 1;
                fetched++;
            }
    }
    if (!j)
        printf("%s: a hub of %zu %s, %zu fetched:\n", name, nn, hfs3_plural(nn, "repository", "repositories"), fetched);
    for (size_t i = 0; u && have && i < nn; i++) {
        if (j) {
            cJSON *r = have[i] ? usage_json(&u[i]) : cJSON_CreateObject();
            cJSON_AddStringToObject(r, "repository", names[i]);
            cJSON_AddBoolToObject(r, "fetched", have[i]);
            cJSON_AddItemToArray(arr, r);
        } else if (have[i]) {
            usage_line("  ", names[i], &u[i]);
        } else {
            printf("  %s: not fetched\n", names[i]);
        }
    }
    free(u);
    free(have);
    hfs3_hub_names_free(names, nn);
    return 1;
}

/* Marks in under[] (one per mount of s) each mount that is a repository of a hub mount listed too: its lines are
 * under the hub's ("  NAME: N files, ..."), so the text report does not list it again on its own. */
static void hub_repos(cmd_snap *s, const char *key, unsigned char *under)
{
    for (size_t h = 0; h < s->nm; h++) {
        const hfs3_gc_mount *m = &s->m[h];
        char **names = NULL;
        size_t nn = 0;
        if (m->m || !m->remote || (key && strcmp(m->key, key)) || hfs3_hub_load(s->c, m->remote, &names, &nn) < 0) {
            hfs3_err_clear();
            continue;
        }
        for (size_t i = 0; i < nn; i++) {
            char *rs = hfs3_hub_repo_spec(m->remote, names[i]), rk[17];
            if (!rs)
                continue;
            hfs3_mountkey(rs, rk);
            free(rs);
            for (size_t k = 0; k < s->nm; k++)
                if (!strcmp(s->m[k].key, rk))
                    under[k] = 1;
        }
        hfs3_hub_names_free(names, nn);
    }
}

/* Shared by du and status: a JSON array of the mounts (filtered by remote when given), or lines on stdout.
 * Spellings of one endpoint + bucket + prefix are one entry, with the others as its aliases. In the text, a
 * hub's repository is listed under the hub only (JSON keeps every mount, each with its key). */
cJSON *cmd_snap_mounts(cmd_snap *s, const char *remote, int json)
{
        cJSON *arr = json ? cJSON_CreateArray() : NULL;
    char key[17] = "";
    if (remote)
        hfs3_mountkey_as(remote, hfs3_env_bool("HFS3_VERIFY_FOREIGN", 0), (unsigned)geteuid(), key);
    unsigned char *under = json ? NULL : calloc(s->nm ? s->nm : 1, 1);
    if (under)
        hub_repos(s, remote ? key : NULL, under);
    for (size_t i = 0; i < s->nm; i++) {
        hfs3_gc_mount *m = &s->m[i];
        if (group_head(s, m) != m)
            continue; /* listed under its group's head */
        if (under && under[i])
            continue; /* listed under its hub */
        int hit = !remote;
        for (size_t k = 0; !hit && k < s->nm; k++)
            hit = same_mount(&s->m[k], m) && !strcmp(s->m[k].key, key);
        if (!hit)
            continue;
        char nb[40], w[40];
        const char *name = cmd_mount_name(m, nb, sizeof nb);
        hfs3_gc_usage u = {0};
        if (m->m)
            hfs3_gc_usage_of(m->m, NULL, s->b, s->nb, &u);
        cJSON *j = NULL;
        if (json) {
            j = usage_json(&u);
            cJSON_AddStringToObject(j, "key", m->key);
            if (m->remote)
                cJSON_AddStringToObject(j, "remote", m->remote);
            else
                cJSON_AddNullToObject(j, "remote");
            if (m->checked)
                cJSON_AddStringToObject(j, "checked", cmd_when(m->checked, w, sizeof w));
            else
                cJSON_AddNullToObject(j, "checked");
            int hub = hub_report(s, m, name, j);
            cJSON_AddBoolToObject(j, "hub", hub);
            if (!m->m && !hub)
                cJSON_AddStringToObject(j, "manifest_error", m->load_err ? m->load_err : "unreadable");
            if (m->error) {
                cJSON_AddStringToObject(j, "error", m->error);
                cJSON_AddStringToObject(j, "error_time", cmd_when(m->error_time, w, sizeof w));
            }
            cJSON_AddItemToArray(arr, j);
        } else if (m->m) {
            usage_line("", name, &u);
        } else if (!hub_report(s, m, name, NULL)) {
            printf("%s: no manifest: %s\n", name, m->load_err ? m->load_err : "unreadable");
        }
        /* per model: the repository folders of a hub mount */
        cJSON *models = json ? cJSON_CreateArray() : NULL;
        for (size_t k = 0; m->m && k < m->m->n; k++) {
            const hfs3_entry *e = &m->m->entries[k];
            if (e->type != HFS3_DIR || !hfs3_gc_is_repo(e->path))
                continue;
            hfs3_gc_usage g;
            hfs3_gc_usage_of(m->m, e->path, s->b, s->nb, &g);
            if (json) {
                cJSON *gj = usage_json(&g);
                cJSON_AddStringToObject(gj, "model", e->path);
                cJSON_AddItemToArray(models, gj);
            } else {
                usage_line("  ", e->path, &g);
            }
        }
        if (json)
            cJSON_AddItemToObject(j, "models", models);
        if (!json && m->error)
            printf("  last refresh failed (%s): %s\n", cmd_when(m->error_time, w, sizeof w), m->error);
        if (json && m->canonical)
            cJSON_AddStringToObject(j, "resolves_to", m->canonical);
        else if (json)
            cJSON_AddNullToObject(j, "resolves_to");
        group_aliases(s, m, j);
    }
    free(under);
    return arr;
}

/* The cache line: files, bytes, budget, free space. JSON: an object. */
cJSON *cmd_snap_summary(cmd_snap *s, int json)
{
        uint64_t max = 0, unref = 0, tmp = hfs3_gc_tmp_bytes(s->c);
    size_t nunref = 0;
    int budget = hfs3_gc_budget(s->c, &max);
    struct statvfs v;
    uint64_t avail = fstatvfs(s->c->fd, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
    for (size_t i = 0; i < s->nb; i++)
        if (!s->b[i].refs) {
            nunref++;
            unref += s->b[i].size;
        }
    char a[32], b[32], d[32], e[32];
    if (!json) {
        printf("%s: %zu %s, %s; %s", s->c->dir, s->nb, hfs3_plural(s->nb, "file", "files"),
               hfs3_gc_human(s->bytes, a, sizeof a),
               budget > 0 ? "budget " : "no budget (HFS3_CACHE_MAX unset)");
        if (budget > 0)
            printf("%s (HFS3_CACHE_MAX=%s)", hfs3_gc_human(max, b, sizeof b), getenv("HFS3_CACHE_MAX"));
        printf("; %s free on its file system; %s in tmp/; ", hfs3_gc_human(avail, d, sizeof d),
               hfs3_gc_human(tmp, e, sizeof e));
        /* the blobs no cached manifest names, in words: what they are and what removes them */
        if (nunref)
            printf("%zu cached %s (%s) that no cached manifest names: `cache gc --unreferenced` removes %s\n", nunref,
                   hfs3_plural(nunref, "file", "files"), hfs3_gc_human(unref, a, sizeof a),
                   hfs3_plural(nunref, "it", "them"));
        else
            printf("every cached file belongs to a cached manifest\n");
        if (budget < 0)
            printf("  %s\n", hfs3_errmsg());
        return NULL;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "dir", s->c->dir);
    cJSON_AddBoolToObject(j, "shared", s->c->shared);
    cJSON_AddNumberToObject(j, "files", (double)s->nb);
    cJSON_AddNumberToObject(j, "bytes", (double)s->bytes);
    cJSON_AddNumberToObject(j, "tmp_bytes", (double)tmp);
    if (budget > 0)
        cJSON_AddNumberToObject(j, "budget", (double)max);
    else
        cJSON_AddNullToObject(j, "budget");
    cJSON_AddNumberToObject(j, "fs_free", (double)avail);
    cJSON_AddNumberToObject(j, "unreferenced_files", (double)nunref);
    cJSON_AddNumberToObject(j, "unreferenced_bytes", (double)unref);
    return j;
}

/* The length of the valid UTF-8 character at s (shortest form, no surrogates, at most U+10FFFF), else 0. A lone
 * byte 0x80-0xff is no character: 8-bit terminals read 0x9b as CSI. */
static size_t utf8_len(const char *s, size_t avail)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = u[0] >= 0xc2 && u[0] <= 0xdf ? 2 : u[0] >= 0xe0 && u[0] <= 0xef ? 3 : u[0] >= 0xf0 && u[0] <= 0xf4 ? 4 : 0;
    if (!n || n > avail)
        return 0;
    for (size_t k = 1; k < n; k++)
        if ((u[k] & 0xc0) != 0x80)
            return 0;
    if ((u[0] == 0xe0 && u[1] < 0xa0) || (u[0] == 0xed && u[1] >= 0xa0) || (u[0] == 0xf0 && u[1] < 0x90) ||
        (u[0] == 0xf4 && u[1] >= 0x90))
        return 0;
    return n;
}

FILE *cmd_text_begin(char **buf, size_t *len)
{
    fflush(stdout);
    FILE *mem = open_memstream(buf, len);
    if (!mem)
        return NULL;
    FILE *real = stdout;
    stdout = mem; /* glibc's stdout is a plain variable: every printf of the command lands here */
    return real;
}

void cmd_text_end(FILE *real, char **bufp, size_t *lenp)
{
    if (!real)
        return;
    fclose(stdout); /* sets *bufp and *lenp */
    stdout = real;
    char *buf = *bufp;
    size_t len = *lenp;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        size_t n = utf8_len(buf + i, len - i);
        if (c >= 0x80 && n > 1 && !(c == 0xc2 && (unsigned char)buf[i + 1] <= 0x9f)) {
            fwrite(buf + i, 1, n, stdout); /* a whole, valid UTF-8 character that is no C1 control */
            i += n - 1;
        } else if (c >= 0x80 || (c < 0x20 && c != '\n') || c == 0x7f) {
            printf("\\x%02x", c); /* a control, a C1 control's lead byte, or a byte of no valid character */
        } else {
            putchar(c);
        }
    }
    free(buf);
    *bufp = NULL;
    fflush(stdout);
}

void cmd_print_json(cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(j);
}

static int cache_du(int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
    du_opts o = {0};
    int rc = parse_opts(argc, argv, lo, "cache du [--json] [REMOTE]", du_opt, &o);
    if (rc >= 0)
        return rc;
    if (argc - optind > 1) {
        fprintf(stderr, "usage: hfs3-manifest cache du [--json] [REMOTE]\n");
        return 2;
    }
    o.remote = optind < argc ? argv[optind] : NULL;
    cmd_snap s;
    if ((rc = cmd_snap_read(&s, "cache du")))
        return rc;
    cmd_snap_add_cblobs(&s);
    if (o.json) {
        cJSON *j = cmd_snap_summary(&s, 1);
        cJSON_AddItemToObject(j, "mounts", cmd_snap_mounts(&s, o.remote, 1));
        cmd_print_json(j);
    } else {
        char *buf = NULL;
        size_t len = 0;
        FILE *real = cmd_text_begin(&buf, &len);
        cmd_snap_summary(&s, 0);
        cmd_snap_mounts(&s, o.remote, 0);
        cmd_text_end(real, &buf, &len);
    }
    cmd_snap_free(&s);
    return 0;
}

/* ---- gc ---- */

typedef struct gc_opts {
    int dry_run, unreferenced, json, have_max, have_age;
    uint64_t max;
    double days;
    const char *max_text;
} gc_opts;

static int gc_opt(int c, const char *arg, void *ud)
{
    gc_opts *o = ud;
    char *end;
    switch (c) {
    case 'n':
        o->dry_run = 1;
        break;
    case 'u':
        o->unreferenced = 1;
        break;
    case 'j':
        o->json = 1;
        break;
    case 'm':
        o->have_max = 1;
        o->max_text = arg;
        break;
    case 'o':
        o->days = strtod(arg, &end);
        if (end == arg || *end || !(o->days >= 0) || o->days > 1e6) {
            err1("--older-than wants a number of days (0 or more)");
            return 2;
        }
        o->have_age = 1;
        break;
    }
    return -1;
}

static int cmp_lru(const void *a, const void *b)
{
    const hfs3_gc_blob *x = *(const hfs3_gc_blob *const *)a, *y = *(const hfs3_gc_blob *const *)b;
    if (x->last_use != y->last_use)
        return x->last_use < y->last_use ? -1 : 1;
    return strcmp(x->sha, y->sha);
}

static int cache_gc(int argc, char **argv)
{
    static const struct option lo[] = {{"dry-run", no_argument, NULL, 'n'},
                                       {"unreferenced", no_argument, NULL, 'u'},
                                       {"max", required_argument, NULL, 'm'},
                                       {"older-than", required_argument, NULL, 'o'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
    static const char *usage = "cache gc [--max SIZE] [--older-than DAYS] [--unreferenced] [--dry-run] [--json]";
    gc_opts o = {0};
    int rc = parse_opts(argc, argv, lo, usage, gc_opt, &o);
    if (rc >= 0)
        return rc;
    if (optind != argc) {
        fprintf(stderr, "usage: hfs3-manifest %s\n", usage);
        return 2;
    }
    cmd_snap s;
    if ((rc = cmd_snap_read(&s, "cache gc")))
        return rc;
    int status = 2;
    if (o.have_max) {
        struct statvfs v;
        uint64_t fs = fstatvfs(s.c->fd, &v) == 0 ? (uint64_t)v.f_blocks * v.f_frsize : 0;
        if (hfs3_gc_parse_size(o.max_text, fs, &o.max) < 0) {
            err1(hfs3_errmsg());
            goto done;
        }
    } else if (!o.have_age && !o.unreferenced) {
        int b = hfs3_gc_budget(s.c, &o.max);
        if (b < 0) {
            err1(hfs3_errmsg());
            goto done;
        }
        if (!b) {
            err1("nothing to do: give --max SIZE, --older-than DAYS or --unreferenced (or set HFS3_CACHE_MAX)");
            goto done;
        }
        o.have_max = 1;
    }
    status = 1;
    int lfd = -1;
    if (hfs3_cache_lock(s.c, s.c->locks, "gc.lock", s.c->p_locks, 0, &lfd, NULL) < 0) {
        err1(hfs3_errmsg());
        goto done;
    }
    int64_t now = (int64_t)time(NULL), cutoff = now - (int64_t)(o.days * 86400);
    /* the mounts' cblobs/ files (checked by chunk digests, not yet hashed whole) are cached files too */
    hfs3_gc_blob *cb = NULL;
    size_t ncb = 0;
    hfs3_gc_blob **order = hfs3_gc_list_cblobs(s.c, &cb, &ncb) < 0 ? NULL : calloc(s.nb + ncb + 1, sizeof *order);
    if (!order) {
        err1("out of memory");
        free(cb);
        hfs3_cache_unlock(lfd);
        goto done;
    }
    uint64_t left = s.bytes + hfs3_gc_tmp_bytes(s.c), freed = 0;
    for (size_t i = 0; i < s.nb; i++)
        order[i] = &s.b[i];
    for (size_t i = 0; i < ncb; i++) {
        order[s.nb + i] = &cb[i];
        left += cb[i].size;
    }
    size_t norder = s.nb + ncb;
    qsort(order, norder, sizeof *order, cmp_lru);
    size_t removed = 0, busy = 0, foreign = 0, failed = 0;
    cJSON *jr = o.json ? cJSON_CreateArray() : NULL;
    for (size_t i = 0; i < norder; i++) {
        hfs3_gc_blob *b = order[i];
        const char *why = NULL;
        if (o.unreferenced && !b->refs && b->last_use < now - KEEP_FRESH)
            why = "unreferenced";
        else if (o.have_age && b->last_use < cutoff)
            why = "older";
        else if (o.have_max && left > o.max)
            why = "over --max";
        if (!why)
            continue;
        int r = hfs3_gc_remove(s.c, b, o.dry_run, 0);
        char hb[32], w[40], name[600];
        if (r == -EBUSY || r == -EPERM || (r < 0 && r != -ENOENT)) {
            busy += r == -EBUSY;
            foreign += r == -EPERM;
            failed += r != -EBUSY && r != -EPERM;
            if (!o.json)
                fprintf(stderr, "hfs3-manifest cache gc: kept: %s\n", hfs3_errmsg());
            continue;
        }
        left -= b->size;
        if (r == -ENOENT)
            continue;
        removed++;
        freed += b->size;
        blob_name(&s, b->sha, name, sizeof name);
        if (o.json) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "sha256", b->sha);
            cJSON_AddNumberToObject(e, "bytes", (double)b->size);
            cJSON_AddStringToObject(e, "last_use", cmd_when(b->last_use, w, sizeof w));
            cJSON_AddStringToObject(e, "reason", why);
            cJSON_AddItemToArray(jr, e);
        } else {
            printf("%s %s %s, last use %s, %s%s\n", o.dry_run ? "would remove" : "removed", b->sha,
                   hfs3_gc_human(b->size, hb, sizeof hb), cmd_when(b->last_use, w, sizeof w), why, name);
        }
    }
    hfs3_cache_unlock(lfd);
    free(order);
    free(cb);
    char a[32], b2[32];
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddBoolToObject(j, "dry_run", o.dry_run);
        cJSON_AddItemToObject(j, "removed", jr);
        cJSON_AddNumberToObject(j, "removed_files", (double)removed);
        cJSON_AddNumberToObject(j, "removed_bytes", (double)freed);
        cJSON_AddNumberToObject(j, "left_bytes", (double)left);
        cJSON_AddNumberToObject(j, "busy", (double)busy);
        cJSON_AddNumberToObject(j, "other_users", (double)foreign);
        cJSON_AddNumberToObject(j, "failed", (double)failed);
        cmd_print_json(j);
    } else {
        printf("cache gc: %s %zu %s (%s); %s left; kept %zu busy, %zu of other users\n",
               o.dry_run ? "would remove" : "removed", removed, hfs3_plural(removed, "file", "files"),
               hfs3_gc_human(freed, a, sizeof a),
               hfs3_gc_human(left, b2, sizeof b2), busy, foreign);
    }
    status = failed ? 1 : 0;
    if (o.have_max && left > o.max) {
        char m[32];
        fprintf(stderr, "hfs3-manifest cache gc: still %s, over --max %s: the rest is busy, other users' or in tmp/\n",
                hfs3_gc_human(left, a, sizeof a), hfs3_gc_human(o.max, m, sizeof m));
        status = 1;
    }
done:
    cmd_snap_free(&s);
    return status;
}

/* ---- verify ---- */

static int verify_opt(int c, const char *arg, void *ud)
{
    int *flags = ud;
    flags[c == 'n' ? 0 : 1] = 1;
    return -1;
}

static int cache_verify(int argc, char **argv)
{
    static const struct option lo[] = {{"dry-run", no_argument, NULL, 'n'}, {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},    {0, 0, 0, 0}};
    int flags[2] = {0, 0};
    int rc = parse_opts(argc, argv, lo, "cache verify [--dry-run] [--json]", verify_opt, flags);
    if (rc >= 0)
        return rc;
    if (optind != argc) {
        fprintf(stderr, "usage: hfs3-manifest cache verify [--dry-run] [--json]\n");
        return 2;
    }
    int dry = flags[0], json = flags[1];
    cmd_snap s;
    if ((rc = cmd_snap_read(&s, "cache verify")))
        return rc;
    size_t good = 0, bad = 0, busy = 0, errors = 0;
    uint64_t done = 0;
    cJSON *jb = json ? cJSON_CreateArray() : NULL;
    int progress = cmd_progress_wanted();
    for (size_t i = 0; i < s.nb; i++) {
        hfs3_gc_blob *b = &s.b[i];
        if (progress)
            cmd_progress(NULL, "cache verify", done, s.bytes, i, s.nb);
        int r = hfs3_gc_remove(s.c, b, dry, 1);
        done += b->size;
        if (r == 1) {
            good++;
            continue;
        }
        if (r == -EBUSY) {
            busy++;
            continue;
        }
        if (r == -ENOENT)
            continue; /* removed meanwhile */
        char name[600];
        const char *msg = hfs3_errmsg();
        int is_bad = r == 0 || r == -EPERM;
        bad += is_bad;
        errors += !is_bad;
        blob_name(&s, b->sha, name, sizeof name);
        const char *what = r == 0 ? (dry ? "bad, would remove" : "bad, removed")
                           : r == -EPERM ? "bad, kept"
                                         : "unreadable";
        if (json) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "sha256", b->sha);
            cJSON_AddStringToObject(e, "result", what);
            cJSON_AddStringToObject(e, "detail", msg);
            cJSON_AddItemToArray(jb, e);
        } else {
            if (progress)
                cmd_progress_end();
            printf("%s: %s%s: %s\n", what, b->sha, name, msg);
        }
    }
    if (progress)
        cmd_progress_end();
    char a[32];
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddBoolToObject(j, "dry_run", dry);
        cJSON_AddNumberToObject(j, "checked", (double)(good + bad + errors));
        cJSON_AddNumberToObject(j, "good", (double)good);
        cJSON_AddNumberToObject(j, "bad", (double)bad);
        cJSON_AddNumberToObject(j, "busy", (double)busy);
        cJSON_AddNumberToObject(j, "unreadable", (double)errors);
        cJSON_AddItemToObject(j, "problems", jb);
        cmd_print_json(j);
    } else {
        printf("cache verify: %zu %s checked (%s): %zu good, %zu bad%s, %zu busy (skipped), %zu unreadable\n",
               good + bad + errors, hfs3_plural(good + bad + errors, "file", "files"), hfs3_gc_human(done, a, sizeof a), good, bad,
               bad ? (dry ? " (--dry-run: kept)" : " (removed where ours)") : "", busy, errors);
    }
    cmd_snap_free(&s);
    return bad || errors ? 1 : 0;
}

int cmd_cache(int argc, char **argv)
{
    static const char *usage = "cache du|gc|verify ... (hfs3-manifest cache SUBCOMMAND --help)";
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        cmd_help("cache");
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: hfs3-manifest %s\n", usage);
        cmd_usage("cache");
        return 2;
    }
    sub = argv[1];
    if (!strcmp(argv[1], "du"))
        return cache_du(argc - 1, argv + 1);
    if (!strcmp(argv[1], "gc"))
        return cache_gc(argc - 1, argv + 1);
    if (!strcmp(argv[1], "verify"))
        return cache_verify(argc - 1, argv + 1);
    fprintf(stderr, "hfs3-manifest cache: unknown subcommand '%s'\n", argv[1]);
    fprintf(stderr, "usage: hfs3-manifest %s\n", usage);
    return 2;
}
