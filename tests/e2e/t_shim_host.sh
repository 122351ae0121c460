#!/usr/bin/env bash
# t_shim_host.sh - the shim is invisible in its host's descriptor numbers and signals (issue 41 items 1 and 2), the
# kernel (the same trees as local folders) the oracle. The real helper and the S3 server of scripts/s3env.sh.
# 1. Descriptor numbers: write-opens outside and inside the mounts, open/openat, with 0 free; the daemon idiom
#    close(0..2), open("/dev/null"), dup, dup; a cold read-only open in a mount with 0 free; Python's
#    os.close(1) + os.open + print; with one descriptor left under RLIMIT_NOFILE, a write-open outside gives the
#    last number and a mount's first touch EMFILE, never EIO nor "none cached", and it loads once descriptors are
#    free again.
# 2. Signals: a signal storm (SIGALRM every 300 us, handlers without SA_RESTART: C, and Python's signal.signal)
#    during the first load of a plain mount and of a hub repository on an empty cache: every file reads right;
#    a program with a SIGCHLD handler without SA_RESTART, doing cold opens, never gets EINTR nor a SIGCHLD (15
#    runs); a load that failed for want of descriptors is tried again at the next call.
set -u
source "$HFS3_ROOT/tests/e2e/shim_common.sh"
shim_start
cd "$WORK"
T=$HFS3_ROOT/$BUILD/tools
gen() { python3 "$HFS3_ROOT/scripts/gen_model.py" "$@"; }
gen flat "$WORK/src/plain" --shards 0.4,0.2 --seed 41 >/dev/null
gen hf-cache "$WORK/hsrc/models--org--a" --shards 0.3 --seed 42 >/dev/null
rclone copy --links "$WORK/src/plain" s3test:models/plain && rclone copy --links "$WORK/hsrc/models--org--a" s3test:models/hub/models--org--a || exit 1
"$HFS3_BIN" build s3test:models/plain >/dev/null 2>&1 && "$HFS3_BIN" build --all s3test:models/hub >/dev/null 2>&1 || { echo "build failed"; exit 1; }
MP=$WORK/mnt/plain H=$WORK/mnt/hub
FIX=$HFS3_CACHE_DIR FIXMOUNTS=$HFS3_MOUNTS
export HFS3_MOUNTS="$MP=s3test:models/plain;$H=s3test:models/hub" HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
unset HFS3_OFFLINE
plain_files=$(cd "$WORK/src/plain" && find . -type f | sed 's|^\./||' | grep -v '^\.cache/' | sort)
hub_files=$(cd "$WORK/hsrc" && find . -type f -o -type l | sed 's|^\./||' | grep snapshots | sort)
first=$(head -1 <<<"$plain_files")
fresh() { export HFS3_CACHE_DIR=$WORK/cache.$1; rm -rf "$HFS3_CACHE_DIR"; }

# --- 1. descriptor numbers -------------------------------------------------------------------------------------
cat >"$WORK/fdnums.py" <<'PY'
import os, sys
root, out, rel = sys.argv[1], sys.argv[2], sys.argv[3:]
res = os.dup2(1, 60)          # the transcript, on a number of its own
def say(*a): os.write(res, (" ".join(str(x) for x in a) + "\n").encode())
def num(what, f):
    try: fd = f(); say(what, "fd%d" % fd); return fd
    except OSError as e: say(what, os.strerror(e.errno)); return -1
