"""`bodega up`'s identities: certificates renewed under load with no restart and no failed
request, each member's expiry shown by `bodega cluster members`, and a data dir from before
the secrets key (one `cluster-secret`) upgraded with its sealed secrets still opening."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.python_kit import machine_python

CONFIG = {"image": "local/app", "guest": {"cpus": 1, "memory_mb": 256}}
LIFETIME = 30.0  # seconds: every certificate is renewed at about twenty
PAST_THE_END = 3.0  # seconds the load runs on after the last first certificate expired


def small(*extra: str) -> list[str]:
    # Room for more than the one machine the load keeps: a create that follows a destroy
    # may be placed before the broker's view hears the room came back (immediate-or-cancel
    # on a view a tick behind), which is not what these tests are about.
    return ["--regions", "ams", "--workers-per-region", "1", "--worker-cpus", "4",
            "--worker-memory-mb", "2048", "--api-port", str(free_port()),
            "--proxy-port", str(free_port()),
            "--proxy-tls-port", str(free_port()), "--gossip-port", str(free_port()),
            "--registry-port", "0", "--machine-cidr", machine_cidr(150, 200), *extra]


def members(up: UpProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """`bodega cluster members`, as a user types it beside the cluster."""
    api = next(a for a in up.lines if "Machines API:" in a).split()[2].removesuffix("/v1")
    return subprocess.run([sys.executable, "-m", "bodega", "cluster", "members",
                           "--api-url", api, "--token", up.token(), *args],
                          capture_output=True, text=True, timeout=60, check=False)


async def expiries(up: UpProcess) -> dict[str, datetime.datetime]:
    done = await asyncio.to_thread(members, up, "--json")
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return {m["name"]: datetime.datetime.fromisoformat(m["meta"]["cert_expires"])
            for m in found}


async def test_certificates_are_renewed_under_load_and_members_show_their_expiry(
        tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    up = UpProcess(data, *small("--driver", "null", "--cert-validity", f"{LIFETIME:g}s"))
    failures: list[str] = []
    done = 0
    try:
        await up.start()
        await up.until_line("bodega is up")
        assert (await up.until_line("Internal links:")).startswith(
            "Internal links: mutual TLS, cluster CA sha256:")
        pids = {c["name"]: c["pid"] for c in up.state()["components"]}
        first = await expiries(up)
        assert set(first) == {"agent", "ams-1", "broker", "proxy"}  # the host's agent too
        table = await asyncio.to_thread(members, up)
        assert "CERT EXPIRES" in table.stdout.splitlines()[0]
        assert all(f"{v:%Y-%m-%dT%H:%M:%S}" in table.stdout for v in first.values())
        api = up.state()["api_url"]
        async with httpx.AsyncClient(base_url=api, timeout=30, headers={
                "authorization": f"Bearer {up.token()}"}) as client:
            await client.post("/v1/apps", json={"app_name": "steady", "org_slug": "personal"})

            async def load() -> None:
                nonlocal done
                while True:
                    made = await client.post("/v1/apps/steady/machines", json={"config": CONFIG})
                    if made.status_code != 200:
                        failures.append(f"create {made.status_code}: {made.text[:200]}")
                        await asyncio.sleep(0.1)
                        continue
                    gone = await client.delete(f"/v1/apps/steady/machines/{made.json()['id']}",
                                               params={"force": "true"})
                    if gone.status_code != 200:
                        failures.append(f"destroy {gone.status_code}: {gone.text[:200]}")
                    done += 1

            running = asyncio.create_task(load())
            deadline = asyncio.get_running_loop().time() + 3 * LIFETIME
            while True:  # until every member has a later certificate than its first
                now = await expiries(up)
                if all(now[name] > first[name] for name in first):
                    break
                assert asyncio.get_running_loop().time() < deadline, (now, first)
                await asyncio.sleep(1.0)
            # And on, past the end of every first certificate (notAfter is to the second).
            last = max(first.values()) + datetime.timedelta(seconds=PAST_THE_END)
            await asyncio.sleep(max(0.0, (last - datetime.datetime.now(datetime.UTC))
                                    .total_seconds()))
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
        state = up.state()["components"]
        assert {c["name"]: c["pid"] for c in state} == pids  # nothing restarted
        assert all(c["restarts"] == 0 for c in state)
        assert failures == []
        assert done > 20
    finally:
        await up.stop()
        await unwire(data)


APP = ("import os, sys, time; print(sys.argv[1], os.environ.get('DB_PASSWORD', '-'), flush=True)"
       "; time.sleep(600)")


@pytest.mark.skipif(os.geteuid() != 0, reason="machines as their own users need root")
async def test_an_older_data_dir_keeps_its_sealed_secrets_readable(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    value = f"s3cr3t-{uuid.uuid4().hex}"
    marker = f"bodega-upgrade-{uuid.uuid4().hex[:8]}"
    args = small("--driver", "process")
    up = UpProcess(data, *args)
    try:
        await up.start()
        await up.until_line("bodega is up")
        async with api_of(up) as client:
            await client.post("/v1/apps", json={"app_name": "vault", "org_slug": "personal"})
            sealed = await client.post("/v1/apps/vault/secrets",
                                       json={"values": {"DB_PASSWORD": value}})
            assert sealed.status_code == 200, sealed.text
    finally:
        await up.stop()
    # The data dir as an older bodega left it: one cluster-secret, the key the rows were
    # sealed with (the derivation from it is unchanged), and no secrets key.
    old = (data / "secrets-key").read_text()
    (data / "cluster-secret").write_text(old)
    (data / "secrets-key").unlink()
    again = UpProcess(data, *args)
    try:
        await again.start()
        await again.until_line("bodega is up")
        assert (data / "secrets-key").read_text().strip() == old.strip()
        assert not (data / "cluster-secret").exists()
        async with api_of(again) as client:
            config = {**CONFIG, "init": {"exec": [machine_python(), "-c", APP, marker]}}
            made = await client.post("/v1/apps/vault/machines", json={"config": config})
            assert made.status_code == 200, made.text
            deadline = asyncio.get_running_loop().time() + 60
            while not (said := printed(data, marker)):
                assert asyncio.get_running_loop().time() < deadline, again.output[-2000:]
                await asyncio.sleep(0.2)
        assert said == f"{marker} {value}"  # the secret opened with the key carried over
    finally:
        await again.stop()
        await unwire(data)


def printed(data: Path, marker: str) -> str:
    """The line the machine printed, from its log in the data dir ("" until it has)."""
    for log in data.rglob("machine.log"):
        for line in log.read_text(errors="replace").splitlines():
            if marker in line:
                return line.split("\t")[-1].strip() if "\t" in line else line.strip()
    return ""


def api_of(up: UpProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=up.state()["api_url"], timeout=60,
                             headers={"authorization": f"Bearer {up.token()}"})
