"""Which isolations a worker offers: what its probe runs said, and nothing else."""

from __future__ import annotations

import json

import pytest

from bodega.model.machine_config import MachineConfig
from bodega.worker.drivers.oci.core.isolations import (
    Probe,
    offered,
    probe_bundle,
    sandbox_probe,
    vm_probe,
)

HOST = "Linux version 6.18.44 (builder@host) #1 SMP\n"
GVISOR = "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016\n"


def test_only_what_ran_is_offered_in_a_fixed_order() -> None:
    assert offered([Probe("sandbox", True), Probe("container", True)]) == (
        "container", "sandbox")
    assert offered([Probe("container", True), Probe("sandbox", False, "no runsc")]) == (
        "container",)
    assert offered([Probe("vm", False, "no kvm"), Probe("container", True)]) == ("container",)


def test_a_sandbox_counts_only_if_it_printed_a_kernel_not_the_hosts() -> None:
    assert sandbox_probe(0, GVISOR, HOST) == Probe("sandbox", True)
    assert not sandbox_probe(0, HOST, HOST).ran, "the host's own kernel is no sandbox"
    assert not sandbox_probe(0, "", HOST).ran
    never = sandbox_probe(None, "", HOST)
    assert (never.ran, never.why) == (False, "runsc did not finish its probe run")
    failed = sandbox_probe(128, "running container: creating container: no cgroup\n", HOST)
    assert not failed.ran
    assert failed.why.endswith("(128): running container: creating container: no cgroup")


def test_the_probe_bundle_runs_the_host_root_read_only_with_no_network_namespace() -> None:
    bundle = json.loads(probe_bundle())
    assert bundle["root"] == {"path": "/", "readonly": True}
    assert "network" not in {n["type"] for n in bundle["linux"]["namespaces"]}


@pytest.mark.parametrize("isolation", ["sandbox", "vm"])
def test_a_process_machine_cannot_ask_for_a_kernel_of_its_own(isolation: str) -> None:
    with pytest.raises(ValueError, match="runs an image"):
        MachineConfig.model_validate({"image": "process", "guest": {"isolation": isolation}})
    image = MachineConfig.model_validate({"image": "127.0.0.1:5000/web:1",
                                          "guest": {"isolation": isolation}})
    assert image.to_wire()["guest"]["isolation"] == isolation
    # Unset, a config reads back as it was sent, and is a container.
    plain = MachineConfig.model_validate({"image": "process", "guest": {"cpus": 1}})
    assert "isolation" not in plain.to_wire()["guest"]


def test_a_vm_is_offered_once_its_probe_booted_another_kernel() -> None:
    host = "Linux version 6.18.44 (host)\n"
    console = "[ 0.27] PCI: Fatal\nLinux version 6.1.0-56-cloud-amd64 (debian)\n[ 1.7] Power down\n"
    ran = vm_probe(0, console, host, "tcg")
    assert ran == Probe("vm", True, accel="tcg")
    assert offered([ran, Probe("container", True)]) == ("container", "vm")
    assert "did not power off" in vm_probe(None, "", host, "kvm").why
    assert "failed (1)" in vm_probe(1, "qemu: could not open kernel\n", host, "tcg").why
    assert "failed (0)" in vm_probe(0, "no version here\n", host, "tcg").why
    assert "host's own kernel" in vm_probe(0, host, host, "tcg").why
