/* hub.c - one mount for a whole Hugging Face hub prefix (docs/reference.md "One mount for a whole hub"). A configured mount
 * whose REMOTE has no manifest but repository folders is a hub: the helper's `_index` writes its repository list
 * to mounts/K/repos (sorted, one name per line). Its root lists those names as directories; each repository is
 * a sub-mount whose REMOTE is "<hub REMOTE>/<name>" (the same cache entry as a mount configured for it), made
 * when a path first names something in it (or opens, enters or lists it: sh_hub_late), its manifest loaded by
 * mount.c as any mount's. Listing the hub's root and stat of a repository itself claim no sub-mount and load no
 * manifest (the list says it is a directory; its inode is its skeleton's when the cache has one): `ls -la` or
 * os.walk's scandir + lstat of a hub of 100,000 repositories costs a stat each, starts no helper, logs nothing.
 * The list is checked again when older than HFS3_HUB_TTL, on a listing of the root or a lookup of a
 * repository-like name not in it.
 *
 * Sub-mounts are numbered after the configured ones and live in chunks of slots (shim.h's sh_sub_slot): chunk
 * k, SH_SUB_CHUNK0 << k slots, is mapped when its first slot is claimed and published by compare-and-swap in a
 * directory of SH_SUB_NCHUNK pointers (the loser of a race unmaps its own), so a process maps slots for the
 * repositories it enters, never a reserve (issue 41 item 4: the reserve of 2^20 slots was 9.2 GiB of address
 * space in every process, and an allocation under `ulimit -v` failed). A slot is claimed with one atomic add,
 * its chunk made sure of, filled, marked ready, then published in a hash table of slot numbers by
 * compare-and-swap; the table's pages are mapped the same way, when a slot number is first stored in one (a
 * reader that finds a page unmapped finds the bucket empty). Every pointer is published after what it points
 * to is written, and a slot's number after its chunk, so a reader never sees half of either. No lock anywhere
 * (a fork in another thread at worst leaves an unused slot or mapping), nothing is written in a vfork child;
 * mmap and compare-and-swap are safe in a signal handler. A list read is published as one pointer; an older
 * one is never unmapped (readers hold no reference), and a re-read that finds the same bytes keeps the old one. */
#include "shim.h"

#include <pthread.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SH_SUB_HASH (2 * SH_SUB_MAX)
#define SH_HASH_PAGE 4096   /* buckets per page of the hash table (16 KiB) */
#define SH_HUB_LIST_MAX (16 << 20)

long sh_hub_ttl = -1;    /* init.c: HFS3_HUB_TTL, else HFS3_MANIFEST_TTL */
int sh_nsubs;            /* sub-mount slots claimed (some may be unused: ready == 0) */
struct sh_mount *sh_sub_chunk[SH_SUB_NCHUNK];
/* the hash table of slot numbers: bucket b is sub_hash[b / SH_HASH_PAGE][b % SH_HASH_PAGE], slot number + 1,
 * 0 empty; a page is mapped when a number is first stored in it (a NULL page: all its buckets empty) */
static uint32_t *sub_hash[SH_SUB_HASH / SH_HASH_PAGE];
static int full_logged;

/* Maps size bytes and publishes them at *slot unless another thread did first: the published pointer, or NULL
 * when out of memory. Never in a vfork child (its mapping would be the parent's). */
