"""The gossip keyring: the AES-256 keys a member opens packets with, and the one it seals with.

memberlist's keyring, with its three moves: **install** a key (packets
sealed with it now open here), **use** it (this member seals with it; the
*primary*), **remove** one (packets sealed with it no longer open). A
rotation is the three in turn, each seen by every member before the next,
so no two live members ever lack a key the other seals with.

A key is 32 random bytes; its id is 4 bytes of a hash of it, so ids need no
coordination and name a key without revealing it (``bodega cluster key
list`` shows ids, never keys). Every change raises the keyring's ``serial``:
of two keyrings of one cluster, the higher serial is the later one (a node
compares the keyring file it was started with and the row in its view by
it). The JSON form (``KeyringDoc``) is the keyring file's and the view
row's; ``report`` is what a member says about its own keyring in its
membership metadata, so a rotation can tell when every member has a key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, ValidationError

KEY_BYTES = 32  # AES-256
ID_BYTES = 4
MAX_KEYS = 8  # a rotation holds two; more means rotations were cut short, still fine
REPORT_META = "keys"  # the membership metadata field a member reports its keyring in


class KeyringError(ValueError):
    """A keyring that cannot be: no key, an unknown primary, or a move that would break it."""


@dataclass(frozen=True)
class GossipKey:
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.secret) != KEY_BYTES:
            raise KeyringError(f"a gossip key is {KEY_BYTES} bytes, not {len(self.secret)}")

    @property
    def raw_id(self) -> bytes:
        return hashlib.sha256(b"bodega/gossip-key-id\0" + self.secret).digest()[:ID_BYTES]

    @property
    def id(self) -> str:
        return self.raw_id.hex()

    def encoded(self) -> str:
        return base64.b64encode(self.secret).decode()

    @classmethod
    def decode(cls, text: str) -> GossipKey:
        try:
            return cls(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError) as exc:
            raise KeyringError(f"a gossip key is {KEY_BYTES} bytes in base64: {exc}") from None


class KeyringDoc(BaseModel):
    """A keyring as JSON: the keyring file's content, and the view row's (with its name)."""

    model_config = ConfigDict(extra="forbid")
    serial: int = 0
    primary: str
    keys: list[str]


@dataclass(frozen=True)
class Keyring:
    keys: tuple[GossipKey, ...]
    primary: str  # the id of the key packets are sealed with
    serial: int = 0  # raised by every change: the later of two keyrings has the higher

    def __post_init__(self) -> None:
        ids = [k.id for k in self.keys]
        if not ids:
            raise KeyringError("a keyring holds at least one key")
        if len(set(ids)) != len(ids):
            raise KeyringError("a keyring holds each key once")
        if len(ids) > MAX_KEYS:
            raise KeyringError(f"a keyring holds at most {MAX_KEYS} keys")
        if self.primary not in ids:
            raise KeyringError(f"the primary key {self.primary} is not installed")
        if self.serial < 0:
            raise KeyringError("a keyring's serial is not negative")

    @classmethod
    def of(cls, key: GossipKey) -> Keyring:
        """A new cluster's keyring: one key, the primary."""
        return cls((key,), key.id)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(k.id for k in self.keys)

    @property
    def primary_key(self) -> GossipKey:
        return next(k for k in self.keys if k.id == self.primary)

    def key(self, key_id: str) -> GossipKey | None:
        return next((k for k in self.keys if k.id == key_id), None)

    # ── the three moves ─────────────────────────────────────────────────────

    def install(self, key: GossipKey) -> Keyring:
        """Open packets sealed with ``key`` too (already installed: unchanged)."""
        if key.id in self.ids:
            return self
        return Keyring((*self.keys, key), self.primary, self.serial + 1)

    def use(self, key_id: str) -> Keyring:
        """Seal with the installed key ``key_id`` from now on."""
        if key_id not in self.ids:
            raise KeyringError(f"key {key_id} is not installed: install it first")
        if key_id == self.primary:
            return self
        return Keyring(self.keys, key_id, self.serial + 1)

    def remove(self, key_id: str) -> Keyring:
        """Stop opening packets sealed with ``key_id``; never the primary."""
        if key_id == self.primary:
            raise KeyringError(f"key {key_id} is the primary: use another one before removing it")
        if key_id not in self.ids:
            return self
        return Keyring(tuple(k for k in self.keys if k.id != key_id), self.primary,
                       self.serial + 1)

    def only_primary(self) -> Keyring:
        """Every key but the primary removed: how a rotation ends."""
        if len(self.keys) == 1:
            return self
        return Keyring((self.primary_key,), self.primary, self.serial + 1)

    # ── forms ────────────────────────────────────────────────────────────────

    def doc(self) -> KeyringDoc:
        return KeyringDoc(serial=self.serial, primary=self.primary,
                          keys=[k.encoded() for k in self.keys])

    def to_json(self) -> str:
        return self.doc().model_dump_json()

    @classmethod
    def from_doc(cls, doc: KeyringDoc) -> Keyring:
        return cls(tuple(GossipKey.decode(k) for k in doc.keys), doc.primary, doc.serial)

    @classmethod
    def from_json(cls, text: str | bytes) -> Keyring:
        try:
            return cls.from_doc(KeyringDoc.model_validate_json(text))
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "the document"
            raise KeyringError(f"not a gossip keyring: {where}: {problem['msg']}") from None

    def same_keys(self, other: Keyring) -> bool:
        return (self.ids, self.primary) == (other.ids, other.primary)

    def report(self) -> str:
        """``"ab12cd34*,ef56ab78"``: the installed ids, the primary starred."""
        return ",".join(f"{i}*" if i == self.primary else i for i in self.ids)


@dataclass(frozen=True)
class KeyReport:
    """What a member says it holds; ``primary`` None when it did not say (an older member)."""

    installed: frozenset[str] = frozenset()
    primary: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> KeyReport:
        if not text:
            return cls()
        ids = text.split(",")
        primary = next((i[:-1] for i in ids if i.endswith("*")), None)
        return cls(frozenset(i.rstrip("*") for i in ids if i.rstrip("*")), primary)
