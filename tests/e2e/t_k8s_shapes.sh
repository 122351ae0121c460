#!/usr/bin/env bash
# t_k8s_shapes.sh - the Kubernetes manifest of README.md, run as written (its Secret's endpoint and keys swapped
# for the test server's, vllm for a loader that compares every file), then docs/cache.md's hub pod the same way, then the shapes of docs/cache.md
# "On Kubernetes", reproduced with kubelet's modes: a pod-wide volume is a
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

# 0. README.md's manifest, as written: its pod's uid, gid and fsGroup, its volume, each container's command and
# environment (the Secret's through envFrom), HOME=/ as kubelet gives a uid without a passwd entry
py=/usr/bin/python3
"$py" -c 'import yaml' 2>/dev/null || py=$HFS3_ROOT/.venv/bin/python
"$py" -c 'import yaml' 2>/dev/null || { echo "skip: no python with yaml (python3-yaml)"; exit 0; }
# yaml_after FILE MARKER: the yaml block after the line '<!-- MARKER:' in FILE
yaml_after() { awk -v m="<!-- $2:" 'index($0, m) == 1 {f=1; next} f && /^```/ {if (n++) exit; next} f' "$1"; }
yaml_after "$HFS3_ROOT/README.md" k8s-manifest >"$WORK/pod.yaml"
[ -s "$WORK/pod.yaml" ] || fail "README.md: no yaml block after the '<!-- k8s-manifest:' marker"
# parse POD.yaml [SECRETS.yaml]: shell variables for the pod's ids, its volume and each container (the Secrets
# of both files through envFrom)
cat >"$WORK/parse.py" <<'PY'
import shlex, sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
other = [d for f in sys.argv[2:] for d in yaml.safe_load_all(open(f))]
secrets = {d["metadata"]["name"]: d["stringData"] for d in docs + other if d["kind"] == "Secret"}
pod, = [d for d in docs if d["kind"] == "Pod"]
spec = pod["spec"]
sc = spec["securityContext"]
vol, = spec["volumes"]
assert "emptyDir" in vol, "the cache volume is an emptyDir"
q = lambda v: shlex.quote(str(v))
print(f"P_UID={sc['runAsUser']} P_GID={sc['runAsGroup']} P_FSGROUP={sc.get('fsGroup', '')}")
def container(tag, c):
    mnt, = [m["mountPath"] for m in c["volumeMounts"] if m["name"] == vol["name"]]
    env = {}
    for ef in c.get("envFrom", []):
        env.update(secrets[ef["secretRef"]["name"]])
    env.update({e["name"]: e["value"] for e in c.get("env", [])})
    print(f"{tag}_MNT={q(mnt)}")
    print(f"{tag}_CMD=(" + " ".join(q(a) for a in c["command"]) + ")")
    print(f"{tag}_ENV=(" + " ".join(q(f"{k}={v}") for k, v in env.items()) + ")")
