#!/usr/bin/env bash
# t_creds_chain.sh - the credential chain's local sources against the Node S3 server (which verifies SigV4):
#   IMDSv2 and container credentials through tests/e2e/metadata_server.py (their documented protocol; it hands
#   out the server's real keys, so a real fetch follows), credential_process (good JSON, a failing command,
#   garbage, a wrong Version), the chain's order, anonymous fallbacks, the per-user cache, refresh during a
#   long fetch, and no token in any output.
# Node server only (S3_SERVER is ignored): the protocol server hands out a made-up session token with the
# server's real keys, which the Node server ignores and RGW rightly refuses, and the anonymous fallbacks need a
# server that serves anonymous GETs.
set -euo pipefail
export S3_SERVER=node
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
MD_PID= RD_PID= REC_PID=
trap 's3env_stop; stop_proxies; for p in $MD_PID $RD_PID $REC_PID; do kill "$p" 2>/dev/null || true; done' EXIT
PY=/usr/bin/python3

fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
total=$(cat "$WORK"/m/config.json "$WORK"/m/tokenizer.json "$WORK"/m/model.safetensors | wc -c)
ok "published"

$PY "$HFS3_ROOT/tests/e2e/metadata_server.py" "$WORK/md.port" "$WORK/md.log" S3RVER S3RVER --auth "PodIdentityToken-$$-xyz" &
MD_PID=$!
for _ in $(seq 100); do [ -s "$WORK/md.port" ] && break; sleep 0.05; done
MD=http://127.0.0.1:$(cat "$WORK/md.port")
: >"$WORK/md.log"

