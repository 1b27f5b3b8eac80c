"""What a deploy checks for room before it makes anything: its creates, per region and size."""

from __future__ import annotations

from bodega.deploy.core.plan import Current, Desired, plan
from bodega.deploy.room import RoomAsk, room_asks
from bodega.model.machine_config import Guest, MachineConfig

SMALL = Guest(cpus=1, memory_mb=256)
BIG = Guest(cpu_kind="performance", cpus=2, memory_mb=4096)


def want(group: str, guest: Guest, services: bool = True) -> Desired:
    return Desired(group=group, config=MachineConfig(image="v1", guest=guest),
                   has_services=services, has_checks=False)


def test_a_first_deploy_asks_room_for_every_machine_it_creates_standbys_included() -> None:
    first = plan([want("web", SMALL), want("worker", BIG, services=False)], [],
                 strategy="rolling", max_unavailable=1, ha=True, region="ams")
    # Two of each group: web's HA pair, worker's primary and its stopped standby (a
    # created machine holds its room until it first comes to rest).
    assert room_asks(first, "ams") == [RoomAsk(region="ams", guest=SMALL, count=2),
                                       RoomAsk(region="ams", guest=BIG, count=2)]


def test_a_deploy_that_only_updates_asks_only_that_its_region_exists() -> None:
    running = [Current(id=f"m{i}", group="web", state="started", region="ams",
                       config=MachineConfig(image="v0", guest=SMALL)) for i in range(2)]
    rolling = plan([want("web", SMALL)], running, strategy="rolling", max_unavailable=1,
                   ha=True, region="ams")
    assert room_asks(rolling, "ams") == [RoomAsk(region="ams", guest=Guest(), count=0)]
    # Its primary region moved: the region is checked though nothing is created there.
    assert room_asks(rolling, "xyz") == [RoomAsk(region="xyz", guest=Guest(), count=0)]
    canary = plan([want("web", SMALL)], running, strategy="canary", max_unavailable=1,
                  ha=True, region="ams")
    assert room_asks(canary, "ams") == [RoomAsk(region="ams", guest=SMALL, count=1)]


def test_without_a_region_anywhere_nothing_is_checked() -> None:
    first = plan([want("web", SMALL)], [], strategy="rolling", max_unavailable=1, ha=True,
                 region=None)
    assert room_asks(first, None) == []
