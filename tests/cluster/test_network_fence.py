"""Networks apart with no flag at all: `bodega up --no-private-network`, as a user runs it.

Two workers (ams and syd, one each) and three apps: ``web`` and ``peer`` in the
organization's network, ``blue`` in a network of its own. Each machine runs the probe
(an HTTP server that says whether it can open a TCP connection). Over IPv4, the
machines' only addresses here:

- on one worker's bridge (layer 2), ``web`` reaches ``peer`` and not ``blue``;
- routed from one worker to the other (layer 3), ``web`` reaches ``peer`` and not
  ``blue``, and ``blue`` reaches ``blue``;
- the host still reaches every machine (the proxy, health checks).

The banner says the private network is off, and what still keeps networks apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import httpx
import pytest

from tests.cidr_kit import machine_cidr
from tests.cluster.private_net_kit import machine_config
from tests.cluster.up_kit import UpProcess, free_port, unwire

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

TOKEN = "fence-token"


async def started(http: httpx.AsyncClient, app: str, region: str) -> str:
    """A probe machine of ``app`` in ``region``, started: its IPv4 address."""
    created = await http.post(f"/v1/apps/{app}/machines",
                              json={"region": region, "config": machine_config()})
    assert created.status_code == 200, created.text
    machine = created.json()
    waited = await http.get(f"/v1/apps/{app}/machines/{machine['id']}/wait",
                            params={"state": "started", "timeout": 60})
    assert waited.status_code == 200, waited.text
    return str(machine["private_ip"])


async def serving(web: httpx.AsyncClient, address: str) -> None:
    """Wait until the probe at ``address`` answers: a machine is started before its
    program has bound its port."""
    for _ in range(300):
        with contextlib.suppress(httpx.TransportError):
            if (await web.get(f"http://{address}:8080/")).status_code == 200:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the probe at {address} never answered")


async def reaches(web: httpx.AsyncClient, source: str, target: str) -> bool:
    """Whether the machine at ``source`` opens a TCP connection to ``target``'s probe."""
    answer = await web.get(f"http://{source}:8080/connect",
                           params={"host": target, "port": "8080"})
    assert answer.status_code == 200, answer.text
    return answer.text == "connected"


async def test_machines_of_different_networks_do_not_meet_without_the_private_network(
        tmp_path: Path) -> None:
    api = free_port()
    up = UpProcess(tmp_path / "cluster", "--regions", "ams,syd", "--workers-per-region", "1",
                   "--worker-cpus", "4", "--worker-memory-mb", "2048",
                   "--api-port", str(api), "--proxy-port", str(free_port()),
                   "--proxy-tls-port", str(free_port()), "--machine-cidr",
                   machine_cidr(150, 200), "--token", TOKEN, "--log-level", "warning",
                   "--no-private-network")
    await up.start()
    try:
        await up.until_line("bodega is up", timeout=120)
        off = await up.until_line("Private network:")
        assert off.startswith("Private network: off (--private-network turns it on): "
                              "networks are still fenced apart over IPv4"), off
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api}", timeout=60, headers={
                "authorization": f"Bearer {TOKEN}"}) as http:
            for app, network in (("web", None), ("peer", None), ("blue", "blue")):
                made = await http.post("/v1/apps", json={
                    "app_name": app, "org_slug": "personal",
                    **({"network": network} if network else {})})
                assert made.status_code == 201, made.text
            web = await started(http, "web", "ams")
            peer_here, blue_here = (await started(http, "peer", "ams"),
                                    await started(http, "blue", "ams"))
            peer_there, blue_there = (await started(http, "peer", "syd"),
                                      await started(http, "blue", "syd"))
        async with httpx.AsyncClient(timeout=30) as probe:
            # The host reaches every machine: the proxy and health checks need it.
            for address in (web, peer_here, blue_here, peer_there, blue_there):
                await serving(probe, address)
            assert {target: await reaches(probe, web, target)
                    for target in (peer_here, blue_here, peer_there, blue_there)} == {
                peer_here: True, blue_here: False, peer_there: True, blue_there: False}
            assert await reaches(probe, blue_here, blue_there)
            assert not await reaches(probe, blue_there, peer_there)
    finally:
        await up.end()
        await unwire(tmp_path / "cluster")