static void *publish_map(void **slot, size_t size)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE), *z = NULL;
    if (p)
        return p;
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (__atomic_compare_exchange_n(slot, &z, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return p;
    munmap(p, size);   /* another thread's came first */
    return z;
}

/* Slot s with its chunk mapped (NULL: out of memory). */
static struct sh_mount *slot_make(int s)
{
    unsigned q = (unsigned)s + SH_SUB_CHUNK0;
    int k = 31 - __builtin_clz(q) - __builtin_ctz(SH_SUB_CHUNK0);
    if (k >= SH_SUB_NCHUNK || !publish_map((void **)&sh_sub_chunk[k], ((size_t)SH_SUB_CHUNK0 << k) *
                                                                          sizeof(struct sh_mount)))
        return NULL;
    return sh_sub_slot(s);
}

static uint32_t hash_get(size_t b)
{
    const uint32_t *pg = __atomic_load_n(&sub_hash[b / SH_HASH_PAGE], __ATOMIC_ACQUIRE);
    return pg ? __atomic_load_n(&pg[b % SH_HASH_PAGE], __ATOMIC_ACQUIRE) : 0;
}

struct sh_names {
    size_t len;   /* bytes of data: names, each ended by '\n', sorted bytewise */
    struct sh_failed *failed;   /* which of them failed to load (issue 33 item 4); NULL: not kept */
    char data[];
};

/* The repositories of one list that failed to load in this process: one bit per byte offset of a line start
 * (len / 8 bytes: 2 MiB for the largest list), so a failed repository holds no sub-mount slot and is not loaded
 * (nor logged) again; forgotten after HFS3_HUB_TTL online, as the slot of a broken one was looked at again. */
struct sh_failed {
    long epoch;              /* atomic: when the bits were last cleared */
    unsigned char bits[];
};

/* The line offset of name in the hub's current list (binary search over its lines), or -1; *sp the list. */
static long names_pos(const struct sh_mount *h, const char *name, size_t n, const struct sh_names **sp)
{
    const struct sh_names *s = __atomic_load_n((struct sh_names **)&h->names, __ATOMIC_ACQUIRE);
    if (sp)
        *sp = s;
    if (!s)
        return -1;
    const char *d = s->data;
    size_t lo = 0, hi = s->len;   /* both at line starts */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        while (mid > lo && d[mid - 1] != '\n')
            mid--;
        const char *e = memchr(d + mid, '\n', s->len - mid);
        size_t ln = (size_t)(e - (d + mid));
        int r = memcmp(d + mid, name, ln < n ? ln : n);
        if (r == 0)
            r = ln < n ? -1 : ln > n ? 1 : 0;
        if (r == 0)
            return (long)mid;
        if (r < 0)
            lo = (size_t)(e - d) + 1;
        else
            hi = mid;
    }
    return -1;
}

static int names_has(const struct sh_mount *h, const char *name, size_t n)
{
    return names_pos(h, name, n, NULL) >= 0;
}

