# rgwenv.sh - source me: start Ceph's RADOS Gateway (a throwaway one-node cluster: ceph-mon, ceph-osd on
# memstore, radosgw) on free loopback ports under WORKDIR/rgw, as s3env.sh starts the Node server.
#   rgwenv_start WORKDIR [BUCKETS]   starts it, creates the buckets, exports the variables below
#   rgwenv_stop                      kills the three daemons (SIGKILL: the data is thrown away)
#   rgwenv_admin ARGS...             radosgw-admin against this cluster
# After start: RGW_PORT, RGW_ENDPOINT, RGW_AK/RGW_SK (user "tester", keys from RGWENV_KEYS="AK SK" if set, caps roles=*;oidc-provider=* for STS and
# IAM), RGW_AK2/RGW_SK2 (user "other", no caps), rclone remote "rgwtest:", and HOME under WORKDIR.
# RGWENV_MEMSTORE_BYTES: the memstore OSD's size (2 GiB by default; it holds every object in memory).
# STS is on (rgw s3 auth use sts, a 16-character rgw sts key). Recipe and pitfalls: design.md §6.
# Needs Debian's ceph-mon, ceph-osd and radosgw (scripts/deps.sh installs them).
RGWENV_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

rgwenv_have() { command -v radosgw >/dev/null && command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null; }

