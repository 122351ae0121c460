#!/usr/bin/python3
"""oidc_provider.py - a tiny OpenID Connect provider on loopback for RGW's AssumeRoleWithWebIdentity tests.

  oidc_provider.py keys DIR                  makes DIR/key.pem + DIR/cert.pem (openssl), prints the thumbprint
                                             (SHA-1 of the DER certificate, as RGW and IAM want it)
  oidc_provider.py serve DIR PORTFILE        serves /.well-known/openid-configuration and /jwks (the key with
                                             its x5c certificate) on 127.0.0.1, an ephemeral port written to PORTFILE
  oidc_provider.py token DIR ISS AUD SUB EXP_OFFSET
                                             prints an RS256 JWT signed with DIR/key.pem (openssl dgst), expiring
                                             EXP_OFFSET seconds from now (negative: already expired)
Only the standard library and the openssl command; no third-party Python packages.
"""
import base64
import hashlib
import http.server
import json
import os
import subprocess
import sys
import time


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def der_cert(d):
    return subprocess.run(["openssl", "x509", "-in", os.path.join(d, "cert.pem"), "-outform", "DER"],
                          check=True, capture_output=True).stdout


def keys(d):
    os.makedirs(d, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", os.path.join(d, "key.pem"),
                    "-out", os.path.join(d, "cert.pem"), "-subj", "/CN=hfs3-test-oidc", "-days", "2"],
                   check=True, capture_output=True)
    print(hashlib.sha1(der_cert(d)).hexdigest())


def jwk(d):
    out = subprocess.run(["openssl", "rsa", "-in", os.path.join(d, "key.pem"), "-noout", "-modulus"],
                         check=True, capture_output=True, text=True).stdout
    n = bytes.fromhex(out.strip().split("=", 1)[1])
    return {"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k1", "n": b64u(n), "e": b64u((65537).to_bytes(3, "big")),
            "x5c": [base64.b64encode(der_cert(d)).decode()]}


def serve(d, portfile):
    jwks = json.dumps({"keys": [jwk(d)]}).encode()

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            iss = "http://127.0.0.1:%d" % self.server.server_address[1]
            if self.path == "/.well-known/openid-configuration":
                body = json.dumps({"issuer": iss, "jwks_uri": iss + "/jwks", "id_token_signing_alg_values_supported": ["RS256"],
                                   "response_types_supported": ["id_token"], "subject_types_supported": ["public"]}).encode()
            elif self.path == "/jwks":
                body = jwks
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


def token(d, iss, aud, sub, exp_offset):
    now = int(time.time())
    head = b64u(json.dumps({"alg": "RS256", "typ": "JWT", "kid": "k1"}).encode())
    claims = {"iss": iss, "aud": aud, "sub": sub, "iat": now - 5, "nbf": now - 5, "exp": now + int(exp_offset),
              "azp": aud}
    body = b64u(json.dumps(claims).encode())
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", os.path.join(d, "key.pem")],
                         input=(head + "." + body).encode(), check=True, capture_output=True).stdout
    print(head + "." + body + "." + b64u(sig))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "keys":
        keys(sys.argv[2])
    elif cmd == "serve":
        serve(sys.argv[2], sys.argv[3])
    elif cmd == "token":
        token(*sys.argv[2:7])
    else:
        sys.exit("usage: see the docstring")
