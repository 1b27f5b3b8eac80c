"""What the drain and rebalance cluster tests share: the API as an admin, where each machine
is, a machine that sleeps, a placement's refusals, requests through the proxy."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.cluster.deploy_kit import Cli
from tests.poll_kit import until
from tests.python_kit import machine_python


def api(cli: Cli) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=cli.env["BODEGA_API_URL"], timeout=30, headers={
        "authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"})


async def where(cli: Cli) -> dict[str, str]:
    """Every machine's worker, from the admin route the drain plans with."""
    async with api(cli) as client:
        answer = await client.get("/v1/cluster/machines")
        answer.raise_for_status()
        return {m["id"]: m["worker"] for m in answer.json()}


async def worker_of(cli: Cli, machine_id: str) -> str:
    """The worker the admin route names for ``machine_id``, once it lists it: the route reads
    the cluster's view, which hears of a machine made a moment ago within a gossip round."""
    async def listed() -> str | None:
        return (await where(cli)).get(machine_id)

    found: str = await until(listed, timeout=30.0, every=0.2, what=f"machine {machine_id} listed")
    return found


async def sleeper(cli: Cli, app: str, *extra: str) -> dict[str, Any]:
    made: dict[str, Any] = json.loads(await cli.ok(
        "machine", "run", "-a", app, "--region", "ams", *extra, "--json", "--",
        machine_python(), "-c", "import time; time.sleep(3600)"))
    return made


async def refusals(cli: Cli) -> dict[str, str]:
    placed = await cli.json("machine", "place", "--region", "ams", "--explain")
    return {r["worker"]: r["reason"] for r in placed["explain"][0].get("refusals", [])}

