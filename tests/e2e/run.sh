#!/usr/bin/env bash
# run.sh - the end-to-end suite: each tests/e2e/t_*.sh runs in its own work dir with its own S3 server
# (scripts/s3env.sh). A test prints "ok ..." / "not ok ..." lines; its exit status decides:
#   0 passed, 77 skipped as a whole (it could not run here: say why on a line "SKIP <id>: <reason>"),
#   anything else failed.
# A passing test that left out a part prints "SKIP <id>: <reason>" for it. Every skip (whole test or part) is
# counted and printed, and the closing line is "e2e: N passed, N failed, N skipped" (N skipped counts skipped
# tests and skipped parts).
# With CI=true or HFS3_REQUIRE_ALL=1 a skip is a failure unless tests/e2e/skip-allowed lists "<test> <id>"
# with a reason (a machine where that part cannot run, by design).
# E2E_ONLY=WORD[,WORD...] runs the tests whose name contains a word; E2E_EXACT=1 makes each word a full name.
set -u
shopt -s nullglob
cd "$(dirname "$0")/../.."
export HFS3_ROOT=$PWD BUILD=${BUILD:-build}
# the helper under test is the sanitized build (E2E_PLAIN_HELPER=1 takes the plain one)
if [ -n "${E2E_PLAIN_HELPER:-}" ]; then export HFS3_BIN=$PWD/$BUILD/bin/hfs3-manifest
else export HFS3_BIN=$PWD/$BUILD/bin-san/hfs3-manifest; fi
export HFS3_SHIM=$PWD/$BUILD/lib/libhfs3shim.so
# the project's Python with the real clients (requirements.txt, installed by scripts/deps.sh)
export HFS3_PY=${HFS3_PY:-$PWD/.venv/bin/python}
# started by hand (not from make): build what is tested first, or an edit since the last `make e2e` goes untested
if [ -z "${MAKELEVEL:-}" ]; then
  make -s --no-print-directory BUILD="$BUILD" e2e-build || { echo "e2e: the build failed" >&2; exit 1; }
fi
# leaks and UB in the helper fail the test that ran it; reports go to stderr, which the tests capture
export ASAN_OPTIONS=detect_leaks=1:exitcode=99 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Python checks must run: -O / PYTHONOPTIMIZE would remove every assert
unset PYTHONOPTIMIZE
require_all=0
if [ "${CI:-}" = true ] || [ "${HFS3_REQUIRE_ALL:-}" = 1 ]; then require_all=1; fi
allowed() {  # TEST ID: listed in tests/e2e/skip-allowed (lines "test id reason", # comments)
  grep -v '^[[:space:]]*#' tests/e2e/skip-allowed 2>/dev/null | awk -v t="$1" -v i="$2" '$1 == t && $2 == i && NF > 2 { f = 1 } END { exit !f }'
}
pass=0 fail=0 skip=0
only=${E2E_ONLY:-}
for t in tests/e2e/t_*.sh; do
  name=$(basename "$t" .sh)
  if [ -n "$only" ]; then
    hit=0
    for w in ${only//,/ }; do
      if [ -n "${E2E_EXACT:-}" ]; then [ "$name" = "$w" ] && hit=1
      else [[ "$name" == *"$w"* ]] && hit=1; fi
    done
    [ $hit = 1 ] || continue
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/hfs3-e2e-$name.XXXXXX")
  start=$(date +%s)
  WORK=$work bash "$t" >"$work/log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  # the skips this test reported: "SKIP <id>: <reason>" (a bare "SKIP: reason" has the test's name as id)
  skips=$(sed -n 's/^SKIP \([A-Za-z0-9_.-]*\): \(.*\)$/\1\t\2/p; s/^SKIP: \(.*\)$/'"$name"'\t\1/p' "$work/log")
  bad_skip=""
  if [ -n "$skips" ]; then
    while IFS=$'\t' read -r id why; do
      skip=$((skip + 1))
      echo "skip $name $id: $why"
      if [ $require_all = 1 ] && ! allowed "$name" "$id"; then bad_skip="$bad_skip $id"; fi
    done <<<"$skips"
  fi
  if [ $rc = 77 ] && [ -z "$skips" ]; then
    skip=$((skip + 1)); echo "skip $name: exit 77 without a SKIP line"
    [ $require_all = 1 ] && ! allowed "$name" "$name" && bad_skip="$bad_skip $name"
  fi
  if [ -n "$bad_skip" ]; then
    fail=$((fail + 1)); echo "FAIL $name (${secs}s): skipped${bad_skip} with CI=true/HFS3_REQUIRE_ALL=1 and not in tests/e2e/skip-allowed"
  elif [ $rc = 0 ]; then
    pass=$((pass + 1)); echo "ok   $name (${secs}s)"; rm -rf "$work"
  elif [ $rc = 77 ]; then
    rm -rf "$work"
  else
    fail=$((fail + 1)); echo "FAIL $name (${secs}s), log $work/log:"; tail -40 "$work/log" | sed 's/^/    /'
  fi
done
# E2E_ONLY that matches nothing ran nothing: that is not a pass
if [ -n "$only" ] && [ $((pass + fail + skip)) -eq 0 ]; then echo "FAIL E2E_ONLY=$only matches no test"; fail=1; fi
echo "e2e: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
