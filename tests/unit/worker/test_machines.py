"""The machine lifecycle against a fake driver: states, events, capacity, leases, policies."""

from __future__ import annotations

import asyncio

import pytest

from bodega.model.capacity import Ask
from bodega.model.errors import BadRequest, Conflict, NotFound, PreconditionFailed
from bodega.model.ids import new_machine_id
from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.daemon import Worker
from bodega.worker.drivers.base import Capabilities
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.store.ledger import CapacityRejected

W = tuple[Worker, FakeDriver]


def config(memory_mb: int = 256, **extra: object) -> MachineConfig:
    return MachineConfig.model_validate(
        {"image": "app:1", "guest": {"cpus": 1, "memory_mb": memory_mb}, **extra}
    )


async def create(w: Worker, **kw: object) -> str:
    values: dict[str, object] = {"app": "web", "config": config()}
    values.update(kw)
    row, _nonce = await w.machines.creation.create(CreateMachineBody.model_validate(values))
    await w.machines.settle()
    return row.id


def events(w: Worker, machine_id: str) -> list[tuple[str, str, str]]:
    return [(e.type, e.status, e.source) for e in w.store.events(machine_id)]


async def test_create_then_start_records_events_newest_first(worker: W) -> None:
    w, driver = worker
    mid = await create(w)
    assert w.machines.get(mid).state == "started"
    assert events(w, mid) == [
        ("start", "started", "flyd"), ("start", "starting", "flyd"),
        ("launch", "created", "user"),
    ]
    assert [c for c in driver.calls if c[1] == mid] == [("prepare", mid), ("start", mid)]


async def test_a_launch_spawns_the_spec_its_create_readied_and_later_starts_build_their_own(
        worker: W) -> None:
    """The create's prepare readies the spec its launch spawns (the driver's start need not
    prepare it again); a start after a stop, or of a machine created without a launch,
    builds and readies its own."""
    w, driver = worker

    def specs(mid: str) -> list[tuple[int, bool]]:
        return sorted((t.spec.start_seq, t.spec.prepared) for t in driver.tasks.values()
                      if t.spec.machine_id == mid)

    launched = await create(w)
    first = w.machines.get(launched).start_seq
    assert specs(launched) == [(first, True)]
    await w.machines.stop(launched, signal="SIGTERM")
    driver.exit(launched, ExitStatus(exit_code=0))
    await w.machines.settle()
    await w.machines.start(launched)
    await w.machines.settle()
    assert specs(launched) == [(first, True), (w.machines.get(launched).start_seq, False)]
    assert w.machines.get(launched).start_seq > first

    resting = await create(w, skip_launch=True)
    await w.machines.start(resting)
    await w.machines.settle()
    assert specs(resting) == [(w.machines.get(resting).start_seq, False)]


async def test_skip_launch_leaves_it_created_and_holding_its_room(worker: W) -> None:
    w, _ = worker
    mid = await create(w, skip_launch=True)
    row = w.machines.get(mid)
    assert (row.state, row.holds_compute) == ("created", True)
    assert w.ledger.usage().memory_mb == 256


async def test_stop_releases_compute_and_records_a_requested_exit(worker: W) -> None:
    w, driver = worker
    mid = await create(w)
    await w.machines.stop(mid, signal="SIGTERM")
    await w.machines.settle()
    row = w.machines.get(mid)
    assert (row.state, row.holds_compute) == ("stopped", False)
    exit_event = w.store.events(mid, 1)[0]
    assert (exit_event.type, exit_event.status) == ("exit", "stopped")
    assert exit_event.request is not None
    assert exit_event.request.exit_event is not None
    assert exit_event.request.exit_event.requested_stop is True
    assert exit_event.request.exit_event.exit_code == 143
    assert w.ledger.usage().memory_mb == 0
    assert not driver.running(mid)


