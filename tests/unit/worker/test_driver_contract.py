"""Every driver states the same contract: the core protocol, and its capabilities declared."""

from __future__ import annotations

import inspect

import pytest

from bodega.worker.drivers.base import Capabilities, Driver, TaskControl
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.drivers.null import NullDriver
from bodega.worker.drivers.process import ProcessDriver

CORE = ("prepare", "start", "recover", "wait", "stop", "inspect", "destroy")


def drivers() -> list[Driver]:
    # Typed as Driver: mypy checks each one implements the protocol structurally.
    made: list[Driver] = [NullDriver(), FakeDriver(), ProcessDriver(cgroups=None)]
    return made


@pytest.mark.parametrize("driver", drivers(), ids=lambda d: d.name)
def test_each_driver_implements_the_core_and_declares_its_capabilities(driver: Driver) -> None:
    assert isinstance(driver.capabilities, Capabilities)
    for method in CORE:
        assert inspect.iscoroutinefunction(getattr(type(driver), method)), method
    control = driver.capabilities.control
    assert control is not None  # all three can reach into a running task
    for method in ("signal", "exec", "ps"):
        assert inspect.iscoroutinefunction(getattr(control, method)), method


def test_the_process_driver_declares_what_only_it_does() -> None:
    plain = ProcessDriver(cgroups=None)
    caps = plain.capabilities
    assert (caps.needs_command, caps.own_netns) == (True, True)
    assert caps.logs is plain.janitor
    assert caps.parking is None  # launchers are parked only where there are cgroups
    assert caps.suspend is None
    control: TaskControl = plain.control
    assert caps.control is control


def test_test_drivers_need_no_command_nor_namespaces() -> None:
    for driver in (NullDriver(), FakeDriver()):
        caps = driver.capabilities
        assert (caps.needs_command, caps.own_netns, caps.parking, caps.logs) == (
            False, False, None, None)
