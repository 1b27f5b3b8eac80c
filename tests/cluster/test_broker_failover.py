"""Killing a broker mid-run loses nothing: clients retry on another broker, nothing doubles.

Two brokers in front of two workers, all separate processes. A client sends
creates with idempotency keys to the first broker, which is SIGKILLed while
creates are in flight; every create that did not get an answer is retried on
the second broker with the same key. In the end every key has exactly one
machine, on a worker, and the workers hold no other machine.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from tests.integration.daemon_kit import Daemon
from tests.tls_kit import TEST_CA

from .fleet_kit import TOKEN, Fleet, fleet, serving, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="workers need root for namespaces")

# Recorded, not started: the point is the records, and 30 idle processes would add nothing.
MACHINE = {"config": {"image": "img", "guest": {"cpus": 1, "memory_mb": 256},
                      "init": {"exec": ["sleep", "600"]}}, "skip_launch": True}
KEYS = [f"deploy-7-{i}" for i in range(30)]  # two 4-cpu workers hold 32 such machines


async def second_broker(f: Fleet) -> Daemon:
    daemon = await f._daemon("broker-b", "broker", "--region", "ams",
                             "--listen", "127.0.0.1:0").start()
    f.daemons["broker-b"] = daemon
    return daemon


async def test_a_broker_killed_mid_run_loses_and_doubles_nothing(tmp_path: Path) -> None:
    async with fleet(tmp_path) as f:
        tag = os.getpid() % 10000
        for index in (1, 2):
            await f.worker(f"bf{index}-{tag}", index)
        first = await f.broker()
        second = await second_broker(f)
        auth = {"authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=first.url, headers=auth, timeout=30) as a, \
                httpx.AsyncClient(base_url=second.url, headers=auth, timeout=30) as b:
            await until(lambda: serving(a, 2))
            await until(lambda: serving(b, 2))
            await a.post("/v1/apps", json={"app_name": "fo", "org_slug": "personal"})
            await until(lambda: _has_app(b, "fo"))

            answered: dict[str, str] = {}
            some_answered = asyncio.Event()

            async def create(client: httpx.AsyncClient, key: str) -> None:
                try:
                    response = await client.post("/v1/apps/fo/machines", json=MACHINE,
                                                 headers={"idempotency-key": key})
                except httpx.TransportError:
                    return  # the broker died under us: retried below
                if response.status_code == 200:
                    answered[key] = response.json()["id"]
                    if len(answered) >= 5:
                        some_answered.set()

            flight = [asyncio.create_task(create(a, k)) for k in KEYS]
            await asyncio.wait_for(some_answered.wait(), 30)
            await first.kill9()  # mid-run: some creates answered, the rest in flight
            await asyncio.gather(*flight)
            assert 5 <= len(answered) < len(KEYS)
            for key in KEYS:  # a client retries what it got no answer for, elsewhere
                before = answered.get(key)
                await create(b, key)
                if before is not None:  # and a retry of an answered one changes nothing
                    assert answered[key] == before

        assert sorted(answered) == sorted(KEYS)
        held: list[str] = []
        async with TEST_CA.http() as http:
            for name, daemon in f.daemons.items():
                if name.startswith("bf"):
                    machines = (await http.get(f"{daemon.url}/v1/machines",
                                               params={"app": "fo"})).json()
                    held += [m["id"] for m in machines]
        assert sorted(held) == sorted(answered.values())  # one machine per key, no extras


async def _has_app(api: httpx.AsyncClient, app: str) -> bool:
    return (await api.get(f"/v1/apps/{app}")).status_code == 200
