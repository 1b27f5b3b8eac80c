from __future__ import annotations

from bodega.model.ids import MACHINE_ID_RE, MARK_DIGITS, new_machine_id, worker_mark


def test_a_workers_ids_start_with_its_mark_and_keep_flys_shape() -> None:
    for worker in ("ams-1", "ams-2", "syd-worker-17"):
        ids = {new_machine_id(worker) for _ in range(200)}
        assert len(ids) == 200
        assert all(MACHINE_ID_RE.match(i) for i in ids)
        assert {i[:MARK_DIGITS] for i in ids} == {worker_mark(worker)}
    assert worker_mark("ams-1") != worker_mark("ams-2")
    unmarked = {new_machine_id()[:MARK_DIGITS] for _ in range(200)}
    assert len(unmarked) > 1  # no worker named: the whole id is random
