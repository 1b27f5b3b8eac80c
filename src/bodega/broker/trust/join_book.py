"""The join book: join tokens and the joins they let in, as shared rows of the cluster view.

Every server (a broker holding the cluster CA's key) reads and writes the same
book, so a token made through one is taken by any, and a revocation through
one is refused by all once its row has reached them (gossip: a second or so).
Shared rows are last-writer-wins, so the book is written in a way no write can
undo another:

- a token's row (``join_tokens``, keyed by its id: the hash of its secret,
  never the secret) is written twice at most: when it is made, and when it is
  revoked. A revoke reads the row first, so its write is the later one (the
  clock observes what it read): a revocation is never lost, and nothing writes
  a token back to valid;
- each join writes a row of its own (``join_uses``, keyed ``<token id>/<the
  host's first worker>``) holding the machine subnets it handed out. A token's
  ``joins`` is a count of its rows, and the subnets already given are known to
  every server: a subnet is taken if a worker's row shows it or a join row
  holds it. Two joins through two servers in the same instant, before either
  row reached the other, could still pick the same free /24: there is no
  consensus to ask (docs/multi-host.md).

A book kept in ``<ca dir>/join-book.json`` by a bodega from before the view
held it is imported once when its server's broker starts (``import_file``),
then renamed ``join-book.json.imported``: a file read again later could only
bring back what the cluster has revoked since.

The decisions (``join_token.admit``, ``join_token.assign_subnets``) are pure;
this module reads the rows, hands them over, and writes what was decided.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from bodega.broker.view.catalog import Catalog
from bodega.model.answer import Answer, from_doc
from bodega.runtime.tls.core.join_token import (
    JoinToken,
    TokenFields,
    TokenRecord,
    admit,
    assign_subnets,
    ca_hash,
)
from bodega.runtime.tls.join_store import BOOK, JoinBook, read_book

log = logging.getLogger("bodega.broker")

TOKENS = "join_tokens"
USES = "join_uses"
IMPORTED = "imported"  # the token id of the join rows a file brought: it did not say whose
Clock = Callable[[], datetime.datetime]


class TokenRow(Answer, TokenFields):
    """A join token's row: what ``TokenRecord`` keeps, but for its count of joins."""

    joins_before: int = 0  # joins a file counted before the book moved into the view

    @classmethod
    def of(cls, record: TokenRecord) -> TokenRow:
        return cls(**record.model_dump(exclude={"joins"}), joins_before=record.joins)

    def record(self, joins: int) -> TokenRecord:
        return TokenRecord(**self.model_dump(exclude={"joins_before"}),
                           joins=self.joins_before + joins)


class JoinRow(Answer):
    """One join: the token that let the host in and the subnets its workers got."""

    key: str
    token: str
    workers: list[str]
    subnets: dict[str, str] = {}  # worker name -> its machine subnet
    joined: datetime.datetime
    server: bool = False  # the host joined as a server


@dataclass(frozen=True)
class Admission:
    """A join decided and not yet written: the token, the host's workers, their subnets."""

    token_id: str
    names: list[str]
    subnets: dict[str, str]
    server: bool


