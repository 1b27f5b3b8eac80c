"""What wraps every gossip packet: ``SealedEnvelope``, the keyring, counters and replay windows.

Going out, a payload is sealed under this member's life key for the
primary (``seal.py``), with its generation, salt and next sequence number.
Coming in, a packet is

1. read: a header that is not one is dropped (``auth``);
2. matched to an installed key by its id, or dropped (``unknown_key``);
3. checked against the sender's replay window before any decryption
   (``replay``: a packet seen, or from an earlier life);
4. opened with the sender life's key (derived once per life and kept, in a
   bounded table, only once a packet opened with it): a tag that fails is
   dropped (``auth``);

and once the caller has decoded the message, ``accept`` checks that the
member it names is the sender in the header (``auth`` otherwise) and only
then records the packet in the window, so nothing unauthenticated moves it.

``Envelope`` is the seam membership uses; the benchmarks plug in weaker ones
(no protection, or an HMAC tag) to price the sealing, and nothing else does.
Pure: the salt source and the first sequence number are handed in.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bodega.registry.sealing.core.keyring import Keyring
from bodega.registry.sealing.core.replay import ReplayGuard
from bodega.registry.sealing.core.seal import (
    MAX_COUNTER,
    OVERHEAD,
    SALT_BYTES,
    Dropped,
    Header,
    life_key,
    open_sealed,
    read_header,
    seal,
    sender_id,
)

NAMES_CACHED = 4096  # member name -> sender id, so a packet hashes no name
LIVES_CACHED = 4096  # (key, sender life) -> its key: one per live member, and room


@dataclass(frozen=True)
class Opened:
    payload: bytes
    sender: bytes = b""
    generation: int = 0
    seq: int = 0


class Envelope(Protocol):
    overhead: int

    def seal(self, payload: bytes, generation: int) -> bytes: ...

    def open(self, packet: bytes) -> Opened:
        """The payload of an acceptable packet; raises ``Dropped`` with a reason otherwise."""
        ...

    def accept(self, opened: Opened, sender: str) -> None:
        """The decoded message names ``sender``: record it, or raise ``Dropped``."""
        ...

    def set_keyring(self, keyring: Keyring) -> None: ...


class SealedEnvelope:
    overhead = OVERHEAD

    def __init__(self, keyring: Keyring, name: str, *, first_seq: int,
                 salts: Callable[[int], bytes]) -> None:
        self._name_id = sender_id(name)
        self._seq = first_seq
        self._salt = salts(SALT_BYTES)  # one per process: a life of this member
        self.replays = ReplayGuard()
        self._names: dict[str, bytes] = {}
        self._lives: OrderedDict[bytes, AESGCM] = OrderedDict()
        self._sealing: tuple[int, AESGCM] | None = None  # (generation, key) for our own life
        self.keyring = keyring
        self.set_keyring(keyring)

    def set_keyring(self, keyring: Keyring) -> None:
        """Seal with its primary, open with any of its keys, from the next packet on."""
        self._secrets = {k.raw_id: k.secret for k in keyring.keys}
        self._primary = keyring.primary_key.raw_id
        self._lives.clear()  # keys of a removed cluster key must open nothing any more
        self._sealing = None
        self.keyring = keyring

    def seal(self, payload: bytes, generation: int) -> bytes:
        if self._seq >= MAX_COUNTER:  # 584 years of nanoseconds: a clock gone wrong
            raise OverflowError("the gossip sequence number is exhausted")
        seq, self._seq = self._seq, self._seq + 1
        header = Header(self._primary, self._name_id, generation, self._salt, seq)
        if self._sealing is None or self._sealing[0] != generation:
            self._sealing = (generation, life_key(self._secrets[self._primary], header.life))
        return seal(self._sealing[1], header, payload)

    def open(self, packet: bytes) -> Opened:
        header = read_header(packet)
        secret = self._secrets.get(header.key_id)
        if secret is None:
            raise Dropped("unknown_key", f"sealed with key {header.key_id.hex()}, not installed")
        if not self.replays.fresh(header.sender, header.generation, header.seq):
            raise Dropped("replay", f"seq {header.seq} of generation {header.generation} "
                                    "was let in already, or is too old")
        life = header.key_id + header.life
        aead = self._lives.get(life)
        if aead is None:
            aead = life_key(secret, header.life)
            payload = open_sealed(aead, header, packet)  # kept only once it opened something
            self._lives[life] = aead
            if len(self._lives) > LIVES_CACHED:
                self._lives.popitem(last=False)
        else:
            payload = open_sealed(aead, header, packet)
            self._lives.move_to_end(life)
        return Opened(payload, header.sender, header.generation, header.seq)

    def accept(self, opened: Opened, sender: str) -> None:
        expected = self._names.get(sender)
        if expected is None:
            if len(self._names) >= NAMES_CACHED:
                self._names.clear()
            expected = self._names[sender] = sender_id(sender)
        if expected != opened.sender:
            raise Dropped("auth", f"the message names {sender!r}, the seal another sender")
        self.replays.accept(opened.sender, opened.generation, opened.seq)
