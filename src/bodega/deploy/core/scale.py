"""Scaling, pure: how many machines each region of a process group gains or loses, and the
rolling plan that moves every machine to a new size.

``bodega scale count N --region a,b`` means N machines in each region named (without
``--region``, in the one region the group runs in). Machines removed are the stopped
ones first, then the newest (highest id), so the longest-running ones stay.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.plan import Current, Plan, Stage, Update
from bodega.model.machine_config import Guest, MachineConfig


class RegionChange(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    have: int
    want: int
    create: int = 0
    destroy: list[str] = []
    template: MachineConfig | None = None  # the config new machines get


def count_changes(machines: list[Current], group: str, count: int,
                  regions: list[str]) -> list[RegionChange]:
    if count < 0:
        raise ValueError("count must be 0 or more")
    mine = sorted((m for m in machines if m.group == group), key=lambda m: m.id)
    if not mine:
        raise ValueError(f"process group {group!r} has no machines: deploy it first")
    if not regions:
        present = sorted({m.region for m in mine})
        if len(present) > 1:
            raise ValueError(f"group {group!r} runs in {', '.join(present)}: name the regions "
                             "with --region")
        regions = present
    template = _template(mine)
    changes = []
    for region in regions:
        here = [m for m in mine if m.region == region]
        if count >= len(here):
            changes.append(RegionChange(region=region, have=len(here), want=count,
                                        create=count - len(here), template=template))
            continue
        doomed = ([m for m in here if m.state != "started"]
                  + sorted((m for m in here if m.state == "started"), key=lambda m: m.id,
                           reverse=True))[:len(here) - count]
        changes.append(RegionChange(region=region, have=len(here), want=count,
                                    destroy=[m.id for m in doomed]))
    return changes


def _template(machines: list[Current]) -> MachineConfig:
    """A new machine's config: a serving machine's (never a standby's ``standbys``)."""
    source = next((m for m in machines if not m.config.standbys), machines[0])
    return source.config.model_copy(update={"standbys": None})


def vm_plan(machines: list[Current], guest: Guest) -> Plan:
    """Every machine to ``guest``, rolling: stopped ones together, started ones one by one."""
    ordered = sorted(machines, key=lambda m: m.id)
    resting = [m for m in ordered if not m.runs]
    running = [m for m in ordered if m.runs]

    def update(m: Current) -> Update:
        return Update(id=m.id, group=m.group, config=m.config.model_copy(update={"guest": guest}),
                      started=m.runs)

    stages = [Stage(name="resize stopped machines", wait=False,
                    actions=[update(m) for m in resting])] if resting else []
    stages += [Stage(name=f"resize {i + 1} of {len(running)}", actions=[update(m)])
               for i, m in enumerate(running)]
    return Plan(strategy="rolling", stages=stages, leases=[m.id for m in ordered])
