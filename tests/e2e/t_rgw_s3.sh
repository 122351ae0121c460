#!/usr/bin/env bash
# t_rgw_s3.sh - hfs3 against a real S3 implementation, Ceph's RADOS Gateway (scripts/rgwenv.sh), where the Node
# mock behaves otherwise (design.md §6):
#   build + fetch + verify --deep of an rclone upload whose large file went up in parts: RGW's real multipart
#   ETag ("md5-of-parts-N") is recorded, never taken for a content hash; the empty file (a Range on an empty
#   object is 416 on RGW) is fetched; an object changed after the build gets RGW's 412 for If-Match: exit 1,
#   one line, nothing installed; anonymous requests are refused (403: s3rver serves them); virtual-hosted
#   addressing through `rgw dns name = localhost` (bucket.localhost); an object replaced while a one-connection
#   fetch streams it through a slow proxy (tests/e2e/s3proxy.py): the next range gets 412, nothing installed.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/scripts/rgwenv.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_clean
trap 'rgwenv_stop' EXIT
rgwenv_start "$WORK"
ok "RGW started in ${RGW_START_SECONDS}s"

fetch_model "$WORK/m"
head -c $((12 << 20)) /dev/urandom >"$WORK/m/big.bin"
# rclone uploads files above the cutoff in parts (5 MiB, RGW's minimum for all parts but the last)
rclone copy --s3-upload-cutoff 5M --s3-chunk-size 5M "$WORK/m" rgwtest:models/m || fail "rclone copy"
"$HFS3_BIN" build rgwtest:models/m >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build"; }
"$HFS3_BIN" show --json rgwtest:models/m >"$WORK/manifest.json" || fail "show"
etag=$(/usr/bin/python3 -c 'import json,sys
for e in json.load(open(sys.argv[1]))["entries"]:
    if e["path"] == "big.bin": print(e["etag"])' "$WORK/manifest.json")
[[ "$etag" =~ ^\"[0-9a-f]{32}-3\"$ ]] || fail "big.bin's ETag is not a 3-part multipart ETag: $etag"
ok "multipart upload: RGW's ETag $etag recorded"

export HFS3_CACHE_DIR=$WORK/cache
expect_exit 0 "fetch" "$HFS3_BIN" fetch rgwtest:models/m
grep -q '^rgwtest:models/m: 5 files' "$WORK/out" || { cat "$WORK/out" "$WORK/err"; fail "fetch summary"; }
for f in config.json tokenizer.json model.safetensors sub/empty.txt big.bin; do
  cmp -s "$HFS3_CACHE_DIR/blobs/$(blob_of "$WORK/m/$f")" "$WORK/m/$f" || fail "blob of $f"
done
expect_exit 0 "verify --deep" "$HFS3_BIN" verify --deep rgwtest:models/m
ok "fetch (empty file included) and verify --deep against RGW"

# virtual-hosted: models.localhost:PORT (curl resolves *.localhost to loopback)
expect_exit 0 "virtual-hosted fetch" env HFS3_S3_ADDRESSING=virtual RCLONE_CONFIG_RGWTEST_ENDPOINT="http://localhost:$RGW_PORT" \
  HFS3_CACHE_DIR="$WORK/cache-vh" HFS3_LOG=debug "$HFS3_BIN" fetch rgwtest:models/m
grep -q "GET http://models.localhost:$RGW_PORT/m/config.json" "$WORK/err" || { cat "$WORK/err" | tail -5; fail "not virtual-hosted"; }
ok "virtual-hosted addressing (rgw dns name = localhost)"

# anonymous: refused by RGW (the objects are private)
expect_exit 1 "anonymous fetch" env AWS_EC2_METADATA_DISABLED=true AWS_ENDPOINT_URL_S3="$RGW_ENDPOINT" AWS_REGION=us-east-1 \
  HFS3_CACHE_DIR="$WORK/cache-anon" "$HFS3_BIN" fetch s3://models/m
one_line "$WORK/err"
grep -q '403 AccessDenied' "$WORK/err" || { cat "$WORK/err"; fail "anonymous: message"; }
ok "anonymous requests refused: $(cat "$WORK/err")"

# an object changed after the build: RGW answers If-Match with 412
head -c 1000 /dev/urandom >"$WORK/changed.json"
rclone copyto "$WORK/changed.json" rgwtest:models/m/tokenizer.json || fail "rclone copyto"
expect_exit 1 "fetch of a changed object" env HFS3_CACHE_DIR="$WORK/cache-changed" "$HFS3_BIN" fetch rgwtest:models/m
grep -q 'object changed since the manifest was built (If-Match .* failed: .*412' "$WORK/err" ||
  { cat "$WORK/err"; fail "changed object: message"; }
[ "$(grep -c . "$WORK/err")" -le 2 ] || { cat "$WORK/err"; fail "changed object: more than a line per failure"; }
[ ! -e "$WORK/cache-changed/blobs/$(blob_of "$WORK/m/tokenizer.json")" ] || fail "a changed object was installed"
ok "changed object: 412 from RGW, exit 1, nothing installed: $(head -1 "$WORK/err")"

# changed mid-fetch: one connection through a slow proxy fetches model.safetensors in 16 MiB ranges; the object
# is replaced while the first range streams, so the next range's If-Match gets RGW's 412
/usr/bin/python3 "$HFS3_ROOT/tests/e2e/s3proxy.py" --target "127.0.0.1:$RGW_PORT" --log "$WORK/slow.log" \
  --rate 4000000 >"$WORK/slow.port" &
PROXY=$!
trap 'rgwenv_stop; kill "$PROXY" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^port ' "$WORK/slow.port" 2>/dev/null && break; sleep 0.05; done
pport=$(sed -n 's/^port //p' "$WORK/slow.port")
[ -n "$pport" ] || fail "proxy did not start"
env HFS3_CACHE_DIR="$WORK/cache-mid" HFS3_CONNECTIONS=1 RCLONE_CONFIG_RGWTEST_ENDPOINT="http://127.0.0.1:$pport" \
  "$HFS3_BIN" fetch rgwtest:models/m >"$WORK/mid.out" 2>"$WORK/mid.err" &
FETCH=$!
for _ in $(seq 200); do grep -q 'model.safetensors' "$WORK/slow.log" 2>/dev/null && break
  [ -e "$WORK/cache-mid/tmp" ] && ls "$WORK/cache-mid/tmp" | grep -q part && break; sleep 0.05; done
sleep 1
head -c $((40 << 20)) /dev/urandom >"$WORK/new.safetensors"
rclone copyto "$WORK/new.safetensors" rgwtest:models/m/model.safetensors || fail "rclone copyto"
set +e; wait "$FETCH"; rc=$?; set -e
[ "$rc" = 1 ] || { cat "$WORK/mid.out" "$WORK/mid.err" "$WORK/slow.log"; fail "changed mid-fetch: exit $rc, expected 1"; }
grep -q 'model.safetensors: object changed since the manifest was built (If-Match .* failed: .*412' "$WORK/mid.err" ||
  { cat "$WORK/mid.err" "$WORK/slow.log"; fail "changed mid-fetch: message"; }
grep -q ' 412 ' "$WORK/slow.log" || { cat "$WORK/slow.log"; fail "no 412 went through the proxy"; }
[ ! -e "$WORK/cache-mid/blobs/$(blob_of "$WORK/m/model.safetensors")" ] || fail "a half-old object was installed"
ok "changed mid-fetch: the next range gets RGW's 412, exit 1, nothing installed"
