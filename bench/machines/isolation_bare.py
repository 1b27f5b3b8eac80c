"""The runtimes alone, each on what a bodega machine of its isolation runs: the baselines
of ``bench/machines/isolation.py``.

Each run gets a fresh network namespace, its ``eth0`` one end of a veth whose other end
is on the host (``Netns``), as a machine's namespace is reached from the host, and is
timed from the runtime's exec until the program answers HTTP on the namespace's
address, with the same probe as the bodega side (``first_answer``):

- **container**: the worker's own runtime (crun here, run as the worker runs it;
  runc beside it) on the bundle config.json the worker wrote for a machine of the
  image, over an overlay of the same unpacked image, its network namespace ours;
- **sandbox**: ``runsc --platform=ptrace --network=host run`` on the config.json the
  worker wrote for a sandbox machine, entered into our namespace as the worker enters
  the machine's (the sandbox's spec names none);
- **vm**: qemu's argv and the tap wiring bodega runs (``qemu.argv``, ``qemu.RUN``) with
  the same kernel, bodega's initramfs and a qcow2 over the same ext4 root the worker
  made of the image, the config disk from bodega's ``GuestConfig``: the whole boot of
  the guest to its program's first answer.
"""

# The runtimes are started as a shell would run them, one blocking call at a time, and
# the host read as a shell would read it.
# ruff: noqa: ASYNC220, ASYNC221, ASYNC240

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bodega.worker.drivers.oci.core import runtimes
from bodega.worker.drivers.oci.core.bundle import MachineCommand, command, environment, image_user
from bodega.worker.drivers.process.launch import SHELL
from bodega.worker.drivers.vm.core.config import STATUS_BYTES, GuestConfig, config_disk
from bodega.worker.drivers.vm.core.qemu import RUN, VmLaunch, argv, tsc_khz
from bodega.worker.drivers.vm.disks import machine_disk
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR, Kernel, initramfs
from bodega.worker.drivers.vm.machines import namespace_network
from bodega.worker.host.image_drivers import unified_controllers
from bodega.worker.host.vm_probe import INITRAMFS_DIR, probe
from bodega.worker.images.store import ImageStore

PORT = 8080  # the image's httpd
SUBNET = "10.242"  # the baselines' namespaces: a /30 each, host .1, namespace .2
PREFIX = "bench-iso"  # every namespace and cgroup of the baselines, swept at the end
# Every timed start, of either side, begins after this long with nothing started: the
# kernel's cgroup lock stays ready for a few ms after a cgroup change (docs/images.md).
QUIET_SECONDS = 0.3


async def first_answer(host: str, began: float, deadline: float = 60.0) -> float:
    """Seconds from ``began`` until ``host``:8080 answers 200: a bare HTTP/1.0 GET on a
    fresh socket every millisecond (an HTTP library's own CPU per try would slow, on two
    busy cores, the start it times). The same probe for every side."""
    request = f"GET / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode()
    end = began + deadline
    while True:
        with contextlib.suppress(OSError, IndexError):
            reader, writer = await asyncio.open_connection(host, PORT)
            try:
                writer.write(request)
                if (await reader.readline()).split(b" ")[1] == b"200":
                    return time.perf_counter() - began
            finally:
                writer.close()
        if time.perf_counter() > end:
            raise TimeoutError(f"{host}:{PORT} did not answer in {deadline:.0f}s")
        await asyncio.sleep(0.001)


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


@dataclass(frozen=True)
class Netns:
    """A namespace of our own, reached from the host over a veth as a machine's is."""

    name: str
    host_link: str
    ip: str

    @property
    def path(self) -> str:
        return f"/run/netns/{self.name}"

    def enter(self) -> list[str]:
        return ["nsenter", f"--net={self.path}", "--"]


