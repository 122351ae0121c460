#!/usr/bin/env bash
# t_shim_progress.sh - the shim's stall check follows the helper's temp files (tmp/<sha256>.<rand>.part,
# allocated at full size, and its .done sidecar): a real fetch slowed by the fault proxy that keeps writing is
# never cut by a small HFS3_STALL_TIMEOUT, one whose requests hang is cut after it with EIO and one log line.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
cleanup() { stop_proxies; s3env_stop; }
trap cleanup EXIT
mkdir -p "$WORK/p"
head -c $((4 << 20)) /dev/urandom >"$WORK/p/big.bin"
head -c $((1536 << 10)) /dev/urandom >"$WORK/p/one.bin"
fetch_publish "$WORK/p" s3test:models/p
# without chunk digests (8 MiB chunks make every range one chunk): big.bin is then fetched as 2 ranges of 2 MiB,
# and only a file of more than one range has the .done sidecar that progress lines read
"$HFS3_BIN" show --json s3test:models/p |
  python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("chunk_size", None); [e.pop("chunks", None) for e in d["entries"]]; json.dump(d, sys.stdout)' \
  >"$WORK/p.json" || fail "manifest without chunk digests"
rclone copyto "$WORK/p.json" s3test:models/p/.hfs3/manifest.json || fail "upload the manifest"
export HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0 HFS3_STALL_TIMEOUT=2
unset HFS3_OFFLINE
M=$WORK/mnt/p

# slow but live: 2 ranges of 2 MiB at 400 KB/s each, and one range of 1.5 MiB at 300 KB/s (no sidecar): ~5 s
start_proxy slow 400000
for f in big.bin one.bin; do
  start=$(date +%s)
  HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM cat "$M/$f" >"$WORK/out" 2>"$WORK/err" ||
    { cat "$WORK/err"; fail "slow fetch of $f cut"; }
  took=$(( $(date +%s) - start ))
  cmp -s "$WORK/out" "$WORK/p/$f" || fail "slow fetch of $f: wrong bytes"
  [ "$took" -ge 3 ] || fail "slow fetch of $f took ${took}s: the proxy did not slow it"
  echo "slow fetch of $f: ${took}s, stall timeout 2 s, not cut"
done

# last use: an open of a cached blob through the shim moves its lock file's mtime (gc's LRU clock)
bsha=$(blob_of "$WORK/p/big.bin")
touch -d '2 hours ago' "$HFS3_CACHE_DIR/locks/$bsha.lock"
before=$(stat -c %Y "$HFS3_CACHE_DIR/locks/$bsha.lock")
HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM cat "$M/big.bin" >/dev/null || fail "cat of a cached blob"
after=$(stat -c %Y "$HFS3_CACHE_DIR/locks/$bsha.lock")
[ "$after" -gt $((before + 3600)) ] || fail "last use: the lock file's mtime did not move ($before -> $after)"
echo "last use: lock file mtime $before -> $after"

# HFS3_LOG=info: a line per helper start and result, and progress lines while an open waits (> 3 s)
HFS3_CACHE_DIR=$WORK/cache-info HFS3_LOG=info HFS3_MOUNTS="$M=slow:models/p" LD_PRELOAD=$HFS3_SHIM \
  cat "$M/big.bin" 2>"$WORK/info.err" >"$WORK/out" || { cat "$WORK/info.err"; fail "info: cat"; }
cat "$WORK/info.err"
cmp -s "$WORK/out" "$WORK/p/big.bin" || fail "info: wrong bytes"
grep -q "^hfs3: $M: refreshing the manifest of slow:models/p" "$WORK/info.err" || fail "info: no manifest line"
grep -q "^hfs3: $M/big.bin: fetching slow:models/p/big.bin (4194304 bytes)" "$WORK/info.err" || fail "info: no fetching line"
grep -Eq "^hfs3: $M/big.bin: .* of 4.0 MiB \([0-9]+%\), .*/s, about [0-9]+ s left" "$WORK/info.err" || fail "info: no progress line"
grep -Eq "^hfs3: $M/big.bin: fetched in [0-9.]+ s" "$WORK/info.err" || fail "info: no fetched line"

# stalled: every GET of hang.bin is read and never answered; the shim gives up after ~2 s
head -c $((3 << 20)) /dev/urandom >"$WORK/p/hang.bin"
fetch_publish "$WORK/p" s3test:models/p
# without chunk digests (8 MiB chunks make every range one chunk): big.bin is then fetched as 2 ranges of 2 MiB,
# and only a file of more than one range has the .done sidecar that progress lines read
"$HFS3_BIN" show --json s3test:models/p |
  python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("chunk_size", None); [e.pop("chunks", None) for e in d["entries"]]; json.dump(d, sys.stdout)' \
  >"$WORK/p.json" || fail "manifest without chunk digests"
rclone copyto "$WORK/p.json" s3test:models/p/.hfs3/manifest.json || fail "upload the manifest"
start_proxy stuck 0 "--hang-first 20 --match hang.bin"
start=$(date +%s)
rc=0
HFS3_MOUNTS="$M=stuck:models/p" LD_PRELOAD=$HFS3_SHIM cat "$M/hang.bin" >/dev/null 2>"$WORK/err" || rc=$?
took=$(( $(date +%s) - start ))
cat "$WORK/err"
[ "$rc" = 1 ] || fail "stalled fetch: exit $rc, not 1"
[ "$took" -le 8 ] || fail "stalled fetch: cut after ${took}s, not ~2 s"
[ "$(grep -c '^hfs3:.*no progress.*HFS3_STALL_TIMEOUT' "$WORK/err")" = 1 ] || fail "stalled fetch: no log line"
sha=$(blob_of "$WORK/p/hang.bin")
flock -n "$HFS3_CACHE_DIR/locks/$sha.lock" true || fail "stalled fetch: the lock is still held"
echo "stalled fetch: EIO after ${took}s"
ok "shim stall check: a slow live fetch (2 ranges, and 1) is not cut by HFS3_STALL_TIMEOUT=2, a hung one is; an open of a cached blob records its last use"
