/* fuzz_manifest.c - libFuzzer target for the manifest parser (lib/manifest.c).
 *
 * Input: any bytes, handed to hfs3_manifest_parse as a document. On success the manifest is written
 * (hfs3_manifest_write), the result parsed again and written again: the two writes must be the same bytes
 * (canonical form is a fixed point), the reparse must succeed, and hfs3_manifest_resolve is called on every
 * entry (symlinks walk the tree; the others resolve to themselves) and must not crash. Anything else is a
 * bug, reported with abort().
 * Built and run by tests/fuzz/run.sh; seeds in tests/fuzz/corpus/manifest (from tests/data/manifests). */
#include "hfs3/manifest.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "fuzz_manifest: %s (%s)\n", what, hfs3_errmsg());
    abort();
}

static void resolve_all(const hfs3_manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const hfs3_entry *out = (const hfs3_entry *)1;
        int rc = hfs3_manifest_resolve(m, &m->entries[i], &out);
        if (m->entries[i].type != HFS3_SYMLINK && (rc != 0 || out != &m->entries[i]))
            die("a non-symlink did not resolve to itself");
        if (rc == 0 && out && out->type == HFS3_SYMLINK)
            die("resolve ended on a symlink");
        if (rc < 0 && rc != -ENOENT && rc != -ELOOP && rc != -EXDEV)
            die("resolve returned an unexpected code");
        if (hfs3_manifest_find(m, m->entries[i].path) != &m->entries[i])
            die("find does not return the entry");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hfs3_manifest *m = NULL;
    if (hfs3_manifest_parse((const char *)data, size, &m) < 0) {
        if (m)
            die("failed parse left *out set");
        return 0;
    }
    resolve_all(m);

    hfs3_buf a, b;
    hfs3_buf_init(&a, 0);
    hfs3_buf_init(&b, 0);
    if (hfs3_manifest_write(m, &a) < 0)
        die("write of a parsed manifest failed");
    if (hfs3_manifest_validate(m) < 0)
        die("a parsed manifest does not validate");

    hfs3_manifest *m2 = NULL;
    if (hfs3_manifest_parse(a.data, a.len, &m2) < 0) {
        fprintf(stderr, "written:\n%.*s\n", (int)a.len, a.data);
        die("the written manifest does not parse");
    }
    if (m2->n != m->n)
        die("entry count changed over a round trip");
    if (hfs3_manifest_write(m2, &b) < 0)
        die("second write failed");
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) {
        fprintf(stderr, "first:\n%.*s\nsecond:\n%.*s\n", (int)a.len, a.data, (int)b.len, b.data);
        die("write(parse(write(m))) differs from write(m)");
    }
    resolve_all(m2);

    hfs3_buf_free(&a);
    hfs3_buf_free(&b);
    hfs3_manifest_free(m);
    hfs3_manifest_free(m2);
    return 0;
}
