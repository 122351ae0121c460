#!/usr/bin/env bash
# t_cache_gc.sh - HFS3_CACHE_MAX evicts the least recently used blob before a fetch (never the one being
# fetched; a process holding an evicted blob open keeps reading the right bytes), a file larger than the budget
# or than the file system fails at once (ENOSPC, one line, no byte downloaded), last use recorded on a cached
# hit, and `cache du|gc|verify` with --dry-run and --json.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
MNT=""
cleanup() { stop_proxies; [ -z "$MNT" ] || umount "$MNT" 2>/dev/null || true; s3env_stop; }
trap cleanup EXIT

fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
mkdir -p "$WORK/m2"
head -c $((30 << 20)) /dev/urandom >"$WORK/m2/weights.bin"
printf '{"m2": true}\n' >"$WORK/m2/config.json"
fetch_publish "$WORK/m2" s3test:models/m2
ok "published m1 and m2"

export HFS3_CACHE_DIR=$WORK/cache
J() { python3 -c "import json,sys; d=json.load(open('$WORK/out')); print($1)"; }
expect_exit 0 "fetch m1" "$HFS3_BIN" fetch s3test:models/m1
ST=$(blob_of "$WORK/m/model.safetensors"); TOK=$(blob_of "$WORK/m/tokenizer.json"); CFG=$(blob_of "$WORK/m/config.json")
expect_exit 0 "du" "$HFS3_BIN" cache du
grep -q "^s3test:models/m1: 4 files, 4 cached (40.1 MiB), 0 B not cached, last use 20" "$WORK/out" ||
  { cat "$WORK/out"; fail "du line"; }
expect_exit 0 "du --json" "$HFS3_BIN" cache du --json s3test:models/m1
[ "$(J "d['mounts'][0]['remote'], d['mounts'][0]['files_cached'], d['mounts'][0]['bytes_not_cached']")" = \
  "s3test:models/m1 4 0" ] || { cat "$WORK/out"; fail "du --json"; }
ok "cache du: text and --json agree"

# last use: a fetch that finds the blob cached moves its lock file's mtime
touch -d '2001-01-01' "$HFS3_CACHE_DIR/locks/$CFG.lock"
expect_exit 0 "fetch m1 again" "$HFS3_BIN" fetch s3test:models/m1
[ "$(stat -c %Y "$HFS3_CACHE_DIR/locks/$CFG.lock")" -gt 1000000000 ] || fail "last use not recorded"
ok "last use recorded on a cached hit"
# the detached flush of the first fetch holds each blob's lock while it syncs it: a lock held then makes the
# eviction below skip that blob as busy
wait_flushed "$HFS3_CACHE_DIR"

# the budget: 45 MiB holds m1 (40.2 MiB) but not m1 + m2 (30 MiB): the least recently used goes. The
# safetensors blob is made the oldest and is held open by a reader that reads half before and half after.
for s in "$ST" "$TOK" "$CFG"; do touch -d '2001-01-01' "$HFS3_CACHE_DIR/locks/$s.lock" "$HFS3_CACHE_DIR/blobs/$s"; done
touch -d '2002-01-01' "$HFS3_CACHE_DIR/locks/$TOK.lock" "$HFS3_CACHE_DIR/locks/$CFG.lock"
mkfifo "$WORK/go" "$WORK/ready"
python3 - "$HFS3_CACHE_DIR/blobs/$ST" "$WORK/go" "$WORK/ready" >"$WORK/reader.out" 2>&1 <<'PY' &
import hashlib, sys
f = open(sys.argv[1], "rb")
h = hashlib.sha256(f.read(20 << 20))
open(sys.argv[3], "w").close()          # ready: half read
open(sys.argv[2]).read()                # wait until the blob was evicted
h.update(f.read())
print(h.hexdigest())
PY
reader=$!
cat "$WORK/ready" >/dev/null
HFS3_CACHE_MAX=45M HFS3_LOG=info expect_exit 0 "fetch m2 within the budget" "$HFS3_BIN" fetch s3test:models/m2
[ ! -e "$HFS3_CACHE_DIR/blobs/$ST" ] || fail "the least recently used blob was not evicted"
[ -e "$HFS3_CACHE_DIR/blobs/$TOK" ] && [ -e "$HFS3_CACHE_DIR/blobs/$CFG" ] || fail "more than needed was evicted"
W2=$(blob_of "$WORK/m2/weights.bin")
cmp -s "$HFS3_CACHE_DIR/blobs/$W2" "$WORK/m2/weights.bin" || fail "the fetched blob is not there"
grep -q "removed 1 least recently used files (40.0 MiB) to stay within HFS3_CACHE_MAX=45M" "$WORK/err" ||
  { cat "$WORK/err"; fail "info line"; }
