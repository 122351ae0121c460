"""sigv4_recorded.py - checks the requests lib/s3.c really sent against botocore's SigV4 (Debian python3-boto3).

Usage: /usr/bin/python3 sigv4_recorded.py HEADERS_LOG MIN_REQUESTS
Environment: SIGV4_AK, SIGV4_SK (the credentials the requests were signed with), SIGV4_TOKEN (optional: the
session token every request must carry and sign).

HEADERS_LOG is what tests/e2e/s3proxy.py --headers-log recorded: each request's method, raw path (as sent on the
wire) and headers. For each signed request (an Authorization header), botocore's S3SigV4Auth recomputes the
signature from what was sent -- method, raw path and query, the headers named in SignedHeaders with their sent
values, X-Amz-Date, x-amz-content-sha256 -- and it must equal the Signature that went out. Also checked: the
path and query are encoded as botocore's serializer encodes them (so the server decodes the key that was
signed); host, x-amz-date and x-amz-content-sha256 are signed; every header lib/s3.c adds (Range, If-Match,
If-None-Match, Content-Type, x-amz-security-token) is signed; the token, when given, is sent and signed. Prints
one "ok"/"not ok" line per request (method and path only: no header values); exits 1 on any failure or when
fewer than MIN_REQUESTS signed requests were seen.
"""
import json
import os
import sys
from urllib.parse import quote, unquote_to_bytes, urlsplit

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

# headers curl adds on its own (not signed by lib/s3.c, by design) and hop-by-hop ones
UNSIGNED = {"authorization", "user-agent", "accept", "content-length", "expect", "connection", "transfer-encoding"}

log, min_requests = sys.argv[1], int(sys.argv[2])
ak, sk, token = os.environ["SIGV4_AK"], os.environ["SIGV4_SK"], os.environ.get("SIGV4_TOKEN") or None
failures = 0
count = 0


def bad(label, why):
    global failures
    failures += 1
    print(f"not ok {label}: {why}")


def reencode_path(raw):
    return quote(unquote_to_bytes(raw), safe="/~")


def reencode_query(raw):
    out = []
    for pair in raw.split("&"):
        k, _, v = pair.partition("=")
        out.append(quote(unquote_to_bytes(k), safe="-_.~") + "=" + quote(unquote_to_bytes(v), safe="-_.~"))
    return "&".join(out)


for line in open(log):
    rec = json.loads(line)
    headers = {}
    for k, v in rec["headers"]:
        headers.setdefault(k.lower(), []).append(v)
    label = f'{rec["n"]} {rec["method"]} {rec["path"]}'
    authz = headers.get("authorization")
    if not authz:
        bad(label, "not signed")
        continue
    count += 1
    authz = authz[0]
    try:
        fields = dict(p.strip().split("=", 1) for p in authz.split(" ", 1)[1].split(","))
        signed = fields["SignedHeaders"].split(";")
        cred = fields["Credential"].split("/")
        sent_sig = fields["Signature"]
    except (KeyError, ValueError, IndexError):
        bad(label, "malformed Authorization header")
        continue
    if not authz.startswith("AWS4-HMAC-SHA256 ") or len(cred) != 5 or cred[0] != ak or cred[3:] != ["s3", "aws4_request"]:
        bad(label, "Authorization is not AWS4-HMAC-SHA256 with this access key and an s3 scope")
        continue
    region = cred[2]
    missing = [h for h in ("host", "x-amz-date", "x-amz-content-sha256") if h not in signed]
    if missing:
        bad(label, "not signed: " + ", ".join(missing))
        continue
    unsigned = sorted(h for h in headers if h not in UNSIGNED and h not in signed)
    if unsigned:
        bad(label, "sent but not signed: " + ", ".join(unsigned))
        continue
    if token is not None:
        if headers.get("x-amz-security-token") != [token]:
            bad(label, "x-amz-security-token missing or not the session token")
            continue
    elif "x-amz-security-token" in headers:
        bad(label, "x-amz-security-token sent without a session token")
        continue
    absent = [h for h in signed if h not in headers]
    if absent:
        bad(label, "signed but not sent: " + ", ".join(absent))
        continue
    parts = urlsplit(rec["path"])
    if reencode_path(parts.path) != parts.path:
        bad(label, "path not encoded as SigV4 wants (botocore would send " + reencode_path(parts.path) + ")")
        continue
    if parts.query and reencode_query(parts.query) != parts.query:
        bad(label, "query not encoded as SigV4 wants (botocore would send " + reencode_query(parts.query) + ")")
        continue
    amz_date = headers["x-amz-date"][0]
    if cred[1] != amz_date[:8]:
        bad(label, "credential scope date is not X-Amz-Date's")
        continue
    req = AWSRequest(method=rec["method"], url="http://" + headers["host"][0] + rec["path"],
                     headers={h: ",".join(headers[h]) for h in signed})
    req.context["timestamp"] = amz_date
    auth = botocore.auth.S3SigV4Auth(Credentials(ak, sk, token), "s3", region)
    creq = auth.canonical_request(req)
    sig = auth.signature(auth.string_to_sign(req, creq), req)
    if sig != sent_sig:
        bad(label, "signature differs from botocore's for the request as sent")
        print("  --- botocore's canonical request for it\n" + creq.replace(token or "\0", "<token>"))
        continue
    print(f"ok {label} ({len(signed)} signed headers)")

if count < min_requests:
    bad("count", f"{count} signed requests recorded, expected at least {min_requests}")
print(f"{count} requests checked against botocore, {failures} failures")
sys.exit(1 if failures else 0)
