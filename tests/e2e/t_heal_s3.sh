#!/usr/bin/env bash
# t_heal_s3.sh - lib/s3.c against replies that are wrong in one way each, through tests/e2e/s3proxy.py
# --fault: a resumed body that starts before the asked offset, a 206 without Content-Range, a body longer
# than the asked range, a resumed body from another object version (ETag), a body that stalls with the
# connection open (low-speed limit), 500 InternalError. Each is refused with one clear line and, when the
# fault does not repeat, healed by a retry that never repeats or skips a byte.
set -u
source "$HFS3_ROOT/scripts/s3env.sh"
s3env_start "$WORK" || exit 1
PROXY_PID=
cleanup() { [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null; s3env_stop; }
trap cleanup EXIT

CLI="$HFS3_ROOT/$BUILD/tools/s3cli"
fails=0
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; fails=$((fails + 1)); }
res() { if [ $? -eq 0 ]; then ok "$1"; else bad "$1"; fi; }
lines() { wc -l <"$1" | tr -d ' '; }
# the error lines of a stderr file (retries are logged as warnings before the final line)
errlines() { grep -vc '^hfs3: warning: ' "$1"; }

D=$WORK/data
mkdir -p "$D/m"
head -c 300007 /dev/urandom >"$D/m/big.bin"
rclone copy "$D" s3test:models/x || { echo "rclone copy failed"; exit 1; }
slice() { tail -c +$(($1 + 1)) "$D/m/big.bin" | head -c "$2"; }

# usage: proxy ARGS...; sets PROXY (endpoint) and PLOG (its request log)
proxy() {
  [ -n "$PROXY_PID" ] && { kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null; }
  PLOG=$WORK/proxy.$RANDOM.log
  rm -f "$WORK/proxy.out"   # else the wait below may read the killed proxy's port before the shell truncates it
  python3 "$HFS3_ROOT/tests/e2e/s3proxy.py" --target "127.0.0.1:$S3_PORT" --log "$PLOG" --match big.bin "$@" >"$WORK/proxy.out" &
  PROXY_PID=$!
  local i
  for i in $(seq 1 100); do grep -q '^port ' "$WORK/proxy.out" 2>/dev/null && break; sleep 0.05; done
  PROXY="http://127.0.0.1:$(sed -n 's/^port //p' "$WORK/proxy.out")"
}
viaproxy() { S3CLI_BACKOFF_MS=10 "$CLI" "$PROXY" models S3RVER S3RVER "$@"; }

# issue 12 item 10: a resumed body must start where it was asked to, else bytes repeat
proxy --cut-first 1 --cut-after 40000 --fault shift --fault-max 1 --fault-at 1000
viaproxy get x/m/big.bin >"$WORK/s1.get" 2>"$WORK/s1.err"; rc=$?
[ "$rc" -eq 0 ] && cmp -s "$WORK/s1.get" "$D/m/big.bin"; res "resume answered from 1000 bytes early: retried, right bytes"
grep -q 'asked for bytes from 40000, the server sent a range starting at 39000; retrying' "$WORK/s1.err"
res "the early range is named: $(grep -m1 asked "$WORK/s1.err")"
grep -q 'range=bytes=40000- shift-injected 206' "$PLOG" && grep -q 'range=bytes=40000- forwarded 206' "$PLOG"
res "the retry asked bytes=40000- again"
proxy --fault shift --fault-at 1000
viaproxy get x/m/big.bin 5000 20000 >"$WORK/s2.get" 2>"$WORK/s2.err"; rc=$?
[ "$rc" -eq 1 ] && [ ! -s "$WORK/s2.get" ] && [ "$(errlines "$WORK/s2.err")" -eq 1 ] &&
  grep -q 'GET models/x/m/big.bin: asked for bytes from 5000, the server sent a range starting at 4000 (after 6 attempts)' "$WORK/s2.err"
res "a server that always answers another range: exit 1, one line, no bytes"

# issue 7 §2: a 206 without Content-Range is not taken to start at 0
proxy --fault nocrange --fault-max 1
viaproxy get x/m/big.bin 1000 65536 >"$WORK/n1.get" 2>"$WORK/n1.err"; rc=$?
[ "$rc" -eq 0 ] && cmp -s "$WORK/n1.get" <(slice 1000 65536) && grep -q '206 reply without a valid Content-Range; retrying' "$WORK/n1.err"
res "206 without Content-Range once: refused, retried, right bytes"
proxy --fault nocrange
S3CLI_RETRIES=2 viaproxy get x/m/big.bin 1000 65536 >"$WORK/n2.get" 2>"$WORK/n2.err"; rc=$?
[ "$rc" -eq 1 ] && [ ! -s "$WORK/n2.get" ] && [ "$(errlines "$WORK/n2.err")" -eq 1 ] &&
  grep -q '206 reply without a valid Content-Range (after 3 attempts)' "$WORK/n2.err"