class JoinStore:
    def __init__(self, catalog: Catalog, ca: x509.Certificate, clock: Clock) -> None:
        self.catalog = catalog
        self.ca = ca
        self.clock = clock

    # ── reads ────────────────────────────────────────────────────────────────

    def _joins(self) -> list[JoinRow]:
        found = [from_doc(JoinRow, doc) for doc in self.catalog.rows(USES)]
        return sorted((j for j in found if j is not None), key=lambda j: (j.joined, j.key))

    def read(self) -> JoinBook:
        """Every token, with the joins it let in, and every subnet handed out."""
        joins = self._joins()
        counts: dict[str, int] = {}
        for join in joins:
            counts[join.token] = counts.get(join.token, 0) + 1
        tokens = {}
        for doc in self.catalog.rows(TOKENS):
            row = from_doc(TokenRow, doc)
            if row is not None:
                tokens[row.id] = row.record(counts.get(row.id, 0))
        return JoinBook(tokens=tokens, subnets=held(joins))

    def _token(self, token_id: str) -> TokenRow | None:
        return from_doc(TokenRow, self.catalog.get(TOKENS, token_id))

    # ── writes ───────────────────────────────────────────────────────────────

    def create(self, ttl: float, description: str = "", server: bool = False
               ) -> tuple[JoinToken, TokenRecord]:
        token = JoinToken.new(self.ca)
        record = TokenRecord.of(token, self.clock(), ttl, description, server)
        self.catalog.put_shared(TOKENS, token.id, TokenRow.of(record).doc())
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
        row = self._token(token_id)
        if row is None:
            return None
        if row.revoked is None:
            row = row.model_copy(update={"revoked": self.clock()})
            self.catalog.put_shared(TOKENS, token_id, row.doc())
        return self.read().tokens.get(token_id, row.record(0))

    def admit(self, token: JoinToken, names: Iterable[str], pool: str | None,
              taken: Iterable[str], server: bool = False) -> dict[str, str]:
        """``decide`` and ``record`` in one: the subnets the host's workers get."""
        admission = self.decide(token, names, pool, taken, server)
        self.record(admission)
        return admission.subnets

    def decide(self, token: JoinToken, names: Iterable[str], pool: str | None,
               taken: Iterable[str], server: bool = False) -> Admission:
        """Whether ``token`` lets a host in (``JoinRefused`` if not; as a server if
        ``server``), and a machine subnet of ``pool`` for each of its workers ``names``
        that none of ``taken`` (subnets the view's workers show) nor another join holds.
        Nothing is written: ``record`` does, once the host's certificates are signed."""
        names = list(names)
        if not names:
            raise ValueError("a joining host names at least one worker")
        book = self.read()
        found = admit(book.tokens, token, ca_hash(self.ca), self.clock(), server)
        return Admission(found.id, names, assign_subnets(names, pool, book.subnets, taken),
                         server)

    def record(self, admission: Admission) -> None:
        """The join's own row: the host let in and the subnets it got."""
        key = f"{admission.token_id}/{admission.names[0]}"
        before = from_doc(JoinRow, self.catalog.get(USES, key))
        # The same host joining again with the same token: its row keeps what it held.
        kept = {} if before is None else before.subnets
        self.catalog.put_shared(USES, key, JoinRow(
            key=key, token=admission.token_id, workers=admission.names,
            subnets={**kept, **admission.subnets}, joined=self.clock(),
            server=admission.server).doc())

    def import_file(self, ca_dir: Path) -> int:
        """Bring a join book file (a bodega from before the view) into the view, then
        rename it: a token the view lacks, a revocation it lacks, each joined worker's
        subnet. How many rows it wrote; idempotent, so a start cut short may run it again."""
        path = ca_dir / BOOK
        try:
            book = read_book(path)
        except ValueError as exc:  # left where it is, for its operator to look at
            log.warning("the join book %s is not one bodega reads, not imported: %s", path, exc)
            return 0
        if book is None:
            return 0
        written = 0
        for token_id, record in book.tokens.items():
            there = self._token(token_id)
            if there is None:
                self.catalog.put_shared(TOKENS, token_id, TokenRow.of(record).doc())
            elif there.revoked is None and record.revoked is not None:
                self.catalog.put_shared(TOKENS, token_id, there.model_copy(
                    update={"revoked": record.revoked}).doc())
            else:
                continue
            written += 1
        have = self.read().subnets
        for name, subnet in book.subnets.items():
            if name in have:
                continue
            key = f"{IMPORTED}/{name}"
            self.catalog.put_shared(USES, key, JoinRow(
                key=key, token=IMPORTED, workers=[name], subnets={name: subnet},
                joined=self.clock()).doc())
            written += 1
        path.rename(path.with_name(BOOK + ".imported"))
        log.info("imported the join book %s into the cluster view (%d rows); kept as %s.imported",
                 path, written, BOOK)
        return written


def held(joins: Iterable[JoinRow]) -> dict[str, str]:
    """Each joined worker's subnet, as its earliest join gave it."""
    subnets: dict[str, str] = {}
    for join in joins:
        for name, subnet in join.subnets.items():
            subnets.setdefault(name, subnet)
    return subnets
