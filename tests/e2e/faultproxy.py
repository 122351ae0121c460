#!/usr/bin/env python3
"""faultproxy.py - a fault-injecting HTTP reverse proxy for end-to-end tests (stdlib only).

    faultproxy.py --target 127.0.0.1:PORT --log FILE [--fail-first N] [--cut-first M --cut-after K]
                  [--match SUBSTR] [--enforce-if-match]

Listens on 127.0.0.1, port 0 (the kernel picks), prints "port N" on stdout once it listens, and forwards
every request to the target unchanged (same method, path, headers including Host, body), so SigV4
signatures made for the proxy's address still verify at the server. Faults, applied in arrival order to
requests whose path contains SUBSTR (all requests by default):
  --fail-first N   the first N such requests get 503 SlowDown (S3's XML error body), never forwarded;
  --cut-first M    the first M such GETs answered with a body get the full headers (Content-Length of the
  --cut-after K    whole body) but only K body bytes, then the connection is closed.
  --enforce-if-match  answer 412 PreconditionFailed when a request's If-Match differs from the ETag the
                   server returned (s3rver ignores If-Match on GET; S3 does not).
Each request appends one line to FILE:
  "<n> <METHOD> <path> conn=<client port> range=<Range or -> <action> <status> if-match=<If-Match or ->"
(a client that reuses its connection shows one conn= port for many requests).
"""
import argparse
import http.client
import http.server
import socket
import sys
import threading

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b'<Message>Please reduce your request rate.</Message><RequestId>faultproxy</RequestId></Error>')
PRECOND = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>'
           b'<Message>At least one of the pre-conditions you specified did not hold</Message>'
           b'<Condition>If-Match</Condition></Error>')
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.n = 0
        self.failed = 0
        self.cut = 0

    def log(self, line):
        with self.lock:
            with open(self.args.log, "a") as f:
                f.write(line + "\n")


def make_handler(st):
    a = st.args

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: the log file is the record
            pass

        def note(self, n, rng, action, status, im):
            st.log("%d %s %s conn=%d range=%s %s %d if-match=%s" % (n, self.command, self.path,
                                                                   self.client_address[1], rng, action, status,
                                                                   im or "-"))

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            matched = a.match in self.path
            with st.lock:
                st.n += 1
                n = st.n
                fail = matched and st.failed < a.fail_first
                if fail:
                    st.failed += 1
            rng = self.headers.get("Range") or "-"
            im = self.headers.get("If-Match")
            if fail:
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOWDOWN)))
                self.end_headers()
                self.wfile.write(SLOWDOWN)
                self.note(n, rng, "503-injected", 503, im)
                return
            up = http.client.HTTPConnection(a.host, a.port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            up.request(self.command, self.path, body=body, headers=headers)
            resp = up.getresponse()
            data = resp.read()
            up.close()
            if (a.enforce_if_match and im and 200 <= resp.status < 300 and
                    im.strip() != (resp.getheader("ETag") or "").strip()):
                self.send_response(412)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(PRECOND)))
                self.end_headers()
                self.wfile.write(PRECOND)
                self.note(n, rng, "412-injected", 412, im)
                return
            cut = False
            if self.command == "GET" and matched and data and 200 <= resp.status < 300:
                with st.lock:
                    if st.cut < a.cut_first:
                        st.cut += 1
                        cut = True
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            if self.command == "HEAD":
                clen = resp.getheader("Content-Length")
                if clen is not None:
                    self.send_header("Content-Length", clen)
            else:
                self.send_header("Content-Length", str(len(data)))
            if cut:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                if cut:
                    self.wfile.write(data[:a.cut_after])
                    self.wfile.flush()
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                else:
                    self.wfile.write(data)
            self.note(n, rng, "cut-after-%d" % a.cut_after if cut else "forwarded", resp.status, im)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--cut-first", type=int, default=0)
    p.add_argument("--cut-after", type=int, default=0)
    p.add_argument("--match", default="")
    p.add_argument("--enforce-if-match", action="store_true")
    a = p.parse_args()
    host, _, port = a.target.rpartition(":")
    a.host, a.port = host, int(port)
    open(a.log, "w").close()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(State(a)))
    srv.daemon_threads = True
    print("port %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
