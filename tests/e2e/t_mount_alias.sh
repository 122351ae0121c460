#!/usr/bin/env bash
# t_mount_alias.sh - issue 11 §1: a mount is cached by what its REMOTE resolves to (endpoint, bucket, prefix),
# not only by the string. After `fetch` with one spelling, a server with HFS3_OFFLINE=1 loads the model through
# the shim with other spellings of the same endpoint + bucket + prefix (trailing and doubled slashes,
# `name:/bucket`, another rclone remote with the endpoint spelled otherwise, s3:// through the AWS variables)
# with 0 requests to S3 (all of them go through a counting proxy); another bucket, prefix, port or host name
# does not alias, and says what it resolves to. `cache du`/`status` show the spellings as one mount, and gc's
# "unreferenced" still counts every blob as referenced.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"
trap 'stop_proxies; s3env_stop' EXIT
H=$HFS3_BIN

m=$WORK/model
mkdir -p "$m/sub"
printf '{"architectures": ["Test"]}\n' >"$m/config.json"
head -c 300000 /dev/urandom >"$m/tokenizer.json"
head -c $((3 << 20)) /dev/urandom >"$m/model.safetensors"
: >"$m/sub/empty.txt"
fetch_publish "$m" s3test:models/qwen
mkdir -p "$WORK/other" && echo other >"$WORK/other/config.json"
fetch_publish "$WORK/other" s3test:models/other

# every request below goes through the proxy "via" (its log counts them)
start_proxy via
P=$(sed -n 's/^port //p' "$WORK/via.port")
LOG=$WORK/via.log
# another rclone remote of the same endpoint, spelled in capitals with a trailing slash, virtual-hosted
export RCLONE_CONFIG_OTHERNAME_TYPE=s3 RCLONE_CONFIG_OTHERNAME_PROVIDER=Other \
       RCLONE_CONFIG_OTHERNAME_ACCESS_KEY_ID=S3RVER RCLONE_CONFIG_OTHERNAME_SECRET_ACCESS_KEY=S3RVER \
       RCLONE_CONFIG_OTHERNAME_ENDPOINT="HTTP://127.0.0.1:$P/" RCLONE_CONFIG_OTHERNAME_FORCE_PATH_STYLE=false
# the same port by another host name: not the same endpoint (names are compared, not addresses)
export RCLONE_CONFIG_BYNAME_TYPE=s3 RCLONE_CONFIG_BYNAME_ENDPOINT="http://localhost:$P"
# s3:// through the AWS variables, at the proxy too
export AWS_ENDPOINT_URL_S3="http://127.0.0.1:$P"
export HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$H HFS3_PREFETCH=0

out=$("$H" fetch via:models/qwen 2>"$WORK/err") || { cat "$WORK/err"; fail "fetch via:models/qwen"; }
echo "$out"
n0=$(wc -l <"$LOG")
[ "$n0" -gt 0 ] || fail "the fetch went through the proxy"
ok "fetched with via:models/qwen ($n0 requests)"

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
M=$WORK/mnt/qwen
# serve SPELLING: loads the model through the shim, offline, with that REMOTE; stderr in $WORK/err
serve() {
  HFS3_OFFLINE=1 HFS3_MOUNTS="$M=$1" LD_PRELOAD=$HFS3_SHIM python3 "$WORK/load.py" "$M" "$m" 2>"$WORK/err"
}
for spelling in via:models/qwen via:models/qwen/ "via:/models//qwen//" othername:models/qwen s3://models/qwen \
                s3://models/qwen/; do
  out=$(serve "$spelling") || { cat "$WORK/err"; fail "offline load with $spelling"; }
  [ "$out" = "loaded 4 files" ] || fail "offline load with $spelling: $out"
  [ ! -s "$WORK/err" ] || { cat "$WORK/err"; fail "offline load with $spelling said something"; }
  [ "$(wc -l <"$LOG")" = "$n0" ] || { tail -n +$((n0 + 1)) "$LOG"; fail "offline load with $spelling made requests"; }
  ok "offline with $spelling: 4 files, 0 requests"
