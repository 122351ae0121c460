#!/usr/bin/env bash
# t_cache_deny.sh - a member B of a shared cache can deny the victim A service only while B's plant is what A
# needs, never for good with a few bytes (issue 32 items 5-6), as real uids A (64101) and B (64102), group G:
#  5. B's 37-byte record unflushed/<sha> with another boot id (readable, or 0600) beside A's blob, or beside
#     root's prewarmed blob: A's shim still reads the file (online, HFS3_OFFLINE=1, HFS3_VERIFY_FOREIGN=1) and
#     A's helper does not hash it again: a record speaks only for a file of its own user (or root). Root's
#     record does count: the EIO then names it and whom to ask.
#  6. a sparse 1 TiB file of B's in blobs/ and a sparse .part in tmp/ cost B no disk: A's fetch under
#     HFS3_CACHE_MAX=1G still fits (a member's files count at the blocks they hold). The detached flush of A's
#     never hashes a file that is not A's own, under A's record (B's file planted where A's was) or under B's
#     record, nor one of A's larger than its fetch recorded: strace of the flush shows no read of them.
#  7. B's symlinks for mounts/ancestors/models and for A's own mounts/anc.<uid>: under HFS3_VERIFY_FOREIGN=1 A's
#     `cd /models; pwd; ls` still work, from a skeleton directory only A can write (shim/tree.c anc_root).
# Needs root and setpriv (distinct uids); exits 77 with "SKIP: ..." otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
source "$HFS3_ROOT/tests/e2e/cache_users.sh"
cache_users_start
mkdir -p "$WORK/m"
printf '{"architectures": ["Test"], "hidden_size": 64}\n' >"$WORK/m/config.json"
head -c 150000 /dev/urandom >"$WORK/m/tokenizer.json"
head -c $((9 << 20)) /dev/urandom >"$WORK/m/model.safetensors"
printf 'another file\n' >"$WORK/m/extra.txt"
chmod -R a+rX "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
R=s3test:models/m1
cfg=$(blob_of "$WORK/m/config.json")
tok=$(blob_of "$WORK/m/tokenizer.json")
big=$(blob_of "$WORK/m/model.safetensors")
K=$(python3 -c '
import sys
h = 1469598103934665603
for b in sys.argv[1].encode():
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print("%016x" % h)' "$R")
OTHER_BOOT=00000000-dead-4bad-8000-000000000000

# shimA ENV... -- FILE: A's cat of /models/m1/FILE through the shim; it must be the real file
shimA_reads() {
  local what=$1 f=$2; shift 2
  set +e
  setpriv --reuid="$A" --regid="$G" --clear-groups env HOME="$WORK/home" HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
    HFS3_MOUNTS="/models/m1=$R" "$@" LD_PRELOAD="$HFS3_SHIM" cat "/models/m1/$f" >"$WORK/shim.out" 2>"$WORK/shim.err"
  st=$?
  set -e
  [ "$st" = 0 ] && cmp -s "$WORK/shim.out" "$WORK/m/$f" ||
    { cat "$WORK/shim.err" >&2; fail "$what: A's cat of $f (exit $st)"; }
}
new_shared() {
  S=$WORK/shared.$1
  mkdir "$S"; chgrp "$G" "$S"; chmod 03770 "$S"
  HFS3_CACHE_DIR=$S "$HFS3_BIN" _index "$R" >/dev/null 2>&1 || fail "root _index in $S"
  export HFS3_CACHE_DIR=$S
}

# ---- 5. B's record of another boot beside A's blob ----
new_shared rec
runA fetch "$R"
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's fetch"; }
wait_flushed "$S"
[ "$(stat -c %u "$S/blobs/$tok")" = "$A" ] || fail "test setup: the blob is not A's"
as "$B" bash -c "umask 027; echo $OTHER_BOOT >'$S/unflushed/$tok'"   # readable by A (0640)
as "$B" bash -c "echo $OTHER_BOOT >'$S/unflushed/$cfg'"              # 0600: A cannot even read it
for f in tokenizer.json config.json; do
  shimA_reads "B's record beside A's blob (online)" "$f"
  shimA_reads "B's record beside A's blob (HFS3_OFFLINE=1)" "$f" HFS3_OFFLINE=1
  shimA_reads "B's record beside A's blob (HFS3_VERIFY_FOREIGN=1)" "$f" HFS3_VERIFY_FOREIGN=1
done
ok "B's records of another boot (0640 and 0600) beside A's blobs: A's shim reads them online, offline and under HFS3_VERIFY_FOREIGN=1"
HFS3_LOG=info runA _get "$R" tokenizer.json
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's _get beside B's record"; }
! grep -q "another boot" "$WORK/err" || { cat "$WORK/err" >&2; fail "A's helper hashed its blob again for B's record"; }
[ "$(stat -c %u "$S/blobs/$tok")" = "$A" ] || fail "A's blob was replaced"
ok "A's _get beside B's record: served, not hashed again"
# root's record of another boot counts (root may deny anything): A's helper verifies the blob but cannot remove
# the record; the shim's EIO says so, naming the record and whom to ask (never "without a reason")
echo $OTHER_BOOT >"$S/unflushed/$big"; chmod 0644 "$S/unflushed/$big"
set +e
setpriv --reuid="$A" --regid="$G" --clear-groups env HOME="$WORK/home" HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
  HFS3_MOUNTS="/models/m1=$R" LD_PRELOAD="$HFS3_SHIM" cat /models/m1/model.safetensors >/dev/null 2>"$WORK/shim.err"
st=$?
set -e
[ "$st" != 0 ] && grep -q "unflushed/$big (uid 0's)" "$WORK/shim.err" && grep -q "ask uid 0 or root" "$WORK/shim.err" ||
  { cat "$WORK/shim.err" >&2; fail "root's record: exit $st, the message does not name the record"; }
ok "root's record of another boot: EIO that names it ($(grep -m1 unflushed "$WORK/shim.err" | cut -c1-160))"

# root's prewarmed blobs (an init container's fetch), B's record beside them
new_shared root
"$HFS3_BIN" fetch "$R" >/dev/null 2>&1 || fail "root's prewarm"
wait_flushed "$S"
as "$B" bash -c "umask 027; echo $OTHER_BOOT >'$S/unflushed/$tok'"
shimA_reads "B's record beside root's blob (online)" tokenizer.json
shimA_reads "B's record beside root's blob (HFS3_OFFLINE=1)" tokenizer.json HFS3_OFFLINE=1
ok "B's record beside root's prewarmed blob: A's shim reads it online and offline"

# ---- 6. sparse plants: the budget ----
new_shared budget
as "$B" truncate -s 1T "$S/blobs/$(printf '%064d' 1)"
as "$B" truncate -s 1T "$S/tmp/$(printf '%064d' 2).deadbeef.part"
as "$B" chmod 0440 "$S/blobs/$(printf '%064d' 1)"
HFS3_CACHE_MAX=1G runA fetch "$R"
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's fetch under HFS3_CACHE_MAX=1G beside B's sparse 1 TiB files (exit $st)"; }
ok "B's sparse 1 TiB files in blobs/ and tmp/: A's fetch under HFS3_CACHE_MAX=1G fits"

# ---- 6. sparse plants: the flush hashes only A's own files, no larger than their fetch recorded ----
new_shared flush
# a: A's chunk-checked file and its record, the file gone (a crash, A's own rm): B plants a sparse file of the
#    same size there
HFS3_VERIFY=chunks HFS3_TEST_NO_FLUSH=1 runA _get "$R" model.safetensors
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's chunk-checked _get"; }
[ -f "$S/mounts/$K/cblobs/$big" ] && [ -e "$S/unflushed/$big.m$K" ] || fail "test setup: no cblobs/ file and record"
as "$A" rm -f "$S/mounts/$K/cblobs/$big"
as "$B" bash -c "truncate -s $((9 << 20)) '$S/mounts/$K/cblobs/$big' && chmod 0440 '$S/mounts/$K/cblobs/$big'"
# b: B's own record (this boot) and a sparse file of B's in the mount's cblobs/
as "$B" bash -c "umask 027; cat /proc/sys/kernel/random/boot_id >'$S/unflushed/$tok.m$K' &&
  truncate -s 4G '$S/mounts/$K/cblobs/$tok' && chmod 0440 '$S/mounts/$K/cblobs/$tok'"
# c: A's own file, larger than its fetch installed (its record says so)
HFS3_VERIFY=chunks HFS3_TEST_NO_FLUSH=1 runA _get "$R" config.json
[ -e "$S/unflushed/$cfg.m$K" ] || { cat "$WORK/err" >&2; fail "test setup: no record of config.json"; }
as "$A" bash -c "rm -f '$S/mounts/$K/cblobs/$cfg' && truncate -s 4G '$S/mounts/$K/cblobs/$cfg' &&
  chmod 0440 '$S/mounts/$K/cblobs/$cfg'"
# A's next helper run spawns the flush; strace -f follows it (detached) and returns once it is over
set +e
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -qq -e trace=openat,read,pread64,mmap \
  -o "$WORK/flush.strace" setpriv --reuid="$A" --regid="$G" --clear-groups env HOME="$WORK/home" \
  "$HFS3_BIN" _get "$R" extra.txt >"$WORK/out" 2>"$WORK/err"
st=$?
set -e
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's _get (exit $st)"; }
python3 - "$WORK/flush.strace" "$big" "$tok" "$cfg" <<'PY' || fail "A's flush hashed a planted or oversized file"
import re, sys
shas = set(sys.argv[2:])
fds, bad = {}, []
for line in open(sys.argv[1]):
    m = re.match(r"(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)", line)
    if not m:
        continue
    pid, call, args, ret = m.group(1), m.group(2), m.group(3), int(m.group(4))
    if call == "openat":
        name = re.search(r'"([^"]*)"', args)
        base = name.group(1).rsplit("/", 1)[-1] if name else ""
        if ret >= 0:   # a descriptor number reused (close is not traced) names the file opened last
            fds[(pid, ret)] = base if base in shas else None
        continue
    fd = args.split(",")[4].strip() if call == "mmap" else args.split(",")[0]
    if fd.strip().lstrip("-").isdigit() and fds.get((pid, int(fd))) and (call == "mmap" or ret > 0):
        bad.append("%s %s of %s" % (pid, call, fds[(pid, int(fd))]))
if bad:
    print("read:", bad[:5], file=sys.stderr)
    sys.exit(1)
PY
[ ! -e "$S/blobs/$big" ] && [ ! -e "$S/blobs/$tok" ] && [ ! -e "$S/blobs/$cfg" ] || fail "a planted file was promoted"
[ ! -e "$S/unflushed/$big.m$K" ] || fail "A's record outlived the file it spoke for"
[ ! -e "$S/mounts/$K/cblobs/$cfg" ] || fail "A's oversized file stayed"
ok "A's flush hashes none of: B's file under A's record, B's file under B's record, A's file larger than recorded"
# ---- 7. B takes the names of A's ancestor skeleton first: under HFS3_VERIFY_FOREIGN=1 A's is A's own ----
new_shared anc
mkdir -p "$WORK/elsewhere/models"; chmod -R a+rX "$WORK/elsewhere"
as "$B" bash -c "mkdir -m 3770 '$S/mounts/ancestors' && ln -s '$WORK/elsewhere/models' '$S/mounts/ancestors/models' &&
  ln -s '$WORK/elsewhere' '$S/mounts/anc.$A' && mkdir -m 0755 '$S/mounts/anc.$A.0000000000000001'"
ancA() {
  set +e
  setpriv --reuid="$A" --regid="$G" --clear-groups env HOME="$WORK/home" HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
    HFS3_VERIFY_FOREIGN=1 HFS3_MOUNTS="/models/m1=$R" LD_PRELOAD="$HFS3_SHIM" bash -c "$1" >"$WORK/shim.out" 2>"$WORK/shim.err"
  st=$?
  set -e
}
for i in 1 2; do   # the second time finds the directory the first made
  ancA 'cd /models && pwd && ls && ls /models && cat m1/config.json'
  [ "$st" = 0 ] && [ "$(sed -n 1p "$WORK/shim.out")" = /models ] && [ "$(sed -n 2p "$WORK/shim.out")" = m1 ] &&
    [ "$(sed -n 3p "$WORK/shim.out")" = m1 ] && grep -q architectures "$WORK/shim.out" ||
    { cat "$WORK/shim.out" "$WORK/shim.err" >&2; fail "cd /models; ls with B's names taken first (run $i, exit $st)"; }
done
n=$(find "$S/mounts" -maxdepth 1 -name "anc.$A.*" -user "$A" | wc -l)
[ "$n" = 1 ] || fail "A made $n ancestor directories of its own, expected 1"
[ -z "$(ls -A "$WORK/elsewhere/models")" ] || fail "something was made in B's directory"
ok "B's mounts/ancestors/models and mounts/anc.$A symlinks: under HFS3_VERIFY_FOREIGN=1 A's cd /models, pwd, ls work (A's own skeleton)"

# ---- round 4, 1. B takes A's predictable mounts/<K_A> first (a directory of B's, a symlink) ----
new_shared mdir
KA=$(python3 -c '
import sys
h = 1469598103934665603
for b in sys.argv[1].encode() + b"\0uid=" + sys.argv[2].encode():
    h = ((h ^ b) * 1099511628211) % (1 << 64)
print("%016x" % h)' "$R" "$A")
as "$B" bash -c "mkdir -m 3770 '$S/mounts/$KA' && mkdir -m 0755 '$S/mounts/${KA:0:8}00000001' &&
  echo '$R' >'$S/mounts/${KA:0:8}00000001/remote'"
for i in 1 2; do   # the second process finds the directory the first made
  shimA_reads "B's directory at A's mounts/<K_A> (process $i)" config.json HFS3_VERIFY_FOREIGN=1
  shimA_reads "B's directory at A's mounts/<K_A> (process $i)" model.safetensors HFS3_VERIFY_FOREIGN=1
done
HFS3_VERIFY_FOREIGN=1 runA fetch "$R"
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's fetch with B's directory at mounts/<K_A> (exit $st)"; }
own=$(find "$S/mounts" -mindepth 1 -maxdepth 1 -name "${KA:0:8}*" -user "$A")
[ "$(echo "$own" | wc -w)" = 1 ] || fail "A has $(echo "$own" | wc -w) mount directories for $R, expected 1: $own"
[ -f "$own/index" ] || fail "A's own $own has no index"
[ -f "$own/cblobs/$big" ] || [ -f "$S/blobs/$big" ] || fail "A's shim and helper used different directories"
[ -z "$(ls -A "$S/mounts/$KA")" ] || fail "something was written into B's directory"
ok "B's directory at A's mounts/<K_A>: A's shim and fetch (HFS3_VERIFY_FOREIGN=1) work in A's own $(basename "$own")"
new_shared mlink
mkdir -p "$WORK/elsewhere.m"; chmod 0777 "$WORK/elsewhere.m"
as "$B" ln -s "$WORK/elsewhere.m" "$S/mounts/$KA"
shimA_reads "B's symlink at A's mounts/<K_A>" tokenizer.json HFS3_VERIFY_FOREIGN=1
[ -z "$(ls -A "$WORK/elsewhere.m")" ] || fail "something was written through B's symlink"
ok "B's symlink at A's mounts/<K_A>: A's shim (HFS3_VERIFY_FOREIGN=1) works in a directory of its own"

# ---- round 4, 2. B plants in A's own mount directory (sticky, group-writable): cblobs/ itself, cblobs/<sha> ----
new_shared cbdir
HFS3_VERIFY_FOREIGN=1 runA _index "$R"
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's _index"; }
[ "$(stat -c %u "$S/mounts/$KA")" = "$A" ] || fail "test setup: mounts/<K_A> is not A's"
as "$B" bash -c "mkdir -m 3770 '$S/mounts/$KA/cblobs' && mkdir '$S/mounts/$KA/cblobs/$big'"
shimA_reads "B's cblobs/ in A's own mount directory" model.safetensors HFS3_VERIFY_FOREIGN=1
[ "$(stat -c %u "$S/mounts/$KA/cblobs")" = "$A" ] || fail "A's cblobs/ is not A's"
ok "B's cblobs/ made first in A's own mount directory: moved aside, A's shim (HFS3_VERIFY_FOREIGN=1) reads the file"
new_shared cbsha
HFS3_VERIFY_FOREIGN=1 runA _get "$R" config.json
[ "$st" = 0 ] && [ "$(stat -c %u "$S/mounts/$KA/cblobs")" = "$A" ] || { cat "$WORK/err" >&2; fail "test setup: A's cblobs/"; }
as "$B" bash -c "mkdir '$S/mounts/$KA/cblobs/$big' && mkdir '$S/mounts/$KA/cblobs/$tok' && touch '$S/mounts/$KA/cblobs/$big/x'"
shimA_reads "B's directory at A's cblobs/<sha>" model.safetensors HFS3_VERIFY_FOREIGN=1
shimA_reads "B's directory at A's cblobs/<sha>" tokenizer.json HFS3_VERIFY_FOREIGN=1
ok "B's directories at A's own cblobs/<sha>: moved aside, A's shim (HFS3_VERIFY_FOREIGN=1) reads its own copies"

# ---- round 4, 3. B's bad plants at blobs/<sha> under HFS3_VERIFY_FOREIGN=1: A downloads its own copy ----
new_shared plants
as "$B" bash -c "umask 027; mkdir -p '$S/blobs' && : >'$S/blobs/$cfg' &&
  truncate -s $(stat -c %s "$WORK/m/tokenizer.json") '$S/blobs/$tok' &&
  cp '$WORK/m/model.safetensors' '$S/tmp/b.link' && ln '$S/tmp/b.link' '$S/blobs/$big' &&
  mkdir '$S/blobs/$(blob_of "$WORK/m/extra.txt")'"
for f in config.json tokenizer.json model.safetensors extra.txt; do
  for i in 1 2; do   # the second open finds A's own copy
    shimA_reads "B's bad plant at blobs/<sha> of $f (open $i)" "$f" HFS3_VERIFY_FOREIGN=1
  done
  sha=$(blob_of "$WORK/m/$f")
  [ -n "$(find "$S/mounts" -path "*/cblobs/$sha" -user "$A" -links 1)" ] || fail "no own copy of $f in A's cblobs/"
done
ok "B's 0-byte, sparse, hard-linked and directory plants at blobs/<sha>: A's shim (HFS3_VERIFY_FOREIGN=1) reads its own downloaded copy"
# offline, A's own copy beside the plant is what is served
as "$B" bash -c "mkdir -p '$S/blobs' 2>/dev/null; : >'$S/blobs/$(printf '%064d' 0)'"
HFS3_VERIFY_FOREIGN=1 HFS3_OFFLINE=1 runA _get "$R" config.json
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's offline _get of its own copy"; }
ok "offline, A's own copy is what is served beside B's plant"
# ---- round 4, 4. those copies stay beside B's plants after the flush: gc still counts and evicts them ----
for _ in $(seq 1 300); do [ -z "$(find "$S/unflushed" -name '*.m*' -print -quit)" ] && break; sleep 0.1; done
[ -z "$(find "$S/unflushed" -name '*.m*' -print -quit)" ] || fail "the flush did not finish: $(ls "$S/unflushed")"
[ -n "$(find "$S/mounts" -path "*/cblobs/$big" -user "$A")" ] || fail "test setup: the flush did not keep A's copy"
HFS3_VERIFY_FOREIGN=1 runA cache gc --max 0
[ -z "$(find "$S/mounts" -path "*/cblobs/*" -user "$A" -type f)" ] ||
  { cat "$WORK/out" "$WORK/err" >&2; fail "gc --max 0 left A's kept copies: $(find "$S/mounts" -path "*/cblobs/*" -user "$A" -type f)"; }
ok "A's own copies kept beside B's plants after the flush: found and evicted by gc --max 0"
# a fetch that fails beside B's plant, with no copy of A's own: the open fails with the helper's reason, not with a
# line about the plant the shim would not serve anyway (round 5: no test told the two apart). The server refuses
# A's requests (a wrong secret); A's own manifest is fresh, so only the file's fetch asks it
new_shared failplant
HFS3_VERIFY_FOREIGN=1 runA _index "$R"
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's own manifest"; }
as "$B" bash -c "umask 027; mkdir -p '$S/blobs' && truncate -s $(stat -c %s "$WORK/m/tokenizer.json") '$S/blobs/$tok'"
set +e
setpriv --reuid="$A" --regid="$G" --clear-groups env HOME="$WORK/home" HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
  HFS3_MOUNTS="/models/m1=$R" HFS3_VERIFY_FOREIGN=1 HFS3_MANIFEST_TTL=100000 RCLONE_CONFIG_S3TEST_SECRET_ACCESS_KEY=wrong \
  LD_PRELOAD="$HFS3_SHIM" cat /models/m1/tokenizer.json >"$WORK/shim.out" 2>"$WORK/shim.err"
st=$?
set -e
[ "$st" != 0 ] && [ ! -s "$WORK/shim.out" ] || { cat "$WORK/shim.err" >&2; fail "a failed fetch beside B's plant: exit $st, or bytes"; }
grep -q "tokenizer.json: fetch failed: .* 403 " "$WORK/shim.err" ||
  { cat "$WORK/shim.err" >&2; fail "a failed fetch beside B's plant: the helper's reason is not the open's"; }
ok "a failed fetch beside B's plant, no copy of A's own: EIO with the helper's reason ($(grep -m1 "fetch failed" "$WORK/shim.err" | cut -c1-160))"
# ---- round 4 review: B holds mounts/<K_A> while A's process starts, then empties that name ----
# A's process works in its own directory of the other shape; the helpers it runs later must find that one too, not
# a new mounts/<K_A> of A's: with B's bad plant at blobs/<sha> A's own copy would land where the shim never looks,
# and every open of that file by the process would be EIO for as long as it runs
new_shared toggle
as "$B" mkdir -m 3770 "$S/mounts/$KA"
mkdir -m 0777 "$WORK/sync"
set +e
setpriv --reuid="$A" --regid="$G" --clear-groups env HOME="$WORK/home" HFS3_HELPER="$HFS3_BIN" HFS3_PREFETCH=0 \
  HFS3_VERIFY_FOREIGN=1 HFS3_MOUNTS="/models/m1=$R" LD_PRELOAD="$HFS3_SHIM" python3 -c '
import os, sys, time
w = sys.argv[1]
open("/models/m1/config.json", "rb").read()
open(w + "/sync/step1", "w").close()
while not os.path.exists(w + "/sync/go"):
    time.sleep(0.05)
want = open(w + "/m/model.safetensors", "rb").read()
for i in range(2):
    try:
        print("open", i, open("/models/m1/model.safetensors", "rb").read() == want, flush=True)
    except OSError as e:
        print("open", i, e, flush=True)
' "$WORK" >"$WORK/p1.out" 2>"$WORK/p1.err" &
p1=$!
for _ in $(seq 1 200); do [ -e "$WORK/sync/step1" ] && break; sleep 0.05; done
[ -e "$WORK/sync/step1" ] || { cat "$WORK/p1.err" >&2; fail "test setup: A's process did not read config.json"; }
as "$B" bash -c "rmdir '$S/mounts/$KA' && umask 027 && : >'$S/blobs/$big'"
: >"$WORK/sync/go"
wait $p1
set -e
[ "$(grep -c True "$WORK/p1.out")" = 2 ] ||
  { cat "$WORK/p1.out" "$WORK/p1.err" >&2; fail "B emptied mounts/<K_A> under A's running process: A's opens failed"; }
[ ! -e "$S/mounts/$KA" ] || fail "A made mounts/<K_A> beside its own directory of the other shape"
ok "B empties mounts/<K_A> while A's process runs (B's plant at blobs/<sha>): the process and its helpers keep one directory"
# ---- round 4 review: B's names in A's fresh own mount directory (between its mkdir and its first files) ----
# a directory at index, lock or tree (A's rename cannot replace one) refused A the REMOTE until B or root removed
# it; as the directory's owner A moves it aside (include/hfs3/ownkey.h hfs3_ownkey_aside), shim and helper alike
for name in lock index tree; do
  new_shared "n$name"
  as "$A" bash -c "mkdir '$S/mounts/$KA' && chmod 3770 '$S/mounts/$KA'"   # A's, as the load's mkdir leaves it
  as "$B" bash -c "mkdir -m 0750 '$S/mounts/$KA/$name' && touch '$S/mounts/$KA/$name/x'"
  shimA_reads "B's directory at $name in A's own mount directory" config.json HFS3_VERIFY_FOREIGN=1
  [ "$(stat -c %u "$S/mounts/$KA/$name")" = "$A" ] || fail "B's $name stayed in A's own mount directory"
done
new_shared netag   # the helper alone (a fetch, no shim)
as "$A" bash -c "mkdir '$S/mounts/$KA' && chmod 3770 '$S/mounts/$KA'"
as "$B" mkdir -m 0750 "$S/mounts/$KA/etag"
HFS3_VERIFY_FOREIGN=1 runA _index "$R"
[ "$st" = 0 ] || { cat "$WORK/err" >&2; fail "A's _index beside B's directory at etag in A's own mount directory"; }
ok "B's directories at lock, index and tree (shim), etag (helper) in A's fresh own mount directory: moved aside, A reads the file"
echo "all ok"
