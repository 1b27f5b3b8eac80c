"""What every registry a daemon holds offers besides its reads: the member and the writes.

A ``RegistryNode`` (a replica of its own) and a ``HostedNode`` (its host agent's)
differ in where rows go and come from; as a SWIM member publishing its metadata,
and in the four ways a daemon writes a row, they are the same, here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from bodega.registry.membership.core.members import Addr, MemberView
from bodega.registry.membership.core.outputs import Event
from bodega.registry.membership.fanout import Listener
from bodega.registry.membership.feed import Feed
from bodega.registry.replication.core.rows import Change, Document
from bodega.registry.sealing.core.keyring import Keyring


class Members(Protocol):
    """What a daemon reads of membership and sets of its own: a SWIM member's
    (``Membership``) or a tenant's of its host agent (``TenantMembership``)."""

    keyring: Keyring

    @property
    def addr(self) -> Addr: ...

    def members(self) -> list[MemberView]: ...

    def member(self, name: str) -> MemberView | None: ...

    def status_since(self, name: str) -> float | None: ...

    def suspicion_deadline(self, name: str) -> float | None: ...

    def update_meta(self, meta: dict[str, str]) -> None: ...

    def set_keyring(self, keyring: Keyring) -> None: ...

    def add_listener(self, listener: Listener) -> Callable[[], None]: ...

    def events(self) -> Feed[Event]: ...


class MemberSurface:
    membership: Members
    _meta: dict[str, str]
    _held: list[Change] | None = None  # inside ``writes_together``: told once it commits

    @property
    def gossip_addr(self) -> Addr:
        return self.membership.addr

    def members(self) -> list[MemberView]:
        return self.membership.members()

    def set_meta(self, **values: str) -> None:
        """Publish new values about ourselves (merged into what we publish already)."""
        self._meta.update(values)
        self.membership.update_meta(dict(self._meta))

    def urls_of(self, role: str, flag: str) -> list[str]:
        """The ``url`` of every live member of ``role`` whose metadata sets ``flag``."""
        return [m.meta["url"] for m in self.membership.members()
                if str(m.role) == role and m.status.live and m.meta.get(flag) and "url" in m.meta]

    # ── writes ───────────────────────────────────────────────────────────────

    def put_owned(self, table: str, key: str, doc: Document) -> None:
        self._write(table, key, dict(doc), shared=False)

    def delete_owned(self, table: str, key: str) -> None:
        self._write(table, key, None, shared=False)

    def put_shared(self, table: str, key: str, doc: Document) -> None:
        self._write(table, key, dict(doc), shared=True)

    def delete_shared(self, table: str, key: str) -> None:
        self._write(table, key, None, shared=True)

    @contextmanager
    def writes_together(self) -> Iterator[None]:
        """The writes made inside commit in one transaction of this daemon's store, and
        only then are told (to subscriptions, to the peers or the host's agent): all of
        them, or none if the block raises. A batch of rows costs one commit, not one each;
        reads inside see the batch's writes.

        The block must not await (another task's writes would join the batch, or find
        the store's transaction open), and a block inside another is part of its batch."""
        if self._held is not None:
            yield
            return
        held: list[Change] = []
        self._held = held
        try:
            with self._store_together():
                yield
        finally:
            self._held = None
        if held:
            self._written(held)

    def _wrote(self, change: Change) -> None:
        if self._held is not None:
            self._held.append(change)
        else:
            self._written([change])

    def _write(self, table: str, key: str, doc: Document | None, *, shared: bool) -> None:
        raise NotImplementedError

    def _store_together(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _written(self, changes: list[Change]) -> None:
        """What follows local writes once they are committed."""
        raise NotImplementedError