echo go >"$WORK/go"
wait "$reader" || fail "reader"
[ "$(cat "$WORK/reader.out")" = "$ST" ] || { cat "$WORK/reader.out"; fail "the open blob read other bytes after eviction"; }
used=$(du -sb --apparent-size "$HFS3_CACHE_DIR/blobs" | cut -f1)
[ "$used" -le $((45 << 20)) ] || fail "cache holds $used bytes, over 45M"
ok "budget: the LRU blob evicted ($used bytes left), the new one kept, an open reader still read the right bytes"

# a file larger than the whole budget: one line, nothing removed, no byte of it downloaded
start_proxy px
before=$(ls "$HFS3_CACHE_DIR/blobs" | sort)
expect_exit 0 "m1 index through the proxy" "$HFS3_BIN" _index px:models/m1
HFS3_CACHE_MAX=20M expect_exit 1 "fetch of a file over the budget" "$HFS3_BIN" _get px:models/m1 model.safetensors
grep -q "model.safetensors: the file is 40.0 MiB, more than the whole cache budget HFS3_CACHE_MAX=20M (20.0 MiB); nothing was removed or downloaded" "$WORK/err" ||
  { cat "$WORK/err"; fail "too large message"; }
[ "$(ls "$HFS3_CACHE_DIR/blobs" | grep -v "^$ST\$" | sort)" = "$(echo "$before" | grep -v "^$ST\$")" ] || fail "blobs removed for nothing"
[ "$(got_bytes "$WORK/px.log" model.safetensors)" = 0 ] || fail "bytes of the too-large file were downloaded"
[ -z "$(ls -A "$HFS3_CACHE_DIR/tmp")" ] || fail "tmp/ not empty"
ok "too large for the budget: $(grep -o 'the file is.*' "$WORK/err" | head -c 120)..."

# a file system too small (no budget): ENOSPC at once, before a byte
if mkdir "$WORK/small" && mount -t tmpfs -o size=8m tmpfs "$WORK/small" 2>/dev/null; then
  MNT=$WORK/small
  HFS3_CACHE_DIR=$WORK/small/c expect_exit 1 "fetch into a full file system" "$HFS3_BIN" fetch px:models/m1
  grep -q "model.safetensors: No space left on device: the file is 40.0 MiB and the file system of $WORK/small/c has .* free; nothing was downloaded" "$WORK/err" ||
    { cat "$WORK/err"; fail "ENOSPC message"; }
  [ "$(got_bytes "$WORK/px.log" model.safetensors)" = 0 ] || fail "bytes downloaded into a full file system"
  ok "free space: $(grep -o 'the file is.*free' "$WORK/err" | head -1)"
  # the files that did fit were installed recorded: the detached flush still has the file system open until it
  # has flushed them (and exits right after its last record)
  wait_flushed "$WORK/small/c"
  for _ in $(seq 1 50); do umount "$MNT" 2>/dev/null && break; sleep 0.1; done
  ! mountpoint -q "$MNT" || fail "umount $MNT: $(umount "$MNT" 2>&1)"
  MNT=""
else
  ok "SKIP free-space check (no tmpfs mount here)"
fi

