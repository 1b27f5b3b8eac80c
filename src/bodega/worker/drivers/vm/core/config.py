"""What a vm machine's guest init is told, and what it tells back; pure.

The init (``init.sh``) reads the machine's config from a small disk of its own
(``render``: shell assignments, every value one quoted literal, so nothing in a
variable or an argument is ever parsed by the guest's shell), not from the kernel's
command line, which any user of the host can read in qemu's argv: the machine's
variables hold its app's secrets. It writes the program's exit code to a second
disk (``exit_code`` reads it): a file on the host that outlives the worker, so an
exit while the worker is down is still known when it comes back, as the wrapper's
exit file is for a container.

Its network is the one the machine's namespace was wired with (``GuestNetwork``):
the same addresses, MAC and gateways, read from the namespace's ``eth0``, whose
traffic the worker redirects to and from the VM's tap (``qemu.py``).
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bodega.worker.core.guest_files import GuestFile
from bodega.worker.drivers.oci.core.bundle import BundleError

CONFIG_BYTES = 1 << 20  # the config disk: the rendered config, padded with NULs
STATUS_BYTES = 4096  # the status disk: "exit=<code>" once the program has ended
EXIT_LINE = re.compile(rb"exit=(\d{1,3})\n")
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHARE_TAG = re.compile(r"[a-z0-9]{1,32}")


@dataclass(frozen=True)
class GuestNetwork:
    """The machine's network as its namespace's ``eth0`` has it."""

    mac: str
    addresses: tuple[str, ...]  # address/prefix, IPv4 first
    gateway4: str = ""
    gateway6: str = ""


@dataclass(frozen=True)
class GuestConfig:
    hostname: str
    argv: Sequence[str]
    env: Mapping[str, str]
    network: GuestNetwork
    user: tuple[int, int] = (0, 0)
    workdir: str = "/"
    resolv_conf: str = ""  # the private network's resolver, written over /etc/resolv.conf
    # Directories shared by virtiofs, (tag, path in the guest): the machine's volume.
    volumes: Sequence[tuple[str, str]] = ()
    swap: bool = False  # a swap disk is attached (``disks.swap_disk``): the init swaps on it
    # config.files, written into the root by the init before the volumes are mounted; the
    # paths an earlier boot wrote that this one does not, removed (the root disk outlives it)
    files: Sequence[GuestFile] = ()
    dropped: Sequence[str] = ()

    def render(self) -> str:
        """The shell the init sources: assignments, the program's argv as ``set --``, its
        variables in ``program_env``, run only in the program's own subshell, and its
        files in ``write_files`` (``drop_file PATH`` for each dropped, then ``put_file MODE
        PATH BASE64`` each)."""
        if not self.argv:
            raise BundleError("the image has no entrypoint or cmd and the config gives none")
        assignments = {
            "hostname": self.hostname, "addresses": " ".join(self.network.addresses),
            "gateway4": self.network.gateway4, "gateway6": self.network.gateway6,
            "uid": str(self.user[0]), "gid": str(self.user[1]),
            "workdir": self.workdir or "/", "resolv": self.resolv_conf,
            "volumes": " ".join(f"{tag}:{path}" for tag, path in self.volumes),
            "swap": "1" if self.swap else "",
        }
        for tag, path in self.volumes:
            if not SHARE_TAG.fullmatch(tag) or not path.startswith("/") or \
                    any(c.isspace() for c in path) or ":" in path:
                raise BundleError(f"a vm machine mounts a volume at an absolute path with no "
                                  f"space or ':' in it, not {path!r}")
        lines = [f"{name}={shlex.quote(value)}" for name, value in assignments.items()]
        lines.append("set -- " + " ".join(shlex.quote(arg) for arg in self.argv))
        lines.append("program_env() {")
        lines += [f"  export {shlex.quote(f'{name}={value}')}"
                  for name, value in self.env.items() if SHELL_NAME.fullmatch(name)]
        lines += ["  :", "}", "write_files() {"]
        lines += [f"  drop_file {shlex.quote(path)}" for path in self.dropped]
        lines += [f"  put_file {file.mode:04o} {shlex.quote(file.guest_path)} "
                  f"{base64.b64encode(file.data).decode()}" for file in self.files]
        lines += ["  :", "}"]
        return "\n".join(lines) + "\n"


def config_disk(config: GuestConfig) -> bytes:
    """The config disk's bytes: the rendered config, NUL-padded to ``CONFIG_BYTES``."""
    text = config.render().encode()
    if len(text) >= CONFIG_BYTES:
        raise BundleError(f"the machine's config is {len(text)} bytes; a VM takes under "
                          f"{CONFIG_BYTES}")
    return text.ljust(CONFIG_BYTES, b"\0")


def exit_code(status: bytes) -> int | None:
    """The code the init wrote on the status disk; None if it wrote none (it never
    reached the program's end: the VM was killed, or qemu failed)."""
    found = EXIT_LINE.match(status)
    return int(found.group(1)) if found else None


def guest_network(link: str, routes4: str, routes6: str) -> GuestNetwork:
    """The network of a namespace's ``eth0`` from ``ip -j addr show dev eth0`` and
    ``ip -j [-6] route show default``: its global addresses and default gateways."""
    interfaces = json.loads(link or "[]")
    if not interfaces:
        raise ValueError("the machine's namespace has no eth0")
    interface = interfaces[0]
    addresses = [f"{a['local']}/{a['prefixlen']}" for a in interface.get("addr_info", [])
                 if a.get("scope") == "global" and a.get("family") in ("inet", "inet6")]
    addresses.sort(key=lambda address: ":" in address)

    def gateway(text: str) -> str:
        for route in json.loads(text or "[]"):
            if route.get("dst") == "default" and route.get("gateway"):
                return str(route["gateway"])
        return ""

    return GuestNetwork(mac=str(interface.get("address", "")), addresses=tuple(addresses),
                        gateway4=gateway(routes4), gateway6=gateway(routes6))
