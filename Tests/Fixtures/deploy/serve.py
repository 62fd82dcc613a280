#!/usr/bin/env python3
"""A file server on 127.0.0.1 for the deployment tests, with faults on demand.

    serve.py ROOT LOG

Prints "port N" once listening. Serves ROOT; appends each request's path to LOG. Under a
first path segment of /short/, /stall/ or /wrong/, compiled artifacts and archives (never
manifests) are served with a fault:
  /short/...  the full Content-Length, half the bytes, then the connection closes;
  /stall/...  the full Content-Length, half the bytes, then nothing for 60 s;
  /wrong/...  the full length with one byte changed.
"""
import http.server
import os
import sys
import threading
import time

ROOT, LOG = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with LOCK, open(LOG, "a") as f:
            f.write(self.path + "\n")
        parts = self.path.lstrip("/").split("/")
        fault = parts[0] if parts[0] in ("short", "stall", "wrong") else None
        rel = "/".join(parts[1:] if fault else parts)
        path = os.path.realpath(os.path.join(ROOT, rel))
        if not path.startswith(os.path.realpath(ROOT) + os.sep) or not os.path.isfile(path):
            body = b"not found\n"
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with open(path, "rb") as f:
            data = bytearray(f.read())
        if not (path.endswith(".compiled") or path.endswith(".kilnarchive")):
            fault = None
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if fault == "wrong":
            data[len(data) // 2] ^= 0x5A
        if fault in ("short", "stall"):
            self.wfile.write(bytes(data[: len(data) // 2]))
            self.wfile.flush()
            if fault == "stall":
                time.sleep(60)
            self.close_connection = True
            return
        self.wfile.write(bytes(data))


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("port", server.server_address[1], flush=True)
server.serve_forever()
