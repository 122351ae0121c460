#!/usr/bin/env python3
"""countproxy.py - a counting (and optionally slow) HTTP reverse proxy for end-to-end tests (stdlib only).

    countproxy.py --target 127.0.0.1:PORT --log FILE [--rate BYTES_PER_SECOND] [--enforce-if-match]

Listens on 127.0.0.1, port 0, prints "port N" on stdout once it listens, and forwards every request to the
target unchanged (method, path, headers including Host, body), so SigV4 signatures made for the proxy's address
still verify at the server. --rate limits each response body to that many bytes per second (per connection),
so a test can kill a client mid-download. --enforce-if-match answers a GET whose If-Match differs from the
object's ETag with 412 PreconditionFailed, as S3 does (the test server ignores If-Match). After each response it appends one line to FILE:
    "<METHOD> <path> range=<Range or -> status=<status> bytes=<body bytes sent>"
(a response cut short because the client went away logs the bytes it did send).
"""
import argparse
import http.client
import http.server
import sys
import threading
import time

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}
LOCK = threading.Lock()


def make_handler(args):
    host, port = args.target.rsplit(":", 1)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def record(self, status, sent):
            line = "%s %s range=%s status=%s bytes=%d\n" % (
                self.command, self.path, self.headers.get("Range") or "-", status, sent)
            with LOCK:
                with open(args.log, "a") as f:
                    f.write(line)

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            up = http.client.HTTPConnection(host, int(port), timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            up.request(self.command, self.path, body=body, headers=headers)
            resp = up.getresponse()
            sent = 0
            im = self.headers.get("If-Match")
            if args.enforce_if_match and im and resp.status in (200, 206) and im != resp.getheader("ETag"):
                resp.read()
                body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>'
                        b'<Message>At least one of the pre-conditions you specified did not hold</Message>'
                        b'<Condition>If-Match</Condition></Error>')
                self.send_response_only(412, "Precondition Failed")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.record(412, len(body))
                up.close()
                return
            try:
                self.send_response_only(resp.status, resp.reason)
                clen = resp.getheader("Content-Length")
                for k, v in resp.getheaders():
                    if k.lower() not in HOP:
                        self.send_header(k, v)
                chunked = clen is None and self.command != "HEAD" and resp.status not in (204, 304)
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                t0 = time.monotonic()
                while self.command != "HEAD":
                    data = resp.read(16384)
                    if not data:
                        break
                    if chunked:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    else:
                        self.wfile.write(data)
                    sent += len(data)
                    if args.rate:
                        ahead = sent / args.rate - (time.monotonic() - t0)
                        if ahead > 0:
                            time.sleep(ahead)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            finally:
                self.record(resp.status, sent)
                up.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--enforce-if-match", action="store_true")
    args = p.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args))
    srv.daemon_threads = True
    print("port %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
