# s3env.sh - source me: start the local S3 server on a free loopback port and point rclone and hfs3 at it.
#   s3env_start WORKDIR [BUCKETS]   starts it (data under WORKDIR/s3), exports the variables below
#   s3env_stop                      stops it
# S3_SERVER=rgw starts Ceph's RADOS Gateway (scripts/rgwenv.sh) instead, with the same keys and variables.
# After start: S3_PORT, S3_ENDPOINT, S3_VERIFIES_SIGNATURES (0 with the node < 20 fallback), remote "s3test:" (rclone variables), and the AWS_* variables for s3://.
# The environment is cleaned first: the host's AWS_CA_BUNDLE & co. must not leak into tests (rclone fails with LoadCustomCABundleError when AWS_CA_BUNDLE is set and the endpoint is http).
S3ENV_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

s3env_clean() {
  unset AWS_CA_BUNDLE CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE AWS_PROFILE \
        AWS_SESSION_TOKEN AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE \
        RCLONE_CONFIG HFS3_MOUNTS HFS3_CACHE_DIR HFS3_OFFLINE HFS3_HELPER http_proxy https_proxy HTTP_PROXY HTTPS_PROXY
  for v in $(env | sed -n 's/^\(RCLONE_CONFIG_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
  # the credential chain: nothing from the host, and no instance metadata requests (169.254.169.254) from tests
  unset AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_ROLE_SESSION_NAME AWS_CONTAINER_CREDENTIALS_FULL_URI \
        AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_AUTHORIZATION_TOKEN AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE \
        AWS_EC2_METADATA_SERVICE_ENDPOINT AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE AWS_ENDPOINT_URL_STS XDG_CACHE_HOME
  export AWS_EC2_METADATA_DISABLED=true
}

s3env_start() {
  local work=$1 buckets=${2:-models}
  s3env_clean
  # S3_SERVER=rgw: Ceph's RADOS Gateway instead of the Node server, with the same keys (S3RVER) and variables
  if [ "${S3_SERVER:-node}" = rgw ]; then
    source "$S3ENV_ROOT/scripts/rgwenv.sh"
    RGWENV_KEYS="S3RVER S3RVER" rgwenv_start "$work" "$buckets" || return 1
    export S3_PORT=$RGW_PORT S3_ENDPOINT=$RGW_ENDPOINT S3_VERIFIES_SIGNATURES=1
    s3env_export
    return 0
  fi
  mkdir -p "$work/s3" "$work/home"
  export HOME="$work/home"
  local out="$work/s3server.out"
  node --openssl-legacy-provider "$S3ENV_ROOT/scripts/s3server.js" 0 "$work/s3" "$buckets" >"$out" 2>"$work/s3server.err" &
  S3_PID=$!
  local i
  for i in $(seq 1 100); do
    if grep -q '^ready ' "$out" 2>/dev/null; then break; fi
    if ! kill -0 "$S3_PID" 2>/dev/null; then cat "$work/s3server.err" >&2; echo "s3env: server died" >&2; return 1; fi
    sleep 0.1
  done
  S3_PORT=$(sed -n 's/^ready //p' "$out")
  # the fallback server (node < 20) accepts any signature: tests of signing errors check this first
  if grep -q '^legacy' "$out"; then S3_VERIFIES_SIGNATURES=0; echo "s3env: WARNING: the S3 server does not verify signatures" >&2
  else S3_VERIFIES_SIGNATURES=1; fi
  export S3_VERIFIES_SIGNATURES
  [ -n "$S3_PORT" ] || { echo "s3env: server did not start" >&2; return 1; }
  export S3_PORT S3_PID S3_ENDPOINT="http://127.0.0.1:$S3_PORT"
  s3env_export
}

# the variables of a started server: remote "s3test:" and the AWS_* variables for s3://
s3env_export() {
  export RCLONE_CONFIG="$HOME/rclone.conf"
  : >"$RCLONE_CONFIG"
  export RCLONE_CONFIG_S3TEST_TYPE=s3 RCLONE_CONFIG_S3TEST_PROVIDER=Other \
         RCLONE_CONFIG_S3TEST_ACCESS_KEY_ID=S3RVER RCLONE_CONFIG_S3TEST_SECRET_ACCESS_KEY=S3RVER \
         RCLONE_CONFIG_S3TEST_ENDPOINT="$S3_ENDPOINT" RCLONE_CONFIG_S3TEST_REGION=us-east-1 \
         RCLONE_CONFIG_S3TEST_FORCE_PATH_STYLE=true
  export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1 \
         AWS_ENDPOINT_URL_S3="$S3_ENDPOINT"
}

s3env_stop() {
  if [ "${S3_SERVER:-node}" = rgw ]; then rgwenv_stop; return 0; fi
  if [ -n "${S3_PID:-}" ]; then kill "$S3_PID" 2>/dev/null; wait "$S3_PID" 2>/dev/null; S3_PID=; fi
}
