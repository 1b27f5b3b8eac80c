"""What a running ``bodega up``'s processes use and say, read from ``/proc`` and its logs.

Every figure is per role (broker, worker, proxy, registry, agent, ...), summed over the
pids ``cluster.json`` names for it, so a cluster of 20 workers is compared with one of
4 as a whole host: CPU seconds (user+system, reaped children included), memory as PSS
(each page shared between processes counted once, split among them: the sum over the
processes is what the cluster holds of the host's memory, where RSS would count the
interpreter's shared pages once per process), and the ERROR and Traceback lines of
the components' logs.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

from bench.rigs.start_stages import cpu_seconds

# The first lines of a cluster's logs that a run reports (the count covers them all).
SHOWN_PROBLEMS = 20


@dataclass(frozen=True)
class Rest:
    """The idle cluster: cores each role used over the window, its PSS (MiB) at the end."""

    cores: dict[str, float]
    pss_mib: dict[str, float]


def roles(cluster: Path) -> dict[str, list[int]]:
    """Each role's pids in ``cluster.json`` (broker, worker, registry, proxy, agent, ...,
    and the fork server the components were forked from)."""
    found: dict[str, list[int]] = {}
    state = json.loads((cluster / "cluster.json").read_text())
    for part in state["components"]:
        if part.get("pid"):
            found.setdefault(str(part["role"]), []).append(int(part["pid"]))
    if state.get("fork_server"):  # what the components' shared pages are counted in
        found["fork-server"] = [int(state["fork_server"]["pid"])]
    return found


def cpu_by_role(cluster: Path) -> dict[str, float]:
    return {role: sum(cpu_seconds(pid) for pid in pids) for role, pids in roles(cluster).items()}


def pss_kib(pid: int) -> int:
    """The process's proportional set size (``Pss:`` of ``/proc/<pid>/smaps_rollup``), KiB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise ValueError(f"no Pss line in /proc/{pid}/smaps_rollup")


def pss_by_role(cluster: Path) -> dict[str, float]:
    """MiB of PSS per role."""
    return {role: sum(pss_kib(pid) for pid in pids) / 1024
            for role, pids in roles(cluster).items()}


async def at_rest(cluster: Path, seconds: float) -> Rest:
    """Cores each role uses over ``seconds`` with nothing asked of the cluster, after 10 s
    of rest (the workers' first publications and syncs settle), and its memory at the end."""
    await asyncio.sleep(10)
    before, began = cpu_by_role(cluster), time.monotonic()
    await asyncio.sleep(seconds)
    after, spent = cpu_by_role(cluster), time.monotonic() - began
    memory = pss_by_role(cluster)
    return Rest({role: (after[role] - before.get(role, 0.0)) / spent for role in after}, memory)


def log_problems(logs: Path) -> tuple[int, list[str]]:
    """How many ERROR and Traceback lines the components' logs hold, and the first of
    them, each after its log's name."""
    count, shown = 0, list[str]()
    for log in sorted(logs.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "ERROR" in line or "Traceback" in line:
                count += 1
                if len(shown) < SHOWN_PROBLEMS:
                    shown.append(f"{log.name}: {line}")
    return count, shown
