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
shim python3 "$HFS3_ROOT/tests/e2e/shim_magic.py" "$M/flat" w >"$WORK/shim.out" 2>&1
shim_check "the transcript has $(wc -l <"$WORK/local.out") lines" test "$(wc -l <"$WORK/local.out")" -ge 200
# the mount's own lines: raw writes into it are refused as on a read-only mount
cat "$WORK/local.out" - >"$WORK/want.out" <<'W'
openat2(D, a.txt, O_WRONLY): EEROFS
openat2(D, new, O_CREAT): EEROFS
openat(D, new, O_CREAT): EEROFS
W
diff "$WORK/want.out" "$WORK/shim.out" >"$WORK/diff.out" && echo "differences: none" || head -40 "$WORK/diff.out"
shim_check "the mount through /proc, /dev/fd and syscall() answers as the local folder" cmp -s "$WORK/want.out" "$WORK/shim.out"
shim_check "nothing was created in the cache's skeleton" test -z "$(find "$HFS3_CACHE_DIR/mounts" -name new)"
exit $((SHIM_FAILS > 0))
