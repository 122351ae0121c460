#!/usr/bin/env bash
# t_k8s_shapes.sh - the Kubernetes recipe of README.md, reproduced with kubelet's modes: a pod-wide volume is a
# mount (a tmpfs here, as emptyDir medium: Memory; a bind mount for hostPath), mode 0777 root:root, or 2777
# root:FSGROUP with an fsGroup; HFS3_CACHE_DIR names a folder inside it that does not exist yet. An init step
# (root, or the server's uid) runs `hfs3-manifest fetch`; the server step (uid 1000, its fsGroup as a
# supplementary group) loads the model offline through the shim with a REMOTE spelled with a trailing slash.
# Refusals name the directory, why, and what to run. Needs root (mount, setpriv); skipped otherwise.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || [ ! -x /usr/bin/python3 ]; then
  echo "skip: needs root, setpriv and /usr/bin/python3"; exit 0
fi
# every mount this test made is under $WORK (volume runs in a subshell: find them in the mount table)
cleanup() {
  local m
  for m in $(awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  s3env_stop
}
s3env_start "$WORK"
trap cleanup EXIT
chmod 0755 "$WORK" "$WORK/home"
chmod 0644 "$RCLONE_CONFIG"
fetch_model "$WORK/m"
chmod -R a+rX "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
SRV_UID=1000 SRV_GID=1000 FSGROUP=2000

# volume NAME MODE [GROUP]: a fresh mount at $WORK/pod/NAME with kubelet's mode
volume() {
  local d=$WORK/pod/$1
  mkdir -p "$d"
  mount -t tmpfs -o size=64m,mode="$2" tmpfs "$d" || { echo "skip: cannot mount tmpfs" >&2; exit 0; }
  [ -z "${3:-}" ] || chgrp "$3" "$d"
  chmod "$2" "$d"
  echo "$d"
}
# as UID GID GROUPS CMD...: a container's process (GROUPS: the supplementary groups, "" for none)
as() {
  local u=$1 g=$2 gr=$3; shift 3
  if [ "$u" = 0 ]; then env HOME="$WORK/home" "$@"; return; fi
  if [ -n "$gr" ]; then setpriv --reuid="$u" --regid="$g" --groups="$gr" env HOME="$WORK/home" "$@"
  else setpriv --reuid="$u" --regid="$g" --clear-groups env HOME="$WORK/home" "$@"; fi
}
cat >"$WORK/load.py" <<'PY'
import hashlib, os, sys
root, ref = sys.argv[1], sys.argv[2]
n = 0
for dp, dn, fn in os.walk(ref):
    for f in fn:
        rel = os.path.relpath(os.path.join(dp, f), ref)
        with open(os.path.join(root, rel), "rb") as a, open(os.path.join(ref, rel), "rb") as b:
            if hashlib.sha256(a.read()).digest() != hashlib.sha256(b.read()).digest():
                sys.exit("differs: " + rel)
        n += 1
print("loaded", n, "files")
PY
# server UID GID GROUPS CACHE: load the model offline through the shim, REMOTE spelled with a trailing slash
server() {
  as "$1" "$2" "$3" env HFS3_CACHE_DIR="$4" HFS3_OFFLINE=1 HFS3_HELPER="$HFS3_BIN" \
    HFS3_MOUNTS="$WORK/srv/m=s3test:models/m1/" LD_PRELOAD="$HFS3_SHIM" \
    /usr/bin/python3 "$WORK/load.py" "$WORK/srv/m" "$WORK/m"
}
mode_of() { stat -c '%u:%g %a' "$1"; }

# 1. emptyDir, fsGroup 2000: init container as root, server uid 1000 in group 2000
v=$(volume fsg-root 2777 $FSGROUP)
as 0 0 "" env HFS3_CACHE_DIR="$v/hfs3" "$HFS3_BIN" fetch s3test:models/m1 >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch as root into $v/hfs3"; }
[ "$(mode_of "$v/hfs3")" = "0:$FSGROUP 3770" ] || fail "emptyDir+fsGroup, init root: cache $(mode_of "$v/hfs3"), want 0:$FSGROUP 3770"
server $SRV_UID $SRV_GID $FSGROUP "$v/hfs3" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "server uid 1000 (fsGroup) after a root init"; }
grep -q "loaded 4 files" "$WORK/out" || fail "server loaded: $(cat "$WORK/out")"
ok "emptyDir 2777 with fsGroup: root init creates a shared 3770 cache, uid 1000 loads offline"

# 2. emptyDir, fsGroup 2000: init as the server's uid
v=$(volume fsg-uid 2777 $FSGROUP)
as $SRV_UID $SRV_GID $FSGROUP env HFS3_CACHE_DIR="$v/hfs3" "$HFS3_BIN" fetch s3test:models/m1 >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch as uid 1000"; }
[ "$(mode_of "$v/hfs3")" = "$SRV_UID:$FSGROUP 3770" ] || fail "emptyDir+fsGroup, init uid: cache $(mode_of "$v/hfs3")"
server $SRV_UID $SRV_GID $FSGROUP "$v/hfs3" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "server after a uid-1000 init"; }
ok "emptyDir 2777 with fsGroup: init as uid 1000 (shared 3770 cache), server loads offline"

