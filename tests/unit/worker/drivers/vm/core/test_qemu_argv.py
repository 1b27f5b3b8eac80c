"""qemu's command line for a vm machine and for the worker's probe boot."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from bodega.worker.drivers.vm.core.qemu import (
    CONSOLE_PORT,
    DEFAULT_TSC_KHZ,
    EXEC_PORT,
    RUN,
    Share,
    VmLaunch,
    argv,
    launch_of,
    launch_record,
    run_args,
    tsc_khz,
)


def test_a_machines_boot_has_its_disks_network_signal_and_exec_lines_and_qmp() -> None:
    launch = VmLaunch(vmlinuz=Path("/k/vmlinuz"), initramfs=Path("/k/init.cpio"), cpus=2,
                      memory_mb=512, accel="tcg", root=Path("/m/root.qcow2"),
                      config=Path("/m/config.img"), status=Path("/m/status.img"),
                      mac="02:bd:00:01:02:05", control=Path("/run/m.ctl"),
                      qmp=Path("/run/m.qmp"), exec_line=Path("/run/m.exec"), tsc_khz=2596136)
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
    # The exec line: a virtio-serial port the init finds by its name.
    assert "socket,id=exec,path=/run/m.exec,server=on,wait=off" in joined
    assert f"virtserialport,chardev=exec,name={EXEC_PORT}" in joined
    assert "-incoming" not in args


def test_a_swap_disk_is_one_more_raw_disk_with_its_own_serial_and_kept_for_resumes() -> None:
    plain = VmLaunch(vmlinuz=Path("/k/vmlinuz"), initramfs=Path("/k/init.cpio"), cpus=1,
                     memory_mb=256, accel="tcg", root=Path("/m/root.qcow2"),
                     config=Path("/m/config.img"), status=Path("/m/status.img"))
    swapping = replace(plain, swap=Path("/m/swap.img"))
    assert "bodega-swap" not in " ".join(argv(plain))
    added = argv(swapping)[len(argv(plain)):]
    # After every other disk: a boot without swap is the argv it always was.
    assert argv(swapping)[:len(argv(plain))] == argv(plain)
    assert added == ["-drive", "if=none,id=swap,file=/m/swap.img,format=raw",
                     "-device", "virtio-blk-device,drive=swap,serial=bodega-swap"]
    # Guest memory is what qemu is given: the swap is disk beside it.
    assert "-m 256" in " ".join(argv(swapping))
    assert launch_of(launch_record(swapping)).swap == Path("/m/swap.img")
    # A boot kept before swap disks were is read as one without.
    record = launch_record(plain).replace(b',"swap":null', b"")
    assert b"swap" not in record
    assert launch_of(record) == plain


def test_a_console_is_a_virtio_console_beside_the_exec_port_on_one_device() -> None:
    base = VmLaunch(vmlinuz=Path("/k/vmlinuz"), initramfs=Path("/k/init.cpio"), cpus=1,
                    memory_mb=256, accel="tcg", exec_line=Path("/run/m.exec"))
    # A boot kept from before consoles runs again as it was booted, device for device.
    old = launch_of(launch_record(base).replace(b',"console_line":null', b""))
    assert old.console_line is None
    assert not any(a.startswith("virtconsole") for a in argv(old))
    args = argv(replace(base, console_line=Path("/run/m.tty")))
    joined = " ".join(args)
    assert joined.count("virtio-serial-device,max_ports=2") == 1  # port 0 the console's
    assert "socket,id=terminal,path=/run/m.tty,server=on,wait=off" in joined
    assert f"virtconsole,chardev=terminal,name={CONSOLE_PORT}" in joined
    at = args.index("socket,id=terminal,path=/run/m.tty,server=on,wait=off") - 1
    assert args[:at] + args[at + 4:] == argv(old), "the exec port as it was"
    alone = argv(replace(base, exec_line=None, console_line=Path("/run/m.tty")))
    assert "virtio-serial-device,max_ports=2" in alone
    assert not any("virtserialport" in a for a in alone)


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


def test_a_volume_is_a_virtiofs_share_on_shared_memory_served_before_qemu() -> None:
    share = Share("vol0", Path("/run/m.vol0"), Path("/v/vol_1"))
    launch = VmLaunch(vmlinuz=Path("/k"), initramfs=Path("/i"), cpus=1, memory_mb=256,
                      accel="tcg", shares=(share,))
    args = argv(launch)
    assert args[2].endswith(",memory-backend=mem")
    joined = " ".join(args)
    assert "memory-backend-memfd,id=mem,size=256M,share=on" in joined
    assert "socket,id=fs-vol0,path=/run/m.vol0" in joined
    assert "vhost-user-fs-device,chardev=fs-vol0,tag=vol0" in joined
    assert run_args((share,)) == ["--share", "/run/m.vol0", "/v/vol_1"]
    plain = argv(VmLaunch(vmlinuz=Path("/k"), initramfs=Path("/i"), cpus=1, memory_mb=256,
                          accel="tcg"))
    assert "memory-backend" not in " ".join(plain), "no shared memory without a volume"
