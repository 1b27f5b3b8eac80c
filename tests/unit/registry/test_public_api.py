"""The registry's public surface is deliberate: changing it should be a visible decision."""

from __future__ import annotations

import bodega.registry as registry


def test_the_public_surface() -> None:
    assert sorted(registry.__all__) == [
        "Addr", "Delivered", "Event", "EventKind", "Feed", "FeedLagged", "HostedNode",
        "InvalidRow", "Item", "ItemTooLarge", "MemberView", "Membership", "MembershipConfig",
        "Out", "Registry", "RegistryConfig", "RegistryNode", "Role", "RowChange", "Send",
        "Status", "Subscription", "Swim", "SwimConfig", "UnknownMember", "open_registry",
        "subscribe_http",
    ]
    assert all(hasattr(registry, name) for name in registry.__all__)


def test_the_registry_node_has_the_shape_daemons_code_against() -> None:
    import dataclasses

    fields = {f.name for f in dataclasses.fields(registry.RegistryConfig)}
    assert {"name", "role", "region", "data_dir", "keyring", "keyring_file",
            "bind_host", "bind_port",
            "advertise_host", "seeds", "meta", "swim", "sync_interval",
            "tombstone_ttl"} <= fields
    for node in (registry.RegistryNode, registry.HostedNode):
        _codes_like_a_registry(node)


def _codes_like_a_registry(node: type) -> None:
    import inspect

    for method, params in {
        "start": [], "stop": ["leave"], "put_owned": ["table", "key", "doc"],
        "delete_owned": ["table", "key"], "put_shared": ["table", "key", "doc"],
        "delete_shared": ["table", "key"], "get": ["table", "key"],
        "rows": ["table", "without", "filters"], "subscribe": ["table", "filters"], "routes": [],
        "writes_together": [],
    }.items():
        signature = inspect.signature(getattr(node, method))
        assert list(signature.parameters)[1:] == params, method
    assert isinstance(inspect.getattr_static(node, "gossip_addr"), property)
