"""The TLS side of an internal listener: refused handshakes counted, each request's caller known.

uvicorn serves with the component's server context (the event loop's own
TLS transport runs the handshake, on asyncio's loop and on uvloop alike).
Two hooks make it ours:

- the context's ``sslobject_class`` is a subclass of ``ssl.SSLObject`` whose
  ``do_handshake`` counts a failed handshake by reason
  (``InternalTls.refused``) before the loop closes the connection: no
  certificate, one from another CA, an expired one, plain HTTP;
- when a connection is handed to uvicorn's HTTP protocol (its handshake
  done; ``bodega.runtime.serve`` does the handing over), ``note_peer`` puts
  the peer's certificate and identity where every request of the connection
  finds them, ``request.scope["state"][PEER]`` (uvicorn copies its
  protocol's ``app_state`` into each request's scope).
"""

from __future__ import annotations

import asyncio
import logging
import ssl

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


def note_peer(transport: asyncio.BaseTransport, state: dict[str, object]) -> None:
    """Put the caller's certificate and identity where the connection's requests find
    them (``state`` is the dict each request's ``scope["state"]`` copies)."""
    ssl_object = transport.get_extra_info("ssl_object")
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    state[PEER] = InternalTls.peer(der) if der else None
