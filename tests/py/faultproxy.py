"""faultproxy — a fault-injecting HTTP proxy in front of a real MLflow server,
for the REST sink's fault tests (loopback only).

Why: the failure policy (docs/design.md §6) is about what the network does —
refused connections, 5xx, 429 with Retry-After, a server that accepts and
never answers, 4xx — and a real ``mlflow server`` does none of that on
demand.  The proxy forwards every request to the server unless a fault says
otherwise, and records what it saw (method, path, status, whether an
Authorization header came, the body), so a test can tell "retried" from "not
retried" and check what landed.

Faults (``set_fault``):
  pass                    forward (default)
  status                  answer ``code`` to the next ``count`` matching requests
                          (with MLflow's error JSON, and ``retry_after`` as the
                          Retry-After header when given), then pass
  hang                    read the request and never answer (until ``set_fault``
                          changes the mode or the proxy stops)
  slow                    wait ``delay`` seconds, then forward, for the next
                          ``count`` matching requests, then pass
  reply                   answer ``code`` with ``body`` (bytes), or with ``size``
                          bytes of filler, to the next ``count`` matching
                          requests, then pass: oversized or malformed replies
  reset                   read the next ``count`` matching requests and reset the
                          connection (RST, no reply), then pass
  stored_reset            forward the next matching request to the server (it is
                          stored) and reset the connection instead of replying,
                          then answer the following ``count`` matching requests
                          ``code`` with ``body`` (what a store says to a retry
                          that meets the first write), then pass
``require = (name, value)`` makes it a gateway that asks for a header: a request
without it is answered 401 (UNAUTHENTICATED), whatever the fault.
``down()`` closes the listening socket (connections are refused, kept-alive
ones are cut) and ``up()`` opens it again on the same port.  ``match`` limits
a fault to paths that contain it (e.g. "runs/log-batch").  ``prefix="/mlflow"``
serves the server under a path prefix, as a reverse proxy would.

It also works as a forward proxy: a request in absolute form
("POST http://host:port/api/... HTTP/1.1", what libcurl sends through
http_proxy) is forwarded to the same upstream and recorded with proxied=True.
With ``tls=(certfile, keyfile, client_ca)`` it serves HTTPS (and requires a
client certificate signed by client_ca when that is given).

Run standalone for manual checks:
    python3 tests/py/faultproxy.py --upstream http://127.0.0.1:5000 --port 5001
"""
import argparse
import http.client
import json
import socket
import ssl
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOPBACK = "127.0.0.1"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def handle_error(self, request, client_address):
        pass  # a client that gave up (aborted, timed out) is what the tests do


class Request:
    __slots__ = ("t", "method", "path", "status", "auth", "proxied", "body", "fault",
                 "reply_lost")

    def __init__(self, method, path, auth, proxied, body):
        self.t = time.time()
        self.method, self.path, self.auth = method, path, auth
        self.proxied, self.body = proxied, body
        self.status = None
        self.fault = None
        self.reply_lost = False  # the server answered, the client never got it (down())

    def json(self):
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            return None

    def __repr__(self):
        return f"<{self.method} {self.path} -> {self.status} {self.fault or ''}>"