/* 1 when repository name of hub h failed to load in this process (and, online, less than HFS3_HUB_TTL ago) */
static int failed_get(const struct sh_mount *h, const char *name, size_t n)
{
    const struct sh_names *s;
    long pos = names_pos(h, name, n, &s);
    if (pos < 0 || !s->failed)
        return 0;
    struct sh_failed *f = s->failed;
    long now = (long)time(NULL), ep = __atomic_load_n(&f->epoch, __ATOMIC_ACQUIRE);
    if (!sh_offline && (now - ep >= sh_hub_ttl || now < ep) && !sh_in_vfork() &&
        __atomic_compare_exchange_n(&f->epoch, &ep, now, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        memset(f->bits, 0, (s->len + 7) / 8);   /* bits are hints: a race costs one more load */
        return 0;
    }
    return (__atomic_load_n(&f->bits[pos / 8], __ATOMIC_ACQUIRE) >> (pos % 8)) & 1;
}

static void failed_set(const struct sh_mount *h, const char *name, size_t n)
{
    const struct sh_names *s;
    long pos = names_pos(h, name, n, &s);
    if (pos >= 0 && s->failed && !sh_in_vfork())
        __atomic_or_fetch(&s->failed->bits[pos / 8], (unsigned char)(1u << (pos % 8)), __ATOMIC_ACQ_REL);
}

/* Reads and checks mounts/K/repos of hub h (the shim's trust rules, as for the index); publishes it unless
 * the current list has the same bytes. *mtime: the file's. 1 read, 0 none or refused (logged). */
static int read_list(struct sh_mount *h, time_t *mtime)
{
    SH_SCRATCH(t);
    char *p = t->a;
    snprintf(p, SH_SCR, "%s/repos", h->dir);
    int fd = sh_cache_open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == ELOOP)
            sh_log(0, "%s: a symlink: not trusted, not read", p);
        return 0;
    }
    struct stat st;
    if (!sh_trusted_file(fd, p) || sh_r.fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SH_HUB_LIST_MAX) {
        sh_r.close(fd);
        return 0;
    }
    size_t len = (size_t)st.st_size, map = sizeof(struct sh_names) + len + 1;
    struct sh_names *s = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        sh_r.close(fd);
        return 0;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t k = read(fd, s->data + got, len - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    sh_r.close(fd);
    s->len = got;
    /* every line a repository name, strictly increasing: what the helper writes, and what names_has needs */
    int ok = got == len && (got == 0 || s->data[got - 1] == '\n');
    const char *prev = NULL;
    size_t prevn = 0;
    for (size_t i = 0; ok && i < got;) {
        const char *e = memchr(s->data + i, '\n', got - i);
        size_t n = (size_t)(e - (s->data + i));
        int c = prev ? memcmp(prev, s->data + i, prevn < n ? prevn : n) : -1;
        if (!hfs3_hub_name_okn(s->data + i, n) || c > 0 || (c == 0 && prevn >= n))
            ok = 0;
        prev = s->data + i;
        prevn = n;
        i += n + 1;
    }
    if (!ok) {
        munmap(s, map);
        sh_log(0, "%s: not a valid repository list: not used", p);
        return 0;
    }
    *mtime = st.st_mtime;
    const struct sh_names *old = __atomic_load_n((struct sh_names **)&h->names, __ATOMIC_ACQUIRE);
    if (old && old->len == s->len && !memcmp(old->data, s->data, s->len)) {
        munmap(s, map);
        return 1;
    }
    struct sh_failed *f = mmap(NULL, sizeof *f + (len + 7) / 8, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f != MAP_FAILED) {
        f->epoch = (long)time(NULL);
        s->failed = f;
    }
    mprotect(s, map, PROT_READ);
    __atomic_store_n((struct sh_names **)&h->names, s, __ATOMIC_RELEASE);
    return 1;
}

int sh_hub_load(struct sh_mount *m)
{
    time_t mt;
    if (m->sub || !read_list(m, &mt))
        return 0;
    m->hub = 1;
    __atomic_store_n(&m->hub_checked, (long)mt, __ATOMIC_RELEASE);
    return 1;
}

struct hub_fresh {
    const char *path;
    long long seen;
};

static long long stamp(const struct stat *st)
{
    return st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec + (long long)st->st_ino;
}

/* with the hub's lock held: another process just checked (the file changed while we waited), or it is fresh */
static int list_fresh(const void *arg)
{
    const struct hub_fresh *f = arg;
    struct stat st;
    if (sh_r.stat(f->path, &st) < 0)
        return 0;
    time_t now = time(NULL);
    return stamp(&st) != f->seen || (now - st.st_mtime < sh_hub_ttl && now >= st.st_mtime);
}

/* The list again when it is older than HFS3_HUB_TTL (never offline or in a vfork child; one thread at a time,
 * the others go on with the current list). */
