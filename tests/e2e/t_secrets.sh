#!/usr/bin/env bash
# t_secrets.sh - the secret key and session token appear in no message, log line, cache file or argv, on
# every failure path: connection refused (dead port), a server that never answers (timeout), 5xx until the
# retries run out, a wrong secret (403), each through show/build/verify/fetch/_index/_get at HFS3_LOG=debug,
# with stderr, stdout, mounts/K/error and fails/<sha>.err checked; and the helper the shim spawns gets no
# secret on its command line (a wrapper records its argv).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
trap 'stop_proxies; s3env_stop' EXIT
CLI="$HFS3_ROOT/$BUILD/tools/s3cli"
SECRET=S3RVER   # the server's secret: requests that reach it must verify
TOKEN=Tok7-secret-session-token-x9
mkdir -p "$WORK/m"
printf '{"a": 1}\n' >"$WORK/m/config.json"
head -c 100000 /dev/urandom >"$WORK/m/tokenizer.json"
rclone copy "$WORK/m" s3test:models/m || fail "rclone copy"
"$HFS3_BIN" build s3test:models/m >/dev/null || fail "build"
cfg=$(blob_of "$WORK/m/config.json")

# remote "sec:" has a secret that appears nowhere else: the server's own is S3RVER, which is too common a
# string to grep for, so the live server is reached with it but the failure cases use a distinctive one
export RCLONE_CONFIG_SEC_TYPE=s3 RCLONE_CONFIG_SEC_PROVIDER=Other RCLONE_CONFIG_SEC_ACCESS_KEY_ID=S3RVER \
       RCLONE_CONFIG_SEC_SECRET_ACCESS_KEY=S3RVER RCLONE_CONFIG_SEC_ENDPOINT=$S3_ENDPOINT \
       RCLONE_CONFIG_SEC_REGION=us-east-1 RCLONE_CONFIG_SEC_FORCE_PATH_STYLE=true
export HFS3_CACHE_DIR=$WORK/cache
"$HFS3_BIN" _index sec:models/m || fail "_index of the live remote"
K=$HFS3_CACHE_DIR/mounts/$(ls "$HFS3_CACHE_DIR/mounts")
BAD=Xq9-NotTheSecret-w8e7r6t5

# nothing_leaks WHAT: no secret or token in the last command's output, the cache's error files, or the log
nothing_leaks() {
  local f
  for f in "$WORK/out" "$WORK/err" "$K/error" "$HFS3_CACHE_DIR"/fails/*.err; do
    [ -e "$f" ] || continue
    ! grep -qF -e "$BAD" -e "$TOKEN" "$f" || fail "$1: a secret in $(basename "$f")"
  done
}
# each CMD on sec:models/m must fail (exit 1) with a message matching PATTERN and leak nothing
all_cmds() {  # WHAT PATTERN
  local what=$1 pat=$2 c
  for c in "show" "verify --deep" "build --dry-run" "fetch" "_get sec:models/m config.json" "_index"; do
    rm -f "$K/error" "$HFS3_CACHE_DIR"/fails/*.err
    touch -d 2001-01-01 "$K/index"
    set -- $c
    if [ "$1" = _get ]; then
      HFS3_LOG=debug expect_exit 1 "$what: $c" "$HFS3_BIN" "$@"
      one_line "$HFS3_CACHE_DIR/fails/$cfg.err"
      grep -qE "$pat" "$HFS3_CACHE_DIR/fails/$cfg.err" || { cat "$HFS3_CACHE_DIR/fails/$cfg.err"; fail "$what: fails/ file"; }
    elif [ "$1" = _index ]; then
      # with an index cached from this endpoint, _index warns and serves it; from another endpoint (issue 23
      # item 8) it is refused naming both, with the cause; from an empty cache it fails and writes error
      if [ "$RCLONE_CONFIG_SEC_ENDPOINT" = "$S3_ENDPOINT" ]; then
        HFS3_LOG=debug expect_exit 0 "$what: $c (index cached)" "$HFS3_BIN" _index sec:models/m
        grep -q "using the cached manifest" "$WORK/err" || { cat "$WORK/err"; fail "$what: _index warning"; }
      else
        HFS3_LOG=debug expect_exit 3 "$what: $c (index cached, another endpoint)" "$HFS3_BIN" _index sec:models/m
        grep -q "is not used: it now resolves to" "$WORK/err" || { cat "$WORK/err"; fail "$what: _index refusal"; }
      fi
      nothing_leaks "$what: $c (index cached)"
      HFS3_CACHE_DIR=$WORK/empty HFS3_LOG=debug expect_exit 1 "$what: $c (empty cache)" "$HFS3_BIN" _index sec:models/m
      local e
      e=$(ls "$WORK"/empty/mounts/*/error)
      one_line "$e"
      grep -qE "$pat" "$e" || { cat "$e"; fail "$what: mounts/K/error"; }
      ! grep -qF -e "$BAD" -e "$TOKEN" "$e" || fail "$what: a secret in mounts/K/error"
      rm -rf "$WORK/empty"
    else
      HFS3_LOG=debug expect_exit 1 "$what: $c" "$HFS3_BIN" "$@" sec:models/m
    fi
    grep -qE "$pat" "$WORK/err" || { cat "$WORK/err"; fail "$what: $c: the message does not say why ($pat)"; }
    nothing_leaks "$what: $c"
  done
}
export RCLONE_CONFIG_SEC_SECRET_ACCESS_KEY=$BAD RCLONE_CONFIG_SEC_SESSION_TOKEN=$TOKEN

