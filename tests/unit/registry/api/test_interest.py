"""Which subscriptions a change touches: those reading a changed table, and one made while
its tables changed."""

from __future__ import annotations

from bodega.registry.api.core.interest import Stamps, touched


def test_only_subscriptions_reading_a_changed_table_are_touched() -> None:
    interests = {"s1": frozenset({"machines"}), "s2": frozenset({"machines", "apps"}),
                 "s3": frozenset({"workers"}), "s4": frozenset()}
    assert touched(interests, ["machines"]) == {"s1", "s2"}
    assert touched(interests, ["apps", "workers"]) == {"s2", "s3"}
    assert touched(interests, ["volumes"]) == set()
    assert touched(interests, []) == set()


def test_stamps_tell_a_change_that_came_meanwhile() -> None:
    stamps = Stamps()
    stamps.bump(["machines"])
    since = stamps.snapshot()
    assert not stamps.moved(since, ["machines", "apps"])
    stamps.bump(["apps", "apps"])
    assert stamps.moved(since, ["machines", "apps"])
    assert not stamps.moved(since, ["machines"])
    assert not stamps.moved(stamps.snapshot(), ["apps"])
