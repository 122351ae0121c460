#!/usr/bin/env bash
# The shim's cost per stat(): outside its mounts (an existing file; missing ones, which the shim double-checks
# for real symlinks into mounts, docs/performance.md) and inside one (answered from the index), against plain libc in
# the same run.
set -euo pipefail
BUILD=${BUILD:-build}
loop=$PWD/$BUILD/tools/statloop
[ -x "$loop" ] || make -s --no-print-directory "$loop" BUILD="$BUILD"
export HFS3_MOUNTS=/models/bench=s3test:models/bench HFS3_CACHE_DIR=$WORK/overhead-cache HFS3_HELPER=$HFS3_BIN
mkdir -p "$WORK/d1/d2/d3/d4/d5"
exist=$WORK/model/config.json deep=$WORK/d1/d2/d3/d4/d5/missing.py missing=$WORK/model/sub/dir/missing.json
mounted=/models/bench/config.json
LD_PRELOAD=$HFS3_SHIM ls /models/bench >/dev/null   # load the mount's index once
n=200000
plain=$(env -u HFS3_MOUNTS "$loop" $n "$exist" "$deep" "$missing" "$exist")
shim=$(LD_PRELOAD=$HFS3_SHIM "$loop" $n "$exist" "$deep" "$missing" "$mounted")
# the floor of a failing stat outside the mounts: the stat and the shim's one check (openat2), no shim
floor=$(env -u HFS3_MOUNTS "$loop" -c $n "$exist" "$deep" "$missing")
python3 - "$plain" "$shim" "$floor" <<'PY'
import sys
p, s, f = ([int(l.split()[1]) for l in a.splitlines()] for a in sys.argv[1:4])
print("\nstat() cost, ns per call (plain libc vs under LD_PRELOAD=libhfs3shim.so with a mount configured; floor:")
print("the stat and then the shim's check of a failed call, openat2(RESOLVE_NO_SYMLINKS) of the same path, no shim)")
print(f"{'path':48} {'plain':>7} {'shim':>7} {'ratio':>7} {'floor':>7} {'ratio':>7}")
for name, a, b, c in [("existing file outside the mounts", p[0], s[0], None),
                      ("missing file in an existing directory, 8 deep", p[1], s[1], f[1]),
                      ("missing file under missing directories", p[2], s[2], f[2]),
                      ("file in a mount (index) vs local file", p[3], s[3], None)]:
    fl = f"{c:7d} {c / a:6.2f}x" if c else ""
    print(f"{name:48} {a:7d} {b:7d} {b / a:6.2f}x {fl}")
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
