"""Which other hosts' machine subnets this host routes, and through whom: a pure decision.

Machines live on a bridge of their worker's host (``host/netns.py``), at
addresses of the worker's /24. A proxy or a machine on another host reaches
them once that host routes the /24 to the worker's host, as Kubernetes
routes pod CIDRs between nodes (flannel's host-gw). Every netns worker
publishes its subnet in its ``workers`` row beside its URL; from those rows
each worker decides the routes its host needs: every subnet of a worker on
another host, through that host's address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from bodega.model.rows import WorkerRow


def wanted_routes(own_host: str, rows: Iterable[WorkerRow]) -> dict[str, str]:
    """{subnet: via} for every worker whose URL names another host than ``own_host``."""
    wanted: dict[str, str] = {}
    for row in rows:
        subnet = row.subnet
        if subnet is None:
            continue
        host = urlsplit(row.url).hostname
        if host is None or host == own_host:
            continue
        try:
            if ipaddress.ip_address(host).is_loopback:
                continue  # a worker of this host serving on loopback is not another host
            ipaddress.ip_network(subnet)
        except ValueError:
            continue
        wanted[subnet] = host
    return wanted