class FaultProxy:
    def __init__(self, upstream, port=0, tls=None, prefix=""):
        u = urllib.parse.urlsplit(upstream)
        self.prefix = prefix.rstrip("/")  # served under /prefix, like a reverse proxy
        assert u.scheme == "http" and u.hostname in (LOOPBACK, "localhost"), "loopback only"
        self.up_host, self.up_port = u.hostname, u.port or 80
        self.tls = tls
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.requests = []
        self.mode, self.match, self.code, self.count, self.retry_after, self.delay = (
            "pass", None, 0, 0, None, 0.0)
        self.body, self.size = b"", 0
        self.require = None  # (name, value): a gateway's header, else 401
        self.generation = 0
        self._conns = set()
        self._server = None
        self._thread = None
        self.port = port or _free_port()
        self.up()

    # ---- control -----------------------------------------------------------
    @property
    def uri(self):
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}{self.prefix}"

    def set_fault(self, mode="pass", match=None, code=500, count=1, retry_after=None, delay=0.0,
                  body=b"", size=0):
        with self.cond:
            self.mode, self.match, self.code, self.count = mode, match, code, count
            self.body, self.size = body, size
            self.retry_after, self.delay = retry_after, delay
            self.generation += 1
            self.cond.notify_all()  # releases hanging requests

    def up(self):
        if self._server:
            return
        srv = None
        for _ in range(100):  # the port may linger for a moment after down()
            try:
                srv = _Server((LOOPBACK, self.port), self._handler())
                break
            except OSError:
                time.sleep(0.05)
        if srv is None:
            raise RuntimeError(f"faultproxy: cannot bind {LOOPBACK}:{self.port}")
        if self.tls:
            cert, key, client_ca = self.tls
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            if client_ca:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(client_ca)
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        self._server = srv
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def down(self):
        """Refuse connections: the listening socket goes away, and so do the
        connections already open (a server that went down)."""
        srv, self._server = self._server, None
        if srv:
            srv.shutdown()
            srv.server_close()
            self._thread.join(5)
        with self.cond:
            conns = list(self._conns)
            self.generation += 1
            self.cond.notify_all()
        for c in conns:  # kept-alive connections die with the server
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.set_fault("pass")
        self.down()

    def log(self, match=None):
        with self.lock:
            return [r for r in self.requests if match is None or match in r.path]

    def wait_for(self, pred, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return True
            time.sleep(0.05)
        return False

    # ---- the handler -------------------------------------------------------
    def _handler(proxy):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def setup(self):
                super().setup()
                with proxy.lock:
                    proxy._conns.add(self.connection)

            def finish(self):
                with proxy.lock:
                    proxy._conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _do(self):
                path, proxied = self.path, False
                if path.startswith("http://") or path.startswith("https://"):
                    u = urllib.parse.urlsplit(path)
                    path = u.path + ("?" + u.query if u.query else "")
                    proxied = True
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                req = Request(self.command, path, self.headers.get("Authorization"), proxied, body)
                need = proxy.require
                if need and self.headers.get(need[0]) != need[1]:
                    with proxy.cond:
                        proxy.requests.append(req)
                    req.fault, req.status = "unauthenticated", 401
                    out = json.dumps({"error_code": "UNAUTHENTICATED",
                                      "message": f"faultproxy: no {need[0]} header"}).encode()
                    self.send_response(401)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                with proxy.cond:
                    proxy.requests.append(req)
                    mode, match = proxy.mode, proxy.match
                    applies = match is None or match in path
                    gen = proxy.generation
                    if applies and mode == "stored_reset":
                        # the next matching requests get the follow-up reply
                        proxy.mode = "reply"
                        reply_body = proxy.body
                    elif applies and mode in ("status", "reply", "reset", "slow") and \
                            proxy.count > 0:
                        proxy.count -= 1
                        code, retry_after = proxy.code, proxy.retry_after
                        reply_body, reply_size = proxy.body, proxy.size
                        if proxy.count == 0:
                            proxy.mode = "pass"
                    elif applies and mode in ("status", "reply", "reset", "slow"):
                        mode = "pass"
                    delay = proxy.delay
                if applies and mode == "stored_reset":
                    req.fault = "stored_reset"
                    self._forward(req, path, body, reply=False)
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                if applies and mode == "reset":
                    req.fault = "reset"
                    # linger 0: close() sends RST, the client sees a reset
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                if applies and mode == "hang":
                    req.fault = "hang"
                    with proxy.cond:
                        while proxy.generation == gen:
                            proxy.cond.wait(1)
                    self.close_connection = True
                    return  # never answered: the client gives up or aborts
                if applies and mode == "status":
                    req.fault = f"status {code}"
                    req.status = code
                    out = json.dumps({"error_code": _error_code(code),
                                      "message": f"faultproxy: injected HTTP {code}"}).encode()
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    if retry_after is not None:
                        self.send_header("Retry-After", str(retry_after))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                if applies and mode == "reply":
                    req.fault = f"reply {code}"
                    req.status = code
                    size = len(reply_body) if reply_body else reply_size
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    try:
                        if reply_body:
                            self.wfile.write(reply_body)
                        else:  # filler in 1 MiB writes: a client may stop reading
                            chunk = b" " * (1 << 20)
                            for off in range(0, size, len(chunk)):
                                self.wfile.write(chunk[:min(len(chunk), size - off)])
                    except OSError:
                        self.close_connection = True
                    return
                if applies and mode == "slow":
                    req.fault = f"slow {delay}"
                    time.sleep(delay)
                if proxy.prefix:
                    if not path.startswith(proxy.prefix + "/"):
                        req.status = 404
                        self.send_response(404)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    path = path[len(proxy.prefix):]
                self._forward(req, path, body)

            def _forward(self, req, path, body, reply=True):
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection", "proxy-connection",
                                                "keep-alive", "transfer-encoding")}
                try:
                    c = http.client.HTTPConnection(proxy.up_host, proxy.up_port, timeout=120)
                    c.request(self.command, path, body=body or None, headers=headers)
                    r = c.getresponse()
                    data = r.read()
                    status, rh = r.status, r.getheaders()
                    c.close()
                except OSError as e:
                    status, data, rh = 502, json.dumps({"error_code": "BAD_GATEWAY",
                                                        "message": str(e)}).encode(), []
                req.status = status
                if not reply:
                    return
                try:
                    self.send_response(status)
                    for k, v in rh:
                        if k.lower() not in ("content-length", "connection",
                                             "transfer-encoding", "keep-alive", "server", "date"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:
                    # down() shut the connection while the server applied the
                    # request: the client sees a reset and sends it again
                    req.reply_lost = True
                    raise

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _do

        return Handler


def _error_code(code):
    return {400: "INVALID_PARAMETER_VALUE", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
            404: "RESOURCE_DOES_NOT_EXIST", 429: "REQUEST_LIMIT_EXCEEDED"}.get(
        code, "INTERNAL_ERROR" if code >= 500 else "BAD_REQUEST")


def _free_port():
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--mode", default="pass", choices=["pass", "status", "hang", "slow", "down"])
    ap.add_argument("--code", type=int, default=500)
    ap.add_argument("--count", type=int, default=1 << 30)
    ap.add_argument("--retry-after")
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--match")
    a = ap.parse_args()
    p = FaultProxy(a.upstream, a.port)
    if a.mode == "down":
        p.down()
    else:
        p.set_fault(a.mode, a.match, a.code, a.count, a.retry_after, a.delay)
    print(f"faultproxy on {p.uri} -> {a.upstream} ({a.mode})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        p.close()


if __name__ == "__main__":
    main()
