"""Join tokens: what lets a new host into the cluster, pinning the cluster CA by its hash.

A token reads ``K10<sha256 of the CA certificate (DER), hex>::<id>.<secret>``,
k3s's "secure" token format. The host joining fetches the CA from the host it
joins through and compares its hash with the pin before it sends anything: a
host posing as the cluster cannot present a CA with that hash. The id names
the token (``bodega cluster token list|revoke``); the secret proves its holder
may join and is kept only as its SHA-256. A token expires (24 hours by
default) and can be revoked; either refuses it from then on.

A server token (``bodega cluster token create --server``) may also let a
host in as a server, one that gets the CA's key and lets hosts in itself;
any other token refuses a server join.

``admit`` decides whether a token lets a host in; ``assign_subnets`` which
machine subnets a joining host's workers get (``free_subnets``: the free
/24s of the range). Nothing here reads a file, a clock or a socket: callers
pass ``now`` and what the cluster view holds.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from pydantic import BaseModel, ConfigDict

PREFIX = "K10"
DEFAULT_TTL = 24 * 3600.0
MAX_TTL = 365 * 86400.0
SHAPE = re.compile(r"^K10(?P<ca>[0-9a-f]{64})::(?P<id>[0-9a-f]{8})\."
                   r"(?P<secret>[A-Za-z0-9_-]{20,})$")
WHAT = "K10<CA sha256>::<id>.<secret>, as `bodega up --advertise` or `bodega cluster token " \
       "create` prints it"


class JoinRefused(ValueError):
    """A join turned away; the message says why in words an operator acts on."""


def ca_hash(ca: x509.Certificate) -> str:
    """The pin: SHA-256 of the CA certificate's DER encoding, in hex."""
    return hashlib.sha256(ca.public_bytes(serialization.Encoding.DER)).hexdigest()


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class JoinToken:
    ca_hash: str
    id: str
    secret: str

    def __str__(self) -> str:
        return f"{PREFIX}{self.ca_hash}::{self.id}.{self.secret}"

    @classmethod
    def new(cls, ca: x509.Certificate) -> JoinToken:
        return cls(ca_hash(ca), secrets.token_hex(4), secrets.token_urlsafe(24))

    @classmethod
    def parse(cls, text: str) -> JoinToken:
        """The token in ``text``; ``ValueError`` saying what a token looks like otherwise."""
        found = SHAPE.match(text.strip())
        if found is None:
            raise ValueError(f"not a join token: expected {WHAT}")
        return cls(found["ca"], found["id"], found["secret"])


class TokenFields(BaseModel):
    """What is known of a token but for its count of joins: its record's fields, and its
    row's in the join book (``broker/trust/join_book.py``)."""

    id: str
    secret_sha256: str
    created: datetime.datetime
    expires: datetime.datetime
    revoked: datetime.datetime | None = None
    description: str = ""
    server: bool = False  # it may let a host in as a server


class TokenRecord(TokenFields):
    """A token as the signer keeps it: never its secret, only the secret's hash."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    joins: int = 0  # hosts let in with it

    @classmethod
    def of(cls, token: JoinToken, now: datetime.datetime, ttl: float,
           description: str = "", server: bool = False) -> TokenRecord:
        if not 0 < ttl <= MAX_TTL:
            raise ValueError(f"a join token lasts more than 0s and at most {MAX_TTL:g}s")
        return cls(id=token.id, secret_sha256=secret_hash(token.secret), created=now,
                   expires=now + datetime.timedelta(seconds=ttl), description=description,
                   server=server)

    def status(self, now: datetime.datetime) -> str:
        if self.revoked is not None:
            return "revoked"
        return "expired" if now >= self.expires else "valid"


def admit(records: Mapping[str, TokenRecord], token: JoinToken, pinned: str,
          now: datetime.datetime, server: bool = False) -> TokenRecord:
    """The record of ``token`` if it lets a host join this cluster (whose CA hashes to
    ``pinned``) at ``now``, as a server if ``server``; ``JoinRefused`` saying why not
    otherwise."""
    if not hmac.compare_digest(token.ca_hash, pinned):
        raise JoinRefused("the join token pins another cluster CA than this cluster's")
    record = records.get(token.id)
    # One answer for an unknown id and a wrong secret: no oracle for guessing either.
    if record is None or not hmac.compare_digest(record.secret_sha256,
                                                 secret_hash(token.secret)):
        raise JoinRefused(f"join token {token.id} is not one of this cluster's")
    if record.revoked is not None:
        raise JoinRefused(f"join token {token.id} was revoked at "
                          f"{record.revoked:%Y-%m-%d %H:%M:%S}Z")
    if now >= record.expires:
        raise JoinRefused(f"join token {token.id} expired at "
                          f"{record.expires:%Y-%m-%d %H:%M:%S}Z")
    if server and not record.server:
        raise JoinRefused(f"join token {token.id} is not a server token: a host joins as a "
                          "server with one made by `bodega cluster token create --server`")
    return record


def assign_subnets(names: Iterable[str], pool: str | None, held: Mapping[str, str],
                   taken: Iterable[str]) -> dict[str, str]:
    """The machine subnet of each of a joining host's workers ``names``: the one it was
    given before (``held``: joined worker name -> subnet), else a free /24 of ``pool``
    that no held one nor any of ``taken`` (subnets the view shows in use) overlaps. With
    no pool, only the held ones (the others pick their own)."""
    wanted = list(dict.fromkeys(names))
    kept = {n: held[n] for n in wanted if n in held}
    fresh = [n for n in wanted if n not in held]
    if pool is None or not fresh:
        return kept
    given = free_subnets(pool, [*held.values(), *taken], len(fresh))
    return {**kept, **dict(zip(fresh, given, strict=True))}


def free_subnets(pool: str, taken: Iterable[str], count: int) -> list[str]:
    """``count`` /24s of ``pool`` none of ``taken`` overlaps, lowest first; ``ValueError``
    if the pool has fewer left."""
    network = ipaddress.ip_network(pool)
    used = [ipaddress.ip_network(t) for t in taken]
    found: list[str] = []
    for subnet in network.subnets(new_prefix=24):
        if len(found) == count:
            break
        if not any(subnet.overlaps(u) for u in used):
            found.append(str(subnet))
    if len(found) < count:
        raise ValueError(f"the joining hosts' machine range {pool} has {len(found)} free /24s "
                         f"left, {count} asked for")
    return found
