#!/usr/bin/env bash
# 300 threads open 300 distinct cold files at once (more than the 256 helpers a process runs at once, shim/helper.c
# spawn_slots): each reads its bytes, as from a local folder (the kernel's answer); the 257th spawn waits for a slot
# (it gave EIO to 44 of them). The stand-in helper (shim_fake_helper.sh) takes 4 s per file, so they overlap.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
N=300
mkdir -p "$WORK/fx/src/many"
for i in $(seq 0 $((N - 1))); do printf '%d\n' "$i" >"$WORK/fx/src/many/f$(printf %03d "$i")"; done
shim_tree_mount "$WORK/fx/src/many" many gen >/dev/null || { echo "mkindex failed"; exit 1; }
rm -rf "$HFS3_CACHE_DIR"/blobs/*
export FAKE_LOG=$WORK/fake.log FAKE_FX=$WORK/fx FAKE_MK=$MK FAKE_GET_SLEEP=4
export HFS3_HELPER=$HFS3_ROOT/tests/e2e/shim_fake_helper.sh HFS3_PREFETCH=0 HFS3_MOUNTS="$M/many=s3test:models/many"
unset HFS3_OFFLINE
: >"$FAKE_LOG"
python3 "$HFS3_ROOT/tests/e2e/shim_manyopens.py" "$WORK/fx/src/many" $N >"$WORK/k.out" 2>&1
LD_PRELOAD=$HFS3_SHIM timeout -k 5 600 python3 "$HFS3_ROOT/tests/e2e/shim_manyopens.py" "$M/many" $N >"$WORK/s.out" 2>"$WORK/s.err"
rc=$?
cat "$WORK/k.out" "$WORK/s.out"; sort "$WORK/s.err" | uniq -c | sort -rn | head -5
shim_check "$N threads, $N distinct cold files at once: every one reads its bytes, as the local folder's (rc $rc)" \
  test $rc = 0 -a -s "$WORK/k.out" -a "$(cat "$WORK/k.out")" = "$(cat "$WORK/s.out")"
shim_check "... more than 256 helpers were asked for" test "$(grep -c '^_get' "$FAKE_LOG")" -ge $N
exit $((SHIM_FAILS > 0))
