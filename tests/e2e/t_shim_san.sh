#!/usr/bin/env bash
# t_shim_san.sh - the shim built with ASan + UBSan (make's build/lib-san/libhfs3shim.so) under the
# kernel-differential tests (issue 22): t_shim_kernel (kexact's ~150 operations) and t_shim_kfuzz (the seeded
# random differential fuzz), each once, with HFS3_SHIM set to the sanitized shim. ASan's runtime must come first in
# the initial library list, so LD_PRELOAD names it before the shim (the test programs are not built with ASan).
# A sanitizer report (stderr, exit status 99 from run.sh's ASAN_OPTIONS, UBSan halting) fails the test.
set -u
SAN=$HFS3_ROOT/$BUILD/lib-san/libhfs3shim.so
RT=$(${CC:-cc} -print-file-name=libasan.so)
[ -f "$SAN" ] || { echo "not ok the sanitized shim $SAN is built (make e2e-build)"; exit 1; }
case $RT in /*) ;; *) echo "SKIP: the compiler has no ASan runtime (libasan.so)"; exit 77 ;; esac
fails=0
for t in t_shim_kernel t_shim_kfuzz; do
  mkdir -p "$WORK/$t"
  HFS3_SHIM="$RT $SAN" WORK=$WORK/$t bash "$HFS3_ROOT/tests/e2e/$t.sh" >"$WORK/$t.log" 2>&1
  rc=$?
  sed "s/^/$t: /" "$WORK/$t.log"
  if [ $rc = 77 ]; then
    echo "SKIP $t: $(grep -m1 '^SKIP' "$WORK/$t.log" | sed 's/^SKIP[^:]*: //')"
  elif [ $rc != 0 ]; then
    echo "not ok $t through the sanitized shim (exit $rc)"; fails=$((fails + 1))
  else
    echo "ok $t through the sanitized shim"
  fi
  reports=$(grep -rl -e 'ERROR: AddressSanitizer' -e 'ERROR: LeakSanitizer' -e 'runtime error:' "$WORK/$t" "$WORK/$t.log" 2>/dev/null)
  if [ -n "$reports" ]; then
    echo "not ok $t: sanitizer reports in: $reports"; fails=$((fails + 1))
    grep -h -A15 -e 'ERROR: AddressSanitizer' -e 'ERROR: LeakSanitizer' -e 'runtime error:' $reports | head -40
  else
    echo "ok $t: no sanitizer report"
  fi
done
exit $((fails > 0))
