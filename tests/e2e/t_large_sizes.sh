#!/usr/bin/env bash
# t_large_sizes.sh - sizes past 32 bits survive every layer without the bytes existing: a manifest whose files
# are 2^31+1, 2^32+1 and 5 GiB+3 bytes (stat answers from the index, so no such file is ever stored) is
#   1. installed offline with tests/tools/mkindex, and the shim's stat, lstat, statx (coreutils stat, ls),
#      fstatat (du, find), fstat of an O_PATH descriptor and os.scandir report each size exactly, also
#      through a symlink;
#   2. stored in the bucket, read back by `show` (tree and JSON) and installed by the real helper's `_index`,
#      whose index the shim then answers from, with the same sizes.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT
S31=$(( (1 << 31) + 1 )) S32=$(( (1 << 32) + 1 )) S5G=$(( (5 << 30) + 3 ))
cat >"$WORK/big.json" <<JSON
{"hfs3_manifest": 1, "layout": "flat", "generator": "t_large_sizes", "entries": [
 {"path": "a-2g.bin", "type": "file", "size": $S31, "sha256": "$(printf 'a%.0s' $(seq 64))", "mtime": 1764496800},
 {"path": "b-4g.bin", "type": "file", "size": $S32, "sha256": "$(printf 'b%.0s' $(seq 64))", "mtime": 1764496800},
 {"path": "big", "type": "dir"},
 {"path": "big/model-5g.safetensors", "type": "file", "size": $S5G, "sha256": "$(printf 'c%.0s' $(seq 64))", "mtime": 1764496800},
 {"path": "link.safetensors", "type": "symlink", "target": "big/model-5g.safetensors"}
]}
JSON

# check_sizes MOUNT: every way of asking for a size, through the shim
check_sizes() {
  local M=$1 how=$2
  P() { LD_PRELOAD=$HFS3_SHIM "$@"; }
  [ "$(P stat -c %s "$M/a-2g.bin")" = $S31 ] || fail "$how: stat -c %s of a 2 GiB+1 file: $(P stat -c %s "$M/a-2g.bin")"
  [ "$(P stat -c %s "$M/b-4g.bin")" = $S32 ] || fail "$how: stat -c %s of a 4 GiB+1 file: $(P stat -c %s "$M/b-4g.bin")"
  [ "$(P stat -c %s "$M/big/model-5g.safetensors")" = $S5G ] || fail "$how: stat -c %s of a 5 GiB file"
  [ "$(P stat -L -c %s "$M/link.safetensors")" = $S5G ] || fail "$how: stat -L through a symlink"
  [ "$(P ls -l "$M/big/model-5g.safetensors" | awk '{print $5}')" = $S5G ] || fail "$how: ls -l"
  [ "$(P du -b --apparent-size "$M/big" | cut -f1)" -ge $S5G ] || fail "$how: du -b"
  [ "$(P find "$M" -size +5242880k -type f)" = "$M/big/model-5g.safetensors" ] || fail "$how: find -size"
  P python3 - "$M" "$S31" "$S32" "$S5G" <<'PY' || fail "$how: Python's stat family"
import os, sys
m, s31, s32, s5g = sys.argv[1], *map(int, sys.argv[2:5])
want = {"a-2g.bin": s31, "b-4g.bin": s32, "big/model-5g.safetensors": s5g}
bad = []
for p, n in want.items():
    full = os.path.join(m, p)
    for what, got in [("stat", os.stat(full).st_size), ("lstat", os.lstat(full).st_size),
                      ("getsize", os.path.getsize(full))]:
        if got != n:
            bad.append(f"{what} {p}: {got} != {n}")
    fd = os.open(full, os.O_PATH)
    if os.fstat(fd).st_size != n:
        bad.append(f"fstat(O_PATH) {p}: {os.fstat(fd).st_size} != {n}")
    os.close(fd)
    if os.stat(os.path.basename(p), dir_fd=os.open(os.path.dirname(full), os.O_RDONLY | os.O_DIRECTORY)).st_size != n:
        bad.append(f"fstatat {p}")
if os.stat(os.path.join(m, "link.safetensors")).st_size != s5g:
    bad.append("stat through the symlink")
with os.scandir(os.path.join(m, "big")) as it:
    sizes = {e.name: e.stat().st_size for e in it}
if sizes != {"model-5g.safetensors": s5g}:
    bad.append(f"scandir: {sizes}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY
}

# 1. offline, from an index mkindex installed
export HFS3_CACHE_DIR=$WORK/cache HFS3_OFFLINE=1
"$HFS3_ROOT/$BUILD/tools/mkindex" "$WORK/big.json" "$HFS3_CACHE_DIR" s3test:models/big || fail "mkindex"
HFS3_MOUNTS="$WORK/mnt=s3test:models/big" check_sizes "$WORK/mnt" "mkindex, offline"
ok "offline index: stat/lstat/statx/fstatat/fstat(O_PATH)/scandir/du/find/ls report 2^31+1, 2^32+1, 5 GiB+3"

# 2. through the bucket and the real helper
unset HFS3_OFFLINE
rclone copyto "$WORK/big.json" s3test:models/big/.hfs3/manifest.json || fail "upload manifest"
"$HFS3_BIN" show s3test:models/big >"$WORK/tree" || fail "show"
grep -q "model-5g.safetensors  (5.0 GiB)" "$WORK/tree" || { cat "$WORK/tree"; fail "show: 5 GiB"; }
grep -q "b-4g.bin  (4.0 GiB)" "$WORK/tree" || { cat "$WORK/tree"; fail "show: 4 GiB"; }
"$HFS3_BIN" show --json s3test:models/big >"$WORK/shown.json" || fail "show --json"
python3 - "$WORK/shown.json" "$S31" "$S32" "$S5G" <<'PY' || fail "show --json sizes"
import json, sys
d = json.load(open(sys.argv[1]))
got = sorted(e["size"] for e in d["entries"] if e["type"] == "file")
if got != sorted(map(int, sys.argv[2:5])):
    sys.exit(f"sizes {got}")
PY
export HFS3_CACHE_DIR=$WORK/cache2
"$HFS3_BIN" _index s3test:models/big || fail "_index"
HFS3_HELPER=$HFS3_BIN HFS3_MOUNTS="$WORK/mnt2=s3test:models/big" check_sizes "$WORK/mnt2" "helper's _index"
ok "stored manifest: show, show --json and the helper's index keep 2^31+1, 2^32+1, 5 GiB+3"
echo "all ok"
