#!/usr/bin/env bash
# t_shim_fork.sh - no lock descriptor of the shim survives into a forked child (issue 6, item 3): threads open
# cold files (a stand-in helper takes 0.3 s per fetch) while the main thread forks every 2 ms and every child
# opens the same files. 20 runs on an emptied cache, each under `timeout`: 0 hung children, 0 timeouts.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
export FAKE_LOG=$WORK/fake.log FAKE_FX=$WORK/fx FAKE_MK=$MK HFS3_HELPER=$HFS3_ROOT/tests/e2e/shim_fake_helper.sh
export HFS3_PREFETCH=0
unset HFS3_OFFLINE
export HFS3_MANIFEST_TTL=100000
FS="$M/flat/a.txt $M/flat/dir/deeper/c.txt $M/flat/empty"
for f in "$WORK"/fx/src/hf/snapshots/*/*.*; do FS="$FS $M/hf/snapshots/$REV/$(basename "$f")"; done
runs=20 hangs=0 timeouts=0
for i in $(seq 1 $runs); do
  rm -rf "$HFS3_CACHE_DIR/blobs" "$HFS3_CACHE_DIR/locks" && mkdir "$HFS3_CACHE_DIR/blobs"
  out=$(LD_PRELOAD=$HFS3_SHIM timeout 60 "$HFS3_ROOT/$BUILD/tools/forkstress" 700 $FS 2>&1); rc=$?
  echo "run $i: rc $rc: $out"
  [ $rc = 124 ] && timeouts=$((timeouts + 1))
  [ $rc = 1 ] && hangs=$((hangs + 1))
done
shim_check "fork while fetching: $runs runs, 0 hung children" test "$hangs" = 0
shim_check "fork while fetching: no run timed out" test "$timeouts" = 0
shim_check "the fetches really ran" test "$(grep -c ^_get "$FAKE_LOG")" -ge $runs
exit $((SHIM_FAILS > 0))
