"""The private network: 6PN-style addresses, isolation between networks, ``.internal``
names and the WireGuard overlay between hosts (``docs/networking.md``).

Pure, in ``core/``: ``sixpn`` (the address plan), ``names`` and ``directory`` (what the
resolver answers), ``rules`` (the nftables fence), ``peers`` (which WireGuard peers a host
wants), ``kernel_objects`` (whose each is). I/O: ``resolver`` (UDP DNS), ``overlay``
(WireGuard), ``commands``.
"""

from bodega.networking.core.names import Directory, Machine, Outcome, Reply, answer
from bodega.networking.core.sixpn import (
           Layout,
           cluster_prefix,
           host_field,
           network_field,
           network_key,
)
from bodega.networking.overlay import Overlay, OverlaySpec, interface_name
from bodega.networking.resolver import Resolver, serve

__all__ = ["Directory", "Layout", "Machine", "Outcome", "Overlay", "OverlaySpec", "Reply",
           "Resolver", "answer", "cluster_prefix", "host_field", "interface_name",
           "network_field", "network_key", "serve"]
