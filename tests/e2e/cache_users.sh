# cache_users.sh - sourced by the tests that act as two real users of one shared cache (t_cache_deny.sh,
# t_cache_sparse.sh): the victim A (uid 64101) and the member B (64102), both in group G (64100), with the S3
# test server started and its rclone config and $WORK/home readable by both. Needs root and setpriv (exits 77
# with "SKIP: ..." otherwise); call cache_users_start after lib.sh and fetch_lib.sh are sourced. Gives:
#   as UID CMD...   CMD as that uid, group G only, umask 077, HOME=$WORK/home
#   runA ARGS...    A's $HFS3_BIN ARGS: exit status in $st, stdout in $WORK/out, stderr in $WORK/err
# CLEANUP (optional): a command run before the S3 server stops, at exit.
A=64101 B=64102 G=64100

cache_users_exit() {
  if [ -n "${CLEANUP:-}" ]; then eval "$CLEANUP" || true; fi
  s3env_stop
}

cache_users_start() {
  [ "$(id -u)" = 0 ] || skip_test root "needs root (to act as two users)"
  command -v setpriv >/dev/null || skip_test setpriv "needs setpriv"
  s3env_start "$WORK"
  trap cache_users_exit EXIT
  chmod 0755 "$WORK" "$WORK/home"
  chmod 0644 "$RCLONE_CONFIG"
}

as() {
  local uid=$1; shift
  setpriv --reuid="$uid" --regid="$G" --clear-groups env HOME="$WORK/home" bash -c 'umask 077; exec "$@"' as "$@"
}
runA() { set +e; as "$A" "$HFS3_BIN" "$@" >"$WORK/out" 2>"$WORK/err"; st=$?; set -e; }
