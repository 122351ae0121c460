#!/usr/bin/env bash
# pileup.sh - the thread pile-up and fork stress of `make stress` (issue 22; t_shim_pileup is its small version in
# `make test`), with the real helper against the local S3 server through a proxy that paces each body (32 KiB/s) so
# that every fetch takes seconds and all the threads wait at once. STRESS_PILE_ROUNDS (5) rounds, each on a fresh
# cache:
#   - 1,024 threads over 16 cold files (index cached);
#   - 1,024 threads on a cache cold through and through (they pile up on the index load first);
#   - fork() while 200 threads wait, 100 threads waiting in the child;
#   - a fork storm: a fork every 2 ms for 3 s while 16 threads open cold files, each child opening them all
#     (tests/tools/forkstress: a child that waits for a lock its parent's thread held dies of SIGALRM).
# Every run is under `timeout`: a hang is counted, never waited for. Prints one line (rounds, runs, hung, failed,
# wrong bytes) and exits 1 when any run hung or read a wrong byte. Needs HFS3_ROOT, BUILD, HFS3_BIN, HFS3_SHIM.
set -uo pipefail
OWN=; [ -n "${WORK:-}" ] || { WORK=$(mktemp -d "${TMPDIR:-/tmp}/hfs3-pileup.XXXXXX"); OWN=1; }
export WORK
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
PROXY_PIDS=""
s3env_start "$WORK" || exit 1
trap 's3env_stop; for p in $PROXY_PIDS; do kill $p 2>/dev/null; done; [ -z "$OWN" ] || rm -rf "$WORK"' EXIT
cd "$WORK"
mkdir src
NF=16
for i in $(seq 0 $((NF - 1))); do head -c $((64 << 10)) /dev/urandom >"src/f$i.bin"; done
rclone copy src s3test:models/pile || fail "rclone copy"
"$HFS3_BIN" build s3test:models/pile >build.out 2>&1 || { cat build.out; fail "build"; }
start_proxy slow $((32 << 10))
M=$WORK/mnt/pile
export HFS3_MOUNTS="$M=slow:models/pile" HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0 HFS3_LOG=warn
unset HFS3_OFFLINE
PAIRS="" FILES=""
for i in $(seq 0 $((NF - 1))); do PAIRS="$PAIRS $M/f$i.bin=$WORK/src/f$i.bin"; FILES="$FILES $M/f$i.bin"; done
P=$HFS3_ROOT/$BUILD/tools/pileup F=$HFS3_ROOT/$BUILD/tools/forkstress
ROUNDS=${STRESS_PILE_ROUNDS:-5}
RUNS=0 HUNG=0 FAILED=0 WRONG=0

# run CACHE SECS CMD...: CMD under the shim with its own cache, bounded: counts a hang (timeout) or a failure
run() {
  local c=$1 secs=$2; shift 2
  RUNS=$((RUNS + 1))
  local out rc
  out=$(HFS3_CACHE_DIR=$WORK/$c LD_PRELOAD=$HFS3_SHIM timeout -k 5 "$secs" "$@" 2>&1); rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then HUNG=$((HUNG + 1)); echo "  hung: $*: $(echo "$out" | tail -1)" >&2
  elif [ $rc != 0 ]; then FAILED=$((FAILED + 1)); echo "  failed ($rc): $(echo "$out" | tail -2)" >&2; fi
  # a wrong byte read: pileup's "wrong or failed N" (N > 0 fails the run too); in the cache: a blob that is not its sha256
  grep -q "wrong or failed [1-9]" <<<"$out" && WRONG=$((WRONG + 1))
  local b
  for b in "$WORK/$c"/blobs/*; do
    [ -e "$b" ] || continue
    [ "$(sha256sum <"$b" | cut -d' ' -f1)" = "$(basename "$b")" ] || WRONG=$((WRONG + 1))
  done
}
warm() { HFS3_CACHE_DIR=$WORK/$1 LD_PRELOAD=$HFS3_SHIM timeout 30 ls "$M" >/dev/null; }

for r in $(seq 1 "$ROUNDS"); do
  warm r$r.a && run r$r.a 90 "$P" 1024 $PAIRS
  run r$r.b 90 "$P" 1024 $PAIRS
  warm r$r.c && run r$r.c 90 "$P" -f 100 200 $PAIRS
  warm r$r.d && run r$r.d 60 "$F" 3000 $FILES
  rm -rf "$WORK"/r$r.*
done
echo "thread pile-up and fork stress (real helper, paced S3): $ROUNDS rounds, $RUNS runs (1,024 threads on $NF cold files; a cold index; fork with 200 waiting and 100 in the child; a fork every 2 ms for 3 s): $HUNG hung, $FAILED failed, $WRONG wrong"
[ "$HUNG" = 0 ] && [ "$FAILED" = 0 ] && [ "$WRONG" = 0 ]
