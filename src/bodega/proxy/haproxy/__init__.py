"""HAProxy as the proxy's data plane, with bodega's proxy as its control plane and activator."""

from bodega.proxy.haproxy.core.config import HaproxySettings
from bodega.proxy.haproxy.dataplane import HaproxyDataPlane
from bodega.proxy.haproxy.supervisor import HaproxyFailed

__all__ = [
    "HaproxyDataPlane",
    "HaproxyFailed",
    "HaproxySettings",
]