# N free loopback ports (Debian's python3: the pyenv shim on PATH takes seconds to start)
rgwenv_free_ports() {
  /usr/bin/python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

rgwenv_admin() { radosgw-admin -c "$RGW_DIR/ceph.conf" "$@"; }

rgwenv_start() {
  local work=$1 buckets=${2:-models} t0
  t0=$EPOCHREALTIME
  rgwenv_have || { echo "rgwenv: radosgw, ceph-mon or ceph-osd missing (scripts/deps.sh installs them)" >&2; return 1; }
  RGW_DIR=$work/rgw
  mkdir -p "$RGW_DIR/mon" "$RGW_DIR/osd" "$RGW_DIR/run" "$RGW_DIR/log" "$work/home"
  export HOME="$work/home"
  local p1 p2 fsid osduuid
  read -r p1 p2 RGW_PORT < <(rgwenv_free_ports 3)
  fsid=$(cat /proc/sys/kernel/random/uuid); osduuid=$(cat /proc/sys/kernel/random/uuid)
  cat >"$RGW_DIR/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$p2,v1:127.0.0.1:$p1]
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
paxos propose interval = 0.01
osd objectstore = memstore
memstore device bytes = ${RGWENV_MEMSTORE_BYTES:-2147483648}
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
osd crush chooseleaf type = 0
mon max pg per osd = 1000
mon data avail crit = 0
mon data avail warn = 0
run dir = $RGW_DIR/run
admin socket = $RGW_DIR/run/\$name.asok
log file = $RGW_DIR/log/\$name.log
mon data = $RGW_DIR/mon
osd data = $RGW_DIR/osd
keyring = $RGW_DIR/keyring
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw dns name = localhost
rgw data = $RGW_DIR/rgwdata
rgw s3 auth use sts = true
rgw sts key = hfs3teststskey16
rgw enable apis = s3, s3website, admin, sts, iam
EOF
  local C="$RGW_DIR/ceph.conf"
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$p2,v1:127.0.0.1:$p1]" "$RGW_DIR/monmap" >/dev/null 2>&1 \
    || { echo "rgwenv: monmaptool failed" >&2; return 1; }
  ceph-mon -c "$C" --mkfs -i a --monmap "$RGW_DIR/monmap" >"$RGW_DIR/log/mkfs-mon.out" 2>&1 \
    || { cat "$RGW_DIR/log/mkfs-mon.out" >&2; echo "rgwenv: ceph-mon --mkfs failed" >&2; return 1; }
  ceph-mon -c "$C" -i a -f >"$RGW_DIR/log/mon.out" 2>&1 &
  RGW_MON_PID=$!
  local id
  id=$(timeout 30 ceph -c "$C" osd new "$osduuid" 2>"$RGW_DIR/log/osdnew.err") \
    || { cat "$RGW_DIR/log/osdnew.err" >&2; echo "rgwenv: ceph osd new failed" >&2; rgwenv_stop; return 1; }
  ceph-osd -c "$C" -i "$id" --mkfs --osd-uuid "$osduuid" >"$RGW_DIR/log/mkfs-osd.out" 2>&1 \
    || { cat "$RGW_DIR/log/mkfs-osd.out" >&2; echo "rgwenv: ceph-osd --mkfs failed" >&2; rgwenv_stop; return 1; }
  ceph-osd -c "$C" -i "$id" -f >"$RGW_DIR/log/osd.out" 2>&1 &
  RGW_OSD_PID=$!
  RGW_AK=TESTERACCESSKEY00001 RGW_SK=testerSecretKey0000000000000000000000001
  [ -z "${RGWENV_KEYS:-}" ] || read -r RGW_AK RGW_SK <<<"$RGWENV_KEYS"
  RGW_AK2=OTHERACCESSKEY000002 RGW_SK2=otherSecretKey00000000000000000000000002
  timeout 60 radosgw-admin -c "$C" user create --uid tester --display-name tester --access-key "$RGW_AK" \
      --secret-key "$RGW_SK" --caps "roles=*;oidc-provider=*" >/dev/null 2>"$RGW_DIR/log/admin.err" \
    && timeout 30 radosgw-admin -c "$C" user create --uid other --display-name other --access-key "$RGW_AK2" \
      --secret-key "$RGW_SK2" >/dev/null 2>>"$RGW_DIR/log/admin.err" \
    || { tail -5 "$RGW_DIR/log/admin.err" >&2; echo "rgwenv: radosgw-admin user create failed" >&2; rgwenv_stop; return 1; }
  radosgw -c "$C" -n client.rgw.a -f >"$RGW_DIR/log/rgw.out" 2>&1 &
  RGW_RGW_PID=$!
  RGW_ENDPOINT="http://127.0.0.1:$RGW_PORT"
  local i
  for i in $(seq 1 300); do
    curl -s -o /dev/null "$RGW_ENDPOINT/" && break
    kill -0 "$RGW_RGW_PID" 2>/dev/null || { tail -5 "$RGW_DIR/log/rgw.out" >&2; echo "rgwenv: radosgw died" >&2; rgwenv_stop; return 1; }
    sleep 0.05
  done
  curl -s -o /dev/null "$RGW_ENDPOINT/" || { echo "rgwenv: radosgw did not answer" >&2; rgwenv_stop; return 1; }
  export RGW_DIR RGW_PORT RGW_ENDPOINT RGW_AK RGW_SK RGW_AK2 RGW_SK2 RGW_MON_PID RGW_OSD_PID RGW_RGW_PID
  export RCLONE_CONFIG_RGWTEST_TYPE=s3 RCLONE_CONFIG_RGWTEST_PROVIDER=Ceph \
         RCLONE_CONFIG_RGWTEST_ACCESS_KEY_ID="$RGW_AK" RCLONE_CONFIG_RGWTEST_SECRET_ACCESS_KEY="$RGW_SK" \
         RCLONE_CONFIG_RGWTEST_ENDPOINT="$RGW_ENDPOINT" RCLONE_CONFIG_RGWTEST_REGION=us-east-1 \
         RCLONE_CONFIG_RGWTEST_FORCE_PATH_STYLE=true
  local b
  for b in $buckets; do
    rclone mkdir "rgwtest:$b" 2>>"$RGW_DIR/log/mkdir.err" || { echo "rgwenv: cannot create bucket $b" >&2; rgwenv_stop; return 1; }
  done
  RGW_START_SECONDS=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  export RGW_START_SECONDS
}

rgwenv_stop() {
  local p
  for p in "${RGW_RGW_PID:-}" "${RGW_OSD_PID:-}" "${RGW_MON_PID:-}"; do
    [ -n "$p" ] && { kill -9 "$p" 2>/dev/null || true; }
  done
  for p in "${RGW_RGW_PID:-}" "${RGW_OSD_PID:-}" "${RGW_MON_PID:-}"; do
    [ -n "$p" ] && { wait "$p" 2>/dev/null || true; }
  done
  RGW_RGW_PID= RGW_OSD_PID= RGW_MON_PID=
  return 0
}
