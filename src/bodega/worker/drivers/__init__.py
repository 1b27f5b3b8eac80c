"""Drivers run a machine's workload; one protocol, modelled on Nomad's task driver.

The contract is ``base``: the core protocol (``Driver``) and the optional
capabilities a driver declares (``Capabilities``); each driver is a module
(``null``, ``fake``) or a package (``process``) beside it.
"""

from bodega.worker.drivers.base import (
    Capabilities,
    Driver,
    DriverError,
    ExecResult,
    LauncherParking,
    LogHousekeeping,
    Mount,
    ProcessInfo,
    Suspend,
    TaskControl,
    TaskHandle,
    TaskSpec,
)

__all__ = [
    "Capabilities",
    "Driver",
    "DriverError",
    "ExecResult",
    "LauncherParking",
    "LogHousekeeping",
    "Mount",
    "ProcessInfo",
    "Suspend",
    "TaskControl",
    "TaskHandle",
    "TaskSpec",
]