# 1. connection refused
RCLONE_CONFIG_SEC_ENDPOINT=http://127.0.0.1:1 all_cmds "connection refused" "Couldn't connect|onnection refused"
ok "connection refused: show, verify, build, fetch, _get, _index fail naming the cause, no secret anywhere"

# 2. 5xx until the retries run out
start_proxy down 0 "--fail-first 100000"
# (HFS3_THROTTLE_BUDGET=1: a throttle is retried for 1 s, not the default 10 minutes)
RCLONE_CONFIG_SEC_ENDPOINT=$RCLONE_CONFIG_DOWN_ENDPOINT HFS3_THROTTLE_BUDGET=1 all_cmds "503" "503 SlowDown"
ok "503 forever: every command fails naming SlowDown, no secret anywhere"

# 3. a wrong secret (the server verifies signatures)
if [ "$S3_VERIFIES_SIGNATURES" = 1 ]; then
  all_cmds "wrong secret" "403 SignatureDoesNotMatch"
  ok "wrong secret: every command fails naming SignatureDoesNotMatch, no secret anywhere"
else
  echo "SKIP wrong-secret: the fallback S3 server (node < 20) does not verify signatures"
fi

# 4. timeouts: a server that accepts and never answers (s3cli, whose timeouts are short; the same s3.c path)
start_proxy hang 0 "--hang-first 100000"
S3CLI_SESSION_TOKEN=$TOKEN S3CLI_LOW_SPEED_S=1 S3CLI_RETRIES=1 S3CLI_BACKOFF_MS=10 HFS3_LOG=debug \
  expect_exit 1 "timeout" "$CLI" "$RCLONE_CONFIG_HANG_ENDPOINT" models S3RVER "$BAD" get m/config.json
grep -qiE "timeout|timed out" "$WORK/err" || { cat "$WORK/err"; fail "timeout: the message does not say so"; }
! grep -qF -e "$BAD" -e "$TOKEN" "$WORK/out" "$WORK/err" || fail "timeout: a secret in the message"
ok "timeout: $(tail -1 "$WORK/err")"

