#!/usr/bin/env bash
# t_hub_mount.sh - one mount for a whole Hugging Face hub prefix (issue 9 §1): HFS3_MOUNTS=/models/hub=REMOTE where
# REMOTE holds repository folders (models--*, datasets--*), each with its own manifest. build --all (built, then
# unchanged); the hub's root lists the repositories and nothing else; python3 (the huggingface_hub offline pattern:
# refs/main, then snapshots/<rev>/...) and coreutils read two repositories; a name not in the list is ENOENT; a
# repository added while a process runs is seen after HFS3_HUB_TTL; 300 repositories list through a paged
# delimiter listing (the client asks 50 at a time, as S3 honours max-keys); fetch of a repository path, then
# HFS3_OFFLINE=1 through the hub. The server is the one scripts/s3env.sh starts for users, as they get it.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
gen() { python3 "$HFS3_ROOT/scripts/gen_model.py" "$@"; }
gen hf-cache "$WORK/src/models--org--a" --shards 0.2,0.1 --seed 31
gen hf-cache "$WORK/src/models--org--b" --shards 0.3 --seed 32
gen flat "$WORK/src/datasets--org--d" --shards 0.1 --seed 33
echo 1 >"$WORK/version.txt"
for r in models--org--a models--org--b datasets--org--d; do rclone copy --links "$WORK/src/$r" "s3test:models/hub/$r"; done
rclone copy "$WORK/version.txt" s3test:models/hub   # not a repository: never listed
rclone copy "$WORK/version.txt" s3test:models/hub/other

# build --all: every repository, then none again
"$HFS3_BIN" build --all s3test:models/hub >"$WORK/b1" 2>"$WORK/b1.err" || { cat "$WORK/b1" "$WORK/b1.err"; fail "build --all"; }
grep -q "^s3test:models/hub: 3 repositories: 3 built, 0 unchanged, 0 failed$" "$WORK/b1" || { cat "$WORK/b1"; fail "build --all counts"; }
[ "$(grep -c ': built (' "$WORK/b1")" = 3 ] || { cat "$WORK/b1"; fail "one line per repository"; }
"$HFS3_BIN" build --all s3test:models/hub >"$WORK/b2" 2>&1 || { cat "$WORK/b2"; fail "build --all again"; }
grep -q "^s3test:models/hub: 3 repositories: 0 built, 3 unchanged, 0 failed$" "$WORK/b2" || { cat "$WORK/b2"; fail "unchanged counts"; }
grep -q "^models--org--a: unchanged$" "$WORK/b2" || { cat "$WORK/b2"; fail "unchanged line"; }
ok "build --all: 3 built, then 3 unchanged"
echo changed >>"$WORK/src/datasets--org--d/config.json"
rclone copy "$WORK/src/datasets--org--d" s3test:models/hub/datasets--org--d
"$HFS3_BIN" build --all s3test:models/hub >"$WORK/b3" 2>&1 || { cat "$WORK/b3"; fail "build --all after a change"; }
grep -q "^s3test:models/hub: 3 repositories: 1 built, 2 unchanged, 0 failed$" "$WORK/b3" && grep -q "^datasets--org--d: built" "$WORK/b3" || { cat "$WORK/b3"; fail "only the changed repository is built"; }
expect_exit 1 "build --all of a prefix without repositories" "$HFS3_BIN" build --all s3test:models/hub/other
grep -q "^hfs3-manifest build: s3test:models/hub/other: no repository folders" "$WORK/err" || { cat "$WORK/err"; fail "build --all message"; }
ok "build --all: a changed repository alone is rebuilt; a prefix without repositories is one error"

H=/models/hub
export HFS3_MOUNTS="$H=s3test:models/hub" HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN
P() { LD_PRELOAD=$HFS3_SHIM "$@"; }
[ "$(P ls $H | tr '\n' ' ')" = "datasets--org--d models--org--a models--org--b " ] || { P ls -la $H; fail "the hub lists its repositories"; }
[ "$(P stat -c %F $H/models--org--a)" = directory ] || fail "a repository is a directory"
set +e
P stat $H/models--org--zz >/dev/null 2>"$WORK/e1"; r1=$?
P stat $H/other >/dev/null 2>&1; r2=$?
P cat $H/version.txt >/dev/null 2>&1; r3=$?
set -e
[ $r1 = 1 ] && [ $r2 = 1 ] && [ $r3 = 1 ] && grep -q "No such file" "$WORK/e1" || { cat "$WORK/e1"; fail "names not in the list: ENOENT"; }
ok "the hub's root lists the 3 repositories, nothing else; other names are ENOENT"

