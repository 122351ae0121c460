#!/usr/bin/env bash
# t_cache_fdserve.sh - issue 32: with HFS3_VERIFY_FOREIGN=1 the shim decides on the descriptor it serves
# (include/hfs3/serve.h), never on a path it looked at before: A's process reads only bytes no other user can
# change. Real uids: A (64101, the victim, group 64100) and B (64102, a member of the shared cache's group).
#   1. B plants blobs/<sha> (right size, B's bytes) while A's shim downloads that file into its cblobs/: A reads
#      the real bytes, and A's good copy survives the flush (it used to be deleted: every later open was EIO).
#   2. B makes A's mounts/KA/cblobs/ and a file in it, plus an unflushed/ record of another boot for A's intact
#      blobs/<sha>: B's file is never served.
#   3. B's correct blob passes A's check, then B chmods it 0640 and rewrites it in place: A's open descriptor
#      must not read the new bytes (A serves its own copy, hashed as it was made).
#   4. B swaps the name between its good and its forged file in a loop while A opens it: never B's bytes.
#   5. B made blobs/ (so B may rename anything in it) and renames A's blob of a.json over A's blob of b.json (same
#      size): A's own file under another name is not served from B's directory.
#   6. The helper's side of the directory rule: A's copy through a tmp/ that B made is hashed and stamped (issue
#      44: B can move it, never serve it under another name); none goes into a cblobs/ that B made in A's mount
#      directory (moved aside, A's copy goes into one of A's own).
#   7. B puts a cblobs/ of its own back in A's mount directory right after A moved B's first one aside (the race
#      held open by strace's fault injection): A's copy never goes into it (one line, exit 1).
#   8. B plants cblobs/ once, after the helper moved its first one out of A's mount directory and before the copy
#      (held open by strace): moved aside again where the copy's directory is made; the copy works.
# FDSERVE_ONLY=1,3 runs only those parts (to see each fail on code without the rule).
# Needs root and setpriv; exits 77 with "SKIP: ..." otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
skip() { echo "SKIP: $1"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (to act as two users)"
command -v setpriv >/dev/null || skip "needs setpriv"

A=64101 B=64102 G=64100
s3env_start "$WORK"
trap 'stop_proxies; s3env_stop' EXIT
chmod 0755 "$WORK" "$WORK/home"
chmod 0644 "$RCLONE_CONFIG"
mkdir -p "$WORK/m"
printf '{"architectures": ["Test"], "hidden_size": 64}\n' >"$WORK/m/config.json"
printf '{"n": 1}\n' >"$WORK/m/a.json"
printf '{"n": 2}\n' >"$WORK/m/b.json"
head -c $((24 << 20)) /dev/urandom >"$WORK/m/w.safetensors"
chmod -R a+rX "$WORK/m"
R=s3test:models/fd
fetch_publish "$WORK/m" "$R"
rclone cat "$R/.hfs3/manifest.json" | grep -q '"chunks"' || fail "test setup: no chunk digests in the manifest"
cfg=$(blob_of "$WORK/m/config.json")
w=$(blob_of "$WORK/m/w.safetensors")
wsize=$(stat -c %s "$WORK/m/w.safetensors")
csize=$(stat -c %s "$WORK/m/config.json")
keyof() {   # hfs3_mountkey_as REMOTE UID (A's own mount directory under HFS3_VERIFY_FOREIGN=1)
  python3 -c '
import sys
h = 1469598103934665603
for b in sys.argv[1].encode() + b"\0uid=" + sys.argv[2].encode():
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print("%016x" % h)' "$@"
}
KA=$(keyof "$R" "$A")
F=$WORK/flags   # where A and B leave each other signs
mkdir -m 1777 "$F"

as() {   # as UID CMD...: CMD as that uid, primary group G, umask 077
  local uid=$1; shift
  setpriv --reuid="$uid" --regid="$G" --clear-groups env HOME="$WORK/home" bash -c 'umask 077; exec "$@"' as "$@"
}
# shimA REMOTE CMD...: A's CMD through the shim, /models/fd mounting REMOTE, HFS3_VERIFY_FOREIGN=1; $st, shim.out/err
shimA() {
  local rem=$1; shift
  set +e
  setpriv --reuid="$A" --regid="$G" --clear-groups env HOME="$WORK/home" HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
    HFS3_VERIFY_FOREIGN=1 HFS3_MOUNTS="/models/fd=$rem" LD_PRELOAD="$HFS3_SHIM" "$@" >"$WORK/shim.out" 2>"$WORK/shim.err"
  st=$?
  set -e
}
# a shared cache as an init container makes it: root's, group G, 3770, its subdirectories made by a root run
new_shared() {
  S=$WORK/c.$1
  mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
  HFS3_CACHE_DIR=$S "$HFS3_BIN" _index "$R" || fail "root _index in $S"
  export HFS3_CACHE_DIR=$S
}
# plant_as_B PATH SIZE: a file of B's (mode 0440) of SIZE bytes "x" at PATH, made beside it and renamed in
plant() {
  as "$B" python3 - "$1" "$2" <<'PY'
import os, sys
p, n = sys.argv[1], int(sys.argv[2])
t = p + ".B"
fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o440)
os.write(fd, b"x" * n)
os.fchmod(fd, 0o440)
os.close(fd)
os.rename(t, p)
PY
}
records_gone() {   # until the detached flush removed every record
  # (a copy kept beside a member's blob leaves only its mark <sha>.k<key>, for gc: lib/durable.c mark_kept)
  for _ in $(seq 1 300); do [ -z "$(ls -A "$S/unflushed" 2>/dev/null | grep -v '^[0-9a-f]*\.k')" ] && return 0; sleep 0.1; done
  fail "the flush left records: $(ls "$S/unflushed")"
}
unset HFS3_VERIFY
only() { [ -z "${FDSERVE_ONLY:-}" ] || [[ ",$FDSERVE_ONLY," == *",$1,"* ]]; }

