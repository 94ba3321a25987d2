#!/usr/bin/env python3
"""An HTTP server that misbehaves on request, for the controller's HTTP
client (src/provider/http/http.h): the transport under the fake GCE and EC2
endpoints, exercised alone.  Python standard library only.  Binds
127.0.0.1 on an ephemeral port and prints the port on its first stdout
line; serves each connection on its own thread (hundreds at once).

Any path answers 200 with JSON {"method", "path", "n" (the request's
number, from 1), "body_len"}, after these query parameters take effect:
  delay=S    sleep S seconds first
  size=N     answer N bytes of 'x' instead of the JSON
Faults queued by the control endpoint take precedence, first in first
out per path prefix: a request whose path starts with a fault's prefix
consumes one of its count and gets its status (with a JSON error body as
the clouds send one), its Retry-After header, after its delay; a status
of 0 closes the connection without an answer.
Control:
  POST /_fault   {"prefix": "/x", "status": 503, "count": 2,
                  "retry_after": 1 (optional), "delay": 0 (optional)}
  GET  /_log     {"requests": [{"method", "path", "n", "body_len",
                                "request_id" (the X-Request-Id header)}]}
                 (control requests are not logged)
"""
import json, sys, threading, time, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
faults = []      # [{"prefix", "status", "count", "retry_after", "delay"}]
requests = []    # the log
counter = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if url.path == "/_fault" and self.command == "POST":
            f = json.loads(body)
            with lock:
                faults.append({"prefix": f["prefix"], "status": int(f["status"]),
                               "count": int(f.get("count", 1)),
                               "retry_after": f.get("retry_after"),
                               "delay": float(f.get("delay", 0))})
            return self.reply(200, {"ok": True})
        if url.path == "/_log":
            with lock:
                return self.reply(200, {"requests": list(requests)})
        q = urllib.parse.parse_qs(url.query)
        with lock:
            counter[0] += 1
            n_req = counter[0]
            requests.append({"method": self.command, "path": url.path, "n": n_req,
                             "body_len": len(body),
                             "request_id": self.headers.get("X-Request-Id")})
            fault = None
            for f in faults:
                if url.path.startswith(f["prefix"]) and f["count"] > 0:
                    f["count"] -= 1
                    fault = dict(f)
                    break
        if fault:
            time.sleep(fault["delay"])
            if fault["status"] == 0:
                self.close_connection = True
                return
            headers = []
            if fault["retry_after"] is not None:
                headers.append(("Retry-After", str(fault["retry_after"])))
            return self.reply(fault["status"], {"error": {"code": fault["status"],
                              "message": "injected by faults.py"}}, headers)
        if "delay" in q:
            time.sleep(float(q["delay"][0]))
        if "size" in q:
            return self.reply(200, b"x" * int(q["size"][0]))
        self.reply(200, {"method": self.command, "path": url.path, "n": n_req,
                         "body_len": len(body)})

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512


srv = Server(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