# 5. the helper the shim spawns: no secret in its argv (a wrapper records it, then runs the real helper)
cat >"$WORK/helper.sh" <<WRAP
#!/bin/sh
printf '%s\n' "\$*" >>"$WORK/argv.log"
exec "$HFS3_BIN" "\$@"
WRAP
chmod +x "$WORK/helper.sh"
unset RCLONE_CONFIG_SEC_SESSION_TOKEN
export RCLONE_CONFIG_SEC_SECRET_ACCESS_KEY=S3RVER
# once without the prefetcher (which may fetch a small file before the open's own _get would), once with it
for pf in 0 1; do
  HFS3_PREFETCH=$pf HFS3_HELPER=$WORK/helper.sh HFS3_MANIFEST_TTL=0 HFS3_CACHE_DIR=$WORK/cache2-$pf \
    HFS3_MOUNTS="$WORK/mnt=sec:models/m" LD_PRELOAD=$HFS3_SHIM cat "$WORK/mnt/config.json" "$WORK/mnt/tokenizer.json" \
    >"$WORK/both" || fail "cat through the shim"
  cat "$WORK/m/config.json" "$WORK/m/tokenizer.json" | cmp -s - "$WORK/both" || fail "reading through the shim with the wrapper"
done
for k in _index _get _prefetch; do
  grep -q "^$k " "$WORK/argv.log" || { cat "$WORK/argv.log"; fail "the wrapper saw no $k"; }
done
! grep -qF -e S3RVER -e "$BAD" -e "$TOKEN" "$WORK/argv.log" || fail "a secret on the helper's command line"
ok "the shim runs the helper with: $(sort -u "$WORK/argv.log" | cut -d' ' -f1 | sort -u | tr '\n' ' ')— no secret"

# 6. an rclone connection string in HFS3_MOUNTS (name,secret_access_key=...:bucket/p): the shim refuses the mount
# with the helper's message, never starts a helper with it (every local user can read /proc/PID/cmdline) and
# logs no secret, at HFS3_LOG=debug too. The wrapper also looks at every process's command line while it runs.
cat >"$WORK/helper6.sh" <<WRAP
#!/bin/sh
printf '%s\n' "\$*" >>"$WORK/argv6.log"
grep -lF "$BAD" /proc/[0-9]*/cmdline >>"$WORK/cmdline6.log" 2>/dev/null
exec "$HFS3_BIN" "\$@"
WRAP
chmod +x "$WORK/helper6.sh"
: >"$WORK/argv6.log"
: >"$WORK/cmdline6.log"
# rclone's on-the-fly backend spelling (:s3,key=value:bucket/p) is a connection string too
for cs in "sec,secret_access_key=$BAD,access_key_id=S3RVER" ":s3,secret_access_key=$BAD,access_key_id=S3RVER"; do
for f in config.json sub/x; do
  rc=0
  HFS3_LOG=debug HFS3_HELPER=$WORK/helper6.sh HFS3_CACHE_DIR=$WORK/cache6 \
    HFS3_MOUNTS="$WORK/mnt6=$cs:models/m" \
    LD_PRELOAD=$HFS3_SHIM cat "$WORK/mnt6/$f" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ $rc != 0 ] || fail "a connection-string mount was served"
  grep -qF "REMOTE '${cs%%,*},...': rclone connection-string remotes are not supported" "$WORK/err" ||
    { cat "$WORK/err"; fail "connection string in HFS3_MOUNTS: the helper's message"; }
  ! grep -qF "$BAD" "$WORK/err" "$WORK/out" || fail "connection string in HFS3_MOUNTS: the secret in the log"
done
done
[ ! -s "$WORK/argv6.log" ] || { cat "$WORK/argv6.log"; fail "the shim started a helper for a connection string"; }
[ ! -s "$WORK/cmdline6.log" ] || fail "the secret on a command line: $(cat "$WORK/cmdline6.log")"
! grep -rqF "$BAD" "$WORK/cache6" 2>/dev/null || fail "the secret in the cache"
ok "a connection string in HFS3_MOUNTS: refused by the shim, no helper, no secret in argv or log: $(head -c 160 "$WORK/err")"
echo "all ok"
