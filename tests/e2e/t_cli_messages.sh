#!/usr/bin/env bash
# t_cli_messages.sh - messages that say what to do: a bucket that does not exist, a prefix without a manifest
# (one line, the remote once), refused keys (which variable, profile or rclone remote; never the key), boolean
# settings in the usual spellings (one warning for anything else), a cache that cannot be created, a remote of
# another type than s3 (what works, and the way across), and fetch's
# summary counting failed files (exit 1). Then the words of the counts (issue 46): with one file, one repository
# and one unreferenced blob, every count agrees with its number (1 file, 1 repository, ...), and status says what
# the cached files that no manifest names are.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
source "$HFS3_ROOT/tests/e2e/fetch_lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
H=$HFS3_BIN
export HFS3_CACHE_DIR=$WORK/cache
fetch_model "$WORK/m"
fetch_publish "$WORK/m" s3test:models/m1
rclone copy "$WORK/m" s3test:models/nomanifest

# a bucket that does not exist
for cmd in show build verify fetch; do
  expect_exit 1 "$cmd in a missing bucket" "$H" "$cmd" s3test:nosuchbucket/x
  grep -q "^hfs3-manifest $cmd: s3test:nosuchbucket/x: bucket nosuchbucket does not exist at $S3_ENDPOINT: check the bucket name in s3test:nosuchbucket/x, or create the bucket$" "$WORK/err" ||
    { cat "$WORK/err"; fail "$cmd: missing bucket message"; }
  one_line "$WORK/err"
done
ok "a missing bucket: 'bucket B does not exist at ENDPOINT' from show, build, verify and fetch"

# a prefix without a manifest: one clean line, the remote once
for cmd in show verify fetch; do
  expect_exit 1 "$cmd without a manifest" "$H" "$cmd" s3test:models/nomanifest
  grep -qx "hfs3-manifest $cmd: no manifest at s3://models/nomanifest/.hfs3/manifest.json: run hfs3-manifest build s3test:models/nomanifest" "$WORK/err" ||
    { cat "$WORK/err"; fail "$cmd: no manifest message"; }
  one_line "$WORK/err"
done
"$H" _index s3test:models/nomanifest 2>/dev/null && fail "_index without a manifest"
grep -qxF "no manifest at s3://models/nomanifest/.hfs3/manifest.json: run hfs3-manifest build s3test:models/nomanifest" \
  "$HFS3_CACHE_DIR"/mounts/*/error || { cat "$HFS3_CACHE_DIR"/mounts/*/error; fail "mounts/K/error"; }
ok "no manifest: one line naming the object and the command to run, the remote once (also in mounts/K/error)"

# refused keys: where they came from, never the key
if [ "$S3_VERIFIES_SIGNATURES" = 1 ]; then
  SECRET=wrong-secret-XYZZY
  RCLONE_CONFIG_S3TEST_SECRET_ACCESS_KEY=$SECRET expect_exit 1 "wrong secret (rclone variable)" "$H" show s3test:models/m1
  grep -q "^hfs3-manifest show: s3test:models/m1: s3: GET models/m1/.hfs3/manifest.json: 403 SignatureDoesNotMatch: the server refused the credentials from RCLONE_CONFIG_S3TEST_SECRET_ACCESS_KEY in the environment (rclone remote 's3test'): check the secret key" "$WORK/err" ||
    { cat "$WORK/err"; fail "rclone variable: message"; }
  printf '[conf]\ntype = s3\nprovider = Other\naccess_key_id = S3RVER\nsecret_access_key = %s\nendpoint = %s\nregion = us-east-1\n' "$SECRET" "$S3_ENDPOINT" >"$RCLONE_CONFIG"
  expect_exit 1 "wrong secret (rclone.conf)" "$H" fetch conf:models/m1
  grep -q "^hfs3-manifest fetch: conf:models/m1: s3: GET .*403 SignatureDoesNotMatch: the server refused the credentials from rclone remote 'conf' in $RCLONE_CONFIG: check" "$WORK/err" ||
    { cat "$WORK/err"; fail "rclone.conf: message"; }
  : >"$RCLONE_CONFIG"
  AWS_SECRET_ACCESS_KEY=$SECRET expect_exit 1 "wrong secret (AWS variables)" "$H" verify s3://models/m1
  grep -q "^hfs3-manifest verify: s3://models/m1: .*403 SignatureDoesNotMatch: the server refused the credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment" "$WORK/err" ||
    { cat "$WORK/err"; fail "AWS variables: message"; }
  mkdir -p "$HOME/.aws"; printf '[p1]\naws_access_key_id = S3RVER\naws_secret_access_key = %s\n' "$SECRET" >"$HOME/.aws/credentials"
  env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_PROFILE=p1 "$H" show s3://models/m1 >"$WORK/out" 2>"$WORK/err" && fail "profile with a wrong secret"
  grep -q "the server refused the credentials from AWS profile 'p1' in $HOME/.aws/credentials: check" "$WORK/err" || { cat "$WORK/err"; fail "AWS profile: message"; }
  grep -rq "$SECRET" "$WORK/err" "$WORK/out" && fail "the secret appears in the output"
  ok "refused keys: the message names the variable, the rclone remote (and file) or the AWS profile, never the key"
