#!/bin/bash
# The reference solution.
cat > /app/echo.py <<'END'
import os
import socketserver


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line.upper())


socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
END