# nothing but what each case sets: no keys, metadata off unless a case turns it on
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
export AWS_REGION=us-east-1 AWS_ENDPOINT_URL_S3=$S3_ENDPOINT
run() { local n=$1; shift; set +e; "$@" >"$WORK/$n.out" 2>&1; RC=$?; set -e; }
fetch() { local n=$1; shift; run "$n" env HFS3_CACHE_DIR="$WORK/cache-$n" "$@" "$HFS3_BIN" fetch s3://models/m1; }
expect_ok() { [ "$RC" = 0 ] || { cat "$WORK/$1.out"; fail "$1: exit $RC"; }
  grep -q "^s3://models/m1: 4 files, $(human_bytes "$total") fetched" "$WORK/$1.out" || { cat "$WORK/$1.out"; fail "$1: summary"; }; }
expect_err() { # NAME STATUS PATTERN: exit STATUS, one line matching PATTERN
  [ "$RC" = "$2" ] || { cat "$WORK/$1.out"; fail "$1: exit $RC, expected $2"; }
  one_line "$WORK/$1.out"
  grep -q -- "$3" "$WORK/$1.out" || { cat "$WORK/$1.out"; fail "$1: message"; }
}
count() { grep -c "$1" "$WORK/md.log" || true; }

# --- IMDSv2 ----------------------------------------------------------------------------------------
[ "$(curl -s -o /dev/null -w '%{http_code}' "$MD/latest/meta-data/iam/security-credentials/")" = 401 ] ||
  fail "the test IMDS answers a GET without a token"
fetch imds AWS_EC2_METADATA_DISABLED= AWS_EC2_METADATA_SERVICE_ENDPOINT="$MD" HFS3_LOG=debug
expect_ok imds
[ "$(count 'PUT /latest/api/token 200')" = 1 ] && [ "$(count 'security-credentials/ 200')" = 1 ] &&
  [ "$(count 'security-credentials/hfs3-test-role 200')" = 1 ] || { cat "$WORK/md.log"; fail "IMDS requests"; }
ok "IMDSv2: token PUT, role name, role credentials (one each), then a real fetch"
[ "$(stat -c %a "$HOME/.cache/hfs3-creds")" = 700 ] || fail "cache dir mode"
fetch imds2 AWS_EC2_METADATA_DISABLED= AWS_EC2_METADATA_SERVICE_ENDPOINT="$MD"
expect_ok imds2
[ "$(count 'PUT /latest/api/token')" = 1 ] || { cat "$WORK/md.log"; fail "second process asked IMDS again"; }
ok "a second process takes the keys from ~/.cache/hfs3-creds: no IMDS request"
rm -rf "$HOME/.cache/hfs3-creds"
# a relative XDG_CACHE_HOME is ignored (as for the main cache): it would put the keys under the cwd, which through
# the shim is the program's
mkdir -p "$WORK/cwd"
cd "$WORK/cwd"
fetch imdsrel XDG_CACHE_HOME=relcache AWS_EC2_METADATA_DISABLED= AWS_EC2_METADATA_SERVICE_ENDPOINT="$MD"
cd "$HFS3_ROOT"
expect_ok imdsrel
[ ! -e "$WORK/cwd/relcache" ] || fail "a relative XDG_CACHE_HOME put the credentials cache under the cwd"
[ -d "$HOME/.cache/hfs3-creds" ] || fail "a relative XDG_CACHE_HOME: not ~/.cache/hfs3-creds"
ok "a relative XDG_CACHE_HOME is ignored: the keys go to ~/.cache/hfs3-creds, not under the cwd"
rm -rf "$HOME/.cache/hfs3-creds"

# no IMDS at the endpoint (a closed port): anonymous requests, quickly; the server serves anonymous GETs
t0=$(date +%s%N)
fetch noimds AWS_EC2_METADATA_DISABLED= AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:9 HFS3_LOG=debug
expect_ok noimds
grep -q 'instance metadata: not available' "$WORK/noimds.out" || { cat "$WORK/noimds.out"; fail "no IMDS: debug line"; }
[ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 5000 ] || fail "no IMDS took more than 5 s"
: >"$WORK/md.log"
fetch disabled AWS_EC2_METADATA_SERVICE_ENDPOINT="$MD"
expect_ok disabled
[ ! -s "$WORK/md.log" ] || fail "AWS_EC2_METADATA_DISABLED=true still asked IMDS"
ok "no IMDS there: anonymous; AWS_EC2_METADATA_DISABLED=true: never asked"

# --- container credentials (EKS Pod Identity style: full URI + token file) ----------------------------
printf 'PodIdentityToken-%s-xyz\n' $$ >"$WORK/pod-token"
printf 'WrongToken-%s\n' $$ >"$WORK/bad-token"
fetch pod AWS_CONTAINER_CREDENTIALS_FULL_URI="$MD/pod-identity" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$WORK/pod-token"
expect_ok pod
ok "container credentials: full URI + AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, real fetch"
rm -rf "$HOME/.cache/hfs3-creds"
fetch pod-bad AWS_CONTAINER_CREDENTIALS_FULL_URI="$MD/pod-identity" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$WORK/bad-token"
expect_err pod-bad 1 'container credentials: GET .*: HTTP 401: AccessDenied: invalid authorization token'
ok "wrong authorization token: exit 1, one line: $(cat "$WORK/pod-bad.out")"
fetch pod-tok AWS_CONTAINER_CREDENTIALS_FULL_URI="$MD/pod-identity" AWS_CONTAINER_AUTHORIZATION_TOKEN="PodIdentityToken-$$-xyz"
expect_ok pod-tok
rm -rf "$HOME/.cache/hfs3-creds"
fetch pod-far AWS_CONTAINER_CREDENTIALS_FULL_URI=http://example.com/creds AWS_CONTAINER_AUTHORIZATION_TOKEN=x
expect_err pod-far 2 'plain http to a host other than loopback'
ok "AWS_CONTAINER_AUTHORIZATION_TOKEN works too; a plain-http full URI to another host is refused (exit 2)"

# --- never through a proxy (issue 34 item 2): the container endpoint and IMDS are asked directly, whatever
# http_proxy, HTTP_PROXY, https_proxy or ALL_PROXY say (a proxy would see the authorization token and the keys).
# The proxy here is a listener that records every byte it receives and answers nothing. The S3 requests, which
# may use a proxy, go to localhost, which no_proxy exempts; the credential endpoints are 127.0.0.1.
cat >"$WORK/rec.py" <<'PY'
import socket, sys, threading
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
log = open(sys.argv[2], "ab", buffering=0)
def take(c):
    c.settimeout(5)
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            log.write(b)
    except OSError:
        pass
    c.close()
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    threading.Thread(target=take, args=(c,), daemon=True).start()
PY
$PY "$WORK/rec.py" "$WORK/rec.port" "$WORK/rec.log" &
REC_PID=$!
for _ in $(seq 100); do [ -s "$WORK/rec.port" ] && break; sleep 0.05; done
RP=http://127.0.0.1:$(cat "$WORK/rec.port")
S3L=${S3_ENDPOINT/127.0.0.1/localhost}
PROXIED=(http_proxy="$RP" HTTP_PROXY="$RP" https_proxy="$RP" HTTPS_PROXY="$RP" ALL_PROXY="$RP" no_proxy=localhost
  NO_PROXY=localhost AWS_ENDPOINT_URL_S3="$S3L")
# the recorder works, and the variables reach libcurl: a plain curl to the metadata server goes through it
env "${PROXIED[@]}" curl -s -m 5 -o /dev/null "$MD/latest/meta-data/" || true
for _ in $(seq 50); do [ -s "$WORK/rec.log" ] && break; sleep 0.1; done
grep -q "GET $MD/latest/meta-data/" "$WORK/rec.log" || fail "the recording proxy got nothing from curl with http_proxy set"
: >"$WORK/rec.log"
rm -rf "$HOME/.cache/hfs3-creds"
: >"$WORK/md.log"
fetch pod-proxy "${PROXIED[@]}" AWS_CONTAINER_CREDENTIALS_FULL_URI="$MD/pod-identity" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$WORK/pod-token"
expect_ok pod-proxy
[ "$(count 'GET /pod-identity 200')" = 1 ] || { cat "$WORK/md.log"; fail "container credentials with a proxy set: the endpoint was not asked directly"; }
rm -rf "$HOME/.cache/hfs3-creds"
fetch imds-proxy "${PROXIED[@]}" AWS_EC2_METADATA_DISABLED= AWS_EC2_METADATA_SERVICE_ENDPOINT="$MD"
expect_ok imds-proxy
[ "$(count 'PUT /latest/api/token 200')" = 1 ] && [ "$(count 'security-credentials/hfs3-test-role 200')" = 1 ] ||
  { cat "$WORK/md.log"; fail "IMDSv2 with a proxy set: not asked directly"; }
rm -rf "$HOME/.cache/hfs3-creds"
sleep 0.2 # (a connection the proxy accepted is logged as its bytes arrive; the fetches above have ended)
[ ! -s "$WORK/rec.log" ] || { head -c 600 "$WORK/rec.log"; echo; fail "a credential request went through the proxy (above: what it received)"; }
ok "container endpoint (full URI, token file) and IMDSv2 with http_proxy/HTTP_PROXY/https_proxy/ALL_PROXY set: keys, a real fetch, and the proxy received nothing"

# --- no redirects (issue 25 item 2): a 3xx from the container endpoint, IMDS or STS is an answer, never followed
# a redirect would carry the container authorization token (and the signed STS request) wherever it points.
# RD answers every request 307 to the working server MD: MD must receive nothing, and the fetch fails.
$PY "$HFS3_ROOT/tests/e2e/metadata_server.py" "$WORK/rd.port" "$WORK/rd.log" S3RVER S3RVER --redirect "$MD" &
RD_PID=$!
for _ in $(seq 100); do [ -s "$WORK/rd.port" ] && break; sleep 0.05; done
RD=http://127.0.0.1:$(cat "$WORK/rd.port")
rm -rf "$HOME/.cache/hfs3-creds"
: >"$WORK/md.log"
fetch redir-pod AWS_CONTAINER_CREDENTIALS_FULL_URI="$RD/pod-identity" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$WORK/pod-token"
expect_err redir-pod 1 'container credentials: GET .*: HTTP 307'
fetch redir-imds AWS_EC2_METADATA_DISABLED= AWS_EC2_METADATA_SERVICE_ENDPOINT="$RD"
[ "$RC" != 0 ] || grep -q 'no credentials' "$WORK/redir-imds.out" || { cat "$WORK/redir-imds.out"; fail "redir-imds: exit 0 with keys"; }
printf 'WebIdentityToken-%s\n' $$ >"$WORK/web-token"
fetch redir-sts AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/web-token" AWS_ROLE_ARN=arn:aws:iam::1:role/r AWS_ENDPOINT_URL_STS="$RD"
expect_err redir-sts 1 'web identity: .*HTTP 307'
grep -q '^GET /pod-identity 307$' "$WORK/rd.log" && grep -q '^PUT /latest/api/token 307$' "$WORK/rd.log" &&
  grep -q '^POST / 307$' "$WORK/rd.log" || { cat "$WORK/rd.log"; fail "the redirecting server was not asked"; }
[ ! -s "$WORK/md.log" ] || { cat "$WORK/md.log"; fail "a redirect from a credential endpoint was followed"; }
ok "307 from the container endpoint, IMDS and STS: not followed (the target got no request); container and STS fail"

# --- credential_process ------------------------------------------------------------------------------
mkdir -p "$WORK/bin" "$HOME/.aws"
cat >"$WORK/bin/good creds" <<EOF
#!/bin/sh
echo call >>"$WORK/process.calls"
[ "\$1" = "--flag" ] && [ "\$2" = "two words" ] || { echo "bad argv: \$*" >&2; exit 9; }
exp=\$(date -u -d "@\$((\$(date +%s) + \${EXPIRES_IN:-3600}))" +%Y-%m-%dT%H:%M:%SZ)
printf '{"Version": 1, "AccessKeyId": "S3RVER", "SecretAccessKey": "S3RVER", "SessionToken": "ProcSessionTok-%s", "Expiration": "%s"}\n' $$ "\$exp"
EOF
printf '#!/bin/sh\necho "vault: permission denied" >&2\nexit 3\n' >"$WORK/bin/failing"
printf '#!/bin/sh\necho "hello, not json"\n' >"$WORK/bin/garbage"
printf '#!/bin/sh\necho %s\n' "'{\"Version\": 2, \"AccessKeyId\": \"S3RVER\", \"SecretAccessKey\": \"S3RVER\"}'" >"$WORK/bin/v2"
chmod +x "$WORK/bin/"*
cat >"$HOME/.aws/config" <<EOF
[profile proc]
credential_process = "$WORK/bin/good creds" --flag 'two words'
[profile failing]
credential_process = $WORK/bin/failing
[profile garbage]
credential_process = $WORK/bin/garbage
[profile v2]
credential_process = $WORK/bin/v2
[profile sso]
sso_session = corp
sso_account_id = 123456789012
EOF
fetch proc AWS_PROFILE=proc
expect_ok proc
fetch proc2 AWS_PROFILE=proc
expect_ok proc2
[ "$(wc -l <"$WORK/process.calls")" = 1 ] || fail "credential_process ran $(wc -l <"$WORK/process.calls") times for two processes"
ok "credential_process (quoted path, argv split like the AWS CLI, no shell): fetch; its keys reused by the next process"
fetch proc-fail AWS_PROFILE=failing
expect_err proc-fail 1 'credential_process: .*failing exited with status 3: vault: permission denied'
fetch proc-garbage AWS_PROFILE=garbage
expect_err proc-garbage 1 'credential_process: .*garbage printed something that is not JSON'
fetch proc-v2 AWS_PROFILE=v2
expect_err proc-v2 1 'credential_process: .*v2 printed JSON without "Version": 1'
fetch sso AWS_PROFILE=sso
expect_err sso 2 "AWS profile 'sso' uses SSO (sso_session), which hfs3 does not support"
ok "credential_process failing, printing garbage or Version 2: exit 1, one line each; SSO refused (exit 2)"

# --- the chain's order -------------------------------------------------------------------------------
rm -rf "$HOME/.cache/hfs3-creds"
: >"$WORK/process.calls"
fetch order1 AWS_PROFILE=proc AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
expect_ok order1
[ ! -s "$WORK/process.calls" ] || fail "environment keys did not come first"
fetch order2 AWS_PROFILE=proc AWS_CONTAINER_CREDENTIALS_FULL_URI="$MD/pod-identity" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$WORK/bad-token"
expect_ok order2
fetch order3 AWS_PROFILE=proc AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/pod-token" AWS_ROLE_ARN=arn:aws:iam::1:role/r \
  AWS_ENDPOINT_URL_STS=http://127.0.0.1:9
expect_err order3 1 'web identity: POST http://127.0.0.1:9'
ok "order: environment keys, then web identity, then credential_process, then container credentials"

# --- refresh during a long fetch: keys that expire in 5 min + 3 s are asked for again mid-fetch --------
rm -rf "$HOME/.cache/hfs3-creds"
: >"$WORK/process.calls"
start_proxy slow 8000000
port=$(sed -n 's/^port //p' "$WORK/slow.port")
fetch refresh AWS_PROFILE=proc EXPIRES_IN=303 HFS3_CONNECTIONS=1 AWS_ENDPOINT_URL_S3="http://127.0.0.1:$port" HFS3_LOG=debug
expect_ok refresh
n=$(wc -l <"$WORK/process.calls")
[ "$n" -ge 2 ] || { grep credential "$WORK/refresh.out"; fail "keys were not refreshed during a 5 s fetch ($n calls)"; }
ok "keys about to expire are fetched again during a long fetch ($n credential_process runs)"

# --- no token in any output --------------------------------------------------------------------------
for s in "PodIdentityToken-$$-xyz" "WebIdentityToken-$$" "ProcSessionTok-$$" "IQoJb3JpZ2luFAKESESSIONTOKEN" "IMDSTOKEN"; do
  if grep -lF -- "$s" "$WORK"/*.out; then fail "$s appears in the outputs above"; fi
done
ok "no authorization token, IMDS token or session token in any output (debug level included)"
