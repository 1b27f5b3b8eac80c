"""qemu's command line for a vm machine, and the script that runs it in the machine's
network namespace; pure.

The machine is qemu's ``microvm``: no PCI, no firmware, the kernel loaded directly,
virtio devices on mmio (the disks: root, config, status and a swap disk where the
machine asks one, each found by the init by its serial), the legacy PIT, PIC and RTC the
cloud kernel still wants for its clocks. ``tsc_early_khz`` gives the kernel the TSC's
rate: without it microvm hangs calibrating it. The first serial port is the console,
written to the run's stdout (the machine's log); the second is the init's signal line, a
Unix socket the worker connects to (``signal_line.py``); QMP answers on a third, for
suspend; the init's exec line is a virtio-serial port named ``EXEC_PORT``, a fourth
(``guest_exec.py``); a console's terminal is a virtio console on the same device, a
fifth, the guest's ``/dev/hvc0`` (``guest_console.py``). A resume is the same argv
(``VmLaunch`` is kept beside the machine's disks: ``launch_record``) with ``-incoming
defer``: qemu waits, its vCPUs stopped (``-S``), for the snapshot it is given by QMP
(``snapshots.py``).

``RUN`` is the program the worker's wrapper runs (``process/launch.py``), in the
machine's namespace: it starts a virtiofsd for each directory shared with the VM (the
machine's volume: ``--share SOCKET DIR``, before qemu's argv), makes the VM's tap and
redirects everything between the namespace's ``eth0`` and the tap both ways with tc (as
Kata Containers does), so the VM, given ``eth0``'s MAC and addresses, is the machine on
its network and nothing of the namespace's wiring changes; then it runs qemu, undoes the
redirect, and exits with the program's code from the status disk (qemu's own if the init
wrote none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter

QEMU = "qemu-system-x86_64"
TAP = "tap0"
MACHINE = "microvm,pit=on,pic=on,rtc=on,isa-serial=on"
DEFAULT_TSC_KHZ = 2_600_000
MIN_MEMORY_MB = 128  # below this the cloud kernel and the init do not come up
# Bounds the code tcg translates, part of what qemu holds beside the guest's memory
# (``capacity.VM_OVERHEAD_MB``, which the machine's cgroup and the ledger allow it).
TB_SIZE_MB = 32
CONTROL_DIR = Path("/run/bodega/vm")  # Unix sockets: a machine's dir may be too deep
VIRTIOFSD = Path("/usr/lib/qemu/virtiofsd")  # Debian's, beside qemu (qemu-system-common)
EXEC_PORT = "bodega.exec"  # the init finds its exec line by this name
CONSOLE_PORT = "bodega.console"  # the guest's /dev/hvc0: a virtio console is a terminal

# $1 the status disk, then --share SOCKET DIR for each shared directory, then qemu's argv.
# A virtiofsd ends when its qemu does (its one connection closes); qemu waits for its socket.
RUN = r"""status=$1
shift
while [ "$1" = --share ]; do
  rm -f "$2"
  @VIRTIOFSD@ --socket-path="$2" -o source="$3" -o cache=auto -o log_level=warn &
  tries=0
  until [ -S "$2" ]; do
    tries=$((tries + 1))
    [ $tries -gt 200 ] && { echo "bodega: virtiofsd for $3 did not start" >&2; exit 125; }
    sleep 0.05
  done
  shift 3
done
undo() { tc qdisc del dev eth0 ingress 2>/dev/null; ip link del @TAP@ 2>/dev/null; }
undo
ip tuntap add @TAP@ mode tap &&
  ip link set @TAP@ mtu "$(cat /sys/class/net/eth0/mtu)" up &&
  tc qdisc add dev eth0 ingress &&
  tc filter add dev eth0 parent ffff: protocol all u32 match u8 0 0 \
    action mirred egress redirect dev @TAP@ &&
  tc qdisc add dev @TAP@ ingress &&
  tc filter add dev @TAP@ parent ffff: protocol all u32 match u8 0 0 \
    action mirred egress redirect dev eth0 ||
  { echo "bodega: could not wire the VM's tap" >&2; undo; exit 125; }
"$@"
qemu=$?
undo
code=$(head -c 16 "$status" | tr -d '\0' | sed -n 's/^exit=\([0-9][0-9]*\)$/\1/p')
exit "${code:-$qemu}"
""".replace("@TAP@", TAP).replace("@VIRTIOFSD@", str(VIRTIOFSD))


@dataclass(frozen=True)
class Share:
    """A directory of the host the VM mounts by virtiofs (``tag``), served on ``socket``."""

    tag: str
    socket: Path
    source: Path


@dataclass(frozen=True)
class VmLaunch:
    """One boot of one machine's VM: what qemu is given."""

    vmlinuz: Path
    initramfs: Path
    cpus: int
    memory_mb: int
    accel: str  # kvm or tcg
    root: Path | None = None  # the machine's qcow2 (None: a probe, no disks)
    config: Path | None = None
    status: Path | None = None
    swap: Path | None = None  # the machine's swap disk (init.swap_size_mb), if it asked one
    mac: str = ""
    control: Path | None = None  # the signal line's socket
    qmp: Path | None = None
    exec_line: Path | None = None  # the exec line's socket
    console_line: Path | None = None  # the console's socket (None: booted before consoles)
    incoming: bool = False  # wait for a snapshot to resume from (QMP), instead of booting
    shares: tuple[Share, ...] = ()
    tsc_khz: int = DEFAULT_TSC_KHZ
    probe: bool = False
    # The guest's init answers the signals it takes (``signal_line.py``). A boot kept by an
    # older bodega has none: its init, still in the guest's memory when it resumes, reads
    # bare numbers.
    init_answers_signals: bool = False


