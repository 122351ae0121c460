#!/usr/bin/env bash
# t_fetch_poison.sh - cross-manifest poisoning (issue 21, item 2). A file checked by its chunk digests alone goes
# to its own mount's cblobs/ and enters the shared blobs/<sha256> only once its whole-file sha256 matched. Here
# another bucket prefix (models/liar) serves other bytes Y under a manifest that claims the honest file's sha256
# SX with the chunk digests of Y (so every chunk check passes). The honest model (models/h) must never see Y:
#  1. liar fetched first, not flushed yet: the honest fetch does not take the liar's copy, fetches X; each mount
#     reads its own copy through the shim; blobs/SX does not exist.
#  2. the flush: the honest copy enters blobs/SX, the liar's (sha256 mismatch) is removed from the liar's cblobs/
#     (nothing pins it), so no cblobs/ file outlives its record; the liar's mount now gets the true bytes of SX
#     (blobs/ comes first).
#  3. a cold cache, the liar read through the shim first (its _get and flush), then the honest model through the
#     shim: X.
#  4. the honest manifest in front of a server sending the other bytes: each chunk fails as it arrives.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT

mkdir -p "$WORK/h" "$WORK/l"
head -c $((9 << 20)) /dev/urandom >"$WORK/h/x.safetensors"   # two chunks of 8 MiB
head -c $((9 << 20)) /dev/urandom >"$WORK/l/x.safetensors"
SX=$(sha256sum "$WORK/h/x.safetensors" | cut -d' ' -f1)
rclone copy "$WORK/h" s3test:models/h || fail "rclone copy"
rclone copy "$WORK/l" s3test:models/liar || fail "rclone copy"
"$HFS3_BIN" build -o "$WORK/h.json" s3test:models/h >/dev/null 2>&1 || fail "build h"
rclone copyto "$WORK/h.json" s3test:models/h/.hfs3/manifest.json || fail "upload h"
"$HFS3_BIN" build -o "$WORK/liar.json" s3test:models/liar >/dev/null 2>&1 || fail "build liar"
# the liar's manifest: Y's size, ETag and chunk digests, but the honest file's sha256
python3 - "$WORK/liar.json" "$SX" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = [e for e in d["entries"] if e["path"] == "x.safetensors"][0]
assert len(e["chunks"]) == 2
e["sha256"] = sys.argv[2]
json.dump(d, open(sys.argv[1], "w"))
PY
rclone copyto "$WORK/liar.json" s3test:models/liar/.hfs3/manifest.json || fail "upload the liar's manifest"
# HFS3_VERIFY=chunks: `fetch` checks chunk digests as they arrive, as the shim's loads do by default
export HFS3_CACHE_DIR=$WORK/cache HFS3_CONNECTIONS=2 HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0 HFS3_VERIFY=chunks
CD=$HFS3_CACHE_DIR
H=$WORK/mnt/h L=$WORK/mnt/liar
export HFS3_MOUNTS="$H=s3test:models/h;$L=s3test:models/liar"
wait_flushed() {
  for _ in $(seq 1 300); do [ -z "$(ls -A "$CD/unflushed" 2>/dev/null)" ] && return 0; sleep 0.1; done
  fail "records left in unflushed/ after 30 s: $(ls "$CD/unflushed")"
}
same() { cmp -s "$1" "$2"; }