res "206 without Content-Range always: exit 1, one line"

# issue 12 item 11: a body longer than the asked range is noticed where it arrives
proxy --fault overlong --fault-max 1 --fault-at 500
viaproxy get x/m/big.bin 1000 65536 >"$WORK/o1.get" 2>"$WORK/o1.err"; rc=$?
[ "$rc" -eq 0 ] && cmp -s "$WORK/o1.get" <(slice 1000 65536) && grep -q 'server sent more bytes than requested' "$WORK/o1.err"
res "a body 500 bytes longer than asked once: refused, retried, right bytes"
proxy --fault overlong --fault-at 500
S3CLI_RETRIES=1 viaproxy get x/m/big.bin 1000 65536 >"$WORK/o2.get" 2>"$WORK/o2.err"; rc=$?
[ "$rc" -eq 1 ] && [ "$(errlines "$WORK/o2.err")" -eq 1 ] &&
  grep -q 'GET models/x/m/big.bin: server sent more bytes than requested (bytes 1000-67035 for a range ending at 66535) (after 2 attempts)' "$WORK/o2.err"
res "always too long: exit 1: $(tail -1 "$WORK/o2.err")"

# issue 7 §2: a resumed body from another version of the object (other ETag) is not spliced in
proxy --cut-first 1 --cut-after 40000 --fault etag
viaproxy get x/m/big.bin >"$WORK/e1.get" 2>"$WORK/e1.err"; rc=$?
[ "$rc" -eq 1 ] && [ "$(errlines "$WORK/e1.err")" -eq 1 ] &&
  grep -q 'GET models/x/m/big.bin: the object changed while it was read (ETag "[0-9a-f]*", now "00000000000000000000000000000000")' "$WORK/e1.err"
res "resumed body with another ETag: $(cat "$WORK/e1.err")"
[ "$(grep -c . "$PLOG")" -eq 2 ]; res "the changed object is not retried"
[ "$(wc -c <"$WORK/e1.get")" -eq 40000 ]; res "only the first version's bytes were delivered"

# issue 7 §3: a body that stops with the connection open: the low-speed limit notices, the GET resumes
proxy --fault stall --fault-at 40000 --fault-max 1
S3CLI_LOW_SPEED_TIME=1 viaproxy get x/m/big.bin >"$WORK/t1.get" 2>"$WORK/t1.err"; rc=$?
[ "$rc" -eq 0 ] && cmp -s "$WORK/t1.get" "$D/m/big.bin"; res "a stalled body is resumed: right bytes"
grep -q 'stall-injected 200 .* bytes=40000 ' "$PLOG" && grep -q 'range=bytes=40000- forwarded 206' "$PLOG"
res "resumed at the next undelivered byte (bytes=40000-)"
proxy --fault stall --fault-at 40000 --fault-max 1
HFS3_LOW_SPEED_TIME=1 viaproxy get x/m/big.bin >"$WORK/t2.get" 2>"$WORK/t2.err"; rc=$?
[ "$rc" -eq 0 ] && cmp -s "$WORK/t2.get" "$D/m/big.bin"; res "HFS3_LOW_SPEED_TIME sets the limit"

# 500 InternalError (S3 XML) is retried like 503 SlowDown
proxy --fault 500 --fault-max 2
viaproxy get x/m/big.bin >"$WORK/i1.get" 2>/dev/null; rc=$?
[ "$rc" -eq 0 ] && cmp -s "$WORK/i1.get" "$D/m/big.bin" && [ "$(grep -c '500-injected' "$PLOG")" -eq 2 ]
res "two 500 InternalError, then the body"
proxy --fault 500
S3CLI_RETRIES=1 viaproxy get x/m/big.bin >/dev/null 2>"$WORK/i2.err"; rc=$?
[ "$rc" -eq 1 ] && grep -qF '500 InternalError: We encountered an internal error. Please try again. (after 2 attempts)' "$WORK/i2.err"
res "500 forever: $(cat "$WORK/i2.err")"

echo "failures: $fails"
[ "$fails" -eq 0 ]
