"""A small HTTP app for bodega: answers every path, and /healthz for its health check.

Standard library only. ``PORT`` (default 8080) is where it listens; ``GREETING``
is what it says, so a deploy that changes [env] shows in its answers; with
``HEALTHY=false`` its /healthz answers 500 (a version whose health check fails).
"""

from __future__ import annotations

import os
import signal
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 200
        if self.path == "/healthz":
            healthy = os.environ.get("HEALTHY", "true") != "false"
            status, body = (200, b"ok\n") if healthy else (500, b"unhealthy\n")
        else:
            greeting = os.environ.get("GREETING", "hello from bodega")
            machine = os.environ.get("FLY_MACHINE_ID", socket.gethostname())
            body = f"{greeting} ({machine})\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would drown the machine's log


def serve(port: int) -> None:
    """Serve until stopped. bodega stops a machine with SIGINT (its default stop signal)
    or SIGTERM: either is a normal end, said in one line, not a traceback."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    server = ThreadingHTTPServer(("0.0.0.0", port), Hello)
    try:
        print(f"listening on :{port}", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopping", flush=True)
    finally:
        server.server_close()


if __name__ == "__main__":
    serve(int(os.environ.get("PORT", "8080")))
