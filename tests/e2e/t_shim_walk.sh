#!/usr/bin/env bash
# t_shim_walk.sh - glibc's nftw(3) and ftw(3) see the mounts (issue 6, item 12): a walk of a mount gives the
# entries, types, levels and sizes of the same tree on disk; nftw with FTW_DEPTH gives directories after their
# contents; ftw from a missing ancestor reaches into the mount.
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
exit $((SHIM_FAILS > 0))