# ---- 1. B plants blobs/<sha> while A's shim downloads it (slowed by a proxy so that B sees the .part) ----
if only 1; then
new_shared plant
start_proxy slow 2000000
RS=slow:models/fd
KS=$(keyof "$RS" "$A")
rm -f "$F/planted"
as "$B" python3 - "$S" "$w" "$wsize" "$F/planted" <<'PY' &
import glob, os, sys, time
s, sha, n, flag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
for _ in range(3000):
    if glob.glob("%s/tmp/%s.*.part" % (s, sha)):
        break
    time.sleep(0.005)
else:
    sys.exit("no .part appeared")
fd = os.open("%s/blobs/%s" % (s, sha), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o440)
os.write(fd, b"x" * n)
os.fchmod(fd, 0o440)
os.close(fd)
open(flag, "w").close()
PY
planter=$!
shimA "$RS" cat /models/fd/w.safetensors
wait "$planter" || fail "1: B's planter failed"
[ -e "$F/planted" ] && [ "$(stat -c %u "$S/blobs/$w")" = "$B" ] || fail "1: test setup: B's plant is not there"
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/w.safetensors" || {
  cat "$WORK/shim.err" >&2; fail "1: A read other bytes than the real ones while B planted blobs/<sha> (exit $st)"; }
ok "1: B planted blobs/<sha> (same size) while A downloaded: A read the real bytes"
records_gone
[ -f "$S/mounts/$KS/cblobs/$w" ] && [ "$(stat -c %u "$S/mounts/$KS/cblobs/$w")" = "$A" ] ||
  fail "1: A's good copy did not survive the flush"
shimA "$RS" cat /models/fd/w.safetensors
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/w.safetensors" || { cat "$WORK/shim.err" >&2; fail "1: after the flush: exit $st"; }
ok "1: A's copy survived the flush beside B's plant; the next open reads it"
stop_proxies

fi

# ---- 2. B's file in A's mounts/KA/cblobs/ (a directory B made), and a record of another boot for A's blob ----
if only 2; then
new_shared cblobs
HFS3_VERIFY=whole as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _get "$R" config.json >/dev/null 2>&1 || fail "2: A's _get"
[ "$(stat -c %u "$S/blobs/$cfg")" = "$A" ] || fail "2: test setup: the blob is not A's"
records_gone
[ -d "$S/mounts/$KA" ] && [ ! -e "$S/mounts/$KA/cblobs" ] || fail "2: test setup: A's mount directory"
as "$B" mkdir -m 3770 "$S/mounts/$KA/cblobs"
plant "$S/mounts/$KA/cblobs/$cfg" "$csize"
as "$B" bash -c "umask 027; printf '%s\n' 00000000-0000-4000-8000-000000000000 >'$S/unflushed/$cfg'"
for i in 1 2; do
  shimA "$R" cat /models/fd/config.json
  ! grep -q xxx "$WORK/shim.out" || { cat "$WORK/shim.err" >&2; fail "2: A read B's file in A's cblobs/"; }
  [ "$st" != 0 ] || cmp -s "$WORK/shim.out" "$WORK/m/config.json" || fail "2: A read other bytes"
