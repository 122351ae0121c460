#!/usr/bin/env bash
# Python under the shim: listdir/scandir/walk/rglob/glob, realpath through HF-cache symlinks, json, mmap,
# copytree, subprocess with cwd= a mount dir, chdir, fork, threads, EROFS/ENOTDIR (shim_python.py); a real
# symlink to a mount's ancestor used as an HF hub cache.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_start
export WORK
(cd "$WORK" && shim python3 "$HFS3_ROOT/tests/e2e/shim_python.py" "$M" "$REV" "$WORK/fx/src")
rc=$?
# subprocess cwd= a mount the parent never touched: the vfork child chdirs with no loaded state
out=$(cd "$WORK" && shim python3 -c "import subprocess, sys; r = subprocess.run(['/bin/pwd'], cwd=sys.argv[1], capture_output=True, text=True); print(r.stdout.strip())" "$M/hf/snapshots/$REV/sub")
[ "$out" = "$M/hf/snapshots/$REV/sub" ] && echo "ok subprocess cwd= first touch" || { echo "not ok subprocess cwd= first touch ($out)"; rc=1; }
# docs/reference.md "With an HF cache": a real on-disk symlink to a mount's ancestor (~/.cache/huggingface/hub -> /models/hub) works as
# an HF cache: it lists the mounts, refs and snapshot links resolve, and realpath lands in the mount
mkdir -p "$HOME/.cache/huggingface" && ln -s "$M" "$HOME/.cache/huggingface/hub"
out=$(cd "$WORK" && shim python3 -c "
import os, sys
hub, rev, src, m = sys.argv[1:5]
snap = hub + '/hf/snapshots/' + rev
want = open(src + '/hf/snapshots/' + rev + '/config.json', 'rb').read()
print(sorted(os.listdir(hub)), open(hub + '/hf/refs/main').read() == rev, open(snap + '/config.json', 'rb').read() == want,
      os.path.realpath(snap + '/config.json') == os.path.realpath(src + '/hf/snapshots/' + rev + '/config.json').replace(src, m))
" "$HOME/.cache/huggingface/hub" "$REV" "$WORK/fx/src" "$M" 2>&1)
[ "$out" = "['flat', 'hf'] True True True" ] && echo "ok symlink to an ancestor (HF hub cache)" || { echo "not ok symlink to an ancestor (HF hub cache) ($out)"; rc=1; }
# HFS3_MOUNTS unset: the shim is inert
out=$(cd "$WORK" && env -u HFS3_MOUNTS LD_PRELOAD="$HFS3_SHIM" python3 -c "import os, sys; print(os.path.exists(sys.argv[1]), sorted(os.listdir(sys.argv[2])))" "$M/flat" "$WORK/fx/src/flat")
[ "$out" = "False ['a.txt', 'dir', 'dirlink', 'empty', 'link-to-a', 'same.txt']" ] && echo "ok inert without HFS3_MOUNTS" || { echo "not ok inert without HFS3_MOUNTS ($out)"; rc=1; }
exit $rc