done
# what the first spelling's offline open found: its own cache entry now, with what it resolves to
# (the spelling the helper saw last: the offline check of s3://models/qwen/ runs it too)
d_s3=$(grep -lx 's3://models/qwen/\?' "$HFS3_CACHE_DIR"/mounts/*/remote || true)
[ -n "$d_s3" ] || fail "s3://models/qwen has its own cache entry"
[ "$(cat "$(dirname "$d_s3")/canonical")" = "http://127.0.0.1:$P/models/qwen" ] || fail "its canonical"
ok "the new spelling's entry records http://127.0.0.1:$P/models/qwen"
# the offline CLI too
HFS3_OFFLINE=1 expect_exit 0 "offline fetch with another spelling" "$H" fetch othername:/models/qwen
grep -q " 0 B fetched, .* 0 failed" "$WORK/out" || { cat "$WORK/out"; fail "offline fetch: nothing to fetch"; }
[ "$(wc -l <"$LOG")" = "$n0" ] || fail "offline fetch made requests"
ok "offline fetch with othername:/models/qwen: all cached, 0 requests"

# what does not alias: another prefix (fetched nowhere), another bucket, a sub-prefix, another host name
for spelling in via:models/other via:models2/qwen via:models/qwen/sub byname:models/qwen; do
  id=$(case $spelling in byname:*) echo "http://localhost:$P/models/qwen";; *) echo "http://127.0.0.1:$P/${spelling#via:}";; esac)
  if out=$(serve "$spelling"); then fail "offline load with $spelling succeeded: $out"; fi
  grep -q "HFS3_OFFLINE=1 and no cached manifest for it or any REMOTE that resolves to the same $id: run hfs3-manifest fetch $spelling online with HFS3_CACHE_DIR=$HFS3_CACHE_DIR first" "$WORK/err" ||
    { cat "$WORK/err"; fail "offline load with $spelling: the message"; }
  [ "$(grep -c '^hfs3:' "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "offline load with $spelling: one line"; }
  ok "offline with $spelling: not aliased, one line naming $id"
done
[ "$(wc -l <"$LOG")" = "$n0" ] || fail "the refused spellings made requests"
# a remote the server cannot resolve: says both
if out=$(serve undefined:models/qwen); then fail "offline load with an undefined remote succeeded"; fi
grep -q "undefined:models/qwen: HFS3_OFFLINE=1 and no cached manifest for it, and it cannot be resolved here .*remote undefined: not found in rclone config" "$WORK/err" ||
  { cat "$WORK/err"; fail "offline load with an undefined remote: the message"; }
ok "offline with an undefined remote: says it is not cached and cannot be resolved"

# du and status: the spellings are one mount; every blob is referenced
expect_exit 0 "cache du" "$H" cache du
cat "$WORK/out"
[ "$(grep -c '^[^ ].*: 4 files, 4 cached' "$WORK/out")" = 1 ] || fail "du: the model once"
group=$(grep -A1 '^[^ ].*: 4 files, 4 cached' "$WORK/out")
grep -q "^  also as: .*(all resolve to http://127.0.0.1:$P/models/qwen)" <<<"$group" || fail "du: the aliases"
for r in via:models/qwen s3://models/qwen othername:; do grep -q "$r" <<<"$group" || fail "du: $r in the group"; done
grep -q "; every cached file belongs to a cached manifest$" "$WORK/out" || fail "du: every blob referenced"
expect_exit 0 "cache du --json s3://models/qwen" "$H" cache du --json s3://models/qwen
python3 - "$WORK/out" "http://127.0.0.1:$P/models/qwen" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ms = d["mounts"]
assert len(ms) == 1, ms
assert ms[0]["resolves_to"] == sys.argv[2], ms[0]
names = {ms[0]["remote"]} | {a["remote"] for a in ms[0]["aliases"]}
assert {"via:models/qwen", "s3://models/qwen"} <= names and any(n.startswith("othername:") for n in names), names
assert d["unreferenced_files"] == 0, d
PY
expect_exit 0 "status --json" "$H" status --json
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); q = [m for m in d["mounts"] if m["files"] == 4]; assert len(q) == 1, q' "$WORK/out"
expect_exit 0 "gc --unreferenced --dry-run" "$H" cache gc --unreferenced --dry-run
[ "$(ls "$HFS3_CACHE_DIR/blobs" | wc -l)" = 4 ] || fail "gc removed blobs"
ok "du, status: one mount with its aliases; gc: nothing unreferenced"

# online, the source's ETag came along: a new spelling costs one conditional GET (304), no blob
n1=$(wc -l <"$LOG")
HFS3_MANIFEST_TTL=0 HFS3_MOUNTS="$M=s3://models/qwen" LD_PRELOAD=$HFS3_SHIM cat "$M/config.json" >/dev/null 2>"$WORK/err" ||
  { cat "$WORK/err"; fail "online read with s3://models/qwen"; }
tail -n +$((n1 + 1)) "$LOG"
[ "$(tail -n +$((n1 + 1)) "$LOG" | wc -l)" = 1 ] && tail -n +$((n1 + 1)) "$LOG" | grep -q "manifest.json .* 304 " ||
  fail "online: one conditional GET of the manifest"
ok "online with an adopted entry: one manifest request, answered 304"

# online with S3 unreachable and nothing of its own cached: another spelling's manifest, with a warning
stop_proxies
export RCLONE_CONFIG_THIRD_TYPE=s3 RCLONE_CONFIG_THIRD_ENDPOINT="http://127.0.0.1:$P"
out=$(HFS3_MOUNTS="$M=third:models/qwen" LD_PRELOAD=$HFS3_SHIM HFS3_RETRIES=0 python3 "$WORK/load.py" "$M" "$m" \
      2>"$WORK/err") || true
[ "$out" = "loaded 4 files" ] || { cat "$WORK/err"; fail "S3 down: served from the alias"; }
ok "S3 unreachable: a spelling with nothing cached uses the same mount cached under another"

# a member of a shared cache writes a mount's remote and canonical: `cache du` and `status` print them with the
# control characters escaped (issue 23 item 11), never an escape sequence that retitles or redraws the terminal
printf 's3://models/qwen\033]0;owned\007\033[2J\302\233\233\303\251' >"$d_s3"   # ... C1 CSI in UTF-8, a lone 0x9b, é
for c in $(grep -lx "http://127.0.0.1:$P/models/qwen" "$HFS3_CACHE_DIR"/mounts/*/canonical); do
  printf 'http://evil/\033[1A\rfake line' >"$c"   # every alias still resolves to one (now hostile) canonical
