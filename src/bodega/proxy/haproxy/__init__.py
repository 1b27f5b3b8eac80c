"""HAProxy as the proxy's data plane, with bodega's proxy as its control plane and activator.

Its names load on first use (PEP 562): the proxy's core imports this package's core
(``core/``), and loading that must not run the data plane's imports, which import the
proxy's core back (a circle that would fail whichever of the two a process loads first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.proxy.haproxy.core.config import HaproxySettings
    from bodega.proxy.haproxy.dataplane import HaproxyDataPlane
    from bodega.proxy.haproxy.supervisor import HaproxyFailed

_MODULE = {
    "HaproxyDataPlane": "dataplane",
    "HaproxyFailed": "supervisor",
    "HaproxySettings": "core.config",
}

__all__ = [
    "HaproxyDataPlane",
    "HaproxyFailed",
    "HaproxySettings",
]


__getattr__ = lazy(__name__, globals(), _MODULE)
