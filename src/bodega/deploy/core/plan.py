"""The deploy planner: what the app should run and what it runs in, the ordered steps out.

Pure: no I/O. The executor carries a ``Plan`` out stage by stage; the actions of
a stage run together, and a stage that waits is done only when each of its
machines is started and healthy. The strategies follow flyctl's:

- ``rolling``: per process group, machines sorted by id; stopped ones are updated
  together (they stay stopped); of the started ones one goes first alone, then
  the rest in pools of ``max_unavailable`` (a count, or a fraction of the group).
- ``immediate``: every machine updated in one stage, nothing waited on.
- ``canary``: one extra machine per group, waited on, destroyed, then rolling.
- ``bluegreen``: a green machine per blue one, all waited on, then every blue one
  destroyed; a failure before that switch destroys the greens (``cleanup_before``).

A group without machines is created: with ``ha``, two machines if it has
services, else one and a stopped standby naming it. Groups gone from the config
are destroyed last.

A machine already on the release's config (``drift``: the same config, release
number aside) is left alone, whatever the strategy: it is listed in ``skipped``
and, once everything else succeeded, only its release label is rewritten in
place (``Relabel``: no restart, no cordon). A machine that should run but does
not (failed, or stopped by its own crash) is never current: an update restarts it.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from bodega.deploy.core.drift import differences, labels_to_set
from bodega.model.machine_config import MachineConfig
from bodega.model.plural import span

Strategy = Literal["rolling", "immediate", "canary", "bluegreen"]
STRATEGIES: tuple[Strategy, ...] = ("rolling", "immediate", "canary", "bluegreen")
RESTING = frozenset({"created", "stopped", "suspended"})


class PlanError(ValueError):
    """The deploy cannot be planned (bluegreen without checks, an unknown strategy)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Current(_Frozen):
    """A machine the app runs now, as the planner needs to know it."""

    id: str
    group: str
    state: str
    region: str
    config: MachineConfig
    crashed: bool = False  # stopped because its process failed, not because it was asked to

    @property
    def runs(self) -> bool:
        """Meant to run: started, on its way, failed or crashed (a deploy restarts it and waits).

        Only a machine someone put to rest (created, stopped, suspended) stays at rest.
        """
        return self.crashed or self.state not in RESTING


class Desired(_Frozen):
    """What one process group should run."""

    group: str
    config: MachineConfig
    has_services: bool
    has_checks: bool


class Create(_Frozen):
    kind: Literal["create"] = "create"
    ref: str  # a name for the machine this creates, for later steps and the report
    group: str
    config: MachineConfig
    region: str | None = None
    start: bool = True
    standby_for: str | None = None  # the ref of the machine this one stands by for
    role: Literal["new", "standby", "canary", "green"] = "new"


class Update(_Frozen):
    kind: Literal["update"] = "update"
    id: str
    group: str
    config: MachineConfig
    started: bool  # it runs now: cordon first, wait after; a stopped one stays stopped


class Destroy(_Frozen):
    kind: Literal["destroy"] = "destroy"
    id: str  # a machine id, or the ref of a machine this plan created
    group: str


class Relabel(_Frozen):
    """A current machine's labels (its release number) rewritten in place: nothing restarts."""

    kind: Literal["relabel"] = "relabel"
    id: str
    group: str
    metadata: dict[str, str]


Action = Annotated[Create | Update | Destroy | Relabel, Field(discriminator="kind")]


class Skipped(_Frozen):
    """A machine the release leaves as it is: it already runs the release's config."""

    id: str
    group: str
    region: str


class Stage(_Frozen):
    name: str
    actions: list[Action]
    wait: bool = True


class Plan(_Frozen):
    strategy: Strategy
    stages: list[Stage]
    leases: list[str]  # every existing machine the deploy touches, leased up front
    cleanup_before: int = 0  # a failure in a stage before this one destroys what was created
    skipped: list[Skipped] = []  # machines already on the release's config

    def machines_touched(self) -> list[str]:
        return [a.id if not isinstance(a, Create) else a.ref
                for s in self.stages for a in s.actions]


