#!/usr/bin/env bash
# t_fetch_durable.sh - the flush behind the load (issue 21, item 1; include/hfs3/durable.h), with a simulated
# reboot through HFS3_TEST_BOOT_ID (tests only):
#  Both with chunk digests (models/c: blobs checked as they arrive, into the mount's cblobs/) and without
#  (models/w: verified whole into blobs/).
#  1. fetch installs each blob recorded in unflushed/ with this boot's id, the record written before the blob's
#     rename (strace); HFS3_TEST_NO_FLUSH=1 leaves them as a crash would; without it the detached flush removes
#     them; HFS3_DURABLE=sync writes none.
#  2. after a "reboot", an unflushed blob zeroed or torn (same size) is verified, removed and fetched again, never
#     served: through fetch and through the shim (which takes it as missing and lets the helper's _get verify it);
#     an intact one is hashed once, then trusted.
#  3. a flushed blob (no record) is never hashed again after a reboot: its damaged bytes (planted by the test)
#     are served as they are, and no "verifying it again" line appears.
#  4. under the boot that wrote it, an unflushed blob is served without a hash.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT

A=aaaaaaaa-0000-4000-8000-000000000001
B=bbbbbbbb-0000-4000-8000-000000000002
C=cccccccc-0000-4000-8000-000000000003
mkdir -p "$WORK/m"
printf '{"architectures": ["Test"]}\n' >"$WORK/m/config.json"
head -c $((3 << 20)) /dev/urandom >"$WORK/m/a.safetensors"
head -c $((5 << 20)) /dev/urandom >"$WORK/m/b.safetensors"
# two copies: models/c with chunk digests (checked as they arrive, into the mount's cblobs/, moved into blobs/ by
# the flush) and models/w without (verified whole into blobs/)
for p in c w; do
  rclone copy "$WORK/m" s3test:models/$p || fail "rclone copy"
  "$HFS3_BIN" build -o "$WORK/$p.json" s3test:models/$p >/dev/null 2>&1 || fail "build"
done
python3 - "$WORK/w.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d.pop("chunk_size", None)
for e in d["entries"]:
    e.pop("chunks", None)
json.dump(d, open(sys.argv[1], "w"))
PY
grep -q '"chunks"' "$WORK/c.json" || fail "test setup: no chunk digests in c.json"
for p in c w; do rclone copyto "$WORK/$p.json" s3test:models/$p/.hfs3/manifest.json || fail "upload manifest"; done
sha() { sha256sum "$WORK/m/$1" | cut -d' ' -f1; }
SA=$(sha a.safetensors) SB=$(sha b.safetensors) SC=$(sha config.json)
# HFS3_VERIFY=chunks: fetch checks chunk digests too (by default only the shim's loads do); models/w has none
export HFS3_CACHE_DIR=$WORK/cache HFS3_CONNECTIONS=2 HFS3_VERIFY=chunks
CD=$HFS3_CACHE_DIR
# blobp SHA: where the blob is before the flush; recn SHA: its record's name
blobp() { if [ "$P" = c ]; then echo "$CD/mounts/$(ls "$CD/mounts")/cblobs/$1"; else echo "$CD/blobs/$1"; fi; }
recn() { if [ "$P" = c ]; then echo "$1.m$(ls "$CD/mounts")"; else echo "$1"; fi; }
# wait_flushed: the detached flush has removed every record
wait_flushed() {  # (records only: lib.sh's wait_flushed CACHE also waits for every promotion)
  for _ in $(seq 1 300); do [ -z "$(ls -A "$CD/unflushed" 2>/dev/null)" ] && return 0; sleep 0.1; done
  fail "records left in unflushed/ after 30 s: $(ls "$CD/unflushed")"
}

for P in w c; do
  rm -rf "$CD"
  # 1. records, their order, the flush, sync mode
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 HFS3_TEST_BOOT_ID=$A HFS3_TEST_NO_FLUSH=1 strace -f -qq -e trace=renameat2,renameat,fsync -o "$WORK/strace" \
    "$HFS3_BIN" fetch s3test:models/$P >/dev/null 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch"; }
  for s in $SA $SB $SC; do
    [ "$(head -1 "$CD/unflushed/$(recn $s)")" = "$A" ] || fail "no record of boot A for blob $s"
    [ -f "$(blobp $s)" ] || fail "no blob at $(blobp $s)"
    # the record's rename, then an fsync of unflushed/ (a directory), then the blob's rename into blobs/
    python3 - "$WORK/strace" "$s" "$(recn $s)" <<'PY' || fail "blob $s: its record was not durable before its rename into blobs/"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
