/* test_index.c - lib/index.c: installs the index of small manifests into a temp dir and reads the file back
 * with the layout of include/hfs3/index.h (header, entries, children runs, strings, symlink resolution),
 * checks the tree/ skeleton and the modes (private and shared cache, under umask 077), and that a reinstall
 * replaces the file atomically while a mapping of the old one stays readable. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hfs3/index.h"
#include "hfs3/manifest.h"
#include "hfs3/util.h"

static char root[64];

static void make_root(void)
{
    snprintf(root, sizeof root, "/tmp/hfs3-test-index.XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        exit(2);
    }
}

static void remove_root(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", root, root);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", root);
}

static hfs3_entry file_entry(const char *path, uint64_t size, const char *content)
{
    hfs3_entry e = {.path = (char *)path, .type = HFS3_FILE, .size = size, .mtime = 1764496800};
    hfs3_sha256_hexof(content, strlen(content), e.sha256);
    return e;
}

static hfs3_entry link_entry(const char *path, const char *target)
{
    hfs3_entry e = {.path = (char *)path, .type = HFS3_SYMLINK, .target = (char *)target};
    return e;
}

/* Added out of order on purpose: finish sorts and adds the parent dirs ("dir", "dir/sub"). */
static hfs3_manifest *small_manifest(const char *layout)
{
    hfs3_entry es[] = {
        file_entry("dir/sub/c.txt", 1, "c"),
        link_entry("link-a", "a.txt"),
        file_entry("a.txt", 3, "abc"),
        file_entry("B", 1, "B"),                 /* bytewise: "B" < "a.txt" */
        link_entry("dir/up", ".."),              /* resolves to the root */
        link_entry("dir/chain", "../link-a"),    /* through another symlink */
        link_entry("dangling", "nowhere"),
        file_entry("dir/b.bin", 4831838208ULL, "b"),
        {.path = "empty", .type = HFS3_DIR},
        file_entry("dir/a-b", 2, "ab"),          /* '-' sorts before '/' in paths, names still in order */
    };
    hfs3_manifest *m = hfs3_manifest_new(layout, NULL);
    if (!m)
        return NULL;
    for (size_t i = 0; i < sizeof es / sizeof *es; i++)
        if (hfs3_manifest_add(m, &es[i]) < 0)
            goto fail;
    if (hfs3_manifest_finish(m) < 0)
        goto fail;
    return m;
fail:
    fprintf(stderr, "manifest: %s\n", hfs3_errmsg());
    hfs3_manifest_free(m);
    return NULL;
}

/* A mapped index file with its sections located; ok only when the header checks passed. */
struct ix {
    void *base;
    size_t len;
    const struct hfs3_index_header *h;
    const struct hfs3_index_entry *e;
    const uint32_t *kids;
    const char *s;
    int ok;
};

static void ix_map(const char *path, struct ix *x)
{
    memset(x, 0, sizeof *x);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        x->base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (x->base == MAP_FAILED)
            x->base = NULL;
        x->len = (size_t)st.st_size;
    }
    close(fd);
    CHECK(x->base != NULL);
    if (!x->base || x->len < sizeof *x->h)
        return;
    const struct hfs3_index_header *h = x->h = x->base;
    CHECK(memcmp(h->magic, HFS3_INDEX_MAGIC, 8) == 0);
    CHECK_EQ_INT(h->version, HFS3_INDEX_VERSION);
    CHECK_EQ_INT(h->file_size, x->len);
    CHECK_EQ_INT(h->entries_off, sizeof *h);
    CHECK_EQ_INT(h->children_off, h->entries_off + (uint64_t)h->n_entries * sizeof *x->e);
    CHECK(h->entries_off % 8 == 0 && h->children_off % 8 == 0 && h->strings_off % 8 == 0);
    CHECK(h->strings_off >= h->children_off + (uint64_t)h->n_children * 4);
    CHECK_EQ_INT(h->strings_off + h->strings_len, x->len);
    CHECK_EQ_INT(h->n_children, h->n_entries - 1);   /* every entry but the root has one parent */
    if (h->file_size != x->len || h->strings_off + h->strings_len != x->len || h->strings_len == 0)
        return;
    x->e = (const void *)((const char *)x->base + h->entries_off);
    x->kids = (const void *)((const char *)x->base + h->children_off);
    x->s = (const char *)x->base + h->strings_off;
    CHECK_EQ_INT(x->s[h->strings_len - 1], 0);
    x->ok = 1;
}