async def test_start_of_a_stopped_machine_must_win_room_again(worker: W) -> None:
    w, _ = worker
    mid = await create(w, config=config(memory_mb=512))
    await w.machines.stop(mid)
    await w.machines.settle()
    await create(w, config=config(memory_mb=768), name="hog")
    with pytest.raises(CapacityRejected, match="memory: needs 512 MB, 256 MB free"):
        await w.machines.start(mid)
    assert w.machines.get(mid).state == "stopped"


async def test_create_claims_a_reservation_exactly_once(worker: W) -> None:
    w, _ = worker
    reservation = w.ledger.reserve(Ask(cpus=1, memory_mb=256), "web", ttl=30)
    assert w.ledger.usage().memory_mb == 256
    mid = await create(w, reservation_id=reservation.id)
    assert w.ledger.usage().memory_mb == 256  # the machine holds it now, not both
    with pytest.raises(Conflict, match="already claimed"):
        await create(w, reservation_id=reservation.id, name="second")
    assert w.machines.get(mid).state == "started"


async def test_a_reservation_smaller_than_the_machine_is_refused(worker: W) -> None:
    w, _ = worker
    reservation = w.ledger.reserve(Ask(cpus=1, memory_mb=256), "web", ttl=30)
    with pytest.raises(Conflict, match="smaller"):
        await create(w, reservation_id=reservation.id, config=config(memory_mb=512))


async def test_create_without_room_fails_and_leaves_nothing(worker: W) -> None:
    w, _ = worker
    with pytest.raises(CapacityRejected, match="memory"):
        await create(w, config=config(memory_mb=2048))
    assert w.machines.store.db.execute("SELECT count(*) FROM machines").fetchone()[0] == 0


async def test_idempotency_key_returns_the_same_machine(worker: W) -> None:
    w, _ = worker
    first = await create(w, idempotency_key="k1")
    again = await create(w, idempotency_key="k1", name="other")
    assert again == first
    assert w.machines.store.db.execute("SELECT count(*) FROM machines").fetchone()[0] == 1


async def test_a_retry_is_answered_while_the_first_try_still_runs(worker: W) -> None:
    w, _ = worker
    fixed = new_machine_id()  # a broker derives the id from the key: a retry names it too
    mid = await create(w, idempotency_key="k2", machine_id=fixed)
    lock = await w.machines.locks.acquire(mid)  # as if its start were still running
    try:
        again = await asyncio.wait_for(create(w, idempotency_key="k2", machine_id=fixed), 5)
    finally:
        lock.release()
    assert again == mid


async def test_names_are_unique_per_app_until_destroyed(worker: W) -> None:
    w, _ = worker
    mid = await create(w, name="one")
    with pytest.raises(Conflict, match="already exists"):
        await create(w, name="one")
    await w.machines.destroy(mid, force=True)
    await w.machines.settle()
    await create(w, name="one")


async def test_a_made_up_name_that_collides_is_made_up_again(worker: W) -> None:
    w, _ = worker
    await create(w, name="aged-thunder-1000")
    mid = await create(w, name="aged-thunder-1000", generated_name=True)
    assert w.machines.get(mid).name not in ("aged-thunder-1000", "")


async def test_process_exit_follows_the_restart_policy(worker: W) -> None:
    w, driver = worker
    mid = await create(w, config=config(restart={"policy": "on-failure", "max_retries": 1}))
    driver.exit(mid, ExitStatus(exit_code=1))
    await w.machines.settle()
    row = w.machines.get(mid)
    assert (row.state, row.restarts, row.start_seq) == ("started", 1, 2)
    driver.exit(mid, ExitStatus(exit_code=1))
    await w.machines.settle()
    row = w.machines.get(mid)
    assert (row.state, row.holds_compute) == ("stopped", False)
    statuses = [(e.type, e.status) for e in w.store.events(mid) if e.type == "exit"]
    assert statuses == [("exit", "stopped"), ("exit", "restarting")]


