"""A gossip key rotation's steps, and who has not taken each yet (pure).

memberlist's rotation, done for the operator in one command:

    install ──▶ every live member holds the new key ──▶ use ──▶ every live member seals
    with it ──▶ (a grace for packets in flight) ──▶ remove the others ──▶ every live
    member holds the new key alone

Each step is a keyring the coordinator publishes; a step is *taken* by a
member when the keyring it reports in its metadata (``keyring.KeyReport``)
satisfies the step's condition (who has not: ``membership/core/lagging.py``, as sealing
knows nothing of members). The order is what keeps gossip flowing:
while anyone may still seal with the old key everyone can open it, and once
anyone seals with the new key everyone can open that too. Members that are
dead or gone are not waited for; one that comes back with the old key alone
cannot gossip until it has caught up over HTTP (``docs/registry.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bodega.registry.sealing.core.keyring import GossipKey, KeyReport, Keyring


class StepName(StrEnum):
    INSTALL = "install"
    USE = "use"
    REMOVE = "remove"


@dataclass(frozen=True)
class Step:
    name: StepName
    keyring: Keyring  # what the coordinator publishes for this step
    key_id: str  # the new key

    def taken(self, report: KeyReport) -> bool:
        if self.name is StepName.INSTALL:
            return self.key_id in report.installed
        if self.name is StepName.USE:
            return report.primary == self.key_id
        return report.installed == frozenset(self.keyring.ids) and report.primary == self.key_id

    def describe(self) -> str:
        return {StepName.INSTALL: f"installed key {self.key_id}",
                StepName.USE: f"sealed with key {self.key_id}",
                StepName.REMOVE: f"removed every key but {self.key_id}"}[self.name]


def rotation_steps(current: Keyring, new: GossipKey) -> list[Step]:
    """The three keyrings a rotation from ``current`` to ``new`` publishes, in order."""
    if new.id in current.ids:
        raise ValueError(f"key {new.id} is already installed")
    installed = current.install(new)
    used = installed.use(new.id)
    return [Step(StepName.INSTALL, installed, new.id), Step(StepName.USE, used, new.id),
            Step(StepName.REMOVE, used.only_primary(), new.id)]

