"""sigv4_botocore.py - cross-checks hfs3's S3 SigV4 signer against botocore's (Debian python3-boto3).

Usage: /usr/bin/python3 sigv4_botocore.py PATH/TO/sigv4_sign

Two ways of getting botocore's Authorization value for each case, both at a fixed date with fixed
credentials, and no network:
  client: a real botocore S3 client (path-style, plain http endpoint) builds the request from the
          operation's parameters (Bucket, Key, Prefix, ContinuationToken...); a before-send hook
          captures the signed request and stops it before it leaves.
  raw:    an AWSRequest for the URL "/bucket/" + key percent-encoded with '/' and '~' kept (as botocore's
          serializer does), with X-Amz-Date and x-amz-content-sha256 set, signed by S3SigV4Auth.
hfs3 signs what s3.c would hand it: the decoded path "/bucket/" + key, the decoded query pairs and the
headers botocore signed (sigv4_sign, S3 mode). The two values must be equal byte for byte.
Prints "ok ..." per case; exits 1 on any mismatch.
"""
import datetime
import hashlib
import logging
import os
import subprocess
import sys
import types
from urllib.parse import quote, urlsplit, unquote_to_bytes

import botocore.auth
import botocore.session
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

SIGN = sys.argv[1]
AK = "AKIDEXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "FQoGZXIvYXdzEXAMPLE//token+with/odd=chars=="
AMZ_DATE = "20150830T123600Z"
BUCKET = "models"
ENDPOINT = "http://127.0.0.1:9"  # never contacted: the hook stops every request first


class FixedDT(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return cls(2015, 8, 30, 12, 36, 0)


# botocore.auth reads the clock as datetime.datetime.utcnow(); give it a fixed one.
botocore.auth.datetime = types.SimpleNamespace(datetime=FixedDT)


class CanonicalLog(logging.Handler):
    """Keeps the last canonical request botocore logged, for showing a mismatch."""

    last = ""

    def emit(self, record):
        if record.getMessage().startswith("CanonicalRequest:"):
            CanonicalLog.last = record.getMessage().split("\n", 1)[1]


alog = logging.getLogger("botocore.auth")
alog.setLevel(logging.DEBUG)
alog.addHandler(CanonicalLog())
alog.propagate = False


class Captured(Exception):
    pass


def make_client(token=None):
    s = botocore.session.Session()
    c = s.create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=ENDPOINT,
        aws_access_key_id=AK,
        aws_secret_access_key=SK,
        aws_session_token=token,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 0}),
    )
    captured = []

    def hook(request, **kw):
        captured.append(request)
        raise Captured()

    c.meta.events.register("before-send.s3", hook)
    return c, captured


def hdr(request, name):
    for k, v in request.headers.items():
        if k.lower() == name:
            return v.decode() if isinstance(v, bytes) else v
    return None


def hfs3_sign(method, path, query, headers, payload_hash):
    argv = [SIGN, "-m", method, "-p", path, "-x", payload_hash, "-d", AMZ_DATE, "-a", AK, "-r", "us-east-1", "-s", "s3"]
    for n, v in query:
        argv += ["-q", f"{n}={v}"]
    for n, v in headers:
        argv += ["-H", f"{n}:{v}"]
    env = {"HFS3_SIGV4_SECRET": SK, "PATH": "/usr/bin:/bin"}
    bargv = [a.encode("utf-8") for a in argv]
    out = subprocess.run(bargv, env=env, capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"sigv4_sign failed: {out.stderr.decode(errors='replace')}")
    creq = subprocess.run(bargv + [b"-c"], env=env, capture_output=True, check=True).stdout
    return out.stdout.decode().rstrip("\n"), creq.decode("utf-8", errors="replace").rstrip("\n")


failures = 0
count = 0


