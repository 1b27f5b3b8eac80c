"""Which live members have not taken a key rotation's step yet, from the keyrings they
report in their metadata (pure): membership's side of a rotation (``sealing/core/rotation.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from bodega.registry.membership.core.members import MemberView
from bodega.registry.sealing.core.keyring import REPORT_META, KeyReport
from bodega.registry.sealing.core.rotation import Step


def lagging(members: Iterable[MemberView], step: Step) -> list[str]:
    """Live members (alive or suspect) whose reported keyring has not taken ``step``; an
    agent's tenants hold no keys (their agent seals for them) and never lag."""
    return sorted(m.name for m in members
                  if m.status.live and not m.host
                  and not step.taken(KeyReport.parse(m.meta.get(REPORT_META))))
