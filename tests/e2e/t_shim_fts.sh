#!/usr/bin/env bash
# t_shim_fts.sh - glibc's fts(3) sees the mounts (issue 6, item 12): fts_open/fts_read/fts_children/fts_set/
# fts_close (and fts64_*) over a mount give what glibc's fts gives over the same tree on disk, in every mode the
# fts tool has (FTS_PHYSICAL, FTS_LOGICAL, FTS_COMFOLLOW, FTS_NOSTAT, FTS_SEEDOT, FTS_XDEV, fts_set FTS_SKIP/
# FTS_AGAIN/FTS_FOLLOW, fts_children with and without FTS_NAMEONLY); a relative root in a mount, a root that
# reaches a mount through a real symlink, roots mixing a mount and a real tree, and the mounts' ancestors (missing,
# and existing with real entries) are walked too; a walk outside the mounts is glibc's own, byte for byte.
# Issue 22 item 9: FTS_NOSTAT from an ancestor goes into the mounts, a walk without FTS_NOCHDIR changes directory
# as glibc's (open(fts_accpath), getcwd()), and 3,000 handles may be open at once.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
F=$HFS3_ROOT/$BUILD/tools/fts
S=$WORK/fx/src/flat
# a mount below a directory that exists on disk and has an entry of its own
mkdir -p "$WORK/real" && echo other >"$WORK/real/other.txt"
export HFS3_MOUNTS="$HFS3_MOUNTS;$WORK/real/models/flat2=s3test:models/flat"
same() {  # NAME DISK-ROOT MOUNT-ROOT MODE: glibc over the disk tree = the shim over the mount (roots as ROOT)
  "$F" "$4" "$2" | sed "s#$2#ROOT#g" >"$WORK/real.out"
  LD_PRELOAD=$HFS3_SHIM "$F" "$4" "$3" | sed "s#$3#ROOT#g" >"$WORK/shim.out"
  diff "$WORK/real.out" "$WORK/shim.out" | head -20
  shim_check "$1 ($4, $(wc -l <"$WORK/real.out") lines)" cmp -s "$WORK/real.out" "$WORK/shim.out"
}
for m in phys log comfollow nostat seedot xdev skip again follow children nameonly fts64; do
  same "fts over a mount = glibc's fts over the tree on disk" "$S" "$M/flat" $m
done
for m in phys log; do
  same "fts over the hf-cache mount" "$WORK/fx/src/hf" "$M/hf" $m
  same "fts of a missing root in a mount" "$S/missing" "$M/flat/missing" $m
  same "fts of a file root in a mount" "$S/dir/b.bin" "$M/flat/dir/b.bin" $m
done
# a relative root, from a working directory inside the mount
(cd "$S" && "$F" log .) >"$WORK/real.out"
LD_PRELOAD=$HFS3_SHIM bash -c "cd '$M/flat' && exec '$F' log ." >"$WORK/shim.out"
diff "$WORK/real.out" "$WORK/shim.out" | head
shim_check "fts of '.' in a mount" cmp -s "$WORK/real.out" "$WORK/shim.out"
# a root that is a real symlink to the mount (followed: FTS_COMFOLLOW), beside a real tree
mkdir "$WORK/l1" "$WORK/l2" && ln -s "$S" "$WORK/l1/link" && ln -s "$M/flat" "$WORK/l2/link" &&
  mkdir -p "$WORK/plain/sub" && echo p >"$WORK/plain/sub/p.txt"
"$F" comfollow "$WORK/l1/link" "$WORK/plain" | sed "s#$WORK/l1/link#LINK#g" >"$WORK/real.out"
LD_PRELOAD=$HFS3_SHIM "$F" comfollow "$WORK/l2/link" "$WORK/plain" | sed "s#$WORK/l2/link#LINK#g" >"$WORK/shim.out"
diff "$WORK/real.out" "$WORK/shim.out" | head
shim_check "fts through a real symlink to a mount, beside a real tree" cmp -s "$WORK/real.out" "$WORK/shim.out"
# ancestors: missing (no directory on disk) and existing (its own entries, then the mount below it)
out=$(LD_PRELOAD=$HFS3_SHIM "$F" phys "$WORK/mnt")
shim_check "fts from a missing ancestor reaches into the mounts" grep -q "^F 4 $M/flat/dir/b.bin b.bin 3000$" <<<"$out"
shim_check "... and ends with the ancestor in post-order" test "$(grep -v '^end' <<<"$out" | tail -1)" = "DP 0 $WORK/mnt mnt"
out=$(LD_PRELOAD=$HFS3_SHIM "$F" log "$WORK/real")
shim_check "fts of an existing ancestor: its own entry" grep -q "^F 1 $WORK/real/other.txt other.txt 6$" <<<"$out"
shim_check "... and the mount below it" grep -q "^F 3 $WORK/real/models/flat2/a.txt a.txt 13$" <<<"$out"
# FTS_NOSTAT from an ancestor: a synthesized directory has no subdirectory count; the walk still goes in
out=$(LD_PRELOAD=$HFS3_SHIM "$F" nostat "$WORK/mnt")
shim_check "fts FTS_NOSTAT from an ancestor reaches into the mounts" grep -q "^NSOK 4 $M/flat/dir/b.bin b.bin$" <<<"$out"
# without FTS_NOCHDIR the walk changes directory as glibc's does: open(fts_accpath) (the name) and getcwd() work
# during the walk, and fts_close comes back to the start
(cd "$WORK" && "$F" cwd "$S") | sed "s#$S#ROOT#g" >"$WORK/real.out"
(cd "$WORK" && LD_PRELOAD=$HFS3_SHIM "$F" cwd "$M/flat") | sed "s#$M/flat#ROOT#g" >"$WORK/shim.out"
diff "$WORK/real.out" "$WORK/shim.out" | head
shim_check "fts without FTS_NOCHDIR: the same fts_accpath, cwd and opens as glibc's ($(wc -l <"$WORK/real.out") lines)" \
  cmp -s "$WORK/real.out" "$WORK/shim.out"
shim_check "... and the walk did change directory" grep -q "acc=b.bin cwd=ROOT/dir open=ok" "$WORK/shim.out"
out=$(cd "$WORK/mnt" 2>/dev/null; LD_PRELOAD=$HFS3_SHIM bash -c "cd '$M/flat/dir' && exec '$F' cwd ../dir $M/flat/a.txt")
shim_check "fts without FTS_NOCHDIR from a cwd in a mount: a relative root, then an absolute one" \
  grep -q "^F 0 $M/flat/a.txt a.txt 13 acc=$M/flat/a.txt cwd=$M/flat/dir open=ok$" <<<"$out"
shim_check "... back in the start directory after fts_close" grep -q "^after fts_close: cwd=$M/flat/dir$" <<<"$out"
# no fixed number of open handles
out=$(LD_PRELOAD=$HFS3_SHIM "$F" many "$M/flat")
shim_check "3,000 fts handles open at once on a mount ($out)" test "$out" = "many 3000: 0 fts_open failed, 0 fts_read failed"
# outside the mounts: glibc's own walk (it chdirs: fts_accpath is the name), byte for byte
for m in raw phys log children nameonly fts64; do
  "$F" $m "$S" "$WORK/plain" >"$WORK/real.out"
  LD_PRELOAD=$HFS3_SHIM "$F" $m "$S" "$WORK/plain" >"$WORK/shim.out"
  shim_check "fts outside the mounts is glibc's ($m)" cmp -s "$WORK/real.out" "$WORK/shim.out"
done
exit $((SHIM_FAILS > 0))
