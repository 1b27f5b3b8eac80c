"""Before a deploy makes anything: its primary region and the regions its new machines
go to exist, and the new machines have room there.

A deploy that cannot place its machines should be refused before it creates the app
or records a release, not after (an app left ``pending``, a failed release blamed on a
machine that never existed). ``room_asks`` reads, from the plan alone, how many machines
of which size the deploy creates in each region, and asks for none in the app's primary
region when nothing is created there (a redeploy that only updates its machines still
names a region: it must be one the cluster has); ``check_room`` asks the broker's
placement simulation (``POST /v1/platform/placements``, which reserves nothing) whether
they fit, and raises the error a create would have met: an unknown region is the
broker's own 400 naming the cluster's regions, too little room a 412.

The check is advice, not a promise: the cluster may fill between it and the creates,
and then the create's own 412 ends the deploy as before.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.plan import Create, Plan
from bodega.model.errors import InsufficientCapacity
from bodega.model.machine_config import Guest
from bodega.model.plural import counted
from bodega.wire.public.fly import PlacementsRequest
from bodega.wire.public.machines_client import MachinesClient


class RoomAsk(BaseModel):
    """``count`` machines of ``guest`` that the deploy creates in ``region`` (none: only
    that the region exists)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    guest: Guest
    count: int


def room_asks(plan: Plan, primary_region: str | None) -> list[RoomAsk]:
    """The machines ``plan`` creates, counted per region and size, in first-seen order.

    A create without a region goes to the app's primary region; with neither, the
    broker picks the nearest region at create time, and nothing is checked here. The
    primary region is asked for last with no machines if no create goes there.
    """
    counts: dict[tuple[str, str], int] = {}
    guests: dict[tuple[str, str], Guest] = {}
    for stage in plan.stages:
        for action in stage.actions:
            if not isinstance(action, Create):
                continue
            region = action.region or primary_region
            if region is None:
                continue
            guest = action.config.guest or Guest()
            key = (region, guest.model_dump_json())
            counts[key] = counts.get(key, 0) + 1
            guests[key] = guest
    asks = [RoomAsk(region=region, guest=guests[(region, g)], count=n)
            for (region, g), n in counts.items()]
    if primary_region is not None and all(a.region != primary_region for a in asks):
        asks.append(RoomAsk(region=primary_region, guest=Guest(), count=0))
    return asks


def describe(guest: Guest) -> str:
    return f"{guest.cpus} {guest.cpu_kind} cpu, {guest.memory_mb} MB" + (
        f", {guest.gpus} {guest.gpu_kind or 'any'} gpu" if guest.gpus else "")


async def check_room(client: MachinesClient, asks: list[RoomAsk], app: str | None) -> None:
    """Raise what a create would meet if the asks cannot all be placed now.

    ``app`` names an existing app (its machines weigh on where new ones go); None for
    an app this deploy is about to create."""
    for ask in asks:
        placed = await client.placements(PlacementsRequest(
            region=ask.region, compute=ask.guest, count=ask.count, app=app))
        fit = sum(r.count for r in placed.regions)
        if fit < ask.count:
            raise InsufficientCapacity(
                f"insufficient capacity in {ask.region}: the deploy creates "
                f"{counted(ask.count, 'machine')} of {describe(ask.guest)} and "
                f"{'none fits' if fit == 0 else f'only {fit} fit'}; nothing was created "
                "(`bodega cluster workers` shows each worker's room)")