static void ix_unmap(struct ix *x)
{
    if (x->base)
        munmap(x->base, x->len);
    x->base = NULL;
}

/* Entry number of path, HFS3_INDEX_NONE when absent. */
static uint32_t ix_find(const struct ix *x, const char *path)
{
    for (uint32_t i = 0; x->ok && i < x->h->n_entries; i++)
        if (!strcmp(x->s + x->e[i].path_off, path))
            return i;
    return HFS3_INDEX_NONE;
}

/* The names of dir's children, in stored order, joined with ','. */
static const char *ix_children(const struct ix *x, const char *dir, char *out, size_t n)
{
    out[0] = 0;
    uint32_t d = ix_find(x, dir);
    if (d == HFS3_INDEX_NONE || x->e[d].type != HFS3_IX_DIR)
        return "(not a dir)";
    size_t o = 0;
    for (uint32_t i = 0; i < x->e[d].child_count; i++) {
        const struct hfs3_index_entry *c = &x->e[x->kids[x->e[d].child_first + i]];
        o += (size_t)snprintf(out + o, n - o, "%s%s", i ? "," : "", x->s + c->name_off);
        if (o >= n)
            return "(too long)";
    }
    return out;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode : 0;
}

static void check_entries(void)
{
    make_root();
    hfs3_manifest *m = small_manifest("flat");
    CHECK(m != NULL);
    char mdir[128], p[256];
    snprintf(mdir, sizeof mdir, "%s/mounts", root);
    CHECK_EQ_INT(mkdir(mdir, 0700), 0);
    snprintf(mdir, sizeof mdir, "%s/mounts/0123456789abcdef", root);
    CHECK_EQ_INT(mkdir(mdir, 0700), 0);
    int rc = m ? hfs3_index_install(m, mdir) : -1;
    if (rc)
        fprintf(stderr, "install: %s\n", hfs3_errmsg());
    CHECK_EQ_INT(rc, 0);
    snprintf(p, sizeof p, "%s/index", mdir);
    struct ix x;
    ix_map(p, &x);
    if (!x.ok || !m)
        goto out;
    const struct hfs3_index_header *h = x.h;
    CHECK_EQ_INT(h->n_entries, m->n + 1);
    CHECK_EQ_INT(h->layout, 0);
    /* the root, then the manifest's entries in its order */
    CHECK_EQ_INT(x.e[0].type, HFS3_IX_DIR);
    CHECK_EQ_INT(x.e[0].parent, 0);
    CHECK_EQ_STR(x.s + x.e[0].path_off, "");
    CHECK_EQ_INT(x.e[0].path_len, 0);
    for (size_t i = 0; i < m->n; i++) {
        const struct hfs3_index_entry *y = &x.e[i + 1];
        const char *path = x.s + y->path_off;
        CHECK_EQ_STR(path, m->entries[i].path);
        CHECK_EQ_INT(y->path_len, strlen(m->entries[i].path));
        CHECK_EQ_INT(y->type, (uint32_t)m->entries[i].type);   /* HFS3_IX_* match the manifest's values */
        const char *slash = strrchr(path, '/');
        CHECK_EQ_STR(x.s + y->name_off, slash ? slash + 1 : path);
        CHECK_EQ_INT(y->name_off + y->name_len, y->path_off + y->path_len);
        /* the parent is the dir entry holding the path's head */
        char head[256];
        snprintf(head, sizeof head, "%.*s", slash ? (int)(slash - path) : 0, path);
        CHECK_EQ_INT(y->parent, ix_find(&x, head));
    }
    uint32_t a = ix_find(&x, "a.txt"), b = ix_find(&x, "dir/b.bin");
    CHECK(a != HFS3_INDEX_NONE && b != HFS3_INDEX_NONE);
    if (a == HFS3_INDEX_NONE || b == HFS3_INDEX_NONE)
        goto out;
    unsigned char want[32];
    hfs3_sha256("abc", 3, want);
    CHECK(memcmp(x.e[a].sha256, want, 32) == 0);
    CHECK_EQ_INT(x.e[a].size, 3);
    CHECK_EQ_INT(x.e[a].mtime, 1764496800);
    CHECK_EQ_INT(x.e[b].size, 4831838208ULL);
    /* children: contiguous runs, sorted bytewise by name */
    char buf[256];
    CHECK_EQ_STR(ix_children(&x, "", buf, sizeof buf), "B,a.txt,dangling,dir,empty,link-a");
    CHECK_EQ_STR(ix_children(&x, "dir", buf, sizeof buf), "a-b,b.bin,chain,sub,up");
    CHECK_EQ_STR(ix_children(&x, "dir/sub", buf, sizeof buf), "c.txt");
    CHECK_EQ_STR(ix_children(&x, "empty", buf, sizeof buf), "");
    for (uint32_t i = 0; i < h->n_entries; i++)
        if (x.e[i].type != HFS3_IX_DIR)
            CHECK_EQ_INT(x.e[i].child_count, 0);
    /* symlinks: the target byte for byte, and the final non-symlink entry */
    uint32_t la = ix_find(&x, "link-a"), up = ix_find(&x, "dir/up"), ch = ix_find(&x, "dir/chain"),
             dg = ix_find(&x, "dangling");
    CHECK(la != HFS3_INDEX_NONE && up != HFS3_INDEX_NONE && ch != HFS3_INDEX_NONE && dg != HFS3_INDEX_NONE);
    if (la == HFS3_INDEX_NONE || up == HFS3_INDEX_NONE || ch == HFS3_INDEX_NONE || dg == HFS3_INDEX_NONE)
        goto out;
    CHECK_EQ_STR(x.s + x.e[la].target_off, "a.txt");
    CHECK_EQ_INT(x.e[la].target_len, 5);
    CHECK_EQ_INT(x.e[la].resolved, a);
    CHECK_EQ_STR(x.s + x.e[ch].target_off, "../link-a");
    CHECK_EQ_INT(x.e[ch].resolved, a);
    CHECK_EQ_INT(x.e[up].resolved, 0);
    CHECK_EQ_INT(x.e[dg].resolved, HFS3_INDEX_NONE);
    CHECK_EQ_INT(x.e[a].resolved, HFS3_INDEX_NONE);
    /* the skeleton: one real directory per dir entry, never a placeholder file */
    snprintf(p, sizeof p, "%s/tree", mdir);
    CHECK(S_ISDIR(mode_of(p)));
    snprintf(p, sizeof p, "%s/tree/dir/sub", mdir);
    CHECK(S_ISDIR(mode_of(p)));
    snprintf(p, sizeof p, "%s/tree/empty", mdir);
    CHECK(S_ISDIR(mode_of(p)));
    snprintf(p, sizeof p, "%s/tree/a.txt", mdir);
    CHECK_EQ_INT(mode_of(p), 0);
    snprintf(p, sizeof p, "%s/tree/link-a", mdir);
    CHECK_EQ_INT(mode_of(p), 0);
out:
    ix_unmap(&x);
    hfs3_manifest_free(m);
    remove_root();
}