sha, recname = sys.argv[2], sys.argv[3]
rec = next(i for i, l in enumerate(lines) if "rename" in l and '"%s"' % recname in l and ".part" not in l)
blob = next(i for i, l in enumerate(lines) if "rename" in l and ".part" in l and '"%s"' % sha in l)
assert rec < blob, (rec, blob)
assert any(l.split()[1].startswith("fsync(") for l in lines[rec + 1:blob]), "no fsync between"
PY
  done
  ok "$P: fetch records each blob unflushed (boot id inside, fsynced) before its rename into blobs/"
  HFS3_TEST_BOOT_ID=$A "$HFS3_BIN" fetch s3test:models/$P >/dev/null 2>&1 || fail "second fetch"
  wait_flushed
  for s in $SA $SB $SC; do
    cmp -s "$CD/blobs/$s" "$(ls "$WORK"/m/* | while read -r f; do [ "$(sha256sum "$f" | cut -d' ' -f1)" = $s ] && echo "$f"; done)" ||
      fail "blob $s not in blobs/ after the flush"
  done
  [ "$P" = w ] || [ -z "$(ls -A "$CD"/mounts/*/cblobs)" ] || fail "cblobs/ not empty after the flush"
  ok "$P: the detached flush removes the records (and moves chunk-checked blobs into blobs/)"
  rm -rf "$CD"
  HFS3_DURABLE=sync HFS3_TEST_BOOT_ID=$A HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" fetch s3test:models/$P >/dev/null 2>&1 ||
    fail "fetch, HFS3_DURABLE=sync"
  [ -z "$(ls -A "$CD/unflushed")" ] || fail "HFS3_DURABLE=sync left records: $(ls "$CD/unflushed")"
  ok "$P: HFS3_DURABLE=sync flushes before the install: no record"

  # 2. a reboot: zeroed and torn unflushed blobs are fetched again, the intact one verified once
  crash() { # fetch under boot A without the flush, then damage a and b in place, same size
    rm -rf "$CD"
    HFS3_TEST_BOOT_ID=$A HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" fetch s3test:models/$P >/dev/null 2>&1 || fail "fetch (crash)"
    dd if=/dev/zero of="$(blobp $SA)" bs=1M count=3 conv=notrunc status=none
    dd if=/dev/zero of="$(blobp $SB)" bs=1M seek=3 count=2 conv=notrunc status=none
  }
  crash
  HFS3_TEST_BOOT_ID=$B HFS3_LOG=info "$HFS3_BIN" fetch s3test:models/$P >"$WORK/out" 2>"$WORK/err" ||
    { cat "$WORK/err"; fail "fetch after the reboot"; }
  cat "$WORK/err"
  wait_flushed
  # (a chunk-checked blob enters blobs/ after its record is gone: the promotion hashes it first)
  for _ in $(seq 1 100); do [ -e "$CD/blobs/$SA" ] && break; sleep 0.1; done
  cmp -s "$CD/blobs/$SA" "$WORK/m/a.safetensors" || fail "zeroed unflushed blob still served after a reboot"
  cmp -s "$CD/blobs/$SB" "$WORK/m/b.safetensors" || fail "torn unflushed blob still served after a reboot"
  [ "$(grep -c 'verifying it again' "$WORK/err")" = 3 ] || fail "expected three blobs verified again"
  grep -q "$SA.*refusing it; removed it, fetching it again" "$WORK/err" || fail "no refetch line for a"
  ! grep -q "$SC.*refusing" "$WORK/err" || fail "the intact blob was refused"
  grep -q ", 8.0 MiB fetched" "$WORK/out" || { cat "$WORK/out"; fail "expected a and b (8 MiB) fetched again"; }
  wait_flushed
  if [ "$P" = c ]; then  # the intact one, chunk-checked again after the reboot, is promoted too (record kept till then)
    for _ in $(seq 1 100); do [ -e "$CD/blobs/$SC" ] && break; sleep 0.1; done
    [ -e "$CD/blobs/$SC" ] || fail "the intact chunk-checked blob, verified after the reboot, never entered blobs/"
    [ -z "$(ls -A "$CD"/mounts/*/cblobs)" ] || fail "cblobs/ not empty after the reboot's flush: $(ls "$CD"/mounts/*/cblobs)"
  fi
  ok "$P: fetch after a reboot: zeroed and torn unflushed blobs fetched again, the intact one verified and kept"

  # the same through the shim
  crash
  M=$WORK/mnt/$P
  export HFS3_MOUNTS="$M=s3test:models/$P" HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
  for f in a.safetensors b.safetensors config.json; do
    HFS3_TEST_BOOT_ID=$B LD_PRELOAD=$HFS3_SHIM cat "$M/$f" >"$WORK/got" || fail "shim: cat $f after the reboot"
    cmp -s "$WORK/got" "$WORK/m/$f" || fail "shim served the damaged unflushed $f after a reboot"
  done
  wait_flushed
  HFS3_TEST_BOOT_ID=$B HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM cmp -s "$M/a.safetensors" "$WORK/m/a.safetensors" ||
    fail "shim: a after its refetch"
  ok "$P: shim after a reboot: damaged unflushed blobs taken as missing, verified and fetched again by the helper"

  # 3. a flushed blob is trusted by its name after a reboot: never hashed again (damage planted to prove it)
  dd if=/dev/zero of="$CD/blobs/$SA" bs=1M count=1 conv=notrunc status=none
  HFS3_TEST_BOOT_ID=$C HFS3_LOG=debug "$HFS3_BIN" fetch s3test:models/$P >"$WORK/out" 2>"$WORK/err" || fail "fetch, boot C"
  ! grep -q 'verifying it again' "$WORK/err" || fail "a flushed blob was hashed again after a reboot"
  grep -q ", 0 B fetched" "$WORK/out" || { cat "$WORK/out"; fail "a flushed blob was fetched again"; }
  HFS3_TEST_BOOT_ID=$C LD_PRELOAD=$HFS3_SHIM cmp -s "$M/a.safetensors" "$CD/blobs/$SA" || fail "shim, boot C"
  ok "$P: flushed blobs are not hashed again after a reboot (fetch and shim)"

  # 4. the boot that wrote the record trusts the blob (the page cache has it): served as it is
  crash
  HFS3_TEST_BOOT_ID=$A HFS3_TEST_NO_FLUSH=1 HFS3_LOG=debug "$HFS3_BIN" fetch s3test:models/$P >"$WORK/out" 2>"$WORK/err" ||
    fail "fetch, boot A"
  ! grep -q 'verifying it again' "$WORK/err" || fail "same boot: a recorded blob was hashed"
  [ -e "$CD/unflushed/$(recn $SA)" ] || fail "test setup: the record of a is gone"
  HFS3_TEST_BOOT_ID=$A HFS3_TEST_NO_FLUSH=1 LD_PRELOAD=$HFS3_SHIM cmp -s "$M/a.safetensors" "$(blobp $SA)" ||
    fail "shim, boot A"
  # a record a member could write into (group-writable, as records of a shared cache were: a member writes this
  # boot's id over the crash's) says nothing: the shim has the helper hash the blob again, so the zeroed a is
  # fetched again, never served, and its record settled (removed, or written again not group-writable)
  r="$CD/unflushed/$(recn $SA)"
  chmod g+w "$r"
  HFS3_TEST_BOOT_ID=$A HFS3_TEST_NO_FLUSH=1 LD_PRELOAD=$HFS3_SHIM cmp -s "$M/a.safetensors" "$WORK/m/a.safetensors" ||
    fail "shim served the zeroed a under a group-writable record of this boot (one a member could write)"
  [ ! -e "$r" ] || [ $((0$(stat -c %a "$r") & 022)) = 0 ] ||
    fail "shim: a group-writable record of this boot was trusted, its blob not hashed again"
  ok "$P: under the boot that installed it, an unflushed blob is used without a hash"

  # 5. offline after a reboot (HFS3_OFFLINE=1: the crash's server restarts without S3): the shim has the helper
  # hash the unflushed copies again, which needs no request: the intact one is served, the damaged ones never
  crash
  for f in a.safetensors b.safetensors; do
    set +e
    HFS3_TEST_BOOT_ID=$B HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM cat "$M/$f" >"$WORK/got" 2>"$WORK/err"; st=$?
    set -e
    [ "$st" != 0 ] && [ ! -s "$WORK/got" ] || fail "offline after a reboot: the damaged unflushed $f was served"
    grep -q "HFS3_OFFLINE=1" "$WORK/err" || { cat "$WORK/err"; fail "offline after a reboot: $f: no reason"; }
    cp "$WORK/err" "$WORK/err.damaged"
  done
  HFS3_TEST_BOOT_ID=$B HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM cat "$M/config.json" >"$WORK/got" 2>"$WORK/err" ||
    { cat "$WORK/err"; fail "offline after a reboot: the intact unflushed config.json is not served"; }
  cmp -s "$WORK/got" "$WORK/m/config.json" || fail "offline after a reboot: config.json differs"
  [ "$(head -1 "$CD/unflushed/$(recn $SC)" 2>/dev/null)" = "$B" ] || [ ! -e "$CD/unflushed/$(recn $SC)" ] ||
    fail "offline after a reboot: the verified copy's record is still the old boot's"
  wait_flushed
  ok "$P: offline after a reboot: an intact unflushed copy is hashed again by the helper and served, damaged ones are an error ($(head -c 160 "$WORK/err.damaged"))"
