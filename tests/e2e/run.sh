#!/usr/bin/env bash
# run.sh - the end-to-end suite: each tests/e2e/t_*.sh runs in its own work dir with its own S3 server
# (scripts/s3env.sh). A test prints "ok ..." / "not ok ..." lines; exit status decides.
set -u
shopt -s nullglob
cd "$(dirname "$0")/../.."
export HFS3_ROOT=$PWD BUILD=${BUILD:-build}
# the helper under test is the sanitized build (E2E_PLAIN_HELPER=1 takes the plain one)
if [ -n "${E2E_PLAIN_HELPER:-}" ]; then export HFS3_BIN=$PWD/$BUILD/bin/hfs3-manifest
else export HFS3_BIN=$PWD/$BUILD/bin-san/hfs3-manifest; fi
export HFS3_SHIM=$PWD/$BUILD/lib/libhfs3shim.so
# leaks and UB in the helper fail the test that ran it; reports go to stderr, which the tests capture
export ASAN_OPTIONS=detect_leaks=1:exitcode=99 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
pass=0 fail=0
only=${E2E_ONLY:-}
for t in tests/e2e/t_*.sh; do
  name=$(basename "$t" .sh)
  if [ -n "$only" ] && [[ "$name" != *$only* ]]; then continue; fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/hfs3-e2e-$name.XXXXXX")
  start=$(date +%s)
  if WORK=$work bash "$t" >"$work/log" 2>&1; then
    pass=$((pass + 1)); echo "ok   $name ($(( $(date +%s) - start ))s)"; rm -rf "$work"
  else
    fail=$((fail + 1)); echo "FAIL $name ($(( $(date +%s) - start ))s), log $work/log:"; tail -40 "$work/log" | sed 's/^/    /'
  fi
done
echo "e2e: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
