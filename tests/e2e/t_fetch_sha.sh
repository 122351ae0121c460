#!/usr/bin/env bash
# t_fetch_sha.sh - the fetcher compares all 64 hex digits of a blob's sha256 with the manifest's: a manifest
# whose sha256 differs from the content's only in the last digit, or only in the first, is refused (exit 1,
# "sha256 mismatch", nothing under either key in blobs/, one line in fails/<sha>.err), for a one-GET file, a
# file fetched in several ranges, and an empty file; the right manifest then fetches every file. A file checked by
# its chunks alone (HFS3_VERIFY=chunks, the default of _get) never enters blobs/ under the wrong sha256.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT

mkdir -p "$WORK/m"
printf '{"architectures": ["Test"]}\n' >"$WORK/m/config.json"
head -c 300000 /dev/urandom >"$WORK/m/tokenizer.json"
head -c $((5 << 20)) /dev/urandom >"$WORK/m/model.safetensors"
: >"$WORK/m/empty.txt"
rclone copy "$WORK/m" s3test:models/m || fail "rclone copy"
"$HFS3_BIN" build -o "$WORK/good.json" s3test:models/m >/dev/null 2>&1 || fail "build"

# near: the manifest's sha256 of each file with one hex digit changed (WHERE=last or first)
near() {
  python3 - "$WORK/good.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
flip = lambda c: "0" if c != "0" else "1"
for e in d["entries"]:
    if e["type"] == "file":
        s = e["sha256"]
        e["sha256"] = s[:63] + flip(s[63]) if sys.argv[2] == "last" else flip(s[0]) + s[1:]
json.dump(d, sys.stdout)
PY
}

for where in last first; do
  near $where >"$WORK/near.json"
  rclone copyto "$WORK/near.json" s3test:models/m/.hfs3/manifest.json || fail "upload manifest"
  export HFS3_CACHE_DIR=$WORK/cache-$where
  HFS3_CONNECTIONS=4 expect_exit 1 "fetch with the $where sha256 digit changed" "$HFS3_BIN" fetch s3test:models/m
  for f in config.json tokenizer.json model.safetensors empty.txt; do
    real=$(sha256sum "$WORK/m/$f" | cut -d' ' -f1)
    claimed=$(python3 -c 'import json,sys; print([e["sha256"] for e in json.load(open(sys.argv[1]))["entries"] if e["path"] == sys.argv[2]][0])' "$WORK/near.json" "$f")
    [ "$real" != "$claimed" ] || fail "test setup: $f sha unchanged"
    grep -q "s3test:models/m: $f: sha256 mismatch for $f: expected $claimed got $real" "$WORK/err" ||
      { cat "$WORK/err"; fail "$where digit: no sha256 mismatch line for $f"; }
    [ ! -e "$HFS3_CACHE_DIR/blobs/$claimed" ] || fail "$where digit: $f installed under the manifest's (wrong) sha256"
    [ ! -e "$HFS3_CACHE_DIR/blobs/$real" ] || fail "$where digit: $f installed under its real sha256"
    one_line "$HFS3_CACHE_DIR/fails/$claimed.err"
    grep -q 'sha256 mismatch' "$HFS3_CACHE_DIR/fails/$claimed.err" || fail "$where digit: fails/ file of $f"
  done
  [ -z "$(ls -A "$HFS3_CACHE_DIR/tmp")" ] || fail "$where digit: tmp/ not empty: $(ls "$HFS3_CACHE_DIR/tmp")"
  [ -z "$(ls -A "$HFS3_CACHE_DIR/blobs")" ] || fail "$where digit: blobs/ not empty: $(ls "$HFS3_CACHE_DIR/blobs")"
  HFS3_VERIFY=whole expect_exit 1 "_get with the $where sha256 digit changed" "$HFS3_BIN" _get s3test:models/m model.safetensors
  [ -z "$(ls -A "$HFS3_CACHE_DIR/blobs")" ] || fail "$where digit: _get installed a blob"
  # by default _get checks the chunk digests (right here) into the mount's own cblobs/; the flush, which hashes
  # it whole, never lets it into blobs/
  HFS3_VERIFY=chunks "$HFS3_BIN" _get s3test:models/m model.safetensors 2>/dev/null || fail "$where digit: _get, chunks"
  for _ in $(seq 1 300); do [ -z "$(ls -A "$HFS3_CACHE_DIR/unflushed")" ] && break; sleep 0.1; done
  [ -z "$(ls -A "$HFS3_CACHE_DIR/blobs")" ] || fail "$where digit: a chunk-checked blob entered blobs/"
  ok "sha256 differing only in the $where hex digit: refused for a one-GET, a ranged and an empty file"
done

rclone copyto "$WORK/good.json" s3test:models/m/.hfs3/manifest.json || fail "upload manifest"
export HFS3_CACHE_DIR=$WORK/cache-good
HFS3_CONNECTIONS=4 expect_exit 0 "fetch with the right manifest" "$HFS3_BIN" fetch s3test:models/m
for f in config.json tokenizer.json model.safetensors empty.txt; do
  cmp -s "$HFS3_CACHE_DIR/blobs/$(sha256sum "$WORK/m/$f" | cut -d' ' -f1)" "$WORK/m/$f" || fail "blob of $f"
done
ok "the right manifest fetches all four files"
echo "all ok"
