#!/usr/bin/env bash
# t_shim_classes.sh - issue 42's classes of survivors that no test held (each part named by its class):
#   3. state handed back to the caller: a thread's cancellation state after a first touch, a cold open that waits
#      on a fetch, a warm open (DISABLE stays DISABLE, ENABLE stays ENABLE);
#   6. append-only files: updwtmp through the shim on a wtmp whose tail is torn leaves the bytes glibc's own
#      updwtmp leaves (the torn tail cut back to a whole record, then the record).
# And a host the shim must not break: a program run under valgrind, which kills a process that makes a general
# clone (issue 41's helper parent, mid), loads a mount on an empty cache (the helper is then spawned as before).
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
F=$M/flat

# ---- class 3: the cancellation state (a stand-in helper serves the fixture; each run on an empty cache)
for run in 1 2; do   # a process each: the first touch of a mount comes once in a process
  st=disable; [ $run = 2 ] && st=enable
  env HFS3_CACHE_DIR="$WORK/cache-cs$run" FAKE_LOG="$WORK/fake$run.log" FAKE_FX="$WORK/fx" FAKE_MK="$MK" \
    HFS3_HELPER="$HFS3_ROOT/tests/e2e/shim_fake_helper.sh" HFS3_PREFETCH=0 HFS3_MOUNTS="$F=s3test:models/flat" \
    HFS3_OFFLINE=0 LD_PRELOAD="$HFS3_SHIM" timeout -k 5 120 python3 "$HFS3_ROOT/tests/e2e/shim_cancelstate.py" \
    $st "$F" "$F/a.txt" "$F/dir/deeper/c.txt" "$F/a.txt" >"$WORK/cs$run.out" 2>&1
  echo "rc $?" >>"$WORK/cs$run.out"
  cat "$WORK/cs$run.out"
done
shim_check "class 3: disabled cancellation stays disabled after a first touch, cold and warm opens" \
  grep -qx done "$WORK/cs1.out"
shim_check "class 3: enabled cancellation stays enabled after a first touch, cold and warm opens" \
  grep -qx done "$WORK/cs2.out"
shim_check "class 3: the opens were cold (the stand-in helper fetched)" grep -q '^_get' "$WORK/fake1.log"

# ---- class 6: a torn wtmp tail (a program's own file outside the mounts, the guard on)
python3 - "$WORK/wtmp-plain" "$WORK/wtmp-shim" <<'PY'
import sys
for p in sys.argv[1:]:
    open(p, "wb").write(bytes(range(256)) * 3 + b"torn" * 25)   # two whole records, then 100 bytes
PY
cat >"$WORK/upd.py" <<'PY'
import ctypes, sys
c = ctypes.CDLL(None, use_errno=True)
rec = ctypes.create_string_buffer(b"R" * 384, 384)
c.updwtmp(sys.argv[1].encode(), rec)
c.updwtmp(sys.argv[1].encode(), rec)
PY
python3 "$WORK/upd.py" "$WORK/wtmp-plain"
LD_PRELOAD=$HFS3_SHIM python3 "$WORK/upd.py" "$WORK/wtmp-shim"
ls -l "$WORK/wtmp-plain" "$WORK/wtmp-shim"
shim_check "class 6: glibc cuts the torn tail back (the oracle: 4 whole records)" \
  test "$(stat -c %s "$WORK/wtmp-plain")" = $((4 * 384))
shim_check "class 6: updwtmp through the shim leaves glibc's bytes" cmp "$WORK/wtmp-plain" "$WORK/wtmp-shim"

# ---- a program under valgrind: a first load and a cold open on an empty cache
if command -v valgrind >/dev/null; then
  env HFS3_CACHE_DIR="$WORK/cache-vg" FAKE_LOG="$WORK/fakevg.log" FAKE_FX="$WORK/fx" FAKE_MK="$MK" \
    HFS3_HELPER="$HFS3_ROOT/tests/e2e/shim_fake_helper.sh" HFS3_PREFETCH=0 HFS3_MOUNTS="$F=s3test:models/flat" \
    HFS3_OFFLINE=0 LD_PRELOAD="$HFS3_SHIM" timeout -k 5 300 valgrind -q --tool=none cat "$F/a.txt" >"$WORK/vg.out" \
    2>"$WORK/vg.err"
  echo "rc $?" >>"$WORK/vg.err"; cat "$WORK/vg.err"
  shim_check "under valgrind: a cold open on an empty cache reads the file" cmp "$WORK/vg.out" "$WORK/fx/src/flat/a.txt"
  shim_check "under valgrind: the helper ran" grep -q '^_get' "$WORK/fakevg.log"
else
  echo "SKIP valgrind: valgrind is not installed (scripts/deps.sh installs it)"
fi
exit $((SHIM_FAILS > 0))