init, = spec["initContainers"]
server, = spec["containers"]
container("INIT", init)
container("SRV", server)
PY
"$py" "$WORK/parse.py" "$WORK/pod.yaml" >"$WORK/pod.sh" || fail "README.md's manifest: $(cat "$WORK/pod.sh")"
source "$WORK/pod.sh"
[ "${INIT_CMD[0]} ${INIT_CMD[1]}" = "hfs3-manifest fetch" ] || fail "README init container: ${INIT_CMD[*]}"
n=${#SRV_CMD[@]}
[ "${SRV_CMD[0]} ${SRV_CMD[1]} ${SRV_CMD[2]} ${SRV_CMD[4]} ${SRV_CMD[5]} ${SRV_CMD[6]}" = "hfs3-manifest run --mount -- vllm serve" ] && [ "$n" = 8 ] ||
  fail "README server: ${SRV_CMD[*]}"
local_path=${SRV_CMD[3]%%=*} remote=${SRV_CMD[3]#*=}
[ "${SRV_CMD[7]}" = "$local_path" ] && [ "$remote" = "${INIT_CMD[2]}" ] || fail "README: the server mounts ${SRV_CMD[3]}, serves ${SRV_CMD[7]}, init fetches ${INIT_CMD[2]}"
rname=${remote%%:*}; RN=$(echo "$rname" | tr a-z A-Z); bucket_path=${remote#*:}
rclone copy "$WORK/m" "s3test:$bucket_path" && "$HFS3_BIN" build "s3test:$bucket_path" >/dev/null 2>"$WORK/err" || { cat "$WORK/err"; fail "publish the README's model"; }
v=$(volume readme "$([ -n "$P_FSGROUP" ] && echo 2777 || echo 0777)" $P_FSGROUP)
# what kubelet does to the pod's processes: the volume at mountPath, the Secret's endpoint and keys the test
# server's (every other variable as written)
pod_env() {
  local e
  for e in "$@"; do
    case "$e" in
      RCLONE_CONFIG_${RN}_ENDPOINT=*) e=RCLONE_CONFIG_${RN}_ENDPOINT=$S3_ENDPOINT ;;
      RCLONE_CONFIG_${RN}_ACCESS_KEY_ID=*|RCLONE_CONFIG_${RN}_SECRET_ACCESS_KEY=*) e=${e%%=*}=S3RVER ;;
    esac
    case "${e#*=}" in "$SRV_MNT"|"$SRV_MNT"/*) e=${e%%=*}=$v${e#*=$SRV_MNT} ;; esac
    printf '%s\0' "$e"
  done
}
[ "$INIT_MNT" = "$SRV_MNT" ] || fail "README: the containers mount the cache at $INIT_MNT and $SRV_MNT"
mapfile -d '' ienv < <(pod_env "${INIT_ENV[@]}")
mapfile -d '' senv < <(pod_env "${SRV_ENV[@]}")
printf '%s\n' "${ienv[@]}" | grep -q "^HFS3_CACHE_DIR=$v/" || fail "README: HFS3_CACHE_DIR is not inside the volume"
pass=(); for e in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do [ -z "${!e:-}" ] || pass+=("$e=${!e}"); done
groups=(--clear-groups); [ -z "$P_FSGROUP" ] || groups=(--groups="$P_FSGROUP")
in_pod() { setpriv --reuid="$P_UID" --regid="$P_GID" "${groups[@]}" env -i PATH=/usr/bin:/bin HOME=/ "${pass[@]}" "$@"; }
in_pod "${ienv[@]}" "$HFS3_BIN" "${INIT_CMD[@]:1}" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "README init container"; }
in_pod "${senv[@]}" "$HFS3_BIN" "${SRV_CMD[@]:1:4}" /usr/bin/python3 "$WORK/load.py" "$local_path" "$WORK/m" \
  >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "README server container"; }
grep -q "loaded 4 files" "$WORK/out" || fail "README server loaded: $(cat "$WORK/out")"
printf '%s\n' "${senv[@]}" | grep -qx HFS3_OFFLINE=1 || fail "README: the server is not offline"
ok "README.md's Kubernetes manifest as written: init fetch, then an offline server through run (uid $P_UID)"

# 0b. docs/cache.md's hub pod, as written (the README's Secret): a hub of two repositories built with build --all;
# the init container fetches one; the offline server mounts the whole hub and loads the repository by its name,
# the huggingface_hub offline way (HF_HUB_CACHE, refs/main, snapshots/<rev>/), vllm swapped for a loader
yaml_after "$HFS3_ROOT/docs/cache.md" k8s-hub >"$WORK/hub.yaml"
[ -s "$WORK/hub.yaml" ] || fail "docs/cache.md: no yaml block after the '<!-- k8s-hub:' marker"
"$py" "$WORK/parse.py" "$WORK/hub.yaml" "$WORK/pod.yaml" >"$WORK/hub.sh" || fail "docs/cache.md's hub pod: $(cat "$WORK/hub.sh")"
source "$WORK/hub.sh"
[ "${INIT_CMD[0]} ${INIT_CMD[1]} ${#INIT_CMD[@]}" = "hfs3-manifest fetch 3" ] || fail "hub pod init container: ${INIT_CMD[*]}"
[ "${SRV_CMD[0]} ${SRV_CMD[1]} ${SRV_CMD[2]} ${SRV_CMD[4]} ${SRV_CMD[5]} ${SRV_CMD[6]} ${#SRV_CMD[@]}" = "hfs3-manifest run --mount -- vllm serve 8" ] ||
  fail "hub pod server: ${SRV_CMD[*]}"
hub_local=${SRV_CMD[3]%%=*} hub=${SRV_CMD[3]#*=} repo_id=${SRV_CMD[7]}
repo=models--${repo_id//\//--}
[ "${INIT_CMD[2]}" = "$hub/$repo" ] || fail "hub pod: init fetches ${INIT_CMD[2]}, the server serves $repo_id from $hub"
printf '%s\n' "${SRV_ENV[@]}" | grep -qx "HF_HUB_CACHE=$hub_local" || fail "hub pod: HF_HUB_CACHE is not the hub's mount $hub_local"
[ "${hub%%:*}" = "$rname" ] || fail "hub pod: remote ${hub%%:*}, the README's Secret defines $rname"
hub_path=${hub#*:}
gen() { python3 "$HFS3_ROOT/scripts/gen_model.py" "$@" >/dev/null; }
gen hf-cache "$WORK/hubsrc/$repo" --shards 0.2,0.1 --seed 41
gen hf-cache "$WORK/hubsrc/models--org--other" --shards 0.1 --seed 42
chmod -R a+rX "$WORK/hubsrc"
for r in "$repo" models--org--other; do rclone copy --links "$WORK/hubsrc/$r" "s3test:$hub_path/$r"; done
"$HFS3_BIN" build --all "s3test:$hub_path" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "build --all the hub pod's hub"; }
cat >"$WORK/hubload.py" <<'PY'
import os, sys
hub, repo_id, src = os.environ["HF_HUB_CACHE"], sys.argv[1], sys.argv[2]
d = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
rev = open(os.path.join(d, "refs", "main")).read().strip()
snap, ref = os.path.join(d, "snapshots", rev), os.path.join(src, "snapshots", rev)
n = 0
for f in sorted(os.listdir(ref)):
    with open(os.path.join(snap, f), "rb") as a, open(os.path.join(ref, f), "rb") as b:
        if a.read() != b.read():
            sys.exit("differs: " + f)
    n += 1
print("hub", " ".join(sorted(os.listdir(hub))), "loaded", n, "files of", repo_id)
PY
v=$(volume hub "$([ -n "$P_FSGROUP" ] && echo 2777 || echo 0777)" $P_FSGROUP)
mapfile -d '' ienv < <(pod_env "${INIT_ENV[@]}")
mapfile -d '' senv < <(pod_env "${SRV_ENV[@]}")
[ "$INIT_MNT" = "$SRV_MNT" ] || fail "hub pod: the containers mount the cache at $INIT_MNT and $SRV_MNT"
printf '%s\n' "${ienv[@]}" | grep -q "^HFS3_CACHE_DIR=$v/" || fail "hub pod: HFS3_CACHE_DIR is not inside the volume"
groups=(--clear-groups); [ -z "$P_FSGROUP" ] || groups=(--groups="$P_FSGROUP")
in_pod "${ienv[@]}" "$HFS3_BIN" "${INIT_CMD[@]:1}" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "hub pod init container"; }
in_pod "${senv[@]}" "$HFS3_BIN" "${SRV_CMD[@]:1:4}" /usr/bin/python3 "$WORK/hubload.py" "$repo_id" "$WORK/hubsrc/$repo" \
  >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/out" "$WORK/err"; fail "hub pod server container"; }
n=$(ls "$WORK/hubsrc/$repo/snapshots/$(cat "$WORK/hubsrc/$repo/refs/main")" | wc -l)
want=$(printf '%s\n' models--org--other "$repo" | LC_ALL=C sort | tr '\n' ' ')
grep -qx "hub ${want}loaded $n files of $repo_id" "$WORK/out" || fail "hub pod server: $(cat "$WORK/out")"
printf '%s\n' "${senv[@]}" | grep -qx HFS3_OFFLINE=1 || fail "hub pod: the server is not offline"
ok "docs/cache.md's hub pod as written: init fetches $repo, the offline server lists the hub and loads $repo_id ($n files)"

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
