#!/usr/bin/env bash
# t_cache_budget.sh - the cache budget with the real helper and the real shim (issue 23 item 6, issue 24 3.2):
# readers under a budget smaller than the model, with a `cache gc --max 0` loop running beside them, never see
# an EIO (a blob fetched for a waiting open stays until that open has it: the pin, locks/<sha>.pin.lock); no
# line says "no reason recorded"; a file larger than the budget fails at once naming the file and the budget;
# `fetch` of a model larger than the budget exits non-zero at once saying so; a fetch whose earlier file a gc
# removed says which file is missing; in-progress bytes of a fetch about to finish are waited for, not refused.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
GCPID=""
cleanup() { [ -z "$GCPID" ] || kill "$GCPID" 2>/dev/null || true; s3env_stop; }
trap cleanup EXIT

# eight 1 MiB files and a 3 MiB one
mkdir -p "$WORK/p"
for i in 0 1 2 3 4 5 6 7; do head -c $((1 << 20)) /dev/urandom >"$WORK/p/f$i.bin"; done
head -c $((3 << 20)) /dev/urandom >"$WORK/p/big.bin"
fetch_publish "$WORK/p" s3test:models/p
ok "published 8 x 1 MiB + 3 MiB"

export HFS3_CACHE_DIR=$WORK/cache HFS3_PREFETCH=0
M=$WORK/mnt/p
export HFS3_MOUNTS="$M=s3test:models/p"

