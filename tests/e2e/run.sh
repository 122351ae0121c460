#!/usr/bin/env bash
# run.sh - the end-to-end suite: each tests/e2e/t_*.sh runs in its own work dir with its own S3 server
# (scripts/s3env.sh). A test prints "ok ..." / "not ok ..." lines; exit status decides.
set -u
shopt -s nullglob
cd "$(dirname "$0")/../.."
export HFS3_ROOT=$PWD BUILD=${BUILD:-build}
export HFS3_BIN=$PWD/$BUILD/bin/hfs3-manifest HFS3_SHIM=$PWD/$BUILD/lib/libhfs3shim.so
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
