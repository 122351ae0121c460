#!/usr/bin/env bash
# t_fetch_tune.sh - the connections per file follow the rate when HFS3_CONNECTIONS is unset (lib/fetch.c,
# hfs3_fetch_tune): behind a proxy that paces each response, as S3 paces each request, the count doubles from 2
# while each doubling raises the rate (at least to 8: the proxy sees that many connections); HFS3_CONNECTIONS=3 is
# exactly 3, with no tuning; straight to the local server it is tuned too and the blob is right; a server that
# takes 3 requests at once and answers SlowDown (503) to one more: the file still comes (the refused connections
# leave, their ranges go to the others), and the tuner stops doubling; a user at the thread limit (ulimit -u) with
# room for one worker, or none: each file is downloaded on the thread it has instead of failing; the next file starts once every range of
# the one before has started, beside its last ranges, on the connections they leave (never more requests at once
# than the count: a server that takes that many refuses none).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
cleanup() { stop_proxies; s3env_stop; }
s3env_start "$WORK"; trap cleanup EXIT
mkdir -p "$WORK/m"
head -c $((160 << 20)) /dev/urandom >"$WORK/m/model.safetensors"
fetch_publish "$WORK/m" s3test:models/t
want=$(blob_of "$WORK/m/model.safetensors")
start_proxy paced $((10 << 20))   # each response at most 10 MiB/s: one connection carries a slice of the link
start_proxy quick $((40 << 20))
start_proxy busy $((10 << 20)) "--max-busy 3"
unset HFS3_CONNECTIONS

# distinct client connections that sent GETs of the model, from a proxy log
conns() { awk '$2 == "GET" && index($3, "model.safetensors") { for (i = 4; i <= NF; i++) if ($i ~ /^conn=/) print $i }' "$1" | sort -u | wc -l; }

# paced: 2 -> 4 -> 8 at least, and the proxy saw as many connections
HFS3_LOG=debug HFS3_CACHE_DIR=$WORK/c1 "$HFS3_BIN" fetch paced:models/t >"$WORK/out1" 2>"$WORK/err1" ||
  { cat "$WORK/err1"; fail "fetch through the paced proxy"; }
grep -q "connections per file: 2 -> 4 " "$WORK/err1" || { grep connections "$WORK/err1"; fail "did not go from 2 to 4 connections though 4 carry twice what 2 do"; }
grep -q "connections per file: 4 -> 8 " "$WORK/err1" || { grep connections "$WORK/err1"; fail "did not go from 4 to 8 connections though 8 carry twice what 4 do"; }
n=$(conns "$WORK/paced.log")
[ "$n" -ge 8 ] || fail "the proxy saw $n connections, want 8 or more"
[ "$(blob_of "$WORK/c1/blobs/$want")" = "$want" ] || fail "blob differs"
ok "paced at 10 MiB/s per response: $(grep -o 'connections per file: .*' "$WORK/err1" | tr '\n' ';') $n connections seen"

# HFS3_CONNECTIONS=3: exactly 3, nothing tuned
HFS3_CONNECTIONS=3 HFS3_LOG=debug HFS3_CACHE_DIR=$WORK/c2 "$HFS3_BIN" fetch quick:models/t >"$WORK/out2" 2>"$WORK/err2" ||
  { cat "$WORK/err2"; fail "fetch with HFS3_CONNECTIONS=3"; }
! grep -q "connections per file" "$WORK/err2" || fail "HFS3_CONNECTIONS=3 was tuned: $(grep connections "$WORK/err2")"
n=$(conns "$WORK/quick.log")
[ "$n" -eq 3 ] || fail "HFS3_CONNECTIONS=3 made $n connections"
ok "HFS3_CONNECTIONS=3: 3 connections, no tuning"

