#!/usr/bin/env bash
# t_s3_dns.sh - a DNS blip is retried: an endpoint host name that fails to resolve twice and then resolves is
# fetched, with retry lines that say DNS; a name that never resolves fails after the retries with one line that
# says DNS (once, libcurl 7.88 refused CURLOPT_BUFFERSIZE on the retry and "curl setup: A libcurl function was
# given a bad argument" replaced the resolve error, so nothing was retried).
# The name lives only in a private mount namespace (unshare -m): /etc/hosts there is a file of this test's, and
# /etc/nsswitch.conf says "hosts: files", so no DNS server is asked; the real files are never written. Only
# 127.0.0.1 is contacted.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
if ! unshare -m true 2>/dev/null; then
  echo "SKIP dns: unshare -m is not allowed here (needs root or user namespaces)"
  exit 77
fi
s3env_start "$WORK"
# the name: this machine's own host name, the one name besides localhost that the S3 server does not take for a
# CNAME-style bucket (curl resolves localhost itself, without /etc/hosts)
NAME=$(hostname)
case "$NAME" in ""|localhost|*[!A-Za-z0-9.-]*) echo "SKIP dns: host name '$NAME' cannot be used"; exit 77 ;; esac
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null; s3env_stop' EXIT
mkdir -p "$WORK/m"
printf '{"a": 1}\n' >"$WORK/m/config.json"
rclone copy "$WORK/m" s3test:models/m || fail "rclone copy"
"$HFS3_BIN" build s3test:models/m >/dev/null || fail "build"
export RCLONE_CONFIG_BLIP_TYPE=s3 RCLONE_CONFIG_BLIP_PROVIDER=Other RCLONE_CONFIG_BLIP_ACCESS_KEY_ID=S3RVER \
       RCLONE_CONFIG_BLIP_SECRET_ACCESS_KEY=S3RVER RCLONE_CONFIG_BLIP_ENDPOINT=http://$NAME:$S3_PORT \
       RCLONE_CONFIG_BLIP_REGION=us-east-1 RCLONE_CONFIG_BLIP_FORCE_PATH_STYLE=true
printf 'hosts: files\n' >"$WORK/nsswitch.conf"
printf '127.0.0.1 localhost\n' >"$WORK/hosts.none"
# in_ns HOSTS CMD...: runs CMD with HOSTS as /etc/hosts and "hosts: files", in a private mount namespace
in_ns() {
  local hosts=$1; shift
  unshare -m sh -c 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/nsswitch.conf && shift 2 && exec "$@"' \
    sh "$hosts" "$WORK/nsswitch.conf" "$@"
}

# 1. the name fails to resolve until the helper has said twice that it retries, then resolves (the file is
# rewritten in place: the bind mount holds its inode): retried, and it succeeds
printf '127.0.0.1 localhost\n' >"$WORK/hosts.blip"
: >"$WORK/err"
( while [ "$(grep -c "DNS.*retrying" "$WORK/err" 2>/dev/null)" -lt 2 ]; do sleep 0.01; done
  printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$NAME" >"$WORK/hosts.blip" ) &
writer=$!
HFS3_CACHE_DIR=$WORK/cache HFS3_LOG=info expect_exit 0 "a DNS blip" in_ns "$WORK/hosts.blip" "$HFS3_BIN" fetch blip:models/m
wait "$writer" || true; writer=
! grep -q "bad argument" "$WORK/err" || { cat "$WORK/err"; fail "a DNS blip: curl setup failed on the retry"; }
n=$(grep -c "DNS.*retrying" "$WORK/err") || true
[ "$n" -ge 2 ] || { cat "$WORK/err"; fail "a DNS blip: expected two retries naming DNS"; }
ok "a name that failed to resolve $n times was retried and fetched: $(grep -m1 DNS "$WORK/err")"

# 2. a name that never resolves: the retries run out and the one error line says DNS
HFS3_CACHE_DIR=$WORK/cache2 HFS3_RETRIES=2 expect_exit 1 "no DNS" in_ns "$WORK/hosts.none" "$HFS3_BIN" show blip:models/m
! grep -q "bad argument" "$WORK/err" || { cat "$WORK/err"; fail "no DNS: curl setup failed on the retry"; }
grep -qF "$NAME" "$WORK/err" && grep -q "DNS.*(after 3 attempts)" "$WORK/err" || { cat "$WORK/err"; fail "no DNS: the message"; }
ok "a name that never resolves: $(tail -1 "$WORK/err")"
echo "all ok"
