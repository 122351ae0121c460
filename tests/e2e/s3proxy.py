#!/usr/bin/env python3
"""s3proxy.py - the HTTP reverse proxy of the end-to-end tests: counts, slows and breaks (stdlib only).

    s3proxy.py --target 127.0.0.1:PORT --log FILE [--rate BYTES_PER_SECOND] [--fail-first N]
               [--cut-first M --cut-after K] [--hang-first H] [--match SUBSTR] [--enforce-if-match]
               [--headers-log FILE]

Listens on 127.0.0.1, port 0 (the kernel picks), prints "port N" on stdout once it listens, and forwards
every request to the target unchanged (same method, path, headers including Host, body), so SigV4
signatures made for the proxy's address still verify at the server. Response bodies are streamed.
  --rate R         each response body goes out at most R bytes per second, so a test can kill a client
                   mid-download.
  --enforce-if-match  answer 412 PreconditionFailed when a request's If-Match differs from the ETag the
                   server returned (s3rver ignores If-Match on GET; S3 does not).
Faults, applied in arrival order to requests whose path contains SUBSTR (all requests by default):
  --fail-first N   the first N such requests get 503 SlowDown (S3's XML error body), never forwarded;
  --cut-first M    the first M such GETs answered with a body get the full headers (Content-Length of the
  --cut-after K    whole body) but only K body bytes, then the connection is closed;
  --hang-first H   the first H such requests are read and never answered (the client times out).
  --headers-log F  each request also appends one JSON line to F: {"n", "method", "path" (raw, as sent),
                   "headers": [[name, value], ...] in the order received, "status"} -- so a test can check
                   what lib/s3.c really sends (signed headers, If-None-Match, x-amz-security-token). It holds
                   the session token: tests read it, never print it.
The log is emptied at start; each request appends one line to it once its response is over:
  "<n> <METHOD> <path> range=<Range or -> <action> <status> conn=<client port> bytes=<body bytes sent>
   if-match=<If-Match or ->"
(on one line). n counts requests in arrival order; action is forwarded, 503-injected, 412-injected, hung or
cut-after-K; a client that reuses its connection shows one conn= port for many requests; a response cut
short because the client went away logs the bytes it did send.
"""
import argparse
import http.client
import json
import http.server
import socket
import sys
import threading
import time

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b'<Message>Please reduce your request rate.</Message><RequestId>s3proxy</RequestId></Error>')
PRECOND = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>'
           b'<Message>At least one of the pre-conditions you specified did not hold</Message>'
           b'<Condition>If-Match</Condition></Error>')
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}
CHUNK = 16384


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.n = 0
        self.failed = 0
        self.cut = 0
        self.hung = 0

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

        def note(self, n, action, status, sent):
            if a.headers_log:
                rec = {"n": n, "method": self.command, "path": self.path,
                       "headers": [[k, v] for k, v in self.headers.items()], "status": status}
                with st.lock:
                    with open(a.headers_log, "a") as f:
                        f.write(json.dumps(rec) + "\n")
            st.log("%d %s %s range=%s %s %d conn=%d bytes=%d if-match=%s" % (
                n, self.command, self.path, self.headers.get("Range") or "-", action, status,
                self.client_address[1], sent, self.headers.get("If-Match") or "-"))

        def reply_error(self, status, reason, body):
            self.send_response_only(status, reason)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def send_body(self, chunks, chunked):
            """Writes the chunks (paced by --rate); returns the body bytes written, even when the client
            went away part-way."""
            sent = 0
            t0 = time.monotonic()
            try:
                for data in chunks:
                    if chunked:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    else:
                        self.wfile.write(data)
                    sent += len(data)
                    if a.rate:
                        ahead = sent / a.rate - (time.monotonic() - t0)
                        if ahead > 0:
                            time.sleep(ahead)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            return sent

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
                hang = not fail and matched and st.hung < a.hang_first
                if hang:
                    st.hung += 1
            if hang:
                # never answer: wait until the client gives up and closes its end
                self.close_connection = True
                try:
                    self.connection.settimeout(300)
                    while self.connection.recv(4096):
                        pass
                except OSError:
                    pass
                self.note(n, "hung", 0, 0)
                return
            if fail:
                self.reply_error(503, "Slow Down", SLOWDOWN)
                self.note(n, "503-injected", 503, len(SLOWDOWN))
                return
            im = self.headers.get("If-Match")
            up = http.client.HTTPConnection(a.host, a.port, timeout=120)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                up.request(self.command, self.path, body=body, headers=headers)
                resp = up.getresponse()
                ok = 200 <= resp.status < 300
                if a.enforce_if_match and im and ok and im.strip() != (resp.getheader("ETag") or "").strip():
                    resp.read()
                    self.reply_error(412, "Precondition Failed", PRECOND)
                    self.note(n, "412-injected", 412, len(PRECOND))
                    return
                self.forward(n, resp, matched and ok and self.command == "GET")
            finally:
                up.close()

        def forward(self, n, resp, cuttable):
            # a body to cut is read whole first: whether it is empty decides if it takes a cut
            data = None
            cut = False
            if cuttable:
                with st.lock:
                    cuttable = st.cut < a.cut_first
                if cuttable:
                    data = resp.read()
                    with st.lock:
                        cut = bool(data) and st.cut < a.cut_first
                        if cut:
                            st.cut += 1
            self.send_response_only(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and not (data is not None and k.lower() == "content-length"):
                    self.send_header(k, v)
            chunked = False
            if data is not None:
                self.send_header("Content-Length", str(len(data)))
            elif self.command != "HEAD" and resp.status not in (204, 304) and resp.getheader("Content-Length") is None:
                chunked = True
                self.send_header("Transfer-Encoding", "chunked")
            if cut:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command == "HEAD":
                chunks = []
            elif data is not None:
                if cut:
                    data = data[:a.cut_after]
                chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
            else:
                chunks = iter(lambda: resp.read(CHUNK), b"")
            sent = self.send_body(chunks, chunked)
            if cut:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.note(n, "cut-after-%d" % a.cut_after if cut else "forwarded", resp.status, sent)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--cut-first", type=int, default=0)
    p.add_argument("--cut-after", type=int, default=0)
    p.add_argument("--hang-first", type=int, default=0)
    p.add_argument("--headers-log", default="")
    p.add_argument("--match", default="")
    p.add_argument("--enforce-if-match", action="store_true")
    a = p.parse_args()
    host, _, port = a.target.rpartition(":")
    a.host, a.port = host, int(port)
    open(a.log, "w").close()
    if a.headers_log:
        open(a.headers_log, "w").close()
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
