#!/usr/bin/env bash
# t_cache_attacks.sh - another local user cannot subvert the cache (issue 7, helper side). User B (uid 64102,
# a member of the cache's group 64100) or C (uid 64103, not a member) prepares the cache; then the victim A
# (uid 64101, group 64100) runs the helper normally (_get, _index, fetch). For every attack: A's own files
# outside the cache (under $WORK/homeA) keep their sha256 and mode, A never gets a forged byte (the blob is
# the real content, or the helper fails with one clear line), and each refusal is one line.
# Needs root and setpriv (real distinct uids); exits 77 with "SKIP: ..." otherwise.
# Blobs with a second name are refused even when their size is right (issue 25 item 4).
# The last cases are the shim's side: A's cat through the shim after B's plants.
# Issue 23: with HFS3_VERIFY_FOREIGN=1 B can deny A service but never choose what A reads: attack 1 (B rewrites
# A's manifest.json; B makes A's own mount directory first), 2 (B flips the source of an alias copy), 3 (B points
# A's canonical at another model), 4 (symlinks for the shim's skeleton and ancestor directories), 5 (a secret in
# a connection-string REMOTE never reaches argv or the log), each as real uids A (victim) and B (member).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
# blobs/ rules: HFS3_VERIFY=whole makes _get install into blobs/ at once (by default it checks chunk digests into
# the mount's sticky cblobs/, moved into blobs/ by the flush)
export HFS3_VERIFY=whole
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
# exit 77 = skipped, where run.sh knows that status; 0 with the SKIP line before it does
skip() { echo "SKIP: $1"; if grep -q '77' "$HFS3_ROOT/tests/e2e/run.sh"; then exit 77; fi; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (to act as three users)"
command -v setpriv >/dev/null || skip "needs setpriv"

A=64101 B=64102 C=64103 G=64100
s3env_start "$WORK"
trap 's3env_stop' EXIT
chmod 0755 "$WORK" "$WORK/home"
chmod 0644 "$RCLONE_CONFIG"
fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
R=s3test:models/m1
cfg=$(blob_of "$WORK/m/config.json")
tok=$(blob_of "$WORK/m/tokenizer.json")
big=$(blob_of "$WORK/m/model.safetensors")
empty=$(blob_of "$WORK/m/sub/empty.txt")
# keyof REMOTE [UID]: hfs3_mountkey (FNV-1a 64 of a plain REMOTE); with UID, the user's own mount directory
# under HFS3_VERIFY_FOREIGN=1 (hfs3_mountkey_as: the key's hash continued with NUL "uid=UID")
keyof() {
  python3 -c '
import sys
h = 1469598103934665603
for b in sys.argv[1].encode() + (b"\0uid=" + sys.argv[2].encode() if len(sys.argv) > 2 else b""):
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print("%016x" % h)' "$@"
}
K=$(keyof "$R")
KA=$(keyof "$R" "$A")   # A's own under HFS3_VERIFY_FOREIGN=1

# A's home: files an attacker would like to reach through the cache
HA=$WORK/homeA
mkdir -p "$HA"
for f in secret notes diary; do head -c 3000 /dev/urandom >"$HA/$f"; done
chown -R "$A:$A" "$HA"
chmod 0755 "$HA"
chmod 0600 "$HA/secret" "$HA/notes" "$HA/diary"
snapshot() { (cd "$HA" && for f in secret notes diary; do echo "$f $(stat -c '%a %u %s' "$f") $(sha256sum <"$f")"; done); }
snapshot >"$WORK/victim.before"
victim_ok() {
  snapshot >"$WORK/victim.after"
  cmp -s "$WORK/victim.before" "$WORK/victim.after" || { diff "$WORK/victim.before" "$WORK/victim.after" >&2; fail "$1: A's own files changed"; }
}

# as UID CMD...: CMD as that uid, primary group G (C: its own group), umask 077
as() {
  local uid=$1 gid=$G; shift
  [ "$uid" != "$C" ] || gid=$C
  setpriv --reuid="$uid" --regid="$gid" --clear-groups env HOME="$WORK/home" bash -c 'umask 077; exec "$@"' as "$@"
}
# A's helper, stdout+stderr to $WORK/out, $WORK/err; exit status in $st
runA() { set +e; as "$A" "$HFS3_BIN" "$@" >"$WORK/out" 2>"$WORK/err"; st=$?; set -e; }
# refused WHAT WORDS: A's last command failed with exit 1 and one line on stderr holding WORDS
refused() {
  [ "$st" = 1 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "$1: exit $st, expected 1"; }
  one_line "$WORK/err"
  grep -q -- "$2" "$WORK/err" || { cat "$WORK/err" >&2; fail "$1: message lacks '$2'"; }
  grep -q AddressSanitizer "$WORK/err" && fail "$1: sanitizer report"
  ok "$1: refused: $(cat "$WORK/err")"
}
succeeded() {
  [ "$st" = 0 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "$1: exit $st"; }
}
# the blob of FILE in cache DIR is the real content
real_blob() { cmp -s "$1/blobs/$(blob_of "$WORK/m/$2")" "$WORK/m/$2" || fail "blob of $2 in $1 is not the real content"; }

# A fresh shared cache as an init container makes it (root: group G, 3770, its subdirectories by a root run)
new_shared() {
  S=$WORK/shared.$1
  mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
  HFS3_CACHE_DIR=$S "$HFS3_BIN" _index "$R" || fail "root _index in $S"
  export HFS3_CACHE_DIR=$S
}

# ---- the cache directory itself and its path ----
mkdir "$WORK/bcache"; chown "$B:$G" "$WORK/bcache"; chmod 0755 "$WORK/bcache"
as "$B" mkdir -p "$WORK/bcache/mounts/$K"
printf '{"forged": true}\n' | as "$B" tee "$WORK/bcache/mounts/$K/manifest.json" >/dev/null
HFS3_CACHE_DIR=$WORK/bcache runA _get "$R" config.json
refused "a cache directory owned by B (0755)" "belongs to uid $B"
HFS3_CACHE_DIR=$WORK/bcache runA fetch "$R"
refused "fetch into B's cache" "belongs to uid $B"
[ "$(stat -c %u "$WORK/bcache/mounts/$K/manifest.json")" = "$B" ] && [ ! -e "$WORK/bcache/blobs" ] || fail "A wrote into B's cache"

mkdir "$WORK/pub"; chmod 1777 "$WORK/pub"
as "$B" mkdir -m 0755 "$WORK/pub/cache"
HFS3_CACHE_DIR=$WORK/pub/cache runA _index "$R"
refused "B's cache directory in a 1777 parent" "belongs to uid $B"
as "$B" mkdir -m 2770 "$WORK/pub/scache"
HFS3_CACHE_DIR=$WORK/pub/scache runA _index "$R"
refused "a 'shared' cache of B's (setgid, g+w) in a 1777 parent" "belongs to uid $B"

mkdir -p "$HA/realcache"; chown "$A:$A" "$HA/realcache"; chmod 0700 "$HA/realcache"
as "$B" ln -s "$HA/realcache" "$WORK/pub/link"
HFS3_CACHE_DIR=$WORK/pub/link runA _index "$R"
refused "a cache reached through B's symlink" "symlink $WORK/pub/link owned by uid $B"
HFS3_CACHE_DIR=$WORK/pub/link/sub runA _index "$R"
refused "a cache below B's symlink" "owned by uid $B"

mkdir -m 0777 "$WORK/open"; chmod 0777 "$WORK/open"
mkdir "$WORK/open/cache"; chown "$A:$A" "$WORK/open/cache"; chmod 0700 "$WORK/open/cache"
HFS3_CACHE_DIR=$WORK/open/cache runA _index "$R"
refused "a cache in a parent writable by others without sticky" "writable by others without the sticky bit"
mkdir "$WORK/bdir"; chown "$B:$G" "$WORK/bdir"; chmod 0755 "$WORK/bdir"
mkdir "$WORK/bdir/cache"; chown "$A:$A" "$WORK/bdir/cache"
HFS3_CACHE_DIR=$WORK/bdir/cache runA _index "$R"
refused "a cache in a parent owned by B" "owned by uid $B"
mkdir "$WORK/rootshared"; chgrp "$G" "$WORK/rootshared"; chmod 02770 "$WORK/rootshared"
HFS3_CACHE_DIR=$WORK/rootshared runA _index "$R"
refused "a root-owned shared cache without the sticky bit" "chmod 3770"
victim_ok "cache directory attacks"

# ---- A's private cache: nobody else can write it, but files another user left there are refused ----
P=$HA/.cache/hfs3
HFS3_CACHE_DIR=$P runA _get "$R" config.json
succeeded "A's private cache"
real_blob "$P" config.json
[ "$(stat -c '%u %a' "$P")" = "$A 700" ] || fail "private cache mode $(stat -c '%u %a' "$P")"
chown "$B" "$P/mounts/$K/manifest.json"     # as root or an old version might have left it
HFS3_CACHE_DIR=$P runA _get "$R" tokenizer.json
refused "a file of B's in A's private cache" "manifest.json belongs to uid $B"
chown "$A" "$P/mounts/$K/manifest.json"
chown "$B" "$P/tmp"
HFS3_CACHE_DIR=$P runA _get "$R" tokenizer.json
refused "a directory of B's in A's private cache" "belongs to uid $B, not to you"
chown "$A" "$P/tmp"
victim_ok "private cache"

# ---- the shared cache: B (a member) plants, then A uses it ----
new_shared lock
as "$B" ln -s "$HA/secret" "$S/locks/$cfg.lock"
runA _get "$R" config.json
refused "locks/<sha>.lock a symlink to A's file" "is a symlink"
victim_ok "symlinked lock"
[ ! -e "$S/blobs/$cfg" ] || fail "fetched through a refused lock"
as "$B" rm "$S/locks/$cfg.lock"
as "$B" mkfifo -m 0660 "$S/locks/$cfg.lock"
set +e; timeout 20 setpriv --reuid="$A" --regid="$G" --clear-groups "$HFS3_BIN" _get "$R" config.json >"$WORK/out" 2>"$WORK/err"; st=$?; set -e
refused "locks/<sha>.lock a FIFO (no hang)" "not a regular file"
as "$B" rm "$S/locks/$cfg.lock"
as "$B" bash -c "umask 027; : >'$S/locks/$cfg.lock'"
runA _get "$R" config.json
succeeded "another member's lock file"
[ "$(stat -c '%u %a' "$S/locks/$cfg.lock")" = "$B 640" ] || fail "B's lock file was changed: $(stat -c '%u %a' "$S/locks/$cfg.lock")"
real_blob "$S" config.json
ok "another member's lock file (0640) is flocked as it is, never chmod-ed"
as "$B" bash -c "umask 022; : >'$S/locks/$tok.lock'"
chgrp "$B" "$S/locks/$tok.lock"   # B's own group, not the cache's (readable by A: the rule refuses it, not EACCES)
runA _get "$R" tokenizer.json
refused "a lock file of B's outside the cache's group" "belongs to uid $B"
victim_ok "lock files"
# the mount's own lock, its error file and a blob's .err: symlinks of B's are refused or replaced, never followed
as "$B" ln -sf "$HA/secret" "$S/mounts/$K/lock"
runA _index "$R"
refused "mounts/K/lock a symlink to A's file" "lock is a symlink"
as "$B" rm "$S/mounts/$K/lock"
as "$B" ln -sf "$HA/notes" "$S/mounts/$K/error"
touch -d 2001-01-01 "$S/mounts/$K/index"
runA _index "$R"
succeeded "_index with mounts/K/error a symlink"
[ ! -L "$S/mounts/$K/error" ] || fail "the symlinked error file was kept"
as "$B" ln -s "$HA/diary" "$S/fails/$cfg.err"
rm -f "$S/blobs/$cfg"
HFS3_OFFLINE=1 runA _get "$R" config.json
refused "a failed _get with fails/<sha>.err a symlink of B's (sticky: not replaced)" "HFS3_OFFLINE=1"
victim_ok "mount lock, error and .err symlinks"

# hard links to A's file: protected_hardlinks stops B; root makes the same links (what B could do with
# protected_hardlinks=0) to test A's side without touching the system setting
echo "protected_hardlinks=$(cat /proc/sys/fs/protected_hardlinks 2>/dev/null || echo '?')"
if as "$B" ln "$HA/secret" "$S/locks/x.lock" 2>/dev/null; then ok "note: B could hard-link A's file (protected_hardlinks off)"
else ok "B cannot hard-link A's 0600 file (protected_hardlinks); root makes the links instead"; fi
new_shared hardlink
ln "$HA/secret" "$S/locks/$cfg.lock"
ln "$HA/notes" "$S/tmp/$big.part"
ln "$HA/diary" "$S/tmp/$big.done"
runA _get "$R" config.json
succeeded "hard-linked lock file"
runA _get "$R" model.safetensors
succeeded "hard-linked .part and .done"
real_blob "$S" config.json; real_blob "$S" model.safetensors
victim_ok "hard links to A's files as lock, .part and .done"
[ "$(stat -c %a "$HA/secret")" = 600 ] || fail "mode of A's file"
ok "hard links to A's files in locks/ and tmp/: flocked or left alone, never chmod-ed, truncated or written"
ln "$HA/notes" "$S/blobs/$tok"
runA _get "$R" tokenizer.json
succeeded "a hard link to A's file as a blob is removed and the real one fetched"
real_blob "$S" tokenizer.json
victim_ok "hard-linked blob"
# a second name of the right size (issue 25 item 4): the size check passes, the link count alone refuses it.
# A's own file of the blob's size linked in (root, as B could with protected_hardlinks=0): removed as a blob
# and the real one fetched, the file itself untouched; B's own file linked in by B: refused (B's, sticky)
new_shared nlink
csize=$(stat -c %s "$WORK/m/config.json") tsize=$(stat -c %s "$WORK/m/tokenizer.json")
head -c "$csize" /dev/urandom >"$HA/twin"; chown "$A:$A" "$HA/twin"; chmod 0600 "$HA/twin"
twin=$(sha256sum <"$HA/twin")
ln "$HA/twin" "$S/blobs/$cfg"
runA _get "$R" config.json
succeeded "a hard link to A's file of the right size as a blob"
grep -q "has 2 links" "$WORK/err" || { cat "$WORK/err" >&2; fail "the second name was not the reason"; }
real_blob "$S" config.json
[ "$(sha256sum <"$HA/twin"):$(stat -c '%a %u %h' "$HA/twin")" = "$twin:600 $A 1" ] || fail "A's linked file changed"
mkdir "$WORK/bfiles"; chown "$B:$G" "$WORK/bfiles"
as "$B" bash -c "head -c $tsize /dev/zero | tr '\\0' x >'$WORK/bfiles/t' && chmod 0440 '$WORK/bfiles/t' && ln '$WORK/bfiles/t' '$S/blobs/$tok'"
[ "$(stat -c '%u %s %h' "$S/blobs/$tok")" = "$B $tsize 2" ] || fail "B's linked blob was not planted"
runA _get "$R" tokenizer.json
refused "B's blob of the right size with a second name" "has 2 links"
victim_ok "hard-linked blobs of the right size"

# symlinks planted as temp names (.part, .done, for an empty and a large file) and index temp names
new_shared tmp
as "$B" ln -s "$HA/secret" "$S/tmp/$empty.part"
as "$B" ln -s "$HA/notes" "$S/tmp/$big.part"
as "$B" ln -s "$HA/diary" "$S/tmp/$big.done"
for i in $(seq 0 15); do as "$B" ln -s "$HA/secret" "$S/tmp/$big.000000000000000$(printf %x "$i").part"; done
runA _get "$R" sub/empty.txt
succeeded "empty file with tmp/<sha>.part a symlink"
runA _get "$R" model.safetensors
succeeded "large file with .part/.done symlinks"
wait_flushed "$S"   # a chunk-checked _get answers from A's cblobs/; the detached flush moves it into blobs/
for b in "$empty" "$big"; do
  [ -f "$S/blobs/$b" ] && [ ! -L "$S/blobs/$b" ] || fail "blobs/$b is not a regular file"
  [ "$(stat -c '%u %a' "$S/blobs/$b")" = "$A 440" ] || fail "blobs/$b: $(stat -c '%u %a' "$S/blobs/$b")"
done
real_blob "$S" sub/empty.txt; real_blob "$S" model.safetensors
victim_ok "symlinked temp names"
ok "symlinks planted as tmp/<sha>.part, .done and guessed random names: never followed"
pid=$(sh -c 'echo $$')
for i in $(seq "$pid" $((pid + 300))); do ln -s "$HA/notes" "$S/mounts/$K/index.tmp.$i" 2>/dev/null || true; done
chown -h "$B:$G" "$S/mounts/$K"/index.tmp.* 2>/dev/null || true
touch -d 2001-01-01 "$S/mounts/$K/index"
runA _index "$R"
succeeded "_index with index.tmp.<pid> symlinks planted"
[ "$(stat -c %u "$S/mounts/$K/index")" = "$A" ] || fail "index not replaced by A"
victim_ok "index temp names"
ok "mounts/K/index.tmp.<pid> symlinks for the next 300 pids: not followed"
# a forged index of B's (the shim maps it; the helper never reads it): the next _index installs A's own
as "$B" bash -c "umask 027; head -c 4096 /dev/urandom >'$S/mounts/$K/index.new' && mv -f '$S/mounts/$K/index.new' '$S/mounts/$K/index'"
cp "$S/mounts/$K/index" "$WORK/forged.index"
touch -d 2001-01-01 "$S/mounts/$K/index"
runA _index "$R"
succeeded "_index after B forged the index"
[ "$(stat -c %u "$S/mounts/$K/index")" = "$A" ] && ! cmp -s "$S/mounts/$K/index" "$WORK/forged.index" || fail "B's forged index kept"
ok "B's forged index is replaced by A's next _index (a 304 reinstalls it from the manifest)"
runA fetch "$R"
succeeded "A's fetch of the whole model after all of B's plants in tmp/ and mounts/"
for f in config.json tokenizer.json model.safetensors sub/empty.txt; do real_blob "$S" "$f"; done
victim_ok "whole fetch"

# blobs: B cannot replace A's blob (sticky); B's forged blob planted in advance is refused when its size
# is wrong, and under HFS3_VERIFY_FOREIGN=1 when only its bytes are
runA _get "$R" config.json; succeeded "A fetches config.json"
runA _get "$R" tokenizer.json; succeeded "A fetches tokenizer.json"
as "$B" bash -c "printf forged >'$S/blobs/x'"
if as "$B" mv -f "$S/blobs/x" "$S/blobs/$cfg" 2>/dev/null; then fail "B replaced A's blob"; fi
if as "$B" rm -f "$S/blobs/$tok" 2>/dev/null && [ ! -e "$S/blobs/$tok" ]; then fail "B removed A's blob"; fi
real_blob "$S" config.json
ok "blobs/ is sticky: B can neither replace nor remove A's blobs"
new_shared blobs
as "$B" bash -c "umask 027; printf 'short' >'$S/blobs/$cfg'"
runA _get "$R" config.json
refused "B's blob of the wrong size" "the manifest says"
size=$(stat -c %s "$WORK/m/tokenizer.json")
as "$B" bash -c "umask 027; head -c $size /dev/zero >'$S/blobs/$tok'"
# offline it stays refused (nothing to download in its place); online (issue 32 round 4) A downloads its own copy
HFS3_VERIFY_FOREIGN=1 runA _index "$R"; succeeded "A's own manifest"
HFS3_VERIFY_FOREIGN=1 HFS3_OFFLINE=1 runA _get "$R" tokenizer.json
refused "B's forged blob of the right size, HFS3_VERIFY_FOREIGN=1 HFS3_OFFLINE=1" "does not match its sha256"
grep -q "does not match" "$S/fails/$tok.err" || fail "fails/<sha>.err not written"
HFS3_VERIFY_FOREIGN=1 runA _get "$R" tokenizer.json
succeeded "B's forged blob of the right size, HFS3_VERIFY_FOREIGN=1, online: A downloads its own copy"
cmp -s "$S/mounts/$KA/cblobs/$tok" "$WORK/m/tokenizer.json" || fail "B's forged blob online: no copy of A's own"
as "$B" bash -c "umask 027; cp '$WORK/m/model.safetensors' '$S/blobs/$big'"
HFS3_VERIFY_FOREIGN=1 runA _get "$R" model.safetensors
succeeded "B's genuine blob under HFS3_VERIFY_FOREIGN=1"
# issue 32: B's blob is never served as it is: A's own copy, hashed as it was made, in A's own mount directory
cmp -s "$S/mounts/$KA/cblobs/$big" "$WORK/m/model.safetensors" && [ "$(stat -c %u:%a "$S/mounts/$KA/cblobs/$big")" = "$A:440" ] ||
  fail "B's genuine blob under HFS3_VERIFY_FOREIGN=1: no read-only copy of A's own"
as "$B" ln -s "$HA/secret" "$S/blobs/$empty"
runA _get "$R" sub/empty.txt
refused "blobs/<sha> a symlink of B's" "is a symlink"
victim_ok "blobs"

# a forged manifest.json (and index) of B's: a member is trusted for content by default; with
# HFS3_VERIFY_FOREIGN=1 A fetches its own manifest and never follows the forged one
new_shared manifest
plant_manifest() {
  as "$B" bash -c "umask 022; cat '$WORK/forged.json' >'$S/mounts/$K/manifest.json.new' && mv -f '$S/mounts/$K/manifest.json.new' '$S/mounts/$K/manifest.json'"
}
as "$B" bash -c "umask 027; printf 'forged bytes' >'$S/blobs/$(printf 'forged bytes' | sha256sum | cut -d' ' -f1)'"
python3 - "$S/mounts/$K/manifest.json" "$(printf 'forged bytes' | sha256sum | cut -d' ' -f1)" >"$WORK/forged.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for e in m["entries"]:
    if e["path"] == "config.json":
        e["sha256"], e["size"] = sys.argv[2], 12
print(json.dumps(m))
PY
plant_manifest
HFS3_VERIFY_FOREIGN=1 runA _get "$R" config.json
succeeded "_get with B's forged manifest.json, HFS3_VERIFY_FOREIGN=1"
real_blob "$S" config.json
[ "$(stat -c '%u %a' "$S/mounts/$KA" "$S/mounts/$KA/manifest.json" | tr '\n' ' ')" = "$A 3770 $A 640 " ] ||
  fail "A did not fetch its own manifest into a directory of its own: $(stat -c '%u %a' "$S/mounts/$KA" "$S/mounts/$KA/manifest.json" | tr '\n' ' ')"
grep -q "$cfg" "$S/mounts/$KA/manifest.json" || fail "A's manifest is not the real one"
ok "B's forged manifest.json is not used under HFS3_VERIFY_FOREIGN=1: A's own, in A's own mounts/K (3770, 0640)"
plant_manifest
rm -rf "${S:?}/mounts/$KA"
HFS3_VERIFY_FOREIGN=1 runA _index "$R"
succeeded "_index with B's forged manifest.json, HFS3_VERIFY_FOREIGN=1"
[ "$(stat -c %u "$S/mounts/$KA/manifest.json")" = "$A" ] && [ "$(stat -c %u "$S/mounts/$KA/index")" = "$A" ] || fail "_index kept B's files"
plant_manifest
as "$B" chgrp "$B" "$S/mounts/$K/manifest.json" 2>/dev/null || chgrp "$B" "$S/mounts/$K/manifest.json"
runA _get "$R" config.json
refused "B's manifest.json outside the cache's group" "manifest.json belongs to uid $B"
as "$B" ln -sf "$HA/secret" "$S/mounts/$K/manifest.json"
runA _get "$R" config.json
refused "mounts/K/manifest.json a symlink to A's file" "is a symlink"
victim_ok "forged manifest"

# a non-member (C) can write nothing anywhere in the shared cache
for d in . blobs tmp locks fails mounts unflushed "mounts/$K"; do
  if as "$C" bash -c ": >'$S/$d/c-was-here'" 2>/dev/null; then fail "non-member C wrote into $d"; fi
done
ok "non-member C cannot create anything in the shared cache"

# ---- shim-side cases: A's cat through the shim after B's plants ----
new_shared shim
as "$B" ln -s "$HA/secret" "$S/locks/$cfg.lock"
set +e
setpriv --reuid="$A" --regid="$G" --clear-groups env HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
  HFS3_MOUNTS="/models/m1=$R" LD_PRELOAD="$HFS3_SHIM" cat /models/m1/config.json >"$WORK/shim.out" 2>"$WORK/shim.err"
st=$?
set -e
victim_ok "shim: symlinked lock"
[ "$st" = 1 ] || { cat "$WORK/shim.err" >&2; fail "shim: symlinked lock: cat exit $st, expected 1"; }
[ ! -s "$WORK/shim.out" ] || fail "shim: symlinked lock: cat printed something"
grep -q "locks/$cfg.lock" "$WORK/shim.err" || { cat "$WORK/shim.err" >&2; fail "shim: symlinked lock: no line naming it"; }
[ "$(stat -c %a "$HA/secret")" = 600 ] || fail "shim: the target's mode changed"
ok "shim: cat with a symlinked lock: $(head -1 "$WORK/shim.err")"
as "$B" mkfifo -m 0644 "$S/blobs/$tok"
set +e
timeout 10 setpriv --reuid="$A" --regid="$G" --clear-groups env HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
  HFS3_MOUNTS="/models/m1=$R" LD_PRELOAD="$HFS3_SHIM" cat /models/m1/tokenizer.json >"$WORK/shim.out" 2>"$WORK/shim.err"
st=$?
set -e
[ "$st" = 1 ] || { cat "$WORK/shim.err" >&2; fail "shim: FIFO blob: cat exit $st (124: it hung), expected 1"; }
grep -q "not a regular file" "$WORK/shim.err" || { cat "$WORK/shim.err" >&2; fail "shim: FIFO blob: no line"; }
ok "shim: a FIFO planted as a blob does not hang the open: $(head -1 "$WORK/shim.err")"
# HFS3_VERIFY_FOREIGN on the shim side: B's forged blob (right size, wrong bytes) is served on trust without
# it, refused with it (the helper re-hashes it under the lock); B's manifest is replaced by A's own
new_shared shimvf
size=$(stat -c %s "$WORK/m/config.json")
as "$B" bash -c "head -c $size /dev/zero | tr '\\0' x >'$S/blobs/$cfg' && chmod 0440 '$S/blobs/$cfg'"
shimA() {
  set +e
  setpriv --reuid="$A" --regid="$G" --clear-groups env HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
    HFS3_MOUNTS="/models/m1=$R" LD_PRELOAD="$HFS3_SHIM" "$@" >"$WORK/shim.out" 2>"$WORK/shim.err"
  st=$?
  set -e
}
shimA cat /models/m1/config.json
[ "$st" = 0 ] && [ "$(head -c 3 "$WORK/shim.out")" = xxx ] || { cat "$WORK/shim.err" >&2; fail "shim: B's blob without HFS3_VERIFY_FOREIGN: exit $st"; }
ok "shim: without HFS3_VERIFY_FOREIGN a member's blob is trusted (the documented limit)"
shimA env HFS3_VERIFY_FOREIGN=on cat /models/m1/config.json
# (issue 32 round 4: online the forged blob counts as absent, and A downloads its own copy; offline it is refused,
# t_cache_deny and the helper's check above)
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/config.json" ||
  { cat "$WORK/shim.err" >&2; fail "shim: B's forged blob under HFS3_VERIFY_FOREIGN=on: exit $st, or a forged byte served"; }
ok "shim: HFS3_VERIFY_FOREIGN=on: B's forged blob never served; A's own downloaded copy is"
as "$B" rm -f "$S/blobs/$cfg"
as "$B" env HFS3_CACHE_DIR="$S" "$HFS3_BIN" _get "$R" config.json
[ "$(stat -c %u "$S/blobs/$cfg")" = "$B" ] || fail "shim: B's good blob"
shimA env HFS3_VERIFY_FOREIGN=yes cat /models/m1/config.json
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/config.json" || { cat "$WORK/shim.err" >&2; fail "shim: B's good blob under HFS3_VERIFY_FOREIGN: exit $st"; }
ok "shim: HFS3_VERIFY_FOREIGN=yes: B's good blob copied (A's own copy, hashed) and served"
# the manifest: B refreshed it last (B's index); A's shim with HFS3_VERIFY_FOREIGN=1 installs its own at once
rm -f "$S/mounts/$K/index" "$S/mounts/$K/manifest.json" "$S/mounts/$K/etag"
as "$B" env HFS3_CACHE_DIR="$S" "$HFS3_BIN" _index "$R"
[ "$(stat -c %u "$S/mounts/$K/index")" = "$B" ] || fail "shim: B's index"
shimA env HFS3_VERIFY_FOREIGN=1 HFS3_MANIFEST_TTL=100000 cat /models/m1/config.json
[ "$st" = 0 ] || { cat "$WORK/shim.err" >&2; fail "shim: HFS3_VERIFY_FOREIGN with B's index: exit $st"; }
[ "$(stat -c %u "$S/mounts/$KA/index"):$(stat -c %u "$S/mounts/$KA/manifest.json")" = "$A:$A" ] ||
  fail "shim: HFS3_VERIFY_FOREIGN=1 kept B's index/manifest.json"
ok "shim: HFS3_VERIFY_FOREIGN=1: B's cached index is not A's; A's shim installs its own"
# issue 34 item 3: offline, the helper cannot hash a member's blob for A, so under HFS3_VERIFY_FOREIGN=1 the shim
# never serves it: B's genuine blob and B's forged one of the right size are both an EIO with a line, no byte read
# (A's own index is there from the step above: nothing else stands in the way)
[ "$(stat -c %u "$S/blobs/$cfg")" = "$B" ] || fail "offline: B's genuine blob is not there"
# A's own copy of it, made online by the step before (issue 32), would be served, rightly: not what is tested here
as "$A" rm -f "$S/mounts/$KA/cblobs/$cfg" "$S/unflushed/$cfg.m$KA"
for what in genuine forged; do
  if [ $what = forged ]; then
    as "$B" rm -f "$S/blobs/$cfg"
    as "$B" bash -c "head -c $size /dev/zero | tr '\\0' x >'$S/blobs/$cfg' && chmod 0440 '$S/blobs/$cfg'"
  fi
  shimA env HFS3_VERIFY_FOREIGN=1 HFS3_OFFLINE=1 cat /models/m1/config.json
  [ "$st" = 1 ] || { cat "$WORK/shim.err" >&2; fail "shim offline: B's $what blob under HFS3_VERIFY_FOREIGN=1: exit $st"; }
  [ ! -s "$WORK/shim.out" ] || fail "shim offline: a byte of B's $what blob was served under HFS3_VERIFY_FOREIGN=1"
  # the line says why offline in particular (the next step: online, A's own copy), not only that it is B's
  grep -q 'Input/output error' "$WORK/shim.err" &&
    grep -q "another user's, HFS3_VERIFY_FOREIGN=1 and HFS3_OFFLINE=1" "$WORK/shim.err" ||
    { cat "$WORK/shim.err" >&2; fail "shim offline: B's $what blob: no EIO, or no line saying why"; }
done
ok "shim: HFS3_OFFLINE=1 and HFS3_VERIFY_FOREIGN=1: a member's blob of the right size (genuine or forged) is EIO, not read: $(grep -m1 -i 'another user' "$WORK/shim.err")"
as "$B" rm -f "$S/blobs/$cfg"
as "$B" env HFS3_CACHE_DIR="$S" "$HFS3_BIN" _get "$R" config.json
# ---- issue 23: with HFS3_VERIFY_FOREIGN=1 a member can deny A service, never choose the bytes A reads ----
# B's tools: a blob whose bytes B chose (its name is their true sha256, so a re-hash passes), and a copy of a
# manifest whose config.json entry names it
fbytes="forged bytes"
fsha=$(printf '%s' "$fbytes" | sha256sum | cut -d' ' -f1)
forge() {   # forge MANIFEST OUT
  python3 - "$1" "$fsha" >"$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for e in m["entries"]:
    if e["path"] == "config.json":
        e["sha256"], e["size"] = sys.argv[2], 12
        e.pop("etag", None)
print(json.dumps(m))
PY
  chmod 0644 "$2"
}
# A's cat through the shim with HFS3_VERIFY_FOREIGN=1, the manifest asked about at every start (TTL 0)
shimVF() {   # shimVF REMOTE CMD...: /models/m1 mounts REMOTE
  local rem=$1; shift
  set +e
  setpriv --reuid="$A" --regid="$G" --clear-groups env HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 HFS3_VERIFY_FOREIGN=1 \
    HFS3_MANIFEST_TTL=0 HFS3_MOUNTS="/models/m1=$rem" LD_PRELOAD="$HFS3_SHIM" "$@" >"$WORK/shim.out" 2>"$WORK/shim.err"
  st=$?
  set -e
}
not_forged() {   # not_forged WHAT: A's last shim run printed nothing B chose
  ! grep -q "$fbytes" "$WORK/shim.out" || { cat "$WORK/shim.err" >&2; fail "$1: A read B's bytes"; }
}
# the mount directories holding a manifest.json of A's (old versions: the shared mounts/K; now A's own)
a_dirs() { for f in "$S"/mounts/*/manifest.json; do [ "$(stat -c %u "$f")" = "$A" ] && dirname "$f"; done; true; }
new_vf() {   # a shared cache that A starts (no root run first): everything of the mount is A's
  S=$WORK/vf.$1
  mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
  export HFS3_CACHE_DIR=$S
  HFS3_VERIFY_FOREIGN=1 runA _index "$R"; succeeded "A's _index into $S"
  as "$B" bash -c "umask 027; printf '%s' '$fbytes' >'$S/blobs/$fsha'"
}

# attack 1: B rewrites A's manifest.json in place (it was 0660: the owner stays A, so it did not count as
# foreign), then A's next revalidation gets 304 and would rebuild its index from B's file
new_vf a1
dirs=$(a_dirs); [ -n "$dirs" ] || fail "attack 1: no manifest.json of A's"
for d in $dirs; do
  forge "$d/manifest.json" "$WORK/forged1.json"
  if as "$B" bash -c "cat '$WORK/forged1.json' >'$d/manifest.json'" 2>/dev/null; then echo "B wrote into $d/manifest.json"; fi
done
shimVF "$R" cat /models/m1/config.json
not_forged "attack 1 (B rewrote A's manifest.json in place)"
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/config.json" || { cat "$WORK/shim.err" >&2; fail "attack 1: exit $st"; }
for d in $dirs; do
  [ "$(stat -c '%u %a' "$d" "$d/manifest.json" "$d/etag" "$d/canonical" | tr '\n' ' ')" = "$A 3770 $A 640 $A 640 $A 640 " ] ||
    fail "attack 1: A's mount directory and files: $(stat -c '%n %u %a' "$d" "$d"/* | tr '\n' ' ')"
  if as "$B" bash -c "cp '$WORK/forged1.json' '$d/b.json' && mv -f '$d/b.json' '$d/manifest.json'" 2>/dev/null; then
    fail "attack 1: B renamed a file over A's manifest.json"
  fi
done
ok "attack 1: A's mount files are 0640 in a sticky directory of A's own: B can neither rewrite nor replace them"
# the same file as an older version left it (0660): any member could have rewritten it, so it is not A's
d=$(echo "$dirs" | head -1)
chmod 0660 "$d/manifest.json"
as "$B" bash -c "cat '$WORK/forged1.json' >'$d/manifest.json'"
shimVF "$R" cat /models/m1/config.json
not_forged "attack 1 (A's 0660 manifest.json rewritten by B)"
cmp -s "$WORK/shim.out" "$WORK/m/config.json" || { cat "$WORK/shim.err" >&2; fail "attack 1, 0660: exit $st"; }
[ "$(stat -c '%u %a' "$d/manifest.json")" = "$A 640" ] && ! grep -q "$fsha" "$d/manifest.json" ||
  fail "attack 1: A's 0660 manifest.json was kept"
ok "attack 1: a 0660 manifest.json of A's (written before this version) is not trusted: fetched whole again"
# B takes A's own directory first: never served from B's directory, and (issue 32 round 4) A is not refused
# either: it works in a directory of its own of the other shape (include/hfs3/ownkey.h)
as "$B" mkdir -m 3770 "$S/mounts/$(keyof s3test:models/m2 "$A")"
HFS3_VERIFY_FOREIGN=1 runA _index s3test:models/m2   # (m2 has no manifest: A's helper gets as far as S3)
! grep -q "must be your own" "$WORK/err" && grep -q "no manifest at" "$WORK/err" ||
  { cat "$WORK/err" >&2; fail "B made A's own mount directory first: A was refused the REMOTE"; }
ok "B made A's own mount directory first: A's helper works in one of its own (it went on to S3: $(cat "$WORK/err"))"
[ -z "$(ls -A "$S/mounts/$(keyof s3test:models/m2 "$A")")" ] || fail "A wrote into B's directory"
victim_ok "attack 1"

# B makes A's own mount directory first, with an index B forged (built by B's own helper from a forged manifest
# in the shared mounts/K) that maps config.json to a blob A trusts without asking (root's tokenizer.json): A's
# helper refuses the directory, and A's shim must not map B's index anyway
new_shared a1b
HFS3_CACHE_DIR=$S "$HFS3_BIN" _get "$R" tokenizer.json
python3 - "$S/mounts/$K/manifest.json" "$tok" "$(stat -c %s "$WORK/m/tokenizer.json")" >"$WORK/forged1b.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for e in m["entries"]:
    if e["path"] == "config.json":
        e["sha256"], e["size"] = sys.argv[2], int(sys.argv[3])
        e.pop("etag", None)
print(json.dumps(m))
PY
chmod 0644 "$WORK/forged1b.json"
as "$B" bash -c "cp '$WORK/forged1b.json' '$S/mounts/$K/m.b' && mv -f '$S/mounts/$K/m.b' '$S/mounts/$K/manifest.json' &&
  HFS3_CACHE_DIR='$S' '$HFS3_BIN' _index '$R' && mkdir -m 3770 '$S/mounts/$KA' && cp '$S/mounts/$K/index' '$S/mounts/$KA/index' && chmod 0440 '$S/mounts/$KA/index'"
grep -q "$tok" "$S/mounts/$K/manifest.json" || fail "attack 1b: B's forged manifest"
shimVF "$R" cat /models/m1/config.json
! cmp -s "$WORK/shim.out" "$WORK/m/tokenizer.json" || fail "attack 1b: A's shim read tokenizer.json as config.json through B's index"
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/config.json" || { cat "$WORK/shim.err" >&2; fail "attack 1b: exit $st"; }
ok "attack 1b: B's index in a directory B made for A: not mapped; A reads config.json from a directory of its own"
# attack 1c: B creates an index in A's own mount directory (3770: a member may create a name there) after A's shim
# moved B's plants aside and while A's helper ran. Made deterministic: A's helper is a stand-in that exits 1 (a
# failure, not a refusal: the shim then opens what is there) once B planted. The shim's own check of the index it
# opened is the only line left (round 5: no test reached it alone)
new_shared a1c
HFS3_CACHE_DIR=$S "$HFS3_BIN" _get "$R" tokenizer.json
as "$B" bash -c "cp '$WORK/forged1b.json' '$S/mounts/$K/m.b' && mv -f '$S/mounts/$K/m.b' '$S/mounts/$K/manifest.json' &&
  HFS3_CACHE_DIR='$S' '$HFS3_BIN' _index '$R'"
mkdir -m 0777 "$WORK/p1c"
printf '#!/bin/sh\ntouch %s/go\nfor i in $(seq 1 400); do [ -e %s/done ] && exit 1; sleep 0.05; done\nexit 1\n' \
  "$WORK/p1c" "$WORK/p1c" >"$WORK/p1c/helper"
chmod 0755 "$WORK/p1c/helper"
as "$B" bash -c "for i in \$(seq 1 400); do [ -e '$WORK/p1c/go' ] && break; sleep 0.05; done
  cp '$S/mounts/$K/index' '$S/mounts/$KA/i.b' && chmod 0440 '$S/mounts/$KA/i.b' && mv '$S/mounts/$KA/i.b' '$S/mounts/$KA/index'
  touch '$WORK/p1c/done'" &
planter=$!
shimVF "$R" env HFS3_HELPER="$WORK/p1c/helper" cat /models/m1/config.json
wait "$planter" || true
[ "$(stat -c %u "$S/mounts/$KA/index" 2>/dev/null)" = "$B" ] || fail "attack 1c: test setup: B's index was not planted in A's own directory"
! cmp -s "$WORK/shim.out" "$WORK/m/tokenizer.json" || fail "attack 1c: A's shim read tokenizer.json as config.json through B's index"
[ "$st" != 0 ] && [ ! -s "$WORK/shim.out" ] || { cat "$WORK/shim.err" >&2; fail "attack 1c: exit $st with output"; }
grep -q "could have been written by another user and HFS3_VERIFY_FOREIGN=1: not used" "$WORK/shim.err" ||
  { cat "$WORK/shim.err" >&2; fail "attack 1c: no line naming the index"; }
ok "attack 1c: B's index planted in A's own directory while A's helper ran: not mapped ($(grep -m1 'not used' "$WORK/shim.err"))"

# attack 2: A mounts another spelling of the same endpoint + bucket + prefix with nothing cached under it: the
# helper copies the manifest cached under the first. B flips that manifest.json with a forged one, as fast as
# it can, while A adopts it 15 times: the copy must never be B's (it would become A's own file, with the real ETag)
export RCLONE_CONFIG_ALIASB_TYPE=s3 RCLONE_CONFIG_ALIASB_PROVIDER=Other RCLONE_CONFIG_ALIASB_ACCESS_KEY_ID=S3RVER \
       RCLONE_CONFIG_ALIASB_SECRET_ACCESS_KEY=S3RVER RCLONE_CONFIG_ALIASB_ENDPOINT="$S3_ENDPOINT" \
       RCLONE_CONFIG_ALIASB_REGION=us-east-1
R2=aliasb:models/m1
new_vf a2
src=$(a_dirs | head -1)
forge "$src/manifest.json" "$WORK/forged2.json"
as "$B" bash -c "cp '$WORK/forged2.json' '$src/b.json'" 2>/dev/null || true
rm -f "$WORK/stop"
as "$B" python3 - "$src" 60 "$WORK/stop" >"$WORK/flips" 2>&1 <<'PY' &
import os, sys, time
d, end, n = sys.argv[1], time.time() + float(sys.argv[2]), 0
m, real, forged = d + "/manifest.json", d + "/real.json", d + "/b.json"
while time.time() < end and not os.path.exists(sys.argv[3]):
    try:
        os.rename(m, real)
        os.rename(forged, m)
        time.sleep(0.002)
        os.rename(m, forged)
        os.rename(real, m)
        n += 1
        time.sleep(0.003)
    except OSError:
        time.sleep(0.001)
print("flips", n)
PY
flipper=$!
wins=0 adopted=0
for i in $(seq 1 15); do
  for d in $(a_dirs); do [ "$d" = "$src" ] || rm -rf "$d"; done
  HFS3_OFFLINE=1 HFS3_VERIFY_FOREIGN=1 runA _index "$R2"
  [ "$st" = 0 ] && adopted=$((adopted + 1))
  for d in $(a_dirs); do
    [ "$d" != "$src" ] && grep -q "$fsha" "$d/manifest.json" && wins=$((wins + 1))
  done
done
touch "$WORK/stop"; wait "$flipper" || true
echo "attack 2: B's $(cat "$WORK/flips"), A adopted $adopted of 15, B won $wins"
[ "$wins" = 0 ] || fail "attack 2: A copied B's forged manifest $wins times"
[ "$adopted" = 15 ] || { cat "$WORK/err" >&2; fail "attack 2: adopted only $adopted of 15"; }
ok "attack 2: an alias copy is never B's (B could not flip A's files: $(cat "$WORK/flips"))"
# what the copy reads is checked on the descriptor it reads: an etag there that a member could have written
# (0660, as older versions left it) is not copied with the manifest (it would pair it with another one's 304)
rm -f "$src/b.json"
chmod 0660 "$src/etag"
for d in $(a_dirs); do [ "$d" = "$src" ] || rm -rf "$d"; done
HFS3_OFFLINE=1 HFS3_VERIFY_FOREIGN=1 runA _index "$R2"; succeeded "attack 2: adopted with a 0660 etag"
d2=$S/mounts/$(keyof "$R2" "$A")
[ -f "$d2/manifest.json" ] && [ ! -e "$d2/etag" ] || fail "attack 2: a 0660 etag was copied: $(ls "$d2" | tr '\n' ' ')"
ok "attack 2: an etag others could have written is not copied with the manifest"
victim_ok "attack 2"

# the prewarm of a pod whose server runs with HFS3_VERIFY_FOREIGN=1: root's fetch with it too keeps root's mount
# directory sticky, so A's server copies root's manifest offline (root is trusted; B cannot replace its files)
S=$WORK/vf.root; mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"; export HFS3_CACHE_DIR=$S
HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" fetch "$R" >/dev/null || fail "root's fetch with HFS3_VERIFY_FOREIGN=1"
[ "$(stat -c '%u %a' "$S/mounts/$(keyof "$R" 0)")" = "0 3770" ] || fail "root's own mount directory"
set +e
setpriv --reuid="$A" --regid="$G" --clear-groups env HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 HFS3_VERIFY_FOREIGN=1 \
  HFS3_OFFLINE=1 HFS3_MOUNTS="/models/m1=$R" LD_PRELOAD="$HFS3_SHIM" cat /models/m1/config.json >"$WORK/shim.out" 2>"$WORK/shim.err"
set -e
cmp -s "$WORK/shim.out" "$WORK/m/config.json" || { cat "$WORK/shim.err" >&2; fail "A's offline server after root's prewarm"; }
ok "root's prewarm with HFS3_VERIFY_FOREIGN=1 serves A's HFS3_VERIFY_FOREIGN=1 server offline"

# attack 3: B points A's m1 entry at m2's identity (canonical was 0660): A mounting s3test:models/m2 (not
# published: 404 online) must not get m1, offline or online
new_vf a3
for d in $(a_dirs); do
  sed 's#/models/m1$#/models/m2#' "$d/canonical" >"$WORK/canon3"; chmod 0644 "$WORK/canon3"
  if as "$B" bash -c "cat '$WORK/canon3' >'$d/canonical'" 2>/dev/null; then echo "B wrote into $d/canonical"; fi
done
# and a directory of B's own claiming m2, with a copy of the manifest
kb=$(keyof s3test:models/bcopy)
as "$B" bash -c "umask 027; mkdir -m 2770 '$S/mounts/$kb' && cat '$WORK/canon3' >'$S/mounts/$kb/canonical' &&
  cat '$(a_dirs | head -1)/manifest.json' >'$S/mounts/$kb/manifest.json' && : >'$S/mounts/$kb/index'" 2>/dev/null || true
HFS3_OFFLINE=1 HFS3_VERIFY_FOREIGN=1 runA _index s3test:models/m2
refused "attack 3: offline, A's m1 entry pointed at m2" "no cached manifest"
HFS3_VERIFY_FOREIGN=1 HFS3_RETRIES=0 runA _index s3test:models/m2
[ "$st" = 1 ] || { cat "$WORK/err" >&2; fail "attack 3: online (404): exit $st"; }
grep -q "manifest" "$WORK/err" && ! grep -q "using the manifest cached" "$WORK/err" || { cat "$WORK/err" >&2; fail "attack 3: online"; }
ok "attack 3: online (404): refused: $(head -1 "$WORK/err")"
set +e
setpriv --reuid="$A" --regid="$G" --clear-groups env HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 HFS3_VERIFY_FOREIGN=1 \
  HFS3_OFFLINE=1 HFS3_MOUNTS="/models/m2=s3test:models/m2" LD_PRELOAD="$HFS3_SHIM" cat /models/m2/config.json \
  >"$WORK/shim.out" 2>"$WORK/shim.err"
set -e
[ ! -s "$WORK/shim.out" ] || fail "attack 3: A's shim read m1's config.json as m2's"
for d in $(a_dirs); do
  if as "$B" bash -c "cp '$WORK/canon3' '$d/c.new' && mv -f '$d/c.new' '$d/canonical'" 2>/dev/null; then
    fail "attack 3: B renamed a file over A's canonical"
  fi
done
victim_ok "attack 3"

# attack 4: the shim's chdir into the skeleton. B plants mounts/ancestors/mdl -> a directory of B's (B made
# mounts/ and mounts/ancestors first, as a member may), and a symlink for mounts/K/tree/sub in a tree/ of B's;
# A's `cd /mdl; cat m1/config.json` and `cd /models/m1/sub; cat empty.txt` must never read B's files
S=$WORK/vf.a4; mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"; export HFS3_CACHE_DIR=$S
mkdir -p "$WORK/bfake/m1"; printf '%s' "$fbytes" >"$WORK/bfake/m1/config.json"; printf '%s' "$fbytes" >"$WORK/bfake/empty.txt"
chown -R "$B:$G" "$WORK/bfake"; chmod -R a+rX "$WORK/bfake"
as "$B" bash -c "mkdir -m 3770 '$S/mounts' '$S/mounts/ancestors' && ln -s '$WORK/bfake' '$S/mounts/ancestors/mdl'"
as "$B" bash -c "mkdir -m 2770 '$S/mounts/$K' && mkdir -m 3770 '$S/mounts/$K/tree'"
runA _index "$R"; succeeded "A's _index under B's tree/"
as "$B" bash -c "mv '$S/mounts/$K/tree/sub' '$S/mounts/$K/tree/sub.a' && ln -s '$WORK/bfake' '$S/mounts/$K/tree/sub'"
shimA4() {
  set +e
  setpriv --reuid="$A" --regid="$G" --clear-groups env HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
    HFS3_MOUNTS="$1" LD_PRELOAD="$HFS3_SHIM" bash -c "$2" >"$WORK/shim.out" 2>"$WORK/shim.err"
  st=$?
  set -e
}
shimA4 "/mdl/m1=$R" 'cd /mdl && cat m1/config.json'
not_forged "attack 4 (mounts/ancestors/mdl a symlink of B's)"
ok "attack 4: cd into an ancestor that B made a symlink: B's file not read (exit $st: $(head -1 "$WORK/shim.err"))"
shimA4 "/models/m1=$R" 'cd /models/m1/sub && cat empty.txt; cat /models/m1/config.json'
not_forged "attack 4 (mounts/K/tree/sub a symlink of B's)"
grep -q architectures "$WORK/shim.out" || { cat "$WORK/shim.err" >&2; fail "attack 4: the rest of the mount"; }
ok "attack 4: cd into a skeleton directory that B made a symlink: refused ($(head -1 "$WORK/shim.err"))"
# B made mounts/: as its owner B could swap two of A's own mount directories (sticky or not): refused under
# HFS3_VERIFY_FOREIGN=1, a denial of service only
HFS3_VERIFY_FOREIGN=1 runA _index "$R"
refused "attack 4: mounts/ of B's under HFS3_VERIFY_FOREIGN=1" "who could swap the mount directories"
shimVF "$R" cat /models/m1/config.json
not_forged "attack 4 (mounts/ of B's, HFS3_VERIFY_FOREIGN=1)"
# a real directory of B's for the ancestor, holding a file where the mount is: the mount is still the index's
as "$B" bash -c "rm '$S/mounts/ancestors/mdl' && mkdir -m 2775 '$S/mounts/ancestors/mdl' '$S/mounts/ancestors/mdl/m1' &&
  printf '%s' '$fbytes' >'$S/mounts/ancestors/mdl/m1/config.json' && chmod -R a+rX '$S/mounts/ancestors/mdl'"
shimA4 "/mdl/m1=$R" 'cd /mdl && cat m1/config.json'
not_forged "attack 4 (mounts/ancestors/mdl a directory of B's)"
grep -q architectures "$WORK/shim.out" || { cat "$WORK/shim.err" >&2; fail "attack 4: cd /mdl; cat m1/config.json: exit $st"; }
ok "attack 4: cd into an ancestor that is B's directory: m1/config.json is still the mount's"
victim_ok "attack 4"

# attack 5: a connection-string REMOTE (a secret inside): the shim must not start a helper with it in argv
# (every local user reads /proc/PID/cmdline) nor print it at HFS3_LOG=debug; B watches /proc meanwhile
cat >"$WORK/wrap.sh" <<EOF2
#!/bin/sh
printf '%s\n' "\$*" >>'$WORK/argv.log'
exec '$HFS3_BIN' "\$@"
EOF2
chmod 0755 "$WORK/wrap.sh"; : >"$WORK/argv.log"; chmod 0666 "$WORK/argv.log"
rm -f "$WORK/stop"
as "$B" python3 - 60 "$WORK/stop" >"$WORK/seen" 2>/dev/null <<'PY' &
import glob, os, sys, time
end, hits = time.time() + float(sys.argv[1]), set()
while time.time() < end and not os.path.exists(sys.argv[2]):
    for p in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if b"SEKRET5" in open(p, "rb").read():
                hits.add(p)
        except OSError:
            pass
print(len(hits))
PY
watcher=$!
sleep 0.3
for i in 1 2; do
  # the REMOTE in the environment (private to A), as a real deployment sets it: never in this test's own argv
  set +e
  HFS3_HELPER="$WORK/wrap.sh" HFS3_LOG=debug HFS3_PREFETCH=0 HFS3_MOUNTS="/models/x=cs,secret_access_key=SEKRET5:models/m1" \
    LD_PRELOAD="$HFS3_SHIM" setpriv --reuid="$A" --regid="$G" --clear-groups cat /models/x/config.json \
    >"$WORK/shim.out" 2>"$WORK/shim.err"
  set -e
done
touch "$WORK/stop"; wait "$watcher" || true
! grep -q SEKRET5 "$WORK/argv.log" "$WORK/shim.err" "$WORK/shim.out" || { cat "$WORK/argv.log" "$WORK/shim.err" >&2; fail "attack 5: the secret in argv or the log"; }
[ "$(cat "$WORK/seen")" = 0 ] || fail "attack 5: B saw the secret in /proc/*/cmdline"
ok "attack 5: a connection-string REMOTE: no helper argv and no log line holds its secret ($(head -1 "$WORK/shim.err"))"

# ---- B shrinks its own blob while A hashes it: A reads a file that another uid can write with pread, never
# through a mapping, which a shrink under it turns into SIGBUS (lib/util.c: only our own files are mapped) ----
new_shared shrink
as "$B" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" model.safetensors >/dev/null 2>&1 || fail "B's _get of the big file"
[ "$(stat -c %u "$S/blobs/$big")" = "$B" ] || fail "the big blob is not B's"
as "$B" chmod 0644 "$S/blobs/$big"
rm -f "$WORK/stop"
as "$B" python3 - "$S/blobs/$big" "$WORK/stop" <<'PY' &
import os, sys
size = os.path.getsize(sys.argv[1])
fd = os.open(sys.argv[1], os.O_RDWR)
while not os.path.exists(sys.argv[2]):
    os.ftruncate(fd, 0)
    os.ftruncate(fd, size)
PY
shrinker=$!
for i in 1 2 3 4 5; do
  runA cache verify --dry-run
  if [ "$st" -ge 128 ] || grep -q "AddressSanitizer\|Bus error\|SIGBUS" "$WORK/err"; then
    touch "$WORK/stop"; cat "$WORK/err" >&2; fail "A's cache verify crashed (exit $st) while B shrank its blob"
  fi
done
touch "$WORK/stop"; wait "$shrinker" || true
ok "B shrinks its blob while A's cache verify hashes it, 5 times: no crash (exit $st: $(head -c 120 "$WORK/err"))"
# ---- B holds the flock of a missing blob's lock file, plants a forged blob (right size) under its name and lets
# go: A's shim, waiting for that lock with HFS3_VERIFY_FOREIGN=1, must not take B's blob for done without _get's
# hash (shim/open.c blob_there) ----
new_shared lockrace
size=$(stat -c %s "$WORK/m/config.json")
rm -f "$S/locked.B"
as "$B" python3 - "$S" "$cfg" "$size" "$S/locked.B" <<'PY' &
import fcntl, os, sys, time
s, cfg, size, sig = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
os.makedirs(s + "/locks", exist_ok=True)
fd = os.open(s + "/locks/" + cfg + ".lock", os.O_RDWR | os.O_CREAT, 0o640)
os.fchmod(fd, 0o640)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sig, "w").close()
time.sleep(2)
b = os.open(s + "/blobs/" + cfg, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o440)
os.write(b, b"x" * size)
os.fchmod(b, 0o440)
os.close(b)
fcntl.flock(fd, fcntl.LOCK_UN)
PY
holder=$!
for _ in $(seq 1 100); do [ -e "$S/locked.B" ] && break; sleep 0.05; done
[ -e "$S/locked.B" ] || fail "lock race: B never took the lock"
shimA env HFS3_VERIFY_FOREIGN=1 cat /models/m1/config.json
wait "$holder" || fail "lock race: B's planter failed"
[ "$(stat -c %u "$S/blobs/$cfg")" = "$B" ] || fail "lock race: test setup: the blob is not B's"
[ "$(head -c 3 "$WORK/shim.out")" != xxx ] || { cat "$WORK/shim.err" >&2; fail "lock race: A read B's forged blob (HFS3_VERIFY_FOREIGN=1)"; }
[ "$st" != 0 ] || cmp -s "$WORK/shim.out" "$WORK/m/config.json" || fail "lock race: A read other bytes"
ok "B plants a forged blob while holding the lock A waits for: not read under HFS3_VERIFY_FOREIGN=1 (exit $st: $(head -c 120 "$WORK/shim.err"))"
victim_ok "issue 23"

# ---- issue 31, round 4 review: B writes this boot's id over A's record of a crash (records were 0660) ----
# A installs config.json under boot OLD without the flush, the crash zeroes it; under boot NOW B rewrites the
# record's boot id in place: A's shim must still have the helper hash the blob, never serve the zeros
new_shared record
OLD=aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa NOW=bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb
HFS3_TEST_BOOT_ID=$OLD HFS3_TEST_NO_FLUSH=1 runA _get "$R" config.json
succeeded "record: A's _get under boot OLD"
[ -e "$S/unflushed/$cfg" ] || fail "record: test setup: no record of A's config.json"
dd if=/dev/zero of="$S/blobs/$cfg" bs=1 count=64 conv=notrunc status=none
as "$B" bash -c "printf '%s' $NOW | dd of='$S/unflushed/$cfg' conv=notrunc status=none" 2>/dev/null || true
shimA env HFS3_TEST_BOOT_ID=$NOW cat /models/m1/config.json
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/config.json" ||
  { cat "$WORK/shim.err" >&2; fail "record: A read the zeroed config.json under a record B rewrote (exit $st)"; }
[ ! -e "$S/unflushed/$cfg" ] || [ "$(stat -c %a "$S/unflushed/$cfg")" = 640 ] || fail "record: A's record is group-writable"
ok "B cannot write this boot's id into A's record of a crash: A's shim hashes the zeroed blob again, reads the real one"
echo "all ok"
