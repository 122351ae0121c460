#!/usr/bin/env bash
# t_hub_large.sh - a hub of 20,000 repositories (issue 22 item 12; the shim supports 100,000 and more): the
# repository list is the helper's mounts/K/repos, written here directly with 20,000 names around the one repository
# uploaded to the test server (20,000 uploads would take minutes; the shim and the helper run for real). Listing the
# hub's root and an lstat of every entry (python3 os.scandir + os.lstat, as ls -la and os.walk do) use no sub-mount
# slot and start no helper: they take seconds, log nothing, and give each entry the same inode in the listing and in
# lstat; afterwards the uploaded repository opens in the same process, online and with HFS3_OFFLINE=1.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/src/models--org--a" --shards 0.1 --seed 41
rclone copy --links "$WORK/src/models--org--a" "s3test:models/hub/models--org--a"
"$HFS3_BIN" build --all s3test:models/hub >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out"; fail "build --all"; }
H=/models/hub
export HFS3_MOUNTS="$H=s3test:models/hub" HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_HUB_TTL=3600
P() { LD_PRELOAD=$HFS3_SHIM "$@"; }
[ "$(P ls $H)" = models--org--a ] || fail "the hub lists its one repository"
list=$(dirname "$(grep -lx "s3test:models/hub" "$WORK"/cache/mounts/*/remote)")/repos
[ -f "$list" ] || fail "the hub's repository list"
# 20,000 names more, sorted as the helper writes them; same owner and mode (the shim's trust rules)
python3 - "$list" <<'PY'
import os, sys
names = ["models--org--a"] + ["models--big--r%05d" % i for i in range(10000)] + \
        ["datasets--big--d%05d" % i for i in range(10000)]
tmp = sys.argv[1] + ".new"
with open(tmp, "w") as f:
    f.write("".join(n + "\n" for n in sorted(set(names), key=lambda s: s.encode())))
os.chmod(tmp, os.stat(sys.argv[1]).st_mode & 0o7777)
os.rename(tmp, sys.argv[1])
PY
cat >"$WORK/big.py" <<'PY'
import os, sys, time
hub, want = sys.argv[1], open(sys.argv[2], "rb").read()
t0 = time.monotonic()
ents = list(os.scandir(hub))
t1 = time.monotonic()
bad = 0
for e in ents:
    st = os.lstat(e.path)
    if not (e.is_dir(follow_symlinks=False) and os.path.stat.S_ISDIR(st.st_mode) and e.inode() == st.st_ino):
        bad += 1
t2 = time.monotonic()
repo = os.path.join(hub, "models--org--a")
got = open(os.path.join(repo, "config.json"), "rb").read()
# the repository's inode is the listing's also once its manifest is loaded, in stat and in fstat
ino = [e.inode() for e in ents if e.name == "models--org--a"][0]
fd = os.open(repo, os.O_RDONLY | os.O_DIRECTORY)
same_ino = os.lstat(repo).st_ino == ino == os.fstat(fd).st_ino
os.close(fd)
print("entries %d bad %d same %s list %.2fs lstat %.2fs inode %s" % (len(ents), bad, got == want, t1 - t0, t2 - t1, same_ino))
PY
for mode in online offline; do
  off=; [ $mode = offline ] && off=1
  HFS3_OFFLINE=$off P timeout 60 python3 "$WORK/big.py" $H "$WORK/src/models--org--a/config.json" >"$WORK/$mode.out" 2>"$WORK/$mode.err" ||
    { cat "$WORK/$mode.out"; head "$WORK/$mode.err"; fail "$mode: the big hub"; }
  echo "# $mode: $(cat "$WORK/$mode.out"), $(wc -l <"$WORK/$mode.err") log lines"
  grep -q "^entries 20001 bad 0 same True .* inode True$" "$WORK/$mode.out" || { cat "$WORK/$mode.out"; fail "$mode: every entry a directory with its listed inode, then the repository opens"; }
  [ ! -s "$WORK/$mode.err" ] || { head -5 "$WORK/$mode.err"; fail "$mode: $(wc -l <"$WORK/$mode.err") log lines"; }
  python3 -c "import sys; f=sys.argv[1].split(); sys.exit(not (float(f[7][:-1]) < 10 and float(f[9][:-1]) < 10))" "$(cat "$WORK/$mode.out")" ||
    fail "$mode: listing or lstat of 20,001 repositories took 10 s or more"
  ok "$mode: 20,001 repositories listed and lstat-ed in seconds, quietly; the real one opens afterwards"
done
# ls -la of the root: coreutils' lstat of each entry (the shape of the report)
HFS3_OFFLINE=1 P timeout 60 ls -la $H >"$WORK/ls.out" 2>"$WORK/ls.err" || { head "$WORK/ls.err"; fail "ls -la of the big hub"; }
[ "$(grep -c '^d' "$WORK/ls.out")" = 20003 ] && [ ! -s "$WORK/ls.err" ] || { head "$WORK/ls.err"; fail "ls -la: 20,001 directories and . and .."; }
ok "ls -la of the 20,001 repositories offline: all directories, nothing logged"
