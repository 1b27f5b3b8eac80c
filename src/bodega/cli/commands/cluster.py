"""``bodega cluster`` and ``bodega regions``: who is in the cluster and where there is room.

``bodega cluster rebalance`` (moves that even out a lopsided fleet) is in ``hosts.py``,
beside the drain it shares its rules with.

``bodega cluster key ...`` (the gossip keyring) is in ``cluster_keys.py``,
``bodega cluster token ...`` (join tokens) in ``cluster_tokens.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.commands.cluster_keys import key
from bodega.cli.commands.cluster_tokens import token
from bodega.cli.commands.hosts import rebalance
from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json, table
from bodega.cli.session.errors import friendly
from bodega.model.answer import Answer

if TYPE_CHECKING:
    from bodega.wire.public.platform import Member, WorkerStatus


class RegistryListing(Answer):
    """One of the cluster's image registries as ``bodega cluster registries`` shows it."""

    registry: str
    push: int | None = None  # its place in a push's order; None: its host is lost
    regions: list[str] = []
    workers: list[str] = []

cluster = typer.Typer(help="Look at the cluster.", no_args_is_help=True)
cluster.add_typer(key, name="key")
cluster.add_typer(token, name="token")
cluster.command("rebalance")(friendly(rebalance))


@cluster.command("members")
@friendly
def members(api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None, json: Json = False) -> None:
    """Members as the broker's registry sees them: alive, or unreachable (suspect, dead or
    left) since when, and when each one's certificate expires (it is renewed before then).
    A host that went away stays listed as long as the view holds its rows. On a host with a
    registry agent, its processes gossip through it: their ADDR reads ``via <agent>``."""
    found = call(api_url, token, lambda c: c.members(), context=context)
    if json:
        show_json(found)
        return
    table(["NAME", "ROLE", "REGION", "STATUS", "SINCE", "INCARNATION", "GENERATION", "ADDR",
           "CERT EXPIRES"],
          [(m.name, m.role, m.region, member_label(m), m.since or "-", m.incarnation,
            m.generation, f"via {m.host}" if m.host else m.addr,
            m.meta.get("cert_expires", "-"))
           for m in found])


def member_label(member: Member) -> str:
    """``alive``, or its host's status with membership's word for it: ``unreachable
    (dead)``."""
    host = member.host_status or "ok"
    if host == "ok" or host == member.status:
        return member.status
    return f"{host} ({member.status})"


@cluster.command("workers")
@friendly
def workers(api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None, json: Json = False) -> None:
    """Workers with their capacity, as the broker places against it."""
    found = call(api_url, token, lambda c: c.workers(), context=context)
    if json:
        show_json(found)
        return

    def used(w: WorkerStatus) -> str:
        millicpus, memory = (w.used.millicpus, w.used.memory_mb) if w.used else (0, 0)
        cpus, total_memory = (w.totals.cpus, w.totals.memory_mb) if w.totals else (0, 0)
        return f"{millicpus / 1000:g}/{cpus} cpu, {memory}/{total_memory} MB"

    def isolations(w: WorkerStatus) -> str:
        if not w.totals or not w.totals.isolations:
            return "-"
        accel = w.totals.vm_accel
        return ",".join(f"vm({accel})" if name == "vm" and accel else name
                        for name in w.totals.isolations)

    table(["NAME", "REGION", "STATUS", "CORDONED", "USED", "ISOLATION", "URL"],
          [(w.name, w.region, w.status, cordon_label(w), used(w), isolations(w), w.url)
           for w in found])


def cordon_label(w: WorkerStatus) -> str:
    """``draining`` for a worker cordoned for a drain, else whether it is cordoned (blank for
    a worker that never said)."""
    if w.cordoned and w.cordon_reason:
        return w.cordon_reason
    return "" if w.cordoned is None else str(w.cordoned)


@cluster.command("registries")
@friendly
def registries(api_url: ApiUrl = None, token: Token = None,
               context: ContextName = None, json: Json = False) -> None:
    """The cluster's image registries: every server host runs one, its workers advertise
    it. PUSH is the order a push goes to the live ones (this API's host's first, as
    `GET /v1/cluster` lists them); a lost host's is listed with no PUSH, and workers pull
    from it only when no other answers."""
    info = call(api_url, token, lambda c: c.cluster_info(), context=context)
    found = call(api_url, token, lambda c: c.workers(), context=context)
    listed = info.image_registries or ([info.image_registry] if info.image_registry else [])
    advertised: dict[str, list[WorkerStatus]] = {}
    for worker in found:
        if worker.image_registry:
            advertised.setdefault(worker.image_registry, []).append(worker)
    rows = [RegistryListing(registry=registry, push=listed.index(registry) + 1
                            if registry in listed else None,
                            workers=[w.name for w in advertised.get(registry, [])],
                            regions=sorted({w.region or "" for w in advertised.get(registry, [])}))
            for registry in [*listed, *sorted(set(advertised) - set(listed))]]
    if json:
        show_json(rows)
        return
    table(["REGISTRY", "PUSH", "REGIONS", "WORKERS"],
          [(r.registry, r.push or "- (lost)", ",".join(r.regions) or "-",
            ",".join(r.workers) or "-") for r in rows])


@friendly
def regions(size: Annotated[str, typer.Option(help="Machine size to count room for")]
            = "shared-cpu-1x", api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None,
            json: Json = False) -> None:
    """Regions and how many more machines of a size each can take."""
    found = call(api_url, token, lambda c: c.regions(size=size), context=context)
    if json:
        show_json(found)
        return
    table(["CODE", "NAME", f"CAPACITY ({size})"],
          [(r.code, r.name, r.capacity) for r in found.Regions])