done
ok "2: B's file in A's cblobs/ with a record of another boot: never served (exit $st: $(head -c 160 "$WORK/shim.err"))"

fi

# ---- 3. B's correct blob passes; B chmods it 0640 and rewrites it in place while A holds it open ----
if only 3; then
new_shared rewrite
as "$B" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" w.safetensors >/dev/null 2>&1 || fail "3: B's _get"
[ "$(stat -c %u "$S/blobs/$w")" = "$B" ] || fail "3: test setup: the blob is not B's"
rm -f "$F/opened" "$F/rewritten"
as "$B" python3 - "$S/blobs/$w" "$F/opened" "$F/rewritten" <<'PY' &
import os, sys, time
p, opened, done = sys.argv[1:]
for _ in range(3000):
    if os.path.exists(opened):
        break
    time.sleep(0.01)
else:
    sys.exit("A never opened it")
os.chmod(p, 0o640)
fd = os.open(p, os.O_WRONLY)
n = os.fstat(fd).st_size
os.pwrite(fd, b"x" * n, 0)
os.close(fd)
open(done, "w").close()
PY
rewriter=$!
shimA "$R" bash -c 'exec 3</models/fd/w.safetensors || exit 9
  touch "$1"; while [ ! -e "$2" ]; do sleep 0.02; done; cat <&3' sh "$F/opened" "$F/rewritten"
wait "$rewriter" || fail "3: B's rewriter failed"
[ "$(head -c 1 "$S/blobs/$w")" = x ] || fail "3: test setup: B did not rewrite its blob"
[ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/w.safetensors" || {
  cat "$WORK/shim.err" >&2; fail "3: A's open descriptor read B's rewrite (exit $st)"; }
ok "3: B rewrote its checked blob in place (chmod 0640): A's descriptor still reads the real bytes (its own copy)"

fi

# ---- 4. B swaps blobs/<sha> between its good file and its forged one in a loop while A opens it ----
if only 4; then
new_shared swap
as "$B" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" config.json >/dev/null 2>&1 || fail "4: B's _get"
rm -f "$F/stop"
as "$B" python3 - "$S/blobs" "$cfg" "$WORK/m/config.json" "$F/stop" <<'PY' &
import os, sys
d, sha, real, stop = sys.argv[1:]
good = open(real, "rb").read()
bad = b"x" * len(good)
i = 0
while not os.path.exists(stop):
    t = "%s/.B%d" % (d, i % 2)
    fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o440)
    os.write(fd, bad if i % 2 else good)
    os.fchmod(fd, 0o440)
    os.close(fd)
    os.rename(t, "%s/%s" % (d, sha))
    i += 1
PY
swapper=$!
served=0
for i in $(seq 1 12); do
  shimA "$R" cat /models/fd/config.json
  ! grep -q xxx "$WORK/shim.out" || { touch "$F/stop"; cat "$WORK/shim.err" >&2; fail "4: A read B's bytes (try $i)"; }
  if [ "$st" = 0 ]; then cmp -s "$WORK/shim.out" "$WORK/m/config.json" || { touch "$F/stop"; fail "4: other bytes"; }; served=$((served + 1)); fi
done
touch "$F/stop"; wait "$swapper" || true
[ "$served" -gt 0 ] || fail "4: A was never served (a copy of its own should have been made from B's good file)"
ok "4: B swapped the name in a loop while A opened it 12 times: never B's bytes ($served served, the rest EIO)"
fi

# ---- 5. B made blobs/ and renames A's blob of a.json over A's blob of b.json ----
if only 5; then
S=$WORK/c.bdir
mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
for d in mounts tmp locks fails unflushed; do mkdir -m 03770 "$S/$d"; chgrp "$G" "$S/$d"; done
as "$B" mkdir -m 03770 "$S/blobs"
export HFS3_CACHE_DIR=$S
for f in a.json b.json; do
  as "$A" env HFS3_VERIFY=whole HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _get "$R" "$f" >/dev/null 2>&1 || fail "5: A's _get $f"
