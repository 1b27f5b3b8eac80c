"""Commands on one app against a real broker (in-process workers, null driver): the app
comes from the bodega.toml where they run (or ``-c``), and the API's refusals reach the
user naming the command's flags, not the API's query parameters."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx

from tests.integration.broker.broker_kit import ADMIN, Cluster, in_process_cluster, machine


async def bodega(url: str, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BODEGA_APP"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, "--api-url", url, "--token", ADMIN, cwd=cwd,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def with_app(c: Cluster, api: httpx.AsyncClient, app: str) -> str:
    """A started machine of ``app``, made through the API; its id."""
    made = await api.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
    assert made.status_code == 201, made.text
    created = await api.post(f"/v1/apps/{app}/machines", json=machine())
    assert created.status_code == 200, created.text
    c.sync()
    return str(created.json()["id"])


async def test_logs_and_machine_commands_read_the_app_from_bodega_toml(
        tmp_path: Path) -> None:
    here = tmp_path / "web-app"
    here.mkdir()
    (here / "bodega.toml").write_text('app = "web"\n')
    async with in_process_cluster(tmp_path / "cluster") as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            machine_id = await with_app(c, api, "web")
        url = c.brokers[0].url
        code, out, err = await bodega(url, "logs", cwd=here)
        assert (code, err) == (0, ""), err
        code, out, err = await bodega(url, "machine", "list", "-q", cwd=here)
        assert (code, out.split()) == (0, [machine_id]), err
        # -c names the file (or its directory) from anywhere else.
        for config in (here, here / "bodega.toml"):
            code, out, err = await bodega(url, "machine", "list", "-q", "-c", str(config),
                                          cwd=tmp_path)
            assert (code, out.split()) == (0, [machine_id]), err
        code, out, err = await bodega(url, "logs", "-c", str(here), "--machine", "nosuch",
                                      cwd=tmp_path)
        assert (code, err.splitlines()) == (1, ["Error: machine not found: nosuch"])
        # -a wins over the bodega.toml.
        code, out, err = await bodega(url, "logs", "-a", "other", cwd=here)
        assert (code, err.splitlines()) == (1, ["Error: app not found: other"])


async def test_a_refused_destroy_names_force_as_the_cli_spells_it(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            machine_id = await with_app(c, api, "web")
            # The API's own answer names its query parameter: right for API clients.
            refused = await api.delete(f"/v1/apps/web/machines/{machine_id}")
            assert refused.status_code == 412, refused.text
            assert refused.json()["error"].endswith("stop it first or use force=true")
        url = c.brokers[0].url
        code, out, err = await bodega(url, "machine", "destroy", machine_id, "-a", "web")
        assert (code, err.splitlines()) == (1, [
            f"Error: failed_precondition: unable to destroy machine {machine_id}, not "
            "currently stopped, suspended or failed; stop it first or use --force"])
        code, out, err = await bodega(url, "machine", "destroy", machine_id, "-a", "web",
                                      "--force")
        assert (code, out) == (0, f"Machine {machine_id}: destroy requested\n"), err


async def test_a_job_the_cluster_cannot_find_asks_for_its_app_with_a(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        url = c.brokers[0].url
        for command in ("status", "cancel", "logs"):
            code, _, err = await bodega(url, "jobs", command, "nosuch")
            assert (code, err.splitlines()) == (1, [
                "Error: job not found: nosuch (name its app with -a APP)"]), command
