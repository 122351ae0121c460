#!/usr/bin/env bash
# t_creds_rgw_sts.sh - the credential chain against a real STS: Ceph's RADOS Gateway (scripts/rgwenv.sh) with a
# tiny OpenID provider on loopback (tests/e2e/oidc_provider.py) registered through IAM.
#   web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, STS endpoint from AWS_ENDPOINT_URL): a good token
#   gives keys and a real fetch; the keys are kept in ~/.cache/hfs3-creds (0700/0600) and reused by the next
#   process without asking STS; an expired token and a token signed by another key give one line naming
#   "web identity" and exit 1; the same through a profile (web_identity_token_file, role_arn).
#   AssumeRole (role_arn + source_profile, signed with the source's keys, AWS_ENDPOINT_URL_STS): a fetch works;
#   a source with a wrong secret gets one line naming "assume role" and exit 1.
#   No token, secret or session token in any output, at debug level either.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/scripts/rgwenv.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_clean
if ! rgwenv_have; then echo "radosgw is not installed (scripts/deps.sh installs it)"; exit 1; fi
OIDC_PID=
trap 'rgwenv_stop; [ -z "$OIDC_PID" ] || kill "$OIDC_PID" 2>/dev/null || true' EXIT
rgwenv_start "$WORK"
ok "RGW started in ${RGW_START_SECONDS}s"
PY=/usr/bin/python3

# --- the OpenID provider, registered with RGW; two roles ------------------------------------------
thumb=$($PY "$HFS3_ROOT/tests/e2e/oidc_provider.py" keys "$WORK/oidc")
$PY "$HFS3_ROOT/tests/e2e/oidc_provider.py" keys "$WORK/foreign" >/dev/null
$PY "$HFS3_ROOT/tests/e2e/oidc_provider.py" serve "$WORK/oidc" "$WORK/oidc.port" &
OIDC_PID=$!
for _ in $(seq 100); do [ -s "$WORK/oidc.port" ] && break; sleep 0.05; done
OP=$(cat "$WORK/oidc.port")
ISS=http://127.0.0.1:$OP
$PY "$HFS3_ROOT/tests/e2e/rgw_iam.py" oidc "$ISS" hfs3-aud "$thumb" || fail "CreateOpenIDConnectProvider"
WEB_ARN=$($PY "$HFS3_ROOT/tests/e2e/rgw_iam.py" role webrole "oidc:127.0.0.1:$OP") || fail "CreateRole webrole"
AR_ARN=$($PY "$HFS3_ROOT/tests/e2e/rgw_iam.py" role assumed user:tester) || fail "CreateRole assumed"
ok "OpenID provider on port $OP registered; roles $WEB_ARN, $AR_ARN"

# --- a model in the bucket, uploaded and described with the owner's keys ----------------------------
mkdir -p "$WORK/m/sub"
printf '{"hidden_size": 8}\n' >"$WORK/m/config.json"
head -c 300000 /dev/urandom >"$WORK/m/model.safetensors"
printf 'x\n' >"$WORK/m/sub/a.txt"
rclone copy "$WORK/m" rgwtest:models/m || fail "rclone copy"
"$HFS3_BIN" build rgwtest:models/m >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build"; }

tok() { $PY "$HFS3_ROOT/tests/e2e/oidc_provider.py" token "$1" "$ISS" hfs3-aud alice "$2"; }
tok "$WORK/oidc" 3600 >"$WORK/token.good"
tok "$WORK/oidc" -120 >"$WORK/token.expired"
tok "$WORK/foreign" 3600 >"$WORK/token.foreign"
SECRETS=("$RGW_SK" "$RGW_SK2" "$(cat "$WORK/token.good")" "$(cat "$WORK/token.expired")" "$(cat "$WORK/token.foreign")")

