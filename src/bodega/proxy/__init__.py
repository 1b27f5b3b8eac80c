"""The proxy (fly-proxy): routes ``Host: <app>.localhost``, wakes and stops machines."""

from bodega.proxy.daemon import Proxy, ProxyDaemonConfig

__all__ = [
    "Proxy",
    "ProxyDaemonConfig",
]
