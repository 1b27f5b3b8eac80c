"""Which flag moves a listener that could not bind: the one line a taken port deserves.

A daemon binds several sockets (HTTP, gossip, admin); the error from the one
that failed names its address (``BindError``), and the command that chose the
addresses adds the flag that moves it, e.g. ``cannot listen on
127.0.0.1:4280 (TCP): address already in use; move it with --listen``.
"""

from __future__ import annotations

import ast
import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from bodega.runtime.binding import BindError

BIND_ERRNOS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)
# asyncio (and uvloop) word a failed bind of start_server this way.
ASYNCIO_BIND = re.compile(r"error while attempting to bind on address (\(.*?\)):")


@dataclass(frozen=True)
class Listener:
    flag: str  # e.g. "--gossip-listen"
    transport: str  # "TCP" or "UDP"
    port: int  # as asked for (0: any)


def flag_hint(error: BindError, listeners: tuple[Listener, ...]) -> str:
    """The flag(s) that move the listener ``error`` is about."""
    same = [li for li in listeners if li.transport == error.transport]
    exact = [li for li in same if li.port == error.port]
    chosen = exact or same or list(listeners)
    flags = " or ".join(dict.fromkeys(li.flag for li in chosen))
    return f"move it with {flags}" if flags else ""


def as_bind_error(exc: OSError) -> BindError | None:
    """``exc`` as a ``BindError``, when it is one or asyncio's words for one."""
    if isinstance(exc, BindError):
        return exc
    if exc.errno not in BIND_ERRNOS:
        return None
    found = ASYNCIO_BIND.search(str(exc))
    if found is None:
        return None
    try:
        address = ast.literal_eval(found.group(1))
        host, port = str(address[0]), int(address[1])
    except (ValueError, SyntaxError, IndexError, TypeError):
        return None
    return BindError(exc, host, port, "TCP")


@contextmanager
def listening(*listeners: Listener) -> Iterator[None]:
    """Turn a failed bind inside into one line naming the address and its flag."""
    try:
        yield
    except OSError as exc:
        error = as_bind_error(exc)
        if error is None:
            raise
        hint = flag_hint(error, listeners)
        raise ValueError(f"{error}; {hint}" if hint else str(error)) from None