# only the chain's variables: no static keys anywhere
export AWS_REGION=us-east-1 AWS_ENDPOINT_URL=$RGW_ENDPOINT HFS3_LOG=debug
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
run() { # run NAME CMD...: stdout+stderr to $WORK/NAME.out, exit status in RC
  local n=$1; shift
  set +e; "$@" >"$WORK/$n.out" 2>&1; RC=$?; set -e
}
fetch() { local name=$1; shift; run "$name" env "$@" HFS3_CACHE_DIR="$WORK/cache-$name" "$HFS3_BIN" fetch s3://models/m; }

# --- web identity -----------------------------------------------------------------------------------
export AWS_ROLE_ARN=$WEB_ARN AWS_ROLE_SESSION_NAME=e2e
fetch web1 AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/token.good"
[ "$RC" = 0 ] || { cat "$WORK/web1.out"; fail "web identity fetch: exit $RC"; }
grep -q '^s3://models/m: 3 files, 293.0 KiB fetched' "$WORK/web1.out" || { cat "$WORK/web1.out"; fail "web identity: summary"; }
[ "$(grep -c 'web identity: POST' "$WORK/web1.out")" = 1 ] || { cat "$WORK/web1.out"; fail "one STS request"; }
ok "web identity: a good token gives keys (one STS request) and a real fetch"

CD=$HOME/.cache/hfs3-creds
[ "$(stat -c %a "$CD")" = 700 ] || fail "credentials cache dir mode $(stat -c %a "$CD")"
n=0
for f in "$CD"/*; do n=$((n + 1)); [ "$(stat -c %a "$f")" = 600 ] || fail "cache file mode $(stat -c %a "$f")"; done
[ "$n" = 1 ] || fail "expected one cache file, found $n"
SESSION_TOKEN=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["SessionToken"])' "$CD"/*)
TEMP_SECRET=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["SecretAccessKey"])' "$CD"/*)
[ -n "$SESSION_TOKEN" ] && [ -n "$TEMP_SECRET" ] || fail "cache file content"
SECRETS+=("$SESSION_TOKEN" "$TEMP_SECRET")
! grep -rqF "$SESSION_TOKEN" "$WORK/cache-web1" || fail "the session token is in the model cache"
ok "keys kept in ~/.cache/hfs3-creds (0700, one file 0600), not in the model cache"

fetch web2 AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/token.good"
[ "$RC" = 0 ] || { cat "$WORK/web2.out"; fail "second fetch: exit $RC"; }
! grep -q 'web identity: POST' "$WORK/web2.out" || { cat "$WORK/web2.out"; fail "second process asked STS again"; }
grep -q 'keys from the credentials cache' "$WORK/web2.out" || { cat "$WORK/web2.out"; fail "cache not used"; }
ok "a second process reuses the cached keys: no STS request"

rm -rf "$CD"
for t in expired foreign; do
  fetch "web-$t" HFS3_LOG=warn AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/token.$t"
  [ "$RC" = 1 ] || { cat "$WORK/web-$t.out"; fail "$t token: exit $RC, expected 1"; }
  one_line "$WORK/web-$t.out"
  grep -q 'web identity: AccessDenied' "$WORK/web-$t.out" || { cat "$WORK/web-$t.out"; fail "$t token: message"; }
  ok "$t token: exit 1, one line: $(cat "$WORK/web-$t.out")"
done
[ ! -e "$CD" ] || [ -z "$(ls -A "$CD")" ] || fail "a refused token left keys in the cache"

# the same from a profile (web_identity_token_file, role_arn), the environment's pair unset
mkdir -p "$HOME/.aws"
cat >"$HOME/.aws/config" <<EOF
[profile web]
web_identity_token_file = $WORK/token.good
role_arn = $WEB_ARN
role_session_name = from-profile
[profile src]
aws_access_key_id = $RGW_AK
aws_secret_access_key = $RGW_SK
[profile assumer]
role_arn = $AR_ARN
source_profile = src
[profile badsrc]
aws_access_key_id = $RGW_AK
aws_secret_access_key = wrong-$RGW_SK2
[profile badassumer]
role_arn = $AR_ARN
source_profile = badsrc
EOF
unset AWS_ROLE_ARN AWS_ROLE_SESSION_NAME
fetch webprof AWS_PROFILE=web
[ "$RC" = 0 ] || { cat "$WORK/webprof.out"; fail "web identity from a profile: exit $RC"; }
ok "web identity from a profile: fetch works"

# --- AssumeRole with a source profile; STS from AWS_ENDPOINT_URL_STS --------------------------------
rm -rf "$CD"
fetch assume AWS_PROFILE=assumer AWS_ENDPOINT_URL=http://127.0.0.1:9 AWS_ENDPOINT_URL_S3="$RGW_ENDPOINT" \
  AWS_ENDPOINT_URL_STS="$RGW_ENDPOINT"
[ "$RC" = 0 ] || { cat "$WORK/assume.out"; fail "assume role: exit $RC"; }
grep -q "assume role: POST $RGW_ENDPOINT" "$WORK/assume.out" || { cat "$WORK/assume.out"; fail "assume role: STS URL"; }
ok "AssumeRole (signed with the source profile's keys, AWS_ENDPOINT_URL_STS): fetch works"
for f in "$CD"/*; do SECRETS+=("$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["SessionToken"])' "$f")"); done

fetch assume-bad HFS3_LOG=warn AWS_PROFILE=badassumer
[ "$RC" = 1 ] || { cat "$WORK/assume-bad.out"; fail "assume role with a wrong secret: exit $RC"; }
one_line "$WORK/assume-bad.out"
grep -q 'assume role: SignatureDoesNotMatch\|assume role: AccessDenied\|assume role: InvalidAccessKeyId' "$WORK/assume-bad.out" ||
  { cat "$WORK/assume-bad.out"; fail "assume role: message"; }
ok "AssumeRole with a wrong source secret: exit 1, one line: $(cat "$WORK/assume-bad.out")"

# --- no secret in any output -----------------------------------------------------------------------
for s in "${SECRETS[@]}"; do
  [ -n "$s" ] || continue
  if grep -rlF -- "$s" "$WORK"/*.out; then fail "a secret or token appears in the outputs above"; fi
done
ok "no secret, token or session token in any output (${#SECRETS[@]} checked, debug level included)"
