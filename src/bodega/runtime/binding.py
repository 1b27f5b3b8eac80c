"""The error every listener raises when it cannot bind: it names the address it wanted.

A bare ``[Errno 98] Address already in use`` says neither which of a daemon's
listeners failed nor which flag moves it. ``BindError`` keeps the address and
the transport, so the command line that chose the address can add its flag.
"""

from __future__ import annotations

import errno
import os


class BindError(OSError):
    def __init__(self, cause: OSError, host: str, port: int, transport: str) -> None:
        reason = os.strerror(cause.errno).lower() if cause.errno else str(cause)
        if cause.errno == errno.EADDRINUSE:
            reason = "address already in use"
        super().__init__(cause.errno, reason)
        self.host = host
        self.port = port
        self.transport = transport  # "TCP" or "UDP"
        self.reason = reason

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"cannot listen on {self.address} ({self.transport}): {self.reason}"