# 1. the liar first, no flush yet
HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" fetch s3test:models/liar >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "liar fetch"; }
[ ! -e "$CD/blobs/$SX" ] || fail "a chunk-checked blob entered blobs/ before its sha256 was checked"
HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" fetch s3test:models/h >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "honest fetch"; }
grep -q ", 9.0 MiB fetched" "$WORK/out" || { cat "$WORK/out"; fail "the honest fetch took the liar's copy"; }
HFS3_TEST_NO_FLUSH=1 LD_PRELOAD=$HFS3_SHIM cat "$H/x.safetensors" >"$WORK/got" || fail "shim: honest read"
same "$WORK/got" "$WORK/h/x.safetensors" || fail "the honest mount read the liar's bytes (shim)"
HFS3_TEST_NO_FLUSH=1 LD_PRELOAD=$HFS3_SHIM cat "$L/x.safetensors" >"$WORK/got" || fail "shim: liar read"
same "$WORK/got" "$WORK/l/x.safetensors" || fail "the liar's mount does not read the bytes its manifest vouched for"
[ ! -e "$CD/blobs/$SX" ] || fail "blobs/$SX exists before any flush"
ok "not flushed: each mount reads the copy its own manifest's chunks vouched for; nothing in blobs/"

# 2. the flush: only the honest copy enters blobs/
"$HFS3_BIN" fetch s3test:models/h >/dev/null 2>&1 || fail "fetch (flush)"
wait_flushed
same "$CD/blobs/$SX" "$WORK/h/x.safetensors" || fail "blobs/$SX does not hold the honest bytes after the flush"
left=$(find "$CD"/mounts/*/cblobs -type f)
[ -z "$left" ] || fail "after the flush, cblobs/ holds: $left"
LD_PRELOAD=$HFS3_SHIM cat "$H/x.safetensors" >"$WORK/got" && same "$WORK/got" "$WORK/h/x.safetensors" ||
  fail "honest mount after the flush"
LD_PRELOAD=$HFS3_SHIM cat "$L/x.safetensors" >"$WORK/got" && same "$WORK/got" "$WORK/h/x.safetensors" ||
  fail "the liar's mount after the flush does not get the true bytes of the sha256 it names"
ok "the flush moves the honest copy into blobs/ and removes the liar's (sha256 mismatch)"

# 3. cold, through the shim only: the liar first (fetched, flushed, kept out of blobs/), then the honest model
rm -rf "$CD"
LD_PRELOAD=$HFS3_SHIM cat "$L/x.safetensors" >"$WORK/got" || fail "shim: liar read (cold)"
same "$WORK/got" "$WORK/l/x.safetensors" || fail "liar's mount, cold"
wait_flushed
[ ! -e "$CD/blobs/$SX" ] || fail "the liar's bytes entered blobs/$SX"
LD_PRELOAD=$HFS3_SHIM cat "$H/x.safetensors" >"$WORK/got" || fail "shim: honest read (cold)"
same "$WORK/got" "$WORK/h/x.safetensors" || fail "the honest mount read the liar's bytes (cold, shim)"
"$HFS3_BIN" fetch s3test:models/h >/dev/null 2>&1 || fail "honest fetch (cold)"
wait_flushed
same "$CD/blobs/$SX" "$WORK/h/x.safetensors" || fail "blobs/$SX after the honest fetch"
ok "cold through the shim: the liar's read never reaches the honest model"

# 4. the honest manifest (no ETag to stop it early) in front of a server that sends the other bytes: every chunk
# fails its digest as it arrives; nothing is installed anywhere
python3 - "$WORK/h.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for e in d["entries"]:
    e.pop("etag", None)
json.dump(d, open(sys.argv[1], "w"))
PY
rclone copy "$WORK/l" s3test:models/swap || fail "rclone copy"
rclone copyto "$WORK/h.json" s3test:models/swap/.hfs3/manifest.json || fail "upload"
rm -rf "$CD"
expect_exit 1 "fetch of bytes other than the chunks say" "$HFS3_BIN" fetch s3test:models/swap
grep -q "chunk 0 (bytes 0-8388607) sha256 mismatch" "$WORK/err" || { cat "$WORK/err"; fail "no chunk mismatch line"; }
[ -z "$(find "$CD/blobs" "$CD"/mounts/*/cblobs -type f)" ] || fail "a blob was installed from bytes that fail their chunks"
ok "bytes that fail their chunk digests as they arrive are never installed"
echo "all ok"
