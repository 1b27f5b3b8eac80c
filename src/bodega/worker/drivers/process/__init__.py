"""The process driver: each machine is a process tree on this host (cgroups, netns, uid).

Everything only this driver uses lives in this package: the launcher and its
files (``launch``), parked launchers (``parking``), cgroups, /proc readers and
log files.
"""

from bodega.worker.drivers.process.driver import ProcessDriver

__all__ = ["ProcessDriver"]
