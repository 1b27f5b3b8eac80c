"""What a deploy tells a script at the end (``bodega deploy --json``'s last line).

The release, how it ended, and each machine's fate: ``created``, ``updated``,
``destroyed``, ``skipped`` (already on the release's config), ``not_updated`` or
``failed``. Pure: built from the plan and the executor's outcome.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.plan import Create, Plan, Strategy
from bodega.deploy.execute import Outcome


class MachineFate(BaseModel):
    """What happened to one machine, in a deploy's last JSON line. Each fate carries the
    fields that say it (``relabelled`` for a skipped one, ``role`` for a created one, the
    ``step`` a failed one failed at), and only those: ``DeployReport.line`` leaves out
    what was never set, and keeps a ``null`` that was."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    group: str | None = None
    region: str | None = None
    action: Literal["created", "updated", "destroyed", "skipped", "not_updated", "failed"]
    relabelled: bool | None = None
    role: str | None = None
    step: str | None = None


class FailureReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    machine: str | None
    step: str
    reason: str


class DeployReport(BaseModel):
    """What a script reads at the end: the release, how it ended, each machine's fate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["result"]
    app: str
    release: str
    version: int
    strategy: Strategy
    status: Literal["complete", "failed"]
    machines: list[MachineFate]
    failure: FailureReport | None

    def line(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_unset=True))


def machine_fates(planned: Plan, outcome: Outcome) -> list[MachineFate]:
    """Each machine the deploy knew of and what happened to it: ``created``, ``updated``,
    ``destroyed`` (a canary or a cleaned-up green too), ``skipped`` (already current,
    ``relabelled`` when its release label was rewritten) or ``not_updated``."""
    groups: dict[str, str] = {}
    roles: dict[str, str] = {}
    for stage in planned.stages:
        for action in stage.actions:
            if isinstance(action, Create):
                machine_id = outcome.created.get(action.ref)
                if machine_id:
                    groups[machine_id], roles[machine_id] = action.group, action.role
            else:
                groups.setdefault(action.id, action.group)
    fates = [MachineFate(id=skipped.id, group=skipped.group, region=skipped.region,
                         action="skipped", relabelled=skipped.id in outcome.relabelled)
             for skipped in planned.skipped]
    for machine_id in outcome.created.values():
        gone = machine_id in outcome.destroyed
        fates.append(MachineFate(id=machine_id, group=groups.get(machine_id),
                                 action="destroyed" if gone else "created",
                                 role=roles.get(machine_id)))
    made = set(outcome.created.values())
    fates += [MachineFate(id=i, group=groups.get(i), action="updated") for i in outcome.updated]
    fates += [MachineFate(id=i, group=groups.get(i), action="destroyed")
              for i in outcome.destroyed if i not in made]
    fates += [MachineFate(id=i, group=groups.get(i), action="not_updated")
              for i in outcome.not_updated]
    return fates
