"""`bodega secrets` and `bodega logs`, the real command against a real worker and broker."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.python_kit import machine_python

from .fleet_kit import TOKEN, fleet, serving, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

TICKER = ("import time\n"
          "i = 0\n"
          "while True:\n"
          "    print('tick', i, flush=True); i += 1; time.sleep(0.2)\n")


async def bodega(api_url: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", *args, "--api-url", api_url,
        env={**os.environ, "BODEGA_API_TOKEN": TOKEN, "COLUMNS": "200"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_secrets_and_logs_commands(tmp_path: Path) -> None:
    value = f"cli-s3cr3t-{uuid.uuid4().hex}"
    async with fleet(tmp_path) as f:
        await f.worker(f"cw-{os.getpid() % 10000}", 1)
        await f.broker()
        url = f.daemons["broker"].url
        async with f.api() as api:
            await until(lambda: serving(api))
            await api.post("/v1/apps", json={"app_name": "cli", "org_slug": "personal"})
            config: dict[str, Any] = {
                "image": "local/ticker", "guest": {"cpus": 1, "memory_mb": 128},
                "init": {"exec": [machine_python(), "-u", "-c", TICKER]}}
            m = (await api.post("/v1/apps/cli/machines", json={"config": config})).json()
            await api.get(f"/v1/apps/cli/machines/{m['id']}/wait", params={"state": "started"})

            code, out, err = await bodega(url, "secrets", "set", "-a", "cli", f"TOKEN={value}",
                                          "--stage")
            assert (code, out.strip()) == (0, "Set TOKEN"), err
            code, out, _ = await bodega(url, "secrets", "list", "-a", "cli")
            assert code == 0
            assert "TOKEN" in out
            assert value not in out
            code, out, _ = await bodega(url, "secrets", "deploy", "-a", "cli")
            assert (code, out.split(":")[0]) == (0, "Updated 1 machine")
            code, _, err = await bodega(url, "secrets", "set", "-a", "cli", value)
            assert code != 0
            assert value not in err
            assert err.strip().count("\n") == 0  # one readable line
            code, out, _ = await bodega(url, "secrets", "unset", "-a", "cli", "TOKEN", "--stage")
            assert (code, out.strip()) == (0, "Unset TOKEN")

            async def ticked() -> bool:
                code, out, _ = await bodega(url, "logs", "-a", "cli", "--limit", "3", "--json")
                return code == 0 and len(out.splitlines()) == 3

            await until(ticked)
            code, out, _ = await bodega(url, "logs", "-a", "cli", "--machine", m["id"],
                                        "--limit", "2")
            assert code == 0
            assert all(f"app[{m['id']}] ams [stdout] tick" in line for line in out.splitlines())

            # -f keeps streaming: lines keep arriving until the command is stopped.
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bodega", "logs", "-a", "cli", "-f", "--json",
                "--limit", "1", "--api-url", url, env={**os.environ, "BODEGA_API_TOKEN": TOKEN},
                stdout=asyncio.subprocess.PIPE)
            try:
                assert proc.stdout is not None
                ticks: list[int] = []
                while len(ticks) < 6:
                    raw = await asyncio.wait_for(proc.stdout.readline(), 30)
                    ticks.append(int(json.loads(raw)["message"].split()[1]))
                assert ticks[1:] == list(range(ticks[1], ticks[1] + 5))
            finally:
                proc.kill()
                await proc.wait()
            code, _, err = await bodega(url, "logs", "-a", "nope")
            assert code != 0
            assert "app not found" in err
