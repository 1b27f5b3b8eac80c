"""A sealed gossip packet on the wire: AES-256-GCM, with who sent it and when in its header.

    0        1        5         13           21      29      41                  n-16    n
    │ version│ key id │ sender  │ generation │  seq  │ nonce │ ciphertext ...    │ tag   │
      1        4        8         8            8       12                          16

- **version** (1): the format; anything else is not a bodega packet.
- **key id** (4): which installed key opens it (``keyring.py``).
- **sender** (8): a hash of the sender's member name (the name itself rides
  inside, in the message, and must match), so the header has one size and
  names do not travel in the clear.
- **generation**, **seq** (8 + 8): the sender's generation (one more on
  every start, ``statefile.py``) and its packet counter within it, which
  the receiver's replay window checks (``replay.py``).
- **nonce** (12): random per packet, as GCM needs a fresh one per key.

The first 29 bytes are the additional authenticated data: a changed key id,
sender, generation or sequence fails the tag like a changed byte of the
message. Everything here is a pure function of its inputs; ``envelope.py``
keeps the keys, counters and windows.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VERSION = 1
NONCE_BYTES = 12
TAG_BYTES = 16
_HEAD = struct.Struct("!B4s8sQQ")  # version, key id, sender, generation, seq
AAD_BYTES = _HEAD.size  # 29
HEADER_BYTES = AAD_BYTES + NONCE_BYTES  # 41
OVERHEAD = HEADER_BYTES + TAG_BYTES  # 57 bytes of each packet are the envelope's
MAX_COUNTER = 2**64 - 1


class Dropped(Exception):
    """A packet that is not let in; ``reason`` is its label in the bad-packet counter."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(why)
        self.reason = reason


def sender_id(name: str) -> bytes:
    return hashlib.blake2b(name.encode(), digest_size=8, person=b"bodega-gossip").digest()


@dataclass(frozen=True)
class Header:
    key_id: bytes
    sender: bytes
    generation: int
    seq: int
    nonce: bytes

    def aad(self) -> bytes:
        return _HEAD.pack(VERSION, self.key_id, self.sender, self.generation, self.seq)


def seal(aead: AESGCM, header: Header, payload: bytes) -> bytes:
    """The packet carrying ``payload`` under ``header``, sealed with ``aead`` (the key of
    ``header.key_id``)."""
    aad = header.aad()
    return aad + header.nonce + aead.encrypt(header.nonce, payload, aad)


def read_header(packet: bytes) -> Header:
    """The header of what claims to be a sealed packet; nothing in it is proven yet."""
    if len(packet) < OVERHEAD:
        raise Dropped("auth", "shorter than a sealed packet")
    version, key_id, sender, generation, seq = _HEAD.unpack_from(packet)
    if version != VERSION:
        raise Dropped("auth", f"not a sealed packet (version {version})")
    return Header(key_id, sender, generation, seq, packet[AAD_BYTES:HEADER_BYTES])


def open_sealed(aead: AESGCM, header: Header, packet: bytes) -> bytes:
    """The payload of ``packet`` if its tag holds under ``aead`` and its header."""
    try:
        return aead.decrypt(header.nonce, packet[HEADER_BYTES:], packet[:AAD_BYTES])
    except InvalidTag:
        raise Dropped("auth", "bad tag: tampered, or sealed with another key") from None
