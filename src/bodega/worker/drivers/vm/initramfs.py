"""The kernel a vm machine boots and bodega's initramfs for it: busybox, the modules the
kernel builds as modules (virtio's mmio transport, its disk, network and serial ports, ext4
where it is one), and bodega's own init (``init.sh``).

The kernel is Debian's cloud kernel unpacked in a directory (``scripts/host-packages``
puts it in ``DEFAULT_KERNEL_DIR``; ``bodega worker --vm-kernel`` names another): its
``boot/vmlinuz-<version>`` and ``lib/modules/<version>``. The package carries no
``modules.dep``, so the order modules load in comes from each one's own ``depends=``
(``load_order``). The archive is a newc cpio written here (``cpio``), uncompressed: the
kernel unpacks it faster than it would inflate one, and it is built once per kernel
version and init (its name carries a hash of both and of busybox), then reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DEFAULT_KERNEL_DIR = Path("/var/lib/bodega/vm-kernel")
BUSYBOX = Path("/bin/busybox")
OTHER_BUILDS_KEPT = 24 * 3600.0  # seconds another build's initramfs is left in the cache
# What the init needs of the kernel: its disks and network are virtio devices on the
# microvm's mmio transport, its root disk ext4, signals come on the second serial port,
# execs on a virtio-serial port (virtio_console); virtiofs (and fuse, which it needs): a
# volume is a directory of the host shared with the VM.
WANTED_MODULES = ("virtio_mmio", "virtio_blk", "virtio_net", "virtio_console", "ext4",
                  "virtiofs")
DEPENDS = re.compile(rb"(?:^|\0)depends=([^\0]*)\0")


class KernelError(Exception):
    """No usable kernel where bodega looked; the message says what is missing."""


@dataclass(frozen=True)
class Kernel:
    version: str
    vmlinuz: Path
    modules: Path  # lib/modules/<version>

    @classmethod
    def find(cls, directory: Path) -> Kernel:
        """The newest kernel unpacked in ``directory`` (``boot/vmlinuz-*``, modules beside)."""
        images = sorted(directory.glob("boot/vmlinuz-*"))
        if not images:
            raise KernelError(f"no kernel in {directory} (boot/vmlinuz-*): "
                              "scripts/host-packages unpacks one")
        vmlinuz = images[-1]
        version = vmlinuz.name.removeprefix("vmlinuz-")
        for lib in ("lib", "usr/lib"):
            modules = directory / lib / "modules" / version
            if modules.is_dir():
                return cls(version, vmlinuz, modules)
        raise KernelError(f"no modules for kernel {version} in {directory}/lib/modules")


def module_files(modules: Path) -> dict[str, Path]:
    """Every module of the kernel by name (``-`` and ``_`` are one to the kernel)."""
    return {path.name.removesuffix(".ko").replace("-", "_"): path
            for path in modules.rglob("*.ko")}


def depends(module: bytes) -> list[str]:
    """The modules a module's ``.modinfo`` says it needs loaded first."""
    found = DEPENDS.search(module)
    if found is None or not found.group(1):
        return []
    return [name.replace("-", "_") for name in found.group(1).decode().split(",") if name]


def load_order(wanted: Iterable[str], needs: Callable[[str], list[str]],
               available: Iterable[str], builtin: Iterable[str]) -> list[str]:
    """The modules to load, each after those it depends on: ``wanted`` and what they need,
    leaving out those built into the kernel. A wanted module neither available nor built
    in is a ``KernelError``."""
    have, built = set(available), {name.replace("-", "_") for name in builtin}
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in seen or name in built:
            return
        if name in chain:
            raise KernelError(f"modules depend on each other in a ring: {' -> '.join(chain)}")
        if name not in have:
            raise KernelError(f"the kernel has no module {name} and does not build it in")
        for dependency in needs(name):
            visit(dependency, (*chain, name))
        seen.add(name)
        order.append(name)

    for name in wanted:
        visit(name.replace("-", "_"), ())
    return order


def builtin_modules(modules: Path) -> list[str]:
    """The modules built into the kernel (``modules.builtin``: one path a line)."""
    try:
        lines = (modules / "modules.builtin").read_text().split()
    except OSError:
        return []
    return [Path(line).name.removesuffix(".ko").replace("-", "_") for line in lines]


def cpio(entries: Iterable[tuple[str, int, bytes]]) -> bytes:
    """A newc cpio archive of ``(path, mode, data)`` entries (a directory's mode says so),
    ending with its trailer; owned by root, dated 0, so the same input is the same bytes."""
    out = bytearray()

    def entry(number: int, name: str, mode: int, data: bytes) -> None:
        name_bytes = name.encode() + b"\0"
        fields = (number, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_bytes), 0)
        out.extend(b"070701" + b"".join(b"%08X" % value for value in fields))
        out.extend(name_bytes)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))

    for number, (name, mode, data) in enumerate(entries, start=1):
        entry(number, name, mode, data)
    entry(0, "TRAILER!!!", 0, b"")
    return bytes(out)


def init_script() -> bytes:
    return resources.files("bodega.worker.drivers.vm").joinpath("init.sh").read_bytes()


def archive(init: bytes, busybox: bytes, modules: Mapping[str, bytes]) -> bytes:
    """The initramfs: ``/init``, ``/bin/busybox``, ``/modules.d/<name>.ko`` and ``/modules``
    (their names in load order, one a line)."""
    directory, program, data = 0o040755, 0o100755, 0o100644
    entries = [("bin", directory, b""), ("modules.d", directory, b""),
               ("init", program, init), ("bin/busybox", program, busybox),
               ("modules", data, "".join(f"{name}\n" for name in modules).encode())]
    entries += [(f"modules.d/{name}.ko", data, module) for name, module in modules.items()]
    return cpio(entries)


def initramfs(kernel: Kernel, cache_dir: Path, busybox: Path = BUSYBOX) -> Path:
    """bodega's initramfs for ``kernel``, built into ``cache_dir`` unless already there."""
    if not busybox.exists():
        raise KernelError(f"no {busybox} for the guest's init (busybox-static)")
    init, box = init_script(), busybox.read_bytes()
    key = hashlib.sha256(init + box + kernel.version.encode()
                         + " ".join(WANTED_MODULES).encode()).hexdigest()[:16]
    path = cache_dir / f"initramfs-{kernel.version}-{key}.cpio"
    if path.exists():
        return path
    files = module_files(kernel.modules)
    order = load_order(WANTED_MODULES, lambda name: depends(files[name].read_bytes()),
                       files, builtin_modules(kernel.modules))
    data = archive(init, box, {name: files[name].read_bytes() for name in order})
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.rename(path)
    # Another build's is left a day: a worker of another bodega on this host (an upgrade
    # rolling through, two checkouts' tests) may be about to boot from it.
    for old in cache_dir.glob(f"initramfs-{kernel.version}-*.cpio"):
        with contextlib.suppress(OSError):
            if old != path and time.time() - old.stat().st_mtime > OTHER_BUILDS_KEPT:
                old.unlink()
    return path


def qemu_installed() -> bool:
    return shutil.which("qemu-system-x86_64") is not None
