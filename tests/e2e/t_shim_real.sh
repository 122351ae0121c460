#!/usr/bin/env bash
# The whole product against the real S3 server: rclone uploads a flat model and an HF cache repo, build writes
# their manifests, then real programs (python3, coreutils) read the mounts under LD_PRELOAD with the real helper.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
s3env_start "$WORK"; trap s3env_stop EXIT
python3 "$HFS3_ROOT/scripts/gen_model.py" flat "$WORK/flat" --shards 6,3 --seed 21
python3 "$HFS3_ROOT/scripts/gen_model.py" hf-cache "$WORK/hub/models--org--tiny" --shards 2,1 --seed 22
rclone copy "$WORK/flat" s3test:models/flat
rclone copy --links "$WORK/hub/models--org--tiny" s3test:models/hub/models--org--tiny
"$HFS3_BIN" build s3test:models/flat >/dev/null
"$HFS3_BIN" build s3test:models/hub/models--org--tiny >/dev/null

FLAT=/models/flat HUB=/models/hub/models--org--tiny
export HFS3_MOUNTS="$FLAT=s3test:models/flat;$HUB=s3test:models/hub/models--org--tiny"
export HFS3_CACHE_DIR=$WORK/cache HFS3_HELPER=$HFS3_BIN
P() { LD_PRELOAD=$HFS3_SHIM "$@"; }

P python3 "$HFS3_ROOT/tests/e2e/shim_real_checks.py" $FLAT "$WORK/flat" $HUB "$WORK/hub/models--org--tiny"

# coreutils
P ls -l $FLAT >"$WORK/ls"; grep -q "model-00001-of-00002.safetensors" "$WORK/ls" && grep -q "^-r--r--r--" "$WORK/ls" || { cat "$WORK/ls"; fail "ls -l"; }
P cat $FLAT/config.json | cmp - "$WORK/flat/config.json" || fail "cat"
P cp -r $FLAT "$WORK/copy" || fail "cp -r"
diff -r -x .cache "$WORK/flat" "$WORK/copy" || fail "diff -r after cp -r"
[ "$(P du -sb $FLAT | cut -f1)" -gt 9000000 ] || fail "du -b"
P find $HUB -type l | sort >"$WORK/find.l"; (cd "$WORK/hub/models--org--tiny" && find . -type l | sed "s|^\.|$HUB|" | sort) | cmp - "$WORK/find.l" || fail "find -type l"
(cd "$WORK/flat" && sha256sum *.safetensors) >"$WORK/want.sum"; (P bash -c "sha256sum $FLAT/*.safetensors" | sed "s|$FLAT/||") | cmp - "$WORK/want.sum" || fail "sha256sum"
[ "$(P stat -c '%s %F' $FLAT/config.json)" = "$(stat -c %s "$WORK/flat/config.json") regular file" ] || fail "stat"
rev=$(cat "$WORK/hub/models--org--tiny/refs/main")
[ "$(P readlink $HUB/snapshots/$rev/config.json)" = "$(readlink "$WORK/hub/models--org--tiny/snapshots/$rev/config.json")" ] || fail "readlink"
[ "$(P realpath $HUB/snapshots/$rev/config.json)" = "$HUB/blobs/$(basename "$(readlink "$WORK/hub/models--org--tiny/snapshots/$rev/config.json")")" ] || fail "realpath"
[ "$(P bash -c "cd $HUB/snapshots && pwd -P && cd $rev && /bin/pwd")" = "$(printf '%s\n%s' "$HUB/snapshots" "$HUB/snapshots/$rev")" ] || fail "cd + pwd"
ok "coreutils: ls -l, cat, cp -r + diff -r, du -b, find, sha256sum, stat, readlink, realpath, cd + pwd"

# outside the mounts nothing changes
(cd "$WORK/flat" && ls -l && sha256sum * && stat -c '%s %i' config.json) >"$WORK/plain" 2>&1
(cd "$WORK/flat" && P ls -l && P sha256sum * && P stat -c '%s %i' config.json) >"$WORK/shimmed" 2>&1
cmp "$WORK/plain" "$WORK/shimmed" || fail "non-mount workload differs under the shim"
ok "a workload on non-mount paths is unchanged"

# the cache holds only verified blobs (the shim's loads are chunk-checked, in the mounts' cblobs/ until the
# detached flush has hashed each whole and moved it into blobs/)
wait_flushed "$WORK/cache"
for b in "$WORK/cache"/blobs/*; do [ "$(sha256sum <"$b" | cut -d' ' -f1)" = "$(basename "$b")" ] || fail "blob $b"; done
ok "every cached blob's content matches its name"

# an index damaged on disk: refused (EIO, no crash), and the next revalidation (a 304) rebuilds it
idx=$(ls "$WORK"/cache/mounts/*/index | head -1)
chmod u+w "$idx"; python3 -c 'import sys; p=sys.argv[1]; d=bytearray(open(p,"rb").read()); d[80:100]=b"\xff"*20; open(p,"wb").write(d)' "$idx"
! HFS3_OFFLINE=1 P ls $FLAT $HUB >/dev/null 2>"$WORK/dmg.err" || fail "a damaged index was used"
grep -q "not a valid index" "$WORK/dmg.err" || { cat "$WORK/dmg.err"; fail "damaged index not named"; }
HFS3_MANIFEST_TTL=0 P ls $FLAT $HUB >/dev/null || fail "the 304 revalidation did not heal the index"
ok "a damaged index is refused and the next revalidation rebuilds it"

# HFS3_MOUNTS mistakes: an overlapping mount and a malformed entry are ignored with one log line each time the
# shim is first used; the good mount still works
HFS3_MOUNTS="$FLAT=s3test:models/flat;$FLAT/sub=s3test:models/other;nonsense" P ls $FLAT >"$WORK/ov.out" 2>"$WORK/ov.err" || fail "good mount beside bad ones"
grep -q "config.json" "$WORK/ov.out" || fail "listing with bad entries"
grep -q "HFS3_MOUNTS:" "$WORK/ov.err" || { cat "$WORK/ov.err"; fail "bad HFS3_MOUNTS entries not reported"; }
ok "HFS3_MOUNTS mistakes are reported and ignored: $(head -1 "$WORK/ov.err")"
