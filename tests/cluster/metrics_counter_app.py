"""A tiny app with a [metrics] endpoint: / counts requests, :9091/metrics shows the count."""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERVED = [0]
METRICS_PORT = int(os.environ.get("METRICS_PORT", "9091"))


class App(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.connection.getsockname()[1] == METRICS_PORT:
            if self.path != "/metrics":
                self.send_error(404)
                return
            # An org label of its own: the store keeps the broker's, not this one.
            body = ("# TYPE demo_requests_total counter\n"
                    f'demo_requests_total{{org="other"}} {SERVED[0]}\n').encode()
        else:
            SERVED[0] += 1
            body = b"counted\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    metrics = ThreadingHTTPServer(("0.0.0.0", METRICS_PORT), App)
    threading.Thread(target=metrics.serve_forever, daemon=True).start()
    ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT", "8080"))), App).serve_forever()


if __name__ == "__main__":
    main()
