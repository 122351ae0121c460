#!/usr/bin/env bash
# Python under the shim: listdir/scandir/walk/rglob/glob, realpath through HF-cache symlinks, json, mmap,
# copytree, subprocess with cwd= a mount dir, chdir, fork, threads, EROFS/ENOTDIR (shim_python.py).
set -u
source "$HFS3_ROOT/scripts/s3env.sh"
s3env_start "$WORK" || exit 1
trap s3env_stop EXIT
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
export WORK
(cd "$WORK" && shim python3 "$HFS3_ROOT/tests/e2e/shim_python.py" "$M" "$REV" "$WORK/fx/src")
rc=$?
# subprocess cwd= a mount the parent never touched: the vfork child chdirs with no loaded state
out=$(cd "$WORK" && shim python3 -c "import subprocess, sys; r = subprocess.run(['/bin/pwd'], cwd=sys.argv[1], capture_output=True, text=True); print(r.stdout.strip())" "$M/hf/snapshots/$REV/sub")
[ "$out" = "$M/hf/snapshots/$REV/sub" ] && echo "ok subprocess cwd= first touch" || { echo "not ok subprocess cwd= first touch ($out)"; rc=1; }
# HFS3_MOUNTS unset: the shim is inert
out=$(cd "$WORK" && env -u HFS3_MOUNTS LD_PRELOAD="$HFS3_SHIM" python3 -c "import os, sys; print(os.path.exists(sys.argv[1]), sorted(os.listdir(sys.argv[2])))" "$M/flat" "$WORK/fx/src/flat")
[ "$out" = "False ['a.txt', 'dir', 'dirlink', 'empty', 'link-to-a', 'same.txt']" ] && echo "ok inert without HFS3_MOUNTS" || { echo "not ok inert without HFS3_MOUNTS ($out)"; rc=1; }
exit $rc
