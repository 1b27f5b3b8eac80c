"""A sealed gossip packet on the wire: AES-256-GCM, with who sent it and when in its header.

    0        1        5        13           21     29      37                   n-16    n
    │ version│ key id │ sender │ generation │ salt │  seq  │ ciphertext ...     │  tag  │
      1        4        8        8            8      8                            16

- **version** (1): the format; anything else is not a bodega packet.
- **key id** (4): which installed key opens it (``keyring.py``).
- **sender** (8): a hash of the sender's member name (the name itself rides
  inside, in the message, and must match), so the header has one size and
  names do not travel in the clear.
- **generation**, **salt**, **seq** (8 + 8 + 8): the sender's generation
  (one more on every start, ``statefile.py``), 8 random bytes drawn once per
  process, and its packet counter, which the receiver's replay window checks
  (``replay.py``).

The whole header is the additional authenticated data. GCM must never see
one nonce twice under one key, so nonces are not left to chance: each
sender *life* (sender, generation, salt) seals under a key of its own,
``HMAC-SHA256(cluster key, "bodega/gossip/sender" ‖ sender ‖ generation ‖ salt)``,
and the nonce is its sequence number, which only rises within a life. Two
lives share a key only if they share the generation and draw the same 64
random bits; random 96-bit nonces under one cluster key instead would
collide with even odds after 2⁴⁸ packets, and NIST caps them at 2³² per key.
Everything here is a pure function of its inputs; ``envelope.py`` keeps the
keys, the counters and the windows.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VERSION = 1
SALT_BYTES = 8
TAG_BYTES = 16
_HEAD = struct.Struct("!B4s8sQ8sQ")  # version, key id, sender, generation, salt, seq
HEADER_BYTES = _HEAD.size  # 37
OVERHEAD = HEADER_BYTES + TAG_BYTES  # 53 bytes of each packet are the envelope's
LIFE = slice(5, 29)  # sender, generation and salt: one sender life
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
    salt: bytes
    seq: int

    def packed(self) -> bytes:
        return _HEAD.pack(VERSION, self.key_id, self.sender, self.generation, self.salt,
                          self.seq)

    @property
    def life(self) -> bytes:
        """What names the sender life this packet belongs to (and its sealing key)."""
        return self.packed()[LIFE]


def life_key(cluster_key: bytes, life: bytes) -> AESGCM:
    """The AES-256-GCM key one sender life seals with."""
    return AESGCM(hmac.new(cluster_key, b"bodega/gossip/sender\0" + life,
                           hashlib.sha256).digest())


def nonce(seq: int) -> bytes:
    return seq.to_bytes(12, "big")


def seal(aead: AESGCM, header: Header, payload: bytes) -> bytes:
    """The packet carrying ``payload`` under ``header``; ``aead`` is the life's key."""
    aad = header.packed()
    return aad + aead.encrypt(nonce(header.seq), payload, aad)


def read_header(packet: bytes) -> Header:
    """The header of what claims to be a sealed packet; nothing in it is proven yet."""
    if len(packet) < OVERHEAD:
        raise Dropped("auth", "shorter than a sealed packet")
    version, key_id, sender, generation, salt, seq = _HEAD.unpack_from(packet)
    if version != VERSION:
        raise Dropped("auth", f"not a sealed packet (version {version})")
    return Header(key_id, sender, generation, salt, seq)


def open_sealed(aead: AESGCM, header: Header, packet: bytes) -> bytes:
    """The payload of ``packet`` if its tag holds under the life key ``aead`` and its header."""
    try:
        return aead.decrypt(nonce(header.seq), packet[HEADER_BYTES:], packet[:HEADER_BYTES])
    except InvalidTag:
        raise Dropped("auth", "bad tag: tampered, or sealed with another key") from None
