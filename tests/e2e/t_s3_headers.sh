#!/usr/bin/env bash
# t_s3_headers.sh - what the helper puts on the wire, read from the recording proxy (s3proxy.py --headers-log):
#   the manifest refresh (_index, fetch, the shim's revalidation) sends If-None-Match with the stored ETag and
#   gets 304; a changed manifest gets 200 and its new ETag is stored; a session token (rclone session_token,
#   AWS_SESSION_TOKEN) is sent as x-amz-security-token on every request, signed, and never printed.
#   Every request says Accept-Encoding: identity; a body a proxy gzipped anyway is refused with one line that
#   names the encoding (issue 32 item 8).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
trap 'stop_proxies; s3env_stop' EXIT
mkdir -p "$WORK/m"
printf '{"a": 1}\n' >"$WORK/m/config.json"
head -c 100000 /dev/urandom >"$WORK/m/tokenizer.json"
rclone copy "$WORK/m" s3test:models/m || fail "rclone copy"
"$HFS3_BIN" build s3test:models/m >/dev/null || fail "build"
start_proxy rec 0 "--headers-log $WORK/rec.jsonl"

# manifest_gets: sets got to "status if-none-match" of each GET of the manifest since the last call
seen=0
manifest_gets() {
  got=$(python3 - "$WORK/rec.jsonl" "$seen" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
for r in sorted(recs, key=lambda r: r["n"]):
    if r["method"] == "GET" and r["path"].endswith("/.hfs3/manifest.json"):
        inm = [v for k, v in r["headers"] if k.lower() == "if-none-match"]
        print(r["status"], inm[0] if len(inm) == 1 else ("-" if not inm else "several"))
PY
)
  seen=$(wc -l <"$WORK/rec.jsonl")
}

export HFS3_CACHE_DIR=$WORK/cache
expect_exit 0 "first _index" "$HFS3_BIN" _index rec:models/m
manifest_gets; [ "$got" = "200 -" ] || fail "first refresh: expected one GET without If-None-Match"
K=$HFS3_CACHE_DIR/mounts/$(ls "$HFS3_CACHE_DIR/mounts")
etag=$(cat "$K/etag")
[ -n "$etag" ] || fail "no ETag stored"
touch -d 2001-01-01 "$K/index"
expect_exit 0 "second _index" "$HFS3_BIN" _index rec:models/m
manifest_gets
[ "$got" = "304 $etag" ] || fail "second refresh: expected one GET with If-None-Match $etag answered 304, got: $got"
[ "$(stat -c %Y "$K/index")" -gt 978307200 ] || fail "the 304 did not renew the index"
ok "_index revalidates with If-None-Match $etag: 304"

expect_exit 0 "fetch" "$HFS3_BIN" fetch rec:models/m
manifest_gets; [ "$got" = "304 $etag" ] || fail "fetch: the manifest refresh did not send If-None-Match, got: $got"
out=$(HFS3_MANIFEST_TTL=0 HFS3_HELPER=$HFS3_BIN HFS3_MOUNTS="$WORK/mnt=rec:models/m" LD_PRELOAD=$HFS3_SHIM cat "$WORK/mnt/config.json")
[ "$out" = '{"a": 1}' ] || fail "reading through the shim"
manifest_gets; [ "$got" = "304 $etag" ] || fail "the shim's revalidation (TTL 0) did not send If-None-Match, got: $got"
ok "fetch and the shim's revalidation send If-None-Match too"

# a changed manifest: If-None-Match with the old ETag, 200, the new ETag stored and used next time
printf 'new\n' >"$WORK/m/new.txt"
rclone copy "$WORK/m" s3test:models/m || fail "rclone copy"
"$HFS3_BIN" build s3test:models/m >/dev/null || fail "rebuild"
expect_exit 0 "_index after a rebuild" "$HFS3_BIN" _index rec:models/m
manifest_gets; [ "$got" = "200 $etag" ] || fail "changed manifest: expected If-None-Match $etag answered 200, got: $got"
etag2=$(cat "$K/etag")
[ "$etag2" != "$etag" ] || fail "the new ETag was not stored"
expect_exit 0 "_get of the new file" "$HFS3_BIN" _get rec:models/m new.txt
expect_exit 0 "_index once more" "$HFS3_BIN" _index rec:models/m
manifest_gets; [ "$got" = "304 $etag2" ] || fail "after the change: expected If-None-Match with the new ETag, got: $got"
ok "a changed manifest: 200 for the old ETag, the new one stored and sent next"

