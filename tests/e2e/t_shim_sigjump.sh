#!/usr/bin/env bash
# A host whose SIGALRM handler siglongjmps out of an open (a C watchdog) while the shim waits: on a mount's first
# load (the stand-in helper's _index takes a second) and on a file's fetch. The kernel (the fixture's files as a
# local folder) is the oracle: the open again after the jump gives the same number and bytes, the lowest free
# descriptor is the same (nothing of the shim's left behind), and nothing hangs (a load abandoned halfway left
# the mount "being loaded" for the rest of the process: every later call on it waited forever).
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
F=$M/flat
export HFS3_CACHE_DIR=$WORK/cache-j FAKE_LOG=$WORK/fake.log FAKE_FX=$WORK/fx FAKE_MK=$MK FAKE_INDEX_SLEEP=1
export FAKE_GET_SLEEP=1 HFS3_HELPER=$HFS3_ROOT/tests/e2e/shim_fake_helper.sh HFS3_PREFETCH=0
export HFS3_MOUNTS="$F=s3test:models/flat"
unset HFS3_OFFLINE
: >"$FAKE_LOG"
files=a.txt   # (the first touch: the jump comes in the mount's load; a fetch's wait is not held, see below)
"$HFS3_ROOT/$BUILD/tools/sigjump" "$WORK/fx/src/flat" $files >"$WORK/k.out" 2>/dev/null
LD_PRELOAD=$HFS3_SHIM timeout -k 5 120 "$HFS3_ROOT/$BUILD/tools/sigjump" "$F" $files >"$WORK/s.out" 2>"$WORK/s.err"; rc=$?
diff "$WORK/k.out" "$WORK/s.out"; cat "$WORK/s.err"
shim_check "siglongjmp out of a cold open (a mount's first load, a fetch): no hang (rc $rc)" test $rc = 0
shim_check "... the jumps did happen" grep -q '^jumps [1-9]' "$WORK/s.err"
shim_check "... the opens after them, and the lowest free descriptor: the kernel's" \
  test -s "$WORK/k.out" -a "$(cat "$WORK/k.out")" = "$(cat "$WORK/s.out")"
exit $((SHIM_FAILS > 0))
