"""The gossip keyring as the broker shows it: ``/v1/cluster/keys``, a bodega extension.

Key ids only, never keys: an id is 4 bytes of a hash of the key
(``registry/sealing/core/keyring.py``). ``GET /v1/cluster/keys`` answers a
``KeyListing``: the keyring this broker's registry node holds, and what
every member reports holding. ``POST /v1/cluster/keys/rotate`` runs a whole
rotation (install, use, remove) and answers a ``Rotation``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_ROTATION_TIMEOUT = 600.0


class KeyHolders(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    primary: bool  # the key this node seals with
    members: list[str]  # live members that report holding it
    sealing: list[str]  # live members that report sealing with it


class MemberKeys(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    role: str
    status: str
    keys: list[str]  # the ids it reports holding; empty: it did not say
    primary: str | None


class KeyListing(BaseModel):
    model_config = ConfigDict(extra="forbid")
    serial: int  # raised by every change of the keyring
    primary: str
    keys: list[KeyHolders]
    members: list[MemberKeys]


class RotateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # How long each step may wait for every live member.
    timeout: float = Field(default=60.0, gt=0, le=MAX_ROTATION_TIMEOUT)


class RotationStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: str  # install, use, remove
    serial: int  # the keyring serial it published
    seconds: float  # until every live member had taken it


class Rotation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    new: str  # the key now sealing
    removed: list[str]
    steps: list[RotationStep]
    keyring: KeyListing