done
for cmd in "cache du" status; do
  expect_exit 0 "$cmd with control characters in a mount's files" "$H" $cmd
  # no raw control byte, and no raw 0x9b (CSI to an 8-bit terminal): the only one planted is in the remote
  if LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$WORK/out" || LC_ALL=C grep -q $'\x9b' "$WORK/out"; then
    cat -v "$WORK/out"; fail "$cmd printed a control character"
  fi
  grep -qF 's3://models/qwen\x1b]0;owned\x07\x1b[2J\xc2\x9b\x9bé' "$WORK/out" || { cat -v "$WORK/out"; fail "$cmd: the escaped remote"; }
done
grep -qF 'http://evil/\x1b[1A\x0dfake line' "$WORK/out" || { cat -v "$WORK/out"; fail "status: the escaped canonical"; }
ok "cache du, status: a member's control characters in remote and canonical are printed escaped"

# issue 23 item 8: the same spelling, now resolving to another endpoint (its rclone.conf changed). The manifest
# cached from the old endpoint is not this REMOTE's any more: offline and with S3 unreachable it is refused with
# one line naming both endpoints; online the new endpoint's manifest replaces it.
export HFS3_CACHE_DIR=$WORK/cache8
export RCLONE_CONFIG_MOVED_TYPE=s3 RCLONE_CONFIG_MOVED_PROVIDER=Other RCLONE_CONFIG_MOVED_ACCESS_KEY_ID=S3RVER \
       RCLONE_CONFIG_MOVED_SECRET_ACCESS_KEY=S3RVER RCLONE_CONFIG_MOVED_ENDPOINT="http://127.0.0.1:$S3_PORT"
