from pathlib import Path

import pytest

from bodega.model.errors import StorageFull
from bodega.worker.core.payloads import ExitMachine, StartMachine
from bodega.worker.store.database import Store


def test_migrations_apply_once_and_record_the_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")
    version = store.schema_version
    assert version >= 1
    store.close()
    again = Store(tmp_path / "w.db")
    assert again.schema_version == version
    assert again.db.execute("SELECT count(*) FROM ops").fetchone()[0] == 0
    again.close()


def test_wal_and_full_sync(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()


def test_a_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")

    def failing() -> None:
        with store.tx() as conn:
            store.append(conn, op_id="o", resource_id="r", fsm="f", step="s", payload={})
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        failing()
    assert store.history("r") == []
    store.close()


def test_operations_log_every_step_and_survive_reopen(tmp_path: Path) -> None:
    clock = iter(range(100, 200))
    store = Store(tmp_path / "w.db", clock=lambda: float(next(clock)))
    with store.tx() as conn:
        op = store.begin_operation(conn, resource_id="m1", step="one",
                                   payload=StartMachine(start_seq=1))
    with store.tx() as conn:
        op = store.advance_operation(conn, op, step="two",
                                     payload=StartMachine(start_seq=1, pid=2),
                                     event=store.new_event("start", "started", "flyd"))
    store.close()
    reopened = Store(tmp_path / "w.db")
    assert [e.step for e in reopened.history("m1")] == ["one", "two"]
    running = reopened.running_operations()
    assert [(o.op_id, o.step, o.payload) for o in running] == [
        (op.op_id, "two", StartMachine(start_seq=1, pid=2))]
    events = reopened.events("m1")
    assert [(e.type, e.status) for e in events] == [("start", "started")]
    reopened.close()


def test_events_come_newest_first(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")
    with store.tx() as conn:
        for status in ("created", "starting", "started"):
            store.append(conn, op_id="o", resource_id="m", fsm="f", step=status, payload={},
                         event=store.new_event("x", status, "user"))
    assert [e.status for e in store.events("m")] == ["started", "starting", "created"]
    assert [e.status for e in store.events("m", limit=1)] == ["started"]
    store.close()


def test_compaction_keeps_events_and_running_operations(tmp_path: Path) -> None:
    now = [1000.0]
    store = Store(tmp_path / "w.db", clock=lambda: now[0])
    with store.tx() as conn:
        done = store.begin_operation(conn, resource_id="a", step="s", payload=ExitMachine())
        store.advance_operation(conn, done, step="end", payload=ExitMachine(), status="done")
        store.begin_operation(conn, resource_id="b", step="s", payload=ExitMachine())
        store.append(conn, op_id="x", resource_id="a", fsm="f", step="e", payload={},
                     event=store.new_event("exit", "stopped", "flyd"))
    now[0] = 5000.0
    removed = store.compact(keep_after=2000.0)
    assert removed == 2
    assert [e.step for e in store.history("a")] == ["e"]
    assert [e.step for e in store.history("b")] == ["s"]
    store.close()


def test_a_full_disk_is_a_clear_refusal_that_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db")
    with store.tx() as conn:
        store.append(conn, op_id="o1", resource_id="r", fsm="f", step="s", payload={})
    # SQLite's page limit stands in for a disk with no room left: the same SQLITE_FULL.
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")

    def grow() -> None:
        with store.tx() as conn:
            store.append(conn, op_id="o2", resource_id="r", fsm="f", step="s",
                         payload={"blob": "x" * 200_000})

    with pytest.raises(StorageFull) as refused:
        grow()
    assert refused.value.http_status == 507
    assert refused.value.to_wire()["status"] == "insufficient_storage"
    assert [e.op_id for e in store.history("r")] == ["o1"]
    store.db.execute(f"PRAGMA max_page_count = {pages * 1000}")  # space freed
    grow()
    assert [e.op_id for e in store.history("r")] == ["o1", "o2"]
    store.close()


def test_a_host_local_step_commits_without_fsync_and_everything_else_in_full(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "w.db")
    with store.tx(host_local=True) as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: no fsync
        store.append(conn, op_id="o", resource_id="r", fsm="start", step="spawn", payload={})
    with store.tx() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again
    with pytest.raises(RuntimeError), store.tx(host_local=True):
        raise RuntimeError("boom")
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # restored after a failure
    store.close()
    again = Store(tmp_path / "w.db")  # a host-local commit survives the worker's restart
    assert [e.step for e in again.history("r")] == ["spawn"]
    again.close()


def test_a_store_opened_without_fsync_stays_so_for_host_local_steps(tmp_path: Path) -> None:
    store = Store(tmp_path / "w.db", fsync=False)
    with store.tx(host_local=True):
        pass
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1
    store.close()