def pool_size(max_unavailable: float, group_size: int) -> int:
    """Machines updated at once after the first: a count, or a fraction (< 1) of the group."""
    if max_unavailable < 1:
        return max(1, math.floor(max_unavailable * group_size))
    return max(1, int(max_unavailable))


def plan(desired: list[Desired], current: list[Current], *, strategy: Strategy,
         max_unavailable: float = 1, ha: bool = True, region: str | None = None) -> Plan:
    if strategy not in STRATEGIES:
        raise PlanError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    wanted = {d.group: d for d in desired}
    by_group: dict[str, list[Current]] = {}
    present: set[str] = set()  # groups with machines, current or not
    skipped: list[Skipped] = []
    relabels: list[Action] = []
    for machine in sorted(current, key=lambda m: m.id):
        present.add(machine.group)
        want = wanted.get(machine.group)
        if want is not None and is_current(machine, want):
            skipped.append(Skipped(id=machine.id, group=machine.group, region=machine.region))
            if labels := labels_to_set(machine.config, want.config):
                relabels.append(Relabel(id=machine.id, group=machine.group, metadata=labels))
            continue
        by_group.setdefault(machine.group, []).append(machine)
    if strategy == "bluegreen" and any(by_group.get(d.group) and not d.has_checks
                                       for d in desired):
        raise PlanError("bluegreen needs health checks on every process group with machines: "
                        "add [checks] or service checks, or use another strategy")
    stages: list[Stage] = []
    cleanup_before = 0
    existing = [g for g in sorted(wanted) if by_group.get(g)]
    if strategy == "rolling":
        stages += _rolling(wanted, by_group, existing, max_unavailable)
    elif strategy == "immediate":
        stages += [Stage(name="update all", wait=False, actions=[
            _update(m, wanted[g]) for g in existing for m in by_group[g]])]
    elif strategy == "canary":
        stages += [
            Stage(name="canary", actions=[
                Create(ref=f"canary-{g}", group=g, config=wanted[g].config,
                       region=by_group[g][0].region, role="canary") for g in existing]),
            Stage(name="destroy canary", wait=False, actions=[
                Destroy(id=f"canary-{g}", group=g) for g in existing]),
        ]
        cleanup_before = 1
        stages += _rolling(wanted, by_group, existing, max_unavailable)
    else:
        blue = {m.id for g in existing for m in by_group[g]}
        running = {m.id for g in existing for m in by_group[g] if m.runs}
        greens = [_green(m, wanted[g], blue, running) for g in existing for m in by_group[g]]
        stages += [Stage(name="create green", actions=greens)]
        cleanup_before = len(stages)
        stages += [Stage(name="destroy blue", wait=False, actions=[
            Destroy(id=m.id, group=g) for g in existing for m in by_group[g]])]
    stages += _first_machines([wanted[g] for g in sorted(wanted) if g not in present],
                              ha, region)
    gone = [m for g in sorted(by_group) if g not in wanted for m in by_group[g]]
    if gone:
        stages.append(Stage(name="destroy removed groups", wait=False,
                            actions=[Destroy(id=m.id, group=m.group) for m in gone]))
    # Last: a machine is labelled with this release only once the release has succeeded.
    stages.append(Stage(name="label current machines", wait=False, actions=relabels))
    stages = [s for s in stages if s.actions]
    leases = sorted({a.id for s in stages for a in s.actions
                     if isinstance(a, Update | Destroy | Relabel) and not a.id.startswith(
                         ("canary-", "green-"))})
    return Plan(strategy=strategy, stages=stages, leases=leases,
                cleanup_before=cleanup_before, skipped=skipped)


def is_current(machine: Current, want: Desired) -> bool:
    """Already on the release's config, and as it should be: at rest, or started.

    A machine meant to run that does not (failed, crashed, on its way somewhere) is
    not current: the update is what brings it back.
    """
    if machine.crashed or machine.state not in RESTING | {"started"}:
        return False
    return not differences(machine.config, _keep_standbys(machine, want))


