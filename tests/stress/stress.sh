#!/usr/bin/env bash
# stress.sh - `make stress` (not part of `make test`): loads of a small model (a 40 MiB shard, 8 MiB chunk
# digests, and three small files) through tests/e2e/s3proxy.py faults, until at least STRESS_FAULTS (100) faults
# of each kind were injected: a flipped byte, a connection reset mid-body (cut), a body closed early (truncate),
# a body that stalls with the connection open (stall, HFS3_LOW_SPEED_TIME=1), 500 InternalError and 503 SlowDown;
# the server killed (-9) and restarted STRESS_FAULTS times under running loads; STRESS_KILLS (20) `kill -9`s of
# the helper at random moments; a full disk (tmpfs, as root); every shared-cache attack (t_cache_attacks); and the
# thread pile-up and fork stress of tests/stress/pileup.sh (1,024 threads on cold files, fork while they wait). Prints one table: faults injected, loads
# started, completed, failed, and wrong bytes served (bytes in the cache that differ from the model: must be 0).
# Exit 1 when a wrong byte was served, a load failed where it must heal, or a check of the kill trials failed.
# Run as root (the disk-full part mounts a tmpfs in the work dir and unmounts it).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export HFS3_ROOT=$ROOT BUILD=${BUILD:-build}
export HFS3_BIN=${HFS3_BIN:-$ROOT/$BUILD/bin/hfs3-manifest}
N=${STRESS_FAULTS:-100}
KILLS=${STRESS_KILLS:-20}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hfs3-stress.XXXXXX")}
export WORK
source "$ROOT/scripts/s3env.sh"
source "$ROOT/tests/e2e/lib.sh"
source "$ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK" || exit 1
SMALL=$WORK/small
cleanup() { umount "$SMALL" 2>/dev/null; stop_proxies; s3env_stop; }
trap cleanup EXIT
fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
FILES=(config.json tokenizer.json model.safetensors sub/empty.txt)
model_bytes=$(cat "$WORK/m/config.json" "$WORK/m/tokenizer.json" "$WORK/m/model.safetensors" | wc -c)
export HFS3_CONNECTIONS=4 HFS3_LOG=warn
bad=0
ROWS=()

