#!/usr/bin/env bash
# t_heal_remote.sh - REMOTEs the helper refuses before any request (issue 7 §2): '.' and '..' segments
# (signed for one path, sent or resolved as another) and rclone connection strings (their secrets must not
# be repeated on stderr, in the cache's error files or in any later message).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT
fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
export HFS3_CACHE_DIR=$WORK/cache

for spec in s3test:models/zz/../m1 s3test:models/./m1 s3://models/zz/../m1; do
  for cmd in fetch build show; do
    expect_exit 2 "$cmd $spec" "$HFS3_BIN" $cmd "$spec"
    one_line "$WORK/err"
    grep -q "segment, which is not supported" "$WORK/err" || { cat "$WORK/err"; fail "$cmd $spec: message"; }
  done
  expect_exit 2 "_index $spec" "$HFS3_BIN" _index "$spec"
done
ok "dot segments refused: $(cat "$WORK/err")"

SECRET=TopSecretValue8x7
for spec in "s3test,secret_access_key=$SECRET:models/m1" "s3test,secret_access_key=$SECRET"; do
  for cmd in fetch show "build --dry-run"; do
    set +e; HFS3_LOG=debug "$HFS3_BIN" $cmd "$spec" >"$WORK/out" 2>"$WORK/err"; rc=$?; set -e
    [ "$rc" = 2 ] || { cat "$WORK/err"; fail "$cmd: exit $rc for a connection string"; }
    grep -q "REMOTE 's3test,...': rclone connection-string remotes are not supported" "$WORK/err" || { cat "$WORK/err"; fail "$cmd: message"; }
    ! grep -q "$SECRET" "$WORK/out" "$WORK/err" || fail "$cmd: the secret was repeated"
  done
  set +e; "$HFS3_BIN" _index "$spec" >"$WORK/out" 2>"$WORK/err"; set -e
  ! grep -q "$SECRET" "$WORK/out" "$WORK/err" || fail "_index: the secret was repeated"
done
! grep -rq "$SECRET" "$HFS3_CACHE_DIR" 2>/dev/null || fail "the secret is in the cache: $(grep -rl "$SECRET" "$HFS3_CACHE_DIR")"
ok "connection strings refused without the secret: $(tail -1 "$WORK/err")"
echo "all ok"
