"""The TLS side of an internal listener: refused handshakes counted, each request's caller known.

uvicorn serves with the component's server context (the event loop's own
TLS transport runs the handshake, on asyncio's loop and on uvloop alike).
Two hooks make it ours:

- the context's ``sslobject_class`` is a subclass of ``ssl.SSLObject`` whose
  ``do_handshake`` counts a failed handshake by reason
  (``InternalTls.refused``) before the loop closes the connection: no
  certificate, one from another CA, an expired one, plain HTTP;
- uvicorn's HTTP protocol is wrapped by ``gate_protocol``: when a connection
  is handed over (its handshake done), the peer's certificate and identity
  are put where every request of the connection finds them,
  ``request.scope["state"][PEER]`` (uvicorn copies its protocol's
  ``app_state`` into each request's scope), and the connection goes on with
  uvicorn's protocol alone.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from bodega.runtime.tls.contexts import InternalTls, refusal_reason

log = logging.getLogger("bodega.tls")

PEER = "bodega.peer"  # the caller's Peer (contexts.py), in each request's scope["state"]


def counting_server_context(tls: InternalTls) -> ssl.SSLContext:
    """``tls.server``, its failed handshakes counted by reason."""

    class CountedHandshakes(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise  # not a failure: the handshake waits for the peer's next flight
            except ssl.SSLError as exc:
                reason = refusal_reason(exc)
                tls.refused(reason)
                log.debug("refused a TLS handshake: %s (%s)", reason, exc)
                raise

    tls.server.sslobject_class = CountedHandshakes
    return tls.server


class _Gate(asyncio.Protocol):
    """Receives a connection once its handshake is done, notes who is calling, and hands
    the connection to uvicorn's own protocol."""

    inner_class: type[asyncio.Protocol]

    def __init__(self, **kwargs: Any) -> None:
        self._state: dict[str, object] = dict(kwargs.get("app_state") or {})
        kwargs["app_state"] = self._state  # the dict its requests' scope["state"] copies
        self._inner = self.inner_class(**kwargs)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        self._state[PEER] = InternalTls.peer(der) if der else None
        # From here on every event of the connection goes straight to uvicorn's protocol.
        transport.set_protocol(self._inner)
        self._inner.connection_made(transport)


def gate_protocol(inner: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """A protocol class for uvicorn's ``http`` setting: ``inner``, told who calls."""
    return type("TlsGate", (_Gate,), {"inner_class": inner})
