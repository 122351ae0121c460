# shim_common.sh - sourced by the t_shim_*.sh tests: builds the fixture models (shim_fixture.py), installs
# their indexes and blobs into a cache with the mkindex test tool, and points the shim at them.
#   shim_setup          -> REV, MK, M (mount base, not existing on disk), HFS3_CACHE_DIR, HFS3_MOUNTS, HFS3_OFFLINE=1
#   shim_s3             -> the S3 server (scripts/s3env.sh: clean environment, HOME=$WORK/home), stopped on exit
#   shim_start          -> shim_s3, then shim_setup: how a test of the fixture mounts starts
#   shim_check NAME CMD  runs CMD, prints ok/not ok, counts failures in SHIM_FAILS
# The kernel's oracle (t_shim_kernel.sh, t_shim_kfuzz.sh, t_shim_kanswers.sh): a tree of the test's own, served
# through the shim as a mount and read by the kernel from a read-only mount of the same tree:
#   shim_links_tree DIR          -> the links tree (lnk -> a/b, deep -> a/b/../c; a/b/f.txt, a/c/x.txt) in DIR
#   shim_tree_mount SRC NAME GEN -> SRC's manifest (generator GEN) installed into the cache as s3test:models/NAME
#   shim_oracle_ok               -> 0 when the oracle can be made here: root, and mounts allowed (unshare -m)
#   shim_ro_bind SRC DST         -> DST a read-only bind mount of SRC (the caller unmounts it); 1 when not allowed
SHIM_FAILS=0

shim_setup() {
  python3 "$HFS3_ROOT/tests/e2e/shim_fixture.py" "$WORK/fx" >"$WORK/rev" || return 1
  REV=$(cat "$WORK/rev")
  MK="$HFS3_ROOT/$BUILD/tools/mkindex"
  export HFS3_CACHE_DIR="$WORK/cache"
  "$MK" "$WORK/fx/hf.json" "$HFS3_CACHE_DIR" s3test:models/hf "$WORK/fx/src/hf" || return 1
  "$MK" "$WORK/fx/flat.json" "$HFS3_CACHE_DIR" s3test:models/flat "$WORK/fx/src/flat" || return 1
  M="$WORK/mnt/models"
  export HFS3_MOUNTS="$M/hf=s3test:models/hf;$M/flat=s3test:models/flat"
  export HFS3_OFFLINE=1 HFS3_LOG=warn
}

shim_s3() {
  source "$HFS3_ROOT/scripts/s3env.sh"
  s3env_start "$WORK" || exit 1
  trap s3env_stop EXIT
}

shim_start() {
  shim_s3
  shim_setup || exit 1
}

shim_links_tree() {
  mkdir -p "$1/a/b" "$1/a/c" && printf 'f\n' >"$1/a/b/f.txt" && printf 'x\n' >"$1/a/c/x.txt" &&
    ln -s a/b "$1/lnk" && ln -s a/b/../c "$1/deep"
}

shim_tree_mount() {
  python3 - "$1" "$3" >"$WORK/fx/$2.json" <<'PY' || return 1
import hashlib, json, os, sys
root, ents = sys.argv[1], []
for dp, dns, fns in os.walk(root):
    for n in dns + fns:
        fp = os.path.join(dp, n)
        p = os.path.relpath(fp, root)
        if os.path.islink(fp):
            ents.append({"path": p, "type": "symlink", "target": os.readlink(fp)})
        elif os.path.isdir(fp):
            ents.append({"path": p, "type": "dir"})
        else:
            b = open(fp, "rb").read()
            ents.append({"path": p, "type": "file", "size": len(b), "sha256": hashlib.sha256(b).hexdigest(),
                         "etag": '"%s"' % hashlib.md5(b).hexdigest(), "mtime": 1764496800})
ents.sort(key=lambda e: e["path"].encode())
print(json.dumps({"hfs3_manifest": 1, "layout": "flat", "generator": sys.argv[2], "entries": ents}))
PY
  "$MK" "$WORK/fx/$2.json" "$HFS3_CACHE_DIR" "s3test:models/$2" "$1"
}

shim_oracle_ok() { [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; }

shim_ro_bind() {
  shim_oracle_ok && mount --bind "$1" "$2" 2>/dev/null || return 1
  mount -o remount,bind,ro "$2" || { umount "$2"; return 1; }
}

shim_check() {
  local name=$1; shift
  if "$@"; then echo "ok $name"; else echo "not ok $name"; SHIM_FAILS=$((SHIM_FAILS + 1)); fi
}

# runs a command with the shim preloaded
shim() { LD_PRELOAD="$HFS3_SHIM" "$@"; }
