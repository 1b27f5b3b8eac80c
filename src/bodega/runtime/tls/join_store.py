"""The signer's book of join tokens and of the machine subnets it handed joining hosts.

One JSON file beside the cluster CA (``<ca dir>/join-book.json``, 0600),
written whole in one rename. Only the host holding the CA's key keeps one:
``bodega up --advertise`` writes it before its broker starts (the first
token), then that broker alone (``bodega cluster token ...``, and each join).
Tokens are kept as records (``join_token.TokenRecord``: the secret's hash,
never the secret). The subnets map a joined worker's name to its /24, so a
host joining again under the same names gets the same ones.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from pathlib import Path

from cryptography import x509
from pydantic import BaseModel, ConfigDict

from bodega.runtime.tls.files import write_private
from bodega.runtime.tls.join_token import (
    JoinToken,
    TokenRecord,
    admit,
    ca_hash,
    free_subnets,
)

BOOK = "join-book.json"
Clock = Callable[[], datetime.datetime]


class JoinBook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: dict[str, TokenRecord] = {}
    subnets: dict[str, str] = {}  # joined worker name -> its machine subnet


class JoinStore:
    def __init__(self, path: Path, ca: x509.Certificate, clock: Clock) -> None:
        self.path = path
        self.ca = ca
        self.clock = clock

    def read(self) -> JoinBook:
        try:
            return JoinBook.model_validate_json(self.path.read_bytes())
        except FileNotFoundError:
            return JoinBook()

    def write(self, book: JoinBook) -> None:
        write_private(self.path, book.model_dump_json(indent=1).encode() + b"\n")

    def create(self, ttl: float, description: str = "") -> tuple[JoinToken, TokenRecord]:
        token = JoinToken.new(self.ca)
        record = TokenRecord.of(token, self.clock(), ttl, description)
        book = self.read()
        book.tokens[token.id] = record
        self.write(book)
        return token, record

    def valid(self, text: str) -> bool:
        """Whether ``text`` is a token this book would still admit."""
        try:
            admit(self.read().tokens, JoinToken.parse(text), ca_hash(self.ca), self.clock())
        except ValueError:
            return False
        return True

    def revoke(self, token_id: str) -> TokenRecord | None:
        """The token revoked now (or already); None if there is no such token."""
        book = self.read()
        record = book.tokens.get(token_id)
        if record is None:
            return None
        if record.revoked is None:
            record = record.model_copy(update={"revoked": self.clock()})
            book.tokens[token_id] = record
            self.write(book)
        return record

    def admit(self, token: JoinToken, names: Iterable[str], pool: str | None,
              taken: Iterable[str]) -> dict[str, str]:
        """Let a host in with ``token`` (``JoinRefused`` if not) and give each of its
        workers ``names`` a machine subnet of ``pool`` that none of ``taken`` (subnets the
        view shows in use) nor another joined worker has: {name: subnet}."""
        book = self.read()
        record = admit(book.tokens, token, ca_hash(self.ca), self.clock())
        wanted = [n for n in names if n not in book.subnets]
        assigned = {n: s for n, s in book.subnets.items() if n not in wanted}
        if pool is not None and wanted:
            fresh = free_subnets(pool, [*assigned.values(), *taken], len(wanted))
            book.subnets.update(zip(wanted, fresh, strict=True))
        book.tokens[record.id] = record.model_copy(update={"joins": record.joins + 1})
        self.write(book)
        return {n: book.subnets[n] for n in names if n in book.subnets}
