# lib.sh - helpers for the end-to-end tests: source it after s3env.sh.
fail() { echo "not ok: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
# expect_fail CODE DESCRIPTION CMD... : runs CMD, requires exit CODE; stdout+stderr in $WORK/out
expect_exit() {
  local want=$1 what=$2; shift 2
  set +e; "$@" >"$WORK/out" 2>"$WORK/err"; local rc=$?; set -e
  [ "$rc" = "$want" ] || { cat "$WORK/out" "$WORK/err" >&2; fail "$what: exit $rc, expected $want"; }
}
# one_line FILE: the file holds exactly one line
one_line() { [ "$(wc -l <"$1")" = 1 ] || { cat "$1" >&2; fail "expected one line in $1"; }; }
# skip_part ID REASON: this part of the test did not run here (run.sh counts and prints it; under CI=true or
# HFS3_REQUIRE_ALL=1 it fails unless tests/e2e/skip-allowed lists it). skip_test ID REASON: the whole test.
skip_part() { echo "SKIP $1: $2"; }
skip_test() { echo "SKIP $1: $2"; exit 77; }
# wait_flushed CACHE: until the detached flush (lib/durable.c) is done there: no record left in unflushed/ and no
# chunk-checked blob left to promote from a mount's cblobs/ (the record goes before the promotion's rename).
# (find, not ls: `ls -A` of two or more cblobs/ prints their names even when all are empty)
wait_flushed() {
  local c=$1
  for _ in $(seq 1 300); do
    [ -z "$(ls -A "$c/unflushed" 2>/dev/null)" ] &&
      [ -z "$(find "$c"/mounts/*/cblobs -mindepth 1 -maxdepth 1 -print -quit 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  fail "the detached flush did not finish in 30 s: $(ls "$c/unflushed" "$c"/mounts/*/cblobs 2>/dev/null | tr '\n' ' ')"
}
