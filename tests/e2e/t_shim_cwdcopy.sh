#!/usr/bin/env bash
# t_shim_cwdcopy.sh - the copy of the process a vfork child makes to load a mount for its chdir (shim/tree.c
# chdir_by_copy: subprocess.run(cwd=<mount dir>) on an empty cache), attacked: a multi-threaded parent whose threads
# allocate and free (memory of the main thread's arena among it) while the child is copied; the helper failing (no
# server), HFS3_OFFLINE=1 and a signal arriving. Each run must end (an outer timeout), answer as a local folder
# would (or a kernel-like errno when the mount cannot be loaded), and leave no zombie and no descriptor behind.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
mkdir -p "$WORK/src/flat/sub" && echo hello >"$WORK/src/flat/sub/h.txt"
rclone copy "$WORK/src/flat" s3test:models/flat
"$HFS3_BIN" build s3test:models/flat >/dev/null
export HFS3_MOUNTS="/models/flat=s3test:models/flat" HFS3_HELPER=$HFS3_BIN HFS3_LOG=warn
cat >"$WORK/stress.py" <<'PY'
import os, signal, subprocess, sys, threading, time
d, want = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGUSR1, lambda *a: None)
# memory of the main thread's arena, freed by the other threads while the child is copied (free takes its lock)
chunks = [bytearray(1000 + i % 7000) for i in range(60000)]
lock, stop = threading.Lock(), False
def churn():
    while not stop:
        with lock:
            c = chunks.pop() if chunks else None
        del c
        b = [bytearray(3000) for _ in range(20)]
        del b
ts = [threading.Thread(target=churn) for _ in range(4)]
pinger = threading.Thread(target=lambda: [os.kill(os.getpid(), signal.SIGUSR1) or time.sleep(0.001) for _ in range(3000) if not stop])
for t in ts + [pinger]:
    t.start()
fds = len(os.listdir("/proc/self/fd"))
try:
    r = subprocess.run(["cat", "h.txt"], cwd=d, capture_output=True, text=True)
    got = "rc=%d %s" % (r.returncode, r.stdout.strip())
except OSError as e:
    got = type(e).__name__ + " " + os.strerror(e.errno)
stop = True
for t in ts + [pinger]:
    t.join()
zombies = 0
try:
    while os.waitpid(-1, os.WNOHANG)[0] > 0:
        zombies += 1
except ChildProcessError:
    pass
left = len(os.listdir("/proc/self/fd")) - fds
print("%s|zombies=%d|fds=%d" % (got, zombies, left))
sys.exit(0 if got == want and not zombies and not left else 1)
PY
# each run a fresh cache: the mount is not loaded, the child must copy itself to load it
hung=0 bad=0
for i in $(seq 1 ${CWDCOPY_RUNS:-15}); do
  set +e
  out=$(HFS3_CACHE_DIR=$WORK/c$i timeout 120 env LD_PRELOAD=$HFS3_SHIM python3 "$WORK/stress.py" /models/flat/sub "rc=0 hello" 2>&1)
  rc=$?
  set -e
  [ $rc = 124 ] && hung=$((hung + 1))
  [ $rc = 0 ] || { bad=$((bad + 1)); echo "run $i: rc $rc: $out"; }
done
[ $hung = 0 ] || fail "$hung runs of subprocess.run(cwd=) in a busy multi-threaded parent hung"
[ $bad = 0 ] || fail "$bad runs answered wrong or left zombies or descriptors"
ok "subprocess.run(cwd=M/sub) on an empty cache, threads freeing the main arena's memory and signals arriving: ends, reads, no zombie, no descriptor left"
# the mount cannot be loaded: offline, and no server (stopped): a kernel-like errno, promptly, no hang
out=$(HFS3_OFFLINE=1 HFS3_CACHE_DIR=$WORK/off timeout 120 env LD_PRELOAD=$HFS3_SHIM python3 "$WORK/stress.py" /models/flat/sub x 2>&1 | tail -1 || true)
echo "offline: $out"
case $out in OSError*\|zombies=0\|fds=0|*Error\ *\|zombies=0\|fds=0) ;; *) fail "HFS3_OFFLINE=1, empty cache: $out";; esac
ok "HFS3_OFFLINE=1 on an empty cache: subprocess.run(cwd=) raises an OSError, no zombie, no descriptor left"
s3env_stop; trap - EXIT
out=$(HFS3_CACHE_DIR=$WORK/down HFS3_RETRY_BUDGET=5 timeout 300 env LD_PRELOAD=$HFS3_SHIM python3 "$WORK/stress.py" /models/flat/sub x 2>&1 | tail -1 || true)
echo "no server: $out"
case $out in *Error\ *\|zombies=0\|fds=0) ;; *) fail "no server, empty cache: $out";; esac
ok "no server, empty cache: subprocess.run(cwd=) raises an OSError, no zombie, no descriptor left"
