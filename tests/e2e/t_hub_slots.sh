#!/usr/bin/env bash
# t_hub_slots.sh - a hub's repositories that cannot be loaded take no slot (issue 33 item 4). Offline, a hub of
# 100,002 repositories of which 2 are cached: one process lists the root, enters 24 that are not cached (EIO each,
# loaded once) with the slots cut to 8 (HFS3_TEST_SUB_MAX: the ceiling is 1,048,576 slots, mapped as used, where it was
# 8,192 and ran out after ~8,190 failures), then opens a file of each cached one. One log line says why the first
# failed, one at exit how many failed (it was one 420-byte line per repository: 84 MB for a `find` of 20,011).
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
for r in a b; do
  python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/src/models--org--$r" --shards 0.05 --seed $((${#r} + RANDOM % 1000))
  rclone copy --links "$WORK/src/models--org--$r" "s3test:models/hub/models--org--$r"
done
"$HFS3_BIN" build --all s3test:models/hub >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build --all"; }
H=/models/hub
export HFS3_MOUNTS="$H=s3test:models/hub" HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_HUB_TTL=3600
for r in a b; do "$HFS3_BIN" fetch "s3test:models/hub/models--org--$r" >"$WORK/fetch.out" 2>&1 || { cat "$WORK/fetch.out"; fail "fetch $r"; }; done
[ "$(LD_PRELOAD=$HFS3_SHIM ls $H | tr '\n' ' ')" = "models--org--a models--org--b " ] || fail "the hub lists its two repositories"
list=$(dirname "$(grep -lxE "s3test:models/hub/?" "$WORK"/cache/mounts/*/remote)")/repos
[ -f "$list" ] || fail "the hub's repository list"
python3 - "$list" <<'PY'
import os, sys
names = ["models--org--a", "models--org--b"] + ["models--big--r%05d" % i for i in range(100000)]
tmp = sys.argv[1] + ".new"
with open(tmp, "w") as f:
    f.write("".join(n + "\n" for n in sorted(names, key=lambda s: s.encode())))
os.chmod(tmp, os.stat(sys.argv[1]).st_mode & 0o7777)
os.rename(tmp, sys.argv[1])
PY
cat >"$WORK/slots.py" <<'PY'
import errno, os, sys
hub, want = sys.argv[1], {r: open(os.path.join(sys.argv[2], r, "config.json"), "rb").read() for r in ("models--org--a", "models--org--b")}
n = len(os.listdir(hub))
errs = {}
for rnd in range(2):   # twice: a failed repository is not loaded again
    for i in range(24):
        for p in ("models--big--r%05d" % i, "models--big--r%05d/config.json" % i):
            try:
                os.listdir(os.path.join(hub, p)) if rnd == 0 else os.stat(os.path.join(hub, p))
                e = "ok"
            except OSError as x:
                e = errno.errorcode[x.errno]
            errs[e] = errs.get(e, 0) + 1
same = [open(os.path.join(hub, r, "config.json"), "rb").read() == b for r, b in sorted(want.items())]
print("listed %d errors %s cached-open %s" % (n, sorted(errs.items()), same))
PY
HFS3_OFFLINE=1 HFS3_TEST_SUB_MAX=8 LD_PRELOAD=$HFS3_SHIM timeout 120 python3 "$WORK/slots.py" $H "$WORK/src" >"$WORK/out" 2>"$WORK/err" ||
  { cat "$WORK/out"; head "$WORK/err"; fail "the process over the big hub"; }
echo "# $(cat "$WORK/out")"; echo "# log: $(wc -l <"$WORK/err") lines, $(wc -c <"$WORK/err") bytes"; head -3 "$WORK/err"
grep -qx "listed 100002 errors \[('EIO', 72), ('ok', 24)\] cached-open \[True, True\]" "$WORK/out" ||
  fail "100,002 listed; 24 repositories not cached: EIO inside (their stat from the list: a directory), entered twice; both cached ones open with 8 slots"
ok "a hub of 100,002 offline: 24 failed repositories take none of 8 slots, the 2 cached ones open"
[ "$(wc -l <"$WORK/err")" = 2 ] && grep -q "models--big--r00000" "$WORK/err" &&
  grep -q "^hfs3: $H: 24 repositories of s3test:models/hub could not be loaded in this process" "$WORK/err" ||
  fail "one line for the first failure, one at exit with the count"
ok "the failures: the first one's line, and the count at exit"
