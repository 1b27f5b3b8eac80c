"""A broker's view in the simulation: what it believes of each host, and how that moves.

Each simulated broker keeps one ``CandidateTable`` per region, as the real
broker does. A host's change reaches it as a ``Publication`` (a gossip delay
after the change; an older one arriving late is ignored, as the registry's
last-writer-wins does). On top of that the broker adjusts its own rows as
the real one does: a yes is counted on the winner at once (``claimed``), a
no makes it believe what the worker reports free (``refused``). Each broker
also notes the shape of every create it is asked for in the region's
``ShapeMix``, and whether it found no worker (``missed``): the recent
arrivals a fragmentation term is measured against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bodega.model.capacity import Ask, Usage
from bodega.placement import CandidateTable
from bodega.sim.fleet import SimHost
from bodega.sim.policies import SimPolicy


@dataclass(frozen=True)
class Publication:
    """A host's row as it was at a change, on its way to one broker."""

    broker: int
    host: int
    used: Usage
    version: int
    status: str
    images: frozenset[str]


class SimBroker:
    """One broker's view: a table per region, refreshed by publications, adjusted by answers."""

    def __init__(self, hosts: list[SimHost], policy: SimPolicy, seed: int) -> None:
        self.policy = policy
        self.rng = random.Random(seed)
        self.tables: dict[str, CandidateTable] = {}
        for host in hosts:
            self.tables.setdefault(host.region, CandidateTable(host.region)).put(host.candidate())
        self.seen = {host.name: host.version for host in hosts}

    def view(self, host: SimHost, used: Usage, version: int, status: str,
             images: frozenset[str]) -> None:
        """A publication arrived; an older one arriving late is ignored (last writer wins)."""
        if version > self.seen[host.name]:
            self.seen[host.name] = version
            self.tables[host.region].put(host.candidate(used, status, images))

    def asked(self, region: str, ask: Ask) -> None:
        """A create came to this broker: its shape joins the region's recent mix."""
        table = self.tables.get(region)
        if table is not None:
            table.shapes.note(ask)

    def missed(self, region: str) -> None:
        """The create just asked for found no worker in the region."""
        table = self.tables.get(region)
        if table is not None:
            table.shapes.missed()

    def claimed(self, host: SimHost, ask: Ask) -> None:
        table = self.tables[host.region]
        i = table.index(host.name)
        assert i is not None
        row = table.candidate(i)
        table.put(host.candidate(row.used.plus(host.totals, ask), row.status, row.images))

    def refused(self, host: SimHost) -> None:
        """The worker said no and what it has free: believe it until its next row."""
        self.tables[host.region].put(host.candidate())