async def test_restart_policy_no_stops_and_auto_destroy_destroys(worker: W) -> None:
    w, driver = worker
    keep = await create(w, config=config(restart={"policy": "no"}), name="keep")
    gone = await create(w, config=config(restart={"policy": "no"}, auto_destroy=True),
                        name="gone")
    driver.exit(keep, ExitStatus(exit_code=0))
    driver.exit(gone, ExitStatus(exit_code=0))
    await w.machines.settle()
    assert w.machines.get(keep).state == "stopped"
    assert w.machines.get(gone).state == "destroyed"


async def test_an_exit_that_is_not_restarted_comes_to_rest_through_the_state_machine(
    worker: W,
) -> None:
    w, driver = worker
    mid = await create(w, config=config(restart={"policy": "no"}))
    w.machines.spares_changed.clear()
    driver.exit(mid, ExitStatus(exit_code=0))
    await w.machines.settle()
    row = w.machines.get(mid)
    assert (row.state, row.holds_compute) == ("stopped", False)
    steps = [(e.fsm, e.step) for e in w.store.history(mid)]
    # The exit is noted, then the machine rests through its own logged operation.
    noted = steps.index(("supervise", "exit"))
    assert steps[noted + 1:] == [("exit_machine", "stopped")] * 2  # begun, then done
    assert [op for op in w.store.running_operations() if op.resource_id == mid] == []
    assert w.machines.spares_changed.is_set()  # its namespace is idle: a launcher may park


async def test_update_makes_a_new_version_and_replaces_the_old(worker: W) -> None:
    w, driver = worker
    mid = await create(w)
    old = w.machines.get(mid).instance_id
    with pytest.raises(Conflict, match="current_version"):
        await w.machines.update(mid, config(), current_version="01STALE")
    await w.machines.update(mid, config(memory_mb=512, env={"V": "2"}), current_version=old)
    await w.machines.settle()
    row = w.machines.get(mid)
    assert row.instance_id != old
    assert len(row.instance_id) == 26
    assert row.state == "started"
    assert row.config.env == {"V": "2"}
    versions = w.actions.versions(mid)
    assert [v.version for v in versions] == [row.instance_id, old]
    assert w.ledger.usage().memory_mb == 512
    assert len(driver.running(mid)) == 1


async def test_update_that_does_not_fit_is_refused_with_409(worker: W) -> None:
    w, _ = worker
    mid = await create(w)
    with pytest.raises(Conflict, match="aborted: could not reserve resource"):
        await w.machines.update(mid, config(memory_mb=2048))
    assert w.machines.get(mid).memory_mb == 256


async def test_update_with_skip_launch_keeps_a_stopped_machine_stopped(worker: W) -> None:
    w, driver = worker
    mid = await create(w)
    await w.machines.stop(mid)
    await w.machines.settle()
    await w.machines.update(mid, config(env={"A": "1"}), skip_launch=True)
    await w.machines.settle()
    row = w.machines.get(mid)
    assert (row.state, row.holds_compute) == ("stopped", False)
    assert not driver.running(mid)


async def test_destroying_a_started_machine_needs_force(worker: W) -> None:
    w, driver = worker
    mid = await create(w)
    with pytest.raises(PreconditionFailed, match="force"):
        await w.machines.destroy(mid)
    await w.machines.destroy(mid, force=True)
    await w.machines.settle()
    assert w.machines.get(mid).state == "destroyed"
    assert ("destroy", mid) in driver.calls
    assert w.ledger.usage().memory_mb == 0
    with pytest.raises(NotFound):
        await w.machines.destroy(mid, force=True)


async def test_leases_guard_mutations_and_refresh_keeps_the_nonce(worker: W) -> None:
    w, _ = worker
    mid = await create(w)
    lease = w.actions.acquire_lease(mid, 60, "deploy", "me", None)
    with pytest.raises(Conflict, match="lease currently held"):
        await w.machines.stop(mid)
    with pytest.raises(Conflict, match="lease currently held"):
        w.actions.acquire_lease(mid, 60, "other", "you", None)
    refreshed = w.actions.acquire_lease(mid, 120, "", "me", lease.nonce)
    assert refreshed.nonce == lease.nonce
    assert refreshed.expires_at > lease.expires_at
    await w.machines.stop(mid, nonce=lease.nonce)
    await w.machines.settle()
    w.actions.release_lease(mid, lease.nonce)
    with pytest.raises(NotFound, match="lease not found"):
        w.actions.lease(mid)


