"""The address plan: fields in their places, one block per host, networks told apart."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.networking.core.sixpn import (
    Layout,
    cluster_prefix,
    host_field,
    network_field,
    network_key,
    network_mask,
)

LAYOUT = Layout(ipaddress.IPv6Network("fdaa:1:2::/48"))


def test_a_machine_address_carries_host_network_and_index() -> None:
    address = LAYOUT.machine(0x0d05, 0x00a7, 12)
    assert str(address) == "fdaa:1:2:d05:a7::c"
    fields = LAYOUT.fields(address)
    assert fields is not None
    assert (fields.host, fields.network, fields.machine) == (0x0d05, 0x00a7, 12)


def test_every_machine_of_a_host_is_in_its_one_block_whatever_its_network() -> None:
    block = LAYOUT.host_block(7)
    assert block.prefixlen == 64
    assert all(LAYOUT.machine(7, net, i) in block for net in (1, 300, 65535) for i in (2, 254))
    assert LAYOUT.machine(8, 1, 2) not in block


@given(st.integers(1, 65535), st.integers(1, 65535), st.integers(0, 2**48 - 1))
def test_fields_round_trip(host: int, network: int, index: int) -> None:
    fields = LAYOUT.fields(LAYOUT.machine(host, network, index))
    assert fields is not None
    assert (fields.host, fields.network, fields.machine) == (host, network, index)
    masked = int(LAYOUT.machine(host, network, index)) & int(network_mask())
    assert masked == int(LAYOUT.network_prefix(network))


def test_addresses_outside_the_cluster_have_no_fields() -> None:
    assert LAYOUT.fields("fdaa:1:3::5") is None
    assert LAYOUT.fields("10.0.0.1") is None
    assert LAYOUT.fields("not an address") is None


def test_host_and_network_zero_are_the_hosts_own() -> None:
    with pytest.raises(ValueError, match="hosts' own"):
        LAYOUT.machine(0, 5, 2)
    with pytest.raises(ValueError, match="hosts' own"):
        LAYOUT.machine(5, 0, 2)
    resolver = LAYOUT.fields(LAYOUT.resolver())
    assert resolver is not None
    assert (resolver.host, resolver.network) == (0, 0)


def test_fields_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        LAYOUT.machine(1 << 16, 1, 2)


def test_host_field_comes_from_the_machine_subnet() -> None:
    assert host_field(ipaddress.IPv4Network("10.209.5.0/24")) == 209 << 8 | 5
    with pytest.raises(ValueError, match="/24"):
        host_field(ipaddress.IPv4Network("10.209.0.0/16"))


def test_network_fields_are_stable_nonzero_and_differ_by_org() -> None:
    assert network_key("personal", None) == "personal/default"
    one, other = network_field("personal/default"), network_field("acme/default")
    assert one == network_field("personal/default")
    assert one != other
    assert 0 < one < 65536
    assert 0 < other < 65536


def test_the_cluster_prefix_is_a_unique_local_slash_48_per_cluster() -> None:
    a, b = cluster_prefix("abcde"), cluster_prefix("fghij")
    assert a.prefixlen == 48
    assert a != b
    assert a.subnet_of(ipaddress.IPv6Network("fdaa::/16"))
    with pytest.raises(ValueError, match="/48"):
        Layout(ipaddress.IPv6Network("fdaa::/32"))
