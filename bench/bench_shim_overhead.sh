#!/usr/bin/env bash
# The shim's cost per stat(): outside its mounts (an existing file; missing ones, which the shim double-checks
# for real symlinks into mounts, docs/performance.md) and inside one (answered from the index, then st_blocks from an
# lstat of the cached copy: blobs/<sha>, and this mount's cblobs/<sha> when that is missing; issue 33 item 6), a file
# not cached and one cached, against plain libc in the same run.
set -euo pipefail
BUILD=${BUILD:-build}
loop=$PWD/$BUILD/tools/statloop
[ -x "$loop" ] || make -s --no-print-directory "$loop" BUILD="$BUILD"
export HFS3_MOUNTS=/models/bench=s3test:models/bench HFS3_CACHE_DIR=$WORK/overhead-cache HFS3_HELPER=$HFS3_BIN
mkdir -p "$WORK/d1/d2/d3/d4/d5"
exist=$WORK/model/config.json deep=$WORK/d1/d2/d3/d4/d5/missing.py missing=$WORK/model/sub/dir/missing.json
mounted=/models/bench/config.json cached=/models/bench/generation_config.json
LD_PRELOAD=$HFS3_SHIM ls /models/bench >/dev/null   # load the mount's index once
# and cache one file in blobs/ (flushed before install: no cblobs/ copy waiting for the flush); config.json stays
# uncached
HFS3_DURABLE=sync LD_PRELOAD=$HFS3_SHIM cat "$cached" >/dev/null
# 5 interleaved rounds (plain, shim, floor), each loop 100000 calls: the median of each, and of the per-round ratios
n=100000 rounds=${BENCH_STAT_ROUNDS:-5}
: >"$WORK/stat.rounds"
for _ in $(seq 1 "$rounds"); do
  { echo "plain $(env -u HFS3_MOUNTS "$loop" $n "$exist" "$deep" "$missing" "$exist" "$exist" | awk '{printf " %s", $2}')"
    echo "shim $(LD_PRELOAD=$HFS3_SHIM "$loop" $n "$exist" "$deep" "$missing" "$mounted" "$cached" | awk '{printf " %s", $2}')"
    # the floor of a failing stat outside the mounts: the stat and the shim's one check (openat2), no shim
    echo "floor $(env -u HFS3_MOUNTS "$loop" -c $n "$exist" "$deep" "$missing" | awk '{printf " %s", $2}')"
  } >>"$WORK/stat.rounds"
done
python3 - "$WORK/stat.rounds" <<'PY'
import statistics, sys
R = {"plain": [], "shim": [], "floor": []}
for line in open(sys.argv[1]):
    k, *v = line.split()
    R[k].append([int(x) for x in v])
med = lambda xs: int(statistics.median(xs))
p, s, f = ([med(col) for col in zip(*R[k])] for k in ("plain", "shim", "floor"))
ratio = lambda a, b, i: statistics.median(y[i] / x[i] for x, y in zip(R[a], R[b]))
print("\nstat() cost, ns per call, median of %d interleaved rounds (plain libc vs under LD_PRELOAD=libhfs3shim.so with"
      % len(R["plain"]))
print("a mount configured; floor: the stat and then the shim's check of a failed call, openat2(RESOLVE_NO_SYMLINKS)")
print("of the same path, no shim; ratios: median of the per-round ratios)")
print(f"{'path':48} {'plain':>7} {'shim':>7} {'ratio':>7} {'floor':>7} {'ratio':>7}")
for i, name in enumerate(["existing file outside the mounts", "missing file in an existing directory, 8 deep",
                          "missing file under missing directories", "file in a mount, not cached, vs local file",
                          "file in a mount, cached, vs local file"]):
    fl = f"{f[i]:7d} {ratio('plain', 'floor', i):6.2f}x" if 0 < i < 3 else ""
    print(f"{name:48} {p[i]:7d} {s[i]:7d} {ratio('plain', 'shim', i):6.2f}x {fl}")
PY

# Instructions the shim adds per stat()+open()+close() of an existing file outside the mounts, and per failing
# stat() of a missing one: callgrind's total at two loop lengths, the slope, with and without the shim (counted,
# not timed: the difference is smaller than the machine's noise).
cl=$PWD/$BUILD/tools/callloop
[ -x "$cl" ] || make -s --no-print-directory "$cl" BUILD="$BUILD"
if command -v valgrind >/dev/null; then
  ir() {  # KIND PATH N [shim]
    local out=$WORK/cg.out
    if [ -n "${4:-}" ]; then LD_PRELOAD=$HFS3_SHIM valgrind --tool=callgrind --callgrind-out-file="$out" "$cl" "$3" "$1" "$2" >/dev/null 2>&1
    else env -u HFS3_MOUNTS valgrind --tool=callgrind --callgrind-out-file="$out" "$cl" "$3" "$1" "$2" >/dev/null 2>&1; fi
    awk '/^(summary|totals):/{print $2; exit}' "$out"
  }
  slope() { echo $(( ($(ir "$1" "$2" 11000 ${3:-}) - $(ir "$1" "$2" 1000 ${3:-})) / 10000 )); }
  echo
  echo "instructions per iteration (callgrind, slope between 1000 and 11000 iterations)"
  printf '%-58s %7s %7s %7s\n' "loop" plain shim added
  # (not the failing stat: valgrind 3.19 answers openat2 with ENOSYS, so under it the shim walks instead)
  for k in "pair $exist stat()+open()+close(), existing file outside the mounts"; do
    set -- $k; kind=$1 path=$2; shift 2
    a=$(slope "$kind" "$path"); b=$(slope "$kind" "$path" shim)
    printf '%-58s %7d %7d %7d\n' "$*" "$a" "$b" $((b - a))
  done
fi
