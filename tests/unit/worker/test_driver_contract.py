"""Every driver states the same contract: the core protocol, and its capabilities declared."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from bodega.worker.drivers.base import Capabilities, Driver, TaskControl
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.drivers.null import NullDriver
from bodega.worker.drivers.oci import OciDriver
from bodega.worker.drivers.oci.runc import Runc
from bodega.worker.drivers.process import ProcessDriver
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient
from bodega.worker.images.store import ImageStore

CORE = ("prepare", "start", "recover", "wait", "stop", "inspect", "destroy")


def oci(root: Path, sandbox: bool) -> OciDriver:
    return OciDriver(None, Puller(ImageStore(root / "images"), RegistryClient()),
                     root / "machines", root / "runc",
                     sandbox=Runc("runsc", root / "runsc", freezes_cgroup=False)
                     if sandbox else None)


def made(name: str, root: Path) -> Driver:
    # Typed as Driver: mypy checks each one implements the protocol structurally.
    drivers: dict[str, Callable[[], Driver]] = {
        "null": NullDriver, "fake": FakeDriver, "process": lambda: ProcessDriver(cgroups=None),
        "oci": lambda: oci(root, sandbox=False), "oci+sandbox": lambda: oci(root, sandbox=True),
    }
    return drivers[name]()


def test_a_driver_offers_the_sandbox_only_with_a_runtime_that_ran_one(tmp_path: Path) -> None:
    assert oci(tmp_path, sandbox=False).capabilities.isolations == ("container",)
    assert oci(tmp_path, sandbox=True).capabilities.isolations == ("container", "sandbox")
    for driver in (NullDriver(), FakeDriver(), ProcessDriver(cgroups=None)):
        assert driver.capabilities.isolations == ("container",)


@pytest.mark.parametrize("name", ["null", "fake", "process", "oci", "oci+sandbox"])
def test_each_driver_implements_the_core_and_declares_its_capabilities(
        name: str, tmp_path: Path) -> None:
    driver = made(name, tmp_path)
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
