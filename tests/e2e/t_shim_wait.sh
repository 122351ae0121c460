#!/usr/bin/env bash
# t_shim_wait.sh - waiting for a fetch can be interrupted and is bounded (issue 6, items 8 and 9), with the
# stand-in helper: a request to stop whose handler lacks SA_RESTART ends a cold open with EINTR at once (Python's
# Ctrl-C is a KeyboardInterrupt within a second) while the fetch goes on for the next open; any other signal, with
# or without SA_RESTART, has its handler run and the open wait on (issue 41); a helper that makes no progress fails the open with EIO after HFS3_STALL_TIMEOUT, a slow one that
# does is never cut; ten processes starting at once on a cold cache make one manifest request.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
export FAKE_LOG=$WORK/fake.log FAKE_FX=$WORK/fx FAKE_MK=$MK HFS3_HELPER=$HFS3_ROOT/tests/e2e/shim_fake_helper.sh
export HFS3_PREFETCH=0 HFS3_MANIFEST_TTL=100000
unset HFS3_OFFLINE
: >"$FAKE_LOG"
T=$HFS3_ROOT/$BUILD/tools
F=$M/flat
cold() { rm -rf "$HFS3_CACHE_DIR/blobs" "$HFS3_CACHE_DIR/tmp" && mkdir "$HFS3_CACHE_DIR/blobs"; }

# Ctrl-C in Python during a 4 s fetch
cold
export FAKE_GET_SLEEP=4
# (a background job starts with SIGINT ignored: put back the handler Python installs in a terminal)
LD_PRELOAD=$HFS3_SHIM python3 -c '
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
open(sys.argv[2], "w").close()
t = time.monotonic()
try:
    open(sys.argv[1], "rb").read()
    print("read")
except KeyboardInterrupt:
    print("interrupted %.1f" % (time.monotonic() - t))' "$F/a.txt" "$WORK/py.ready" >"$WORK/py.out" 2>"$WORK/py.err" &
py=$!
for i in $(seq 1 100); do [ -e "$WORK/py.ready" ] && break; sleep 0.1; done
sleep 0.7; kill -INT $py; wait $py
cat "$WORK/py.out" "$WORK/py.err"
shim_check "Ctrl-C during a cold open: KeyboardInterrupt within a second" \
  python3 -c 'import sys; w = open(sys.argv[1]).read().split(); sys.exit(not (w[0] == "interrupted" and float(w[1]) < 1.7))' "$WORK/py.out"
shim_check "... and the fetch went on: the next open gets the file" test "$(LD_PRELOAD=$HFS3_SHIM cat "$F/a.txt")" = "hello from a"
shim_check "... fetched once" test "$(grep -c '^_get s3test:models/flat a.txt' "$FAKE_LOG")" = 1

# a C program: SIGALRM after 1 s, handler with and without SA_RESTART, during a 3 s fetch
export FAKE_GET_SLEEP=3
cold
# (issue 41 item 2: an open of a regular file on a local file system never gives EINTR; only a request to stop,
# SIGINT above, ends the wait)
out=$(LD_PRELOAD=$HFS3_SHIM "$T/sigopen" norestart "$F/a.txt"); echo "$out"
shim_check "no SA_RESTART: the handler runs, the open waits on and succeeds" bash -c "[[ '$out' == 'fd '[34]'.'*' handler=1' ]]"
cold
out=$(LD_PRELOAD=$HFS3_SHIM "$T/sigopen" restart "$F/a.txt"); echo "$out"
shim_check "SA_RESTART: the open waits on and succeeds" bash -c "[[ '$out' == 'fd '[34]'.'*' handler=1' ]]"

# a helper that hangs: EIO after HFS3_STALL_TIMEOUT with one log line; a slow one that progresses is not cut
cold
start=$(date +%s)
err=$(FAKE_GET_MODE=hang HFS3_STALL_TIMEOUT=2 LD_PRELOAD=$HFS3_SHIM cat "$F/a.txt" 2>&1 >/dev/null); rc=$?
took=$(( $(date +%s) - start )); echo "$err (${took}s)"
shim_check "hung helper: EIO within the stall timeout" test "$rc" = 1 -a "$took" -le 5 -a "$(grep -c 'Input/output error' <<<"$err")" = 1
shim_check "hung helper: one log line naming HFS3_STALL_TIMEOUT" test "$(grep -c '^hfs3:.*no progress.*HFS3_STALL_TIMEOUT' <<<"$err")" = 1
shim_check "hung helper: it was stopped (the lock is free again)" flock -n "$HFS3_CACHE_DIR/locks/$(sha256sum <"$WORK/fx/src/flat/a.txt" | cut -c1-64).lock" true
cold
# (stderr apart: a 4 s wait gets the shim's progress lines, which are no error)
out=$(FAKE_GET_MODE=slow FAKE_SLOW_S=4 HFS3_STALL_TIMEOUT=2 LD_PRELOAD=$HFS3_SHIM cat "$F/a.txt" 2>"$WORK/slow.err")
cat "$WORK/slow.err"
shim_check "slow but progressing fetch (4 s, stall timeout 2 s): not cut" test "$out" = "hello from a"
shim_check "slow but progressing fetch: no complaint, only progress lines" test -z "$(grep -v "^hfs3: $F/a.txt: \(fetching \)\?[0-9.]* \?[KMG]\?i\?B" "$WORK/slow.err")"

# ten processes at once on a cold cache: one manifest request, not ten in a row under the mount lock
unset FAKE_GET_SLEEP
export HFS3_CACHE_DIR=$WORK/cache10 FAKE_INDEX_SLEEP=0.5
: >"$FAKE_LOG"
pids=""
for i in $(seq 1 10); do LD_PRELOAD=$HFS3_SHIM stat -c %s "$F/dir/b.bin" >"$WORK/s$i" 2>&1 & pids="$pids $!"; done
for p in $pids; do wait $p; done
shim_check "ten processes: all answered" test "$(cat "$WORK"/s* | sort -u)" = 3000
shim_check "ten processes: one _index" test "$(grep -c '^_index' "$FAKE_LOG")" = 1
exit $((SHIM_FAILS > 0))
