#!/usr/bin/env bash
# t_shim_addrspace.sh - the address space the shim adds to its host grows with use (issue 41 item 4: every process
# with HFS3_MOUNTS mapped 2^20 hub slots, +9.2 GiB of VmSize, and a 4 GiB allocation under `ulimit -v` failed).
# VmSize of a python3 that loaded the shim with a plain mount and with a hub, neither entered, is within a few MiB
# of the same python3 without it; under `ulimit -v 12000000` a 4 GiB bytearray works with the shim as without it.
# A hub of 50 repositories (beyond the slot table's first two growth steps, 16 and 48 slots), entered by 8 threads
# at once, serves every repository's file, and the table's growth is a few MiB; with HFS3_TEST_SUB_MAX=1 or 2 the
# next repository fails with the log line that says why, and the process goes on (issue 42: an off-by-one at
# that limit crashed the host with SIGSEGV).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
N=50
for i in $(seq -w 1 $N); do
  mkdir -p "$WORK/src/models--org--r$i"
  printf '{"repo": %d}\n' "$((10#$i))" >"$WORK/src/models--org--r$i/config.json"
done
rclone copy "$WORK/src" s3test:models/hub || fail "upload $N repositories"
mkdir -p "$WORK/plain" && cp "$WORK/src/models--org--r01/config.json" "$WORK/plain/"
rclone copy "$WORK/plain" s3test:models/plain || fail "upload the plain mount"
"$HFS3_BIN" build --all s3test:models/hub >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build --all"; }
"$HFS3_BIN" build s3test:models/plain >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build plain"; }
export HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
unset HFS3_OFFLINE HFS3_LOG
H=$WORK/mnt/hub P=$WORK/mnt/plain

vm='import sys; print([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmSize:")][0])'
base=$(python3 -c "$vm")
shimonly=$(LD_PRELOAD=$HFS3_SHIM python3 -c "$vm")
plain=$(HFS3_MOUNTS="$P=s3test:models/plain" LD_PRELOAD=$HFS3_SHIM python3 -c "$vm")
hub=$(HFS3_MOUNTS="$H=s3test:models/hub;$P=s3test:models/plain" LD_PRELOAD=$HFS3_SHIM python3 -c "$vm")
# the hub listed (its repository list read) but no repository entered
listed=$(HFS3_MOUNTS="$H=s3test:models/hub" LD_PRELOAD=$HFS3_SHIM python3 -c "import os; assert len(os.listdir('$H')) == $N; $vm")
echo "# VmSize kB: without the shim $base, the shim without mounts $shimonly, a plain mount $plain, a hub and a plain mount $hub, a hub listed $listed"
for v in plain hub listed; do
  [ $(( ${!v} - base )) -le 6144 ] || fail "VmSize with the shim ($v): ${!v} kB, $(( (${!v} - base) / 1024 )) MiB more than without it ($base kB)"
done
ok "VmSize: the shim with a plain mount, a hub, a listed hub adds $(( (plain - base) / 1024 ))/$(( (hub - base) / 1024 ))/$(( (listed - base) / 1024 )) MiB (was 9.2 GiB)"

alloc='import sys; b = bytearray(4 << 30); print("allocated", len(b) >> 30, "GiB")'
out=$(bash -c "ulimit -v 12000000; python3 -c '$alloc'" 2>&1) || fail "4 GiB under ulimit -v without the shim: $out"
out=$(HFS3_MOUNTS="$H=s3test:models/hub;$P=s3test:models/plain" LD_PRELOAD=$HFS3_SHIM bash -c "ulimit -v 12000000; python3 -c '$alloc'" 2>&1) ||
  fail "4 GiB under ulimit -v 12000000 with the shim: $out"
[ "$out" = "allocated 4 GiB" ] || fail "4 GiB under ulimit -v with the shim: $out"
ok "ulimit -v 12000000: a 4 GiB allocation works with the shim loaded, as without"