# 3. emptyDir without fsGroup (0777): init as the server's uid -> a private cache of that uid
v=$(volume plain-uid 0777)
as $SRV_UID $SRV_GID "" env HFS3_CACHE_DIR="$v/hfs3" "$HFS3_BIN" fetch s3test:models/m1 >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch as uid 1000 into a 0777 volume"; }
[ "$(mode_of "$v/hfs3")" = "$SRV_UID:$SRV_GID 700" ] || fail "emptyDir 0777, init uid: cache $(mode_of "$v/hfs3")"
server $SRV_UID $SRV_GID "" "$v/hfs3" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "server in a 0777 volume"; }
ok "emptyDir 0777 without fsGroup: init as uid 1000 (private 0700 cache), server loads offline"

# 4. hostPath: a node directory bind-mounted into the pod, prepared once on the node setgid for the group
node=$WORK/node/hfs3; mkdir -p "$node"; chgrp $FSGROUP "$node"; chmod 2775 "$node"
hp=$WORK/pod/hostpath; mkdir -p "$hp"; mount --bind "$node" "$hp" || { echo "skip: cannot bind-mount"; exit 0; }
as 0 0 "" env HFS3_CACHE_DIR="$hp/cache" "$HFS3_BIN" fetch s3test:models/m1 >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch into a hostPath"; }
[ "$(mode_of "$hp/cache")" = "0:$FSGROUP 3770" ] || fail "hostPath: cache $(mode_of "$hp/cache")"
server $SRV_UID $SRV_GID $FSGROUP "$hp/cache" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "server on a hostPath"; }
ok "hostPath (node dir 2775 root:group, bind-mounted): root init, uid 1000 server loads offline"

# refusals: one line naming the directory, why, and what to run
v=$(volume root-only 0777)
as 0 0 "" env HFS3_CACHE_DIR="$v/hfs3" "$HFS3_BIN" fetch s3test:models/m1 >/dev/null 2>&1 || fail "root init in a 0777 volume"
expect_exit 1 "server uid 1000 in root's private cache" as $SRV_UID $SRV_GID "" env HFS3_CACHE_DIR="$v/hfs3" "$HFS3_BIN" fetch s3test:models/m1
grep -q "^hfs3-manifest fetch: cache directory $v/hfs3 belongs to uid 0, not to you (uid 1000).*fsGroup.*run the init container as uid 1000" "$WORK/err" || { cat "$WORK/err"; fail "message for root's private cache"; }
one_line "$WORK/err"
# the server through the shim says the same, not "Permission denied" (issue 24 §3.8)
server $SRV_UID $SRV_GID "" "$v/hfs3" >"$WORK/out" 2>"$WORK/err" && fail "server in root's private cache"
grep -q "^hfs3: cache directory $v/hfs3: belongs to uid 0, not to you (uid 1000): a private cache must be yours .*fsGroup): mounts fail with EIO$" "$WORK/err" ||
  { cat "$WORK/err"; fail "the shim's message for root's private cache"; }
expect_exit 1 "the volume itself as the cache" env HFS3_CACHE_DIR="$v" "$HFS3_BIN" fetch s3test:models/m1
grep -q "cache directory $v is writable by others (mode 0777), a volume as kubelet mounts an emptyDir.*set HFS3_CACHE_DIR to a folder inside it" "$WORK/err" || { cat "$WORK/err"; fail "message for the volume itself"; }
one_line "$WORK/err"
# a 0777 directory that is not a mount: anyone could have made it, refused as before
mkdir "$WORK/open"; chmod 0777 "$WORK/open"
expect_exit 1 "a 0777 directory that is not a volume" env HFS3_CACHE_DIR="$WORK/open/hfs3" "$HFS3_BIN" fetch s3test:models/m1
grep -q "reached through $WORK/open, writable by others without the sticky bit (mode 0777), which is not the root of a mounted volume either; refusing (chmod o-w or +t $WORK/open" "$WORK/err" || { cat "$WORK/err"; fail "message for a 0777 directory"; }
[ ! -e "$WORK/open/hfs3" ] || fail "created a cache in a 0777 directory that is not a volume"
# a volume owned by another user (not root, not me): refused
v=$(volume stranger 0777); chown 4242 "$v"
expect_exit 1 "a 0777 volume of another user" env HFS3_CACHE_DIR="$v/hfs3" "$HFS3_BIN" fetch s3test:models/m1
grep -q "writable by others without the sticky bit" "$WORK/err" || { cat "$WORK/err"; fail "message for a stranger's volume"; }
ok "refusals: root's private cache, the volume itself, a 0777 non-volume, a stranger's volume"

# the cache key: the same model under other spellings of the REMOTE is found offline
v=$(volume key 0777)
env HFS3_CACHE_DIR="$v/hfs3" "$HFS3_BIN" fetch s3test:models//m1// >/dev/null 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch with slashes"; }
for spec in s3test:models/m1 s3test:models/m1/ "s3test:models//m1"; do
  env HFS3_CACHE_DIR="$v/hfs3" HFS3_OFFLINE=1 "$HFS3_BIN" fetch "$spec" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "offline fetch $spec"; }
  grep -q ": 4 files, 0 B fetched" "$WORK/out" || fail "offline $spec: $(cat "$WORK/out")"
done
ok "REMOTE spellings with trailing and doubled slashes share one cache entry"
echo "all ok"
