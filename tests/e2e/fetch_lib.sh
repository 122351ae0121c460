# fetch_lib.sh - shared setup of the t_fetch_* tests: source after s3env.sh and lib.sh.
#   fetch_model DIR          writes a small model (config.json, tokenizer.json, a 40 MiB model.safetensors,
#                            sub/empty.txt) into DIR
#   fetch_publish DIR REMOTE uploads it with rclone and writes its manifest (hfs3-manifest build)
#   start_proxy NAME [RATE [FLAGS]]  starts tests/e2e/s3proxy.py in front of the server; exports an rclone remote
#                            NAME: through it; the log is $WORK/NAME.log; PROXY_PIDS collects the pids
#   blob_of FILE             the sha256 of a local file
#   got_bytes LOG KEYPART    body bytes of GETs whose path contains KEYPART, from a proxy log
#   shared_setup             (root) starts the server, makes $WORK readable by other users, publishes the
#                            fetch_model model as s3test:models/m1, and creates $HFS3_CACHE_DIR (default
#                            $WORK/shared) as a cache shared with group 100 (setgid, sticky, g+rwx: 3770), as an init
#                            container would
PROXY_PIDS=""

shared_setup() {
  s3env_start "$WORK"
  trap 's3env_stop' EXIT
  chmod 0755 "$WORK" "$WORK/home"
  [ -z "${RCLONE_CONFIG:-}" ] || chmod 0644 "$RCLONE_CONFIG"
  fetch_model "$WORK/m"
  fetch_publish "$WORK/m" s3test:models/m1
  export HFS3_CACHE_DIR=${HFS3_CACHE_DIR:-$WORK/shared}
  mkdir "$HFS3_CACHE_DIR"
  chgrp 100 "$HFS3_CACHE_DIR"
  chmod 03770 "$HFS3_CACHE_DIR"
}

fetch_model() {
  local d=$1
  mkdir -p "$d/sub"
  printf '{"architectures": ["Test"], "hidden_size": 64}\n' >"$d/config.json"
  head -c 150000 /dev/urandom >"$d/tokenizer.json"
  head -c $((40 << 20)) /dev/urandom >"$d/model.safetensors"
  : >"$d/sub/empty.txt"
}

# human_bytes N: N bytes as fetch's summary writes them (lib/progress.c: "0 B", "146.5 KiB", "40.2 MiB")
human_bytes() {
  python3 -c 'import sys
n = float(sys.argv[1]); u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]; i = 0
while n >= 1024 and i < 5: n /= 1024; i += 1
print(("%.1f %s" if i else "%.0f %s") % (n, u[i]))' "$1"
}

fetch_publish() {
  rclone copy "$1" "$2" || fail "rclone copy"
  "${HFS3_BUILD_BIN:-$HFS3_BIN}" build "$2" >"$WORK/build.out" 2>&1 || { cat "$WORK/build.out" >&2; fail "build $2"; }
}

start_proxy() {
  local name=$1 rate=${2:-0} flags=${3:-} up=${S3_ENDPOINT#http://}
  local out=$WORK/$name.port
  python3 "$HFS3_ROOT/tests/e2e/s3proxy.py" --target "$up" --log "$WORK/$name.log" --rate "$rate" $flags >"$out" &
  PROXY_PIDS="$PROXY_PIDS $!"
  local i
  for i in $(seq 1 100); do grep -q '^port ' "$out" 2>/dev/null && break; sleep 0.1; done
  local port
  port=$(sed -n 's/^port //p' "$out")
  [ -n "$port" ] || fail "proxy $name did not start"
  local up_name
  up_name=$(echo "$name" | tr '[:lower:]' '[:upper:]')
  export "RCLONE_CONFIG_${up_name}_TYPE=s3" "RCLONE_CONFIG_${up_name}_PROVIDER=Other" \
         "RCLONE_CONFIG_${up_name}_ACCESS_KEY_ID=S3RVER" "RCLONE_CONFIG_${up_name}_SECRET_ACCESS_KEY=S3RVER" \
         "RCLONE_CONFIG_${up_name}_ENDPOINT=http://127.0.0.1:$port" "RCLONE_CONFIG_${up_name}_REGION=us-east-1" \
         "RCLONE_CONFIG_${up_name}_FORCE_PATH_STYLE=true"
  : >>"$WORK/$name.log"
}

stop_proxies() {
  local p
  for p in $PROXY_PIDS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PROXY_PIDS=""
}

blob_of() { sha256sum "$1" | cut -d' ' -f1; }

got_bytes() {
  awk -v k="$2" '$2 == "GET" && index($3, k) { for (i = 4; i <= NF; i++) if ($i ~ /^bytes=/) n += substr($i, 7) }
                END { print n + 0 }' "$1"
}
