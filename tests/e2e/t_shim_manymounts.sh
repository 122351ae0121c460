#!/usr/bin/env bash
# t_shim_manymounts.sh - no fixed limit on the number of mounts (issue 6, item 7): 300 mounts of one remote all
# answer, list under their common ancestor once each, and a bad entry among them is named in one log line.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
n=300
mounts=""
for i in $(seq 1 $n); do mounts="$mounts$M/m$i=s3test:models/flat;"; done
export HFS3_MOUNTS="${mounts}relative=s3test:models/flat"
out=$(LD_PRELOAD=$HFS3_SHIM ls "$M" 2>"$WORK/err")
shim_check "$n mounts listed once each under their ancestor" test "$(sort -u <<<"$out" | wc -l):$(wc -l <<<"$out")" = "$n:$n"
shim_check "the last mount answers" test "$(LD_PRELOAD=$HFS3_SHIM cat "$M/m$n/a.txt" 2>/dev/null)" = "hello from a"
shim_check "the 17th mount answers" test "$(LD_PRELOAD=$HFS3_SHIM stat -c %s "$M/m17/dir/b.bin" 2>/dev/null)" = 3000
shim_check "the bad entry is named in one line" test "$(grep -c '^hfs3:' "$WORK/err"):$(grep -c 'ignoring "relative=s3test:models/flat"' "$WORK/err")" = "1:1"
exit $((SHIM_FAILS > 0))
