#!/usr/bin/env bash
# run.sh - builds the libFuzzer targets in tests/fuzz/ (clang, ASan + UBSan + libFuzzer) into
# ${BUILD:-build}/fuzz/ and runs each for FUZZ_SECONDS (default 60) over a working copy of its seed corpus
# (tests/fuzz/corpus/<name>; new inputs go to ${BUILD}/fuzz/corpus/<name>, the seeds are never touched).
# FUZZ_ONLY=substr selects targets; FUZZ_JOBS=n runs n workers per target (default 1: the machine is shared).
# Exits non-zero when a build fails or a target finds a crash, leak or UB (the reproducer is kept in
# ${BUILD}/fuzz/artifacts/<name>/). Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-1}
CLANG=${CLANG:-clang}
OUT="$BUILD/fuzz"
CFLAGS=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
        -std=c11 -Iinclude -D_GNU_SOURCE -DHFS3_VERSION='"0.1.0"' -Wall -Wextra -Wno-unused-parameter)
LIBS=(-lcurl -lcrypto -lcjson -lexpat -lpthread)

# target name, its sources under lib/ (util.c and log.c are always linked)
declare -A SRC=(
    [manifest]="lib/manifest.c"
    [s3xml]="lib/s3xml.c"
    [sigv4]="lib/sigv4.c"
    [config]="lib/config.c lib/creds.c lib/credsrc.c lib/sigv4.c lib/s3xml.c"
)
NAMES=(manifest s3xml sigv4 config)

mkdir -p "$OUT"
fail=0
for n in "${NAMES[@]}"; do
    [[ -n "${FUZZ_ONLY:-}" && "$n" != *"$FUZZ_ONLY"* ]] && continue
    bin="$OUT/fuzz_$n"
    echo "== build $bin"
    # shellcheck disable=SC2086
    "$CLANG" "${CFLAGS[@]}" -o "$bin" "tests/fuzz/fuzz_$n.c" ${SRC[$n]} lib/util.c lib/log.c "${LIBS[@]}"
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for n in "${NAMES[@]}"; do
    [[ -n "${FUZZ_ONLY:-}" && "$n" != *"$FUZZ_ONLY"* ]] && continue
    bin="$OUT/fuzz_$n"
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
