#!/usr/bin/env bash
# t_shim_offline_promote.sh - an offline open of a chunk-checked blob (mounts/K/cblobs/<sha>) that the flush
# behind another process's load promotes into blobs/ between the shim's look and its open: the open follows the
# blob into blobs/ (one more look, no helper), never EIO. strace holds the shim's open of the cblobs/ file for
# 3 s (delay_enter) while the flush runs.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT

mkdir -p "$WORK/m"
printf '{"architectures": ["Test"]}\n' >"$WORK/m/config.json"
head -c $((1 << 20)) /dev/urandom >"$WORK/m/a.safetensors"
rclone copy "$WORK/m" s3test:models/c || fail "rclone copy"
"$HFS3_BIN" build -o "$WORK/c.json" s3test:models/c >/dev/null 2>&1 || fail "build"
grep -q '"chunks"' "$WORK/c.json" || fail "test setup: no chunk digests in c.json"
rclone copyto "$WORK/c.json" s3test:models/c/.hfs3/manifest.json || fail "upload manifest"
SA=$(sha256sum "$WORK/m/a.safetensors" | cut -d' ' -f1)
export HFS3_CACHE_DIR=$WORK/cache HFS3_VERIFY=chunks HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
CD=$HFS3_CACHE_DIR
# as a crash would leave it: checked by its chunks, in the mount's cblobs/, its record there, not promoted
HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" fetch s3test:models/c >/dev/null 2>&1 || fail "fetch"
K=$(ls "$CD/mounts")
[ -f "$CD/mounts/$K/cblobs/$SA" ] && [ ! -e "$CD/blobs/$SA" ] || fail "test setup: $SA not in cblobs/ only"
M=$WORK/mnt/c
(sleep 1; "$HFS3_BIN" fetch s3test:models/c >/dev/null 2>&1; wait_flushed "$CD") &
bg=$!
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 HFS3_OFFLINE=1 HFS3_MOUNTS="$M=s3test:models/c" strace -f -qq -o /dev/null -P "$CD/mounts/$K/cblobs" \
  -e trace=openat -e inject=openat:delay_enter=3000000 env LD_PRELOAD="$HFS3_SHIM" cat "$M/a.safetensors" \
  >"$WORK/out" 2>"$WORK/err" || true
wait $bg || fail "the flush"
[ -f "$CD/blobs/$SA" ] || fail "test setup: the flush did not promote $SA"
cmp -s "$WORK/out" "$WORK/m/a.safetensors" || { cat "$WORK/err"; fail "offline open while the flush promoted the blob"; }
ok "offline, the blob promoted from cblobs/ into blobs/ between the shim's look and its open: served"
