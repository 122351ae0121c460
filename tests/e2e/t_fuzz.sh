#!/usr/bin/env bash
# t_fuzz.sh - every libFuzzer target (tests/fuzz/fuzz_*.c) builds and runs clean for a few seconds (FUZZ_SECONDS,
# default 4 each), so the targets cannot rot unnoticed; `make fuzz` does the long runs. Needs clang's libFuzzer
# (scripts/deps.sh installs clang and libclang-rt-dev).
set -euo pipefail
source "$HFS3_ROOT/tests/e2e/lib.sh"
cd "$HFS3_ROOT"
if ! command -v "${CLANG:-clang}" >/dev/null; then
  echo "SKIP fuzz: clang is not installed (scripts/deps.sh installs clang and libclang-rt-dev)"
  exit 77
fi
make -s --no-print-directory BUILD="$BUILD" fuzz-build >"$WORK/build.log" 2>&1 || { tail -20 "$WORK/build.log"; fail "make fuzz-build"; }
# every target is in what `make fuzz-build` builds (a binary left from an earlier build would hide one dropped
# from the Makefile's list: make's what-if of each source must rebuild its target)
for f in tests/fuzz/fuzz_*.c; do
  make -n --no-print-directory -W "$f" BUILD="$BUILD" fuzz-build 2>/dev/null | grep -qF "$f" ||
    fail "$(basename "$f" .c) is not built by make fuzz-build"
done
# a copy of the build's fuzz folder keeps the corpus growth and any reproducer out of the tree's build/
mkdir -p "$WORK/b/fuzz"
cp "$BUILD"/fuzz/fuzz_* "$WORK/b/fuzz/"
rc=0
BUILD=$WORK/b FUZZ_SECONDS=${FUZZ_SECONDS:-4} bash tests/fuzz/run.sh >"$WORK/fuzz.log" 2>&1 || rc=$?
cat "$WORK/fuzz.log"
[ $rc = 0 ] || fail "tests/fuzz/run.sh exited $rc"
n=0
for f in tests/fuzz/fuzz_*.c; do
  t=$(basename "$f" .c)
  grep -qx "ok: $t" "$WORK/fuzz.log" || fail "$t did not run clean"
  grep -q "^stat::number_of_executed_units: [1-9]" "$WORK/b/fuzz/${t#fuzz_}.log" || fail "$t ran no input"
  n=$((n + 1))
done
ok "$n fuzz targets built and ran clean for ${FUZZ_SECONDS:-4} s each"
echo "all ok"
