#!/usr/bin/env bash
# t_shim_magic.sh - paths the kernel answers through its magic links, and raw opens by syscall() (issue 41 item 6):
# /proc/self/cwd/x, /proc/thread-self/cwd/x, /proc/PID/cwd/x, /proc/self/task/TID/cwd/x, /proc/self/fd/N/x,
# /dev/fd/N/x and /proc/PID/fd/N/x (N a directory descriptor of a mount), their listings, stat, lstat, readlink and
# realpath, readlink of a file's descriptor (onnxruntime checks where its external data lives), a relative spelling
# from /proc/self, and raw openat2 (onnx.load's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and openat through libc's
# syscall() under every resolve flag: the shim's transcript (shim_magic.py) equals the same tree's as a local
# folder; raw writes answer EROFS.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
SRC=$WORK/fx/src/flat
python3 "$HFS3_ROOT/tests/e2e/shim_magic.py" "$SRC" >"$WORK/local.out" 2>&1 || { cat "$WORK/local.out"; echo "not ok the local run"; exit 1; }
skel=$(dirname "$(ls -d "$HFS3_CACHE_DIR"/mounts/*/tree/dir/deeper | head -1)")   # the flat mount's tree/dir
shim python3 "$HFS3_ROOT/tests/e2e/shim_magic.py" "$M/flat" "$skel" >"$WORK/shim.out" 2>&1
shim_check "the transcript has $(wc -l <"$WORK/local.out") lines" test "$(wc -l <"$WORK/local.out")" -ge 200
# the mount's own lines: raw writes into it are refused as on a read-only mount
cat "$WORK/local.out" - >"$WORK/want.out" <<'W'
openat2(D, a.txt, O_WRONLY): EEROFS
openat2(D, new, O_CREAT): EEROFS
openat(D, new, O_CREAT): EEROFS
openat2(skeleton/new, O_CREAT): EEROFS
W
diff "$WORK/want.out" "$WORK/shim.out" >"$WORK/diff.out" && echo "differences: none" || head -40 "$WORK/diff.out"
shim_check "the mount through /proc, /dev/fd and syscall() answers as the local folder" cmp -s "$WORK/want.out" "$WORK/shim.out"
shim_check "nothing was created in the cache's skeleton" test -z "$(find "$HFS3_CACHE_DIR/mounts" -name new)"

# directories and symlinks: a time from the manifest, never the index's install (find -newer, tar, cp -a). The flat
# fixture with files of different times, installed into two caches; the first one's skeleton and index set back
# to 2001 as an install made long before: both answer the same, the newest file's time below each directory
python3 - "$WORK/fx/flat.json" >"$WORK/fx/times.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
t = {"a.txt": 1700000300, "dir/b.bin": 1700000100, "dir/deeper/c.txt": 1700000020, "empty": 1700000050,
     "same.txt": 1700000010}
for e in m["entries"]:
    if e["type"] == "file":
        e["mtime"] = t[e["path"]]
print(json.dumps(m))
PY
for c in A B; do
  "$MK" "$WORK/fx/times.json" "$WORK/cache$c" s3test:models/times "$SRC" >/dev/null || { echo "not ok mkindex"; exit 1; }
  [ $c = A ] && find "$WORK/cacheA/mounts" -exec touch -h -d @1000000000 {} +
  HFS3_CACHE_DIR=$WORK/cache$c HFS3_MOUNTS="$M/times=s3test:models/times" shim python3 -c '
import os, subprocess, sys
m = sys.argv[1]
st = lambda p: int(os.lstat(m + p).st_mtime)
fd = os.open(m + "/dir", os.O_RDONLY | os.O_DIRECTORY)
print(st(""), st("/dir"), st("/dir/deeper"), st("/dirlink"), st("/link-to-a"), st("/dir/up"), int(os.fstat(fd).st_mtime),
      int(os.stat(m + "/dirlink").st_mtime), int(os.stat("/proc/self/fd/%d" % fd).st_mtime))
print(" ".join(sorted(os.path.relpath(p, m) for p in subprocess.run(["find", m, "-newer", m + "/dir/b.bin"],
      capture_output=True, text=True).stdout.split())))' "$M/times" >"$WORK/times$c.out" 2>&1
done
cat "$WORK/timesA.out"
want="1700000300 1700000100 1700000020 1700000300 1700000300 1700000100 1700000100 1700000100 1700000100
. a.txt dirlink link-to-a"
shim_check "directory and symlink times from the manifest (newest file below), not the install's" \
  test "$(cat "$WORK/timesA.out")" = "$want"
shim_check "two installs of the same manifest answer the same times" cmp -s "$WORK/timesA.out" "$WORK/timesB.out"
exit $((SHIM_FAILS > 0))
