# nginx.sh - source me: the reference server of the benchmark. Debian's nginx serving WORKDIR/www as static
# files on a free loopback port, path-style like S3 (http://127.0.0.1:PORT/BUCKET/KEY); no root config, no
# daemon. A GET is all `hfs3-manifest fetch` needs; nginx ignores the signature headers.
#   nginx_start WORKDIR   exports NGINX_ENDPOINT, NGINX_PID, remote "ngx:" (rclone variables, path style) and
#                         NGINX_ACCESS_LOG (one line per request: the body bytes it sent; the eight-rank table
#                         counts what the server sent from it)
#   nginx_stop
nginx_start() {
  local w=$1/nginx port
  mkdir -p "$w/logs" "$w/tmp" "$1/www"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # as root the workers would run as nobody, who cannot read a private work dir
  local user=; [ "$(id -u)" = 0 ] && user="user root;"
  cat >"$w/nginx.conf" <<CONF
$user
worker_processes 1;
error_log $w/logs/error.log warn;
pid $w/nginx.pid;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }   # Run:ai at concurrency 16 opens more than 256 (nginx then drops keep-alive connections under it)
http {
  log_format bytes '\$body_bytes_sent';
  access_log $w/logs/access.log bytes;
  sendfile on; tcp_nopush on;
  client_body_temp_path $w/tmp; proxy_temp_path $w/tmp; fastcgi_temp_path $w/tmp;
  uwsgi_temp_path $w/tmp; scgi_temp_path $w/tmp;
  types { application/json json; }
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$port;
    root $1/www;
    autoindex on;
  }
}
CONF
  nginx -p "$w" -c "$w/nginx.conf" -g 'daemon off;' 2>"$w/logs/stderr" &
  NGINX_PID=$!
  local i
  for i in $(seq 1 50); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/" && break
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$w/logs/stderr" >&2; return 1; }
    sleep 0.1
  done
  export NGINX_PID NGINX_ENDPOINT="http://127.0.0.1:$port" NGINX_ACCESS_LOG=$w/logs/access.log
  export RCLONE_CONFIG_NGX_TYPE=s3 RCLONE_CONFIG_NGX_PROVIDER=Other RCLONE_CONFIG_NGX_ACCESS_KEY_ID=S3RVER \
         RCLONE_CONFIG_NGX_SECRET_ACCESS_KEY=S3RVER RCLONE_CONFIG_NGX_ENDPOINT="$NGINX_ENDPOINT" \
         RCLONE_CONFIG_NGX_REGION=us-east-1 RCLONE_CONFIG_NGX_FORCE_PATH_STYLE=true
}

# nginx_publish MODEL_DIR MANIFEST BUCKET/PREFIX WORKDIR: the model's files (hard links) and a copy of its
# manifest without ETags (nginx's are not S3's, and If-Match would refuse them) under www/BUCKET/PREFIX.
nginx_publish() {
  local dst=$4/www/$3
  mkdir -p "$dst/.hfs3"
  cp -al "$1/." "$dst/" 2>/dev/null || cp -a "$1/." "$dst/"
  python3 - "$2" "$dst/.hfs3/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for e in m.get("entries", m.get("files", [])):
    e.pop("etag", None)
json.dump(m, open(sys.argv[2], "w"))
PY
}

nginx_stop() {
  if [ -n "${NGINX_PID:-}" ]; then kill "$NGINX_PID" 2>/dev/null; wait "$NGINX_PID" 2>/dev/null; NGINX_PID=; fi
}
