#!/usr/bin/env bash
# t_shim_cachestate.sh - the shim in every state of the cache directory (issue 6, item 1 and 4): a cache that
# cannot be created (under /proc), a regular file, a relative HFS3_CACHE_DIR; as another user with HOME=/ (the
# default ~/.cache/hfs3 cannot be made): the per-user fallback $TMPDIR/hfs3-<uid>, made 0700, and refused when
# someone planted a symlink there. Never a crash: the mount's root stays a directory, inside is EIO, one log line.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_setup || exit 1
cd "$WORK"

# CMD...: runs it with the shim; status in $rc, stderr in $WORK/err, stdout in $out
run() { out=$(LD_PRELOAD=$HFS3_SHIM "$@" 2>"$WORK/err"); rc=$?; }
nlog() { grep -c '^hfs3:' "$WORK/err"; }

for bad in /proc/x/cache "$WORK/afile"; do
  : >"$WORK/afile"
  export HFS3_CACHE_DIR=$bad
  run stat -c %F "$M/flat"
  shim_check "$bad: stat of the mount root, no crash" test "$rc:$out" = "0:directory"
  shim_check "$bad: one log line naming the cache" test "$(nlog)" = 1 -a "$(grep -Ec "cache directory $bad|cache $bad cannot be created: mkdir " "$WORK/err")" = 1
  run stat "$M/flat/a.txt"
  shim_check "$bad: stat inside is EIO" grep -q "Input/output error" "$WORK/err"
  run ls "$M/flat"
  shim_check "$bad: listing the root is EIO, no crash" test "$rc" != 139 -a "$(grep -c "Input/output error" "$WORK/err")" = 1
  run cat "$M/flat/a.txt"
  shim_check "$bad: open inside is EIO" test "$rc" = 1 -a "$(grep -c "Input/output error" "$WORK/err")" = 1
  run python3 -c "import os, sys; os.stat(sys.argv[1]); print(os.path.isdir(sys.argv[1]), os.path.exists(sys.argv[1] + '/a.txt'))" "$M/flat"
  shim_check "$bad: python sees an empty dir" test "$rc:$out" = "0:True False"
  run stat -c %F "$M"
  shim_check "$bad: an ancestor is still a directory" test "$rc:$out" = "0:directory"
done
shim_check "nothing was written beside the file" test ! -s "$WORK/afile"

# a relative HFS3_CACHE_DIR is resolved once, at start: a later chdir does not move it
rel=hfs3-rel-$$-cache
ln -s cache "$WORK/$rel"
export HFS3_CACHE_DIR=$rel
run python3 -c "import os, sys; os.chdir('/'); print(open(sys.argv[1]).read())" "$M/flat/a.txt"
shim_check "relative HFS3_CACHE_DIR resolved at start" test "$rc:$out" = "0:hello from a"
shim_check "relative HFS3_CACHE_DIR: nothing logged" test "$(nlog)" = 0
shim_check "relative HFS3_CACHE_DIR: nothing made under /" test ! -e "/$rel"

# a cache directory below a directory others can write without the sticky bit, at any depth (issue 34 item 8):
# whoever can rename in it decides what the path leads to, so the shim does not use it even offline, where no
# helper runs to refuse it: EIO, one line naming that directory, nothing read. Sticky (as /tmp), it is used.
mkdir -m 0777 "$WORK/open" && chmod 0777 "$WORK/open"
mkdir -p "$WORK/open/x/y" && chmod 0755 "$WORK/open/x" "$WORK/open/x/y"
prev=$WORK/cache
for c in "$WORK/open/cache" "$WORK/open/x/cache" "$WORK/open/x/y/cache"; do
  mv "$prev" "$c" && prev=$c
  export HFS3_CACHE_DIR=$c
  run cat "$M/flat/a.txt"
  cat "$WORK/err"
  shim_check "${c#$WORK/}: below a 0777 directory: EIO, nothing read" test "$rc" = 1 -a -z "$out" -a \
    "$(grep -c "Input/output error" "$WORK/err")" = 1
  shim_check "${c#$WORK/}: one line naming $WORK/open" test "$(nlog)" = 1 -a \
    "$(grep -c "cache directory $c: .*$WORK/open, writable by others without the sticky bit" "$WORK/err")" = 1
done
chmod 1777 "$WORK/open"
run cat "$M/flat/a.txt"
shim_check "open/x/y/cache below a 1777 directory (sticky, as /tmp): served" test "$rc:$out" = "0:hello from a"
mv "$prev" "$WORK/cache"
unset HFS3_CACHE_DIR
export HFS3_CACHE_DIR=$WORK/cache

# another user with HOME=/: ~/.cache/hfs3 cannot be made; the fallback under $TMPDIR is
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  echo "skip: the fallback tests need root and setpriv"; exit $((SHIM_FAILS > 0))
fi
U=64101
chmod 0755 "$WORK"
mkdir -m 1777 "$WORK/tmp"
unset HFS3_CACHE_DIR XDG_CACHE_HOME
as_u() { setpriv --reuid=$U --regid=$U --clear-groups env HOME=/ TMPDIR="$WORK/tmp" LD_PRELOAD="$HFS3_SHIM" "$@"; }
out=$(as_u stat -c %F "$M/flat" 2>"$WORK/err"); rc=$?
shim_check "HOME=/: no crash, the root is a directory" test "$rc:$out" = "0:directory"
shim_check "HOME=/: one line names the fallback" test "$(grep -c "cache directory /.cache/hfs3: Permission denied: using $WORK/tmp/hfs3-$U" "$WORK/err")" = 1
shim_check "the fallback is the user's, 0700" test "$(stat -c '%u %a %F' "$WORK/tmp/hfs3-$U")" = "$U 700 directory"
# with the fixture's index and blobs there, the mount works from the fallback
rm -rf "$WORK/tmp/hfs3-$U"
cp -a "$WORK/cache" "$WORK/tmp/hfs3-$U" && chown -R $U:$U "$WORK/tmp/hfs3-$U" && chmod 0700 "$WORK/tmp/hfs3-$U"
out=$(as_u cat "$M/flat/a.txt" 2>"$WORK/err"); rc=$?
shim_check "HOME=/: files served from the fallback" test "$rc:$out" = "0:hello from a"
# a planted symlink at the fallback's name (another user's): refused, nothing written through it
rm -rf "$WORK/tmp/hfs3-$U"
mkdir -m 0777 "$WORK/evil"
ln -s "$WORK/evil" "$WORK/tmp/hfs3-$U"
out=$(as_u cat "$M/flat/a.txt" 2>"$WORK/err"); rc=$?
cat "$WORK/err"
shim_check "planted symlink: EIO and one line" test "$rc" = 1 -a "$(grep -c '^hfs3:' "$WORK/err")" = 1 -a "$(grep -c "not usable" "$WORK/err")" = 1
shim_check "planted symlink: nothing written through it" test -z "$(ls -A "$WORK/evil")"
exit $((SHIM_FAILS > 0))