def _keep_standbys(machine: Current, want: Desired) -> MachineConfig:
    """The new config, keeping the machine's ``standbys`` (which machine it stands by for)
    and its volume (a mount the release names by the volume's name, as fly.toml does)."""
    config = want.config
    if machine.config.standbys:
        config = config.model_copy(update={"standbys": list(machine.config.standbys)})
    return keep_volumes(machine.config, config)


def keep_volumes(have: MachineConfig, want: MachineConfig) -> MachineConfig:
    """``want`` with each mount of a volume name ``have`` mounts at the same path given
    ``have``'s volume: an update keeps the data a machine has."""
    held = {(m.name, m.path): m.volume for m in have.mounts or []}
    mounts = [m.model_copy(update={"volume": held[(m.name, m.path)]})
              if (m.name, m.path) in held else m for m in want.mounts or []]
    return want.model_copy(update={"mounts": mounts}) if mounts else want


def _green(machine: Current, want: Desired, blue: set[str], running: set[str]) -> Create:
    """A green twin of a blue machine: started if it is, standing by for its primary's twin
    (or for its primary itself, when that one is current and stays).

    A standby that runs beside its running primary (the primary's host came back after a
    takeover, and the broker has not yet stopped the standby) gets a stopped twin: the
    primary's twin runs, and two running copies are what the standby watch undoes."""
    primary = next(iter(machine.config.standbys or ()), None)
    start = machine.runs and not (primary is not None and primary in running)
    if primary is not None and primary not in blue:
        return Create(ref=f"green-{machine.id}", group=want.group,
                      config=_keep_standbys(machine, want), region=machine.region,
                      start=start, role="green")
    return Create(ref=f"green-{machine.id}", group=want.group, config=want.config,
                  region=machine.region, start=start,
                  standby_for=f"green-{primary}" if primary else None, role="green")


def _update(machine: Current, want: Desired) -> Update:
    return Update(id=machine.id, group=want.group, config=_keep_standbys(machine, want),
                  started=machine.runs)


def _rolling(wanted: dict[str, Desired], by_group: dict[str, list[Current]],
             groups: list[str], max_unavailable: float) -> list[Stage]:
    stages: list[Stage] = []
    for group in groups:
        machines = by_group[group]
        resting = [m for m in machines if not m.runs]
        running = [m for m in machines if m.runs]
        if resting:
            stages.append(Stage(name=f"{group}: update stopped machines", wait=False,
                                actions=[_update(m, wanted[group]) for m in resting]))
        if running:
            stages.append(Stage(name=f"{group}: update first machine",
                                actions=[_update(running[0], wanted[group])]))
        size = pool_size(max_unavailable, len(machines))
        rest = running[1:]
        for start in range(0, len(rest), size):
            first, last = start + 2, min(start + size, len(rest)) + 1
            stages.append(Stage(name=f"{group}: update {span(first, last, len(running))}",
                                actions=[_update(m, wanted[group])
                                         for m in rest[start:start + size]]))
    return stages


def _first_machines(groups: list[Desired], ha: bool, region: str | None) -> list[Stage]:
    """A group's first machines: two with services under ``ha``, else one and a standby."""
    primaries: list[Action] = []
    standbys: list[Action] = []
    for want in groups:
        primaries.append(Create(ref=f"{want.group}-1", group=want.group, config=want.config,
                                region=region))
        if not ha:
            continue
        if want.has_services:
            primaries.append(Create(ref=f"{want.group}-2", group=want.group,
                                    config=want.config, region=region))
        else:
            standbys.append(Create(ref=f"{want.group}-standby", group=want.group,
                                   config=want.config, region=region, start=False,
                                   standby_for=f"{want.group}-1", role="standby"))
    return [Stage(name="create machines", actions=primaries),
            Stage(name="create standbys", wait=False, actions=standbys)]
