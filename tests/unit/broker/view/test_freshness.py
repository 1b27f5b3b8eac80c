"""Which of two docs of one machine (or volume) is newer, and the broker keeping the newer."""

from __future__ import annotations

from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import MemoryCatalog
from bodega.broker.view.core.freshness import newest, replaces, stamp
from bodega.broker.view.core.machine_index import MachineIndex
from bodega.broker.view.workers import Workers
from bodega.model.machine import Machine
from bodega.model.volume import Volume


def doc(updated_at: str | None, state: str = "started") -> Machine:
    d: dict[str, object] = {"id": "m1", "app": "a", "worker": "w1", "name": "n",
                            "state": state}
    if updated_at is not None:
        d["updated_at"] = updated_at
    return Machine.model_validate(d)


def test_a_zero_fraction_is_not_newer_than_a_later_microsecond() -> None:
    # As text "…:05Z" sorts after "…:05.000001Z"; as time it is a microsecond earlier.
    earlier, later = doc("2026-01-01T00:00:05Z"), doc("2026-01-01T00:00:05.000001Z")
    assert stamp(later) > stamp(earlier)
    assert replaces(later, earlier)
    assert not replaces(earlier, later)


def test_missing_or_bad_stamps_are_the_oldest() -> None:
    good = doc("2026-01-01T00:00:05Z")
    assert not replaces(doc(None), good)
    assert not replaces(doc("yesterday"), good)
    assert replaces(good, doc(None))
    assert replaces(doc("2026-01-01T00:00:05Z"), good)  # the same change, seen again
    assert replaces(good, None)


def test_newest_prefers_the_first_of_equals() -> None:
    a, b = doc("2026-01-01T00:00:05Z", "stopped"), doc("2026-01-01T00:00:05Z", "started")
    assert newest(a, b) is a
    assert newest(None, b) is b
    assert newest(None, None) is None
    assert newest(doc("2026-01-01T00:00:04Z"), b) is b


def test_the_index_ignores_an_older_doc_across_the_text_ordering_trap() -> None:
    index = MachineIndex()
    index.note(doc("2026-01-01T00:00:05.000001Z", "destroyed"))
    index.note(doc("2026-01-01T00:00:05Z", "started"))
    assert index.colocated("a") == {}
    assert not index.name_taken("a", "n")


async def test_a_volume_noted_at_its_create_gives_way_to_the_newer_row_of_its_attachment(
) -> None:
    # The broker noted the create's answer; the view's row since says which machine has it.
    created = Volume.model_validate({"id": "vol_1", "app": "a", "worker": "w1",
                                     "updated_at": "2026-01-01T00:00:05Z"})
    attached = created.model_copy(update={"attached_machine_id": "m1",
                                          "updated_at": "2026-01-01T00:00:05.5Z"})
    assert replaces(attached, created)
    assert not replaces(created, attached)
    catalog = MemoryCatalog()
    workers = Workers(catalog, Candidates(catalog), None)
    workers.note_volume(attached)
    workers.note_volume(created)  # an answer that left the worker before
    assert workers.volumes.get("vol_1") == attached
    await workers.aclose()