# readers: 4 processes, each opening and reading the eight files over and over for a few seconds, under a
# 2.5 MiB budget (the model is 8 MiB: every open past the second evicts), with a gc --max 0 loop beside them
expect_exit 0 "index" "$HFS3_BIN" _index s3test:models/p
( while :; do HFS3_LOG=error "$HFS3_BIN" cache gc --max 0 >/dev/null 2>&1 || true; done ) & GCPID=$!
cat >"$WORK/reader.py" <<'PY'
import errno, hashlib, sys, time
base, src, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
want = {i: hashlib.sha256(open("%s/f%d.bin" % (src, i), "rb").read()).hexdigest() for i in range(8)}
eio = bad = n = 0
end = time.monotonic() + secs
while time.monotonic() < end:
    for i in range(8):
        try:
            with open("%s/f%d.bin" % (base, i), "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != want[i]:
                    bad += 1
            n += 1
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            eio += 1
print(n, eio, bad)
PY
pids=""
for r in 1 2 3 4; do
  HFS3_CACHE_MAX=2560K LD_PRELOAD=$HFS3_SHIM python3 "$WORK/reader.py" "$M" "$WORK/p" 6 \
    >"$WORK/r$r.out" 2>"$WORK/r$r.err" & pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "a reader died"; done
kill "$GCPID"; wait "$GCPID" 2>/dev/null || true; GCPID=""
opens=0 eios=0 bads=0
for r in 1 2 3 4; do
  read -r n e b <"$WORK/r$r.out" || { cat "$WORK/r$r.err"; fail "reader $r printed nothing"; }
  opens=$((opens + n)) eios=$((eios + e)) bads=$((bads + b))
done
if [ "$eios" != 0 ] || [ "$bads" != 0 ]; then
  sort "$WORK"/r?.err | uniq -c | sort -rn | head -5
  fail "$eios EIOs and $bads wrong reads in $opens opens under a budget with a gc loop"
fi
! grep -h "no reason recorded" "$WORK"/r?.err || fail "a line says 'no reason recorded'"
[ "$opens" -ge 40 ] || fail "only $opens opens in 6 s"
ok "4 readers, 6 s, 2.5 MiB budget and a gc --max 0 loop: $opens opens, 0 EIO, 0 wrong bytes"

# a file larger than the budget: the open fails at once, the line names the file and the budget
start=$(date +%s%N)
set +e
HFS3_CACHE_MAX=2M LD_PRELOAD=$HFS3_SHIM cat "$M/big.bin" >/dev/null 2>"$WORK/big.err"; rc=$?
set -e
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$rc" != 0 ] || fail "a file over the budget was read"
grep -q "big.bin.*the file is 3.0 MiB, more than the whole cache budget HFS3_CACHE_MAX=2M (2.0 MiB)" "$WORK/big.err" ||
  { cat "$WORK/big.err"; fail "the over-budget line"; }
[ "$ms" -lt 5000 ] || fail "the over-budget open took $ms ms"
ok "a file over the budget: fails in $ms ms: $(grep -o 'the file is.*' "$WORK/big.err" | head -c 100)"

# a helper that dies without a word (killed): the open fails with EIO and a line that says so
cat >"$WORK/killer.sh" <<SH
#!/bin/sh
[ "\$1" = _get ] && kill -9 \$\$
exec "$HFS3_BIN" "\$@"
SH
chmod +x "$WORK/killer.sh"
set +e
HFS3_HELPER=$WORK/killer.sh HFS3_MANIFEST_TTL=100000 LD_PRELOAD=$HFS3_SHIM cat "$M/big.bin" >/dev/null 2>"$WORK/kill.err"
rc=$?
set -e
[ "$rc" != 0 ] || fail "read through a killed helper"
grep -q "big.bin: fetch failed: the helper was killed by signal 9" "$WORK/kill.err" ||
  { cat "$WORK/kill.err"; fail "a killed helper's line"; }
ok "a killed helper: $(grep -o 'fetch failed:.*' "$WORK/kill.err" | head -1)"

# the background prefetch under a budget of about one shard (issue 24: 300M with 256 MiB shards): a reader's
# own fetch found the prefetcher's file in tmp/ and failed "cannot make room: ... fetches in progress" with
# EIO; it now waits for that fetch to end, then removes its file
mkdir -p "$WORK/s"
for i in 0 1 2 3; do head -c $((4 << 20)) /dev/urandom >"$WORK/s/model-0000$i.safetensors"; done
fetch_publish "$WORK/s" s3test:models/s
set +e
HFS3_PREFETCH=1 HFS3_CACHE_MAX=5M HFS3_MOUNTS="$WORK/mnt/s=s3test:models/s" HFS3_CACHE_DIR=$WORK/cache-s \
  LD_PRELOAD=$HFS3_SHIM python3 -c '
import hashlib, sys
for p in sys.argv[1:]:
    print(hashlib.sha256(open(p, "rb").read()).hexdigest())' "$WORK"/mnt/s/model-0000{0,1,2,3}.safetensors \
  >"$WORK/s.out" 2>"$WORK/s.err"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$WORK/s.err"; fail "a reader under a one-shard budget with the prefetch on: exit $rc"; }
[ "$(cat "$WORK/s.out")" = "$(cd "$WORK/s" && sha256sum model-0000{0,1,2,3}.safetensors | cut -d' ' -f1)" ] ||
  fail "wrong bytes"
ok "4 x 4 MiB shards read in order under a 5 MiB budget with the prefetch on: no EIO"

# fetch of a model larger than the budget: non-zero at once, saying so; nothing downloaded
rm -rf "$HFS3_CACHE_DIR"
HFS3_CACHE_MAX=6M expect_exit 1 "fetch over the budget" "$HFS3_BIN" fetch s3test:models/p
grep -q "s3test:models/p: the model's files are 11.0 MiB, more than the cache budget HFS3_CACHE_MAX=6M (6.0 MiB)" \
  "$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "fetch over the budget: message"; }
[ -z "$(ls -A "$HFS3_CACHE_DIR/blobs")" ] || fail "fetch over the budget downloaded files"
ok "fetch of a model over the budget: exit 1 at once: $(head -c 140 "$WORK/err")..."

# fetch within the budget while a more recently used file is cached: the fetch keeps its own files (pinned)
# and removes the other one, where least-recently-used alone would remove the fetch's first file
mkdir -p "$WORK/q"
for i in 0 1 2; do head -c $((3 << 20)) /dev/urandom >"$WORK/q/s$i.safetensors"; done
fetch_publish "$WORK/q" s3test:models/q
BIG=$(blob_of "$WORK/p/big.bin")
expect_exit 0 "get big.bin" "$HFS3_BIN" _get s3test:models/p big.bin
# (chunk-checked: in the mount's cblobs/ until the detached flush, which holds its lock meanwhile, moves it)
wait_flushed "$HFS3_CACHE_DIR"
touch -d '+1 hour' "$HFS3_CACHE_DIR/locks/$BIG.lock"
HFS3_CACHE_MAX=10M expect_exit 0 "fetch q (9 MiB) beside big.bin (3 MiB, used last) under 10M" \
  "$HFS3_BIN" fetch s3test:models/q
for i in 0 1 2; do
  cmp -s "$HFS3_CACHE_DIR/blobs/$(blob_of "$WORK/q/s$i.safetensors")" "$WORK/q/s$i.safetensors" ||
    { cat "$WORK/out" "$WORK/err"; fail "s$i.safetensors not cached after fetch"; }
done
[ ! -e "$HFS3_CACHE_DIR/blobs/$BIG" ] || fail "big.bin kept: the fetch's own file went instead"
ok "fetch under a budget keeps its own files: the other, more recently used file was removed"

# a file removed while the fetch runs (here by hand, as a gc of another cache user could): fetch names it,
# says why, and exits 1 (before: "0 failed", exit 0, and an offline server failed later)
rm -rf "$HFS3_CACHE_DIR"
SHA0=$(blob_of "$WORK/q/s0.safetensors")
mkdir -p "$HFS3_CACHE_DIR/blobs"
( while :; do rm -f "$HFS3_CACHE_DIR/blobs/$SHA0"; sleep 0.01; done ) & GCPID=$!
expect_exit 1 "fetch q while its first file is removed" "$HFS3_BIN" fetch s3test:models/q
kill "$GCPID"; wait "$GCPID" 2>/dev/null || true; GCPID=""
grep -q "s3test:models/q: s0.safetensors: not in the cache after this fetch: removed while it ran" "$WORK/err" ||
  { cat "$WORK/out" "$WORK/err"; fail "missing file not named"; }
grep -q "0 failed, 1 not cached" "$WORK/out" || { cat "$WORK/out"; fail "summary"; }
ok "a file removed during fetch: exit 1: $(grep -m1 'not in the cache' "$WORK/err" | head -c 140)..."

# files checked by their chunk digests wait in their mount's cblobs/ for the flush to hash them whole: the budget
# counts them and evicts them like blobs. With the flush held back (as a crash would), 9 MiB there and a budget of
# 12 MiB: a 5 MiB file evicts the 9 MiB one (and its record), never going over the budget
rm -rf "$HFS3_CACHE_DIR"
mkdir -p "$WORK/c9" "$WORK/c5"
head -c $((9 << 20)) /dev/urandom >"$WORK/c9/x.safetensors"
head -c $((5 << 20)) /dev/urandom >"$WORK/c5/y.safetensors"
fetch_publish "$WORK/c9" s3test:models/c9
fetch_publish "$WORK/c5" s3test:models/c5
HFS3_VERIFY=chunks HFS3_TEST_NO_FLUSH=1 HFS3_CACHE_MAX=12M expect_exit 0 "fetch c9, chunk-checked" \
  "$HFS3_BIN" fetch s3test:models/c9
[ -n "$(find "$HFS3_CACHE_DIR"/mounts/*/cblobs -type f)" ] || fail "test setup: nothing in cblobs/"
HFS3_VERIFY=chunks HFS3_TEST_NO_FLUSH=1 HFS3_CACHE_MAX=12M expect_exit 0 "fetch c5 with 9 MiB in cblobs/" \
  "$HFS3_BIN" fetch s3test:models/c5
[ "$(du -sbc "$HFS3_CACHE_DIR"/blobs "$HFS3_CACHE_DIR"/mounts/*/cblobs | tail -1 | cut -f1)" -le $((12 << 20)) ] ||
  fail "the cache went over its budget: $(find "$HFS3_CACHE_DIR"/blobs "$HFS3_CACHE_DIR"/mounts/*/cblobs -type f -size +1M)"
[ "$(ls "$HFS3_CACHE_DIR/unflushed" | wc -l)" = 1 ] || fail "records left: $(ls "$HFS3_CACHE_DIR/unflushed")"
ok "the budget counts chunk-checked files not yet hashed whole (cblobs/), and evicts them with their record"
expect_exit 0 "cache gc --max 0 with a file in cblobs/" "$HFS3_BIN" cache gc --max 0
[ -z "$(find "$HFS3_CACHE_DIR"/blobs "$HFS3_CACHE_DIR"/mounts/*/cblobs -type f)" ] ||
  fail "cache gc --max 0 left: $(find "$HFS3_CACHE_DIR"/blobs "$HFS3_CACHE_DIR"/mounts/*/cblobs -type f)"
[ -z "$(ls -A "$HFS3_CACHE_DIR/unflushed")" ] || fail "cache gc left records: $(ls "$HFS3_CACHE_DIR/unflushed")"
ok "cache gc removes a cblobs/ file and its record like a blob"

# a record names its mount's cblobs/ file; one whose mounts/K or cblobs is a symlink (planted by a member of a
# shared cache) points outside the cache: not counted (here a sparse 1 TiB file would fail every fetch)
rm -rf "$HFS3_CACHE_DIR"
expect_exit 0 "fetch c5" "$HFS3_BIN" fetch s3test:models/c5
FK=0123456789abcdef FS=$(printf '%064d' 7)
mkdir -p "$WORK/outside" "$HFS3_CACHE_DIR/mounts/$FK"
truncate -s 1T "$WORK/outside/$FS"
ln -s "$WORK/outside" "$HFS3_CACHE_DIR/mounts/$FK/cblobs"
cp "$HFS3_CACHE_DIR/unflushed/$(ls "$HFS3_CACHE_DIR/unflushed" | head -1)" "$HFS3_CACHE_DIR/unflushed/$FS.m$FK" 2>/dev/null ||
  cat /proc/sys/kernel/random/boot_id >"$HFS3_CACHE_DIR/unflushed/$FS.m$FK"
HFS3_TEST_NO_FLUSH=1 HFS3_CACHE_MAX=12M expect_exit 0 "fetch c9 with a planted record through a symlinked cblobs/" \
  "$HFS3_BIN" fetch s3test:models/c9
[ -f "$WORK/outside/$FS" ] || fail "the file outside the cache was removed"
ok "a record through a symlinked mounts/K/cblobs is not counted against the budget (nor evicted)"
