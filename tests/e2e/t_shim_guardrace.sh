#!/usr/bin/env bash
# t_shim_guardrace.sh - the write guard decides on the descriptor the call uses (issue 33 item 5): tests/tools/guardrace
# flips the symlink W/link between a real directory W/real and S, a directory of the cache's skeleton (the flat
# mount's dir/, by its real path), while three threads create through it (open O_CREAT|O_EXCL, mkdir, mkfifo,
# symlink, mknod), remove what they made, and rmdir W/link/deeper (S has that empty directory, W/real has not).
# Before, the guard looked at W/link's directory and the call resolved the path again: creates landed in the
# skeleton (10 entries in 8 s) and deeper/ could go. Bounded by a count and a time (never asserted); the assertion
# is on what S holds afterwards, and that both sides of the flip were seen (some calls made, some refused).
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
S=$(find "$HFS3_CACHE_DIR/mounts" -mindepth 3 -maxdepth 3 -path '*/tree/dir' | head -1)
[ -d "$S/deeper" ] || { echo "no skeleton directory dir/deeper under $HFS3_CACHE_DIR/mounts"; exit 1; }
before=$(ls -A "$S")
mkdir -p r/real
out=$(shim "$HFS3_ROOT/$BUILD/tools/guardrace" "$WORK/r" "$S" 30000 8 2>&1)
echo "$out"
# then write-opens only: the mix above reaches open(O_CREAT) too rarely to land one every run on the old code
out2=$(shim "$HFS3_ROOT/$BUILD/tools/guardrace" "$WORK/r" "$S" 20000 5 open 2>&1)
echo "$out2"
after=$(ls -A "$S")
[ "$after" = "$before" ] || echo "the skeleton holds: $(echo $after)"
shim_check "nothing landed in (or left) the skeleton while the symlink flipped ($(echo $after))" test "$after" = "$before"
# updwtmp appends with glibc's own open of the path it is given: decided on the descriptor the shim opened and handed
# on as /proc/self/fd/K (round 5: a check of the path, then glibc's open of it again, appended records to the blob)
blob=$(find "$HFS3_CACHE_DIR/blobs" -type f -size +0 | head -1)
sum=$(sha256sum <"$blob")
mkdir -p wt/real && : >wt/real/wt
# On a busy machine the flipping thread may not run within one round: up to 4 rounds, until both sides were seen
# (their counts added up; the blob's bytes are checked after all of them)
wmade=0 wref=0
for round in 1 2 3 4; do
  out3=$(shim "$HFS3_ROOT/$BUILD/tools/guardrace" "$WORK/wt" "$blob" 20000 5 wtmp 2>&1)
  echo "updwtmp (round $round): $out3"
  wmade=$(sed -n 's/.*made \([0-9]*\).*/\1/p' <<<"$out3") wref=$((wref + $(sed -n 's/.*refused \([0-9]*\).*/\1/p' <<<"$out3")))
  [ "${wmade:-0}" -gt 0 ] && [ "$wref" -gt 0 ] && break
done
shim_check "updwtmp through a flipping symlink: the blob keeps its bytes" test "$(sha256sum <"$blob")" = "$sum"
shim_check "updwtmp: both sides of the flip were seen: $wmade records in W/real/wt, $wref refused (EROFS)" \
  test "${wmade:-0}" -gt 0 -a "${wref:-0}" -gt 0
made=$(sed -n 's/.*made \([0-9]*\).*/\1/p' <<<"$out") refused=$(sed -n 's/.*refused \([0-9]*\).*/\1/p' <<<"$out")
shim_check "both sides of the flip were seen: $made made in W/real, $refused refused (EROFS)" \
  test "${made:-0}" -gt 0 -a "${refused:-0}" -gt 0
exit $((SHIM_FAILS > 0))
