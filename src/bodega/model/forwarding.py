"""A port forward's rules (``bodega port-forward``): its ports, and what its relay does.

A forward carries one TCP connection to a port of a machine: the CLI accepts it
on the user's host, and its bytes travel as WebSocket binary frames to the
broker, from the broker to the machine's worker, and from the worker over TCP
to the machine's port, then back the same way (docs/cli.md, "port-forward").
Every hop runs the same relay between its two ends (``wire/transport/forward_link.py``);
what each thing an end reports means for it is decided here, from plain values:

- bytes (a binary frame, a chunk read from a stream) are handed to the other end;
- an empty frame carries nothing: reading goes on;
- a text frame is refused (a forward carries bytes only);
- a close, an end of stream or a failure finishes the relay: the first end to
  finish finishes both, and the other is told how (``closing``). A clean end
  (a close with 1000 or no code, an end of stream) stays clean hop by hop; any
  other carries its reason on, so the CLI can say in one line why a
  connection ended (the machine's connection reset, the worker went away).

Half-closes are not carried: either side closing ends the connection both ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bodega.model.errors import BadRequest

NORMAL = 1000  # a clean close: the side that ended simply closed
UNSUPPORTED = 1003  # a text frame: a forward carries bytes only
NO_STATUS = 1005  # a close frame without a code, counted as clean; never sent
ABNORMAL = 1006  # the link was lost without a close frame; never sent
FAILED = 1011  # the far side failed: its connection refused, reset, or a read failed
TLS_FAILED = 1015  # never sent either
UNSENDABLE = frozenset({NO_STATUS, ABNORMAL, TLS_FAILED})  # only ever reported, by RFC 6455
CLEAN = frozenset({NORMAL, NO_STATUS})
MAX_REASON = 123  # bytes of UTF-8 a close frame's reason may hold
CHUNK = 64 * 1024  # a read from a stream, and so the largest frame a relay sends
MAX_FRAME = 1 << 20  # the largest frame a relay accepts (a peer's may differ from CHUNK)

PORT_RANGE = "1 to 65535"


class Frame(Enum):
    """What kind of message a WebSocket end received."""

    BYTES = "bytes"
    TEXT = "text"


@dataclass(frozen=True)
class Deliver:
    """Hand these bytes to the other end."""

    data: bytes


@dataclass(frozen=True)
class Finish:
    """The relay is over: ``code`` and ``reason`` say how (a WebSocket close's terms)."""

    code: int = NORMAL
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.code not in CLEAN


Step = Deliver | Finish | None  # None: nothing to hand on, read on


def on_frame(kind: Frame, data: bytes = b"", *, peer: str = "the other side") -> Step:
    """What a message from ``peer`` means for the relay."""
    if kind is Frame.TEXT:
        return Finish(UNSUPPORTED, f"{peer} sent a text frame; a forward carries bytes only")
    return Deliver(data) if data else None


def on_close(code: int | None, reason: str = "", *, peer: str = "the other side") -> Finish:
    """What ``peer`` closing its WebSocket means (``code`` None: no close frame came)."""
    if code is None:
        code = ABNORMAL
    if code in CLEAN:
        return Finish(NORMAL, reason)
    if reason:
        return Finish(code, reason)
    if code == ABNORMAL:
        return Finish(code, f"the link to {peer} was lost")
    return Finish(code, f"{peer} closed the link (code {code})")


def on_chunk(chunk: bytes) -> Deliver | Finish:
    """What a read from a stream means: bytes to hand on, or (none) its end."""
    return Deliver(chunk) if chunk else Finish(NORMAL)


def on_failure(what: str, error: str) -> Finish:
    """A stream or a link that failed (``what``: which, ``error``: why)."""
    return Finish(FAILED, f"{what}: {error}" if error else what)


def closing(finish: Finish) -> tuple[int, str]:
    """The close code and reason to send the other end: a clean end stays clean, and a code
    an end may not send (a lost link's 1006) becomes 1011, the reason kept."""
    if not finish.failed:
        return NORMAL, clip_reason(finish.reason)
    code = FAILED if finish.code in UNSENDABLE or not 1000 <= finish.code <= 4999 \
        else finish.code
    return code, clip_reason(finish.reason)


def clip_reason(reason: str) -> str:
    """``reason`` cut to what a close frame holds, never inside a character."""
    raw = reason.encode()
    if len(raw) <= MAX_REASON:
        return reason
    return raw[:MAX_REASON - 3].decode(errors="ignore") + "..."


def port_number(value: str | None, name: str = "port") -> int:
    """A forward's port from a request's query (``?port=5432``); 400 if it is not one."""
    if value is None or not (value.isascii() and value.isdigit() and len(value) <= 5) \
            or not 1 <= int(value) <= 65535:
        shown = "nothing" if value is None else repr(value[:20] + ("..." if value[20:] else ""))
        raise BadRequest(f"invalid_argument: {name} must be a number from {PORT_RANGE}, "
                         f"not {shown}")
    return int(value)
