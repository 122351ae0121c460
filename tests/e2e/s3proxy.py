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
  --cut-after K    whole body) but only K body bytes, then the connection is closed.
  --hang-first H   the first H such requests are read and never answered (the client times out).
  --connect-delay S  each new client connection waits S seconds before its first request is read: the TCP and
                   TLS handshakes of a connection to a distant server (bench/, not the tests).
  --max-busy N     at most N requests at once (any path): one more gets 503 SlowDown at once, as nginx's
                   limit_conn, MinIO's requests_max or RGW's rgw_max_concurrent_requests answer; logged busy-503.
  --slowdown-fraction F  each request (any path) is answered 503 SlowDown, never forwarded, with probability F
                   (--seed N makes the draws repeatable); logged slowdown-503.
  --slowdown-rate R  at most R requests per second per prefix (the path up to its last '/', as S3 counts a
                   prefix), a token bucket holding at most --slowdown-burst B (default R) requests: one beyond it is
                   answered 503 SlowDown at once, as S3 answers past about 5,500 GETs a second a prefix; logged
                   slowdown-503.
  --retry-after S  every 503 SlowDown of the two above and of --fail-first carries Retry-After: S.
  --total-rate R   all response bodies together go out at most R bytes per second (with --rate, each one too).
  --headers-log F  each request also appends one JSON line to F: {"n", "method", "path" (raw, as sent),
                   "headers": [[name, value], ...] in the order received, "status"} -- so a test can check
                   what lib/s3.c really sends (signed headers, If-None-Match, x-amz-security-token). It holds
                   the session token: tests read it, never print it.
  --fault KIND     one more fault, injected into every Nth (--fault-every N, default 1) eligible GET whose
                   path contains SUBSTR, at most M times (--fault-max M, default no limit); --fault-at K
                   (default 1000) places it; paths containing --exclude SUBSTR never get it. KIND is one of
                     flip      one byte of the body (at K, or the last byte of a shorter body) has a bit flipped
                     truncate  the full headers, K body bytes, then the connection is closed (FIN)
                     cut       K body bytes, then the connection is reset (RST)
                     stall     K body bytes, then nothing more, the connection held open until the client leaves
                     overlong  K bytes more than the server sent (Content-Length and Content-Range say so too)
                     gzip      the body gzip-compressed, with Content-Encoding: gzip (a compressing proxy that
                               ignores Accept-Encoding: identity); Content-Range as the server sent it
                     shift     a Range starting at A>0 is sent to the server as starting at A-K, unsigned
                               (the test server serves anonymous GETs), so the body starts K bytes before what
                               was asked; Content-Range tells the truth
                     nocrange  a 206 loses its Content-Range header
                     etag      a reply to a Range starting past byte 0 carries another ETag (as if the object
                               had been replaced between two requests)
                     500, 503  an S3 XML error (InternalError, SlowDown), never forwarded
                     403       an S3 AccessDenied, never forwarded (not retried: the file fails at once)
                   Eligible: a 2xx GET with a body (flip, truncate, cut, stall, overlong, gzip), a GET whose Range
                   starts past byte 0 (shift, etag), a 206 (nocrange), any GET (500, 503, 403).
A server that cannot be reached (restarted by a test) gets 502 Bad Gateway with an S3 XML body, logged as
"upstream-down"; a server that dies mid-body closes the client's connection too.
The log is emptied at start; each request appends one line to it once its response is over:
  "<n> <METHOD> <path> range=<Range or -> <action> <status> conn=<client port> bytes=<body bytes sent>
   t=<arrived>-<answered> if-match=<If-Match or ->"