@contextlib.contextmanager
def fresh_netns(index: int) -> Iterator[Netns]:
    """A namespace whose ``eth0`` holds 10.242.x.y+2/30, its default route the host's end."""
    slot = index % 16384
    base = f"{SUBNET}.{slot // 64}"
    host_ip, ip = f"{base}.{slot % 64 * 4 + 1}", f"{base}.{slot % 64 * 4 + 2}"
    netns = Netns(f"{PREFIX}-{os.getpid()}-{index}", f"bi{os.getpid() % 100000}h{slot}", ip)
    try:
        sh("ip", "netns", "add", netns.name)
        sh("ip", "link", "add", netns.host_link, "type", "veth", "peer", "name", "eth0",
           "netns", netns.name)
        sh("ip", "addr", "add", f"{host_ip}/30", "dev", netns.host_link)
        sh("ip", "link", "set", netns.host_link, "up")
        sh("ip", "-n", netns.name, "addr", "add", f"{ip}/30", "dev", "eth0")
        sh("ip", "-n", netns.name, "link", "set", "eth0", "up")
        sh("ip", "-n", netns.name, "link", "set", "lo", "up")
        sh("ip", "-n", netns.name, "route", "add", "default", "via", host_ip)
        yield netns
    finally:
        subprocess.run(["ip", "netns", "del", netns.name], check=False,
                       stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "link", "del", netns.host_link], check=False,
                       stderr=subprocess.DEVNULL)


@dataclass(frozen=True)
class MachineFiles:
    """What the worker made for a machine of the image: read while the machine is up."""

    config: dict[str, Any]  # its bundle's config.json (none for a vm)
    images: Path  # the worker's image store
    digest: str
    binds: dict[str, bytes]  # the files of the machine's own its bundle binds (resolv.conf)

    @classmethod
    def of(cls, workers: Path, machine_id: str) -> MachineFiles:
        [machine] = workers.glob(f"*/machines/{machine_id}")
        bundle = machine / "oci"
        path = bundle / "config.json"
        config = json.loads(path.read_text()) if path.exists() else {}
        binds = {m["source"]: Path(m["source"]).read_bytes() for m in config.get("mounts", [])
                 if m["source"].startswith(f"{machine}/") and Path(m["source"]).is_file()}
        return cls(config, machine.parents[1] / "images",
                   (bundle / "image").read_text().strip(), binds)

    @property
    def store(self) -> ImageStore:
        return ImageStore(self.images)

    @property
    def rootfs(self) -> Path:
        return self.store.rootfs(self.digest)


def container_runtimes() -> dict[str, list[str]]:
    """The worker's runtime as the worker runs it (``auto``: crun where installed), and
    runc beside it when that is another."""
    picked = runtimes.pick("auto", lambda name: shutil.which(name) is not None)
    found = {picked: list(runtimes.command(picked, unified_controllers()))}
    if picked != "runc" and shutil.which("runc"):
        found["runc"] = ["runc"]
    return found


