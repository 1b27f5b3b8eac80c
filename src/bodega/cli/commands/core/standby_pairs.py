"""How `bodega status` and `bodega machine list` show a machine's host and standby pairs.

A machine whose host membership cannot reach reads ``started (host
unreachable)``: its worker's last word was ``started``, and nobody can say
more. A standby and a primary it names both ``started`` are two copies of one
program: after a takeover, while the primary's host is unreachable (the
primary may still run there), or until the broker stops the standby once the
primary's worker is back. Each such pair is one warning line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bodega.model.machine import Machine


def state_label(machine: Machine) -> str:
    """The machine's state, and its host's status when that is not ``ok``."""
    host = machine.host_status or "ok"
    return machine.state if host == "ok" else f"{machine.state} (host {host})"


def both_started(machines: Sequence[Machine]) -> list[str]:
    """One warning per standby started at the same time as a primary it stands by for."""
    by_id = {m.id: m for m in machines}
    warnings = []
    for standby in sorted(machines, key=lambda m: m.id):
        if standby.state != "started":
            continue
        for primary_id in standby.standbys():  # from incomplete_config on an unreachable host
            primary = by_id.get(primary_id)
            if primary is None or primary.state != "started":
                continue
            line = (f"Warning: {primary_id} and its standby {standby.id} are both "
                    "started: two copies run")
            if (primary.host_status or "ok") != "ok":
                line += f" ({primary_id}'s host is unreachable; it may still be running there)"
            elif (standby.host_status or "ok") != "ok":
                line += f" ({standby.id}'s host is unreachable)"
            warnings.append(line)
    return warnings
