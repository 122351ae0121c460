#!/usr/bin/env bash
# Threads cancelled (pthread_cancel) while their open() waits on a fetch leave nothing behind (issue 33 item 3):
# no descriptor (the blob's lock, its pin), no shared lock on the pin for the rest of the process's life (a gc
# could never evict the file), and the fetch they started still ends for the next open. A stand-in helper
# (shim_fake_helper.sh, FAKE_GET_MODE=gate) keeps the fetch going until the test says so.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
F=$M/flat
export HFS3_CACHE_DIR=$WORK/cache-c FAKE_LOG=$WORK/fake.log FAKE_FX=$WORK/fx FAKE_MK=$MK FAKE_GET_MODE=gate
export FAKE_GATE=$WORK/gate HFS3_HELPER=$HFS3_ROOT/tests/e2e/shim_fake_helper.sh HFS3_PREFETCH=0
export HFS3_MOUNTS="$F=s3test:models/flat"
unset HFS3_OFFLINE
sha=$(sha256sum "$WORK/fx/src/flat/a.txt" | cut -d' ' -f1)
N=100
out=$(LD_PRELOAD=$HFS3_SHIM timeout -k 5 60 "$HFS3_ROOT/$BUILD/tools/cancelopen" "$F/a.txt" $N "$FAKE_GATE" \
  "env -u LD_PRELOAD '$HFS3_BIN' cache gc --max 0 >'$WORK/gc.out' 2>&1" 2>&1); rc=$?
echo "$out" | grep -v '^left' ; echo "$out" | sed -n 's/^left [0-9]* -> //p' | sort | uniq -c
shim_check "$N cancelled cold opens, then one that waits: it returns" test $rc = 0
shim_check "$N cancelled cold opens leave no descriptor" bash -c "grep -q '^fds \([0-9]*\) \1$' <<<'$out' && ! grep -q '^left' <<<'$out'"
cat "$WORK/gc.out"
shim_check "a gc run while the process lives evicts the file (no pin left held)" \
  bash -c "grep -q '^cmd 0$' <<<'$out' && ! test -e '$HFS3_CACHE_DIR/blobs/$sha'"
shim_check "one fetch for all of them" test "$(grep -c '^_get' "$FAKE_LOG")" = 1
exit $((SHIM_FAILS > 0))
