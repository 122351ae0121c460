/* index.h - the binary index of a manifest that the helper writes into the cache and the shim maps.
 * libc-only on purpose: the shim includes this header. Layout and invariants: docs/internals.md.
 * The format details below are owned together by lib/index.c (writer) and shim/ (reader). */
#ifndef HFS3_INDEX_H
#define HFS3_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* 1 when name[0..n) may be a repository of a hub (one line of mounts/<key>/repos): `models--`, `datasets--` or
 * `spaces--` and more after it, at most 255 bytes, no control character, DEL or '/'. One rule for the helper that
 * writes the list (lib/hub.c) and the shim that reads it back (shim/hub.c). */
static inline int hfs3_hub_name_okn(const char *s, size_t n)
{
    static const char *const kinds[] = {"models--", "datasets--", "spaces--"};
    static const size_t lens[] = {8, 10, 8};
    if (n == 0 || n > 255)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f || s[i] == '/')
            return 0;
    for (int i = 0; i < 3; i++)
        if (n > lens[i] && !__builtin_memcmp(s, kinds[i], lens[i]))
            return 1;
    return 0;
}

/* rclone's connection-string REMOTEs (`name,key=value,...:bucket/p`) carry secrets in the REMOTE itself, which would
 * then sit in the helper's argv (readable by every local user) and in messages: they are refused. Returns 1 when
 * spec is one (a ',' before any ':' but a leading one, rclone's on-the-fly `:s3,key=value:bucket/p`; not s3://),
 * with *namelen the length of the name before the ',' that a message may repeat (at most 64: nothing after the
 * comma), else 0. One rule for the helper (lib/config.c,
 * hfs3_remote_parse) and the shim (shim/init.c, which then never starts a helper for it), with one message:
 * printf HFS3_CONNSTR_MSG with *namelen, spec. */
static inline int hfs3_remote_connstr(const char *spec, int *namelen)
{
    if (spec[0] == 's' && spec[1] == '3' && spec[2] == ':' && spec[3] == '/' && spec[4] == '/')
        return 0;
    size_t comma = spec[0] == ':'; /* rclone's on-the-fly backend, ":s3,secret_access_key=...:bucket/p" */
    while (spec[comma] && spec[comma] != ',' && spec[comma] != ':')
        comma++;
    if (spec[comma] != ',')
        return 0;
    *namelen = comma < 64 ? (int)comma : 64;
    return 1;
}
#define HFS3_CONNSTR_MSG                                                                                       \
    "REMOTE '%.*s,...': rclone connection-string remotes are not supported (they would put credentials in "  \
    "process arguments); define the remote in rclone.conf or with RCLONE_CONFIG_<NAME>_* variables"

/* The name of mounts/<key>/ for a REMOTE: FNV-1a 64 of its canonical spelling, as 16 lowercase hex digits +
 * NUL. Spellings that name the same bucket and prefix the same way share a key: `name:bucket/prefix`,
 * `name:bucket/prefix/`, `name:bucket//prefix//`, `name:/bucket/prefix` (the slashes after the bucket and at
 * the end, and the one after "name:", which the helper drops when it resolves the prefix, are dropped here too;
 * slashes inside the prefix are part of the S3 keys and stay). A remote name and s3:// get different keys:
 * `minio:b/p` and `s3://b/p` do not share one, since only the helper can read the configuration that says where
 * each one leads (the shim cannot). The helper records in mounts/K/canonical what K resolves to
 * (hfs3_remote_identity), so that `_index` finds a manifest cached under another spelling of the same endpoint,
 * bucket and prefix (lib/cache.c). Both the helper and the shim key mounts with this function. */
static inline uint64_t hfs3_mountkey_hash_(const char *remote)
{
    uint64_t h = 1469598103934665603ULL;
    const char *p = remote, *b = NULL, *colon_end = NULL;
    /* where the bucket starts: after "s3://", or after "name:" (no '/' in name, not "name://"); rclone reads
     * "name:/bucket" as "name:bucket", and so does the helper: that one slash is dropped */
    if (p[0] == 's' && p[1] == '3' && p[2] == ':' && p[3] == '/' && p[4] == '/')
        b = colon_end = p + 5;
    else
        for (const char *q = p; *q && *q != '/'; q++)
            if (*q == ':') {
                if (q != p && !(q[1] == '/' && q[2] == '/'))
                    b = (colon_end = q + 1) + (q[1] == '/');
                break;
            }
    const char *end = p + __builtin_strlen(p), *pre = end;
    if (b && *b && *b != '/') {
        const char *slash = b;
        while (*slash && *slash != '/')
            slash++;
        pre = slash;
        while (*pre == '/')
            pre++;
        while (end > pre && end[-1] == '/')
            end--;
        /* hash "head" (up to the bucket's end, without the slash dropped), then "/prefix" when there is one */
        for (const unsigned char *q = (const unsigned char *)p; q < (const unsigned char *)slash; q++) {
            if (q == (const unsigned char *)colon_end)
                q = (const unsigned char *)b;
            h ^= *q;
            h *= 1099511628211ULL;
        }
        if (end > pre) {
            h ^= '/';
            h *= 1099511628211ULL;
        }
    } else {
        pre = p; /* not a remote we can read: the string byte for byte */
    }
    for (const unsigned char *q = (const unsigned char *)pre; q < (const unsigned char *)end; q++) {
        h ^= *q;
        h *= 1099511628211ULL;
    }
    return h;
}