else
  echo "skip: the S3 server does not verify signatures"
fi

# boolean settings
"$H" fetch s3test:models/m1 >/dev/null 2>&1 || fail "warm fetch"
for v in 1 true TRUE yes on; do
  HFS3_OFFLINE=$v expect_exit 1 "HFS3_OFFLINE=$v with nothing cached" "$H" fetch s3test:models/nomanifest
  grep -q "HFS3_OFFLINE=1 and no cached manifest" "$WORK/err" || { cat "$WORK/err"; fail "HFS3_OFFLINE=$v not taken as true"; }
done
for v in 0 false no off; do
  HFS3_OFFLINE=$v expect_exit 0 "HFS3_OFFLINE=$v" "$H" fetch s3test:models/m1
  [ ! -s "$WORK/err" ] || { cat "$WORK/err"; fail "HFS3_OFFLINE=$v warned"; }
done
HFS3_OFFLINE=maybe expect_exit 0 "HFS3_OFFLINE=maybe" "$H" fetch s3test:models/m1
grep -qx "hfs3: warning: HFS3_OFFLINE='maybe' is not a boolean (1/0, true/false, yes/no, on/off); ignored, using 0" "$WORK/err" || { cat "$WORK/err"; fail "HFS3_OFFLINE=maybe"; }
one_line "$WORK/err"
HFS3_VERIFY_FOREIGN=perhaps expect_exit 0 "HFS3_VERIFY_FOREIGN=perhaps" "$H" fetch s3test:models/m1
grep -q "HFS3_VERIFY_FOREIGN='perhaps' is not a boolean" "$WORK/err" || { cat "$WORK/err"; fail "HFS3_VERIFY_FOREIGN=perhaps"; }
ok "HFS3_OFFLINE and HFS3_VERIFY_FOREIGN: 1/0, true/false, yes/no, on/off; anything else one warning"

# a cache that cannot be created: the cause, and what to do
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  chmod 0755 "$WORK" "$WORK/home"; chmod 0644 "$RCLONE_CONFIG"
  # an explicit HFS3_CACHE_DIR that cannot be created: an error (the user asked for that one)
  setpriv --reuid=65534 --regid=65534 --clear-groups env HFS3_CACHE_DIR=/proc/hfs3-none/cache \
    "$H" fetch s3test:models/m1 >"$WORK/out" 2>"$WORK/err" && fail "an HFS3_CACHE_DIR that cannot be created"
  grep -q "^hfs3-manifest fetch: cache directory /proc/hfs3-none/cache cannot be created (set HFS3_CACHE_DIR to a directory you can create.*mkdir /proc/hfs3-none: " "$WORK/err" ||
    { cat "$WORK/err"; fail "HFS3_CACHE_DIR message"; }
  one_line "$WORK/err"
  ok "a cache that cannot be created: the mkdir and its cause, and what to set"
  # issue 24 §3.7: the default cache of uid 65534 with HOME=/ (as in a container): fetch falls back to
  # $TMPDIR/hfs3-<uid> with one warning, as the shim does, so a server through the shim reads what fetch cached
  mkdir -m 1777 "$WORK/tmpfb"
  nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups env -u HFS3_CACHE_DIR -u XDG_CACHE_HOME HOME=/ TMPDIR="$WORK/tmpfb")
  "${nobody[@]}" "$H" fetch s3test:models/m1 >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "fetch as nobody with HOME=/"; }
  grep -qxF "hfs3: warning: cache directory //.cache/hfs3 cannot be created (set HFS3_CACHE_DIR to a directory you can create, or create it: install -d -m 700 DIR): mkdir //.cache: Permission denied; using $WORK/tmpfb/hfs3-65534 (set HFS3_CACHE_DIR to choose)" "$WORK/err" ||
    { cat "$WORK/err"; fail "HOME=/: the fallback's warning"; }
  one_line "$WORK/err"
  [ "$(stat -c '%u %a' "$WORK/tmpfb/hfs3-65534")" = "65534 700" ] || fail "the fallback is not a private directory"
  if [ -n "${HFS3_SHIM:-}" ] && [ -f "$HFS3_SHIM" ]; then
    "${nobody[@]}" HFS3_OFFLINE=1 HFS3_LOG=error HFS3_HELPER="$H" HFS3_MOUNTS="$WORK/mnt/fb=s3test:models/m1" \
      LD_PRELOAD="$HFS3_SHIM" cat "$WORK/mnt/fb/config.json" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err"; fail "the shim in the same fallback"; }
    cmp -s "$WORK/out" "$WORK/m/config.json" || fail "the shim read other bytes from the fallback"
  fi
  ok "the default cache with HOME=/: fetch and the shim use the same \$TMPDIR/hfs3-<uid>, one warning"