# session tokens: every request carries and signs x-amz-security-token; it is never printed
TOKEN=SessTok-9q8w7e6r/with+odd=chars
tokens() {  # LOG: prints "bad N" for each request without the token or not signing it
  python3 - "$1" "$TOKEN" <<'PY'
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    h = {}
    for k, v in r["headers"]:
        h.setdefault(k.lower(), []).append(v)
    signed = h.get("authorization", [""])[0].split("SignedHeaders=")[-1].split(",")[0].split(";")
    if h.get("x-amz-security-token") != [sys.argv[2]] or "x-amz-security-token" not in signed:
        print("bad", r["n"], r["method"], r["path"])
    n += 1
print("requests", n)
PY
}
stop_proxies
start_proxy tok 0 "--headers-log $WORK/tok.jsonl"
export RCLONE_CONFIG_TOK_SESSION_TOKEN=$TOKEN
export HFS3_CACHE_DIR=$WORK/cache-tok
HFS3_LOG=debug expect_exit 0 "fetch with an rclone session_token" "$HFS3_BIN" fetch tok:models/m
! grep -qF "$TOKEN" "$WORK/out" "$WORK/err" || fail "the session token was printed"
HFS3_LOG=debug expect_exit 0 "verify with an rclone session_token" "$HFS3_BIN" verify --deep tok:models/m
! grep -qF "$TOKEN" "$WORK/out" "$WORK/err" || fail "the session token was printed"
res=$(tokens "$WORK/tok.jsonl")
[ "$(grep -c '^bad' <<<"$res")" = 0 ] || { echo "$res"; fail "requests without the session token"; }
[ "$(sed -n 's/^requests //p' <<<"$res")" -ge 6 ] || { echo "$res"; fail "too few requests recorded"; }
ok "rclone session_token: $(sed -n 's/^requests //p' <<<"$res") requests, each sending and signing it"

: >"$WORK/tok.jsonl"
export AWS_SESSION_TOKEN=$TOKEN AWS_ENDPOINT_URL_S3=$RCLONE_CONFIG_TOK_ENDPOINT HFS3_CACHE_DIR=$WORK/cache-aws
HFS3_LOG=debug expect_exit 0 "fetch s3:// with AWS_SESSION_TOKEN" "$HFS3_BIN" fetch s3://models/m
! grep -qF "$TOKEN" "$WORK/out" "$WORK/err" || fail "the session token was printed"
res=$(tokens "$WORK/tok.jsonl")
[ "$(grep -c '^bad' <<<"$res")" = 0 ] || { echo "$res"; fail "s3:// requests without the session token"; }
[ "$(sed -n 's/^requests //p' <<<"$res")" -ge 4 ] || { echo "$res"; fail "too few requests recorded"; }
ok "AWS_SESSION_TOKEN: $(sed -n 's/^requests //p' <<<"$res") requests, each sending and signing it"
# Accept-Encoding: identity on every request; a proxy that gzips the body anyway (s3proxy.py --fault gzip): the
# fetch fails with a line that names the encoding, never "more bytes than requested" alone
python3 - "$WORK/tok.jsonl" <<'PY' || fail "a request without Accept-Encoding: identity"
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    ae = [v for k, v in r["headers"] if k.lower() == "accept-encoding"]
    assert ae == ["identity"], (r["n"], r["method"], r["path"], ae)
PY
ok "every request sends Accept-Encoding: identity"
unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3
stop_proxies
start_proxy gz 0 "--fault gzip --match tokenizer.json"
export HFS3_CACHE_DIR=$WORK/cache-gz
HFS3_RETRIES=0 expect_exit 1 "fetch through a proxy that gzips the body" "$HFS3_BIN" fetch gz:models/m
grep -q "Content-Encoding: gzip" "$WORK/err" || { cat "$WORK/err" >&2; fail "the error does not name the encoding"; }
grep -q "gzip-injected" "$WORK/gz.log" || fail "test setup: the proxy gzipped nothing"
[ ! -e "$WORK/cache-gz/blobs/$(blob_of "$WORK/m/tokenizer.json")" ] || fail "a gzipped body was installed"
ok "a gzipped body is refused, the encoding named: $(grep -m1 "Content-Encoding" "$WORK/err" | cut -c1-200)"
echo "all ok"