done

# 6. offline after a reboot on a full disk (root: a tmpfs): the helper hashes an intact chunk-checked copy again,
# but no new record of this boot can be written (a temp file and a rename need a block): the copy is still served,
# its old record rewritten in place (its block is there), never an EIO after a hash that found it intact
if [ "$(id -u)" = 0 ] && mkdir -p "$WORK/small" && mount -t tmpfs -o size=16m tmpfs "$WORK/small" 2>/dev/null; then
  trap 'umount "$WORK/small" 2>/dev/null || true; s3env_stop' EXIT
  P=c CD=$WORK/small/cache
  export HFS3_CACHE_DIR=$CD
  HFS3_TEST_BOOT_ID=$A HFS3_TEST_NO_FLUSH=1 "$HFS3_BIN" fetch s3test:models/c >/dev/null 2>&1 || fail "fetch (full disk)"
  [ "$(head -1 "$CD/unflushed/$(recn $SA)")" = "$A" ] || fail "test setup: no record of boot A"
  # group-writable, as older versions wrote a shared cache's records: rewritten in place, it must lose that bit
  # (else it says nothing, and every open hashes the copy again)
  chmod g+w "$CD/unflushed/$(recn $SA)"
  dd if=/dev/zero of="$WORK/small/fill" bs=64k status=none 2>/dev/null || true
  [ "$(df -k --output=avail "$WORK/small" | tail -1)" -le 64 ] || fail "test setup: the tmpfs is not full"
  M=$WORK/mnt/c
  HFS3_MOUNTS="$M=s3test:models/c" HFS3_TEST_BOOT_ID=$B HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM \
    cat "$M/a.safetensors" >"$WORK/got" 2>"$WORK/err" ||
    { cat "$WORK/err"; fail "offline after a reboot, full disk: the intact unflushed a.safetensors is not served"; }
  cmp -s "$WORK/got" "$WORK/m/a.safetensors" || fail "offline after a reboot, full disk: a.safetensors differs"
  [ "$(head -1 "$CD/unflushed/$(recn $SA)" 2>/dev/null)" = "$B" ] || [ ! -e "$CD/unflushed/$(recn $SA)" ] ||
    fail "offline after a reboot, full disk: the record is still the old boot's"
  # (the other copies' records are boot A's: the flush leaves them to a helper that can hash them)
  for _ in $(seq 1 100); do [ ! -e "$CD/unflushed/$(recn $SA)" ] && break; sleep 0.1; done
  [ ! -e "$CD/unflushed/$(recn $SA)" ] || [ $((0$(stat -c %a "$CD/unflushed/$(recn $SA)") & 022)) = 0 ] ||
    fail "offline after a reboot, full disk: the record rewritten in place is still group-writable"
  umount -l "$WORK/small"
  ok "c: offline after a reboot on a full disk: an intact unflushed copy is served, its record rewritten in place (or flushed)"
fi
echo "all ok"