/* Modes come from the cache's rule, whatever the umask: private 0700 dirs and a 0400 index; under a shared
 * CACHE/mounts (setgid, group-writable) 03770 dirs (setgid + sticky) and a 0440 index. */
static void check_modes(void)
{
    mode_t old = umask(077);
    for (int shared = 0; shared < 2; shared++) {
        make_root();
        hfs3_manifest *m = small_manifest("hf-cache");
        CHECK(m != NULL);
        char mounts[128], mdir[160], p[256];
        snprintf(mounts, sizeof mounts, "%s/mounts", root);
        CHECK_EQ_INT(mkdir(mounts, 0700), 0);
        if (shared)
            CHECK_EQ_INT(chmod(mounts, 02770), 0);
        /* the mount dir as a shim creates it (mkdir 0700 under the umask): its own mode does not decide */
        snprintf(mdir, sizeof mdir, "%s/0123456789abcdef", mounts);
        CHECK_EQ_INT(mkdir(mdir, 0700), 0);
        CHECK_EQ_INT(m ? hfs3_index_install(m, mdir) : -1, 0);
        /* the index keeps its owner's write bit: only blobs have none (include/hfs3/serve.h) */
        mode_t dmode = shared ? 03770 : 0700, fmode = shared ? 0640 : 0600;
        const char *dirs[] = {"tree", "tree/dir", "tree/dir/sub", "tree/empty"};
        for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
            snprintf(p, sizeof p, "%s/%s", mdir, dirs[i]);
            CHECK_EQ_INT(mode_of(p) & 07777, dmode);
        }
        snprintf(p, sizeof p, "%s/index", mdir);
        CHECK_EQ_INT(mode_of(p) & 07777, fmode);
        struct ix x;
        ix_map(p, &x);
        CHECK(x.ok && x.h->layout == 1);
        ix_unmap(&x);
        hfs3_manifest_free(m);
        remove_root();
    }
    umask(old);
}