static inline void hfs3_mountkey_hex_(uint64_t h, char out[17])
{
    static const char hexd[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        out[i] = hexd[h & 15];
        h >>= 4;
    }
    out[16] = 0;
}

static inline void hfs3_mountkey(const char *remote, char out[17])
{
    hfs3_mountkey_hex_(hfs3_mountkey_hash_(remote), out);
}

/* The key of the mount directory a user works in: hfs3_mountkey, except under HFS3_VERIFY_FOREIGN=1 (own set),
 * where each user has a directory of its own (the key of the REMOTE followed by NUL and "uid=<uid>"), created
 * setgid + sticky in a shared cache and used only while it is the user's: a member can then neither write nor
 * replace nor remove what the user cached there, which the shared mounts/K (not sticky: every member's refresh
 * replaces its files) cannot promise. One rule for the helper (lib/cache.c) and the shim (shim/init.c, hub.c). */
static inline void hfs3_mountkey_as(const char *remote, int own, unsigned uid, char out[17])
{
    uint64_t h = hfs3_mountkey_hash_(remote);
    if (own) {
        char tail[24] = "\0uid=";
        int n = 5, k = 0;
        char digits[12];
        do
            digits[k++] = (char)('0' + uid % 10);
        while ((uid /= 10) && k < 12);
        while (k)
            tail[n++] = digits[--k];
        for (int i = 0; i < n; i++) {
            h ^= (unsigned char)tail[i];
            h *= 1099511628211ULL;
        }
    }
    hfs3_mountkey_hex_(h, out);
}

/* File layout (all little-endian, offsets from the start of the file, every section 8-byte aligned):
 *   struct hfs3_index_header
 *   struct hfs3_index_entry entries[n_entries]   entry 0 is the mount root (a dir, path ""), then the
 *                                                manifest's entries in manifest (bytewise path) order
 *   uint32_t children[n_children]                each dir's children: a contiguous run of entry numbers,
 *                                                sorted bytewise by name
 *   char strings[strings_len]                    NUL-terminated paths; a name is the tail of its path
 * Beside the index, hfs3_index_install() keeps mount_dir/tree/: one real directory per manifest directory
 * (directories only, never placeholder files), so that a chdir or a directory descriptor into a mount is a
 * real kernel object. Directories are only ever added to it, so a process that mapped an older index still
 * finds its directories. */
#define HFS3_INDEX_MAGIC "HFS3IDX1"
#define HFS3_INDEX_VERSION 1u
#define HFS3_INDEX_NONE 0xffffffffu

struct hfs3_index_header {
    char magic[8];           /* HFS3_INDEX_MAGIC, no NUL */
    uint32_t version;        /* HFS3_INDEX_VERSION */
    uint32_t n_entries;      /* manifest entries + 1 (the root) */
    uint64_t entries_off;
    uint64_t children_off;
    uint64_t strings_off;
    uint64_t strings_len;
    uint64_t file_size;      /* the whole file: a reader refuses a shorter one */
    uint32_t n_children;
    uint32_t layout;         /* 0 flat, 1 hf-cache */
};

enum { HFS3_IX_DIR = 1, HFS3_IX_FILE = 2, HFS3_IX_SYMLINK = 3 };

struct hfs3_index_entry {
    uint32_t type;           /* HFS3_IX_* */
    uint32_t parent;         /* entry number of the parent dir (the root's parent is itself) */
    uint32_t path_off;       /* into strings: the relative path, NUL-terminated ("" for the root) */
    uint32_t path_len;
    uint32_t name_off;       /* the last component (a tail of the path) */
    uint32_t name_len;
    uint32_t child_first;    /* dirs: first index into children[] */
    uint32_t child_count;
    uint32_t target_off;     /* symlinks: the target byte for byte, NUL-terminated */
    uint32_t target_len;
    uint32_t resolved;       /* symlinks: the final non-symlink entry, HFS3_INDEX_NONE if dangling */
    uint32_t reserved;
    uint64_t size;           /* files */
    int64_t mtime;           /* files (0 when unknown); a directory the newest of the files below it, an empty one
                              * and a symlink its parent's (lib/index.c; 0: none known, or an older writer) */
    uint8_t sha256[32];      /* files */
};