def kernel_command_line(launch: VmLaunch) -> str:
    line = ["console=ttyS0", "quiet", f"tsc_early_khz={launch.tsc_khz}", "pci=off",
            "panic=-1", "8250.nr_uarts=2"]
    if launch.probe:
        line.append("bodega.probe")
    return " ".join(line)


def argv(launch: VmLaunch) -> list[str]:
    """qemu's argv for ``launch``; its console on stdout."""
    accel = "kvm" if launch.accel == "kvm" else f"tcg,tb-size={TB_SIZE_MB}"
    # virtiofsd maps the guest's memory: it must be a shared memfd, and the devices modern.
    machine = f"{MACHINE},memory-backend=mem" if launch.shares else MACHINE
    args = [QEMU, "-M", machine, "-accel", accel,
            "-cpu", "host" if launch.accel == "kvm" else "max",
            "-smp", str(max(1, launch.cpus)), "-m", str(launch.memory_mb),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", str(launch.vmlinuz), "-initrd", str(launch.initramfs),
            "-append", kernel_command_line(launch),
            "-chardev", "stdio,id=console,signal=off", "-serial", "chardev:console"]
    if launch.control is not None:
        args += ["-chardev", f"socket,id=control,path={launch.control},server=on,wait=off",
                 "-device", "isa-serial,chardev=control,iobase=0x2f8,irq=3"]
    disks = [("root", launch.root, "qcow2", ""), ("config", launch.config, "raw", ",readonly=on"),
             ("status", launch.status, "raw", ""), ("swap", launch.swap, "raw", "")]
    for name, path, fmt, extra in disks:
        if path is not None:
            args += ["-drive", f"if=none,id={name},file={path},format={fmt}{extra}",
                     "-device", f"virtio-blk-device,drive={name},serial=bodega-{name}"]
    if launch.mac:
        args += ["-netdev", f"tap,id=net,ifname={TAP},script=no,downscript=no",
                 "-device", f"virtio-net-device,netdev=net,mac={launch.mac}"]
    if launch.shares:
        args += ["-object", f"memory-backend-memfd,id=mem,size={launch.memory_mb}M,share=on",
                 "-global", "virtio-mmio.force-legacy=false"]
    for share in launch.shares:
        args += ["-chardev", f"socket,id=fs-{share.tag},path={share.socket}",
                 "-device", f"vhost-user-fs-device,chardev=fs-{share.tag},tag={share.tag}"]
    if launch.exec_line is not None or launch.console_line is not None:
        # Port 0 is a console's, whichever device comes first: the exec port is port 1.
        args += ["-device", "virtio-serial-device,max_ports=2"]
    if launch.exec_line is not None:
        args += ["-chardev", f"socket,id=exec,path={launch.exec_line},server=on,wait=off",
                 "-device", f"virtserialport,chardev=exec,name={EXEC_PORT}"]
    if launch.console_line is not None:
        args += ["-chardev", f"socket,id=terminal,path={launch.console_line},server=on,"
                 "wait=off", "-device", f"virtconsole,chardev=terminal,name={CONSOLE_PORT}"]
    if launch.qmp is not None:
        args += ["-qmp", f"unix:{launch.qmp},server=on,wait=off"]
    if launch.incoming:
        args += ["-S", "-incoming", "defer"]
    return args


LAUNCHES = TypeAdapter(VmLaunch)


def launch_record(launch: VmLaunch) -> bytes:
    """What is kept of a boot for its resumes: a resume runs the same qemu, device for
    device, as the boot whose state its snapshot holds."""
    return LAUNCHES.dump_json(launch)


def launch_of(record: bytes) -> VmLaunch:
    return LAUNCHES.validate_json(record)


def tsc_khz(cpuinfo: str) -> int:
    """The host's TSC rate in kHz, as the guest's kernel is told it (``cpu MHz``)."""
    found = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", cpuinfo, re.MULTILINE)
    if found is None:
        return DEFAULT_TSC_KHZ
    return int(float(found.group(1)) * 1000)


def control_socket(machine_id: str) -> Path:
    return CONTROL_DIR / f"{machine_id}.ctl"


def qmp_socket(machine_id: str) -> Path:
    return CONTROL_DIR / f"{machine_id}.qmp"


def share_socket(machine_id: str, tag: str) -> Path:
    return CONTROL_DIR / f"{machine_id}.{tag}"


def run_args(shares: tuple[Share, ...]) -> list[str]:
    """``RUN``'s arguments before qemu's argv that start a virtiofsd for each share."""
    return [arg for share in shares for arg in ("--share", str(share.socket), str(share.source))]


def exec_socket(machine_id: str) -> Path:
    return CONTROL_DIR / f"{machine_id}.exec"


def console_socket(machine_id: str) -> Path:
    return CONTROL_DIR / f"{machine_id}.tty"
