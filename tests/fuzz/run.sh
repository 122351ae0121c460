#!/usr/bin/env bash
# run.sh - runs the libFuzzer targets that `make fuzz-build` built into ${BUILD:-build}/fuzz/ (clang, ASan + UBSan +
# libFuzzer, each linked against the whole library) for FUZZ_SECONDS each (default 60) over a working copy of its
# seed corpus (tests/fuzz/corpus/<name>; new inputs go to ${BUILD}/fuzz/corpus/<name>, the seeds are never touched).
# FUZZ_ONLY=substr selects targets; FUZZ_JOBS=n runs n workers per target (default 1: the machine is shared).
# Every tests/fuzz/fuzz_<name>.c is a target. Exits non-zero when a target is missing or finds a crash, leak or UB
# (the reproducer is kept in ${BUILD}/fuzz/artifacts/<name>/); prints "ok: fuzz_<name>" for each that ran clean.
# Run from the repository root (`make fuzz`; `make test` runs each for a few seconds through tests/e2e/t_fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-1}
OUT="$BUILD/fuzz"
NAMES=()
for f in tests/fuzz/fuzz_*.c; do
    n=${f#tests/fuzz/fuzz_}
    NAMES+=("${n%.c}")
done

fail=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for n in "${NAMES[@]}"; do
    [[ -n "${FUZZ_ONLY:-}" && "$n" != *"$FUZZ_ONLY"* ]] && continue
    bin="$OUT/fuzz_$n"
    if [[ ! -x "$bin" ]]; then
        echo "FAIL: $bin is not built (make fuzz-build)" >&2
        fail=1
        continue
    fi
    work="$OUT/corpus/$n"
    art="$OUT/artifacts/$n/"
    mkdir -p "$work" "$art"
    dict=()
    [[ -f "tests/fuzz/$n.dict" ]] && dict=(-dict="tests/fuzz/$n.dict")
    echo "== run $n for ${FUZZ_SECONDS}s"
    jobs=()
    [[ "$FUZZ_JOBS" -gt 1 ]] && jobs=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS")
    set +e
    "$bin" "${dict[@]}" "${jobs[@]}" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$art" "$work" "tests/fuzz/corpus/$n" \
        >"$OUT/$n.log" 2>&1
    rc=$?
    set -e
    grep -E '^#[0-9]+[[:space:]].*cov:' "$OUT/$n.log" | tail -n 1 || true
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|ERROR|SUMMARY|runtime error' "$OUT/$n.log" || true
    if [[ $rc -ne 0 ]] || [[ -n "$(ls -A "$art")" ]]; then
        echo "FAIL: fuzz_$n found a problem (exit $rc); see $OUT/$n.log and $art" >&2
        fail=1
    else
        echo "ok: fuzz_$n"
    fi
done
exit $fail
