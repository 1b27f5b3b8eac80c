"""How `bodega status` and `bodega machine list` show a machine's host and standby pairs.

A machine whose host membership cannot reach reads ``started (host
unreachable)``: its worker's last word was ``started``, and nobody can say
more. A standby and a primary it names both ``started`` are two copies of one
program: after a takeover, while the primary's host is unreachable (the
primary may still run there), or until the broker stops the standby once the
primary's worker is back. Each such pair is one warning line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def state_label(machine: Mapping[str, Any]) -> str:
    """The machine's state, and its host's status when that is not ``ok``."""
    state = str(machine.get("state") or "")
    host = machine.get("host_status") or "ok"
    return state if host == "ok" else f"{state} (host {host})"


def both_started(machines: Sequence[Mapping[str, Any]]) -> list[str]:
    """One warning per standby started at the same time as a primary it stands by for."""
    by_id = {str(m.get("id")): m for m in machines}
    warnings = []
    for standby in sorted(machines, key=lambda m: str(m.get("id"))):
        config = standby.get("config") or standby.get("incomplete_config") or {}
        if standby.get("state") != "started":
            continue
        for primary_id in config.get("standbys") or ():
            primary = by_id.get(str(primary_id))
            if primary is None or primary.get("state") != "started":
                continue
            line = (f"Warning: {primary_id} and its standby {standby['id']} are both "
                    "started: two copies run")
            if (primary.get("host_status") or "ok") != "ok":
                line += f" ({primary_id}'s host is unreachable; it may still be running there)"
            elif (standby.get("host_status") or "ok") != "ok":
                line += f" ({standby['id']}'s host is unreachable)"
            warnings.append(line)
    return warnings
