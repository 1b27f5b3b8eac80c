"""The registry's public surface is deliberate: changing it should be a visible decision."""

from __future__ import annotations

import bodega.registry as registry


def test_the_public_surface() -> None:
    assert sorted(registry.__all__) == [
        "Addr", "Delivered", "Event", "EventKind", "Feed", "FeedLagged", "Item", "ItemTooLarge",
        "MemberView", "Membership", "MembershipConfig", "Out", "Role", "Send", "SimClock",
        "SimNet", "Status", "Swim", "SwimConfig", "UnknownMember",
    ]
    assert all(hasattr(registry, name) for name in registry.__all__)