# wrong_bytes CACHE: bytes of the cache's blobs that differ from the model's files (a blob is named by the sha256
# the manifest gives the file, so a blob that exists must be the file, byte for byte)
wrong_bytes() {
  local f w=0 b
  for f in "${FILES[@]}"; do
    b=$1/blobs/$(blob_of "$WORK/m/$f")
    [ -e "$b" ] || continue
    w=$((w + $(cmp -l "$b" "$WORK/m/$f" 2>/dev/null | wc -l) + $(( $(stat -c %s "$b") > $(stat -c %s "$WORK/m/$f") ? $(stat -c %s "$b") - $(stat -c %s "$WORK/m/$f") : 0 ))))
  done
  for b in "$1"/blobs/*; do
    [ -e "$b" ] || continue
    [ "$(sha256sum <"$b" | cut -d' ' -f1)" = "$(basename "$b")" ] || w=$((w + $(stat -c %s "$b")))
  done
  echo "$w"
}

# one load into a fresh cache; updates the counters of the current kind
LOADS=0 DONE=0 FAILED=0 WRONG=0
load() { # REMOTE [ENV...]
  local remote=$1 c=$WORK/cache.$RANDOM$RANDOM; shift
  LOADS=$((LOADS + 1))
  if env HFS3_CACHE_DIR="$c" "$@" "$HFS3_BIN" fetch "$remote" >"$WORK/load.out" 2>"$WORK/load.err"; then
    DONE=$((DONE + 1))
  else
    FAILED=$((FAILED + 1)); echo "  load failed: $(grep -v 'warning' "$WORK/load.err" | head -2)" >&2
  fi
  WRONG=$((WRONG + $(wrong_bytes "$c")))
  rm -rf "$c"
}
row() { ROWS+=("$(printf '| %-34s | %6s | %5s | %9s | %6s | %11s |' "$1" "$2" "$LOADS" "$DONE" "$FAILED" "$WRONG")")
  [ "$WRONG" = 0 ] && [ "$FAILED" = 0 ] || bad=1
  echo "${ROWS[-1]}"; }

# proxy faults: loads until N faults of the kind were injected
for spec in "flip:2:" "cut:2:--fault-at 100000" "truncate:2:--fault-at 100000" "stall:3:--fault-at 100000" \
            "500:2:" "503:2:"; do
  IFS=: read -r kind every extra <<<"$spec"
  name=p$kind
  start_proxy "$name" 0 "--fault $kind --fault-every $every --exclude /.hfs3/ $extra"
  LOADS=0 DONE=0 FAILED=0 WRONG=0
  while [ "$(grep -c "$kind-injected" "$WORK/$name.log")" -lt "$N" ]; do
    # only a stall needs the short low-speed limit: elsewhere it would turn a busy machine's pauses into faults
    if [ "$kind" = stall ]; then load "$name:models/m1" HFS3_LOW_SPEED_TIME=1 HFS3_RETRIES=8
    else load "$name:models/m1" HFS3_RETRIES=8; fi
  done
  row "$kind (1 in $every replies)" "$(grep -c "$kind-injected" "$WORK/$name.log")"
  stop_proxies
done

# the server killed and restarted under running loads
LOADS=0 DONE=0 FAILED=0 WRONG=0
restarts=0
: >"$WORK/restart.flag"
( while [ -e "$WORK/restart.flag" ]; do load s3test:models/m1 HFS3_RETRIES=40
    echo "$LOADS $DONE $FAILED $WRONG" >"$WORK/restart.counts"; done ) &
loader=$!
while [ "$restarts" -lt "$N" ]; do
  sleep "0.$((RANDOM % 8 + 1))"
  kill -9 "$S3_PID" 2>/dev/null; wait "$S3_PID" 2>/dev/null
  sleep "0.$((RANDOM % 4))"
  node --openssl-legacy-provider "$ROOT/scripts/s3server.js" "$S3_PORT" "$WORK/s3" models >"$WORK/s3server.r.out" 2>&1 &
  S3_PID=$!
  for i in $(seq 1 100); do grep -q '^ready ' "$WORK/s3server.r.out" && break; sleep 0.05; done
  restarts=$((restarts + 1))
done
rm -f "$WORK/restart.flag"
wait "$loader"
read -r LOADS DONE FAILED WRONG <"$WORK/restart.counts"
row "server kill -9 + restart" "$restarts"

# kill -9 of the helper at random moments; the next load completes, temp files do not pile up, disk use stays
# within 1.25x the model
start_proxy slow 30000000 "--match model.safetensors"
LOADS=0 DONE=0 FAILED=0 WRONG=0
C=$WORK/killcache
maxtmp=0 maxdisk=0
for t in $(seq 1 "$KILLS"); do
  HFS3_CACHE_DIR=$C "$HFS3_BIN" fetch slow:models/m1 >/dev/null 2>&1 &
  p=$!
  sleep "$((RANDOM % 2)).$((RANDOM % 10))"
  kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null
  ntmp=$(find "$C/tmp" -type f 2>/dev/null | wc -l)
  disk=$(du -sb "$C" 2>/dev/null | cut -f1)
  [ "$ntmp" -gt "$maxtmp" ] && maxtmp=$ntmp
  [ "${disk:-0}" -gt "$maxdisk" ] && maxdisk=$disk
  LOADS=$((LOADS + 1))
  if HFS3_CACHE_DIR=$C "$HFS3_BIN" fetch s3test:models/m1 >/dev/null 2>"$WORK/k.err"; then DONE=$((DONE + 1)); else
    FAILED=$((FAILED + 1)); echo "  load after kill failed: $(head -2 "$WORK/k.err")" >&2; fi
  WRONG=$((WRONG + $(wrong_bytes "$C")))
  left=$(find "$C/tmp" -type f | wc -l)
  [ "$left" = 0 ] || { echo "  temp files left after a completed load: $(ls "$C/tmp")" >&2; bad=1; }
  rm -f "$C"/blobs/*
done
stop_proxies
row "helper kill -9 at random moments" "$KILLS"
ratio=$(python3 -c "print('%.2f' % ($maxdisk / $model_bytes))")
python3 -c "import sys; sys.exit(0 if $maxdisk <= 1.25 * $model_bytes else 1)" || { echo "  disk use $ratio x the model" >&2; bad=1; }
KILLNOTE="after a kill: at most $maxtmp temp files, disk use at most ${ratio}x the model"

# disk full: tmpfs caches of several sizes, each smaller than the model
LOADS=0 DONE=0 FAILED=0 WRONG=0
DISKNOTE="disk full: not run (not root, or no tmpfs)"
mkdir -p "$SMALL"
clean=0
if [ "$(id -u)" = 0 ]; then
  for sz in ${STRESS_DISK_SIZES:-1m 4m 8m 16m 32m}; do
    mount -t tmpfs -o size=$sz tmpfs "$SMALL" 2>/dev/null || break
    LOADS=$((LOADS + 1))
    if HFS3_CACHE_DIR=$SMALL/c "$HFS3_BIN" fetch s3test:models/m1 >/dev/null 2>"$WORK/full.err"; then DONE=$((DONE + 1)); else
      FAILED=$((FAILED + 1))
      [ "$(grep -c 'No space left on device' "$WORK/full.err")" = 1 ] && [ -z "$(ls -A "$SMALL/c/tmp" 2>/dev/null)" ] &&
        clean=$((clean + 1))
    fi
    WRONG=$((WRONG + $(wrong_bytes "$SMALL/c")))
    umount "$SMALL"
  done
  DISKNOTE="disk full: $clean of $LOADS loads failed cleanly (one ENOSPC line, tmp/ empty)"
  [ "$clean" = "$LOADS" ] || bad=1
  ROWS+=("$(printf '| %-34s | %6s | %5s | %9s | %6s | %11s |' "disk full (tmpfs ${STRESS_DISK_SIZES:-1m 4m 8m 16m 32m})" "$LOADS" "$LOADS" "$DONE" "$FAILED" "$WRONG")")
  [ "$WRONG" = 0 ] || bad=1
fi

# every shared-cache attack of issue 7 section 1 (tests/e2e/t_cache_attacks.sh: users B and C, as real uids,
# against A's helper and A's program under the shim): each "ok:" line is an attack or variant refused
# (STRESS_ATTACKS=0 leaves it out: t_heal_stress, since make test runs t_cache_attacks itself). Its own work
# dir beside ours, not inside it: the attackers' uids must reach it, as under tests/e2e/run.sh.
ATKNOTE="shared-cache attacks: left out (STRESS_ATTACKS=0)"
ATKWORK=$(mktemp -d "${TMPDIR:-/tmp}/hfs3-stress-attacks.XXXXXX")
if [ "${STRESS_ATTACKS:-1}" = 0 ]; then :
elif WORK=$ATKWORK HFS3_SHIM=${HFS3_SHIM:-$ROOT/$BUILD/lib/libhfs3shim.so} bash "$ROOT/tests/e2e/t_cache_attacks.sh" \
     >"$WORK/attacks.log" 2>&1; then
  ATKNOTE="shared-cache attacks (t_cache_attacks, real uids): $(grep -c '^ok:' "$WORK/attacks.log") cases, 0 succeeded"
  grep -q '^SKIP' "$WORK/attacks.log" && ATKNOTE="shared-cache attacks: skipped ($(grep -m1 '^SKIP' "$WORK/attacks.log"))"
else
  ATKNOTE="shared-cache attacks: FAILED (an attack succeeded or a check failed): $(grep -m1 '^not ok' "$WORK/attacks.log")"
  bad=1
fi
rm -rf "$ATKWORK"

# the thread pile-up and fork stress with the real helper (tests/stress/pileup.sh; STRESS_PILE_ROUNDS=0 leaves it out)
PILENOTE="thread pile-up and fork stress: left out (STRESS_PILE_ROUNDS=0)"
if [ "${STRESS_PILE_ROUNDS:-5}" != 0 ]; then
  PILEWORK=$(mktemp -d "${TMPDIR:-/tmp}/hfs3-stress-pileup.XXXXXX")
  if WORK=$PILEWORK HFS3_SHIM=${HFS3_SHIM:-$ROOT/$BUILD/lib/libhfs3shim.so} bash "$ROOT/tests/stress/pileup.sh" \
       >"$WORK/pileup.log" 2>&1; then
    PILENOTE=$(tail -1 "$WORK/pileup.log")
  else
    PILENOTE="FAILED: $(grep -m1 '^  \(hung\|failed\)' "$WORK/pileup.log"); $(tail -1 "$WORK/pileup.log")"
    bad=1
  fi
  rm -rf "$PILEWORK"
fi

echo
echo "hfs3 stress: model $model_bytes bytes (4 files, 8 MiB chunk digests), $HFS3_CONNECTIONS connections, $(date -u +%F)"
echo "| fault                              | faults | loads | completed | failed | wrong bytes |"
echo "|------------------------------------|--------|-------|-----------|--------|-------------|"
printf '%s\n' "${ROWS[@]}"
echo "$KILLNOTE"
echo "$DISKNOTE"
echo "$ATKNOTE"
echo "$PILENOTE"
[ "$bad" = 0 ] && echo "stress: ok" || echo "stress: FAILED"
[ "$bad" = 0 ]
