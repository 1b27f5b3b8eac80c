"""A gossip keyring for tests: in-process configs take ``SOURCE``, daemons ``ENV``.

One fixed key, so daemons started apart by a test (or a test and the nodes it
drives) gossip with each other; a cluster made by `bodega up` has its own.
"""

from __future__ import annotations

import hashlib

from bodega.registry.sealing.core.keyring import GossipKey, Keyring
from bodega.registry.sealing.core.seal import life_key, open_sealed, read_header
from bodega.registry.sealing.keyfile import ENV_JSON, KeyringSource

KEYRING = Keyring.of(GossipKey(hashlib.sha256(b"bodega tests gossip key").digest()))
SOURCE = KeyringSource(KEYRING)
ENV = {ENV_JSON: KEYRING.to_json()}


def other_keyring(label: str) -> Keyring:
    """Another cluster's keyring."""
    return Keyring.of(GossipKey(hashlib.sha256(label.encode()).digest()))


def payload_of(packet: bytes, keyring: Keyring = KEYRING) -> bytes:
    """What a sealed packet carries, opened with ``keyring``'s key of its id (no replay check)."""
    header = read_header(packet)
    key = next(k for k in keyring.keys if k.raw_id == header.key_id)
    return open_sealed(life_key(key.secret, header.life), header, packet)