static void hub_refresh(struct sh_mount *h)
{
    if (sh_offline || sh_in_vfork())
        return;
    long now = (long)time(NULL), c = __atomic_load_n(&h->hub_checked, __ATOMIC_ACQUIRE);
    if (now - c < sh_hub_ttl && now >= c)
        return;
    int z = 0;
    if (!__atomic_compare_exchange_n(&h->hub_busy, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    int cs;   /* no cancellation while hub_busy is 1: it would stay 1, and the list never be checked again */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
    SH_SCRATCH(t);
    char *p = t->a, *lk = t->b;
    snprintf(p, SH_SCR, "%s/repos", h->dir);
    snprintf(lk, SH_SCR, "%s/lock", h->dir);
    struct stat st;
    struct hub_fresh f = {p, sh_r.stat(p, &st) == 0 ? stamp(&st) : 0};
    char *argv[] = {NULL, "_index", "--lock-fd", "3", h->remote, NULL};
    struct sh_lockjob j = {lk, list_fresh, &f, argv, 0, NULL, NULL, NULL, 0, 0, NULL};
    sh_log(2, "%s: checking the repository list of %s", h->path, h->remote);
    sh_run_locked(&j);
    time_t mt = 0;
    read_list(h, &mt);
    now = (long)time(NULL);
    __atomic_store_n(&h->hub_checked, (long)mt > now ? (long)mt : now, __ATOMIC_RELEASE);
    __atomic_store_n(&h->hub_busy, 0, __ATOMIC_RELEASE);
    pthread_setcancelstate(cs, NULL);
}

static uint64_t hash(int hub, const char *name, size_t n)
{
    uint64_t v = 1469598103934665603ULL ^ (uint64_t)hub;
    for (size_t i = 0; i < n; i++)
        v = (v ^ (unsigned char)name[i]) * 1099511628211ULL;
    return v;
}

static int sub_is(int i, int hub, const char *name, size_t n)
{
    const struct sh_mount *m = sh_mnt(i), *h = &sh_mounts[hub];
    return m && __atomic_load_n(&m->ready, __ATOMIC_ACQUIRE) && m->hubm == hub && m->len == h->len + 1 + n &&
           !memcmp(m->path + h->len + 1, name, n);
}

/* The sub-mount already made for repository name of hub, or -1. */
static int sub_find(int hub, const char *name, size_t n)
{
    const size_t mask = SH_SUB_HASH - 1;
    size_t b = (size_t)hash(hub, name, n) & mask;
    for (size_t i = 0; i < SH_SUB_HASH; i++, b = (b + 1) & mask) {
        uint32_t v = hash_get(b);
        if (!v)
            break;
        if (sub_is(sh_nmounts + (int)v - 1, hub, name, n))
            return sh_nmounts + (int)v - 1;
    }
    return -1;
}

/* Fills m as the sub-mount of repository name of hub (path, REMOTE, key, dir). 0, or -ENAMETOOLONG. */
static int sub_fill(struct sh_mount *m, int hub, const char *name, size_t n)
{
    const struct sh_mount *h = &sh_mounts[hub];
    size_t rl = strlen(h->remote);
    while (rl > 0 && h->remote[rl - 1] == '/')
        rl--;
    if (h->len + 1 + n >= sizeof m->path || rl + 1 + n >= sizeof m->remote)
        return -ENAMETOOLONG;
    memcpy(m->path, h->path, h->len);
    m->path[h->len] = '/';
    memcpy(m->path + h->len + 1, name, n);
    m->path[h->len + 1 + n] = 0;
    m->len = h->len + 1 + n;
    m->first_len = h->first_len;
    memcpy(m->remote, h->remote, rl);
    m->remote[rl] = '/';
    memcpy(m->remote + rl + 1, name, n);
    m->remote[rl + 1 + n] = 0;
    hfs3_mountkey_as(m->remote, sh_verify_foreign, (unsigned)geteuid(), m->key);
    if ((size_t)snprintf(m->dir, sizeof m->dir, "%s/mounts/%s", sh_cache, m->key) >= sizeof m->dir)
        return -ENAMETOOLONG;
    m->sub = 1;
    m->hubm = hub;
    return 0;
}

/* The sub-mount of repository name of hub: found, or loaded and then given a slot. -errno when none can be had:
 * -EIO for a repository that failed to load (issue 33 item 4: it holds no slot, so that a hub of 100,000
 * repositories, most not cached, offline, leaves room for every cached one; it is not loaded again, and only the
 * hub's first failure is logged, its count at exit), -ENOSPC when sh_sub_max repositories have slots (the
 * k >= sh_sub_max below: issue 42's off-by-one), -ENOMEM when no chunk could be mapped for its slot. The load runs
 * on a private copy (mount.c's sh_mount_probe), published into a slot only when it has an index. */
static int hub_sub(int hub, const char *name, size_t n)
{
    const size_t mask = SH_SUB_HASH - 1;
    size_t home = (size_t)hash(hub, name, n) & mask, b;
    int found = sub_find(hub, name, n);
    if (found >= 0)
        return found;
    if (sh_in_vfork())
        return -EAGAIN;
    if (failed_get(&sh_mounts[hub], name, n))
        return -EIO;
    struct sh_mount *c = mmap(NULL, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED)
        return -ENOMEM;
    int rc = sub_fill(c, hub, name, n);
    if (rc == 0 && sh_mount_probe(c) < 0) {
        failed_set(&sh_mounts[hub], name, n);
        rc = -EIO;
    }
    if (rc < 0) {
        munmap(c, sizeof *c);
        return rc;
    }
    if ((found = sub_find(hub, name, n)) >= 0) {   /* another thread published it while this one loaded */
        munmap(c, sizeof *c);   /* (its index mapping stays: a few pages, once per such race) */
        return found;
    }
    int k = __atomic_fetch_add(&sh_nsubs, 1, __ATOMIC_ACQ_REL);
    if (k >= sh_sub_max) {
        __atomic_store_n(&sh_nsubs, sh_sub_max, __ATOMIC_RELEASE);
        munmap(c, sizeof *c);
        if (!__atomic_exchange_n(&full_logged, 1, __ATOMIC_ACQ_REL))
            sh_log(0, "%s: more than %d repositories entered in one process (the most one process enters): %.*s "
                   "and later ones fail", sh_mounts[hub].path, sh_sub_max, (int)n, name);
        return -ENOSPC;
    }
    struct sh_mount *m = slot_make(k);
    if (!m) {   /* no memory for its chunk: the slot number stays unused */
        munmap(c, sizeof *c);
        return -ENOMEM;
    }
    c->idx = sh_nmounts + k;
    memcpy(m, c, sizeof *m);   /* loaded (state 2), ready 0 until published below */
    munmap(c, sizeof *c);
    __atomic_store_n(&m->ready, 1, __ATOMIC_RELEASE);
    for (b = home;; b = (b + 1) & mask) {
        uint32_t v = 0, *pg = publish_map((void **)&sub_hash[b / SH_HASH_PAGE], SH_HASH_PAGE * sizeof *pg);
        if (!pg) {
            __atomic_store_n(&m->ready, 0, __ATOMIC_RELEASE);
            return -ENOMEM;
        }
        if (__atomic_compare_exchange_n(&pg[b % SH_HASH_PAGE], &v, (uint32_t)k + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return sh_nmounts + k;
        if (sub_is(sh_nmounts + (int)v - 1, hub, name, n)) {
            /* another thread made it first: ours stays unused */
            __atomic_store_n(&m->ready, 0, __ATOMIC_RELEASE);
            return sh_nmounts + (int)v - 1;
        }
    }
}

/* At exit: how many repositories of each hub failed to load (only the first was logged, with its reason). */
__attribute__((destructor)) static void hub_failures(void)
{
    for (int i = 0; i < sh_nmounts; i++) {
        int k = __atomic_load_n(&sh_mounts[i].sub_failed, __ATOMIC_ACQUIRE);
        if (sh_mounts[i].hub && k > 1)
            sh_log(0, "%s: %d repositories of %s could not be loaded in this process: the first said why above, "
                   "the others were not logged", sh_mounts[i].path, k, sh_mounts[i].remote);
    }
}

void sh_hub_classify(struct sh_loc *l)
{
    if (l->m >= sh_nmounts || !*l->rel)
        return;
    struct sh_mount *h = &sh_mounts[l->m];
    if (sh_mount_get(h) < 0 || !h->hub)
        return;
    const char *name = l->rel;
    size_t n = strcspn(name, "/");
    if (!names_has(h, name, n)) {
        /* a repository added since the list was read is seen once the list is older than the TTL */
        if (!hfs3_hub_name_okn(name, n))
            return;
        hub_refresh(h);
        if (!names_has(h, name, n))
            return;
    }
    /* the repository itself: its sub-mount only once something needs more than its stat (sh_hub_late) */
    int i = name[n] ? hub_sub(l->m, name, n) : sub_find(l->m, name, n);
    if (i < 0)
        return;
    l->m = i;
    l->rel = name + n + (name[n] == '/');
}

int sh_hub_late(const struct sh_loc *l)
{
    const struct sh_mount *h = sh_mnt(l->m);
    size_t n = strcspn(l->rel, "/");
    if (!h->hub || l->raw || !names_has(h, l->rel, n))
        return -ENOENT;
    int k = hub_sub(l->m, l->rel, n);
    if (l->rel[n])
        return k < 0 ? k : -ENOENT;   /* inside a repository that has no slot: why (EIO: it failed to load) */
    return k;
}

/* CACHE/mounts/<key>/tree of repository name of hub h into out: the directory stat gives it once its manifest
 * is in (tree.c). 0, or -ENAMETOOLONG. */
static int repo_tree(const struct sh_mount *h, const char *name, size_t n, char *out, size_t outn)
{
    size_t rl = strlen(h->remote);
    while (rl > 0 && h->remote[rl - 1] == '/')
        rl--;
    char key[17];
    if (rl + 1 + n >= SH_SCR || (size_t)snprintf(out, outn, "%.*s/%.*s", (int)rl, h->remote, (int)n, name) >= outn)
        return -ENAMETOOLONG;
    hfs3_mountkey(out, key);
    return (size_t)snprintf(out, outn, "%s/mounts/%s/tree", sh_cache, key) < outn ? 0 : -ENAMETOOLONG;
}

/* The inode of repository name of hub h, from its logical path (tree.c's for a directory without a skeleton): the
 * same in the hub's listing, in stat before and after its manifest is loaded, and in fstat of a descriptor on it,
 * so that a walk (find's fts compares lstat with fstat) never sees it change when the repository's skeleton is
 * made on first use; and no skeleton has to be made, in a cache that may be read-only, for an lstat. */
static ino_t repo_ino(const struct sh_mount *h, const char *name, size_t n)
{
    uint64_t v = 1469598103934665603ULL;   /* tree.c's fnv("ancestor", path) */
    for (const unsigned char *p = (const unsigned char *)"ancestor"; *p; p++)
        v = (v ^ *p) * 1099511628211ULL;
    v = (v ^ '/') * 1099511628211ULL;
    for (size_t i = 0; i < h->len + 1 + n; i++)
        v = (v ^ (unsigned char)(i < h->len ? h->path[i] : i == h->len ? '/' : name[i - h->len - 1])) *
            1099511628211ULL;
    return (ino_t)((v >> 2) | (1ULL << 62));
}

ino_t sh_hub_root_ino(const struct sh_mount *sub)
{
    const struct sh_mount *h = &sh_mounts[sub->hubm];
    return repo_ino(h, sub->path + h->len + 1, sub->len - h->len - 1);
}

/* The stat of repository name of hub h without its sub-mount: its skeleton's when there is one (never made
 * here), else an empty read-only directory's; the inode repo_ino's. */
static void repo_stat(const struct sh_mount *h, const char *name, size_t n, char *buf, struct stat *st)
{
    if (repo_tree(h, name, n, buf, SH_SCR) == 0 && sh_r.stat(buf, st) == 0 && S_ISDIR(st->st_mode)) {
        st->st_mode = S_IFDIR | 0555;
    } else {
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
        st->st_uid = getuid();
        st->st_gid = getgid();
        st->st_blksize = 4096;
    }
    st->st_ino = repo_ino(h, name, n);
}

int sh_hub_stat(const struct sh_loc *l, struct stat *st)
{
    const struct sh_mount *h = sh_mnt(l->m);
    if (__builtin_expect(!h->hub, 1) || !*l->rel || l->raw || l->slash)
        return 0;
    size_t n = strlen(l->rel);
    if (l->rel[strcspn(l->rel, "/")] || !names_has(h, l->rel, n))
        return 0;
    SH_SCRATCH(t);
    repo_stat(h, l->rel, n, t->a, st);
    return 1;
}

int sh_hub_list(int hub, int (*fn)(void *, const struct sh_dent *), void *arg)
{
    struct sh_mount *h = &sh_mounts[hub];
    hub_refresh(h);
    const struct sh_names *s = __atomic_load_n((struct sh_names **)&h->names, __ATOMIC_ACQUIRE);
    SH_SCRATCH(t);
    struct sh_dent d;
    struct stat st;
    d.type = DT_DIR;
    for (size_t i = 0; s && i < s->len;) {
        const char *e = memchr(s->data + i, '\n', s->len - i);
        size_t n = (size_t)(e - (s->data + i));
        memcpy(d.name, s->data + i, n);
        d.name[n] = 0;
        i += n + 1;
        /* the inode a stat of it will give (no sub-mount claimed: a listing of 100,000 must not use them up) */
        repo_stat(h, d.name, n, t->a, &st);
        d.ino = st.st_ino;
        int rc = fn(arg, &d);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A real path under CACHE/mounts/<r> (r: "<key>/tree..."), no configured mount's: the skeleton of a repository
 * of a hub (a cwd inherited from a process that had gone there). Found among the sub-mounts made, or by the
 * mount's `remote` file: a hub's REMOTE plus the last component of it must give the same key. 1 and out. */
int sh_hub_map(const char *r, char *out, size_t outn)
{
    if (strlen(r) < 21 || strncmp(r + 16, "/tree", 5) || (r[21] && r[21] != '/'))
        return 0;
    int ns = __atomic_load_n(&sh_nsubs, __ATOMIC_ACQUIRE);
    for (int i = 0; i < ns && i < sh_sub_max; i++) {
        const struct sh_mount *m = sh_sub_slot(i);
        if (m && __atomic_load_n(&m->ready, __ATOMIC_ACQUIRE) && !strncmp(r, m->key, 16))
            return (size_t)snprintf(out, outn, "%s%s", m->path, r + 21) < outn;
    }
    if (sh_in_vfork() || sh_cache_ready() < 0)
        return 0;
    SH_SCRATCH(t);
    char *rem = t->a, *cand = t->b, key[17];
    snprintf(t->c, SH_SCR, "%s/mounts/%.16s/remote", sh_cache, r);
    sh_read_line(t->c, rem, 1024);
    size_t rl = strlen(rem);
    while (rl > 0 && rem[rl - 1] == '/')
        rem[--rl] = 0;
    const char *last = strrchr(rem, '/');
    if (!last || !hfs3_hub_name_okn(last + 1, strlen(last + 1)))
        return 0;
    last++;
    for (int i = 0; i < sh_nmounts; i++) {
        struct sh_mount *h = &sh_mounts[i];
        size_t hl = strlen(h->remote);
        while (hl > 0 && h->remote[hl - 1] == '/')
            hl--;
        snprintf(cand, SH_SCR, "%.*s/%s", (int)hl, h->remote, last);
        hfs3_mountkey_as(cand, sh_verify_foreign, (unsigned)geteuid(), key);
        if (strncmp(key, r, 16) || sh_mount_get(h) < 0 || !h->hub)
            continue;
        int k = hub_sub(i, last, strlen(last));
        if (k >= 0)
            return (size_t)snprintf(out, outn, "%s%s", sh_mnt(k)->path, r + 21) < outn;
    }
    return 0;
}
