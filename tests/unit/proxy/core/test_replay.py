"""fly-replay's instruction read, its target machines chosen, and where it came from said."""

from __future__ import annotations

from bodega.proxy.core.replay import ReplayTo, candidates, parse_replay, source_header, source_of
from bodega.proxy.core.routes import Backend


def machine(mid: str, region: str, port: int = 8080) -> Backend:
    return Backend(mid, "web", region, "w1", "started", "10.0.0.1", port)


FLEET = [machine("a1", "ams", 8080), machine("a2", "ams", 8081), machine("s1", "syd", 8082)]


def test_the_instruction_is_read_as_fly_proxy_reads_it() -> None:
    assert parse_replay("region=syd;state=cart;src=10.0.0.1:8080") == ReplayTo(
        region="syd", state="cart", source="10.0.0.1:8080")
    assert parse_replay("instance=a2, app=shop , elsewhere=true,junk") == ReplayTo(
        instance="a2", app="shop", elsewhere=True)
    assert parse_replay("") == ReplayTo()


def test_candidates_by_region_instance_and_elsewhere() -> None:
    source = source_of(parse_replay("elsewhere=true;src=10.0.0.1:8080"), FLEET)
    assert source is not None
    assert source.machine_id == "a1"
    ids = [b.machine_id for b in candidates(ReplayTo(region="syd"), FLEET, source)]
    assert ids == ["s1"]
    assert [b.machine_id for b in candidates(ReplayTo(instance="a2"), FLEET, source)] == ["a2"]
    assert [b.machine_id for b in candidates(ReplayTo(elsewhere=True), FLEET, source)] == [
        "a2", "s1"]
    assert candidates(ReplayTo(region="fra"), FLEET, source) == []


def test_the_target_learns_where_the_request_came_from() -> None:
    assert source_header(ReplayTo(state="s"), FLEET[0]) == b"instance=a1;region=ams;state=s"
    assert source_header(ReplayTo(), None) == b""
