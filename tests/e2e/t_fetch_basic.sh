#!/usr/bin/env bash
# t_fetch_basic.sh - `fetch` into an empty cache (blobs match the sources, modes), a rerun fetches nothing,
# `_index` (ok, error file, offline), `_get` of one file and through a symlink-free path, `_prefetch`.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT

fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
ok "published"

total=$(cat "$WORK"/m/config.json "$WORK"/m/tokenizer.json "$WORK"/m/model.safetensors | wc -c)
export HFS3_CACHE_DIR=$WORK/cache
expect_exit 0 "fetch" "$HFS3_BIN" fetch s3test:models/m1
grep -q "^s3test:models/m1: 4 files, $(human_bytes "$total") fetched, 0 B already cached, [0-9.]* s, [0-9.]* [kMG]*B/s, 0 failed$" "$WORK/out" ||
  { cat "$WORK/out"; fail "summary line"; }
! grep -v '^fetch: [0-9]*% of ' "$WORK/err" || fail "fetch wrote to stderr (not a terminal: progress lines only)"
for f in config.json tokenizer.json model.safetensors sub/empty.txt; do
  b=$HFS3_CACHE_DIR/blobs/$(blob_of "$WORK/m/$f")
  [ -f "$b" ] || fail "no blob for $f"
  cmp -s "$b" "$WORK/m/$f" || fail "blob of $f differs"
  [ "$(stat -c %a "$b")" = 444 ] || fail "blob mode $(stat -c %a "$b")"
done
for d in "" blobs tmp locks fails mounts unflushed; do
  [ "$(stat -c %a "$HFS3_CACHE_DIR/$d")" = 700 ] || fail "mode of cache dir '$d'"
done
[ -z "$(ls -A "$HFS3_CACHE_DIR/tmp")" ] || fail "tmp/ not empty: $(ls "$HFS3_CACHE_DIR/tmp")"
key=$(ls "$HFS3_CACHE_DIR/mounts")
for f in manifest.json etag index; do [ -f "$HFS3_CACHE_DIR/mounts/$key/$f" ] || fail "mounts/$key/$f missing"; done
ok "fetch: 4 blobs verified, modes 0700/0444, tmp empty"

expect_exit 0 "fetch again" "$HFS3_BIN" fetch s3test:models/m1
grep -q ": 4 files, 0 B fetched, $(human_bytes "$total") already cached" "$WORK/out" || { cat "$WORK/out"; fail "rerun"; }
ok "rerun: nothing fetched"

