"""Which address a create takes: one whose launcher waits, else a wired one, else the lowest."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from bodega.worker.host.network import HostNetwork
from bodega.worker.ops.creation import free_address
from bodega.worker.store.database import Store


class Wired(HostNetwork):
    """Host networking that reports the given addresses as wired."""

    def __init__(self, wired: set[int]) -> None:
        super().__init__("127.0.0.1", ipaddress.ip_network("10.0.0.0/24"))
        self.wired = wired

        self.asked: list[int] = []

    def ready(self, index: int) -> bool:
        self.asked.append(index)
        return index in self.wired


def test_a_create_takes_the_address_whose_launcher_waits(tmp_path: Path) -> None:
    store = Store(tmp_path / "worker.db")
    try:
        network = Wired({2, 3, 4})
        # Address 2's launcher is still joining its cgroups; 3's waits: 3 only has to exec.
        assert free_address(store.db, network, (2, 254), lambda i: i == 3) == 3
        assert network.asked == []  # a launcher waits: no namespace is looked at
        assert free_address(store.db, network, (2, 254)) == 2  # none waits: the lowest wired
        assert free_address(store.db, Wired({4}), (2, 254)) == 4
        assert free_address(store.db, Wired(set()), (2, 254)) == 2
    finally:
        store.close()
