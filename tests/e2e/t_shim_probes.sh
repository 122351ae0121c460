#!/usr/bin/env bash
# The C probes (tests/probes/*.c, one per API family), each built plain, with -D_FILE_OFFSET_BITS=64 and
# with -O2 -D_FORTIFY_SOURCE=2, run under the shim against the flat fixture mount.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_start
shopt -s nullglob
n=0
for kind in plain lfs fort; do
  for p in "$HFS3_ROOT/$BUILD/probes/$kind"/*; do
    n=$((n + 1))
    out=$(cd "$WORK" && shim "$p" "$M/flat" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then echo "ok probe $kind/$(basename "$p")"
    else echo "not ok probe $kind/$(basename "$p") (rc $rc)"; echo "$out" | grep -v '^ok' | sed 's/^/    /'; SHIM_FAILS=$((SHIM_FAILS + 1)); fi
  done
done
# every probe source, built all three ways: a probe that was not built is a check that did not run
want=$(( $(ls "$HFS3_ROOT"/tests/probes/*.c | wc -l) * 3 ))
shim_check "all $want probes were built and ran (found $n)" test "$n" -eq "$want"
# without the shim, the same paths do not exist: the probes really went through it
shim_check "mount absent without the shim" test ! -e "$M/flat/a.txt"
exit $((SHIM_FAILS > 0))