done
a=$(blob_of "$WORK/m/a.json") b=$(blob_of "$WORK/m/b.json")
[ "$(stat -c %u "$S/blobs/$b")" = "$A" ] || fail "5: test setup: A's blob of b.json"
records_gone
as "$B" bash -c "rm -f '$S/blobs/$b' && mv '$S/blobs/$a' '$S/blobs/$b'"
[ "$(stat -c %u:%s "$S/blobs/$b")" = "$A:$(stat -c %s "$WORK/m/b.json")" ] || fail "5: test setup: the rename"
shimA "$R" cat /models/fd/b.json
! cmp -s "$WORK/shim.out" "$WORK/m/a.json" || { cat "$WORK/shim.err" >&2; fail "5: A read a.json's bytes as b.json"; }
[ "$st" != 0 ] || cmp -s "$WORK/shim.out" "$WORK/m/b.json" || fail "5: A read other bytes"
ok "5: A's own blob renamed by the owner of blobs/ under another name: not served (exit $st: $(head -c 160 "$WORK/shim.err"))"
fi

# ---- 6. A's copy of B's blob never goes through B's tmp/ or into a cblobs/ B made ----
if only 6; then
S=$WORK/c.btmp
mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
for d in mounts blobs locks fails unflushed; do mkdir -m 03770 "$S/$d"; chgrp "$G" "$S/$d"; done
as "$B" mkdir -m 03770 "$S/tmp"
export HFS3_CACHE_DIR=$S
as "$B" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" config.json >/dev/null 2>&1 || fail "6: B's _get"
set +e; as "$A" env HFS3_VERIFY=whole HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _get "$R" config.json >"$WORK/out" 2>"$WORK/err"; st=$?; set -e
# (issue 44 item 7: the copy is A's 0600 file until hashed, then stamped as its sha256: B, who owns tmp/, can only
# move it under its own name or have it refused; a member's tmp/ no longer denies A every copy)
[ "$st" = 0 ] && [ "$(stat -c %u "$S/mounts/$KA/cblobs/$cfg")" = "$A" ] && cmp -s "$S/mounts/$KA/cblobs/$cfg" "$WORK/m/config.json" ||
  { cat "$WORK/err" >&2; fail "6: a copy through B's tmp/: exit $st"; }
ok "6: A's copy through a tmp/ that B made: hashed and stamped, in A's own cblobs/"
new_shared bcblobs
as "$B" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" config.json >/dev/null 2>&1 || fail "6: B's _get"
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "6: A's _index"
as "$B" mkdir -m 3770 "$S/mounts/$KA/cblobs"
set +e; as "$A" env HFS3_VERIFY=whole HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _get "$R" config.json >"$WORK/out" 2>"$WORK/err"; st=$?; set -e
# (issue 32 round 4 item 2: A, the mount directory's owner, moves B's cblobs/ aside and makes its own)
[ "$st" = 0 ] && [ "$(stat -c %u "$S/mounts/$KA/cblobs")" = "$A" ] && cmp -s "$S/mounts/$KA/cblobs/$cfg" "$WORK/m/config.json" ||
  { cat "$WORK/err" >&2; fail "6: a cblobs/ B made in A's mount directory: exit $st"; }
ok "6: no copy of A's into a cblobs/ that B made in A's mount directory: moved aside, A's own cblobs/ holds the copy"
fi

# ---- 7. B makes cblobs/ again in the moment after A moved B's first one aside ----
# The helper's check of the cblobs/ descriptor it opened is the only line left once the move aside is done: B's loop
# puts a cblobs/ of its own (made beside it and renamed in, so that it is never seen half made) back whenever A
# moved it, and strace's fault injection holds each of A's mkdirat 300 ms, so that B wins that race every time
# (LeakSanitizer, which cannot run under ptrace, is off for that one run of the sanitized helper).
if only 7; then
new_shared racecb
as "$B" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" config.json >/dev/null 2>&1 || fail "7: B's _get"
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "7: A's _index"
rm -f "$F/stop7"
as "$B" python3 - "$S/mounts/$KA" "$F/stop7" <<'PY' &
import os, sys, time
d, stop = sys.argv[1], sys.argv[2]
end = time.time() + 60
while not os.path.exists(stop) and time.time() < end:
    try:
        os.mkdir(d + "/cb.B")
        os.chmod(d + "/cb.B", 0o3770)
    except FileExistsError:
        pass
    try:
        os.rename(d + "/cb.B", d + "/cblobs")
    except OSError:
        pass
    time.sleep(0.002)
