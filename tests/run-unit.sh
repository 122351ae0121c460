#!/usr/bin/env bash
# run-unit.sh - runs each unit test binary given; prints one closing line for all of them.
set -u
pass=0 fail=0
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -1)
  p=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p'); f=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
  p=${p:-0}; f=${f:-0}
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  # a test binary that checked nothing (no closing line, or 0 passed) passes nothing
  if [ $rc -eq 0 ] && [ "$p" -eq 0 ]; then rc=1; f=1; out="$out
no checks ran (no \"N passed\" line, or 0 passed)"; fi
  pass=$((pass + p)); fail=$((fail + f))
  if [ $rc -ne 0 ]; then printf '%s\n' "$out" | tail -30; echo "FAILED: $t (exit $rc)"; else echo "ok   $t ($p checks)"; fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
