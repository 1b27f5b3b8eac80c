"""``bodega cluster`` and ``bodega regions``: who is in the cluster and where there is room.

``bodega cluster key ...`` (the gossip keyring) is in ``cluster_keys.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bodega.cli.cluster_keys import key
from bodega.cli.errors import friendly
from bodega.cli.session import ApiUrl, ContextName, Json, Token, call, show_json, table

cluster = typer.Typer(help="Look at the cluster.", no_args_is_help=True)
cluster.add_typer(key, name="key")


@cluster.command("members")
@friendly
def members(api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None, json: Json = False) -> None:
    """Members as the broker's registry sees them: alive, suspect, dead or left, and when
    each one's certificate expires (it is renewed before then)."""
    found = call(api_url, token, lambda c: c.members(), context=context)
    if json:
        show_json(found)
        return
    table(["NAME", "ROLE", "REGION", "STATUS", "INCARNATION", "GENERATION", "ADDR",
           "CERT EXPIRES"],
          [(m["name"], m.get("role"), m.get("region"), m.get("status"), m.get("incarnation"),
            m.get("generation"), m.get("addr"), (m.get("meta") or {}).get("cert_expires", "-"))
           for m in found])


@cluster.command("workers")
@friendly
def workers(api_url: ApiUrl = None, token: Token = None,
            context: ContextName = None, json: Json = False) -> None:
    """Workers with their capacity, as the broker places against it."""
    found = call(api_url, token, lambda c: c.workers(), context=context)
    if json:
        show_json(found)
        return

    def used(w: dict[str, Any]) -> str:
        totals, usage = w.get("totals") or {}, w.get("used") or {}
        return (f"{usage.get('millicpus', 0) / 1000:g}/{totals.get('cpus', 0)} cpu, "
                f"{usage.get('memory_mb', 0)}/{totals.get('memory_mb', 0)} MB")

    table(["NAME", "REGION", "STATUS", "CORDONED", "USED", "URL"],
          [(w["name"], w.get("region"), w.get("status"), w.get("cordoned"), used(w),
            w.get("url")) for w in found])


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
          [(r["code"], r["name"], r["capacity"]) for r in found["Regions"]])
