#!/usr/bin/env bash
# t_shim_walk.sh - glibc's nftw(3) and ftw(3) see the mounts (issue 6, item 12): a walk of a mount gives the
# entries, types, levels and sizes of the same tree on disk; nftw with FTW_DEPTH gives directories after their
# contents; ftw from a missing ancestor reaches into the mount; FTW_CHDIR: each callback runs in the entry's
# directory (where the entry's own name answers lstat), and the walk ends where it started, as glibc's on disk.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"
W=$HFS3_ROOT/$BUILD/tools/walk
src=$WORK/fx/src/flat
"$W" nftw-phys "$src" | sed "s#$src#$M/flat#" | sort >"$WORK/real"
LD_PRELOAD=$HFS3_SHIM "$W" nftw-phys "$M/flat" | sort >"$WORK/shim"
diff "$WORK/real" "$WORK/shim"
shim_check "nftw(FTW_PHYS) of a mount = nftw of the tree on disk ($(wc -l <"$WORK/real") lines)" cmp -s "$WORK/real" "$WORK/shim"
# following links, each directory is entered once (which spelling depends on the listing order): compare
# the types and sizes reached
"$W" nftw "$src" | awk '{print $1, $2, $NF}' | sort >"$WORK/real"
LD_PRELOAD=$HFS3_SHIM "$W" nftw "$M/flat" | awk '{print $1, $2, $NF}' | sort >"$WORK/shim"
diff "$WORK/real" "$WORK/shim"
shim_check "nftw following links: each directory once, the same entries" cmp -s "$WORK/real" "$WORK/shim"
out=$(LD_PRELOAD=$HFS3_SHIM "$W" nftw-depth "$M/flat")
shim_check "FTW_DEPTH: a directory after its contents" test "$(grep -n "^DP 1 $M/flat/dir " <<<"$out" | cut -d: -f1)" -gt "$(grep -n "^F 2 $M/flat/dir/b.bin" <<<"$out" | cut -d: -f1)"
out=$(LD_PRELOAD=$HFS3_SHIM "$W" ftw "$M")
shim_check "ftw from a missing ancestor reaches into the mounts" grep -q "^F $M/hf/refs/main$" <<<"$out"
# FTW_CHDIR (with and without FTW_DEPTH): the same entries, each in the same working directory (the start's
# parent for the start) as glibc's walk of the tree on disk; listing orders differ, so lines are compared sorted
for m in nftw-chdir nftw-chdir-depth; do
  "$W" $m "$src" | sed "s#$src#ROOT#g; s#$WORK/fx/src#PARENT#g" | sort >"$WORK/real"
  LD_PRELOAD=$HFS3_SHIM "$W" $m "$M/flat" | sed "s#$M/flat#ROOT#g; s#$M#PARENT#g" | sort >"$WORK/shim"
  diff "$WORK/real" "$WORK/shim"
  shim_check "nftw $m of a mount = nftw $m of the tree on disk ($(wc -l <"$WORK/real") lines)" cmp -s "$WORK/real" "$WORK/shim"
done
out=$(LD_PRELOAD=$HFS3_SHIM "$W" nftw-chdir-depth "$M/flat")
shim_check "FTW_CHDIR|FTW_DEPTH: a directory after its contents" test "$(grep -n "^DP 1 $M/flat/dir " <<<"$out" | cut -d: -f1)" -gt "$(grep -n "^F 2 $M/flat/dir/b.bin" <<<"$out" | cut -d: -f1)"
(cd "$src/dir" && "$W" nftw-chdir .) | sed "s#$src#ROOT#g" | sort >"$WORK/real"
LD_PRELOAD=$HFS3_SHIM bash -c "cd '$M/flat/dir' && exec '$W' nftw-chdir ." | sed "s#$M/flat#ROOT#g" | sort >"$WORK/shim"
diff "$WORK/real" "$WORK/shim"
shim_check "nftw FTW_CHDIR of '.' in a mount = on disk" cmp -s "$WORK/real" "$WORK/shim"
"$W" nftw-chdir "$src" >"$WORK/real"
LD_PRELOAD=$HFS3_SHIM "$W" nftw-chdir "$src" >"$WORK/shim"
shim_check "nftw FTW_CHDIR outside the mounts is glibc's, byte for byte" cmp -s "$WORK/real" "$WORK/shim"
exit $((SHIM_FAILS > 0))
