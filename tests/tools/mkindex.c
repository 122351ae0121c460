/* mkindex.c - test tool: puts a mount into a cache without S3, so the shim can be tested alone.
 *   mkindex MANIFEST.json CACHEDIR REMOTE [BLOBSRCDIR]
 * parses MANIFEST.json with the validating parser, installs its index (and skeleton) and a copy of it as
 * manifest.json (what the helper's offline check wants cached beside an index) into
 * CACHEDIR/mounts/<hfs3_mountkey(REMOTE)>/ and, with BLOBSRCDIR, copies each file entry's content from
 * BLOBSRCDIR/<path> to CACHEDIR/blobs/<sha256> (mode 0444). On a parse failure it writes the message to
 * CACHEDIR/mounts/<key>/error (as the helper would) and exits 1. */
#include "hfs3/index.h"
#include "hfs3/manifest.h"
#include "hfs3/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int copy_blob(const char *src, const char *dst)
{
    struct stat st;
    if (stat(dst, &st) == 0)
        return 0;
    char *data = NULL;
    size_t n = 0;
    int rc = hfs3_read_file(src, (size_t)1 << 34, &data, &n);
    if (rc < 0)
        return rc;
    rc = hfs3_write_file_atomic(dst, data, n, 0444);
    free(data);
    if (rc == 0)
        chmod(dst, 0444);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: mkindex MANIFEST.json CACHEDIR REMOTE [BLOBSRCDIR]\n");
        return 2;
    }
    const char *cache = argv[2], *remote = argv[3], *src = argc > 4 ? argv[4] : NULL;
    char key[17], mdir[4096], p[8192];
    hfs3_mountkey(remote, key);
    snprintf(mdir, sizeof mdir, "%s/mounts/%s", cache, key);
    int rc = hfs3_mkdirs(mdir, 0700);
    if (rc == 0) {
        snprintf(p, sizeof p, "%s/blobs", cache);
        rc = hfs3_mkdirs(p, 0700);
    }
    if (rc < 0) {
        fprintf(stderr, "mkindex: %s\n", hfs3_errmsg());
        return 1;
    }
    char *doc = NULL;
    size_t n = 0;
    hfs3_manifest *m = NULL;
    rc = hfs3_read_file(argv[1], HFS3_MAX_DOC, &doc, &n);
    if (rc == 0)
        rc = hfs3_manifest_parse(doc, n, &m);
    if (rc == 0) {
        snprintf(p, sizeof p, "%s/manifest.json", mdir);
        rc = hfs3_write_file_atomic(p, doc, n, 0640);
    }
    free(doc);
    if (rc < 0) {
        fprintf(stderr, "mkindex: %s: %s\n", argv[1], hfs3_errmsg());
        snprintf(p, sizeof p, "%s/error", mdir);
        FILE *f = fopen(p, "w");
        if (f) {
            fprintf(f, "%s: %s\n", remote, hfs3_errmsg());
            fclose(f);
        }
        return 1;
    }
    rc = hfs3_index_install(m, mdir);
    if (rc < 0) {
        fprintf(stderr, "mkindex: %s\n", hfs3_errmsg());
        hfs3_manifest_free(m);
        return 1;
    }
    if (src) {
        for (size_t i = 0; i < m->n && rc == 0; i++) {
            const hfs3_entry *e = &m->entries[i];
            if (e->type != HFS3_FILE)
                continue;
            char from[8192];
            snprintf(from, sizeof from, "%s/%s", src, e->path);
            snprintf(p, sizeof p, "%s/blobs/%s", cache, e->sha256);
            rc = copy_blob(from, p);
            if (rc < 0)
                fprintf(stderr, "mkindex: %s: %s\n", from, hfs3_errmsg());
        }
    }
    hfs3_manifest_free(m);
    return rc < 0 ? 1 : 0;
}
