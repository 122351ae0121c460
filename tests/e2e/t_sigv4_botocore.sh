#!/usr/bin/env bash
# t_sigv4_botocore.sh - hfs3's SigV4 agrees with botocore's, twice:
#   1. the signer: Authorization values of tests/tools/sigv4_sign equal botocore's for GET/HEAD/PUT and
#      ListObjectsV2 requests whose keys and query values hold spaces, '+', '=', '~', '$', '@' and UTF-8
#      (tests/e2e/sigv4_botocore.py; no server);
#   2. the requests lib/s3.c really sends: s3cli and the helper talk to the real server through the recording
#      proxy (s3proxy.py --headers-log), and botocore recomputes each signature from the method, raw path,
#      query and headers as they went on the wire (tests/e2e/sigv4_recorded.py): same signature, canonical
#      encoding, every added header signed, the session token sent and signed when there is one.
# Needs Debian's /usr/bin/python3 with python3-boto3.
set -euo pipefail
PY=/usr/bin/python3
SIGN="$HFS3_ROOT/$BUILD/tools/sigv4_sign"
CLI="$HFS3_ROOT/$BUILD/tools/s3cli"
[ -x "$SIGN" ] && [ -x "$CLI" ] || { echo "not ok: $SIGN or $CLI not built (make BUILD=$BUILD e2e builds them)"; exit 1; }
"$PY" -c 'import botocore' 2>/dev/null || { echo "not ok: $PY has no botocore (apt-get install python3-boto3)"; exit 1; }
# A clean environment: no host AWS_* settings or config files may reach botocore.
mkdir -p "$WORK/home"
botocore_env() { env -i PATH=/usr/bin:/bin HOME="$WORK/home" LANG=C.UTF-8 "$@"; }
botocore_env "$PY" "$HFS3_ROOT/tests/e2e/sigv4_botocore.py" "$SIGN"

source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
trap 'stop_proxies; s3env_stop' EXIT
mkdir -p "$WORK/d/m"
SPECIAL='sp ace+plus=eq~tilde$dollar@at-é漢.bin'
printf 'special content\n' >"$WORK/d/m/$SPECIAL"
head -c 3000000 /dev/urandom >"$WORK/d/m/big.bin"
for i in 1 2 3 4 5; do echo "$i" >"$WORK/d/m/f$i.txt"; done
rclone copy "$WORK/d" s3test:models/x || fail "rclone copy"

# recorded NAME [TOKEN]: a proxy recording headers to $WORK/NAME.jsonl; sets P (its endpoint)
recorded() {
  start_proxy "$1" 0 "--headers-log $WORK/$1.jsonl"
  P=$(sed -n 's/^port /http:\/\/127.0.0.1:/p' "$WORK/$1.port")
}
check_log() {  # LOG MIN [TOKEN]
  botocore_env SIGV4_AK=S3RVER SIGV4_SK=S3RVER SIGV4_TOKEN="${3:-}" \
    "$PY" "$HFS3_ROOT/tests/e2e/sigv4_recorded.py" "$1" "$2" || fail "requests in $1 disagree with botocore"
}
s3() { S3CLI_MAX_KEYS=2 "$CLI" "$P" models S3RVER S3RVER "$@"; }
s3ops() {
  s3 list "x/m/" >/dev/null || fail "list"
  s3 list "x/m/sp ace+plus=eq~" >/dev/null || fail "list with an awkward prefix"
  s3 get "x/m/$SPECIAL" >/dev/null 2>&1 || fail "get special"
  s3 get x/m/big.bin 1000 65536 >/dev/null 2>&1 || fail "ranged get"
  s3 head "x/m/$SPECIAL" >/dev/null || fail "head"
  printf 'put body' >"$WORK/put.bin"
  s3 put 'y/put here+=~$@ü.bin' "$WORK/put.bin" >/dev/null || fail "put"
  etag=$(s3 head x/m/big.bin | cut -d' ' -f2)
  S3CLI_IF_NONE_MATCH=$etag s3 get x/m/big.bin >/dev/null 2>&1 || fail "If-None-Match get"
  S3CLI_IF_MATCH=$etag s3 get x/m/big.bin 0 10 >/dev/null 2>&1 || fail "If-Match get"
}

recorded rec
s3ops
check_log "$WORK/rec.jsonl" 10
ok "s3cli: LIST (paged, awkward prefix), GET, ranged GET, HEAD, PUT, If-None-Match, If-Match as sent = botocore"

recorded tok
TOKEN='FQoGZXIvYXdzEXAMPLE//token+with/odd=chars=='
S3CLI_SESSION_TOKEN=$TOKEN s3ops
check_log "$WORK/tok.jsonl" 10 "$TOKEN"
ok "s3cli with a session token: every request sends and signs it, as botocore does"

# the helper's own requests: build (LIST, GETs, PUT), fetch (ranged GETs with If-Match), _index (If-None-Match)
recorded helper
rclone copy "$WORK/d/m" s3test:models/hm || fail "rclone copy hm"
export HFS3_CACHE_DIR=$WORK/cache HFS3_CONNECTIONS=2
"$HFS3_BIN" build helper:models/hm >/dev/null 2>&1 || fail "build through the proxy"
"$HFS3_BIN" fetch helper:models/hm >/dev/null || fail "fetch through the proxy"
"$HFS3_BIN" _index helper:models/hm || fail "_index through the proxy"
check_log "$WORK/helper.jsonl" 15
ok "hfs3-manifest build, fetch and _index: requests as sent = botocore"
echo "all ok"
