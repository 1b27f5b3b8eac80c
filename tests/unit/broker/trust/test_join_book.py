"""The join book in the view: hashes only, a row per join, and writes last-writer-wins cannot undo.

Over ``MemoryCatalog`` (the view's in-process fake); a real registry between
two servers is tests/integration/broker/test_servers.py.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from bodega.broker.trust.join_book import JoinStore
from bodega.broker.view.catalog import MemoryCatalog
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import new_key
from bodega.runtime.tls.core.join_token import JoinRefused, JoinToken, TokenRecord
from bodega.runtime.tls.join_store import BOOK, JoinBook

NOW = datetime.datetime(2026, 11, 24, 12, 0, tzinfo=datetime.UTC)
CA = pki.make_ca("c1abc", new_key(), NOW)
POOL = "10.9.128.0/17"


class Written(MemoryCatalog):
    """The view's fake, remembering every shared write: (table, key)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, str]] = []

    def put_shared(self, table: str, key: str, doc: dict[str, Any]) -> None:
        self.writes.append((table, key))
        super().put_shared(table, key, doc)


def book(catalog: MemoryCatalog, clock: list[datetime.datetime] | None = None) -> JoinStore:
    at = clock or [NOW]
    return JoinStore(catalog, CA, lambda: at[0])


def test_a_token_is_kept_by_its_hash_and_written_at_its_create_and_its_revoke_only() -> None:
    view = Written()
    store = book(view)
    token, _ = store.create(60.0, "test")
    assert token.secret not in str(view.tables["join_tokens"])
    assert store.valid(str(token))
    store.admit(token, ["syd-a-1"], POOL, [])
    store.admit(token, ["syd-b-1"], POOL, [])
    assert store.revoke(token.id) is not None
    assert store.revoke(token.id) is not None  # already revoked: nothing written again
    assert [w for w in view.writes if w[0] == "join_tokens"] == [("join_tokens", token.id)] * 2
    assert store.read().tokens[token.id].joins == 2
    assert store.read().tokens[token.id].revoked == NOW
    with pytest.raises(JoinRefused, match="revoked"):
        store.admit(token, ["syd-c-1"], POOL, [])
    assert store.revoke("00000000") is None


def test_each_join_is_its_own_row_and_its_subnets_are_held_across_servers() -> None:
    view = MemoryCatalog()
    one, other = book(view), book(view)  # two servers reading one view
    token, _ = one.create(600.0)
    first = one.admit(token, ["syd-a-1", "syd-a-2"], POOL, ["10.9.128.0/24"])
    assert first == {"syd-a-1": "10.9.129.0/24", "syd-a-2": "10.9.130.0/24"}
    # Another server, before syd-a's workers publish a row: it still knows those subnets.
    assert other.admit(token, ["syd-b-1"], POOL, ["10.9.128.0/24"]) == {
        "syd-b-1": "10.9.131.0/24"}
    # The same host again, with fewer workers: same subnets, and its row keeps them all.
    assert other.admit(token, ["syd-a-1"], POOL, []) == {"syd-a-1": "10.9.129.0/24"}
    assert sorted(view.tables["join_uses"]) == [f"{token.id}/syd-a-1", f"{token.id}/syd-b-1"]
    assert one.read().subnets == {"syd-a-1": "10.9.129.0/24", "syd-a-2": "10.9.130.0/24",
                                  "syd-b-1": "10.9.131.0/24"}
    assert one.read().tokens[token.id].joins == 2  # two hosts


def test_a_join_decided_and_not_recorded_holds_nothing() -> None:
    view = MemoryCatalog()
    store = book(view)
    token, _ = store.create(600.0)
    decided = store.decide(token, ["syd-a-1"], POOL, [])
    assert decided.subnets == {"syd-a-1": "10.9.128.0/24"}
    assert view.tables["join_uses"] == {}
    assert store.read().tokens[token.id].joins == 0
    store.record(decided)
    assert store.read().subnets == {"syd-a-1": "10.9.128.0/24"}


def test_a_server_join_needs_a_server_token() -> None:
    store = book(MemoryCatalog())
    plain, _ = store.create(600.0)
    server, record = store.create(600.0, "second server", server=True)
    assert record.server
    with pytest.raises(JoinRefused, match="is not a server token"):
        store.admit(plain, ["lon-a-1"], POOL, [], server=True)
    store.admit(server, ["lon-a-1"], POOL, [], server=True)
    assert store.read().tokens[server.id].server
    assert store.read().tokens[server.id].joins == 1


def test_an_old_book_file_is_imported_once_and_brings_back_no_revoked_token(
        tmp_path: Path) -> None:
    kept, revoked_there, revoked_here = (JoinToken.new(CA) for _ in range(3))
    record = {t.id: TokenRecord.of(t, NOW, 3600.0, "old") for t in (kept, revoked_there,
                                                                     revoked_here)}
    record[kept.id] = record[kept.id].model_copy(update={"joins": 3})
    record[revoked_there.id] = record[revoked_there.id].model_copy(update={"revoked": NOW})
    old = JoinBook(tokens=record, subnets={"syd-a-1": "10.9.129.0/24"})
    (tmp_path / BOOK).write_text(old.model_dump_json())
    view = MemoryCatalog()
    store = book(view)
    # The view already had one of them, revoked since the file was written.
    store.catalog.put_shared("join_tokens", revoked_here.id, {
        **record[revoked_here.id].model_dump(mode="json", exclude={"joins"}), "revoked":
        NOW.isoformat()})
    assert store.import_file(tmp_path) == 3  # two tokens, one subnet
    assert not (tmp_path / BOOK).exists()
    assert (tmp_path / f"{BOOK}.imported").exists()
    tokens = store.read().tokens
    assert store.valid(str(kept))
    assert tokens[kept.id].joins == 3
    assert not store.valid(str(revoked_there))
    assert not store.valid(str(revoked_here))
    # Its joined worker keeps its subnet; a new one does not get it.
    new, _ = store.create(60.0)
    assert store.admit(new, ["syd-a-1"], "10.9.129.0/24", []) == {"syd-a-1": "10.9.129.0/24"}
    with pytest.raises(ValueError, match="0 free /24s left"):
        store.admit(new, ["syd-b-1"], "10.9.129.0/24", [])
    assert store.import_file(tmp_path) == 0  # nothing left to import
    # Run again on the same file (a start cut short before the rename): nothing changes.
    (tmp_path / BOOK).write_text(old.model_dump_json())
    assert store.import_file(tmp_path) == 0
    assert not store.valid(str(revoked_here))