fi

# issue 24 §3.8: the next step for a server that is down, a misspelt s3://, a missing RCLONE_CONFIG file
RCLONE_CONFIG_DOWN_TYPE=s3 RCLONE_CONFIG_DOWN_ENDPOINT=http://127.0.0.1:1 expect_exit 1 "a server that is down" "$H" show down:b/p
grep -q "^hfs3-manifest show: down:b/p: s3: GET b/p/.hfs3/manifest.json: .*: is the server at http://127.0.0.1:1 up and reachable from here? if so, check the endpoint of down:b/p$" "$WORK/err" ||
  { cat "$WORK/err"; fail "server down: no next step"; }
one_line "$WORK/err"
expect_exit 2 "s3:/ for s3://" "$H" show s3:/models/m1
grep -qxF "hfs3-manifest show: s3:/models/m1: remote s3: not found in rclone config $RCLONE_CONFIG (nor RCLONE_CONFIG_S3_TYPE); did you mean s3://models/m1?" "$WORK/err" ||
  { cat "$WORK/err"; fail "s3:/: no hint"; }
RCLONE_CONFIG=$WORK/no-such.conf expect_exit 2 "a missing RCLONE_CONFIG" "$H" show conf:models/m1
grep -qxF "hfs3-manifest show: conf:models/m1: remote conf: the rclone config file $WORK/no-such.conf (RCLONE_CONFIG) does not exist, and RCLONE_CONFIG_CONF_TYPE is not set: fix RCLONE_CONFIG or define the remote with RCLONE_CONFIG_CONF_* variables" "$WORK/err" ||
  { cat "$WORK/err"; fail "missing RCLONE_CONFIG: not said"; }
# issue 31: an rclone remote of another type (the README: S3 remotes only) says what works and the way across
RCLONE_CONFIG_AZB_TYPE=azureblob expect_exit 2 "a remote of type azureblob" "$H" show azb:models/m1
grep -qxF "hfs3-manifest show: azb:models/m1: remote azb: type azureblob is not s3: hfs3 reads S3 and S3-compatible stores only (an rclone remote of type s3, any provider, or s3://); use the store's S3 endpoint if it has one, or copy the model into an S3 bucket (rclone copy azb:PATH S3REMOTE:PATH)" "$WORK/err" ||
  { cat "$WORK/err"; fail "a remote that is not s3: no next step"; }
ok "a server that is down, s3:/ for s3://, a missing RCLONE_CONFIG file, a remote that is not s3: each says what to do"

# issue 24 §3.1: run --mount with a remote this process cannot resolve (a server without the remote's
# variables, fed by an init container) runs from the cache as the shim alone does; nothing cached: one line
if [ -n "${HFS3_SHIM:-}" ] && [ -f "$HFS3_SHIM" ]; then
  noremote=(env -u RCLONE_CONFIG_S3TEST_TYPE -u RCLONE_CONFIG_S3TEST_ENDPOINT -u RCLONE_CONFIG_S3TEST_ACCESS_KEY_ID
    -u RCLONE_CONFIG_S3TEST_SECRET_ACCESS_KEY HFS3_OFFLINE=1)
  expect_exit 0 "run offline without the remote's variables" "${noremote[@]}" "$H" run --mount "$WORK/mnt/m1=s3test:models/m1" -- \
    cat "$WORK/mnt/m1/config.json"
  cmp -s "$WORK/out" "$WORK/m/config.json" || { cat "$WORK/out" "$WORK/err"; fail "run offline: wrong content"; }
  expect_exit 2 "run offline, nothing cached" "${noremote[@]}" "$H" run --mount "$WORK/mnt/x=s3test:models/nomanifest" -- true
  grep -qxF "hfs3-manifest run: --mount '$WORK/mnt/x=s3test:models/nomanifest': remote s3test: not found in rclone config $RCLONE_CONFIG (nor RCLONE_CONFIG_S3TEST_TYPE) (and no manifest of it is cached here)" "$WORK/err" ||
    { cat "$WORK/err"; fail "run, nothing cached: message"; }
  ok "run --mount offline without the remote's variables: served from the cache; nothing cached: one line"
fi