/* A reinstall renames a new file into place: a mapping of the old one keeps the old content, tree/ only
 * grows, and a missing mount dir is an error with a message. */
static void check_reinstall(void)
{
    make_root();
    hfs3_manifest *m1 = small_manifest("flat"), *m2 = hfs3_manifest_new("flat", NULL);
    hfs3_entry e = file_entry("other/x.txt", 1, "x");
    CHECK(m1 && m2 && hfs3_manifest_add(m2, &e) == 0 && hfs3_manifest_finish(m2) == 0);
    char mdir[128], p[256];
    snprintf(mdir, sizeof mdir, "%s/mounts", root);
    CHECK_EQ_INT(mkdir(mdir, 0700), 0);
    snprintf(mdir, sizeof mdir, "%s/mounts/k", root);
    CHECK_EQ_INT(mkdir(mdir, 0700), 0);
    snprintf(p, sizeof p, "%s/index", mdir);
    struct ix old, now;
    memset(&old, 0, sizeof old);
    memset(&now, 0, sizeof now);
    if (!m1 || !m2)
        goto out;
    CHECK_EQ_INT(hfs3_index_install(m1, mdir), 0);
    ix_map(p, &old);
    struct stat st1, st2;
    CHECK_EQ_INT(stat(p, &st1), 0);
    CHECK_EQ_INT(hfs3_index_install(m2, mdir), 0);
    CHECK_EQ_INT(stat(p, &st2), 0);
    CHECK(st1.st_ino != st2.st_ino);   /* a new file, not a rewrite of the mapped one */
    ix_map(p, &now);
    CHECK(old.ok && now.ok);
    if (old.ok && now.ok) {
        CHECK_EQ_INT(old.h->n_entries, m1->n + 1);
        CHECK(ix_find(&old, "dir/chain") != HFS3_INDEX_NONE);
        CHECK_EQ_INT(now.h->n_entries, 3);
        CHECK(ix_find(&now, "other/x.txt") != HFS3_INDEX_NONE);
        CHECK(ix_find(&now, "dir") == HFS3_INDEX_NONE);
    }
    snprintf(p, sizeof p, "%s/tree/dir/sub", mdir);
    CHECK(S_ISDIR(mode_of(p)));   /* the old version's dirs stay for processes that mapped it */
    snprintf(p, sizeof p, "%s/tree/other", mdir);
    CHECK(S_ISDIR(mode_of(p)));
    snprintf(p, sizeof p, "%s/mounts/missing", root);
    CHECK_EQ_INT(hfs3_index_install(m2, p), -ENOENT);
    CHECK(strstr(hfs3_errmsg(), "missing") != NULL);
out:
    ix_unmap(&old);
    ix_unmap(&now);
    hfs3_manifest_free(m1);
    hfs3_manifest_free(m2);
    remove_root();
}