(on one line; t: monotonic seconds, when the request was read and when its reply was over). n counts requests
in arrival order; action is forwarded, 503-injected, slowdown-503, busy-503, 412-injected, hung,
cut-after-K, KIND-injected (--fault) or upstream-down; a client that reuses its connection shows one conn= port for many requests; a response cut
short because the client went away logs the bytes it did send.
"""
import argparse
import gzip
import http.client
import json
import random
import select
import struct
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
INTERNAL = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
            b'<Message>We encountered an internal error. Please try again.</Message>'
            b'<RequestId>s3proxy</RequestId></Error>')
DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
          b'<Message>Access Denied</Message><RequestId>s3proxy</RequestId></Error>')
BADGW = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>BadGateway</Code>'
         b'<Message>s3proxy cannot reach the server</Message><RequestId>s3proxy</RequestId></Error>')
CHUNK = 16384
BODY_FAULTS = {"flip", "truncate", "cut", "stall", "overlong", "gzip"}
UNSIGNED_DROP = {"range", "authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.n = 0
        self.failed = 0
        self.cut = 0
        self.hung = 0
        self.eligible = 0
        self.faults = 0
        self.busy = 0
        self.buckets = {}          # prefix -> [tokens, last refill]
        self.rng = random.Random(args.seed)
        self.total_sent = 0        # --total-rate: body bytes sent by all responses, since total_t0
        self.total_t0 = time.monotonic()

    def slowdown(self, path):
        """True when this request is to get 503 SlowDown (--slowdown-fraction, --slowdown-rate)."""
        a = self.args
        with self.lock:
            if a.slowdown_fraction and self.rng.random() < a.slowdown_fraction:
                return True
            if not a.slowdown_rate:
                return False
            prefix = path.split("?", 1)[0].rpartition("/")[0]
            now = time.monotonic()
            burst = a.slowdown_burst or a.slowdown_rate
            b = self.buckets.setdefault(prefix, [burst, now])
            b[0] = min(burst, b[0] + (now - b[1]) * a.slowdown_rate)
            b[1] = now
            if b[0] < 1:
                return True
            b[0] -= 1
            return False

    def total_pace(self, n):
        """--total-rate: how long to sleep after sending n more bytes so that all bodies together keep to it."""
        with self.lock:
            self.total_sent += n
            return self.total_sent / self.args.total_rate - (time.monotonic() - self.total_t0)

    def take_fault(self):
        """Counts one eligible request; True when it is to get the --fault."""
        a = self.args
        with self.lock:
            if a.fault_max and self.faults >= a.fault_max:
                return False
            self.eligible += 1
            if self.eligible % a.fault_every:
                return False
            self.faults += 1
            return True

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

        def handle(self):
            if a.connect_delay:
                time.sleep(a.connect_delay)  # a new connection's handshakes (TCP, TLS) over a long round trip
            try:
                super().handle()
            except (ConnectionResetError, BrokenPipeError):
                pass  # a client that gave up on a faulty reply

        def note(self, n, action, status, sent):
            if a.headers_log:
                rec = {"n": n, "method": self.command, "path": self.path,
                       "headers": [[k, v] for k, v in self.headers.items()], "status": status}
                with st.lock:
                    with open(a.headers_log, "a") as f:
                        f.write(json.dumps(rec) + "\n")
            # t=ARRIVED-ANSWERED: monotonic seconds, when the request was read and when its reply was sent
            st.log("%d %s %s range=%s %s %d conn=%d bytes=%d t=%.6f-%.6f if-match=%s" % (
                n, self.command, self.path, self.headers.get("Range") or "-", action, status,
                self.client_address[1], sent, getattr(self, "t_arrival", 0.0), time.monotonic(),
                self.headers.get("If-Match") or "-"))

        def reply_error(self, status, reason, body, retry_after=0):
            self.send_response_only(status, reason)
            self.send_header("Content-Type", "application/xml")
            if retry_after:
                self.send_header("Retry-After", str(retry_after))
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
                    if a.total_rate:
                        ahead = st.total_pace(len(data))
                        if ahead > 0:
                            time.sleep(ahead)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                self.client_gone = True
            return sent

        def handle_any(self):
            self.t_arrival = time.monotonic()
            if (a.slowdown_fraction or a.slowdown_rate) and st.slowdown(self.path):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                with st.lock:
                    st.n += 1
                    n = st.n
                self.send_response_only(503, "Slow Down")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOWDOWN)))
                if a.retry_after:
                    self.send_header("Retry-After", str(a.retry_after))
                self.end_headers()
                self.wfile.write(SLOWDOWN)
                self.note(n, "slowdown-503", 503, len(SLOWDOWN))
                return
            if not a.max_busy:
                return self.handle_one()
            with st.lock:
                st.busy += 1
                over = st.busy > a.max_busy
            try:
                if over:
                    # one request more than the server takes at once: SlowDown, as nginx's limit_conn,
                    # MinIO's requests_max or RGW's rgw_max_concurrent_requests answer
                    length = int(self.headers.get("Content-Length") or 0)
                    if length:
                        self.rfile.read(length)
                    with st.lock:
                        st.n += 1
                        n = st.n
                    self.reply_error(503, "Slow Down", SLOWDOWN)
                    self.note(n, "busy-503", 503, len(SLOWDOWN))
                    return
                return self.handle_one()
            finally:
                with st.lock:
                    st.busy -= 1

        def handle_one(self):
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
                self.reply_error(503, "Slow Down", SLOWDOWN, a.retry_after)
                self.note(n, "503-injected", 503, len(SLOWDOWN))
                return
            fault = None
            if matched and a.fault and self.command == "GET" and not (a.exclude and a.exclude in self.path):
                if a.fault in ("500", "503", "403") and st.take_fault():
                    if a.fault == "500":
                        self.reply_error(500, "Internal Server Error", INTERNAL)
                    elif a.fault == "403":
                        self.reply_error(403, "Forbidden", DENIED)
                    else:
                        self.reply_error(503, "Slow Down", SLOWDOWN)
                    self.note(n, a.fault + "-injected", int(a.fault), 0)
                    return
                elif a.fault not in ("500", "503", "403"):
                    fault = a.fault
            im = self.headers.get("If-Match")
            up = http.client.HTTPConnection(a.host, a.port, timeout=120)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                if fault == "shift":
                    fault = None
                    rng = self.headers.get("Range") or ""
                    if rng.startswith("bytes=") and "-" in rng:
                        lo, _, hi = rng[6:].partition("-")
                        if lo.isdigit() and int(lo) > 0 and st.take_fault():
                            # a Range we change no longer matches the signature: ask anonymously (the
                            # test server serves unsigned GETs)
                            headers = {k: v for k, v in headers.items() if k.lower() not in UNSIGNED_DROP}
                            headers["Range"] = "bytes=%d-%s" % (max(0, int(lo) - a.fault_at), hi)
                            fault = "shift"
                try:
                    up.request(self.command, self.path, body=body, headers=headers)
                    resp = up.getresponse()
                except OSError:
                    self.reply_error(502, "Bad Gateway", BADGW)
                    self.note(n, "upstream-down", 502, 0)
                    return
                ok = 200 <= resp.status < 300
                if a.enforce_if_match and im and ok and im.strip() != (resp.getheader("ETag") or "").strip():
                    resp.read()
                    self.reply_error(412, "Precondition Failed", PRECOND)
                    self.note(n, "412-injected", 412, len(PRECOND))
                    return
                fix = None
                if fault == "nocrange":
                    fault = None
                    if resp.status == 206 and st.take_fault():
                        fault = "nocrange"
                        fix = lambda k, v: None if k.lower() == "content-range" else v
                elif fault == "etag":
                    fault = None
                    lo = (self.headers.get("Range") or "bytes=0-")[6:].partition("-")[0]
                    if ok and lo.isdigit() and int(lo) > 0 and st.take_fault():
                        fault = "etag"
                        fix = lambda k, v: '"00000000000000000000000000000000"' if k.lower() == "etag" else v
                if fault in BODY_FAULTS:
                    self.forward_fault(n, resp, fault)
                else:
                    self.forward(n, resp, matched and ok and self.command == "GET", fault, fix)
            finally:
                up.close()

        def forward_fault(self, n, resp, kind):
            """Forwards resp with a --fault applied when it is eligible (see the usage)."""
            try:
                data = resp.read()
            except (OSError, http.client.HTTPException):
                self.close_connection = True
                self.note(n, "upstream-down", resp.status, 0)
                return
            ok = 200 <= resp.status < 300
            eligible = ok and bool(data)
            if not eligible or not st.take_fault():
                kind = None
            headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP and k.lower() != "content-length"]
            k = min(a.fault_at, len(data) - 1) if data else 0
            if kind == "flip":
                data = data[:k] + bytes([data[k] ^ 0x01]) + data[k + 1:]
            elif kind == "overlong":
                data = data + b"X" * a.fault_at
                fixed = []
                for name, v in headers:
                    if name.lower() == "content-range" and v.startswith("bytes ") and "-" in v:
                        lo, _, rest = v[6:].partition("-")
                        hi, _, total = rest.partition("/")
                        v = "bytes %s-%d/%s" % (lo, int(hi) + a.fault_at, total)
                    fixed.append((name, v))
                headers = fixed
            elif kind == "gzip":
                data = gzip.compress(data)
                headers = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
                headers.append(("Content-Encoding", "gzip"))
            self.send_response_only(resp.status, resp.reason)
            for name, v in headers:
                self.send_header(name, v)
            self.send_header("Content-Length", str(len(data)))
            if kind in ("truncate", "cut"):
                self.send_header("Connection", "close")
            self.end_headers()
            body = data[:k] if kind in ("truncate", "cut", "stall") else data
            sent = self.send_body([body[i:i + CHUNK] for i in range(0, len(body), CHUNK)], False)
            if kind in ("truncate", "cut", "stall"):
                self.close_connection = True
                if kind == "stall":
                    # hold the connection open, sending nothing, until the client gives up on it
                    try:
                        while not select.select([self.connection], [], [], 600)[0] == [] and self.connection.recv(65536):
                            pass
                    except OSError:
                        pass
                elif kind == "cut":
                    try:
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    except OSError:
                        pass
                else:
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            self.note(n, kind + "-injected" if kind else "forwarded", resp.status, sent)

        def forward(self, n, resp, cuttable, fault=None, fix=None):
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
                if fix:
                    v = fix(k, v)
                if v is not None and k.lower() not in HOP and not (data is not None and k.lower() == "content-length"):
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
            self.client_gone = False
            try:
                sent = self.send_body(chunks, chunked)
            except (OSError, http.client.HTTPException):
                # the server died mid-body: so does this response
                self.close_connection = True
                self.note(n, "upstream-down", resp.status, 0)
                return
            promised = resp.getheader("Content-Length") if data is None and self.command != "HEAD" else None
            if promised and promised.isdigit() and sent < int(promised) and not self.client_gone:
                # the server died mid-body with a FIN, not a reset: http.client reads that as the end of the
                # body, and the client would wait for the rest on a connection kept open (until its
                # low-speed limit): close it, as a dying server's own connection would be
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.note(n, "upstream-down", resp.status, sent)
                return
            if cut:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.note(n, "cut-after-%d" % a.cut_after if cut else fault + "-injected" if fault else "forwarded",
                      resp.status, sent)

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
    p.add_argument("--fault", choices=["flip", "truncate", "cut", "stall", "overlong", "gzip", "shift", "nocrange",
                                       "etag", "500", "503", "403"])
    p.add_argument("--fault-every", type=int, default=1)
    p.add_argument("--fault-max", type=int, default=0)
    p.add_argument("--fault-at", type=int, default=1000)
    p.add_argument("--exclude", default="")
    p.add_argument("--max-busy", type=int, default=0)
    p.add_argument("--connect-delay", type=float, default=0.0)
    p.add_argument("--slowdown-fraction", type=float, default=0.0)
    p.add_argument("--slowdown-rate", type=float, default=0.0)
    p.add_argument("--slowdown-burst", type=float, default=0.0)
    p.add_argument("--retry-after", type=int, default=0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--total-rate", type=int, default=0)
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
