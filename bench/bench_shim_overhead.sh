#!/usr/bin/env bash
# The shim's cost per stat(): outside its mounts (an existing file; missing ones, which the shim double-checks
# for real symlinks into mounts, README "Performance") and inside one (answered from the index), against plain libc in
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
python3 - "$plain" "$shim" <<'PY'
import sys
p = [int(l.split()[1]) for l in sys.argv[1].splitlines()]
s = [int(l.split()[1]) for l in sys.argv[2].splitlines()]
print("\nstat() cost, ns per call (plain libc vs under LD_PRELOAD=libhfs3shim.so with a mount configured)")
print(f"{'path':48} {'plain':>7} {'shim':>7} {'ratio':>7}")
for name, a, b in [("existing file outside the mounts", p[0], s[0]),
                   ("missing file in an existing directory, 8 deep", p[1], s[1]),
                   ("missing file under missing directories", p[2], s[2]),
                   ("file in a mount (index) vs local file", p[3], s[3])]:
    print(f"{name:48} {a:7d} {b:7d} {b / a:6.2f}x")
PY
