#!/usr/bin/env bash
# t_shim_threads.sh - the shim on the host's threads (issue 6, items 2 and 5): every interposer on a thread with
# a 16 KiB and a 32 KiB stack (guard page below: an overflow is a SIGSEGV), on paths inside the mounts, relative
# to a cwd inside one, and on a deep missing path outside them (the fallback walk), with the same answers as on
# the main thread; a thread chdir-ing in and out of a mount and listing "." while three others make relative
# calls: no wrong listing in 20,000 rounds. (`make stack` checks the budget from the compiler's frame sizes.)
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
T=$HFS3_ROOT/$BUILD/tools
missing=/usr/lib/python3/dist-packages/hfs3-no/such/deep/module/path/x.py
for kib in 16 32; do
  for i in 1 2 3; do
    out=$(LD_PRELOAD=$HFS3_SHIM "$T/smallstack" $kib "$M/flat" "$missing" 2>&1); rc=$?
    [ $rc = 0 ] || break
  done
  echo "$out" | tail -5
  shim_check "every interposer on a $kib KiB stack, the main thread's answers" test $rc = 0
done
mkdir -p "$WORK/out" && touch "$WORK/out/x" "$WORK/out/y"
out=$(LD_PRELOAD=$HFS3_SHIM timeout 120 "$T/cwdrace" 20000 "$M/flat/dir" 3 "$WORK/out" 2 2>&1); rc=$?
echo "$out"
shim_check "chdir in one thread, relative calls in three: no wrong listing" test $rc = 0
exit $((SHIM_FAILS > 0))
