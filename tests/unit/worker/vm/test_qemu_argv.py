"""qemu's command line for a vm machine and for the worker's probe boot."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from bodega.worker.drivers.vm.qemu import (
    DEFAULT_TSC_KHZ,
    RUN,
    VmLaunch,
    argv,
    launch_of,
    launch_record,
    tsc_khz,
)


def test_a_machines_boot_has_its_disks_network_signal_line_and_qmp() -> None:
    launch = VmLaunch(vmlinuz=Path("/k/vmlinuz"), initramfs=Path("/k/init.cpio"), cpus=2,
                      memory_mb=512, accel="tcg", root=Path("/m/root.qcow2"),
                      config=Path("/m/config.img"), status=Path("/m/status.img"),
                      mac="02:bd:00:01:02:05", control=Path("/run/m.ctl"),
                      qmp=Path("/run/m.qmp"), tsc_khz=2596136)
    args = argv(launch)
    assert args[:5] == ["qemu-system-x86_64", "-M", args[2], "-accel", "tcg,tb-size=32"]
    assert args[2].startswith("microvm,")
    joined = " ".join(args)
    assert "-smp 2 -m 512" in joined
    assert "tsc_early_khz=2596136" in args[args.index("-append") + 1]
    assert "bodega.probe" not in joined
    for serial in ("bodega-root", "bodega-config", "bodega-status"):
        assert f"serial={serial}" in joined
    assert "file=/m/config.img,format=raw,readonly=on" in joined
    assert "mac=02:bd:00:01:02:05" in joined
    assert "path=/run/m.ctl,server=on,wait=off" in joined
    assert "-qmp unix:/run/m.qmp,server=on,wait=off" in joined
    assert "-incoming" not in args


def test_a_probe_boot_has_no_disks_and_kvm_uses_the_hosts_cpu() -> None:
    args = argv(VmLaunch(vmlinuz=Path("/k/vmlinuz"), initramfs=Path("/k/init.cpio"), cpus=1,
                         memory_mb=128, accel="kvm", probe=True))
    assert args[args.index("-accel") + 1] == "kvm"
    assert args[args.index("-cpu") + 1] == "host"
    assert "bodega.probe" in args[args.index("-append") + 1]
    assert not any(a.startswith("virtio-") for a in args)


def test_a_resume_is_its_boots_argv_waiting_stopped_for_its_snapshot() -> None:
    boot = VmLaunch(vmlinuz=Path("/k/vmlinuz"), initramfs=Path("/k/init.cpio"), cpus=2,
                    memory_mb=256, accel="tcg", root=Path("/m/root.qcow2"),
                    config=Path("/m/config.img"), status=Path("/m/status.img"),
                    mac="02:bd:00:01:02:05", control=Path("/run/m.ctl"),
                    qmp=Path("/run/m.qmp"), tsc_khz=2596136)
    kept = launch_of(launch_record(boot))
    assert kept == boot
    resume = argv(replace(kept, incoming=True))
    # The same machine, device for device, and qemu waits for the snapshot over QMP with
    # its vCPUs stopped until told to go on.
    assert resume[:len(argv(boot))] == argv(boot)
    assert resume[len(argv(boot)):] == ["-S", "-incoming", "defer"]


def test_the_tsc_rate_is_the_hosts_cpu_mhz() -> None:
    assert tsc_khz("processor\t: 0\ncpu MHz\t\t: 2596.136\n") == 2596136
    assert tsc_khz("processor\t: 0\n") == DEFAULT_TSC_KHZ


def test_the_run_script_parses_as_shell() -> None:
    subprocess.run(["/bin/sh", "-n"], input=RUN.encode(), check=True)
