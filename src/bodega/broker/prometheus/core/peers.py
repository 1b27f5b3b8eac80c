"""Which other brokers a query may go to when this host's store does not answer; pure.

A broker whose host runs a store says so in its member's metadata
(``metrics: yes``); every store scrapes the whole cluster, so any of them answers
a query as this host's would. Those of this broker's region come first (the
nearest), then the rest, each group by name; members SWIM does not hold alive
are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

from bodega.wire.public.platform import Member

STORE_FLAG = "metrics"  # member metadata: "yes" on a broker whose host runs a store


def store_peers(members: Iterable[Member], me: str, region: str) -> list[str]:
    """The internal URLs of the other live brokers with a store, nearest first."""
    found = [m for m in members if m.role == "broker" and m.status == "alive"
             and m.name != me and m.meta.get(STORE_FLAG) == "yes" and m.meta.get("url")]
    found.sort(key=lambda m: (m.region != region, m.name))
    return [m.meta["url"] for m in found]
