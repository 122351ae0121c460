#!/usr/bin/env bash
# t_hub_names.sh - hub names are sanitised before listing (issue 25 item 8): a hub prefix holds two good
# repositories and, beside them, repositories whose folder names carry a control character (ESC, newline, tab),
# each a complete copy of a good one with its manifest. The shim's listing of the hub shows the good ones and
# nothing else, a path naming a bad one is ENOENT (nothing fetched for it), and neither `status` nor
# `cache du` prints a control character or a bad name afterwards. A list with a bad name in it would break
# the whole hub (the shim refuses a repos file with an invalid line), so the good ones listing is part of it.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
gen() { python3 "$HFS3_ROOT/scripts/gen_model.py" "$@"; }
gen hf-cache "$WORK/src/models--org--a" --shards 0.05 --seed 41
gen hf-cache "$WORK/src/models--org--b" --shards 0.05 --seed 42
for r in models--org--a models--org--b; do rclone copy --links "$WORK/src/$r" "s3test:models/hub/$r"; done
"$HFS3_BIN" build --all s3test:models/hub >"$WORK/b1" 2>&1 || { cat "$WORK/b1"; fail "build --all"; }
grep -q "^s3test:models/hub: 2 repositories: 2 built" "$WORK/b1" || { cat "$WORK/b1"; fail "build --all counts"; }
"$HFS3_BIN" show --json s3test:models/hub/models--org--a >"$WORK/manifest.json"

# the bad names: a whole copy of models--org--a under each, manifest included. ESC cannot be one of them: an
# S3 listing is XML 1.0, which has no way to carry U+001B (the server sends it raw, and every parser, expat
# and rclone's included, refuses the whole listing); newline, tab and DEL are legal XML characters and arrive.
nl=$'models--org--n\nl' tab=$'models--org--t\tab' del=$'models--org--d\x7fel'
for bad in "$nl" "$tab" "$del"; do
  rclone copy --retries 1 --low-level-retries 1 --links "$WORK/src/models--org--a" "s3test:models/hub/$bad"
  rclone copyto --retries 1 --low-level-retries 1 "$WORK/manifest.json" "s3test:models/hub/$bad/.hfs3/manifest.json"
done
# the server's own delimiter listing holds all five (asked through boto3, signed: RGW serves no anonymous listing)
n=$("$HFS3_PY" -c "
import boto3, os
s3 = boto3.client('s3', endpoint_url=os.environ['S3_ENDPOINT'], region_name='us-east-1')
r = s3.list_objects_v2(Bucket='models', Prefix='hub/', Delimiter='/')
print(len(r.get('CommonPrefixes', [])))" 2>"$WORK/listing.err") || { cat "$WORK/listing.err"; fail "listing the hub prefix with boto3"; }
[ "$n" = 5 ] || fail "the server lists $n folders, expected 5"
ok "a hub of 2 repositories and 3 copies under names with a newline, a tab and DEL"

H=$WORK/mnt/hub
export HFS3_MOUNTS="$H=s3test:models/hub" HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN HFS3_PREFETCH=0
P() { LD_PRELOAD=$HFS3_SHIM "$@"; }
P python3 - "$H" >"$WORK/ls.out" 2>"$WORK/ls.err" <<'PY' || { cat "$WORK/ls.err"; fail "listing the hub"; }
import os, sys
print(repr(sorted(os.listdir(sys.argv[1]))))
PY
[ "$(cat "$WORK/ls.out")" = "['models--org--a', 'models--org--b']" ] || { cat "$WORK/ls.out" "$WORK/ls.err"; fail "the hub lists $(cat "$WORK/ls.out")"; }
[ "$(P ls "$H" | tr '\n' ' ')" = "models--org--a models--org--b " ] || fail "ls of the hub"
ok "the hub lists the two good repositories and nothing else"

for bad in "$nl" "$tab" "$del"; do
  set +e; P cat "$H/$bad/refs/main" >/dev/null 2>"$WORK/e"; rc=$?; set -e
  [ "$rc" = 1 ] && grep -q "No such file" "$WORK/e" || { cat "$WORK/e"; fail "a bad name is not ENOENT (exit $rc)"; }
done
rev=$(cat "$WORK/src/models--org--a/refs/main")
P cat "$H/models--org--a/snapshots/$rev/config.json" | cmp - "$WORK/src/models--org--a/snapshots/$rev/config.json" || fail "a good repository reads"
if grep -l -e 'models--org--d' -e 'models--org--n' -e 'models--org--t' "$WORK"/cache/mounts/*/remote 2>/dev/null; then fail "a bad name got a mount in the cache"; fi
ok "paths naming the bad ones are ENOENT; the good ones read; no cache entry for a bad name"

for cmd in "status" "cache du"; do
  # shellcheck disable=SC2086
  "$HFS3_BIN" $cmd >"$WORK/out" 2>&1 || { cat "$WORK/out"; fail "$cmd"; }
  grep -q 'models--org--a' "$WORK/out" || { cat "$WORK/out"; fail "$cmd does not show the good repository"; }
  if LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n' <"$WORK/out"); then od -c "$WORK/out" | head -20; fail "$cmd printed a control character"; fi
  if grep -q -e 'models--org--d' -e 'models--org--n' -e 'models--org--t' "$WORK/out"; then cat "$WORK/out"; fail "$cmd shows a bad name"; fi
done
ok "status and cache du: the good repository, no bad name, no control character"
