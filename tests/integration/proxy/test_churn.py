"""Machines come and go while 32 keep-alive connections stream requests: none may fail.

On the HAProxy data plane, adding or removing a machine is runtime-API
commands (no reload, checked), and a new app is a seamless reload (checked
too); on bodega's own data plane it is a routing-table change.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from functools import partial

import httpx

from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker
from tests.poll_kit import until as poll_until

from .plane_kit import serving
from .test_forwarding import Machine, machine_doc, routed

CLIENTS = 32


until = partial(poll_until, timeout=30.0)


class Traffic:
    """CLIENTS connections, each sending the next request as soon as the last is answered."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.served: Counter[str] = Counter()
        self.failures: list[str] = []
        self.running = True

    async def client(self) -> None:
        async with httpx.AsyncClient(base_url=self.url, headers={"host": "web.localhost"},
                                     timeout=30,
                                     limits=httpx.Limits(max_connections=1)) as http:
            while self.running:
                try:
                    answer = await http.get("/churn")
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                if answer.status_code != 200:
                    self.failures.append(f"{answer.status_code}: {answer.text}")
                else:
                    self.served[answer.text.split()[0]] += 1

    def total(self) -> int:
        return sum(self.served.values())


async def test_machines_added_and_removed_under_load_cost_no_request(plane: str) -> None:
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    machines = [Machine(f"m{i}") for i in range(3)]
    ports = [await m.start() for m in machines]
    other = Machine("other")
    other_port = await other.start()
    for i in (0, 1):
        table.put_machine(f"m{i}", routed(machine_doc(f"m{i}", ports[i])))
    waker = Waker(table, lambda _w: None, load, metrics, "ams")
    try:
        async with serving(plane, table, waker, load, metrics) as served:
            traffic = Traffic(served.url)
            clients = [asyncio.create_task(traffic.client()) for _ in range(CLIENTS)]
            try:
                await until(lambda: traffic.total() > 200)

                table.put_machine("m2", routed(machine_doc("m2", ports[2])))  # added
                await served.synced()
                await until(lambda: traffic.served["m2"] > 100)

                # removed
                table.put_machine("m0", routed(machine_doc("m0", ports[0], state="stopped")))
                await served.synced()
                before = traffic.served["m0"]
                await asyncio.sleep(0.3)  # requests already at m0 finish there
                after_removal = traffic.served["m0"]
                await machines[0].stop()  # and then its process goes away
                mark = traffic.total()
                await until(lambda: traffic.total() > mark + 300)
                assert traffic.served["m0"] == after_removal
                assert after_removal - before < CLIENTS  # only those already in flight

                # A new app: on HAProxy, a free backend of the pool and a map entry.
                table.put_machine("o1", routed({**machine_doc("o1", other_port), "app": "api"}))
                await served.synced()
                async with httpx.AsyncClient(headers={"host": "api.localhost"}) as http:
                    assert (await http.get(f"{served.url}/")).text.split()[0] == "other"
                mark = traffic.total()
                await until(lambda: traffic.total() > mark + 300)
                if served.dataplane is not None:
                    assert served.dataplane.process.reloads == 0  # runtime API only
            finally:
                traffic.running = False
                await asyncio.gather(*clients)
            assert traffic.failures == []
            assert set(traffic.served) == {"m0", "m1", "m2"}
    finally:
        for m in [*machines, other]:
            await m.stop()
        await asyncio.sleep(0.05)


async def test_running_out_of_slots_reloads_haproxy_without_failing_a_request() -> None:
    """More machines than slots: a seamless reload. A keep-alive connection idle at that
    moment stays open in the old process until its next request, which is answered (with
    "Connection: close"), so no request is refused, unanswered or given an error status."""
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    machines = [Machine(f"m{i}") for i in range(6)]
    ports = [await m.start() for m in machines]
    table.put_machine("m0", routed(machine_doc("m0", ports[0])))
    waker = Waker(table, lambda _w: None, load, metrics, "ams")
    try:
        async with serving("haproxy", table, waker, load, metrics) as served:
            assert served.dataplane is not None
            traffic = Traffic(served.url)
            clients = [asyncio.create_task(traffic.client()) for _ in range(CLIENTS)]
            try:
                await until(lambda: traffic.total() > 200)
                for i in range(1, 6):  # four slots: the fifth machine needs more
                    table.put_machine(f"m{i}", routed(machine_doc(f"m{i}", ports[i])))
                await served.synced()
                assert served.dataplane.process.reloads == 1
                await until(lambda: all(traffic.served[f"m{i}"] > 20 for i in range(6)))
            finally:
                traffic.running = False
                await asyncio.gather(*clients)
            assert traffic.failures == []
    finally:
        for m in machines:
            await m.stop()
        await asyncio.sleep(0.05)
