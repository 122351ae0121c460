#!/usr/bin/env bash
# coreutils and bash under the shim: ls -l, cat, cp -r + diff -r, du -b, find, sha256sum, stat, readlink,
# realpath, cd + pwd; write attempts fail with EROFS; a name that only begins with a mount's path is not in it;
# the rest of the filesystem is untouched.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_start
S=$WORK/fx/src
F=$M/flat H=$M/hf
SNAP=$H/snapshots/$REV
cd "$WORK"

out=$(shim ls -l "$F"); echo "$out"
shim_check "ls -l shows files 0444" grep -q '^-r--r--r-- .* a.txt$' <<<"$out"
shim_check "ls -l shows dirs 0555" grep -q '^dr-xr-xr-x .* dir$' <<<"$out"
shim_check "ls -l shows links" grep -q 'link-to-a -> a.txt$' <<<"$out"
shim_check "ls of an ancestor" test "$(shim ls "$M" | tr '\n' ' ')" = "flat hf "
# a mount ends at a '/': names that only begin with its path are not in it ($M is not on disk)
shim_check "cat M/flata.txt (no such file: not flat/a.txt)" bash -c "! LD_PRELOAD='$HFS3_SHIM' cat '${F}a.txt' 2>/dev/null"
shim_check "stat M/flat2/a.txt (no such file)" bash -c "! LD_PRELOAD='$HFS3_SHIM' stat '${F}2/a.txt' >/dev/null 2>&1"
shim_check "cat" cmp <(shim cat "$F/dir/b.bin") "$S/flat/dir/b.bin"
shim_check "cat through HF symlink" cmp <(shim cat "$SNAP/config.json") "$S/hf/snapshots/$REV/config.json"
shim_check "cp -r out" shim cp -r "$F" "$WORK/cpflat"
shim_check "diff -r after cp -r" diff -r "$WORK/cpflat" "$S/flat"
shim_check "cp -rL of a snapshot" shim cp -rL "$SNAP" "$WORK/cpsnap"
shim_check "diff -r snapshot" diff -r "$WORK/cpsnap" "$S/hf/snapshots/$REV"
shim_check "du -b equals the source" test "$(shim du -sb "$H" | cut -f1)" = "$(du -sb "$S/hf" | cut -f1)"
shim_check "du -b flat" test "$(shim du -b "$F/dir/b.bin" | cut -f1)" = 3000
shim_check "find lists what the source has" cmp <(shim find "$H" | sed "s|^$H||" | sort) <(find "$S/hf" | sed "s|^$S/hf||" | sort)
shim_check "find -type l" cmp <(shim find "$H" -type l | sed "s|^$H||" | sort) <(find "$S/hf" -type l | sed "s|^$S/hf||" | sort)
shim_check "find -type f -size" test "$(shim find "$F" -type f -size +1k | sed "s|^$F/||")" = "dir/b.bin"
shim_check "sha256sum" cmp <(cd "$S/hf/snapshots/$REV" && sha256sum *.safetensors) \
  <(shim bash -c "cd '$SNAP' && sha256sum *.safetensors")
shim_check "stat -c" test "$(shim stat -c '%s %a %F' "$F/a.txt")" = "13 444 regular file"
shim_check "stat -L -c of a dir link" test "$(shim stat -L -c '%F %a' "$F/dirlink")" = "directory 555"
shim_check "readlink" test "$(shim readlink "$SNAP/config.json")" = "$(readlink "$S/hf/snapshots/$REV/config.json")"
shim_check "readlink -f" test "$(shim readlink -f "$SNAP/sub/nested.txt")" = "$H/blobs/$(basename "$(readlink "$S/hf/snapshots/$REV/sub/nested.txt")")"
shim_check "realpath" test "$(shim realpath "$F/dir/up/c.txt")" = "$F/dir/deeper/c.txt"
shim_check "realpath //spelling" test "$(shim realpath "/$F//dir/./../a.txt")" = "$F/a.txt"
shim_check "cd + pwd (bash)" test "$(shim bash -c "cd '$SNAP/sub' && pwd && pwd -P && /bin/pwd" | sort -u)" = "$SNAP/sub"
shim_check "cd .. in a mount" test "$(shim bash -c "cd '$F/dir' && cd .. && ls | head -1")" = "a.txt"
shim_check "head -c via relative path" test "$(shim bash -c "cd '$F' && head -c 5 a.txt")" = "hello"

# writes
for cmd in "touch $F/new" "mkdir $F/d" "rm -f $F/a.txt" "mv $F/a.txt $F/b" "chmod 600 $F/a.txt" "ln -s x $F/l" "cp /etc/hostname $F/"; do
  err=$(shim $cmd 2>&1); rc=$?
  shim_check "EROFS: $cmd ($err)" bash -c "[ $rc -ne 0 ] && grep -qi 'read-only' <<<'$err'"
done
shim_check "ENOTDIR for file/x" bash -c "LD_PRELOAD='$HFS3_SHIM' stat '$F/a.txt/x' 2>&1 | grep -q 'Not a directory'"

# everything else unchanged
shim_check "ls of a real dir" cmp <(shim ls -la "$S/flat") <(ls -la "$S/flat")
shim_check "sha256sum of real files" cmp <(shim sha256sum "$S"/flat/*.txt) <(sha256sum "$S"/flat/*.txt)
shim_check "mount invisible without the shim" test ! -e "$F"
exit $((SHIM_FAILS > 0))
