#!/usr/bin/env bash
# t_shim_pileup.sh - many threads of one process waiting on cold opens (issue 22, items 1 and 2), with the real
# helper against the local S3 server, through a proxy that paces each body at 32 KiB/s so that every fetch
# takes ~3 s and all the threads are waiting at once:
#   - 512 threads over 8 cold files (the index cached): all read the right bytes (today's fixed pool of scratch
#     buffers hung from ~86 waiting threads on);
#   - 512 threads on a cache that is cold through and through (they pile up on the index's load first, polling
#     with a backoff: at 1 ms each, 512 pollers on 2 cores took 23-30 s);
#   - fork() while 60 threads wait, and 30 threads waiting in the child: the child finishes (slots held by the
#     parent's threads at the fork stayed busy in the child forever);
#   - Python's ThreadPoolExecutor(96) over the 8 cold files returns.
# Every run is under `timeout`: a hang is a failure, never a hung suite.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
shim_s3
trap 's3env_stop; for p in $PROXY_PIDS; do kill $p 2>/dev/null; done' EXIT
cd "$WORK"
mkdir src
for i in 0 1 2 3 4 5 6 7; do head -c $((96 << 10)) /dev/urandom >"src/f$i.bin"; done
rclone copy src s3test:models/pile || fail "rclone copy"
"$HFS3_BIN" build s3test:models/pile >build.out 2>&1 || { cat build.out; fail "build"; }
start_proxy slow $((32 << 10))
M=$WORK/mnt/pile
export HFS3_MOUNTS="$M=slow:models/pile" HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0 HFS3_LOG=warn
unset HFS3_OFFLINE
PAIRS=""
for i in 0 1 2 3 4 5 6 7; do PAIRS="$PAIRS $M/f$i.bin=$WORK/src/f$i.bin"; done
P=$HFS3_ROOT/$BUILD/tools/pileup

# run NAME CACHE SECS CMD...: CMD under the shim with its own cache, bounded; prints what it said and the time
run() {
  local name=$1 c=$2 secs=$3; shift 3
  local s=$(date +%s.%N)
  out=$(HFS3_CACHE_DIR=$WORK/$c LD_PRELOAD=$HFS3_SHIM timeout -k 5 "$secs" "$@" 2>&1); rc=$?
  echo "$name: rc $rc, $(python3 -c "import sys; print('%.1f s' % (float(sys.argv[2]) - float(sys.argv[1])))" "$s" "$(date +%s.%N)"): $out" | head -5
}
# warm CACHE: its index only (a listing through the shim), no blob
warm() { HFS3_CACHE_DIR=$WORK/$1 LD_PRELOAD=$HFS3_SHIM timeout 20 ls "$M" >/dev/null; }

warm c1 || fail "listing the mount"
run "512 threads, cold blobs" c1 40 "$P" 512 $PAIRS
shim_check "512 threads on 8 cold files (index cached): all return with the right bytes" test $rc = 0

run "512 threads, cold cache" c2 40 "$P" 512 $PAIRS
shim_check "512 threads on 8 files of a cold cache (no index): all return with the right bytes" test $rc = 0

warm c3
run "fork with 60 waiting, 30 in the child" c3 40 "$P" -f 30 60 $PAIRS
shim_check "fork while 60 threads wait, 30 threads in the child: parent and child finish" test $rc = 0

warm c4
run "ThreadPoolExecutor(96)" c4 40 python3 -c '
import concurrent.futures as cf, sys
fs = sys.argv[1:] * 12
with cf.ThreadPoolExecutor(96) as ex:
    n = sum(len(b) for b in ex.map(lambda p: open(p, "rb").read(), fs))
print(n)' $(for i in 0 1 2 3 4 5 6 7; do echo "$M/f$i.bin"; done)
# (stdout and stderr together: the shim's progress lines of the cold load may come before the count)
shim_check "ThreadPoolExecutor(96) over 8 cold files returns every byte" test "$rc:$(grep -v '^hfs3: ' <<<"$out")" = "0:$((96 * 96 << 10))"
exit $((SHIM_FAILS > 0))