async def test_create_with_lease_ttl_returns_a_nonce(worker: W) -> None:
    w, _ = worker
    row, nonce = await w.machines.creation.create(
        CreateMachineBody(app="web", config=config(), lease_ttl=30)
    )
    await w.machines.settle()
    assert nonce is not None
    assert w.actions.lease(row.id).nonce == nonce


async def test_metadata_changes_without_a_new_version(worker: W) -> None:
    w, _ = worker
    mid = await create(w)
    version = w.machines.get(mid).instance_id
    w.actions.set_metadata(mid, {"role": "primary"})
    assert w.actions.metadata(mid) == {"role": "primary"}
    with pytest.raises(PreconditionFailed):
        w.actions.set_metadata(mid, {"role": "x"}, version="01OTHER")
    w.actions.set_metadata(mid, {"role": None})
    assert w.actions.metadata(mid) == {}
    assert w.machines.get(mid).instance_id == version


async def test_signal_and_exec_need_a_started_machine(worker: W) -> None:
    w, driver = worker
    mid = await create(w, skip_launch=True)
    with pytest.raises(PreconditionFailed, match="not started"):
        await w.actions.signal(mid, "SIGHUP")
    await w.machines.start(mid)
    await w.machines.settle()
    await w.actions.signal(mid, "SIGHUP")
    assert driver.running(mid)[0].signals == [1]
    with pytest.raises(BadRequest, match="unknown signal"):
        await w.actions.signal(mid, "SIGWHAT")
    result = await w.actions.exec(mid, ["echo", "hi"], 5, None, None)
    assert result.exit_code == 0


async def test_an_exec_racing_its_programs_exit_is_refused_as_not_running(worker: W) -> None:
    """The program ended, and its worker has not yet recorded it: the machine still reads
    started, but there is nothing to run the command in."""
    w, driver = worker
    mid = await create(w)
    await w.machines.settle()
    driver.exit(mid, ExitStatus(exit_code=0))
    with pytest.raises(PreconditionFailed, match="program is not running"):
        await w.actions.exec(mid, ["echo", "hi"], 5, None, None)


async def test_a_driver_that_runs_a_command_refuses_configs_without_one(worker: W) -> None:
    w, driver = worker
    driver.capabilities = Capabilities(needs_command=True, control=driver)
    with pytest.raises(BadRequest, match=r"the fake driver runs config\.init\.exec"):
        await create(w)


async def test_a_failed_start_leaves_the_machine_failed_with_an_event(worker: W) -> None:
    w, driver = worker
    driver.fail_next_start("exec: no such file")
    mid = await create(w)
    row = w.machines.get(mid)
    assert (row.state, row.holds_compute) == ("failed", False)
    last = w.store.events(mid, 1)[0]
    assert (last.type, last.status) == ("start", "failed")
    assert last.request is not None
    assert last.request.model_dump(exclude_none=True) == {"error": "exec: no such file",
                                                          "step": "spawn"}



async def test_a_first_try_looks_for_an_earlier_one_once(worker: W) -> None:
    """A create with an idempotency key and an id asks its store for an earlier try once,
    in the transaction that commits it."""
    w, _ = worker
    lookups: list[str] = []
    w.machines.store.db.set_trace_callback(
        lambda sql: lookups.append(sql) if "idempotency_key = " in sql else None)
    try:
        await create(w, idempotency_key="k3", machine_id=new_machine_id())
    finally:
        w.machines.store.db.set_trace_callback(None)
    assert len(lookups) == 1, lookups