def compare(label, boto_authz, boto_creq, method, path, query, request_headers, payload_hash):
    global failures, count
    count += 1
    signed = boto_authz.split("SignedHeaders=")[1].split(",")[0].split(";")
    for must in ("host", "x-amz-content-sha256", "x-amz-date"):
        if must not in signed:
            print(f"not ok {label}: botocore did not sign {must}")
            failures += 1
            return
    headers = []
    for name in signed:
        v = request_headers(name)
        if v is None:
            print(f"not ok {label}: no value for signed header {name}")
            failures += 1
            return
        headers.append((name, v))
    mine, my_creq = hfs3_sign(method, path, query, headers, payload_hash)
    if mine == boto_authz:
        print(f"ok {label}")
        return
    failures += 1
    print(f"not ok {label}\n  botocore: {boto_authz}\n  hfs3:     {mine}")
    print("  --- botocore canonical request\n" + boto_creq + "\n  --- hfs3 canonical request\n" + my_creq)


def check_wire(label, request, path, query):
    """The request botocore sends must decode to exactly what hfs3 is given."""
    u = urlsplit(request.url)
    wire_path = unquote_to_bytes(u.path).decode("utf-8")
    if wire_path != path:
        raise AssertionError(f"{label}: wire path {u.path!r} decodes to {wire_path!r}, not {path!r}")
    wire_q = []
    if u.query:
        for pair in u.query.split("&"):
            n, _, v = pair.partition("=")
            wire_q.append((unquote_to_bytes(n).decode(), unquote_to_bytes(v).decode()))
    if sorted(wire_q) != sorted(query):
        raise AssertionError(f"{label}: wire query {wire_q!r} != {query!r}")


def client_case(label, op, params, path, query, token=None):
    c, captured = make_client(token)
    CanonicalLog.last = ""
    try:
        getattr(c, op)(**params)
    except Captured:
        pass
    if not captured:
        raise AssertionError(f"{label}: no request captured")
    req = captured[0]
    check_wire(label, req, path, query)
    authz = hdr(req, "authorization")
    payload_hash = hdr(req, "x-amz-content-sha256")
    body = req.body or b""
    if isinstance(body, str):
        body = body.encode()
    if hasattr(body, "read"):
        body = body.read()
    if payload_hash != hashlib.sha256(body).hexdigest():
        raise AssertionError(f"{label}: x-amz-content-sha256 {payload_hash} is not the body's hash")

    def value(name):
        if name == "host":
            return hdr(req, "host") or urlsplit(req.url).netloc
        return hdr(req, name)

    compare("client " + label, authz, CanonicalLog.last, req.method, path, query, value, payload_hash)


def raw_case(label, method, key, query, extra_headers=(), body=b""):
    url = ENDPOINT + "/" + BUCKET + "/" + quote(key, safe="/~")
    if query:
        url += "?" + "&".join(quote(n, safe="-_.~") + "=" + quote(v, safe="-_.~") for n, v in query)
    payload_hash = hashlib.sha256(body).hexdigest()
    headers = {"X-Amz-Date": AMZ_DATE, "x-amz-content-sha256": payload_hash}
    headers.update(dict(extra_headers))
    req = AWSRequest(method=method, url=url, headers=headers, data=body)
    CanonicalLog.last = ""
    botocore.auth.S3SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    path = "/" + BUCKET + "/" + key
    check_wire(label, req, path, list(query))

    def value(name):
        if name == "host":
            return hdr(req, "host") or urlsplit(req.url).netloc
        return hdr(req, name)

    compare("raw " + label, req.headers["Authorization"], CanonicalLog.last, method, path, list(query), value,
            payload_hash)


KEYS = [
    "plain.txt",
    "dir/sub/config.json",
    "dir/a b.json",
    "a+b=c.txt",
    "tilde~x$y@z",
    "spaces  two  ",
    "mixed !'()*,;:[]",
    "percent%41%zz",
    "unicod\u00e9/\u6a21\u578b-\u0e01.safetensors",
    "emoji \U0001f600.bin",
    "dir//double/./dot/../x",
    "trailing/",
    "models--Qwen--Qwen3-1.7B/snapshots/0a1b/model-00001-of-00002.safetensors",
]


