"""The oci driver: a machine runs an OCI image with crun or runc, in the process driver's frame.

Its name loads on first use (PEP 562): the vm isolation's core imports this package's core
(``core/``, the bundle), and loading that must not run the driver's imports, which reach
the vm isolation's core back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.worker.drivers.oci.driver import OciDriver

_MODULE = {"OciDriver": "driver"}

__all__ = ["OciDriver"]


__getattr__ = lazy(__name__, globals(), _MODULE)
