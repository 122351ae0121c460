#!/usr/bin/env bash
# t_fetch_concurrent.sh - 8 concurrent `_get` of one file fetch it once (bytes counted by a proxy in front
# of the server); a `fetch` killed with SIGKILL mid-download leaves nothing in blobs/ and the next fetch
# resumes the completed ranges and finishes.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
trap 'stop_proxies; s3env_stop' EXIT

fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
big=$(blob_of "$WORK/m/model.safetensors")
size=$(stat -c %s "$WORK/m/model.safetensors")

start_proxy counted
export HFS3_CACHE_DIR=$WORK/cache
expect_exit 0 "_index" "$HFS3_BIN" _index counted:models/m1
pids=""
for i in 1 2 3 4 5 6 7 8; do
  "$HFS3_BIN" _get counted:models/m1 model.safetensors >"$WORK/get$i.out" 2>&1 &
  pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a concurrent _get failed: $(cat "$WORK"/get*.out)"; done
# a chunk-checked _get answers from the mount's cblobs/; its detached flush moves the file into blobs/ later
wait_flushed "$HFS3_CACHE_DIR"
cmp -s "$HFS3_CACHE_DIR/blobs/$big" "$WORK/m/model.safetensors" || fail "blob differs"
got=$(got_bytes "$WORK/counted.log" m1/model.safetensors)
[ "$got" = "$size" ] || { cat "$WORK/counted.log"; fail "8 concurrent _get downloaded $got bytes, want $size once"; }
ranges=$(grep -c 'm1/model.safetensors range=bytes=' "$WORK/counted.log")
[ "$ranges" -gt 1 ] || fail "expected parallel ranged GETs, saw $ranges"
ok "8 concurrent _get: $got bytes downloaded once, in $ranges ranged GETs"

# a slow proxy (4 MiB/s per connection) so that a fetch can be killed while ranges are in flight; two
# connections make ranges of 16+16+8 MiB, so the third one is still running when the first two are done
start_proxy slow $((4 << 20))
export HFS3_CACHE_DIR=$WORK/cache2
HFS3_CONNECTIONS=2 "$HFS3_BIN" fetch slow:models/m1 >"$WORK/killed.out" 2>&1 &
fpid=$!
# the temp names are unpredictable (tmp/<sha>.<random>.part and .done): find them
done_file=
for i in $(seq 1 600); do
  # wait for one completed range (the header line plus a chunk number)
  [ -n "$done_file" ] || done_file=$(ls "$HFS3_CACHE_DIR/tmp/$big".*.done 2>/dev/null | head -1 || true)
  [ -n "$done_file" ] && [ -f "$done_file" ] && [ "$(wc -l <"$done_file")" -ge 2 ] && break
  kill -0 "$fpid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$done_file" ] && [ -f "$done_file" ] && [ "$(wc -l <"$done_file")" -ge 2 ] || fail "no range completed before the kill"
kill -9 "$fpid"
wait "$fpid" 2>/dev/null || true
[ ! -e "$HFS3_CACHE_DIR/blobs/$big" ] || fail "a killed fetch left the blob"
[ -e "${done_file%.done}.part" ] || fail "no temp file after the kill"
[ "$(stat -c %a "${done_file%.done}.part")" = 600 ] || fail "the temp file is not 0600 before it is verified"
ndone=$(($(wc -l <"$done_file") - 1))
[ "$ndone" -lt 3 ] || fail "the fetch completed all ranges before the kill"
ok "killed fetch: blobs/ has no partial file; $ndone ranges recorded as done"
: >"$WORK/counted.log"
expect_exit 0 "fetch after the kill (other connection count: the dead fetch's ranges are kept)" "$HFS3_BIN" fetch counted:models/m1
wait_flushed "$HFS3_CACHE_DIR"
cmp -s "$HFS3_CACHE_DIR/blobs/$big" "$WORK/m/model.safetensors" || fail "resumed blob differs"
[ -z "$(ls -A "$HFS3_CACHE_DIR/tmp")" ] || fail "tmp/ not empty after the resumed fetch"
got=$(got_bytes "$WORK/counted.log" m1/model.safetensors)
[ "$got" -gt 0 ] && [ "$got" -lt "$size" ] || fail "the resumed fetch downloaded the whole file again ($got bytes)"
grep -q ' already cached, ' "$WORK/out" || fail "summary"
ok "resumed: downloaded $got of $size bytes; $(cat "$WORK/out")"
echo "all ok"
