"""The metrics store's targets from view rows: the daemons over mutual TLS, apps'
``[metrics]`` endpoints with the labels that name them (pure)."""

from __future__ import annotations

from bodega.broker.prometheus.core.targets import (
    address,
    app_targets,
    cluster_targets,
    daemons,
    machine_address,
)
from bodega.model.machine import Machine
from bodega.model.machine_config import MachineConfig, MachineMetrics
from bodega.model.rows.workers import HostTotals, WorkerRow
from bodega.wire.public.platform import Member


def worker(name: str, url: str) -> WorkerRow:
    return WorkerRow(name=name, region="ams", url=url, totals=HostTotals(cpus=2, memory_mb=512))


def machine(mid: str, app: str = "web", state: str = "started", ip: str = "10.209.1.5",
            metrics: MachineMetrics | None = MachineMetrics(port=9091)) -> Machine:
    return Machine(id=mid, app=app, state=state, region="syd", private_ip=ip, worker="syd-1",
                   config=MachineConfig(image="python3", metrics=metrics))


def test_daemons_are_live_workers_proxies_and_agents_by_their_urls() -> None:
    members = [
        Member(name="proxy", role="proxy", region="ams", status="alive",
               meta={"url": "https://127.0.0.1:4001"}),
        Member(name="agent", role="agent", region="ams", status="suspect",
               meta={"url": "https://127.0.0.1:4002"}),
        Member(name="gone", role="proxy", region="ams", status="dead",
               meta={"url": "https://127.0.0.1:4003"}),
        Member(name="broker", role="broker", region="ams", status="alive",
               meta={"url": "https://127.0.0.1:4004"}),
        Member(name="bare", role="proxy", region="ams", status="alive", meta={}),
    ]
    workers = [worker("ams-1", "https://127.0.0.1:5001"), worker("ams-2", "https://h:5002"),
               worker("new", "https://127.0.0.1:5003")]
    status = {"ams-1": "alive", "ams-2": "left", "proxy": "alive"}
    found = daemons(workers, members, status)
    assert [(d.role, d.name) for d in found] == [
        ("agent", "agent"), ("proxy", "proxy"), ("worker", "ams-1"), ("worker", "new")]
    groups = cluster_targets(found)
    assert [g.model_dump() for g in groups][2] == {
        "targets": ["127.0.0.1:5001"],
        "labels": {"role": "worker", "host": "ams-1", "region": "ams"}}
    assert [g.targets for g in groups] == [["127.0.0.1:4002"], ["127.0.0.1:4001"],
                                           ["127.0.0.1:5001"], ["127.0.0.1:5003"]]


def test_an_app_endpoint_is_its_machines_address_with_labels_the_app_cannot_override() -> None:
    groups = app_targets([machine("m2"), machine("m1", ip="fdaa:0:1::5")], {"web": "acme"})
    assert [g.model_dump() for g in groups] == [
        {"targets": ["[fdaa:0:1::5]:9091"],
         "labels": {"__metrics_path__": "/metrics", "__scheme__": "http", "app": "web",
                    "machine": "m1", "region": "syd", "host": "syd-1", "org": "acme"}},
        {"targets": ["10.209.1.5:9091"],
         "labels": {"__metrics_path__": "/metrics", "__scheme__": "http", "app": "web",
                    "machine": "m2", "region": "syd", "host": "syd-1", "org": "acme"}}]


def test_only_started_machines_with_an_endpoint_an_address_and_a_known_app_are_scraped() -> None:
    left_out = [machine("stopped", state="stopped"), machine("plain", metrics=None),
                machine("noip", ip=""), machine("orphan", app="nobody")]
    assert app_targets(left_out, {"web": "acme"}) == []
    https = app_targets([machine("s", metrics=MachineMetrics(port=443, path="/m", https=True))],
                        {"web": "personal"})
    assert https[0].labels["__scheme__"] == "https"
    assert https[0].labels["__metrics_path__"] == "/m"


def test_a_machine_is_scraped_where_the_proxy_reaches_its_services() -> None:
    served = machine("m").model_copy(update={"service_host": "10.209.1.9"})
    assert app_targets([served], {"web": "acme"})[0].targets == ["10.209.1.9:9091"]


def test_addresses() -> None:
    assert address("https://127.0.0.1:80/x") == "127.0.0.1:80"
    assert address("unix:///run/x") is None
    assert address("nonsense") is None
    assert machine_address("10.0.0.1", 9) == "10.0.0.1:9"
    assert machine_address("::1", 9) == "[::1]:9"
    assert machine_address("not-an-ip", 9) is None