# 50 repositories entered by 8 threads at once, in one process: each one's file, and the growth of VmSize
cat >"$WORK/many.py" <<'PY'
import json, os, sys, threading
hub, n = sys.argv[1], int(sys.argv[2])
vm = lambda: int([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmSize:")][0])
got, bad = {}, []
ready, go, done = threading.Barrier(9), threading.Barrier(9), threading.Barrier(9)
def run(k):
    json.loads(json.dumps(list(range(100))))   # the thread's malloc arena, made before
    ready.wait()
    go.wait()
    for i in range(k, n, 8):
        name = "models--org--r%02d" % (i + 1)
        try:
            got[name] = json.load(open(os.path.join(hub, name, "config.json")))["repo"]
        except Exception as e:
            bad.append((name, repr(e)))
    done.wait()
ts = [threading.Thread(target=run, args=(k,)) for k in range(8)]
[t.start() for t in ts]
ready.wait()
before = vm()   # the threads' stacks and malloc arenas (64 MiB each) are python's, not the shim's: counted before
go.wait()
done.wait()
grew = vm() - before   # with the threads still there
[t.join() for t in ts]
# each again, from the table now (and a listing of one, its sub-mount's own answer)
again = all(json.load(open(os.path.join(hub, "models--org--r%02d" % (i + 1), "config.json")))["repo"] == i + 1 for i in range(n))
lists = all(os.listdir(os.path.join(hub, "models--org--r%02d" % (i + 1))) == ["config.json"] for i in range(n))
ok = sorted(got.values()) == list(range(1, n + 1))
print("repos %d ok %s again %s lists %s bad %s grew %d" % (len(got), ok, again, lists, bad[:3], grew))
PY
HFS3_MOUNTS="$H=s3test:models/hub" LD_PRELOAD=$HFS3_SHIM timeout 300 python3 "$WORK/many.py" $H $N >"$WORK/many.out" 2>"$WORK/many.err" ||
  { cat "$WORK/many.out"; head "$WORK/many.err"; fail "$N repositories in one process"; }
echo "# $(cat "$WORK/many.out")"
grep -Eq "^repos $N ok True again True lists True bad \[\] grew -?[0-9]+$" "$WORK/many.out" || { head "$WORK/many.err"; fail "$N repositories by 8 threads: each one's file"; }
[ "$(awk '{print $NF}' "$WORK/many.out")" -le 16384 ] || fail "VmSize grew by more than 16 MiB for $N repositories"
[ ! -s "$WORK/many.err" ] || { head "$WORK/many.err"; fail "log lines for $N repositories"; }
ok "$N repositories entered by 8 threads in one process (3 growth steps of the slot table): each one's file, VmSize change $(awk '{print $NF}' "$WORK/many.out") kB"

# the limit: HFS3_TEST_SUB_MAX=1 and 2, offline from the cache just filled: that many repositories enter, the next
# ones fail (ENOSPC) with one line saying why, the first ones still answer, the process exits 0
cat >"$WORK/limit.py" <<'PY'
import errno, json, os, sys
hub, lim = sys.argv[1], int(sys.argv[2])
res = []
for i in list(range(1, lim + 3)) + list(range(1, lim + 1)):
    try:
        res.append(json.load(open(os.path.join(hub, "models--org--r%02d" % i, "config.json")))["repo"])
    except OSError as e:
        res.append(errno.errorcode[e.errno])
print(" ".join(map(str, res)))
PY
for lim in 1 2; do
  HFS3_OFFLINE=1 HFS3_TEST_SUB_MAX=$lim HFS3_MOUNTS="$H=s3test:models/hub" LD_PRELOAD=$HFS3_SHIM timeout 60 \
    python3 "$WORK/limit.py" $H $lim >"$WORK/limit.out" 2>"$WORK/limit.err" ||
    { cat "$WORK/limit.out" "$WORK/limit.err"; fail "at the limit of $lim: the process died"; }
  echo "# at the limit of $lim: $(cat "$WORK/limit.out"); $(cat "$WORK/limit.err")"
  want=$(python3 -c "import sys; l = int(sys.argv[1]); print(' '.join([str(i) for i in range(1, l + 1)] + ['ENOSPC'] * 2 + [str(i) for i in range(1, l + 1)]))" $lim)
  [ "$(cat "$WORK/limit.out")" = "$want" ] || fail "at the limit of $lim: $(cat "$WORK/limit.out"), not $want"
  [ "$(grep -c "more than $lim repositories entered in one process" "$WORK/limit.err")" = 1 ] && [ "$(wc -l <"$WORK/limit.err")" = 1 ] ||
    { cat "$WORK/limit.err"; fail "at the limit of $lim: one line"; }
done
ok "HFS3_TEST_SUB_MAX=1 and 2: that many repositories enter, the next two fail (ENOSPC) with one line, the first still answer"
