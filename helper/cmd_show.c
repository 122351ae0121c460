/* cmd_show.c - `hfs3-manifest show [--json] REMOTE`: prints the stored manifest as a tree, or the document
 * itself. Reading goes through the validating parser, so a hostile manifest is refused here as in the shim. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"

#include "hfs3/builder.h"
#include "hfs3/hub.h"

static void human(uint64_t n, char *out, size_t len)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, len, "%llu B", (unsigned long long)n);
    else
        snprintf(out, len, "%.1f %s", v, units[u]);
}

typedef struct tree {
    const hfs3_manifest *m;
    size_t *first, *next; /* child lists, index n is the root; (size_t)-1 ends a list */
} tree;

static void print_tree(const tree *t, size_t node, char *indent, size_t ilen)
{
    for (size_t c = t->first[node]; c != (size_t)-1; c = t->next[c]) {
        const hfs3_entry *e = &t->m->entries[c];
        int last = t->next[c] == (size_t)-1;
        const char *name = strrchr(e->path, '/');
        name = name ? name + 1 : e->path;
        char size[32];
        if (e->type == HFS3_DIR)
            printf("%s%s%s/\n", indent, last ? "└── " : "├── ", name);
        else if (e->type == HFS3_SYMLINK)
            printf("%s%s%s -> %s\n", indent, last ? "└── " : "├── ", name, e->target);
        else {
            human(e->size, size, sizeof size);
            printf("%s%s%s  (%s)\n", indent, last ? "└── " : "├── ", name, size);
        }
        if (e->type == HFS3_DIR && ilen + 8 < 4 * HFS3_MAX_DEPTH + 8) {
            strcpy(indent + ilen, last ? "    " : "│   ");
            print_tree(t, c, indent, ilen + strlen(last ? "    " : "│   "));
            indent[ilen] = 0;
        }
    }
}

/* A prefix with no manifest that is a hub (repository folders, each with its own): build would make one flat
 * manifest of the whole hub, so the advice is build --all. The message is replaced only then. */
void cmd_hub_advice(const struct hfs3_remote *r, int rc)
{
    if (rc != -ENOENT)
        return;
    char why[1024];
    snprintf(why, sizeof why, "%s", hfs3_errmsg());
    char **names = NULL;
    size_t n = 0;
    int has_manifest = 0;
    if (hfs3_hub_list(r, &names, &n, &has_manifest) == 0 && n && !has_manifest) {
        char *one = hfs3_hub_repo_spec(r->spec, names[0]);
        hfs3_err(rc, "%s is a hub of %zu repositor%s (%s%s) with no manifest of its own: run hfs3-manifest build "
                 "--all %s, which builds each repository's (one repository: %s)", r->spec, n, n == 1 ? "y" : "ies",
                 names[0], n > 1 ? ", ..." : "", r->spec, one ? one : names[0]);
        free(one);
    } else {
        hfs3_err(rc, "%s", why);
    }
    hfs3_hub_names_free(names, n);
}

int cmd_show(int argc, char **argv)
{
    int json, status;
    hfs3_remote *r = cmd_flag_remote(argc, argv, "json", &json, &status);
    if (!r)
        return status;
    hfs3_manifest *m = NULL;
    hfs3_buf doc;
    hfs3_buf_init(&doc, 0);
    status = 1;
    int rc = hfs3_fetch_manifest(r, &m, &doc);
    if (rc < 0) {
        cmd_hub_advice(r, rc);
        cmd_err("%s", hfs3_errmsg());
        goto done;
    }
    if (json) {
        fwrite(hfs3_buf_str(&doc), 1, doc.len, stdout);
        status = 0;
        goto done;
    }
    size_t files, dirs, links;
    uint64_t bytes;
    char size[32];
    hfs3_manifest_counts(m, &files, &dirs, &links, &bytes);
    human(bytes, size, sizeof size);
    printf("%s (%s%s%s): %zu %s, %zu %s, %zu %s, %s\n", r->spec, m->layout, m->revision ? ", revision " : "",
           m->revision ? m->revision : "", files, hfs3_plural(files, "file", "files"), dirs,
           hfs3_plural(dirs, "directory", "directories"), links, hfs3_plural(links, "symlink", "symlinks"), size);
    tree t = {.m = m, .first = malloc((m->n + 1) * sizeof(size_t)), .next = malloc((m->n + 1) * sizeof(size_t))};
    if (!t.first || !t.next) {
        cmd_err("out of memory");
        free(t.first);
        free(t.next);
        goto done;
    }
    for (size_t i = 0; i <= m->n; i++)
        t.first[i] = t.next[i] = (size_t)-1;
    /* link children in reverse so each list ends up in path order */
    for (size_t i = m->n; i-- > 0;) {
        const char *slash = strrchr(m->entries[i].path, '/');
        size_t parent = m->n;
        if (slash) {
            char *p = strndup(m->entries[i].path, (size_t)(slash - m->entries[i].path));
            const hfs3_entry *pe = p ? hfs3_manifest_find(m, p) : NULL;
            free(p);
            if (pe)
                parent = (size_t)(pe - m->entries);
        }
        t.next[i] = t.first[parent];
        t.first[parent] = i;
    }
    char indent[4 * HFS3_MAX_DEPTH + 16] = "";
    print_tree(&t, m->n, indent, 0);
    free(t.first);
    free(t.next);
    status = 0;
done:
    hfs3_buf_free(&doc);
    hfs3_manifest_free(m);
    hfs3_remote_free(r);
    return status;
}
