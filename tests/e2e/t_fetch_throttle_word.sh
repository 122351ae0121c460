#!/usr/bin/env bash
# t_fetch_throttle_word.sh - an endpoint that answers every request 503 SlowDown: s3.c retries a throttle for up to
# HFS3_THROTTLE_BUDGET (600 s by default), silent at the default log level until the budget was spent. A user
# waiting that long must hear why: one warning line (once per process, not one per request) saying the server
# throttles and retries go on, for `hfs3-manifest fetch`; a shim load's
# error line names the throttle (its wait is silent up to the budget: the shim runs the helper quiet).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
cleanup() { stop_proxies; s3env_stop; }
s3env_start "$WORK"; trap cleanup EXIT
mkdir -p "$WORK/m" && echo hi >"$WORK/m/a.txt" && echo ho >"$WORK/m/b.txt"
fetch_publish "$WORK/m" s3test:models/t
start_proxy slow 0 "--slowdown-fraction 1.0"
unset HFS3_LOG
set +e
HFS3_THROTTLE_BUDGET=3 HFS3_CACHE_DIR=$WORK/c1 timeout 300 "$HFS3_BIN" fetch slow:models/t >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
cat "$WORK/err"
[ $rc != 0 ] && [ $rc != 124 ] || fail "fetch from an endpoint throttling everything: rc $rc"
n=$(grep -c "the server is throttling requests" "$WORK/err" || true)
[ "$n" = 1 ] || fail "fetch: $n lines saying the server throttles, not 1"
grep "the server is throttling requests" "$WORK/err" | grep -q "HFS3_THROTTLE_BUDGET" || fail "fetch: the line names no setting"
ok "fetch against a throttling endpoint: one line saying it is throttled and retrying (HFS3_THROTTLE_BUDGET), then the error"
set +e
HFS3_THROTTLE_BUDGET=3 HFS3_CACHE_DIR=$WORK/c2 HFS3_MOUNTS="$WORK/mnt=slow:models/t" HFS3_HELPER=$HFS3_BIN \
  timeout 300 env LD_PRELOAD="$HFS3_SHIM" cat "$WORK/mnt/a.txt" >"$WORK/sout" 2>"$WORK/serr"
rc=$?
set -e
cat "$WORK/serr"
[ $rc != 0 ] && [ $rc != 124 ] || fail "shim open through a throttling endpoint: rc $rc"
# the shim runs the helper quiet (the program's stderr is not a log): its one line names the throttle at the end
grep -q "SlowDown" "$WORK/serr" || fail "shim open: the error does not name the throttle"
ok "a shim open through a throttling endpoint: its error line names the throttle"