# gc: an unreferenced blob (in no cached manifest), --dry-run first
printf 'orphan' >"$WORK/orphan"; OR=$(blob_of "$WORK/orphan")
cp "$WORK/orphan" "$HFS3_CACHE_DIR/blobs/$OR"; touch -d '2001-01-01' "$HFS3_CACHE_DIR/blobs/$OR"
expect_exit 0 "gc --unreferenced --dry-run" "$HFS3_BIN" cache gc --unreferenced --dry-run
grep -q "^would remove $OR 6 B, last use 2001-01-01T.*, unreferenced$" "$WORK/out" || { cat "$WORK/out"; fail "gc dry run"; }
[ -e "$HFS3_CACHE_DIR/blobs/$OR" ] || fail "--dry-run removed"
grep -q "^cache gc: would remove 1 file (6 B)" "$WORK/out" || { cat "$WORK/out"; fail "gc summary"; }
expect_exit 0 "gc --unreferenced" "$HFS3_BIN" cache gc --unreferenced --json
[ "$(J "d['removed_files'], d['removed'][0]['sha256'] == '$OR'")" = "1 True" ] || { cat "$WORK/out"; fail "gc --json"; }
[ ! -e "$HFS3_CACHE_DIR/blobs/$OR" ] || fail "orphan not removed"
wait_flushed "$HFS3_CACHE_DIR"   # a shim load's chunk-checked blobs enter blobs/ with the flush
# every blob with bytes goes under --max 0; an empty one (a 0-byte file's) only when the LRU order reaches it
# before the last byte is gone
n=$(ls "$HFS3_CACHE_DIR/blobs" | wc -l)
nz=$(find "$HFS3_CACHE_DIR/blobs" -type f -size +0 | wc -l)
touch -d '2001-01-01' "$HFS3_CACHE_DIR/locks/$TOK.lock" "$HFS3_CACHE_DIR/blobs/$TOK"
expect_exit 0 "gc --older-than --dry-run" "$HFS3_BIN" cache gc --older-than 3650 --dry-run
grep -q "^would remove $TOK .*older (s3test:models/m1 tokenizer.json)$" "$WORK/out" || { cat "$WORK/out"; fail "older-than"; }
grep -q "$W2" "$WORK/out" && fail "older-than picked a fresh blob"
expect_exit 0 "gc --max 0 --dry-run" "$HFS3_BIN" cache gc --max 0 --dry-run
k=$(sed -n 's/^cache gc: would remove \([0-9]*\) files.*/\1/p' "$WORK/out")
[ -n "$k" ] && [ "$k" -ge "$nz" ] && [ "$k" -le "$n" ] || { cat "$WORK/out"; fail "--max 0 dry run"; }
[ "$(ls "$HFS3_CACHE_DIR/blobs" | wc -l)" = "$n" ] || fail "dry run removed"
# a blob whose lock is held (being fetched or checked) is skipped, never waited for
flock "$HFS3_CACHE_DIR/locks/$TOK.lock" sleep 30 & holder=$!
for i in $(seq 1 100); do grep -q "FLOCK" /proc/locks && [ -n "$(awk -v p=$holder '$5 == p' /proc/locks 2>/dev/null)" ] && break; sleep 0.1; done
expect_exit 1 "gc --max 1K with a busy blob" "$HFS3_BIN" cache gc --max 1K
grep -q "kept 1 busy" "$WORK/out" || { cat "$WORK/out" "$WORK/err"; fail "busy blob"; }
[ -e "$HFS3_CACHE_DIR/blobs/$TOK" ] || fail "busy blob removed"
kill $holder; wait $holder 2>/dev/null || true
ok "gc: --unreferenced, --older-than, --max with --dry-run and --json; a busy blob kept"

# verify: a damaged blob is found, kept under --dry-run, removed otherwise
expect_exit 0 "fetch m1" "$HFS3_BIN" fetch s3test:models/m1
wait_flushed "$HFS3_CACHE_DIR"   # (cache verify skips a blob whose lock the flush holds as busy)
chmod u+w "$HFS3_CACHE_DIR/blobs/$CFG"; printf 'X' | dd of="$HFS3_CACHE_DIR/blobs/$CFG" bs=1 seek=3 conv=notrunc 2>/dev/null
expect_exit 1 "cache verify --dry-run" "$HFS3_BIN" cache verify --dry-run
grep -q "^bad, would remove: $CFG (s3test:models/m1 config.json): .* hashes to " "$WORK/out" || { cat "$WORK/out"; fail "verify line"; }
grep -q "files checked .* 1 bad" "$WORK/out" || { cat "$WORK/out"; fail "verify summary"; }
[ -e "$HFS3_CACHE_DIR/blobs/$CFG" ] || fail "verify --dry-run removed"
expect_exit 1 "cache verify" "$HFS3_BIN" cache verify --json
[ "$(J "d['bad'], d['problems'][0]['sha256'] == '$CFG'")" = "1 True" ] || { cat "$WORK/out"; fail "verify --json"; }
[ ! -e "$HFS3_CACHE_DIR/blobs/$CFG" ] || fail "bad blob kept"
expect_exit 0 "cache verify of a clean cache" "$HFS3_BIN" cache verify
expect_exit 0 "fetch heals" "$HFS3_BIN" fetch s3test:models/m1
cmp -s "$HFS3_CACHE_DIR/blobs/$CFG" "$WORK/m/config.json" || fail "refetch"
ok "verify: $(tail -1 "$WORK/out")"

# usage errors
expect_exit 2 "gc without a criterion" "$HFS3_BIN" cache gc
one_line "$WORK/err"; grep -q '^hfs3-manifest cache gc: nothing to do' "$WORK/err" || fail "gc usage line"
expect_exit 2 "bad --max" "$HFS3_BIN" cache gc --max 12Q
grep -q "^hfs3-manifest cache gc: bad size '12Q'" "$WORK/err" || { cat "$WORK/err"; fail "bad size line"; }
HFS3_CACHE_MAX=lots expect_exit 1 "bad HFS3_CACHE_MAX" "$HFS3_BIN" fetch s3test:models/m2 
expect_exit 2 "unknown cache subcommand" "$HFS3_BIN" cache frobnicate
ok "usage errors: exit 2, one line"
