#!/bin/bash
# The reference solution.
cat > /app/kv.py <<'END'
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DATA = {}


class Handler(BaseHTTPRequestHandler):
    def do_PUT(self):
        n = int(self.headers.get("Content-Length", 0))
        DATA[self.path] = self.rfile.read(n)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if self.path not in DATA:
            self.send_error(404)
            return
        body = DATA[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
END
