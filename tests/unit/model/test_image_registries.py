"""Which of the cluster's image registries a pull tries, and in which order; where a push
goes (model/image_registries.py)."""

from __future__ import annotations

from bodega.model.image_registries import Advertised, cluster_registries, pull_order, push_order

H1, H2, H3 = "10.0.0.1:5000", "10.0.0.2:5000", "10.0.0.3:5000"


def test_a_pull_tries_its_own_hosts_registry_then_the_named_then_the_other_live_ones() -> None:
    advertised = [Advertised(H3, True), Advertised(H1, True), Advertised(H2, True)]
    assert pull_order(H1, H2, H2, advertised) == [H2, H1, H3]


def test_a_host_without_a_registry_tries_the_named_one_first() -> None:
    advertised = [Advertised(H1, True), Advertised(H2, True)]
    assert pull_order(H2, H1, None, advertised) == [H2, H1]


def test_a_lost_hosts_registry_comes_last_even_when_named_and_given() -> None:
    advertised = [Advertised(H1, False), Advertised(H2, True), Advertised(H3, True)]
    assert pull_order(H1, H1, None, advertised) == [H2, H3, H1]


def test_a_registry_with_one_live_worker_is_live() -> None:
    advertised = [Advertised(H1, False), Advertised(H1, True), Advertised(H2, False)]
    assert pull_order(H2, None, None, advertised) == [H1, H2]


def test_a_registry_outside_the_cluster_is_pulled_from_alone() -> None:
    advertised = [Advertised(H1, True), Advertised(H2, True)]
    assert pull_order("registry.example", H1, H1, advertised) == ["registry.example"]


def test_before_the_view_is_read_the_given_registry_is_the_clusters() -> None:
    assert pull_order(H1, H1, None, []) == [H1]
    assert cluster_registries(H1, []) == {H1}
    assert pull_order(H2, H1, None, []) == [H2]  # unknown: only where it names


def test_a_push_goes_to_the_brokers_own_then_every_other_live_one_never_a_dead_one() -> None:
    advertised = [Advertised(H1, False), Advertised(H3, True), Advertised(H2, True)]
    assert push_order(H2, advertised) == [H2, H3]
    assert push_order(H1, advertised) == [H2, H3]  # its own given one is on a lost host
    assert push_order(H1, []) == [H1]  # no worker advertises: as before, the given one
    assert push_order(None, []) == []