os.close(0)
fd = num("write-open outside, 0 free", lambda: os.open(os.path.join(out, "w1"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)); os.close(fd)
d = os.open(out, os.O_RDONLY | os.O_DIRECTORY); os.dup2(d, 50); os.close(d)
fd = num("openat write outside, 0 free", lambda: os.open("w2", os.O_RDWR | os.O_CREAT, 0o644, dir_fd=50)); os.close(fd); os.close(50)
fd = num("cold read-only open in the mount, 0 free", lambda: os.open(os.path.join(root, rel[0]), os.O_RDONLY))
say("  bytes", len(os.read(fd, 1 << 24))); os.close(fd)
fd = num("O_RDONLY|O_CREAT of a mount file, 0 free", lambda: os.open(os.path.join(root, rel[1]), os.O_RDONLY | os.O_CREAT, 0o644)); os.close(fd)
fd = num("directory of the mount, 0 free", lambda: os.open(root, os.O_RDONLY | os.O_DIRECTORY)); os.close(fd)
# the daemon idiom
os.close(1); os.close(2)
a = num("daemon: open /dev/null", lambda: os.open("/dev/null", os.O_RDWR))
b = num("daemon: dup", lambda: os.dup(0))
c = num("daemon: dup", lambda: os.dup(0))
fd = num("then a write-open outside", lambda: os.open(os.path.join(out, "w3"), os.O_WRONLY | os.O_CREAT, 0o644))
PY
fresh fd
mkdir -p "$WORK/o.kernel" "$WORK/o.shim"
python3 "$WORK/fdnums.py" "$WORK/src/plain" "$WORK/o.kernel" $plain_files >"$WORK/fd.kernel" 2>&1
LD_PRELOAD=$HFS3_SHIM python3 "$WORK/fdnums.py" "$MP" "$WORK/o.shim" $plain_files >"$WORK/fd.shim" 2>"$WORK/fd.shim.err"
diff "$WORK/fd.kernel" "$WORK/fd.shim"
shim_check "descriptor numbers: write-opens outside and inside, a cold open, the daemon idiom: the kernel's" \
  test -s "$WORK/fd.kernel" -a "$(cat "$WORK/fd.kernel")" = "$(cat "$WORK/fd.shim")"

# Python: os.close(1), an open for writing, print: the file gets the line
fresh py
rm -f "$WORK/pyout"
LD_PRELOAD=$HFS3_SHIM python3 -c 'import os, sys; os.close(1); os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644); print("x")' "$WORK/pyout"; rc=$?
shim_check "os.close(1); os.open(f, O_WRONLY|O_CREAT); print(\"x\"): f gets x, exit 0" test "$rc" = 0 -a "$(cat "$WORK/pyout" 2>/dev/null)" = x

# one descriptor left (the fixture's mount, offline, its index cached: the issue's case)
cat >"$WORK/fdshort.py" <<'PY'
import os, sys, resource, hashlib
root, out, rel = sys.argv[1], sys.argv[2], sys.argv[3]
res = os.dup2(1, 60)
def say(*a): os.write(res, (" ".join(str(x) for x in a) + "\n").encode())
sf = os.open(sys.argv[4], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644); os.dup2(sf, 61); os.close(sf)
lim, fill = 64, []
while True:
    fd = os.open("/dev/null", os.O_RDONLY)
    if fd >= lim - 2: break
    fill.append(fd)
fill.append(fd)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (lim, hard))
def num(what, f, stream=res):
    try: fd = f(); say(what, "fd%d" % fd); return fd
    except OSError as e: os.write(stream, ("%s %s\n" % (what, os.strerror(e.errno))).encode()); return -1
fd = num("one left: write-open outside", lambda: os.open(os.path.join(out, "w4"), os.O_WRONLY | os.O_CREAT, 0o644))
num("one left: another", lambda: os.open(os.path.join(out, "w5"), os.O_WRONLY | os.O_CREAT, 0o644))
# a mount's first touch with exactly one descriptor left: the kernel gives the last number; the shim needs two of
# its own for a load (EMFILE)
while True:
    try: fill.append(os.open("/dev/null", os.O_RDONLY))
    except OSError: break
os.close(fill.pop())
try: fd = os.open(os.path.join(root, rel), os.O_RDONLY); short = "fd%d" % fd; os.close(fd)
except OSError as e: short = os.strerror(e.errno)
os.write(61, (short + "\n").encode())
for fd in fill[:10]: os.close(fd)
fd = num("descriptors freed: the mount's file", lambda: os.open(os.path.join(root, rel), os.O_RDONLY))
say("  sha256", hashlib.sha256(os.read(fd, 1 << 24)).hexdigest())
PY
fresh short
cp -a "$FIX" "$HFS3_CACHE_DIR"
python3 "$WORK/fdshort.py" "$WORK/fx/src/flat" "$WORK/o.kernel" a.txt "$WORK/short.kernel" >"$WORK/fs.kernel" 2>&1
HFS3_OFFLINE=1 HFS3_MOUNTS=$FIXMOUNTS LD_PRELOAD=$HFS3_SHIM python3 "$WORK/fdshort.py" "$M/flat" "$WORK/o.shim" a.txt "$WORK/short.shim" >"$WORK/fs.shim" 2>"$WORK/fs.shim.err"
diff "$WORK/fs.kernel" "$WORK/fs.shim"; cat "$WORK/short.kernel" "$WORK/short.shim" "$WORK/fs.shim.err"
shim_check "one descriptor left: a write-open outside gets the last number, then EMFILE; freed: the mount reads (kernel's)" \
  test -s "$WORK/fs.kernel" -a "$(cat "$WORK/fs.kernel")" = "$(cat "$WORK/fs.shim")"
shim_check "one descriptor left: a mount's first touch is the kernel's number or EMFILE, never EIO" \
  grep -qx "$(cat "$WORK/short.kernel")\|Too many open files" "$WORK/short.shim"
shim_check "... and no log line saying nothing is cached" test -z "$(grep 'none cached\|no index' "$WORK/fs.shim.err")"

