"""The PROXY protocol (HAProxy's spec, v1 text and v2 binary): who the client was. Pure.

HAProxy tells the activator the client's address with a v2 header on every
connection it hands over; the activator passes that address on to a
machine whose service asks for ``proxy_proto`` (in the version it asks for),
as HAProxy itself does for machines that were already running.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V2_HEADER = 16
_FAMILIES = {0x11: (4, 4), 0x21: (16, 16)}  # TCP over IPv4, TCP over IPv6: address sizes


class BadHeader(ValueError):
    """Not a PROXY protocol header this side can read."""


@dataclass(frozen=True)
class Addresses:
    """The client's address and the one it connected to; None: a local connection (LOCAL)."""

    source: tuple[str, int] | None
    destination: tuple[str, int] | None


def v2_length(head: bytes) -> int:
    """How many bytes follow the 16-byte v2 header ``head``."""
    if len(head) != V2_HEADER or not head.startswith(V2_SIGNATURE):
        raise BadHeader("no PROXY protocol v2 signature")
    if head[12] >> 4 != 2:
        raise BadHeader(f"PROXY protocol version {head[12] >> 4}, not 2")
    return int(struct.unpack("!H", head[14:16])[0])


def parse_v2(head: bytes, body: bytes) -> Addresses:
    """The addresses a v2 header (``head``, its 16 bytes, then ``body``) carries."""
    v2_length(head)
    command, family = head[12] & 0x0F, head[13]
    if command == 0 or family not in _FAMILIES:  # LOCAL, or not TCP over IP
        return Addresses(None, None)
    size, _ = _FAMILIES[family]
    if len(body) < 2 * size + 4:
        raise BadHeader("PROXY protocol v2 header too short for its addresses")
    source = ipaddress.ip_address(body[:size])
    destination = ipaddress.ip_address(body[size:2 * size])
    sport, dport = struct.unpack("!HH", body[2 * size:2 * size + 4])
    return Addresses((str(source), sport), (str(destination), dport))


def encode(addresses: Addresses, version: int) -> bytes:
    """A header of ``version`` (1 or 2) carrying ``addresses``."""
    src, dst = addresses.source, addresses.destination
    if version == 1:
        if src is None or dst is None:
            return b"PROXY UNKNOWN\r\n"
        family = "TCP6" if ":" in src[0] else "TCP4"
        return f"PROXY {family} {src[0]} {dst[0]} {src[1]} {dst[1]}\r\n".encode()
    if src is None or dst is None:
        return V2_SIGNATURE + bytes([0x20, 0x00]) + struct.pack("!H", 0)
    source, destination = ipaddress.ip_address(src[0]), ipaddress.ip_address(dst[0])
    kind = 0x21 if source.version == 6 else 0x11
    body = source.packed + destination.packed + struct.pack("!HH", src[1], dst[1])
    return V2_SIGNATURE + bytes([0x21, kind]) + struct.pack("!H", len(body)) + body