expect_exit 0 "fetch moved:models/qwen" "$H" fetch moved:models/qwen
export RCLONE_CONFIG_MOVED_ENDPOINT="http://localhost:$S3_PORT"   # the same server, another endpoint by the rules
HFS3_OFFLINE=1 expect_exit 3 "offline, the endpoint changed" "$H" _index moved:models/qwen
one_line "$WORK/err"
grep -q "came from http://127.0.0.1:$S3_PORT/models/qwen, but it now resolves to http://localhost:$S3_PORT/models/qwen" \
  "$WORK/err" || { cat "$WORK/err"; fail "offline: the message names both endpoints"; }
ok "offline, endpoint changed: $(cat "$WORK/err")"
# the shim with that very spelling and its index cached: offline it has the helper check the endpoint once per
# mount and process, and refuses the old endpoint's manifest with the helper's line; never served silently
if HFS3_OFFLINE=1 HFS3_MOUNTS="$M=moved:models/qwen" LD_PRELOAD=$HFS3_SHIM cat "$M/config.json" >"$WORK/out" \
   2>"$WORK/err"; then
  fail "the shim offline served the manifest cached from the old endpoint"
fi
grep -q "came from http://127.0.0.1:$S3_PORT/models/qwen, but it now resolves to http://localhost:$S3_PORT/models/qwen" \
  "$WORK/err" || { cat "$WORK/err"; fail "the shim offline: the helper's line naming both endpoints"; }
[ "$(grep -c "but it now resolves to" "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "the shim offline: one line, not two"; }
ok "the shim offline, endpoint changed: refused, $(head -1 "$WORK/err")"
# the mount first touched in a vfork child (Python's subprocess changing into it): the child maps the index
# without the check and the parent shares its memory; the parent still has the helper check it before it
# serves a byte (review of e2f810d)
cat >"$WORK/vf.py" <<'PY'
import subprocess, sys
try:
    subprocess.run(["true"], cwd=sys.argv[1])
except OSError as e:
    print("child", e.errno)
try:
    open(sys.argv[1] + "/config.json").read()
    print("served")
except OSError as e:
    print("refused", e.errno)
PY
HFS3_OFFLINE=1 HFS3_MOUNTS="$M=moved:models/qwen" LD_PRELOAD=$HFS3_SHIM python3 "$WORK/vf.py" "$M" >"$WORK/out" \
  2>"$WORK/err" || true
grep -qx "refused 5" "$WORK/out" || { cat "$WORK/out" "$WORK/err"; fail "a vfork child's unchecked index served the parent"; }
grep -q "came from http://127.0.0.1:$S3_PORT/models/qwen, but it now resolves to" "$WORK/err" ||
  { cat "$WORK/err"; fail "the parent after a vfork child: the helper's line"; }