# fetch counts failed files and exits 1
rm -rf "$HFS3_CACHE_DIR"
"$HFS3_ROOT/$BUILD/tools/s3cli" rm models/m1/tokenizer.json >/dev/null 2>&1 || rclone deletefile s3test:models/m1/tokenizer.json
expect_exit 1 "fetch with a missing object" "$H" fetch s3test:models/m1
grep -q "^s3test:models/m1: 4 files, .* 1 failed$" "$WORK/out" || { cat "$WORK/out"; fail "summary does not count the failure"; }
grep -q "^hfs3-manifest fetch: s3test:models/m1: s3://models/m1/tokenizer.json is gone (404 NoSuchKey): the prefix changed since the manifest was built; run hfs3-manifest build s3test:models/m1" "$WORK/err" ||
  { cat "$WORK/err"; fail "the failed file is not named with what to do"; }
grep -qxF "hfs3-manifest fetch: s3test:models/m1: 1 of 4 files failed (each named above): the prefix changed since the manifest was built; run hfs3-manifest build s3test:models/m1, then fetch again" "$WORK/err" ||
  { cat "$WORK/err"; fail "failure line: the next step is build"; }
ok "fetch: the summary counts failed files, exit 1"
echo "all ok"

# counts in words: a model of one 1-byte file, a hub of one repository, one cached file no manifest names
counts_bad() {  # "1 files" and the like, in any line of the files named
  grep -E '(^|[^0-9.,/])1 (files|repositories|directories|symlinks|bytes|entries|problems|streams|names|links|attempts|connections|ranges|chunks)([^a-z]|$)' "$@"
}
mkdir -p "$WORK/one"; printf 'x' >"$WORK/one/only.txt"
rclone copy "$WORK/one" s3test:models/one
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/hub/models--org--a" --shards 0.1 --seed 46 >/dev/null
rclone copy --links "$WORK/hub/models--org--a" s3test:models/hub1/models--org--a
export HFS3_CACHE_DIR=$WORK/cache-words
: >"$WORK/words"
words() { local name=$1; shift; "$H" "$@" >"$WORK/w.out" 2>&1 || { cat "$WORK/w.out"; fail "$name"; }
          sed "s|^|$name: |" "$WORK/w.out" >>"$WORK/words"; }
words build build s3test:models/one
words show show s3test:models/one
words verify verify s3test:models/one
words fetch fetch s3test:models/one
words cache-verify cache verify
words build-all build --all s3test:models/hub1
words fetch-hub fetch s3test:models/hub1
words du cache du
words status status
grep -q "^build: s3test:models/one (flat): 1 file, 0 directories, 0 symlinks, 1 byte; sha256 from 0 local files, 0 LFS names, 0 metadata, 1 S3 stream" "$WORK/words" &&
  grep -q "^show: s3test:models/one (flat): 1 file, 0 directories, 0 symlinks" "$WORK/words" &&
  grep -q "^verify: s3test:models/one: 1 entry checked" "$WORK/words" &&
  grep -q "^fetch: s3test:models/one: 1 file, " "$WORK/words" &&
  grep -q "^cache-verify: cache verify: 1 file checked (1 B): 1 good" "$WORK/words" &&
  grep -q "^build-all: s3test:models/hub1: 1 repository: 1 built, 0 unchanged, 0 failed$" "$WORK/words" &&
  grep -q "^fetch-hub: s3test:models/hub1: a hub: 1 repository fetched, 0 failed$" "$WORK/words" &&
  grep -q "^du: .*a hub of 1 repository, 1 fetched" "$WORK/words" &&
  grep -q "^status: $HFS3_CACHE_DIR: .*; every cached file belongs to a cached manifest$" "$WORK/words" ||
  { cat "$WORK/words"; fail "the counts' words"; }
# a cached file that no manifest names: status says what it is and what removes it; gc and cache verify count one
printf 'orphan' >"$WORK/orphan"; orphan=$(sha256sum "$WORK/orphan" | cut -c1-64)
cp "$WORK/orphan" "$HFS3_CACHE_DIR/blobs/$orphan"; touch -d '2001-01-01' "$HFS3_CACHE_DIR/blobs/$orphan"
words status2 status
words gc cache gc --unreferenced --dry-run
grep -q "^status2: $HFS3_CACHE_DIR: .*; 1 cached file (6 B) that no cached manifest names: \`cache gc --unreferenced\` removes it$" "$WORK/words" &&
  grep -q "^gc: cache gc: would remove 1 file (6 B)" "$WORK/words" || { cat "$WORK/words"; fail "an unreferenced file in words"; }
rm -f "$HFS3_CACHE_DIR/blobs/$orphan"
if counts_bad "$WORK/words"; then fail "a count that disagrees with its number (above)"; fi
ok "counts in words: 1 file, 1 byte, 1 entry, 1 S3 stream, 1 repository, 1 cached file that no cached manifest names"
