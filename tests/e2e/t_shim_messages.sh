#!/usr/bin/env bash
# t_shim_messages.sh - the shim's one-line messages say what to do: a missing manifest is the helper's own line
# after the mount's path, offline with nothing cached says what the REMOTE resolves to and to fetch online with
# the same cache, a cache that cannot be created names the mkdir that failed, HFS3_HELPER as a bare name is looked
# up in PATH (a missing one says so), HFS3_LOG=debug says which helper runs, and an HFS3_MOUNTS with no valid
# mount still says so once.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_s3
python3 "$HFS3_ROOT/tests/e2e/shim_fixture.py" "$WORK/fx" >/dev/null || exit 1
rclone copy --links "$WORK/fx/src/flat" s3test:models/flat || exit 1
"$HFS3_BIN" build s3test:models/flat >/dev/null || exit 1
M=$WORK/mnt
export HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
export HFS3_MOUNTS="$M/flat=s3test:models/flat;$M/none=s3test:models/none"
cd "$WORK"

err=$(shim ls "$M/none" 2>&1); echo "$err"
shim_check "missing manifest: the mount, then the helper's line" \
  test "$(grep -c '^hfs3:' <<<"$err"):$(grep -c "^hfs3: $M/none: no manifest at s3://models/none/.*run hfs3-manifest build s3test:models/none" <<<"$err")" = 1:1

err=$(HFS3_CACHE_DIR=$WORK/cache2 HFS3_OFFLINE=1 LD_PRELOAD=$HFS3_SHIM ls "$M/flat" 2>&1); echo "$err"
shim_check "offline, none cached: what it resolves to, and to fetch online with this cache" test "$(grep -c '^hfs3:' <<<"$err"):$(grep -c "^hfs3: $M/flat: s3test:models/flat: HFS3_OFFLINE=1 and no cached manifest for it or any REMOTE that resolves to the same $S3_ENDPOINT/models/flat: run hfs3-manifest fetch s3test:models/flat online with HFS3_CACHE_DIR=$WORK/cache2 first" <<<"$err")" = 1:1

: >"$WORK/afile"
err=$(HFS3_CACHE_DIR=/proc/hfs3-none/cache LD_PRELOAD=$HFS3_SHIM ls "$M/flat" 2>&1); echo "$err"
shim_check "a cache that cannot be created: the mkdir and its cause, one line" test "$(grep -c '^hfs3:' <<<"$err"):$(grep -c "^hfs3: $M/flat: cache /proc/hfs3-none/cache cannot be created: mkdir /proc/hfs3-none: .*(set HFS3_CACHE_DIR to a directory you can create)" <<<"$err")" = 1:1

bindir=$(dirname "$HFS3_BIN")
out=$(rm -rf "$WORK/cache3"; HFS3_CACHE_DIR=$WORK/cache3 HFS3_HELPER=$(basename "$HFS3_BIN") PATH="$bindir:$PATH" LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>&1)
shim_check "HFS3_HELPER as a bare name: looked up in PATH" test "$out" = "hello from a"
err=$(HFS3_CACHE_DIR=$WORK/cache4 HFS3_HELPER=no-such-hfs3-helper LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>&1); echo "$err"
shim_check "HFS3_HELPER missing: says a bare name is looked up in PATH" grep -q "^hfs3: cannot run the helper no-such-hfs3-helper: No such file or directory (HFS3_HELPER names a path; a bare name is looked up in PATH)" <<<"$err"
err=$(HFS3_LOG=debug LD_PRELOAD=$HFS3_SHIM cat "$M/flat/dir/b.bin" 2>&1 >/dev/null)
shim_check "HFS3_LOG=debug: which helper and why" grep -q "^hfs3: helper: $HFS3_BIN (HFS3_HELPER)" <<<"$err"

err=$(HFS3_MOUNTS="nonsense;also-bad" LD_PRELOAD=$HFS3_SHIM cat "$WORK/afile" 2>&1); echo "$err"
shim_check "HFS3_MOUNTS with no valid mount: said once" test "$(grep -c '^hfs3: HFS3_MOUNTS: ignoring "nonsense"' <<<"$err")" = 1
# issue 24 §3.8: blanks around '=' (a silent ENOENT before), and which mount an overlapping one overlaps
err=$(HFS3_MOUNTS="$M/flat = s3test:models/flat" LD_PRELOAD=$HFS3_SHIM cat "$WORK/afile" 2>&1); echo "$err"
shim_check "HFS3_MOUNTS with blanks around '=': said" test "$err" = "hfs3: HFS3_MOUNTS: ignoring \"$M/flat = s3test:models/flat\" (a blank around '=': write /LOCALPATH=REMOTE with no blanks)"
err=$(HFS3_MOUNTS="$M/flat=s3test:models/flat;$M/flat/sub=s3test:models/none" LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt" 2>&1); echo "$err"
shim_check "overlapping mounts: names the mount overlapped" grep -qxF "hfs3: HFS3_MOUNTS: $M/flat/sub overlaps the mount $M/flat=s3test:models/flat: ignored (mounts may not nest or repeat)" <<<"$err"
# issue 24 §3.4: a rebuild within the manifest TTL: a new program's open fails once with what to do (open it
# again, not build), and the cache has the new manifest at once, so the next open gets the new content
export HFS3_CACHE_DIR=$WORK/cache5
shim cat "$M/flat/a.txt" >/dev/null 2>&1
printf 'new content of b\n' >"$WORK/b.new"
rclone copyto "$WORK/b.new" s3test:models/flat/dir/b.bin && "$HFS3_BIN" build s3test:models/flat >/dev/null || exit 1
err=$(shim cat "$M/flat/dir/b.bin" 2>&1 >/dev/null); echo "$err"
shim_check "a rebuild within the TTL: open it again, said once" test "$(grep -c '^hfs3:' <<<"$err"):$(grep -cxF "hfs3: $M/flat/dir/b.bin: fetch failed: s3test:models/flat: dir/b.bin: the manifest was rebuilt since it was cached; the cache has the new one now: open it again (a running program's mounts reload it within HFS3_MANIFEST_TTL, 60 s by default; a new program's at once)" <<<"$err")" = 1:1
shim_check "a rebuild within the TTL: the next open gets the new content" test "$(shim cat "$M/flat/dir/b.bin")" = "new content of b"
exit $((SHIM_FAILS > 0))
