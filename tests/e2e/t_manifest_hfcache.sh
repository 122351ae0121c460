#!/usr/bin/env bash
# build/show/verify on an HF cache repo folder uploaded with `rclone copy --links`: symlinks from .rclonelink
# objects, revision from refs/main, LFS blobs hashed by name; and the checks that refuse a bad tree.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
H=$HFS3_BIN R=s3test:models/hub/models--org--tiny
python3 "$HFS3_ROOT/scripts/gen_model.py" hf-cache "$WORK/repo" --shards 3,2 --seed 3
rclone copy --links "$WORK/repo" $R

$H build $R >"$WORK/sum"
grep -q "^$R (hf-cache): 8 files, 5 directories, 12 symlinks" "$WORK/sum" || { cat "$WORK/sum"; fail "summary"; }
grep -q "3 LFS names" "$WORK/sum" || { cat "$WORK/sum"; fail "LFS names"; }
ok "build: $(cat "$WORK/sum")"
$H show --json $R >"$WORK/m.json"
python3 - "$WORK/m.json" "$WORK/repo" <<'PY'
import hashlib, json, os, sys
def check(cond, what):  # explicit: an assert would vanish under python -O / PYTHONOPTIMIZE
    if not cond:
        sys.exit(f"not ok: {what}")
m = json.load(open(sys.argv[1])); root = sys.argv[2]
check(m["layout"] == "hf-cache", 'm["layout"] == "hf-cache"')
check(m["revision"] == open(os.path.join(root, "refs/main")).read().strip(), 'm["revision"] == open(os.path.join(root, "refs/main")).read().strip()')
seen = set()
for e in m["entries"]:
    p = os.path.join(root, e["path"]); seen.add(e["path"])
    if e["type"] == "symlink":
        check(os.path.islink(p) and os.readlink(p) == e["target"], e)
    elif e["type"] == "file":
        data = open(p, "rb").read()
        check(e["sha256"] == hashlib.sha256(data).hexdigest() and e["size"] == len(data), e)
    else:
        check(os.path.isdir(p) and not os.path.islink(p), e)
want = set()
for d, dirs, files in os.walk(root):
    for n in dirs + files:
        want.add(os.path.relpath(os.path.join(d, n), root))
check(seen == want, seen ^ want)
print("ok: hf-cache entries, targets and sha256 match the local tree")
PY
# --local adds the chunk digests of every file it hashed; the rest is the same
nochunks() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("chunk_size", None); [e.pop("chunks", None) for e in d["entries"]]; print(json.dumps(d, sort_keys=True))' "$1"; }
$H build --local "$WORK/repo" -o - $R >"$WORK/local.json" 2>/dev/null || fail "--local build"
cmp <(nochunks "$WORK/local.json") <(nochunks "$WORK/m.json") || fail "--local differs"
$H show $R | grep -q "config.json -> ../../blobs/" || fail "show shows links"
$H verify --deep $R | grep -q OK || fail "verify --deep"
ok "--local gives the same bytes; show; verify --deep"

# refusals, each naming the key; nothing written
cp -r "$WORK/repo" "$WORK/bad1"; ln -s ../../../../etc/passwd "$WORK/bad1/snapshots/escape"
rclone copy --links "$WORK/bad1" s3test:models/bad1
expect_exit 1 "escaping link" $H build s3test:models/bad1
grep -q "key bad1/snapshots/escape.rclonelink: symlink target \"../../../../etc/passwd\" leaves the tree" "$WORK/err" || { cat "$WORK/err"; fail "escape named"; }
expect_exit 1 "no manifest written" $H show s3test:models/bad1
grep -q "no manifest" "$WORK/err" || fail "bad1 has no manifest"

mkdir -p "$WORK/bad2"; echo a >"$WORK/bad2/x"; rclone copy "$WORK/bad2" s3test:models/bad2
printf 'y' >"$WORK/x.rclonelink"; rclone copyto "$WORK/x.rclonelink" s3test:models/bad2/x.rclonelink
expect_exit 1 "x and x.rclonelink" $H build s3test:models/bad2
grep -q "both bad2/x and bad2/x.rclonelink" "$WORK/err" || { cat "$WORK/err"; fail "x/x.rclonelink named"; }

mkdir -p "$WORK/bad3/a"; echo 1 >"$WORK/bad3/a/b"; rclone copy "$WORK/bad3" s3test:models/bad3
echo 2 >"$WORK/plain"; rclone copyto "$WORK/plain" s3test:models/bad3/a
expect_exit 1 "a beside a/" $H build s3test:models/bad3
grep -q "key bad3/a is an object but bad3/a/b" "$WORK/err" || { cat "$WORK/err"; fail "a beside a/ named"; }

mkdir -p "$WORK/bad4/d"; ln -s loop2 "$WORK/bad4/d/loop1"; ln -s loop1 "$WORK/bad4/d/loop2"
rclone copy --links "$WORK/bad4" s3test:models/bad4
expect_exit 1 "symlink loop" $H build s3test:models/bad4
grep -qi "loop" "$WORK/err" || { cat "$WORK/err"; fail "loop named"; }
ok "refuses escaping links, x beside x.rclonelink, a beside a/, loops"

# issue 24 §3.6: the same repo uploaded without --links (rclone skips every symlink, so snapshots/ is missing):
# refused with what to run, nothing written; --layout flat still takes it as it is
R2=s3test:models/nolinks/models--org--tiny
rclone copy "$WORK/repo" $R2 2>/dev/null
expect_exit 1 "build of an HF cache uploaded without --links" $H build $R2
grep -qxF "$R2: blobs/ and refs/ but no snapshots/: an HF cache repository uploaded without its symlinks (rclone skips them unless told); upload it again with rclone copy --links LOCAL_REPO $R2, then build (or build --layout flat to take it as it is)" "$WORK/err" ||
  { cat "$WORK/err"; fail "no advice for an HF cache uploaded without --links"; }
! rclone lsf $R2/.hfs3/ 2>/dev/null | grep -q manifest.json || fail "a manifest was written"
# said once, in stdout and stderr together (a terminal shows both), with the REMOTE once: by build, and by
# build --all of the hub above it (issue 35: three times, once as "REMOTE: REMOTE: ...")
n=$(grep -c "uploaded without its symlinks" "$WORK/out" "$WORK/err" | awk -F: '{s += $NF} END {print s}')
[ "$n" = 1 ] || { cat "$WORK/out" "$WORK/err"; fail "build: the --links advice said $n times"; }
expect_exit 1 "build --all of a hub with a repository uploaded without --links" $H build --all s3test:models/nolinks
cat "$WORK/out" "$WORK/err"
n=$(grep -c "uploaded without its symlinks" "$WORK/out" "$WORK/err" | awk -F: '{s += $NF} END {print s}')
[ "$n" = 1 ] || fail "build --all: the --links advice said $n times"
grep -qxF "$R2: blobs/ and refs/ but no snapshots/: an HF cache repository uploaded without its symlinks (rclone skips them unless told); upload it again with rclone copy --links LOCAL_REPO $R2, then build (or build --layout flat to take it as it is)" "$WORK/err" ||
  fail "build --all: the advice is not the one line build prints"
grep -qxF "models--org--tiny: failed (the reason is on stderr)" "$WORK/out" || fail "build --all: the repository's line"
! grep -q "$R2: $R2" "$WORK/out" "$WORK/err" || fail "build --all: the REMOTE repeated"
$H build --layout flat $R2 >/dev/null 2>&1 || fail "--layout flat on it"
ok "an HF cache uploaded without --links: build and build --all say once to upload with rclone copy --links"
