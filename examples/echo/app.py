"""An app with a web page over HTTPS and a TCP service: a line echo that greets the client.

Standard library only. ``PORT`` (default 8080) serves HTTP (the proxy ends TLS
in front of it and tells it so in ``X-Forwarded-Proto``); ``ECHO_PORT``
(default 7000) is a TCP echo that expects a PROXY protocol v1 line first (its
service has the ``proxy_proto`` handler), greets the client by the address in
it, then sends back every line it gets.
"""

from __future__ import annotations

import os
import signal
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        proto = self.headers.get("X-Forwarded-Proto", "http")
        body = f"echo's page, reached over {proto}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        header = self.rfile.readline().decode(errors="replace").split()
        # "PROXY TCP4 <client> <proxy> <client port> <proxy port>", sent by the proxy
        client = header[2] if len(header) >= 6 and header[0] == "PROXY" else "someone"
        self.wfile.write(f"hello {client}\n".encode())
        for line in self.rfile:
            self.wfile.write(line)


class EchoServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main() -> None:
    """Serve until stopped (SIGINT, bodega's default stop signal, or SIGTERM): one line."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    web = ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT", "8080"))), Page)
    echo = EchoServer(("0.0.0.0", int(os.environ.get("ECHO_PORT", "7000"))), Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    try:  # a stop may come as soon as it says it listens
        print(f"listening on {web.server_address[1]} (http) and {echo.server_address[1]} "
              "(echo)", flush=True)
        web.serve_forever()
    except KeyboardInterrupt:
        print("stopping", flush=True)
    finally:
        echo.shutdown()
        web.server_close()
        echo.server_close()


if __name__ == "__main__":
    main()
