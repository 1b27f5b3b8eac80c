"""An OCI runtime spec (``config.json``) from the image config and the machine's; pure but for
``image_user``, which reads the user's ids from the image's own files.

What the machine's config says wins over the image: ``init.exec`` replaces
the whole command; ``init.entrypoint`` replaces the image's entrypoint (and
drops its cmd, as Docker does); ``init.cmd`` replaces its cmd. Env is the
image's, then the machine's on top (the image keeps its own PATH and HOME).

The container gets its own mount, IPC and UTS namespaces but shares the
worker's pid namespace and the machine's network namespace (the runtime joins
it by path), so signals, ``ps``, exit codes and the cgroups behave as
for a process machine: the program is not pid 1 of a namespace of its own,
where a plain SIGTERM would be ignored.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from bodega.model.json import JsonObject
from bodega.worker.images.core.manifest import ImageConfig

CAPABILITIES = [  # Docker's default set
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
]
MASKED = ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
          "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"]
READONLY = ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
            "/proc/sysrq-trigger"]
HOST_DEFAULTS = ("PATH", "HOME")
MIB = 1024 * 1024


class BundleError(ValueError):
    """The image and the machine's config together name nothing to run."""


@dataclass(frozen=True)
class MemoryLimits:
    """A machine's memory and the swap it may use beside it (``init.swap_size_mb``), in MB.

    The worker has already set them on the machine's cgroups (``process/cgroups.py``); the
    bundle says them again because a runtime writes its spec's limits as it joins them, and
    crun, told none, writes v1's memory + swap as unlimited. In the spec ``swap`` is memory
    + swap, as v1's ``memsw`` is; the runtime gives v2 ``memory.swap.max`` the difference.
    """

    memory_mb: int
    swap_mb: int = 0

    def resources(self) -> JsonObject:
        return {"limit": self.memory_mb * MIB, "swap": (self.memory_mb + self.swap_mb) * MIB}


@dataclass(frozen=True)
class MachineCommand:
    argv: list[str]  # the config's command, however given (exec, entrypoint + cmd, processes)
    entrypoint: list[str] | None  # init.entrypoint, when given
    cmd: list[str] | None  # init.cmd, when given


def command(image: ImageConfig, machine: MachineCommand) -> list[str]:
    if machine.argv and machine.entrypoint is None and machine.cmd is None:
        return list(machine.argv)
    entrypoint = machine.entrypoint if machine.entrypoint is not None \
        else (image.config.entrypoint or [])
    if machine.cmd is not None:
        cmd = machine.cmd
    else:
        cmd = (image.config.cmd or []) if machine.entrypoint is None else []
    args = [*entrypoint, *cmd]
    if not args:
        raise BundleError("the image has no entrypoint or cmd and the config gives none")
    return args


def environment(image: ImageConfig, env: dict[str, str]) -> list[str]:
    merged: dict[str, str] = {}
    for item in image.config.env or []:
        key, _, value = item.partition("=")
        merged[key] = value
    for key, value in env.items():
        if key in HOST_DEFAULTS and key in merged:
            continue
        merged[key] = value
    return [f"{key}={value}" for key, value in merged.items()]


def image_user(user: str | None, rootfs: Path) -> tuple[int, int]:
    """``parse_user`` with the image's own ``/etc/passwd`` and ``/etc/group`` (either may be
    missing: a numeric user needs neither)."""
    def read(name: str) -> str:
        with contextlib.suppress(OSError):
            return (rootfs / "etc" / name).read_text()
        return ""

    return parse_user(user, read("passwd"), read("group"))


def parse_user(user: str | None, passwd: str, group: str) -> tuple[int, int]:
    """``uid[:gid]`` or ``name[:group]`` (looked up in the image's files); empty: root."""
    if not user:
        return (0, 0)
    name, _, grp = user.partition(":")

    def lookup(text: str, table: str, field: int) -> int | None:
        if text.isdigit():
            return int(text)
        for line in table.splitlines():
            parts = line.split(":")
            if len(parts) > field and parts[0] == text and parts[field].isdigit():
                return int(parts[field])
        return None

    uid = lookup(name, passwd, 2)
    if uid is None:
        raise BundleError(f"user {name!r} is not in the image's /etc/passwd")
    gid = lookup(grp, group, 2) if grp else None
    if gid is None and not grp:
        for line in passwd.splitlines():
            parts = line.split(":")
            if len(parts) > 3 and parts[2] == str(uid) and parts[3].isdigit():
                gid = int(parts[3])
        gid = gid if gid is not None else 0
    if gid is None:
        raise BundleError(f"group {grp!r} is not in the image's /etc/group")
    return (uid, gid)


def runtime_spec(
    image: ImageConfig, machine: MachineCommand, *, env: dict[str, str], rootfs: str,
    hostname: str, cgroups_path: str | None, user: tuple[int, int],
    binds: list[tuple[str, str]], netns: str | None = None,
    memory: MemoryLimits | None = None,
) -> JsonObject:
    """The bundle's config; ``netns``, a namespace's path, is joined by the runtime itself
    (else the container shares the runtime's own network namespace). ``memory``: the limits
    of the machine's cgroup (``cgroups_path``), which the runtime writes as it joins it."""
    mounts: list[JsonObject] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]},
    ]
    mounts += [{"destination": guest, "type": "bind", "source": host,
                "options": ["rbind", "rw"]} for host, guest in binds]
    linux: JsonObject = {
        "namespaces": [{"type": "mount"}, {"type": "ipc"}, {"type": "uts"},
                       *([{"type": "network", "path": netns}] if netns else [])],
        "maskedPaths": MASKED, "readonlyPaths": READONLY,
    }
    if cgroups_path is not None:
        linux["cgroupsPath"] = cgroups_path
        if memory is not None:
            linux["resources"] = {"memory": memory.resources()}
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False, "user": {"uid": user[0], "gid": user[1]},
            "args": command(image, machine), "env": environment(image, env),
            "cwd": image.config.working_dir or "/",
            "capabilities": {kind: CAPABILITIES for kind in
                             ("bounding", "effective", "permitted")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 4096}],
            "noNewPrivileges": True,
        },
        "root": {"path": rootfs, "readonly": False},
        "hostname": hostname,
        "mounts": mounts,
        "linux": linux,
    }
