"""Whether a process is held by the cgroup v1 freezer, as the kernel says it.

The freezer's own state file answers, not the process's scheduler state: a frozen task
sleeps uninterruptibly ("D"), but so does a running one waiting on a busy disk for a
moment, which made a thawed machine look frozen on a loaded host.
"""

from __future__ import annotations

from pathlib import Path

FREEZER = Path("/sys/fs/cgroup/freezer")


def frozen(pid: int) -> bool:
    """True when ``pid``'s freezer cgroup is FROZEN (or on its way: FREEZING)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            state = (FREEZER / path.lstrip("/") / "freezer.state").read_text().strip()
            return state != "THAWED"
    return False