[ "$(grep -c "but it now resolves to" "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "after a vfork child: one line"; }
ok "the shim offline, the mount first touched in a vfork child: the parent refuses the index too"
# the helper refuses but cannot write mounts/K/error (a full disk, a read-only cache, or in a shared cache a
# member's own `error` planted in the sticky mount directory, old mtime): its exit status alone says no. Here a
# directory in the way, with an old mtime, stands for the file that cannot be replaced.
K8=$(dirname "$(grep -lx 'moved:models/qwen' "$HFS3_CACHE_DIR"/mounts/*/remote)")
[ -d "$K8" ] || fail "test setup: the cache entry of moved:models/qwen"
rm -f "$K8/error" && mkdir "$K8/error" && touch -d 2000-01-01 "$K8/error"
if HFS3_OFFLINE=1 HFS3_MOUNTS="$M=moved:models/qwen" LD_PRELOAD=$HFS3_SHIM cat "$M/config.json" >"$WORK/out" \
   2>"$WORK/err"; then
  fail "the shim offline served the refused manifest when the helper could not write mounts/K/error"
fi
rmdir "$K8/error"
ok "the shim offline, the helper's refusal with mounts/K/error not writable: refused all the same"
RCLONE_CONFIG_MOVED_ENDPOINT="http://127.0.0.1:$S3_PORT" HFS3_OFFLINE=1 HFS3_MOUNTS="$M=moved:models/qwen" \
  LD_PRELOAD=$HFS3_SHIM cat "$M/config.json" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "shim, endpoint back"; }
cmp -s "$WORK/out" "$m/config.json" || fail "the shim offline, the endpoint pointed back: config.json"
ok "the shim offline, the endpoint pointed back: served as before"
(unset RCLONE_CONFIG_MOVED_TYPE RCLONE_CONFIG_MOVED_ENDPOINT
 HFS3_OFFLINE=1 HFS3_MOUNTS="$M=moved:models/qwen" LD_PRELOAD=$HFS3_SHIM cat "$M/config.json") >"$WORK/out" \
  2>"$WORK/err" || { cat "$WORK/err"; fail "shim offline, the remote not defined here"; }
cmp -s "$WORK/out" "$m/config.json" || fail "the shim offline, the remote not defined here: config.json"
ok "the shim offline, the remote not defined here: what its very spelling cached is served"
RCLONE_CONFIG_MOVED_ENDPOINT=http://127.0.0.1:1 HFS3_RETRIES=0 expect_exit 3 "S3 unreachable, the endpoint changed" \
  "$H" _index moved:models/qwen
one_line "$WORK/err"
grep -q "cached from http://127.0.0.1:$S3_PORT/models/qwen is not used: it now resolves to http://127.0.0.1:1/models/qwen" \
  "$WORK/err" || { cat "$WORK/err"; fail "S3 unreachable: the message names both endpoints"; }
ok "S3 unreachable, endpoint changed: $(cat "$WORK/err")"
if RCLONE_CONFIG_MOVED_ENDPOINT=http://127.0.0.1:1 HFS3_RETRIES=0 HFS3_MANIFEST_TTL=0 HFS3_MOUNTS="$M=moved:models/qwen" \
   LD_PRELOAD=$HFS3_SHIM cat "$M/config.json" >"$WORK/out" 2>"$WORK/err"; then
  cat "$WORK/err"; fail "the shim, S3 unreachable: served the manifest cached from the old endpoint"
fi
grep -q "is not used: it now resolves to http://127.0.0.1:1/models/qwen" "$WORK/err" ||
  { cat "$WORK/err"; fail "the shim, S3 unreachable: the helper's line naming both endpoints"; }
ok "the shim, S3 unreachable, endpoint changed: refused (the second refusal in a row: the failed fetch kept canonical)"
expect_exit 0 "online, the endpoint changed" "$H" _index moved:models/qwen
grep -rqx "http://localhost:$S3_PORT/models/qwen" "$HFS3_CACHE_DIR"/mounts/*/canonical || fail "online: canonical"
HFS3_OFFLINE=1 expect_exit 0 "offline after the new endpoint's manifest" "$H" _index moved:models/qwen
ok "online, endpoint changed: the new endpoint's manifest replaces the old one, and serves offline after"