/* A copy of the index at p with one corruption applied by fn (entries and children table at e, k). */
typedef void (*corrupt_fn)(struct hfs3_index_entry *e, uint32_t *k, const struct ix *x);
static int check_corrupt(const struct ix *x, corrupt_fn fn)
{
    void *copy = NULL;
    if (posix_memalign(&copy, 8, x->len))
        return -1;
    memcpy(copy, x->base, x->len);
    struct hfs3_index_header *h = copy;
    fn((struct hfs3_index_entry *)((char *)copy + h->entries_off), (uint32_t *)((char *)copy + h->children_off), x);
    int ok = hfs3_index_check(copy, x->len);
    free(copy);
    return ok;
}

/* dir/sub's run lists "dir": dir/sub/dir/sub/... forever (what os.walk(followlinks=True) recursed into) */
static void c_cycle_kid(struct hfs3_index_entry *e, uint32_t *k, const struct ix *x)
{
    k[e[ix_find(x, "dir/sub")].child_first] = ix_find(x, "dir");
}
/* the same cycle, the parents made to agree with it: dir's parent is dir/sub, which is in dir's run */
static void c_cycle_parent(struct hfs3_index_entry *e, uint32_t *k, const struct ix *x)
{
    uint32_t d = ix_find(x, "dir"), s = ix_find(x, "dir/sub"), c = ix_find(x, "dir/sub/c.txt");
    k[e[s].child_first] = d;   /* dir/sub lists dir, and the root no longer does (c.txt takes its place) */
    for (uint32_t j = 0; j < e[0].child_count; j++)
        if (k[e[0].child_first + j] == d)
            k[e[0].child_first + j] = c;
    e[d].parent = s;
    e[c].parent = 0;
}
/* a directory listed twice in its parent's run (another entry dropped) */
static void c_twice(struct hfs3_index_entry *e, uint32_t *k, const struct ix *x)
{
    uint32_t d = ix_find(x, "dir");
    k[e[d].child_first + 1] = k[e[d].child_first];
}
/* a file with children (the run of dir/sub) */
static void c_file_kids(struct hfs3_index_entry *e, uint32_t *k, const struct ix *x)
{
    (void)k;
    uint32_t a = ix_find(x, "a.txt"), s = ix_find(x, "dir/sub");
    e[a].child_first = e[s].child_first;
    e[a].child_count = e[s].child_count;
}
/* two runs overlap: the root's run claims one entry more, dir's one less */
static void c_overlap(struct hfs3_index_entry *e, uint32_t *k, const struct ix *x)
{
    (void)k;
    (void)x;
    e[0].child_count++;
}
static void c_none(struct hfs3_index_entry *e, uint32_t *k, const struct ix *x)
{
    (void)e;
    (void)k;
    (void)x;
}

/* The reader's check (hfs3_index_check, the shim's before it maps an index in) takes the writer's index and
 * refuses every children table that is not a tree. */
static void check_tree_rule(void)
{
    make_root();
    hfs3_manifest *m = small_manifest("flat");
    char mdir[128], p[256];
    snprintf(mdir, sizeof mdir, "%s/mounts", root);
    CHECK_EQ_INT(mkdir(mdir, 0700), 0);
    snprintf(mdir, sizeof mdir, "%s/mounts/0123456789abcdef", root);
    CHECK_EQ_INT(mkdir(mdir, 0700), 0);
    CHECK_EQ_INT(m ? hfs3_index_install(m, mdir) : -1, 0);
    snprintf(p, sizeof p, "%s/index", mdir);
    struct ix x;
    ix_map(p, &x);
    if (x.ok) {
        CHECK_EQ_INT(check_corrupt(&x, c_none), 1);
        CHECK_EQ_INT(check_corrupt(&x, c_cycle_kid), 0);
        CHECK_EQ_INT(check_corrupt(&x, c_cycle_parent), 0);
        CHECK_EQ_INT(check_corrupt(&x, c_twice), 0);
        CHECK_EQ_INT(check_corrupt(&x, c_file_kids), 0);
        CHECK_EQ_INT(check_corrupt(&x, c_overlap), 0);
    }
    ix_unmap(&x);
    hfs3_manifest_free(m);
    remove_root();
}

int main(void)
{
    TEST(check_entries);
    TEST(check_modes);
    TEST(check_reinstall);
    TEST(check_tree_rule);
    return t_done("test_index");
}