# with one descriptor left, a write-open of /proc/self/fd/N (N: a file of the mount, a blob) is refused and
# writes nothing: the guard looks at the link's target without a descriptor of its own
cat >"$WORK/trunc.py" <<'PY'
import os, sys, resource
fd = os.open(sys.argv[1], os.O_RDONLY)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
fill = []
while True:
    try: fill.append(os.open("/dev/null", os.O_RDONLY))
    except OSError: break
os.close(fill.pop())
try: os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_TRUNC); print("opened")
except OSError as e: print(os.strerror(e.errno))
PY
out=$(HFS3_OFFLINE=1 HFS3_MOUNTS=$FIXMOUNTS LD_PRELOAD=$HFS3_SHIM python3 "$WORK/trunc.py" "$M/flat/a.txt" 2>&1); echo "$out"
shim_check "one left: O_WRONLY|O_TRUNC of /proc/self/fd/N on a mount file: EROFS, and the file keeps its bytes" \
  test "$out" = "Read-only file system" -a "$(HFS3_OFFLINE=1 HFS3_MOUNTS=$FIXMOUNTS LD_PRELOAD=$HFS3_SHIM cat "$M/flat/a.txt")" = "$(cat "$WORK/fx/src/flat/a.txt")"

# --- 2. signals ---------------------------------------------------------------------------------------------------
# a storm during the first load of a plain mount (C: any EINTR shows) on an empty cache
hub_rel=$(sed 's|^|models--org--a/|; s|^models--org--a/models--org--a/|models--org--a/|' <<<"$hub_files")
"$T/sigstorm" alrm "$WORK/src" $(sed 's|^|plain/|' <<<"$plain_files") >"$WORK/ss.kernel" 2>/dev/null
"$T/sigstorm" alrm "$WORK/hsrc" $hub_files >"$WORK/sh.kernel" 2>/dev/null
for i in 1 2 3; do
  fresh storm$i
  LD_PRELOAD=$HFS3_SHIM "$T/sigstorm" alrm "$WORK/mnt" $(sed 's|^|plain/|' <<<"$plain_files") >"$WORK/ss.shim" 2>"$WORK/ss.err"
  cmp -s "$WORK/ss.kernel" "$WORK/ss.shim" || break
done
diff "$WORK/ss.kernel" "$WORK/ss.shim"; grep -v '^sigalrm' "$WORK/ss.err"
shim_check "SIGALRM storm (no SA_RESTART) during a plain mount's first load on an empty cache: the kernel's answers (3 runs)" \
  cmp -s "$WORK/ss.kernel" "$WORK/ss.shim"
shim_check "... the storm did arrive" grep -q '^sigalrm [1-9][0-9]' "$WORK/ss.err"
fresh hubstorm
LD_PRELOAD=$HFS3_SHIM "$T/sigstorm" alrm "$H" $hub_files >"$WORK/sh.shim" 2>"$WORK/sh.err"
diff "$WORK/sh.kernel" "$WORK/sh.shim"; grep -v '^sigalrm' "$WORK/sh.err"
shim_check "SIGALRM storm during a hub repository's first load on an empty cache: the kernel's answers" \
  test -s "$WORK/sh.kernel" -a "$(cat "$WORK/sh.kernel")" = "$(cat "$WORK/sh.shim")"

# Python: signal.signal (no SA_RESTART) with a watchdog timer and SIGWINCH, plain and hub, empty cache
cat >"$WORK/pystorm.py" <<'PY'
import hashlib, os, signal, sys
n = [0]
def h(s, f): n[0] += 1
signal.signal(signal.SIGALRM, h); signal.signal(signal.SIGWINCH, h)
signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
root = sys.argv[1]
for rel in sys.argv[2:]:
    try:
        with open(os.path.join(root, rel), "rb") as f: print(rel, hashlib.sha256(f.read()).hexdigest())
    except OSError as e: print(rel, e.strerror)
    os.kill(os.getpid(), signal.SIGWINCH)
signal.setitimer(signal.ITIMER_REAL, 0)
print("signals", n[0] > 5, file=sys.stderr)
PY
python3 "$WORK/pystorm.py" "$WORK/src" $(sed 's|^|plain/|' <<<"$plain_files") >"$WORK/ps.kernel" 2>/dev/null
python3 "$WORK/pystorm.py" "$WORK/hsrc" $hub_files >"$WORK/ph.kernel" 2>/dev/null
fresh pystorm
LD_PRELOAD=$HFS3_SHIM python3 "$WORK/pystorm.py" "$WORK/mnt" $(sed 's|^|plain/|' <<<"$plain_files") >"$WORK/ps.shim" 2>"$WORK/ps.err"
LD_PRELOAD=$HFS3_SHIM python3 "$WORK/pystorm.py" "$H" $hub_files >"$WORK/ph.shim" 2>"$WORK/ph.err"
diff "$WORK/ps.kernel" "$WORK/ps.shim"; diff "$WORK/ph.kernel" "$WORK/ph.shim"; cat "$WORK/ps.err" "$WORK/ph.err"
shim_check "Python signal.signal storm (SIGALRM timer, SIGWINCH): a plain mount and a hub repository read right, empty cache" \
  test -s "$WORK/ps.kernel" -a "$(cat "$WORK/ps.kernel")" = "$(cat "$WORK/ps.shim")" -a "$(cat "$WORK/ph.kernel")" = "$(cat "$WORK/ph.shim")"