# _index: a 304 touches the index; a missing manifest writes error; offline uses the cached one
touch -d '2001-01-01' "$HFS3_CACHE_DIR/mounts/$key/index"
expect_exit 0 "_index" "$HFS3_BIN" _index s3test:models/m1
[ "$(stat -c %Y "$HFS3_CACHE_DIR/mounts/$key/index")" -gt 1000000000 ] || fail "index not touched"
[ "$(stat -c %Y "$HFS3_CACHE_DIR/mounts/$key/index")" -gt 978307200 ] || fail "index not touched"
expect_exit 1 "_index of a model without manifest" "$HFS3_BIN" _index s3test:models/nothing
err=$(grep -l . "$HFS3_CACHE_DIR"/mounts/*/error)
one_line "$err"
grep -q 's3test:models/nothing' "$err" && grep -q 'nothing/.hfs3/manifest.json' "$err" || { cat "$err"; fail "error file"; }
ok "_index: 304 touches, failure writes $(cat "$err")"
HFS3_OFFLINE=1 expect_exit 0 "offline _index with a cache" "$HFS3_BIN" _index s3test:models/m1
HFS3_OFFLINE=1 expect_exit 1 "offline _index without a cache" "$HFS3_BIN" _index s3test:models/other
expect_exit 2 "_index of an unknown remote" "$HFS3_BIN" _index nosuchremote:models/m1
ok "_index: offline and config errors"

# S3 down while a manifest is cached: warn, exit 0. Down at the same endpoint (a network namespace without a
# loopback): another endpoint is another server, whose manifest this cache must not serve (t_mount_alias)
expect_exit 0 "_index with S3 down" unshare -n "$HFS3_BIN" _index s3test:models/m1
grep -q 'using the cached manifest' "$WORK/err" || { cat "$WORK/err"; fail "no warning"; }
ok "_index: S3 unreachable with a cached index: $(head -1 "$WORK/err")"

# _get of one file into a fresh cache (no _index first: it refreshes itself). HFS3_VERIFY=whole: into blobs/ at
# once (by default _get checks chunk digests into the mount's cblobs/: t_fetch_poison, t_fetch_durable)
export HFS3_VERIFY=whole
export HFS3_CACHE_DIR=$WORK/cache2
expect_exit 0 "_get" "$HFS3_BIN" _get s3test:models/m1 tokenizer.json
cmp -s "$HFS3_CACHE_DIR/blobs/$(blob_of "$WORK/m/tokenizer.json")" "$WORK/m/tokenizer.json" || fail "_get blob"
[ "$(ls "$HFS3_CACHE_DIR/blobs" | wc -l)" = 1 ] || fail "_get fetched more than one file"
expect_exit 1 "_get of a missing path" "$HFS3_BIN" _get s3test:models/m1 nope.json
grep -q 'nope.json' "$WORK/err" || fail "_get error names the path"
ok "_get"
# spawned with 0-2 closed (a careless caller): messages must not land in the cache's files
rm -f "$HFS3_CACHE_DIR/blobs/$(blob_of "$WORK/m/tokenizer.json")"
"$HFS3_BIN" _get s3test:models/m1 tokenizer.json <&- >&- 2>&- || fail "_get with 0-2 closed"
cmp -s "$HFS3_CACHE_DIR/blobs/$(blob_of "$WORK/m/tokenizer.json")" "$WORK/m/tokenizer.json" || fail "_get with 0-2 closed: blob"
ok "_get with 0-2 closed"

# _get with the lock held by the caller through --lock-fd (as the shim does it)
sha=$(blob_of "$WORK/m/config.json")
mkdir -p "$HFS3_CACHE_DIR/locks"
# the shim's protocol: lock, spawn with the descriptor, close our copy, lock again to wait for the helper
exec 7>"$HFS3_CACHE_DIR/locks/$sha.lock"
flock 7
"$HFS3_BIN" _get --lock-fd 7 s3test:models/m1 config.json 8>&- &
gpid=$!
exec 7>&-
flock "$HFS3_CACHE_DIR/locks/$sha.lock" true || fail "relock"
[ -f "$HFS3_CACHE_DIR/blobs/$sha" ] || fail "_get --lock-fd: no blob once the lock came free"
wait "$gpid" || fail "_get --lock-fd exit status"
ok "_get --lock-fd: the blob is there when the lock comes free"

# _prefetch: returns at once, the rest arrives in the background
expect_exit 0 "_prefetch" "$HFS3_BIN" _prefetch s3test:models/m1 config.json
for i in $(seq 1 300); do
  [ "$(ls "$HFS3_CACHE_DIR/blobs" | wc -l)" = 4 ] && break
  sleep 0.1
done
[ "$(ls "$HFS3_CACHE_DIR/blobs" | wc -l)" = 4 ] || fail "_prefetch did not fetch everything: $(ls "$HFS3_CACHE_DIR/blobs")"
cmp -s "$HFS3_CACHE_DIR/blobs/$(blob_of "$WORK/m/model.safetensors")" "$WORK/m/model.safetensors" || fail "prefetched blob"
ok "_prefetch"

# a cache directory writable by others is refused
mkdir -m 0777 "$WORK/open"; chmod 0777 "$WORK/open"
HFS3_CACHE_DIR=$WORK/open expect_exit 1 "o+w cache" "$HFS3_BIN" fetch s3test:models/m1
grep -q 'writable by others' "$WORK/err" || { cat "$WORK/err"; fail "o+w message"; }
ok "o+w cache refused: $(cat "$WORK/err")"
echo "all ok"