# the huggingface_hub offline pattern (HF_HUB_OFFLINE=1: refs/main, then snapshots/<rev>/<file>), with plain os calls
cat >"$WORK/hf.py" <<'EOF'
import os, sys, hashlib
hub, src = sys.argv[1], sys.argv[2]
for repo in ("models--org--a", "models--org--b"):
    d = os.path.join(hub, repo)
    assert os.path.isdir(d), d
    assert sorted(os.listdir(d)) == ["blobs", "refs", "snapshots"], os.listdir(d)
    rev = open(os.path.join(d, "refs", "main")).read().strip()
    snap = os.path.join(d, "snapshots", rev)
    for name in sorted(os.listdir(snap)):
        got = open(os.path.join(snap, name), "rb").read()
        want = open(os.path.join(src, repo, "snapshots", rev, name), "rb").read()
        assert got == want, (repo, name)
    real = os.path.realpath(os.path.join(snap, "config.json"))
    assert real.startswith(d + "/blobs/"), real
print("ok")
EOF
[ "$(P python3 "$WORK/hf.py" $H "$WORK/src")" = ok ] || fail "python3: the HF offline pattern through the hub"
reva=$(cat "$WORK/src/models--org--b/refs/main")
P cat $H/models--org--b/snapshots/$reva/config.json | cmp - "$WORK/src/models--org--b/snapshots/$reva/config.json" || fail "cat"
(cd "$WORK/src/datasets--org--d" && sha256sum config.json) >"$WORK/want.sum"
(cd / && P bash -c "cd $H/datasets--org--d && sha256sum config.json") | cmp - "$WORK/want.sum" || fail "cd into a repository + sha256sum"
ok "python3 and coreutils read files of three repositories through the one mount"
# the repository's cache entry is that of its own REMOTE (what `fetch REMOTE/NAME` and a mount of it use)
d=$(dirname "$(grep -lx "s3test:models/hub/models--org--a" "$WORK"/cache/mounts/*/remote)")
[ -f "$d/index" ] && [ -f "$(dirname "$(grep -lx "s3test:models/hub" "$WORK"/cache/mounts/*/remote)")/repos" ] || fail "the repository's own mount entry"
ok "a repository is the mount of s3test:models/hub/models--org--a"

# a repository added while a process runs: seen once the list is older than HFS3_HUB_TTL
cat >"$WORK/poll.py" <<'EOF'
import os, sys, time
hub, flag = sys.argv[1], sys.argv[2]
first = sorted(os.listdir(hub))
open(flag, "w").write(" ".join(first) + "\n")
end = time.time() + 60
while time.time() < end:
    names = os.listdir(hub)
    if "models--org--c" in names:
        # its manifest came first, its files may still be on the way: they fail (EIO) until they are there
        while time.time() < end:
            try:
                print(open(os.path.join(hub, "models--org--c", "config.json")).read()[:1] == "{")
                sys.exit(0)
            except OSError:
                time.sleep(0.5)
    time.sleep(0.2)
print("not seen")
EOF
gen flat "$WORK/src/models--org--c" --shards 0.1 --seed 34
HFS3_HUB_TTL=1 P python3 "$WORK/poll.py" $H "$WORK/flag" >"$WORK/poll.out" 2>"$WORK/poll.err" &
pid=$!
for i in $(seq 1 100); do [ -s "$WORK/flag" ] && break; sleep 0.1; done
grep -q "models--org--c" "$WORK/flag" && fail "models--org--c listed before it exists"
# the manifest goes first (built from a staging copy: it names no keys), so the repository is whole when listed
rclone copy "$WORK/src/models--org--c" s3test:models/staging/models--org--c
"$HFS3_BIN" build -o "$WORK/c.json" s3test:models/staging/models--org--c >/dev/null 2>&1
rclone copyto "$WORK/c.json" s3test:models/hub/models--org--c/.hfs3/manifest.json
rclone copy "$WORK/src/models--org--c" s3test:models/hub/models--org--c
wait $pid || { cat "$WORK/poll.out" "$WORK/poll.err"; fail "poll.py"; }
[ "$(cat "$WORK/poll.out")" = True ] || { cat "$WORK/poll.out" "$WORK/poll.err"; fail "a repository added while a process runs"; }
ok "a repository added to the bucket while python3 runs is listed and read after HFS3_HUB_TTL"

# the usual order instead: files first (rclone copy), `build` after. A process that looks at the repository in
# between finds no manifest (EIO inside); once `build` has run it reads it, after HFS3_HUB_TTL, without a restart
cat >"$WORK/poll2.py" <<'EOF'
import os, sys, time
hub, flag = sys.argv[1], sys.argv[2]
end = time.time() + 60
failed = 0
while time.time() < end:
    if "models--org--d" in os.listdir(hub):
        try:
            print(open(os.path.join(hub, "models--org--d", "config.json")).read()[:1] == "{", failed)
            sys.exit(0)
        except OSError:
            failed += 1
            open(flag, "w").write("failed\n")
    time.sleep(0.2)
print("not-seen", failed)
EOF
gen flat "$WORK/src/models--org--d" --shards 0.1 --seed 35
HFS3_HUB_TTL=1 P python3 "$WORK/poll2.py" $H "$WORK/flag2" >"$WORK/poll2.out" 2>"$WORK/poll2.err" &
pid=$!
rclone copy "$WORK/src/models--org--d" s3test:models/hub/models--org--d
for i in $(seq 1 300); do [ -s "$WORK/flag2" ] && break; sleep 0.1; done
[ -s "$WORK/flag2" ] || { kill $pid; fail "poll2.py never looked at models--org--d before its manifest"; }
"$HFS3_BIN" build s3test:models/hub/models--org--d >/dev/null 2>&1 || fail "build models--org--d"
wait $pid || { cat "$WORK/poll2.out" "$WORK/poll2.err"; fail "poll2.py"; }
read -r seen nfail <"$WORK/poll2.out"
[ "$seen" = True ] && [ "$nfail" -ge 1 ] || { cat "$WORK/poll2.out" "$WORK/poll2.err"; fail "a repository whose manifest came after its files"; }
ok "a repository looked at before its manifest was built is read after build + HFS3_HUB_TTL ($nfail failed opens first)"

# a few hundred repositories: the listing pages (50 per page here) and every one is there
python3 - "$WORK/big" <<'EOF'
import hashlib, json, os, sys
base = sys.argv[1]
for i in range(300):
    d = os.path.join(base, "models--many--m%03d" % i)
    os.makedirs(os.path.join(d, ".hfs3"))
    body = ("repository %d\n" % i).encode()
    open(os.path.join(d, "a.txt"), "wb").write(body)
    doc = {"hfs3_manifest": 1, "layout": "flat", "entries": [
        {"path": "a.txt", "type": "file", "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}]}
    open(os.path.join(d, ".hfs3", "manifest.json"), "w").write(json.dumps(doc))
EOF
rclone copy --transfers 16 "$WORK/big" s3test:models/big
export HFS3_MOUNTS="$HFS3_MOUNTS;/models/big=s3test:models/big"
[ "$(P ls /models/big | wc -l)" = 300 ] || fail "300 repositories listed"
[ "$(P cat /models/big/models--many--m299/a.txt)" = "repository 299" ] || fail "the last of 300"
[ "$(P cat /models/big/models--many--m000/a.txt)" = "repository 0" ] || fail "the first of 300"
# the delimiter listing the hub's list comes from, in pages of 50 common prefixes (max-keys, continuation tokens)
S3CLI_MAX_KEYS=50 "$HFS3_ROOT/$BUILD/tools/s3cli" "$S3_ENDPOINT" models "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" \
  listdir big/ >"$WORK/listdir" || fail "listdir in pages of 50"
[ "$(grep -c '^big/models--many--m[0-9]*/$' "$WORK/listdir")" = 300 ] && [ "$(wc -l <"$WORK/listdir")" = 300 ] ||
  { head "$WORK/listdir"; fail "300 common prefixes over 6 pages"; }
ok "a hub of 300 repositories lists and reads; its delimiter listing in pages of 50 gives all 300"

# sub-mounts are made lock-free when first looked at: threads that look at 60 cold repositories at once, while
# the main thread forks every few milliseconds and each child reads one of them too; in a cache of its own
cat >"$WORK/hubstress.py" <<'EOF'
import os, random, sys, threading, time
hub, errs = sys.argv[1], []
names = ["models--many--m%03d" % i for i in range(100, 160)]
def reader(seed):
    r = random.Random(seed)
    for n in r.sample(names, len(names)):
        try:
            got = open(os.path.join(hub, n, "a.txt")).read()
            if got != "repository %d\n" % int(n[-3:]):
                errs.append("%s: %r" % (n, got))
        except OSError as e:
            errs.append("%s: %s" % (n, e))
threads = [threading.Thread(target=reader, args=(s,)) for s in range(6)]
for t in threads:
    t.start()
kids = 0
while any(t.is_alive() for t in threads):
    pid = os.fork()
    if pid == 0:
        n = random.choice(names)
        try:
            ok = open(os.path.join(hub, n, "a.txt")).read() == "repository %d\n" % int(n[-3:])
        except OSError:
            ok = False
        os._exit(0 if ok else 1)
    _, st = os.waitpid(pid, 0)
    kids += 1
    if st != 0:
        errs.append("child %d: status %d" % (pid, st))
    time.sleep(0.005)
for t in threads:
    t.join()
print(kids, len(errs))
for e in errs[:5]:
    print(e)
EOF
HFS3_CACHE_DIR=$WORK/cache-stress timeout 300 env LD_PRELOAD="$HFS3_SHIM" python3 "$WORK/hubstress.py" /models/big \
  >"$WORK/hubstress.out" 2>&1 || { cat "$WORK/hubstress.out"; fail "hub stress: exit or timeout"; }
read -r kids nerr <"$WORK/hubstress.out"
[ "$nerr" = 0 ] && [ "$kids" -ge 1 ] || { cat "$WORK/hubstress.out"; fail "hub stress: wrong reads"; }
ok "6 threads on 60 cold repositories of a hub while $kids forked children read too: every read right, no hang"

# fetch of a repository path, then a server with HFS3_OFFLINE=1 reading it through the hub mount
export HFS3_CACHE_DIR=$WORK/cache2
"$HFS3_BIN" fetch s3test:models/hub/models--org--b >"$WORK/f.out" 2>&1 || { cat "$WORK/f.out"; fail "fetch of a repository path"; }
export HFS3_OFFLINE=1
[ "$(P ls $H | wc -l)" = 5 ] || { P ls $H; fail "offline: the hub lists from the cached list"; }
[ "$(P python3 -c "print(open('$H/models--org--b/refs/main').read())")" = "$reva" ] || fail "offline: refs/main"
P cat $H/models--org--b/snapshots/$reva/config.json | cmp - "$WORK/src/models--org--b/snapshots/$reva/config.json" || fail "offline: a file of the fetched repository"
set +e; P cat $H/models--org--a/refs/main >/dev/null 2>"$WORK/off.err"; r=$?; set -e
[ $r = 1 ] || fail "offline: a repository never fetched fails"
ok "fetch REMOTE/models--org--b, then HFS3_OFFLINE=1 reads it through the hub mount"
unset HFS3_OFFLINE
# fetch of the hub itself with --repo
export HFS3_CACHE_DIR=$WORK/cache3
"$HFS3_BIN" fetch --repo datasets--org--d s3test:models/hub >"$WORK/f2.out" 2>&1 || { cat "$WORK/f2.out"; fail "fetch --repo"; }
grep -q "^s3test:models/hub: a hub: 1 repository fetched, 0 failed$" "$WORK/f2.out" || { cat "$WORK/f2.out"; fail "fetch --repo summary"; }
grep -q "^s3test:models/hub/datasets--org--d: " "$WORK/f2.out" || { cat "$WORK/f2.out"; fail "fetch --repo line"; }
ok "fetch --repo NAME HUB fetches that repository"

# issue 24 §3.3: a hub is a hub in cache du and status (its repositories, fetched or not), not "no manifest";
# show and verify on the hub's prefix advise build --all, not build (one flat manifest of the whole hub)
"$HFS3_BIN" cache du >"$WORK/du" 2>&1 || { cat "$WORK/du"; fail "cache du"; }
n=$(sed -n 's/^s3test:models\/hub: a hub of \([0-9]*\) repositories, 1 fetched:$/\1/p' "$WORK/du")
[ "$n" -ge 3 ] 2>/dev/null || { cat "$WORK/du"; fail "cache du: no hub line"; }
"$HFS3_BIN" status >"$WORK/st" 2>&1 || { cat "$WORK/st"; fail "status"; }
for f in du st; do
  grep -qx "s3test:models/hub: a hub of $n repositories, 1 fetched:" "$WORK/$f" &&
    grep -q "^  datasets--org--d: [0-9]* files, [0-9]* cached" "$WORK/$f" && grep -qx "  models--org--a: not fetched" "$WORK/$f" &&
    ! grep -q "no manifest" "$WORK/$f" || { cat "$WORK/$f"; fail "$f: the hub is not shown as a hub"; }
  # the fetched repository once, under its hub: not again as a mount of its own (issue 35)
  [ "$(grep -c "datasets--org--d" "$WORK/$f")" = 1 ] || { cat "$WORK/$f"; fail "$f: the hub's repository listed twice"; }
done
"$HFS3_BIN" status --json | python3 -c '
import json, sys
m = [m for m in json.load(sys.stdin)["mounts"] if m["remote"] == "s3test:models/hub"][0]
r = {x["repository"]: x["fetched"] for x in m["repositories"]}
sys.exit(not (m["hub"] is True and "manifest_error" not in m and r["datasets--org--d"] is True and r["models--org--a"] is False))' ||
  fail "status --json: the hub"
for cmd in show verify; do
  expect_exit 1 "$cmd on a hub" "$HFS3_BIN" $cmd s3test:models/hub
  grep -qxF "hfs3-manifest $cmd: s3test:models/hub is a hub of $n repositories (datasets--org--d, ...) with no manifest of its own: run hfs3-manifest build --all s3test:models/hub, which builds each repository's (one repository: s3test:models/hub/datasets--org--d)" "$WORK/err" ||
    { cat "$WORK/err"; fail "$cmd on a hub: advice"; }
done
ok "a hub in cache du and status (its $n repositories, 1 fetched), show and verify on it advise build --all"
