#!/usr/bin/env bash
# t_verify.sh - what each kind of `verify` catches, one difference at a time (small objects, real server):
#   an object replaced by other bytes of the same size: plain verify fails on the ETag, naming the file;
#   a manifest whose sha256 is wrong but size and ETag right: plain verify passes (it cannot know), --deep
#   fails naming the file and both sha256s; a manifest without ETags and an object replaced with the same size:
#   plain verify passes, --deep fails; a missing object and a changed link body are named by plain verify.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"
source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"
trap 's3env_stop' EXIT
H=$HFS3_BIN R=s3test:models/v

mkdir -p "$WORK/m/sub"
printf '{"architectures": ["Test"]}\n' >"$WORK/m/config.json"
head -c 200000 /dev/urandom >"$WORK/m/tokenizer.json"
head -c 100000 /dev/urandom >"$WORK/m/sub/weights.bin"
ln -s ../config.json "$WORK/m/sub/link.json"
rclone copy --links "$WORK/m" $R || fail "rclone copy"
$H build $R >/dev/null 2>&1 || fail "build"
$H show --json $R >"$WORK/good.json"
put_manifest() { rclone copyto "$1" $R/.hfs3/manifest.json || fail "upload manifest"; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

expect_exit 0 "verify" $H verify $R
grep -q "^$R: 4 entries checked (sizes and ETags): OK" "$WORK/out" || { cat "$WORK/out"; fail "verify summary"; }
expect_exit 0 "verify --deep" $H verify --deep $R
grep -q "^$R: 4 entries checked (sizes, ETags and sha256): OK" "$WORK/out" || { cat "$WORK/out"; fail "deep summary"; }
ok "verify and verify --deep pass on an unchanged bucket"

# 1. same size, other bytes: the ETag differs
head -c 200000 /dev/urandom >"$WORK/other.json"
rclone copyto "$WORK/other.json" $R/tokenizer.json || fail "replace object"
expect_exit 1 "verify of a replaced object (same size)" $H verify $R
grep -q "^$R: tokenizer.json: key v/tokenizer.json has ETag \"$(md5sum "$WORK/other.json" | cut -d' ' -f1)\", the manifest says \"$(md5sum "$WORK/m/tokenizer.json" | cut -d' ' -f1)\"" "$WORK/err" ||
  { cat "$WORK/err"; fail "no ETag line naming tokenizer.json"; }
[ "$(grep -c . "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "expected exactly one problem"; }
grep -q "FAILED" "$WORK/out" && grep -q "^$R: 1 problem$" "$WORK/out" || { cat "$WORK/out"; fail "verify summary after a change"; }
rclone copyto "$WORK/m/tokenizer.json" $R/tokenizer.json || fail "restore object"
expect_exit 0 "verify after restoring the object" $H verify $R
ok "an object replaced with the same size is caught by its ETag"

# 2. a wrong sha256 with the right size and ETag: only --deep can see it
python3 - "$WORK/good.json" config.json >"$WORK/badsha.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for e in d["entries"]:
    if e["path"] == sys.argv[2]:
        e["sha256"] = e["sha256"][:63] + ("0" if e["sha256"][63] != "0" else "1")
json.dump(d, sys.stdout)
PY
wrong=$(python3 -c 'import json,sys; print([e["sha256"] for e in json.load(open(sys.argv[1]))["entries"] if e["path"] == "config.json"][0])' "$WORK/badsha.json")
put_manifest "$WORK/badsha.json"
expect_exit 0 "plain verify of a manifest with a wrong sha256" $H verify $R
expect_exit 1 "verify --deep of a manifest with a wrong sha256" $H verify --deep $R
grep -q "^$R: config.json: sha256 of key v/config.json is $(sha_of "$WORK/m/config.json"), the manifest says $wrong" "$WORK/err" ||
  { cat "$WORK/err"; fail "no sha256 line naming config.json"; }
[ "$(grep -c . "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "expected exactly one problem"; }
ok "a wrong sha256 (one digit) passes plain verify and fails --deep: $(cat "$WORK/err")"

# 3. no ETags in the manifest, object replaced with the same size: only --deep can see it
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [e.pop("etag", None) for e in d["entries"]]; json.dump(d, sys.stdout)' \
  "$WORK/good.json" >"$WORK/noetag.json"
put_manifest "$WORK/noetag.json"
head -c 100000 /dev/urandom >"$WORK/other.bin"
rclone copyto "$WORK/other.bin" $R/sub/weights.bin || fail "replace object"
expect_exit 0 "plain verify without ETags" $H verify $R
expect_exit 1 "verify --deep without ETags" $H verify --deep $R
grep -q "^$R: sub/weights.bin: sha256 of key v/sub/weights.bin is $(sha_of "$WORK/other.bin"), the manifest says $(sha_of "$WORK/m/sub/weights.bin")" "$WORK/err" ||
  { cat "$WORK/err"; fail "no sha256 line naming sub/weights.bin"; }
ok "without ETags, a same-size replacement is caught by --deep only"

# 4. a missing object, a link whose body changed length, a size change: named by plain verify
put_manifest "$WORK/good.json"
rclone copyto "$WORK/m/sub/weights.bin" $R/sub/weights.bin || fail "restore object"
rclone deletefile $R/config.json || fail "delete object"
printf '../config.json.longer' | rclone rcat $R/sub/link.json.rclonelink || fail "replace link body"
printf 'short' | rclone rcat $R/tokenizer.json || fail "shrink object"
expect_exit 1 "verify with a missing object" $H verify $R
grep -q "^$R: config.json: key v/config.json is missing" "$WORK/err" || { cat "$WORK/err"; fail "missing object not named"; }
grep -q "^$R: sub/link.json: link object v/sub/link.json.rclonelink has 21 bytes, target \"../config.json\" has 14" "$WORK/err" ||
  { cat "$WORK/err"; fail "changed link body not named"; }
grep -q "^$R: tokenizer.json: key v/tokenizer.json has 5 bytes, the manifest says 200000" "$WORK/err" ||
  { cat "$WORK/err"; fail "size change not named"; }
[ "$(grep -c . "$WORK/err")" = 3 ] || { cat "$WORK/err"; fail "expected exactly three problems"; }
ok "missing object, changed link body and size change named by plain verify"
echo "all ok"
