#!/usr/bin/env bash
# t_heal_tls.sh - TLS end to end (issue 7 §3): stunnel4 terminates TLS in front of the test server with a
# certificate from a CA this test makes (openssl). An unknown CA fails with one clear line; AWS_CA_BUNDLE (s3://)
# and rclone's ca_cert make it work; HFS3_TLS_VERIFY=0 works and warns. Virtual-hosted addressing end to end:
# the bucket's host name (models.s3.amazonaws.com, which the test server maps to the bucket) is resolved to
# loopback by HFS3_TEST_RESOLVE (test-only), so no DNS and no /etc/hosts change. The virtual-hosted requests
# are anonymous: the test server puts the bucket into the canonical URI of a virtual-hosted request (real S3 and
# RGW sign the request path), so it refuses correct signatures there; signed requests go over TLS path-style.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
command -v stunnel4 >/dev/null || fail "stunnel4 is not installed (scripts/deps.sh installs it)"
s3env_start "$WORK"
TLS_PID=
trap '[ -z "$TLS_PID" ] || kill "$TLS_PID" 2>/dev/null; s3env_stop' EXIT

fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
big=$(blob_of "$WORK/m/model.safetensors")

# a CA and a server certificate for s3.amazonaws.com and its bucket subdomains
T=$WORK/tls
mkdir -p "$T"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=hfs3 test CA" -keyout "$T/ca.key" -out "$T/ca.pem" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=s3.amazonaws.com" -keyout "$T/server.key" -out "$T/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:s3.amazonaws.com,DNS:*.s3.amazonaws.com\nextendedKeyUsage=serverAuth\n' >"$T/ext.cnf"
openssl x509 -req -in "$T/server.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 \
  -extfile "$T/ext.cnf" -out "$T/server.pem" 2>/dev/null
# another CA, which signed nothing here
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=other CA" -keyout "$T/other.key" -out "$T/other.pem" 2>/dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$T/stunnel.conf" <<CONF
foreground = yes
pid =
debug = 3
output = $T/stunnel.log
[s3]
accept = 127.0.0.1:$port
connect = 127.0.0.1:$S3_PORT
cert = $T/server.pem
key = $T/server.key
CONF
stunnel4 "$T/stunnel.conf" 2>"$T/stunnel.err" &
TLS_PID=$!
for i in $(seq 1 100); do
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null && break
  sleep 0.1
done

export HFS3_TEST_RESOLVE="s3.amazonaws.com:$port:127.0.0.1,models.s3.amazonaws.com:$port:127.0.0.1"
export AWS_ENDPOINT_URL_S3="https://s3.amazonaws.com:$port"
export HFS3_S3_ADDRESSING=virtual
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
R=s3://models/m1

export HFS3_CACHE_DIR=$WORK/c1
expect_exit 1 "fetch with an unknown CA" "$HFS3_BIN" fetch $R
one_line "$WORK/err"
grep -q "GET models/.hfs3/manifest.json\|GET models/m1/.hfs3/manifest.json" "$WORK/err" && grep -qi "certificate" "$WORK/err" ||
  { cat "$WORK/err"; fail "unknown CA: message"; }
ok "unknown CA: $(cat "$WORK/err")"
AWS_CA_BUNDLE=$T/other.pem expect_exit 1 "fetch with another CA" "$HFS3_BIN" fetch $R
one_line "$WORK/err"

export HFS3_CACHE_DIR=$WORK/c2
AWS_CA_BUNDLE=$T/ca.pem expect_exit 0 "fetch with AWS_CA_BUNDLE" "$HFS3_BIN" fetch $R
cmp -s "$HFS3_CACHE_DIR/blobs/$big" "$WORK/m/model.safetensors" || fail "blob over TLS"
[ ! -s "$WORK/err" ] || { cat "$WORK/err"; fail "stderr not quiet"; }
ok "AWS_CA_BUNDLE: fetched over TLS, virtual-hosted: $(cat "$WORK/out")"
AWS_CA_BUNDLE=$T/ca.pem HFS3_LOG=debug expect_exit 0 "show, virtual-hosted" "$HFS3_BIN" show $R
grep -q "virtual-style" "$WORK/err" && grep -q "https://models.s3.amazonaws.com:$port/m1/.hfs3/manifest.json" "$WORK/err" ||
  { cat "$WORK/err"; fail "not virtual-hosted"; }
ok "virtual-hosted requests went to https://models.s3.amazonaws.com:$port/..."

# rclone remote with ca_cert in its config (and the endpoint over TLS)
cat >"$RCLONE_CONFIG" <<CONF
[tls]
type = s3
provider = Other
access_key_id = S3RVER
secret_access_key = S3RVER
endpoint = https://s3.amazonaws.com:$port
region = us-east-1
force_path_style = true
ca_cert = $T/ca.pem
CONF
export HFS3_CACHE_DIR=$WORK/c3
HFS3_S3_ADDRESSING=auto expect_exit 0 "fetch, rclone remote with ca_cert" "$HFS3_BIN" fetch tls:models/m1
cmp -s "$HFS3_CACHE_DIR/blobs/$big" "$WORK/m/model.safetensors" || fail "blob over TLS (rclone)"
ok "rclone ca_cert: fetched over TLS, signed, path-style"

export HFS3_CACHE_DIR=$WORK/c4
HFS3_TLS_VERIFY=0 expect_exit 0 "fetch with HFS3_TLS_VERIFY=0" "$HFS3_BIN" fetch $R
cmp -s "$HFS3_CACHE_DIR/blobs/$big" "$WORK/m/model.safetensors" || fail "blob over TLS (no verify)"
grep -q "HFS3_TLS_VERIFY=0: TLS certificates are not checked" "$WORK/err" || { cat "$WORK/err"; fail "no warning"; }
[ "$(grep -c 'not checked' "$WORK/err")" = 1 ] || fail "the warning is given once"
ok "HFS3_TLS_VERIFY=0: works and warns once: $(cat "$WORK/err")"
echo "all ok"
