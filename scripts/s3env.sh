# s3env.sh - source me: start the local S3 server on a free loopback port and point rclone and hfs3 at it.
#   s3env_start WORKDIR [BUCKETS]   starts it (data under WORKDIR/s3), exports the variables below
#   s3env_stop                      stops it, and puts back every variable s3env_start changed (HOME, AWS_*,
#                                   proxies, RCLONE_CONFIG_*, ...) as it was before, unless changed since
#   s3env_stop --keep-env           stops the server only (tests of S3 going away)
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

# The state of the shell's variables that s3env_start may change, so that s3env_stop can put them back: a user
# who sourced this in their own shell ("Try it" in README.md) keeps their HOME, AWS_PROFILE, proxies and rclone
# remotes. NAME -> "u" (unset), "x:VALUE" (exported) or "s:VALUE" (set, not exported).
S3ENV_NAMES="AWS_CA_BUNDLE CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY"
declare -gA S3ENV_BEFORE S3ENV_AFTER   # sourced again while a server runs: what was saved stays
S3ENV_SAVED=${S3ENV_SAVED:-}
s3env_snap() {   # s3env_snap ARRAYNAME: the state of every exported variable and of S3ENV_NAMES
  local -n into=$1
  local n
  local -A ex=()
  for n in $(compgen -e); do ex[$n]=1; done
  for n in $(compgen -e) $S3ENV_NAMES; do
    case $n in _|SHLVL|PWD|OLDPWD) continue ;; esac
    if [ -z "${!n+x}" ]; then into[$n]=u
    elif [ -n "${ex[$n]:-}" ]; then into[$n]="x:${!n}"
    else into[$n]="s:${!n}"; fi
  done
}
s3env_state() { local n=$1; if [ -z "${!n+x}" ]; then echo u; elif [[ " $(compgen -e | tr '\n' ' ') " == *" $n "* ]]; then echo "x:${!n}"; else echo "s:${!n}"; fi; }

s3env_start() {
  local work=$1 buckets=${2:-models}
  # the first start saves the shell as it was; a second start without a stop keeps that
  if [ -z "$S3ENV_SAVED" ]; then S3ENV_BEFORE=(); s3env_snap S3ENV_BEFORE; S3ENV_SAVED=1; fi
  s3env_start_server "$work" "$buckets" || return 1
  S3ENV_AFTER=()
  s3env_snap S3ENV_AFTER
}

# Puts back what s3env_start changed: a variable it set or unset is restored to its value from before the first
# start (or unset again), unless the caller changed it since (then the caller's value stays).
s3env_restore() {
  [ -n "$S3ENV_SAVED" ] || return 0
  local n before after now
  local -A seen=()
  for n in "${!S3ENV_BEFORE[@]}" "${!S3ENV_AFTER[@]}"; do
    [ -z "${seen[$n]:-}" ] || continue
    seen[$n]=1
    before=${S3ENV_BEFORE[$n]:-u} after=${S3ENV_AFTER[$n]:-u}
    [ "$before" != "$after" ] || continue
    now=$(s3env_state "$n")
    [ "$now" = "$after" ] || continue   # changed since the start: the caller's
    case $before in
      u) unset "$n" ;;
      x:*) export "$n=${before#x:}" ;;
      s:*) printf -v "$n" %s "${before#s:}"; export -n "$n" ;;
    esac
  done
  S3ENV_SAVED=
  S3ENV_BEFORE=() S3ENV_AFTER=()
}

s3env_start_server() {
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

# s3env_stop --keep-env: the server only, the variables stay (a test of S3 going away; a later stop restores)
s3env_stop() {
  if [ "${S3_SERVER:-node}" = rgw ]; then rgwenv_stop
  elif [ -n "${S3_PID:-}" ]; then kill "$S3_PID" 2>/dev/null; wait "$S3_PID" 2>/dev/null; fi
  [ "${1:-}" = --keep-env ] || s3env_restore
  [ -z "${S3_PID:-}" ] || S3_PID=   # not restored (a second stop, or set by the caller): never killed twice
  return 0
}
