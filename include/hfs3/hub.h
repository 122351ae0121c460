/* hub.h - a Hugging Face hub prefix as one mount (docs/reference.md "One mount for a whole hub"): a REMOTE whose prefix has
 * no manifest of its own but repository folders (models--*, datasets--*, spaces--*), each with its own
 * .hfs3/manifest.json. One delimiter listing names the repositories; the helper writes them to
 * mounts/<hub key>/repos (one name per line, sorted bytewise) for the shim; each repository is the mount of
 * REMOTE/<name>, so it shares its cache entry with a mount configured for that repository directly. */
#ifndef HFS3_HUB_H
#define HFS3_HUB_H

#include <stddef.h>
#include "hfs3/cache.h"
#include "hfs3/config.h"

/* 1 when name is a repository folder name of a hub: "models--", "datasets--" or "spaces--" followed by at least
 * one byte, no '/', no control character, at most 255 bytes. */
int hfs3_hub_name_ok(const char *name);

/* One delimiter listing of r's prefix (every page): the repository folders under it, sorted bytewise, in
 * *names (*n of them, the caller's: hfs3_hub_names_free); *has_manifest = the prefix holds .hfs3/ itself
 * (then it is a repository, not a hub). 0 or an error with its message. */
int hfs3_hub_list(const hfs3_remote *r, char ***names, size_t *n, int *has_manifest);
void hfs3_hub_names_free(char **names, size_t n);

/* The repository list the last refresh of hub spec cached (mounts/K/repos): -ENOENT when there is none. */
int hfs3_hub_load(const hfs3_cache *c, const char *spec, char ***names, size_t *n);

/* The REMOTE of repository name inside hub: "<hub without trailing '/'>/<name>" (malloc'd, NULL on OOM). */
char *hfs3_hub_repo_spec(const char *hub, const char *name);

/* Writes the hub's repository list as mfd's "repos" (atomically: O_EXCL temp + rename, the cache's file mode)
 * and removes a manifest index left there from when the prefix was a repository. */
int hfs3_hub_install(const hfs3_cache *c, int mfd, const char *mdir, char *const *names, size_t n);

/* `build --all`: whether repository r's stored manifest still describes its objects, judged from one listing
 * without reading any content: every object (but .hfs3/ and .cache/huggingface/) is an entry of the manifest
 * (a file of the same size and ETag, a symlink not modified after the manifest was, a directory marker a
 * directory) and the manifest has no file or symlink more; layout (NULL or "auto": any) is the manifest's.
 * *unchanged = 1 then. No manifest: *unchanged = 0. 0 or an error. */
int hfs3_hub_repo_unchanged(const hfs3_remote *r, const char *layout, int *unchanged);

#endif