# SIGCHLD: a handler without SA_RESTART, cold opens (each one starts the helper): never EINTR, never a SIGCHLD
"$T/sigstorm" chld "$WORK/src" $(sed 's|^|plain/|' <<<"$plain_files") >"$WORK/sc.kernel" 2>/dev/null
bad=0
for i in $(seq 1 15); do
  fresh chld$i   # (an empty cache each time: the helper's own background work may still write into the last one)
  LD_PRELOAD=$HFS3_SHIM "$T/sigstorm" chld "$WORK/mnt" $(sed 's|^|plain/|' <<<"$plain_files") >"$WORK/sc.shim" 2>/dev/null
  cmp -s "$WORK/sc.kernel" "$WORK/sc.shim" || { bad=$((bad + 1)); diff "$WORK/sc.kernel" "$WORK/sc.shim" | head -5; }
done
shim_check "SIGCHLD handler without SA_RESTART, cold opens, 15 runs: the kernel's answers, no SIGCHLD from the helper" test "$bad" = 0
# the helper's own process holds none of the host's descriptors: a pipe's reader sees its EOF while a fetch runs
# (the stand-in helper, held at a gate: FAKE_GET_MODE=gate)
cat >"$WORK/pipe.py" <<'PY'
import os, select, sys, threading
r, w = os.pipe()
t = threading.Thread(target=lambda: print("read", len(open(sys.argv[1], "rb").read()), flush=True))
t.start()
while not any(l.startswith("_get") for l in open(os.environ["FAKE_LOG"])): select.select([], [], [], 0.05)
os.close(w)
ready = select.select([r], [], [], 20)[0]
print("eof while the fetch runs" if ready and os.read(r, 1) == b"" else "no eof", flush=True)
open(os.environ["FAKE_GATE"], "w").close()
t.join()
PY
fresh pipe
cp -a "$FIX" "$HFS3_CACHE_DIR" && rm -rf "$HFS3_CACHE_DIR/blobs" && mkdir "$HFS3_CACHE_DIR/blobs"
: >"$WORK/fake.log"
out=$(HFS3_MOUNTS=$FIXMOUNTS FAKE_LOG=$WORK/fake.log FAKE_FX=$WORK/fx FAKE_MK=$MK FAKE_GET_MODE=gate \
  FAKE_GATE=$WORK/gate HFS3_HELPER=$HFS3_ROOT/tests/e2e/shim_fake_helper.sh LD_PRELOAD=$HFS3_SHIM \
  timeout 120 python3 "$WORK/pipe.py" "$M/flat/a.txt" 2>&1); echo "$out"
shim_check "a pipe's write end closed by the host: EOF while the helper fetches (the helper's process holds no copy)" \
  test "$out" = "$(printf 'eof while the fetch runs\nread 13')"

# a first load that failed for the helper's reason (no manifest on S3 yet) is tried again by a call 2 s later
cat >"$WORK/late.py" <<'PY'
import os, sys, time
p = sys.argv[1]
try: os.stat(p); print("there at once")
except OSError as e: print("first:", e.strerror)
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]): time.sleep(0.05)
time.sleep(2.5)   # (past SH_RETRY_S: the shim loads again)
print("later:", len(open(p, "rb").read()))
PY
fresh late
gen flat "$WORK/src/late" --shards 0.1 --seed 43 >/dev/null
LD_PRELOAD=$HFS3_SHIM HFS3_MOUNTS="$WORK/mnt/late=s3test:models/late" python3 "$WORK/late.py" "$WORK/mnt/late/config.json" \
  "$WORK/late.asked" "$WORK/late.built" >"$WORK/late.out" 2>"$WORK/late.err" &
lp=$!
for i in $(seq 1 600); do [ -e "$WORK/late.asked" ] && break; sleep 0.1; done
rclone copy --links "$WORK/src/late" s3test:models/late && "$HFS3_BIN" build s3test:models/late >/dev/null 2>&1
touch "$WORK/late.built"; wait $lp
cat "$WORK/late.out" "$WORK/late.err"
shim_check "no manifest at the first load, built meanwhile: the same process reads it 2 s later" \
  test "$(cat "$WORK/late.out")" = "$(printf 'first: Input/output error\nlater: %s' "$(stat -c %s "$WORK/src/late/config.json")")"
exit $((SHIM_FAILS > 0))