class Bare:
    """The baselines' runs, their state under ``work``."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.runs = 0

    def _bundle(self, files: MachineFiles, netns: Netns | None, name: str) -> Path:
        """The machine's own bundle config on an overlay of the same base: the container's
        network namespace ours (None: none in the spec, a sandbox's), cgroups of its own."""
        bundle = self.work / name
        for sub in ("upper", "work", "rootfs"):
            (bundle / sub).mkdir(parents=True, exist_ok=True)
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir={files.rootfs},upperdir={bundle / 'upper'},workdir={bundle / 'work'}",
           str(bundle / "rootfs"))
        config = json.loads(json.dumps(files.config))
        config["root"]["path"] = str(bundle / "rootfs")
        for index, (source, content) in enumerate(files.binds.items()):
            copy = bundle / f"bind-{index}"
            copy.write_bytes(content)
            for mount in config["mounts"]:
                if mount["source"] == source:
                    mount["source"] = str(copy)
        config["linux"]["cgroupsPath"] = f"/{PREFIX}/{name}"
        if netns is not None:
            config["linux"]["namespaces"] = [
                {"type": "network", "path": netns.path} if ns["type"] == "network" else ns
                for ns in config["linux"]["namespaces"]]
        (bundle / "config.json").write_text(json.dumps(config))
        return bundle

    async def container(self, files: MachineFiles, runtime: list[str]) -> float:
        """``runtime run`` of the machine's bundle in a fresh namespace, to its first answer."""
        self.runs += 1
        name = f"{PREFIX}-{os.getpid()}-{self.runs}"
        root = ["--root", str(self.work / "state" / Path(runtime[-1]).name)]
        with fresh_netns(self.runs) as netns:
            bundle = self._bundle(files, netns, name)
            try:
                return await timed([*runtime, *root, "run", "--bundle", str(bundle), name],
                                   netns.ip, bundle / "log")
            finally:
                subprocess.run([*runtime, *root, "delete", "--force", name], check=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                subprocess.run(["umount", "-l", str(bundle / "rootfs")], check=False)

    async def sandbox(self, files: MachineFiles) -> float:
        """``runsc run`` of the sandbox machine's bundle, entered into a fresh namespace as
        the worker's wrapper enters the machine's, to its first answer."""
        self.runs += 1
        name = f"{PREFIX}-{os.getpid()}-{self.runs}"
        runsc = [runtimes.SANDBOX, "--root", str(self.work / "state" / "runsc"),
                 *runtimes.SANDBOX_FLAGS]
        with fresh_netns(self.runs) as netns:
            bundle = self._bundle(files, None, name)
            try:
                return await timed([*netns.enter(), *runsc, "run", "--bundle", str(bundle),
                                    name], netns.ip, bundle / "log")
            finally:
                subprocess.run([*netns.enter(), *runsc, "delete", "--force", name],
                               check=False, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                subprocess.run(["umount", "-l", str(bundle / "rootfs")], check=False)

    async def vm(self, files: MachineFiles, memory_mb: int) -> float:
        """qemu as bodega runs it (its argv, ``qemu.RUN``'s tap wiring) on the same kernel,
        initramfs and root, in a fresh namespace, to the guest program's first answer."""
        self.runs += 1
        kernel = Kernel.find(DEFAULT_KERNEL_DIR)
        initrd = initramfs(kernel, INITRAMFS_DIR)  # the one the workers built
        khz = tsc_khz(Path("/proc/cpuinfo").read_text())
        accel = probe(kernel, initrd, khz).accel or "tcg"  # the host's kept verdict
        directory = self.work / f"vm-{self.runs}"
        directory.mkdir(parents=True)
        await machine_disk(files.rootfs.parent / "root.ext4", directory / "root.qcow2")
        image = files.store.image_config(files.digest)
        with fresh_netns(self.runs) as netns:
            config = GuestConfig(
                hostname="bench", argv=command(image, MachineCommand([], None, None)),
                env=dict(item.partition("=")[::2] for item in environment(image, {})),
                network=await namespace_network(netns.name),
                user=image_user(image.config.user, files.rootfs),
                workdir=image.config.working_dir or "/")
            (directory / "config.img").write_bytes(config_disk(config))
            (directory / "status.img").write_bytes(b"\0" * STATUS_BYTES)
            launch = VmLaunch(
                vmlinuz=kernel.vmlinuz, initramfs=initrd, cpus=1, memory_mb=memory_mb,
                accel=accel, root=directory / "root.qcow2", config=directory / "config.img",
                status=directory / "status.img", mac=config.network.mac,
                control=directory / "ctl", qmp=directory / "qmp", tsc_khz=khz)
            program = [SHELL, "-c", RUN, "bodega-vm", str(directory / "status.img"),
                       *argv(launch)]
            return await timed([*netns.enter(), *program], netns.ip, directory / "log",
                               deadline=120.0)


async def timed(argv: Sequence[str], ip: str, log: Path, deadline: float = 60.0) -> float:
    """Seconds from exec of ``argv`` (in a session of its own, killed after) to ``ip``'s
    first HTTP answer; what it wrote in ``log``, said if it never answered."""
    async with running(argv, log) as began:
        try:
            return await first_answer(ip, began, deadline)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {' '.join(argv)[:200]}: "
                               f"{log.read_text(errors='replace')[-2000:]}") from None


@contextlib.asynccontextmanager
async def running(argv: Sequence[str], log: Path) -> AsyncIterator[float]:
    await asyncio.sleep(QUIET_SECONDS)
    with log.open("wb") as output:
        began = time.perf_counter()
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=output, start_new_session=True)
    try:
        yield began
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


def sweep() -> None:
    """Whatever a baseline cut short left: its namespaces and its cgroups' parents."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        name = line.split(" ")[0]
        if name.startswith(f"{PREFIX}-{os.getpid()}-"):
            subprocess.run(["ip", "netns", "del", name], check=False)
    for parent in Path("/sys/fs/cgroup").glob(f"*/{PREFIX}"):
        for child in parent.iterdir():
            if child.is_dir():
                with contextlib.suppress(OSError):
                    child.rmdir()
        with contextlib.suppress(OSError):
            parent.rmdir()
