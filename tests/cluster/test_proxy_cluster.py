"""The proxy in a real cluster: routing and balancing, autostart, autostop, failover.

Two workers (process driver, each machine in its own namespace), a broker and
a proxy, every one its own process, joined by gossip. Machines run a small
HTTP server that answers with its machine id. Every test runs on both data
planes: HAProxy (bodega's proxy its control plane and activator) and bodega's own.
The tests that only add an app of their own share one cluster per data plane, the
health check and suspend tests too (their steps are in checks_scenario.py and
suspend_scenario.py); the one that kills a worker builds its own.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.proxy.plane_kit import PLANES, haproxy_binary
from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

from . import checks_scenario, suspend_scenario
from .fleet_kit import (
    Fleet,
    echo_config,
    fleet,
    machine_pids,
    machines_of,
    proxy_admin,
    proxy_metric,
    serving,
    until,
)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root"),
    pytest.mark.asyncio(loop_scope="module"),
]
# Autostop settings only the apps that ask for autostop feel (the default is off).
AUTOSTOP = ("--autostop-interval", "0.5", "--autostop-idle", "1")


# Module scope: pytest runs a module's tests plane by plane, so each plane's shared
# cluster is built once.
@pytest.fixture(scope="module", params=PLANES)
def plane(request: pytest.FixtureRequest) -> str:
    if request.param == "haproxy":
        haproxy_binary()  # skips, or fails under BODEGA_REQUIRE_HAPROXY=1, when missing
    return str(request.param)


def names(tag: str) -> tuple[str, str]:
    suffix = f"{os.getpid() % 10000}"
    return f"{tag}a-{suffix}", f"{tag}b-{suffix}"


async def start_cluster(f: Fleet, tag: str, plane: str, *proxy_args: str,
                        first: int = 1) -> tuple[str, str]:
    """Two workers (machine subnets ``first`` and the next), a broker and a proxy."""
    a, b = names(tag)
    await f.worker(a, first)
    await f.worker(b, first + 1)
    await f.broker()
    await f.proxy("--data-plane", plane, *proxy_args)
    async with f.api() as api:
        await until(lambda: serving(api, 2))
    return a, b


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(plane: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Fleet]:
    """One cluster for this plane, for the tests that each add an app of their own to it."""
    async with fleet(tmp_path_factory.mktemp(f"proxy-{plane}")) as f:
        await start_cluster(f, "sh", plane, *AUTOSTOP)
        yield f


async def _proxy_knows(f: Fleet, app: str, machines: int) -> bool:
    """The proxy's routing table has this many of the app's machines (from the registry)."""
    async with TEST_CA.http("admin") as http:
        routes = (await http.get(f"{proxy_admin(f)}/v1/routes")).json()
    return len(routes.get(app, [])) >= machines


async def test_requests_spread_over_an_apps_machines(shared: Fleet, plane: str) -> None:
    marker = f"bodega-proxy-{uuid.uuid4().hex[:8]}"
    async with shared.api() as api, shared.web("spread") as web:
        await api.post("/v1/apps", json={"app_name": "spread", "org_slug": "personal"})
        ids = []
        for _ in range(2):
            m = (await api.post("/v1/apps/spread/machines",
                                json={"config": echo_config(marker)})).json()
            await api.get(f"/v1/apps/spread/machines/{m['id']}/wait")
            ids.append(m["id"])
        workers = {(await api.get(f"/v1/apps/spread/machines/{i}/placement")).json()
                   ["winner"]["worker"] for i in ids}
        assert len(workers) == 2  # the broker spread the app over both workers

        async def spread() -> list[httpx.Response] | None:
            """40 requests at once, each machine taking at least 5 of them. Tried again while
            it fails: until the proxy has heard of both machines, and whenever a loaded host
            has one worker suspected for a moment (its machines are then skipped)."""
            answers = await asyncio.gather(*(web.get("/") for _ in range(40)))
            if any(a.status_code != 200 for a in answers):
                return None
            served = Counter(a.text.split()[0] for a in answers)
            return answers if set(served) == set(ids) and min(served.values()) >= 5 else None

        answers = await until(spread)
        assert answers[0].text.split()[1] == "127.0.0.1"  # X-Forwarded-For reached it
        assert answers[0].headers["fly-request-id"]
        if plane == "haproxy":  # HAProxy carried them straight to the machines

            async def counted() -> bool:  # its counters are read every second
                if await proxy_metric(shared, 'bodega_haproxy_server_requests_total{app="spread"'
                                      ) >= 40:
                    return True
                # Until HAProxy holds both machines, bodega's own path carries some.
                await asyncio.gather(*(web.get("/") for _ in range(10)))
                return False

            await until(counted)


async def test_fifty_requests_to_a_sleeping_app_start_exactly_one_machine(
    shared: Fleet, plane: str,
) -> None:
    marker = f"bodega-proxy-{uuid.uuid4().hex[:8]}"
    async with shared.api() as api, shared.web("sleepy") as web:
        await api.post("/v1/apps", json={"app_name": "sleepy", "org_slug": "personal"})
        # A soft limit above the 50: one machine holding them all is not past it, so the
        # proxy has no cause to start the second beside it (that is the soft limit's test).
        for _ in range(2):
            await api.post("/v1/apps/sleepy/machines", json={
                "config": echo_config(marker, autostart=True,
                                      concurrency={"soft_limit": 100}),
                "skip_launch": True})

        await until(lambda: _proxy_knows(shared, "sleepy", 2))
        answers = await asyncio.gather(*(web.get(f"/{i}") for i in range(50)))
        assert [a.status_code for a in answers] == [200] * 50, answers[0].text
        states = Counter(m["state"] for m in await machines_of(api, "sleepy"))
        assert states == {"started": 1, "created": 1}
        assert len({a.text.split()[0] for a in answers}) == 1
        assert await proxy_metric(shared, 'bodega_proxy_autostarts_total{app="sleepy",'
                                     'outcome="started"}') == 1


async def test_idle_machines_are_stopped_down_to_the_minimum(shared: Fleet) -> None:
    marker = f"bodega-proxy-{uuid.uuid4().hex[:8]}"
    async with shared.api() as api, shared.web("idle") as web:
        await api.post("/v1/apps", json={"app_name": "idle", "org_slug": "personal"})
        for _ in range(3):
            m = (await api.post("/v1/apps/idle/machines", json={"config": echo_config(
                marker, autostop="stop", min_machines_running=1)})).json()
            await api.get(f"/v1/apps/idle/machines/{m['id']}/wait")
        await until(lambda: _status(web, 200))

        async def one_left() -> bool:
            states = Counter(m["state"] for m in await machines_of(api, "idle"))
            return states == {"started": 1, "stopped": 2}

        await until(one_left)
        # Net of wakes: a request that raced a stop on a busy host may have woken a machine
        # (which was stopped again); what is left running is the minimum either way.
        stops = await proxy_metric(shared, 'bodega_proxy_autostops_total{app="idle"}')
        starts = await proxy_metric(shared, 'bodega_proxy_autostarts_total{app="idle",'
                                            'outcome="started"}')
        assert stops - starts == 2
        await asyncio.sleep(2)  # min_machines_running holds: the last one stays
        assert Counter(m["state"] for m in await machines_of(api, "idle"))["started"] == 1
        assert (await web.get("/")).status_code == 200


async def test_a_failing_http_check_takes_the_machine_out_of_rotation(shared: Fleet) -> None:
    await checks_scenario.a_failing_http_check_takes_the_machine_out_of_rotation(shared)


@pytest.mark.skipif(not Path("/sys/fs/cgroup/freezer").is_dir(),
                    reason="suspend needs the cgroup v1 freezer")
async def test_idle_machines_are_suspended_and_a_request_resumes_the_same_process(
    shared: Fleet,
) -> None:
    await suspend_scenario.idle_machines_are_suspended_and_a_request_resumes_the_same_process(
        shared)


async def _status(web: httpx.AsyncClient, code: int) -> bool:
    return (await web.get("/")).status_code == code


async def test_a_standby_takes_over_when_its_workers_dies(tmp_path: Path, plane: str) -> None:
    marker = f"bodega-proxy-{uuid.uuid4().hex[:8]}"
    async with fleet(tmp_path) as f:
        # Subnets 3 and 4: the shared cluster holds 1 and 2 meanwhile.
        await start_cluster(f, "fo", plane, first=3)
        async with f.api() as api, f.web("ha") as web:
            await api.post("/v1/apps", json={"app_name": "ha", "org_slug": "personal"})
            primary = (await api.post("/v1/apps/ha/machines", json={
                "config": echo_config(marker, autostart=False)})).json()
            await api.get(f"/v1/apps/ha/machines/{primary['id']}/wait")
            standby = (await api.post("/v1/apps/ha/machines", json={
                "config": {**echo_config(marker, autostart=False),
                           "standbys": [primary["id"]]}, "skip_launch": True})).json()
            placements = {m["id"]: (await api.get(f"/v1/apps/ha/machines/{m['id']}/placement")
                                    ).json()["winner"]["worker"] for m in (primary, standby)}
            assert placements[primary["id"]] != placements[standby["id"]]  # never together
            await until(lambda: _status(web, 200))
            assert (await web.get("/")).text.split()[0] == primary["id"]

            await f.daemons[placements[primary["id"]]].kill9()

            async def standby_serves() -> bool:
                answer = await web.get("/")
                return answer.status_code == 200 and answer.text.split()[0] == standby["id"]

            await until(standby_serves, timeout=90)

            # Started once: by the proxy (a failover) or by the broker's standby watch,
            # whichever heard of the death first (both act on it; a start of a started
            # machine changes nothing), never twice.
            events = (await api.get(f"/v1/apps/ha/machines/{standby['id']}/events")).json()
            starts = [e for e in events if (e["type"], e["status"]) == ("start", "started")]
            assert len(starts) == 1, events
            assert await proxy_metric(f, 'bodega_proxy_failovers_total{app="ha"}') <= 1
            # The dead worker's machine still runs: nobody rescheduled or killed it.
            orphans = machine_pids(primary["id"])
            assert orphans
            for pid in orphans:
                os.kill(pid, signal.SIGKILL)


# Answers /missing... with 404 and the rest with 200, each with its machine's id.
STATUSES = (
    "import http.server, os, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def do_GET(self):\n"
    "        code = 404 if self.path.startswith('/missing') else 200\n"
    "        body = os.environ['BODEGA_MACHINE_ID'].encode()\n"
    "        self.send_response(code); self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers(); self.wfile.write(body)\n"
    "    def log_message(self, *args): pass\n"
    "http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H).serve_forever()\n"
)


async def fly_series(f: Fleet) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    async with TEST_CA.http("admin") as http:
        text = (await http.get(f"{proxy_admin(f)}/metrics")).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("fly_")}


def sample(series: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
           **labels: str) -> float:
    return sum(v for (n, have), v in series.items()
               if n == name and set(labels.items()) <= have)


async def test_an_apps_responses_are_counted_by_status_on_either_plane(
        shared: Fleet, plane: str) -> None:
    """fly_app_http_responses_count by status class for the machine that answered, and
    fly_edge_http_responses_count for the app: HAProxy's counters on its plane, bodega's own
    count on the Python plane, which also times each request in a histogram."""
    marker = f"bodega-proxy-{uuid.uuid4().hex[:8]}"
    config = {**echo_config(marker), "init": {"exec": [machine_python(), "-c", STATUSES,
                                                        marker]}}
    async with shared.api() as api, shared.web("tally") as web:
        await api.post("/v1/apps", json={"app_name": "tally", "org_slug": "personal"})
        m = (await api.post("/v1/apps/tally/machines", json={"config": config})).json()
        await api.get(f"/v1/apps/tally/machines/{m['id']}/wait")
        mine = {"app": "tally", "machine": m["id"], "org": "personal", "region": "ams"}

        async def answered() -> bool:
            return (await web.get("/")).status_code == 200
        await until(answered)

        async def baseline() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
            series = await fly_series(shared)  # the one 200 above, counted once
            counted = (sample(series, "fly_app_http_responses_count", status="2xx", **mine),
                       sample(series, "fly_edge_http_responses_count", status="2xx",
                              app="tally"))
            return series if counted == (1, 1) else None
        before = await until(baseline)
        sent = {"2xx": 6, "4xx": 4}
        for path, n in (("/", sent["2xx"]), ("/missing", sent["4xx"])):
            for _ in range(n):
                assert (await web.get(path)).status_code == (200 if path == "/" else 404)

        def moved(series: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
                  **labels: str) -> float:
            return sample(series, name, **labels) - sample(before, name, **labels)

        async def all_counted() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
            series = await fly_series(shared)
            return series if all(
                moved(series, "fly_app_http_responses_count", status=status, **mine) == n
                and moved(series, "fly_edge_http_responses_count", status=status,
                          app="tally") == n
                for status, n in sent.items()) else None
        after = await until(all_counted)
        assert moved(after, "fly_app_http_responses_count", status="5xx", **mine) == 0
        if plane == "python":  # every request timed, in the histogram
            assert sample(after, "fly_app_http_response_time_seconds_count", **mine) == 11
        else:  # HAProxy's average over the server's last requests
            assert any(n == "fly_app_http_response_time_seconds_avg"
                       and set(mine.items()) <= have for n, have in after)

        # A machine that comes after the first is gone (a second one serving meanwhile) is
        # counted what it answered, never what the slot it was given held before
        # (HAProxy counts by slot; the slot's own reuse is in tests/unit/proxy).
        second = (await api.post("/v1/apps/tally/machines", json={"config": config})).json()
        await api.get(f"/v1/apps/tally/machines/{second['id']}/wait")
        assert (await api.delete(f"/v1/apps/tally/machines/{m['id']}",
                                 params={"force": "true"})).status_code == 200
        third = (await api.post("/v1/apps/tally/machines", json={"config": config})).json()
        await api.get(f"/v1/apps/tally/machines/{third['id']}/wait")
        by_third = 0

        async def answered_by_the_third() -> bool:
            nonlocal by_third
            answer = await web.get("/")
            by_third += answer.status_code == 200 and answer.text == third["id"]
            return by_third >= 3

        await until(answered_by_the_third)
        theirs = {**mine, "machine": third["id"]}

        async def counted_alone() -> bool:
            return sample(await fly_series(shared), "fly_app_http_responses_count",
                          status="2xx", **theirs) == by_third
        await until(counted_alone)
