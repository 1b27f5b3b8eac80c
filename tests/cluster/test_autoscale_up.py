"""The autoscaler on a real `bodega up` (two workers, the metrics store every second).

An app serves requests that each take 3 s; it runs one started machine and has one
stopped. With ``--min 1 --max 3 --concurrency 2``, eight requests held at once through
the proxy make it scale out: the stopped machine is started first, then a clone of the
newest machine is created through placement. Once the load falls to three 5 s
requests it scales in to two after its window (the machine cordoned has one of them in
flight, answered before its stop), then to one once they end: cordoned, drained and
stopped, never destroyed, and no request failed along the way. Killed with SIGKILL,
the broker is restarted by the supervisor and the evaluation goes on under the app's
lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import Cli, up_cluster
from tests.poll_kit import until as poll_until
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="workers need root for namespaces")
until = partial(poll_until, every=0.5)

APP = "slow"
SLOW = """
import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path.startswith("/s/"):
            time.sleep(float(self.path[3:]))
        elif self.path != "/fast":
            time.sleep(3)
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args): pass
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 128  # a burst's connects queue, none dropped (the default is 5)
S(("0.0.0.0", 8080), H).serve_forever()
"""
CONFIG = {"image": "local/slow", "init": {"exec": [machine_python(), "-c", SLOW]},
          "guest": {"cpus": 1, "memory_mb": 128},
          "services": [{"protocol": "tcp", "internal_port": 8080, "autostart": False,
                        "autostop": "off", "ports": [{"port": 80, "handlers": ["http"]}]}]}
HELD = 8  # requests in flight at once: 8 sessions want 4 machines at 2 each, 3 at most
LEFT = 3  # long requests in flight while it scales in: 3 sessions want 2 machines
# Seconds each of those takes: longer than an evaluation, and shorter than a cordoned
# machine's unseen drain (10 s, decide.UNSEEN_DRAIN) by more than the cordon takes to reach
# the proxy, as one may begin on the cordoned machine just before the proxy hears of it.
LONG = 5


def api(cli: Cli) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=cli.env["BODEGA_API_URL"], timeout=60,
                             headers={"authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"})


async def machines(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    listed = await http.get(f"/v1/apps/{APP}/machines")
    assert listed.status_code == 200, listed.text
    return list(listed.json())


def by_state(found: list[dict[str, Any]], state: str) -> set[str]:
    return {m["id"] for m in found if m["state"] == state}


async def autoscale(http: httpx.AsyncClient) -> dict[str, Any]:
    shown = await http.get(f"/v1/apps/{APP}/autoscale")
    assert shown.status_code == 200, shown.text
    return dict(shown.json())


async def test_an_app_scales_out_under_load_and_back_in_after_it(tmp_path: Path) -> None:
    async with up_cluster(tmp_path, workers=2, extra=("--metrics-interval", "1s")) as (cli, up), \
            api(cli) as http, contextlib.AsyncExitStack() as closing:
        assert (await http.post("/v1/apps", json={"app_name": APP, "org_slug": "personal"})
                ).status_code == 201
        ids = []
        for _ in range(2):
            made = await http.post(f"/v1/apps/{APP}/machines", json={"config": CONFIG})
            assert made.status_code == 200, made.text
            ids.append(made.json()["id"])
        first, spare = ids
        for mid in ids:
            assert (await http.get(f"/v1/apps/{APP}/machines/{mid}/wait",
                                   params={"state": "started", "timeout": 60})).status_code == 200
        assert (await http.post(f"/v1/apps/{APP}/machines/{spare}/stop")).status_code == 200
        await until(lambda: _states(http, {first}, {spare}), timeout=60,
                    what="one machine started, one stopped")

        code, out, err = await cli.run("autoscale", "set", "-a", APP, "--min", "1", "--max",
                                       "3", "--concurrency", "2", "--scale-in-after", "5s")
        assert code == 0, err
        assert "1 to 3 machines on 2 sessions a machine" in out
        steady = await until(lambda: _decided(http), timeout=30, what="a first decision")
        assert steady["decision"]["wanted"] == 1

        web = await closing.enter_async_context(httpx.AsyncClient(
            base_url=cli.proxy, timeout=30, headers={"host": f"{APP}.localhost"}))
        await until(lambda: _answers(web), timeout=60, what="the proxy routing to the app")
        failed: list[str] = []
        most, rest = asyncio.Event(), asyncio.Event()  # the load's end, for 6 then for 2

        async def hold(done: asyncio.Event, path: str) -> None:
            while not done.is_set():
                sent = time.monotonic() - began
                try:
                    answer = await web.get(path)
                    if answer.status_code != 200:
                        failed.append(f"at {sent:.1f} s: {answer.status_code} "
                                      f"{answer.text[:200]}")
                except httpx.HTTPError as exc:
                    failed.append(f"at {sent:.1f} s: {exc!r}")

        began = time.monotonic()
        load = [asyncio.create_task(hold(most, "/") if i < HELD - LEFT
                                    else hold(rest, f"/s/{LONG}")) for i in range(HELD)]
        try:
            out_state = await until(lambda: _started_count(http, 3), timeout=90,
                                    what="three machines started under load")
            scaled_out = time.monotonic() - began
            assert spare in by_state(out_state, "started")  # started before any create
            created = {m["id"] for m in out_state} - {first, spare}
            assert len(created) == 1
            (clone,) = created
            placed = await http.get(f"/v1/apps/{APP}/machines/{clone}/placement")
            assert placed.status_code == 200, placed.text  # placed, with its explanation
            shown = await autoscale(http)
            assert shown["decision"]["wanted"] == 3
            # Three requests of LONG s each stay in flight, one a machine (leastconn): the
            # machine cordoned to go from 3 to 2 has one, whose answer comes before its
            # stop although no proxy counts that session any more.
            most.set()
            ended = time.monotonic()
            await until(lambda: _started_count(http, 2, stopped=1), timeout=120,
                        what="two started machines, one stopped, under the long requests")
            scaled_in = time.monotonic() - ended
            rest.set()
            await asyncio.gather(*load)
            back = await until(lambda: _started_count(http, 1, stopped=2), timeout=120,
                               what="back to one started machine, two stopped")
        finally:
            most.set()
            rest.set()
            await asyncio.gather(*load)

        assert by_state(back, "destroyed") == set()
        assert not any(m.get("cordoned") for m in back)  # a later start serves at once
        assert failed == [], (scaled_out, failed)
        code, out, err = await cli.run("autoscale", "show", "-a", APP)
        assert code == 0, err
        assert "Why:" in out
        print(f"\nscaled out to 3 in {scaled_out:.1f} s, in to 2 {scaled_in:.1f} s after the "
              f"load fell to {LEFT} sessions, {len(failed)} failed requests")

        # The broker killed: the supervisor starts it again and the evaluation goes on.
        (broker,) = [c for c in up.state()["components"] if c["role"] == "broker"]
        killed_at = time.time()
        os.kill(int(broker["pid"]), signal.SIGKILL)
        resumed = await until(lambda: _decided_after(http, killed_at), timeout=90,
                              what="a decision after the broker's restart")
        assert resumed["evaluator"] == steady["evaluator"]
        assert resumed["decision"]["wanted"] == 1

        code, _, err = await cli.run("autoscale", "off", "-a", APP)
        assert code == 0, err
        gone = await http.get(f"/v1/apps/{APP}/autoscale")
        assert gone.status_code == 404
        assert gone.json()["status"] == "not_found"
        # An app deleted takes its setting with it: made again, it has none.
        code, _, err = await cli.run("autoscale", "set", "-a", APP, "--min", "1", "--max",
                                     "2", "--expr", "vector(1)")
        assert code == 0, err
        assert (await http.delete(f"/v1/apps/{APP}")).status_code in (200, 202, 204)
        assert (await http.post("/v1/apps", json={"app_name": APP, "org_slug": "personal"})
                ).status_code == 201
        assert (await http.get(f"/v1/apps/{APP}/autoscale")).status_code == 404


async def _states(http: httpx.AsyncClient, started: set[str], stopped: set[str]) -> bool:
    found = await machines(http)
    return by_state(found, "started") == started and by_state(found, "stopped") == stopped


async def _decided(http: httpx.AsyncClient) -> dict[str, Any] | None:
    shown = await autoscale(http)
    return shown if shown.get("decision") else None


async def _decided_after(http: httpx.AsyncClient, at: float) -> dict[str, Any] | None:
    with contextlib.suppress(httpx.HTTPError, AssertionError):
        shown = await autoscale(http)
        if shown.get("decision") and shown["decision"]["at"] > at + 1:
            return shown
    return None


async def _answers(web: httpx.AsyncClient) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return (await web.get("/fast")).status_code == 200
    return False


async def _started_count(http: httpx.AsyncClient, n: int,
                         stopped: int | None = None) -> list[dict[str, Any]] | None:
    found = await machines(http)
    if len(by_state(found, "started")) != n:
        return None
    if stopped is not None and len(by_state(found, "stopped")) != stopped:
        return None
    return found
