"""Packets in and out of membership: the envelope, the codec, and why a packet was dropped.

``inbound`` turns a datagram into a message or into a reason, counted in
``bodega_gossip_bad_packets_total{reason}``: ``size`` (over the packet
budget), ``auth`` (not sealed, a bad tag, a sender that is not who the
message names), ``unknown_key`` (sealed with a key not installed here: another
cluster's, or a key this member missed while it was away), ``replay`` (let in
before, or from an earlier life of its sender) and ``decode`` (authentic but
malformed). When the last packet with an unknown key arrived is kept: a member
that keeps hearing them has fallen behind a key rotation and catches up over
HTTP (``lacks_key``). ``outbound`` encodes and seals.
"""

from __future__ import annotations

from bodega.registry.membership.core.messages import DecodeError, Message, decode, encode
from bodega.registry.membership.metrics import MembershipMetrics
from bodega.registry.sealing.core.envelope import Envelope
from bodega.registry.sealing.core.seal import Dropped

UNKNOWN_KEY_MEMORY = 10.0  # seconds: hearing keys we lack this recently means we lack one


class Packets:
    def __init__(self, envelope: Envelope, metrics: MembershipMetrics, packet_size: int) -> None:
        self.envelope = envelope
        self.metrics = metrics
        self.packet_size = packet_size
        self.unknown_key_at: float | None = None

    def inbound(self, now: float, data: bytes) -> Message | None:
        self.metrics.packets.labels("in").inc()
        self.metrics.bytes.labels("in").inc(len(data))
        if len(data) > self.packet_size:
            self.metrics.bad_packets.labels("size").inc()
            return None
        try:
            opened = self.envelope.open(data)
            message = decode(opened.payload)
            self.envelope.accept(opened, message.sender)
        except Dropped as dropped:
            if dropped.reason == "unknown_key":
                self.unknown_key_at = now
            self.metrics.bad_packets.labels(dropped.reason).inc()
            return None
        except DecodeError:
            self.metrics.bad_packets.labels("decode").inc()
            return None
        return message

    def outbound(self, message: Message, generation: int) -> bytes:
        packet = self.envelope.seal(encode(message), generation)
        self.metrics.packets.labels("out").inc()
        self.metrics.bytes.labels("out").inc(len(packet))
        return packet

    def lacks_key(self, now: float) -> bool:
        """Packets sealed with a key we do not hold arrived lately."""
        return self.unknown_key_at is not None and now - self.unknown_key_at < UNKNOWN_KEY_MEMORY
