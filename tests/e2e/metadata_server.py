#!/usr/bin/python3
"""metadata_server.py - the container credentials endpoint (ECS, EKS Pod Identity) and EC2's instance metadata
service (IMDSv2) for the credential tests: no open implementation exists to run, so this speaks their
documented protocol on 127.0.0.1 and refuses what the real ones refuse (stdlib only).

  metadata_server.py PORTFILE LOG AK SK [--expires-in SECONDS] [--auth TOKEN] [--role NAME] [--redirect URL]

IMDS:  PUT /latest/api/token needs X-aws-ec2-metadata-token-ttl-seconds (1..21600, else 400) and is refused
       (403) with X-Forwarded-For; GETs under /latest/meta-data/ need a token it issued in
       X-aws-ec2-metadata-token, else 401. /latest/meta-data/iam/security-credentials/ lists the role,
       .../ROLE answers {"Code": "Success", "AccessKeyId", "SecretAccessKey", "Token", "Expiration", ...}.
Container: GET /v2/credentials/anything or /pod-identity answers {"AccessKeyId", "SecretAccessKey", "Token",
       "Expiration", "RoleArn"}; with --auth the Authorization header must equal TOKEN, else 401 and
       {"code": "AccessDenied", "message": ...}.
Expiration is now + SECONDS (3600). Each request appends "METHOD PATH STATUS" to LOG (any method: a POST,
which neither service takes, is logged as a 405).
--redirect URL: every request (any method, any path) is answered 307 with Location: URL + its path, as a
       hijacked or misconfigured endpoint would: credential clients must not follow it (the token would go along).
"""
import datetime
import http.server
import json
import os
import secrets
import sys


def main():
    portfile, log, ak, sk = sys.argv[1:5]
    opts = sys.argv[5:]
    expires_in, auth, role, redirect = 3600, None, "hfs3-test-role", None
    while opts:
        k, v = opts[0], opts[1]
        opts = opts[2:]
        if k == "--expires-in":
            expires_in = int(v)
        elif k == "--auth":
            auth = v
        elif k == "--role":
            role = v
        elif k == "--redirect":
            redirect = v
    tokens = set()

    def creds(token_key):
        exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=expires_in)
        return {"AccessKeyId": ak, "SecretAccessKey": sk, token_key: "IQoJb3JpZ2luFAKESESSIONTOKEN" + secrets.token_hex(8),
                "Expiration": exp.strftime("%Y-%m-%dT%H:%M:%SZ")}

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, status, body, ctype="application/json", location=None):
            data = body if isinstance(body, bytes) else body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            with open(log, "a") as f:
                f.write("%s %s %d\n" % (self.command, self.path, status))

        def redirected(self):
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            if redirect is None:
                return False
            self.reply(307, "", "text/plain", location=redirect + self.path)
            return True

        def do_POST(self):
            if not self.redirected():
                self.reply(405, "", "text/plain")

        def do_PUT(self):
            if self.redirected():
                return
            if self.path != "/latest/api/token":
                return self.reply(404, "", "text/plain")
            if self.headers.get("X-Forwarded-For"):
                return self.reply(403, "", "text/plain")
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self.reply(400, "", "text/plain")
            t = "IMDSTOKEN" + secrets.token_hex(16)
            tokens.add(t)
            self.reply(200, t, "text/plain")

        def do_GET(self):
            if self.redirected():
                return
            p = self.path
            if p.startswith("/latest/"):
                if self.headers.get("X-aws-ec2-metadata-token") not in tokens:
                    return self.reply(401, "", "text/plain")
                base = "/latest/meta-data/iam/security-credentials/"
                if p == base:
                    return self.reply(200, role, "text/plain")
                if p == base + role:
                    d = creds("Token")
                    d.update({"Code": "Success", "Type": "AWS-HMAC",
                              "LastUpdated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
                    return self.reply(200, json.dumps(d))
                return self.reply(404, "", "text/plain")
            if p.startswith("/v2/credentials/") or p == "/pod-identity":
                if auth is not None and self.headers.get("Authorization") != auth:
                    return self.reply(401, json.dumps({"code": "AccessDenied", "message": "invalid authorization token"}))
                d = creds("Token")
                d["RoleArn"] = "arn:aws:iam::123456789012:role/" + role
                return self.reply(200, json.dumps(d))
            self.reply(404, "", "text/plain")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


if __name__ == "__main__":
    main()
