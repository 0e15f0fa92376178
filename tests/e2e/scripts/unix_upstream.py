#!/usr/bin/env python3
"""A counting HTTP/1.1 service on a unix socket, for the routed-upstreams end-to-end tests.

It answers every request on the unix socket with a JSON body naming itself, and counts what it
executed, in total and per Idempotency-Key value. The counters are read over a TCP control port,
with the same endpoints as idem-test-upstream (so the tests' helpers read both):
    GET /__count          -> {"total": n}
    GET /__count?key=K    -> {"count": n}
Usage: unix_upstream.py --socket PATH. Prints "unix PATH", then "listening 127.0.0.1:PORT" once
both are bound; SIGTERM ends it.
"""
import argparse
import json
import os
import signal
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

lock = threading.Lock()
counts = {}
total = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the tests read the counters, not a log
        pass

    def address_string(self):  # a unix peer has no address
        return "unix"

    def reply(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def serve(self):
        global total
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlparse(self.path)
        if url.path == "/__count" and self.server.control:
            key = parse_qs(url.query).get("key")
            with lock:
                self.reply({"count": counts.get(key[0], 0)} if key else {"total": total})
            return
        key = self.headers.get("Idempotency-Key")
        with lock:
            total += 1
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
            execution = total
        self.reply({"upstream": "unix", "path": self.path, "host": self.headers.get("Host"),
                    "execution": execution, "body_bytes": len(body)})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = serve


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    control = False


class ControlServer(ThreadingHTTPServer):
    daemon_threads = True
    control = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    args = parser.parse_args()
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    service = UnixServer(args.socket, Handler)
    control = ControlServer(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threading.Thread(target=service.serve_forever, daemon=True).start()
    print(f"unix {args.socket}", flush=True)
    print(f"listening 127.0.0.1:{control.server_address[1]}", flush=True)
    control.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