PY
racer=$!
for _ in $(seq 1 500); do [ "$(stat -c %u "$S/mounts/$KA/cblobs" 2>/dev/null)" = "$B" ] && break; sleep 0.01; done
set +e
as "$A" strace -f -o /dev/null -e trace=mkdir,mkdirat -e inject=mkdir,mkdirat:delay_enter=300ms \
  env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" HFS3_VERIFY=whole HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _get "$R" \
  config.json >"$WORK/out" 2>"$WORK/err"
st=$?
set -e
touch "$F/stop7"
wait "$racer" || true
ls -A "$S/mounts/$KA" | grep -q '^\.aside\.cblobs\.' || fail "7: test setup: A never moved B's cblobs/ aside"
[ "$(stat -c %u "$S/mounts/$KA/cblobs")" = "$B" ] || fail "7: test setup: B's loop did not put its cblobs/ back"
[ ! -e "$S/mounts/$KA/cblobs/$cfg" ] || fail "7: A's copy went into the cblobs/ B made in A's mount directory"
[ "$st" = 1 ] && grep -q "serves your files only from directories of yours or root's" "$WORK/err" ||
  { cat "$WORK/err" >&2; fail "7: a cblobs/ B put back after the move aside: exit $st, no line naming it"; }
ok "7: B put its cblobs/ back after A moved it aside: no copy of A's in it, one line: $(grep -m1 'serves your files' "$WORK/err" | cut -c1-200)"
fi

# ---- 8. B makes cblobs/ once more between the helper's look at A's mount directory and its copy ----
# The helper moves a member's names out of A's own mount directory when it opens it (hfs3_ownkey_aside), and once
# more where it makes cblobs/ for the copy: a plant in between is moved aside there, and the copy works. strace holds
# the helper 500 ms right after its first move aside (the first renameat2), while B plants once.
if only 8; then
new_shared plant2
as "$B" env HFS3_VERIFY=whole "$HFS3_BIN" _get "$R" config.json >/dev/null 2>&1 || fail "8: B's _get"
as "$A" env HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "8: A's _index"
as "$B" mkdir -m 3770 "$S/mounts/$KA/cblobs"
rm -f "$F/planted8"
as "$B" python3 - "$S/mounts/$KA" "$F/planted8" <<'PY' &
import os, sys, time
d, flag = sys.argv[1], sys.argv[2]
for _ in range(5000):
    if any(n.startswith(".aside.cblobs.") for n in os.listdir(d)):
        break
    time.sleep(0.002)
else:
    sys.exit("A never moved B's first cblobs/ aside")
os.mkdir(d + "/cb.B")
os.chmod(d + "/cb.B", 0o3770)
os.rename(d + "/cb.B", d + "/cblobs")
open(flag, "w").close()
PY
planter=$!
set +e
as "$A" strace -f -o /dev/null -e trace=renameat2 -e inject=renameat2:delay_exit=500ms:when=1 \
  env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" HFS3_VERIFY=whole HFS3_VERIFY_FOREIGN=1 "$HFS3_BIN" _get "$R" \
  config.json >"$WORK/out" 2>"$WORK/err"
st=$?
set -e
wait "$planter" || fail "8: B's planter failed"
[ -e "$F/planted8" ] && [ "$(ls -A "$S/mounts/$KA" | grep -c '^\.aside\.cblobs\.')" = 2 ] ||
  { cat "$WORK/err" >&2; fail "8: test setup: B's second cblobs/ was not planted and moved aside ($(ls -A "$S/mounts/$KA" | tr '\n' ' '))"; }
[ "$st" = 0 ] && [ "$(stat -c %u "$S/mounts/$KA/cblobs")" = "$A" ] && cmp -s "$S/mounts/$KA/cblobs/$cfg" "$WORK/m/config.json" ||
  { cat "$WORK/err" >&2; fail "8: B's cblobs/ planted after the helper opened A's mount directory: exit $st"; }
ok "8: B's cblobs/ planted between the helper's two looks: moved aside, A's own cblobs/ holds the copy"
fi
echo "all ok"
