"""Which other hosts' machine subnets a host routes, decided from the workers' rows."""

from __future__ import annotations

from bodega.model.rows import WorkerRow
from bodega.worker.core.peer_routes import wanted_routes
from bodega.worker.host.peer_routes import current_routes

TOTALS = {"cpus": 1, "memory_mb": 256}


def test_a_host_routes_every_other_hosts_subnet_through_that_host() -> None:
    rows = [WorkerRow.model_validate({**doc, "region": "ams", "totals": TOTALS}) for doc in (
        {"name": "ams-1", "url": "https://10.1.0.1:4000", "subnet": "10.209.1.0/24"},
        {"name": "ams-2", "url": "https://10.1.0.1:4001", "subnet": "10.209.2.0/24"},
        {"name": "syd-1", "url": "https://10.1.0.2:4000", "subnet": "10.209.128.0/24"},
        {"name": "lon-1", "url": "https://10.1.0.3:4000", "subnet": "10.209.129.0/24"},
        {"name": "null-1", "url": "https://10.1.0.4:4000"},  # host network: no subnet
        {"name": "local", "url": "https://127.0.0.1:4000", "subnet": "10.209.3.0/24"},
        {"name": "bad", "url": "https://10.1.0.5:4000", "subnet": "not a subnet"},
    )]
    assert wanted_routes("10.1.0.1", rows) == {"10.209.128.0/24": "10.1.0.2",
                                               "10.209.129.0/24": "10.1.0.3"}
    assert wanted_routes("10.1.0.2", rows) == {"10.209.1.0/24": "10.1.0.1",
                                               "10.209.2.0/24": "10.1.0.1",
                                               "10.209.129.0/24": "10.1.0.3"}


def test_the_kernels_gateway_routes_are_read_from_ip_route() -> None:
    table = ("default via 192.0.2.1 dev eth0\n10.209.128.0/24 via 10.1.0.2 dev eth0\n"
             "10.209.1.0/24 dev btb1 proto kernel scope link src 10.209.1.1\n")
    assert current_routes(table) == {"default": "192.0.2.1", "10.209.128.0/24": "10.1.0.2"}
