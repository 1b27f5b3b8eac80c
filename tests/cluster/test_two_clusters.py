"""Two `bodega up` clusters on one host, and what each refuses or remembers.

Two real clusters with different data dirs (and API/proxy ports and machine
ranges) come up side by side on default, freely picked gossip ports and both
serve creates, each with an image registry on a port of its own picked free
(no flag given); a third that asks for a port or a machine range one of them
holds is refused in one line naming the address or range and the flag. A
restarted `bodega up` keeps its gossip and registry ports, and moves (and says
so) one that was taken meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, in_cluster, unwire

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


def small(api: int, proxy: int, cidr: str) -> tuple[str, ...]:
    return ("--regions", "ams", "--workers-per-region", "1", "--worker-cpus", "2",
            "--worker-memory-mb", "1024", "--api-port", str(api), "--proxy-port", str(proxy),
            "--proxy-tls-port", str(free_port()),
            "--machine-cidr", cidr, "--log-level", "warning")


async def create_and_start(api: int, token: str, app: str) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api}", headers=headers,
                                 timeout=60) as http:
        made = await http.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
        assert made.status_code == 201, made.text
        created = await http.post(f"/v1/apps/{app}/machines", json={"config": {
            "image": "local/sleeper", "init": {"exec": ["sleep", "300"]}}})
        assert created.status_code == 200, created.text
        mid = created.json()["id"]
        waited = await http.get(f"/v1/apps/{app}/machines/{mid}/wait",
                                params={"state": "started", "timeout": 60})
        assert waited.status_code == 200, waited.text
        machine = (await http.get(f"/v1/apps/{app}/machines/{mid}")).json()
        assert machine["state"] == "started"
        members = (await http.get("/v1/cluster/members")).json()
        return {"machine": machine, "members": members}


def gossip_ports(data_dir: Path) -> dict[str, int]:
    return dict(json.loads((data_dir / "ports.json").read_text())["gossip"])


def registry_port(data_dir: Path) -> int:
    return int(json.loads((data_dir / "ports.json").read_text())["registry"])


async def test_two_clusters_side_by_side_and_a_third_is_refused_in_one_line(
        tmp_path: Path) -> None:
    cidr_a, cidr_b = machine_cidr(110, 140), machine_cidr(180, 200)
    api_a, proxy_a, api_b, proxy_b = free_port(), free_port(), free_port(), free_port()
    one = UpProcess(tmp_path / "one", *small(api_a, proxy_a, cidr_a))
    two = UpProcess(tmp_path / "two", *small(api_b, proxy_b, cidr_b))
    await one.start()
    await two.start()
    try:
        await asyncio.gather(one.until_line("bodega is up"), two.until_line("bodega is up"))
        ports_a, ports_b = gossip_ports(one.data_dir), gossip_ports(two.data_dir)
        # The host's agent alone gossips: the others are its tenants.
        assert set(ports_a) == set(ports_b) == {"agent"}
        assert not set(ports_a.values()) & set(ports_b.values())
        # Each its own image registry, on a port picked free, named in its cluster.json.
        registries = [registry_port(one.data_dir), registry_port(two.data_dir)]
        assert registries[0] != registries[1]
        for up, port in zip((one, two), registries, strict=True):
            (registry,) = [c for c in up.state()["components"] if c["role"] == "registry"]
            assert registry["registry"] == f"127.0.0.1:{port}"

        seen_a, seen_b = await asyncio.gather(
            create_and_start(api_a, one.token(), "first"),
            create_and_start(api_b, two.token(), "second"))
        # Each cluster knows only its own four members, though both name them alike.
        for seen in (seen_a, seen_b):
            assert sorted(m["name"] for m in seen["members"]) == ["agent", "ams-1", "broker",
                                                                  "proxy"]
        assert in_cluster(seen_a["machine"]["private_ip"], one.data_dir, cidr_a)
        assert in_cluster(seen_b["machine"]["private_ip"], two.data_dir, cidr_b)
        assert not in_cluster(seen_a["machine"]["private_ip"], two.data_dir, cidr_b)

        # A third cluster on the first one's machine range: one line, naming --machine-cidr.
        clash = UpProcess(tmp_path / "three", *small(free_port(), free_port(), cidr_a))
        await clash.start()
        assert await clash.wait() == 1
        assert len(clash.lines) == 1, clash.output
        assert clash.lines[0].startswith(f"Error: machine range {cidr_a} overlaps ")
        assert f"used by the bodega cluster in {one.data_dir}" in clash.lines[0]
        assert "--machine-cidr" in clash.lines[0]
        assert not (tmp_path / "three" / "cluster.json").exists()

        # ...and on the second one's API port: one line, naming the address and --api-port.
        taken = UpProcess(tmp_path / "four", *small(api_b, free_port(), f"10.{250}.0.0/16"))
        await taken.start()
        assert await taken.wait() == 1
        assert taken.lines == [f"Error: cannot listen on 127.0.0.1:{api_b} (TCP): address "
                               "already in use; move it with --api-port"]
    finally:
        codes = await asyncio.gather(one.stop(), two.stop())
        await unwire(one.data_dir)
        await unwire(two.data_dir)
    assert list(codes) == [0, 0], one.output + "\n" + two.output


async def test_restarted_up_keeps_its_gossip_ports_and_moves_a_taken_one(
        tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    args = ("--driver", "null", *small(free_port(), free_port(), "10.251.0.0/16"))
    first = await UpProcess(data, *args).start()
    try:
        await first.until_line("bodega is up")
        before = gossip_ports(data)
        registry = registry_port(data)
    finally:
        assert await first.stop() == 0, first.output

    # Restarted as it was, it keeps its gossip port...
    again = await UpProcess(data, *args).start()
    try:
        await again.until_line("bodega is up")
        assert gossip_ports(data) == before
    finally:
        assert await again.stop() == 0, again.output

    # ...and moves it, saying so, when another program took it meanwhile.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as squatter:
        squatter.bind(("127.0.0.1", before["agent"]))
        again = await UpProcess(data, *args).start()
        try:
            await again.until_line("bodega is up")
            after = gossip_ports(data)
            assert set(after) == {"agent"}
            assert after["agent"] != before["agent"]
            assert registry_port(data) == registry  # the images it holds keep their names
            moved = [line for line in again.lines if "is taken now" in line]
            assert moved == [f"agent: gossip port {before['agent']} is taken now; it gossips on "
                             f"{after['agent']} instead (remembered in {data / 'ports.json'})"]
            # Every component is reached at the agent's address: it gossips for them all.
            gossip = {c["name"]: c["gossip"] for c in again.state()["components"]
                      if c["role"] not in ("registry", "metrics-store")}
            assert set(gossip.values()) == {f"127.0.0.1:{after['agent']}"}
        finally:
            assert await again.stop() == 0, again.output