def main():
    for key in KEYS:
        path = "/" + BUCKET + "/" + key
        client_case(f"GetObject {key!r}", "get_object", {"Bucket": BUCKET, "Key": key}, path, [])
        raw_case(f"GET {key!r}", "GET", key, [])
    key = "dir/a b+c=~$@\u00e9.json"
    path = "/" + BUCKET + "/" + key
    client_case("GetObject Range", "get_object", {"Bucket": BUCKET, "Key": key, "Range": "bytes=0-1023"}, path, [])
    client_case("GetObject If-Match", "get_object", {"Bucket": BUCKET, "Key": key, "IfMatch": '"abc-2"'}, path, [])
    client_case("HeadObject If-None-Match", "head_object", {"Bucket": BUCKET, "Key": key, "IfNoneMatch": '"e t"'},
                path, [])
    client_case("GetObject session token", "get_object", {"Bucket": BUCKET, "Key": key}, path, [], token=TOKEN)
    client_case("GetObject versionId", "get_object", {"Bucket": BUCKET, "Key": key, "VersionId": "v1+/="}, path,
                [("versionId", "v1+/=")])
    client_case("PutObject", "put_object",
                {"Bucket": BUCKET, "Key": key, "Body": b"hello world\n", "ContentType": "application/json"}, path, [])
    client_case("PutObject manifest", "put_object",
                {"Bucket": BUCKET, "Key": "hub/m/.hfs3/manifest.json", "Body": b'{"hfs3_manifest": 1}'},
                "/" + BUCKET + "/hub/m/.hfs3/manifest.json", [])
    raw_case("PUT body", "PUT", key, [], [("Content-Type", "application/octet-stream")], body=b"\x00\x01 data")
    raw_case("GET Range", "GET", key, [], [("Range", "bytes=5-")])

    lists = [
        ({"Prefix": "dir/"}, [("prefix", "dir/")]),
        ({"Prefix": "dir/a b+c=~$@\u00e9/", "Delimiter": "/", "MaxKeys": 1000},
         [("prefix", "dir/a b+c=~$@\u00e9/"), ("delimiter", "/"), ("max-keys", "1000")]),
        ({"Prefix": "p", "ContinuationToken": "1/AbC+dEf==/x y", "StartAfter": "p/a~b"},
         [("prefix", "p"), ("continuation-token", "1/AbC+dEf==/x y"), ("start-after", "p/a~b")]),
        ({"Prefix": ""}, [("prefix", "")]),
        ({}, []),
    ]
    for params, q in lists:
        full = [("list-type", "2"), ("encoding-type", "url")] + q
        client_case(f"ListObjectsV2 {params!r}", "list_objects_v2", dict(Bucket=BUCKET, **params), "/" + BUCKET,
                    full)
    raw_list = [("list-type", "2"), ("prefix", "dir/a b+c=~$@\u00e9/"), ("continuation-token", "1/AbC+dEf=="),
                ("max-keys", "2"), ("lifecycle", "")]
    # raw ListObjectsV2: the bucket path without a trailing key
    req = AWSRequest(method="GET", url=ENDPOINT + "/" + BUCKET + "?" + "&".join(
        quote(n, safe="-_.~") + "=" + quote(v, safe="-_.~") for n, v in raw_list),
        headers={"X-Amz-Date": AMZ_DATE, "x-amz-content-sha256": hashlib.sha256(b"").hexdigest()})
    botocore.auth.S3SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    check_wire("raw list", req, "/" + BUCKET, raw_list)
    compare("raw ListObjectsV2 query", req.headers["Authorization"], CanonicalLog.last, "GET", "/" + BUCKET,
            raw_list, lambda n: hdr(req, n) or (urlsplit(req.url).netloc if n == "host" else None),
            hashlib.sha256(b"").hexdigest())

    print(f"sigv4 vs botocore {botocore.__version__}: {count - failures}/{count} cases agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
