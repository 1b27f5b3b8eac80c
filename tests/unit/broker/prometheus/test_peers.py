"""Which other brokers a query goes to when this host's store does not answer (pure)."""

from __future__ import annotations

from bodega.broker.prometheus.core.peers import store_peers
from bodega.wire.public.platform import Member


def broker(name: str, region: str, status: str = "alive", store: bool = True,
           role: str = "broker") -> Member:
    return Member(name=name, role=role, region=region, status=status,
                  meta={"url": f"https://{name}:1", **({"metrics": "yes"} if store else {})})


def test_live_brokers_with_a_store_but_this_one_nearest_first() -> None:
    members = [broker("me", "ams"), broker("b-syd", "syd"), broker("a-syd", "syd"),
               broker("z-ams", "ams"), broker("dead", "ams", status="dead"),
               broker("suspect", "ams", status="suspect"), broker("plain", "ams", store=False),
               broker("proxy", "ams", role="proxy")]
    assert store_peers(members, "me", "ams") == [
        "https://z-ams:1", "https://a-syd:1", "https://b-syd:1"]
    assert store_peers([broker("me", "ams")], "me", "ams") == []
