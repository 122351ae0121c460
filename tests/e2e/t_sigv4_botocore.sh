#!/usr/bin/env bash
# t_sigv4_botocore.sh - hfs3's S3 SigV4 Authorization values equal botocore's for GET/HEAD/PUT and
# ListObjectsV2 requests whose keys and query values hold spaces, '+', '=', '~', '$', '@' and UTF-8.
# Pure signing: no S3 server (tests/e2e/sigv4_botocore.py has the cases; tests/tools/sigv4_sign.c
# is the hfs3 side). Needs Debian's /usr/bin/python3 with python3-boto3.
set -euo pipefail
PY=/usr/bin/python3
SIGN="$HFS3_ROOT/$BUILD/tools/sigv4_sign"
[ -x "$SIGN" ] || { echo "not ok: $SIGN not built (make BUILD=$BUILD e2e builds it)"; exit 1; }
"$PY" -c 'import botocore' 2>/dev/null || { echo "not ok: $PY has no botocore (apt-get install python3-boto3)"; exit 1; }
# A clean environment: no host AWS_* settings or config files may reach botocore.
mkdir -p "$WORK/home"
env -i PATH=/usr/bin:/bin HOME="$WORK/home" LANG=C.UTF-8 \
    "$PY" "$HFS3_ROOT/tests/e2e/sigv4_botocore.py" "$SIGN"