/* 1 when the len bytes at base (8-byte aligned) are an index a reader may use: the header's sections inside the
 * file, every offset and name inside the strings, and the children table a tree, so that no walk of it can loop
 * (a corrupted index once held a directory that was its own grandchild: os.walk recursed until RecursionError).
 * The tree rule is the writer's order: the root's parent is itself, every other entry's parent comes before it
 * (entries are in bytewise path order and a parent's path is a prefix of its children's), only directories have
 * children, and a directory's run holds only entries whose parent it is, in increasing entry order (for siblings
 * that is their name order, which the readers' binary search needs), the runs adding up to one place per entry.
 * One rule for the writer (lib/index.c checks what it built) and the shim (shim/mount.c, before it maps one in). */
static inline int hfs3_index_check(const void *base, size_t len)
{
    const struct hfs3_index_header *h = (const struct hfs3_index_header *)base;
    if (len < sizeof *h || __builtin_memcmp(h->magic, HFS3_INDEX_MAGIC, 8) || h->version != HFS3_INDEX_VERSION ||
        h->file_size != len || h->n_entries == 0 || h->entries_off > len ||
        (len - h->entries_off) / sizeof(struct hfs3_index_entry) < h->n_entries || h->children_off > len ||
        (len - h->children_off) / 4 < h->n_children || h->strings_off > len || len - h->strings_off < h->strings_len ||
        h->strings_len == 0 || h->entries_off % 8 || h->children_off % 4 || h->n_children != h->n_entries - 1)
        return 0;
    const struct hfs3_index_entry *e = (const struct hfs3_index_entry *)((const char *)base + h->entries_off);
    const uint32_t *kids = (const uint32_t *)((const char *)base + h->children_off);
    const char *s = (const char *)base + h->strings_off;
    if (s[h->strings_len - 1] != 0 || e[0].type != HFS3_IX_DIR || e[0].parent != 0)
        return 0;
    uint64_t placed = 0;
    for (uint32_t i = 0; i < h->n_entries; i++) {
        const struct hfs3_index_entry *x = &e[i];
        if (x->type < HFS3_IX_DIR || x->type > HFS3_IX_SYMLINK || (i > 0 && x->parent >= i) ||
            e[x->parent].type != HFS3_IX_DIR || (uint64_t)x->path_off + x->path_len >= h->strings_len ||
            s[x->path_off + x->path_len] != 0 || x->name_len > x->path_len ||
            x->name_off != x->path_off + x->path_len - x->name_len)
            return 0;
        if (x->type != HFS3_IX_DIR && x->child_count != 0)
            return 0;
        if (x->type == HFS3_IX_DIR) {
            if ((uint64_t)x->child_first + x->child_count > h->n_children)
                return 0;
            placed += x->child_count;
            for (uint32_t j = 0; j < x->child_count; j++) {
                uint32_t k = kids[x->child_first + j];
                if (k == 0 || k >= h->n_entries || e[k].parent != i ||
                    (j > 0 && k <= kids[x->child_first + j - 1]))
                    return 0;
            }
        }
        if (x->type == HFS3_IX_SYMLINK && ((uint64_t)x->target_off + x->target_len >= h->strings_len ||
                                           s[x->target_off + x->target_len] != 0))
            return 0;
    }
    return placed == h->n_children;
}

#ifndef HFS3_SHIM_BUILD
struct hfs3_manifest;
struct hfs3_cache;
/* Installs what the shim needs for manifest m into mount_dir (CACHE/mounts/<key>/, which must exist): the
 * index file, written atomically (temp + rename, so processes that mapped the old one keep it), and tree/.
 * Modes are set whatever the umask, by the cache's rule: when mount_dir's parent (CACHE/mounts) is setgid
 * and group-writable the cache is shared (new directories 03770, index 0440), else private (0700, 0400).
 * Existing directories are left as they are. 0 or a negative errno with a message. For tools and tests. */
int hfs3_index_install(const struct hfs3_manifest *m, const char *mount_dir);
/* The same into the mount directory mfd (path mpath, for messages) of cache c: tree/ is walked and made one
 * component at a time from mfd (O_NOFOLLOW, lib/cachefs.c's rules), the index is a fresh O_EXCL temp renamed
 * over the old one. What the helper uses. */
int hfs3_index_install_at(const struct hfs3_manifest *m, const struct hfs3_cache *c, int mfd, const char *mpath);
#endif

#endif