# the next file starts once every range of the one before has started, beside its last ranges: 2 files of 3 ranges
# (8 MiB chunks) on 2 connections paced at 20 MiB/s: the connection that has no third range to take starts the
# second file while the other still receives the first file's third range (0.4 s). Before, the second file waited
# for it, and at every file the connections that finished first sat idle (S3 paces each connection). The server
# takes 2 requests at once (a gateway's limit, HFS3_CONNECTIONS=2 set to match it): the second file has one
# connection until the first file's third range is in, never a third request, which would be refused (503;
# with the retries spent before that range is in, the file failed)
mkdir -p "$WORK/m2"
for i in 1 2; do head -c $((24 << 20)) /dev/urandom >"$WORK/m2/model-0000$i-of-00002.safetensors"; done
fetch_publish "$WORK/m2" s3test:models/two
start_proxy lanes $((20 << 20)) "--max-busy 2"
HFS3_CONNECTIONS=2 HFS3_CACHE_DIR=$WORK/c6 "$HFS3_BIN" fetch lanes:models/two >"$WORK/out6" 2>"$WORK/err6" ||
  { cat "$WORK/err6"; fail "fetch of two files"; }
for f in "$WORK"/m2/*; do b=$(blob_of "$f"); [ "$(blob_of "$WORK/c6/blobs/$b")" = "$b" ] || fail "$f differs (two files)"; done
# per file: its GETs, when the last one was sent, when the first and the last reply ended (the proxy's t=)
overlap=$(python3 - "$WORK/lanes.log" <<'PY'
import sys, collections
f = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w = line.split()
    if w[1] == "GET" and ".safetensors" in w[2]:
        t = next(x for x in w if x.startswith("t="))[2:].split("-")
        f[w[2].split("/")[-1]].append((float(t[0]), float(t[1])))
a, b = sorted(f.values(), key=lambda v: min(s for s, _ in v))
assert len(a) == 3 and len(b) == 3, (len(a), len(b))
last_start_a, end_a, start_b = max(s for s, _ in a), max(e for _, e in a), min(s for s, _ in b)
print("%.3f %.3f" % (start_b - last_start_a, end_a - start_b))
PY
) || fail "lanes.log: $(cat "$WORK/lanes.log")"
read -r after before <<<"$overlap"
# (the proxy reads a request some milliseconds late while its other threads stream: "after" may be -0.00x)
python3 -c "import sys; sys.exit(not ($after > -0.05 and $before >= 0.2))" ||
  { cat "$WORK/lanes.log"; fail "the second file's first GET came ${after} s after the first file's last GET started and ${before} s before it ended: want after every range of the first had started (> -0.05 s) and before its last reply ended (>= 0.2 s)"; }
refused=$(grep -c ' busy-503 ' "$WORK/lanes.log" || true)
[ "$refused" = 0 ] || { cat "$WORK/lanes.log"; fail "two files on HFS3_CONNECTIONS=2 sent a third request at once $refused time(s) (503 from a server that takes 2)"; }
ok "two files: the second started ${before} s before the first file's last range ended, after all its ranges had started, never more than 2 requests at once"

# the next file's workers go on with the connections of the last one's (hfs3_s3_park): 6 files of one range each,
# one after another, over one connection (two at most: a lane's next file may start before the last worker parked
# its own); before, each file opened its own (6)
mkdir -p "$WORK/m7"
for i in 1 2 3 4 5 6; do head -c $((1 << 20)) /dev/urandom >"$WORK/m7/file$i.bin"; done
fetch_publish "$WORK/m7" s3test:models/small
start_proxy reuse
HFS3_CONNECTIONS=2 HFS3_CACHE_DIR=$WORK/c7 "$HFS3_BIN" fetch reuse:models/small >"$WORK/out7" 2>"$WORK/err7" ||
  { cat "$WORK/err7"; fail "fetch of six small files"; }
for f in "$WORK"/m7/*; do b=$(blob_of "$f"); [ "$(blob_of "$WORK/c7/blobs/$b")" = "$b" ] || fail "$f differs (six files)"; done
n=$(awk '$2 == "GET" && index($3, "/file") { for (i = 4; i <= NF; i++) if ($i ~ /^conn=/) print $i }' "$WORK/reuse.log" | sort -u | wc -l)
[ "$n" -ge 1 ] && [ "$n" -le 2 ] || { cat "$WORK/reuse.log"; fail "six files came over $n connections: each opened its own, want them reused (1 or 2)"; }
ok "six small files over $n connection(s)"

# straight to the server: tuned (to where depends on the machine), the blob is right
HFS3_LOG=debug HFS3_CACHE_DIR=$WORK/c3 "$HFS3_BIN" fetch s3test:models/t >"$WORK/out3" 2>"$WORK/err3" ||
  { cat "$WORK/err3"; fail "fetch from the server"; }
grep -q "connections per file: " "$WORK/err3" || fail "no count tuned on 160 MiB from loopback"
[ "$(blob_of "$WORK/c3/blobs/$want")" = "$want" ] || fail "blob differs"
ok "loopback: $(grep -o 'connections per file: .*' "$WORK/err3" | tr '\n' ';')"

# at most 3 requests at once, SlowDown beyond (HFS3_RETRIES=1: a refused range gives up fast): 2 -> 4, and the
# connection beyond 3 is refused; before, that failed range failed the file (as it would with the fixed 8)
HFS3_RETRIES=1 HFS3_LOG=debug HFS3_CACHE_DIR=$WORK/c4 "$HFS3_BIN" fetch busy:models/t >"$WORK/out4" 2>"$WORK/err4" ||
  { grep -v 'debug:' "$WORK/err4"; fail "a server that refuses a 4th request at once failed the fetch"; }
[ "$(blob_of "$WORK/c4/blobs/$want")" = "$want" ] || fail "blob differs (busy server)"
refused=$(grep -c ' busy-503 ' "$WORK/busy.log" || true)
[ "$refused" -ge 1 ] || fail "the busy proxy refused nothing: the tuner never went past 3 ($(grep -o 'connections per file: .*' "$WORK/err4" | tr '\n' ';'))"
grep -q "going on with" "$WORK/err4" || fail "no refused connection left: $(grep -v 'debug:' "$WORK/err4" | tail -3)"
! grep -q "connections per file: 4 -> 8" "$WORK/err4" || fail "the tuner doubled past a server that refused connections"
ok "busy server (3 at once): $refused refused, $(grep -c 'going on with' "$WORK/err4") connections left, blob right"

# at the thread limit (ulimit -u) for a uid of its own. -u 2: the helper and its second lane, and no room for a
# worker at all, for as long as the fetch runs: each lane downloads its file on its own thread. Before, each file
# tried for about two seconds and failed with "pthread_create: Resource temporarily unavailable" (issue 41 item 7:
# on a loaded machine the wait ran out while a worker was still busy). -u 3: the helper, its second lane and a
# `sleep 0.5` of that uid (not the helper's child: a zombie would count too); after it, room for one worker, which
# the files share with the lanes' own threads. Neither depends on how long anything takes.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  chmod 0755 "$WORK" "$WORK/home"
  [ -z "${RCLONE_CONFIG:-}" ] || chmod 0644 "$RCLONE_CONFIG"
  mkdir -p "$WORK/m6"
  for i in 1 2 3 4 5 6; do head -c $((16 << 20)) /dev/urandom >"$WORK/m6/model-0000$i-of-00006.safetensors"; done
  fetch_publish "$WORK/m6" s3test:models/six
  for lim in 2 3; do
    rm -rf "$WORK/c5"; mkdir "$WORK/c5"; chown 61234 "$WORK/c5"
    setpriv --reuid=61234 --regid=61234 --clear-groups env HOME="$WORK/home" HFS3_CACHE_DIR="$WORK/c5" HFS3_LOG=debug \
      bash -c 'ulimit -u $1 && { [ $1 = 2 ] || (sleep 0.5 &); } && exec "$0" fetch s3test:models/six' "$HFS3_BIN" "$lim" \
      >"$WORK/out5" 2>"$WORK/err5" ||
      { grep -v '^fetch:\|debug: s3: GET' "$WORK/err5" | tail -40; fail "fetch at the thread limit (ulimit -u $lim)"; }
    for f in "$WORK"/m6/*; do b=$(blob_of "$f"); [ "$(blob_of "$WORK/c5/blobs/$b")" = "$b" ] || fail "$f differs (ulimit -u $lim)"; done
    own=$(grep -c 'downloading it on this one' "$WORK/err5" || true)
    if [ "$lim" = 2 ]; then
      [ "$own" = 6 ] || fail "ulimit -u 2: $own of 6 files said they were downloaded on the lane's own thread"
    fi
    ok "ulimit -u $lim: 6 files right, $own downloaded on the lane's own thread"
  done
else
  echo "SKIP ulimit: needs root and setpriv (a uid of its own)"
fi
