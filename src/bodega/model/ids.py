"""Identifiers in the shapes the Fly Machines API uses.

Machine ids are 14 lowercase hex characters (a worker starts the ids it makes up
with its *mark*, so a broker that has not yet heard of a machine knows whom to
ask); versions (``instance_id``) and
event ids are 26-character ULIDs, which sort by creation time; volume ids are
``vol_`` plus 20 base32 characters.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from typing import Annotated

from pydantic import AfterValidator

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_VOLUME_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"

# \Z, not $: "$" also matches before a trailing newline, which would let "web\n" through.
MACHINE_ID_RE = re.compile(r"^[0-9a-f]{14}\Z")
VOLUME_ID_RE = re.compile(r"^vol_[0-9a-z]{20}\Z")
SNAPSHOT_ID_RE = re.compile(r"^vs_[0-9a-z]{20}\Z")
ULID_RE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}\Z")
# App and machine names: DNS labels, as Fly requires (they become hostnames).
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")


def _machine_name(value: str) -> str:
    if not NAME_RE.match(value):
        raise ValueError(f"{value!r}: use lowercase letters, digits and -, at most 63")
    return value


def _machine_id(value: str) -> str:
    if not MACHINE_ID_RE.match(value):
        raise ValueError(f"{value!r} is not a machine id (14 lowercase hex digits)")
    return value


def _volume_id(value: str) -> str:
    if not VOLUME_ID_RE.match(value):
        raise ValueError(f"{value!r} is not a volume id (vol_ and 20 lowercase letters or digits)")
    return value


def _snapshot_id(value: str) -> str:
    if not SNAPSHOT_ID_RE.match(value):
        raise ValueError(f"{value!r} is not a snapshot id (vs_ and 20 lowercase letters or "
                         f"digits)")
    return value


# Checked where a name or an id crosses the wire (the public create, the worker's create),
# once, by the body's model: what the code behind it receives is known good.
MachineName = Annotated[str, AfterValidator(_machine_name)]
MachineId = Annotated[str, AfterValidator(_machine_id)]
VolumeId = Annotated[str, AfterValidator(_volume_id)]
SnapshotId = Annotated[str, AfterValidator(_snapshot_id)]  # a directory's name on a worker


MARK_DIGITS = 3  # 4,096 marks: a fleet of N workers shares each among about N/4096


def worker_mark(worker: str) -> str:
    """The hex digits that start every machine id ``worker`` makes up: a hint, not a key."""
    return hashlib.sha256(worker.encode()).hexdigest()[:MARK_DIGITS]


def new_machine_id(worker: str | None = None) -> str:
    """A fresh machine id; made up by ``worker``, it starts with that worker's mark."""
    if worker is None:
        return secrets.token_hex(7)
    rest = 14 - MARK_DIGITS
    return worker_mark(worker) + f"{secrets.randbits(4 * rest):0{rest}x}"


def new_ulid(at_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, Crockford base32."""
    ms = int(time.time() * 1000) if at_ms is None else at_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_snapshot_id() -> str:
    """``vs_`` plus 20 base36 characters, in the shape of a volume's id."""
    return "vs_" + "".join(secrets.choice(_VOLUME_ALPHABET) for _ in range(20))


def new_volume_id() -> str:
    return "vol_" + "".join(secrets.choice(_VOLUME_ALPHABET) for _ in range(20))


def new_token_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def new_secret() -> str:
    return secrets.token_urlsafe(24)


_ADJECTIVES = (
    "aged", "autumn", "billowing", "bold", "calm", "crimson", "damp", "dawn",
    "falling", "floral", "fragrant", "frosty", "gentle", "hidden", "icy",
    "late", "lively", "misty", "muddy", "patient", "polished", "quiet",
    "rough", "shy", "silent", "snowy", "solitary", "spring", "still",
    "summer", "twilight", "wandering", "weathered", "wild", "winter", "young",
)
_NOUNS = (
    "bird", "breeze", "brook", "bush", "cloud", "dew", "dream", "dust",
    "field", "fire", "flower", "fog", "forest", "frog", "glade", "grass",
    "haze", "hill", "lake", "leaf", "meadow", "moon", "night", "paper",
    "pine", "pond", "rain", "river", "sea", "shadow", "sky", "smoke", "snow",
    "sound", "star", "sun", "thunder", "tree", "violet", "water", "wave",
)


def new_machine_name() -> str:
    """A readable generated name such as ``aged-thunder-7371``."""
    return (
        f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_NOUNS)}-"
        f"{secrets.randbelow(9000) + 1000}"
    )
