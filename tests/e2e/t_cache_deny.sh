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
[ "$(id -u)" = 0 ] || skip_test root "needs root (to act as two users)"
command -v setpriv >/dev/null || skip_test setpriv "needs setpriv"

A=64101 B=64102 G=64100
s3env_start "$WORK"
trap 's3env_stop' EXIT
chmod 0755 "$WORK" "$WORK/home"
chmod 0644 "$RCLONE_CONFIG"
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

as() {
  local uid=$1; shift
  setpriv --reuid="$uid" --regid="$G" --clear-groups env HOME="$WORK/home" bash -c 'umask 077; exec "$@"' as "$@"
}
runA() { set +e; as "$A" "$HFS3_BIN" "$@" >"$WORK/out" 2>"$WORK/err"; st=$?; set -e; }
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
        # a descriptor number is reused once closed (close is not traced): any other file opened on it ends
        # its entry, else the hash of A's own file on a reused number reads as the planted one's
        if base in shas and ret >= 0:
            fds[(pid, ret)] = base
        elif ret >= 0:
            fds.pop((pid, ret), None)
        continue
    fd = args.split(",")[4].strip() if call == "mmap" else args.split(",")[0]
    if fd.strip().lstrip("-").isdigit() and (pid, int(fd)) in fds and (call == "mmap" or ret > 0):
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
echo "all ok"
