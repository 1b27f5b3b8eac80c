"""A host's wall clock stepped back: what lapsed stays lapsed, and records stay in order.

The store stamps and times out with a clock that never runs backwards (``SteadyClock``),
from the newest time it recorded; these drive it with a fake host clock."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bodega.model.capacity import Ask, Totals
from bodega.model.errors import Conflict
from bodega.runtime.steady_clock import SteadyClock
from bodega.worker.ops.claims import claim_room
from bodega.worker.store import queries
from bodega.worker.store.database import Store
from bodega.worker.store.ledger import Ledger
from tests.unit.runtime.test_steady_clock import Host

TOTALS = Totals(cpus=1, memory_mb=512, disk_gb=10, shared_cpu_ratio=1.0)
ASK = Ask(cpus=1, memory_mb=512)


def test_a_lapsed_reservation_stays_lapsed_when_the_clock_steps_back(tmp_path: Path) -> None:
    host = Host()
    store = Store(tmp_path / "worker.db", host.clock())
    ledger = Ledger(store, TOTALS)
    held = ledger.reserve(ASK, "web", ttl=10.0)
    assert ledger.usage().memory_mb == 512
    host.run(11)
    assert ledger.usage().memory_mb == 0  # lapsed: its room may go to another machine
    host.wall -= 90
    assert ledger.usage().memory_mb == 0  # and it does not come back
    with pytest.raises(Conflict, match="expired"), store.tx() as conn:
        claim_room(conn, ledger, held.id, ASK, "m1")  # a late create may not claim it


def test_a_store_opened_again_never_stamps_earlier_than_it_did(tmp_path: Path) -> None:
    host = Host(wall=time.time() + 120)  # two minutes ahead of this host's clock now
    store = Store(tmp_path / "worker.db", host.clock())
    ledger = Ledger(store, TOTALS)
    ledger.reserve(ASK, "web", ttl=10.0)
    stamped = queries.newest_stamp(store.db)
    assert stamped >= host.wall
    store.close()
    # Restarted on the real clock: as if stepped back two minutes meanwhile.
    again = Store(tmp_path / "worker.db")
    try:
        assert again.clock() >= stamped
    finally:
        again.close()


def test_by_default_the_store_reads_the_wall_clock(tmp_path: Path) -> None:
    store = Store(tmp_path / "worker.db")
    try:
        assert isinstance(store.clock, SteadyClock)
    finally:
        store.close()
