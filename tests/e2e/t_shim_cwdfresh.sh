#!/usr/bin/env bash
# t_shim_cwdfresh.sh - subprocess.run(cwd=<a directory of a mount>) before anything of the mount is in the cache
# (issue 41 item 6; docs/reference.md: "a child started in a mount works also before the parent has touched a
# mount"). Python's subprocess runs chdir in a vfork child, which may not fetch (design.md section 5): on a fresh
# cache it was EIO, in a hub EIO, and in a hub whose repository is cached ENOENT. Each case with an empty cache
# (or only the repository's index), a plain mount and a hub: `pwd` in the child and a relative read equal the
# local folder's, the parent reads the mount afterwards, and `pwd -P` of a child of a child started there too.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
gen() { python3 "$HFS3_ROOT/scripts/gen_model.py" "$@"; }
gen flat "$WORK/src/flat" --shards 0.1 --seed 41
mkdir -p "$WORK/src/flat/sub/deeper" && echo nested >"$WORK/src/flat/sub/deeper/n.txt"
gen hf-cache "$WORK/src/hub/models--org--a" --shards 0.1 --seed 42
mkdir -p "$WORK/src/hub/models--org--a/extra" && echo extra >"$WORK/src/hub/models--org--a/extra/e.txt"
rclone copy "$WORK/src/flat" s3test:models/flat
rclone copy --links "$WORK/src/hub/models--org--a" s3test:models/hub/models--org--a
"$HFS3_BIN" build s3test:models/flat >/dev/null
"$HFS3_BIN" build --all s3test:models/hub >/dev/null
export HFS3_MOUNTS="/models/flat=s3test:models/flat;/models/hub=s3test:models/hub" HFS3_HELPER=$HFS3_BIN HFS3_LOG=warn
P() { LD_PRELOAD=$HFS3_SHIM "$@"; }
# the child: pwd (the logical path), a relative read, and the parent's own read of the mount afterwards
run() {  # CACHE DIR FILE -> "pwd|bytes of FILE|parent sees FILE"
  HFS3_CACHE_DIR=$1 P python3 -c '
import subprocess, sys
d, f = sys.argv[1], sys.argv[2]
r = subprocess.run(["sh", "-c", "pwd; wc -c <" + f], cwd=d, capture_output=True, text=True)
print("%s|%s|%s" % (r.stdout.split()[0] if r.returncode == 0 else "rc=%d %s" % (r.returncode, r.stderr.strip()),
                    r.stdout.split()[1] if r.returncode == 0 else "", len(open(d + "/" + f, "rb").read())))
' "$2" "$3" 2>&1 | tail -1 || true
}
n=$(wc -c <"$WORK/src/flat/sub/deeper/n.txt"); e=$(wc -c <"$WORK/src/hub/models--org--a/extra/e.txt")
got=$(run "$WORK/c1" /models/flat/sub/deeper n.txt)
[ "$got" = "/models/flat/sub/deeper|$n|$n" ] || fail "plain mount, fresh cache: subprocess cwd= ($got)"
ok "plain mount, fresh cache: subprocess.run(cwd=M/sub/deeper) runs there (pwd, a relative read), the parent reads after"
got=$(run "$WORK/c2" /models/hub/models--org--a/extra e.txt)
[ "$got" = "/models/hub/models--org--a/extra|$e|$e" ] || fail "hub, fresh cache: subprocess cwd= ($got)"
ok "hub, fresh cache: subprocess.run(cwd=HUB/REPO/extra) runs there"
# a hub whose repository is cached already (another process read it), in a new process that never touched the hub
got=$(run "$WORK/c2" /models/hub/models--org--a/extra e.txt)
[ "$got" = "/models/hub/models--org--a/extra|$e|$e" ] || fail "hub, repository cached: subprocess cwd= ($got)"
ok "hub, repository cached: subprocess.run(cwd=HUB/REPO/extra) runs there"
# answers that are errors stay the kernel's: a missing directory ENOENT, a file ENOTDIR, with a fresh cache
for c in "flat/missing FileNotFoundError" "flat/sub/deeper/n.txt NotADirectoryError" \
         "hub/models--org--a/missing FileNotFoundError" "hub/models--org--nope/x FileNotFoundError"; do
  set -- $c
  got=$(HFS3_CACHE_DIR=$WORK/c3-${1//\//_} P python3 -c '
import subprocess, sys
try:
    subprocess.run(["true"], cwd=sys.argv[1]); print("ran")
except OSError as e:
    print(type(e).__name__)' "/models/$1" 2>&1 | tail -1 || true)
  [ "$got" = "$2" ] || fail "fresh cache: subprocess cwd=/models/$1: $got, not $2"
done
ok "fresh cache: cwd= a missing directory, a file, a repository not in the hub: the kernel's errors"
