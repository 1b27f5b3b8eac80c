"""The protections a gossip packet can have, to price the sealing against (benchmarks only).

``sealed`` is what bodega runs (``SealedEnvelope``: AES-256-GCM, replay
windows); ``hmac`` is what it ran before (an HMAC-SHA256 tag truncated to 16
bytes, no replay window, nothing encrypted); ``none`` is no protection at all.
All three plug into ``Membership``'s envelope seam, so a benchmark runs the
same nodes with each and the difference is the envelope alone.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time

from bodega.registry.sealing.core.envelope import Envelope, Opened, SealedEnvelope
from bodega.registry.sealing.core.keyring import Keyring
from bodega.registry.sealing.core.seal import Dropped

MODES = ("none", "hmac", "sealed")
TAG = 16


class PlainEnvelope:
    overhead = 0

    def seal(self, payload: bytes, generation: int) -> bytes:
        return payload

    def open(self, packet: bytes) -> Opened:
        return Opened(packet)

    def accept(self, opened: Opened, sender: str) -> None:
        pass

    def set_keyring(self, keyring: Keyring) -> None:
        pass


class HmacEnvelope(PlainEnvelope):
    overhead = TAG

    def __init__(self, keyring: Keyring) -> None:
        self._key = hmac.new(keyring.primary_key.secret, b"bodega/gossip", hashlib.sha256).digest()

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:TAG]

    def seal(self, payload: bytes, generation: int) -> bytes:
        return self._tag(payload) + payload

    def open(self, packet: bytes) -> Opened:
        if not hmac.compare_digest(packet[:TAG], self._tag(packet[TAG:])):
            raise Dropped("auth", "bad tag")
        return Opened(packet[TAG:])


def envelope(mode: str, keyring: Keyring, name: str) -> Envelope:
    if mode == "none":
        return PlainEnvelope()
    if mode == "hmac":
        return HmacEnvelope(keyring)
    return SealedEnvelope(keyring, name, first_seq=time.time_ns(), salts=os.urandom)


def per_packet_us(mode: str, keyring: Keyring, size: int, count: int = 20_000) -> float:
    """Microseconds to seal and open one ``size``-byte payload (sender and receiver)."""
    sender, receiver = envelope(mode, keyring, "a"), envelope(mode, keyring, "b")
    payload = b'{"t":"gossip","f":"a","b":[' + b"x" * max(0, size - 30) + b"]}"
    start = time.perf_counter()
    for _ in range(count):
        receiver.accept(receiver.open(sender.seal(payload, 1)), "a")
    return (time.perf_counter() - start) / count * 1e6


class TimedEnvelope:
    """An envelope that counts the CPU its seal, open and accept take (thread CPU time)."""

    def __init__(self, inner: Envelope) -> None:
        self.inner = inner
        self.overhead = inner.overhead
        self.cpu_ns = 0

    def seal(self, payload: bytes, generation: int) -> bytes:
        start = time.thread_time_ns()
        try:
            return self.inner.seal(payload, generation)
        finally:
            self.cpu_ns += time.thread_time_ns() - start

    def open(self, packet: bytes) -> Opened:
        start = time.thread_time_ns()
        try:
            return self.inner.open(packet)
        finally:
            self.cpu_ns += time.thread_time_ns() - start

    def accept(self, opened: Opened, sender: str) -> None:
        start = time.thread_time_ns()
        try:
            self.inner.accept(opened, sender)
        finally:
            self.cpu_ns += time.thread_time_ns() - start

    def set_keyring(self, keyring: Keyring) -> None:
        self.inner.set_keyring(keyring)
